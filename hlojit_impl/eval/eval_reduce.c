/* eval_reduce.c — the reference evaluator's computing structural ops: reduce (variadic),
   reduce-window, sort (variadic) and dot (general). Part of the structural ops (the switch
   and the hlo_evo_* helpers are in eval_ops.c).

   Determinism: every result is a function of the inputs alone, fixed by these orders.
   - reduce: acc = init, then acc = f(acc..., x...) over the reduced elements in row-major
     order. Implemented as ONE row-major walk over the whole input, each element folded into
     its output slot; for a given output slot that visits its reduced elements in row-major
     order, which is the order above. Reducers that are exactly one binary op of the two
     parameters (add multiply maximum minimum and or) take a typed row loop (f32/f64/s32 add
     in C, the rest through hlo_eval_binary_elem) with the SAME order and the same operand
     order as the computation, so fast and slow paths give identical bits; anything else
     calls the computation per element (hlo_evo_combine).
   - reduce-window: per output element, the window positions in row-major order; positions
     in the padding or in base-dilation holes are skipped (XLA's HloEvaluator does the same).
   - sort: a bottom-up merge sort of an index array per row (always stable: ties keep input
     order); the comparator gets (lhs_0, rhs_0, lhs_1, rhs_1, ...), XLA's parameter order.
     A comparator that is one compare of a parameter pair is evaluated inline.
   - dot: result dims are batch dims, lhs free dims, rhs free dims (each in operand order).
     Float dots accumulate in double (4 interleaved partial sums over the contracting index,
     k mod 4, added pairwise at the end) and round to the result type once (f16/bf16 through
     f32, as hlo_store_f64 does): the most accurate result, so backends are compared to it
     within a tolerance. Operands are packed first to [B][M][K] and [B][N][K] (float when
     exact, else double), so the inner loop is two contiguous streams. Integer dots accumulate in
     uint64 (wrap-around, truncated to the result width); pred dots are or-of-ands. */
#include "eval_internal.h"
#include <stdlib.h>

static int64_t evr_get(const hlo_ints *v, int d, int64_t dflt) { return v->n > d ? v->v[d] : dflt; }

/* The |n| result arrays of a variadic op: r itself, or its tuple elements. */
static hj_status evr_outs(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *r, int n,
                          hlo_literal **outs) {
  if (n > HLO_EVO_MAX_N) return hlo_evo_err(ctx, ins, "more than %d operands", HLO_EVO_MAX_N);
  if (n > 1 && (r->shape.type != HLO_TUPLE || r->nelems != n))
    return hlo_evo_err(ctx, ins, "result must be a tuple of %d arrays", n);
  if (n == 1 && r->shape.type == HLO_TUPLE) return hlo_evo_err(ctx, ins, "result must be an array");
  for (int k = 0; k < n; k++) outs[k] = n == 1 ? r : r->elems[k];
  if (ins->op != HLO_OP_SORT && (ins->ncalls < 1 || !ins->calls[0]))
    return hlo_evo_err(ctx, ins, "no to_apply computation");
  return HJ_OK;
}

/* Fills |dst| with the scalar |init| (inits of reduce and reduce-window). */
static void evr_fill(hlo_literal *dst, const hlo_literal *init) {
  int es = hlo_type_size(dst->shape.type);
  int64_t n = hlo_shape_numel(&dst->shape);
  for (int64_t i = 0; i < n; i++) memcpy(dst->data + i * es, init->data, (size_t)es);
}

/* ---- reduce ------------------------------------------------------------------------------ */

/* acc[ao + i*as] = op(acc[..], x[xo + i]) for i < len (operands swapped when |sw|). */
static void evr_row(hlo_opcode op, bool sw, hlo_type t, uint8_t *acc, int64_t ao, int64_t as,
                    const uint8_t *x, int64_t xo, int64_t len) {
  if (op == HLO_OP_ADD && t == HLO_F32) {
    float *a = (float *)acc;
    const float *v = (const float *)x + xo;
    if (as == 0) {
      float s = a[ao];
      for (int64_t i = 0; i < len; i++) s = sw ? v[i] + s : s + v[i];
      a[ao] = s;
    } else {
      for (int64_t i = 0; i < len; i++) a[ao + i * as] = sw ? v[i] + a[ao + i * as] : a[ao + i * as] + v[i];
    }
  } else if (op == HLO_OP_ADD && t == HLO_F64) {
    double *a = (double *)acc;
    const double *v = (const double *)x + xo;
    for (int64_t i = 0; i < len; i++) a[ao + i * as] = sw ? v[i] + a[ao + i * as] : a[ao + i * as] + v[i];
  } else if (op == HLO_OP_ADD && (t == HLO_S32 || t == HLO_U32)) {
    uint32_t *a = (uint32_t *)acc;  /* wrap-around, as two's complement */
    const uint32_t *v = (const uint32_t *)x + xo;
    for (int64_t i = 0; i < len; i++) a[ao + i * as] += v[i];
  } else if (!sw) {
    for (int64_t i = 0; i < len; i++) hlo_eval_binary_elem(op, t, acc, ao + i * as, x, xo + i, acc, ao + i * as);
  } else {
    for (int64_t i = 0; i < len; i++) hlo_eval_binary_elem(op, t, x, xo + i, acc, ao + i * as, acc, ao + i * as);
  }
}

/* Checks a reduce's inputs, inits and results; fills |ost_in| (output stride per input
   dim, 0 for reduced dims). */
static hj_status evr_reduce_check(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops,
                                  int n, hlo_literal *const *outs, int64_t *ost_in) {
  const hlo_shape *is = &ops[0]->shape;
  bool red[HLO_MAX_RANK] = { false };
  for (int i = 0; i < ins->dims.n; i++) {
    int64_t d = ins->dims.v[i];
    if (d < 0 || d >= is->rank || red[d]) return hlo_evo_err(ctx, ins, "bad dimensions={...}");
    red[d] = true;
  }
  for (int k = 0; k < n; k++) {
    const hlo_shape *ik = &ops[k]->shape, *init = &ops[n + k]->shape, *ok = &outs[k]->shape;
    if (ik->rank != is->rank || init->rank != 0 || init->type != ok->type ||
        ok->rank != is->rank - ins->dims.n)
      return hlo_evo_err(ctx, ins, "input/init/result %d do not agree", k);
    for (int d = 0, j = 0; d < is->rank; d++) {
      if (ik->dims[d] != is->dims[d]) return hlo_evo_err(ctx, ins, "input %d dims differ", k);
      if (!red[d] && ok->dims[j++] != is->dims[d])
        return hlo_evo_err(ctx, ins, "result %d dims do not match the kept input dims", k);
    }
  }
  int64_t rst[HLO_MAX_RANK];
  hlo_shape_strides(&outs[0]->shape, rst);
  for (int d = 0, j = 0; d < is->rank; d++) ost_in[d] = red[d] ? 0 : rst[j++];
  return HJ_OK;
}

hj_status hlo_eval_reduce(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops,
                          hlo_literal *r) {
  int n = ins->noperands / 2;
  hlo_literal *outs[HLO_EVO_MAX_N];
  int64_t ost[HLO_MAX_RANK] = { 0 };
  hj_status st = evr_outs(ctx, ins, r, n, outs);
  if (!st) st = evr_reduce_check(ctx, ins, ops, n, outs, ost);
  if (st) return st;
  for (int k = 0; k < n; k++) evr_fill(outs[k], ops[n + k]);
  const hlo_shape *is = &ops[0]->shape;
  if (hlo_shape_numel(is) == 0) return HJ_OK;
  hlo_type t = is->type;
  bool sw = false;
  hlo_opcode op = n == 1 && outs[0]->shape.type == t ? hlo_binary_reducer(ins->calls[0], t, &sw)
                                                     : HLO_OP_COUNT;
  int in = is->rank ? is->rank - 1 : 0;             /* outer dims: a counter; inner: a row */
  int64_t len = is->rank ? is->dims[in] : 1, as = is->rank ? ost[in] : 0;
  int64_t idx[HLO_MAX_RANK] = { 0 }, xo = 0;
  do {
    int64_t ao = 0;
    for (int d = 0; d < in; d++) ao += idx[d] * ost[d];
    if (op != HLO_OP_COUNT) {
      evr_row(op, sw, t, outs[0]->data, ao, as, ops[0]->data, xo, len);
    } else {
      for (int64_t i = 0; i < len; i++)
        if ((st = hlo_evo_combine(ctx, ins->calls[0], n, outs, ao + i * as, ops, xo + i)) != HJ_OK)
          return st;
    }
    xo += len;
  } while (hlo_evo_next(in, is->dims, idx));
  return HJ_OK;
}

/* ---- reduce-window ------------------------------------------------------------------------ */

typedef struct {
  int64_t size, stride, lo, hi, bdil, wdil;
} evr_win;

static hj_status evr_window(hj_ctx_t *ctx, const hlo_instr *ins, const hlo_shape *is,
                            const hlo_shape *os, evr_win *w) {
  const hlo_window *hw = &ins->window;
  const hlo_ints *all[6] = { &hw->size, &hw->stride, &hw->pad_lo, &hw->pad_hi,
                             &hw->base_dilation, &hw->window_dilation };
  for (int i = 0; i < 6; i++)
    if (all[i]->n != 0 && all[i]->n != is->rank)
      return hlo_evo_err(ctx, ins, "window={...} has the wrong number of dims");
  if (os->rank != is->rank) return hlo_evo_err(ctx, ins, "result rank differs from the input");
  for (int d = 0; d < is->rank; d++) {
    evr_win *v = &w[d];
    v->size = evr_get(&hw->size, d, 1), v->stride = evr_get(&hw->stride, d, 1);
    v->lo = evr_get(&hw->pad_lo, d, 0), v->hi = evr_get(&hw->pad_hi, d, 0);
    v->bdil = evr_get(&hw->base_dilation, d, 1), v->wdil = evr_get(&hw->window_dilation, d, 1);
    if (v->size < 1 || v->stride < 1 || v->bdil < 1 || v->wdil < 1)
      return hlo_evo_err(ctx, ins, "window dim %d: sizes, strides and dilations must be >= 1", d);
    int64_t want;
    if (!hlo_window_dim(is->dims[d], v->size, v->stride, v->lo, v->hi, v->bdil, v->wdil, &want) ||
        os->dims[d] != want)
      return hlo_evo_err(ctx, ins, "window dim %d does not give the result's %lld outputs", d,
                         (long long)os->dims[d]);
  }
  return HJ_OK;
}

/* The window taps of one dim for one output index o: the window offsets wi in [0, size),
   ascending, whose position pos(wi) = o*stride - lo + wi*wdil lands on an input element
   (pos = k*bdil, 0 <= k < dim); the others are padding or base-dilation holes. Positions
   are 128-bit: o*stride - lo need not fit in int64 for a valid window. The taps are found
   without visiting the holes: wi runs over the offsets whose position lies in
   [0, (dim-1)*bdil], or, when there are more of those than input elements, k runs over the
   input elements and keeps those some wi reaches; either way at most min(size, dim)-ish
   steps per tap, not size (a window of 2^40 over padding costs nothing). */
typedef struct {
  __int128 base;                      /* o*stride - lo: the position of wi = 0 */
  int64_t wlo, whi;                   /* wi range whose positions are inside the input */
  bool by_k;                          /* iterate over input elements k */
  int64_t wi, k;                      /* the current tap */
} evr_taps;

static bool evr_taps_ok(const evr_win *w, int64_t dim, evr_taps *t) {
  if (t->by_k) {
    for (; t->k < dim; t->k++) {
      __int128 q = (__int128)t->k * w->bdil - t->base;
      if (q >= 0 && q % w->wdil == 0 && q / w->wdil < w->size) {
        t->wi = (int64_t)(q / w->wdil);
        return true;
      }
    }
    return false;
  }
  for (; t->wi <= t->whi; t->wi++) {
    __int128 p = t->base + (__int128)t->wi * w->wdil;
    if (p % w->bdil == 0) {
      t->k = (int64_t)(p / w->bdil);
      return true;
    }
  }
  return false;
}

static bool evr_taps_first(const evr_win *w, int64_t dim, int64_t o, evr_taps *t) {
  __int128 top = (__int128)(dim - 1) * w->bdil;   /* last input position */
  t->base = (__int128)o * w->stride - w->lo;
  /* wlo = ceil(-base / wdil) clamped at 0, whi = floor((top - base) / wdil) clamped at size-1 */
  __int128 a = t->base >= 0 ? 0 : (-t->base + w->wdil - 1) / w->wdil;
  __int128 b = top - t->base < 0 ? -1 : (top - t->base) / w->wdil;
  if (b > w->size - 1) b = w->size - 1;
  if (dim == 0 || a > b) return false;
  t->wlo = (int64_t)a;
  t->whi = (int64_t)b;
  t->by_k = b - a + 1 > dim;
  t->wi = t->wlo;
  t->k = 0;
  return evr_taps_ok(w, dim, t);
}

static bool evr_taps_next(const evr_win *w, int64_t dim, evr_taps *t) {
  if (t->by_k) t->k++;
  else t->wi++;
  return evr_taps_ok(w, dim, t);
}

hj_status hlo_eval_reduce_window(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops,
                                 hlo_literal *r) {
  int n = ins->noperands / 2;
  hlo_literal *outs[HLO_EVO_MAX_N];
  evr_win w[HLO_MAX_RANK];
  hj_status st = evr_outs(ctx, ins, r, n, outs);
  if (st) return st;
  const hlo_shape *is = &ops[0]->shape, *os = &outs[0]->shape;
  for (int k = 0; k < n; k++) {
    const hlo_shape *ik = &ops[k]->shape, *init = &ops[n + k]->shape, *ok = &outs[k]->shape;
    bool same = ik->rank == is->rank && ok->rank == os->rank;
    for (int d = 0; same && d < is->rank; d++)
      same = ik->dims[d] == is->dims[d] && ok->dims[d] == os->dims[d];
    if (!same || init->rank != 0 || init->type != ok->type)
      return hlo_evo_err(ctx, ins, "input/init/result %d do not agree", k);
  }
  if ((st = evr_window(ctx, ins, is, os, w)) != HJ_OK) return st;
  for (int k = 0; k < n; k++) evr_fill(outs[k], ops[n + k]);
  int64_t total = hlo_shape_numel(os), ist[HLO_MAX_RANK];
  if (total == 0) return HJ_OK;
  hlo_shape_strides(is, ist);
  hlo_type t = is->type;
  bool sw = false;
  hlo_opcode op = n == 1 && os->type == t ? hlo_binary_reducer(ins->calls[0], t, &sw)
                                          : HLO_OP_COUNT;
  int64_t o[HLO_MAX_RANK] = { 0 };
  evr_taps tp[HLO_MAX_RANK];
  for (int64_t oi = 0; oi < total; oi++, hlo_evo_next(os->rank, os->dims, o)) {
    bool any = true;
    for (int d = 0; d < is->rank && any; d++) any = evr_taps_first(&w[d], is->dims[d], o[d], &tp[d]);
    while (any) {
      int64_t xi = 0;
      for (int d = 0; d < is->rank; d++) xi += tp[d].k * ist[d];
      if (op != HLO_OP_COUNT) evr_row(op, sw, t, outs[0]->data, oi, 0, ops[0]->data, xi, 1);
      else if ((st = hlo_evo_combine(ctx, ins->calls[0], n, outs, oi, ops, xi)) != HJ_OK)
        return st;
      int d = is->rank - 1;   /* next tap in row-major window order */
      while (d >= 0 && !evr_taps_next(&w[d], is->dims[d], &tp[d])) {
        evr_taps_first(&w[d], is->dims[d], o[d], &tp[d]);
        d--;
      }
      any = d >= 0;
    }
  }
  return HJ_OK;
}

/* ---- sort ------------------------------------------------------------------------------------ */

typedef struct {
  hj_ctx_t *ctx;
  const hlo_comp *cmp;
  int n;
  hlo_literal *const *ops;
  int64_t base, stride;   /* the row being sorted: element p is at base + p*stride */
  int fast_k;             /* >= 0: the comparator is compare(param 2k(+1), param 2k+1(2k)) */
  bool fast_swap;         /* compare(rhs, lhs) */
  hlo_cmp_dir dir;
  hlo_cmp_type ctype;
  hj_status st;
} evr_sorter;

/* Recognises a comparator that is one compare of lhs_k and rhs_k of operand k. */
static void evr_sort_fast(evr_sorter *s) {
  const hlo_comp *c = s->cmp;
  const hlo_instr *r = c->root;
  s->fast_k = -1;
  if (!r || r->op != HLO_OP_COMPARE || r->noperands != 2 || arrlen(c->params) != 2 * s->n) return;
  for (int k = 0; k < s->n; k++) {
    const hlo_instr *l = c->params[2 * k], *h = c->params[2 * k + 1];
    bool fwd = r->operands[0] == l && r->operands[1] == h;
    bool rev = r->operands[0] == h && r->operands[1] == l;
    hlo_type t = s->ops[k]->shape.type;
    if (!fwd && !rev) continue;
    if (l->shape.type != t || h->shape.type != t || l->shape.rank || h->shape.rank) return;
    bool fl = hlo_type_is_float(t);
    hlo_cmp_type ct = r->cmp_type;
    if ((fl && ct != HLO_CMPT_DEFAULT && ct != HLO_CMPT_FLOAT && ct != HLO_CMPT_TOTALORDER) ||
        (!fl && ct == HLO_CMPT_FLOAT))
      return;
    s->fast_k = k, s->fast_swap = rev, s->dir = r->cmp_dir, s->ctype = ct;
    return;
  }
}

/* A float's bits as a signed integer whose order is XLA's total order
   (-NaN < -inf < ... < -0 < +0 < ... < inf < NaN). */
static int64_t evr_total_key(hlo_type t, const uint8_t *p) {
  int64_t v;
  switch (hlo_type_size(t)) {
  case 2: { int16_t x; memcpy(&x, p, 2); v = x; return v < 0 ? v ^ INT16_MAX : v; }
  case 4: { int32_t x; memcpy(&x, p, 4); v = x; return v < 0 ? v ^ INT32_MAX : v; }
  default: memcpy(&v, p, 8); return v < 0 ? v ^ INT64_MAX : v;
  }
}

static bool evr_dir(hlo_cmp_dir d, int c3, bool unordered) {
  if (unordered) return d == HLO_CMP_NE;
  switch (d) {
  case HLO_CMP_EQ: return c3 == 0;
  case HLO_CMP_NE: return c3 != 0;
  case HLO_CMP_LT: return c3 < 0;
  case HLO_CMP_LE: return c3 <= 0;
  case HLO_CMP_GT: return c3 > 0;
  default: return c3 >= 0;
  }
}

/* comparator(element a, element b) of the current row. */
static bool evr_less(evr_sorter *s, int64_t a, int64_t b) {
  if (s->st) return false;
  int64_t ia = s->base + a * s->stride, ib = s->base + b * s->stride;
  if (s->fast_k >= 0) {
    const hlo_literal *l = s->ops[s->fast_k];
    hlo_type t = l->shape.type;
    int64_t x = s->fast_swap ? ib : ia, y = s->fast_swap ? ia : ib;
    int c3;
    if (hlo_type_is_float(t) && s->ctype != HLO_CMPT_TOTALORDER) {
      double u = hlo_load_f64(t, l->data, x), v = hlo_load_f64(t, l->data, y);
      return evr_dir(s->dir, (u > v) - (u < v), u != u || v != v);
    } else if (hlo_type_is_float(t)) {
      int es = hlo_type_size(t);
      int64_t u = evr_total_key(t, l->data + x * es), v = evr_total_key(t, l->data + y * es);
      c3 = (u > v) - (u < v);
    } else if (hlo_type_class_of(t) == HLO_CLASS_SINT) {
      int64_t u = hlo_load_s64(t, l->data, x), v = hlo_load_s64(t, l->data, y);
      c3 = (u > v) - (u < v);
    } else {
      uint64_t u = hlo_load_u64(t, l->data, x), v = hlo_load_u64(t, l->data, y);
      c3 = (u > v) - (u < v);
    }
    return evr_dir(s->dir, c3, false);
  }
  hlo_literal views[2 * HLO_EVO_MAX_N], *args[2 * HLO_EVO_MAX_N], *res = NULL;
  for (int k = 0; k < s->n; k++) {
    hlo_type t = s->ops[k]->shape.type;
    int es = hlo_type_size(t);
    hlo_shape sc = hlo_shape_scalar(t);
    views[2 * k] = hlo_literal_view(&sc, s->ops[k]->data + ia * es);
    views[2 * k + 1] = hlo_literal_view(&sc, s->ops[k]->data + ib * es);
    args[2 * k] = &views[2 * k];
    args[2 * k + 1] = &views[2 * k + 1];
  }
  s->st = hlo_eval_scalar_call(s->ctx, s->cmp, args, 2 * s->n, &res);
  if (s->st) return false;
  bool lt = false;
  if (res->shape.type != HLO_PRED || res->shape.rank != 0 || !res->data)
    s->st = hj__err(s->ctx, HJ_ERR_SHAPE, "sort comparator '%s' must return pred[]", s->cmp->name);
  else lt = res->data[0] != 0;
  hlo_literal_free(res);
  return lt;
}

/* Stable bottom-up merge sort of perm[0..len) by evr_less; |tmp| has len slots. */
static void evr_merge_sort(evr_sorter *s, int64_t *perm, int64_t *tmp, int64_t len) {
  int64_t *a = perm, *b = tmp;
  for (int64_t w = 1; w < len; w *= 2) {
    for (int64_t lo = 0; lo < len; lo += 2 * w) {
      int64_t mid = lo + w < len ? lo + w : len, hi = lo + 2 * w < len ? lo + 2 * w : len;
      int64_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) b[k++] = evr_less(s, a[j], a[i]) ? a[j++] : a[i++];
      while (i < mid) b[k++] = a[i++];
      while (j < hi) b[k++] = a[j++];
    }
    int64_t *x = a; a = b; b = x;
  }
  if (a != perm) memcpy(perm, a, sizeof *perm * (size_t)len);
}

hj_status hlo_eval_sort(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops,
                        hlo_literal *r) {
  int n = ins->noperands;
  hlo_literal *outs[HLO_EVO_MAX_N];
  hj_status st = evr_outs(ctx, ins, r, n, outs);
  if (st) return st;
  const hlo_shape *s0 = &ops[0]->shape;
  int64_t dim = ins->dims.n == 1 ? ins->dims.v[0] : -1;
  if (ins->ncalls < 1 || !ins->calls[0]) return hlo_evo_err(ctx, ins, "no comparator");
  if (dim < 0 || dim >= s0->rank) return hlo_evo_err(ctx, ins, "bad sort dimension");
  for (int k = 0; k < n; k++)
    if (!hlo_shape_compatible(&ops[k]->shape, &outs[k]->shape) ||
        ops[k]->shape.rank != s0->rank || memcmp(ops[k]->shape.dims, s0->dims, sizeof(int64_t) * (size_t)s0->rank))
      return hlo_evo_err(ctx, ins, "operand %d does not match operand 0 and its result", k);
  int64_t len = s0->dims[dim], st0[HLO_MAX_RANK], rows[HLO_MAX_RANK], idx[HLO_MAX_RANK] = { 0 };
  if (hlo_shape_numel(s0) == 0) return HJ_OK;
  hlo_shape_strides(s0, st0);
  memcpy(rows, s0->dims, sizeof rows);
  rows[dim] = 1;
  evr_sorter s = { .ctx = ctx, .cmp = ins->calls[0], .n = n, .ops = ops, .stride = st0[dim] };
  evr_sort_fast(&s);
  int64_t *perm = hlo_ev_alloc(ctx, 2 * (size_t)len, sizeof(int64_t), false);
  if (!perm) return hj__err(ctx, HJ_ERR_OOM, "op 'sort': out of memory");
  do {
    s.base = 0;
    for (int d = 0; d < s0->rank; d++) s.base += idx[d] * st0[d];
    for (int64_t p = 0; p < len; p++) perm[p] = p;
    evr_merge_sort(&s, perm, perm + len, len);
    if (s.st) break;
    for (int k = 0; k < n; k++) {
      int es = hlo_type_size(ops[k]->shape.type);
      for (int64_t p = 0; p < len; p++)
        memcpy(outs[k]->data + (s.base + p * s.stride) * es,
               ops[k]->data + (s.base + perm[p] * s.stride) * es, (size_t)es);
    }
  } while (hlo_evo_next(s0->rank, rows, idx));
  hj__free(ctx, perm);
  return s.st;
}

/* ---- dot ----------------------------------------------------------------------------------- */

/* How operands are packed: float (exact for f16/bf16/f32), double, uint64 (integer result),
   uint8 (pred result). */
typedef enum { EVR_PF, EVR_PD, EVR_PU, EVR_PB } evr_pack_kind;

/* Copies |l| into |dst| in the dim order |order| (batch, free, contracting), so that the
   packed array is row-major [B][M or N][K]. */
static void evr_pack(const hlo_literal *l, const int *order, void *dst, evr_pack_kind kind) {
  const hlo_shape *s = &l->shape;
  int64_t st[HLO_MAX_RANK], pd[HLO_MAX_RANK], ps[HLO_MAX_RANK], idx[HLO_MAX_RANK] = { 0 };
  int64_t total = hlo_shape_numel(s);
  hlo_shape_strides(s, st);
  for (int i = 0; i < s->rank; i++) pd[i] = s->dims[order[i]], ps[i] = st[order[i]];
  for (int64_t j = 0; j < total; j++, hlo_evo_next(s->rank, pd, idx)) {
    int64_t off = 0;
    for (int i = 0; i < s->rank; i++) off += idx[i] * ps[i];
    switch (kind) {
    case EVR_PF: ((float *)dst)[j] = (float)hlo_load_f64(s->type, l->data, off); break;
    case EVR_PD: ((double *)dst)[j] = hlo_load_f64(s->type, l->data, off); break;
    case EVR_PU: ((uint64_t *)dst)[j] = hlo_load_u64(s->type, l->data, off); break;
    case EVR_PB: ((uint8_t *)dst)[j] = hlo_load_u64(s->type, l->data, off) != 0; break;
    }
  }
}

/* Σ a[k]·b[k] in double with 4 partial sums (k mod 4), added pairwise. */
#define EVR_DOT_BODY                                                                         \
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;                                                    \
  int64_t k = 0;                                                                            \
  for (; k + 4 <= n; k += 4) {                                                              \
    s0 += (double)a[k] * b[k];                                                              \
    s1 += (double)a[k + 1] * b[k + 1];                                                      \
    s2 += (double)a[k + 2] * b[k + 2];                                                      \
    s3 += (double)a[k + 3] * b[k + 3];                                                      \
  }                                                                                         \
  for (; k < n; k++) s0 += (double)a[k] * b[k];                                             \
  return (s0 + s1) + (s2 + s3);
static double evr_dot_f(const float *a, const float *b, int64_t n) { EVR_DOT_BODY }
static double evr_dot_d(const double *a, const double *b, int64_t n) { EVR_DOT_BODY }
#undef EVR_DOT_BODY

static uint64_t evr_dot_u(const uint64_t *a, const uint64_t *b, int64_t n) {
  uint64_t s = 0;
  for (int64_t k = 0; k < n; k++) s += a[k] * b[k];
  return s;
}

static bool evr_dot_b(const uint8_t *a, const uint8_t *b, int64_t n) {
  for (int64_t k = 0; k < n; k++)
    if (a[k] && b[k]) return true;
  return false;
}

/* Validates the dimension numbers; fills each operand's pack order and B, M, N, K. */
static hj_status evr_dot_dims(hj_ctx_t *ctx, const hlo_instr *ins, const hlo_shape *ls,
                              const hlo_shape *rs, const hlo_shape *os, int *lord, int *rord,
                              int64_t *bmnk) {
  const hlo_dot_dims *dd = &ins->dot;
  if (dd->lhs_batch.n != dd->rhs_batch.n || dd->lhs_contract.n != dd->rhs_contract.n)
    return hlo_evo_err(ctx, ins, "batch/contracting dim lists differ in length");
  const hlo_shape *sh[2] = { ls, rs };
  const hlo_ints *bat[2] = { &dd->lhs_batch, &dd->rhs_batch }, *con[2] = { &dd->lhs_contract, &dd->rhs_contract };
  int *ord[2] = { lord, rord }, nfree[2];
  for (int side = 0; side < 2; side++) {
    bool used[HLO_MAX_RANK] = { false };
    int j = 0;
    const hlo_ints *lists[2] = { bat[side], con[side] };
    for (int li = 0; li < 2; li++)
      for (int i = 0; i < lists[li]->n; i++) {
        int64_t d = lists[li]->v[i];
        if (d < 0 || d >= sh[side]->rank || used[d])
          return hlo_evo_err(ctx, ins, "%s dim %lld out of range or repeated", side ? "rhs" : "lhs",
                             (long long)d);
        used[d] = true;
      }
    for (int i = 0; i < bat[side]->n; i++) ord[side][j++] = (int)bat[side]->v[i];
    for (int d = 0; d < sh[side]->rank; d++)
      if (!used[d]) ord[side][j++] = d;
    nfree[side] = j - bat[side]->n;
    for (int i = 0; i < con[side]->n; i++) ord[side][j++] = (int)con[side]->v[i];
  }
  int nb = dd->lhs_batch.n, nc = dd->lhs_contract.n;
  bmnk[0] = bmnk[1] = bmnk[2] = bmnk[3] = 1;
  for (int i = 0; i < nb; i++) {
    if (ls->dims[lord[i]] != rs->dims[rord[i]]) return hlo_evo_err(ctx, ins, "batch dim %d sizes differ", i);
    bmnk[0] *= ls->dims[lord[i]];
  }
  for (int i = 0; i < nc; i++) {
    int64_t a = ls->dims[lord[nb + nfree[0] + i]], b = rs->dims[rord[nb + nfree[1] + i]];
    if (a != b)
      return hlo_evo_err(ctx, ins, "contracting dims %lld vs %lld", (long long)a, (long long)b);
    bmnk[3] *= a;
  }
  if (os->rank != nb + nfree[0] + nfree[1]) return hlo_evo_err(ctx, ins, "result rank is wrong");
  for (int i = 0; i < os->rank; i++) {
    int64_t want = i < nb + nfree[0] ? ls->dims[lord[i]] : rs->dims[rord[i - nfree[0]]];
    if (os->dims[i] != want) return hlo_evo_err(ctx, ins, "result dim %d should be %lld", i, (long long)want);
    if (i >= nb) bmnk[i < nb + nfree[0] ? 1 : 2] *= want;
  }
  return HJ_OK;
}

hj_status hlo_eval_dot(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops,
                       hlo_literal *r) {
  const hlo_shape *ls = &ops[0]->shape, *rs = &ops[1]->shape, *os = &r->shape;
  int lord[HLO_MAX_RANK], rord[HLO_MAX_RANK];
  int64_t d[4];
  hj_status st = evr_dot_dims(ctx, ins, ls, rs, os, lord, rord, d);
  if (st) return st;
  int64_t B = d[0], M = d[1], N = d[2], K = d[3];
  hlo_type t = os->type;
  evr_pack_kind kind = t == HLO_PRED ? EVR_PB : !hlo_type_is_float(t) ? EVR_PU
                     : hlo_type_is_float(ls->type) && hlo_type_is_float(rs->type) &&
                       hlo_type_size(ls->type) <= 4 && hlo_type_size(rs->type) <= 4 ? EVR_PF : EVR_PD;
  size_t es = kind == EVR_PF ? 4 : kind == EVR_PB ? 1 : 8;
  if (B * M * N == 0) return HJ_OK;
  uint8_t *a = hlo_ev_alloc(ctx, (size_t)(B * M * K) + 1, es, false);
  uint8_t *b = hlo_ev_alloc(ctx, (size_t)(B * N * K) + 1, es, false);
  if (!a || !b) {
    hj__free(ctx, a), hj__free(ctx, b);
    return hj__err(ctx, HJ_ERR_OOM, "op 'dot': out of memory packing operands");
  }
  evr_pack(ops[0], lord, a, kind);
  evr_pack(ops[1], rord, b, kind);
  const int64_t NB = 256;  /* a block of rhs rows stays in cache across the lhs rows */
  for (int64_t bi = 0; bi < B; bi++)
    for (int64_t n0 = 0; n0 < N; n0 += NB)
      for (int64_t m = 0; m < M; m++)
        for (int64_t n = n0; n < N && n < n0 + NB; n++) {
          const uint8_t *pa = a + es * (size_t)((bi * M + m) * K), *pb = b + es * (size_t)((bi * N + n) * K);
          int64_t o = (bi * M + m) * N + n;
          switch (kind) {
          case EVR_PF: hlo_store_f64(t, r->data, o, evr_dot_f((const float *)pa, (const float *)pb, K)); break;
          case EVR_PD: hlo_store_f64(t, r->data, o, evr_dot_d((const double *)pa, (const double *)pb, K)); break;
          case EVR_PU: hlo_store_u64(t, r->data, o, evr_dot_u((const uint64_t *)pa, (const uint64_t *)pb, K)); break;
          case EVR_PB: r->data[o] = evr_dot_b(pa, pb, K); break;
          }
        }
  hj__free(ctx, a);
  hj__free(ctx, b);
  return HJ_OK;
}
