/* core.c — what every part stands on before it has a module: error messages (per thread,
   per context), the context's allocator, arenas and a string builder. The IR's other basics
   have files of their own: opfacts.c (the type and opcode tables and their facts), shape.c
   (shapes and the checked shape arithmetic), module.c (modules, computations,
   instructions), element.c (half precision and typed element access).

   Arenas: a list of blocks, each at least 64 KiB; allocations are bumped, zeroed and
   16-byte aligned; everything is freed at once with the module (or graph).

   Big blocks (>= 2 MiB: weights, activations, an executable's arena) from the default
   allocator are 2 MiB aligned and advised as transparent huge pages on Linux: kernels that
   walk a matrix down its rows touch a new 4 KiB page every few cache lines, and the TLB
   misses cost the M = 1 matmul ~10% of the memory bandwidth (0.84 -> 0.93 of a plain read
   on 2 threads, measured on Zen 5 where THP is "madvise"). A custom allocator is used as is. */
#include "ir.h"
#include <stdlib.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

/* stb_ds's implementation lives here (its implementation part sits outside the header guard,
   so this works also after ir.h has included the declarations). */
#define STB_DS_IMPLEMENTATION
#include <stb/stb_ds.h>

/* ---- errors and allocation ------------------------------------------------------------ */

const char *hlo_status_name(hj_status s) {
  static const char *names[HJ_STATUS_COUNT] = {
    "HJ_OK", "HJ_ERR_INVALID_ARG", "HJ_ERR_SHAPE", "HJ_ERR_PARSE", "HJ_ERR_UNSUPPORTED",
    "HJ_ERR_OOM", "HJ_ERR_IO", "HJ_ERR_BACKEND", "HJ_ERR_INTERNAL",
  };
  return (unsigned)s < HJ_STATUS_COUNT ? names[s] : "HJ_ERR_UNKNOWN";
}

/* The thread's slot, found through a one-entry cache (the context's serial: a context
   made at a freed one's address is another key) or under the context's lock: the thread's
   own slot, else a new one; past HJ__ERR_SLOTS threads (or out of memory) the context's
   shared slot. A slot belongs to its thread until the context goes. */
static _Thread_local struct { uint64_t serial; hj__errslot *slot; } hj__err_cache;

hj__errslot *hj__errslot_of(const hj_ctx_t *cctx) {
  hj_ctx_t *ctx = (hj_ctx_t *)cctx;
  if (hj__err_cache.serial == ctx->serial) return hj__err_cache.slot;
  pthread_t self = pthread_self();
  pthread_mutex_lock(&ctx->err_mu);
  int n = 0;
  hj__errslot *s = ctx->errs;
  for (; s && !pthread_equal(s->tid, self); s = s->next) n++;
  if (!s && n < HJ__ERR_SLOTS && (s = hj__alloc(ctx, sizeof *s))) {
    memset(s, 0, sizeof *s);
    s->tid = self;
    s->next = ctx->errs, ctx->errs = s;
  }
  pthread_mutex_unlock(&ctx->err_mu);
  if (!s) return &ctx->err_shared;
  hj__err_cache.serial = ctx->serial, hj__err_cache.slot = s;
  return s;
}

hj_status hj__err(hj_ctx_t *ctx, hj_status code, const char *fmt, ...) {
  if (!ctx) return code;
  hj__errslot *e = hj__errslot_of(ctx);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->err, sizeof e->err, fmt, ap);
  va_end(ap);
  e->last = code;
  return code;
}

void hj__err_save(const hj_ctx_t *ctx, hj__err_saved *s) {
  const hj__errslot *e = hj__errslot_of(ctx);
  s->last = e->last;
  memcpy(s->err, e->err, sizeof s->err);
}

void hj__err_restore(hj_ctx_t *ctx, const hj__err_saved *s) {
  hj__errslot *e = hj__errslot_of(ctx);
  e->last = s->last;
  memcpy(e->err, s->err, sizeof s->err);
}

void *hj__alloc(hj_ctx_t *ctx, size_t size) {
  if (size == 0) size = 1;
  if (ctx && ctx->opt.allocator.alloc)
    return ctx->opt.allocator.alloc(ctx->opt.allocator.user, size, 64);
  void *p = NULL;
  size = (size + 63) & ~(size_t)63;
  size_t huge = (size_t)2 << 20;
  if (posix_memalign(&p, size >= huge ? huge : 64, size) != 0) return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (size >= huge) (void)madvise(p, size, MADV_HUGEPAGE);   /* advice only: errors are fine */
#endif
  return p;
}

void hj__free(hj_ctx_t *ctx, void *p) {
  if (!p) return;
  if (ctx && ctx->opt.allocator.free) ctx->opt.allocator.free(ctx->opt.allocator.user, p);
  else free(p);
}

/* ---- arenas ----------------------------------------------------------------------------- */

struct hlo_arena_block {
  hlo_arena_block *next;
  size_t used, cap;
  _Alignas(16) unsigned char mem[];
};

void hlo_arena_init(hlo_arena *a, hj_ctx_t *ctx) {
  a->ctx = ctx;
  a->head = NULL;
}

void *hlo_arena_alloc(hlo_arena *a, size_t size) {
  size = (size + 15) & ~(size_t)15;
  hlo_arena_block *b = a->head;
  if (!b || b->cap - b->used < size) {
    size_t cap = size > 65536 ? size : 65536;
    b = hj__alloc(a->ctx, sizeof *b + cap);
    if (!b) return NULL;
    b->used = 0;
    b->cap = cap;
    b->next = a->head;
    a->head = b;
  }
  void *p = b->mem + b->used;
  b->used += size;
  memset(p, 0, size);
  return p;
}

void hlo_arena_free(hlo_arena *a) {
  for (hlo_arena_block *b = a->head, *n; b; b = n) {
    n = b->next;
    hj__free(a->ctx, b);
  }
  a->head = NULL;
}

/* ---- string builder --------------------------------------------------------------------- */

static void sb_vprintf(char **sb, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) return;
  size_t len = arrlenu(*sb);
  if (len) len--; /* overwrite the NUL */
  arrsetlen(*sb, len + (size_t)n + 1);
  vsnprintf(*sb + len, (size_t)n + 1, fmt, ap);
}

void sb_printf(char **sb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sb_vprintf(sb, fmt, ap);
  va_end(ap);
}

void sb_puts(char **sb, const char *s) { sb_printf(sb, "%s", s); }
