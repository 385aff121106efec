/* eval_testutil.h — helpers shared by the reference evaluator's tests (test_eval.c,
   test_eval_control.c): literals from C arrays, a module parsed from HLO text and run
   through hlo_eval_module, and bit-exact comparisons of the result. Include after
   testutil.h.

     hlo_literal *args[1] = { evtu_arr(HLO_F32, 3, (const float[]){ 1, 2, 3 }) };
     hlo_literal *r = evtu_run(ctx, hlo_text, 1, args);     // args are freed by the call
     evtu_expect_f32_bits(r, (const float[]){ 2, 4, 6 }, 3);
     hlo_literal_free(r); */
#ifndef HLOJIT_EVAL_TESTUTIL_H
#define HLOJIT_EVAL_TESTUTIL_H
#include <math.h>

/* Every test of a file runs on one interpreter context, in *state. */
static inline int evtu_setup(void **state) {
  *state = tu_ctx();
  return 0;
}

static inline int evtu_teardown(void **state) {
  hj_ctx_destroy(*state);
  return 0;
}

/* A rank-1 literal of |n| elements of |t| from |data| (n < 0: a scalar; data NULL: zeros). */
static inline hlo_literal *evtu_arr(hlo_type t, int64_t n, const void *data) {
  hlo_shape s = n < 0 ? hlo_shape_scalar(t) : hlo_shape_array(t, 1, &n);
  hlo_literal *l = hlo_literal_new(NULL, &s);
  assert_non_null(l);
  if (data) memcpy(l->data, data, (size_t)l->nbytes);
  return l;
}

/* Parses |hlo| (the test fails on a parse error); the caller frees the module. */
static inline hlo_module *evtu_parse(hj_ctx_t *ctx, const char *hlo) {
  hlo_module *m = NULL;
  CHECK_OK(ctx, hlo_parse_module(ctx, hlo, strlen(hlo), "test", &m));
  return m;
}

/* Parses |hlo|, evaluates its entry on |args| (freed here) and returns the status. */
static inline hj_status evtu_eval(hj_ctx_t *ctx, const char *hlo, int nargs, hlo_literal **args,
                                  hlo_literal **out) {
  hlo_module *m = evtu_parse(ctx, hlo);
  hj_status st = hlo_eval_module(ctx, m, args, nargs, out);
  hlo_module_free(m);  /* results must not depend on the module */
  for (int i = 0; i < nargs; i++) hlo_literal_free(args[i]);
  return st;
}

/* evtu_eval that must succeed; returns the result (the caller frees it). */
static inline hlo_literal *evtu_run(hj_ctx_t *ctx, const char *hlo, int nargs,
                                    hlo_literal **args) {
  hlo_literal *out = NULL;
  CHECK_OK(ctx, evtu_eval(ctx, hlo, nargs, args, &out));
  assert_non_null(out);
  return out;
}

static inline uint32_t evtu_fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float evtu_bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* The |n| f32 elements of |r| equal |want| bit for bit (so -0 is not +0); any NaN matches
   any NaN. */
static inline void evtu_expect_f32_bits(const hlo_literal *r, const float *want, int n) {
  const float *got = (const float *)r->data;
  for (int i = 0; i < n; i++)
    if (evtu_fbits(got[i]) != evtu_fbits(want[i]) && !(isnan(got[i]) && isnan(want[i])))
      fail_msg("element %d: got %a (0x%08x), want %a (0x%08x)", i, got[i], evtu_fbits(got[i]),
               want[i], evtu_fbits(want[i]));
}

/* The elements of |r|, read as C type |T|, equal the listed integers. */
#define EVTU_EXPECT_ARR(T, r, ...)                                                       \
  do {                                                                                   \
    const T want_[] = { __VA_ARGS__ };                                                   \
    const T *got_ = (const T *)(r)->data;                                                \
    for (size_t i_ = 0; i_ < sizeof want_ / sizeof want_[0]; i_++)                       \
      if (got_[i_] != want_[i_])                                                         \
        fail_msg("element %zu: got %lld, want %lld", i_, (long long)got_[i_],            \
                 (long long)want_[i_]);                                                  \
  } while (0)
#endif
