/* transpose.c — the transpose emitter: a fusion whose hero is a transpose that moves the
   minor dimension (emit_classify: a "real" transpose at the root, possibly with elementwise
   producers before it and consumers after it), as one cache-blocked kernel
   `void NAME(void **bufs, i64 begin, i64 end)`.

   Naming: the hero maps input to output as out[o] = in[i] with i[perm[d]] = o[d]
   (perm = dimensions={...}). Of the output's dims, b = rank-1 is the output's minor dim and
   a (perm[a] == rank-1) is the one that carries the input's minor dim. Reading along a and
   writing along b are both unit-stride, so the kernel walks TRP_T x TRP_T tiles of (a, b):
   inside one tile both the input rows touched and the output rows written stay in L1.

   Walk-through, f32[4096,4096] transpose dims={1,0} (a = 0, b = 1, T = 32, AVX-512: V = 16):
     tiles per dim: 128 x 128, parallel_n = 16384 tiles (u = ta * 128 + tb);
     tile u is full (32 x 32), so it is done as 2 x 2 blocks of V x V = 16 x 16:
       block (a0, b0): rows[r] = in[b0 + r, a0 .. a0+15]   16 vector loads (lane c = a0 + c)
                       register transpose (4 stages of 16 shufflevectors)
                       out[a0 + c, b0 .. b0+15] = rows[c]    16 vector stores
     A direct element walk of a tile keeps all 2T cache lines of the tile live; with a
     power-of-two row stride (16 KiB here) they fall into one L1 set and thrash, and LLVM
     vectorises it with gathers/scatters: 12x slower than the blocks (measured).
     f32[20,160,170] dims={0,2,1} (out f32[20,170,160]): a = 1, b = 2, the other dim (20)
     is an outer index: parallel_n = 20 * ceil(170/32) * ceil(160/32) = 20 * 6 * 5 = 600;
     partial tiles (the last along 170 and along 160) clamp their bounds and go element by
     element, as do tiles of types whose storage differs from their compute type (pred,
     f16, bf16) and transposes that keep the minor dim (a == b: plain row loops over b).
   For a plain transpose of a parameter the rows are vector loads; otherwise each lane is an
   elemental value inserted into the row vector (LLVM merges consecutive loads).
   Values come from the elemental emitter at the output index, so producers and consumers
   fuse. Output leaves with the hero's shape are written at o; output leaves with the hero's
   *input* shape (side outputs such as log(p0) next to transpose(p0)) are written at the
   corresponding input index i in the same tile loop (o <-> i is a bijection, so each of
   their elements is written once). Leaves of the hero's shape in which no transpose moves a
   minor dim (sibling copies, such as attention's q and v head splits next to k's
   transpose) are written in the same tile by plain row loops along b instead of through
   the register transpose. Other shapes: HJ_ERR_UNSUPPORTED. Each output element is
   computed by exactly one (unit, ia, ib): deterministic for any split. */
#include "emit.h"

#define TRP_T 32

typedef struct trp_leaf {
  const hlo_instr *ins;
  bool at_input;            /* has the hero's input shape: written at i */
  bool rowwise;             /* of the hero's shape, but nothing in it moves a minor dim */
  hlo_shape shape;
} trp_leaf;

typedef struct trp_plan {
  const hlo_instr *hero;
  int perm[HLO_MAX_RANK];
  int rank, a, b;           /* a < 0: the minor dim is not moved */
  hlo_shape outer;          /* the output's dims other than a and b (in order) */
  int outer_dim[HLO_MAX_RANK];
  int64_t na, nb;           /* tiles along a and b */
  trp_leaf leaf[64];
  int nleaves;
} trp_plan;

static hj_status trp_unsup(emit_module *em, const hlo_instr *fusion, const char *why) {
  return hj__err(em->ctx, HJ_ERR_UNSUPPORTED, "transpose emitter, fusion '%s': %s", fusion->name, why);
}

static bool trp_same_dims(const hlo_shape *x, const hlo_shape *y) {
  if (x->rank != y->rank) return false;
  for (int d = 0; d < x->rank; d++)
    if (x->dims[d] != y->dims[d]) return false;
  return true;
}

/* Whether a transpose that moves the minor dim feeds |ins| inside the fusion (|seen|: the
   instructions already visited, at most 256; beyond that, answers yes). */
static bool trp_moves_minor(const hlo_instr *ins, const hlo_instr **seen, int *nseen) {
  for (int k = 0; k < *nseen; k++)
    if (seen[k] == ins) return false;
  if (*nseen == 256) return true;
  seen[(*nseen)++] = ins;
  if (ins->op == HLO_OP_TRANSPOSE && ins->shape.rank > 0 &&
      ins->dims.v[ins->shape.rank - 1] != ins->shape.rank - 1)
    return true;
  for (int i = 0; i < ins->noperands; i++)
    if (trp_moves_minor(ins->operands[i], seen, nseen)) return true;
  return false;
}

static hj_status trp_add_leaf(emit_module *em, const hlo_instr *fusion, trp_plan *p, const hlo_instr *ins) {
  if (ins->op == HLO_OP_TUPLE) {
    for (int i = 0; i < ins->noperands; i++) {
      hj_status st = trp_add_leaf(em, fusion, p, ins->operands[i]);
      if (st) return st;
    }
    return HJ_OK;
  }
  if (ins->shape.type == HLO_TUPLE || p->nleaves == 64) return trp_unsup(em, fusion, "unsupported output structure");
  trp_leaf *l = &p->leaf[p->nleaves++];
  *l = (trp_leaf){ .ins = ins, .shape = ins->shape };
  if (trp_same_dims(&ins->shape, &p->hero->shape)) {
    const hlo_instr *seen[256];
    int nseen = 0;
    l->rowwise = !trp_moves_minor(ins, seen, &nseen);
    return HJ_OK;
  }
  if (trp_same_dims(&ins->shape, &p->hero->operands[0]->shape)) { l->at_input = true; return HJ_OK; }
  return trp_unsup(em, fusion, "an output has neither the transpose's nor its operand's shape");
}

static hj_status trp_analyse(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero, trp_plan *p) {
  memset(p, 0, sizeof *p);
  if (!hero || hero->op != HLO_OP_TRANSPOSE || hero->noperands != 1 || hero->shape.rank < 1 ||
      hero->dims.n != hero->shape.rank)
    return trp_unsup(em, fusion, "the hero is not a transpose");
  p->hero = hero;
  p->rank = hero->shape.rank;
  p->b = p->rank - 1;
  p->a = -1;
  for (int d = 0; d < p->rank; d++) {
    p->perm[d] = (int)hero->dims.v[d];
    if (p->perm[d] == p->rank - 1 && d != p->b) p->a = d;
  }
  p->outer = hlo_shape_scalar(hero->shape.type);
  for (int d = 0; d < p->rank; d++)
    if (d != p->a && d != p->b) {
      p->outer_dim[p->outer.rank] = d;
      p->outer.dims[p->outer.rank++] = hero->shape.dims[d];
    }
  hlo_shape_set_default_layout(&p->outer);
  p->na = p->a < 0 ? 1 : (hero->shape.dims[p->a] + TRP_T - 1) / TRP_T;
  p->nb = (hero->shape.dims[p->b] + TRP_T - 1) / TRP_T;
  return trp_add_leaf(em, fusion, p, fusion->calls[0]->root);
}

/* [lo, min(lo + T, n)) of tile |t| along a dim of size |n|. */
static void trp_bounds(emit_fn *f, LLVMValueRef t, int64_t n, LLVMValueRef *lo, LLVMValueRef *hi) {
  LLVMBuilderRef b = f->em->b;
  *lo = LLVMBuildNUWMul(b, t, emit_i64(f, TRP_T), "lo");
  LLVMValueRef e = LLVMBuildNUWAdd(b, *lo, emit_i64(f, TRP_T), "hi"), N = emit_i64(f, n);
  *hi = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntULT, e, N, "lt"), e, N, "hi");
}

/* All output leaves at output index |o|. */
static void trp_store_all(emit_fn *f, const trp_plan *p, const emit_index *o) {
  emit_index i = { .rank = p->rank };
  for (int d = 0; d < p->rank; d++) i.v[p->perm[d]] = o->v[d];
  for (int k = 0; k < p->nleaves; k++) {
    const trp_leaf *l = &p->leaf[k];
    const emit_index *at = l->at_input ? &i : o;
    LLVMValueRef v = emit_elemental(f, l->ins, at);
    emit_store_elem(f, l->shape.type, f->outs[k], emit_linear_index(f, &l->shape, at), v);
  }
}

/* Vector width V for the register transpose, 0 when a leaf of the hero's shape has a storage
   type that differs from its compute type (pred, f16, bf16) or the minor dim is not moved. */
static int trp_vec_width(const emit_fn *f, const trp_plan *p) {
  if (p->a < 0) return 0;
  int size = 0;
  for (int k = 0; k < p->nleaves; k++) {
    hlo_type t = p->leaf[k].shape.type;
    if (p->leaf[k].at_input) continue;
    if (t == HLO_PRED || t == HLO_F16 || t == HLO_BF16) return 0;
    if (hlo_type_size(t) > size) size = hlo_type_size(t);
  }
  if (!size) return 0;
  int v = (f->em->target.vector_bytes > 0 ? f->em->target.vector_bytes : 16) / size;
  if (v > 16) v = 16;
  return v >= 2 && TRP_T % v == 0 ? v : 0;
}

/* Transposes the V x V matrix rows[r][c] in registers: log2(V) stages; stage s swaps, in
   every 2s x 2s block, the top-right and bottom-left s x s blocks (rows i and i + s). */
static void trp_shuffle_transpose(emit_fn *f, LLVMValueRef *rows, int V) {
  LLVMBuilderRef b = f->em->b;
  LLVMValueRef mi[16], mj[16];
  for (int s = 1; s < V; s *= 2) {
    for (int k = 0; k < V; k++) {
      mi[k] = LLVMConstInt(f->em->t_i32, (unsigned)((k & s) ? V + k - s : k), 0);
      mj[k] = LLVMConstInt(f->em->t_i32, (unsigned)((k & s) ? V + k : k + s), 0);
    }
    LLVMValueRef maski = LLVMConstVector(mi, (unsigned)V), maskj = LLVMConstVector(mj, (unsigned)V);
    for (int i = 0; i < V; i++) {
      if (i & s) continue;
      LLVMValueRef ri = rows[i], rj = rows[i + s];
      rows[i] = LLVMBuildShuffleVector(b, ri, rj, maski, "");
      rows[i + s] = LLVMBuildShuffleVector(b, ri, rj, maskj, "");
    }
  }
}

/* One V x V block at (a0, b0) of a full tile: rows[r][c] = value at (a = a0 + c, b = b0 + r)
   (lane c walks the input's minor dim: the scalar loads merge into vector loads), then a
   register transpose gives, per c, V consecutive outputs along b: one vector store. Leaves
   of the input's shape are stored per element at i. */
static void trp_block(emit_fn *f, const trp_plan *p, emit_index o, LLVMValueRef a0, LLVMValueRef b0, int V) {
  LLVMBuilderRef b = f->em->b;
  LLVMValueRef rows[64][16];
  LLVMValueRef aa[16], bb[16];
  for (int c = 0; c < V; c++) {
    aa[c] = c ? LLVMBuildNUWAdd(b, a0, emit_i64(f, c), "a") : a0;
    bb[c] = c ? LLVMBuildNUWAdd(b, b0, emit_i64(f, c), "b") : b0;
  }
  for (int k = 0; k < p->nleaves; k++)
    if (!p->leaf[k].at_input && !p->leaf[k].rowwise)
      for (int r = 0; r < V; r++)
        rows[k][r] = LLVMGetUndef(LLVMVectorType(emit_compute_type(f->em, p->leaf[k].shape.type), (unsigned)V));
  const hlo_instr *src = p->hero->operands[0];
  for (int r = 0; r < V; r++)
    for (int c = 0; c < V; c++) {
      o.v[p->a] = aa[c], o.v[p->b] = bb[r];
      emit_index i = { .rank = p->rank };
      for (int d = 0; d < p->rank; d++) i.v[p->perm[d]] = o.v[d];
      for (int k = 0; k < p->nleaves; k++) {
        const trp_leaf *l = &p->leaf[k];
        if (l->rowwise) continue;
        if (l->ins == p->hero && src->op == HLO_OP_PARAMETER) {   /* a plain transpose: */
          if (c == 0) {                                            /* one vector load per row */
            LLVMTypeRef st = emit_storage_type(f->em, src->shape.type);
            LLVMValueRef lin = emit_linear_index(f, &src->shape, &i);
            LLVMValueRef ld = LLVMBuildLoad2(b, LLVMVectorType(st, (unsigned)V),
                                             LLVMBuildGEP2(b, st, f->params[src->index], &lin, 1, ""), "row");
            LLVMSetAlignment(ld, (unsigned)hlo_type_size(src->shape.type));
            rows[k][r] = ld;
          }
          continue;
        }
        LLVMValueRef v = emit_elemental(f, l->ins, l->at_input ? &i : &o);
        if (l->at_input) emit_store_elem(f, l->shape.type, f->outs[k], emit_linear_index(f, &l->shape, &i), v);
        else rows[k][r] = LLVMBuildInsertElement(b, rows[k][r], v, LLVMConstInt(f->em->t_i32, (unsigned)c, 0), "");
      }
    }
  for (int k = 0; k < p->nleaves; k++) {
    const trp_leaf *l = &p->leaf[k];
    if (l->at_input || l->rowwise) continue;
    trp_shuffle_transpose(f, rows[k], V);
    LLVMTypeRef st = emit_storage_type(f->em, l->shape.type);
    for (int c = 0; c < V; c++) {
      o.v[p->a] = aa[c], o.v[p->b] = b0;
      LLVMValueRef lin = emit_linear_index(f, &l->shape, &o);
      LLVMValueRef ptr = LLVMBuildGEP2(b, st, f->outs[k], &lin, 1, "");
      LLVMValueRef store = LLVMBuildStore(b, rows[k][c], ptr);
      LLVMSetAlignment(store, (unsigned)hlo_type_size(l->shape.type));
    }
  }
}

/* The rowwise leaves of a full tile: rows along a, the output's minor dim b inside, so the
   loads and stores run along b and LLVM vectorises them (in the tile's lanes they would be
   strided gathers: attention's q and v head splits next to k's transpose measured 3x slower
   that way, and tripled the kernel's IR). */
static void trp_tile_rows(emit_fn *f, const trp_plan *p, emit_index o, LLVMValueRef alo,
                          LLVMValueRef ahi, LLVMValueRef blo, LLVMValueRef bhi) {
  emit_loop la, lb;
  emit_loop_begin(f, &la, alo, ahi, 1, "ra");
  o.v[p->a] = la.iv;
  emit_loop_begin(f, &lb, blo, bhi, 1, "rb");
  o.v[p->b] = lb.iv;
  for (int k = 0; k < p->nleaves; k++) {
    const trp_leaf *l = &p->leaf[k];
    if (!l->rowwise) continue;
    emit_store_elem(f, l->shape.type, f->outs[k], emit_linear_index(f, &l->shape, &o),
                    emit_elemental(f, l->ins, &o));
  }
  emit_loop_end(f, &lb);
  emit_loop_end(f, &la);
}

/* Element by element over [alo, ahi) x [blo, bhi): partial tiles, and types the register
   transpose does not take. */
static void trp_tile_scalar(emit_fn *f, const trp_plan *p, emit_index o, LLVMValueRef alo,
                            LLVMValueRef ahi, LLVMValueRef blo, LLVMValueRef bhi) {
  emit_loop la = { 0 }, lb;
  if (p->a >= 0) {
    emit_loop_begin(f, &la, alo, ahi, 1, "ta");
    o.v[p->a] = la.iv;
  }
  emit_loop_begin(f, &lb, blo, bhi, 1, "tb");
  o.v[p->b] = lb.iv;
  trp_store_all(f, p, &o);
  emit_loop_end(f, &lb);
  if (p->a >= 0) emit_loop_end(f, &la);
}

static void trp_emit(emit_fn *f, const trp_plan *p) {
  LLVMBuilderRef b = f->em->b;
  const hlo_shape *os = &p->hero->shape;
  int V = trp_vec_width(f, p);
  emit_loop lu;
  emit_loop_begin(f, &lu, f->begin, f->end, 1, "tile");
  LLVMValueRef nb = emit_i64(f, p->nb), na = emit_i64(f, p->na);
  LLVMValueRef tb = LLVMBuildURem(b, lu.iv, nb, "tb"), u2 = LLVMBuildUDiv(b, lu.iv, nb, "u2");
  LLVMValueRef ta = LLVMBuildURem(b, u2, na, "ta"), uo = LLVMBuildUDiv(b, u2, na, "uo");
  emit_index outer, o = { .rank = p->rank };
  emit_delinearize(f, &p->outer, uo, &outer);
  for (int k = 0; k < p->outer.rank; k++) o.v[p->outer_dim[k]] = outer.v[k];
  LLVMValueRef alo = NULL, ahi = NULL, blo, bhi;
  trp_bounds(f, tb, os->dims[p->b], &blo, &bhi);
  if (p->a >= 0) trp_bounds(f, ta, os->dims[p->a], &alo, &ahi);
  if (!V) {
    trp_tile_scalar(f, p, o, alo, ahi, blo, bhi);
  } else {   /* full tiles: register transposes of V x V blocks; partial tiles: scalar */
    LLVMValueRef T = emit_i64(f, TRP_T);
    LLVMValueRef full = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildSub(b, ahi, alo, ""), T, ""),
                                     LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildSub(b, bhi, blo, ""), T, ""), "full");
    LLVMBasicBlockRef bv = LLVMAppendBasicBlockInContext(f->em->llctx, f->fn, "tile.vec");
    LLVMBasicBlockRef bs = LLVMAppendBasicBlockInContext(f->em->llctx, f->fn, "tile.scalar");
    LLVMBasicBlockRef bj = LLVMAppendBasicBlockInContext(f->em->llctx, f->fn, "tile.done");
    LLVMBuildCondBr(b, full, bv, bs);
    LLVMPositionBuilderAtEnd(b, bv);
    emit_cache_clear(f);
    emit_loop l1, l2;
    emit_loop_begin(f, &l1, alo, ahi, V, "va");
    emit_loop_begin(f, &l2, blo, bhi, V, "vb");
    trp_block(f, p, o, l1.iv, l2.iv, V);
    emit_loop_end(f, &l2);
    emit_loop_end(f, &l1);
    bool rows = false;
    for (int k = 0; k < p->nleaves; k++) rows |= p->leaf[k].rowwise;
    if (rows) {
      emit_cache_clear(f);
      trp_tile_rows(f, p, o, alo, ahi, blo, bhi);
    }
    LLVMBuildBr(b, bj);
    LLVMPositionBuilderAtEnd(b, bs);
    emit_cache_clear(f);
    trp_tile_scalar(f, p, o, alo, ahi, blo, bhi);
    LLVMBuildBr(b, bj);
    LLVMPositionBuilderAtEnd(b, bj);
    emit_cache_clear(f);
  }
  emit_loop_end(f, &lu);
}

hj_status emit_transpose_fusion(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero,
                                const char *name, emit_kernel *out) {
  memset(out, 0, sizeof *out);
  if (fusion->ncalls < 1 || !fusion->calls[0])
    return hj__err(em->ctx, HJ_ERR_INVALID_ARG, "transpose emitter: fusion '%s' has no computation", fusion->name);
  trp_plan p;
  hj_status st = trp_analyse(em, fusion, hero, &p);
  emit_fn f;
  if (!st) st = emit_kernel_begin(&f, em, name, fusion);
  if (!st) {
    if (f.nouts != p.nleaves) emit_fail(&f, HJ_ERR_INTERNAL, "%d output buffers, %d output leaves", f.nouts, p.nleaves);
    else trp_emit(&f, &p);
    st = emit_kernel_end(&f);
  }
  if (!st) {
    out->kind = EMIT_KIND_TRANSPOSE;
    out->parallel_n = hlo_shape_numel(&p.outer) * p.na * p.nb;
    if (hlo_shape_numel(&hero->shape) == 0) out->parallel_n = 0;
    out->grain = 16;   /* 16 tiles of 32x32: ~16K elements per chunk at least */
    snprintf(out->name, sizeof out->name, "%s", name);
  }
  return st;
}

#undef TRP_T
