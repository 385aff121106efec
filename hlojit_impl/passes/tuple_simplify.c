/* passes/tuple_simplify.c — removes tuples that are built only to be taken apart.

   Rules, in every computation:
     get-tuple-element(tuple(a0, ..., an), i)        -> ai
     tuple(gte(x, 0), gte(x, 1), ..., gte(x, n-1))   -> x   (x an n-tuple of the same shape)
   Both replace the instruction's uses (the root too) and leave it for DCE. A replacement
   must have exactly the instruction's shape, layouts included: layouts are part of what a
   root or a bitcast user means. The order stays topological (replacements are operands,
   which come earlier). */
#include "passes.h"

static hlo_instr *ts_gte_of_tuple(hlo_instr *ins) {
  hlo_instr *t = ins->operands[0];
  if (t->op != HLO_OP_TUPLE || ins->index < 0 || ins->index >= t->noperands) return NULL;
  hlo_instr *r = t->operands[ins->index];
  return hlo_shape_equal(&r->shape, &ins->shape) ? r : NULL;
}

static hlo_instr *ts_tuple_of_gtes(hlo_instr *ins) {
  if (ins->noperands == 0 || ins->operands[0]->op != HLO_OP_GET_TUPLE_ELEMENT) return NULL;
  hlo_instr *x = ins->operands[0]->operands[0];
  if (x->shape.type != HLO_TUPLE || x->shape.ntuple != ins->noperands) return NULL;
  for (int i = 0; i < ins->noperands; i++) {
    const hlo_instr *g = ins->operands[i];
    if (g->op != HLO_OP_GET_TUPLE_ELEMENT || g->operands[0] != x || g->index != i) return NULL;
  }
  return hlo_shape_equal(&x->shape, &ins->shape) ? x : NULL;
}

hj_status hlo_pass_tuple_simplify(hlo_pass_ctx *pc, hlo_module *m, bool *changed) {
  bool any = false;
  for (ptrdiff_t ci = 0; ci < arrlen(m->comps); ci++) {
    hlo_comp *c = m->comps[ci];
    hlo_fwd fw = { 0 };   /* uses are redirected as the walk reaches them: linear */
    for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++) {
      hlo_instr *ins = c->instrs[i], *r = NULL;
      hlo_fwd_apply(&fw, ins);
      if (ins->op == HLO_OP_GET_TUPLE_ELEMENT && ins->noperands == 1) r = ts_gte_of_tuple(ins);
      else if (ins->op == HLO_OP_TUPLE) r = ts_tuple_of_gtes(ins);
      if (r) hlo_fwd_set(&fw, ins, r);
    }
    hlo_fwd_root(&fw, c);
    any |= fw.changed;
    hlo_fwd_free(&fw);
  }
  *changed = any;
  return HJ_OK;
}
