/* test_api.c — the public API: misuse returns errors whose messages name the op and the
   shapes (and nothing aborts or leaks: this also runs under ASan/UBSan), and the graph
   builder's composites and control flow compute the right numbers. Expected values are
   worked out by hand or with plain loops here, or come from JAX (jax.nn.gelu, printed
   with the values below); none comes from hlojit itself. */
#include "testutil.h"
#include <math.h>
#include <unistd.h>

/* ---- helpers ----------------------------------------------------------------------- */

typedef struct {
  hj_ctx_t *ctx;
  hj_graph_t *g;
} ta_fix;

static int ta_setup(void **state) {
  ta_fix *f = calloc(1, sizeof *f);
  f->ctx = tu_ctx();
  if (hj_graph_create(f->ctx, "t", &f->g) != HJ_OK) return -1;
  *state = f;
  return 0;
}

static int ta_teardown(void **state) {
  ta_fix *f = *state;
  hj_graph_destroy(f->g);
  hj_ctx_destroy(f->ctx);
  free(f);
  return 0;
}

static void ta_has(const char *msg, const char *part) {
  if (!strstr(msg, part)) fail_msg("message \"%s\" lacks \"%s\"", msg, part);
}

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

static void ta_close_f32(const float *got, const double *want, int n, double tol) {
  for (int i = 0; i < n; i++)
    if (!(fabs(got[i] - want[i]) <= tol) && !(isnan(got[i]) && isnan(want[i])))
      fail_msg("element %d: got %.9g, want %.9g (tol %g)", i, got[i], want[i], tol);
}

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
  assert_int_equal(hj_split(x, 1, NULL, 2, parts), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_split(x, 1, (int64_t[]){ 1, 2 }, 2, parts), HJ_ERR_SHAPE);
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
  ta_has(hj_ctx_error(f->ctx), "input 1 is f32[4], module 't' wants f32[3]");
  assert_int_equal(hj_exec_run(e, in_type, 2, out, 1), HJ_ERR_SHAPE);
  ta_has(hj_ctx_error(f->ctx), "input 1 is s32[3], module 't' wants f32[3]");
  assert_int_equal(hj_exec_run(e, in_null, 2, out, 1), HJ_ERR_INVALID_ARG);
  hj_buffer_t *in[2] = { a, b };
  assert_int_equal(hj_exec_run(e, in, 2, out, 2), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_exec_run(e, in, 2, &wrong_out, 1), HJ_ERR_SHAPE);
  ta_has(hj_ctx_error(f->ctx), "output 0 is f32[3,2], module 't' wants f32[2,3]");
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
  o.backend = HJ_BACKEND_CUDA;   /* the CPU backend exists now (test_cpu_backend.c) */
  hj_ctx_t *ctx;
  CHECK_OK(NULL, hj_ctx_create(&o, &ctx));
  hj_graph_t *g;
  CHECK_OK(ctx, hj_graph_create(ctx, "g", &g));
  hj_graph_output(g, hj_neg(hj_param(g, HJ_F32, HJ_SHAPE(2), "x")));
  hj_exec_t *e = (hj_exec_t *)1;
  assert_int_equal(hj_compile(g, &e), HJ_ERR_UNSUPPORTED);
  assert_null(e);
  ta_has(hj_ctx_error(ctx), "CUDA backend is not built yet");
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
  hj_buffer_t *o = ta_run(f, in, 3, 2, 0);
  ta_close_f32(hj_buffer_host_ptr(o), want, 8, 1e-6);
  hj_buffer_destroy(o);
  for (int i = 0; i < 8; i++) want[i] = want[i] * gv[i % 4] + 0.5;
  hj_graph_destroy(f->g);
  CHECK_OK(f->ctx, hj_graph_create(f->ctx, "t", &f->g));
  x = hj_param(f->g, HJ_F32, HJ_SHAPE(2, 4), "x");
  gm = hj_param(f->g, HJ_F32, HJ_SHAPE(4), "gamma");
  bt = hj_param(f->g, HJ_F32, HJ_SHAPE(4), "beta");
  hj_graph_output(f->g, hj_layer_norm(x, gm, bt, 0.0));
  o = ta_run(f, in, 3, 1, 0);
  ta_close_f32(hj_buffer_host_ptr(o), want, 8, 1e-6);
  hj_buffer_destroy(o);
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
  hj_buffer_t *o = ta_run(f, in, 1, 2, 0);
  ta_close_f32(hj_buffer_host_ptr(o), want_tanh, 8, 1e-6);
  hj_buffer_destroy(o);
  o = ta_run(f, in, 1, 2, 1);
  ta_close_f32(hj_buffer_host_ptr(o), want_erf, 8, 1e-6);
  hj_buffer_destroy(o);
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
  hj_buffer_t *o = ta_run(f, in, 1, 4, 0);
  ta_close_f32(hj_buffer_host_ptr(o), m, 2, 1e-6);
  hj_buffer_destroy(o);
  o = ta_run(f, in, 1, 4, 1);
  assert_int_equal(hj_buffer_shape(o).rank, 2);
  assert_int_equal(hj_buffer_shape(o).dims[1], 1);
  ta_close_f32(hj_buffer_host_ptr(o), v, 2, 1e-6);
  hj_buffer_destroy(o);
  o = ta_run(f, in, 1, 4, 2);
  assert_int_equal(hj_buffer_shape(o).rank, 0);
  ta_close_f32(hj_buffer_host_ptr(o), all, 1, 1e-6);
  hj_buffer_destroy(o);
  o = ta_run(f, in, 1, 4, 3);
  ta_close_f32(hj_buffer_host_ptr(o), v0, 4, 1e-6);
  hj_buffer_destroy(o);
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
  hj_buffer_t *o = ta_run(f, in, 2, 1, 0);
  ta_close_f32(hj_buffer_host_ptr(o), want, 4, 0);
  hj_buffer_destroy(o);
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
  hj_buffer_t *o = ta_run(f, in, 2, 1, 0);
  ta_close_f32(hj_buffer_host_ptr(o), want, 8, 0);
  hj_buffer_destroy(o);
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
  CHECK_OK(f->ctx, hj_split(x, -1, (int64_t[]){ 1, 2, 3 }, 3, parts));
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
  hj_buffer_t *o = ta_run(f, in, 1, 3, 0);
  ta_close_f32(hj_buffer_host_ptr(o), same, 12, 0);
  hj_buffer_destroy(o);
  o = ta_run(f, in, 1, 3, 1);
  ta_close_f32(hj_buffer_host_ptr(o), sw, 12, 0);
  hj_buffer_destroy(o);
  o = ta_run(f, in, 1, 3, 2);
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
    hj_buffer_t *o = ta_run(f, in, 3, 2, 0);
    ta_close_f32(hj_buffer_host_ptr(o), want_p[i % 2], 2, 0);
    hj_buffer_destroy(o);
    o = ta_run(f, in, 3, 2, 1);
    ta_close_f32(hj_buffer_host_ptr(o), want_k[i], 2, 0);
    hj_buffer_destroy(o);
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
  hj_buffer_t *o = ta_run(f, in, 2, 2, 0);
  ta_close_f32(hj_buffer_host_ptr(o), sums, 2, 0);
  hj_buffer_destroy(o);
  o = ta_run(f, in, 2, 2, 1);
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
  hj_buffer_t *o = ta_run(f, in, 1, 2, 0);
  ta_close_f32(hj_buffer_host_ptr(o), desc, 6, 0);
  hj_buffer_destroy(o);
  o = ta_run(f, in, 1, 2, 1);
  ta_close_f32(hj_buffer_host_ptr(o), asc, 6, 0);
  hj_buffer_destroy(o);
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
  hj_buffer_t *o = ta_run(f, in, 3, 3, 0);
  ta_close_f32(hj_buffer_host_ptr(o), sum, 2, 0);
  hj_buffer_destroy(o);
  o = ta_run(f, in, 3, 3, 1);
  assert_int_equal(*(int32_t *)hj_buffer_host_ptr(o), -7);
  hj_buffer_destroy(o);
  o = ta_run(f, in, 3, 3, 2);
  ta_close_f32(hj_buffer_host_ptr(o), (double[]){ 10, 20 }, 2, 0);
  hj_buffer_destroy(o);
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
  hj_buffer_t *o = ta_run(f, in, 2, 3, 0);
  ta_close_f32(hj_buffer_host_ptr(o), (double[]){ 5, 11, 19 }, 3, 0);
  hj_buffer_destroy(o);
  o = ta_run(f, in, 2, 3, 1);
  ta_close_f32(hj_buffer_host_ptr(o), (double[]){ -15, -23, -33 }, 3, 0);
  hj_buffer_destroy(o);
  o = ta_run(f, in, 2, 3, 2);
  ta_close_f32(hj_buffer_host_ptr(o), (double[]){ 4, 0, 2, 0, 0 }, 5, 0);
  hj_buffer_destroy(o);
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

/* ---- modules and files ------------------------------------------------------------------- */

/* The graph as text, parsed back and run: the same numbers, and the signature flattened. */
static void test_module_round_trip(void **state) {
  ta_fix *f = *state;
  hj_tensor_t x = hj_param(f->g, HJ_F32, HJ_SHAPE(2, 3), "x");
  hj_graph_output(f->g, hj_softmax(x, 1));
  hj_graph_output(f->g, hj_argmax(x, 1));
  hj_module_t *m, *m2;
  CHECK_OK(f->ctx, hj_graph_to_module(f->g, &m));
  assert_int_equal(hj_module_num_inputs(m), 1);
  assert_int_equal(hj_module_num_outputs(m), 2);
  hj_dtype_t t;
  hj_shape_t s;
  CHECK_OK(f->ctx, hj_module_output(m, 1, &t, &s));
  assert_int_equal(t, HJ_S32);
  assert_true(s.rank == 1 && s.dims[0] == 2);
  assert_int_equal(hj_module_output(m, 2, &t, &s), HJ_ERR_INVALID_ARG);
  char *text;
  CHECK_OK(f->ctx, hj_module_print(m, &text));
  ta_has(text, "HloModule t");
  ta_has(text, "ENTRY");
  CHECK_OK(f->ctx, hj_module_parse(f->ctx, text, strlen(text), "roundtrip.hlo", &m2));
  free(text);
  hj_exec_t *e;
  CHECK_OK(f->ctx, hj_compile_module(f->ctx, m2, &e));
  float xv[6] = { 1, 2, 3, 3, 0, 3 };
  hj_buffer_t *in, *out[2] = { NULL, NULL };
  CHECK_OK(f->ctx, hj_buffer_from_host(f->ctx, HJ_F32, HJ_SHAPE(2, 3), xv, &in));
  CHECK_OK(f->ctx, hj_exec_run(e, &in, 1, out, 2));
  double want[3] = { 0.09003057317038046, 0.24472847105479764, 0.6652409557748219 };
  ta_close_f32(hj_buffer_host_ptr(out[0]), want, 3, 1e-6);
  const int32_t *am = hj_buffer_host_ptr(out[1]);
  assert_int_equal(am[0], 2);
  assert_int_equal(am[1], 0);
  hj_buffer_destroy(in);
  hj_buffer_destroy(out[0]);
  hj_buffer_destroy(out[1]);
  hj_exec_destroy(e);
  hj_module_destroy(m2);
  hj_module_destroy(m);
}

static void test_npy_round_trip(void **state) {
  ta_fix *f = *state;
  char path[] = "/tmp/hj_test_api_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  int32_t v[6] = { 1, -2, 3, -4, 5, -6 };
  hj_buffer_t *b, *c;
  CHECK_OK(f->ctx, hj_buffer_from_host(f->ctx, HJ_S32, HJ_SHAPE(3, 2), v, &b));
  CHECK_OK(f->ctx, hj_buffer_write_npy(b, path));
  CHECK_OK(f->ctx, hj_buffer_read_npy(f->ctx, path, &c));
  assert_int_equal(hj_buffer_dtype(c), HJ_S32);
  hj_shape_t s = hj_buffer_shape(c);
  assert_true(s.rank == 2 && s.dims[0] == 3 && s.dims[1] == 2);
  assert_memory_equal(hj_buffer_host_ptr(c), v, sizeof v);
  hj_buffer_destroy(b);
  hj_buffer_destroy(c);
  unlink(path);
  assert_int_not_equal(hj_buffer_read_npy(f->ctx, "/nonexistent/x.npy", &c), HJ_OK);
  assert_null(c);
}

/* ---- against JAX: the composites vs tests/fixtures/jax (NAME.inK.npy -> NAME.out0.npy) ---- */

typedef hj_tensor_t (*ta_builder)(hj_graph_t *g, const hj_tensor_t *p);

static hj_tensor_t ta_jax_softmax(hj_graph_t *g, const hj_tensor_t *p) { return hj_softmax(p[0], -1); }
static hj_tensor_t ta_jax_log_softmax(hj_graph_t *g, const hj_tensor_t *p) { return hj_log_softmax(p[0], -1); }
static hj_tensor_t ta_jax_layernorm(hj_graph_t *g, const hj_tensor_t *p) {
  return hj_layer_norm(p[0], p[1], p[2], 1e-5);
}
static hj_tensor_t ta_jax_gelu_tanh(hj_graph_t *g, const hj_tensor_t *p) { return hj_gelu_tanh(p[0]); }
static hj_tensor_t ta_jax_gelu_erf(hj_graph_t *g, const hj_tensor_t *p) { return hj_gelu_erf(p[0]); }
static hj_tensor_t ta_jax_embedding(hj_graph_t *g, const hj_tensor_t *p) { return hj_embedding(p[0], p[1]); }
static hj_tensor_t ta_jax_argmax(hj_graph_t *g, const hj_tensor_t *p) { return hj_argmax(p[0], 1); }
static hj_tensor_t ta_jax_matmul(hj_graph_t *g, const hj_tensor_t *p) { return hj_matmul(p[0], p[1]); }

/* x (T, C), two heads, as the fixture generator's causal_attention. */
static hj_tensor_t ta_jax_attention(hj_graph_t *g, const hj_tensor_t *p) {
  enum { T = 6, C = 16, H = 2, D = 8 };
  hj_tensor_t qkv = hj_add(hj_matmul(p[0], p[1]), p[2]), part[3];   // (T, 3C)
  hj_split(qkv, 1, (int64_t[]){ C, C, C }, 3, part);
  const int64_t hf[3] = { 1, 0, 2 }, kt[3] = { 0, 2, 1 };
  for (int i = 0; i < 3; i++) part[i] = hj_transpose(hj_reshape(part[i], HJ_SHAPE(T, H, D)), hf, 3);
  hj_tensor_t att = hj_div(hj_matmul(part[0], hj_transpose(part[1], kt, 3)),
                           hj_scalar(g, HJ_F32, sqrt((double)D)));   // (H, T, T)
  att = hj_softmax(hj_select(hj_causal_mask(g, T), att, hj_scalar(g, HJ_F32, -INFINITY)), -1);
  hj_tensor_t y = hj_transpose(hj_matmul(att, part[2]), hf, 3);     // (T, H, D)
  return hj_add(hj_matmul(hj_reshape(y, HJ_SHAPE(T, C)), p[3]), p[4]);
}

static void ta_jax_case(ta_fix *f, const char *name, int nin, ta_builder build, double tol) {
  char path[512];
  hj_buffer_t *in[8] = { 0 }, *want = NULL, *out[1] = { NULL };
  hj_tensor_t p[8];
  for (int i = 0; i < nin; i++) {
    snprintf(path, sizeof path, "%s/fixtures/jax/%s.in%d.npy", tu_data_dir(), name, i);
    CHECK_OK(f->ctx, hj_buffer_read_npy(f->ctx, path, &in[i]));
    p[i] = hj_param(f->g, hj_buffer_dtype(in[i]), hj_buffer_shape(in[i]), "p");
  }
  snprintf(path, sizeof path, "%s/fixtures/jax/%s.out0.npy", tu_data_dir(), name);
  CHECK_OK(f->ctx, hj_buffer_read_npy(f->ctx, path, &want));
  CHECK_OK(f->ctx, hj_graph_output(f->g, build(f->g, p)));
  hj_exec_t *e;
  CHECK_OK(f->ctx, hj_compile(f->g, &e));
  CHECK_OK(f->ctx, hj_exec_run(e, in, nin, out, 1));
  assert_int_equal(hj_buffer_dtype(out[0]), hj_buffer_dtype(want));
  assert_int_equal(hj_buffer_nbytes(out[0]), hj_buffer_nbytes(want));
  int64_t n = hj_shape_numel(hj_buffer_shape(want));
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double a, b;
    if (hj_buffer_dtype(want) == HJ_S32) {
      a = ((int32_t *)hj_buffer_host_ptr(out[0]))[i], b = ((int32_t *)hj_buffer_host_ptr(want))[i];
    } else {
      a = ((float *)hj_buffer_host_ptr(out[0]))[i], b = ((float *)hj_buffer_host_ptr(want))[i];
    }
    double err = fabs(a - b) / (1 + fabs(b));
    if (!(err <= tol)) fail_msg("%s: element %lld: hlojit %.9g, jax %.9g", name, (long long)i, a, b);
    worst = err > worst ? err : worst;
  }
  print_message("%s: %lld values, max err %.3g\n", name, (long long)n, worst);
  for (int i = 0; i < nin; i++) hj_buffer_destroy(in[i]);
  hj_buffer_destroy(want);
  hj_buffer_destroy(out[0]);
  hj_exec_destroy(e);
}

static void test_jax_softmax(void **s) { ta_jax_case(*s, "softmax", 1, ta_jax_softmax, 1e-6); }
static void test_jax_log_softmax(void **s) { ta_jax_case(*s, "log_softmax", 1, ta_jax_log_softmax, 1e-6); }
static void test_jax_layernorm(void **s) { ta_jax_case(*s, "layernorm", 3, ta_jax_layernorm, 1e-5); }
static void test_jax_gelu_tanh(void **s) { ta_jax_case(*s, "gelu_tanh", 1, ta_jax_gelu_tanh, 1e-6); }
static void test_jax_gelu_erf(void **s) { ta_jax_case(*s, "gelu_erf", 1, ta_jax_gelu_erf, 1e-6); }
static void test_jax_embedding(void **s) { ta_jax_case(*s, "take_embedding", 2, ta_jax_embedding, 0); }
static void test_jax_argmax(void **s) { ta_jax_case(*s, "argmax", 1, ta_jax_argmax, 0); }
static void test_jax_matmul(void **s) { ta_jax_case(*s, "matmul_2d", 2, ta_jax_matmul, 1e-5); }
static void test_jax_batch_matmul(void **s) { ta_jax_case(*s, "dot_batch_einsum", 2, ta_jax_matmul, 1e-5); }
static void test_jax_attention(void **s) { ta_jax_case(*s, "attention_causal", 5, ta_jax_attention, 1e-5); }

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, ta_setup, ta_teardown)
  const struct CMUnitTest tests[] = {
    T(test_add_shape_mismatch), T(test_matmul_mismatch), T(test_batch_matmul_mismatch),
    T(test_wrong_dtype), T(test_inner_op_error_named), T(test_bad_handles), T(test_null_pointers),
    T(test_exec_run_misuse), cmocka_unit_test(test_backend_not_built),
    cmocka_unit_test(test_custom_allocator), T(test_softmax), T(test_log_softmax),
    T(test_layer_norm), T(test_gelu), T(test_mean_var), T(test_matmul_2d),
    T(test_matmul_batch_broadcast), T(test_embedding_clamps), T(test_argmax_ties),
    T(test_split_concat), T(test_causal_mask), T(test_while_counting), T(test_conditional),
    T(test_reduce_with_variadic), T(test_sort_descending), T(test_tuple_flattening),
    T(test_call_map_scatter), T(test_shape_ops), T(test_module_round_trip),
    T(test_npy_round_trip), T(test_jax_softmax), T(test_jax_log_softmax), T(test_jax_layernorm),
    T(test_jax_gelu_tanh), T(test_jax_gelu_erf), T(test_jax_embedding), T(test_jax_argmax),
    T(test_jax_matmul), T(test_jax_batch_matmul), T(test_jax_attention),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
