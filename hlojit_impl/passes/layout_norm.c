/* passes/layout_norm.c — makes layout changes explicit, so later passes and emitters can
   reason about logical shapes only.

   Rules (every computation):
   1. bitcast x -> reshape x, when x and the result have the same element type and both
      have the default (row-major) layout: then the physical reinterpretation is exactly
      the logical row-major reshape, which every pass understands.
   2. copy x -> bitcast(transpose x), when x has the default layout and the copy's result
      has another layout L of the same dims: the copy is a physical transpose. With mm =
      L's dims from major to minor (minor_to_major reversed), t = transpose(x,
      dimensions=mm) with the default layout lays the elements out exactly as the result
      does, and a bitcast to the copy's shape only renames that memory. Example:
        y = f32[2,3]{0,1} copy(f32[2,3]{1,0} x)
        -> t = f32[3,2]{1,0} transpose(x), dimensions={1,0};  y' = f32[2,3]{0,1} bitcast(t)
   Both replace the instruction's uses (root included); DCE removes the old ones. */
#include "passes.h"

static bool ln_default(const hlo_shape *s) {
  return !s->has_layout || hlo_shape_layout_is_default(s);
}

static hlo_instr *ln_bitcast(hlo_comp *c, hlo_instr *ins) {
  const hlo_instr *x = ins->operands[0];
  if (!hlo_shape_is_array(&x->shape) || x->shape.type != ins->shape.type) return NULL;
  if (!ln_default(&x->shape) || !ln_default(&ins->shape)) return NULL;
  if (hlo_shape_numel(&x->shape) != hlo_shape_numel(&ins->shape)) return NULL;
  return hlo_instr_new(c, HLO_OP_RESHAPE, NULL, &ins->shape, ins->operands, 1);
}

static hlo_instr *ln_copy(hlo_comp *c, hlo_instr *ins) {
  hlo_instr *x = ins->operands[0];
  const hlo_shape *s = &ins->shape;
  if (!hlo_shape_is_array(&x->shape) || !ln_default(&x->shape) || ln_default(s) ||
      !hlo_shape_compatible(&x->shape, s))
    return NULL;
  int64_t mm[HLO_MAX_RANK], dims[HLO_MAX_RANK];
  for (int i = 0; i < s->rank; i++) {
    mm[i] = s->minor_to_major[s->rank - 1 - i];
    dims[i] = s->dims[mm[i]];
  }
  hlo_shape ts = hlo_shape_array(s->type, s->rank, dims);
  hlo_instr *t = hlo_instr_new(c, HLO_OP_TRANSPOSE, NULL, &ts, &x, 1);
  if (!t) return NULL;
  t->dims = hlo_ints_dup(c->module, mm, s->rank);
  return hlo_instr_new(c, HLO_OP_BITCAST, NULL, s, &t, 1);
}

hj_status hlo_pass_layout_norm(hlo_pass_ctx *pc, hlo_module *m, bool *changed) {
  bool any = false;
  for (ptrdiff_t ci = 0; ci < arrlen(m->comps); ci++) {
    hlo_comp *c = m->comps[ci];
    /* c->instrs is rebuilt as the walk goes (new instructions are appended just before the
       one they replace) and uses are forwarded as the walk reaches them: linear */
    hlo_instr **snap = c->instrs;
    ptrdiff_t n = arrlen(snap);
    c->instrs = NULL;
    hlo_fwd fw = { 0 };
    for (ptrdiff_t i = 0; i < n; i++) {
      hlo_instr *ins = snap[i], *r = NULL;
      hlo_fwd_apply(&fw, ins);
      if (ins->noperands == 1 && ins->op == HLO_OP_BITCAST) r = ln_bitcast(c, ins);
      else if (ins->noperands == 1 && ins->op == HLO_OP_COPY) r = ln_copy(c, ins);
      if (r) hlo_fwd_set(&fw, ins, r);
      arrput(c->instrs, ins);
    }
    hlo_fwd_root(&fw, c);
    any |= fw.changed;
    hlo_fwd_free(&fw);
    arrfree(snap);
  }
  *changed = any;
  return HJ_OK;
}
