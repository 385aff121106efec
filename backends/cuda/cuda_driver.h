/* cuda_driver.h — the CUDA driver API and cuBLAS, opened with dlopen at run time (no -lcuda,
   no -lcublas, no cuda.h): the one place that talks to libcuda.so.1 and libcublas.so.

   Life of a run:
     cuda_driver_options o; cuda_driver_options_init(&o);
     cuda_driver *d; cuda_error e;
     if (cuda_driver_open(&o, &d, &e) != HJ_OK) -> e.msg says why ("no CUDA device: ...")
     cuda_device *dv; cuda_device_open(d, 0, &dv, &e);     // primary context, a stream, cuBLAS
     cuda_mem_alloc_managed(dv, bytes, &p, &e);            // refused when it would not fit
     cuda_module_load(dv, ptx, "fusion.3", &mod, &e);      // the JIT log is in e.msg on failure
     cuda_module_function(dv, mod, "fusion_3", &fn, &e);
     cuda_launch(dv, fn, "fusion_3", grid, block, 0, params, &e);
     cuda_device_sync(dv, &e);
     cuda_device_close(dv); cuda_driver_close(d);

   Invariants
   - Every driver and cuBLAS error becomes a message naming the call that failed and the
     driver's own error name and string: "cuModuleLoadDataEx(fusion.3): CUDA_ERROR_INVALID_PTX
     (a PTX JIT compilation failed); JIT log: ptxas application ptx input, line 12; error ..."
     (tinygrad's check()). Out of memory is HJ_ERR_OOM, any other driver error HJ_ERR_BACKEND.
   - cuda_driver_open never crashes on a machine without CUDA: a missing or unloadable
     libcuda.so.1, the toolkit's stub library (cuInit returns CUDA_ERROR_STUB_LIBRARY), cuInit
     failing, no device, a driver lacking a required entry point — each is HJ_ERR_UNSUPPORTED
     with a message starting "no CUDA device: ", which is what backend selection shows when
     AUTO falls back to the CPU.
   - Entry points are resolved by (name, ABI version) with cuGetProcAddress_v2, or by the
     versioned symbol (cuMemAlloc_v2) with dlsym where the driver predates it; see
     cuda_api.h. Optional ones may be NULL: graphs need all of CUDA_API_GRAPH_FUNCS
     (d->has_graphs); prefetching needs either cuMemPrefetchAsync ABI (d->has_prefetch).
   - cuBLAS is optional: when it does not load, d->blas_lib is NULL and d->blas_why says why;
     the tiled matmul kernel does not need it.
   - Library paths: $HLOJIT_LIBCUDA and $HLOJIT_LIBCUBLAS replace the defaults (that is how
     tests load the test double, tests/cuda_double).
   Threads: a cuda_driver is read-only after open and may be shared; a cuda_device (its
   stream and cuBLAS handle) belongs to one thread at a time. */
#ifndef HLOJIT_CUDA_DRIVER_H
#define HLOJIT_CUDA_DRIVER_H

#include "cuda_api.h"
#include "cuda_error.h"
#include <stdbool.h>

typedef struct cuda_driver_options {
  const char *libcuda;     /* NULL: $HLOJIT_LIBCUDA, else "libcuda.so.1" */
  const char *libcublas;   /* NULL: $HLOJIT_LIBCUBLAS, else "libcublas.so.13", then ".12" */
  bool load_cublas;        /* default true */
} cuda_driver_options;
void cuda_driver_options_init(cuda_driver_options *o);

typedef struct cuda_driver {
  void *lib;               /* dlopen handle of libcuda */
  char lib_path[512];      /* as given to dlopen */
  int version;             /* cuDriverGetVersion: 13000 for CUDA 13.0 */
  int device_count;        /* >= 1 after a successful open */
  bool via_getproc;        /* entry points came from cuGetProcAddress_v2 (else dlsym) */
  bool has_graphs, has_prefetch;
  char missing[512];       /* optional entry points the driver lacks, "" when none */
  /* the driver's entry points: d->cuMemAlloc(&p, n) */
#define CUDA_DRIVER_MEMBER_(name, version, symbol, required, params) cuda_pfn_##name name;
#define CUDA_DRIVER_LEGACY_MEMBER_(member, name, version, symbol, required, params) \
  cuda_pfn_##member member;
  CUDA_API_BOOT_FUNCS(CUDA_DRIVER_MEMBER_)
  CUDA_API_DRIVER_FUNCS(CUDA_DRIVER_MEMBER_)
  CUDA_API_LEGACY_FUNCS(CUDA_DRIVER_LEGACY_MEMBER_)
  /* cuBLAS */
  void *blas_lib;          /* NULL: not loaded, blas_why says why */
  char blas_path[512];
  char blas_why[512];
#define CUDA_DRIVER_BLAS_MEMBER_(ret, symbol, required, params) cuda_pfn_##symbol symbol;
  CUDA_API_CUBLAS_FUNCS(CUDA_DRIVER_BLAS_MEMBER_)
#undef CUDA_DRIVER_MEMBER_
#undef CUDA_DRIVER_LEGACY_MEMBER_
#undef CUDA_DRIVER_BLAS_MEMBER_
} cuda_driver;

/* Opens the driver (dlopen, cuInit, every entry point, device count) and, when asked,
   cuBLAS. *out is NULL on failure; free with cuda_driver_close (NULL is fine). */
hj_status cuda_driver_open(const cuda_driver_options *o, cuda_driver **out, cuda_error *e);
void cuda_driver_close(cuda_driver *d);
/* One line for logs: "CUDA driver 13.0 (libcuda.so.1, cuGetProcAddress), 1 device;
   cuBLAS libcublas.so.13; graphs on". */
void cuda_driver_describe(const cuda_driver *d, char *buf, size_t n);

/* HJ_OK when |r| is CUDA_SUCCESS; else the message "<what>: <NAME> (<string>)", |what|
   formatted from |fmt|. The error names come from the driver (cuGetErrorName/String), or
   from cuda_api.h's list when it cannot say. */
hj_status cuda_check(const cuda_driver *d, CUresult r, cuda_error *e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
hj_status cuda_blas_check(const cuda_driver *d, cublasStatus_t s, cuda_error *e,
                          const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* "CUDA_ERROR_OUT_OF_MEMORY"; |d| may be NULL (our list), unknown values "CUresult 12345". */
const char *cuda_result_name(const cuda_driver *d, CUresult r, char *buf, size_t n);

/* ---- one device: its primary context, one non-blocking stream, a cuBLAS handle ---------- */
typedef struct cuda_device_info {
  int ordinal;
  char name[256];
  int cc_major, cc_minor;
  int sm_count;
  int max_threads_per_block;
  int shared_per_block;        /* bytes without opting in (48 KiB) */
  int shared_per_block_optin;  /* bytes with CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
  int shared_per_sm;
  bool managed, concurrent_managed;  /* managed memory; prefetch and concurrent access */
  size_t total_mem;
} cuda_device_info;

typedef struct cuda_device {
  cuda_driver *d;
  CUdevice dev;
  CUcontext ctx;               /* the primary context, retained */
  CUstream stream;
  cublasHandle_t blas;         /* NULL when cuBLAS is not loaded or would not start */
  int blas_version;            /* cublasGetVersion: 130100 */
  char blas_why[512];          /* why |blas| is NULL */
  cuda_device_info info;
  size_t mem_headroom;         /* bytes every allocation leaves free (cuda_mem_alloc*) */
} cuda_device;

/* Retains device |ordinal|'s primary context, makes it current on this thread, creates a
   stream and (when cuBLAS loaded) a cuBLAS handle bound to it. *out NULL on failure. */
hj_status cuda_device_open(cuda_driver *d, int ordinal, cuda_device **out, cuda_error *e);
void cuda_device_close(cuda_device *dv);   /* NULL is fine; makes its context current first */
/* Makes |dv|'s context current on the calling thread (cuda_device_open did so on its own
   thread); needed before driver calls from any other thread. */
hj_status cuda_device_bind(cuda_device *dv, cuda_error *e);
hj_status cuda_device_sync(cuda_device *dv, cuda_error *e);   /* the stream */
/* "NVIDIA H200, compute capability 9.0, 132 SMs, 139.8 GiB" */
void cuda_device_describe(const cuda_device *dv, char *buf, size_t n);

/* ---- memory -------------------------------------------------------------------------------- */
/* Allocations are checked against cuMemGetInfo first and refused (HJ_ERR_OOM, nothing
   allocated) when |bytes| + dv->mem_headroom exceeds the free memory: oversubscribed
   managed memory can stall the GPU for minutes rather than fail. */
hj_status cuda_mem_alloc_managed(cuda_device *dv, size_t bytes, CUdeviceptr *out, cuda_error *e);
hj_status cuda_mem_alloc(cuda_device *dv, size_t bytes, CUdeviceptr *out, cuda_error *e);
hj_status cuda_mem_free(cuda_device *dv, CUdeviceptr p, cuda_error *e);   /* 0 is fine */
/* Prefetches managed memory to the device (|to_device|) or to the host, on the stream;
   HJ_OK doing nothing where the device cannot (no concurrent managed access, or neither
   prefetch ABI in the driver). */
hj_status cuda_mem_prefetch(cuda_device *dv, CUdeviceptr p, size_t bytes, bool to_device,
                            cuda_error *e);

/* ---- modules and launches ----------------------------------------------------------------- */
/* Loads |ptx| (NUL-terminated PTX text); |what| names it in messages. On failure the
   message carries the JIT's error log (and its info log when the error log is empty). */
hj_status cuda_module_load(cuda_device *dv, const char *ptx, const char *what, CUmodule *out,
                           cuda_error *e);
hj_status cuda_module_function(cuda_device *dv, CUmodule m, const char *name, CUfunction *out,
                               cuda_error *e);
hj_status cuda_module_unload(cuda_device *dv, CUmodule m, cuda_error *e);   /* NULL is fine */
/* Lets |f| take |bytes| of dynamic shared memory: needed once per function above 48 KiB
   (eager launches and graph nodes alike). Refused when the device has less (optin). */
hj_status cuda_func_allow_shared(cuda_device *dv, CUfunction f, const char *name, int bytes,
                                 cuda_error *e);
/* cuLaunchKernel on dv->stream; |name| is for the message. */
hj_status cuda_launch(cuda_device *dv, CUfunction f, const char *name, const unsigned grid[3],
                      const unsigned block[3], unsigned shared_bytes, void **params,
                      cuda_error *e);

#endif /* HLOJIT_CUDA_DRIVER_H */
