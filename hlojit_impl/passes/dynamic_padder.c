/* passes/dynamic_padder.c — bounded dynamic dims (`<=N`): the pipeline's get-dimension-size
   folding (hlo_pass_dynamic_padder) and the tracing JIT's padding (hlo_pass_dynamic_pad);
   passes.h says what each does. The op rules for slices, concatenate, pad, reverse, gather
   and reduce-window are in dynamic_padder_ops.c.

   After XLA's DynamicPadder and DynamicDimensionInference (written afresh): every array is
   computed at its bound; a padded lane (index >= the real size along a dynamic dim) holds
   anything, and must never reach a real lane. What reaches a real lane is
     - a reduction, dot contraction or reduce-window over a padded dim: its inputs are
       masked with select(iota < size, x, identity) — the reducer's init for reduce and
       reduce-window, zero for dot (both operands: 0 * NaN would still be NaN). select, not
       multiply, so a NaN or Inf in a padded lane is dropped, never propagated; an entry
       parameter's padded lanes are zeros by contract, so a sum or a dot over them needs no
       mask;
     - an op that moves data across the real/padded boundary: concatenate along a dynamic
       dim (the pieces are placed at the real running offsets by dynamic-update-slices),
       pad (the high padding starts at the real end), reverse (shifted back by bound - size),
       dynamic-slice / dynamic-update-slice / gather (starts clamped to the real size, as
       the unpadded op clamps them).
   Everything else (elementwise ops, broadcast, transpose, reshapes that keep a dynamic dim
   the major-most of its group, slices) keeps real lanes where they were.

   Size inference: per instruction, per array leaf, per dim, the s32[] instruction holding
   the real size (pd_leaf). Entry parameters' dynamic dims get new s32[] parameters; an
   elementwise op takes the first known size among its operands (XLA assumes equal sizes
   too); a slice's size is (min(size, limit) - start + stride - 1) / stride clamped to the
   result; a concatenate's is the sum; and so on. Shapes declared dynamic with no parameter
   behind them (an iota or a broadcast of a dynamic shape) are "unknown": fine wherever a
   known size joins them elementwise, an error where the size itself is needed.

   Worked example (softmax over x f32[<=8], real size s in parameter x.size0):
       m = reduce(x, -inf, max)        ->  m = reduce(select(iota < s, x, -inf), -inf, max)
       e = exp(x - broadcast(m))          (unchanged: lanes >= s are garbage)
       z = reduce(e, 0, add)           ->  z = reduce(select(iota < s, e, 0), 0, add)
       ROOT r = e / broadcast(z)       ->  ROOT (r, ...): the output's size is x.size0 (a
                                           parameter, so no size output is added)

   New instructions are appended to the entry while walking a snapshot of it, operands are
   rewired, and one stable topological sort and a DCE at the end restore the order; then
   every dynamic flag is cleared and the module verified. */
#include "dynamic_padder_internal.h"
#include <stdlib.h>

hlo_instr pd_unknown_instr;

/* ---- values ------------------------------------------------------------------------------ */

pd_val *pd_new_val(pd_ctx *P, const hlo_instr *ins) {
  pd_val *v = hlo_alloc(P->m, sizeof *v);
  int n = ins->shape.type == HLO_TUPLE ? ins->shape.ntuple : 1;
  if (v && n > 0) v->leaf = hlo_alloc(P->m, sizeof(pd_leaf) * (size_t)n);
  if (!v || (n > 0 && !v->leaf)) {
    hj__err(P->ctx, HJ_ERR_OOM, "dynamic padder: out of memory");
    return NULL;
  }
  v->n = n;
  hmput(P->vals, ins->id, v);
  return v;
}

pd_val *pd_get(pd_ctx *P, const hlo_instr *ins) {
  pd_val *v = hmget(P->vals, ins->id);
  return v ? v : pd_new_val(P, ins);
}

hj_status pd_unsup(pd_ctx *P, const hlo_instr *ins, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return hj__err(P->ctx, HJ_ERR_UNSUPPORTED, "dynamic padder: op '%s' (%s): %s", hlo_opcode_name(ins->op),
                 ins->name, msg);
}

static bool pd_leaf_dynamic(const pd_leaf *l, int rank) {
  for (int d = 0; d < rank; d++)
    if (l->size[d]) return true;
  return false;
}

static bool pd_val_dynamic(const pd_val *v, const hlo_instr *ins) {
  for (int k = 0; k < v->n; k++) {
    const hlo_shape *s = ins->shape.type == HLO_TUPLE ? &ins->shape.tuple[k] : &ins->shape;
    if (hlo_shape_is_array(s) && pd_leaf_dynamic(&v->leaf[k], s->rank)) return true;
  }
  return false;
}

/* ---- builders ---------------------------------------------------------------------------- */

static hlo_instr *pd_new(pd_ctx *P, hlo_opcode op, const hlo_shape *s, hlo_instr *const *ops, int n) {
  return hlo_instr_new(P->c, op, NULL, s, ops, n);
}

hlo_instr *pd_scalar(pd_ctx *P, hlo_type t, double v) {
  hlo_shape s = hlo_shape_scalar(t);
  hlo_literal *l = hlo_literal_new(P->ctx, &s);
  if (!l) return NULL;
  hlo_store_f64(t, l->data, 0, v);
  hlo_instr *c = hlo_constant_new_before(P->c, NULL, l);
  hlo_literal_free(l);
  return c;
}

hlo_instr *pd_s32(pd_ctx *P, int64_t v) {
  hlo_shape s = hlo_shape_scalar(HLO_S32);
  hlo_literal *l = hlo_literal_new(P->ctx, &s);
  if (!l) return NULL;
  *(int32_t *)l->data = (int32_t)v;
  hlo_instr *c = hlo_constant_new_before(P->c, NULL, l);
  hlo_literal_free(l);
  return c;
}

hlo_instr *pd_binop(pd_ctx *P, hlo_opcode op, hlo_instr *a, hlo_instr *b) {
  if (!a || !b) return NULL;
  hlo_instr *ops[2] = { a, b };
  return pd_new(P, op, &a->shape, ops, 2);
}

static hlo_instr *pd_cmp(pd_ctx *P, hlo_cmp_dir dir, hlo_instr *a, hlo_instr *b) {
  if (!a || !b) return NULL;
  hlo_shape s = a->shape;
  s.type = HLO_PRED;
  hlo_instr *ops[2] = { a, b };
  hlo_instr *c = pd_new(P, HLO_OP_COMPARE, &s, ops, 2);
  if (c) c->cmp_dir = dir;
  return c;
}

static hlo_instr *pd_select(pd_ctx *P, hlo_instr *p, hlo_instr *a, hlo_instr *b) {
  if (!p || !a || !b) return NULL;
  hlo_instr *ops[3] = { p, a, b };
  return pd_new(P, HLO_OP_SELECT, &a->shape, ops, 3);
}

hlo_instr *pd_convert(pd_ctx *P, hlo_instr *x, hlo_type t) {
  if (!x || x->shape.type == t) return x;
  hlo_shape s = x->shape;
  s.type = t;
  return pd_new(P, HLO_OP_CONVERT, &s, &x, 1);
}

hlo_instr *pd_broadcast(pd_ctx *P, hlo_instr *scalar, const hlo_shape *like) {
  if (!scalar) return NULL;
  hlo_shape s = hlo_shape_array(scalar->shape.type, like->rank, like->dims);
  return pd_new(P, HLO_OP_BROADCAST, &s, &scalar, 1);
}

hlo_instr *pd_mask(pd_ctx *P, hlo_instr *x, int d, hlo_instr *size, hlo_instr *fill) {
  if (!x || !size || !fill) return NULL;
  hlo_shape is = hlo_shape_array(HLO_S32, x->shape.rank, x->shape.dims);
  hlo_instr *iota = pd_new(P, HLO_OP_IOTA, &is, NULL, 0);
  if (!iota) return NULL;
  iota->index = d;
  P->info->masks++;
  return pd_select(P, pd_cmp(P, HLO_CMP_LT, iota, pd_broadcast(P, size, &is)), x, pd_broadcast(P, fill, &x->shape));
}

hlo_instr *pd_clamp_scalar(pd_ctx *P, hlo_instr *lo, hlo_instr *x, hlo_instr *hi) {
  return pd_binop(P, HLO_OP_MAXIMUM, lo, pd_binop(P, HLO_OP_MINIMUM, x, hi));
}

hlo_instr *pd_size_of(pd_ctx *P, const hlo_instr *ins, const pd_leaf *l, int d, int64_t bound) {
  if (l->size[d] == PD_UNKNOWN) {
    pd_unsup(P, ins, "the real size of dim %d of an operand is unknown (its shape is dynamic but "
             "no parameter gives it: build it from the parameters, or use hj_dim_size)", d);
    return NULL;
  }
  return l->size[d] ? l->size[d] : pd_s32(P, bound);
}

void pd_merge(pd_ctx *P, pd_leaf *out, int rank, hlo_instr *const *ops, int n) {
  for (int d = 0; d < rank; d++) {
    hlo_instr *best = NULL;
    for (int k = 0; k < n; k++) {
      if (!hlo_shape_is_array(&ops[k]->shape) || ops[k]->shape.rank != rank) continue;
      hlo_instr *s = pd_get(P, ops[k])->leaf[0].size[d];
      if (s && s != PD_UNKNOWN) {
        best = s;
        break;
      }
      if (s) best = s;
    }
    out->size[d] = best;
  }
}

/* Is |x| a constant whose value is all zero bytes (+0, integer 0, false)? */
static bool pd_is_zero_const(const hlo_instr *x) {
  if (x->op != HLO_OP_CONSTANT || !x->literal || !x->literal->data) return false;
  for (int64_t i = 0; i < x->literal->nbytes; i++)
    if (x->literal->data[i]) return false;
  return true;
}

/* ---- rules: leaves, elementwise, shape ops --------------------------------------------------- */

/* Constants, iota: static, except dims the shape declares dynamic (size unknown). */
static hj_status pd_declared(pd_ctx *P, hlo_instr *ins) {
  pd_val *v = pd_new_val(P, ins);
  if (!v) return HJ_ERR_OOM;
  if (hlo_shape_is_array(&ins->shape))
    for (int d = 0; d < ins->shape.rank; d++) v->leaf[0].size[d] = ins->shape.dynamic[d] ? PD_UNKNOWN : NULL;
  return HJ_OK;
}

static hj_status pd_elementwise(pd_ctx *P, hlo_instr *ins) {
  pd_val *v = pd_new_val(P, ins);
  if (!v) return HJ_ERR_OOM;
  if (!hlo_shape_is_array(&ins->shape)) return HJ_OK;
  pd_merge(P, &v->leaf[0], ins->shape.rank, ins->operands, ins->noperands);
  /* Zeros stay zeros through conversions, copies, negation, |x|, and sums and products of
     two zero-padded operands. */
  bool zp0 = ins->noperands > 0 && pd_get(P, ins->operands[0])->leaf[0].zp;
  switch (ins->op) {
  case HLO_OP_CONVERT: case HLO_OP_COPY: case HLO_OP_NEGATE: case HLO_OP_ABS:
  case HLO_OP_BITCAST_CONVERT:
    v->leaf[0].zp = zp0;
    break;
  case HLO_OP_ADD: case HLO_OP_SUBTRACT: case HLO_OP_MULTIPLY:
    v->leaf[0].zp = zp0 && pd_get(P, ins->operands[1])->leaf[0].zp;
    break;
  default: break;
  }
  return HJ_OK;
}

static hj_status pd_broadcast_rule(pd_ctx *P, hlo_instr *ins) {
  pd_val *v = pd_new_val(P, ins);
  if (!v) return HJ_ERR_OOM;
  const pd_leaf *x = &pd_get(P, ins->operands[0])->leaf[0];
  for (int d = 0; d < ins->shape.rank; d++) v->leaf[0].size[d] = ins->shape.dynamic[d] ? PD_UNKNOWN : NULL;
  for (int i = 0; i < ins->dims.n; i++) v->leaf[0].size[ins->dims.v[i]] = x->size[i];
  v->leaf[0].zp = x->zp;
  return HJ_OK;
}

static hj_status pd_transpose(pd_ctx *P, hlo_instr *ins) {
  pd_val *v = pd_new_val(P, ins);
  if (!v) return HJ_ERR_OOM;
  const pd_leaf *x = &pd_get(P, ins->operands[0])->leaf[0];
  for (int i = 0; i < ins->dims.n; i++) v->leaf[0].size[i] = x->size[ins->dims.v[i]];
  v->leaf[0].zp = x->zp;
  return HJ_OK;
}

/* Reshape (and default-layout bitcast): the dims split into minimal groups of equal
   product. A group without dynamic dims is static. A group whose only dynamic input dim is
   its major-most non-1 dim keeps the real data a row-major prefix of the group, so the
   result's major-most non-1 dim k of the group is dynamic with size s * inner_in / inner_out
   when inner_out divides inner_in ([<=T, 64] -> [<=64T]: s * 64; [1, <=T] -> [<=T]: s).
   Anything else ([<=64T] -> [<=T, 64], a dynamic minor dim merged) is unsupported. */
static hj_status pd_reshape(pd_ctx *P, hlo_instr *ins) {
  pd_val *v = pd_new_val(P, ins);
  if (!v) return HJ_ERR_OOM;
  const hlo_shape *is = &ins->operands[0]->shape, *os = &ins->shape;
  const pd_leaf *x = &pd_get(P, ins->operands[0])->leaf[0];
  v->leaf[0].zp = x->zp;
  if (!pd_leaf_dynamic(x, is->rank)) return HJ_OK;
  int i = 0, j = 0;
  while (i < is->rank || j < os->rank) {
    int i0 = i, j0 = j;
    int64_t pi = i < is->rank ? is->dims[i++] : 1, po = j < os->rank ? os->dims[j++] : 1;
    while (pi != po) {
      if (pi < po && i < is->rank) pi *= is->dims[i++];
      else if (po < pi && j < os->rank) po *= os->dims[j++];
      else return pd_unsup(P, ins, "cannot group the dims of the reshape");
    }
    /* size-1 dims that follow belong to this group too (they change nothing) */
    while (i < is->rank && is->dims[i] == 1 && !(j < os->rank && os->dims[j] == 1)) i++;
    int dyn = -1, ndyn = 0, major = -1;
    for (int d = i0; d < i; d++) {
      if (x->size[d]) dyn = d, ndyn++;
      if (major < 0 && is->dims[d] != 1) major = d;
    }
    if (ndyn == 0) continue;
    if (ndyn > 1 || (major >= 0 && dyn != major))
      return pd_unsup(P, ins, "dynamic dim %d is not the major-most of its reshape group", dyn);
    if (x->size[dyn] == PD_UNKNOWN) return pd_unsup(P, ins, "the real size of dim %d is unknown", dyn);
    int k = -1;
    for (int d = j0; d < j && k < 0; d++)
      if (os->dims[d] != 1 || d == j - 1) k = d;
    if (k < 0) return pd_unsup(P, ins, "dynamic dim %d has no dim to go to", dyn);
    int64_t inner_in = 1, inner_out = 1;
    for (int d = dyn + 1; d < i; d++) inner_in *= is->dims[d];
    for (int d = k + 1; d < j; d++) inner_out *= os->dims[d];
    if (inner_out == 0 || inner_in % inner_out)
      return pd_unsup(P, ins, "dynamic dim %d would split across dims of the result", dyn);
    hlo_instr *s = x->size[dyn];
    if (inner_in / inner_out != 1) s = pd_binop(P, HLO_OP_MULTIPLY, s, pd_s32(P, inner_in / inner_out));
    if (!s) return HJ_ERR_OOM;
    v->leaf[0].size[k] = s;
  }
  return HJ_OK;
}

/* ---- rules: reduce, dot, tuples, get-dimension-size ----------------------------------------- */

/* Inputs masked with their init along every reduced dynamic dim (the size merged over the
   inputs: argmax's iota has no size of its own); kept dims carry their sizes. */
static hj_status pd_reduce(pd_ctx *P, hlo_instr *ins) {
  int n = ins->noperands / 2, r = ins->operands[0]->shape.rank;
  pd_val *v = pd_new_val(P, ins);
  if (!v) return HJ_ERR_OOM;
  pd_leaf m = { 0 };
  pd_merge(P, &m, r, ins->operands, n);
  for (int i = 0; i < ins->dims.n; i++)
    if (m.size[ins->dims.v[i]] == PD_UNKNOWN)
      return pd_unsup(P, ins, "reduces dim %d whose real size is unknown", (int)ins->dims.v[i]);
  for (int k = 0; k < n; k++) {
    hlo_instr *x = ins->operands[k], *init = ins->operands[n + k];
    bool zp = pd_get(P, x)->leaf[0].zp && pd_is_zero_const(init);   /* zeros are the identity already */
    for (int i = 0; i < ins->dims.n && !zp; i++) {
      int d = (int)ins->dims.v[i];
      if (m.size[d] && !(x = pd_mask(P, x, d, m.size[d], init))) return HJ_ERR_OOM;
    }
    ins->operands[k] = x;
    pd_leaf *o = &v->leaf[v->n == 1 ? 0 : k];   /* the kept dims, in order */
    for (int d = 0, j = 0; d < r; d++)
      if (!hlo_ints_has(ins->dims, d)) o->size[j++] = m.size[d];
  }
  return HJ_OK;
}

static hj_status pd_dot(pd_ctx *P, hlo_instr *ins) {
  pd_val *v = pd_new_val(P, ins);
  if (!v) return HJ_ERR_OOM;
  const hlo_dot_dims *dd = &ins->dot;
  pd_leaf l = pd_get(P, ins->operands[0])->leaf[0], r = pd_get(P, ins->operands[1])->leaf[0];
  for (int i = 0; i < dd->lhs_contract.n; i++) {
    int lc = (int)dd->lhs_contract.v[i], rc = (int)dd->rhs_contract.v[i];
    hlo_instr *s = l.size[lc] && l.size[lc] != PD_UNKNOWN ? l.size[lc] : r.size[rc];
    if (!s && !l.size[lc]) continue;
    if (!s || s == PD_UNKNOWN) return pd_unsup(P, ins, "contracts dim %d whose real size is unknown", lc);
    if (!l.zp || !r.zp) {   /* 0 * 0 needs no mask; 0 * garbage does */
      hlo_instr *zero = pd_scalar(P, ins->operands[0]->shape.type, 0);
      if (!l.zp && !(ins->operands[0] = pd_mask(P, ins->operands[0], lc, s, zero))) return HJ_ERR_OOM;
      zero = pd_scalar(P, ins->operands[1]->shape.type, 0);
      if (!r.zp && !(ins->operands[1] = pd_mask(P, ins->operands[1], rc, s, zero))) return HJ_ERR_OOM;
    }
  }
  /* result: batch dims, lhs free dims, rhs free dims */
  int j = 0;
  pd_leaf *o = &v->leaf[0];
  for (int i = 0; i < dd->lhs_batch.n; i++, j++) {
    hlo_instr *a = l.size[dd->lhs_batch.v[i]], *b = r.size[dd->rhs_batch.v[i]];
    o->size[j] = a && a != PD_UNKNOWN ? a : (b ? b : a);
  }
  for (int d = 0; d < ins->operands[0]->shape.rank; d++)
    if (!hlo_ints_has(dd->lhs_batch, d) && !hlo_ints_has(dd->lhs_contract, d)) o->size[j++] = l.size[d];
  for (int d = 0; d < ins->operands[1]->shape.rank; d++)
    if (!hlo_ints_has(dd->rhs_batch, d) && !hlo_ints_has(dd->rhs_contract, d)) o->size[j++] = r.size[d];
  return HJ_OK;
}

static hj_status pd_tuple(pd_ctx *P, hlo_instr *ins) {
  pd_val *v = pd_new_val(P, ins);
  if (!v) return HJ_ERR_OOM;
  for (int k = 0; k < ins->noperands && k < v->n; k++) {
    const hlo_instr *o = ins->operands[k];
    pd_val *ov = pd_get(P, o);
    if (hlo_shape_is_array(&o->shape)) v->leaf[k] = ov->leaf[0];
    else if (pd_val_dynamic(ov, o)) return pd_unsup(P, ins, "nested tuples with dynamic dims");
  }
  return HJ_OK;
}

static hj_status pd_gte(pd_ctx *P, hlo_instr *ins) {
  pd_val *v = pd_new_val(P, ins), *t = pd_get(P, ins->operands[0]);
  if (!v || !t) return HJ_ERR_OOM;
  if (hlo_shape_is_array(&ins->shape) && ins->index >= 0 && ins->index < t->n) v->leaf[0] = t->leaf[ins->index];
  return HJ_OK;
}

/* Becomes the real size (a parameter, an expression, or the bound when static). */
static hj_status pd_get_dimension_size(pd_ctx *P, hlo_instr *ins) {
  const pd_leaf *x = &pd_get(P, ins->operands[0])->leaf[0];
  int d = (int)ins->dims.v[0];
  hlo_instr *s = pd_size_of(P, ins, x, d, ins->operands[0]->shape.dims[d]);
  if (!s) return hj__ctx_last(P->ctx) ? hj__ctx_last(P->ctx) : HJ_ERR_OOM;
  hlo_replace_all_uses(P->c, ins, s);
  return pd_new_val(P, ins) ? HJ_OK : HJ_ERR_OOM;
}

/* Ops whose operands must not be dynamic here (their result is static). */
static hj_status pd_static_only(pd_ctx *P, hlo_instr *ins, const char *why) {
  for (int k = 0; k < ins->noperands; k++)
    if (pd_val_dynamic(pd_get(P, ins->operands[k]), ins->operands[k]))
      return pd_unsup(P, ins, "operand %d has a dynamic dim (%s)", k, why);
  return pd_new_val(P, ins) ? HJ_OK : HJ_ERR_OOM;
}

static hj_status pd_sort(pd_ctx *P, hlo_instr *ins) {
  int d = ins->dims.n ? (int)ins->dims.v[0] : 0;
  for (int k = 0; k < ins->noperands; k++)
    if (pd_get(P, ins->operands[k])->leaf[0].size[d])
      return pd_unsup(P, ins, "sorts along dynamic dim %d", d);
  pd_val *v = pd_new_val(P, ins);
  if (!v) return HJ_ERR_OOM;
  for (int k = 0; k < v->n; k++) pd_merge(P, &v->leaf[k], ins->operands[0]->shape.rank, ins->operands, ins->noperands);
  return HJ_OK;
}

static hj_status pd_instr(pd_ctx *P, hlo_instr *ins) {
  switch (ins->op) {
  case HLO_OP_PARAMETER: return HJ_OK;   /* set up before the walk */
  case HLO_OP_CONSTANT: case HLO_OP_IOTA: return pd_declared(P, ins);
  case HLO_OP_BROADCAST: return pd_broadcast_rule(P, ins);
  case HLO_OP_RESHAPE: return pd_reshape(P, ins);
  case HLO_OP_BITCAST:
    if (hlo_shape_layout_is_default(&ins->shape) && hlo_shape_layout_is_default(&ins->operands[0]->shape))
      return pd_reshape(P, ins);
    return pd_static_only(P, ins, "a bitcast that changes the layout");
  case HLO_OP_TRANSPOSE: return pd_transpose(P, ins);
  case HLO_OP_SLICE: return pd_slice(P, ins);
  case HLO_OP_DYNAMIC_SLICE: return pd_dynamic_slice(P, ins);
  case HLO_OP_DYNAMIC_UPDATE_SLICE: return pd_dynamic_update_slice(P, ins);
  case HLO_OP_CONCATENATE: return pd_concatenate(P, ins);
  case HLO_OP_PAD: return pd_pad(P, ins);
  case HLO_OP_REVERSE: return pd_reverse(P, ins);
  case HLO_OP_GATHER: return pd_gather(P, ins);
  case HLO_OP_REDUCE: return pd_reduce(P, ins);
  case HLO_OP_REDUCE_WINDOW: return pd_reduce_window(P, ins);
  case HLO_OP_DOT: return pd_dot(P, ins);
  case HLO_OP_SORT: return pd_sort(P, ins);
  case HLO_OP_TUPLE: return pd_tuple(P, ins);
  case HLO_OP_GET_TUPLE_ELEMENT: return pd_gte(P, ins);
  case HLO_OP_OPT_BARRIER: {
    pd_val *v = pd_new_val(P, ins), *o = pd_get(P, ins->operands[0]);
    if (!v || !o) return HJ_ERR_OOM;
    for (int k = 0; k < v->n && k < o->n; k++) v->leaf[k] = o->leaf[k];
    return HJ_OK;
  }
  case HLO_OP_GET_DIMENSION_SIZE: return pd_get_dimension_size(P, ins);
  case HLO_OP_MAP: return pd_elementwise(P, ins);
  case HLO_OP_BITCAST_CONVERT:
    if (hlo_op_is_elementwise(ins)) return pd_elementwise(P, ins);
    return pd_static_only(P, ins, "a bitcast-convert that changes the element width");
  case HLO_OP_SCATTER: return pd_static_only(P, ins, "scatter");
  case HLO_OP_WHILE: case HLO_OP_CONDITIONAL: case HLO_OP_CALL: case HLO_OP_FUSION:
    return pd_static_only(P, ins, "control flow and fusions carry static shapes only");
  default:
    if (hlo_op_is_elementwise(ins)) return pd_elementwise(P, ins);
    return pd_static_only(P, ins, "no rule for this op");
  }
}

/* ---- the driver --------------------------------------------------------------------------- */

static hj_status pd_params(pd_ctx *P) {
  hlo_comp *c = P->c;
  int np = (int)arrlen(c->params);
  P->info->nparams = np;
  for (int p = 0; p < np; p++) {
    hlo_instr *prm = c->params[p];
    pd_val *v = pd_new_val(P, prm);
    if (!v) return HJ_ERR_OOM;
    for (int k = 0; k < v->n; k++) v->leaf[k].zp = true;
    if (!hlo_shape_is_array(&prm->shape)) {
      for (int k = 0; k < prm->shape.ntuple; k++)
        for (int d = 0; d < prm->shape.tuple[k].rank; d++)
          if (prm->shape.tuple[k].dynamic[d])
            return pd_unsup(P, prm, "a tuple parameter with a dynamic dim (pass its elements as parameters)");
      continue;
    }
    for (int d = 0; d < prm->shape.rank; d++) {
      if (!prm->shape.dynamic[d]) continue;
      char name[160];
      snprintf(name, sizeof name, "%s.size%d", prm->name, d);
      hlo_shape s = hlo_shape_scalar(HLO_S32);
      hlo_instr *sp = hlo_instr_new(c, HLO_OP_PARAMETER, name, &s, NULL, 0);
      if (!sp || !pd_new_val(P, sp)) return HJ_ERR_OOM;
      sp->index = arrlen(c->params);
      arrput(c->params, sp);
      pass_dyn_param dp = { p, d, (int)sp->index };
      arrput(P->info->params, dp);
      v->leaf[0].size[d] = sp;
    }
  }
  return HJ_OK;
}

static int pd_size_param_index(pd_ctx *P, const hlo_instr *s) {
  for (ptrdiff_t i = 0; i < arrlen(P->info->params); i++)
    if (P->c->params[P->info->params[i].size_param] == s) return P->info->params[i].size_param;
  return -1;
}

/* The outputs: where each dynamic dim's real size is; sizes that are not parameters are
   appended to the root tuple. */
static hj_status pd_outputs(pd_ctx *P) {
  hlo_comp *c = P->c;
  hlo_instr *root = c->root, **elems = NULL, **extra = NULL;
  hj_status st = HJ_OK;
  bool tuple = root->shape.type == HLO_TUPLE;
  int n = tuple ? root->shape.ntuple : 1;
  pd_val *rv = pd_get(P, root);
  for (int k = 0; k < n && st == HJ_OK; k++) {
    const hlo_shape *ls = tuple ? &root->shape.tuple[k] : &root->shape;
    if (!hlo_shape_is_array(ls)) {
      st = pd_unsup(P, root, "the result has nested tuples");
      break;
    }
    hlo_instr *e = root;
    if (tuple && root->op == HLO_OP_TUPLE) e = root->operands[k];
    else if (tuple) {
      hlo_shape es = *ls;
      if ((e = pd_new(P, HLO_OP_GET_TUPLE_ELEMENT, &es, &root, 1))) e->index = k;
      else st = HJ_ERR_OOM;
    }
    arrput(elems, e);
    const pd_leaf *l = &rv->leaf[k];
    for (int d = 0; d < ls->rank && st == HJ_OK; d++) {
      if (!l->size[d]) continue;
      if (l->size[d] == PD_UNKNOWN) {
        st = pd_unsup(P, root, "the real size of dim %d of output %d is unknown", d, k);
        break;
      }
      pass_dyn_out o = { k, d, pd_size_param_index(P, l->size[d]), -1 };
      if (o.size_param < 0) {
        for (ptrdiff_t i = 0; i < arrlen(extra) && o.size_output < 0; i++)
          if (extra[i] == l->size[d]) o.size_output = n + (int)i;
        if (o.size_output < 0) {
          o.size_output = n + (int)arrlen(extra);
          arrput(extra, l->size[d]);
        }
      }
      arrput(P->info->outs, o);
    }
  }
  P->info->noutputs = n;
  P->info->nsize_outputs = (int)arrlen(extra);
  if (st == HJ_OK && arrlen(extra) > 0) {
    for (ptrdiff_t i = 0; i < arrlen(extra); i++) arrput(elems, extra[i]);
    int ne = (int)arrlen(elems);
    hlo_shape ts = { .type = HLO_TUPLE, .ntuple = ne };
    ts.tuple = hlo_alloc(P->m, sizeof(hlo_shape) * (size_t)ne);
    for (int i = 0; ts.tuple && i < ne; i++) ts.tuple[i] = elems[i]->shape;
    hlo_instr *t = ts.tuple ? pd_new(P, HLO_OP_TUPLE, &ts, elems, ne) : NULL;
    if (t) hlo_comp_set_root(c, t);
    else st = HJ_ERR_OOM;
  }
  arrfree(elems);
  arrfree(extra);
  return st;
}

static void pd_clear_flags(hlo_shape *s) {
  memset(s->dynamic, 0, sizeof s->dynamic);
  for (int k = 0; k < s->ntuple && s->tuple; k++) pd_clear_flags(&s->tuple[k]);
}

hj_status hlo_pass_dynamic_pad(hlo_pass_ctx *pc, hlo_module *m, bool *changed) {
  if (changed) *changed = true;
  if (!pc || !pc->dyn_info) return hj__err(m ? m->ctx : NULL, HJ_ERR_INTERNAL, "dynamic pad: no dyn_info");
  pass_dyn_info *info = pc->dyn_info;
  memset(info, 0, sizeof *info);
  if (!m || !m->entry) return hj__err(m ? m->ctx : NULL, HJ_ERR_INVALID_ARG, "dynamic padder: no entry");
  bool ch;
  hj_status st = hlo_pass_inline_calls(NULL, m, &ch);
  if (st != HJ_OK) return st;
  pd_ctx P = { .m = m, .c = m->entry, .ctx = m->ctx, .info = info };
  hlo_instr **snap = NULL;
  for (ptrdiff_t i = 0; i < arrlen(P.c->instrs); i++) arrput(snap, P.c->instrs[i]);
  st = pd_params(&P);
  for (ptrdiff_t i = 0; i < arrlen(snap) && st == HJ_OK; i++) st = pd_instr(&P, snap[i]);
  arrfree(snap);
  if (st == HJ_OK) st = pd_outputs(&P);
  hmfree(P.vals);
  if (st == HJ_OK) st = hlo_comp_topo_sort(P.c);
  if (st == HJ_OK) st = hlo_comp_dce(P.c, &ch);
  for (ptrdiff_t i = 0; st == HJ_OK && i < arrlen(m->comps); i++)
    for (ptrdiff_t j = 0; j < arrlen(m->comps[i]->instrs); j++) pd_clear_flags(&m->comps[i]->instrs[j]->shape);
  if (st == HJ_OK) st = hlo_verify_module(m);
  if (st != HJ_OK && st != HJ_ERR_UNSUPPORTED && st != HJ_ERR_OOM && !hj__ctx_err(m->ctx)[0])
    hj__err(m->ctx, st, "dynamic padder: failed");
  return st;
}

void pass_dyn_info_free(pass_dyn_info *info) {
  if (!info) return;
  arrfree(info->params);
  arrfree(info->outs);
  memset(info, 0, sizeof *info);
}

/* The pipeline's line: a module compiled on its own runs at its bounds, so every
   get-dimension-size reads the bound (the static size for a static dim). */
hj_status hlo_pass_dynamic_padder(hlo_pass_ctx *pc, hlo_module *m, bool *changed) {
  *changed = false;
  for (ptrdiff_t i = 0; i < arrlen(m->comps); i++) {
    hlo_comp *c = m->comps[i];
    hlo_instr **gds = NULL;
    for (ptrdiff_t j = 0; j < arrlen(c->instrs); j++)
      if (c->instrs[j]->op == HLO_OP_GET_DIMENSION_SIZE) arrput(gds, c->instrs[j]);
    hj_status st = HJ_OK;
    for (ptrdiff_t j = 0; j < arrlen(gds) && st == HJ_OK; j++) {
      hlo_instr *g = gds[j];
      hlo_shape s = hlo_shape_scalar(HLO_S32);
      hlo_literal *l = hlo_literal_new(m->ctx, &s);
      hlo_instr *k = NULL;
      if (l) {
        *(int32_t *)l->data = (int32_t)g->operands[0]->shape.dims[g->dims.v[0]];
        k = hlo_constant_new_before(c, g, l);
        hlo_literal_free(l);
      }
      if (!k) st = HJ_ERR_OOM;
      else hlo_replace_all_uses(c, g, k);
    }
    bool ch;
    if (st == HJ_OK && arrlen(gds) > 0) st = hlo_comp_dce(c, &ch);
    *changed |= arrlen(gds) > 0;
    arrfree(gds);
    if (st != HJ_OK) return st;
  }
  return HJ_OK;
}
