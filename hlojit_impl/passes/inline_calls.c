/* passes/inline_calls.c — replaces every `call` by a copy of its callee's body.

   Why: the backends compile one computation at a time as a flat list of fusions; a call is
   just structure, and inlining it lets every later pass (dot canonicalisation, fusion
   wrapping, buffer assignment) see the whole program.

   Algorithm, per computation C, repeated until C holds no call (callees may call):
     for a call %r = call(%a, %b), to_apply=F:
       copy F's instructions in text order, F's parameter k mapping to operand k of the
       call, every other instruction becoming a new instruction of C named NAME.N;
       uses of %r become uses of the copy of F's root (C's root too, if %r was it);
       the copies take %r's place in C's text order (so the order stays topological).
   Computations that nothing calls any more are removed at the end (hlo_dce_comps,
   the reachability sweep of dce.c). Literals are copied, so nothing is shared between C and F. */
#include "passes.h"
#include <stdlib.h>

/* Inlines |call| (an instruction of |c|); the new instructions are appended to c->instrs. */
static hj_status inl_one(hlo_comp *c, hlo_instr *call, hlo_instr **result) {
  hlo_module *m = c->module;
  const hlo_comp *f = call->calls[0];
  hlo_instr **map = calloc((size_t)m->next_id + arrlen(f->instrs) + 1, sizeof *map);
  int nmap = m->next_id;
  hlo_instr **ops = NULL;
  hj_status st = map ? HJ_OK : hj__err(m->ctx, HJ_ERR_OOM, "inline: out of memory");
  for (ptrdiff_t i = 0; st == HJ_OK && i < arrlen(f->instrs); i++) {
    const hlo_instr *s = f->instrs[i];
    if (s->id >= nmap) {
      st = hj__err(m->ctx, HJ_ERR_INTERNAL, "inline: instruction id %d out of range", s->id);
      break;
    }
    if (s->op == HLO_OP_PARAMETER) {
      if (s->index < 0 || s->index >= call->noperands) {
        st = hj__err(m->ctx, HJ_ERR_INTERNAL, "inline: call '%s' lacks operand %lld of '%s'",
                     call->name, (long long)s->index, f->name);
        break;
      }
      map[s->id] = call->operands[s->index];
      continue;
    }
    arrsetlen(ops, 0);
    for (int k = 0; k < s->noperands; k++) arrput(ops, map[s->operands[k]->id]);
    char name[256];
    snprintf(name, sizeof name, "%s.%d", s->name, m->next_id);
    hlo_instr *d = hlo_instr_clone_into(c, s, name, ops, s->calls);
    if (!d) st = HJ_ERR_OOM;
    else map[s->id] = d;
  }
  if (st == HJ_OK) *result = map[f->root->id];
  arrfree(ops);
  free(map);
  return st;
}

/* Moves the instructions appended after |nold| to the place of |call| and drops the call;
   every use of the call becomes a use of |res|. */
static void inl_splice(hlo_comp *c, hlo_instr *call, ptrdiff_t nold, hlo_instr *res) {
  hlo_instr **v = NULL;
  for (ptrdiff_t i = 0; i < nold; i++) {
    if (c->instrs[i] != call) {
      arrput(v, c->instrs[i]);
      continue;
    }
    for (ptrdiff_t k = nold; k < arrlen(c->instrs); k++) arrput(v, c->instrs[k]);
  }
  arrfree(c->instrs);
  c->instrs = v;
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++)
    for (int k = 0; k < c->instrs[i]->noperands; k++)
      if (c->instrs[i]->operands[k] == call) c->instrs[i]->operands[k] = res;
  if (c->root == call) {
    call->is_root = false;
    c->root = res;
    res->is_root = true;
  }
}

hj_status hlo_pass_inline_calls(hlo_pass_ctx *pc, hlo_module *m, bool *changed) {
  bool any = false;
  for (ptrdiff_t ci = 0; ci < arrlen(m->comps); ci++) {
    hlo_comp *c = m->comps[ci];
    for (int guard = 0;; guard++) {
      hlo_instr *call = NULL;
      for (ptrdiff_t i = 0; i < arrlen(c->instrs) && !call; i++)
        if (c->instrs[i]->op == HLO_OP_CALL) call = c->instrs[i];
      if (!call) break;
      if (guard > 100000 || call->ncalls != 1 || call->calls[0] == c)
        return hj__err(m->ctx, HJ_ERR_UNSUPPORTED, "inline: call '%s' in '%s' is recursive",
                       call->name, c->name);
      ptrdiff_t nold = arrlen(c->instrs);
      hlo_instr *res = NULL;
      hj_status st = inl_one(c, call, &res);
      if (st != HJ_OK) return st;
      inl_splice(c, call, nold, res);
      any = true;
    }
  }
  if (any) hlo_dce_comps(m);
  if (changed) *changed = any;
  return HJ_OK;
}
