/* cuda_testutil.h — shared by the CUDA backend's unit tests: cmocka includes and access to
   the CUDA test double (tests/cuda_double, built as build/tests/libcuda_double.so by
   backends/cuda/cuda.mk; $HLOJIT_CUDA_DOUBLE overrides the path).

   The test keeps its own dlopen handle on the double for the whole run, so the library —
   and the state the backend and the test share through it — stays loaded while the
   backend opens and closes it. Deliberately independent of hlojit_impl/ (the CUDA layers
   under test need only hlojit.h). */
#ifndef HLOJIT_CUDA_TESTUTIL_H
#define HLOJIT_CUDA_TESTUTIL_H
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <sys/stat.h>
#include "tests/cuda_double/cuda_double.h"

/* The start of a module over x: f32[16,128]: the reducers, the rows' max m and
   e = exp(x - m); the test modules end it their way. */
#define CU_ROW_EXP_HLO(name)                                                                  \
  "HloModule " name "\n"                                                                     \
  "mx { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT m = f32[] maximum(a, b) }\n"  \
  "ad { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b) }\n"      \
  "ENTRY main {\n"                                                                           \
  "  x = f32[16,128] parameter(0)\n"                                                         \
  "  ninf = f32[] constant(-inf)\n"                                                          \
  "  m = f32[16] reduce(x, ninf), dimensions={1}, to_apply=mx\n"                             \
  "  mb = f32[16,128] broadcast(m), dimensions={0}\n"                                        \
  "  d = f32[16,128] subtract(x, mb)\n"                                                      \
  "  e = f32[16,128] exponential(d)\n"
/* softmax rows: one reduction kernel (the max and the sum chained per row) and the exp
   through hlojit's own math (the backend and code-cache tests) */
static const char cu_softmax_hlo[] =
    CU_ROW_EXP_HLO("sm")
    "  z = f32[] constant(0)\n"
    "  s = f32[16] reduce(e, z), dimensions={1}, to_apply=ad\n"
    "  sb = f32[16,128] broadcast(s), dimensions={0}\n"
    "  ROOT o = f32[16,128] divide(e, sb)\n"
    "}\n";

typedef struct cu_double {
  void *lib;
  char path[1024];
  cuda_double_reset_fn reset;
  cuda_double_set_fn set;
  cuda_double_set_str_fn set_str;
  cuda_double_get_fn get;
  cuda_double_calls_fn calls;
  cuda_double_log_fn log;
} cu_double;

static cu_double cu_dbl;

/* Opens the double once; false (with the reason printed) when it is not built. */
static inline bool cu_double_load(void) {
  if (cu_dbl.lib) return true;
  const char *p = getenv("HLOJIT_CUDA_DOUBLE");
  snprintf(cu_dbl.path, sizeof cu_dbl.path, "%s", p ? p : "build/tests/libcuda_double.so");
  if (!strchr(cu_dbl.path, '/')) return false;   /* dlopen would search the system */
  cu_dbl.lib = dlopen(cu_dbl.path, RTLD_NOW | RTLD_LOCAL);
  if (!cu_dbl.lib) {
    print_message("the CUDA test double did not load: %s\n", dlerror());
    return false;
  }
  *(void **)&cu_dbl.reset = dlsym(cu_dbl.lib, "cuda_double_reset");
  *(void **)&cu_dbl.set = dlsym(cu_dbl.lib, "cuda_double_set");
  *(void **)&cu_dbl.set_str = dlsym(cu_dbl.lib, "cuda_double_set_str");
  *(void **)&cu_dbl.get = dlsym(cu_dbl.lib, "cuda_double_get");
  *(void **)&cu_dbl.calls = dlsym(cu_dbl.lib, "cuda_double_calls");
  *(void **)&cu_dbl.log = dlsym(cu_dbl.lib, "cuda_double_log_get");
  return cu_dbl.reset && cu_dbl.set && cu_dbl.set_str && cu_dbl.get && cu_dbl.calls && cu_dbl.log;
}

/* Skips the calling test (saying why) unless the double is there; resets it. */
#define CU_NEED_DOUBLE()                                                                   \
  do {                                                                                     \
    if (!cu_double_load()) {                                                               \
      print_message("skipped: CUDA test double not built (%s; make it with "              \
                    "backends/cuda/cuda.mk)\n", cu_dbl.path);                              \
      skip();                                                                              \
    }                                                                                      \
    cu_dbl.reset();                                                                        \
  } while (0)

/* $CUDA_HOME, else /usr/local/cuda, when |rel| exists under it: the full path in |buf|. */
static inline bool cu_toolkit_file(const char *rel, char *buf, size_t n) {
  const char *home = getenv("CUDA_HOME");
  const char *homes[] = { home, "/usr/local/cuda" };
  for (int i = 0; i < 2; i++) {
    struct stat st;
    if (!homes[i]) continue;
    snprintf(buf, n, "%s/%s", homes[i], rel);
    if (stat(buf, &st) == 0) return true;
  }
  return false;
}

#define CU_ASSERT_HAS(haystack, needle)                                                    \
  do {                                                                                     \
    if (!strstr((haystack), (needle)))                                                     \
      fail_msg("expected \"%s\" in \"%s\"", (needle), (haystack));                         \
  } while (0)

#endif /* HLOJIT_CUDA_TESTUTIL_H */
