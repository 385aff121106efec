/* api_testutil.h — shared by test_api.c, test_api_misuse.c and test_api_io.c: a fixture
   holding an interpreter context and an empty graph 't' (ta_setup / ta_teardown for
   cmocka_unit_test_setup_teardown), a check that an error message contains a phrase, and an
   element-by-element float comparison against double references. Include after testutil.h.
   Everything is static inline, so a test file may use any part of it. */
#ifndef HLOJIT_API_TESTUTIL_H
#define HLOJIT_API_TESTUTIL_H
#include <math.h>

typedef struct {
  hj_ctx_t *ctx;
  hj_graph_t *g;
} ta_fix;

static inline int ta_setup(void **state) {
  ta_fix *f = calloc(1, sizeof *f);
  f->ctx = tu_ctx();
  if (hj_graph_create(f->ctx, "t", &f->g) != HJ_OK) return -1;
  *state = f;
  return 0;
}

static inline int ta_teardown(void **state) {
  ta_fix *f = *state;
  hj_graph_destroy(f->g);
  hj_ctx_destroy(f->ctx);
  free(f);
  return 0;
}

/* Fails unless |msg| contains |part|. */
static inline void ta_has(const char *msg, const char *part) {
  if (!strstr(msg, part)) fail_msg("message \"%s\" lacks \"%s\"", msg, part);
}

/* |got[i]| within |tol| of |want[i]| for i < |n|; NaN matches NaN. */
static inline void ta_close_f32(const float *got, const double *want, int n, double tol) {
  for (int i = 0; i < n; i++)
    if (!(fabs(got[i] - want[i]) <= tol) && !(isnan(got[i]) && isnan(want[i])))
      fail_msg("element %d: got %.9g, want %.9g (tol %g)", i, got[i], want[i], tol);
}

#endif
