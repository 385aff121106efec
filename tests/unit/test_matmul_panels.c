/* test_matmul_panels.c — weights in panel order (hj_linear's HJ_LINEAR_PANELS,
   hj_linear_panels, hj_linear_pack; passes/dot_canon.c, emitters/matmul.c and
   backends/cpu/cpu_matmul.c's rhs_panels path), through the public API.

   Pack: hj_linear_pack from both layouts against the definition written out here
   (block (p, q), row i, column j = w[p*kc + i][q*nr + j]).
   Matmul: hj_linear(x, panels, b) + a GELU, on the CPU backend, against the evaluator
   (HJ_BACKEND_INTERP: the dot by its definition, summing in double) and against the same
   layer with w (in, out) on the CPU; shapes with rows not a multiple of mr, more rows than
   an A block, M = 1 (the gemv), several K steps, one and many panels; tolerance per element
   1e-5 * sqrt(K) * sum_k |x w| (+ the tanh's 1e-6). Every one compiles to a matmul kernel
   with no evaluator fallback. 1, 2 and 3 threads give the same bits.
   bf16: weights rounded to bf16, packed by hj_linear_pack_bf16 and read as bf16 panels,
   give the bits of f32 panels of the widened weights (1 and 2 threads; the pack's bits too);
   bf16 weights as stored, (in, out) and (out, in) (the plain gemv's row groups, the gemvt,
   the gemm), give the bits of the widened f32 weights in the same layout.
   Consumers: a residual epilogue, a split in three, a row sum, two users, at M = 1, 5, 64,
   against the evaluator (1e-5 of the output's largest value), one matmul kernel each, whose
   fusion takes as many operands (the epilogue's bias and residual) as in the same graph
   with w (in, out) (from the after-passes dumps).
   dot_canon: a panel dot of the target's nr stays as it is; with another nr (and on a
   target without panels) it becomes a plain canonical dot, with the evaluator's bits.
   Errors: hj_linear_panels for an out that is not a multiple of nr and for the evaluator
   backend, hj_linear_pack's bad arguments, hj_linear with a wrong panel shape. */
#include "testutil.h"
#include "cpu_testutil.h"

#if !__has_include(<llvm-c/Core.h>)
static void test_panels_not_built(void **state) {
  print_message("skipped: LLVM-C headers not on the include path (backends/cpu/cpu.mk)\n");
  skip();
}
int main(void) {
  const struct CMUnitTest tests[] = { cmocka_unit_test(test_panels_not_built) };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#else

static unsigned tp_seed = 7;
static float tp_rand(void) {
  tp_seed = tp_seed * 1664525u + 1013904223u;
  return (float)((tp_seed >> 8) & 0xffff) / 65536.0f - 0.5f;
}

/* ---- packing ------------------------------------------------------------------------------ */

static void test_pack(void **state) {
  hj_ctx_t *ctx = cb_ctx(HJ_BACKEND_INTERP, 1, NULL);
  const int64_t in = 24, out = 20, kc = 8, nr = 4, Q = out / nr;
  float w[24 * 20], wt[20 * 24], a[24 * 20], b[24 * 20];
  for (int64_t i = 0; i < in * out; i++) w[i] = (float)i;
  for (int64_t k = 0; k < in; k++)
    for (int64_t n = 0; n < out; n++) wt[n * in + k] = w[k * out + n];
  CHECK_OK(ctx, hj_linear_pack(ctx, w, HJ_LINEAR_IN_OUT, in, out, kc, nr, a));
  CHECK_OK(ctx, hj_linear_pack(ctx, wt, HJ_LINEAR_OUT_IN, in, out, kc, nr, b));
  for (int64_t p = 0; p < in / kc; p++)
    for (int64_t q = 0; q < Q; q++)
      for (int64_t i = 0; i < kc; i++)
        for (int64_t j = 0; j < nr; j++) {
          int64_t o = ((p * Q + q) * kc + i) * nr + j;
          float want = w[(p * kc + i) * out + q * nr + j];
          if (a[o] != want || b[o] != want)
            fail_msg("block (%lld,%lld) [%lld,%lld]: %g / %g, want %g", (long long)p, (long long)q,
                     (long long)i, (long long)j, a[o], b[o], want);
        }
  /* bad arguments: a message, nothing written past dst */
  assert_int_equal(hj_linear_pack(ctx, w, HJ_LINEAR_IN_OUT, in, out, 5, nr, a), HJ_ERR_INVALID_ARG);
  assert_non_null(strstr(hj_ctx_error(ctx), "kc"));
  assert_int_equal(hj_linear_pack(ctx, w, HJ_LINEAR_PANELS, in, out, kc, nr, a), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_linear_pack(ctx, w, HJ_LINEAR_IN_OUT, in, out, kc, nr, w + 1), HJ_ERR_INVALID_ARG);
  assert_non_null(strstr(hj_ctx_error(ctx), "overlaps"));
  assert_int_equal(hj_linear_pack(ctx, NULL, HJ_LINEAR_IN_OUT, in, out, kc, nr, a), HJ_ERR_INVALID_ARG);
  hj_ctx_destroy(ctx);
}

static void test_panels_query(void **state) {
  hj_ctx_t *ctx = cb_ctx(HJ_BACKEND_CPU, 1, NULL);
  int64_t kc = 0, nr = 0;
  CHECK_OK(ctx, hj_linear_panels(ctx, HJ_BACKEND_CPU, 768, 2304, &kc, &nr));
  assert_true(nr == 48 || nr == 16 || nr == 8);
  assert_int_equal(kc, 384);
  CHECK_OK(ctx, hj_linear_panels(ctx, HJ_BACKEND_CPU, 3072, 768, &kc, &nr));
  assert_int_equal(kc, 384);
  CHECK_OK(ctx, hj_linear_panels(ctx, HJ_BACKEND_CPU, 144, 432, &kc, &nr));
  assert_int_equal(kc, 144);
  assert_int_equal(hj_linear_panels(ctx, HJ_BACKEND_CPU, 768, nr * 3 + 1, &kc, &nr), HJ_ERR_UNSUPPORTED);
  assert_non_null(strstr(hj_ctx_error(ctx), "multiple"));
  assert_int_equal(hj_linear_panels(ctx, HJ_BACKEND_CPU, 1001, 480, &kc, &nr), HJ_ERR_UNSUPPORTED);
  assert_int_equal(hj_linear_panels(ctx, HJ_BACKEND_INTERP, 768, 768, &kc, &nr), HJ_ERR_UNSUPPORTED);
  assert_non_null(strstr(hj_ctx_error(ctx), "no panel order"));
  assert_int_equal(hj_linear_panels(ctx, HJ_BACKEND_CPU, 0, 768, &kc, &nr), HJ_ERR_INVALID_ARG);
  hj_ctx_destroy(ctx);
}

/* ---- the matmul ----------------------------------------------------------------------------- */

/* gelu_tanh(x @ w + b) with |w| given as |wbuf| in |layout| (IN_OUT: (K, N); PANELS). */
static hj_buffer_t *tp_layer(hj_ctx_t *ctx, hj_buffer_t *x, hj_buffer_t *wbuf, hj_buffer_t *b,
                             hj_linear_layout_t layout) {
  hj_graph_t *g = NULL;
  CHECK_OK(ctx, hj_graph_create(ctx, "layer", &g));
  hj_tensor_t X = hj_param(g, HJ_F32, hj_buffer_shape(x), "x");
  hj_tensor_t W = hj_param(g, hj_buffer_dtype(wbuf), hj_buffer_shape(wbuf), "w");
  hj_tensor_t B = hj_param(g, HJ_F32, hj_buffer_shape(b), "b");
  CHECK_OK(ctx, hj_graph_output(g, hj_gelu_tanh(hj_linear(X, W, B, layout))));
  hj_exec_t *e = NULL;
  CHECK_OK(ctx, hj_compile(g, &e));
  hj_exec_stats_t st;
  CHECK_OK(ctx, hj_exec_stats(e, &st));
  if (hj_exec_backend(e) == HJ_BACKEND_CPU && (st.kernels_matmul != 1 || st.evaluator_fallbacks != 0))
    fail_msg("layout %d: %d matmul kernels, %d evaluator fallbacks (want 1, 0): %s", (int)layout,
             st.kernels_matmul, st.evaluator_fallbacks, st.note);
  hj_buffer_t *in[3] = { x, wbuf, b }, *out[1] = { NULL };
  CHECK_OK(ctx, hj_exec_run(e, in, 3, out, 1));
  hj_exec_destroy(e);
  hj_graph_destroy(g);
  return out[0];
}

typedef struct tp_data {
  int64_t M, K, N, kc, nr;
  float *x, *w, *wp, *b;
} tp_data;

static void tp_data_make(tp_data *d, int64_t M, int64_t K, int64_t N, int64_t kc, int64_t nr) {
  *d = (tp_data){ M, K, N, kc, nr, malloc(sizeof(float) * (size_t)(M * K)),
                  malloc(sizeof(float) * (size_t)(K * N)), malloc(sizeof(float) * (size_t)(K * N)),
                  malloc(sizeof(float) * (size_t)N) };
  for (int64_t i = 0; i < M * K; i++) d->x[i] = tp_rand();
  for (int64_t i = 0; i < K * N; i++) d->w[i] = tp_rand();
  for (int64_t i = 0; i < N; i++) d->b[i] = tp_rand();
}

static void tp_data_free(tp_data *d) {
  free(d->x), free(d->w), free(d->wp), free(d->b);
}

/* The layer on |ctx| with |d|'s weights in panel order (|d|->kc, |d|->nr), or (layout
   IN_OUT) as they are; a malloc'd copy of the result. */
static float *tp_run(hj_ctx_t *ctx, const tp_data *d, hj_linear_layout_t layout) {
  hj_buffer_t *x, *w, *b;
  CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_F32, HJ_SHAPE(d->M, d->K), d->x, &x));
  if (layout == HJ_LINEAR_PANELS) {
    CHECK_OK(ctx, hj_linear_pack(ctx, d->w, HJ_LINEAR_IN_OUT, d->K, d->N, d->kc, d->nr, d->wp));
    CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_F32, HJ_SHAPE(d->K / d->kc, d->N / d->nr, d->kc, d->nr),
                                      d->wp, &w));
  } else {
    CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_F32, HJ_SHAPE(d->K, d->N), d->w, &w));
  }
  CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_F32, HJ_SHAPE(d->N), d->b, &b));
  hj_buffer_t *y = tp_layer(ctx, x, w, b, layout);
  float *r = malloc(sizeof(float) * (size_t)(d->M * d->N));
  CHECK_OK(ctx, hj_buffer_copy_to_host(y, r, sizeof(float) * (size_t)(d->M * d->N)));
  hj_buffer_destroy(x), hj_buffer_destroy(w), hj_buffer_destroy(b), hj_buffer_destroy(y);
  return r;
}

static void tp_compare(const tp_data *d, const float *got, const float *ref, const char *what) {
  for (int64_t i = 0; i < d->M; i++)
    for (int64_t n = 0; n < d->N; n++) {
      double s = fabs(d->b[n]);
      for (int64_t k = 0; k < d->K; k++) s += fabs((double)d->x[i * d->K + k] * d->w[k * d->N + n]);
      int64_t o = i * d->N + n;
      double diff = fabs((double)got[o] - ref[o]), tol = 1e-5 * sqrt((double)d->K) * s + 1e-6 * (1 + fabs(ref[o]));
      if (!(diff <= tol))
        fail_msg("M=%lld K=%lld N=%lld kc=%lld nr=%lld, %s: y[%lld,%lld] = %.9g, reference %.9g (tol %.3g)",
                 (long long)d->M, (long long)d->K, (long long)d->N, (long long)d->kc, (long long)d->nr, what,
                 (long long)i, (long long)n, got[o], ref[o], tol);
    }
}

static void test_panels_matmul(void **state) {
  hj_ctx_t *cpu[3] = { cb_ctx(HJ_BACKEND_CPU, 1, NULL), cb_ctx(HJ_BACKEND_CPU, 2, NULL), cb_ctx(HJ_BACKEND_CPU, 3, NULL) };
  hj_ctx_t *ref = cb_ctx(HJ_BACKEND_INTERP, 1, NULL);
  int64_t kc0, nr;
  CHECK_OK(cpu[0], hj_linear_panels(cpu[0], HJ_BACKEND_CPU, 768, 768, &kc0, &nr));
  static const int64_t sz[][4] = {   /* M, K, kc, panels (N = panels * nr) */
    { 1, 16, 16, 1 }, { 1, 768, 384, 5 }, { 3, 40, 8, 2 }, { 17, 96, 32, 3 }, { 64, 768, 384, 4 },
    { 37, 200, 200, 7 }, { 1600, 24, 8, 2 }, { 9, 1000, 40, 1 },
  };
  for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
    tp_data d;
    tp_data_make(&d, sz[i][0], sz[i][1], sz[i][3] * nr, sz[i][2], nr);
    float *want = tp_run(ref, &d, HJ_LINEAR_PANELS);
    float *plain = tp_run(cpu[0], &d, HJ_LINEAR_IN_OUT);
    float *got[3];
    for (int t = 0; t < 3; t++) got[t] = tp_run(cpu[t], &d, HJ_LINEAR_PANELS);
    tp_compare(&d, got[0], want, "panels on the CPU against the evaluator");
    tp_compare(&d, plain, want, "(in, out) on the CPU against the evaluator");
    tp_compare(&d, got[0], plain, "panels against (in, out) on the CPU");
    for (int t = 1; t < 3; t++)
      if (memcmp(got[0], got[t], sizeof(float) * (size_t)(d.M * d.N)))
        fail_msg("M=%lld K=%lld: %d threads differ from 1", (long long)d.M, (long long)d.K, t + 1);
    for (int t = 0; t < 3; t++) free(got[t]);
    free(want), free(plain);
    tp_data_free(&d);
  }
  /* another nr than the micro-kernel's: a plain dot after a transpose, still right */
  tp_data d;
  int64_t other = nr == 8 ? 16 : 8;
  tp_data_make(&d, 5, 64, 3 * other, 16, other);
  float *want = tp_run(ref, &d, HJ_LINEAR_PANELS), *got = tp_run(cpu[1], &d, HJ_LINEAR_PANELS);
  tp_compare(&d, got, want, "panels of another nr");
  free(want), free(got);
  tp_data_free(&d);
  for (int t = 0; t < 3; t++) hj_ctx_destroy(cpu[t]);
  hj_ctx_destroy(ref);
}

/* ---- bf16 panels ----------------------------------------------------------------------------
   bf16 weights in panel order (hj_linear_pack_bf16), read in place by the bf16 ukr and gemvp,
   which widen as they load: bf16 -> f32 is exact, so the layer must give the bits of the
   same layer over f32 panels of the widened weights, on 1 and 2 threads; and the bf16 pack
   must hold the bits the f32 pack puts in the same places. */

static uint16_t tp_to_bf16(float f) {   /* round to nearest even (no NaNs here) */
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7fffu + (u >> 16 & 1)) >> 16);
}

static float tp_from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static void test_panels_bf16(void **state) {
  hj_ctx_t *cpu[2] = { cb_ctx(HJ_BACKEND_CPU, 1, NULL), cb_ctx(HJ_BACKEND_CPU, 2, NULL) };
  hj_ctx_t *ref = cb_ctx(HJ_BACKEND_INTERP, 1, NULL);
  int64_t kc0, nr;
  CHECK_OK(cpu[0], hj_linear_panels(cpu[0], HJ_BACKEND_CPU, 768, 768, &kc0, &nr));
  static const int64_t sz[][4] = {   /* M, K, kc, panels (N = panels * nr) */
    { 1, 16, 16, 1 }, { 1, 768, 384, 5 }, { 3, 40, 8, 2 }, { 17, 96, 32, 3 }, { 64, 768, 384, 4 },
  };
  for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
    tp_data d;
    tp_data_make(&d, sz[i][0], sz[i][1], sz[i][3] * nr, sz[i][2], nr);
    const int64_t KN = d.K * d.N;
    uint16_t *wh = malloc(2 * (size_t)KN), *ph = malloc(2 * (size_t)KN);
    for (int64_t k = 0; k < KN; k++) d.w[k] = tp_from_bf16(wh[k] = tp_to_bf16(d.w[k]));   /* w: widened */
    CHECK_OK(cpu[0], hj_linear_pack_bf16(cpu[0], wh, HJ_LINEAR_IN_OUT, d.K, d.N, d.kc, d.nr, ph));
    CHECK_OK(cpu[0], hj_linear_pack(cpu[0], d.w, HJ_LINEAR_IN_OUT, d.K, d.N, d.kc, d.nr, d.wp));
    for (int64_t k = 0; k < KN; k++)
      if (tp_from_bf16(ph[k]) != d.wp[k]) fail_msg("bf16 pack, element %lld differs from the f32 pack", (long long)k);
    float *want = tp_run(ref, &d, HJ_LINEAR_PANELS), *wide = tp_run(cpu[0], &d, HJ_LINEAR_PANELS);
    tp_compare(&d, wide, want, "f32 panels of the widened weights against the evaluator");
    for (int t = 0; t < 2; t++) {
      hj_ctx_t *ctx = cpu[t];
      hj_buffer_t *x, *w, *b;
      CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_F32, HJ_SHAPE(d.M, d.K), d.x, &x));
      CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_BF16, HJ_SHAPE(d.K / d.kc, d.N / d.nr, d.kc, d.nr), ph, &w));
      CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_F32, HJ_SHAPE(d.N), d.b, &b));
      hj_buffer_t *y = tp_layer(ctx, x, w, b, HJ_LINEAR_PANELS);   /* one matmul kernel, no fallback */
      float *got = malloc(sizeof(float) * (size_t)(d.M * d.N));
      CHECK_OK(ctx, hj_buffer_copy_to_host(y, got, sizeof(float) * (size_t)(d.M * d.N)));
      for (int64_t o = 0; o < d.M * d.N; o++)
        if (memcmp(&got[o], &wide[o], 4))
          fail_msg("M=%lld K=%lld N=%lld, %d thread(s): bf16 panels y[%lld] = %.9g, f32 panels %.9g",
                   (long long)d.M, (long long)d.K, (long long)d.N, t + 1, (long long)o, got[o], wide[o]);
      free(got);
      hj_buffer_destroy(x), hj_buffer_destroy(w), hj_buffer_destroy(b), hj_buffer_destroy(y);
    }
    free(want), free(wide), free(wh), free(ph);
    tp_data_free(&d);
  }
  /* the bf16 pack's own errors */
  uint16_t h[4] = { 0 };
  assert_int_equal(hj_linear_pack_bf16(cpu[0], h, HJ_LINEAR_IN_OUT, 2, 2, 1, 1, h + 1), HJ_ERR_INVALID_ARG);
  assert_non_null(strstr(hj_ctx_error(cpu[0]), "hj_linear_pack_bf16: dst overlaps"));
  assert_int_equal(hj_linear_pack_bf16(cpu[0], h, HJ_LINEAR_IN_OUT, 2, 3, 1, 2, NULL), HJ_ERR_INVALID_ARG);
  for (int t = 0; t < 2; t++) hj_ctx_destroy(cpu[t]);
  hj_ctx_destroy(ref);
}

/* bf16 weights as stored, (in, out) and (out, in): the gemv for B normal in row groups of
   12, then 4, then 1 (M = 1; K = 9, 127, 768 give every mix, with 4 K blocks and one), the
   gemvt (B transposed) and the gemm (M = 3), each widening as it loads, must give the bits
   of the same layer over the widened f32 weights in the same layout, on 1 and 2 threads;
   the f32 (in, out) layer against the evaluator. */
static void test_stored_bf16(void **state) {
  hj_ctx_t *cpu[2] = { cb_ctx(HJ_BACKEND_CPU, 1, NULL), cb_ctx(HJ_BACKEND_CPU, 2, NULL) };
  hj_ctx_t *ref = cb_ctx(HJ_BACKEND_INTERP, 1, NULL);
  static const int64_t sz[][3] = {   /* M, K, N */
    { 1, 768, 1100 }, { 1, 127, 2000 }, { 1, 9, 1030 }, { 1, 1000, 300 }, { 3, 127, 1100 },
  };
  for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
    tp_data d;
    tp_data_make(&d, sz[i][0], sz[i][1], sz[i][2], 1, 1);
    const int64_t K = d.K, N = d.N, KN = K * N;
    uint16_t *wh = malloc(2 * (size_t)KN), *wth = malloc(2 * (size_t)KN);
    float *wt = malloc(sizeof(float) * (size_t)KN);
    for (int64_t k = 0; k < KN; k++) d.w[k] = tp_from_bf16(wh[k] = tp_to_bf16(d.w[k]));   /* w: widened */
    for (int64_t k = 0; k < K; k++)
      for (int64_t n = 0; n < N; n++) wt[n * K + k] = d.w[k * N + n], wth[n * K + k] = wh[k * N + n];
    float *want = tp_run(ref, &d, HJ_LINEAR_IN_OUT), *wide = tp_run(cpu[0], &d, HJ_LINEAR_IN_OUT);
    tp_compare(&d, wide, want, "f32 (in, out) weights against the evaluator");
    for (int t = 0; t < 2; t++)
      for (int lay = HJ_LINEAR_IN_OUT; lay <= HJ_LINEAR_OUT_IN; lay++) {
        hj_ctx_t *ctx = cpu[t];
        const bool io = lay == HJ_LINEAR_IN_OUT;
        hj_buffer_t *x, *w, *wf, *b;
        CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_F32, HJ_SHAPE(d.M, K), d.x, &x));
        CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_BF16, io ? HJ_SHAPE(K, N) : HJ_SHAPE(N, K), io ? wh : wth, &w));
        CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_F32, io ? HJ_SHAPE(K, N) : HJ_SHAPE(N, K), io ? d.w : wt, &wf));
        CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_F32, HJ_SHAPE(N), d.b, &b));
        hj_buffer_t *y = tp_layer(ctx, x, w, b, (hj_linear_layout_t)lay);
        hj_buffer_t *yf = tp_layer(ctx, x, wf, b, (hj_linear_layout_t)lay);
        float *got = malloc(sizeof(float) * (size_t)(d.M * N)), *gf = malloc(sizeof(float) * (size_t)(d.M * N));
        CHECK_OK(ctx, hj_buffer_copy_to_host(y, got, sizeof(float) * (size_t)(d.M * N)));
        CHECK_OK(ctx, hj_buffer_copy_to_host(yf, gf, sizeof(float) * (size_t)(d.M * N)));
        for (int64_t o = 0; o < d.M * N; o++)
          if (memcmp(&got[o], &gf[o], 4))
            fail_msg("M=%lld K=%lld N=%lld %s, %d thread(s): bf16 weights y[%lld] = %.9g, widened f32 %.9g",
                     (long long)d.M, (long long)K, (long long)N, io ? "(in, out)" : "(out, in)", t + 1,
                     (long long)o, got[o], gf[o]);
        if (io && t == 0)
          for (int64_t o = 0; o < d.M * N; o++)
            if (memcmp(&gf[o], &wide[o], 4)) fail_msg("y[%lld]: two runs of one layer differ", (long long)o);
        free(got), free(gf);
        hj_buffer_destroy(x), hj_buffer_destroy(w), hj_buffer_destroy(wf), hj_buffer_destroy(b);
        hj_buffer_destroy(y), hj_buffer_destroy(yf);
      }
    free(want), free(wide), free(wh), free(wth), free(wt);
    tp_data_free(&d);
  }
  for (int t = 0; t < 2; t++) hj_ctx_destroy(cpu[t]);
  hj_ctx_destroy(ref);
}

/* ---- what the panel dot feeds ----------------------------------------------------------------
   The fusion passes see the panel dot's C [M,N] through its reshape (epilogue_fusion.c,
   fusion_util.c): a residual epilogue, a split into three (GPT-2's qkv), a row reduction
   (a layer norm's), two users. Each graph against the evaluator, with no fallbacks. */

typedef int (*tp_graph_fn)(hj_tensor_t y, hj_tensor_t r, hj_tensor_t *outs);
static int tp_g_residual(hj_tensor_t y, hj_tensor_t r, hj_tensor_t *o) { o[0] = hj_add(y, r); return 1; }
static int tp_g_split(hj_tensor_t y, hj_tensor_t r, hj_tensor_t *o) {
  int64_t n = hj_tensor_shape(y).dims[1] / 3, sz[3] = { n, n, n };
  hj_tensor_t t = hj_split(y, 1, sz, 3);
  for (int i = 0; i < 3; i++) o[i] = hj_get_tuple_element(t, i);
  return 3;
}
static int tp_g_rowsum(hj_tensor_t y, hj_tensor_t r, hj_tensor_t *o) {
  const int64_t d = 1;
  o[0] = hj_reduce(hj_add(y, r), HJ_RED_SUM, &d, 1);
  return 1;
}
static int tp_g_two_users(hj_tensor_t y, hj_tensor_t r, hj_tensor_t *o) {
  o[0] = hj_mul(y, y);
  o[1] = hj_add(y, r);
  return 2;
}

/* The operands of the matmul fusion (kOutput) in the entry of the module |name| that
   |ctx| dumped to |dir|: the epilogue's inputs (bias, residual) show up there; -1 if none. */
static int tp_matmul_operands(const char *dir, const char *name) {
  char part[96];
  snprintf(part, sizeof part, ".%s.after_passes.hlo", name);
  char *text = cb_dump_read(dir, part), *e = text ? strstr(text, "ENTRY") : NULL;
  char *k = e ? strstr(e, "kind=kOutput") : NULL, *line = k;
  while (line && line > e && line[-1] != '\n') line--;
  char *f = line ? strstr(line, " fusion(") : NULL;
  int n = -1;
  if (f && f < k) {
    n = 1;
    for (char *c = f + 8; *c && *c != ')'; c++) n += *c == ',';
  }
  free(text);
  return n;
}

/* The matmul fusion's operands in the same graph with w (in, out) on |ctx| (dumping to
   |dir|): what the panel one must match. */
static int tp_plain_operands(hj_ctx_t *ctx, const char *dir, int64_t M, int64_t K, int64_t N,
                             tp_graph_fn fn, const char *name) {
  hj_graph_t *g = NULL;
  CHECK_OK(ctx, hj_graph_create(ctx, name, &g));
  hj_tensor_t X = hj_param(g, HJ_F32, HJ_SHAPE(M, K), "x"), W = hj_param(g, HJ_F32, HJ_SHAPE(K, N), "w");
  hj_tensor_t B = hj_param(g, HJ_F32, HJ_SHAPE(N), "b"), R = hj_param(g, HJ_F32, HJ_SHAPE(M, N), "r"), o[3];
  int n = fn(hj_linear(X, W, B, HJ_LINEAR_IN_OUT), R, o);
  for (int i = 0; i < n; i++) CHECK_OK(ctx, hj_graph_output(g, o[i]));
  hj_exec_t *e = NULL;
  CHECK_OK(ctx, hj_compile(g, &e));
  hj_exec_stats_t st;
  CHECK_OK(ctx, hj_exec_stats(e, &st));
  hj_exec_destroy(e);
  hj_graph_destroy(g);
  return tp_matmul_operands(dir, name);
}

static void tp_consumers(hj_ctx_t *ctx, const char *dir, hj_ctx_t *ref, int64_t M, int64_t kc, int64_t nr,
                         tp_graph_fn fn, const char *what) {
  static int seq;
  char pname[32], qname[32];
  snprintf(pname, sizeof pname, "panels%d", seq), snprintf(qname, sizeof qname, "plain%d", seq++);
  const int64_t K = 2 * kc, N = 3 * nr;
  tp_data d;
  tp_data_make(&d, M, K, N, kc, nr);
  float *r = malloc(sizeof(float) * (size_t)(M * N));
  for (int64_t i = 0; i < M * N; i++) r[i] = tp_rand();
  CHECK_OK(ctx, hj_linear_pack(ctx, d.w, HJ_LINEAR_IN_OUT, K, N, kc, nr, d.wp));
  float *res[2][3] = { { 0 } };
  int64_t cnt[3] = { 0 };
  int nout = 0;
  for (int v = 0; v < 2; v++) {
    hj_ctx_t *c = v ? ref : ctx;
    hj_graph_t *g = NULL;
    CHECK_OK(c, hj_graph_create(c, v ? what : pname, &g));
    hj_tensor_t X = hj_param(g, HJ_F32, HJ_SHAPE(M, K), "x");
    hj_tensor_t W = hj_param(g, HJ_F32, HJ_SHAPE(K / kc, N / nr, kc, nr), "w");
    hj_tensor_t B = hj_param(g, HJ_F32, HJ_SHAPE(N), "b");
    hj_tensor_t R = hj_param(g, HJ_F32, HJ_SHAPE(M, N), "r");
    hj_tensor_t o[3];
    nout = fn(hj_linear(X, W, B, HJ_LINEAR_PANELS), R, o);
    for (int i = 0; i < nout; i++) CHECK_OK(c, hj_graph_output(g, o[i]));
    hj_exec_t *e = NULL;
    CHECK_OK(c, hj_compile(g, &e));
    hj_exec_stats_t st;
    CHECK_OK(c, hj_exec_stats(e, &st));
    if (!v && (st.kernels_matmul != 1 || st.evaluator_fallbacks != 0))
      fail_msg("%s, M=%lld: %d matmul kernels, %d evaluator fallbacks (want 1, 0)", what, (long long)M,
               st.kernels_matmul, st.evaluator_fallbacks);
    if (!v) {   /* the epilogue the dot takes: the same as with w (in, out) */
      int got = tp_matmul_operands(dir, pname), want = tp_plain_operands(ctx, dir, M, K, N, fn, qname);
      if (got != want || got < 2)
        fail_msg("%s, M=%lld: the matmul fusion has %d operands, with w (in, out) %d", what, (long long)M, got, want);
    }
    hj_buffer_t *in[4], *out[3] = { NULL, NULL, NULL };
    CHECK_OK(c, hj_buffer_from_host(c, HJ_F32, HJ_SHAPE(M, K), d.x, &in[0]));
    CHECK_OK(c, hj_buffer_from_host(c, HJ_F32, HJ_SHAPE(K / kc, N / nr, kc, nr), d.wp, &in[1]));
    CHECK_OK(c, hj_buffer_from_host(c, HJ_F32, HJ_SHAPE(N), d.b, &in[2]));
    CHECK_OK(c, hj_buffer_from_host(c, HJ_F32, HJ_SHAPE(M, N), r, &in[3]));
    CHECK_OK(c, hj_exec_run(e, in, 4, out, nout));
    for (int i = 0; i < nout; i++) {
      cnt[i] = (int64_t)(hj_buffer_nbytes(out[i]) / sizeof(float));
      res[v][i] = malloc(hj_buffer_nbytes(out[i]));
      CHECK_OK(c, hj_buffer_copy_to_host(out[i], res[v][i], hj_buffer_nbytes(out[i])));
      hj_buffer_destroy(out[i]);
    }
    for (int i = 0; i < 4; i++) hj_buffer_destroy(in[i]);
    hj_exec_destroy(e);
    hj_graph_destroy(g);
  }
  for (int i = 0; i < nout; i++) {
    double scale = 0;
    for (int64_t k = 0; k < cnt[i]; k++) scale = fmax(scale, fabs(res[1][i][k]));
    for (int64_t k = 0; k < cnt[i]; k++)
      if (!(fabs((double)res[0][i][k] - res[1][i][k]) <= 1e-5 * (1 + scale)))
        fail_msg("%s, M=%lld: output %d [%lld] = %.9g, evaluator %.9g", what, (long long)M, i, (long long)k,
                 res[0][i][k], res[1][i][k]);
    free(res[0][i]), free(res[1][i]);
  }
  free(r);
  tp_data_free(&d);
}

static void test_panels_consumers(void **state) {
  char dir[] = "/tmp/hlojit_panelsXXXXXX";
  assert_non_null(mkdtemp(dir));
  hj_ctx_t *ctx = cb_ctx(HJ_BACKEND_CPU, 2, dir), *ref = cb_ctx(HJ_BACKEND_INTERP, 1, NULL);
  int64_t kc, nr;
  CHECK_OK(ctx, hj_linear_panels(ctx, HJ_BACKEND_CPU, 96, 768, &kc, &nr));
  static const struct { tp_graph_fn fn; const char *what; } g[] = {
    { tp_g_residual, "bias + residual" }, { tp_g_split, "split in three" },
    { tp_g_rowsum, "row sum" }, { tp_g_two_users, "two users" },
  };
  static const int64_t Ms[] = { 1, 5, 64 };
  for (size_t i = 0; i < sizeof g / sizeof g[0]; i++)
    for (size_t m = 0; m < sizeof Ms / sizeof Ms[0]; m++)
      tp_consumers(ctx, dir, ref, Ms[m], kc, nr, g[i].fn, g[i].what);
  hj_ctx_destroy(ctx);
  hj_ctx_destroy(ref);
  cb_dump_remove(dir);
}

static void test_panels_bad_shapes(void **state) {
  hj_ctx_t *ctx = cb_ctx(HJ_BACKEND_INTERP, 1, NULL);
  hj_graph_t *g = NULL;
  CHECK_OK(ctx, hj_graph_create(ctx, "bad", &g));
  hj_tensor_t x = hj_param(g, HJ_F32, HJ_SHAPE(4, 64), "x");
  hj_tensor_t w3 = hj_param(g, HJ_F32, HJ_SHAPE(4, 2, 16), "w3");
  hj_tensor_t w4 = hj_param(g, HJ_F32, HJ_SHAPE(3, 2, 16, 8), "w4");   /* in 48, not 64 */
  hj_linear(x, w3, HJ_NONE, HJ_LINEAR_PANELS);
  assert_int_equal(hj_graph_status(g), HJ_ERR_SHAPE);
  assert_non_null(strstr(hj_ctx_error(ctx), "rank 4"));
  hj_graph_destroy(g);
  CHECK_OK(ctx, hj_graph_create(ctx, "bad2", &g));
  x = hj_param(g, HJ_F32, HJ_SHAPE(4, 64), "x");
  w4 = hj_param(g, HJ_F32, HJ_SHAPE(3, 2, 16, 8), "w4");
  hj_linear(x, w4, HJ_NONE, HJ_LINEAR_PANELS);
  assert_int_equal(hj_graph_status(g), HJ_ERR_SHAPE);
  assert_non_null(strstr(hj_ctx_error(ctx), "takes 48"));
  hj_graph_destroy(g);
  hj_ctx_destroy(ctx);
}

/* ---- dot_canon ------------------------------------------------------------------------------ */

static const char *tp_panel_text =
    "HloModule t\nENTRY e {\n  a = f32[5,3,8] parameter(0)\n  b = f32[3,2,8,4] parameter(1)\n"
    "  ROOT d = f32[5,2,4] dot(a, b), lhs_contracting_dims={1,2}, rhs_contracting_dims={0,2}\n}\n";

static void tp_canon(int panel_nr, bool want_changed) {
  hj_ctx_t *ctx = tu_ctx();
  hlo_module *m = NULL;
  CHECK_OK(ctx, hlo_parse_module(ctx, tp_panel_text, strlen(tp_panel_text), "t", &m));
  int n = (int)arrlen(m->entry->params);
  hlo_literal *args[2];
  for (int i = 0; i < n; i++) {
    args[i] = hlo_literal_new(ctx, &m->entry->params[i]->shape);
    for (int64_t k = 0; k < hlo_shape_numel(&args[i]->shape); k++) ((float *)args[i]->data)[k] = tp_rand();
  }
  hlo_literal *before = NULL, *after = NULL;
  CHECK_OK(ctx, hlo_eval_module(ctx, m, args, n, &before));
  bool changed = false;
  CHECK_OK(ctx, hlo_pass_dot_canon(&(hlo_pass_ctx){ .matmul_panel_nr = panel_nr }, m, &changed));
  assert_int_equal(changed, want_changed);
  CHECK_OK(ctx, hlo_verify_module(m));
  const hlo_instr *dot = NULL;
  for (ptrdiff_t i = 0; i < arrlen(m->entry->instrs); i++)
    if (m->entry->instrs[i]->op == HLO_OP_DOT) dot = m->entry->instrs[i];
  assert_non_null(dot);
  assert_int_equal(hlo_dot_is_panels(dot, NULL), !want_changed);
  if (want_changed) assert_int_equal(dot->operands[1]->shape.rank, 2);   /* [K, N] */
  CHECK_OK(ctx, hlo_eval_module(ctx, m, args, n, &after));
  assert_memory_equal(before->data, after->data, 5 * 8 * sizeof(float));
  hlo_literal_free(before), hlo_literal_free(after);
  for (int i = 0; i < n; i++) hlo_literal_free(args[i]);
  hlo_module_free(m);
  hj_ctx_destroy(ctx);
}

static void test_dot_canon_panels(void **state) {
  tp_canon(4, false);   /* the target's nr: kept, read in place */
  tp_canon(8, true);    /* another nr: a plain dot */
  tp_canon(0, true);    /* no panels (the GPU) */
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_pack),
    cmocka_unit_test(test_panels_query),
    cmocka_unit_test(test_panels_matmul),
    cmocka_unit_test(test_panels_bf16),
    cmocka_unit_test(test_stored_bf16),
    cmocka_unit_test(test_panels_consumers),
    cmocka_unit_test(test_panels_bad_shapes),
    cmocka_unit_test(test_dot_canon_panels),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
