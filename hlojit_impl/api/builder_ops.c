/* builder_ops.c — the graph builder, part 2: the primitives with structure beyond
   elementwise: shape ops (broadcast, reshape, transpose, reverse, slice, pad), dynamic
   slices, gather and scatter, reductions, sort, dot, windows and dynamic sizes. Tuples and
   the ops that call sub-graphs are in control.c.

   Every op follows builder.c's pattern: resolve the operands with hj__operands, check what
   the message must name, hj__op_begin, set the attributes, hj__op_finish (shape inference
   checks the rest). On error the op returns the poisoned tensor {g, -1} and the graph keeps
   its first error.

   Invariants
   - Reducers and sort comparators (small scalar computations) are built once per top
     graph and (reducer or direction, dtype), and shared (top->reducers, top->sorters).
 */
#include "api.h"
#include <math.h>

static hj_tensor_t bldo_poison(hj_graph_t *g) { return (hj_tensor_t){ g, -1 }; }

/* ---- shape ops --------------------------------------------------------------------------- */

hj_tensor_t hj_broadcast_in_dim(hj_tensor_t x, hj_shape_t s, const int64_t *dims, int n) {
  const char *op = "hj_broadcast_in_dim";
  hj_graph_t *g;
  hlo_instr *a;
  if (!hj__operands(op, &x, 1, &g, &a)) return bldo_poison(g);
  hlo_shape hs;
  char b0[128];
  const char *why = !hlo_shape_is_array(&a->shape) ? "a tuple operand"
                    : hj__shape_problem((hj_dtype_t)a->shape.type, s);
  if (why || !hj__shape_to_hlo((hj_dtype_t)a->shape.type, s, &hs) || n != a->shape.rank || (n && !dims))
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: %d dims (or NULL) for operand %s and rank %d%s%s",
                          op, n, hlo_shape_str(&a->shape, b0, sizeof b0), s.rank, why ? ": " : "",
                          why ? why : "");
  /* XLA's builder also lets size-1 operand dims stretch: reshape them away first. */
  int64_t keep[HLO_MAX_RANK], map[HLO_MAX_RANK];
  int nk = 0;
  for (int i = 0; i < n; i++) {
    bool stretch = a->shape.dims[i] == 1 && dims[i] >= 0 && dims[i] < hs.rank && hs.dims[dims[i]] != 1;
    if (!stretch) keep[nk] = a->shape.dims[i], map[nk++] = dims[i];
  }
  if (nk < n) {
    hlo_shape r = hlo_shape_array(a->shape.type, nk, keep);
    if (!(a = hj__emit(g, op, HLO_OP_RESHAPE, &r, &a, 1))) return bldo_poison(g);
  }
  hlo_instr *ins = hj__op_begin(g, op, HLO_OP_BROADCAST, &hs, &a, 1);
  if (ins) ins->dims = hlo_ints_dup(g->m, map, nk);
  return hj__op_finish(g, op, ins);
}

hj_tensor_t hj_broadcast_to(hj_tensor_t x, hj_shape_t s) {
  const char *op = "hj_broadcast_to";
  hj_graph_t *g;
  hlo_instr *a;
  if (!hj__operands(op, &x, 1, &g, &a)) return bldo_poison(g);
  hlo_shape hs;
  char b0[128], b1[128];
  const char *why = !hlo_shape_is_array(&a->shape) ? "a tuple operand"
                    : hj__shape_problem((hj_dtype_t)a->shape.type, s);
  if (why || !hj__shape_to_hlo((hj_dtype_t)a->shape.type, s, &hs))
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: rank %d: %s", op, s.rank, why ? why : "bad shape");
  bool ok = a->shape.rank <= hs.rank;
  for (int i = 0; ok && i < a->shape.rank; i++) {
    int64_t d = a->shape.dims[i];
    ok = d == 1 || d == hs.dims[hs.rank - a->shape.rank + i];
  }
  if (!ok)
    return hj__graph_fail(g, HJ_ERR_SHAPE, "%s: %s does not broadcast to %s", op,
                          hlo_shape_str(&a->shape, b0, sizeof b0), hlo_shape_str(&hs, b1, sizeof b1));
  hlo_instr *r = hj__expand(g, op, a, &hs);
  if (r == a) return hj__op_finish(g, op, hj__op_begin(g, op, HLO_OP_COPY, NULL, &a, 1));
  return hj__tensor_of(g, r);
}

hj_tensor_t hj_reshape(hj_tensor_t x, hj_shape_t s) {
  const char *op = "hj_reshape";
  hj_graph_t *g;
  hlo_instr *a;
  if (!hj__operands(op, &x, 1, &g, &a)) return bldo_poison(g);
  char b0[128];
  hlo_shape_str(&a->shape, b0, sizeof b0);
  if (!hlo_shape_is_array(&a->shape) || s.rank < 0 || s.rank > HJ_MAX_RANK)
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: %s to rank %d", op, b0, s.rank);
  int64_t n = hlo_shape_numel(&a->shape), known = 1;
  int infer = -1;
  for (int i = 0; i < s.rank; i++) {
    if (s.dims[i] == -1 && infer < 0) infer = i;
    else if (s.dims[i] < 0)
      return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: dim %d is %lld (one -1 allowed)", op, i,
                            (long long)s.dims[i]);
    else if (!hlo_mul_ok(known, s.dims[i], &known) || known > HLO_MAX_NUMEL)
      return hj__graph_fail(g, HJ_ERR_SHAPE, "%s: cannot reshape %s to a shape of more than 2^53 "
                            "elements", op, b0);
  }
  if (infer >= 0) s.dims[infer] = known ? n / known : 0;
  hlo_shape hs = { 0 };
  if (!hj__shape_to_hlo((hj_dtype_t)a->shape.type, s, &hs) || hlo_shape_numel(&hs) != n) {
    char b1[128];
    return hj__graph_fail(g, HJ_ERR_SHAPE, "%s: cannot reshape %s (%lld elements) to %s", op, b0,
                          (long long)n, hlo_shape_str(&hs, b1, sizeof b1));
  }
  return hj__op_finish(g, op, hj__op_begin(g, op, HLO_OP_RESHAPE, &hs, &a, 1));
}

/* One operand, integer-list attributes checked by shape inference. */
static hj_tensor_t bldo_dims_op(const char *op, hlo_opcode opc, hj_tensor_t x, const int64_t *d, int n) {
  hj_graph_t *g;
  hlo_instr *a;
  if (!hj__operands(op, &x, 1, &g, &a)) return bldo_poison(g);
  if (n < 0 || (n > 0 && !d)) return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: NULL dims or n %d", op, n);
  hlo_instr *ins = hj__op_begin(g, op, opc, NULL, &a, 1);
  if (ins) ins->dims = hlo_ints_dup(g->m, d, n);
  return hj__op_finish(g, op, ins);
}

hj_tensor_t hj_transpose(hj_tensor_t x, const int64_t *perm, int n) {
  return bldo_dims_op("hj_transpose", HLO_OP_TRANSPOSE, x, perm, n);
}
hj_tensor_t hj_reverse(hj_tensor_t x, const int64_t *dims, int n) {
  return bldo_dims_op("hj_reverse", HLO_OP_REVERSE, x, dims, n);
}

hj_tensor_t hj_slice(hj_tensor_t x, const int64_t *start, const int64_t *limit, const int64_t *stride) {
  const char *op = "hj_slice";
  hj_graph_t *g;
  hlo_instr *a;
  if (!hj__operands(op, &x, 1, &g, &a)) return bldo_poison(g);
  if (!start || !limit) return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: start or limit is NULL", op);
  int r = a->shape.rank;
  int64_t ones[HLO_MAX_RANK];
  for (int i = 0; i < HLO_MAX_RANK; i++) ones[i] = 1;
  hlo_instr *ins = hj__op_begin(g, op, HLO_OP_SLICE, NULL, &a, 1);
  if (ins) {
    ins->slice_start = hlo_ints_dup(g->m, start, r);
    ins->slice_limit = hlo_ints_dup(g->m, limit, r);
    ins->slice_stride = hlo_ints_dup(g->m, stride ? stride : ones, r);
  }
  return hj__op_finish(g, op, ins);
}

/* |x| followed by one start tensor per dim of |x|, after |extra| more operands. */
static bool bldo_with_starts(const char *op, hj_tensor_t x, const hj_tensor_t *extra, int nextra,
                             const hj_tensor_t *starts, hj_graph_t **g, hlo_instr ***ops, int *n) {
  hlo_instr *a;
  if (!hj__operands(op, &x, 1, g, &a)) {
    /* x HJ_NONE: the update (dynamic-update-slice) still names the graph; the starts cannot
       be looked at, their count is x's rank */
    if (!*g && nextra > 0 && extra[0].graph && extra[0].id >= 0)
      hj__graph_fail(*g = extra[0].graph, HJ_ERR_INVALID_ARG, "%s: operand 0 is HJ_NONE or has no graph", op);
    return false;
  }
  if (!starts) return hj__graph_fail(*g, HJ_ERR_INVALID_ARG, "%s: starts is NULL", op), false;
  int r = hlo_shape_is_array(&a->shape) ? a->shape.rank : 0;
  hj_tensor_t ts[2 + HLO_MAX_RANK];
  ts[0] = x;
  for (int i = 0; i < nextra; i++) ts[1 + i] = extra[i];
  for (int i = 0; i < r; i++) ts[1 + nextra + i] = starts[i];
  *n = 1 + nextra + r;
  *ops = hlo_alloc((*g)->m, sizeof(hlo_instr *) * (size_t)*n);
  if (!*ops) return hj__graph_fail(*g, HJ_ERR_OOM, "%s: out of memory", op), false;
  return hj__operands(op, ts, *n, g, *ops);
}

hj_tensor_t hj_dynamic_slice(hj_tensor_t x, const hj_tensor_t *starts, const int64_t *sizes) {
  const char *op = "hj_dynamic_slice";
  hj_graph_t *g;
  hlo_instr **ops;
  int n;
  if (!bldo_with_starts(op, x, NULL, 0, starts, &g, &ops, &n)) return bldo_poison(g);
  if (!sizes) return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: sizes is NULL", op);
  hlo_instr *ins = hj__op_begin(g, op, HLO_OP_DYNAMIC_SLICE, NULL, ops, n);
  if (ins) ins->ds_sizes = hlo_ints_dup(g->m, sizes, n - 1);
  return hj__op_finish(g, op, ins);
}

hj_tensor_t hj_dynamic_update_slice(hj_tensor_t x, hj_tensor_t update, const hj_tensor_t *starts) {
  const char *op = "hj_dynamic_update_slice";
  hj_graph_t *g;
  hlo_instr **ops;
  int n;
  if (!bldo_with_starts(op, x, &update, 1, starts, &g, &ops, &n)) return bldo_poison(g);
  return hj__op_finish(g, op, hj__op_begin(g, op, HLO_OP_DYNAMIC_UPDATE_SLICE, NULL, ops, n));
}

hj_tensor_t hj_pad(hj_tensor_t x, hj_tensor_t value, const int64_t *lo, const int64_t *hi,
                   const int64_t *interior) {
  const char *op = "hj_pad";
  hj_tensor_t ts[2] = { x, value };
  hlo_instr *a[2];
  hj_graph_t *g;
  if (!hj__operands(op, ts, 2, &g, a)) return bldo_poison(g);
  if (!lo || !hi) return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: lo or hi is NULL", op);
  int r = a[0]->shape.rank;
  int64_t zeros[HLO_MAX_RANK] = { 0 };
  hlo_instr *ins = hj__op_begin(g, op, HLO_OP_PAD, NULL, a, 2);
  if (ins) {
    ins->pad_lo = hlo_ints_dup(g->m, lo, r);
    ins->pad_hi = hlo_ints_dup(g->m, hi, r);
    ins->pad_interior = hlo_ints_dup(g->m, interior ? interior : zeros, r);
  }
  return hj__op_finish(g, op, ins);
}

/* Copies a (pointer, count) list into |dst|; false when NULL with a positive count. */
static bool bldo_ints(hj_graph_t *g, const char *op, const char *what, const int64_t *v, int n,
                      hlo_ints *dst) {
  if (n < 0 || (n > 0 && !v)) {
    hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: %s is NULL or has count %d", op, what, n);
    return false;
  }
  *dst = hlo_ints_dup(g->m, v, n);
  return true;
}

hj_tensor_t hj_gather(hj_tensor_t operand, hj_tensor_t indices, const hj_gather_dims_t *d) {
  const char *op = "hj_gather";
  hj_tensor_t ts[2] = { operand, indices };
  hlo_instr *a[2];
  hj_graph_t *g;
  if (!hj__operands(op, ts, 2, &g, a)) return bldo_poison(g);
  if (!d) return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: dims is NULL", op);
  hlo_gather_dims gd = { .index_vector_dim = d->index_vector_dim };
  if (!bldo_ints(g, op, "offset_dims", d->offset_dims, d->n_offset_dims, &gd.offset_dims) ||
      !bldo_ints(g, op, "collapsed_slice_dims", d->collapsed_slice_dims, d->n_collapsed_slice_dims,
                 &gd.collapsed_slice_dims) ||
      !bldo_ints(g, op, "start_index_map", d->start_index_map, d->n_start_index_map, &gd.start_index_map) ||
      !bldo_ints(g, op, "slice_sizes", d->slice_sizes, d->n_slice_sizes, &gd.slice_sizes))
    return bldo_poison(g);
  hlo_instr *ins = hj__op_begin(g, op, HLO_OP_GATHER, NULL, a, 2);
  if (ins) ins->gather = gd;
  return hj__op_finish(g, op, ins);
}

/* ---- reductions, sort, scatter, dot ---------------------------------------------------------- */

/* The binary computation of reducer |r| on |t| scalars, built once per top graph. pred
   sums and products are or/and (what they are on {0,1} with saturation at 1). */
static hlo_comp *bldo_reducer(hj_graph_t *g, const char *op, hj_reducer_t r, hlo_type t) {
  hj_graph_t *top = g->top;
  if (top->reducers[r][t]) return top->reducers[r][t];
  if ((r == HJ_RED_AND || r == HJ_RED_OR) && hlo_type_is_float(t)) {
    /* caught here, naming the op, not at compile time in an internal computation */
    hj__graph_fail(g, HJ_ERR_SHAPE, "%s: reducer %s is not defined on %s (pred and integers only)",
                   op, r == HJ_RED_AND ? "HJ_RED_AND" : "HJ_RED_OR", hlo_type_name(t));
    return NULL;
  }
  static const hlo_opcode ops[HJ_RED_COUNT] = { HLO_OP_ADD, HLO_OP_MULTIPLY, HLO_OP_MAXIMUM,
                                                HLO_OP_MINIMUM, HLO_OP_AND, HLO_OP_OR, HLO_OP_PARAMETER };
  static const char *names[HJ_RED_COUNT] = { "sum", "prod", "max", "min", "and", "or", "replace" };
  hlo_opcode opc = ops[r];
  if (t == HLO_PRED && (r == HJ_RED_SUM || r == HJ_RED_MAX)) opc = HLO_OP_OR;
  if (t == HLO_PRED && (r == HJ_RED_PROD || r == HJ_RED_MIN)) opc = HLO_OP_AND;
  char name[64];
  snprintf(name, sizeof name, "%s_%s", names[r], hlo_type_name(t));
  hlo_comp *c = hj__comp_new(top->m, name);
  hlo_shape s = hlo_shape_scalar(t);
  hlo_instr *p[2];
  for (int i = 0; c && i < 2; i++) {
    if (!(p[i] = hlo_instr_new(c, HLO_OP_PARAMETER, NULL, &s, NULL, 0))) c = NULL;
    else p[i]->index = i, arrput(c->params, p[i]);
  }
  hlo_instr *root = !c ? NULL : r == HJ_RED_REPLACE ? p[1] : hlo_instr_new(c, opc, NULL, &s, p, 2);
  if (!root) {   /* the graph now has an error: a half-built computation never compiles */
    hj__graph_fail(g, HJ_ERR_OOM, "%s: out of memory building the reducer", op);
    return NULL;
  }
  root->is_root = true;
  c->root = root;
  return top->reducers[r][t] = c;
}

/* The identity of |r| on |t| as a scalar constant; NULL (error) when |r| has none there. */
static hlo_instr *bldo_identity(hj_graph_t *g, const char *op, hj_reducer_t r, hlo_instr *x) {
  hlo_type t = x->shape.type;
  hlo_type_class cls = hlo_type_class_of(t);
  uint64_t v = 0;
  bool f = cls == HLO_CLASS_FLOAT, s = cls == HLO_CLASS_SINT;
  int bits = hlo_type_size(t) * 8;
  char b[128];
  if ((r == HJ_RED_AND || r == HJ_RED_OR) && f) r = HJ_RED_REPLACE;
  switch (r) {
  case HJ_RED_SUM: case HJ_RED_OR: return hj__scalar_const(g, op, t, 0);
  case HJ_RED_PROD: return hj__scalar_const(g, op, t, 1);
  case HJ_RED_AND: hlo_store_s64(t, &v, 0, -1); if (t == HLO_PRED) v = 1; break;
  case HJ_RED_MAX:
    if (f) return hj__scalar_const(g, op, t, -INFINITY);
    if (s) hlo_store_s64(t, &v, 0, (int64_t)(~0ull << (bits - 1)));
    break;
  case HJ_RED_MIN:
    if (f) return hj__scalar_const(g, op, t, INFINITY);
    hlo_store_u64(t, &v, 0, s ? ~0ull >> (65 - bits) : ~0ull);
    if (t == HLO_PRED) v = 1;
    break;
  default:
    hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: reducer %d does not reduce %s", op, (int)r,
                   hlo_shape_str(&x->shape, b, sizeof b));
    return NULL;
  }
  hlo_shape sh = hlo_shape_scalar(t);
  return hj__const(g, op, &sh, &v);
}

hj_tensor_t hj_reduce(hj_tensor_t x, hj_reducer_t r, const int64_t *dims, int n) {
  const char *op = "hj_reduce";
  hj_graph_t *g;
  hlo_instr *a[2];
  char b0[128];
  if (!hj__operands(op, &x, 1, &g, a)) return bldo_poison(g);
  if ((unsigned)r >= HJ_RED_REPLACE || !hlo_shape_is_array(&a[0]->shape) || n < 0 ||
      n > a[0]->shape.rank || (n && !dims))
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: invalid reducer %d, tuple operand, NULL dims "
                          "or %d dims for %s", op, (int)r, n, hj__tensor_str(x, b0, sizeof b0));
  int64_t d[HLO_MAX_RANK];
  for (int i = 0; i < n; i++)
    d[i] = dims[i] < 0 ? dims[i] + a[0]->shape.rank : dims[i];
  hlo_comp *c = bldo_reducer(g, op, r, a[0]->shape.type);
  if (!c || !(a[1] = bldo_identity(g, op, r, a[0]))) return bldo_poison(g);
  hlo_instr *ins = hj__op_begin(g, op, HLO_OP_REDUCE, NULL, a, 2);
  if (ins) {
    ins->dims = hlo_ints_dup(g->m, d, n);
    hlo_instr_set_calls(ins, &c, 1);
  }
  return hj__op_finish(g, op, ins);
}

hj_tensor_t hj_scatter(hj_tensor_t operand, hj_tensor_t indices, hj_tensor_t updates,
                       const hj_scatter_dims_t *d, hj_reducer_t combine) {
  const char *op = "hj_scatter";
  hj_tensor_t ts[3] = { operand, indices, updates };
  hlo_instr *a[3];
  hj_graph_t *g;
  if (!hj__operands(op, ts, 3, &g, a)) return bldo_poison(g);
  if (!d || (unsigned)combine >= HJ_RED_COUNT || !hlo_shape_is_array(&a[0]->shape))
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: NULL dims, invalid combiner %d or tuple operand",
                          op, (int)combine);
  hlo_scatter_dims sd = { .index_vector_dim = d->index_vector_dim };
  if (!bldo_ints(g, op, "update_window_dims", d->update_window_dims, d->n_update_window_dims,
                 &sd.update_window_dims) ||
      !bldo_ints(g, op, "inserted_window_dims", d->inserted_window_dims, d->n_inserted_window_dims,
                 &sd.inserted_window_dims) ||
      !bldo_ints(g, op, "scatter_dims_to_operand_dims", d->scatter_dims_to_operand_dims,
                 d->n_scatter_dims_to_operand_dims, &sd.scatter_dims_to_operand_dims))
    return bldo_poison(g);
  hlo_comp *c = bldo_reducer(g, op, combine, a[0]->shape.type);
  hlo_instr *ins = c ? hj__op_begin(g, op, HLO_OP_SCATTER, NULL, a, 3) : NULL;
  if (ins) {
    ins->scatter = sd;
    hlo_instr_set_calls(ins, &c, 1);
  }
  return hj__op_finish(g, op, ins);
}

/* Comparator for hj_sort: ascending is LT in total order (XLA's and JAX's); descending is
   "a before b iff !isnan(a) && (isnan(b) || a > b)" so NaNs sort last there too. */
static hlo_comp *bldo_sorter(hj_graph_t *g, bool desc, hlo_type t) {
  hj_graph_t *top = g->top;
  if (top->sorters[desc][t]) return top->sorters[desc][t];
  char name[64];
  snprintf(name, sizeof name, "%s_%s", desc ? "gt" : "lt", hlo_type_name(t));
  hlo_comp *c = hj__comp_new(top->m, name);
  hlo_shape s = hlo_shape_scalar(t), ps = hlo_shape_scalar(HLO_PRED);
  hlo_instr *p[2], *root;
  for (int i = 0; c && i < 2; i++) {
    if (!(p[i] = hlo_instr_new(c, HLO_OP_PARAMETER, NULL, &s, NULL, 0))) return NULL;
    p[i]->index = i;
    arrput(c->params, p[i]);
  }
  if (!c || !(root = hlo_instr_new(c, HLO_OP_COMPARE, NULL, &ps, p, 2))) return NULL;
  bool fl = hlo_type_is_float(t);
  root->cmp_dir = desc ? HLO_CMP_GT : HLO_CMP_LT;
  root->cmp_type = fl ? HLO_CMPT_TOTALORDER : HLO_CMPT_DEFAULT;
  if (desc && fl) {
    hlo_instr *pp0[2] = { p[0], p[0] }, *pp1[2] = { p[1], p[1] }, *n0, *n1, *v[2];
    if (!(n0 = hlo_instr_new(c, HLO_OP_COMPARE, NULL, &ps, pp0, 2)) ||
        !(n1 = hlo_instr_new(c, HLO_OP_COMPARE, NULL, &ps, pp1, 2)))
      return NULL;
    n0->cmp_dir = n1->cmp_dir = HLO_CMP_NE;
    v[0] = n1, v[1] = root;
    hlo_instr *either = hlo_instr_new(c, HLO_OP_OR, NULL, &ps, v, 2);
    hlo_instr *ok0 = hlo_instr_new(c, HLO_OP_NOT, NULL, &ps, &n0, 1);
    if (!either || !ok0) return NULL;
    v[0] = ok0, v[1] = either;
    if (!(root = hlo_instr_new(c, HLO_OP_AND, NULL, &ps, v, 2))) return NULL;
  }
  root->is_root = true;
  c->root = root;
  return top->sorters[desc][t] = c;
}

hj_tensor_t hj_sort(hj_tensor_t x, int dim, bool descending) {
  const char *op = "hj_sort";
  hj_graph_t *g;
  hlo_instr *a;
  if (!hj__operands(op, &x, 1, &g, &a)) return bldo_poison(g);
  if (!hlo_shape_is_array(&a->shape))
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: the operand is a tuple", op);
  int64_t d = dim < 0 ? dim + a->shape.rank : dim;
  hlo_comp *c = bldo_sorter(g, descending, a->shape.type);
  hlo_instr *ins = c ? hj__op_begin(g, op, HLO_OP_SORT, NULL, &a, 1) : NULL;
  if (ins) {
    ins->dims = hlo_ints_dup(g->m, &d, 1);
    ins->is_stable = true;
    hlo_instr_set_calls(ins, &c, 1);
  }
  return hj__op_finish(g, op, ins);
}

hj_tensor_t hj_topk(hj_tensor_t x, int64_t k, bool largest) {
  const char *op = "hj_topk";
  hj_graph_t *g;
  hlo_instr *a;
  if (!hj__operands(op, &x, 1, &g, &a)) return bldo_poison(g);
  hlo_instr *ins = hj__op_begin(g, op, HLO_OP_TOPK, NULL, &a, 1);
  if (ins) ins->k = k, ins->largest = largest;
  return hj__op_finish(g, op, ins);
}

hj_tensor_t hj_dot_general(hj_tensor_t a, hj_tensor_t b, const hj_dot_dims_t *d) {
  const char *op = "hj_dot_general";
  hj_tensor_t ts[2] = { a, b };
  hlo_instr *x[2];
  hj_graph_t *g;
  if (!hj__operands(op, ts, 2, &g, x)) return bldo_poison(g);
  if (!d) return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: dims is NULL", op);
  hlo_dot_dims dd;
  if (!bldo_ints(g, op, "lhs_batch", d->lhs_batch, d->n_lhs_batch, &dd.lhs_batch) ||
      !bldo_ints(g, op, "rhs_batch", d->rhs_batch, d->n_rhs_batch, &dd.rhs_batch) ||
      !bldo_ints(g, op, "lhs_contracting", d->lhs_contracting, d->n_lhs_contracting, &dd.lhs_contract) ||
      !bldo_ints(g, op, "rhs_contracting", d->rhs_contracting, d->n_rhs_contracting, &dd.rhs_contract))
    return bldo_poison(g);
  if (hlo_shape_is_array(&x[0]->shape) && hlo_shape_is_array(&x[1]->shape) &&
      !hj__dot_types(g, op, x[0], x[1]))
    return bldo_poison(g);
  hlo_instr *ins = hj__op_begin(g, op, HLO_OP_DOT, NULL, x, 2);
  if (ins) ins->dot = dd;
  return hj__op_finish(g, op, ins);
}

/* ---- dynamic shapes: hj_dim_size, hj_reduce_window (hlojit.h's tracing JIT section) --------- */

hj_tensor_t hj_dim_size(hj_tensor_t x, int dim) {
  const char *op = "hj_dim_size";
  hj_graph_t *g;
  hlo_instr *a;
  char b0[128];
  if (!hj__operands(op, &x, 1, &g, &a)) return bldo_poison(g);
  int r = hlo_shape_is_array(&a->shape) ? a->shape.rank : 0, d = dim < 0 ? dim + r : dim;   /* a tuple: none */
  if (d < 0 || d >= r)
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: dim %d out of range for %s", op, dim,
                          hlo_shape_str(&a->shape, b0, sizeof b0));
  /* A static dim is a constant; a bounded one reads its real size (XLA's get-dimension-size). */
  if (!a->shape.dynamic[d]) return hj_scalar(g, HJ_S32, (double)a->shape.dims[d]);
  hlo_instr *ins = hj__op_begin(g, op, HLO_OP_GET_DIMENSION_SIZE, NULL, &a, 1);
  if (ins) ins->dims = hlo_ints_dup(g->m, (int64_t[]){ d }, 1);
  return hj__op_finish(g, op, ins);
}

hj_tensor_t hj_reduce_window(hj_tensor_t x, hj_reducer_t r, const int64_t *window, const int64_t *strides,
                             const int64_t *pad_lo, const int64_t *pad_hi) {
  const char *op = "hj_reduce_window";
  hj_graph_t *g;
  hlo_instr *a[2];
  char b0[128];
  if (!hj__operands(op, &x, 1, &g, a)) return bldo_poison(g);
  if ((unsigned)r >= HJ_RED_REPLACE || !hlo_shape_is_array(&a[0]->shape) || !window)
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: invalid reducer %d, tuple operand or NULL window for %s",
                          op, (int)r, hj__tensor_str(x, b0, sizeof b0));
  int n = a[0]->shape.rank;
  int64_t one[HLO_MAX_RANK], zero[HLO_MAX_RANK] = { 0 };
  for (int i = 0; i < n; i++) one[i] = 1;
  for (int i = 0; i < n; i++)
    if (window[i] < 1 || (strides && strides[i] < 1))
      return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: window size %lld / stride %lld of dim %d must be >= 1",
                            op, (long long)window[i], (long long)(strides ? strides[i] : 1), i);
  hlo_comp *c = bldo_reducer(g, op, r, a[0]->shape.type);
  if (!c || !(a[1] = bldo_identity(g, op, r, a[0]))) return bldo_poison(g);
  hlo_instr *ins = hj__op_begin(g, op, HLO_OP_REDUCE_WINDOW, NULL, a, 2);
  if (ins) {
    ins->window.size = hlo_ints_dup(g->m, window, n);
    ins->window.stride = hlo_ints_dup(g->m, strides ? strides : one, n);
    ins->window.pad_lo = hlo_ints_dup(g->m, pad_lo ? pad_lo : zero, n);
    ins->window.pad_hi = hlo_ints_dup(g->m, pad_hi ? pad_hi : zero, n);
    ins->window.base_dilation = hlo_ints_dup(g->m, one, n);
    ins->window.window_dilation = hlo_ints_dup(g->m, one, n);
    hlo_instr_set_calls(ins, &c, 1);
  }
  return hj__op_finish(g, op, ins);
}
