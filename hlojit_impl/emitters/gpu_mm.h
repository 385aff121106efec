/* emitters/gpu_mm.h — the GPU matmul kernel generators: the shared-memory tiled f32 matmul
   (gpu_mm_tiled.c has the algorithm and walks one tile through it) and the skinny one for
   a few rows (gpu_mm_skinny.c), generated as LLVM IR (LLVM-C and NVVM intrinsics only)
   into a module the CUDA backend prepared (triple, data layout). gpu_matmul.c calls them
   for matmul fusions; the CUDA backend's tests and benchmarks call them directly.

       // M rows of A and C, N columns of B and C, K the contraction
       C[b][M,N] = epilogue(A[b][M,K] x B[b][K,N])          (B given as [K,N], or as [N,K])

   Kernel ABI:
       void NAME(ptr addrspace(1) noalias readonly A, ptr addrspace(1) noalias readonly B,
                 ptr addrspace(1) C, ptr addrspace(1) extra_0, ..., extra_{n_extra-1})
   launched with emit_gpu_mm_launch's grid and block and no dynamic shared memory (the
   tiles are static shared arrays). Buffers are dense row-major; batch item b starts at
   b * stride elements of each operand (stride 0 broadcasts one operand to every item).
   C never aliases A or B; an extra buffer may be C itself (an in-place residual).

   Shapes are compile-time constants (hlojit kernels are specialised to their shapes), so
   the bounds checks that make any M, N, K correct fold away where they cannot fail. */
#ifndef HLOJIT_GPU_MM_H
#define HLOJIT_GPU_MM_H

#include "emit.h"   /* emit_gpu_mm_epi */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* How the generators fail: a status and a message in the caller's struct (they take no
   context; gpu_matmul.c copies the message into it). |e| may be NULL: the status alone. */
typedef struct emit_gpu_err {
  hj_status status;
  char msg[1024];
} emit_gpu_err;
static inline hj_status emit_gpu_err_set(emit_gpu_err *e, hj_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline hj_status emit_gpu_err_set(emit_gpu_err *e, hj_status s, const char *fmt, ...) {
  if (e) {
    va_list ap;
    va_start(ap, fmt);
    e->status = s;
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
  }
  return s;
}
/* The declaration of intrinsic |name| (|overloads|: its overloaded types, n may be 0) in
   |mod|; NULL with a message when LLVM 19 has no such intrinsic (gpu_kernel.c). */
LLVMValueRef emit_gpu_intrinsic(LLVMModuleRef mod, const char *name, LLVMTypeRef *overloads, int n,
                                emit_gpu_err *e);

/* The epilogue: the emitters' own (emit_gpu_mm_epi, emitters/emit.h), called once per
   output element with the f32 sum; returns the f32 value to store. Straight-line code only
   (no new blocks): it is emitted 64 times per thread, once per register of the 8x8 block. */
typedef struct emit_gpu_mm {
  int64_t m, n, k;          /* >= 1, >= 1, >= 0 (k = 0: C = epilogue(0)) */
  bool b_nk;                /* B is [N,K] (C = A B^T: attention's Q K^T, a tied lm head) */
  int64_t batch;            /* >= 1; blockIdx.z walks it (<= 65535) */
  int64_t stride_a, stride_b, stride_c;   /* elements between batch items */
  int tile;                 /* 0: emit_gpu_mm_choose_tile; else 64 or 128 */
  int bk;                   /* K slice staged per step: 8 (default) or 16 */
  int sm_count;             /* for the tile choice; default 108 (A100) */
  int min_blocks;           /* blocks per SM ptxas budgets registers for (.minnctapersm);
                               0: the rule in gpu_mm_tiled.c (no spills at any variant) */
  bool aligned16;           /* the caller promises 16-byte aligned A, B, C (default true);
                               float4 paths also need the row lengths and strides to be
                               multiples of 4 elements */
  int n_extra;              /* extra buffer parameters for the epilogue, <= 16 */
  LLVMValueRef (*epilogue)(void *user, const emit_gpu_mm_epi *a);   /* NULL: store the sum */
  void *epilogue_user;
} emit_gpu_mm;
void emit_gpu_mm_init(emit_gpu_mm *s);   /* batch 1, bk 8, aligned16, the rest 0 */

/* How to launch what emit_gpu_mm_tiled made, and which paths it took. */
typedef struct emit_gpu_mm_launch {
  int tile, bk, threads;    /* 128 -> 256 threads, 64 -> 64 threads (8x8 outputs each);
                               the skinny kernel: tile 0, 256 threads */
  unsigned grid[3], block[3];
  unsigned shared_bytes;    /* static shared memory of the kernel */
  bool vec_a, vec_b, vec_c; /* float4 global loads of A, of B; float4 stores of C */
  int gemv_groups;          /* the skinny kernel with B as [K,N]: float4 column groups a
                               block (gpu_mm_skinny.c); 0 otherwise */
} emit_gpu_mm_launch;

/* 64x64 when M or N is at most 64 (a 128 tile would be half empty) or when 128x128 tiles
   would leave SMs without a block; else 128x128. A fixed rule until measured per shape. */
int emit_gpu_mm_choose_tile(const emit_gpu_mm *s);

/* Emits kernel |name| into |mod| (prepared with cuda_codegen_prepare_module; the kernel is
   marked with emit_gpu_mark_kernel). HJ_ERR_INVALID_ARG for a spec out of range, with why. */
hj_status emit_gpu_mm_tiled(LLVMModuleRef mod, const char *name, const emit_gpu_mm *s,
                           emit_gpu_mm_launch *out, emit_gpu_err *e);

/* The skinny kernel (gpu_mm_skinny.c): the same ABI, spec and epilogue for M <= EMIT_GPU_SKINNY_MAX_M
   rows (tile, bk, min_blocks are ignored): a warp per column of C when B is [N,K], 4L
   columns a block when B is [K,N]; 256 threads a block, shared memory static. Decode's
   matmuls (M = 1) as one kernel with their epilogue, where the tiled kernel would leave most
   SMs idle. HJ_ERR_INVALID_ARG for a spec out of range, with why. */
#define EMIT_GPU_SKINNY_MAX_M 8
hj_status emit_gpu_mm_skinny(LLVMModuleRef mod, const char *name, const emit_gpu_mm *s,
                         emit_gpu_mm_launch *out, emit_gpu_err *e);

#endif /* HLOJIT_GPU_MM_H */
