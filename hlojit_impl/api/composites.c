/* composites.c — ops built from the primitive ops of builder.c: NumPy matmul, softmax and
   log_softmax, layer_norm, the two GELUs, mean and (population) var, the causal mask,
   embedding lookup, argmax, concat, split (a tuple) and hj_unpack, and hj_linear.

   Each composite checks what its message must name first (ranks, axes, contracting dims),
   so that a mistake reads "hj_matmul: ..." rather than naming an inner op; after that the
   inner ops cannot fail on its account. Axes may be negative (counted from the end).
   Scalars (eps, 0.5, ...) are constants of the input's dtype; binary ops broadcast them.

   matmul, by cases (a (..., M, K), b (..., K, N)):
   - b of rank 2: one dot contracting a's last dim with b's first, no batch dims; the
     result (..., M, N) comes out in order because dot puts lhs free dims before rhs's;
   - otherwise the batch dims (all but the last two) broadcast NumPy-style, both operands
     are broadcast to them, and dot_general takes them as batch dims;
   - a rank-1 a is (1, K) and a rank-1 b is (K, 1), the added dim removed afterwards. */
#include "api.h"
#include "../backend.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static hj_tensor_t cmp_poison(hj_graph_t *g) { return (hj_tensor_t){ g, -1 }; }

/* Resolves one operand that must be an array; *g gets its graph. */
static hlo_instr *cmp_array(const char *op, hj_tensor_t x, hj_graph_t **g) {
  hlo_instr *a;
  if (!hj__operands(op, &x, 1, g, &a)) return NULL;
  if (hlo_shape_is_array(&a->shape)) return a;
  hj__graph_fail(*g, HJ_ERR_SHAPE, "%s: the operand is a tuple", op);
  return NULL;
}

static bool cmp_float(const char *op, hj_graph_t *g, hlo_instr *a) {
  if (hlo_type_is_float(a->shape.type)) return true;
  char b[128];
  hj__graph_fail(g, HJ_ERR_SHAPE, "%s: needs a floating-point tensor (got %s)", op,
                 hlo_shape_str(&a->shape, b, sizeof b));
  return false;
}

/* |axis| (maybe negative) as a dim of |a|, or -1 with an error. */
static int cmp_axis(const char *op, hj_graph_t *g, hlo_instr *a, int axis) {
  int r = a->shape.rank, ax = axis < 0 ? axis + r : axis;
  if (ax >= 0 && ax < r) return ax;
  char b[128];
  hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: axis %d out of range for %s", op, axis,
                 hlo_shape_str(&a->shape, b, sizeof b));
  return -1;
}

static hj_tensor_t cmp_const(hj_graph_t *g, hlo_instr *like, double v) {
  return hj_scalar(g, (hj_dtype_t)like->shape.type, v);
}

/* |r| (|x| with dims |red| reduced away) broadcast back to |x|'s shape. */
static hj_tensor_t cmp_back(hj_tensor_t r, hlo_instr *x, const bool *red) {
  int64_t keep[HJ_MAX_RANK];
  int n = 0;
  for (int i = 0; i < x->shape.rank; i++)
    if (!red[i]) keep[n++] = i;
  return hj_broadcast_in_dim(r, hj__shape_from_hlo(&x->shape), keep, n);
}

/* ---- matmul ------------------------------------------------------------------------------ */

static hj_tensor_t cmp_dot(hj_tensor_t a, hj_tensor_t b, int nb, int64_t ca, int64_t cb) {
  int64_t batch[HJ_MAX_RANK];
  for (int i = 0; i < nb; i++) batch[i] = i;
  hj_dot_dims_t d = { batch, nb, batch, nb, &ca, 1, &cb, 1 };
  return hj_dot_general(a, b, &d);
}

/* Batched case: broadcasts the batch dims of |a| (.., M, K) and |b| (.., K, N). */
static hj_tensor_t cmp_batched(hj_graph_t *g, hj_tensor_t a, hj_tensor_t b) {
  hj_shape_t sa = hj_tensor_shape(a), sb = hj_tensor_shape(b), ba = sa, bb = sb, bs = { 0 };
  ba.rank -= 2, bb.rank -= 2;
  bs.rank = ba.rank > bb.rank ? ba.rank : bb.rank;
  for (int k = 0; k < bs.rank; k++) {
    int ia = k - (bs.rank - ba.rank), ib = k - (bs.rank - bb.rank);
    int64_t da = ia >= 0 ? ba.dims[ia] : 1, db = ib >= 0 ? bb.dims[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      char s0[128], s1[128];
      return hj__graph_fail(g, HJ_ERR_SHAPE, "hj_matmul: batch dims of a %s and b %s do not broadcast",
                            hj__tensor_str(a, s0, sizeof s0), hj__tensor_str(b, s1, sizeof s1));
    }
    bs.dims[k] = da == 1 ? db : da;
  }
  hj_shape_t ta = bs, tb = bs;
  ta.rank = tb.rank = bs.rank + 2;
  ta.dims[bs.rank] = sa.dims[sa.rank - 2], ta.dims[bs.rank + 1] = sa.dims[sa.rank - 1];
  tb.dims[bs.rank] = sb.dims[sb.rank - 2], tb.dims[bs.rank + 1] = sb.dims[sb.rank - 1];
  return cmp_dot(hj_broadcast_to(a, ta), hj_broadcast_to(b, tb), bs.rank, bs.rank + 1, bs.rank);
}

/* |t| without its dim |d| (a size-1 dim). */
static hj_tensor_t cmp_squeeze(hj_tensor_t t, int d) {
  hj_shape_t s = hj_tensor_shape(t);
  for (int i = d; i + 1 < s.rank; i++) s.dims[i] = s.dims[i + 1];
  s.rank--;
  return hj_reshape(t, s);
}

hj_tensor_t hj_matmul(hj_tensor_t a, hj_tensor_t b) {
  const char *op = "hj_matmul";
  hj_tensor_t ts[2] = { a, b };
  hlo_instr *x[2];
  hj_graph_t *g;
  if (!hj__operands(op, ts, 2, &g, x)) return cmp_poison(g);
  const hlo_shape *sa = &x[0]->shape, *sb = &x[1]->shape;
  char s0[128], s1[128];
  hlo_shape_str(sa, s0, sizeof s0);
  hlo_shape_str(sb, s1, sizeof s1);
  if (!hlo_shape_is_array(sa) || !hlo_shape_is_array(sb) || sa->rank < 1 || sb->rank < 1)
    return hj__graph_fail(g, HJ_ERR_SHAPE, "hj_matmul: operands must be arrays of rank >= 1 (a %s, b %s)", s0, s1);
  if (!hj__dot_types(g, op, x[0], x[1])) return cmp_poison(g);
  int64_t ka = sa->dims[sa->rank - 1], kb = sb->dims[sb->rank == 1 ? 0 : sb->rank - 2];
  if (ka != kb)
    return hj__graph_fail(g, HJ_ERR_SHAPE, "hj_matmul: contracting dims %lld vs %lld (a %s, b %s)",
                          (long long)ka, (long long)kb, s0, s1);
  bool va = sa->rank == 1, vb = sb->rank == 1;
  if (va) a = hj_reshape(a, HJ_SHAPE(1, ka));
  if (vb) b = hj_reshape(b, HJ_SHAPE(kb, 1));
  int ra = va ? 2 : sa->rank, rb = vb ? 2 : sb->rank;
  hj_tensor_t r = rb == 2 ? cmp_dot(a, b, 0, ra - 1, 0) : cmp_batched(g, a, b);
  if (va) r = cmp_squeeze(r, hj_tensor_shape(r).rank - 2);
  if (vb) r = cmp_squeeze(r, hj_tensor_shape(r).rank - 1);
  return r;
}

/* ---- normalisation and activations ------------------------------------------------------- */

/* softmax (|log| false) or log_softmax along |axis|, with the row max subtracted first. */
static hj_tensor_t cmp_softmax(const char *op, hj_tensor_t x, int axis, bool log) {
  hj_graph_t *g;
  hlo_instr *a = cmp_array(op, x, &g);
  if (!a || !cmp_float(op, g, a)) return cmp_poison(g);
  int ax = cmp_axis(op, g, a, axis);
  if (ax < 0) return cmp_poison(g);
  bool red[HJ_MAX_RANK] = { 0 };
  red[ax] = true;
  int64_t d = ax;
  hj_tensor_t m = cmp_back(hj_reduce(x, HJ_RED_MAX, &d, 1), a, red);
  hj_tensor_t z = hj_sub(x, m), e = hj_exp(z);
  hj_tensor_t s = cmp_back(hj_reduce(e, HJ_RED_SUM, &d, 1), a, red);
  return log ? hj_sub(z, hj_log(s)) : hj_div(e, s);
}

hj_tensor_t hj_softmax(hj_tensor_t x, int axis) { return cmp_softmax("hj_softmax", x, axis, false); }
hj_tensor_t hj_log_softmax(hj_tensor_t x, int axis) {
  return cmp_softmax("hj_log_softmax", x, axis, true);
}

/* Normalised |dims| (NULL: all) into |red|; false (error) on a bad or repeated dim. */
static bool cmp_dims(const char *op, hj_graph_t *g, hlo_instr *a, const int64_t *dims, int n, bool *red) {
  int r = a->shape.rank;
  memset(red, 0, sizeof(bool) * HJ_MAX_RANK);
  if (!dims) {
    for (int i = 0; i < r; i++) red[i] = true;
    return true;
  }
  char b[128];
  if (n < 0 || n > r) {   /* a count of dims that |dims| cannot hold (issue 14) */
    hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: %d dims for %s", op, n, hlo_shape_str(&a->shape, b, sizeof b));
    return false;
  }
  for (int i = 0; i < n; i++) {
    int64_t d = dims[i] < 0 ? dims[i] + r : dims[i];
    if (d < 0 || d >= r || red[d]) {
      hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: dim %lld out of range or repeated for %s", op,
                     (long long)dims[i], hlo_shape_str(&a->shape, b, sizeof b));
      return false;
    }
    red[d] = true;
  }
  return true;
}

/* The mean over the dims in |red|, kept as size-1 dims when |keep|. A bounded dynamic dim
   counts with its real size (hj_dim_size), so that padding does not change the divisor. */
static hj_tensor_t cmp_mean(hj_graph_t *g, hj_tensor_t x, hlo_instr *a, const bool *red, bool keep) {
  int64_t d[HJ_MAX_RANK], count = 1;
  int n = 0;
  hj_shape_t ks = hj__shape_from_hlo(&a->shape);
  for (int i = 0; i < a->shape.rank; i++) {
    if (ks.dims[i] < 0) ks.dims[i] = -ks.dims[i];   /* reshape targets are static */
    if (red[i]) {
      d[n++] = i;
      if (!a->shape.dynamic[i]) count *= a->shape.dims[i];
      ks.dims[i] = 1;
    }
  }
  hj_tensor_t cnt = cmp_const(g, a, (double)count);
  for (int i = 0; i < a->shape.rank; i++)
    if (red[i] && a->shape.dynamic[i])
      cnt = hj_mul(cnt, hj_convert(hj_dim_size(x, i), (hj_dtype_t)a->shape.type));
  hj_tensor_t m = hj_div(hj_reduce(x, HJ_RED_SUM, d, n), cnt);
  return keep ? hj_reshape(m, ks) : m;
}

hj_tensor_t hj_mean(hj_tensor_t x, const int64_t *dims, int n, bool keepdims) {
  hj_graph_t *g;
  bool red[HJ_MAX_RANK];
  hlo_instr *a = cmp_array("hj_mean", x, &g);
  if (!a || !cmp_dims("hj_mean", g, a, dims, n, red)) return cmp_poison(g);
  return cmp_mean(g, x, a, red, keepdims);
}

hj_tensor_t hj_var(hj_tensor_t x, const int64_t *dims, int n, bool keepdims) {
  hj_graph_t *g;
  bool red[HJ_MAX_RANK];
  hlo_instr *a = cmp_array("hj_var", x, &g);
  if (!a || !cmp_dims("hj_var", g, a, dims, n, red)) return cmp_poison(g);
  hj_tensor_t dev = hj_sub(x, cmp_mean(g, x, a, red, true));
  return cmp_mean(g, hj_mul(dev, dev), a, red, keepdims);
}

/* |p| must be absent (HJ_NONE) or a vector (C) of |a|'s dtype. */
static bool cmp_affine_ok(hj_graph_t *g, const char *what, hlo_instr *a, hj_tensor_t p) {
  if (!p.graph) return true;
  hlo_instr *pi;
  hj_graph_t *pg;
  if (!hj__operands("hj_layer_norm", &p, 1, &pg, &pi)) return false;
  if (pg != g)
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "hj_layer_norm: %s belongs to another graph", what), false;
  const hlo_shape *s = &pi->shape;
  if (s->type == a->shape.type && s->rank == 1 && s->dims[0] == a->shape.dims[a->shape.rank - 1])
    return true;
  char b0[128], b1[128];
  hj__graph_fail(g, HJ_ERR_SHAPE, "hj_layer_norm: %s %s does not match the last dim of x %s", what,
                 hlo_shape_str(s, b0, sizeof b0), hlo_shape_str(&a->shape, b1, sizeof b1));
  return false;
}

hj_tensor_t hj_layer_norm(hj_tensor_t x, hj_tensor_t gamma, hj_tensor_t beta, double eps) {
  const char *op = "hj_layer_norm";
  hj_graph_t *g;
  hlo_instr *a = cmp_array(op, x, &g);
  if (!a && !g && (gamma.graph || beta.graph))   /* x HJ_NONE: gamma or beta names the graph */
    return hj__graph_fail(gamma.graph ? gamma.graph : beta.graph, HJ_ERR_INVALID_ARG,
                          "%s: x is HJ_NONE or has no graph", op);
  if (!a || !cmp_float(op, g, a)) return cmp_poison(g);
  if (a->shape.rank < 1)
    return hj__graph_fail(g, HJ_ERR_SHAPE, "%s: x must have rank >= 1 (got a scalar)", op);
  if (!cmp_affine_ok(g, "gamma", a, gamma) || !cmp_affine_ok(g, "beta", a, beta)) return cmp_poison(g);
  bool red[HJ_MAX_RANK] = { 0 };
  red[a->shape.rank - 1] = true;
  hj_tensor_t dev = hj_sub(x, cmp_mean(g, x, a, red, true));          // (..., C)
  hj_tensor_t var = cmp_mean(g, hj_mul(dev, dev), a, red, true);      // (..., 1)
  hj_tensor_t y = hj_mul(dev, hj_rsqrt(hj_add(var, cmp_const(g, a, eps))));
  if (gamma.graph) y = hj_mul(y, gamma);
  if (beta.graph) y = hj_add(y, beta);
  return y;
}

/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
hj_tensor_t hj_gelu_tanh(hj_tensor_t x) {
  hj_graph_t *g;
  hlo_instr *a = cmp_array("hj_gelu_tanh", x, &g);
  if (!a || !cmp_float("hj_gelu_tanh", g, a)) return cmp_poison(g);
  hj_tensor_t x3 = hj_mul(hj_mul(x, x), x);
  hj_tensor_t in = hj_mul(cmp_const(g, a, sqrt(2.0 / M_PI)), hj_add(x, hj_mul(cmp_const(g, a, 0.044715), x3)));
  hj_tensor_t t = hj_add(cmp_const(g, a, 1.0), hj_tanh(in));
  return hj_mul(hj_mul(cmp_const(g, a, 0.5), x), t);
}

/* 0.5 x (1 + erf(x / sqrt(2))) */
hj_tensor_t hj_gelu_erf(hj_tensor_t x) {
  hj_graph_t *g;
  hlo_instr *a = cmp_array("hj_gelu_erf", x, &g);
  if (!a || !cmp_float("hj_gelu_erf", g, a)) return cmp_poison(g);
  hj_tensor_t e = hj_erf(hj_mul(x, cmp_const(g, a, M_SQRT1_2)));
  return hj_mul(hj_mul(cmp_const(g, a, 0.5), x), hj_add(cmp_const(g, a, 1.0), e));
}

/* ---- masks, lookups, argmax ---------------------------------------------------------------- */

hj_tensor_t hj_causal_mask(hj_graph_t *g, int64_t T) {
  if (!g) return HJ_NONE;
  if (T < 0 || T > INT32_MAX)
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "hj_causal_mask: T %lld out of range", (long long)T);
  hj_tensor_t q = hj_iota(g, HJ_S32, HJ_SHAPE(T, T), 0);   // (T, T) query index
  hj_tensor_t k = hj_iota(g, HJ_S32, HJ_SHAPE(T, T), 1);   // (T, T) key index
  return hj_compare(k, q, HJ_CMP_LE);
}

hj_tensor_t hj_embedding(hj_tensor_t table, hj_tensor_t ids) {
  const char *op = "hj_embedding";
  hj_tensor_t ts[2] = { table, ids };
  hlo_instr *x[2];
  hj_graph_t *g;
  if (!hj__operands(op, ts, 2, &g, x)) return cmp_poison(g);
  char s0[128], s1[128];
  hlo_shape_str(&x[0]->shape, s0, sizeof s0);
  hlo_shape_str(&x[1]->shape, s1, sizeof s1);
  if (!hlo_shape_is_array(&x[0]->shape) || x[0]->shape.rank != 2)
    return hj__graph_fail(g, HJ_ERR_SHAPE, "%s: table must be (V, C) (got %s)", op, s0);
  if (!hlo_shape_is_array(&x[1]->shape) || !hlo_type_is_int(x[1]->shape.type) ||
      x[1]->shape.rank >= HJ_MAX_RANK)
    return hj__graph_fail(g, HJ_ERR_SHAPE, "%s: ids must be an integer array of rank < %d (got %s)", op,
                          HJ_MAX_RANK, s1);
  int64_t r = x[1]->shape.rank, zero = 0, sizes[2] = { 1, x[0]->shape.dims[1] };
  hj_gather_dims_t d = { .offset_dims = &r, .n_offset_dims = 1,
                         .collapsed_slice_dims = &zero, .n_collapsed_slice_dims = 1,
                         .start_index_map = &zero, .n_start_index_map = 1,
                         .index_vector_dim = r, .slice_sizes = sizes, .n_slice_sizes = 2 };
  return hj_gather(table, ids, &d);   // (..., C)
}

/* The reducer of argmax on |t|: (acc value, acc index, value, index) -> the better pair.
   Larger wins, NaN beats numbers, equal values (or two NaNs) keep the smaller index; so
   the reduction is associative and commutative and the first maximum wins in any order. */
static hj_graph_t *cmp_argmax_fn(hj_graph_t *g, hj_dtype_t t) {
  hj_graph_t *top = g->top, *f;
  if (top->argmax_fns[t]) return top->argmax_fns[t];
  char name[64];
  snprintf(name, sizeof name, "argmax_%s", hj_dtype_name(t));
  if (hj_graph_create_sub(top, name, &f) != HJ_OK) return NULL;
  hj_tensor_t av = hj_param(f, t, HJ_SCALAR, "acc_v"), ai = hj_param(f, HJ_S32, HJ_SCALAR, "acc_i");
  hj_tensor_t bv = hj_param(f, t, HJ_SCALAR, "v"), bi = hj_param(f, HJ_S32, HJ_SCALAR, "i");
  hj_tensor_t an = hj_compare(av, av, HJ_CMP_NE), bn = hj_compare(bv, bv, HJ_CMP_NE);
  hj_tensor_t pick = hj_or(hj_compare(av, bv, HJ_CMP_GT), hj_and(an, hj_not(bn)));
  hj_tensor_t tie = hj_or(hj_compare(av, bv, HJ_CMP_EQ), hj_and(an, bn));
  hj_tensor_t pick_i = hj_or(pick, hj_and(tie, hj_compare(ai, bi, HJ_CMP_LT)));
  hj_graph_output(f, hj_select(pick, av, bv));
  hj_graph_output(f, hj_select(pick_i, ai, bi));
  return top->argmax_fns[t] = f;
}

hj_tensor_t hj_argmax(hj_tensor_t x, int axis) {
  const char *op = "hj_argmax";
  hj_graph_t *g;
  hlo_instr *a = cmp_array(op, x, &g);
  if (!a) return cmp_poison(g);
  int ax = cmp_axis(op, g, a, axis);
  if (ax < 0) return cmp_poison(g);
  hj_dtype_t t = (hj_dtype_t)a->shape.type;
  hj_graph_t *f = cmp_argmax_fn(g, t);
  if (!f) return hj__graph_fail(g, HJ_ERR_OOM, "%s: cannot build the reducer", op);
  hj_tensor_t xs[2] = { x, hj_iota(g, HJ_S32, hj__shape_from_hlo(&a->shape), ax) };
  hj_tensor_t init[2] = { hj_scalar(g, t, -INFINITY), hj_scalar(g, HJ_S32, 0) };  /* lowest value */
  int64_t d = ax;
  return hj_get_tuple_element(hj_reduce_with(f, xs, init, 2, &d, 1), 1);
}

/* ---- concat, split and unpack ------------------------------------------------------------- */

hj_tensor_t hj_concat(const hj_tensor_t *xs, int n, int axis) {
  const char *op = "hj_concat";
  if (!xs || n < 1) return HJ_NONE;
  hlo_instr **x = NULL;
  arrsetlen(x, n);
  hj_graph_t *g;
  hj_tensor_t r = cmp_poison(NULL);
  if (hj__operands(op, xs, n, &g, x)) {
    int ax = hlo_shape_is_array(&x[0]->shape) ? cmp_axis(op, g, x[0], axis) : 0;
    hlo_instr *ins = ax >= 0 ? hj__op_begin(g, op, HLO_OP_CONCATENATE, NULL, x, n) : NULL;
    int64_t d = ax;
    if (ins) ins->dims = hlo_ints_dup(g->m, &d, 1);
    r = hj__op_finish(g, op, ins);
  }
  r.graph = g;
  arrfree(x);
  return r;
}

/* A tuple of |n| slices along |axis| (multi-result ops return one tuple: hlojit.h). */
hj_tensor_t hj_split(hj_tensor_t x, int axis, const int64_t *sizes, int n) {
  const char *op = "hj_split";
  hj_graph_t *g = x.graph;
  if (!g) return HJ_NONE;
  if (!sizes || n < 1 || n > 4096)
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: NULL sizes or n %d", op, n);
  hlo_instr *a = cmp_array(op, x, &g);
  int ax = a ? cmp_axis(op, g, a, axis) : -1;
  if (ax < 0) return cmp_poison(g);
  int64_t sum = 0;
  bool neg = false;
  for (int i = 0; i < n && !neg; i++) neg = sizes[i] < 0 || !hlo_add_ok(sum, sizes[i], &sum);
  if (neg || sum != a->shape.dims[ax]) {
    char b[128];
    return hj__graph_fail(g, HJ_ERR_SHAPE, "%s: sizes sum to %lld, %s has %lld along axis %d", op, (long long)sum,
                          hlo_shape_str(&a->shape, b, sizeof b), (long long)a->shape.dims[ax], ax);
  }
  int64_t start[HJ_MAX_RANK] = { 0 }, limit[HJ_MAX_RANK];
  memcpy(limit, a->shape.dims, sizeof(int64_t) * (size_t)a->shape.rank);
  hj_tensor_t *parts = malloc(sizeof *parts * (size_t)n);
  if (!parts) return hj__graph_fail(g, HJ_ERR_OOM, "%s: out of memory", op);
  for (int i = 0; i < n; i++) {
    limit[ax] = start[ax] + sizes[i];
    parts[i] = hj_slice(x, start, limit, NULL);
    start[ax] = limit[ax];
  }
  hj_tensor_t t = hj_tuple(g, parts, n);
  free(parts);
  return t;
}

hj_status hj_unpack(hj_tensor_t t, hj_tensor_t *out, int n) {
  hj_graph_t *g = t.graph;
  for (int i = 0; out && i < n; i++) out[i] = g ? cmp_poison(g) : HJ_NONE;   /* never left unset */
  if (!g) return HJ_ERR_INVALID_ARG;
  if (!out || n < 0) {
    hj__graph_fail(g, HJ_ERR_INVALID_ARG, "hj_unpack: NULL out or n %d", n);
    return HJ_ERR_INVALID_ARG;
  }
  hlo_instr *ins = hj__tensor_instr("hj_unpack", t);
  if (!ins) return g->status != HJ_OK ? g->status : HJ_ERR_INVALID_ARG;
  if (ins->shape.type != HLO_TUPLE || ins->shape.ntuple != n) {
    char b[256];
    hj__graph_fail(g, HJ_ERR_SHAPE, "hj_unpack: %s is not a tuple of %d", hlo_shape_str(&ins->shape, b, sizeof b), n);
    return HJ_ERR_SHAPE;
  }
  for (int i = 0; i < n; i++)
    if (!hj_tensor_ok(out[i] = hj_get_tuple_element(t, i))) return g->status != HJ_OK ? g->status : HJ_ERR_INTERNAL;
  return HJ_OK;
}

/* ---- cumulative ops (hlojit.h's tracing JIT section) -------------------------------------------
   A reduce-window whose window is the whole axis, padded by n-1 in front (behind when
   |reverse|): output i reduces inputs [0, i] ([i, n) reversed). XLA's cumsum lowering. */
hj_tensor_t hj_cumulative(hj_tensor_t x, hj_reducer_t r, int axis, bool reverse) {
  const char *op = "hj_cumulative";
  hj_graph_t *g;
  hlo_instr *a = cmp_array(op, x, &g);
  if (!a) return cmp_poison(g);
  int ax = cmp_axis(op, g, a, axis);
  if (ax < 0) return cmp_poison(g);
  int64_t win[HJ_MAX_RANK], lo[HJ_MAX_RANK] = { 0 }, hi[HJ_MAX_RANK] = { 0 };
  for (int i = 0; i < a->shape.rank; i++) win[i] = 1;
  int64_t n = a->shape.dims[ax];
  win[ax] = n > 0 ? n : 1;
  (reverse ? hi : lo)[ax] = n > 0 ? n - 1 : 0;
  return hj_reduce_window(x, r, win, NULL, lo, hi);
}

/* ---- linear layers ------------------------------------------------------------------------ */

/* x (..., in) against w (in, out) or (out, in): one dot contracting x's last dim with w's
   "in" dim, no batch dims; dot puts lhs free dims before rhs free dims, so the result is
   (..., out) as it stands. The CPU backend has matmul kernels for both weight layouts, so
   nothing is transposed at run time. Panels, w (P, Q, kc, nr): x reshaped to
   (..., P, kc), contracting (P, kc) with w's dims 0 and 2 (k = p*kc + i, the plain dot's
   order), the result (..., Q, nr) reshaped to (..., out) (passes/dot_canon.c). A dynamic
   dim of x's is written -1 in both reshapes. */
hj_tensor_t hj_linear(hj_tensor_t x, hj_tensor_t w, hj_tensor_t b, hj_linear_layout_t layout) {
  const char *op = "hj_linear";
  hj_tensor_t ts[2] = { x, w };
  hlo_instr *v[2];
  hj_graph_t *g;
  if (!hj__operands(op, ts, 2, &g, v)) return cmp_poison(g);
  const hlo_shape *sx = &v[0]->shape, *sw = &v[1]->shape;
  char s0[128], s1[128], s2[128];
  hlo_shape_str(sx, s0, sizeof s0);
  hlo_shape_str(sw, s1, sizeof s1);
  if ((unsigned)layout >= HJ_LINEAR_LAYOUT_COUNT)
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: invalid layout %d", op, (int)layout);
  bool panels = layout == HJ_LINEAR_PANELS;
  if (!hlo_shape_is_array(sx) || !hlo_shape_is_array(sw) || sx->rank < 1 || sw->rank != (panels ? 4 : 2) ||
      sx->rank >= HJ_MAX_RANK)
    return hj__graph_fail(g, HJ_ERR_SHAPE, "%s: x must have rank >= 1 and w rank %d (x %s, w %s)", op,
                          panels ? 4 : 2, s0, s1);
  if (panels && ((sw->type != HLO_F32 && sw->type != HLO_BF16) || sx->type != HLO_F32))
    return hj__graph_fail(g, HJ_ERR_SHAPE, "%s: panel-order weights must be f32 or bf16 and x f32 (x %s, w %s)",
                          op, s0, s1);
  if (!hj__dot_types(g, op, v[0], v[1])) return cmp_poison(g);   /* f32 x with bf16 w: mixed */
  int64_t kin = layout == HJ_LINEAR_OUT_IN ? 1 : 0;
  int64_t nin = panels ? sw->dims[0] * sw->dims[2] : sw->dims[kin];
  int64_t nout = panels ? sw->dims[1] * sw->dims[3] : sw->dims[1 - kin];
  static const char *lay[] = { "(in, out)", "(out, in)", "(in/kc, out/nr, kc, nr)" };
  if (sx->dims[sx->rank - 1] != nin)
    return hj__graph_fail(g, HJ_ERR_SHAPE, "%s: x has %lld features, w %s %s takes %lld (x %s)", op,
                          (long long)sx->dims[sx->rank - 1], s1, lay[layout], (long long)nin, s0);
  if (b.graph) {
    hlo_instr *bi = NULL;
    hj_tensor_t tb[3] = { x, w, b };
    hlo_instr *vb[3];
    if (!hj__operands(op, tb, 3, &g, vb)) return cmp_poison(g);
    bi = vb[2];
    if (!hlo_shape_is_array(&bi->shape) || bi->shape.rank != 1 || bi->shape.dims[0] != nout ||
        bi->shape.type != sx->type)
      return hj__graph_fail(g, HJ_ERR_SHAPE, "%s: the bias must be %s[%lld] (b %s)", op,
                            hlo_type_name(sx->type), (long long)nout, hlo_shape_str(&bi->shape, s2, sizeof s2));
  }
  hj_tensor_t y;
  if (!panels) {
    int64_t cx = sx->rank - 1;
    hj_dot_dims_t d = { .lhs_contracting = &cx, .n_lhs_contracting = 1, .rhs_contracting = &kin,
                        .n_rhs_contracting = 1 };
    y = hj_dot_general(x, w, &d);                                  /* (..., out) */
  } else {
    int r = sx->rank;
    hj_shape_t xs = { .rank = r + 1 }, ys = { .rank = r };
    bool inferred = false;
    for (int i = 0; i < r - 1; i++) {
      int64_t d = sx->dims[i];
      xs.dims[i] = ys.dims[i] = d >= 0 ? d : inferred ? -d : -1;
      inferred |= d < 0;
    }
    xs.dims[r - 1] = sw->dims[0], xs.dims[r] = sw->dims[2];
    ys.dims[r - 1] = nout;
    int64_t cx[2] = { r - 1, r }, cw[2] = { 0, 2 };
    hj_dot_dims_t d = { .lhs_contracting = cx, .n_lhs_contracting = 2, .rhs_contracting = cw,
                        .n_rhs_contracting = 2 };
    y = hj_reshape(hj_dot_general(hj_reshape(x, xs), w, &d), ys);  /* (..., Q, nr) -> (..., out) */
  }
  return b.graph ? hj_add(y, b) : y;
}

hj_status hj_linear_panels(hj_ctx_t *ctx, hj_backend_t backend, int64_t in, int64_t out,
                           int64_t *kc, int64_t *nr) {
  if (!ctx) return HJ_ERR_INVALID_ARG;
  if (!kc || !nr || in <= 0 || out <= 0 || (unsigned)backend >= HJ_BACKEND_COUNT)
    return hj__err(ctx, HJ_ERR_INVALID_ARG, "hj_linear_panels: need in, out > 0, kc, nr and a backend "
                   "(in %lld, out %lld, backend %d)", (long long)in, (long long)out, (int)backend);
  *kc = *nr = 0;
  const hlo_backend *be = hlo_backend_find(backend == HJ_BACKEND_AUTO ? HJ_BACKEND_CPU : backend);
  if (!be || !be->linear_panels)
    return hj__err(ctx, HJ_ERR_UNSUPPORTED, "hj_linear_panels: the %s backend has no panel order",
                   be ? be->name : "requested");
  void *state = NULL;
  hj_status st = hj__backend_state(ctx, be, &state);
  return st != HJ_OK ? st : be->linear_panels(ctx, state, in, out, kc, nr);
}

/* hj_linear_pack and hj_linear_pack_bf16: elements of |es| bytes. */
static hj_status cmp_linear_pack(hj_ctx_t *ctx, const char *op, const void *w, size_t es,
                                 hj_linear_layout_t layout, int64_t in, int64_t out, int64_t kc, int64_t nr,
                                 void *dst) {
  if (!ctx) return HJ_ERR_INVALID_ARG;
  if (!w || !dst || (layout != HJ_LINEAR_IN_OUT && layout != HJ_LINEAR_OUT_IN) || in <= 0 ||
      out <= 0 || kc <= 0 || nr <= 0 || in % kc || out % nr || in > INT64_MAX / 4 / out)
    return hj__err(ctx, HJ_ERR_INVALID_ARG, "%s: need w and dst, layout IN_OUT or OUT_IN, "
                   "and kc, nr dividing in, out (layout %d, in %lld, out %lld, kc %lld, nr %lld)", op, (int)layout,
                   (long long)in, (long long)out, (long long)kc, (long long)nr);
  const char *src = w;
  char *d0 = dst;
  const size_t bytes = es * (size_t)(in * out);
  if (d0 < src + bytes && src < d0 + bytes) return hj__err(ctx, HJ_ERR_INVALID_ARG, "%s: dst overlaps w", op);
  const int64_t Q = out / nr;
  if (layout == HJ_LINEAR_IN_OUT) {   /* row k of (in, out) -> row k % kc of blocks (k / kc, q) */
    for (int64_t k = 0; k < in; k++)
      for (int64_t q = 0; q < Q; q++)
        memcpy(d0 + es * (size_t)(((k / kc * Q + q) * kc + k % kc) * nr), src + es * (size_t)(k * out + q * nr),
               es * (size_t)nr);
    return HJ_OK;
  }
  for (int64_t q = 0; q < Q; q++)     /* (out, in): block by block, reading whole pieces of rows */
    for (int64_t p = 0; p < in / kc; p++) {
      char *d = d0 + es * (size_t)((p * Q + q) * kc * nr);
      for (int64_t j = 0; j < nr; j++) {
        const char *r = src + es * (size_t)((q * nr + j) * in + p * kc);
        if (es == 4)
          for (int64_t i = 0; i < kc; i++) memcpy(d + 4 * (size_t)(i * nr + j), r + 4 * i, 4);
        else
          for (int64_t i = 0; i < kc; i++) memcpy(d + 2 * (size_t)(i * nr + j), r + 2 * i, 2);
      }
    }
  return HJ_OK;
}

hj_status hj_linear_pack(hj_ctx_t *ctx, const float *w, hj_linear_layout_t layout, int64_t in,
                         int64_t out, int64_t kc, int64_t nr, float *dst) {
  return cmp_linear_pack(ctx, "hj_linear_pack", w, sizeof *w, layout, in, out, kc, nr, dst);
}

hj_status hj_linear_pack_bf16(hj_ctx_t *ctx, const uint16_t *w, hj_linear_layout_t layout, int64_t in,
                              int64_t out, int64_t kc, int64_t nr, uint16_t *dst) {
  return cmp_linear_pack(ctx, "hj_linear_pack_bf16", w, sizeof *w, layout, in, out, kc, nr, dst);
}
