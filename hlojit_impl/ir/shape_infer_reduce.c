/* shape_infer_reduce.c — shape inference for reduce, reduce-window, dot and sort (XLA's
   shape_inference.cc rules). Part of shape_infer.c: hlo_infer_shape there dispatches here
   through hlo_si_reduce_like, and the hlo_si_* helpers (context, messages, dim-list and
   called-computation checks) come from there; the conventions in its top comment hold here
   too. */
#include "shape_infer_internal.h"

/* ---- reduce, reduce-window, dot, sort ------------------------------------------------------ */

/* Operands: N arrays of equal dims, then N scalar inits of the same types. */
static hj_status sir_inputs_inits(hlo_si_cx *c, int *n, hlo_type *types) {
  int nops = c->ins->noperands;
  if (nops < 2 || nops % 2 || nops / 2 > 32)
    return hlo_si_err(c, "expects N inputs and N init values, got %d operands", nops);
  *n = nops / 2;
  hj_status st;
  for (int i = 0; i < *n; i++) {
    if ((st = hlo_si_array(c, i)) || (st = hlo_si_array(c, *n + i))) return st;
    const hlo_shape *a = hlo_si_op(c, i), *v = hlo_si_op(c, *n + i);
    if (!hlo_same_dims(a, hlo_si_op(c, 0)))
      return hlo_si_err(c, "input %d %s differs from input 0 %s", i, hlo_si_str(c, 0, a),
                        hlo_si_str(c, 1, hlo_si_op(c, 0)));
    if (v->rank != 0 || v->type != a->type)
      return hlo_si_err(c, "init value %d %s must be a scalar of the type of input %s", i,
                        hlo_si_str(c, 0, v), hlo_si_str(c, 1, a));
    types[i] = a->type;
  }
  return HJ_OK;
}

static hj_status sir_results(hlo_si_cx *c, const hlo_shape *dims, const hlo_type *types, int n,
                            hlo_shape *out) {
  hlo_shape res[32];
  for (int i = 0; i < n; i++) res[i] = hlo_si_with_type(dims, types[i]);
  if (n == 1) { *out = res[0]; return HJ_OK; }
  return hlo_si_tuple(c, res, n, out);
}

static hj_status sir_reduce(hlo_si_cx *c, hlo_shape *out) {
  int n;
  hlo_type types[32];
  hj_status st = sir_inputs_inits(c, &n, types);
  if (st) return st;
  const hlo_shape *a = hlo_si_op(c, 0);
  hlo_ints dims = c->ins->dims;
  char b[128];
  if (!hlo_si_dims_ok(dims, a->rank, false))
    return hlo_si_err(c, "dimensions=%s out of range or repeated for %s",
                      hlo_si_ints_str(dims, b, sizeof b), hlo_si_str(c, 0, a));
  if ((st = hlo_si_reducer(c, 0, types, n))) return st;
  hlo_shape r = { .type = a->type };
  for (int d = 0; d < a->rank; d++)
    if (!hlo_ints_has(dims, d)) {
      r.dynamic[r.rank] = a->dynamic[d];
      r.dims[r.rank++] = a->dims[d];
    }
  return sir_results(c, &r, types, n, out);
}

static int64_t sir_at(hlo_ints v, int i, int64_t dflt) { return v.n ? v.v[i] : dflt; }

static hj_status sir_reduce_window(hlo_si_cx *c, hlo_shape *out) {
  int n;
  hlo_type types[32];
  hj_status st = sir_inputs_inits(c, &n, types);
  if (st) return st;
  const hlo_shape *a = hlo_si_op(c, 0);
  const hlo_window *w = &c->ins->window;
  int k = a->rank;
  const hlo_ints *parts[] = { &w->stride, &w->pad_lo, &w->pad_hi, &w->base_dilation, &w->window_dilation };
  bool ok = w->size.n == k;
  for (int p = 0; p < 5; p++) ok = ok && (parts[p]->n == k || parts[p]->n == 0);
  if (!ok) return hlo_si_err(c, "window has %d dims, operand %s has %d", w->size.n, hlo_si_str(c, 0, a), k);
  if ((st = hlo_si_reducer(c, 0, types, n))) return st;
  hlo_shape r = *a;
  for (int i = 0; i < k; i++) {
    int64_t sz = w->size.v[i], str = sir_at(w->stride, i, 1), bd = sir_at(w->base_dilation, i, 1),
            wd = sir_at(w->window_dilation, i, 1);
    if (sz <= 0 || str <= 0 || bd < 1 || wd < 1)
      return hlo_si_err(c, "window dim %d: size %lld, stride %lld and dilations must be positive", i,
                        (long long)sz, (long long)str);
    if (!hlo_window_dim(a->dims[i], sz, str, sir_at(w->pad_lo, i, 0), sir_at(w->pad_hi, i, 0), bd, wd,
                        &r.dims[i]))
      return hlo_si_err(c, "window dim %d (size %lld, pads %lld_%lld, dilations %lld/%lld) overflows or pads to a "
                        "negative size for %s",
                        i, (long long)sz, (long long)sir_at(w->pad_lo, i, 0), (long long)sir_at(w->pad_hi, i, 0),
                        (long long)bd, (long long)wd, hlo_si_str(c, 0, a));
  }
  return sir_results(c, &r, types, n, out);
}

static hj_status sir_dot(hlo_si_cx *c, hlo_shape *out) {
  hj_status st = hlo_si_nops(c, 2);
  if (!st) st = hlo_si_array(c, 0);
  if (!st) st = hlo_si_array(c, 1);
  if (st) return st;
  const hlo_dot_dims *dn = &c->ins->dot;
  const hlo_shape *l = hlo_si_op(c, 0), *rr = hlo_si_op(c, 1);
  hlo_ints lb = dn->lhs_batch, rb = dn->rhs_batch, lc = dn->lhs_contract, rc = dn->rhs_contract;
  bool ok = hlo_si_dims_ok(lb, l->rank, false) && hlo_si_dims_ok(lc, l->rank, false) &&
            hlo_si_dims_ok(rb, rr->rank, false) && hlo_si_dims_ok(rc, rr->rank, false);
  for (int i = 0; ok && i < lc.n; i++) ok = !hlo_ints_has(lb, lc.v[i]);
  for (int i = 0; ok && i < rc.n; i++) ok = !hlo_ints_has(rb, rc.v[i]);
  if (!ok) return hlo_si_err(c, "batch/contracting dims out of range or repeated (lhs %s, rhs %s)",
                             hlo_si_str(c, 0, l), hlo_si_str(c, 1, rr));
  if (lb.n != rb.n || lc.n != rc.n)
    return hlo_si_err(c, "lhs and rhs need as many batch (%d vs %d) and contracting (%d vs %d) dims "
                      "(lhs %s, rhs %s)", lb.n, rb.n, lc.n, rc.n, hlo_si_str(c, 0, l), hlo_si_str(c, 1, rr));
  for (int i = 0; i < lc.n; i++)
    if (l->dims[lc.v[i]] != rr->dims[rc.v[i]])
      return hlo_si_err(c, "contracting dim sizes %lld vs %lld (lhs %s, rhs %s)", (long long)l->dims[lc.v[i]],
                        (long long)rr->dims[rc.v[i]], hlo_si_str(c, 0, l), hlo_si_str(c, 1, rr));
  for (int i = 0; i < lb.n; i++)
    if (l->dims[lb.v[i]] != rr->dims[rb.v[i]])
      return hlo_si_err(c, "batch dim sizes %lld vs %lld (lhs %s, rhs %s)", (long long)l->dims[lb.v[i]],
                        (long long)rr->dims[rb.v[i]], hlo_si_str(c, 0, l), hlo_si_str(c, 1, rr));
  /* Floats of different widths may meet (XLA's mixed-precision dot: f32 x bf16); the
     result is then the wider type unless the instruction declares another. */
  hlo_type ot = l->type;
  if (l->type != rr->type) {
    if (!hlo_type_is_float(l->type) || !hlo_type_is_float(rr->type) ||
        hlo_type_size(l->type) == hlo_type_size(rr->type))
      return hlo_si_err(c, "element types differ (lhs %s, rhs %s)", hlo_si_str(c, 0, l), hlo_si_str(c, 1, rr));
    if (hlo_type_size(rr->type) > hlo_type_size(l->type)) ot = rr->type;
  }
  if (l->rank + rr->rank - lc.n - rc.n - rb.n > HLO_MAX_RANK)
    return hlo_si_err(c, "result rank too large (lhs %s, rhs %s)", hlo_si_str(c, 0, l), hlo_si_str(c, 1, rr));
  hlo_shape r = { .type = ot };
  for (int i = 0; i < lb.n; i++) { r.dynamic[r.rank] = l->dynamic[lb.v[i]]; r.dims[r.rank++] = l->dims[lb.v[i]]; }
  for (int i = 0; i < l->rank; i++)
    if (!hlo_ints_has(lb, i) && !hlo_ints_has(lc, i)) { r.dynamic[r.rank] = l->dynamic[i]; r.dims[r.rank++] = l->dims[i]; }
  for (int i = 0; i < rr->rank; i++)
    if (!hlo_ints_has(rb, i) && !hlo_ints_has(rc, i)) { r.dynamic[r.rank] = rr->dynamic[i]; r.dims[r.rank++] = rr->dims[i]; }
  /* The declared type is XLA's preferred_element_type; integers may not narrow. */
  const hlo_shape *d = &c->ins->shape;
  if (hlo_shape_is_array(d) && !hlo_si_unset(d) && d->type != ot) {
    if (!hlo_type_is_float(l->type) && hlo_type_size(d->type) < hlo_type_size(l->type))
      return hlo_si_err(c, "result type %s is narrower than the operands' %s", hlo_type_name(d->type),
                        hlo_type_name(l->type));
    r.type = d->type;
  }
  hlo_shape_set_default_layout(&r);
  *out = r;
  return HJ_OK;
}

static hj_status sir_sort(hlo_si_cx *c, hlo_shape *out) {
  int n = c->ins->noperands;
  if (n < 1 || n > 32) return hlo_si_err(c, "expects 1 to 32 operands, got %d", n);
  hj_status st;
  hlo_shape res[32], sc[64];
  const hlo_shape *want[64];
  for (int i = 0; i < n; i++) {
    if ((st = hlo_si_array(c, i))) return st;
    const hlo_shape *a = hlo_si_op(c, i);
    if (!hlo_same_dims(a, hlo_si_op(c, 0)))
      return hlo_si_err(c, "operand %d %s differs from operand 0 %s", i, hlo_si_str(c, 0, a),
                        hlo_si_str(c, 1, hlo_si_op(c, 0)));
    res[i] = hlo_si_result(a);
    sc[2 * i] = sc[2 * i + 1] = hlo_shape_scalar(a->type);
    want[2 * i] = &sc[2 * i];
    want[2 * i + 1] = &sc[2 * i + 1];
  }
  const hlo_shape *a = hlo_si_op(c, 0);
  if (c->ins->dims.n != 1 || c->ins->dims.v[0] < 0 || c->ins->dims.v[0] >= a->rank)
    return hlo_si_err(c, "needs one sort dimension in range for %s", hlo_si_str(c, 0, a));
  const hlo_comp *k;
  if ((st = hlo_si_callee(c, 0, &k)) || (st = hlo_si_sig(c, k, want, 2 * n))) return st;
  hlo_shape p = hlo_shape_scalar(HLO_PRED);
  if (!hlo_shape_compatible(&k->root->shape, &p))
    return hlo_si_err(c, "comparator '%s' must return pred[], returns %s", k->name, hlo_si_str(c, 0, &k->root->shape));
  if (n == 1) { *out = res[0]; return HJ_OK; }
  return hlo_si_tuple(c, res, n, out);
}

hj_status hlo_si_reduce_like(hlo_si_cx *c, hlo_shape *out) {
  switch (c->ins->op) {
  case HLO_OP_REDUCE: return sir_reduce(c, out);
  case HLO_OP_REDUCE_WINDOW: return sir_reduce_window(c, out);
  case HLO_OP_DOT: return sir_dot(c, out);
  default: return sir_sort(c, out);
  }
}
