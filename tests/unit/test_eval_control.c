/* test_eval_control.c — the reference evaluator's control flow and structure (eval.c):
   while, conditional, call, fusion, map, tuples and values shared between users, on small
   modules parsed from HLO text with results worked out by hand; the scalar-call and
   single-element entry points; and XLA's golden tests (../shared/hlo-corpus/golden, skipped
   when the corpus is absent) with the literals their XLA tests expect. Element semantics
   are in test_eval.c. */
#include "testutil.h"
#include "eval_testutil.h"

/* ---- control flow and structure ---------------------------------------------------------- */

static void test_while_loop(void **state) {
  hj_ctx_t *ctx = *state;
  const char *text =
      "HloModule m\n"
      "cond {\n  p = (s32[], f32[2]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
      "  n = s32[] constant(10)\n  ROOT lt = pred[] compare(i, n), direction=LT\n}\n"
      "body {\n  p = (s32[], f32[2]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
      "  a = f32[2] get-tuple-element(p), index=1\n  one = s32[] constant(1)\n"
      "  j = s32[] add(i, one)\n  fi = f32[] convert(i)\n"
      "  b = f32[2] broadcast(fi), dimensions={}\n"
      "  s = f32[2] add(a, b)\n  ROOT t = (s32[], f32[2]) tuple(j, s)\n}\n"
      "ENTRY e {\n  x = f32[2] parameter(0)\n  z = s32[] constant(0)\n"
      "  t = (s32[], f32[2]) tuple(z, x)\n"
      "  w = (s32[], f32[2]) while(t), condition=cond, body=body\n"
      "  ROOT r = f32[2] get-tuple-element(w), index=1\n}\n";
  const float x[] = { 1.0f, -1.0f };
  hlo_literal *args[1] = { evtu_arr(HLO_F32, 2, x) };
  hlo_literal *r = evtu_run(ctx, text, 1, args);
  evtu_expect_f32_bits(r, (const float[]){ 46.0f, 44.0f }, 2);  /* + 0+1+...+9 */
  hlo_literal_free(r);
}

/* Branches x + 1, x * 2 and -x, selected by a pred (two branches) or an s32 (three). */
static const char *tl_cond_text(const char *sel_type) {
  static char buf[1024];
  bool pred = strcmp(sel_type, "pred") == 0;
  snprintf(buf, sizeof buf,
           "HloModule m\n"
           "b0 {\n  p = f32[] parameter(0)\n  c = f32[] constant(1)\n"
           "  ROOT r = f32[] add(p, c)\n}\n"
           "b1 {\n  p = f32[] parameter(0)\n  c = f32[] constant(2)\n"
           "  ROOT r = f32[] multiply(p, c)\n}\n"
           "b2 {\n  p = f32[] parameter(0)\n  ROOT r = f32[] negate(p)\n}\n"
           "ENTRY e {\n  s = %s[] parameter(0)\n  x = f32[] parameter(1)\n"
           "  ROOT r = f32[] conditional(s, x, x%s), branch_computations={b0, b1%s}\n}\n",
           sel_type, pred ? "" : ", x", pred ? "" : ", b2");
  return buf;
}

static float tl_cond(hj_ctx_t *ctx, const char *sel_type, const void *sel, float x) {
  hlo_type t;
  assert_true(hlo_type_from_name(sel_type, strlen(sel_type), &t));
  hlo_literal *args[2] = { evtu_arr(t, -1, sel), evtu_arr(HLO_F32, -1, &x) };
  hlo_literal *r = evtu_run(ctx, tl_cond_text(sel_type), 2, args);
  float v = ((float *)r->data)[0];
  hlo_literal_free(r);
  return v;
}

static void test_conditional(void **state) {
  hj_ctx_t *ctx = *state;
  uint8_t t = 1, f = 0;
  assert_true(tl_cond(ctx, "pred", &t, 3.0f) == 4.0f);   /* true -> branch 0 */
  assert_true(tl_cond(ctx, "pred", &f, 3.0f) == 6.0f);   /* false -> branch 1 */
  int32_t i0 = 0, i1 = 1, i2 = 2, neg = -1, big = 7;
  assert_true(tl_cond(ctx, "s32", &i0, 3.0f) == 4.0f);
  assert_true(tl_cond(ctx, "s32", &i1, 3.0f) == 6.0f);
  assert_true(tl_cond(ctx, "s32", &i2, 3.0f) == -3.0f);
  assert_true(tl_cond(ctx, "s32", &neg, 3.0f) == -3.0f); /* out of range -> last branch */
  assert_true(tl_cond(ctx, "s32", &big, 3.0f) == -3.0f);
}

static void test_call_fusion_tuple(void **state) {
  hj_ctx_t *ctx = *state;
  const char *text =
      "HloModule m\n"
      "sq {\n  p = f32[3] parameter(0)\n  ROOT r = f32[3] multiply(p, p)\n}\n"
      "fused {\n  a = f32[3] parameter(0)\n  b = f32[3] parameter(1)\n"
      "  s = f32[3] subtract(a, b)\n  ROOT t = (f32[3], f32[3]) tuple(s, a)\n}\n"
      "ENTRY e {\n  in = (f32[3], s32[]) parameter(0)\n"
      "  x = f32[3] get-tuple-element(in), index=0\n"
      "  k = s32[] get-tuple-element(in), index=1\n  y = f32[3] call(x), to_apply=sq\n"
      "  f = (f32[3], f32[3]) fusion(y, x), kind=kLoop, calls=fused\n"
      "  d = f32[3] get-tuple-element(f), index=0\n  a = f32[3] get-tuple-element(f), index=1\n"
      "  ROOT out = (s32[], f32[3], f32[3], (f32[3], f32[3])) tuple(k, d, a, f)\n}\n";
  const float x[] = { 1.0f, 2.0f, -3.0f };
  int32_t k = 42;
  hlo_literal *el[2] = { evtu_arr(HLO_F32, 3, x), evtu_arr(HLO_S32, -1, &k) };
  hlo_literal *args[1] = { hlo_literal_tuple(ctx, el, 2) };
  assert_non_null(args[0]);
  hlo_literal *r = evtu_run(ctx, text, 1, args);
  assert_int_equal(r->shape.type, HLO_TUPLE);
  assert_int_equal(r->nelems, 4);
  assert_int_equal(((int32_t *)r->elems[0]->data)[0], 42);
  evtu_expect_f32_bits(r->elems[1], (const float[]){ 0.0f, 2.0f, 12.0f }, 3);
  evtu_expect_f32_bits(r->elems[2], (const float[]){ 1.0f, 4.0f, 9.0f }, 3);  /* fused a = y */
  assert_int_equal(r->elems[3]->nelems, 2);
  assert_true(hlo_literal_equal(r->elems[3]->elems[0], r->elems[1]));
  assert_int_equal(r->shape.tuple[3].ntuple, 2);  /* the result owns its shape */
  hlo_literal_free(r);
}

static void test_map(void **state) {
  hj_ctx_t *ctx = *state;
  /* scalar program: runs over all lanes at once */
  const char *t1 =
      "HloModule m\n"
      "f {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  c = f32[] constant(2)\n"
      "  m = f32[] multiply(a, c)\n  ROOT r = f32[] maximum(m, b)\n}\n"
      "ENTRY e {\n  x = f32[4] parameter(0)\n  y = f32[4] parameter(1)\n"
      "  ROOT r = f32[4] map(x, y), dimensions={0}, to_apply=f\n}\n";
  const float x[] = { 1, 2, NAN, -1 }, y[] = { 3, 3, 0, -5 };
  hlo_literal *a1[2] = { evtu_arr(HLO_F32, 4, x), evtu_arr(HLO_F32, 4, y) };
  hlo_literal *r1 = evtu_run(ctx, t1, 2, a1);
  evtu_expect_f32_bits(r1, (const float[]){ 3, 4, NAN, -2 }, 4);
  hlo_literal_free(r1);
  /* not a scalar program (it calls): evaluated per element */
  const char *t2 =
      "HloModule m\n"
      "g {\n  a = s32[] parameter(0)\n  ROOT r = s32[] multiply(a, a)\n}\n"
      "f {\n  a = s32[] parameter(0)\n  c = s32[] call(a), to_apply=g\n"
      "  one = s32[] constant(1)\n  ROOT r = s32[] add(c, one)\n}\n"
      "ENTRY e {\n  x = s32[3] parameter(0)\n"
      "  ROOT r = s32[3] map(x), dimensions={0}, to_apply=f\n}\n";
  const int32_t xi[] = { 3, -4, 46341 };
  hlo_literal *a2[1] = { evtu_arr(HLO_S32, 3, xi) };
  hlo_literal *r2 = evtu_run(ctx, t2, 1, a2);
  EVTU_EXPECT_ARR(int32_t, r2, 10, 17, (int32_t)(46341u * 46341u + 1u));
  hlo_literal_free(r2);
}

/* Values used several times, in place updates and tuples sharing elements stay right. */
static void test_ownership(void **state) {
  hj_ctx_t *ctx = *state;
  const char *text =
      "HloModule m\nENTRY e {\n  p = f32[3] parameter(0)\n  a = f32[3] add(p, p)\n"
      "  b = f32[3] multiply(a, a)\n  c = f32[3] subtract(b, a)\n"
      "  t = (f32[3], f32[3]) tuple(c, c)\n"
      "  g = f32[3] get-tuple-element(t), index=0\n  e = f32[3] exponential(g)\n"
      "  h = f32[3] get-tuple-element(t), index=1\n  d = f32[3] negate(h)\n"
      "  ROOT r = (f32[3], f32[3], (f32[3], f32[3]), f32[3]) tuple(d, e, t, p)\n}\n";
  const float x[] = { 1.0f, 0.5f, 0.0f };
  hlo_literal *args[1] = { evtu_arr(HLO_F32, 3, x) };
  hlo_literal *r = evtu_run(ctx, text, 1, args);
  /* a = 2x, b = 4x^2, c = 4x^2 - 2x = {2, 0, 0} */
  evtu_expect_f32_bits(r->elems[0], (const float[]){ -2.0f, -0.0f, -0.0f }, 3);
  evtu_expect_f32_bits(r->elems[1], (const float[]){ expf(2.0f), 1.0f, 1.0f }, 3);
  evtu_expect_f32_bits(r->elems[2]->elems[1], (const float[]){ 2.0f, 0.0f, 0.0f }, 3);
  evtu_expect_f32_bits(r->elems[3], x, 3);
  hlo_literal_free(r);
}

static void test_scalar_call_and_binary_elem(void **state) {
  hj_ctx_t *ctx = *state;
  const char *text =
      "HloModule m\n"
      "cmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  i = s32[] parameter(2)\n"
      "  j = s32[] parameter(3)\n  gt = pred[] compare(a, b), direction=GT\n"
      "  v = f32[] select(gt, a, b)\n  k = s32[] select(gt, i, j)\n"
      "  ROOT t = (f32[], s32[]) tuple(v, k)\n}\n"
      "ENTRY e {\n  x = f32[] parameter(0)\n  ROOT r = f32[] negate(x)\n}\n";
  hlo_module *m = evtu_parse(ctx, text);
  hlo_comp *cmp = hlo_module_find_comp(m, "cmp");
  assert_non_null(cmp);
  float a = 1.5f, b = 2.5f;
  int32_t i = 7, j = 9;
  hlo_literal *args[4] = { evtu_arr(HLO_F32, -1, &a), evtu_arr(HLO_F32, -1, &b),
                           evtu_arr(HLO_S32, -1, &i), evtu_arr(HLO_S32, -1, &j) };
  hlo_literal *r = NULL;
  CHECK_OK(ctx, hlo_eval_scalar_call(ctx, cmp, args, 4, &r));
  assert_true(((float *)r->elems[0]->data)[0] == 2.5f);
  assert_int_equal(((int32_t *)r->elems[1]->data)[0], 9);
  hlo_literal_free(r);
  for (int k = 0; k < 4; k++) hlo_literal_free(args[k]);
  hlo_module_free(m);
  float fa[2] = { NAN, 1.0f }, fo[1];
  hlo_eval_binary_elem(HLO_OP_MAXIMUM, HLO_F32, fa, 1, fa, 0, fo, 0);
  assert_true(isnan(fo[0]));
  int32_t ia[2] = { INT32_MAX, 1 }, io[1];
  hlo_eval_binary_elem(HLO_OP_ADD, HLO_S32, ia, 0, ia, 1, io, 0);
  assert_int_equal(io[0], INT32_MIN);
  uint16_t ba[2] = { 0x3f80, 0x3b80 }, bo[1];
  hlo_eval_binary_elem(HLO_OP_ADD, HLO_BF16, ba, 0, ba, 1, bo, 0);
  assert_int_equal(bo[0], 0x3f80);
  int8_t ca[2] = { -128, -1 }, co[1];
  hlo_eval_binary_elem(HLO_OP_DIVIDE, HLO_S8, ca, 0, ca, 1, co, 0);
  assert_int_equal(co[0], -128);
}

/* ---- outside reference: XLA's golden tests ----------------------------------------------- */

/* Parses a file of the corpus (../shared/hlo-corpus/golden) or returns NULL (test skipped). */
static hlo_module *tl_corpus(hj_ctx_t *ctx, const char *name) {
  char path[512];
  const char *dir = getenv("HLOJIT_CORPUS");
  snprintf(path, sizeof path, "%s/golden/%s", dir ? dir : "../shared/hlo-corpus", name);
  size_t len = 0;
  char *text = tu_read_file(path, &len);
  if (!text) return NULL;
  hlo_module *m = NULL;
  CHECK_OK(ctx, hlo_parse_module(ctx, text, len, path, &m));
  free(text);
  return m;
}

/* Evaluates |m| (kept) on |args| (freed here); the caller frees the result. */
static hlo_literal *tl_eval_on(hj_ctx_t *ctx, hlo_module *m, int nargs, hlo_literal **args) {
  hlo_literal *r = NULL;
  CHECK_OK(ctx, hlo_eval_module(ctx, m, args, nargs, &r));
  for (int i = 0; i < nargs; i++) hlo_literal_free(args[i]);
  return r;
}

/* The f32[2,2] { 1, 2, 3, 4 } the golden tests feed their modules. */
static hlo_literal *tl_f32_2x2(void) {
  int64_t d[2] = { 2, 2 };
  hlo_shape s = hlo_shape_array(HLO_F32, 2, d);
  hlo_literal *l = hlo_literal_new(NULL, &s);
  assert_non_null(l);
  memcpy(l->data, (const float[]){ 1, 2, 3, 4 }, 4 * sizeof(float));
  return l;
}

/* A golden conditional: |m| on (|sel|, tl_f32_2x2) gives |want|. */
static void tl_golden_cond(hj_ctx_t *ctx, hlo_module *m, hlo_literal *sel, const float *want) {
  hlo_literal *args[2] = { sel, tl_f32_2x2() };
  hlo_literal *r = tl_eval_on(ctx, m, 2, args);
  evtu_expect_f32_bits(r, want, 4);
  hlo_literal_free(r);
}

/* Expected values are the literals written in the XLA tests named in each file's header. */
static void test_xla_golden_control_flow(void **state) {
  hj_ctx_t *ctx = *state;
  hlo_module *m = tl_corpus(ctx, "golden_cmdbuf_index_conditional.hlo");
  if (!m) skip();
  const int32_t idx[] = { 0, 1, 1024 };
  const float want[3][4] = { { 2, 4, 6, 8 }, { 1, 4, 9, 16 }, { 1, 4, 9, 16 } };
  for (int i = 0; i < 3; i++) tl_golden_cond(ctx, m, evtu_arr(HLO_S32, -1, &idx[i]), want[i]);
  hlo_module_free(m);
  m = tl_corpus(ctx, "golden_cmdbuf_true_false_conditional.hlo");
  assert_non_null(m);
  for (int i = 0; i < 2; i++) {
    uint8_t p = i == 0;
    tl_golden_cond(ctx, m, evtu_arr(HLO_PRED, -1, &p), want[i]);
  }
  hlo_module_free(m);
  m = tl_corpus(ctx, "golden_cmdbuf_while_loop_inferred_shapes.hlo");
  assert_non_null(m);
  int32_t zero = 0;
  float fz = 0;
  hlo_literal *el[2] = { evtu_arr(HLO_S32, -1, &zero), evtu_arr(HLO_F32, -1, &fz) };
  hlo_literal *args[1] = { hlo_literal_tuple(ctx, el, 2) };
  hlo_literal *r = tl_eval_on(ctx, m, 1, args);
  assert_int_equal(((int32_t *)r->elems[0]->data)[0], 10);
  assert_true(((float *)r->elems[1]->data)[0] == 20.0f);
  hlo_literal_free(r);
  hlo_module_free(m);
}

static void test_xla_golden_fusion_map(void **state) {
  hj_ctx_t *ctx = *state;
  hlo_module *m = tl_corpus(ctx, "golden_mof_loop_feeding_map.hlo");
  if (!m) skip();
  hlo_literal *args[1] = { evtu_arr(HLO_F32, 3, (const float[]){ 1, 2, 3 }) };
  hlo_literal *r = tl_eval_on(ctx, m, 1, args);
  evtu_expect_f32_bits(r, (const float[]){ 0, 4, 9 }, 3);
  hlo_literal_free(r);
  hlo_module_free(m);
  m = tl_corpus(ctx, "golden_cmdbuf_call_fusions.hlo");
  assert_non_null(m);
  args[0] = tl_f32_2x2();
  r = tl_eval_on(ctx, m, 1, args);
  evtu_expect_f32_bits(r, (const float[]){ 3, 8, 15, 24 }, 4);
  hlo_literal_free(r);
  hlo_module_free(m);
  /* (((42), 1.0), (3.0, 4)) -> (42) */
  m = tl_corpus(ctx, "golden_fusion_node_is_root_nested_tuple.hlo");
  assert_non_null(m);
  int32_t v42 = 42, v4 = 4;
  float v1 = 1, v3 = 3;
  hlo_literal *i0[1] = { evtu_arr(HLO_S32, -1, &v42) };
  hlo_literal *i1[2] = { hlo_literal_tuple(ctx, i0, 1), evtu_arr(HLO_F32, -1, &v1) };
  hlo_literal *i2[2] = { evtu_arr(HLO_F32, -1, &v3), evtu_arr(HLO_S32, -1, &v4) };
  hlo_literal *top[2] = { hlo_literal_tuple(ctx, i1, 2), hlo_literal_tuple(ctx, i2, 2) };
  args[0] = hlo_literal_tuple(ctx, top, 2);
  r = tl_eval_on(ctx, m, 1, args);
  assert_int_equal(r->nelems, 1);
  assert_int_equal(((int32_t *)r->elems[0]->data)[0], 42);
  hlo_literal_free(r);
  hlo_module_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_while_loop),
    cmocka_unit_test(test_conditional),
    cmocka_unit_test(test_call_fusion_tuple),
    cmocka_unit_test(test_map),
    cmocka_unit_test(test_ownership),
    cmocka_unit_test(test_scalar_call_and_binary_elem),
    cmocka_unit_test(test_xla_golden_control_flow),
    cmocka_unit_test(test_xla_golden_fusion_map),
  };
  return cmocka_run_group_tests(tests, evtu_setup, evtu_teardown);
}
