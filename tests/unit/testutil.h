/* testutil.h — shared by the cmocka unit tests: includes, and helpers to parse a module
   from a string and to read a file. Each test binary defines its own main(). */
#ifndef HLOJIT_TESTUTIL_H
#define HLOJIT_TESTUTIL_H
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hlojit_impl/internal.h"

/* Fails the test with the context's message when |st| is not HJ_OK. */
#define CHECK_OK(ctx, st)                                                               \
  do {                                                                                  \
    hj_status st_ = (st);                                                               \
    if (st_ != HJ_OK) fail_msg("%s: %s", hj_status_name(st_), hj_ctx_error(ctx));       \
  } while (0)

static inline hj_ctx_t *tu_ctx(void) {
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  o.backend = HJ_BACKEND_INTERP;
  hj_ctx_t *ctx = NULL;
  if (hj_ctx_create(&o, &ctx) != HJ_OK) fail_msg("hj_ctx_create failed");
  return ctx;
}

/* Reads a whole file (malloc'd, NUL-terminated) or returns NULL. */
static inline char *tu_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *p = malloc((size_t)n + 1);
  if (p && fread(p, 1, (size_t)n, f) != (size_t)n) { free(p); p = NULL; }
  fclose(f);
  if (p) { p[n] = 0; if (len) *len = (size_t)n; }
  return p;
}

/* Directory of test data (tests/), from $HLOJIT_TEST_DATA or the default. */
static inline const char *tu_data_dir(void) {
  const char *d = getenv("HLOJIT_TEST_DATA");
  return d ? d : "tests";
}
#endif
