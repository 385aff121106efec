/* elemental_index.c — the elemental emitter's structural ops: each maps the output index to
   operand indices (pure index arithmetic, no data movement), or, for reduce, folds a loop.
   Semantics are the evaluator's (eval_ops.c, eval_gather.c, eval_reduce.c).

   Index maps, for an output index o:
     iota           o[dim], converted like the evaluator's store of an int64
     broadcast      operand i <- o[dims[i]] (0 for a stretched size-1 dim)
     reshape        size-1 dims dropped/added: the other dims pass through; otherwise the
                    row-major linear index of o, delinearised in the operand's dims (the
                    cache gives back the original linear index, so in a loop over linear
                    indices a reshape costs nothing)
     bitcast        physical: o -> byte offset by the result's layout -> operand index by
                    the operand's layout (reshape when both layouts are the default)
     transpose      operand perm[i] <- o[i]
     slice          operand i <- start[i] + o[i]*stride[i]
     reverse        operand d <- dims[d]-1-o[d] for reversed d
   Ops that may point outside an operand never load there: pad, concatenate and
   dynamic-update-slice compute the in-bounds index (clamped), load there, and select.
   Example, pad f32[3] -> f32[8] with padding=1_2_1 (lo 1, hi 2, interior 1): operand
   elements 0..2 land at 1, 3, 5 (hlo_pad_range: i0 = 0, i1 = 3, first = 1, step 2); o = 5:
   t = o - first = 4, t % 2 == 0 and t / 2 = 2, so the result is operand[2]; o = 4: t = 3
   is odd, so the pad value (operand[1] is loaded at the clamped index and discarded).
   Positions are taken relative to the first element that lands, not to lo, so that
   lo = -INT64_MAX or interior = INT64_MAX never overflow an i64.
   dynamic-slice and gather clamp their starts to [0, dim - size] (XLA), so they never
   read out of bounds either.

   reduce: acc_k = init_k, then for each reduced position in row-major order (one counted
   loop per reduced dim, outermost first) acc = to_apply(acc..., x...) through
   emit_scalar_call: the evaluator's order, so float sums match it bit for bit. The
   accumulators are allocas (SROA makes them registers). */
#include "emit_internal.h"

static LLVMValueRef eli_fail(emit_fn *f, const hlo_instr *ins, const char *why) {
  char b[128];
  emit_fail(f, HJ_ERR_SHAPE, "op '%s' (%s, %s): %s", hlo_opcode_name(ins->op), ins->name,
            hlo_shape_str(&ins->shape, b, sizeof b), why);
  return emitp_undef(f, &ins->shape);
}

static LLVMValueRef eli_clamp(emit_fn *f, LLVMValueRef v, int64_t lo, int64_t hi) {
  LLVMBuilderRef b = f->em->b;
  v = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, v, emit_i64(f, lo), ""), emit_i64(f, lo), v, "");
  return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, v, emit_i64(f, hi), ""), emit_i64(f, hi), v, "");
}

static bool eli_array_op(const hlo_instr *ins, int k) {
  return k < ins->noperands && hlo_shape_is_array(&ins->operands[k]->shape);
}

/* ---- pure index maps ----------------------------------------------------------------------- */

static LLVMValueRef eli_broadcast(emit_fn *f, const hlo_instr *ins, const emit_index *idx) {
  const hlo_shape *os = &ins->operands[0]->shape;
  if (ins->dims.n != os->rank) return eli_fail(f, ins, "dimensions do not match the operand");
  emit_index j = { .rank = os->rank };
  for (int i = 0; i < os->rank; i++) {
    int64_t d = ins->dims.v[i];
    if (d < 0 || d >= idx->rank) return eli_fail(f, ins, "dimension out of range");
    j.v[i] = os->dims[i] == 1 ? emit_i64(f, 0) : idx->v[d];
  }
  return emit_elemental(f, ins->operands[0], &j);
}

/* reshape: the dims fall into groups where the running products of both shapes meet
   (common factors: [256,768] -> [256,12,64] is {256}={256}, {768}={12,64}). Within a group
   the result indices' position is spread over the operand's dims of that group only: a
   split costs a multiply-add (768 <- h*64 + d) and a size-1 dim nothing, where the
   position over the whole shape needed a division and a remainder per dim, which kept
   LLVM from vectorising the head split of attention (scalar loads: 8.7 GB/s in
   `hlojit run --profile` on f32[256,2304] -> q, k, v heads; 42 GB/s after). */
static LLVMValueRef eli_reshape(emit_fn *f, const hlo_instr *ins, const emit_index *idx) {
  const hlo_instr *o = ins->operands[0];
  const hlo_shape *os = &o->shape, *rs = &ins->shape;
  if (hlo_shape_numel(os) != hlo_shape_numel(rs)) return eli_fail(f, ins, "element counts differ");
  LLVMBuilderRef b = f->em->b;
  emit_index j = { .rank = os->rank };
  if (hlo_shape_numel(os) == 0) {   /* nothing is read; any in-range index will do */
    emitp_zero_index(f, os->rank, &j);
    return emit_elemental(f, o, &j);
  }
  int i = 0, k = 0;
  while (i < os->rank || k < rs->rank) {
    int i0 = i, k0 = k;
    int64_t pa = i < os->rank ? os->dims[i++] : 1, pr = k < rs->rank ? rs->dims[k++] : 1;
    while (pa != pr) {
      if (pa < pr && i < os->rank) pa *= os->dims[i++];
      else if (pr < pa && k < rs->rank) pr *= rs->dims[k++];
      else return eli_fail(f, ins, "dims have no common factors");
    }
    LLVMValueRef lin = NULL;   /* the group's result position, Horner over its dims */
    for (int d = k0; d < k; d++) {
      if (rs->dims[d] == 1) continue;
      lin = lin ? LLVMBuildNUWAdd(b, LLVMBuildNUWMul(b, lin, emit_i64(f, rs->dims[d]), ""), idx->v[d], "")
                : idx->v[d];
    }
    if (!lin) lin = emit_i64(f, 0);
    int64_t inner = 1;         /* ... spread over the operand's dims, minor first */
    for (int d = i - 1; d >= i0; d--) {
      int64_t n = os->dims[d];
      bool outer = true;
      for (int e = i0; e < d; e++) outer &= os->dims[e] == 1;
      if (n == 1) j.v[d] = emit_i64(f, 0);
      else {
        LLVMValueRef q = inner == 1 ? lin : LLVMBuildUDiv(b, lin, emit_i64(f, inner), "");
        j.v[d] = outer ? q : LLVMBuildURem(b, q, emit_i64(f, n), "");
      }
      inner *= n;
    }
  }
  return emit_elemental(f, o, &j);
}

static LLVMValueRef eli_bitcast(emit_fn *f, const hlo_instr *ins, const emit_index *idx) {
  const hlo_instr *o = ins->operands[0];
  const hlo_shape *os = &o->shape, *rs = &ins->shape;
  if (hlo_type_size(os->type) != hlo_type_size(rs->type) || hlo_shape_numel(os) != hlo_shape_numel(rs))
    return eli_fail(f, ins, "element sizes or counts differ");
  if (hlo_shape_layout_is_default(os) && hlo_shape_layout_is_default(rs))
    return eli_reshape(f, ins, idx);
  int64_t rp[HLO_MAX_RANK], op[HLO_MAX_RANK];
  if (!hlo_shape_layout_strides(rs, rp) || !hlo_shape_layout_strides(os, op))
    return eli_fail(f, ins, "layout is not a permutation of the dims");
  LLVMBuilderRef b = f->em->b;
  LLVMValueRef p = emit_i64(f, 0);
  for (int d = 0; d < rs->rank; d++)
    if (rs->dims[d] != 1) p = LLVMBuildNSWAdd(b, p, LLVMBuildNSWMul(b, idx->v[d], emit_i64(f, rp[d]), ""), "");
  emit_index j = { .rank = os->rank };
  int64_t total = hlo_shape_numel(os);
  for (int d = 0; d < os->rank; d++) {
    if (os->dims[d] == 1) { j.v[d] = emit_i64(f, 0); continue; }
    LLVMValueRef q = op[d] == 1 ? p : LLVMBuildUDiv(b, p, emit_i64(f, op[d]), "");
    j.v[d] = op[d] * os->dims[d] == total ? q : LLVMBuildURem(b, q, emit_i64(f, os->dims[d]), "");
  }
  return emit_elemental(f, o, &j);
}

static LLVMValueRef eli_transpose(emit_fn *f, const hlo_instr *ins, const emit_index *idx) {
  const hlo_shape *os = &ins->operands[0]->shape;
  if (ins->dims.n != os->rank || idx->rank != os->rank) return eli_fail(f, ins, "bad permutation");
  emit_index j = { .rank = os->rank };
  for (int i = 0; i < os->rank; i++) {
    int64_t p = ins->dims.v[i];
    if (p < 0 || p >= os->rank) return eli_fail(f, ins, "bad permutation");
    j.v[p] = idx->v[i];
  }
  return emit_elemental(f, ins->operands[0], &j);
}

static LLVMValueRef eli_slice(emit_fn *f, const hlo_instr *ins, const emit_index *idx) {
  const hlo_shape *os = &ins->operands[0]->shape;
  int n = os->rank;
  if (ins->slice_start.n != n || idx->rank != n || (ins->slice_stride.n && ins->slice_stride.n != n))
    return eli_fail(f, ins, "slice has the wrong number of dims");
  LLVMBuilderRef b = f->em->b;
  emit_index j = { .rank = n };
  for (int i = 0; i < n; i++) {
    int64_t a = ins->slice_start.v[i], s = ins->slice_stride.n ? ins->slice_stride.v[i] : 1;
    /* one result along i: its index is 0 whatever the stride (which may be INT64_MAX) */
    LLVMValueRef v = s == 1 ? idx->v[i] : ins->shape.dims[i] <= 1 ? emit_i64(f, 0)
                                        : LLVMBuildNSWMul(b, idx->v[i], emit_i64(f, s), "");
    j.v[i] = a ? LLVMBuildNSWAdd(b, v, emit_i64(f, a), "") : v;
  }
  return emit_elemental(f, ins->operands[0], &j);
}

static LLVMValueRef eli_reverse(emit_fn *f, const hlo_instr *ins, const emit_index *idx) {
  const hlo_shape *os = &ins->operands[0]->shape;
  emit_index j = *idx;
  for (int i = 0; i < ins->dims.n; i++) {
    int64_t d = ins->dims.v[i];
    if (d < 0 || d >= os->rank) return eli_fail(f, ins, "dimension out of range");
    j.v[d] = LLVMBuildNSWSub(f->em->b, emit_i64(f, os->dims[d] - 1), idx->v[d], "");
  }
  return emit_elemental(f, ins->operands[0], &j);
}

static LLVMValueRef eli_iota(emit_fn *f, const hlo_instr *ins, const emit_index *idx) {
  if (ins->index < 0 || ins->index >= idx->rank) return eli_fail(f, ins, "iota_dimension out of range");
  return emitp_convert(f, idx->v[ins->index], HLO_S64, ins->shape.type);
}

/* ---- selecting ops --------------------------------------------------------------------- */

static LLVMValueRef eli_pad(emit_fn *f, const hlo_instr *ins, const emit_index *idx) {
  const hlo_instr *o = ins->operands[0];
  const hlo_shape *os = &o->shape;
  int n = os->rank;
  emit_index z = { 0 };
  if (ins->pad_lo.n != n || ins->pad_hi.n != n || (ins->pad_interior.n && ins->pad_interior.n != n))
    return eli_fail(f, ins, "padding has the wrong number of dims");
  LLVMValueRef padv = emit_elemental(f, ins->operands[1], &z);
  if (hlo_shape_numel(os) == 0) return padv;
  LLVMBuilderRef b = f->em->b;
  LLVMValueRef in = LLVMConstInt(f->em->t_i1, 1, 0);
  emit_index j = { .rank = n };
  for (int d = 0; d < n; d++) {
    /* Operand elements [i0, i1) land at first, first + step, ...: t = o - first and
       q = t / step are small, whatever lo is (o - lo itself need not fit in i64). */
    int64_t dim = os->dims[d], interior = ins->pad_interior.n ? ins->pad_interior.v[d] : 0;
    int64_t step = hlo_pad_step(dim, interior), i0, i1, first;
    hlo_pad_range(dim, ins->pad_lo.v[d], step, ins->shape.dims[d], &i0, &i1, &first);
    if (i1 == i0) return padv;   /* no operand element lands in this dim */
    LLVMValueRef t = LLVMBuildNSWSub(b, idx->v[d], emit_i64(f, first), "");
    LLVMValueRef tc = eli_clamp(f, t, 0, (i1 - i0 - 1) * step);
    LLVMValueRef q = step == 1 ? tc : LLVMBuildUDiv(b, tc, emit_i64(f, step), "");
    LLVMValueRef ok = LLVMBuildICmp(b, LLVMIntEQ, t, tc, "");   /* inside [0, (i1-i0-1)*step] */
    if (step > 1)
      ok = LLVMBuildAnd(b, ok, LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildURem(b, tc, emit_i64(f, step), ""),
                                             emit_i64(f, 0), ""), "");
    in = LLVMBuildAnd(b, in, ok, "");
    j.v[d] = i0 ? LLVMBuildNSWAdd(b, q, emit_i64(f, i0), "") : q;
  }
  return LLVMBuildSelect(b, in, emit_elemental(f, o, &j), padv, "");
}

static LLVMValueRef eli_concatenate(emit_fn *f, const hlo_instr *ins, const emit_index *idx) {
  int64_t axis = ins->dims.n == 1 ? ins->dims.v[0] : -1, at = 0;
  if (axis < 0 || axis >= idx->rank) return eli_fail(f, ins, "bad concatenate dimension");
  LLVMBuilderRef b = f->em->b;
  LLVMValueRef r = NULL;
  for (int k = 0; k < ins->noperands; k++) {
    if (!eli_array_op(ins, k)) return eli_fail(f, ins, "operands must be arrays");
    int64_t d = ins->operands[k]->shape.dims[axis];
    if (d == 0) continue;
    emit_index j = *idx;
    LLVMValueRef t = LLVMBuildNSWSub(b, idx->v[axis], emit_i64(f, at), "");
    j.v[axis] = eli_clamp(f, t, 0, d - 1);
    LLVMValueRef v = emit_elemental(f, ins->operands[k], &j);
    /* operands are tried in order: the later one wins where idx[axis] >= its offset */
    r = r ? LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGE, t, emit_i64(f, 0), ""), v, r, "") : v;
    at += d;
  }
  return r ? r : eli_fail(f, ins, "no non-empty operand");
}

/* Clamped start indices of dynamic-(update-)slice: one scalar operand per dim from
   |first| on, or one rank-1 operand; start[i] in [0, dims[i] - size[i]]. */
static bool eli_dyn_starts(emit_fn *f, const hlo_instr *ins, int first, const hlo_shape *os,
                           const int64_t *size, LLVMValueRef *start) {
  int n = os->rank, nidx = ins->noperands - first;
  const hlo_instr *vec = nidx == 1 && ins->operands[first]->shape.rank == 1 ? ins->operands[first] : NULL;
  if (vec ? vec->shape.dims[0] != n : nidx != n) return false;
  for (int i = 0; i < n; i++) {
    const hlo_instr *l = vec ? vec : ins->operands[first + i];
    if (!hlo_type_is_int(l->shape.type) || (!vec && l->shape.rank != 0)) return false;
    if (size[i] < 0 || size[i] > os->dims[i]) return false;
    emit_index j = { .rank = vec ? 1 : 0 };
    if (vec) j.v[0] = emit_i64(f, i);
    LLVMValueRef v = emitp_index_value(f, emit_elemental(f, l, &j), l->shape.type);
    start[i] = eli_clamp(f, v, 0, os->dims[i] - size[i]);
  }
  return true;
}

static LLVMValueRef eli_dynamic_slice(emit_fn *f, const hlo_instr *ins, const emit_index *idx) {
  const hlo_shape *os = &ins->operands[0]->shape;
  LLVMValueRef st[HLO_MAX_RANK];
  if (os->rank != idx->rank || !eli_dyn_starts(f, ins, 1, os, ins->shape.dims, st))
    return eli_fail(f, ins, "start indices do not fit the operand");
  emit_index j = { .rank = os->rank };
  for (int d = 0; d < os->rank; d++) j.v[d] = LLVMBuildNSWAdd(f->em->b, st[d], idx->v[d], "");
  return emit_elemental(f, ins->operands[0], &j);
}

static LLVMValueRef eli_dus(emit_fn *f, const hlo_instr *ins, const emit_index *idx) {
  if (ins->noperands < 3 || !eli_array_op(ins, 0) || !eli_array_op(ins, 1))
    return eli_fail(f, ins, "needs an operand, an update and start indices");
  const hlo_shape *os = &ins->operands[0]->shape, *us = &ins->operands[1]->shape;
  LLVMValueRef st[HLO_MAX_RANK];
  if (us->rank != os->rank || os->rank != idx->rank || !eli_dyn_starts(f, ins, 2, os, us->dims, st))
    return eli_fail(f, ins, "update or start indices do not fit the operand");
  LLVMValueRef base = emit_elemental(f, ins->operands[0], idx);
  if (hlo_shape_numel(us) == 0) return base;
  LLVMBuilderRef b = f->em->b;
  LLVMValueRef in = LLVMConstInt(f->em->t_i1, 1, 0);
  emit_index j = { .rank = us->rank };
  for (int d = 0; d < us->rank; d++) {
    LLVMValueRef t = LLVMBuildNSWSub(b, idx->v[d], st[d], "");
    j.v[d] = eli_clamp(f, t, 0, us->dims[d] - 1);
    in = LLVMBuildAnd(b, in, LLVMBuildICmp(b, LLVMIntEQ, t, j.v[d], ""), "");
  }
  return LLVMBuildSelect(b, in, emit_elemental(f, ins->operands[1], &j), base, "");
}

/* ---- gather (eval_gather.c: batch dims, start vectors, clamped starts, windows) ---------- */

static bool eli_has(const hlo_ints *v, int64_t x) {
  for (int i = 0; i < v->n; i++) if (v->v[i] == x) return true;
  return false;
}

static LLVMValueRef eli_gather(emit_fn *f, const hlo_instr *ins, const emit_index *idx) {
  const hlo_gather_dims *g = &ins->gather;
  if (!eli_array_op(ins, 0) || !eli_array_op(ins, 1)) return eli_fail(f, ins, "operands must be arrays");
  const hlo_instr *ix = ins->operands[1];
  const hlo_shape *os = &ins->operands[0]->shape, *is = &ix->shape;
  int ir = is->rank, orank = os->rank;
  int64_t ivd = g->index_vector_dim;
  if (ivd < 0 || ivd > ir || !hlo_type_is_int(is->type) || g->slice_sizes.n != orank)
    return eli_fail(f, ins, "index_vector_dim, index type or slice_sizes do not fit");
  int64_t nvec = ivd == ir ? 1 : is->dims[ivd];
  int idims[HLO_MAX_RANK], nb = 0, wdims[HLO_MAX_RANK], nw = 0, bdims[HLO_MAX_RANK], nbo = 0;
  for (int d = 0; d < ir; d++) if (d != ivd) idims[nb++] = d;
  for (int d = 0; d < orank; d++)
    if (!eli_has(&g->collapsed_slice_dims, d) && !eli_has(&g->operand_batching_dims, d)) wdims[nw++] = d;
  for (int d = 0; d < idx->rank; d++) if (!eli_has(&g->offset_dims, d)) bdims[nbo++] = d;
  if (g->start_index_map.n != nvec || nw != g->offset_dims.n || nbo != nb ||
      g->operand_batching_dims.n != g->start_indices_batching_dims.n)
    return eli_fail(f, ins, "offset/collapsed/batching dims do not fit the shapes");
  LLVMValueRef sin[HLO_MAX_RANK];
  for (int d = 0; d < orank; d++) sin[d] = emit_i64(f, 0);
  emit_index ii = { .rank = ir };
  for (int j = 0; j < nb; j++) ii.v[idims[j]] = idx->v[bdims[j]];
  for (int64_t k = 0; k < nvec; k++) {
    int64_t od = g->start_index_map.v[k];
    if (od < 0 || od >= orank) return eli_fail(f, ins, "start_index_map out of range");
    if (ivd < ir) ii.v[ivd] = emit_i64(f, k);
    sin[od] = emitp_index_value(f, emit_elemental(f, ix, &ii), is->type);
  }
  for (int i = 0; i < g->operand_batching_dims.n; i++) {
    int64_t od = g->operand_batching_dims.v[i], id = g->start_indices_batching_dims.v[i];
    if (od < 0 || od >= orank || id < 0 || id >= ir || id == ivd) return eli_fail(f, ins, "bad batching dims");
    sin[od] = idx->v[bdims[id - (id > ivd)]];
  }
  emit_index oi = { .rank = orank };
  for (int d = 0; d < orank; d++) {
    int64_t ss = g->slice_sizes.v[d];
    if (ss < 0 || ss > os->dims[d]) return eli_fail(f, ins, "slice_sizes exceed the operand");
    oi.v[d] = eli_clamp(f, sin[d], 0, os->dims[d] - ss);
  }
  for (int k = 0; k < nw; k++) {
    int64_t rd = g->offset_dims.v[k];
    if (rd < 0 || rd >= idx->rank) return eli_fail(f, ins, "offset_dims out of range");
    oi.v[wdims[k]] = LLVMBuildNSWAdd(f->em->b, oi.v[wdims[k]], idx->v[rd], "");
  }
  return emit_elemental(f, ins->operands[0], &oi);
}

/* ---- reduce -------------------------------------------------------------------------------- */

LLVMValueRef emitp_reduce(emit_fn *f, const hlo_instr *ins, int sub, const emit_index *idx) {
  if (ins->op == HLO_OP_REDUCE_WINDOW) return emitp_reduce_window(f, ins, sub, idx);
  int n = ins->noperands / 2;
  if (n < 1 || n > 16 || ins->noperands != 2 * n || ins->ncalls < 1 || !ins->calls[0] || sub >= n)
    return eli_fail(f, ins, "needs inputs, as many inits, and a computation (at most 16 inputs)");
  if (n > 1) {
    LLVMValueRef c = emitp_cache_get(f, ins, sub + 1, idx);
    if (c) return c;
  }
  const hlo_shape *is = &ins->operands[0]->shape;
  bool red[HLO_MAX_RANK] = { false };
  for (int i = 0; i < ins->dims.n; i++) {
    int64_t d = ins->dims.v[i];
    if (d < 0 || d >= is->rank || red[d]) return eli_fail(f, ins, "bad dimensions");
    red[d] = true;
  }
  if (idx->rank != is->rank - ins->dims.n) return eli_fail(f, ins, "result rank does not fit");
  LLVMBuilderRef b = f->em->b;
  emit_index z = { 0 }, in = { .rank = is->rank };
  LLVMValueRef acc[16], res[16], args[32];
  LLVMTypeRef ty[16];
  bool empty = false;
  for (int k = 0; k < n; k++) {
    if (!eli_array_op(ins, k) || !eli_array_op(ins, n + k)) return eli_fail(f, ins, "operands must be arrays");
    res[k] = emit_elemental(f, ins->operands[n + k], &z);
    ty[k] = LLVMTypeOf(res[k]);
  }
  for (int d = 0, j = 0; d < is->rank; d++) {
    if (!red[d]) in.v[d] = idx->v[j++];
    else empty |= is->dims[d] == 0;
  }
  if (!empty && ins->dims.n > 0) {
    for (int k = 0; k < n; k++) {
      acc[k] = emitp_entry_alloca(f, ty[k], "acc");
      LLVMBuildStore(b, res[k], acc[k]);
    }
    emit_loop loops[HLO_MAX_RANK];
    int nl = 0;
    for (int d = 0; d < is->rank; d++) {
      if (!red[d]) continue;
      emit_loop_begin(f, &loops[nl], emit_i64(f, 0), emit_i64(f, is->dims[d]), 1, "red");
      in.v[d] = loops[nl++].iv;
    }
    for (int k = 0; k < n; k++) {
      args[k] = LLVMBuildLoad2(b, ty[k], acc[k], "");
      args[n + k] = emit_elemental(f, ins->operands[k], &in);
    }
    emit_scalar_call(f, ins->calls[0], args, 2 * n, res, n);
    for (int k = 0; k < n; k++) LLVMBuildStore(b, res[k], acc[k]);
    while (nl > 0) emit_loop_end(f, &loops[--nl]);
    for (int k = 0; k < n; k++) res[k] = LLVMBuildLoad2(b, ty[k], acc[k], "");
  } else if (!empty) {   /* no reduced dims: one application per element */
    for (int k = 0; k < n; k++) {
      args[k] = res[k];
      args[n + k] = emit_elemental(f, ins->operands[k], &in);
    }
    emit_scalar_call(f, ins->calls[0], args, 2 * n, res, n);
  }
  if (n > 1)
    for (int k = 0; k < n; k++) emitp_cache_put(f, ins, k + 1, idx, res[k]);
  return res[sub];
}

/* ---- dot (the loop kernel's form: f64, integer and pred dots; eval_reduce.c's sums) ---- */

/* Σ over the contracting dims of lhs * rhs at the output index: floats accumulated in
   double, integers in 64 bits (wrapping, then truncated to the result type), pred as
   OR of ANDs; the evaluator's semantics (its float sums run in another order: not bit-equal
   for long rows). The matmul kernels take the f32 dots; this is the fallback for the rest. */
static LLVMValueRef eli_dot(emit_fn *f, const hlo_instr *ins, const emit_index *idx) {
  const hlo_dot_dims *dd = &ins->dot;
  if (!eli_array_op(ins, 0) || !eli_array_op(ins, 1)) return eli_fail(f, ins, "operands must be arrays");
  const hlo_instr *L = ins->operands[0], *R = ins->operands[1];
  const hlo_shape *ls = &L->shape, *rs = &R->shape;
  int nb = dd->lhs_batch.n, nc = dd->lhs_contract.n;
  if (dd->rhs_batch.n != nb || dd->rhs_contract.n != nc) return eli_fail(f, ins, "dimension numbers differ");
  emit_index li = { .rank = ls->rank }, ri = { .rank = rs->rank };
  int o = 0;
  for (int i = 0; i < nb; i++) {
    if (o >= idx->rank) return eli_fail(f, ins, "result rank does not fit");
    li.v[dd->lhs_batch.v[i]] = ri.v[dd->rhs_batch.v[i]] = idx->v[o++];
  }
  for (int side = 0; side < 2; side++) {
    const hlo_shape *s = side ? rs : ls;
    const hlo_ints *bat = side ? &dd->rhs_batch : &dd->lhs_batch, *con = side ? &dd->rhs_contract : &dd->lhs_contract;
    for (int d = 0; d < s->rank; d++) {
      if (eli_has(bat, d) || eli_has(con, d)) continue;
      if (o >= idx->rank) return eli_fail(f, ins, "result rank does not fit");
      (side ? &ri : &li)->v[d] = idx->v[o++];
    }
  }
  if (o != idx->rank) return eli_fail(f, ins, "result rank does not fit");
  hlo_type t = ins->shape.type;
  bool pred = t == HLO_PRED, fl = hlo_type_is_float(t);
  hlo_type at = pred ? HLO_PRED : fl ? HLO_F64 : HLO_S64;
  emit_module *em = f->em;
  LLVMBuilderRef b = em->b;
  LLVMTypeRef aty = emit_compute_type(em, at);
  LLVMValueRef acc = emitp_entry_alloca(f, aty, "dot.acc");
  LLVMBuildStore(b, fl ? LLVMConstReal(aty, 0) : LLVMConstInt(aty, 0, 0), acc);
  emit_loop loops[HLO_MAX_RANK];
  for (int i = 0; i < nc; i++) {
    int64_t lc = dd->lhs_contract.v[i], rc = dd->rhs_contract.v[i];
    if (lc < 0 || lc >= ls->rank || rc < 0 || rc >= rs->rank || ls->dims[lc] != rs->dims[rc])
      return eli_fail(f, ins, "contracting dims do not fit");
    emit_loop_begin(f, &loops[i], emit_i64(f, 0), emit_i64(f, ls->dims[lc]), 1, "dot.k");
    li.v[lc] = ri.v[rc] = loops[i].iv;
  }
  LLVMValueRef x = emitp_convert(f, emit_elemental(f, L, &li), ls->type, at);
  LLVMValueRef y = emitp_convert(f, emit_elemental(f, R, &ri), rs->type, at);
  LLVMValueRef a = LLVMBuildLoad2(b, aty, acc, "");
  LLVMValueRef v = pred ? LLVMBuildOr(b, a, LLVMBuildAnd(b, x, y, ""), "")
                 : fl ? LLVMBuildFAdd(b, a, LLVMBuildFMul(b, x, y, ""), "")
                      : LLVMBuildAdd(b, a, LLVMBuildMul(b, x, y, ""), "");
  LLVMBuildStore(b, v, acc);
  for (int i = nc - 1; i >= 0; i--) emit_loop_end(f, &loops[i]);
  return emitp_convert(f, LLVMBuildLoad2(b, aty, acc, "dot"), at, t);
}

/* ---- the switch ---------------------------------------------------------------------------- */

LLVMValueRef emitp_index_op(emit_fn *f, const hlo_instr *ins, const emit_index *idx) {
  switch (ins->op) {
  case HLO_OP_IOTA: case HLO_OP_REDUCE: case HLO_OP_DOT: break;
  case HLO_OP_BROADCAST: case HLO_OP_RESHAPE: case HLO_OP_BITCAST: case HLO_OP_TRANSPOSE:
  case HLO_OP_SLICE: case HLO_OP_REVERSE: case HLO_OP_PAD: case HLO_OP_CONCATENATE:
  case HLO_OP_DYNAMIC_SLICE: case HLO_OP_DYNAMIC_UPDATE_SLICE: case HLO_OP_GATHER:
    if (!eli_array_op(ins, 0)) return eli_fail(f, ins, "operand 0 must be an array");
    break;
  default: return NULL;
  }
  if (!hlo_shape_is_array(&ins->shape) || idx->rank != ins->shape.rank)
    return eli_fail(f, ins, "result must be an array of the index's rank");
  switch (ins->op) {
  case HLO_OP_IOTA: return eli_iota(f, ins, idx);
  case HLO_OP_BROADCAST: return eli_broadcast(f, ins, idx);
  case HLO_OP_RESHAPE: return eli_reshape(f, ins, idx);
  case HLO_OP_BITCAST: return eli_bitcast(f, ins, idx);
  case HLO_OP_TRANSPOSE: return eli_transpose(f, ins, idx);
  case HLO_OP_SLICE: return eli_slice(f, ins, idx);
  case HLO_OP_REVERSE: return eli_reverse(f, ins, idx);
  case HLO_OP_PAD: return eli_pad(f, ins, idx);
  case HLO_OP_CONCATENATE: return eli_concatenate(f, ins, idx);
  case HLO_OP_DYNAMIC_SLICE: return eli_dynamic_slice(f, ins, idx);
  case HLO_OP_DYNAMIC_UPDATE_SLICE: return eli_dus(f, ins, idx);
  case HLO_OP_GATHER: return eli_gather(f, ins, idx);
  case HLO_OP_REDUCE: return emitp_reduce(f, ins, 0, idx);
  case HLO_OP_DOT: return eli_dot(f, ins, idx);
  default: return NULL;
  }
}
