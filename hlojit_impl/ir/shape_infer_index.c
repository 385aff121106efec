/* shape_infer_index.c — shape inference for the indexing ops: dynamic-slice,
   dynamic-update-slice, gather and scatter (XLA's shape_inference.cc rules, including the
   batching dims). Part of shape_infer.c: hlo_infer_shape there dispatches here through
   hlo_si_index_op, and the hlo_si_* helpers (context, messages, dim-list checks) come
   from there; the conventions in its top comment hold here too.

   Vocabulary: the index tensor's dims other than index_vector_dim (ivd) are its batch
   dims; ivd equal to the index rank means an implicit trailing vector dim of size 1.
   Gather's result dims are offset_dims (the operand's window dims, in order) interleaved
   with the index batch dims; scatter's updates are laid out the same way with
   update_window_dims. */
#include "shape_infer_internal.h"

/* ---- indexing: dynamic-slice dynamic-update-slice gather scatter ------------------------- */

/* Operands [first, first+n) are scalar integers of one type (dynamic-slice starts). */
static hj_status sii_starts(hlo_si_cx *c, int first, int n) {
  for (int i = first; i < first + n; i++) {
    const hlo_shape *s = hlo_si_op(c, i);
    if (!hlo_shape_is_array(s) || s->rank != 0 || !hlo_type_is_int(s->type) ||
        s->type != hlo_si_op(c, first)->type)
      return hlo_si_err(c, "start index operand %d must be an integer scalar of one type, got %s",
                        i, hlo_si_str(c, 0, s));
  }
  return HJ_OK;
}

static hj_status sii_dynamic_slice(hlo_si_cx *c, hlo_shape *out) {
  int n = c->ins->noperands;
  if (n < 1) return hlo_si_err(c, "expects an operand");
  hj_status st = hlo_si_array(c, 0);
  if (st) return st;
  const hlo_shape *a = hlo_si_op(c, 0);
  bool dus = c->ins->op == HLO_OP_DYNAMIC_UPDATE_SLICE;
  int first = dus ? 2 : 1;
  if (n != first + a->rank)
    return hlo_si_err(c, "expects %d start indices for %s, got %d", a->rank, hlo_si_str(c, 0, a), n - first);
  if ((st = sii_starts(c, first, a->rank))) return st;
  hlo_shape r = hlo_si_result(a);
  if (dus) {
    if ((st = hlo_si_array(c, 1))) return st;
    const hlo_shape *u = hlo_si_op(c, 1);
    bool ok = u->rank == a->rank && u->type == a->type;
    for (int i = 0; ok && i < a->rank; i++) ok = u->dims[i] <= a->dims[i];
    if (!ok) return hlo_si_err(c, "update %s does not fit in %s", hlo_si_str(c, 0, u), hlo_si_str(c, 1, a));
  } else {
    hlo_ints sz = c->ins->ds_sizes;
    bool ok = sz.n == a->rank;
    for (int i = 0; ok && i < a->rank; i++) {
      ok = sz.v[i] >= 0 && sz.v[i] <= a->dims[i];
      if (ok) {
        r.dims[i] = sz.v[i];
        r.dynamic[i] = a->dynamic[i] && sz.v[i] == a->dims[i];
      }
    }
    char b[128];
    if (!ok)
      return hlo_si_err(c, "dynamic_slice_sizes=%s do not fit %s", hlo_si_ints_str(sz, b, sizeof b),
                        hlo_si_str(c, 0, a));
  }
  *out = r;
  return HJ_OK;
}

/* The index operand with index_vector_dim |ivd|, seen with the implicit trailing 1 that
   XLA adds when ivd == rank: its rank, the number of index components, and its batch
   dims (all but ivd) in order. */
typedef struct { int rank, nidx, nbatch; int64_t batch[HLO_MAX_RANK + 1]; bool bdyn[HLO_MAX_RANK + 1]; } sii_idx;

static hj_status sii_indices(hlo_si_cx *c, const hlo_shape *ix, int64_t ivd, sii_idx *o) {
  if (!hlo_shape_is_array(ix) || !hlo_type_is_int(ix->type))
    return hlo_si_err(c, "indices %s must be an integer array", hlo_si_str(c, 0, ix));
  if (ivd < 0 || ivd > ix->rank)
    return hlo_si_err(c, "index_vector_dim=%lld out of range for indices %s", (long long)ivd, hlo_si_str(c, 0, ix));
  o->rank = ivd == ix->rank ? ix->rank + 1 : ix->rank;
  o->nidx = ivd == ix->rank ? 1 : (int)ix->dims[ivd];
  o->nbatch = 0;
  for (int d = 0; d < ix->rank; d++)
    if (d != ivd) {
      o->bdyn[o->nbatch] = ix->dynamic[d];
      o->batch[o->nbatch++] = ix->dims[d];
    }
  return HJ_OK;
}

/* Batching dims: |od| of the operand (sorted), |id| of the indices, same count and
   sizes, id never the index vector dim. */
static hj_status sii_batching(hlo_si_cx *c, hlo_ints od, hlo_ints id, const hlo_shape *a,
                              const hlo_shape *ix, int64_t ivd, hlo_ints excl) {
  char b1[128], b2[128];
  bool ok = od.n == id.n && hlo_si_dims_ok(od, a->rank, true) && hlo_si_dims_ok(id, ix->rank, false);
  for (int i = 0; ok && i < od.n; i++)
    ok = id.v[i] != ivd && !hlo_ints_has(excl, od.v[i]) && a->dims[od.v[i]] == ix->dims[id.v[i]];
  if (!ok)
    return hlo_si_err(c, "batching dims %s (operand %s) and %s (indices %s) do not match",
                      hlo_si_ints_str(od, b1, sizeof b1), hlo_si_str(c, 0, a), hlo_si_ints_str(id, b2, sizeof b2),
                      hlo_si_str(c, 1, ix));
  return HJ_OK;
}

static hj_status sii_gather(hlo_si_cx *c, hlo_shape *out) {
  hj_status st = hlo_si_nops(c, 2);
  if (!st) st = hlo_si_array(c, 0);
  if (st) return st;
  const hlo_gather_dims *g = &c->ins->gather;
  const hlo_shape *a = hlo_si_op(c, 0), *ix = hlo_si_op(c, 1);
  sii_idx x;
  char b[128];
  if ((st = sii_indices(c, ix, g->index_vector_dim, &x))) return st;
  int orank = g->offset_dims.n + x.nbatch;
  if (x.nidx != g->start_index_map.n)
    return hlo_si_err(c, "start_index_map has %d entries, indices %s give %d", g->start_index_map.n,
                      hlo_si_str(c, 0, ix), x.nidx);
  if (!hlo_si_dims_ok(g->offset_dims, orank, true))
    return hlo_si_err(c, "offset_dims=%s must be sorted and below the result rank %d",
                      hlo_si_ints_str(g->offset_dims, b, sizeof b), orank);
  if (!hlo_si_dims_ok(g->collapsed_slice_dims, a->rank, true))
    return hlo_si_err(c, "collapsed_slice_dims=%s must be sorted dims of %s",
                      hlo_si_ints_str(g->collapsed_slice_dims, b, sizeof b), hlo_si_str(c, 0, a));
  if ((st = sii_batching(c, g->operand_batching_dims, g->start_indices_batching_dims, a, ix,
                         g->index_vector_dim, g->collapsed_slice_dims)))
    return st;
  if (!hlo_si_dims_ok(g->start_index_map, a->rank, false))
    return hlo_si_err(c, "start_index_map=%s must hold distinct dims of %s",
                      hlo_si_ints_str(g->start_index_map, b, sizeof b), hlo_si_str(c, 0, a));
  for (int i = 0; i < g->start_index_map.n; i++)
    if (hlo_ints_has(g->operand_batching_dims, g->start_index_map.v[i]))
      return hlo_si_err(c, "start_index_map dim %lld is also a batching dim", (long long)g->start_index_map.v[i]);
  if (g->slice_sizes.n != a->rank)
    return hlo_si_err(c, "slice_sizes has %d entries for %s", g->slice_sizes.n, hlo_si_str(c, 0, a));
  if (g->offset_dims.n + g->collapsed_slice_dims.n + g->operand_batching_dims.n != a->rank)
    return hlo_si_err(c, "offset_dims (%d) + collapsed_slice_dims (%d) + operand_batching_dims (%d) "
                      "must equal the rank of %s", g->offset_dims.n, g->collapsed_slice_dims.n,
                      g->operand_batching_dims.n, hlo_si_str(c, 0, a));
  for (int i = 0; i < a->rank; i++) {
    int64_t s = g->slice_sizes.v[i];
    bool squeezed = hlo_ints_has(g->collapsed_slice_dims, i) || hlo_ints_has(g->operand_batching_dims, i);
    if (s < 0 || s > a->dims[i] || (squeezed && s > 1))
      return hlo_si_err(c, "slice size %lld invalid for dim %d of %s%s", (long long)s, i,
                        hlo_si_str(c, 0, a), squeezed ? " (collapsed/batching dims need size <= 1)" : "");
  }
  hlo_shape r = { .type = a->type, .rank = orank };
  if (orank > HLO_MAX_RANK) return hlo_si_err(c, "result rank %d too large", orank);
  /* A collapsed (or batching) dim with slice size 0, which XLA's rules allow, makes windows
     of no element that the result still has places for: there is no value to read (and the
     clamped start, dim - 0, is past the end). Refused unless the result is empty anyway. */
  bool res_empty = false, empty_window = false;
  for (int i = 0; i < x.nbatch; i++) res_empty |= x.batch[i] == 0;
  for (int i = 0; i < a->rank; i++) {
    bool squeezed = hlo_ints_has(g->collapsed_slice_dims, i) || hlo_ints_has(g->operand_batching_dims, i);
    if (g->slice_sizes.v[i] != 0) continue;
    if (squeezed) empty_window = true;
    else res_empty = true;
  }
  if (empty_window && !res_empty)
    return hlo_si_err(c, "a collapsed dim of slice size 0 (slice_sizes=%s for %s) leaves nothing "
                      "to gather into a result with elements",
                      hlo_si_ints_str(g->slice_sizes, b, sizeof b), hlo_si_str(c, 0, a));
  int w = 0, bi = 0;
  for (int i = 0; i < orank; i++) {
    if (hlo_ints_has(g->offset_dims, i)) {
      while (hlo_ints_has(g->collapsed_slice_dims, w) || hlo_ints_has(g->operand_batching_dims, w)) w++;
      r.dims[i] = g->slice_sizes.v[w++];
    } else {
      r.dynamic[i] = x.bdyn[bi];
      r.dims[i] = x.batch[bi++];
    }
  }
  hlo_shape_set_default_layout(&r);
  *out = r;
  return HJ_OK;
}

/* Scatter's dimension numbers against operand |a|, indices |ix| and updates |u|. */
static hj_status sii_scatter_dims(hlo_si_cx *c, const hlo_shape *a, const hlo_shape *ix, const hlo_shape *u) {
  const hlo_scatter_dims *s = &c->ins->scatter;
  sii_idx x;
  char b[128];
  hj_status st = sii_indices(c, ix, s->index_vector_dim, &x);
  if (st) return st;
  if (!hlo_si_dims_ok(s->update_window_dims, u->rank, true))
    return hlo_si_err(c, "update_window_dims=%s must be sorted dims of updates %s",
                      hlo_si_ints_str(s->update_window_dims, b, sizeof b), hlo_si_str(c, 0, u));
  if (!hlo_si_dims_ok(s->inserted_window_dims, a->rank, true))
    return hlo_si_err(c, "inserted_window_dims=%s must be sorted dims of %s",
                      hlo_si_ints_str(s->inserted_window_dims, b, sizeof b), hlo_si_str(c, 0, a));
  if ((st = sii_batching(c, s->input_batching_dims, s->scatter_indices_batching_dims, a, ix,
                         s->index_vector_dim, s->inserted_window_dims)))
    return st;
  hlo_ints sd = s->scatter_dims_to_operand_dims;
  if (sd.n != x.nidx || !hlo_si_dims_ok(sd, a->rank, false))
    return hlo_si_err(c, "scatter_dims_to_operand_dims=%s must hold %d distinct dims of %s",
                      hlo_si_ints_str(sd, b, sizeof b), x.nidx, hlo_si_str(c, 0, a));
  for (int i = 0; i < sd.n; i++)
    if (hlo_ints_has(s->input_batching_dims, sd.v[i]))
      return hlo_si_err(c, "scatter_dims_to_operand_dims dim %lld is also a batching dim", (long long)sd.v[i]);
  if (s->update_window_dims.n + s->inserted_window_dims.n + s->input_batching_dims.n != a->rank)
    return hlo_si_err(c, "update_window_dims (%d) + inserted_window_dims (%d) + input_batching_dims (%d) "
                      "must equal the rank of %s", s->update_window_dims.n, s->inserted_window_dims.n,
                      s->input_batching_dims.n, hlo_si_str(c, 0, a));
  if (u->rank != s->update_window_dims.n + x.nbatch)
    return hlo_si_err(c, "updates %s must have rank %d (window dims + scatter dims of indices %s)",
                      hlo_si_str(c, 0, u), s->update_window_dims.n + x.nbatch, hlo_si_str(c, 1, ix));
  int w = 0, bi = 0;
  for (int d = 0; d < u->rank; d++) {
    if (hlo_ints_has(s->update_window_dims, d)) {
      while (hlo_ints_has(s->inserted_window_dims, w) || hlo_ints_has(s->input_batching_dims, w)) w++;
      if (u->dims[d] > a->dims[w])
        return hlo_si_err(c, "update window dim %d (%lld) exceeds operand dim %d of %s", d,
                          (long long)u->dims[d], w, hlo_si_str(c, 0, a));
      w++;
    } else if (u->dims[d] != x.batch[bi++]) {
      return hlo_si_err(c, "updates %s scatter dim %d differs from indices %s", hlo_si_str(c, 0, u), d,
                        hlo_si_str(c, 1, ix));
    }
  }
  return HJ_OK;
}

static hj_status sii_scatter(hlo_si_cx *c, hlo_shape *out) {
  int nops = c->ins->noperands, n = (nops - 1) / 2;
  if (nops < 3 || nops % 2 == 0)
    return hlo_si_err(c, "expects N operands, indices and N updates, got %d operands", nops);
  if (n > 32) return hlo_si_err(c, "too many operands (%d)", n);
  hj_status st;
  hlo_type types[32];
  hlo_shape res[32];
  for (int i = 0; i < n; i++) {
    if ((st = hlo_si_array(c, i)) || (st = hlo_si_array(c, n + 1 + i))) return st;
    const hlo_shape *a = hlo_si_op(c, i), *u = hlo_si_op(c, n + 1 + i);
    if (!hlo_same_dims(a, hlo_si_op(c, 0)) || !hlo_same_dims(u, hlo_si_op(c, n + 1)) || u->type != a->type)
      return hlo_si_err(c, "operand %d %s / update %s must match operand 0 %s / update 0 %s in dims "
                        "and each other in type", i, hlo_si_str(c, 0, a), hlo_si_str(c, 1, u),
                        hlo_si_str(c, 2, hlo_si_op(c, 0)), hlo_si_str(c, 3, hlo_si_op(c, n + 1)));
    types[i] = a->type;
    res[i] = hlo_si_result(a);
  }
  if ((st = sii_scatter_dims(c, hlo_si_op(c, 0), hlo_si_op(c, n), hlo_si_op(c, n + 1))) ||
      (st = hlo_si_reducer(c, 0, types, n)))
    return st;
  if (n == 1) { *out = res[0]; return HJ_OK; }
  return hlo_si_tuple(c, res, n, out);
}

hj_status hlo_si_index_op(hlo_si_cx *c, hlo_shape *out) {
  switch (c->ins->op) {
  case HLO_OP_GATHER: return sii_gather(c, out);
  case HLO_OP_SCATTER: return sii_scatter(c, out);
  default: return sii_dynamic_slice(c, out);
  }
}
