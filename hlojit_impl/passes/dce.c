/* passes/dce.c — dead code elimination.

   Instructions: within each computation, walk the text order backwards keeping a "used"
   mark per instruction: the root and every parameter are live; a live instruction marks
   its operands. The unmarked ones are dropped (no op of the IR has side effects).
   Computations: a depth-first walk of called computations from the entry; the ones it
   does not reach are dropped from m->comps (their memory stays in the arena, which is
   freed with the module). */
#include "passes.h"
#include <stdlib.h>

static void dce_mark_comp(const hlo_comp *c, const hlo_comp ***seen) {
  for (ptrdiff_t i = 0; i < arrlen(*seen); i++)
    if ((*seen)[i] == c) return;
  arrput(*seen, c);
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++)
    for (int k = 0; k < c->instrs[i]->ncalls; k++) dce_mark_comp(c->instrs[i]->calls[k], seen);
}

bool hlo_dce_comps(hlo_module *m) {
  if (!m->entry) return false;
  const hlo_comp **seen = NULL;
  dce_mark_comp(m->entry, &seen);
  hlo_comp **keep = NULL;
  bool removed = false;
  for (ptrdiff_t i = 0; i < arrlen(m->comps); i++) {
    bool live = false;
    for (ptrdiff_t k = 0; k < arrlen(seen) && !live; k++) live = seen[k] == m->comps[i];
    if (live) {
      arrput(keep, m->comps[i]);
    } else {
      arrfree(m->comps[i]->instrs);
      arrfree(m->comps[i]->params);
      removed = true;
    }
  }
  arrfree(m->comps);
  m->comps = keep;
  arrfree(seen);
  return removed;
}

static bool dce_comp(hlo_module *m, hlo_comp *c) {
  int n = m->next_id + 1;
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++)
    if (c->instrs[i]->id >= n) n = c->instrs[i]->id + 1;
  bool *used = calloc((size_t)n, 1);
  if (!used) return false;
  if (c->root) used[c->root->id] = true;
  for (ptrdiff_t i = arrlen(c->instrs) - 1; i >= 0; i--) {
    hlo_instr *ins = c->instrs[i];
    if (ins->op == HLO_OP_PARAMETER) used[ins->id] = true;
    if (!used[ins->id]) continue;
    for (int k = 0; k < ins->noperands; k++) used[ins->operands[k]->id] = true;
  }
  hlo_instr **keep = NULL;
  bool removed = false;
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++) {
    if (used[c->instrs[i]->id]) arrput(keep, c->instrs[i]);
    else removed = true;
  }
  arrfree(c->instrs);
  c->instrs = keep;
  free(used);
  return removed;
}

hj_status hlo_pass_dce(hlo_pass_ctx *pc, hlo_module *m, bool *changed) {
  bool any = hlo_dce_comps(m);
  for (ptrdiff_t i = 0; i < arrlen(m->comps); i++) any |= dce_comp(m, m->comps[i]);
  if (changed) *changed = any;
  return HJ_OK;
}
