/* gpu_dus.c — the GPU in-place dynamic-update-slice emitter (the KV cache): the runtime
   gives output 0 the buffer of operand 0, whose bytes are already in place, so the kernel
   writes only the update, one thread per updated element:
       out[start + u] = update[u]      for u < numel(update), consecutive threads consecutive u
   with the starts clamped as XLA does (dus.c's emitp_dus_starts) and the update from the
   elemental emitter (producers such as a convert or a select fuse). The preconditions are
   dus.c's (emitp_dus_check): the kernel reads no element of the buffer it updates, so no
   thread can see another's write.

   GPT-2's KV cache: cache f32[12,1024,64], update f32[12,1,64] at (0, t, 0): 768 threads
   (3 blocks of 256); thread u writes cache[u / 64, t, u % 64] — 12 runs of 64 contiguous
   floats, each run coalesced. */
#include "gpu_internal.h"

hj_status emitg_dus(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero,
                    const char *name, emit_kernel *out) {
  memset(out, 0, sizeof *out);
  if (fusion->ncalls < 1 || !fusion->calls[0])
    return hj__err(em->ctx, HJ_ERR_INVALID_ARG, "GPU dus emitter: fusion '%s' has no computation", fusion->name);
  hj_status st = emitp_dus_check(em, fusion, hero);
  if (st) return st;
  const hlo_shape *os = &hero->shape, *us = &hero->operands[1]->shape;
  int64_t U = hlo_shape_numel(us);
  int block = U >= 256 ? 256 : (int)((U + 31) / 32 * 32);
  if (block < 32) block = 32;
  emit_fn f;
  st = emitg_kernel_begin(&f, em, name, fusion, 0, block);
  if (st) return st;
  if (f.nouts != 1) emit_fail(&f, HJ_ERR_UNSUPPORTED, "in-place dus with %d outputs", f.nouts);
  if (U > 0 && f.status == HJ_OK) {
    LLVMBuilderRef b = em->b;
    LLVMValueRef gid = emitg_global_id(&f);
    emitg_region r;
    emitg_if_begin(&f, &r, LLVMBuildICmp(b, LLVMIntULT, gid, emit_i64(&f, U), ""), "upd");
    LLVMValueRef start[HLO_MAX_RANK];
    emitp_dus_starts(&f, hero, start);
    emit_index ui, oi = { .rank = os->rank };
    emit_delinearize(&f, us, gid, &ui);
    for (int d = 0; d < os->rank; d++) oi.v[d] = LLVMBuildNSWAdd(b, start[d], ui.v[d], "o");
    LLVMValueRef v = emit_elemental(&f, hero->operands[1], &ui);
    emit_store_elem(&f, os->type, f.outs[0], emit_linear_index(&f, os, &oi), v);
    emitg_if_end(&f, &r);
  }
  st = emit_kernel_end(&f);
  if (st) return st;
  out->kind = EMIT_KIND_DUS;
  out->parallel_n = U;
  out->grain = 1;
  snprintf(out->name, sizeof out->name, "%s", name);
  emitg_launch_1d(out, U, block);
  return HJ_OK;
}
