/* gpu_dus.c — the GPU in-place dynamic-update-slice emitter (the KV cache): dus.c's plan
   (the leaves the runtime writes over their operand's buffer, whose bytes are already in
   place, and the other leaves of the fusion, written whole), one thread per u in
   [0, max_j numel(space_j)):
       for each leaf j with u < numel(space_j): i = delinearise(u, space_j);
           in place: out_j[start_j + i] = update_j[i];   else: out_j[u] = leaf_j[i]
   consecutive threads consecutive u, starts clamped as XLA does (dus.c's emitp_dus_starts),
   every value from the elemental emitter (producers such as a slice of the qkv matmul's
   output fuse). ir/inplace.c's rules guarantee the kernel reads no element of a buffer it
   updates, so no thread can see another's write.

   GPT-2's decode step: the query slice and both cache updates of a layer in one kernel;
   cache f32[12,1024,64], update f32[12,1,64] at (0, t, 0): 768 threads (3 blocks of 256);
   thread u writes cache[u / 64, t, u % 64] — 12 runs of 64 contiguous floats, each run
   coalesced — and q[u]. */
#include "gpu_internal.h"

hj_status emitg_dus(emit_module *em, const hlo_instr *fusion, uint64_t mask, const char *name,
                    emit_kernel *out) {
  memset(out, 0, sizeof *out);
  emitp_dus_plan p;
  hj_status st = emitp_dus_plan_make(em, fusion, mask, &p);
  if (st) return st;
  int64_t U = p.work;
  int block = U >= 256 ? 256 : (int)((U + 31) / 32 * 32);
  if (block < 32) block = 32;
  emit_fn f;
  st = emitg_kernel_begin_aliased(&f, em, name, fusion, p.alias_params, p.alias_outs, block);
  if (st) return st;
  if (f.nouts != p.n) emit_fail(&f, HJ_ERR_SHAPE, "%d output buffers for %d root leaves", f.nouts, p.n);
  if (U > 0 && f.status == HJ_OK) {
    LLVMBuilderRef b = em->b;
    LLVMValueRef gid = emitg_global_id(&f);
    LLVMValueRef start[64][HLO_MAX_RANK];
    for (int j = 0; j < p.n; j++)
      if (p.leaf[j].dus) emitp_dus_starts(&f, p.leaf[j].dus, start[j]);
    for (int j = 0; j < p.n; j++) {
      const emitp_dus_leaf *L = &p.leaf[j];
      if (L->work == 0) continue;
      emitg_region r;
      emitg_if_begin(&f, &r, LLVMBuildICmp(b, LLVMIntULT, gid, emit_i64(&f, L->work), ""), "leaf");
      emit_index idx;
      emit_delinearize(&f, L->space, gid, &idx);
      emitp_dus_store(&f, L, j, start[j], &idx, gid);
      emitg_if_end(&f, &r);
    }
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
