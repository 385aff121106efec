/* gpu_transpose.c — the GPU transpose emitter: a fusion whose hero is a transpose moving the
   minor dimension (emit_classify), through 32 x 33 shared-memory tiles so that both the
   reads and the writes are coalesced.

   Naming (transpose.c's): out[o] = in[i] with i[perm[d]] = o[d]; b = rank-1 is the output's
   minor dim, a (perm[a] == rank-1) the output dim that carries the input's minor dim. A
   block of 256 threads (tx = tid % 32, ty = tid / 32, 8 warps) owns one 32 x 32 tile of
   (a, b) for one index of the other ("outer") output dims:
     phase 1: thread (tx, ty) computes the hero's operand at output (a0 + tx, b0 + ty + 8j),
              j = 0..3, i.e. at input index i with the input's minor dim = a0 + tx: a warp
              reads 32 consecutive input elements (coalesced), and the producers before the
              transpose fuse (they are computed here, by the elemental emitter);
              tile[ty + 8j][tx] = value; side outputs of the operand's shape are written at i;
     barrier;
     phase 2: thread (tx, ty) takes the hero's value at output (a0 + ty + 8j, b0 + tx) =
              tile[tx][ty + 8j] and computes each output leaf there (the consumers after the
              transpose fuse: the elemental emitter with the hero overridden): a warp writes
              32 consecutive output elements (coalesced).
   The row of 33 floats makes phase 2's column read conflict-free: thread tx reads word
   tx * 33 + c, bank (tx + c) mod 32, all different; phase 1's row write is consecutive.

   Walk-through, f32[64,128] -> transpose dims={1,0} -> f32[128,64] (a = 0, b = 1): tiles
   4 x 2, 8 blocks; block (ta, tb) = (1, 1): a0 = 32, b0 = 32; thread (tx, ty) = (5, 2) loads
   out(37, 34 + 8j) = in(34 + 8j, 37), writes out(34 + 8j, 37) = tile[5][2 + 8j].

   Accepted: every output leaf has the hero's shape and reads the hero only through
   elementwise ops at its own index (or not at all), or has the hero operand's shape and
   does not read the hero; partial tiles are bounds-checked element by element. Anything
   else is HJ_ERR_UNSUPPORTED and the GPU loop emitter takes the fusion (correct, not
   coalesced on one side). */
#include "gpu_internal.h"

#define GTR_T 32
#define GTR_ROWS 8      /* warps per block: each thread covers GTR_T / GTR_ROWS rows */

typedef struct gtr_memo { const hlo_instr *key; int value; } gtr_memo;

static hj_status gtr_unsup(emit_module *em, const hlo_instr *fusion, const char *why) {
  return hj__err(em->ctx, HJ_ERR_UNSUPPORTED, "GPU transpose emitter, fusion '%s': %s", fusion->name, why);
}

static bool gtr_same_dims(const hlo_shape *x, const hlo_shape *y) {
  if (x->rank != y->rank) return false;
  for (int d = 0; d < x->rank; d++)
    if (x->dims[d] != y->dims[d]) return false;
  return true;
}

/* 0: |ins| does not read |hero|; 1: reads it only at its own index (elementwise paths of the
   hero's dims); -1: reads it elsewhere. */
static int gtr_reads(const hlo_instr *ins, const hlo_instr *hero, gtr_memo **memo, int depth) {
  if (ins == hero) return 1;
  ptrdiff_t at = hmgeti(*memo, ins);
  if (at >= 0) return (*memo)[at].value;
  int r = 0;
  if (depth > 200) r = -1;
  for (int k = 0; k < ins->noperands && r >= 0; k++) {
    int v = gtr_reads(ins->operands[k], hero, memo, depth + 1);
    if (v < 0) r = -1;
    else if (v > 0) {
      bool ok = hlo_op_is_elementwise(ins) && hlo_shape_is_array(&ins->shape) &&
                gtr_same_dims(&ins->shape, &hero->shape) && gtr_same_dims(&ins->operands[k]->shape, &hero->shape);
      r = ok ? 1 : -1;
    }
  }
  hmput(*memo, ins, r);
  return r;
}

typedef struct gtr_leaf { const hlo_instr *ins; bool at_input; } gtr_leaf;

hj_status emitg_transpose(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero,
                          const char *name, emit_kernel *out) {
  memset(out, 0, sizeof *out);
  if (!hero || hero->op != HLO_OP_TRANSPOSE || hero->noperands != 1 || hero->shape.rank < 2 ||
      hero->dims.n != hero->shape.rank)
    return gtr_unsup(em, fusion, "the hero is not a transpose");
  const hlo_shape *os = &hero->shape, *is = &hero->operands[0]->shape;
  int r = os->rank, b = r - 1, a = -1, perm[HLO_MAX_RANK];
  for (int d = 0; d < r; d++) {
    perm[d] = (int)hero->dims.v[d];
    if (perm[d] == r - 1) a = d;
  }
  if (a < 0 || a == b) return gtr_unsup(em, fusion, "the minor dim is not moved");
  const hlo_instr *roots[64];
  int nr = emitp_roots(fusion->calls[0], roots, 64);
  if (nr < 1) return gtr_unsup(em, fusion, "unsupported output structure");
  gtr_leaf lv[64];
  gtr_memo *memo = NULL;
  const char *why = NULL;
  for (int k = 0; k < nr && !why; k++) {
    const hlo_instr *l = roots[k];
    if (!hlo_shape_is_array(&l->shape)) why = "an output is not an array";
    else if (gtr_same_dims(&l->shape, os)) {
      lv[k] = (gtr_leaf){ l, false };
      if (gtr_reads(l, hero, &memo, 0) < 0) why = "an output reads the transpose at another index";
    } else if (gtr_same_dims(&l->shape, is)) {
      lv[k] = (gtr_leaf){ l, true };
      if (gtr_reads(l, hero, &memo, 0) != 0) why = "an output of the operand's shape reads the transpose";
    } else {
      why = "an output has neither the transpose's nor its operand's shape";
    }
  }
  hmfree(memo);
  if (why) return gtr_unsup(em, fusion, why);

  int64_t A = os->dims[a], B = os->dims[b];
  int64_t ta = (A + GTR_T - 1) / GTR_T, tb = (B + GTR_T - 1) / GTR_T;
  hlo_shape outer = hlo_shape_scalar(os->type);
  int outer_dim[HLO_MAX_RANK];
  for (int d = 0; d < r; d++)
    if (d != a && d != b) outer_dim[outer.rank] = d, outer.dims[outer.rank++] = os->dims[d];
  hlo_shape_set_default_layout(&outer);
  int64_t nouter = hlo_shape_numel(&outer), blocks = nouter * ta * tb;
  if (blocks == 0) return gtr_unsup(em, fusion, "empty");
  if (blocks > INT32_MAX) return gtr_unsup(em, fusion, "more than 2^31 tiles");

  emit_fn f;
  hj_status st = emitg_kernel_begin(&f, em, name, fusion, -1, GTR_T * GTR_ROWS);
  if (st) return st;
  if (f.nouts != nr) emit_fail(&f, HJ_ERR_SHAPE, "%d output buffers for %d root leaves", f.nouts, nr);
  LLVMBuilderRef bd = em->b;
  LLVMTypeRef ct = emit_compute_type(em, hero->shape.type);
  bool bit = ct == em->t_i1;
  LLVMTypeRef mt = bit ? em->t_i8 : ct;
  LLVMValueRef tile = emitg_shared(&f, mt, GTR_T * (GTR_T + 1), "tile");
  LLVMValueRef tid = emitg_sreg64(&f, "tid.x"), blk = emitg_sreg64(&f, "ctaid.x");
  LLVMValueRef tx = LLVMBuildURem(bd, tid, emit_i64(&f, GTR_T), "tx");
  LLVMValueRef ty = LLVMBuildUDiv(bd, tid, emit_i64(&f, GTR_T), "ty");
  LLVMValueRef ib = LLVMBuildURem(bd, blk, emit_i64(&f, tb), "tb");
  LLVMValueRef rest = LLVMBuildUDiv(bd, blk, emit_i64(&f, tb), "");
  LLVMValueRef iA = LLVMBuildURem(bd, rest, emit_i64(&f, ta), "ta");
  LLVMValueRef io = LLVMBuildUDiv(bd, rest, emit_i64(&f, ta), "outer");
  LLVMValueRef a0 = LLVMBuildNUWMul(bd, iA, emit_i64(&f, GTR_T), "a0");
  LLVMValueRef b0 = LLVMBuildNUWMul(bd, ib, emit_i64(&f, GTR_T), "b0");
  emit_index oidx;
  emit_delinearize(&f, &outer, io, &oidx);
  LLVMValueRef outer_v[HLO_MAX_RANK];
  for (int k = 0; k < outer.rank; k++) outer_v[k] = oidx.v[k];

  for (int phase = 0; phase < 2 && f.status == HJ_OK; phase++) {
    for (int j = 0; j < GTR_T / GTR_ROWS; j++) {
      LLVMValueRef row = LLVMBuildNUWAdd(bd, ty, emit_i64(&f, j * GTR_ROWS), "row");
      /* phase 1: a along tx, b along the row; phase 2: b along tx, a along the row */
      LLVMValueRef la = phase == 0 ? tx : row, lb = phase == 0 ? row : tx;
      LLVMValueRef oa = LLVMBuildNUWAdd(bd, a0, la, "oa"), ob = LLVMBuildNUWAdd(bd, b0, lb, "ob");
      LLVMValueRef in = LLVMBuildAnd(bd, LLVMBuildICmp(bd, LLVMIntULT, oa, emit_i64(&f, A), ""),
                                     LLVMBuildICmp(bd, LLVMIntULT, ob, emit_i64(&f, B), ""), "in");
      emitg_region rg;
      emitg_if_begin(&f, &rg, in, phase == 0 ? "load" : "store");
      emit_index o = { .rank = r };
      for (int k = 0; k < outer.rank; k++) o.v[outer_dim[k]] = outer_v[k];
      o.v[a] = oa;
      o.v[b] = ob;
      /* tile[lb][la] holds the hero at (a0 + la, b0 + lb) */
      LLVMValueRef slot = LLVMBuildAdd(bd, LLVMBuildMul(bd, lb, emit_i64(&f, GTR_T + 1), ""), la, "slot");
      LLVMValueRef sp = emitg_shared_ptr(&f, mt, tile, slot);
      if (phase == 0) {
        emit_index i = { .rank = r };
        for (int d = 0; d < r; d++) i.v[perm[d]] = o.v[d];
        LLVMValueRef v = emit_elemental(&f, hero->operands[0], &i);
        LLVMBuildStore(bd, bit ? LLVMBuildZExt(bd, v, mt, "") : v, sp);
        for (int k = 0; k < nr; k++)
          if (lv[k].at_input)
            emit_store_elem(&f, lv[k].ins->shape.type, f.outs[k], emit_linear_index(&f, is, &i),
                            emit_elemental(&f, lv[k].ins, &i));
      } else {
        LLVMValueRef v = LLVMBuildLoad2(bd, mt, sp, "t");
        f.override_ins = hero;
        f.override_val = bit ? LLVMBuildTrunc(bd, v, em->t_i1, "") : v;
        for (int k = 0; k < nr; k++)
          if (!lv[k].at_input)
            emit_store_elem(&f, lv[k].ins->shape.type, f.outs[k], emit_linear_index(&f, os, &o),
                            emit_elemental(&f, lv[k].ins, &o));
        f.override_ins = NULL;
        f.override_val = NULL;
      }
      emitg_if_end(&f, &rg);
    }
    if (phase == 0) emitg_barrier(&f);
  }
  st = emit_kernel_end(&f);
  if (st) return st;
  snprintf(out->name, sizeof out->name, "%s", name);
  out->kind = EMIT_KIND_TRANSPOSE;
  out->parallel_n = hlo_shape_numel(os);
  out->grain = 1;
  emitg_launch_1d(out, blocks * GTR_T * GTR_ROWS, GTR_T * GTR_ROWS);
  return HJ_OK;
}

#undef GTR_T
#undef GTR_ROWS
