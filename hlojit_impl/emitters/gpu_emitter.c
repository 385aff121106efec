/* gpu_emitter.c — emit_gpu_fusion: the one switch from a fusion's kind to a GPU emitter
   (emit.h, "GPU targets"). emit_fusion and emit_fusion_inplace come here when the target is
   a GPU; the hero analysis is the CPU's (emit_classify), so both backends agree on what a
   fusion is, and only the thread mapping differs.

   Fallbacks, as on the CPU: when the reduction or transpose emitter says HJ_ERR_UNSUPPORTED
   (a shape or structure it does not take), the GPU loop emitter does the fusion (a reduce
   becomes a sequential loop per output element: the evaluator's order, slower); every
   function a failed emitter left in the module is deleted first, so the module verifies.
   In-place elementwise (|inplace_operand| >= 0) is the loop emitter's only, under
   emit_loop_inplace_ok. */
#include "gpu_internal.h"

hj_status emit_gpu_fusion(emit_module *em, const hlo_instr *fusion, const char *name,
                          uint64_t dus_mask, int inplace_operand, emit_kernel *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "%s", name);
  const hlo_instr *hero = NULL;
  emit_kind k = emit_classify(fusion, dus_mask, &hero);
  out->kind = k;
  const char *fname = fusion && fusion->name ? fusion->name : "?";
  if (inplace_operand >= 0) {
    if (dus_mask || k != EMIT_KIND_LOOP || !emit_loop_inplace_ok(fusion, inplace_operand))
      return hj__err(em->ctx, HJ_ERR_UNSUPPORTED, "emit '%s': output 0 over operand %d needs a "
                     "linear loop fusion reading it at its own index", fname, inplace_operand);
  }
  LLVMValueRef last = LLVMGetLastFunction(em->mod);
  hj_status st;
  switch (k) {
  case EMIT_KIND_LOOP: st = emitg_loop(em, fusion, name, inplace_operand, out); break;
  case EMIT_KIND_REDUCTION: st = emitg_reduction(em, fusion, hero, name, out); break;
  case EMIT_KIND_TRANSPOSE: st = emitg_transpose(em, fusion, hero, name, out); break;
  case EMIT_KIND_MATMUL: st = emitg_matmul(em, fusion, hero, name, out); break;
  case EMIT_KIND_DUS: st = emitg_dus(em, fusion, dus_mask, name, out); break;
  case EMIT_KIND_SORT: st = emitg_sort(em, fusion, hero, name, out); break;
  case EMIT_KIND_SCATTER: st = emitg_scatter(em, fusion, hero, name, out); break;
  case EMIT_KIND_SCAN: st = emitg_scan(em, fusion, hero, name, out); break;
  default:
    return hj__err(em->ctx, HJ_ERR_UNSUPPORTED, "emit '%s': '%s' (%s) runs in the runtime", fname,
                   hero && hero->name ? hero->name : "?", hero ? hlo_opcode_name(hero->op) : "?");
  }
  if (st == HJ_ERR_UNSUPPORTED && (k == EMIT_KIND_REDUCTION || k == EMIT_KIND_TRANSPOSE ||
                                   k == EMIT_KIND_MATMUL || k == EMIT_KIND_SCAN)) {
    emitp_drop_after(em->mod, last);
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", name);
    out->kind = EMIT_KIND_LOOP;
    st = emitg_loop(em, fusion, name, -1, out);
  }
  if (st != HJ_OK) emitp_drop_after(em->mod, last);   /* out->matmul: the failed emitter's */
  return st;
}
