/* passes/wrap_fusions.c — every computing instruction becomes a single-op fusion.

   Why: the emitters and the runtime only ever see fusions (one fusion -> one kernel or one
   evaluator fallback). Until the fusion pass exists this is the whole "fusion": each op is
   its own fusion; fusions already in the module (the corpus has many) stay as they are.

   Which computations: the entry and, transitively, the condition/body of every while and
   the branches of every conditional reached from it (the runtime runs those as nested
   thunk sequences). Fused computations, reducers and comparators are left alone.

   Which instructions stay unwrapped: parameter, constant, tuple, get-tuple-element, reshape
   and bitcast with default layouts (the runtime aliases their storage: buffers are dense
   row-major in logical order), fusion, while, conditional, opt-barrier.

   Example:   %m = f32[4,8] multiply(%x, %x)
   becomes    wrapped_m_computation {
                %param_0.7 = f32[4,8] parameter(0)
                ROOT %m = f32[4,8] multiply(%param_0.7, %param_0.7)
              }
              %wrapped_m = f32[4,8] fusion(%x), kind=kLoop, calls=%wrapped_m_computation
   An operand used twice becomes one fusion operand (one buffer for the kernel). reduce
   gets kind=kInput, dot kind=kOutput, everything else kLoop. The fused computation is
   placed in m->comps just before the computation that uses it (callees first). */
#include "passes.h"

static bool wf_keep(const hlo_instr *ins) {
  switch (ins->op) {
  case HLO_OP_PARAMETER: case HLO_OP_CONSTANT: case HLO_OP_TUPLE: case HLO_OP_GET_TUPLE_ELEMENT:
  case HLO_OP_RESHAPE: case HLO_OP_FUSION: case HLO_OP_WHILE: case HLO_OP_CONDITIONAL:
  case HLO_OP_OPT_BARRIER: case HLO_OP_CALL:
    return true;
  case HLO_OP_BITCAST:
    return hlo_shape_layout_is_default(&ins->shape) &&
           hlo_shape_layout_is_default(&ins->operands[0]->shape) &&
           hlo_shape_is_array(&ins->shape) &&
           hlo_shape_bytes(&ins->shape) == hlo_shape_bytes(&ins->operands[0]->shape);
  default:
    return false;
  }
}

/* Wraps c->instrs[pos]; the fusion takes its place in c's text order. */
static hj_status wf_wrap(hlo_comp *c, ptrdiff_t pos) {
  hlo_module *m = c->module;
  hlo_instr *ins = c->instrs[pos];
  char name[512];
  snprintf(name, sizeof name, "wrapped_%s_computation", ins->name);
  if (hlo_module_find_comp(m, name))   /* names repeat across computations */
    snprintf(name, sizeof name, "wrapped_%s_computation.%d", ins->name, ins->id);
  hlo_comp *fc = hlo_comp_new(m, name);
  if (!fc) return HJ_ERR_OOM;
  hlo_module_insert_comp_before(m, fc, c);
  hlo_instr **uniq = NULL, **inner = NULL, *fused = NULL, *fusion = NULL;
  hj_status st = HJ_OK;
  for (int k = 0; k < ins->noperands; k++) {
    int p = -1;
    for (ptrdiff_t u = 0; u < arrlen(uniq); u++)
      if (uniq[u] == ins->operands[k]) p = (int)u;
    if (p < 0) {
      p = (int)arrlen(uniq);
      snprintf(name, sizeof name, "param_%d.%d", p, m->next_id);
      hlo_instr *par = hlo_instr_new(fc, HLO_OP_PARAMETER, name, &ins->operands[k]->shape, NULL, 0);
      if (!par) { st = HJ_ERR_OOM; goto done; }
      par->index = p;
      arrput(fc->params, par);
      arrput(uniq, ins->operands[k]);
    }
    arrput(inner, fc->params[p]);
  }
  if (!(fused = hlo_instr_clone_into(fc, ins, NULL, inner, ins->calls))) { st = HJ_ERR_OOM; goto done; }
  fc->root = fused;
  fused->is_root = true;
  snprintf(name, sizeof name, "wrapped_%s", ins->name);
  if (!(fusion = hlo_instr_new(c, HLO_OP_FUSION, name, &ins->shape, uniq, (int)arrlen(uniq)))) {
    st = HJ_ERR_OOM;
    goto done;
  }
  fusion->fusion_kind = ins->op == HLO_OP_REDUCE ? HLO_FUSION_INPUT
                      : ins->op == HLO_OP_DOT ? HLO_FUSION_OUTPUT : HLO_FUSION_LOOP;
  hlo_instr_set_calls(fusion, &fc, 1);
  if (fusion->ncalls != 1) { st = hj__err(m->ctx, HJ_ERR_OOM, "wrap: out of memory"); goto done; }
  (void)arrpop(c->instrs);                     /* appended last: move it to ins's place */
  c->instrs[pos] = fusion;
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++)
    for (int k = 0; k < c->instrs[i]->noperands; k++)
      if (c->instrs[i]->operands[k] == ins) c->instrs[i]->operands[k] = fusion;
  if (c->root == ins) {
    ins->is_root = false;
    c->root = fusion;
    fusion->is_root = true;
  }
done:
  arrfree(uniq);
  arrfree(inner);
  return st;
}

static hj_status wf_comp(hlo_comp *c, const hlo_comp ***seen, bool *changed) {
  for (ptrdiff_t i = 0; i < arrlen(*seen); i++)
    if ((*seen)[i] == c) return HJ_OK;
  arrput(*seen, c);
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++) {
    hlo_instr *ins = c->instrs[i];
    if (ins->op == HLO_OP_WHILE || ins->op == HLO_OP_CONDITIONAL) {
      for (int k = 0; k < ins->ncalls; k++) {
        hj_status st = wf_comp(ins->calls[k], seen, changed);
        if (st != HJ_OK) return st;
      }
      continue;
    }
    if (wf_keep(ins)) continue;
    hj_status st = wf_wrap(c, i);
    if (st != HJ_OK) return st;
    *changed = true;
  }
  return HJ_OK;
}

hj_status pass_wrap_fusions(hlo_module *m, bool *changed) {
  bool any = false;
  const hlo_comp **seen = NULL;
  hj_status st = m->entry ? wf_comp(m->entry, &seen, &any) : HJ_OK;
  arrfree(seen);
  if (st == HJ_ERR_OOM) hj__err(m->ctx, st, "wrap_fusions: out of memory");
  if (changed) *changed = any;
  return st;
}
