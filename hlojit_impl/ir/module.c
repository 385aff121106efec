/* module.c — building the IR: modules (with their arena), computations, instructions
   (operands and shapes copied into the arena), arena strings and lists. Editing what is
   built is edit.c's; deep copies are clone.c's. */
#include "ir.h"

/* ---- modules, computations, instructions ------------------------------------------------- */

hlo_module *hlo_module_new(hj_ctx_t *ctx, const char *name) {
  hlo_module *m = hj__alloc(ctx, sizeof *m);
  if (!m) {
    hj__err(ctx, HJ_ERR_OOM, "out of memory creating module");
    return NULL;
  }
  memset(m, 0, sizeof *m);
  m->ctx = ctx;
  hlo_arena_init(&m->arena, ctx);
  m->name = hlo_strdup(m, name ? name : "module");
  if (!m->name) {   /* the arena's first block: a module without a name prints as no module */
    hlo_module_free(m);
    hj__err(ctx, HJ_ERR_OOM, "out of memory creating module");
    return NULL;
  }
  return m;
}

void hlo_module_free(hlo_module *m) {
  if (!m) return;
  for (ptrdiff_t i = 0; i < arrlen(m->comps); i++) {
    arrfree(m->comps[i]->instrs);
    arrfree(m->comps[i]->params);
  }
  arrfree(m->comps);
  hlo_arena_free(&m->arena);
  hj__free(m->ctx, m);
}

void *hlo_alloc(hlo_module *m, size_t n) { return hlo_arena_alloc(&m->arena, n); }

char *hlo_strndup(hlo_module *m, const char *s, size_t n) {
  char *p = hlo_alloc(m, n + 1);
  if (p) memcpy(p, s, n);
  return p;
}

char *hlo_strdup(hlo_module *m, const char *s) { return hlo_strndup(m, s, strlen(s)); }

hlo_ints hlo_ints_dup(hlo_module *m, const int64_t *v, int n) {
  hlo_ints r = { NULL, n };
  if (n > 0) {
    r.v = hlo_alloc(m, sizeof(int64_t) * (size_t)n);
    if (!r.v) r.n = 0;
    else memcpy(r.v, v, sizeof(int64_t) * (size_t)n);
  }
  return r;
}

hlo_shape hlo_shape_dup(hlo_module *m, const hlo_shape *s) {
  hlo_shape r = *s;
  if (s->type == HLO_TUPLE && s->ntuple > 0) {
    r.tuple = hlo_alloc(m, sizeof(hlo_shape) * (size_t)s->ntuple);
    if (!r.tuple) {
      r.ntuple = 0;
      return r;
    }
    for (int i = 0; i < s->ntuple; i++) r.tuple[i] = hlo_shape_dup(m, &s->tuple[i]);
  }
  return r;
}

hlo_comp *hlo_comp_new(hlo_module *m, const char *name) {
  hlo_comp *c = hlo_alloc(m, sizeof *c);
  if (!c) {
    hj__err(m->ctx, HJ_ERR_OOM, "out of memory creating computation");
    return NULL;
  }
  c->name = hlo_strdup(m, name);
  if (!c->name) {   /* a nameless computation would print as "(null)" and break look-ups */
    hj__err(m->ctx, HJ_ERR_OOM, "out of memory creating computation");
    return NULL;
  }
  c->module = m;
  arrput(m->comps, c);
  return c;
}

/* Did hlo_shape_dup lose a tuple's elements (its arena allocation failed)? */
static bool core_dup_lost(const hlo_shape *src, const hlo_shape *dup) {
  if (src->type != HLO_TUPLE) return false;
  if (dup->ntuple != src->ntuple) return true;
  for (int i = 0; i < src->ntuple; i++)
    if (core_dup_lost(&src->tuple[i], &dup->tuple[i])) return true;
  return false;
}

hlo_comp *hlo_module_find_comp(const hlo_module *m, const char *name) {
  for (ptrdiff_t i = 0; i < arrlen(m->comps); i++)
    if (strcmp(m->comps[i]->name, name) == 0) return m->comps[i];
  return NULL;
}

hlo_instr *hlo_instr_new(hlo_comp *c, hlo_opcode op, const char *name, const hlo_shape *shape,
                         hlo_instr *const *operands, int noperands) {
  hlo_module *m = c->module;
  hlo_instr *ins = hlo_alloc(m, sizeof *ins);
  if (!ins) goto oom;
  ins->op = op;
  ins->id = m->next_id++;
  ins->parent = c;
  if (name) {
    ins->name = hlo_strdup(m, name);
  } else {
    char buf[64];
    snprintf(buf, sizeof buf, "%s.%d", hlo_opcode_name(op), ins->id);
    ins->name = hlo_strdup(m, buf);
  }
  if (!ins->name) goto oom;
  if (shape) ins->shape = hlo_shape_dup(m, shape);
  if (shape && core_dup_lost(shape, &ins->shape)) goto oom;
  if (noperands > 0) {
    ins->operands = hlo_alloc(m, sizeof(hlo_instr *) * (size_t)noperands);
    if (!ins->operands) goto oom;
    memcpy(ins->operands, operands, sizeof(hlo_instr *) * (size_t)noperands);
  }
  ins->noperands = noperands;
  arrput(c->instrs, ins);
  return ins;
oom:
  hj__err(m->ctx, HJ_ERR_OOM, "out of memory creating instruction");
  return NULL;
}

void hlo_instr_set_calls(hlo_instr *ins, hlo_comp *const *calls, int n) {
  hlo_module *m = ins->parent->module;
  ins->calls = n > 0 ? hlo_alloc(m, sizeof(hlo_comp *) * (size_t)n) : NULL;
  ins->ncalls = ins->calls || n == 0 ? n : 0;
  if (ins->calls) memcpy(ins->calls, calls, sizeof(hlo_comp *) * (size_t)n);
}
