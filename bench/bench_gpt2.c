/* bench_gpt2.c — GPT-2 124M (examples/gpt2's session, CPU backend) against the machine's
   own yardsticks, measured in the same run: prefill against OpenBLAS sgemm's FLOP rate,
   decode against the memory read bandwidth.

   // L = 12 layers, C = 768 channels, NH = 12 heads, V = 50257 (Vp 50304), maxT = 1024

   The model: random f32 weights of GPT-2 small's shape made by gpt2_random.h (uniform, GPT-2-like
   scales), llm.c's (out, in) layout, given to gpt2_session as a gpt2_weights (no file).
   For each thread count (1 and 2; the session's context and OpenBLAS both set to it):
     prefill T = 64 and T = 256: gpt2_session_prefill of T ids (the bucket is exactly T),
       last-position logits only. Bound = FLOPs / the sgemm rate, where FLOPs = the block
       matmuls 2 T (12 C^2) L + attention as computed (the full T x T squares, both
       products: 4 T^2 C L) + the lm_head of one row 2 C Vp, and the rate is
       cblas_sgemm's on 1024^3 (row-major, no transposes). Goal (issue 13): >= 0.75 of it
       at T = 64, >= 0.85 at T = 256.
     decode at context 256: after a prefill of 255 tokens, the step feeding position 255
       (the attention spans 256 positions, cache bucket Tc = 256: the prefill of 255 before
       the steps sizes the cache so; the run fails otherwise), repeated with
       gpt2_session_rewind(255) before each. Bound = the bytes a step must read, every
       parameter except the wpe rows it does not use (all of wte as the lm_head, all of
       each block), at the read bandwidth: a read-only streaming sum over 4 x 128 MiB
       chunks in a row out of 640 MiB (fresh memory, as the weights are; 512 MiB per
       timing, about what a step reads) on as many threads. The KV cache the step reads
       (2 L 256 C floats, 19 MB) is on top, so the ratio slightly understates. Goal:
       >= 0.92.
   Both are timed four times: with the session's default matrix layouts (session.h,
   LAYOUTS: the block matrices in the CPU matmul's panel order), "plain" (the same with
   panels off: each matrix (in, out) or (out, in), packed by the matmul on every run), with
   kernel_layouts off (every matrix as the file stores it, the head reading wte itself), to
   show what the layouts buy, and "bf16": the same weights rounded to bf16
   (what an llm.c version 5 checkpoint holds), default layouts, the matrices kept in bf16
   (session.h, WEIGHTS; f32 arithmetic). Its decode bound is the bytes it must read: the
   matrices and the lm_head in bf16, the vectors in f32 (the embedding's wte stays f32, of
   which a step reads one row).
   Beside them, per thread count, "OpenBLAS*": the same prefills' matmuls alone through
   cblas_sgemm (blas_forward_once), against the same bound; and in its decode columns
   "weights*": the step's weight bytes alone, read as plain sums in the step's order with a
   join after each matrix (wt_once), against the same bound. The line after the table
   divides weights* by each f32 decode step: how close the step comes to only reading its
   weights, whatever the single-stream yardstick says.
   Every measurement is the best of several runs, the runs of all kinds taking turns over
   rounds, so a busy spell of a shared machine hits all of them; read the ratios (and the
   load line at the end: other processes' share of the CPU during the run).

     build/bench/bench_gpt2 [--rounds N] [--threads 1,2] [--layers-per-graph N]
   (--layers-per-graph: the sessions' split, session.h STAGES; default the session's)
   Exit status 1 if a run fails (not if a goal is missed: it prints the ratios). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bench_util.h"
#include "examples/gpt2/session.h"
#include "gpt2_random.h"

/* OpenBLAS (no cblas.h on the build machine). */
void cblas_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc);
void openblas_set_num_threads(int n);
char *openblas_get_corename(void);
enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };

enum { L = 12, C = 768, NH = 12, V = 50257, VP = 50304, MAXT = 1024 };

/* ---- random weights ------------------------------------------------------------------- */

static float *g_params; /* one block for everything (gpt2_random.h) */

static void fill(float *p, int64_t n, double base, double scale, uint32_t *r) {
  for (int64_t i = 0; i < n; i++) {
    *r = *r * 1664525u + 1013904223u;
    p[i] = (float)(base + scale * ((double)(*r >> 8) / (1 << 24) * 2.0 - 1.0));
  }
}

/* f32 -> bf16, round to nearest even (the values are finite). */
static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/* |w|'s weights rounded to bf16, as a version-5 checkpoint would hold them. */
static uint16_t *g_params16;
static gpt2_weights *bf16_weights(const gpt2_weights *w, int64_t n) {
  static gpt2_weights w16;
  static gpt2_layer layer[L];
  g_params16 = malloc(sizeof *g_params16 * (size_t)n);
  if (!g_params16) return NULL;
  for (int64_t i = 0; i < n; i++) g_params16[i] = to_bf16(g_params[i]);
  w16 = *w;
  gpt2_tensor *t;
  for (int l = 0; l < L; l++) layer[l] = w->layer[l];
  w16.layer = layer;
  gpt2_tensor *all[4 + 12 * L];
  int k = 0;
  all[k++] = &w16.wte, all[k++] = &w16.wpe, all[k++] = &w16.lnfw, all[k++] = &w16.lnfb;
  for (int l = 0; l < L; l++) {
    gpt2_layer *y = &layer[l];
    gpt2_tensor *b[12] = {&y->ln1w, &y->ln1b, &y->qkvw, &y->qkvb, &y->attprojw, &y->attprojb,
                          &y->ln2w, &y->ln2b, &y->fcw,  &y->fcb,  &y->fcprojw,  &y->fcprojb};
    for (int i = 0; i < 12; i++) all[k++] = b[i];
  }
  for (int i = 0; i < k; i++) {
    t = all[i];
    t->data = g_params16 + ((const float *)t->data - g_params);
    t->dtype = GPT2_BF16;
  }
  return &w16;
}

static int64_t g_nparams;
static gpt2_weights *random_weights(void) {
  static gpt2_weights w;
  static gpt2_layer layer[L];
  gpt2_config cfg = {.max_T = MAXT, .V = V, .Vp = VP, .L = L, .NH = NH, .C = C};
  g_nparams = (int64_t)VP * C + (int64_t)MAXT * C + 2 * C + (int64_t)L * (12 * (int64_t)C * C + 13 * C);
  g_params = gpt2_random_weights(&w, layer, cfg, 1.0, 1234);
  return g_params ? &w : NULL;
}

/* ---- yardsticks -------------------------------------------------------------------------- */

/* Read bandwidth: |nt| threads each sum their half of a 128 MiB chunk, 4 sub-ranges in
   lockstep with 4 vectors each (several streams in flight, as bench_matmul found the
   gemv needs); persistent threads meet at a barrier. */
#define RD_N (32 << 20)
#define RD_CHUNKS 5
typedef struct rd_pool rd_pool;
typedef struct rd_arg {
  rd_pool *pool;
  int i;
} rd_arg;
struct rd_pool {
  pthread_t th[8];
  rd_arg args[8];
  pthread_barrier_t go, done;
  const float *p;
  int nt, quit;
  int steps;                /* 0: read |p| (RD_N floats); 1: the decode step's pieces */
  _Atomic int arrived, sense;  /* the spinning join between two chunks of a step */
  double sums[8];
};

#define RD_SUM(NAME, ATTR, VB)                                                              \
  ATTR static double NAME(const float *p, int64_t n) {                                       \
    typedef float v_t __attribute__((vector_size(VB)));                                    \
    enum { W = VB / 4 };                                                                    \
    v_t acc[4] = {{0}};                                                                     \
    int64_t len = n / 4 / (4 * W) * (4 * W);                                                \
    for (int64_t i = 0; i < len; i += 4 * W)                                                \
      for (int l = 0; l < 4; l++) {                                                         \
        v_t x0, x1, x2, x3;                                                                 \
        const float *q = p + l * len + i;                                                   \
        memcpy(&x0, q, sizeof x0), memcpy(&x1, q + W, sizeof x1);                           \
        memcpy(&x2, q + 2 * W, sizeof x2), memcpy(&x3, q + 3 * W, sizeof x3);               \
        acc[l] += (x0 + x1) + (x2 + x3);                                                    \
      }                                                                                     \
    double t = 0;                                                                           \
    for (int l = 0; l < 4; l++)                                                             \
      for (int w = 0; w < W; w++) t += acc[l][w];                                           \
    return t;                                                                               \
  }
RD_SUM(rd_sum_base, , 16)
RD_SUM(rd_sum_avx2, __attribute__((target("avx2"))), 32)
RD_SUM(rd_sum_avx512, __attribute__((target("avx512f"))), 64)

static double rd_sum(const float *p, int64_t n) {
  return __builtin_cpu_supports("avx512f") ? rd_sum_avx512(p, n)
         : __builtin_cpu_supports("avx2")  ? rd_sum_avx2(p, n) : rd_sum_base(p, n);
}

static void wt_read(rd_pool *p, int i);

static void *rd_worker(void *u) {
  rd_arg *a = u;
  rd_pool *p = a->pool;
  for (;;) {
    pthread_barrier_wait(&p->go);
    if (p->quit) return NULL;
    if (p->steps) {
      wt_read(p, a->i);
    } else {
      int64_t per = RD_N / p->nt;
      p->sums[a->i] += rd_sum(p->p + per * a->i, per);
    }
    pthread_barrier_wait(&p->done);
  }
}

static int rd_start(rd_pool *p, int nt) {
  memset(p, 0, sizeof *p);
  p->nt = nt < 8 ? nt : 8;
  pthread_barrier_init(&p->go, NULL, (unsigned)nt + 1);
  pthread_barrier_init(&p->done, NULL, (unsigned)nt + 1);
  for (int i = 0; i < nt; i++) {
    p->args[i] = (rd_arg){p, i};
    if (pthread_create(&p->th[i], NULL, rd_worker, &p->args[i])) return -1;
  }
  return 0;
}

static void rd_stop(rd_pool *p) {
  p->quit = 1;
  pthread_barrier_wait(&p->go);
  for (int i = 0; i < p->nt; i++) pthread_join(p->th[i], NULL);
  pthread_barrier_destroy(&p->go);
  pthread_barrier_destroy(&p->done);
}

/* Memory like an hj_buffer's (hlojit's default allocator): 2 MiB aligned and advised as
   transparent huge pages, so the yardstick reads the same kind of pages the weights sit in. */
static void *big_alloc(size_t n) {
  void *p = NULL;
  if (posix_memalign(&p, 2u << 20, n)) return NULL;
  madvise(p, n, MADV_HUGEPAGE);
  return p;
}

static float *g_rd_mem;
static int g_rd_next;

/* One timed read of RD_READS chunks in a row, starting at the next one: about as many
   bytes as a decode step reads, so on a shared machine both are equally likely to be hit
   by another process's burst. Returns seconds. */
#define RD_READS 4
static double rd_once(rd_pool *p) {
  double t0 = bench_now();
  for (int i = 0; i < RD_READS; i++) {
    p->p = g_rd_mem + (size_t)(g_rd_next++ % RD_CHUNKS) * RD_N;
    pthread_barrier_wait(&p->go);
    pthread_barrier_wait(&p->done);
  }
  return bench_now() - t0;
}

/* The decode step's weights alone ("weights*"): the bytes of the bound (every matrix and
   vector of the 12 blocks, lnf, one wpe row, wte as the lm_head) in a copy of their own
   (huge-page memory, 495 MB), read as plain streaming sums in the step's order: per layer
   qkvw, attprojw, fcw, fcprojw, then the layer's 13 vectors as one piece; then lnf, the
   wpe row and wte. Each piece is split evenly over the threads, which meet at a spinning
   join after it before starting the next (as the step's matmuls join in hlojit's pool,
   whose idle threads spin too). One timing = one pass over all 12 x 5 + 1 pieces. It is
   what a step that did nothing but read each weight once, one matrix at a time, takes on
   the machine at hand: its ratio against the 512 MiB single-stream yardstick says how much
   of the decode bound a step's shape allows at all. */
enum { WT_PIECES = 5 * L + 1 };
static float *g_wt_mem;
static int64_t g_wt_len[WT_PIECES]; /* floats; the pieces lie in a row in g_wt_mem */

static int64_t wt_layout(void) {
  const int64_t c2 = (int64_t)C * C;
  const int64_t per_layer[5] = {3 * c2, c2, 4 * c2, 4 * c2, 13 * C};
  int64_t n = 0;
  for (int l = 0; l < L; l++)
    for (int j = 0; j < 5; j++) n += g_wt_len[5 * l + j] = per_layer[j];
  return n + (g_wt_len[5 * L] = (int64_t)VP * C + 3 * C); /* lnf w, b, the wpe row, wte */
}

static void wt_join(rd_pool *p, int *sense) {
  int s = *sense = !*sense;
  if (atomic_fetch_add(&p->arrived, 1) == p->nt - 1) {
    atomic_store(&p->arrived, 0);
    atomic_store(&p->sense, s);
  } else {
    while (atomic_load_explicit(&p->sense, memory_order_acquire) != s) continue; /* spin */
  }
}

static void wt_read(rd_pool *p, int i) {
  int sense = atomic_load(&p->sense);
  const float *at = g_wt_mem;
  for (int k = 0; k < WT_PIECES; k++) {
    int64_t per = g_wt_len[k] / p->nt;
    p->sums[i] += rd_sum(at + per * i, per);
    at += g_wt_len[k];
    wt_join(p, &sense);
  }
}

/* One timed pass over the step's pieces. Returns seconds. */
static double wt_once(rd_pool *p) {
  double t0 = bench_now();
  p->steps = 1;
  pthread_barrier_wait(&p->go);
  pthread_barrier_wait(&p->done);
  p->steps = 0;
  return bench_now() - t0;
}

static float *g_a, *g_b, *g_c; /* sgemm operands, 1024^2 each */

static double sgemm_once(void) {
  double t0 = bench_now();
  cblas_sgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, 1024, 1024, 1024, 1.0f, g_a, 1024, g_b, 1024, 0.0f,
              g_c, 1024);
  return bench_now() - t0;
}

/* ---- the forward's matmuls alone through OpenBLAS --------------------------------------------
   What a hand-written forward (llm.c's shape of program) would take if its matmuls ran at
   OpenBLAS's speed and everything else (layer norms, softmax, GELU, residuals, the head
   split) cost nothing: per layer x @ qkvw^T, per head q k^T and p v, y @ attprojw^T,
   x @ fcw^T, h @ fcprojw^T, on the same weights in llm.c's (out, in) layout (12 layers'
   weights do not fit the LLC: each layer's come from memory, as in the model); then the
   head's one row against wte. The activations are fixed random buffers, not chained, so
   no value drifts towards denormals. A ceiling for the prefill ratio the sgemm yardstick
   allows a forward built on OpenBLAS's kernels: the matmuls at M = T with weights from
   memory run below sgemm's 1024^3 rate, and the head row is a bandwidth-bound gemv. */
static float *g_fx, *g_fqkv, *g_fatt, *g_fy, *g_fh, *g_fout; /* up to T = 256 */

static int blas_forward_alloc(void) {
  size_t t = 256, c = C;
  g_fx = malloc(4 * t * c), g_fqkv = malloc(4 * t * 3 * c), g_fatt = malloc(4 * NH * t * t);
  g_fy = malloc(4 * t * c), g_fh = malloc(4 * t * 4 * c), g_fout = malloc(4 * (t * 4 * c + VP));
  if (!g_fx || !g_fqkv || !g_fatt || !g_fy || !g_fh || !g_fout) return -1;
  uint32_t r = 99;
  fill(g_fx, (int64_t)t * c, 0, 1, &r);
  fill(g_fqkv, (int64_t)t * 3 * c, 0, 1, &r);
  fill(g_fatt, (int64_t)NH * t * t, 0, 0.01, &r);
  fill(g_fy, (int64_t)t * c, 0, 1, &r);
  fill(g_fh, (int64_t)t * 4 * c, 0, 1, &r);
  return 0;
}

static void blas_forward_free(void) {
  free(g_fx), free(g_fqkv), free(g_fatt), free(g_fy), free(g_fh), free(g_fout);
}

static double blas_forward_once(const gpt2_weights *w, int T) {
  const int hs = C / NH;
  float *out = g_fout;
  double t0 = bench_now();
  for (int l = 0; l < L; l++) {
    const gpt2_layer *y = &w->layer[l];
    cblas_sgemm(ROW_MAJOR, NO_TRANS, TRANS, T, 3 * C, C, 1.0f, g_fx, C, y->qkvw.data, C, 0.0f,
                out, 3 * C);
    for (int h = 0; h < NH; h++) {
      const float *q = g_fqkv + h * hs, *k = q + C, *v = q + 2 * C;
      cblas_sgemm(ROW_MAJOR, NO_TRANS, TRANS, T, T, hs, 1.0f, q, 3 * C, k, 3 * C, 0.0f, out, T);
      cblas_sgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, T, hs, T, 1.0f, g_fatt + (size_t)h * T * T, T,
                  v, 3 * C, 0.0f, out + h * hs, C);
    }
    cblas_sgemm(ROW_MAJOR, NO_TRANS, TRANS, T, C, C, 1.0f, g_fy, C, y->attprojw.data, C, 0.0f,
                out, C);
    cblas_sgemm(ROW_MAJOR, NO_TRANS, TRANS, T, 4 * C, C, 1.0f, g_fx, C, y->fcw.data, C, 0.0f,
                out, 4 * C);
    cblas_sgemm(ROW_MAJOR, NO_TRANS, TRANS, T, C, 4 * C, 1.0f, g_fh, 4 * C, y->fcprojw.data,
                4 * C, 0.0f, out, C);
  }
  cblas_sgemm(ROW_MAJOR, NO_TRANS, TRANS, 1, VP, C, 1.0f, g_fx + (size_t)(T - 1) * C, C,
              w->wte.data, C, 0.0f, out, VP);
  return bench_now() - t0;
}

/* ---- the model ----------------------------------------------------------------------------- */

typedef struct runner {
  gpt2_session *s;
  int32_t ids[256];
  int bad;
} runner;

static double prefill_once(runner *r, int T) {
  const float *lg;
  gpt2_err err;
  double t0 = bench_now();
  if (gpt2_session_prefill(r->s, r->ids, T, &lg, &err)) {
    fprintf(stderr, "bench_gpt2: prefill T=%d: %s\n", T, err.msg);
    r->bad = 1;
  }
  return bench_now() - t0;
}

/* The step at position 255 (the cache must hold 255 positions). */
static double decode_once(runner *r) {
  const float *lg;
  gpt2_err err;
  gpt2_session_rewind(r->s, 255);
  double t0 = bench_now();
  if (gpt2_session_decode(r->s, 42, &lg, &err)) {
    fprintf(stderr, "bench_gpt2: decode: %s\n", err.msg);
    r->bad = 1;
  }
  return bench_now() - t0;
}

static void keep_min(double *best, double t) {
  if (t < *best) *best = t;
}

int main(int argc, char **argv) {
  bench_load load0 = bench_load_now();
  int rounds = 3, threads[2] = {1, 2}, nthr = 2, lpg = -1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--layers-per-graph") && i + 1 < argc) lpg = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
      nthr = sscanf(argv[++i], "%d,%d", &threads[0], &threads[1]);
      if (nthr < 1) nthr = 1;
    } else {
      fprintf(stderr, "usage: bench_gpt2 [--rounds N] [--threads 1,2] [--layers-per-graph N]\n");
      return 2;
    }
  }
  setenv("HLOJIT_CACHE_DIR", "off", 1);   /* the compile line: compiles, not disk-cache loads */
  gpt2_weights *w = random_weights();
  gpt2_weights *w16 = w ? bf16_weights(w, g_nparams) : NULL;
  g_rd_mem = big_alloc(sizeof(float) * (size_t)RD_N * RD_CHUNKS);
  int64_t wt_n = wt_layout();
  g_wt_mem = big_alloc(sizeof(float) * (size_t)wt_n);
  g_a = malloc(4u << 20), g_b = malloc(4u << 20), g_c = malloc(4u << 20);
  if (!w || !w16 || !g_rd_mem || !g_wt_mem || !g_a || !g_b || !g_c || blas_forward_alloc()) return 1;
  uint32_t r = 7;
  fill(g_rd_mem, (int64_t)RD_N * RD_CHUNKS, 0, 1, &r);
  fill(g_wt_mem, wt_n, 0, 1, &r);
  fill(g_a, 1 << 20, 0, 1, &r);
  fill(g_b, 1 << 20, 0, 1, &r);
  printf("GPT-2 124M shape (L=%d C=%d NH=%d V=%d), random f32 weights (out, in), CPU backend; %s\n",
         L, C, NH, V, lpg < 0 ? "the session's default split" : lpg == 0 ? "the whole model one graph" : "blocks in graphs of N");
  if (lpg > 0) printf("(N = %d blocks per graph)\n", lpg);
  printf("OpenBLAS core: %s\n", openblas_get_corename());

  const double blocks = 12.0 * C * C * L;
  double flops[2], bytes = 0;
  const int Ts[2] = {64, 256};
  for (int i = 0; i < 2; i++)
    flops[i] = 2.0 * Ts[i] * blocks + 4.0 * Ts[i] * Ts[i] * C * L + 2.0 * C * VP;
  bytes = 4.0 * ((double)VP * C + C + 2 * C + L * (12.0 * C * C + 13 * C));
  double kv_bytes = 4.0 * 2 * L * 256 * C;
  double bytes16 = 2.0 * ((double)VP * C + L * 12.0 * C * C) + 4.0 * (C + 2 * C + L * 13.0 * C);

  // run[v][t]: v = 0 the session's default (kernel_layouts, panels), 1 every matrix as
  // stored, 2 the bf16 weights (default layouts, kept in bf16), 3 "plain": kernel layouts
  // without the panel order (what the panels buy)
  enum { NV = 4 };
  static const char *const vname[NV] = {"kernel", "as stored", "bf16", "plain"};
  runner run[NV][2];
  memset(run, 0, sizeof run);
  rd_pool pool[2];
  double t_gemm[2], t_rd[2], t_pf[NV][2][2], t_dec[NV][2], comp[2], t_blas[2][2], t_wt[2];
  for (int t = 0; t < nthr; t++) {
    for (int v = 0; v < NV; v++) {
      gpt2_session_opts o;
      gpt2_session_opts_init(&o);
      o.backend = HJ_BACKEND_CPU;
      o.num_threads = threads[t];
      o.kernel_layouts = v != 1;
      o.panels = v != 3;
      if (lpg >= 0) o.layers_per_graph = lpg;
      gpt2_err err;
      runner *x = &run[v][t];
      if (gpt2_session_create(v == 2 ? w16 : w, &o, &x->s, &err)) {
        fprintf(stderr, "bench_gpt2: %s\n", err.msg);
        return 1;
      }
      for (int i = 0; i < 256; i++) x->ids[i] = (int32_t)((i * 7919) % V);
      // Compile every bucket (and warm up) outside the timed rounds.
      prefill_once(x, 64);
      prefill_once(x, 256);
      prefill_once(x, 255);
      decode_once(x);
      if (x->bad) return 1;
      t_dec[v][t] = t_pf[v][t][0] = t_pf[v][t][1] = 1e30;
    }
    if (rd_start(&pool[t], threads[t])) return 1;
    gpt2_session_stats st;
    gpt2_session_get_stats(run[0][t].s, &st);
    comp[t] = st.compile_s;
    t_gemm[t] = t_rd[t] = t_blas[t][0] = t_blas[t][1] = t_wt[t] = 1e30;
  }
  for (int round = 0; round < rounds; round++)
    for (int t = 0; t < nthr; t++) {
      openblas_set_num_threads(threads[t]);
      for (int k = 0; k < 3; k++) keep_min(&t_gemm[t], sgemm_once());
      for (int k = 0; k < 3; k++) keep_min(&t_rd[t], rd_once(&pool[t]));
      for (int k = 0; k < 3; k++) keep_min(&t_blas[t][0], blas_forward_once(w, 64));
      for (int k = 0; k < 2; k++) keep_min(&t_blas[t][1], blas_forward_once(w, 256));
      for (int v = 0; v < NV; v++) {
        runner *x = &run[v][t];
        for (int k = 0; k < 3; k++) keep_min(&t_pf[v][t][0], prefill_once(x, 64));
        for (int k = 0; k < 2; k++) keep_min(&t_pf[v][t][1], prefill_once(x, 256));
        prefill_once(x, 255);
      }
      for (int k = 0; k < 10; k++) { // each between steps that read other memory: from DRAM
        for (int v = 0; v < NV; v++) keep_min(&t_dec[v][t], decode_once(&run[v][t]));
        keep_min(&t_wt[t], wt_once(&pool[t]));
      }
      for (int k = 0; k < 3; k++) keep_min(&t_rd[t], rd_once(&pool[t]));
    }
  int bad = 0;
  printf("\n%-10s yardsticks (best of the run)   prefill (last-position logits)              decode at 256\n", "");
  printf("%-10s %3s | %10s %9s | %-37s | %-37s | %s\n", "layouts", "thr", "sgemm GF/s", "read GB/s",
         "T=64: ms  bound ms  ratio (goal 0.75)", "T=256: ms  bound ms  ratio (goal 0.85)",
         "ms  bound ms  ratio (goal 0.92)  tok/s");
  for (int v = 0; v < NV; v++)
    for (int t = 0; t < nthr; t++) {
      double gf = 2.0 * 1024 * 1024 * 1024 / t_gemm[t] / 1e9, gbs = 4.0 * RD_N * RD_READS / t_rd[t] / 1e9;
      double b0 = flops[0] / (gf * 1e9), b1 = flops[1] / (gf * 1e9), bd = (v == 2 ? bytes16 : bytes) / (gbs * 1e9);
      const double *pf = t_pf[v][t], dec = t_dec[v][t];
      printf("%-10s %3d | %10.1f %9.1f | %8.2f %9.2f %7.2f %s        | %9.2f %9.2f %7.2f %s        | "
             "%6.2f %9.2f %7.2f %s %12.1f\n",
             vname[v], threads[t], gf, gbs, pf[0] * 1e3, b0 * 1e3, b0 / pf[0],
             b0 / pf[0] >= 0.75 ? "  " : "!!", pf[1] * 1e3, b1 * 1e3, b1 / pf[1],
             b1 / pf[1] >= 0.85 ? "  " : "!!", dec * 1e3, bd * 1e3, bd / dec,
             bd / dec >= 0.92 ? "  " : "!!", 1.0 / dec);
      bad |= run[v][t].bad;
    }
  for (int t = 0; t < nthr; t++) {
    double gf = 2.0 * 1024 * 1024 * 1024 / t_gemm[t] / 1e9, gbs = 4.0 * RD_N * RD_READS / t_rd[t] / 1e9;
    double b0 = flops[0] / (gf * 1e9), b1 = flops[1] / (gf * 1e9), bd = bytes / (gbs * 1e9);
    printf("%-10s %3d | %10.1f %9s | %8.2f %9.2f %7.2f          | %9.2f %9.2f %7.2f          | "
           "%6.2f %9.2f %7.2f\n",
           "OpenBLAS*", threads[t], gf, "", t_blas[t][0] * 1e3, b0 * 1e3, b0 / t_blas[t][0],
           t_blas[t][1] * 1e3, b1 * 1e3, b1 / t_blas[t][1], t_wt[t] * 1e3, bd * 1e3, bd / t_wt[t]);
  }
  printf("(* prefill: the same forward's matmuls alone through cblas_sgemm, weights from memory,"
         " nothing else timed: the ratio a forward built on OpenBLAS could reach at best;"
         " decode: the step's weight bytes alone, read as plain sums in its order, one join per"
         " matrix: the ratio a step that only read its weights could reach)\n");
  printf("decode against that (weights* ms / step ms):");
  for (int v = 0; v < NV; v++)
    for (int t = 0; t < nthr; t++)
      if (v != 2) printf("  %s %d thr %.2f", vname[v], threads[t], t_wt[t] / t_dec[v][t]);
  printf("\n");
  printf("(layouts: kernel = the session's default, examples/gpt2/session.h LAYOUTS: the block"
         " matrices in the CPU matmul's panel order; plain = the same without the panel order,"
         " each matrix (in, out) or (out, in); as stored = every matrix as llm.c stores it,"
         " (out, in), the head reading wte; bf16 = the weights rounded to bf16, kernel layouts,"
         " matrices kept in bf16)\n");
  printf("\nFLOPs: T=64 %.2f G, T=256 %.2f G (block matmuls + full attention squares + one lm_head "
         "row); decode reads %.1f MB of weights, %.1f MB with bf16 matrices (+ %.1f MB of KV "
         "cache, not in the bound)\n",
         flops[0] / 1e9, flops[1] / 1e9, bytes / 1e6, bytes16 / 1e6, kv_bytes / 1e6);
  for (int t = 0; t < nthr; t++) // decode_once comes after prefill_once(255) in every round
    for (int v = 0; v < NV; v++) {
      gpt2_session_stats st;
      gpt2_session_get_stats(run[v][t].s, &st);
      if (st.cache_entries != 256) {
        printf("!! %s %d thr: the decode ran with a cache of %d entries, not 256\n",
               vname[v], threads[t], st.cache_entries);
        bad = 1;
      }
    }
  printf("compile (all buckets, s): ");
  for (int t = 0; t < nthr; t++) printf("%d thr %.2f  ", threads[t], comp[t]);
  printf("\n!! marks a ratio under its goal. ");
  bench_load_report(load0);
  for (int t = 0; t < nthr; t++) {
    rd_stop(&pool[t]);
    for (int v = 0; v < NV; v++) gpt2_session_free(run[v][t].s);
  }
  free(g_params);
  free(g_params16);
  free(g_rd_mem);
  free(g_wt_mem);
  free(g_a), free(g_b), free(g_c);
  blas_forward_free();
  return bad;
}
