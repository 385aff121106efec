/* bench_matmul.c — hlojit's CPU matmul (emitters/matmul.c + backends/cpu/cpu_matmul.c,
   driven directly: emitter -> cpu_jit -> driver, no runtime) against OpenBLAS cblas_sgemm
   (cblas_sgemv for M = 1) linked into the same process, on GPT-2 124M shapes (C = 768, 3C = 2304, 4C = 3072,
   V = 50304; logits = x @ wte.T use the transposed rhs):
     M in {1, 64, 256} tokens x (K, N) in {(768,2304) qkv, (768,768) attn proj,
     (768,3072) fc, (3072,768) fc proj, (768,50304)^T logits}; 1 and 2 threads.
   Same data for both; results must agree within 1e-4 relative (max |diff| / max |ref|).
   GFLOP/s = 2MNK / best time; hlojit and OpenBLAS alternate in 3 rounds of >= 0.15 s each
   (the machine may be shared: best-of and alternation keep the ratio fair).
   For M = 1 (gemv, bandwidth-bound) both sides cycle through copies of B totalling > 512 MiB
   (B comes from memory, as the weights do in a decode step; with --cold every M does, as
   in a model's prefill, where a GPT-2 block's 28 MB of weights miss the LLC: packing B
   then costs what it costs there) and it prints GB/s (bytes of B
   read once per call) against the memory bandwidth: a read-only streaming sum over 128 MiB
   (4 streams per thread, a different 128 MiB of 640 MiB each call) on the same thread pool, taking turns with the gemv and OpenBLAS
   in the same rounds ("bw", and "of bw" = the goal's ratio). "of best" divides by the best
   read or STREAM-triad bandwidth seen at any time in the run instead: stricter, since on a
   shared machine the bandwidth drifts (40-100 GB/s on 2 threads seen here) and the best
   may come from a quieter minute than the gemv's.
   --bf16: hlojit's rhs is bf16 (an f32 x bf16 dot: weights kept in bf16), OpenBLAS gets
   the same values widened to f32; GB/s counts B's bf16 bytes, so "of bw" is against the
   bytes it must read, and ratio is bf16-kept hlojit against OpenBLAS on f32 weights.
   --panels: hlojit's rhs is the same values in the CPU matmul's panel order
   (hj_linear_panels / hj_linear_pack, read in place: no packing of B), OpenBLAS's as
   it is; for the transposed logits shape too (the panels are the same either way).
   Run through `make bench` (bench/bench.mk), which unsets OPENBLAS_CORETYPE and
   OPENBLAS_L2_SIZE so that OpenBLAS picks its own kernel for this CPU. */
#define _GNU_SOURCE
#include "backends/cpu/cpu_matmul.h"
#include "hlojit_impl/emitters/emit.h"
#include "hlojit_impl/text/text.h"
#include "hlojit_impl/emitters/matmul_plan.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* cblas/OpenBLAS entry points (no cblas.h on the build machine) */
enum { BM_ROW_MAJOR = 101, BM_NO_TRANS = 111, BM_TRANS = 112 };
void cblas_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc);
void cblas_sgemv(int order, int ta, int m, int n, float alpha, const float *a, int lda,
                 const float *x, int incx, float beta, float *y, int incy);
void openblas_set_num_threads(int n);
char *openblas_get_corename(void);
char *openblas_get_config(void);

static double bm_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int bm_vector_bytes(cpu_jit *j) {
  const char *f = cpu_jit_cpu_features(j);
  if (strstr(f, "+avx512f")) return 64;
  if (strstr(f, "+avx2")) return 32;
  return 16;
}

typedef struct bm_mm {
  hlo_module *m;
  struct emit_matmul_plan *plan;
} bm_mm;

/* Parses a one-dot fusion, emits it, JITs it and resolves the plan's kernels. */
static hj_status bm_build(hj_ctx_t *ctx, cpu_jit *j, int64_t M, int64_t K, int64_t N, bool trans,
                          bool bf16, int64_t kc, int64_t nr, bm_mm *out) {
  char text[1024];
  const char *rhs = bf16 ? "bf16[%lld,%lld]" : "f32[%lld,%lld]";
  char rs[64];
  snprintf(rs, sizeof rs, rhs, (long long)(trans ? N : K), (long long)(trans ? K : N));
  if (kc)   /* panel order (matmul_plan.h): lhs [M,P,kc], rhs [P,Q,kc,nr], root C [M,N] */
    snprintf(text, sizeof text,
             "HloModule mm\n"
             "fused {\n  p0 = f32[%lld,%lld] parameter(0)\n  p1 = f32[%lld,%lld,%lld,%lld] parameter(1)\n"
             "  a3 = f32[%lld,%lld,%lld] reshape(p0)\n"
             "  d = f32[%lld,%lld,%lld] dot(a3, p1), lhs_contracting_dims={1,2}, rhs_contracting_dims={0,2}\n"
             "  ROOT r = f32[%lld,%lld] reshape(d)\n}\n"
             "ENTRY e {\n  a = f32[%lld,%lld] parameter(0)\n  b = f32[%lld,%lld,%lld,%lld] parameter(1)\n"
             "  ROOT f = f32[%lld,%lld] fusion(a, b), kind=kOutput, calls=fused\n}\n",
             (long long)M, (long long)K, (long long)(K / kc), (long long)(N / nr), (long long)kc, (long long)nr,
             (long long)M, (long long)(K / kc), (long long)kc, (long long)M, (long long)(N / nr), (long long)nr,
             (long long)M, (long long)N, (long long)M, (long long)K, (long long)(K / kc), (long long)(N / nr),
             (long long)kc, (long long)nr, (long long)M, (long long)N);
  else
    snprintf(text, sizeof text,
             "HloModule mm\n"
             "fused {\n  p0 = f32[%lld,%lld] parameter(0)\n  p1 = %s parameter(1)\n"
             "  ROOT d = f32[%lld,%lld] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={%d}\n}\n"
             "ENTRY e {\n  a = f32[%lld,%lld] parameter(0)\n  b = %s parameter(1)\n"
             "  ROOT f = f32[%lld,%lld] fusion(a, b), kind=kOutput, calls=fused\n}\n",
             (long long)M, (long long)K, rs, (long long)M, (long long)N, trans ? 1 : 0,
             (long long)M, (long long)K, rs, (long long)M, (long long)N);
  hj_status st = hlo_parse_module(ctx, text, strlen(text), "bench", &out->m);
  if (st) return st;
  const hlo_instr *fusion = out->m->entry->root;
  cpu_jit_module jm;
  char name[64];
  cpu_jit_unique_name(j, "mm", name, sizeof name);
  if ((st = cpu_jit_module_create(j, name, &jm))) return st;
  emit_module em;
  emit_target tg = { .vector_bytes = bm_vector_bytes(j), .has_fma = true };
  emit_module_init(&em, ctx, jm.llctx, jm.mod, &tg);
  emit_kernel k;
  const hlo_comp *fc = fusion->calls[0];   /* the dot: the root, or under the panels' reshape */
  const hlo_instr *dot = fc->root->op == HLO_OP_RESHAPE ? fc->root->operands[0] : fc->root;
  st = emit_matmul_fusion(&em, fusion, dot, name, &k);
  emit_module_dispose(&em);
  if (!st) st = cpu_jit_optimize(j, jm.mod);
  if (st) {
    cpu_jit_module_dispose(&jm);
    return st;
  }
  if ((st = cpu_jit_add_module(j, &jm, NULL))) return st;
  out->plan = k.matmul;
  return cpu_matmul_prepare(j, out->plan);
}

/* All the arrays, for both sides and the yardsticks, come from hlojit's allocator, as an
   hj_buffer's storage does: 64-byte aligned, and 2 MiB pages (THP advice) from 2 MiB up.
   With 4 KiB pages the gemv lost ~10% to TLB misses, OpenBLAS's too. */
static void *bm_alloc(size_t n) { return hj__alloc(NULL, n); }

/* ---- memory bandwidth ------------------------------------------------------------------------ */

typedef struct bm_stream { float *a, *b, *c; double sums[64]; int64_t n; } bm_stream;

/* The streaming loops use the widest vectors the host has (target attributes, chosen at run
   time): compiled for baseline SSE2 they measured a third of what the memory gives. */
#define BM_TRIAD(NAME, ATTR)                                                               \
  ATTR static void NAME(bm_stream *s, int64_t b, int64_t e) {                             \
    for (int64_t i = b; i < e; i++) s->a[i] = s->b[i] + 3.0f * s->c[i];                    \
  }
/* 4 sub-ranges summed in lockstep, 4 vectors each per step: several streams in flight, like
   the gemv kernels (1 stream measured ~40% less here; 2-8 alike). */
#define BM_READ(NAME, ATTR, VB)                                                            \
  ATTR static double NAME(const float *p, int64_t b, int64_t e) {                          \
    typedef float v_t __attribute__((vector_size(VB)));                                   \
    enum { W = VB / 4 };                                                                   \
    v_t acc[4] = { { 0 } };                                                                \
    int64_t len = (e - b) / 4 / (4 * W) * (4 * W);                                         \
    for (int64_t i = 0; i < len; i += 4 * W)                                               \
      for (int l = 0; l < 4; l++) {                                                        \
        v_t x0, x1, x2, x3;                                                                \
        const float *q = p + b + l * len + i;                                              \
        memcpy(&x0, q, sizeof x0), memcpy(&x1, q + W, sizeof x1);                          \
        memcpy(&x2, q + 2 * W, sizeof x2), memcpy(&x3, q + 3 * W, sizeof x3);              \
        acc[l] += (x0 + x1) + (x2 + x3);                                                   \
      }                                                                                    \
    double t = 0;                                                                          \
    for (int64_t i = b + 4 * len; i < e; i++) t += p[i];                                   \
    for (int l = 0; l < 4; l++)                                                            \
      for (int w = 0; w < W; w++) t += acc[l][w];                                          \
    return t;                                                                              \
  }
BM_TRIAD(bm_triad_base, )
BM_TRIAD(bm_triad_avx2, __attribute__((target("avx2"))))
BM_TRIAD(bm_triad_avx512, __attribute__((target("avx512f"))))
BM_READ(bm_read_base, , 16)
BM_READ(bm_read_avx2, __attribute__((target("avx2"))), 32)
BM_READ(bm_read_avx512, __attribute__((target("avx512f"))), 64)

static void bm_triad_task(void *u, int64_t b, int64_t e) {
  if (__builtin_cpu_supports("avx512f")) bm_triad_avx512(u, b, e);
  else if (__builtin_cpu_supports("avx2")) bm_triad_avx2(u, b, e);
  else bm_triad_base(u, b, e);
}

static void bm_read_task(void *u, int64_t b, int64_t e) {
  bm_stream *s = u;
  double t = __builtin_cpu_supports("avx512f") ? bm_read_avx512(s->b, b, e)
           : __builtin_cpu_supports("avx2") ? bm_read_avx2(s->b, b, e) : bm_read_base(s->b, b, e);
  s->sums[(b * 64) / (s->n + 1) % 64] += t;   /* keep the loads alive */
}

/* The read yardstick: a read-only sum over 128 MiB, a different 128 MiB each call, out of
   BM_RD_CHUNKS: reading the same 128 MiB again and again measured 52 GB/s on one thread
   where fresh memory gives 44 (the 32 MiB L3 keeps part of a repeatedly scanned array),
   and the gemv reads fresh memory. Timed in turn with the gemv and OpenBLAS in the same
   rounds (the machine's bandwidth drifts by 2x over minutes when it is shared). */
#define BM_RD_CHUNKS 5
typedef struct bm_rd { bm_stream s; float *base; int i; tp_pool *pool; } bm_rd;
static void bm_read_all(void *u) {
  bm_rd *r = u;
  r->s.b = r->base + (size_t)(r->i++ % BM_RD_CHUNKS) * (size_t)r->s.n;
  tp_parallel_for(r->pool, r->s.n, 1 << 20, bm_read_task, &r->s);
}

/* Best GB/s of the read yardstick and of a triad (STREAM counting: 3 arrays). */
static void bm_bandwidth(bm_rd *rd, tp_pool *pool, double *read_gbs, double *triad_gbs) {
  bm_stream s = { .n = 32 << 20 };   /* 128 MiB per array */
  s.a = bm_alloc((size_t)s.n * 4);
  s.b = bm_alloc((size_t)s.n * 4);
  s.c = bm_alloc((size_t)s.n * 4);
  rd->pool = pool;
  uint32_t x = 7;   /* distinct data: pages of one value might get merged by the host */
  for (int64_t i = 0; i < s.n; i++) {
    x = x * 1664525u + 1013904223u;
    s.a[i] = 0, s.b[i] = (float)(x >> 8), s.c[i] = (float)(x & 255);
  }
  double br = 1e30, bt = 1e30;
  for (int r = 0; r < 5; r++) {
    double t0 = bm_now();
    bm_read_all(rd);
    double t1 = bm_now();
    tp_parallel_for(pool, s.n, 1 << 16, bm_triad_task, &s);
    double t2 = bm_now();
    if (t1 - t0 < br) br = t1 - t0;
    if (t2 - t1 < bt) bt = t2 - t1;
  }
  /* the best seen in this run (the machine may be shared: a bound must not be a dip) */
  if ((double)rd->s.n * 4 / br / 1e9 > *read_gbs) *read_gbs = (double)rd->s.n * 4 / br / 1e9;
  if ((double)s.n * 12 / bt / 1e9 > *triad_gbs) *triad_gbs = (double)s.n * 12 / bt / 1e9;
  free(s.a), free(s.b), free(s.c);
}

/* ---- one shape --------------------------------------------------------------------------------- */

/* |nb| copies of B used in turn (M = 1: so that B comes from memory, not from the LLC, as
   the weights do in a real decode step). */
typedef struct bm_run { bm_mm mm; void **bufs; void **bs; int nb, i; tp_pool *pool; void *scratch; } bm_run;

/* Best time of |fn|, run for at least |secs| (and 2 runs). */
static double bm_best(void (*fn)(void *), void *u, double secs) {
  double best = 1e30, start = bm_now();
  for (int reps = 0; reps < 2 || bm_now() - start < secs; reps++) {
    double t0 = bm_now();
    fn(u);
    double t = bm_now() - t0;
    if (t < best) best = t;
  }
  return best;
}

/* Best times of |a| and |b| over 3 alternating rounds of >= 0.15 s each, so that load from
   elsewhere on the machine hits both alike. Rounds are long because OpenBLAS's idle
   threads spin for a while after a call (~0.1 s), which slows whatever runs right after. */
static void bm_time3(void (*a)(void *), void *ua, void (*b)(void *), void *ub,
                     void (*c)(void *), void *uc, double *ta, double *tb, double *tc) {
  *ta = *tb = *tc = 1e30;
  for (int r = 0; r < 3; r++) {
    double x = bm_best(a, ua, 0.15), y = bm_best(b, ub, 0.15), z = c ? bm_best(c, uc, 0.15) : 1e30;
    if (x < *ta) *ta = x;
    if (y < *tb) *tb = y;
    if (z < *tc) *tc = z;
  }
}


static void bm_hj(void *u) {
  bm_run *r = u;
  r->bufs[1] = r->bs[r->i++ % r->nb];
  cpu_matmul_run(r->mm.plan, r->bufs, r->pool, r->scratch);
}

typedef struct bm_blas { int64_t M, N, K; bool trans; const float *a; float **bs; int nb, i; float *c; } bm_blas;
static void bm_ob(void *u) {
  bm_blas *s = u;
  if (s->M == 1) {   /* what an OpenBLAS user calls for one row: sgemv */
    const float *bm = s->bs[s->i++ % s->nb];
    if (s->trans) cblas_sgemv(BM_ROW_MAJOR, BM_NO_TRANS, (int)s->N, (int)s->K, 1.0f, bm, (int)s->K, s->a, 1, 0.0f, s->c, 1);
    else cblas_sgemv(BM_ROW_MAJOR, BM_TRANS, (int)s->K, (int)s->N, 1.0f, bm, (int)s->N, s->a, 1, 0.0f, s->c, 1);
    return;
  }
  cblas_sgemm(BM_ROW_MAJOR, BM_NO_TRANS, s->trans ? BM_TRANS : BM_NO_TRANS, (int)s->M, (int)s->N,
              (int)s->K, 1.0f, s->a, (int)s->K, s->bs[s->i++ % s->nb], s->trans ? (int)s->K : (int)s->N, 0.0f,
              s->c, (int)s->N);
}

static float *bm_rand(int64_t n, unsigned *seed) {
  float *p = bm_alloc((size_t)((n * 4 + 63) / 64 * 64));
  for (int64_t i = 0; i < n; i++) {
    *seed = *seed * 1664525u + 1013904223u;
    p[i] = (float)((*seed >> 8) & 0xffff) / 65536.0f - 0.5f;
  }
  return p;
}

/* `bench_matmul [--cold]` runs the table; `bench_matmul [--cold] M K N T` (T = 1: rhs
   transposed) one shape. */
/* f32 -> bf16 bits, round to nearest even (finite values). */
static uint16_t bm_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/* |b| rounded to bf16: the bf16 copy (returned), and |b| widened back in place. */
static uint16_t *bm_to_bf16(float *b, int64_t n) {
  uint16_t *h = bm_alloc((size_t)((n * 2 + 63) / 64 * 64));
  for (int64_t i = 0; i < n; i++) {
    h[i] = bm_bf16(b[i]);
    uint32_t u = (uint32_t)h[i] << 16;
    memcpy(&b[i], &u, 4);
  }
  return h;
}

int main(int argc, char **argv) {
  bool cold = false, bf16 = false, panels = false;
  while (argc > 1 && (!strcmp(argv[1], "--cold") || !strcmp(argv[1], "--bf16") || !strcmp(argv[1], "--panels"))) {
    if (!strcmp(argv[1], "--cold")) cold = true;
    else if (!strcmp(argv[1], "--bf16")) bf16 = true;
    else panels = true;
    argv++, argc--;
  }
  if (panels && bf16) {
    fprintf(stderr, "bench_matmul: --panels is for f32 weights (not with --bf16)\n");
    return 2;
  }
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  o.backend = HJ_BACKEND_INTERP;
  hj_ctx_t *ctx = NULL;
  cpu_jit *j = NULL;
  if (hj_ctx_create(&o, &ctx) || cpu_jit_create(ctx, &j)) {
    fprintf(stderr, "bench_matmul: setup failed: %s\n", ctx ? hj_ctx_error(ctx) : "");
    return 1;
  }
  printf("host: %s (%s), vector bytes %d\n", cpu_jit_cpu_name(j), "LLVM", bm_vector_bytes(j));
  printf("OpenBLAS core: %s   config: %s\n", openblas_get_corename(), openblas_get_config());
  if (bf16) printf("rhs: bf16 for hlojit (f32 x bf16), the same values in f32 for OpenBLAS\n");
  hj_ctx_t *cctx = NULL;   /* --panels: the CPU backend's panel order (hj_linear_panels) */
  hj_ctx_options_t co;
  hj_ctx_options_init(&co);
  co.backend = HJ_BACKEND_CPU;
  co.num_threads = 1;
  if (panels && hj_ctx_create(&co, &cctx)) {
    fprintf(stderr, "bench_matmul: setup failed: %s\n", cctx ? hj_ctx_error(cctx) : "");
    return 1;
  }
  if (panels) printf("rhs: hlojit's in the CPU matmul's panel order (hj_linear_pack), OpenBLAS's as it is\n");
  static struct { int64_t K, N; bool trans; const char *what; } kn[] = {
    { 768, 2304, false, "qkv" }, { 768, 768, false, "attn.proj" }, { 768, 3072, false, "fc" },
    { 3072, 768, false, "fc.proj" }, { 768, 50304, true, "logits(wte^T)" },
  };
  static int64_t Ms[] = { 1, 64, 256 };
  size_t nkn = sizeof kn / sizeof kn[0], nms = sizeof Ms / sizeof Ms[0];
  if (argc == 5) {
    Ms[0] = atoll(argv[1]), kn[0].K = atoll(argv[2]), kn[0].N = atoll(argv[3]);
    kn[0].trans = atoi(argv[4]) != 0, kn[0].what = "custom";
    nkn = nms = 1;
  }
  static const int threads[] = { 1, 2 };
  double bw_read[2] = { 0, 0 }, bw_triad[2] = { 0, 0 };
  bm_rd rd = { .s = { .n = 32 << 20 } };
  rd.base = bm_alloc((size_t)BM_RD_CHUNKS * (size_t)rd.s.n * 4);
  uint32_t lcg = 11;   /* distinct data: pages of one value might get merged by the host */
  for (size_t i = 0; i < (size_t)BM_RD_CHUNKS * (size_t)rd.s.n; i++)
    lcg = lcg * 1664525u + 1013904223u, rd.base[i] = (float)(lcg >> 8);
  tp_pool *pools[2];
  for (int t = 0; t < 2; t++) {
    if (tp_create(threads[t], &pools[t])) return 1;
    bm_bandwidth(&rd, pools[t], &bw_read[t], &bw_triad[t]);
  }
  int bad = 0;
  unsigned seed = 12345;
  /* rows are printed at the end, when the bandwidth bound is final */
  struct bm_row { const char *what; int64_t M, K, N; int t; double gh, go, gbs, rbs, rel; } rows[64];
  double bw_rd_best[2] = { 0, 0 };   /* best of the same-round reads */

  int nrows = 0;
  for (size_t si = 0; si < nkn; si++)
    for (size_t mi = 0; mi < nms; mi++) {
      int64_t M = Ms[mi], K = kn[si].K, N = kn[si].N;
      bm_mm mm = { 0 };
      int64_t kc = 0, nr = 0;
      if (panels && hj_linear_panels(cctx, HJ_BACKEND_CPU, K, N, &kc, &nr)) {
        fprintf(stderr, "bench_matmul: %s\n", hj_ctx_error(cctx));
        return 1;
      }
      if (bm_build(ctx, j, M, K, N, kn[si].trans, bf16, kc, nr, &mm)) {
        fprintf(stderr, "build failed: %s\n", hj_ctx_error(ctx));
        return 1;
      }
      float *a = bm_rand(M * K, &seed), *b = bm_rand(K * N, &seed);
      int nb = M == 1 || cold ? (int)((512ll << 20) / (K * N * 4) + 1) : 1;   /* 512 MiB >> LLC */
      float **bs = malloc(sizeof *bs * (size_t)nb);
      bs[0] = b;
      for (int i = 1; i < nb; i++)   /* different data: identical pages might get merged */
        bs[i] = bm_rand(K * N, &seed);
      void **hb = malloc(sizeof *hb * (size_t)nb);   /* what hlojit reads: bs, or bf16 copies */
      for (int i = 0; i < nb; i++) {
        hb[i] = bf16 ? (void *)bm_to_bf16(bs[i], K * N) : (void *)bs[i];
        if (kc && (hb[i] = bm_alloc((size_t)(K * N) * 4)) &&
            hj_linear_pack(cctx, bs[i], kn[si].trans ? HJ_LINEAR_OUT_IN : HJ_LINEAR_IN_OUT, K, N, kc, nr, hb[i])) {
          fprintf(stderr, "bench_matmul: %s\n", hj_ctx_error(cctx));
          return 1;
        }
      }
      float *c = bm_alloc((size_t)(M * N * 4 + 64)), *ref = bm_alloc((size_t)(M * N * 4 + 64));
      void *bufs[3] = { a, hb[0], c };
      for (int t = 0; t < 2; t++) {
        size_t sb = cpu_matmul_scratch_bytes(mm.plan, threads[t]);
        void *scr = sb ? bm_alloc((sb + 63) / 64 * 64) : NULL;
        bm_run r = { mm, bufs, hb, nb, 0, pools[t], scr };
        bm_blas bl = { M, N, K, kn[si].trans, a, bs, nb, 0, ref };
        openblas_set_num_threads(threads[t]);
        rd.pool = pools[t];
        double th, tb, tr;
        bm_time3(bm_hj, &r, bm_ob, &bl, M == 1 ? bm_read_all : NULL, &rd, &th, &tb, &tr);
        r.i = bl.i = 0;   /* one more run of each on copy 0, whose results are compared */
        bm_hj(&r);
        bm_ob(&bl);
        double maxd = 0, maxr = 0;
        for (int64_t i = 0; i < M * N; i++) {
          double d = fabs((double)c[i] - ref[i]);
          if (d > maxd) maxd = d;
          if (fabs(ref[i]) > maxr) maxr = fabs(ref[i]);
        }
        double rel = maxr > 0 ? maxd / maxr : maxd;
        double fl = 2.0 * (double)M * (double)N * (double)K;
        if (nrows < 64)
          rows[nrows++] = (struct bm_row){ kn[si].what, M, K, N, t, fl / th / 1e9, fl / tb / 1e9,
                                           (double)K * (double)N * (bf16 ? 2 : 4) / th / 1e9,
                                           (double)(32 << 20) * 4 / tr / 1e9, rel };
        if (M == 1 && (double)(32 << 20) * 4 / tr / 1e9 > bw_rd_best[t]) bw_rd_best[t] = (double)(32 << 20) * 4 / tr / 1e9;
        if (rel > 1e-4) bad = 1;
        free(scr);
      }
      for (int i = 0; i < nb; i++) {
        if (bf16 || kc) free(hb[i]);
        free(bs[i]);
      }
      free(hb), free(bs), free(a), free(c), free(ref);
      cpu_matmul_plan_free(mm.plan);
      hlo_module_free(mm.m);
    }
  for (int t = 0; t < 2; t++)
    printf("memory bandwidth (best in this run), %d thread(s): read %.1f GB/s, triad %.1f GB/s\n",
           threads[t], bw_read[t] > bw_rd_best[t] ? bw_read[t] : bw_rd_best[t], bw_triad[t]);
  printf("\n%-14s %4s %5s %6s %3s | %9s %9s %6s | %6s %6s %6s %7s | %s\n", "shape", "M", "K", "N", "thr",
         "hlojit", "OpenBLAS", "ratio", "GB/s", "bw", "of bw", "of best", "max rel diff");
  printf("%-14s %4s %5s %6s %3s | %9s %9s %6s | %6s %6s %6s %7s |\n", "", "", "", "", "", "GFLOP/s",
         "GFLOP/s", "", "(M=1)", "GB/s", "", "");
  for (int i = 0; i < nrows; i++) {
    struct bm_row *w = &rows[i];
    printf("%-14s %4lld %5lld %6lld %3d | %9.1f %9.1f %6.2f |", w->what, (long long)w->M,
           (long long)w->K, (long long)w->N, threads[w->t], w->gh, w->go, w->gh / w->go);
    double bound = bw_read[w->t] > bw_triad[w->t] ? bw_read[w->t] : bw_triad[w->t];
    if (bw_rd_best[w->t] > bound) bound = bw_rd_best[w->t];
    if (w->M == 1) printf(" %6.1f %6.1f %6.2f %7.2f |", w->gbs, w->rbs, w->gbs / w->rbs, w->gbs / bound);
    else printf(" %6s %6s %6s %7s |", "", "", "", "");
    printf(" %.2e%s\n", w->rel, w->rel > 1e-4 ? "  MISMATCH" : "");
  }
  for (int t = 0; t < 2; t++) tp_destroy(pools[t]);
  free(rd.base);
  cpu_jit_destroy(j);
  hj_ctx_destroy(cctx);
  hj_ctx_destroy(ctx);
  return bad;
}
