/* api/buffer.c — buffers whose storage hlojit did not allocate (hlojit.h: hj_buffer_wrap,
   hj_buffer_map_file, hj_buffer_view) and the reference counts every buffer carries
   (hj_buffer_retain, and the freeing half of hj_buffer_destroy).

   Kinds (api.h, hjb_kind): OWNED storage is hj__alloc'd by api.c (create, from_host, npy,
   run outputs); WRAPPED is the caller's memory, given back through its release callback;
   MAPPED is an mmap of a file region, unmapped at the end; a VIEW is a byte range of
   another buffer and holds one reference to it (a view of a view refers to the root, so
   chains stay one deep).

   Checks, once, where the buffer is made (the run only compares shapes): the element type
   and shape are valid and their byte count does not overflow; the data is aligned to the
   element size (the kernels' only assumption: natural alignment; emitters/ never mark a
   load or store more aligned than its element); the region is at least that large.
   Mapping: mmap needs a page-aligned file offset, so the mapping starts at the page holding
   |offset| and |data| points |offset % page| bytes into it; the data's alignment is then
   |offset|'s, which is why |offset| must be a multiple of the element size. */
#include "api.h"
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int64_t hj__buffer_bytes(hj_ctx_t *ctx, const char *fn, hj_dtype_t t, hj_shape_t s) {
  /* the shapes every other buffer and graph takes (no INT64_MIN to negate, at most 2^53
     elements), so the byte count below cannot overflow */
  const char *why = hj__shape_problem(t, s);
  if (why) {
    hj__err(ctx, HJ_ERR_INVALID_ARG, "%s: dtype %d and rank %d make no buffer shape: %s", fn, (int)t, s.rank, why);
    return -1;
  }
  return hj_shape_numel(s) * (int64_t)hj_dtype_size(t);
}

/* The struct of a buffer of |t|, |s| over |data| (one reference). */
static hj_buffer_t *hjb_new(hj_ctx_t *ctx, hj_dtype_t t, hj_shape_t s, void *data, size_t nbytes,
                            hjb_kind kind) {
  hj_buffer_t *b = hj__alloc(ctx, sizeof *b);
  if (!b) return NULL;
  memset(b, 0, sizeof *b);
  b->ctx = ctx;
  b->dtype = t;
  b->shape = s;
  b->nbytes = nbytes;
  b->data = data;
  b->kind = kind;
  atomic_init(&b->refs, 1);
  return b;
}

/* Alignment and size checks shared by wrap, map and view; |what| names the region. */
static hj_status hjb_check(hj_ctx_t *ctx, const char *fn, hj_dtype_t t, hj_shape_t s, uintptr_t at,
                           uint64_t have, const char *what, int64_t *need) {
  if ((*need = hj__buffer_bytes(ctx, fn, t, s)) < 0) return HJ_ERR_INVALID_ARG;
  size_t es = hj_dtype_size(t);
  char sh[160];
  hlo_shape hs;
  hj__shape_to_hlo(t, s, &hs);
  hlo_shape_str(&hs, sh, sizeof sh);
  if (at % es)
    return hj__err(ctx, HJ_ERR_INVALID_ARG, "%s: %s is at 0x%llx, not aligned to the %zu-byte "
                   "elements of %s (the kernels need natural alignment; 64 bytes is best)", fn, what,
                   (unsigned long long)at, es, sh);
  if (have < (uint64_t)*need)
    return hj__err(ctx, HJ_ERR_INVALID_ARG, "%s: %s has %llu bytes, %s needs %lld", fn, what,
                   (unsigned long long)have, sh, (long long)*need);
  return HJ_OK;
}

hj_status hj_buffer_wrap(hj_ctx_t *ctx, hj_dtype_t t, hj_shape_t s, void *data, size_t nbytes,
                         unsigned flags, hj_release_fn release, void *user, hj_buffer_t **out) {
  const char *fn = "hj_buffer_wrap";
  if (!out) return hj__err(ctx, HJ_ERR_INVALID_ARG, "%s: out is NULL", fn);
  *out = NULL;
  if (!ctx) return HJ_ERR_INVALID_ARG;
  if (!data) return hj__err(ctx, HJ_ERR_INVALID_ARG, "%s: data is NULL", fn);
  if (flags & ~(unsigned)HJ_BUFFER_READ_ONLY) return hj__err(ctx, HJ_ERR_INVALID_ARG, "%s: unknown flags 0x%x", fn, flags);
  int64_t need;
  hj_status st = hjb_check(ctx, fn, t, s, (uintptr_t)data, nbytes, "the memory", &need);
  if (st != HJ_OK) return st;
  hj_buffer_t *b = hjb_new(ctx, t, s, data, (size_t)need, HJB_WRAPPED);
  if (!b) return hj__err(ctx, HJ_ERR_OOM, "%s: out of memory", fn);
  b->release = release;
  b->user = user;
  b->read_only = flags & HJ_BUFFER_READ_ONLY;
  *out = b;
  return HJ_OK;
}

hj_status hj_buffer_map_file(hj_ctx_t *ctx, const char *path, uint64_t offset, hj_dtype_t t,
                             hj_shape_t s, hj_buffer_t **out) {
  const char *fn = "hj_buffer_map_file";
  if (!out) return hj__err(ctx, HJ_ERR_INVALID_ARG, "%s: out is NULL", fn);
  *out = NULL;
  if (!ctx) return HJ_ERR_INVALID_ARG;
  if (!path) return hj__err(ctx, HJ_ERR_INVALID_ARG, "%s: path is NULL", fn);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return hj__err(ctx, HJ_ERR_IO, "%s: cannot open '%s': %s", fn, path, strerror(errno));
  struct stat sb;
  hj_status st = HJ_OK;
  if (fstat(fd, &sb) != 0) st = hj__err(ctx, HJ_ERR_IO, "%s: cannot stat '%s': %s", fn, path, strerror(errno));
  else if (!S_ISREG(sb.st_mode)) st = hj__err(ctx, HJ_ERR_IO, "%s: '%s' is not a regular file", fn, path);
  uint64_t fsize = st == HJ_OK ? (uint64_t)sb.st_size : 0;
  char what[4200];
  snprintf(what, sizeof what, "'%.4000s' from offset %llu", path, (unsigned long long)offset);
  int64_t need = 0;
  if (st == HJ_OK && offset > fsize)   /* even for an empty region: it starts nowhere */
    st = hj__err(ctx, HJ_ERR_INVALID_ARG, "%s: offset %llu is past the end of '%s' (%llu bytes)", fn,
                 (unsigned long long)offset, path, (unsigned long long)fsize);
  if (st == HJ_OK)
    st = hjb_check(ctx, fn, t, s, (uintptr_t)offset, fsize - offset, what, &need);
  void *addr = NULL;
  size_t len = 0, page = (size_t)sysconf(_SC_PAGESIZE);
  uint64_t start = offset / page * page;
  if (st == HJ_OK && need > 0) {
    len = (size_t)(offset - start) + (size_t)need;
    addr = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, (off_t)start);
    if (addr == MAP_FAILED) {
      addr = NULL;
      st = hj__err(ctx, HJ_ERR_IO, "%s: cannot map %zu bytes of '%s': %s", fn, len, path, strerror(errno));
    }
  }
  close(fd);
  if (st != HJ_OK) return st;
  /* An empty region has nothing to map; any aligned non-NULL pointer will do. */
  static const uint64_t empty[1];
  void *data = addr ? (uint8_t *)addr + (offset - start) : (void *)empty;
  hj_buffer_t *b = hjb_new(ctx, t, s, data, (size_t)need, HJB_MAPPED);
  if (!b) {
    if (addr) munmap(addr, len);
    return hj__err(ctx, HJ_ERR_OOM, "%s: out of memory", fn);
  }
  b->read_only = true;
  b->map_addr = addr;
  b->map_len = len;
  *out = b;
  return HJ_OK;
}

hj_status hj_buffer_view(hj_buffer_t *base, size_t offset, hj_dtype_t t, hj_shape_t s,
                         hj_buffer_t **out) {
  const char *fn = "hj_buffer_view";
  hj_ctx_t *ctx = base ? base->ctx : NULL;
  if (!out) return hj__err(ctx, HJ_ERR_INVALID_ARG, "%s: out is NULL", fn);
  *out = NULL;
  if (!base) return HJ_ERR_INVALID_ARG;
  char what[96];
  snprintf(what, sizeof what, "the base buffer from byte %zu", offset);
  if (offset > base->nbytes)   /* even for an empty view: data + offset would point nowhere */
    return hj__err(ctx, HJ_ERR_INVALID_ARG, "%s: offset %zu is past the end of the base buffer (%zu bytes)", fn,
                   offset, base->nbytes);
  int64_t need;
  hj_status st = hjb_check(ctx, fn, t, s, (uintptr_t)base->data + offset, base->nbytes - offset, what, &need);
  if (st != HJ_OK) return st;
  hj_buffer_t *root = base->kind == HJB_VIEW ? base->base : base;
  hj_buffer_t *b = hjb_new(ctx, t, s, (uint8_t *)base->data + offset, (size_t)need, HJB_VIEW);
  if (!b) return hj__err(ctx, HJ_ERR_OOM, "%s: out of memory", fn);
  b->read_only = base->read_only;
  b->base = hj_buffer_retain(root);
  *out = b;
  return HJ_OK;
}

hj_buffer_t *hj_buffer_retain(hj_buffer_t *b) {
  if (b) atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
  return b;
}

bool hj_buffer_is_read_only(const hj_buffer_t *b) { return b && b->read_only; }

void hj_buffer_destroy(hj_buffer_t *b) {
  if (!b) return;
  if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) > 1) return;
  hj__buffer_free(b);
}

void hj__buffer_free(hj_buffer_t *b) {
  hj_ctx_t *ctx = b->ctx;
  switch (b->kind) {
  case HJB_OWNED: hj__buffer_free_data(b); break;
  case HJB_WRAPPED: if (b->release) b->release(b->user, b->data); break;
  case HJB_MAPPED: if (b->map_addr) munmap(b->map_addr, b->map_len); break;
  case HJB_VIEW: hj_buffer_destroy(b->base); break;
  }
  hj__free(ctx, b);
}

bool hj__buffer_fits(const hj_buffer_t *b, const hlo_shape *s) {
  if ((int)b->dtype != (int)s->type || b->shape.rank != s->rank) return false;
  for (int i = 0; i < s->rank; i++)
    if ((b->shape.dims[i] < 0 ? -b->shape.dims[i] : b->shape.dims[i]) != s->dims[i]) return false;
  return true;
}
