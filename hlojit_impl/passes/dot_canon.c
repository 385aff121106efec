/* dot_canon.c — rewrites every dot (in every computation) into the one form the matmul
   emitter accepts, with transposes and reshapes around it.

   Canonical form (what emitters/matmul.c accepts):
       dot(lhs [B,M,K] or [M,K], rhs [B,K,N]/[K,N] or [B,N,K]/[N,K])
       lhs_contracting = {last}, rhs_contracting = {1} ([B,K,N]), {2} ([B,N,K]),
       {0} ([K,N]) or {1} ([N,K]); batch dims {0} on both sides (rank 3) or none (rank 2).
   The rhs form [.,N,K] is the "transposed rhs": it is kept whenever the operand already
   lies that way, so logits = x @ wte.T needs no physical transpose (the packing of the
   matmul driver reads it transposed).

   Algorithm, per dot (XLA's dimension vocabulary: batch, free, contracting):
     lhs: permute to (batch..., free..., contracting...)  — a transpose unless identity —
          then reshape to [B,M,K] ([M,K] without batch dims);
     rhs: if (batch..., contracting..., free...) is the identity, or neither order is,
          permute to it and reshape to [B,K,N]; else it is (batch..., free..., contracting...)
          already: reshape to [B,N,K];
     dot  -> [B,M,N] ([M,N]); reshape to the original shape (whose logical order is batch,
          lhs free, rhs free: the same row-major order, so the reshape is exact).
   Reshapes that do not change the dims are skipped; a dot already canonical is left alone.
   Contracting dims flatten in the order they are listed, which is the order in which the
   evaluator sums, so the rewritten module gives the same bits there.

   Worked example: lhs f32[2,64,12,3] with lhs_batch={0}, lhs_contracting={3,1};
   rhs f32[3,2,5,64] with rhs_batch={1}, rhs_contracting={0,3}; result f32[2,12,5].
     lhs order (0, 2, 3, 1) -> transpose f32[2,12,3,64] -> reshape f32[2,12,192];
     rhs (1, 0,3, 2) is not the identity, (1, 2, 0,3) neither -> transpose to
       (1,0,3,2) f32[2,3,64,5] -> reshape f32[2,192,5];
     dot f32[2,12,5] (batch {0}, contracting {2} x {1}) -> no final reshape needed.

   Panel-order rhs (hj_linear's HJ_LINEAR_PANELS; emitters/matmul_plan.h): a dot
       dot(lhs [..., P, kc], rhs [P, Q, kc, nr]), no batch dims, lhs_contracting = the last
       two, rhs_contracting = {0, 2}, f32 (the rhs f32 or bf16)
   is the weights (in, out) = (P*kc, Q*nr) cut into kc x nr row-major panels. With
   |panel_nr| the target's micro-kernel width and nr equal to it, its canonical form is lhs
   [M, P, kc] (a reshape of the lhs) and the result [M, Q, nr] (reshaped back), which the
   matmul emitter reads in place; otherwise (another nr, the GPU) the general rewrite above
   makes it a plain dot, rhs transposed to [P, kc, Q, nr] = [K, N]: correct, with a copy.
   The contracting order (P, kc) is the order of k = p*kc + i, so the sums are the plain
   dot's in the evaluator.

   Types: the matmul kernels take f32 x (f32 or bf16) -> f32. A dot of other 16/32-bit float
   types (bf16 x bf16 -> bf16, f16, mixed) first becomes that, as XLA:CPU does: the lhs (and
   an f16 rhs) converted to f32, an f32 dot, the result converted back (f32 accumulation,
   one rounding at the end; the evaluator accumulates in double: within one unit of the
   result type). f64, integer and pred dots stay as they are and run as loop kernels (the
   elemental dot, emitters/elemental_index.c).

   Invariants: every new instruction is placed right before the old dot, so the text order
   stays topological; uses of the dot (and the root) move to its replacement; the old dot
   is removed from the computation. */
#include "passes.h"

typedef struct dcn_side {
  int perm[HLO_MAX_RANK];       /* operand dims in canonical order */
  int rank;
  int64_t dims3[3];             /* the canonical dims (B, rows, cols) */
} dcn_side;

static bool dcn_is_identity(const int *perm, int n) {
  for (int i = 0; i < n; i++)
    if (perm[i] != i) return false;
  return true;
}

/* Free dims of one operand (neither batch nor contracting), in increasing order. */
static int dcn_free_dims(const hlo_shape *s, hlo_ints bat, hlo_ints con, int *out) {
  int n = 0;
  for (int d = 0; d < s->rank; d++) {
    bool used = false;
    for (int i = 0; i < bat.n; i++) used |= bat.v[i] == d;
    for (int i = 0; i < con.n; i++) used |= con.v[i] == d;
    if (!used) out[n++] = d;
  }
  return n;
}

static int64_t dcn_prod(const hlo_shape *s, const int *dims, int n) {
  int64_t p = 1;
  for (int i = 0; i < n; i++) p *= s->dims[dims[i]];
  return p;
}

/* Builds perm = a ++ b ++ c (dim lists of sizes na, nb, nc). */
static void dcn_cat(int *perm, const int *a, int na, const int *b, int nb, const int *c, int nc) {
  int j = 0;
  for (int i = 0; i < na; i++) perm[j++] = a[i];
  for (int i = 0; i < nb; i++) perm[j++] = b[i];
  for (int i = 0; i < nc; i++) perm[j++] = c[i];
}

/* Transpose (unless identity) then reshape (unless the dims already match) of |x| to the
   canonical operand; NULL on OOM. Instructions go to the end of |c|. */
static hlo_instr *dcn_shape_operand(hlo_comp *c, hlo_instr *x, const int *perm, int nb,
                                    const int64_t *dims3) {
  hlo_module *m = c->module;
  int rank = x->shape.rank;
  if (!dcn_is_identity(perm, rank)) {
    int64_t td[HLO_MAX_RANK] = { 0 };
    for (int i = 0; i < rank; i++) td[i] = x->shape.dims[perm[i]];
    hlo_shape ts = hlo_shape_array(x->shape.type, rank, td);
    hlo_instr *t = hlo_instr_new(c, HLO_OP_TRANSPOSE, NULL, &ts, &x, 1);
    if (!t) return NULL;
    int64_t p64[HLO_MAX_RANK];
    for (int i = 0; i < rank; i++) p64[i] = perm[i];
    t->dims = hlo_ints_dup(m, p64, rank);
    x = t;
  }
  int r = nb ? 3 : 2;
  const int64_t *want = nb ? dims3 : dims3 + 1;
  bool same = x->shape.rank == r;
  for (int i = 0; same && i < r; i++) same = x->shape.dims[i] == want[i];
  if (same) return x;
  hlo_shape rs = hlo_shape_array(x->shape.type, r, want);
  return hlo_instr_new(c, HLO_OP_RESHAPE, NULL, &rs, &x, 1);
}

static hlo_ints dcn_ints1(hlo_module *m, int64_t v) { return hlo_ints_dup(m, &v, 1); }

/* True when |d| already has the canonical form (nothing to do). */
static bool dcn_is_canonical(const hlo_instr *d) {
  const hlo_dot_dims *dd = &d->dot;
  int lr = d->operands[0]->shape.rank, rr = d->operands[1]->shape.rank;
  if (dd->lhs_contract.n != 1 || dd->rhs_contract.n != 1) return false;
  if (dd->lhs_batch.n == 1) {
    if (lr != 3 || rr != 3 || dd->lhs_batch.v[0] != 0 || dd->rhs_batch.v[0] != 0) return false;
    return dd->lhs_contract.v[0] == 2 && (dd->rhs_contract.v[0] == 1 || dd->rhs_contract.v[0] == 2);
  }
  if (dd->lhs_batch.n != 0 || lr != 2 || rr != 2) return false;
  return dd->lhs_contract.v[0] == 1 && (dd->rhs_contract.v[0] == 0 || dd->rhs_contract.v[0] == 1);
}

/* Moves the instructions appended to |c| since |mark| to the position of |old| and removes
   |old|; uses of |old| (and the root) become |rep|. */
static void dcn_splice(hlo_comp *c, ptrdiff_t mark, hlo_instr *old, hlo_instr *rep) {
  ptrdiff_t n = arrlen(c->instrs), nnew = n - mark, pos = -1;
  for (ptrdiff_t i = 0; i < mark; i++)
    if (c->instrs[i] == old) pos = i;
  hlo_instr **fresh = NULL;
  arrsetlen(fresh, nnew);
  memcpy(fresh, c->instrs + mark, sizeof *fresh * (size_t)nnew);
  arrsetlen(c->instrs, mark);
  /* replace old at pos by fresh[0..nnew) */
  arrdel(c->instrs, pos);
  arrinsn(c->instrs, pos, nnew);
  memcpy(c->instrs + pos, fresh, sizeof *fresh * (size_t)nnew);
  arrfree(fresh);
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++) {
    hlo_instr *u = c->instrs[i];
    if (u == rep) continue;
    for (int k = 0; k < u->noperands; k++)
      if (u->operands[k] == old) u->operands[k] = rep;
  }
  if (c->root == old) {
    c->root = rep;
    rep->is_root = true;
    old->is_root = false;
  }
}

/* The panel-order dot (see top), f32, or f32 x bf16 -> f32 (what the emitter reads in
   place), whose nr is |panel_nr|; *exact: already [M,P,kc] x [P,Q,kc,nr]. */
static bool dcn_is_panels(const hlo_instr *d, int panel_nr, bool *exact) {
  const hlo_dot_dims *dd = &d->dot;
  const hlo_shape *ls = &d->operands[0]->shape, *rs = &d->operands[1]->shape;
  int lr = ls->rank;
  *exact = false;
  if (panel_nr <= 0 || ls->type != HLO_F32 || (rs->type != HLO_F32 && rs->type != HLO_BF16) ||
      d->shape.type != HLO_F32 ||
      dd->lhs_batch.n || dd->rhs_batch.n || rs->rank != 4 || lr < 2 ||
      dd->lhs_contract.n != 2 || dd->rhs_contract.n != 2 || dd->rhs_contract.v[0] != 0 ||
      dd->rhs_contract.v[1] != 2 || dd->lhs_contract.v[0] != lr - 2 || dd->lhs_contract.v[1] != lr - 1 ||
      rs->dims[3] != panel_nr || ls->dims[lr - 2] != rs->dims[0] || ls->dims[lr - 1] != rs->dims[2])
    return false;
  *exact = lr == 3;
  return true;
}

/* A panel-order dot with lhs [..., P, kc]: lhs reshaped to [M, P, kc], the result
   [M, Q, nr] reshaped back to the dot's shape. */
static hj_status dcn_rewrite_panels(hlo_comp *c, hlo_instr *d) {
  hlo_module *m = c->module;
  hlo_instr *lhs = d->operands[0], *rhs = d->operands[1];
  const hlo_shape *ls = &lhs->shape, *rs = &rhs->shape;
  int64_t M = 1;
  for (int i = 0; i < ls->rank - 2; i++) M *= ls->dims[i];
  ptrdiff_t mark = arrlen(c->instrs);
  int64_t l3[3] = { M, rs->dims[0], rs->dims[2] }, o3[3] = { M, rs->dims[1], rs->dims[3] };
  hlo_shape l3s = hlo_shape_array(ls->type, 3, l3), os = hlo_shape_array(d->shape.type, 3, o3);
  hlo_instr *l2 = hlo_instr_new(c, HLO_OP_RESHAPE, NULL, &l3s, &lhs, 1);
  hlo_instr *ops[2] = { l2, rhs };
  hlo_instr *nd = l2 ? hlo_instr_new(c, HLO_OP_DOT, NULL, &os, ops, 2) : NULL;
  if (!nd) return HJ_ERR_OOM;
  int64_t lc[2] = { 1, 2 }, rc[2] = { 0, 2 };
  nd->dot.lhs_contract = hlo_ints_dup(m, lc, 2);
  nd->dot.rhs_contract = hlo_ints_dup(m, rc, 2);
  hlo_instr *rep = hlo_instr_new(c, HLO_OP_RESHAPE, NULL, &d->shape, &nd, 1);
  if (!rep || !nd->dot.lhs_contract.v || !nd->dot.rhs_contract.v) return HJ_ERR_OOM;
  dcn_splice(c, mark, d, rep);
  return HJ_OK;
}

static hj_status dcn_rewrite(hlo_comp *c, hlo_instr *d) {
  hlo_module *m = c->module;
  const hlo_dot_dims *dd = &d->dot;
  hlo_instr *lhs = d->operands[0], *rhs = d->operands[1];
  const hlo_shape *ls = &lhs->shape, *rs = &rhs->shape;
  int nb = dd->lhs_batch.n, nc = dd->lhs_contract.n;
  int lb[HLO_MAX_RANK], lc[HLO_MAX_RANK], rb[HLO_MAX_RANK], rc[HLO_MAX_RANK];
  int lf[HLO_MAX_RANK], rf[HLO_MAX_RANK];
  for (int i = 0; i < nb; i++) lb[i] = (int)dd->lhs_batch.v[i], rb[i] = (int)dd->rhs_batch.v[i];
  for (int i = 0; i < nc; i++) lc[i] = (int)dd->lhs_contract.v[i], rc[i] = (int)dd->rhs_contract.v[i];
  int nlf = dcn_free_dims(ls, dd->lhs_batch, dd->lhs_contract, lf);
  int nrf = dcn_free_dims(rs, dd->rhs_batch, dd->rhs_contract, rf);
  int64_t B = dcn_prod(ls, lb, nb), M = dcn_prod(ls, lf, nlf);
  int64_t K = dcn_prod(ls, lc, nc), N = dcn_prod(rs, rf, nrf);

  int lperm[HLO_MAX_RANK], rperm_n[HLO_MAX_RANK], rperm_t[HLO_MAX_RANK];
  dcn_cat(lperm, lb, nb, lf, nlf, lc, nc);
  dcn_cat(rperm_n, rb, nb, rc, nc, rf, nrf);
  dcn_cat(rperm_t, rb, nb, rf, nrf, rc, nc);
  /* The transposed rhs only when it costs no physical transpose. */
  bool rt = !dcn_is_identity(rperm_n, rs->rank) && dcn_is_identity(rperm_t, rs->rank);
  int64_t l3[3] = { B, M, K }, rn3[3] = { B, K, N }, rt3[3] = { B, N, K };

  ptrdiff_t mark = arrlen(c->instrs);
  hlo_instr *l2 = dcn_shape_operand(c, lhs, lperm, nb, l3);
  hlo_instr *r2 = l2 ? dcn_shape_operand(c, rhs, rt ? rperm_t : rperm_n, nb, rt ? rt3 : rn3) : NULL;
  if (!r2) return HJ_ERR_OOM;
  int64_t o3[3] = { B, M, N };
  hlo_shape os = hlo_shape_array(d->shape.type, nb ? 3 : 2, nb ? o3 : o3 + 1);
  hlo_instr *ops[2] = { l2, r2 };
  hlo_instr *nd = hlo_instr_new(c, HLO_OP_DOT, NULL, &os, ops, 2);
  if (!nd) return HJ_ERR_OOM;
  int r = nb ? 3 : 2;
  nd->dot.lhs_contract = dcn_ints1(m, r - 1);
  nd->dot.rhs_contract = dcn_ints1(m, rt ? r - 1 : r - 2);
  if (nb) {
    nd->dot.lhs_batch = dcn_ints1(m, 0);
    nd->dot.rhs_batch = dcn_ints1(m, 0);
  }
  hlo_instr *rep = nd;
  if (!hlo_shape_compatible(&os, &d->shape) || !hlo_shape_layout_is_default(&d->shape)) {
    rep = hlo_instr_new(c, HLO_OP_RESHAPE, NULL, &d->shape, &nd, 1);
    if (!rep) return HJ_ERR_OOM;
  }
  dcn_splice(c, mark, d, rep);
  return HJ_OK;
}

static bool dcn_f32ish(hlo_type t) { return t == HLO_F32 || t == HLO_BF16 || t == HLO_F16; }

/* |x| converted to |t| (x itself when it is |t| already), placed before |before|. */
static hlo_instr *dcn_convert(hlo_comp *c, const hlo_instr *before, hlo_instr *x, hlo_type t) {
  if (x->shape.type == t) return x;
  hlo_shape s = hlo_shape_array(t, x->shape.rank, x->shape.dims);
  return hlo_instr_new_before(c, before, HLO_OP_CONVERT, NULL, &s, &x, 1);
}

/* A 16/32-bit float dot the matmul kernels do not take -> f32 x (f32|bf16) -> f32 and a
   convert of the result; NULL: left alone (or out of memory: *st). */
static hlo_instr *dcn_widen(hlo_comp *c, hlo_instr *d, hj_status *st) {
  hlo_type lt = d->operands[0]->shape.type, rt = d->operands[1]->shape.type, ot = d->shape.type;
  if (!dcn_f32ish(lt) || !dcn_f32ish(rt) || !dcn_f32ish(ot) ||
      (lt == HLO_F32 && rt != HLO_F16 && ot == HLO_F32))
    return NULL;
  hlo_instr *l = dcn_convert(c, d, d->operands[0], HLO_F32);
  hlo_instr *r = rt == HLO_F16 ? dcn_convert(c, d, d->operands[1], HLO_F32) : d->operands[1];
  hlo_shape s = d->shape;
  s.type = HLO_F32;
  hlo_instr *ops[2] = { l, r };
  hlo_instr *w = l && r ? hlo_instr_new_before(c, d, HLO_OP_DOT, NULL, &s, ops, 2) : NULL;
  if (w) {
    w->dot = d->dot;
    if (!hlo_instr_dup_lists(c->module, w)) w = NULL;
  }
  hlo_instr *out = w ? dcn_convert(c, d, w, ot) : NULL;
  if (!out) { *st = HJ_ERR_OOM; return NULL; }
  hlo_replace_all_uses(c, d, out);
  if (c->root == d) hlo_comp_set_root(c, out);
  hlo_remove_instr(c, d);
  return w;
}

hj_status hlo_pass_dot_canon(hlo_pass_ctx *pc, hlo_module *m, bool *changed) {
  int panel_nr = pc ? pc->matmul_panel_nr : 0;
  if (changed) *changed = false;
  for (ptrdiff_t ci = 0; ci < arrlen(m->comps); ci++) {
    hlo_comp *c = m->comps[ci];
    hlo_instr **wide = NULL;
    for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++)
      if (c->instrs[i]->op == HLO_OP_DOT && c->instrs[i]->noperands == 2) arrput(wide, c->instrs[i]);
    for (ptrdiff_t i = 0; i < arrlen(wide); i++) {
      hj_status st = HJ_OK;
      const char *nm = wide[i]->name;
      if (dcn_widen(c, wide[i], &st) && changed) *changed = true;
      if (st) {
        arrfree(wide);
        return hj__err(m->ctx, st, "pass dot_canonicalize: out of memory widening '%s'", nm);
      }
    }
    arrfree(wide);
    /* Snapshot: the rewrite edits c->instrs. */
    hlo_instr **dots = NULL;
    bool exact;
    for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++) {
      hlo_instr *d = c->instrs[i];
      if (d->op == HLO_OP_DOT && d->noperands == 2 && !dcn_is_canonical(d) &&
          !(dcn_is_panels(d, panel_nr, &exact) && exact))
        arrput(dots, d);
    }
    for (ptrdiff_t i = 0; i < arrlen(dots); i++) {
      hj_status st = dcn_is_panels(dots[i], panel_nr, &exact) ? dcn_rewrite_panels(c, dots[i])
                                                              : dcn_rewrite(c, dots[i]);
      if (st) {
        const char *nm = dots[i]->name;
        arrfree(dots);
        return hj__err(m->ctx, st, "pass dot_canonicalize: out of memory rewriting '%s'", nm);
      }
      if (changed) *changed = true;
    }
    arrfree(dots);
  }
  return HJ_OK;
}
