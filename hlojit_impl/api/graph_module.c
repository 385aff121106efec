/* graph_module.c — the copy of a graph's module that hj_graph_to_module and hj_compile
   hand out.

   The graph's own module lists computations in creation order, entry first. The copy walks
   the call graph from the entry, depth first, and emits each computation after everything
   it calls, so callees precede callers and the entry comes last, as XLA prints modules
   (unused sub-graphs are left out). Instruction ids and names are kept; the entry root is
   the single output or a new tuple of the outputs. The graph's aliases (graph_io.c) become
   the module's input_output_alias, may-alias as JAX writes donations. */
#include "api.h"
#include <stdlib.h>

/* ---- the graph's module, copied in callee-first order ----------------------------------- */

typedef struct {
  hlo_module *dst;
  const hlo_comp **src_comps;         /* stb_ds, parallel to dst_comps */
  hlo_comp **dst_comps;
  hlo_instr **map;                    /* source instruction id -> copy */
  hj_status st;
} gm_copy;

static hlo_comp *gm_copied(gm_copy *cp, const hlo_comp *c) {
  for (ptrdiff_t i = 0; i < arrlen(cp->src_comps); i++)
    if (cp->src_comps[i] == c) return cp->dst_comps[i];
  return NULL;
}

static hlo_literal *gm_copy_literal(hlo_module *m, const hlo_literal *l) {
  hlo_literal *r = hlo_alloc(m, sizeof *r);
  if (!r) return NULL;
  *r = *l;
  r->owned = false;
  r->shape = hlo_shape_dup(m, &l->shape);
  if (l->data && !(r->data = hlo_alloc(m, (size_t)l->nbytes))) return NULL;
  if (l->data) memcpy(r->data, l->data, (size_t)l->nbytes);
  if (l->nelems > 0) {
    if (!(r->elems = hlo_alloc(m, sizeof(hlo_literal *) * (size_t)l->nelems))) return NULL;
    for (int i = 0; i < l->nelems; i++)
      if (!(r->elems[i] = gm_copy_literal(m, l->elems[i]))) return NULL;
  }
  return r;
}

/* Attributes of |s| onto its copy |d| (arrays into the destination arena). */
static bool gm_copy_attrs(gm_copy *cp, const hlo_instr *s, hlo_instr *d) {
  hlo_instr keep = *d;
  *d = *s;
  d->name = keep.name;
  d->parent = keep.parent;
  d->operands = keep.operands;
  d->shape = keep.shape;
  d->is_root = false;
  hlo_module *m = cp->dst;
  if (!hlo_instr_dup_lists(m, d)) return false;
  if (s->literal && !(d->literal = gm_copy_literal(m, s->literal))) return false;
  d->calls = NULL;
  d->ncalls = 0;
  hlo_comp *calls[64];
  for (int i = 0; i < s->ncalls && i < 64; i++) calls[i] = gm_copied(cp, s->calls[i]);
  hlo_instr_set_calls(d, calls, s->ncalls < 64 ? s->ncalls : 64);
  return true;
}

static hlo_comp *gm_copy_comp(gm_copy *cp, const hlo_comp *c);

static bool gm_copy_instr(gm_copy *cp, hlo_comp *dc, const hlo_instr *s) {
  for (int i = 0; i < s->ncalls; i++)
    if (!gm_copy_comp(cp, s->calls[i])) return false;
  hlo_instr *ops[256], **opv = s->noperands <= 256 ? ops : malloc(sizeof(hlo_instr *) * (size_t)s->noperands);
  if (!opv) return false;
  for (int i = 0; i < s->noperands; i++) opv[i] = cp->map[s->operands[i]->id];
  hlo_instr *d = hlo_instr_new(dc, s->op, s->name, &s->shape, opv, s->noperands);
  if (opv != ops) free(opv);
  if (!d || !gm_copy_attrs(cp, s, d)) return false;
  cp->map[s->id] = d;
  if (s->op == HLO_OP_PARAMETER) {
    if (arrlen(dc->params) <= s->index) arrsetlen(dc->params, s->index + 1);
    dc->params[s->index] = d;
  }
  return true;
}

/* Copies |c| after everything it calls; returns the copy (NULL on OOM or a cycle). */
static hlo_comp *gm_copy_comp(gm_copy *cp, const hlo_comp *c) {
  for (ptrdiff_t i = 0; i < arrlen(cp->src_comps); i++)
    if (cp->src_comps[i] == c) {
      if (!cp->dst_comps[i]) goto fail; /* a call cycle: the builder never makes one */
      return cp->dst_comps[i];
    }
  if (cp->st != HJ_OK) return NULL;
  hlo_comp *dc;
  arrput(cp->src_comps, c);
  arrput(cp->dst_comps, NULL); /* in progress */
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++)
    for (int k = 0; k < c->instrs[i]->ncalls; k++)
      if (!gm_copy_comp(cp, c->instrs[i]->calls[k])) goto fail;
  if (!(dc = hlo_comp_new(cp->dst, c->name))) goto oom;
  for (ptrdiff_t i = 0; i < arrlen(cp->src_comps); i++)
    if (cp->src_comps[i] == c) cp->dst_comps[i] = dc;
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++)
    if (!gm_copy_instr(cp, dc, c->instrs[i])) goto oom;
  if (c->root) {
    dc->root = cp->map[c->root->id];
    dc->root->is_root = true;
  }
  return dc;
oom:   /* allocation faults are HJ_ERR_OOM, not a bug (test_api_faults.c) */
  if (cp->st == HJ_OK)
    cp->st = hj__err(cp->dst->ctx, HJ_ERR_OOM, "out of memory copying computation '%s'", c->name);
fail:
  if (cp->st == HJ_OK)
    cp->st = hj__err(cp->dst->ctx, HJ_ERR_INTERNAL, "cannot copy computation '%s' (a call cycle)", c->name);
  return NULL;
}

/* The entry's root in the copy: its single output, or a tuple of the outputs. */
static hj_status gm_entry_root(gm_copy *cp, hj_graph_t *g, hlo_comp *e) {
  int n = (int)arrlen(g->outputs);
  if (n == 1) {
    e->root = cp->map[g->outputs[0]->id];
  } else {
    hlo_instr **ops = NULL;
    hlo_shape s = { .type = HLO_TUPLE, .ntuple = n };
    s.tuple = hlo_alloc(cp->dst, sizeof(hlo_shape) * (size_t)n);
    for (int i = 0; i < n && s.tuple; i++) {
      arrput(ops, cp->map[g->outputs[i]->id]);
      s.tuple[i] = ops[i]->shape;
    }
    e->root = s.tuple ? hlo_instr_new(e, HLO_OP_TUPLE, NULL, &s, ops, n) : NULL;
    arrfree(ops);
    if (!e->root) return hj__err(g->ctx, HJ_ERR_OOM, "out of memory making the output tuple");
  }
  e->root->is_root = true;
  return HJ_OK;
}

hj_status hj__graph_module(hj_graph_t *g, hlo_module **out) {
  *out = NULL;
  if (g->status != HJ_OK) return hj__err(g->ctx, g->status, "%s", g->err);
  if (arrlen(g->outputs) == 0)
    return hj__err(g->ctx, HJ_ERR_INVALID_ARG, "graph '%s' has no outputs (call hj_graph_output)", g->m->name);
  gm_copy cp = { .dst = hlo_module_new(g->ctx, g->m->name) };
  if (!cp.dst) return HJ_ERR_OOM;
  cp.dst->next_id = g->m->next_id;
  cp.map = calloc((size_t)g->m->next_id + 1, sizeof(hlo_instr *));
  hlo_comp *e = cp.map ? gm_copy_comp(&cp, g->comp) : NULL;
  hj_status st = !cp.map ? hj__err(g->ctx, HJ_ERR_OOM, "out of memory copying graph '%s'", g->m->name)
                         : cp.st;
  if (st == HJ_OK && e) {
    e->is_entry = true;
    cp.dst->entry = e;
    st = gm_entry_root(&cp, g, e);
  }
  for (ptrdiff_t k = 0; st == HJ_OK && k < arrlen(g->aliases); k++) {   /* graph_io.c */
    int64_t idx[HLO_MAX_SHAPE_INDEX], none = 0;
    int n = hlo_leaf_shape_index(&e->root->shape, g->aliases[k].output, idx);
    st = n < 0 ? hj__err(g->ctx, HJ_ERR_INTERNAL, "graph '%s': alias of output %d lost", g->m->name,
                         g->aliases[k].output)
               : hlo_module_add_alias(cp.dst, idx, n, g->aliases[k].param->index, &none, 0, false);
  }
  free(cp.map);
  arrfree(cp.src_comps);
  arrfree(cp.dst_comps);
  if (st != HJ_OK) {
    hlo_module_free(cp.dst);
    return st;
  }
  *out = cp.dst;
  return HJ_OK;
}

hj_status hj_graph_to_module(hj_graph_t *g, hj_module_t **out) {
  if (!out) return hj__err(g ? g->ctx : NULL, HJ_ERR_INVALID_ARG, "hj_graph_to_module: out is NULL");
  *out = NULL;
  if (!g) return HJ_ERR_INVALID_ARG;
  if (g->top != g)
    return hj__err(g->ctx, HJ_ERR_INVALID_ARG, "hj_graph_to_module: '%s' is a sub-graph", g->comp->name);
  return hj__graph_module(g, out);
}
