/* test_eval.c — the reference evaluator's element semantics (eval.c, eval_elem.c,
   literal.c): integer, pred, float, half and convert ops checked against values fixed by
   XLA's documented semantics and IEEE 754 / NumPy / ml_dtypes (worked out independently,
   written down here as constants), plus errors, literals and JAX's CPU results. Most cases
   are rows of a table: one op on rank-1 operands, parsed from HLO text, its result compared
   bit for bit. Control flow and calls are in test_eval_control.c. */
#include "testutil.h"
#include "eval_testutil.h"

/* ---- one op on rank-1 operands ----------------------------------------------------------- */

/* Runs `ROOT r = rt[n] op(a, b)attrs` on operands `t[n]` (a unary op when |b| is NULL). */
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
  hlo_literal *args[2] = { evtu_arr(ht, n, a), b ? evtu_arr(ht, n, b) : NULL };
  return evtu_run(ctx, text, b ? 2 : 1, args);
}

/* tl_op with a result of type |t| copied to |out|: for cases where only some elements have
   a value fixed independently of libm. */
static void tl_op_into(hj_ctx_t *ctx, const char *t, int n, const char *op, const void *a,
                       const void *b, void *out) {
  hlo_literal *r = tl_op(ctx, t, t, n, op, "", a, b);
  memcpy(out, r->data, (size_t)r->nbytes);
  hlo_literal_free(r);
}

/* One row of a table: tl_op's arguments and the |nwant| expected elements, in the C storage
   of the result type. Written with the macros below, which take HLO type names as bare
   words: BIN(s32, "divide", a, b, 3, -3) divides the s32 arrays |a| and |b| and expects
   { 3, -3 } (as int32_t). */
typedef struct {
  const char *t, *rt, *op, *attrs;
  const void *a, *b;   /* b NULL: a unary op */
  int n, nb;           /* elements in a and in b */
  const void *want;
  int nwant;
} tl_case;

#define TL_C_pred uint8_t
#define TL_C_s8 int8_t
#define TL_C_u8 uint8_t
#define TL_C_s32 int32_t
#define TL_C_u32 uint32_t
#define TL_C_s64 int64_t
#define TL_C_u64 uint64_t
#define TL_C_f16 uint16_t
#define TL_C_bf16 uint16_t
#define TL_C_f32 float
#define TL_C_f64 double

#define TL_N(x) ((int)(sizeof(x) / sizeof((x)[0])))
#define TL_CASE(t, rt, op, attrs, a, b, nb, ...)                                              \
  { #t, #rt, op, attrs, a, b, TL_N(a), nb, (const TL_C_##rt[]){ __VA_ARGS__ },               \
    TL_N(((const TL_C_##rt[]){ __VA_ARGS__ })) }
/* An op whose result has its operands' type. */
#define BIN(t, op, a, b, ...) TL_CASE(t, t, op, "", a, b, TL_N(b), __VA_ARGS__)
#define UN(t, op, a, ...) TL_CASE(t, t, op, "", a, NULL, 0, __VA_ARGS__)
/* A unary op from |t| to |rt| (convert, bitcast-convert, is-finite). */
#define UN_TO(t, rt, op, a, ...) TL_CASE(t, rt, op, "", a, NULL, 0, __VA_ARGS__)
/* compare(a, b) with |attrs| ("direction=LT, type=TOTALORDER"), giving pred. */
#define CMP(t, attrs, a, b, ...) \
  TL_CASE(t, pred, "compare", ", " attrs, a, b, TL_N(b), __VA_ARGS__)

/* Runs every row; each result must equal its row bit for bit (so -0 is not +0), except that
   any NaN matches any NaN. A failure names the row: "case 2 (u32 divide -> u32)". */
static void tl_check(hj_ctx_t *ctx, const tl_case *cases, int ncases) {
  for (int k = 0; k < ncases; k++) {
    const tl_case *c = &cases[k];
    char what[160];
    snprintf(what, sizeof what, "case %d (%s %s%s -> %s)", k, c->t, c->op, c->attrs, c->rt);
    if (c->nwant != c->n || (c->b && c->nb != c->n))
      fail_msg("%s: operands of %d and %d elements, %d expected", what, c->n, c->nb, c->nwant);
    hlo_literal *r = tl_op(ctx, c->t, c->rt, c->n, c->op, c->attrs, c->a, c->b);
    hlo_type rt = r->shape.type;
    size_t size = (size_t)hlo_type_size(rt);
    for (int i = 0; i < c->n; i++) {
      unsigned long long got = 0, want = 0;
      memcpy(&got, (const char *)r->data + i * size, size);
      memcpy(&want, (const char *)c->want + i * size, size);
      if (got == want) continue;
      if (!hlo_type_is_float(rt))
        fail_msg("%s: element %d: got %lld (0x%llx), want %lld (0x%llx)", what, i,
                 (long long)hlo_load_s64(rt, r->data, i), got,
                 (long long)hlo_load_s64(rt, c->want, i), want);
      double g = hlo_load_f64(rt, r->data, i), w = hlo_load_f64(rt, c->want, i);
      if (!(isnan(g) && isnan(w)))
        fail_msg("%s: element %d: got %a (0x%llx), want %a (0x%llx)", what, i, g, got, w, want);
    }
    hlo_literal_free(r);
  }
}

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

/* ---- integer semantics ------------------------------------------------------------------- */

static void test_int_divide_remainder(void **state) {
  const int32_t a[] = { 7, -7, 7, -7, 5, INT32_MIN, INT32_MIN, 0 };
  const int32_t b[] = { 2, 2, -2, -2, 0, -1, 0, 0 };
  const uint32_t ua[] = { 7, 0xffffffffu, 9 }, ub[] = { 0, 2, 4 };
  const int8_t ca[] = { INT8_MIN, INT8_MIN, -7 }, cb[] = { -1, 0, 2 };
  const int64_t la[] = { INT64_MIN, INT64_MIN, INT64_MAX }, lb[] = { -1, -1, 0 };
  const tl_case cases[] = {
    BIN(s32, "divide", a, b, 3, -3, -3, 3, -1, INT32_MIN, -1, -1),  /* truncation; x/0 = -1 */
    BIN(s32, "remainder", a, b, 1, -1, 1, -1, 5, 0, INT32_MIN, 0),  /* sign of dividend; x%0 = x */
    BIN(u32, "divide", ua, ub, 0xffffffffu, 0x7fffffffu, 2),        /* unsigned x/0 = all ones */
    BIN(u32, "remainder", ua, ub, 7, 1, 1),
    BIN(s8, "divide", ca, cb, INT8_MIN, -1, -3),
    BIN(s64, "divide", la, lb, INT64_MIN, INT64_MIN, -1),
    BIN(s64, "remainder", la, lb, 0, 0, INT64_MAX),
  };
  tl_check(*state, cases, TL_N(cases));
}

static void test_int_wraparound(void **state) {
  const int32_t a[] = { INT32_MAX, 65536, INT32_MIN }, b[] = { 1, 65536, 1 };
  const uint8_t ua[] = { 0, 200 }, ub[] = { 1, 100 };
  const int8_t ca[] = { 127, -128 }, cb[] = { 1, -1 };
  const int64_t la[] = { (1ll << 53) + 1, INT64_MAX }, lb[] = { 1ll << 53, -1 };
  const uint64_t qa[] = { UINT64_MAX, (1ull << 63) + 1 }, qb[] = { 0, 1ull << 63 };
  const tl_case cases[] = {
    BIN(s32, "add", a, b, INT32_MIN, 131072, INT32_MIN + 1),
    BIN(s32, "multiply", a, b, INT32_MAX, 0, INT32_MIN),
    BIN(s32, "subtract", b, a, INT32_MIN + 2, 0, INT32_MIN + 1),
    BIN(u8, "subtract", ua, ub, 255, 100),
    BIN(s8, "add", ca, cb, -128, 127),
    /* s64/u64 are exact: no round trip through double */
    BIN(s64, "maximum", la, lb, (1ll << 53) + 1, INT64_MAX),
    BIN(u64, "add", qa, qb, UINT64_MAX, 1),
  };
  tl_check(*state, cases, TL_N(cases));
}

static void test_int_shifts(void **state) {
  const int32_t a[] = { 1, 1, 1, -8, -8, 8, -8, -1 };
  const int32_t b[] = { 31, 32, -1, 1, 40, 40, 28, 32 };
  const uint8_t ua[] = { 0x81, 0x80, 0x80, 0x80 }, ub[] = { 1, 1, 8, 7 };
  const tl_case cases[] = {
    BIN(s32, "shift-left", a, b, INT32_MIN, 0, 0, -16, 0, 0, INT32_MIN, 0),
    BIN(s32, "shift-right-arithmetic", a, b, 0, 0, 0, -4, -1, 0, -1, -1),
    BIN(s32, "shift-right-logical", a, b, 0, 0, 0, 0x7ffffffc, 0, 0, 15, 0),
    BIN(u8, "shift-left", ua, ub, 0x02, 0x00, 0x00, 0x00),
    BIN(u8, "shift-right-arithmetic", ua, ub, 0xc0, 0xc0, 0xff, 0xff),
    BIN(u8, "shift-right-logical", ua, ub, 0x40, 0x40, 0x00, 0x01),
  };
  tl_check(*state, cases, TL_N(cases));
}

static void test_int_unary(void **state) {
  const int32_t a[] = { INT32_MIN, -5, 0, 7, -1, 1 };
  const int8_t c[] = { -1, 0, 1 };
  const uint8_t p[] = { 0, 1 };
  const tl_case cases[] = {
    UN(s32, "abs", a, INT32_MIN, 5, 0, 7, 1, 1),
    UN(s32, "negate", a, INT32_MIN, 5, 0, -7, 1, -1),
    UN(s32, "sign", a, -1, -1, 0, 1, -1, 1),
    UN(s32, "not", a, INT32_MAX, 4, -1, -8, 0, -2),
    UN(s32, "popcnt", a, 1, 31, 0, 3, 32, 1),
    UN(s32, "count-leading-zeros", a, 0, 0, 32, 29, 0, 31),
    UN(s8, "count-leading-zeros", c, 0, 8, 7),
    UN(s8, "popcnt", c, 8, 0, 1),
    UN(pred, "not", p, 1, 0),  /* logical on pred */
  };
  tl_check(*state, cases, TL_N(cases));
}

static void test_int_power(void **state) {
  const int32_t a[] = { 2, -2, 2, 1, -1, 0, 3, -1, 5 };
  const int32_t b[] = { 10, 3, -1, -5, -1, 0, 21, 3, 0 };
  const uint8_t pa[] = { 0, 0, 1, 1 }, pb[] = { 0, 1, 0, 1 };
  const tl_case cases[] = {
    /* 3^21 = 10460353203 wraps to 10460353203 - 2*2^32 = 1870418611; (-1)^-1 = -1
       (issue 14: 1/x^n truncated; XLA's own evaluator gives 0 there) */
    BIN(s32, "power", a, b, 1024, -8, 0, 1, -1, 1, 1870418611, -1, 1),
    BIN(pred, "power", pa, pb, 1, 0, 1, 1),  /* a || !b */
  };
  tl_check(*state, cases, TL_N(cases));
}

static void test_pred_arith(void **state) {
  const uint8_t a[] = { 0, 0, 1, 1 }, b[] = { 0, 1, 0, 1 };
  const tl_case cases[] = {
    BIN(pred, "add", a, b, 0, 1, 1, 1),  /* bool(a + b): or */
    BIN(pred, "xor", a, b, 0, 1, 1, 0),
    BIN(pred, "minimum", a, b, 0, 0, 0, 1),
  };
  tl_check(*state, cases, TL_N(cases));
}

/* ---- float semantics --------------------------------------------------------------------- */

static void test_float_max_min_nan_zero(void **state) {
  float nan = evtu_bitsf(0x7fc00000u);
  const float a[] = { nan, 1, -0.0f, 0.0f, 2, -INFINITY };
  const float b[] = { 1, nan, 0.0f, -0.0f, 3, nan };
  const double da[] = { NAN, 1.0 }, db[] = { 2.0, NAN };
  /* NaN in either operand gives NaN; ties return the lhs (std::max), so ±0 keeps lhs (the
     rows compare bits: a +0 where -0 is expected fails) */
  const tl_case cases[] = {
    BIN(f32, "maximum", a, b, nan, nan, -0.0f, 0.0f, 3, nan),
    BIN(f32, "minimum", a, b, nan, nan, -0.0f, 0.0f, 2, nan),
    BIN(f64, "maximum", da, db, NAN, NAN),
  };
  tl_check(*state, cases, TL_N(cases));
}

static void test_float_unary(void **state) {
  hj_ctx_t *ctx = *state;
  float nan = evtu_bitsf(0x7fc00000u);
  const float a[] = { -0.0f, 0.0f, nan, -3.0f, 2.0f };
  const float r[] = { 0.5f, 1.5f, 2.5f, -0.5f, -2.5f };
  const float m[] = { 0.0f, 4.0f, -27.0f, 1.0f };
  const float f[] = { INFINITY, -INFINITY, nan, 1.0f };
  const tl_case cases[] = {
    UN(f32, "sign", a, -0.0f, 0.0f, nan, -1.0f, 1.0f),
    UN(f32, "round-nearest-even", r, 0.0f, 2.0f, 2.0f, -0.0f, -2.0f),
    UN(f32, "round-nearest-afz", r, 1.0f, 2.0f, 3.0f, -1.0f, -3.0f),
    /* f32 math runs in float: exactly libm's float functions */
    UN(f32, "exponential", m, 1.0f, expf(4.0f), expf(-27.0f), expf(1.0f)),
    UN(f32, "tanh", m, 0.0f, tanhf(4.0f), -1.0f, tanhf(1.0f)),
    UN_TO(f32, pred, "is-finite", f, 0, 0, 0, 1),
  };
  tl_check(ctx, cases, TL_N(cases));
  float o[4];
  tl_op_into(ctx, "f32", 4, "logistic", m, NULL, o);
  assert_true(o[0] == 0.5f);
  tl_op_into(ctx, "f32", 4, "rsqrt", m, NULL, o);
  assert_true(isinf(o[0]) && o[1] == 0.5f);
  tl_op_into(ctx, "f32", 4, "cbrt", m, NULL, o);
  assert_true(o[2] == -3.0f);
}

static void test_float_binary(void **state) {
  hj_ctx_t *ctx = *state;
  float nan = evtu_bitsf(0x7fc00000u);
  const float a[] = { 0.0f, nan, 1.0f, 2.0f, -8.0f, 7.5f };
  const float b[] = { 0.0f, 0.0f, nan, 10.0f, 1.0f / 3, 2.0f };
  const float y[] = { 1.0f, -1.0f }, x[] = { -1.0f, -1.0f };
  const tl_case cases[] = {
    BIN(f32, "power", a, b, 1.0f, 1.0f, 1.0f, 1024.0f, nan, powf(7.5f, 2.0f)),
    BIN(f32, "atan2", y, x, atan2f(1, -1), atan2f(-1, -1)),
  };
  tl_check(ctx, cases, TL_N(cases));
  float o[6];
  tl_op_into(ctx, "f32", 6, "remainder", a, b, o);
  assert_true(o[5] == 1.5f);  /* fmod */
}

static void test_compare_total_order(void **state) {
  /* -NaN < -inf < -1 < -0 < +0 < 1 < inf < +NaN */
  const float v[] = { evtu_bitsf(0xffc00000u), -INFINITY, -1, -0.0f, 0.0f, 1, INFINITY,
                      evtu_bitsf(0x7fc00000u) };
  float a[7], b[7];
  for (int i = 0; i < 7; i++) a[i] = v[i], b[i] = v[i + 1];
  const float za[] = { -0.0f, v[7], v[7] }, zb[] = { 0.0f, v[7], 1 };
  const int32_t sa[] = { -1, 3 }, sb[] = { 1, 3 };
  const tl_case cases[] = {
    CMP(f32, "direction=LT, type=TOTALORDER", a, b, 1, 1, 1, 1, 1, 1, 1),
    CMP(f32, "direction=LT", a, b, 0, 1, 1, 0, 1, 1, 0),  /* IEEE: NaN unordered, -0 == +0 */
    CMP(f32, "direction=EQ, type=TOTALORDER", za, zb, 0, 1, 0),
    CMP(f32, "direction=EQ, type=FLOAT", za, zb, 1, 0, 0),
    CMP(f32, "direction=NE", za, zb, 0, 1, 1),
    CMP(s32, "direction=LT", sa, sb, 1, 0),
    CMP(u32, "direction=LT", sa, sb, 0, 0),  /* 0xffffffff is not < 1 unsigned */
    CMP(s32, "direction=GE", sa, sb, 0, 1),
  };
  tl_check(*state, cases, TL_N(cases));
}

/* ---- convert ----------------------------------------------------------------------------- */

static void test_convert_float_to_int(void **state) {
  const float a[] = { NAN, 3e9f, -3e9f, 2.9f, -2.9f, INFINITY, -INFINITY };
  const float u[] = { -1.0f, 300.0f, 255.9f, NAN, 0.5f };
  const float p[] = { 0.0f, -0.0f, NAN, 0.5f };
  const tl_case cases[] = {
    UN_TO(f32, s32, "convert", a, 0, INT32_MAX, INT32_MIN, 2, -2, INT32_MAX, INT32_MIN),
    UN_TO(f32, s64, "convert", a, 0, 3000000000ll, -3000000000ll, 2, -2, INT64_MAX, INT64_MIN),
    UN_TO(f32, u8, "convert", u, 0, 255, 255, 0, 0),
    UN_TO(f32, pred, "convert", p, 0, 0, 1, 1),  /* x != 0 */
  };
  tl_check(*state, cases, TL_N(cases));
}

static void test_convert_int(void **state) {
  const int32_t a[] = { 300, -129, 127, -1 };
  const uint8_t p[] = { 1, 0 };
  const int64_t big[] = { (1ll << 62) + (1ll << 38) + 1, (1ll << 24) + 1 };
  const uint64_t ub[] = { UINT64_MAX };
  const tl_case cases[] = {
    UN_TO(s32, s8, "convert", a, 44, 127, 127, -1),  /* int -> int wraps */
    UN_TO(s32, u32, "convert", a, 300, 0xffffff7fu, 127, 0xffffffffu),
    UN_TO(s32, s64, "convert", a, 300, -129, 127, -1),  /* sign-extends */
    UN_TO(s32, pred, "convert", a, 1, 1, 1, 1),
    UN_TO(pred, f32, "convert", p, 1.0f, 0.0f),
    /* s64 -> f32 rounds once: 2^62 + 2^38 + 1 is above the halfway point, so it rounds up to
       2^62 + 2^39 (0x5e800001); going through double would round to 2^62 (0x5e800000). */
    UN_TO(s64, f32, "convert", big, evtu_bitsf(0x5e800001u), 16777216.0f),
    UN_TO(u64, f64, "convert", ub, 18446744073709551616.0),
  };
  tl_check(*state, cases, TL_N(cases));
}

static void test_convert_half(void **state) {
  /* ml_dtypes / IEEE round-to-nearest-even reference bit patterns */
  const float a[] = { 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f, NAN, -0.0f };
  const float h[] = { 1.0f + 0x1p-11f, 65520.0f, 65519.0f, 0x1p-24f };
  const uint16_t big[] = { 0x7f80, 0x4f80 };  /* inf, 2^32 */
  const tl_case cases[] = {
    /* tie to even: 1.0; tie to even: up; above half: up; NaN stays NaN (any NaN matches) */
    UN_TO(f32, bf16, "convert", a, 0x3f80, 0x3f82, 0x3f81, 0x7fc0, 0x8000),
    /* 1.0; 65520 overflows to inf; 65519 -> 65504; the smallest subnormal */
    UN_TO(f32, f16, "convert", h, 0x3c00, 0x7c00, 0x7bff, 0x0001),
    UN_TO(bf16, s32, "convert", big, INT32_MAX, INT32_MAX),  /* saturates like f32 */
  };
  tl_check(*state, cases, TL_N(cases));
}

static void test_half_arith(void **state) {
  const uint16_t a[] = { 0x3f80, 0x3f81, 0x4040 }, b[] = { 0x3b80, 0x3b80, 0x3f80 };
  const uint16_t ha[] = { 0x6800, 0x3c00 }, hb[] = { 0x3c00, 0x3c00 };
  const uint16_t mx[] = { 0x7e00, 0x8000 }, my[] = { 0x3c00, 0x0000 };
  const tl_case cases[] = {
    /* bf16: computed in f32, rounded back: 1 + 2^-8 ties to even -> 1.0; 1 + 3*2^-8 -> up;
       3 + 1 = 4 */
    BIN(bf16, "add", a, b, 0x3f80, 0x3f82, 0x4080),
    /* f16: 2048 + 1 = 2049 is a tie between 2048 and 2050 -> 2048 */
    BIN(f16, "add", ha, hb, 0x6800, 0x4000),
    BIN(f16, "maximum", mx, my, 0x7e00, 0x8000),  /* NaN (any NaN matches); lhs on the tie */
  };
  tl_check(*state, cases, TL_N(cases));
}

static void test_bitcast_convert(void **state) {
  hj_ctx_t *ctx = *state;
  const float a[] = { 1.0f, -2.0f };
  const tl_case cases[] = {
    UN_TO(f32, s32, "bitcast-convert", a, 0x3f800000, (int32_t)0xc0000000u),
  };
  tl_check(ctx, cases, TL_N(cases));
  int64_t d2[2] = { 2, 2 }, d1 = 2;
  hlo_shape in = hlo_shape_array(HLO_F32, 1, &d1), out = hlo_shape_array(HLO_U16, 2, d2);
  hlo_module *m = tl_unary_module(ctx, HLO_OP_BITCAST_CONVERT, &in, &out);
  hlo_literal *args[1] = { evtu_arr(HLO_F32, 2, a) }, *w = NULL;
  CHECK_OK(ctx, hlo_eval_module(ctx, m, args, 1, &w));
  hlo_module_free(m);
  hlo_literal_free(args[0]);
  EVTU_EXPECT_ARR(uint16_t, w, 0x0000, 0x3f80, 0x0000, 0xc000);  /* little endian halves */
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
  hlo_literal *args[1] = { evtu_arr(HLO_F32, 5, x) };
  hlo_literal *r = evtu_run(ctx, text, 1, args);
  /* x > 0 ? clamp : x; NaN > 0 is false -> x itself */
  evtu_expect_f32_bits(r, (const float[]){ -1.0f, 0.5f, 1.0f, NAN, -0.0f }, 5);
  hlo_literal_free(r);
  const int32_t lo[] = { 0, 0, 0 }, v[] = { -5, 3, 9 };
  char t2[] = "HloModule m\nENTRY e {\n  l = s32[3] parameter(0)\n  v = s32[3] parameter(1)\n"
              "  h = s32[] constant(5)\n  ROOT c = s32[3] clamp(l, v, h)\n}\n";
  hlo_literal *a2[2] = { evtu_arr(HLO_S32, 3, lo), evtu_arr(HLO_S32, 3, v) };
  hlo_literal *c = evtu_run(ctx, t2, 2, a2);
  EVTU_EXPECT_ARR(int32_t, c, 0, 3, 5);
  hlo_literal_free(c);
}

/* ---- errors, literals, size -------------------------------------------------------------- */

static void test_errors(void **state) {
  hj_ctx_t *ctx = *state;
  const char *text = "HloModule m\nENTRY e {\n  a = f32[2,3] parameter(0)\n"
                     "  ROOT r = f32[2,3] negate(a)\n}\n";
  hlo_literal *out = NULL;
  float d[6] = { 0 };
  hlo_literal *none[1] = { NULL };
  assert_int_equal(evtu_eval(ctx, text, 0, none, &out), HJ_ERR_INVALID_ARG);
  assert_non_null(strstr(hj_ctx_error(ctx), "takes 1 arguments"));
  hlo_literal *bad[1] = { evtu_arr(HLO_F32, 6, d) };
  assert_int_equal(evtu_eval(ctx, text, 1, bad, &out), HJ_ERR_SHAPE);
  assert_non_null(strstr(hj_ctx_error(ctx), "f32[6]"));
  assert_non_null(strstr(hj_ctx_error(ctx), "f32[2,3]"));
  assert_null(out);
  /* exponential on s32 (the verifier would reject it; the evaluator must say no too) */
  int64_t two = 2;
  hlo_shape si = hlo_shape_array(HLO_S32, 1, &two);
  hlo_module *m = tl_unary_module(ctx, HLO_OP_EXP, &si, &si);
  hlo_literal *a2[1] = { evtu_arr(HLO_S32, 2, d) };
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
  hlo_shape ts = { .type = HLO_TUPLE, .ntuple = 2,
                   .tuple = (hlo_shape[]){ s, hlo_shape_scalar(HLO_S8) } };
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
  hlo_literal *x = evtu_arr(HLO_F32, n, NULL);
  for (int64_t i = 0; i < n; i++) ((float *)x->data)[i] = (float)(i % 5);
  hlo_literal *args[1] = { x };
  hlo_literal *r = evtu_run(ctx, text, 1, args);
  for (int64_t i = 0; i < 10; i++) {
    int32_t k = (int32_t)expf((float)(i % 5) - 1.0f);
    assert_true(((float *)r->data)[i] == (float)(k * k));
  }
  hlo_literal_free(r);
}

/* ---- outside reference: JAX fixtures ----------------------------------------------------- */

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
                   (long long)hlo_load_s64(t, got->data, i),
                   (long long)hlo_load_s64(t, want->data, i));
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
    cmocka_unit_test(test_errors),
    cmocka_unit_test(test_literals),
    cmocka_unit_test(test_large_elementwise),
    cmocka_unit_test(test_jax_fixtures),
  };
  return cmocka_run_group_tests(tests, evtu_setup, evtu_teardown);
}
