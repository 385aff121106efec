/* classify.c — hero analysis: which emitter a fusion needs (emit_classify), and the walk
   over a fused computation's root leaves that every emitter shares (emitp_roots,
   emitp_leaves). Knows no emitter: the heroes and emitter.c's switch call down into it.

   Classification of a fusion's computation, first rule that applies:
     1. an op that no kernel emits (while, conditional, call, custom-call, a nested
        fusion, tuple-typed parameters) -> RUNTIME, hero = that op;
     2. a sort or topk -> SORT, a scatter -> SCATTER (alone in their fusions);
        a dot -> MATMUL, hero = the dot (epilogues around it are the matmul emitter's);
     3. from each root leaf, walk towards the operands through "epilogue" ops — elementwise
        ops, converts, bitcasts, reshapes, copies, broadcasts of scalars (a binary op is
        followed through its one operand that is not a scalar, constant or broadcast):
          a dynamic-update-slice at the root (through bitcasts) when the runtime updates
          its operand in place (a bit of |dus_mask|), or a dynamic-update-slice among
          root leaves of different element counts (a sibling fusion's leftovers, which
          the loop emitter does not take) -> DUS (dus.c);
          a reduce -> REDUCTION;
        or a reduce reached through elementwise ops, reshapes and a broadcast back to its
        input's shape that re-expands exactly its reduced dims (row normalisation:
        softmax, layer norm; the reduction emitter computes the reduce once per row)
          -> REDUCTION;
          a transpose that moves the minor dim (size-1 dims ignored) with both minor dims
          >= 16 -> TRANSPOSE;
     4. every root leaf reached from one prefix-scan reduce-window (cumsum, cummax:
        hlo_reduce_window_is_prefix_scan) through epilogue ops -> SCAN (scan.c);
     5. otherwise LOOP.
   Example: fusion { p = f32[64,128] parameter(0); r = f32[64] reduce(p, 0), dims={1};
   ROOT c = bf16[64] convert(r) }: the walk from c goes convert -> reduce: REDUCTION with
   hero r, and the reduction emitter makes the convert its epilogue. */
#include "emit_internal.h"

int emitp_roots(const hlo_comp *c, const hlo_instr **roots, int max) {
  const hlo_instr *stack[64];
  int sp = 0, n = 0;
  if (!c->root) return -1;
  stack[sp++] = c->root;
  while (sp > 0) {
    const hlo_instr *r = stack[--sp];
    if (r->op == HLO_OP_TUPLE) {
      if (sp + r->noperands > 64) return -1;
      for (int k = r->noperands - 1; k >= 0; k--) stack[sp++] = r->operands[k];
      continue;
    }
    if (n >= max) return -1;
    roots[n++] = r;
  }
  return n;
}

int emitp_leaves(const hlo_comp *c, emitp_leaf *out, int max) {
  const hlo_instr *roots[64];
  int n = emitp_roots(c, roots, 64), m = 0;
  for (int k = 0; k < n; k++) {
    const hlo_instr *r = roots[k];
    if (hlo_shape_is_array(&r->shape)) {
      if (m >= max) return -1;
      out[m++] = (emitp_leaf){ r, -1, &r->shape };
    } else if ((r->op == HLO_OP_REDUCE || r->op == HLO_OP_REDUCE_WINDOW) && r->shape.type == HLO_TUPLE) {
      for (int e = 0; e < r->shape.ntuple; e++) {
        if (m >= max || !hlo_shape_is_array(&r->shape.tuple[e])) return -1;
        out[m++] = (emitp_leaf){ r, e, &r->shape.tuple[e] };
      }
    } else {
      return -1;
    }
  }
  return n < 0 ? -1 : m;
}

const char *emit_kind_name(emit_kind k) {
  static const char *names[EMIT_KIND_COUNT] = { "loop", "reduction", "transpose", "matmul",
                                                "dus", "sort", "scatter", "scan", "runtime" };
  return (unsigned)k < EMIT_KIND_COUNT ? names[k] : "?";
}

/* No kernel takes it (the opcode table's emit column), or a tuple-typed parameter. */
static bool emr_runtime_op(const hlo_instr *ins) {
  if (ins->op == HLO_OP_PARAMETER) return !hlo_shape_is_array(&ins->shape);
  return !hlo_opcode_has_kernel(ins->op);
}

/* A value that costs nothing per element: a scalar, a constant, a broadcast of either. */
static bool emr_cheap(const hlo_instr *ins) {
  while (ins->op == HLO_OP_BROADCAST || ins->op == HLO_OP_RESHAPE || ins->op == HLO_OP_BITCAST ||
         ins->op == HLO_OP_CONVERT)
    ins = ins->operands[0];
  return ins->op == HLO_OP_CONSTANT || ins->op == HLO_OP_IOTA ||
         (hlo_shape_is_array(&ins->shape) && hlo_shape_numel(&ins->shape) == 1);
}

/* Follows epilogue ops from |r| to the instruction that decides the emitter. */
static const hlo_instr *emr_walk(const hlo_instr *r) {
  for (int depth = 0; depth < 256; depth++) {
    hlo_elem_op e;
    if (r->op == HLO_OP_BITCAST || r->op == HLO_OP_RESHAPE || r->op == HLO_OP_COPY ||
        (r->op == HLO_OP_BROADCAST && r->noperands == 1) || r->op == HLO_OP_OPT_BARRIER) {
      if (r->op == HLO_OP_BROADCAST && hlo_shape_numel(&r->operands[0]->shape) == 1) return r;
      r = r->operands[0];
      continue;
    }
    if (!hlo_elem_op_of(r, &e)) return r;
    const hlo_instr *next = NULL;
    int heavy = 0;
    for (int k = 0; k < r->noperands; k++)
      if (!emr_cheap(r->operands[k])) { next = r->operands[k]; heavy++; }
    if (heavy != 1) return r;
    r = next;
  }
  return r;
}

/* A transpose whose minor dim moves, both minor dims >= 16 (size-1 dims ignored). */
static bool emr_real_transpose(const hlo_instr *t) {
  const hlo_shape *os = &t->operands[0]->shape;
  if (t->dims.n != os->rank) return false;
  int last_in = -1, last_out = -1;
  for (int d = 0; d < os->rank; d++) if (os->dims[d] != 1) last_in = d;
  for (int i = 0; i < t->shape.rank; i++) if (t->shape.dims[i] != 1) last_out = i;
  if (last_in < 0 || last_out < 0 || t->dims.v[last_out] == last_in) return false;
  return os->dims[last_in] >= 16 && t->shape.dims[last_out] >= 16;
}

/* Row normalisation (passes/fusion.c: softmax, layer norm): broadcast |bc| re-expands
   exactly the reduced dims of |red| (size-1 dims ignored) back to its input's shape. */
static bool emr_reexpands(const hlo_instr *bc, const hlo_instr *red) {
  const hlo_shape *s = &bc->shape, *os = &bc->operands[0]->shape;
  if (bc->dims.n != os->rank || !hlo_same_dims(s, &red->operands[0]->shape)) return false;
  for (int d = 0; d < s->rank; d++) {
    bool kept = false;
    for (int i = 0; i < bc->dims.n; i++) kept |= bc->dims.v[i] == d && os->dims[i] != 1;
    if (s->dims[d] != 1 && kept == hlo_ints_has(red->dims, d)) return false;
  }
  return true;
}

/* A reduce reached from |r| through elementwise ops, reshapes, bitcasts, copies,
   get-tuple-elements (variadic reduces) and broadcasts, the first broadcast re-expanding
   its reduced dims; NULL if none. The reduction emitter proves the rest (every read at
   the row's own index) or refuses. */
static const hlo_instr *emr_row_norm(const hlo_instr *r, const hlo_instr *bc, const hlo_instr ***seen) {
  for (ptrdiff_t i = 0; i < arrlen(*seen); i++)
    if ((*seen)[i] == r) return NULL;
  arrput(*seen, r);
  hlo_elem_op e;
  if (r->op == HLO_OP_REDUCE) return bc && emr_reexpands(bc, r) ? r : NULL;
  if (r->op == HLO_OP_BROADCAST && r->noperands == 1 && !bc) bc = r;
  else if (r->op != HLO_OP_BROADCAST && r->op != HLO_OP_RESHAPE && r->op != HLO_OP_BITCAST &&
           r->op != HLO_OP_COPY && r->op != HLO_OP_GET_TUPLE_ELEMENT && !hlo_elem_op_of(r, &e))
    return NULL;
  const hlo_instr *red = NULL;
  for (int k = 0; k < r->noperands && !red; k++) red = emr_row_norm(r->operands[k], bc, seen);
  return red;
}

emit_kind emit_classify(const hlo_instr *fusion, uint64_t dus_mask, const hlo_instr **hero) {
  *hero = fusion;
  if (!fusion || fusion->op != HLO_OP_FUSION || fusion->ncalls < 1 || !fusion->calls[0])
    return EMIT_KIND_RUNTIME;
  const hlo_comp *c = fusion->calls[0];
  const hlo_instr *dot = NULL;
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++) {
    const hlo_instr *ins = c->instrs[i];
    if (emr_runtime_op(ins)) {
      *hero = ins;
      return EMIT_KIND_RUNTIME;
    }
    if (ins->op == HLO_OP_SORT || ins->op == HLO_OP_TOPK || ins->op == HLO_OP_SCATTER) {
      *hero = ins;
      return ins->op == HLO_OP_SCATTER ? EMIT_KIND_SCATTER : EMIT_KIND_SORT;
    }
    if (ins->op == HLO_OP_DOT && !dot) dot = ins;
  }
  if (dot) {
    *hero = dot;
    return EMIT_KIND_MATMUL;
  }
  const hlo_instr *roots[64];
  int n = emitp_roots(c, roots, 64);
  if (n < 0) {
    *hero = c->root;
    return EMIT_KIND_RUNTIME;
  }
  const hlo_instr *red = NULL, *tr = NULL, *dus = NULL, *scan = NULL;
  int nscan = 0, sdim;
  bool mixed = false;   /* root leaves of different element counts */
  for (int k = 0; k < n; k++) {
    const hlo_instr *r = roots[k];
    while (r->op == HLO_OP_BITCAST || r->op == HLO_OP_RESHAPE) r = r->operands[0];
    if (r->op == HLO_OP_DYNAMIC_UPDATE_SLICE && !dus) dus = r;
    if (hlo_shape_numel(&roots[k]->shape) != hlo_shape_numel(&roots[0]->shape)) mixed = true;
    const hlo_instr *h = emr_walk(roots[k]);
    if (h->op == HLO_OP_REDUCE && !red) red = h;
    if (h->op == HLO_OP_TRANSPOSE && !tr && emr_real_transpose(h)) tr = h;
    if (h->op == HLO_OP_REDUCE_WINDOW && hlo_reduce_window_is_prefix_scan(h, &sdim) && (!scan || scan == h))
      scan = h, nscan++;
  }
  if (dus_mask) {
    hlo_dus_root dr[64];
    int nl = hlo_fusion_dus_roots(fusion, dr, 64);
    for (int j = 0; j < nl; j++)
      if (dus_mask >> j & 1 && dr[j].dus) { *hero = dr[j].dus; return EMIT_KIND_DUS; }
  }
  if (dus && mixed) { *hero = dus; return EMIT_KIND_DUS; }
  for (int k = 0; k < n && !red; k++) {   /* row normalisation: softmax, layer norm */
    const hlo_instr **seen = NULL;
    red = emr_row_norm(roots[k], NULL, &seen);
    arrfree(seen);
  }
  if (red) { *hero = red; return EMIT_KIND_REDUCTION; }
  if (scan && nscan == n) { *hero = scan; return EMIT_KIND_SCAN; }   /* every leaf from one scan */
  if (tr) { *hero = tr; return EMIT_KIND_TRANSPOSE; }
  *hero = c->root;
  return EMIT_KIND_LOOP;
}
