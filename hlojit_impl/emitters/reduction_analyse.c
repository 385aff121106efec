/* reduction_analyse.c — the reduction emitter's analysis (red_analyse): the heroes, their
   order, the output leaves and their kinds, the values overridden per row, the proof that
   every read of a hero is at its own row, the strategy and lane counts, and the stashes.
   The design is in reduction.c's top comment; the plan's types in reduction_internal.h. */
#include "reduction_internal.h"
#include <stdlib.h>

/* ---- analysis ------------------------------------------------------------------------- */

static hj_status red_unsup(emit_module *em, const hlo_instr *fusion, const char *why) {
  return hj__err(em->ctx, HJ_ERR_UNSUPPORTED, "reduction emitter, fusion '%s': %s",
                 fusion->name, why);
}

static int red_hero_of(const red_plan *p, const hlo_instr *ins) {
  for (int i = 0; i < p->nh; i++)
    if (p->h[i].ins == ins) return i;
  return -1;
}

/* The hero |ins| stands for: a hero, or a get-tuple-element of a (variadic) hero; else -1. */
static int red_hero_read(const red_plan *p, const hlo_instr *ins) {
  int hi = red_hero_of(p, ins);
  if (hi < 0 && ins->op == HLO_OP_GET_TUPLE_ELEMENT && ins->noperands == 1)
    hi = red_hero_of(p, ins->operands[0]);
  return hi;
}

static bool red_same_dims(const hlo_shape *a, const hlo_shape *b) {
  if (a->rank != b->rank) return false;
  for (int d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d]) return false;
  return true;
}

static bool red_reaches_reduce(const hlo_instr *ins, red_vis **vis) {
  if (hmgeti(*vis, ins) >= 0) return false;
  hmput(*vis, ins, 1);
  if (ins->op == HLO_OP_REDUCE) return true;
  for (int i = 0; i < ins->noperands; i++)
    if (red_reaches_reduce(ins->operands[i], vis)) return true;
  return false;
}

/* The heroes |ins| reads (bit per hero; a hero or a get-tuple-element of one: itself). */
static unsigned red_mask(red_plan *p, const hlo_instr *ins) {
  ptrdiff_t i = hmgeti(p->mask, ins);
  if (i >= 0) return (unsigned)p->mask[i].value;
  int hi = red_hero_read(p, ins);
  unsigned m = hi >= 0 ? 1u << hi : 0;
  for (int k = 0; hi < 0 && k < ins->noperands; k++) m |= red_mask(p, ins->operands[k]);
  hmput(p->mask, ins, (int)m);
  return m;
}

/* Lane count for hero |h| in the per-kept-index strategy (1: sequential). */
static int red_lanes(const emit_module *em, red_hero *h, bool row) {
  bool sw = false;
  if (!row || h->n != 1) return 1;
  hlo_opcode op = hlo_binary_reducer(h->ins->calls[0], h->types[0], &sw);
  h->op = op, h->swapped = sw;
  if (op == HLO_OP_COUNT) return 1;
  hlo_type t = h->types[0];
  bool minmax = op == HLO_OP_MAXIMUM || op == HLO_OP_MINIMUM;
  bool ok = t == HLO_PRED || hlo_type_is_int(t) ||
            ((t == HLO_F32 || t == HLO_F64) && op != HLO_OP_AND && op != HLO_OP_OR) ||
            ((t == HLO_F16 || t == HLO_BF16) && minmax);
  int w = (em->target.vector_bytes > 0 ? em->target.vector_bytes : 16) / hlo_type_size(t);
  if (w > RED_MAX_LANES) w = RED_MAX_LANES;
  if (w < 2) w = 2;
  return ok && h->K >= w ? w : 1;
}

static hj_status red_add_hero(emit_module *em, const hlo_instr *fusion, red_plan *p,
                              const hlo_instr *r) {
  if (p->nh == RED_MAX_HEROES) return red_unsup(em, fusion, "too many reduces");
  red_hero *h = &p->h[p->nh++];
  memset(h, 0, sizeof *h);
  h->ins = r;
  h->n = r->noperands / 2;
  if (h->n < 1 || h->n > RED_MAX_N || r->ncalls < 1 || !r->calls[0])
    return red_unsup(em, fusion, "reduce with an unsupported operand count");
  const hlo_shape *res = r->shape.type == HLO_TUPLE ? &r->shape.tuple[0] : &r->shape;
  for (int j = 0; j < h->n; j++) {
    const hlo_shape *rj = r->shape.type == HLO_TUPLE ? &r->shape.tuple[j] : &r->shape;
    h->types[j] = rj->type;
    if (!red_same_dims(rj, res)) return red_unsup(em, fusion, "variadic results differ in dims");
  }
  const hlo_shape *in = &r->operands[0]->shape;
  for (int i = 0; i < r->dims.n; i++) h->reduced[r->dims.v[i]] = true;
  h->K = 1;
  for (int d = 0; d < in->rank; d++)
    if (h->reduced[d]) h->K *= in->dims[d];
  if (p->nh == 1) {
    p->kept = *res;
    return HJ_OK;
  }
  if (red_same_dims(res, &p->kept)) return HJ_OK;
  red_vis *vis = NULL;
  bool nested = false;
  for (int i = 0; i < r->noperands && !nested; i++) nested = red_reaches_reduce(r->operands[i], &vis);
  hmfree(vis);
  return red_unsup(em, fusion, nested ? "a reduce feeds another reduce of another kept shape"
                                      : "reduces of different kept shapes");
}

static hj_status red_add_leaf(emit_module *em, const hlo_instr *fusion, red_plan *p,
                              const hlo_instr *ins) {
  if (ins->op == HLO_OP_TUPLE) {
    for (int i = 0; i < ins->noperands; i++) {
      hj_status st = red_add_leaf(em, fusion, p, ins->operands[i]);
      if (st) return st;
    }
    return HJ_OK;
  }
  int hi = red_hero_of(p, ins);
  if (hi >= 0 && ins->shape.type == HLO_TUPLE) {   /* a variadic hero: each of its results */
    for (int k = 0; k < p->h[hi].n; k++) {
      if (p->nleaves == 64) return red_unsup(em, fusion, "too many outputs");
      p->leaf[p->nleaves++] = (red_leaf){ .kind = RED_LEAF_DIRECT, .hero = hi, .k = k,
                                          .type = ins->shape.tuple[k].type, .shape = ins->shape.tuple[k] };
    }
    return HJ_OK;
  }
  if (ins->shape.type == HLO_TUPLE || p->nleaves == 64) return red_unsup(em, fusion, "unsupported output structure");
  red_leaf *l = &p->leaf[p->nleaves++];
  *l = (red_leaf){ .ins = ins, .type = ins->shape.type, .shape = ins->shape, .hero = -1 };
  if ((hi = red_hero_read(p, ins)) >= 0) {
    l->kind = RED_LEAF_DIRECT, l->hero = hi;
    l->k = ins->op == HLO_OP_GET_TUPLE_ELEMENT ? (int)ins->index : 0;
    return HJ_OK;
  }
  if (red_same_dims(&ins->shape, &p->kept)) { l->kind = RED_LEAF_KEPT; return HJ_OK; }
  for (int h = 0; h < p->nh; h++)
    if (red_same_dims(&ins->shape, &p->h[h].ins->operands[0]->shape)) {
      l->kind = red_mask(p, ins) ? RED_LEAF_FULL : RED_LEAF_INPUT, l->hero = h;
      p->full |= l->kind == RED_LEAF_FULL;
      return HJ_OK;
    }
  return red_unsup(em, fusion, "a side output has neither the kept nor an input shape");
}

/* Column strategy: every hero's reduced dims are a non-empty prefix and kept dims exist. */
static bool red_is_column(const red_hero *h) {
  const hlo_shape *in = &h->ins->operands[0]->shape;
  int nred = h->ins->dims.n;
  if (nred == 0 || nred == in->rank) return false;
  for (int d = 0; d < in->rank; d++)
    if (h->reduced[d] != (d < nred)) return false;
  return true;
}

bool red_is_row(const red_hero *h) {
  const hlo_shape *in = &h->ins->operands[0]->shape;
  int nkept = in->rank - h->ins->dims.n;
  for (int d = 0; d < in->rank; d++)
    if (h->reduced[d] != (d >= nkept)) return false;
  return true;
}

/* Each hero's dependencies, and an order in which every hero comes after those. */
static hj_status red_order(emit_module *em, const hlo_instr *fusion, red_plan *p) {
  for (int h = 0; h < p->nh; h++)
    for (int k = 0; k < p->h[h].ins->noperands; k++) p->h[h].deps |= red_mask(p, p->h[h].ins->operands[k]);
  unsigned done = 0;
  for (int n = 0; n < p->nh; n++) {
    int pick = -1;
    for (int h = 0; h < p->nh && pick < 0; h++)
      if (!(done >> h & 1) && !(p->h[h].deps & ~done)) pick = h;
    if (pick < 0) return red_unsup(em, fusion, "reduces read each other in a cycle");
    p->order[n] = pick;
    done |= 1u << pick;
  }
  return HJ_OK;
}

/* The instructions overridden with a row's values: each reduce with one result, each
   get-tuple-element of a variadic one. */
static hj_status red_overrides(emit_module *em, const hlo_instr *fusion, red_plan *p) {
  const hlo_comp *c = fusion->calls[0];
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++) {
    const hlo_instr *x = c->instrs[i];
    int hi = red_hero_read(p, x);
    if (hi < 0 || (x->op == HLO_OP_REDUCE && p->h[hi].n != 1)) continue;
    if (p->nov == RED_MAX_OV) return red_unsup(em, fusion, "too many reduce values");
    p->ov[p->nov] = x, p->ov_hero[p->nov] = hi;
    p->ov_k[p->nov++] = x->op == HLO_OP_GET_TUPLE_ELEMENT ? (int)x->index : 0;
  }
  return HJ_OK;
}

/* ---- where the heroes are read (the override's validity) --------------------------------
   A symbolic index gives each dim one symbol: j for the row's kept dim j, RED_SYM_RED for
   a reduced dim, RED_SYM_ZERO for a size-1 dim. It is pushed from each leaf and each hero
   input towards the operands; at a hero it must be (0, 1, ..., rank-1): the row itself. */

static int red_nontrivial(const hlo_shape *s, int *pos) {
  int n = 0;
  for (int d = 0; d < s->rank; d++)
    if (s->dims[d] != 1) pos[n++] = d;
  return n;
}

static bool red_sym_seen(red_sym **seen, const hlo_instr *ins, const int *v) {
  int rank = ins->shape.rank;
  for (ptrdiff_t i = 0; i < arrlen(*seen); i++)
    if ((*seen)[i].ins == ins && !memcmp((*seen)[i].v, v, sizeof(int) * (size_t)rank)) return true;
  red_sym s = { .ins = ins, .rank = rank };
  memcpy(s.v, v, sizeof(int) * (size_t)rank);
  arrput(*seen, s);
  return false;
}

/* The operand index of the single-operand index op |ins| at |v| into |o|; false when
   |ins| is not one that this analysis follows. */
static bool red_sym_operand(const hlo_instr *ins, const int *v, int *o) {
  const hlo_shape *os = &ins->operands[0]->shape, *s = &ins->shape;
  switch (ins->op) {
  case HLO_OP_BROADCAST:
    if (ins->dims.n != os->rank) return false;
    for (int i = 0; i < os->rank; i++) o[i] = os->dims[i] == 1 ? RED_SYM_ZERO : v[ins->dims.v[i]];
    return true;
  case HLO_OP_TRANSPOSE:
    if (ins->dims.n != os->rank) return false;
    for (int i = 0; i < os->rank; i++) o[ins->dims.v[i]] = v[i];
    return true;
  case HLO_OP_BITCAST:
    if (!hlo_shape_layout_is_default(s) || !hlo_shape_layout_is_default(os)) return false;
    /* fall through */
  case HLO_OP_RESHAPE: {   /* only adds or drops size-1 dims */
    int a[HLO_MAX_RANK], r[HLO_MAX_RANK], na = red_nontrivial(os, a), nr = red_nontrivial(s, r);
    if (na != nr) return false;
    for (int d = 0; d < os->rank; d++) o[d] = RED_SYM_ZERO;
    for (int i = 0; i < na; i++) {
      if (os->dims[a[i]] != s->dims[r[i]]) return false;
      o[a[i]] = v[r[i]];
    }
    return true;
  }
  default:
    return false;
  }
}

static bool red_sym_ok(red_plan *p, const hlo_instr *ins, const int *v, red_sym **seen) {
  if (!red_mask(p, ins) || red_sym_seen(seen, ins, v)) return true;
  if (red_hero_read(p, ins) >= 0) {
    if (ins->shape.rank != p->kept.rank) return false;
    for (int j = 0; j < p->kept.rank; j++)
      if (p->kept.dims[j] != 1 && v[j] != j) return false;
    return true;
  }
  int o[HLO_MAX_RANK];
  if (hlo_op_is_elementwise(ins)) {
    for (int k = 0; k < ins->noperands; k++) {
      const hlo_shape *os = &ins->operands[k]->shape;
      bool one = hlo_shape_is_array(os) && hlo_shape_numel(os) == 1;   /* read at index 0 */
      if (!one && !red_same_dims(os, &ins->shape)) return false;
      for (int d = 0; d < os->rank; d++) o[d] = one ? RED_SYM_ZERO : v[d];
      if (!red_sym_ok(p, ins->operands[k], o, seen)) return false;
    }
    return true;
  }
  return ins->noperands == 1 && red_sym_operand(ins, v, o) && red_sym_ok(p, ins->operands[0], o, seen);
}

/* The symbols of hero |h|'s input index. */
static void red_sym_input(const red_hero *h, int *v) {
  const hlo_shape *in = &h->ins->operands[0]->shape;
  for (int d = 0, j = 0; d < in->rank; d++) {
    int s = h->reduced[d] ? RED_SYM_RED : j++;
    v[d] = in->dims[d] == 1 ? RED_SYM_ZERO : s;
  }
}

static hj_status red_check_reads(emit_module *em, const hlo_instr *fusion, red_plan *p) {
  red_sym *seen = NULL;
  int v[HLO_MAX_RANK];
  bool ok = true;
  for (int h = 0; h < p->nh && ok; h++) {
    red_sym_input(&p->h[h], v);
    for (int k = 0; k < p->h[h].ins->noperands && ok; k++)   /* inputs, then rank-0 inits */
      ok = red_sym_ok(p, p->h[h].ins->operands[k], v, &seen);
  }
  for (int i = 0; i < p->nleaves && ok; i++) {
    const red_leaf *l = &p->leaf[i];
    if (l->kind == RED_LEAF_DIRECT) continue;
    if (l->kind == RED_LEAF_KEPT)
      for (int j = 0; j < p->kept.rank; j++) v[j] = p->kept.dims[j] == 1 ? RED_SYM_ZERO : j;
    else red_sym_input(&p->h[l->hero], v);
    ok = red_sym_ok(p, l->ins, v, &seen);
  }
  arrfree(seen);
  return ok ? HJ_OK : red_unsup(em, fusion, "a reduce is read at another index than its own "
                                            "row's (an op that moves indices between them)");
}

/* ---- the stash ---------------------------------------------------------------------------- */

/* Worth storing once per element: a transcendental (the opcode table's MATH cost). */
static bool red_costly(hlo_opcode op) { return hlo_opcode_cost(op) == HLO_COST_MATH; }

/* From |ins| down (not into the heroes, whose row values are overridden): *id gets what is
   reached through elementwise ops of |dims| only (read at the element itself), *far what
   is reached through anything else. */
static void red_walk(const red_plan *p, const hlo_instr *ins, const hlo_shape *dims, bool at_elem,
                     red_vis **id, red_vis **far) {
  red_vis **set = at_elem ? id : far;
  if (hmgeti(*set, ins) >= 0) return;
  hmput(*set, ins, 1);
  if (red_hero_read(p, ins) >= 0) return;
  bool elem = at_elem && hlo_op_is_elementwise(ins) && red_same_dims(&ins->shape, dims);
  for (int k = 0; k < ins->noperands; k++)
    red_walk(p, ins->operands[k], dims, elem && red_same_dims(&ins->operands[k]->shape, dims), id, far);
}

/* The stashes of the top comment: per FULL leaf, the last costly value in program order
   that qualifies (softmax: the exp) in the input of a one-result hero over the leaf's
   shape — not necessarily the leaf's own hero: in a chained softmax {max, sum of exp(x -
   max), exp(..) / sum} the leaf belongs to the max (the first hero over its shape) and the
   exp is stored while the sum visits the element. Every hero over the leaf's shape visits
   every element of it, and a value a hero's input reads depends only on heroes before it,
   so the value stored is the one the leaf computes. */
static void red_find_stashes(const hlo_instr *fusion, red_plan *p) {
  const hlo_comp *c = fusion->calls[0];
  for (int i = 0; i < p->nleaves && p->nstash < RED_MAX_STASH; i++) {
    const red_leaf *l = &p->leaf[i];
    if (l->kind != RED_LEAF_FULL || (l->type != HLO_F32 && l->type != HLO_F64)) continue;
    red_vis *lid = NULL, *lfar = NULL;
    red_walk(p, l->ins, &l->shape, true, &lid, &lfar);
    const hlo_instr *pick = NULL;
    int hero = -1;
    for (int h = 0; h < p->nh && !pick; h++) {
      const hlo_instr *in = p->h[h].ins->operands[0];
      if (p->h[h].n != 1 || !red_same_dims(&in->shape, &l->shape)) continue;
      red_vis *hid = NULL, *hfar = NULL;
      red_walk(p, in, &l->shape, true, &hid, &hfar);
      for (ptrdiff_t k = 0; k < arrlen(c->instrs); k++) {
        const hlo_instr *x = c->instrs[k];
        if (red_costly(x->op) && x->shape.type == l->type && red_same_dims(&x->shape, &l->shape) &&
            hmgeti(lid, x) >= 0 && hmgeti(lfar, x) < 0 && hmgeti(hid, x) >= 0)
          pick = x, hero = h;
      }
      hmfree(hid), hmfree(hfar);
    }
    for (int s = 0; s < p->nstash && pick; s++)
      if (p->stash[s].ins == pick) pick = NULL;   /* another leaf's stash serves this one */
    if (pick) p->stash[p->nstash++] = (struct red_stash){ pick, i, hero };
    hmfree(lid), hmfree(lfar);
  }
}

hj_status red_analyse(emit_module *em, const hlo_instr *fusion, red_plan *p) {
  memset(p, 0, sizeof *p);
  const hlo_comp *c = fusion->calls[0];
  hj_status st = HJ_OK;
  for (int i = 0; i < arrlen(c->instrs) && !st; i++)
    if (c->instrs[i]->op == HLO_OP_REDUCE) st = red_add_hero(em, fusion, p, c->instrs[i]);
  if (!st && p->nh == 0) st = red_unsup(em, fusion, "no reduce in the fused computation");
  if (!st) st = red_add_leaf(em, fusion, p, c->root);
  if (!st) st = red_order(em, fusion, p);
  if (!st) st = red_overrides(em, fusion, p);
  if (!st) st = red_check_reads(em, fusion, p);
  hmfree(p->mask);
  if (st) return st;
  p->column = !p->full;
  for (int h = 0; h < p->nh; h++) p->column = p->column && !p->h[h].deps && red_is_column(&p->h[h]);
  for (int h = 0; h < p->nh; h++) p->h[h].lanes = red_lanes(em, &p->h[h], !p->column && red_is_row(&p->h[h]));
  if (p->full) red_find_stashes(fusion, p);
  if (p->column) {
    p->Cm = p->kept.dims[p->kept.rank - 1];
    p->Co = hlo_shape_numel(&p->kept) / (p->Cm ? p->Cm : 1);
    p->cb = RED_CB;
    while (p->cb > 64 && p->Co * ((p->Cm + p->cb - 1) / p->cb) < 16) p->cb /= 2;
    p->nb = (p->Cm + p->cb - 1) / p->cb;
  }
  return HJ_OK;
}
