/* cuda_device.c — one device through an opened cuda_driver: its primary context, a stream,
   a cuBLAS handle, memory checked against what is free, modules loaded from PTX with the
   JIT's logs, launches (cuda_driver.h documents the calls).

   Invariants
   - The primary context (not cuCtxCreate): it is the one the CUDA runtime and other
     libraries in the process share, so buffers can be handed across.
   - Every allocation first asks cuMemGetInfo and is refused, with the figures, when it
     would leave less than dv->mem_headroom free (max(256 MiB, 2% of the card) by default:
     the context, cuBLAS's workspace and the JIT need room too). Managed memory beyond
     what the card holds does not fail; it pages, and on a busy GPU that can take minutes.
   - Prefetching is a hint: where the device or driver cannot, it does nothing and says
     HJ_OK; a failing prefetch that could run is an error like any other. */
#include "cuda_driver.h"
#include <stdlib.h>
#include <string.h>

#define MiB (1024.0 * 1024.0)
#define GiB (1024.0 * 1024.0 * 1024.0)

static hj_status cv_attr(cuda_device *dv, CUdevice_attribute a, const char *name, int *out,
                         cuda_error *e) {
  return cuda_check(dv->d, dv->d->cuDeviceGetAttribute(out, a, dv->dev), e,
                    "cuDeviceGetAttribute(%s, device %d)", name, dv->info.ordinal);
}

static hj_status cv_info(cuda_device *dv, cuda_error *e) {
  cuda_device_info *in = &dv->info;
  int managed = 0, concurrent = 0;
  struct { CUdevice_attribute a; const char *name; int *out; } attrs[] = {
#define CV_A(attr, field) { CU_DEVICE_ATTRIBUTE_##attr, #attr, field }
    CV_A(COMPUTE_CAPABILITY_MAJOR, &in->cc_major),
    CV_A(COMPUTE_CAPABILITY_MINOR, &in->cc_minor),
    CV_A(MULTIPROCESSOR_COUNT, &in->sm_count),
    CV_A(MAX_THREADS_PER_BLOCK, &in->max_threads_per_block),
    CV_A(MAX_SHARED_MEMORY_PER_BLOCK, &in->shared_per_block),
    CV_A(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &in->shared_per_block_optin),
    CV_A(MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, &in->shared_per_sm),
    CV_A(MANAGED_MEMORY, &managed),
    CV_A(CONCURRENT_MANAGED_ACCESS, &concurrent),
#undef CV_A
  };
  for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
    hj_status st = cv_attr(dv, attrs[i].a, attrs[i].name, attrs[i].out, e);
    if (st != HJ_OK) return st;
  }
  in->managed = managed != 0;
  in->concurrent_managed = concurrent != 0;
  hj_status st = cuda_check(dv->d, dv->d->cuDeviceGetName(in->name, sizeof in->name, dv->dev), e,
                            "cuDeviceGetName(device %d)", in->ordinal);
  if (st == HJ_OK)
    st = cuda_check(dv->d, dv->d->cuDeviceTotalMem(&in->total_mem, dv->dev), e,
                    "cuDeviceTotalMem(device %d)", in->ordinal);
  in->name[sizeof in->name - 1] = 0;
  return st;
}

static void cv_blas(cuda_device *dv) {
  cuda_driver *d = dv->d;
  if (!d->blas_lib) { snprintf(dv->blas_why, sizeof dv->blas_why, "%s", d->blas_why); return; }
  cuda_error e;
  hj_status st = cuda_blas_check(d, d->cublasCreate_v2(&dv->blas), &e, "cublasCreate_v2");
  if (st == HJ_OK)
    st = cuda_blas_check(d, d->cublasSetStream_v2(dv->blas, dv->stream), &e, "cublasSetStream_v2");
  /* f32 stays f32 (no TF32) unless a caller opts in with cublasSetMathMode */
  if (st == HJ_OK)
    st = cuda_blas_check(d, d->cublasSetMathMode(dv->blas, CUBLAS_DEFAULT_MATH), &e,
                         "cublasSetMathMode(CUBLAS_DEFAULT_MATH)");
  if (st == HJ_OK)
    st = cuda_blas_check(d, d->cublasGetVersion_v2(dv->blas, &dv->blas_version), &e,
                         "cublasGetVersion_v2");
  if (st != HJ_OK) {
    snprintf(dv->blas_why, sizeof dv->blas_why, "cuBLAS unavailable: %.480s", e.msg);
    if (dv->blas) d->cublasDestroy_v2(dv->blas);
    dv->blas = NULL;
  }
}

hj_status cuda_device_open(cuda_driver *d, int ordinal, cuda_device **out, cuda_error *e) {
  *out = NULL;
  if (ordinal < 0 || ordinal >= d->device_count)
    return cuda_error_set(e, HJ_ERR_INVALID_ARG, "CUDA device %d: the driver has %d", ordinal,
                          d->device_count);
  cuda_device *dv = calloc(1, sizeof *dv);
  if (!dv) return cuda_error_set(e, HJ_ERR_OOM, "cuda_device_open: out of host memory");
  dv->d = d;
  dv->info.ordinal = ordinal;
  hj_status st = cuda_check(d, d->cuDeviceGet(&dv->dev, ordinal), e, "cuDeviceGet(%d)", ordinal);
  if (st == HJ_OK)
    st = cuda_check(d, d->cuDevicePrimaryCtxRetain(&dv->ctx, dv->dev), e,
                    "cuDevicePrimaryCtxRetain(device %d)", ordinal);
  if (st == HJ_OK)
    st = cuda_check(d, d->cuCtxSetCurrent(dv->ctx), e, "cuCtxSetCurrent(device %d)", ordinal);
  if (st == HJ_OK) st = cv_info(dv, e);
  if (st == HJ_OK)
    st = cuda_check(d, d->cuStreamCreate(&dv->stream, CU_STREAM_NON_BLOCKING), e,
                    "cuStreamCreate(device %d)", ordinal);
  if (st == HJ_OK) {
    size_t two_percent = dv->info.total_mem / 50;
    dv->mem_headroom = two_percent > (256u << 20) ? two_percent : (256u << 20);
    cv_blas(dv);
    *out = dv;
  } else {
    cuda_device_close(dv);
  }
  return st;
}

void cuda_device_close(cuda_device *dv) {
  if (!dv) return;
  cuda_driver *d = dv->d;
  /* Errors here have no one to go to; the process may be exiting with the GPU in error. */
  if (dv->ctx) d->cuCtxSetCurrent(dv->ctx);
  if (dv->blas) d->cublasDestroy_v2(dv->blas);
  if (dv->stream) d->cuStreamDestroy(dv->stream);
  if (dv->ctx) d->cuDevicePrimaryCtxRelease(dv->dev);
  free(dv);
}

hj_status cuda_device_bind(cuda_device *dv, cuda_error *e) {
  return cuda_check(dv->d, dv->d->cuCtxSetCurrent(dv->ctx), e, "cuCtxSetCurrent(device %d)",
                    dv->info.ordinal);
}

hj_status cuda_device_sync(cuda_device *dv, cuda_error *e) {
  return cuda_check(dv->d, dv->d->cuStreamSynchronize(dv->stream), e, "cuStreamSynchronize");
}

void cuda_device_describe(const cuda_device *dv, char *buf, size_t n) {
  snprintf(buf, n, "%s, compute capability %d.%d, %d SMs, %.1f GiB%s", dv->info.name,
           dv->info.cc_major, dv->info.cc_minor, dv->info.sm_count, dv->info.total_mem / GiB,
           dv->info.concurrent_managed ? "" : ", no concurrent managed access");
}

/* ---- memory ------------------------------------------------------------------------------ */
static hj_status cv_fits(cuda_device *dv, size_t bytes, const char *kind, cuda_error *e) {
  size_t free_b = 0, total_b = 0;
  hj_status st = cuda_check(dv->d, dv->d->cuMemGetInfo(&free_b, &total_b), e, "cuMemGetInfo");
  if (st != HJ_OK) return st;
  if (free_b >= dv->mem_headroom && bytes <= free_b - dv->mem_headroom) return HJ_OK;
  return cuda_error_set(e, HJ_ERR_OOM,
                        "%s allocation of %.1f MiB refused: device %d has %.1f MiB free of "
                        "%.1f MiB and keeps %.1f MiB in reserve (managed memory beyond the "
                        "card can stall the GPU rather than fail)",
                        kind, bytes / MiB, dv->info.ordinal, free_b / MiB, total_b / MiB,
                        dv->mem_headroom / MiB);
}

hj_status cuda_mem_alloc_managed(cuda_device *dv, size_t bytes, CUdeviceptr *out, cuda_error *e) {
  *out = 0;
  hj_status st = cv_fits(dv, bytes, "managed", e);
  if (st != HJ_OK) return st;
  return cuda_check(dv->d, dv->d->cuMemAllocManaged(out, bytes ? bytes : 1, CU_MEM_ATTACH_GLOBAL),
                    e, "cuMemAllocManaged(%zu bytes)", bytes);
}

hj_status cuda_mem_alloc(cuda_device *dv, size_t bytes, CUdeviceptr *out, cuda_error *e) {
  *out = 0;
  hj_status st = cv_fits(dv, bytes, "device", e);
  if (st != HJ_OK) return st;
  return cuda_check(dv->d, dv->d->cuMemAlloc(out, bytes ? bytes : 1), e, "cuMemAlloc(%zu bytes)",
                    bytes);
}

hj_status cuda_mem_free(cuda_device *dv, CUdeviceptr p, cuda_error *e) {
  if (!p) return HJ_OK;
  return cuda_check(dv->d, dv->d->cuMemFree(p), e, "cuMemFree(0x%llx)", (unsigned long long)p);
}

hj_status cuda_mem_prefetch(cuda_device *dv, CUdeviceptr p, size_t bytes, bool to_device,
                            cuda_error *e) {
  cuda_driver *d = dv->d;
  if (!p || !bytes || !dv->info.concurrent_managed) return HJ_OK;
  const char *where = to_device ? "device" : "host";
  if (d->cuMemPrefetchAsync) {
    CUmemLocation loc = { to_device ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST,
                          to_device ? dv->dev : 0 };
    return cuda_check(d, d->cuMemPrefetchAsync(p, bytes, loc, 0, dv->stream), e,
                      "cuMemPrefetchAsync(%zu bytes to the %s)", bytes, where);
  }
  if (d->cuMemPrefetchAsync_v1)
    return cuda_check(d, d->cuMemPrefetchAsync_v1(p, bytes, to_device ? dv->dev : CU_DEVICE_CPU,
                                                  dv->stream),
                      e, "cuMemPrefetchAsync (v1, %zu bytes to the %s)", bytes, where);
  return HJ_OK;
}

/* ---- modules and launches ---------------------------------------------------------------- */
hj_status cuda_module_load(cuda_device *dv, const char *ptx, const char *what, CUmodule *out,
                           cuda_error *e) {
  *out = NULL;
  enum { LOG = 8192 };
  char *errlog = calloc(1, LOG), *infolog = calloc(1, LOG);
  if (!errlog || !infolog) {
    free(errlog);
    free(infolog);
    return cuda_error_set(e, HJ_ERR_OOM, "cuda_module_load: out of host memory");
  }
  CUjit_option opts[] = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                          CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES };
  void *vals[] = { errlog, (void *)(uintptr_t)LOG, infolog, (void *)(uintptr_t)LOG };
  CUresult r = dv->d->cuModuleLoadDataEx(out, ptx, 4, opts, vals);
  hj_status st = HJ_OK;
  if (r != CUDA_SUCCESS) {
    *out = NULL;
    errlog[LOG - 1] = infolog[LOG - 1] = 0;
    const char *log = errlog[0] ? errlog : infolog;
    size_t n = strlen(log);   /* trimmed of its trailing newlines */
    while (n && (log[n - 1] == '\n' || log[n - 1] == ' ')) n--;
    st = cuda_check(dv->d, r, e, "cuModuleLoadDataEx(%s)", what);
    if (e && n) {
      size_t len = strlen(e->msg);
      snprintf(e->msg + len, sizeof e->msg - len, "; JIT log: %.*s", (int)n, log);
    }
  }
  free(errlog);
  free(infolog);
  return st;
}

hj_status cuda_module_function(cuda_device *dv, CUmodule m, const char *name, CUfunction *out,
                               cuda_error *e) {
  *out = NULL;
  return cuda_check(dv->d, dv->d->cuModuleGetFunction(out, m, name), e,
                    "cuModuleGetFunction(%s)", name);
}

hj_status cuda_module_unload(cuda_device *dv, CUmodule m, cuda_error *e) {
  if (!m) return HJ_OK;
  return cuda_check(dv->d, dv->d->cuModuleUnload(m), e, "cuModuleUnload");
}

hj_status cuda_func_allow_shared(cuda_device *dv, CUfunction f, const char *name, int bytes,
                                 cuda_error *e) {
  if (bytes > dv->info.shared_per_block_optin)
    return cuda_error_set(e, HJ_ERR_UNSUPPORTED,
                          "kernel %s needs %d bytes of shared memory; device %d allows %d",
                          name, bytes, dv->info.ordinal, dv->info.shared_per_block_optin);
  if (bytes <= dv->info.shared_per_block) return HJ_OK;
  return cuda_check(dv->d,
                    dv->d->cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                              bytes),
                    e, "cuFuncSetAttribute(%s, MAX_DYNAMIC_SHARED_SIZE_BYTES, %d)", name, bytes);
}

hj_status cuda_launch(cuda_device *dv, CUfunction f, const char *name, const unsigned grid[3],
                      const unsigned block[3], unsigned shared_bytes, void **params,
                      cuda_error *e) {
  return cuda_check(dv->d,
                    dv->d->cuLaunchKernel(f, grid[0], grid[1], grid[2], block[0], block[1],
                                          block[2], shared_bytes, dv->stream, params, NULL),
                    e, "cuLaunchKernel(%s, grid %ux%ux%u, block %ux%ux%u, %u bytes shared)",
                    name, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared_bytes);
}
