/* gpu_scatter.c — the GPU scatter emitter: scatter.c's plan and body, one thread per row
   of the operand's leading dim (thread r copies row r of the operands, then walks every
   update in order and applies those that land in row r). Deterministic, no atomics, the
   evaluator's bits; parallel only over the leading dim, and each thread reads every index
   vector: right for embedding gradients (thousands of rows), slow for a scatter into a
   short leading dim. A warp per row (coalesced windows) is the next step; the GPU path is
   unmeasured yet. */
#include "gpu_internal.h"

static void emgc_row(emit_fn *f, const void *plan, LLVMValueRef row) {
  emitp_scatter_body(f, plan, row, LLVMBuildNUWAdd(f->em->b, row, emit_i64(f, 1), ""));
}

hj_status emitg_scatter(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero,
                        const char *name, emit_kernel *out) {
  emitp_scatter_plan p;
  hj_status st = emitp_scatter_plan_make(em, fusion, hero, &p);
  return st ? st : emitg_rows(em, fusion, name, p.rows, p.n, emgc_row, &p, EMIT_KIND_SCATTER, out);
}
