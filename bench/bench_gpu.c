/* bench_gpu.c — the CUDA backend's three ratios, measured in one run on one GPU
   (`make bench-gpu`; bench/README.md):

   1. matmul: the tiled kernel (hlojit_impl/emitters/gpu_mm_tiled.c, f32, no tensor cores) against
      cuBLAS sgemm (cublasGemmStridedBatchedEx, CUBLAS_COMPUTE_32F, no TF32) at GPT-2
      small's shapes for T = 64 and T = 1024 tokens: qkv T x 2304 x 768, attention
      projection T x 768 x 768, fc T x 3072 x 768, fc projection T x 768 x 3072, and the
      tied lm head T x 50257 x 768 (B as [N, K]); the same device buffers for both. Ratio =
      cuBLAS time / tiled time (1.0: as fast as cuBLAS; goal >= 0.5). At T = 1 (decode)
      the skinny kernel (gpu_mm_skinny.c) instead, in GB/s of A, B and C moved.
   2. elementwise: a GELU fusion on f32[64M] through the library (hj_exec_run, graph replay:
      one kernel reading 256 MiB and writing 256 MiB) against cuMemcpyDtoDAsync of 256 MiB
      (also 512 MiB moved). Ratio = fusion GB/s / copy GB/s (goal >= 0.8).
   3. a GPT-2 block (tests/fixtures/hlo_pass/gpt2_block.hlo, T = 64) through the library,
      HLOJIT_CUDA_GRAPHS=0 (every kernel its own launch) against graph replay. Ratio = plain
      time / graph time (> 1: graphs save launch overhead).
   Timing: host clock around a stream synchronisation, after warm-up runs, over at least 50
   ms and 10 repetitions, best of 3 rounds (the two sides of a ratio alternate rounds).
   Checks: the tiled result agrees with cuBLAS's (max |diff| <= 1e-3 * max |C|) and the
   block's plain and graph outputs are the same bits; exit status 1 if one fails.

   No GPU: prints "skipped: ..." and exits 0. HLOJIT_BENCH_DRY=1 with HLOJIT_LIBCUDA naming
   the CUDA test double runs everything once at small sizes to check the program itself
   (tools/gpu_check.sh --dry-run): the figures are then meaningless and said to be. */
#define _GNU_SOURCE
#include "hlojit.h"
#include "bench_util.h"
#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_driver.h"
#include "hlojit_impl/emitters/gpu_mm.h"
#include <math.h>
#include <stdlib.h>

static cuda_driver *G_d;
static cuda_device *G_dv;
static cuda_codegen *G_cg;
static bool G_dry;
static int G_fail;

static void bg_die(const char *what, const cuda_error *e) {
  printf("FAILED: %s: %s\n", what, e->msg);
  exit(1);
}

static double bg_sync_now(void) {
  cuda_error e;
  if (cuda_device_sync(G_dv, &e) != HJ_OK) bg_die("sync", &e);
  return bench_now();
}

/* ---- 1. matmul --------------------------------------------------------------------------- */

typedef struct bg_mm { const char *what; int64_t m, n, k; bool b_nk; } bg_mm;

static void bg_fill(CUdeviceptr p, size_t n, uint64_t seed) {
  float *f = (float *)(uintptr_t)p;
  for (size_t i = 0; i < n; i++) {
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    f[i] = (float)((double)(seed >> 11) / 9007199254740992.0 * 2 - 1);
  }
}

static cublasStatus_t bg_cublas(const emit_gpu_mm *s, CUdeviceptr A, CUdeviceptr B, CUdeviceptr C) {
  float one = 1, zero = 0;
  return G_d->cublasGemmStridedBatchedEx(
      G_dv->blas, s->b_nk ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, (int)s->n, (int)s->m, (int)s->k, &one,
      (void *)(uintptr_t)B, CUDA_R_32F, (int)(s->b_nk ? s->k : s->n), s->stride_b, (void *)(uintptr_t)A,
      CUDA_R_32F, (int)s->k, s->stride_a, &zero, (void *)(uintptr_t)C, CUDA_R_32F, (int)s->n, s->stride_c, 1,
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

static double bg_time_mm(bool tiled, CUfunction fn, const emit_gpu_mm_launch *l, const emit_gpu_mm *s,
                         CUdeviceptr A, CUdeviceptr B, CUdeviceptr C) {
  cuda_error e;
  void *params[] = { &A, &B, &C };
  int reps = G_dry ? 1 : 10;
  double best = 1e30;
  for (int round = 0; round < (G_dry ? 1 : 3); round++) {
    for (int w = 0; w < (G_dry ? 0 : 2); w++) {   /* warm-up */
      if (tiled && cuda_launch(G_dv, fn, "mm", l->grid, l->block, 0, params, &e) != HJ_OK) bg_die("launch", &e);
      if (!tiled) bg_cublas(s, A, B, C);
    }
    double t0 = bg_sync_now(), t1;
    int n = 0;
    do {
      for (int r = 0; r < reps; r++) {
        if (tiled && cuda_launch(G_dv, fn, "mm", l->grid, l->block, 0, params, &e) != HJ_OK) bg_die("launch", &e);
        if (!tiled && bg_cublas(s, A, B, C) != CUBLAS_STATUS_SUCCESS) { printf("FAILED: cuBLAS\n"); exit(1); }
      }
      n += reps;
      t1 = bg_sync_now();
    } while (!G_dry && t1 - t0 < 0.05);
    double t = (t1 - t0) / n;
    if (t < best) best = t;
  }
  return best;
}

static void bg_matmul(const bg_mm *c, int64_t T) {
  cuda_error e;
  emit_gpu_mm s;
  emit_gpu_mm_init(&s);
  s.m = T, s.n = c->n, s.k = c->k, s.b_nk = c->b_nk, s.sm_count = G_dv->info.sm_count;
  s.stride_a = s.m * s.k, s.stride_b = s.k * s.n, s.stride_c = s.m * s.n;
  LLVMContextRef lc = LLVMContextCreate();
  LLVMModuleRef mod = LLVMModuleCreateWithNameInContext("bench_mm", lc);
  cuda_codegen_prepare_module(G_cg, mod);
  emit_gpu_mm_launch l;
  char *ptx = NULL;
  bool skinny = s.m <= EMIT_GPU_SKINNY_MAX_M;   /* as emitters/gpu_matmul.c picks it */
  emit_gpu_err ge = { 0 };
  hj_status es = skinny ? emit_gpu_mm_skinny(mod, "bench_mm", &s, &l, &ge) : emit_gpu_mm_tiled(mod, "bench_mm", &s, &l, &ge);
  if (es != HJ_OK) {
    e.status = ge.status;
    snprintf(e.msg, sizeof e.msg, "%s", ge.msg);
    bg_die(c->what, &e);
  }
  if (cuda_compile_ptx(G_cg, mod, &ptx, &e) != HJ_OK) bg_die(c->what, &e);
  LLVMDisposeModule(mod);
  LLVMContextDispose(lc);
  CUmodule cm;
  CUfunction fn;
  if (cuda_module_load(G_dv, ptx, c->what, &cm, &e) != HJ_OK || cuda_module_function(G_dv, cm, "bench_mm", &fn, &e) != HJ_OK)
    bg_die(c->what, &e);
  free(ptx);
  size_t na = (size_t)(s.m * s.k), nb = (size_t)(s.k * s.n), nc = (size_t)(s.m * s.n);
  CUdeviceptr A, B, C, C2;
  if (cuda_mem_alloc_managed(G_dv, na * 4, &A, &e) || cuda_mem_alloc_managed(G_dv, nb * 4, &B, &e) ||
      cuda_mem_alloc_managed(G_dv, nc * 4, &C, &e) || cuda_mem_alloc_managed(G_dv, nc * 4, &C2, &e))
    bg_die("allocation", &e);
  bg_fill(A, na, 1);
  bg_fill(B, nb, 2);
  CUdeviceptr all[4] = { A, B, C, C2 };
  size_t sz[4] = { na, nb, nc, nc };
  for (int i = 0; i < 4; i++) cuda_mem_prefetch(G_dv, all[i], sz[i] * 4, true, &e);
  double tt = 1e30, tb = 1e30;
  for (int r = 0; r < 2; r++) {   /* alternate the two sides */
    double a = bg_time_mm(true, fn, &l, &s, A, B, C), b = bg_time_mm(false, fn, &l, &s, A, B, C2);
    if (a < tt) tt = a;
    if (b < tb) tb = b;
  }
  cuda_mem_prefetch(G_dv, C, nc * 4, false, &e);
  cuda_mem_prefetch(G_dv, C2, nc * 4, false, &e);
  bg_sync_now();
  const float *x = (const float *)(uintptr_t)C, *y = (const float *)(uintptr_t)C2;
  double md = 0, mx = 0;
  for (size_t i = 0; i < nc; i++) {
    md = fmax(md, fabs((double)x[i] - y[i]));
    mx = fmax(mx, fabs((double)y[i]));
  }
  bool ok = md <= 1e-3 * mx || G_dry;
  double flop = 2.0 * (double)s.m * (double)s.n * (double)s.k, bytes = 4.0 * (double)(na + nb + nc);
  if (skinny)   /* bandwidth-bound: B streamed once */
    printf("matmul %-26s T=%-5lld skinny  : ours  %8.3f ms %7.0f GB/s,    cuBLAS %8.3f ms %7.0f GB/s:    "
           "ratio %.2f; max|ours-cuBLAS| %.1e%s\n", c->what, (long long)T, tt * 1e3, bytes / tt * 1e-9,
           tb * 1e3, bytes / tb * 1e-9, tb / tt, md, ok ? "" : " MISMATCH");
  else
    printf("matmul %-26s T=%-5lld tile %3d: tiled %8.3f ms %7.0f GFLOP/s, cuBLAS %8.3f ms %7.0f GFLOP/s: "
           "ratio %.2f%s; max|tiled-cuBLAS| %.1e%s\n", c->what, (long long)T, l.tile, tt * 1e3, flop / tt * 1e-9,
           tb * 1e3, flop / tb * 1e-9, tb / tt, tb / tt >= 0.5 ? "" : " (below the 0.5 goal)", md,
           ok ? "" : " MISMATCH");
  if (!ok) G_fail++;
  for (int i = 0; i < 4; i++) cuda_mem_free(G_dv, all[i], &e);
  cuda_module_unload(G_dv, cm, &e);
}

/* ---- 2, 3: through the library ------------------------------------------------------------- */

static hj_ctx_t *bg_ctx(void) {
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  o.backend = HJ_BACKEND_CUDA;
  hj_ctx_t *ctx = NULL;
  if (hj_ctx_create(&o, &ctx) != HJ_OK) { printf("FAILED: hj_ctx_create\n"); exit(1); }
  return ctx;
}

#define BG_OK(ctx, call)                                                                    \
  do {                                                                                      \
    if ((call) != HJ_OK) { printf("FAILED: %s: %s\n", #call, hj_ctx_error(ctx)); exit(1); } \
  } while (0)

/* Best time per run of |e| over 3 rounds of >= 50 ms. */
static double bg_time_exec(hj_ctx_t *ctx, hj_exec_t *e, hj_buffer_t **in, int nin, hj_buffer_t **out, int nout) {
  double best = 1e30;
  for (int w = 0; w < (G_dry ? 1 : 3); w++) BG_OK(ctx, hj_exec_run(e, in, nin, out, nout));
  for (int round = 0; round < (G_dry ? 1 : 3); round++) {
    double t0 = bench_now(), t1;
    int n = 0;
    do {
      BG_OK(ctx, hj_exec_run(e, in, nin, out, nout));
      n++;
      t1 = bench_now();
    } while (!G_dry && (t1 - t0 < 0.05 || n < 10));
    if ((t1 - t0) / n < best) best = (t1 - t0) / n;
  }
  return best;
}

static void bg_elementwise(void) {
  int64_t N = G_dry ? 1 << 16 : 64 << 20;
  char text[1200];
  snprintf(text, sizeof text,
           "HloModule gelu\nENTRY main {\n  x = f32[%lld] parameter(0)\n  h = f32[] constant(0.5)\n"
           "  hb = f32[%lld] broadcast(h), dimensions={}\n  c = f32[] constant(0.7978845608)\n"
           "  cb = f32[%lld] broadcast(c), dimensions={}\n  x3 = f32[%lld] multiply(x, x)\n"
           "  x4 = f32[%lld] multiply(x3, x)\n  k = f32[] constant(0.044715)\n  kb = f32[%lld] broadcast(k), dimensions={}\n"
           "  t0 = f32[%lld] multiply(kb, x4)\n  t1 = f32[%lld] add(x, t0)\n  t2 = f32[%lld] multiply(cb, t1)\n"
           "  t3 = f32[%lld] tanh(t2)\n  o = f32[] constant(1)\n  ob = f32[%lld] broadcast(o), dimensions={}\n"
           "  t4 = f32[%lld] add(ob, t3)\n  t5 = f32[%lld] multiply(hb, t4)\n  ROOT y = f32[%lld] multiply(x, t5)\n}\n",
           (long long)N, (long long)N, (long long)N, (long long)N, (long long)N, (long long)N, (long long)N,
           (long long)N, (long long)N, (long long)N, (long long)N, (long long)N, (long long)N, (long long)N);
  hj_ctx_t *ctx = bg_ctx();
  hj_module_t *m = NULL;
  hj_exec_t *e = NULL;
  BG_OK(ctx, hj_module_parse(ctx, text, strlen(text), "gelu", &m));
  BG_OK(ctx, hj_compile_module(ctx, m, &e));
  hj_buffer_t *x = NULL, *y = NULL;
  BG_OK(ctx, hj_buffer_create(ctx, HJ_F32, HJ_SHAPE(N), &x));
  BG_OK(ctx, hj_buffer_create(ctx, HJ_F32, HJ_SHAPE(N), &y));
  cuda_error ce;
  CUdeviceptr a, b;
  size_t bytes = (size_t)N * 4;
  if (cuda_mem_alloc(G_dv, bytes, &a, &ce) || cuda_mem_alloc(G_dv, bytes, &b, &ce)) bg_die("allocation", &ce);
  double tf = 1e30, tc = 1e30;
  for (int r = 0; r < 2; r++) {
    double f = bg_time_exec(ctx, e, &x, 1, &y, 1);
    if (f < tf) tf = f;
    double best = 1e30;
    for (int round = 0; round < (G_dry ? 1 : 3); round++) {
      double t0 = bg_sync_now(), t1;
      int n = 0;
      do {
        if (cuda_check(G_d, G_d->cuMemcpyDtoDAsync(b, a, bytes, G_dv->stream), &ce, "cuMemcpyDtoDAsync"))
          bg_die("copy", &ce);
        n++;
        t1 = bg_sync_now();
      } while (!G_dry && (t1 - t0 < 0.05 || n < 10));
      if ((t1 - t0) / n < best) best = (t1 - t0) / n;
    }
    if (best < tc) tc = best;
  }
  double gf = 2.0 * bytes / tf * 1e-9, gc = 2.0 * bytes / tc * 1e-9;
  printf("elementwise GELU f32[%lld] (one kernel, graph replay): %.3f ms, %.0f GB/s; device-to-device copy "
         "of %zu MiB: %.3f ms, %.0f GB/s: ratio %.2f%s\n", (long long)N, tf * 1e3, gf, bytes >> 20, tc * 1e3, gc,
         gf / gc, gf / gc >= 0.8 ? "" : " (below the 0.8 goal)");
  cuda_mem_free(G_dv, a, &ce);
  cuda_mem_free(G_dv, b, &ce);
  hj_buffer_destroy(x);
  hj_buffer_destroy(y);
  hj_exec_destroy(e);
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
}

static void bg_block(const char *path) {
  hj_ctx_t *ctx = bg_ctx();
  hj_module_t *m = NULL;
  if (hj_module_parse_file(ctx, path, &m) != HJ_OK) {
    printf("FAILED: %s: %s\n", path, hj_ctx_error(ctx));
    G_fail++;
    hj_ctx_destroy(ctx);
    return;
  }
  setenv("HLOJIT_CUDA_GRAPHS", "0", 1);   /* read when an executable is made */
  hj_exec_t *plain = NULL, *graph = NULL;
  BG_OK(ctx, hj_compile_module(ctx, m, &plain));
  unsetenv("HLOJIT_CUDA_GRAPHS");
  BG_OK(ctx, hj_compile_module(ctx, m, &graph));
  int nin = hj_module_num_inputs(m);
  hj_buffer_t *in[64] = { 0 }, *o1 = NULL, *o2 = NULL;
  for (int i = 0; i < nin && i < 64; i++) {
    hj_dtype_t t;
    hj_shape_t s;
    BG_OK(ctx, hj_module_input(m, i, &t, &s));
    BG_OK(ctx, hj_buffer_create(ctx, t, s, &in[i]));
    if (t == HJ_F32) {
      float *p = hj_buffer_host_ptr(in[i]);
      for (int64_t k = 0; k < hj_shape_numel(s); k++) p[k] = (float)((k * 2654435761u) % 1000) * 1e-3f - 0.5f;
    }
  }
  double tp = 1e30, tg = 1e30;
  for (int r = 0; r < 2; r++) {
    double a = bg_time_exec(ctx, plain, in, nin, &o1, 1), b = bg_time_exec(ctx, graph, in, nin, &o2, 1);
    if (a < tp) tp = a;
    if (b < tg) tg = b;
  }
  bool same = hj_buffer_nbytes(o1) == hj_buffer_nbytes(o2) &&
              !memcmp(hj_buffer_host_ptr(o1), hj_buffer_host_ptr(o2), hj_buffer_nbytes(o1));
  hj_exec_stats_t st;
  hj_exec_stats(graph, &st);
  printf("GPT-2 block (%s): %d kernels; plain launches %.3f ms, graph replay %.3f ms: ratio %.2f; outputs %s\n",
         path, st.kernels_loop + st.kernels_reduction + st.kernels_transpose + st.kernels_matmul + st.kernels_dus,
         tp * 1e3, tg * 1e3, tp / tg, same ? "bitwise equal" : "DIFFER");
  if (!same && !G_dry) G_fail++;
  for (int i = 0; i < nin; i++) hj_buffer_destroy(in[i]);
  hj_buffer_destroy(o1);
  hj_buffer_destroy(o2);
  hj_exec_destroy(plain);
  hj_exec_destroy(graph);
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
}

int main(int argc, char **argv) {
  cuda_error e;
  const char *lib = getenv("HLOJIT_LIBCUDA");
  G_dry = getenv("HLOJIT_BENCH_DRY") != NULL;
  if (lib && strstr(lib, "cuda_double") && !G_dry) {
    printf("skipped: no CUDA device: HLOJIT_LIBCUDA=%s is the CUDA test double (HLOJIT_BENCH_DRY=1 to "
           "check this program on it)\n", lib);
    return 0;
  }
  if (cuda_driver_open(NULL, &G_d, &e) != HJ_OK) {
    printf("skipped: %s\n", e.msg);
    return 0;
  }
  if (cuda_device_open(G_d, 0, &G_dv, &e) != HJ_OK) {
    printf("skipped: no usable CUDA device: %s\n", e.msg);
    return 0;
  }
  cuda_arch arch;
  if (cuda_arch_for_device(G_dv->info.cc_major, G_dv->info.cc_minor, &arch, &e) != HJ_OK ||
      cuda_codegen_create(arch, &G_cg, &e) != HJ_OK) {
    printf("skipped: no usable CUDA device: %s\n", e.msg);
    return 0;
  }
  char d1[1024], d2[512];
  cuda_driver_describe(G_d, d1, sizeof d1);
  cuda_device_describe(G_dv, d2, sizeof d2);
  printf("%s\n%s; kernels for %s%s\n", d1, d2, cuda_arch_name(arch),
         G_dry ? "\nDRY RUN on the CUDA test double: kernels do not run, every figure below is meaningless" : "");
  bench_load l0 = bench_load_now();
  static const bg_mm shapes[] = {
    { "qkv (C -> 3C)", 0, 2304, 768, false }, { "attention projection", 0, 768, 768, false },
    { "fc (C -> 4C)", 0, 3072, 768, false },  { "fc projection (4C -> C)", 0, 768, 3072, false },
    { "lm head (tied, B as [N,K])", 0, 50257, 768, true },
  };
  int64_t Ts[3] = { 1, 64, 1024 }, dry[2] = { 1, 16 };
  if (!G_dv->blas) {
    printf("matmul: skipped: %s\n", G_dv->blas_why);
  } else {
    for (int t = 0; t < (G_dry ? 2 : 3); t++)
      for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (!G_dry || i < 2) bg_matmul(&shapes[i], G_dry ? dry[t] : Ts[t]);
  }
  bg_elementwise();
  char path[1024];
  snprintf(path, sizeof path, "%s/fixtures/hlo_pass/gpt2_block.hlo", getenv("HLOJIT_TEST_DATA") ? getenv("HLOJIT_TEST_DATA") : "tests");
  bg_block(argc > 1 ? argv[1] : path);
  bench_load_report(l0);
  cuda_codegen_destroy(G_cg);
  cuda_device_close(G_dv);
  cuda_driver_close(G_d);
  printf("== bench_gpu: %s\n", G_fail ? "FAILED (a check above)" : G_dry ? "dry run complete" : "every check passed");
  return G_fail ? 1 : 0;
}
