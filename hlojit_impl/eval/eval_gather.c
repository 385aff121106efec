/* eval_gather.c — gather and scatter for the reference evaluator, with XLA's semantics
   (https://openxla.org/xla/operation_semantics#gather, #scatter). Part of the structural ops
   (see eval_ops.c for the switch and the hlo_evo_* helpers).

   Vocabulary. The index tensor's dims, less index_vector_dim (ivd), are the batch dims; an
   ivd equal to the index rank means an implicit trailing vector dim of size 1. For each
   batch position G the start vector S = indices[G with ivd = 0..n-1] is scattered into
   an operand start S_in by start_index_map (gather) / scatter_dims_to_operand_dims
   (scatter); operand_batching_dims / input_batching_dims take G's value at the paired index
   batch dim. The window dims are the operand dims that are neither collapsed (inserted) nor
   batching, in increasing order; the k-th of them pairs with the k-th offset (update
   window) dim.

   Gather: starts are clamped, S_in[d] = clamp(S_in[d], 0, operand_dim[d] - slice_size[d]),
   then the whole window is one box copy. XLA's OutOfBoundsIndex test: operand 3x3
   {{1,2,3},{4,5,6},{7,8,9}}, index {2,7} with slice 1x1 clamps to (2,2) → 9.

   Scatter: no clamping. A window with ANY element out of bounds (S_in[d] < 0 or
   S_in[d] + window_size[d] > operand_dim[d]) is skipped entirely, as XLA does. Updates
   are applied one element at a time in row-major order of the update index space, so
   duplicates resolve deterministically (the last one wins for an overwrite). */
#include "eval_internal.h"

/* The checked attribute-derived maps shared by gather and scatter. */
typedef struct {
  int ir;                 /* index rank */
  int64_t ivd, nvec;      /* index_vector_dim, length of a start vector */
  int nb;                 /* batch dims of the index (ir or ir-1) */
  int idims[HLO_MAX_RANK];/* index dims other than ivd, in order */
  int nw;                 /* window dims */
  int wdims[HLO_MAX_RANK];/* operand window dims, increasing */
  int bpos[HLO_MAX_RANK]; /* operand batching dim i pairs with batch position bpos[i] */
} evg_map;

static bool evg_in(int64_t v, int64_t n) { return v >= 0 && v < n; }

/* Fills |m| from the index shape and the attribute lists; false on a malformed list. */
static bool evg_map_build(evg_map *m, const hlo_shape *is, int64_t ivd, int orank,
                          const hlo_ints *vec_map, const hlo_ints *skip,
                          const hlo_ints *obatch, const hlo_ints *ibatch) {
  m->ir = is->rank;
  m->ivd = ivd;
  if (ivd < 0 || ivd > is->rank || !hlo_type_is_int(is->type)) return false;
  m->nvec = ivd == is->rank ? 1 : is->dims[ivd];
  if (vec_map->n != m->nvec || obatch->n != ibatch->n) return false;
  for (int k = 0; k < vec_map->n; k++)
    if (!evg_in(vec_map->v[k], orank)) return false;
  m->nb = 0;
  for (int d = 0; d < is->rank; d++)
    if (d != ivd) m->idims[m->nb++] = d;
  bool skipped[HLO_MAX_RANK] = { false };
  for (int i = 0; i < skip->n; i++) {
    if (!evg_in(skip->v[i], orank)) return false;
    skipped[skip->v[i]] = true;
  }
  for (int i = 0; i < obatch->n; i++) {
    int64_t od = obatch->v[i], id = ibatch->v[i];
    if (!evg_in(od, orank) || !evg_in(id, is->rank) || id == ivd) return false;
    skipped[od] = true;
    m->bpos[i] = (int)(id - (id > ivd));
  }
  m->nw = 0;
  for (int d = 0; d < orank; d++)
    if (!skipped[d]) m->wdims[m->nw++] = d;
  return true;
}

/* Marks |dims| (must be increasing, in [0, rank)) and lists the others in |rest|. */
static bool evg_split_dims(const hlo_ints *dims, int rank, int *rest, int *nrest) {
  bool mark[HLO_MAX_RANK] = { false };
  for (int i = 0; i < dims->n; i++) {
    if (!evg_in(dims->v[i], rank) || (i && dims->v[i] <= dims->v[i - 1])) return false;
    mark[dims->v[i]] = true;
  }
  *nrest = 0;
  for (int d = 0; d < rank; d++)
    if (!mark[d]) rest[(*nrest)++] = d;
  return true;
}

/* The operand start for batch position |g| (values per index batch dim, in order):
   S_in[map[k]] = indices[g, k], batching dims from g. Unclamped. */
static void evg_start(const evg_map *m, const hlo_literal *ix, const int64_t *ist,
                      const int64_t *g, const hlo_ints *vec_map, const hlo_ints *obatch,
                      int orank, int64_t *sin) {
  int64_t iidx[HLO_MAX_RANK + 1] = { 0 }, off = 0;
  for (int d = 0; d < orank; d++) sin[d] = 0;
  for (int j = 0; j < m->nb; j++) iidx[m->idims[j]] = g[j];
  for (int d = 0; d < m->ir; d++)
    if (d != m->ivd) off += iidx[d] * ist[d];
  for (int k = 0; k < m->nvec; k++) {
    int64_t o = off + (m->ivd < m->ir ? k * ist[m->ivd] : 0);
    sin[vec_map->v[k]] = hlo_evo_load_index(ix->shape.type, ix->data, o);
  }
  for (int i = 0; i < obatch->n; i++) sin[obatch->v[i]] = g[m->bpos[i]];
}

/* ---- gather --------------------------------------------------------------------------- */

hj_status hlo_eval_gather(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops,
                          hlo_literal *r) {
  const hlo_gather_dims *g = &ins->gather;
  const hlo_literal *op = ops[0], *ix = ops[1];
  const hlo_shape *os = &op->shape, *is = &ix->shape, *rs = &r->shape;
  evg_map m;
  int bdims[HLO_MAX_RANK], nbo;
  if (os->type != rs->type) return hlo_evo_err(ctx, ins, "result type differs from operand");
  if (!evg_map_build(&m, is, g->index_vector_dim, os->rank, &g->start_index_map,
                     &g->collapsed_slice_dims, &g->operand_batching_dims,
                     &g->start_indices_batching_dims))
    return hlo_evo_err(ctx, ins, "index_vector_dim, start_index_map or the batching/collapsed "
                       "dims do not fit the shapes");
  if (!evg_split_dims(&g->offset_dims, rs->rank, bdims, &nbo) || nbo != m.nb ||
      m.nw != g->offset_dims.n || g->slice_sizes.n != os->rank)
    return hlo_evo_err(ctx, ins, "offset_dims/slice_sizes do not fit the result");
  for (int j = 0; j < m.nb; j++)
    if (rs->dims[bdims[j]] != is->dims[m.idims[j]])
      return hlo_evo_err(ctx, ins, "result batch dim %d differs from the index dim", bdims[j]);
  for (int d = 0; d < os->rank; d++)
    if (g->slice_sizes.v[d] < 0 || g->slice_sizes.v[d] > os->dims[d])
      return hlo_evo_err(ctx, ins, "slice_sizes[%d]=%lld exceeds the operand", d,
                         (long long)g->slice_sizes.v[d]);
  int64_t ost[HLO_MAX_RANK], ist[HLO_MAX_RANK], rst[HLO_MAX_RANK];
  int64_t box[HLO_MAX_RANK], dstr[HLO_MAX_RANK], sstr[HLO_MAX_RANK];
  hlo_shape_strides(os, ost);
  hlo_shape_strides(is, ist);
  hlo_shape_strides(rs, rst);
  for (int k = 0; k < m.nw; k++) {
    int64_t rd = g->offset_dims.v[k];
    box[k] = g->slice_sizes.v[m.wdims[k]];
    if (rs->dims[rd] != box[k])
      return hlo_evo_err(ctx, ins, "offset dim %lld has size %lld, slice size %lld", (long long)rd,
                         (long long)rs->dims[rd], (long long)box[k]);
    dstr[k] = rst[rd];
    sstr[k] = ost[m.wdims[k]];
  }
  if (hlo_shape_numel(rs) == 0) return HJ_OK;
  int64_t bsz[HLO_MAX_RANK], gi[HLO_MAX_RANK] = { 0 }, sin[HLO_MAX_RANK];
  for (int j = 0; j < m.nb; j++) bsz[j] = rs->dims[bdims[j]];
  do {  /* one batch position: clamp its start, copy its window */
    evg_start(&m, ix, ist, gi, &g->start_index_map, &g->operand_batching_dims, os->rank, sin);
    int64_t soff = 0, doff = 0;
    for (int d = 0; d < os->rank; d++) {
      int64_t hi = os->dims[d] - g->slice_sizes.v[d];
      sin[d] = sin[d] < 0 ? 0 : sin[d] > hi ? hi : sin[d];
      soff += sin[d] * ost[d];
    }
    for (int j = 0; j < m.nb; j++) doff += gi[j] * rst[bdims[j]];
    hlo_evo_copy(r->data, doff, dstr, op->data, soff, sstr, m.nw, box, hlo_type_size(rs->type));
  } while (hlo_evo_next(m.nb, bsz, gi));
  return HJ_OK;
}

/* ---- scatter ---------------------------------------------------------------------------- */

/* How one update element is combined: a recognised binary op, overwrite, or the computation. */
typedef struct {
  hlo_opcode op;          /* HLO_OP_COUNT: not a single binary op */
  bool swapped;           /* op(update, current) */
  bool assign;            /* to_apply returns parameter 1 */
} evg_combiner;

static evg_combiner evg_classify(const hlo_comp *c, int n, hlo_type t) {
  evg_combiner k = { HLO_OP_COUNT, false, false };
  if (n != 1) return k;
  k.op = hlo_binary_reducer(c, t, &k.swapped);
  k.assign = arrlen(c->params) == 2 && c->root == c->params[1] &&
             c->root->shape.type == t && c->root->shape.rank == 0;
  return k;
}

/* Checks the operands, indices, updates and result of a scatter with |n| operands. */
static hj_status evg_scatter_check(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops,
                                   int n, hlo_literal *const *outs) {
  const hlo_shape *os = &ops[0]->shape, *us = &ops[n + 1]->shape;
  if (ins->ncalls < 1 || !ins->calls[0]) return hlo_evo_err(ctx, ins, "no to_apply computation");
  if (n > HLO_EVO_MAX_N) return hlo_evo_err(ctx, ins, "more than %d operands", HLO_EVO_MAX_N);
  for (int k = 0; k < n; k++) {
    const hlo_shape *ok = &ops[k]->shape, *uk = &ops[n + 1 + k]->shape;
    if (!outs[k] || !hlo_shape_compatible(ok, &outs[k]->shape) || ok->rank != os->rank ||
        uk->rank != us->rank || uk->type != ok->type)
      return hlo_evo_err(ctx, ins, "operand/update/result %d do not agree", k);
    for (int d = 0; d < os->rank; d++)
      if (ok->dims[d] != os->dims[d]) return hlo_evo_err(ctx, ins, "operand %d dims differ", k);
    for (int d = 0; d < us->rank; d++)
      if (uk->dims[d] != us->dims[d]) return hlo_evo_err(ctx, ins, "update %d dims differ", k);
  }
  return HJ_OK;
}

hj_status hlo_eval_scatter(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops,
                           hlo_literal *r) {
  const hlo_scatter_dims *sd = &ins->scatter;
  int n = (ins->noperands - 1) / 2;
  hlo_literal *outs[HLO_EVO_MAX_N] = { NULL };
  if (n > 1 && (r->shape.type != HLO_TUPLE || r->nelems != n))
    return hlo_evo_err(ctx, ins, "result must be a tuple of %d arrays", n);
  for (int k = 0; k < n && k < HLO_EVO_MAX_N; k++) outs[k] = n == 1 ? r : r->elems[k];
  hj_status st = evg_scatter_check(ctx, ins, ops, n, outs);
  if (st) return st;
  const hlo_literal *ix = ops[n];
  hlo_literal *const *upd = ops + n + 1;
  const hlo_shape *os = &ops[0]->shape, *is = &ix->shape, *us = &upd[0]->shape;
  evg_map m;
  int sdims[HLO_MAX_RANK], ns;
  if (!evg_map_build(&m, is, sd->index_vector_dim, os->rank, &sd->scatter_dims_to_operand_dims,
                     &sd->inserted_window_dims, &sd->input_batching_dims,
                     &sd->scatter_indices_batching_dims) ||
      !evg_split_dims(&sd->update_window_dims, us->rank, sdims, &ns) || ns != m.nb ||
      m.nw != sd->update_window_dims.n)
    return hlo_evo_err(ctx, ins, "scatter dimension numbers do not fit the shapes");
  for (int j = 0; j < m.nb; j++)
    if (us->dims[sdims[j]] != is->dims[m.idims[j]])
      return hlo_evo_err(ctx, ins, "update scatter dim %d differs from the index dim", sdims[j]);
  int64_t wsize[HLO_MAX_RANK], ost[HLO_MAX_RANK], ist[HLO_MAX_RANK];
  for (int d = 0; d < os->rank; d++) wsize[d] = 1;
  for (int k = 0; k < m.nw; k++) wsize[m.wdims[k]] = us->dims[sd->update_window_dims.v[k]];
  hlo_shape_strides(os, ost);
  hlo_shape_strides(is, ist);
  for (int k = 0; k < n; k++)
    memcpy(outs[k]->data, ops[k]->data, (size_t)hlo_shape_bytes(os));
  int64_t total = hlo_shape_numel(us);
  if (total == 0) return HJ_OK;
  const hlo_comp *c = ins->calls[0];
  hlo_type t = os->type;
  int es = hlo_type_size(t);
  evg_combiner kind = evg_classify(c, n, t);
  int64_t u[HLO_MAX_RANK] = { 0 }, g[HLO_MAX_RANK], sin[HLO_MAX_RANK];
  for (int64_t ui = 0; ui < total; ui++, hlo_evo_next(us->rank, us->dims, u)) {
    for (int j = 0; j < m.nb; j++) g[j] = u[sdims[j]];
    evg_start(&m, ix, ist, g, &sd->scatter_dims_to_operand_dims, &sd->input_batching_dims,
              os->rank, sin);
    bool inside = true;
    for (int d = 0; d < os->rank && inside; d++)
      inside = sin[d] >= 0 && sin[d] <= os->dims[d] - wsize[d];
    if (!inside) continue;  /* XLA skips the whole window */
    for (int k = 0; k < m.nw; k++) sin[m.wdims[k]] += u[sd->update_window_dims.v[k]];
    int64_t oi = 0;
    for (int d = 0; d < os->rank; d++) oi += sin[d] * ost[d];
    if (kind.assign) memcpy(outs[0]->data + oi * es, upd[0]->data + ui * es, (size_t)es);
    else if (kind.op != HLO_OP_COUNT && !kind.swapped)
      hlo_eval_binary_elem(kind.op, t, outs[0]->data, oi, upd[0]->data, ui, outs[0]->data, oi);
    else if (kind.op != HLO_OP_COUNT)
      hlo_eval_binary_elem(kind.op, t, upd[0]->data, ui, outs[0]->data, oi, outs[0]->data, oi);
    else if ((st = hlo_evo_combine(ctx, c, n, outs, oi, upd, ui)) != HJ_OK)
      return st;
  }
  return HJ_OK;
}
