/* sort.c — the sort emitter (CPU), and the plan and network step the GPU's (gpu_sort.c)
   shares: a fusion { p0 .. p{m-1}; ROOT sort(p0 .. p{m-1}), dimensions={d} } sorts every
   row (all indices but d fixed) of its m operands together, by the comparator.

   Algorithm: each row is copied to the outputs (the operands through the elemental emitter:
   a fused parameter, one used twice, an iota the fusion took in), then sorted in place there by a bitonic
   network in its one-direction form: for t = 1 .. ceil(log2 n), for s = t-1 .. 0, every
   element i < n meets its partner q = i ^ (2^t - 1) (s = t-1: the mirror in its block of
   2^t) or q = i ^ 2^s (later steps); when i < q < n and less(row[q], row[i]) the two swap,
   every operand together. Every comparator puts the lesser element at the lower index, so
   the virtual elements past n (as if +inf) never move and the first n come out sorted:
   any n, no padding, no scratch memory. A network is not stable, but passes/sort_lower.c
   made every comparator a strict total order over (keys, position), so the result is the
   stable order, the evaluator's bits (same comparator, same f16/bf16 rounding).
   Cost: n/2 * L(L+1)/2 comparisons per row, L = ceil(log2 n): 27,500 for n = 1000; the
   rows run in parallel (CPU: the thread pool over rows; GPU: one block per row, the
   elements of a step over its threads, a barrier between steps).

   Example: argsort of f32[16,1000] along dim 1 (JAX: sort(x, iota), comparator on x):
   16 rows, L = 10, 55 steps of 1000 element visits each per row. */
#include "emit_internal.h"

static hj_status sort_unsup(emit_module *em, const hlo_instr *fusion, const char *why) {
  return hj__err(em->ctx, HJ_ERR_UNSUPPORTED, "sort emitter, fusion '%s': %s", fusion->name, why);
}

hj_status emitp_sort_plan_make(emit_module *em, const hlo_instr *fusion, const hlo_instr *sort,
                               emitp_sort_plan *p) {
  memset(p, 0, sizeof *p);
  p->sort = sort;
  const hlo_comp *c = fusion->calls[0];
  if (sort->op != HLO_OP_SORT || c->root != sort || sort->dims.n != 1 || sort->ncalls != 1 ||
      !sort->calls[0] || sort->noperands < 1 || sort->noperands > 32)
    return sort_unsup(em, fusion, "the root must be a sort of at most 32 operands");
  const hlo_shape *xs = &sort->operands[0]->shape;
  int64_t d = sort->dims.v[0];
  if (d < 0 || d >= xs->rank) return sort_unsup(em, fusion, "sort dimension out of range");
  for (int k = 0; k < sort->noperands; k++) {
    const hlo_instr *o = sort->operands[k];
    if (!hlo_shape_is_array(&o->shape) || !hlo_same_dims(&o->shape, xs))
      return sort_unsup(em, fusion, "operands of different shapes");
  }
  p->nops = sort->noperands;
  p->n = xs->dims[d];
  p->inner = 1;
  for (int i = (int)d + 1; i < xs->rank; i++) p->inner *= xs->dims[i];
  p->rows = p->n ? hlo_shape_numel(xs) / p->n : 0;
  p->steps = 0;
  while (((int64_t)1 << p->steps) < p->n) p->steps++;
  for (int k = 0; k < p->nops; k++) p->type[k] = sort->operands[k]->shape.type;
  return HJ_OK;
}

LLVMValueRef emitp_sort_row_base(emit_fn *f, const emitp_sort_plan *p, LLVMValueRef row) {
  LLVMBuilderRef b = f->em->b;
  LLVMValueRef in = emit_i64(f, p->inner);
  LLVMValueRef o = LLVMBuildSDiv(b, row, in, "o"), r = LLVMBuildSRem(b, row, in, "r");
  return LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, o, emit_i64(f, p->n * p->inner), ""), r, "base");
}

static LLVMValueRef sort_at(emit_fn *f, const emitp_sort_plan *p, LLVMValueRef base, LLVMValueRef i) {
  return LLVMBuildNSWAdd(f->em->b, base, LLVMBuildNSWMul(f->em->b, i, emit_i64(f, p->inner), ""), "at");
}

void emitp_sort_copy(emit_fn *f, const emitp_sort_plan *p, LLVMValueRef base, LLVMValueRef i) {
  LLVMValueRef at = sort_at(f, p, base, i);
  emit_index idx;   /* any operand form: a fused parameter (read at |at|), twice, an iota */
  emit_delinearize(f, &p->sort->operands[0]->shape, at, &idx);
  for (int k = 0; k < p->nops; k++)
    emit_store_elem(f, p->type[k], f->outs[k], at, emit_elemental(f, p->sort->operands[k], &idx));
}

void emitp_sort_step(emit_fn *f, const emitp_sort_plan *p, LLVMValueRef base, LLVMValueRef t,
                     LLVMValueRef s, LLVMValueRef i) {
  emit_module *em = f->em;
  LLVMBuilderRef b = em->b;
  LLVMValueRef one = emit_i64(f, 1);
  LLVMValueRef mirror = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAdd(b, s, one, ""), t, "mirror");
  LLVMValueRef mask = LLVMBuildSelect(b, mirror, LLVMBuildSub(b, LLVMBuildShl(b, one, t, ""), one, ""),
                                      LLVMBuildShl(b, one, s, ""), "mask");
  LLVMValueRef q = LLVMBuildXor(b, i, mask, "q");
  LLVMValueRef live = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGT, q, i, ""),
                                   LLVMBuildICmp(b, LLVMIntSLT, q, emit_i64(f, p->n), ""), "live");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(em->llctx, f->fn, "sort.cmp");
  LLVMBasicBlockRef after = LLVMAppendBasicBlockInContext(em->llctx, f->fn, "sort.next");
  LLVMBuildCondBr(b, live, body, after);
  LLVMPositionBuilderAtEnd(b, body);
  emit_cache_clear(f);
  LLVMValueRef ai = sort_at(f, p, base, i), aq = sort_at(f, p, base, q);
  LLVMValueRef vi[32], vq[32], args[64];
  for (int k = 0; k < p->nops; k++) {
    vi[k] = emit_load_elem(f, p->type[k], f->outs[k], ai);
    vq[k] = emit_load_elem(f, p->type[k], f->outs[k], aq);
    args[2 * k] = vq[k];
    args[2 * k + 1] = vi[k];
  }
  LLVMValueRef lt;
  emit_scalar_call(f, p->sort->calls[0], args, 2 * p->nops, &lt, 1);
  if (LLVMTypeOf(lt) != em->t_i1) lt = LLVMBuildTrunc(b, lt, em->t_i1, "");
  for (int k = 0; k < p->nops; k++) {
    emit_store_elem(f, p->type[k], f->outs[k], ai, LLVMBuildSelect(b, lt, vq[k], vi[k], ""));
    emit_store_elem(f, p->type[k], f->outs[k], aq, LLVMBuildSelect(b, lt, vi[k], vq[k], ""));
  }
  LLVMBuildBr(b, after);
  LLVMPositionBuilderAtEnd(b, after);
  emit_cache_clear(f);
}

hj_status emit_sort_fusion(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero,
                           const char *name, emit_kernel *out) {
  memset(out, 0, sizeof *out);
  emitp_sort_plan p;
  bool topk = hero->op == HLO_OP_TOPK;
  hj_status st = topk ? emitp_topk_plan_make(em, fusion, hero, &p) : emitp_sort_plan_make(em, fusion, hero, &p);
  emit_fn f;
  if (!st) st = emit_kernel_begin(&f, em, name, fusion);
  if (st) return st;
  if (f.nouts != p.nops) emit_fail(&f, HJ_ERR_SHAPE, "%d output buffers for %d sorted operands", f.nouts, p.nops);
  if (f.status == HJ_OK && p.rows > 0 && topk) {
    emit_loop lr;
    emit_loop_begin(&f, &lr, f.begin, f.end, 1, "topk.row");
    emitp_topk_row(&f, &p, lr.iv);
    emit_loop_end(&f, &lr);
  } else if (f.status == HJ_OK && p.rows > 0) {
    emit_loop lr, lc, lt, ls, li;
    emit_loop_begin(&f, &lr, f.begin, f.end, 1, "sort.row");
    LLVMValueRef base = emitp_sort_row_base(&f, &p, lr.iv);
    emit_loop_begin(&f, &lc, emit_i64(&f, 0), emit_i64(&f, p.n), 1, "sort.copy");
    emitp_sort_copy(&f, &p, base, lc.iv);
    emit_loop_end(&f, &lc);
    emit_loop_begin(&f, &lt, emit_i64(&f, 1), emit_i64(&f, p.steps + 1), 1, "sort.t");
    emit_loop_begin(&f, &ls, emit_i64(&f, 0), lt.iv, 1, "sort.s");
    LLVMValueRef s = LLVMBuildSub(em->b, LLVMBuildSub(em->b, lt.iv, emit_i64(&f, 1), ""), ls.iv, "s");
    emit_loop_begin(&f, &li, emit_i64(&f, 0), emit_i64(&f, p.n), 1, "sort.i");
    emitp_sort_step(&f, &p, base, lt.iv, s, li.iv);
    emit_loop_end(&f, &li);
    emit_loop_end(&f, &ls);
    emit_loop_end(&f, &lt);
    emit_loop_end(&f, &lr);
  }
  st = emit_kernel_end(&f);
  if (st) return st;
  out->kind = EMIT_KIND_SORT;
  out->parallel_n = p.rows;
  out->grain = p.n >= 4096 ? 1 : 4096 / (p.n ? p.n : 1);
  snprintf(out->name, sizeof out->name, "%s", name);
  return HJ_OK;
}
