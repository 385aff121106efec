/* eval_ops.c — the reference evaluator's structural ops (DESIGN.md section 3), with XLA's
   semantics, for every element type. This file holds the one switch (hlo_eval_structural),
   the shared index helpers (hlo_evo_*) and the index-only ops: iota broadcast reshape
   bitcast transpose slice dynamic-slice dynamic-update-slice concatenate pad reverse.
   gather/scatter live in eval_gather.c; reduce, reduce-window, sort and dot in eval_reduce.c.

   Invariants: literals are dense, row-major, in logical order (ir/ir.h); an op reads its
   operands, fills a fresh result allocated here from ins->shape, and never writes an
   operand. Index arithmetic is int64. Attributes are checked before any memory is touched,
   so a malformed (unverified) instruction gives an error, never a stray access.

   Algorithm: nearly every index-only op is one strided box copy (hlo_evo_copy): walk a box
   of |dims| in row-major order, copying src[s0 + Σ idx·ss] to dst[d0 + Σ idx·ds]. Example,
   transpose f32[2,3] → f32[3,2] with dimensions={1,0}: the box is the output dims {3,2},
   dst strides are the output's row-major strides {2,1}, src strides are the operand's
   strides {3,1} permuted by perm: {1,3}. So output (i,j) reads operand offset i·1 + j·3,
   i.e. operand (j,i). Broadcast uses stride 0 for the new dims, reverse a negative stride
   starting at the far end, slice a start offset and stride·step, pad writes the operand
   into an output pre-filled with the pad value at stride (interior+1)·stride.
   Bitcast is physical: the operand goes logical → physical bytes through its own
   minor_to_major, the bytes are reread through the result's layout (two box copies). */
#include "eval_internal.h"
#include <stdlib.h>

/* ---- shared helpers --------------------------------------------------------------------- */

bool hlo_evo_next(int rank, const int64_t *dims, int64_t *idx) {
  for (int d = rank - 1; d >= 0; d--) {
    if (++idx[d] < dims[d]) return true;
    idx[d] = 0;
  }
  return false;
}

/* One row of a box copy; |ES| is a constant per case so memcpy becomes a plain move. */
#define EVO_ROW(ES)                                                                        \
  for (int64_t i = 0; i < n; i++) memcpy(dst + i * ds * (ES), src + i * ss * (ES), (ES));

static void evo_copy_row(uint8_t *dst, int64_t ds, const uint8_t *src, int64_t ss, int64_t n,
                         int es) {
  if (ds == 1 && ss == 1) {
    memcpy(dst, src, (size_t)(n * es));
    return;
  }
  switch (es) {
  case 1: EVO_ROW(1) break;
  case 2: EVO_ROW(2) break;
  case 4: EVO_ROW(4) break;
  case 8: EVO_ROW(8) break;
  default:
    for (int64_t i = 0; i < n; i++) memcpy(dst + i * ds * es, src + i * ss * es, (size_t)es);
  }
}
#undef EVO_ROW

void hlo_evo_copy(void *dst, int64_t dst_off, const int64_t *dst_strides, const void *src,
                  int64_t src_off, const int64_t *src_strides, int rank, const int64_t *dims,
                  int esize) {
  uint8_t *d8 = dst;
  const uint8_t *s8 = src;
  for (int d = 0; d < rank; d++)
    if (dims[d] <= 0) return;
  if (rank == 0) {
    memcpy(d8 + dst_off * esize, s8 + src_off * esize, (size_t)esize);
    return;
  }
  int64_t idx[HLO_MAX_RANK] = { 0 };
  int in = rank - 1;  /* innermost dim: a tight row loop; the outer dims: a counter */
  do {
    int64_t o = dst_off, s = src_off;
    for (int k = 0; k < in; k++) {
      o += idx[k] * dst_strides[k];
      s += idx[k] * src_strides[k];
    }
    evo_copy_row(d8 + o * esize, dst_strides[in], s8 + s * esize, src_strides[in], dims[in],
                 esize);
  } while (hlo_evo_next(in, dims, idx));
}

int64_t hlo_evo_load_index(hlo_type t, const void *base, int64_t i) {
  if (hlo_type_class_of(t) == HLO_CLASS_UINT) {
    uint64_t u = hlo_load_u64(t, base, i);
    return u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)u;
  }
  return hlo_load_s64(t, base, i);
}

hj_status hlo_evo_err(hj_ctx_t *ctx, const hlo_instr *ins, const char *fmt, ...) {
  char msg[1024], sh[256];
  char *sb = NULL;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  sb_printf(&sb, "op '%s' (%s: result %s", hlo_opcode_name(ins->op), ins->name ? ins->name : "?",
            hlo_shape_str(&ins->shape, sh, sizeof sh));
  for (int i = 0; i < ins->noperands && i < 4; i++)
    sb_printf(&sb, ", operand %d %s", i, hlo_shape_str(&ins->operands[i]->shape, sh, sizeof sh));
  if (ins->noperands > 4) sb_puts(&sb, ", ...");
  sb_printf(&sb, "): %s", msg);
  hj_status st = hj__err(ctx, HJ_ERR_SHAPE, "%s", sb ? sb : msg);
  arrfree(sb);
  return st;
}

hj_status hlo_evo_combine(hj_ctx_t *ctx, const hlo_comp *c, int n, hlo_literal *const *acc,
                          int64_t ai, hlo_literal *const *x, int64_t xi) {
  hlo_literal views[2 * HLO_EVO_MAX_N], *args[2 * HLO_EVO_MAX_N], *res = NULL;
  if (n < 1 || n > HLO_EVO_MAX_N)
    return hj__err(ctx, HJ_ERR_UNSUPPORTED, "computation '%s': %d operands (at most %d)",
                   c->name, n, HLO_EVO_MAX_N);
  for (int k = 0; k < n; k++) {
    hlo_type ta = acc[k]->shape.type, tx = x[k]->shape.type;
    hlo_shape sa = hlo_shape_scalar(ta), sx = hlo_shape_scalar(tx);
    views[k] = hlo_literal_view(&sa, acc[k]->data + ai * hlo_type_size(ta));
    views[n + k] = hlo_literal_view(&sx, x[k]->data + xi * hlo_type_size(tx));
    args[k] = &views[k];
    args[n + k] = &views[n + k];
  }
  hj_status st = hlo_eval_scalar_call(ctx, c, args, 2 * n, &res);
  if (st) return st;
  for (int k = 0; k < n; k++) {
    const hlo_literal *e = n == 1 && res->shape.type != HLO_TUPLE ? res
                           : res->shape.type == HLO_TUPLE && k < res->nelems ? res->elems[k] : NULL;
    int es = hlo_type_size(acc[k]->shape.type);
    if (!e || !e->data || e->shape.type != acc[k]->shape.type || e->shape.rank != 0) {
      hlo_literal_free(res);
      return hj__err(ctx, HJ_ERR_SHAPE, "computation '%s' must return %d scalar(s) of the "
                     "accumulator type(s)", c->name, n);
    }
    memcpy(acc[k]->data + ai * es, e->data, (size_t)es);
  }
  hlo_literal_free(res);
  return HJ_OK;
}

/* ---- file-local helpers ------------------------------------------------------------------ */

static bool evo_all_arrays(hlo_literal *const *ops, int n) {
  for (int i = 0; i < n; i++)
    if (!ops[i] || !hlo_shape_is_array(&ops[i]->shape)) return false;
  return true;
}

static int evo_es(const hlo_literal *l) { return hlo_type_size(l->shape.type); }

/* Result and operand shapes agree in element type (every index-only op keeps it). */
static hj_status evo_same_type(hj_ctx_t *ctx, const hlo_instr *ins, const hlo_literal *r,
                               const hlo_literal *o) {
  if (r->shape.type != o->shape.type)
    return hlo_evo_err(ctx, ins, "element type %s vs operand %s", hlo_type_name(r->shape.type),
                       hlo_type_name(o->shape.type));
  return HJ_OK;
}

/* ---- index-only ops ------------------------------------------------------------------------ */

static hj_status evo_iota(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops, hlo_literal *r) {
  const hlo_shape *s = &r->shape;
  int64_t dim = ins->index;
  if (s->rank == 0 || dim < 0 || dim >= s->rank)
    return hlo_evo_err(ctx, ins, "iota_dimension=%lld out of range", (long long)dim);
  int64_t st[HLO_MAX_RANK], n = hlo_shape_numel(s);
  hlo_shape_strides(s, st);
  for (int64_t k = 0; k < n; k++) {
    int64_t v = (k / st[dim]) % s->dims[dim];
    if (hlo_type_is_float(s->type)) hlo_store_f64(s->type, r->data, k, (double)v);
    else hlo_store_s64(s->type, r->data, k, v);
  }
  return HJ_OK;
}

static hj_status evo_broadcast(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops,
                               hlo_literal *r) {
  const hlo_literal *o = ops[0];
  const hlo_shape *os = &o->shape, *rs = &r->shape;
  if (ins->dims.n != os->rank)
    return hlo_evo_err(ctx, ins, "%d dimensions for an operand of rank %d", ins->dims.n, os->rank);
  int64_t ost[HLO_MAX_RANK], rst[HLO_MAX_RANK], sst[HLO_MAX_RANK] = { 0 };
  hlo_shape_strides(os, ost);
  hlo_shape_strides(rs, rst);
  for (int i = 0; i < os->rank; i++) {
    int64_t d = ins->dims.v[i];
    if (d < 0 || d >= rs->rank || (os->dims[i] != rs->dims[d] && os->dims[i] != 1))
      return hlo_evo_err(ctx, ins, "dimensions[%d]=%lld does not map operand dim %d", i,
                         (long long)d, i);
    sst[d] = os->dims[i] == 1 ? 0 : ost[i];
  }
  hlo_evo_copy(r->data, 0, rst, o->data, 0, sst, rs->rank, rs->dims, evo_es(r));
  return HJ_OK;
}

/* reshape: row-major reinterpretation, so the bytes are unchanged. */
static hj_status evo_reshape(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops,
                             hlo_literal *r) {
  const hlo_literal *o = ops[0];
  if (hlo_shape_numel(&o->shape) != hlo_shape_numel(&r->shape))
    return hlo_evo_err(ctx, ins, "element counts differ");
  memcpy(r->data, o->data, (size_t)hlo_shape_bytes(&r->shape));
  return HJ_OK;
}

/* The layouts that count are the IR's (the operand instruction's and ins->shape): an
   evaluated operand literal (a user's input, say) may carry only the default layout. */
static hj_status evo_bitcast(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops,
                             hlo_literal *r) {
  const hlo_literal *o = ops[0];
  const hlo_shape *os = &o->shape, *rs = &ins->shape, *is = &ins->operands[0]->shape;
  if (hlo_shape_compatible(is, os)) os = is;
  if (!hlo_shape_compatible(rs, &r->shape)) rs = &r->shape;
  int es = evo_es(r);
  if (evo_es(o) != es)
    return hlo_evo_err(ctx, ins, "element sizes differ (%d vs %d bytes)", evo_es(o), es);
  if (hlo_shape_numel(os) != hlo_shape_numel(rs))
    return hlo_evo_err(ctx, ins, "element counts differ");
  int64_t ophys[HLO_MAX_RANK], rphys[HLO_MAX_RANK], orow[HLO_MAX_RANK], rrow[HLO_MAX_RANK];
  if (!hlo_shape_layout_strides(os, ophys) || !hlo_shape_layout_strides(rs, rphys))
    return hlo_evo_err(ctx, ins, "layout is not a permutation of the dims");
  if (hlo_shape_layout_is_default(os) && hlo_shape_layout_is_default(rs))
    return evo_reshape(ctx, ins, ops, r);
  int64_t nbytes = hlo_shape_bytes(rs);
  uint8_t *phys = hlo_ev_alloc(ctx, (size_t)(nbytes ? nbytes : 1), 1, false);
  if (!phys) return hj__err(ctx, HJ_ERR_OOM, "op 'bitcast': out of memory");
  hlo_shape_strides(os, orow);
  hlo_shape_strides(rs, rrow);
  hlo_evo_copy(phys, 0, ophys, o->data, 0, orow, os->rank, os->dims, es);   /* logical → bytes */
  hlo_evo_copy(r->data, 0, rrow, phys, 0, rphys, rs->rank, rs->dims, es);   /* bytes → logical */
  hj__free(ctx, phys);
  return HJ_OK;
}

static hj_status evo_transpose(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops,
                               hlo_literal *r) {
  const hlo_literal *o = ops[0];
  const hlo_shape *os = &o->shape, *rs = &r->shape;
  if (ins->dims.n != os->rank || rs->rank != os->rank)
    return hlo_evo_err(ctx, ins, "permutation of %d dims for rank %d", ins->dims.n, os->rank);
  int64_t ost[HLO_MAX_RANK], rst[HLO_MAX_RANK], sst[HLO_MAX_RANK];
  bool seen[HLO_MAX_RANK] = { false };
  hlo_shape_strides(os, ost);
  hlo_shape_strides(rs, rst);
  for (int i = 0; i < rs->rank; i++) {
    int64_t p = ins->dims.v[i];
    if (p < 0 || p >= os->rank || seen[p] || os->dims[p] != rs->dims[i])
      return hlo_evo_err(ctx, ins, "dimensions={...} is not a valid permutation at %d", i);
    seen[p] = true;
    sst[i] = ost[p];  /* output dim i walks operand dim perm[i] */
  }
  hlo_evo_copy(r->data, 0, rst, o->data, 0, sst, rs->rank, rs->dims, evo_es(r));
  return HJ_OK;
}

static hj_status evo_slice(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops,
                           hlo_literal *r) {
  const hlo_literal *o = ops[0];
  const hlo_shape *os = &o->shape, *rs = &r->shape;
  int n = os->rank;
  if (ins->slice_start.n != n || ins->slice_limit.n != n || rs->rank != n ||
      (ins->slice_stride.n != n && ins->slice_stride.n != 0))
    return hlo_evo_err(ctx, ins, "slice={...} has the wrong number of dims");
  int64_t ost[HLO_MAX_RANK], rst[HLO_MAX_RANK], sst[HLO_MAX_RANK], off = 0;
  hlo_shape_strides(os, ost);
  hlo_shape_strides(rs, rst);
  for (int i = 0; i < n; i++) {
    int64_t a = ins->slice_start.v[i], b = ins->slice_limit.v[i];
    int64_t s = ins->slice_stride.n ? ins->slice_stride.v[i] : 1;
    if (a < 0 || b < a || b > os->dims[i] || s < 1 || rs->dims[i] != hlo_slice_count(a, b, s))
      return hlo_evo_err(ctx, ins, "slice dim %d [%lld:%lld:%lld] does not fit", i,
                         (long long)a, (long long)b, (long long)s);
    off += a * ost[i];
    /* A stride is only ever stepped when the dim has 2+ results, and then s < b - a: a
       huge stride on a dim of one result never forms s * ost. */
    sst[i] = rs->dims[i] > 1 ? s * ost[i] : 0;
  }
  hlo_evo_copy(r->data, 0, rst, o->data, off, sst, n, rs->dims, evo_es(r));
  return HJ_OK;
}

/* The start indices of dynamic-(update-)slice: either one scalar operand per dim
   (ops[first..first+rank)) or the old form, one rank-1 operand. Each start is clamped to
   [0, dim - size], which is XLA's rule. */
static hj_status evo_dyn_starts(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops,
                                int first, const hlo_shape *os, const int64_t *size,
                                int64_t *start) {
  int n = os->rank, nidx = ins->noperands - first;
  const hlo_literal *vec = nidx == 1 && ops[first]->shape.rank == 1 ? ops[first] : NULL;
  if (vec ? (vec->shape.rank != 1 || vec->shape.dims[0] != n) : nidx != n)
    return hlo_evo_err(ctx, ins, "%d start indices for rank %d", nidx, n);
  for (int i = 0; i < n; i++) {
    const hlo_literal *l = vec ? vec : ops[first + i];
    if (!hlo_type_is_int(l->shape.type) || (!vec && l->shape.rank != 0))
      return hlo_evo_err(ctx, ins, "start index %d is not an integer scalar", i);
    if (size[i] < 0 || size[i] > os->dims[i])
      return hlo_evo_err(ctx, ins, "size %lld of dim %d exceeds %lld", (long long)size[i], i,
                         (long long)os->dims[i]);
    int64_t v = hlo_evo_load_index(l->shape.type, l->data, vec ? i : 0), hi = os->dims[i] - size[i];
    start[i] = v < 0 ? 0 : v > hi ? hi : v;
  }
  return HJ_OK;
}

static hj_status evo_dynamic_slice(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops,
                                   hlo_literal *r) {
  const hlo_shape *os = &ops[0]->shape, *rs = &r->shape;
  if (rs->rank != os->rank) return hlo_evo_err(ctx, ins, "result rank differs from operand");
  if (ins->ds_sizes.n != 0 && ins->ds_sizes.n != os->rank)
    return hlo_evo_err(ctx, ins, "dynamic_slice_sizes has %d dims", ins->ds_sizes.n);
  for (int i = 0; i < ins->ds_sizes.n; i++)
    if (ins->ds_sizes.v[i] != rs->dims[i])
      return hlo_evo_err(ctx, ins, "dynamic_slice_sizes[%d] differs from the result", i);
  int64_t start[HLO_MAX_RANK], ost[HLO_MAX_RANK], rst[HLO_MAX_RANK], off = 0;
  hj_status st = evo_dyn_starts(ctx, ins, ops, 1, os, rs->dims, start);
  if (st) return st;
  hlo_shape_strides(os, ost);
  hlo_shape_strides(rs, rst);
  for (int i = 0; i < os->rank; i++) off += start[i] * ost[i];
  hlo_evo_copy(r->data, 0, rst, ops[0]->data, off, ost, rs->rank, rs->dims, evo_es(r));
  return HJ_OK;
}

static hj_status evo_dynamic_update_slice(hj_ctx_t *ctx, const hlo_instr *ins,
                                          hlo_literal *const *ops, hlo_literal *r) {
  const hlo_shape *os = &ops[0]->shape, *us = &ops[1]->shape;
  if (!hlo_shape_compatible(os, &r->shape) || us->rank != os->rank || us->type != os->type)
    return hlo_evo_err(ctx, ins, "operand, update and result do not agree");
  int64_t start[HLO_MAX_RANK], ost[HLO_MAX_RANK], ust[HLO_MAX_RANK], off = 0;
  hj_status st = evo_dyn_starts(ctx, ins, ops, 2, os, us->dims, start);
  if (st) return st;
  memcpy(r->data, ops[0]->data, (size_t)hlo_shape_bytes(os));
  hlo_shape_strides(os, ost);
  hlo_shape_strides(us, ust);
  for (int i = 0; i < os->rank; i++) off += start[i] * ost[i];
  hlo_evo_copy(r->data, off, ost, ops[1]->data, 0, ust, us->rank, us->dims, evo_es(r));
  return HJ_OK;
}

static hj_status evo_concatenate(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops,
                                 hlo_literal *r) {
  const hlo_shape *rs = &r->shape;
  int64_t axis = ins->dims.n == 1 ? ins->dims.v[0] : -1, at = 0;
  if (axis < 0 || axis >= rs->rank) return hlo_evo_err(ctx, ins, "bad concatenate dimension");
  int64_t rst[HLO_MAX_RANK], ost[HLO_MAX_RANK];
  hlo_shape_strides(rs, rst);
  for (int k = 0; k < ins->noperands; k++) {  /* check all before writing anything */
    const hlo_shape *os = &ops[k]->shape;
    bool ok = os->rank == rs->rank && os->type == rs->type;
    for (int i = 0; ok && i < rs->rank; i++) ok = i == axis || os->dims[i] == rs->dims[i];
    if (!ok) return hlo_evo_err(ctx, ins, "operand %d does not fit the result", k);
    at += os->dims[axis];
  }
  if (at != rs->dims[axis]) return hlo_evo_err(ctx, ins, "operand sizes do not add up");
  at = 0;
  for (int k = 0; k < ins->noperands; k++) {
    const hlo_shape *os = &ops[k]->shape;
    hlo_shape_strides(os, ost);
    hlo_evo_copy(r->data, at * rst[axis], rst, ops[k]->data, 0, ost, os->rank, os->dims,
                 evo_es(r));
    at += os->dims[axis];
  }
  return HJ_OK;
}

/* pad: out[lo + i·(interior+1)] = operand[i] per dim; negative lo/hi crop. Only operand
   indices i in [i0, i1) land inside the output. */
static hj_status evo_pad(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops,
                         hlo_literal *r) {
  const hlo_shape *os = &ops[0]->shape, *rs = &r->shape;
  int n = os->rank, es = evo_es(r);
  if (ops[1]->shape.rank != 0 || ops[1]->shape.type != rs->type || rs->rank != n ||
      ins->pad_lo.n != n || ins->pad_hi.n != n || (ins->pad_interior.n != n && ins->pad_interior.n))
    return hlo_evo_err(ctx, ins, "padding={...} or the pad value does not fit");
  int64_t ost[HLO_MAX_RANK], rst[HLO_MAX_RANK], dst[HLO_MAX_RANK], box[HLO_MAX_RANK];
  int64_t soff = 0, doff = 0;
  hlo_shape_strides(os, ost);
  hlo_shape_strides(rs, rst);
  for (int i = 0; i < n; i++) {
    int64_t lo = ins->pad_lo.v[i], hi = ins->pad_hi.v[i];
    int64_t in = ins->pad_interior.n ? ins->pad_interior.v[i] : 0, d = os->dims[i], want;
    if (!hlo_pad_dim(d, lo, hi, in, &want) || rs->dims[i] != want)
      return hlo_evo_err(ctx, ins, "padding %lld_%lld_%lld of dim %d does not give the result's "
                         "%lld", (long long)lo, (long long)hi, (long long)in, i,
                         (long long)rs->dims[i]);
    /* Positions lo + i*step can leave int64 for operand elements that are cropped away
       (lo = -INT64_MAX); hlo_pad_range keeps to those that land. */
    int64_t step = hlo_pad_step(d, in), i0, i1, first;
    hlo_pad_range(d, lo, step, rs->dims[i], &i0, &i1, &first);
    box[i] = i1 - i0;
    soff += i0 * ost[i];
    doff += first * rst[i];
    dst[i] = box[i] > 1 ? rst[i] * step : 0;
  }
  int64_t total = hlo_shape_numel(rs);
  for (int64_t k = 0; k < total; k++) memcpy(r->data + k * es, ops[1]->data, (size_t)es);
  hlo_evo_copy(r->data, doff, dst, ops[0]->data, soff, ost, n, box, es);
  return HJ_OK;
}

static hj_status evo_reverse(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops,
                             hlo_literal *r) {
  const hlo_literal *o = ops[0];
  const hlo_shape *os = &o->shape;
  if (!hlo_shape_compatible(os, &r->shape)) return hlo_evo_err(ctx, ins, "result differs from operand");
  int64_t ost[HLO_MAX_RANK], sst[HLO_MAX_RANK], off = 0;
  bool rev[HLO_MAX_RANK] = { false };
  hlo_shape_strides(os, ost);
  for (int i = 0; i < ins->dims.n; i++) {
    int64_t d = ins->dims.v[i];
    if (d < 0 || d >= os->rank) return hlo_evo_err(ctx, ins, "dimension %lld out of range", (long long)d);
    rev[d] = true;
  }
  for (int d = 0; d < os->rank; d++) {
    sst[d] = rev[d] ? -ost[d] : ost[d];
    if (rev[d] && os->dims[d] > 0) off += (os->dims[d] - 1) * ost[d];
  }
  hlo_evo_copy(r->data, 0, ost, o->data, off, sst, os->rank, os->dims, evo_es(r));
  return HJ_OK;
}

/* ---- the switch ------------------------------------------------------------------------------ */

/* topk along the last dim: per row, the indices stably sorted by the total order of the
   values (descending when |largest|: NaN first, +0 before -0, ties by index), the first k
   of them and their values. */
typedef struct { int64_t key; uint64_t ukey; int32_t i; } evo_tk;   /* ~keys: descending */
static int evo_tk_cmp(const void *pa, const void *pb) {
  const evo_tk *a = pa, *b = pb;
  int c = a->key != b->key ? (a->key < b->key ? -1 : 1) : a->ukey != b->ukey ? (a->ukey < b->ukey ? -1 : 1) : 0;
  return c ? c : (a->i > b->i) - (a->i < b->i);
}

static hj_status evo_topk(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops, hlo_literal *r) {
  const hlo_literal *o = ops[0];
  hlo_type t = o->shape.type;
  int64_t n = o->shape.dims[o->shape.rank - 1], k = ins->k, rows = n ? hlo_shape_numel(&o->shape) / n : 0;
  if (r->shape.type != HLO_TUPLE || r->nelems != 2 || n > INT32_MAX)
    return hlo_evo_err(ctx, ins, "needs a (values, indices) result and rows shorter than 2^31");
  evo_tk *e = malloc(sizeof *e * (size_t)(n ? n : 1));
  if (!e) return hj__err(ctx, HJ_ERR_OOM, "topk: out of memory");
  int es = hlo_type_size(t);
  for (int64_t row = 0; row < rows; row++) {
    for (int64_t j = 0; j < n; j++) {
      int64_t at = row * n + j;
      evo_tk x = { 0, 0, (int32_t)j };
      if (hlo_type_is_float(t)) {   /* total order: the sign-magnitude bits made monotonic */
        double d = hlo_load_f64(t, o->data, at);
        int64_t bits;
        memcpy(&bits, &d, 8);
        x.key = bits < 0 ? bits ^ INT64_MAX : bits;
      } else if (hlo_type_class_of(t) == HLO_CLASS_SINT) {
        x.key = hlo_load_s64(t, o->data, at);
      } else {
        x.ukey = hlo_load_u64(t, o->data, at);
      }
      if (ins->largest) x.key = ~x.key, x.ukey = ~x.ukey;
      e[j] = x;
    }
    qsort(e, (size_t)n, sizeof *e, evo_tk_cmp);
    for (int64_t j = 0; j < k; j++) {
      memcpy(r->elems[0]->data + (row * k + j) * es, o->data + (row * n + e[j].i) * es, (size_t)es);
      ((int32_t *)r->elems[1]->data)[row * k + j] = e[j].i;
    }
  }
  free(e);
  return HJ_OK;
}

/* The opcode table's eval column: the function of each structural op. */
static hlo_eval_op_fn *const evo_fns[HLO_OP_COUNT] = {
#define X(e, s, a, ca, k, ty, co, em, lm, po, ev, bl) [HLO_OP_##e] = ev,
  HLO_OPCODES(X)
#undef X
};

static hj_status evo_dispatch(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops,
                              hlo_literal *r) {
  switch (ins->op) {
  case HLO_OP_RESHAPE: case HLO_OP_BROADCAST: case HLO_OP_TRANSPOSE: case HLO_OP_SLICE:
  case HLO_OP_REVERSE: case HLO_OP_DYNAMIC_SLICE: case HLO_OP_DYNAMIC_UPDATE_SLICE:
  case HLO_OP_PAD: {
    hj_status st = evo_same_type(ctx, ins, r, ops[0]);
    if (st) return st;
    break;
  }
  default: break;
  }
  return evo_fns[ins->op](ctx, ins, ops, r);
}

hj_status hlo_eval_structural(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops,
                              hlo_literal **out) {
  *out = NULL;
  if ((unsigned)ins->op >= HLO_OP_COUNT || !evo_fns[ins->op])
    return hj__err(ctx, HJ_ERR_UNSUPPORTED, "evaluator: '%s' is not a structural op",
                   hlo_opcode_name(ins->op));
  const char *want;
  if (!hlo_operand_count_ok(ins->op, ins->noperands, &want))
    return hlo_evo_err(ctx, ins, "wrong number of operands (%d)", ins->noperands);
  if (!evo_all_arrays(ops, ins->noperands)) return hlo_evo_err(ctx, ins, "operands must be arrays");
  /* Only the variadic reduce, reduce-window, sort and scatter may return tuples. */
  bool tuple_ok = ins->op == HLO_OP_REDUCE || ins->op == HLO_OP_REDUCE_WINDOW || ins->op == HLO_OP_TOPK ||
                  ins->op == HLO_OP_SORT || ins->op == HLO_OP_SCATTER || ins->op == HLO_OP_CUSTOM_CALL ||
                  ins->op == HLO_OP_RNG_BIT_GENERATOR;
  if (!hlo_shape_is_array(&ins->shape) && !(tuple_ok && ins->shape.type == HLO_TUPLE))
    return hlo_evo_err(ctx, ins, "result must be an array");
  if (ins->shape.type == HLO_TUPLE)
    for (int i = 0; i < ins->shape.ntuple; i++)
      if (!hlo_shape_is_array(&ins->shape.tuple[i]))
        return hlo_evo_err(ctx, ins, "result tuple element %d must be an array", i);
  hlo_literal *r = hlo_literal_new(ctx, &ins->shape);
  if (!r) return HJ_ERR_OOM;
  /* A result without elements is complete as it is: its operands may have dims whose
     products overflow (f32[0,9223372036854775807]), and nothing needs their strides. */
  bool empty = true;
  if (ins->shape.type == HLO_TUPLE)
    for (int i = 0; i < ins->shape.ntuple; i++) empty &= hlo_shape_numel(&ins->shape.tuple[i]) == 0;
  else
    empty = hlo_shape_numel(&ins->shape) == 0;
  if (empty) {
    *out = r;
    return HJ_OK;
  }
  hj_status st = evo_dispatch(ctx, ins, ops, r);
  if (st != HJ_OK) {
    hlo_literal_free(r);
    return st;
  }
  *out = r;
  return HJ_OK;
}
