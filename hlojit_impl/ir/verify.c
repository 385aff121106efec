/* verify.c — the HLO verifier: checks that a module is well formed before anything runs
   or compiles it, the way XLA's HloVerifier does.

   Two passes, because the second relies on the first:
   1. structure, per computation: a root that belongs to it; parameters numbered
      0..n-1, each exactly once, and c->params in that order; operands from the same
      computation and defined earlier (the instruction list is a topological order);
      operand counts of fixed-arity opcodes; the number of called computations of each
      opcode; valid layouts (minor_to_major a permutation of 0..rank-1, also in tuples);
      an entry computation, not called by anyone; no computation reachable from itself
      through calls (a DFS over the call graph with white/grey/black marks).
   2. shapes: hlo_infer_shape for every instruction (which also checks the called
      computations' signatures) and the declared shape must be compatible with the
      inferred one (layouts ignored). */
#include "ir.h"
#include <stdlib.h>

#define VF_MSG_SHAPE 200

__attribute__((format(printf, 3, 4)))
static hj_status vf_err(const hlo_module *m, const hlo_comp *c, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return hj__err(m->ctx, HJ_ERR_SHAPE, "verifier: computation '%s': %s", c ? c->name : "?", msg);
}

static bool vf_layout_ok(const hlo_shape *s) {
  if (s->type == HLO_TUPLE) {
    for (int i = 0; i < s->ntuple; i++)
      if (!vf_layout_ok(&s->tuple[i])) return false;
    return s->ntuple == 0 || s->tuple;
  }
  if (s->rank < 0 || s->rank > HLO_MAX_RANK) return false;
  if (!s->has_layout) return true;
  unsigned seen = 0;
  for (int i = 0; i < s->rank; i++) {
    int d = s->minor_to_major[i];
    if (d < 0 || d >= s->rank || (seen >> d & 1)) return false;
    seen |= 1u << d;
  }
  return true;
}

/* Computation -> index in m->comps, built once per verification: fused modules have a
   computation per fusion, and a linear search per call site made verifying quadratic. */
typedef struct { const hlo_comp *key; ptrdiff_t value; } vf_cix;

/* Index of |c| in m->comps, or -1. */
static ptrdiff_t vf_comp_index(vf_cix *ix, const hlo_comp *c) {
  ptrdiff_t j = hmgeti(ix, c);
  return j < 0 ? -1 : ix[j].value;
}

/* |defined|: the instructions of |c| before |ins| (a pointer set). */
typedef struct { const hlo_instr *key; int value; } vf_set;

static hj_status vf_instr(const hlo_module *m, vf_cix *ix, const hlo_comp *c, const hlo_instr *ins,
                          vf_set **defined) {
  const char *on = hlo_opcode_name(ins->op);
  if ((unsigned)ins->op >= HLO_OP_COUNT) return vf_err(m, c, "'%s' has a bad opcode", ins->name);
  if (ins->parent != c) return vf_err(m, c, "'%s' belongs to another computation", ins->name);
  int ar = hlo_opcode_arity(ins->op);
  if (ar >= 0 && ins->noperands != ar)
    return vf_err(m, c, "'%s' (%s) has %d operands, expected %d", ins->name, on, ins->noperands, ar);
  for (int i = 0; i < ins->noperands; i++) {
    const hlo_instr *o = ins->operands[i];
    if (!o) return vf_err(m, c, "'%s' operand %d is missing", ins->name, i);
    if (o->parent != c)
      return vf_err(m, c, "'%s' uses '%s' of computation '%s'", ins->name, o->name,
                    o->parent ? o->parent->name : "?");
    if (hmgeti(*defined, o) < 0)
      return vf_err(m, c, "'%s' uses '%s' before its definition", ins->name, o->name);
  }
  int nc = hlo_opcode_calls(ins->op);
  if ((nc >= 0 && ins->ncalls != nc) || (nc < 0 && ins->ncalls < 1))
    return vf_err(m, c, "'%s' (%s) calls %d computations, expected %s%d", ins->name, on,
                  ins->ncalls, nc < 0 ? "at least " : "", nc < 0 ? 1 : nc);
  for (int i = 0; i < ins->ncalls; i++)
    if (!ins->calls[i] || vf_comp_index(ix, ins->calls[i]) < 0)
      return vf_err(m, c, "'%s' calls a computation that is not in the module", ins->name);
    else if (ins->calls[i] == m->entry)
      return vf_err(m, c, "'%s' calls the entry computation '%s'", ins->name, ins->calls[i]->name);
  if (!vf_layout_ok(&ins->shape)) {
    char b[VF_MSG_SHAPE];
    return vf_err(m, c, "'%s' has an invalid layout or rank in %s", ins->name,
                  hlo_shape_str(&ins->shape, b, sizeof b));
  }
  if (ins->op == HLO_OP_CONSTANT && !ins->literal)
    return vf_err(m, c, "constant '%s' has no value", ins->name);
  return HJ_OK;
}

/* Parameters: numbered 0..n-1, each once, and c->params[i] is parameter i. */
static hj_status vf_params(const hlo_module *m, const hlo_comp *c) {
  ptrdiff_t n = arrlen(c->params), seen = 0;
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++) {
    const hlo_instr *p = c->instrs[i];
    if (p->op != HLO_OP_PARAMETER) continue;
    if (p->index < 0 || p->index >= n || c->params[p->index] != p)
      return vf_err(m, c, "parameter '%s' has number %lld; parameters must be numbered 0..%d, each once",
                    p->name, (long long)p->index, (int)n - 1);
    seen++;
  }
  if (seen != n) return vf_err(m, c, "%d parameters listed, %d found", (int)n, (int)seen);
  return HJ_OK;
}

static hj_status vf_structure(const hlo_module *m, vf_cix *ix, const hlo_comp *c) {
  if (!c->root) return vf_err(m, c, "has no root instruction");
  if (c->root->parent != c) return vf_err(m, c, "root '%s' belongs to another computation", c->root->name);
  if (c->module != m) return vf_err(m, c, "belongs to another module");
  hj_status st = vf_params(m, c);
  vf_set *defined = NULL;
  for (ptrdiff_t i = 0; !st && i < arrlen(c->instrs); i++) {
    st = vf_instr(m, ix, c, c->instrs[i], &defined);
    if (hmgeti(defined, c->instrs[i]) >= 0)
      st = st ? st : vf_err(m, c, "'%s' is listed twice", c->instrs[i]->name);
    hmput(defined, c->instrs[i], 1);
  }
  hmfree(defined);
  return st;
}

/* DFS over the call graph; |mark|: 0 white, 1 on the stack, 2 done. */
static hj_status vf_cycles(const hlo_module *m, vf_cix *ix, ptrdiff_t k, uint8_t *mark) {
  if (mark[k] == 2) return HJ_OK;
  const hlo_comp *c = m->comps[k];
  if (mark[k] == 1) return vf_err(m, c, "calls itself (a cycle in the call graph)");
  mark[k] = 1;
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++)
    for (int j = 0; j < c->instrs[i]->ncalls; j++) {
      hj_status st = vf_cycles(m, ix, vf_comp_index(ix, c->instrs[i]->calls[j]), mark);
      if (st) return st;
    }
  mark[k] = 2;
  return HJ_OK;
}

static hj_status vf_shapes(const hlo_module *m, const hlo_comp *c) {
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++) {
    const hlo_instr *ins = c->instrs[i];
    hlo_shape inf;
    hj_status st = hlo_infer_shape(m->ctx, ins, &inf);
    if (st) {
      if (m->ctx) {  /* prefix the computation; the message names the instruction */
        char tmp[HJ__ERR_MAX];
        snprintf(tmp, sizeof tmp, "%s", hj__ctx_err(m->ctx));
        return hj__err(m->ctx, st, "verifier: computation '%s': %s", c->name, tmp);
      }
      return st;
    }
    if (!hlo_shape_compatible(&ins->shape, &inf)) {
      char a[VF_MSG_SHAPE], b[VF_MSG_SHAPE];
      return vf_err(m, c, "'%s' (%s) declares %s but its operands give %s", ins->name,
                    hlo_opcode_name(ins->op), hlo_shape_str(&ins->shape, a, sizeof a),
                    hlo_shape_str(&inf, b, sizeof b));
    }
  }
  return HJ_OK;
}

hj_status hlo_verify_module(hlo_module *m) {
  if (!m) return HJ_ERR_INVALID_ARG;
  if (!m->entry) return hj__err(m->ctx, HJ_ERR_SHAPE, "verifier: module '%s' has no entry computation", m->name);
  vf_cix *ix = NULL;
  struct { char *key; int value; } *names = NULL;   /* stb_ds string set */
  sh_new_arena(names);
  for (ptrdiff_t i = 0; i < arrlen(m->comps); i++)
    if (hmgeti(ix, m->comps[i]) < 0) hmput(ix, m->comps[i], i);
  hj_status st = HJ_OK;
  if (vf_comp_index(ix, m->entry) < 0)
    st = hj__err(m->ctx, HJ_ERR_SHAPE, "verifier: module '%s': the entry is not one of its computations", m->name);
  for (ptrdiff_t i = 0; !st && i < arrlen(m->comps); i++) {
    const hlo_comp *c = m->comps[i];
    if (c->is_entry && c != m->entry) st = vf_err(m, c, "marked ENTRY but is not the module's entry");
    if (!st && shgeti(names, c->name) >= 0) st = vf_err(m, c, "name used by two computations");
    if (!st) shput(names, c->name, 1);
    if (!st) st = vf_structure(m, ix, c);
  }
  shfree(names);
  ptrdiff_t n = arrlen(m->comps);
  uint8_t *mark = st ? NULL : calloc((size_t)n + 1, 1);
  if (!st && !mark) st = hj__err(m->ctx, HJ_ERR_OOM, "out of memory verifying '%s'", m->name);
  for (ptrdiff_t i = 0; !st && i < n; i++) st = vf_cycles(m, ix, i, mark);
  free(mark);
  hmfree(ix);
  for (ptrdiff_t i = 0; !st && i < n; i++) st = vf_shapes(m, m->comps[i]);
  if (!st) st = hlo_verify_aliases(m);
  return st;
}

#undef VF_MSG_SHAPE
