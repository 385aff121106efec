/* passes/sort_lower.c — "sort-lower": every sort the kernels take is a stable one, and topk
   is a sort (after XLA's StableSortExpander and TopkDecomposer). The sort kernels
   (emitters/sort.c, gpu_sort.c) run a sorting network in place, which is not stable; the
   evaluator's sort is (eval_reduce.c: ties keep their input order, is_stable or not). So:

   1. topk(x), k > HLO_TOPK_KERNEL_MAX_K (smaller k have a kernel: emitters/topk.c)
                           ->  s = sort(x, iota), dims={last}, is_stable=true, comparator
      compare(a, b), direction=GT (largest) or LT, type=TOTALORDER on floats (the
      evaluator's order: -NaN < -inf < ... < -0 < +0 < ... < NaN); the result is
      tuple(slice(s.0, [..., 0:k]), slice(s.1, [..., 0:k])). Ties: lower index first, as
      lax.top_k.
   2. every sort: the comparator breaks ties by position. If no operand is an integer iota
      along the sort dim (argsort has one: JAX sorts (keys, iota)), one is appended (s32,
      or s64 past 2^31 elements) and dropped from the result. The new comparator is
          less(a, b) = cmp(a, b) || (!cmp(b, a) && pos(a) < pos(b))
      with |cmp|'s body cloned twice (operands swapped the second time), so a network
      that orders by |less| gives exactly the stable order: the evaluator's bits.
      Idempotent: a comparator this pass made (its name and shape) is left alone.
   Computations that are reducers, comparators or map bodies are not visited; the entry,
   while and conditional bodies, called and fused computations are. */
#include "passes.h"

typedef struct sol {
  hlo_comp *c;               /* where the new instructions go (before |before|) */
  const hlo_instr *before;
  hj_status st;
} sol;

static hlo_instr *sol_new(sol *L, hlo_comp *c, hlo_opcode op, const hlo_shape *s, hlo_instr **ops, int n) {
  if (L->st) return NULL;
  for (int k = 0; k < n; k++)
    if (!ops[k]) { L->st = HJ_ERR_OOM; return NULL; }
  hlo_instr *i = hlo_instr_new_before(c, c == L->c ? L->before : NULL, op, NULL, s, ops, n);
  if (!i) L->st = HJ_ERR_OOM;
  return i;
}

static hlo_instr *sol_param(sol *L, hlo_comp *c, hlo_type t, int i) {
  hlo_shape s = hlo_shape_scalar(t);
  hlo_instr *p = sol_new(L, c, HLO_OP_PARAMETER, &s, NULL, 0);
  if (p) {
    p->index = i;
    arrput(c->params, p);
  }
  return p;
}

static hlo_instr *sol_cmp(sol *L, hlo_comp *c, hlo_instr *a, hlo_instr *b, hlo_cmp_dir dir,
                          hlo_cmp_type ty) {
  hlo_shape s = hlo_shape_scalar(HLO_PRED);
  hlo_instr *ops[2] = { a, b };
  hlo_instr *r = sol_new(L, c, HLO_OP_COMPARE, &s, ops, 2);
  if (r) r->cmp_dir = dir, r->cmp_type = ty;
  return r;
}

static hlo_instr *sol_bin(sol *L, hlo_comp *c, hlo_opcode op, hlo_instr *a, hlo_instr *b) {
  hlo_shape s = hlo_shape_scalar(HLO_PRED);
  hlo_instr *ops[2] = { a, b };
  return sol_new(L, c, op, &s, ops, 2);
}

static hlo_comp *sol_comp(sol *L, const char *base) {
  hlo_module *m = L->c->module;
  char name[64];
  snprintf(name, sizeof name, "%s.%d", base, m->next_id++);
  hlo_comp *f = hlo_comp_new(m, name);
  if (!f) { L->st = HJ_ERR_OOM; return NULL; }
  hlo_module_insert_comp_before(m, f, L->c);   /* defined before its user, as printed text wants */
  return f;
}

/* Clones |src|'s body into |dst|, parameter i read as |args[i]|; returns the clone of the
   root (a pred scalar), NULL on failure (L->st set). */
static hlo_instr *sol_clone_body(sol *L, hlo_comp *dst, const hlo_comp *src, hlo_instr **args) {
  ptrdiff_t n = arrlen(src->instrs);
  hlo_instr **map = calloc((size_t)n + 1, sizeof *map);
  if (!map) { L->st = HJ_ERR_OOM; return NULL; }
  hlo_instr *root = NULL;
  for (ptrdiff_t i = 0; i < n && !L->st; i++) {
    const hlo_instr *y = src->instrs[i];
    hlo_instr *ops[64];
    if (y->op == HLO_OP_PARAMETER) {
      map[i] = args[y->index];
    } else if (y->noperands <= 64) {
      for (int k = 0; k < y->noperands; k++) {
        ptrdiff_t j = 0;
        while (j < i && src->instrs[j] != y->operands[k]) j++;
        ops[k] = j < i ? map[j] : NULL;
        if (!ops[k]) L->st = HJ_ERR_UNSUPPORTED;
      }
      if (!L->st && !(map[i] = hlo_instr_clone_into(dst, y, NULL, ops, y->calls))) L->st = HJ_ERR_OOM;
    } else {
      L->st = HJ_ERR_UNSUPPORTED;
    }
    if (y == src->root) root = map[i];
  }
  free(map);
  return L->st ? NULL : root;
}

/* This pass made the comparator: its name, and a root cmp || (!cmp' && p[2k] < p[2k+1]) over
   two parameters (a user's comparator may have the same shape: JAX's two-key comparator is
   lt || (eq && lt'), so the shape alone is not enough). */
static bool sol_is_stable_comp(const hlo_comp *c) {
  const hlo_instr *r = c->root;
  if (!r || !c->name || strncmp(c->name, "sort_stable.", 12) || r->op != HLO_OP_OR) return false;
  const hlo_instr *a = r->operands[1];
  if (a->op != HLO_OP_AND || a->operands[0]->op != HLO_OP_NOT) return false;
  const hlo_instr *lt = a->operands[1];
  return lt->op == HLO_OP_COMPARE && lt->cmp_dir == HLO_CMP_LT && lt->operands[0]->op == HLO_OP_PARAMETER &&
         lt->operands[1]->op == HLO_OP_PARAMETER && lt->operands[0]->index % 2 == 0 &&
         lt->operands[1]->index == lt->operands[0]->index + 1;
}

/* Operand |k| of |s| is an integer iota along the sort dim whose type holds every position
   (an s8 iota of 300 wraps): its position. */
static bool sol_is_pos(const hlo_instr *s, int k) {
  const hlo_instr *x = s->operands[k];
  if (x->op != HLO_OP_IOTA || x->index != s->dims.v[0] || !hlo_type_is_int(x->shape.type) ||
      !hlo_shape_layout_is_default(&x->shape))
    return false;
  int bits = 8 * hlo_type_size(x->shape.type) - (hlo_type_class_of(x->shape.type) == HLO_CLASS_UINT ? 0 : 1);
  uint64_t max = bits >= 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1;
  return (uint64_t)x->shape.dims[x->index] - 1 <= max;
}

/* less(a, b) over the sort's operands (and the position operand |pos|, maybe new). */
static hlo_comp *sol_stable_comp(sol *L, const hlo_instr *s, int nops, int pos, hlo_type pt) {
  const hlo_comp *cmp = s->calls[0];
  hlo_comp *f = sol_comp(L, "sort_stable");
  if (!f) return NULL;
  hlo_instr *a[130], *b[130];   /* a: the comparator's own order; b: lhs and rhs swapped */
  for (int k = 0; k < nops && !L->st; k++) {
    hlo_type t = k < s->noperands ? s->operands[k]->shape.type : pt;
    hlo_instr *l = sol_param(L, f, t, 2 * k), *r = sol_param(L, f, t, 2 * k + 1);
    a[2 * k] = l, a[2 * k + 1] = r, b[2 * k] = r, b[2 * k + 1] = l;
  }
  if (L->st) return NULL;
  hlo_instr *ab = sol_clone_body(L, f, cmp, a), *ba = ab ? sol_clone_body(L, f, cmp, b) : NULL;
  hlo_shape ps = hlo_shape_scalar(HLO_PRED);
  hlo_instr *nba = ba ? sol_new(L, f, HLO_OP_NOT, &ps, &ba, 1) : NULL;
  hlo_cmp_type ct = hlo_type_class_of(pt) == HLO_CLASS_UINT ? HLO_CMPT_UNSIGNED : HLO_CMPT_SIGNED;
  hlo_instr *plt = ab ? sol_cmp(L, f, a[2 * pos], a[2 * pos + 1], HLO_CMP_LT, ct) : NULL;
  hlo_instr *tie = nba && plt ? sol_bin(L, f, HLO_OP_AND, nba, plt) : NULL;
  hlo_instr *root = tie ? sol_bin(L, f, HLO_OP_OR, ab, tie) : NULL;
  if (!root) {
    if (!L->st) L->st = HJ_ERR_OOM;
    return NULL;
  }
  hlo_comp_set_root(f, root);
  return f;
}

/* Rewrites sort |s| (in L->c) to a stable one; returns the instruction that replaces it. */
static hlo_instr *sol_stabilize(sol *L, hlo_instr *s) {
  hlo_comp *c = L->c;
  int n = s->noperands, pos = -1;
  for (int k = 0; k < n && pos < 0; k++)
    if (sol_is_pos(s, k)) pos = k;
  const hlo_shape *xs = &s->operands[0]->shape;
  int64_t dim = s->dims.v[0];
  hlo_type pt = pos >= 0 ? s->operands[pos]->shape.type
                         : xs->dims[dim] - 1 > INT32_MAX ? HLO_S64 : HLO_S32;
  int nops = pos >= 0 ? n : n + 1;
  if (nops > 64) return s;
  hlo_comp *f = sol_stable_comp(L, s, nops, pos >= 0 ? pos : n, pt);
  if (!f) return NULL;
  if (pos >= 0) {   /* the comparator alone changes */
    hlo_instr_set_calls(s, &f, 1);
    return s;
  }
  hlo_shape is = hlo_shape_array(pt, xs->rank, xs->dims);
  hlo_instr *io = sol_new(L, c, HLO_OP_IOTA, &is, NULL, 0);
  if (!io) return NULL;
  io->index = dim;
  hlo_instr *ops[65];
  hlo_shape el[65];
  for (int k = 0; k < n; k++) {
    ops[k] = s->operands[k];
    el[k] = hlo_shape_array(s->operands[k]->shape.type, xs->rank, xs->dims);
  }
  ops[n] = io;
  el[n] = is;
  hlo_shape ts = { .type = HLO_TUPLE, .ntuple = n + 1, .tuple = el };
  hlo_instr *ns = sol_new(L, c, HLO_OP_SORT, &ts, ops, n + 1);
  if (!ns) return NULL;
  ns->dims = hlo_ints_dup(c->module, &dim, 1);
  ns->is_stable = true;
  if (!ns->dims.v) { L->st = HJ_ERR_OOM; return NULL; }
  hlo_instr_set_calls(ns, &f, 1);
  hlo_instr *g[64];
  for (int k = 0; k < n; k++) {
    g[k] = sol_new(L, c, HLO_OP_GET_TUPLE_ELEMENT, &el[k], &ns, 1);
    if (g[k]) g[k]->index = k;
  }
  if (L->st) return NULL;
  if (n == 1 && s->shape.type != HLO_TUPLE) return g[0];
  hlo_shape rs = { .type = HLO_TUPLE, .ntuple = n, .tuple = el };
  return sol_new(L, c, HLO_OP_TUPLE, &rs, g, n);
}

/* topk(x) -> tuple(slice(sort(x, iota).0), slice(.1)); the sort is stabilised later. */
static hlo_instr *sol_topk(sol *L, hlo_instr *tk, hlo_instr **sort_out) {
  hlo_comp *c = L->c;
  hlo_instr *x = tk->operands[0];
  const hlo_shape *xs = &x->shape;
  int r = xs->rank;
  int64_t dim = r - 1;
  hlo_type t = xs->type;
  hlo_shape is = hlo_shape_array(HLO_S32, r, xs->dims);
  hlo_instr *io = sol_new(L, c, HLO_OP_IOTA, &is, NULL, 0);
  if (io) io->index = dim;
  hlo_comp *f = sol_comp(L, "topk_cmp");
  if (!f || !io) return NULL;
  hlo_instr *a = sol_param(L, f, t, 0), *b = sol_param(L, f, t, 1);
  sol_param(L, f, HLO_S32, 2);
  sol_param(L, f, HLO_S32, 3);
  hlo_type_class cl = hlo_type_class_of(t);
  hlo_cmp_type ct = cl == HLO_CLASS_FLOAT ? HLO_CMPT_TOTALORDER : cl == HLO_CLASS_UINT ? HLO_CMPT_UNSIGNED
                                                                                      : HLO_CMPT_SIGNED;
  if (t == HLO_PRED) ct = HLO_CMPT_UNSIGNED;
  hlo_instr *root = sol_cmp(L, f, a, b, tk->largest ? HLO_CMP_GT : HLO_CMP_LT, ct);
  if (!root) return NULL;
  hlo_comp_set_root(f, root);
  hlo_shape el[2] = { hlo_shape_array(t, r, xs->dims), is };
  hlo_shape ts = { .type = HLO_TUPLE, .ntuple = 2, .tuple = el };
  hlo_instr *ops[2] = { x, io };
  hlo_instr *s = sol_new(L, c, HLO_OP_SORT, &ts, ops, 2);
  if (!s) return NULL;
  s->dims = hlo_ints_dup(c->module, &dim, 1);
  s->is_stable = true;
  if (!s->dims.v) { L->st = HJ_ERR_OOM; return NULL; }
  hlo_instr_set_calls(s, &f, 1);
  *sort_out = s;
  int64_t lo[HLO_MAX_RANK] = { 0 }, hi[HLO_MAX_RANK], one[HLO_MAX_RANK];
  for (int d = 0; d < r; d++) hi[d] = xs->dims[d], one[d] = 1;
  hi[dim] = tk->k;
  hlo_instr *sl[2];
  for (int e = 0; e < 2; e++) {
    hlo_instr *g = sol_new(L, c, HLO_OP_GET_TUPLE_ELEMENT, &el[e], &s, 1);
    if (g) g->index = e;
    hlo_shape ss = el[e];
    ss.dims[dim] = tk->k;
    hlo_shape_set_default_layout(&ss);
    sl[e] = g ? sol_new(L, c, HLO_OP_SLICE, &ss, &g, 1) : NULL;
    if (sl[e]) {
      sl[e]->slice_start = hlo_ints_dup(c->module, lo, r);
      sl[e]->slice_limit = hlo_ints_dup(c->module, hi, r);
      sl[e]->slice_stride = hlo_ints_dup(c->module, one, r);
      if (!sl[e]->slice_start.v || !sl[e]->slice_limit.v || !sl[e]->slice_stride.v) L->st = HJ_ERR_OOM;
    }
  }
  if (L->st) return NULL;
  return sol_new(L, c, HLO_OP_TUPLE, &tk->shape, sl, 2);
}

static bool sol_sort_ok(const hlo_instr *s) {
  return s->noperands >= 1 && s->dims.n == 1 && s->ncalls == 1 && s->calls[0] &&
         s->calls[0]->root && !sol_is_stable_comp(s->calls[0]);
}

static bool sol_topk_ok(const hlo_instr *t) {
  const hlo_shape *xs = &t->operands[0]->shape;
  return xs->rank >= 1 && t->k > HLO_TOPK_KERNEL_MAX_K && xs->dims[xs->rank - 1] <= INT32_MAX && t->k >= 0 &&
         t->k <= xs->dims[xs->rank - 1] && hlo_shape_layout_is_default(xs) && t->shape.type == HLO_TUPLE;
}

static hj_status sol_comp_run(hlo_comp *c, bool *changed) {
  hlo_instr **todo = NULL;
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++) {
    hlo_instr *x = c->instrs[i];
    if ((x->op == HLO_OP_SORT && sol_sort_ok(x)) || (x->op == HLO_OP_TOPK && sol_topk_ok(x)))
      arrput(todo, x);
  }
  hj_status st = HJ_OK;
  for (ptrdiff_t i = 0; i < arrlen(todo) && !st; i++) {
    hlo_instr *x = todo[i], *s = x;
    sol L = { c, x, HJ_OK };
    hlo_instr *rep = x;
    if (x->op == HLO_OP_TOPK) {
      rep = sol_topk(&L, x, &s);
      if (!rep) break;
    }
    L.before = rep;
    hlo_instr *srep = sol_stabilize(&L, s);
    if (!srep || L.st) { st = L.st ? L.st : HJ_ERR_OOM; break; }
    if (srep != s) {
      hlo_replace_all_uses(c, s, srep);
      if (c->root == s) hlo_comp_set_root(c, srep);
      hlo_remove_instr(c, s);
    }
    if (rep != x) {
      hlo_replace_all_uses(c, x, rep);
      if (c->root == x) hlo_comp_set_root(c, rep);
      hlo_remove_instr(c, x);
    }
    *changed = true;
    if (L.st) st = L.st;
  }
  arrfree(todo);
  if (!st) st = hlo_comp_topo_sort(c);
  return st;
}

hj_status hlo_pass_sort_lower(hlo_pass_ctx *pc, hlo_module *m, bool *changed) {
  (void)pc;
  bool any = false;
  hlo_comp **run = NULL;
  hj_status st = hlo_module_reachable(m, &run);   /* the computations reached from the entry */
  for (ptrdiff_t i = 0; i < arrlen(run) && !st; i++) {
    hlo_comp *c = run[i];
    bool inner = false;   /* a fused, reducer or comparator computation: not ours */
    for (ptrdiff_t j = 0; j < arrlen(run) && !inner; j++)
      for (ptrdiff_t k = 0; k < arrlen(run[j]->instrs) && !inner; k++) {
        const hlo_instr *u = run[j]->instrs[k];
        if (u->op == HLO_OP_WHILE || u->op == HLO_OP_CONDITIONAL || u->op == HLO_OP_CALL || u->op == HLO_OP_FUSION)
          continue;   /* their computations run as kernels or thunks too (a parsed module may hold fusions) */
        for (int q = 0; q < u->ncalls; q++) inner |= u->calls[q] == c;
      }
    if (!inner) st = sol_comp_run(c, &any);
  }
  arrfree(run);
  if (changed) *changed = any;
  if (st) return hj__err(m->ctx, st, "pass sort-lower: %s", st == HJ_ERR_OOM ? "out of memory"
                                                                              : "a comparator it cannot clone");
  return HJ_OK;
}
