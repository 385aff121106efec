/* cpu_code_cache.c — the CPU backend's code cache: the machine code of an executable's
   LLVM module is compiled once per key, kept loaded for the context (a module compiled
   twice is compiled once), and stored on disk (runtime/disk_cache.c) for the next process.

   The key is what determines the machine code: the emitted LLVM IR (before O3) with its
   process-specific names made canonical, hashed (XXH3-128), plus the code's identity
   (cpu_jit_code_id: LLVM version, triple, CPU name, features) and a format tag. Keying on the
   IR rather than on the HLO means that any change of the emitters (a new hlojit) changes the
   key, so code made by another build is never loaded; and everything the runtime derives
   from emission (kernel kinds, ranges, matmul plans) is made in this process from the same
   IR, so it always matches the loaded code.

   Names. The emitters name kernels from a per-JIT counter ("hjk.57"), which differs from run
   to run. Finishing a module therefore renames every defined function and global, in module
   order: first to neutral names ("f.0", "g.3") for hashing (module identifier and source
   file name set to constants for the hash, then restored for dumps), then to
   "hj<digest>.f<i>" / ".g<i>", unique in the JIT because the digest is the content; every
   thunk symbol and matmul-plan kernel name follows (a rename map). Two executables of the
   same key share the loaded code (refcounted; unreferenced code stays loaded, up to
   CC_KEEP keys, least recently used first out).

   Finishing a module, cheapest first: loaded already (memory hit); the disk entry, its
   object added to ORC (disk hit; an object LLVM refuses is a miss); else O3, the object
   emitted by the target machine, added to ORC and written to disk. Disk problems are
   misses, never errors. */
#include "cpu_code_cache.h"
#include "../../hlojit_impl/emitters/matmul_plan.h"
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

/* ---- names ------------------------------------------------------------------------------------ */

typedef struct { char *key; char *value; } cc_name;   /* stb_ds string map: old -> new */

static bool cc_defined_fn(LLVMValueRef f) { return !LLVMIsDeclaration(f); }
static bool cc_defined_global(LLVMValueRef g) { return LLVMGetInitializer(g) != NULL; }

/* Renames every defined function ("PREFIX.f<i>") and global ("PREFIX.g<i>") in module order;
   |orig| (may be NULL) receives the functions' names before (strdup'd, module order). */
static void cc_rename(LLVMModuleRef mod, const char *prefix, char ***orig) {
  char name[160];
  int i = 0;
  for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f)) {
    if (!cc_defined_fn(f)) continue;
    snprintf(name, sizeof name, "%s%sf%d", prefix, *prefix ? "." : "", i++);
    if (orig) {
      size_t len;
      const char *old = LLVMGetValueName2(f, &len);
      arrput(*orig, strndup(old, len));
    }
    LLVMSetValueName2(f, name, strlen(name));
  }
  i = 0;
  for (LLVMValueRef g = LLVMGetFirstGlobal(mod); g; g = LLVMGetNextGlobal(g)) {
    if (!cc_defined_global(g)) continue;
    snprintf(name, sizeof name, "%s%sg%d", prefix, *prefix ? "." : "", i++);
    LLVMSetValueName2(g, name, strlen(name));
  }
}

/* |s| (a char array of |n|) through |map|; unchanged when absent. */
static void cc_apply(cc_name *map, char *s, size_t n) {
  if (!s[0]) return;
  char *v = shget(map, s);
  if (v) snprintf(s, n, "%s", v);
}

/* ---- keys ------------------------------------------------------------------------------------- */

/* Neutral names (the originals into |orig|), the IR hashed; *key (malloc'd) the key
   material, |digest| its hash. */
static hj_status cc_key(cpu_jit *j, LLVMModuleRef mod, char ***orig, char **key, size_t *klen, char digest[33]) {
  size_t idlen;
  const char *id0 = LLVMGetModuleIdentifier(mod, &idlen);
  char *id = strndup(id0, idlen);
  cc_rename(mod, "", orig);
  LLVMSetModuleIdentifier(mod, "hlojit", 6);
  LLVMSetSourceFileName(mod, "hlojit", 6);
  char *ir = LLVMPrintModuleToString(mod);
  char irh[33], cid[2048];
  rt_dcache_digest(ir, strlen(ir), irh);
  LLVMDisposeMessage(ir);
  if (id) {
    LLVMSetModuleIdentifier(mod, id, idlen);
    LLVMSetSourceFileName(mod, id, idlen);
    free(id);
  }
  cpu_jit_code_id(j, cid, sizeof cid);
  char *k = NULL;
  sb_printf(&k, "hlojit code cache v1; hlojit %d.%d; %s; ir %s", HJ_VERSION_MAJOR, HJ_VERSION_MINOR, cid, irh);
  *klen = (size_t)arrlen(k) - 1;
  *key = malloc(*klen + 1);
  if (*key) memcpy(*key, k, *klen + 1);
  arrfree(k);
  if (!*key) return HJ_ERR_OOM;
  rt_dcache_digest(*key, *klen, digest);
  return HJ_OK;
}

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

static void cc_rename_thunks(rt_exec *x, cc_name *map) {
  for (ptrdiff_t i = 0; i < arrlen(x->kernels); i++) {
    th_thunk *t = x->kernels[i];
    cc_apply(map, t->sym, sizeof t->sym);
    if (!t->matmul) continue;
    for (int u = 0; u < 2; u++) cc_apply(map, t->matmul->ukr_name[u], sizeof t->matmul->ukr_name[u]);
    cc_apply(map, t->matmul->gemv_name, sizeof t->matmul->gemv_name);
    cc_apply(map, t->matmul->epi_name, sizeof t->matmul->epi_name);
  }
}

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
  char *key = NULL, digest[33], **orig = NULL;
  size_t klen = 0;
  hj_status st = cc_key(j, jm->mod, &orig, &key, &klen, digest);
  if (st != HJ_OK) {
    for (ptrdiff_t i = 0; i < arrlen(orig); i++) free(orig[i]);
    arrfree(orig);
    cpu_jit_module_dispose(jm);
    return hj__err(c->ctx, st, "CPU backend: out of memory");
  }
  char prefix[40], name[160];
  snprintf(prefix, sizeof prefix, "hj%s", digest);
  cc_rename(jm->mod, prefix, NULL);
  cc_name *map = NULL;   /* original -> final: the final names follow module order as well */
  sh_new_strdup(map);
  for (ptrdiff_t i = 0; i < arrlen(orig); i++) {
    snprintf(name, sizeof name, "%s.f%d", prefix, (int)i);
    shput(map, orig[i], strdup(name));
    free(orig[i]);
  }
  arrfree(orig);
  cc_rename_thunks(x, map);
  for (ptrdiff_t i = 0; i < shlen(map); i++) free(map[i].value);
  shfree(map);
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
  free(key);
  *out = k;
  return st;
}
