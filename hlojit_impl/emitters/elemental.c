/* elemental.c — the elemental emitter: the value of one instruction at one multi-index, as
   straight-line LLVM IR, with exactly the evaluator's semantics (eval_elem.c). This file:
   the entry point with its cache, parameters, constants, tuples, map, scalar calls, and
   every elementwise op (unary, binary, compare, select, clamp, convert, bitcast-convert,
   copy). The index-changing ops and reduce are in elemental_index.c, the windowed ops
   (reduce-window, convolution, select-and-scatter) in elemental_window.c.

   Compute types (emit.h): pred i1, integers at their width, f16/bf16/f32 float, f64 double.
   Each f16/bf16 op result is rounded to its type right away (emitp_round), because the
   evaluator stores every op's result: add(add(a, b), c) in bf16 rounds twice here too.

   Worked example: fusion { p0 = bf16[4,8] parameter(0); c = bf16[] constant(1);
   b = bf16[4,8] broadcast(c); ROOT a = bf16[4,8] add(p0, b) } at index (i, j):
     a -> operands at (i, j): p0 -> load i16 at i*8+j, zext, shl 16, bitcast float;
          b -> broadcast maps (i, j) to () -> c -> float 1.0;
     fadd, then the bf16 rounding sequence (emitp_round), cached as (a, (i, j)).

   Integer semantics (XLA's evaluator): x/0 = -1 (signed) or all ones, INT_MIN/-1 = INT_MIN,
   x%0 = x, INT_MIN%-1 = 0; x^-n = 0 except 1^-n = 1 and (-1)^-n = +-1 (eval_elem.c);
   shift amounts are unsigned, >= width gives 0 or the sign; no
   branches: divisors are made safe with selects. pred arithmetic follows the evaluator,
   which computes pred as 8-bit unsigned and stores x != 0 (add = or, multiply = and...). */
#include "emit_internal.h"

static int ele_bits(hlo_type t) { return t == HLO_PRED ? 1 : 8 * hlo_type_size(t); }

/* ---- bits, rounding, conversion ------------------------------------------------------------ */

LLVMValueRef emitp_round(emit_fn *f, hlo_type t, LLVMValueRef v) {
  if (t == HLO_F16 || t == HLO_BF16) return emitp_from_bits(f, t, emitp_to_bits(f, t, v));
  return v;
}

/* double -> f16 with ONE rounding (the evaluator's f64_to_f16): round to odd into float
   (truncate, then set the last bit when inexact), then float -> half rounds to nearest
   even; with 13 extra bits the two steps give the directly rounded result. This also keeps
   away from __truncdfhf2, which the JIT does not provide. */
static LLVMValueRef ele_f64_to_f16(emit_fn *f, LLVMValueRef d) {
  emit_module *em = f->em;
  LLVMBuilderRef b = em->b;
  LLVMValueRef x = LLVMBuildFPTrunc(b, d, em->t_f32, "");
  LLVMValueRef back = LLVMBuildFPExt(b, x, em->t_f64, "");
  LLVMValueRef inexact = LLVMBuildFCmp(b, LLVMRealUNE, back, d, "");
  LLVMTypeRef t64 = em->t_f64;
  LLVMValueRef ab = emitp_intrinsic(f, "llvm.fabs", &t64, 1, &back, 1);
  LLVMValueRef ad = emitp_intrinsic(f, "llvm.fabs", &t64, 1, &d, 1);
  LLVMValueRef away = LLVMBuildFCmp(b, LLVMRealOGT, ab, ad, "");
  LLVMValueRef bits = LLVMBuildBitCast(b, x, em->t_i32, "");
  LLVMValueRef tz = LLVMBuildSelect(b, away, LLVMBuildSub(b, bits, emit_ci(em->t_i32, 1), ""), bits, "");
  LLVMValueRef odd = LLVMBuildSelect(b, inexact, LLVMBuildOr(b, tz, emit_ci(em->t_i32, 1), ""), bits, "");
  return emitp_round(f, HLO_F16, LLVMBuildBitCast(b, odd, em->t_f32, ""));
}

static bool ele_is_f(hlo_type t) { return hlo_type_is_float(t); }
static bool ele_is_s(hlo_type t) { return hlo_type_class_of(t) == HLO_CLASS_SINT; }

LLVMValueRef emitp_convert(emit_fn *f, LLVMValueRef v, hlo_type from, hlo_type to) {
  emit_module *em = f->em;
  LLVMBuilderRef b = em->b;
  if (from == to) return v;
  LLVMTypeRef ct = emit_compute_type(em, to), ft = emit_compute_type(em, from);
  if (ele_is_f(from)) {
    if (ele_is_f(to)) {
      if (from == HLO_F64 && to == HLO_F16) return ele_f64_to_f16(f, v);
      LLVMValueRef x = v;
      if (ft != ct) x = from == HLO_F64 ? LLVMBuildFPTrunc(b, v, ct, "") : LLVMBuildFPExt(b, v, ct, "");
      return emitp_round(f, to, x);
    }
    if (to == HLO_PRED) return LLVMBuildFCmp(b, LLVMRealUNE, v, emit_cf(ft, 0.0), "");
    LLVMTypeRef tys[2] = { ct, ft };
    return emitp_intrinsic(f, ele_is_s(to) ? "llvm.fptosi.sat" : "llvm.fptoui.sat", tys, 2, &v, 1);
  }
  bool sfrom = ele_is_s(from);
  if (ele_is_f(to)) {
    LLVMValueRef x = sfrom ? LLVMBuildSIToFP(b, v, ct, "") : LLVMBuildUIToFP(b, v, ct, "");
    return emitp_round(f, to, x);
  }
  if (to == HLO_PRED) return LLVMBuildICmp(b, LLVMIntNE, v, emit_ci(ft, 0), "");
  int fb = ele_bits(from), tb = ele_bits(to);
  if (tb == fb) return v;
  if (tb < fb) return LLVMBuildTrunc(b, v, ct, "");
  return sfrom ? LLVMBuildSExt(b, v, ct, "") : LLVMBuildZExt(b, v, ct, "");
}

LLVMValueRef emitp_index_value(emit_fn *f, LLVMValueRef v, hlo_type t) {
  emit_module *em = f->em;
  LLVMBuilderRef b = em->b;
  if (t == HLO_U64) {
    LLVMValueRef neg = LLVMBuildICmp(b, LLVMIntSLT, v, emit_ci(em->t_i64, 0), "");
    return LLVMBuildSelect(b, neg, emit_ci(em->t_i64, INT64_MAX), v, "");
  }
  if (t == HLO_S64) return v;
  if (ele_is_s(t)) return LLVMBuildSExt(b, v, em->t_i64, "");
  return LLVMBuildZExt(b, v, em->t_i64, "");
}

/* ---- float ops ---------------------------------------------------------------------------- */

static LLVMValueRef ele_fintr(emit_fn *f, const char *name, LLVMValueRef x) {
  LLVMTypeRef t = LLVMTypeOf(x);
  return emitp_intrinsic(f, name, &t, 1, &x, 1);
}

static LLVMValueRef ele_isnan(emit_fn *f, LLVMValueRef x) {
  return LLVMBuildFCmp(f->em->b, LLVMRealUNO, x, x, "");
}

/* maximum/minimum: a NaN operand (lhs first), else the lhs on ties (std::max/min). */
static LLVMValueRef ele_fmaxmin(emit_fn *f, bool max, LLVMValueRef x, LLVMValueRef y) {
  LLVMBuilderRef b = f->em->b;
  LLVMValueRef pick_y = max ? LLVMBuildFCmp(b, LLVMRealOLT, x, y, "") : LLVMBuildFCmp(b, LLVMRealOLT, y, x, "");
  LLVMValueRef r = LLVMBuildSelect(b, pick_y, y, x, "");
  r = LLVMBuildSelect(b, ele_isnan(f, y), y, r, "");
  return LLVMBuildSelect(b, ele_isnan(f, x), x, r, "");
}

static LLVMValueRef ele_fclamp(emit_fn *f, LLVMValueRef lo, LLVMValueRef x, LLVMValueRef hi) {
  LLVMBuilderRef b = f->em->b;
  LLVMValueRef m = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, x, lo, ""), lo, x, "");
  m = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, m, hi, ""), m, hi, "");
  m = LLVMBuildSelect(b, ele_isnan(f, hi), hi, m, "");
  m = LLVMBuildSelect(b, ele_isnan(f, x), x, m, "");
  return LLVMBuildSelect(b, ele_isnan(f, lo), lo, m, "");
}

static LLVMValueRef ele_float(emit_fn *f, hlo_opcode op, LLVMValueRef *v) {
  LLVMBuilderRef b = f->em->b;
  LLVMValueRef x = v[0], y = v[1];
  LLVMTypeRef t = LLVMTypeOf(x);
  if (emitp_math_handles(op))
    return hlo_opcode_kind(op) == HLO_KIND_BINARY ? emit_math_binary(f, op, x, y) : emit_math_unary(f, op, x);
  switch (op) {
  case HLO_OP_ABS: return ele_fintr(f, "llvm.fabs", x);
  case HLO_OP_NEGATE: return LLVMBuildFNeg(b, x, "");
  case HLO_OP_SQRT: return ele_fintr(f, "llvm.sqrt", x);
  case HLO_OP_RSQRT: return LLVMBuildFDiv(b, emit_cf(t, 1.0), ele_fintr(f, "llvm.sqrt", x), "");
  case HLO_OP_FLOOR: return ele_fintr(f, "llvm.floor", x);
  case HLO_OP_CEIL: return ele_fintr(f, "llvm.ceil", x);
  case HLO_OP_ROUND_EVEN: return ele_fintr(f, "llvm.roundeven", x);
  case HLO_OP_ROUND_AFZ: return ele_fintr(f, "llvm.round", x);
  case HLO_OP_SIGN: {   /* NaN stays, ±0 stays, else ±1 */
    LLVMValueRef nz = LLVMBuildFCmp(b, LLVMRealONE, x, emit_cf(t, 0.0), "");
    LLVMValueRef one = LLVMBuildSelect(b, nz, emit_cf(t, 1.0), emit_cf(t, 0.0), "");
    LLVMTypeRef tys[1] = { t };
    LLVMValueRef args[2] = { one, x };
    LLVMValueRef s = emitp_intrinsic(f, "llvm.copysign", tys, 1, args, 2);
    return LLVMBuildSelect(b, ele_isnan(f, x), x, s, "");
  }
  case HLO_OP_ADD: return LLVMBuildFAdd(b, x, y, "");
  case HLO_OP_SUBTRACT: return LLVMBuildFSub(b, x, y, "");
  case HLO_OP_MULTIPLY: return LLVMBuildFMul(b, x, y, "");
  case HLO_OP_DIVIDE: return LLVMBuildFDiv(b, x, y, "");
  case HLO_OP_REMAINDER: return LLVMBuildFRem(b, x, y, "");
  case HLO_OP_MAXIMUM: return ele_fmaxmin(f, true, x, y);
  case HLO_OP_MINIMUM: return ele_fmaxmin(f, false, x, y);
  case HLO_OP_CLAMP: return ele_fclamp(f, v[0], v[1], v[2]);
  default:
    emit_fail(f, HJ_ERR_UNSUPPORTED, "op '%s' on floats", hlo_opcode_name(op));
    return LLVMGetUndef(t);
  }
}

/* reduce-precision on the storage bits of |t|, as eval_elem.c's eve_reduce_precision. */
static LLVMValueRef ele_reduce_precision(emit_fn *f, hlo_type t, LLVMValueRef x, int eb, int mb) {
  LLVMBuilderRef b = f->em->b;
  LLVMValueRef v = emitp_to_bits(f, t, x), r = v;
  LLVMTypeRef it = LLVMTypeOf(v);
  int width = 8 * hlo_type_size(t), sm = t == HLO_F16 ? 10 : t == HLO_BF16 ? 7 : t == HLO_F32 ? 23 : 52;
  int se = width - 1 - sm;
  uint64_t expm = ((1ull << se) - 1) << sm, sign = 1ull << (width - 1);
  LLVMValueRef cexp = LLVMConstInt(it, expm, 0);
  if (mb < sm) {
    uint64_t last = 1ull << (sm - mb);
    LLVMValueRef lastbit = LLVMBuildLShr(b, LLVMBuildAnd(b, r, LLVMConstInt(it, last, 0), ""),
                                         LLVMConstInt(it, (unsigned)(sm - mb), 0), "");
    LLVMValueRef bias = LLVMBuildAdd(b, lastbit, LLVMConstInt(it, (last >> 1) - 1, 0), "");
    r = LLVMBuildAnd(b, LLVMBuildAdd(b, r, bias, ""), LLVMConstInt(it, ~(last - 1), 0), "");
  }
  if (eb < se) {
    uint64_t bias = (1ull << (se - 1)) - 1, rbias = (1ull << (eb - 1)) - 1;
    LLVMValueRef xe = LLVMBuildAnd(b, r, cexp, "");
    LLVMValueRef szero = LLVMBuildAnd(b, r, LLVMConstInt(it, sign, 0), "");
    LLVMValueRef over = LLVMBuildICmp(b, LLVMIntUGT, xe, LLVMConstInt(it, (bias + rbias) << sm, 0), "");
    LLVMValueRef under = LLVMBuildICmp(b, LLVMIntULE, xe, LLVMConstInt(it, (bias - rbias) << sm, 0), "");
    r = LLVMBuildSelect(b, over, LLVMBuildOr(b, szero, cexp, ""), r, "");
    r = LLVMBuildSelect(b, under, szero, r, "");
  }
  LLVMValueRef nan = LLVMBuildFCmp(b, LLVMRealUNO, x, x, "");
  r = LLVMBuildSelect(b, nan, v, r, "");
  return emitp_from_bits(f, t, r);
}

/* ---- integer ops --------------------------------------------------------------------------- */

/* x^y mod 2^N by square-and-multiply over the |nb| low bits of y, unrolled (no branches). */
static LLVMValueRef ele_ipow(emit_fn *f, LLVMValueRef x, LLVMValueRef y, int nb) {
  LLVMBuilderRef b = f->em->b;
  LLVMTypeRef t = LLVMTypeOf(x);
  LLVMValueRef r = emit_ci(t, 1), base = x;
  for (int i = 0; i < nb; i++) {
    LLVMValueRef bit = LLVMBuildTrunc(b, LLVMBuildLShr(b, y, emit_ci(t, i), ""), f->em->t_i1, "");
    r = LLVMBuildSelect(b, bit, LLVMBuildMul(b, r, base, ""), r, "");
    if (i + 1 < nb) base = LLVMBuildMul(b, base, base, "");
  }
  return r;
}

static LLVMValueRef ele_imaxmin(emit_fn *f, bool max, bool s, LLVMValueRef x, LLVMValueRef y) {
  LLVMBuilderRef b = f->em->b;
  LLVMIntPredicate lt = s ? LLVMIntSLT : LLVMIntULT;
  LLVMValueRef c = max ? LLVMBuildICmp(b, lt, x, y, "") : LLVMBuildICmp(b, lt, y, x, "");
  return LLVMBuildSelect(b, c, y, x, "");
}

static LLVMValueRef ele_int(emit_fn *f, hlo_opcode op, bool s, int n, LLVMValueRef *v) {
  LLVMBuilderRef b = f->em->b;
  LLVMValueRef x = v[0], y = v[1];
  LLVMTypeRef t = LLVMTypeOf(x);
  LLVMValueRef zero = emit_ci(t, 0), one = emit_ci(t, 1), m1 = emit_ci(t, -1);
  LLVMValueRef imin = LLVMConstInt(t, 1ull << (n - 1), 0);
  switch (op) {
  case HLO_OP_ABS:
    return s ? LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, x, zero, ""), LLVMBuildSub(b, zero, x, ""), x, "") : x;
  case HLO_OP_NEGATE: return LLVMBuildSub(b, zero, x, "");
  case HLO_OP_SIGN:
    if (!s) return LLVMBuildZExt(b, LLVMBuildICmp(b, LLVMIntNE, x, zero, ""), t, "");
    return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, x, zero, ""), one,
                           LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, x, zero, ""), m1, zero, ""), "");
  case HLO_OP_NOT: return LLVMBuildNot(b, x, "");
  case HLO_OP_POPCNT: return ele_fintr(f, "llvm.ctpop", x);
  case HLO_OP_CLZ: {
    LLVMValueRef args[2] = { x, LLVMConstInt(f->em->t_i1, 0, 0) };
    return emitp_intrinsic(f, "llvm.ctlz", &t, 1, args, 2);
  }
  case HLO_OP_ADD: return LLVMBuildAdd(b, x, y, "");
  case HLO_OP_SUBTRACT: return LLVMBuildSub(b, x, y, "");
  case HLO_OP_MULTIPLY: return LLVMBuildMul(b, x, y, "");
  case HLO_OP_DIVIDE: case HLO_OP_REMAINDER: {
    LLVMValueRef y0 = LLVMBuildICmp(b, LLVMIntEQ, y, zero, "");
    LLVMValueRef bad = y0;
    if (s) bad = LLVMBuildOr(b, y0, LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, x, imin, ""),
                                                 LLVMBuildICmp(b, LLVMIntEQ, y, m1, ""), ""), "");
    LLVMValueRef sy = LLVMBuildSelect(b, bad, one, y, "");
    if (op == HLO_OP_DIVIDE) {
      LLVMValueRef q = s ? LLVMBuildSDiv(b, x, sy, "") : LLVMBuildUDiv(b, x, sy, "");
      return LLVMBuildSelect(b, y0, m1, q, "");   /* INT_MIN/-1: x/1 = INT_MIN */
    }
    LLVMValueRef r = s ? LLVMBuildSRem(b, x, sy, "") : LLVMBuildURem(b, x, sy, "");
    return LLVMBuildSelect(b, y0, x, r, "");      /* INT_MIN%-1: x%1 = 0 */
  }
  case HLO_OP_POWER: {   /* x^-n = 1/x^n: 0, except base -1 (+-1 by parity) and base 1 */
    LLVMValueRef p = ele_ipow(f, x, y, s ? n - 1 : n);
    if (s) {
      LLVMValueRef odd = LLVMBuildTrunc(b, y, f->em->t_i1, "");
      LLVMValueRef neg1 = LLVMBuildSelect(b, odd, m1, one, "");
      LLVMValueRef inv = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, x, m1, ""), neg1, zero, "");
      p = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, y, zero, ""), inv, p, "");
    }
    LLVMValueRef trivial = LLVMBuildOr(b, LLVMBuildICmp(b, LLVMIntEQ, x, one, ""),
                                       LLVMBuildICmp(b, LLVMIntEQ, y, zero, ""), "");
    return LLVMBuildSelect(b, trivial, one, p, "");
  }
  case HLO_OP_MAXIMUM: return ele_imaxmin(f, true, s, x, y);
  case HLO_OP_MINIMUM: return ele_imaxmin(f, false, s, x, y);
  case HLO_OP_AND: return LLVMBuildAnd(b, x, y, "");
  case HLO_OP_OR: return LLVMBuildOr(b, x, y, "");
  case HLO_OP_XOR: return LLVMBuildXor(b, x, y, "");
  case HLO_OP_SHL: case HLO_OP_SHRL: case HLO_OP_SHRA: {
    LLVMValueRef big = LLVMBuildICmp(b, LLVMIntUGE, y, emit_ci(t, n), "");
    if (op == HLO_OP_SHRA)   /* >= width: the sign, which is ashr by n-1 */
      return LLVMBuildAShr(b, x, LLVMBuildSelect(b, big, emit_ci(t, n - 1), y, ""), "");
    LLVMValueRef sy = LLVMBuildSelect(b, big, zero, y, "");
    LLVMValueRef r = op == HLO_OP_SHL ? LLVMBuildShl(b, x, sy, "") : LLVMBuildLShr(b, x, sy, "");
    return LLVMBuildSelect(b, big, zero, r, "");
  }
  case HLO_OP_CLAMP: {   /* (lo, x, hi): min(max(x, lo), hi) with the evaluator's operand order */
    LLVMIntPredicate lt = s ? LLVMIntSLT : LLVMIntULT;
    LLVMValueRef lo = v[0], xx = v[1], hi = v[2];
    LLVMValueRef m = LLVMBuildSelect(b, LLVMBuildICmp(b, lt, xx, lo, ""), lo, xx, "");
    return LLVMBuildSelect(b, LLVMBuildICmp(b, lt, m, hi, ""), m, hi, "");
  }
  default:
    emit_fail(f, HJ_ERR_UNSUPPORTED, "op '%s' on integers", hlo_opcode_name(op));
    return LLVMGetUndef(t);
  }
}

/* pred as the evaluator computes it: 8-bit unsigned 0/1, result stored as != 0. */
static LLVMValueRef ele_pred(emit_fn *f, hlo_opcode op, LLVMValueRef *v) {
  LLVMBuilderRef b = f->em->b;
  LLVMValueRef x = v[0], y = v[1];
  switch (op) {
  case HLO_OP_ABS: case HLO_OP_NEGATE: case HLO_OP_SIGN: return x;
  case HLO_OP_NOT: return LLVMBuildNot(b, x, "");
  case HLO_OP_ADD: case HLO_OP_OR: case HLO_OP_MAXIMUM: return LLVMBuildOr(b, x, y, "");
  case HLO_OP_SUBTRACT: case HLO_OP_XOR: return LLVMBuildXor(b, x, y, "");
  case HLO_OP_MULTIPLY: case HLO_OP_AND: case HLO_OP_MINIMUM: return LLVMBuildAnd(b, x, y, "");
  case HLO_OP_DIVIDE: case HLO_OP_POWER: return LLVMBuildOr(b, x, LLVMBuildNot(b, y, ""), "");
  case HLO_OP_REMAINDER: case HLO_OP_SHRA: case HLO_OP_SHRL:
    return LLVMBuildAnd(b, x, LLVMBuildNot(b, y, ""), "");
  case HLO_OP_SHL: return x;
  case HLO_OP_CLAMP: return LLVMBuildAnd(b, LLVMBuildOr(b, v[0], v[1], ""), v[2], "");
  default:
    emit_fail(f, HJ_ERR_UNSUPPORTED, "op '%s' on pred", hlo_opcode_name(op));
    return LLVMGetUndef(f->em->t_i1);
  }
}

/* ---- compare ------------------------------------------------------------------------------ */

/* Total-order key: the float's bits as a signed integer, negatives flipped (eval_elem.c). */
static LLVMValueRef ele_total_key(emit_fn *f, LLVMValueRef x) {
  LLVMBuilderRef b = f->em->b;
  bool dbl = LLVMTypeOf(x) == f->em->t_f64;
  LLVMTypeRef it = dbl ? f->em->t_i64 : f->em->t_i32;
  LLVMValueRef k = LLVMBuildBitCast(b, x, it, "");
  LLVMValueRef flip = LLVMBuildXor(b, k, dbl ? emit_ci(it, INT64_MAX) : emit_ci(it, 0x7fffffff), "");
  return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, k, emit_ci(it, 0), ""), flip, k, "");
}

static LLVMValueRef ele_compare(emit_fn *f, const hlo_instr *ins, hlo_type t, LLVMValueRef x,
                                LLVMValueRef y) {
  LLVMBuilderRef b = f->em->b;
  static const LLVMRealPredicate fp[HLO_CMP_COUNT] = { LLVMRealOEQ, LLVMRealUNE, LLVMRealOLT,
                                                       LLVMRealOLE, LLVMRealOGT, LLVMRealOGE };
  static const LLVMIntPredicate sp[HLO_CMP_COUNT] = { LLVMIntEQ, LLVMIntNE, LLVMIntSLT,
                                                      LLVMIntSLE, LLVMIntSGT, LLVMIntSGE };
  static const LLVMIntPredicate up[HLO_CMP_COUNT] = { LLVMIntEQ, LLVMIntNE, LLVMIntULT,
                                                      LLVMIntULE, LLVMIntUGT, LLVMIntUGE };
  hlo_cmp_dir d = ins->cmp_dir;
  if ((unsigned)d >= HLO_CMP_COUNT) {
    emit_fail(f, HJ_ERR_SHAPE, "compare '%s': bad direction", ins->name);
    return LLVMGetUndef(f->em->t_i1);
  }
  if (ele_is_f(t)) {
    if (ins->cmp_type == HLO_CMPT_TOTALORDER)
      return LLVMBuildICmp(b, sp[d], ele_total_key(f, x), ele_total_key(f, y), "");
    return LLVMBuildFCmp(b, fp[d], x, y, "");
  }
  return LLVMBuildICmp(b, ele_is_s(t) ? sp[d] : up[d], x, y, "");
}

/* ---- the elementwise dispatcher ------------------------------------------------------------ */

LLVMValueRef emitp_operand(emit_fn *f, const hlo_instr *ins, int k, const emit_index *idx) {
  const hlo_instr *o = ins->operands[k];
  const hlo_shape *os = &o->shape;
  if (!hlo_shape_is_array(os)) {
    emit_fail(f, HJ_ERR_UNSUPPORTED, "op '%s' (%s): operand %d is not an array",
              hlo_opcode_name(ins->op), ins->name, k);
    return emitp_undef(f, &ins->shape);
  }
  bool same = os->rank == idx->rank;
  for (int d = 0; same && d < os->rank; d++) same = os->dims[d] == ins->shape.dims[d];
  if (same) return emit_elemental(f, o, idx);
  if (hlo_shape_numel(os) == 1) {
    emit_index z;
    emitp_zero_index(f, os->rank, &z);
    return emit_elemental(f, o, &z);
  }
  char b1[128], b2[128];
  emit_fail(f, HJ_ERR_SHAPE, "op '%s' (%s): operand %d %s does not fit result %s",
            hlo_opcode_name(ins->op), ins->name, k, hlo_shape_str(os, b1, sizeof b1),
            hlo_shape_str(&ins->shape, b2, sizeof b2));
  return emitp_undef(f, os);
}

static LLVMValueRef ele_elementwise(emit_fn *f, const hlo_instr *ins, const hlo_elem_op *e,
                                    const emit_index *idx) {
  const char *why = hlo_elem_unsupported(e);
  if (why) {
    emit_fail(f, HJ_ERR_SHAPE, "op '%s' (%s): %s", hlo_opcode_name(ins->op), ins->name, why);
    return emitp_undef(f, &ins->shape);
  }
  LLVMValueRef v[3] = { NULL, NULL, NULL };
  for (int k = 0; k < e->nin; k++) v[k] = emitp_operand(f, ins, k, idx);
  LLVMBuilderRef b = f->em->b;
  hlo_type t = e->out, t0 = e->in[0];
  switch (e->op) {
  case HLO_OP_COMPARE: return ele_compare(f, ins, t0, v[0], v[1]);
  case HLO_OP_SELECT: return LLVMBuildSelect(b, v[0], v[1], v[2], "");
  case HLO_OP_CONVERT: return emitp_convert(f, v[0], t0, t);
  case HLO_OP_BITCAST_CONVERT:
    if (t0 == t) return v[0];
    return emitp_from_bits(f, t, emitp_to_bits(f, t0, v[0]));
  case HLO_OP_COPY: return v[0];
  case HLO_OP_REDUCE_PRECISION: return ele_reduce_precision(f, t, v[0], e->exponent_bits, e->mantissa_bits);
  case HLO_OP_IS_FINITE: {
    LLVMValueRef a = ele_fintr(f, "llvm.fabs", v[0]);
    LLVMTypeRef ft = LLVMTypeOf(a);
    return LLVMBuildFCmp(b, LLVMRealOLT, a, emit_cf(ft, __builtin_inf()), "");
  }
  default: break;
  }
  if (ele_is_f(t)) return emitp_round(f, t, ele_float(f, e->op, v));
  if (t == HLO_PRED) return ele_pred(f, e->op, v);
  return ele_int(f, e->op, ele_is_s(t), ele_bits(t), v);
}

/* bitcast-convert between widths: f32[N] <-> u8[N,4] and the like, little endian. */
static LLVMValueRef ele_bitcast_convert_wide(emit_fn *f, const hlo_instr *ins, const emit_index *idx) {
  LLVMBuilderRef b = f->em->b;
  const hlo_instr *o = ins->operands[0];
  hlo_type ti = o->shape.type, to = ins->shape.type;
  int si = hlo_type_size(ti), so = hlo_type_size(to);
  if (!hlo_shape_is_array(&o->shape) || si == 0 || so == 0) {
    emit_fail(f, HJ_ERR_UNSUPPORTED, "bitcast-convert '%s': not arrays", ins->name);
    return emitp_undef(f, &ins->shape);
  }
  LLVMTypeRef ot = LLVMIntTypeInContext(f->em->llctx, (unsigned)so * 8);
  emit_index j = *idx;
  if (so < si) {   /* the last result dim walks the pieces of one operand element */
    j.rank = idx->rank - 1;
    LLVMValueRef bits = emitp_to_bits(f, ti, emit_elemental(f, o, &j));
    LLVMTypeRef bt = LLVMTypeOf(bits);
    LLVMValueRef sh = LLVMBuildMul(b, idx->v[idx->rank - 1], emit_i64(f, so * 8), "");
    if (bt != f->em->t_i64) sh = LLVMBuildTrunc(b, sh, bt, "");
    return emitp_from_bits(f, to, LLVMBuildTrunc(b, LLVMBuildLShr(b, bits, sh, ""), ot, ""));
  }
  j.rank = idx->rank + 1;
  LLVMValueRef acc = LLVMConstInt(ot, 0, 0);
  for (int k = 0; k < so / si; k++) {
    j.v[idx->rank] = emit_i64(f, k);
    LLVMValueRef bits = emitp_to_bits(f, ti, emit_elemental(f, o, &j));
    bits = LLVMBuildShl(b, LLVMBuildZExt(b, bits, ot, ""), LLVMConstInt(ot, (unsigned long long)k * si * 8, 0), "");
    acc = LLVMBuildOr(b, acc, bits, "");
  }
  return emitp_from_bits(f, to, acc);
}

/* ---- parameters, constants, tuples, map ------------------------------------------------------ */

static LLVMValueRef ele_param(emit_fn *f, const hlo_instr *ins, const emit_index *idx) {
  if (ins->parent != f->comp || ins->index < 0 || ins->index >= f->nparams ||
      !hlo_shape_is_array(&ins->shape)) {
    emit_fail(f, HJ_ERR_UNSUPPORTED, "parameter '%s' (%lld of '%s') is not an array operand "
              "of the fusion", ins->name, (long long)ins->index, ins->parent ? ins->parent->name : "?");
    return emitp_undef(f, &ins->shape);
  }
  return emit_load_elem(f, ins->shape.type, f->params[ins->index], emit_linear_index(f, &ins->shape, idx));
}

static LLVMValueRef ele_scalar_const(emit_fn *f, hlo_type t, const uint8_t *data) {
  emit_module *em = f->em;
  uint64_t u = 0;
  switch (t) {
  case HLO_PRED: return LLVMConstInt(em->t_i1, data[0] != 0, 0);
  case HLO_F16: case HLO_BF16: {
    uint16_t h;
    memcpy(&h, data, 2);
    float x = t == HLO_F16 ? hlo_f16_to_f32(h) : hlo_bf16_to_f32(h);
    uint32_t bits;
    memcpy(&bits, &x, 4);
    return LLVMConstBitCast(LLVMConstInt(em->t_i32, bits, 0), em->t_f32);
  }
  case HLO_F32: {
    uint32_t bits;
    memcpy(&bits, data, 4);
    return LLVMConstBitCast(LLVMConstInt(em->t_i32, bits, 0), em->t_f32);
  }
  case HLO_F64:
    memcpy(&u, data, 8);
    return LLVMConstBitCast(LLVMConstInt(em->t_i64, u, 0), em->t_f64);
  default:
    u = hlo_load_u64(t, data, 0);
    return LLVMConstInt(emit_compute_type(em, t), u, 0);
  }
}

/* An array constant: a private global holding the literal's bytes, read like a buffer. */
static LLVMValueRef ele_constant(emit_fn *f, const hlo_instr *ins, const emit_index *idx) {
  const hlo_literal *l = ins->literal;
  const hlo_shape *s = &ins->shape;
  if (!l || !hlo_shape_is_array(s) || !l->data || l->nbytes != hlo_shape_bytes(s)) {
    emit_fail(f, HJ_ERR_UNSUPPORTED, "constant '%s': no array literal of its shape", ins->name);
    return emitp_undef(f, s);
  }
  if (hlo_shape_numel(s) == 1) return ele_scalar_const(f, s->type, l->data);
  emit_module *em = f->em;
  char name[256];
  size_t len = 0;
  snprintf(name, sizeof name, "%s.const%d", LLVMGetValueName2(f->fn, &len), ins->id);
  LLVMValueRef g = LLVMGetNamedGlobal(em->mod, name);
  if (!g) {
    LLVMValueRef init = LLVMConstStringInContext2(em->llctx, (const char *)l->data, (size_t)l->nbytes, 1);
    g = LLVMAddGlobal(em->mod, LLVMTypeOf(init), name);
    LLVMSetInitializer(g, init);
    LLVMSetGlobalConstant(g, 1);
    LLVMSetLinkage(g, LLVMPrivateLinkage);
    LLVMSetUnnamedAddress(g, LLVMGlobalUnnamedAddr);
    LLVMSetAlignment(g, 64);
  }
  return emit_load_elem(f, s->type, g, emit_linear_index(f, s, idx));
}

/* The instruction that is element |k| of tuple-valued |t|, when the IR says which. */
static const hlo_instr *ele_tuple_source(const hlo_instr *t, int64_t k) {
  for (int depth = 0; t && depth < 64; depth++) {
    if (t->op == HLO_OP_TUPLE) return k >= 0 && k < t->noperands ? t->operands[k] : NULL;
    if (t->op == HLO_OP_OPT_BARRIER) { t = t->operands[0]; continue; }
    if (t->op == HLO_OP_GET_TUPLE_ELEMENT) { t = ele_tuple_source(t->operands[0], t->index); continue; }
    return NULL;
  }
  return NULL;
}

static LLVMValueRef ele_gte(emit_fn *f, const hlo_instr *ins, const emit_index *idx) {
  const hlo_instr *t = ins->operands[0];
  const hlo_instr *src = ele_tuple_source(t, ins->index);
  if (src) return emit_elemental(f, src, idx);
  while (t->op == HLO_OP_OPT_BARRIER) t = t->operands[0];
  if (t->op == HLO_OP_REDUCE || t->op == HLO_OP_REDUCE_WINDOW) return emitp_reduce(f, t, (int)ins->index, idx);
  emit_fail(f, HJ_ERR_UNSUPPORTED, "get-tuple-element '%s' of '%s' (%s): element not known",
            ins->name, t->name, hlo_opcode_name(t->op));
  return emitp_undef(f, &ins->shape);
}

static LLVMValueRef ele_map(emit_fn *f, const hlo_instr *ins, const emit_index *idx) {
  LLVMValueRef args[16], r = NULL;
  if (ins->ncalls != 1 || ins->noperands > 16 || !hlo_shape_is_array(&ins->shape)) {
    emit_fail(f, HJ_ERR_UNSUPPORTED, "map '%s': needs one computation, at most 16 operands", ins->name);
    return emitp_undef(f, &ins->shape);
  }
  for (int k = 0; k < ins->noperands; k++) args[k] = emitp_operand(f, ins, k, idx);
  emit_scalar_call(f, ins->calls[0], args, ins->noperands, &r, 1);
  return r;
}

void emit_scalar_call(emit_fn *f, const hlo_comp *c, LLVMValueRef *args, int n,
                      LLVMValueRef *results, int nout) {
  emit_index z = { 0 };
  ptrdiff_t mark = emitp_cache_mark(f);
  for (int k = 0; k < n && k < (int)arrlen(c->params); k++)
    if (c->params[k]) emitp_cache_put(f, c->params[k], 0, &z, args[k]);
  const hlo_instr *r = c->root;
  if (n != (int)arrlen(c->params) || !r) {
    emit_fail(f, HJ_ERR_SHAPE, "computation '%s' takes %d parameters, called with %d", c->name,
              (int)arrlen(c->params), n);
  }
  for (int k = 0; k < nout; k++) {
    const hlo_instr *e = !r ? NULL : r->op == HLO_OP_TUPLE ? (k < r->noperands ? r->operands[k] : NULL)
                                                           : (k == 0 ? r : NULL);
    if (!e || !hlo_shape_is_array(&e->shape) || e->shape.rank != 0) {
      emit_fail(f, HJ_ERR_UNSUPPORTED, "computation '%s': result %d is not a scalar", c->name, k);
      results[k] = LLVMGetUndef(args && n ? LLVMTypeOf(args[0]) : f->em->t_i1);
      continue;
    }
    results[k] = emit_elemental(f, e, &z);
  }
  emitp_cache_pop(f, mark);
}

/* ---- the entry point --------------------------------------------------------------------- */

static LLVMValueRef ele_emit(emit_fn *f, const hlo_instr *ins, const emit_index *idx) {
  hlo_elem_op e;
  switch (ins->op) {
  case HLO_OP_PARAMETER: return ele_param(f, ins, idx);
  case HLO_OP_CONSTANT: return ele_constant(f, ins, idx);
  case HLO_OP_GET_TUPLE_ELEMENT: return ele_gte(f, ins, idx);
  case HLO_OP_MAP: return ele_map(f, ins, idx);
  case HLO_OP_OPT_BARRIER:
    if (hlo_shape_is_array(&ins->shape)) return emit_elemental(f, ins->operands[0], idx);
    break;
  case HLO_OP_BITCAST_CONVERT:
    if (hlo_shape_is_array(&ins->operands[0]->shape) &&
        hlo_type_size(ins->operands[0]->shape.type) != hlo_type_size(ins->shape.type))
      return ele_bitcast_convert_wide(f, ins, idx);
    break;
  default: break;
  }
  if (hlo_elem_op_of(ins, &e)) return ele_elementwise(f, ins, &e, idx);
  LLVMValueRef v = emitp_index_op(f, ins, idx);
  if (!v) v = emitp_window_op(f, ins, idx);
  if (v) return v;
  emit_fail(f, HJ_ERR_UNSUPPORTED, "op '%s' (%s) has no elemental form", hlo_opcode_name(ins->op),
            ins->name);
  return emitp_undef(f, &ins->shape);
}

LLVMValueRef emit_elemental(emit_fn *f, const hlo_instr *ins, const emit_index *idx) {
  if (f->override_ins && ins == f->override_ins) return f->override_val;
  for (int i = 0; i < f->noverrides; i++)   /* reduction.c: several reduces of a row */
    if (ins == f->override_ins2[i]) return f->override_val2[i];
  LLVMValueRef v = emitp_cache_get(f, ins, 0, idx);
  if (v) return v;
  v = ele_emit(f, ins, idx);
  emitp_cache_put(f, ins, 0, idx, v);
  return v;
}
