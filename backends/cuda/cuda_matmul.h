/* cuda_matmul.h — the shared-memory tiled f32 matmul kernel for NVIDIA GPUs, generated as
   LLVM IR (LLVM-C) into a module prepared by cuda_codegen (cuda_matmul.c has the algorithm
   and walks one tile through it).

       // M rows of A and C, N columns of B and C, K the contraction
       C[b][M,N] = epilogue(A[b][M,K] x B[b][K,N])          (B given as [K,N], or as [N,K])

   Kernel ABI:
       void NAME(ptr addrspace(1) noalias readonly A, ptr addrspace(1) noalias readonly B,
                 ptr addrspace(1) C, ptr addrspace(1) extra_0, ..., extra_{n_extra-1})
   launched with cuda_matmul_launch's grid and block and no dynamic shared memory (the
   tiles are static shared arrays). Buffers are dense row-major; batch item b starts at
   b * stride elements of each operand (stride 0 broadcasts one operand to every item).
   C never aliases A or B; an extra buffer may be C itself (an in-place residual).

   Shapes are compile-time constants (hlojit kernels are specialised to their shapes), so
   the bounds checks that make any M, N, K correct fold away where they cannot fail. */
#ifndef HLOJIT_CUDA_MATMUL_H
#define HLOJIT_CUDA_MATMUL_H

#include "cuda_error.h"
#include "../../hlojit_impl/emitters/emit.h"   /* emit_gpu_mm_epi */
#include <llvm-c/Core.h>
#include <stdbool.h>
#include <stdint.h>

/* The epilogue: the emitters' own (emit_gpu_mm_epi, emitters/emit.h), called once per
   output element with the f32 sum; returns the f32 value to store. Straight-line code only
   (no new blocks): it is emitted 64 times per thread, once per register of the 8x8 block. */
typedef struct cuda_matmul_spec {
  int64_t m, n, k;          /* >= 1, >= 1, >= 0 (k = 0: C = epilogue(0)) */
  bool b_nk;                /* B is [N,K] (C = A B^T: attention's Q K^T, a tied lm head) */
  int64_t batch;            /* >= 1; blockIdx.z walks it (<= 65535) */
  int64_t stride_a, stride_b, stride_c;   /* elements between batch items */
  int tile;                 /* 0: cuda_matmul_choose_tile; else 64 or 128 */
  int bk;                   /* K slice staged per step: 8 (default) or 16 */
  int sm_count;             /* for the tile choice; default 108 (A100) */
  int min_blocks;           /* blocks per SM ptxas budgets registers for (.minnctapersm);
                               0: the rule in cuda_matmul.c (no spills at any variant) */
  bool aligned16;           /* the caller promises 16-byte aligned A, B, C (default true);
                               float4 paths also need the row lengths and strides to be
                               multiples of 4 elements */
  int n_extra;              /* extra buffer parameters for the epilogue, <= 16 */
  LLVMValueRef (*epilogue)(void *user, const emit_gpu_mm_epi *a);   /* NULL: store the sum */
  void *epilogue_user;
} cuda_matmul_spec;
void cuda_matmul_spec_init(cuda_matmul_spec *s);   /* batch 1, bk 8, aligned16, the rest 0 */

/* How to launch what cuda_matmul_emit made, and which paths it took. */
typedef struct cuda_matmul_launch {
  int tile, bk, threads;    /* 128 -> 256 threads, 64 -> 64 threads (8x8 outputs each);
                               the skinny kernel: tile 0, 256 threads */
  unsigned grid[3], block[3];
  unsigned shared_bytes;    /* static shared memory of the kernel */
  bool vec_a, vec_b, vec_c; /* float4 global loads of A, of B; float4 stores of C */
  int gemv_groups;          /* the skinny kernel with B as [K,N]: float4 column groups a
                               block (cuda_gemv.c); 0 otherwise */
} cuda_matmul_launch;

/* 64x64 when M or N is at most 64 (a 128 tile would be half empty) or when 128x128 tiles
   would leave SMs without a block; else 128x128. A fixed rule until measured per shape. */
int cuda_matmul_choose_tile(const cuda_matmul_spec *s);

/* Emits kernel |name| into |mod| (prepared with cuda_codegen_prepare_module; the kernel is
   marked with emit_gpu_mark_kernel). HJ_ERR_INVALID_ARG for a spec out of range, with why. */
hj_status cuda_matmul_emit(LLVMModuleRef mod, const char *name, const cuda_matmul_spec *s,
                           cuda_matmul_launch *out, cuda_error *e);

/* The skinny kernel (cuda_gemv.c): the same ABI, spec and epilogue for M <= CUDA_GEMV_MAX_M
   rows (tile, bk, min_blocks are ignored): a warp per column of C when B is [N,K], 4L
   columns a block when B is [K,N]; 256 threads a block, shared memory static. Decode's
   matmuls (M = 1) as one kernel with their epilogue, where the tiled kernel would leave most
   SMs idle. HJ_ERR_INVALID_ARG for a spec out of range, with why. */
#define CUDA_GEMV_MAX_M 8
hj_status cuda_gemv_emit(LLVMModuleRef mod, const char *name, const cuda_matmul_spec *s,
                         cuda_matmul_launch *out, cuda_error *e);

#endif /* HLOJIT_CUDA_MATMUL_H */
