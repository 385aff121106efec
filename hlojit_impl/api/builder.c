/* builder.c — the graph builder, part 1: graphs (hj_graph_*), tensor handles, leaves and
   constants, elementwise ops with NumPy broadcasting, and the hj__* helpers that
   builder_ops.c (shape, indexing, reduction, dot and control-flow ops) and composites.c
   share.

   Each op resolves its operand tensors to instructions of one graph, checks what its
   message must name (dtypes, NumPy broadcasting), appends an hlo_instr to the graph's
   computation and asks shape inference (hlo_infer_shape) for the result shape. On any
   error the instruction is dropped, the graph records its first error, e.g.
     "hj_add: shapes f32[4,8] and f32[3] do not broadcast (graph 'mlp', op #3)"
   and the op returns the poisoned tensor {g, -1}. Ops on poisoned tensors return poisoned
   tensors and add no message, so the first error is the one reported.

   Invariants
   - g->vals[id] is an instruction of g->comp (helper instructions get ids too).
   - A sub-graph is frozen when a call-like op (builder_ops.c) first uses it: its root is
     fixed (the single output or a tuple of them) and it takes no more ops (hj__op_begin
     refuses them). A graph can only call frozen graphs, so calls form a DAG;
     hj__graph_module (graph_module.c) copies the module in callee-first order with the entry
     last, as XLA prints modules.

   Broadcasting (NumPy): shapes align from the right; a size-1 dim stretches. HLO's
   broadcast maps operand dims to result dims one to one without stretching, so a
   stretched size-1 dim is first reshaped away. Example: a f32[4,1,3] + b f32[5,3]:
     result f32[4,5,3]; a -> reshape f32[4,3] -> broadcast dims={0,2};
     b -> broadcast dims={1,2}; then add. */
#include "api.h"
#include <stdlib.h>

#define BLD_MSG 700

static hj_tensor_t bld_poison(hj_graph_t *g) { return (hj_tensor_t){ g, -1 }; }

const char *hj__graph_name(const hj_graph_t *g) {
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
  snprintf(full, sizeof full, "%s (graph '%.100s', op #%d)", msg, hj__graph_name(g),
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
                   op, (int)t.id, hj__graph_name(g), (int)arrlen(g->vals));
    return NULL;
  }
  return g->vals[t.id];
}

bool hj__operands(const char *op, const hj_tensor_t *ts, int n, hj_graph_t **gout,
                  hlo_instr **out) {
  hj_graph_t *g = NULL;
  for (int i = 0; i < n && !g; i++) g = ts[i].graph;
  /* closures (control.c): the op goes to the innermost graph, the others' tensors are
     captured into it */
  for (int i = 0; g && i < n; i++)
    if (ts[i].graph && ts[i].graph != g && hj__is_ancestor(g, ts[i].graph)) g = ts[i].graph;
  *gout = g;
  if (!g) return false;
  for (int i = 0; i < n; i++) {
    if (ts[i].graph == g) {
      if (!(out[i] = hj__tensor_instr(op, ts[i]))) return false;
    } else if (ts[i].graph && ts[i].id >= 0 && hj__is_ancestor(ts[i].graph, g)) {
      if (!(out[i] = hj__capture(g, op, ts[i]))) return false;
    } else if (ts[i].graph && ts[i].id < 0 && hj__is_ancestor(ts[i].graph, g)) {
      return false;                    /* poisoned: silent, like one of g's own */
    } else if (!ts[i].graph) {
      hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: operand %d is HJ_NONE or has no graph", op, i);
      return false;
    } else {
      hj__graph_fail(g, HJ_ERR_INVALID_ARG,
                     "%s: operand %d belongs to graph '%s', not to graph '%s'", op, i,
                     hj__graph_name(ts[i].graph), hj__graph_name(g));
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
                   hj__graph_name(g));
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
      snprintf(why, sizeof why, "%.600s", hj__ctx_err(g->ctx));
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

hlo_instr *hj__emit(hj_graph_t *g, const char *op, hlo_opcode opc, const hlo_shape *decl,
                    hlo_instr *const *operands, int n) {
  return bld_finish_ins(g, op, hj__op_begin(g, op, opc, decl, operands, n));
}

/* A constant of |shape| (array, static) with |data| copied (pred normalised to 0/1). */
hlo_instr *hj__const(hj_graph_t *g, const char *op, const hlo_shape *shape,
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

hlo_instr *hj__scalar_const(hj_graph_t *g, const char *op, hlo_type t, double v) {
  uint64_t buf = 0;
  hlo_store_f64(t, &buf, 0, v);
  hlo_shape s = hlo_shape_scalar(t);
  return hj__const(g, op, &s, &buf);
}

/* |x| broadcast to |target|'s dims (NumPy rules, already checked); see the top comment. */
hlo_instr *hj__expand(hj_graph_t *g, const char *op, hlo_instr *x, const hlo_shape *target) {
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
    if (!(x = hj__emit(g, op, HLO_OP_RESHAPE, &r, &x, 1))) return NULL;
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
    if (!(x[i] = hj__expand(g, op, x[i], &out))) return false;
  return true;
}

bool hj__same_type(hj_graph_t *g, const char *op, hlo_instr *a, hlo_instr *b) {
  if (a->shape.type == b->shape.type) return true;
  char s0[128], s1[128];
  hj__graph_fail(g, HJ_ERR_SHAPE, "%s: dtypes %s and %s differ (%s and %s)", op,
                 hlo_type_name(a->shape.type), hlo_type_name(b->shape.type),
                 hlo_shape_str(&a->shape, s0, sizeof s0), hlo_shape_str(&b->shape, s1, sizeof s1));
  return false;
}

/* A dot's operand types: the same, or floats of different widths (a mixed-precision dot,
   e.g. f32 activations x bf16 weights; the result is the wider type). */
bool hj__dot_types(hj_graph_t *g, const char *op, hlo_instr *a, hlo_instr *b) {
  hlo_type ta = a->shape.type, tb = b->shape.type;
  if (hlo_type_is_float(ta) && hlo_type_is_float(tb) && hlo_type_size(ta) != hlo_type_size(tb))
    return true;
  return hj__same_type(g, op, a, b);
}

/* ---- captures (control.c closes them) --------------------------------------------------- */

bool hj__is_ancestor(const hj_graph_t *a, const hj_graph_t *b) {
  for (const hj_graph_t *p = b ? b->parent : NULL; p; p = p->parent)
    if (p == a) return true;
  return false;
}

bool hj__has_captures(const hj_graph_t *g) { return g && arrlen(g->captures) > 0; }

hlo_instr *hj__capture(hj_graph_t *g, const char *op, hj_tensor_t t) {
  hlo_instr *src = hj__tensor_instr(op, t);
  if (!src) return NULL;
  for (ptrdiff_t k = 0; k < arrlen(g->captures); k++)
    if (g->captures[k].src.graph == t.graph && g->captures[k].src.id == t.id) return g->captures[k].ins;
  if (g->frozen) {
    hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: sub-graph '%s' is already used by a call and can capture no "
                   "more tensors", op, hj__graph_name(g));
    return NULL;
  }
  char name[160];
  snprintf(name, sizeof name, "capture.%.100s", src->name);
  hlo_instr *ins = hlo_instr_new(g->comp, HLO_OP_PARAMETER, name, &src->shape, NULL, 0);
  if (!ins) {
    hj__graph_fail(g, HJ_ERR_OOM, "%s: out of memory", op);
    return NULL;
  }
  ins->index = -1;                     /* not a parameter until closed */
  struct hj_capture c = { t, ins };
  arrput(g->captures, c);
  return ins;
}

/* ---- names of parameters ------------------------------------------------------------------- */

char *hj__strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

void hj__graph_name_param(hj_graph_t *g, int64_t index, const char *name) {
  while (arrlen(g->param_names) <= index) arrput(g->param_names, NULL);
  free(g->param_names[index]);
  g->param_names[index] = name && *name ? hj__strdup(name) : NULL;
}

void hj__graph_io_free(hj_graph_t *g) {
  for (ptrdiff_t i = 0; i < arrlen(g->param_names); i++) free(g->param_names[i]);
  for (ptrdiff_t i = 0; i < arrlen(g->output_names); i++) free(g->output_names[i]);
  arrfree(g->param_names);
  arrfree(g->output_names);
  arrfree(g->aliases);
  arrfree(g->captures);
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
hlo_comp *hj__comp_new(hlo_module *m, const char *name) {
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
  if (g->m) g->comp = hj__comp_new(g->m, "main");
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
  g->parent = parent;
  if (!(g->comp = hj__comp_new(top->m, name ? name : "sub"))) {
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
  hj__graph_io_free(g);
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
  if (t.graph && t.graph != g && t.id >= 0 && hj__is_ancestor(t.graph, g) && !g->frozen) {
    hlo_instr *c = hj__capture(g, "hj_graph_output", t);
    if (!c) return hj__err(g->ctx, g->status, "%s", g->err);
    arrput(g->outputs, c);
    return HJ_OK;
  }
  if (t.graph != g)
    return hj__err(g->ctx, HJ_ERR_INVALID_ARG, "hj_graph_output: the tensor belongs to %s, not to graph '%s'",
                   t.graph ? "another graph" : "no graph", hj__graph_name(g));
  if (g->frozen)
    return hj__err(g->ctx, HJ_ERR_INVALID_ARG,
                   "hj_graph_output: sub-graph '%s' is already used by a call", hj__graph_name(g));
  hlo_instr *ins = hj__tensor_instr("hj_graph_output", t);
  if (!ins) {
    if (g->status != HJ_OK) return hj__err(g->ctx, g->status, "%s", g->err);
    return hj__err(g->ctx, HJ_ERR_INVALID_ARG, "hj_graph_output: the tensor is poisoned");
  }
  arrput(g->outputs, ins);
  return HJ_OK;
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
  char *nm = hlo_strdup(g->m, full);
  if (!nm) {
    bld_drop(g, ins);
    return hj__graph_fail(g, HJ_ERR_OOM, "%s: out of memory", op);
  }
  ins->name = nm;
  ins->index = g->nparams++;
  arrput(g->comp->params, ins);
  hj__graph_name_param(g, ins->index, name);
  return hj__op_finish(g, op, ins);
}

hj_tensor_t hj_param(hj_graph_t *g, hj_dtype_t t, hj_shape_t s, const char *name) {
  if (!g) return HJ_NONE;
  hlo_shape hs;
  if (!hj__shape_to_hlo(t, s, &hs))
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "hj_param: dtype %d, rank %d: %s", (int)t, s.rank,
                          hj__shape_problem(t, s));
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
      return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "hj_param_tuple: element %d (dtype %d, rank %d): %s",
                            i, (int)types[i], shapes[i].rank, hj__shape_problem(types[i], shapes[i]));
  return bld_param(g, "hj_param_tuple", &s, name);
}

/* The tensor of |ins| (a recent instruction of |g|), or poisoned when NULL. */
hj_tensor_t hj__tensor_of(hj_graph_t *g, hlo_instr *ins) {
  if (!ins) return bld_poison(g);
  for (ptrdiff_t i = arrlen(g->vals) - 1; i >= 0; i--)
    if (g->vals[i] == ins) return (hj_tensor_t){ g, (int32_t)i };
  return bld_poison(g);
}

hj_tensor_t hj_constant(hj_graph_t *g, hj_dtype_t t, hj_shape_t s, const void *data) {
  if (!g) return HJ_NONE;
  hlo_shape hs;
  if (!data || !hj__shape_to_hlo(t, s, &hs))
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "hj_constant: dtype %d, rank %d: %s", (int)t, s.rank,
                          data ? hj__shape_problem(t, s) : "NULL data");
  for (int i = 0; i < s.rank; i++)
    if (s.dims[i] < 0)
      return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "hj_constant: dynamic dim %d (constants are static)", i);
  return hj__tensor_of(g, hj__const(g, "hj_constant", &hs, data));
}

hj_tensor_t hj_scalar(hj_graph_t *g, hj_dtype_t t, double v) {
  if (!g) return HJ_NONE;
  if ((unsigned)t >= HJ_DTYPE_COUNT)
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "hj_scalar: invalid dtype %d", (int)t);
  return hj__tensor_of(g, hj__scalar_const(g, "hj_scalar", (hlo_type)t, v));
}

hj_tensor_t hj_full(hj_graph_t *g, hj_dtype_t t, hj_shape_t s, double v) {
  if (!g) return HJ_NONE;
  hlo_shape hs;
  if (!hj__shape_to_hlo(t, s, &hs))
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "hj_full: dtype %d, rank %d: %s", (int)t, s.rank,
                          hj__shape_problem(t, s));
  hlo_instr *c = hj__scalar_const(g, "hj_full", (hlo_type)t, v);
  return hj__tensor_of(g, c ? hj__expand(g, "hj_full", c, &hs) : NULL);
}

hj_tensor_t hj_iota(hj_graph_t *g, hj_dtype_t t, hj_shape_t s, int dim) {
  if (!g) return HJ_NONE;
  hlo_shape hs;
  if (!hj__shape_to_hlo(t, s, &hs) || dim < 0 || dim >= s.rank)
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "hj_iota: dtype %d, rank %d, dim %d: %s",
                          (int)t, s.rank, dim, hj__shape_problem(t, s) ? hj__shape_problem(t, s)
                                                                       : "dim out of range");
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

/* Binary op or compare (|dir| >= 0) with NumPy broadcasting; operands of one dtype. */
static hj_tensor_t bld_binary(const char *op, hlo_opcode opc, hj_tensor_t a, hj_tensor_t b, int dir) {
  hj_tensor_t ts[2] = { a, b };
  hlo_instr *x[2];
  hj_graph_t *g;
  if (!hj__operands(op, ts, 2, &g, x)) return bld_poison(g);
  if (hlo_shape_is_array(&x[0]->shape) && hlo_shape_is_array(&x[1]->shape) &&
      !hj__same_type(g, op, x[0], x[1]))
    return bld_poison(g);
  if (!bld_bcast_all(g, op, x, 2)) return bld_poison(g);
  hlo_instr *ins = hj__op_begin(g, op, opc, NULL, x, 2);
  if (ins && dir >= 0) ins->cmp_dir = (hlo_cmp_dir)dir;
  return hj__op_finish(g, op, ins);
}

/* hlojit.h's unary and binary ops: one function per row of the opcode table whose builder
   column says U(hj_tan) (hj_tan(x)) or B(hj_add) (hj_add(a, b)). */
#define BLD_U(fn) BLD_DEF_U, fn
#define BLD_B(fn) BLD_DEF_B, fn
#define BLD_N BLD_DEF_N, _
#define BLD_CALL(...) BLD_CALL_(__VA_ARGS__)
#define BLD_CALL_(def, fn, opc) def(fn, opc)
#define BLD_DEF_U(fn, opc) hj_tensor_t fn(hj_tensor_t x) { return bld_unary(#fn, opc, x); }
#define BLD_DEF_B(fn, opc) \
  hj_tensor_t fn(hj_tensor_t a, hj_tensor_t b) { return bld_binary(#fn, opc, a, b, -1); }
#define BLD_DEF_N(fn, opc)
#define X(e, s, a, ca, k, ty, co, em, lm, po, ev, bl) BLD_CALL(BLD_##bl, HLO_OP_##e)
HLO_OPCODES(X)
#undef X

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
  if ((opc == HLO_OP_CLAMP && !hj__same_type(g, op, x[0], x[1])) || !hj__same_type(g, op, x[1], x[2]))
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

hj_tensor_t hj_reduce_precision(hj_tensor_t x, int exponent_bits, int mantissa_bits) {
  const char *op = "hj_reduce_precision";
  hj_graph_t *g;
  hlo_instr *a;
  if (!hj__operands(op, &x, 1, &g, &a)) return bld_poison(g);
  hlo_instr *ins = hj__op_begin(g, op, HLO_OP_REDUCE_PRECISION, NULL, &a, 1);
  if (ins) ins->exponent_bits = exponent_bits, ins->mantissa_bits = mantissa_bits;
  return hj__op_finish(g, op, ins);
}

#undef BLD_MSG
