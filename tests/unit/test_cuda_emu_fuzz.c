/* test_cuda_emu_fuzz.c — the fusion fuzzer's random graphs (fusion_fuzz_gen.h: elementwise
   chains, broadcasts, reductions, dots, transposes, slices, concatenates, panel-order dots,
   cache updates in place) compiled by the CUDA backend's emitters and run on the GPU
   EMULATOR (cuda_emu.h: the GPU's thread model on the host — the kernels' logic, not
   their speed; matmuls by the tiled kernel, or for 1 seed in 4 by the library path: a
   host gemm and the epilogue kernel), against the evaluator on the unoptimised graph with the fusion fuzzer's
   tolerance (fusion_testutil.h: twice each element's measured sensitivity to rounding).
   Where test_cuda_emu.c runs fixed modules, this one throws the fusions the passes make of
   random graphs at the GPU's loop, reduction, transpose, dus and tiled-matmul kernels:
   on a machine without a GPU it is what checks the GPU emitters' index arithmetic, bounds,
   barriers and shuffles on shapes nobody wrote down.

   Environment: HLOJIT_EMU_FUZZ_GRAPHS the number of graphs (default 300), HLOJIT_EMU_FUZZ_SEED
   the first seed (1; the same seed is the same graph as in test_fusion_fuzz). A failing
   graph is written, unshrunk, to build/fusion-fuzz-failures/emu_SEED.hlo.
   Under ASan: skipped, saying so (the emulator's fibers switch stacks). */
#include "testutil.h"
#include "cpu_testutil.h"
#include "fusion_testutil.h"
#include "fusion_fuzz_gen.h"
#include <sys/stat.h>
#include <time.h>

#if !defined(HLOJIT_CUDA_BACKEND) || !__has_include(<llvm-c/Core.h>)
static void test_emu_fuzz_not_built(void **state) {
  print_message("skipped: the CUDA backend is not in this build (backends/cuda/cuda.mk)\n");
  skip();
}
int main(void) {
  const struct CMUnitTest tests[] = { cmocka_unit_test(test_emu_fuzz_not_built) };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
#include "cuda_emu.h"

/* ---- the emulated GPU as a fusion_testutil.h target ---------------------------------------- */

static hj_status ef_compile(void *self, const hlo_module *m, void **exe, hj_exec_stats_t *stats) {
  emu_exec *x = calloc(1, sizeof *x);
  if (!x) return hj__err(((cuda_emu *)self)->ctx, HJ_ERR_OOM, "out of memory");
  hj_status st = emu_compile_module(self, m, x);
  *stats = x->base.stats;
  *exe = x;
  return st;
}

static void ef_destroy(void *exe) {
  emu_exec_free(exe);
  free(exe);
}

static hj_status ef_run(void *self, void *exe, hlo_literal *const *args, int nargs, const hlo_literal *like,
                        hlo_literal **out) {
  hlo_literal *y = hlo_literal_clone(ftu_ctx, like), **leaves = NULL;
  ftu_lit_leaves(y, &leaves);
  void **ip = calloc((size_t)nargs + 1, sizeof *ip), **op = calloc((size_t)arrlen(leaves) + 1, sizeof *op);
  for (int i = 0; i < nargs; i++) ip[i] = args[i]->data;
  for (ptrdiff_t k = 0; k < arrlen(leaves); k++) {
    memset(leaves[k]->data, 0xA5, (size_t)leaves[k]->nbytes);   /* unwritten shows */
    op[k] = leaves[k]->data;
  }
  hj_status st = emu_run(exe, ip, op);
  free(ip);
  free(op);
  arrfree(leaves);
  if (st != HJ_OK) hlo_literal_free(y), y = NULL;
  *out = y;
  return st;
}

static void ef_save(const char *text, uint64_t seed) {
  mkdir("build", 0777);
  mkdir("build/fusion-fuzz-failures", 0777);
  char path[128];
  snprintf(path, sizeof path, "build/fusion-fuzz-failures/emu_%llu.hlo", (unsigned long long)seed);
  FILE *f = fopen(path, "w");
  if (f) fputs(text, f), fclose(f);
  printf("  written to %s\n", path);
}

static void test_emu_fuzz(void **state) {
  if (CUDA_EMU_UNDER_ASAN) {
    print_message("skipped: the GPU emulator's fibers do not run under ASan\n");
    skip();
  }
  const char *ns = getenv("HLOJIT_EMU_FUZZ_GRAPHS"), *ss = getenv("HLOJIT_EMU_FUZZ_SEED");
  int n = ns ? atoi(ns) : 300;
  uint64_t seed0 = ss ? strtoull(ss, NULL, 10) : 1;
  cuda_emu emu;
  CHECK_OK(ftu_ctx, emu_create(ftu_ctx, &emu));
  const ftu_target tg = { "emulated GPU", ftu_ctx, &emu, ef_compile, ef_run, ef_destroy };
  ftu_tally t = { 0 };
  int failed = 0, unevaluable = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < n; i++) {
    uint64_t seed = seed0 + (uint64_t)i;
    char *text = fz_module(seed), why[1200];
    hlo_module *m = NULL;
    if (hlo_parse_module(ftu_ctx, text, strlen(text), "fuzz", &m) != HJ_OK)
      fail_msg("seed %llu: generated module does not parse: %s", (unsigned long long)seed, hj_ctx_error(ftu_ctx));
    fz_sinks_to_root(m);
    emu.gemm_blas = seed % 4 == 0;   /* 1 in 4: matmuls by the library path (gemm + epilogue kernel) */
    int r = ftu_check(&tg, m, 1, &t, why, sizeof why);
    if (r > 0) {
      failed++;
      printf("  seed %llu fails%s: %s\n", (unsigned long long)seed, emu.gemm_blas ? " (library path)" : "", why);
      char *printed = NULL;
      if (hlo_print_module(m, &printed) == HJ_OK) ef_save(printed, seed);
      free(printed);
    }
    unevaluable += r < 0;
    hlo_module_free(m);
    free(text);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("  %d random graphs on the emulated GPU: %d passed, %d not evaluable, %d failed, %d with evaluator "
         "fallbacks; kernels: %lld loop, %lld reduction, %lld transpose, %lld matmul, %lld dus (%d outputs "
         "updated in place)\n", n, n - failed - unevaluable, unevaluable, failed, t.fallback_graphs,
         (long long)t.kernels[0], (long long)t.kernels[1], (long long)t.kernels[2], (long long)t.kernels[3],
         (long long)t.kernels[4], t.inplace_updates);
  printf("  outputs: %lld elements, %lld bitwise equal, %lld within tolerance (max |err|/tol %.3f), "
         "%lld ill-conditioned (not compared); %.1f s\n",
         (long long)t.elems, (long long)t.exact, (long long)(t.elems - t.exact - t.illcond), t.max_err_ratio,
         (long long)t.illcond, (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
  emu_destroy(&emu);
  assert_int_equal(failed, 0);
  assert_int_equal(t.emit_error_graphs, 0);
  if (n >= 200) assert_true(t.inplace_updates > 0);   /* the in-place dus kernels did run */
}

int main(void) {
  ftu_ctx = tu_ctx();
  ftu_few_specials = fz_few_specials;
  hj_ctx_t *cpu = ftu_cpu_ctx_new();   /* the same graphs as test_fusion_fuzz: the CPU's panel width */
  int64_t kc = 0;
  if (hj_linear_panels(cpu, HJ_BACKEND_CPU, 768, 768, &kc, &fz_panel_nr) != HJ_OK) fz_panel_nr = 0;
  hj_ctx_destroy(cpu);
  const struct CMUnitTest tests[] = { cmocka_unit_test(test_emu_fuzz) };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  hj_ctx_destroy(ftu_ctx);
  return rc;
}
#endif
