/* scan.c — the prefix-scan emitter (CPU), and the body the GPU's (gpu_scan.c) shares: a
   fusion whose root leaves reach one reduce-window that is a prefix scan (ir.h's
   hlo_reduce_window_is_prefix_scan: cumsum, cumprod, cummax along dim d), through
   elementwise epilogue ops. The elemental form computes each output's window again, n
   taps per output (O(n^2) per row: a cumsum of 16 x 1000 floats took 100x XLA's time);
   here each row (all indices but d fixed) is one running fold:
       acc = init; for i in 0 .. n-1: acc = reducer(acc, x[.., i, ..]); out[.., i, ..] = epilogue(acc)
   The evaluator reduces a window's valid taps in order starting from init, so output i is
   init (+) x_0 (+) ... (+) x_i, folded left: the same bits for any reducer and init.
   CPU: parallel over rows; GPU: one thread per row. */
#include "emit_internal.h"

hj_status emitp_scan_plan_make(emit_module *em, const hlo_instr *fusion, const hlo_instr *rw, emitp_scan_plan *p) {
  memset(p, 0, sizeof *p);
  p->rw = rw;
  int d;
  if (!hlo_reduce_window_is_prefix_scan(rw, &d))
    return hj__err(em->ctx, HJ_ERR_UNSUPPORTED, "scan emitter, fusion '%s': not a prefix scan", fusion->name);
  p->nleaves = emitp_leaves(fusion->calls[0], p->leaf, 64);
  for (int j = 0; j < p->nleaves; j++)
    if (p->leaf[j].sub >= 0 || !hlo_same_dims(p->leaf[j].shape, &rw->shape))
      return hj__err(em->ctx, HJ_ERR_UNSUPPORTED, "scan emitter, fusion '%s': an output of another shape",
                     fusion->name);
  if (p->nleaves < 1)
    return hj__err(em->ctx, HJ_ERR_UNSUPPORTED, "scan emitter, fusion '%s': the root is not arrays", fusion->name);
  const hlo_shape *s = &rw->shape;
  p->n = s->dims[d];
  p->inner = 1;
  for (int i = d + 1; i < s->rank; i++) p->inner *= s->dims[i];
  p->rows = p->n ? hlo_shape_numel(s) / p->n : 0;
  return HJ_OK;
}

void emitp_scan_row(emit_fn *f, const emitp_scan_plan *p, LLVMValueRef row) {
  emit_module *em = f->em;
  LLVMBuilderRef b = em->b;
  const hlo_instr *rw = p->rw;
  const hlo_shape *s = &rw->shape;
  LLVMValueRef in = emit_i64(f, p->inner);
  LLVMValueRef base = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, LLVMBuildSDiv(b, row, in, ""), emit_i64(f, p->n * p->inner), ""),
                                      LLVMBuildSRem(b, row, in, ""), "base");
  emit_index z = { .rank = 0 };
  LLVMValueRef init = emit_elemental(f, rw->operands[1], &z);
  LLVMValueRef acc = emitp_entry_alloca(f, LLVMTypeOf(init), "scan.acc");
  LLVMBuildStore(b, init, acc);
  emit_loop l;
  emit_loop_begin(f, &l, emit_i64(f, 0), emit_i64(f, p->n), 1, "scan.i");
  LLVMValueRef lin = LLVMBuildNSWAdd(b, base, LLVMBuildNSWMul(b, l.iv, in, ""), "lin");
  emit_index idx;
  emit_delinearize(f, s, lin, &idx);
  LLVMValueRef args[2] = { LLVMBuildLoad2(b, LLVMTypeOf(init), acc, ""), emit_elemental(f, rw->operands[0], &idx) };
  LLVMValueRef v;
  emit_scalar_call(f, rw->calls[0], args, 2, &v, 1);
  LLVMBuildStore(b, v, acc);
  const hlo_instr *save = f->override_ins;
  LLVMValueRef save_v = f->override_val;
  f->override_ins = rw, f->override_val = v;
  for (int j = 0; j < p->nleaves; j++)
    emit_store_elem(f, p->leaf[j].shape->type, f->outs[j], lin, emit_elemental(f, p->leaf[j].ins, &idx));
  f->override_ins = save, f->override_val = save_v;
  emit_loop_end(f, &l);
}

hj_status emit_scan_fusion(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero, const char *name,
                           emit_kernel *out) {
  memset(out, 0, sizeof *out);
  emitp_scan_plan p;
  hj_status st = emitp_scan_plan_make(em, fusion, hero, &p);
  emit_fn f;
  if (!st) st = emit_kernel_begin(&f, em, name, fusion);
  if (st) return st;
  if (f.nouts != p.nleaves) emit_fail(&f, HJ_ERR_SHAPE, "%d output buffers for %d root leaves", f.nouts, p.nleaves);
  if (f.status == HJ_OK && p.rows > 0) {
    emit_loop lr;
    emit_loop_begin(&f, &lr, f.begin, f.end, 1, "scan.row");
    emitp_scan_row(&f, &p, lr.iv);
    emit_loop_end(&f, &lr);
  }
  st = emit_kernel_end(&f);
  if (st) return st;
  out->kind = EMIT_KIND_SCAN;
  out->parallel_n = p.rows;
  out->grain = p.n >= 4096 ? 1 : 4096 / (p.n ? p.n : 1);
  snprintf(out->name, sizeof out->name, "%s", name);
  return HJ_OK;
}
