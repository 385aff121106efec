/* element.c — element storage: f16 and bf16 to and from f32 (round to nearest even), and
   element |i| of raw storage of any array type read and written as double, int64 or uint64
   with the conversion rules of XLA's convert (float -> int saturates, NaN -> 0). */
#include "ir.h"
#include <math.h>

/* ---- half precision ------------------------------------------------------------------------ */

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float hlo_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

uint16_t hlo_f32_to_bf16(float f) {
  uint32_t u = f2u(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

float hlo_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0x1f) return u2f(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    float v = ldexpf((float)man, -24);
    return sign ? -v : v;
  }
  return u2f(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t hlo_f32_to_f16(float f) {
  uint32_t u = f2u(f), sign = (u >> 16) & 0x8000;
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00 | ((a >> 13) & 0x3ff));
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);  /* rounds to >= 65520: inf */
  if (a < 0x38800000u) {                                    /* subnormal or zero in f16 */
    float v = u2f(a) * 16777216.0f;                         /* exact: scale by 2^24 */
    return (uint16_t)(sign | (uint32_t)nearbyintf(v));      /* ties to even (default mode) */
  }
  uint32_t r = a + 0xfffu + ((a >> 13) & 1) - (112u << 23);
  return (uint16_t)(sign | (r >> 13));
}

/* double -> f16 with one rounding (to nearest even), as IEEE conversion and NumPy do;
   going through f32 first can land on a tie and round the wrong way. */
static uint16_t f64_to_f16(double v) {
  uint16_t sign = signbit(v) ? 0x8000 : 0;
  double a = fabs(v);
  if (isnan(v)) return (uint16_t)(sign | 0x7e00);
  if (a >= 65520.0) return (uint16_t)(sign | 0x7c00);          /* rounds to inf */
  if (a < 0x1p-14) return (uint16_t)(sign | (uint16_t)nearbyint(a * 0x1p24)); /* subnormal */
  int e;
  double m = frexp(a, &e);                                      /* a = m * 2^e, m in [0.5, 1) */
  double q = nearbyint(m * 2048.0);                             /* 11 significant bits */
  if (q == 2048.0) { q = 1024.0; e++; }
  int biased = e - 1 + 15;
  if (biased >= 31) return (uint16_t)(sign | 0x7c00);
  return (uint16_t)(sign | (biased << 10) | ((uint16_t)q - 1024));
}

/* ---- typed element access --------------------------------------------------------------- */

double hlo_load_f64(hlo_type t, const void *base, int64_t i) {
  switch (t) {
  case HLO_PRED: return ((const uint8_t *)base)[i] != 0;
  case HLO_S8: return ((const int8_t *)base)[i];
  case HLO_S16: return ((const int16_t *)base)[i];
  case HLO_S32: return ((const int32_t *)base)[i];
  case HLO_S64: return (double)((const int64_t *)base)[i];
  case HLO_U8: return ((const uint8_t *)base)[i];
  case HLO_U16: return ((const uint16_t *)base)[i];
  case HLO_U32: return ((const uint32_t *)base)[i];
  case HLO_U64: return (double)((const uint64_t *)base)[i];
  case HLO_F16: return hlo_f16_to_f32(((const uint16_t *)base)[i]);
  case HLO_BF16: return hlo_bf16_to_f32(((const uint16_t *)base)[i]);
  case HLO_F32: return ((const float *)base)[i];
  case HLO_F64: return ((const double *)base)[i];
  default: return 0;
  }
}

/* Float to integer as XLA's convert does: NaN -> 0, out of range saturates. */
static int64_t f64_to_s64_sat(double v) {
  if (isnan(v)) return 0;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}

static uint64_t f64_to_u64_sat(double v) {
  if (isnan(v) || v <= 0) return 0;
  if (v >= 18446744073709551615.0) return UINT64_MAX;
  return (uint64_t)v;
}

int64_t hlo_load_s64(hlo_type t, const void *base, int64_t i) {
  switch (t) {
  case HLO_S64: return ((const int64_t *)base)[i];
  case HLO_U64: return (int64_t)((const uint64_t *)base)[i];
  case HLO_F16: case HLO_BF16: case HLO_F32: case HLO_F64:
    return f64_to_s64_sat(hlo_load_f64(t, base, i));
  default: return (int64_t)hlo_load_f64(t, base, i);
  }
}

uint64_t hlo_load_u64(hlo_type t, const void *base, int64_t i) {
  switch (t) {
  case HLO_U64: return ((const uint64_t *)base)[i];
  case HLO_S64: return (uint64_t)((const int64_t *)base)[i];
  case HLO_S8: case HLO_S16: case HLO_S32: return (uint64_t)hlo_load_s64(t, base, i);
  case HLO_F16: case HLO_BF16: case HLO_F32: case HLO_F64:
    return f64_to_u64_sat(hlo_load_f64(t, base, i));
  default: return (uint64_t)hlo_load_f64(t, base, i);
  }
}

/* Saturating store of a float into an integer type of |bits| bits. */
static int64_t sat_s(double v, int bits) {
  double hi = ldexp(1.0, bits - 1) - 1, lo = -ldexp(1.0, bits - 1);
  if (isnan(v)) return 0;
  if (v >= hi) return (int64_t)hi;
  if (v <= lo) return (int64_t)lo;
  return (int64_t)v;
}

static uint64_t sat_u(double v, int bits) {
  double hi = ldexp(1.0, bits) - 1;
  if (isnan(v) || v <= 0) return 0;
  if (v >= hi) return bits == 64 ? UINT64_MAX : (uint64_t)hi;
  return (uint64_t)v;
}

void hlo_store_f64(hlo_type t, void *base, int64_t i, double v) {
  switch (t) {
  case HLO_PRED: ((uint8_t *)base)[i] = v != 0; break;
  case HLO_S8: ((int8_t *)base)[i] = (int8_t)sat_s(v, 8); break;
  case HLO_S16: ((int16_t *)base)[i] = (int16_t)sat_s(v, 16); break;
  case HLO_S32: ((int32_t *)base)[i] = (int32_t)sat_s(v, 32); break;
  case HLO_S64: ((int64_t *)base)[i] = f64_to_s64_sat(v); break;
  case HLO_U8: ((uint8_t *)base)[i] = (uint8_t)sat_u(v, 8); break;
  case HLO_U16: ((uint16_t *)base)[i] = (uint16_t)sat_u(v, 16); break;
  case HLO_U32: ((uint32_t *)base)[i] = (uint32_t)sat_u(v, 32); break;
  case HLO_U64: ((uint64_t *)base)[i] = f64_to_u64_sat(v); break;
  /* f16 rounds once (IEEE, NumPy, LLVM's fptrunc). bf16 goes through f32, as Eigen's and
     ml_dtypes' bfloat16 do; for values computed in f32 (all but f64 sources) both agree. */
  case HLO_F16: ((uint16_t *)base)[i] = f64_to_f16(v); break;
  case HLO_BF16: ((uint16_t *)base)[i] = hlo_f32_to_bf16((float)v); break;
  case HLO_F32: ((float *)base)[i] = (float)v; break;
  case HLO_F64: ((double *)base)[i] = v; break;
  default: break;
  }
}

void hlo_store_u64(hlo_type t, void *base, int64_t i, uint64_t v) {
  switch (t) {
  case HLO_PRED: ((uint8_t *)base)[i] = v != 0; break;
  case HLO_S8: case HLO_U8: ((uint8_t *)base)[i] = (uint8_t)v; break;
  case HLO_S16: case HLO_U16: ((uint16_t *)base)[i] = (uint16_t)v; break;
  case HLO_S32: case HLO_U32: ((uint32_t *)base)[i] = (uint32_t)v; break;
  case HLO_S64: case HLO_U64: ((uint64_t *)base)[i] = v; break;
  default: hlo_store_f64(t, base, i, (double)v); break;
  }
}

void hlo_store_s64(hlo_type t, void *base, int64_t i, int64_t v) {
  if (hlo_type_is_float(t)) hlo_store_f64(t, base, i, (double)v);
  else hlo_store_u64(t, base, i, (uint64_t)v);
}
