/* dus.c — the in-place dynamic-update-slice emitter: a fusion some of whose output leaves
   are dynamic-update-slices that the runtime writes over their operand's buffer (bit j of
   |mask|: buffer assignment gave output j the buffer of the fused parameter that leaf j
   updates; ir/inplace.c says which leaves may be). That operand's bytes are already in
   place, so for such a leaf the kernel writes only the update:
       out_j[start + i] = update[i]   for every index i of the update's shape,
   starts clamped as XLA does: start[d] = clamp(start[d], 0, operand[d] - update[d]).
   Every other leaf (a sibling the fusion passes merged in: the query slice of a decode
   step beside its two cache updates) is written whole, from the elemental emitter.
   Leaf j's *space* is the update's shape (in place) or the leaf's own; the kernel is
   parallel over u in [0, max_j numel(space_j)), and leaf j handles the u below its own
   numel, at the index u delinearises to in its space.

   CPU: `void NAME(void **bufs, i64 begin, i64 end)`, [begin, end) a range of u; per leaf,
   the rows (all dims but the minor) the range touches, first and last row partial, the
   minor dim the inner loop (LLVM vectorises it): one delinearisation per row.
   GPU (gpu_dus.c): one thread per u, each leaf guarded by u < numel(space_j).

   Walk-through, GPT-2 decode (C = 768, 12 heads): the fusion
       (f32[1,768], f32[12,64,1024], f32[12,1024,64]) fusion(qkv, kc, vc, pos)
   with leaves q = slice(qkv), dus(kc, k(qkv), 0, 0, pos), dus(vc, v(qkv), 0, pos, 0),
   mask 0b110: spaces f32[1,768], f32[12,64,1], f32[12,1,64], each 768 elements: one chunk;
   leaf 2, row (h, 0): for i in [0, 64): out2[h, clamp(pos), i] = v(qkv)[h, 0, i].

   Preconditions (else HJ_ERR_UNSUPPORTED, and the runtime uses another path): every leaf
   in |mask| is an in-place candidate of ir/inplace.c (which also guarantees the kernel
   reads no element of a buffer it updates, so chunks and threads cannot race). */
#include "emit_internal.h"

static hj_status dus_unsup(emit_module *em, const hlo_instr *fusion, const char *why) {
  return hj__err(em->ctx, HJ_ERR_UNSUPPORTED, "dus emitter, fusion '%s': %s", fusion->name, why);
}

hj_status emitp_dus_plan_make(emit_module *em, const hlo_instr *fusion, uint64_t mask,
                              emitp_dus_plan *p) {
  memset(p, 0, sizeof *p);
  if (!fusion || fusion->op != HLO_OP_FUSION || fusion->ncalls < 1 || !fusion->calls[0])
    return hj__err(em->ctx, HJ_ERR_INVALID_ARG, "dus emitter: '%s' is not a fusion with a computation",
                   fusion && fusion->name ? fusion->name : "?");
  hlo_dus_root dr[64];
  int n = hlo_fusion_dus_roots(fusion, dr, 64);
  emitp_leaf lv[64];
  if (n < 1 || emitp_leaves(fusion->calls[0], lv, 64) != n)
    return dus_unsup(em, fusion, "the root is not arrays or a tuple of at most 64 of them");
  if (n < 64 && mask >> n)
    return dus_unsup(em, fusion, "an in-place leaf past the last output");
  for (int j = 0; j < n; j++) {
    emitp_dus_leaf *L = &p->leaf[j];
    L->leaf = lv[j];
    L->space = lv[j].shape;
    if (mask >> j & 1) {
      if (dr[j].param < 0)
        return dus_unsup(em, fusion, "an output marked in place is not a dynamic-update-slice of a "
                                     "parameter that nothing else in the fusion reads");
      L->dus = dr[j].dus;
      L->space = &dr[j].dus->operands[1]->shape;
      p->alias_params |= 1ull << dr[j].param;
      p->alias_outs |= 1ull << j;
    }
    L->work = hlo_shape_numel(L->space);
    if (L->work > p->work) p->work = L->work;
  }
  p->n = n;
  return HJ_OK;
}

/* start[d] of |dus| clamped to [0, operand[d] - update[d]], as i64. */
void emitp_dus_starts(emit_fn *f, const hlo_instr *dus, LLVMValueRef *start) {
  LLVMBuilderRef b = f->em->b;
  const hlo_shape *os = &dus->shape, *us = &dus->operands[1]->shape;
  emit_index scalar = { .rank = 0 };
  for (int d = 0; d < os->rank; d++) {
    const hlo_instr *s = dus->operands[2 + d];
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

void emitp_dus_store(emit_fn *f, const emitp_dus_leaf *L, int j, const LLVMValueRef *start,
                     const emit_index *idx, LLVMValueRef lin) {
  LLVMBuilderRef b = f->em->b;
  if (!L->dus) {
    LLVMValueRef v = L->leaf.sub >= 0 ? emitp_reduce(f, L->leaf.ins, L->leaf.sub, idx)
                                      : emit_elemental(f, L->leaf.ins, idx);
    emit_store_elem(f, L->leaf.shape->type, f->outs[j], lin, v);
    return;
  }
  const hlo_shape *os = &L->dus->shape;
  emit_index oi = { .rank = os->rank };
  for (int d = 0; d < os->rank; d++) oi.v[d] = LLVMBuildNSWAdd(b, start[d], idx->v[d], "o");
  LLVMValueRef v = emit_elemental(f, L->dus->operands[1], idx);
  emit_store_elem(f, os->type, f->outs[j], emit_linear_index(f, os, &oi), v);
}

/* Leaf j over u in [lo, hi) = [begin, end) cut to its space: rows, then the minor dim. */
static void dus_emit_leaf(emit_fn *f, const emitp_dus_leaf *L, int j, const LLVMValueRef *start) {
  LLVMBuilderRef b = f->em->b;
  const hlo_shape *s = L->space;
  int r = s->rank;
  int64_t minor = r ? s->dims[r - 1] : 1;
  if (L->work == 0) return;
  LLVMValueRef W = emit_i64(f, L->work), M = emit_i64(f, minor);
  LLVMValueRef lo = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, f->begin, W, ""), f->begin, W, "lo");
  LLVMValueRef hi = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, f->end, W, ""), f->end, W, "hi");
  LLVMValueRef r0 = LLVMBuildSDiv(b, lo, M, "r0");
  LLVMValueRef r1 = LLVMBuildSDiv(b, LLVMBuildNSWAdd(b, hi, emit_i64(f, minor - 1), ""), M, "r1");
  hlo_shape outer = hlo_shape_scalar(s->type);
  for (int d = 0; d + 1 < r; d++) outer.dims[outer.rank++] = s->dims[d];
  hlo_shape_set_default_layout(&outer);
  emit_loop lr, li;
  emit_loop_begin(f, &lr, r0, r1, 1, "dus.row");
  emit_index idx;
  emit_delinearize(f, &outer, lr.iv, &idx);
  idx.rank = r;
  LLVMValueRef base = LLVMBuildNSWMul(b, lr.iv, M, "base");
  LLVMValueRef a = LLVMBuildNSWSub(b, lo, base, ""), e = LLVMBuildNSWSub(b, hi, base, "");
  LLVMValueRef zero = emit_i64(f, 0);
  a = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, a, zero, ""), zero, a, "i0");
  e = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, e, M, ""), M, e, "i1");
  emit_loop_begin(f, &li, a, e, 1, "dus.i");
  if (r > 0) idx.v[r - 1] = li.iv;
  emitp_dus_store(f, L, j, start, &idx, LLVMBuildNSWAdd(b, base, li.iv, "lin"));
  emit_loop_end(f, &li);
  emit_loop_end(f, &lr);
}

hj_status emit_dus_fusion(emit_module *em, const hlo_instr *fusion, uint64_t mask,
                          const char *name, emit_kernel *out) {
  memset(out, 0, sizeof *out);
  emitp_dus_plan p;
  hj_status st = emitp_dus_plan_make(em, fusion, mask, &p);
  emit_fn f;
  if (!st) st = emit_kernel_begin_aliased(&f, em, name, fusion, p.alias_params, p.alias_outs);
  if (st) return st;
  if (f.nouts != p.n) emit_fail(&f, HJ_ERR_SHAPE, "%d output buffers for %d root leaves", f.nouts, p.n);
  LLVMValueRef start[64][HLO_MAX_RANK];   /* at entry: they dominate every loop */
  for (int j = 0; j < p.n && f.status == HJ_OK; j++)
    if (p.leaf[j].dus) emitp_dus_starts(&f, p.leaf[j].dus, start[j]);
  for (int j = 0; j < p.n && f.status == HJ_OK; j++) dus_emit_leaf(&f, &p.leaf[j], j, start[j]);
  st = emit_kernel_end(&f);
  if (st) return st;
  out->kind = EMIT_KIND_DUS;
  out->parallel_n = p.work;
  out->grain = 4096;
  snprintf(out->name, sizeof out->name, "%s", name);
  return HJ_OK;
}
