/* passes/constant_fold.c — evaluates small instructions whose operands are all constants.

   An instruction is folded when every operand is a constant, its result is an array of at
   most CF_MAX_ELEMS elements, and it is not one of: parameter, constant, iota (no
   operands: nothing to fold, and an iota is cheaper than its constant), broadcast (a
   broadcast constant is cheaper than its expansion, and fusion takes it into its users),
   while (may run long), tuple (tuple simplification takes those apart). The IR has no op
   with side effects. The evaluator (the oracle of every backend; reached through the
   pc->eval hook, so that passes do not depend on eval/) computes the value, so the folded
   constant holds exactly the bits the instruction would have produced. No hook: nothing
   is folded.

   How: a throw-away module holds one computation listing the constant operands (the
   original instructions, not copies: the evaluator only reads them) and a clone of the
   instruction as its root; its ids continue the module's, so they never collide. The
   result becomes a new constant placed just before the instruction, taking its uses.
   A failed evaluation (an op the evaluator rejects) leaves the instruction alone and the
   context's error message as it was. */
#include "passes.h"
#include <stdlib.h>

#define CF_MAX_ELEMS 1024

static bool cf_candidate(const hlo_instr *ins) {
  switch (ins->op) {
  case HLO_OP_PARAMETER: case HLO_OP_CONSTANT: case HLO_OP_IOTA: case HLO_OP_BROADCAST:
  case HLO_OP_WHILE: case HLO_OP_TUPLE:
    return false;
  default: break;
  }
  if (ins->noperands == 0 || !hlo_shape_is_array(&ins->shape)) return false;
  for (int d = 0; d < ins->shape.rank; d++)
    if (ins->shape.dynamic[d]) return false;
  if (hlo_shape_numel(&ins->shape) > CF_MAX_ELEMS) return false;
  for (int k = 0; k < ins->noperands; k++)
    if (ins->operands[k]->op != HLO_OP_CONSTANT || !ins->operands[k]->literal) return false;
  return true;
}

/* The value of |ins| (operands constants); NULL when the evaluator could not make it. */
static hlo_literal *cf_eval(hlo_pass_ctx *pc, hlo_module *m, hlo_instr *ins) {
  hj_ctx_t *ctx = m->ctx;
  hlo_module *tmp = hlo_module_new(ctx, "constant_fold");
  if (!tmp) return NULL;
  tmp->next_id = m->next_id;
  hlo_literal *out = NULL;
  hlo_comp *c = hlo_comp_new(tmp, "fold");
  if (c) {
    for (int k = 0; k < ins->noperands; k++) {
      bool dup = false;
      for (int j = 0; j < k; j++) dup |= ins->operands[j] == ins->operands[k];
      if (!dup) arrput(c->instrs, ins->operands[k]);
    }
    hlo_instr *r = hlo_instr_clone_into(c, ins, NULL, ins->operands, ins->calls);
    if (r) {
      hlo_comp_set_root(c, r);
      tmp->entry = c;
      c->is_entry = true;
      if (pc->eval(ctx, c, NULL, 0, &out) != HJ_OK) out = NULL;
    }
  }
  hlo_module_free(tmp);
  return out;
}

/* One walk in text order: c->instrs is rebuilt as it goes (a folded constant is appended
   just before its instruction) and uses are forwarded as the walk reaches them (hlo_fwd);
   whether an instruction has users at all comes from counts made before the walk (a fold
   never changes who reads an instruction not yet visited). Linear, plus the evaluations. */
static bool cf_comp(hlo_pass_ctx *pc, hlo_comp *c) {
  hlo_module *m = c->module;
  hlo_instr **snap = c->instrs;
  ptrdiff_t n = arrlen(snap);
  int nid = m->next_id;
  uint8_t *used = calloc((size_t)nid + 1, 1);
  if (!used) return false;
  for (ptrdiff_t i = 0; i < n; i++)
    for (int k = 0; k < snap[i]->noperands; k++)
      if (snap[i]->operands[k]->id < nid) used[snap[i]->operands[k]->id] = 1;
  c->instrs = NULL;
  hlo_fwd fw = { 0 };
  for (ptrdiff_t i = 0; i < n; i++) {
    hlo_instr *ins = snap[i];
    hlo_fwd_apply(&fw, ins);
    arrput(c->instrs, ins);
    if (!cf_candidate(ins)) continue;
    if (c->root != ins && !used[ins->id]) continue;   /* dead: DCE's job */
    hj__err_saved saved = { .last = HJ_OK };
    if (m->ctx) hj__err_save(m->ctx, &saved);
    hlo_literal *v = cf_eval(pc, m, ins);
    if (!v) {                                   /* not foldable: forget the evaluator's error */
      if (m->ctx) hj__err_restore(m->ctx, &saved);
      continue;
    }
    (void)arrpop(c->instrs);                    /* the constant goes before |ins| */
    hlo_instr *k = hlo_constant_new_before(c, NULL, v);
    arrput(c->instrs, ins);
    hlo_literal_free(v);
    if (!k) continue;
    k->shape = hlo_shape_dup(m, &ins->shape);   /* keep the layout */
    hlo_fwd_set(&fw, ins, k);
  }
  hlo_fwd_root(&fw, c);
  bool any = fw.changed;
  hlo_fwd_free(&fw);
  free(used);
  arrfree(snap);
  return any;
}

hj_status hlo_pass_constant_fold(hlo_pass_ctx *pc, hlo_module *m, bool *changed) {
  bool any = false;
  for (ptrdiff_t ci = 0; pc->eval && ci < arrlen(m->comps); ci++) any |= cf_comp(pc, m->comps[ci]);
  *changed = any;
  return HJ_OK;
}

#undef CF_MAX_ELEMS
