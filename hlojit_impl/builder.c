/* builder.c — the graph builder: hj_graph_* and every primitive op of hlojit.h.

   Each op resolves its operand tensors to instructions of one graph, checks what its
   message must name (dtypes, NumPy broadcasting), appends an hlo_instr to the graph's
   computation and asks shape inference (hlo_infer_shape) for the result shape. On any
   error the instruction is dropped, the graph records its first error, e.g.
     "hj_add: shapes f32[4,8] and f32[3] do not broadcast (graph 'mlp', op #3)"
   and the op returns the poisoned tensor {g, -1}. Ops on poisoned tensors return poisoned
   tensors and add no message, so the first error is the one reported.

   Invariants
   - g->vals[id] is an instruction of g->comp (helper instructions get ids too).
   - A sub-graph is frozen when a call-like op first uses it: its root is fixed (the single
     output or a tuple of them) and it takes no more ops. A graph can only call frozen
     graphs, so calls form a DAG; hj__graph_module (builder_module part below) copies the
     module in callee-first order with the entry last, as XLA prints modules.

   Broadcasting (NumPy): shapes align from the right; a size-1 dim stretches. HLO's
   broadcast maps operand dims to result dims one to one without stretching, so a
   stretched size-1 dim is first reshaped away. Example: a f32[4,1,3] + b f32[5,3]:
     result f32[4,5,3]; a -> reshape f32[4,3] -> broadcast dims={0,2};
     b -> broadcast dims={1,2}; then add. */
#include "internal.h"
#include <math.h>
#include <stdlib.h>

#define BLD_MSG 700

static hj_tensor_t bld_poison(hj_graph_t *g) { return (hj_tensor_t){ g, -1 }; }

static const char *bld_graph_name(const hj_graph_t *g) {
  return g == g->top ? g->m->name : g->comp->name;
}

/* ---- errors and handles ------------------------------------------------------------ */

static void bld_record(hj_graph_t *g, hj_status code, const char *msg) {
  if (g->status != HJ_OK) return;
  g->status = code;
  snprintf(g->err, sizeof g->err, "%s", msg);
}

hj_tensor_t hj__graph_fail(hj_graph_t *g, hj_status code, const char *fmt, ...) {
  if (!g) return HJ_NONE;
  char msg[BLD_MSG], full[sizeof g->err];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(full, sizeof full, "%s (graph '%.100s', op #%d)", msg, bld_graph_name(g),
           (int)arrlen(g->vals));
  bld_record(g, code, full);
  if (g->top != g) bld_record(g->top, code, full);
  hj__err(g->ctx, code, "%s", full);
  return bld_poison(g);
}

static hlo_instr *bld_peek(hj_tensor_t t) {
  if (!t.graph || t.id < 0 || t.id >= arrlen(t.graph->vals)) return NULL;
  return t.graph->vals[t.id];
}

hlo_instr *hj__tensor_instr(const char *op, hj_tensor_t t) {
  hj_graph_t *g = t.graph;
  if (!g || t.id < 0) return NULL;
  if (t.id >= arrlen(g->vals)) {
    hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: bad tensor handle (id %d; graph '%s' has %d)",
                   op, (int)t.id, bld_graph_name(g), (int)arrlen(g->vals));
    return NULL;
  }
  return g->vals[t.id];
}

bool hj__operands(const char *op, const hj_tensor_t *ts, int n, hj_graph_t **gout,
                  hlo_instr **out) {
  hj_graph_t *g = NULL;
  for (int i = 0; i < n && !g; i++) g = ts[i].graph;
  *gout = g;
  if (!g) return false;
  for (int i = 0; i < n; i++) {
    if (ts[i].graph == g) {
      if (!(out[i] = hj__tensor_instr(op, ts[i]))) return false;
    } else if (!ts[i].graph) {
      hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: operand %d is HJ_NONE or has no graph", op, i);
      return false;
    } else {
      hj__graph_fail(g, HJ_ERR_INVALID_ARG,
                     "%s: operand %d belongs to graph '%s', not to graph '%s'", op, i,
                     bld_graph_name(ts[i].graph), bld_graph_name(g));
      return false;
    }
  }
  return true;
}

const char *hj__tensor_str(hj_tensor_t t, char *buf, size_t n) {
  hlo_instr *ins = bld_peek(t);
  if (!ins) {
    snprintf(buf, n, "<poisoned>");
    return buf;
  }
  return hlo_shape_str(&ins->shape, buf, n);
}

/* ---- shapes ----------------------------------------------------------------------------- */

bool hj__shape_to_hlo(hj_dtype_t t, hj_shape_t s, hlo_shape *out) {
  if ((unsigned)t >= HJ_DTYPE_COUNT || s.rank < 0 || s.rank > HJ_MAX_RANK) return false;
  int64_t d[HJ_MAX_RANK] = { 0 };
  for (int i = 0; i < s.rank; i++) d[i] = s.dims[i] < 0 ? -s.dims[i] : s.dims[i];
  *out = hlo_shape_array((hlo_type)t, s.rank, d);
  for (int i = 0; i < s.rank; i++) out->dynamic[i] = s.dims[i] < 0;
  return true;
}

hj_shape_t hj__shape_from_hlo(const hlo_shape *s) {
  hj_shape_t r = { 0 };
  if (!hlo_shape_is_array(s)) return r;
  r.rank = s->rank;
  for (int i = 0; i < s->rank; i++) r.dims[i] = s->dynamic[i] ? -s->dims[i] : s->dims[i];
  return r;
}

static bool bld_same_dims(const hlo_shape *a, const hlo_shape *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

/* ---- instruction emission -------------------------------------------------------------- */

hlo_instr *hj__op_begin(hj_graph_t *g, const char *op, hlo_opcode opc, const hlo_shape *declared,
                        hlo_instr *const *operands, int n) {
  if (g->frozen) {
    hj__graph_fail(g, HJ_ERR_INVALID_ARG,
                   "%s: sub-graph '%s' is already used by a call and takes no more ops", op,
                   bld_graph_name(g));
    return NULL;
  }
  hlo_instr *ins = hlo_instr_new(g->comp, opc, NULL, declared, operands, n);
  if (!ins) hj__graph_fail(g, HJ_ERR_OOM, "%s: out of memory", op);
  return ins;
}

/* Removes the (last) instruction |ins| of g's computation; its memory stays in the arena. */
static void bld_drop(hj_graph_t *g, hlo_instr *ins) {
  hlo_comp *c = g->comp;
  if (arrlen(c->instrs) && c->instrs[arrlen(c->instrs) - 1] == ins) arrpop(c->instrs);
}

hj_tensor_t hj__op_finish(hj_graph_t *g, const char *op, hlo_instr *ins) {
  if (!ins) return bld_poison(g);
  hlo_shape s = ins->shape;
  if (ins->op != HLO_OP_PARAMETER && ins->op != HLO_OP_CONSTANT) {
    hj_status st = hlo_infer_shape(g->ctx, ins, &s);
    if (st != HJ_OK) {
      char why[BLD_MSG - 64];
      snprintf(why, sizeof why, "%.600s", g->ctx->err);
      bld_drop(g, ins);
      return hj__graph_fail(g, st, "%s: %s", op, why);
    }
  }
  ins->shape = hlo_shape_dup(g->m, &s);
  arrput(g->vals, ins);
  return (hj_tensor_t){ g, (int32_t)(arrlen(g->vals) - 1) };
}

/* hj__op_finish for helper instructions: the instruction, or NULL. */
static hlo_instr *bld_finish_ins(hj_graph_t *g, const char *op, hlo_instr *ins) {
  hj_tensor_t t = hj__op_finish(g, op, ins);
  return t.id < 0 ? NULL : g->vals[t.id];
}

static hlo_instr *bld_emit(hj_graph_t *g, const char *op, hlo_opcode opc, const hlo_shape *decl,
                           hlo_instr *const *operands, int n) {
  return bld_finish_ins(g, op, hj__op_begin(g, op, opc, decl, operands, n));
}

/* A constant of |shape| (array, static) with |data| copied (pred normalised to 0/1). */
static hlo_instr *bld_const(hj_graph_t *g, const char *op, const hlo_shape *shape,
                            const void *data) {
  hlo_literal *lit = hlo_alloc(g->m, sizeof *lit);
  int64_t nb = hlo_shape_bytes(shape);
  uint8_t *d = lit ? hlo_alloc(g->m, (size_t)nb) : NULL;
  if (!d) {
    hj__graph_fail(g, HJ_ERR_OOM, "%s: out of memory for a constant", op);
    return NULL;
  }
  memcpy(d, data, (size_t)nb);
  if (shape->type == HLO_PRED)
    for (int64_t i = 0; i < nb; i++) d[i] = d[i] != 0;
  lit->shape = *shape;
  lit->data = d;
  lit->nbytes = nb;
  hlo_instr *ins = hj__op_begin(g, op, HLO_OP_CONSTANT, shape, NULL, 0);
  if (ins) ins->literal = lit;
  return bld_finish_ins(g, op, ins);
}

static hlo_instr *bld_scalar_const(hj_graph_t *g, const char *op, hlo_type t, double v) {
  uint64_t buf = 0;
  hlo_store_f64(t, &buf, 0, v);
  hlo_shape s = hlo_shape_scalar(t);
  return bld_const(g, op, &s, &buf);
}

/* |x| broadcast to |target|'s dims (NumPy rules, already checked); see the top comment. */
static hlo_instr *bld_expand(hj_graph_t *g, const char *op, hlo_instr *x, const hlo_shape *target) {
  const hlo_shape *xs = &x->shape;
  if (bld_same_dims(xs, target)) return x;
  int off = target->rank - xs->rank, nk = 0;
  int64_t keep[HLO_MAX_RANK], map[HLO_MAX_RANK];
  bool dyn[HLO_MAX_RANK];
  for (int i = 0; i < xs->rank; i++) {
    if (xs->dims[i] != target->dims[off + i]) continue;
    dyn[nk] = xs->dynamic[i];
    keep[nk] = xs->dims[i];
    map[nk++] = off + i;
  }
  if (nk < xs->rank) {
    hlo_shape r = hlo_shape_array(xs->type, nk, keep);
    memcpy(r.dynamic, dyn, sizeof(bool) * (size_t)nk);
    if (!(x = bld_emit(g, op, HLO_OP_RESHAPE, &r, &x, 1))) return NULL;
  }
  hlo_shape b = hlo_shape_array(x->shape.type, target->rank, target->dims);
  memcpy(b.dynamic, target->dynamic, sizeof b.dynamic);
  hlo_instr *ins = hj__op_begin(g, op, HLO_OP_BROADCAST, &b, &x, 1);
  if (ins) ins->dims = hlo_ints_dup(g->m, map, nk);
  return bld_finish_ins(g, op, ins);
}

/* NumPy broadcast of the |n| operands' dims into |out| (type of operand 0). */
static bool bld_bcast_shape(hlo_instr *const *x, int n, hlo_shape *out) {
  int rank = 0;
  for (int i = 0; i < n; i++)
    if (x[i]->shape.rank > rank) rank = x[i]->shape.rank;
  int64_t d[HLO_MAX_RANK] = { 0 };
  bool dyn[HLO_MAX_RANK] = { 0 };
  for (int k = 0; k < rank; k++) {
    d[k] = 1;
    for (int i = 0; i < n; i++) {
      const hlo_shape *s = &x[i]->shape;
      int j = k - (rank - s->rank);
      if (j < 0 || s->dims[j] == 1) continue;
      if (d[k] != 1 && d[k] != s->dims[j]) return false;
      d[k] = s->dims[j];
      dyn[k] = dyn[k] || s->dynamic[j];
    }
  }
  *out = hlo_shape_array(x[0]->shape.type, rank, d);
  memcpy(out->dynamic, dyn, sizeof dyn);
  return true;
}

/* Checks that the operands are arrays and broadcasts them all to one shape, in place. */
static bool bld_bcast_all(hj_graph_t *g, const char *op, hlo_instr **x, int n) {
  char s[3][128];
  for (int i = 0; i < n; i++)
    if (!hlo_shape_is_array(&x[i]->shape)) {
      hj__graph_fail(g, HJ_ERR_SHAPE, "%s: operand %d is not an array (%s)", op, i,
                     hlo_shape_str(&x[i]->shape, s[0], sizeof s[0]));
      return false;
    }
  hlo_shape out;
  if (!bld_bcast_shape(x, n, &out)) {
    for (int i = 0; i < n && i < 3; i++) hlo_shape_str(&x[i]->shape, s[i], sizeof s[i]);
    if (n == 2) hj__graph_fail(g, HJ_ERR_SHAPE, "%s: shapes %s and %s do not broadcast", op, s[0], s[1]);
    else hj__graph_fail(g, HJ_ERR_SHAPE, "%s: shapes %s, %s and %s do not broadcast", op, s[0], s[1], s[2]);
    return false;
  }
  for (int i = 0; i < n; i++)
    if (!(x[i] = bld_expand(g, op, x[i], &out))) return false;
  return true;
}

static bool bld_same_type(hj_graph_t *g, const char *op, hlo_instr *a, hlo_instr *b) {
  if (a->shape.type == b->shape.type) return true;
  char s0[128], s1[128];
  hj__graph_fail(g, HJ_ERR_SHAPE, "%s: dtypes %s and %s differ (%s and %s)", op,
                 hlo_type_name(a->shape.type), hlo_type_name(b->shape.type),
                 hlo_shape_str(&a->shape, s0, sizeof s0), hlo_shape_str(&b->shape, s1, sizeof s1));
  return false;
}

/* ---- graphs ------------------------------------------------------------------------------- */

/* |name| as an HLO identifier ([A-Za-z_][A-Za-z0-9_.-]*) into |buf|. */
static const char *bld_ident(const char *name, const char *dflt, char *buf, size_t n) {
  if (!name || !*name) name = dflt;
  size_t j = 0;
  if (!((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z') || name[0] == '_'))
    buf[j++] = '_';
  for (size_t i = 0; name[i] && j + 1 < n && i < 100; i++) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    buf[j++] = ok ? c : '_';
  }
  buf[j] = 0;
  return buf;
}

/* A computation named |name| (made unique in the module with a ".N" suffix). */
static hlo_comp *bld_comp(hlo_module *m, const char *name) {
  char base[128], buf[160];
  bld_ident(name, "comp", base, sizeof base);
  snprintf(buf, sizeof buf, "%s", base);
  for (int k = 1; hlo_module_find_comp(m, buf); k++) snprintf(buf, sizeof buf, "%s.%d", base, k);
  return hlo_comp_new(m, buf);
}

static hj_graph_t *bld_graph_new(hj_ctx_t *ctx) {
  hj_graph_t *g = hj__alloc(ctx, sizeof *g);
  if (g) memset(g, 0, sizeof *g);
  if (g) g->ctx = ctx;
  return g;
}

hj_status hj_graph_create(hj_ctx_t *ctx, const char *name, hj_graph_t **out) {
  if (!out) return hj__err(ctx, HJ_ERR_INVALID_ARG, "hj_graph_create: out is NULL");
  *out = NULL;
  if (!ctx) return HJ_ERR_INVALID_ARG;
  char id[128];
  hj_graph_t *g = bld_graph_new(ctx);
  if (!g) return hj__err(ctx, HJ_ERR_OOM, "hj_graph_create: out of memory");
  g->top = g;
  g->m = hlo_module_new(ctx, bld_ident(name, "graph", id, sizeof id));
  if (g->m) g->comp = bld_comp(g->m, "main");
  if (!g->m || !g->comp) {
    hlo_module_free(g->m);
    hj__free(ctx, g);
    return hj__err(ctx, HJ_ERR_OOM, "hj_graph_create: out of memory");
  }
  *out = g;
  return HJ_OK;
}

hj_status hj_graph_create_sub(hj_graph_t *parent, const char *name, hj_graph_t **out) {
  if (!out) return hj__err(parent ? parent->ctx : NULL, HJ_ERR_INVALID_ARG,
                           "hj_graph_create_sub: out is NULL");
  *out = NULL;
  if (!parent) return HJ_ERR_INVALID_ARG;
  hj_graph_t *top = parent->top, *g = bld_graph_new(parent->ctx);
  if (!g) return hj__err(parent->ctx, HJ_ERR_OOM, "hj_graph_create_sub: out of memory");
  g->top = top;
  g->m = top->m;
  if (!(g->comp = bld_comp(top->m, name ? name : "sub"))) {
    hj__free(parent->ctx, g);
    return hj__err(parent->ctx, HJ_ERR_OOM, "hj_graph_create_sub: out of memory");
  }
  arrput(top->subs, g);
  *out = g;
  return HJ_OK;
}

static void bld_graph_free(hj_graph_t *g) {
  arrfree(g->vals);
  arrfree(g->outputs);
  hj__free(g->ctx, g);
}

void hj_graph_destroy(hj_graph_t *g) {
  if (!g || g->top != g) return; /* sub-graphs die with their top graph */
  for (ptrdiff_t i = 0; i < arrlen(g->subs); i++) bld_graph_free(g->subs[i]);
  arrfree(g->subs);
  hlo_module_free(g->m);
  bld_graph_free(g);
}

hj_status hj_graph_status(const hj_graph_t *g) { return g ? g->status : HJ_ERR_INVALID_ARG; }
hj_ctx_t *hj_graph_ctx(const hj_graph_t *g) { return g ? g->ctx : NULL; }

hj_status hj_graph_output(hj_graph_t *g, hj_tensor_t t) {
  if (!g) return HJ_ERR_INVALID_ARG;
  if (t.graph != g)
    return hj__err(g->ctx, HJ_ERR_INVALID_ARG, "hj_graph_output: the tensor belongs to %s, not to graph '%s'",
                   t.graph ? "another graph" : "no graph", bld_graph_name(g));
  if (g->frozen)
    return hj__err(g->ctx, HJ_ERR_INVALID_ARG,
                   "hj_graph_output: sub-graph '%s' is already used by a call", bld_graph_name(g));
  hlo_instr *ins = hj__tensor_instr("hj_graph_output", t);
  if (!ins) {
    if (g->status != HJ_OK) return hj__err(g->ctx, g->status, "%s", g->err);
    return hj__err(g->ctx, HJ_ERR_INVALID_ARG, "hj_graph_output: the tensor is poisoned");
  }
  arrput(g->outputs, ins);
  return HJ_OK;
}

/* Fixes the root of sub-graph |sub| for its first use by |caller| (op |op|). */
static hlo_comp *bld_callee(hj_graph_t *caller, const char *op, hj_graph_t *sub) {
  if (!sub) {
    hj__graph_fail(caller, HJ_ERR_INVALID_ARG, "%s: sub-graph is NULL", op);
    return NULL;
  }
  if (sub->top != caller->top || sub == sub->top || sub == caller) {
    hj__graph_fail(caller, HJ_ERR_INVALID_ARG,
                   "%s: graph '%s' is not a sub-graph that graph '%s' can call", op,
                   bld_graph_name(sub), bld_graph_name(caller));
    return NULL;
  }
  if (sub->status != HJ_OK) {
    hj__graph_fail(caller, sub->status, "%s: sub-graph '%s' has an error: %.400s", op,
                   bld_graph_name(sub), sub->err);
    return NULL;
  }
  if (sub->frozen) return sub->comp;
  int n = (int)arrlen(sub->outputs);
  if (n == 0) {
    hj__graph_fail(caller, HJ_ERR_INVALID_ARG, "%s: sub-graph '%s' has no output", op,
                   bld_graph_name(sub));
    return NULL;
  }
  hlo_instr *root = n == 1 ? sub->outputs[0]
                           : bld_emit(sub, op, HLO_OP_TUPLE, NULL, sub->outputs, n);
  if (!root) return NULL;
  sub->comp->root = root;
  root->is_root = true;
  sub->frozen = true;
  return sub->comp;
}

/* ---- tensors ------------------------------------------------------------------------------ */

hj_dtype_t hj_tensor_dtype(hj_tensor_t t) {
  hlo_instr *ins = bld_peek(t);
  return ins && hlo_shape_is_array(&ins->shape) ? (hj_dtype_t)ins->shape.type : HJ_DTYPE_COUNT;
}

hj_shape_t hj_tensor_shape(hj_tensor_t t) {
  hlo_instr *ins = bld_peek(t);
  return ins ? hj__shape_from_hlo(&ins->shape) : (hj_shape_t){ 0 };
}

bool hj_tensor_ok(hj_tensor_t t) { return bld_peek(t) != NULL; }

/* ---- leaves and constants ------------------------------------------------------------------ */

static hj_tensor_t bld_param(hj_graph_t *g, const char *op, const hlo_shape *s, const char *name) {
  char id[128], full[160];
  hlo_instr *ins = hj__op_begin(g, op, HLO_OP_PARAMETER, s, NULL, 0);
  if (!ins) return bld_poison(g);
  snprintf(full, sizeof full, "%s.%d", bld_ident(name, "p", id, sizeof id), ins->id);
  ins->name = hlo_strdup(g->m, full);
  ins->index = g->nparams++;
  arrput(g->comp->params, ins);
  return hj__op_finish(g, op, ins);
}

hj_tensor_t hj_param(hj_graph_t *g, hj_dtype_t t, hj_shape_t s, const char *name) {
  if (!g) return HJ_NONE;
  hlo_shape hs;
  if (!hj__shape_to_hlo(t, s, &hs))
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "hj_param: invalid dtype %d or rank %d", (int)t, s.rank);
  return bld_param(g, "hj_param", &hs, name);
}

hj_tensor_t hj_param_tuple(hj_graph_t *g, const hj_dtype_t *types, const hj_shape_t *shapes,
                           int n, const char *name) {
  if (!g) return HJ_NONE;
  if (n < 0 || (n > 0 && (!types || !shapes)))
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "hj_param_tuple: NULL types/shapes or n %d", n);
  hlo_shape s = { .type = HLO_TUPLE, .ntuple = n };
  s.tuple = n ? hlo_alloc(g->m, sizeof(hlo_shape) * (size_t)n) : NULL;
  if (n && !s.tuple) return hj__graph_fail(g, HJ_ERR_OOM, "hj_param_tuple: out of memory");
  for (int i = 0; i < n; i++)
    if (!hj__shape_to_hlo(types[i], shapes[i], &s.tuple[i]))
      return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "hj_param_tuple: element %d: invalid dtype %d or rank %d",
                            i, (int)types[i], shapes[i].rank);
  return bld_param(g, "hj_param_tuple", &s, name);
}

/* The tensor of |ins| (a recent instruction of |g|), or poisoned when NULL. */
static hj_tensor_t bld_tensor_of(hj_graph_t *g, hlo_instr *ins) {
  if (!ins) return bld_poison(g);
  for (ptrdiff_t i = arrlen(g->vals) - 1; i >= 0; i--)
    if (g->vals[i] == ins) return (hj_tensor_t){ g, (int32_t)i };
  return bld_poison(g);
}

hj_tensor_t hj_constant(hj_graph_t *g, hj_dtype_t t, hj_shape_t s, const void *data) {
  if (!g) return HJ_NONE;
  hlo_shape hs;
  if (!data || !hj__shape_to_hlo(t, s, &hs))
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "hj_constant: NULL data, invalid dtype %d or rank %d",
                          (int)t, s.rank);
  for (int i = 0; i < s.rank; i++)
    if (s.dims[i] < 0)
      return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "hj_constant: dynamic dim %d (constants are static)", i);
  return bld_tensor_of(g, bld_const(g, "hj_constant", &hs, data));
}

hj_tensor_t hj_scalar(hj_graph_t *g, hj_dtype_t t, double v) {
  if (!g) return HJ_NONE;
  if ((unsigned)t >= HJ_DTYPE_COUNT)
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "hj_scalar: invalid dtype %d", (int)t);
  return bld_tensor_of(g, bld_scalar_const(g, "hj_scalar", (hlo_type)t, v));
}

hj_tensor_t hj_full(hj_graph_t *g, hj_dtype_t t, hj_shape_t s, double v) {
  if (!g) return HJ_NONE;
  hlo_shape hs;
  if (!hj__shape_to_hlo(t, s, &hs))
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "hj_full: invalid dtype %d or rank %d", (int)t, s.rank);
  hlo_instr *c = bld_scalar_const(g, "hj_full", (hlo_type)t, v);
  return bld_tensor_of(g, c ? bld_expand(g, "hj_full", c, &hs) : NULL);
}

hj_tensor_t hj_iota(hj_graph_t *g, hj_dtype_t t, hj_shape_t s, int dim) {
  if (!g) return HJ_NONE;
  hlo_shape hs;
  if (!hj__shape_to_hlo(t, s, &hs) || dim < 0 || dim >= s.rank)
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "hj_iota: invalid dtype %d, rank %d or dim %d",
                          (int)t, s.rank, dim);
  hlo_instr *ins = hj__op_begin(g, "hj_iota", HLO_OP_IOTA, &hs, NULL, 0);
  if (ins) ins->index = dim;
  return hj__op_finish(g, "hj_iota", ins);
}

/* ---- elementwise ------------------------------------------------------------------------- */

static hj_tensor_t bld_unary(const char *op, hlo_opcode opc, hj_tensor_t x) {
  hj_graph_t *g;
  hlo_instr *a;
  if (!hj__operands(op, &x, 1, &g, &a)) return bld_poison(g);
  return hj__op_finish(g, op, hj__op_begin(g, op, opc, NULL, &a, 1));
}

#define BLD_UNARY(fn, OPC) \
  hj_tensor_t fn(hj_tensor_t x) { return bld_unary(#fn, HLO_OP_##OPC, x); }
BLD_UNARY(hj_abs, ABS)
BLD_UNARY(hj_neg, NEGATE)
BLD_UNARY(hj_exp, EXP)
BLD_UNARY(hj_expm1, EXPM1)
BLD_UNARY(hj_log, LOG)
BLD_UNARY(hj_log1p, LOG1P)
BLD_UNARY(hj_logistic, LOGISTIC)
BLD_UNARY(hj_tanh, TANH)
BLD_UNARY(hj_sqrt, SQRT)
BLD_UNARY(hj_rsqrt, RSQRT)
BLD_UNARY(hj_cbrt, CBRT)
BLD_UNARY(hj_sin, SIN)
BLD_UNARY(hj_cos, COS)
BLD_UNARY(hj_tan, TAN)
BLD_UNARY(hj_erf, ERF)
BLD_UNARY(hj_floor, FLOOR)
BLD_UNARY(hj_ceil, CEIL)
BLD_UNARY(hj_round_even, ROUND_EVEN)
BLD_UNARY(hj_round_afz, ROUND_AFZ)
BLD_UNARY(hj_sign, SIGN)
BLD_UNARY(hj_not, NOT)
BLD_UNARY(hj_is_finite, IS_FINITE)
BLD_UNARY(hj_popcnt, POPCNT)
BLD_UNARY(hj_clz, CLZ)
BLD_UNARY(hj_copy, COPY)
#undef BLD_UNARY

/* Binary op or compare (|dir| >= 0) with NumPy broadcasting; operands of one dtype. */
static hj_tensor_t bld_binary(const char *op, hlo_opcode opc, hj_tensor_t a, hj_tensor_t b, int dir) {
  hj_tensor_t ts[2] = { a, b };
  hlo_instr *x[2];
  hj_graph_t *g;
  if (!hj__operands(op, ts, 2, &g, x)) return bld_poison(g);
  if (hlo_shape_is_array(&x[0]->shape) && hlo_shape_is_array(&x[1]->shape) &&
      !bld_same_type(g, op, x[0], x[1]))
    return bld_poison(g);
  if (!bld_bcast_all(g, op, x, 2)) return bld_poison(g);
  hlo_instr *ins = hj__op_begin(g, op, opc, NULL, x, 2);
  if (ins && dir >= 0) ins->cmp_dir = (hlo_cmp_dir)dir;
  return hj__op_finish(g, op, ins);
}

#define BLD_BINARY(fn, OPC) \
  hj_tensor_t fn(hj_tensor_t a, hj_tensor_t b) { return bld_binary(#fn, HLO_OP_##OPC, a, b, -1); }
BLD_BINARY(hj_add, ADD)
BLD_BINARY(hj_sub, SUBTRACT)
BLD_BINARY(hj_mul, MULTIPLY)
BLD_BINARY(hj_div, DIVIDE)
BLD_BINARY(hj_rem, REMAINDER)
BLD_BINARY(hj_pow, POWER)
BLD_BINARY(hj_max, MAXIMUM)
BLD_BINARY(hj_min, MINIMUM)
BLD_BINARY(hj_atan2, ATAN2)
BLD_BINARY(hj_and, AND)
BLD_BINARY(hj_or, OR)
BLD_BINARY(hj_xor, XOR)
BLD_BINARY(hj_shl, SHL)
BLD_BINARY(hj_shr_arith, SHRA)
BLD_BINARY(hj_shr_logical, SHRL)
#undef BLD_BINARY

hj_tensor_t hj_compare(hj_tensor_t a, hj_tensor_t b, hj_cmp_t dir) {
  if ((unsigned)dir >= HJ_CMP_COUNT)
    return hj__graph_fail(a.graph ? a.graph : b.graph, HJ_ERR_INVALID_ARG,
                          "hj_compare: invalid direction %d", (int)dir);
  return bld_binary("hj_compare", HLO_OP_COMPARE, a, b, (int)dir);
}

/* select / clamp: three operands broadcast together; |same| pairs must share a dtype. */
static hj_tensor_t bld_ternary(const char *op, hlo_opcode opc, hj_tensor_t a, hj_tensor_t b,
                               hj_tensor_t c) {
  hj_tensor_t ts[3] = { a, b, c };
  hlo_instr *x[3];
  hj_graph_t *g;
  if (!hj__operands(op, ts, 3, &g, x)) return bld_poison(g);
  for (int i = 0; i < 3; i++)
    if (!hlo_shape_is_array(&x[i]->shape)) return bld_bcast_all(g, op, x, 3), bld_poison(g);
  if (opc == HLO_OP_SELECT && x[0]->shape.type != HLO_PRED) {
    char s[128];
    return hj__graph_fail(g, HJ_ERR_SHAPE, "%s: the predicate must be pred (got %s)", op,
                          hlo_shape_str(&x[0]->shape, s, sizeof s));
  }
  if ((opc == HLO_OP_CLAMP && !bld_same_type(g, op, x[0], x[1])) || !bld_same_type(g, op, x[1], x[2]))
    return bld_poison(g);
  if (!bld_bcast_all(g, op, x, 3)) return bld_poison(g);
  return hj__op_finish(g, op, hj__op_begin(g, op, opc, NULL, x, 3));
}

hj_tensor_t hj_select(hj_tensor_t p, hj_tensor_t t, hj_tensor_t f) {
  return bld_ternary("hj_select", HLO_OP_SELECT, p, t, f);
}
hj_tensor_t hj_clamp(hj_tensor_t lo, hj_tensor_t x, hj_tensor_t hi) {
  return bld_ternary("hj_clamp", HLO_OP_CLAMP, lo, x, hi);
}

static hj_tensor_t bld_convert(const char *op, hlo_opcode opc, hj_tensor_t x, hj_dtype_t t) {
  hj_graph_t *g;
  hlo_instr *a;
  if (!hj__operands(op, &x, 1, &g, &a)) return bld_poison(g);
  if ((unsigned)t >= HJ_DTYPE_COUNT || !hlo_shape_is_array(&a->shape))
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: invalid dtype %d or tuple operand", op, (int)t);
  hlo_shape s = a->shape;
  s.type = (hlo_type)t;
  return hj__op_finish(g, op, hj__op_begin(g, op, opc, &s, &a, 1));
}

hj_tensor_t hj_convert(hj_tensor_t x, hj_dtype_t t) {
  return bld_convert("hj_convert", HLO_OP_CONVERT, x, t);
}
hj_tensor_t hj_bitcast_convert(hj_tensor_t x, hj_dtype_t t) {
  return bld_convert("hj_bitcast_convert", HLO_OP_BITCAST_CONVERT, x, t);
}

/* ---- shape ops --------------------------------------------------------------------------- */

hj_tensor_t hj_broadcast_in_dim(hj_tensor_t x, hj_shape_t s, const int64_t *dims, int n) {
  const char *op = "hj_broadcast_in_dim";
  hj_graph_t *g;
  hlo_instr *a;
  if (!hj__operands(op, &x, 1, &g, &a)) return bld_poison(g);
  hlo_shape hs;
  char b0[128];
  if (!hlo_shape_is_array(&a->shape) || !hj__shape_to_hlo((hj_dtype_t)a->shape.type, s, &hs) ||
      n != a->shape.rank || (n && !dims))
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: %d dims (or NULL) for operand %s and rank %d",
                          op, n, hlo_shape_str(&a->shape, b0, sizeof b0), s.rank);
  /* XLA's builder also lets size-1 operand dims stretch: reshape them away first. */
  int64_t keep[HLO_MAX_RANK], map[HLO_MAX_RANK];
  int nk = 0;
  for (int i = 0; i < n; i++) {
    bool stretch = a->shape.dims[i] == 1 && dims[i] >= 0 && dims[i] < hs.rank && hs.dims[dims[i]] != 1;
    if (!stretch) keep[nk] = a->shape.dims[i], map[nk++] = dims[i];
  }
  if (nk < n) {
    hlo_shape r = hlo_shape_array(a->shape.type, nk, keep);
    if (!(a = bld_emit(g, op, HLO_OP_RESHAPE, &r, &a, 1))) return bld_poison(g);
  }
  hlo_instr *ins = hj__op_begin(g, op, HLO_OP_BROADCAST, &hs, &a, 1);
  if (ins) ins->dims = hlo_ints_dup(g->m, map, nk);
  return hj__op_finish(g, op, ins);
}

hj_tensor_t hj_broadcast_to(hj_tensor_t x, hj_shape_t s) {
  const char *op = "hj_broadcast_to";
  hj_graph_t *g;
  hlo_instr *a;
  if (!hj__operands(op, &x, 1, &g, &a)) return bld_poison(g);
  hlo_shape hs;
  char b0[128], b1[128];
  if (!hlo_shape_is_array(&a->shape) || !hj__shape_to_hlo((hj_dtype_t)a->shape.type, s, &hs))
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: tuple operand or invalid rank %d", op, s.rank);
  bool ok = a->shape.rank <= hs.rank;
  for (int i = 0; ok && i < a->shape.rank; i++) {
    int64_t d = a->shape.dims[i];
    ok = d == 1 || d == hs.dims[hs.rank - a->shape.rank + i];
  }
  if (!ok)
    return hj__graph_fail(g, HJ_ERR_SHAPE, "%s: %s does not broadcast to %s", op,
                          hlo_shape_str(&a->shape, b0, sizeof b0), hlo_shape_str(&hs, b1, sizeof b1));
  hlo_instr *r = bld_expand(g, op, a, &hs);
  if (r == a) return hj__op_finish(g, op, hj__op_begin(g, op, HLO_OP_COPY, NULL, &a, 1));
  return bld_tensor_of(g, r);
}

hj_tensor_t hj_reshape(hj_tensor_t x, hj_shape_t s) {
  const char *op = "hj_reshape";
  hj_graph_t *g;
  hlo_instr *a;
  if (!hj__operands(op, &x, 1, &g, &a)) return bld_poison(g);
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
    else known *= s.dims[i];
  }
  if (infer >= 0) s.dims[infer] = known ? n / known : 0;
  hlo_shape hs;
  hj__shape_to_hlo((hj_dtype_t)a->shape.type, s, &hs);
  if (hlo_shape_numel(&hs) != n) {
    char b1[128];
    return hj__graph_fail(g, HJ_ERR_SHAPE, "%s: cannot reshape %s (%lld elements) to %s", op, b0,
                          (long long)n, hlo_shape_str(&hs, b1, sizeof b1));
  }
  return hj__op_finish(g, op, hj__op_begin(g, op, HLO_OP_RESHAPE, &hs, &a, 1));
}

/* One operand, integer-list attributes checked by shape inference. */
static hj_tensor_t bld_dims_op(const char *op, hlo_opcode opc, hj_tensor_t x, const int64_t *d, int n) {
  hj_graph_t *g;
  hlo_instr *a;
  if (!hj__operands(op, &x, 1, &g, &a)) return bld_poison(g);
  if (n < 0 || (n > 0 && !d)) return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: NULL dims or n %d", op, n);
  hlo_instr *ins = hj__op_begin(g, op, opc, NULL, &a, 1);
  if (ins) ins->dims = hlo_ints_dup(g->m, d, n);
  return hj__op_finish(g, op, ins);
}

hj_tensor_t hj_transpose(hj_tensor_t x, const int64_t *perm, int n) {
  return bld_dims_op("hj_transpose", HLO_OP_TRANSPOSE, x, perm, n);
}
hj_tensor_t hj_reverse(hj_tensor_t x, const int64_t *dims, int n) {
  return bld_dims_op("hj_reverse", HLO_OP_REVERSE, x, dims, n);
}

hj_tensor_t hj_slice(hj_tensor_t x, const int64_t *start, const int64_t *limit, const int64_t *stride) {
  const char *op = "hj_slice";
  hj_graph_t *g;
  hlo_instr *a;
  if (!hj__operands(op, &x, 1, &g, &a)) return bld_poison(g);
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
static bool bld_with_starts(const char *op, hj_tensor_t x, const hj_tensor_t *extra, int nextra,
                            const hj_tensor_t *starts, hj_graph_t **g, hlo_instr ***ops, int *n) {
  hlo_instr *a;
  if (!hj__operands(op, &x, 1, g, &a)) return false;
  if (!starts) return hj__graph_fail(*g, HJ_ERR_INVALID_ARG, "%s: starts is NULL", op), false;
  int r = hlo_shape_is_array(&a->shape) ? a->shape.rank : 0;
  hj_tensor_t ts[2 + HLO_MAX_RANK];
  ts[0] = x;
  for (int i = 0; i < nextra; i++) ts[1 + i] = extra[i];
  for (int i = 0; i < r; i++) ts[1 + nextra + i] = starts[i];
  *n = 1 + nextra + r;
  *ops = hlo_alloc((*g)->m, sizeof(hlo_instr *) * (size_t)*n);
  return *ops && hj__operands(op, ts, *n, g, *ops);
}

hj_tensor_t hj_dynamic_slice(hj_tensor_t x, const hj_tensor_t *starts, const int64_t *sizes) {
  const char *op = "hj_dynamic_slice";
  hj_graph_t *g;
  hlo_instr **ops;
  int n;
  if (!bld_with_starts(op, x, NULL, 0, starts, &g, &ops, &n)) return bld_poison(g);
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
  if (!bld_with_starts(op, x, &update, 1, starts, &g, &ops, &n)) return bld_poison(g);
  return hj__op_finish(g, op, hj__op_begin(g, op, HLO_OP_DYNAMIC_UPDATE_SLICE, NULL, ops, n));
}

hj_tensor_t hj_pad(hj_tensor_t x, hj_tensor_t value, const int64_t *lo, const int64_t *hi,
                   const int64_t *interior) {
  const char *op = "hj_pad";
  hj_tensor_t ts[2] = { x, value };
  hlo_instr *a[2];
  hj_graph_t *g;
  if (!hj__operands(op, ts, 2, &g, a)) return bld_poison(g);
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
static bool bld_ints(hj_graph_t *g, const char *op, const char *what, const int64_t *v, int n,
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
  if (!hj__operands(op, ts, 2, &g, a)) return bld_poison(g);
  if (!d) return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: dims is NULL", op);
  hlo_gather_dims gd = { .index_vector_dim = d->index_vector_dim };
  if (!bld_ints(g, op, "offset_dims", d->offset_dims, d->n_offset_dims, &gd.offset_dims) ||
      !bld_ints(g, op, "collapsed_slice_dims", d->collapsed_slice_dims, d->n_collapsed_slice_dims,
                &gd.collapsed_slice_dims) ||
      !bld_ints(g, op, "start_index_map", d->start_index_map, d->n_start_index_map, &gd.start_index_map) ||
      !bld_ints(g, op, "slice_sizes", d->slice_sizes, d->n_slice_sizes, &gd.slice_sizes))
    return bld_poison(g);
  hlo_instr *ins = hj__op_begin(g, op, HLO_OP_GATHER, NULL, a, 2);
  if (ins) ins->gather = gd;
  return hj__op_finish(g, op, ins);
}

/* ---- reductions, sort, scatter, dot ---------------------------------------------------------- */

/* The binary computation of reducer |r| on |t| scalars, built once per top graph. pred
   sums and products are or/and (what they are on {0,1} with saturation at 1). */
static hlo_comp *bld_reducer(hj_graph_t *g, hj_reducer_t r, hlo_type t) {
  hj_graph_t *top = g->top;
  if (top->reducers[r][t]) return top->reducers[r][t];
  static const hlo_opcode ops[HJ_RED_COUNT] = { HLO_OP_ADD, HLO_OP_MULTIPLY, HLO_OP_MAXIMUM,
                                                HLO_OP_MINIMUM, HLO_OP_AND, HLO_OP_OR, HLO_OP_PARAMETER };
  static const char *names[HJ_RED_COUNT] = { "sum", "prod", "max", "min", "and", "or", "replace" };
  hlo_opcode opc = ops[r];
  if (t == HLO_PRED && (r == HJ_RED_SUM || r == HJ_RED_MAX)) opc = HLO_OP_OR;
  if (t == HLO_PRED && (r == HJ_RED_PROD || r == HJ_RED_MIN)) opc = HLO_OP_AND;
  char name[64];
  snprintf(name, sizeof name, "%s_%s", names[r], hlo_type_name(t));
  hlo_comp *c = bld_comp(top->m, name);
  hlo_shape s = hlo_shape_scalar(t);
  hlo_instr *p[2];
  for (int i = 0; c && i < 2; i++) {
    if (!(p[i] = hlo_instr_new(c, HLO_OP_PARAMETER, NULL, &s, NULL, 0))) return NULL;
    p[i]->index = i;
    arrput(c->params, p[i]);
  }
  hlo_instr *root = !c ? NULL : r == HJ_RED_REPLACE ? p[1] : hlo_instr_new(c, opc, NULL, &s, p, 2);
  if (!root) return NULL;
  root->is_root = true;
  c->root = root;
  return top->reducers[r][t] = c;
}

/* The identity of |r| on |t| as a scalar constant; NULL (error) when |r| has none there. */
static hlo_instr *bld_identity(hj_graph_t *g, const char *op, hj_reducer_t r, hlo_instr *x) {
  hlo_type t = x->shape.type;
  hlo_type_class cls = hlo_type_class_of(t);
  uint64_t v = 0;
  bool f = cls == HLO_CLASS_FLOAT, s = cls == HLO_CLASS_SINT;
  int bits = hlo_type_size(t) * 8;
  char b[128];
  if ((r == HJ_RED_AND || r == HJ_RED_OR) && f) r = HJ_RED_REPLACE;
  switch (r) {
  case HJ_RED_SUM: case HJ_RED_OR: return bld_scalar_const(g, op, t, 0);
  case HJ_RED_PROD: return bld_scalar_const(g, op, t, 1);
  case HJ_RED_AND: hlo_store_s64(t, &v, 0, -1); if (t == HLO_PRED) v = 1; break;
  case HJ_RED_MAX:
    if (f) return bld_scalar_const(g, op, t, -INFINITY);
    if (s) hlo_store_s64(t, &v, 0, (int64_t)(~0ull << (bits - 1)));
    break;
  case HJ_RED_MIN:
    if (f) return bld_scalar_const(g, op, t, INFINITY);
    hlo_store_u64(t, &v, 0, s ? ~0ull >> (65 - bits) : ~0ull);
    if (t == HLO_PRED) v = 1;
    break;
  default:
    hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: reducer %d does not reduce %s", op, (int)r,
                   hlo_shape_str(&x->shape, b, sizeof b));
    return NULL;
  }
  hlo_shape sh = hlo_shape_scalar(t);
  return bld_const(g, op, &sh, &v);
}

hj_tensor_t hj_reduce(hj_tensor_t x, hj_reducer_t r, const int64_t *dims, int n) {
  const char *op = "hj_reduce";
  hj_graph_t *g;
  hlo_instr *a[2];
  if (!hj__operands(op, &x, 1, &g, a)) return bld_poison(g);
  if ((unsigned)r >= HJ_RED_REPLACE || !hlo_shape_is_array(&a[0]->shape) || n < 0 || (n && !dims))
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: invalid reducer %d, tuple operand or NULL dims",
                          op, (int)r);
  int64_t d[HLO_MAX_RANK];
  for (int i = 0; i < n && i < HLO_MAX_RANK; i++)
    d[i] = dims[i] < 0 ? dims[i] + a[0]->shape.rank : dims[i];
  hlo_comp *c = bld_reducer(g, r, a[0]->shape.type);
  if (!c || !(a[1] = bld_identity(g, op, r, a[0]))) return bld_poison(g);
  hlo_instr *ins = hj__op_begin(g, op, HLO_OP_REDUCE, NULL, a, 2);
  if (ins) {
    ins->dims = hlo_ints_dup(g->m, d, n < HLO_MAX_RANK ? n : HLO_MAX_RANK);
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
  if (!hj__operands(op, ts, 3, &g, a)) return bld_poison(g);
  if (!d || (unsigned)combine >= HJ_RED_COUNT || !hlo_shape_is_array(&a[0]->shape))
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: NULL dims, invalid combiner %d or tuple operand",
                          op, (int)combine);
  hlo_scatter_dims sd = { .index_vector_dim = d->index_vector_dim };
  if (!bld_ints(g, op, "update_window_dims", d->update_window_dims, d->n_update_window_dims,
                &sd.update_window_dims) ||
      !bld_ints(g, op, "inserted_window_dims", d->inserted_window_dims, d->n_inserted_window_dims,
                &sd.inserted_window_dims) ||
      !bld_ints(g, op, "scatter_dims_to_operand_dims", d->scatter_dims_to_operand_dims,
                d->n_scatter_dims_to_operand_dims, &sd.scatter_dims_to_operand_dims))
    return bld_poison(g);
  hlo_comp *c = bld_reducer(g, combine, a[0]->shape.type);
  hlo_instr *ins = c ? hj__op_begin(g, op, HLO_OP_SCATTER, NULL, a, 3) : NULL;
  if (ins) {
    ins->scatter = sd;
    hlo_instr_set_calls(ins, &c, 1);
  }
  return hj__op_finish(g, op, ins);
}

/* Comparator for hj_sort: ascending is LT in total order (XLA's and JAX's); descending is
   "a before b iff !isnan(a) && (isnan(b) || a > b)" so NaNs sort last there too. */
static hlo_comp *bld_sorter(hj_graph_t *g, bool desc, hlo_type t) {
  hj_graph_t *top = g->top;
  if (top->sorters[desc][t]) return top->sorters[desc][t];
  char name[64];
  snprintf(name, sizeof name, "%s_%s", desc ? "gt" : "lt", hlo_type_name(t));
  hlo_comp *c = bld_comp(top->m, name);
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
  if (!hj__operands(op, &x, 1, &g, &a)) return bld_poison(g);
  if (!hlo_shape_is_array(&a->shape))
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: the operand is a tuple", op);
  int64_t d = dim < 0 ? dim + a->shape.rank : dim;
  hlo_comp *c = bld_sorter(g, descending, a->shape.type);
  hlo_instr *ins = c ? hj__op_begin(g, op, HLO_OP_SORT, NULL, &a, 1) : NULL;
  if (ins) {
    ins->dims = hlo_ints_dup(g->m, &d, 1);
    ins->is_stable = true;
    hlo_instr_set_calls(ins, &c, 1);
  }
  return hj__op_finish(g, op, ins);
}

hj_tensor_t hj_dot_general(hj_tensor_t a, hj_tensor_t b, const hj_dot_dims_t *d) {
  const char *op = "hj_dot_general";
  hj_tensor_t ts[2] = { a, b };
  hlo_instr *x[2];
  hj_graph_t *g;
  if (!hj__operands(op, ts, 2, &g, x)) return bld_poison(g);
  if (!d) return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: dims is NULL", op);
  hlo_dot_dims dd;
  if (!bld_ints(g, op, "lhs_batch", d->lhs_batch, d->n_lhs_batch, &dd.lhs_batch) ||
      !bld_ints(g, op, "rhs_batch", d->rhs_batch, d->n_rhs_batch, &dd.rhs_batch) ||
      !bld_ints(g, op, "lhs_contracting", d->lhs_contracting, d->n_lhs_contracting, &dd.lhs_contract) ||
      !bld_ints(g, op, "rhs_contracting", d->rhs_contracting, d->n_rhs_contracting, &dd.rhs_contract))
    return bld_poison(g);
  if (hlo_shape_is_array(&x[0]->shape) && hlo_shape_is_array(&x[1]->shape) &&
      !bld_same_type(g, op, x[0], x[1]))
    return bld_poison(g);
  hlo_instr *ins = hj__op_begin(g, op, HLO_OP_DOT, NULL, x, 2);
  if (ins) ins->dot = dd;
  return hj__op_finish(g, op, ins);
}

/* ---- tuples and control flow ---------------------------------------------------------------- */

/* Operands |ts| (n >= 0) in graph |g0| (or theirs), then calls |subs| (nsubs). */
static hj_tensor_t bld_call_op(const char *op, hlo_opcode opc, hj_graph_t *g0, const hj_tensor_t *ts,
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
      res = bld_poison(tg ? tg : g);
      goto done;
    }
    if (g && tg != g) {
      res = hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: operands belong to graph '%s', not '%s'", op,
                           bld_graph_name(tg), bld_graph_name(g));
      goto done;
    }
    g = tg;
  }
  if (!g) goto done;
  res = bld_poison(g);
  hlo_comp *calls[64];
  for (int i = 0; i < nsubs; i++)
    if (!(calls[i] = bld_callee(g, op, subs[i]))) goto done;
  if ((*out_ins = hj__op_begin(g, op, opc, NULL, x, n))) hlo_instr_set_calls(*out_ins, calls, nsubs);
done:
  arrfree(x);
  return res;
}

hj_tensor_t hj_tuple(hj_graph_t *g, const hj_tensor_t *xs, int n) {
  hlo_instr *ins;
  hj_tensor_t t = bld_call_op("hj_tuple", HLO_OP_TUPLE, g, xs, n, NULL, 0, &ins);
  return ins ? hj__op_finish(t.graph, "hj_tuple", ins) : t;
}

hj_tensor_t hj_get_tuple_element(hj_tensor_t t, int index) {
  const char *op = "hj_get_tuple_element";
  hj_graph_t *g;
  hlo_instr *a;
  if (!hj__operands(op, &t, 1, &g, &a)) return bld_poison(g);
  hlo_instr *ins = hj__op_begin(g, op, HLO_OP_GET_TUPLE_ELEMENT, NULL, &a, 1);
  if (ins) ins->index = index;
  return hj__op_finish(g, op, ins);
}

hj_tensor_t hj_call(hj_graph_t *callee, const hj_tensor_t *args, int n) {
  hlo_instr *ins;
  hj_graph_t *caller = n > 0 && args ? args[0].graph : callee ? callee->top : NULL;
  hj_tensor_t t = bld_call_op("hj_call", HLO_OP_CALL, caller, args, n, &callee, 1, &ins);
  return ins ? hj__op_finish(t.graph, "hj_call", ins) : t;
}

hj_tensor_t hj_map(hj_graph_t *fn, const hj_tensor_t *args, int n) {
  hlo_instr *ins;
  hj_graph_t *caller = n > 0 && args ? args[0].graph : NULL;
  hj_tensor_t t = bld_call_op("hj_map", HLO_OP_MAP, caller, args, n, &fn, 1, &ins);
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
  hj_tensor_t t = bld_call_op("hj_while", HLO_OP_WHILE, init.graph, &init, 1, subs, 2, &ins);
  return ins ? hj__op_finish(t.graph, "hj_while", ins) : t;
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
  hlo_instr *ins;
  hj_tensor_t t = bld_call_op(op, HLO_OP_CONDITIONAL, g, ts, n + 1, branches, n, &ins);
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
  hj_tensor_t t = bld_call_op(op, HLO_OP_REDUCE, g, ts, 2 * n, &fn, 1, &ins);
  if (ins) ins->dims = hlo_ints_dup(g->m, dims, ndims);
  return ins ? hj__op_finish(t.graph, op, ins) : t;
}

hj_tensor_t hj_sort_with(hj_graph_t *cmp, const hj_tensor_t *xs, int n, int dim, bool stable) {
  const char *op = "hj_sort_with";
  hlo_instr *ins;
  hj_graph_t *g = n > 0 && xs ? xs[0].graph : NULL;
  hj_tensor_t t = bld_call_op(op, HLO_OP_SORT, g, xs, n, &cmp, 1, &ins);
  if (ins) {
    int64_t d = dim < 0 ? dim + ins->operands[0]->shape.rank : dim;
    ins->dims = hlo_ints_dup(t.graph->m, &d, 1);
    ins->is_stable = stable;
  }
  return ins ? hj__op_finish(t.graph, op, ins) : t;
}

#undef BLD_MSG
