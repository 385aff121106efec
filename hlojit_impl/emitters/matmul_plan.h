/* matmul_plan.h — what the matmul emitter (emitters/matmul.c) tells the CPU driver
   (backends/cpu/cpu_matmul.c): the shape of the canonical dot, which buffers hold its
   operands, the register/cache blocking, and the symbols of the JIT'd kernels.

   Canonical dot (passes/dot_canon.c): C[b] = A[b] @ op(B[b]) for b < B, with
   A [M,K] row-major, B [K,N] row-major or (rhs_transposed) [N,K] row-major, C [M,N].
   Only f32 is emitted, except that on the CPU the rhs may be bf16 (a mixed-precision dot,
   f32 x bf16 -> f32: weights kept in bf16). bf16 -> f32 is exact (the bits move up 16
   places), so such a dot gives the bits of the f32 dot of the widened rhs. The driver
   widens B as it packs it, and the gemvs widen each vector as they load it (their |b| is
   then a uint16_t array, ldb still in elements). Other element types are
   HJ_ERR_UNSUPPORTED (evaluator fallback).
   Panel-order rhs (rhs_panels; dot_canon.c keeps it when nr is the target's
   emit_target.matmul_panel_nr): lhs [M,P,kc] (A [M,K] row-major, K = P*kc), rhs
   [P,Q,kc,nr]: B [K,N] (N = Q*nr) cut into kc x nr blocks, each row-major, block (p, q) at
   B + (p*Q + q)*kc*nr, which is the packed B panel the micro-kernel reads. The plan's kc
   and nr are the layout's; the driver packs only A, and the gemv runs per panel with
   ldb = nr. B = 1. A bf16 panel-order rhs is read in place too: its ukr and gemvp widen
   each vector as they load it (the ukr's |b| then a uint16_t array).

   JIT'd functions (names below, resolved to addresses by cpu_matmul_prepare):
     ukr:  void (i64 kc, const float *a, const float *b, float *c, i64 ldc, i64 accumulate)
           C[0..mr, 0..nr) (=|+=) sum_k a[k*mr_stride + i] * b[k*nr + j] over k < kc, the sum
           taken as one fma chain in k order starting from 0, then (accumulate) added to C.
           ukr[0] has mr rows, ukr[1] (if any) has m_rem = M % mr rows (a still strided mr).
     gemv: void (i64 K, const float *x, const float *b, float *y, i64 ldb, i64 n)
           y[j] += sum_k x[k] * b[k*ldb + j] for j < n (B normal), one fma chain in k order
           continuing from y[j] (the driver zeroes y first). The driver calls it per K block of gemv_kb rows (the last may be
           shorter), each into its own partial row, and sums the partials in block order
           after (one block: straight into C);
     gemvt: same signature, y[j] = sum_k x[k] * b[j*ldb + k] (B transposed), vector partial
           sums over k then a fixed reduction tree.
     gemvp: (i64 kc, x, b, y, i64 pstride, i64 npan) for a panel-order B: for panels q <
           npan (kc x nr, row-major, at b + q*pstride), y[q*nr + j] += sum_k x[k] *
           b_q[k*nr + j], one fma chain in k order continuing from y (the driver zeroes y
           and calls it once per kc step, in order, over a thread's run of panels).
     epi:  kernel ABI of emit.h, (bufs, begin, end): the fused epilogue applied in place
           to output elements [begin, end), which lie in one row of C (absent: bare dot).
   Every output element is computed by the same sequence of operations whatever the
   blocking in M and N and the thread split, so results are bitwise independent of the
   thread count (KC and gemv_kb, the only splits of K, are fixed in the plan). */
#ifndef HLOJIT_MATMUL_PLAN_H
#define HLOJIT_MATMUL_PLAN_H
#include <stdbool.h>
#include <stdint.h>

typedef void (*emm_ukr_fn)(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                           int64_t accumulate);
typedef void (*emm_epi_fn)(void **bufs, int64_t begin, int64_t end);
typedef void (*emm_gemv_fn)(int64_t k, const float *x, const float *b, float *y, int64_t ldb,
                            int64_t n);

struct emit_matmul_plan {
  int64_t B, M, N, K;          /* canonical sizes */
  bool rhs_transposed;         /* rhs is [B,N,K] */
  bool rhs_bf16;               /* rhs holds bf16 (CPU only): packing and the gemvs widen it */
  bool rhs_panels;             /* rhs in panel order (CPU only; below): read in place */
  int lhs_buf, rhs_buf, out_buf;  /* indices into the kernel's bufs (ABI of emit.h) */
  int vw;                      /* floats per vector register */
  int mr, nr;                  /* register block: mr rows x nr columns (nr % vw == 0) */
  int m_rem;                   /* M % mr: rows of ukr[1] (0: no ukr[1]) */
  int64_t kc, mc, nc;          /* cache blocks: K step, rows of an A block, cols of a B block */
  int gemv_rows;               /* gemv, B normal: rows of B per pass over y */
  int gemv_cols;               /* gemv: the driver's column splits are multiples of this */
  int64_t gemv_kb;             /* B normal, gemv or gemm: rows per K block (K: one block);
                                  a gemm's is a multiple of kc */
  bool use_gemv;               /* M == 1: the bandwidth-bound path */
  char ukr_name[2][112];
  char gemv_name[112];
  char epi_name[112];          /* "" when the root is the dot */
  /* filled by cpu_matmul_prepare */
  emm_ukr_fn ukr[2];
  emm_gemv_fn gemv;
  emm_epi_fn epi;
  /* GPU targets (emit.h, "GPU targets"; gpu_matmul.c). Two ways to run it, chosen by the
     backend per shape: the tiled kernel (A, B, C then the fusion's operands as extra
     parameters, the epilogue fused), or a library gemm into C followed, when there is an
     epilogue, by the epilogue kernel epi_name (GPU kernel ABI, rewrites C in place). */
  bool gpu;
  char gpu_tiled_name[112];      /* "" when the tiled kernel could not be made */
  unsigned gpu_grid[3], gpu_block[3], gpu_shared;
  int gpu_tile;
  int gpu_n_extra;               /* extra parameter i is bufs[i] (the fusion's operands) */
  unsigned gpu_epi_grid[3], gpu_epi_block[3];   /* the epilogue kernel's launch */
};

/* Frees a plan made by emit_matmul_fusion (NULL is fine). Defined in matmul.c and called by
   cpu_matmul_plan_free, which also makes a static link pull matmul.o in ahead of the weak
   placeholder in emit_stubs.c. */
void emit_matmul_plan_free(struct emit_matmul_plan *p);
/* The micro-kernel's nr on a CPU whose vector registers have |vector_bytes|: the panel
   width a panel-order rhs must have (emit_target.matmul_panel_nr). */
int emit_matmul_panel_nr(int vector_bytes);

#endif
