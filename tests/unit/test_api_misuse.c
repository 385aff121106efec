/* test_api_misuse.c — the public API misused: shape, dtype and handle errors return a
   status, poison the tensors built from them (silently, keeping the first message) and leave
   a message in the context that names the op and the shapes; NULL pointers, wrong buffers
   for hj_exec_run, a backend that is not built and a custom allocator (everything it hands
   out comes back). Nothing may abort or leak: this also runs under ASan/UBSan. Expected
   messages and values are written out by hand here. */
#include "testutil.h"
#include "api_testutil.h"

/* ---- misuse --------------------------------------------------------------------------- */

static void test_add_shape_mismatch(void **state) {
  ta_fix *f = *state;
  hj_tensor_t a = hj_param(f->g, HJ_F32, HJ_SHAPE(4, 8), "a");
  hj_tensor_t b = hj_param(f->g, HJ_F32, HJ_SHAPE(3), "b");
  hj_tensor_t c = hj_add(a, b);
  assert_false(hj_tensor_ok(c));
  assert_true(c.graph == f->g && c.id < 0);
  assert_int_equal(hj_graph_status(f->g), HJ_ERR_SHAPE);
  ta_has(hj_ctx_error(f->ctx), "hj_add: shapes f32[4,8] and f32[3] do not broadcast");
  /* poisoned tensors propagate silently: the first message stays */
  hj_tensor_t d = hj_exp(hj_mul(c, a));
  assert_false(hj_tensor_ok(d));
  assert_int_equal(hj_tensor_dtype(d), HJ_DTYPE_COUNT);
  assert_int_equal(hj_tensor_shape(d).rank, 0);
  hj_ctx_clear_error(f->ctx);
  hj_graph_output(f->g, a);
  hj_exec_t *e = (hj_exec_t *)1;
  assert_int_equal(hj_compile(f->g, &e), HJ_ERR_SHAPE);
  assert_null(e);
  ta_has(hj_ctx_error(f->ctx), "hj_add: shapes f32[4,8] and f32[3]");
  hj_module_t *m = (hj_module_t *)1;
  assert_int_equal(hj_graph_to_module(f->g, &m), HJ_ERR_SHAPE);
  assert_null(m);
}

static void test_matmul_mismatch(void **state) {
  ta_fix *f = *state;
  hj_tensor_t a = hj_param(f->g, HJ_F32, HJ_SHAPE(4, 8), "a");
  hj_tensor_t b = hj_param(f->g, HJ_F32, HJ_SHAPE(3, 2), "b");
  assert_false(hj_tensor_ok(hj_matmul(a, b)));
  ta_has(hj_ctx_error(f->ctx), "hj_matmul: contracting dims 8 vs 3");
  ta_has(hj_ctx_error(f->ctx), "f32[4,8]");
  ta_has(hj_ctx_error(f->ctx), "f32[3,2]");
}

static void test_batch_matmul_mismatch(void **state) {
  ta_fix *f = *state;
  hj_tensor_t a = hj_param(f->g, HJ_F32, HJ_SHAPE(2, 4, 3), "a");
  hj_tensor_t b = hj_param(f->g, HJ_F32, HJ_SHAPE(5, 3, 2), "b");
  assert_false(hj_tensor_ok(hj_matmul(a, b)));
  ta_has(hj_ctx_error(f->ctx), "hj_matmul: batch dims of a f32[2,4,3] and b f32[5,3,2]");
}

static void test_wrong_dtype(void **state) {
  ta_fix *f = *state;
  hj_tensor_t a = hj_param(f->g, HJ_F32, HJ_SHAPE(4), "a");
  hj_tensor_t b = hj_param(f->g, HJ_S32, HJ_SHAPE(4), "b");
  assert_false(hj_tensor_ok(hj_add(a, b)));
  ta_has(hj_ctx_error(f->ctx), "hj_add: dtypes f32 and s32 differ");
  assert_int_equal(hj_graph_status(f->g), HJ_ERR_SHAPE);
}

/* A dot's operands: one dtype, or floats of different widths (f32 x bf16: a mixed-precision
   dot, result f32); integers of different widths and f16 x bf16 are errors. */
static void test_matmul_dtypes(void **state) {
  ta_fix *f = *state;
  hj_tensor_t x = hj_param(f->g, HJ_F32, HJ_SHAPE(4, 8), "x");
  hj_tensor_t w16 = hj_param(f->g, HJ_BF16, HJ_SHAPE(8, 3), "w16");
  hj_tensor_t y = hj_matmul(x, w16);
  assert_true(hj_tensor_ok(y));
  assert_int_equal(hj_tensor_dtype(y), HJ_F32);
  hj_tensor_t wt = hj_param(f->g, HJ_BF16, HJ_SHAPE(3, 8), "wt");
  hj_tensor_t z = hj_linear(x, wt, HJ_NONE, HJ_LINEAR_OUT_IN);
  assert_true(hj_tensor_ok(z));
  assert_int_equal(hj_tensor_dtype(z), HJ_F32);
  assert_int_equal(hj_graph_status(f->g), HJ_OK);
  hj_tensor_t h = hj_param(f->g, HJ_F16, HJ_SHAPE(8, 3), "h");
  assert_false(hj_tensor_ok(hj_matmul(hj_convert(x, HJ_BF16), h)));
  ta_has(hj_ctx_error(f->ctx), "hj_matmul: dtypes bf16 and f16 differ");
  hj_tensor_t i = hj_param(f->g, HJ_S32, HJ_SHAPE(8, 3), "i");
  assert_false(hj_tensor_ok(hj_matmul(x, i)));
  ta_has(hj_ctx_error(f->ctx), "hj_matmul: dtypes f32 and s32 differ");
}

static void test_inner_op_error_named(void **state) {
  ta_fix *f = *state;
  hj_tensor_t a = hj_param(f->g, HJ_S32, HJ_SHAPE(4), "a");
  assert_false(hj_tensor_ok(hj_exp(a)));  /* rejected by shape inference */
  ta_has(hj_ctx_error(f->ctx), "hj_exp");
  ta_has(hj_ctx_error(f->ctx), "s32[4]");
}

static void test_bad_handles(void **state) {
  ta_fix *f = *state;
  hj_tensor_t a = hj_param(f->g, HJ_F32, HJ_SHAPE(4), "a");
  hj_tensor_t bad = { f->g, 999 };
  assert_false(hj_tensor_ok(hj_add(a, bad)));
  ta_has(hj_ctx_error(f->ctx), "hj_add: bad tensor handle (id 999");
  assert_int_equal(hj_graph_status(f->g), HJ_ERR_INVALID_ARG);

  hj_graph_t *g2;
  CHECK_OK(f->ctx, hj_graph_create(f->ctx, "other", &g2));
  hj_tensor_t b = hj_param(g2, HJ_F32, HJ_SHAPE(4), "b");
  assert_false(hj_tensor_ok(hj_sub(b, a)));
  ta_has(hj_ctx_error(f->ctx), "hj_sub: operand 1 belongs to graph 't', not to graph 'other'");
  assert_int_equal(hj_graph_status(g2), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_graph_output(g2, a), HJ_ERR_INVALID_ARG);
  assert_false(hj_tensor_ok(hj_mul(b, HJ_NONE)));
  hj_graph_destroy(g2);

  /* NULL graphs: HJ_NONE back, nothing to record into, no crash */
  hj_tensor_t n = hj_param(NULL, HJ_F32, HJ_SHAPE(4), "x");
  assert_null(n.graph);
  assert_false(hj_tensor_ok(hj_neg(n)));
  assert_false(hj_tensor_ok(hj_add(n, n)));
  assert_false(hj_tensor_ok(hj_causal_mask(NULL, 4)));
  assert_false(hj_tensor_ok(hj_param(f->g, HJ_DTYPE_COUNT, HJ_SHAPE(1), "x")));
  assert_false(hj_tensor_ok(hj_param(f->g, HJ_F32, (hj_shape_t){ .rank = 9 }, "x")));
  assert_false(hj_tensor_ok(hj_softmax(a, 1)));
}

static void test_null_pointers(void **state) {
  ta_fix *f = *state;
  hj_ctx_t *c2 = (hj_ctx_t *)1;
  CHECK_OK(NULL, hj_ctx_create(NULL, &c2));  /* NULL options: defaults */
  assert_string_equal(hj_ctx_error(c2), "");
  hj_ctx_destroy(c2);
  assert_int_equal(hj_ctx_create(NULL, NULL), HJ_ERR_INVALID_ARG);
  assert_string_equal(hj_ctx_error(NULL), "");
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  assert_int_equal(o.backend, HJ_BACKEND_AUTO);
  assert_int_equal(o.num_threads, 0);
  assert_null(o.dump_dir);
  assert_null(o.allocator.alloc);
  o.backend = HJ_BACKEND_COUNT;
  assert_int_equal(hj_ctx_create(&o, &c2), HJ_ERR_INVALID_ARG);
  assert_null(c2);

  assert_int_equal(hj_graph_create(f->ctx, "x", NULL), HJ_ERR_INVALID_ARG);
  ta_has(hj_ctx_error(f->ctx), "hj_graph_create: out is NULL");
  hj_graph_t *g = (hj_graph_t *)1;
  assert_int_equal(hj_graph_create(NULL, "x", &g), HJ_ERR_INVALID_ARG);
  assert_null(g);
  assert_int_equal(hj_graph_create_sub(NULL, "x", &g), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_graph_status(NULL), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_graph_output(NULL, HJ_NONE), HJ_ERR_INVALID_ARG);
  hj_graph_destroy(NULL);

  hj_buffer_t *b = (hj_buffer_t *)1;
  assert_int_equal(hj_buffer_from_host(f->ctx, HJ_F32, HJ_SHAPE(2), NULL, &b), HJ_ERR_INVALID_ARG);
  assert_null(b);
  ta_has(hj_ctx_error(f->ctx), "hj_buffer_from_host: data is NULL");
  assert_int_equal(hj_buffer_create(f->ctx, HJ_DTYPE_COUNT, HJ_SHAPE(2), &b), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_buffer_create(NULL, HJ_F32, HJ_SHAPE(2), &b), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_buffer_create(f->ctx, HJ_F32, HJ_SHAPE(2), NULL), HJ_ERR_INVALID_ARG);
  CHECK_OK(f->ctx, hj_buffer_create(f->ctx, HJ_F32, HJ_SHAPE(2, 3), &b));
  assert_int_equal(hj_buffer_nbytes(b), 24);
  assert_int_equal(hj_buffer_copy_to_host(b, NULL, 24), HJ_ERR_INVALID_ARG);
  float small[2];
  assert_int_equal(hj_buffer_copy_to_host(b, small, sizeof small), HJ_ERR_INVALID_ARG);
  ta_has(hj_ctx_error(f->ctx), "8 bytes given, buffer has 24");
  hj_buffer_destroy(b);
  hj_buffer_destroy(NULL);
  assert_null(hj_buffer_host_ptr(NULL));
  assert_int_equal(hj_buffer_write_npy(NULL, "/tmp/x.npy"), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_buffer_read_npy(f->ctx, NULL, &b), HJ_ERR_INVALID_ARG);

  hj_exec_t *e = (hj_exec_t *)1;
  assert_int_equal(hj_compile(NULL, &e), HJ_ERR_INVALID_ARG);
  assert_null(e);
  assert_int_equal(hj_compile(f->g, NULL), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_compile_module(f->ctx, NULL, &e), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_exec_run(NULL, NULL, 0, NULL, 0), HJ_ERR_INVALID_ARG);
  hj_exec_destroy(NULL);
  char *text = (char *)1;
  assert_int_equal(hj_module_print(NULL, &text), HJ_ERR_INVALID_ARG);
  assert_null(text);
  hj_module_t *m = (hj_module_t *)1;
  assert_int_equal(hj_module_parse(f->ctx, NULL, 0, NULL, &m), HJ_ERR_INVALID_ARG);
  assert_null(m);
  assert_int_equal(hj_module_parse_file(f->ctx, "/nonexistent/x.hlo", &m), HJ_ERR_IO);
  ta_has(hj_ctx_error(f->ctx), "/nonexistent/x.hlo");
  assert_int_equal(hj_module_num_inputs(NULL), 0);
  hj_module_destroy(NULL);

  hj_tensor_t x = hj_param(f->g, HJ_F32, HJ_SHAPE(2, 6), "x");
  hj_tensor_t parts[2];
  assert_false(hj_tensor_ok(hj_split(x, 1, NULL, 2)));
  assert_int_equal(hj_unpack(hj_split(x, 1, NULL, 2), parts, 2), HJ_ERR_INVALID_ARG);
  assert_false(hj_tensor_ok(parts[0]));
  assert_false(hj_tensor_ok(hj_split(x, 1, (int64_t[]){ 1, 2 }, 2)));
  ta_has(hj_ctx_error(f->ctx), "hj_split: sizes sum to 3, f32[2,6] has 6 along axis 1");
  assert_false(hj_tensor_ok(hj_slice(x, NULL, NULL, NULL)));
  assert_false(hj_tensor_ok(hj_gather(x, x, NULL)));
  assert_false(hj_tensor_ok(hj_concat(NULL, 2, 0)));
  assert_false(hj_tensor_ok(hj_tuple(f->g, NULL, 2)));
  {
    assert_string_equal(hj_status_name(HJ_OK), "HJ_OK");
    assert_string_equal(hj_status_name(HJ_ERR_SHAPE), "HJ_ERR_SHAPE");
    assert_string_equal(hj_status_name((hj_status)99), "HJ_ERR_UNKNOWN");
    assert_string_equal(hj_dtype_name(HJ_BF16), "bf16");
    assert_null(hj_dtype_name(HJ_DTYPE_COUNT));
    assert_int_equal(hj_dtype_size(HJ_F64), 8);
    assert_int_equal(hj_dtype_size(HJ_DTYPE_COUNT), 0);
    assert_int_equal(hj_shape_numel(HJ_SHAPE(2, HJ_DYN(5), 3)), 30);
  }
}

/* A graph y = a * 2 + b with a f32[2,3], b f32[3] compiled once for the run checks. */
static hj_exec_t *ta_exec_ab(ta_fix *f) {
  hj_tensor_t a = hj_param(f->g, HJ_F32, HJ_SHAPE(2, 3), "a");
  hj_tensor_t b = hj_param(f->g, HJ_F32, HJ_SHAPE(3), "b");
  CHECK_OK(f->ctx, hj_graph_output(f->g, hj_add(hj_mul(a, hj_scalar(f->g, HJ_F32, 2)), b)));
  hj_exec_t *e;
  CHECK_OK(f->ctx, hj_compile(f->g, &e));
  return e;
}

static void test_exec_run_misuse(void **state) {
  ta_fix *f = *state;
  hj_exec_t *e = ta_exec_ab(f);
  assert_int_equal(hj_exec_num_inputs(e), 2);
  assert_int_equal(hj_exec_num_outputs(e), 1);
  assert_int_equal(hj_exec_backend(e), HJ_BACKEND_INTERP);
  float av[6] = { 1, 2, 3, 4, 5, 6 }, bv[3] = { 10, 20, 30 };
  hj_buffer_t *a, *b, *bad_shape, *bad_type, *out[1] = { NULL }, *wrong_out;
  CHECK_OK(f->ctx, hj_buffer_from_host(f->ctx, HJ_F32, HJ_SHAPE(2, 3), av, &a));
  CHECK_OK(f->ctx, hj_buffer_from_host(f->ctx, HJ_F32, HJ_SHAPE(3), bv, &b));
  CHECK_OK(f->ctx, hj_buffer_create(f->ctx, HJ_F32, HJ_SHAPE(4), &bad_shape));
  CHECK_OK(f->ctx, hj_buffer_create(f->ctx, HJ_S32, HJ_SHAPE(3), &bad_type));
  CHECK_OK(f->ctx, hj_buffer_create(f->ctx, HJ_F32, HJ_SHAPE(3, 2), &wrong_out));

  hj_buffer_t *in1[1] = { a };
  assert_int_equal(hj_exec_run(e, in1, 1, out, 1), HJ_ERR_INVALID_ARG);
  ta_has(hj_ctx_error(f->ctx), "hj_exec_run: 1 inputs given, module 't' has 2");
  hj_buffer_t *in_shape[2] = { a, bad_shape }, *in_type[2] = { a, bad_type }, *in_null[2] = { a, NULL };
  assert_int_equal(hj_exec_run(e, in_shape, 2, out, 1), HJ_ERR_SHAPE);
  ta_has(hj_ctx_error(f->ctx), "input 1 ('b') is f32[4], module 't' wants f32[3]");
  assert_int_equal(hj_exec_run(e, in_type, 2, out, 1), HJ_ERR_SHAPE);
  ta_has(hj_ctx_error(f->ctx), "input 1 ('b') is s32[3], module 't' wants f32[3]");
  assert_int_equal(hj_exec_run(e, in_null, 2, out, 1), HJ_ERR_INVALID_ARG);
  hj_buffer_t *in[2] = { a, b };
  assert_int_equal(hj_exec_run(e, in, 2, out, 2), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_exec_run(e, in, 2, &wrong_out, 1), HJ_ERR_SHAPE);
  ta_has(hj_ctx_error(f->ctx), "output 0 ('out0') is f32[3,2], module 't' wants f32[2,3]");
  assert_null(out[0]);

  CHECK_OK(f->ctx, hj_exec_run(e, in, 2, out, 1));  /* a new buffer */
  const float *y = hj_buffer_host_ptr(out[0]);
  double want[6] = { 12, 24, 36, 18, 30, 42 };
  ta_close_f32(y, want, 6, 0);
  assert_int_equal(hj_buffer_dtype(out[0]), HJ_F32);
  assert_int_equal(hj_buffer_shape(out[0]).rank, 2);
  hj_buffer_t *given = out[0];
  CHECK_OK(f->ctx, hj_exec_run(e, in, 2, out, 1));  /* overwritten in place */
  assert_ptr_equal(out[0], given);
  float back[6];
  CHECK_OK(f->ctx, hj_buffer_copy_to_host(out[0], back, sizeof back));
  ta_close_f32(back, want, 6, 0);

  hj_buffer_destroy(out[0]);
  hj_buffer_destroy(a);
  hj_buffer_destroy(b);
  hj_buffer_destroy(bad_shape);
  hj_buffer_destroy(bad_type);
  hj_buffer_destroy(wrong_out);
  hj_exec_destroy(e);
}

static void test_backend_not_built(void **state) {
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  o.backend = HJ_BACKEND_CUDA;   /* no driver here (made sure of below): a clear failure */
  setenv("HLOJIT_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
  hj_ctx_t *ctx;
  CHECK_OK(NULL, hj_ctx_create(&o, &ctx));
  hj_graph_t *g;
  CHECK_OK(ctx, hj_graph_create(ctx, "g", &g));
  hj_graph_output(g, hj_neg(hj_param(g, HJ_F32, HJ_SHAPE(2), "x")));
  hj_exec_t *e = (hj_exec_t *)1;
  assert_int_equal(hj_compile(g, &e), HJ_ERR_UNSUPPORTED);
  assert_null(e);
  ta_has(hj_ctx_error(ctx), "no CUDA device");
  unsetenv("HLOJIT_LIBCUDA");
  hj_graph_destroy(g);
  hj_ctx_destroy(ctx);
}

/* A counting allocator: everything the library takes it gives back. */
static long ta_live;
static void *ta_alloc(void *u, size_t n, size_t al) {
  void *p = NULL;
  if (posix_memalign(&p, al < sizeof(void *) ? sizeof(void *) : al, n)) return NULL;
  ta_live++;
  return p;
}
static void ta_free(void *u, void *p) {
  ta_live--;
  free(p);
}

static void test_custom_allocator(void **state) {
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  o.allocator = (hj_allocator_t){ ta_alloc, ta_free, NULL };
  hj_ctx_t *ctx;
  CHECK_OK(NULL, hj_ctx_create(&o, &ctx));
  ta_fix f = { ctx, NULL };
  CHECK_OK(ctx, hj_graph_create(ctx, "t", &f.g));
  hj_exec_t *e = ta_exec_ab(&f);
  assert_true(ta_live > 2);
  hj_exec_destroy(e);
  hj_graph_destroy(f.g);
  hj_ctx_destroy(ctx);
  assert_int_equal(ta_live, 0);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, ta_setup, ta_teardown)
  const struct CMUnitTest tests[] = {
    T(test_add_shape_mismatch), T(test_matmul_mismatch), T(test_batch_matmul_mismatch),
    T(test_wrong_dtype), T(test_inner_op_error_named), T(test_bad_handles), T(test_null_pointers),
    T(test_exec_run_misuse), T(test_matmul_dtypes), cmocka_unit_test(test_backend_not_built),
    cmocka_unit_test(test_custom_allocator),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
