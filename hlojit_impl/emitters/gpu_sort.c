/* gpu_sort.c — the GPU sort emitter: sort.c's network (plan, copy and step shared), one
   block of T threads per row (T = 256, or fewer, a multiple of 32, for short rows):
       copy: thread j moves elements j, j+T, ... of the row into the outputs; barrier;
       for t = 1 .. L, s = t-1 .. 0: thread j runs step (t, s) for i = j, j+T, ...; barrier
   The network works in place in the outputs (global memory; bar.sync orders a block's
   global writes before its later reads), every step's pairs disjoint, so the threads of a
   step never race. Rows run in parallel, one per block (grid.x = rows < 2^31).
   Example: argsort f32[16,1000]: 16 blocks of 256 threads, 55 steps, 4 elements per
   thread per step. A row longer than a few thousand elements would want the shared-memory
   tiles of XLA's GPU sort; not built (the GPU path is unmeasured yet). */
#include "gpu_internal.h"

static void emgt_row(emit_fn *f, const void *plan, LLVMValueRef row) { emitp_topk_row(f, plan, row); }

hj_status emitg_sort(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero,
                     const char *name, emit_kernel *out) {
  memset(out, 0, sizeof *out);
  emitp_sort_plan p;
  if (hero->op == HLO_OP_TOPK) {   /* one thread per row, topk.c's running top k */
    hj_status st = emitp_topk_plan_make(em, fusion, hero, &p);
    return st ? st : emitg_rows(em, fusion, name, p.rows, 2, emgt_row, &p, EMIT_KIND_SORT, out);
  }
  hj_status st = emitp_sort_plan_make(em, fusion, hero, &p);
  if (st) return st;
  if (p.rows > INT32_MAX)
    return hj__err(em->ctx, HJ_ERR_UNSUPPORTED, "sort emitter, fusion '%s': more than 2^31 rows", fusion->name);
  int64_t half = (p.n + 1) / 2;
  int T = half >= 256 ? 256 : (int)((half + 31) / 32 * 32);
  if (T < 32) T = 32;
  emit_fn f;
  st = emitg_kernel_begin(&f, em, name, fusion, -1, T);
  if (st) return st;
  if (f.nouts != p.nops) emit_fail(&f, HJ_ERR_SHAPE, "%d output buffers for %d sorted operands", f.nouts, p.nops);
  if (f.status == HJ_OK && p.rows > 0) {
    LLVMBuilderRef b = em->b;
    LLVMValueRef row = emitg_sreg64(&f, "ctaid.x"), tid = emitg_sreg64(&f, "tid.x");
    LLVMValueRef base = emitp_sort_row_base(&f, &p, row);
    emit_loop lc, lt, ls, li;
    emit_loop_begin(&f, &lc, tid, emit_i64(&f, p.n), T, "sort.copy");
    emitp_sort_copy(&f, &p, base, lc.iv);
    emit_loop_end(&f, &lc);
    emitg_barrier(&f);
    emit_loop_begin(&f, &lt, emit_i64(&f, 1), emit_i64(&f, p.steps + 1), 1, "sort.t");
    emit_loop_begin(&f, &ls, emit_i64(&f, 0), lt.iv, 1, "sort.s");
    LLVMValueRef s = LLVMBuildSub(b, LLVMBuildSub(b, lt.iv, emit_i64(&f, 1), ""), ls.iv, "s");
    emit_loop_begin(&f, &li, tid, emit_i64(&f, p.n), T, "sort.i");
    emitp_sort_step(&f, &p, base, lt.iv, s, li.iv);
    emit_loop_end(&f, &li);
    emitg_barrier(&f);
    emit_loop_end(&f, &ls);
    emit_loop_end(&f, &lt);
  }
  st = emit_kernel_end(&f);
  if (st) return st;
  out->kind = EMIT_KIND_SORT;
  out->parallel_n = p.rows * p.n;
  out->grain = 1;
  snprintf(out->name, sizeof out->name, "%s", name);
  emitg_launch_1d(out, p.rows * T, T);
  return HJ_OK;
}
