/* elemental_window.c — the elemental emitter's windowed ops: reduce-window, convolution and
   select-and-scatter, each one output element at a time with counted loops over its window
   (the CPU and GPU loop emitters call them through emit_elemental, so every form XLA
   defines runs in a kernel on both). Semantics and loop orders are the evaluator's
   (eval_reduce.c, eval_window.c), so float results agree up to the accumulation type.

   A tap k of window dim i at output position o reads input position
     p = o*stride - lo + k*wdil,  valid when p >= 0, p % bdil == 0 and p / bdil < dim;
   a tap that is not valid is skipped (a convolution multiplies a zero there instead): the
   load happens at a clamped index and a select keeps the accumulator (no branches, so the loop bodies stay straight-line code that
   LLVM unrolls and vectorises across the loop emitter's output elements). A window of more
   than 2^24 taps (ELW_MAX_TAPS: only padding can make one valid) is HJ_ERR_UNSUPPORTED: the
   evaluator, which visits only the valid taps, runs it.

   reduce-window: acc_k = init_k; for each tap in row-major order acc = to_apply(acc, x).
   convolution: acc = 0 in f32 (f16/bf16/f32 results; f64 for f64, the result's integer type,
     pred as or-of-ands); for each tap (row-major), for each input feature c of the output's
     group: acc += lhs * rhs, lhs 0 for a tap in padding (0 * inf is NaN there too), a tap
     in a dilation hole skipped (eval_window.c says why); converted to the result type once. The fast path for large
     convolutions is not here: passes/conv_lower.c rewrites them into im2col + dot first.
   select-and-scatter, at operand position x: out = init; for each window s that contains
     x, in row-major order of s (tap t of dim i gives s = (x + lo - t) / stride, so t runs
     downwards), find the window's selected position (walk its valid taps in row-major
     order, replacing the current pick when select(pick, candidate) is false) and, when it
     is x, out = scatter(out, source[s]). */
#include "emit_internal.h"

static LLVMValueRef elw_fail(emit_fn *f, const hlo_instr *ins, const char *why) {
  char b[128];
  emit_fail(f, HJ_ERR_SHAPE, "op '%s' (%s, %s): %s", hlo_opcode_name(ins->op), ins->name,
            hlo_shape_str(&ins->shape, b, sizeof b), why);
  return emitp_undef(f, &ins->shape);
}

static int64_t elw_at(hlo_ints v, int i, int64_t dflt) { return i < v.n ? v.v[i] : dflt; }

typedef struct { int64_t size, stride, lo, bdil, wdil, dim; bool rev; } elw_dim;

/* A kernel loops over every tap of a window: a window of more than this many taps (only
   over padding, or absurd) is left to the evaluator, which visits only the valid ones. */
#define ELW_MAX_TAPS ((int64_t)1 << 24)

static bool elw_too_many_taps(emit_fn *f, const hlo_instr *ins) {
  int64_t taps = 1;
  for (int i = 0; i < ins->window.size.n; i++)
    if (!hlo_mul_ok(taps, ins->window.size.v[i] > 0 ? ins->window.size.v[i] : 1, &taps) || taps > ELW_MAX_TAPS) {
      emit_fail(f, HJ_ERR_UNSUPPORTED, "op '%s' (%s): a window of more than %lld taps runs on the evaluator",
                hlo_opcode_name(ins->op), ins->name, (long long)ELW_MAX_TAPS);
      return true;
    }
  return false;
}

static bool elw_dims(const hlo_instr *ins, int n, const int64_t *in, elw_dim *w) {
  const hlo_window *hw = &ins->window;
  if (hw->size.n != n) return false;
  for (int i = 0; i < n; i++) {
    elw_dim *d = &w[i];
    d->size = hw->size.v[i], d->stride = elw_at(hw->stride, i, 1), d->lo = elw_at(hw->pad_lo, i, 0);
    d->bdil = elw_at(hw->base_dilation, i, 1), d->wdil = elw_at(hw->window_dilation, i, 1);
    d->rev = elw_at(hw->reversal, i, 0) != 0, d->dim = in[i];
    if (d->size < 1 || d->stride < 1 || d->bdil < 1 || d->wdil < 1 || d->dim < 0) return false;
  }
  return true;
}

/* Input index of tap |k| at output |o| (clamped into the dim) and whether it is valid;
   *hole (when not NULL): the tap is between two input elements (lhs dilation). */
static LLVMValueRef elw_pos_h(emit_fn *f, const elw_dim *w, LLVMValueRef o, LLVMValueRef k, LLVMValueRef *valid,
                              LLVMValueRef *hole) {
  LLVMBuilderRef b = f->em->b;
  LLVMValueRef p = LLVMBuildAdd(b, LLVMBuildMul(b, o, emit_i64(f, w->stride), ""),
                                LLVMBuildMul(b, k, emit_i64(f, w->wdil), ""), "");
  p = LLVMBuildSub(b, p, emit_i64(f, w->lo), "");
  LLVMValueRef ok = LLVMBuildICmp(b, LLVMIntSGE, p, emit_i64(f, 0), "");
  LLVMValueRef q = LLVMBuildSelect(b, ok, p, emit_i64(f, 0), "");
  if (hole) *hole = LLVMConstInt(f->em->t_i1, 0, 0);
  if (w->bdil != 1) {
    LLVMValueRef rem = LLVMBuildURem(b, q, emit_i64(f, w->bdil), "");
    LLVMValueRef mid = LLVMBuildICmp(b, LLVMIntNE, rem, emit_i64(f, 0), "");
    q = LLVMBuildUDiv(b, q, emit_i64(f, w->bdil), "");
    /* a hole lies inside the input's dilated extent: q < dim - 1 after the division */
    if (hole) *hole = LLVMBuildAnd(b, ok, LLVMBuildAnd(b, mid, LLVMBuildICmp(b, LLVMIntSLT, q, emit_i64(f, w->dim - 1), ""), ""), "");
    ok = LLVMBuildAnd(b, ok, LLVMBuildNot(b, mid, ""), "");
  }
  LLVMValueRef in = LLVMBuildICmp(b, LLVMIntSLT, q, emit_i64(f, w->dim), "");
  *valid = LLVMBuildAnd(b, ok, in, "");
  return LLVMBuildSelect(b, in, q, emit_i64(f, w->dim - 1), "");
}

static LLVMValueRef elw_pos(emit_fn *f, const elw_dim *w, LLVMValueRef o, LLVMValueRef k, LLVMValueRef *valid) {
  return elw_pos_h(f, w, o, k, valid, NULL);
}

/* ---- reduce-window ---------------------------------------------------------------------- */

LLVMValueRef emitp_reduce_window(emit_fn *f, const hlo_instr *ins, int sub, const emit_index *idx) {
  int n = ins->noperands / 2;
  if (elw_too_many_taps(f, ins)) return emitp_undef(f, &ins->shape);
  if (n < 1 || n > 16 || ins->noperands != 2 * n || ins->ncalls < 1 || !ins->calls[0] || sub >= n)
    return elw_fail(f, ins, "needs inputs, as many inits, and a computation (at most 16 inputs)");
  if (n > 1) {
    LLVMValueRef c = emitp_cache_get(f, ins, sub + 1, idx);
    if (c) return c;
  }
  const hlo_shape *is = &ins->operands[0]->shape;
  elw_dim w[HLO_MAX_RANK];
  if (idx->rank != is->rank || !elw_dims(ins, is->rank, is->dims, w))
    return elw_fail(f, ins, "window does not fit the operand");
  LLVMBuilderRef b = f->em->b;
  emit_index z = { 0 }, in = { .rank = is->rank };
  LLVMValueRef acc[16], res[16], args[32], ok[HLO_MAX_RANK];
  LLVMTypeRef ty[16];
  for (int k = 0; k < n; k++) {
    res[k] = emit_elemental(f, ins->operands[n + k], &z);
    ty[k] = LLVMTypeOf(res[k]);
  }
  if (hlo_shape_numel(is) == 0) return res[sub];   /* no taps anywhere: the inits */
  for (int k = 0; k < n; k++) {
    acc[k] = emitp_entry_alloca(f, ty[k], "racc");
    LLVMBuildStore(b, res[k], acc[k]);
  }
  emit_loop loops[HLO_MAX_RANK];
  for (int d = 0; d < is->rank; d++) {
    emit_loop_begin(f, &loops[d], emit_i64(f, 0), emit_i64(f, w[d].size), 1, "rw");
    in.v[d] = elw_pos(f, &w[d], idx->v[d], loops[d].iv, &ok[d]);
  }
  LLVMValueRef valid = LLVMConstInt(f->em->t_i1, 1, 0);
  for (int d = 0; d < is->rank; d++) valid = LLVMBuildAnd(b, valid, ok[d], "");
  for (int k = 0; k < n; k++) {
    args[k] = LLVMBuildLoad2(b, ty[k], acc[k], "");
    args[n + k] = emit_elemental(f, ins->operands[k], &in);
  }
  emit_scalar_call(f, ins->calls[0], args, 2 * n, res, n);
  for (int k = 0; k < n; k++) LLVMBuildStore(b, LLVMBuildSelect(b, valid, res[k], args[k], ""), acc[k]);
  for (int d = is->rank - 1; d >= 0; d--) emit_loop_end(f, &loops[d]);
  for (int k = 0; k < n; k++) res[k] = LLVMBuildLoad2(b, ty[k], acc[k], "");
  if (n > 1)
    for (int k = 0; k < n; k++) emitp_cache_put(f, ins, k + 1, idx, res[k]);
  return res[sub];
}

/* ---- convolution ---------------------------------------------------------------------------- */

static hlo_type elw_acc_type(hlo_type t) {
  return hlo_type_is_float(t) && hlo_type_size(t) <= 4 ? HLO_F32 : t;
}

static LLVMValueRef elw_convolution(emit_fn *f, const hlo_instr *ins, const emit_index *idx) {
  const hlo_conv_dims *cd = &ins->conv;
  const hlo_instr *L = ins->operands[0], *K = ins->operands[1];
  const hlo_shape *ls = &L->shape, *ks = &K->shape, *os = &ins->shape;
  int ns = cd->in_spatial.n;
  int64_t in[HLO_MAX_RANK];
  if (ns + 2 != ls->rank || ns + 2 != ks->rank || idx->rank != os->rank || cd->feature_groups < 1 ||
      cd->batch_groups < 1)
    return elw_fail(f, ins, "dim_labels do not fit");
  for (int i = 0; i < ns; i++) in[i] = ls->dims[cd->in_spatial.v[i]];
  elw_dim w[HLO_MAX_RANK];
  if (!elw_dims(ins, ns, in, w)) return elw_fail(f, ins, "window does not fit the input");
  LLVMBuilderRef b = f->em->b;
  hlo_type at = elw_acc_type(os->type);
  LLVMTypeRef aty = emit_compute_type(f->em, at);
  int64_t Ci = ks->dims[cd->k_in], O = ks->dims[cd->k_out], Bo = os->dims[cd->out_batch];
  LLVMValueRef of = idx->v[cd->out_feature];
  LLVMValueRef g = LLVMBuildUDiv(b, of, emit_i64(f, O / cd->feature_groups), "");
  LLVMValueRef bg = LLVMBuildUDiv(b, of, emit_i64(f, O / cd->batch_groups), "");
  emit_index li = { .rank = ls->rank }, ki = { .rank = ks->rank };
  li.v[cd->in_batch] = LLVMBuildAdd(b, LLVMBuildMul(b, bg, emit_i64(f, Bo), ""), idx->v[cd->out_batch], "");
  ki.v[cd->k_out] = of;
  LLVMValueRef fbase = LLVMBuildMul(b, g, emit_i64(f, Ci), "");
  LLVMValueRef acc = emitp_entry_alloca(f, aty, "cacc");
  LLVMValueRef zero = at == HLO_PRED ? LLVMConstInt(f->em->t_i1, 0, 0)
                      : hlo_type_is_float(at) ? emit_cf(aty, 0.0) : emit_ci(aty, 0);
  if (hlo_shape_numel(ls) == 0 || hlo_shape_numel(ks) == 0) return emitp_convert(f, zero, at, os->type);
  LLVMBuildStore(b, zero, acc);
  emit_loop loops[HLO_MAX_RANK + 1];
  LLVMValueRef valid = LLVMConstInt(f->em->t_i1, 1, 0), hole = LLVMConstInt(f->em->t_i1, 0, 0), ok, h;
  for (int i = 0; i < ns; i++) {
    emit_loop_begin(f, &loops[i], emit_i64(f, 0), emit_i64(f, w[i].size), 1, "cw");
    li.v[cd->in_spatial.v[i]] = elw_pos_h(f, &w[i], idx->v[cd->out_spatial.v[i]], loops[i].iv, &ok, &h);
    valid = LLVMBuildAnd(b, valid, ok, "");
    hole = LLVMBuildOr(b, hole, h, "");
    ki.v[cd->k_spatial.v[i]] = w[i].rev ? LLVMBuildSub(b, emit_i64(f, w[i].size - 1), loops[i].iv, "") : loops[i].iv;
  }
  emit_loop_begin(f, &loops[ns], emit_i64(f, 0), emit_i64(f, Ci), 1, "ci");
  li.v[cd->in_feature] = LLVMBuildAdd(b, fbase, loops[ns].iv, "");
  ki.v[cd->k_in] = loops[ns].iv;
  LLVMValueRef x = emitp_convert(f, emit_elemental(f, L, &li), ls->type, at);
  LLVMValueRef y = emitp_convert(f, emit_elemental(f, K, &ki), ks->type, at);
  x = LLVMBuildSelect(b, valid, x, zero, "");   /* padding is zeros: 0 * w */
  LLVMValueRef a = LLVMBuildLoad2(b, aty, acc, ""), s;
  if (at == HLO_PRED) s = LLVMBuildOr(b, a, LLVMBuildAnd(b, x, y, ""), "");
  else if (hlo_type_is_float(at)) s = LLVMBuildFAdd(b, a, LLVMBuildFMul(b, x, y, ""), "");
  else s = LLVMBuildAdd(b, a, LLVMBuildMul(b, x, y, ""), "");
  LLVMBuildStore(b, LLVMBuildSelect(b, hole, a, s, ""), acc);   /* holes are skipped */
  for (int i = ns; i >= 0; i--) emit_loop_end(f, &loops[i]);
  return emitp_convert(f, LLVMBuildLoad2(b, aty, acc, ""), at, os->type);
}

/* ---- select-and-scatter --------------------------------------------------------------------- */

static LLVMValueRef elw_select_and_scatter(emit_fn *f, const hlo_instr *ins, const emit_index *idx) {
  const hlo_instr *X = ins->operands[0], *S = ins->operands[1];
  const hlo_shape *xs = &X->shape, *ss = &S->shape;
  int n = xs->rank;
  elw_dim w[HLO_MAX_RANK];
  if (ins->ncalls != 2 || idx->rank != n || ss->rank != n || !elw_dims(ins, n, xs->dims, w))
    return elw_fail(f, ins, "window does not fit the operand");
  for (int i = 0; i < n; i++)
    if (w[i].bdil != 1 || w[i].wdil != 1) return elw_fail(f, ins, "dilated window");
  emit_module *em = f->em;
  LLVMBuilderRef b = em->b;
  emit_index z = { 0 }, si = { .rank = n }, xi = { .rank = n };
  LLVMValueRef init = emit_elemental(f, ins->operands[2], &z);
  if (hlo_shape_numel(ss) == 0 || hlo_shape_numel(xs) == 0) return init;   /* nothing scattered */
  LLVMTypeRef ty = LLVMTypeOf(init);
  LLVMValueRef acc = emitp_entry_alloca(f, ty, "sacc"), have = emitp_entry_alloca(f, em->t_i1, "shave");
  LLVMValueRef best = emitp_entry_alloca(f, ty, "sbest"), bpos = emitp_entry_alloca(f, em->t_i64, "spos");
  LLVMBuildStore(b, init, acc);
  /* x's own linear position, to compare picks with */
  LLVMValueRef me = emit_i64(f, 0);
  for (int i = 0; i < n; i++) me = LLVMBuildAdd(b, LLVMBuildMul(b, me, emit_i64(f, xs->dims[i]), ""), idx->v[i], "");
  emit_loop outer[HLO_MAX_RANK], inner[HLO_MAX_RANK];
  LLVMValueRef swin = LLVMConstInt(em->t_i1, 1, 0), ok;
  for (int i = 0; i < n; i++) {   /* tap t = size-1-u of window s: s = (x + lo - t) / stride */
    emit_loop_begin(f, &outer[i], emit_i64(f, 0), emit_i64(f, w[i].size), 1, "sw");
    LLVMValueRef t = LLVMBuildSub(b, emit_i64(f, w[i].size - 1), outer[i].iv, "");
    LLVMValueRef num = LLVMBuildSub(b, LLVMBuildAdd(b, idx->v[i], emit_i64(f, w[i].lo), ""), t, "");
    LLVMValueRef nn = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, num, emit_i64(f, 0), ""), emit_i64(f, 0), num, "");
    LLVMValueRef s = LLVMBuildUDiv(b, nn, emit_i64(f, w[i].stride), "");
    ok = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, num, emit_i64(f, 0), ""),
                      LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildURem(b, nn, emit_i64(f, w[i].stride), ""), emit_i64(f, 0), ""), "");
    ok = LLVMBuildAnd(b, ok, LLVMBuildICmp(b, LLVMIntULT, s, emit_i64(f, ss->dims[i]), ""), "");
    swin = LLVMBuildAnd(b, swin, ok, "");
    si.v[i] = LLVMBuildSelect(b, ok, s, emit_i64(f, 0), "");
  }
  /* the window's pick */
  LLVMBuildStore(b, LLVMConstInt(em->t_i1, 0, 0), have);
  LLVMBuildStore(b, init, best);
  LLVMBuildStore(b, emit_i64(f, -1), bpos);
  LLVMValueRef tap = LLVMConstInt(em->t_i1, 1, 0), pos = emit_i64(f, 0);
  for (int i = 0; i < n; i++) {
    emit_loop_begin(f, &inner[i], emit_i64(f, 0), emit_i64(f, w[i].size), 1, "sq");
    xi.v[i] = elw_pos(f, &w[i], si.v[i], inner[i].iv, &ok);
    tap = LLVMBuildAnd(b, tap, ok, "");
    pos = LLVMBuildAdd(b, LLVMBuildMul(b, pos, emit_i64(f, xs->dims[i]), ""), xi.v[i], "");
  }
  LLVMValueRef cand = emit_elemental(f, X, &xi), h = LLVMBuildLoad2(b, em->t_i1, have, "");
  LLVMValueRef cur = LLVMBuildLoad2(b, ty, best, ""), args[2] = { cur, cand }, keep;
  emit_scalar_call(f, ins->calls[0], args, 2, &keep, 1);
  LLVMValueRef take = LLVMBuildAnd(b, tap, LLVMBuildOr(b, LLVMBuildNot(b, h, ""), LLVMBuildNot(b, keep, ""), ""), "");
  LLVMBuildStore(b, LLVMBuildSelect(b, take, cand, cur, ""), best);
  LLVMBuildStore(b, LLVMBuildSelect(b, take, pos, LLVMBuildLoad2(b, em->t_i64, bpos, ""), ""), bpos);
  LLVMBuildStore(b, LLVMBuildOr(b, h, tap, ""), have);
  for (int i = n - 1; i >= 0; i--) emit_loop_end(f, &inner[i]);
  LLVMValueRef mine = LLVMBuildAnd(b, swin, LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildLoad2(b, em->t_i64, bpos, ""), me, ""), "");
  LLVMValueRef a = LLVMBuildLoad2(b, ty, acc, ""), sargs[2] = { a, emit_elemental(f, S, &si) }, r;
  emit_scalar_call(f, ins->calls[1], sargs, 2, &r, 1);
  LLVMBuildStore(b, LLVMBuildSelect(b, mine, r, a, ""), acc);
  for (int i = n - 1; i >= 0; i--) emit_loop_end(f, &outer[i]);
  return LLVMBuildLoad2(b, ty, acc, "");
}

LLVMValueRef emitp_window_op(emit_fn *f, const hlo_instr *ins, const emit_index *idx) {
  if (ins->op != HLO_OP_REDUCE_WINDOW && ins->op != HLO_OP_CONVOLUTION && ins->op != HLO_OP_SELECT_AND_SCATTER)
    return NULL;
  if (elw_too_many_taps(f, ins)) return emitp_undef(f, &ins->shape);
  for (int k = 0; k < ins->noperands; k++)
    if (!hlo_shape_is_array(&ins->operands[k]->shape)) return elw_fail(f, ins, "operands must be arrays");
  switch (ins->op) {
  case HLO_OP_REDUCE_WINDOW: return emitp_reduce_window(f, ins, 0, idx);
  case HLO_OP_CONVOLUTION: return elw_convolution(f, ins, idx);
  case HLO_OP_SELECT_AND_SCATTER: return elw_select_and_scatter(f, ins, idx);
  default: return NULL;
  }
}
