/* gpu_scan.c — the GPU prefix-scan emitter: scan.c's plan and running fold, one thread per
   row (the fold along the scan dim is sequential, as the evaluator's order requires). Rows
   of a [B, T] cumsum along T read strided across threads: coalesced when the scan dim is
   not the minor one; a block-wide parallel scan would be the next step (it reassociates,
   so only for exact reducers or with a tolerance). The GPU path is unmeasured yet. */
#include "gpu_internal.h"

hj_status emitg_scan(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero, const char *name,
                     emit_kernel *out) {
  memset(out, 0, sizeof *out);
  emitp_scan_plan p;
  hj_status st = emitp_scan_plan_make(em, fusion, hero, &p);
  if (st) return st;
  int block = p.rows >= 128 ? 128 : (int)((p.rows + 31) / 32 * 32);
  if (block < 32) block = 32;
  emit_fn f;
  st = emitg_kernel_begin(&f, em, name, fusion, -1, block);
  if (st) return st;
  if (f.nouts != p.nleaves) emit_fail(&f, HJ_ERR_SHAPE, "%d output buffers for %d root leaves", f.nouts, p.nleaves);
  if (f.status == HJ_OK && p.rows > 0) {
    LLVMValueRef gid = emitg_global_id(&f);
    emitg_region r;
    emitg_if_begin(&f, &r, LLVMBuildICmp(em->b, LLVMIntULT, gid, emit_i64(&f, p.rows), ""), "row");
    emitp_scan_row(&f, &p, gid);
    emitg_if_end(&f, &r);
  }
  st = emit_kernel_end(&f);
  if (st) return st;
  out->kind = EMIT_KIND_SCAN;
  out->parallel_n = p.rows;
  out->grain = 1;
  snprintf(out->name, sizeof out->name, "%s", name);
  emitg_launch_1d(out, p.rows, block);
  return HJ_OK;
}
