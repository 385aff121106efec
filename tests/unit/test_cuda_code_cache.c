/* test_cuda_code_cache.c — the CUDA backend's PTX cache (backends/cuda/cuda_code_cache.c)
   against the CUDA TEST DOUBLE (kernels never run there; it loads PTX by parsing its
   .entry lines and refuses text with none), without a GPU:
   - a cold compile makes PTX (code_source COMPILED, optimize_ms > 0) and writes one entry;
   - a second context on the same directory loads that PTX from disk (DISK, no O3:
     optimize_ms 0), byte for byte the PTX the first compile made (HLOJIT_DUMP_TO), and its
     kernels resolve and launch with the first executable's names, grids and arguments;
   - the same module again in that context is a memory hit;
   - another arch (a compute capability 8.0 device: sm_80) is another key;
   - a well-formed entry of the right key whose PTX the driver refuses is dropped and
     compiled afresh (COMPILED, two module loads), and the entry is good again;
   - cache_dir "off" compiles every time and writes nothing.
   Across processes: tests/py/test_code_cache.py (the tool, twice, on the double). */
#include "cuda_testutil.h"
#include "testutil.h"
#include "hlojit_impl/runtime/runtime.h"
#include <dirent.h>
#include <unistd.h>

#if !defined(HLOJIT_CUDA_BACKEND) || !__has_include(<llvm-c/Core.h>)
static void test_cuda_code_cache_not_built(void **state) {
  print_message("skipped: the CUDA backend is not in this build (backends/cuda/cuda.mk)\n");
  skip();
}
int main(void) {
  const struct CMUnitTest tests[] = { cmocka_unit_test(test_cuda_code_cache_not_built) };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#else

static char tcc_root[64];

static int tcc_setup(void **state) {
  snprintf(tcc_root, sizeof tcc_root, "/tmp/hlojit_ptxcache_XXXXXX");
  return mkdtemp(tcc_root) ? 0 : -1;
}

static int tcc_teardown(void **state) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tcc_root);
  return system(cmd) == 0 ? 0 : -1;
}

/* A CUDA context on the double with the disk cache in |cache_dir| ("off": none), dumping
   into |dump| (NULL: no dumps). */
static hj_ctx_t *tcc_ctx(const char *cache_dir, const char *dump) {
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  o.backend = HJ_BACKEND_CUDA;
  o.cache_dir = cache_dir;
  o.dump_dir = dump;
  hj_ctx_t *ctx = NULL;
  if (hj_ctx_create(&o, &ctx) != HJ_OK) fail_msg("hj_ctx_create");
  return ctx;
}

/* Files in |dir| ending in |suffix| (sorted, stb_ds array of malloc'd paths). */
static char **tcc_files(const char *dir, const char *suffix) {
  char **v = NULL;
  DIR *d = opendir(dir);
  for (struct dirent *de; d && (de = readdir(d));) {
    size_t n = strlen(de->d_name), k = strlen(suffix);
    if (n <= k || strcmp(de->d_name + n - k, suffix)) continue;
    char *p = malloc(strlen(dir) + n + 2);
    sprintf(p, "%s/%s", dir, de->d_name);
    arrput(v, p);
  }
  if (d) closedir(d);
  for (ptrdiff_t i = 1; i < arrlen(v); i++)   /* insertion sort: a handful of names */
    for (ptrdiff_t j = i; j > 0 && strcmp(v[j - 1], v[j]) > 0; j--) {
      char *t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  return v;
}

static void tcc_free_files(char **v) {
  for (ptrdiff_t i = 0; i < arrlen(v); i++) free(v[i]);
  arrfree(v);
}

typedef struct tcc_result {
  int source;
  double optimize_ms;
  int loads;                 /* cuModuleLoadDataEx calls of the compile */
  char funcs[8][64];         /* the run's launches: kernel names */
  unsigned grid[8], block[8];
  int nparams[8], nlaunch;
} tcc_result;

/* Compiles cu_softmax_hlo in |ctx| and runs it once. */
static tcc_result tcc_compile_run(hj_ctx_t *ctx) {
  tcc_result r = { 0 };
  hj_module_t *m = NULL;
  CHECK_OK(ctx, hj_module_parse(ctx, cu_softmax_hlo, strlen(cu_softmax_hlo), "test", &m));
  int loads0 = cu_dbl.calls("cuModuleLoadDataEx"), launch0 = cu_dbl.log()->nlaunches;
  hj_exec_t *e = NULL;
  CHECK_OK(ctx, hj_compile_module(ctx, m, &e));
  hj_exec_stats_t s;
  CHECK_OK(ctx, hj_exec_stats(e, &s));
  r.source = s.code_source;
  r.optimize_ms = s.optimize_ms;
  r.loads = cu_dbl.calls("cuModuleLoadDataEx") - loads0;
  float x[16 * 128];
  for (int i = 0; i < 16 * 128; i++) x[i] = (float)(i % 37) * 0.1f;
  hj_buffer_t *in = NULL, *out = NULL;
  CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_F32, HJ_SHAPE(16, 128), x, &in));
  CHECK_OK(ctx, hj_exec_run(e, &in, 1, &out, 1));
  const cuda_double_log *L = cu_dbl.log();
  for (int i = launch0; i < L->nlaunches && r.nlaunch < 8; i++, r.nlaunch++) {
    snprintf(r.funcs[r.nlaunch], sizeof r.funcs[0], "%s", L->launches[i].func);
    r.grid[r.nlaunch] = L->launches[i].grid[0];
    r.block[r.nlaunch] = L->launches[i].block[0];
    r.nparams[r.nlaunch] = L->launches[i].nparams;
  }
  hj_buffer_destroy(in);
  hj_buffer_destroy(out);
  hj_exec_destroy(e);
  hj_module_destroy(m);
  return r;
}

static void tcc_same_launches(const tcc_result *a, const tcc_result *b) {
  assert_true(a->nlaunch >= 1);
  assert_int_equal(a->nlaunch, b->nlaunch);
  for (int i = 0; i < a->nlaunch; i++) {
    assert_string_equal(a->funcs[i], b->funcs[i]);
    assert_int_equal(a->grid[i], b->grid[i]);
    assert_int_equal(a->block[i], b->block[i]);
    assert_int_equal(a->nparams[i], b->nparams[i]);
  }
}

static void tcc_double(void) {
  CU_NEED_DOUBLE();
  setenv("HLOJIT_LIBCUDA", cu_dbl.path, 1);
  setenv("HLOJIT_LIBCUBLAS", cu_dbl.path, 1);
  setenv("HLOJIT_CUDA_GEMM", "rule", 1);
  unsetenv("HLOJIT_CUDA_GRAPHS");
  unsetenv("HLOJIT_DUMP_TO");
}

static void test_disk_memory_and_arch(void **state) {
  tcc_double();
  char dir[128], dump[128];
  snprintf(dir, sizeof dir, "%s/cache", tcc_root);
  snprintf(dump, sizeof dump, "%s/dump", tcc_root);
  hj_ctx_t *ctx = tcc_ctx(dir, dump);
  tcc_result cold = tcc_compile_run(ctx);
  hj_ctx_destroy(ctx);
  assert_int_equal(cold.source, HJ_CODE_COMPILED);
  assert_true(cold.optimize_ms > 0);
  assert_int_equal(cold.loads, 1);
  char **entries = tcc_files(dir, ".hjc");
  assert_int_equal(arrlen(entries), 1);
  tcc_free_files(entries);

  ctx = tcc_ctx(dir, dump);   /* a new context: nothing in memory */
  tcc_result warm = tcc_compile_run(ctx);
  assert_int_equal(warm.source, HJ_CODE_DISK);
  assert_true(warm.optimize_ms == 0);
  assert_int_equal(warm.loads, 1);
  tcc_same_launches(&cold, &warm);
  char **ptx = tcc_files(dump, ".ptx");   /* what each compile loaded, in order */
  assert_int_equal(arrlen(ptx), 2);
  size_t n0 = 0, n1 = 0;
  char *p0 = tu_read_file(ptx[0], &n0), *p1 = tu_read_file(ptx[1], &n1);
  assert_true(p0 && p1 && n0 > 100 && strstr(p0, ".entry "));
  assert_int_equal(n0, n1);
  assert_memory_equal(p0, p1, n0);   /* the disk's PTX is the compiled PTX */
  free(p0);
  free(p1);
  tcc_free_files(ptx);

  tcc_result again = tcc_compile_run(ctx);
  assert_int_equal(again.source, HJ_CODE_MEMORY);
  assert_true(again.optimize_ms == 0);
  tcc_same_launches(&cold, &again);
  hj_ctx_destroy(ctx);

  cu_dbl.set("cc_major", 8);   /* an A100-class device: sm_80 PTX, another key */
  ctx = tcc_ctx(dir, NULL);
  tcc_result a80 = tcc_compile_run(ctx);
  hj_ctx_destroy(ctx);
  cu_dbl.set("cc_major", 9);
  assert_int_equal(a80.source, HJ_CODE_COMPILED);
  entries = tcc_files(dir, ".hjc");
  assert_int_equal(arrlen(entries), 2);
  tcc_free_files(entries);
}

/* A well-formed entry of the right key whose PTX the driver refuses (the double: no .entry). */
static void test_refused_entry_recompiles(void **state) {
  tcc_double();
  char dir[128];
  snprintf(dir, sizeof dir, "%s/refused", tcc_root);
  hj_ctx_t *ctx = tcc_ctx(dir, NULL);
  tcc_result cold = tcc_compile_run(ctx);
  hj_ctx_destroy(ctx);
  assert_int_equal(cold.source, HJ_CODE_COMPILED);
  char **entries = tcc_files(dir, ".hjc");
  assert_int_equal(arrlen(entries), 1);
  size_t len = 0;
  uint8_t *b = (uint8_t *)tu_read_file(entries[0], &len);
  assert_true(b && len > 64);
  uint64_t klen = 0;
  for (int i = 7; i >= 0; i--) klen = klen << 8 | b[32 + i];
  ctx = tu_ctx();
  rt_dcache *c = NULL;
  CHECK_OK(ctx, rt_dcache_open(ctx, dir, 0, &c));
  static const char stale[] = "// PTX that the driver refuses: no kernel in it\n";
  CHECK_OK(ctx, rt_dcache_put(c, b + 64, (size_t)klen, stale, sizeof stale - 1));
  rt_dcache_close(c);
  hj_ctx_destroy(ctx);
  free(b);

  ctx = tcc_ctx(dir, NULL);
  tcc_result r = tcc_compile_run(ctx);
  hj_ctx_destroy(ctx);
  assert_int_equal(r.source, HJ_CODE_COMPILED);
  assert_int_equal(r.loads, 2);   /* the cached text refused, then the compiled one */
  tcc_same_launches(&cold, &r);
  ctx = tcc_ctx(dir, NULL);   /* the entry was rewritten with PTX that loads */
  tcc_result r2 = tcc_compile_run(ctx);
  hj_ctx_destroy(ctx);
  assert_int_equal(r2.source, HJ_CODE_DISK);
  assert_int_equal(r2.loads, 1);
  tcc_free_files(entries);
}

static void test_cache_off(void **state) {
  tcc_double();
  hj_ctx_t *ctx = tcc_ctx("off", NULL);
  tcc_result a = tcc_compile_run(ctx);
  hj_ctx_destroy(ctx);
  ctx = tcc_ctx("off", NULL);
  tcc_result b = tcc_compile_run(ctx);
  hj_ctx_destroy(ctx);
  assert_int_equal(a.source, HJ_CODE_COMPILED);
  assert_int_equal(b.source, HJ_CODE_COMPILED);
  assert_true(b.optimize_ms > 0);
  tcc_same_launches(&a, &b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_disk_memory_and_arch),
    cmocka_unit_test(test_refused_entry_recompiles),
    cmocka_unit_test(test_cache_off),
  };
  return cmocka_run_group_tests(tests, tcc_setup, tcc_teardown);
}
#endif
