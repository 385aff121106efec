/* passes/fusion_split.c — the computation partitioner (issue 3): splits a fusion whose
   elemental emission would evaluate some fused instruction at too many distinct indices,
   by materialising that instruction in a fusion of its own. Target-independent (HLO in,
   HLO out); the CPU backend runs it after the pass pipeline (cpu_backend.c, cpb_passes),
   the CUDA backend can do the same.

   Why. The elemental emitter (emitters/elemental.c) computes a fused instruction at an
   index by recursing into its operands at their indices, and caches (instruction, index
   values) -> value. Two users reading x at different index maps evaluate x twice; along a
   chain of such diamonds the count doubles at every level:
       x1 = add(slice(x0, [0:n-1]), slice(x0, [1:n]))     x0 at i and at i+1
       x2 = add(slice(x1, [0:n-2]), slice(x1, [1:n-1]))   x1 at i and i+1: x0 at 4 indices
   so 20 levels emit x0 2^20 times (measured: emission 0.13 s at 11 levels, 14 s at 14;
   tests/unit/test_emit_partition.c). XLA's answer is its computation partitioner: a value
   used at several indices whose subtree is expensive becomes a subgraph emitted once. On
   the CPU the simplest correct form of it is this pass: such a value is computed by its own
   kernel into a buffer and the consumer loads it (a load per index, however many indices).
   (The other option, emitting the shared subtree as a function called per index, leaves
   the work itself exponential; materialising bounds it.)

   Analysis, per fused computation: for every instruction, the set of distinct index tuples
   at which the emitter evaluates it, as the emitter's cache sees them. An index tuple is a
   list of symbols, one per dim; a symbol stands for one LLVM value: the root's dims are
   distinct symbols; constants are shared (LLVM uniques them); an op that passes index
   values through without new arithmetic (elementwise ops; broadcast, transpose, a slice
   with start 0 and stride 1, a reshape that only adds or drops size-1 dims, which select
   or permute values) gives its operand symbols of its own index; any other op (a slice
   with an offset, a general reshape, reverse, pad, concatenate, reduce's loop, dot,
   gather...) makes new values, named by (op, operand, dim, the op's own index tuple): the
   op at one index is emitted once (cached), so its operand's index values are made once.
   Walking users before operands (reverse text order), each instruction's set is the union
   of the maps of its users' sets, capped at FSP_CAP tuples.

   Decision: the instruction nearest the root (reverse text order) that is evaluated at
   more than FSP_MAX_INDICES (8) tuples, is not a parameter, constant or iota, and whose
   subtree does work (something besides parameters, constants and pure index maps) — or,
   index maps only, at more than FSP_MAX_INDEX_ONLY (64) — is materialised: its subtree
   is cloned into a new fusion placed just before the old one (parameters of the subtree
   become that fusion's operands), and in the old fused computation it is replaced by a
   new parameter fed by the new fusion. Both fusions are relabelled (kLoop/kInput/kOutput
   by hero) and analysed again, until no fusion has such an instruction. 8 means a
   fusion may recompute a value up to 8 times per output element rather than write and
   read it: cheaper than a round trip through memory for a few flops, bounded for chains.

   Worked example, the chain above with 6 levels in one fusion (x0 a parameter):
     sets: x6 {(r)}, x5 {(r), (r+1)}, x4 4 tuples, x3 8, x2 16 > 8 and x2 does work:
     F1 = fusion(p) computes x2 (2 levels: x0 at <= 4 tuples); F = fusion(F1) computes
     x3..x6 from a parameter loaded at 16 indices. Kernels: 2; emissions: linear.

   Invariants: the enclosing computation stays topological (the new fusion goes right
   before the old one, its operands are operands of the old one); a fusion's operands
   stay distinct; fused parameter k is operand k; new fused computations are placed in
   m->comps just before the one they were split from; names are made unique with the
   module's next id. The result computes the same values, bit for bit (same ops, same
   order; only where a value lives changes). */
#include "passes.h"

#define FSP_MAX_INDICES 8
#define FSP_MAX_INDEX_ONLY 64
#define FSP_CAP (FSP_MAX_INDEX_ONLY + 1)
#define FSP_CONST_BIT (1ull << 63)

typedef struct fsp_tuple {
  int rank;
  uint64_t s[HLO_MAX_RANK];
  uint64_t h;
} fsp_tuple;

typedef struct fsp_an {
  const hlo_comp *c;
  int *pos;                 /* instruction id - minid -> position in c->instrs, -1 */
  int npos, minid;          /* ids of one fused computation span a small range of the
                               module's: indexing from 0 was O(module) per fusion */
  fsp_tuple **sets;         /* per position: stb_ds array of distinct tuples */
  signed char *work;        /* per position: -1 unknown, 0/1 */
} fsp_an;

static uint64_t fsp_mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 29);
}

static uint64_t fsp_const(int64_t v) { return FSP_CONST_BIT | ((uint64_t)v & ~FSP_CONST_BIT); }
static bool fsp_is_const(uint64_t s) { return (s & FSP_CONST_BIT) != 0; }
static int64_t fsp_const_val(uint64_t s) { return (int64_t)(s << 1) >> 1; }

static void fsp_seal(fsp_tuple *t) {
  uint64_t h = fsp_mix(0x1234567ull, (uint64_t)t->rank);
  for (int d = 0; d < t->rank; d++) h = fsp_mix(h, t->s[d]);
  t->h = h;
}

/* A value the emitter makes anew: (user, operand, dim, the user's index). */
static uint64_t fsp_fresh(const hlo_instr *u, int slot, int d, const fsp_tuple *ut) {
  return fsp_mix(fsp_mix(fsp_mix((uint64_t)u->id * 31 + 7, (uint64_t)slot), (uint64_t)d), ut->h) & ~FSP_CONST_BIT;
}

/* Does |r| (the result) only add or drop size-1 dims of |o|? The emitter then passes the
   other dims' values through (elemental_index.c, eli_reshape). */
static bool fsp_reshape_trivial(const hlo_shape *o, const hlo_shape *r, int *a, int *rr, int *n) {
  int na = 0, nr = 0;
  for (int d = 0; d < o->rank; d++) if (o->dims[d] != 1) a[na++] = d;
  for (int d = 0; d < r->rank; d++) if (r->dims[d] != 1) rr[nr++] = d;
  if (na != nr) return false;
  for (int i = 0; i < na; i++)
    if (o->dims[a[i]] != r->dims[rr[i]]) return false;
  *n = na;
  return true;
}

/* The index tuple at which user |u|, evaluated at |ut|, evaluates operand |slot|. */
static void fsp_map(const hlo_instr *u, int slot, const fsp_tuple *ut, fsp_tuple *out) {
  const hlo_shape *os = &u->operands[slot]->shape;
  out->rank = hlo_shape_is_array(os) ? os->rank : 0;
  for (int d = 0; d < out->rank; d++) out->s[d] = fsp_fresh(u, slot, d, ut);
  if (hlo_op_is_elementwise(u)) {
    if (out->rank == ut->rank) *out = *ut;
    fsp_seal(out);
    return;
  }
  switch (u->op) {
  case HLO_OP_BROADCAST:
    for (int i = 0; i < out->rank && i < u->dims.n; i++) {
      int64_t d = u->dims.v[i];
      out->s[i] = os->dims[i] == 1 ? fsp_const(0) : d >= 0 && d < ut->rank ? ut->s[d] : out->s[i];
    }
    break;
  case HLO_OP_TRANSPOSE:
    for (int i = 0; i < ut->rank && i < u->dims.n; i++) {
      int64_t p = u->dims.v[i];
      if (p >= 0 && p < out->rank) out->s[p] = ut->s[i];
    }
    break;
  case HLO_OP_SLICE:
    for (int i = 0; i < out->rank && i < ut->rank && i < u->slice_start.n; i++) {
      int64_t a = u->slice_start.v[i], st = u->slice_stride.n > i ? u->slice_stride.v[i] : 1;
      if (a == 0 && st == 1) out->s[i] = ut->s[i];
      else if (fsp_is_const(ut->s[i])) out->s[i] = fsp_const(fsp_const_val(ut->s[i]) * st + a);
    }
    break;
  case HLO_OP_REVERSE:
    for (int i = 0; i < out->rank && i < ut->rank; i++) {
      bool rev = false;
      for (int k = 0; k < u->dims.n; k++) rev |= u->dims.v[k] == i;
      if (!rev) out->s[i] = ut->s[i];
      else if (fsp_is_const(ut->s[i])) out->s[i] = fsp_const(os->dims[i] - 1 - fsp_const_val(ut->s[i]));
    }
    break;
  case HLO_OP_RESHAPE:
  case HLO_OP_BITCAST: {
    int a[HLO_MAX_RANK], r[HLO_MAX_RANK], n = 0;
    if ((u->op == HLO_OP_RESHAPE || (hlo_shape_layout_is_default(os) && hlo_shape_layout_is_default(&u->shape))) &&
        fsp_reshape_trivial(os, &u->shape, a, r, &n)) {
      for (int d = 0; d < out->rank; d++) out->s[d] = fsp_const(0);
      for (int i = 0; i < n; i++) out->s[a[i]] = ut->s[r[i]];
    }
    break;
  }
  default:
    break;
  }
  fsp_seal(out);
}

static bool fsp_has(const fsp_tuple *set, const fsp_tuple *t) {
  for (ptrdiff_t i = 0; i < arrlen(set); i++)
    if (set[i].h == t->h && set[i].rank == t->rank &&
        !memcmp(set[i].s, t->s, sizeof(uint64_t) * (size_t)t->rank))
      return true;
  return false;
}

static int fsp_pos(const fsp_an *A, const hlo_instr *x) {
  int k = x->id - A->minid;
  return k >= 0 && k < A->npos ? A->pos[k] : -1;
}

/* The position map of |c| into |A| (pos, npos, minid); false on OOM. */
static bool fsp_positions(const hlo_comp *c, fsp_an *A) {
  ptrdiff_t n = arrlen(c->instrs);
  int lo = n ? c->instrs[0]->id : 0, hi = lo;
  for (ptrdiff_t i = 0; i < n; i++) {
    if (c->instrs[i]->id < lo) lo = c->instrs[i]->id;
    if (c->instrs[i]->id > hi) hi = c->instrs[i]->id;
  }
  A->minid = lo;
  A->npos = hi - lo + 1;
  A->pos = malloc(sizeof(int) * (size_t)A->npos);
  if (!A->pos) return false;
  for (int i = 0; i < A->npos; i++) A->pos[i] = -1;
  for (ptrdiff_t i = 0; i < n; i++) A->pos[c->instrs[i]->id - lo] = (int)i;
  return true;
}

static void fsp_an_free(fsp_an *A) {
  for (ptrdiff_t i = 0; A->sets && i < arrlen(A->c->instrs); i++) arrfree(A->sets[i]);
  free(A->sets);
  free(A->pos);
  free(A->work);
  memset(A, 0, sizeof *A);
}

/* The index sets of every instruction of |c|. false on OOM. */
static bool fsp_analyse(const hlo_comp *c, fsp_an *A) {
  memset(A, 0, sizeof *A);
  A->c = c;
  ptrdiff_t n = arrlen(c->instrs);
  A->sets = calloc((size_t)n + 1, sizeof *A->sets);
  A->work = malloc((size_t)n + 1);
  if (!fsp_positions(c, A) || !A->sets || !A->work) return false;
  memset(A->work, -1, (size_t)n + 1);
  hlo_user_map um;
  hlo_user_map_build(&um, c);
  for (ptrdiff_t i = n - 1; i >= 0; i--) {
    const hlo_instr *x = c->instrs[i];
    if (x == c->root) {
      fsp_tuple t = { .rank = hlo_shape_is_array(&x->shape) ? x->shape.rank : 0 };
      for (int d = 0; d < t.rank; d++) t.s[d] = fsp_mix(0xabcdefull, (uint64_t)d) & ~FSP_CONST_BIT;
      fsp_seal(&t);
      arrput(A->sets[i], t);
      continue;
    }
    int nu = 0;
    hlo_instr **us = hlo_user_map_get(&um, x, &nu);
    for (int k = 0; k < nu && arrlen(A->sets[i]) < FSP_CAP; k++) {
      const hlo_instr *u = us[k];
      int up = fsp_pos(A, u);
      if (up < 0) continue;
      for (int s = 0; s < u->noperands; s++) {
        if (u->operands[s] != x) continue;
        for (ptrdiff_t j = 0; j < arrlen(A->sets[up]) && arrlen(A->sets[i]) < FSP_CAP; j++) {
          fsp_tuple t;
          fsp_map(u, s, &A->sets[up][j], &t);
          if (!fsp_has(A->sets[i], &t)) arrput(A->sets[i], t);
        }
      }
    }
  }
  hlo_user_map_free(&um);
  return true;
}

static bool fsp_index_only(hlo_opcode op) {
  switch (op) {
  case HLO_OP_PARAMETER: case HLO_OP_CONSTANT: case HLO_OP_IOTA: case HLO_OP_BROADCAST:
  case HLO_OP_RESHAPE: case HLO_OP_BITCAST: case HLO_OP_TRANSPOSE: case HLO_OP_SLICE:
  case HLO_OP_REVERSE: case HLO_OP_COPY:
    return true;
  default:
    return false;
  }
}

/* Does the subtree of |x| compute anything besides index maps? */
static bool fsp_work(fsp_an *A, const hlo_instr *x) {
  int p = fsp_pos(A, x);
  if (p < 0) return false;
  if (A->work[p] >= 0) return A->work[p];
  bool w = !fsp_index_only(x->op);
  for (int k = 0; k < x->noperands && !w; k++) w = fsp_work(A, x->operands[k]);
  A->work[p] = w;
  return w;
}

/* The instruction to materialise, or NULL. */
static hlo_instr *fsp_pick(fsp_an *A) {
  const hlo_comp *c = A->c;
  for (ptrdiff_t i = arrlen(c->instrs) - 1; i >= 0; i--) {
    hlo_instr *x = c->instrs[i];
    ptrdiff_t n = arrlen(A->sets[i]);
    if (x == c->root || x->op == HLO_OP_PARAMETER || x->op == HLO_OP_CONSTANT ||
        x->op == HLO_OP_IOTA || !hlo_shape_is_array(&x->shape) || n <= FSP_MAX_INDICES)
      continue;
    if (n > FSP_MAX_INDEX_ONLY || fsp_work(A, x)) return x;
  }
  return NULL;
}

int hlo_fusion_index_tuples(const hlo_comp *fc) {
  fsp_an A;
  int mx = 0;
  if (fsp_analyse(fc, &A))
    for (ptrdiff_t i = 0; i < arrlen(fc->instrs); i++) {
      const hlo_instr *x = fc->instrs[i];
      if (x->op == HLO_OP_PARAMETER || x->op == HLO_OP_CONSTANT || x->op == HLO_OP_IOTA) continue;
      if (arrlen(A.sets[i]) > mx) mx = (int)arrlen(A.sets[i]);
    }
  fsp_an_free(&A);
  return mx;
}

/* ---- the split ------------------------------------------------------------------------------ */

static hlo_instr *fsp_new_param(hlo_comp *fc, const hlo_shape *s, const hlo_instr *before) {
  char name[64];
  int p = (int)arrlen(fc->params);
  snprintf(name, sizeof name, "param_%d.%d", p, fc->module->next_id);
  hlo_instr *par = hlo_instr_new_before(fc, before, HLO_OP_PARAMETER, name, s, NULL, 0);
  if (!par) return NULL;
  par->index = p;
  arrput(fc->params, par);
  return par;
}

static bool fsp_set_operands(hlo_instr *f, hlo_instr **ops, int n) {
  hlo_instr **o = hlo_alloc(f->parent->module, sizeof(hlo_instr *) * (size_t)(n ? n : 1));
  if (!o) return false;
  if (n) memcpy(o, ops, sizeof(hlo_instr *) * (size_t)n);
  f->operands = o;
  f->noperands = n;
  return true;
}

/* Drops the parameters of fusion |f|'s computation that nothing uses, with their operands. */
static void fsp_drop_unused(hlo_instr *f) {
  hlo_comp *fc = f->calls[0];
  for (ptrdiff_t k = arrlen(fc->params) - 1; k >= 0; k--) {
    hlo_instr *p = fc->params[k];
    if (p == fc->root || hlo_user_count(fc, p) > 0) continue;
    for (ptrdiff_t i = 0; i < arrlen(fc->instrs); i++)   /* hlo_remove_instr keeps params */
      if (fc->instrs[i] == p) { arrdel(fc->instrs, i); break; }
    arrdel(fc->params, k);
    for (int i = (int)k; i + 1 < f->noperands; i++) f->operands[i] = f->operands[i + 1];
    f->noperands--;
  }
  for (ptrdiff_t i = 0; i < arrlen(fc->params); i++) fc->params[i]->index = i;
}

/* Materialises |x| of fusion |f| (in |c|): a new fusion before |f| computes it. */
static hj_status fsp_split(hlo_comp *c, hlo_instr *f, hlo_instr *x) {
  hlo_module *m = c->module;
  hlo_comp *fc = f->calls[0];
  fsp_an A;   /* only its position map is used */
  memset(&A, 0, sizeof A);
  ptrdiff_t n = arrlen(fc->instrs);
  bool *in = calloc((size_t)n + 1, 1);
  hlo_instr **map = calloc((size_t)n + 1, sizeof *map), **ops = NULL, **outer = NULL;
  hj_status st = HJ_OK;
  char name[512];
  if (!in || !map || !fsp_positions(fc, &A)) { st = HJ_ERR_OOM; goto done; }
  int xp = fsp_pos(&A, x);
  if (xp < 0) { st = HJ_ERR_INTERNAL; goto done; }
  /* the subtree of x (operands come before users in text order) */
  in[xp] = true;
  for (int i = xp; i >= 0; i--)
    for (int k = 0; in[i] && k < fc->instrs[i]->noperands; k++) {
      int q = fsp_pos(&A, fc->instrs[i]->operands[k]);
      if (q >= 0) in[q] = true;
    }
  snprintf(name, sizeof name, "split_computation.%d", m->next_id);
  hlo_comp *nc = hlo_comp_new(m, name);
  if (!nc) { st = HJ_ERR_OOM; goto done; }
  hlo_module_insert_comp_before(m, nc, fc);
  for (int i = 0; i <= xp && st == HJ_OK; i++) {
    if (!in[i]) continue;
    hlo_instr *y = fc->instrs[i];
    if (y->op == HLO_OP_PARAMETER) {
      map[i] = fsp_new_param(nc, &y->shape, NULL);
      arrput(outer, f->operands[y->index]);
    } else {
      arrsetlen(ops, 0);
      for (int k = 0; k < y->noperands; k++) {
        int q = fsp_pos(&A, y->operands[k]);
        if (q < 0 || !map[q]) break;
        arrput(ops, map[q]);
      }
      snprintf(name, sizeof name, "%s.s%d", y->name, m->next_id);
      map[i] = arrlen(ops) == y->noperands ? hlo_instr_clone_into(nc, y, name, ops, y->calls) : NULL;
    }
    if (!map[i]) st = HJ_ERR_OOM;
  }
  if (st != HJ_OK) goto done;
  hlo_comp_set_root(nc, map[xp]);
  snprintf(name, sizeof name, "split_fusion.%d", m->next_id);
  hlo_instr *f1 = hlo_instr_new_before(c, f, HLO_OP_FUSION, name, &x->shape, outer, (int)arrlen(outer));
  if (!f1) { st = HJ_ERR_OOM; goto done; }
  hlo_instr_set_calls(f1, &nc, 1);
  hlo_fusion_relabel(f1);
  /* in the old computation, x becomes a parameter fed by f1 */
  hlo_instr *p = fsp_new_param(fc, &x->shape, fc->instrs[0]);
  if (!p) { st = HJ_ERR_OOM; goto done; }
  hlo_replace_all_uses(fc, x, p);
  arrsetlen(ops, 0);
  for (int k = 0; k < f->noperands; k++) arrput(ops, f->operands[k]);
  arrput(ops, f1);
  if (!fsp_set_operands(f, ops, (int)arrlen(ops))) { st = HJ_ERR_OOM; goto done; }
  if ((st = hlo_comp_dce(fc, NULL)) != HJ_OK) goto done;
  fsp_drop_unused(f);
  hlo_fusion_relabel(f);
done:
  free(in);
  free(map);
  free(A.pos);
  arrfree(ops);
  arrfree(outer);
  if (st == HJ_OK) return HJ_OK;
  return hj__err(m->ctx, st, "pass fusion_split: cannot split '%s' at '%s'", f->name, x->name);
}

/* Splits fusion |f| of |c| once if it needs it; *split says whether it did. */
static hj_status fsp_fusion(hlo_comp *c, hlo_instr *f, bool *split) {
  *split = false;
  if (f->ncalls != 1 || f->fusion_kind == HLO_FUSION_CUSTOM) return HJ_OK;
  fsp_an A;
  if (!fsp_analyse(f->calls[0], &A)) {
    fsp_an_free(&A);
    return hj__err(c->module->ctx, HJ_ERR_OOM, "pass fusion_split: out of memory analysing '%s'", f->name);
  }
  hlo_instr *x = fsp_pick(&A);
  fsp_an_free(&A);
  if (!x) return HJ_OK;
  *split = true;
  return fsp_split(c, f, x);
}

hj_status hlo_pass_fusion_split(hlo_pass_ctx *pc, hlo_module *m, bool *changed) {
  bool any = false;
  hj_status st = HJ_OK;
  /* m->comps grows as fusions split; the new computations hold no fusions */
  for (ptrdiff_t ci = 0; ci < arrlen(m->comps) && st == HJ_OK; ci++) {
    hlo_comp *c = m->comps[ci];
    int budget = 100000;   /* each split shrinks a fused computation: this never binds */
    for (ptrdiff_t i = 0; i < arrlen(c->instrs) && st == HJ_OK; i++) {
      if (c->instrs[i]->op != HLO_OP_FUSION) continue;
      bool split = false;
      st = fsp_fusion(c, c->instrs[i], &split);
      /* re-examine position i: it now holds the new fusion, the old one follows */
      if (split && budget-- > 0) { any = true; i--; }
    }
  }
  if (changed) *changed = any;
  return st;
}

#undef FSP_MAX_INDICES
#undef FSP_MAX_INDEX_ONLY
#undef FSP_CAP
#undef FSP_CONST_BIT
