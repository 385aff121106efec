/* test_cuda_api.c — backends/cuda/cuda_api.h (our own CUDA declarations) against the real
   cuda.h, cudaTypedefs.h and cublas_api.h of the installed toolkit.

   The header is included with CUDA_API_LISTS_ONLY, so only its X-macro lists are seen, and
   every list is expanded here against the real headers:
   - enums: each of our values equals the real enumerator of the same name;
   - scalar and handle types: the same C type as the real typedef;
   - structs: a mirror built from our field list (with the real field types, themselves
     checked above) has the real struct's size and every field's offset and size, and the
     size our header static-asserts;
   - driver functions: our parameter list makes the same function type as cudaTypedefs.h's
     PFN_<name>_v<version> (which proves both the signature and the version we ask
     cuGetProcAddress for) and as cuda.h's prototype of the exported |symbol|;
   - cuBLAS functions: the same type as cublas_api.h's prototype.
   Compiled with the toolkit's headers only where they exist (cuda.mk passes
   -DHLOJIT_TEST_CUDA_H and -isystem $(CUDA_HOME)/include); elsewhere one skipped test says
   so. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#if defined(HLOJIT_TEST_CUDA_H) && __has_include(<cuda.h>) && \
    __has_include(<cudaTypedefs.h>) && __has_include(<cublas_api.h>)
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cublas_api.h>
#define CUDA_API_LISTS_ONLY
#include "backends/cuda/cuda_api.h"

typedef struct ta_check {
  const char *what;
  long long ours, real;   /* equal when the check passes */
} ta_check;

static int ta_report(const char *title, const ta_check *c, int n) {
  int bad = 0;
  for (int i = 0; i < n; i++) {
    if (c[i].ours != c[i].real) {
      print_error("%s: %s: ours %lld, cuda.h %lld\n", title, c[i].what, c[i].ours, c[i].real);
      bad++;
    }
  }
  print_message("%s: %d checks, %d mismatches\n", title, n, bad);
  return bad;
}
#define TA_COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---- enums ---------------------------------------------------------------------------------- */
#define TA_ENUMERATOR(name, value) { #name, (long long)(value), (long long)(name) },
#define TA_ENUM_LIST(type, list) list(TA_ENUMERATOR)
static const ta_check ta_enums[] = { CUDA_API_ENUMS(TA_ENUM_LIST) };
#define TA_ENUM_SIZE(type, list) { "sizeof(" #type ")", 4, (long long)sizeof(type) },
static const ta_check ta_enum_sizes[] = { CUDA_API_ENUMS(TA_ENUM_SIZE) };

static void test_enum_values(void **state) {
  assert_int_equal(ta_report("enum values", ta_enums, TA_COUNT(ta_enums)), 0);
  assert_int_equal(ta_report("enum sizes", ta_enum_sizes, TA_COUNT(ta_enum_sizes)), 0);
  ta_check extra[] = {
    { "CU_DEVICE_CPU", -1, (long long)CU_DEVICE_CPU },
    { "CU_DEVICE_INVALID", -2, (long long)CU_DEVICE_INVALID },
  };
  assert_int_equal(ta_report("macros", extra, TA_COUNT(extra)), 0);
}

/* ---- scalar and handle types ---------------------------------------------------------------- */
#define TA_SCALAR(type, what)                                                              \
  { #type " is " #what, 1, __builtin_types_compatible_p(type, what) },
#define TA_HANDLE(type, tag)                                                               \
  { #type " is struct " #tag " *", 1, __builtin_types_compatible_p(type, struct tag *) },
static const ta_check ta_types[] = { CUDA_API_SCALARS(TA_SCALAR) CUDA_API_HANDLES(TA_HANDLE) };

static void test_types(void **state) {
  assert_int_equal(ta_report("types", ta_types, TA_COUNT(ta_types)), 0);
}

/* ---- structs -------------------------------------------------------------------------------- */
#define TA_FIELD(type, name, dims) type name dims;
#define TA_MIRROR(name, real, size, fields) struct ta_##name { fields(TA_FIELD) };
CUDA_API_STRUCTS(TA_MIRROR)

/* One row per field: offset and size; one per struct: the size, and the size we assert. */
#define TA_FIELD_CHECK(sname, real, type, name, dims)                                      \
  { #sname "." #name " offset", (long long)offsetof(struct ta_##sname, name),              \
    (long long)offsetof(real, name) },                                                     \
  { #sname "." #name " size", (long long)sizeof(((struct ta_##sname *)0)->name),           \
    (long long)sizeof(((real *)0)->name) },
/* A field list takes F(type, name, dims); these bind the struct's names to each row. */
#define TA_FIELDS_OF(name, real, size, fields)                                             \
  { #name " size", (long long)sizeof(struct ta_##name), (long long)sizeof(real) },         \
  { #name " size asserted by cuda_api.h", (long long)(size), (long long)sizeof(real) },
static const ta_check ta_struct_sizes[] = { CUDA_API_STRUCTS(TA_FIELDS_OF) };

#define TA_F_MEMLOC(type, name, dims) TA_FIELD_CHECK(CUmemLocation, CUmemLocation_v1, type, name, dims)
#define TA_F_EDGE(type, name, dims) TA_FIELD_CHECK(CUgraphEdgeData, CUgraphEdgeData, type, name, dims)
#define TA_F_KNP(type, name, dims) \
  TA_FIELD_CHECK(CUDA_KERNEL_NODE_PARAMS, CUDA_KERNEL_NODE_PARAMS_v2, type, name, dims)
static const ta_check ta_fields[] = {
  CUDA_API_MEM_LOCATION_FIELDS(TA_F_MEMLOC)
  CUDA_API_GRAPH_EDGE_DATA_FIELDS(TA_F_EDGE)
  CUDA_API_KERNEL_NODE_PARAMS_FIELDS(TA_F_KNP)
};

static void test_structs(void **state) {
  /* every struct of CUDA_API_STRUCTS has its fields listed above */
  assert_int_equal(TA_COUNT(ta_struct_sizes), 2 * 3);
  assert_int_equal(ta_report("struct sizes", ta_struct_sizes, TA_COUNT(ta_struct_sizes)), 0);
  assert_int_equal(ta_report("struct fields", ta_fields, TA_COUNT(ta_fields)), 0);
}

/* ---- functions ------------------------------------------------------------------------------ */
#define TA_PFN(name, version, symbol, required, params)                                    \
  { "PFN_" #name "_v" #version, 1,                                                         \
    __builtin_types_compatible_p(CUresult(*) params, PFN_##name##_v##version) },
#define TA_PROTO(name, version, symbol, required, params)                                  \
  { #symbol " prototype", 1, __builtin_types_compatible_p(CUresult(*) params, __typeof__(&symbol)) },
/* Written out, not via TA_PFN: passing |name| on would expand cuda.h's renaming macros
   (cuMemPrefetchAsync -> cuMemPrefetchAsync_v2) before the pasting. */
#define TA_PFN_LEGACY(member, name, version, symbol, required, params)                     \
  { "PFN_" #name "_v" #version, 1,                                                         \
    __builtin_types_compatible_p(CUresult(*) params, PFN_##name##_v##version) },
static const ta_check ta_pfns[] = {
  CUDA_API_BOOT_FUNCS(TA_PFN) CUDA_API_DRIVER_FUNCS(TA_PFN) CUDA_API_LEGACY_FUNCS(TA_PFN_LEGACY)
};
static const ta_check ta_protos[] = {
  CUDA_API_BOOT_FUNCS(TA_PROTO) CUDA_API_DRIVER_FUNCS(TA_PROTO)
};

#define TA_BLAS(ret, symbol, required, params)                                             \
  { #symbol " prototype", 1, __builtin_types_compatible_p(ret(*) params, __typeof__(&symbol)) },
static const ta_check ta_blas[] = { CUDA_API_CUBLAS_FUNCS(TA_BLAS) };

static void test_functions(void **state) {
  assert_int_equal(ta_report("driver PFN_<name>_v<version>", ta_pfns, TA_COUNT(ta_pfns)), 0);
  assert_int_equal(ta_report("driver prototypes", ta_protos, TA_COUNT(ta_protos)), 0);
  assert_int_equal(ta_report("cuBLAS prototypes", ta_blas, TA_COUNT(ta_blas)), 0);
  print_message("checked against CUDA %d.%d headers, cuBLAS %d.%d\n", CUDA_VERSION / 1000,
                CUDA_VERSION % 1000 / 10, CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR);
}

/* A check that can fail: a wrong value and a wrong signature are caught by the same tests. */
static void test_checks_can_fail(void **state) {
  ta_check wrong[] = {
    { "wrong value", 35, (long long)CUDA_ERROR_STUB_LIBRARY },
    { "v1 ABI as v2", 1, __builtin_types_compatible_p(PFN_cuMemPrefetchAsync_v8000,
                                                     PFN_cuMemPrefetchAsync_v12020) },
  };
  print_message("(the next two mismatches are expected)\n");
  assert_int_equal(ta_report("deliberately wrong", wrong, TA_COUNT(wrong)), 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_enum_values),
    cmocka_unit_test(test_types),
    cmocka_unit_test(test_structs),
    cmocka_unit_test(test_functions),
    cmocka_unit_test(test_checks_can_fail),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

#else /* no CUDA toolkit headers */
static void test_cuda_api_skipped(void **state) {
#ifndef HLOJIT_TEST_CUDA_H
  print_message("skipped: not built against a CUDA toolkit's headers (backends/cuda/cuda.mk "
                "adds them when $(CUDA_HOME)/include/cuda.h exists); cuda_api.h is unchecked\n");
#else
  print_message("skipped: cuda.h, cudaTypedefs.h or cublas_api.h missing from the include "
                "path; cuda_api.h is unchecked\n");
#endif
  skip();
}
int main(void) {
  const struct CMUnitTest tests[] = { cmocka_unit_test(test_cuda_api_skipped) };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
