/* test_code_cache.c — the CPU backend's code cache (backends/cpu/cpu_code_cache.c) end to end,
   with real processes (fork): a second process with the same cache directory compiles
   nothing (every executable's code comes from disk) and computes the same bits; every cache
   file truncated, corrupted, emptied, replaced by another entry's file, by garbage, or given
   a well-formed entry whose object LLVM cannot read, makes that module recompile (and the
   entry be rewritten) with correct results and no crash (this binary runs under ASan+UBSan
   in make unit-asan); two processes racing on an empty directory both succeed; the
   directory stays under its size limit; and in one process a module compiled twice is
   compiled once (the loaded code is shared, and kept after its executables die). */
#include "testutil.h"
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

enum { TCC_N = 3 };
static char tcc_root[64];

static int tcc_setup(void **state) {
  snprintf(tcc_root, sizeof tcc_root, "/tmp/hlojit_codecache_XXXXXX");
  return mkdtemp(tcc_root) ? 0 : -1;
}

static int tcc_teardown(void **state) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tcc_root);
  return system(cmd) == 0 ? 0 : -1;
}

static hj_ctx_t *tcc_ctx(const char *dir) {
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  o.backend = HJ_BACKEND_CPU;
  o.num_threads = 1;
  o.cache_dir = dir;
  hj_ctx_t *ctx = NULL;
  if (hj_ctx_create(&o, &ctx) != HJ_OK) return NULL;
  return ctx;
}

/* Module |k|: 0 an MLP (two matmuls, GELU), 1 a softmax, 2 a layer norm and an elementwise
   chain; >= 3: variants of 2 with another constant (distinct code, for eviction). */
static hj_graph_t *tcc_graph(hj_ctx_t *ctx, int k) {
  hj_graph_t *g = NULL;
  char name[32];
  snprintf(name, sizeof name, "m%d", k);
  if (hj_graph_create(ctx, name, &g) != HJ_OK) return NULL;
  if (k == 0) {
    hj_tensor_t x = hj_param(g, HJ_F32, HJ_SHAPE(8, 16), "x"), w = hj_param(g, HJ_F32, HJ_SHAPE(16, 32), "w");
    hj_tensor_t w2 = hj_param(g, HJ_F32, HJ_SHAPE(32, 8), "w2");
    hj_graph_output(g, hj_matmul(hj_gelu_tanh(hj_matmul(x, w)), w2));
  } else if (k == 1) {
    hj_graph_output(g, hj_softmax(hj_param(g, HJ_F32, HJ_SHAPE(4, 33), "x"), -1));
  } else {
    hj_tensor_t x = hj_param(g, HJ_F32, HJ_SHAPE(5, 64), "x");
    hj_tensor_t y = hj_layer_norm(x, HJ_NONE, HJ_NONE, 1e-5);
    for (int i = 0; i < 6; i++) y = hj_tanh(hj_add(hj_mul(y, hj_scalar(g, HJ_F32, 0.5 + 0.01 * k)), x));
    hj_graph_output(g, y);
  }
  return g;
}

/* Runs module |k| once: *source where its code came from; its output bytes into |out| (size
   |cap|, *n written). False on any failure. */
static bool tcc_run(hj_ctx_t *ctx, int k, int *source, uint8_t *out, size_t cap, size_t *n) {
  hj_graph_t *g = tcc_graph(ctx, k);
  hj_exec_t *e = NULL;
  bool ok = g && hj_compile(g, &e) == HJ_OK;
  hj_buffer_t *in[3] = { NULL }, *res[1] = { NULL };
  int nin = ok ? hj_exec_num_inputs(e) : 0;
  for (int i = 0; ok && i < nin && i < 3; i++) {
    hj_shape_t s = k == 0 ? (i == 0 ? HJ_SHAPE(8, 16) : i == 1 ? HJ_SHAPE(16, 32) : HJ_SHAPE(32, 8))
                          : k == 1 ? HJ_SHAPE(4, 33) : HJ_SHAPE(5, 64);
    hj_dtype_t t = HJ_F32;
    int64_t cnt = hj_shape_numel(s);
    float *v = malloc(sizeof *v * (size_t)cnt);
    for (int64_t q = 0; q < cnt; q++) v[q] = (float)((q * 37 + i * 11) % 23) / 23.0f - 0.5f;
    ok = ok && hj_buffer_from_host(ctx, t, s, v, &in[i]) == HJ_OK;
    free(v);
  }
  ok = ok && hj_exec_run(e, in, nin, res, 1) == HJ_OK;
  hj_exec_stats_t st;
  if (ok && hj_exec_stats(e, &st) == HJ_OK) *source = st.code_source;
  if (ok && hj_buffer_nbytes(res[0]) <= cap) {
    *n = hj_buffer_nbytes(res[0]);
    memcpy(out, hj_buffer_host_ptr(res[0]), *n);
  }
  for (int i = 0; i < 3; i++) hj_buffer_destroy(in[i]);
  hj_buffer_destroy(res[0]);
  hj_exec_destroy(e);
  hj_graph_destroy(g);
  return ok;
}

/* One process: modules 0..TCC_N-1 with cache dir |dir|; sources into |src|, outputs into
   DIR/../outK.bin. Returns the child's exit status (0 ok). */
static int tcc_process(const char *dir, int *src) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    hj_ctx_t *ctx = tcc_ctx(dir);
    int bad = !ctx, s[TCC_N] = { 0 };
    for (int k = 0; k < TCC_N && !bad; k++) {
      static uint8_t buf[1 << 16];
      size_t n = 0;
      bad |= !tcc_run(ctx, k, &s[k], buf, sizeof buf, &n);
      char path[256];
      snprintf(path, sizeof path, "%s.out%d", dir, k);
      FILE *f = fopen(path, "wb");
      bad |= !f || fwrite(buf, 1, n, f) != n;
      if (f) fclose(f);
    }
    bad |= write(fds[1], s, sizeof s) != (ssize_t)sizeof s;
    hj_ctx_destroy(ctx);
    _exit(bad);
  }
  close(fds[1]);
  int ws = 0;
  bool got = read(fds[0], src, sizeof(int) * TCC_N) == (ssize_t)(sizeof(int) * TCC_N);
  close(fds[0]);
  waitpid(pid, &ws, 0);
  return got && WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

static char *tcc_outputs(const char *dir, size_t *len) {
  char *all = NULL;
  for (int k = 0; k < TCC_N; k++) {
    char path[256];
    snprintf(path, sizeof path, "%s.out%d", dir, k);
    size_t n = 0;
    char *b = tu_read_file(path, &n);
    assert_non_null(b);
    for (size_t i = 0; i < n; i++) arrput(all, b[i]);
    free(b);
  }
  *len = (size_t)arrlen(all);
  return all;
}

/* The entry files of |dir| (stb_ds array of strdup'd paths). */
static char **tcc_entries(const char *dir) {
  char **v = NULL;
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));)
    if (strstr(e->d_name, ".hjc") && e->d_name[0] != '.') {
      char p[512];
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      arrput(v, strdup(p));
    }
  if (d) closedir(d);
  return v;
}

static void tcc_free_list(char **v) {
  for (ptrdiff_t i = 0; i < arrlen(v); i++) free(v[i]);
  arrfree(v);
}

static void tcc_expect_all(const char *dir, int want, const char *what) {
  int src[TCC_N];
  assert_int_equal(tcc_process(dir, src), 0);
  for (int k = 0; k < TCC_N; k++)
    if (src[k] != want) fail_msg("%s: module %d code source %d, want %d", what, k, src[k], want);
}

static void test_second_process_compiles_nothing(void **state) {
  char dir[128];
  snprintf(dir, sizeof dir, "%s/two", tcc_root);
  tcc_expect_all(dir, HJ_CODE_COMPILED, "first process");
  size_t n1, n2;
  char *a = tcc_outputs(dir, &n1);
  char **files = tcc_entries(dir);
  assert_int_equal(arrlen(files), TCC_N);
  tcc_free_list(files);
  tcc_expect_all(dir, HJ_CODE_DISK, "second process");
  char *b = tcc_outputs(dir, &n2);
  assert_int_equal(n1, n2);
  assert_memory_equal(a, b, n1);   /* the same bits */
  arrfree(a);
  arrfree(b);
}

static void tcc_write(const char *path, const void *b, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  if (n) assert_int_equal(fwrite(b, 1, n, f), n);
  fclose(f);
}

/* Each file damaged in each way: that module recompiles, the others load, results right. */
/* Rewrites the entry whose file bytes are |entry| in |dir| as a well-formed entry of the
   same key whose object is garbage: the disk lookup hits, and LLVM refuses the object. */
static void tcc_junk_object(const char *dir, const uint8_t *entry) {
  uint64_t klen = 0;
  for (int i = 7; i >= 0; i--) klen = klen << 8 | entry[32 + i];
  rt_dcache *c = NULL;
  hj_ctx_t *ctx = tu_ctx();
  CHECK_OK(ctx, rt_dcache_open(ctx, dir, 0, &c));
  uint8_t junk[4096];
  for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)(i * 7 + 1);
  memcpy(junk, "\177ELF\2\1\1", 7);   /* an ELF header that goes nowhere */
  CHECK_OK(ctx, rt_dcache_put(c, entry + 64, (size_t)klen, junk, sizeof junk));
  rt_dcache_close(c);
  hj_ctx_destroy(ctx);
}

static void test_bad_files_recompile(void **state) {
  char dir[128];
  snprintf(dir, sizeof dir, "%s/bad", tcc_root);
  tcc_expect_all(dir, HJ_CODE_COMPILED, "populate");
  size_t nref;
  char *ref = tcc_outputs(dir, &nref);
  for (int kind = 0; kind < 6; kind++) {
    char **files = tcc_entries(dir);
    assert_int_equal(arrlen(files), TCC_N);
    for (ptrdiff_t f = 0; f < arrlen(files); f++) {
      size_t len = 0, olen = 0;
      uint8_t *b = (uint8_t *)tu_read_file(files[f], &len);
      uint8_t *other = (uint8_t *)tu_read_file(files[(f + 1) % TCC_N], &olen);
      assert_true(b && other && len > 200);
      switch (kind) {
      case 0: tcc_write(files[f], b, len / 2); break;                   /* truncated */
      case 1: b[len - 100] ^= 1; tcc_write(files[f], b, len); break;     /* corrupt payload */
      case 2: tcc_write(files[f], other, olen); break;                   /* another entry's file */
      case 3: tcc_write(files[f], NULL, 0); break;                       /* empty */
      case 4: memset(b, 0x5a, len); tcc_write(files[f], b, len); break;  /* garbage */
      case 5: tcc_junk_object(dir, b); break;   /* the right key, a garbage object */
      }
      free(b);
      free(other);
      int src[TCC_N];
      assert_int_equal(tcc_process(dir, src), 0);
      int recompiled = 0;
      for (int k = 0; k < TCC_N; k++) recompiled += src[k] == HJ_CODE_COMPILED;
      if (kind == 2 && recompiled != 1) fail_msg("kind %d file %d: %d recompiled", kind, (int)f, recompiled);
      if (recompiled != 1) fail_msg("kind %d file %d: %d modules recompiled, want 1", kind, (int)f, recompiled);
      size_t n;
      char *got = tcc_outputs(dir, &n);
      assert_int_equal(n, nref);
      assert_memory_equal(got, ref, n);
      arrfree(got);
      tcc_expect_all(dir, HJ_CODE_DISK, "after the rewrite");   /* the entry is good again */
    }
    tcc_free_list(files);
  }
  arrfree(ref);
}

/* A disk cache that fails (every entry's object refused by LLVM) costs a recompile and
   nothing else: the compiles succeed and hj_ctx_error still says what the last failed call
   said, not what went wrong inside the cache. */
static void test_cache_trouble_keeps_the_error(void **state) {
  char dir[128];
  snprintf(dir, sizeof dir, "%s/trouble", tcc_root);
  tcc_expect_all(dir, HJ_CODE_COMPILED, "populate");
  char **files = tcc_entries(dir);
  for (ptrdiff_t f = 0; f < arrlen(files); f++) {
    size_t len = 0;
    uint8_t *b = (uint8_t *)tu_read_file(files[f], &len);
    assert_true(b && len > 200);
    tcc_junk_object(dir, b);
    free(b);
  }
  tcc_free_list(files);
  hj_ctx_t *ctx = tcc_ctx(dir);
  assert_non_null(ctx);
  hj_module_t *bad = NULL;
  assert_int_not_equal(hj_module_parse(ctx, "HloModule x\nENTRY {", 18, "bad", &bad), HJ_OK);
  char before[512];
  snprintf(before, sizeof before, "%s", hj_ctx_error(ctx));
  assert_true(before[0] != 0);
  for (int k = 0; k < TCC_N; k++) {
    static uint8_t buf[1 << 16];
    size_t n = 0;
    int src = -1;
    assert_true(tcc_run(ctx, k, &src, buf, sizeof buf, &n));
    assert_int_equal(src, HJ_CODE_COMPILED);
    assert_string_equal(hj_ctx_error(ctx), before);
  }
  hj_ctx_destroy(ctx);
}

static void test_racing_processes(void **state) {
  char dir[128];
  snprintf(dir, sizeof dir, "%s/race/empty", tcc_root);
  pid_t p[2];
  for (int i = 0; i < 2; i++)
    if ((p[i] = fork()) == 0) {
      int src[TCC_N];
      char mine[160];
      snprintf(mine, sizeof mine, "%s", dir);
      _exit(tcc_process(mine, src) != 0);
    }
  for (int i = 0; i < 2; i++) {
    int ws = 0;
    waitpid(p[i], &ws, 0);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
  }
  tcc_expect_all(dir, HJ_CODE_DISK, "after the race");
}

/* A module compiled twice in one context is compiled once; the code outlives its first
   executable and is kept when none is left. */
static void test_compiled_once_in_process(void **state) {
  char dir[128];
  snprintf(dir, sizeof dir, "%s/once", tcc_root);
  hj_ctx_t *ctx = tcc_ctx("off");
  assert_non_null(ctx);
  static uint8_t a[1 << 16], b[1 << 16];
  size_t na = 0, nb = 0;
  int s1 = -1, s2 = -1, s3 = -1;
  hj_graph_t *g = tcc_graph(ctx, 0);
  hj_exec_t *e1 = NULL, *e2 = NULL;
  CHECK_OK(ctx, hj_compile(g, &e1));
  CHECK_OK(ctx, hj_compile(g, &e2));
  hj_exec_stats_t st;
  hj_exec_stats(e1, &st);
  s1 = st.code_source;
  hj_exec_stats(e2, &st);
  s2 = st.code_source;
  assert_int_equal(s1, HJ_CODE_COMPILED);
  assert_int_equal(s2, HJ_CODE_MEMORY);
  assert_true(st.optimize_ms == 0);
  hj_exec_destroy(e1);   /* e2's code stays */
  hj_buffer_t *in[3], *out[1] = { NULL };
  hj_shape_t sh[3] = { HJ_SHAPE(8, 16), HJ_SHAPE(16, 32), HJ_SHAPE(32, 8) };
  for (int i = 0; i < 3; i++) CHECK_OK(ctx, hj_buffer_create(ctx, HJ_F32, sh[i], &in[i]));
  CHECK_OK(ctx, hj_exec_run(e2, in, 3, out, 1));
  hj_buffer_destroy(out[0]);
  for (int i = 0; i < 3; i++) hj_buffer_destroy(in[i]);
  hj_exec_destroy(e2);
  hj_graph_destroy(g);
  assert_true(tcc_run(ctx, 0, &s3, a, sizeof a, &na));   /* no executable left: still loaded */
  assert_int_equal(s3, HJ_CODE_MEMORY);
  hj_ctx_destroy(ctx);
  ctx = tcc_ctx("off");   /* a new context compiles again */
  assert_true(tcc_run(ctx, 0, &s3, b, sizeof b, &nb));
  assert_int_equal(s3, HJ_CODE_COMPILED);
  assert_int_equal(na, nb);
  assert_memory_equal(a, b, na);
  hj_ctx_destroy(ctx);
}

/* The directory stays under HLOJIT_CACHE_MAX_MB however many modules are compiled. */
static void test_size_limit(void **state) {
  char dir[128];
  snprintf(dir, sizeof dir, "%s/limit", tcc_root);
  pid_t pid = fork();
  if (pid == 0) {
    setenv("HLOJIT_CACHE_MAX_MB", "0.05", 1);   /* 52428 bytes: about a dozen entries */
    hj_ctx_t *ctx = tcc_ctx(dir);
    int bad = !ctx;
    static uint8_t buf[1 << 16];
    for (int k = 3; k < 3 + 60 && !bad; k++) {
      int s = 0;
      size_t n = 0;
      bad |= !tcc_run(ctx, k, &s, buf, sizeof buf, &n);
    }
    hj_ctx_destroy(ctx);
    _exit(bad);
  }
  int ws = 0;
  waitpid(pid, &ws, 0);
  assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
  char **files = tcc_entries(dir);
  int64_t total = 0;
  for (ptrdiff_t i = 0; i < arrlen(files); i++) {
    struct stat st;
    assert_int_equal(stat(files[i], &st), 0);
    total += st.st_size;
  }
  print_message("  %d entries, %lld bytes after 60 modules (limit 52428)\n", (int)arrlen(files), (long long)total);
  assert_true(total <= 52428);
  assert_true(arrlen(files) < 60);   /* some were evicted */
  tcc_free_list(files);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_second_process_compiles_nothing),
    cmocka_unit_test(test_bad_files_recompile),
    cmocka_unit_test(test_cache_trouble_keeps_the_error),
    cmocka_unit_test(test_racing_processes),
    cmocka_unit_test(test_compiled_once_in_process),
    cmocka_unit_test(test_size_limit),
  };
  return cmocka_run_group_tests(tests, tcc_setup, tcc_teardown);
}
