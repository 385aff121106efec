/* test_matmul.c — passes/dot_canon.c, emitters/matmul.c and backends/cpu/cpu_matmul.c.

   dot_canon: dot_generals with batch dims in the middle, several contracting dims, a
   transposed rhs, vector/matrix-vector/outer products, integer types and a dot inside a
   fused computation are rewritten; the module must verify, every dot must be canonical
   and the evaluator must give the same bits before and after (its dot sums contracting
   dims in the order listed, which the rewrite keeps). x @ w.T must not get a transpose.
   Matmul: the JIT'd kernels + driver against the evaluator's dot (which sums in double),
   sizes not multiples of the blocks (1, 3, 17, 127, 1000, 1600 rows > mc), K > kc, N > nc,
   both rhs forms, batches, M = 1 (gemv, one or several K blocks, batched); tolerance per element
   |c - ref| <= 1e-5 * sqrt(K) * sum_k |a_ik b_kj| (f32 accumulation of K terms).
   Determinism: 1, 2 and 3 threads give the same bits. Epilogue: bias + GELU-like tanh chain +
   residual through a reshape (gemv and gemm, both rhs forms) against the evaluator, tolerance
   2e-5 * sqrt(K) * sum_k |a b| + 1e-6 (1 + |ref|) (the emitted tanh is a rational approximation), and
   bitwise across thread counts. Unsupported (f64, non-canonical dot, a transpose after the
   dot) are HJ_ERR_UNSUPPORTED with a message. */
#include "testutil.h"

#if !__has_include(<llvm-c/Core.h>)
static void test_matmul_not_built(void **state) {
  print_message("skipped: LLVM-C headers not on the include path (backends/cpu/cpu.mk)\n");
  skip();
}
int main(void) {
  const struct CMUnitTest tests[] = { cmocka_unit_test(test_matmul_not_built) };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
#include "backends/cpu/cpu_matmul.h"
#include "hlojit_impl/emitters/emit.h"
#include "hlojit_impl/emitters/matmul_plan.h"
#include <math.h>

/* ---- helpers ------------------------------------------------------------------------------- */

static hlo_module *tm_parse(hj_ctx_t *ctx, const char *text) {
  hlo_module *m = NULL;
  CHECK_OK(ctx, hlo_parse_module(ctx, text, strlen(text), "test", &m));
  return m;
}

static unsigned tm_seed = 1;
static double tm_rand(void) {
  tm_seed = tm_seed * 1664525u + 1013904223u;
  return (double)((tm_seed >> 8) & 0xffff) / 65536.0 - 0.5;
}

/* Random literals for the entry's parameters (floats in [-0.5, 0.5), ints in [-8, 8)). */
static hlo_literal **tm_args(hj_ctx_t *ctx, const hlo_module *m, int *n) {
  *n = (int)arrlen(m->entry->params);
  hlo_literal **a = calloc((size_t)*n, sizeof *a);
  for (int i = 0; i < *n; i++) {
    a[i] = hlo_literal_new(ctx, &m->entry->params[i]->shape);
    int64_t cnt = hlo_shape_numel(&a[i]->shape);
    for (int64_t k = 0; k < cnt; k++) {
      double v = tm_rand();
      if (hlo_type_is_float(a[i]->shape.type)) hlo_store_f64(a[i]->shape.type, a[i]->data, k, v);
      else hlo_store_s64(a[i]->shape.type, a[i]->data, k, (int64_t)floor(v * 16));
    }
  }
  return a;
}

static void tm_free_args(hlo_literal **a, int n) {
  for (int i = 0; i < n; i++) hlo_literal_free(a[i]);
  free(a);
}

/* Is every dot of |m| canonical; how many transposes are there. */
static void tm_scan(const hlo_module *m, bool *canonical, int *ntrans) {
  *canonical = true;
  *ntrans = 0;
  for (ptrdiff_t c = 0; c < arrlen(m->comps); c++)
    for (ptrdiff_t i = 0; i < arrlen(m->comps[c]->instrs); i++) {
      const hlo_instr *x = m->comps[c]->instrs[i];
      if (x->op == HLO_OP_TRANSPOSE) (*ntrans)++;
      if (x->op != HLO_OP_DOT) continue;
      int r = x->operands[0]->shape.rank;
      const hlo_dot_dims *d = &x->dot;
      bool ok = (r == 2 || r == 3) && x->operands[1]->shape.rank == r && d->lhs_batch.n == r - 2 &&
                d->lhs_contract.n == 1 && d->rhs_contract.n == 1 && d->lhs_contract.v[0] == r - 1 &&
                (d->rhs_contract.v[0] == r - 1 || d->rhs_contract.v[0] == r - 2) &&
                (r == 2 || (d->lhs_batch.v[0] == 0 && d->rhs_batch.v[0] == 0));
      if (!ok) *canonical = false;
    }
}

/* ---- dot_canon -------------------------------------------------------------------------------- */

/* want_trans: transposes after the pass; an already canonical dot is left alone. */
static const struct { const char *name, *text; int want_trans; } tm_canon_cases[] = {
  { "batch dims in the middle",
    "HloModule t\nENTRY e {\n  a = f32[3,4,2,5] parameter(0)\n  b = f32[5,2,6] parameter(1)\n"
    "  ROOT d = f32[2,3,4,6] dot(a, b), lhs_batch_dims={2}, rhs_batch_dims={1}, "
    "lhs_contracting_dims={3}, rhs_contracting_dims={0}\n}\n", 2 },
  { "two contracting dims, listed out of order",
    "HloModule t\nENTRY e {\n  a = f32[4,3,5] parameter(0)\n  b = f32[5,4,6] parameter(1)\n"
    "  ROOT d = f32[3,6] dot(a, b), lhs_contracting_dims={2,0}, rhs_contracting_dims={0,1}\n}\n", 1 },
  { "transposed rhs (x @ w.T), batched 3-d",
    "HloModule t\nENTRY e {\n  a = f32[2,7,8] parameter(0)\n  b = f32[9,8] parameter(1)\n"
    "  ROOT d = f32[2,7,9] dot(a, b), lhs_contracting_dims={2}, rhs_contracting_dims={1}\n}\n", 0 },
  { "attention scores q @ k^T, batch B,H",
    "HloModule t\nENTRY e {\n  q = f32[2,3,5,4] parameter(0)\n  k = f32[2,3,6,4] parameter(1)\n"
    "  ROOT s = f32[2,3,5,6] dot(q, k), lhs_batch_dims={0,1}, rhs_batch_dims={0,1}, "
    "lhs_contracting_dims={3}, rhs_contracting_dims={3}\n}\n", 0 },
  { "lhs transposed, batch last",
    "HloModule t\nENTRY e {\n  a = f32[5,3,2] parameter(0)\n  b = f32[2,5,4] parameter(1)\n"
    "  ROOT d = f32[2,3,4] dot(a, b), lhs_batch_dims={2}, rhs_batch_dims={0}, "
    "lhs_contracting_dims={0}, rhs_contracting_dims={1}\n}\n", 1 },
  { "vector . vector",
    "HloModule t\nENTRY e {\n  a = f32[8] parameter(0)\n  b = f32[8] parameter(1)\n"
    "  ROOT d = f32[] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n}\n", 0 },
  { "matrix . vector",
    "HloModule t\nENTRY e {\n  a = f32[4,8] parameter(0)\n  b = f32[8] parameter(1)\n"
    "  ROOT d = f32[4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n", 0 },
  { "outer product (no contracting dims)",
    "HloModule t\nENTRY e {\n  a = f32[3] parameter(0)\n  b = f32[4] parameter(1)\n"
    "  ROOT d = f32[3,4] dot(a, b), lhs_contracting_dims={}, rhs_contracting_dims={}\n}\n", 0 },
  { "s32, used twice",
    "HloModule t\nENTRY e {\n  a = s32[4,3] parameter(0)\n  b = s32[5,4] parameter(1)\n"
    "  d = s32[3,5] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={1}\n"
    "  ROOT s = s32[3,5] add(d, d)\n}\n", 1 },
  { "dot inside a fusion",
    "HloModule t\nf {\n  p0 = f32[6,2,3] parameter(0)\n  p1 = f32[3,6,5] parameter(1)\n"
    "  ROOT d = f32[6,2,5] dot(p0, p1), lhs_batch_dims={0}, rhs_batch_dims={1}, "
    "lhs_contracting_dims={2}, rhs_contracting_dims={0}\n}\n"
    "ENTRY e {\n  a = f32[6,2,3] parameter(0)\n  b = f32[3,6,5] parameter(1)\n"
    "  ROOT r = f32[6,2,5] fusion(a, b), kind=kOutput, calls=f\n}\n", 1 },
};

static void test_dot_canon_cases(void **state) {
  hj_ctx_t *ctx = tu_ctx();
  for (size_t ci = 0; ci < sizeof tm_canon_cases / sizeof tm_canon_cases[0]; ci++) {
    hlo_module *m = tm_parse(ctx, tm_canon_cases[ci].text);
    int n;
    hlo_literal **args = tm_args(ctx, m, &n);
    hlo_literal *before = NULL, *after = NULL;
    CHECK_OK(ctx, hlo_eval_module(ctx, m, args, n, &before));
    bool changed = false, canonical;
    int ntrans;
    CHECK_OK(ctx, hlo_pass_dot_canon(NULL, m, &changed));
    CHECK_OK(ctx, hlo_verify_module(m));
    tm_scan(m, &canonical, &ntrans);
    CHECK_OK(ctx, hlo_eval_module(ctx, m, args, n, &after));
    if (!changed || !canonical || ntrans != tm_canon_cases[ci].want_trans ||
        !hlo_literal_equal(before, after)) {
      char *txt = NULL;
      hlo_print_module(m, &txt);
      fail_msg("case '%s': changed %d canonical %d transposes %d (want %d) equal %d\n%s",
               tm_canon_cases[ci].name, changed, canonical, ntrans, tm_canon_cases[ci].want_trans,
               hlo_literal_equal(before, after), txt ? txt : "");
    }
    /* a second run finds nothing to do */
    CHECK_OK(ctx, hlo_pass_dot_canon(NULL, m, &changed));
    assert_false(changed);
    hlo_literal_free(before);
    hlo_literal_free(after);
    tm_free_args(args, n);
    hlo_module_free(m);
  }
  hj_ctx_destroy(ctx);
}

static void test_dot_canon_leaves_canonical(void **state) {
  hj_ctx_t *ctx = tu_ctx();
  hlo_module *m = tm_parse(ctx,
      "HloModule t\nENTRY e {\n  a = f32[2,3,4] parameter(0)\n  b = f32[2,5,4] parameter(1)\n"
      "  ROOT d = f32[2,3,5] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, "
      "lhs_contracting_dims={2}, rhs_contracting_dims={2}\n}\n");
  bool changed = true;
  CHECK_OK(ctx, hlo_pass_dot_canon(NULL, m, &changed));
  assert_false(changed);
  assert_int_equal(arrlen(m->entry->instrs), 3);
  hlo_module_free(m);
  hj_ctx_destroy(ctx);
}

/* ---- the matmul kernels ------------------------------------------------------------------------ */

typedef struct tm_mm {
  hlo_module *m;
  struct emit_matmul_plan *plan;
} tm_mm;

static int tm_vector_bytes(cpu_jit *j) {
  const char *f = cpu_jit_cpu_features(j);
  return strstr(f, "+avx512f") ? 64 : strstr(f, "+avx2") ? 32 : 16;
}

/* Emits the fusion at the entry root of |text|; returns the emitter's status. */
static hj_status tm_build_text(hj_ctx_t *ctx, cpu_jit *j, const char *text, tm_mm *out) {
  out->m = tm_parse(ctx, text);
  out->plan = NULL;
  const hlo_instr *fusion = out->m->entry->root;
  cpu_jit_module jm;
  char name[64];
  cpu_jit_unique_name(j, "mm", name, sizeof name);
  CHECK_OK(ctx, cpu_jit_module_create(j, name, &jm));
  emit_module em;
  emit_target tg = { .vector_bytes = tm_vector_bytes(j), .has_fma = true };
  emit_module_init(&em, ctx, jm.llctx, jm.mod, &tg);
  emit_kernel k;
  hj_status st = emit_matmul_fusion(&em, fusion, hlo_fusion_hero(fusion->calls[0]), name, &k);
  emit_module_dispose(&em);
  if (st) {
    cpu_jit_module_dispose(&jm);
    return st;
  }
  assert_int_equal(k.kind, EMIT_KIND_MATMUL);
  CHECK_OK(ctx, cpu_jit_optimize(j, jm.mod));
  CHECK_OK(ctx, cpu_jit_add_module(j, &jm, NULL));
  out->plan = k.matmul;
  CHECK_OK(ctx, cpu_matmul_prepare(j, out->plan));
  return HJ_OK;
}

static void tm_build(hj_ctx_t *ctx, cpu_jit *j, int64_t B, int64_t M, int64_t K, int64_t N,
                     bool trans, tm_mm *out) {
  char text[1200], ls[64], rs[64], os[64], bd[64] = "";
  int64_t rr = trans ? N : K, rc = trans ? K : N;
  if (B > 1) {
    snprintf(ls, sizeof ls, "f32[%lld,%lld,%lld]", (long long)B, (long long)M, (long long)K);
    snprintf(rs, sizeof rs, "f32[%lld,%lld,%lld]", (long long)B, (long long)rr, (long long)rc);
    snprintf(os, sizeof os, "f32[%lld,%lld,%lld]", (long long)B, (long long)M, (long long)N);
    snprintf(bd, sizeof bd, "lhs_batch_dims={0}, rhs_batch_dims={0}, ");
  } else {
    snprintf(ls, sizeof ls, "f32[%lld,%lld]", (long long)M, (long long)K);
    snprintf(rs, sizeof rs, "f32[%lld,%lld]", (long long)rr, (long long)rc);
    snprintf(os, sizeof os, "f32[%lld,%lld]", (long long)M, (long long)N);
  }
  int r = B > 1 ? 3 : 2;
  snprintf(text, sizeof text,
           "HloModule mm\nfused {\n  p0 = %s parameter(0)\n  p1 = %s parameter(1)\n"
           "  ROOT d = %s dot(p0, p1), %slhs_contracting_dims={%d}, rhs_contracting_dims={%d}\n}\n"
           "ENTRY e {\n  a = %s parameter(0)\n  b = %s parameter(1)\n"
           "  ROOT f = %s fusion(a, b), kind=kOutput, calls=fused\n}\n",
           ls, rs, os, bd, r - 1, trans ? r - 1 : r - 2, ls, rs, os);
  hj_status st = tm_build_text(ctx, j, text, out);
  if (st) fail_msg("emit: %s", hj_ctx_error(ctx));
}

static void tm_run(tm_mm *mm, hlo_literal **args, float *c, tp_pool *pool) {
  size_t sb = cpu_matmul_scratch_bytes(mm->plan, pool ? tp_size(pool) : 1);
  void *scr = sb ? aligned_alloc(64, (sb + 63) / 64 * 64) : NULL;
  void *bufs[3] = { args[0]->data, args[1]->data, c };
  cpu_matmul_run(mm->plan, bufs, pool, scr);
  free(scr);
}

static void tm_check_shape(hj_ctx_t *ctx, cpu_jit *j, tp_pool *pool, int64_t B, int64_t M,
                           int64_t K, int64_t N, bool trans) {
  tm_mm mm;
  tm_build(ctx, j, B, M, K, N, trans, &mm);
  int n;
  hlo_literal **args = tm_args(ctx, mm.m, &n);
  hlo_literal *ref = NULL;
  CHECK_OK(ctx, hlo_eval_module(ctx, mm.m, args, n, &ref));
  float *c = malloc((size_t)(B * M * N) * 4 + 4);
  for (int64_t i = 0; i < B * M * N; i++) c[i] = NAN;   /* every element must be written */
  tm_run(&mm, args, c, pool);
  const float *a = (const float *)args[0]->data, *bm = (const float *)args[1]->data;
  const float *r = (const float *)ref->data;
  double worst = 0;
  for (int64_t bi = 0; bi < B; bi++)
    for (int64_t i = 0; i < M; i++)
      for (int64_t jn = 0; jn < N; jn++) {
        double s = 0;
        for (int64_t k = 0; k < K; k++) {
          double bv = trans ? bm[(bi * N + jn) * K + k] : bm[(bi * K + k) * N + jn];
          s += fabs((double)a[(bi * M + i) * K + k] * bv);
        }
        int64_t o = (bi * M + i) * N + jn;
        double d = fabs((double)c[o] - r[o]), tol = 1e-5 * sqrt((double)K) * s;
        if (!(d <= tol))
          fail_msg("B=%lld M=%lld K=%lld N=%lld%s: C[%lld,%lld,%lld] = %.9g, evaluator %.9g (tol %.3g)",
                   (long long)B, (long long)M, (long long)K, (long long)N, trans ? " (rhs^T)" : "",
                   (long long)bi, (long long)i, (long long)jn, c[o], r[o], tol);
        if (s > 0 && d / s > worst) worst = d / s;
      }
  free(c);
  hlo_literal_free(ref);
  tm_free_args(args, n);
  cpu_matmul_plan_free(mm.plan);
  hlo_module_free(mm.m);
}

static void test_matmul_vs_evaluator(void **state) {
  hj_ctx_t *ctx = tu_ctx();
  cpu_jit *j = NULL;
  CHECK_OK(ctx, cpu_jit_create(ctx, &j));
  tp_pool *pool = NULL;
  CHECK_OK(ctx, tp_create(2, &pool));
  static const int64_t sz[][4] = {   /* B, M, K, N */
    { 1, 1, 1, 1 }, { 1, 3, 17, 127 }, { 1, 17, 127, 3 }, { 1, 127, 3, 17 },
    { 1, 1, 1000, 127 }, { 1, 1, 127, 1000 }, { 1, 127, 1000, 17 }, { 1, 1000, 17, 127 },
    { 1, 17, 1000, 1000 }, { 1, 1600, 5, 60 }, { 1, 64, 768, 96 }, { 3, 17, 33, 50 },
    { 4, 1, 300, 70 },
    { 4, 1, 40, 70 }, { 2, 9, 1, 1 },
    { 1, 1, 127, 1100 }, { 1, 1, 1000, 1030 }, { 2, 1, 9, 2000 },   /* gemv, rows of B 12, 4, 1 at a time */
  };
  for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++)
    for (int t = 0; t < 2; t++)
      tm_check_shape(ctx, j, pool, sz[i][0], sz[i][1], sz[i][2], sz[i][3], t == 1);
  tp_destroy(pool);
  cpu_jit_destroy(j);
  hj_ctx_destroy(ctx);
}

static void test_matmul_deterministic(void **state) {
  hj_ctx_t *ctx = tu_ctx();
  cpu_jit *j = NULL;
  CHECK_OK(ctx, cpu_jit_create(ctx, &j));
  tp_pool *pools[3] = { NULL, NULL, NULL };
  for (int t = 0; t < 3; t++) CHECK_OK(ctx, tp_create(t + 1, &pools[t]));
  static const int64_t sz[][5] = {   /* B, M, K, N, trans */
    { 1, 127, 1000, 300, 0 }, { 1, 64, 800, 500, 1 }, { 1, 1, 1000, 1000, 0 },
    { 1, 1, 999, 301, 1 }, { 5, 20, 70, 90, 0 }, { 1, 300, 50, 40, 1 }, { 3, 1, 500, 200, 0 },
    { 1, 1, 1000, 1100, 0 },
  };
  for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
    tm_mm mm;
    tm_build(ctx, j, sz[i][0], sz[i][1], sz[i][2], sz[i][3], sz[i][4] != 0, &mm);
    int n;
    hlo_literal **args = tm_args(ctx, mm.m, &n);
    size_t cnt = (size_t)(sz[i][0] * sz[i][1] * sz[i][3]);
    float *c[3];
    for (int t = 0; t < 3; t++) {
      c[t] = malloc(cnt * 4);
      tm_run(&mm, args, c[t], pools[t]);
    }
    for (int t = 1; t < 3; t++)
      if (memcmp(c[0], c[t], cnt * 4) != 0)
        fail_msg("shape %zu: %d threads differ from 1 thread", i, t + 1);
    for (int t = 0; t < 3; t++) free(c[t]);
    tm_free_args(args, n);
    cpu_matmul_plan_free(mm.plan);
    hlo_module_free(mm.m);
  }
  for (int t = 0; t < 3; t++) tp_destroy(pools[t]);
  cpu_jit_destroy(j);
  hj_ctx_destroy(ctx);
}

/* bias + GELU (x * sigmoid-like tanh form) + residual, through a reshape adding a size-1
   dim: out[0,m,n] = g(dot[m,n] + bias[n]) + res[0,m,n], g(x) = x * (1 + tanh(x/2)) / 2. */
static void tm_check_epilogue(hj_ctx_t *ctx, cpu_jit *j, tp_pool **pools, int64_t M, int64_t K,
                              int64_t N, bool trans) {
  char text[3000], ls[64], rs[64], ms[64], os[64];
  snprintf(ls, sizeof ls, "f32[%lld,%lld]", (long long)M, (long long)K);
  snprintf(rs, sizeof rs, "f32[%lld,%lld]", (long long)(trans ? N : K), (long long)(trans ? K : N));
  snprintf(ms, sizeof ms, "f32[%lld,%lld]", (long long)M, (long long)N);
  snprintf(os, sizeof os, "f32[1,%lld,%lld]", (long long)M, (long long)N);
  snprintf(text, sizeof text,
           "HloModule epi\nfused {\n  p0 = %s parameter(0)\n  p1 = %s parameter(1)\n"
           "  p2 = f32[%lld] parameter(2)\n  p3 = %s parameter(3)\n"
           "  d = %s dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={%d}\n"
           "  bb = %s broadcast(p2), dimensions={1}\n  x = %s add(d, bb)\n"
           "  c = f32[] constant(0.5)\n  cb = %s broadcast(c), dimensions={}\n"
           "  h = %s multiply(x, cb)\n  t = %s tanh(h)\n  one = f32[] constant(1)\n"
           "  ob = %s broadcast(one), dimensions={}\n  u = %s add(t, ob)\n  v = %s multiply(h, u)\n"
           "  r = %s reshape(v)\n  ROOT o = %s add(r, p3)\n}\n"
           "ENTRY e {\n  a = %s parameter(0)\n  b = %s parameter(1)\n  bias = f32[%lld] parameter(2)\n"
           "  res = %s parameter(3)\n  ROOT f = %s fusion(a, b, bias, res), kind=kOutput, calls=fused\n}\n",
           ls, rs, (long long)N, os, ms, trans ? 1 : 0, ms, ms, ms, ms, ms, ms, ms, ms, os, os, ls, rs,
           (long long)N, os, os);
  tm_mm mm;
  const hlo_instr *dot = NULL;
  mm.m = NULL;
  if (tm_build_text(ctx, j, text, &mm)) fail_msg("emit: %s", hj_ctx_error(ctx));
  const hlo_comp *fc = mm.m->entry->root->calls[0];
  for (ptrdiff_t k = 0; k < arrlen(fc->instrs); k++)
    if (fc->instrs[k]->op == HLO_OP_DOT) dot = fc->instrs[k];
  assert_non_null(dot);
  assert_true(mm.plan->epi != NULL);
  int n;
  hlo_literal **args = tm_args(ctx, mm.m, &n);
  hlo_literal *ref = NULL;
  CHECK_OK(ctx, hlo_eval_module(ctx, mm.m, args, n, &ref));
  float *c[3];
  for (int t = 0; t < 3; t++) {
    c[t] = malloc((size_t)(M * N) * 4);
    size_t sb = cpu_matmul_scratch_bytes(mm.plan, tp_size(pools[t]));
    void *scr = sb ? aligned_alloc(64, (sb + 63) / 64 * 64) : NULL;
    void *bufs[5] = { args[0]->data, args[1]->data, args[2]->data, args[3]->data, c[t] };
    cpu_matmul_run(mm.plan, bufs, pools[t], scr);
    free(scr);
  }
  const float *a = (const float *)args[0]->data, *bm = (const float *)args[1]->data;
  const float *r = (const float *)ref->data;
  for (int64_t i = 0; i < M; i++)
    for (int64_t jn = 0; jn < N; jn++) {
      double sum = 0;
      for (int64_t k = 0; k < K; k++)
        sum += fabs((double)a[i * K + k] * (trans ? bm[jn * K + k] : bm[k * N + jn]));
      int64_t o = i * N + jn;
      double d = fabs((double)c[0][o] - r[o]), tol = 2e-5 * sqrt((double)K) * sum + 1e-6 * (1 + fabs(r[o]));
      if (!(d <= tol))
        fail_msg("epilogue M=%lld K=%lld N=%lld%s: out[%lld,%lld] = %.9g, evaluator %.9g (tol %.3g)",
                 (long long)M, (long long)K, (long long)N, trans ? " (rhs^T)" : "", (long long)i,
                 (long long)jn, c[0][o], r[o], tol);
    }
  for (int t = 1; t < 3; t++)
    if (memcmp(c[0], c[t], (size_t)(M * N) * 4)) fail_msg("epilogue: %d threads differ", t + 1);
  for (int t = 0; t < 3; t++) free(c[t]);
  hlo_literal_free(ref);
  tm_free_args(args, n);
  cpu_matmul_plan_free(mm.plan);
  hlo_module_free(mm.m);
}

static void test_matmul_epilogue(void **state) {
  hj_ctx_t *ctx = tu_ctx();
  cpu_jit *j = NULL;
  CHECK_OK(ctx, cpu_jit_create(ctx, &j));
  tp_pool *pools[3];
  for (int t = 0; t < 3; t++) CHECK_OK(ctx, tp_create(t + 1, &pools[t]));
  static const int64_t sz[][4] = {   /* M, K, N, trans */
    { 1, 100, 70, 0 }, { 1, 64, 33, 1 }, { 37, 200, 130, 0 }, { 64, 768, 96, 1 }, { 3, 1000, 17, 0 },
  };
  for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++)
    tm_check_epilogue(ctx, j, pools, sz[i][0], sz[i][1], sz[i][2], sz[i][3] != 0);
  for (int t = 0; t < 3; t++) tp_destroy(pools[t]);
  cpu_jit_destroy(j);
  hj_ctx_destroy(ctx);
}

static void test_matmul_unsupported(void **state) {
  hj_ctx_t *ctx = tu_ctx();
  cpu_jit *j = NULL;
  CHECK_OK(ctx, cpu_jit_create(ctx, &j));
  static const char *texts[] = {
    "HloModule t\nf {\n  p0 = f64[3,4] parameter(0)\n  p1 = f64[4,5] parameter(1)\n"
    "  ROOT d = f64[3,5] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n"
    "ENTRY e {\n  a = f64[3,4] parameter(0)\n  b = f64[4,5] parameter(1)\n"
    "  ROOT r = f64[3,5] fusion(a, b), kind=kOutput, calls=f\n}\n",
    "HloModule t\nf {\n  p0 = f32[4,3] parameter(0)\n  p1 = f32[4,5] parameter(1)\n"
    "  ROOT d = f32[3,5] dot(p0, p1), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n}\n"
    "ENTRY e {\n  a = f32[4,3] parameter(0)\n  b = f32[4,5] parameter(1)\n"
    "  ROOT r = f32[3,5] fusion(a, b), kind=kOutput, calls=f\n}\n",
    "HloModule t\nf {\n  p0 = f32[3,4] parameter(0)\n  p1 = f32[4,5] parameter(1)\n"
    "  d = f32[3,5] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  ROOT n = f32[5,3] transpose(d), dimensions={1,0}\n}\n"
    "ENTRY e {\n  a = f32[3,4] parameter(0)\n  b = f32[4,5] parameter(1)\n"
    "  ROOT r = f32[5,3] fusion(a, b), kind=kOutput, calls=f\n}\n",
  };
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
    hlo_module *m = tm_parse(ctx, texts[i]);
    const hlo_instr *fusion = m->entry->root, *dot = NULL;
    const hlo_comp *fc = fusion->calls[0];
    for (ptrdiff_t k = 0; k < arrlen(fc->instrs); k++)
      if (fc->instrs[k]->op == HLO_OP_DOT) dot = fc->instrs[k];
    cpu_jit_module jm;
    CHECK_OK(ctx, cpu_jit_module_create(j, "u", &jm));
    emit_module em;
    emit_target tg = { .vector_bytes = 32 };
    emit_module_init(&em, ctx, jm.llctx, jm.mod, &tg);
    emit_kernel k;
    hj_status st = emit_matmul_fusion(&em, fusion, dot, "u", &k);
    emit_module_dispose(&em);
    cpu_jit_module_dispose(&jm);
    assert_int_equal(st, HJ_ERR_UNSUPPORTED);
    assert_non_null(strstr(hj_ctx_error(ctx), "emit matmul"));
    hlo_module_free(m);
  }
  cpu_jit_destroy(j);
  hj_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_dot_canon_cases),
    cmocka_unit_test(test_dot_canon_leaves_canonical),
    cmocka_unit_test(test_matmul_vs_evaluator),
    cmocka_unit_test(test_matmul_deterministic),
    cmocka_unit_test(test_matmul_epilogue),
    cmocka_unit_test(test_matmul_unsupported),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
