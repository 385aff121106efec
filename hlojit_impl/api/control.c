/* api/control.c — the graph builder, part 3: tuples, the ops that call sub-graphs (call,
   map, while, conditional, reduce_with, sort_with), and closure conversion for sub-graphs
   that use tensors of the graphs enclosing them (as JAX does for the bodies of
   lax.while_loop and lax.cond).

   A sub-graph is frozen when a call-like op first uses it (ctl_callee): its root is fixed
   (the single output or a tuple of them) and it takes no more ops, so calls form a DAG.

   Capture (builder.c's hj__capture, as operands are resolved): an op on a sub-graph S
   given a tensor of an ancestor graph A (S's parent, its parent, ...;
   hj_graph_create_sub's |parent|) does not fail: the tensor gets a stand-in in S, a
   parameter instruction outside S's parameter list, one per source tensor (S->captures
   lists them in order of first use).

   Closing, when an op first calls S (and S is frozen): every capture becomes a real input.
     call         the stand-ins become S's last parameters; every hj_call passes the
                  sources as extra arguments;
     while        cond and body share one capture list C (their union). The state T becomes
                  (T, C1..Cm): S's parameter p is retyped to the tuple, its old uses read
                  gte(p, 0), stand-in j becomes gte(p, 1+j); the body returns
                  (root, gte(p, 1), ..., gte(p, m)), so captures ride along unchanged; the
                  caller passes tuple(init, C1..Cm) and gets gte(while, 0) back;
     conditional  each branch b the same with its own list: operand (arg_b, C1..Cm).
   Sources from further out than the caller's graph are captured by the caller in turn (the
   extra operands go through hj__operands like any other), so nesting composes. A closed
   sub-graph may be called again: the same sources are passed again (while: only with the
   same partner). Sub-graphs of map, reduce_with and sort_with (scalar computations applied
   elementwise) cannot capture: refused with a message.

   Example: body(s) = s + w, w a tensor of the top graph g:
     body: s = f32[4] parameter(0)                      (T = f32[4], C = [w])
     ->    p = (f32[4], f32[4]) parameter(0); s = gte(p, 0); w' = gte(p, 1)
           ROOT (add(s, w'), w')
     g:    while(tuple(init, w)) -> gte(.., 0) */
#include "api.h"

static hj_tensor_t ctl_poison(hj_graph_t *g) { return (hj_tensor_t){ g, -1 }; }

/* ---- tuples and control flow ---------------------------------------------------------------- */

/* Fixes the root of sub-graph |sub| for its first use by |caller| (op |op|). */
static hlo_comp *ctl_callee(hj_graph_t *caller, const char *op, hj_graph_t *sub) {
  if (!sub) {
    hj__graph_fail(caller, HJ_ERR_INVALID_ARG, "%s: sub-graph is NULL", op);
    return NULL;
  }
  if (sub->top != caller->top || sub == sub->top || sub == caller) {
    hj__graph_fail(caller, HJ_ERR_INVALID_ARG,
                   "%s: graph '%s' is not a sub-graph that graph '%s' can call", op,
                   hj__graph_name(sub), hj__graph_name(caller));
    return NULL;
  }
  if (sub->status != HJ_OK) {
    hj__graph_fail(caller, sub->status, "%s: sub-graph '%s' has an error: %.400s", op,
                   hj__graph_name(sub), sub->err);
    return NULL;
  }
  if (sub->frozen) return sub->comp;
  int n = (int)arrlen(sub->outputs);
  if (n == 0) {
    hj__graph_fail(caller, HJ_ERR_INVALID_ARG, "%s: sub-graph '%s' has no output", op,
                   hj__graph_name(sub));
    return NULL;
  }
  hlo_instr *root = n == 1 ? sub->outputs[0]
                           : hj__emit(sub, op, HLO_OP_TUPLE, NULL, sub->outputs, n);
  if (!root) return NULL;
  sub->comp->root = root;
  root->is_root = true;
  sub->frozen = true;
  return sub->comp;
}

/* Operands |ts| (n >= 0) in graph |g0| (or theirs), then calls |subs| (nsubs). */
static hj_tensor_t ctl_call_op(const char *op, hlo_opcode opc, hj_graph_t *g0, const hj_tensor_t *ts,
                                int n, hj_graph_t *const *subs, int nsubs, hlo_instr **out_ins) {
  *out_ins = NULL;
  hj_graph_t *g = g0;
  if (n < 0 || (n > 0 && !ts) || nsubs < 0 || nsubs > 64 || (nsubs > 0 && !subs))
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: NULL arrays or bad counts (%d, %d)", op, n, nsubs);
  hlo_instr **x = NULL;
  hj_tensor_t res = HJ_NONE;
  if (n > 0) {
    hj_graph_t *tg = NULL;
    arrsetlen(x, n);
    if (!hj__operands(op, ts, n, &tg, x)) {
      /* Every operand HJ_NONE: hj__operands found no graph to tell. The graph is known
         here (hj_tuple's |g|, or the family of the sub-graphs called): record it there,
         or the poisoned result would carry no message. */
      hj_graph_t *known = tg ? tg : g ? g : nsubs > 0 && subs[0] ? subs[0]->top : NULL;
      if (!tg && known) res = hj__graph_fail(known, HJ_ERR_INVALID_ARG, "%s: operand 0 is HJ_NONE or has no graph", op);
      else res = ctl_poison(known);
      goto done;
    }
    if (g && tg != g) {
      res = hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: operands belong to graph '%s', not '%s'", op,
                           hj__graph_name(tg), hj__graph_name(g));
      goto done;
    }
    g = tg;
  }
  if (!g) goto done;
  res = ctl_poison(g);
  hlo_comp *calls[64];
  for (int i = 0; i < nsubs; i++) {
    if (opc != HLO_OP_CALL && opc != HLO_OP_WHILE && opc != HLO_OP_CONDITIONAL && hj__has_captures(subs[i])) {
      hj__graph_fail(g, HJ_ERR_UNSUPPORTED, "%s: sub-graph '%s' uses tensors of an enclosing graph; closures "
                     "work in hj_call, hj_while and hj_conditional (a scalar computation cannot capture)", op,
                     hj__graph_name(subs[i]));
      goto done;
    }
    if (!(calls[i] = ctl_callee(g, op, subs[i]))) goto done;
  }
  if ((*out_ins = hj__op_begin(g, op, opc, NULL, x, n))) hlo_instr_set_calls(*out_ins, calls, nsubs);
done:
  arrfree(x);
  return res;
}

hj_tensor_t hj_tuple(hj_graph_t *g, const hj_tensor_t *xs, int n) {
  hlo_instr *ins;
  hj_tensor_t t = ctl_call_op("hj_tuple", HLO_OP_TUPLE, g, xs, n, NULL, 0, &ins);
  return ins ? hj__op_finish(t.graph, "hj_tuple", ins) : t;
}

hj_tensor_t hj_get_tuple_element(hj_tensor_t t, int index) {
  const char *op = "hj_get_tuple_element";
  hj_graph_t *g;
  hlo_instr *a;
  if (!hj__operands(op, &t, 1, &g, &a)) return ctl_poison(g);
  hlo_instr *ins = hj__op_begin(g, op, HLO_OP_GET_TUPLE_ELEMENT, NULL, &a, 1);
  if (ins) ins->index = index;
  return hj__op_finish(g, op, ins);
}

hj_tensor_t hj_call(hj_graph_t *callee, const hj_tensor_t *args, int n) {
  hlo_instr *ins;
  hj_graph_t *caller = n > 0 && args ? args[0].graph : callee ? callee->top : NULL;
  hj_tensor_t *ext = NULL;                             /* args + captures (below) */
  int closed = hj__close_call(caller, callee, args, n, &ext);
  if (closed < 0) return ctl_poison(caller);
  hj_tensor_t t = closed ? ctl_call_op("hj_call", HLO_OP_CALL, caller, ext, (int)arrlen(ext), &callee, 1, &ins)
                         : ctl_call_op("hj_call", HLO_OP_CALL, caller, args, n, &callee, 1, &ins);
  arrfree(ext);
  return ins ? hj__op_finish(t.graph, "hj_call", ins) : t;
}

hj_tensor_t hj_map(hj_graph_t *fn, const hj_tensor_t *args, int n) {
  hlo_instr *ins;
  hj_graph_t *caller = n > 0 && args ? args[0].graph : NULL;
  hj_tensor_t t = ctl_call_op("hj_map", HLO_OP_MAP, caller, args, n, &fn, 1, &ins);
  if (ins) {
    int64_t d[HLO_MAX_RANK];
    int r = ins->operands[0]->shape.rank;
    for (int i = 0; i < r && i < HLO_MAX_RANK; i++) d[i] = i;
    ins->dims = hlo_ints_dup(t.graph->m, d, r);
  }
  return ins ? hj__op_finish(t.graph, "hj_map", ins) : t;
}

hj_tensor_t hj_while(hj_graph_t *cond, hj_graph_t *body, hj_tensor_t init) {
  hlo_instr *ins;
  hj_graph_t *subs[2] = { cond, body };
  hj_tensor_t ext;                                     /* (init, captures...) (below) */
  int closed = hj__close_while(cond, body, init, &ext);
  if (closed < 0) return ext;
  hj_tensor_t a = closed ? ext : init;
  hj_tensor_t t = ctl_call_op("hj_while", HLO_OP_WHILE, a.graph, &a, 1, subs, 2, &ins);
  t = ins ? hj__op_finish(t.graph, "hj_while", ins) : t;
  return closed ? hj_get_tuple_element(t, 0) : t;
}

hj_tensor_t hj_conditional(hj_tensor_t selector, hj_graph_t *const *branches,
                           const hj_tensor_t *branch_args, int n) {
  const char *op = "hj_conditional";
  hj_graph_t *g = selector.graph;
  if (!g) return HJ_NONE;
  if (n < 1 || n > 63 || !branches || !branch_args)
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: NULL arrays or %d branches", op, n);
  hj_tensor_t ts[64];
  ts[0] = selector;
  memcpy(ts + 1, branch_args, sizeof(hj_tensor_t) * (size_t)n);
  if (hj__close_branches(selector, branches, branch_args, n, ts + 1) < 0) return ctl_poison(g);
  hlo_instr *ins;
  hj_tensor_t t = ctl_call_op(op, HLO_OP_CONDITIONAL, g, ts, n + 1, branches, n, &ins);
  return ins ? hj__op_finish(t.graph, op, ins) : t;
}

hj_tensor_t hj_reduce_with(hj_graph_t *fn, const hj_tensor_t *xs, const hj_tensor_t *inits, int n,
                           const int64_t *dims, int ndims) {
  const char *op = "hj_reduce_with";
  hj_graph_t *g = n > 0 && xs ? xs[0].graph : NULL;
  if (!g) return HJ_NONE;
  if (n > 32 || !inits || ndims < 0 || (ndims && !dims))
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: NULL arrays or counts %d/%d", op, n, ndims);
  hj_tensor_t ts[64];
  memcpy(ts, xs, sizeof(hj_tensor_t) * (size_t)n);
  memcpy(ts + n, inits, sizeof(hj_tensor_t) * (size_t)n);
  hlo_instr *ins;
  hj_tensor_t t = ctl_call_op(op, HLO_OP_REDUCE, g, ts, 2 * n, &fn, 1, &ins);
  if (ins) ins->dims = hlo_ints_dup(g->m, dims, ndims);
  return ins ? hj__op_finish(t.graph, op, ins) : t;
}

hj_tensor_t hj_sort_with(hj_graph_t *cmp, const hj_tensor_t *xs, int n, int dim, bool stable) {
  const char *op = "hj_sort_with";
  hlo_instr *ins;
  hj_graph_t *g = n > 0 && xs ? xs[0].graph : NULL;
  hj_tensor_t t = ctl_call_op(op, HLO_OP_SORT, g, xs, n, &cmp, 1, &ins);
  if (ins) {
    int64_t d = dim < 0 ? dim + ins->operands[0]->shape.rank : dim;
    ins->dims = hlo_ints_dup(t.graph->m, &d, 1);
    ins->is_stable = stable;
  }
  return ins ? hj__op_finish(t.graph, op, ins) : t;
}

/* ---- closing captured tensors -------------------------------------------------------------- */

/* Fixes |s|'s root as ctl_callee does (the single output or a tuple of them). */
static bool cls_freeze(hj_graph_t *caller, const char *op, hj_graph_t *s) {
  if (!s || s->top != caller->top || s == s->top) {
    hj__graph_fail(caller, HJ_ERR_INVALID_ARG, "%s: graph '%s' is not a sub-graph that graph '%s' can call", op,
                   s ? hj__graph_name(s) : "NULL", hj__graph_name(caller));
    return false;
  }
  if (s->status != HJ_OK) {
    hj__graph_fail(caller, s->status, "%s: sub-graph '%s' has an error: %.400s", op, hj__graph_name(s), s->err);
    return false;
  }
  if (s->frozen) return true;
  int n = (int)arrlen(s->outputs);
  if (n == 0) {
    hj__graph_fail(caller, HJ_ERR_INVALID_ARG, "%s: sub-graph '%s' has no output", op, hj__graph_name(s));
    return false;
  }
  hlo_instr *root = n == 1 ? s->outputs[0] : hj__emit(s, op, HLO_OP_TUPLE, NULL, s->outputs, n);
  if (!root) return false;
  hlo_comp_set_root(s->comp, root);
  s->frozen = true;
  return true;
}

static int cls_index(const struct hj_capture *list, hj_tensor_t t) {
  for (ptrdiff_t k = 0; k < arrlen(list); k++)
    if (list[k].src.graph == t.graph && list[k].src.id == t.id) return (int)k;
  return -1;
}

static hlo_instr *cls_gte(hlo_comp *c, hlo_instr *p, int64_t i, const hlo_shape *s) {
  hlo_instr *g = hlo_instr_new(c, HLO_OP_GET_TUPLE_ELEMENT, NULL, s, &p, 1);
  if (g) g->index = i;
  return g;
}

/* Retypes |s|'s single parameter to (T, C...) per |list| (the shared capture list) and
   rewires it; |pass_through|: the root becomes (root, C...). */
static bool cls_retype(hj_graph_t *caller, const char *op, hj_graph_t *s, const struct hj_capture *list,
                       bool pass_through) {
  hlo_comp *c = s->comp;
  hlo_module *m = s->m;
  if (arrlen(c->params) != 1 || !c->params[0]) {
    hj__graph_fail(caller, HJ_ERR_INVALID_ARG, "%s: sub-graph '%s' must take exactly one parameter to capture "
                   "tensors (it has %d)", op, hj__graph_name(s), (int)arrlen(c->params));
    return false;
  }
  hlo_instr *p = c->params[0];
  int nc = (int)arrlen(list);
  hlo_shape t = { .type = HLO_TUPLE, .ntuple = 1 + nc };
  t.tuple = hlo_alloc(m, sizeof(hlo_shape) * (size_t)(1 + nc));
  hlo_instr **gtes = hlo_alloc(m, sizeof(hlo_instr *) * (size_t)(1 + nc));
  if (!t.tuple || !gtes) return hj__graph_fail(caller, HJ_ERR_OOM, "%s: out of memory", op), false;
  t.tuple[0] = p->shape;
  for (int j = 0; j < nc; j++) t.tuple[1 + j] = hlo_shape_dup(m, &hj__tensor_instr(op, list[j].src)->shape);
  hlo_shape old = p->shape;
  p->shape = hlo_shape_dup(m, &t);
  hlo_instr *g0 = cls_gte(c, p, 0, &old);
  if (!g0) return hj__graph_fail(caller, HJ_ERR_OOM, "%s: out of memory", op), false;
  hlo_replace_all_uses(c, p, g0);      /* not g0's own operand */
  gtes[0] = c->root;
  for (int j = 0; j < nc; j++) gtes[1 + j] = NULL;
  for (ptrdiff_t k = 0; k < arrlen(s->captures); k++) {     /* stand-in -> gte(p, 1 + j) */
    hlo_instr *ins = s->captures[k].ins;
    int j = cls_index(list, s->captures[k].src);
    hlo_instr **ops = hlo_alloc(m, sizeof *ops);
    if (!ops) return hj__graph_fail(caller, HJ_ERR_OOM, "%s: out of memory", op), false;
    ops[0] = p;
    ins->op = HLO_OP_GET_TUPLE_ELEMENT;
    ins->operands = ops;
    ins->noperands = 1;
    ins->index = 1 + j;
    gtes[1 + j] = ins;
  }
  if (pass_through) {
    for (int j = 0; j < nc; j++)
      if (!gtes[1 + j] && !(gtes[1 + j] = cls_gte(c, p, 1 + j, &t.tuple[1 + j])))
        return hj__graph_fail(caller, HJ_ERR_OOM, "%s: out of memory", op), false;
    hlo_shape rs = { .type = HLO_TUPLE, .ntuple = 1 + nc, .tuple = t.tuple };
    rs.tuple[0] = c->root->shape;
    hlo_instr *r = hlo_instr_new(c, HLO_OP_TUPLE, NULL, &rs, gtes, 1 + nc);
    if (!r) return hj__graph_fail(caller, HJ_ERR_OOM, "%s: out of memory", op), false;
    hlo_comp_set_root(c, r);
  }
  if (hlo_comp_topo_sort(c) != HJ_OK) {
    hj__graph_fail(caller, HJ_ERR_INTERNAL, "%s: closing over sub-graph '%s' broke its order", op, hj__graph_name(s));
    return false;
  }
  return true;
}

/* The sources of |list| as tensors, after |first|. */
static hj_tensor_t *cls_operands(hj_tensor_t first, const struct hj_capture *list) {
  hj_tensor_t *v = NULL;
  arrput(v, first);
  for (ptrdiff_t j = 0; j < arrlen(list); j++) arrput(v, list[j].src);
  return v;
}

static bool cls_same(const struct hj_capture *a, const struct hj_capture *b) {
  if (arrlen(a) != arrlen(b)) return false;
  for (ptrdiff_t j = 0; j < arrlen(a); j++)
    if (a[j].src.graph != b[j].src.graph || a[j].src.id != b[j].src.id) return false;
  return true;
}

int hj__close_while(hj_graph_t *cond, hj_graph_t *body, hj_tensor_t init, hj_tensor_t *ext) {
  const char *op = "hj_while";
  hj_graph_t *g = init.graph;
  *ext = (hj_tensor_t){ g, -1 };
  if (!g || !cond || !body || (!hj__has_captures(cond) && !hj__has_captures(body))) return 0;
  if (!cls_freeze(g, op, cond) || !cls_freeze(g, op, body)) return -1;
  if (cond->closed_as || body->closed_as) {
    if (cond->closed_as != HLO_OP_WHILE || body->closed_as != HLO_OP_WHILE || !cls_same(cond->captures, body->captures)) {
      hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: sub-graphs '%s' and '%s' capture tensors and were closed by "
                     "another op: use them as the same pair again", op, hj__graph_name(cond), hj__graph_name(body));
      return -1;
    }
  } else {
    struct hj_capture *list = NULL;       /* the union, body's first */
    for (ptrdiff_t k = 0; k < arrlen(body->captures); k++) arrput(list, body->captures[k]);
    for (ptrdiff_t k = 0; k < arrlen(cond->captures); k++)
      if (cls_index(list, cond->captures[k].src) < 0) arrput(list, cond->captures[k]);
    bool ok = cls_retype(g, op, cond, list, false) && cls_retype(g, op, body, list, true);
    for (int s = 0; ok && s < 2; s++) {   /* both keep the union, in order */
      hj_graph_t *sg = s ? body : cond;
      arrfree(sg->captures);
      for (ptrdiff_t k = 0; k < arrlen(list); k++) arrput(sg->captures, list[k]);
      sg->closed_as = HLO_OP_WHILE;
    }
    arrfree(list);
    if (!ok) return -1;
  }
  hj_tensor_t *v = cls_operands(init, body->captures);
  *ext = hj_tuple(g, v, (int)arrlen(v));
  arrfree(v);
  return hj_tensor_ok(*ext) ? 1 : -1;
}

int hj__close_branches(hj_tensor_t selector, hj_graph_t *const *branches, const hj_tensor_t *args, int n,
                       hj_tensor_t *ext) {
  const char *op = "hj_conditional";
  hj_graph_t *g = selector.graph;
  bool any = false;
  for (int b = 0; b < n; b++) any = any || hj__has_captures(branches[b]);
  if (!g || !any) return 0;
  for (int b = 0; b < n; b++) {
    hj_graph_t *s = branches[b];
    ext[b] = args[b];
    if (!hj__has_captures(s)) continue;
    if (!cls_freeze(g, op, s)) return -1;
    if (s->closed_as && s->closed_as != HLO_OP_CONDITIONAL) {
      hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: branch '%s' captures tensors and was closed by another op",
                     op, hj__graph_name(s));
      return -1;
    }
    if (!s->closed_as) {
      if (!cls_retype(g, op, s, s->captures, false)) return -1;
      s->closed_as = HLO_OP_CONDITIONAL;
    }
    hj_tensor_t *v = cls_operands(args[b], s->captures);
    ext[b] = hj_tuple(g, v, (int)arrlen(v));
    arrfree(v);
    if (!hj_tensor_ok(ext[b])) return -1;
  }
  return 1;
}

int hj__close_call(hj_graph_t *caller, hj_graph_t *callee, const hj_tensor_t *args, int n,
                   hj_tensor_t **ext) {
  const char *op = "hj_call";
  *ext = NULL;
  if (!caller || !hj__has_captures(callee)) return 0;
  if (!cls_freeze(caller, op, callee)) return -1;
  if (callee->closed_as && callee->closed_as != HLO_OP_CALL) {
    hj__graph_fail(caller, HJ_ERR_INVALID_ARG, "%s: sub-graph '%s' captures tensors and was closed by another op",
                   op, hj__graph_name(callee));
    return -1;
  }
  if (!callee->closed_as) {
    for (ptrdiff_t k = 0; k < arrlen(callee->captures); k++) {
      hlo_instr *p = callee->captures[k].ins;
      p->index = callee->nparams++;
      arrput(callee->comp->params, p);
    }
    callee->closed_as = HLO_OP_CALL;
  }
  for (int i = 0; i < n; i++) arrput(*ext, args[i]);
  for (ptrdiff_t k = 0; k < arrlen(callee->captures); k++) arrput(*ext, callee->captures[k].src);
  return 1;
}
