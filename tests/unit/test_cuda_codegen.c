/* test_cuda_codegen.c — NVPTX code generation (backends/cuda/cuda_codegen.c, cuda_ptxas.c)
   without a GPU: the references are LLVM's NVPTX backend's own output checked by NVIDIA's
   ptxas (skipped, saying so, where there is no ptxas).

   - arch names, parsing, the choice from a device's compute capability;
   - a saxpy kernel built with the IRBuilder becomes `.visible .entry saxpy` with .maxntid,
     the right .target/.version for sm_80 (PTX 7.0) and sm_90a (PTX 8.0), and assembles;
     a*x+y is not contracted into an fma unless asked (mul.rn + add.rn);
   - non-kernel helpers are internalised and inlined (no .func left);
   - a kernel calling libdevice (__nv_expf, __nv_logf, __nv_tanhf, __nv_powf) links only
     what it uses, leaves no external call, assembles (link time printed); without
     libdevice the same module fails with a message naming the function;
   - cuda_intrinsic: the LLVM 19 spelling llvm.nvvm.ex2.approx.f is known and becomes
     ex2.approx.f32; the tempting llvm.nvvm.ex2.approx.f32 is refused;
   - a module that does not verify is HJ_ERR_BACKEND with LLVM's message;
   - ptxas itself: broken PTX fails with its log; a missing ptxas is SKIPPED. */
#include "cuda_testutil.h"

#if !defined(HLOJIT_CUDA_BACKEND) || !__has_include(<llvm-c/Core.h>)
static void test_cuda_codegen_not_built(void **state) {
  print_message("skipped: the CUDA backend is not in this build (backends/cuda/cuda.mk)\n");
  skip();
}
int main(void) {
  const struct CMUnitTest tests[] = { cmocka_unit_test(test_cuda_codegen_not_built) };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
#include "backends/cuda/cuda_codegen.h"
#include "hlojit_impl/emitters/emit.h"
#include <time.h>

static double tc_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static cuda_codegen *tc_cg(cuda_arch a) {
  cuda_codegen *cg = NULL;
  cuda_error e;
  if (cuda_codegen_create(a, &cg, &e) != HJ_OK) fail_msg("cuda_codegen_create: %s", e.msg);
  return cg;
}

/* Asserts ptxas accepts |ptx| for |arch| (or says it skipped); returns the result. */
static cuda_ptxas_result tc_ptxas(const char *ptx, const char *arch, cuda_ptxas_info *info) {
  cuda_ptxas_result r = cuda_ptxas(ptx, arch, info);
  if (r == CUDA_PTXAS_SKIPPED) print_message("ptxas skipped: %s\n", info->ptxas);
  else if (r != CUDA_PTXAS_OK) fail_msg("ptxas -arch=%s failed:\n%s\n--- PTX:\n%s", arch, info->log, ptx);
  return r;
}

static int tc_count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

typedef struct tc_mod {
  LLVMContextRef c;
  LLVMModuleRef m;
  LLVMBuilderRef b;
  LLVMTypeRef f32, i32, i64, gptr;
} tc_mod;

static tc_mod tc_begin(cuda_codegen *cg, const char *name) {
  tc_mod t;
  t.c = LLVMContextCreate();
  t.m = LLVMModuleCreateWithNameInContext(name, t.c);
  t.b = LLVMCreateBuilderInContext(t.c);
  t.f32 = LLVMFloatTypeInContext(t.c);
  t.i32 = LLVMInt32TypeInContext(t.c);
  t.i64 = LLVMInt64TypeInContext(t.c);
  t.gptr = LLVMPointerTypeInContext(t.c, 1);
  cuda_codegen_prepare_module(cg, t.m);
  return t;
}
static void tc_end(tc_mod *t) {
  LLVMDisposeBuilder(t->b);
  LLVMDisposeModule(t->m);
  LLVMContextDispose(t->c);
}

static LLVMValueRef tc_sreg(tc_mod *t, const char *name) {
  cuda_error e;
  LLVMValueRef f = cuda_intrinsic(t->m, name, NULL, 0, &e);
  if (!f) fail_msg("%s", e.msg);
  return LLVMBuildCall2(t->b, LLVMGlobalGetValueType(f), f, NULL, 0, "");
}

/* kernel saxpy(float a, ptr x, ptr y, i32 n): i = ctaid.x * ntid.x + tid.x; if (i < n)
   y[i] = helper(a, x[i], y[i]) with helper a non-kernel function (a*x+y). */
static void tc_build_saxpy(tc_mod *t) {
  LLVMTypeRef hp[] = { t->f32, t->f32, t->f32 };
  LLVMValueRef helper = LLVMAddFunction(t->m, "axpy_helper", LLVMFunctionType(t->f32, hp, 3, 0));
  LLVMPositionBuilderAtEnd(t->b, LLVMAppendBasicBlockInContext(t->c, helper, "e"));
  LLVMValueRef ax = LLVMBuildFMul(t->b, LLVMGetParam(helper, 0), LLVMGetParam(helper, 1), "");
  LLVMBuildRet(t->b, LLVMBuildFAdd(t->b, ax, LLVMGetParam(helper, 2), ""));

  LLVMTypeRef kp[] = { t->f32, t->gptr, t->gptr, t->i32 };
  LLVMTypeRef kty = LLVMFunctionType(LLVMVoidTypeInContext(t->c), kp, 4, 0);
  LLVMValueRef k = LLVMAddFunction(t->m, "saxpy", kty);
  emit_gpu_mark_kernel(t->m, k, 256, 0);
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(t->c, k, "entry");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(t->c, k, "body");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(t->c, k, "done");
  LLVMPositionBuilderAtEnd(t->b, entry);
  LLVMValueRef i = LLVMBuildAdd(
      t->b, LLVMBuildMul(t->b, tc_sreg(t, "llvm.nvvm.read.ptx.sreg.ctaid.x"),
                         tc_sreg(t, "llvm.nvvm.read.ptx.sreg.ntid.x"), ""),
      tc_sreg(t, "llvm.nvvm.read.ptx.sreg.tid.x"), "i");
  LLVMBuildCondBr(t->b, LLVMBuildICmp(t->b, LLVMIntSLT, i, LLVMGetParam(k, 3), ""), body, done);
  LLVMPositionBuilderAtEnd(t->b, body);
  LLVMValueRef i64 = LLVMBuildSExt(t->b, i, t->i64, "");
  LLVMValueRef px = LLVMBuildGEP2(t->b, t->f32, LLVMGetParam(k, 1), &i64, 1, "");
  LLVMValueRef py = LLVMBuildGEP2(t->b, t->f32, LLVMGetParam(k, 2), &i64, 1, "");
  LLVMValueRef args[] = { LLVMGetParam(k, 0), LLVMBuildLoad2(t->b, t->f32, px, ""),
                          LLVMBuildLoad2(t->b, t->f32, py, "") };
  LLVMValueRef r = LLVMBuildCall2(t->b, LLVMGlobalGetValueType(helper), helper, args, 3, "");
  LLVMBuildStore(t->b, r, py);
  LLVMBuildBr(t->b, done);
  LLVMPositionBuilderAtEnd(t->b, done);
  LLVMBuildRetVoid(t->b);
}

static void test_arch(void **state) {
  cuda_arch a;
  cuda_error e;
  assert_int_equal(cuda_arch_parse("sm_90a", &a, &e), HJ_OK);
  assert_int_equal(a, CUDA_SM_90A);
  assert_int_equal(cuda_arch_parse("80", &a, &e), HJ_OK);
  assert_int_equal(a, CUDA_SM_80);
  assert_int_equal(cuda_arch_parse("sm_100", &a, &e), HJ_ERR_INVALID_ARG);
  assert_string_equal(e.msg, "unknown CUDA arch 'sm_100' (sm_80 or sm_90a)");
  assert_int_equal(cuda_arch_for_device(9, 0, &a, &e), HJ_OK);
  assert_int_equal(a, CUDA_SM_90A);
  assert_int_equal(cuda_arch_for_device(8, 6, &a, &e), HJ_OK);
  assert_int_equal(a, CUDA_SM_80);
  assert_int_equal(cuda_arch_for_device(10, 0, &a, &e), HJ_OK);   /* Blackwell: the baseline */
  assert_int_equal(a, CUDA_SM_80);
  assert_int_equal(cuda_arch_for_device(7, 5, &a, &e), HJ_ERR_UNSUPPORTED);
  CU_ASSERT_HAS(e.msg, "compute capability 7.5");
}

static void test_saxpy_both_archs(void **state) {
  for (int a = 0; a < CUDA_ARCH_COUNT; a++) {
    cuda_codegen *cg = tc_cg((cuda_arch)a);
    tc_mod t = tc_begin(cg, "saxpy_mod");
    tc_build_saxpy(&t);
    char *ptx = NULL;
    cuda_error e;
    double t0 = tc_ms();
    if (cuda_compile_ptx(cg, t.m, &ptx, &e) != HJ_OK) fail_msg("%s", e.msg);
    double t1 = tc_ms();
    char want[64];
    snprintf(want, sizeof want, ".target %s", cuda_arch_name((cuda_arch)a));
    CU_ASSERT_HAS(ptx, want);
    snprintf(want, sizeof want, ".version %d.%d", cuda_arch_ptx_version((cuda_arch)a) / 10,
             cuda_arch_ptx_version((cuda_arch)a) % 10);
    CU_ASSERT_HAS(ptx, want);
    CU_ASSERT_HAS(ptx, ".visible .entry saxpy(");
    CU_ASSERT_HAS(ptx, ".maxntid 256, 1, 1");
    assert_null(strstr(ptx, ".minnctapersm"));
    /* no implicit contraction: without the `contract` flag a*x+y keeps both roundings
       (.rn stops ptxas fusing them too), as the CPU evaluates it */
    CU_ASSERT_HAS(ptx, "mul.rn.f32");
    CU_ASSERT_HAS(ptx, "add.rn.f32");
    assert_null(strstr(ptx, "fma."));
    assert_int_equal(tc_count(ptx, ".func"), 0);  /* the helper was internal, then inlined */
    assert_null(strstr(ptx, "axpy_helper"));
    cuda_ptxas_info info;
    if (tc_ptxas(ptx, cuda_arch_name((cuda_arch)a), &info) == CUDA_PTXAS_OK) {
      assert_int_equal(info.nkernels, 1);
      assert_string_equal(info.kernels[0].name, "saxpy");
      assert_true(info.kernels[0].registers > 0);
      print_message("%s: saxpy in %.1f ms, ptxas: %d registers\n", cuda_arch_name((cuda_arch)a),
                    t1 - t0, info.kernels[0].registers);
    }
    free(ptx);
    tc_end(&t);
    cuda_codegen_destroy(cg);
  }
}

/* kernel f(ptr x, ptr y): y[tid] = expf(x) + logf(x) + tanhf(x) + powf(x, 1.5) via libdevice */
static void tc_build_math(tc_mod *t) {
  LLVMTypeRef u1[] = { t->f32 }, u2[] = { t->f32, t->f32 };
  LLVMTypeRef fu = LLVMFunctionType(t->f32, u1, 1, 0), fb = LLVMFunctionType(t->f32, u2, 2, 0);
  const char *unary[] = { "__nv_expf", "__nv_logf", "__nv_tanhf" };
  LLVMTypeRef kp[] = { t->gptr, t->gptr };
  LLVMValueRef k = LLVMAddFunction(t->m, "math", LLVMFunctionType(LLVMVoidTypeInContext(t->c), kp, 2, 0));
  emit_gpu_mark_kernel(t->m, k, 128, 4);
  LLVMPositionBuilderAtEnd(t->b, LLVMAppendBasicBlockInContext(t->c, k, "e"));
  LLVMValueRef i = LLVMBuildZExt(t->b, tc_sreg(t, "llvm.nvvm.read.ptx.sreg.tid.x"), t->i64, "");
  LLVMValueRef x = LLVMBuildLoad2(t->b, t->f32, LLVMBuildGEP2(t->b, t->f32, LLVMGetParam(k, 0), &i, 1, ""), "");
  LLVMValueRef acc = LLVMConstReal(t->f32, 0);
  for (int j = 0; j < 3; j++) {
    LLVMValueRef f = LLVMAddFunction(t->m, unary[j], fu);
    acc = LLVMBuildFAdd(t->b, acc, LLVMBuildCall2(t->b, fu, f, &x, 1, ""), "");
  }
  LLVMValueRef pw = LLVMAddFunction(t->m, "__nv_powf", fb);
  LLVMValueRef pa[] = { x, LLVMConstReal(t->f32, 1.5) };
  acc = LLVMBuildFAdd(t->b, acc, LLVMBuildCall2(t->b, fb, pw, pa, 2, ""), "");
  LLVMBuildStore(t->b, acc, LLVMBuildGEP2(t->b, t->f32, LLVMGetParam(k, 1), &i, 1, ""));
  LLVMBuildRetVoid(t->b);
}

static void test_libdevice(void **state) {
  char path[1024];
  if (!cuda_libdevice_path(path, sizeof path)) {
    print_message("skipped: no libdevice.10.bc\n");
    skip();
  }
  for (int a = 0; a < CUDA_ARCH_COUNT; a++) {
    cuda_codegen *cg = tc_cg((cuda_arch)a);
    for (int round = 0; round < 2; round++) {   /* the second link reuses the file in memory */
      tc_mod t = tc_begin(cg, "math_mod");
      tc_build_math(&t);
      cuda_error e;
      double t0 = tc_ms();
      if (cuda_link_libdevice(cg, t.m, &e) != HJ_OK) fail_msg("%s", e.msg);
      double t1 = tc_ms();
      /* only what is used came across: not, say, sinf */
      assert_null(LLVMGetNamedFunction(t.m, "__nv_sinf"));
      assert_non_null(LLVMGetNamedFunction(t.m, "__nv_expf"));
      char *ptx = NULL;
      if (cuda_optimize(cg, t.m, &e) != HJ_OK || cuda_emit_ptx(cg, t.m, &ptx, &e) != HJ_OK)
        fail_msg("%s", e.msg);
      double t2 = tc_ms();
      assert_null(strstr(ptx, ".extern"));    /* every call resolved */
      assert_null(strstr(ptx, "__nv_"));      /* and inlined */
      assert_int_equal(tc_count(ptx, ".func"), 0);
      CU_ASSERT_HAS(ptx, "ex2.approx");       /* expf's core, from libdevice */
      CU_ASSERT_HAS(ptx, ".maxntid 128, 1, 1\n.minnctapersm 4");
      cuda_ptxas_info info;
      tc_ptxas(ptx, cuda_arch_name((cuda_arch)a), &info);
      print_message("%s round %d: libdevice link %.1f ms, O3 + PTX %.1f ms, %zu bytes of PTX\n",
                    cuda_arch_name((cuda_arch)a), round, t1 - t0, t2 - t1, strlen(ptx));
      free(ptx);
      tc_end(&t);
    }
    cuda_codegen_destroy(cg);
  }
  /* no libdevice: a clear failure naming the function */
  setenv("HLOJIT_LIBDEVICE", "/nonexistent/libdevice.10.bc", 1);
  cuda_codegen *cg = tc_cg(CUDA_SM_80);
  tc_mod t = tc_begin(cg, "math_mod");
  tc_build_math(&t);
  char *ptx = (char *)1;
  cuda_error e;
  assert_int_equal(cuda_compile_ptx(cg, t.m, &ptx, &e), HJ_ERR_UNSUPPORTED);
  assert_null(ptx);
  CU_ASSERT_HAS(e.msg, "kernel calls __nv_expf but libdevice.10.bc was not found");
  tc_end(&t);
  cuda_codegen_destroy(cg);
  unsetenv("HLOJIT_LIBDEVICE");
}

static void test_intrinsic_names(void **state) {
  cuda_codegen *cg = tc_cg(CUDA_SM_80);
  tc_mod t = tc_begin(cg, "ex2_mod");
  cuda_error e;
  assert_null(cuda_intrinsic(t.m, "llvm.nvvm.ex2.approx.f32", NULL, 0, &e));
  assert_string_equal(e.msg, "LLVM 19 has no intrinsic 'llvm.nvvm.ex2.approx.f32'");
  LLVMValueRef ex2 = cuda_intrinsic(t.m, "llvm.nvvm.ex2.approx.f", NULL, 0, &e);
  assert_non_null(ex2);
  LLVMTypeRef f32 = t.f32;
  LLVMValueRef fma = cuda_intrinsic(t.m, "llvm.fma", &f32, 1, &e);   /* overloaded */
  assert_non_null(fma);
  LLVMTypeRef kp[] = { t.gptr };
  LLVMValueRef k = LLVMAddFunction(t.m, "ex2k", LLVMFunctionType(LLVMVoidTypeInContext(t.c), kp, 1, 0));
  emit_gpu_mark_kernel(t.m, k, 0, 0);
  LLVMPositionBuilderAtEnd(t.b, LLVMAppendBasicBlockInContext(t.c, k, "e"));
  LLVMValueRef x = LLVMBuildLoad2(t.b, t.f32, LLVMGetParam(k, 0), "");
  LLVMValueRef y = LLVMBuildCall2(t.b, LLVMGlobalGetValueType(ex2), ex2, &x, 1, "");
  LLVMValueRef a3[] = { y, x, x };
  LLVMBuildStore(t.b, LLVMBuildCall2(t.b, LLVMGlobalGetValueType(fma), fma, a3, 3, ""), LLVMGetParam(k, 0));
  LLVMBuildRetVoid(t.b);
  char *ptx = NULL;
  if (cuda_compile_ptx(cg, t.m, &ptx, &e) != HJ_OK) fail_msg("%s", e.msg);
  CU_ASSERT_HAS(ptx, "ex2.approx.f32");
  CU_ASSERT_HAS(ptx, "fma.rn.f32");
  assert_null(strstr(ptx, ".maxntid"));   /* 0: no bound */
  assert_null(strstr(ptx, ".minnctapersm"));
  cuda_ptxas_info info;
  tc_ptxas(ptx, "sm_80", &info);
  free(ptx);
  tc_end(&t);
  cuda_codegen_destroy(cg);
}

static void test_bad_module(void **state) {
  cuda_codegen *cg = tc_cg(CUDA_SM_80);
  tc_mod t = tc_begin(cg, "bad_mod");
  LLVMValueRef k = LLVMAddFunction(t.m, "bad", LLVMFunctionType(LLVMVoidTypeInContext(t.c), NULL, 0, 0));
  emit_gpu_mark_kernel(t.m, k, 32, 0);
  LLVMPositionBuilderAtEnd(t.b, LLVMAppendBasicBlockInContext(t.c, k, "e"));
  LLVMBuildRet(t.b, LLVMConstInt(t.i32, 1, 0));   /* a void function returning i32 */
  char *ptx = (char *)1;
  cuda_error e;
  assert_int_equal(cuda_compile_ptx(cg, t.m, &ptx, &e), HJ_ERR_BACKEND);
  assert_null(ptx);
  CU_ASSERT_HAS(e.msg, "LLVM: module does not verify: ");
  tc_end(&t);
  cuda_codegen_destroy(cg);
}

static void test_ptxas_itself(void **state) {
  cuda_ptxas_info info;
  const char *bad = ".version 7.0\n.target sm_80\n.address_size 64\n"
                    ".visible .entry k()\n{\n\tmov.u32 %r1, 1;\n\tret;\n}\n";
  cuda_ptxas_result r = cuda_ptxas(bad, "sm_80", &info);
  if (r == CUDA_PTXAS_SKIPPED) {
    print_message("skipped: %s\n", info.ptxas);
    skip();
  }
  assert_int_equal(r, CUDA_PTXAS_FAILED);   /* %r1 is not declared */
  CU_ASSERT_HAS(info.log, "error");
  setenv("HLOJIT_PTXAS", "/nonexistent/ptxas", 1);
  assert_int_equal(cuda_ptxas(bad, "sm_80", &info), CUDA_PTXAS_SKIPPED);
  CU_ASSERT_HAS(info.ptxas, "no ptxas (tried /nonexistent/ptxas)");
  unsetenv("HLOJIT_PTXAS");
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_arch),
    cmocka_unit_test(test_saxpy_both_archs),
    cmocka_unit_test(test_libdevice),
    cmocka_unit_test(test_intrinsic_names),
    cmocka_unit_test(test_bad_module),
    cmocka_unit_test(test_ptxas_itself),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
