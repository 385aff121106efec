/* passes/use_index.c — who reads what, kept up to date while a pass edits one computation
   (passes.h, "use index"), so that a pass asks for the users of an instruction in time
   proportional to their number instead of scanning the computation (hlo_users is
   O(instructions) per question: a pass asking it per instruction is quadratic).

   Representation: per instruction id, an stb_ds array of users in the order they were
   recorded (text order for the ones found by hlo_uidx_build), and per id a position in
   c->instrs and a dead mark. Entries go stale instead of being deleted: a recorded user that
   died, or that no longer has the instruction among its operands, is dropped the next time
   the list is read (hlo_uidx_users compacts it, also removing repeats). So the only duty of
   a pass is to record every NEW use: hlo_uidx_add when an operand slot starts pointing at
   x, hlo_uidx_add_operands for a new instruction, hlo_uidx_kill for an instruction taken
   out of the computation. Reading is amortised O(users recorded).

   Positions: pos[id] is the index in c->instrs when the index was built (or when the pass
   recorded it with hlo_uidx_set_pos); passes that only append to c->instrs and replace in
   place (a fusion taking its instruction's slot) keep them valid, and remove instructions
   lazily (dead marks, then hlo_uidx_compact once). */
#include "passes.h"
#include <stdlib.h>

static bool uix_grow(hlo_uidx *u, int id) {
  if (id < u->cap) return true;
  int cap = u->cap ? u->cap : 64;
  while (cap <= id) cap *= 2;
  hlo_instr ***users = realloc(u->users, sizeof *users * (size_t)cap);
  if (!users) return false;
  u->users = users;
  int *pos = realloc(u->pos, sizeof *pos * (size_t)cap);
  if (!pos) return false;
  u->pos = pos;
  uint8_t *dead = realloc(u->dead, (size_t)cap);
  if (!dead) return false;
  u->dead = dead;
  uint32_t *stamp = realloc(u->stamp, sizeof *stamp * (size_t)cap);
  if (!stamp) return false;
  u->stamp = stamp;
  for (int i = u->cap; i < cap; i++) {
    u->users[i] = NULL;
    u->pos[i] = -1;
    u->dead[i] = 0;
    u->stamp[i] = 0;
  }
  u->cap = cap;
  return true;
}

hj_status hlo_uidx_build(hlo_uidx *u, hlo_comp *c) {
  memset(u, 0, sizeof *u);
  u->c = c;
  if (!uix_grow(u, c->module->next_id)) goto oom;
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++) {
    hlo_instr *x = c->instrs[i];
    if (!uix_grow(u, x->id)) goto oom;
    u->pos[x->id] = (int)i;
  }
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++)
    if (!hlo_uidx_add_operands(u, c->instrs[i])) goto oom;
  return HJ_OK;
oom:
  hlo_uidx_free(u);
  return hj__err(c->module->ctx, HJ_ERR_OOM, "use index: out of memory");
}

void hlo_uidx_free(hlo_uidx *u) {
  for (int i = 0; i < u->cap; i++) arrfree(u->users[i]);
  free(u->users);
  free(u->pos);
  free(u->dead);
  free(u->stamp);
  memset(u, 0, sizeof *u);
}

bool hlo_uidx_add(hlo_uidx *u, hlo_instr *x, hlo_instr *user) {
  if (!uix_grow(u, x->id > user->id ? x->id : user->id)) return false;
  arrput(u->users[x->id], user);
  return true;
}

bool hlo_uidx_add_operands(hlo_uidx *u, hlo_instr *user) {
  for (int k = 0; k < user->noperands; k++) {
    bool again = false;   /* one entry per distinct operand */
    for (int j = 0; j < k && !again; j++) again = user->operands[j] == user->operands[k];
    if (!again && !hlo_uidx_add(u, user->operands[k], user)) return false;
  }
  return uix_grow(u, user->id);
}

void hlo_uidx_kill(hlo_uidx *u, const hlo_instr *x) {
  if (uix_grow(u, x->id)) u->dead[x->id] = 1;
}

bool hlo_uidx_dead(const hlo_uidx *u, const hlo_instr *x) {
  return x->id < u->cap && u->dead[x->id];
}

void hlo_uidx_set_pos(hlo_uidx *u, const hlo_instr *x, int pos) {
  if (uix_grow(u, x->id)) u->pos[x->id] = pos;
}

int hlo_uidx_pos(const hlo_uidx *u, const hlo_instr *x) {
  return x->id < u->cap ? u->pos[x->id] : -1;
}

static bool uix_reads(const hlo_instr *user, const hlo_instr *x) {
  for (int k = 0; k < user->noperands; k++)
    if (user->operands[k] == x) return true;
  return false;
}

int hlo_uidx_users(hlo_uidx *u, const hlo_instr *x, hlo_instr ***out) {
  *out = NULL;
  if (x->id >= u->cap) return 0;
  hlo_instr **v = u->users[x->id];
  if (++u->cur == 0) {   /* the stamps wrapped: start them again */
    memset(u->stamp, 0, sizeof *u->stamp * (size_t)u->cap);
    u->cur = 1;
  }
  ptrdiff_t w = 0;
  for (ptrdiff_t i = 0; i < arrlen(v); i++) {
    hlo_instr *y = v[i];
    if (y->id >= u->cap || u->dead[y->id] || u->stamp[y->id] == u->cur || y->parent != u->c ||
        !uix_reads(y, x))
      continue;
    u->stamp[y->id] = u->cur;
    v[w++] = y;
  }
  if (v) arrsetlen(v, w);
  u->users[x->id] = v;
  *out = v;
  return (int)w;
}

int hlo_uidx_count(hlo_uidx *u, const hlo_instr *x) {
  hlo_instr **v;
  return hlo_uidx_users(u, x, &v);
}

bool hlo_uidx_replace_all_uses(hlo_uidx *u, hlo_instr *old, hlo_instr *neu) {
  if (old == neu) return false;
  hlo_instr **v;
  int n = hlo_uidx_users(u, old, &v);
  bool any = false;
  for (int i = 0; i < n; i++) {
    if (v[i] == neu) continue;
    if (hlo_replace_operand(v[i], old, neu)) {
      hlo_uidx_add(u, neu, v[i]);
      any = true;
    }
  }
  if (u->c->root == old) {
    hlo_comp_set_root(u->c, neu);
    any = true;
  }
  return any;
}

void hlo_uidx_compact(hlo_uidx *u) {
  hlo_comp *c = u->c;
  ptrdiff_t w = 0;
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++) {
    hlo_instr *x = c->instrs[i];
    if (hlo_uidx_dead(u, x)) continue;
    c->instrs[w] = x;
    hlo_uidx_set_pos(u, x, (int)w);
    w++;
  }
  arrsetlen(c->instrs, w);
}

/* ---- forwarding: replacements applied in one walk -------------------------------------------
   A pass that walks a computation in text order and replaces instruction x by y records
   x -> y; every later instruction, when the walk reaches it, reads through the record
   (hlo_fwd_apply), and the root at the end (hlo_fwd_root). Since operands come before
   users, each operand has its final replacement by then: the whole pass is linear, where
   hlo_replace_all_uses per replacement is O(instructions) each. */
bool hlo_fwd_set(hlo_fwd *f, const hlo_instr *old, hlo_instr *neu) {
  if (old->id >= f->cap) {
    int cap = f->cap ? f->cap : 64;
    while (cap <= old->id) cap *= 2;
    hlo_instr **rep = realloc(f->rep, sizeof *rep * (size_t)cap);
    if (!rep) return false;
    memset(rep + f->cap, 0, sizeof *rep * (size_t)(cap - f->cap));
    f->rep = rep;
    f->cap = cap;
  }
  f->rep[old->id] = neu == old ? NULL : neu;
  return true;
}

hlo_instr *hlo_fwd_get(const hlo_fwd *f, hlo_instr *x) {
  for (int guard = 0; guard < 64 && x->id < f->cap && f->rep[x->id]; guard++) x = f->rep[x->id];
  return x;
}

bool hlo_fwd_apply(hlo_fwd *f, hlo_instr *ins) {
  bool any = false;
  for (int k = 0; k < ins->noperands; k++) {
    hlo_instr *r = hlo_fwd_get(f, ins->operands[k]);
    if (r != ins->operands[k] && r != ins) {
      ins->operands[k] = r;
      any = true;
    }
  }
  f->changed |= any;
  return any;
}

bool hlo_fwd_root(hlo_fwd *f, hlo_comp *c) {
  if (!c->root) return false;
  hlo_instr *r = hlo_fwd_get(f, c->root);
  if (r == c->root) return false;
  hlo_comp_set_root(c, r);
  f->changed = true;
  return true;
}

void hlo_fwd_free(hlo_fwd *f) {
  free(f->rep);
  memset(f, 0, sizeof *f);
}
