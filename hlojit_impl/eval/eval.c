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

   Here: parameter constant tuple get-tuple-element call fusion while conditional
   opt-barrier copy and every elementwise op (through eval_elem.c); map and the scalar
   programs that reducers and comparators usually are: eval_sprog.c; everything else goes
   to hlo_eval_structural (eval_ops.c).

   Calls (call, fusion, conditional, while) run on an explicit stack of tasks, not on the
   C stack (see "the walker" below): the depth of nested calls is bounded by memory only. */
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
  for (int i = 0; f->val && f->own && i < f->n; i++)
    if (f->own[i]) hlo_literal_free(f->val[i]);
  hj__free(f->ctx, f->val);
  hj__free(f->ctx, f->own);
  hj__free(f->ctx, f->last);
  hj__free(f->ctx, f->dense);
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
  f->val = hlo_ev_alloc(ctx, (size_t)n + 1, sizeof *f->val, true);
  f->own = hlo_ev_alloc(ctx, (size_t)n + 1, sizeof *f->own, true);
  f->last = hlo_ev_alloc(ctx, (size_t)n + 1, sizeof *f->last, false);
  if (!f->val || !f->own || !f->last) goto oom;
  f->lo = lo;
  f->span = hi - lo + 1;
  if (f->span <= 4 * n + 64) {
    if (!(f->dense = hlo_ev_alloc(ctx, (size_t)(f->span > 0 ? f->span : 1), sizeof(int), false))) goto oom;
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
                                   : hlo_ev_alloc(f->ctx, (size_t)ins->noperands, sizeof *el, true);
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
  if (el != small) hj__free(f->ctx, el);
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

/* conditional: a pred selects branch 0 (true) or 1 (false); an integer index selects its
   branch, out-of-range indices the last one. Branch k gets operand k + 1. */
static hj_status ev_branch(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops,
                           int *branch) {
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
  *branch = (int)b;
  return HJ_OK;
}

/* ---- the walker ------------------------------------------------------------------------------

   Calls do not recurse on the C stack: a computation being run is a task (its frame and the
   position of the next instruction) on an explicit stack of heap-allocated tasks, so a chain
   of 10,000 nested calls needs 10,000 small heap blocks, not 10,000 C frames. call, fusion,
   conditional and while push a task for their callee and resume when it returns its root:
     call/fusion, conditional   the callee's result is the instruction's value;
     while                      phase 1 runs the condition on the state (pred[]: go on?),
                                phase 2 the body, whose result becomes the next state.
   Only the computations that ops apply per element (reduce, reduce-window, scatter, sort,
   map bodies that are not scalar programs) still nest natively, one level per applied
   computation inside an applied computation; that depth is bounded (EV_MAX_NESTING) with
   a clear error, and real programs stay at one or two. */

#define EV_MAX_NESTING 64
static _Thread_local int ev_nesting;

typedef struct ev_task {
  struct ev_task *up;                 /* the caller, waiting at its position |j| */
  ev_frame f;
  hlo_literal *const *args;
  int nargs;
  int j;                              /* next position to run */
  hlo_literal **callargs;             /* the callee's arguments (values of this frame) */
  hlo_literal *state;                 /* while: the loop state, owned */
  int phase;                          /* while: 1 condition, 2 body */
} ev_task;

static void ev_task_free(hj_ctx_t *ctx, ev_task *t) {
  ev_frame_free(&t->f);
  hj__free(ctx, t->callargs);
  hlo_literal_free(t->state);
  hj__free(ctx, t);
}

/* A task running |c| on |args| (borrowed: they outlive it), on top of |up|. */
static hj_status ev_task_new(hj_ctx_t *ctx, ev_task *up, const hlo_comp *c,
                             hlo_literal *const *args, int nargs, ev_task **out) {
  *out = NULL;
  hj_status st = ev_check_args(ctx, c, args, nargs);
  if (st) return st;
  ev_task *t = hlo_ev_alloc(ctx, 1, sizeof *t, true);
  if (!t) return hj__err(ctx, HJ_ERR_OOM, "eval: out of memory for computation '%s'", c->name);
  t->up = up;
  t->args = args;
  t->nargs = nargs;
  if ((st = ev_frame_init(&t->f, ctx, c))) {
    ev_task_free(ctx, t);
    return st;
  }
  *out = t;
  return HJ_OK;
}

/* The operand values of instruction |j|, into |ops| (at least ins->noperands entries). */
static hj_status ev_operands(ev_frame *f, int j, hlo_literal **ops) {
  const hlo_instr *ins = f->c->instrs[j];
  for (int k = 0; k < ins->noperands; k++)
    if (!(ops[k] = f->val[ev_pos(f, ins->operands[k])]))
      return ev_op_err(f->ctx, HJ_ERR_INTERNAL, ins, "operand value missing");
  return HJ_OK;
}

/* Stores |res| (|own|: the frame owns it) as the value of |j|, then frees the operands whose
   last use this was. On a shape mismatch (a bug) |res| is freed when owned. */
static hj_status ev_store(ev_frame *f, int j, hlo_literal *res, bool own) {
  const hlo_instr *ins = f->c->instrs[j];
  if (!res || !ev_same_dims(&res->shape, &ins->shape)) {
    char b[256];
    hj_status st = ev_op_err(f->ctx, HJ_ERR_INTERNAL, ins,
                             res ? hlo_shape_str(&res->shape, b, sizeof b) : "no result");
    if (res && own) hlo_literal_free(res);
    return st;
  }
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
  return HJ_OK;
}

/* Evaluates instruction |j| (not one that calls: call fusion conditional while). */
static hj_status ev_instr(ev_frame *f, int j, hlo_literal *const *args, int nargs) {
  const hlo_instr *ins = f->c->instrs[j];
  hlo_literal *small[16], **ops = small;
  if (ins->noperands > 16 && !(ops = hlo_ev_alloc(f->ctx, (size_t)ins->noperands, sizeof *ops, false)))
    return hj__err(f->ctx, HJ_ERR_OOM, "eval: out of memory");
  hj_status st = ev_operands(f, j, ops);
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
  case HLO_OP_MAP: st = hlo_eval_map(f->ctx, ins, ops, &res); break;
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
  if (!st) st = ev_store(f, j, res, own);
done:
  if (ops != small) hj__free(f->ctx, ops);
  return st;
}

/* Starts the call at position t->j: pushes the callee's task in *next (NULL: nothing to
   call, the instruction is done). */
static hj_status ev_call_begin(hj_ctx_t *ctx, ev_task *t, ev_task **next) {
  ev_frame *f = &t->f;
  const hlo_instr *ins = f->c->instrs[t->j];
  *next = NULL;
  int n = ins->noperands;
  if (!(t->callargs = hlo_ev_alloc(ctx, (size_t)n + 1, sizeof *t->callargs, true)))
    return hj__err(ctx, HJ_ERR_OOM, "eval: out of memory");
  hj_status st = ev_operands(f, t->j, t->callargs);
  if (st) return st;
  switch (ins->op) {
  case HLO_OP_WHILE:
    if (ins->ncalls != 2 || n != 1)
      return ev_op_err(ctx, HJ_ERR_INVALID_ARG, ins, "needs one operand, a condition and a body");
    if (!(t->state = ev_take(f, t->j, 0))) return HJ_ERR_OOM;
    t->phase = 1;
    return ev_task_new(ctx, t, ins->calls[0], &t->state, 1, next);
  case HLO_OP_CONDITIONAL: {
    int b = 0;
    if ((st = ev_branch(ctx, ins, t->callargs, &b))) return st;
    return ev_task_new(ctx, t, ins->calls[b], &t->callargs[b + 1], 1, next);
  }
  default:   /* call, fusion */
    if (ins->ncalls != 1) return ev_op_err(ctx, HJ_ERR_INVALID_ARG, ins, "needs one computation");
    return ev_task_new(ctx, t, ins->calls[0], t->callargs, n, next);
  }
}

/* The callee of t's call at t->j returned |res| (owned; taken over here). Either the call
   goes on with another callee (while: *next pushed) or its value is stored and t moves on. */
static hj_status ev_call_end(hj_ctx_t *ctx, ev_task *t, hlo_literal *res, ev_task **next) {
  ev_frame *f = &t->f;
  const hlo_instr *ins = f->c->instrs[t->j];
  hj_status st = HJ_OK;
  *next = NULL;
  if (ins->op == HLO_OP_WHILE && t->phase == 1) {
    bool bad = res->shape.type != HLO_PRED || res->nbytes != 1;
    bool go = !bad && res->data[0];
    hlo_literal_free(res);
    if (bad) return ev_op_err(ctx, HJ_ERR_SHAPE, ins, "condition must return pred[]");
    if (go) {
      t->phase = 2;
      return ev_task_new(ctx, t, ins->calls[1], &t->state, 1, next);
    }
    res = t->state;           /* the loop is done: the state is its value */
    t->state = NULL;
  } else if (ins->op == HLO_OP_WHILE) {
    hlo_literal_free(t->state);
    t->state = res;
    t->phase = 1;
    return ev_task_new(ctx, t, ins->calls[0], &t->state, 1, next);
  }
  hj__free(ctx, t->callargs);
  t->callargs = NULL;
  t->phase = 0;
  st = ev_store(f, t->j, res, true);
  t->j++;
  return st;
}

/* The root value of finished task |t|, owned (stolen from the frame or cloned). */
static hlo_literal *ev_result(hj_ctx_t *ctx, ev_task *t) {
  int r = ev_pos(&t->f, t->f.c->root);
  if (!t->f.own[r]) return hlo_literal_clone(ctx, t->f.val[r]);
  hlo_literal *l = t->f.val[r];
  t->f.val[r] = NULL;
  t->f.own[r] = false;
  return l;
}

static bool ev_calls(hlo_opcode op) {
  return op == HLO_OP_CALL || op == HLO_OP_FUSION || op == HLO_OP_CONDITIONAL || op == HLO_OP_WHILE;
}

static hj_status ev_run(hj_ctx_t *ctx, const hlo_comp *c, hlo_literal *const *args, int nargs,
                        hlo_literal **out) {
  ev_task *t = NULL, *next;
  hj_status st = ev_task_new(ctx, NULL, c, args, nargs, &t);
  while (!st && t) {
    ev_frame *f = &t->f;
    if (t->j == f->n) {                       /* finished: hand the root to the caller */
      hlo_literal *res = ev_result(ctx, t);
      ev_task *up = t->up;
      ev_task_free(ctx, t);
      t = up;
      if (!res) st = hj__err(ctx, HJ_ERR_OOM, "eval: out of memory copying a result");
      else if (!t) *out = res;
      else if (!(st = ev_call_end(ctx, t, res, &next)) && next) t = next;
      continue;
    }
    if (f->last[t->j] < 0) {                  /* not reachable from the root */
      t->j++;
      continue;
    }
    if (!ev_calls(f->c->instrs[t->j]->op)) {
      if (!(st = ev_instr(f, t->j, t->args, t->nargs))) t->j++;
      continue;
    }
    if ((st = ev_call_begin(ctx, t, &next))) break;
    t = next;
  }
  while (t) {                                 /* on error: every task still open */
    ev_task *up = t->up;
    ev_task_free(ctx, t);
    t = up;
  }
  return st;
}

static hj_status ev_eval(hj_ctx_t *ctx, const hlo_comp *c, hlo_literal *const *args,
                         int nargs, hlo_literal **out) {
  *out = NULL;
  if (ev_nesting >= EV_MAX_NESTING)
    return hj__err(ctx, HJ_ERR_UNSUPPORTED, "eval: computation '%s' is applied inside more "
                   "than %d levels of computations applied per element (reduce, sort, scatter, "
                   "map, reduce-window reducers)", c->name, EV_MAX_NESTING);
  ev_nesting++;
  hj_status st = ev_run(ctx, c, args, nargs, out);
  ev_nesting--;
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
