/* gpu_scan.c — the GPU prefix-scan emitter: scan.c's plan and running fold, one thread per
   row (the fold along the scan dim is sequential, as the evaluator's order requires). Rows
   of a [B, T] cumsum along T read strided across threads: coalesced when the scan dim is
   not the minor one; a block-wide parallel scan would be the next step (it reassociates,
   so only for exact reducers or with a tolerance). The GPU path is unmeasured yet. */
#include "gpu_internal.h"

static void emgs_row(emit_fn *f, const void *plan, LLVMValueRef row) { emitp_scan_row(f, plan, row); }

hj_status emitg_scan(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero, const char *name,
                     emit_kernel *out) {
  emitp_scan_plan p;
  hj_status st = emitp_scan_plan_make(em, fusion, hero, &p);
  return st ? st : emitg_rows(em, fusion, name, p.rows, p.nleaves, emgs_row, &p, EMIT_KIND_SCAN, out);
}
