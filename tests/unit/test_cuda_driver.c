/* test_cuda_driver.c — the CUDA driver loader and device layer (backends/cuda/cuda_driver.c,
   cuda_device.c) without a GPU.

   Against real files where this machine has them: no libcuda.so.1 -> "no CUDA device: ...
   not found"; the toolkit's stub libcuda.so -> cuInit's CUDA_ERROR_STUB_LIBRARY becomes
   "no CUDA device: ... stub library"; the stub exports every driver symbol we resolve by
   dlsym and the toolkit's libcublas.so every cuBLAS symbol (so the names are real).
   Against the test double (tests/cuda_double, through the same dlopen path): the versions
   asked of cuGetProcAddress_v2, an old driver taking the dlsym path and the v1 prefetch,
   hidden entry points (required: the open fails naming it; optional: graphs off), cuInit
   failing, no device, device info and clean close (no context, stream, handle or
   allocation left), allocations refused against cuMemGetInfo, prefetching, module loads
   failing with the JIT log in the message, function lookup, launches and their arguments,
   a failing launch, dynamic shared memory opt-in, the graph calls as phase 2 will use
   them (capture, the node of each launch, replay, in-place update), and cuBLAS (loaded,
   missing, failing to start, a row-major gemm mapped onto column-major cuBLAS). */
#include "cuda_testutil.h"

#ifndef HLOJIT_CUDA_BACKEND
static void test_cuda_driver_not_built(void **state) {
  print_message("skipped: the CUDA backend is not in this build (backends/cuda/cuda.mk)\n");
  skip();
}
int main(void) {
  const struct CMUnitTest tests[] = { cmocka_unit_test(test_cuda_driver_not_built) };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
#include "backends/cuda/cuda_driver.h"

static cuda_driver *td_open_double(void) {
  cuda_driver_options o;
  cuda_driver_options_init(&o);
  o.libcuda = cu_dbl.path;
  o.libcublas = cu_dbl.path;
  cuda_driver *d = NULL;
  cuda_error e;
  if (cuda_driver_open(&o, &d, &e) != HJ_OK) fail_msg("cuda_driver_open(double): %s", e.msg);
  return d;
}

static hj_status td_open_fails(cuda_error *e) {
  cuda_driver_options o;
  cuda_driver_options_init(&o);
  o.libcuda = cu_dbl.path;
  cuda_driver *d = (cuda_driver *)1;
  hj_status st = cuda_driver_open(&o, &d, e);
  assert_null(d);
  return st;
}

/* ---- real files ---------------------------------------------------------------------------- */
static void test_no_driver(void **state) {
  cuda_driver_options o;
  cuda_driver_options_init(&o);
  o.libcuda = "/nonexistent/libcuda.so.1";
  cuda_driver *d = NULL;
  cuda_error e;
  assert_int_equal(cuda_driver_open(&o, &d, &e), HJ_ERR_UNSUPPORTED);
  assert_null(d);
  CU_ASSERT_HAS(e.msg, "no CUDA device: /nonexistent/libcuda.so.1 not found (");
  /* the default search: either a real driver, or the same kind of message */
  o.libcuda = NULL;
  unsetenv("HLOJIT_LIBCUDA");
  hj_status st = cuda_driver_open(&o, &d, &e);
  if (st == HJ_OK) {
    char buf[1024];
    cuda_driver_describe(d, buf, sizeof buf);
    print_message("a CUDA driver is here: %s\n", buf);
    cuda_driver_close(d);
  } else {
    assert_int_equal(st, HJ_ERR_UNSUPPORTED);
    assert_memory_equal(e.msg, "no CUDA device: ", 16);
    print_message("default open: %s\n", e.msg);
  }
  /* $HLOJIT_LIBCUDA is honoured */
  setenv("HLOJIT_LIBCUDA", "/nonexistent/by-env/libcuda.so", 1);
  assert_int_equal(cuda_driver_open(&o, &d, &e), HJ_ERR_UNSUPPORTED);
  CU_ASSERT_HAS(e.msg, "/nonexistent/by-env/libcuda.so not found");
  unsetenv("HLOJIT_LIBCUDA");
}

static void test_stub_library(void **state) {
  char stub[1024];
  if (!cu_toolkit_file("lib64/stubs/libcuda.so", stub, sizeof stub)) {
    print_message("skipped: no CUDA toolkit stub libcuda.so\n");
    skip();
  }
  cuda_driver_options o;
  cuda_driver_options_init(&o);
  o.libcuda = stub;
  cuda_driver *d = NULL;
  cuda_error e;
  assert_int_equal(cuda_driver_open(&o, &d, &e), HJ_ERR_UNSUPPORTED);
  assert_null(d);
  CU_ASSERT_HAS(e.msg, "no CUDA device: ");
  CU_ASSERT_HAS(e.msg, "stub library");
  CU_ASSERT_HAS(e.msg, "CUDA_ERROR_STUB_LIBRARY");
  print_message("%s\n", e.msg);
}

/* Every exported name we would dlsym exists in NVIDIA's own libraries. */
static void test_real_libraries_export_our_symbols(void **state) {
  char stub[1024], blas[1024];
  bool have_stub = cu_toolkit_file("lib64/stubs/libcuda.so", stub, sizeof stub);
  bool have_blas = cu_toolkit_file("lib64/libcublas.so", blas, sizeof blas);
  if (!have_stub && !have_blas) { print_message("skipped: no CUDA toolkit libraries\n"); skip(); }
  int checked = 0;
  if (have_stub) {
    void *h = dlopen(stub, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(h);
#define TD_SYM(name, version, symbol, required, params) \
    { if (!dlsym(h, #symbol)) fail_msg("%s lacks %s", stub, #symbol); checked++; }
#define TD_SYM_LEGACY(member, name, version, symbol, required, params) \
    TD_SYM(name, version, symbol, required, params)
    CUDA_API_BOOT_FUNCS(TD_SYM) CUDA_API_DRIVER_FUNCS(TD_SYM) CUDA_API_LEGACY_FUNCS(TD_SYM_LEGACY)
    dlclose(h);
  }
  if (have_blas) {
    void *h = dlopen(blas, RTLD_NOW | RTLD_LOCAL);
    if (!h) fail_msg("dlopen(%s): %s", blas, dlerror());
#define TD_BLAS(ret, symbol, required, params) \
    { if (!dlsym(h, #symbol)) fail_msg("%s lacks %s", blas, #symbol); checked++; }
    CUDA_API_CUBLAS_FUNCS(TD_BLAS)
    /* not dlclosed: libcublas carries its own libstdc++, whose exception pool LeakSanitizer
       reports as leaked once the library is unmapped */
  }
  print_message("%d symbols found in %s%s%s\n", checked, have_stub ? stub : "",
                have_stub && have_blas ? " and " : "", have_blas ? blas : "");
}

/* ---- the double: opening ------------------------------------------------------------------ */
static int td_asked(const char *name, int version) {
  const cuda_double_log *L = cu_dbl.log();
  int n = 0;
  for (int i = 0; i < L->ngetproc; i++)
    if (strcmp(L->getproc[i].name, name) == 0 && L->getproc[i].version == version) n++;
  return n;
}

static void test_open_versions(void **state) {
  CU_NEED_DOUBLE();
  cuda_driver *d = td_open_double();
  assert_true(d->via_getproc);
  assert_true(d->has_graphs);
  assert_true(d->has_prefetch);
  assert_int_equal(d->version, 13000);
  assert_int_equal(d->device_count, 1);
  assert_string_equal(d->missing, "");
  assert_non_null(d->blas_lib);
  /* every entry point asked once, for the ABI we declare */
  int n = 0;
#define TD_ASKED(name, version, symbol, required, params) \
  { if (td_asked(#name, version) != 1) fail_msg("%s not asked for version %d", #name, version); \
    n++; }
#define TD_ASKED_LEGACY(member, name, version, symbol, required, params) \
  TD_ASKED(name, version, symbol, required, params)
  CUDA_API_DRIVER_FUNCS(TD_ASKED) CUDA_API_LEGACY_FUNCS(TD_ASKED_LEGACY)
  assert_int_equal(cu_dbl.log()->ngetproc, n);   /* (before the extra lookup below) */
  assert_int_equal(td_asked("cuMemPrefetchAsync", 12020), 1);
  assert_int_equal(td_asked("cuMemAlloc", 3020), 1);
  /* CUDA 13's cuCtxSynchronize_v2(ctx) is the 13.0 ABI of the name: we asked for 2.0's */
  assert_int_equal(d->cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(cu_dbl.calls("cuCtxSynchronize"), 1);
  assert_int_equal(cu_dbl.calls("cuCtxSynchronize_v2"), 0);
  void *newer = NULL;
  CUdriverProcAddressQueryResult q;
  assert_int_equal(d->cuGetProcAddress("cuCtxSynchronize", &newer, 13000, 0, &q), CUDA_SUCCESS);
  assert_ptr_not_equal(newer, (void *)d->cuCtxSynchronize);
  char buf[1024];
  cuda_driver_describe(d, buf, sizeof buf);
  CU_ASSERT_HAS(buf, "CUDA driver 13.0");
  CU_ASSERT_HAS(buf, "graphs on");
  print_message("%s\n", buf);
  cuda_driver_close(d);
}

static void test_open_old_driver(void **state) {
  CU_NEED_DOUBLE();
  cu_dbl.set("driver_version", 11080);   /* before cuGetProcAddress_v2 */
  cuda_driver *d = td_open_double();
  assert_false(d->via_getproc);
  assert_int_equal(cu_dbl.log()->ngetproc, 0);
  assert_false(d->has_graphs);            /* cuStreamGetCaptureInfo_v3 is 12.3 */
  assert_true(d->has_prefetch);           /* through the v1 ABI */
  assert_null(d->cuMemPrefetchAsync);
  assert_non_null(d->cuMemPrefetchAsync_v1);
  CU_ASSERT_HAS(d->missing, "cuMemPrefetchAsync (needs CUDA 12.2)");
  CU_ASSERT_HAS(d->missing, "cuStreamGetCaptureInfo (needs CUDA 12.3)");
  cuda_device *dv = NULL;
  cuda_error e;
  if (cuda_device_open(d, 0, &dv, &e) != HJ_OK) fail_msg("%s", e.msg);
  CUdeviceptr p = 0;
  assert_int_equal(cuda_mem_alloc_managed(dv, 4096, &p, &e), HJ_OK);
  assert_int_equal(cuda_mem_prefetch(dv, p, 4096, true, &e), HJ_OK);
  assert_int_equal(cu_dbl.calls("cuMemPrefetchAsync"), 1);
  assert_int_equal(cu_dbl.calls("cuMemPrefetchAsync_v2"), 0);
  assert_int_equal(cuda_mem_free(dv, p, &e), HJ_OK);
  cuda_device_close(dv);
  cuda_driver_close(d);
}

static void test_open_hidden_entry_points(void **state) {
  CU_NEED_DOUBLE();
  cuda_error e;
  cu_dbl.set_str("hide", "cuGraphLaunch");
  cuda_driver *d = td_open_double();
  assert_false(d->has_graphs);
  CU_ASSERT_HAS(d->missing, "cuGraphLaunch (version 10000)");
  cuda_driver_close(d);
  cu_dbl.set_str("hide", "cuStreamSynchronize,cuMemAlloc");
  assert_int_equal(td_open_fails(&e), HJ_ERR_UNSUPPORTED);
  CU_ASSERT_HAS(e.msg, "no CUDA device: the driver (");
  CU_ASSERT_HAS(e.msg, "lacks cuMemAlloc (version 3020), cuStreamSynchronize (version 2000)");
}

static void test_open_init_fails(void **state) {
  CU_NEED_DOUBLE();
  cuda_error e;
  cu_dbl.set("init_error", CUDA_ERROR_STUB_LIBRARY);
  assert_int_equal(td_open_fails(&e), HJ_ERR_UNSUPPORTED);
  CU_ASSERT_HAS(e.msg, "no CUDA device: ");
  CU_ASSERT_HAS(e.msg, "is the CUDA toolkit's stub library, not a driver (cuInit: "
                       "CUDA_ERROR_STUB_LIBRARY (test double says CUDA_ERROR_STUB_LIBRARY))");
  cu_dbl.set("init_error", CUDA_ERROR_NO_DEVICE);
  assert_int_equal(td_open_fails(&e), HJ_ERR_UNSUPPORTED);
  CU_ASSERT_HAS(e.msg, "no CUDA device: cuInit: CUDA_ERROR_NO_DEVICE (test double says");
  cu_dbl.set("init_error", 12345);   /* a code no list knows */
  assert_int_equal(td_open_fails(&e), HJ_ERR_UNSUPPORTED);
  CU_ASSERT_HAS(e.msg, "no CUDA device: cuInit: CUresult 12345");
  assert_int_equal(cu_dbl.calls("cuDeviceGetCount"), 0);
}

static void test_open_no_device(void **state) {
  CU_NEED_DOUBLE();
  cuda_error e;
  cu_dbl.set("device_count", 0);
  assert_int_equal(td_open_fails(&e), HJ_ERR_UNSUPPORTED);
  CU_ASSERT_HAS(e.msg, "no CUDA device: the driver (");
  CU_ASSERT_HAS(e.msg, "CUDA 13.0) reports no device");
}

/* ---- devices, memory ------------------------------------------------------------------------ */
static cuda_device *td_device(cuda_driver *d) {
  cuda_device *dv = NULL;
  cuda_error e;
  if (cuda_device_open(d, 0, &dv, &e) != HJ_OK) fail_msg("cuda_device_open: %s", e.msg);
  return dv;
}

static void test_device_open_close(void **state) {
  CU_NEED_DOUBLE();
  cuda_driver *d = td_open_double();
  cuda_device *dv = td_device(d);
  assert_int_equal(dv->info.cc_major, 9);
  assert_int_equal(dv->info.sm_count, 132);
  assert_int_equal(dv->info.shared_per_block_optin, 232448);
  assert_true(dv->info.concurrent_managed);
  assert_non_null(dv->blas);
  assert_int_equal(dv->blas_version, 130100);
  assert_int_equal(cu_dbl.get("ctx_refs"), 1);
  assert_int_equal(cu_dbl.get("live_streams"), 1);
  assert_int_equal(cu_dbl.get("blas_handles"), 1);
  char buf[512];
  cuda_device_describe(dv, buf, sizeof buf);
  assert_string_equal(buf, "hlojit CUDA test double, compute capability 9.0, 132 SMs, 80.0 GiB");
  cuda_error e;
  assert_int_equal(cuda_device_bind(dv, &e), HJ_OK);
  cuda_device *bad = (cuda_device *)1;
  assert_int_equal(cuda_device_open(d, 1, &bad, &e), HJ_ERR_INVALID_ARG);
  assert_null(bad);
  cuda_device_close(dv);
  assert_int_equal(cu_dbl.get("ctx_refs"), 0);
  assert_int_equal(cu_dbl.get("live_streams"), 0);
  assert_int_equal(cu_dbl.get("blas_handles"), 0);
  cuda_driver_close(d);
}

static void test_memory_checked_against_free(void **state) {
  CU_NEED_DOUBLE();
  cuda_driver *d = td_open_double();
  cuda_device *dv = td_device(d);
  cuda_error e;
  cu_dbl.set("free_mem", 2LL << 30);   /* 2 GiB free of 80; the reserve is 2% = 1.6 GiB */
  CUdeviceptr p = 0, q = 0;
  assert_int_equal(cuda_mem_alloc_managed(dv, 1 << 20, &p, &e), HJ_OK);
  assert_int_equal(cu_dbl.get("allocated_bytes"), 1 << 20);
  assert_int_equal(cuda_mem_alloc_managed(dv, 1LL << 30, &q, &e), HJ_ERR_OOM);
  assert_int_equal(q, 0);
  CU_ASSERT_HAS(e.msg, "managed allocation of 1024.0 MiB refused: device 0 has 2048.0 MiB free");
  CU_ASSERT_HAS(e.msg, "keeps 1638.4 MiB in reserve");
  assert_int_equal(cu_dbl.calls("cuMemAllocManaged"), 1);   /* the refused one never asked */
  assert_int_equal(cuda_mem_alloc(dv, 1LL << 30, &q, &e), HJ_ERR_OOM);
  CU_ASSERT_HAS(e.msg, "device allocation of 1024.0 MiB refused");
  cu_dbl.set("free_mem", 100LL << 20);   /* less than the reserve itself */
  assert_int_equal(cuda_mem_alloc(dv, 16, &q, &e), HJ_ERR_OOM);
  cu_dbl.set("free_mem", -1);
  assert_int_equal(cuda_mem_alloc(dv, 1000, &q, &e), HJ_OK);
  /* the driver's own out-of-memory is HJ_ERR_OOM with its name */
  CUdeviceptr r = 0;
  dv->mem_headroom = 0;
  cu_dbl.set("free_mem", 80LL << 30);   /* cuMemGetInfo claims all is free; cuMemAlloc knows */
  assert_int_equal(cuda_mem_alloc(dv, (80ULL << 30) - 1000, &r, &e), HJ_ERR_OOM);
  assert_string_equal(e.msg, "cuMemAlloc(85899344920 bytes): CUDA_ERROR_OUT_OF_MEMORY (test "
                             "double says CUDA_ERROR_OUT_OF_MEMORY)");
  assert_int_equal(cuda_mem_free(dv, p, &e), HJ_OK);
  assert_int_equal(cuda_mem_free(dv, q, &e), HJ_OK);
  assert_int_equal(cuda_mem_free(dv, q, &e), HJ_ERR_BACKEND);   /* twice: the driver says no */
  CU_ASSERT_HAS(e.msg, "cuMemFree(0x");
  CU_ASSERT_HAS(e.msg, "CUDA_ERROR_INVALID_VALUE");
  assert_int_equal(cu_dbl.get("live_allocations"), 0);
  cuda_device_close(dv);
  cuda_driver_close(d);
}

static void test_prefetch(void **state) {
  CU_NEED_DOUBLE();
  cuda_driver *d = td_open_double();
  cuda_device *dv = td_device(d);
  cuda_error e;
  CUdeviceptr p = 0;
  assert_int_equal(cuda_mem_alloc_managed(dv, 1 << 16, &p, &e), HJ_OK);
  assert_int_equal(cuda_mem_prefetch(dv, p, 1 << 16, true, &e), HJ_OK);
  assert_int_equal(cuda_mem_prefetch(dv, p, 1 << 16, false, &e), HJ_OK);
  assert_int_equal(cu_dbl.calls("cuMemPrefetchAsync_v2"), 2);
  assert_int_equal(cu_dbl.calls("cuMemPrefetchAsync"), 0);
  dv->info.concurrent_managed = false;   /* such a device: prefetching is skipped */
  assert_int_equal(cuda_mem_prefetch(dv, p, 1 << 16, true, &e), HJ_OK);
  assert_int_equal(cu_dbl.calls("cuMemPrefetchAsync_v2"), 2);
  dv->info.concurrent_managed = true;
  cu_dbl.set("concurrent_managed", 0);   /* the driver refusing is an error like others */
  assert_int_equal(cuda_mem_prefetch(dv, p, 1 << 16, true, &e), HJ_ERR_BACKEND);
  CU_ASSERT_HAS(e.msg, "cuMemPrefetchAsync(65536 bytes to the device): CUDA_ERROR_INVALID_DEVICE");
  assert_int_equal(cuda_mem_free(dv, p, &e), HJ_OK);
  cuda_device_close(dv);
  cuda_driver_close(d);
}

/* ---- modules and launches ------------------------------------------------------------------ */
static const char td_ptx[] =
    ".version 8.0\n.target sm_90a\n.address_size 64\n"
    ".visible .entry k(\n\t.param .u64 .ptr .global .align 1 k_param_0,\n"
    "\t.param .u32 k_param_1\n)\n.maxntid 256, 1, 1\n{\n\tret;\n}\n"
    ".visible .entry k2(\n\t.param .align 8 .b8 k2_param_0[16]\n)\n{\n\tret;\n}\n";

static void test_module_load_error_has_jit_log(void **state) {
  CU_NEED_DOUBLE();
  cuda_driver *d = td_open_double();
  cuda_device *dv = td_device(d);
  cuda_error e;
  CUmodule m = (CUmodule)1;
  cu_dbl.set("module_load_error", CUDA_ERROR_INVALID_PTX);
  cu_dbl.set_str("jit_log", "ptxas application ptx input, line 7; error   : Unknown symbol 'x'\n");
  assert_int_equal(cuda_module_load(dv, td_ptx, "fusion.3", &m, &e), HJ_ERR_BACKEND);
  assert_null(m);
  assert_string_equal(e.msg, "cuModuleLoadDataEx(fusion.3): CUDA_ERROR_INVALID_PTX (test double "
                             "says CUDA_ERROR_INVALID_PTX); JIT log: ptxas application ptx "
                             "input, line 7; error   : Unknown symbol 'x'");
  cu_dbl.set("module_load_error", 0);
  assert_int_equal(cuda_module_load(dv, "not ptx", "junk", &m, &e), HJ_ERR_BACKEND);
  CU_ASSERT_HAS(e.msg, "JIT log: test double: no .entry in the image");
  assert_int_equal(cu_dbl.get("live_modules"), 0);
  cuda_device_close(dv);
  cuda_driver_close(d);
}

static void test_launch_records_arguments(void **state) {
  CU_NEED_DOUBLE();
  cuda_driver *d = td_open_double();
  cuda_device *dv = td_device(d);
  cuda_error e;
  CUmodule m = NULL;
  CUfunction f = NULL, f2 = NULL;
  assert_int_equal(cuda_module_load(dv, td_ptx, "t", &m, &e), HJ_OK);
  assert_int_equal(cuda_module_function(dv, m, "k", &f, &e), HJ_OK);
  assert_int_equal(cuda_module_function(dv, m, "k2", &f2, &e), HJ_OK);
  CUfunction none = (CUfunction)1;
  assert_int_equal(cuda_module_function(dv, m, "nope", &none, &e), HJ_ERR_BACKEND);
  assert_null(none);
  CU_ASSERT_HAS(e.msg, "cuModuleGetFunction(nope): CUDA_ERROR_NOT_FOUND");
  CUdeviceptr buf = 0;
  assert_int_equal(cuda_mem_alloc_managed(dv, 1024, &buf, &e), HJ_OK);
  int32_t n = 77;
  void *params[] = { &buf, &n };
  unsigned grid[3] = { 4, 1, 1 }, block[3] = { 256, 1, 1 };
  assert_int_equal(cuda_launch(dv, f, "k", grid, block, 0, params, &e), HJ_OK);
  const cuda_double_log *L = cu_dbl.log();
  assert_int_equal(L->nlaunches, 1);
  const cuda_double_launch *l = &L->launches[0];
  assert_string_equal(l->func, "k");
  assert_int_equal(l->nparams, 2);
  assert_int_equal(l->param_sizes[0], 8);
  assert_int_equal(l->param_sizes[1], 4);
  assert_ptr_equal(l->param_ptrs[0], &buf);
  assert_int_equal(l->param_vals[0], buf);
  assert_int_equal(l->param_vals[1], 77);
  assert_int_equal(l->grid[0], 4);
  assert_int_equal(l->block[0], 256);
  assert_ptr_equal(l->stream, dv->stream);
  /* a by-value struct parameter */
  uint64_t pair[2] = { 5, 6 };
  void *params2[] = { pair };
  assert_int_equal(cuda_launch(dv, f2, "k2", grid, block, 0, params2, &e), HJ_OK);
  assert_int_equal(L->launches[1].param_sizes[0], 16);
  assert_int_equal(L->launches[1].param_vals[0], 5);
  /* a failing launch: the driver's error with the call */
  cu_dbl.set("launch_error", CUDA_ERROR_LAUNCH_FAILED);
  cu_dbl.set("launch_ok_count", 3);
  assert_int_equal(cuda_launch(dv, f, "k", grid, block, 0, params, &e), HJ_OK);
  assert_int_equal(cuda_launch(dv, f, "k", grid, block, 0, params, &e), HJ_ERR_BACKEND);
  assert_string_equal(e.msg, "cuLaunchKernel(k, grid 4x1x1, block 256x1x1, 0 bytes shared): "
                             "CUDA_ERROR_LAUNCH_FAILED (test double says CUDA_ERROR_LAUNCH_FAILED)");
  assert_int_equal(L->nlaunches, 3);
  cu_dbl.set("launch_error", 0);
  /* dynamic shared memory above 48 KiB needs the opt-in first */
  assert_int_equal(cuda_launch(dv, f, "k", grid, block, 64 << 10, params, &e), HJ_ERR_BACKEND);
  CU_ASSERT_HAS(e.msg, "65536 bytes shared): CUDA_ERROR_INVALID_VALUE");
  assert_int_equal(cuda_func_allow_shared(dv, f, "k", 64 << 10, &e), HJ_OK);
  assert_int_equal(cuda_launch(dv, f, "k", grid, block, 64 << 10, params, &e), HJ_OK);
  assert_int_equal(cuda_func_allow_shared(dv, f, "k", 300 << 10, &e), HJ_ERR_UNSUPPORTED);
  assert_string_equal(e.msg, "kernel k needs 307200 bytes of shared memory; device 0 allows 232448");
  assert_int_equal(cuda_mem_free(dv, buf, &e), HJ_OK);
  assert_int_equal(cuda_module_unload(dv, m, &e), HJ_OK);
  assert_int_equal(cuda_device_sync(dv, &e), HJ_OK);
  assert_int_equal(cu_dbl.get("live_modules"), 0);
  cuda_device_close(dv);
  cuda_driver_close(d);
}

/* The graph entry points as the runtime will drive them: capture the launches, read back
   the node each launch made, replay, update one node's arguments in place, replay. */
static void test_graph_calls(void **state) {
  CU_NEED_DOUBLE();
  cuda_driver *d = td_open_double();
  cuda_device *dv = td_device(d);
  cuda_error e;
  CUmodule m = NULL;
  CUfunction f = NULL;
  assert_int_equal(cuda_module_load(dv, td_ptx, "t", &m, &e), HJ_OK);
  assert_int_equal(cuda_module_function(dv, m, "k", &f, &e), HJ_OK);
  CUdeviceptr a = 0x1000, b = 0x2000;
  int32_t n0 = 1, n1 = 2;
  void *p0[] = { &a, &n0 }, *p1[] = { &b, &n1 };
  unsigned grid[3] = { 2, 1, 1 }, block[3] = { 128, 1, 1 };
  CUgraphNode nodes[2];
  assert_int_equal(d->cuStreamBeginCapture(dv->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), 0);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(cuda_launch(dv, f, "k", grid, block, 0, i ? p1 : p0, &e), HJ_OK);
    CUstreamCaptureStatus cs;
    const CUgraphNode *deps = NULL;
    size_t ndeps = 0;
    assert_int_equal(d->cuStreamGetCaptureInfo(dv->stream, &cs, NULL, NULL, &deps, NULL, &ndeps), 0);
    assert_int_equal(cs, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    assert_int_equal(ndeps, 1);
    nodes[i] = deps[0];
  }
  a = 0xdead;   /* the capture copied the values: changing them now changes nothing */
  CUgraph g = NULL;
  CUgraphExec x = NULL;
  assert_int_equal(d->cuStreamEndCapture(dv->stream, &g), 0);
  assert_int_equal(cu_dbl.log()->nlaunches, 0);   /* captured, not run */
  size_t nn = 0;
  assert_int_equal(d->cuGraphGetNodes(g, NULL, &nn), 0);
  assert_int_equal(nn, 2);
  CUDA_KERNEL_NODE_PARAMS kp;
  assert_int_equal(d->cuGraphKernelNodeGetParams(nodes[1], &kp), 0);
  assert_ptr_equal(kp.func, f);
  assert_int_equal(*(CUdeviceptr *)kp.kernelParams[0], 0x2000);
  assert_int_equal(d->cuGraphInstantiateWithFlags(&x, g, 0), 0);
  assert_int_equal(d->cuGraphLaunch(x, dv->stream), 0);
  const cuda_double_log *L = cu_dbl.log();
  assert_int_equal(L->nlaunches, 2);
  assert_int_equal(L->launches[0].param_vals[0], 0x1000);
  assert_int_equal(L->launches[1].param_vals[1], 2);
  assert_int_equal(L->launches[1].node, 1);
  /* node 0's buffer moved: update it in place */
  CUdeviceptr c = 0x3000;
  void *pu[] = { &c, &n0 };
  assert_int_equal(d->cuGraphKernelNodeGetParams(nodes[0], &kp), 0);
  kp.kernelParams = pu;
  assert_int_equal(d->cuGraphExecKernelNodeSetParams(x, nodes[0], &kp), 0);
  assert_int_equal(L->nupdates, 1);
  assert_int_equal(L->updates[0].node, 0);
  assert_int_equal(L->updates[0].params.param_vals[0], 0x3000);
  assert_int_equal(d->cuGraphLaunch(x, dv->stream), 0);
  assert_int_equal(L->launches[2].param_vals[0], 0x3000);
  assert_int_equal(L->launches[3].param_vals[0], 0x2000);
  assert_int_equal(d->cuGraphExecDestroy(x), 0);
  assert_int_equal(d->cuGraphDestroy(g), 0);
  assert_int_equal(cu_dbl.get("live_graphs"), 0);
  assert_int_equal(cu_dbl.get("live_execs"), 0);
  assert_int_equal(cuda_module_unload(dv, m, &e), HJ_OK);
  cuda_device_close(dv);
  cuda_driver_close(d);
}

/* ---- cuBLAS ------------------------------------------------------------------------------- */
static void test_cublas(void **state) {
  CU_NEED_DOUBLE();
  cuda_driver *d = td_open_double();
  cuda_device *dv = td_device(d);
  assert_non_null(dv->blas);
  /* row-major C[2,3] = A[2,4] x B[4,3] is column-major C^T = B^T A^T: cuBLAS (N, N) with
     m = 3, n = 2, k = 4, the B operand first (ld 3), then A (ld 4), ldc 3. */
  float A[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, B[12] = { 1, 0, 2, 0, 1, 0, 3, 0, 1, 1, 1, 1 };
  float C[6] = { 0 }, alpha = 1, beta = 0;
  cublasStatus_t s = d->cublasGemmEx(dv->blas, CUBLAS_OP_N, CUBLAS_OP_N, 3, 2, 4, &alpha, B,
                                     CUDA_R_32F, 3, A, CUDA_R_32F, 4, &beta, C, CUDA_R_32F, 3,
                                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  assert_int_equal(s, CUBLAS_STATUS_SUCCESS);
  float want[6];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++) {
      want[i * 3 + j] = 0;
      for (int p = 0; p < 4; p++) want[i * 3 + j] += A[i * 4 + p] * B[p * 3 + j];
    }
  assert_memory_equal(C, want, sizeof C);
  assert_int_equal(cu_dbl.log()->ngemm, 1);
  assert_int_equal(cu_dbl.log()->gemm[0].math_mode, CUBLAS_DEFAULT_MATH);   /* no TF32 */
  assert_ptr_equal(cu_dbl.log()->gemm[0].stream, dv->stream);
  cuda_error e;
  s = d->cublasGemmEx(dv->blas, CUBLAS_OP_N, CUBLAS_OP_N, 3, 2, 4, &alpha, B, CUDA_R_32F, 1, A,
                      CUDA_R_32F, 4, &beta, C, CUDA_R_32F, 3, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  assert_int_equal(cuda_blas_check(d, s, &e, "cublasGemmEx(%dx%dx%d)", 2, 3, 4), HJ_ERR_BACKEND);
  assert_string_equal(e.msg, "cublasGemmEx(2x3x4): CUBLAS_STATUS_INVALID_VALUE (test double: failure)");
  cuda_device_close(dv);
  cuda_driver_close(d);

  /* cuBLAS failing to start: the device still opens, without it */
  cu_dbl.set("blas_create_error", CUBLAS_STATUS_NOT_INITIALIZED);
  d = td_open_double();
  dv = td_device(d);
  assert_null(dv->blas);
  assert_string_equal(dv->blas_why, "cuBLAS unavailable: cublasCreate_v2: "
                                    "CUBLAS_STATUS_NOT_INITIALIZED (test double: failure)");
  cuda_device_close(dv);
  cuda_driver_close(d);

  /* cuBLAS missing: the driver still opens, without it */
  cuda_driver_options o;
  cuda_driver_options_init(&o);
  o.libcuda = cu_dbl.path;
  o.libcublas = "/nonexistent/libcublas.so.13";
  assert_int_equal(cuda_driver_open(&o, &d, &e), HJ_OK);
  assert_null(d->blas_lib);
  CU_ASSERT_HAS(d->blas_why, "cuBLAS not loaded: /nonexistent/libcublas.so.13");
  dv = td_device(d);
  assert_null(dv->blas);
  CU_ASSERT_HAS(dv->blas_why, "cuBLAS not loaded");
  cuda_device_close(dv);
  cuda_driver_close(d);
}

static void test_error_names(void **state) {
  char buf[32];
  assert_string_equal(cuda_result_name(NULL, CUDA_ERROR_STUB_LIBRARY, buf, sizeof buf),
                      "CUDA_ERROR_STUB_LIBRARY");
  assert_string_equal(cuda_result_name(NULL, (CUresult)4242, buf, sizeof buf), "CUresult 4242");
  cuda_error e;
  assert_int_equal(cuda_check(NULL, CUDA_SUCCESS, &e, "x"), HJ_OK);
  assert_int_equal(cuda_check(NULL, CUDA_ERROR_OUT_OF_MEMORY, &e, "cuMemAlloc(%d)", 5), HJ_ERR_OOM);
  assert_string_equal(e.msg, "cuMemAlloc(5): CUDA_ERROR_OUT_OF_MEMORY");
  assert_int_equal(cuda_check(NULL, CUDA_ERROR_LAUNCH_FAILED, NULL, "x"), HJ_ERR_BACKEND);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_no_driver),
    cmocka_unit_test(test_stub_library),
    cmocka_unit_test(test_real_libraries_export_our_symbols),
    cmocka_unit_test(test_open_versions),
    cmocka_unit_test(test_open_old_driver),
    cmocka_unit_test(test_open_hidden_entry_points),
    cmocka_unit_test(test_open_init_fails),
    cmocka_unit_test(test_open_no_device),
    cmocka_unit_test(test_device_open_close),
    cmocka_unit_test(test_memory_checked_against_free),
    cmocka_unit_test(test_prefetch),
    cmocka_unit_test(test_module_load_error_has_jit_log),
    cmocka_unit_test(test_launch_records_arguments),
    cmocka_unit_test(test_graph_calls),
    cmocka_unit_test(test_cublas),
    cmocka_unit_test(test_error_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
