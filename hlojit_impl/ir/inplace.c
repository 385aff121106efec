/* ir/inplace.c — which output leaves of a fusion may be written over one of its operands'
   buffers: the in-place dynamic-update-slice (a KV cache updated at a runtime position).

   Leaf j of fusion F (its fused root, tuples flattened depth first, as the runtime counts
   output leaves) is an in-place candidate over fused parameter p when
     - leaf j is, through plain bitcasts (default layouts, same type and element count, so
       row-major indices address the same bytes), a dynamic-update-slice D with scalar starts;
     - D's operand 0 is, through plain bitcasts, fused parameter p;
     - parameter p and those bitcasts feed nothing else in the fusion (every other user,
       and every other operand position, would read elements the kernel overwrites);
     - F passes the instruction behind operand p only once (a second operand slot would be
       another name for the same buffer), and no other leaf claimed p.
   Then a kernel that writes only D's update into output j, given operand p's buffer as
   output j, computes leaf j: the bytes outside the update are already there. Buffer
   assignment (runtime/buffer_assign.c) decides per leaf whether operand p's buffer may be
   given away (it dies at F, or it is a donated parameter); the DUS emitters (emitters/dus.c,
   gpu_dus.c) write the leaves so marked.

   Example, a decode step's two cache updates after sibling fusion:
       F = (f32[1,64], f32[4,16,64], f32[4,64,16]) fusion(qkv, kc, vc, pos)
       ROOT (slice(qkv), dus(p1, k(qkv), 0, 0, pos), dus(p2, v(qkv), 0, pos, 0))
   leaf 0: none; leaf 1: over parameter 1; leaf 2: over parameter 2. */
#include "ir.h"

static bool iri_plain_bitcast(const hlo_instr *x) {
  return x->op == HLO_OP_BITCAST && x->noperands == 1 && hlo_shape_is_array(&x->shape) &&
         hlo_shape_layout_is_default(&x->shape) &&
         hlo_shape_layout_is_default(&x->operands[0]->shape) &&
         hlo_shape_numel(&x->shape) == hlo_shape_numel(&x->operands[0]->shape) &&
         x->shape.type == x->operands[0]->shape.type;
}

/* The output leaves under root |r|, depth first: the instruction for an array leaf, NULL
   for a leaf inside a tuple-shaped non-tuple op (a variadic reduce). */
static int iri_leaves(const hlo_instr *r, const hlo_instr **out, int n, int max) {
  if (n < 0) return n;
  if (r->op == HLO_OP_TUPLE) {
    for (int k = 0; k < r->noperands && n >= 0; k++) n = iri_leaves(r->operands[k], out, n, max);
    return n;
  }
  int m = 1;
  if (!hlo_shape_is_array(&r->shape)) {
    const hlo_shape **sh = NULL;
    hlo_shape_leaves(&r->shape, &sh);
    m = (int)arrlen(sh);
    arrfree(sh);
  }
  if (n + m > max) return -1;
  for (int k = 0; k < m; k++) out[n + k] = hlo_shape_is_array(&r->shape) ? r : NULL;
  return n + m;
}

/* Is |x| on the chain param -> bitcasts -> D.operand 0 (chain[0..n))? */
static bool iri_on_chain(const hlo_instr *const *chain, int n, const hlo_instr *x) {
  for (int i = 0; i < n; i++)
    if (chain[i] == x) return true;
  return false;
}

/* The fused parameter leaf root |r| updates in place, or -1. */
static int iri_leaf_param(const hlo_instr *fusion, const hlo_instr *leaf, const hlo_instr **dus) {
  const hlo_comp *c = fusion->calls[0];
  const hlo_instr *oc[64], *r = leaf;   /* the leaf, its bitcasts, down to the dus */
  int m = 0;
  while (m < 63 && iri_plain_bitcast(r)) oc[m++] = r, r = r->operands[0];
  oc[m++] = r;
  if (r->op != HLO_OP_DYNAMIC_UPDATE_SLICE || !hlo_shape_is_array(&r->shape) ||
      r->noperands != 2 + r->shape.rank)
    return -1;
  for (int d = 0; d < r->shape.rank; d++)
    if (r->operands[2 + d]->shape.rank != 0) return -1;
  *dus = r;
  int tuple_uses = 0;   /* the dus's value is the leaf's alone: no other reader of it */
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++) {
    const hlo_instr *u = c->instrs[i];
    for (int k = 0; k < u->noperands; k++)
      for (int t = 0; t < m; t++) {
        if (u->operands[k] != oc[t]) continue;
        if (t == 0 && u->op == HLO_OP_TUPLE) tuple_uses++;
        else if (t == 0 || u != oc[t - 1] || k != 0) return -1;
      }
  }
  if (tuple_uses != (leaf == c->root ? 0 : 1)) return -1;
  const hlo_instr *chain[64];
  int n = 0;
  const hlo_instr *x = r->operands[0];
  while (n < 63 && iri_plain_bitcast(x)) chain[n++] = x, x = x->operands[0];
  if (x->op != HLO_OP_PARAMETER || x->index < 0 || x->index >= fusion->noperands) return -1;
  chain[n++] = x;
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++) {
    const hlo_instr *u = c->instrs[i];
    for (int k = 0; k < u->noperands; k++) {
      if (!iri_on_chain(chain, n, u->operands[k])) continue;
      if (k != 0 || (u != r && !iri_on_chain(chain, n, u))) return -1;
    }
  }
  for (int k = 0; k < fusion->noperands; k++)
    if (k != x->index && fusion->operands[k] == fusion->operands[x->index]) return -1;
  return (int)x->index;
}

int hlo_fusion_dus_roots(const hlo_instr *fusion, hlo_dus_root *out, int max) {
  if (!fusion || fusion->op != HLO_OP_FUSION || fusion->ncalls < 1 || !fusion->calls[0] ||
      !fusion->calls[0]->root)
    return -1;
  const hlo_instr *leaves[64];
  int n = iri_leaves(fusion->calls[0]->root, leaves, 0, max < 64 ? max : 64);
  for (int j = 0; j < n; j++) {
    out[j].dus = NULL;
    out[j].param = leaves[j] ? iri_leaf_param(fusion, leaves[j], &out[j].dus) : -1;
    for (int i = 0; i < j && out[j].param >= 0; i++)
      if (out[i].param == out[j].param) out[j].param = -1;
  }
  return n;
}

uint64_t hlo_fusion_dus_mask(const hlo_instr *fusion) {
  hlo_dus_root r[64];
  int n = hlo_fusion_dus_roots(fusion, r, 64);
  uint64_t m = 0;
  for (int j = 0; j < n; j++)
    if (r[j].param >= 0) m |= 1ull << j;
  return m;
}
