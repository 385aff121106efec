/* runtime/buffer_assign.c — where every value of one computation lives while it runs.

   Values: the array leaves of the instructions (tuple shapes flattened depth first).
   Each leaf belongs to a storage group; a group has one home:
     PARAM   the caller's input buffer (a parameter leaf; never written),
     CONST   the constant's data (never written),
     OUTPUT  the caller's output buffer k (a root leaf the program computes itself),
     ARENA   a 64-byte aligned slot [offset, offset+bytes) of the computation's arena.
   Aliases share their operand's group: tuple (its operands' leaves), get-tuple-element
   (a sub-range), reshape and bitcast with default layouts (buffers are dense row-major in
   logical order, so these are no-ops), opt-barrier. Everything else (fusion, while,
   conditional) defines new groups.

   Steps, over the text order 0..n-1 of the computation (the schedule):
     1. leaves and groups as above; last[g] = the last instruction using any leaf of g
        (root leaves: live to the end, n);
     2. in-place dynamic-update-slice: an output leaf j of a fusion that is a dynamic-
        update-slice of fused parameter p (ir/inplace.c: hlo_fusion_dus_roots) updates
        operand p's storage when that storage is an ARENA group of the leaf's size whose
        last use is this fusion: the leaf's group is merged into operand p's (bit j of
        dus_inplace[i], reported to the emitter; a decode step's fused k and v cache
        updates are two such leaves of one fusion);
     2b. in-place elementwise (ba_assign_ex): a single-output fusion (not a dus in place)
        takes the storage of its first operand k whose group is ARENA, dies there, has the
        output's bytes and element count, appears once among the fusion's operand groups,
        and for which the backend's predicate says the kernel reads it only at the element
        it writes (the loop emitter's linear mode): inplace_operand[i] = k. Merging chains:
        in a = exp(p); b = neg(a); c = sin(b) all three share one slot;
     3. outputs: root leaf k takes output buffer k when its group is computed here and not
        yet an output; a root leaf that is a parameter, a constant or a repeat of an
        earlier root leaf gets a copy at the end instead (ba_plan.copies);
     4. arena: at instruction i, first the groups defined at i (and i's scratch) get
        the first gap that fits (first fit over the live slots sorted by offset), then the
        groups whose last use is i are released. Allocating before releasing means that
        an instruction's outputs never share memory with its inputs.
   Donation (the entry's input_output_alias, step 3): for a pair (output leaf k, input leaf
   i) the run passes one buffer as both (backend.h), so the output's group must live there
   without clobbering a value of parameter i that is still to be read. With P the
   parameter's group and G the output's (def: its first write):
     - G == P (the output is the parameter): nothing to do;
     - P.last < G.def: every read of the parameter is over when G is first written: G
       simply lives in output k (= input i);
     - P.last == G.def and that instruction can update P in place (the dus fusion of step
       2 over P, or the in-place elementwise kernel of step 2b over P): it does, and P and G
       are one group in output k;
     - otherwise G stays in the arena and is copied into output k at the end. A root leaf
       that is another parameter (or a constant, or a repeat) is copied at the end too; a
       parameter copied into a donated output is first staged into the arena (ba_plan.
       stages), since another end copy may still read the donated buffer.
   End copies run parameters first (their buffers may be donated outputs written by later
   copies), then arena and constant sources, then repeats of other outputs (which read
   final values).
   Worked example: cache' = dus(cache, row, pos) with (cache' -> cache) donated, cache read
   by nothing else: P.last == G.def == the dus: the dus kernel writes the row into the
   caller's cache; no copy, no arena slot.
   Worked example (f32[1024] = 4 KiB each):  a = f(p); b = g(a); c = h(b); ROOT d = k(c)
     a -> [0,4K)  (i=0); b -> [4K,8K) then a released (i=1); c -> [0,4K) then b released;
     d -> output 0.  Peak arena: 8 KiB (12 KiB without reuse). */
#include "runtime.h"
#include <stdlib.h>

#define BA_ALIGN 64

typedef struct ba_group {
  ba_where where;
  int64_t index;          /* PARAM/OUTPUT/CONST index, ARENA offset */
  int64_t bytes;
  int def, last;          /* instruction positions */
} ba_group;

typedef struct ba_state {
  hj_ctx_t *ctx;
  const hlo_comp *c;
  int n;
  int **leafgrp;          /* per instruction: stb_ds array of group ids (-1: token leaf) */
  ba_group *groups;       /* stb_ds */
  int *uf;                /* union-find parent per group */
  int *pos_of_id;         /* instruction id -> position */
  int nids;
  int *pgroup;            /* stb_ds: flattened parameter leaf -> its group (-1 token) */
  int *copy_grp;          /* stb_ds, parallel to plan.copies: source group (-1: src set) */
  int *stage_grp;         /* stb_ds, parallel to plan.stages: the arena group of dst */
} ba_state;

const char *ba_where_name(ba_where w) {
  static const char *names[] = { "none", "param", "output", "const", "arena" };
  return (unsigned)w <= BA_ARENA ? names[w] : "?";
}

static int ba_find(ba_state *s, int g) {
  while (g >= 0 && s->uf[g] != g) g = s->uf[g] = s->uf[s->uf[g]];
  return g;
}

static int ba_new_group(ba_state *s, ba_where w, int64_t index, int64_t bytes, int def) {
  ba_group g = { .where = w, .index = index, .bytes = bytes, .def = def, .last = def };
  arrput(s->groups, g);
  arrput(s->uf, (int)arrlen(s->groups) - 1);
  return (int)arrlen(s->groups) - 1;
}

static int ba_nleaves(const hlo_shape *sh) {
  if (sh->type != HLO_TUPLE) return 1;
  int n = 0;
  for (int i = 0; i < sh->ntuple; i++) n += ba_nleaves(&sh->tuple[i]);
  return n;
}

static int ba_pos(const ba_state *s, const hlo_instr *ins) {
  return ins->id >= 0 && ins->id < s->nids ? s->pos_of_id[ins->id] : -1;
}

/* Step 1 for instruction |i|: its leaves' groups. */
static hj_status ba_leaves_of(ba_state *s, ba_plan *p, int i, const int *param_base) {
  const hlo_instr *ins = s->c->instrs[i];
  int *lg = NULL;
  const hlo_shape **sh = NULL;
  hlo_shape_leaves(&ins->shape, &sh);
  int op0 = ins->noperands > 0 ? ba_pos(s, ins->operands[0]) : -1;
  if (ins->noperands > 0 && op0 < 0) {
    arrfree(sh);
    return hj__err(s->ctx, HJ_ERR_INTERNAL, "buffer assignment: operand of '%s' is not in '%s'",
                   ins->name, s->c->name);
  }
  switch (ins->op) {
  case HLO_OP_PARAMETER:
    for (ptrdiff_t j = 0; j < arrlen(sh); j++) {
      int g = sh[j]->type == HLO_TOKEN ? -1
              : ba_new_group(s, BA_PARAM, param_base[ins->index] + j, hlo_shape_bytes(sh[j]), i);
      arrput(lg, g);
      int64_t at = param_base[ins->index] + j;
      while (arrlen(s->pgroup) <= at) arrput(s->pgroup, -1);
      s->pgroup[at] = g;
    }
    break;
  case HLO_OP_CONSTANT: {
    const hlo_literal **lits = NULL;
    if (ins->literal) hlo_literal_leaves(ins->literal, &lits);
    for (ptrdiff_t j = 0; j < arrlen(sh); j++) {
      if (j >= arrlen(lits) || sh[j]->type == HLO_TOKEN) {
        arrput(lg, -1);
        continue;
      }
      ba_const k = { ins, lits[j] };
      arrput(p->consts, k);
      arrput(lg, ba_new_group(s, BA_CONST, arrlen(p->consts) - 1, lits[j]->nbytes, i));
    }
    arrfree(lits);
    break;
  }
  case HLO_OP_TUPLE:
    for (int k = 0; k < ins->noperands; k++) {
      int *og = s->leafgrp[ba_pos(s, ins->operands[k])];
      for (ptrdiff_t j = 0; j < arrlen(og); j++) arrput(lg, og[j]);
    }
    break;
  case HLO_OP_GET_TUPLE_ELEMENT: {
    const hlo_shape *os = &ins->operands[0]->shape;
    int from = 0;
    for (int k = 0; k < ins->index && k < os->ntuple; k++) from += ba_nleaves(&os->tuple[k]);
    for (ptrdiff_t j = 0; j < arrlen(sh); j++) arrput(lg, s->leafgrp[op0][from + j]);
    break;
  }
  case HLO_OP_RESHAPE: case HLO_OP_BITCAST: case HLO_OP_OPT_BARRIER:
    for (ptrdiff_t j = 0; j < arrlen(sh); j++) arrput(lg, s->leafgrp[op0][j]);
    break;
  default:
    for (ptrdiff_t j = 0; j < arrlen(sh); j++)
      arrput(lg, sh[j]->type == HLO_TOKEN ? -1
                 : ba_new_group(s, BA_ARENA, 0, hlo_shape_bytes(sh[j]), i));
    break;
  }
  arrfree(sh);
  s->leafgrp[i] = lg;
  return HJ_OK;
}

/* How many leaves of fusion |f|'s operands belong to group |g|. */
static int ba_uses_of(ba_state *s, const hlo_instr *f, int g) {
  int n = 0;
  for (int k = 0; k < f->noperands; k++) {
    int *og = s->leafgrp[ba_pos(s, f->operands[k])];
    for (ptrdiff_t j = 0; j < arrlen(og); j++) n += og[j] >= 0 && ba_find(s, og[j]) == g;
  }
  return n;
}

/* Step 2: which output leaves of fusion |i| may update an operand in place (ir/inplace.c
   says which leaves could, over which operand; here: the operand's storage is an arena
   slot that dies at |i|, of the leaf's size, and no other operand of |i| is a view of it:
   fusion(kc, reshape(kc)) would read what the update overwrites)? */
static void ba_dus(ba_state *s, ba_plan *p, int i) {
  const hlo_instr *f = s->c->instrs[i];
  hlo_dus_root dr[64];
  int n = f->op == HLO_OP_FUSION ? hlo_fusion_dus_roots(f, dr, 64) : -1;
  if (n != arrlen(s->leafgrp[i])) return;
  for (int j = 0; j < n; j++) {
    if (dr[j].param < 0 || s->leafgrp[i][j] < 0) continue;
    int *og = s->leafgrp[ba_pos(s, f->operands[dr[j].param])];
    if (arrlen(og) != 1 || og[0] < 0) continue;
    int g0 = ba_find(s, og[0]), go = ba_find(s, s->leafgrp[i][j]);
    ba_group *G0 = &s->groups[g0];
    if (G0->where != BA_ARENA || G0->last != i || G0->bytes != s->groups[go].bytes || g0 == go ||
        ba_uses_of(s, f, g0) != 1)
      continue;
    s->uf[go] = g0;
    if (s->groups[go].last > G0->last) G0->last = s->groups[go].last;
    p->dus_inplace[i] |= 1ull << j;
  }
}

/* Step 2b: may fusion |i| write its output over one of its operands? */
static void ba_inplace(ba_state *s, ba_plan *p, int i, ba_inplace_fn ok, void *ud) {
  const hlo_instr *f = s->c->instrs[i];
  if (!ok || p->dus_inplace[i] || f->op != HLO_OP_FUSION || f->ncalls != 1 ||
      !hlo_shape_is_array(&f->shape) || arrlen(s->leafgrp[i]) != 1 || s->leafgrp[i][0] < 0)
    return;
  int go = ba_find(s, s->leafgrp[i][0]);
  for (int k = 0; k < f->noperands; k++) {
    const hlo_instr *opnd = f->operands[k];
    int *og = s->leafgrp[ba_pos(s, opnd)];
    if (!hlo_shape_is_array(&opnd->shape) || arrlen(og) != 1 || og[0] < 0) continue;
    int g0 = ba_find(s, og[0]);
    ba_group *G0 = &s->groups[g0];
    if (G0->where != BA_ARENA || G0->last != i || g0 == go || G0->bytes == 0 ||
        G0->bytes != s->groups[go].bytes ||
        hlo_shape_numel(&opnd->shape) != hlo_shape_numel(&f->shape) ||
        ba_uses_of(s, f, g0) != 1 || !ok(f, k, ud))
      continue;
    s->uf[go] = g0;
    if (s->groups[go].last > G0->last) G0->last = s->groups[go].last;
    p->inplace_operand[i] = k;
    return;
  }
}

typedef struct { int64_t off, size; int owner; } ba_block;

static int64_t ba_first_fit(ba_block **live, int64_t size, int owner, int64_t *peak) {
  int64_t at = 0;
  ptrdiff_t k = 0;
  for (; k < arrlen(*live); k++) {
    if ((*live)[k].off - at >= size) break;
    int64_t end = (*live)[k].off + (*live)[k].size;
    if (end > at) at = end;
  }
  ba_block b = { at, size, owner };
  arrins(*live, k, b);
  if (at + size > *peak) *peak = at + size;
  return at;
}

static void ba_release(ba_block **live, int owner) {
  for (ptrdiff_t k = 0; k < arrlen(*live); k++)
    if ((*live)[k].owner == owner) {
      arrdel(*live, k);
      return;
    }
}

/* Step 4. Scratch of instruction i is owner -(i+1). The arena groups are bucketed by
   the position that defines them and by their last use first (in group order, the order
   a scan of all groups per position met them), so the walk is linear in the groups plus
   the first-fit searches; scanning every group at every position was quadratic. */
static void ba_arena(ba_state *s, ba_plan *p, const int64_t *scratch_bytes) {
  ba_block *live = NULL;
  int64_t peak = 0;
  int **defs = calloc((size_t)s->n + 1, sizeof *defs), **lasts = calloc((size_t)s->n + 1, sizeof *lasts);
  bool bucketed = defs && lasts;
  for (ptrdiff_t g = 0; bucketed && g < arrlen(s->groups); g++) {
    ba_group *G = &s->groups[g];
    if (ba_find(s, (int)g) != g || G->where != BA_ARENA) continue;
    if (G->def >= 0 && G->def < s->n) arrput(defs[G->def], (int)g);
    if (G->bytes > 0 && G->last >= 0 && G->last < s->n) arrput(lasts[G->last], (int)g);
  }
  for (int i = 0; i < s->n; i++) {
    ptrdiff_t nd = bucketed ? arrlen(defs[i]) : arrlen(s->groups);
    for (ptrdiff_t k = 0; k < nd; k++) {
      int g = bucketed ? defs[i][k] : (int)k;
      ba_group *G = &s->groups[g];
      if (!bucketed && (ba_find(s, g) != g || G->where != BA_ARENA || G->def != i)) continue;
      int64_t sz = (G->bytes + BA_ALIGN - 1) / BA_ALIGN * BA_ALIGN;
      p->values_bytes += sz;
      G->index = sz ? ba_first_fit(&live, sz, g, &peak) : 0;
    }
    if (scratch_bytes && scratch_bytes[i] > 0) {
      int64_t sz = (scratch_bytes[i] + BA_ALIGN - 1) / BA_ALIGN * BA_ALIGN;
      p->scratch[i] = ba_first_fit(&live, sz, -(i + 1), &peak);
      p->values_bytes += sz;
      ba_release(&live, -(i + 1));
    }
    ptrdiff_t nl = bucketed ? arrlen(lasts[i]) : arrlen(s->groups);
    for (ptrdiff_t k = 0; k < nl; k++) {
      int g = bucketed ? lasts[i][k] : (int)k;
      ba_group *G = &s->groups[g];
      if (bucketed || (ba_find(s, g) == g && G->where == BA_ARENA && G->last == i && G->bytes > 0))
        ba_release(&live, g);
    }
  }
  for (int i = 0; bucketed && i < s->n; i++) {
    arrfree(defs[i]);
    arrfree(lasts[i]);
  }
  free(defs);
  free(lasts);
  arrfree(live);
  p->arena_bytes = peak;
}

/* ---- step 3: outputs, donation, end copies -------------------------------------------- */

static void ba_note(ba_plan *p, int out, int in, const char *how) {
  ba_alias_note n = { out, in, how };
  arrput(p->aliases, n);
}

/* May instruction |i| (the last reader of parameter group |P|, and the first writer of
   group |g|) compute |g| over |P| in place? Marks it (dus_inplace / inplace_operand). */
static bool ba_alias_inplace(ba_state *s, ba_plan *p, int i, int P, int g, ba_inplace_fn ok,
                             void *ud, const char **how) {
  const hlo_instr *f = s->c->instrs[i];
  if (f->op != HLO_OP_FUSION || f->ncalls != 1 || p->inplace_operand[i] >= 0 ||
      ba_uses_of(s, f, P) != 1 || s->groups[P].bytes != s->groups[g].bytes)
    return false;
  hlo_dus_root dr[64];
  int n = hlo_fusion_dus_roots(f, dr, 64);
  for (int j = 0; n == arrlen(s->leafgrp[i]) && j < n; j++) {   /* a dus leaf over P */
    if (dr[j].param < 0 || s->leafgrp[i][j] < 0 || ba_find(s, s->leafgrp[i][j]) != g) continue;
    int *og = s->leafgrp[ba_pos(s, f->operands[dr[j].param])];
    if (arrlen(og) == 1 && og[0] >= 0 && ba_find(s, og[0]) == P) {
      p->dus_inplace[i] |= 1ull << j;
      *how = "in place (dynamic-update-slice)";
      return true;
    }
  }
  if (p->dus_inplace[i] || arrlen(s->leafgrp[i]) != 1 || ba_find(s, s->leafgrp[i][0]) != g) return false;
  for (int k = 0; ok && k < f->noperands; k++) {
    const hlo_instr *opnd = f->operands[k];
    int *og = s->leafgrp[ba_pos(s, opnd)];
    if (!hlo_shape_is_array(&opnd->shape) || arrlen(og) != 1 || og[0] < 0 || ba_find(s, og[0]) != P ||
        hlo_shape_numel(&opnd->shape) != hlo_shape_numel(&f->shape) || !ok(f, k, ud))
      continue;
    p->inplace_operand[i] = k;
    *how = "in place (elementwise)";
    return true;
  }
  return false;
}

/* Output leaf |k| (group |g|) aliases input leaf |a|: true when it needs no end copy. */
static bool ba_alias(ba_state *s, ba_plan *p, int k, int a, int g, ba_inplace_fn ok, void *ud) {
  int P = a < arrlen(s->pgroup) ? ba_find(s, s->pgroup[a]) : -1;
  if (P < 0) return false;
  if (g == P) {
    ba_note(p, k, a, "the output is the parameter");
    return true;
  }
  ba_group *G = &s->groups[g], *PG = &s->groups[P];
  if (G->where != BA_ARENA) return false;
  const char *how = NULL;
  if (PG->last < G->def) {
    how = "written after the parameter's last read";
  } else if (PG->last == G->def && ba_alias_inplace(s, p, G->def, P, g, ok, ud, &how)) {
    s->uf[P] = g;
    if (PG->def < G->def) G->def = PG->def;
    if (PG->last > G->last) G->last = PG->last;
  } else {
    ba_note(p, k, a, "copied at the end: the parameter is read after the output is first written");
    return false;
  }
  G->where = BA_OUTPUT;
  G->index = k;
  ba_note(p, k, a, how);
  return true;
}

/* An end copy of group |g| into output |k|, which aliases input |a| (-1: none). A
   parameter copied into a donated output is staged: copied into an arena slot before the
   first thunk and from there at the end. */
static void ba_end_copy(ba_state *s, ba_plan *p, int k, int g, int a) {
  ba_group *G = &s->groups[g];
  bool stage = a >= 0 && G->where == BA_PARAM;
  if (a >= 0 && G->where == BA_CONST) ba_note(p, k, a, "a constant: copied at the end");
  if (a >= 0 && G->where == BA_OUTPUT) ba_note(p, k, a, "a repeat of another output: copied at the end");
  if (stage) {
    int sg = ba_new_group(s, BA_ARENA, 0, G->bytes, 0);
    s->groups[sg].last = s->n;
    G = &s->groups[g];
    ba_stage st = { { G->where, G->index, G->bytes }, { BA_ARENA, 0, G->bytes } };
    arrput(p->stages, st);
    arrput(s->stage_grp, sg);
    g = sg;
    ba_note(p, k, a, "another parameter: staged, copied at the end");
  }
  ba_copy cp = { k, { s->groups[g].where, s->groups[g].index, s->groups[g].bytes } };
  arrput(p->copies, cp);
  arrput(s->copy_grp, s->groups[g].where == BA_ARENA ? g : -1);
}

static int ba_copy_class(const ba_copy *c) {
  return c->src.where == BA_PARAM ? 0 : c->src.where == BA_OUTPUT ? 2 : 1;
}

/* After the arena: arena sources get their offsets; copies ordered by class (stable). */
static void ba_resolve_copies(ba_state *s, ba_plan *p) {
  for (ptrdiff_t k = 0; k < arrlen(p->copies); k++)
    if (s->copy_grp[k] >= 0) p->copies[k].src.index = s->groups[s->copy_grp[k]].index;
  for (ptrdiff_t k = 0; k < arrlen(p->stages); k++) p->stages[k].dst.index = s->groups[s->stage_grp[k]].index;
  for (ptrdiff_t i = 1; i < arrlen(p->copies); i++)           /* insertion sort: few copies */
    for (ptrdiff_t j = i; j > 0 && ba_copy_class(&p->copies[j - 1]) > ba_copy_class(&p->copies[j]); j--) {
      ba_copy t = p->copies[j];
      p->copies[j] = p->copies[j - 1];
      p->copies[j - 1] = t;
    }
}

/* Steps 1-3 need the flattened parameter offsets. */
static hj_status ba_build(ba_state *s, ba_plan *p, const int64_t *scratch_bytes,
                          ba_inplace_fn may_inplace, void *ud) {
  const hlo_comp *c = s->c;
  int np = (int)arrlen(c->params), *base = calloc((size_t)np + 1, sizeof *base);
  if (!base) return hj__err(s->ctx, HJ_ERR_OOM, "buffer assignment: out of memory");
  for (int k = 0; k < np; k++) base[k + 1] = base[k] + (c->params[k] ? ba_nleaves(&c->params[k]->shape) : 0);
  p->nin = base[np];
  hj_status st = HJ_OK;
  for (int i = 0; i < s->n && st == HJ_OK; i++) st = ba_leaves_of(s, p, i, base);
  free(base);
  if (st != HJ_OK) return st;
  for (int i = 0; i < s->n; i++) {                       /* last uses */
    const hlo_instr *ins = c->instrs[i];
    for (int k = 0; k < ins->noperands; k++) {
      int *og = s->leafgrp[ba_pos(s, ins->operands[k])];
      for (ptrdiff_t j = 0; j < arrlen(og); j++)
        if (og[j] >= 0 && s->groups[og[j]].last < i) s->groups[og[j]].last = i;
    }
  }
  int rp = c->root ? ba_pos(s, c->root) : -1;
  int *rl = rp >= 0 ? s->leafgrp[rp] : NULL;
  for (ptrdiff_t j = 0; j < arrlen(rl); j++)
    if (rl[j] >= 0) s->groups[rl[j]].last = s->n;
  for (int i = 0; i < s->n; i++) ba_dus(s, p, i);
  for (int i = 0; i < s->n; i++) ba_inplace(s, p, i, may_inplace, ud);
  p->nout = (int)arrlen(rl);
  for (ptrdiff_t k = 0; k < arrlen(rl); k++) {            /* outputs */
    int g = ba_find(s, rl[k]);
    if (g < 0) continue;
    int a = c->module && c == c->module->entry ? hlo_module_output_alias(c->module, (int)k) : -1;
    if (a >= 0 && ba_alias(s, p, (int)k, a, g, may_inplace, ud)) continue;
    ba_group *G = &s->groups[g];
    if (G->where == BA_ARENA && a < 0) {
      G->where = BA_OUTPUT;
      G->index = k;
    } else {
      ba_end_copy(s, p, (int)k, g, a);
    }
  }
  ba_arena(s, p, scratch_bytes);
  ba_resolve_copies(s, p);
  return HJ_OK;
}

hj_status ba_assign(hj_ctx_t *ctx, const hlo_comp *c, const int64_t *scratch_bytes, ba_plan *out) {
  return ba_assign_ex(ctx, c, scratch_bytes, NULL, NULL, out);
}

hj_status ba_assign_ex(hj_ctx_t *ctx, const hlo_comp *c, const int64_t *scratch_bytes,
                       ba_inplace_fn may_inplace, void *ud, ba_plan *out) {
  memset(out, 0, sizeof *out);
  out->comp = c;
  ba_state s = { .ctx = ctx, .c = c, .n = (int)arrlen(c->instrs) };
  s.nids = c->module->next_id + 1;
  for (int i = 0; i < s.n; i++)
    if (c->instrs[i]->id >= s.nids) s.nids = c->instrs[i]->id + 1;
  s.pos_of_id = malloc(sizeof(int) * (size_t)s.nids);
  s.leafgrp = calloc((size_t)s.n + 1, sizeof *s.leafgrp);
  out->dus_inplace = calloc((size_t)s.n + 1, sizeof *out->dus_inplace);
  out->scratch = malloc(sizeof(int64_t) * ((size_t)s.n + 1));
  out->inplace_operand = malloc(sizeof(int) * ((size_t)s.n + 1));
  hj_status st = HJ_OK;
  if (!s.pos_of_id || !s.leafgrp || !out->dus_inplace || !out->scratch || !out->inplace_operand) {
    st = hj__err(ctx, HJ_ERR_OOM, "buffer assignment: out of memory");
  } else {
    for (int i = 0; i < s.nids; i++) s.pos_of_id[i] = -1;
    for (int i = 0; i < s.n; i++) {
      s.pos_of_id[c->instrs[i]->id] = i;
      out->scratch[i] = -1;
      out->inplace_operand[i] = -1;
    }
    st = ba_build(&s, out, scratch_bytes, may_inplace, ud);
  }
  for (int i = 0; st == HJ_OK && i < s.n; i++) {         /* locations */
    ba_loc *v = NULL;
    const hlo_shape **sh = NULL;
    hlo_shape_leaves(&c->instrs[i]->shape, &sh);
    for (ptrdiff_t j = 0; j < arrlen(s.leafgrp[i]); j++) {
      int g = ba_find(&s, s.leafgrp[i][j]);
      ba_loc l = { BA_NONE, 0, 0 };
      if (g >= 0) l = (ba_loc){ s.groups[g].where, s.groups[g].index, hlo_shape_bytes(sh[j]) };
      arrput(v, l);
    }
    arrfree(sh);
    arrput(out->leaves, v);
  }
  for (int i = 0; s.leafgrp && i < s.n; i++) arrfree(s.leafgrp[i]);
  free(s.leafgrp);
  free(s.pos_of_id);
  arrfree(s.groups);
  arrfree(s.uf);
  arrfree(s.pgroup);
  arrfree(s.copy_grp);
  arrfree(s.stage_grp);
  if (st != HJ_OK) ba_plan_free(out);
  return st;
}

void ba_plan_free(ba_plan *p) {
  if (!p) return;
  for (ptrdiff_t i = 0; i < arrlen(p->leaves); i++) arrfree(p->leaves[i]);
  arrfree(p->leaves);
  free(p->dus_inplace);
  free(p->scratch);
  free(p->inplace_operand);
  arrfree(p->consts);
  arrfree(p->copies);
  arrfree(p->stages);
  arrfree(p->aliases);
  memset(p, 0, sizeof *p);
}

int ba_instr_pos(const ba_plan *p, const hlo_instr *ins) {
  for (ptrdiff_t i = 0; i < arrlen(p->comp->instrs); i++)
    if (p->comp->instrs[i] == ins) return (int)i;
  return -1;
}

static void ba_loc_print(char **sb, const ba_loc *l) {
  switch (l->where) {
  case BA_ARENA: sb_printf(sb, "arena[%lld,+%lld)", (long long)l->index, (long long)l->bytes); break;
  case BA_NONE: sb_puts(sb, "none"); break;
  default: sb_printf(sb, "%s %lld", ba_where_name(l->where), (long long)l->index); break;
  }
}

void ba_plan_print(const ba_plan *p, char **sb) {
  sb_printf(sb, "computation %s: %d input leaves, %d output leaves, arena %lld bytes peak "
            "(%lld without reuse)\n", p->comp->name, p->nin, p->nout, (long long)p->arena_bytes,
            (long long)p->values_bytes);
  for (ptrdiff_t i = 0; i < arrlen(p->leaves); i++) {
    const hlo_instr *ins = p->comp->instrs[i];
    char sh[160];
    sb_printf(sb, "  %3d %-28s %-20s", (int)i, ins->name, hlo_shape_str(&ins->shape, sh, sizeof sh));
    for (ptrdiff_t j = 0; j < arrlen(p->leaves[i]); j++) {
      sb_puts(sb, j ? ", " : " ");
      ba_loc_print(sb, &p->leaves[i][j]);
    }
    if (p->dus_inplace[i] == 1) sb_puts(sb, "  (dynamic-update-slice in place)");
    else if (p->dus_inplace[i]) {
      sb_puts(sb, "  (dynamic-update-slice in place: leaves");
      for (int j = 0; j < 64; j++)
        if (p->dus_inplace[i] >> j & 1) sb_printf(sb, " %d", j);
      sb_puts(sb, ")");
    }
    if (p->inplace_operand && p->inplace_operand[i] >= 0)
      sb_printf(sb, "  (in place over operand %d)", p->inplace_operand[i]);
    if (p->scratch[i] >= 0) sb_printf(sb, "  scratch@%lld", (long long)p->scratch[i]);
    sb_puts(sb, "\n");
  }
  for (ptrdiff_t k = 0; k < arrlen(p->stages); k++) {
    sb_puts(sb, "  stage ");
    ba_loc_print(sb, &p->stages[k].src);
    sb_puts(sb, " into ");
    ba_loc_print(sb, &p->stages[k].dst);
    sb_puts(sb, " first\n");
  }
  for (ptrdiff_t k = 0; k < arrlen(p->copies); k++) {
    sb_printf(sb, "  copy into output %d from ", p->copies[k].out);
    ba_loc_print(sb, &p->copies[k].src);
    sb_puts(sb, "\n");
  }
  for (ptrdiff_t k = 0; k < arrlen(p->aliases); k++)
    sb_printf(sb, "  output %d aliases input %d: %s\n", p->aliases[k].out, p->aliases[k].in,
              p->aliases[k].how);
}
