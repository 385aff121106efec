/* eval/eval_window.c — the evaluator's windowed ops with two inputs: convolution and
   select-and-scatter (reduce-window is in eval_reduce.c). They are the oracle the kernels
   (emitters/elemental_window.c, the im2col lowering in passes/conv_lower.c) are tested
   against, so they follow the definitions literally, one output element at a time.

   Window geometry, per windowed dim (XLA's, and StableHLO's spec): tap k of the window at
   output position o sits at p = o*stride - pad_lo + k*rhs_dilate in the input dilated by
   lhs_dilate (holes between elements) and padded; it reads input element p / lhs_dilate
   when p is a multiple of lhs_dilate inside the input, and nothing otherwise: no candidate
   for select-and-scatter; for a convolution, padding is zeros whose products 0 * w are
   taken (an infinite or NaN weight over padding gives NaN) and holes are skipped, which is
   what JAX gives on the CPU (XLA:CPU; measured with an inf weight: padding NaN, hole not).

   convolution (dim_labels name the roles): out[b, o, s...] = sum over taps k... and input
   features c < Ci of lhs[b', g*Ci + c, p(s, k)...] * rhs[k'..., c, o], where Ci is the
   kernel's input-feature size, g = o / (O / feature_group_count) the feature group,
   b' = (o / (O / batch_group_count)) * B_out + b the batch group's input batch, and k' the
   kernel tap (size-1-k where window_reversal is set). Taps run in row-major order, the
   features inside each tap (XLA's evaluator's order). Floats accumulate in double, integers
   in 64-bit wrapping arithmetic, pred as or-of-ands; the result is rounded once.

   select-and-scatter(operand, source, init): out = init everywhere; then for each window
   (source element) in row-major order, the selected element is found by walking the
   window's valid taps in row-major order, keeping the current one unless select(current,
   candidate) is false; source is combined into out there: out = scatter(out, source).
   Example: max-pool's gradient, select = GE, scatter = add, window 2x2 stride 2: each
   source value lands on the first maximum of its 2x2 block. */
#include "eval_internal.h"

typedef struct {
  int64_t size, stride, lo, bdil, wdil, in_dim;
  bool rev;
} evw_dim;

static int64_t evw_at(hlo_ints v, int i, int64_t dflt) { return i < v.n ? v.v[i] : dflt; }

/* The window's dims, checked against the input dims |in| (n of them) and the output's. */
static hj_status evw_dims(hj_ctx_t *ctx, const hlo_instr *ins, int n, const int64_t *in,
                          const int64_t *out, evw_dim *w) {
  const hlo_window *hw = &ins->window;
  if (hw->size.n != n) return hlo_evo_err(ctx, ins, "window has %d dims, want %d", hw->size.n, n);
  for (int i = 0; i < n; i++) {
    evw_dim *d = &w[i];
    d->size = hw->size.v[i], d->stride = evw_at(hw->stride, i, 1), d->lo = evw_at(hw->pad_lo, i, 0);
    d->bdil = evw_at(hw->base_dilation, i, 1), d->wdil = evw_at(hw->window_dilation, i, 1);
    d->rev = evw_at(hw->reversal, i, 0) != 0, d->in_dim = in[i];
    int64_t want;
    if (d->size < 1 || d->stride < 1 || d->bdil < 1 || d->wdil < 1 ||
        !hlo_window_dim(in[i], d->size, d->stride, d->lo, evw_at(hw->pad_hi, i, 0), d->bdil, d->wdil, &want) ||
        want != out[i])
      return hlo_evo_err(ctx, ins, "window dim %d does not give %lld outputs", i, (long long)out[i]);
  }
  return HJ_OK;
}

/* Input index of tap |k| at output position |o|; -1 in padding, -2 in a dilation hole
   (between two input elements). */
static int64_t evw_pos(const evw_dim *w, int64_t o, int64_t k) {
  __int128 p = (__int128)o * w->stride - w->lo + (__int128)k * w->wdil;
  if (p < 0 || p > (__int128)(w->in_dim - 1) * w->bdil) return -1;
  if (p % w->bdil) return -2;
  return (int64_t)(p / w->bdil);
}

/* ---- convolution ---------------------------------------------------------------------------- */

hj_status hlo_eval_convolution(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops,
                               hlo_literal *r) {
  const hlo_conv_dims *cd = &ins->conv;
  const hlo_shape *ls = &ops[0]->shape, *ks = &ops[1]->shape, *os = &r->shape;
  int ns = cd->in_spatial.n;
  if (ns != cd->k_spatial.n || ns != cd->out_spatial.n || ls->rank != ns + 2 || ks->rank != ns + 2 ||
      os->rank != ns + 2)
    return hlo_evo_err(ctx, ins, "dim_labels do not fit the ranks");
  int64_t in[HLO_MAX_RANK], out[HLO_MAX_RANK], lst[HLO_MAX_RANK], kst[HLO_MAX_RANK];
  for (int i = 0; i < ns; i++) in[i] = ls->dims[cd->in_spatial.v[i]], out[i] = os->dims[cd->out_spatial.v[i]];
  evw_dim w[HLO_MAX_RANK];
  hj_status st = evw_dims(ctx, ins, ns, in, out, w);
  if (st) return st;
  int64_t G = cd->feature_groups, BG = cd->batch_groups, O = ks->dims[cd->k_out], Ci = ks->dims[cd->k_in];
  int64_t Bo = os->dims[cd->out_batch];
  if (G < 1 || BG < 1 || O % G || O % BG || ls->dims[cd->in_feature] != Ci * G ||
      ls->dims[cd->in_batch] != Bo * BG || os->dims[cd->out_feature] != O)
    return hlo_evo_err(ctx, ins, "feature/batch sizes do not fit the group counts");
  hlo_shape_strides(ls, lst);
  hlo_shape_strides(ks, kst);
  hlo_type t = os->type;
  bool fl = hlo_type_is_float(t);
  int64_t total = hlo_shape_numel(os), o[HLO_MAX_RANK] = { 0 }, ntaps = 1;
  for (int i = 0; i < ns; i++) ntaps *= w[i].size;
  for (int64_t oi = 0; oi < total; oi++, hlo_evo_next(os->rank, os->dims, o)) {
    int64_t of = o[cd->out_feature], g = of / (O / G), bg = of / (O / BG);
    int64_t lbase = (bg * Bo + o[cd->out_batch]) * lst[cd->in_batch] + g * Ci * lst[cd->in_feature];
    int64_t kbase = of * kst[cd->k_out];
    double sf = 0;
    uint64_t su = 0;
    int64_t tap[HLO_MAX_RANK] = { 0 }, sdims[HLO_MAX_RANK];
    for (int i = 0; i < ns; i++) sdims[i] = w[i].size;
    for (int64_t ti = 0; ti < ntaps; ti++, hlo_evo_next(ns, sdims, tap)) {
      int64_t lo = lbase, ko = kbase;
      bool in_range = true, hole = false;
      for (int i = 0; i < ns; i++) {
        int64_t p = evw_pos(&w[i], o[cd->out_spatial.v[i]], tap[i]);
        in_range &= p >= 0;
        hole |= p == -2;
        lo += p >= 0 ? p * lst[cd->in_spatial.v[i]] : 0;
        ko += (w[i].rev ? w[i].size - 1 - tap[i] : tap[i]) * kst[cd->k_spatial.v[i]];
      }
      if (hole) continue;
      if (!in_range) {   /* a zero of the padding: 0 * w (NaN for an infinite w) */
        for (int64_t c = 0; fl && c < Ci; c++) sf += 0.0 * hlo_load_f64(ks->type, ops[1]->data, ko + c * kst[cd->k_in]);
        continue;
      }
      for (int64_t c = 0; c < Ci; c++) {
        int64_t li = lo + c * lst[cd->in_feature], ki = ko + c * kst[cd->k_in];
        if (fl) sf += hlo_load_f64(ls->type, ops[0]->data, li) * hlo_load_f64(ks->type, ops[1]->data, ki);
        else if (t == HLO_PRED) su |= hlo_load_u64(ls->type, ops[0]->data, li) && hlo_load_u64(ks->type, ops[1]->data, ki);
        else su += hlo_load_u64(ls->type, ops[0]->data, li) * hlo_load_u64(ks->type, ops[1]->data, ki);
      }
    }
    if (fl) hlo_store_f64(t, r->data, oi, sf);
    else hlo_store_u64(t, r->data, oi, t == HLO_PRED ? su != 0 : su);
  }
  return HJ_OK;
}

/* ---- select-and-scatter --------------------------------------------------------------------- */

hj_status hlo_eval_select_and_scatter(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops,
                                      hlo_literal *r) {
  const hlo_shape *xs = &ops[0]->shape, *ss = &ops[1]->shape;
  int n = xs->rank;
  evw_dim w[HLO_MAX_RANK];
  if (ss->rank != n || ins->ncalls != 2 || !hlo_same_dims(&r->shape, xs))
    return hlo_evo_err(ctx, ins, "operand, source and result do not fit");
  hj_status st = evw_dims(ctx, ins, n, xs->dims, ss->dims, w);
  if (st) return st;
  for (int i = 0; i < n; i++)
    if (w[i].bdil != 1 || w[i].wdil != 1) return hlo_evo_err(ctx, ins, "window dilations must be 1");
  int es = hlo_type_size(xs->type);
  int64_t total = hlo_shape_numel(xs), nsrc = hlo_shape_numel(ss), xst[HLO_MAX_RANK];
  for (int64_t i = 0; i < total; i++) memcpy(r->data + i * es, ops[2]->data, (size_t)es);
  hlo_shape_strides(xs, xst);
  hlo_shape ps = hlo_shape_scalar(HLO_PRED), ts = hlo_shape_scalar(xs->type);
  int64_t s[HLO_MAX_RANK] = { 0 }, sizes[HLO_MAX_RANK], ntaps = 1;
  for (int i = 0; i < n; i++) sizes[i] = w[i].size, ntaps *= w[i].size;
  for (int64_t si = 0; si < nsrc; si++, hlo_evo_next(n, ss->dims, s)) {
    int64_t sel = -1, tap[HLO_MAX_RANK] = { 0 };
    for (int64_t ti = 0; ti < ntaps; ti++, hlo_evo_next(n, sizes, tap)) {
      int64_t xi = 0;
      bool ok = true;
      for (int i = 0; i < n && ok; i++) {
        int64_t p = evw_pos(&w[i], s[i], tap[i]);
        ok = p >= 0;   /* (no dilation here: no holes) */
        xi += p * xst[i];
      }
      if (!ok) continue;
      if (sel < 0) { sel = xi; continue; }
      hlo_literal a = hlo_literal_view(&ts, ops[0]->data + sel * es), b = hlo_literal_view(&ts, ops[0]->data + xi * es);
      hlo_literal *args[2] = { &a, &b }, *res = NULL;
      if ((st = hlo_eval_scalar_call(ctx, ins->calls[0], args, 2, &res))) return st;
      bool keep = res->shape.type == HLO_PRED && res->shape.rank == 0 && res->data && res->data[0];
      bool bad = !hlo_shape_compatible(&res->shape, &ps);
      hlo_literal_free(res);
      if (bad) return hlo_evo_err(ctx, ins, "select must return pred[]");
      if (!keep) sel = xi;
    }
    if (sel >= 0 && (st = hlo_evo_combine(ctx, ins->calls[1], 1, &r, sel, &ops[1], si))) return st;
  }
  return HJ_OK;
}
