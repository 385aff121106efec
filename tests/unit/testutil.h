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
/* Tests see every part (each part's own header; the evaluator's internals too). */
#include "hlojit_impl/ir/ir.h"
#include "hlojit_impl/text/text.h"
#include "hlojit_impl/eval/eval_internal.h"
#include "hlojit_impl/passes/passes.h"
#include "hlojit_impl/runtime/runtime.h"
#include "hlojit_impl/api/api.h"
#include "hlojit_impl/backend.h"

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

/* ---- folders of .hlo files, parsing a file, building IR, main() without LLVM ---------- */
#include <dirent.h>

/* Calls |fn|(path, user) on every file of |dir| named "*.hlo" (a name before the suffix),
   in readdir order; the names are read first. Returns how many, or -1 when |dir| cannot
   be opened. */
static inline int tu_each_hlo(const char *dir, void (*fn)(const char *path, void *user),
                              void *user) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  char **names = NULL;
  for (struct dirent *e; (e = readdir(d));) {
    size_t n = strlen(e->d_name);
    if (n > 4 && strcmp(e->d_name + n - 4, ".hlo") == 0) arrput(names, strdup(e->d_name));
  }
  closedir(d);
  for (ptrdiff_t i = 0; i < arrlen(names); i++) {
    char path[4096 + 256];   /* a directory name of up to 4096, a file name of up to 255 */
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    fn(path, user);
    free(names[i]);
  }
  int n = (int)arrlen(names);
  arrfree(names);
  return n;
}

/* Reads |path| (failing the test when it cannot) and parses it with |ctx|; returns the
   status, *m the module. |text|: receives the text (free it), or NULL: freed. */
static inline hj_status tu_parse_path(hj_ctx_t *ctx, const char *path, hlo_module **m,
                                      char **text) {
  size_t len = 0;
  char *t = tu_read_file(path, &len);
  assert_non_null(t);
  hj_status st = hlo_parse_module(ctx, t, len, path, m);
  if (text) *text = t;
  else free(t);
  return st;
}

/* The folders of modules XLA or JAX wrote: [0] $HLOJIT_TEST_DATA/fixtures/jax (in the
   repo), [1] the shared corpus ($HLOJIT_CORPUS, else ../shared/hlo-corpus), [2] its
   golden/ folder. */
typedef struct tu_xla_dirs { char dir[3][1024]; } tu_xla_dirs;

static inline tu_xla_dirs tu_xla_module_dirs(void) {
  tu_xla_dirs x;
  const char *corpus = getenv("HLOJIT_CORPUS");
  if (!corpus) corpus = "../shared/hlo-corpus";
  snprintf(x.dir[0], sizeof x.dir[0], "%s/fixtures/jax", tu_data_dir());
  snprintf(x.dir[1], sizeof x.dir[1], "%s", corpus);
  snprintf(x.dir[2], sizeof x.dir[2], "%s/golden", corpus);
  return x;
}

/* hlo_ints of the int arguments, in |m|'s arena; TU_INTS(m, 1, 2) counts them. */
static inline hlo_ints tu_ints(hlo_module *m, int n, ...) {
  int64_t v[16];
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n; i++) v[i] = va_arg(ap, int);
  va_end(ap);
  return hlo_ints_dup(m, v, n);
}
#define TU_INTS(m, ...) \
  tu_ints((m), (int)(sizeof((int[]){ __VA_ARGS__ }) / sizeof(int)), __VA_ARGS__)

/* Makes |p| parameter |i| of |c| (c->params grows as needed); returns |p|. */
static inline hlo_instr *tu_set_param(hlo_comp *c, int i, hlo_instr *p) {
  p->index = i;
  while (arrlen(c->params) <= i) arrput(c->params, NULL);
  c->params[i] = p;
  return p;
}

/* main() of a test that needs the LLVM-C headers when they are not on the include path:
   one test, test_not_built, that says so and is skipped. */
static inline void tu_not_built(void **state) {
  print_message("skipped: LLVM-C headers not on the include path\n");
  skip();
}

static inline int tu_main_without_llvm(void) {
  const struct CMUnitTest tests[] = { { "test_not_built", tu_not_built, NULL, NULL, NULL } };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
