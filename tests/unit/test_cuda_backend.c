/* test_cuda_backend.c — the CUDA backend's host side (backends/cuda/cuda_backend.c, cuda_run.c,
   cuda_mem.c, cuda_gemm.c) through the public API, without a GPU.

   Backend selection on this machine: HJ_BACKEND_AUTO with no driver (and with the CUDA test
   double scripted as no device, the toolkit's stub, a pre-Ampere device) falls back to the
   CPU backend and says why in hj_exec_stats().note; HJ_BACKEND_CUDA fails with
   HJ_ERR_UNSUPPORTED and "no CUDA device: ...".

   Against the CUDA TEST DOUBLE (tests/cuda_double: it proves plumbing, not kernels — kernels
   never run there; launches are recorded with their arguments, gemms computed on the host):
   buffers in managed memory; one module load per executable; each launch's arguments are
   the buffers' addresses; allocations refused against cuMemGetInfo; a failed module load
   (the JIT log in the message; AUTO moves on to the CPU); a failed launch; graphs: the first
   run eager, the second captured and replayed, later runs replayed with no update while
   nothing changes, a node updated in place (cuGraphExecKernelNodeSetParams) when an input's
   address changes — and every replayed argument equal to what an eager run would pass (no
   stale pointer) — a scalar's new value needing no update (it is read from memory on the
   device), graph nodes with the eager launches' grid, block and dynamic shared memory,
   HLOJIT_CUDA_GRAPHS=0, a program with host work never captured; evaluator thunks running
   on the host through managed memory (a sort: its result is right even here); caller
   memory staged in and out; prefetching only what the host touched; the cuBLAS path (the
   row-major mapping checked on the double's host gemm), the tiled path, a re-capture when a
   cuBLAS node's addresses change and eager launches once three runs in a row needed one;
   the skinny kernel for M <= 8 (one node, updated in place when the weights change); the
   PTX in HLOJIT_DUMP_TO. */
#include "cuda_testutil.h"
#include "hlojit.h"
#include <dirent.h>
#include <unistd.h>
#include <math.h>

#if !defined(HLOJIT_CUDA_BACKEND) || !__has_include(<llvm-c/Core.h>)
static void test_cuda_backend_not_built(void **state) {
  print_message("skipped: the CUDA backend is not in this build (backends/cuda/cuda.mk)\n");
  skip();
}
int main(void) {
  const struct CMUnitTest tests[] = { cmocka_unit_test(test_cuda_backend_not_built) };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#else

#define TB_OK(ctx, call)                                                                   \
  do {                                                                                     \
    hj_status st_ = (call);                                                                \
    if (st_ != HJ_OK) fail_msg("%s: %s: %s", #call, hj_status_name(st_), hj_ctx_error(ctx)); \
  } while (0)

static const char tb_ew[] =
    "HloModule ew\n"
    "ENTRY main {\n"
    "  p0 = f32[256] parameter(0)\n"
    "  p1 = f32[256] parameter(1)\n"
    "  ROOT r = f32[256] add(p0, p1)\n"
    "}\n";

/* a dynamic-update-slice at a runtime position (the KV cache's shape of problem) */
static const char tb_pos[] =
    "HloModule pos\n"
    "ENTRY main {\n"
    "  c = f32[4,16,8] parameter(0)\n"
    "  u = f32[4,1,8] parameter(1)\n"
    "  t = s32[] parameter(2)\n"
    "  z = s32[] constant(0)\n"
    "  d = f32[4,16,8] dynamic-update-slice(c, u, z, t, z)\n"
    "  ROOT r = f32[4,16,8] multiply(d, d)\n"
    "}\n";

/* a conditional: the runtime reads its predicate on the host (no kernel in either branch:
   the result is a copy of x, which the test double's memcpy does for real) */
static const char tb_cond[] =
    "HloModule cnd\n"
    "id1 { ROOT a = f32[64] parameter(0) }\n"
    "id2 { ROOT a = f32[64] parameter(0) }\n"
    "ENTRY main {\n"
    "  b = pred[] parameter(0)\n"
    "  x = f32[64] parameter(1)\n"
    "  ROOT s = f32[64] conditional(b, x, x), true_computation=id1, false_computation=id2\n"
    "}\n";

/* two kernels with an arena buffer between them, both reading x: the rows' max, then the
   columns' sums of exp(x - max) (a reduce of other rows: not chained into one kernel) */
static const char tb_two_kernels[] =
    CU_ROW_EXP_HLO("two")
    "  z = f32[] constant(0)\n"
    "  ROOT s = f32[128] reduce(e, z), dimensions={0}, to_apply=ad\n"
    "}\n";

static const char tb_dot[] =
    "HloModule mm\n"
    "ENTRY main {\n"
    "  a = f32[32,48] parameter(0)\n"
    "  b = f32[48,40] parameter(1)\n"
    "  ROOT d = f32[32,40] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "}\n";

static const char tb_dot_bias[] =
    "HloModule mmb\n"
    "ENTRY main {\n"
    "  a = f32[32,48] parameter(0)\n"
    "  b = f32[48,40] parameter(1)\n"
    "  c = f32[40] parameter(2)\n"
    "  d = f32[32,40] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  cb = f32[32,40] broadcast(c), dimensions={1}\n"
    "  ROOT r = f32[32,40] add(d, cb)\n"
    "}\n";

/* The double as the driver and cuBLAS, reset; |gemm|: HLOJIT_CUDA_GEMM (NULL: rule). */
static void tb_double(const char *gemm) {
  CU_NEED_DOUBLE();
  setenv("HLOJIT_LIBCUDA", cu_dbl.path, 1);
  setenv("HLOJIT_LIBCUBLAS", cu_dbl.path, 1);
  setenv("HLOJIT_CUDA_GEMM", gemm ? gemm : "rule", 1);
  unsetenv("HLOJIT_CUDA_GRAPHS");
  unsetenv("HLOJIT_DUMP_TO");
}

static hj_ctx_t *tb_ctx(hj_backend_t b) {
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  o.backend = b;
  hj_ctx_t *ctx = NULL;
  if (hj_ctx_create(&o, &ctx) != HJ_OK) fail_msg("hj_ctx_create");
  return ctx;
}

static hj_module_t *tb_parse(hj_ctx_t *ctx, const char *text) {
  hj_module_t *m = NULL;
  TB_OK(ctx, hj_module_parse(ctx, text, strlen(text), "test", &m));
  return m;
}

static hj_exec_t *tb_compile(hj_ctx_t *ctx, hj_module_t *m) {
  hj_exec_t *e = NULL;
  TB_OK(ctx, hj_compile_module(ctx, m, &e));
  return e;
}

static hj_buffer_t *tb_f32(hj_ctx_t *ctx, hj_shape_t s, float v0) {
  int64_t n = 1;
  for (int i = 0; i < s.rank; i++) n *= s.dims[i];
  float *d = malloc(sizeof(float) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) d[i] = v0 + (float)i;
  hj_buffer_t *b = NULL;
  TB_OK(ctx, hj_buffer_from_host(ctx, HJ_F32, s, d, &b));
  free(d);
  return b;
}

static const cuda_double_log *tb_log(void) { return cu_dbl.log(); }

/* ---- selection ------------------------------------------------------------------------------ */

static void tb_auto_note(const char *libcuda, const char *want) {
  setenv("HLOJIT_LIBCUDA", libcuda, 1);
  hj_ctx_t *ctx = tb_ctx(HJ_BACKEND_AUTO);
  hj_module_t *m = tb_parse(ctx, tb_ew);
  hj_exec_t *e = tb_compile(ctx, m);
  hj_exec_stats_t s;
  TB_OK(ctx, hj_exec_stats(e, &s));
  assert_int_equal(s.backend, HJ_BACKEND_CPU);
  CU_ASSERT_HAS(s.note, "HJ_BACKEND_AUTO: the cuda backend failed (HJ_ERR_UNSUPPORTED: CUDA backend: ");
  CU_ASSERT_HAS(s.note, want);
  CU_ASSERT_HAS(s.note, "using the cpu backend");
  assert_string_equal(hj_ctx_error(ctx), "");   /* the skipped backend's error is cleared */
  print_message("AUTO: %s\n", s.note);
  hj_exec_destroy(e);
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
  unsetenv("HLOJIT_LIBCUDA");
}

static void test_auto_falls_back(void **state) {
  tb_auto_note("/nonexistent/libcuda.so.1", "no CUDA device: /nonexistent/libcuda.so.1 not found");
  tb_double(NULL);
  cu_dbl.set("device_count", 0);
  tb_auto_note(cu_dbl.path, "no CUDA device: the driver (");
  tb_auto_note(cu_dbl.path, "reports no device");
  cu_dbl.reset();
  cu_dbl.set("init_error", 34);
  tb_auto_note(cu_dbl.path, "no CUDA device: ");
  tb_auto_note(cu_dbl.path, "stub library");
  cu_dbl.reset();
  cu_dbl.set("cc_major", 7);
  cu_dbl.set("cc_minor", 5);
  tb_auto_note(cu_dbl.path, "compute capability 7.5: hlojit needs 8.0");
}

static void test_cuda_explicit_fails(void **state) {
  tb_double(NULL);
  cu_dbl.set("device_count", 0);
  hj_ctx_t *ctx = tb_ctx(HJ_BACKEND_CUDA);
  hj_module_t *m = tb_parse(ctx, tb_ew);
  hj_exec_t *e = (hj_exec_t *)1;
  assert_int_equal(hj_compile_module(ctx, m, &e), HJ_ERR_UNSUPPORTED);
  assert_null(e);
  CU_ASSERT_HAS(hj_ctx_error(ctx), "CUDA backend: no CUDA device: the driver (");
  CU_ASSERT_HAS(hj_ctx_error(ctx), "reports no device");
  /* buffers still work (host memory: nothing to put them on) */
  hj_buffer_t *b = tb_f32(ctx, HJ_SHAPE(4), 1);
  assert_float_equal(((float *)hj_buffer_host_ptr(b))[3], 4, 0);
  hj_buffer_destroy(b);
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
}

/* ---- runs ------------------------------------------------------------------------------------ */

static void test_run_plumbing(void **state) {
  tb_double(NULL);
  hj_ctx_t *ctx = tb_ctx(HJ_BACKEND_CUDA);
  hj_module_t *m = tb_parse(ctx, tb_ew);
  hj_buffer_t *a = tb_f32(ctx, HJ_SHAPE(256), 0), *b = tb_f32(ctx, HJ_SHAPE(256), 1), *out = NULL;
  assert_int_equal(cu_dbl.calls("cuMemAllocManaged"), 2);   /* the buffers are managed memory */
  hj_exec_t *e = tb_compile(ctx, m);
  assert_int_equal(hj_exec_backend(e), HJ_BACKEND_CUDA);
  assert_int_equal(cu_dbl.calls("cuModuleLoadDataEx"), 1);
  hj_buffer_t *in[2] = { a, b };
  TB_OK(ctx, hj_exec_run(e, in, 2, &out, 1));
  TB_OK(ctx, hj_exec_run(e, in, 2, &out, 1));
  assert_int_equal(cu_dbl.calls("cuModuleLoadDataEx"), 1);   /* loaded once per executable */
  const cuda_double_log *L = tb_log();
  assert_true(L->nlaunches >= 1);
  const cuda_double_launch *l = &L->launches[0];
  assert_int_equal(l->exec, 0);                            /* run 1: an eager launch */
  assert_int_equal(l->nparams, 3);
  assert_true(l->param_vals[0] == (uintptr_t)hj_buffer_host_ptr(a));
  assert_true(l->param_vals[1] == (uintptr_t)hj_buffer_host_ptr(b));
  assert_true(l->param_vals[2] == (uintptr_t)hj_buffer_host_ptr(out));
  assert_true((uint64_t)l->grid[0] * l->block[0] * 4 >= 256);   /* 4 floats a thread */
  assert_int_equal(l->block[0] % 32, 0);
  assert_int_equal(cu_dbl.calls("cuStreamSynchronize") >= 2, 1);
  hj_exec_destroy(e);
  assert_int_equal(cu_dbl.get("live_modules"), 0);
  hj_buffer_destroy(a);
  hj_buffer_destroy(b);
  hj_buffer_destroy(out);
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
  assert_int_equal(cu_dbl.get("live_allocations"), 0);
  assert_int_equal(cu_dbl.get("ctx_refs"), 0);
  assert_int_equal(cu_dbl.get("live_streams"), 0);
}

static void test_oom_refused(void **state) {
  tb_double(NULL);
  cu_dbl.set("total_mem", 8LL << 30);    /* the reserve: max(256 MiB, 2% of the card) */
  cu_dbl.set("free_mem", 300LL << 20);   /* 300 MiB free: 44 after the 256 MiB reserve */
  hj_ctx_t *ctx = tb_ctx(HJ_BACKEND_CUDA);
  hj_buffer_t *b = NULL;
  assert_int_equal(hj_buffer_create(ctx, HJ_F32, HJ_SHAPE(64, 1024, 1024), &b), HJ_ERR_OOM);
  assert_null(b);
  CU_ASSERT_HAS(hj_ctx_error(ctx), "managed allocation of 256.0 MiB refused: device 0 has 300.0 MiB free");
  assert_int_equal(cu_dbl.calls("cuMemAllocManaged"), 0);   /* refused before asking */
  TB_OK(ctx, hj_buffer_create(ctx, HJ_F32, HJ_SHAPE(1024), &b));   /* small ones fit */
  hj_buffer_destroy(b);
  /* an executable whose arena does not fit: the compile fails; AUTO takes the CPU */
  cu_dbl.set("free_mem", 100LL << 20);
  hj_module_t *m = tb_parse(ctx, cu_softmax_hlo);
  hj_exec_t *e = NULL;
  assert_int_equal(hj_compile_module(ctx, m, &e), HJ_ERR_OOM);
  CU_ASSERT_HAS(hj_ctx_error(ctx), "refused");
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
  ctx = tb_ctx(HJ_BACKEND_AUTO);
  m = tb_parse(ctx, cu_softmax_hlo);
  e = tb_compile(ctx, m);
  hj_exec_stats_t s;
  TB_OK(ctx, hj_exec_stats(e, &s));
  assert_int_equal(s.backend, HJ_BACKEND_CPU);
  CU_ASSERT_HAS(s.note, "refused");
  hj_exec_destroy(e);
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
}

static void test_module_load_fails(void **state) {
  tb_double(NULL);
  cu_dbl.set("module_load_error", 218);
  cu_dbl.set_str("jit_log", "ptxas application ptx input, line 12; error   : Unknown symbol 'x'");
  hj_ctx_t *ctx = tb_ctx(HJ_BACKEND_CUDA);
  hj_module_t *m = tb_parse(ctx, tb_ew);
  hj_exec_t *e = NULL;
  assert_int_equal(hj_compile_module(ctx, m, &e), HJ_ERR_BACKEND);
  CU_ASSERT_HAS(hj_ctx_error(ctx), "cuModuleLoadDataEx(");
  CU_ASSERT_HAS(hj_ctx_error(ctx), "CUDA_ERROR_INVALID_PTX");
  CU_ASSERT_HAS(hj_ctx_error(ctx), "JIT log: ptxas application ptx input, line 12");
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
  ctx = tb_ctx(HJ_BACKEND_AUTO);
  m = tb_parse(ctx, tb_ew);
  e = tb_compile(ctx, m);
  assert_int_equal(hj_exec_backend(e), HJ_BACKEND_CPU);
  hj_exec_destroy(e);
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
  assert_int_equal(cu_dbl.get("live_modules"), 0);
}

static void test_launch_fails(void **state) {
  tb_double(NULL);
  cu_dbl.set("launch_error", 719);
  hj_ctx_t *ctx = tb_ctx(HJ_BACKEND_CUDA);
  hj_module_t *m = tb_parse(ctx, tb_ew);
  hj_exec_t *e = tb_compile(ctx, m);
  hj_buffer_t *in[2] = { tb_f32(ctx, HJ_SHAPE(256), 0), tb_f32(ctx, HJ_SHAPE(256), 0) }, *out = NULL;
  assert_int_equal(hj_exec_run(e, in, 2, &out, 1), HJ_ERR_BACKEND);
  assert_null(out);   /* a failed run gives back the output it made */
  CU_ASSERT_HAS(hj_ctx_error(ctx), "cuLaunchKernel(");
  CU_ASSERT_HAS(hj_ctx_error(ctx), "CUDA_ERROR_LAUNCH_FAILED");
  hj_exec_destroy(e);
  hj_buffer_destroy(in[0]);
  hj_buffer_destroy(in[1]);
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
}

/* ---- graphs ----------------------------------------------------------------------------------- */

/* The launches of one run: log entries [from, to). */
typedef struct tb_run { int from, to; } tb_run;

static tb_run tb_do(hj_ctx_t *ctx, hj_exec_t *e, hj_buffer_t **in, int nin, hj_buffer_t **out, int nout) {
  tb_run r = { tb_log()->nlaunches, 0 };
  TB_OK(ctx, hj_exec_run(e, in, nin, out, nout));
  r.to = tb_log()->nlaunches;
  return r;
}

/* Run |b| passes the same arguments as run |a|, except |old| replaced by |now|. */
static void tb_same_args(tb_run a, tb_run b, uintptr_t old, uintptr_t now) {
  const cuda_double_log *L = tb_log();
  assert_int_equal(a.to - a.from, b.to - b.from);
  for (int i = 0; i < a.to - a.from; i++) {
    const cuda_double_launch *x = &L->launches[a.from + i], *y = &L->launches[b.from + i];
    assert_string_equal(x->func, y->func);
    assert_int_equal(x->nparams, y->nparams);
    assert_memory_equal(x->grid, y->grid, sizeof x->grid);       /* nodes: the eager geometry */
    assert_memory_equal(x->block, y->block, sizeof x->block);
    assert_int_equal(x->shared, y->shared);                      /* ... and dynamic shared memory */
    for (int p = 0; p < x->nparams; p++) {
      uint64_t want = x->param_vals[p] == old ? now : x->param_vals[p];
      if (y->param_vals[p] != want)
        fail_msg("launch %d (%s) argument %d: 0x%llx, an eager run would pass 0x%llx", i, y->func, p,
                 (unsigned long long)y->param_vals[p], (unsigned long long)want);
    }
  }
}

static void test_graph_record_replay_update(void **state) {
  tb_double(NULL);
  hj_ctx_t *ctx = tb_ctx(HJ_BACKEND_CUDA);
  hj_module_t *m = tb_parse(ctx, tb_two_kernels);
  hj_exec_t *e = tb_compile(ctx, m);
  hj_buffer_t *x = tb_f32(ctx, HJ_SHAPE(16, 128), 0), *x2 = tb_f32(ctx, HJ_SHAPE(16, 128), 5), *out = NULL;
  tb_run r1 = tb_do(ctx, e, &x, 1, &out, 1);
  const cuda_double_log *L = tb_log();
  assert_int_equal(r1.to - r1.from, 2);                     /* two reduction kernels */
  for (int i = r1.from; i < r1.to; i++) assert_int_equal(L->launches[i].exec, 0);   /* eager */
  assert_int_equal(cu_dbl.calls("cuStreamBeginCapture_v2"), 0);
  tb_run r2 = tb_do(ctx, e, &x, 1, &out, 1);                /* recorded, then replayed */
  assert_int_equal(cu_dbl.calls("cuStreamBeginCapture_v2"), 1);
  assert_int_equal(cu_dbl.calls("cuGraphInstantiateWithFlags"), 1);
  int exec = L->launches[r2.from].exec;
  assert_true(exec > 0);
  for (int i = r2.from; i < r2.to; i++) assert_int_equal(L->launches[i].exec, exec);
  tb_same_args(r1, r2, 0, 0);
  tb_run r3 = tb_do(ctx, e, &x, 1, &out, 1);                /* replay, nothing to update */
  tb_same_args(r1, r3, 0, 0);
  assert_int_equal(L->nupdates, 0);
  assert_int_equal(cu_dbl.calls("cuGraphLaunch"), 2);
  /* a new input buffer: its nodes are updated in place, not re-captured */
  tb_run r4 = tb_do(ctx, e, &x2, 1, &out, 1);
  assert_int_equal(cu_dbl.calls("cuStreamBeginCapture_v2"), 1);
  assert_int_equal(L->nupdates, 2);   /* both kernels read x */
  for (int i = 0; i < L->nupdates; i++) {
    assert_int_equal(L->updates[i].exec, exec);
    assert_true(L->updates[i].params.param_vals[0] == (uintptr_t)hj_buffer_host_ptr(x2));
  }
  tb_same_args(r1, r4, (uintptr_t)hj_buffer_host_ptr(x), (uintptr_t)hj_buffer_host_ptr(x2));
  /* back to x: updated again; a new output buffer too */
  hj_buffer_t *out2 = NULL;
  tb_run r5 = tb_do(ctx, e, &x, 1, &out2, 1);
  assert_int_equal(L->nupdates, 4);   /* both read x; one writes the output */
  tb_same_args(r1, r5, (uintptr_t)hj_buffer_host_ptr(out), (uintptr_t)hj_buffer_host_ptr(out2));
  assert_int_equal(cu_dbl.calls("cuStreamBeginCapture_v2"), 1);
  hj_exec_destroy(e);
  assert_int_equal(cu_dbl.get("live_execs"), 0);
  assert_int_equal(cu_dbl.get("live_graphs"), 0);
  hj_buffer_destroy(x);
  hj_buffer_destroy(x2);
  hj_buffer_destroy(out);
  hj_buffer_destroy(out2);
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
}

static void test_graph_scalar(void **state) {
  tb_double(NULL);
  hj_ctx_t *ctx = tb_ctx(HJ_BACKEND_CUDA);
  hj_module_t *m = tb_parse(ctx, tb_pos);
  hj_exec_t *e = tb_compile(ctx, m);
  int32_t t3 = 3, t7 = 7;
  hj_buffer_t *c = tb_f32(ctx, HJ_SHAPE(4, 16, 8), 0), *u = tb_f32(ctx, HJ_SHAPE(4, 1, 8), 0), *t = NULL, *t2 = NULL;
  TB_OK(ctx, hj_buffer_from_host(ctx, HJ_S32, HJ_SCALAR, &t3, &t));
  TB_OK(ctx, hj_buffer_from_host(ctx, HJ_S32, HJ_SCALAR, &t7, &t2));
  hj_buffer_t *in[3] = { c, u, t }, *out = NULL;
  tb_run r1 = tb_do(ctx, e, in, 3, &out, 1);
  tb_do(ctx, e, in, 3, &out, 1);
  assert_int_equal(cu_dbl.calls("cuStreamBeginCapture_v2"), 1);
  /* the same position buffer with a new value: the kernel reads it on the device */
  *(int32_t *)hj_buffer_host_ptr(t) = 9;
  tb_run r3 = tb_do(ctx, e, in, 3, &out, 1);
  assert_int_equal(tb_log()->nupdates, 0);
  tb_same_args(r1, r3, 0, 0);
  /* another position buffer: the nodes reading it get its address */
  in[2] = t2;
  tb_run r4 = tb_do(ctx, e, in, 3, &out, 1);
  assert_true(tb_log()->nupdates >= 1);
  tb_same_args(r1, r4, (uintptr_t)hj_buffer_host_ptr(t), (uintptr_t)hj_buffer_host_ptr(t2));
  assert_int_equal(cu_dbl.calls("cuStreamBeginCapture_v2"), 1);
  hj_exec_destroy(e);
  hj_buffer_destroy(c);
  hj_buffer_destroy(u);
  hj_buffer_destroy(t);
  hj_buffer_destroy(t2);
  hj_buffer_destroy(out);
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
}

static void test_graphs_off_and_host_work(void **state) {
  tb_double(NULL);
  setenv("HLOJIT_CUDA_GRAPHS", "0", 1);   /* read when an executable is made */
  hj_ctx_t *ctx = tb_ctx(HJ_BACKEND_CUDA);
  hj_module_t *m = tb_parse(ctx, cu_softmax_hlo);
  hj_exec_t *e = tb_compile(ctx, m);
  unsetenv("HLOJIT_CUDA_GRAPHS");
  hj_buffer_t *x = tb_f32(ctx, HJ_SHAPE(16, 128), 0), *out = NULL;
  for (int i = 0; i < 3; i++) tb_do(ctx, e, &x, 1, &out, 1);
  assert_int_equal(cu_dbl.calls("cuStreamBeginCapture_v2"), 0);
  for (int i = 0; i < tb_log()->nlaunches; i++) assert_int_equal(tb_log()->launches[i].exec, 0);
  hj_exec_destroy(e);
  hj_module_destroy(m);
  hj_buffer_destroy(out);
  hj_buffer_destroy(x);
  out = NULL;
  hj_ctx_destroy(ctx);
  /* a conditional reads its predicate on the host, over managed memory: never captured,
     and its result is right even on the double (no kernel involved) */
  ctx = tb_ctx(HJ_BACKEND_CUDA);
  m = tb_parse(ctx, tb_cond);
  e = tb_compile(ctx, m);
  hj_buffer_t *v[2] = { NULL, NULL };
  float vals[64];
  uint8_t yes = 1;
  for (int i = 0; i < 64; i++) vals[i] = (float)((i * 37) % 64) - 20.0f;
  TB_OK(ctx, hj_buffer_from_host(ctx, HJ_PRED, HJ_SHAPE(), &yes, &v[0]));
  TB_OK(ctx, hj_buffer_from_host(ctx, HJ_F32, HJ_SHAPE(64), vals, &v[1]));
  int syncs = cu_dbl.calls("cuStreamSynchronize");
  for (int i = 0; i < 3; i++) tb_do(ctx, e, v, 2, &out, 1);
  assert_int_equal(cu_dbl.calls("cuStreamBeginCapture_v2"), 0);
  assert_true(cu_dbl.calls("cuStreamSynchronize") >= syncs + 6);   /* before the host work, at the end */
  const float *o = hj_buffer_host_ptr(out);
  for (int i = 0; i < 64; i++) assert_float_equal(o[i], vals[i], 0);
  hj_exec_destroy(e);
  hj_buffer_destroy(v[0]);
  hj_buffer_destroy(v[1]);
  hj_buffer_destroy(out);
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
}

/* ---- memory ----------------------------------------------------------------------------------- */

static void test_staging(void **state) {
  tb_double(NULL);
  hj_ctx_t *cpu = tb_ctx(HJ_BACKEND_CPU), *ctx = tb_ctx(HJ_BACKEND_CUDA);
  hj_module_t *m = tb_parse(ctx, tb_ew);
  hj_exec_t *e = tb_compile(ctx, m);
  /* caller memory: buffers of a CPU context (host allocations the driver does not know) */
  hj_buffer_t *in[2] = { tb_f32(cpu, HJ_SHAPE(256), 0), tb_f32(cpu, HJ_SHAPE(256), 1000) }, *out = NULL;
  TB_OK(cpu, hj_buffer_create(cpu, HJ_F32, HJ_SHAPE(256), &out));
  tb_run r = tb_do(ctx, e, in, 2, &out, 1);
  const cuda_double_launch *l = &tb_log()->launches[r.from];
  for (int p = 0; p < 3; p++) {
    hj_buffer_t *b = p < 2 ? in[p] : out;
    assert_true(l->param_vals[p] != (uintptr_t)hj_buffer_host_ptr(b));   /* a staging copy */
  }
  const float *s0 = (const float *)(uintptr_t)l->param_vals[0], *s1 = (const float *)(uintptr_t)l->param_vals[1];
  assert_float_equal(s0[255], 255, 0);          /* the inputs were copied in */
  assert_float_equal(s1[7], 1007, 0);
  uint32_t w;                                   /* the output copied back: the double's fresh */
  memcpy(&w, hj_buffer_host_ptr(out), 4);       /* memory pattern (no kernel ran), not zeros */
  assert_int_equal(w, 0xABABABABu);
  /* a second run reuses the staging buffers */
  int allocs = cu_dbl.calls("cuMemAllocManaged");
  tb_run r2 = tb_do(ctx, e, in, 2, &out, 1);
  assert_int_equal(cu_dbl.calls("cuMemAllocManaged"), allocs);
  assert_true(tb_log()->launches[r2.from].param_vals[0] == l->param_vals[0]);
  hj_exec_destroy(e);
  hj_buffer_destroy(in[0]);
  hj_buffer_destroy(in[1]);
  hj_buffer_destroy(out);
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
  hj_ctx_destroy(cpu);
}

static void test_prefetch(void **state) {
  tb_double(NULL);
  hj_ctx_t *ctx = tb_ctx(HJ_BACKEND_CUDA);
  hj_module_t *m = tb_parse(ctx, tb_ew);
  hj_exec_t *e = tb_compile(ctx, m);
  hj_buffer_t *in[2] = { tb_f32(ctx, HJ_SHAPE(256), 0), tb_f32(ctx, HJ_SHAPE(256), 0) }, *out = NULL;
  TB_OK(ctx, hj_buffer_create(ctx, HJ_F32, HJ_SHAPE(256), &out));
  tb_do(ctx, e, in, 2, &out, 1);
  int p1 = cu_dbl.calls("cuMemPrefetchAsync_v2");
  assert_true(p1 >= 4);   /* both inputs, the output, the arena: written by the host */
  tb_do(ctx, e, in, 2, &out, 1);
  assert_int_equal(cu_dbl.calls("cuMemPrefetchAsync_v2"), p1);   /* nothing moved since */
  (void)hj_buffer_host_ptr(out);                                 /* to the host ... */
  assert_int_equal(cu_dbl.calls("cuMemPrefetchAsync_v2"), p1 + 1);
  tb_do(ctx, e, in, 2, &out, 1);                                 /* ... and back */
  assert_int_equal(cu_dbl.calls("cuMemPrefetchAsync_v2"), p1 + 2);
  hj_exec_destroy(e);
  hj_buffer_destroy(in[0]);
  hj_buffer_destroy(in[1]);
  hj_buffer_destroy(out);
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
}

/* ---- matmuls ----------------------------------------------------------------------------------- */

static void test_matmul_paths(void **state) {
  /* cuBLAS: the double computes the gemm on the host, so the row-major mapping shows */
  tb_double("cublas");
  hj_ctx_t *ctx = tb_ctx(HJ_BACKEND_CUDA);
  hj_module_t *m = tb_parse(ctx, tb_dot);
  hj_exec_t *e = tb_compile(ctx, m);
  float A[32 * 48], B[48 * 40];
  for (int i = 0; i < 32 * 48; i++) A[i] = (float)(i % 7) - 3;
  for (int i = 0; i < 48 * 40; i++) B[i] = (float)(i % 5) - 2;
  hj_buffer_t *in[2] = { NULL, NULL }, *out = NULL;
  TB_OK(ctx, hj_buffer_from_host(ctx, HJ_F32, HJ_SHAPE(32, 48), A, &in[0]));
  TB_OK(ctx, hj_buffer_from_host(ctx, HJ_F32, HJ_SHAPE(48, 40), B, &in[1]));
  tb_do(ctx, e, in, 2, &out, 1);
  const cuda_double_log *L = tb_log();
  assert_int_equal(L->ngemm, 1);
  const cuda_double_gemm *g = &L->gemm[0];
  assert_int_equal(g->m, 40);   /* column-major C^T = B^T A^T */
  assert_int_equal(g->n, 32);
  assert_int_equal(g->k, 48);
  assert_int_equal(g->compute, 68);   /* CUBLAS_COMPUTE_32F: no TF32 unless asked */
  const float *C = hj_buffer_host_ptr(out);
  for (int i = 0; i < 32; i++)
    for (int j = 0; j < 40; j++) {
      float ref = 0;
      for (int k = 0; k < 48; k++) ref += A[i * 48 + k] * B[k * 40 + j];
      assert_float_equal(C[i * 40 + j], ref, 1e-3);
    }
  /* graphs: a cuBLAS node's addresses changing means capturing again */
  tb_do(ctx, e, in, 2, &out, 1);
  tb_do(ctx, e, in, 2, &out, 1);
  assert_int_equal(cu_dbl.calls("cuStreamBeginCapture_v2"), 1);
  hj_buffer_t *out2 = NULL;
  tb_do(ctx, e, in, 2, &out2, 1);
  assert_int_equal(cu_dbl.calls("cuStreamBeginCapture_v2"), 2);
  /* ... and when every run changes them, the third capture in a row is the last: eager
     launches from then on (each run still computes its gemm) */
  int gemms = L->ngemm;
  for (int run = 0; run < 6; run++) {
    hj_buffer_t *o = run % 2 ? out2 : out;
    memset(hj_buffer_host_ptr(o), 0, 32 * 40 * sizeof(float));
    tb_do(ctx, e, in, 2, &o, 1);
    assert_float_equal(((const float *)hj_buffer_host_ptr(o))[41], C[41], 1e-6);
  }
  assert_int_equal(cu_dbl.calls("cuStreamBeginCapture_v2"), 3);
  assert_int_equal(L->ngemm, gemms + 6);
  hj_exec_destroy(e);
  hj_module_destroy(m);
  /* with an epilogue: the gemm, then the epilogue kernel in place */
  m = tb_parse(ctx, tb_dot_bias);
  e = tb_compile(ctx, m);
  hj_buffer_t *bias = tb_f32(ctx, HJ_SHAPE(40), 0), *in3[3] = { in[0], in[1], bias }, *o3 = NULL;
  tb_run r = tb_do(ctx, e, in3, 3, &o3, 1);
  assert_int_equal(L->ngemm, 10);   /* runs 1, 2 (captured), 4 and 5 (captured again),
                                      6-10 (eager), this one */
  assert_int_equal(r.to - r.from, 1);
  CU_ASSERT_HAS(L->launches[r.from].func, "_epi");
  assert_int_equal(L->launches[r.from].nparams, 4);   /* a, b, c, out */
  hj_exec_destroy(e);
  hj_buffer_t *all[] = { in[0], in[1], bias, o3, out, out2 };
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) hj_buffer_destroy(all[i]);
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
  /* tiled: one kernel, A, B, C and the fusion's operands */
  tb_double("tiled");
  ctx = tb_ctx(HJ_BACKEND_CUDA);
  hj_buffer_t *a2 = tb_f32(ctx, HJ_SHAPE(32, 48), 0), *b2 = tb_f32(ctx, HJ_SHAPE(48, 40), 0), *c2 = tb_f32(ctx, HJ_SHAPE(40), 0);
  hj_buffer_t *in4[3] = { a2, b2, c2 }, *o4 = NULL;
  m = tb_parse(ctx, tb_dot_bias);
  e = tb_compile(ctx, m);
  r = tb_do(ctx, e, in4, 3, &o4, 1);
  assert_int_equal(tb_log()->ngemm, 0);
  assert_int_equal(r.to - r.from, 1);
  const cuda_double_launch *l = &tb_log()->launches[r.from];
  CU_ASSERT_HAS(l->func, "_mm");
  assert_int_equal(l->nparams, 6);
  assert_true(l->param_vals[0] == (uintptr_t)hj_buffer_host_ptr(a2));
  assert_true(l->param_vals[2] == (uintptr_t)hj_buffer_host_ptr(o4));
  bool has_bias = false;   /* the fusion's operands follow, in its operand order */
  for (int p = 3; p < 6; p++) has_bias |= l->param_vals[p] == (uintptr_t)hj_buffer_host_ptr(c2);
  assert_true(has_bias);
  assert_int_equal(l->block[0], 64);   /* the 64-tile for M = 32: 64 threads of 8x8 outputs */
  hj_exec_destroy(e);
  hj_buffer_destroy(a2);
  hj_buffer_destroy(b2);
  hj_buffer_destroy(c2);
  hj_buffer_destroy(o4);
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
}

/* M <= 8: the skinny kernel under the rule (cuBLAS for 8 < M < 16), one node per matmul
   with its epilogue; a decode block's way of running, one executable with each layer's
   weights: the graph is captured once and its node updated in place, run after run. */
static void test_skinny_matmul_graph(void **state) {
  tb_double(NULL);
  hj_ctx_t *ctx = tb_ctx(HJ_BACKEND_CUDA);
  static const char text[] =
      "HloModule dec\nENTRY main {\n  a = f32[1,48] parameter(0)\n  b = f32[48,40] parameter(1)\n"
      "  c = f32[40] parameter(2)\n  d = f32[1,40] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  cb = f32[1,40] broadcast(c), dimensions={1}\n  ROOT r = f32[1,40] add(d, cb)\n}\n";
  hj_module_t *m = tb_parse(ctx, text);
  hj_exec_t *e = tb_compile(ctx, m);
  hj_buffer_t *a = tb_f32(ctx, HJ_SHAPE(1, 48), 0), *c = tb_f32(ctx, HJ_SHAPE(40), 0), *out = NULL;
  hj_buffer_t *w[3] = { tb_f32(ctx, HJ_SHAPE(48, 40), 0), tb_f32(ctx, HJ_SHAPE(48, 40), 0),
                        tb_f32(ctx, HJ_SHAPE(48, 40), 0) };
  TB_OK(ctx, hj_buffer_create(ctx, HJ_F32, HJ_SHAPE(1, 40), &out));
  tb_run first = { 0, 0 };
  for (int run = 0; run < 9; run++) {   /* three "layers", three "tokens" */
    hj_buffer_t *in[3] = { a, w[run % 3], c };
    tb_run r = tb_do(ctx, e, in, 3, &out, 1);
    assert_int_equal(r.to - r.from, 1);   /* one kernel: the matmul with its bias */
    const cuda_double_launch *l = &tb_log()->launches[r.from];
    CU_ASSERT_HAS(l->func, "_mm");
    assert_int_equal(l->block[0], 256);
    assert_true(l->param_vals[1] == (uintptr_t)hj_buffer_host_ptr(w[run % 3]));
    if (run == 0) first = r;
    else tb_same_args(first, r, (uintptr_t)hj_buffer_host_ptr(w[0]), (uintptr_t)hj_buffer_host_ptr(w[run % 3]));
  }
  assert_int_equal(tb_log()->ngemm, 0);
  assert_int_equal(cu_dbl.calls("cuStreamBeginCapture_v2"), 1);
  assert_true(cu_dbl.calls("cuGraphExecKernelNodeSetParams_v2") >= 6);
  hj_exec_destroy(e);
  hj_module_destroy(m);
  /* 12 rows: cuBLAS and the epilogue kernel */
  static const char text12[] =
      "HloModule m12\nENTRY main {\n  a = f32[12,48] parameter(0)\n  b = f32[48,40] parameter(1)\n"
      "  ROOT d = f32[12,40] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
  m = tb_parse(ctx, text12);
  e = tb_compile(ctx, m);
  hj_buffer_t *a12 = tb_f32(ctx, HJ_SHAPE(12, 48), 0), *in12[2] = { a12, w[0] }, *o12 = NULL;
  tb_do(ctx, e, in12, 2, &o12, 1);
  assert_int_equal(tb_log()->ngemm, 1);
  hj_buffer_t *all[] = { a, c, out, w[0], w[1], w[2], a12, o12 };
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) hj_buffer_destroy(all[i]);
  hj_exec_destroy(e);
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
}

static void test_dump_has_ptx(void **state) {
  tb_double(NULL);
  char dir[] = "/tmp/hlojit_cuda_dumpXXXXXX";
  assert_non_null(mkdtemp(dir));
  setenv("HLOJIT_DUMP_TO", dir, 1);
  hj_ctx_t *ctx = tb_ctx(HJ_BACKEND_CUDA);
  hj_module_t *m = tb_parse(ctx, tb_ew);
  hj_exec_t *e = tb_compile(ctx, m);
  unsetenv("HLOJIT_DUMP_TO");
  DIR *d = opendir(dir);
  struct dirent *de;
  bool ptx = false;
  while ((de = readdir(d))) {
    char p[2048];
    snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
    if (strstr(de->d_name, ".ew.ptx")) {
      FILE *f = fopen(p, "r");
      char buf[8192] = { 0 };
      size_t n = fread(buf, 1, sizeof buf - 1, f);
      fclose(f);
      buf[n] = 0;
      CU_ASSERT_HAS(buf, ".entry hjk_");
      CU_ASSERT_HAS(buf, ".target sm_90a");   /* the double is compute capability 9.0 */
      ptx = true;
    }
    if (de->d_name[0] != '.') unlink(p);
  }
  closedir(d);
  rmdir(dir);
  assert_true(ptx);
  hj_exec_destroy(e);
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_auto_falls_back),
    cmocka_unit_test(test_cuda_explicit_fails),
    cmocka_unit_test(test_run_plumbing),
    cmocka_unit_test(test_oom_refused),
    cmocka_unit_test(test_module_load_fails),
    cmocka_unit_test(test_launch_fails),
    cmocka_unit_test(test_graph_record_replay_update),
    cmocka_unit_test(test_graph_scalar),
    cmocka_unit_test(test_graphs_off_and_host_work),
    cmocka_unit_test(test_staging),
    cmocka_unit_test(test_prefetch),
    cmocka_unit_test(test_matmul_paths),
    cmocka_unit_test(test_skinny_matmul_graph),
    cmocka_unit_test(test_dump_has_ptx),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
