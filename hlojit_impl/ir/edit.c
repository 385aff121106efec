/* ir/edit.c — editing utilities every pass needs: users, replacing uses, removing and
   inserting instructions, a stable topological re-sort, per-computation dead code
   elimination, pruning unreachable computations, and arena constants.

   Invariants kept (the verifier's): c->instrs is topological (operands before users);
   c->root is an instruction of c and the only one with is_root set; parameters are never
   removed (their numbering is the computation's signature).

   Users are not stored in the IR (passes rewrite operands freely); they are computed on
   demand, either for one instruction (hlo_users, O(instrs)) or for a whole computation at
   once (hlo_user_map, O(instrs + operands)), which a pass rebuilds after it edits.

   hlo_comp_topo_sort is stable: a depth-first walk in text order that emits an
   instruction after its operands. On a text order that is already topological it is the
   identity; after an edit that appended a new instruction at the end and made earlier
   instructions use it, the new instruction moves to just before its first user:
     a; b = f(a); c = g(b); ROOT r = h(c); n = k(a)   and b := uses of n
     -> a; n = k(a); b = f(n); ...                                                      */
#include "ir.h"
#include <stdlib.h>

/* ---- users ------------------------------------------------------------------------------- */

static bool ied_has(hlo_instr *const *v, ptrdiff_t n, const hlo_instr *x) {
  for (ptrdiff_t i = 0; i < n; i++)
    if (v[i] == x) return true;
  return false;
}

int hlo_users(const hlo_comp *c, const hlo_instr *ins, hlo_instr ***out) {
  *out = NULL;
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++) {
    hlo_instr *u = c->instrs[i];
    for (int k = 0; k < u->noperands; k++)
      if (u->operands[k] == ins) {
        arrput(*out, u);
        break;
      }
  }
  return (int)arrlen(*out);
}

int hlo_user_count(const hlo_comp *c, const hlo_instr *ins) {
  int n = 0;
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++) {
    const hlo_instr *u = c->instrs[i];
    for (int k = 0; k < u->noperands; k++)
      if (u->operands[k] == ins) {
        n++;
        break;
      }
  }
  return n;
}

void hlo_user_map_build(hlo_user_map *um, const hlo_comp *c) {
  um->map = NULL;
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++) {
    hlo_instr *u = c->instrs[i];
    for (int k = 0; k < u->noperands; k++) {
      hlo_instr *o = u->operands[k];
      if (ied_has(u->operands, k, o)) continue;   /* listed once per user */
      ptrdiff_t j = hmgeti(um->map, o->id);   /* int keys: stb_ds hashes 8-byte keys with UB */
      if (j < 0) {
        hmput(um->map, o->id, NULL);
        j = hmgeti(um->map, o->id);
      }
      arrput(um->map[j].value, u);
    }
  }
}

hlo_instr **hlo_user_map_get(const hlo_user_map *um, const hlo_instr *ins, int *n) {
  hlo_user_map *m = (hlo_user_map *)um;
  ptrdiff_t j = hmgeti(m->map, ins->id);
  hlo_instr **v = j < 0 ? NULL : m->map[j].value;
  if (n) *n = (int)arrlen(v);
  return v;
}

void hlo_user_map_free(hlo_user_map *um) {
  for (ptrdiff_t i = 0; i < hmlen(um->map); i++) arrfree(um->map[i].value);
  hmfree(um->map);
  um->map = NULL;
}

/* ---- replacing and removing ---------------------------------------------------------------- */

void hlo_comp_set_root(hlo_comp *c, hlo_instr *root) {
  if (c->root) c->root->is_root = false;
  c->root = root;
  if (root) root->is_root = true;
}

bool hlo_replace_operand(hlo_instr *user, const hlo_instr *old, hlo_instr *neu) {
  bool any = false;
  for (int k = 0; k < user->noperands; k++)
    if (user->operands[k] == old) {
      user->operands[k] = neu;
      any = true;
    }
  return any;
}

bool hlo_replace_all_uses(hlo_comp *c, hlo_instr *old, hlo_instr *neu) {
  if (old == neu) return false;
  bool any = false;
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++)
    if (c->instrs[i] != neu) any |= hlo_replace_operand(c->instrs[i], old, neu);
  if (c->root == old) {
    hlo_comp_set_root(c, neu);
    any = true;
  }
  return any;
}

static ptrdiff_t ied_index(const hlo_comp *c, const hlo_instr *ins) {
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++)
    if (c->instrs[i] == ins) return i;
  return -1;
}

bool hlo_remove_instr(hlo_comp *c, hlo_instr *ins) {
  if (ins->op == HLO_OP_PARAMETER || c->root == ins) return false;
  ptrdiff_t i = ied_index(c, ins);
  if (i < 0) return false;
  arrdel(c->instrs, i);
  return true;
}

/* ---- inserting and ordering ------------------------------------------------------------------ */

bool hlo_instr_move_before(hlo_comp *c, hlo_instr *ins, const hlo_instr *before) {
  ptrdiff_t i = ied_index(c, ins);
  if (i < 0) return false;
  arrdel(c->instrs, i);
  ptrdiff_t j = before ? ied_index(c, before) : -1;
  if (j < 0) j = arrlen(c->instrs);
  arrins(c->instrs, j, ins);
  return true;
}

hlo_instr *hlo_instr_new_before(hlo_comp *c, const hlo_instr *before, hlo_opcode op,
                                const char *name, const hlo_shape *shape,
                                hlo_instr *const *operands, int noperands) {
  hlo_instr *ins = hlo_instr_new(c, op, name, shape, operands, noperands);
  if (ins && before) hlo_instr_move_before(c, ins, before);
  return ins;
}

/* Per-instruction marks of one computation, indexed by position rather than by id: a
   small fused computation in a big module must not pay for the module's id range (a
   calloc of next_id bytes per call made fusion quadratic in the module). */
typedef struct ied_pos {
  int lo, n;        /* ids lo .. lo + n - 1 */
  int *slot;        /* per id - lo: the position, -1 */
  struct { const hlo_instr *key; int value; } *hm;   /* when the ids are too spread out */
} ied_pos;

static bool ied_pos_build(ied_pos *p, const hlo_comp *c) {
  memset(p, 0, sizeof *p);
  ptrdiff_t n = arrlen(c->instrs);
  int lo = n ? c->instrs[0]->id : 0, hi = lo;
  for (ptrdiff_t i = 0; i < n; i++) {
    if (c->instrs[i]->id < lo) lo = c->instrs[i]->id;
    if (c->instrs[i]->id > hi) hi = c->instrs[i]->id;
  }
  if ((int64_t)hi - lo + 1 > 8 * (int64_t)n + 1024) {
    for (ptrdiff_t i = 0; i < n; i++) hmput(p->hm, c->instrs[i], (int)i);
    return true;
  }
  p->lo = lo;
  p->n = hi - lo + 1;
  if (!(p->slot = malloc(sizeof *p->slot * (size_t)p->n))) return false;
  for (int i = 0; i < p->n; i++) p->slot[i] = -1;
  for (ptrdiff_t i = 0; i < n; i++) p->slot[c->instrs[i]->id - lo] = (int)i;
  return true;
}

static void ied_pos_free(ied_pos *p) {
  free(p->slot);
  hmfree(p->hm);
}

static int ied_slot(const ied_pos *p, const hlo_instr *x) {
  if (!p->slot) {
    ptrdiff_t j = hmgeti(((ied_pos *)p)->hm, x);
    return j < 0 ? -1 : p->hm[j].value;
  }
  int k = x->id - p->lo;
  return k >= 0 && k < p->n ? p->slot[k] : -1;
}

/* Iterative DFS (modules can be deep chains): state 0 new, 1 on the stack, 2 emitted;
   |state| by position (|pos|). */
static hj_status ied_visit(hlo_comp *c, const ied_pos *pos, hlo_instr *start, uint8_t *state, hlo_instr ***out) {
  struct ied_frame { hlo_instr *ins; int next; } *stack = NULL;
  arrput(stack, ((struct ied_frame){start, 0}));
  state[ied_slot(pos, start)] = 1;
  hj_status st = HJ_OK;
  while (arrlen(stack) > 0) {
    struct ied_frame *f = &stack[arrlen(stack) - 1];
    if (f->next < f->ins->noperands) {
      hlo_instr *o = f->ins->operands[f->next++];
      int q = o->parent == c ? ied_slot(pos, o) : -1;
      if (q < 0) continue;                       /* foreign operand: the verifier's business */
      if (state[q] == 1) {
        st = hj__err(c->module->ctx, HJ_ERR_INTERNAL, "computation '%s': cycle through '%s'",
                     c->name, o->name);
        break;
      }
      if (state[q] == 0) {
        state[q] = 1;
        arrput(stack, ((struct ied_frame){o, 0}));
      }
      continue;
    }
    state[ied_slot(pos, f->ins)] = 2;
    arrput(*out, f->ins);
    arrpop(stack);
  }
  arrfree(stack);
  return st;
}

hj_status hlo_comp_topo_sort(hlo_comp *c) {
  ptrdiff_t n = arrlen(c->instrs);
  uint8_t *state = calloc((size_t)n + 1, 1);
  ied_pos pos;
  if (!state || !ied_pos_build(&pos, c)) {
    free(state);
    return hj__err(c->module->ctx, HJ_ERR_OOM, "topological sort: out of memory");
  }
  hlo_instr **order = NULL;
  hj_status st = HJ_OK;
  for (ptrdiff_t i = 0; i < n && st == HJ_OK; i++)
    if (state[i] == 0) st = ied_visit(c, &pos, c->instrs[i], state, &order);
  free(state);
  ied_pos_free(&pos);
  if (st != HJ_OK || arrlen(order) != arrlen(c->instrs)) {
    if (st == HJ_OK)
      st = hj__err(c->module->ctx, HJ_ERR_INTERNAL,
                   "computation '%s': an operand is not an instruction of it", c->name);
    arrfree(order);
    return st;
  }
  arrfree(c->instrs);
  c->instrs = order;
  return HJ_OK;
}

/* ---- dead code --------------------------------------------------------------------------- */

hj_status hlo_comp_dce(hlo_comp *c, bool *changed) {
  ptrdiff_t len = arrlen(c->instrs);
  bool *live = calloc((size_t)len + 1, 1);
  ied_pos pos;   /* by position, not id (see ied_pos) */
  if (!live || !ied_pos_build(&pos, c)) {
    free(live);
    return hj__err(c->module->ctx, HJ_ERR_OOM, "dce: out of memory");
  }
  int r = c->root ? ied_slot(&pos, c->root) : -1;
  if (r >= 0) live[r] = true;
  for (ptrdiff_t i = len - 1; i >= 0; i--) {   /* users come after operands */
    hlo_instr *ins = c->instrs[i];
    if (ins->op == HLO_OP_PARAMETER) live[i] = true;
    if (!live[i]) continue;
    for (int k = 0; k < ins->noperands; k++) {
      int q = ied_slot(&pos, ins->operands[k]);
      if (q >= 0) live[q] = true;
    }
  }
  ptrdiff_t w = 0;
  for (ptrdiff_t i = 0; i < len; i++)
    if (live[i]) c->instrs[w++] = c->instrs[i];
  free(live);
  ied_pos_free(&pos);
  if (changed) *changed = w != len;
  arrsetlen(c->instrs, w);
  return HJ_OK;
}

static bool ied_reached(hlo_comp *const *seen, const hlo_comp *c) {
  for (ptrdiff_t i = 0; i < arrlen(seen); i++)
    if (seen[i] == c) return true;
  return false;
}

hj_status hlo_module_reachable(const hlo_module *m, hlo_comp ***out) {
  *out = NULL;
  if (!m->entry) return HJ_OK;
  arrput(*out, m->entry);
  for (ptrdiff_t q = 0; q < arrlen(*out); q++) {          /* breadth first: the array is the queue */
    hlo_comp *c = (*out)[q];
    for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++)
      for (int k = 0; k < c->instrs[i]->ncalls; k++) {
        hlo_comp *callee = c->instrs[i]->calls[k];
        if (callee && !ied_reached(*out, callee)) arrput(*out, callee);
      }
  }
  return HJ_OK;
}

hj_status hlo_module_prune_comps(hlo_module *m, bool *changed) {
  if (changed) *changed = false;
  if (!m->entry) return HJ_OK;
  hlo_comp **seen = NULL;
  hlo_module_reachable(m, &seen);
  ptrdiff_t w = 0, len = arrlen(m->comps);
  for (ptrdiff_t i = 0; i < len; i++) {
    hlo_comp *c = m->comps[i];
    if (ied_reached(seen, c)) {
      m->comps[w++] = c;
    } else {                       /* hlo_module_free frees only listed comps' arrays */
      arrfree(c->instrs);
      arrfree(c->params);
    }
  }
  arrfree(seen);
  if (changed) *changed = w != len;
  arrsetlen(m->comps, w);
  return HJ_OK;
}

hj_status hlo_module_dce(hlo_module *m, bool *changed) {
  bool any = false, ch = false;
  hj_status st = hlo_module_prune_comps(m, &any);
  for (ptrdiff_t i = 0; st == HJ_OK && i < arrlen(m->comps); i++) {
    st = hlo_comp_dce(m->comps[i], &ch);
    any |= ch;
  }
  if (changed) *changed = any;
  return st;
}

/* ---- constants ------------------------------------------------------------------------------- */

hlo_literal *hlo_literal_to_arena(hlo_module *m, const hlo_literal *l) {
  hlo_literal *r = hlo_alloc(m, sizeof *r);
  if (!r) return NULL;
  r->shape = hlo_shape_dup(m, &l->shape);
  r->nbytes = l->nbytes;
  r->nelems = l->nelems;
  if (l->nbytes > 0 && l->data) {
    if (!(r->data = hlo_alloc(m, (size_t)l->nbytes))) return NULL;
    memcpy(r->data, l->data, (size_t)l->nbytes);
  }
  if (l->nelems > 0) {
    if (!(r->elems = hlo_alloc(m, sizeof(hlo_literal *) * (size_t)l->nelems))) return NULL;
    for (int i = 0; i < l->nelems; i++)
      if (!(r->elems[i] = hlo_literal_to_arena(m, l->elems[i]))) return NULL;
  }
  return r;
}

hlo_instr *hlo_constant_new_before(hlo_comp *c, const hlo_instr *before, const hlo_literal *l) {
  hlo_literal *al = hlo_literal_to_arena(c->module, l);
  if (!al) {
    hj__err(c->module->ctx, HJ_ERR_OOM, "out of memory creating a constant");
    return NULL;
  }
  hlo_instr *ins = hlo_instr_new_before(c, before, HLO_OP_CONSTANT, NULL, &l->shape, NULL, 0);
  if (ins) ins->literal = al;
  return ins;
}
