/* cuda_code_cache.c — the CUDA backend's PTX cache: an executable's LLVM module is turned
   into PTX (libdevice, O3, NVPTX: most of a GPU compile's time) once per key, kept in memory
   for the context and stored on disk (runtime/disk_cache.c, the directory the CPU backend's
   code uses) for the next process. cuda_exec.h declares it; cb_module_finish uses it.

   The key (runtime/code_key.c): the emitted IR before libdevice and O3, hashed as it is —
   the backend names a module's kernels per module ("hjk_0", ...), so the same module has the
   same names in every process and nothing is renamed — plus the code's identity
   (cuda_codegen_code_id: LLVM version, arch, PTX ISA, libdevice's file). The PTX depends on
   nothing else, so a hit is the PTX a compile would make.

   A lookup tries memory (HJ_CODE_MEMORY), then disk (HJ_CODE_DISK); a miss compiles. The
   caller loads the PTX with the driver and only then stores it (cub_cc_put): PTX the driver
   refused never enters the cache. A cached PTX the driver refuses (a newer driver's
   complaint, say) is dropped from memory and disk (cub_cc_drop) and compiled afresh. Disk
   problems are misses, never errors: the context's error is left as it was. Up to CUC_KEEP
   texts stay in memory, least recently used first out. */
#include "cuda_exec.h"
#include <stdlib.h>

enum { CUC_KEEP = 32 };

typedef struct cuc_text { char digest[33]; char *ptx; uint64_t last_use; } cuc_text;

struct cub_cc {
  hj_ctx_t *ctx;
  rt_dcache *disk;                   /* NULL: off */
  cuc_text *mem;                      /* stb_ds */
  uint64_t tick;
  pthread_mutex_t mu;
};

hj_status cub_cc_create(hj_ctx_t *ctx, cub_cc **out) {
  *out = NULL;
  cub_cc *c = calloc(1, sizeof *c);
  if (!c) return hj__err(ctx, HJ_ERR_OOM, "CUDA backend: out of memory");
  c->ctx = ctx;
  pthread_mutex_init(&c->mu, NULL);
  hj_status st = rt_dcache_open(ctx, ctx->opt.cache_dir, 0, &c->disk);
  if (st != HJ_OK) {
    cub_cc_destroy(c);
    return st;
  }
  *out = c;
  return HJ_OK;
}

void cub_cc_destroy(cub_cc *c) {
  if (!c) return;
  for (ptrdiff_t i = 0; i < arrlen(c->mem); i++) free(c->mem[i].ptx);
  arrfree(c->mem);
  rt_dcache_close(c->disk);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

static ptrdiff_t cuc_find(cub_cc *c, const char *digest) {
  for (ptrdiff_t i = 0; i < arrlen(c->mem); i++)
    if (strcmp(c->mem[i].digest, digest) == 0) return i;
  return -1;
}

/* Runs |call| on the disk cache without touching the context's error. */
#define CUC_QUIET(c, call)              \
  do {                                  \
    hj__err_saved saved_;               \
    hj__err_save((c)->ctx, &saved_);    \
    call;                               \
    hj__err_restore((c)->ctx, &saved_); \
  } while (0)

hj_status cub_cc_lookup(cub_cc *c, cuda_codegen *cg, LLVMModuleRef mod, rt_code_key *key, char **ptx,
                        int *source) {
  *ptx = NULL;
  *source = HJ_CODE_COMPILED;
  char id[1400];
  cuda_codegen_code_id(cg, id, sizeof id);
  hj_status st = rt_code_key_make_named(c->ctx, mod, id, key);
  if (st != HJ_OK) return st;
  pthread_mutex_lock(&c->mu);
  ptrdiff_t i = cuc_find(c, key->digest);
  if (i >= 0) {
    *ptx = strdup(c->mem[i].ptx);
    c->mem[i].last_use = ++c->tick;
    *source = HJ_CODE_MEMORY;
  }
  pthread_mutex_unlock(&c->mu);
  void *p = NULL;
  size_t n = 0;
  bool hit = false;
  if (!*ptx && c->disk) CUC_QUIET(c, hit = rt_dcache_get(c->disk, key->key, key->len, &p, &n, NULL, 0));
  if (hit) {   /* PTX is text: one that holds a NUL is not ours */
    if (n > 0 && !memchr(p, 0, n) && (*ptx = malloc(n + 1))) {
      memcpy(*ptx, p, n);
      (*ptx)[n] = 0;
      *source = HJ_CODE_DISK;
    }
    free(p);
  }
  if (*source != HJ_CODE_COMPILED && !*ptx) return hj__err(c->ctx, HJ_ERR_OOM, "CUDA backend: out of memory");
  return HJ_OK;
}

void cub_cc_put(cub_cc *c, const rt_code_key *key, const char *ptx, int source) {
  if (source == HJ_CODE_COMPILED && c->disk) CUC_QUIET(c, rt_dcache_put(c->disk, key->key, key->len, ptx, strlen(ptx)));
  pthread_mutex_lock(&c->mu);
  ptrdiff_t i = cuc_find(c, key->digest);
  char *copy = i < 0 ? strdup(ptx) : NULL;
  if (i >= 0) {
    c->mem[i].last_use = ++c->tick;
  } else if (copy) {
    cuc_text t = { .ptx = copy, .last_use = ++c->tick };
    memcpy(t.digest, key->digest, sizeof t.digest);
    arrput(c->mem, t);
  }
  while (arrlen(c->mem) > CUC_KEEP) {   /* least recently used out */
    ptrdiff_t lru = 0;
    for (ptrdiff_t k = 1; k < arrlen(c->mem); k++)
      if (c->mem[k].last_use < c->mem[lru].last_use) lru = k;
    free(c->mem[lru].ptx);
    arrdel(c->mem, lru);
  }
  pthread_mutex_unlock(&c->mu);
}

void cub_cc_drop(cub_cc *c, const rt_code_key *key) {
  pthread_mutex_lock(&c->mu);
  ptrdiff_t i = cuc_find(c, key->digest);
  if (i >= 0) {
    free(c->mem[i].ptx);
    arrdel(c->mem, i);
  }
  pthread_mutex_unlock(&c->mu);
  if (!c->disk) return;
  char path[4096];
  rt_dcache_entry_path(c->disk, key->key, key->len, path, sizeof path);
  remove(path);
}
