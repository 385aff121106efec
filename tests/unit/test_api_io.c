/* test_api_io.c — the public API through text and files: a built graph printed as HLO
   text, parsed back and run (same numbers, flattened signature); .npy buffers written and
   read back; and the builder's composites (softmax, layer norm, GELU, embedding, argmax,
   matmul, causal attention) run on JAX's inputs and compared with JAX's outputs from
   tests/fixtures/jax (NAME.inK.npy -> NAME.out0.npy), |err| / (1 + |want|) within the
   tolerance given per case. None of the expected values comes from hlojit itself. */
#include "testutil.h"
#include "api_testutil.h"
#include <unistd.h>

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
  hj_unpack(hj_split(qkv, 1, (int64_t[]){ C, C, C }, 3), part, 3);
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
    T(test_module_round_trip), T(test_npy_round_trip), T(test_jax_softmax),
    T(test_jax_log_softmax), T(test_jax_layernorm), T(test_jax_gelu_tanh), T(test_jax_gelu_erf),
    T(test_jax_embedding), T(test_jax_argmax), T(test_jax_matmul), T(test_jax_batch_matmul),
    T(test_jax_attention),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
