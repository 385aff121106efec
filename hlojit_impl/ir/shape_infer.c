/* shape_infer.c — the result shape of an instruction from its operands, attributes and
   called computations, with the rules of XLA's shape_inference.cc and HloVerifier.

   Invariants and conventions:
   - HLO has no implicit broadcast: elementwise operands have equal dimensions (the bounds
     of bounded dynamic dims), and equal element types (XLA's verifier disallows mixed
     precision by default). The only op whose result type is not derived from its operands
     is dot, which takes its declared type as XLA's preferred_element_type.
   - Ops whose result cannot be derived from the operands alone (parameter, constant
     without a literal, iota, broadcast, reshape, bitcast, and the target type of convert
     and bitcast-convert) return their declared shape after checking it against the
     operands. An instruction parsed without a shape carries a zeroed shape (pred[]); when
     such a shape fails the checks the message says that a declared shape is needed.
   - Bounded dynamic dims (`<=N`) propagate: a result dim is dynamic when the operand dims
     it comes from are (elementwise: either operand; concatenate: any operand).
   - Array results get the default layout; tuple results are built in the module's arena
     and their elements keep the operands' layouts (layouts never matter to compatibility).
   - Called computations are checked here too (the reducer's 2N scalar parameters, a sort
     comparator returning pred[], while's condition and body, conditional branches), so the
     parser, the builder and the verifier all get the same checks.
   - Every message starts "op 'NAME' (instr): " and names the shapes involved.
   - Extents come from core.c's checked helpers (hlo_slice_count, hlo_pad_dim,
     hlo_window_dim), and every result, declared or derived, passes hlo_shape_check (at
     most 2^53 elements, the parser's bound), so no inferred shape overflows downstream.
   The indexing ops (dynamic-slice, dynamic-update-slice, gather, scatter) are in
   shape_infer_index.c, reduce, reduce-window, dot and sort in shape_infer_reduce.c; the
   hlo_si_* helpers here are what they share (shape_infer_internal.h). */
#include "shape_infer_internal.h"

const char *hlo_si_str(hlo_si_cx *c, int k, const hlo_shape *s) {
  return hlo_shape_str(s, c->buf[k], sizeof c->buf[k]);
}

__attribute__((format(printf, 2, 3)))
hj_status hlo_si_err(hlo_si_cx *c, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return hj__err(c->ctx, HJ_ERR_SHAPE, "op '%s' (%s): %s", hlo_opcode_name(c->ins->op),
                 c->ins->name ? c->ins->name : "?", msg);
}

const hlo_shape *hlo_si_op(hlo_si_cx *c, int i) { return &c->ins->operands[i]->shape; }

/* A shape-less parse leaves a zeroed shape: pred[] without a layout. */
bool hlo_si_unset(const hlo_shape *s) {
  return s->type == HLO_PRED && s->rank == 0 && !s->has_layout && s->ntuple == 0;
}

/* For ops that return their declared shape: when that shape is the zeroed one, the check
   that failed is a consequence of the missing shape; say so instead. */
__attribute__((format(printf, 2, 3)))
static hj_status si_decl_err(hlo_si_cx *c, const char *fmt, ...) {
  if (hlo_si_unset(&c->ins->shape))
    return hlo_si_err(c, "cannot infer the shape of '%s' without a declared shape",
                      hlo_opcode_name(c->ins->op));
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return hlo_si_err(c, "%s", msg);
}

hj_status hlo_si_nops(hlo_si_cx *c, int n) {
  if (c->ins->noperands != n)
    return hlo_si_err(c, "expects %d operand%s, got %d", n, n == 1 ? "" : "s", c->ins->noperands);
  return HJ_OK;
}

hj_status hlo_si_array(hlo_si_cx *c, int i) {
  const hlo_shape *s = hlo_si_op(c, i);
  if (!hlo_shape_is_array(s))
    return hlo_si_err(c, "operand %d must be an array, got %s", i, hlo_si_str(c, 0, s));
  return HJ_OK;
}

hlo_shape hlo_si_result(const hlo_shape *s) {
  hlo_shape r = *s;
  if (hlo_shape_is_array(&r)) hlo_shape_set_default_layout(&r);
  return r;
}

hlo_shape hlo_si_with_type(const hlo_shape *s, hlo_type t) {
  hlo_shape r = hlo_si_result(s);
  r.type = t;
  return r;
}

/* |v| holds distinct values in [0, n); |sorted|: also strictly increasing. */
bool hlo_si_dims_ok(hlo_ints v, int64_t n, bool sorted) {
  for (int i = 0; i < v.n; i++) {
    if (v.v[i] < 0 || v.v[i] >= n) return false;
    for (int j = 0; j < i; j++)
      if (v.v[j] == v.v[i] || (sorted && v.v[j] > v.v[i])) return false;
  }
  return true;
}

const char *hlo_si_ints_str(hlo_ints v, char *buf, size_t n) {
  size_t k = 0;
  k += (size_t)snprintf(buf, n, "{");
  for (int i = 0; i < v.n && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)v.v[i]);
  if (k < n) snprintf(buf + k, n - k, "}");
  return buf;
}

/* A tuple of |n| shapes in the module's arena (|elems| NULL: the caller fills them). */
hj_status hlo_si_tuple(hlo_si_cx *c, const hlo_shape *elems, int n, hlo_shape *out) {
  hlo_shape r = { .type = HLO_TUPLE, .ntuple = n };
  if (n > 0) {
    if (!c->ins->parent) return hlo_si_err(c, "instruction belongs to no computation");
    r.tuple = hlo_alloc(c->ins->parent->module, sizeof(hlo_shape) * (size_t)n);
    if (!r.tuple) return hj__err(c->ctx, HJ_ERR_OOM, "out of memory inferring a tuple shape");
    if (elems) memcpy(r.tuple, elems, sizeof(hlo_shape) * (size_t)n);
  }
  *out = r;
  return HJ_OK;
}

/* ---- called computations ------------------------------------------------------------------ */

hj_status hlo_si_callee(hlo_si_cx *c, int i, const hlo_comp **out) {
  if (i >= c->ins->ncalls || !c->ins->calls[i])
    return hlo_si_err(c, "expects %d called computation%s, got %d", i + 1, i ? "s" : "",
                      c->ins->ncalls);
  const hlo_comp *k = c->ins->calls[i];
  if (!k->root) return hlo_si_err(c, "called computation '%s' has no root", k->name);
  for (ptrdiff_t p = 0; p < arrlen(k->params); p++)
    if (!k->params[p])
      return hlo_si_err(c, "called computation '%s' lacks parameter %d", k->name, (int)p);
  *out = k;
  return HJ_OK;
}

/* |k| takes exactly the |n| shapes |want| (layouts ignored). */
hj_status hlo_si_sig(hlo_si_cx *c, const hlo_comp *k, const hlo_shape *const *want, int n) {
  if (arrlen(k->params) != n)
    return hlo_si_err(c, "computation '%s' takes %d parameters, expected %d", k->name,
                      (int)arrlen(k->params), n);
  for (int i = 0; i < n; i++)
    if (!hlo_shape_compatible(&k->params[i]->shape, want[i]))
      return hlo_si_err(c, "computation '%s' parameter %d is %s, expected %s", k->name, i,
                        hlo_si_str(c, 0, &k->params[i]->shape), hlo_si_str(c, 1, want[i]));
  return HJ_OK;
}

/* A reducer (reduce, reduce-window, scatter): 2N scalar parameters of |types| twice,
   returning one scalar (N == 1) or a tuple of N scalars of |types|. */
hj_status hlo_si_reducer(hlo_si_cx *c, int ci, const hlo_type *types, int n) {
  const hlo_comp *k;
  hj_status st = hlo_si_callee(c, ci, &k);
  if (st) return st;
  hlo_shape sc[2 * HLO_MAX_RANK + 64];
  const hlo_shape *want[2 * HLO_MAX_RANK + 64];
  if (2 * n > (int)(sizeof sc / sizeof sc[0])) return hlo_si_err(c, "too many operands (%d)", n);
  for (int i = 0; i < 2 * n; i++) {
    sc[i] = hlo_shape_scalar(types[i % n]);
    want[i] = &sc[i];
  }
  if ((st = hlo_si_sig(c, k, want, 2 * n))) return st;
  const hlo_shape *r = &k->root->shape;
  bool ok = n == 1 ? hlo_shape_compatible(r, &sc[0]) : r->type == HLO_TUPLE && r->ntuple == n;
  for (int i = 0; ok && n > 1 && i < n; i++) ok = hlo_shape_compatible(&r->tuple[i], &sc[i]);
  if (!ok) return hlo_si_err(c, "computation '%s' returns %s, expected %d scalar%s of the operand types",
                             k->name, hlo_si_str(c, 0, r), n, n == 1 ? "" : "s in a tuple");
  return HJ_OK;
}

/* ---- elementwise ------------------------------------------------------------------------- */

static hj_status si_unary(hlo_si_cx *c, hlo_shape *out) {
  hj_status st = hlo_si_nops(c, 1);
  if (st) return st;
  const hlo_shape *a = hlo_si_op(c, 0);
  if (c->ins->op == HLO_OP_COPY) { *out = hlo_si_result(a); return HJ_OK; }
  if ((st = hlo_si_array(c, 0))) return st;
  const char *want;
  bool ok = hlo_types_admit(hlo_opcode_types(c->ins->op), a->type, &want);
  if (!ok) return hlo_si_err(c, "element type must be %s, got %s", want, hlo_si_str(c, 0, a));
  const hlo_instr *x = c->ins;
  if (x->op == HLO_OP_REDUCE_PRECISION &&
      (x->exponent_bits < 1 || x->exponent_bits > 64 || x->mantissa_bits < 0 || x->mantissa_bits > 64))
    return hlo_si_err(c, "exponent_bits %lld must be in [1, 64] and mantissa_bits %lld in [0, 64]",
                      (long long)x->exponent_bits, (long long)x->mantissa_bits);
  *out = hlo_si_with_type(a, c->ins->op == HLO_OP_IS_FINITE ? HLO_PRED : a->type);
  return HJ_OK;
}

/* Equal dims and types; the result's dims are dynamic where either operand's is. */
static hj_status si_same(hlo_si_cx *c, int i, int j, hlo_shape *acc) {
  const hlo_shape *a = hlo_si_op(c, i), *b = hlo_si_op(c, j);
  if (!hlo_same_dims(a, b))
    return hlo_si_err(c, "operand shapes differ: %s vs %s (no implicit broadcast in HLO)",
                      hlo_si_str(c, 0, a), hlo_si_str(c, 1, b));
  if (a->type != b->type)
    return hlo_si_err(c, "element types differ: %s vs %s", hlo_si_str(c, 0, a), hlo_si_str(c, 1, b));
  for (int d = 0; d < a->rank; d++) acc->dynamic[d] |= b->dynamic[d];
  return HJ_OK;
}

static hj_status si_binary(hlo_si_cx *c, hlo_shape *out) {
  hj_status st = hlo_si_nops(c, 2);
  if (!st) st = hlo_si_array(c, 0);
  if (!st) st = hlo_si_array(c, 1);
  if (st) return st;
  hlo_shape r = hlo_si_result(hlo_si_op(c, 0));
  if ((st = si_same(c, 0, 1, &r))) return st;
  hlo_type_class k = hlo_type_class_of(r.type);
  const char *want;
  if (!hlo_types_admit(hlo_opcode_types(c->ins->op), r.type, &want))
    return hlo_si_err(c, "operands must be %s, got %s", want, hlo_si_str(c, 0, &r));
  switch (c->ins->op) {
  case HLO_OP_COMPARE: {
    hlo_cmp_type t = c->ins->cmp_type;
    bool ok = t == HLO_CMPT_DEFAULT || ((t == HLO_CMPT_FLOAT || t == HLO_CMPT_TOTALORDER) && k == HLO_CLASS_FLOAT) ||
              (t == HLO_CMPT_SIGNED && k == HLO_CLASS_SINT) ||
              (t == HLO_CMPT_UNSIGNED && (k == HLO_CLASS_UINT || k == HLO_CLASS_PRED));
    if (!ok) return hlo_si_err(c, "comparison type %s does not fit %s", hlo_cmp_type_name(t), hlo_si_str(c, 0, &r));
    if ((unsigned)c->ins->cmp_dir >= HLO_CMP_COUNT) return hlo_si_err(c, "bad comparison direction");
    r.type = HLO_PRED;
    break;
  }
  default: break;
  }
  *out = r;
  return HJ_OK;
}

static hj_status si_select(hlo_si_cx *c, hlo_shape *out) {
  hj_status st = hlo_si_nops(c, 3);
  for (int i = 0; !st && i < 3; i++) st = hlo_si_array(c, i);
  if (st) return st;
  const hlo_shape *p = hlo_si_op(c, 0), *t = hlo_si_op(c, 1);
  hlo_shape r = hlo_si_result(t);
  if ((st = si_same(c, 1, 2, &r))) return st;
  if (p->type != HLO_PRED) return hlo_si_err(c, "predicate must be pred, got %s", hlo_si_str(c, 0, p));
  if (p->rank != 0 && !hlo_same_dims(p, t))
    return hlo_si_err(c, "predicate %s must be a scalar or match %s", hlo_si_str(c, 0, p), hlo_si_str(c, 1, t));
  for (int d = 0; d < p->rank; d++) r.dynamic[d] |= p->dynamic[d];
  *out = r;
  return HJ_OK;
}

static hj_status si_clamp(hlo_si_cx *c, hlo_shape *out) {
  hj_status st = hlo_si_nops(c, 3);
  for (int i = 0; !st && i < 3; i++) st = hlo_si_array(c, i);
  if (st) return st;
  const hlo_shape *x = hlo_si_op(c, 1);
  for (int i = 0; i < 3; i += 2) {
    const hlo_shape *b = hlo_si_op(c, i);
    if (b->type != x->type || (b->rank != 0 && !hlo_same_dims(b, x)))
      return hlo_si_err(c, "%s bound %s must be a scalar or match the operand %s with its type",
                        i ? "max" : "min", hlo_si_str(c, 0, b), hlo_si_str(c, 1, x));
  }
  *out = hlo_si_result(x);
  return HJ_OK;
}

static hj_status si_convert(hlo_si_cx *c, hlo_shape *out) {
  hj_status st = hlo_si_nops(c, 1);
  if (!st) st = hlo_si_array(c, 0);
  if (st) return st;
  const hlo_shape *a = hlo_si_op(c, 0), *d = &c->ins->shape;
  if (!hlo_shape_is_array(d) || (hlo_si_unset(d) && a->rank != 0))
    return si_decl_err(c, "target %s must be an array type", hlo_si_str(c, 0, d));
  if (c->ins->op == HLO_OP_BITCAST_CONVERT) {
    bool pa = a->type == HLO_PRED, pd = d->type == HLO_PRED;   /* pred is 1 bit wide */
    int wa = hlo_type_size(a->type), wd = hlo_type_size(d->type);
    if (pa != pd)
      return si_decl_err(c, "pred can only be bitcast to pred (%s to %s)", hlo_si_str(c, 0, a),
                         hlo_type_name(d->type));
    /* XLA: a wider source gains a minor dim of size wa/wd; a narrower one loses its minor
       dim, which must be wd/wa. */
    if (wa > wd) {
      if (a->rank >= HLO_MAX_RANK)
        return hlo_si_err(c, "bitcast-convert of %s to %s would exceed rank %d",
                          hlo_si_str(c, 0, a), hlo_type_name(d->type), HLO_MAX_RANK);
      *out = hlo_si_with_type(a, d->type);
      out->dims[out->rank] = wa / wd;
      out->dynamic[out->rank] = false;
      out->rank++;
      hlo_shape_set_default_layout(out);
      return HJ_OK;
    }
    if (wa < wd) {
      if (a->rank == 0 || a->dims[a->rank - 1] != wd / wa || a->dynamic[a->rank - 1])
        return hlo_si_err(c, "bitcast-convert of %s to %s needs a minor dim of %d",
                          hlo_si_str(c, 0, a), hlo_type_name(d->type), wd / wa);
      *out = hlo_si_with_type(a, d->type);
      out->rank--;
      hlo_shape_set_default_layout(out);
      return HJ_OK;
    }
  }
  *out = hlo_si_with_type(a, d->type);
  return HJ_OK;
}

static hj_status si_map(hlo_si_cx *c, hlo_shape *out) {
  int n = c->ins->noperands;
  if (n < 1) return hlo_si_err(c, "expects at least one operand");
  hj_status st = hlo_si_array(c, 0);
  hlo_shape r = hlo_si_result(hlo_si_op(c, 0));
  const hlo_shape *want[64];
  hlo_shape sc[64];
  if (n > 64) return hlo_si_err(c, "too many operands (%d)", n);
  for (int i = 0; !st && i < n; i++) {
    if ((st = hlo_si_array(c, i))) break;
    const hlo_shape *b = hlo_si_op(c, i);
    if (!hlo_same_dims(b, &r))
      return hlo_si_err(c, "operand shapes differ: %s vs %s", hlo_si_str(c, 0, &r), hlo_si_str(c, 1, b));
    for (int d = 0; d < r.rank; d++) r.dynamic[d] |= b->dynamic[d];
    sc[i] = hlo_shape_scalar(b->type);
    want[i] = &sc[i];
  }
  if (st) return st;
  hlo_ints dims = c->ins->dims;
  for (int i = 0; i < dims.n; i++)
    if (dims.n != r.rank || dims.v[i] != i)
      return hlo_si_err(c, "dimensions must be all of 0..%d in order", r.rank - 1);
  const hlo_comp *k;
  if ((st = hlo_si_callee(c, 0, &k)) || (st = hlo_si_sig(c, k, want, n))) return st;
  const hlo_shape *kr = &k->root->shape;
  if (!hlo_shape_is_array(kr) || kr->rank != 0)
    return hlo_si_err(c, "computation '%s' must return a scalar, returns %s", k->name, hlo_si_str(c, 0, kr));
  r.type = kr->type;
  *out = r;
  return HJ_OK;
}

/* Shape ops, reductions and control flow: below; indexing ops: shape_infer_index.c. */
static hj_status si_shape_op(hlo_si_cx *c, hlo_shape *out);
static hj_status si_control(hlo_si_cx *c, hlo_shape *out);

/* topk: the k largest (or smallest) of the last dim, and their indices: (T[..., k], s32[..., k]). */
static hj_status si_topk(hlo_si_cx *c, hlo_shape *out) {
  hj_status st = hlo_si_nops(c, 1);
  if (!st) st = hlo_si_array(c, 0);
  if (st) return st;
  const hlo_shape *a = hlo_si_op(c, 0);
  if (a->rank < 1 || c->ins->k < 0 || c->ins->k > a->dims[a->rank - 1])
    return hlo_si_err(c, "k=%lld needs rank >= 1 and k <= the last dim of %s", (long long)c->ins->k,
                      hlo_si_str(c, 0, a));
  hlo_shape res[2] = { hlo_si_result(a), hlo_si_result(a) };
  res[0].dims[a->rank - 1] = res[1].dims[a->rank - 1] = c->ins->k;
  res[0].dynamic[a->rank - 1] = res[1].dynamic[a->rank - 1] = false;
  res[1].type = HLO_S32;
  return hlo_si_tuple(c, res, 2, out);
}

/* custom-call to a LAPACK target (ir.h): matrices in the last two dims, batch dims before
   (info: s32[batch]; k = min(m, n)). s* targets f32, d* f64.
     potrf(a[.., n, n]) -> (a, info)          getrf(a[.., m, n]) -> (a, s32[.., k] ipiv, info)
     trsm(a[.., k, k], b[.., m, n]) -> b, k = m (side 'L') or n ('R')
     geqrf(a[.., m, n]) -> (a, tau[.., k])    orgqr(a[.., m, n], tau[.., k]) -> a, m >= n >= k
     syevd(a[.., n, n]) -> (a (eigenvectors), w[.., n], info)
     gesdd(a[.., m, n]) -> (a, s[.., k], u[.., m, m | k], vt[.., n | k, n], info): mode 'S'
       (economy) k, else ('A', 'N': the full shapes JAX declares) m and n. */
static hj_status si_custom(hlo_si_cx *c, hlo_shape *out) {
  const hlo_custom_call *cc = &c->ins->custom;
  int64_t t = cc->target;
  if (t <= HLO_CUSTOM_NONE || t >= HLO_CUSTOM_COUNT) return hlo_si_err(c, "custom-call without a known target");
  hlo_lapack_op op = hlo_custom_lapack_op(t);
  hlo_type ft = hlo_custom_is_f64(t) ? HLO_F64 : HLO_F32;
  int nops = op == HLO_LAPACK_TRSM || op == HLO_LAPACK_ORGQR ? 2 : 1;
  hj_status st = hlo_si_nops(c, nops);
  for (int k = 0; k < nops && !st; k++) st = hlo_si_array(c, k);
  if (st) return st;
  const hlo_shape *a = hlo_si_op(c, 0);
  int r = a->rank;
  if (a->type != ft || r < 2)
    return hlo_si_err(c, "%s takes %s matrices (rank >= 2), not %s", hlo_custom_target_name(t), hlo_type_name(ft),
                      hlo_si_str(c, 0, a));
  int64_t m = a->dims[r - 2], n = a->dims[r - 1], k = m < n ? m : n;
  bool square = op == HLO_LAPACK_POTRF || op == HLO_LAPACK_TRSM || op == HLO_LAPACK_SYEVD;
  if (square && m != n) return hlo_si_err(c, "%s needs square matrices, not %s", hlo_custom_target_name(t), hlo_si_str(c, 0, a));
  /* batch-shaped pieces: info, and vectors / matrices with the batch dims in front */
  hlo_shape info = hlo_shape_array(HLO_S32, r - 2, a->dims), vec = hlo_shape_array(ft, r - 1, a->dims);
  vec.dims[r - 2] = k;
  hlo_shape el[5] = { hlo_si_result(a) };
  switch (op) {
  case HLO_LAPACK_POTRF: el[1] = info; return hlo_si_tuple(c, el, 2, out);
  case HLO_LAPACK_GETRF:
    el[1] = vec, el[1].type = HLO_S32, el[2] = info;
    return hlo_si_tuple(c, el, 3, out);
  case HLO_LAPACK_GEQRF: el[1] = vec; return hlo_si_tuple(c, el, 2, out);
  case HLO_LAPACK_SYEVD: el[1] = vec, el[2] = info; return hlo_si_tuple(c, el, 3, out);
  case HLO_LAPACK_GESDD: {
    bool econ = cc->mode == 'S';
    el[1] = vec;
    el[2] = hlo_shape_array(ft, r, a->dims), el[3] = hlo_shape_array(ft, r, a->dims);
    el[2].dims[r - 2] = m, el[2].dims[r - 1] = econ ? k : m;
    el[3].dims[r - 2] = econ ? k : n, el[3].dims[r - 1] = n;
    el[4] = info;
    return hlo_si_tuple(c, el, 5, out);
  }
  case HLO_LAPACK_ORGQR: case HLO_LAPACK_TRSM: break;
  }
  const hlo_shape *b = hlo_si_op(c, 1);
  if (op == HLO_LAPACK_ORGQR) {
    if (b->type != ft || b->rank != r - 1 || b->dims[r - 2] > n || n > m)
      return hlo_si_err(c, "orgqr: %s and tau %s do not fit (m >= n >= k)", hlo_si_str(c, 0, a), hlo_si_str(c, 1, b));
  } else {
    bool left = cc->side != 'R';
    if (b->type != ft || b->rank != r || n != b->dims[left ? r - 2 : r - 1])
      return hlo_si_err(c, "trsm: %s and %s do not fit (side %c)", hlo_si_str(c, 0, a), hlo_si_str(c, 1, b),
                        left ? 'L' : 'R');
  }
  for (int i = 0; i < r - 2; i++)
    if (a->dims[i] != b->dims[i])
      return hlo_si_err(c, "%s: batch dims of %s and %s differ", hlo_custom_target_name(t), hlo_si_str(c, 0, a),
                        hlo_si_str(c, 1, b));
  *out = op == HLO_LAPACK_TRSM ? hlo_si_result(b) : hlo_si_result(a);
  return HJ_OK;
}

/* rng-bit-generator(state): the declared (state, bits) tuple, state u64[2] (three-fry) or
   u64[2] / u64[3] (philox) and unchanged, bits an integer array of 8 to 64 bits. */
static hj_status si_rng(hlo_si_cx *c, hlo_shape *out) {
  hj_status st = hlo_si_nops(c, 1);
  if (!st) st = hlo_si_array(c, 0);
  if (st) return st;
  const hlo_shape *s = hlo_si_op(c, 0), *d = &c->ins->shape;
  int64_t alg = c->ins->rng_algorithm;
  int64_t want = alg == HLO_RNG_THREE_FRY ? 2 : s->rank == 1 && s->dims[0] == 3 ? 3 : 2;
  if (s->type != HLO_U64 || s->rank != 1 || s->dims[0] != want || alg < 0 || alg >= HLO_RNG_COUNT)
    return hlo_si_err(c, "the state must be u64[2] (u64[2] or u64[3] for philox), not %s", hlo_si_str(c, 0, s));
  if (d->type != HLO_TUPLE || d->ntuple != 2 || !hlo_shape_compatible(&d->tuple[0], s) ||
      !hlo_shape_is_array(&d->tuple[1]) || !hlo_type_is_int(d->tuple[1].type) || d->tuple[1].type == HLO_PRED)
    return hlo_si_err(c, "the result must be (%s, an integer array)", hlo_si_str(c, 0, s));
  hlo_shape el[2] = { hlo_si_result(s), hlo_si_result(&d->tuple[1]) };
  return hlo_si_tuple(c, el, 2, out);
}

static hj_status si_dispatch(hlo_si_cx *c, hlo_shape *out);

/* Every result, declared or derived, passes hlo_shape_check: this is what keeps a module
   whose attributes or declared shapes would make an element count overflow (or exceed
   2^53, the parser's bound, so that the text prints back) out of the evaluator, the
   passes and the emitters. */
hj_status hlo_infer_shape(hj_ctx_t *ctx, const hlo_instr *ins, hlo_shape *out) {
  hlo_si_cx c = { .ctx = ctx, .ins = ins };
  hlo_shape r;
  hj_status st = si_dispatch(&c, &r);
  if (st) return st;
  const char *why = hlo_shape_check(&r);
  if (why) return hlo_si_err(&c, "the result %s %s", hlo_si_str(&c, 0, &r), why);
  *out = r;
  return HJ_OK;
}

static hj_status si_dispatch(hlo_si_cx *c, hlo_shape *out) {
  const hlo_instr *ins = c->ins;
  for (int i = 0; i < ins->noperands; i++)
    if (!ins->operands || !ins->operands[i]) return hlo_si_err(c, "operand %d is missing", i);
  if ((unsigned)ins->op >= HLO_OP_COUNT) return hj__err(c->ctx, HJ_ERR_SHAPE, "bad opcode %d", (int)ins->op);
  switch (hlo_opcode_kind(ins->op)) {
  case HLO_KIND_UNARY: return si_unary(c, out);
  case HLO_KIND_BINARY: return si_binary(c, out);
  default: break;
  }
  switch (ins->op) {
  case HLO_OP_COPY: return si_unary(c, out);
  case HLO_OP_COMPARE: return si_binary(c, out);
  case HLO_OP_SELECT: return si_select(c, out);
  case HLO_OP_CLAMP: return si_clamp(c, out);
  case HLO_OP_CONVERT: case HLO_OP_BITCAST_CONVERT: return si_convert(c, out);
  case HLO_OP_MAP: return si_map(c, out);
  case HLO_OP_PARAMETER: case HLO_OP_CONSTANT: case HLO_OP_IOTA: case HLO_OP_BROADCAST:
  case HLO_OP_RESHAPE: case HLO_OP_BITCAST: case HLO_OP_TRANSPOSE: case HLO_OP_SLICE:
  case HLO_OP_CONCATENATE: case HLO_OP_PAD: case HLO_OP_REVERSE:
    return si_shape_op(c, out);
  case HLO_OP_DYNAMIC_SLICE: case HLO_OP_DYNAMIC_UPDATE_SLICE: case HLO_OP_GATHER:
  case HLO_OP_SCATTER:
    return hlo_si_index_op(c, out);
  case HLO_OP_REDUCE: case HLO_OP_REDUCE_WINDOW: case HLO_OP_DOT: case HLO_OP_SORT:
  case HLO_OP_CONVOLUTION: case HLO_OP_SELECT_AND_SCATTER:
    return hlo_si_reduce_like(c, out);
  case HLO_OP_TOPK: return si_topk(c, out);
  case HLO_OP_CUSTOM_CALL: return si_custom(c, out);
  case HLO_OP_RNG_BIT_GENERATOR: return si_rng(c, out);
  default: return si_control(c, out);
  }
}

/* ---- shape ops: parameter constant iota broadcast reshape bitcast transpose slice
        concatenate pad reverse ------------------------------------------------------------ */

static hj_status si_declared(hlo_si_cx *c, hlo_shape *out) {
  const hlo_shape *d = &c->ins->shape;
  if (c->ins->op == HLO_OP_CONSTANT && c->ins->literal) {
    *out = hlo_si_result(&c->ins->literal->shape);
    return HJ_OK;
  }
  if (c->ins->op == HLO_OP_IOTA) {
    if (!hlo_shape_is_array(d) || d->rank == 0 || c->ins->index < 0 || c->ins->index >= d->rank)
      return si_decl_err(c, "iota_dimension=%lld out of range for %s", (long long)c->ins->index,
                         hlo_si_str(c, 0, d));
  }
  *out = hlo_si_result(d);
  return HJ_OK;
}

static hj_status si_broadcast(hlo_si_cx *c, hlo_shape *out) {
  const hlo_shape *a = hlo_si_op(c, 0), *d = &c->ins->shape;
  hlo_ints dims = c->ins->dims;
  char b[128];
  if (!hlo_shape_is_array(d) || d->type != a->type)
    return si_decl_err(c, "result %s must be an array of the operand's type (operand %s)",
                       hlo_si_str(c, 0, d), hlo_si_str(c, 1, a));
  if (dims.n != a->rank || !hlo_si_dims_ok(dims, d->rank, false))
    return si_decl_err(c, "dimensions=%s must map each operand dim to a distinct result dim "
                       "(operand %s, result %s)", hlo_si_ints_str(dims, b, sizeof b),
                       hlo_si_str(c, 0, a), hlo_si_str(c, 1, d));
  hlo_shape r = hlo_si_result(d);
  for (int i = 0; i < a->rank; i++) {
    if (a->dims[i] != d->dims[dims.v[i]])
      return si_decl_err(c, "operand dim %d (size %lld) differs from result dim %lld (size %lld) "
                         "(operand %s, result %s)", i, (long long)a->dims[i], (long long)dims.v[i],
                         (long long)d->dims[dims.v[i]], hlo_si_str(c, 0, a), hlo_si_str(c, 1, d));
    r.dynamic[dims.v[i]] = a->dynamic[i];
  }
  *out = r;
  return HJ_OK;
}

static hj_status si_reshape(hlo_si_cx *c, hlo_shape *out) {
  const hlo_shape *a = hlo_si_op(c, 0), *d = &c->ins->shape;
  if (!hlo_shape_is_array(d))
    return si_decl_err(c, "result %s must be an array", hlo_si_str(c, 0, d));
  if (c->ins->op == HLO_OP_RESHAPE) {
    if (d->type != a->type || hlo_shape_numel(a) != hlo_shape_numel(d))
      return si_decl_err(c, "cannot reshape %s to %s (element count or type differs)",
                         hlo_si_str(c, 0, a), hlo_si_str(c, 1, d));
  } else if (hlo_shape_bytes(a) != hlo_shape_bytes(d)) {
    return si_decl_err(c, "bitcast changes the byte size: %s to %s", hlo_si_str(c, 0, a), hlo_si_str(c, 1, d));
  }
  *out = hlo_si_result(d);
  return HJ_OK;
}

static hj_status si_transpose(hlo_si_cx *c, hlo_shape *out) {
  const hlo_shape *a = hlo_si_op(c, 0);
  hlo_ints p = c->ins->dims;
  char b[128];
  if (p.n != a->rank || !hlo_si_dims_ok(p, a->rank, false))
    return hlo_si_err(c, "dimensions=%s is not a permutation of the dims of %s",
                      hlo_si_ints_str(p, b, sizeof b), hlo_si_str(c, 0, a));
  hlo_shape r = hlo_si_result(a);
  for (int i = 0; i < a->rank; i++) {
    r.dims[i] = a->dims[p.v[i]];
    r.dynamic[i] = a->dynamic[p.v[i]];
  }
  *out = r;
  return HJ_OK;
}

static hj_status si_slice(hlo_si_cx *c, hlo_shape *out) {
  const hlo_instr *ins = c->ins;
  const hlo_shape *a = hlo_si_op(c, 0);
  int n = a->rank;
  if (ins->slice_start.n != n || ins->slice_limit.n != n || (ins->slice_stride.n != n && ins->slice_stride.n))
    return hlo_si_err(c, "slice has %d dims, operand %s has %d", ins->slice_start.n, hlo_si_str(c, 0, a), n);
  hlo_shape r = hlo_si_result(a);
  for (int i = 0; i < n; i++) {
    int64_t s = ins->slice_start.v[i], l = ins->slice_limit.v[i];
    int64_t st = ins->slice_stride.n ? ins->slice_stride.v[i] : 1;
    if (s < 0 || s > l || l > a->dims[i] || st < 1)
      return hlo_si_err(c, "slice [%lld:%lld:%lld] out of bounds for dim %d of %s", (long long)s,
                        (long long)l, (long long)st, i, hlo_si_str(c, 0, a));
    r.dims[i] = hlo_slice_count(s, l, st);
    r.dynamic[i] = a->dynamic[i] && s == 0 && l == a->dims[i] && st == 1;
  }
  *out = r;
  return HJ_OK;
}

static hj_status si_concat(hlo_si_cx *c, hlo_shape *out) {
  int n = c->ins->noperands;
  if (n < 1) return hlo_si_err(c, "expects at least one operand");
  hj_status st;
  for (int i = 0; i < n; i++)
    if ((st = hlo_si_array(c, i))) return st;
  const hlo_shape *a = hlo_si_op(c, 0);
  if (c->ins->dims.n != 1 || c->ins->dims.v[0] < 0 || c->ins->dims.v[0] >= a->rank)
    return hlo_si_err(c, "needs one dimension in range for %s", hlo_si_str(c, 0, a));
  int64_t cd = c->ins->dims.v[0];
  hlo_shape r = hlo_si_result(a);
  for (int i = 1; i < n; i++) {
    const hlo_shape *b = hlo_si_op(c, i);
    bool ok = b->rank == a->rank && b->type == a->type;
    for (int d = 0; ok && d < a->rank; d++) ok = d == cd || b->dims[d] == a->dims[d];
    if (!ok)
      return hlo_si_err(c, "operand %d %s does not match %s outside dimension %lld", i,
                        hlo_si_str(c, 0, b), hlo_si_str(c, 1, a), (long long)cd);
    if (!hlo_add_ok(r.dims[cd], b->dims[cd], &r.dims[cd]))
      return hlo_si_err(c, "dimension %lld of the result overflows", (long long)cd);
    for (int d = 0; d < a->rank; d++) r.dynamic[d] |= b->dynamic[d];
  }
  *out = r;
  return HJ_OK;
}

static hj_status si_pad(hlo_si_cx *c, hlo_shape *out) {
  hj_status st = hlo_si_nops(c, 2);
  if (!st) st = hlo_si_array(c, 0);
  if (!st) st = hlo_si_array(c, 1);
  if (st) return st;
  const hlo_instr *ins = c->ins;
  const hlo_shape *a = hlo_si_op(c, 0), *v = hlo_si_op(c, 1);
  int n = a->rank;
  if (v->rank != 0 || v->type != a->type)
    return hlo_si_err(c, "padding value %s must be a scalar of the type of %s", hlo_si_str(c, 0, v),
                      hlo_si_str(c, 1, a));
  if (ins->pad_lo.n != n || ins->pad_hi.n != n || (ins->pad_interior.n != n && ins->pad_interior.n))
    return hlo_si_err(c, "padding has %d dims, operand %s has %d", ins->pad_lo.n, hlo_si_str(c, 0, a), n);
  hlo_shape r = hlo_si_result(a);
  for (int i = 0; i < n; i++) {
    int64_t in = ins->pad_interior.n ? ins->pad_interior.v[i] : 0, d;
    if (in < 0) return hlo_si_err(c, "negative interior padding %lld in dim %d", (long long)in, i);
    if (!hlo_pad_dim(a->dims[i], ins->pad_lo.v[i], ins->pad_hi.v[i], in, &d))
      return hlo_si_err(c, "padding %lld_%lld_%lld of dim %d of %s gives a negative or too large size",
                        (long long)ins->pad_lo.v[i], (long long)ins->pad_hi.v[i], (long long)in, i,
                        hlo_si_str(c, 0, a));
    r.dims[i] = d;
  }
  *out = r;
  return HJ_OK;
}

static hj_status si_shape_op(hlo_si_cx *c, hlo_shape *out) {
  hlo_opcode op = c->ins->op;
  if (op == HLO_OP_PARAMETER || op == HLO_OP_CONSTANT || op == HLO_OP_IOTA) {
    hj_status st = hlo_si_nops(c, 0);
    return st ? st : si_declared(c, out);
  }
  if (op == HLO_OP_CONCATENATE) return si_concat(c, out);
  if (op == HLO_OP_PAD) return si_pad(c, out);
  hj_status st = hlo_si_nops(c, 1);
  if (!st) st = hlo_si_array(c, 0);
  if (st) return st;
  switch (op) {
  case HLO_OP_BROADCAST: return si_broadcast(c, out);
  case HLO_OP_RESHAPE: case HLO_OP_BITCAST: return si_reshape(c, out);
  case HLO_OP_TRANSPOSE: return si_transpose(c, out);
  case HLO_OP_SLICE: return si_slice(c, out);
  default: {  /* reverse */
    char b[128];
    if (!hlo_si_dims_ok(c->ins->dims, hlo_si_op(c, 0)->rank, false))
      return hlo_si_err(c, "dimensions=%s out of range or repeated for %s",
                        hlo_si_ints_str(c->ins->dims, b, sizeof b), hlo_si_str(c, 0, hlo_si_op(c, 0)));
    *out = hlo_si_result(hlo_si_op(c, 0));
    return HJ_OK;
  }
  }
}

/* ---- tuples and control flow: tuple get-tuple-element call fusion while conditional
        opt-barrier ------------------------------------------------------------------------- */

/* |k| takes the operands [first, first+n) and returns its root's shape. */
static hj_status si_call_sig(hlo_si_cx *c, int ci, int first, int n, const hlo_shape **root) {
  const hlo_comp *k;
  const hlo_shape *want[256];
  if (n > 256) return hlo_si_err(c, "too many operands (%d)", n);
  for (int i = 0; i < n; i++) want[i] = hlo_si_op(c, first + i);
  hj_status st = hlo_si_callee(c, ci, &k);
  if (!st) st = hlo_si_sig(c, k, want, n);
  if (!st) *root = &k->root->shape;
  return st;
}

static hj_status si_while(hlo_si_cx *c, hlo_shape *out) {
  hj_status st = hlo_si_nops(c, 1);
  const hlo_shape *cr, *br;
  if (st || (st = si_call_sig(c, 0, 0, 1, &cr)) || (st = si_call_sig(c, 1, 0, 1, &br))) return st;
  const hlo_shape *s = hlo_si_op(c, 0);
  hlo_shape p = hlo_shape_scalar(HLO_PRED);
  if (!hlo_shape_compatible(cr, &p))
    return hlo_si_err(c, "condition '%s' must return pred[], returns %s", c->ins->calls[0]->name, hlo_si_str(c, 0, cr));
  if (!hlo_shape_compatible(br, s))
    return hlo_si_err(c, "body '%s' returns %s, the loop state is %s", c->ins->calls[1]->name,
                      hlo_si_str(c, 0, br), hlo_si_str(c, 1, s));
  *out = hlo_si_result(s);
  return HJ_OK;
}

static hj_status si_conditional(hlo_si_cx *c, hlo_shape *out) {
  int n = c->ins->noperands;
  if (n < 2) return hlo_si_err(c, "expects a branch index and branch operands, got %d operands", n);
  const hlo_shape *ix = hlo_si_op(c, 0), *r0 = NULL, *r = NULL;
  bool pred = ix->type == HLO_PRED;
  if (!hlo_shape_is_array(ix) || ix->rank != 0 || (!pred && ix->type != HLO_S32))
    return hlo_si_err(c, "branch index must be pred[] or s32[], got %s", hlo_si_str(c, 0, ix));
  if (c->ins->ncalls != n - 1 || (pred && n != 3))
    return hlo_si_err(c, "has %d branch computations for %d branch operands%s", c->ins->ncalls, n - 1,
                      pred ? " (a pred index needs exactly 2)" : "");
  for (int i = 0; i < n - 1; i++) {
    hj_status st = si_call_sig(c, i, i + 1, 1, &r);
    if (st) return st;
    if (r0 && !hlo_shape_compatible(r, r0))
      return hlo_si_err(c, "branch '%s' returns %s, branch 0 returns %s", c->ins->calls[i]->name,
                        hlo_si_str(c, 0, r), hlo_si_str(c, 1, r0));
    if (!r0) r0 = r;
  }
  *out = hlo_si_result(r0);
  return HJ_OK;
}

static hj_status si_control(hlo_si_cx *c, hlo_shape *out) {
  const hlo_shape *r = NULL;
  hj_status st;
  switch (c->ins->op) {
  case HLO_OP_TUPLE: {
    int n = c->ins->noperands;
    if ((st = hlo_si_tuple(c, NULL, n, out)) || n == 0) return st;
    for (int i = 0; i < n; i++) out->tuple[i] = *hlo_si_op(c, i);
    return HJ_OK;
  }
  case HLO_OP_GET_TUPLE_ELEMENT: {
    if ((st = hlo_si_nops(c, 1))) return st;
    const hlo_shape *t = hlo_si_op(c, 0);
    if (t->type != HLO_TUPLE || c->ins->index < 0 || c->ins->index >= t->ntuple)
      return hlo_si_err(c, "index=%lld is not an element of %s", (long long)c->ins->index, hlo_si_str(c, 0, t));
    *out = t->tuple[c->ins->index];
    return HJ_OK;
  }
  case HLO_OP_CALL: case HLO_OP_FUSION:
    if ((st = si_call_sig(c, 0, 0, c->ins->noperands, &r))) return st;
    if (c->ins->ncalls != 1) return hlo_si_err(c, "expects one called computation, got %d", c->ins->ncalls);
    *out = hlo_si_result(r);
    return HJ_OK;
  case HLO_OP_WHILE: return si_while(c, out);
  case HLO_OP_CONDITIONAL: return si_conditional(c, out);
  case HLO_OP_OPT_BARRIER:
    if ((st = hlo_si_nops(c, 1))) return st;
    *out = hlo_si_result(hlo_si_op(c, 0));
    return HJ_OK;
  case HLO_OP_GET_DIMENSION_SIZE:   /* s32[]: the real size of a (bounded) dim */
    if ((st = hlo_si_nops(c, 1)) || (st = hlo_si_array(c, 0))) return st;
    if (c->ins->dims.n != 1 || c->ins->dims.v[0] < 0 || c->ins->dims.v[0] >= hlo_si_op(c, 0)->rank)
      return hlo_si_err(c, "needs dimensions={d} with one dim of %s", hlo_si_str(c, 0, hlo_si_op(c, 0)));
    *out = hlo_shape_scalar(HLO_S32);
    return HJ_OK;
  default:
    return hlo_si_err(c, "no shape inference for this opcode");
  }
}
