/* eval.c — the reference evaluator: runs an HLO computation on literals, op by op, with
   XLA's semantics. Slow on purpose where that keeps it obviously right; the elementwise
   kernels (eval_elem.c) switch on type and op outside their loops so that corpus-sized
   modules (tens of millions of elements) take seconds, not minutes.

   A computation runs as a frame: one value per instruction, in the text (topological)
   order. Before running, one reverse pass marks the instructions reachable from the root
   (others are never run, as in XLA's evaluator) and records each value's last use.
   Ownership invariant: a frame value is either owned by the frame or borrowed from
   something that outlives every use of it — an argument of the computation, a constant's
   literal in the module arena, or an element of a tuple value (get-tuple-element borrows;
   the tuple's last use is extended to cover the element's). Owned values are freed right
   after their last use; a consumer that needs an owned value (tuple, the root, while
   state, opt-barrier) steals it when this is its last use, else clones.
   Elementwise ops write in place into an operand at its last use when types and sizes
   match, so a chain like exp(x - m) allocates once.

   Here: parameter constant tuple get-tuple-element call fusion map while conditional
   opt-barrier copy and every elementwise op (through eval_elem.c); everything else goes to
   hlo_eval_structural (eval_ops.c).

   Scalar programs: a computation whose instructions are all rank-0 parameters, constants
   and elementwise ops (the usual reducer, comparator or map body) is run by ev_vprog
   directly on element storage: for one call (hlo_eval_scalar_call) without allocating per
   instruction, and for map over all lanes at once, one kernel call per instruction. */
#include "eval_internal.h"
#include <stdlib.h>

/* ---- frames ------------------------------------------------------------------------------ */

typedef struct { int key; int value; } ev_idpos;

typedef struct ev_frame {
  hj_ctx_t *ctx;
  const hlo_comp *c;
  int n;
  hlo_literal **val;                  /* value per instruction position */
  bool *own;                          /* val owned by the frame */
  int *last;                          /* position of the last user; n for the root; -1 dead */
  int lo, span;                       /* id -> position: dense table over [lo, lo+span) */
  int *dense;
  ev_idpos *hm;                       /* ... or a hash map when ids are sparse */
} ev_frame;

static hj_status ev_eval(hj_ctx_t *ctx, const hlo_comp *c, hlo_literal *const *args,
                         int nargs, hlo_literal **out);

static int ev_pos(const ev_frame *f, const hlo_instr *ins) {
  if (f->dense) {
    int k = ins->id - f->lo;
    return k >= 0 && k < f->span ? f->dense[k] : -1;
  }
  ev_idpos *hm = f->hm;
  ptrdiff_t i = hmgeti(hm, ins->id);
  return i < 0 ? -1 : hm[i].value;
}

static void ev_frame_free(ev_frame *f) {
  for (int i = 0; f->val && i < f->n; i++)
    if (f->own[i]) hlo_literal_free(f->val[i]);
  free(f->val);
  free(f->own);
  free(f->last);
  free(f->dense);
  hmfree(f->hm);
}

/* Builds the id map, the live set and last uses of |c|. */
static hj_status ev_frame_init(ev_frame *f, hj_ctx_t *ctx, const hlo_comp *c) {
  memset(f, 0, sizeof *f);
  f->ctx = ctx;
  f->c = c;
  f->n = (int)arrlen(c->instrs);
  int n = f->n, lo = 0, hi = -1;
  for (int i = 0; i < n; i++) {
    int id = c->instrs[i]->id;
    if (i == 0 || id < lo) lo = id;
    if (i == 0 || id > hi) hi = id;
  }
  f->val = calloc((size_t)n + 1, sizeof *f->val);
  f->own = calloc((size_t)n + 1, sizeof *f->own);
  f->last = malloc(((size_t)n + 1) * sizeof *f->last);
  if (!f->val || !f->own || !f->last) goto oom;
  f->lo = lo;
  f->span = hi - lo + 1;
  if (f->span <= 4 * n + 64) {
    if (!(f->dense = malloc((size_t)(f->span > 0 ? f->span : 1) * sizeof(int)))) goto oom;
    for (int k = 0; k < f->span; k++) f->dense[k] = -1;
    for (int i = 0; i < n; i++) f->dense[c->instrs[i]->id - lo] = i;
  } else {
    for (int i = 0; i < n; i++) hmput(f->hm, c->instrs[i]->id, i);
  }
  for (int i = 0; i < n; i++) f->last[i] = -1;
  int root = c->root ? ev_pos(f, c->root) : -1;
  if (root < 0)
    return hj__err(ctx, HJ_ERR_INVALID_ARG, "eval: computation '%s' has no root", c->name);
  f->last[root] = n;
  for (int j = n - 1; j >= 0; j--) {
    if (f->last[j] < 0) continue;   /* not reachable from the root */
    const hlo_instr *ins = c->instrs[j];
    /* get-tuple-element borrows from its tuple: the tuple lives while the element does */
    int use = ins->op == HLO_OP_GET_TUPLE_ELEMENT ? f->last[j] : j;
    for (int k = 0; k < ins->noperands; k++) {
      int p = ev_pos(f, ins->operands[k]);
      if (p < 0 || p >= j)
        return hj__err(ctx, HJ_ERR_INVALID_ARG,
                       "eval: operand %d of '%s' in '%s' is not defined before it", k,
                       ins->name, c->name);
      if (f->last[p] < use) f->last[p] = use;
    }
  }
  return HJ_OK;
oom:
  return hj__err(ctx, HJ_ERR_OOM, "eval: out of memory for computation '%s'", c->name);
}

/* An owned copy of operand |k| of instruction |j|: stolen from the frame when this is the
   value's last use and its last occurrence among j's operands, else cloned. */
static hlo_literal *ev_take(ev_frame *f, int j, int k) {
  const hlo_instr *ins = f->c->instrs[j];
  int p = ev_pos(f, ins->operands[k]);
  bool later = false;
  for (int q = k + 1; q < ins->noperands; q++) later |= ins->operands[q] == ins->operands[k];
  if (f->own[p] && f->last[p] == j && !later) {
    hlo_literal *l = f->val[p];
    f->val[p] = NULL;
    f->own[p] = false;
    return l;
  }
  return hlo_literal_clone(f->ctx, f->val[p]);
}

static bool ev_same_dims(const hlo_shape *a, const hlo_shape *b) {
  if (a->type != b->type) return false;
  if (a->type == HLO_TUPLE) {
    if (a->ntuple != b->ntuple) return false;
    for (int i = 0; i < a->ntuple; i++)
      if (!ev_same_dims(&a->tuple[i], &b->tuple[i])) return false;
    return true;
  }
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

/* A literal's storage agrees with its shape (guards the kernels against bad inputs). */
static bool ev_lit_sane(const hlo_literal *l) {
  if (!l) return false;
  if (l->shape.type == HLO_TUPLE) {
    if (l->nelems != l->shape.ntuple) return false;
    for (int i = 0; i < l->nelems; i++)
      if (!ev_lit_sane(l->elems[i])) return false;
    return true;
  }
  if (l->shape.type == HLO_TOKEN) return true;
  return l->nbytes == hlo_shape_bytes(&l->shape) && (l->data || l->nbytes == 0);
}

static hj_status ev_check_args(hj_ctx_t *ctx, const hlo_comp *c, hlo_literal *const *args,
                               int nargs) {
  char b1[256], b2[256];
  int np = (int)arrlen(c->params);
  if (nargs != np)
    return hj__err(ctx, HJ_ERR_INVALID_ARG, "eval: computation '%s' takes %d arguments, got %d",
                   c->name, np, nargs);
  for (int i = 0; i < np; i++) {
    if (!c->params[i])
      return hj__err(ctx, HJ_ERR_INVALID_ARG, "eval: computation '%s' has no parameter %d",
                     c->name, i);
    const hlo_shape *ps = &c->params[i]->shape;
    if (!args[i] || !ev_lit_sane(args[i]) || !ev_same_dims(&args[i]->shape, ps))
      return hj__err(ctx, HJ_ERR_SHAPE,
                     "eval: argument %d has shape %s but parameter '%s' of computation '%s' "
                     "expects %s", i,
                     args[i] ? hlo_shape_str(&args[i]->shape, b1, sizeof b1) : "(null)",
                     c->params[i]->name, c->name, hlo_shape_str(ps, b2, sizeof b2));
  }
  return HJ_OK;
}

/* ---- scalar programs ------------------------------------------------------------------------ */

#define EV_SPROG_MAX 64

static bool ev_is_scalar(const hlo_shape *s) { return hlo_shape_is_array(s) && s->rank == 0; }

/* |c| is a scalar program: rank-0 parameters, constants and elementwise ops only, the root
   possibly a tuple of them. */
static bool ev_is_sprog(const hlo_comp *c) {
  int m = (int)arrlen(c->instrs);
  if (m > EV_SPROG_MAX || !c->root) return false;
  for (ptrdiff_t i = 0; i < arrlen(c->params); i++)
    if (!c->params[i]) return false;
  for (int j = 0; j < m; j++) {
    const hlo_instr *ins = c->instrs[j];
    hlo_elem_op e;
    if (ins->op == HLO_OP_TUPLE) {
      if (ins != c->root || ins->noperands > EV_SPROG_MAX) return false;
      for (int k = 0; k < ins->noperands; k++)
        if (!ev_is_scalar(&ins->operands[k]->shape)) return false;
      continue;
    }
    if (!ev_is_scalar(&ins->shape)) return false;
    if (ins->op == HLO_OP_PARAMETER) continue;
    if (ins->op == HLO_OP_CONSTANT) {
      if (!ins->literal || ins->literal->shape.type != ins->shape.type ||
          ins->literal->nbytes != hlo_type_size(ins->shape.type))
        return false;
      continue;
    }
    if (!hlo_elem_op_of(ins, &e) || hlo_elem_unsupported(&e)) return false;
    for (int k = 0; k < ins->noperands; k++)
      if (!ev_is_scalar(&ins->operands[k]->shape)) return false;
  }
  return true;
}

/* Position of |op| among the instructions of |c| before |j| (usually right before). */
static int ev_find(const hlo_comp *c, int j, const hlo_instr *op) {
  for (int q = j - 1; q >= 0; q--)
    if (c->instrs[q] == op) return q;
  return -1;
}

static void ev_lanes_out(const void *src, bool bc, int sz, void *dst, int64_t n) {
  if (!bc) {
    memcpy(dst, src, (size_t)(n * sz));
    return;
  }
  for (int64_t i = 0; i < n; i++) memcpy((char *)dst + i * sz, src, (size_t)sz);
}

/* Runs scalar program |c| over |n| lanes. Parameter k's lanes are in[k] (bin[k]: one value
   for all lanes; bin may be NULL). The root's lanes (each element of a root tuple) go to
   outs[]. With n == 1 nothing is allocated. */
static hj_status ev_vprog(hj_ctx_t *ctx, const hlo_comp *c, const void *const *in,
                          const bool *bin, int nin, void *const *outs, int64_t n) {
  int m = (int)arrlen(c->instrs);
  const void *ptr[EV_SPROG_MAX];
  bool bc[EV_SPROG_MAX];
  void *heap[EV_SPROG_MAX] = { 0 };
  uint64_t slot[EV_SPROG_MAX];
  int last[EV_SPROG_MAX], opos[EV_SPROG_MAX][3];
  hj_status st = HJ_OK;
  /* Operand positions and last uses; the root (and a root tuple's elements) live on. */
  for (int j = 0; j < m; j++) last[j] = -1;
  for (int j = 0; j < m; j++) {
    const hlo_instr *ins = c->instrs[j];
    for (int k = 0; k < ins->noperands && ins->op != HLO_OP_TUPLE; k++) {
      int p = opos[j][k] = ev_find(c, j, ins->operands[k]);
      if (p < 0 || k >= 3)
        return hj__err(ctx, HJ_ERR_INVALID_ARG, "eval: operand %d of '%s' in '%s' is not "
                       "defined before it", k, ins->name, c->name);
      last[p] = j;
    }
  }
  const hlo_instr *r = c->root;
  int nr = r->op == HLO_OP_TUPLE ? r->noperands : 1, rpos[EV_SPROG_MAX];
  for (int k = 0; k < nr; k++) {
    rpos[k] = ev_find(c, m, r->op == HLO_OP_TUPLE ? r->operands[k] : r);
    if (rpos[k] < 0) return hj__err(ctx, HJ_ERR_INVALID_ARG, "eval: bad root in '%s'", c->name);
    last[rpos[k]] = m;
  }
  for (int j = 0; j < m; j++) {
    const hlo_instr *ins = c->instrs[j];
    if (ins->op == HLO_OP_PARAMETER) {
      if (ins->index < 0 || ins->index >= nin) {
        st = hj__err(ctx, HJ_ERR_INVALID_ARG, "eval: parameter %lld of '%s' out of range",
                     (long long)ins->index, c->name);
        goto done;
      }
      ptr[j] = in[ins->index];
      bc[j] = n == 1 || (bin && bin[ins->index]);
      continue;
    }
    if (ins->op == HLO_OP_CONSTANT) {
      ptr[j] = ins->literal->data;
      bc[j] = true;
      continue;
    }
    if (ins->op == HLO_OP_TUPLE) continue;
    hlo_elem_op e;
    hlo_elem_op_of(ins, &e);
    const void *ip[3];
    bool ib[3], all = true;
    for (int k = 0; k < ins->noperands; k++) {
      ip[k] = ptr[opos[j][k]];
      ib[k] = bc[opos[j][k]];
      all &= ib[k];
    }
    int64_t lanes = all ? 1 : n;
    void *dst = slot + j;
    if (lanes > 1 && !(dst = heap[j] = malloc((size_t)(lanes * hlo_type_size(e.out))))) {
      st = hj__err(ctx, HJ_ERR_OOM, "eval: out of memory in map over %lld elements",
                   (long long)n);
      goto done;
    }
    hlo_elem_run(&e, ip, ib, dst, lanes);
    ptr[j] = dst;
    bc[j] = all;
    for (int k = 0; k < ins->noperands; k++) {  /* buffers whose last use was this op */
      int p = opos[j][k];
      if (heap[p] && last[p] == j) {
        free(heap[p]);
        heap[p] = NULL;
      }
    }
  }
  for (int k = 0; k < nr; k++) {
    int p = rpos[k];
    ev_lanes_out(ptr[p], bc[p], hlo_type_size(c->instrs[p]->shape.type), outs[k], n);
  }
done:
  for (int j = 0; j < m; j++) free(heap[j]);
  return st;
}

/* Types and element counts of |args| fit scalar program |c|. */
static bool ev_sprog_args_fit(const hlo_comp *c, hlo_literal *const *args, int n) {
  if (n != (int)arrlen(c->params)) return false;
  for (int k = 0; k < n; k++)
    if (!args[k] || !hlo_shape_is_array(&args[k]->shape) ||
        args[k]->shape.type != c->params[k]->shape.type ||
        args[k]->nbytes != hlo_type_size(args[k]->shape.type))
      return false;
  return true;
}

hj_status hlo_eval_scalar_call(hj_ctx_t *ctx, const hlo_comp *c, hlo_literal *const *args,
                               int n, hlo_literal **out) {
  *out = NULL;
  if (!ev_is_sprog(c) || !ev_sprog_args_fit(c, args, n) || n > EV_SPROG_MAX)
    return ev_eval(ctx, c, args, n, out);
  const void *in[EV_SPROG_MAX];
  void *outs[EV_SPROG_MAX];
  for (int k = 0; k < n; k++) in[k] = args[k]->data;
  hlo_literal *res = hlo_literal_new(ctx, &c->root->shape);
  if (!res) return HJ_ERR_OOM;
  if (res->shape.type == HLO_TUPLE) {
    for (int k = 0; k < res->nelems; k++) outs[k] = res->elems[k]->data;
  } else {
    outs[0] = res->data;
  }
  hj_status st = ev_vprog(ctx, c, in, NULL, n, outs, 1);
  if (st) hlo_literal_free(res);
  else *out = res;
  return st;
}

/* ---- the ops handled here ------------------------------------------------------------------ */

static hj_status ev_op_err(hj_ctx_t *ctx, hj_status code, const hlo_instr *ins, const char *why) {
  char b[256];
  return hj__err(ctx, code, "eval: op '%s' (%s, result %s): %s", hlo_opcode_name(ins->op),
                 ins->name, hlo_shape_str(&ins->shape, b, sizeof b), why);
}

/* Operand |k| of elementwise |ins| has |n| elements (or 1: broadcast); *bc says which. */
static hj_status ev_elem_operand(hj_ctx_t *ctx, const hlo_instr *ins, int k,
                                 const hlo_literal *o, int64_t n, bool *bc) {
  char b1[256], b2[256];
  int64_t m = hlo_shape_is_array(&o->shape) ? hlo_shape_numel(&o->shape) : -1;
  *bc = m == 1 && n != 1;
  if (m == n || m == 1) return HJ_OK;
  return hj__err(ctx, HJ_ERR_SHAPE, "eval: op '%s' (%s): operand %d has shape %s, result %s",
                 hlo_opcode_name(ins->op), ins->name, k,
                 hlo_shape_str(&o->shape, b1, sizeof b1),
                 hlo_shape_str(&ins->shape, b2, sizeof b2));
}

/* Element-for-element ops. Writes in place into an operand at its last use when it has the
   result's type and size. */
static hj_status ev_elementwise(ev_frame *f, int j, hlo_literal *const *ops, hlo_literal **out) {
  const hlo_instr *ins = f->c->instrs[j];
  hlo_elem_op e;
  if (!hlo_elem_op_of(ins, &e))
    return ev_op_err(f->ctx, HJ_ERR_UNSUPPORTED, ins, "operands and result must be arrays");
  const char *why = hlo_elem_unsupported(&e);
  if (why) return ev_op_err(f->ctx, HJ_ERR_SHAPE, ins, why);
  int64_t n = hlo_shape_numel(&ins->shape);
  const void *in[3];
  bool bc[3];
  hlo_literal *res = NULL;
  for (int k = 0; k < e.nin; k++) {
    hj_status st = ev_elem_operand(f->ctx, ins, k, ops[k], n, &bc[k]);
    if (st) return st;
    in[k] = ops[k]->data;
    if (ops[k]->shape.type != e.in[k])
      return ev_op_err(f->ctx, HJ_ERR_SHAPE, ins, "operand type differs from the instruction's");
  }
  for (int k = 0; k < e.nin && !res; k++) {
    int p = ev_pos(f, ins->operands[k]), uses = 0;
    for (int q = 0; q < e.nin; q++) uses += ins->operands[q] == ins->operands[k];
    if (uses == 1 && !bc[k] && f->own[p] && f->last[p] == j && e.in[k] == e.out &&
        hlo_shape_numel(&ops[k]->shape) == n) {
      res = f->val[p];
      f->val[p] = NULL;
      f->own[p] = false;
      res->shape = ins->shape;
      res->shape.tuple = NULL;
      res->shape.ntuple = 0;
    }
  }
  if (!res && !(res = hlo_literal_new(f->ctx, &ins->shape))) return HJ_ERR_OOM;
  hlo_elem_run(&e, in, bc, res->data, n);
  *out = res;
  return HJ_OK;
}

/* bitcast-convert between widths: the raw bytes, reinterpreted (row-major, little endian). */
static hj_status ev_bitcast_convert(hj_ctx_t *ctx, const hlo_instr *ins, const hlo_literal *op,
                                    hlo_literal **out) {
  if (!hlo_shape_is_array(&ins->shape) || !hlo_shape_is_array(&op->shape) ||
      hlo_shape_bytes(&ins->shape) != op->nbytes)
    return ev_op_err(ctx, HJ_ERR_SHAPE, ins, "operand and result sizes in bytes differ");
  if (!(*out = hlo_literal_new(ctx, &ins->shape))) return HJ_ERR_OOM;
  if (op->nbytes) memcpy((*out)->data, op->data, (size_t)op->nbytes);
  return HJ_OK;
}

static hj_status ev_tuple(ev_frame *f, int j, hlo_literal **out) {
  const hlo_instr *ins = f->c->instrs[j];
  hlo_literal *small[16], **el = ins->noperands <= 16 ? small
                                   : calloc((size_t)ins->noperands, sizeof *el);
  if (!el) return hj__err(f->ctx, HJ_ERR_OOM, "eval: out of memory in tuple");
  hj_status st = HJ_OK;
  int k = 0;
  for (; k < ins->noperands; k++)
    if (!(el[k] = ev_take(f, j, k))) break;
  if (k < ins->noperands) {
    while (k-- > 0) hlo_literal_free(el[k]);
    st = HJ_ERR_OOM;
  } else if (!(*out = hlo_literal_tuple(f->ctx, el, ins->noperands))) {
    st = HJ_ERR_OOM;
  }
  if (el != small) free(el);
  return st;
}

/* get-tuple-element: borrows the element; the frame extended the tuple's last use to
   cover this value's (ev_frame_init), so the element outlives every use of it. */
static hj_status ev_gte(ev_frame *f, int j, hlo_literal **out, bool *own) {
  const hlo_instr *ins = f->c->instrs[j];
  hlo_literal *t = f->val[ev_pos(f, ins->operands[0])];
  if (t->shape.type != HLO_TUPLE || ins->index < 0 || ins->index >= t->nelems ||
      !t->elems[ins->index])
    return ev_op_err(f->ctx, HJ_ERR_SHAPE, ins, "index out of range of the tuple operand");
  *out = t->elems[ins->index];
  *own = false;
  return HJ_OK;
}

static hj_status ev_while(ev_frame *f, int j, hlo_literal **out) {
  const hlo_instr *ins = f->c->instrs[j];
  if (ins->ncalls != 2 || ins->noperands != 1)
    return ev_op_err(f->ctx, HJ_ERR_INVALID_ARG, ins, "needs one operand, a condition and a body");
  hlo_literal *state = ev_take(f, j, 0);
  if (!state) return HJ_ERR_OOM;
  hj_status st = HJ_OK;
  for (;;) {
    hlo_literal *p = NULL, *next = NULL;
    if ((st = ev_eval(f->ctx, ins->calls[0], &state, 1, &p))) break;
    bool go = p->shape.type == HLO_PRED && p->nbytes == 1 && p->data[0];
    bool bad = p->shape.type != HLO_PRED || p->nbytes != 1;
    hlo_literal_free(p);
    if (bad) {
      st = ev_op_err(f->ctx, HJ_ERR_SHAPE, ins, "condition must return pred[]");
      break;
    }
    if (!go) break;
    if ((st = ev_eval(f->ctx, ins->calls[1], &state, 1, &next))) break;
    hlo_literal_free(state);
    state = next;
  }
  if (st) hlo_literal_free(state);
  else *out = state;
  return st;
}

/* conditional: a pred selects branch 0 (true) or 1 (false); an integer index selects its
   branch, out-of-range indices the last one. Branch k gets operand k + 1. */
static hj_status ev_conditional(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops,
                                hlo_literal **out) {
  int nb = ins->ncalls;
  if (nb < 1 || ins->noperands != nb + 1)
    return ev_op_err(ctx, HJ_ERR_INVALID_ARG, ins, "needs one operand per branch plus the selector");
  const hlo_literal *s = ops[0];
  if (!hlo_shape_is_array(&s->shape) || hlo_shape_numel(&s->shape) != 1 ||
      !(s->shape.type == HLO_PRED || hlo_type_is_int(s->shape.type)))
    return ev_op_err(ctx, HJ_ERR_SHAPE, ins, "selector must be a pred or integer scalar");
  int64_t b;
  if (s->shape.type == HLO_PRED) {
    if (nb != 2) return ev_op_err(ctx, HJ_ERR_INVALID_ARG, ins, "pred selector needs 2 branches");
    b = s->data[0] ? 0 : 1;
  } else {
    b = hlo_load_s64(s->shape.type, s->data, 0);
    if (b < 0 || b >= nb) b = nb - 1;
  }
  return ev_eval(ctx, ins->calls[b], &ops[b + 1], 1, out);
}

/* map: the computation applied per element; scalar programs run over all lanes at once. */
static hj_status ev_map(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops,
                        hlo_literal **out) {
  if (ins->ncalls != 1 || !hlo_shape_is_array(&ins->shape) || ins->noperands > EV_SPROG_MAX)
    return ev_op_err(ctx, HJ_ERR_INVALID_ARG, ins, "needs one computation and an array result");
  const hlo_comp *c = ins->calls[0];
  int64_t n = hlo_shape_numel(&ins->shape);
  int no = ins->noperands;
  if (no != (int)arrlen(c->params))
    return ev_op_err(ctx, HJ_ERR_INVALID_ARG, ins, "operand count differs from the computation's");
  for (int k = 0; k < no; k++)
    if (!hlo_shape_is_array(&ops[k]->shape) || hlo_shape_numel(&ops[k]->shape) != n ||
        !c->params[k] || ops[k]->shape.type != c->params[k]->shape.type)
      return ev_op_err(ctx, HJ_ERR_SHAPE, ins, "operands must match the result's size and "
                       "the computation's parameter types");
  hlo_literal *res = hlo_literal_new(ctx, &ins->shape);
  if (!res) return HJ_ERR_OOM;
  hj_status st = HJ_OK;
  if (ev_is_sprog(c) && c->root->op != HLO_OP_TUPLE && c->root->shape.type == ins->shape.type) {
    const void *in[EV_SPROG_MAX];
    void *outs[1] = { res->data };
    for (int k = 0; k < no; k++) in[k] = ops[k]->data;
    st = ev_vprog(ctx, c, in, NULL, no, outs, n);
  } else {
    hlo_literal *args[EV_SPROG_MAX] = { 0 };
    int osz = hlo_type_size(ins->shape.type);
    for (int k = 0; k < no && !st; k++) {
      hlo_shape s = hlo_shape_scalar(ops[k]->shape.type);
      if (!(args[k] = hlo_literal_new(ctx, &s))) st = HJ_ERR_OOM;
    }
    for (int64_t i = 0; i < n && !st; i++) {
      hlo_literal *r = NULL;
      for (int k = 0; k < no; k++)
        memcpy(args[k]->data, ops[k]->data + i * args[k]->nbytes, (size_t)args[k]->nbytes);
      if ((st = hlo_eval_scalar_call(ctx, c, args, no, &r))) break;
      if (r->shape.type != ins->shape.type || r->nbytes != osz)
        st = ev_op_err(ctx, HJ_ERR_SHAPE, ins, "computation must return a scalar of the result type");
      else
        memcpy(res->data + i * osz, r->data, (size_t)osz);
      hlo_literal_free(r);
    }
    for (int k = 0; k < no; k++) hlo_literal_free(args[k]);
  }
  if (st) hlo_literal_free(res);
  else *out = res;
  return st;
}

/* ---- the walker ------------------------------------------------------------------------------ */

/* Evaluates instruction |j| of the frame into f->val[j], then frees the operands whose last
   use this was. */
static hj_status ev_instr(ev_frame *f, int j, hlo_literal *const *args, int nargs) {
  const hlo_instr *ins = f->c->instrs[j];
  hlo_literal *small[16], **ops = small;
  if (ins->noperands > 16 && !(ops = malloc(sizeof *ops * (size_t)ins->noperands)))
    return hj__err(f->ctx, HJ_ERR_OOM, "eval: out of memory");
  hj_status st = HJ_OK;
  for (int k = 0; k < ins->noperands; k++)
    if (!(ops[k] = f->val[ev_pos(f, ins->operands[k])]))
      st = ev_op_err(f->ctx, HJ_ERR_INTERNAL, ins, "operand value missing");
  hlo_literal *res = NULL;
  bool own = true;
  if (st) goto done;
  switch (ins->op) {
  case HLO_OP_PARAMETER:
    if (ins->index < 0 || ins->index >= nargs) {
      st = ev_op_err(f->ctx, HJ_ERR_INVALID_ARG, ins, "parameter number out of range");
      break;
    }
    res = args[ins->index];
    own = false;
    break;
  case HLO_OP_CONSTANT:
    if (!(res = ins->literal)) st = ev_op_err(f->ctx, HJ_ERR_INVALID_ARG, ins, "no literal");
    own = false;
    break;
  case HLO_OP_TUPLE: st = ev_tuple(f, j, &res); break;
  case HLO_OP_GET_TUPLE_ELEMENT: st = ev_gte(f, j, &res, &own); break;
  case HLO_OP_CALL: case HLO_OP_FUSION:
    if (ins->ncalls != 1) st = ev_op_err(f->ctx, HJ_ERR_INVALID_ARG, ins, "needs one computation");
    else st = ev_eval(f->ctx, ins->calls[0], ops, ins->noperands, &res);
    break;
  case HLO_OP_MAP: st = ev_map(f->ctx, ins, ops, &res); break;
  case HLO_OP_WHILE: st = ev_while(f, j, &res); break;
  case HLO_OP_CONDITIONAL: st = ev_conditional(f->ctx, ins, ops, &res); break;
  case HLO_OP_OPT_BARRIER:
    if (!(res = ev_take(f, j, 0))) st = HJ_ERR_OOM;
    break;
  case HLO_OP_GET_DIMENSION_SIZE:   /* values carry no real size: a bounded dim is its bound */
    if ((res = hlo_literal_new(f->ctx, &ins->shape)) && ins->dims.n == 1)
      *(int32_t *)res->data = (int32_t)ins->operands[0]->shape.dims[ins->dims.v[0]];
    else st = res ? ev_op_err(f->ctx, HJ_ERR_INVALID_ARG, ins, "needs dimensions={d}") : HJ_ERR_OOM;
    break;
  case HLO_OP_COPY:
    if (hlo_shape_is_array(&ins->shape)) st = ev_elementwise(f, j, ops, &res);
    else if (!(res = ev_take(f, j, 0))) st = HJ_ERR_OOM;
    break;
  case HLO_OP_BITCAST_CONVERT:
    if (hlo_shape_is_array(&ops[0]->shape) &&
        hlo_type_size(ops[0]->shape.type) != hlo_type_size(ins->shape.type))
      st = ev_bitcast_convert(f->ctx, ins, ops[0], &res);
    else
      st = ev_elementwise(f, j, ops, &res);
    break;
  default: {
    hlo_elem_op e;
    if (hlo_elem_op_of(ins, &e)) st = ev_elementwise(f, j, ops, &res);
    else st = hlo_eval_structural(f->ctx, ins, ops, &res);
    break;
  }
  }
  if (!st && (!res || !ev_same_dims(&res->shape, &ins->shape))) {
    char b[256];
    st = ev_op_err(f->ctx, HJ_ERR_INTERNAL, ins, res ? hlo_shape_str(&res->shape, b, sizeof b)
                                                     : "no result");
    if (res && own) hlo_literal_free(res);
  }
  if (st) goto done;
  f->val[j] = res;
  f->own[j] = own;
  for (int k = 0; k < ins->noperands; k++) {
    int p = ev_pos(f, ins->operands[k]);
    if (f->last[p] == j && f->own[p]) {
      hlo_literal_free(f->val[p]);
      f->val[p] = NULL;
      f->own[p] = false;
    }
  }
done:
  if (ops != small) free(ops);
  return st;
}

static hj_status ev_eval(hj_ctx_t *ctx, const hlo_comp *c, hlo_literal *const *args,
                         int nargs, hlo_literal **out) {
  *out = NULL;
  hj_status st = ev_check_args(ctx, c, args, nargs);
  if (st) return st;
  ev_frame f;
  if (!(st = ev_frame_init(&f, ctx, c))) {
    for (int j = 0; j < f.n && !st; j++)
      if (f.last[j] >= 0) st = ev_instr(&f, j, args, nargs);
  }
  if (!st) {
    int r = ev_pos(&f, c->root);
    if (f.own[r]) {
      *out = f.val[r];
      f.val[r] = NULL;
      f.own[r] = false;
    } else if (!(*out = hlo_literal_clone(ctx, f.val[r]))) {
      st = HJ_ERR_OOM;
    }
  }
  ev_frame_free(&f);
  return st;
}

hj_status hlo_eval_computation(hj_ctx_t *ctx, const hlo_comp *c, hlo_literal *const *args,
                               int nargs, hlo_literal **out) {
  if (!out) return hj__err(ctx, HJ_ERR_INVALID_ARG, "eval: |out| is NULL");
  *out = NULL;
  if (!c || (nargs > 0 && !args))
    return hj__err(ctx, HJ_ERR_INVALID_ARG, "eval: no computation or no arguments");
  return ev_eval(ctx, c, args, nargs, out);
}

hj_status hlo_eval_module(hj_ctx_t *ctx, const hlo_module *m, hlo_literal *const *args,
                          int nargs, hlo_literal **out) {
  if (out) *out = NULL;
  if (!m || !m->entry)
    return hj__err(ctx, HJ_ERR_INVALID_ARG, "eval: module has no entry computation");
  return hlo_eval_computation(ctx, m->entry, args, nargs, out);
}

#undef EV_SPROG_MAX
