/* passes/dynamic_padder_ops.c — the dynamic padder's rules for the ops that move data
   across the boundary between real and padded lanes (dynamic_padder.c has the driver and
   the size inference; s is a real size, b the bound of the same dim).

   slice [start:limit:stride] of a dynamic dim: lanes stay put; the size becomes
       clamp((min(s, limit) - start + stride - 1) / stride, 0, result bound).
   dynamic-slice: the unpadded op clamps each start into [0, s - size]; the padded one
       would clamp into [0, b - size]: the start is clamped to the real size first.
   dynamic-update-slice: the same for the starts. An update with a dynamic dim must not
       write its padded lanes over the operand: the update is shifted into place with a pad
       and a dynamic-slice (shifted[p] = update[p - start]) and selected inside the real
       window only: out = select(start <= iota < start + size_u, shifted, operand).
   concatenate along a dynamic dim: piece i goes to the running real offset
       off_i = s_0 + ... + s_{i-1} by a chain of dynamic-update-slices into the first piece
       padded to the result's bound; the size is the sum. off_i + b_i <= the result bound, so
       no start is ever clamped, and piece i only writes over padded lanes of earlier pieces.
   pad (lo, hi, interior): real data ends at e = lo + max(s (interior+1) - interior, 0);
       lanes from e on take the padding value: select(iota < e, pad(x), value); the size is
       e + hi.
   reverse of a dynamic dim: reverse(x)[i] = x[b-1-i]; the real result x[s-1-i] is that
       shifted by b - s: dynamic-slice(pad(reverse(x), hi = b), b - s, size b).
   gather: start indices into a dynamic operand dim are clamped into [0, s - slice_size]
       (the unpadded gather's clamp); the batch dims take the indices' sizes, an offset dim
       whose slice is the whole dynamic dim takes its size.
   reduce-window: inputs masked with the init along dynamic dims (so the window sees init
       beyond the real end, as the unpadded op's padding); result size
       (s + lo + hi - ((w-1) dilation + 1)) / stride + 1, or 0. Base dilation on a dynamic
       dim is unsupported. */
#include "dynamic_padder_internal.h"

/* Every use of |ins| by an instruction older than |mark| (and the root) becomes |rep|, so
   that the replacement chain built since |mark| may itself use |ins|. */
static void pdo_replace(pd_ctx *P, hlo_instr *ins, hlo_instr *rep, ptrdiff_t mark) {
  for (ptrdiff_t i = 0; i < mark && i < arrlen(P->c->instrs); i++) hlo_replace_operand(P->c->instrs[i], ins, rep);
  if (P->c->root == ins) hlo_comp_set_root(P->c, rep);
}

static hj_status pdo_oom(pd_ctx *P) { return hj__ctx_last(P->ctx) ? hj__ctx_last(P->ctx) : HJ_ERR_OOM; }

static hlo_instr *pdo_pad(pd_ctx *P, hlo_instr *x, hlo_instr *value, const int64_t *lo, const int64_t *hi) {
  if (!x || !value) return NULL;
  int r = x->shape.rank;
  int64_t d[HLO_MAX_RANK], zero[HLO_MAX_RANK] = { 0 };
  for (int i = 0; i < r; i++) d[i] = x->shape.dims[i] + lo[i] + hi[i];
  hlo_shape s = hlo_shape_array(x->shape.type, r, d);
  hlo_instr *ops[2] = { x, value };
  hlo_instr *p = hlo_instr_new(P->c, HLO_OP_PAD, NULL, &s, ops, 2);
  if (!p) return NULL;
  p->pad_lo = hlo_ints_dup(P->m, lo, r);
  p->pad_hi = hlo_ints_dup(P->m, hi, r);
  p->pad_interior = hlo_ints_dup(P->m, zero, r);
  return p;
}

/* dynamic-slice of |x| at s32 |starts| (one per dim) of |sizes|. */
static hlo_instr *pdo_dslice(pd_ctx *P, hlo_instr *x, hlo_instr *const *starts, const int64_t *sizes) {
  int r = x->shape.rank;
  hlo_instr *ops[1 + HLO_MAX_RANK] = { x };
  for (int i = 0; i < r; i++)
    if (!(ops[1 + i] = starts[i])) return NULL;
  hlo_shape s = hlo_shape_array(x->shape.type, r, sizes);
  hlo_instr *d = hlo_instr_new(P->c, HLO_OP_DYNAMIC_SLICE, NULL, &s, ops, 1 + r);
  if (d) d->ds_sizes = hlo_ints_dup(P->m, sizes, r);
  return d;
}

static hlo_instr *pdo_dus(pd_ctx *P, hlo_instr *x, hlo_instr *u, hlo_instr *const *starts) {
  int r = x->shape.rank;
  hlo_instr *ops[2 + HLO_MAX_RANK] = { x, u };
  for (int i = 0; i < r; i++)
    if (!(ops[2 + i] = starts[i])) return NULL;
  return hlo_instr_new(P->c, HLO_OP_DYNAMIC_UPDATE_SLICE, NULL, &x->shape, ops, 2 + r);
}

static hlo_instr *pdo_ceil_div_clamped(pd_ctx *P, hlo_instr *num, int64_t stride, int64_t bound) {
  hlo_instr *q = stride == 1 ? num : pd_binop(P, HLO_OP_DIVIDE, pd_binop(P, HLO_OP_ADD, num, pd_s32(P, stride - 1)),
                                              pd_s32(P, stride));
  return pd_clamp_scalar(P, pd_s32(P, 0), q, pd_s32(P, bound));
}

hj_status pd_slice(pd_ctx *P, hlo_instr *ins) {
  pd_val *v = pd_new_val(P, ins);
  if (!v) return pdo_oom(P);
  const pd_leaf *x = &pd_get(P, ins->operands[0])->leaf[0];
  int64_t b0 = 0;
  v->leaf[0].zp = x->zp;
  for (int d = 0; d < ins->shape.rank; d++) {
    hlo_instr *s = x->size[d];
    if (!s || s == PD_UNKNOWN) {
      v->leaf[0].size[d] = s;
      continue;
    }
    int64_t start = ins->slice_start.v[d], limit = ins->slice_limit.v[d];
    int64_t stride = ins->slice_stride.n > d ? ins->slice_stride.v[d] : 1;
    b0 = ins->operands[0]->shape.dims[d];
    if (start == 0 && stride == 1 && limit == b0) {   /* the whole dim: the same size */
      v->leaf[0].size[d] = s;
      continue;
    }
    hlo_instr *lim = pd_binop(P, HLO_OP_MINIMUM, s, pd_s32(P, limit));
    hlo_instr *n = pdo_ceil_div_clamped(P, pd_binop(P, HLO_OP_SUBTRACT, lim, pd_s32(P, start)), stride,
                                        ins->shape.dims[d]);
    if (!n) return pdo_oom(P);
    v->leaf[0].size[d] = n;
  }
  return HJ_OK;
}

/* The start of dim |d| clamped into [0, size - len] (in the start's type). */
static hlo_instr *pdo_clamp_start(pd_ctx *P, hlo_instr *start, hlo_instr *size, int64_t len) {
  hlo_type t = start->shape.type;
  hlo_instr *hi = pd_convert(P, pd_binop(P, HLO_OP_SUBTRACT, size, pd_s32(P, len)), t);
  return pd_clamp_scalar(P, pd_scalar(P, t, 0), start, hi);
}

static bool pdo_scalar_starts(const hlo_instr *ins, int first) {
  int r = ins->operands[0]->shape.rank;
  if (ins->noperands != first + r) return false;
  for (int i = 0; i < r; i++)
    if (ins->operands[first + i]->shape.rank != 0) return false;
  return true;
}

hj_status pd_dynamic_slice(pd_ctx *P, hlo_instr *ins) {
  pd_val *v = pd_new_val(P, ins);
  if (!v) return pdo_oom(P);
  hlo_instr *xi = ins->operands[0];
  const pd_leaf *x = &pd_get(P, xi)->leaf[0];
  bool dyn = false;
  for (int d = 0; d < xi->shape.rank; d++) dyn |= x->size[d] != NULL;
  if (!dyn) return HJ_OK;
  if (!pdo_scalar_starts(ins, 1)) return pd_unsup(P, ins, "start indices must be scalars on a dynamic operand");
  for (int d = 0; d < xi->shape.rank; d++) {
    if (!x->size[d]) continue;
    if (x->size[d] == PD_UNKNOWN) return pd_unsup(P, ins, "slices dim %d whose real size is unknown", d);
    int64_t len = ins->ds_sizes.v[d];
    if (!(ins->operands[1 + d] = pdo_clamp_start(P, ins->operands[1 + d], x->size[d], len))) return pdo_oom(P);
    if (len == xi->shape.dims[d]) v->leaf[0].size[d] = x->size[d];
  }
  return HJ_OK;
}

/* An update with dynamic dims, shifted into place and selected inside its real window. */
static hj_status pdo_dus_shifted(pd_ctx *P, hlo_instr *ins, const pd_leaf *x, const pd_leaf *u,
                                 hlo_instr *const *starts) {
  ptrdiff_t mark = arrlen(P->c->instrs);
  hlo_instr *xi = ins->operands[0], *ui = ins->operands[1];
  int r = xi->shape.rank;
  int64_t lo[HLO_MAX_RANK], hi[HLO_MAX_RANK];
  for (int d = 0; d < r; d++) lo[d] = hi[d] = xi->shape.dims[d];
  hlo_instr *big = pdo_pad(P, ui, pd_scalar(P, ui->shape.type, 0), lo, hi);
  hlo_instr *sh[HLO_MAX_RANK] = { 0 }, *win = NULL;
  for (int d = 0; d < r; d++) {
    hlo_instr *start = pd_convert(P, starts[d], HLO_S32);
    sh[d] = pd_binop(P, HLO_OP_SUBTRACT, pd_s32(P, lo[d]), start);
    hlo_instr *usz = pd_size_of(P, ins, u, d, ui->shape.dims[d]);
    if (!usz) return pdo_oom(P);
    /* start <= iota < start + usz */
    hlo_shape is = hlo_shape_array(HLO_S32, r, xi->shape.dims);
    hlo_instr *iota = hlo_instr_new(P->c, HLO_OP_IOTA, NULL, &is, NULL, 0);
    if (!iota) return pdo_oom(P);
    iota->index = d;
    hlo_shape ps = hlo_shape_array(HLO_PRED, r, xi->shape.dims);
    hlo_instr *ops[2] = { iota, pd_broadcast(P, start, &is) };
    hlo_instr *ge = ops[1] ? hlo_instr_new(P->c, HLO_OP_COMPARE, NULL, &ps, ops, 2) : NULL;
    ops[1] = pd_broadcast(P, pd_binop(P, HLO_OP_ADD, start, usz), &is);
    hlo_instr *lt = ops[1] ? hlo_instr_new(P->c, HLO_OP_COMPARE, NULL, &ps, ops, 2) : NULL;
    if (!ge || !lt) return pdo_oom(P);
    ge->cmp_dir = HLO_CMP_GE;
    lt->cmp_dir = HLO_CMP_LT;
    hlo_instr *both = pd_binop(P, HLO_OP_AND, ge, lt);
    win = win ? pd_binop(P, HLO_OP_AND, win, both) : both;
  }
  hlo_instr *shifted = big ? pdo_dslice(P, big, sh, xi->shape.dims) : NULL;
  hlo_instr *ops[3] = { win, shifted, xi };
  hlo_instr *out = win && shifted ? hlo_instr_new(P->c, HLO_OP_SELECT, NULL, &xi->shape, ops, 3) : NULL;
  if (!out) return pdo_oom(P);
  P->info->masks++;
  pdo_replace(P, ins, out, mark);
  pd_val *v = pd_new_val(P, out);
  if (!v) return pdo_oom(P);
  v->leaf[0] = *x;
  v->leaf[0].zp = false;
  return HJ_OK;
}

hj_status pd_dynamic_update_slice(pd_ctx *P, hlo_instr *ins) {
  pd_val *v = pd_new_val(P, ins);
  if (!v) return pdo_oom(P);
  hlo_instr *xi = ins->operands[0], *ui = ins->operands[1];
  pd_leaf x = pd_get(P, xi)->leaf[0], u = pd_get(P, ui)->leaf[0];
  v->leaf[0] = x;
  v->leaf[0].zp = false;
  bool xdyn = false, udyn = false;
  for (int d = 0; d < xi->shape.rank; d++) xdyn |= x.size[d] != NULL, udyn |= u.size[d] != NULL;
  if (!xdyn && !udyn) return HJ_OK;
  if (!pdo_scalar_starts(ins, 2)) return pd_unsup(P, ins, "start indices must be scalars on a dynamic operand");
  hlo_instr *starts[HLO_MAX_RANK];
  for (int d = 0; d < xi->shape.rank; d++) {
    starts[d] = ins->operands[2 + d];
    if (!udyn && !x.size[d]) continue;   /* the shifted update clamps every start itself */
    hlo_instr *xs = pd_size_of(P, ins, &x, d, xi->shape.dims[d]);
    hlo_instr *us = xs ? pd_size_of(P, ins, &u, d, ui->shape.dims[d]) : NULL;
    if (!us) return pdo_oom(P);
    /* the unpadded op clamps into [0, xs - us] */
    hlo_type t = starts[d]->shape.type;
    hlo_instr *hi = pd_convert(P, pd_binop(P, HLO_OP_SUBTRACT, xs, us), t);
    if (!(starts[d] = pd_clamp_scalar(P, pd_scalar(P, t, 0), starts[d], hi))) return pdo_oom(P);
    if (!udyn) ins->operands[2 + d] = starts[d];
  }
  return udyn ? pdo_dus_shifted(P, ins, &x, &u, starts) : HJ_OK;
}

hj_status pd_concatenate(pd_ctx *P, hlo_instr *ins) {
  int axis = (int)ins->dims.v[0], n = ins->noperands, r = ins->shape.rank;
  pd_leaf merged = { 0 };
  pd_merge(P, &merged, r, ins->operands, n);
  bool dyn = false, zp = true;
  for (int k = 0; k < n; k++) {
    const pd_leaf *l = &pd_get(P, ins->operands[k])->leaf[0];
    dyn |= l->size[axis] != NULL;
    zp &= l->zp;
  }
  if (!dyn) {
    pd_val *v = pd_new_val(P, ins);
    if (!v) return pdo_oom(P);
    v->leaf[0] = merged;
    v->leaf[0].size[axis] = NULL;
    return HJ_OK;
  }
  ptrdiff_t mark = arrlen(P->c->instrs);
  hlo_instr *x0 = ins->operands[0];
  int64_t lo[HLO_MAX_RANK] = { 0 }, hi[HLO_MAX_RANK] = { 0 };
  hi[axis] = ins->shape.dims[axis] - x0->shape.dims[axis];
  hlo_instr *acc = pdo_pad(P, x0, pd_scalar(P, ins->shape.type, 0), lo, hi);
  hlo_instr *off = pd_size_of(P, ins, &pd_get(P, x0)->leaf[0], axis, x0->shape.dims[axis]);
  for (int k = 1; k < n && acc && off; k++) {
    hlo_instr *xk = ins->operands[k], *starts[HLO_MAX_RANK];
    for (int d = 0; d < r; d++) starts[d] = d == axis ? off : pd_s32(P, 0);
    acc = pdo_dus(P, acc, xk, starts);
    hlo_instr *sk = pd_size_of(P, ins, &pd_get(P, xk)->leaf[0], axis, xk->shape.dims[axis]);
    off = sk ? pd_binop(P, HLO_OP_ADD, off, sk) : NULL;
  }
  if (!acc || !off) return pdo_oom(P);
  pdo_replace(P, ins, acc, mark);
  pd_val *v = pd_new_val(P, acc);
  if (!v || !pd_new_val(P, ins)) return pdo_oom(P);
  v->leaf[0] = merged;
  v->leaf[0].size[axis] = off;
  v->leaf[0].zp = zp;
  return HJ_OK;
}

hj_status pd_pad(pd_ctx *P, hlo_instr *ins) {
  pd_val *v = pd_new_val(P, ins);
  if (!v) return pdo_oom(P);
  const pd_leaf *x = &pd_get(P, ins->operands[0])->leaf[0];
  ptrdiff_t mark = arrlen(P->c->instrs);
  hlo_instr *out = ins, *value = ins->operands[1];
  pd_leaf res = { 0 };
  for (int d = 0; d < ins->shape.rank; d++) {
    if (!x->size[d]) continue;
    hlo_instr *s = pd_size_of(P, ins, x, d, 0);
    if (!s) return pdo_oom(P);
    int64_t lo = ins->pad_lo.v[d], hi = ins->pad_hi.v[d], in = ins->pad_interior.n > d ? ins->pad_interior.v[d] : 0;
    hlo_instr *dil = s;
    if (in) dil = pd_binop(P, HLO_OP_MAXIMUM, pd_s32(P, 0),
                           pd_binop(P, HLO_OP_SUBTRACT, pd_binop(P, HLO_OP_MULTIPLY, s, pd_s32(P, in + 1)),
                                    pd_s32(P, in)));
    hlo_instr *end = lo ? pd_binop(P, HLO_OP_ADD, dil, pd_s32(P, lo)) : dil;
    if (!(out = pd_mask(P, out, d, end, value))) return pdo_oom(P);
    res.size[d] = pd_clamp_scalar(P, pd_s32(P, 0), hi ? pd_binop(P, HLO_OP_ADD, end, pd_s32(P, hi)) : end,
                                  pd_s32(P, ins->shape.dims[d]));
    if (!res.size[d]) return pdo_oom(P);
  }
  if (out != ins) {
    pdo_replace(P, ins, out, mark);
    if (!(v = pd_new_val(P, out))) return pdo_oom(P);
  }
  v->leaf[0] = res;
  return HJ_OK;
}

hj_status pd_reverse(pd_ctx *P, hlo_instr *ins) {
  pd_val *v = pd_new_val(P, ins);
  if (!v) return pdo_oom(P);
  const pd_leaf *x = &pd_get(P, ins->operands[0])->leaf[0];
  v->leaf[0] = *x;
  ptrdiff_t mark = arrlen(P->c->instrs);
  hlo_instr *out = ins;
  int r = ins->shape.rank;
  for (int i = 0; i < ins->dims.n; i++) {
    int d = (int)ins->dims.v[i];
    if (!x->size[d]) continue;
    hlo_instr *s = pd_size_of(P, ins, x, d, 0);
    int64_t b = ins->shape.dims[d], lo[HLO_MAX_RANK] = { 0 }, hi[HLO_MAX_RANK] = { 0 };
    hi[d] = b;
    hlo_instr *padded = s ? pdo_pad(P, out, pd_scalar(P, ins->shape.type, 0), lo, hi) : NULL, *starts[HLO_MAX_RANK];
    for (int k = 0; k < r; k++) starts[k] = k == d ? pd_binop(P, HLO_OP_SUBTRACT, pd_s32(P, b), s) : pd_s32(P, 0);
    if (!padded || !(out = pdo_dslice(P, padded, starts, ins->shape.dims))) return pdo_oom(P);
  }
  if (out != ins) {
    pdo_replace(P, ins, out, mark);
    pd_val *w = pd_new_val(P, out);
    if (!w) return pdo_oom(P);
    *w->leaf = *x;
  }
  return HJ_OK;
}

hj_status pd_gather(pd_ctx *P, hlo_instr *ins) {
  pd_val *v = pd_new_val(P, ins);
  if (!v) return pdo_oom(P);
  hlo_instr *oi = ins->operands[0], *ii = ins->operands[1];
  const pd_leaf *o = &pd_get(P, oi)->leaf[0], *ix = &pd_get(P, ii)->leaf[0];
  const hlo_gather_dims *g = &ins->gather;
  int irank = ii->shape.rank, ivd = (int)g->index_vector_dim;
  bool odyn = false;
  for (int d = 0; d < oi->shape.rank; d++) odyn |= o->size[d] != NULL;
  if (odyn && g->operand_batching_dims.n > 0) return pd_unsup(P, ins, "operand batching dims on a dynamic operand");
  if (ivd < irank && ix->size[ivd]) return pd_unsup(P, ins, "the index vector dim is dynamic");
  /* clamp the index components that address dynamic operand dims */
  hlo_instr *idx = ii;
  hlo_type it = ii->shape.type;
  for (int k = 0; k < g->start_index_map.n; k++) {
    int od = (int)g->start_index_map.v[k];
    if (!o->size[od]) continue;
    hlo_instr *s = pd_size_of(P, ins, o, od, 0);
    hlo_instr *ub = s ? pd_convert(P, pd_binop(P, HLO_OP_SUBTRACT, s, pd_s32(P, g->slice_sizes.v[od])), it) : NULL;
    hlo_instr *ubt = pd_broadcast(P, ub, &ii->shape);
    if (ubt && ivd < irank) {   /* only component k: elsewhere the index's own value */
      hlo_shape is = hlo_shape_array(HLO_S32, irank, ii->shape.dims);
      hlo_instr *iota = hlo_instr_new(P->c, HLO_OP_IOTA, NULL, &is, NULL, 0);
      if (!iota) return pdo_oom(P);
      iota->index = ivd;
      hlo_shape ps = hlo_shape_array(HLO_PRED, irank, ii->shape.dims);
      hlo_instr *ops[2] = { iota, pd_broadcast(P, pd_s32(P, k), &is) };
      hlo_instr *eq = ops[1] ? hlo_instr_new(P->c, HLO_OP_COMPARE, NULL, &ps, ops, 2) : NULL;
      if (!eq) return pdo_oom(P);
      eq->cmp_dir = HLO_CMP_EQ;
      hlo_instr *sel[3] = { eq, ubt, idx };
      ubt = hlo_instr_new(P->c, HLO_OP_SELECT, NULL, &ii->shape, sel, 3);
    }
    hlo_instr *zero = pd_broadcast(P, pd_scalar(P, it, 0), &ii->shape);
    if (!(idx = pd_binop(P, HLO_OP_MAXIMUM, zero, pd_binop(P, HLO_OP_MINIMUM, idx, ubt)))) return pdo_oom(P);
  }
  ins->operands[1] = idx;
  /* result dims: batch dims from the indices, offset dims from the operand */
  int bi = 0, od = 0;
  for (int d = 0; d < ins->shape.rank; d++) {
    if (hlo_ints_has(g->offset_dims, d)) {
      while (od < oi->shape.rank && (hlo_ints_has(g->collapsed_slice_dims, od) || hlo_ints_has(g->operand_batching_dims, od)))
        od++;
      if (od < oi->shape.rank && g->slice_sizes.v[od] == oi->shape.dims[od]) v->leaf[0].size[d] = o->size[od];
      od++;
    } else {
      if (bi == ivd) bi++;
      if (bi < irank) v->leaf[0].size[d] = ix->size[bi];
      bi++;
    }
  }
  return HJ_OK;
}

hj_status pd_reduce_window(pd_ctx *P, hlo_instr *ins) {
  int n = ins->noperands / 2;
  pd_val *v = pd_new_val(P, ins);
  if (!v) return pdo_oom(P);
  const hlo_window *w = &ins->window;
  int r = ins->operands[0]->shape.rank;
  pd_leaf m = { 0 };
  pd_merge(P, &m, r, ins->operands, n);
  for (int d = 0; d < r; d++) {
    hlo_instr *s = m.size[d];
    if (!s) continue;
    if (s == PD_UNKNOWN) return pd_unsup(P, ins, "the real size of dim %d is unknown", d);
    if (w->base_dilation.n > d && w->base_dilation.v[d] != 1)
      return pd_unsup(P, ins, "base dilation on dynamic dim %d", d);
    for (int k = 0; k < n; k++)
      if (!(ins->operands[k] = pd_mask(P, ins->operands[k], d, s, ins->operands[n + k]))) return pdo_oom(P);
    int64_t size = w->size.n > d ? w->size.v[d] : 1, stride = w->stride.n > d ? w->stride.v[d] : 1;
    int64_t lo = w->pad_lo.n > d ? w->pad_lo.v[d] : 0, hi = w->pad_hi.n > d ? w->pad_hi.v[d] : 0;
    int64_t wd = w->window_dilation.n > d ? w->window_dilation.v[d] : 1;
    int64_t span = (size - 1) * wd + 1;
    hlo_instr *num = pd_binop(P, HLO_OP_ADD, s, pd_s32(P, lo + hi - span));
    /* num >= 0 ? num / stride + 1 : 0, and never above the bound */
    hlo_instr *q = pd_binop(P, HLO_OP_ADD, stride == 1 ? num : pd_binop(P, HLO_OP_DIVIDE, num, pd_s32(P, stride)),
                            pd_s32(P, 1));
    hlo_instr *neg = pd_binop(P, HLO_OP_MINIMUM, num, pd_s32(P, 0));   /* < 0 exactly when num is */
    hlo_instr *ok = neg ? pd_binop(P, HLO_OP_ADD, neg, q) : NULL;      /* q when num >= 0, <= 0 else */
    const hlo_shape *os = ins->shape.type == HLO_TUPLE ? &ins->shape.tuple[0] : &ins->shape;
    hlo_instr *out = pd_clamp_scalar(P, pd_s32(P, 0), ok, pd_s32(P, os->dims[d]));
    if (!out) return pdo_oom(P);
    for (int k = 0; k < v->n; k++) v->leaf[k].size[d] = out;
  }
  return HJ_OK;
}
