/* cuda_double.h — the control interface of the CUDA *test double* (libcuda_double.so).

   The double is a small shared library that exports the CUDA driver and cuBLAS entry
   points hlojit uses (the symbols of backends/cuda/cuda_api.h's lists, with their ABIs) so
   that the backend's host side can be driven through its real dlopen path
   (HLOJIT_LIBCUDA=.../libcuda_double.so, HLOJIT_LIBCUBLAS=the same file) on a machine with
   no GPU. It proves plumbing, not kernels: "device" memory is host memory, kernels never
   run (a launch is recorded, with its arguments), and cuBLAS gemms are computed naively on
   the host so that argument mapping can be checked.

   Scripting: a test dlopens the same file (so it shares the double's state with the
   backend) and looks these functions up with dlsym; or, for programs run from a shell, the
   same keys are read from the environment by cuda_double_reset as CUDA_DOUBLE_<KEY>
   (upper case): CUDA_DOUBLE_DEVICE_COUNT=0.

   Numeric keys (cuda_double_set) and their defaults:
     device_count 1          cuDeviceGetCount
     init_error 0            cuInit's result (34: the stub library, 100: no device)
     driver_version 13000    cuDriverGetVersion; below 12000 the loader must use dlsym
     cc_major 9, cc_minor 0, sm_count 132, shared_optin 232448, concurrent_managed 1
     total_mem 80 GiB        cuDeviceTotalMem / cuMemGetInfo's total
     free_mem -1             cuMemGetInfo's free; -1: total minus what is allocated
     module_load_error 0     cuModuleLoadDataEx's result; the JIT log is jit_log
     launch_error 0          the result of launches once launch_ok_count have succeeded
     launch_ok_count 0
     blas_create_error 0     cublasCreate_v2's result
   String keys (cuda_double_set_str):
     jit_log                 written to the JIT error log buffer when a module load fails
     hide                    comma-separated names cuGetProcAddress_v2 says it lacks

   The library is single-threaded: calls are expected from one thread at a time. */
#ifndef HLOJIT_CUDA_DOUBLE_H
#define HLOJIT_CUDA_DOUBLE_H

#include <stdint.h>

#define CUDA_DOUBLE_MAX_PARAMS 32
#define CUDA_DOUBLE_MAX_LOG 512

typedef struct cuda_double_launch {
  char func[64];
  unsigned grid[3], block[3], shared;
  void *stream;
  int nparams;                                   /* from the PTX .entry's parameter list */
  void *param_ptrs[CUDA_DOUBLE_MAX_PARAMS];      /* kernelParams[i] (graph: the node's copy) */
  int param_sizes[CUDA_DOUBLE_MAX_PARAMS];
  uint64_t param_vals[CUDA_DOUBLE_MAX_PARAMS];   /* the first min(size, 8) bytes, zero-extended */
  int exec;    /* 0: an eager cuLaunchKernel; else the id of the graph exec that replayed it */
  int node;    /* graph replays: the node's index in capture order */
} cuda_double_launch;

typedef struct cuda_double_update {     /* one cuGraphExecKernelNodeSetParams */
  int exec, node;
  cuda_double_launch params;            /* what the node now holds */
} cuda_double_update;

typedef struct cuda_double_getproc {    /* one cuGetProcAddress_v2 */
  char name[64];
  int version;
  int found;
} cuda_double_getproc;

typedef struct cuda_double_gemm {       /* one cublasGemmEx / cublasGemmStridedBatchedEx */
  int transa, transb, m, n, k, lda, ldb, ldc, batch;
  long long stride_a, stride_b, stride_c;
  int atype, btype, ctype, compute, algo, math_mode;
  float alpha, beta;
  void *stream;
} cuda_double_gemm;

typedef struct cuda_double_log {
  int nlaunches;
  cuda_double_launch launches[CUDA_DOUBLE_MAX_LOG];
  int nupdates;
  cuda_double_update updates[CUDA_DOUBLE_MAX_LOG];
  int ngetproc;
  cuda_double_getproc getproc[256];
  int ngemm;
  cuda_double_gemm gemm[64];
} cuda_double_log;

/* The control functions, for dlsym. */
typedef void (*cuda_double_reset_fn)(void);          /* defaults, then CUDA_DOUBLE_* env;
                                                        frees everything; clears the log */
typedef int (*cuda_double_set_fn)(const char *key, long long value);   /* -1: unknown key */
typedef int (*cuda_double_set_str_fn)(const char *key, const char *value);
typedef long long (*cuda_double_get_fn)(const char *key);
/* get: the numeric keys above, and "allocated_bytes", "live_allocations", "live_modules",
   "live_streams", "live_graphs", "live_execs", "ctx_refs", "blas_handles"; -1: unknown */
typedef int (*cuda_double_calls_fn)(const char *entry_point);   /* calls since the reset */
typedef const cuda_double_log *(*cuda_double_log_fn)(void);

#endif /* HLOJIT_CUDA_DOUBLE_H */
