/* test_cpu_backend.c — the CPU backend's pipeline and runtime: ir_clone, inline_calls,
   wrap_fusions, buffer assignment, and whole modules compiled with HJ_BACKEND_CPU and
   compared with the reference evaluator (the oracle) and with JAX's own outputs.

   Tolerances (CPU vs evaluator and vs JAX): integers and pred exact; floats
   |got - want| <= rtol*|want| + atol with rtol 1e-5 / atol 1e-6 for f32/f64 (the JAX
   fixtures' test), widened to rtol 1e-4 + 1e-5*max|want| where a kernel sums in another
   order (reductions, dots) — stated per check below; f16/bf16 rtol 2^-7; NaN where the
   reference has NaN. Fusions run by the evaluator fallback must give the same bits.
   Determinism: a reduction-heavy module run 20 times with 1 and with 2 threads must give
   one set of bits. The first whole-module test prints the compile latency. */
#include "testutil.h"
#include "hlojit_impl/emitters/emit.h"
#include <dirent.h>
#include <math.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------------------------ */

static hj_ctx_t *cb_ctx(hj_backend_t b, int threads, const char *dump) {
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  o.backend = b;
  o.num_threads = threads;
  o.dump_dir = dump;
  hj_ctx_t *ctx = NULL;
  if (hj_ctx_create(&o, &ctx) != HJ_OK) fail_msg("hj_ctx_create failed");
  return ctx;
}

static hlo_module *cb_parse(hj_ctx_t *ctx, const char *text) {
  hj_module_t *m = NULL;
  CHECK_OK(ctx, hj_module_parse(ctx, text, strlen(text), "test", &m));
  return m;
}

static char *cb_print(const hlo_module *m) {
  char *t = NULL;
  CHECK_OK(m->ctx, hlo_print_module(m, &t));
  return t;
}

static double cb_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Deterministic inputs: floats in [-1, 1), ints in [-8, 8) / [0, 16), pred 0/1. */
static hj_buffer_t **cb_inputs(hj_ctx_t *ctx, const hj_module_t *m, uint64_t seed) {
  int n = hj_module_num_inputs(m);
  hj_buffer_t **in = calloc((size_t)n + 1, sizeof *in);
  for (int i = 0; i < n; i++) {
    hj_dtype_t t;
    hj_shape_t s;
    CHECK_OK(ctx, hj_module_input(m, i, &t, &s));
    for (int d = 0; d < s.rank; d++) s.dims[d] = llabs(s.dims[d]);
    CHECK_OK(ctx, hj_buffer_create(ctx, t, s, &in[i]));
    uint8_t *p = hj_buffer_host_ptr(in[i]);
    uint64_t st = seed * 0x9e3779b97f4a7c15ull + (uint64_t)i * 0xd1b54a32d192ed03ull + 1;
    for (int64_t k = 0; k < hj_shape_numel(s); k++) {
      st ^= st << 13; st ^= st >> 7; st ^= st << 17;
      double f = (double)(st >> 11) / 9007199254740992.0 * 2 - 1;
      int64_t v = (int64_t)(st >> 60) - (hlo_type_class_of((hlo_type)t) == HLO_CLASS_SINT ? 8 : 0);
      if (t == HJ_PRED) v = (int64_t)(st >> 63);
      if (hlo_type_is_float((hlo_type)t)) hlo_store_f64((hlo_type)t, p, k, f);
      else hlo_store_s64((hlo_type)t, p, k, v);
    }
  }
  return in;
}

static void cb_free_bufs(hj_buffer_t **b, int n) {
  for (int i = 0; b && i < n; i++) hj_buffer_destroy(b[i]);
  free(b);
}

/* Runs |m| compiled in |ctx| on |in|; returns the new output buffers. */
static hj_buffer_t **cb_run(hj_ctx_t *ctx, hj_module_t *m, hj_buffer_t **in, hj_exec_stats_t *stats) {
  hj_exec_t *e = NULL;
  CHECK_OK(ctx, hj_compile_module(ctx, m, &e));
  int nout = hj_exec_num_outputs(e);
  hj_buffer_t **out = calloc((size_t)nout + 1, sizeof *out);
  CHECK_OK(ctx, hj_exec_run(e, in, hj_exec_num_inputs(e), out, nout));
  if (stats) CHECK_OK(ctx, hj_exec_stats(e, stats));
  hj_exec_destroy(e);
  return out;
}

/* |got| against |want|: exact for ints/pred; floats within rtol*|w| + atol + rel_max*max|w|. */
static bool cb_close(const hj_buffer_t *got, const hj_buffer_t *want, double rtol, double atol,
                     double rel_max, char *why, size_t nwhy) {
  hlo_type t = (hlo_type)hj_buffer_dtype(want);
  if (hj_buffer_nbytes(got) != hj_buffer_nbytes(want) || hj_buffer_dtype(got) != hj_buffer_dtype(want)) {
    snprintf(why, nwhy, "dtype/size differ");
    return false;
  }
  const void *g = hj_buffer_host_ptr((hj_buffer_t *)got), *w = hj_buffer_host_ptr((hj_buffer_t *)want);
  int64_t n = (int64_t)hj_buffer_nbytes(want) / (hlo_type_size(t) ? hlo_type_size(t) : 1);
  if (!hlo_type_is_float(t)) {
    bool same = memcmp(g, w, hj_buffer_nbytes(want)) == 0;
    if (!same) snprintf(why, nwhy, "integer/pred elements differ");
    return same;
  }
  if (t == HLO_F16 || t == HLO_BF16) rtol = rtol > 0.0078125 ? rtol : 0.0078125;
  double mx = 0, worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double b = hlo_load_f64(t, w, i);
    if (isfinite(b) && fabs(b) > mx) mx = fabs(b);
  }
  for (int64_t i = 0; i < n; i++) {
    double a = hlo_load_f64(t, g, i), b = hlo_load_f64(t, w, i);
    if (isnan(b) || isnan(a)) {
      if (isnan(a) != isnan(b)) { snprintf(why, nwhy, "NaN at %lld differs", (long long)i); return false; }
      continue;
    }
    if (isinf(b) || isinf(a)) {
      if (a != b) { snprintf(why, nwhy, "inf at %lld: %g vs %g", (long long)i, a, b); return false; }
      continue;
    }
    double err = fabs(a - b), tol = rtol * fabs(b) + atol + rel_max * mx;
    if (err > worst) worst = err;
    if (err > tol) {
      snprintf(why, nwhy, "element %lld: %.9g vs %.9g (err %.3g > tol %.3g)", (long long)i, a, b, err, tol);
      return false;
    }
  }
  snprintf(why, nwhy, "max abs err %.3g", worst);
  return true;
}

/* ---- ir_clone ------------------------------------------------------------------------------- */

static const char *cb_corpus_dir(void) {
  const char *d = getenv("HLOJIT_CORPUS");
  static char buf[1024];
  if (d) return d;
  snprintf(buf, sizeof buf, "%s/../../shared/hlo-corpus", tu_data_dir());
  struct stat st;
  if (stat(buf, &st) == 0) return buf;
  return "../shared/hlo-corpus";
}

/* Every .hlo file of |dir| (sorted), as malloc'd paths in an stb_ds array. */
static char **cb_list(const char *dir) {
  char **v = NULL;
  DIR *d = opendir(dir);
  if (!d) return NULL;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t n = strlen(e->d_name);
    if (n < 5 || strcmp(e->d_name + n - 4, ".hlo")) continue;
    char *p = malloc(strlen(dir) + n + 2);
    sprintf(p, "%s/%s", dir, e->d_name);
    arrput(v, p);
  }
  closedir(d);
  for (ptrdiff_t i = 0; i < arrlen(v); i++)
    for (ptrdiff_t k = i + 1; k < arrlen(v); k++)
      if (strcmp(v[k], v[i]) < 0) { char *t = v[i]; v[i] = v[k]; v[k] = t; }
  return v;
}

static void cb_free_list(char **v) {
  for (ptrdiff_t i = 0; i < arrlen(v); i++) free(v[i]);
  arrfree(v);
}

static void test_clone_prints_the_same(void **state) {
  hj_ctx_t *ctx = tu_ctx();
  char jax[1024];
  snprintf(jax, sizeof jax, "%s/fixtures/jax", tu_data_dir());
  const char *dirs[] = { cb_corpus_dir(), jax };
  int n = 0;
  for (int d = 0; d < 2; d++) {
    char **files = cb_list(dirs[d]);
    for (ptrdiff_t i = 0; i < arrlen(files); i++) {
      hj_module_t *m = NULL;
      if (hj_module_parse_file(ctx, files[i], &m) != HJ_OK) continue;
      char *a = cb_print(m);
      hlo_module *c = hlo_module_clone(m);
      assert_non_null(c);
      hj_module_destroy(m);                       /* the clone must not share anything */
      char *b = cb_print(c);
      if (strcmp(a, b)) fail_msg("clone of %s prints differently", files[i]);
      CHECK_OK(ctx, hlo_verify_module(c));
      free(a);
      free(b);
      hlo_module_free(c);
      n++;
    }
    cb_free_list(files);
  }
  print_message("cloned %d modules\n", n);
  assert_true(n >= 40);
  hj_ctx_destroy(ctx);
}

/* ---- passes ----------------------------------------------------------------------------------- */

/* The module's results on the evaluator before and after |pass| are the same bits. */
static void cb_same_results(hj_ctx_t *ctx, hlo_module *before, hlo_module *after) {
  hj_buffer_t **in = cb_inputs(ctx, before, 7);
  hj_buffer_t **r0 = cb_run(ctx, before, in, NULL), **r1 = cb_run(ctx, after, in, NULL);
  int nout = hj_module_num_outputs(before);
  for (int k = 0; k < nout; k++)
    assert_memory_equal(hj_buffer_host_ptr(r0[k]), hj_buffer_host_ptr(r1[k]), hj_buffer_nbytes(r0[k]));
  cb_free_bufs(r0, nout);
  cb_free_bufs(r1, nout);
  cb_free_bufs(in, hj_module_num_inputs(before));
}

static const char cb_inline_text[] =
  "HloModule inl\n"
  "sq {\n  p = f32[4] parameter(0)\n  ROOT m = f32[4] multiply(p, p)\n}\n"
  "sq_plus {\n  a = f32[4] parameter(0)\n  b = f32[4] parameter(1)\n"
  "  c = f32[4] call(a), to_apply=sq\n  ROOT s = f32[4] add(c, b)\n}\n"
  "ENTRY main {\n  x = f32[4] parameter(0)\n  y = f32[4] parameter(1)\n"
  "  r = f32[4] call(x, y), to_apply=sq_plus\n  ROOT t = f32[4] subtract(r, x)\n}\n";

static void test_inline_calls(void **state) {
  hj_ctx_t *ctx = tu_ctx();
  hlo_module *m = cb_parse(ctx, cb_inline_text), *c = hlo_module_clone(m);
  bool ch = false;
  CHECK_OK(ctx, pass_inline_calls(c, &ch));
  assert_true(ch);
  CHECK_OK(ctx, hlo_verify_module(c));
  char *t = cb_print(c);
  assert_null(strstr(t, "call("));
  assert_int_equal(arrlen(c->comps), 1);                  /* sq and sq_plus are gone */
  const hlo_comp *e = c->entry;
  assert_int_equal(arrlen(e->instrs), 5);                 /* x y multiply add subtract */
  assert_int_equal(e->instrs[2]->op, HLO_OP_MULTIPLY);
  assert_ptr_equal(e->instrs[2]->operands[0], e->params[0]);
  assert_ptr_equal(e->instrs[2]->operands[1], e->params[0]);
  assert_int_equal(e->instrs[3]->op, HLO_OP_ADD);
  assert_ptr_equal(e->instrs[3]->operands[1], e->params[1]);
  assert_ptr_equal(e->root->operands[0], e->instrs[3]);
  cb_same_results(ctx, m, c);
  free(t);
  hlo_module_free(c);
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
}

static const char cb_wrap_text[] =
  "HloModule wrap\n"
  "add_f {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
  "ENTRY main {\n  x = f32[4,8] parameter(0)\n  w = f32[8,3] parameter(1)\n"
  "  c = f32[] constant(0)\n  e = f32[4,8] exponential(x)\n"
  "  d = f32[4,3] dot(e, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
  "  r = f32[4] reduce(e, c), dimensions={1}, to_apply=add_f\n  rs = f32[2,2] reshape(r)\n"
  "  t = (f32[4,3], f32[2,2]) tuple(d, rs)\n  g = f32[4,3] get-tuple-element(t), index=0\n"
  "  m = f32[4,8] multiply(e, e)\n"
  "  ROOT out = (f32[4,3], f32[2,2], f32[4,8]) tuple(g, rs, m)\n}\n";

static void test_wrap_fusions(void **state) {
  hj_ctx_t *ctx = tu_ctx();
  hlo_module *m = cb_parse(ctx, cb_wrap_text), *c = hlo_module_clone(m);
  bool ch = false;
  CHECK_OK(ctx, pass_wrap_fusions(c, &ch));
  assert_true(ch);
  CHECK_OK(ctx, hlo_verify_module(c));
  char *t = cb_print(c);
  const char *want[] = {
    "wrapped_e = f32[4,8]{1,0} fusion(x), kind=kLoop, calls=wrapped_e_computation",
    "wrapped_d = f32[4,3]{1,0} fusion(wrapped_e, w), kind=kOutput, calls=wrapped_d_computation",
    "wrapped_r = f32[4]{0} fusion(wrapped_e, c), kind=kInput, calls=wrapped_r_computation",
    "rs = f32[2,2]{1,0} reshape(wrapped_r)",
    "t = (f32[4,3]{1,0}, f32[2,2]{1,0}) tuple(wrapped_d, rs)",
    "g = f32[4,3]{1,0} get-tuple-element(t), index=0",
    "wrapped_m = f32[4,8]{1,0} fusion(wrapped_e), kind=kLoop, calls=wrapped_m_computation",
    "ROOT m = f32[4,8]{1,0} multiply(param_0",             /* the operand used twice: one param */
    "c = f32[] constant(0)",
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (!strstr(t, want[i])) fail_msg("missing '%s' in:\n%s", want[i], t);
  /* fused computations come before the entry (callees first) */
  assert_true(strstr(t, "wrapped_m_computation {") < strstr(t, "ENTRY main"));
  cb_same_results(ctx, m, c);
  ch = true;
  CHECK_OK(ctx, pass_wrap_fusions(c, &ch));                /* idempotent */
  assert_false(ch);
  free(t);
  hlo_module_free(c);
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
}

/* ---- buffer assignment ------------------------------------------------------------------------ */

/* Parses |text|, wraps it, and assigns the entry's buffers. */
static hlo_module *cb_plan(hj_ctx_t *ctx, const char *text, ba_plan *p) {
  hlo_module *m = cb_parse(ctx, text);
  bool ch;
  CHECK_OK(ctx, pass_wrap_fusions(m, &ch));
  CHECK_OK(ctx, ba_assign(ctx, m->entry, NULL, p));
  return m;
}

static const ba_loc *cb_loc(const ba_plan *p, const char *name, int leaf) {
  for (ptrdiff_t i = 0; i < arrlen(p->comp->instrs); i++)
    if (!strcmp(p->comp->instrs[i]->name, name)) return &p->leaves[i][leaf];
  fail_msg("no instruction '%s'", name);
  return NULL;
}

static void test_buffer_chain_peak(void **state) {
  hj_ctx_t *ctx = tu_ctx();
  ba_plan p;
  hlo_module *m = cb_plan(ctx,
    "HloModule chain\nENTRY main {\n  p = f32[1024] parameter(0)\n  a = f32[1024] exponential(p)\n"
    "  b = f32[1024] negate(a)\n  c = f32[1024] sine(b)\n  ROOT d = f32[1024] cosine(c)\n}\n", &p);
  assert_int_equal(p.arena_bytes, 8192);                   /* a and c share a slot */
  assert_int_equal(p.values_bytes, 12288);
  const ba_loc *a = cb_loc(&p, "wrapped_a", 0), *b = cb_loc(&p, "wrapped_b", 0), *c = cb_loc(&p, "wrapped_c", 0);
  assert_int_equal(a->where, BA_ARENA);
  assert_int_equal(c->where, BA_ARENA);
  assert_int_equal(a->index, c->index);
  assert_true(b->index != a->index);
  assert_int_equal(cb_loc(&p, "wrapped_d", 0)->where, BA_OUTPUT);
  assert_int_equal(cb_loc(&p, "p", 0)->where, BA_PARAM);
  assert_int_equal(a->index % 64, 0);
  assert_int_equal(b->index % 64, 0);
  char *sb = NULL;
  ba_plan_print(&p, &sb);
  assert_non_null(strstr(sb, "arena 8192 bytes peak"));
  arrfree(sb);
  ba_plan_free(&p);
  hlo_module_free(m);
  hj_ctx_destroy(ctx);
}

static void test_buffer_aliases(void **state) {
  hj_ctx_t *ctx = tu_ctx();
  ba_plan p;
  hlo_module *m = cb_plan(ctx,
    "HloModule alias\nENTRY main {\n  p = f32[16] parameter(0)\n  a = f32[16] exponential(p)\n"
    "  r = f32[4,4] reshape(a)\n  t = (f32[4,4], f32[16]) tuple(r, p)\n"
    "  g0 = f32[4,4] get-tuple-element(t), index=0\n  g1 = f32[16] get-tuple-element(t), index=1\n"
    "  k = f32[2] constant({1, 2})\n"
    "  ROOT o = (f32[4,4], f32[16], f32[2], f32[4,4]) tuple(g0, g1, k, r)\n}\n", &p);
  assert_int_equal(cb_loc(&p, "wrapped_a", 0)->where, BA_OUTPUT);
  assert_int_equal(cb_loc(&p, "wrapped_a", 0)->index, 0);
  assert_int_equal(cb_loc(&p, "r", 0)->where, BA_OUTPUT);
  assert_int_equal(cb_loc(&p, "g0", 0)->where, BA_OUTPUT);
  assert_int_equal(cb_loc(&p, "t", 1)->where, BA_PARAM);
  assert_int_equal(cb_loc(&p, "g1", 0)->where, BA_PARAM);
  assert_int_equal(cb_loc(&p, "k", 0)->where, BA_CONST);
  assert_int_equal(p.arena_bytes, 0);
  /* output 1 is a parameter, 2 a constant, 3 a repeat of output 0: three copies */
  assert_int_equal(arrlen(p.copies), 3);
  assert_int_equal(p.copies[0].out, 1);
  assert_int_equal(p.copies[0].src.where, BA_PARAM);
  assert_int_equal(p.copies[1].src.where, BA_CONST);
  assert_int_equal(p.copies[2].src.where, BA_OUTPUT);
  assert_int_equal(p.copies[2].src.index, 0);
  ba_plan_free(&p);
  hlo_module_free(m);
  /* the same module runs on the CPU backend like on the evaluator */
  hj_ctx_t *cpu = cb_ctx(HJ_BACKEND_CPU, 0, NULL);
  m = cb_parse(cpu,
    "HloModule alias\nENTRY main {\n  p = f32[16] parameter(0)\n  a = f32[16] exponential(p)\n"
    "  r = f32[4,4] reshape(a)\n  t = (f32[4,4], f32[16]) tuple(r, p)\n"
    "  g0 = f32[4,4] get-tuple-element(t), index=0\n  g1 = f32[16] get-tuple-element(t), index=1\n"
    "  k = f32[2] constant({1, 2})\n"
    "  ROOT o = (f32[4,4], f32[16], f32[2], f32[4,4]) tuple(g0, g1, k, r)\n}\n");
  hj_buffer_t **in = cb_inputs(cpu, m, 3), **o = cb_run(cpu, m, in, NULL);
  float *x = hj_buffer_host_ptr(in[0]), *o0 = hj_buffer_host_ptr(o[0]), *o1 = hj_buffer_host_ptr(o[1]);
  float *o2 = hj_buffer_host_ptr(o[2]), *o3 = hj_buffer_host_ptr(o[3]);
  for (int i = 0; i < 16; i++) {
    assert_float_equal(o0[i], expf(x[i]), 1e-6 * (1 + fabsf(o0[i])));
    assert_true(o1[i] == x[i] && o3[i] == o0[i]);
  }
  assert_true(o2[0] == 1 && o2[1] == 2);
  cb_free_bufs(o, 4);
  cb_free_bufs(in, 1);
  hj_module_destroy(m);
  hj_ctx_destroy(cpu);
  hj_ctx_destroy(ctx);
}

static const char *cb_dus_fmt =
  "HloModule dus\nENTRY main {\n  p = f32[8,4] parameter(0)\n  u = f32[1,4] parameter(1)\n"
  "  i = s32[] parameter(2)\n  z = s32[] constant(0)\n  a = f32[8,4] exponential(p)\n"
  "  d = f32[8,4] dynamic-update-slice(%s, u, i, z)\n  ROOT n = %s\n}\n";

static bool cb_dus_inplace(hj_ctx_t *ctx, const char *operand, const char *root) {
  char text[1024];
  snprintf(text, sizeof text, cb_dus_fmt, operand, root);
  ba_plan p;
  hlo_module *m = cb_plan(ctx, text, &p);
  int k = -1;
  for (ptrdiff_t i = 0; i < arrlen(m->entry->instrs); i++)
    if (!strcmp(m->entry->instrs[i]->name, "wrapped_d")) k = (int)i;
  assert_true(k >= 0);
  bool r = p.dus_inplace[k];
  if (r) assert_int_equal(p.leaves[k][0].index, cb_loc(&p, "wrapped_a", 0)->index);
  ba_plan_free(&p);
  hlo_module_free(m);
  return r;
}

static void test_buffer_dus_inplace(void **state) {
  hj_ctx_t *ctx = tu_ctx();
  assert_true(cb_dus_inplace(ctx, "a", "f32[8,4] negate(d)"));                 /* a dies at d */
  assert_false(cb_dus_inplace(ctx, "a", "(f32[8,4], f32[8,4]) tuple(d, a)")); /* a lives on */
  assert_false(cb_dus_inplace(ctx, "p", "f32[8,4] negate(d)"));              /* a parameter */
  assert_true(cb_dus_inplace(ctx, "a", "f32[8,4] copy(d)"));
  /* and in place it computes what the evaluator computes */
  char text[1024];
  snprintf(text, sizeof text, cb_dus_fmt, "a", "f32[8,4] negate(d)");
  hj_ctx_t *cpu = cb_ctx(HJ_BACKEND_CPU, 0, NULL);
  hlo_module *m = cb_parse(cpu, text);
  hj_buffer_t **in = cb_inputs(cpu, m, 5);
  *(int32_t *)hj_buffer_host_ptr(in[2]) = 3;
  hj_buffer_t **o = cb_run(cpu, m, in, NULL), **r = cb_run(ctx, m, in, NULL);
  char why[256];
  if (!cb_close(o[0], r[0], 1e-6, 1e-7, 0, why, sizeof why)) fail_msg("dus in place: %s", why);
  cb_free_bufs(o, 1);
  cb_free_bufs(r, 1);
  cb_free_bufs(in, 3);
  hj_module_destroy(m);
  hj_ctx_destroy(cpu);
  hj_ctx_destroy(ctx);
}

/* ---- in-place elementwise ------------------------------------------------------------------------ */

/* The CPU backend's question (cpu_backend.c): a linear loop kernel reading |operand| at its
   own index only. */
static bool cb_may_inplace(const hlo_instr *fusion, int operand, void *ud) {
  (void)ud;
  const hlo_instr *hero = NULL;
  return emit_classify(fusion, false, &hero) == EMIT_KIND_LOOP && emit_loop_inplace_ok(fusion, operand);
}

/* Where in-place must and must not happen (comments: the expected inplace_operand). */
static const char *cb_inplace_text =
  "HloModule inplace\n"
  "row_fused {\n  x = f32[64,16] parameter(0)\n  v = f32[16] parameter(1)\n"
  "  bv = f32[64,16] broadcast(v), dimensions={1}\n  ROOT s = f32[64,16] add(x, bv)\n}\n"
  "twice_fused {\n  t0 = f32[64,16] parameter(0)\n  t1 = f32[64,16] parameter(1)\n"
  "  ROOT mx = f32[64,16] maximum(t0, t1)\n}\n"
  "rev_fused {\n  y = f32[1024] parameter(0)\n  ROOT r = f32[1024] reverse(y), dimensions={0}\n}\n"
  "bcast_fused {\n  z = f32[1024] parameter(0)\n  s0 = f32[1] slice(z), slice={[0:1]}\n"
  "  s1 = f32[] reshape(s0)\n  b1 = f32[1024] broadcast(s1), dimensions={}\n"
  "  ROOT m = f32[1024] multiply(z, b1)\n}\n"
  "ENTRY main {\n  p = f32[64,16] parameter(0)\n  q = f32[64,16] parameter(1)\n"
  "  v = f32[16] parameter(2)\n"
  "  a = f32[64,16] multiply(p, q)\n"                                  /* -1: parameters */
  "  b = f32[64,16] add(a, q)\n"                                       /* 0 */
  "  c = f32[64,16] negate(b)\n"                                       /* 0 */
  "  d = f32[64,16] subtract(q, c)\n"                                  /* 1 */
  "  e = f32[64,16] fusion(d, d), kind=kLoop, calls=twice_fused\n"    /* -1: passed twice */
  "  f = f32[64,16] abs(e)\n"                                          /* -1: e lives on */
  "  g = f32[64,16] add(f, e)\n"                                       /* 0 */
  "  h = f32[64,16] fusion(g, v), kind=kLoop, calls=row_fused\n"      /* -1: row mode */
  "  r1 = f32[1024] reshape(h)\n"
  "  i = f32[1024] fusion(r1), kind=kLoop, calls=rev_fused\n"         /* -1: reads elsewhere */
  "  j = f32[1024] negate(i)\n"                                        /* 0 */
  "  k = f32[1024] fusion(j), kind=kLoop, calls=bcast_fused\n"        /* -1: element 0 for all */
  "  ROOT o = f32[1024] multiply(k, k)\n}\n";  /* 0: wrapped with one operand, read twice at i */

static void test_buffer_inplace_elementwise(void **state) {
  hj_ctx_t *ctx = tu_ctx();
  hlo_module *m = cb_parse(ctx, cb_inplace_text);
  bool ch;
  CHECK_OK(ctx, pass_wrap_fusions(m, &ch));
  ba_plan p, plain;
  CHECK_OK(ctx, ba_assign_ex(ctx, m->entry, NULL, cb_may_inplace, NULL, &p));
  CHECK_OK(ctx, ba_assign(ctx, m->entry, NULL, &plain));
  struct { const char *name; int want; } cases[] = {
    { "wrapped_a", -1 }, { "wrapped_b", 0 }, { "wrapped_c", 0 }, { "wrapped_d", 1 },
    { "e", -1 }, { "wrapped_f", -1 }, { "wrapped_g", 0 }, { "h", -1 }, { "i", -1 },
    { "wrapped_j", 0 }, { "k", -1 }, { "wrapped_o", 0 },
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int at = -1;
    for (ptrdiff_t i = 0; i < arrlen(m->entry->instrs); i++)
      if (!strcmp(m->entry->instrs[i]->name, cases[c].name)) at = (int)i;
    if (at < 0) fail_msg("no instruction '%s'", cases[c].name);
    if (p.inplace_operand[at] != cases[c].want)
      fail_msg("%s: in place over operand %d, want %d", cases[c].name, p.inplace_operand[at], cases[c].want);
    assert_int_equal(plain.inplace_operand[at], -1);
    if (cases[c].want >= 0) {   /* the same slot as that operand */
      const hlo_instr *o = m->entry->instrs[at]->operands[cases[c].want];
      assert_int_equal(p.leaves[at][0].where, cb_loc(&p, o->name, 0)->where);   /* o: output */
      assert_int_equal(p.leaves[at][0].index, cb_loc(&p, o->name, 0)->index);
    }
  }
  /* a..d share one slot, as do g, j: 3 slots of 4 KiB live at most (e, f, g) vs 4 */
  printf("in-place elementwise: arena %lld bytes peak, %lld without in place\n",
         (long long)p.arena_bytes, (long long)plain.arena_bytes);
  assert_true(p.arena_bytes < plain.arena_bytes);
  char *sb = NULL;
  ba_plan_print(&p, &sb);
  assert_non_null(strstr(sb, "wrapped_b"));
  assert_non_null(strstr(sb, "(in place over operand 1)"));
  arrfree(sb);
  ba_plan_free(&p);
  ba_plan_free(&plain);
  hlo_module_free(m);
  hj_ctx_destroy(ctx);
}

/* One exact-op chain over f32[256,256] (several threads' chunks), compiled op by op
   (no_fusion): every link after the first goes in place, the last one into the output, so
   the arena is empty (two 256 KiB slots without in place); and the module above, where
   most fusions must not go in place. Both equal the evaluator bit for bit. */
static void test_inplace_elementwise_runs(void **state) {
  static const char *chain =
    "HloModule chain\nENTRY main {\n  p = f32[256,256] parameter(0)\n  q = f32[256,256] parameter(1)\n"
    "  a = f32[256,256] multiply(p, q)\n  b = f32[256,256] add(a, q)\n  c = f32[256,256] negate(b)\n"
    "  d = f32[256,256] subtract(q, c)\n  e = f32[256,256] multiply(d, p)\n"
    "  ROOT f = f32[256,256] add(e, q)\n}\n";
  const char *texts[2] = { chain, cb_inplace_text };
  hj_ctx_t *ref = tu_ctx();
  for (int t = 0; t < 2; t++) {
    char dir[] = "/tmp/hlojit_inplaceXXXXXX";
    assert_non_null(mkdtemp(dir));
    hj_ctx_options_t o;
    hj_ctx_options_init(&o);
    o.backend = HJ_BACKEND_CPU;
    o.num_threads = 4;
    o.no_fusion = true;
    o.dump_dir = dir;
    hj_ctx_t *cpu = NULL;
    if (hj_ctx_create(&o, &cpu) != HJ_OK) fail_msg("hj_ctx_create failed");
    hlo_module *m = cb_parse(cpu, texts[t]);
    hj_buffer_t **in = cb_inputs(cpu, m, 11 + (uint64_t)t);
    hj_exec_stats_t s;
    hj_buffer_t **got = cb_run(cpu, m, in, &s), **want = cb_run(ref, m, in, NULL);
    assert_int_equal(s.evaluator_fallbacks, 0);
    assert_int_equal(hj_buffer_nbytes(got[0]), hj_buffer_nbytes(want[0]));
    if (memcmp(hj_buffer_host_ptr(got[0]), hj_buffer_host_ptr(want[0]), hj_buffer_nbytes(want[0])))
      fail_msg("module %d: in-place results differ from the evaluator", t);
    if (t == 0) assert_int_equal(s.arena_bytes, 0);
    bool seen = false;                           /* the dump names the decision */
    DIR *dd = opendir(dir);
    struct dirent *de;
    while ((de = readdir(dd))) {
      if (de->d_name[0] == '.') continue;
      char path[2048];
      snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
      if (strstr(de->d_name, "buffer_assignment.txt")) {
        size_t n = 0;
        char *txt = tu_read_file(path, &n);
        seen |= txt && strstr(txt, "(in place over operand") != NULL;
        free(txt);
      }
      unlink(path);
    }
    closedir(dd);
    rmdir(dir);
    assert_true(seen);
    cb_free_bufs(got, 1);
    cb_free_bufs(want, 1);
    cb_free_bufs(in, hj_module_num_inputs(m));
    hj_module_destroy(m);
    hj_ctx_destroy(cpu);
  }
  hj_ctx_destroy(ref);
}

/* ---- whole modules ------------------------------------------------------------------------------ */

typedef struct { int modules, fallbacks, runtime, kernels, emit_errors, skipped; } cb_tally;

static void cb_tally_add(cb_tally *t, const hj_exec_stats_t *s) {
  t->modules++;
  t->fallbacks += s->evaluator_fallbacks;
  t->runtime += s->runtime_ops;
  t->emit_errors += s->emit_errors;
  t->kernels += s->kernels_loop + s->kernels_reduction + s->kernels_transpose + s->kernels_matmul + s->kernels_dus;
}

/* CPU vs evaluator on |m| with |in|; a failure names |what|. */
static void cb_check_module(const char *what, hj_module_t *m, hj_buffer_t **in, hj_ctx_t *cpu,
                            hj_ctx_t *ref, cb_tally *tally, hj_buffer_t **want_jax) {
  hj_exec_stats_t s;
  hj_buffer_t **got = cb_run(cpu, m, in, &s), **want = cb_run(ref, m, in, NULL);
  if (s.backend != HJ_BACKEND_CPU) fail_msg("%s: ran on backend %d (%s)", what, s.backend, s.note);
  cb_tally_add(tally, &s);
  int nout = hj_module_num_outputs(m);
  char why[256];
  for (int k = 0; k < nout; k++) {
    /* summation order may differ in reduction/dot kernels: 1e-4 relative + 1e-5 of max|want| */
    if (!cb_close(got[k], want[k], 1e-4, 1e-6, 1e-5, why, sizeof why))
      fail_msg("%s: output %d differs from the evaluator: %s", what, k, why);
    if (want_jax && !cb_close(got[k], want_jax[k], 1e-4, 1e-6, 1e-5, why, sizeof why))
      fail_msg("%s: output %d differs from JAX: %s", what, k, why);
  }
  cb_free_bufs(got, nout);
  cb_free_bufs(want, nout);
}

static void test_jax_fixtures_cpu(void **state) {
  hj_ctx_t *cpu = cb_ctx(HJ_BACKEND_CPU, 0, NULL), *ref = tu_ctx();
  char path[2048], dir[1024];
  snprintf(dir, sizeof dir, "%s/fixtures/jax", tu_data_dir());
  snprintf(path, sizeof path, "%s/MANIFEST.txt", dir);
  FILE *f = fopen(path, "r");
  if (!f) fail_msg("no %s", path);
  char line[512], name[256];
  int nin, nout;
  cb_tally t = { 0 };
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#' || sscanf(line, "%255s %d %d", name, &nin, &nout) != 3) continue;
    snprintf(path, sizeof path, "%s/%s.hlo", dir, name);
    hj_module_t *m = NULL;
    CHECK_OK(ref, hj_module_parse_file(ref, path, &m));
    hj_buffer_t **in = calloc((size_t)nin + 1, sizeof *in), **jx = calloc((size_t)nout + 1, sizeof *jx);
    for (int i = 0; i < nin; i++) {
      snprintf(path, sizeof path, "%s/%s.in%d.npy", dir, name, i);
      CHECK_OK(ref, hj_buffer_read_npy(ref, path, &in[i]));
    }
    for (int k = 0; k < nout; k++) {
      snprintf(path, sizeof path, "%s/%s.out%d.npy", dir, name, k);
      CHECK_OK(ref, hj_buffer_read_npy(ref, path, &jx[k]));
    }
    cb_check_module(name, m, in, cpu, ref, &t, jx);
    cb_free_bufs(in, nin);
    cb_free_bufs(jx, nout);
    hj_module_destroy(m);
  }
  fclose(f);
  print_message("JAX fixtures on CPU: %d modules, %d kernels, %d evaluator fallbacks (%d runtime ops, "
                "%d emitter errors)\n", t.modules, t.kernels, t.fallbacks, t.runtime, t.emit_errors);
  assert_true(t.modules >= 38);
  assert_int_equal(t.emit_errors, 0);
  hj_ctx_destroy(cpu);
  hj_ctx_destroy(ref);
}

static void cb_corpus(const char *dir, int min_modules) {
  hj_ctx_t *cpu = cb_ctx(HJ_BACKEND_CPU, 0, NULL), *ref = tu_ctx();
  char **files = cb_list(dir);
  if (!files) {
    print_message("skipped: no HLO corpus at %s\n", dir);
    skip();
  }
  cb_tally t = { 0 };
  for (ptrdiff_t i = 0; i < arrlen(files); i++) {
    hj_module_t *m = NULL;
    if (hj_module_parse_file(ref, files[i], &m) != HJ_OK) { t.skipped++; continue; }
    hj_buffer_t **in = cb_inputs(ref, m, 1);
    /* modules the evaluator cannot run are not the CPU backend's to run either */
    hj_exec_t *e = NULL;
    int nout = hj_module_num_outputs(m);
    hj_buffer_t **o = calloc((size_t)nout + 1, sizeof *o);
    bool evaluable = hj_compile_module(ref, m, &e) == HJ_OK &&
                     hj_exec_run(e, in, hj_exec_num_inputs(e), o, nout) == HJ_OK;
    hj_exec_destroy(e);
    cb_free_bufs(o, nout);
    if (evaluable) cb_check_module(files[i], m, in, cpu, ref, &t, NULL);
    else t.skipped++;
    cb_free_bufs(in, hj_module_num_inputs(m));
    hj_module_destroy(m);
  }
  print_message("corpus %s on CPU: %d modules (%d skipped: the evaluator cannot run them), %d "
                "kernels, %d evaluator fallbacks (%d runtime ops, %d emitter errors)\n", dir,
                t.modules, t.skipped, t.kernels, t.fallbacks, t.runtime, t.emit_errors);
  assert_true(t.modules >= min_modules);
  assert_int_equal(t.emit_errors, 0);
  cb_free_list(files);
  hj_ctx_destroy(cpu);
  hj_ctx_destroy(ref);
}

static void test_corpus_golden_cpu(void **state) {
  char d[1200];
  snprintf(d, sizeof d, "%.1000s/golden", cb_corpus_dir());
  cb_corpus(d, 12);
}

static void test_corpus_all_cpu(void **state) { cb_corpus(cb_corpus_dir(), 40); }

/* While (the golden command-buffer test: (0, 0.0) -> (10, 20.0)) and conditionals. */
static void test_while_and_conditional(void **state) {
  hj_ctx_t *cpu = cb_ctx(HJ_BACKEND_CPU, 0, NULL), *ref = tu_ctx();
  static const char text[] =
    "HloModule wc\n"
    "cond {\n  s = (s32[], f32[4]) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n"
    "  n = s32[] constant(10)\n  ROOT lt = pred[] compare(i, n), direction=LT\n}\n"
    "body {\n  s = (s32[], f32[4]) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n"
    "  v = f32[4] get-tuple-element(s), index=1\n  one = s32[] constant(1)\n"
    "  i2 = s32[] add(i, one)\n  two = f32[] constant(2)\n  b = f32[4] broadcast(two), dimensions={}\n"
    "  v2 = f32[4] add(v, b)\n  ROOT r = (s32[], f32[4]) tuple(i2, v2)\n}\n"
    "br_true {\n  x = f32[4] parameter(0)\n  ROOT y = f32[4] multiply(x, x)\n}\n"
    "br_false {\n  x = f32[4] parameter(0)\n  ROOT y = f32[4] negate(x)\n}\n"
    "ENTRY main {\n  p = pred[] parameter(0)\n  x = f32[4] parameter(1)\n  z = s32[] constant(0)\n"
    "  init = (s32[], f32[4]) tuple(z, x)\n"
    "  w = (s32[], f32[4]) while(init), condition=cond, body=body\n"
    "  c = s32[] get-tuple-element(w), index=0\n  v = f32[4] get-tuple-element(w), index=1\n"
    "  k = f32[4] conditional(p, v, x), true_computation=br_true, false_computation=br_false\n"
    "  ROOT o = (s32[], f32[4], f32[4]) tuple(c, v, k)\n}\n";
  hlo_module *m = cb_parse(ref, text);
  cb_tally t = { 0 };
  for (int pv = 0; pv < 2; pv++) {
    hj_buffer_t **in = cb_inputs(ref, m, 9);
    *(uint8_t *)hj_buffer_host_ptr(in[0]) = (uint8_t)pv;
    cb_check_module(pv ? "while+conditional(true)" : "while+conditional(false)", m, in, cpu, ref, &t, NULL);
    hj_buffer_t **o = cb_run(cpu, m, in, NULL);
    assert_int_equal(*(int32_t *)hj_buffer_host_ptr(o[0]), 10);
    const float *x = hj_buffer_host_ptr(in[1]), *v = hj_buffer_host_ptr(o[1]), *k = hj_buffer_host_ptr(o[2]);
    for (int i = 0; i < 4; i++) {
      assert_true(v[i] == x[i] + 20.0f || fabsf(v[i] - (x[i] + 20.0f)) < 1e-5f);
      assert_true(k[i] == (pv ? v[i] * v[i] : -x[i]));   /* true gets v, false gets x */
    }
    cb_free_bufs(o, 3);
    cb_free_bufs(in, 2);
  }
  /* an s32 selector out of range takes the last branch (XLA's rule) */
  hlo_module *g = NULL;
  char path[1200];
  snprintf(path, sizeof path, "%.1000s/golden/golden_cmdbuf_index_conditional.hlo", cb_corpus_dir());
  if (hj_module_parse_file(ref, path, &g) == HJ_OK) {
    hj_buffer_t **in = cb_inputs(ref, g, 2);
    int32_t sels[] = { 0, 1, 1024, -3 };
    for (int i = 0; i < 4; i++) {
      *(int32_t *)hj_buffer_host_ptr(in[0]) = sels[i];
      cb_check_module("index conditional", g, in, cpu, ref, &t, NULL);
    }
    cb_free_bufs(in, hj_module_num_inputs(g));
    hj_module_destroy(g);
  }
  hj_module_destroy(m);
  hj_ctx_destroy(cpu);
  hj_ctx_destroy(ref);
}

static const char cb_red_text[] =
  "HloModule red\n"
  "add_f {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
  "max_f {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] maximum(a, b)\n}\n"
  "ENTRY main {\n  x = f32[96,1000] parameter(0)\n  c = f32[] constant(0)\n"
  "  ninf = f32[] constant(-inf)\n"
  "  r = f32[96] reduce(x, c), dimensions={1}, to_apply=add_f\n"
  "  e = f32[96,1000] exponential(x)\n  s = f32[1000] reduce(e, c), dimensions={0}, to_apply=add_f\n"
  "  t = f32[] reduce(e, c), dimensions={0,1}, to_apply=add_f\n"
  "  mx = f32[96] reduce(x, ninf), dimensions={1}, to_apply=max_f\n"
  "  ROOT o = (f32[96], f32[1000], f32[], f32[96]) tuple(r, s, t, mx)\n}\n";

static void test_determinism(void **state) {
  hj_ctx_t *ref = tu_ctx();
  hlo_module *m = cb_parse(ref, cb_red_text);
  hj_buffer_t **in = cb_inputs(ref, m, 11);
  uint8_t *first[4] = { 0 };
  size_t nb[4];
  int threads[] = { 1, 2 };
  for (int ti = 0; ti < 2; ti++) {
    hj_ctx_t *cpu = cb_ctx(HJ_BACKEND_CPU, threads[ti], NULL);
    hj_exec_t *e = NULL;
    CHECK_OK(cpu, hj_compile_module(cpu, m, &e));
    for (int run = 0; run < 20; run++) {
      hj_buffer_t *o[4] = { 0 };
      CHECK_OK(cpu, hj_exec_run(e, in, 1, o, 4));
      for (int k = 0; k < 4; k++) {
        if (!first[k]) {
          nb[k] = hj_buffer_nbytes(o[k]);
          first[k] = malloc(nb[k]);
          memcpy(first[k], hj_buffer_host_ptr(o[k]), nb[k]);
        } else if (memcmp(first[k], hj_buffer_host_ptr(o[k]), nb[k])) {
          fail_msg("output %d differs on run %d with %d thread(s)", k, run, threads[ti]);
        }
        hj_buffer_destroy(o[k]);
      }
    }
    hj_exec_destroy(e);
    hj_ctx_destroy(cpu);
  }
  for (int k = 0; k < 4; k++) free(first[k]);
  cb_free_bufs(in, 1);
  hj_module_destroy(m);
  hj_ctx_destroy(ref);
}

/* ---- API integration, dumps, latency ------------------------------------------------------------ */

static void test_backends_and_dumps(void **state) {
  char dir[] = "/tmp/hlojit_cpu_dumpXXXXXX";
  assert_non_null(mkdtemp(dir));
  hj_ctx_t *ctx = cb_ctx(HJ_BACKEND_AUTO, 0, dir);
  hlo_module *m = cb_parse(ctx, cb_wrap_text);
  hj_exec_t *e = NULL;
  CHECK_OK(ctx, hj_compile_module(ctx, m, &e));
  assert_int_equal(hj_exec_backend(e), HJ_BACKEND_CPU);    /* AUTO: the CPU backend */
  hj_exec_stats_t s;
  CHECK_OK(ctx, hj_exec_stats(e, &s));
  assert_int_equal(s.fusions, 5);  /* e, d, m, the reduce, and the reshape of its result */
  assert_int_equal(s.backend, HJ_BACKEND_CPU);
  assert_string_equal(s.note, "");
  hj_exec_destroy(e);
  const char *want[] = { "after_passes.hlo", "buffer_assignment.txt", "thunks.txt" };
  for (int k = 0; k < 3; k++) {
    DIR *d = opendir(dir);
    struct dirent *de;
    bool found = false;
    while ((de = readdir(d)))
      if (strstr(de->d_name, want[k])) {
        found = true;
        char p[2048];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        size_t n = 0;
        char *t = tu_read_file(p, &n);
        assert_true(t && n > 0);
        if (k == 2) assert_non_null(strstr(t, "program main"));
        free(t);
        unlink(p);
      }
    closedir(d);
    if (!found) fail_msg("no *%s in %s", want[k], dir);
  }
  DIR *d = opendir(dir);                       /* the rest (LLVM IR, module text) */
  struct dirent *de;
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.') continue;
    char p[2048];
    snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(dir);
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
  ctx = cb_ctx(HJ_BACKEND_INTERP, 0, NULL);     /* INTERP stays the evaluator */
  m = cb_parse(ctx, cb_wrap_text);
  CHECK_OK(ctx, hj_compile_module(ctx, m, &e));
  assert_int_equal(hj_exec_backend(e), HJ_BACKEND_INTERP);
  hj_exec_destroy(e);
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
}

/* A module of |n| instructions: 2 parameters and a chain of elementwise ops on f32[64,64]. */
static char *cb_chain_text(int n) {
  static const char *ops[] = { "add", "multiply", "subtract", "maximum", "exponential", "tanh", "negate" };
  char *sb = NULL;
  sb_puts(&sb, "HloModule chain\nENTRY main {\n  v0 = f32[64,64] parameter(0)\n  v1 = f32[64,64] parameter(1)\n");
  for (int i = 2; i < n; i++) {
    const char *op = ops[i % 7];
    bool unary = i % 7 >= 4;
    sb_printf(&sb, "  %sv%d = f32[64,64] %s(v%d%s", i == n - 1 ? "ROOT " : "", i, op, i - 1, unary ? "" : ", ");
    if (!unary) sb_printf(&sb, "v%d", i - 2);
    sb_puts(&sb, ")\n");
  }
  sb_puts(&sb, "}\n");
  char *r = strdup(sb);
  arrfree(sb);
  return r;
}

static double cb_compile_ms(hj_ctx_t *ctx, hlo_module *m, hj_exec_stats_t *s) {
  hj_exec_t *e = NULL;
  double t0 = cb_now_ms();
  CHECK_OK(ctx, hj_compile_module(ctx, m, &e));
  double ms = cb_now_ms() - t0;
  CHECK_OK(ctx, hj_exec_stats(e, s));
  hj_exec_destroy(e);
  return ms;
}

static void test_compile_latency(void **state) {
  hj_ctx_t *cpu = cb_ctx(HJ_BACKEND_CPU, 0, NULL);
  hlo_module *small = cb_parse(cpu, "HloModule one\nENTRY main {\n  x = f32[1024] parameter(0)\n"
                                    "  y = f32[1024] parameter(1)\n  ROOT z = f32[1024] add(x, y)\n}\n");
  char *t40 = cb_chain_text(40);
  hlo_module *big = cb_parse(cpu, t40);
  assert_int_equal(arrlen(big->entry->instrs), 40);
  hj_exec_stats_t s1, s40;
  double cold = cb_compile_ms(cpu, small, &s1);             /* includes creating the JIT */
  double one = 1e9, forty = 1e9;
  for (int r = 0; r < 3; r++) {
    double a = cb_compile_ms(cpu, small, &s1), b = cb_compile_ms(cpu, big, &s40);
    if (a < one) one = a;
    if (b < forty) forty = b;
  }
  print_message("compile latency (hj_compile_module wall, best of 3): one small fusion %.2f ms "
                "(%d kernel(s); first compile in the context %.2f ms), 40-instruction module %.2f ms "
                "(%d fusions, %d kernels, %d evaluator fallbacks)\n", one,
                s1.kernels_loop + s1.kernels_reduction, cold, forty, s40.fusions,
                s40.kernels_loop + s40.kernels_reduction + s40.kernels_transpose,
                s40.evaluator_fallbacks);
  print_message("  40-instruction module: passes+plan %.2f ms, emit %.2f ms, O3 %.2f ms, codegen %.2f ms\n",
                s40.passes_ms, s40.emit_ms, s40.optimize_ms, s40.codegen_ms);
  /* and the 40-op chain computes what the evaluator computes */
  hj_ctx_t *ref = tu_ctx();
  hj_buffer_t **in = cb_inputs(ref, big, 4);
  cb_tally t = { 0 };
  cb_check_module("40-op chain", big, in, cpu, ref, &t, NULL);
  cb_free_bufs(in, 2);
  hj_ctx_destroy(ref);
  free(t40);
  hj_module_destroy(small);
  hj_module_destroy(big);
  hj_ctx_destroy(cpu);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_clone_prints_the_same),
    cmocka_unit_test(test_inline_calls),
    cmocka_unit_test(test_wrap_fusions),
    cmocka_unit_test(test_buffer_chain_peak),
    cmocka_unit_test(test_buffer_aliases),
    cmocka_unit_test(test_buffer_dus_inplace),
    cmocka_unit_test(test_buffer_inplace_elementwise),
    cmocka_unit_test(test_inplace_elementwise_runs),
    cmocka_unit_test(test_backends_and_dumps),
    cmocka_unit_test(test_compile_latency),
    cmocka_unit_test(test_while_and_conditional),
    cmocka_unit_test(test_determinism),
    cmocka_unit_test(test_jax_fixtures_cpu),
    cmocka_unit_test(test_corpus_golden_cpu),
    cmocka_unit_test(test_corpus_all_cpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
