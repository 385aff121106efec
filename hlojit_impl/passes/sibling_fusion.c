/* passes/sibling_fusion.c — multi-output fusion of siblings: kernels that read the same
   large operand and walk the same iteration space become one kernel with a tuple root, so
   the operand is read once.

   Which computations: the entry and the while/conditional computations reached from it.
   Candidates: fusions (loop, reduce or transpose hero; no dot, no row-normalisation
   reduce whose root has the input's shape; dynamic-update-slices only as output leaves
   that may update a buffer in place, ir/inplace.c) and the plain ops a loop or reduction
   kernel runs (elementwise, broadcast, slice, concatenate, pad, reverse, reduce), wrapped
   on demand. Their signature must match:
     loop:   every output leaf has the same dims (transposes inside are index maps of
             the loop: the q, k, v head transposes of attention merge into one kernel);
             with an in-place update among the leaves (the update's dims standing for
             the leaf's), the same element count: the dus emitter (emitters/dus.c) walks
             each leaf's own indices. A decode step's query slice and its k and v cache
             updates, all from one qkv row, become one kernel. Neither of the two may
             read a buffer the other updates in place;
     reduce: every reduce has the same input dims and dimensions={...}, every output leaf
             the reduce's output dims (epilogues on the reduced shape are fine).
   Two candidates merge only if neither depends on the other (no path between them), the
   shared operand has at least SIB_MIN_BYTES, the merged fusion has at most 60 operands, and
   neither is a loop fusion reading a dot (epilogue_fusion.c gives that one to the dot).

   Merge of A and B: a new fused computation holds clones of both bodies and
   ROOT tuple(A's outputs..., B's outputs...); every use of A becomes
   get-tuple-element(M, i) (a multi-output A's get-tuple-elements are renumbered in place).

   Cost (near-linear): a round walks the shared operands in text order with a use index
   (passes/use_index.c) and merges disjoint pairs (an instruction joins one merge per
   round), then compacts and re-sorts the computation once; rounds repeat until nothing
   merges (a group of k siblings takes about log2(k) rounds). "Neither depends on the
   other" is a walk down the operands of the later one that never goes above the earlier
   one's position, capped at SIB_DFS_BUDGET visits (sib_reaches says why that is exact).
   Before: one merge per scan, each scan asking hlo_users per instruction, so O(n^2) per
   merge: 33 s on a 24-layer GPT-2 at C = 64.

   Worked example (layer norm as E[x^2] - E[x]^2), x: f32[64,768]:
       s1 = f32[64] fusion(x), kind=kInput      // reduce(x), dims={1}
       s2 = f32[64] fusion(x), kind=kInput      // reduce(x*x), dims={1}
   both read x (196 KiB), both reduce f32[64,768] over {1}, neither reaches the other:
       M = (f32[64], f32[64]) fusion(x), kind=kInput   // ROOT tuple(r1, r2)
       s1 = get-tuple-element(M), index=0;  s2 = get-tuple-element(M), index=1 */
#include "passes.h"

#define SIB_MIN_BYTES 256
#define SIB_MAX_OPERANDS 60

typedef struct sib_sig {
  bool reduce;
  bool dus;               /* holds dynamic-update-slices in place: leaves compare by size */
  hlo_shape out;          /* dims of every output leaf */
  hlo_shape in;           /* reduce: input dims */
  int64_t rdims[HLO_MAX_RANK];
  int nrdims;
} sib_sig;

static bool sib_plain_ok(const hlo_instr *x) {
  if (hlo_op_is_elementwise(x)) return true;
  switch (x->op) {
  case HLO_OP_BROADCAST: case HLO_OP_SLICE: case HLO_OP_CONCATENATE: case HLO_OP_PAD:
  case HLO_OP_REVERSE: case HLO_OP_REDUCE:
    return hlo_shape_is_array(&x->shape);
  default:
    return false;
  }
}

/* The output leaves of fusion root / plain instruction |x| (tuple roots flattened one
   level). */
static int sib_leaves(const hlo_instr *x, const hlo_instr **out) {
  if (x->op != HLO_OP_FUSION) { out[0] = x; return 1; }
  const hlo_instr *r = x->calls[0]->root;
  if (r->op != HLO_OP_TUPLE) { out[0] = r; return 1; }
  for (int i = 0; i < r->noperands; i++) out[i] = r->operands[i];
  return r->noperands;
}

/* Fills |s| for candidate |x|; false when |x| is no candidate. */
static bool sib_signature(const hlo_instr *x, sib_sig *s) {
  memset(s, 0, sizeof *s);
  const hlo_instr *red = NULL;
  hlo_dus_root dr[64];
  int ndr = -2;   /* its leaves' in-place facts, computed at the first dus */
  if (x->op == HLO_OP_FUSION) {
    if (x->ncalls != 1 || x->fusion_kind == HLO_FUSION_CUSTOM) return false;
    const hlo_comp *fc = x->calls[0];
    for (ptrdiff_t i = 0; i < arrlen(fc->instrs); i++) {
      const hlo_instr *y = fc->instrs[i];
      if (y->op == HLO_OP_DYNAMIC_UPDATE_SLICE) {   /* only as a leaf updated in place */
        if (ndr == -2) ndr = hlo_fusion_dus_roots(x, dr, 64);
        bool leaf = false;
        for (int j = 0; j < ndr && !leaf; j++) leaf = dr[j].dus == y && dr[j].param >= 0;
        if (!leaf) return false;
        s->dus = true;
      }
      if (y->op == HLO_OP_DOT || y->op == HLO_OP_SORT || y->op == HLO_OP_SCATTER) return false;
      if (y->op == HLO_OP_REDUCE) {
        if (!hlo_shape_is_array(&y->shape)) return false;
        if (red && (!hlo_same_dims(&y->operands[0]->shape, &red->operands[0]->shape) ||
                    y->dims.n != red->dims.n ||
                    memcmp(y->dims.v, red->dims.v, sizeof(int64_t) * (size_t)y->dims.n)))
          return false;
        red = y;
      }
    }
    if (x->noperands > SIB_MAX_OPERANDS) return false;
  } else {
    if (!sib_plain_ok(x)) return false;
    if (x->op == HLO_OP_REDUCE) red = x;
  }
  const hlo_instr *lv[256] = {0};
  if (x->op == HLO_OP_FUSION && x->calls[0]->root->op == HLO_OP_TUPLE &&
      x->calls[0]->root->noperands > 256)
    return false;
  int n = sib_leaves(x, lv);
  if (n == 0) return false;
  if (s->dus) {   /* a leaf updated in place walks its update's indices (dus.c) */
    if (red || n != ndr) return false;
    for (int i = 0; i < n; i++) {
      if (!hlo_shape_is_array(&lv[i]->shape)) return false;
      if (dr[i].param >= 0) lv[i] = dr[i].dus->operands[1];
      if (hlo_shape_numel(&lv[i]->shape) != hlo_shape_numel(&lv[0]->shape)) return false;
    }
    s->out = lv[0]->shape;
    return true;
  }
  for (int i = 0; i < n; i++)
    if (!hlo_shape_is_array(&lv[i]->shape) || !hlo_same_dims(&lv[i]->shape, &lv[0]->shape))
      return false;
  s->out = lv[0]->shape;
  if (red) {
    if (!hlo_same_dims(&red->shape, &s->out)) return false;   /* row-norm: skip */
    s->reduce = true;
    s->in = red->operands[0]->shape;
    s->nrdims = red->dims.n;
    for (int i = 0; i < red->dims.n; i++) s->rdims[i] = red->dims.v[i];
  }
  return true;
}

static bool sib_same(const sib_sig *a, const sib_sig *b) {
  if ((a->dus || b->dus) && !a->reduce && !b->reduce)
    return hlo_shape_numel(&a->out) == hlo_shape_numel(&b->out);
  if (a->reduce != b->reduce || !hlo_same_dims(&a->out, &b->out)) return false;
  if (!a->reduce) return true;
  return hlo_same_dims(&a->in, &b->in) && a->nrdims == b->nrdims &&
         !memcmp(a->rdims, b->rdims, sizeof(int64_t) * (size_t)a->nrdims);
}

/* Is |target| a transitive operand of |from|? Asked on the graph as it is in the middle
   of a round, using positions from the round's start: every edge between instructions
   that existed then still runs from a later to an earlier position (edges this round
   changed lead to instructions made this round), so a walk down the operands never needs
   to go below |target|'s position. Meeting an instruction made this round (its position is
   unknown), or spending SIB_DFS_BUDGET visits, answers "maybe": the pair waits for the next
   round, or for ever when they are that far apart. */
typedef enum { SIB_NO, SIB_YES, SIB_MAYBE } sib_ans;

#define SIB_DFS_BUDGET 20000
/* Partners tried per candidate (after the cheap checks): a value read by every layer (a
   mask, a position table) has one user per layer, each depending on the one before;
   trying every pair would be quadratic in depth for no merge. */
#define SIB_MAX_TRIES 8

typedef struct sib_round {
  hlo_comp *c;
  hlo_uidx ux;
  int id0;                 /* instructions with id >= id0 were made this round */
  uint8_t *busy;           /* per id (< id0): merged, or fused into a merge, this round */
  uint32_t *seen;          /* per id (< id0): DFS marks */
  uint32_t mark;
  hlo_instr **stack;       /* stb_ds */
  int8_t *sig_ok;          /* per id (< id0): -1 not computed, 0 no candidate, 1 candidate */
  sib_sig *sigs;           /* per id (< id0) */
} sib_round;

static sib_ans sib_reaches(sib_round *R, hlo_instr *from, const hlo_instr *target) {
  int tpos = hlo_uidx_pos(&R->ux, target);
  R->mark++;
  arrsetlen(R->stack, 0);
  arrput(R->stack, from);
  int budget = SIB_DFS_BUDGET;
  while (arrlen(R->stack) > 0) {
    hlo_instr *x = arrpop(R->stack);
    if (x == target) return SIB_YES;
    if (x->id >= R->id0 || --budget < 0) return SIB_MAYBE;
    if (R->seen[x->id] == R->mark) continue;
    R->seen[x->id] = R->mark;
    /* an edge changed this round (it leads to a new instruction) may climb back over
       target: look before pruning */
    for (int k = 0; k < x->noperands; k++)
      if (x->operands[k]->id >= R->id0) return SIB_MAYBE;
    if (hlo_uidx_pos(&R->ux, x) <= tpos) continue;   /* at or above target: cannot reach it */
    for (int k = 0; k < x->noperands; k++) arrput(R->stack, x->operands[k]);
  }
  return SIB_NO;
}

/* Neither reaches the other (SIB_NO), one does (SIB_YES), or unknown this round. */
static sib_ans sib_independent(sib_round *R, hlo_instr *a, hlo_instr *b) {
  int pa = hlo_uidx_pos(&R->ux, a), pb = hlo_uidx_pos(&R->ux, b);
  /* only the later one can reach the earlier one */
  return pa > pb ? sib_reaches(R, a, b) : sib_reaches(R, b, a);
}

/* Distinct operands of a and b together (a's are distinct already): b's are looked up
   among a's marked in |R|'s stamps, linear in the operand counts. */
static int sib_union_operands(sib_round *R, const hlo_instr *a, const hlo_instr *b) {
  R->mark++;
  for (int j = 0; j < a->noperands; j++)
    if (a->operands[j]->id < R->id0) R->seen[a->operands[j]->id] = R->mark;
  int n = a->noperands;
  for (int k = 0; k < b->noperands; k++) {
    const hlo_instr *o = b->operands[k];
    bool have = o->id < R->id0 ? R->seen[o->id] == R->mark : false;
    for (int j = 0; o->id >= R->id0 && j < a->noperands && !have; j++) have = a->operands[j] == o;
    n += !have;
  }
  return n;
}

/* Clones fused computation of |x| into |mc| with outer operands mapped to parameters of
   |m| (made as needed); appends its output leaves to |roots|. */
static hj_status sib_clone_into(hlo_instr *mf, hlo_instr *x, hlo_instr ***roots) {
  hlo_comp *mc = mf->calls[0], *xc = x->calls[0];
  hlo_module *m = mc->module;
  struct { hlo_instr *key; hlo_instr *value; } *map = NULL;
  hlo_instr **ops = NULL;
  hj_status st = HJ_OK;
  for (int k = 0; k < x->noperands; k++) {
    int j = -1;
    for (int i = 0; i < mf->noperands; i++)
      if (mf->operands[i] == x->operands[k]) j = i;
    if (j < 0) {
      char name[64];
      snprintf(name, sizeof name, "param_%d.%d", mf->noperands, m->next_id);
      hlo_instr *p = hlo_instr_new(mc, HLO_OP_PARAMETER, name, &x->operands[k]->shape, NULL, 0);
      hlo_instr **nops = hlo_alloc(m, sizeof(hlo_instr *) * (size_t)(mf->noperands + 1));
      if (!p || !nops) { st = HJ_ERR_OOM; goto done; }
      p->index = mf->noperands;
      arrput(mc->params, p);
      if (mf->noperands) memcpy(nops, mf->operands, sizeof(hlo_instr *) * (size_t)mf->noperands);
      nops[mf->noperands] = x->operands[k];
      mf->operands = nops;
      j = mf->noperands++;
    }
    hmput(map, xc->params[k], mc->params[j]);
  }
  for (ptrdiff_t i = 0; i < arrlen(xc->instrs); i++) {
    hlo_instr *s = xc->instrs[i];
    if (s->op == HLO_OP_PARAMETER || (s == xc->root && s->op == HLO_OP_TUPLE)) continue;
    arrsetlen(ops, 0);
    for (int k = 0; k < s->noperands; k++) arrput(ops, hmget(map, s->operands[k]));
    hlo_instr *d = hlo_instr_clone_into(mc, s, NULL, ops, s->calls);
    if (!d) { st = HJ_ERR_OOM; goto done; }
    hmput(map, s, d);
  }
  if (xc->root->op == HLO_OP_TUPLE)
    for (int k = 0; k < xc->root->noperands; k++) arrput(*roots, hmget(map, xc->root->operands[k]));
  else
    arrput(*roots, hmget(map, xc->root));
done:
  hmfree(map);
  arrfree(ops);
  return st;
}

/* Uses of |x| now read leaf |base|.. of |mf| (through the round's use index). */
static hj_status sib_redirect(sib_round *R, hlo_instr *x, hlo_instr *mf, int base) {
  hlo_comp *c = R->c;
  hlo_uidx *ux = &R->ux;
  bool multi = x->calls[0]->root->op == HLO_OP_TUPLE;
  hlo_instr **us = NULL, **v;
  int n = hlo_uidx_users(ux, x, &v);
  for (int i = 0; i < n; i++) arrput(us, v[i]);
  if (multi) {
    bool other = c->root == x;
    for (int i = 0; i < n; i++) {
      hlo_instr *u = us[i];
      if (u->op == HLO_OP_GET_TUPLE_ELEMENT && u->operands[0] == x) {
        u->operands[0] = mf;
        u->index += base;
        if (!hlo_uidx_add(ux, mf, u)) { arrfree(us); return HJ_ERR_OOM; }
      } else {
        other = true;
      }
    }
    arrfree(us);
    if (!other) return HJ_OK;
    /* other users of the whole tuple: rebuild it from the leaves */
    int nl = x->calls[0]->root->noperands;
    hlo_instr **gs = NULL;
    for (int i = 0; i < nl; i++) {
      hlo_instr *g = hlo_instr_new(c, HLO_OP_GET_TUPLE_ELEMENT, NULL, &x->shape.tuple[i], &mf, 1);
      if (!g || !hlo_uidx_add_operands(ux, g)) { arrfree(gs); return HJ_ERR_OOM; }
      g->index = base + i;
      arrput(gs, g);
    }
    hlo_instr *t = hlo_instr_new(c, HLO_OP_TUPLE, NULL, &x->shape, gs, nl);
    arrfree(gs);
    if (!t || !hlo_uidx_add_operands(ux, t)) return HJ_ERR_OOM;
    hlo_uidx_replace_all_uses(ux, x, t);
    return HJ_OK;
  }
  arrfree(us);
  hlo_instr *g = hlo_instr_new(c, HLO_OP_GET_TUPLE_ELEMENT, NULL, &x->shape, &mf, 1);
  if (!g || !hlo_uidx_add_operands(ux, g)) return HJ_ERR_OOM;
  g->index = base;
  hlo_uidx_replace_all_uses(ux, x, g);
  return HJ_OK;
}

static int sib_nleaves(const hlo_instr *x) {
  const hlo_instr *r = x->calls[0]->root;
  return r->op == HLO_OP_TUPLE ? r->noperands : 1;
}

/* Merges fusions |a| and |b| of the round's computation into one multi-output fusion,
   appended at the end of c->instrs (the round re-sorts once) with its fused computation
   appended to m->comps (hlo_fusion_run_control_comps places it); a and b are killed. */
static hj_status sib_merge(sib_round *R, hlo_instr *a, hlo_instr *b) {
  hlo_comp *c = R->c;
  hlo_module *m = c->module;
  char name[128];
  snprintf(name, sizeof name, "fused_computation.%d", m->next_id);
  hlo_comp *mc = hlo_comp_new(m, name);
  if (!mc) return HJ_ERR_OOM;
  snprintf(name, sizeof name, "fusion.%d", m->next_id);
  hlo_shape none = {.type = HLO_TUPLE};
  hlo_instr *mf = hlo_instr_new(c, HLO_OP_FUSION, name, &none, NULL, 0);
  if (!mf) return HJ_ERR_OOM;
  hlo_instr_set_calls(mf, &mc, 1);
  hlo_instr **roots = NULL;
  hj_status st = sib_clone_into(mf, a, &roots);
  if (st == HJ_OK) st = sib_clone_into(mf, b, &roots);
  hlo_instr *t = NULL;
  if (st == HJ_OK) {
    hlo_shape *leaves = hlo_alloc(m, sizeof(hlo_shape) * (size_t)arrlen(roots));
    if (!leaves) st = HJ_ERR_OOM;
    for (ptrdiff_t i = 0; st == HJ_OK && i < arrlen(roots); i++) leaves[i] = roots[i]->shape;
    hlo_shape ts = {.type = HLO_TUPLE, .ntuple = (int)arrlen(roots), .tuple = leaves};
    if (st == HJ_OK && !(t = hlo_instr_new(mc, HLO_OP_TUPLE, NULL, &ts, roots, (int)arrlen(roots))))
      st = HJ_ERR_OOM;
    if (t) {
      hlo_comp_set_root(mc, t);
      mf->shape = t->shape;
    }
  }
  arrfree(roots);
  if (st == HJ_OK && !hlo_uidx_add_operands(&R->ux, mf)) st = HJ_ERR_OOM;
  if (st == HJ_OK) st = sib_redirect(R, a, mf, 0);
  if (st == HJ_OK) st = sib_redirect(R, b, mf, sib_nleaves(a));
  if (st != HJ_OK) return st == HJ_ERR_OOM ? hj__err(m->ctx, st, "sibling fusion: out of memory") : st;
  hlo_uidx_kill(&R->ux, a);
  hlo_uidx_kill(&R->ux, b);
  hlo_fusion_relabel(mf);
  return HJ_OK;
}

/* The cached signature of |x| (an instruction that existed when the round began); false
   when it is no candidate. */
static bool sib_sig_of(sib_round *R, const hlo_instr *x, const sib_sig **out) {
  if (R->sig_ok[x->id] < 0) R->sig_ok[x->id] = sib_signature(x, &R->sigs[x->id]);
  *out = &R->sigs[x->id];
  return R->sig_ok[x->id] == 1;
}

/* May |u| (a candidate) join a merge this round? */
static bool sib_free(sib_round *R, const hlo_instr *u) {
  return u->id < R->id0 && !R->busy[u->id] && !hlo_uidx_dead(&R->ux, u) && u != R->c->root;
}

/* The lone-dot rule for a loop (non-reduce) candidate: epilogue_fusion.c wants it. */
static bool sib_epilogue_of_dot(sib_round *R, const hlo_instr *u, const sib_sig *s) {
  return !s->reduce && hlo_reads_lone_dot(R->c, u, &R->ux);
}

/* Would merging |a| and |b| make one read a buffer the other updates in place (or both
   update the same one)? The merged kernel could then not update it in place. */
static bool sib_dus_conflict(const hlo_instr *a, const hlo_instr *b) {
  for (int side = 0; side < 2; side++) {
    const hlo_instr *x = side ? b : a, *y = side ? a : b;
    if (x->op != HLO_OP_FUSION) continue;
    hlo_dus_root dr[64];
    int n = hlo_fusion_dus_roots(x, dr, 64);
    for (int j = 0; j < n; j++)
      for (int k = 0; dr[j].param >= 0 && k < y->noperands; k++)
        if (y->operands[k] == x->operands[dr[j].param]) return true;
  }
  return false;
}

/* The merges around shared operand |x|: disjoint pairs of its users, each pair the first
   compatible one in text order. *merged counts them. */
static hj_status sib_operand(sib_round *R, hlo_instr *x, int *merged) {
  hlo_comp *c = R->c;
  if (!hlo_shape_is_array(&x->shape) || hlo_shape_bytes(&x->shape) < SIB_MIN_BYTES ||
      (x->op == HLO_OP_CONSTANT && x->shape.rank == 0))
    return HJ_OK;
  hlo_instr **v, **us = NULL;
  int n = hlo_uidx_users(&R->ux, x, &v);
  if (n < 2) return HJ_OK;
  for (int i = 0; i < n; i++) arrput(us, v[i]);
  hj_status st = HJ_OK;
  for (int a = 0; a < n && st == HJ_OK; a++) {
    const sib_sig *sa, *sb;
    hlo_instr *ua = us[a];
    if (!sib_free(R, ua) || !sib_sig_of(R, ua, &sa) || sib_epilogue_of_dot(R, ua, sa)) continue;
    int tries = 0;
    for (int b = a + 1; b < n && tries < SIB_MAX_TRIES; b++) {
      hlo_instr *ub = us[b];
      if (!sib_free(R, ub) || !sib_sig_of(R, ub, &sb) || !sib_same(sa, sb)) continue;
      if (sib_epilogue_of_dot(R, ub, sb)) continue;
      if ((sa->dus || sb->dus) && sib_dus_conflict(ua, ub)) continue;
      if (sib_union_operands(R, ua, ub) > SIB_MAX_OPERANDS) continue;
      tries++;
      if (sib_independent(R, ua, ub) != SIB_NO) continue;
      R->busy[ua->id] = R->busy[ub->id] = 1;
      hlo_instr *fa = ua->op == HLO_OP_FUSION ? ua : hlo_fusion_make(c, ua, &R->ux);
      hlo_instr *fb = !fa ? NULL : ub->op == HLO_OP_FUSION ? ub : hlo_fusion_make(c, ub, &R->ux);
      st = fb ? sib_merge(R, fa, fb) : HJ_ERR_OOM;
      ++*merged;
      break;
    }
  }
  arrfree(us);
  return st;
}

/* One round over |c|: every instruction, as a shared operand, in text order. */
static hj_status sib_round_run(hlo_comp *c, int *merged) {
  sib_round R;
  memset(&R, 0, sizeof R);
  R.c = c;
  R.id0 = c->module->next_id;
  hj_status st = hlo_uidx_build(&R.ux, c);
  if (st != HJ_OK) return st;
  size_t n = (size_t)R.id0 + 1;
  R.busy = calloc(n, 1);
  R.seen = calloc(n, sizeof *R.seen);
  R.sig_ok = malloc(n);
  R.sigs = malloc(n * sizeof *R.sigs);
  if (!R.busy || !R.seen || !R.sig_ok || !R.sigs) st = hj__err(c->module->ctx, HJ_ERR_OOM, "sibling fusion: out of memory");
  if (R.sig_ok) memset(R.sig_ok, -1, n);
  ptrdiff_t n0 = arrlen(c->instrs);
  for (ptrdiff_t i = 0; i < n0 && st == HJ_OK; i++) {
    hlo_instr *x = c->instrs[i];
    if (x->id < R.id0 && !hlo_uidx_dead(&R.ux, x)) st = sib_operand(&R, x, merged);
  }
  if (st == HJ_OK && *merged) {
    hlo_uidx_compact(&R.ux);
    st = hlo_comp_topo_sort(c);
  }
  hlo_uidx_free(&R.ux);
  free(R.busy);
  free(R.seen);
  free(R.sig_ok);
  free(R.sigs);
  arrfree(R.stack);
  return st;
}

/* Merges in |c| until no pair is left; *changed is set when any merge happened. A round
   merges disjoint pairs; a group of k siblings takes about log2(k) rounds. */
static hj_status sib_comp(hlo_comp *c, bool *changed) {
  hj_status st = HJ_OK;
  for (int round = 0; round < 10000 && st == HJ_OK; round++) {
    int merged = 0;
    st = sib_round_run(c, &merged);
    if (!merged) break;
    *changed = true;
  }
  return st;
}

hj_status hlo_pass_sibling_fusion(hlo_pass_ctx *pc, hlo_module *m, bool *changed) {
  return hlo_fusion_run_control_comps(m, sib_comp, changed);
}

#undef SIB_MIN_BYTES
#undef SIB_MAX_OPERANDS
#undef SIB_DFS_BUDGET
#undef SIB_MAX_TRIES
