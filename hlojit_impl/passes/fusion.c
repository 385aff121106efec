/* passes/fusion.c — producer-consumer fusion driven by a cost model (after XLA's
   PriorityFusion): memory-bound work crosses memory once.

   Which computations: the entry and the while/conditional computations reached from it
   (the runtime runs those as thunk sequences); fused computations and reducers are left
   alone. Dots are left alone too: passes/epilogue_fusion.c gives them their epilogues.

   Algorithm: sweeps over the computation from the root upwards (consumers before their
   producers), until a sweep changes nothing. For each producer p:
     - p must be fusible at all: elementwise ops, index ops (broadcast, iota, slice,
       concatenate, pad, reverse, reshape, default-layout bitcast, transposes of size-1
       dims), scalar constants, gather and dynamic-slice (never duplicated), loop fusions
       of those, and reduces / reduce fusions (epilogue rule below). Never: dot, real
       transposes (they stay the hero of their own fusion), sort, scatter, while,
       conditional, tuples, parameters, ...
     - every user of p must take it (else p stays a kernel): elementwise, broadcast, slice,
       concatenate, pad, reverse, transpose, reduce and dynamic-update-slice instructions,
       or fusions of them; never as the buffer a dynamic-update-slice updates in place
       (ir/inplace.c: its update and starts fuse, the buffer stays a buffer: a KV cache
       update absorbs the slice of the qkv row it writes).
       A dot fusion takes p only when p does not feed the dot (matmul packs its operands);
       a reduce or transpose hero takes only cheap, index-preserving producers
       (elementwise, broadcast, iota, constant, reshape, slice) so its input stays cheap.
     - cost model (times in ns, a CPU-sized model): fusing saves writing p once and
       reading it once per user, bytes(p)*(1+users)/BW, plus one kernel launch; it costs
       the work duplicated: cost(p) * (evaluations of p in all consumers - numel(p)), at
       OPS per ns. Evaluations follow the consumers' index maps (a broadcast consumer of
       size N evaluates p N times, a slice fewer times than p has elements). Expensive ops
       (exp, log, tanh, erf, pow, ...; gather) are never evaluated more than once per element.
     - a reduce (or reduce fusion) fuses only into its single user as an epilogue: the
       reduced value must reach the user's root through elementwise ops on the reduced
       shape (reshapes that add or drop size-1 dims included) — or, "row normalisation",
       when the reduce is over trailing dims, through one broadcast back to the reduce's
       input shape followed by elementwise ops on that shape (softmax, layer norm), and
       through reduces of the same rows there ("chained rows": back to the row value,
       and on from it by the same rules; the user may hold such reduces already). The
       contract for the reduction emitter: compute the reduce once per row, then evaluate
       the root at each element of the row with the reduce overridden by the row's value
       (emit.h); emit_classify sends such fusions to the reduction emitter, which does.
   Fusing = wrap the consumer into a fusion if it is not one (fusion_util.c), then clone
   p into it; p is removed once its last user took it. Kinds: kInput when a reduce is
   inside, kOutput with a dot, else kLoop (hlo_fusion_relabel).

   Worked example, softmax over the last dim of x: f32[8,64]:
       m = reduce-max(x); mb = broadcast(m); d = x - mb; e = exp(d);
       s = reduce-sum(e); sb = broadcast(s); ROOT y = e / sb
   the sweep goes upwards: sb joins y's new fusion F; s has the single user F and reaches
   F's root through broadcast then divide: F absorbs s as a row-normalisation epilogue (F
   becomes kInput); e's users, s and y, are both inside F now, so e joins F without being
   duplicated (an exp with two users in different kernels would have stayed a kernel); d
   and mb join F; m's single user is F, whose reduce s reduces the same rows and reads m's
   row value through mb (a chained row, fus_row_reduce): m joins F too.
   Result: one kernel, F = {m = max(x), s = sum(exp(x - mb)), exp(..) / broadcast(s)}, which
   the reduction emitters compute per row in that order (m, then s reading m's row value,
   then the output); layer norm's mean and variance likewise.
   Env: HLOJIT_FUSION_ROW_NORM=0 turns the row-normalisation epilogue off. */
#include "passes.h"
#include <stdlib.h>

#define FUS_BYTES_PER_NS 20.0   /* memory bandwidth a kernel sees */
#define FUS_OPS_PER_NS 50.0     /* cheap scalar ops per ns (vectorised, all cores) */
#define FUS_LAUNCH_NS 5000.0    /* one kernel: dispatch over the thread pool and join */
#define FUS_MAX_OPERANDS 60     /* emit_fn holds 64 parameters */
#define FUS_MAX_INSTRS 400

/* ---- per-op facts (the opcode table's cost column) ------------------------------------------ */

/* A transcendental, gather, dynamic slice, reduce or dot: never duplicated into consumers. */
static bool fus_is_expensive_op(hlo_opcode op) { return hlo_opcode_cost(op) >= HLO_COST_MATH; }

static double fus_op_cost(const hlo_instr *x) {
  static const double per_elem[] = { [HLO_COST_FREE] = 0, [HLO_COST_INDEX] = 0.25,
                                     [HLO_COST_CHEAP] = 1, [HLO_COST_MID] = 4,
                                     [HLO_COST_MATH] = 20, [HLO_COST_HEAVY] = 20 };
  return per_elem[hlo_opcode_cost(x->op)];
}

/* Per-element cost of |p| (summed over a fusion's instructions); *exp: something in it
   may not be duplicated. */
static double fus_cost(const hlo_instr *p, bool *exp) {
  *exp = fus_is_expensive_op(p->op);
  if (p->op != HLO_OP_FUSION) return fus_op_cost(p);
  double c = 0;
  const hlo_comp *fc = p->calls[0];
  for (ptrdiff_t i = 0; i < arrlen(fc->instrs); i++) {
    c += fus_op_cost(fc->instrs[i]);
    *exp |= fus_is_expensive_op(fc->instrs[i]->op);
  }
  return c;
}

static bool fus_default_bitcast(const hlo_instr *x) {
  return hlo_shape_is_array(&x->shape) && hlo_shape_layout_is_default(&x->shape) &&
         hlo_shape_layout_is_default(&x->operands[0]->shape) &&
         hlo_shape_bytes(&x->shape) == hlo_shape_bytes(&x->operands[0]->shape);
}

/* Cheap and index-preserving enough to feed a reduce or transpose hero. */
static bool fus_friendly_op(const hlo_instr *x) {
  if (hlo_op_is_elementwise(x)) return true;
  switch (x->op) {
  case HLO_OP_PARAMETER: case HLO_OP_BROADCAST: case HLO_OP_IOTA: case HLO_OP_RESHAPE:
  case HLO_OP_SLICE:
    return true;
  case HLO_OP_CONSTANT: return x->shape.rank == 0;
  case HLO_OP_BITCAST: return fus_default_bitcast(x);
  case HLO_OP_TRANSPOSE: return !hlo_transpose_is_real(x);
  default: return false;
  }
}

static bool fus_friendly(const hlo_instr *p) {
  if (p->op != HLO_OP_FUSION) return fus_friendly_op(p);
  const hlo_comp *fc = p->calls[0];
  for (ptrdiff_t i = 0; i < arrlen(fc->instrs); i++)
    if (!fus_friendly_op(fc->instrs[i])) return false;
  return true;
}

/* A plain op that may be fused into a consumer (reduce: only as an epilogue). */
static bool fus_plain_producer(const hlo_instr *p) {
  if (hlo_op_is_elementwise(p)) return true;
  switch (p->op) {
  case HLO_OP_BROADCAST: case HLO_OP_IOTA: case HLO_OP_SLICE: case HLO_OP_CONCATENATE:
  case HLO_OP_PAD: case HLO_OP_REVERSE: case HLO_OP_RESHAPE: case HLO_OP_GATHER:
  case HLO_OP_DYNAMIC_SLICE:
    return hlo_shape_is_array(&p->shape);
  case HLO_OP_CONSTANT: return p->shape.rank == 0 && hlo_shape_is_array(&p->shape);
  case HLO_OP_BITCAST: return fus_default_bitcast(p);
  case HLO_OP_TRANSPOSE: return !hlo_transpose_is_real(p);
  case HLO_OP_REDUCE: return hlo_shape_is_array(&p->shape);
  default: return false;
  }
}

/* The reduce that makes |p| a reduce producer (a plain reduce or a kInput fusion whose
   hero is one), else NULL. */
static const hlo_instr *fus_reduce_of(const hlo_instr *p) {
  if (p->op == HLO_OP_REDUCE) return p;
  if (p->op != HLO_OP_FUSION) return NULL;
  const hlo_instr *h = hlo_fusion_hero(p->calls[0]);
  return h && h->op == HLO_OP_REDUCE ? h : NULL;
}

static bool fus_producer_ok(const hlo_instr *p) {
  if (p->op != HLO_OP_FUSION) return fus_plain_producer(p);
  if (p->ncalls != 1 || p->fusion_kind == HLO_FUSION_CUSTOM) return false;
  const hlo_comp *fc = p->calls[0];
  if (!hlo_shape_is_array(&fc->root->shape)) return false;
  const hlo_instr *h = hlo_fusion_hero(fc);
  if (h && h->op != HLO_OP_REDUCE) return false;
  for (ptrdiff_t i = 0; i < arrlen(fc->instrs); i++) {
    const hlo_instr *x = fc->instrs[i];
    if (x->op != HLO_OP_PARAMETER && !fus_plain_producer(x)) return false;
  }
  return true;
}

/* ---- consumers ----------------------------------------------------------------------------- */

static bool fus_plain_consumer(const hlo_instr *u) {
  if (hlo_op_is_elementwise(u)) return true;
  switch (u->op) {
  case HLO_OP_BROADCAST: case HLO_OP_SLICE: case HLO_OP_CONCATENATE: case HLO_OP_PAD:
  case HLO_OP_REVERSE: case HLO_OP_TRANSPOSE:
    return true;
  case HLO_OP_DYNAMIC_UPDATE_SLICE: return hlo_shape_is_array(&u->shape);
  case HLO_OP_REDUCE: return hlo_shape_is_array(&u->shape);
  default: return false;
  }
}

/* Does |x| reach |target| inside its computation (through users)? */
static bool fus_reaches(const hlo_comp *fc, const hlo_instr *x, const hlo_instr *target) {
  if (x == target) return true;
  for (ptrdiff_t i = 0; i < arrlen(fc->instrs); i++) {
    const hlo_instr *u = fc->instrs[i];
    for (int k = 0; k < u->noperands; k++)
      if (u->operands[k] == x) {
        if (fus_reaches(fc, u, target)) return true;
        break;
      }
  }
  return false;
}

/* Would fusing |p| into |u| put a computation where a dynamic-update-slice of |u| updates
   a buffer in place (ir/inplace.c)? Then the update could no longer be done in place. */
static bool fus_into_inplace_buffer(const hlo_instr *u, const hlo_instr *p) {
  if (u->op != HLO_OP_FUSION) return u->op == HLO_OP_DYNAMIC_UPDATE_SLICE && u->operands[0] == p;
  hlo_dus_root dr[64];
  int n = hlo_fusion_dus_roots(u, dr, 64);
  for (int j = 0; j < n; j++)
    if (dr[j].param >= 0 && u->operands[dr[j].param] == p) return true;
  return false;
}

static bool fus_consumer_ok(const hlo_instr *u, const hlo_instr *p) {
  if (u->op != HLO_OP_FUSION) {
    if (!fus_plain_consumer(u) || fus_into_inplace_buffer(u, p)) return false;
    if (u->op == HLO_OP_REDUCE || u->op == HLO_OP_TRANSPOSE) return fus_friendly(p);
    return true;
  }
  if (u->ncalls != 1 || u->fusion_kind == HLO_FUSION_CUSTOM) return false;
  const hlo_comp *fc = u->calls[0];
  if (!hlo_shape_is_array(&fc->root->shape)) return false;
  if (arrlen(fc->instrs) > FUS_MAX_INSTRS || u->noperands > FUS_MAX_OPERANDS) return false;
  bool dus = false;
  for (ptrdiff_t i = 0; i < arrlen(fc->instrs); i++) {   /* only ops we know how to fuse */
    const hlo_instr *x = fc->instrs[i];
    dus |= x->op == HLO_OP_DYNAMIC_UPDATE_SLICE;
    if (x->op != HLO_OP_PARAMETER && x->op != HLO_OP_DOT && x->op != HLO_OP_TRANSPOSE &&
        x->op != HLO_OP_DYNAMIC_UPDATE_SLICE && !fus_plain_producer(x))
      return false;
  }
  if (dus && fus_into_inplace_buffer(u, p)) return false;
  const hlo_instr *h = hlo_fusion_hero(fc);
  if (!h) return true;
  if (h->op == HLO_OP_DOT) {
    for (int k = 0; k < u->noperands; k++)
      if (u->operands[k] == p && fus_reaches(fc, fc->params[k], h)) return false;
    return true;
  }
  return fus_friendly(p);
}

/* ---- evaluation counts ------------------------------------------------------------------- */

/* Scratch of one fusion pass over one computation: the use index and a per-id array for
   the evaluation counts (zero between uses). */
typedef struct fus_st {
  hlo_uidx ux;
  double *E;
  int ecap;
} fus_st;

/* How many times the kernel of fusion |u| evaluates its fused parameter for |p|: the
   root once per element, an operand as often as its most frequent user reads it (the
   elemental emitter caches one index), a reduce once per output element reading its
   inputs numel(input)/numel(output) times per evaluation, the operands of a root
   concatenate the loop emitter writes row by row (hlo_root_concat) once per own element. */
static double fus_evals_in_fusion(fus_st *S, const hlo_instr *u, const hlo_instr *p) {
  const hlo_comp *fc = u->calls[0];
  int need = fc->module->next_id + 1;
  if (need > S->ecap) {
    double *E = realloc(S->E, sizeof *E * (size_t)need * 2);
    if (!E) return 1e300;   /* out of memory: "too many evaluations", nothing is fused */
    memset(E + S->ecap, 0, sizeof *E * (size_t)(need * 2 - S->ecap));
    S->E = E;
    S->ecap = need * 2;
  }
  double *E = S->E;
  E[fc->root->id] = (double)hlo_shape_numel(&fc->root->shape);
  const hlo_instr *rc = hlo_root_concat(fc);
  for (ptrdiff_t i = arrlen(fc->instrs) - 1; i >= 0; i--) {
    const hlo_instr *x = fc->instrs[i];
    double e = E[x->id];
    if (x->op == HLO_OP_REDUCE || x->op == HLO_OP_DOT) e = (double)hlo_shape_numel(&x->shape);
    for (int k = 0; k < x->noperands; k++) {
      const hlo_instr *o = x->operands[k];
      double c = x == rc ? (double)hlo_shape_numel(&o->shape) : e;   /* one operand per row */
      if (x->op == HLO_OP_REDUCE && hlo_shape_is_array(&x->shape) && hlo_shape_numel(&x->shape))
        c = e * (double)hlo_shape_numel(&o->shape) / (double)hlo_shape_numel(&x->shape);
      if (x->op == HLO_OP_DYNAMIC_UPDATE_SLICE && k > 0)   /* the update, once per element */
        c = k == 1 ? (double)hlo_shape_numel(&o->shape) : 1;
      if (c > E[o->id]) E[o->id] = c;
    }
  }
  double r = 0;
  for (int k = 0; k < u->noperands; k++)
    if (u->operands[k] == p && E[fc->params[k]->id] > r) r = E[fc->params[k]->id];
  for (ptrdiff_t i = 0; i < arrlen(fc->instrs); i++) E[fc->instrs[i]->id] = 0;
  return r;
}

static double fus_evals_in(fus_st *S, const hlo_instr *u, const hlo_instr *p) {
  if (u->op == HLO_OP_FUSION) return fus_evals_in_fusion(S, u, p);
  switch (u->op) {
  case HLO_OP_REDUCE: case HLO_OP_CONCATENATE: case HLO_OP_PAD: case HLO_OP_DYNAMIC_UPDATE_SLICE:
    return (double)hlo_shape_numel(&p->shape);
  default:
    return (double)hlo_shape_numel(&u->shape);
  }
}

/* The cost model for a producer with users |us| (all of which take it). A producer that is
   the natural epilogue of a dot (hlo_reads_lone_dot) is not duplicated: epilogue_fusion.c
   gives it to the dot's kOutput fusion. */
static bool fus_profitable(const hlo_comp *c, const hlo_instr *p, hlo_instr *const *us, int n,
                           fus_st *S) {
  if (n > 1 && hlo_reads_lone_dot(c, p, &S->ux)) return false;
  bool exp = false;
  double cost = fus_cost(p, &exp), evals = 0, numel = (double)hlo_shape_numel(&p->shape);
  for (int i = 0; i < n; i++) evals += fus_evals_in(S, us[i], p);
  double extra = evals - numel;
  if (exp) return n == 1 && extra <= 0;
  if (extra <= 0) return true;
  bool alias = p->op == HLO_OP_RESHAPE || p->op == HLO_OP_BITCAST || p->op == HLO_OP_CONSTANT;
  double saved = alias ? 0 : (double)hlo_shape_bytes(&p->shape) * (1 + n) / FUS_BYTES_PER_NS +
                             FUS_LAUNCH_NS;
  return cost * extra / FUS_OPS_PER_NS <= saved;
}

/* ---- the reduce epilogue rule ----------------------------------------------------------- */

typedef enum { FUS_ROW, FUS_FULL } fus_state;

typedef struct fus_rcx {
  const hlo_instr *red;       /* the reduce */
  bool row_norm;              /* the FULL state is allowed */
  int64_t row[HLO_MAX_RANK];  /* non-1 dims of the reduced shape */
  int nrow;
} fus_rcx;

static int fus_nontrivial(const hlo_shape *s, int64_t *out) {
  int n = 0;
  for (int d = 0; d < s->rank; d++)
    if (s->dims[d] != 1) out[n++] = s->dims[d];
  return n;
}

static bool fus_is_row(const fus_rcx *r, const hlo_shape *s) {
  int64_t d[HLO_MAX_RANK];
  int n = fus_nontrivial(s, d);
  return n == r->nrow && !memcmp(d, r->row, sizeof(int64_t) * (size_t)n);
}

/* A broadcast from a ROW value back to the reduce input's shape: sorted dimensions, and
   the operand's non-1 dims land exactly on the kept (non-reduced) non-1 dims. */
static bool fus_row_broadcast(const fus_rcx *r, const hlo_instr *b) {
  const hlo_shape *in = &r->red->operands[0]->shape, *o = &b->operands[0]->shape;
  if (!r->row_norm || !hlo_same_dims(&b->shape, in)) return false;
  int64_t last = -1;
  int nmap = 0;
  for (int i = 0; i < b->dims.n; i++) {
    int64_t d = b->dims.v[i];
    if (d <= last) return false;
    last = d;
    if (o->dims[i] == 1) continue;
    if (hlo_ints_has(r->red->dims, d) || o->dims[i] != in->dims[d]) return false;
    nmap++;
  }
  int kept = 0;
  for (int d = 0; d < in->rank; d++)
    if (!hlo_ints_has(r->red->dims, d) && in->dims[d] != 1) kept++;
  return nmap == kept;
}

/* Chained rows: a reduce over the same rows as |r|'s (the same input dims, the same reduced
   dims, one result) that reads the broadcast row value — layer norm's variance reading the
   mean, softmax's sum reading the max. The emitters compute a row's heroes in dependency
   order, each later one reading the earlier ones' row values (reduction.c). */
static bool fus_row_reduce(const fus_rcx *r, const hlo_instr *u) {
  const hlo_instr *red = r->red;
  if (!r->row_norm || u->op != HLO_OP_REDUCE || u->noperands != 2 || red->noperands != 2) return false;
  if (!hlo_same_dims(&u->operands[0]->shape, &red->operands[0]->shape) || u->dims.n != red->dims.n) return false;
  for (int i = 0; i < u->dims.n; i++)
    if (!hlo_ints_has(red->dims, u->dims.v[i])) return false;
  return true;
}

/* Every use of |x| (state |st|) inside |fc| reaches the root along an allowed path. */
static bool fus_epi_walk(const fus_rcx *r, const hlo_comp *fc, const hlo_instr *x, fus_state st) {
  for (ptrdiff_t i = 0; i < arrlen(fc->instrs); i++) {
    const hlo_instr *u = fc->instrs[i];
    bool uses = false;
    for (int k = 0; k < u->noperands; k++) uses |= u->operands[k] == x;
    if (!uses) continue;
    fus_state next;
    if (hlo_op_is_elementwise(u)) next = st;
    else if (st == FUS_ROW && (u->op == HLO_OP_RESHAPE || u->op == HLO_OP_BROADCAST) &&
             fus_is_row(r, &u->shape))
      next = FUS_ROW;
    else if (st == FUS_ROW && u->op == HLO_OP_BROADCAST && fus_row_broadcast(r, u))
      next = FUS_FULL;
    else if (st == FUS_FULL && u->operands[0] == x && fus_row_reduce(r, u))
      next = FUS_ROW;
    else
      return false;
    if (!fus_epi_walk(r, fc, u, next)) return false;
  }
  return true;
}

static bool fus_row_norm_enabled(void) {
  const char *e = getenv("HLOJIT_FUSION_ROW_NORM");
  return !e || strcmp(e, "0") != 0;
}

/* The walk's context for reduce producer |p| (reduce |red|) and its starting state; false
   when |p| cannot start one. */
static bool fus_rcx_init(fus_rcx *r, const hlo_instr *p, const hlo_instr *red, fus_state *st) {
  if (!hlo_shape_is_array(&red->shape)) return false;
  *r = (fus_rcx){.red = red};
  r->nrow = fus_nontrivial(&red->shape, r->row);
  int rank = red->operands[0]->shape.rank, nd = red->dims.n;
  r->row_norm = fus_row_norm_enabled();
  for (int i = 0; i < nd; i++) r->row_norm &= hlo_ints_has(red->dims, rank - nd + i);
  *st = fus_is_row(r, &p->shape) ? FUS_ROW : FUS_FULL;
  return *st == FUS_ROW || hlo_same_dims(&p->shape, &red->operands[0]->shape);
}

/* May reduce producer |p| (reduce |red|) join fusion |f| as its epilogue? |f| may hold
   reduces already where every one is a chained row of |red|'s (fus_row_reduce), and the
   walk then reaches them from |p| (fus_epi_walk); no dot, no real transpose. */
static bool fus_epilogue_ok(const hlo_instr *f, const hlo_instr *p, const hlo_instr *red) {
  const hlo_comp *fc = f->calls[0];
  if (!hlo_shape_is_array(&fc->root->shape)) return false;
  fus_rcx r;
  fus_state st;
  if (f->noperands > FUS_MAX_OPERANDS || !fus_rcx_init(&r, p, red, &st)) return false;
  for (ptrdiff_t i = 0; i < arrlen(fc->instrs); i++) {
    const hlo_instr *x = fc->instrs[i];
    if (x->op == HLO_OP_DOT || hlo_transpose_is_real(x) || (x->op == HLO_OP_REDUCE && !fus_row_reduce(&r, x)))
      return false;
  }
  for (int k = 0; k < f->noperands; k++)
    if (f->operands[k] == p && !fus_epi_walk(&r, fc, fc->params[k], st)) return false;
  return true;
}

/* fus_epilogue_ok for the one-op fusion of |u| (not a fusion), without making it: a
   reshape wrapped and then refused would stay a copy kernel of its own (GPT-2's layer
   norm reshaped to [M, P, kc] for a panel-order matmul, hj_linear). */
static bool fus_op_epilogue_ok(const hlo_instr *u, const hlo_instr *p, const hlo_instr *red) {
  fus_rcx r;
  fus_state st;
  if (!hlo_shape_is_array(&u->shape) || !fus_rcx_init(&r, p, red, &st)) return false;
  if (hlo_op_is_elementwise(u)) return true;
  bool row = (u->op == HLO_OP_RESHAPE || u->op == HLO_OP_BROADCAST) && fus_is_row(&r, &u->shape);
  return st == FUS_ROW && (row || (u->op == HLO_OP_BROADCAST && fus_row_broadcast(&r, u)));
}

/* ---- driver ------------------------------------------------------------------------------- */

/* Tries to fuse |p| into all its users; *done when it did (p is then killed in |ux|). */
static hj_status fus_try(hlo_comp *c, hlo_instr *p, fus_st *S, bool *done) {
  hlo_uidx *ux = &S->ux;
  *done = false;
  if (p == c->root || hlo_uidx_dead(ux, p) || !fus_producer_ok(p)) return HJ_OK;
  hlo_instr **us = NULL, **v = NULL;
  int n = hlo_uidx_users(ux, p, &v);
  for (int i = 0; i < n; i++) arrput(us, v[i]);   /* a copy: the loops below edit uses */
  hj_status st = HJ_OK;
  bool ok = n > 0;
  const hlo_instr *red = fus_reduce_of(p);
  if (red) {
    ok = n == 1 && (us[0]->op == HLO_OP_FUSION ||
                    hlo_op_is_elementwise(us[0]) || us[0]->op == HLO_OP_RESHAPE ||
                    us[0]->op == HLO_OP_BROADCAST);
    if (ok && us[0]->op == HLO_OP_FUSION) ok = fus_epilogue_ok(us[0], p, red);
    if (ok && us[0]->op != HLO_OP_FUSION) ok = fus_op_epilogue_ok(us[0], p, red);
    if (ok && us[0]->op != HLO_OP_FUSION) {   /* wrap, then check the one-op fusion */
      hlo_instr *f = hlo_fusion_make(c, us[0], ux);
      if (!f) { st = HJ_ERR_OOM; goto out; }
      us[0] = f;
      ok = fus_epilogue_ok(f, p, red);
    }
  } else {
    for (int i = 0; i < n && ok; i++) ok = fus_consumer_ok(us[i], p);
    ok = ok && fus_profitable(c, p, us, n, S);
  }
  for (int i = 0; i < n && ok; i++) {
    hlo_instr *f = us[i]->op == HLO_OP_FUSION ? us[i] : hlo_fusion_make(c, us[i], ux);
    if (!f) { st = HJ_ERR_OOM; goto out; }
    if ((st = hlo_fusion_absorb(c, f, p, n > 1, ux)) != HJ_OK) goto out;
  }
  if (ok) {
    if (hlo_uidx_count(ux, p) != 0) {
      st = hj__err(c->module->ctx, HJ_ERR_INTERNAL, "fusion: '%s' still used", p->name);
      goto out;
    }
    hlo_uidx_kill(ux, p);   /* dropped from c->instrs at the end of the sweep */
    *done = true;
  }
out:
  arrfree(us);
  return st;
}

/* Sweeps from the root upwards. The users come from a use index (one per computation, kept
   up to date), fused producers are only marked dead, and c->instrs is compacted once per
   sweep: a sweep is linear in the computation (plus the fusions' own sizes). */
static hj_status fus_comp(hlo_comp *c, bool *changed) {
  fus_st S = { 0 };
  hj_status st = hlo_uidx_build(&S.ux, c);
  if (st != HJ_OK) return st;
  for (int round = 0; round < 16 && st == HJ_OK; round++) {
    bool any = false;
    hlo_instr **snap = NULL;
    for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++) arrput(snap, c->instrs[i]);
    for (ptrdiff_t i = arrlen(snap) - 1; i >= 0 && st == HJ_OK; i--) {
      bool done = false;
      st = fus_try(c, snap[i], &S, &done);
      any |= done;
    }
    arrfree(snap);
    hlo_uidx_compact(&S.ux);
    if (!any) break;
    *changed = true;
  }
  hlo_uidx_free(&S.ux);
  free(S.E);
  return st;
}

hj_status hlo_pass_fusion(hlo_pass_ctx *pc, hlo_module *m, bool *changed) {
  return hlo_fusion_run_control_comps(m, fus_comp, changed);
}

/* ---- kernel counting -------------------------------------------------------------------- */

int hlo_count_kernels(const hlo_module *m) {
  const hlo_comp *c = m->entry;
  int n = 0;
  for (ptrdiff_t i = 0; c && i < arrlen(c->instrs); i++) {
    switch (c->instrs[i]->op) {
    case HLO_OP_PARAMETER: case HLO_OP_CONSTANT: case HLO_OP_TUPLE:
    case HLO_OP_GET_TUPLE_ELEMENT: case HLO_OP_BITCAST: case HLO_OP_RESHAPE:
      break;
    default:
      n++;
    }
  }
  return n;
}

#undef FUS_BYTES_PER_NS
#undef FUS_OPS_PER_NS
#undef FUS_LAUNCH_NS
#undef FUS_MAX_OPERANDS
#undef FUS_MAX_INSTRS
