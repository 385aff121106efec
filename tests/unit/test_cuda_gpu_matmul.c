/* test_cuda_gpu_matmul.c — the tiled matmul kernel (hlojit_impl/emitters/gpu_mm_tiled.c) and the
   skinny one for M <= 8 (gpu_mm_skinny.c) run on a real GPU, against an f64 reference on the host and against cuBLAS (cublasGemmEx /
   cublasGemmStridedBatchedEx, f32 compute, no TF32). Without a device every test says
   "skipped: no CUDA device (why)" and counts as skipped. `make test-gpu` runs it.

   Per case (GPT-2 shapes, square tiles of both sizes, B as [N,K], batched attention, bias
   epilogue, BK 16, ragged and unaligned shapes, K = 0): the kernel is generated for the
   device's arch, loaded with cuModuleLoadDataEx, run on managed buffers (C pre-filled with
   NaN so an element never written shows), and read through the same pointers after a
   prefetch to the host. Every element must lie within the rigorous f32 dot-product error
   bound |c - ref| <= K * 2^-24 * sum_k |a_ik b_kj| (+ the bias's rounding) of the f64
   reference; cuBLAS's result must too (which checks the row-major -> column-major mapping),
   and the printed max |ours - cuBLAS| shows how close they are. A second run must give the
   same bits (the kernel is deterministic).

   HLOJIT_GPU_TEST_ON_DOUBLE=1 with HLOJIT_LIBCUDA/HLOJIT_LIBCUBLAS naming the CUDA test
   double checks this test itself without a GPU: kernels do not run there, so every element
   of every case must be caught as outside the bound, while the double's host-computed
   cuBLAS must agree with the reference. */
#include "cuda_testutil.h"

#if !defined(HLOJIT_CUDA_BACKEND) || !__has_include(<llvm-c/Core.h>)
static void test_cuda_gpu_not_built(void **state) {
  print_message("skipped: the CUDA backend is not in this build (backends/cuda/cuda.mk)\n");
  skip();
}
int main(void) {
  const struct CMUnitTest tests[] = { cmocka_unit_test(test_cuda_gpu_not_built) };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_driver.h"
#include "hlojit_impl/emitters/gpu_mm.h"
#include <math.h>

static cuda_driver *G_d;
static cuda_device *G_dv;
static cuda_codegen *G_cg;
static char G_why[2100];
static bool G_dry;   /* on the test double: see the top */

#define TG_NEED_GPU()                                                                      \
  do {                                                                                     \
    if (!G_dv) {                                                                           \
      print_message("skipped: %s\n", G_why);                                              \
      skip();                                                                              \
    }                                                                                      \
  } while (0)


static int tg_setup(void **state) {
  cuda_error e;
  if (cuda_driver_open(NULL, &G_d, &e) != HJ_OK) {
    snprintf(G_why, sizeof G_why, "%s", e.msg);
    return 0;
  }
  if (cuda_device_open(G_d, 0, &G_dv, &e) != HJ_OK) {
    snprintf(G_why, sizeof G_why, "no usable CUDA device: %.2000s", e.msg);
    return 0;
  }
  if (strstr(G_dv->info.name, "test double")) {   /* HLOJIT_LIBCUDA=the double: no kernels */
    G_dry = getenv("HLOJIT_GPU_TEST_ON_DOUBLE") != NULL;
    if (!G_dry) {
      snprintf(G_why, sizeof G_why, "no CUDA device: %.900s is the CUDA test double, which "
               "runs no kernels", G_d->lib_path);
      cuda_device_close(G_dv);
      G_dv = NULL;
      return 0;
    }
    print_message("dry run on the CUDA test double: every result must be caught as wrong\n");
  }
  cuda_arch arch;
  if (cuda_arch_for_device(G_dv->info.cc_major, G_dv->info.cc_minor, &arch, &e) != HJ_OK ||
      cuda_codegen_create(arch, &G_cg, &e) != HJ_OK) {
    snprintf(G_why, sizeof G_why, "no usable CUDA device: %.2000s", e.msg);
    cuda_device_close(G_dv);
    G_dv = NULL;
    return 0;
  }
  char d1[1024], d2[512];
  cuda_driver_describe(G_d, d1, sizeof d1);
  cuda_device_describe(G_dv, d2, sizeof d2);
  print_message("%s\n%s; kernels for %s; cuBLAS %d%s%s\n", d1, d2, cuda_arch_name(arch),
                G_dv->blas_version, G_dv->blas ? "" : ": ", G_dv->blas ? "" : G_dv->blas_why);
  return 0;
}

static int tg_teardown(void **state) {
  cuda_codegen_destroy(G_cg);
  cuda_device_close(G_dv);
  cuda_driver_close(G_d);
  return 0;
}

typedef struct tg_case {
  const char *what;
  int64_t m, n, k, batch;
  int tile, bk;
  bool b_nk, bias;
} tg_case;

static LLVMValueRef tg_bias(void *user, const emit_gpu_mm_epi *a) {
  LLVMTypeRef f32 = LLVMFloatTypeInContext(LLVMGetModuleContext(a->mod));
  LLVMValueRef col = a->col;
  LLVMValueRef p = LLVMBuildGEP2(a->b, f32, a->extra[0], &col, 1, "");
  return LLVMBuildFAdd(a->b, a->acc, LLVMBuildLoad2(a->b, f32, p, ""), "");
}

static uint64_t tg_rng = 88172645463325252ULL;
static float tg_rand(void) {   /* xorshift64, uniform in [-1, 1) */
  tg_rng ^= tg_rng << 13, tg_rng ^= tg_rng >> 7, tg_rng ^= tg_rng << 17;
  return (float)((double)(tg_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *tg_alloc(size_t n, CUdeviceptr *p) {
  cuda_error e;
  if (cuda_mem_alloc_managed(G_dv, (n ? n : 1) * sizeof(float), p, &e) != HJ_OK)
    fail_msg("%s", e.msg);
  return (float *)(uintptr_t)*p;
}

/* cuBLAS on the same data: row-major C[M,N] = A B is column-major C^T = B^T A^T. */
static void tg_cublas(const emit_gpu_mm *s, CUdeviceptr A, CUdeviceptr B, CUdeviceptr C) {
  cuda_driver *d = G_d;
  float one = 1, zero = 0;
  cublasOperation_t opb = s->b_nk ? CUBLAS_OP_T : CUBLAS_OP_N;
  int ldb = (int)(s->b_nk ? s->k : s->n), lda = (int)s->k;
  if (ldb < 1) ldb = 1;   /* k = 0: cuBLAS still wants valid leading dimensions */
  if (lda < 1) lda = 1;
  cublasStatus_t st = d->cublasGemmStridedBatchedEx(
      G_dv->blas, opb, CUBLAS_OP_N, (int)s->n, (int)s->m, (int)s->k, &one, (void *)(uintptr_t)B,
      CUDA_R_32F, ldb, s->stride_b, (void *)(uintptr_t)A, CUDA_R_32F, lda, s->stride_a,
      &zero, (void *)(uintptr_t)C, CUDA_R_32F, (int)s->n, s->stride_c, (int)s->batch,
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  cuda_error e;
  if (cuda_blas_check(d, st, &e, "cublasGemmStridedBatchedEx") != HJ_OK) fail_msg("%s", e.msg);
}

static void tg_run(const tg_case *tc) {
  cuda_error e;
  emit_gpu_mm s;
  emit_gpu_mm_init(&s);
  s.m = tc->m, s.n = tc->n, s.k = tc->k, s.batch = tc->batch ? tc->batch : 1;
  s.tile = tc->tile > 0 ? tc->tile : 0, s.bk = tc->bk ? tc->bk : 8, s.b_nk = tc->b_nk;
  s.sm_count = G_dv->info.sm_count;
  s.stride_a = s.m * s.k, s.stride_b = s.k * s.n, s.stride_c = s.m * s.n;
  if (tc->bias) { s.n_extra = 1; s.epilogue = tg_bias; }

  LLVMContextRef c = LLVMContextCreate();
  LLVMModuleRef mod = LLVMModuleCreateWithNameInContext("mm_gpu", c);
  cuda_codegen_prepare_module(G_cg, mod);
  emit_gpu_mm_launch l;
  char *ptx = NULL;
  emit_gpu_err ge = { 0 };
  hj_status es = tc->tile < 0 ? emit_gpu_mm_skinny(mod, "mm_gpu", &s, &l, &ge) : emit_gpu_mm_tiled(mod, "mm_gpu", &s, &l, &ge);
  if (es != HJ_OK) fail_msg("%s: %s", tc->what, ge.msg);
  if (cuda_compile_ptx(G_cg, mod, &ptx, &e) != HJ_OK) fail_msg("%s: %s", tc->what, e.msg);
  LLVMDisposeModule(mod);
  LLVMContextDispose(c);
  CUmodule cm = NULL;
  CUfunction fn = NULL;
  if (cuda_module_load(G_dv, ptx, tc->what, &cm, &e) != HJ_OK ||
      cuda_module_function(G_dv, cm, "mm_gpu", &fn, &e) != HJ_OK)
    fail_msg("%s", e.msg);
  free(ptx);

  size_t na = (size_t)(s.batch * s.m * s.k), nb = (size_t)(s.batch * s.k * s.n);
  size_t nc = (size_t)(s.batch * s.m * s.n);
  CUdeviceptr dA, dB, dC, dC2 = 0, dBias = 0;
  float *A = tg_alloc(na, &dA), *B = tg_alloc(nb, &dB), *C = tg_alloc(nc, &dC);
  float *C2 = G_dv->blas ? tg_alloc(nc, &dC2) : NULL, *bias = tc->bias ? tg_alloc((size_t)s.n, &dBias) : NULL;
  for (size_t i = 0; i < na; i++) A[i] = tg_rand();
  for (size_t i = 0; i < nb; i++) B[i] = tg_rand();
  for (int64_t i = 0; bias && i < s.n; i++) bias[i] = tg_rand();
  memset(C, 0xff, nc * sizeof(float));   /* NaN: an element never written shows */
  CUdeviceptr bufs[] = { dA, dB, dC, dC2, dBias };
  size_t sizes[] = { na, nb, nc, C2 ? nc : 0, bias ? (size_t)s.n : 0 };
  for (int i = 0; i < 5; i++)
    if (bufs[i] && cuda_mem_prefetch(G_dv, bufs[i], sizes[i] * 4, true, &e) != HJ_OK) fail_msg("%s", e.msg);

  void *params[] = { &dA, &dB, &dC, &dBias };
  if (cuda_launch(G_dv, fn, tc->what, l.grid, l.block, 0, params, &e) != HJ_OK ||
      cuda_device_sync(G_dv, &e) != HJ_OK)
    fail_msg("%s", e.msg);
  float *first = malloc(nc * sizeof(float));
  memcpy(first, C, nc * sizeof(float));
  if (cuda_launch(G_dv, fn, tc->what, l.grid, l.block, 0, params, &e) != HJ_OK) fail_msg("%s", e.msg);
  if (C2) tg_cublas(&s, dA, dB, dC2);
  if (cuda_mem_prefetch(G_dv, dC, nc * 4, false, &e) != HJ_OK ||
      (C2 && cuda_mem_prefetch(G_dv, dC2, nc * 4, false, &e) != HJ_OK) || cuda_device_sync(G_dv, &e) != HJ_OK)
    fail_msg("%s", e.msg);
  if (memcmp(first, C, nc * sizeof(float)) != 0 && !G_dry) fail_msg("%s: two runs differ", tc->what);
  free(first);

  const double u = ldexp(1.0, -24);
  double max_err = 0, max_ratio = 0, max_blas = 0, max_blas_ratio = 0;
  int64_t bad = 0, bad_blas = 0;
  for (int64_t b = 0; b < s.batch; b++)
    for (int64_t i = 0; i < s.m; i++)
      for (int64_t j = 0; j < s.n; j++) {
        const float *a = A + b * s.stride_a + i * s.k, *bb = B + b * s.stride_b;
        double ref = 0, mag = 0;
        for (int64_t p = 0; p < s.k; p++) {
          double x = a[p], y = s.b_nk ? bb[j * s.k + p] : bb[p * s.n + j];
          ref += x * y;
          mag += fabs(x * y);
        }
        double bound = (double)s.k * u * mag * 1.0001 + 1e-30;
        if (bias) { ref += bias[j]; bound += u * (fabs(ref) + mag); }   /* + the add's rounding */
        size_t at = (size_t)(b * s.stride_c + i * s.n + j);
        double got = C[at], err = fabs(got - ref);
        if (!(err <= bound)) {   /* NaN too */
          if (bad++ < 5 && !G_dry)
            print_error("%s: C[%lld][%lld][%lld] = %.9g, reference %.9g, bound %.3g\n", tc->what,
                        (long long)b, (long long)i, (long long)j, got, ref, bound);
        }
        max_err = fmax(max_err, err);
        max_ratio = fmax(max_ratio, err / bound);
        if (C2) {
          double g2 = (double)C2[at] + (bias ? bias[j] : 0.0);
          if (!(fabs(g2 - ref) <= bound + (bias ? u * fabs(g2) : 0))) bad_blas++;
          max_blas = fmax(max_blas, fabs(got - g2));
          max_blas_ratio = fmax(max_blas_ratio, fabs(g2 - ref) / bound);
        }
      }
  /* (fmax skips NaN: the count of elements outside the bound is what says all is well) */
  print_message("%-30s tile %3d: %lld outside the bound, max err %.2e (%.3f of the bound)%s",
                tc->what, l.tile, (long long)bad, max_err, max_ratio, C2 ? "" : "\n");
  if (C2)
    print_message("; cuBLAS %.3f of the bound, max |ours - cuBLAS| %.2e\n", max_blas_ratio, max_blas);
  for (int i = 0; i < 5; i++)
    if (cuda_mem_free(G_dv, bufs[i], &e) != HJ_OK) fail_msg("%s", e.msg);
  if (cuda_module_unload(G_dv, cm, &e) != HJ_OK) fail_msg("%s", e.msg);
  if (G_dry && (size_t)bad != nc)
    fail_msg("%s: dry run: %lld of %zu elements passed without a kernel run", tc->what,
             (long long)((int64_t)nc - bad), nc);
  if (bad && !G_dry)
    fail_msg("%s: %lld of %zu elements outside the error bound", tc->what, (long long)bad, nc);
  if (bad_blas) fail_msg("%s: cuBLAS disagrees with the reference at %lld elements (argument mapping?)",
                         tc->what, (long long)bad_blas);
}

static const tg_case tg_gpt2[] = {
  { "gpt2 qkv 64x2304x768 +bias", 64, 2304, 768, 0, 0, 0, false, true },
  { "gpt2 attn proj 64x768x768", 64, 768, 768, 0, 0, 0, false, false },
  { "gpt2 fc 64x3072x768 +bias", 64, 3072, 768, 0, 0, 0, false, true },
  { "gpt2 fc proj 64x768x3072", 64, 768, 3072, 0, 0, 0, false, false },
  { "gpt2 lm head 64x1000x768 [N,K]", 64, 1000, 768, 0, 0, 0, true, false },
  { "attention QK^T 12x64x64x64", 64, 64, 64, 12, 0, 0, true, false },
  { "attention PV 12x64x64x64", 64, 64, 64, 12, 0, 0, false, false },
};
static const tg_case tg_tiles[] = {
  { "square 512 tile 128", 512, 512, 512, 0, 128, 0, false, false },
  { "square 512 tile 64", 512, 512, 512, 0, 64, 0, false, false },
  { "2048x2048x64 (2-block budget)", 2048, 2048, 64, 0, 0, 0, false, false },
  { "1024x768x768 tile 128 +bias", 1024, 768, 768, 0, 128, 0, false, true },
  { "256x384x128 [N,K] tile 128", 256, 384, 128, 0, 128, 0, true, false },
  { "bk 16 256x256x256", 256, 256, 256, 0, 128, 16, false, false },
  { "bk 16 tile 64 192x192x100", 192, 192, 100, 0, 64, 16, false, false },
};
static const tg_case tg_ragged[] = {
  { "1x1x1", 1, 1, 1, 0, 0, 0, false, false },
  { "33x65x17", 33, 65, 17, 0, 0, 0, false, false },
  { "127x129x5 tile 128", 127, 129, 5, 0, 128, 0, false, false },
  { "300x500x13", 300, 500, 13, 0, 0, 0, false, false },
  { "7x1000x3 [N,K]", 7, 1000, 3, 0, 0, 0, true, false },
  { "batched 3x70x30x13 [N,K]", 70, 30, 13, 3, 0, 0, true, false },
  { "k = 0 +bias", 100, 100, 0, 0, 0, 0, false, true },
};

/* tile -1: the skinny kernel (gpu_mm_skinny.c) — GPT-2's decode shapes, both B layouts, 8 rows,
   batched attention, unaligned rows, K = 0 */
static const tg_case tg_skinny[] = {
  { "skinny qkv 1x2304x768 +bias", 1, 2304, 768, 0, -1, 0, false, true },
  { "skinny fcproj [N,K] 1x768x3072", 1, 768, 3072, 0, -1, 0, true, true },
  { "skinny head 1x50304x768", 1, 50304, 768, 0, -1, 0, false, false },
  { "skinny head [N,K] 1x50304x768", 1, 50304, 768, 0, -1, 0, true, false },
  { "skinny 8x768x768 +bias", 8, 768, 768, 0, -1, 0, false, true },
  { "skinny [N,K] 8x768x768", 8, 768, 768, 0, -1, 0, true, false },
  { "skinny q k^T 12x1x256x64 [N,K]", 1, 256, 64, 12, -1, 0, true, false },
  { "skinny p v 12x1x64x256", 1, 64, 256, 12, -1, 0, false, false },
  { "skinny 3x37x13", 3, 37, 13, 0, -1, 0, false, true },
  { "skinny [N,K] 5x9x13", 5, 9, 13, 0, -1, 0, true, false },
  { "skinny k = 0 +bias", 2, 100, 0, 0, -1, 0, false, true },
};

static void tg_all(const tg_case *cs, size_t n) {
  TG_NEED_GPU();
  for (size_t i = 0; i < n; i++) tg_run(&cs[i]);
}
static void test_gpt2_shapes(void **state) { tg_all(tg_gpt2, sizeof tg_gpt2 / sizeof tg_gpt2[0]); }
static void test_tiles(void **state) { tg_all(tg_tiles, sizeof tg_tiles / sizeof tg_tiles[0]); }
static void test_ragged(void **state) { tg_all(tg_ragged, sizeof tg_ragged / sizeof tg_ragged[0]); }
static void test_skinny(void **state) { tg_all(tg_skinny, sizeof tg_skinny / sizeof tg_skinny[0]); }

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_gpt2_shapes),
    cmocka_unit_test(test_tiles),
    cmocka_unit_test(test_ragged),
    cmocka_unit_test(test_skinny),
  };
  return cmocka_run_group_tests(tests, tg_setup, tg_teardown);
}
#endif
