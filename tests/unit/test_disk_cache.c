/* test_disk_cache.c — the on-disk cache of compiled code (runtime/disk_cache.c) as a store:
   round trips, the directory's resolution (HLOJIT_CACHE_DIR, XDG_CACHE_HOME, HOME, "off"),
   every kind of bad entry (each header field, the key and the payload corrupted; every
   truncation length of a small entry; another entry's file copied over; trailing bytes;
   garbage), which must be a miss that deletes the file and lets the next write succeed,
   never a wrong payload; eviction down to the size limit in least-recently-used order
   (a hit counts as a use); stale temporary files; and processes racing: many writers of one
   entry and of different entries on a directory that does not exist yet, all succeeding
   and leaving only whole entries. Runs under ASan+UBSan in make unit-asan. */
#include "testutil.h"
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utime.h>
#include <time.h>

static char td_root[64];

static int td_setup(void **state) {
  snprintf(td_root, sizeof td_root, "/tmp/hlojit_dcache_XXXXXX");
  return mkdtemp(td_root) ? 0 : -1;
}

static int td_teardown(void **state) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", td_root);
  return system(cmd) == 0 ? 0 : -1;
}

static rt_dcache *td_open(hj_ctx_t *ctx, const char *sub, int64_t max) {
  char dir[256];
  snprintf(dir, sizeof dir, "%s/%s", td_root, sub);
  rt_dcache *c = NULL;
  CHECK_OK(ctx, rt_dcache_open(ctx, dir, max, &c));
  assert_non_null(c);
  return c;
}

/* A payload of |n| bytes depending on |seed|. */
static uint8_t *td_payload(size_t n, unsigned seed) {
  uint8_t *p = malloc(n + 1);
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)((i * 131 + seed * 7) ^ (i >> 3));
  return p;
}

static void td_expect_hit(rt_dcache *c, const char *key, const uint8_t *want, size_t n) {
  void *got = NULL;
  size_t gn = 0;
  char why[512];
  if (!rt_dcache_get(c, key, strlen(key), &got, &gn, why, sizeof why)) fail_msg("miss for '%s': %s", key, why);
  assert_int_equal(gn, n);
  assert_memory_equal(got, want, n);
  free(got);
}

/* Misses, with |part| in the reason. */
static void td_expect_miss(rt_dcache *c, const char *key, const char *part) {
  void *got = (void *)1;
  size_t gn = 1;
  char why[512];
  assert_false(rt_dcache_get(c, key, strlen(key), &got, &gn, why, sizeof why));
  assert_null(got);
  assert_int_equal(gn, 0);
  if (part && !strstr(why, part)) fail_msg("reason \"%s\" lacks \"%s\"", why, part);
}

static void test_round_trip(void **state) {
  hj_ctx_t *ctx = tu_ctx();
  rt_dcache *c = td_open(ctx, "rt/a/b", 0);   /* parents made */
  uint8_t *p = td_payload(10000, 1);
  td_expect_miss(c, "module-1", "no entry");
  CHECK_OK(ctx, rt_dcache_put(c, "module-1", 8, p, 10000));
  td_expect_hit(c, "module-1", p, 10000);
  CHECK_OK(ctx, rt_dcache_put(c, "module-1", 8, p, 5000));   /* replaced */
  td_expect_hit(c, "module-1", p, 5000);
  CHECK_OK(ctx, rt_dcache_put(c, "empty", 5, p, 0));
  td_expect_hit(c, "empty", p, 0);
  rt_dcache_stats s = rt_dcache_get_stats(c);
  assert_int_equal(s.hits, 3);
  assert_int_equal(s.misses, 1);
  assert_int_equal(s.writes, 3);
  free(p);
  rt_dcache_close(c);
  hj_ctx_destroy(ctx);
}

static void test_directory(void **state) {
  char buf[512], want[512];
  unsetenv("HLOJIT_CACHE_DIR");
  setenv("XDG_CACHE_HOME", "/x/cache", 1);
  assert_true(rt_dcache_resolve_dir(NULL, buf, sizeof buf));
  assert_string_equal(buf, "/x/cache/hlojit");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/home/u", 1);
  assert_true(rt_dcache_resolve_dir(NULL, buf, sizeof buf));
  assert_string_equal(buf, "/home/u/.cache/hlojit");
  setenv("HLOJIT_CACHE_DIR", "/elsewhere", 1);
  assert_true(rt_dcache_resolve_dir(NULL, buf, sizeof buf));
  assert_string_equal(buf, "/elsewhere");
  assert_true(rt_dcache_resolve_dir("/given", buf, sizeof buf));   /* an explicit dir wins */
  assert_string_equal(buf, "/given");
  setenv("HLOJIT_CACHE_DIR", "off", 1);
  assert_false(rt_dcache_resolve_dir(NULL, buf, sizeof buf));
  assert_false(rt_dcache_resolve_dir("off", buf, sizeof buf));
  unsetenv("HLOJIT_CACHE_DIR");
  unsetenv("HOME");
  assert_false(rt_dcache_resolve_dir(NULL, buf, sizeof buf));
  /* off, or a directory that cannot be made: no cache, no error */
  hj_ctx_t *ctx = tu_ctx();
  rt_dcache *c = (rt_dcache *)1;
  CHECK_OK(ctx, rt_dcache_open(ctx, "off", 0, &c));
  assert_null(c);
  snprintf(want, sizeof want, "%s/file", td_root);
  FILE *f = fopen(want, "w");
  fclose(f);
  snprintf(buf, sizeof buf, "%s/file/sub", td_root);   /* under a regular file */
  CHECK_OK(ctx, rt_dcache_open(ctx, buf, 0, &c));
  assert_null(c);
  assert_false(rt_dcache_get(NULL, "k", 1, (void **)&f, (size_t *)&c, NULL, 0));
  CHECK_OK(ctx, rt_dcache_put(NULL, "k", 1, "x", 1));
  hj_ctx_destroy(ctx);
}

static uint8_t *td_file(rt_dcache *c, const char *key, size_t *len, char *path, size_t pn) {
  rt_dcache_entry_path(c, key, strlen(key), path, pn);
  return (uint8_t *)tu_read_file(path, len);
}

static void td_write(const char *path, const uint8_t *b, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(b, 1, n, f), n);
  fclose(f);
}

/* Each byte region of the entry changed: a miss, the file deleted, a rewrite works. */
static void test_corrupt_entries(void **state) {
  hj_ctx_t *ctx = tu_ctx();
  rt_dcache *c = td_open(ctx, "corrupt", 0);
  const char *key = "key material";
  uint8_t *p = td_payload(300, 2);
  CHECK_OK(ctx, rt_dcache_put(c, key, strlen(key), p, 300));
  char path[2300];
  size_t len = 0;
  uint8_t *good = td_file(c, key, &len, path, sizeof path);
  assert_int_equal(len, 64 + strlen(key) + 300);
  static const struct { size_t at; const char *why; } flips[] = {
    { 0, "magic" }, { 7, "magic" }, { 8, "version" }, { 12, "version" }, { 16, "digest" }, { 31, "digest" },
    { 32, "key length" }, { 40, "payload" }, { 47, "payload" }, { 48, "checksum" }, { 56, NULL },
    { 64, "key bytes" }, { 75, "key bytes" }, { 76, "checksum" }, { 200, "checksum" }, { 64 + 12 + 299, "checksum" },
  };
  for (size_t i = 0; i < sizeof flips / sizeof flips[0]; i++) {
    uint8_t *b = malloc(len);
    memcpy(b, good, len);
    b[flips[i].at] ^= 0x40;
    td_write(path, b, len);
    free(b);
    if (flips[i].why) {
      td_expect_miss(c, key, flips[i].why);
      assert_int_not_equal(access(path, F_OK), 0);   /* deleted */
      CHECK_OK(ctx, rt_dcache_put(c, key, strlen(key), p, 300));
    }
    td_expect_hit(c, key, p, 300);   /* reserved bytes are not checked; everything else is */
  }
  /* every truncation, and trailing bytes */
  for (size_t n = 0; n < len; n++) {
    td_write(path, good, n);
    td_expect_miss(c, key, "truncated");
  }
  uint8_t *longer = malloc(len + 3);
  memcpy(longer, good, len);
  memset(longer + len, 0, 3);
  td_write(path, longer, len + 3);
  td_expect_miss(c, key, "trailing bytes");
  free(longer);
  /* another entry's file under this entry's name; garbage; a directory in its place */
  CHECK_OK(ctx, rt_dcache_put(c, "other key", 9, p, 100));
  char other[2300];
  size_t olen = 0;
  uint8_t *ob = td_file(c, "other key", &olen, other, sizeof other);
  td_write(path, ob, olen);
  td_expect_miss(c, key, "another key");
  free(ob);
  uint8_t junk[4096];
  for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)(i * 37 + 11);
  td_write(path, junk, sizeof junk);
  td_expect_miss(c, key, "magic");
  mkdir(path, 0777);
  td_expect_miss(c, key, "no entry");
  rmdir(path);
  CHECK_OK(ctx, rt_dcache_put(c, key, strlen(key), p, 300));
  td_expect_hit(c, key, p, 300);
  assert_true(rt_dcache_get_stats(c).rejected >= (int64_t)len + 10);
  free(good);
  free(p);
  rt_dcache_close(c);
  hj_ctx_destroy(ctx);
}

static void td_age(const char *path, time_t when) {
  struct utimbuf t = { when, when };
  assert_int_equal(utime(path, &t), 0);
}

/* Growth is bounded: least recently used first, a hit counts as a use; stale temporaries go. */
static void test_eviction(void **state) {
  hj_ctx_t *ctx = tu_ctx();
  const size_t n = 1000, entry = 64 + 5 + n;   /* keys "key.K" */
  rt_dcache *c = td_open(ctx, "evict", (int64_t)(4 * entry));
  uint8_t *p = td_payload(n, 3);
  char key[16], path[2300];
  time_t now = time(NULL);
  for (int k = 0; k < 4; k++) {
    snprintf(key, sizeof key, "key.%d", k);
    CHECK_OK(ctx, rt_dcache_put(c, key, strlen(key), p, n));
    rt_dcache_entry_path(c, key, strlen(key), path, sizeof path);
    td_age(path, now - 100 + k);   /* key.0 oldest */
  }
  assert_int_equal(rt_dcache_get_stats(c).evictions, 0);
  td_expect_hit(c, "key.0", p, n);   /* now the most recent */
  CHECK_OK(ctx, rt_dcache_put(c, "key.4", 5, p, n));   /* over the limit: key.1 goes */
  assert_int_equal(rt_dcache_get_stats(c).evictions, 1);
  td_expect_miss(c, "key.1", "no entry");
  td_expect_hit(c, "key.0", p, n);
  for (int k = 5; k < 40; k++) {   /* the directory never holds more than 4 entries */
    snprintf(key, sizeof key, "key.%d", k);
    CHECK_OK(ctx, rt_dcache_put(c, key, strlen(key), p, n));
    int files = 0;
    int64_t bytes = 0;
    char dir[256];
    snprintf(dir, sizeof dir, "%s/evict", td_root);
    DIR *d = opendir(dir);
    for (struct dirent *e; (e = readdir(d));)
      if (strstr(e->d_name, ".hjc")) {
        files++;
        bytes += (int64_t)entry;
      }
    closedir(d);
    assert_true(files <= 4 && bytes <= (int64_t)(4 * entry));
  }
  /* an entry bigger than the limit is not stored */
  uint8_t *big = td_payload(5 * entry, 4);
  CHECK_OK(ctx, rt_dcache_put(c, "big", 3, big, 5 * entry));
  td_expect_miss(c, "big", "no entry");
  free(big);
  /* a stale temporary file (a writer that died) goes on the next scan, a fresh one stays */
  char stale[2300], fresh[2300];
  snprintf(stale, sizeof stale, "%s/evict/.tmp.1.1.x.hjc", td_root);
  snprintf(fresh, sizeof fresh, "%s/evict/.tmp.1.2.x.hjc", td_root);
  td_write(stale, p, 10);
  td_write(fresh, p, 10);
  td_age(stale, now - 3600);
  rt_dcache_evict(c);
  assert_int_not_equal(access(stale, F_OK), 0);
  assert_int_equal(access(fresh, F_OK), 0);
  free(p);
  rt_dcache_close(c);
  hj_ctx_destroy(ctx);
}

/* Processes racing on a directory that does not exist yet: 8 writers of one shared entry
   and one entry each, then every process reads both; all succeed, nothing torn is left. */
static void test_racing_processes(void **state) {
  enum { NPROC = 8, NBYTES = 200000 };
  char dir[256];
  snprintf(dir, sizeof dir, "%s/race/new", td_root);
  pid_t pids[NPROC];
  for (int i = 0; i < NPROC; i++) {
    if ((pids[i] = fork()) == 0) {
      hj_ctx_t *ctx = tu_ctx();
      rt_dcache *c = NULL;
      int bad = rt_dcache_open(ctx, dir, 0, &c) != HJ_OK || !c;
      uint8_t *shared = td_payload(NBYTES, 99), *mine = td_payload(NBYTES, (unsigned)i);
      char key[32];
      snprintf(key, sizeof key, "own.%d", i);
      for (int r = 0; r < 20 && !bad; r++) {
        bad |= rt_dcache_put(c, "shared", 6, shared, NBYTES) != HJ_OK;
        bad |= rt_dcache_put(c, key, strlen(key), mine, NBYTES) != HJ_OK;
        void *got = NULL;
        size_t n = 0;
        if (rt_dcache_get(c, "shared", 6, &got, &n, NULL, 0))   /* a hit is always whole */
          bad |= n != NBYTES || memcmp(got, shared, NBYTES) != 0;
        else bad = 1;
        free(got);
      }
      free(shared);
      free(mine);
      rt_dcache_close(c);
      hj_ctx_destroy(ctx);
      _exit(bad);
    }
  }
  for (int i = 0; i < NPROC; i++) {
    int ws = 0;
    assert_int_equal(waitpid(pids[i], &ws, 0), pids[i]);
    assert_true(WIFEXITED(ws));
    assert_int_equal(WEXITSTATUS(ws), 0);
  }
  hj_ctx_t *ctx = tu_ctx();
  rt_dcache *c = NULL;
  CHECK_OK(ctx, rt_dcache_open(ctx, dir, 0, &c));
  uint8_t *shared = td_payload(NBYTES, 99);
  td_expect_hit(c, "shared", shared, NBYTES);
  for (int i = 0; i < NPROC; i++) {
    char key[32];
    snprintf(key, sizeof key, "own.%d", i);
    uint8_t *mine = td_payload(NBYTES, (unsigned)i);
    td_expect_hit(c, key, mine, NBYTES);
    free(mine);
  }
  /* no temporary file left behind */
  DIR *d = opendir(dir);
  for (struct dirent *e; (e = readdir(d));) assert_null(strstr(e->d_name, ".tmp."));
  closedir(d);
  free(shared);
  rt_dcache_close(c);
  hj_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_round_trip),
    cmocka_unit_test(test_directory),
    cmocka_unit_test(test_corrupt_entries),
    cmocka_unit_test(test_eviction),
    cmocka_unit_test(test_racing_processes),
  };
  return cmocka_run_group_tests(tests, td_setup, td_teardown);
}
