/* test_emit_heroes.c — the reduction, transpose and in-place dynamic-update-slice emitters
   (hlojit_impl/emitters/reduction.c, transpose.c, dus.c), JIT'd with backends/cpu/cpu_jit
   and compared against the reference evaluator (hlo_eval_computation on the same fused
   computation and the same inputs). Row normalisations (softmax, layer norm: a reduce
   re-expanded to its input's shape) are tested in test_emit_rownorm.c.

   Harness (eh_*): an HLO text whose last computation is the fused computation (XLA's
   emitter tests look like that) is wrapped into a fusion instruction; a module whose entry
   root is a fusion uses that fusion. Inputs are deterministic pseudo-random (floats in
   [lo, hi), ints in [-8, 8), pred 0/1), outputs start as 0xCD garbage so an unwritten
   element fails. The kernel runs over [0, parallel_n) split into 1, 2 and 7 chunks, run in
   reverse order; every split must give the same bits.

   Tolerances: integers, pred, max/min reductions, column reductions (per column the
   evaluator's order), general reductions (sequential order) and transposes: exact, bit for
   bit (NaN == NaN). Float add reductions over the minor dims use W partial accumulators
   (see reduction.c), so they differ from the evaluator's sequential order by rounding:
   |got - want| <= rtol * |want| + atol with, for inputs in [-1, 1) and K <= 6400,
   f32 rtol 1e-5, atol 5e-4 (the evaluator's own sequential rounding error reaches 2.5e-4
   at K = 4099: partial sums of magnitude ~50, 4099 roundings of up to 2e-6 each, a random
   walk) and f64 rtol 1e-13, atol 5e-13. Ops going through emit_math (exp, log): rtol 2e-6.

   Benchmarks (printed, not asserted): 4096x4096 f32 row sum and column sum (GB/s, one
   thread) and the 4096x4096 f32 transpose against a naive C transpose. */
#include "testutil.h"

#if !__has_include(<llvm-c/Core.h>)
int main(void) { return tu_main_without_llvm(); }
#else
#include "emit_testutil.h"

static etu_env eh;   /* interpreter context, JIT, host target (etu_env_init_host) */

static int eh_setup(void **state) { return etu_env_init_host(&eh); }

static int eh_teardown(void **state) {
  etu_env_free(&eh);
  return 0;
}

/* ---- a fusion from HLO text --------------------------------------------------------------- */

typedef struct eh_case {
  hlo_module *m;
  hlo_instr *fusion;
  const hlo_comp *comp;
  int nparams;
} eh_case;

/* Parses |text|; the fusion is the entry root when that is a fusion, else a new fusion
   instruction calling the entry computation. */
static void eh_parse(eh_case *c, const char *text) {
  memset(c, 0, sizeof *c);
  CHECK_OK(eh.ctx, hlo_parse_module(eh.ctx, text, strlen(text), "test", &c->m));
  hlo_comp *e = c->m->entry;
  c->fusion = e->root->op == HLO_OP_FUSION ? e->root : etu_wrap_comp(c->m, e, "eh");
  c->comp = c->fusion->calls[0];
  c->nparams = c->fusion->noperands;
}

static char *eh_read_corpus(const char *name) {
  const char *dir = getenv("HLOJIT_CORPUS");
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir ? dir : "../shared/hlo-corpus", name);
  char *t = tu_read_file(path, NULL);
  if (!t) {
    snprintf(path, sizeof path, "/work/shared/hlo-corpus/%s", name);
    t = tu_read_file(path, NULL);
  }
  return t;
}

/* ---- compile ------------------------------------------------------------------------------- */

static const hlo_instr *eh_find(const hlo_comp *c, hlo_opcode op) {
  for (int i = 0; i < arrlen(c->instrs); i++)
    if (c->instrs[i]->op == op) return c->instrs[i];
  return NULL;
}

/* Emits |c|'s fusion with the emitter of |kind|; returns the kernel (NULL and *st set on an
   emitter error; test failure on an LLVM error). |ir|: optimised IR (free with LLVMDisposeMessage). */
static etu_kernel_fn eh_compile(eh_case *c, emit_kind kind, emit_kernel *k, hj_status *st,
                                char **ir) {
  char name[64];
  cpu_jit_module m;
  emit_module em;
  etu_jit_begin(&eh, "eh", name, sizeof name, &m, &em);
  hj_status s;
  switch (kind) {
  case EMIT_KIND_REDUCTION:
    s = emit_reduction_fusion(&em, c->fusion, eh_find(c->comp, HLO_OP_REDUCE), name, k);
    break;
  case EMIT_KIND_TRANSPOSE:
    s = emit_transpose_fusion(&em, c->fusion, eh_find(c->comp, HLO_OP_TRANSPOSE), name, k);
    break;
  default:
    s = emit_dus_fusion(&em, c->fusion, hlo_fusion_dus_mask(c->fusion), name, k);
    break;
  }
  emit_module_dispose(&em);
  if (st) *st = s;
  if (s != HJ_OK) {
    if (strstr(hj_ctx_error(eh.ctx), "not built in"))   /* emit_stubs.c's weak definition won */
      fail_msg("emit: %s: the library links a stub instead of the real emitter", hj_ctx_error(eh.ctx));
    if (!st) fail_msg("emit: %s: %s", hj_status_name(s), hj_ctx_error(eh.ctx));
    cpu_jit_module_dispose(&m);
    return NULL;
  }
  return etu_jit_finish(&eh, &m, k->name, ir);
}

/* ---- inputs, running, comparing ------------------------------------------------------------ */

static uint64_t eh_rng = 1;   /* etu_rand01 */

typedef struct eh_inputs {
  hlo_literal *lit[64];
  int n;
} eh_inputs;

static void eh_fill(hlo_literal *l, double lo, double hi) {
  int64_t n = hlo_shape_numel(&l->shape);
  hlo_type t = l->shape.type;
  for (int64_t i = 0; i < n; i++) {
    if (t == HLO_PRED) hlo_store_s64(t, l->data, i, etu_rand01(&eh_rng) < 0.5);
    else if (hlo_type_is_float(t))
      hlo_store_f64(t, l->data, i, lo + (hi - lo) * etu_rand01(&eh_rng));
    else hlo_store_s64(t, l->data, i, (int64_t)(etu_rand01(&eh_rng) * 16) - 8);
  }
}

static void eh_make_inputs(eh_case *c, eh_inputs *in, uint64_t seed, double lo, double hi) {
  eh_rng = seed;
  in->n = c->nparams;
  for (int i = 0; i < in->n; i++) {
    in->lit[i] = hlo_literal_new(eh.ctx, &c->fusion->operands[i]->shape);
    assert_non_null(in->lit[i]);
    eh_fill(in->lit[i], lo, hi);
  }
}

static void eh_free_inputs(eh_inputs *in) {
  for (int i = 0; i < in->n; i++) hlo_literal_free(in->lit[i]);
}

typedef struct eh_outs {
  void *buf[64];
  hlo_shape shape[64];
  int n;
} eh_outs;

static void eh_alloc_outs(eh_case *c, eh_outs *o) {
  const hlo_shape **leaves = NULL;
  hlo_shape_leaves(&c->fusion->shape, &leaves);
  o->n = (int)arrlen(leaves);
  for (int i = 0; i < o->n; i++) {
    o->shape[i] = *leaves[i];
    size_t nb = (size_t)hlo_shape_bytes(leaves[i]);
    o->buf[i] = aligned_alloc(64, (nb + 63) / 64 * 64 + 64);
    memset(o->buf[i], 0xCD, nb);
  }
  arrfree(leaves);
}

static void eh_free_outs(eh_outs *o) {
  for (int i = 0; i < o->n; i++) free(o->buf[i]);
}

/* Runs |fn| over [0, k->parallel_n) in |chunks| chunks, last chunk first. |inplace|: each
   output leaf that is a dynamic-update-slice in place (ir/inplace.c) starts as a copy of the
   input it updates and is passed as both, as the runtime does. */
static void eh_run(etu_kernel_fn fn, const emit_kernel *k, const eh_case *c, eh_inputs *in,
                   eh_outs *o, int chunks, bool inplace) {
  void *bufs[128];
  for (int i = 0; i < in->n; i++) bufs[i] = in->lit[i]->data;
  for (int i = 0; i < o->n; i++) bufs[in->n + i] = o->buf[i];
  hlo_dus_root dr[64];
  int n = inplace ? hlo_fusion_dus_roots(c->fusion, dr, 64) : 0;
  for (int j = 0; j < n; j++) {
    int p = dr[j].param;
    if (p < 0) continue;
    memcpy(o->buf[j], in->lit[p]->data, (size_t)in->lit[p]->nbytes);
    bufs[p] = o->buf[j];
  }
  etu_run_chunks(fn, k->parallel_n, bufs, chunks);
}

typedef struct eh_tol {
  double rtol, atol;
} eh_tol;

static bool eh_close(hlo_type t, const void *got, const void *want, int64_t i, double tol_abs) {
  if (!hlo_type_is_float(t)) return hlo_load_u64(t, got, i) == hlo_load_u64(t, want, i);
  double g = hlo_load_f64(t, got, i), w = hlo_load_f64(t, want, i);
  if (isnan(g) || isnan(w)) return isnan(g) && isnan(w);
  if (tol_abs == 0) return memcmp((const char *)got + i * hlo_type_size(t), (const char *)want + i * hlo_type_size(t),
                                  (size_t)hlo_type_size(t)) == 0;
  if (isinf(w) || isinf(g)) return g == w;
  return fabs(g - w) <= tol_abs;
}

/* Compares every output leaf with the evaluator's; |tol| NULL: bitwise. Returns the max
   abs error seen (floats). */
static double eh_compare(const char *what, eh_outs *o, hlo_literal *want, const eh_tol *tol) {
  hlo_literal *wl[64];
  int nw = 0;
  etu_leaves(want, wl, &nw);
  assert_int_equal(nw, o->n);
  double maxerr = 0;
  for (int k = 0; k < o->n; k++) {
    hlo_type t = o->shape[k].type;
    int64_t n = hlo_shape_numel(&o->shape[k]);
    for (int64_t i = 0; i < n; i++) {
      double w = hlo_type_is_float(t) ? hlo_load_f64(t, wl[k]->data, i) : 0;
      double ta = tol ? tol->atol + tol->rtol * fabs(w) : 0;
      if (tol && ta == 0) ta = 1e-300;
      if (!eh_close(t, o->buf[k], wl[k]->data, i, ta)) {
        if (hlo_type_is_float(t))
          fail_msg("%s: output %d element %ld: got %.9g want %.9g (tol %.3g)", what, k, (long)i,
                   hlo_load_f64(t, o->buf[k], i), w, ta);
        fail_msg("%s: output %d element %ld: got %lld want %lld", what, k, (long)i,
                 (long long)hlo_load_s64(t, o->buf[k], i), (long long)hlo_load_s64(t, wl[k]->data, i));
      }
      if (hlo_type_is_float(t) && !isnan(w) && !isinf(w)) {
        double e = fabs(hlo_load_f64(t, o->buf[k], i) - w);
        if (e > maxerr) maxerr = e;
      }
    }
  }
  return maxerr;
}

/* The whole check: emit, run with 1, 2 and 7 chunks (identical bits), compare with the
   evaluator under |tol| (NULL: exact). Returns false when the emitter said UNSUPPORTED and
   |allow_unsup|. */
static bool eh_check_ex(const char *what, const char *text, emit_kind kind, double lo, double hi,
                        const eh_tol *tol, bool allow_unsup,
                        void (*tweak)(eh_case *, eh_inputs *)) {
  eh_case c;
  eh_parse(&c, text);
  emit_kernel k;
  hj_status st;
  etu_kernel_fn fn = eh_compile(&c, kind, &k, &st, NULL);
  if (!fn) {
    if (allow_unsup && st == HJ_ERR_UNSUPPORTED) {
      print_message("%s: unsupported (%s)\n", what, hj_ctx_error(eh.ctx));
      hlo_module_free(c.m);
      return false;
    }
    fail_msg("%s: emit: %s: %s", what, hj_status_name(st), hj_ctx_error(eh.ctx));
  }
  eh_inputs in;
  eh_make_inputs(&c, &in, 42, lo, hi);
  if (tweak) tweak(&c, &in);
  hlo_literal *want = NULL;
  CHECK_OK(eh.ctx, hlo_eval_computation(eh.ctx, c.comp, in.lit, in.n, &want));
  bool inplace = kind == EMIT_KIND_DUS;
  eh_outs o1, o;
  eh_alloc_outs(&c, &o1);
  eh_run(fn, &k, &c, &in, &o1, 1, inplace);
  double err = eh_compare(what, &o1, want, tol);
  const int splits[] = { 2, 7 };
  for (int s = 0; s < 2; s++) {
    eh_alloc_outs(&c, &o);
    eh_run(fn, &k, &c, &in, &o, splits[s], inplace);
    for (int i = 0; i < o.n; i++)
      if (memcmp(o.buf[i], o1.buf[i], (size_t)hlo_shape_bytes(&o.shape[i])))
        fail_msg("%s: output %d differs between 1 and %d chunks", what, i, splits[s]);
    eh_free_outs(&o);
  }
  const hlo_instr *hero = NULL;
  emit_kind ck = emit_classify(c.fusion, inplace ? hlo_fusion_dus_mask(c.fusion) : 0, &hero);
  print_message("%-44s ok  parallel_n %-7ld max abs err %-9.3g (emit_classify: %s)\n", what,
                (long)k.parallel_n, err, emit_kind_name(ck));
  eh_free_outs(&o1);
  hlo_literal_free(want);
  eh_free_inputs(&in);
  hlo_module_free(c.m);
  return true;
}

static void eh_check(const char *what, const char *text, emit_kind kind, const eh_tol *tol) {
  eh_check_ex(what, text, kind, -1, 1, tol, false, NULL);
}

/* ---- reduction texts ------------------------------------------------------------------------ */

/* A single reduce fusion: |ty|[dims] reduce dimensions={rdims} with reducer |op|. */
static char *eh_reduce_text(const char *ty, const char *dims, const char *out_dims, const char *rdims,
                            const char *op, const char *init) {
  char *s = NULL;
  sb_printf(&s,
            "r {\n  a = %s[] parameter(0)\n  b = %s[] parameter(1)\n  ROOT c = %s[] %s(a, b)\n}\n"
            "fused {\n  x = %s[%s] parameter(0)\n  i = %s[] constant(%s)\n"
            "  ROOT red = %s[%s] reduce(x, i), dimensions={%s}, to_apply=r\n}\n",
            ty, ty, ty, op, ty, dims, ty, init, ty, out_dims, rdims);
  return s;
}

typedef struct eh_red_case {
  const char *ty, *dims, *out_dims, *rdims, *op, *init;
  double rtol;   /* 0: exact */
} eh_red_case;

static void eh_run_reduce_cases(const eh_red_case *cs, int n) {
  for (int i = 0; i < n; i++) {
    char *t = eh_reduce_text(cs[i].ty, cs[i].dims, cs[i].out_dims, cs[i].rdims, cs[i].op, cs[i].init);
    char what[160];
    snprintf(what, sizeof what, "%s %s[%s] dims={%s}", cs[i].op, cs[i].ty, cs[i].dims, cs[i].rdims);
    eh_tol tol = { cs[i].rtol, cs[i].rtol * 50 };
    eh_check(what, t, EMIT_KIND_REDUCTION, cs[i].rtol ? &tol : NULL);
    arrfree(t);
  }
}

/* Row reductions: reduced dims minor-most (lanes for add/max on f32/f64/ints). Float sums:
   inputs in [-1,1), K elements: tolerances at the top of the file. */
static void test_reduce_row(void **state) {
  const eh_red_case cs[] = {
    { "f32", "1000,4099", "1000", "1", "add", "0", 1e-5 },
    { "f32", "3,5,300", "3", "1,2", "add", "0", 1e-5 },
    { "f32", "64,7", "64", "1", "add", "0", 0 },          /* K < W: sequential, exact */
    { "f64", "37,517", "37", "1", "add", "0", 1e-13 },
    { "s32", "64,1000", "64", "1", "add", "0", 0 },
    { "s32", "9,33", "9", "1", "multiply", "1", 0 },
    { "bf16", "16,300", "16", "1", "add", "0", 0 },        /* 16-bit sums: sequential */
    { "f32", "100,1000", "100", "1", "maximum", "-inf", 0 },
    { "f32", "100,1000", "100", "1", "minimum", "inf", 0 },
    { "bf16", "20,555", "20", "1", "maximum", "-inf", 0 },
    { "s32", "50,999", "50", "1", "maximum", "-2147483648", 0 },
    { "s8", "50,999", "50", "1", "add", "0", 0 },
    { "f16", "8,100", "8", "1", "add", "0", 0 },
    { "f32", "16,64", "16", "1", "add", "1.5", 1e-5 },     /* init used once, not per lane */
    { "f32", "16,64", "16", "1", "maximum", "0.25", 0 },
    { "pred", "40,300", "40", "1", "and", "true", 0 },
    { "pred", "40,300", "40", "1", "or", "false", 0 },
    { "u8", "40,300", "40", "1", "maximum", "0", 0 },
    { "s64", "40,300", "40", "1", "add", "0", 0 },
    { "f32", "5,0", "5", "1", "add", "2", 0 },             /* K = 0: the init */
    { "f32", "0,5", "5", "0", "add", "2", 0 },
    { "f32", "0,5", "0", "1", "add", "2", 0 },             /* nothing kept */
  };
  eh_run_reduce_cases(cs, (int)(sizeof cs / sizeof cs[0]));
}

/* Column reductions: kept dims minor; per column the evaluator's order: exact. */
static void test_reduce_column(void **state) {
  const eh_red_case cs[] = {
    { "f32", "1000,700", "700", "0", "add", "0", 0 },
    { "f32", "8,8,1100", "1100", "0,1", "add", "0", 0 },
    { "f32", "30,4,5,6", "5,6", "0,1", "add", "0", 0 },
    { "f64", "300,77", "77", "0", "add", "0", 0 },
    { "s32", "300,77", "77", "0", "add", "0", 0 },
    { "bf16", "300,40", "40", "0", "add", "0", 0 },
    { "f32", "129,1025", "1025", "0", "maximum", "-inf", 0 },
  };
  eh_run_reduce_cases(cs, (int)(sizeof cs / sizeof cs[0]));
}

/* Reduced dims in the middle or mixed: sequential per kept index, exact; all dims: lanes. */
static void test_reduce_middle_and_all(void **state) {
  const eh_red_case cs[] = {
    { "f32", "7,100,128", "100", "0,2", "add", "0", 0 },
    { "f32", "10,20,30", "10,30", "1", "add", "0", 0 },
    { "s32", "10,20,30", "20", "0,2", "add", "0", 0 },
    { "bf16", "6,50,7", "6,7", "1", "add", "0", 0 },
    { "f64", "9,40,11", "9,11", "1", "maximum", "-inf", 0 },
    { "f32", "64,100", "", "0,1", "add", "0", 1e-5 },
    { "f64", "64,100", "", "0,1", "add", "0", 1e-13 },
    { "s32", "64,100", "", "0,1", "add", "0", 0 },
    { "bf16", "64,100", "", "0,1", "maximum", "-inf", 0 },
    { "f32", "5,6", "5,6", "", "add", "0", 0 },
  };
  eh_run_reduce_cases(cs, (int)(sizeof cs / sizeof cs[0]));
}

/* Variadic argmax over the minor dim (value, index), ties to the smaller index: exact. */
static void test_reduce_argmax(void **state) {
  const char *t =
      "argmax {\n"
      "  v0 = f32[] parameter(0)\n  i0 = s32[] parameter(1)\n"
      "  v1 = f32[] parameter(2)\n  i1 = s32[] parameter(3)\n"
      "  gt = pred[] compare(v0, v1), direction=GT\n"
      "  eq = pred[] compare(v0, v1), direction=EQ\n"
      "  lt = pred[] compare(i0, i1), direction=LT\n"
      "  tie = pred[] and(eq, lt)\n"
      "  pick = pred[] or(gt, tie)\n"
      "  v = f32[] select(pick, v0, v1)\n"
      "  i = s32[] select(pick, i0, i1)\n"
      "  ROOT t = (f32[], s32[]) tuple(v, i)\n"
      "}\n"
      "fused {\n"
      "  x = f32[50,333] parameter(0)\n"
      "  io = s32[50,333] iota(), iota_dimension=1\n"
      "  ninf = f32[] constant(-inf)\n  z = s32[] constant(0)\n"
      "  ROOT r = (f32[50], s32[50]) reduce(x, io, ninf, z), dimensions={1}, to_apply=argmax\n"
      "}\n";
  eh_check("argmax f32[50,333] dims={1}", t, EMIT_KIND_REDUCTION, NULL);
  /* column argmax with an epilogue on the index (gte of the variadic reduce) */
  const char *t2 =
      "argmax {\n"
      "  v0 = f32[] parameter(0)\n  i0 = s32[] parameter(1)\n"
      "  v1 = f32[] parameter(2)\n  i1 = s32[] parameter(3)\n"
      "  gt = pred[] compare(v0, v1), direction=GT\n"
      "  v = f32[] select(gt, v0, v1)\n"
      "  i = s32[] select(gt, i0, i1)\n"
      "  ROOT t = (f32[], s32[]) tuple(v, i)\n"
      "}\n"
      "fused {\n"
      "  x = f32[200,37] parameter(0)\n"
      "  io = s32[200,37] iota(), iota_dimension=0\n"
      "  ninf = f32[] constant(-inf)\n  z = s32[] constant(0)\n"
      "  r = (f32[37], s32[37]) reduce(x, io, ninf, z), dimensions={0}, to_apply=argmax\n"
      "  g = s32[37] get-tuple-element(r), index=1\n"
      "  two = s32[] constant(2)\n  b2 = s32[37] broadcast(two), dimensions={}\n"
      "  ROOT m = s32[37] multiply(g, b2)\n"
      "}\n";
  eh_check("argmax column + epilogue on gte", t2, EMIT_KIND_REDUCTION, NULL);
}

/* Epilogue and side outputs written by hand: softmax-style max then exp side output. */
static void test_reduce_epilogue_side_outputs(void **state) {
  const char *t =
      "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\n"
      "fused {\n"
      "  x = f32[33,2050] parameter(0)\n  s = f32[33] parameter(1)\n  z = f32[] constant(0)\n"
      "  n = f32[33,2050] negate(x)\n"
      "  red = f32[33] reduce(n, z), dimensions={1}, to_apply=add\n"
      "  m = f32[33] multiply(red, s)\n"
      "  ab = f32[33,2050] abs(x)\n"
      "  cp = f32[33] copy(s)\n"
      "  ROOT t = (f32[33], f32[33,2050], f32[33], f32[33]) tuple(m, ab, red, cp)\n"
      "}\n";
  eh_tol tol = { 1e-5, 1e-5 };
  eh_check("row: epilogue + input/kept side outputs", t, EMIT_KIND_REDUCTION, &tol);
  const char *t2 =
      "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\n"
      "fused {\n"
      "  x = f32[300,70] parameter(0)\n  z = f32[] constant(0)\n"
      "  red = f32[70] reduce(x, z), dimensions={0}, to_apply=add\n"
      "  ng = f32[70] negate(red)\n"
      "  ab = f32[300,70] abs(x)\n"
      "  ROOT t = (f32[70], f32[300,70]) tuple(ng, ab)\n"
      "}\n";
  eh_check("column: epilogue + input side output", t2, EMIT_KIND_REDUCTION, NULL);
}

/* Every gpu_emitters_reduce_* module of the corpus (XLA's reduction emitter tests). Inputs
   in [0.5, 1.5) so that log() epilogues see positive sums. */
static void test_reduce_corpus(void **state) {
  const char *files[] = {
    "gpu_emitters_reduce_column_mof_heterogeneous_input_shapes.hlo",
    "gpu_emitters_reduce_column_odd_sizes.hlo",
    "gpu_emitters_reduce_column_small.hlo",
    "gpu_emitters_reduce_column_small_f32_8_v2.hlo",
    "gpu_emitters_reduce_column_vectorize_x2_f32.hlo",
    "gpu_emitters_reduce_multirow_f16_v4.hlo",
    "gpu_emitters_reduce_multirow_f32_x8.hlo",
    "gpu_emitters_reduce_row_epilogue.hlo",
    "gpu_emitters_reduce_row_large_to_unit.hlo",
    "gpu_emitters_reduce_row_layout.hlo",
    "gpu_emitters_reduce_row_minor_and_major.hlo",
    "gpu_emitters_reduce_row_mof_epilogue.hlo",
    "gpu_emitters_reduce_row_reduction_groups.hlo",
    "gpu_emitters_reduce_row_side_output.hlo",
    "gpu_emitters_reduce_row_small_s32.hlo",
    "gpu_emitters_reduce_row_variadic_f32.hlo",
  };
  int ran = 0, n = (int)(sizeof files / sizeof files[0]);
  for (int i = 0; i < n; i++) {
    char *t = eh_read_corpus(files[i]);
    if (!t) { print_message("skipped: corpus file %s not found\n", files[i]); continue; }
    eh_tol tol = { 1e-5, 1e-5 };
    ran += eh_check_ex(files[i], t, EMIT_KIND_REDUCTION, 0.5, 1.5, &tol, true, NULL);
    free(t);
  }
  print_message("reduce corpus: %d of %d modules emitted and matched\n", ran, n);
  if (ran == 0) skip();
}

/* Unsupported shapes are refused with a message, not miscompiled. */
static void test_reduce_unsupported(void **state) {
  const char *t =
      "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\n"
      "fused {\n"
      "  x = f32[8,16] parameter(0)\n  z = f32[] constant(0)\n"
      "  r1 = f32[8] reduce(x, z), dimensions={1}, to_apply=add\n"
      "  ROOT r2 = f32[] reduce(r1, z), dimensions={0}, to_apply=add\n"
      "}\n";
  eh_case c;
  eh_parse(&c, t);
  emit_kernel k;
  hj_status st;
  assert_null(eh_compile(&c, EMIT_KIND_REDUCTION, &k, &st, NULL));
  assert_int_equal(st, HJ_ERR_UNSUPPORTED);
  assert_non_null(strstr(hj_ctx_error(eh.ctx), "reduce feeds another reduce"));
  hlo_module_free(c.m);
}

/* Determinism: f32[1000,4099] row sum, 20 runs each with 1, 2 and 7 chunks and with the
   thread pool (4 threads): identical bits every time. */
typedef struct eh_pool_arg { etu_kernel_fn fn; void **bufs; } eh_pool_arg;
static void eh_pool_task(void *user, int64_t b, int64_t e) {
  eh_pool_arg *a = user;
  a->fn(a->bufs, b, e);
}

static void test_reduce_determinism(void **state) {
  char *t = eh_reduce_text("f32", "1000,4099", "1000", "1", "add", "0");
  eh_case c;
  eh_parse(&c, t);
  arrfree(t);
  emit_kernel k;
  etu_kernel_fn fn = eh_compile(&c, EMIT_KIND_REDUCTION, &k, NULL, NULL);
  eh_inputs in;
  eh_make_inputs(&c, &in, 7, -1, 1);
  eh_outs ref, o;
  eh_alloc_outs(&c, &ref);
  eh_run(fn, &k, NULL, &in, &ref, 1, false);
  const int splits[] = { 1, 2, 7 };
  for (int run = 0; run < 20; run++)
    for (int s = 0; s < 3; s++) {
      eh_alloc_outs(&c, &o);
      eh_run(fn, &k, NULL, &in, &o, splits[s], false);
      assert_memory_equal(o.buf[0], ref.buf[0], 1000 * sizeof(float));
      eh_free_outs(&o);
    }
  tp_pool *pool = NULL;
  CHECK_OK(eh.ctx, tp_create(4, &pool));
  for (int run = 0; run < 20; run++) {
    eh_alloc_outs(&c, &o);
    void *bufs[2] = { in.lit[0]->data, o.buf[0] };
    eh_pool_arg a = { fn, bufs };
    tp_parallel_for(pool, k.parallel_n, 1, eh_pool_task, &a);
    assert_memory_equal(o.buf[0], ref.buf[0], 1000 * sizeof(float));
    eh_free_outs(&o);
  }
  tp_destroy(pool);
  print_message("determinism: 20 runs x {1,2,7} chunks + 20 pool runs: identical bits\n");
  eh_free_outs(&ref);
  eh_free_inputs(&in);
  hlo_module_free(c.m);
}

/* ---- transposes ------------------------------------------------------------------------------ */

static void test_transpose_hand(void **state) {
  eh_check("transpose f32[67,45] {1,0}",
           "fused {\n  p = f32[67,45] parameter(0)\n  ROOT t = f32[45,67] transpose(p), dimensions={1,0}\n}\n",
           EMIT_KIND_TRANSPOSE, NULL);
  eh_check("transpose s16[3,40,33,5] {2,0,3,1}",
           "fused {\n  p = s16[3,40,33,5] parameter(0)\n"
           "  ROOT t = s16[33,3,5,40] transpose(p), dimensions={2,0,3,1}\n}\n",
           EMIT_KIND_TRANSPOSE, NULL);
  eh_check("transpose bf16 producer+consumer",
           "fused {\n  p = bf16[70,90] parameter(0)\n  q = bf16[90,70] parameter(1)\n"
           "  n = bf16[70,90] negate(p)\n  t = bf16[90,70] transpose(n), dimensions={1,0}\n"
           "  ROOT a = bf16[90,70] add(t, q)\n}\n",
           EMIT_KIND_TRANSPOSE, NULL);
  /* full 32x32 tiles through the register transpose: s8 (16 lanes), u16, f64 (8 lanes),
     with a producer (values inserted lane by lane) and a side output of the input shape */
  eh_check("transpose s8[100,70] {1,0}",
           "fused {\n  p = s8[100,70] parameter(0)\n  ROOT t = s8[70,100] transpose(p), dimensions={1,0}\n}\n",
           EMIT_KIND_TRANSPOSE, NULL);
  eh_check("transpose u16 [3,64,96] {0,2,1} + producer",
           "fused {\n  p = u16[3,64,96] parameter(0)\n  q = u16[3,64,96] parameter(1)\n"
           "  a = u16[3,64,96] xor(p, q)\n"
           "  ROOT t = u16[3,96,64] transpose(a), dimensions={0,2,1}\n}\n",
           EMIT_KIND_TRANSPOSE, NULL);
  eh_check("transpose f64 [96,64] + side output",
           "fused {\n  p = f64[96,64] parameter(0)\n  n = f64[96,64] negate(p)\n"
           "  t = f64[64,96] transpose(n), dimensions={1,0}\n"
           "  ROOT r = (f64[64,96], f64[96,64], f64[64,96]) tuple(t, n, t)\n}\n",
           EMIT_KIND_TRANSPOSE, NULL);
  /* attention's head split as one multi-output fusion: k moves the minor dim (the hero), q
     and v only permute major dims (rowwise leaves, written by row loops in the same tiles) */
  eh_check("head split k^T, q, -v from f32[64,384]",
           "fused {\n  p = f32[64,384] parameter(0)\n"
           "  sk = f32[64,128] slice(p), slice={[0:64], [128:256]}\n"
           "  rk = f32[64,2,64] reshape(sk)\n"
           "  k = f32[2,64,64] transpose(rk), dimensions={1,2,0}\n"
           "  sq = f32[64,128] slice(p), slice={[0:64], [0:128]}\n"
           "  rq = f32[64,2,64] reshape(sq)\n"
           "  q = f32[2,64,64] transpose(rq), dimensions={1,0,2}\n"
           "  sv = f32[64,128] slice(p), slice={[0:64], [256:384]}\n"
           "  rv = f32[64,2,64] reshape(sv)\n"
           "  tv = f32[2,64,64] transpose(rv), dimensions={1,0,2}\n"
           "  v = f32[2,64,64] negate(tv)\n"
           "  ROOT r = (f32[2,64,64], f32[2,64,64], f32[2,64,64]) tuple(k, q, v)\n}\n",
           EMIT_KIND_TRANSPOSE, NULL);
}

static void test_transpose_corpus(void **state) {
  const char *files[] = {
    "gpu_emitters_transpose_10.hlo",
    "gpu_emitters_transpose_102.hlo",
    "gpu_emitters_transpose_1302.hlo",
    "gpu_emitters_transpose_epilogue.hlo",
    "gpu_emitters_transpose_fused_transpose_021.hlo",
    "gpu_emitters_transpose_partial_tile.hlo",
    "gpu_emitters_transpose_side_outputs.hlo",
    "gpu_emitters_transpose_multiple_roots.hlo",
  };
  int ran = 0, n = (int)(sizeof files / sizeof files[0]);
  for (int i = 0; i < n; i++) {
    char *t = eh_read_corpus(files[i]);
    if (!t) { print_message("skipped: corpus file %s not found\n", files[i]); continue; }
    /* exp/log (fused_transpose_021, side_outputs) go through emit_math: 2e-6 relative */
    eh_tol tol = { 2e-6, 1e-30 };
    bool math = strstr(t, "exponential(") || strstr(t, " log(");
    ran += eh_check_ex(files[i], t, EMIT_KIND_TRANSPOSE, 0.5, 1.5, math ? &tol : NULL, false, NULL);
    free(t);
  }
  print_message("transpose corpus: %d of %d modules matched\n", ran, n);
}

/* ---- dynamic-update-slice in place --------------------------------------------------------------- */

static int64_t eh_starts[8];
static void eh_set_starts(eh_case *c, eh_inputs *in) {
  /* parameters 2.. are the scalar starts of the hand-written cases */
  for (int i = 2; i < in->n; i++) hlo_store_s64(in->lit[i]->shape.type, in->lit[i]->data, 0, eh_starts[i - 2]);
}

static void eh_dus_case(const char *ty, const char *st, int64_t s0, int64_t s1, int64_t s2) {
  char *t = NULL;
  sb_printf(&t,
            "fused {\n  op = %s[10,16,8] parameter(0)\n  up = %s[2,4,8] parameter(1)\n"
            "  i0 = %s[] parameter(2)\n  i1 = %s[] parameter(3)\n  i2 = %s[] parameter(4)\n"
            "  ng = %s[2,4,8] negate(up)\n"
            "  ROOT d = %s[10,16,8] dynamic-update-slice(op, ng, i0, i1, i2)\n}\n",
            ty, ty, st, st, st, ty, ty);
  eh_starts[0] = s0, eh_starts[1] = s1, eh_starts[2] = s2;
  char what[128];
  snprintf(what, sizeof what, "dus %s starts %s (%lld,%lld,%lld)", ty, st, (long long)s0, (long long)s1, (long long)s2);
  eh_check_ex(what, t, EMIT_KIND_DUS, -1, 1, NULL, false, eh_set_starts);
  arrfree(t);
}

static void test_dus_inplace(void **state) {
  eh_dus_case("f32", "s32", 3, 5, 0);
  eh_dus_case("f32", "s32", 9, -3, 0);       /* clamped to (8, 0, 0) */
  eh_dus_case("bf16", "s64", 100, 100, 100); /* clamped to (8, 12, 0) */
  eh_dus_case("s32", "u32", 1, 12, 7);       /* clamped to (1, 12, 0) */
  /* KV cache of GPT-2 decode: f32[12,64,32] cache, one position */
  const int64_t ts[] = { 5, 63, 200 };
  for (int i = 0; i < 3; i++) {
    eh_starts[0] = 0, eh_starts[1] = ts[i], eh_starts[2] = 0;
    char what[64];
    snprintf(what, sizeof what, "kv cache t=%lld", (long long)ts[i]);
    eh_check_ex(what,
                "fused {\n  c = f32[12,64,32] parameter(0)\n  u = f32[12,1,32] parameter(1)\n"
                "  a = s32[] parameter(2)\n  b = s32[] parameter(3)\n  d = s32[] parameter(4)\n"
                "  ROOT r = f32[12,64,32] dynamic-update-slice(c, u, a, b, d)\n}\n",
                EMIT_KIND_DUS, -1, 1, NULL, false, eh_set_starts);
  }
}

static void eh_dus_corpus_starts(eh_case *c, eh_inputs *in) {
  for (int i = 0; i < in->n; i++)   /* s32 scalar parameters (the selector): 0 and 1 */
    if (in->lit[i]->shape.rank == 0 && in->lit[i]->shape.type == HLO_S32)
      hlo_store_s64(HLO_S32, in->lit[i]->data, 0, 0);
}

static void test_dus_corpus(void **state) {
  char *t = eh_read_corpus("gpu_tests_dus_inplace_bitcast_both_ways_bf16.hlo");
  if (!t) skip();
  eh_check_ex("dus_inplace_bitcast_both_ways_bf16", t, EMIT_KIND_DUS, -1, 1, NULL, false, eh_dus_corpus_starts);
  free(t);
  /* two in-place roots (XLA's MultipleInplaceDus): outputs 0 and 1 over operands 0 and 2 */
  t = eh_read_corpus("gpu_tests_dus_inplace_multiple_roots_bf16.hlo");
  if (t) {
    eh_check_ex("dus_inplace_multiple_roots_bf16", t, EMIT_KIND_DUS, -1, 1, NULL, false, eh_dus_corpus_starts);
    free(t);
  }
}

static void eh_scalar_starts(eh_case *c, eh_inputs *in) {
  for (int i = 0; i < in->n; i++)   /* every s32 scalar parameter: eh_starts[0] */
    if (in->lit[i]->shape.rank == 0 && in->lit[i]->shape.type == HLO_S32)
      hlo_store_s64(HLO_S32, in->lit[i]->data, 0, eh_starts[0]);
}

/* A decode step's sibling fusion: the query slice, and the k and v cache updates (the k
   cache transposed, [heads, hd, T]) at position |t|, all from one qkv row; and the same
   with a leaf larger than the updates (written whole, so the kernel's range is its size). */
static void test_dus_siblings(void **state) {
  const int64_t ts[] = { 0, 37, 63, 99 };   /* 99: clamped to 63 */
  for (int i = 0; i < 4; i++) {
    eh_starts[0] = ts[i];
    char what[64];
    snprintf(what, sizeof what, "q + k,v cache updates t=%lld", (long long)ts[i]);
    eh_check_ex(what,
                "fused {\n  qkv = f32[1,96] parameter(0)\n  kc = f32[4,8,64] parameter(1)\n"
                "  vc = f32[4,64,8] parameter(2)\n  t = s32[] parameter(3)\n  z = s32[] constant(0)\n"
                "  q = f32[1,32] slice(qkv), slice={[0:1], [0:32]}\n"
                "  ks = f32[1,32] slice(qkv), slice={[0:1], [32:64]}\n"
                "  k = f32[4,8,1] reshape(ks)\n"
                "  vs = f32[1,32] slice(qkv), slice={[0:1], [64:96]}\n"
                "  v = f32[4,1,8] reshape(vs)\n  nv = f32[4,1,8] negate(v)\n"
                "  dk = f32[4,8,64] dynamic-update-slice(kc, k, z, z, t)\n"
                "  dv = f32[4,64,8] dynamic-update-slice(vc, nv, z, t, z)\n"
                "  ROOT r = (f32[1,32], f32[4,8,64], f32[4,64,8]) tuple(q, dk, dv)\n}\n",
                EMIT_KIND_DUS, -1, 1, NULL, false, eh_scalar_starts);
  }
  eh_starts[0] = 5;
  eh_check_ex("dus beside a larger leaf",
              "fused {\n  x = f32[300,7] parameter(0)\n  c = f32[16,7] parameter(1)\n"
              "  t = s32[] parameter(2)\n  z = s32[] constant(0)\n"
              "  row = f32[1,7] slice(x), slice={[3:4], [0:7]}\n"
              "  d = f32[16,7] dynamic-update-slice(c, row, t, z)\n"
              "  e = f32[300,7] exponential(x)\n"
              "  ROOT r = (f32[300,7], f32[16,7]) tuple(e, d)\n}\n",
              EMIT_KIND_DUS, -1, 1, &(eh_tol){ 2e-6, 1e-30 }, false, eh_scalar_starts);
}

/* ---- throughput ------------------------------------------------------------------------------------ */

static void eh_naive_transpose(const float *restrict in, float *restrict out, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) out[i * n + j] = in[j * n + i];
}

static void test_bench(void **state) {
  const int64_t N = 4096;
  const double bytes = (double)N * N * 4;
  const char *texts[2] = {
    "r {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\n"
    "fused {\n  x = f32[4096,4096] parameter(0)\n  z = f32[] constant(0)\n"
    "  ROOT s = f32[4096] reduce(x, z), dimensions={1}, to_apply=r\n}\n",
    "r {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\n"
    "fused {\n  x = f32[4096,4096] parameter(0)\n  z = f32[] constant(0)\n"
    "  ROOT s = f32[4096] reduce(x, z), dimensions={0}, to_apply=r\n}\n",
  };
  float *x = aligned_alloc(64, (size_t)bytes), *y = aligned_alloc(64, (size_t)bytes);
  for (int64_t i = 0; i < N * N; i++) x[i] = (float)(i % 1000) * 1e-3f;
  float *s = aligned_alloc(64, N * 4);
  for (int v = 0; v < 2; v++) {
    eh_case c;
    eh_parse(&c, texts[v]);
    emit_kernel k;
    char *ir = NULL;
    etu_kernel_fn fn = eh_compile(&c, EMIT_KIND_REDUCTION, &k, NULL, &ir);
    void *bufs[2] = { x, s };
    double t = etu_best_time(fn, k.parallel_n, bufs, 5);
    bool vec = strstr(ir, "<16 x float>") || strstr(ir, "<8 x float>") || strstr(ir, "<4 x float>");
    print_message("bench: 4096x4096 f32 %s sum: %.2f ms, %.1f GB/s (1 thread)%s\n", v ? "column" : "row",
                  t * 1e3, bytes / t * 1e-9, vec ? ", vectorised" : ", NOT vectorised");
    LLVMDisposeMessage(ir);
    hlo_module_free(c.m);
  }
  eh_case c;
  eh_parse(&c, "fused {\n  p = f32[4096,4096] parameter(0)\n"
               "  ROOT t = f32[4096,4096] transpose(p), dimensions={1,0}\n}\n");
  emit_kernel k;
  etu_kernel_fn fn = eh_compile(&c, EMIT_KIND_TRANSPOSE, &k, NULL, NULL);
  void *bufs[2] = { x, y };
  double tj = etu_best_time(fn, k.parallel_n, bufs, 5), tn = 1e30;
  for (int r = 0; r < 3; r++) {
    double t0 = etu_now();
    eh_naive_transpose(x, y, N);
    double t = etu_now() - t0;
    if (t < tn) tn = t;
  }
  assert_true(y[1 * N + 2] == x[2 * N + 1]);
  print_message("bench: 4096x4096 f32 transpose: hlojit %.2f ms (%.1f GB/s r+w), naive C %.2f ms (%.1f GB/s): %.2fx\n",
                tj * 1e3, 2 * bytes / tj * 1e-9, tn * 1e3, 2 * bytes / tn * 1e-9, tn / tj);
  hlo_module_free(c.m);
  free(x);
  free(y);
  free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_reduce_row),
    cmocka_unit_test(test_reduce_column),
    cmocka_unit_test(test_reduce_middle_and_all),
    cmocka_unit_test(test_reduce_argmax),
    cmocka_unit_test(test_reduce_epilogue_side_outputs),
    cmocka_unit_test(test_reduce_corpus),
    cmocka_unit_test(test_reduce_unsupported),
    cmocka_unit_test(test_reduce_determinism),
    cmocka_unit_test(test_transpose_hand),
    cmocka_unit_test(test_transpose_corpus),
    cmocka_unit_test(test_dus_inplace),
    cmocka_unit_test(test_dus_siblings),
    cmocka_unit_test(test_dus_corpus),
    cmocka_unit_test(test_bench),
  };
  return cmocka_run_group_tests(tests, eh_setup, eh_teardown);
}
#endif
