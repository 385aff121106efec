/* cuda_driver.c — opens libcuda.so.1 and libcublas with dlopen, resolves every entry point
   cuda_api.h lists, and turns every driver and cuBLAS error into a message (cuda_driver.h
   says what callers get).

   Opening, in order (each step's failure is "no CUDA device: ..." and HJ_ERR_UNSUPPORTED):
     1. dlopen($HLOJIT_LIBCUDA or libcuda.so.1, RTLD_NOW | RTLD_LOCAL);
     2. dlsym the boot entry points (cuGetProcAddress_v2, cuInit, cuDriverGetVersion, the
        error names);
     3. cuInit(0): CUDA_ERROR_STUB_LIBRARY (34) means the toolkit's stub libcuda.so was
        found instead of a driver, CUDA_ERROR_NO_DEVICE that there is no GPU;
     4. cuDriverGetVersion; then every entry point of CUDA_API_DRIVER_FUNCS and
        CUDA_API_LEGACY_FUNCS: skipped when the driver is older than the ABI's version (it
        cannot have it, and asking cuGetProcAddress for a newer ABI than the driver's
        would hand back an older one), else cuGetProcAddress_v2(name, version) — which pins
        the ABI — or, on drivers before 12.0, dlsym of the versioned symbol;
        required ones missing fail the open, optional ones are listed in d->missing;
     5. cuDeviceGetCount: 0 is "no CUDA device";
     6. cuBLAS, when asked: $HLOJIT_LIBCUBLAS, else libcublas.so.13, then .12; failure only
        leaves d->blas_why. */
#define _GNU_SOURCE
#include "cuda_driver.h"
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

/* ---- the resolution tables, generated from cuda_api.h's lists ----------------------------- */
typedef struct cuda_sym {
  const char *name;     /* for cuGetProcAddress */
  int version;
  const char *symbol;   /* for dlsym */
  bool required;
  size_t offset;        /* of the member in cuda_driver */
} cuda_sym;

#define CD_SYM(name, version, symbol, required, params) \
  { #name, version, #symbol, required, offsetof(cuda_driver, name) },
#define CD_SYM_LEGACY(member, name, version, symbol, required, params) \
  { #name, version, #symbol, required, offsetof(cuda_driver, member) },
#define CD_SYM_BLAS(ret, symbol, required, params) \
  { #symbol, 0, #symbol, required, offsetof(cuda_driver, symbol) },
static const cuda_sym cd_boot[] = { CUDA_API_BOOT_FUNCS(CD_SYM) };
static const cuda_sym cd_funcs[] = { CUDA_API_DRIVER_FUNCS(CD_SYM)
                                     CUDA_API_LEGACY_FUNCS(CD_SYM_LEGACY) };
static const cuda_sym cd_graph[] = { CUDA_API_GRAPH_FUNCS(CD_SYM) };
static const cuda_sym cd_blas[] = { CUDA_API_CUBLAS_FUNCS(CD_SYM_BLAS) };
#define CD_COUNT(a) (sizeof(a) / sizeof((a)[0]))

static void cd_store(cuda_driver *d, const cuda_sym *s, void *p) {
  memcpy((char *)d + s->offset, &p, sizeof p);   /* object pointer into a function pointer */
}
static bool cd_present(const cuda_driver *d, const cuda_sym *s) {
  void *p;
  memcpy(&p, (const char *)d + s->offset, sizeof p);
  return p != NULL;
}

static void cd_append(char *buf, size_t n, const char *item) {
  size_t len = strlen(buf);
  snprintf(buf + len, n - len, "%s%s", len ? ", " : "", item);
}

/* ---- error names ---------------------------------------------------------------------------- */
#define CD_NAME(name, value) case value: return #name;
static const char *cd_our_result_name(CUresult r) {
  switch ((int)r) { CUDA_API_RESULTS(CD_NAME) }
  return NULL;
}
static const char *cd_our_blas_name(cublasStatus_t s) {
  switch ((int)s) { CUDA_API_CUBLAS_STATUS(CD_NAME) }
  return NULL;
}
#undef CD_NAME

const char *cuda_result_name(const cuda_driver *d, CUresult r, char *buf, size_t n) {
  const char *s = NULL;
  if (d && d->cuGetErrorName && d->cuGetErrorName(r, &s) == CUDA_SUCCESS && s) return s;
  if ((s = cd_our_result_name(r))) return s;
  snprintf(buf, n, "CUresult %d", (int)r);
  return buf;
}

/* "<what>: NAME (string)" */
static hj_status cd_vcheck(const cuda_driver *d, CUresult r, cuda_error *e,
                           const char *fmt, va_list ap) {
  if (r == CUDA_SUCCESS) return HJ_OK;
  if (!e) return r == CUDA_ERROR_OUT_OF_MEMORY ? HJ_ERR_OOM : HJ_ERR_BACKEND;
  char what[1024], nbuf[32];
  vsnprintf(what, sizeof what, fmt, ap);
  const char *name = cuda_result_name(d, r, nbuf, sizeof nbuf), *str = NULL;
  if (!d || !d->cuGetErrorString || d->cuGetErrorString(r, &str) != CUDA_SUCCESS) str = NULL;
  hj_status s = r == CUDA_ERROR_OUT_OF_MEMORY ? HJ_ERR_OOM : HJ_ERR_BACKEND;
  return cuda_error_set(e, s, "%s: %s%s%s%s", what, name, str ? " (" : "",
                        str ? str : "", str ? ")" : "");
}

hj_status cuda_check(const cuda_driver *d, CUresult r, cuda_error *e, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  hj_status s = cd_vcheck(d, r, e, fmt, ap);
  va_end(ap);
  return s;
}

hj_status cuda_blas_check(const cuda_driver *d, cublasStatus_t st, cuda_error *e,
                          const char *fmt, ...) {
  if (st == CUBLAS_STATUS_SUCCESS) return HJ_OK;
  hj_status s = st == CUBLAS_STATUS_ALLOC_FAILED ? HJ_ERR_OOM : HJ_ERR_BACKEND;
  if (!e) return s;
  char what[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  char nbuf[32];
  const char *name = cd_our_blas_name(st);
  if (!name) { snprintf(nbuf, sizeof nbuf, "cublasStatus_t %d", (int)st); name = nbuf; }
  const char *str = d && d->cublasGetStatusString ? d->cublasGetStatusString(st) : NULL;
  return cuda_error_set(e, s, "%s: %s%s%s%s", what, name, str ? " (" : "", str ? str : "",
                        str ? ")" : "");
}

/* ---- opening ---------------------------------------------------------------------------------- */
void cuda_driver_options_init(cuda_driver_options *o) {
  memset(o, 0, sizeof *o);
  o->load_cublas = true;
}

static hj_status cd_no_device(cuda_error *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static hj_status cd_no_device(cuda_error *e, const char *fmt, ...) {
  char buf[1900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return cuda_error_set(e, HJ_ERR_UNSUPPORTED, "no CUDA device: %s", buf);
}

/* Step 4 for one entry point; returns false when a required one is missing (|why| says). */
static bool cd_resolve(cuda_driver *d, const cuda_sym *s, char *why, size_t n) {
  void *p = NULL;
  char item[160];
  if (d->version < s->version) {
    snprintf(item, sizeof item, "%s (needs CUDA %d.%d)", s->name, s->version / 1000,
             s->version % 1000 / 10);
  } else if (d->via_getproc) {
    CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (d->cuGetProcAddress(s->name, &p, s->version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &q) !=
            CUDA_SUCCESS || q != CU_GET_PROC_ADDRESS_SUCCESS)
      p = NULL;
    snprintf(item, sizeof item, "%s (version %d)", s->name, s->version);
  } else {
    p = dlsym(d->lib, s->symbol);
    snprintf(item, sizeof item, "%s", s->symbol);
  }
  cd_store(d, s, p);
  if (p) return true;
  if (s->required) { cd_append(why, n, item); return false; }
  cd_append(d->missing, sizeof d->missing, item);
  return true;
}

static void cd_load_blas(cuda_driver *d, const cuda_driver_options *o) {
  const char *want = o->libcublas ? o->libcublas : getenv("HLOJIT_LIBCUBLAS");
  const char *names[] = { want, want ? NULL : "libcublas.so.13", want ? NULL : "libcublas.so.12" };
  char errs[400] = "";
  for (int i = 0; i < 3 && !d->blas_lib; i++) {
    if (!names[i]) continue;
    d->blas_lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (d->blas_lib) snprintf(d->blas_path, sizeof d->blas_path, "%s", names[i]);
    else cd_append(errs, sizeof errs, dlerror());
  }
  if (!d->blas_lib) {
    snprintf(d->blas_why, sizeof d->blas_why, "cuBLAS not loaded: %s", errs);
    return;
  }
  char missing[256] = "";
  for (size_t i = 0; i < CD_COUNT(cd_blas); i++) {
    void *p = dlsym(d->blas_lib, cd_blas[i].symbol);
    cd_store(d, &cd_blas[i], p);
    if (!p && cd_blas[i].required) cd_append(missing, sizeof missing, cd_blas[i].symbol);
  }
  if (missing[0]) {
    snprintf(d->blas_why, sizeof d->blas_why, "cuBLAS not loaded: %.200s lacks %.250s", d->blas_path,
             missing);
    for (size_t i = 0; i < CD_COUNT(cd_blas); i++) cd_store(d, &cd_blas[i], NULL);
    dlclose(d->blas_lib);
    d->blas_lib = NULL;
  }
}

hj_status cuda_driver_open(const cuda_driver_options *o, cuda_driver **out, cuda_error *e) {
  *out = NULL;
  cuda_driver_options defaults;
  if (!o) { cuda_driver_options_init(&defaults); o = &defaults; }
  cuda_driver *d = calloc(1, sizeof *d);
  if (!d) return cuda_error_set(e, HJ_ERR_OOM, "cuda_driver_open: out of host memory");
  hj_status st = HJ_OK;
  const char *path = o->libcuda ? o->libcuda : getenv("HLOJIT_LIBCUDA");
  if (!path || !*path) path = "libcuda.so.1";
  snprintf(d->lib_path, sizeof d->lib_path, "%s", path);

  d->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);                                    /* 1 */
  if (!d->lib) {
    const char *why = dlerror();
    st = cd_no_device(e, "%s not found (%s)", path, why ? why : "dlopen failed");
    goto done;
  }
  char why[512] = "";
  for (size_t i = 0; i < CD_COUNT(cd_boot); i++) {                                 /* 2 */
    void *p = dlsym(d->lib, cd_boot[i].symbol);
    cd_store(d, &cd_boot[i], p);
    if (!p && cd_boot[i].required) cd_append(why, sizeof why, cd_boot[i].symbol);
  }
  if (why[0]) { st = cd_no_device(e, "%s is not a CUDA driver: it lacks %s", path, why); goto done; }

  CUresult r = d->cuInit(0);                                                       /* 3 */
  if (r != CUDA_SUCCESS) {
    cuda_error ce;
    cuda_check(d, r, &ce, "cuInit");
    if (r == CUDA_ERROR_STUB_LIBRARY)
      st = cd_no_device(e, "%s is the CUDA toolkit's stub library, not a driver (%s)", path, ce.msg);
    else st = cd_no_device(e, "%s (driver %s)", ce.msg, path);
    goto done;
  }
  if ((r = d->cuDriverGetVersion(&d->version)) != CUDA_SUCCESS) {                   /* 4 */
    cuda_error ce;
    cuda_check(d, r, &ce, "cuDriverGetVersion");
    st = cd_no_device(e, "%s", ce.msg);
    goto done;
  }
  d->via_getproc = d->cuGetProcAddress != NULL && d->version >= 12000;
  bool ok = true;
  for (size_t i = 0; i < CD_COUNT(cd_funcs); i++) ok &= cd_resolve(d, &cd_funcs[i], why, sizeof why);
  if (!ok) {
    st = cd_no_device(e, "the driver (%s, CUDA %d.%d) lacks %s", path, d->version / 1000,
                      d->version % 1000 / 10, why);
    goto done;
  }
  d->has_graphs = true;
  for (size_t i = 0; i < CD_COUNT(cd_graph); i++) d->has_graphs &= cd_present(d, &cd_graph[i]);
  d->has_prefetch = d->cuMemPrefetchAsync || d->cuMemPrefetchAsync_v1;

  if ((r = d->cuDeviceGetCount(&d->device_count)) != CUDA_SUCCESS) {                /* 5 */
    cuda_error ce;
    cuda_check(d, r, &ce, "cuDeviceGetCount");
    st = cd_no_device(e, "%s", ce.msg);
    goto done;
  }
  if (d->device_count < 1) {
    st = cd_no_device(e, "the driver (%s, CUDA %d.%d) reports no device", path,
                      d->version / 1000, d->version % 1000 / 10);
    goto done;
  }
  if (o->load_cublas) cd_load_blas(d, o);                                          /* 6 */
  else snprintf(d->blas_why, sizeof d->blas_why, "cuBLAS not loaded: not asked for");

done:
  if (st != HJ_OK) cuda_driver_close(d);
  else *out = d;
  return st;
}

void cuda_driver_close(cuda_driver *d) {
  if (!d) return;
  if (d->blas_lib) dlclose(d->blas_lib);
  if (d->lib) dlclose(d->lib);
  free(d);
}

void cuda_driver_describe(const cuda_driver *d, char *buf, size_t n) {
  snprintf(buf, n, "CUDA driver %d.%d (%s, %s), %d device%s; %s%s; graphs %s%s%s",
           d->version / 1000, d->version % 1000 / 10, d->lib_path,
           d->via_getproc ? "cuGetProcAddress" : "dlsym", d->device_count,
           d->device_count == 1 ? "" : "s", d->blas_lib ? "cuBLAS " : "",
           d->blas_lib ? d->blas_path : d->blas_why, d->has_graphs ? "on" : "off",
           d->missing[0] ? "; missing: " : "", d->missing);
}
