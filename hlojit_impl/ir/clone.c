/* ir/clone.c — deep copies of modules and instructions.

   hlo_module_clone gives the compiler a module it may rewrite (passes work in place) while
   the caller keeps the original: every computation, instruction, attribute list, literal
   and called-computation pointer is copied into the clone's own arena, so the two share
   nothing and either may be freed first. Order, ids, names and next_id are kept, so
   print(clone) == print(original).

   Algorithm: (1) create every computation (empty) in m->comps order, so a call to a
   computation defined later (the parser allows it) maps too; (2) copy each computation's
   instructions in text order (operands precede users: the order is topological), mapping
   operands through an id-indexed table and called computations through the index of the
   source computation. */
#include "ir.h"
#include <stdlib.h>

static hlo_literal *irc_literal(hlo_module *m, const hlo_literal *l) {
  hlo_literal *r = hlo_alloc(m, sizeof *r);
  if (!r) return NULL;
  *r = *l;
  r->owned = false;
  r->shape = hlo_shape_dup(m, &l->shape);
  r->data = NULL;
  r->elems = NULL;
  if (l->data && l->nbytes > 0) {
    if (!(r->data = hlo_alloc(m, (size_t)l->nbytes))) return NULL;
    memcpy(r->data, l->data, (size_t)l->nbytes);
  }
  if (l->nelems > 0) {
    if (!(r->elems = hlo_alloc(m, sizeof(hlo_literal *) * (size_t)l->nelems))) return NULL;
    for (int i = 0; i < l->nelems; i++)
      if (l->elems[i] && !(r->elems[i] = irc_literal(m, l->elems[i]))) return NULL;
  }
  return r;
}

/* Gives |d| (a struct copy of another instruction) its own copy in m's arena of every
   hlo_ints attribute; false on OOM. */
bool hlo_instr_dup_lists(hlo_module *m, hlo_instr *d) {
  hlo_ints *lists[] = {
#define I(f) &d->f,
#define S(f)
    HLO_INSTR_ATTRS(I, S)
#undef I
#undef S
  };
  for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
    hlo_ints v = *lists[i];
    *lists[i] = hlo_ints_dup(m, v.v, v.n);
    if (v.n > 0 && !lists[i]->v) return false;
  }
  return true;
}

hlo_instr *hlo_instr_clone_into(hlo_comp *c, const hlo_instr *src, const char *name,
                                hlo_instr *const *operands, hlo_comp *const *calls) {
  hlo_module *m = c->module;
  hlo_instr *d = hlo_instr_new(c, src->op, name ? name : src->name, &src->shape, operands,
                               src->noperands);
  if (!d) return NULL;
  hlo_instr keep = *d;
  *d = *src;                                   /* every scalar attribute */
  d->id = keep.id;
  d->name = keep.name;
  d->parent = c;
  d->operands = keep.operands;
  d->noperands = keep.noperands;
  d->shape = keep.shape;
  d->is_root = false;
  d->calls = NULL;
  d->ncalls = 0;
  d->literal = NULL;
  if (!hlo_instr_dup_lists(m, d)) goto oom;
  if (src->literal && !(d->literal = irc_literal(m, src->literal))) goto oom;
  if (src->ncalls > 0) {
    hlo_instr_set_calls(d, calls, src->ncalls);
    if (d->ncalls != src->ncalls) goto oom;
  }
  return d;
oom:
  hj__err(m->ctx, HJ_ERR_OOM, "out of memory copying instruction '%s'", src->name);
  return NULL;
}

static int irc_comp_index(const hlo_module *m, const hlo_comp *c) {
  for (ptrdiff_t i = 0; i < arrlen(m->comps); i++)
    if (m->comps[i] == c) return (int)i;
  return -1;
}

/* Copies the instructions of |s| into |d|; |map| is indexed by source id. */
static bool irc_comp(const hlo_module *m, hlo_module *dm, const hlo_comp *s, hlo_comp *d,
                     hlo_instr **map, int nmap) {
  hlo_instr **ops = NULL;
  hlo_comp **calls = NULL;
  bool ok = true;
  for (ptrdiff_t i = 0; ok && i < arrlen(s->instrs); i++) {
    const hlo_instr *si = s->instrs[i];
    arrsetlen(ops, 0);
    arrsetlen(calls, 0);
    for (int k = 0; ok && k < si->noperands; k++) {
      int id = si->operands[k]->id;
      hlo_instr *o = id >= 0 && id < nmap ? map[id] : NULL;
      if (!o) ok = false;
      arrput(ops, o);
    }
    for (int k = 0; ok && k < si->ncalls; k++) {
      int ci = irc_comp_index(m, si->calls[k]);
      if (ci < 0) ok = false;
      else arrput(calls, dm->comps[ci]);
    }
    hlo_instr *di = ok ? hlo_instr_clone_into(d, si, NULL, ops, calls) : NULL;
    if (!di) ok = false;
    else if (si->id >= 0 && si->id < nmap) map[si->id] = di;
    else ok = false;
    if (ok) di->is_root = si->is_root;
    if (ok && si->op == HLO_OP_PARAMETER && si->parent == s) {
      if (arrlen(d->params) <= si->index) {
        ptrdiff_t old = arrlen(d->params);
        arrsetlen(d->params, si->index + 1);
        for (ptrdiff_t k = old; k < arrlen(d->params); k++) d->params[k] = NULL;
      }
      d->params[si->index] = di;
    }
  }
  if (ok && s->root) {
    int id = s->root->id;
    d->root = id >= 0 && id < nmap ? map[id] : NULL;
    if (!d->root) ok = false;
  }
  arrfree(ops);
  arrfree(calls);
  return ok;
}

hlo_module *hlo_module_clone(const hlo_module *m) { return m ? hlo_module_clone_in(m->ctx, m) : NULL; }

hlo_module *hlo_module_clone_in(hj_ctx_t *ctx, const hlo_module *m) {
  if (!m) return NULL;
  hlo_module *dm = hlo_module_new(ctx, m->name);
  if (!dm) return NULL;
  int nmap = m->next_id + 1;
  for (ptrdiff_t c = 0; c < arrlen(m->comps); c++)
    for (ptrdiff_t i = 0; i < arrlen(m->comps[c]->instrs); i++)
      if (m->comps[c]->instrs[i]->id >= nmap) nmap = m->comps[c]->instrs[i]->id + 1;
  hlo_instr **map = calloc((size_t)nmap, sizeof *map);
  bool ok = map != NULL;
  for (ptrdiff_t c = 0; ok && c < arrlen(m->comps); c++) {
    hlo_comp *dc = hlo_comp_new(dm, m->comps[c]->name);
    if (!dc) ok = false;
    else dc->is_entry = m->comps[c]->is_entry;
    if (ok && m->comps[c] == m->entry) dm->entry = dc;
  }
  for (ptrdiff_t c = 0; ok && c < arrlen(m->comps); c++)
    ok = irc_comp(m, dm, m->comps[c], dm->comps[c], map, nmap);
  if (ok) ok = hlo_module_copy_aliases(dm, m);
  free(map);
  if (!ok) {
    hj__err(ctx, HJ_ERR_OOM, "cannot copy module '%s' (out of memory or a dangling reference)",
            m->name);
    hlo_module_free(dm);
    return NULL;
  }
  dm->next_id = m->next_id;
  return dm;
}
