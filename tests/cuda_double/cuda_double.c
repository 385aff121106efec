/* cuda_double.c — the CUDA driver half of the test double (cuda_double.h says what it is
   and how to script it; cuda_double_blas.c is the cuBLAS half). A TEST DOUBLE: it proves the
   backend's plumbing — loading, versioned lookups, error paths, memory accounting, graph
   capture/replay/update bookkeeping — and nothing about kernels, which never run.

   Invariants
   - Every entry point of cuda_api.h's driver lists is defined here under its exported
     symbol with its ABI (the prototypes are generated from the lists, so the compiler
     checks each definition), and cuGetProcAddress_v2 serves them by (name, version): the
     newest ABI not newer than the version asked for, as the real driver does.
   - Kernel parameters: cuModuleLoadDataEx parses each `.entry NAME(...)` of the PTX text for
     its parameters' sizes, so a launch can copy the argument values (as the real driver
     does) into the log, and a captured graph node owns copies of them.
   - Stream capture: a launch on a capturing stream becomes a node of the stream's graph
     (not a launch); cuStreamGetCaptureInfo returns it as the stream's one dependency.
     cuGraphInstantiateWithFlags copies the nodes; cuGraphLaunch logs each copy as a launch
     with the exec's id; cuGraphExecKernelNodeSetParams rewrites one copy and logs it.
   - Memory is 256-byte aligned host memory; cuMemGetInfo reports total minus what is
     allocated, or the scripted free_mem. */
#define _GNU_SOURCE
#include "backends/cuda/cuda_api.h"
#include "tests/cuda_double/cuda_double.h"
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

/* Prototypes of every exported entry point, from the lists. */
#define DBL_PROTO(name, version, symbol, required, params) EXPORT CUresult symbol params;
#define DBL_PROTO_LEGACY(member, name, version, symbol, required, params) \
  EXPORT CUresult symbol params;
CUDA_API_BOOT_FUNCS(DBL_PROTO)
CUDA_API_DRIVER_FUNCS(DBL_PROTO)
CUDA_API_LEGACY_FUNCS(DBL_PROTO_LEGACY)

/* ---- state ------------------------------------------------------------------------------ */
typedef struct dbl_func {
  char name[64];
  int nparams;
  int sizes[CUDA_DOUBLE_MAX_PARAMS];
  int max_dynamic_shared;
} dbl_func;

struct CUmod_st { int nfuncs; dbl_func funcs[64]; };
struct CUctx_st { int unused; };

typedef struct dbl_node {
  dbl_func *func;
  unsigned grid[3], block[3], shared;
  _Alignas(16) unsigned char storage[CUDA_DOUBLE_MAX_PARAMS * 16];   /* parameter values */
  void *ptrs[CUDA_DOUBLE_MAX_PARAMS];                    /* into storage */
} dbl_node;

struct CUgraphNode_st { dbl_node k; int index; };
struct CUgraph_st { int nnodes; struct CUgraphNode_st *nodes[256]; };
struct CUgraphExec_st { int id; int nnodes; struct CUgraphNode_st *orig[256]; dbl_node copy[256]; };
struct CUstream_st { bool capturing; CUgraph graph; CUgraphNode last; };

static struct {
  long long device_count, init_error, driver_version, cc_major, cc_minor, sm_count,
      shared_optin, concurrent_managed, total_mem, free_mem, module_load_error, launch_error,
      launch_ok_count, blas_create_error;
  char jit_log[2048], hide[1024];
  /* accounting */
  long long allocated_bytes, live_allocations, live_modules, live_streams, live_graphs,
      live_execs, ctx_refs, blas_handles, launches_ok, next_exec;
  struct { void *p; size_t n; } allocs[1024];
  struct { char name[48]; int n; } calls[128];
  int ncalls;
  cuda_double_log log;
} S;

static struct CUctx_st dbl_ctx;

static void dbl_count(const char *name) {
  for (int i = 0; i < S.ncalls; i++)
    if (strcmp(S.calls[i].name, name) == 0) { S.calls[i].n++; return; }
  if (S.ncalls < 128) {
    snprintf(S.calls[S.ncalls].name, sizeof S.calls[0].name, "%s", name);
    S.calls[S.ncalls++].n = 1;
  }
}
#define CALLED() dbl_count(__func__)

/* The numeric keys, by name. */
#define DBL_KEYS(X)                                                                         \
  X(device_count, 1) X(init_error, 0) X(driver_version, 13000) X(cc_major, 9) X(cc_minor, 0) \
  X(sm_count, 132) X(shared_optin, 232448) X(concurrent_managed, 1)                          \
  X(total_mem, 80LL << 30) X(free_mem, -1) X(module_load_error, 0) X(launch_error, 0)        \
  X(launch_ok_count, 0) X(blas_create_error, 0)

EXPORT int cuda_double_set(const char *key, long long v) {
#define DBL_SET(k, def) if (strcmp(key, #k) == 0) { S.k = v; return 0; }
  DBL_KEYS(DBL_SET)
#undef DBL_SET
  return -1;
}

EXPORT int cuda_double_set_str(const char *key, const char *v) {
  if (strcmp(key, "jit_log") == 0) { snprintf(S.jit_log, sizeof S.jit_log, "%s", v); return 0; }
  if (strcmp(key, "hide") == 0) { snprintf(S.hide, sizeof S.hide, "%s", v); return 0; }
  return -1;
}

EXPORT long long cuda_double_get(const char *key) {
#define DBL_GET(k, def) if (strcmp(key, #k) == 0) return S.k;
  DBL_KEYS(DBL_GET)
  DBL_GET(allocated_bytes, 0) DBL_GET(live_allocations, 0) DBL_GET(live_modules, 0)
  DBL_GET(live_streams, 0) DBL_GET(live_graphs, 0) DBL_GET(live_execs, 0) DBL_GET(ctx_refs, 0)
  DBL_GET(blas_handles, 0)
#undef DBL_GET
  return -1;
}

EXPORT int cuda_double_calls(const char *name) {
  for (int i = 0; i < S.ncalls; i++)
    if (strcmp(S.calls[i].name, name) == 0) return S.calls[i].n;
  return 0;
}

EXPORT const cuda_double_log *cuda_double_log_get(void) { return &S.log; }

/* for cuda_double_blas.c */
__attribute__((visibility("hidden"))) void dbl_blas_handles(int delta) { S.blas_handles += delta; }

static void dbl_env(const char *key, bool numeric) {
  char var[64] = "CUDA_DOUBLE_";
  size_t n = strlen(var);
  for (const char *k = key; *k && n < sizeof var - 1; k++) var[n++] = (char)toupper(*k);
  var[n] = 0;
  const char *v = getenv(var);
  if (!v) return;
  if (numeric) cuda_double_set(key, strtoll(v, NULL, 0));
  else cuda_double_set_str(key, v);
}

EXPORT void cuda_double_reset(void) {
  for (int i = 0; i < 1024; i++) free(S.allocs[i].p);
  /* Handles still alive are leaked on purpose: a test that resets mid-way has checked the
     live_* counts already, and freeing them here would hide a double free elsewhere. */
  memset(&S, 0, sizeof S);
#define DBL_DEF(k, def) S.k = def; dbl_env(#k, true);
  DBL_KEYS(DBL_DEF)
#undef DBL_DEF
  dbl_env("jit_log", false);
  dbl_env("hide", false);
}

__attribute__((constructor)) static void dbl_init(void) { cuda_double_reset(); }

static bool dbl_hidden(const char *name) {
  size_t n = strlen(name);
  for (const char *p = S.hide; (p = strstr(p, name)); p += n)
    if ((p == S.hide || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return true;
  return false;
}

/* ---- entry points: boot ----------------------------------------------------------------- */
typedef struct dbl_entry { const char *name; int version; void *fn; } dbl_entry;
#define DBL_ENTRY(name, version, symbol, required, params) { #name, version, (void *)symbol },
#define DBL_ENTRY_LEGACY(member, name, version, symbol, required, params) \
  { #name, version, (void *)symbol },
/* Like the real driver, a newer ABI under an old name: CUDA 13's cuCtxSynchronize_v2 takes
   the context. A loader asking for "cuCtxSynchronize" at 13000 gets this one. */
EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx);
static const dbl_entry dbl_entries[] = {
  CUDA_API_BOOT_FUNCS(DBL_ENTRY) CUDA_API_DRIVER_FUNCS(DBL_ENTRY)
  CUDA_API_LEGACY_FUNCS(DBL_ENTRY_LEGACY)
  { "cuCtxSynchronize", 13000, (void *)cuCtxSynchronize_v2 },
};

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status) {
  CALLED();
  const dbl_entry *best = NULL;
  bool any = false;
  for (size_t i = 0; i < sizeof dbl_entries / sizeof dbl_entries[0]; i++) {
    const dbl_entry *en = &dbl_entries[i];
    if (strcmp(en->name, symbol) != 0) continue;
    any = true;
    if (en->version <= cudaVersion && en->version <= S.driver_version &&
        (!best || en->version > best->version))
      best = en;
  }
  if (dbl_hidden(symbol)) any = false, best = NULL;
  cuda_double_log *L = &S.log;
  if (L->ngetproc < 256) {
    cuda_double_getproc *g = &L->getproc[L->ngetproc++];
    snprintf(g->name, sizeof g->name, "%s", symbol);
    g->version = cudaVersion;
    g->found = best != NULL;
  }
  *pfn = best ? best->fn : NULL;
  if (status)
    *status = best ? CU_GET_PROC_ADDRESS_SUCCESS
                   : any ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                         : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return best ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult cuInit(unsigned int flags) { CALLED(); return (CUresult)S.init_error; }
CUresult cuDriverGetVersion(int *v) { CALLED(); *v = (int)S.driver_version; return CUDA_SUCCESS; }

#define DBL_NAME(name, value) case value: return #name;
static const char *dbl_result_name(CUresult r) {
  switch ((int)r) { CUDA_API_RESULTS(DBL_NAME) }
  return NULL;
}
#undef DBL_NAME

CUresult cuGetErrorName(CUresult error, const char **s) {
  *s = dbl_result_name(error);
  return *s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult error, const char **s) {
  static char buf[128];
  const char *name = dbl_result_name(error);
  if (!name) { *s = NULL; return CUDA_ERROR_INVALID_VALUE; }
  snprintf(buf, sizeof buf, "test double says %s", name);
  *s = buf;
  return CUDA_SUCCESS;
}

/* ---- devices and contexts ----------------------------------------------------------------- */
CUresult cuDeviceGetCount(int *count) { CALLED(); *count = (int)S.device_count; return CUDA_SUCCESS; }

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  CALLED();
  if (ordinal < 0 || ordinal >= S.device_count) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute a, CUdevice dev) {
  CALLED();
  switch (a) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = (int)S.cc_major; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = (int)S.cc_minor; break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = (int)S.sm_count; break;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *pi = 48 * 1024; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *pi = (int)S.shared_optin; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *pi = 233472; break;
  case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: *pi = 1; break;
  case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: *pi = (int)S.concurrent_managed; break;
  case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
  default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
  CALLED();
  snprintf(name, (size_t)len, "hlojit CUDA test double");
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
  CALLED();
  *bytes = (size_t)S.total_mem;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  CALLED();
  S.ctx_refs++;
  *pctx = &dbl_ctx;
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  CALLED();
  if (S.ctx_refs <= 0) return CUDA_ERROR_INVALID_CONTEXT;
  S.ctx_refs--;
  return CUDA_SUCCESS;
}
CUresult cuCtxSetCurrent(CUcontext ctx) { CALLED(); return CUDA_SUCCESS; }
CUresult cuCtxSynchronize(void) { CALLED(); return CUDA_SUCCESS; }
CUresult cuCtxSynchronize_v2(CUcontext ctx) { CALLED(); return ctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT; }

/* ---- memory ----------------------------------------------------------------------------- */
CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total_b) {
  CALLED();
  *total_b = (size_t)S.total_mem;
  long long f = S.free_mem >= 0 ? S.free_mem : S.total_mem - S.allocated_bytes;
  *free_b = (size_t)(f > 0 ? f : 0);
  return CUDA_SUCCESS;
}

static CUresult dbl_alloc(CUdeviceptr *p, size_t n) {
  *p = 0;
  if ((long long)n > S.total_mem - S.allocated_bytes) return CUDA_ERROR_OUT_OF_MEMORY;
  for (int i = 0; i < 1024; i++) {
    if (S.allocs[i].p) continue;
    void *m = aligned_alloc(256, (n + 255) / 256 * 256);
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    memset(m, 0xAB, n);   /* not zero: code must not rely on fresh memory being cleared */
    S.allocs[i].p = m;
    S.allocs[i].n = n;
    S.allocated_bytes += (long long)n;
    S.live_allocations++;
    *p = (CUdeviceptr)(uintptr_t)m;
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { CALLED(); return dbl_alloc(p, n); }
CUresult cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned int flags) {
  CALLED();
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
  return dbl_alloc(p, n);
}

CUresult cuMemFree_v2(CUdeviceptr p) {
  CALLED();
  for (int i = 0; i < 1024; i++) {
    if (S.allocs[i].p != (void *)(uintptr_t)p || !p) continue;
    free(S.allocs[i].p);
    S.allocated_bytes -= (long long)S.allocs[i].n;
    S.live_allocations--;
    S.allocs[i].p = NULL;
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;   /* not ours, or freed twice */
}

CUresult cuMemPrefetchAsync_v2(CUdeviceptr p, size_t n, CUmemLocation loc, unsigned int flags,
                               CUstream s) {
  CALLED();
  if (!S.concurrent_managed) return CUDA_ERROR_INVALID_DEVICE;
  if (loc.type != CU_MEM_LOCATION_TYPE_DEVICE && loc.type != CU_MEM_LOCATION_TYPE_HOST)
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}
CUresult cuMemPrefetchAsync(CUdeviceptr p, size_t n, CUdevice dst, CUstream s) {
  CALLED();
  return S.concurrent_managed ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

#define DBL_PTR(p) ((void *)(uintptr_t)(p))
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *h, size_t n) { CALLED(); memcpy(DBL_PTR(d), h, n); return CUDA_SUCCESS; }
CUresult cuMemcpyDtoH_v2(void *h, CUdeviceptr d, size_t n) { CALLED(); memcpy(h, DBL_PTR(d), n); return CUDA_SUCCESS; }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *h, size_t n, CUstream s) { CALLED(); memcpy(DBL_PTR(d), h, n); return CUDA_SUCCESS; }
CUresult cuMemcpyDtoHAsync_v2(void *h, CUdeviceptr d, size_t n, CUstream s) { CALLED(); memcpy(h, DBL_PTR(d), n); return CUDA_SUCCESS; }
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr src, size_t n, CUstream s) { CALLED(); memmove(DBL_PTR(d), DBL_PTR(src), n); return CUDA_SUCCESS; }
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s) { CALLED(); memset(DBL_PTR(d), v, n); return CUDA_SUCCESS; }

/* ---- modules ---------------------------------------------------------------------------- */
/* Sizes of the parameters of `.entry NAME(...)` starting at |p| (just after the name). */
static const char *dbl_parse_params(const char *p, dbl_func *f) {
  while (*p == ' ' || *p == '\t' || *p == '\n') p++;
  if (*p != '(') return p;   /* no parameters */
  const char *end = strchr(p, ')');
  if (!end) return p;
  for (const char *q = p; (q = strstr(q, ".param")) && q < end && f->nparams < CUDA_DOUBLE_MAX_PARAMS;) {
    q += 6;
    int size = 0;
    /* the first type token after .param (and an .align N) */
    for (const char *t = q; t < end && *t != ','; t++) {
      if (*t != '.') continue;
      if (strncmp(t, ".align", 6) == 0) { t += 6; continue; }
      char ty = t[1];
      int bits = atoi(t + 2);
      if ((ty == 'u' || ty == 's' || ty == 'b' || ty == 'f') && bits) { size = bits / 8; break; }
    }
    const char *comma = strchr(q, ',');
    const char *stop = comma && comma < end ? comma : end;
    const char *br = memchr(q, '[', (size_t)(stop - q));
    if (br) size *= atoi(br + 1);   /* .b8 name[16] */
    f->sizes[f->nparams++] = size;
    q = stop;
  }
  return end;
}

CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int nopt,
                            CUjit_option *opts, void **vals) {
  CALLED();
  *module = NULL;
  const char *ptx = image;
  CUresult r = (CUresult)S.module_load_error;
  struct CUmod_st *m = NULL;
  if (r == CUDA_SUCCESS) {
    m = calloc(1, sizeof *m);
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    for (const char *p = ptx; (p = strstr(p, ".entry ")) && m->nfuncs < 64;) {
      p += 7;
      dbl_func *f = &m->funcs[m->nfuncs++];
      size_t n = strcspn(p, " \t\n(");
      snprintf(f->name, sizeof f->name, "%.*s", (int)n, p);
      p = dbl_parse_params(p + n, f);
    }
    if (m->nfuncs == 0) {
      free(m);
      m = NULL;
      r = CUDA_ERROR_INVALID_PTX;
      snprintf(S.jit_log, sizeof S.jit_log, "test double: no .entry in the image");
    }
  }
  if (r != CUDA_SUCCESS) {
    char *log = NULL;
    size_t cap = 0;
    for (unsigned i = 0; i < nopt; i++) {
      if (opts[i] == CU_JIT_ERROR_LOG_BUFFER) log = vals[i];
      if (opts[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) cap = (size_t)(uintptr_t)vals[i];
    }
    if (log && cap) snprintf(log, cap, "%s", S.jit_log);
    return r;
  }
  S.live_modules++;
  *module = m;
  return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule m, const char *name) {
  CALLED();
  *hfunc = NULL;
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  for (int i = 0; i < m->nfuncs; i++)
    if (strcmp(m->funcs[i].name, name) == 0) { *hfunc = (CUfunction)&m->funcs[i]; return CUDA_SUCCESS; }
  return CUDA_ERROR_NOT_FOUND;
}

CUresult cuModuleUnload(CUmodule m) {
  CALLED();
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  free(m);
  S.live_modules--;
  return CUDA_SUCCESS;
}

#define DBL_FUNC(f) ((dbl_func *)(void *)(f))
CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute a, CUfunction f) {
  CALLED();
  switch (a) {
  case CU_FUNC_ATTRIBUTE_NUM_REGS: *pi = 32; break;
  case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
  case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *pi = DBL_FUNC(f)->max_dynamic_shared; break;
  default: *pi = 0;
  }
  return CUDA_SUCCESS;
}

CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) {
  CALLED();
  if (a != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) return CUDA_ERROR_NOT_SUPPORTED;
  if (v < 0 || v > S.shared_optin) return CUDA_ERROR_INVALID_VALUE;
  DBL_FUNC(f)->max_dynamic_shared = v;
  return CUDA_SUCCESS;
}

/* ---- launches, streams, graphs -------------------------------------------------------- */
static void dbl_fill(dbl_node *k, dbl_func *f, const unsigned grid[3], const unsigned block[3],
                     unsigned shared, void **params) {
  k->func = f;
  memcpy(k->grid, grid, sizeof k->grid);
  memcpy(k->block, block, sizeof k->block);
  k->shared = shared;
  size_t off = 0;
  for (int i = 0; i < f->nparams; i++) {
    size_t n = (size_t)f->sizes[i];
    if (off + n > sizeof k->storage) n = 0;
    memcpy(k->storage + off, params[i], n);
    k->ptrs[i] = k->storage + off;
    off += (n + 7) / 8 * 8;
  }
}

static void dbl_log_launch(const dbl_node *k, void *const *ptrs, CUstream s, int exec, int node,
                           cuda_double_launch *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->func, sizeof out->func, "%s", k->func->name);
  memcpy(out->grid, k->grid, sizeof out->grid);
  memcpy(out->block, k->block, sizeof out->block);
  out->shared = k->shared;
  out->stream = s;
  out->nparams = k->func->nparams;
  out->exec = exec;
  out->node = node;
  for (int i = 0; i < k->func->nparams; i++) {
    int n = k->func->sizes[i];
    out->param_ptrs[i] = ptrs[i];
    out->param_sizes[i] = n;
    memcpy(&out->param_vals[i], ptrs[i], (size_t)(n < 8 ? n : 8));
  }
}

static CUresult dbl_launch_result(void) {
  if (S.launch_error && S.launches_ok >= S.launch_ok_count) return (CUresult)S.launch_error;
  S.launches_ok++;
  return CUDA_SUCCESS;
}

static CUresult dbl_check_launch(dbl_func *f, unsigned shared, void **params) {
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if (shared > 48 * 1024 && (int)shared > f->max_dynamic_shared) return CUDA_ERROR_INVALID_VALUE;
  if (f->nparams && !params) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction hf, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared, CUstream s, void **params,
                        void **extra) {
  CALLED();
  dbl_func *f = DBL_FUNC(hf);
  CUresult r = dbl_check_launch(f, shared, params);
  if (r != CUDA_SUCCESS) return r;
  unsigned grid[3] = { gx, gy, gz }, block[3] = { bx, by, bz };
  if (s && s->capturing) {   /* a node of the stream's graph */
    CUgraph g = s->graph;
    if (g->nnodes == 256) return CUDA_ERROR_OUT_OF_MEMORY;
    CUgraphNode nd = calloc(1, sizeof *nd);
    if (!nd) return CUDA_ERROR_OUT_OF_MEMORY;
    dbl_fill(&nd->k, f, grid, block, shared, params);
    nd->index = g->nnodes;
    g->nodes[g->nnodes++] = nd;
    s->last = nd;
    return CUDA_SUCCESS;
  }
  if ((r = dbl_launch_result()) != CUDA_SUCCESS) return r;
  cuda_double_log *L = &S.log;
  if (L->nlaunches < CUDA_DOUBLE_MAX_LOG) {
    dbl_node k;
    dbl_fill(&k, f, grid, block, shared, params);
    dbl_log_launch(&k, params, s, 0, -1, &L->launches[L->nlaunches++]);
  }
  return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *ps, unsigned int flags) {
  CALLED();
  *ps = calloc(1, sizeof **ps);
  if (!*ps) return CUDA_ERROR_OUT_OF_MEMORY;
  S.live_streams++;
  return CUDA_SUCCESS;
}
CUresult cuStreamDestroy_v2(CUstream s) {
  CALLED();
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  free(s);
  S.live_streams--;
  return CUDA_SUCCESS;
}
CUresult cuStreamSynchronize(CUstream s) {
  CALLED();
  return s && s->capturing ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode) {
  CALLED();
  if (!s) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;   /* the legacy stream cannot */
  if (s->capturing) return CUDA_ERROR_ILLEGAL_STATE;
  s->graph = calloc(1, sizeof *s->graph);
  if (!s->graph) return CUDA_ERROR_OUT_OF_MEMORY;
  S.live_graphs++;
  s->capturing = true;
  s->last = NULL;
  return CUDA_SUCCESS;
}

CUresult cuStreamEndCapture(CUstream s, CUgraph *pg) {
  CALLED();
  *pg = NULL;
  if (!s || !s->capturing) return CUDA_ERROR_ILLEGAL_STATE;
  *pg = s->graph;
  s->capturing = false;
  s->graph = NULL;
  s->last = NULL;
  return CUDA_SUCCESS;
}

CUresult cuStreamGetCaptureInfo_v3(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id,
                                   CUgraph *graph, const CUgraphNode **deps,
                                   const CUgraphEdgeData **edges, size_t *ndeps) {
  CALLED();
  bool on = s && s->capturing;
  if (status) *status = on ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  if (id) *id = on ? (cuuint64_t)(uintptr_t)s->graph : 0;
  if (graph) *graph = on ? s->graph : NULL;
  if (deps) *deps = on && s->last ? &s->last : NULL;
  if (edges) *edges = NULL;   /* all default edges */
  if (ndeps) *ndeps = on && s->last ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *pe, CUgraph g, unsigned long long flags) {
  CALLED();
  *pe = NULL;
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  CUgraphExec x = calloc(1, sizeof *x);
  if (!x) return CUDA_ERROR_OUT_OF_MEMORY;
  x->id = (int)++S.next_exec;
  x->nnodes = g->nnodes;
  for (int i = 0; i < g->nnodes; i++) {
    x->orig[i] = g->nodes[i];
    dbl_node *k = &g->nodes[i]->k;
    dbl_fill(&x->copy[i], k->func, k->grid, k->block, k->shared, k->ptrs);
  }
  S.live_execs++;
  *pe = x;
  return CUDA_SUCCESS;
}

CUresult cuGraphLaunch(CUgraphExec x, CUstream s) {
  CALLED();
  if (!x) return CUDA_ERROR_INVALID_HANDLE;
  cuda_double_log *L = &S.log;
  for (int i = 0; i < x->nnodes; i++) {
    CUresult r = dbl_launch_result();
    if (r != CUDA_SUCCESS) return r;
    if (L->nlaunches < CUDA_DOUBLE_MAX_LOG)
      dbl_log_launch(&x->copy[i], x->copy[i].ptrs, s, x->id, i, &L->launches[L->nlaunches++]);
  }
  return CUDA_SUCCESS;
}

CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec x, CUgraphNode node,
                                           const CUDA_KERNEL_NODE_PARAMS *p) {
  CALLED();
  if (!x || !node || !p) return CUDA_ERROR_INVALID_VALUE;
  for (int i = 0; i < x->nnodes; i++) {
    if (x->orig[i] != node) continue;
    dbl_func *f = DBL_FUNC(p->func);
    /* the real driver allows no change of function context; keep it to the same kernel */
    if (f != x->copy[i].func) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = dbl_check_launch(f, p->sharedMemBytes, p->kernelParams);
    if (r != CUDA_SUCCESS) return r;
    unsigned grid[3] = { p->gridDimX, p->gridDimY, p->gridDimZ };
    unsigned block[3] = { p->blockDimX, p->blockDimY, p->blockDimZ };
    dbl_fill(&x->copy[i], f, grid, block, p->sharedMemBytes, p->kernelParams);
    cuda_double_log *L = &S.log;
    if (L->nupdates < CUDA_DOUBLE_MAX_LOG) {
      cuda_double_update *u = &L->updates[L->nupdates++];
      u->exec = x->id;
      u->node = i;
      dbl_log_launch(&x->copy[i], x->copy[i].ptrs, NULL, x->id, i, &u->params);
    }
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;   /* not a node of the graph this exec came from */
}

CUresult cuGraphGetNodes(CUgraph g, CUgraphNode *nodes, size_t *n) {
  CALLED();
  if (!g || !n) return CUDA_ERROR_INVALID_VALUE;
  if (!nodes) { *n = (size_t)g->nnodes; return CUDA_SUCCESS; }
  size_t k = *n < (size_t)g->nnodes ? *n : (size_t)g->nnodes;
  for (size_t i = 0; i < k; i++) nodes[i] = g->nodes[i];
  *n = k;
  return CUDA_SUCCESS;
}

CUresult cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType *t) {
  CALLED();
  if (!node) return CUDA_ERROR_INVALID_VALUE;
  *t = CU_GRAPH_NODE_TYPE_KERNEL;
  return CUDA_SUCCESS;
}

CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS *p) {
  CALLED();
  if (!node || !p) return CUDA_ERROR_INVALID_VALUE;
  memset(p, 0, sizeof *p);
  dbl_node *k = &node->k;
  p->func = (CUfunction)(void *)k->func;
  p->gridDimX = k->grid[0], p->gridDimY = k->grid[1], p->gridDimZ = k->grid[2];
  p->blockDimX = k->block[0], p->blockDimY = k->block[1], p->blockDimZ = k->block[2];
  p->sharedMemBytes = k->shared;
  p->kernelParams = k->ptrs;
  return CUDA_SUCCESS;
}

CUresult cuGraphExecDestroy(CUgraphExec x) {
  CALLED();
  if (!x) return CUDA_ERROR_INVALID_VALUE;
  free(x);
  S.live_execs--;
  return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph g) {
  CALLED();
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  for (int i = 0; i < g->nnodes; i++) free(g->nodes[i]);
  free(g);
  S.live_graphs--;
  return CUDA_SUCCESS;
}
