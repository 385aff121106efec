/* dus.c — the in-place dynamic-update-slice emitter: a fusion whose root is (through
   bitcasts) a dynamic-update-slice of (through bitcasts) fused parameter 0, where the runtime
   gives output 0 the buffer of operand 0 (emit_kernel_begin(..., dus_inplace = true)). The
   operand's bytes are already in place, so the kernel writes only the update:
       out[start + i] = update[i]   for every index i of the update's shape,
   starts clamped as XLA does: start[d] = clamp(start[d], 0, operand[d] - update[d]).
   `void NAME(void **bufs, i64 begin, i64 end)`: [begin, end) ranges over the update's outer
   dims (all but the minor one, linearised); the minor dim is the inner loop.

   Walk-through, GPT-2 KV cache: cache f32[12,1024,64], update f32[12,1,64], starts (0, t, 0):
   parallel_n = 12 * 1 = 12; unit u = (h, 0): for i in [0, 64):
       out[h, clamp(t, 0, 1023), i] = update[h, 0, i]      (768 stores for the whole step)
   The update comes from the elemental emitter, so producers (select, convert) fuse.

   Preconditions (else HJ_ERR_UNSUPPORTED, and the runtime uses another path):
   - every bitcast between parameter 0 and the dus, and between the dus and the root, keeps
     row-major bytes (default layouts), so a row-major index in the dus's shape addresses the
     same bytes in the parameter's and the output's buffers;
   - parameter 0 (and those bitcasts) feed nothing but the dus's operand 0: the kernel reads
     no element of the buffer it updates, so chunks cannot race;
   - the fusion has one output. */
#include "emit.h"

static hj_status dus_unsup(emit_module *em, const hlo_instr *fusion, const char *why) {
  return hj__err(em->ctx, HJ_ERR_UNSUPPORTED, "dus emitter, fusion '%s': %s", fusion->name, why);
}

static bool dus_plain_bitcast(const hlo_instr *ins) {
  return ins->op == HLO_OP_BITCAST && ins->noperands == 1 &&
         hlo_shape_layout_is_default(&ins->shape) &&
         hlo_shape_layout_is_default(&ins->operands[0]->shape) &&
         hlo_shape_numel(&ins->shape) == hlo_shape_numel(&ins->operands[0]->shape) &&
         ins->shape.type == ins->operands[0]->shape.type;
}

static bool dus_in_chain(const hlo_instr *const *chain, int n, const hlo_instr *x) {
  for (int i = 0; i < n; i++)
    if (chain[i] == x) return true;
  return false;
}

static hj_status dus_check(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero) {
  const hlo_comp *c = fusion->calls[0];
  if (!hero || hero->op != HLO_OP_DYNAMIC_UPDATE_SLICE || hero->noperands < 2 ||
      hero->shape.type == HLO_TUPLE || hero->noperands != 2 + hero->shape.rank)
    return dus_unsup(em, fusion, "the hero is not a dynamic-update-slice with scalar starts");
  const hlo_instr *r = c->root;
  while (r != hero && dus_plain_bitcast(r)) r = r->operands[0];
  if (r != hero) return dus_unsup(em, fusion, "the root is not the dynamic-update-slice (through plain bitcasts)");
  const hlo_instr *chain[64];
  int n = 0;
  const hlo_instr *x = hero->operands[0];
  while (n < 63 && dus_plain_bitcast(x)) chain[n++] = x, x = x->operands[0];
  if (x->op != HLO_OP_PARAMETER || x->index != 0)
    return dus_unsup(em, fusion, "operand 0 of the dynamic-update-slice is not fused parameter 0");
  chain[n++] = x;
  for (int i = 0; i < arrlen(c->instrs); i++) {
    const hlo_instr *u = c->instrs[i];
    for (int k = 0; k < u->noperands; k++) {
      if (!dus_in_chain(chain, n, u->operands[k])) continue;
      bool ok = (u == hero && k == 0) || (dus_in_chain(chain, n, u) && k == 0);
      if (!ok) return dus_unsup(em, fusion, "the updated buffer is also read by the fusion");
    }
  }
  return HJ_OK;
}

/* start[d] clamped to [0, operand[d] - update[d]], as i64 (computed once, at entry). */
static void dus_starts(emit_fn *f, const hlo_instr *hero, LLVMValueRef *start) {
  LLVMBuilderRef b = f->em->b;
  const hlo_shape *os = &hero->shape, *us = &hero->operands[1]->shape;
  emit_index scalar = { .rank = 0 };
  for (int d = 0; d < os->rank; d++) {
    const hlo_instr *s = hero->operands[2 + d];
    LLVMValueRef v = emit_elemental(f, s, &scalar);
    int bits = 8 * hlo_type_size(s->shape.type);
    if (bits < 64) v = hlo_type_class_of(s->shape.type) == HLO_CLASS_UINT ? LLVMBuildZExt(b, v, f->em->t_i64, "s")
                                                                          : LLVMBuildSExt(b, v, f->em->t_i64, "s");
    if (s->shape.type == HLO_U64)   /* huge unsigned starts clamp to the top, not below 0 */
      v = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, v, emit_i64(f, 0), "neg"),
                          emit_i64(f, INT64_MAX), v, "s");
    LLVMValueRef hi = emit_i64(f, os->dims[d] - us->dims[d]), zero = emit_i64(f, 0);
    v = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, v, zero, "lt0"), zero, v, "s");
    start[d] = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, v, hi, "gthi"), hi, v, "s");
  }
}

static void dus_emit(emit_fn *f, const hlo_instr *hero) {
  LLVMBuilderRef b = f->em->b;
  const hlo_shape *os = &hero->shape, *us = &hero->operands[1]->shape;
  LLVMValueRef start[HLO_MAX_RANK];
  dus_starts(f, hero, start);
  int r = us->rank;
  hlo_shape outer = hlo_shape_scalar(us->type);
  for (int d = 0; d + 1 < r; d++) outer.dims[outer.rank++] = us->dims[d];
  hlo_shape_set_default_layout(&outer);
  emit_loop lu, li;
  emit_loop_begin(f, &lu, f->begin, f->end, 1, "dus.row");
  emit_index ui, oi = { .rank = r };
  emit_delinearize(f, &outer, lu.iv, &ui);
  ui.rank = r;
  if (r > 0) emit_loop_begin(f, &li, emit_i64(f, 0), emit_i64(f, us->dims[r - 1]), 1, "dus.i");
  if (r > 0) ui.v[r - 1] = li.iv;
  for (int d = 0; d < r; d++) oi.v[d] = LLVMBuildNSWAdd(b, start[d], ui.v[d], "o");
  LLVMValueRef v = emit_elemental(f, hero->operands[1], &ui);
  emit_store_elem(f, os->type, f->outs[0], emit_linear_index(f, os, &oi), v);
  if (r > 0) emit_loop_end(f, &li);
  emit_loop_end(f, &lu);
}

hj_status emit_dus_fusion(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero,
                          const char *name, emit_kernel *out) {
  memset(out, 0, sizeof *out);
  if (fusion->ncalls < 1 || !fusion->calls[0])
    return hj__err(em->ctx, HJ_ERR_INVALID_ARG, "dus emitter: fusion '%s' has no computation", fusion->name);
  hj_status st = dus_check(em, fusion, hero);
  emit_fn f;
  if (!st) st = emit_kernel_begin(&f, em, name, fusion, true);
  if (!st) {
    if (f.nouts != 1) emit_fail(&f, HJ_ERR_UNSUPPORTED, "in-place dus with %d outputs", f.nouts);
    else dus_emit(&f, hero);
    st = emit_kernel_end(&f);
  }
  if (!st) {
    const hlo_shape *us = &hero->operands[1]->shape;
    int64_t inner = us->rank ? us->dims[us->rank - 1] : 1;
    out->kind = EMIT_KIND_DUS;
    out->parallel_n = inner ? hlo_shape_numel(us) / inner : 0;
    out->grain = inner >= 4096 ? 1 : 4096 / (inner ? inner : 1);
    snprintf(out->name, sizeof out->name, "%s", name);
  }
  return st;
}

/* ---- for the GPU dus emitter (gpu_dus.c; gpu_internal.h declares these) -------------------- */
hj_status emitp_dus_check(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero);
void emitp_dus_starts(emit_fn *f, const hlo_instr *hero, LLVMValueRef *start);
hj_status emitp_dus_check(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero) {
  return dus_check(em, fusion, hero);
}
void emitp_dus_starts(emit_fn *f, const hlo_instr *hero, LLVMValueRef *start) { dus_starts(f, hero, start); }
