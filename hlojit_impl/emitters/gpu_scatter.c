/* gpu_scatter.c — the GPU scatter emitter: scatter.c's plan and body, one thread per row
   of the operand's leading dim (thread r copies row r of the operands, then walks every
   update in order and applies those that land in row r). Deterministic, no atomics, the
   evaluator's bits; parallel only over the leading dim, and each thread reads every index
   vector: right for embedding gradients (thousands of rows), slow for a scatter into a
   short leading dim. A warp per row (coalesced windows) is the next step; the GPU path is
   unmeasured yet. */
#include "gpu_internal.h"

hj_status emitg_scatter(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero,
                        const char *name, emit_kernel *out) {
  memset(out, 0, sizeof *out);
  emitp_scatter_plan p;
  hj_status st = emitp_scatter_plan_make(em, fusion, hero, &p);
  if (st) return st;
  int block = p.rows >= 128 ? 128 : (int)((p.rows + 31) / 32 * 32);
  if (block < 32) block = 32;
  emit_fn f;
  st = emitg_kernel_begin(&f, em, name, fusion, -1, block);
  if (st) return st;
  if (f.nouts != p.n) emit_fail(&f, HJ_ERR_SHAPE, "%d output buffers for %d scattered operands", f.nouts, p.n);
  if (f.status == HJ_OK && p.rows > 0) {
    LLVMBuilderRef b = em->b;
    LLVMValueRef gid = emitg_global_id(&f);
    emitg_region r;
    emitg_if_begin(&f, &r, LLVMBuildICmp(b, LLVMIntULT, gid, emit_i64(&f, p.rows), ""), "row");
    emitp_scatter_body(&f, &p, gid, LLVMBuildNUWAdd(b, gid, emit_i64(&f, 1), ""));
    emitg_if_end(&f, &r);
  }
  st = emit_kernel_end(&f);
  if (st) return st;
  out->kind = EMIT_KIND_SCATTER;
  out->parallel_n = p.rows;
  out->grain = 1;
  snprintf(out->name, sizeof out->name, "%s", name);
  emitg_launch_1d(out, p.rows, block);
  return HJ_OK;
}
