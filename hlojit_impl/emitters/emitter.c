/* emitter.c — the one switch from a fusion's kind (classify.c) to its emitter:
   emit_fusion, and emit_fusion_inplace for a loop kernel whose output 0 overwrites an
   operand. A GPU target's fusions go to gpu_emitter.c's switch instead.

   emit_fusion: when the reduction or transpose emitter says HJ_ERR_UNSUPPORTED (not built
   yet, or a case it does not take), the loop emitter does the fusion instead (a reduce
   becomes a nested loop per output element: slower, same bits as the evaluator). Every
   function a failed emitter left in the module is deleted first, so the module verifies. */
#include "emit_internal.h"

hj_status emit_fusion(emit_module *em, const hlo_instr *fusion, const char *name,
                      uint64_t dus_mask, emit_kernel *out) {
  if (em->target.gpu) return emit_gpu_fusion(em, fusion, name, dus_mask, -1, out);   /* gpu_emitter.c */
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "%s", name);
  const hlo_instr *hero = NULL;
  emit_kind k = emit_classify(fusion, dus_mask, &hero);
  out->kind = k;
  LLVMValueRef last = LLVMGetLastFunction(em->mod);
  hj_status st;
  switch (k) {
  case EMIT_KIND_LOOP: st = emit_loop_fusion(em, fusion, name, out); break;
  case EMIT_KIND_REDUCTION: st = emit_reduction_fusion(em, fusion, hero, name, out); break;
  case EMIT_KIND_TRANSPOSE: st = emit_transpose_fusion(em, fusion, hero, name, out); break;
  case EMIT_KIND_MATMUL: st = emit_matmul_fusion(em, fusion, hero, name, out); break;
  case EMIT_KIND_DUS: st = emit_dus_fusion(em, fusion, dus_mask, name, out); break;
  case EMIT_KIND_SORT: st = emit_sort_fusion(em, fusion, hero, name, out); break;
  case EMIT_KIND_SCATTER: st = emit_scatter_fusion(em, fusion, hero, name, out); break;
  case EMIT_KIND_SCAN: st = emit_scan_fusion(em, fusion, hero, name, out); break;
  default:
    return hj__err(em->ctx, HJ_ERR_UNSUPPORTED, "emit '%s': '%s' (%s) runs in the runtime",
                   fusion && fusion->name ? fusion->name : "?", hero && hero->name ? hero->name : "?",
                   hero ? hlo_opcode_name(hero->op) : "?");
  }
  if (st == HJ_ERR_UNSUPPORTED && (k == EMIT_KIND_REDUCTION || k == EMIT_KIND_TRANSPOSE ||
                                   k == EMIT_KIND_MATMUL || k == EMIT_KIND_SCAN)) {
    emitp_drop_after(em->mod, last);
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", name);
    out->kind = EMIT_KIND_LOOP;
    st = emit_loop_fusion(em, fusion, name, out);
  }
  if (st != HJ_OK) emitp_drop_after(em->mod, last);   /* out->matmul: the failed emitter's */
  return st;
}

hj_status emit_fusion_inplace(emit_module *em, const hlo_instr *fusion, const char *name,
                              uint64_t dus_mask, int inplace_operand, emit_kernel *out) {
  if (em->target.gpu) return emit_gpu_fusion(em, fusion, name, dus_mask, inplace_operand, out);
  if (inplace_operand < 0) return emit_fusion(em, fusion, name, dus_mask, out);
  return emit_loop_fusion_inplace(em, fusion, name, dus_mask ? -1 : inplace_operand, out);
}
