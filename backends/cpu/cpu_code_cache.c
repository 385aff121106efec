/* cpu_code_cache.c — the CPU backend's code cache: the machine code of an executable's
   LLVM module is compiled once per key, kept loaded for the context (a module compiled
   twice is compiled once), and stored on disk (runtime/disk_cache.c) for the next process.

   The key (runtime/code_key.c, shared with other backends): the emitted LLVM IR before O3
   with canonical names, hashed, plus the code's identity (cpu_jit_code_id: LLVM version,
   triple, CPU name, features); the module's functions are renamed "hj<digest>.f<i>", unique
   in the JIT because the digest is the content, and the thunks follow. Two executables of
   the same key share the loaded code (refcounted; unreferenced code stays loaded, up to
   CC_KEEP keys, least recently used first out).

   Finishing the modules of a compile (one, or several that the compile driver split the
   kernels into), each cheapest first: loaded already (memory hit); the disk entry, its
   object added to ORC (disk hit; an object LLVM refuses is a miss); else compiled. The
   misses are optimised and turned into objects in parallel on the context's pool
   (cpu_jit_optimize_mt / _codegen_mt, a TargetMachine per thread), then, one by one,
   added to ORC and written to disk. Disk problems are misses, never errors. The cache's
   mutex is held throughout, so two compiles of one context never make the same code twice. */
#include "cpu_code_cache.h"
#include "threadpool.h"
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

/* ---- finishing the modules of a compile ------------------------------------------------------ */

typedef struct cc_mod {               /* one module of a compile */
  cpu_cc *c;
  cpu_jit *j;
  cpu_jit_module *jm;                 /* consumed: disposed on a hit, by codegen on a miss */
  rt_code_key key;
  cpu_cc_code *code;                  /* the loaded code it uses (one reference) */
  int source;                         /* HJ_CODE_* */
  int dup;                            /* a miss whose digest an earlier miss has: its index */
  LLVMMemoryBufferRef obj;            /* a miss: the object made on a pool thread */
  hj_status st;
  char err[1024];
} cc_mod;

static void cc_opt_task(void *user, int64_t b, int64_t e) {
  cc_mod *const *M = user;
  for (int64_t i = b; i < e; i++) {
    cc_mod *m = M[i];
    m->st = cpu_jit_optimize_mt(m->j, m->jm->mod, m->jm->light, m->err, sizeof m->err);
  }
}

static void cc_cg_task(void *user, int64_t b, int64_t e) {
  cc_mod *const *M = user;
  for (int64_t i = b; i < e; i++) {
    cc_mod *m = M[i];
    if (m->st == HJ_OK) m->st = cpu_jit_codegen_mt(m->j, m->jm, &m->obj, m->err, sizeof m->err);
    else cpu_jit_module_dispose(m->jm);
    m->jm = NULL;
  }
}

/* A disk hit: the stored object of |m|'s key added to the JIT (NULL: none, or one LLVM
   refuses, which is a miss; the context's error is kept as it was). */
static cpu_jit_rt *cc_from_disk(cpu_cc *c, cpu_jit *j, const cc_mod *m) {
  void *obj = NULL;
  size_t n = 0;
  cpu_jit_rt *rt = NULL;
  if (!c->disk || !rt_dcache_get(c->disk, m->key.key, m->key.len, &obj, &n, NULL, 0)) return NULL;
  hj__err_saved saved;
  hj__err_save(c->ctx, &saved);
  if (cpu_jit_add_object(j, obj, n, m->key.key, &rt) != HJ_OK) rt = NULL;
  hj__err_restore(c->ctx, &saved);
  free(obj);
  return rt;
}

/* A compiled miss: its object into the JIT, then onto disk (a write that fails is only a
   miss next time). */
static hj_status cc_add_compiled(cpu_cc *c, cpu_jit *j, cc_mod *m, cpu_jit_rt **rt) {
  const void *p = LLVMGetBufferStart(m->obj);
  size_t n = LLVMGetBufferSize(m->obj);
  hj_status st = cpu_jit_add_object(j, p, n, m->key.key, rt);
  if (st == HJ_OK && c->disk) {
    hj__err_saved saved;
    hj__err_save(c->ctx, &saved);
    rt_dcache_put(c->disk, m->key.key, m->key.len, p, n);
    hj__err_restore(c->ctx, &saved);
  }
  return st;
}

hj_status cpu_cc_finish(cpu_cc *c, cpu_jit *j, tp_pool *pool, cpu_jit_module *const *jms, int n,
                        rt_exec *x, cpu_cc_code **out, int *source) {
  hj_status st = HJ_OK;
  cc_mod *M = calloc((size_t)n + 1, sizeof *M);
  cc_mod **miss = calloc((size_t)n + 1, sizeof *miss);
  int nmiss = 0;
  *source = HJ_CODE_MEMORY;
  for (int i = 0; i < n; i++) out[i] = NULL;
  if (!M || !miss) st = hj__err(c->ctx, HJ_ERR_OOM, "CPU backend: out of memory");
  /* keys first: they rename each module's definitions (and the kernels' symbols) */
  for (int i = 0; M && i < n; i++) M[i] = (cc_mod){ .c = c, .j = j, .jm = jms[i], .dup = -1 };
  for (int i = 0; i < n && st == HJ_OK; i++) {
    char cid[2048];
    cpu_jit_code_id(j, jms[i]->light, cid, sizeof cid);
    st = rt_code_key_make(c->ctx, jms[i]->mod, cid, x, &M[i].key);
  }
  double opt_ms = 0;
  pthread_mutex_lock(&c->mu);
  for (int i = 0; i < n && st == HJ_OK; i++) {           /* hits */
    cc_mod *m = &M[i];
    cpu_jit_rt *rt = NULL;
    if ((m->code = cc_find(c, m->key.digest))) {
      m->code->refs++;
      m->code->last_use = ++c->tick;
      m->source = HJ_CODE_MEMORY;
    } else if ((rt = cc_from_disk(c, j, m))) {
      if (!(m->code = cc_add(c, m->key.digest, rt))) {
        cpu_jit_remove(j, rt);
        st = hj__err(c->ctx, HJ_ERR_OOM, "CPU backend: out of memory");
      }
      m->source = HJ_CODE_DISK;
    } else {
      m->source = HJ_CODE_COMPILED;
      for (int k = 0; k < nmiss && m->dup < 0; k++)
        if (strcmp(miss[k]->key.digest, m->key.digest) == 0) m->dup = (int)(miss[k] - M);
      if (m->dup < 0) {
        miss[nmiss++] = m;
        continue;                                        /* its module is compiled below */
      }
    }
    cpu_jit_module_dispose(m->jm);
    m->jm = NULL;
  }
  if (st == HJ_OK && nmiss > 0) {                        /* misses, on the pool's threads */
    double t0 = rt_now_ms();
    tp_parallel_for(pool, nmiss, 1, cc_opt_task, miss);
    opt_ms = rt_now_ms() - t0;
    tp_parallel_for(pool, nmiss, 1, cc_cg_task, miss);
  }
  for (int k = 0; k < nmiss; k++) {
    cc_mod *m = miss[k];
    cpu_jit_rt *rt = NULL;
    if (st == HJ_OK && m->st != HJ_OK) st = hj__err(c->ctx, m->st, "%s", m->err);
    if (st == HJ_OK) st = cc_add_compiled(c, j, m, &rt);
    if (st == HJ_OK && !(m->code = cc_add(c, m->key.digest, rt))) {
      cpu_jit_remove(j, rt);
      st = hj__err(c->ctx, HJ_ERR_OOM, "CPU backend: out of memory");
    }
    if (m->obj) LLVMDisposeMemoryBuffer(m->obj);
    m->obj = NULL;
  }
  for (int i = 0; i < n && st == HJ_OK; i++)             /* repeats share the first's code */
    if (M[i].dup >= 0 && (M[i].code = M[M[i].dup].code)) M[i].code->refs++;
  if (st == HJ_OK) cc_trim(c, j);
  pthread_mutex_unlock(&c->mu);
  for (int i = 0; M && i < n; i++) {
    if (M[i].jm) cpu_jit_module_dispose(M[i].jm);       /* not reached after a failure */
    if (st == HJ_OK) {
      out[i] = M[i].code;
      if (M[i].source == HJ_CODE_COMPILED) *source = HJ_CODE_COMPILED;
      else if (M[i].source == HJ_CODE_DISK && *source == HJ_CODE_MEMORY) *source = HJ_CODE_DISK;
    } else if (M[i].code) {
      cpu_cc_release(c, j, M[i].code);
    }
    rt_code_key_free(&M[i].key);
  }
  for (int i = 0; !M && i < n; i++) cpu_jit_module_dispose(jms[i]);
  x->stats.optimize_ms = opt_ms;
  x->stats.code_source = *source;
  free(M);
  free(miss);
  return st;
}
