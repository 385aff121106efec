/* passes/sibling_fusion.c — multi-output fusion of siblings: kernels that read the same
   large operand and walk the same iteration space become one kernel with a tuple root, so
   the operand is read once.

   Which computations: the entry and the while/conditional computations reached from it.
   Candidates: fusions (loop, reduce or transpose hero; no dot, no row-normalisation
   reduce whose root has the input's shape) and the plain ops a loop or reduction kernel
   runs (elementwise, broadcast, slice, concatenate, pad, reverse, reduce), wrapped on
   demand. Their signature must match:
     loop:   every output leaf has the same dims (transposes inside are index maps of
             the loop: the q, k, v head transposes of attention merge into one kernel);
     reduce: every reduce has the same input dims and dimensions={...}, every output leaf
             the reduce's output dims (epilogues on the reduced shape are fine).
   Two candidates merge only if neither depends on the other (no path between them), the
   shared operand has at least SIB_MIN_BYTES, the merged fusion has at most 60 operands, and
   neither is a loop fusion reading a dot (epilogue_fusion.c gives that one to the dot).

   Merge of A and B: a new fused computation holds clones of both bodies and
   ROOT tuple(A's outputs..., B's outputs...); every use of A becomes
   get-tuple-element(M, i) (a multi-output A's get-tuple-elements are renumbered in place);
   the computation is re-sorted topologically. Repeated until nothing merges.

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
  if (x->op == HLO_OP_FUSION) {
    if (x->ncalls != 1 || x->fusion_kind == HLO_FUSION_CUSTOM) return false;
    const hlo_comp *fc = x->calls[0];
    for (ptrdiff_t i = 0; i < arrlen(fc->instrs); i++) {
      const hlo_instr *y = fc->instrs[i];
      if (y->op == HLO_OP_DOT || y->op == HLO_OP_SORT ||
          y->op == HLO_OP_SCATTER || y->op == HLO_OP_DYNAMIC_UPDATE_SLICE)
        return false;
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
  if (a->reduce != b->reduce || !hlo_same_dims(&a->out, &b->out)) return false;
  if (!a->reduce) return true;
  return hlo_same_dims(&a->in, &b->in) && a->nrdims == b->nrdims &&
         !memcmp(a->rdims, b->rdims, sizeof(int64_t) * (size_t)a->nrdims);
}

/* Is |anc| a transitive operand of |x|? (|seen| marks visited instructions.) */
typedef struct sib_seen { const hlo_instr *key; int value; } sib_seen;

static bool sib_depends(const hlo_instr *x, const hlo_instr *anc, sib_seen **seen) {
  if (x == anc) return true;
  if (hmgeti(*seen, x) >= 0) return false;
  hmput(*seen, x, 1);
  for (int k = 0; k < x->noperands; k++)
    if (sib_depends(x->operands[k], anc, seen)) return true;
  return false;
}

static bool sib_independent(const hlo_instr *a, const hlo_instr *b) {
  sib_seen *seen = NULL;
  bool dep = sib_depends(a, b, &seen);
  hmfree(seen);
  if (!dep) dep = sib_depends(b, a, &seen);
  hmfree(seen);
  return !dep;
}

static int sib_union_operands(const hlo_instr *a, const hlo_instr *b) {
  int n = a->noperands;
  for (int k = 0; k < b->noperands; k++) {
    bool have = false;
    for (int j = 0; j < a->noperands; j++) have |= a->operands[j] == b->operands[k];
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

/* Uses of |x| now read leaf |base|.. of |mf|. */
static hj_status sib_redirect(hlo_comp *c, hlo_instr *x, hlo_instr *mf, int base) {
  bool multi = x->calls[0]->root->op == HLO_OP_TUPLE;
  if (multi) {
    for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++) {
      hlo_instr *u = c->instrs[i];
      if (u->op == HLO_OP_GET_TUPLE_ELEMENT && u->operands[0] == x) {
        u->operands[0] = mf;
        u->index += base;
      }
    }
    if (hlo_user_count(c, x) == 0 && c->root != x) return HJ_OK;
    /* other users of the whole tuple: rebuild it from the leaves */
    int n = x->calls[0]->root->noperands;
    hlo_instr **gs = NULL;
    for (int i = 0; i < n; i++) {
      hlo_instr *g = hlo_instr_new(c, HLO_OP_GET_TUPLE_ELEMENT, NULL, &x->shape.tuple[i], &mf, 1);
      if (!g) { arrfree(gs); return HJ_ERR_OOM; }
      g->index = base + i;
      arrput(gs, g);
    }
    hlo_instr *t = hlo_instr_new(c, HLO_OP_TUPLE, NULL, &x->shape, gs, n);
    arrfree(gs);
    if (!t) return HJ_ERR_OOM;
    hlo_replace_all_uses(c, x, t);
    return HJ_OK;
  }
  hlo_instr *g = hlo_instr_new(c, HLO_OP_GET_TUPLE_ELEMENT, NULL, &x->shape, &mf, 1);
  if (!g) return HJ_ERR_OOM;
  g->index = base;
  hlo_replace_all_uses(c, x, g);
  return HJ_OK;
}

static int sib_nleaves(const hlo_instr *x) {
  const hlo_instr *r = x->calls[0]->root;
  return r->op == HLO_OP_TUPLE ? r->noperands : 1;
}

/* Merges fusions |a| and |b| of |c| into one multi-output fusion. */
static hj_status sib_merge(hlo_comp *c, hlo_instr *a, hlo_instr *b) {
  hlo_module *m = c->module;
  char name[128];
  snprintf(name, sizeof name, "fused_computation.%d", m->next_id);
  hlo_comp *mc = hlo_comp_new(m, name);
  if (!mc) return HJ_ERR_OOM;
  /* place it with a's fused computation (before c) */
  (void)arrpop(m->comps);
  for (ptrdiff_t i = 0; i < arrlen(m->comps); i++)
    if (m->comps[i] == c) { arrins(m->comps, i, mc); break; }
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
  if (st == HJ_OK) st = sib_redirect(c, a, mf, 0);
  if (st == HJ_OK) st = sib_redirect(c, b, mf, sib_nleaves(a));
  if (st != HJ_OK) return st == HJ_ERR_OOM ? hj__err(m->ctx, st, "sibling fusion: out of memory") : st;
  hlo_remove_instr(c, a);
  hlo_remove_instr(c, b);
  hlo_fusion_relabel(mf);
  return hlo_comp_topo_sort(c);
}

/* One merge in |c| if any; *done says so. */
static hj_status sib_once(hlo_comp *c, bool *done) {
  *done = false;
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++) {
    hlo_instr *x = c->instrs[i];
    if (!hlo_shape_is_array(&x->shape) || hlo_shape_bytes(&x->shape) < SIB_MIN_BYTES ||
        (x->op == HLO_OP_CONSTANT && x->shape.rank == 0))
      continue;
    hlo_instr **us = NULL;
    int n = hlo_users(c, x, &us);
    hlo_instr *pa = NULL, *pb = NULL;
    for (int a = 0; a < n && !pa; a++) {
      sib_sig sa, sb;
      if (us[a] == c->root || !sib_signature(us[a], &sa)) continue;
      if (us[a]->op == HLO_OP_FUSION && !sa.reduce && hlo_reads_lone_dot(c, us[a])) continue;
      for (int b = a + 1; b < n && !pa; b++) {
        if (us[b] == c->root || !sib_signature(us[b], &sb) || !sib_same(&sa, &sb)) continue;
        if (us[b]->op == HLO_OP_FUSION && !sb.reduce && hlo_reads_lone_dot(c, us[b])) continue;
        if (us[a]->op != HLO_OP_FUSION && !sa.reduce && hlo_reads_lone_dot(c, us[a])) continue;
        if (us[b]->op != HLO_OP_FUSION && !sb.reduce && hlo_reads_lone_dot(c, us[b])) continue;
        if (sib_union_operands(us[a], us[b]) > SIB_MAX_OPERANDS) continue;
        if (!sib_independent(us[a], us[b])) continue;
        pa = us[a];
        pb = us[b];
      }
    }
    arrfree(us);
    if (!pa) continue;
    if (pa->op != HLO_OP_FUSION && !(pa = hlo_fusion_make(c, pa))) return HJ_ERR_OOM;
    if (pb->op != HLO_OP_FUSION && !(pb = hlo_fusion_make(c, pb))) return HJ_ERR_OOM;
    *done = true;
    return sib_merge(c, pa, pb);
  }
  return HJ_OK;
}

/* Merges in |c| until no pair is left; *changed is set when any merge happened. */
static hj_status sib_comp(hlo_comp *c, bool *changed) {
  hj_status st = HJ_OK;
  for (int guard = 0; guard < 10000 && st == HJ_OK; guard++) {
    bool done = false;
    st = sib_once(c, &done);
    if (!done) break;
    *changed = true;
  }
  return st;
}

hj_status hlo_pass_sibling_fusion(hlo_pass_ctx *pc, hlo_module *m, bool *changed) {
  return hlo_fusion_run_control_comps(m, sib_comp, changed);
}

#undef SIB_MIN_BYTES
#undef SIB_MAX_OPERANDS
