/* test_closure.c — sub-graphs using tensors of their enclosing graphs (api/control.c),
   against the reference evaluator and against values worked out by hand.

   Each graph is built once per backend (the evaluator, the CPU backend) and run on the same
   inputs; results must equal the hand values (exact: small integers and sums of them in
   f32). Cases: a while loop whose body adds a vector of the top graph and whose condition
   compares with a limit of the top graph (state (i, s)); a while over a plain array state
   (the state becomes a tuple); conditional branches that capture different tensors (and
   one that captures nothing); a call; a while nested in a while body that captures a
   tensor of the top graph (two levels); the same (cond, body) pair used twice. Refusals:
   a map function that captures, a closed pair used with another partner. */
#include "testutil.h"
#include "api_testutil.h"
#include "cpu_testutil.h"

static const hj_backend_t tc_backends[2] = { HJ_BACKEND_INTERP, HJ_BACKEND_CPU };

/* Compiles |g| and runs it on f32/s32 inputs |in| (n), returns output |k| (malloc'd copy). */
static void *tc_run(hj_ctx_t *ctx, hj_graph_t *g, hj_buffer_t **in, int n, int k, size_t *nbytes) {
  hj_exec_t *e;
  CHECK_OK(ctx, hj_compile(g, &e));
  int nout = hj_exec_num_outputs(e);
  hj_buffer_t *out[8] = { 0 };
  CHECK_OK(ctx, hj_exec_run(e, in, n, out, nout));
  *nbytes = hj_buffer_nbytes(out[k]);
  void *r = malloc(*nbytes);
  memcpy(r, hj_buffer_host_ptr(out[k]), *nbytes);
  for (int i = 0; i < nout; i++) hj_buffer_destroy(out[i]);
  hj_exec_destroy(e);
  return r;
}

static hj_buffer_t *tc_f32(hj_ctx_t *ctx, hj_shape_t s, const float *v) {
  hj_buffer_t *b;
  CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_F32, s, v, &b));
  return b;
}

/* while i < limit: (i + 1, s + w); returns s. w (4) and limit (s32) are top-graph tensors. */
static void test_while_captures(void **state) {
  (void)state;
  for (int bi = 0; bi < 2; bi++) {
    hj_ctx_t *ctx = cb_ctx(tc_backends[bi], 1, NULL);
    hj_graph_t *g, *cond, *body;
    CHECK_OK(ctx, hj_graph_create(ctx, "loop", &g));
    hj_tensor_t w = hj_param(g, HJ_F32, HJ_SHAPE(4), "w"), s0 = hj_param(g, HJ_F32, HJ_SHAPE(4), "s0");
    hj_tensor_t limit = hj_add(hj_param(g, HJ_S32, HJ_SCALAR, "n"), hj_scalar(g, HJ_S32, 1));
    hj_dtype_t ty[2] = { HJ_S32, HJ_F32 };
    hj_shape_t sh[2] = { HJ_SCALAR, HJ_SHAPE(4) };
    CHECK_OK(ctx, hj_graph_create_sub(g, "cond", &cond));
    hj_tensor_t cs = hj_param_tuple(cond, ty, sh, 2, "st");
    CHECK_OK(ctx, hj_graph_output(cond, hj_compare(hj_get_tuple_element(cs, 0), limit, HJ_CMP_LT)));
    CHECK_OK(ctx, hj_graph_create_sub(g, "body", &body));
    hj_tensor_t bs = hj_param_tuple(body, ty, sh, 2, "st");
    hj_tensor_t i1 = hj_add(hj_get_tuple_element(bs, 0), hj_scalar(body, HJ_S32, 1));
    hj_tensor_t s1 = hj_add(hj_get_tuple_element(bs, 1), hj_mul(w, hj_scalar(body, HJ_F32, 2)));
    CHECK_OK(ctx, hj_graph_output(body, i1));
    CHECK_OK(ctx, hj_graph_output(body, s1));
    hj_tensor_t init = hj_tuple(g, (hj_tensor_t[]){ hj_scalar(g, HJ_S32, 0), s0 }, 2);
    hj_tensor_t r = hj_while(cond, body, init);
    CHECK_OK(ctx, hj_graph_status(g));
    CHECK_OK(ctx, hj_graph_output(g, hj_get_tuple_element(r, 1)));
    float wv[4] = { 1, 2, 3, 4 }, sv[4] = { 10, 20, 30, 40 };
    int32_t nv = 4;
    hj_buffer_t *in[3] = { tc_f32(ctx, HJ_SHAPE(4), wv), tc_f32(ctx, HJ_SHAPE(4), sv), NULL };
    CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_S32, HJ_SCALAR, &nv, &in[2]));
    size_t nb;
    float *got = tc_run(ctx, g, in, 3, 0, &nb);
    for (int k = 0; k < 4; k++) assert_true(got[k] == sv[k] + 5 * 2 * wv[k]);   /* 5 iterations */
    free(got);
    /* the module: the state carries w, the limit rides along too */
    hj_module_t *m;
    char *text;
    CHECK_OK(ctx, hj_graph_to_module(g, &m));
    CHECK_OK(ctx, hj_module_print(m, &text));
    ta_has(text, "((s32[], f32[4]{0}), f32[4]{0}, s32[]) while(");
    free(text);
    hj_module_destroy(m);
    for (int k = 0; k < 3; k++) hj_buffer_destroy(in[k]);
    hj_graph_destroy(g);
    hj_ctx_destroy(ctx);
  }
}

/* A plain array state: while s[0] < 100: s = s * a (a a top-graph vector); the same pair
   used twice from the top graph. */
static void test_while_array_state_twice(void **state) {
  (void)state;
  for (int bi = 0; bi < 2; bi++) {
    hj_ctx_t *ctx = cb_ctx(tc_backends[bi], 1, NULL);
    hj_graph_t *g, *cond, *body;
    CHECK_OK(ctx, hj_graph_create(ctx, "grow", &g));
    hj_tensor_t a = hj_param(g, HJ_F32, HJ_SHAPE(2), "a"), x = hj_param(g, HJ_F32, HJ_SHAPE(2), "x");
    CHECK_OK(ctx, hj_graph_create_sub(g, "cond", &cond));
    hj_tensor_t c = hj_param(cond, HJ_F32, HJ_SHAPE(2), "s");
    hj_tensor_t first = hj_reshape(hj_slice(c, (int64_t[]){ 0 }, (int64_t[]){ 1 }, NULL), HJ_SCALAR);
    CHECK_OK(ctx, hj_graph_output(cond, hj_compare(first, hj_scalar(cond, HJ_F32, 100), HJ_CMP_LT)));
    CHECK_OK(ctx, hj_graph_create_sub(g, "body", &body));
    CHECK_OK(ctx, hj_graph_output(body, hj_mul(hj_param(body, HJ_F32, HJ_SHAPE(2), "s"), a)));
    hj_tensor_t r1 = hj_while(cond, body, x);
    hj_tensor_t r2 = hj_while(cond, body, hj_add(r1, hj_scalar(g, HJ_F32, 1)));
    CHECK_OK(ctx, hj_graph_status(g));
    assert_int_equal(hj_tensor_shape(r1).rank, 1);
    CHECK_OK(ctx, hj_graph_output(g, r1));
    CHECK_OK(ctx, hj_graph_output(g, r2));
    float av[2] = { 3, 2 }, xv[2] = { 1, 1 };
    hj_buffer_t *in[2] = { tc_f32(ctx, HJ_SHAPE(2), av), tc_f32(ctx, HJ_SHAPE(2), xv) };
    size_t nb;
    float *o1 = tc_run(ctx, g, in, 2, 0, &nb), *o2 = tc_run(ctx, g, in, 2, 1, &nb);
    assert_true(o1[0] == 243 && o1[1] == 32);    /* 3^5 >= 100: five steps; 2^5 */
    assert_true(o2[0] == 244 && o2[1] == 33);    /* already >= 100: no step */
    free(o1);
    free(o2);
    for (int k = 0; k < 2; k++) hj_buffer_destroy(in[k]);
    hj_graph_destroy(g);
    hj_ctx_destroy(ctx);
  }
}

/* pred ? x * a : x + b + c; a, b, c top-graph tensors (b and c in one branch). A third
   variant: an s32 selector over three branches, one capturing nothing. */
static void test_conditional_captures(void **state) {
  (void)state;
  for (int bi = 0; bi < 2; bi++) {
    hj_ctx_t *ctx = cb_ctx(tc_backends[bi], 1, NULL);
    hj_graph_t *g, *br[3];
    CHECK_OK(ctx, hj_graph_create(ctx, "cond", &g));
    hj_tensor_t x = hj_param(g, HJ_F32, HJ_SHAPE(3), "x"), a = hj_param(g, HJ_F32, HJ_SHAPE(3), "a");
    hj_tensor_t b = hj_param(g, HJ_F32, HJ_SCALAR, "b"), sel = hj_param(g, HJ_S32, HJ_SCALAR, "sel");
    hj_tensor_t c = hj_exp(hj_scalar(g, HJ_F32, 0));           /* 1, computed in the top graph */
    for (int k = 0; k < 3; k++) CHECK_OK(ctx, hj_graph_create_sub(g, "br", &br[k]));
    hj_tensor_t p0 = hj_param(br[0], HJ_F32, HJ_SHAPE(3), "x");
    CHECK_OK(ctx, hj_graph_output(br[0], hj_mul(p0, a)));
    hj_tensor_t p1 = hj_param(br[1], HJ_F32, HJ_SHAPE(3), "x");
    CHECK_OK(ctx, hj_graph_output(br[1], hj_add(hj_add(p1, b), c)));
    hj_tensor_t p2 = hj_param(br[2], HJ_F32, HJ_SHAPE(3), "x");
    CHECK_OK(ctx, hj_graph_output(br[2], hj_neg(p2)));
    hj_tensor_t args[3] = { x, x, x };
    CHECK_OK(ctx, hj_graph_output(g, hj_conditional(sel, br, args, 3)));
    CHECK_OK(ctx, hj_graph_status(g));
    float xv[3] = { 1, 2, 3 }, av[3] = { 10, 20, 30 }, bv = 5;
    float want[3][3] = { { 10, 40, 90 }, { 7, 8, 9 }, { -1, -2, -3 } };
    for (int s = 0; s < 3; s++) {
      int32_t sv = s;
      hj_buffer_t *in[4] = { tc_f32(ctx, HJ_SHAPE(3), xv), tc_f32(ctx, HJ_SHAPE(3), av),
                             tc_f32(ctx, HJ_SCALAR, &bv), NULL };
      CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_S32, HJ_SCALAR, &sv, &in[3]));
      size_t nb;
      float *o = tc_run(ctx, g, in, 4, 0, &nb);
      for (int k = 0; k < 3; k++) assert_true(o[k] == want[s][k]);
      free(o);
      for (int k = 0; k < 4; k++) hj_buffer_destroy(in[k]);
    }
    hj_graph_destroy(g);
    hj_ctx_destroy(ctx);
  }
}

/* A call that captures, and a while nested in a while body capturing a top-graph tensor:
   outer: repeat 3 times: s = inner(s) where inner: repeat 2 times: s = s + w. */
static void test_call_and_nested(void **state) {
  (void)state;
  for (int bi = 0; bi < 2; bi++) {
    hj_ctx_t *ctx = cb_ctx(tc_backends[bi], 1, NULL);
    hj_graph_t *g, *f, *oc, *ob, *ic, *ib;
    CHECK_OK(ctx, hj_graph_create(ctx, "nest", &g));
    hj_tensor_t w = hj_param(g, HJ_F32, HJ_SHAPE(2), "w"), s0 = hj_param(g, HJ_F32, HJ_SHAPE(2), "s0");
    CHECK_OK(ctx, hj_graph_create_sub(g, "f", &f));
    CHECK_OK(ctx, hj_graph_output(f, hj_sub(hj_param(f, HJ_F32, HJ_SHAPE(2), "v"), w)));
    hj_tensor_t called = hj_call(f, &s0, 1);                    /* s0 - w */
    hj_dtype_t ty[2] = { HJ_S32, HJ_F32 };
    hj_shape_t sh[2] = { HJ_SCALAR, HJ_SHAPE(2) };
    CHECK_OK(ctx, hj_graph_create_sub(g, "oc", &oc));
    CHECK_OK(ctx, hj_graph_output(oc, hj_compare(hj_get_tuple_element(hj_param_tuple(oc, ty, sh, 2, "st"), 0),
                                                 hj_scalar(oc, HJ_S32, 3), HJ_CMP_LT)));
    CHECK_OK(ctx, hj_graph_create_sub(g, "ob", &ob));
    hj_tensor_t os = hj_param_tuple(ob, ty, sh, 2, "st");
    CHECK_OK(ctx, hj_graph_create_sub(ob, "ic", &ic));
    CHECK_OK(ctx, hj_graph_output(ic, hj_compare(hj_get_tuple_element(hj_param_tuple(ic, ty, sh, 2, "st"), 0),
                                                 hj_scalar(ic, HJ_S32, 2), HJ_CMP_LT)));
    CHECK_OK(ctx, hj_graph_create_sub(ob, "ib", &ib));
    hj_tensor_t is = hj_param_tuple(ib, ty, sh, 2, "st");
    CHECK_OK(ctx, hj_graph_output(ib, hj_add(hj_get_tuple_element(is, 0), hj_scalar(ib, HJ_S32, 1))));
    CHECK_OK(ctx, hj_graph_output(ib, hj_add(hj_get_tuple_element(is, 1), w)));       /* w: two levels out */
    hj_tensor_t inner = hj_while(ic, ib, hj_tuple(ob, (hj_tensor_t[]){ hj_scalar(ob, HJ_S32, 0),
                                                                       hj_get_tuple_element(os, 1) }, 2));
    CHECK_OK(ctx, hj_graph_output(ob, hj_add(hj_get_tuple_element(os, 0), hj_scalar(ob, HJ_S32, 1))));
    CHECK_OK(ctx, hj_graph_output(ob, hj_get_tuple_element(inner, 1)));
    hj_tensor_t r = hj_while(oc, ob, hj_tuple(g, (hj_tensor_t[]){ hj_scalar(g, HJ_S32, 0), called }, 2));
    CHECK_OK(ctx, hj_graph_status(g));
    CHECK_OK(ctx, hj_graph_output(g, hj_get_tuple_element(r, 1)));
    float wv[2] = { 1, 10 }, sv[2] = { 100, 200 };
    hj_buffer_t *in[2] = { tc_f32(ctx, HJ_SHAPE(2), wv), tc_f32(ctx, HJ_SHAPE(2), sv) };
    size_t nb;
    float *o = tc_run(ctx, g, in, 2, 0, &nb);
    for (int k = 0; k < 2; k++) assert_true(o[k] == sv[k] - wv[k] + 6 * wv[k]);
    free(o);
    for (int k = 0; k < 2; k++) hj_buffer_destroy(in[k]);
    hj_graph_destroy(g);
    hj_ctx_destroy(ctx);
  }
}

static void test_refusals(void **state) {
  (void)state;
  hj_ctx_t *ctx = cb_ctx(HJ_BACKEND_INTERP, 1, NULL);
  hj_graph_t *g, *fn, *c1, *b1, *c2;
  CHECK_OK(ctx, hj_graph_create(ctx, "r", &g));
  hj_tensor_t x = hj_param(g, HJ_F32, HJ_SHAPE(3), "x"), k = hj_param(g, HJ_F32, HJ_SCALAR, "k");
  CHECK_OK(ctx, hj_graph_create_sub(g, "fn", &fn));
  CHECK_OK(ctx, hj_graph_output(fn, hj_mul(hj_param(fn, HJ_F32, HJ_SCALAR, "v"), k)));
  assert_false(hj_tensor_ok(hj_map(fn, &x, 1)));
  ta_has(hj_ctx_error(ctx), "hj_map: sub-graph 'fn' uses tensors of an enclosing graph; closures work in "
                            "hj_call, hj_while and hj_conditional");
  hj_graph_destroy(g);
  CHECK_OK(ctx, hj_graph_create(ctx, "r2", &g));
  x = hj_param(g, HJ_F32, HJ_SCALAR, "x");
  k = hj_param(g, HJ_F32, HJ_SCALAR, "k");
  CHECK_OK(ctx, hj_graph_create_sub(g, "c1", &c1));
  CHECK_OK(ctx, hj_graph_output(c1, hj_compare(hj_param(c1, HJ_F32, HJ_SCALAR, "s"), k, HJ_CMP_LT)));
  CHECK_OK(ctx, hj_graph_create_sub(g, "b1", &b1));
  CHECK_OK(ctx, hj_graph_output(b1, hj_add(hj_param(b1, HJ_F32, HJ_SCALAR, "s"), hj_scalar(b1, HJ_F32, 1))));
  CHECK_OK(ctx, hj_graph_create_sub(g, "c2", &c2));
  CHECK_OK(ctx, hj_graph_output(c2, hj_compare(hj_param(c2, HJ_F32, HJ_SCALAR, "s"), k, HJ_CMP_GT)));
  assert_true(hj_tensor_ok(hj_while(c1, b1, x)));
  assert_false(hj_tensor_ok(hj_while(c2, b1, x)));     /* b1 was closed with c1's captures */
  ta_has(hj_ctx_error(ctx), "capture tensors and were closed by another op");
  hj_graph_destroy(g);
  hj_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_while_captures),
    cmocka_unit_test(test_while_array_state_twice),
    cmocka_unit_test(test_conditional_captures),
    cmocka_unit_test(test_call_and_nested),
    cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
