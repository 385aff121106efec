/* passes/epilogue_fusion.c — a dot and the elementwise ops after it become one kOutput
   fusion: the matmul emitter computes the dot tile by tile and evaluates the epilogue
   (bias, scale, GELU, residual add) on each result element before storing it, so the dot's
   result never goes through memory.

   Which computations: the entry and the while/conditional computations reached from it.
   Rule: a dot D (a plain dot, or a fusion whose hero is a dot and whose root is an array)
   with exactly one user U, where U is an elementwise op or a loop fusion (no hero, array
   root) in which D's value reaches the root only through elementwise ops on D's dims
   (reshapes that add or drop size-1 dims included, and reshapes that split the rows of a
   [M, N] dot, keeping N last: a convolution's patch-matrix dot seen as [B, H, W, O],
   hlo_dot_epilogue_dims). Anything else U computes (a
   broadcast bias, the residual operand, iota masks) may feed those elementwise ops.
   U is wrapped into a fusion if needed, D is absorbed into it (fusion_util.c), and the
   fusion becomes kOutput. Repeated until nothing changes (a kOutput fusion may take the
   next epilogue too). Runs after fusion.c, which has already gathered each epilogue chain
   into one loop fusion.

   A dot whose rhs is in panel order (ir.h, hlo_dot_is_panels) has the result [M,Q,nr],
   which is C [M,N]: its epilogue (reached through the reshape to C, which fusion.c puts
   into the loop fusion) is checked against C's dims.
   First, transposes feeding a dot fold into its dimension numbers (below).

   Worked example (GPT-2 MLP), x: f32[64,768], w: f32[768,3072], b: f32[3072]:
       d = f32[64,3072] dot(x, w)
       G = f32[64,3072] fusion(d, b), kind=kLoop   // add(p0, broadcast(p1)), then the GELU
   D = d has one user G; d's parameter reaches G's root through add, multiply, tanh, ...
   all on [64,3072]: G absorbs d and becomes
       G = f32[64,3072] fusion(x, w, b), kind=kOutput   // dot hero + bias + GELU epilogue */
#include "passes.h"

/* Every use of |x| inside |fc| is an elementwise op or size-1 reshape on D's dims, up to
   the root. */
static bool epi_walk(const hlo_comp *fc, const hlo_instr *x, const hlo_shape *ds) {
  for (ptrdiff_t i = 0; i < arrlen(fc->instrs); i++) {
    const hlo_instr *u = fc->instrs[i];
    bool uses = false;
    for (int k = 0; k < u->noperands; k++) uses |= u->operands[k] == x;
    if (!uses) continue;
    bool ok = (hlo_op_is_elementwise(u) || u->op == HLO_OP_RESHAPE ||
               (u->op == HLO_OP_BITCAST && hlo_shape_layout_is_default(&u->shape))) &&
              hlo_dot_epilogue_dims(&u->shape, ds);
    if (!ok || !epi_walk(fc, u, ds)) return false;
  }
  return true;
}

/* The dot of |d| when it is a dot producer, else NULL. */
static const hlo_instr *epi_dot_of(const hlo_instr *d) {
  if (d->op == HLO_OP_DOT) return hlo_shape_is_array(&d->shape) ? d : NULL;
  if (d->op != HLO_OP_FUSION || d->ncalls != 1 || d->fusion_kind == HLO_FUSION_CUSTOM)
    return NULL;
  const hlo_comp *fc = d->calls[0];
  const hlo_instr *h = hlo_fusion_hero(fc);
  return h && h->op == HLO_OP_DOT && hlo_shape_is_array(&fc->root->shape) ? h : NULL;
}

/* The epilogue's result keeps the dot's element type: the matmul emitter stores its tiles
   in that type (a compare or convert after the dot stays a loop fusion of its own; found
   by test_fusion_fuzz.c, seed 25: dot -> compare made a pred kOutput fusion that the
   emitter rejects, so it ran on the evaluator). */
static bool epi_consumer_ok(const hlo_instr *u, const hlo_instr *d) {
  hlo_shape ds = d->shape;   /* a panel-order dot's epilogue sees C [M,N] (ir.h) */
  const hlo_instr *h = epi_dot_of(d);
  if (h) (void)hlo_dot_is_panels(h, &ds);
  if (u->op != HLO_OP_FUSION)
    return hlo_op_is_elementwise(u) && u->shape.type == d->shape.type &&
           hlo_dot_epilogue_dims(&u->shape, &ds);
  if (u->ncalls != 1 || u->fusion_kind == HLO_FUSION_CUSTOM || u->noperands > 60) return false;
  const hlo_comp *fc = u->calls[0];
  if (hlo_fusion_hero(fc) || !hlo_shape_is_array(&fc->root->shape)) return false;
  if (fc->root->shape.type != epi_dot_of(d)->shape.type) return false;
  if (!hlo_dot_epilogue_dims(&fc->root->shape, &ds)) return false;
  for (int k = 0; k < u->noperands; k++)
    if (u->operands[k] == d && !epi_walk(fc, fc->params[k], &ds)) return false;
  return true;
}

/* ---- transposed operands ------------------------------------------------------------------
   dot(x, transpose(w)) reads w through the transpose's permutation instead: the matmul
   packs its operands anyway, so the transposed copy (for x @ wte.T in GPT-2: the whole
   embedding table) is never made. Exact: each contracting dim keeps its place in the
   list, so the evaluator sums in the same order. Only when the free (non-batch,
   non-contracting) dims keep their relative order, since they order the result, and
   never when it would turn a dot in the matmul emitter's canonical form (dot_canon.c,
   which the CPU backend runs first) into one it rejects: dot_canon's own transposes
   around f32[5,3,2] x f32[3,5,2] batch dot would fold back into batch={1}/{0} and the
   dot would fall back to the evaluator (found by test_fusion_fuzz.c, seed 11). */

/* The canonical form of dot_canon.c / emitters/matmul.c (the panel-order one included:
   folding a transpose into it would make it another dot). */
static bool epi_canonical(const hlo_dot_dims *dd, int lr, int rr) {
  if (lr == 3 && rr == 4 && !dd->lhs_batch.n && dd->lhs_contract.n == 2 && dd->rhs_contract.n == 2 &&
      dd->lhs_contract.v[0] == 1 && dd->lhs_contract.v[1] == 2 && dd->rhs_contract.v[0] == 0 &&
      dd->rhs_contract.v[1] == 2)
    return true;
  if (dd->lhs_contract.n != 1 || dd->rhs_contract.n != 1) return false;
  if (dd->lhs_batch.n == 1)
    return lr == 3 && rr == 3 && dd->rhs_batch.n == 1 && dd->lhs_batch.v[0] == 0 &&
           dd->rhs_batch.v[0] == 0 && dd->lhs_contract.v[0] == 2 &&
           (dd->rhs_contract.v[0] == 1 || dd->rhs_contract.v[0] == 2);
  return dd->lhs_batch.n == 0 && dd->rhs_batch.n == 0 && lr == 2 && rr == 2 &&
         dd->lhs_contract.v[0] == 1 && (dd->rhs_contract.v[0] == 0 || dd->rhs_contract.v[0] == 1);
}

static bool epi_fold_side(hlo_module *m, const hlo_instr *t, hlo_ints *bat, hlo_ints *con) {
  int rank = t->shape.rank;
  const int64_t *perm = t->dims.v;   /* transposed dim i = operand dim perm[i] */
  int64_t last = -1;
  for (int i = 0; i < rank; i++) {
    if (hlo_ints_has(*bat, i) || hlo_ints_has(*con, i)) continue;
    if (perm[i] <= last) return false;
    last = perm[i];
  }
  hlo_ints nb = hlo_ints_dup(m, bat->v, bat->n), nc = hlo_ints_dup(m, con->v, con->n);
  if ((bat->n && !nb.v) || (con->n && !nc.v)) return false;
  for (int i = 0; i < nb.n; i++) nb.v[i] = perm[nb.v[i]];
  for (int i = 0; i < nc.n; i++) nc.v[i] = perm[nc.v[i]];
  *bat = nb;
  *con = nc;
  return true;
}

static bool epi_fold_transposes(hlo_comp *c) {
  bool any = false;
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++) {
    hlo_instr *d = c->instrs[i];
    if (d->op != HLO_OP_DOT) continue;
    for (int side = 0; side < 2; side++) {
      hlo_instr *t = d->operands[side];
      if (t->op != HLO_OP_TRANSPOSE || t->dims.n != t->shape.rank) continue;
      hlo_dot_dims nd = d->dot;
      hlo_ints *bat = side ? &nd.rhs_batch : &nd.lhs_batch;
      hlo_ints *con = side ? &nd.rhs_contract : &nd.lhs_contract;
      if (!epi_fold_side(c->module, t, bat, con)) continue;
      int lr = d->operands[0]->shape.rank, rr = d->operands[1]->shape.rank;
      if (epi_canonical(&d->dot, lr, rr) && !epi_canonical(&nd, lr, rr)) continue;
      d->dot = nd;
      d->operands[side] = t->operands[0];
      any = true;
    }
  }
  return any;
}

static hj_status epi_comp(hlo_comp *c, bool *changed) {
  if (epi_fold_transposes(c)) {
    *changed = true;
    hj_status st = hlo_comp_dce(c, NULL);
    if (st != HJ_OK) return st;
  }
  /* One forward sweep takes every chain: the fusion that absorbed a dot sits in its user's
     slot, later in the text order, where the sweep meets it and may give it the next
     epilogue. Users come from a use index; absorbed dots are compacted away at the end. */
  hlo_uidx ux;
  hj_status st = hlo_uidx_build(&ux, c);
  for (int round = 0; round < 64 && st == HJ_OK; round++) {
    bool any = false;
    for (ptrdiff_t i = 0; i < arrlen(c->instrs) && st == HJ_OK; i++) {
      hlo_instr *d = c->instrs[i];
      if (d == c->root || hlo_uidx_dead(&ux, d) || !epi_dot_of(d)) continue;
      hlo_instr **us = NULL;
      int n = hlo_uidx_users(&ux, d, &us);
      hlo_instr *u = n == 1 ? us[0] : NULL;
      if (!u || !epi_consumer_ok(u, d)) continue;
      hlo_instr *f = u->op == HLO_OP_FUSION ? u : hlo_fusion_make(c, u, &ux);
      if (!f) {
        st = HJ_ERR_OOM;
        break;
      }
      if ((st = hlo_fusion_absorb(c, f, d, false, &ux)) != HJ_OK) break;
      hlo_uidx_kill(&ux, d);
      any = true;
    }
    hlo_uidx_compact(&ux);
    if (!any) break;
    *changed = true;
  }
  hlo_uidx_free(&ux);
  return st;
}

hj_status hlo_pass_matmul_epilogue_fusion(hlo_pass_ctx *pc, hlo_module *m, bool *changed) {
  return hlo_fusion_run_control_comps(m, epi_comp, changed);
}
