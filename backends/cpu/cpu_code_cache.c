/* cpu_code_cache.c — the CPU backend's code cache: the machine code of an executable's
   LLVM module is compiled once per key, kept loaded for the context (a module compiled
   twice is compiled once), and stored on disk (runtime/disk_cache.c) for the next process.

   The key (runtime/code_key.c, shared with other backends): the emitted LLVM IR before O3
   with canonical names, hashed, plus the code's identity (cpu_jit_code_id: LLVM version,
   triple, CPU name, features); the module's functions are renamed "hj<digest>.f<i>", unique
   in the JIT because the digest is the content, and the thunks follow. Two executables of
   the same key share the loaded code (refcounted; unreferenced code stays loaded, up to
   CC_KEEP keys, least recently used first out).

   Finishing a module, cheapest first: loaded already (memory hit); the disk entry, its
   object added to ORC (disk hit; an object LLVM refuses is a miss); else O3, the object
   emitted by the target machine, added to ORC and written to disk. Disk problems are
   misses, never errors. */
#include "cpu_code_cache.h"
#include <pthread.h>
#include <stdlib.h>

enum { CC_KEEP = 32 };

typedef struct cpu_cc_code {
  char digest[33];
  cpu_jit_rt *rt;
  int refs;
  uint64_t last_use;
} cpu_cc_code;

struct cpu_cc {
  hj_ctx_t *ctx;
  rt_dcache *disk;                /* NULL: off */
  cpu_cc_code **loaded;           /* stb_ds */
  uint64_t tick;
  pthread_mutex_t mu;
};

hj_status cpu_cc_create(hj_ctx_t *ctx, cpu_cc **out) {
  *out = NULL;
  cpu_cc *c = calloc(1, sizeof *c);
  if (!c) return hj__err(ctx, HJ_ERR_OOM, "CPU backend: out of memory");
  c->ctx = ctx;
  pthread_mutex_init(&c->mu, NULL);
  hj_status st = rt_dcache_open(ctx, ctx->opt.cache_dir, 0, &c->disk);
  if (st != HJ_OK) {
    cpu_cc_destroy(c);
    return st;
  }
  *out = c;
  return HJ_OK;
}

/* The JIT (destroyed right after) frees the code itself; the trackers are only released. */
void cpu_cc_destroy(cpu_cc *c) {
  if (!c) return;
  for (ptrdiff_t i = 0; i < arrlen(c->loaded); i++) {
    if (c->loaded[i]->rt) LLVMOrcReleaseResourceTracker(c->loaded[i]->rt);
    free(c->loaded[i]);
  }
  arrfree(c->loaded);
  rt_dcache_close(c->disk);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

const char *cpu_cc_dir(const cpu_cc *c) { return c && c->disk ? rt_dcache_dir(c->disk) : ""; }

/* ---- loaded code ------------------------------------------------------------------------------ */

static cpu_cc_code *cc_find(cpu_cc *c, const char *digest) {
  for (ptrdiff_t i = 0; i < arrlen(c->loaded); i++)
    if (strcmp(c->loaded[i]->digest, digest) == 0) return c->loaded[i];
  return NULL;
}

/* Unloads the least recently used unreferenced code while more than CC_KEEP keys are loaded. */
static void cc_trim(cpu_cc *c, cpu_jit *j) {
  while (arrlen(c->loaded) > CC_KEEP) {
    ptrdiff_t lru = -1;
    for (ptrdiff_t i = 0; i < arrlen(c->loaded); i++)
      if (c->loaded[i]->refs == 0 && (lru < 0 || c->loaded[i]->last_use < c->loaded[lru]->last_use)) lru = i;
    if (lru < 0) return;
    cpu_jit_remove(j, c->loaded[lru]->rt);
    free(c->loaded[lru]);
    arrdel(c->loaded, lru);
  }
}

static cpu_cc_code *cc_add(cpu_cc *c, const char *digest, cpu_jit_rt *rt) {
  cpu_cc_code *k = calloc(1, sizeof *k);
  if (!k) return NULL;
  memcpy(k->digest, digest, 33);
  k->rt = rt;
  k->refs = 1;
  k->last_use = ++c->tick;
  arrput(c->loaded, k);
  return k;
}

void cpu_cc_release(cpu_cc *c, cpu_jit *j, cpu_cc_code *k) {
  if (!c || !k) return;
  pthread_mutex_lock(&c->mu);
  k->refs--;
  k->last_use = ++c->tick;
  cc_trim(c, j);
  pthread_mutex_unlock(&c->mu);
}

/* ---- finishing a module ----------------------------------------------------------------------- */

/* A miss: O3, the object, into ORC, onto disk. */
static hj_status cc_compile(cpu_cc *c, cpu_jit *j, cpu_jit_module *jm, const char *key, size_t klen,
                            cpu_jit_rt **rt, double *opt_ms) {
  double t0 = rt_now_ms();
  hj_status st = cpu_jit_optimize(j, jm->mod);
  *opt_ms = rt_now_ms() - t0;
  void *obj = NULL;
  size_t n = 0;
  if (st == HJ_OK) st = cpu_jit_emit_object(j, jm->mod, &obj, &n);
  if (st == HJ_OK) st = cpu_jit_add_object(j, obj, n, key, rt);
  if (st == HJ_OK && c->disk) {
    hj_status last = c->ctx->last;
    char err[sizeof c->ctx->err];
    memcpy(err, c->ctx->err, sizeof err);
    rt_dcache_put(c->disk, key, klen, obj, n);   /* a write that fails is only a miss next time */
    c->ctx->last = last;
    memcpy(c->ctx->err, err, sizeof err);
  }
  free(obj);
  return st;
}

hj_status cpu_cc_finish(cpu_cc *c, cpu_jit *j, cpu_jit_module *jm, rt_exec *x, cpu_cc_code **out, int *source) {
  *out = NULL;
  *source = HJ_CODE_COMPILED;
  char cid[2048];
  cpu_jit_code_id(j, cid, sizeof cid);
  rt_code_key ck;
  hj_status st = rt_code_key_make(c->ctx, jm->mod, cid, x, &ck);
  if (st != HJ_OK) {
    cpu_jit_module_dispose(jm);
    return st;
  }
  const char *key = ck.key, *digest = ck.digest;
  size_t klen = ck.len;
  pthread_mutex_lock(&c->mu);
  cpu_cc_code *k = cc_find(c, digest);
  cpu_jit_rt *rt = NULL;
  double opt_ms = 0;
  if (k) {                                       /* loaded already */
    k->refs++;
    k->last_use = ++c->tick;
    *source = HJ_CODE_MEMORY;
  } else {
    void *obj = NULL;
    size_t n = 0;
    if (c->disk && rt_dcache_get(c->disk, key, klen, &obj, &n, NULL, 0)) {
      hj_status last = c->ctx->last;
      char err[sizeof c->ctx->err];
      memcpy(err, c->ctx->err, sizeof err);
      if (cpu_jit_add_object(j, obj, n, key, &rt) == HJ_OK) *source = HJ_CODE_DISK;
      c->ctx->last = last;                       /* an object LLVM refuses is a miss */
      memcpy(c->ctx->err, err, sizeof err);
      free(obj);
    }
    if (!rt) st = cc_compile(c, j, jm, key, klen, &rt, &opt_ms);
    if (st == HJ_OK && !(k = cc_add(c, digest, rt))) {
      cpu_jit_remove(j, rt);
      st = hj__err(c->ctx, HJ_ERR_OOM, "CPU backend: out of memory");
    }
    if (st == HJ_OK) cc_trim(c, j);
  }
  pthread_mutex_unlock(&c->mu);
  x->stats.optimize_ms = opt_ms;
  x->stats.code_source = *source;
  cpu_jit_module_dispose(jm);
  rt_code_key_free(&ck);
  *out = k;
  return st;
}
