/* jit/jit.c — hj_jit_create / hj_jit_call / hj_jit_stats / hj_jit_destroy: keys, buckets,
   the LRU memory cache, miss reasons and the HLOJIT_LOG line (jit.h says how the part is
   split).

   A call: the key is built from the input buffers (mode, then per parameter dtype, rank and
   dims, each dynamic dim replaced by its bucket); a linear scan over the few cached entries
   (hash first) finds the executable; a miss traces and compiles (jit_trace.c) and may evict
   the least recently used entry; then jit_run pads, runs and cuts back. When the padder
   declines the function, the jit switches to exact sizes for good (pad_off) and the key is
   rebuilt with the real sizes.

   Buckets: next power of two >= r, capped at the declared max; with options.buckets the
   smallest listed bucket >= r (capped at max), else max. 1000 with powers of two:
   1, 2, 4, ..., 512, 1000 — 11 buckets for 1..1000.

   Miss reasons compare the new key with the previous call's: the first parameter whose
   dtype, rank, or a dim differs is named; a dynamic dim reads "bucket 8 -> 16 (size 9)", a
   static one "768 -> 512 (not a dynamic dim: a new trace)". Equal keys mean the entry had
   been evicted. */
#include "jit.h"
#include <stdlib.h>
#include <time.h>

double jit_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int64_t jit_bucket(const hj_jit_t *j, int64_t r, int64_t max) {
  if (j->nbuckets > 0) {
    for (int i = 0; i < j->nbuckets; i++)
      if (j->buckets[i] >= r) return j->buckets[i] < max ? j->buckets[i] : max;
    return max;
  }
  int64_t b = 1;
  while (b < r) b <<= 1;
  return b < max ? b : max;
}

void hj_jit_options_init(hj_jit_options_t *opt) {
  if (!opt) return;
  memset(opt, 0, sizeof *opt);
  opt->name = "jit";
  opt->cache_entries = 16;
}

/* ---- create / destroy ------------------------------------------------------------------------- */

static hj_status jit_copy_options(hj_jit_t *j, const hj_jit_options_t *o) {
  snprintf(j->name, sizeof j->name, "%s", o->name && *o->name ? o->name : "jit");
  j->nparams = o->nparams;
  j->capacity = o->cache_entries > 0 ? o->cache_entries : 16;
  j->no_padding = o->no_padding;
  if (o->nparams > 0 && !(j->params = calloc((size_t)o->nparams, sizeof *j->params))) return HJ_ERR_OOM;
  for (int i = 0; i < o->nparams; i++) {
    char buf[32];
    snprintf(buf, sizeof buf, "arg%d", i);
    j->params[i] = o->params[i];
    if (!(j->params[i].name = strdup(o->params[i].name ? o->params[i].name : buf))) return HJ_ERR_OOM;
  }
  if (o->nbuckets > 0) {
    if (!(j->buckets = malloc(sizeof *j->buckets * (size_t)o->nbuckets))) return HJ_ERR_OOM;
    memcpy(j->buckets, o->buckets, sizeof *j->buckets * (size_t)o->nbuckets);
    j->nbuckets = o->nbuckets;
  }
  return HJ_OK;
}

static hj_status jit_check_options(hj_ctx_t *ctx, const hj_jit_options_t *o) {
  if (o->nparams < 0 || (o->nparams > 0 && !o->params))
    return hj__err(ctx, HJ_ERR_INVALID_ARG, "hj_jit_create: %d parameters, params %s", o->nparams,
                   o->params ? "given" : "NULL");
  for (int i = 0; i < o->nparams; i++) {
    const hj_shape_t *s = &o->params[i].shape;
    if (s->rank < 0 || s->rank > HJ_MAX_RANK)
      return hj__err(ctx, HJ_ERR_INVALID_ARG, "hj_jit_create: parameter %d has rank %d", i, s->rank);
  }
  if (o->nbuckets < 0 || (o->nbuckets > 0 && !o->buckets))
    return hj__err(ctx, HJ_ERR_INVALID_ARG, "hj_jit_create: %d buckets, buckets %s", o->nbuckets,
                   o->buckets ? "given" : "NULL");
  for (int i = 0; i < o->nbuckets; i++)
    if (o->buckets[i] < 1 || (i > 0 && o->buckets[i] <= o->buckets[i - 1]))
      return hj__err(ctx, HJ_ERR_INVALID_ARG, "hj_jit_create: buckets must be ascending and >= 1 "
                     "(bucket %d is %lld)", i, (long long)o->buckets[i]);
  return HJ_OK;
}

hj_status hj_jit_create(hj_ctx_t *ctx, hj_jit_build_fn build, void *user, const hj_jit_options_t *opt,
                        hj_jit_t **out) {
  if (!out) return hj__err(ctx, HJ_ERR_INVALID_ARG, "hj_jit_create: out is NULL");
  *out = NULL;
  if (!ctx) return HJ_ERR_INVALID_ARG;
  if (!build || !opt) return hj__err(ctx, HJ_ERR_INVALID_ARG, "hj_jit_create: build function or options NULL");
  hj_status st = jit_check_options(ctx, opt);
  if (st != HJ_OK) return st;
  hj_jit_t *j = calloc(1, sizeof *j);
  if (!j) return hj__err(ctx, HJ_ERR_OOM, "hj_jit_create: out of memory");
  j->ctx = ctx;
  j->build = build;
  j->user = user;
  pthread_mutex_init(&j->mu, NULL);
  const char *log = getenv("HLOJIT_LOG");
  j->log = log && *log && strcmp(log, "0") != 0;
  if ((st = jit_copy_options(j, opt)) != HJ_OK) {
    hj_jit_destroy(j);
    return hj__err(ctx, st, "hj_jit_create: out of memory");
  }
  j->stats.last_miss = j->last_miss;
  j->stats.pad_note = j->pad_note;
  *out = j;
  return HJ_OK;
}

void hj_jit_destroy(hj_jit_t *j) {
  if (!j) return;
  for (ptrdiff_t i = 0; i < arrlen(j->entries); i++) jit_entry_free(j, j->entries[i]);
  arrfree(j->entries);
  arrfree(j->last_key);
  for (int i = 0; i < j->nparams && j->params; i++) free((void *)j->params[i].name);
  free(j->params);
  free(j->buckets);
  pthread_mutex_destroy(&j->mu);
  free(j);
}

hj_status hj_jit_stats(const hj_jit_t *j, hj_jit_stats_t *out) {
  if (!j || !out) return HJ_ERR_INVALID_ARG;
  hj_jit_t *m = (hj_jit_t *)j;   /* the lock only */
  pthread_mutex_lock(&m->mu);
  *out = j->stats;
  out->entries = (int)arrlen(j->entries);
  pthread_mutex_unlock(&m->mu);
  return HJ_OK;
}

/* ---- keys ------------------------------------------------------------------------------------ */

/* Key: mode, then per parameter dtype, rank, dims (dynamic dims at their bucket, or real
   when exact). Also fills |real| (nparams x HJ_MAX_RANK). */
static hj_status jit_key_build(hj_jit_t *j, hj_buffer_t *const *in, int mode, int64_t **key, int64_t *real) {
  arrsetlen(*key, 0);
  arrput(*key, mode);
  for (int i = 0; i < j->nparams; i++) {
    const hj_jit_param_t *p = &j->params[i];
    const hj_buffer_t *b = in[i];
    if (!b) return hj__err(j->ctx, HJ_ERR_INVALID_ARG, "hj_jit_call '%s': input %d ('%s') is NULL", j->name, i, p->name);
    char bs[128];
    hlo_shape hs = hj__buffer_hlo_shape(b);
    if (b->shape.rank != p->shape.rank)
      return hj__err(j->ctx, HJ_ERR_SHAPE, "hj_jit_call '%s': parameter '%s' is declared with rank %d, input %d is %s",
                     j->name, p->name, p->shape.rank, i, hlo_shape_str(&hs, bs, sizeof bs));
    arrput(*key, b->dtype);
    arrput(*key, b->shape.rank);
    for (int d = 0; d < b->shape.rank; d++) {
      int64_t r = b->shape.dims[d] < 0 ? -b->shape.dims[d] : b->shape.dims[d], max = -p->shape.dims[d];
      real[i * HJ_MAX_RANK + d] = r;
      if (p->shape.dims[d] >= 0) {
        arrput(*key, r);
        continue;
      }
      if (r < 1 || r > max)
        return hj__err(j->ctx, HJ_ERR_SHAPE, "hj_jit_call '%s': dim %d of parameter '%s' is %lld, declared "
                       "HJ_DYN(%lld) (1..%lld)", j->name, d, p->name, (long long)r, (long long)max, (long long)max);
      arrput(*key, mode == JIT_MODE_EXACT ? r : jit_bucket(j, r, max));
    }
  }
  return HJ_OK;
}

static uint64_t jit_hash(const int64_t *k, int n) {
  uint64_t h = 1469598103934665603ull;   /* FNV-1a over the values' bytes */
  const uint8_t *p = (const uint8_t *)k;
  for (size_t i = 0; i < sizeof *k * (size_t)n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static jit_entry *jit_lookup(hj_jit_t *j, const int64_t *key, int n, uint64_t h) {
  for (ptrdiff_t i = 0; i < arrlen(j->entries); i++) {
    jit_entry *e = j->entries[i];
    if (e->hash == h && e->nkey == n && memcmp(e->key, key, sizeof *key * (size_t)n) == 0) return e;
  }
  return NULL;
}

/* Why |key| missed, against the previous call's key. */
static void jit_miss_reason(hj_jit_t *j, const int64_t *key, int n) {
  const int64_t *o = j->last_key;
  int on = (int)arrlen(o);
  char *r = j->last_miss;
  size_t rn = sizeof j->last_miss;
  if (on == 0) {
    snprintf(r, rn, "first call");
    return;
  }
  if (o[0] != key[0]) {
    snprintf(r, rn, "padding declined, compiling exact sizes: %.400s", j->pad_note);
    return;
  }
  int a = 1, b = 1;
  for (int i = 0; i < j->nparams && a < on && b < n; i++) {
    const char *pn = j->params[i].name;
    hj_dtype_t od = (hj_dtype_t)o[a], nd = (hj_dtype_t)key[b];
    int orank = (int)o[a + 1], nrank = (int)key[b + 1];
    if (od != nd) {
      snprintf(r, rn, "param '%s': dtype %s -> %s", pn, hj_dtype_name(od), hj_dtype_name(nd));
      return;
    }
    for (int d = 0; d < orank && d < nrank; d++) {
      int64_t ov = o[a + 2 + d], nv = key[b + 2 + d];
      if (ov == nv) continue;
      if (j->params[i].shape.dims[d] < 0 && key[0] == JIT_MODE_PADDED)
        snprintf(r, rn, "param '%s' dim %d: bucket %lld -> %lld", pn, d, (long long)ov, (long long)nv);
      else if (j->params[i].shape.dims[d] < 0)
        snprintf(r, rn, "param '%s' dim %d: %lld -> %lld (exact sizes: padding declined)", pn, d,
                 (long long)ov, (long long)nv);
      else
        snprintf(r, rn, "param '%s' dim %d: %lld -> %lld (not a dynamic dim: a new trace)", pn, d,
                 (long long)ov, (long long)nv);
      return;
    }
    a += 2 + orank;
    b += 2 + nrank;
  }
  snprintf(r, rn, "the entry had been evicted (memory cache of %d entries)", j->capacity);
}

static void jit_evict(hj_jit_t *j) {
  while (arrlen(j->entries) > j->capacity) {
    ptrdiff_t lru = 0;
    for (ptrdiff_t i = 1; i < arrlen(j->entries); i++)
      if (j->entries[i]->last_use < j->entries[lru]->last_use) lru = i;
    jit_entry_free(j, j->entries[lru]);
    arrdel(j->entries, lru);
    j->stats.evictions++;
  }
}

/* A miss: trace and compile (retrying at exact sizes when the padder declines). */
static hj_status jit_miss(hj_jit_t *j, hj_buffer_t *const *in, int64_t **key, int64_t *real, jit_entry **out) {
  int mode = (int)(*key)[0];
  jit_miss_reason(j, *key, (int)arrlen(*key));
  bool declined = false;
  hj_status st = jit_trace_compile(j, *key, (int)arrlen(*key), mode, out, &declined);
  if (st == HJ_ERR_UNSUPPORTED && declined) {
    j->pad_off = true;
    hj_ctx_clear_error(j->ctx);
    if ((st = jit_key_build(j, in, JIT_MODE_EXACT, key, real)) != HJ_OK) return st;
    jit_entry *e = jit_lookup(j, *key, (int)arrlen(*key), jit_hash(*key, (int)arrlen(*key)));
    if (e) {   /* compiled at this exact size before */
      j->stats.memory_hits++;
      *out = e;
      return HJ_OK;
    }
    char why[sizeof j->last_miss];
    snprintf(why, sizeof why, "%.150s; padding declined, exact sizes: %.300s", j->last_miss, j->pad_note);
    memcpy(j->last_miss, why, sizeof why);
    st = jit_trace_compile(j, *key, (int)arrlen(*key), JIT_MODE_EXACT, out, &declined);
  }
  if (st != HJ_OK) return st;
  (*out)->hash = jit_hash((*out)->key, (*out)->nkey);
  arrput(j->entries, *out);
  if (j->log)
    fprintf(stderr, "hlojit: jit '%s': miss %lld (%s): trace %.1f ms, compile %.1f ms\n", j->name,
            (long long)j->stats.compiles, j->last_miss, j->last_trace_ms, j->last_compile_ms);
  return HJ_OK;
}

hj_status hj_jit_call(hj_jit_t *j, hj_buffer_t *const *in, int nin, hj_buffer_t **out, int nout) {
  if (!j) return HJ_ERR_INVALID_ARG;
  if (nin != j->nparams || (nin > 0 && !in))
    return hj__err(j->ctx, HJ_ERR_INVALID_ARG, "hj_jit_call '%s': %d inputs given, the function has %d "
                   "parameters%s", j->name, nin, j->nparams, nin > 0 && !in ? " (the array is NULL)" : "");
  if (nout > 0 && !out) return hj__err(j->ctx, HJ_ERR_INVALID_ARG, "hj_jit_call '%s': output array is NULL", j->name);
  pthread_mutex_lock(&j->mu);
  int64_t *key = NULL, small[8 * HJ_MAX_RANK], *real = small;
  if (j->nparams > 8 && !(real = calloc((size_t)j->nparams * HJ_MAX_RANK, sizeof *real))) {
    pthread_mutex_unlock(&j->mu);
    return hj__err(j->ctx, HJ_ERR_OOM, "hj_jit_call: out of memory");
  }
  int mode = j->no_padding || j->pad_off ? JIT_MODE_EXACT : JIT_MODE_PADDED;
  hj_status st = jit_key_build(j, in, mode, &key, real);
  jit_entry *e = NULL;
  if (st == HJ_OK) {
    j->stats.calls++;
    int n = (int)arrlen(key);
    if ((e = jit_lookup(j, key, n, jit_hash(key, n)))) j->stats.memory_hits++;
    else st = jit_miss(j, in, &key, real, &e);
  }
  if (st == HJ_OK) {
    e->last_use = ++j->tick;
    arrsetlen(j->last_key, 0);
    for (ptrdiff_t i = 0; i < arrlen(key); i++) arrput(j->last_key, key[i]);
    jit_evict(j);   /* never |e|: it is the most recently used */
    st = jit_run(j, e, in, out, nout, real);
  }
  arrfree(key);
  if (real != small) free(real);
  pthread_mutex_unlock(&j->mu);
  return st;
}
