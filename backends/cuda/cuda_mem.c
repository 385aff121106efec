/* cuda_mem.c — the CUDA backend's managed memory (cuda_exec.h): every allocation it makes
   (the context's buffers, executables' arenas, constants and staging copies) is managed
   memory (cuMemAllocManaged), checked against cuMemGetInfo first (cuda_mem_alloc_managed
   refuses, with the figures, what would not fit), and registered here, so that a run can
   tell our memory (used in place) from the caller's (staged).

   Residency: managed pages migrate on first touch, which on a GPU is a page fault per page.
   Each allocation carries |on_host|: set when it is made (the host is about to fill it) and
   when the host asks for it (hj_buffer_host_ptr -> cub_to_host, which prefetches it to the
   host after the stream's work); a run prefetches every allocation it uses that is marked,
   before its launches, and clears the mark. Weights uploaded once are prefetched once;
   steady-state runs take no page faults. The prefetch is a hint: a device without
   concurrent managed access, or a driver without cuMemPrefetchAsync, just migrates on
   touch (cuda_mem_prefetch does nothing there).

   The registry is an stb_ds array sorted by base address (binary search), under s->mu. */
#include "cuda_exec.h"
#include <stdlib.h>

hj_status cub_err(hj_ctx_t *ctx, const cuda_error *e) {
  return hj__err(ctx, e->status != HJ_OK ? e->status : HJ_ERR_BACKEND, "%s", e->msg);
}

/* First index whose base is > |p| (the allocation holding p, if any, is the one before). */
static ptrdiff_t cm_upper(const cub_state *s, uintptr_t p) {
  ptrdiff_t lo = 0, hi = arrlen(s->allocs);
  while (lo < hi) {
    ptrdiff_t mid = (lo + hi) / 2;
    if (s->allocs[mid].base <= p) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

cub_alloc *cub_find(cub_state *s, const void *p, size_t bytes) {
  uintptr_t a = (uintptr_t)p;
  ptrdiff_t i = cm_upper(s, a) - 1;
  if (i < 0) return NULL;
  cub_alloc *al = &s->allocs[i];
  size_t n = al->bytes ? al->bytes : 1;
  return a >= al->base && a - al->base + bytes <= n ? al : NULL;
}

hj_status cub_alloc_managed(cub_state *s, size_t bytes, void **out) {
  *out = NULL;
  cuda_error e;
  CUdeviceptr p = 0;
  pthread_mutex_lock(&s->mu);
  hj_status st = cuda_device_bind(s->dv, &e);
  if (st == HJ_OK) st = cuda_mem_alloc_managed(s->dv, bytes, &p, &e);
  if (st == HJ_OK) {
    cub_alloc al = { (uintptr_t)p, bytes, true };
    ptrdiff_t at = cm_upper(s, al.base);   /* arrins evaluates its index twice */
    arrins(s->allocs, at, al);
  }
  pthread_mutex_unlock(&s->mu);
  if (st != HJ_OK) return cub_err(s->ctx, &e);
  *out = (void *)(uintptr_t)p;
  return HJ_OK;
}

void cub_free_managed(cub_state *s, void *p) {
  if (!p) return;
  pthread_mutex_lock(&s->mu);
  ptrdiff_t i = cm_upper(s, (uintptr_t)p) - 1;
  if (i >= 0 && s->allocs[i].base == (uintptr_t)p) {
    arrdel(s->allocs, i);
    cuda_error e;
    /* the stream may still read it: freeing managed memory waits for the device anyway */
    if (cuda_device_bind(s->dv, &e) == HJ_OK) cuda_mem_free(s->dv, (CUdeviceptr)(uintptr_t)p, &e);
  }
  pthread_mutex_unlock(&s->mu);
}

hj_status cub_to_device(cub_state *s, const void *p, size_t bytes) {
  cub_alloc *al = cub_find(s, p, bytes);
  if (!al || !al->on_host) return HJ_OK;
  cuda_error e;
  al->on_host = false;
  if (cuda_mem_prefetch(s->dv, (CUdeviceptr)al->base, al->bytes, true, &e) != HJ_OK)
    return cub_err(s->ctx, &e);
  return HJ_OK;
}

void cub_to_host(cub_state *s, const void *p, size_t bytes) {
  pthread_mutex_lock(&s->mu);
  cub_alloc *al = cub_find(s, p, bytes);
  cuda_error e;
  if (al && cuda_device_bind(s->dv, &e) == HJ_OK) {
    if (!al->on_host) cuda_mem_prefetch(s->dv, (CUdeviceptr)al->base, al->bytes, false, &e);
    al->on_host = true;
    cuda_device_sync(s->dv, &e);   /* the host reads next: the device's writes first */
  }
  pthread_mutex_unlock(&s->mu);
}
