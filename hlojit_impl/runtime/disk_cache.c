/* runtime/disk_cache.c — the on-disk cache of compiled code (runtime.h, "disk_cache.c"):
   a directory of entry files, one per key, shared by every process of the user.

   Directory: options.dir, else $HLOJIT_CACHE_DIR, else $XDG_CACHE_HOME/hlojit, else
   $HOME/.cache/hlojit; the value "off" (either place) disables the cache. Created (with its
   parents) on open; a directory that cannot be made disables the cache too (a cache never
   fails the compile it serves).

   An entry, DIR/<32 hex digits>.hjc, little-endian:
       0  magic "HLOJITC\0"           8  format version (u32)   12  header bytes (u32, 64)
      16  XXH3-128 of the key (16)   32  key bytes (u64)       40  payload bytes (u64)
      48  XXH3-64 of key + payload   56  reserved (0)          64  key, then payload
   The file name is the key's XXH3-128. The key is the whole key material (the caller's
   fingerprint input: versions, target, the optimised module's text), stored in the entry
   and compared byte for byte on a hit, so a hash collision or a file copied over another
   entry's name is a miss, never a wrong load. Any entry that is short, long, of another
   magic, version or key, or whose checksum fails, is a miss: it is removed (the caller
   then compiles and writes a good one) and the reason is reported.

   Writes are atomic: the entry goes to a temporary file in the same directory
   (".tmp.PID.N.NAME", created with O_EXCL), then rename(2) puts it in place, so a reader
   sees either the old file or the whole new one, and two processes writing one entry at
   once both succeed (the last rename wins; both files are complete). No fsync: a file torn
   by a crash fails its checksum and is rewritten.

   Size limit: after each write the directory's entries are summed; while they exceed
   max_bytes the least recently used are deleted (a hit touches its entry's mtime, so mtime
   orders use). Temporary files older than ten minutes (a writer that died) are deleted on
   the same scan. Concurrent evictions race benignly (a file already gone is skipped). */
#include "runtime.h"
#define XXH_INLINE_ALL
#include <xxhash.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { DC_HEADER = 64, DC_VERSION = 1 };
static const char dc_magic[8] = "HLOJITC";

struct rt_dcache {
  hj_ctx_t *ctx;
  char dir[2048];
  int64_t max_bytes;
  pthread_mutex_t mu;                  /* stats and the temporary-name counter */
  uint64_t counter;
  rt_dcache_stats stats;
};

/* ---- the directory ---------------------------------------------------------------------- */

/* mkdir -p; true when |dir| is a directory afterwards (another process may race us). */
static bool dc_mkdirs(const char *dir) {
  char p[2048];
  snprintf(p, sizeof p, "%s", dir);
  for (char *s = p + 1; *s; s++)
    if (*s == '/') {
      *s = 0;
      mkdir(p, 0777);
      *s = '/';
    }
  mkdir(p, 0777);
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

bool rt_dcache_resolve_dir(const char *dir, char *buf, size_t n) {
  const char *env = getenv("HLOJIT_CACHE_DIR");
  if (!dir || !*dir) dir = env && *env ? env : NULL;
  if (dir && strcmp(dir, "off") == 0) return false;
  if (dir) return snprintf(buf, n, "%s", dir) < (int)n;
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (xdg && *xdg) return snprintf(buf, n, "%s/hlojit", xdg) < (int)n;
  if (home && *home) return snprintf(buf, n, "%s/.cache/hlojit", home) < (int)n;
  return false;
}

hj_status rt_dcache_open(hj_ctx_t *ctx, const char *dir, int64_t max_bytes, rt_dcache **out) {
  *out = NULL;
  char d[2048];
  if (!rt_dcache_resolve_dir(dir, d, sizeof d) || !dc_mkdirs(d)) return HJ_OK;   /* off */
  rt_dcache *c = calloc(1, sizeof *c);
  if (!c) return hj__err(ctx, HJ_ERR_OOM, "disk cache: out of memory");
  c->ctx = ctx;
  snprintf(c->dir, sizeof c->dir, "%s", d);
  const char *mb = getenv("HLOJIT_CACHE_MAX_MB");   /* MiB, fractions allowed */
  double lim = mb ? atof(mb) * 1048576.0 : 0;
  c->max_bytes = max_bytes > 0 ? max_bytes : lim >= 1 ? (int64_t)lim : (int64_t)1 << 30;
  pthread_mutex_init(&c->mu, NULL);
  *out = c;
  return HJ_OK;
}

void rt_dcache_close(rt_dcache *c) {
  if (!c) return;
  pthread_mutex_destroy(&c->mu);
  free(c);
}

const char *rt_dcache_dir(const rt_dcache *c) { return c ? c->dir : ""; }

rt_dcache_stats rt_dcache_get_stats(rt_dcache *c) {
  rt_dcache_stats s = { 0 };
  if (!c) return s;
  pthread_mutex_lock(&c->mu);
  s = c->stats;
  pthread_mutex_unlock(&c->mu);
  return s;
}

static void dc_count(rt_dcache *c, int64_t *field) {
  pthread_mutex_lock(&c->mu);
  (*field)++;
  pthread_mutex_unlock(&c->mu);
}

/* ---- entries ----------------------------------------------------------------------------- */

static void dc_put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void dc_put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t dc_u32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
  return v;
}
static uint64_t dc_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static void dc_digest(const void *key, size_t klen, uint8_t out[16]) {
  XXH128_hash_t h = XXH3_128bits(key, klen);
  dc_put_u64(out, h.low64);
  dc_put_u64(out + 8, h.high64);
}

static uint64_t dc_checksum(const void *key, size_t klen, const void *payload, size_t n) {
  return XXH3_64bits_withSeed(payload, n, XXH3_64bits(key, klen));
}

void rt_dcache_digest(const void *data, size_t n, char hex[33]) {
  uint8_t d[16];
  dc_digest(data, n, d);
  for (int i = 0; i < 16; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

void rt_dcache_entry_path(const rt_dcache *c, const void *key, size_t klen, char *buf, size_t n) {
  char hex[33];
  rt_dcache_digest(key, klen, hex);
  snprintf(buf, n, "%s/%s.hjc", c->dir, hex);
}

/* Reads all of |path| (malloc'd); NULL when it cannot (absent, unreadable, absurd size). */
static uint8_t *dc_read(const char *path, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  struct stat st;
  uint8_t *buf = NULL;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 0 && st.st_size < ((int64_t)1 << 34) &&
      (buf = malloc((size_t)st.st_size + 1))) {
    size_t got = 0;
    while (got < (size_t)st.st_size) {
      ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += (size_t)r;
    }
    *len = got;
  }
  close(fd);
  return buf;
}

/* Why entry |b| (|len| bytes) is not the entry of |key|, or NULL when it is. */
static const char *dc_check(const uint8_t *b, size_t len, const void *key, size_t klen) {
  if (len < DC_HEADER) return "truncated header";
  if (memcmp(b, dc_magic, sizeof dc_magic) != 0) return "not a hlojit cache entry (magic)";
  if (dc_u32(b + 8) != DC_VERSION || dc_u32(b + 12) != DC_HEADER) return "another cache format version";
  uint8_t d[16];
  dc_digest(key, klen, d);
  if (memcmp(b + 16, d, 16) != 0) return "the entry of another key (digest)";
  uint64_t kl = dc_u64(b + 32), pl = dc_u64(b + 40);
  if (kl != klen) return "the entry of another key (key length)";
  if (len < DC_HEADER + kl) return "truncated key";
  size_t avail = len - DC_HEADER - kl;
  if (pl != avail) return pl > avail ? "truncated payload" : "trailing bytes";
  if (memcmp(b + DC_HEADER, key, klen) != 0) return "the entry of another key (key bytes)";
  if (dc_checksum(key, klen, b + DC_HEADER + kl, pl) != dc_u64(b + 48)) return "checksum mismatch (corrupt)";
  return NULL;
}

bool rt_dcache_get(rt_dcache *c, const void *key, size_t klen, void **payload, size_t *n, char *why, size_t whyn) {
  *payload = NULL;
  *n = 0;
  if (why && whyn) why[0] = 0;
  if (!c) return false;
  char path[2400];
  rt_dcache_entry_path(c, key, klen, path, sizeof path);
  size_t len = 0;
  uint8_t *b = dc_read(path, &len);
  if (!b) {
    if (why) snprintf(why, whyn, "no entry");
    dc_count(c, &c->stats.misses);
    return false;
  }
  const char *bad = dc_check(b, len, key, klen);
  if (bad) {
    if (why) snprintf(why, whyn, "%s: %s", path, bad);
    unlink(path);   /* rewritten by the caller's put */
    free(b);
    dc_count(c, &c->stats.rejected);
    dc_count(c, &c->stats.misses);
    return false;
  }
  size_t pl = (size_t)dc_u64(b + 40);
  memmove(b, b + DC_HEADER + klen, pl);
  *payload = b;
  *n = pl;
  utimensat(AT_FDCWD, path, NULL, 0);   /* most recently used */
  dc_count(c, &c->stats.hits);
  return true;
}

static bool dc_write_all(int fd, const void *p, size_t n) {
  const uint8_t *q = p;
  while (n > 0) {
    ssize_t w = write(fd, q, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    q += w;
    n -= (size_t)w;
  }
  return true;
}

typedef struct dc_file { char name[96]; int64_t bytes; struct timespec mtime; } dc_file;

static int dc_older(const void *a, const void *b) {
  const dc_file *x = a, *y = b;
  if (x->mtime.tv_sec != y->mtime.tv_sec) return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
  if (x->mtime.tv_nsec != y->mtime.tv_nsec) return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
  return strcmp(x->name, y->name);
}

int64_t rt_dcache_evict(rt_dcache *c) {
  if (!c) return 0;
  DIR *d = opendir(c->dir);
  if (!d) return 0;
  dc_file *files = NULL;
  int64_t total = 0;
  time_t now = time(NULL);
  char path[2400];
  for (struct dirent *e; (e = readdir(d));) {
    size_t ln = strlen(e->d_name);
    bool entry = ln > 4 && strcmp(e->d_name + ln - 4, ".hjc") == 0 && e->d_name[0] != '.';
    bool tmp = strncmp(e->d_name, ".tmp.", 5) == 0;
    if ((!entry && !tmp) || ln >= sizeof files[0].name) continue;
    snprintf(path, sizeof path, "%s/%s", c->dir, e->d_name);
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (tmp) {
      if (now - st.st_mtime > 600) unlink(path);   /* a writer that died */
      continue;
    }
    dc_file f = { .bytes = st.st_size, .mtime = st.st_mtim };
    memcpy(f.name, e->d_name, ln + 1);
    arrput(files, f);
    total += st.st_size;
  }
  closedir(d);
  int64_t gone = 0;
  if (total > c->max_bytes) {
    qsort(files, (size_t)arrlen(files), sizeof *files, dc_older);
    for (ptrdiff_t i = 0; i < arrlen(files) && total > c->max_bytes; i++) {
      snprintf(path, sizeof path, "%s/%s", c->dir, files[i].name);
      if (unlink(path) == 0) gone++;
      total -= files[i].bytes;   /* gone either way: another process took it */
    }
  }
  arrfree(files);
  pthread_mutex_lock(&c->mu);
  c->stats.evictions += gone;
  pthread_mutex_unlock(&c->mu);
  return gone;
}

hj_status rt_dcache_put(rt_dcache *c, const void *key, size_t klen, const void *payload, size_t n) {
  if (!c) return HJ_OK;
  if ((int64_t)(DC_HEADER + klen + n) > c->max_bytes) return HJ_OK;   /* would evict itself */
  uint8_t h[DC_HEADER] = { 0 };
  memcpy(h, dc_magic, sizeof dc_magic);
  dc_put_u32(h + 8, DC_VERSION);
  dc_put_u32(h + 12, DC_HEADER);
  dc_digest(key, klen, h + 16);
  dc_put_u64(h + 32, klen);
  dc_put_u64(h + 40, n);
  dc_put_u64(h + 48, dc_checksum(key, klen, payload, n));
  char path[2400], tmp[2600];
  rt_dcache_entry_path(c, key, klen, path, sizeof path);
  pthread_mutex_lock(&c->mu);
  uint64_t k = c->counter++;
  pthread_mutex_unlock(&c->mu);
  snprintf(tmp, sizeof tmp, "%s/.tmp.%ld.%llu.%s", c->dir, (long)getpid(), (unsigned long long)k, strrchr(path, '/') + 1);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  bool ok = fd >= 0 && dc_write_all(fd, h, sizeof h) && dc_write_all(fd, key, klen) && dc_write_all(fd, payload, n);
  if (fd >= 0 && close(fd) != 0) ok = false;
  if (ok && rename(tmp, path) != 0) ok = false;
  if (!ok) {
    int e = errno;
    if (fd >= 0) unlink(tmp);
    dc_count(c, &c->stats.write_errors);
    return hj__err(c->ctx, HJ_ERR_IO, "disk cache: cannot write '%s': %s", path, strerror(e));
  }
  dc_count(c, &c->stats.writes);
  rt_dcache_evict(c);
  return HJ_OK;
}
