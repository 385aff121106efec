/* passes/fusion_util.c — the IR surgery shared by the fusion passes (fusion.c,
   epilogue_fusion.c, sibling_fusion.c): making a fusion out of one instruction, pulling a
   producer into a fusion, and the small queries they all ask (elementwise? hero? kind?).

   Invariants kept: a fusion's operands are distinct (one parameter per operand, so one
   buffer per kernel argument); fused parameter k is operand k; the enclosing computation
   stays topological (a fusion sits where its root instruction was, and the operands it
   gains come from an instruction that was before it); fused computations are placed in
   m->comps just before the computation that uses them (callees first).

   Worked example (absorb):
       c:  a = f32[8] exponential(x);  F = f32[8] fusion(a, y), calls=FC
       FC: p0 = parameter(0); p1 = parameter(1); ROOT r = add(p0, p1)
   hlo_fusion_absorb(c, F, a): a's operand x is not an operand of F yet, so F gains
   operand x as parameter p2; a is cloned into FC as e = exponential(p2); uses of p0 become
   e; p0 is dropped and the parameters renumbered:
       F = f32[8] fusion(y, x);  FC: p0 = parameter(0) (y); p1 = parameter(1) (x);
                                     e = exponential(p1); ROOT r = add(e, p0)
   a stays in c: the caller removes it once nothing uses it. A producer that is itself a
   fusion is merged the same way, instruction by instruction, its root taking p0's place. */
#include "passes.h"
#include <stdlib.h>

/* ---- queries ------------------------------------------------------------------------------- */

/* A transpose that moves data (not only size-1 dims). */
bool hlo_transpose_is_real(const hlo_instr *t) {
  if (t->op != HLO_OP_TRANSPOSE) return false;
  int last = -1;
  for (int i = 0; i < t->dims.n; i++) {
    int d = (int)t->dims.v[i];
    if (t->operands[0]->shape.dims[d] == 1) continue;
    if (d < last) return true;
    last = d;
  }
  return false;
}

const hlo_instr *hlo_fusion_hero(const hlo_comp *fc) {
  const hlo_instr *red = NULL, *tr = NULL;
  for (ptrdiff_t i = 0; i < arrlen(fc->instrs); i++) {
    const hlo_instr *x = fc->instrs[i];
    if (x->op == HLO_OP_DOT) return x;
    if (x->op == HLO_OP_REDUCE && !red) red = x;
    if (hlo_transpose_is_real(x) && !tr) tr = x;
  }
  return red ? red : tr;
}

void hlo_fusion_relabel(hlo_instr *fusion) {
  const hlo_instr *h = hlo_fusion_hero(fusion->calls[0]);
  fusion->fusion_kind = !h ? HLO_FUSION_LOOP
                      : h->op == HLO_OP_DOT ? HLO_FUSION_OUTPUT
                      : h->op == HLO_OP_REDUCE ? HLO_FUSION_INPUT : HLO_FUSION_LOOP;
}

static int fuu_users(const hlo_comp *c, const hlo_instr *o, hlo_uidx *ux) {
  return ux ? hlo_uidx_count(ux, o) : hlo_user_count(c, o);
}

/* An elementwise op, or a loop fusion of them (no hero), on an array. */
static bool fuu_elementwise_link(const hlo_instr *o) {
  if (hlo_op_is_elementwise(o)) return true;
  return o->op == HLO_OP_FUSION && o->ncalls == 1 && o->fusion_kind == HLO_FUSION_LOOP &&
         hlo_shape_is_array(&o->calls[0]->root->shape) && !hlo_fusion_hero(o->calls[0]);
}

static bool fuu_reads_lone_dot(const hlo_comp *c, const hlo_instr *x, hlo_uidx *ux, int depth) {
  for (int k = 0; k < x->noperands; k++) {
    const hlo_instr *o = x->operands[k];
    bool dot = o->op == HLO_OP_DOT;
    if (o->op == HLO_OP_FUSION && o->ncalls == 1) {
      const hlo_instr *h = hlo_fusion_hero(o->calls[0]);
      dot = h && h->op == HLO_OP_DOT;
    }
    /* a panel-order dot's reshape to C [M,N] (ir.h): it reads the dot for its epilogue */
    if ((o->op == HLO_OP_RESHAPE || o->op == HLO_OP_BITCAST) && o->noperands == 1 &&
        hlo_dot_is_panels(o->operands[0], NULL) && fuu_users(c, o->operands[0], ux) == 1)
      dot = true;
    if (dot && fuu_users(c, o, ux) == 1) return true;
    /* x continues a lone dot's epilogue through an elementwise link only x reads (the
       residual add after the bias add of a projection): epilogue fusion will give the
       whole chain to the dot, so x must not be duplicated into its users either */
    if (!dot && depth < 4 && fuu_elementwise_link(o) && fuu_users(c, o, ux) == 1 &&
        fuu_reads_lone_dot(c, o, ux, depth + 1))
      return true;
  }
  return false;
}

/* Does |x| read a dot (or a fusion whose hero is a dot) that nothing else in |c| reads,
   directly or through elementwise links that only the next link reads? With a use index
   the users are counted through it. */
bool hlo_reads_lone_dot(const hlo_comp *c, const hlo_instr *x, hlo_uidx *ux) {
  return fuu_reads_lone_dot(c, x, ux, 0);
}

int64_t hlo_shape_total_bytes(const hlo_shape *s) {
  if (s->type == HLO_TUPLE) {
    int64_t t = 0;
    for (int i = 0; i < s->ntuple; i++) t += hlo_shape_total_bytes(&s->tuple[i]);
    return t;
  }
  return hlo_shape_is_array(s) ? hlo_shape_bytes(s) : 0;
}

/* ---- making fusions ------------------------------------------------------------------------ */

/* Moves |nc|, the computation appended last to m->comps, to just before |before|. */
void hlo_module_insert_comp_before(hlo_module *m, hlo_comp *nc, const hlo_comp *before) {
  ptrdiff_t n = arrlen(m->comps), at = n - 1;   /* nc was appended last */
  for (ptrdiff_t i = 0; i < n - 1; i++)
    if (m->comps[i] == before) {
      at = i;
      break;
    }
  for (ptrdiff_t i = n - 1; i > at; i--) m->comps[i] = m->comps[i - 1];
  m->comps[at] = nc;
}

static hlo_instr *fuu_new_param(hlo_comp *fc, const hlo_shape *s) {
  char name[64];
  int p = (int)arrlen(fc->params);
  snprintf(name, sizeof name, "param_%d.%d", p, fc->module->next_id);
  hlo_instr *par = hlo_instr_new(fc, HLO_OP_PARAMETER, name, s, NULL, 0);
  if (!par) return NULL;
  par->index = p;
  arrput(fc->params, par);
  return par;
}

/* Appends |x| as a new operand of |fusion| (arena array regrown). */
static bool fuu_add_operand(hlo_instr *fusion, hlo_instr *x) {
  hlo_module *m = fusion->parent->module;
  hlo_instr **ops = hlo_alloc(m, sizeof(hlo_instr *) * (size_t)(fusion->noperands + 1));
  if (!ops) return false;
  if (fusion->noperands) memcpy(ops, fusion->operands, sizeof(hlo_instr *) * (size_t)fusion->noperands);
  ops[fusion->noperands++] = x;
  fusion->operands = ops;
  return true;
}

/* The fused parameter standing for outer value |x|, made when there is none; NULL on OOM. */
static hlo_instr *fuu_param_for(hlo_instr *fusion, hlo_instr *x) {
  hlo_comp *fc = fusion->calls[0];
  for (int k = 0; k < fusion->noperands; k++)
    if (fusion->operands[k] == x) return fc->params[k];
  hlo_instr *p = fuu_new_param(fc, &x->shape);
  if (!p || !fuu_add_operand(fusion, x)) return NULL;
  return p;
}

/* Drops fused parameter |k| (no longer used) and operand |k|; renumbers the rest. */
static void fuu_drop_param(hlo_instr *fusion, int k) {
  hlo_comp *fc = fusion->calls[0];
  hlo_instr *p = fc->params[k];
  for (ptrdiff_t i = 0; i < arrlen(fc->instrs); i++)
    if (fc->instrs[i] == p) {
      arrdel(fc->instrs, i);
      break;
    }
  arrdel(fc->params, k);
  for (ptrdiff_t i = k; i < arrlen(fc->params); i++) fc->params[i]->index = i;
  for (int i = k; i + 1 < fusion->noperands; i++) fusion->operands[i] = fusion->operands[i + 1];
  fusion->noperands--;
}

hlo_instr *hlo_fusion_make(hlo_comp *c, hlo_instr *ins, hlo_uidx *ux) {
  hlo_module *m = c->module;
  char name[512];
  snprintf(name, sizeof name, "fused_computation.%d", m->next_id);
  hlo_comp *fc = hlo_comp_new(m, name);
  if (!fc) return NULL;
  if (!ux) hlo_module_insert_comp_before(m, fc, c);   /* else hlo_fusion_run_control_comps */
  snprintf(name, sizeof name, "fusion.%d", m->next_id);
  hlo_instr *fusion = hlo_instr_new(c, HLO_OP_FUSION, name, &ins->shape, NULL, 0);
  if (!fusion) return NULL;
  hlo_instr_set_calls(fusion, &fc, 1);
  if (fusion->ncalls != 1) return NULL;
  hlo_instr **inner = NULL;
  bool ok = true;
  for (int k = 0; k < ins->noperands && ok; k++) {
    hlo_instr *p = fuu_param_for(fusion, ins->operands[k]);
    if (!p) ok = false;
    arrput(inner, p);
  }
  hlo_instr *r = ok ? hlo_instr_clone_into(fc, ins, NULL, inner, ins->calls) : NULL;
  arrfree(inner);
  if (!r) {
    hj__err(m->ctx, HJ_ERR_OOM, "fusion: out of memory wrapping '%s'", ins->name);
    return NULL;
  }
  hlo_comp_set_root(fc, r);
  /* the fusion takes ins's place in the text order */
  (void)arrpop(c->instrs);
  if (ux) {
    int at = hlo_uidx_pos(ux, ins);
    if (at < 0 || at >= arrlen(c->instrs) || c->instrs[at] != ins) {
      hj__err(m->ctx, HJ_ERR_INTERNAL, "fusion: '%s' is not where the use index says", ins->name);
      return NULL;
    }
    c->instrs[at] = fusion;
    hlo_uidx_set_pos(ux, fusion, at);
    if (!hlo_uidx_add_operands(ux, fusion)) {
      hj__err(m->ctx, HJ_ERR_OOM, "fusion: out of memory wrapping '%s'", ins->name);
      return NULL;
    }
    hlo_uidx_replace_all_uses(ux, ins, fusion);
    hlo_uidx_kill(ux, ins);
    hlo_uidx_set_pos(ux, ins, -1);
  } else {
    for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++)
      if (c->instrs[i] == ins) {
        c->instrs[i] = fusion;
        break;
      }
    hlo_replace_all_uses(c, ins, fusion);
  }
  hlo_fusion_relabel(fusion);
  return fusion;
}

/* Clones |producer| (plain) into the fused computation of |fusion|; NULL on OOM. */
static hlo_instr *fuu_clone_plain(hlo_instr *fusion, hlo_instr *producer, bool dup) {
  hlo_comp *fc = fusion->calls[0];
  hlo_instr **inner = NULL;
  hlo_instr *r = NULL;
  for (int k = 0; k < producer->noperands; k++) {
    hlo_instr *p = fuu_param_for(fusion, producer->operands[k]);
    if (!p) goto done;
    arrput(inner, p);
  }
  char name[512];
  snprintf(name, sizeof name, "%s.%d", producer->name, fc->module->next_id);
  r = hlo_instr_clone_into(fc, producer, dup ? name : NULL, inner, producer->calls);
done:
  arrfree(inner);
  return r;
}

/* Merges the fused computation of fusion |producer| into |fusion|; returns the clone of
   its root (NULL on OOM). */
static hlo_instr *fuu_clone_fusion(hlo_instr *fusion, hlo_instr *producer, bool dup) {
  hlo_comp *fc = fusion->calls[0], *pc = producer->calls[0];
  struct { hlo_instr *key; hlo_instr *value; } *map = NULL;
  hlo_instr **inner = NULL, *root = NULL;
  for (int k = 0; k < producer->noperands; k++) {
    hlo_instr *p = fuu_param_for(fusion, producer->operands[k]);
    if (!p) goto done;
    hmput(map, pc->params[k], p);
  }
  for (ptrdiff_t i = 0; i < arrlen(pc->instrs); i++) {
    hlo_instr *s = pc->instrs[i];
    if (s->op == HLO_OP_PARAMETER) continue;
    arrsetlen(inner, 0);
    for (int k = 0; k < s->noperands; k++) arrput(inner, hmget(map, s->operands[k]));
    char name[512];
    snprintf(name, sizeof name, "%s.%d", s->name, fc->module->next_id);
    hlo_instr *d = hlo_instr_clone_into(fc, s, dup ? name : NULL, inner, s->calls);
    if (!d) goto done;
    hmput(map, s, d);
  }
  root = hmget(map, pc->root);
done:
  hmfree(map);
  arrfree(inner);
  return root;
}

hj_status hlo_fusion_absorb(hlo_comp *c, hlo_instr *fusion, hlo_instr *producer, bool dup,
                            hlo_uidx *ux) {
  hlo_comp *fc = fusion->calls[0];
  hlo_module *m = c->module;
  if (producer->op == HLO_OP_FUSION && producer->calls[0]->root->op == HLO_OP_TUPLE)
    return hj__err(m->ctx, HJ_ERR_INTERNAL, "fusion: cannot absorb multi-output '%s'",
                   producer->name);
  hlo_instr *r = producer->op == HLO_OP_FUSION ? fuu_clone_fusion(fusion, producer, dup)
                                               : fuu_clone_plain(fusion, producer, dup);
  if (!r) return hj__err(m->ctx, HJ_ERR_OOM, "fusion: out of memory absorbing '%s'", producer->name);
  for (int k = fusion->noperands - 1; k >= 0; k--) {
    if (fusion->operands[k] != producer) continue;
    hlo_replace_all_uses(fc, fc->params[k], r);
    fuu_drop_param(fusion, k);
  }
  hj_status st = hlo_comp_topo_sort(fc);
  if (st != HJ_OK) return st;
  if (ux && !hlo_uidx_add_operands(ux, fusion))
    return hj__err(m->ctx, HJ_ERR_OOM, "fusion: out of memory absorbing '%s'", producer->name);
  hlo_fusion_relabel(fusion);
  return HJ_OK;
}

/* The computations appended to m->comps from index |n0| on (fused computations made while
   a pass edited |c|) move, in creation order, to just before |c|: callees come first, as
   hlo_module_insert_comp_before would have placed them one by one, in one O(comps) move. */
static void fuu_place_comps(hlo_module *m, ptrdiff_t n0, const hlo_comp *c) {
  ptrdiff_t n = arrlen(m->comps), k = n - n0, at = -1;
  for (ptrdiff_t i = 0; i < n0; i++)
    if (m->comps[i] == c) {
      at = i;
      break;
    }
  if (k <= 0 || at < 0) return;
  hlo_comp **moved = malloc(sizeof *moved * (size_t)k);
  if (!moved) {   /* out of memory: one at a time, in place */
    for (ptrdiff_t j = n0; j < n; j++) {
      hlo_comp *nc = m->comps[j];
      for (ptrdiff_t i = j; i > at + (j - n0); i--) m->comps[i] = m->comps[i - 1];
      m->comps[at + (j - n0)] = nc;
    }
    return;
  }
  memcpy(moved, m->comps + n0, sizeof *moved * (size_t)k);
  memmove(m->comps + at + k, m->comps + at, sizeof *moved * (size_t)(n0 - at));
  memcpy(m->comps + at, moved, sizeof *moved * (size_t)k);
  free(moved);
}

/* The entry and the while/conditional computations reached from it, each once: the
   computations whose instructions become kernels (fused computations are not in it). */
void hlo_control_comps(hlo_comp *c, hlo_comp ***out) {
  for (ptrdiff_t i = 0; i < arrlen(*out); i++)
    if ((*out)[i] == c) return;
  arrput(*out, c);
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++) {
    hlo_instr *x = c->instrs[i];
    if (x->op == HLO_OP_WHILE || x->op == HLO_OP_CONDITIONAL)
      for (int k = 0; k < x->ncalls; k++) hlo_control_comps(x->calls[k], out);
  }
}

/* The driver of a fusion pass: |fn| on each of hlo_control_comps(m->entry), then the
   computations no longer called are pruned if anything changed. */
hj_status hlo_fusion_run_control_comps(hlo_module *m, hlo_comp_pass_fn fn, bool *changed) {
  bool any = false;
  hlo_comp **comps = NULL;
  if (m->entry) hlo_control_comps(m->entry, &comps);
  hj_status st = HJ_OK;
  for (ptrdiff_t i = 0; i < arrlen(comps) && st == HJ_OK; i++) {
    ptrdiff_t n0 = arrlen(m->comps);
    st = fn(comps[i], &any);
    fuu_place_comps(m, n0, comps[i]);
  }
  arrfree(comps);
  if (st == HJ_OK && any) st = hlo_module_prune_comps(m, NULL);
  if (changed) *changed = any;
  return st;
}
