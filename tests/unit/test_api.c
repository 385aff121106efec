/* test_api.c — the graph builder computes the right numbers: composites (softmax, layer
   norm, GELU, mean/var, matmul with batch broadcasting, embedding, argmax, split/concat,
   causal mask), control flow (while, conditional, variadic reduce, sort, tuples, call, map,
   scatter) and the primitive shape ops, each graph compiled and run on small host arrays.
   Expected values are worked out by hand or with plain loops here, or come from JAX
   (jax.nn.gelu, printed with the values below); none comes from hlojit itself. Misuse of the
   API is tested in test_api_misuse.c; text, .npy files and JAX fixtures in
   test_api_io.c. */
#include "testutil.h"
#include "api_testutil.h"

/* ---- helpers ----------------------------------------------------------------------- */

/* Compiles the graph, runs it on |n| host arrays (dtype, shape, data) and returns output
   |k| (of |nout|) as a new buffer; the others are destroyed. */
typedef struct { hj_dtype_t t; hj_shape_t s; const void *data; } ta_in;

static hj_buffer_t *ta_run(ta_fix *f, const ta_in *in, int n, int nout, int k) {
  hj_exec_t *e;
  CHECK_OK(f->ctx, hj_compile(f->g, &e));
  hj_buffer_t *b[16] = { 0 }, *out[16] = { 0 };
  for (int i = 0; i < n; i++) CHECK_OK(f->ctx, hj_buffer_from_host(f->ctx, in[i].t, in[i].s, in[i].data, &b[i]));
  hj_status st = hj_exec_run(e, b, n, out, nout);
  for (int i = 0; i < n; i++) hj_buffer_destroy(b[i]);
  hj_exec_destroy(e);
  CHECK_OK(f->ctx, st);
  for (int i = 0; i < nout; i++)
    if (i != k) hj_buffer_destroy(out[i]);
  return out[k];
}

/* Runs the graph (as ta_run) and checks output |k| against |want| (|count| values within
   |tol|). */
static void ta_expect(ta_fix *f, const ta_in *in, int n, int nout, int k, const double *want,
                      int count, double tol) {
  hj_buffer_t *o = ta_run(f, in, n, nout, k);
  ta_close_f32(hj_buffer_host_ptr(o), want, count, tol);
  hj_buffer_destroy(o);
}

/* ---- composites ------------------------------------------------------------------------ */

static void test_softmax(void **state) {
  ta_fix *f = *state;
  hj_tensor_t x = hj_param(f->g, HJ_F32, HJ_SHAPE(2, 3), "x");
  hj_graph_output(f->g, hj_softmax(x, -1));
  hj_graph_output(f->g, hj_log_softmax(x, 1));
  float xv[6] = { 1, 2, 3, 1000, 1000, 1000 };  /* the second row overflows unless max-subtracted */
  ta_in in[1] = { { HJ_F32, HJ_SHAPE(2, 3), xv } };
  hj_buffer_t *o = ta_run(f, in, 1, 2, 0);
  /* e^(x-3) / sum: e^-2 = 0.1353352832, e^-1 = 0.3678794412, 1; sum 1.5032147244 */
  double want[6] = { 0.09003057317038046, 0.24472847105479764, 0.6652409557748219,
                     1.0 / 3, 1.0 / 3, 1.0 / 3 };
  ta_close_f32(hj_buffer_host_ptr(o), want, 6, 1e-6);
  hj_buffer_destroy(o);
}

static void test_log_softmax(void **state) {
  ta_fix *f = *state;
  hj_tensor_t x = hj_param(f->g, HJ_F32, HJ_SHAPE(3), "x");
  hj_graph_output(f->g, hj_log_softmax(x, 0));
  float xv[3] = { 1, 2, 3 };
  ta_in in[1] = { { HJ_F32, HJ_SHAPE(3), xv } };
  hj_buffer_t *o = ta_run(f, in, 1, 1, 0);
  double want[3] = { log(0.09003057317038046), log(0.24472847105479764), log(0.6652409557748219) };
  ta_close_f32(hj_buffer_host_ptr(o), want, 3, 1e-6);
  hj_buffer_destroy(o);
}

static void test_layer_norm(void **state) {
  ta_fix *f = *state;
  hj_tensor_t x = hj_param(f->g, HJ_F32, HJ_SHAPE(2, 4), "x");
  hj_tensor_t gm = hj_param(f->g, HJ_F32, HJ_SHAPE(4), "gamma");
  hj_tensor_t bt = hj_param(f->g, HJ_F32, HJ_SHAPE(4), "beta");
  hj_graph_output(f->g, hj_layer_norm(x, HJ_NONE, HJ_NONE, 0.0));
  hj_graph_output(f->g, hj_layer_norm(x, gm, bt, 0.0));
  float xv[8] = { 1, 2, 3, 4, -2, -2, 2, 2 }, gv[4] = { 1, 2, 3, 4 }, bv[4] = { 0.5, 0.5, 0.5, 0.5 };
  ta_in in[3] = { { HJ_F32, HJ_SHAPE(2, 4), xv }, { HJ_F32, HJ_SHAPE(4), gv }, { HJ_F32, HJ_SHAPE(4), bv } };
  /* row 1: mean 2.5, var 1.25, (x - 2.5) / sqrt(1.25); row 2: mean 0, var 4 -> x / 2 */
  double s = 1 / sqrt(1.25);
  double want[8] = { -1.5 * s, -0.5 * s, 0.5 * s, 1.5 * s, -1, -1, 1, 1 };
  ta_expect(f, in, 3, 2, 0, want, 8, 1e-6);
  for (int i = 0; i < 8; i++) want[i] = want[i] * gv[i % 4] + 0.5;
  hj_graph_destroy(f->g);
  CHECK_OK(f->ctx, hj_graph_create(f->ctx, "t", &f->g));
  x = hj_param(f->g, HJ_F32, HJ_SHAPE(2, 4), "x");
  gm = hj_param(f->g, HJ_F32, HJ_SHAPE(4), "gamma");
  bt = hj_param(f->g, HJ_F32, HJ_SHAPE(4), "beta");
  hj_graph_output(f->g, hj_layer_norm(x, gm, bt, 0.0));
  ta_expect(f, in, 3, 1, 0, want, 8, 1e-6);
  /* gamma of the wrong size is named */
  hj_tensor_t g5 = hj_param(f->g, HJ_F32, HJ_SHAPE(5), "g5");
  assert_false(hj_tensor_ok(hj_layer_norm(x, g5, HJ_NONE, 1e-5)));
  ta_has(hj_ctx_error(f->ctx), "hj_layer_norm: gamma f32[5] does not match the last dim of x f32[2,4]");
}

static void test_gelu(void **state) {
  ta_fix *f = *state;
  hj_tensor_t x = hj_param(f->g, HJ_F32, HJ_SHAPE(8), "x");
  hj_graph_output(f->g, hj_gelu_tanh(x));
  hj_graph_output(f->g, hj_gelu_erf(x));
  float xv[8] = { -3, -1, -0.5f, 0, 0.5f, 1, 2, 3 };
  ta_in in[1] = { { HJ_F32, HJ_SHAPE(8), xv } };
  /* jax.nn.gelu(x, approximate=True / False), in float64 */
  double want_tanh[8] = { -0.0036373920817729943, -0.15880800939172324, -0.15428599017485606, 0.0,
                          0.34571400982514394, 0.8411919906082768, 1.954597694087775, 2.996362607918227 };
  double want_erf[8] = { -0.00404969409489031, -0.15865525393145707, -0.15426876936299344, 0.0,
                         0.34573123063700656, 0.8413447460685429, 1.9544997361036416, 2.99595030590511 };
  ta_expect(f, in, 1, 2, 0, want_tanh, 8, 1e-6);
  ta_expect(f, in, 1, 2, 1, want_erf, 8, 1e-6);
}

static void test_mean_var(void **state) {
  ta_fix *f = *state;
  hj_tensor_t x = hj_param(f->g, HJ_F32, HJ_SHAPE(2, 4), "x");
  int64_t d1 = 1, d0 = 0;
  hj_graph_output(f->g, hj_mean(x, &d1, 1, false));     /* (2) */
  hj_graph_output(f->g, hj_var(x, &d1, 1, true));       /* (2, 1) */
  hj_graph_output(f->g, hj_mean(x, NULL, 0, false));    /* () */
  hj_graph_output(f->g, hj_var(x, &d0, 1, false));      /* (4) */
  float xv[8] = { 1, 2, 3, 4, -2, -2, 2, 2 };
  ta_in in[1] = { { HJ_F32, HJ_SHAPE(2, 4), xv } };
  double m[2] = { 2.5, 0 }, v[2] = { 1.25, 4 }, all[1] = { 1.25 }, v0[4] = { 2.25, 4, 0.25, 1 };
  ta_expect(f, in, 1, 4, 0, m, 2, 1e-6);
  hj_buffer_t *o = ta_run(f, in, 1, 4, 1);
  assert_int_equal(hj_buffer_shape(o).rank, 2);
  assert_int_equal(hj_buffer_shape(o).dims[1], 1);
  ta_close_f32(hj_buffer_host_ptr(o), v, 2, 1e-6);
  hj_buffer_destroy(o);
  o = ta_run(f, in, 1, 4, 2);
  assert_int_equal(hj_buffer_shape(o).rank, 0);
  ta_close_f32(hj_buffer_host_ptr(o), all, 1, 1e-6);
  hj_buffer_destroy(o);
  ta_expect(f, in, 1, 4, 3, v0, 4, 1e-6);
}

static void test_matmul_2d(void **state) {
  ta_fix *f = *state;
  hj_tensor_t a = hj_param(f->g, HJ_F32, HJ_SHAPE(2, 3), "a");
  hj_tensor_t b = hj_param(f->g, HJ_F32, HJ_SHAPE(3, 2), "b");
  hj_tensor_t c = hj_matmul(a, b);
  assert_int_equal(hj_tensor_shape(c).rank, 2);
  hj_graph_output(f->g, c);
  float av[6] = { 1, 2, 3, 4, 5, 6 }, bv[6] = { 7, 8, 9, 10, 11, 12 };
  ta_in in[2] = { { HJ_F32, HJ_SHAPE(2, 3), av }, { HJ_F32, HJ_SHAPE(3, 2), bv } };
  double want[4] = { 58, 64, 139, 154 };  /* 1*7+2*9+3*11, 1*8+2*10+3*12, ... */
  ta_expect(f, in, 2, 1, 0, want, 4, 0);
}

/* (B, M, K) as plain loops, for the batched cases; |sa|/|sb| are batch strides (0: shared). */
static void ta_ref_bmm(const float *a, const float *b, double *c, int B, int M, int K, int N,
                       int sa, int sb) {
  for (int t = 0; t < B; t++)
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        double s = 0;
        for (int k = 0; k < K; k++) s += (double)a[t * sa + i * K + k] * b[t * sb + k * N + j];
        c[(t * M + i) * N + j] = s;
      }
}

static void test_matmul_batch_broadcast(void **state) {
  ta_fix *f = *state;
  hj_tensor_t a = hj_param(f->g, HJ_F32, HJ_SHAPE(3, 2, 4), "a");   /* (B, M, K) */
  hj_tensor_t w = hj_param(f->g, HJ_F32, HJ_SHAPE(4, 5), "w");      /* (K, N): shared */
  hj_tensor_t b1 = hj_param(f->g, HJ_F32, HJ_SHAPE(1, 4, 5), "b1"); /* batch 1 broadcasts */
  hj_tensor_t v = hj_param(f->g, HJ_F32, HJ_SHAPE(4), "v");         /* vector */
  hj_graph_output(f->g, hj_matmul(a, w));
  hj_graph_output(f->g, hj_matmul(a, b1));
  hj_graph_output(f->g, hj_matmul(a, v));
  hj_graph_output(f->g, hj_matmul(v, w));
  float av[24], wv[20], vv[4] = { 1, -2, 0.5f, 3 };
  for (int i = 0; i < 24; i++) av[i] = (float)(i % 7) - 2.5f;
  for (int i = 0; i < 20; i++) wv[i] = (float)((i * 3) % 5) * 0.5f - 1;
  ta_in in[4] = { { HJ_F32, HJ_SHAPE(3, 2, 4), av }, { HJ_F32, HJ_SHAPE(4, 5), wv },
                  { HJ_F32, HJ_SHAPE(1, 4, 5), wv }, { HJ_F32, HJ_SHAPE(4), vv } };
  double want[30];
  ta_ref_bmm(av, wv, want, 3, 2, 4, 5, 8, 0);
  for (int k = 0; k < 2; k++) {
    hj_buffer_t *o = ta_run(f, in, 4, 4, k);
    hj_shape_t s = hj_buffer_shape(o);
    assert_true(s.rank == 3 && s.dims[0] == 3 && s.dims[1] == 2 && s.dims[2] == 5);
    ta_close_f32(hj_buffer_host_ptr(o), want, 30, 1e-5);
    hj_buffer_destroy(o);
  }
  ta_ref_bmm(av, vv, want, 3, 2, 4, 1, 8, 0);   /* (3, 2) */
  hj_buffer_t *o = ta_run(f, in, 4, 4, 2);
  assert_int_equal(hj_buffer_shape(o).rank, 2);
  ta_close_f32(hj_buffer_host_ptr(o), want, 6, 1e-5);
  hj_buffer_destroy(o);
  ta_ref_bmm(vv, wv, want, 1, 1, 4, 5, 0, 0);   /* (5) */
  o = ta_run(f, in, 4, 4, 3);
  assert_int_equal(hj_buffer_shape(o).rank, 1);
  ta_close_f32(hj_buffer_host_ptr(o), want, 5, 1e-5);
  hj_buffer_destroy(o);
}

static void test_embedding_clamps(void **state) {
  ta_fix *f = *state;
  hj_tensor_t table = hj_param(f->g, HJ_F32, HJ_SHAPE(4, 2), "wte");
  hj_tensor_t ids = hj_param(f->g, HJ_S32, HJ_SHAPE(2, 2), "ids");
  hj_tensor_t e = hj_embedding(table, ids);
  hj_shape_t s = hj_tensor_shape(e);
  assert_true(s.rank == 3 && s.dims[0] == 2 && s.dims[1] == 2 && s.dims[2] == 2);
  hj_graph_output(f->g, e);
  float tv[8] = { 0, 1, 10, 11, 20, 21, 30, 31 };
  int32_t iv[4] = { 2, -1, 7, 0 };   /* -1 clamps to row 0, 7 to row 3 (XLA's gather) */
  ta_in in[2] = { { HJ_F32, HJ_SHAPE(4, 2), tv }, { HJ_S32, HJ_SHAPE(2, 2), iv } };
  double want[8] = { 20, 21, 0, 1, 30, 31, 0, 1 };
  ta_expect(f, in, 2, 1, 0, want, 8, 0);
  hj_tensor_t fid = hj_param(f->g, HJ_F32, HJ_SHAPE(2), "fid");
  assert_false(hj_tensor_ok(hj_embedding(table, fid)));
  ta_has(hj_ctx_error(f->ctx), "hj_embedding: ids must be an integer array");
}

static void test_argmax_ties(void **state) {
  ta_fix *f = *state;
  hj_tensor_t x = hj_param(f->g, HJ_F32, HJ_SHAPE(4, 4), "x");
  hj_tensor_t r = hj_argmax(x, 1);
  assert_int_equal(hj_tensor_dtype(r), HJ_S32);
  hj_graph_output(f->g, r);
  hj_graph_output(f->g, hj_argmax(x, 0));
  float nan = NAN, inf = INFINITY;
  float xv[16] = { 1, 3, 3, 2,  nan, 5, nan, 1,  -inf, -inf, -inf, -inf,  0, 7, 1, 7 };
  ta_in in[1] = { { HJ_F32, HJ_SHAPE(4, 4), xv } };
  hj_buffer_t *o = ta_run(f, in, 1, 2, 0);
  const int32_t *p = hj_buffer_host_ptr(o);
  /* first max wins; NaN counts as the max (jnp.argmax: [1 0 0 1]) */
  assert_int_equal(p[0], 1);
  assert_int_equal(p[1], 0);
  assert_int_equal(p[2], 0);
  assert_int_equal(p[3], 1);
  hj_buffer_destroy(o);
  o = ta_run(f, in, 1, 2, 1);
  p = hj_buffer_host_ptr(o);   /* columns: [1,nan,-inf,0] [3,5,-inf,7] [3,nan,-inf,1] [2,1,-inf,7] */
  assert_int_equal(p[0], 1);
  assert_int_equal(p[1], 3);
  assert_int_equal(p[2], 1);
  assert_int_equal(p[3], 3);
  hj_buffer_destroy(o);
}

static void test_split_concat(void **state) {
  ta_fix *f = *state;
  hj_tensor_t x = hj_param(f->g, HJ_F32, HJ_SHAPE(2, 6), "x");
  hj_tensor_t parts[3];
  CHECK_OK(f->ctx, hj_unpack(hj_split(x, -1, (int64_t[]){ 1, 2, 3 }, 3), parts, 3));
  for (int i = 0; i < 3; i++) assert_int_equal(hj_tensor_shape(parts[i]).dims[1], i + 1);
  hj_tensor_t swapped[3] = { parts[2], parts[0], parts[1] };
  hj_graph_output(f->g, hj_concat(parts, 3, 1));
  hj_graph_output(f->g, hj_concat(swapped, 3, -1));
  hj_graph_output(f->g, hj_concat((hj_tensor_t[]){ x, x }, 2, 0));
  float xv[12];
  for (int i = 0; i < 12; i++) xv[i] = (float)i;
  ta_in in[1] = { { HJ_F32, HJ_SHAPE(2, 6), xv } };
  double same[12], sw[12] = { 3, 4, 5, 0, 1, 2, 9, 10, 11, 6, 7, 8 }, twice[24];
  for (int i = 0; i < 12; i++) same[i] = i, twice[i] = i, twice[12 + i] = i;
  ta_expect(f, in, 1, 3, 0, same, 12, 0);
  ta_expect(f, in, 1, 3, 1, sw, 12, 0);
  hj_buffer_t *o = ta_run(f, in, 1, 3, 2);
  assert_int_equal(hj_buffer_shape(o).dims[0], 4);
  ta_close_f32(hj_buffer_host_ptr(o), twice, 24, 0);
  hj_buffer_destroy(o);
}

static void test_causal_mask(void **state) {
  ta_fix *f = *state;
  hj_tensor_t m = hj_causal_mask(f->g, 4);
  assert_int_equal(hj_tensor_dtype(m), HJ_PRED);
  hj_graph_output(f->g, m);
  hj_buffer_t *o = ta_run(f, NULL, 0, 1, 0);
  const uint8_t *p = hj_buffer_host_ptr(o);
  for (int q = 0; q < 4; q++)
    for (int k = 0; k < 4; k++)
      if (p[q * 4 + k] != (k <= q)) fail_msg("mask[%d][%d] = %d", q, k, p[q * 4 + k]);
  hj_buffer_destroy(o);
}

/* ---- control flow ----------------------------------------------------------------------- */

static void test_while_counting(void **state) {
  ta_fix *f = *state;
  hj_dtype_t types[2] = { HJ_S32, HJ_F32 };
  hj_shape_t shapes[2] = { HJ_SCALAR, HJ_SCALAR };
  hj_graph_t *cond, *body;
  CHECK_OK(f->ctx, hj_graph_create_sub(f->g, "cond", &cond));
  CHECK_OK(f->ctx, hj_graph_create_sub(f->g, "body", &body));
  hj_tensor_t cs = hj_param_tuple(cond, types, shapes, 2, "state");
  hj_graph_output(cond, hj_compare(hj_get_tuple_element(cs, 0), hj_scalar(cond, HJ_S32, 10), HJ_CMP_LT));
  hj_tensor_t bs = hj_param_tuple(body, types, shapes, 2, "state");
  hj_graph_output(body, hj_add(hj_get_tuple_element(bs, 0), hj_scalar(body, HJ_S32, 1)));
  hj_graph_output(body, hj_add(hj_get_tuple_element(bs, 1), hj_scalar(body, HJ_F32, 2.5)));
  hj_tensor_t step = hj_param(f->g, HJ_F32, HJ_SCALAR, "unused");
  hj_tensor_t init = hj_tuple(f->g, (hj_tensor_t[]){ hj_scalar(f->g, HJ_S32, 0), step }, 2);
  hj_tensor_t r = hj_while(cond, body, init);
  assert_true(hj_tensor_ok(r));
  hj_graph_output(f->g, hj_get_tuple_element(r, 0));
  hj_graph_output(f->g, hj_get_tuple_element(r, 1));
  /* a used sub-graph takes no more ops */
  assert_false(hj_tensor_ok(hj_neg(hj_get_tuple_element(bs, 1))));
  ta_has(hj_ctx_error(f->ctx), "already used");
  hj_graph_t *g2 = f->g;
  CHECK_OK(f->ctx, hj_graph_create(f->ctx, "t", &f->g));   /* rebuild without the error */
  hj_graph_destroy(g2);
  CHECK_OK(f->ctx, hj_graph_create_sub(f->g, "cond", &cond));
  CHECK_OK(f->ctx, hj_graph_create_sub(f->g, "body", &body));
  cs = hj_param_tuple(cond, types, shapes, 2, "state");
  hj_graph_output(cond, hj_compare(hj_get_tuple_element(cs, 0), hj_scalar(cond, HJ_S32, 10), HJ_CMP_LT));
  bs = hj_param_tuple(body, types, shapes, 2, "state");
  hj_graph_output(body, hj_add(hj_get_tuple_element(bs, 0), hj_scalar(body, HJ_S32, 1)));
  hj_graph_output(body, hj_add(hj_get_tuple_element(bs, 1), hj_scalar(body, HJ_F32, 2.5)));
  step = hj_param(f->g, HJ_F32, HJ_SCALAR, "start");
  init = hj_tuple(f->g, (hj_tensor_t[]){ hj_scalar(f->g, HJ_S32, 0), step }, 2);
  r = hj_while(cond, body, init);
  hj_graph_output(f->g, hj_get_tuple_element(r, 0));
  hj_graph_output(f->g, hj_get_tuple_element(r, 1));
  float start = 1;
  ta_in in[1] = { { HJ_F32, HJ_SCALAR, &start } };
  hj_buffer_t *o = ta_run(f, in, 1, 2, 0);
  assert_int_equal(*(int32_t *)hj_buffer_host_ptr(o), 10);
  hj_buffer_destroy(o);
  o = ta_run(f, in, 1, 2, 1);
  assert_true(*(float *)hj_buffer_host_ptr(o) == 26.0f);  /* 1 + 10 * 2.5 */
  hj_buffer_destroy(o);
}

static void test_conditional(void **state) {
  ta_fix *f = *state;
  hj_graph_t *br[3];
  for (int i = 0; i < 3; i++) {
    CHECK_OK(f->ctx, hj_graph_create_sub(f->g, "branch", &br[i]));
    hj_tensor_t x = hj_param(br[i], HJ_F32, HJ_SHAPE(2), "x");
    hj_tensor_t y = i == 0 ? hj_mul(x, hj_scalar(br[i], HJ_F32, 2))
                  : i == 1 ? hj_add(x, hj_scalar(br[i], HJ_F32, 100)) : hj_neg(x);
    hj_graph_output(br[i], y);
  }
  hj_tensor_t p = hj_param(f->g, HJ_PRED, HJ_SCALAR, "p");
  hj_tensor_t k = hj_param(f->g, HJ_S32, HJ_SCALAR, "k");
  hj_tensor_t x = hj_param(f->g, HJ_F32, HJ_SHAPE(2), "x");
  hj_graph_output(f->g, hj_conditional(p, br, (hj_tensor_t[]){ x, x }, 2));
  hj_graph_output(f->g, hj_conditional(k, br, (hj_tensor_t[]){ x, x, x }, 3));
  float xv[2] = { 1, -4 };
  uint8_t pv[2] = { 1, 0 };
  int32_t kv[3] = { 1, 2, 7 };   /* 7 is out of range: the last branch */
  double want_p[2][2] = { { 2, -8 }, { 101, 96 } }, want_k[3][2] = { { 101, 96 }, { -1, 4 }, { -1, 4 } };
  for (int i = 0; i < 3; i++) {
    ta_in in[3] = { { HJ_PRED, HJ_SCALAR, &pv[i % 2] }, { HJ_S32, HJ_SCALAR, &kv[i] }, { HJ_F32, HJ_SHAPE(2), xv } };
    ta_expect(f, in, 3, 2, 0, want_p[i % 2], 2, 0);
    ta_expect(f, in, 3, 2, 1, want_k[i], 2, 0);
  }
}

static void test_reduce_with_variadic(void **state) {
  ta_fix *f = *state;
  hj_graph_t *fn;
  CHECK_OK(f->ctx, hj_graph_create_sub(f->g, "sum_and_max", &fn));
  hj_tensor_t as = hj_param(fn, HJ_F32, HJ_SCALAR, "acc_sum");
  hj_tensor_t am = hj_param(fn, HJ_S32, HJ_SCALAR, "acc_max");
  hj_tensor_t xs = hj_param(fn, HJ_F32, HJ_SCALAR, "x_sum");
  hj_tensor_t xm = hj_param(fn, HJ_S32, HJ_SCALAR, "x_max");
  hj_graph_output(fn, hj_add(as, xs));
  hj_graph_output(fn, hj_max(am, xm));
  hj_tensor_t a = hj_param(f->g, HJ_F32, HJ_SHAPE(2, 3), "a");
  hj_tensor_t b = hj_param(f->g, HJ_S32, HJ_SHAPE(2, 3), "b");
  hj_tensor_t init[2] = { hj_scalar(f->g, HJ_F32, 0), hj_scalar(f->g, HJ_S32, -1000) };
  int64_t d = 1;
  hj_tensor_t r = hj_reduce_with(fn, (hj_tensor_t[]){ a, b }, init, 2, &d, 1);
  assert_true(hj_tensor_ok(r));
  assert_int_equal(hj_tensor_dtype(r), HJ_DTYPE_COUNT);  /* a tuple */
  hj_graph_output(f->g, hj_get_tuple_element(r, 0));
  hj_graph_output(f->g, hj_get_tuple_element(r, 1));
  float av[6] = { 1, 2, 3.5f, -1, -2, -3 };
  int32_t bv[6] = { 5, -7, 2, -9, -3, -4 };
  ta_in in[2] = { { HJ_F32, HJ_SHAPE(2, 3), av }, { HJ_S32, HJ_SHAPE(2, 3), bv } };
  double sums[2] = { 6.5, -6 };
  ta_expect(f, in, 2, 2, 0, sums, 2, 0);
  hj_buffer_t *o = ta_run(f, in, 2, 2, 1);
  const int32_t *m = hj_buffer_host_ptr(o);
  assert_int_equal(m[0], 5);
  assert_int_equal(m[1], -3);
  hj_buffer_destroy(o);
}

static void test_sort_descending(void **state) {
  ta_fix *f = *state;
  hj_tensor_t x = hj_param(f->g, HJ_F32, HJ_SHAPE(6), "x");
  hj_graph_output(f->g, hj_sort(x, 0, true));
  hj_graph_output(f->g, hj_sort(x, -1, false));
  float xv[6] = { 3, 1, NAN, 2, 5, -1 };
  ta_in in[1] = { { HJ_F32, HJ_SHAPE(6), xv } };
  double desc[6] = { 5, 3, 2, 1, -1, NAN }, asc[6] = { -1, 1, 2, 3, 5, NAN };
  ta_expect(f, in, 1, 2, 0, desc, 6, 0);
  ta_expect(f, in, 1, 2, 1, asc, 6, 0);
}

/* Tuple parameters and results are flattened, depth first. */
static void test_tuple_flattening(void **state) {
  ta_fix *f = *state;
  hj_dtype_t types[2] = { HJ_F32, HJ_S32 };
  hj_shape_t shapes[2] = { HJ_SHAPE(2), HJ_SCALAR };
  hj_tensor_t p = hj_param_tuple(f->g, types, shapes, 2, "pair");
  hj_tensor_t z = hj_param(f->g, HJ_F32, HJ_SHAPE(2), "z");
  hj_tensor_t a = hj_get_tuple_element(p, 0), k = hj_get_tuple_element(p, 1);
  hj_tensor_t inner = hj_tuple(f->g, (hj_tensor_t[]){ hj_add(a, z), hj_neg(k) }, 2);
  hj_graph_output(f->g, hj_tuple(f->g, (hj_tensor_t[]){ inner, z }, 2));  /* ((f32[2], s32[]), f32[2]) */
  float av[2] = { 1, 2 }, zv[2] = { 10, 20 };
  int32_t kv = 7;
  ta_in in[3] = { { HJ_F32, HJ_SHAPE(2), av }, { HJ_S32, HJ_SCALAR, &kv }, { HJ_F32, HJ_SHAPE(2), zv } };
  double sum[2] = { 11, 22 };
  ta_expect(f, in, 3, 3, 0, sum, 2, 0);
  hj_buffer_t *o = ta_run(f, in, 3, 3, 1);
  assert_int_equal(*(int32_t *)hj_buffer_host_ptr(o), -7);
  hj_buffer_destroy(o);
  ta_expect(f, in, 3, 3, 2, (double[]){ 10, 20 }, 2, 0);
}

static void test_call_map_scatter(void **state) {
  ta_fix *f = *state;
  hj_graph_t *fma, *sc;
  CHECK_OK(f->ctx, hj_graph_create_sub(f->g, "fma", &fma));
  hj_tensor_t x = hj_param(fma, HJ_F32, HJ_SHAPE(3), "x"), y = hj_param(fma, HJ_F32, HJ_SHAPE(3), "y");
  hj_graph_output(fma, hj_add(hj_mul(x, y), hj_scalar(fma, HJ_F32, 1)));
  CHECK_OK(f->ctx, hj_graph_create_sub(f->g, "scalar_fn", &sc));
  hj_tensor_t u = hj_param(sc, HJ_F32, HJ_SCALAR, "u"), v = hj_param(sc, HJ_F32, HJ_SCALAR, "v");
  hj_graph_output(sc, hj_sub(u, hj_mul(v, v)));
  hj_tensor_t a = hj_param(f->g, HJ_F32, HJ_SHAPE(3), "a"), b = hj_param(f->g, HJ_F32, HJ_SHAPE(3), "b");
  hj_graph_output(f->g, hj_call(fma, (hj_tensor_t[]){ a, b }, 2));
  hj_graph_output(f->g, hj_map(sc, (hj_tensor_t[]){ a, b }, 2));
  /* scatter-add of {1, 2, 3} at rows {0, 2, 0} into zeros(5) */
  hj_tensor_t idx = hj_constant(f->g, HJ_S32, HJ_SHAPE(3, 1), (int32_t[]){ 0, 2, 0 });
  hj_tensor_t upd = hj_constant(f->g, HJ_F32, HJ_SHAPE(3), (float[]){ 1, 2, 3 });
  int64_t ins0 = 0;
  hj_scatter_dims_t sd = { .inserted_window_dims = &ins0, .n_inserted_window_dims = 1,
                           .scatter_dims_to_operand_dims = &ins0, .n_scatter_dims_to_operand_dims = 1,
                           .index_vector_dim = 1 };
  hj_graph_output(f->g, hj_scatter(hj_full(f->g, HJ_F32, HJ_SHAPE(5), 0), idx, upd, &sd, HJ_RED_SUM));
  float av[3] = { 1, 2, 3 }, bv[3] = { 4, 5, 6 };
  ta_in in[2] = { { HJ_F32, HJ_SHAPE(3), av }, { HJ_F32, HJ_SHAPE(3), bv } };
  ta_expect(f, in, 2, 3, 0, (double[]){ 5, 11, 19 }, 3, 0);
  ta_expect(f, in, 2, 3, 1, (double[]){ -15, -23, -33 }, 3, 0);
  ta_expect(f, in, 2, 3, 2, (double[]){ 4, 0, 2, 0, 0 }, 5, 0);
}

/* The primitive shape ops against values written out by hand. */
static void test_shape_ops(void **state) {
  ta_fix *f = *state;
  hj_graph_t *g = f->g;
  hj_tensor_t x = hj_param(g, HJ_F32, HJ_SHAPE(2, 3), "x");   /* {{0,1,2},{3,4,5}} */
  hj_tensor_t outs[12];
  int n = 0;
  outs[n++] = hj_transpose(x, (int64_t[]){ 1, 0 }, 2);                          /* 0 3 1 4 2 5 */
  outs[n++] = hj_slice(x, (int64_t[]){ 0, 0 }, (int64_t[]){ 2, 3 }, (int64_t[]){ 1, 2 }); /* 0 2 3 5 */
  hj_tensor_t st[2] = { hj_scalar(g, HJ_S32, 5), hj_scalar(g, HJ_S32, -1) };
  outs[n++] = hj_dynamic_slice(x, st, (int64_t[]){ 1, 2 });                     /* clamped: 3 4 */
  outs[n++] = hj_dynamic_update_slice(x, hj_full(g, HJ_F32, HJ_SHAPE(1, 2), 9), st); /* 0 1 2 9 9 5 */
  outs[n++] = hj_pad(hj_reshape(x, HJ_SHAPE(-1)), hj_scalar(g, HJ_F32, -1), (int64_t[]){ 1 },
                     (int64_t[]){ 0 }, (int64_t[]){ 1 });  /* -1 0 -1 1 -1 2 -1 3 -1 4 -1 5 */
  outs[n++] = hj_reverse(x, (int64_t[]){ 1 }, 1);                               /* 2 1 0 5 4 3 */
  outs[n++] = hj_broadcast_in_dim(hj_reshape(x, HJ_SHAPE(2, 1, 3)), HJ_SHAPE(2, 2, 3),
                                  (int64_t[]){ 0, 1, 2 }, 3);                   /* rows doubled */
  outs[n++] = hj_reduce(x, HJ_RED_MAX, (int64_t[]){ 0 }, 1);                    /* 3 4 5 */
  outs[n++] = hj_reduce(hj_add(x, hj_scalar(g, HJ_F32, 1)), HJ_RED_PROD, (int64_t[]){ 1 }, 1); /* 6 120 */
  outs[n++] = hj_convert(hj_clamp(hj_scalar(g, HJ_F32, 1), x, hj_scalar(g, HJ_F32, 3.5)), HJ_S32); /* 1 1 2 3 3 3 */
  hj_tensor_t col = hj_iota(g, HJ_F32, HJ_SHAPE(3), 0);                         /* 0 1 2 */
  outs[n++] = hj_select(hj_compare(x, col, HJ_CMP_EQ), x, hj_neg(hj_full(g, HJ_F32, HJ_SHAPE(2, 1), 1))); /* 0 1 2 -1 -1 -1 */
  outs[n++] = hj_reduce(hj_compare(x, hj_scalar(g, HJ_F32, 2.5), HJ_CMP_GT), HJ_RED_OR, (int64_t[]){ 1 }, 1); /* 0 1 */
  for (int i = 0; i < n; i++) {
    if (!hj_tensor_ok(outs[i])) fail_msg("op %d: %s", i, hj_ctx_error(f->ctx));
    hj_graph_output(g, outs[i]);
  }
  float xv[6] = { 0, 1, 2, 3, 4, 5 };
  ta_in in[1] = { { HJ_F32, HJ_SHAPE(2, 3), xv } };
  static const double want[][12] = {
    { 0, 3, 1, 4, 2, 5 }, { 0, 2, 3, 5 }, { 3, 4 }, { 0, 1, 2, 9, 9, 5 },
    { -1, 0, -1, 1, -1, 2, -1, 3, -1, 4, -1, 5 }, { 2, 1, 0, 5, 4, 3 },
    { 0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5 }, { 3, 4, 5 }, { 6, 120 }, { 1, 1, 2, 3, 3, 3 },
    { 0, 1, 2, -1, -1, -1 }, { 0, 1 },
  };
  static const int count[] = { 6, 4, 2, 6, 12, 6, 12, 3, 2, 6, 6, 2 };
  for (int i = 0; i < n; i++) {
    hj_buffer_t *o = ta_run(f, in, 1, n, i);
    float got[12];
    const void *p = hj_buffer_host_ptr(o);
    for (int k = 0; k < count[i]; k++)
      got[k] = hj_buffer_dtype(o) == HJ_S32 ? (float)((const int32_t *)p)[k]
             : hj_buffer_dtype(o) == HJ_PRED ? (float)((const uint8_t *)p)[k] : ((const float *)p)[k];
    assert_int_equal(hj_shape_numel(hj_buffer_shape(o)), count[i]);
    ta_close_f32(got, want[i], count[i], 0);
    hj_buffer_destroy(o);
  }
}

/* hj_reduce_precision against values worked out by hand: (5, 10) is f16's range and
   precision without its subnormals, (8, 7) bf16's. */
static void test_reduce_precision(void **state) {
  ta_fix *f = *state;
  hj_graph_t *g = f->g;
  hj_tensor_t x = hj_param(g, HJ_F32, HJ_SHAPE(6), "x");
  hj_graph_output(g, hj_reduce_precision(x, 5, 10));
  hj_graph_output(g, hj_reduce_precision(x, 8, 7));
  /* 1 + 2^-11: the tie between 1 and 1 + 2^-10 goes to the even 1 (10 bits), and to 1 at 7
     bits; 1 + 3 * 2^-11 rounds up at 10 bits (to 1 + 2^-9: even), to 1 at 7 bits; 65520
     overflows f16's range (its largest is 65504) but not bf16's, where it rounds to 65536;
     2^-20 is below f16's normal range: 0; -0.1 rounds to -0.0999755859375 (10 bits),
     -0.10009765625 (7 bits); 3 stays 3. */
  float xv[6] = { 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65520.0f, 0x1p-20f, -0.1f, 3.0f };
  ta_in in[1] = { { HJ_F32, HJ_SHAPE(6), xv } };
  hj_buffer_t *o = ta_run(f, in, 1, 2, 0);
  float *p = hj_buffer_host_ptr(o);
  assert_true(isinf(p[2]) && p[2] > 0);
  p[2] = 0;   /* the comparison below takes finite values */
  ta_close_f32(p, (double[]){ 1, 1 + 0x1p-9, 0, 0, -0.0999755859375, 3 }, 6, 0);
  hj_buffer_destroy(o);
  ta_expect(f, in, 1, 2, 1, (double[]){ 1, 1, 65536, 0x1p-20, -0.10009765625, 3 }, 6, 0);
  hj_tensor_t bad = hj_reduce_precision(x, 0, 3);   /* no exponent bits: refused */
  assert_false(hj_tensor_ok(bad));
  assert_int_equal(hj_graph_status(g), HJ_ERR_SHAPE);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, ta_setup, ta_teardown)
  const struct CMUnitTest tests[] = {
    T(test_softmax), T(test_log_softmax), T(test_layer_norm), T(test_gelu), T(test_mean_var),
    T(test_matmul_2d), T(test_matmul_batch_broadcast), T(test_embedding_clamps),
    T(test_argmax_ties), T(test_split_concat), T(test_causal_mask), T(test_while_counting),
    T(test_conditional), T(test_reduce_with_variadic), T(test_sort_descending),
    T(test_tuple_flattening), T(test_call_map_scatter), T(test_shape_ops),
    T(test_reduce_precision),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
