/* cpu_matmul.c — the CPU matmul driver: packing, cache blocking and threading around the
   micro-kernels that emitters/matmul.c JITs (plan: emitters/matmul_plan.h).

   Vocabulary: C[b] (M x N) = A[b] (M x K) @ B[b] (K x N, or N x K when rhs_transposed).

   Loops, per work unit (a batch, a range of rows [m0,m1) and of columns [n0,n1)), in the
   GotoBLAS/BLIS order with the roles of A and B mirrored because C is row-major and the
   kernel vectorises along N:
     for ic in [m0,m1) step mc          A block (mc x kc) packed in mr-row panels
       for pc in [0,K) step kc          (K blocks in increasing order: fixed sums)
         pack A block
         for jc in [n0,n1) step nc      B block (kc x nc) packed in nr-column panels, in L2
           pack B block
           for ir step mr               A panel (kc x mr) stays in L1
             for jr step nr             B panel streams from L2
               ukr(kc, Apanel, Bpanel, C tile, ldc = N, accumulate = pc > 0)
   Edges: rows M % mr use ukr[1] (emitted for exactly that count); a tile narrower than nr
   goes through a small per-thread tile buffer (the packed B panel is zero-padded).

   Threads: one tp_parallel_for per matmul (no barriers inside): the units are the batches
   times the plan's K blocks (below) times |parts|, a split of N into nr-aligned ranges when
   N is wide enough (each thread packs its own B columns and all of A), else of M into
   mr-aligned ranges. Every unit packs into its thread's slice of the scratch. Each C
   element is one fma chain per kc step, the steps added in order, whatever the split:
   results are bitwise independent of the thread count.

   B normal with M <= 128 (plan: kc x N blocks of whole rows, gemv_kb): K in 2 fixed
   blocks, each block's partial C in scratch, then a second parallel-for over the rows adds
   the partials in block order and runs the epilogue. 2 threads then each pack whole rows
   of their own half of B, one contiguous stretch of memory: splitting N made each read
   half rows, 8-9 GB/s from memory for both together (a GPT-2 block's weights are not in
   the LLC), where a contiguous stretch reads at 20+ on one thread.

   What packing costs at M = 64 (GPT-2 124M prefill of 64 tokens, weights from memory, Zen 4,
   one process taking the variants in turn, best of 10, 1 / 2 threads): 138.8 / 74.3 ms as
   it is; 127.4 / 68.7 packing always from the first block (in the caches: what the wait on
   memory costs); 112.7 / 60.0 not packing at all (stale panels: the time without the copy,
   0.99 / 0.97 of bench_gpt2's sgemm bound). So about half of it is the copy's own work
   through the caches and half the wait on memory: prefetching the next block a few lines per tile changed nothing, packing a panel at a
   time just before its tiles (short strided reads) was 8-14% slower even with the next
   panel prefetched, and 64-byte instead of 16-byte moves gained 1%. A packing micro-kernel
   for the first strip (B read from the matrix, each piece stored into its panel as it is
   used, the row's next piece prefetched) removed the copy's own work (bench_matmul fc
   64 x 768 x 3072, B in cache: 105 GFLOP/s against 94) but not the wait: with B from
   memory 87 against 86, and the prefill above 143.4 / 73.8 ms against 141.3 / 73.4; the
   first strip then waits on memory instead. What removed both is the weights kept in the
   packed panel order (plan's rhs_panels, hj_linear's HJ_LINEAR_PANELS; cmm_panels_unit):
   each panel read in place, contiguous, by all the strips of the A block in turn. The same
   process, the same 124M weights as (in, out) / (out, in) or as panels (bench_gpt2's
   "plain" and "kernel" rows, 1 / 2 threads): T = 64 142.6 / 75.9 ms against 114.2 / 68.2,
   T = 256 501 / 276 against 471 / 263; bench_matmul --cold at M = 64, B from memory:
   1.31-1.37 x OpenBLAS with panels, 1.05-1.07 x without.

   Panel-order B (rhs_panels): no B packing and no K blocks; the parts split N in whole
   panels (each thread reads its own panels: contiguous stretches at every kc step), or M
   when N has too few. Per A block and kc step, panel after panel, every mr-row strip of
   the block runs on it; the epilogue runs per row after the last step. The gemv (gemvp)
   takes a thread's run of panels per kc step, one panel after the other (one stream:
   matmul_gemv.c EMM_PANEL_G has the measurements).

   M = 1 (decode) uses the plan's gemv, B read once. B transposed: split over N (each output
   is one contiguous row of B). B normal: split over K in the plan's fixed blocks of
   gemv_kb rows, so that each thread streams one contiguous stretch of B (splitting N made
   every thread read short strided pieces of every row: 0.5-0.6 of the 2-thread bandwidth);
   each block writes its own partial y in scratch, and a second parallel-for over N adds
   the partials in block order and runs the epilogue.
   Epilogue (plan->epi, a fused bias/GELU/residual...): applied in place to each mr-row strip
   of a B block right after its last K block, row by row ([begin, end) within one row).
   Example: M = 64, K = 768, N = 2304 (B transposed), 2 threads, mr = 8, nr = 48,
   kc = 768, nc = 240: parts = 2 ranges of 24 panels (1152 columns); each thread packs A
   (64 x 768) once and its B blocks (768 x 240) ... and runs 8 x 5 kernels per B block.
   B normal: kc = 80, nc = 2304, gemv_kb = 384: units = 2 K blocks (rows 0-383, 384-767),
   one per thread; each packs A (64 x 80) and the whole-row B block (80 x 2304) per kc step
   into its partial C, and the sum pass adds the two. */
#include "cpu_matmul.h"
#include "../../hlojit_impl/emitters/matmul_plan.h"
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define CMM_ALIGN(x) (((x) + 63) & ~(size_t)63)

hj_status cpu_matmul_prepare(cpu_jit *j, struct emit_matmul_plan *p) {
  void *a;
  hj_status st;
  for (int i = 0; i < 2; i++) {
    p->ukr[i] = NULL;
    if (!p->ukr_name[i][0]) continue;
    if ((st = cpu_jit_lookup(j, p->ukr_name[i], &a))) return st;
    p->ukr[i] = (emm_ukr_fn)a;
  }
  p->gemv = NULL;
  if (p->gemv_name[0]) {
    if ((st = cpu_jit_lookup(j, p->gemv_name, &a))) return st;
    p->gemv = (emm_gemv_fn)a;
  }
  p->epi = NULL;
  if (p->epi_name[0]) {
    if ((st = cpu_jit_lookup(j, p->epi_name, &a))) return st;
    p->epi = (emm_epi_fn)a;
  }
  return HJ_OK;
}

static size_t cmm_a_bytes(const struct emit_matmul_plan *p) { return CMM_ALIGN((size_t)(p->mc * p->kc) * 4); }
static size_t cmm_b_bytes(const struct emit_matmul_plan *p) {
  return CMM_ALIGN((size_t)(p->kc * ((p->nc + p->nr - 1) / p->nr * p->nr)) * 4);
}
static size_t cmm_per_thread(const struct emit_matmul_plan *p) {
  if (p->use_gemv) return 0;
  return cmm_a_bytes(p) + (p->rhs_panels ? 0 : cmm_b_bytes(p)) + CMM_ALIGN((size_t)(p->mr * p->nr) * 4);
}

/* B normal: K blocks, and the bytes of their partial results [B][kblocks][M][N] (none for
   one block). */
static int64_t cmm_kblocks(const struct emit_matmul_plan *p) {
  if (p->rhs_transposed || p->rhs_panels || p->K <= 0 || p->gemv_kb <= 0) return 1;
  return (p->K + p->gemv_kb - 1) / p->gemv_kb;
}
static size_t cmm_partial_bytes(const struct emit_matmul_plan *p) {
  int64_t nkb = cmm_kblocks(p);
  return nkb > 1 ? CMM_ALIGN((size_t)(p->B * nkb * p->M * p->N) * 4) : 0;
}

size_t cpu_matmul_scratch_bytes(const struct emit_matmul_plan *p, int nthreads) {
  return cmm_per_thread(p) * (size_t)(nthreads < 1 ? 1 : nthreads) + cmm_partial_bytes(p);
}

void cpu_matmul_plan_free(struct emit_matmul_plan *p) { emit_matmul_plan_free(p); }

/* ---- packing ------------------------------------------------------------------------------- */

/* A[ic.., pc..] (row stride lda) -> mr-row panels, k-major: dst[panel][k*mr + i]. */
static void cmm_pack_a(float *dst, const float *a, int64_t lda, int64_t mcur, int64_t kcur, int mr) {
  for (int64_t ir = 0; ir < mcur; ir += mr) {
    float *d = dst + ir * kcur;
    int64_t rows = mcur - ir < mr ? mcur - ir : mr;
    for (int64_t i = 0; i < rows; i++) {
      const float *s = a + (ir + i) * lda;
      for (int64_t k = 0; k < kcur; k++) d[k * mr + i] = s[k];
    }
    for (int64_t i = rows; i < mr; i++)
      for (int64_t k = 0; k < kcur; k++) d[k * mr + i] = 0;
  }
}

/* B block -> nr-column panels, k-major: dst[panel][k*nr + j], zero beyond |ncur|.
   |b| points at B[pc, jc] (normal, row stride ldb) or B[jc, pc] (transposed). Normal:
   row by row across all panels, so that B is read in address order (with the plan's
   whole-row blocks, one contiguous stretch; panel by panel read 192-byte pieces 12 KiB
   apart: 7-8 GB/s from memory against 13 this way, fc 768 x 3072, one thread), full
   panels in 16-byte vectors (memcpy per piece cost as much again). Transposed: 4 rows at
   a time through 4x4 SSE transposes (2x the scalar loop). */
static void cmm_pack_b_rows(float *dst, const float *b, int64_t ldb, int64_t ncur, int64_t kcur,
                            int64_t k0, int64_t k1, int nr) {
  int64_t full = ncur / nr, cols = ncur - full * nr;
  for (int64_t k = k0; k < k1; k++) {
    const float *s = b + k * ldb;
    for (int64_t jp = 0; jp < full; jp++) {
      float *d = dst + jp * nr * kcur + k * nr;
      const float *q = s + jp * nr;
#ifdef __SSE2__
      for (int j = 0; j + 8 <= nr; j += 8) {
        __m128 x0 = _mm_loadu_ps(q + j), x1 = _mm_loadu_ps(q + j + 4);
        _mm_storeu_ps(d + j, x0);
        _mm_storeu_ps(d + j + 4, x1);
      }
      for (int j = nr / 8 * 8; j < nr; j++) d[j] = q[j];
#else
      memcpy(d, q, (size_t)nr * 4);
#endif
    }
    if (cols) {
      float *d = dst + full * nr * kcur + k * nr;
      memcpy(d, s + full * nr, (size_t)cols * 4);
      memset(d + cols, 0, (size_t)(nr - cols) * 4);
    }
  }
}

/* bf16 -> f32 is exact: the bits move up 16 places (unpacking with zeros below them). */
static inline float cmm_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* cmm_pack_b_rows for a bf16 B (plan's rhs_bf16), widening as it packs. */
static void cmm_pack_b_rows_bf16(float *dst, const uint16_t *b, int64_t ldb, int64_t ncur,
                                 int64_t kcur, int nr) {
  int64_t full = ncur / nr, cols = ncur - full * nr;
  for (int64_t k = 0; k < kcur; k++) {
    const uint16_t *s = b + k * ldb;
    for (int64_t jp = 0; jp < full; jp++) {
      float *d = dst + jp * nr * kcur + k * nr;
      const uint16_t *q = s + jp * nr;
      int j = 0;
#ifdef __SSE2__
      for (; j + 8 <= nr; j += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(q + j)), z = _mm_setzero_si128();
        _mm_storeu_ps(d + j, _mm_castsi128_ps(_mm_unpacklo_epi16(z, h)));
        _mm_storeu_ps(d + j + 4, _mm_castsi128_ps(_mm_unpackhi_epi16(z, h)));
      }
#endif
      for (; j < nr; j++) d[j] = cmm_bf16(q[j]);
    }
    if (cols) {
      float *d = dst + full * nr * kcur + k * nr;
      for (int64_t j = 0; j < cols; j++) d[j] = cmm_bf16(s[full * nr + j]);
      memset(d + cols, 0, (size_t)(nr - cols) * 4);
    }
  }
}

/* B normal at |b| (element type by |bf16|). */
static void cmm_pack_b_normal(float *dst, const void *b, bool bf16, int64_t ldb, int64_t ncur,
                              int64_t kcur, int nr) {
  if (bf16) cmm_pack_b_rows_bf16(dst, b, ldb, ncur, kcur, nr);
  else cmm_pack_b_rows(dst, b, ldb, ncur, kcur, 0, kcur, nr);
}

/* B transposed (element type by |bf16|, a constant in each caller below, so each gets its
   own loop): 4 rows at a time through 4x4 SSE transposes (2x the scalar loop); a bf16 row's
   4 elements are widened by unpacking them above zeros. */
static inline __attribute__((always_inline)) void
cmm_pack_b_trans_as(float *dst, const void *b, bool bf16, int64_t ldb, int64_t ncur, int64_t kcur,
                    int nr) {
  const float *bf = b;
  const uint16_t *bh = b;
#define CMM_AT(row, k) (bf16 ? cmm_bf16(bh[(row) * ldb + (k)]) : bf[(row) * ldb + (k)])
  for (int64_t jr = 0; jr < ncur; jr += nr) {
    float *d = dst + jr * kcur;
    int64_t cols = ncur - jr < nr ? ncur - jr : nr, j = 0;
    for (; j + 4 <= cols; j += 4) {
      int64_t k = 0, r = jr + j;
#ifdef __SSE2__
      __m128i z = _mm_setzero_si128();
#define CMM_LD4(q)                                                                              \
  (bf16 ? _mm_castsi128_ps(_mm_unpacklo_epi16(z, _mm_loadl_epi64((const __m128i *)(bh + (r + (q)) * ldb + k)))) \
        : _mm_loadu_ps(bf + (r + (q)) * ldb + k))
      for (; k + 4 <= kcur; k += 4) {
        __m128 r0 = CMM_LD4(0), r1 = CMM_LD4(1), r2 = CMM_LD4(2), r3 = CMM_LD4(3);
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
        _mm_storeu_ps(d + k * nr + j, r0);
        _mm_storeu_ps(d + (k + 1) * nr + j, r1);
        _mm_storeu_ps(d + (k + 2) * nr + j, r2);
        _mm_storeu_ps(d + (k + 3) * nr + j, r3);
      }
#undef CMM_LD4
#endif
      for (; k < kcur; k++) {
        float *o = d + k * nr + j;
        o[0] = CMM_AT(r, k), o[1] = CMM_AT(r + 1, k), o[2] = CMM_AT(r + 2, k), o[3] = CMM_AT(r + 3, k);
      }
    }
    for (; j < cols; j++)
      for (int64_t k = 0; k < kcur; k++) d[k * nr + j] = CMM_AT(jr + j, k);
    for (; j < nr; j++)
      for (int64_t k = 0; k < kcur; k++) d[k * nr + j] = 0.0f;
  }
#undef CMM_AT
}

static void cmm_pack_b_trans(float *dst, const void *b, bool bf16, int64_t ldb, int64_t ncur,
                             int64_t kcur, int nr) {
  if (bf16) cmm_pack_b_trans_as(dst, b, true, ldb, ncur, kcur, nr);
  else cmm_pack_b_trans_as(dst, b, false, ldb, ncur, kcur, nr);
}

/* ---- one unit of work ------------------------------------------------------------------------ */

typedef struct cmm_job {
  const struct emit_matmul_plan *p;
  void **bufs;               /* the kernel's buffers (for the epilogue) */
  const float *a;
  const char *b;             /* f32 or bf16 (plan's rhs_bf16): element i at b + i * bes */
  int bes;
  float *c;
  char *scratch;
  size_t per_thread;
  int parts;                 /* units per batch (gemv, B normal: per K block) */
  bool split_n;              /* parts split N (else M) */
  int64_t kblocks;           /* gemv, B normal: K blocks (1: no partials) */
  float *partial;            /* their results: [B][kblocks][N] */
  int chunks;                /* tp chunks over the units (to find this thread's scratch) */
  int64_t nunits;
} cmm_job;

/* The tile at (ir, jr) of C (|rows| x |cols|): straight into C when full, else via |tile|. */
static void cmm_tile(const struct emit_matmul_plan *p, const float *ap, const float *bp,
                     float *c, int64_t ldc, int64_t kcur, int64_t rows, int64_t cols,
                     bool acc, float *tile) {
  emm_ukr_fn k = rows == p->mr ? p->ukr[0] : (rows == p->m_rem && p->ukr[1]) ? p->ukr[1] : p->ukr[0];
  if (cols == p->nr && (rows == p->mr || k == p->ukr[1])) {
    k(kcur, ap, bp, c, ldc, acc);
    return;
  }
  if (acc)
    for (int64_t i = 0; i < rows; i++) memcpy(tile + i * p->nr, c + i * ldc, (size_t)cols * 4);
  k(kcur, ap, bp, tile, p->nr, acc);
  for (int64_t i = 0; i < rows; i++) memcpy(c + i * ldc, tile + i * p->nr, (size_t)cols * 4);
}

/* Rows [m0,m1) and columns [n0,n1) of batch |bi|, over K block |kb| (all of K when the
   plan has one): into C, or with several K blocks into that block's partial C. */
static void cmm_gemm_unit(const cmm_job *J, char *scr, int64_t bi, int64_t kb, int64_t m0,
                          int64_t m1, int64_t n0, int64_t n1) {
  const struct emit_matmul_plan *p = J->p;
  int64_t M = p->M, N = p->N, K = p->K;
  int64_t k0 = 0, k1 = K;
  float *ap = (float *)scr, *bp = (float *)(scr + cmm_a_bytes(p));
  float *tile = (float *)(scr + cmm_a_bytes(p) + cmm_b_bytes(p));
  const float *A = J->a + bi * M * K;
  const char *Bm = J->b + bi * N * K * J->bes;
  float *C = J->c + bi * M * N;
  if (J->kblocks > 1) {
    k0 = kb * p->gemv_kb, k1 = K - k0 < p->gemv_kb ? K : k0 + p->gemv_kb;
    C = J->partial + (bi * J->kblocks + kb) * M * N;
  }
  for (int64_t ic = m0; ic < m1; ic += p->mc) {
    int64_t mcur = m1 - ic < p->mc ? m1 - ic : p->mc;
    for (int64_t pc = k0; pc < k1; pc += p->kc) {
      int64_t kcur = k1 - pc < p->kc ? k1 - pc : p->kc;
      cmm_pack_a(ap, A + ic * K + pc, K, mcur, kcur, p->mr);
      for (int64_t jc = n0; jc < n1; jc += p->nc) {
        int64_t ncur = n1 - jc < p->nc ? n1 - jc : p->nc;
        const char *bsrc = Bm + (p->rhs_transposed ? jc * K + pc : pc * N + jc) * J->bes;
        if (p->rhs_transposed) cmm_pack_b_trans(bp, bsrc, p->rhs_bf16, K, ncur, kcur, p->nr);
        else cmm_pack_b_normal(bp, bsrc, p->rhs_bf16, N, ncur, kcur, p->nr);
        for (int64_t ir = 0; ir < mcur; ir += p->mr) {
          int64_t rows = mcur - ir < p->mr ? mcur - ir : p->mr;
          for (int64_t jr = 0; jr < ncur; jr += p->nr) {
            int64_t cols = ncur - jr < p->nr ? ncur - jr : p->nr;
            cmm_tile(p, ap + ir * kcur, bp + jr * kcur, C + (ic + ir) * N + jc + jr, N, kcur,
                     rows, cols, pc > k0, tile);
          }
          if (p->epi && pc + kcur == K && J->kblocks == 1)   /* final: epilogue while hot */
            for (int64_t i = 0; i < rows; i++) {
              int64_t o = (bi * M + ic + ir + i) * N + jc;
              p->epi(J->bufs, o, o + ncur);
            }
        }
      }
    }
  }
}

/* Rows [m0,m1) and columns [n0,n1) (multiples of nr) of C with B in panel order (plan's
   rhs_panels): per kc step, each panel (p, q) is read in place, contiguous, once per A
   block, by every mr-row strip of the block in turn; the epilogue runs per row over the
   unit's columns after the last step. */
static void cmm_panels_unit(const cmm_job *J, char *scr, int64_t m0, int64_t m1, int64_t n0,
                            int64_t n1) {
  const struct emit_matmul_plan *p = J->p;
  const int64_t N = p->N, K = p->K, kc = p->kc;
  float *ap = (float *)scr, *tile = (float *)(scr + cmm_a_bytes(p));
  for (int64_t ic = m0; ic < m1; ic += p->mc) {
    int64_t mcur = m1 - ic < p->mc ? m1 - ic : p->mc;
    for (int64_t pc = 0; pc < K; pc += kc) {
      cmm_pack_a(ap, J->a + ic * K + pc, K, mcur, kc, p->mr);
      /* panel (pc / kc, jr / nr) at element pc * N + jr * kc (a bf16 one: the ukr widens it) */
      for (int64_t jr = n0; jr < n1; jr += p->nr)
        for (int64_t ir = 0; ir < mcur; ir += p->mr) {
          int64_t rows = mcur - ir < p->mr ? mcur - ir : p->mr;
          cmm_tile(p, ap + ir * kc, (const float *)(J->b + (pc * N + jr * kc) * J->bes),
                   J->c + (ic + ir) * N + jr, N, kc, rows, p->nr, pc > 0, tile);
        }
    }
    for (int64_t i = 0; p->epi && i < mcur; i++) p->epi(J->bufs, (ic + i) * N + n0, (ic + i) * N + n1);
  }
}

/* [lo, hi) of part |q| of |parts| over |n| items in aligned groups of |al|. */
static void cmm_part(int64_t n, int64_t al, int q, int parts, int64_t *lo, int64_t *hi) {
  int64_t g = (n + al - 1) / al;
  *lo = g * q / parts * al;
  *hi = g * (q + 1) / parts * al;
  if (*lo > n) *lo = n;
  if (*hi > n) *hi = n;
}

/* gemv units: (part of N, batch, K block), K block fastest, so that one thread's chunk of
   consecutive units covers consecutive rows of B (one contiguous stretch of memory). */
static void cmm_gemv_units(const cmm_job *J, int64_t begin, int64_t end) {
  const struct emit_matmul_plan *p = J->p;
  for (int64_t u = begin; u < end; u++) {
    int64_t kb = u % J->kblocks, bi = u / J->kblocks % p->B, lo, hi;
    cmm_part(p->N, p->gemv_cols, (int)(u / J->kblocks / p->B), J->parts, &lo, &hi);
    if (hi <= lo) continue;
    const float *x = J->a + bi * p->K;
    const char *Bm = J->b + bi * p->N * p->K * J->bes;   /* the gemv widens a bf16 B itself */
    float *y = J->c + bi * p->N;
    if (p->rhs_panels) {   /* the panels of columns [lo, hi), one kc step after the other */
      memset(y + lo, 0, (size_t)(hi - lo) * 4);
      for (int64_t pc = 0; pc < p->K; pc += p->kc)
        p->gemv(p->kc, x + pc, (const float *)(Bm + (pc * p->N + lo * p->kc) * J->bes), y + lo,
                p->kc * p->nr, (hi - lo) / p->nr);
    } else if (p->rhs_transposed) {
      p->gemv(p->K, x, (const float *)(Bm + lo * p->K * J->bes), y + lo, p->K, hi - lo);
    } else {
      int64_t k0 = kb * p->gemv_kb, kcur = p->K - k0 < p->gemv_kb ? p->K - k0 : p->gemv_kb;
      float *dst = J->kblocks > 1 ? J->partial + (bi * J->kblocks + kb) * p->N : y;
      memset(dst + lo, 0, (size_t)(hi - lo) * 4);
      p->gemv(kcur, x + k0, (const float *)(Bm + (k0 * p->N + lo) * J->bes), dst + lo, p->N, hi - lo);
    }
    if (p->epi && J->kblocks == 1) p->epi(J->bufs, bi * p->N + lo, bi * p->N + hi);
  }
}

/* The second gemv phase: y = partial[0] + partial[1] + ... in block order, then the
   epilogue; units are (batch, part of N). */
static void cmm_sum_row(const cmm_job *J, int64_t bi, int64_t m, int64_t lo, int64_t hi) {
  const struct emit_matmul_plan *p = J->p;
  int64_t MN = p->M * p->N;
  float *restrict y = J->c + bi * MN + m * p->N;
  const float *part = J->partial + bi * J->kblocks * MN + m * p->N;
  memcpy(y + lo, part + lo, (size_t)(hi - lo) * 4);
  for (int64_t kb = 1; kb < J->kblocks; kb++) {
    const float *restrict q = part + kb * MN;
    for (int64_t j = lo; j < hi; j++) y[j] += q[j];
  }
  if (p->epi) p->epi(J->bufs, bi * MN + m * p->N + lo, bi * MN + m * p->N + hi);
}

static void cmm_gemv_sum(void *user, int64_t begin, int64_t end) {
  const cmm_job *J = user;
  const struct emit_matmul_plan *p = J->p;
  for (int64_t u = begin; u < end; u++) {
    int64_t bi = u / J->parts, lo, hi;
    cmm_part(p->N, p->gemv_cols, (int)(u % J->parts), J->parts, &lo, &hi);
    if (hi > lo) cmm_sum_row(J, bi, 0, lo, hi);
  }
}

/* The gemm's: units are rows of all batches. */
static void cmm_gemm_sum(void *user, int64_t begin, int64_t end) {
  const cmm_job *J = user;
  for (int64_t u = begin; u < end; u++) cmm_sum_row(J, u / J->p->M, u % J->p->M, 0, J->p->N);
}

/* The scratch slot of the chunk that starts at |begin|. */
static char *cmm_slot(const cmm_job *J, int64_t begin) {
  int slot = 0;
  for (int k = 0; k < J->chunks; k++) {
    int64_t b0, e0;
    tp_chunk_range(J->nunits, J->chunks, k, &b0, &e0);
    if (b0 == begin) slot = k;
  }
  return J->scratch + (size_t)slot * J->per_thread;
}

static void cmm_task(void *user, int64_t begin, int64_t end) {
  const cmm_job *J = user;
  const struct emit_matmul_plan *p = J->p;
  char *scr = cmm_slot(J, begin);
  if (p->use_gemv) {
    cmm_gemv_units(J, begin, end);
    return;
  }
  for (int64_t u = begin; u < end; u++) {   /* u = (batch, K block, part) */
    int64_t bi = u / J->parts / J->kblocks, kb = u / J->parts % J->kblocks;
    int q = (int)(u % J->parts);
    int64_t m0 = 0, m1 = p->M, n0 = 0, n1 = p->N;
    if (J->split_n) cmm_part(p->N, p->nr, q, J->parts, &n0, &n1);
    else cmm_part(p->M, p->mr, q, J->parts, &m0, &m1);
    if (m1 > m0 && n1 > n0 && p->rhs_panels) cmm_panels_unit(J, scr, m0, m1, n0, n1);
    else if (m1 > m0 && n1 > n0) cmm_gemm_unit(J, scr, bi, kb, m0, m1, n0, n1);
  }
}

void cpu_matmul_run(const struct emit_matmul_plan *p, void **bufs, tp_pool *pool, void *scratch) {
  cmm_job J = { .p = p, .bufs = bufs, .a = bufs[p->lhs_buf], .b = bufs[p->rhs_buf], .bes = p->rhs_bf16 ? 2 : 4,
                .c = bufs[p->out_buf], .scratch = scratch, .per_thread = cmm_per_thread(p) };
  if (p->B * p->M * p->N == 0) return;
  if (p->K == 0) {
    memset(J.c, 0, (size_t)(p->B * p->M * p->N) * 4);
    for (int64_t r = 0; p->epi && r < p->B * p->M; r++) p->epi(bufs, r * p->N, (r + 1) * p->N);
    return;
  }
  int threads = pool ? tp_size(pool) : 1;
  J.kblocks = cmm_kblocks(p);
  J.partial = (float *)((char *)scratch + cmm_per_thread(p) * (size_t)threads);
  int64_t units = p->B * J.kblocks;   /* before splitting N */
  int want = units >= threads ? 1 : (int)((threads + units - 1) / units);
  if (p->use_gemv) {
    int64_t groups = (p->N + p->gemv_cols - 1) / p->gemv_cols;
    J.parts = (int)(groups < want ? groups : want);
  } else {
    int64_t npan = (p->N + p->nr - 1) / p->nr, mpan = (p->M + p->mr - 1) / p->mr;
    /* N when it gives every part at least 2 panels (each part packs all of A; cheap) */
    J.split_n = npan >= 2 * want || npan >= mpan;
    int64_t avail = J.split_n ? npan : mpan;
    J.parts = (int)(avail < want ? avail : want);
  }
  if (J.parts < 1) J.parts = 1;
  J.nunits = units * J.parts;
  J.chunks = pool ? tp_chunks(pool, J.nunits, 1) : 1;
  if (pool) tp_parallel_for(pool, J.nunits, 1, cmm_task, &J);
  else cmm_task(&J, 0, J.nunits);
  if (J.kblocks > 1 && !p->use_gemv) {
    int64_t rows = p->B * p->M;
    if (pool) tp_parallel_for(pool, rows, 16, cmm_gemm_sum, &J);
    else cmm_gemm_sum(&J, 0, rows);
  } else if (J.kblocks > 1) {
    int64_t groups = (p->N + p->gemv_cols - 1) / p->gemv_cols;
    int sum_parts = p->B >= threads ? 1 : (int)((threads + p->B - 1) / p->B);
    J.parts = (int)(groups < sum_parts ? groups : sum_parts);
    if (pool) tp_parallel_for(pool, p->B * J.parts, 1, cmm_gemv_sum, &J);
    else cmm_gemv_sum(&J, 0, p->B * J.parts);
  }
}

#undef CMM_ALIGN
