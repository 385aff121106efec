/* eval_elem.c — the reference evaluator's elementwise kernels: unary and binary math,
   compare, select, clamp, convert, copy and same-width bitcast-convert, for every element
   type, with the semantics of XLA's HloEvaluator.

   Compute types: each element type is computed in one of four C types —
     f16 bf16 f32 -> float (f16/bf16 rounded back to nearest even on store),
     f64 -> double, s8..s64 -> int64_t (sign-extended), u8..u64 and pred -> uint64_t.
   Integer results are truncated to the element width on store, which gives two's
   complement wrap-around for add/sub/mul/negate/abs; ops whose result depends on the width
   (shifts, popcnt, clz, division of INT_MIN by -1) take the width as |bits|.

   Algorithm: the output is walked in chunks of EVE_CHUNK elements. For each chunk the
   operands are brought into the compute type (a pointer straight into the storage when it
   already is the compute type — f32, f64, s64, u64 — else a conversion into a stack
   buffer; a broadcast scalar is replicated), one kernel loop runs with the op switch
   outside the element loop, and the result is narrowed back. So f32 and every other type
   run tight per-op loops; nothing is switched per element.

   XLA semantics kept here (xla/hlo/evaluator/hlo_evaluator_typed_visitor.h):
     integer x/0 = -1 (signed) or all ones (unsigned); INT_MIN/-1 = INT_MIN; x%0 = x;
     INT_MIN%-1 = 0; shift amounts are unsigned, >= width gives 0 (shl, shrl) or the sign
     (shra); max/min return a NaN operand (the lhs first) and otherwise the lhs on ties
     (std::max/std::min), so maximum(-0,+0) = -0 and maximum(+0,-0) = +0; clamp returns
     a NaN among (lo, x, hi) in that order, else min(hi, max(x, lo)); power: x^0 = 1^x = 1,
     a negative integer exponent gives 1/x^n truncated: 0, except +-1 for base -1 (+1 for
     an even exponent) and 1 for base 1 (XLA's evaluator and emitter give 0 for base -1;
     we follow the arithmetic); pred power = a || !b; sign keeps ±0 and
     NaN; convert float->int saturates, NaN -> 0, float->pred is x != 0, int->float rounds
     once (s64 -> f32 directly, -> f16/bf16 through f32 as Eigen does); f64 -> f16 rounds
     once (IEEE, NumPy), f64 -> bf16 through f32 (Eigen, ml_dtypes). */
#include "eval_internal.h"
#include <math.h>

#define EVE_CHUNK 256

typedef enum { EVE_CF, EVE_CD, EVE_CI, EVE_CU } eve_class;  /* float double int64 uint64 */

static eve_class eve_class_of(hlo_type t) {
  switch (t) {
  case HLO_F16: case HLO_BF16: case HLO_F32: return EVE_CF;
  case HLO_F64: return EVE_CD;
  case HLO_S8: case HLO_S16: case HLO_S32: case HLO_S64: return EVE_CI;
  default: return EVE_CU;
  }
}

static bool eve_native(hlo_type t) {
  return t == HLO_F32 || t == HLO_F64 || t == HLO_S64 || t == HLO_U64;
}

static int eve_bits(hlo_type t) { return t == HLO_PRED ? 8 : 8 * hlo_type_size(t); }
static uint64_t eve_mask(int bits) { return bits >= 64 ? ~0ull : (1ull << bits) - 1; }
static int64_t eve_sext(uint64_t v, int bits) {
  if (bits >= 64) return (int64_t)v;
  int sh = 64 - bits;
  return (int64_t)(v << sh) >> sh;   /* arithmetic shift: gcc and clang define it */
}

/* ---- chunk load and store ------------------------------------------------------------ */

/* Fills |o| (compute type CT) from |n| elements of type T at |p| (or |p[0]| n times). */
#define EVE_FILL(T, CT, CONV)                                                            \
  do {                                                                                   \
    const T *p_ = (const T *)base + (bcast ? 0 : off);                                   \
    CT *o_ = tmp;                                                                        \
    if (bcast) {                                                                         \
      CT v_ = CONV(p_[0]);                                                               \
      for (int i_ = 0; i_ < n; i_++) o_[i_] = v_;                                        \
    } else {                                                                             \
      for (int i_ = 0; i_ < n; i_++) o_[i_] = CONV(p_[i_]);                              \
    }                                                                                    \
  } while (0)
#define EVE_ID(x) (x)

/* Elements [off, off+n) of |base| (type |t|) in t's compute type: a pointer into |base|
   when no conversion is needed, else converted into |tmp|. */
static const void *eve_in(hlo_type t, const void *base, bool bcast, int64_t off, int n,
                          void *tmp) {
  if (eve_native(t) && !bcast) return (const char *)base + off * hlo_type_size(t);
  switch (t) {
  case HLO_PRED: case HLO_U8: EVE_FILL(uint8_t, uint64_t, EVE_ID); break;
  case HLO_U16: EVE_FILL(uint16_t, uint64_t, EVE_ID); break;
  case HLO_U32: EVE_FILL(uint32_t, uint64_t, EVE_ID); break;
  case HLO_U64: EVE_FILL(uint64_t, uint64_t, EVE_ID); break;
  case HLO_S8: EVE_FILL(int8_t, int64_t, EVE_ID); break;
  case HLO_S16: EVE_FILL(int16_t, int64_t, EVE_ID); break;
  case HLO_S32: EVE_FILL(int32_t, int64_t, EVE_ID); break;
  case HLO_S64: EVE_FILL(int64_t, int64_t, EVE_ID); break;
  case HLO_F16: EVE_FILL(uint16_t, float, hlo_f16_to_f32); break;
  case HLO_BF16: EVE_FILL(uint16_t, float, hlo_bf16_to_f32); break;
  case HLO_F32: EVE_FILL(float, float, EVE_ID); break;
  case HLO_F64: EVE_FILL(double, double, EVE_ID); break;
  default: break;
  }
  return tmp;
}

/* Where a kernel writes elements [off, off+n) of an output of type |t|. */
static void *eve_out(hlo_type t, void *base, int64_t off, void *tmp) {
  return eve_native(t) ? (char *)base + off * hlo_type_size(t) : tmp;
}

#define EVE_NARROW(T, CT, CONV)                                                          \
  do {                                                                                   \
    T *p_ = (T *)base + off;                                                             \
    const CT *s_ = tmp;                                                                  \
    for (int i_ = 0; i_ < n; i_++) p_[i_] = CONV(s_[i_]);                                \
  } while (0)
#define EVE_NZ(x) ((uint8_t)((x) != 0))

/* Narrows a chunk computed in |tmp| into the storage of an output of type |t|. */
static void eve_flush(hlo_type t, void *base, int64_t off, const void *tmp, int n) {
  if (eve_native(t)) return;
  switch (t) {
  case HLO_PRED: EVE_NARROW(uint8_t, uint64_t, EVE_NZ); break;
  case HLO_U8: EVE_NARROW(uint8_t, uint64_t, (uint8_t)); break;
  case HLO_U16: EVE_NARROW(uint16_t, uint64_t, (uint16_t)); break;
  case HLO_U32: EVE_NARROW(uint32_t, uint64_t, (uint32_t)); break;
  case HLO_S8: EVE_NARROW(int8_t, int64_t, (int8_t)(uint8_t)); break;
  case HLO_S16: EVE_NARROW(int16_t, int64_t, (int16_t)(uint16_t)); break;
  case HLO_S32: EVE_NARROW(int32_t, int64_t, (int32_t)(uint32_t)); break;
  case HLO_F16: EVE_NARROW(uint16_t, float, hlo_f32_to_f16); break;
  case HLO_BF16: EVE_NARROW(uint16_t, float, hlo_f32_to_bf16); break;
  default: break;
  }
}

/* ---- float kernels (float and double, one macro body) ----------------------------------- */

#define EVE_FLOAT_HELPERS(T, S)                                                          \
  static inline T eve_max##S(T a, T b) {                                                 \
    if (isnan(a)) return a;                                                              \
    if (isnan(b)) return b;                                                              \
    return a < b ? b : a;                                                                \
  }                                                                                      \
  static inline T eve_min##S(T a, T b) {                                                 \
    if (isnan(a)) return a;                                                              \
    if (isnan(b)) return b;                                                              \
    return b < a ? b : a;                                                                \
  }                                                                                      \
  static inline T eve_clamp##S(T lo, T x, T hi) {                                        \
    if (isnan(lo)) return lo;                                                            \
    if (isnan(x)) return x;                                                              \
    if (isnan(hi)) return hi;                                                            \
    T m = x < lo ? lo : x;                                                               \
    return m < hi ? m : hi;                                                              \
  }                                                                                      \
  static inline T eve_sign##S(T x) {                                                     \
    return isnan(x) ? x : copysign##S((T)(x != 0), x);                                   \
  }
EVE_FLOAT_HELPERS(float, f)
EVE_FLOAT_HELPERS(double, )

#define EVE_L1(EXPR) for (i = 0; i < n; i++) { T x = a[i]; o[i] = (EXPR); } break
#define EVE_L2(EXPR) for (i = 0; i < n; i++) { T x = a[i], y = b[i]; o[i] = (EXPR); } break

#define EVE_FLOAT_KERNEL(NAME, T, S)                                                     \
  static void NAME(hlo_opcode op, const T *a, const T *b, const T *c, T *o, int n) {     \
    int i;                                                                               \
    switch (op) {                                                                        \
    case HLO_OP_ABS: EVE_L1(fabs##S(x));                                                 \
    case HLO_OP_NEGATE: EVE_L1(-x);                                                      \
    case HLO_OP_EXP: EVE_L1(exp##S(x));                                                  \
    case HLO_OP_EXPM1: EVE_L1(expm1##S(x));                                              \
    case HLO_OP_LOG: EVE_L1(log##S(x));                                                  \
    case HLO_OP_LOG1P: EVE_L1(log1p##S(x));                                              \
    /* exp(x) / (1 + exp(x)) for x < 0 keeps tiny results (logistic(-100) = 3.8e-44) that \
       1 / (1 + exp(-x)) flushes to 0 once exp(-x) overflows. */                            \
    case HLO_OP_LOGISTIC:                                                                \
      EVE_L1(x < 0 ? exp##S(x) / ((T)1 + exp##S(x)) : (T)1 / ((T)1 + exp##S(-x)));      \
    case HLO_OP_TANH: EVE_L1(tanh##S(x));                                                \
    case HLO_OP_SQRT: EVE_L1(sqrt##S(x));                                                \
    case HLO_OP_RSQRT: EVE_L1((T)1 / sqrt##S(x));                                        \
    case HLO_OP_CBRT: EVE_L1(cbrt##S(x));                                                \
    case HLO_OP_SIN: EVE_L1(sin##S(x));                                                  \
    case HLO_OP_COS: EVE_L1(cos##S(x));                                                  \
    case HLO_OP_TAN: EVE_L1(tan##S(x));                                                  \
    case HLO_OP_ERF: EVE_L1(erf##S(x));                                                  \
    case HLO_OP_FLOOR: EVE_L1(floor##S(x));                                              \
    case HLO_OP_CEIL: EVE_L1(ceil##S(x));                                                \
    case HLO_OP_ROUND_EVEN: EVE_L1(nearbyint##S(x));                                     \
    case HLO_OP_ROUND_AFZ: EVE_L1(round##S(x));                                          \
    case HLO_OP_SIGN: EVE_L1(eve_sign##S(x));                                            \
    case HLO_OP_COPY: case HLO_OP_CONVERT: EVE_L1(x);                                    \
    case HLO_OP_ADD: EVE_L2(x + y);                                                      \
    case HLO_OP_SUBTRACT: EVE_L2(x - y);                                                 \
    case HLO_OP_MULTIPLY: EVE_L2(x * y);                                                 \
    case HLO_OP_DIVIDE: EVE_L2(x / y);                                                   \
    case HLO_OP_REMAINDER: EVE_L2(fmod##S(x, y));                                        \
    case HLO_OP_POWER: EVE_L2(pow##S(x, y));                                             \
    case HLO_OP_MAXIMUM: EVE_L2(eve_max##S(x, y));                                       \
    case HLO_OP_MINIMUM: EVE_L2(eve_min##S(x, y));                                       \
    case HLO_OP_ATAN2: EVE_L2(atan2##S(x, y));                                           \
    case HLO_OP_CLAMP:                                                                   \
      for (i = 0; i < n; i++) o[i] = eve_clamp##S(a[i], b[i], c[i]);                     \
      break;                                                                             \
    default: break;                                                                      \
    }                                                                                    \
  }
#define T float
EVE_FLOAT_KERNEL(eve_kf, float, f)
#undef T
#define T double
EVE_FLOAT_KERNEL(eve_kd, double, )
#undef T

/* ---- integer kernels -------------------------------------------------------------------- */

/* base^exp mod 2^64 by squaring (XLA's IPow on the unsigned type). */
static uint64_t eve_ipow(uint64_t base, uint64_t exp) {
  uint64_t r = 1;
  while (exp) {
    if (exp & 1) r *= base;
    exp >>= 1;
    base *= base;
  }
  return r;
}

static int eve_clz(uint64_t x, int bits) {
  return x ? __builtin_clzll(x) - (64 - bits) : bits;
}

/* Signed integers of |bits| bits, held sign-extended in int64. */
static void eve_ki(hlo_opcode op, int bits, const int64_t *a, const int64_t *b,
                   const int64_t *c, int64_t *o, int n) {
  uint64_t m = eve_mask(bits);
  int i;
#define T int64_t
#define U(v) ((uint64_t)(v))
  switch (op) {
  case HLO_OP_ABS: EVE_L1(x < 0 ? (int64_t)(0 - U(x)) : x);
  case HLO_OP_NEGATE: EVE_L1((int64_t)(0 - U(x)));
  case HLO_OP_SIGN: EVE_L1((x > 0) - (x < 0));
  case HLO_OP_NOT: EVE_L1(~x);
  case HLO_OP_POPCNT: EVE_L1(__builtin_popcountll(U(x) & m));
  case HLO_OP_CLZ: EVE_L1(eve_clz(U(x) & m, bits));
  case HLO_OP_COPY: case HLO_OP_CONVERT: EVE_L1(x);
  case HLO_OP_ADD: EVE_L2((int64_t)(U(x) + U(y)));
  case HLO_OP_SUBTRACT: EVE_L2((int64_t)(U(x) - U(y)));
  case HLO_OP_MULTIPLY: EVE_L2((int64_t)(U(x) * U(y)));
  case HLO_OP_DIVIDE: EVE_L2(y == 0 ? -1 : y == -1 ? (int64_t)(0 - U(x)) : x / y);
  case HLO_OP_REMAINDER: EVE_L2(y == 0 ? x : y == -1 ? 0 : x % y);
  case HLO_OP_POWER:   /* x^-n: 1/x^n, an integer only for x = 1 and x = -1 (then +-1) */
    EVE_L2(x == 1 || y == 0 ? 1 : y >= 0 ? (int64_t)eve_ipow(U(x), U(y)) : x == -1 ? 1 - 2 * (y & 1) : 0);
  case HLO_OP_MAXIMUM: EVE_L2(x < y ? y : x);
  case HLO_OP_MINIMUM: EVE_L2(y < x ? y : x);
  case HLO_OP_AND: EVE_L2(x & y);
  case HLO_OP_OR: EVE_L2(x | y);
  case HLO_OP_XOR: EVE_L2(x ^ y);
  case HLO_OP_SHL: EVE_L2((U(y) & m) >= (uint64_t)bits ? 0 : (int64_t)(U(x) << (U(y) & m)));
  case HLO_OP_SHRA: EVE_L2((U(y) & m) >= (uint64_t)bits ? (x < 0 ? -1 : 0) : x >> (U(y) & m));
  case HLO_OP_SHRL:
    EVE_L2((U(y) & m) >= (uint64_t)bits ? 0 : (int64_t)((U(x) & m) >> (U(y) & m)));
  case HLO_OP_CLAMP:
    for (i = 0; i < n; i++) {
      int64_t v = b[i] < a[i] ? a[i] : b[i];  /* operands (lo, x, hi) */
      o[i] = v < c[i] ? v : c[i];
    }
    break;
  default: break;
  }
#undef T
#undef U
}

/* Unsigned integers of |bits| bits (and pred, 0/1), zero-extended in uint64. */
static void eve_ku(hlo_opcode op, int bits, bool pred, const uint64_t *a, const uint64_t *b,
                   const uint64_t *c, uint64_t *o, int n) {
  uint64_t m = eve_mask(bits);
  int i;
#define T uint64_t
  switch (op) {
  case HLO_OP_ABS: case HLO_OP_COPY: case HLO_OP_CONVERT: EVE_L1(x);
  case HLO_OP_NEGATE: EVE_L1(0 - x);
  case HLO_OP_SIGN: EVE_L1(x != 0);
  case HLO_OP_NOT: if (pred) { EVE_L1(!x); } else { EVE_L1(~x); }
  case HLO_OP_POPCNT: EVE_L1((uint64_t)__builtin_popcountll(x & m));
  case HLO_OP_CLZ: EVE_L1((uint64_t)eve_clz(x & m, bits));
  case HLO_OP_ADD: EVE_L2(x + y);
  case HLO_OP_SUBTRACT: EVE_L2(x - y);
  case HLO_OP_MULTIPLY: EVE_L2(x * y);
  case HLO_OP_DIVIDE: EVE_L2(y == 0 ? ~0ull : x / y);
  case HLO_OP_REMAINDER: EVE_L2(y == 0 ? x : x % y);
  case HLO_OP_POWER:
    if (pred) { EVE_L2(x || !y); } else { EVE_L2(x == 1 || y == 0 ? 1 : eve_ipow(x, y)); }
  case HLO_OP_MAXIMUM: EVE_L2(x < y ? y : x);
  case HLO_OP_MINIMUM: EVE_L2(y < x ? y : x);
  case HLO_OP_AND: EVE_L2(x & y);
  case HLO_OP_OR: EVE_L2(x | y);
  case HLO_OP_XOR: EVE_L2(x ^ y);
  case HLO_OP_SHL: EVE_L2(y >= (uint64_t)bits ? 0 : x << y);
  case HLO_OP_SHRA:
    EVE_L2(y >= (uint64_t)bits ? (eve_sext(x, bits) < 0 ? ~0ull : 0)
                               : (uint64_t)(eve_sext(x, bits) >> y));
  case HLO_OP_SHRL: EVE_L2(y >= (uint64_t)bits ? 0 : (x & m) >> y);
  case HLO_OP_CLAMP:
    for (i = 0; i < n; i++) {
      uint64_t v = b[i] < a[i] ? a[i] : b[i];
      o[i] = v < c[i] ? v : c[i];
    }
    break;
  default: break;
  }
#undef T
}

/* ---- compare, is-finite, select, convert ------------------------------------------------ */

/* Total-order keys: signed integers ordered -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN. */
static inline int32_t eve_key32(float f) {
  int32_t k;
  memcpy(&k, &f, 4);
  return k < 0 ? k ^ 0x7fffffff : k;
}
static inline int64_t eve_key64(double d) {
  int64_t k;
  memcpy(&k, &d, 8);
  return k < 0 ? k ^ 0x7fffffffffffffffll : k;
}

#define EVE_CMP(A, B)                                                                    \
  do {                                                                                   \
    switch (dir) {                                                                       \
    case HLO_CMP_EQ: for (i = 0; i < n; i++) o[i] = (A) == (B); break;                   \
    case HLO_CMP_NE: for (i = 0; i < n; i++) o[i] = (A) != (B); break;                   \
    case HLO_CMP_LT: for (i = 0; i < n; i++) o[i] = (A) < (B); break;                    \
    case HLO_CMP_LE: for (i = 0; i < n; i++) o[i] = (A) <= (B); break;                   \
    case HLO_CMP_GT: for (i = 0; i < n; i++) o[i] = (A) > (B); break;                    \
    case HLO_CMP_GE: for (i = 0; i < n; i++) o[i] = (A) >= (B); break;                   \
    default: break;                                                                      \
    }                                                                                    \
  } while (0)

static void eve_cmp(eve_class cl, bool total, hlo_cmp_dir dir, const void *pa, const void *pb,
                    uint8_t *o, int n) {
  int i;
  switch (cl) {
  case EVE_CF: {
    const float *a = pa, *b = pb;
    if (total) EVE_CMP(eve_key32(a[i]), eve_key32(b[i]));
    else EVE_CMP(a[i], b[i]);
    break;
  }
  case EVE_CD: {
    const double *a = pa, *b = pb;
    if (total) EVE_CMP(eve_key64(a[i]), eve_key64(b[i]));
    else EVE_CMP(a[i], b[i]);
    break;
  }
  case EVE_CI: {
    const int64_t *a = pa, *b = pb;
    EVE_CMP(a[i], b[i]);
    break;
  }
  case EVE_CU: {
    const uint64_t *a = pa, *b = pb;
    EVE_CMP(a[i], b[i]);
    break;
  }
  }
}

static void eve_select(const hlo_elem_op *e, const void *const *in, const bool *bc, void *out,
                       int64_t n) {
  const uint8_t *p = in[0];
  int64_t sp = !bc[0], sa = !bc[1], sb = !bc[2];
#define EVE_SEL(T)                                                                       \
  do {                                                                                   \
    const T *a = in[1], *b = in[2];                                                      \
    T *o = out;                                                                          \
    for (int64_t i = 0; i < n; i++) o[i] = p[i * sp] ? a[i * sa] : b[i * sb];            \
  } while (0)
  switch (hlo_type_size(e->out)) {
  case 1: EVE_SEL(uint8_t); break;
  case 2: EVE_SEL(uint16_t); break;
  case 4: EVE_SEL(uint32_t); break;
  case 8: EVE_SEL(uint64_t); break;
  default: break;
  }
#undef EVE_SEL
}

/* Float to a signed / unsigned integer of |bits| bits: saturating, NaN -> 0. */
static int64_t eve_sat_s(double v, double lim, int bits) {
  if (isnan(v)) return 0;
  if (v >= lim) return (int64_t)(eve_mask(bits) >> 1);
  if (v <= -lim) return -(int64_t)(eve_mask(bits) >> 1) - 1;
  return (int64_t)v;
}
static uint64_t eve_sat_u(double v, double lim, int bits) {
  if (isnan(v) || v <= 0) return 0;
  if (v >= lim) return eve_mask(bits);
  return (uint64_t)v;
}

#define EVE_CONV(ST, DT, EXPR)                                                           \
  do {                                                                                   \
    const ST *s = src;                                                                   \
    DT *d = dst;                                                                         \
    for (int i = 0; i < n; i++) { ST x = s[i]; d[i] = (EXPR); }                          \
  } while (0)

/* One chunk of convert: |src| in the compute type of class |sc|, |dst| in the compute type
   of |dt| (narrowed afterwards by eve_flush). */
static void eve_conv(eve_class sc, const void *src, hlo_type dt, void *dst, int n) {
  eve_class dc = eve_class_of(dt);
  int bits = eve_bits(dt);
  double lims = ldexp(1.0, bits - 1), limu = ldexp(1.0, bits);
  bool pred = dt == HLO_PRED;
  switch (sc * 4 + dc) {
  case EVE_CF * 4 + EVE_CF: EVE_CONV(float, float, x); break;
  case EVE_CF * 4 + EVE_CD: EVE_CONV(float, double, x); break;
  case EVE_CF * 4 + EVE_CI: EVE_CONV(float, int64_t, eve_sat_s(x, lims, bits)); break;
  case EVE_CF * 4 + EVE_CU: EVE_CONV(float, uint64_t, pred ? x != 0 : eve_sat_u(x, limu, bits)); break;
  case EVE_CD * 4 + EVE_CF: EVE_CONV(double, float, (float)x); break;
  case EVE_CD * 4 + EVE_CD: EVE_CONV(double, double, x); break;
  case EVE_CD * 4 + EVE_CI: EVE_CONV(double, int64_t, eve_sat_s(x, lims, bits)); break;
  case EVE_CD * 4 + EVE_CU: EVE_CONV(double, uint64_t, pred ? x != 0 : eve_sat_u(x, limu, bits)); break;
  case EVE_CI * 4 + EVE_CF: EVE_CONV(int64_t, float, (float)x); break;
  case EVE_CI * 4 + EVE_CD: EVE_CONV(int64_t, double, (double)x); break;
  case EVE_CI * 4 + EVE_CI: EVE_CONV(int64_t, int64_t, x); break;
  case EVE_CI * 4 + EVE_CU: EVE_CONV(int64_t, uint64_t, (uint64_t)x); break;
  case EVE_CU * 4 + EVE_CF: EVE_CONV(uint64_t, float, (float)x); break;
  case EVE_CU * 4 + EVE_CD: EVE_CONV(uint64_t, double, (double)x); break;
  case EVE_CU * 4 + EVE_CI: EVE_CONV(uint64_t, int64_t, (int64_t)x); break;
  case EVE_CU * 4 + EVE_CU: EVE_CONV(uint64_t, uint64_t, x); break;
  default: break;
  }
}

/* ---- entry points ------------------------------------------------------------------------ */

/* Runs the arithmetic kernel of |e| on one chunk already in compute types. */
static void eve_kernel(const hlo_elem_op *e, const void *a, const void *b, const void *c,
                       void *o, int n) {
  switch (eve_class_of(e->out)) {
  case EVE_CF: eve_kf(e->op, a, b, c, o, n); break;
  case EVE_CD: eve_kd(e->op, a, b, c, o, n); break;
  case EVE_CI: eve_ki(e->op, eve_bits(e->out), a, b, c, o, n); break;
  case EVE_CU: eve_ku(e->op, eve_bits(e->out), e->out == HLO_PRED, a, b, c, o, n); break;
  }
}

static void eve_is_finite(hlo_type t, const void *a, uint8_t *o, int n) {
  if (eve_class_of(t) == EVE_CF) {
    const float *x = a;
    for (int i = 0; i < n; i++) o[i] = isfinite(x[i]) != 0;
  } else {
    const double *x = a;
    for (int i = 0; i < n; i++) o[i] = isfinite(x[i]) != 0;
  }
}

/* XLA's reduce-precision (ReducePrecision in its evaluator) on the storage bits |v| of a
   float |t| (f16, bf16, f32, f64): the mantissa rounded to |mb| bits, half to even; then,
   with |eb| exponent bits fewer than |t|'s, overflow to signed infinity and underflow (the
   subnormals included) to signed zero. A NaN stays itself (XLA's CPU and GPU emitters and
   so JAX; XLA's HloEvaluator makes it +inf when mb = 0). */
static uint64_t eve_reduce_precision(hlo_type t, uint64_t v, int eb, int mb) {
  int width = eve_bits(t), sm = t == HLO_F16 ? 10 : t == HLO_BF16 ? 7 : t == HLO_F32 ? 23 : 52;
  int se = width - 1 - sm;
  uint64_t sign = 1ull << (width - 1), expm = ((1ull << se) - 1) << sm, x = v;
  bool nan = (v & expm) == expm && (v & ((1ull << sm) - 1));
  if (mb < sm) {
    uint64_t last = 1ull << (sm - mb);
    x = (x + (last >> 1) - 1 + ((x & last) >> (sm - mb))) & ~(last - 1) & eve_mask(width);
  }
  if (eb < se) {
    uint64_t bias = (1ull << (se - 1)) - 1, rbias = (1ull << (eb - 1)) - 1, xe = x & expm;
    if (xe > (bias + rbias) << sm) x = (x & sign) | expm;
    if (xe <= (bias - rbias) << sm) x &= sign;
  }
  return nan ? v : x;
}

/* Raw element copy (copy, bitcast-convert): |out| may equal |in|. */
static void eve_raw_copy(int sz, const void *in, bool bc, void *out, int64_t n) {
  if (!bc) {
    if (out != in) memmove(out, in, (size_t)(n * sz));
    return;
  }
  for (int64_t i = 0; i < n; i++) memcpy((char *)out + i * sz, in, (size_t)sz);
}

void hlo_elem_run(const hlo_elem_op *e, const void *const *in, const bool *bcast, void *out,
                  int64_t n) {
  if (n <= 0) return;   /* zero-element arrays have no storage (NULL): memmove(NULL, NULL, 0) is UB */
  bool bc[3] = { false, false, false };
  for (int k = 0; k < e->nin && k < 3; k++) bc[k] = bcast && bcast[k];
  if (e->op == HLO_OP_SELECT) {
    eve_select(e, in, bc, out, n);
    return;
  }
  if (e->op == HLO_OP_REDUCE_PRECISION) {   /* on the storage bits, not the compute type */
    size_t sz = (size_t)hlo_type_size(e->out);
    for (int64_t i = 0; i < n; i++) {
      uint64_t v = 0;   /* little endian: the low |sz| bytes */
      memcpy(&v, (const char *)in[0] + (bc[0] ? 0 : i) * (int64_t)sz, sz);
      v = eve_reduce_precision(e->out, v, e->exponent_bits, e->mantissa_bits);
      memcpy((char *)out + i * (int64_t)sz, &v, sz);
    }
    return;
  }
  if (e->op == HLO_OP_BITCAST_CONVERT || (e->op == HLO_OP_COPY) ||
      (e->op == HLO_OP_CONVERT && e->in[0] == e->out)) {
    eve_raw_copy(hlo_type_size(e->out), in[0], bc[0], out, n);
    return;
  }
  _Alignas(64) uint64_t tmp[4][EVE_CHUNK];
  for (int64_t off = 0; off < n; off += EVE_CHUNK) {
    int m = n - off < EVE_CHUNK ? (int)(n - off) : EVE_CHUNK;
    const void *a = eve_in(e->in[0], in[0], bc[0], off, m, tmp[0]);
    const void *b = e->nin > 1 ? eve_in(e->in[1], in[1], bc[1], off, m, tmp[1]) : NULL;
    const void *c = e->nin > 2 ? eve_in(e->in[2], in[2], bc[2], off, m, tmp[2]) : NULL;
    switch (e->op) {
    case HLO_OP_COMPARE:
      eve_cmp(eve_class_of(e->in[0]), e->cmp_type == HLO_CMPT_TOTALORDER, e->dir, a, b,
              (uint8_t *)out + off, m);
      break;
    case HLO_OP_IS_FINITE: eve_is_finite(e->in[0], a, (uint8_t *)out + off, m); break;
    case HLO_OP_CONVERT: {
      if (e->in[0] == HLO_F64 && e->out == HLO_F16) {  /* one rounding, not via f32 */
        for (int i = 0; i < m; i++) hlo_store_f64(HLO_F16, out, off + i, ((const double *)a)[i]);
        break;
      }
      void *d = eve_out(e->out, out, off, tmp[3]);
      eve_conv(eve_class_of(e->in[0]), a, e->out, d, m);
      eve_flush(e->out, out, off, d, m);
      break;
    }
    default: {
      void *d = eve_out(e->out, out, off, tmp[3]);
      eve_kernel(e, a, b, c, d, m);
      eve_flush(e->out, out, off, d, m);
      break;
    }
    }
  }
}

/* Called per element by reductions and scatter: the common reducers on f32, f64, s32 and
   s64 take a direct path; everything else goes through the chunked kernels with n = 1. */
#define EVE_FAST(T, ADD)                                                                 \
  do {                                                                                   \
    T x = ((const T *)a)[i], y = ((const T *)b)[j], *o = (T *)dst + k;                   \
    switch (op) {                                                                        \
    case HLO_OP_ADD: *o = ADD; return;                                                   \
    case HLO_OP_MAXIMUM: *o = eve_max_##T(x, y); return;                                 \
    case HLO_OP_MINIMUM: *o = eve_min_##T(x, y); return;                                 \
    default: break;                                                                      \
    }                                                                                    \
  } while (0)
#define EVE_INT_MINMAX(T)                                                                \
  static inline T eve_max_##T(T x, T y) { return x < y ? y : x; }                        \
  static inline T eve_min_##T(T x, T y) { return y < x ? y : x; }
EVE_INT_MINMAX(int32_t)
EVE_INT_MINMAX(int64_t)
static inline float eve_max_float(float x, float y) { return eve_maxf(x, y); }
static inline float eve_min_float(float x, float y) { return eve_minf(x, y); }
static inline double eve_max_double(double x, double y) { return eve_max(x, y); }
static inline double eve_min_double(double x, double y) { return eve_min(x, y); }

void hlo_eval_binary_elem(hlo_opcode op, hlo_type t, const void *a, int64_t i, const void *b,
                          int64_t j, void *dst, int64_t k) {
  switch (t) {
  case HLO_F32: EVE_FAST(float, x + y); break;
  case HLO_F64: EVE_FAST(double, x + y); break;
  case HLO_S32: EVE_FAST(int32_t, (int32_t)((uint32_t)x + (uint32_t)y)); break;
  case HLO_S64: EVE_FAST(int64_t, (int64_t)((uint64_t)x + (uint64_t)y)); break;
  default: break;
  }
  int sz = hlo_type_size(t);
  hlo_elem_op e = { .op = op, .out = t, .in = { t, t, t }, .nin = 2 };
  const void *in[2] = { (const char *)a + i * sz, (const char *)b + j * sz };
  hlo_elem_run(&e, in, NULL, (char *)dst + k * sz, 1);
}

#undef EVE_CHUNK
#undef EVE_FILL
#undef EVE_ID
#undef EVE_NARROW
#undef EVE_NZ
#undef EVE_FLOAT_HELPERS
#undef EVE_L1
#undef EVE_L2
#undef EVE_FLOAT_KERNEL
#undef EVE_CMP
#undef EVE_CONV
#undef EVE_FAST
#undef EVE_INT_MINMAX
