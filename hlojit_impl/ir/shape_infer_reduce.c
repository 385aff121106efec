/* shape_infer_reduce.c — shape inference for reduce, reduce-window, dot, convolution,
   select-and-scatter and sort (XLA's
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

/* The window over |n| dims of sizes |in| (a convolution's spatial dims, else every dim):
   its parts have n numbers (or none), and each dim gives out[i] outputs (hlo_window_dim).
   Dilations and reversal only where |what| allows them ("lhs", "rhs", "rev" in it). */
static hj_status sir_window(hlo_si_cx *c, int n, const int64_t *in, int64_t *out, const char *what) {
  const hlo_window *w = &c->ins->window;
  const hlo_ints *parts[] = { &w->stride, &w->pad_lo, &w->pad_hi, &w->base_dilation, &w->window_dilation,
                              &w->reversal };
  bool ok = w->size.n == n;
  for (int p = 0; p < 6; p++) ok = ok && (parts[p]->n == n || parts[p]->n == 0);
  if (!ok) return hlo_si_err(c, "window has %d dims, the operand has %d windowed dims", w->size.n, n);
  for (int i = 0; i < n; i++) {
    int64_t sz = w->size.v[i], str = sir_at(w->stride, i, 1), bd = sir_at(w->base_dilation, i, 1),
            wd = sir_at(w->window_dilation, i, 1), rv = sir_at(w->reversal, i, 0);
    if (sz <= 0 || str <= 0 || bd < 1 || wd < 1 || (rv != 0 && rv != 1))
      return hlo_si_err(c, "window dim %d: size %lld, stride %lld and dilations must be positive, reversal 0 or 1",
                        i, (long long)sz, (long long)str);
    if ((bd != 1 && !strstr(what, "lhs")) || (wd != 1 && !strstr(what, "rhs")) || (rv && !strstr(what, "rev")))
      return hlo_si_err(c, "window dim %d: this op takes no %s", i,
                        bd != 1 ? "lhs_dilate" : wd != 1 ? "rhs_dilate" : "rhs_reversal");
    if (!hlo_window_dim(in[i], sz, str, sir_at(w->pad_lo, i, 0), sir_at(w->pad_hi, i, 0), bd, wd, &out[i]))
      return hlo_si_err(c, "window dim %d (size %lld, pads %lld_%lld, dilations %lld/%lld) overflows or pads %lld "
                        "to a negative size", i, (long long)sz, (long long)sir_at(w->pad_lo, i, 0),
                        (long long)sir_at(w->pad_hi, i, 0), (long long)bd, (long long)wd, (long long)in[i]);
  }
  return HJ_OK;
}

/* The result type of a dot or convolution of |l| and |k|: floats of different widths may
   meet (XLA's mixed precision: f32 x bf16), the wider wins; the declared type, when the
   instruction has one, is XLA's preferred_element_type (integers may not narrow). */
static hj_status sir_dot_type(hlo_si_cx *c, const hlo_shape *l, const hlo_shape *k, const char *ln,
                              const char *kn, hlo_type *t) {
  hlo_type ot = l->type;
  if (l->type != k->type) {
    if (!hlo_type_is_float(l->type) || !hlo_type_is_float(k->type) || hlo_type_size(l->type) == hlo_type_size(k->type))
      return hlo_si_err(c, "element types differ (%s %s, %s %s)", ln, hlo_si_str(c, 0, l), kn, hlo_si_str(c, 1, k));
    if (hlo_type_size(k->type) > hlo_type_size(l->type)) ot = k->type;
  }
  const hlo_shape *d = &c->ins->shape;
  if (hlo_shape_is_array(d) && !hlo_si_unset(d) && d->type != ot) {
    if (!hlo_type_is_float(l->type) && hlo_type_size(d->type) < hlo_type_size(l->type))
      return hlo_si_err(c, "result type %s is narrower than the operands' %s", hlo_type_name(d->type),
                        hlo_type_name(l->type));
    ot = d->type;
  }
  *t = ot;
  return HJ_OK;
}

static hj_status sir_reduce_window(hlo_si_cx *c, hlo_shape *out) {
  int n;
  hlo_type types[32];
  hj_status st = sir_inputs_inits(c, &n, types);
  if (st) return st;
  const hlo_shape *a = hlo_si_op(c, 0);
  hlo_shape r = *a;
  if ((st = sir_window(c, a->rank, a->dims, r.dims, "lhs rhs")) || (st = hlo_si_reducer(c, 0, types, n)))
    return st;
  return sir_results(c, &r, types, n, out);
}

/* select-and-scatter(operand, source, init): source has the window's output shape over
   operand, init is a scalar of operand's type; select: (T, T) -> pred, scatter: (T, T) -> T. */
static hj_status sir_select_and_scatter(hlo_si_cx *c, hlo_shape *out) {
  hj_status st = hlo_si_nops(c, 3);
  for (int i = 0; i < 3 && !st; i++) st = hlo_si_array(c, i);
  if (st) return st;
  const hlo_shape *a = hlo_si_op(c, 0), *s = hlo_si_op(c, 1), *v = hlo_si_op(c, 2);
  int64_t want[HLO_MAX_RANK];
  if ((st = sir_window(c, a->rank, a->dims, want, ""))) return st;
  bool same = s->rank == a->rank && s->type == a->type;
  for (int i = 0; same && i < a->rank; i++) same = s->dims[i] == want[i];
  if (!same) {
    hlo_shape ws = *a;
    memcpy(ws.dims, want, sizeof want);
    return hlo_si_err(c, "source %s must be %s (the window's outputs over operand %s)", hlo_si_str(c, 0, s),
                      hlo_si_str(c, 1, &ws), hlo_si_str(c, 2, a));
  }
  if (v->rank != 0 || v->type != a->type)
    return hlo_si_err(c, "init value %s must be a scalar of the operand's type %s", hlo_si_str(c, 0, v),
                      hlo_si_str(c, 1, a));
  const hlo_comp *k;
  hlo_shape sc = hlo_shape_scalar(a->type), p = hlo_shape_scalar(HLO_PRED);
  const hlo_shape *two[2] = { &sc, &sc };
  if ((st = hlo_si_callee(c, 0, &k)) || (st = hlo_si_sig(c, k, two, 2))) return st;
  if (!hlo_shape_compatible(&k->root->shape, &p))
    return hlo_si_err(c, "select '%s' must return pred[], returns %s", k->name, hlo_si_str(c, 0, &k->root->shape));
  hlo_type t = a->type;
  if ((st = hlo_si_reducer(c, 1, &t, 1))) return st;
  *out = hlo_si_result(a);
  return HJ_OK;
}

/* One role per dim: |dims| (the listed roles, then the spatial list) cover 0..rank-1 once. */
static bool sir_roles_ok(int rank, int64_t a, int64_t b, hlo_ints sp) {
  bool seen[HLO_MAX_RANK] = { false };
  if (rank > HLO_MAX_RANK || sp.n + 2 != rank) return false;
  int64_t all[HLO_MAX_RANK];
  all[0] = a, all[1] = b;
  for (int i = 0; i < sp.n; i++) all[2 + i] = sp.v[i];
  for (int i = 0; i < rank; i++) {
    if (all[i] < 0 || all[i] >= rank || seen[all[i]]) return false;
    seen[all[i]] = true;
  }
  return true;
}

/* XLA's InferConvolveShape: input features = kernel input features * feature groups,
   kernel output features divisible by both group counts, input batch by batch groups;
   result: batch = input batch / batch groups, features = kernel output features, spatial =
   the window's outputs over the input's spatial dims. Element types as for dot (floats of
   different widths meet; the declared type is the preferred element type). */
static hj_status sir_convolution(hlo_si_cx *c, hlo_shape *out) {
  hj_status st = hlo_si_nops(c, 2);
  if (!st) st = hlo_si_array(c, 0);
  if (!st) st = hlo_si_array(c, 1);
  if (st) return st;
  const hlo_conv_dims *cd = &c->ins->conv;
  const hlo_shape *l = hlo_si_op(c, 0), *k = hlo_si_op(c, 1);
  int ns = cd->in_spatial.n, rank = ns + 2;
  if (l->rank != rank || k->rank != rank || !sir_roles_ok(rank, cd->in_batch, cd->in_feature, cd->in_spatial) ||
      !sir_roles_ok(rank, cd->k_in, cd->k_out, cd->k_spatial) ||
      !sir_roles_ok(rank, cd->out_batch, cd->out_feature, cd->out_spatial))
    return hlo_si_err(c, "dim_labels do not give each dim of input %s, kernel %s and the result one role",
                      hlo_si_str(c, 0, l), hlo_si_str(c, 1, k));
  int64_t G = cd->feature_groups, BG = cd->batch_groups, B = l->dims[cd->in_batch], C = l->dims[cd->in_feature],
          Ci = k->dims[cd->k_in], O = k->dims[cd->k_out];
  if (G < 1 || BG < 1 || (G > 1 && BG > 1))
    return hlo_si_err(c, "feature_group_count %lld and batch_group_count %lld: both >= 1, at most one above 1",
                      (long long)G, (long long)BG);
  if (C % G || C / G != Ci || O % G || B % BG || O % BG)
    return hlo_si_err(c, "input features %lld must be kernel input features %lld x feature_group_count %lld, kernel "
                      "output features %lld divisible by both group counts, batch %lld by batch_group_count %lld "
                      "(input %s, kernel %s)", (long long)C, (long long)Ci, (long long)G, (long long)O, (long long)B,
                      (long long)BG, hlo_si_str(c, 0, l), hlo_si_str(c, 1, k));
  int64_t in[HLO_MAX_RANK], sp[HLO_MAX_RANK];
  for (int i = 0; i < ns; i++) {
    in[i] = l->dims[cd->in_spatial.v[i]];
    if (c->ins->window.size.n == ns && k->dims[cd->k_spatial.v[i]] != c->ins->window.size.v[i])
      return hlo_si_err(c, "window size %lld in dim %d differs from the kernel's %lld (kernel %s)",
                        (long long)c->ins->window.size.v[i], i, (long long)k->dims[cd->k_spatial.v[i]],
                        hlo_si_str(c, 0, k));
  }
  if ((st = sir_window(c, ns, in, sp, "lhs rhs rev"))) return st;
  hlo_type ot;
  if ((st = sir_dot_type(c, l, k, "input", "kernel", &ot))) return st;
  hlo_shape r = { .type = ot, .rank = rank };
  r.dims[cd->out_batch] = B / BG;
  r.dims[cd->out_feature] = O;
  for (int i = 0; i < ns; i++) r.dims[cd->out_spatial.v[i]] = sp[i];
  hlo_shape_set_default_layout(&r);
  *out = r;
  return HJ_OK;
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
  hlo_type ot;
  if ((st = sir_dot_type(c, l, rr, "lhs", "rhs", &ot))) return st;
  if (l->rank + rr->rank - lc.n - rc.n - rb.n > HLO_MAX_RANK)
    return hlo_si_err(c, "result rank too large (lhs %s, rhs %s)", hlo_si_str(c, 0, l), hlo_si_str(c, 1, rr));
  hlo_shape r = { .type = ot };
  for (int i = 0; i < lb.n; i++) { r.dynamic[r.rank] = l->dynamic[lb.v[i]]; r.dims[r.rank++] = l->dims[lb.v[i]]; }
  for (int i = 0; i < l->rank; i++)
    if (!hlo_ints_has(lb, i) && !hlo_ints_has(lc, i)) { r.dynamic[r.rank] = l->dynamic[i]; r.dims[r.rank++] = l->dims[i]; }
  for (int i = 0; i < rr->rank; i++)
    if (!hlo_ints_has(rb, i) && !hlo_ints_has(rc, i)) { r.dynamic[r.rank] = rr->dynamic[i]; r.dims[r.rank++] = rr->dims[i]; }
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
  case HLO_OP_CONVOLUTION: return sir_convolution(c, out);
  case HLO_OP_SELECT_AND_SCATTER: return sir_select_and_scatter(c, out);
  default: return sir_sort(c, out);
  }
}
