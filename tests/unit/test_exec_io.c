/* test_exec_io.c — inputs and outputs by name, and bound inputs (hlojit.h: "names and
   bound inputs").

   Names: a graph's parameters keep the caller's names (not the HLO instruction's
   "name.<id>"), unnamed ones are in<k>, tuple parameter leaves name{j}; outputs are named
   by hj_graph_output_named or out<k>; a module's inputs carry its parameter instruction
   names. Look-ups: found, missing (the message lists the names), ambiguous (a name two
   inputs carry). Bindings: a wrong shape or dtype is refused and changes nothing; runs then
   take only the unbound inputs, in input order, and passing a bound one too is refused;
   unbinding restores the full convention; a binding keeps its buffer alive. */
#include "testutil.h"
#include "api_testutil.h"
#include "cpu_testutil.h"

/* y = x @ w + b, z = sum(x); plus an unnamed parameter s and a tuple parameter t. */
static hj_graph_t *tio_graph(hj_ctx_t *ctx) {
  hj_graph_t *g;
  CHECK_OK(ctx, hj_graph_create(ctx, "lin", &g));
  hj_tensor_t x = hj_param(g, HJ_F32, HJ_SHAPE(2, 4), "x");
  hj_tensor_t w = hj_param(g, HJ_F32, HJ_SHAPE(4, 3), "wte");
  hj_tensor_t b = hj_param(g, HJ_F32, HJ_SHAPE(3), "h.0.b");
  hj_tensor_t s = hj_param(g, HJ_F32, HJ_SCALAR, NULL);
  hj_tensor_t t = hj_param_tuple(g, (hj_dtype_t[]){ HJ_F32, HJ_S32 }, (hj_shape_t[]){ HJ_SHAPE(3), HJ_SCALAR },
                                 2, "t");
  hj_tensor_t y = hj_add(hj_add(hj_matmul(x, w), b), hj_get_tuple_element(t, 0));
  CHECK_OK(ctx, hj_graph_output_named(g, hj_mul(y, s), "y"));
  CHECK_OK(ctx, hj_graph_output(g, hj_reduce(x, HJ_RED_SUM, NULL, 0)));
  return g;
}

static void test_names(void **state) {
  (void)state;
  hj_ctx_t *ctx = tu_ctx();
  hj_graph_t *g = tio_graph(ctx);
  hj_exec_t *e;
  CHECK_OK(ctx, hj_compile(g, &e));
  assert_int_equal(hj_exec_num_inputs(e), 6);
  const char *want_in[6] = { "x", "wte", "h.0.b", "in3", "t{0}", "t{1}" };
  for (int i = 0; i < 6; i++) assert_string_equal(hj_exec_input_name(e, i), want_in[i]);
  assert_null(hj_exec_input_name(e, 6));
  assert_string_equal(hj_exec_output_name(e, 0), "y");
  assert_string_equal(hj_exec_output_name(e, 1), "out1");
  assert_int_equal(hj_exec_find_input(e, "wte"), 1);
  assert_int_equal(hj_exec_find_input(e, "t{1}"), 5);
  assert_int_equal(hj_exec_find_output(e, "y"), 0);
  assert_int_equal(hj_exec_find_output(e, "out1"), 1);
  assert_int_equal(hj_exec_find_input(e, "wpe"), -1);
  ta_has(hj_ctx_error(ctx), "'lin' has no input named 'wpe' (inputs: x, wte, h.0.b, in3, t{0}, t{1})");
  assert_int_equal(hj_exec_find_input(e, NULL), -1);
  hj_exec_destroy(e);
  /* the same module compiled from its text: the parameter instructions' names */
  hj_module_t *m;
  CHECK_OK(ctx, hj_graph_to_module(g, &m));
  CHECK_OK(ctx, hj_compile_module(ctx, m, &e));
  assert_string_equal(hj_exec_input_name(e, 0), "x.0");
  assert_string_equal(hj_exec_input_name(e, 5), "t.4{1}");
  assert_string_equal(hj_exec_output_name(e, 0), "out0");
  hj_exec_destroy(e);
  hj_module_destroy(m);
  hj_graph_destroy(g);
  /* a name two inputs carry */
  CHECK_OK(ctx, hj_graph_create(ctx, "dup", &g));
  hj_tensor_t a = hj_param(g, HJ_F32, HJ_SHAPE(2), "a"), a2 = hj_param(g, HJ_F32, HJ_SHAPE(2), "a");
  CHECK_OK(ctx, hj_graph_output(g, hj_add(a, a2)));
  CHECK_OK(ctx, hj_compile(g, &e));
  assert_int_equal(hj_exec_find_input(e, "a"), -1);
  ta_has(hj_ctx_error(ctx), "2 inputs of 'dup' are named 'a' (the first is 0): look them up by index");
  assert_int_equal(hj_exec_bind_name(e, "a", NULL), HJ_ERR_INVALID_ARG);
  hj_exec_destroy(e);
  hj_graph_destroy(g);
  hj_ctx_destroy(ctx);
}

static hj_buffer_t *tio_fill(hj_ctx_t *ctx, hj_dtype_t t, hj_shape_t s, float base) {
  hj_buffer_t *b;
  CHECK_OK(ctx, hj_buffer_create(ctx, t, s, &b));
  for (int64_t i = 0; i < hj_shape_numel(s); i++) {
    if (t == HJ_F32) ((float *)hj_buffer_host_ptr(b))[i] = base + (float)i;
    else ((int32_t *)hj_buffer_host_ptr(b))[i] = (int32_t)i;
  }
  return b;
}

static void tio_bind(hj_backend_t be) {
  hj_ctx_t *ctx = cb_ctx(be, 1, NULL);
  hj_graph_t *g = tio_graph(ctx);
  hj_exec_t *e;
  CHECK_OK(ctx, hj_compile(g, &e));
  hj_buffer_t *x = tio_fill(ctx, HJ_F32, HJ_SHAPE(2, 4), 0), *w = tio_fill(ctx, HJ_F32, HJ_SHAPE(4, 3), 1);
  hj_buffer_t *b = tio_fill(ctx, HJ_F32, HJ_SHAPE(3), 2), *s = tio_fill(ctx, HJ_F32, HJ_SCALAR, 3);
  hj_buffer_t *t0 = tio_fill(ctx, HJ_F32, HJ_SHAPE(3), 4), *t1 = tio_fill(ctx, HJ_S32, HJ_SCALAR, 0);
  hj_buffer_t *all[6] = { x, w, b, s, t0, t1 }, *ref[2] = { NULL, NULL }, *out[2] = { NULL, NULL };
  CHECK_OK(ctx, hj_exec_run(e, all, 6, ref, 2));
  /* a wrong shape, a wrong dtype: refused, nothing bound */
  hj_buffer_t *bad = tio_fill(ctx, HJ_F32, HJ_SHAPE(3, 4), 0), *badt = tio_fill(ctx, HJ_S32, HJ_SHAPE(4, 3), 0);
  assert_int_equal(hj_exec_bind_name(e, "wte", bad), HJ_ERR_SHAPE);
  ta_has(hj_ctx_error(ctx), "input 1 ('wte') of 'lin' is f32[4,3], the buffer is f32[3,4]");
  assert_int_equal(hj_exec_bind_name(e, "wte", badt), HJ_ERR_SHAPE);
  assert_int_equal(hj_exec_bind(e, 6, w), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_exec_num_unbound_inputs(e), 6);
  /* bind the weights: runs take x, s, t{0}, t{1} */
  CHECK_OK(ctx, hj_exec_bind_name(e, "wte", w));
  CHECK_OK(ctx, hj_exec_bind(e, 2, b));
  assert_int_equal(hj_exec_num_unbound_inputs(e), 4);
  assert_ptr_equal(hj_exec_bound(e, 1), w);
  assert_null(hj_exec_bound(e, 0));
  hj_buffer_destroy(w);                       /* the bindings keep w and b alive */
  hj_buffer_destroy(b);
  hj_buffer_t *four[4] = { x, s, t0, t1 };
  CHECK_OK(ctx, hj_exec_run(e, four, 4, out, 2));
  for (int k = 0; k < 2; k++)
    assert_memory_equal(hj_buffer_host_ptr(out[k]), hj_buffer_host_ptr(ref[k]), hj_buffer_nbytes(ref[k]));
  /* all six given although two are bound */
  assert_int_equal(hj_exec_run(e, all, 6, out, 2), HJ_ERR_INVALID_ARG);
  ta_has(hj_ctx_error(ctx), "6 inputs given, but 2 of module 'lin''s 6 inputs are bound (input 1, 'wte', is): "
                            "give the 4 unbound ones, in input order");
  assert_int_equal(hj_exec_run(e, four, 3, out, 2), HJ_ERR_INVALID_ARG);
  ta_has(hj_ctx_error(ctx), "3 inputs given, module 'lin' has 4 unbound ones");
  /* rebinding replaces, unbinding restores the full list */
  hj_buffer_t *w2 = tio_fill(ctx, HJ_F32, HJ_SHAPE(4, 3), 1);
  CHECK_OK(ctx, hj_exec_bind(e, 1, w2));
  hj_buffer_destroy(w2);
  CHECK_OK(ctx, hj_exec_run(e, four, 4, out, 2));
  assert_memory_equal(hj_buffer_host_ptr(out[0]), hj_buffer_host_ptr(ref[0]), hj_buffer_nbytes(ref[0]));
  CHECK_OK(ctx, hj_exec_bind(e, 1, NULL));
  CHECK_OK(ctx, hj_exec_bind(e, 2, NULL));
  assert_int_equal(hj_exec_num_unbound_inputs(e), 6);
  assert_int_equal(hj_exec_run(e, four, 4, out, 2), HJ_ERR_INVALID_ARG);
  hj_buffer_t *x2 = tio_fill(ctx, HJ_F32, HJ_SHAPE(2, 4), 0), *w3 = tio_fill(ctx, HJ_F32, HJ_SHAPE(4, 3), 1);
  hj_buffer_t *b3 = tio_fill(ctx, HJ_F32, HJ_SHAPE(3), 2), *all2[6] = { x2, w3, b3, s, t0, t1 };
  CHECK_OK(ctx, hj_exec_run(e, all2, 6, out, 2));
  assert_memory_equal(hj_buffer_host_ptr(out[0]), hj_buffer_host_ptr(ref[0]), hj_buffer_nbytes(ref[0]));
  for (int k = 0; k < 2; k++) hj_buffer_destroy(out[k]), hj_buffer_destroy(ref[k]);
  hj_buffer_t *rest[] = { x, s, t0, t1, bad, badt, x2, w3, b3 };
  for (size_t k = 0; k < sizeof rest / sizeof *rest; k++) hj_buffer_destroy(rest[k]);
  hj_exec_destroy(e);
  hj_graph_destroy(g);
  hj_ctx_destroy(ctx);
}

static void test_bind_interp(void **state) { (void)state; tio_bind(HJ_BACKEND_INTERP); }
static void test_bind_cpu(void **state) { (void)state; tio_bind(HJ_BACKEND_CPU); }

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_names),
    cmocka_unit_test(test_bind_interp),
    cmocka_unit_test(test_bind_cpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
