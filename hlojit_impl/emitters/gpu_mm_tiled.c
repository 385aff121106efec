/* gpu_mm_tiled.c — emits the shared-memory tiled f32 matmul kernel (gpu_mm.h has the
   ABI) as LLVM IR: the classic design that reaches most of cuBLAS's sgemm without tensor
   cores — a T x T output tile per block, an 8 x 8 register block per thread, K staged
   through shared memory BK at a time, float4 global loads, A stored transposed, two
   shared buffers so the next slice loads while this one is used.

   Parameters: T = 128 (256 threads) or 64 (64 threads): always (T/8)^2 threads, each
   owning 8 x 8 outputs; BK = 8 (or 16); shared rows are padded to T + 4 floats.

   Walk-through, T = 128, BK = 8, C[300,500] = A[300,64] x B[64,500], block (bx, by) = (1, 2)
   owns C rows 256..383 and columns 128..255 (rows 300..383 do not exist: bounds below).
   Thread t = 37 is (ty, tx) = (37 / 16, 37 % 16) = (2, 5).
    1. Its outputs: rows {ty*4 + i} and {64 + ty*4 + i}, i < 4 = 8..11 and 72..75 of the
       tile; columns {tx*4 + j} and {64 + tx*4 + j} = 20..23 and 84..87. Two 4-wide
       groups each way, not 8 adjacent, so that in the compute step the 8 threads of a
       quarter-warp read 8 consecutive float4s of B's shared row (128 bytes, conflict-free)
       and every thread of a half-warp the same float4 of A's (a broadcast).
    2. Loading slice k0..k0+7 of A (128 x 8 = 256 float4s, one per thread): t reads the
       float4 f = t: tile row f / 2 = 18, k offset (f % 2) * 4 = 4, i.e. A[256 + 18][k0 +
       4 .. k0 + 7] — one 16-byte ld.global.nc.v4.f32 (K % 4 == 0 and A 16-byte aligned; else
       four checked scalar loads). Row 274 < 300 exists; a missing row or k (>= K) loads
       from a clamped, in-bounds address and is replaced by 0, so no load is ever out of
       bounds and the zeros add nothing.
    3. It stores those 4 values transposed: As[k][18] for k = 4..7 (As is [BK][T + 4]).
       In one warp, t = 0..31 store rows 0..15 at k offsets 0 and 4; row stride 132 floats
       puts offset 4 exactly 16 banks away, so the 32 stores hit 32 different banks.
    4. B's slice (8 x 128 = 256 float4s): t reads B[k0 + t / 32][128 + (t % 32) * 4 ..] =
       row k0 + 1, columns 148..151, and stores it as one float4 in Bs[1][20..23]
       (consecutive threads, consecutive 16 bytes). B given as [N,K] is loaded like A.
    5. Compute, for each of the 8 k of the slice: a = As[k][8..11] and As[k][72..75], b =
       Bs[k][20..23] and Bs[k][84..87] (four ld.shared.v4.f32), then 64 fma.rn.f32:
       acc[i][j] += a[i] * b[j]. 16 floats read from shared memory feed 64 FMAs.
    6. Double buffering: the loop body for slice s first issues the global loads of slice
       s + 1 into registers (step 2-4's loads), computes slice s from shared buffer s % 2,
       then stores the registers into buffer (s + 1) % 2 and meets the one bar.sync of the
       iteration. Nobody writes buffer (s + 1) % 2 before everyone passed the previous
       barrier, i.e. finished reading it at slice s - 1, so one barrier per slice suffices.
       The last iteration re-loads the last slice (into the buffer nobody reads again), so
       when BK divides K (64 here) no k is ever out of bounds and k needs no check at all.
    7. Epilogue: for each of its 8 rows and 2 column groups, the 4 values pass through the
       epilogue hook (at clamped indices) and, when row < M and column < N, are stored —
       as one float4 (16 consecutive threads write 256 contiguous bytes of a row) when
       N % 4 == 0, else element by element. Thread 37's rows 256 + 72.. = 328.. >= 300 of
       the second group store nothing.
   Batches: blockIdx.z = b offsets A, B and C by b times their strides.

   Invariants: every global load is in bounds by construction (clamped indices), every
   store is guarded; accumulation order over k is fixed (k ascending), so results are the
   same bits on every run and for every launch configuration of the same spec. */
#include "gpu_mm.h"
#include <string.h>

void emit_gpu_mm_init(emit_gpu_mm *s) {
  memset(s, 0, sizeof *s);
  s->batch = 1;
  s->bk = 8;
  s->sm_count = 108;
  s->aligned16 = true;
}

int emit_gpu_mm_choose_tile(const emit_gpu_mm *s) {
  if (s->m <= 64 || s->n <= 64) return 64;   /* a 128-tile would be half empty */
  int64_t blocks = ((s->m + 127) / 128) * ((s->n + 127) / 128) * (s->batch > 0 ? s->batch : 1);
  return blocks >= (s->sm_count > 0 ? s->sm_count : 108) ? 128 : 64;
}

typedef struct mm {
  LLVMContextRef c;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  LLVMValueRef fn;
  LLVMTypeRef f32, i32, i64, v4, gptr;
  const emit_gpu_mm *s;
  int T, BK, NT, TPR, half, row;       /* row: floats per padded shared row (T + 4) */
  int loads;                           /* float4s of one operand's slice per thread */
  bool vec_a, vec_b, vec_c;
  LLVMValueRef A, B, C, extra[16];     /* this batch item's bases */
  LLVMValueRef as, bs;                 /* the shared arrays [2][BK][row] */
  LLVMValueRef tid, tx, ty, bz, row0, col0;
  LLVMValueRef fma, barrier;
} mm;

static LLVMValueRef mm_min(mm *x, LLVMValueRef a, int64_t hi) {   /* min(a, hi), i64 */
  LLVMValueRef h = emit_ci(x->i64, hi);
  return LLVMBuildSelect(x->b, LLVMBuildICmp(x->b, LLVMIntSLT, a, h, ""), a, h, "");
}
static LLVMValueRef mm_lt(mm *x, LLVMValueRef a, int64_t hi) {
  return LLVMBuildICmp(x->b, LLVMIntSLT, a, emit_ci(x->i64, hi), "");
}
static LLVMValueRef mm_zext(mm *x, LLVMValueRef v) { return LLVMBuildZExt(x->b, v, x->i64, ""); }
static LLVMValueRef mm_gep(mm *x, LLVMValueRef base, LLVMValueRef idx) {
  return LLVMBuildGEP2(x->b, x->f32, base, &idx, 1, "");
}
static LLVMValueRef mm_load(mm *x, LLVMTypeRef t, LLVMValueRef p, unsigned align) {
  LLVMValueRef v = LLVMBuildLoad2(x->b, t, p, "");
  LLVMSetAlignment(v, align);
  return v;
}
static void mm_store(mm *x, LLVMValueRef v, LLVMValueRef p, unsigned align) {
  LLVMSetAlignment(LLVMBuildStore(x->b, v, p), align);
}
static LLVMValueRef mm_sreg(mm *x, const char *name, emit_gpu_err *e) {
  LLVMValueRef f = emit_gpu_intrinsic(x->mod, name, NULL, 0, e);
  return f ? LLVMBuildCall2(x->b, LLVMGlobalGetValueType(f), f, NULL, 0, "") : NULL;
}

/* A global element row-major [rows, ld] at (r, k): |v4| of 4 along k, or 4 scalars each
   checked; out-of-bounds elements are 0, their addresses clamped into bounds. |kcheck|
   false: the caller knows k + 3 < ld (no check along k). */
static LLVMValueRef mm_load4(mm *x, LLVMValueRef base, int64_t rows, int64_t ld, LLVMValueRef r,
                             LLVMValueRef k, bool vec, bool kcheck) {
  LLVMValueRef rin = mm_lt(x, r, rows), rc = mm_min(x, r, rows - 1);
  LLVMValueRef rowp = LLVMBuildMul(x->b, rc, emit_ci(x->i64, ld), "");
  if (vec) {
    LLVMValueRef in = kcheck ? LLVMBuildAnd(x->b, rin, mm_lt(x, k, ld), "") : rin;
    LLVMValueRef kc = kcheck ? mm_min(x, k, ld - 4) : k;
    LLVMValueRef p = mm_gep(x, base, LLVMBuildAdd(x->b, rowp, kc, ""));
    return LLVMBuildSelect(x->b, in, mm_load(x, x->v4, p, 16), LLVMConstNull(x->v4), "");
  }
  LLVMValueRef v = LLVMConstNull(x->v4);
  for (int e = 0; e < 4; e++) {
    LLVMValueRef ke = LLVMBuildAdd(x->b, k, emit_ci(x->i64, e), "");
    LLVMValueRef in = kcheck ? LLVMBuildAnd(x->b, rin, mm_lt(x, ke, ld), "") : rin;
    LLVMValueRef kc = kcheck ? mm_min(x, ke, ld - 1) : ke;
    LLVMValueRef p = mm_gep(x, base, LLVMBuildAdd(x->b, rowp, kc, ""));
    LLVMValueRef s = LLVMBuildSelect(x->b, in, mm_load(x, x->f32, p, 4), LLVMConstReal(x->f32, 0), "");
    v = LLVMBuildInsertElement(x->b, v, s, emit_ci(x->i32, e), "");
  }
  return v;
}

/* B as [K,N] at row |k| (in bounds: whole slices), columns col..col+3 (N % 4 == 0). */
static LLVMValueRef mm_load4_cols(mm *x, LLVMValueRef k, LLVMValueRef col) {
  const emit_gpu_mm *s = x->s;
  LLVMValueRef in = mm_lt(x, col, s->n), cc = mm_min(x, col, s->n - 4);
  LLVMValueRef p = mm_gep(x, x->B, LLVMBuildAdd(x->b, LLVMBuildMul(x->b, k, emit_ci(x->i64, s->n), ""), cc, ""));
  return LLVMBuildSelect(x->b, in, mm_load(x, x->v4, p, 16), LLVMConstNull(x->v4), "");
}

/* Float4 number l of this thread within a slice laid out as [outer][inner/4] float4s. */
static void mm_split(mm *x, int l, int inner4, LLVMValueRef *outer, LLVMValueRef *inner) {
  LLVMValueRef f = LLVMBuildAdd(x->b, x->tid, emit_ci(x->i32, (int64_t)l * x->NT), "");
  *outer = LLVMBuildUDiv(x->b, f, emit_ci(x->i32, inner4), "");
  *inner = LLVMBuildMul(x->b, LLVMBuildURem(x->b, f, emit_ci(x->i32, inner4), ""), emit_ci(x->i32, 4), "");
}

/* Loads the slice starting at k |k0| (i64) of A (which = 0) or B (1) into |regs|. Slices
   are whole when BK divides K: then no k is ever out of bounds (the prefetch past the last
   slice re-reads the last one) and only rows and columns are checked. */
static void mm_load_slice(mm *x, int which, LLVMValueRef k0, LLVMValueRef *regs) {
  const emit_gpu_mm *s = x->s;
  bool kcheck = s->k % x->BK != 0;
  bool kmajor = which == 1 && !s->b_nk;   /* B as [K,N]: rows of the slice are k */
  for (int l = 0; l < x->loads; l++) {
    LLVMValueRef o, in;
    if (!kmajor) {   /* [rows, K]: T rows of BK/4 float4s, 4 consecutive k each */
      mm_split(x, l, x->BK / 4, &o, &in);
      LLVMValueRef r = LLVMBuildAdd(x->b, which ? x->col0 : x->row0, mm_zext(x, o), "");
      LLVMValueRef k = LLVMBuildAdd(x->b, k0, mm_zext(x, in), "");
      regs[l] = mm_load4(x, which ? x->B : x->A, which ? s->n : s->m, s->k, r, k,
                         which ? x->vec_b : x->vec_a, kcheck);
    } else {         /* [K, N]: BK rows of T/4 float4s, 4 consecutive columns each */
      mm_split(x, l, x->T / 4, &o, &in);
      LLVMValueRef k = LLVMBuildAdd(x->b, k0, mm_zext(x, o), "");
      LLVMValueRef col = LLVMBuildAdd(x->b, x->col0, mm_zext(x, in), "");
      regs[l] = kcheck || !x->vec_b
                    ? mm_load4(x, x->B, s->k, s->n, k, col, x->vec_b, true)
                    : mm_load4_cols(x, k, col);
    }
  }
}

/* Stores |regs| (from mm_load_slice) into shared buffer |buf| (i32 offset in floats) as
   [BK][T + 4]: transposed for operands that came as [rows, K]. */
static void mm_store_slice(mm *x, int which, LLVMValueRef buf, LLVMValueRef *regs) {
  bool kmajor = which == 1 && !x->s->b_nk;
  LLVMValueRef arr = which ? x->bs : x->as;
  for (int l = 0; l < x->loads; l++) {
    LLVMValueRef o, in;
    if (!kmajor) {
      mm_split(x, l, x->BK / 4, &o, &in);
      for (int e = 0; e < 4; e++) {   /* element e of the float4 is k = in + e */
        LLVMValueRef ke = LLVMBuildAdd(x->b, in, emit_ci(x->i32, e), "");
        LLVMValueRef idx = LLVMBuildAdd(
            x->b, buf, LLVMBuildAdd(x->b, LLVMBuildMul(x->b, ke, emit_ci(x->i32, x->row), ""), o, ""), "");
        mm_store(x, LLVMBuildExtractElement(x->b, regs[l], emit_ci(x->i32, e), ""), mm_gep(x, arr, idx), 4);
      }
    } else {
      mm_split(x, l, x->T / 4, &o, &in);
      LLVMValueRef idx = LLVMBuildAdd(
          x->b, buf, LLVMBuildAdd(x->b, LLVMBuildMul(x->b, o, emit_ci(x->i32, x->row), ""), in, ""), "");
      mm_store(x, regs[l], mm_gep(x, arr, idx), 16);
    }
  }
}

/* The 8 k steps of one slice from shared buffer |buf|: acc[i*8 + j] += a[i] * b[j]. */
static void mm_compute(mm *x, LLVMValueRef buf, LLVMValueRef *acc) {
  LLVMValueRef a_off = LLVMBuildMul(x->b, x->ty, emit_ci(x->i32, 4), "");
  LLVMValueRef b_off = LLVMBuildMul(x->b, x->tx, emit_ci(x->i32, 4), "");
  LLVMTypeRef fty = LLVMGlobalGetValueType(x->fma);
  for (int k = 0; k < x->BK; k++) {
    LLVMValueRef kb = LLVMBuildAdd(x->b, buf, emit_ci(x->i32, (int64_t)k * x->row), "");
    LLVMValueRef a[8], b[8];
    for (int h = 0; h < 2; h++) {
      LLVMValueRef ia = LLVMBuildAdd(x->b, kb, LLVMBuildAdd(x->b, a_off, emit_ci(x->i32, h * x->half), ""), "");
      LLVMValueRef ib = LLVMBuildAdd(x->b, kb, LLVMBuildAdd(x->b, b_off, emit_ci(x->i32, h * x->half), ""), "");
      LLVMValueRef va = mm_load(x, x->v4, mm_gep(x, x->as, ia), 16);
      LLVMValueRef vb = mm_load(x, x->v4, mm_gep(x, x->bs, ib), 16);
      for (int e = 0; e < 4; e++) {
        a[h * 4 + e] = LLVMBuildExtractElement(x->b, va, emit_ci(x->i32, e), "");
        b[h * 4 + e] = LLVMBuildExtractElement(x->b, vb, emit_ci(x->i32, e), "");
      }
    }
    for (int i = 0; i < 8; i++)
      for (int j = 0; j < 8; j++) {
        LLVMValueRef args[3] = { a[i], b[j], acc[i * 8 + j] };
        acc[i * 8 + j] = LLVMBuildCall2(x->b, fty, x->fma, args, 3, "");
      }
  }
}

/* Register block row i (0..7) / column j (0..7) -> row/column within the tile (i32). */
static LLVMValueRef mm_tile_index(mm *x, LLVMValueRef t, int i) {
  return LLVMBuildAdd(x->b, LLVMBuildMul(x->b, t, emit_ci(x->i32, 4), ""),
                      emit_ci(x->i32, (i / 4) * x->half + i % 4), "");
}

static void mm_epilogue(mm *x, LLVMValueRef *acc) {
  const emit_gpu_mm *s = x->s;
  for (int i = 0; i < 8; i++) {
    LLVMValueRef row = LLVMBuildAdd(x->b, x->row0, mm_zext(x, mm_tile_index(x, x->ty, i)), "");
    LLVMValueRef rin = mm_lt(x, row, s->m), rowc = mm_min(x, row, s->m - 1);
    LLVMValueRef rowp = LLVMBuildMul(x->b, row, emit_ci(x->i64, s->n), "");
    for (int g = 0; g < 2; g++) {
      LLVMValueRef col = LLVMBuildAdd(x->b, x->col0, mm_zext(x, mm_tile_index(x, x->tx, g * 4)), "");
      LLVMValueRef v[4];
      for (int j = 0; j < 4; j++) {
        v[j] = acc[i * 8 + g * 4 + j];
        if (!s->epilogue) continue;
        emit_gpu_mm_epi ea = {
          .b = x->b, .mod = x->mod, .kernel = x->fn, .acc = v[j], .row = rowc,
          .col = mm_min(x, LLVMBuildAdd(x->b, col, emit_ci(x->i64, j), ""), s->n - 1), .batch = x->bz,
          .extra = x->extra, .n_extra = s->n_extra,
        };
        v[j] = s->epilogue(s->epilogue_user, &ea);
      }
      for (int j = 0; j < (x->vec_c ? 1 : 4); j++) {
        LLVMValueRef cj = LLVMBuildAdd(x->b, col, emit_ci(x->i64, j), "");
        LLVMValueRef in = LLVMBuildAnd(x->b, rin, mm_lt(x, cj, s->n), "");
        LLVMBasicBlockRef st = LLVMAppendBasicBlockInContext(x->c, x->fn, "store");
        LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(x->c, x->fn, "next");
        LLVMBuildCondBr(x->b, in, st, next);
        LLVMPositionBuilderAtEnd(x->b, st);
        LLVMValueRef p = mm_gep(x, x->C, LLVMBuildAdd(x->b, rowp, cj, ""));
        if (x->vec_c) {
          LLVMValueRef q = LLVMGetUndef(x->v4);
          for (int e = 0; e < 4; e++) q = LLVMBuildInsertElement(x->b, q, v[e], emit_ci(x->i32, e), "");
          mm_store(x, q, p, 16);
        } else {
          mm_store(x, v[j], p, 4);
        }
        LLVMBuildBr(x->b, next);
        LLVMPositionBuilderAtEnd(x->b, next);
      }
    }
  }
}

static hj_status mm_check(const emit_gpu_mm *s, int T, emit_gpu_err *e) {
  const char *why = NULL;
  if (s->m < 1 || s->n < 1 || s->k < 0) why = "m, n >= 1 and k >= 0";
  else if (s->batch < 1 || s->batch > 65535) why = "batch in 1..65535";
  else if (s->stride_a < 0 || s->stride_b < 0 || s->stride_c < 0) why = "strides >= 0";
  else if (T != 64 && T != 128) why = "tile 0, 64 or 128";
  else if (s->bk != 8 && s->bk != 16) why = "bk 8 or 16";
  else if (s->n_extra < 0 || s->n_extra > 16) why = "at most 16 extra buffers";
  else if ((s->m + T - 1) / T > 65535) why = "m / tile <= 65535 (grid y)";
  else if (s->n_extra && !s->epilogue) why = "extra buffers only with an epilogue";
  else if (s->batch > 1 && s->stride_c < s->m * s->n) why = "batch items of C that do not overlap";
  if (!why) return HJ_OK;
  return emit_gpu_err_set(e, HJ_ERR_INVALID_ARG,
                        "tiled matmul: bad spec m=%lld n=%lld k=%lld batch=%lld tile=%d bk=%d: "
                        "needs %s", (long long)s->m, (long long)s->n, (long long)s->k,
                        (long long)s->batch, T, s->bk, why);
}

/* A and B: noalias readonly, which lets NVPTX read them through the non-coherent cache
   (ld.global.nc); C: not noalias, since an extra buffer may be C itself. */
static void mm_param_attrs(mm *x, unsigned i, bool input) {
  const char *in_attrs[] = { "noalias", "nocapture", "readonly" }, *out_attrs[] = { "nocapture" };
  const char **names = input ? in_attrs : out_attrs;
  for (int a = 0; a < (input ? 3 : 1); a++) {
    unsigned kind = LLVMGetEnumAttributeKindForName(names[a], strlen(names[a]));
    LLVMAddAttributeAtIndex(x->fn, i + 1, LLVMCreateEnumAttribute(x->c, kind, 0));
  }
  if (x->s->aligned16 && i < 3) {
    unsigned kind = LLVMGetEnumAttributeKindForName("align", 5);
    LLVMAddAttributeAtIndex(x->fn, i + 1, LLVMCreateEnumAttribute(x->c, kind, 16));
  }
}

/* The register budget, as blocks per SM (ptxas -v, CUDA 13): the float4 path of the
   128-tile fits 128 registers a thread, i.e. 2 blocks of 256 threads per SM, the classic
   configuration; told nothing, ptxas for sm_90 picks the same 128 but spills 16 bytes.
   At that budget B as [N,K] (stored transposed too) spills 20 bytes on sm_90, BK = 16
   (twice the slice in flight) 8 bytes and a bias epilogue 12 bytes on sm_80, and the
   scalar (unaligned) paths need ~150: their budget is one block, which lets ptxas take
   what it needs (up to ~170). The 64-tile (64 threads, ~140 registers) needs no budget.
   Whether 2 blocks with a small spill beat 1 block is for a GPU to say: spec.min_blocks
   overrides the rule. */
static int mm_min_blocks(const mm *x) {
  const emit_gpu_mm *s = x->s;
  if (s->min_blocks) return s->min_blocks;
  if (x->T == 128) return x->vec_a && x->vec_b && !s->b_nk && x->BK == 8 && !s->epilogue ? 2 : 1;
  return 0;
}

static LLVMValueRef mm_shared(mm *x, const char *name, const char *suffix) {
  char gname[160];
  snprintf(gname, sizeof gname, "%s_%s", name, suffix);   /* PTX would spell '.' as _$_ */
  LLVMTypeRef t = LLVMArrayType2(x->f32, (uint64_t)2 * x->BK * x->row);
  LLVMValueRef g = LLVMAddGlobalInAddressSpace(x->mod, t, gname, 3);
  LLVMSetInitializer(g, LLVMGetUndef(t));
  LLVMSetLinkage(g, LLVMInternalLinkage);
  LLVMSetAlignment(g, 16);
  return g;
}

hj_status emit_gpu_mm_tiled(LLVMModuleRef mod, const char *name, const emit_gpu_mm *s,
                           emit_gpu_mm_launch *out, emit_gpu_err *e) {
  memset(out, 0, sizeof *out);
  int T = s->tile ? s->tile : emit_gpu_mm_choose_tile(s);
  hj_status st = mm_check(s, T, e);
  if (st != HJ_OK) return st;
  mm x = { .c = LLVMGetModuleContext(mod), .mod = mod, .s = s, .T = T, .BK = s->bk };
  x.NT = (T / 8) * (T / 8);
  x.TPR = T / 8;
  x.half = T / 2;
  x.row = T + 4;
  x.loads = T * x.BK / 4 / x.NT;
  x.f32 = LLVMFloatTypeInContext(x.c);
  x.i32 = LLVMInt32TypeInContext(x.c);
  x.i64 = LLVMInt64TypeInContext(x.c);
  x.v4 = LLVMVectorType(x.f32, 4);
  x.gptr = LLVMPointerTypeInContext(x.c, 1);
  /* float4 needs 16-byte aligned rows: row lengths and batch strides multiples of 4 */
  x.vec_a = s->aligned16 && s->k % 4 == 0 && s->stride_a % 4 == 0 && s->k > 0;
  x.vec_b = s->aligned16 && (s->b_nk ? s->k : s->n) % 4 == 0 && s->stride_b % 4 == 0 && s->k > 0;
  x.vec_c = s->aligned16 && s->n % 4 == 0 && s->stride_c % 4 == 0;

  LLVMTypeRef params[19];
  for (int i = 0; i < 3 + s->n_extra; i++) params[i] = x.gptr;
  x.fn = LLVMAddFunction(mod, name, LLVMFunctionType(LLVMVoidTypeInContext(x.c), params,
                                                     (unsigned)(3 + s->n_extra), 0));
  emit_gpu_mark_kernel(mod, x.fn, x.NT, mm_min_blocks(&x));
  mm_param_attrs(&x, 0, true);
  mm_param_attrs(&x, 1, true);
  mm_param_attrs(&x, 2, false);
  x.fma = emit_gpu_intrinsic(mod, "llvm.fma", &x.f32, 1, e);
  x.barrier = x.fma ? emit_gpu_intrinsic(mod, "llvm.nvvm.barrier0", NULL, 0, e) : NULL;
  if (!x.barrier) return e ? e->status : HJ_ERR_INTERNAL;
  x.as = mm_shared(&x, name, "as");
  x.bs = mm_shared(&x, name, "bs");

  x.b = LLVMCreateBuilderInContext(x.c);
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(x.c, x.fn, "entry");
  LLVMPositionBuilderAtEnd(x.b, entry);
  x.tid = mm_sreg(&x, "llvm.nvvm.read.ptx.sreg.tid.x", e);
  LLVMValueRef bx = mm_sreg(&x, "llvm.nvvm.read.ptx.sreg.ctaid.x", e);
  LLVMValueRef by = mm_sreg(&x, "llvm.nvvm.read.ptx.sreg.ctaid.y", e);
  LLVMValueRef bz = mm_sreg(&x, "llvm.nvvm.read.ptx.sreg.ctaid.z", e);
  if (!x.tid || !bx || !by || !bz) { LLVMDisposeBuilder(x.b); return e ? e->status : HJ_ERR_INTERNAL; }
  x.ty = LLVMBuildUDiv(x.b, x.tid, emit_ci(x.i32, x.TPR), "ty");
  x.tx = LLVMBuildURem(x.b, x.tid, emit_ci(x.i32, x.TPR), "tx");
  x.bz = mm_zext(&x, bz);
  x.row0 = LLVMBuildMul(x.b, mm_zext(&x, by), emit_ci(x.i64, T), "row0");
  x.col0 = LLVMBuildMul(x.b, mm_zext(&x, bx), emit_ci(x.i64, T), "col0");
  LLVMValueRef bases[3] = { LLVMGetParam(x.fn, 0), LLVMGetParam(x.fn, 1), LLVMGetParam(x.fn, 2) };
  int64_t strides[3] = { s->stride_a, s->stride_b, s->stride_c };
  for (int i = 0; i < 3; i++)
    bases[i] = mm_gep(&x, bases[i], LLVMBuildMul(x.b, x.bz, emit_ci(x.i64, strides[i]), ""));
  x.A = bases[0], x.B = bases[1], x.C = bases[2];
  for (int i = 0; i < s->n_extra; i++) x.extra[i] = LLVMGetParam(x.fn, (unsigned)(3 + i));

  LLVMValueRef acc[64];
  for (int i = 0; i < 64; i++) acc[i] = LLVMConstReal(x.f32, 0);
  int64_t nk = (s->k + x.BK - 1) / x.BK;
  LLVMTypeRef bar_ty = LLVMGlobalGetValueType(x.barrier);
  LLVMValueRef ra[4], rb[4];
  if (nk > 0) {
    /* prologue: slice 0 into buffer 0 */
    mm_load_slice(&x, 0, emit_ci(x.i64, 0), ra);
    mm_load_slice(&x, 1, emit_ci(x.i64, 0), rb);
    mm_store_slice(&x, 0, emit_ci(x.i32, 0), ra);
    mm_store_slice(&x, 1, emit_ci(x.i32, 0), rb);
    LLVMBuildCall2(x.b, bar_ty, x.barrier, NULL, 0, "");
    LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(x.c, x.fn, "kloop");
    LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(x.c, x.fn, "kdone");
    LLVMBuildBr(x.b, loop);
    LLVMPositionBuilderAtEnd(x.b, loop);
    LLVMValueRef kt = LLVMBuildPhi(x.b, x.i32, "kt"), phis[64];
    for (int i = 0; i < 64; i++) { phis[i] = LLVMBuildPhi(x.b, x.f32, ""); acc[i] = phis[i]; }
    LLVMValueRef cur = LLVMBuildAnd(x.b, kt, emit_ci(x.i32, 1), "");
    LLVMValueRef slice = emit_ci(x.i32, (int64_t)x.BK * x.row);   /* floats per buffer */
    LLVMValueRef buf = LLVMBuildMul(x.b, cur, slice, "buf");
    LLVMValueRef other = LLVMBuildMul(x.b, LLVMBuildXor(x.b, cur, emit_ci(x.i32, 1), ""), slice, "");
    LLVMValueRef kt1 = LLVMBuildAdd(x.b, kt, emit_ci(x.i32, 1), "");
    /* slice kt + 1, in flight during the compute; the last iteration re-reads the last
       slice (clamped), into the buffer nobody reads again */
    LLVMValueRef next = LLVMBuildSelect(x.b, LLVMBuildICmp(x.b, LLVMIntSLT, kt1, emit_ci(x.i32, nk), ""),
                                        kt1, emit_ci(x.i32, nk - 1), "");
    LLVMValueRef k0 = LLVMBuildMul(x.b, mm_zext(&x, next), emit_ci(x.i64, x.BK), "");
    mm_load_slice(&x, 0, k0, ra);
    mm_load_slice(&x, 1, k0, rb);
    mm_compute(&x, buf, acc);
    mm_store_slice(&x, 0, other, ra);
    mm_store_slice(&x, 1, other, rb);
    LLVMBuildCall2(x.b, bar_ty, x.barrier, NULL, 0, "");
    LLVMBuildCondBr(x.b, LLVMBuildICmp(x.b, LLVMIntSLT, kt1, emit_ci(x.i32, nk), ""), loop, exit);
    LLVMValueRef zero = emit_ci(x.i32, 0), fzero = LLVMConstReal(x.f32, 0);
    LLVMBasicBlockRef from[2] = { entry, loop };
    LLVMValueRef kin[2] = { zero, kt1 };
    LLVMAddIncoming(kt, kin, from, 2);
    for (int i = 0; i < 64; i++) {
      LLVMValueRef in[2] = { fzero, acc[i] };
      LLVMAddIncoming(phis[i], in, from, 2);
    }
    LLVMPositionBuilderAtEnd(x.b, exit);
  }
  mm_epilogue(&x, acc);
  LLVMBuildRetVoid(x.b);
  LLVMDisposeBuilder(x.b);

  out->tile = T;
  out->bk = x.BK;
  out->threads = x.NT;
  out->grid[0] = (unsigned)((s->n + T - 1) / T);
  out->grid[1] = (unsigned)((s->m + T - 1) / T);
  out->grid[2] = (unsigned)s->batch;
  out->block[0] = (unsigned)x.NT;
  out->block[1] = out->block[2] = 1;
  out->shared_bytes = nk > 0 ? (unsigned)(2 * 2 * x.BK * x.row * 4) : 0;
  out->vec_a = x.vec_a;
  out->vec_b = x.vec_b;
  out->vec_c = x.vec_c;
  return HJ_OK;
}
