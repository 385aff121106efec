/* test_emit_partition.c — the computation partitioner (passes/fusion_split.c) against
   exponential elemental emission (issue 3).

   Modules whose every op the fusion pass puts into one loop fusion, and in which each
   level reads the previous one at two different index maps:
     slice chain    x_{k+1} = add(slice(x_k, [0:n-1]), slice(x_k, [1:n]))
     reverse chain  x_{k+1} = multiply(x_k, reverse(x_k)) + x_k
     reshape chain  x_{k+1} = add(x_k, reshape(reverse(reshape(x_k) to [32,32], rows)))
   and one that must NOT be split: a broadcast diamond, x_{k+1} = x_k * broadcast(row 0 of
   x_k), reads x_k at (i, j) and (0, j) only — broadcast, trivial reshapes and a slice at
   0 pass index values through, so the emitter's cache already keeps it linear.
   Without the partitioner level 0 is emitted 2^L times per output element (measured
   before the pass existed: slice chain emission 25 ms at L = 10, 0.65 s at 12, 14 s at
   14). With it: each fusion evaluates every instruction at <= 8 index tuples, emission
   and compile time grow linearly with L (the test prints the table and asserts a bound
   of 2 s for the whole compile at L = 20, orders of magnitude below the exponential),
   and the CPU backend's results equal the evaluator's on the unoptimised module bit for
   bit (the same float ops in the same order: only where values live changes). Also: the
   pass leaves ordinary fusions (softmax, GELU, a stencil of 3 taps) alone; those are
   compared within 5e-7 relative (exp and tanh are within 3.5 ulps,
   emit_math.c; one or two of them per element here). */
#include "testutil.h"
#include <math.h>

static hj_ctx_t *tp_interp, *tp_cpu;

typedef enum { TP_SLICE, TP_REVERSE, TP_RESHAPE, TP_BCAST } tp_kind;

/* The chain module of |kind| with |L| levels (malloc'd text). */
static char *tp_chain(tp_kind kind, int L) {
  char *t = NULL;
  int n = kind == TP_SLICE ? 1024 + L : 1024;
  if (kind == TP_BCAST)   /* written as a fusion: the fusion pass would not fuse it */
    sb_printf(&t, "HloModule chain_%d_%d\nfused {\n  x0 = f32[32,32] parameter(0)\n", (int)kind, L);
  else sb_printf(&t, "HloModule chain_%d_%d\nENTRY main {\n  x0 = f32[%d] parameter(0)\n", (int)kind, L, n);
  for (int k = 0; k < L; k++) {
    const char *root = k == L - 1 ? "ROOT " : "";
    if (kind == TP_SLICE) {
      int m = n - k;
      sb_printf(&t, "  a%d = f32[%d] slice(x%d), slice={[0:%d]}\n  b%d = f32[%d] slice(x%d), slice={[1:%d]}\n"
                "  %sx%d = f32[%d] add(a%d, b%d)\n", k, m - 1, k, m - 1, k, m - 1, k, m, root, k + 1, m - 1, k, k);
    } else if (kind == TP_REVERSE) {
      sb_printf(&t, "  r%d = f32[%d] reverse(x%d), dimensions={0}\n  m%d = f32[%d] multiply(x%d, r%d)\n"
                "  %sx%d = f32[%d] add(m%d, x%d)\n", k, n, k, k, n, k, k, root, k + 1, n, k, k);
    } else if (kind == TP_BCAST) {
      sb_printf(&t, "  s%d = f32[1,32] slice(x%d), slice={[0:1], [0:32]}\n  r%d = f32[32] reshape(s%d)\n"
                "  b%d = f32[32,32] broadcast(r%d), dimensions={1}\n  %sx%d = f32[32,32] multiply(x%d, b%d)\n",
                k, k, k, k, k, k, root, k + 1, k, k);
    } else {
      sb_printf(&t, "  s%d = f32[32,32] reshape(x%d)\n  t%d = f32[32,32] reverse(s%d), dimensions={0}\n"
                "  u%d = f32[%d] reshape(t%d)\n  %sx%d = f32[%d] add(x%d, u%d)\n",
                k, k, k, k, k, n, k, root, k + 1, n, k, k);
    }
  }
  sb_printf(&t, "}\n");
  if (kind == TP_BCAST)
    sb_printf(&t, "ENTRY main {\n  p = f32[32,32] parameter(0)\n"
              "  ROOT f = f32[32,32] fusion(p), kind=kLoop, calls=fused\n}\n");
  char *out = strdup(t);
  arrfree(t);
  return out;
}

static hlo_module *tp_parse(const char *text) {
  hlo_module *m = NULL;
  CHECK_OK(tp_interp, hlo_parse_module(tp_interp, text, strlen(text), "partition", &m));
  return m;
}

/* Inputs in [0.5, 1.5) (the chains stay finite), deterministic. */
static hlo_literal *tp_input(const hlo_shape *s, uint64_t seed) {
  hlo_literal *l = hlo_literal_new(tp_interp, s);
  int64_t n = hlo_shape_numel(s);
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    hlo_store_f64(s->type, l->data, i, 0.5 + (double)(seed >> 11) / 9007199254740992.0);
  }
  return l;
}

/* Compiles |m| on the CPU backend, runs it, compares bitwise with the evaluator on |m|;
   returns the stats. */
static hj_exec_stats_t tp_run_cpu(hlo_module *m, bool bitwise) {
  hj_exec_t *e = NULL;
  CHECK_OK(tp_cpu, hj_compile_module(tp_cpu, m, &e));
  hj_exec_stats_t s;
  CHECK_OK(tp_cpu, hj_exec_stats(e, &s));
  assert_int_equal(s.evaluator_fallbacks, 0);
  const hlo_shape *ps = &m->entry->params[0]->shape;
  hlo_literal *in = tp_input(ps, 7), *want = NULL;
  CHECK_OK(tp_interp, hlo_eval_module(tp_interp, m, &in, 1, &want));
  hj_buffer_t *bin = NULL, *bout = NULL;
  hj_shape_t hs = { .rank = ps->rank };
  for (int d = 0; d < ps->rank; d++) hs.dims[d] = ps->dims[d];
  CHECK_OK(tp_cpu, hj_buffer_from_host(tp_cpu, HJ_F32, hs, in->data, &bin));
  CHECK_OK(tp_cpu, hj_exec_run(e, &bin, 1, &bout, 1));
  assert_int_equal((int64_t)hj_buffer_nbytes(bout), want->nbytes);
  if (memcmp(hj_buffer_host_ptr(bout), want->data, (size_t)want->nbytes) != 0) {
    const float *a = hj_buffer_host_ptr(bout), *b = (const float *)want->data;
    for (int64_t i = 0; i < want->nbytes / 4; i++)   /* else: exp/tanh, within 3.5 ulps */
      if (bitwise ? memcmp(&a[i], &b[i], 4) != 0 : !(fabsf(a[i] - b[i]) <= 5e-7f * fabsf(b[i]) + 1e-30f))
        fail_msg("%s: element %lld: CPU %.9g, evaluator %.9g", m->name, (long long)i, a[i], b[i]);
  }
  hj_buffer_destroy(bin);
  hj_buffer_destroy(bout);
  hlo_literal_free(in);
  hlo_literal_free(want);
  hj_exec_destroy(e);
  return s;
}

/* The pipeline then the partitioner, as the CPU backend runs them; checks that every
   fusion evaluates each instruction at <= 8 index tuples and that the module computes
   the same bits. Returns the number of fusions. */
static int tp_max_tuples;   /* over the fusions of the last tp_split_checked */

static int tp_split_checked(hlo_module *orig, bool *changed) {
  hlo_module *m = hlo_module_clone(orig);
  hlo_pass_ctx pc;
  rt_pass_ctx_init(&pc, tp_interp);
  pc.dump_dir = NULL;
  CHECK_OK(tp_interp, hlo_run_pipeline(&pc, m, NULL));
  CHECK_OK(tp_interp, hlo_pass_fusion_split(NULL, m, changed));
  CHECK_OK(tp_interp, hlo_verify_module(m));
  int nf = 0;
  tp_max_tuples = 0;
  for (ptrdiff_t i = 0; i < arrlen(m->entry->instrs); i++) {
    const hlo_instr *f = m->entry->instrs[i];
    if (f->op != HLO_OP_FUSION) continue;
    nf++;
    int k = hlo_fusion_index_tuples(f->calls[0]);
    if (k > tp_max_tuples) tp_max_tuples = k;
    if (k > 8) fail_msg("%s: fusion '%s' still evaluates an instruction at %d index tuples", m->name, f->name, k);
  }
  hlo_literal *in = tp_input(&orig->entry->params[0]->shape, 3), *a = NULL, *b = NULL;
  CHECK_OK(tp_interp, hlo_eval_module(tp_interp, orig, &in, 1, &a));
  CHECK_OK(tp_interp, hlo_eval_module(tp_interp, m, &in, 1, &b));
  assert_true(hlo_literal_equal(a, b));
  hlo_literal_free(in);
  hlo_literal_free(a);
  hlo_literal_free(b);
  hlo_module_free(m);
  return nf;
}

static void tp_chain_test(tp_kind kind, const char *what) {
  static const int Ls[] = { 4, 8, 12, 16, 20 };
  double emit[5] = { 0 }, total[5] = { 0 };
  printf("  %s chain: L, fusions after the split, most index tuples of one instruction, kernels, "
         "emission ms, compile ms\n", what);
  for (int q = 0; q < 5; q++) {
    char *text = tp_chain(kind, Ls[q]);
    hlo_module *m = tp_parse(text);
    free(text);
    bool ch = false;
    int nf = tp_split_checked(m, &ch);
    hj_exec_stats_t s = tp_run_cpu(m, true);
    emit[q] = s.emit_ms;
    total[q] = s.compile_ms;
    printf("    %2d  %2d  %2d  %2d  %7.2f  %7.1f\n", Ls[q], nf, tp_max_tuples, s.kernels_loop, s.emit_ms, s.compile_ms);
    if (kind == TP_BCAST) {   /* x_k at (i, j) and (0, j) only */
      assert_false(ch);
      assert_int_equal(tp_max_tuples, 2);
    }
    else if (Ls[q] >= 8) assert_true(ch);     /* 2^3 = 8 tuples still fit one fusion */
    hlo_module_free(m);
  }
  /* exponential emission would be 2^16 times L = 4's at L = 20 */
  assert_true(total[4] < 2000.0);
  assert_true(emit[4] < 200.0 + 20 * emit[0]);
}

static void test_slice_chain(void **state) { tp_chain_test(TP_SLICE, "slice"); }
static void test_reverse_chain(void **state) { tp_chain_test(TP_REVERSE, "reverse"); }
static void test_reshape_reverse_chain(void **state) { tp_chain_test(TP_RESHAPE, "reshape/reverse"); }
static void test_broadcast_diamond_chain(void **state) { tp_chain_test(TP_BCAST, "broadcast diamond"); }

/* Fusions with diamonds at one index map (softmax, GELU) or a few (a 3-tap stencil)
   stay whole. */
static void test_ordinary_fusions_stay(void **state) {
  static const char *mods[] = {
    "HloModule softmax\nmax_f {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT m = f32[] maximum(a, b)\n}\n"
    "add_f {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
    "ENTRY main {\n  x = f32[8,64] parameter(0)\n  ni = f32[] constant(-inf)\n  z = f32[] constant(0)\n"
    "  mx = f32[8] reduce(x, ni), dimensions={1}, to_apply=max_f\n  mb = f32[8,64] broadcast(mx), dimensions={0}\n"
    "  d = f32[8,64] subtract(x, mb)\n  e = f32[8,64] exponential(d)\n"
    "  s = f32[8] reduce(e, z), dimensions={1}, to_apply=add_f\n  sb = f32[8,64] broadcast(s), dimensions={0}\n"
    "  ROOT r = f32[8,64] divide(e, sb)\n}\n",
    "HloModule gelu\nENTRY main {\n  x = f32[512] parameter(0)\n  h = f32[] constant(0.5)\n  hb = f32[512] broadcast(h), dimensions={}\n"
    "  c = f32[] constant(0.044715)\n  cb = f32[512] broadcast(c), dimensions={}\n  k = f32[] constant(0.7978845608)\n"
    "  kb = f32[512] broadcast(k), dimensions={}\n  one = f32[] constant(1)\n  ob = f32[512] broadcast(one), dimensions={}\n"
    "  x2 = f32[512] multiply(x, x)\n  x3 = f32[512] multiply(x2, x)\n  t = f32[512] multiply(cb, x3)\n"
    "  u = f32[512] add(x, t)\n  v = f32[512] multiply(kb, u)\n  w = f32[512] tanh(v)\n  y = f32[512] add(ob, w)\n"
    "  hx = f32[512] multiply(hb, x)\n  ROOT r = f32[512] multiply(hx, y)\n}\n",
    "HloModule stencil\nENTRY main {\n  x = f32[258] parameter(0)\n  e = f32[258] exponential(x)\n"
    "  a = f32[256] slice(e), slice={[0:256]}\n  b = f32[256] slice(e), slice={[1:257]}\n  c = f32[256] slice(e), slice={[2:258]}\n"
    "  ab = f32[256] add(a, b)\n  ROOT r = f32[256] add(ab, c)\n}\n",
  };
  for (int i = 0; i < 3; i++) {
    hlo_module *m = tp_parse(mods[i]);
    bool ch = true;
    tp_split_checked(m, &ch);
    if (ch) fail_msg("%s: the partitioner split a fusion it should leave whole", m->name);
    tp_run_cpu(m, false);
    hlo_module_free(m);
  }
}

int main(void) {
  tp_interp = tu_ctx();
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  o.backend = HJ_BACKEND_CPU;
  if (hj_ctx_create(&o, &tp_cpu) != HJ_OK) return 1;
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_slice_chain),
    cmocka_unit_test(test_reverse_chain),
    cmocka_unit_test(test_reshape_reverse_chain),
    cmocka_unit_test(test_broadcast_diamond_chain),
    cmocka_unit_test(test_ordinary_fusions_stay),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  hj_ctx_destroy(tp_cpu);
  hj_ctx_destroy(tp_interp);
  return rc;
}
