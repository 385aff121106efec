/* test_eval.c — the reference evaluator's core (eval.c, eval_elem.c, literal.c): element
   semantics checked against values fixed by XLA's documented semantics and IEEE 754 /
   NumPy / ml_dtypes (worked out independently, written down here as constants), and the
   control-flow ops on small modules parsed from HLO text. */
#include "testutil.h"
#include <math.h>

/* ---- helpers ------------------------------------------------------------------------------ */

/* A rank-1 literal of |n| elements of |t| from |data| (n < 0: a scalar). */
static hlo_literal *tl_arr(hlo_type t, int64_t n, const void *data) {
  hlo_shape s = n < 0 ? hlo_shape_scalar(t) : hlo_shape_array(t, 1, &n);
  hlo_literal *l = hlo_literal_new(NULL, &s);
  assert_non_null(l);
  if (data) memcpy(l->data, data, (size_t)l->nbytes);
  return l;
}

/* Parses |hlo|, evaluates its entry on |args| (freed here) and returns the status. */
static hj_status tl_eval(hj_ctx_t *ctx, const char *hlo, int nargs, hlo_literal **args,
                         hlo_literal **out) {
  hlo_module *m = NULL;
  CHECK_OK(ctx, hlo_parse_module(ctx, hlo, strlen(hlo), "test", &m));
  hj_status st = hlo_eval_module(ctx, m, args, nargs, out);
  hlo_module_free(m);  /* results must not depend on the module */
  for (int i = 0; i < nargs; i++) hlo_literal_free(args[i]);
  return st;
}

static hlo_literal *tl_run(hj_ctx_t *ctx, const char *hlo, int nargs, hlo_literal **args) {
  hlo_literal *out = NULL;
  CHECK_OK(ctx, tl_eval(ctx, hlo, nargs, args, &out));
  assert_non_null(out);
  return out;
}

/* Runs `ROOT r = T[n] op(a, b)` (or a unary op when |b| is NULL); |rt| is the result type. */
static hlo_literal *tl_op(hj_ctx_t *ctx, const char *t, const char *rt, int n, const char *op,
                          const char *attrs, const void *a, const void *b) {
  char text[1024];
  hlo_type ht;
  assert_true(hlo_type_from_name(t, strlen(t), &ht));
  if (b)
    snprintf(text, sizeof text,
             "HloModule m\nENTRY e {\n  a = %s[%d] parameter(0)\n  b = %s[%d] parameter(1)\n"
             "  ROOT r = %s[%d] %s(a, b)%s\n}\n", t, n, t, n, rt, n, op, attrs);
  else
    snprintf(text, sizeof text,
             "HloModule m\nENTRY e {\n  a = %s[%d] parameter(0)\n  ROOT r = %s[%d] %s(a)%s\n}\n",
             t, n, rt, n, op, attrs);
  hlo_literal *args[2] = { tl_arr(ht, n, a), b ? tl_arr(ht, n, b) : NULL };
  return tl_run(ctx, text, b ? 2 : 1, args);
}

static uint32_t tl_fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float tl_bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static void tl_expect_f32_bits(const hlo_literal *r, const float *want, int n) {
  const float *got = (const float *)r->data;
  for (int i = 0; i < n; i++)
    if (tl_fbits(got[i]) != tl_fbits(want[i]) && !(isnan(got[i]) && isnan(want[i])))
      fail_msg("element %d: got %a (0x%08x), want %a (0x%08x)", i, got[i], tl_fbits(got[i]),
               want[i], tl_fbits(want[i]));
}

#define EXPECT_ARR(T, r, ...)                                                            \
  do {                                                                                   \
    const T want_[] = { __VA_ARGS__ };                                                   \
    const T *got_ = (const T *)(r)->data;                                                \
    for (size_t i_ = 0; i_ < sizeof want_ / sizeof want_[0]; i_++)                       \
      if (got_[i_] != want_[i_])                                                         \
        fail_msg("element %zu: got %lld, want %lld", i_, (long long)got_[i_],            \
                 (long long)want_[i_]);                                                  \
  } while (0)


/* A module `ENTRY e { a = |in| parameter(0); ROOT r = |out| op(a) }` built by hand (the
   parser's verifier rejects what these tests feed the evaluator on purpose). */
static hlo_module *tl_unary_module(hj_ctx_t *ctx, hlo_opcode op, const hlo_shape *in,
                                   const hlo_shape *out) {
  hlo_module *m = hlo_module_new(ctx, "hand");
  hlo_comp *c = hlo_comp_new(m, "e");
  hlo_instr *a = hlo_instr_new(c, HLO_OP_PARAMETER, "a", in, NULL, 0);
  hlo_instr *r = hlo_instr_new(c, op, "r", out, &a, 1);
  assert_true(m && c && a && r);
  arrput(c->params, a);
  c->root = r;
  r->is_root = true;
  c->is_entry = true;
  m->entry = c;
  return m;
}

/* ---- integer semantics ----------------------------------------------------------------------- */

static void test_int_divide_remainder(void **state) {
  hj_ctx_t *ctx = *state;
  const int32_t a[] = { 7, -7, 7, -7, 5, INT32_MIN, INT32_MIN, 0 };
  const int32_t b[] = { 2, 2, -2, -2, 0, -1, 0, 0 };
  hlo_literal *d = tl_op(ctx, "s32", "s32", 8, "divide", "", a, b);
  EXPECT_ARR(int32_t, d, 3, -3, -3, 3, -1, INT32_MIN, -1, -1);  /* truncation; x/0 = -1 */
  hlo_literal_free(d);
  hlo_literal *r = tl_op(ctx, "s32", "s32", 8, "remainder", "", a, b);
  EXPECT_ARR(int32_t, r, 1, -1, 1, -1, 5, 0, INT32_MIN, 0);     /* sign of dividend; x%0 = x */
  hlo_literal_free(r);
  const uint32_t ua[] = { 7, 0xffffffffu, 9 }, ub[] = { 0, 2, 4 };
  hlo_literal *ud = tl_op(ctx, "u32", "u32", 3, "divide", "", ua, ub);
  EXPECT_ARR(uint32_t, ud, 0xffffffffu, 0x7fffffffu, 2);       /* unsigned x/0 = all ones */
  hlo_literal_free(ud);
  hlo_literal *ur = tl_op(ctx, "u32", "u32", 3, "remainder", "", ua, ub);
  EXPECT_ARR(uint32_t, ur, 7, 1, 1);
  hlo_literal_free(ur);
  const int8_t ca[] = { INT8_MIN, INT8_MIN, -7 }, cb[] = { -1, 0, 2 };
  hlo_literal *cd = tl_op(ctx, "s8", "s8", 3, "divide", "", ca, cb);
  EXPECT_ARR(int8_t, cd, INT8_MIN, -1, -3);
  hlo_literal_free(cd);
  const int64_t la[] = { INT64_MIN, INT64_MIN, INT64_MAX }, lb[] = { -1, -1, 0 };
  hlo_literal *ld = tl_op(ctx, "s64", "s64", 3, "divide", "", la, lb);
  EXPECT_ARR(int64_t, ld, INT64_MIN, INT64_MIN, -1);
  hlo_literal_free(ld);
  hlo_literal *lr = tl_op(ctx, "s64", "s64", 3, "remainder", "", la, lb);
  EXPECT_ARR(int64_t, lr, 0, 0, INT64_MAX);
  hlo_literal_free(lr);
}

static void test_int_wraparound(void **state) {
  hj_ctx_t *ctx = *state;
  const int32_t a[] = { INT32_MAX, 65536, INT32_MIN }, b[] = { 1, 65536, 1 };
  hlo_literal *s = tl_op(ctx, "s32", "s32", 3, "add", "", a, b);
  EXPECT_ARR(int32_t, s, INT32_MIN, 131072, INT32_MIN + 1);
  hlo_literal_free(s);
  hlo_literal *m = tl_op(ctx, "s32", "s32", 3, "multiply", "", a, b);
  EXPECT_ARR(int32_t, m, INT32_MAX, 0, INT32_MIN);
  hlo_literal_free(m);
  hlo_literal *sub = tl_op(ctx, "s32", "s32", 3, "subtract", "", b, a);
  EXPECT_ARR(int32_t, sub, INT32_MIN + 2, 0, INT32_MIN + 1);
  hlo_literal_free(sub);
  const uint8_t ua[] = { 0, 200 }, ub[] = { 1, 100 };
  hlo_literal *us = tl_op(ctx, "u8", "u8", 2, "subtract", "", ua, ub);
  EXPECT_ARR(uint8_t, us, 255, 100);
  hlo_literal_free(us);
  const int8_t ca[] = { 127, -128 }, cb[] = { 1, -1 };
  hlo_literal *cs = tl_op(ctx, "s8", "s8", 2, "add", "", ca, cb);
  EXPECT_ARR(int8_t, cs, -128, 127);
  hlo_literal_free(cs);
  /* s64/u64 are exact: no round trip through double */
  const int64_t la[] = { (1ll << 53) + 1, INT64_MAX }, lb[] = { 1ll << 53, -1 };
  hlo_literal *lm = tl_op(ctx, "s64", "s64", 2, "maximum", "", la, lb);
  EXPECT_ARR(int64_t, lm, (1ll << 53) + 1, INT64_MAX);
  hlo_literal_free(lm);
  const uint64_t qa[] = { UINT64_MAX, (1ull << 63) + 1 }, qb[] = { 0, 1ull << 63 };
  hlo_literal *qs = tl_op(ctx, "u64", "u64", 2, "add", "", qa, qb);
  EXPECT_ARR(uint64_t, qs, UINT64_MAX, 1);
  hlo_literal_free(qs);
}

static void test_int_shifts(void **state) {
  hj_ctx_t *ctx = *state;
  const int32_t a[] = { 1, 1, 1, -8, -8, 8, -8, -1 };
  const int32_t b[] = { 31, 32, -1, 1, 40, 40, 28, 32 };
  hlo_literal *l = tl_op(ctx, "s32", "s32", 8, "shift-left", "", a, b);
  EXPECT_ARR(int32_t, l, INT32_MIN, 0, 0, -16, 0, 0, INT32_MIN, 0);
  hlo_literal_free(l);
  hlo_literal *ra = tl_op(ctx, "s32", "s32", 8, "shift-right-arithmetic", "", a, b);
  EXPECT_ARR(int32_t, ra, 0, 0, 0, -4, -1, 0, -1, -1);
  hlo_literal_free(ra);
  hlo_literal *rl = tl_op(ctx, "s32", "s32", 8, "shift-right-logical", "", a, b);
  EXPECT_ARR(int32_t, rl, 0, 0, 0, 0x7ffffffc, 0, 0, 15, 0);
  hlo_literal_free(rl);
  const uint8_t ua[] = { 0x81, 0x80, 0x80, 0x80 }, ub[] = { 1, 1, 8, 7 };
  hlo_literal *ul = tl_op(ctx, "u8", "u8", 4, "shift-left", "", ua, ub);
  EXPECT_ARR(uint8_t, ul, 0x02, 0x00, 0x00, 0x00);
  hlo_literal_free(ul);
  hlo_literal *ur = tl_op(ctx, "u8", "u8", 4, "shift-right-arithmetic", "", ua, ub);
  EXPECT_ARR(uint8_t, ur, 0xc0, 0xc0, 0xff, 0xff);
  hlo_literal_free(ur);
  hlo_literal *uq = tl_op(ctx, "u8", "u8", 4, "shift-right-logical", "", ua, ub);
  EXPECT_ARR(uint8_t, uq, 0x40, 0x40, 0x00, 0x01);
  hlo_literal_free(uq);
}

static void test_int_unary(void **state) {
  hj_ctx_t *ctx = *state;
  const int32_t a[] = { INT32_MIN, -5, 0, 7, -1, 1 };
  hlo_literal *ab = tl_op(ctx, "s32", "s32", 6, "abs", "", a, NULL);
  EXPECT_ARR(int32_t, ab, INT32_MIN, 5, 0, 7, 1, 1);
  hlo_literal_free(ab);
  hlo_literal *ng = tl_op(ctx, "s32", "s32", 6, "negate", "", a, NULL);
  EXPECT_ARR(int32_t, ng, INT32_MIN, 5, 0, -7, 1, -1);
  hlo_literal_free(ng);
  hlo_literal *sg = tl_op(ctx, "s32", "s32", 6, "sign", "", a, NULL);
  EXPECT_ARR(int32_t, sg, -1, -1, 0, 1, -1, 1);
  hlo_literal_free(sg);
  hlo_literal *nt = tl_op(ctx, "s32", "s32", 6, "not", "", a, NULL);
  EXPECT_ARR(int32_t, nt, INT32_MAX, 4, -1, -8, 0, -2);
  hlo_literal_free(nt);
  hlo_literal *pc = tl_op(ctx, "s32", "s32", 6, "popcnt", "", a, NULL);
  EXPECT_ARR(int32_t, pc, 1, 31, 0, 3, 32, 1);
  hlo_literal_free(pc);
  hlo_literal *cz = tl_op(ctx, "s32", "s32", 6, "count-leading-zeros", "", a, NULL);
  EXPECT_ARR(int32_t, cz, 0, 0, 32, 29, 0, 31);
  hlo_literal_free(cz);
  const int8_t c[] = { -1, 0, 1 };
  hlo_literal *cc = tl_op(ctx, "s8", "s8", 3, "count-leading-zeros", "", c, NULL);
  EXPECT_ARR(int8_t, cc, 0, 8, 7);
  hlo_literal_free(cc);
  hlo_literal *cp = tl_op(ctx, "s8", "s8", 3, "popcnt", "", c, NULL);
  EXPECT_ARR(int8_t, cp, 8, 0, 1);
  hlo_literal_free(cp);
  const uint8_t p[] = { 0, 1 };
  hlo_literal *pn = tl_op(ctx, "pred", "pred", 2, "not", "", p, NULL);
  EXPECT_ARR(uint8_t, pn, 1, 0);  /* logical on pred */
  hlo_literal_free(pn);
}

static void test_int_power(void **state) {
  hj_ctx_t *ctx = *state;
  const int32_t a[] = { 2, -2, 2, 1, -1, 0, 3, -1, 5 };
  const int32_t b[] = { 10, 3, -1, -5, -1, 0, 21, 3, 0 };
  hlo_literal *p = tl_op(ctx, "s32", "s32", 9, "power", "", a, b);
  /* 3^21 = 10460353203 wraps to 10460353203 - 2*2^32 = 1870418611 */
  EXPECT_ARR(int32_t, p, 1024, -8, 0, 1, 0, 1, 1870418611, -1, 1);
  hlo_literal_free(p);
  const uint8_t pa[] = { 0, 0, 1, 1 }, pb[] = { 0, 1, 0, 1 };
  hlo_literal *pp = tl_op(ctx, "pred", "pred", 4, "power", "", pa, pb);
  EXPECT_ARR(uint8_t, pp, 1, 0, 1, 1);  /* a || !b */
  hlo_literal_free(pp);
}

static void test_pred_arith(void **state) {
  hj_ctx_t *ctx = *state;
  const uint8_t a[] = { 0, 0, 1, 1 }, b[] = { 0, 1, 0, 1 };
  hlo_literal *ad = tl_op(ctx, "pred", "pred", 4, "add", "", a, b);
  EXPECT_ARR(uint8_t, ad, 0, 1, 1, 1);  /* bool(a + b): or */
  hlo_literal_free(ad);
  hlo_literal *x = tl_op(ctx, "pred", "pred", 4, "xor", "", a, b);
  EXPECT_ARR(uint8_t, x, 0, 1, 1, 0);
  hlo_literal_free(x);
  hlo_literal *mn = tl_op(ctx, "pred", "pred", 4, "minimum", "", a, b);
  EXPECT_ARR(uint8_t, mn, 0, 0, 0, 1);
  hlo_literal_free(mn);
}

/* ---- float semantics ---------------------------------------------------------------------------- */

static void test_float_max_min_nan_zero(void **state) {
  hj_ctx_t *ctx = *state;
  float nan = tl_bitsf(0x7fc00000u);
  const float a[] = { nan, 1, -0.0f, 0.0f, 2, -INFINITY };
  const float b[] = { 1, nan, 0.0f, -0.0f, 3, nan };
  hlo_literal *mx = tl_op(ctx, "f32", "f32", 6, "maximum", "", a, b);
  /* NaN in either operand gives NaN; ties return the lhs (std::max), so ±0 keeps lhs */
  tl_expect_f32_bits(mx, (const float[]){ nan, nan, -0.0f, 0.0f, 3, nan }, 6);
  assert_true(signbit(((float *)mx->data)[2]) && !signbit(((float *)mx->data)[3]));
  hlo_literal_free(mx);
  hlo_literal *mn = tl_op(ctx, "f32", "f32", 6, "minimum", "", a, b);
  tl_expect_f32_bits(mn, (const float[]){ nan, nan, -0.0f, 0.0f, 2, nan }, 6);
  assert_true(signbit(((float *)mn->data)[2]) && !signbit(((float *)mn->data)[3]));
  hlo_literal_free(mn);
  const double da[] = { NAN, 1.0 }, db[] = { 2.0, NAN };
  hlo_literal *dm = tl_op(ctx, "f64", "f64", 2, "maximum", "", da, db);
  assert_true(isnan(((double *)dm->data)[0]) && isnan(((double *)dm->data)[1]));
  hlo_literal_free(dm);
}

static void test_float_unary(void **state) {
  hj_ctx_t *ctx = *state;
  float nan = tl_bitsf(0x7fc00000u);
  const float a[] = { -0.0f, 0.0f, nan, -3.0f, 2.0f };
  hlo_literal *sg = tl_op(ctx, "f32", "f32", 5, "sign", "", a, NULL);
  tl_expect_f32_bits(sg, (const float[]){ -0.0f, 0.0f, nan, -1.0f, 1.0f }, 5);
  hlo_literal_free(sg);
  const float r[] = { 0.5f, 1.5f, 2.5f, -0.5f, -2.5f };
  hlo_literal *re = tl_op(ctx, "f32", "f32", 5, "round-nearest-even", "", r, NULL);
  tl_expect_f32_bits(re, (const float[]){ 0.0f, 2.0f, 2.0f, -0.0f, -2.0f }, 5);
  hlo_literal_free(re);
  hlo_literal *ra = tl_op(ctx, "f32", "f32", 5, "round-nearest-afz", "", r, NULL);
  tl_expect_f32_bits(ra, (const float[]){ 1.0f, 2.0f, 3.0f, -1.0f, -3.0f }, 5);
  hlo_literal_free(ra);
  const float m[] = { 0.0f, 4.0f, -27.0f, 1.0f };
  hlo_literal *lg = tl_op(ctx, "f32", "f32", 4, "logistic", "", m, NULL);
  assert_true(((float *)lg->data)[0] == 0.5f);
  hlo_literal_free(lg);
  hlo_literal *rs = tl_op(ctx, "f32", "f32", 4, "rsqrt", "", m, NULL);
  assert_true(isinf(((float *)rs->data)[0]) && ((float *)rs->data)[1] == 0.5f);
  hlo_literal_free(rs);
  hlo_literal *cb = tl_op(ctx, "f32", "f32", 4, "cbrt", "", m, NULL);
  assert_true(((float *)cb->data)[2] == -3.0f);
  hlo_literal_free(cb);
  /* f32 math runs in float: exactly libm's float functions */
  hlo_literal *ex = tl_op(ctx, "f32", "f32", 4, "exponential", "", m, NULL);
  tl_expect_f32_bits(ex, (const float[]){ 1.0f, expf(4.0f), expf(-27.0f), expf(1.0f) }, 4);
  hlo_literal_free(ex);
  hlo_literal *th = tl_op(ctx, "f32", "f32", 4, "tanh", "", m, NULL);
  tl_expect_f32_bits(th, (const float[]){ 0.0f, tanhf(4.0f), -1.0f, tanhf(1.0f) }, 4);
  hlo_literal_free(th);
  const float f[] = { INFINITY, -INFINITY, nan, 1.0f };
  hlo_literal *fi = tl_op(ctx, "f32", "pred", 4, "is-finite", "", f, NULL);
  EXPECT_ARR(uint8_t, fi, 0, 0, 0, 1);
  hlo_literal_free(fi);
}

static void test_float_binary(void **state) {
  hj_ctx_t *ctx = *state;
  float nan = tl_bitsf(0x7fc00000u);
  const float a[] = { 0.0f, nan, 1.0f, 2.0f, -8.0f, 7.5f };
  const float b[] = { 0.0f, 0.0f, nan, 10.0f, 1.0f / 3, 2.0f };
  hlo_literal *p = tl_op(ctx, "f32", "f32", 6, "power", "", a, b);
  tl_expect_f32_bits(p, (const float[]){ 1.0f, 1.0f, 1.0f, 1024.0f, nan, powf(7.5f, 2.0f) }, 6);
  hlo_literal_free(p);
  hlo_literal *r = tl_op(ctx, "f32", "f32", 6, "remainder", "", a, b);
  assert_true(((float *)r->data)[5] == 1.5f);  /* fmod */
  hlo_literal_free(r);
  const float y[] = { 1.0f, -1.0f }, x[] = { -1.0f, -1.0f };
  hlo_literal *at = tl_op(ctx, "f32", "f32", 2, "atan2", "", y, x);
  tl_expect_f32_bits(at, (const float[]){ atan2f(1, -1), atan2f(-1, -1) }, 2);
  hlo_literal_free(at);
}

static void test_compare_total_order(void **state) {
  hj_ctx_t *ctx = *state;
  /* -NaN < -inf < -1 < -0 < +0 < 1 < inf < +NaN */
  const float v[] = { tl_bitsf(0xffc00000u), -INFINITY, -1, -0.0f, 0.0f, 1, INFINITY,
                      tl_bitsf(0x7fc00000u) };
  float a[7], b[7];
  for (int i = 0; i < 7; i++) a[i] = v[i], b[i] = v[i + 1];
  hlo_literal *lt = tl_op(ctx, "f32", "pred", 7, "compare", ", direction=LT, type=TOTALORDER", a, b);
  EXPECT_ARR(uint8_t, lt, 1, 1, 1, 1, 1, 1, 1);
  hlo_literal_free(lt);
  hlo_literal *ltf = tl_op(ctx, "f32", "pred", 7, "compare", ", direction=LT", a, b);
  EXPECT_ARR(uint8_t, ltf, 0, 1, 1, 0, 1, 1, 0);  /* IEEE: NaN unordered, -0 == +0 */
  hlo_literal_free(ltf);
  const float za[] = { -0.0f, v[7], v[7] }, zb[] = { 0.0f, v[7], 1 };
  hlo_literal *eqt = tl_op(ctx, "f32", "pred", 3, "compare", ", direction=EQ, type=TOTALORDER", za, zb);
  EXPECT_ARR(uint8_t, eqt, 0, 1, 0);
  hlo_literal_free(eqt);
  hlo_literal *eqf = tl_op(ctx, "f32", "pred", 3, "compare", ", direction=EQ, type=FLOAT", za, zb);
  EXPECT_ARR(uint8_t, eqf, 1, 0, 0);
  hlo_literal_free(eqf);
  hlo_literal *nef = tl_op(ctx, "f32", "pred", 3, "compare", ", direction=NE", za, zb);
  EXPECT_ARR(uint8_t, nef, 0, 1, 1);
  hlo_literal_free(nef);
  const int32_t sa[] = { -1, 3 }, sb[] = { 1, 3 };
  hlo_literal *sl = tl_op(ctx, "s32", "pred", 2, "compare", ", direction=LT", sa, sb);
  EXPECT_ARR(uint8_t, sl, 1, 0);
  hlo_literal_free(sl);
  hlo_literal *ul = tl_op(ctx, "u32", "pred", 2, "compare", ", direction=LT", sa, sb);
  EXPECT_ARR(uint8_t, ul, 0, 0);  /* 0xffffffff is not < 1 unsigned */
  hlo_literal_free(ul);
  hlo_literal *ge = tl_op(ctx, "s32", "pred", 2, "compare", ", direction=GE", sa, sb);
  EXPECT_ARR(uint8_t, ge, 0, 1);
  hlo_literal_free(ge);
}

/* ---- convert ---------------------------------------------------------------------------------------- */

static void test_convert_float_to_int(void **state) {
  hj_ctx_t *ctx = *state;
  const float a[] = { NAN, 3e9f, -3e9f, 2.9f, -2.9f, INFINITY, -INFINITY };
  hlo_literal *s = tl_op(ctx, "f32", "s32", 7, "convert", "", a, NULL);
  EXPECT_ARR(int32_t, s, 0, INT32_MAX, INT32_MIN, 2, -2, INT32_MAX, INT32_MIN);
  hlo_literal_free(s);
  hlo_literal *l = tl_op(ctx, "f32", "s64", 7, "convert", "", a, NULL);
  EXPECT_ARR(int64_t, l, 0, 3000000000ll, -3000000000ll, 2, -2, INT64_MAX, INT64_MIN);
  hlo_literal_free(l);
  const float u[] = { -1.0f, 300.0f, 255.9f, NAN, 0.5f };
  hlo_literal *u8 = tl_op(ctx, "f32", "u8", 5, "convert", "", u, NULL);
  EXPECT_ARR(uint8_t, u8, 0, 255, 255, 0, 0);
  hlo_literal_free(u8);
  const float p[] = { 0.0f, -0.0f, NAN, 0.5f };
  hlo_literal *pr = tl_op(ctx, "f32", "pred", 4, "convert", "", p, NULL);
  EXPECT_ARR(uint8_t, pr, 0, 0, 1, 1);  /* x != 0 */
  hlo_literal_free(pr);
}

static void test_convert_int(void **state) {
  hj_ctx_t *ctx = *state;
  const int32_t a[] = { 300, -129, 127, -1 };
  hlo_literal *s8 = tl_op(ctx, "s32", "s8", 4, "convert", "", a, NULL);
  EXPECT_ARR(int8_t, s8, 44, 127, 127, -1);  /* int -> int wraps */
  hlo_literal_free(s8);
  hlo_literal *u = tl_op(ctx, "s32", "u32", 4, "convert", "", a, NULL);
  EXPECT_ARR(uint32_t, u, 300, 0xffffff7fu, 127, 0xffffffffu);
  hlo_literal_free(u);
  hlo_literal *w = tl_op(ctx, "s32", "s64", 4, "convert", "", a, NULL);
  EXPECT_ARR(int64_t, w, 300, -129, 127, -1);  /* sign-extends */
  hlo_literal_free(w);
  hlo_literal *pr = tl_op(ctx, "s32", "pred", 4, "convert", "", a, NULL);
  EXPECT_ARR(uint8_t, pr, 1, 1, 1, 1);
  hlo_literal_free(pr);
  const uint8_t p[] = { 1, 0 };
  hlo_literal *pf = tl_op(ctx, "pred", "f32", 2, "convert", "", p, NULL);
  tl_expect_f32_bits(pf, (const float[]){ 1.0f, 0.0f }, 2);
  hlo_literal_free(pf);
  /* s64 -> f32 rounds once: 2^62 + 2^38 + 1 is above the halfway point, so it rounds up to
     2^62 + 2^39 (0x5e800001); going through double would round to 2^62 (0x5e800000). */
  const int64_t big[] = { (1ll << 62) + (1ll << 38) + 1, (1ll << 24) + 1 };
  hlo_literal *bf = tl_op(ctx, "s64", "f32", 2, "convert", "", big, NULL);
  assert_int_equal(tl_fbits(((float *)bf->data)[0]), 0x5e800001u);
  assert_true(((float *)bf->data)[1] == 16777216.0f);
  hlo_literal_free(bf);
  const uint64_t ub[] = { UINT64_MAX };
  hlo_literal *ud = tl_op(ctx, "u64", "f64", 1, "convert", "", ub, NULL);
  assert_true(((double *)ud->data)[0] == 18446744073709551616.0);
  hlo_literal_free(ud);
}

static void test_convert_half(void **state) {
  hj_ctx_t *ctx = *state;
  /* ml_dtypes / IEEE round-to-nearest-even reference bit patterns */
  const float a[] = { 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f, NAN, -0.0f };
  hlo_literal *b = tl_op(ctx, "f32", "bf16", 5, "convert", "", a, NULL);
  const uint16_t *bb = (const uint16_t *)b->data;
  assert_int_equal(bb[0], 0x3f80);  /* tie to even: 1.0 */
  assert_int_equal(bb[1], 0x3f82);  /* tie to even: up */
  assert_int_equal(bb[2], 0x3f81);  /* above half: up */
  assert_true((bb[3] & 0x7f80) == 0x7f80 && (bb[3] & 0x7f));  /* NaN stays NaN */
  assert_int_equal(bb[4], 0x8000);
  hlo_literal_free(b);
  const float h[] = { 1.0f + 0x1p-11f, 65520.0f, 65519.0f, 0x1p-24f };
  hlo_literal *f16 = tl_op(ctx, "f32", "f16", 4, "convert", "", h, NULL);
  const uint16_t *hh = (const uint16_t *)f16->data;
  assert_int_equal(hh[0], 0x3c00);
  assert_int_equal(hh[1], 0x7c00);  /* overflows to inf */
  assert_int_equal(hh[2], 0x7bff);  /* 65504 */
  assert_int_equal(hh[3], 0x0001);  /* smallest subnormal */
  hlo_literal_free(f16);
  /* bf16 -> s32 saturates like f32 */
  const uint16_t big[] = { 0x7f80, 0x4f80 };  /* inf, 2^32 */
  hlo_literal *bi = tl_op(ctx, "bf16", "s32", 2, "convert", "", big, NULL);
  EXPECT_ARR(int32_t, bi, INT32_MAX, INT32_MAX);
  hlo_literal_free(bi);
}

static void test_half_arith(void **state) {
  hj_ctx_t *ctx = *state;
  /* bf16: computed in f32, rounded back: 1 + 2^-8 ties to even -> 1.0; 1 + 3*2^-8 -> up */
  const uint16_t a[] = { 0x3f80, 0x3f81, 0x4040 }, b[] = { 0x3b80, 0x3b80, 0x3f80 };
  hlo_literal *s = tl_op(ctx, "bf16", "bf16", 3, "add", "", a, b);
  EXPECT_ARR(uint16_t, s, 0x3f80, 0x3f82, 0x4080);  /* 3 + 1 = 4 */
  hlo_literal_free(s);
  /* f16: 2048 + 1 = 2049 is a tie between 2048 and 2050 -> 2048 */
  const uint16_t ha[] = { 0x6800, 0x3c00 }, hb[] = { 0x3c00, 0x3c00 };
  hlo_literal *hs = tl_op(ctx, "f16", "f16", 2, "add", "", ha, hb);
  EXPECT_ARR(uint16_t, hs, 0x6800, 0x4000);
  hlo_literal_free(hs);
  const uint16_t mx[] = { 0x7e00, 0x8000 }, my[] = { 0x3c00, 0x0000 };
  hlo_literal *hm = tl_op(ctx, "f16", "f16", 2, "maximum", "", mx, my);
  assert_true((((uint16_t *)hm->data)[0] & 0x7c00) == 0x7c00);  /* NaN */
  assert_int_equal(((uint16_t *)hm->data)[1], 0x8000);          /* lhs on the tie */
  hlo_literal_free(hm);
}

static void test_bitcast_convert(void **state) {
  hj_ctx_t *ctx = *state;
  const float a[] = { 1.0f, -2.0f };
  hlo_literal *r = tl_op(ctx, "f32", "s32", 2, "bitcast-convert", "", a, NULL);
  EXPECT_ARR(int32_t, r, 0x3f800000, (int32_t)0xc0000000u);
  hlo_literal_free(r);
  int64_t d2[2] = { 2, 2 }, d1 = 2;
  hlo_shape in = hlo_shape_array(HLO_F32, 1, &d1), out = hlo_shape_array(HLO_U16, 2, d2);
  hlo_module *m = tl_unary_module(ctx, HLO_OP_BITCAST_CONVERT, &in, &out);
  hlo_literal *args[1] = { tl_arr(HLO_F32, 2, a) }, *w = NULL;
  CHECK_OK(ctx, hlo_eval_module(ctx, m, args, 1, &w));
  hlo_module_free(m);
  hlo_literal_free(args[0]);
  EXPECT_ARR(uint16_t, w, 0x0000, 0x3f80, 0x0000, 0xc000);  /* little endian halves */
  hlo_literal_free(w);
}

static void test_select_clamp(void **state) {
  hj_ctx_t *ctx = *state;
  const char *text =
      "HloModule m\nENTRY e {\n  x = f32[5] parameter(0)\n  lo = f32[] constant(0)\n"
      "  hi = f32[] constant(1)\n  c = f32[5] clamp(lo, x, hi)\n"
      "  z = f32[5] broadcast(lo), dimensions={}\n  p = pred[5] compare(x, z), direction=GT\n"
      "  ROOT s = f32[5] select(p, c, x)\n}\n";
  const float x[] = { -1.0f, 0.5f, 2.0f, NAN, -0.0f };
  hlo_literal *args[1] = { tl_arr(HLO_F32, 5, x) };
  hlo_literal *r = tl_run(ctx, text, 1, args);
  /* x > 0 ? clamp : x; NaN > 0 is false -> x itself */
  tl_expect_f32_bits(r, (const float[]){ -1.0f, 0.5f, 1.0f, NAN, -0.0f }, 5);
  hlo_literal_free(r);
  const int32_t lo[] = { 0, 0, 0 }, v[] = { -5, 3, 9 };
  char t2[] = "HloModule m\nENTRY e {\n  l = s32[3] parameter(0)\n  v = s32[3] parameter(1)\n"
              "  h = s32[] constant(5)\n  ROOT c = s32[3] clamp(l, v, h)\n}\n";
  hlo_literal *a2[2] = { tl_arr(HLO_S32, 3, lo), tl_arr(HLO_S32, 3, v) };
  hlo_literal *c = tl_run(ctx, t2, 2, a2);
  EXPECT_ARR(int32_t, c, 0, 3, 5);
  hlo_literal_free(c);
}

/* ---- control flow and structure ---------------------------------------------------------------- */

static void test_while_loop(void **state) {
  hj_ctx_t *ctx = *state;
  const char *text =
      "HloModule m\n"
      "cond {\n  p = (s32[], f32[2]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
      "  n = s32[] constant(10)\n  ROOT lt = pred[] compare(i, n), direction=LT\n}\n"
      "body {\n  p = (s32[], f32[2]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
      "  a = f32[2] get-tuple-element(p), index=1\n  one = s32[] constant(1)\n"
      "  j = s32[] add(i, one)\n  fi = f32[] convert(i)\n  b = f32[2] broadcast(fi), dimensions={}\n"
      "  s = f32[2] add(a, b)\n  ROOT t = (s32[], f32[2]) tuple(j, s)\n}\n"
      "ENTRY e {\n  x = f32[2] parameter(0)\n  z = s32[] constant(0)\n"
      "  t = (s32[], f32[2]) tuple(z, x)\n  w = (s32[], f32[2]) while(t), condition=cond, body=body\n"
      "  ROOT r = f32[2] get-tuple-element(w), index=1\n}\n";
  const float x[] = { 1.0f, -1.0f };
  hlo_literal *args[1] = { tl_arr(HLO_F32, 2, x) };
  hlo_literal *r = tl_run(ctx, text, 1, args);
  tl_expect_f32_bits(r, (const float[]){ 46.0f, 44.0f }, 2);  /* + 0+1+...+9 */
  hlo_literal_free(r);
}

static const char *tl_cond_text(const char *sel_type) {
  static char buf[1024];
  snprintf(buf, sizeof buf,
           "HloModule m\n"
           "b0 {\n  p = f32[] parameter(0)\n  c = f32[] constant(1)\n  ROOT r = f32[] add(p, c)\n}\n"
           "b1 {\n  p = f32[] parameter(0)\n  c = f32[] constant(2)\n  ROOT r = f32[] multiply(p, c)\n}\n"
           "b2 {\n  p = f32[] parameter(0)\n  ROOT r = f32[] negate(p)\n}\n"
           "ENTRY e {\n  s = %s[] parameter(0)\n  x = f32[] parameter(1)\n"
           "  ROOT r = f32[] conditional(s, x, x%s), branch_computations={b0, b1%s}\n}\n",
           sel_type, strcmp(sel_type, "pred") ? ", x" : "",
           strcmp(sel_type, "pred") ? ", b2" : "");
  return buf;
}

static float tl_cond(hj_ctx_t *ctx, const char *sel_type, const void *sel, float x) {
  hlo_type t;
  assert_true(hlo_type_from_name(sel_type, strlen(sel_type), &t));
  hlo_literal *args[2] = { tl_arr(t, -1, sel), tl_arr(HLO_F32, -1, &x) };
  hlo_literal *r = tl_run(ctx, tl_cond_text(sel_type), 2, args);
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
      "fused {\n  a = f32[3] parameter(0)\n  b = f32[3] parameter(1)\n  s = f32[3] subtract(a, b)\n"
      "  ROOT t = (f32[3], f32[3]) tuple(s, a)\n}\n"
      "ENTRY e {\n  in = (f32[3], s32[]) parameter(0)\n  x = f32[3] get-tuple-element(in), index=0\n"
      "  k = s32[] get-tuple-element(in), index=1\n  y = f32[3] call(x), to_apply=sq\n"
      "  f = (f32[3], f32[3]) fusion(y, x), kind=kLoop, calls=fused\n"
      "  d = f32[3] get-tuple-element(f), index=0\n  a = f32[3] get-tuple-element(f), index=1\n"
      "  ROOT out = (s32[], f32[3], f32[3], (f32[3], f32[3])) tuple(k, d, a, f)\n}\n";
  const float x[] = { 1.0f, 2.0f, -3.0f };
  int32_t k = 42;
  hlo_literal *el[2] = { tl_arr(HLO_F32, 3, x), tl_arr(HLO_S32, -1, &k) };
  hlo_literal *args[1] = { hlo_literal_tuple(ctx, el, 2) };
  assert_non_null(args[0]);
  hlo_literal *r = tl_run(ctx, text, 1, args);
  assert_int_equal(r->shape.type, HLO_TUPLE);
  assert_int_equal(r->nelems, 4);
  assert_int_equal(((int32_t *)r->elems[0]->data)[0], 42);
  tl_expect_f32_bits(r->elems[1], (const float[]){ 0.0f, 2.0f, 12.0f }, 3);
  tl_expect_f32_bits(r->elems[2], (const float[]){ 1.0f, 4.0f, 9.0f }, 3);  /* fused a = y */
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
  hlo_literal *a1[2] = { tl_arr(HLO_F32, 4, x), tl_arr(HLO_F32, 4, y) };
  hlo_literal *r1 = tl_run(ctx, t1, 2, a1);
  tl_expect_f32_bits(r1, (const float[]){ 3, 4, NAN, -2 }, 4);
  hlo_literal_free(r1);
  /* not a scalar program (it calls): evaluated per element */
  const char *t2 =
      "HloModule m\n"
      "g {\n  a = s32[] parameter(0)\n  ROOT r = s32[] multiply(a, a)\n}\n"
      "f {\n  a = s32[] parameter(0)\n  c = s32[] call(a), to_apply=g\n"
      "  one = s32[] constant(1)\n  ROOT r = s32[] add(c, one)\n}\n"
      "ENTRY e {\n  x = s32[3] parameter(0)\n  ROOT r = s32[3] map(x), dimensions={0}, to_apply=f\n}\n";
  const int32_t xi[] = { 3, -4, 46341 };
  hlo_literal *a2[1] = { tl_arr(HLO_S32, 3, xi) };
  hlo_literal *r2 = tl_run(ctx, t2, 1, a2);
  EXPECT_ARR(int32_t, r2, 10, 17, (int32_t)(46341u * 46341u + 1u));
  hlo_literal_free(r2);
}

/* Values used several times, in place updates and tuples sharing elements stay right. */
static void test_ownership(void **state) {
  hj_ctx_t *ctx = *state;
  const char *text =
      "HloModule m\nENTRY e {\n  p = f32[3] parameter(0)\n  a = f32[3] add(p, p)\n"
      "  b = f32[3] multiply(a, a)\n  c = f32[3] subtract(b, a)\n  t = (f32[3], f32[3]) tuple(c, c)\n"
      "  g = f32[3] get-tuple-element(t), index=0\n  e = f32[3] exponential(g)\n"
      "  h = f32[3] get-tuple-element(t), index=1\n  d = f32[3] negate(h)\n"
      "  ROOT r = (f32[3], f32[3], (f32[3], f32[3]), f32[3]) tuple(d, e, t, p)\n}\n";
  const float x[] = { 1.0f, 0.5f, 0.0f };
  hlo_literal *args[1] = { tl_arr(HLO_F32, 3, x) };
  hlo_literal *r = tl_run(ctx, text, 1, args);
  /* a = 2x, b = 4x^2, c = 4x^2 - 2x = {2, 0, 0} */
  tl_expect_f32_bits(r->elems[0], (const float[]){ -2.0f, -0.0f, -0.0f }, 3);
  tl_expect_f32_bits(r->elems[1], (const float[]){ expf(2.0f), 1.0f, 1.0f }, 3);
  tl_expect_f32_bits(r->elems[2]->elems[1], (const float[]){ 2.0f, 0.0f, 0.0f }, 3);
  tl_expect_f32_bits(r->elems[3], x, 3);
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
  hlo_module *m = NULL;
  CHECK_OK(ctx, hlo_parse_module(ctx, text, strlen(text), "test", &m));
  hlo_comp *cmp = hlo_module_find_comp(m, "cmp");
  assert_non_null(cmp);
  float a = 1.5f, b = 2.5f;
  int32_t i = 7, j = 9;
  hlo_literal *args[4] = { tl_arr(HLO_F32, -1, &a), tl_arr(HLO_F32, -1, &b),
                           tl_arr(HLO_S32, -1, &i), tl_arr(HLO_S32, -1, &j) };
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

static void test_errors(void **state) {
  hj_ctx_t *ctx = *state;
  const char *text = "HloModule m\nENTRY e {\n  a = f32[2,3] parameter(0)\n"
                     "  ROOT r = f32[2,3] negate(a)\n}\n";
  hlo_literal *out = NULL;
  float d[6] = { 0 };
  hlo_literal *none[1] = { NULL };
  assert_int_equal(tl_eval(ctx, text, 0, none, &out), HJ_ERR_INVALID_ARG);
  assert_non_null(strstr(hj_ctx_error(ctx), "takes 1 arguments"));
  hlo_literal *bad[1] = { tl_arr(HLO_F32, 6, d) };
  assert_int_equal(tl_eval(ctx, text, 1, bad, &out), HJ_ERR_SHAPE);
  assert_non_null(strstr(hj_ctx_error(ctx), "f32[6]"));
  assert_non_null(strstr(hj_ctx_error(ctx), "f32[2,3]"));
  assert_null(out);
  /* exponential on s32 (the verifier would reject it; the evaluator must say no too) */
  int64_t two = 2;
  hlo_shape si = hlo_shape_array(HLO_S32, 1, &two);
  hlo_module *m = tl_unary_module(ctx, HLO_OP_EXP, &si, &si);
  hlo_literal *a2[1] = { tl_arr(HLO_S32, 2, d) };
  hj_status st = hlo_eval_module(ctx, m, a2, 1, &out);
  hlo_module_free(m);
  hlo_literal_free(a2[0]);
  if (st == HJ_OK) fail_msg("exponential on s32 was accepted");
  assert_null(out);
  assert_non_null(strstr(hj_ctx_error(ctx), "not defined on s32"));
  assert_non_null(strstr(hj_ctx_error(ctx), "exponential"));
}

static void test_literals(void **state) {
  hj_ctx_t *ctx = *state;
  int64_t dims[2] = { 2, 3 };
  hlo_shape s = hlo_shape_array(HLO_F32, 2, dims);
  hlo_literal *a = hlo_literal_new(ctx, &s);
  assert_non_null(a);
  assert_int_equal(a->nbytes, 24);
  assert_true(((uintptr_t)a->data & 63) == 0);
  for (int i = 0; i < 6; i++) assert_true(((float *)a->data)[i] == 0.0f);
  ((float *)a->data)[4] = 3.0f;
  hlo_literal *b = hlo_literal_clone(ctx, a);
  assert_true(hlo_literal_equal(a, b));
  ((float *)b->data)[4] = -3.0f;
  assert_false(hlo_literal_equal(a, b));
  {
    hlo_literal v = hlo_literal_view(&s, a->data);
    assert_false(v.owned);
    assert_true(hlo_literal_equal(&v, a));
  }
  hlo_shape ts = { .type = HLO_TUPLE, .ntuple = 2, .tuple = (hlo_shape[]){ s, hlo_shape_scalar(HLO_S8) } };
  hlo_literal *t = hlo_literal_new(ctx, &ts);
  assert_non_null(t);
  assert_int_equal(t->nelems, 2);
  assert_int_equal(t->elems[1]->nbytes, 1);
  hlo_literal *tc = hlo_literal_clone(ctx, t);
  assert_true(hlo_literal_equal(t, tc));
  assert_false(hlo_literal_equal(t, a));
  hlo_literal_free(tc);
  hlo_literal_free(t);
  hlo_literal_free(a);
  hlo_literal_free(b);
}

/* A large elementwise chain runs in place and fast (f32, s32). */
static void test_large_elementwise(void **state) {
  hj_ctx_t *ctx = *state;
  const char *text =
      "HloModule m\nENTRY e {\n  x = f32[4194304] parameter(0)\n  m = f32[] constant(1)\n"
      "  b = f32[4194304] broadcast(m), dimensions={}\n  s = f32[4194304] subtract(x, b)\n"
      "  e = f32[4194304] exponential(s)\n  i = s32[4194304] convert(e)\n"
      "  j = s32[4194304] multiply(i, i)\n  ROOT r = f32[4194304] convert(j)\n}\n";
  int64_t n = 4194304;
  hlo_literal *x = tl_arr(HLO_F32, n, NULL);
  for (int64_t i = 0; i < n; i++) ((float *)x->data)[i] = (float)(i % 5);
  hlo_literal *args[1] = { x };
  hlo_literal *r = tl_run(ctx, text, 1, args);
  for (int64_t i = 0; i < 10; i++) {
    int32_t k = (int32_t)expf((float)(i % 5) - 1.0f);
    assert_true(((float *)r->data)[i] == (float)(k * k));
  }
  hlo_literal_free(r);
}


/* ---- outside references: XLA's golden tests and JAX fixtures -------------------------------- */

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

static hlo_literal *tl_f32_2x2(void) {
  return tl_arr(HLO_F32, 4, (const float[]){ 1, 2, 3, 4 });
}

/* Expected values are the literals written in the XLA tests named in each file's header. */
static void test_xla_golden_control_flow(void **state) {
  hj_ctx_t *ctx = *state;
  hlo_module *m = tl_corpus(ctx, "golden_cmdbuf_index_conditional.hlo");
  if (!m) skip();
  const int32_t idx[] = { 0, 1, 1024 };
  const float want[3][4] = { { 2, 4, 6, 8 }, { 1, 4, 9, 16 }, { 1, 4, 9, 16 } };
  for (int i = 0; i < 3; i++) {
    hlo_literal *args[2] = { tl_arr(HLO_S32, -1, &idx[i]), tl_f32_2x2() }, *r = NULL;
    int64_t d[2] = { 2, 2 };
    args[1]->shape = hlo_shape_array(HLO_F32, 2, d);
    CHECK_OK(ctx, hlo_eval_module(ctx, m, args, 2, &r));
    tl_expect_f32_bits(r, want[i], 4);
    hlo_literal_free(r);
    hlo_literal_free(args[0]);
    hlo_literal_free(args[1]);
  }
  hlo_module_free(m);
  m = tl_corpus(ctx, "golden_cmdbuf_true_false_conditional.hlo");
  assert_non_null(m);
  for (int i = 0; i < 2; i++) {
    uint8_t p = i == 0;
    hlo_literal *args[2] = { tl_arr(HLO_PRED, -1, &p), tl_f32_2x2() }, *r = NULL;
    int64_t d[2] = { 2, 2 };
    args[1]->shape = hlo_shape_array(HLO_F32, 2, d);
    CHECK_OK(ctx, hlo_eval_module(ctx, m, args, 2, &r));
    tl_expect_f32_bits(r, want[i], 4);
    hlo_literal_free(r);
    hlo_literal_free(args[0]);
    hlo_literal_free(args[1]);
  }
  hlo_module_free(m);
  m = tl_corpus(ctx, "golden_cmdbuf_while_loop_inferred_shapes.hlo");
  assert_non_null(m);
  int32_t zero = 0;
  float fz = 0;
  hlo_literal *el[2] = { tl_arr(HLO_S32, -1, &zero), tl_arr(HLO_F32, -1, &fz) };
  hlo_literal *args[1] = { hlo_literal_tuple(ctx, el, 2) }, *r = NULL;
  CHECK_OK(ctx, hlo_eval_module(ctx, m, args, 1, &r));
  assert_int_equal(((int32_t *)r->elems[0]->data)[0], 10);
  assert_true(((float *)r->elems[1]->data)[0] == 20.0f);
  hlo_literal_free(r);
  hlo_literal_free(args[0]);
  hlo_module_free(m);
}

static void test_xla_golden_fusion_map(void **state) {
  hj_ctx_t *ctx = *state;
  hlo_module *m = tl_corpus(ctx, "golden_mof_loop_feeding_map.hlo");
  if (!m) skip();
  hlo_literal *args[1] = { tl_arr(HLO_F32, 3, (const float[]){ 1, 2, 3 }) }, *r = NULL;
  CHECK_OK(ctx, hlo_eval_module(ctx, m, args, 1, &r));
  tl_expect_f32_bits(r, (const float[]){ 0, 4, 9 }, 3);
  hlo_literal_free(r);
  hlo_literal_free(args[0]);
  hlo_module_free(m);
  m = tl_corpus(ctx, "golden_cmdbuf_call_fusions.hlo");
  assert_non_null(m);
  int64_t d[2] = { 2, 2 };
  args[0] = tl_f32_2x2();
  args[0]->shape = hlo_shape_array(HLO_F32, 2, d);
  CHECK_OK(ctx, hlo_eval_module(ctx, m, args, 1, &r));
  tl_expect_f32_bits(r, (const float[]){ 3, 8, 15, 24 }, 4);
  hlo_literal_free(r);
  hlo_literal_free(args[0]);
  hlo_module_free(m);
  /* (((42), 1.0), (3.0, 4)) -> (42) */
  m = tl_corpus(ctx, "golden_fusion_node_is_root_nested_tuple.hlo");
  assert_non_null(m);
  int32_t v42 = 42, v4 = 4;
  float v1 = 1, v3 = 3;
  hlo_literal *i0[1] = { tl_arr(HLO_S32, -1, &v42) };
  hlo_literal *i1[2] = { hlo_literal_tuple(ctx, i0, 1), tl_arr(HLO_F32, -1, &v1) };
  hlo_literal *i2[2] = { tl_arr(HLO_F32, -1, &v3), tl_arr(HLO_S32, -1, &v4) };
  hlo_literal *top[2] = { hlo_literal_tuple(ctx, i1, 2), hlo_literal_tuple(ctx, i2, 2) };
  args[0] = hlo_literal_tuple(ctx, top, 2);
  CHECK_OK(ctx, hlo_eval_module(ctx, m, args, 1, &r));
  assert_int_equal(r->nelems, 1);
  assert_int_equal(((int32_t *)r->elems[0]->data)[0], 42);
  hlo_literal_free(r);
  hlo_literal_free(args[0]);
  hlo_module_free(m);
}

/* Every output of a JAX fixture (tests/fixtures/jax: JAX's CPU results saved as .npy)
   matches: integers and pred exactly, floats within |rel| 2e-6 (XLA's CPU math is not libm). */
static void tl_fixture(hj_ctx_t *ctx, const char *name, int nin, int nout) {
  char path[512];
  snprintf(path, sizeof path, "%s/fixtures/jax/%s.hlo", tu_data_dir(), name);
  size_t len = 0;
  char *text = tu_read_file(path, &len);
  if (!text) fail_msg("missing fixture %s", path);
  hlo_module *m = NULL;
  CHECK_OK(ctx, hlo_parse_module(ctx, text, len, path, &m));
  free(text);
  hlo_literal *in[8] = { 0 }, *out = NULL;
  for (int i = 0; i < nin; i++) {
    snprintf(path, sizeof path, "%s/fixtures/jax/%s.in%d.npy", tu_data_dir(), name, i);
    CHECK_OK(ctx, hlo_npy_read(ctx, path, &in[i]));
  }
  CHECK_OK(ctx, hlo_eval_module(ctx, m, in, nin, &out));
  for (int k = 0; k < nout; k++) {
    hlo_literal *want = NULL;
    snprintf(path, sizeof path, "%s/fixtures/jax/%s.out%d.npy", tu_data_dir(), name, k);
    CHECK_OK(ctx, hlo_npy_read(ctx, path, &want));
    const hlo_literal *got = out->shape.type == HLO_TUPLE ? out->elems[k] : out;
    hlo_type t = got->shape.type;
    int64_t n = hlo_shape_numel(&got->shape);
    assert_int_equal(t, want->shape.type);
    assert_int_equal(n, hlo_shape_numel(&want->shape));
    for (int64_t i = 0; i < n; i++) {
      if (!hlo_type_is_float(t)) {
        if (hlo_load_s64(t, got->data, i) != hlo_load_s64(t, want->data, i))
          fail_msg("%s out%d[%lld]: got %lld, want %lld", name, k, (long long)i,
                   (long long)hlo_load_s64(t, got->data, i), (long long)hlo_load_s64(t, want->data, i));
        continue;
      }
      double g = hlo_load_f64(t, got->data, i), w = hlo_load_f64(t, want->data, i);
      if (g == w || (isnan(g) && isnan(w))) continue;
      if (!(fabs(g - w) <= 2e-6 * fmax(1.0, fabs(w))))
        fail_msg("%s out%d[%lld]: got %.9g, want %.9g", name, k, (long long)i, g, w);
    }
    hlo_literal_free(want);
  }
  hlo_literal_free(out);
  for (int i = 0; i < nin; i++) hlo_literal_free(in[i]);
  hlo_module_free(m);
}

static void test_jax_fixtures(void **state) {
  hj_ctx_t *ctx = *state;
  tl_fixture(ctx, "elementwise_chain", 2, 1);
  tl_fixture(ctx, "elementwise_unary_misc", 1, 14);
  tl_fixture(ctx, "compare_select", 2, 5);
  tl_fixture(ctx, "clamp", 2, 2);
  tl_fixture(ctx, "convert_dtypes", 2, 6);
  tl_fixture(ctx, "int_ops", 3, 18);
  tl_fixture(ctx, "while_loop", 1, 2);
  tl_fixture(ctx, "fori_loop", 2, 1);
  tl_fixture(ctx, "cond", 2, 2);
  tl_fixture(ctx, "gelu_erf", 1, 1);
  tl_fixture(ctx, "gelu_tanh", 1, 1);
}

static int setup(void **state) {
  *state = tu_ctx();
  return 0;
}
static int teardown(void **state) {
  hj_ctx_destroy(*state);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_int_divide_remainder),
    cmocka_unit_test(test_int_wraparound),
    cmocka_unit_test(test_int_shifts),
    cmocka_unit_test(test_int_unary),
    cmocka_unit_test(test_int_power),
    cmocka_unit_test(test_pred_arith),
    cmocka_unit_test(test_float_max_min_nan_zero),
    cmocka_unit_test(test_float_unary),
    cmocka_unit_test(test_float_binary),
    cmocka_unit_test(test_compare_total_order),
    cmocka_unit_test(test_convert_float_to_int),
    cmocka_unit_test(test_convert_int),
    cmocka_unit_test(test_convert_half),
    cmocka_unit_test(test_half_arith),
    cmocka_unit_test(test_bitcast_convert),
    cmocka_unit_test(test_select_clamp),
    cmocka_unit_test(test_while_loop),
    cmocka_unit_test(test_conditional),
    cmocka_unit_test(test_call_fusion_tuple),
    cmocka_unit_test(test_map),
    cmocka_unit_test(test_ownership),
    cmocka_unit_test(test_scalar_call_and_binary_elem),
    cmocka_unit_test(test_errors),
    cmocka_unit_test(test_literals),
    cmocka_unit_test(test_large_elementwise),
    cmocka_unit_test(test_xla_golden_control_flow),
    cmocka_unit_test(test_xla_golden_fusion_map),
    cmocka_unit_test(test_jax_fixtures),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
