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
#include <stdlib.h>

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

/* The pass's state: the computation names taken (a set, instead of a search of m->comps
   per wrap) and the wrapped instructions' fusions (forwarded to their users as the walk
   reaches them, instead of a scan of the computation per wrap): linear. */
typedef struct wf_state {
  struct { char *key; int value; } *names;   /* stb_ds string set */
  hlo_fwd fw;
} wf_state;

/* Wraps c->instrs[pos]; the fusion takes its place in c's text order (its fused
   computation is appended to m->comps and to *mine; wf_comp moves them before c). */
static hj_status wf_wrap(wf_state *W, hlo_comp *c, ptrdiff_t pos, hlo_comp ***mine) {
  hlo_module *m = c->module;
  hlo_instr *ins = c->instrs[pos];
  char name[512];
  snprintf(name, sizeof name, "wrapped_%s_computation", ins->name);
  if (shgeti(W->names, name) >= 0)   /* names repeat across computations */
    snprintf(name, sizeof name, "wrapped_%s_computation.%d", ins->name, ins->id);
  hlo_comp *fc = hlo_comp_new(m, name);
  if (!fc) return HJ_ERR_OOM;
  shput(W->names, fc->name, 1);
  arrput(*mine, fc);
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
  if (!hlo_fwd_set(&W->fw, ins, fusion)) st = hj__err(m->ctx, HJ_ERR_OOM, "wrap: out of memory");
done:
  arrfree(uniq);
  arrfree(inner);
  return st;
}

/* Moves |mine| (computations made for |c|, in creation order) to just before |c| in
   m->comps, where hlo_module_insert_comp_before one at a time would have put them: one
   O(comps) rebuild per computation instead of one per wrap. */
static void wf_place(hlo_module *m, hlo_comp **mine, const hlo_comp *c) {
  if (!arrlen(mine)) return;
  struct { hlo_comp *key; int value; } *set = NULL;
  for (ptrdiff_t i = 0; i < arrlen(mine); i++) hmput(set, mine[i], 1);
  hlo_comp **v = NULL;
  bool placed = false;
  for (ptrdiff_t i = 0; i < arrlen(m->comps); i++) {
    hlo_comp *x = m->comps[i];
    if (hmgeti(set, x) >= 0) continue;
    if (x == c) {
      for (ptrdiff_t k = 0; k < arrlen(mine); k++) arrput(v, mine[k]);
      placed = true;
    }
    arrput(v, x);
  }
  for (ptrdiff_t k = 0; !placed && k < arrlen(mine); k++) arrput(v, mine[k]);
  hmfree(set);
  arrfree(m->comps);
  m->comps = v;
}

static hj_status wf_comp(wf_state *W, hlo_comp *c, const hlo_comp ***seen, bool *changed) {
  for (ptrdiff_t i = 0; i < arrlen(*seen); i++)
    if ((*seen)[i] == c) return HJ_OK;
  arrput(*seen, c);
  hlo_comp **mine = NULL;   /* the computations made for c's wraps */
  hj_status st = HJ_OK;
  for (ptrdiff_t i = 0; i < arrlen(c->instrs) && st == HJ_OK; i++) {
    hlo_instr *ins = c->instrs[i];
    hlo_fwd_apply(&W->fw, ins);
    if (ins->op == HLO_OP_WHILE || ins->op == HLO_OP_CONDITIONAL) {
      for (int k = 0; k < ins->ncalls && st == HJ_OK; k++) st = wf_comp(W, ins->calls[k], seen, changed);
      continue;
    }
    if (wf_keep(ins)) continue;
    st = wf_wrap(W, c, i, &mine);
    *changed = true;
  }
  hlo_fwd_root(&W->fw, c);
  wf_place(c->module, mine, c);
  arrfree(mine);
  return st;
}

hj_status hlo_pass_wrap_fusions(hlo_pass_ctx *pc, hlo_module *m, bool *changed) {
  bool any = false;
  const hlo_comp **seen = NULL;
  wf_state W = { 0 };
  sh_new_arena(W.names);
  for (ptrdiff_t i = 0; i < arrlen(m->comps); i++) shput(W.names, m->comps[i]->name, 1);
  hj_status st = m->entry ? wf_comp(&W, m->entry, &seen, &any) : HJ_OK;
  shfree(W.names);
  hlo_fwd_free(&W.fw);
  arrfree(seen);
  if (st == HJ_ERR_OOM) hj__err(m->ctx, st, "wrap_fusions: out of memory");
  if (changed) *changed = any;
  return st;
}
