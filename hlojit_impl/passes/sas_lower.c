/* passes/sas_lower.c — select-and-scatter (max-pool's gradient) as two kernels that do no
   redundant work, instead of the elemental form (emitters/elemental_window.c) that finds the
   pick of every window containing an element again for each of its elements (9 select
   calls per window per element for a 3x3 pool: 10x XLA's time at ResNet sizes).

   select-and-scatter(X, S, init), window W (size, stride, pads; T taps), select, scatter:
     lin   = reshape(iota(s32[N]))                    each element's row-major position
     pick  = reduce-window((X, lin), (init, -1)) over W with
               f((cv, ci), (xv, xi)) = ci < 0 || !select(cv, xv) ? (xv, xi) : (cv, ci)
             get-tuple-element 1: the position each window selects (XLA's rule: the valid
             taps in row-major order, a tap replacing the pick when select(pick, tap) is
             false), -1 for a window over padding only
     out   = broadcast(init); then for each tap t = T-1 down to 0 (so that, for a given
             element, the windows that contain it come in row-major order, as XLA
             scatters them):
               S_t = pad(S), P_t = pad(pick, -1) with interior stride-1 and low t - pad_lo
               per dim: element x of S_t is the source of the window whose tap t is x
               out = select(P_t == lin, map(out, S_t) {scatter}, out)
   The reduce-window is one elemental kernel over the windows, the rest one loop fusion over
   the elements (2T pads and T selects, each O(1)). Applies when N < 2^31 and T <= 64
   (ResNet's 3x3 pools: T = 9); the rest stay elemental. The select computation is cloned
   into f, so the evaluator's and the kernels' results are the same bits. */
#include "passes.h"

#define SAS_MAX_TAPS 64

typedef struct sas {
  hlo_comp *c;
  const hlo_instr *before;
  hj_status st;
} sas;

static hlo_instr *sas_new(sas *L, hlo_comp *c, hlo_opcode op, const hlo_shape *s, hlo_instr **ops, int n) {
  if (L->st) return NULL;
  hlo_instr *i = hlo_instr_new_before(c, c == L->c ? L->before : NULL, op, NULL, s, ops, n);
  if (!i) L->st = HJ_ERR_OOM;
  return i;
}

static hlo_instr *sas_const(sas *L, hlo_comp *c, hlo_type t, int64_t v) {
  if (L->st) return NULL;
  hlo_shape s = hlo_shape_scalar(t);
  hlo_literal *l = hlo_literal_new(c->module->ctx, &s);
  if (!l) { L->st = HJ_ERR_OOM; return NULL; }
  hlo_store_u64(t, l->data, 0, (uint64_t)v);
  hlo_instr *k = hlo_constant_new_before(c, c == L->c ? L->before : NULL, l);
  hlo_literal_free(l);
  if (!k) L->st = HJ_ERR_OOM;
  return k;
}

static hlo_instr *sas_param(sas *L, hlo_comp *c, hlo_type t, int i) {
  hlo_shape s = hlo_shape_scalar(t);
  hlo_instr *p = sas_new(L, c, HLO_OP_PARAMETER, &s, NULL, 0);
  if (p) {
    p->index = i;
    arrput(c->params, p);
  }
  return p;
}

static hlo_instr *sas_cmp(sas *L, hlo_comp *c, hlo_instr *a, hlo_instr *b, hlo_cmp_dir dir) {
  hlo_shape s = a ? a->shape : hlo_shape_scalar(HLO_PRED);
  s.type = HLO_PRED;
  hlo_instr *ops[2] = { a, b };
  hlo_instr *r = a && b ? sas_new(L, c, HLO_OP_COMPARE, &s, ops, 2) : NULL;
  if (r) r->cmp_dir = dir;
  return r;
}

static hlo_instr *sas_select(sas *L, hlo_comp *c, hlo_instr *p, hlo_instr *a, hlo_instr *b) {
  hlo_instr *ops[3] = { p, a, b };
  return p && a && b ? sas_new(L, c, HLO_OP_SELECT, &a->shape, ops, 3) : NULL;
}

/* f((cv, ci), (xv, xi)) with select's body cloned in. */
static hlo_comp *sas_pick_comp(sas *L, const hlo_instr *ins, hlo_type t) {
  hlo_module *m = L->c->module;
  char name[64];
  snprintf(name, sizeof name, "sas_pick.%d", m->next_id++);
  hlo_comp *f = hlo_comp_new(m, name);
  if (!f) { L->st = HJ_ERR_OOM; return NULL; }
  hlo_module_insert_comp_before(m, f, L->c);   /* defined before its user, as printed text wants */
  hlo_instr *cv = sas_param(L, f, t, 0), *ci = sas_param(L, f, HLO_S32, 1);
  hlo_instr *xv = sas_param(L, f, t, 2), *xi = sas_param(L, f, HLO_S32, 3);
  const hlo_comp *sel = ins->calls[0];
  hlo_instr **map = calloc((size_t)arrlen(sel->instrs) + 1, sizeof *map);
  if (!map) { L->st = HJ_ERR_OOM; return NULL; }
  hlo_instr *keep = NULL;
  for (ptrdiff_t i = 0; i < arrlen(sel->instrs) && !L->st; i++) {
    const hlo_instr *y = sel->instrs[i];
    hlo_instr *ops[64];
    if (y->op == HLO_OP_PARAMETER) {
      map[i] = y->index == 0 ? cv : xv;
    } else if (y->noperands <= 64) {
      for (int k = 0; k < y->noperands; k++) {
        ptrdiff_t j = 0;
        while (j < i && sel->instrs[j] != y->operands[k]) j++;
        ops[k] = map[j];
      }
      if (!(map[i] = hlo_instr_clone_into(f, y, NULL, ops, y->calls))) L->st = HJ_ERR_OOM;
    } else {
      L->st = HJ_ERR_UNSUPPORTED;
    }
    if (y == sel->root) keep = map[i];
  }
  free(map);
  hlo_instr *none = sas_cmp(L, f, ci, sas_const(L, f, HLO_S32, 0), HLO_CMP_LT);
  hlo_shape ps = hlo_shape_scalar(HLO_PRED);
  hlo_instr *nk = keep ? sas_new(L, f, HLO_OP_NOT, &ps, &keep, 1) : NULL;
  hlo_instr *two[2] = { none, nk };
  hlo_instr *take = none && nk ? sas_new(L, f, HLO_OP_OR, &ps, two, 2) : NULL;
  hlo_instr *res[2] = { sas_select(L, f, take, xv, cv), sas_select(L, f, take, xi, ci) };
  hlo_shape el[2] = { hlo_shape_scalar(t), hlo_shape_scalar(HLO_S32) };
  hlo_shape ts = { .type = HLO_TUPLE, .ntuple = 2, .tuple = el };
  hlo_instr *root = res[0] && res[1] ? sas_new(L, f, HLO_OP_TUPLE, &ts, res, 2) : NULL;
  if (root) hlo_comp_set_root(f, root);
  return L->st ? NULL : f;
}

static int64_t sas_at(hlo_ints v, int i, int64_t dflt) { return i < v.n ? v.v[i] : dflt; }

static bool sas_ok(const hlo_instr *ins, int64_t *T) {
  const hlo_shape *xs = &ins->operands[0]->shape, *ss = &ins->operands[1]->shape;
  const hlo_window *w = &ins->window;
  *T = 1;
  if (ins->ncalls != 2 || w->size.n != xs->rank || !hlo_shape_layout_is_default(&ins->shape) ||
      hlo_shape_numel(xs) >= ((int64_t)1 << 31) || hlo_shape_numel(ss) == 0 || hlo_shape_numel(xs) == 0 ||
      !ins->calls[0]->root || arrlen(ins->calls[0]->params) != 2)
    return false;
  for (int d = 0; d < xs->rank; d++) {
    *T *= w->size.v[d];
    if (sas_at(w->base_dilation, d, 1) != 1 || sas_at(w->window_dilation, d, 1) != 1 || *T > SAS_MAX_TAPS)
      return false;
  }
  return true;
}

static hj_status sas_rewrite(hlo_comp *c, hlo_instr *ins) {
  int64_t T;
  if (!sas_ok(ins, &T)) return HJ_OK;
  sas L = { c, ins, HJ_OK };
  hlo_instr *X = ins->operands[0], *S = ins->operands[1], *init = ins->operands[2];
  const hlo_shape *xs = &X->shape, *ss = &S->shape;
  const hlo_window *w = &ins->window;
  hlo_type t = xs->type;
  int n = xs->rank;
  int64_t N = hlo_shape_numel(xs);
  hlo_shape is = hlo_shape_array(HLO_S32, 1, &N), ls = hlo_shape_array(HLO_S32, n, xs->dims);
  hlo_instr *io = sas_new(&L, c, HLO_OP_IOTA, &is, NULL, 0);
  hlo_instr *lin = io ? sas_new(&L, c, HLO_OP_RESHAPE, &ls, &io, 1) : NULL;
  hlo_comp *f = sas_pick_comp(&L, ins, t);
  hlo_instr *m1 = sas_const(&L, c, HLO_S32, -1);
  hlo_shape el[2] = { hlo_shape_array(t, n, ss->dims), hlo_shape_array(HLO_S32, n, ss->dims) };
  hlo_shape rs = { .type = HLO_TUPLE, .ntuple = 2, .tuple = el };
  hlo_instr *rops[4] = { X, lin, init, m1 };
  hlo_instr *rw = lin && f && m1 ? sas_new(&L, c, HLO_OP_REDUCE_WINDOW, &rs, rops, 4) : NULL;
  if (rw) {
    rw->window = w[0];
    if (!hlo_instr_dup_lists(c->module, rw)) L.st = HJ_ERR_OOM;
    hlo_instr_set_calls(rw, &f, 1);
  }
  hlo_instr *pick = rw ? sas_new(&L, c, HLO_OP_GET_TUPLE_ELEMENT, &el[1], &rw, 1) : NULL;
  if (pick) pick->index = 1;
  hlo_shape os = hlo_shape_array(t, n, xs->dims);
  hlo_instr *acc = sas_new(&L, c, HLO_OP_BROADCAST, &os, &init, 1);
  int64_t tap[HLO_MAX_RANK];
  for (int64_t tl = T - 1; tl >= 0 && !L.st; tl--) {
    int64_t r = tl, lo[HLO_MAX_RANK], hi[HLO_MAX_RANK], in[HLO_MAX_RANK];
    for (int d = n - 1; d >= 0; d--) tap[d] = r % w->size.v[d], r /= w->size.v[d];
    for (int d = 0; d < n; d++) {
      int64_t st = sas_at(w->stride, d, 1);
      in[d] = st - 1;
      lo[d] = tap[d] - sas_at(w->pad_lo, d, 0);
      hi[d] = xs->dims[d] - (lo[d] + (ss->dims[d] - 1) * st + 1);
    }
    hlo_instr *pads[2] = { NULL, NULL }, *src[2] = { S, pick }, *pv[2] = { init, m1 };
    for (int k = 0; k < 2; k++) {
      hlo_shape ps = hlo_shape_array(src[k] ? src[k]->shape.type : t, n, xs->dims);
      hlo_instr *ops[2] = { src[k], pv[k] };
      pads[k] = src[k] ? sas_new(&L, c, HLO_OP_PAD, &ps, ops, 2) : NULL;
      if (pads[k]) {
        pads[k]->pad_lo = hlo_ints_dup(c->module, lo, n);
        pads[k]->pad_hi = hlo_ints_dup(c->module, hi, n);
        pads[k]->pad_interior = hlo_ints_dup(c->module, in, n);
        if (!pads[k]->pad_lo.v || !pads[k]->pad_hi.v || !pads[k]->pad_interior.v) L.st = HJ_ERR_OOM;
      }
    }
    hlo_instr *mask = sas_cmp(&L, c, pads[1], lin, HLO_CMP_EQ);
    hlo_instr *mops[2] = { acc, pads[0] };
    hlo_instr *upd = acc && pads[0] ? sas_new(&L, c, HLO_OP_MAP, &os, mops, 2) : NULL;
    if (upd) {
      int64_t dims[HLO_MAX_RANK];
      for (int d = 0; d < n; d++) dims[d] = d;
      upd->dims = hlo_ints_dup(c->module, dims, n);
      hlo_instr_set_calls(upd, &ins->calls[1], 1);
    }
    acc = sas_select(&L, c, mask, upd, acc);
  }
  if (L.st || !acc) return L.st ? L.st : HJ_ERR_OOM;
  hlo_replace_all_uses(c, ins, acc);
  hlo_remove_instr(c, ins);
  return HJ_OK;
}

hj_status hlo_pass_sas_lower(hlo_pass_ctx *pc, hlo_module *m, bool *changed) {
  if (changed) *changed = false;
  ptrdiff_t ncomps = arrlen(m->comps);   /* the pick computations added are not visited */
  for (ptrdiff_t ci = 0; ci < ncomps; ci++) {
    hlo_comp *c = m->comps[ci];
    hlo_instr **todo = NULL;
    int64_t T;
    for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++)
      if (c->instrs[i]->op == HLO_OP_SELECT_AND_SCATTER && sas_ok(c->instrs[i], &T)) arrput(todo, c->instrs[i]);
    for (ptrdiff_t i = 0; i < arrlen(todo); i++) {
      const char *nm = todo[i]->name;
      hj_status st = sas_rewrite(c, todo[i]);
      if (st) {
        arrfree(todo);
        return hj__err(m->ctx, st, "pass select-and-scatter-lower: %s rewriting '%s'",
                       st == HJ_ERR_OOM ? "out of memory" : "an unsupported select computation", nm);
      }
      if (changed) *changed = true;
    }
    arrfree(todo);
  }
  return HJ_OK;
}
