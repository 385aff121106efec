/* gpu_mm_skinny.c — the skinny matmul kernel: C[b][M,N] = epilogue(A[b][M,K] x B[b]) for
   M <= EMIT_GPU_SKINNY_MAX_M rows (a decode step's matmuls: one token, M = 1), generated as
   LLVM IR with the tiled kernel's ABI and epilogue (gpu_mm.h), so it runs where the tiled
   kernel would (the CUDA backend's TILED way; gpu_matmul.c picks one of the two).

   Why a kernel of its own: at M = 1 the tiled kernel's 64-row tiles are 63/64 empty and
   leave most SMs idle (a 768 x 2304 matrix makes 36 blocks), and the library path is a
   cuBLAS gemm plus a separate epilogue kernel — two or more graph nodes per matmul, and
   cuBLAS's nodes cannot be updated in a CUDA graph (cuda_run.c): a decode block run once
   per layer with each layer's weights would be captured again on every run. This kernel is
   one node, updated in place like every other kernel of ours. Here the matmul is a pure
   stream of B (M x K floats of A against K x N of B): what matters is that every SM has
   loads in flight and that each warp's loads are contiguous.

   Two mappings, by B's layout (256 threads a block, 8 warps):
     B as [N,K] (rows of B are columns of C: x @ W^T, llm.c's layout):
       a warp per column n = blockIdx.x * 8 + warp. Lane l reads float4 number l, l + 32,
       l + 64 ... of B's row n (512 contiguous bytes per warp per step) and the same float4s
       of each of A's M rows, keeping M partial sums; a shuffle tree (down 16, 8, 4, 2, 1)
       sums the lanes; lane 0 applies the epilogue and stores C[m][n]. Grid ceil(N / 8).
     B as [K,N] (x @ W):
       the block owns 4L columns (L = 8, 4 or 2: the largest that still gives every SM two
       blocks, see gv_groups): thread t reads the float4 of columns 4 (t % L) .. + 3 at rows
       k = t / L, t / L + 256 / L, ... (each row's 4L floats contiguous: 32 to 128 bytes), and
       keeps M x 4 sums. Lanes of a warp that own the same columns sit L apart: a shuffle
       tree (down 16 .. L) leaves each warp's sums in lanes 0 .. L-1, which put them in
       shared memory [8][M][4L]; after the barrier thread t < M * 4L sums output (t / 4L,
       t % 4L) over the 8 warps in order, applies the epilogue and stores it (consecutive
       threads, consecutive columns). Grid ceil(N / 4L).
   Rows and columns past the edges, and the last partial k step, read clamped in-bounds
   addresses and use 0 (both factors, so an Inf never meets a 0). Float4 loads need
   16-byte aligned operands (spec.aligned16) and rows and batch strides that are multiples
   of 4 elements; else 4 checked scalar loads (B [K,N]) or scalar steps (B [N,K]).
   The batch is blockIdx.z, as in the tiled kernel.

   Invariants: every global load is in bounds by construction; every store is guarded; the
   order of every sum is fixed by the shapes (per lane k ascending, then the shuffle tree,
   then warps in order), so results are the same bits on every run and the same for every
   launch of the same spec. No launch bound beyond 256 threads (at most M x 4 sums a thread:
   no spills, test_cuda_matmul.c checks with ptxas). */
#include "gpu_mm.h"
#include <string.h>

enum { GV_THREADS = 256, GV_WARPS = GV_THREADS / 32 };

typedef struct gv {
  LLVMContextRef c;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  LLVMValueRef fn;
  LLVMTypeRef f32, i32, i64, v4;
  const emit_gpu_mm *s;
  int L;                               /* B [K,N]: float4 column groups per block */
  bool vec;                            /* float4 loads (see the top) */
  LLVMValueRef A, B, C, extra[16];     /* this batch item's bases */
  LLVMValueRef tid, bx, bz;            /* i32, i32, i64 */
  LLVMValueRef fma, shfl, barrier, red;
} gv;

static LLVMValueRef gv_f0(gv *x) { return emit_cf(x->f32, 0); }
static LLVMValueRef gv_zext(gv *x, LLVMValueRef v) { return LLVMBuildZExt(x->b, v, x->i64, ""); }
static LLVMValueRef gv_lt(gv *x, LLVMValueRef a, int64_t hi) {   /* i64 a < hi */
  return LLVMBuildICmp(x->b, LLVMIntSLT, a, emit_ci(x->i64, hi), "");
}
static LLVMValueRef gv_min(gv *x, LLVMValueRef a, int64_t hi) {  /* min(a, hi), i64 */
  return LLVMBuildSelect(x->b, gv_lt(x, a, hi), a, emit_ci(x->i64, hi), "");
}
static LLVMValueRef gv_add(gv *x, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildAdd(x->b, a, b, ""); }
static LLVMValueRef gv_mul(gv *x, LLVMValueRef a, int64_t v) { return LLVMBuildMul(x->b, a, emit_ci(x->i64, v), ""); }

/* Element |idx| (i64) of f32 buffer |base| as |t| (f32 or float4), |in| ? it : 0. */
static LLVMValueRef gv_load(gv *x, LLVMTypeRef t, LLVMValueRef base, LLVMValueRef idx, LLVMValueRef in) {
  LLVMValueRef p = LLVMBuildGEP2(x->b, x->f32, base, &idx, 1, "");
  LLVMValueRef v = LLVMBuildLoad2(x->b, t, p, "");
  LLVMSetAlignment(v, t == x->v4 ? 16 : 4);
  return LLVMBuildSelect(x->b, in, v, LLVMConstNull(t), "");
}

static LLVMValueRef gv_fma(gv *x, LLVMValueRef a, LLVMValueRef b, LLVMValueRef acc) {
  LLVMValueRef args[3] = { a, b, acc };
  return LLVMBuildCall2(x->b, LLVMGlobalGetValueType(x->fma), x->fma, args, 3, "");
}

static LLVMValueRef gv_lane(gv *x, LLVMValueRef v4, int e) {
  return LLVMBuildExtractElement(x->b, v4, emit_ci(x->i32, e), "");
}

/* v + (v of the lane |off| above), over the f32's bits (shfl.sync.down.b32, full warp). */
static LLVMValueRef gv_shfl_add(gv *x, LLVMValueRef v, int off) {
  LLVMValueRef args[4] = { emit_ci(x->i32, -1), LLVMBuildBitCast(x->b, v, x->i32, ""), emit_ci(x->i32, off), emit_ci(x->i32, 31) };
  LLVMValueRef r = LLVMBuildCall2(x->b, LLVMGlobalGetValueType(x->shfl), x->shfl, args, 4, "");
  return LLVMBuildFAdd(x->b, v, LLVMBuildBitCast(x->b, r, x->f32, ""), "");
}

static LLVMValueRef gv_sreg(gv *x, const char *name, emit_gpu_err *e) {
  LLVMValueRef f = emit_gpu_intrinsic(x->mod, name, NULL, 0, e);
  return f ? LLVMBuildCall2(x->b, LLVMGlobalGetValueType(f), f, NULL, 0, "") : NULL;
}

/* A counted loop 0 .. n-1 (n >= 1) over |nacc| f32 accumulators: gv_loop_begin leaves the
   builder in the body with |*i| (i64) and acc[] the phis; gv_loop_end closes it with the
   body's new values in acc[] and leaves the builder after it with acc[] the results. */
typedef struct gv_loop { LLVMBasicBlockRef pre, body; LLVMValueRef i, phis[32]; int nacc; int64_t n; } gv_loop;

static void gv_loop_begin(gv *x, gv_loop *l, int64_t n, LLVMValueRef *acc, int nacc) {
  l->n = n, l->nacc = nacc;
  l->pre = LLVMGetInsertBlock(x->b);
  l->body = LLVMAppendBasicBlockInContext(x->c, x->fn, "kloop");
  LLVMBuildBr(x->b, l->body);
  LLVMPositionBuilderAtEnd(x->b, l->body);
  l->i = LLVMBuildPhi(x->b, x->i64, "i");
  for (int a = 0; a < nacc; a++) acc[a] = l->phis[a] = LLVMBuildPhi(x->b, x->f32, "");
}

static void gv_loop_end(gv *x, gv_loop *l, LLVMValueRef *acc) {
  LLVMValueRef i1 = LLVMBuildNUWAdd(x->b, l->i, emit_ci(x->i64, 1), "");
  LLVMBasicBlockRef last = LLVMGetInsertBlock(x->b);
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(x->c, x->fn, "kdone");
  LLVMBuildCondBr(x->b, gv_lt(x, i1, l->n), l->body, done);
  LLVMBasicBlockRef from[2] = { l->pre, last };
  LLVMValueRef iv[2] = { emit_ci(x->i64, 0), i1 };
  LLVMAddIncoming(l->i, iv, from, 2);
  for (int a = 0; a < l->nacc; a++) {
    LLVMValueRef v[2] = { gv_f0(x), acc[a] };
    LLVMAddIncoming(l->phis[a], v, from, 2);
  }
  LLVMPositionBuilderAtEnd(x->b, done);
}

/* Runs the epilogue on |acc| at (row, col) (both in bounds) and stores it at C[row][col]. */
static void gv_store(gv *x, LLVMValueRef acc, LLVMValueRef row, LLVMValueRef col) {
  const emit_gpu_mm *s = x->s;
  LLVMValueRef v = acc;
  if (s->epilogue) {
    emit_gpu_mm_epi ea = { .b = x->b, .mod = x->mod, .kernel = x->fn, .acc = acc, .row = row,
                                 .col = col, .batch = x->bz, .extra = x->extra, .n_extra = s->n_extra };
    v = s->epilogue(s->epilogue_user, &ea);
  }
  LLVMValueRef idx = gv_add(x, gv_mul(x, row, s->n), col);
  LLVMSetAlignment(LLVMBuildStore(x->b, v, LLVMBuildGEP2(x->b, x->f32, x->C, &idx, 1, "")), 4);
}

/* Branches to a new block when |cond|, else to |skip|; leaves the builder in the new one. */
static void gv_if(gv *x, LLVMValueRef cond, LLVMBasicBlockRef skip) {
  LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(x->c, x->fn, "then");
  LLVMBuildCondBr(x->b, cond, then, skip);
  LLVMPositionBuilderAtEnd(x->b, then);
}

/* ---- B as [N,K]: a warp per column --------------------------------------------------------- */

static void gv_emit_nk(gv *x) {
  const emit_gpu_mm *s = x->s;
  const int M = (int)s->m;
  LLVMValueRef lane = gv_zext(x, LLVMBuildURem(x->b, x->tid, emit_ci(x->i32, 32), "lane"));
  LLVMValueRef warp = gv_zext(x, LLVMBuildUDiv(x->b, x->tid, emit_ci(x->i32, 32), "warp"));
  LLVMValueRef n = gv_add(x, gv_mul(x, gv_zext(x, x->bx), GV_WARPS), warp);
  LLVMBasicBlockRef out = LLVMAppendBasicBlockInContext(x->c, x->fn, "out");
  gv_if(x, gv_lt(x, n, s->n), out);   /* a whole warp leaves: no shuffle misses a lane */
  LLVMValueRef acc[EMIT_GPU_SKINNY_MAX_M];
  for (int m = 0; m < M; m++) acc[m] = gv_f0(x);
  const int64_t items = x->vec ? s->k / 4 : s->k;   /* float4s or floats of a row */
  if (items > 0) {
    gv_loop l;
    gv_loop_begin(x, &l, (items + 31) / 32, acc, M);
    LLVMValueRef item = gv_add(x, lane, gv_mul(x, l.i, 32));
    LLVMValueRef in = gv_lt(x, item, items), k = gv_min(x, item, items - 1);
    if (x->vec) k = gv_mul(x, k, 4);
    LLVMTypeRef t = x->vec ? x->v4 : x->f32;
    LLVMValueRef bv = gv_load(x, t, x->B, gv_add(x, gv_mul(x, n, s->k), k), in);
    for (int m = 0; m < M; m++) {
      LLVMValueRef av = gv_load(x, t, x->A, gv_add(x, emit_ci(x->i64, (int64_t)m * s->k), k), in);
      if (!x->vec) { acc[m] = gv_fma(x, av, bv, acc[m]); continue; }
      for (int e = 0; e < 4; e++) acc[m] = gv_fma(x, gv_lane(x, av, e), gv_lane(x, bv, e), acc[m]);
    }
    gv_loop_end(x, &l, acc);
  }
  for (int off = 16; off >= 1; off /= 2)
    for (int m = 0; m < M; m++) acc[m] = gv_shfl_add(x, acc[m], off);
  gv_if(x, LLVMBuildICmp(x->b, LLVMIntEQ, lane, emit_ci(x->i64, 0), ""), out);
  for (int m = 0; m < M; m++) gv_store(x, acc[m], emit_ci(x->i64, m), n);
  LLVMBuildBr(x->b, out);
  LLVMPositionBuilderAtEnd(x->b, out);
}

/* ---- B as [K,N]: 4L columns a block -------------------------------------------------------- */

static void gv_emit_kn(gv *x) {
  const emit_gpu_mm *s = x->s;
  const int M = (int)s->m, L = x->L, S = GV_THREADS / L, W = 4 * L;   /* W: columns a block */
  LLVMValueRef tid = gv_zext(x, x->tid);
  LLVMValueRef cg = LLVMBuildURem(x->b, tid, emit_ci(x->i64, L), "cg");
  LLVMValueRef ks = LLVMBuildUDiv(x->b, tid, emit_ci(x->i64, L), "ks");
  LLVMValueRef col0 = gv_mul(x, gv_zext(x, x->bx), W);
  LLVMValueRef col = gv_add(x, col0, gv_mul(x, cg, 4));
  LLVMValueRef acc[4 * EMIT_GPU_SKINNY_MAX_M];
  for (int a = 0; a < 4 * M; a++) acc[a] = gv_f0(x);
  if (s->k > 0) {
    gv_loop l;
    gv_loop_begin(x, &l, (s->k + S - 1) / S, acc, 4 * M);
    LLVMValueRef kk = gv_add(x, ks, gv_mul(x, l.i, S));
    LLVMValueRef kin = gv_lt(x, kk, s->k), k = gv_min(x, kk, s->k - 1);
    LLVMValueRef row = gv_mul(x, k, s->n), bv[4];
    if (x->vec) {   /* N % 4 == 0: col < N means all four are */
      LLVMValueRef in = LLVMBuildAnd(x->b, kin, gv_lt(x, col, s->n), "");
      LLVMValueRef v = gv_load(x, x->v4, x->B, gv_add(x, row, gv_min(x, col, s->n - 4)), in);
      for (int j = 0; j < 4; j++) bv[j] = gv_lane(x, v, j);
    } else {
      for (int j = 0; j < 4; j++) {
        LLVMValueRef cj = gv_add(x, col, emit_ci(x->i64, j));
        LLVMValueRef in = LLVMBuildAnd(x->b, kin, gv_lt(x, cj, s->n), "");
        bv[j] = gv_load(x, x->f32, x->B, gv_add(x, row, gv_min(x, cj, s->n - 1)), in);
      }
    }
    for (int m = 0; m < M; m++) {
      LLVMValueRef av = gv_load(x, x->f32, x->A, gv_add(x, emit_ci(x->i64, (int64_t)m * s->k), k), kin);
      for (int j = 0; j < 4; j++) acc[m * 4 + j] = gv_fma(x, av, bv[j], acc[m * 4 + j]);
    }
    gv_loop_end(x, &l, acc);
  }
  for (int off = 16; off >= L; off /= 2)
    for (int a = 0; a < 4 * M; a++) acc[a] = gv_shfl_add(x, acc[a], off);
  /* lanes 0 .. L-1 of each warp: red[warp][m][4 cg + j] */
  LLVMValueRef lane = LLVMBuildURem(x->b, tid, emit_ci(x->i64, 32), "");
  LLVMValueRef warp = LLVMBuildUDiv(x->b, tid, emit_ci(x->i64, 32), "");
  LLVMBasicBlockRef synced = LLVMAppendBasicBlockInContext(x->c, x->fn, "synced");
  gv_if(x, gv_lt(x, lane, L), synced);
  LLVMTypeRef redt = LLVMGlobalGetValueType(x->red);
  for (int m = 0; m < M; m++)
    for (int j = 0; j < 4; j++) {
      LLVMValueRef idx[2] = { emit_ci(x->i64, 0), gv_add(x, gv_mul(x, warp, (int64_t)M * W),
                                                   gv_add(x, emit_ci(x->i64, (int64_t)m * W + j), gv_mul(x, cg, 4))) };
      LLVMSetAlignment(LLVMBuildStore(x->b, acc[m * 4 + j], LLVMBuildGEP2(x->b, redt, x->red, idx, 2, "")), 4);
    }
  LLVMBuildBr(x->b, synced);
  LLVMPositionBuilderAtEnd(x->b, synced);
  LLVMBuildCall2(x->b, LLVMGlobalGetValueType(x->barrier), x->barrier, NULL, 0, "");
  /* thread t < M * W: output (t / W, t % W) of the block */
  LLVMBasicBlockRef out = LLVMAppendBasicBlockInContext(x->c, x->fn, "out");
  LLVMValueRef m = LLVMBuildUDiv(x->b, tid, emit_ci(x->i64, W), "m"), cc = LLVMBuildURem(x->b, tid, emit_ci(x->i64, W), "cc");
  LLVMValueRef c = gv_add(x, col0, cc);
  gv_if(x, LLVMBuildAnd(x->b, gv_lt(x, tid, (int64_t)M * W), gv_lt(x, c, s->n), ""), out);
  LLVMValueRef sum = NULL;
  for (int w = 0; w < GV_WARPS; w++) {
    LLVMValueRef at = gv_add(x, gv_mul(x, m, W), gv_add(x, cc, emit_ci(x->i64, (int64_t)w * M * W)));
    LLVMValueRef idx[2] = { emit_ci(x->i64, 0), at };
    LLVMValueRef v = LLVMBuildLoad2(x->b, x->f32, LLVMBuildGEP2(x->b, redt, x->red, idx, 2, ""), "");
    LLVMSetAlignment(v, 4);
    sum = sum ? LLVMBuildFAdd(x->b, sum, v, "") : v;
  }
  gv_store(x, sum, m, c);
  LLVMBuildBr(x->b, out);
  LLVMPositionBuilderAtEnd(x->b, out);
}

/* ---- the kernel ------------------------------------------------------------------------------ */

/* B [K,N]: L = 8, 4 or 2 float4 column groups a block — the widest rows (128, 64, 32 bytes)
   that still make two blocks per SM, else the narrowest. */
static int gv_groups(const emit_gpu_mm *s) {
  int64_t want = 2 * (s->sm_count > 0 ? s->sm_count : 108);
  int L = 8;
  while (L > 2 && ((s->n + 4 * L - 1) / (4 * L)) * s->batch < want) L /= 2;
  return L;
}

static hj_status gv_check(const emit_gpu_mm *s, emit_gpu_err *e) {
  const char *why = NULL;
  if (s->m < 1 || s->m > EMIT_GPU_SKINNY_MAX_M) why = "1 <= m <= EMIT_GPU_SKINNY_MAX_M (8)";
  else if (s->n < 1 || s->k < 0) why = "n >= 1 and k >= 0";
  else if (s->batch < 1 || s->batch > 65535) why = "batch in 1..65535";
  else if (s->stride_a < 0 || s->stride_b < 0 || s->stride_c < 0) why = "strides >= 0";
  else if (s->n_extra < 0 || s->n_extra > 16) why = "at most 16 extra buffers";
  else if (s->n_extra && !s->epilogue) why = "extra buffers only with an epilogue";
  else if (s->batch > 1 && s->stride_c < s->m * s->n) why = "batch items of C that do not overlap";
  else if (s->n / GV_WARPS >= INT32_MAX) why = "n / 8 < 2^31 (grid x)";
  if (!why) return HJ_OK;
  return emit_gpu_err_set(e, HJ_ERR_INVALID_ARG, "skinny matmul: bad spec m=%lld n=%lld k=%lld batch=%lld: needs %s",
                        (long long)s->m, (long long)s->n, (long long)s->k, (long long)s->batch, why);
}

static void gv_param_attrs(gv *x, unsigned i, bool input) {
  const char *names[] = { "noalias", "nocapture", "readonly" };   /* C: nocapture only */
  for (int a = input ? 0 : 1; a < (input ? 3 : 2); a++) {
    unsigned kind = LLVMGetEnumAttributeKindForName(names[a], strlen(names[a]));
    LLVMAddAttributeAtIndex(x->fn, i + 1, LLVMCreateEnumAttribute(x->c, kind, 0));
  }
  if (x->s->aligned16) {
    unsigned kind = LLVMGetEnumAttributeKindForName("align", 5);
    LLVMAddAttributeAtIndex(x->fn, i + 1, LLVMCreateEnumAttribute(x->c, kind, 16));
  }
}

hj_status emit_gpu_mm_skinny(LLVMModuleRef mod, const char *name, const emit_gpu_mm *s,
                         emit_gpu_mm_launch *out, emit_gpu_err *e) {
  memset(out, 0, sizeof *out);
  hj_status st = gv_check(s, e);
  if (st != HJ_OK) return st;
  gv x = { .c = LLVMGetModuleContext(mod), .mod = mod, .s = s };
  x.f32 = LLVMFloatTypeInContext(x.c);
  x.i32 = LLVMInt32TypeInContext(x.c);
  x.i64 = LLVMInt64TypeInContext(x.c);
  x.v4 = LLVMVectorType(x.f32, 4);
  x.L = s->b_nk ? 0 : gv_groups(s);
  x.vec = s->aligned16 && s->stride_b % 4 == 0 &&
          (s->b_nk ? s->k % 4 == 0 && s->stride_a % 4 == 0 : s->n % 4 == 0);

  LLVMTypeRef gptr = LLVMPointerTypeInContext(x.c, 1), params[19];
  for (int i = 0; i < 3 + s->n_extra; i++) params[i] = gptr;
  x.fn = LLVMAddFunction(mod, name, LLVMFunctionType(LLVMVoidTypeInContext(x.c), params,
                                                     (unsigned)(3 + s->n_extra), 0));
  emit_gpu_mark_kernel(mod, x.fn, GV_THREADS, 0);
  gv_param_attrs(&x, 0, true);
  gv_param_attrs(&x, 1, true);
  gv_param_attrs(&x, 2, false);
  x.fma = emit_gpu_intrinsic(mod, "llvm.fma", &x.f32, 1, e);
  x.shfl = x.fma ? emit_gpu_intrinsic(mod, "llvm.nvvm.shfl.sync.down.i32", NULL, 0, e) : NULL;
  x.barrier = x.shfl ? emit_gpu_intrinsic(mod, "llvm.nvvm.barrier0", NULL, 0, e) : NULL;
  if (!x.barrier) return e ? e->status : HJ_ERR_INTERNAL;
  if (!s->b_nk) {   /* [8 warps][M][4L] partial sums */
    char gname[160];
    snprintf(gname, sizeof gname, "%s_red", name);
    LLVMTypeRef t = LLVMArrayType2(x.f32, (uint64_t)GV_WARPS * s->m * 4 * x.L);
    x.red = LLVMAddGlobalInAddressSpace(mod, t, gname, 3);
    LLVMSetInitializer(x.red, LLVMGetUndef(t));
    LLVMSetLinkage(x.red, LLVMInternalLinkage);
    LLVMSetAlignment(x.red, 16);
  }

  x.b = LLVMCreateBuilderInContext(x.c);
  LLVMPositionBuilderAtEnd(x.b, LLVMAppendBasicBlockInContext(x.c, x.fn, "entry"));
  x.tid = gv_sreg(&x, "llvm.nvvm.read.ptx.sreg.tid.x", e);
  x.bx = gv_sreg(&x, "llvm.nvvm.read.ptx.sreg.ctaid.x", e);
  LLVMValueRef bz = gv_sreg(&x, "llvm.nvvm.read.ptx.sreg.ctaid.z", e);
  if (!x.tid || !x.bx || !bz) {
    LLVMDisposeBuilder(x.b);
    return e ? e->status : HJ_ERR_INTERNAL;
  }
  x.bz = gv_zext(&x, bz);
  LLVMValueRef *bases[3] = { &x.A, &x.B, &x.C };
  int64_t strides[3] = { s->stride_a, s->stride_b, s->stride_c };
  for (int i = 0; i < 3; i++) {
    LLVMValueRef off = gv_mul(&x, x.bz, strides[i]);
    *bases[i] = LLVMBuildGEP2(x.b, x.f32, LLVMGetParam(x.fn, (unsigned)i), &off, 1, "");
  }
  for (int i = 0; i < s->n_extra; i++) x.extra[i] = LLVMGetParam(x.fn, (unsigned)(3 + i));
  if (s->b_nk) gv_emit_nk(&x);
  else gv_emit_kn(&x);
  LLVMBuildRetVoid(x.b);
  LLVMDisposeBuilder(x.b);

  out->tile = 0;
  out->threads = GV_THREADS;
  out->grid[0] = (unsigned)(s->b_nk ? (s->n + GV_WARPS - 1) / GV_WARPS : (s->n + 4 * x.L - 1) / (4 * x.L));
  out->grid[1] = 1;
  out->grid[2] = (unsigned)s->batch;
  out->block[0] = GV_THREADS;
  out->block[1] = out->block[2] = 1;
  out->shared_bytes = s->b_nk ? 0 : (unsigned)(GV_WARPS * s->m * 4 * x.L * 4);
  out->vec_a = s->b_nk && x.vec;
  out->vec_b = x.vec;
  out->gemv_groups = x.L;
  return HJ_OK;
}
