/* topk.c — the top-k kernel's body (CPU and GPU; sort.c and gpu_sort.c drive it): a fusion
   { p0; ROOT topk(p0), k } with k <= EMITP_TOPK_MAX keeps, per row (all dims but the
   last), the k best elements seen so far in the outputs themselves, best first:
       for i in 0 .. n-1:
         if i >= k and not better(x_i, vals[k-1]): next      (most elements stop here)
         p = min(i, k-1); while p > 0 and better(x_i, vals[p-1]): shift slot p-1 down; p--
         vals[p] = x_i; idx[p] = i
   better(x, y): x above y in XLA's total order (largest; below for largest=false): floats
   by their sign-magnitude bits made monotonic (-NaN < -inf < ... < -0 < +0 < ... < NaN),
   integers by value. Elements come in index order, so a tie never moves an earlier one:
   ties keep the lower index first, the evaluator's (and lax.top_k's) order, bit for bit.
   O(n) per row plus O(k) per insertion, against the sorting network's O(n log^2 n) (top 10
   of 4096 floats: ~40x fewer steps). Larger k are lowered to a sort (passes/sort_lower.c). */
#include "emit_internal.h"

/* The total-order key of compute value |v| of type |t| as an integer (signed compare for
   floats and signed integers, unsigned for the rest: *uns). */
static LLVMValueRef tpk_key(emit_fn *f, hlo_type t, LLVMValueRef v, bool *uns) {
  emit_module *em = f->em;
  LLVMBuilderRef b = em->b;
  *uns = false;
  if (hlo_type_is_float(t)) {
    bool dbl = t == HLO_F64;
    LLVMTypeRef it = dbl ? em->t_i64 : em->t_i32;
    if (!dbl && LLVMTypeOf(v) != em->t_f32) v = LLVMBuildFPExt(b, v, em->t_f32, "");
    LLVMValueRef bits = LLVMBuildBitCast(b, v, it, "bits");
    LLVMValueRef mag = emit_ci(it, dbl ? INT64_MAX : INT32_MAX);
    LLVMValueRef neg = LLVMBuildICmp(b, LLVMIntSLT, bits, emit_ci(it, 0), "");
    return LLVMBuildSelect(b, neg, LLVMBuildXor(b, bits, mag, ""), bits, "key");
  }
  *uns = t == HLO_PRED || hlo_type_class_of(t) == HLO_CLASS_UINT;
  return v;
}

static LLVMValueRef tpk_better(emit_fn *f, const emitp_sort_plan *p, LLVMValueRef kx, LLVMValueRef ky, bool uns) {
  LLVMIntPredicate pr = p->sort->largest ? (uns ? LLVMIntUGT : LLVMIntSGT) : (uns ? LLVMIntULT : LLVMIntSLT);
  return LLVMBuildICmp(f->em->b, pr, kx, ky, "better");
}

hj_status emitp_topk_plan_make(emit_module *em, const hlo_instr *fusion, const hlo_instr *tk, emitp_sort_plan *p) {
  memset(p, 0, sizeof *p);
  p->sort = tk;
  const hlo_shape *xs = tk->noperands == 1 ? &tk->operands[0]->shape : NULL;
  if (tk->op != HLO_OP_TOPK || fusion->calls[0]->root != tk || !xs || !hlo_shape_is_array(xs) || xs->rank < 1 ||
      tk->k < 1 || tk->k > HLO_TOPK_KERNEL_MAX_K || tk->k > xs->dims[xs->rank - 1] || xs->dims[xs->rank - 1] > INT32_MAX)
    return hj__err(em->ctx, HJ_ERR_UNSUPPORTED, "topk emitter, fusion '%s': needs 1 <= k <= %d and k <= the row",
                   fusion->name, HLO_TOPK_KERNEL_MAX_K);
  p->nops = 2;   /* the outputs: values, s32 indices */
  p->type[0] = xs->type;
  p->type[1] = HLO_S32;
  p->n = xs->dims[xs->rank - 1];
  p->inner = 1;
  p->rows = hlo_shape_numel(xs) / p->n;
  return HJ_OK;
}

void emitp_topk_row(emit_fn *f, const emitp_sort_plan *p, LLVMValueRef row) {
  emit_module *em = f->em;
  LLVMBuilderRef b = em->b;
  const hlo_instr *tk = p->sort;
  const hlo_instr *x = tk->operands[0];
  hlo_type t = p->type[0];
  int64_t k = tk->k;
  LLVMValueRef vbase = LLVMBuildNSWMul(b, row, emit_i64(f, k), "vbase");
  /* the row's index prefix: all dims but the last, from |row| */
  hlo_shape outer = hlo_shape_scalar(t);
  for (int d = 0; d + 1 < x->shape.rank; d++) outer.dims[outer.rank++] = x->shape.dims[d];
  hlo_shape_set_default_layout(&outer);
  emit_index ri;
  emit_delinearize(f, &outer, row, &ri);
  emit_loop li;
  emit_loop_begin(f, &li, emit_i64(f, 0), emit_i64(f, p->n), 1, "topk.i");
  emit_index xi = ri;
  xi.rank = x->shape.rank;
  xi.v[xi.rank - 1] = li.iv;
  LLVMValueRef xv = emit_elemental(f, x, &xi);
  bool uns;
  LLVMValueRef kx = tpk_key(f, t, xv, &uns);
  LLVMValueRef last = LLVMBuildNSWAdd(b, vbase, emit_i64(f, k - 1), "");
  LLVMValueRef ky = tpk_key(f, t, emit_load_elem(f, t, f->outs[0], last), &uns);
  LLVMValueRef full = LLVMBuildICmp(b, LLVMIntSGE, li.iv, emit_i64(f, k), "full");
  LLVMValueRef enter = LLVMBuildOr(b, LLVMBuildNot(b, full, ""), tpk_better(f, p, kx, ky, uns), "enter");
  LLVMBasicBlockRef from = LLVMGetInsertBlock(b);
  LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(em->llctx, f->fn, "topk.shift");
  LLVMBasicBlockRef move = LLVMAppendBasicBlockInContext(em->llctx, f->fn, "topk.move");
  LLVMBasicBlockRef place = LLVMAppendBasicBlockInContext(em->llctx, f->fn, "topk.place");
  LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(em->llctx, f->fn, "topk.next");
  LLVMValueRef p0 = LLVMBuildSelect(b, full, emit_i64(f, k - 1), li.iv, "p0");
  LLVMBuildCondBr(b, enter, head, next);
  /* head: pos = phi(p0, pos - 1); keep shifting while pos > 0 and x beats slot pos-1 */
  LLVMPositionBuilderAtEnd(b, head);
  emit_cache_clear(f);
  LLVMValueRef pos = LLVMBuildPhi(b, em->t_i64, "pos");
  LLVMValueRef pm1 = LLVMBuildNSWSub(b, pos, emit_i64(f, 1), "");
  LLVMValueRef prev = LLVMBuildNSWAdd(b, vbase, pm1, "prev");
  LLVMValueRef pv = emit_load_elem(f, t, f->outs[0], prev);
  LLVMValueRef pk = tpk_key(f, t, pv, &uns);
  LLVMValueRef go = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGT, pos, emit_i64(f, 0), ""),
                                 tpk_better(f, p, kx, pk, uns), "go");
  LLVMBuildCondBr(b, go, move, place);
  LLVMPositionBuilderAtEnd(b, move);
  LLVMValueRef at = LLVMBuildNSWAdd(b, vbase, pos, "");
  emit_store_elem(f, t, f->outs[0], at, pv);
  emit_store_elem(f, HLO_S32, f->outs[1], at, emit_load_elem(f, HLO_S32, f->outs[1], prev));
  LLVMBuildBr(b, head);
  LLVMValueRef in_v[2] = { p0, pm1 };
  LLVMBasicBlockRef in_b[2] = { from, move };
  LLVMAddIncoming(pos, in_v, in_b, 2);
  LLVMPositionBuilderAtEnd(b, place);
  LLVMValueRef dst = LLVMBuildNSWAdd(b, vbase, pos, "");
  emit_store_elem(f, t, f->outs[0], dst, xv);
  emit_store_elem(f, HLO_S32, f->outs[1], dst, LLVMBuildTrunc(b, li.iv, em->t_i32, ""));
  LLVMBuildBr(b, next);
  LLVMPositionBuilderAtEnd(b, next);
  emit_cache_clear(f);
  emit_loop_end(f, &li);
}
