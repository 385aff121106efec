/* test_linear.c — hj_linear for both weight layouts, hj_dot_general's result order, and
   the multi-result convention (hj_split returns a tuple; hj_unpack).

   hj_linear: x (2, 3, 4) with the same weights stored (in, out) = W and (out, in) = W^T,
   with and without bias, on the evaluator and the CPU backend, against a double-precision
   loop over the definition y[b,t,o] = sum_i x[b,t,i] W[i,o] + bias[o]; each refusal names
   the shapes. dot_general: the result dims are batch, lhs free, rhs free (XLA's order),
   checked on shapes where another order would differ. */
#include "testutil.h"
#include "api_testutil.h"
#include "cpu_testutil.h"

enum { TL_B = 2, TL_T = 3, TL_I = 4, TL_O = 5 };

static void tl_run(hj_backend_t be, hj_linear_layout_t layout, bool bias) {
  hj_ctx_t *ctx = cb_ctx(be, 1, NULL);
  hj_graph_t *g;
  CHECK_OK(ctx, hj_graph_create(ctx, "lin", &g));
  hj_shape_t ws = layout == HJ_LINEAR_IN_OUT ? HJ_SHAPE(TL_I, TL_O) : HJ_SHAPE(TL_O, TL_I);
  hj_tensor_t x = hj_param(g, HJ_F32, HJ_SHAPE(TL_B, TL_T, TL_I), "x"), w = hj_param(g, HJ_F32, ws, "w");
  hj_tensor_t b = bias ? hj_param(g, HJ_F32, HJ_SHAPE(TL_O), "b") : HJ_NONE;
  hj_tensor_t y = hj_linear(x, w, b, layout);
  hj_shape_t ys = hj_tensor_shape(y);
  assert_int_equal(ys.rank, 3);
  assert_int_equal(ys.dims[2], TL_O);
  CHECK_OK(ctx, hj_graph_output(g, y));
  float xv[TL_B * TL_T * TL_I], W[TL_I][TL_O], wv[TL_I * TL_O], bv[TL_O];
  for (int i = 0; i < TL_B * TL_T * TL_I; i++) xv[i] = (float)((i * 7) % 11) - 5;
  for (int i = 0; i < TL_I; i++)
    for (int o = 0; o < TL_O; o++) W[i][o] = (float)((i * 3 + o * 5) % 7) - 3;
  for (int i = 0; i < TL_I; i++)
    for (int o = 0; o < TL_O; o++) wv[layout == HJ_LINEAR_IN_OUT ? i * TL_O + o : o * TL_I + i] = W[i][o];
  for (int o = 0; o < TL_O; o++) bv[o] = 0.5f * (float)o;
  hj_buffer_t *in[3];
  CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_F32, HJ_SHAPE(TL_B, TL_T, TL_I), xv, &in[0]));
  CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_F32, ws, wv, &in[1]));
  CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_F32, HJ_SHAPE(TL_O), bv, &in[2]));
  hj_exec_t *e;
  CHECK_OK(ctx, hj_compile(g, &e));
  hj_buffer_t *out[1] = { NULL };
  CHECK_OK(ctx, hj_exec_run(e, in, bias ? 3 : 2, out, 1));
  double want[TL_B * TL_T * TL_O];
  for (int r = 0; r < TL_B * TL_T; r++)
    for (int o = 0; o < TL_O; o++) {
      double s = bias ? bv[o] : 0;
      for (int i = 0; i < TL_I; i++) s += (double)xv[r * TL_I + i] * W[i][o];
      want[r * TL_O + o] = s;
    }
  ta_close_f32(hj_buffer_host_ptr(out[0]), want, TL_B * TL_T * TL_O, 1e-5);
  hj_buffer_destroy(out[0]);
  for (int k = 0; k < 3; k++) hj_buffer_destroy(in[k]);
  hj_exec_destroy(e);
  hj_graph_destroy(g);
  hj_ctx_destroy(ctx);
}

static void test_linear_values(void **state) {
  (void)state;
  hj_backend_t bes[2] = { HJ_BACKEND_INTERP, HJ_BACKEND_CPU };
  for (int b = 0; b < 2; b++)
    for (int l = 0; l < 2; l++)
      for (int bias = 0; bias < 2; bias++) tl_run(bes[b], (hj_linear_layout_t)l, bias);
}

static void test_linear_refusals(void **state) {
  ta_fix *f = *state;
  hj_tensor_t x = hj_param(f->g, HJ_F32, HJ_SHAPE(2, 4), "x"), w = hj_param(f->g, HJ_F32, HJ_SHAPE(5, 4), "w");
  hj_tensor_t w3 = hj_param(f->g, HJ_F32, HJ_SHAPE(1, 5, 4), "w3"), wi = hj_param(f->g, HJ_S32, HJ_SHAPE(4, 5), "wi");
  hj_tensor_t b4 = hj_param(f->g, HJ_F32, HJ_SHAPE(4), "b4");
  assert_true(hj_tensor_ok(hj_linear(x, w, HJ_NONE, HJ_LINEAR_OUT_IN)));
  assert_false(hj_tensor_ok(hj_linear(x, w, HJ_NONE, HJ_LINEAR_IN_OUT)));
  ta_has(hj_ctx_error(f->ctx), "hj_linear: x has 4 features, w f32[5,4] (in, out) takes 5 (x f32[2,4])");
  assert_false(hj_tensor_ok(hj_linear(x, w3, HJ_NONE, HJ_LINEAR_OUT_IN)));
  ta_has(hj_ctx_error(f->ctx), "x must have rank >= 1 and w rank 2");
  assert_false(hj_tensor_ok(hj_linear(x, wi, HJ_NONE, HJ_LINEAR_IN_OUT)));
  ta_has(hj_ctx_error(f->ctx), "hj_linear: dtypes f32 and s32 differ");
  assert_false(hj_tensor_ok(hj_linear(x, w, b4, HJ_LINEAR_OUT_IN)));
  ta_has(hj_ctx_error(f->ctx), "hj_linear: the bias must be f32[5] (b f32[4])");
  assert_false(hj_tensor_ok(hj_linear(x, w, HJ_NONE, (hj_linear_layout_t)7)));
  ta_has(hj_ctx_error(f->ctx), "invalid layout 7");
}

static void test_dot_general_order(void **state) {
  ta_fix *f = *state;
  /* a (M=2, B=3, K=4), b (K=4, B=3, N=5): batch a1/b1, contract a2/b0 -> (B, M, N) */
  hj_tensor_t a = hj_param(f->g, HJ_F32, HJ_SHAPE(2, 3, 4), "a"), b = hj_param(f->g, HJ_F32, HJ_SHAPE(4, 3, 5), "b");
  int64_t lb = 1, rb = 1, lc = 2, rc = 0;
  hj_dot_dims_t d = { &lb, 1, &rb, 1, &lc, 1, &rc, 1 };
  hj_shape_t s = hj_tensor_shape(hj_dot_general(a, b, &d));
  assert_int_equal(s.rank, 3);
  assert_int_equal(s.dims[0], 3);
  assert_int_equal(s.dims[1], 2);
  assert_int_equal(s.dims[2], 5);
  /* no batch: lhs free (2, 3) then rhs free (3, 5) */
  int64_t rc2 = 0;
  hj_dot_dims_t d2 = { NULL, 0, NULL, 0, &lc, 1, &rc2, 1 };
  s = hj_tensor_shape(hj_dot_general(a, b, &d2));
  int64_t want[4] = { 2, 3, 3, 5 };
  assert_int_equal(s.rank, 4);
  for (int i = 0; i < 4; i++) assert_int_equal(s.dims[i], want[i]);
}

static void test_split_unpack(void **state) {
  ta_fix *f = *state;
  hj_tensor_t x = hj_param(f->g, HJ_F32, HJ_SHAPE(2, 6), "x"), p[3];
  hj_tensor_t t = hj_split(x, 1, (int64_t[]){ 1, 2, 3 }, 3);
  assert_int_equal(hj_tensor_dtype(t), HJ_DTYPE_COUNT);          /* a tuple */
  assert_int_equal(hj_unpack(t, p, 2), HJ_ERR_SHAPE);
  ta_has(hj_ctx_error(f->ctx), "hj_unpack: (f32[2,1], f32[2,2], f32[2,3]) is not a tuple of 2");
  assert_false(hj_tensor_ok(p[0]));
  assert_int_equal(hj_unpack(x, p, 1), HJ_ERR_SHAPE);
  assert_int_equal(hj_unpack(HJ_NONE, p, 1), HJ_ERR_INVALID_ARG);
}

static void test_split_unpack_ok(void **state) {
  ta_fix *f = *state;
  hj_tensor_t x = hj_param(f->g, HJ_F32, HJ_SHAPE(2, 6), "x"), p[3];
  CHECK_OK(f->ctx, hj_unpack(hj_split(x, 1, (int64_t[]){ 1, 2, 3 }, 3), p, 3));
  for (int i = 0; i < 3; i++) assert_int_equal(hj_tensor_shape(p[i]).dims[1], i + 1);
  CHECK_OK(f->ctx, hj_graph_status(f->g));
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_linear_values),
    cmocka_unit_test_setup_teardown(test_linear_refusals, ta_setup, ta_teardown),
    cmocka_unit_test_setup_teardown(test_dot_general_order, ta_setup, ta_teardown),
    cmocka_unit_test_setup_teardown(test_split_unpack, ta_setup, ta_teardown),
    cmocka_unit_test_setup_teardown(test_split_unpack_ok, ta_setup, ta_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
