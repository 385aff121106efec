/* test_jit.c — the tracing JIT (hlojit.h's hj_jit_*; hlojit_impl/jit/) on the CPU backend:
   buckets (powers of two, explicit lists, the cap at the declared max), compiles counted by
   the stats, the LRU and its evictions, miss reasons and the HLOJIT_LOG line, padding
   declined (exact sizes), errors, a GPT-2-decode-shaped loop with the position as a runtime
   scalar (one compile for 500 steps), and one test per tracing pitfall documented in
   hlojit.h. References are computed here in double with plain loops (the NumPy comparison
   of every length 1..1000 is tests/py/test_jit_numpy.py). */
#include "testutil.h"
#include <math.h>
#include <unistd.h>
#include <fcntl.h>
#include <pthread.h>

static hj_ctx_t *tj_ctx(void) {
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  o.num_threads = 1;
  hj_ctx_t *ctx = NULL;
  if (hj_ctx_create(&o, &ctx) != HJ_OK) fail_msg("hj_ctx_create failed");
  return ctx;
}

static float tj_val(int i) { return (float)(((i * 7919) % 2001) - 1000) / 500.0f; }

static hj_buffer_t *tj_buf(hj_ctx_t *ctx, hj_shape_t s, int seed) {
  int64_t n = hj_shape_numel(s);
  float *v = malloc(sizeof *v * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) v[i] = tj_val((int)i + seed);
  hj_buffer_t *b = NULL;
  CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_F32, s, v, &b));
  free(v);
  return b;
}

static hj_jit_t *tj_jit(hj_ctx_t *ctx, hj_jit_build_fn fn, void *user, const hj_jit_param_t *p, int n,
                        hj_jit_options_t *o) {
  hj_jit_options_t def;
  if (!o) {
    hj_jit_options_init(&def);
    o = &def;
  }
  o->params = p;
  o->nparams = n;
  hj_jit_t *j = NULL;
  CHECK_OK(ctx, hj_jit_create(ctx, fn, user, o, &j));
  return j;
}

static hj_jit_stats_t tj_stats(hj_jit_t *j) {
  hj_jit_stats_t s;
  assert_int_equal(hj_jit_stats(j, &s), HJ_OK);
  return s;
}

static void tj_has(const char *msg, const char *part) {
  if (!strstr(msg, part)) fail_msg("\"%s\" lacks \"%s\"", msg, part);
}

/* ---- softmax over a dynamic dim: buckets and compiles ------------------------------------- */

static hj_status tj_softmax(hj_graph_t *g, const hj_tensor_t *p, int n, void *user) {
  return hj_graph_output(g, hj_softmax(p[0], -1));   // (2, <=T)
}

static void tj_check_softmax(hj_ctx_t *ctx, hj_jit_t *j, int T) {
  hj_buffer_t *x = tj_buf(ctx, HJ_SHAPE(2, T), T), *out[1] = { NULL };
  CHECK_OK(ctx, hj_jit_call(j, &x, 1, out, 1));
  hj_shape_t s = hj_buffer_shape(out[0]);
  assert_int_equal(s.rank, 2);
  assert_int_equal(s.dims[1], T);
  assert_int_equal(hj_buffer_nbytes(out[0]), sizeof(float) * 2 * (size_t)T);
  const float *xv = hj_buffer_host_ptr(x), *y = hj_buffer_host_ptr(out[0]);
  for (int r = 0; r < 2; r++) {
    double m = -INFINITY, sum = 0;
    for (int i = 0; i < T; i++) m = fmax(m, xv[r * T + i]);
    for (int i = 0; i < T; i++) sum += exp(xv[r * T + i] - m);
    for (int i = 0; i < T; i++) {
      double want = exp(xv[r * T + i] - m) / sum;
      if (fabs(y[r * T + i] - want) > 1e-6 * fmax(1, fabs(want)))
        fail_msg("T=%d [%d,%d]: %.9g, want %.9g", T, r, i, y[r * T + i], want);
    }
  }
  hj_buffer_destroy(x);
  hj_buffer_destroy(out[0]);
}

static void test_power_of_two_buckets(void **state) {
  hj_ctx_t *ctx = tj_ctx();
  hj_jit_param_t p[1] = { { "x", HJ_SHAPE(2, HJ_DYN(20)) } };
  hj_jit_t *j = tj_jit(ctx, tj_softmax, NULL, p, 1, NULL);
  for (int T = 1; T <= 20; T++) tj_check_softmax(ctx, j, T);
  hj_jit_stats_t s = tj_stats(j);
  assert_int_equal(s.compiles, 6);   /* 1 2 4 8 16 20 */
  assert_int_equal(s.calls, 20);
  assert_int_equal(s.memory_hits, 14);
  assert_int_equal(s.exact_compiles, 0);
  assert_int_equal(s.entries, 6);
  assert_string_equal(s.pad_note, "");
  tj_has(s.last_miss, "param 'x' dim 1: bucket 16 -> 20");
  for (int T = 20; T >= 1; T--) tj_check_softmax(ctx, j, T);   /* all hits now */
  assert_int_equal(tj_stats(j).compiles, 6);
  assert_true(tj_stats(j).compile_ms > 0);
  hj_jit_destroy(j);
  hj_ctx_destroy(ctx);
}

static void test_explicit_buckets(void **state) {
  hj_ctx_t *ctx = tj_ctx();
  hj_jit_param_t p[1] = { { "x", HJ_SHAPE(2, HJ_DYN(20)) } };
  hj_jit_options_t o;
  hj_jit_options_init(&o);
  int64_t b[2] = { 3, 10 };
  o.buckets = b;
  o.nbuckets = 2;
  hj_jit_t *j = tj_jit(ctx, tj_softmax, NULL, p, 1, &o);
  for (int T = 1; T <= 20; T++) tj_check_softmax(ctx, j, T);
  assert_int_equal(tj_stats(j).compiles, 3);   /* 3 10 20 */
  hj_jit_destroy(j);
  int64_t bad[2] = { 10, 3 };
  o.buckets = bad;
  hj_jit_t *j2 = NULL;
  assert_int_equal(hj_jit_create(ctx, tj_softmax, NULL, &o, &j2), HJ_ERR_INVALID_ARG);
  assert_null(j2);
  tj_has(hj_ctx_error(ctx), "ascending");
  hj_ctx_destroy(ctx);
}

static void test_lru_eviction(void **state) {
  hj_ctx_t *ctx = tj_ctx();
  hj_jit_param_t p[1] = { { "x", HJ_SHAPE(2, HJ_DYN(16)) } };
  hj_jit_options_t o;
  hj_jit_options_init(&o);
  o.cache_entries = 2;
  hj_jit_t *j = tj_jit(ctx, tj_softmax, NULL, p, 1, &o);
  int Ts[] = { 1, 2, 4, 1, 2 };   /* 1 2 4: 4 evicts 1; 1 evicts 2; 2 evicts 4 */
  for (int i = 0; i < 5; i++) tj_check_softmax(ctx, j, Ts[i]);
  hj_jit_stats_t s = tj_stats(j);
  assert_int_equal(s.compiles, 5);
  assert_int_equal(s.evictions, 3);
  assert_int_equal(s.entries, 2);
  tj_check_softmax(ctx, j, 2);   /* most recent: a hit */
  assert_int_equal(tj_stats(j).memory_hits, 1);
  hj_jit_destroy(j);
  hj_ctx_destroy(ctx);
}

/* ---- the tracing pitfalls (hlojit.h) ------------------------------------------------------ */

static float tj_scale = 2.0f;
static int tj_traces;

static hj_status tj_scaled(hj_graph_t *g, const hj_tensor_t *p, int n, void *user) {
  tj_traces++;
  return hj_graph_output(g, hj_mul(p[0], hj_scalar(g, HJ_F32, tj_scale)));   /* read at trace time */
}

static float tj_first(hj_jit_t *j, hj_ctx_t *ctx, hj_shape_t s, int seed, float *x0) {
  hj_buffer_t *x = tj_buf(ctx, s, seed), *out[1] = { NULL };
  CHECK_OK(ctx, hj_jit_call(j, &x, 1, out, 1));
  float r = ((float *)hj_buffer_host_ptr(out[0]))[0];
  if (x0) *x0 = ((float *)hj_buffer_host_ptr(x))[0];
  hj_buffer_destroy(x);
  hj_buffer_destroy(out[0]);
  return r;
}

/* A C value read in the build function is a constant of the compiled code. */
static void test_pitfall_frozen_values(void **state) {
  hj_ctx_t *ctx = tj_ctx();
  hj_jit_param_t p[1] = { { "x", HJ_SHAPE(HJ_DYN(8)) } };
  hj_jit_t *j = tj_jit(ctx, tj_scaled, NULL, p, 1, NULL);
  tj_scale = 2.0f;
  float x0, y = tj_first(j, ctx, HJ_SHAPE(4), 1, &x0);
  assert_true(y == 2.0f * x0);
  tj_scale = 3.0f;                       /* ignored: no retrace */
  y = tj_first(j, ctx, HJ_SHAPE(4), 1, &x0);
  assert_true(y == 2.0f * x0);
  assert_int_equal(tj_stats(j).compiles, 1);
  y = tj_first(j, ctx, HJ_SHAPE(7), 1, &x0);   /* a new bucket retraces: now it is 3 */
  assert_true(y == 3.0f * x0);
  assert_int_equal(tj_traces, 2);
  hj_jit_destroy(j);
  hj_ctx_destroy(ctx);
}

/* A branch on data (here: the caller's buffer, read at trace time) picks one side for good;
   hj_select is the data-dependent form. */
static hj_status tj_branchy(hj_graph_t *g, const hj_tensor_t *p, int n, void *user) {
  const float *host = hj_buffer_host_ptr(*(hj_buffer_t **)user);
  hj_tensor_t one = hj_scalar(g, HJ_F32, 1), x = p[0];
  hj_tensor_t frozen = host[0] > 0 ? hj_add(x, one) : hj_sub(x, one);
  hj_tensor_t live = hj_select(hj_compare(x, hj_scalar(g, HJ_F32, 0), HJ_CMP_GT), hj_add(x, one), hj_sub(x, one));
  hj_graph_output(g, frozen);
  return hj_graph_output(g, live);
}

static void test_pitfall_frozen_branches(void **state) {
  hj_ctx_t *ctx = tj_ctx();
  hj_jit_param_t p[1] = { { "x", HJ_SHAPE(1) } };
  hj_buffer_t *x = NULL;
  hj_jit_t *j = tj_jit(ctx, tj_branchy, &x, p, 1, NULL);
  float vals[2] = { 5, -5 };
  for (int k = 0; k < 2; k++) {
    CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_F32, HJ_SHAPE(1), &vals[k], &x));
    hj_buffer_t *out[2] = { NULL, NULL };
    CHECK_OK(ctx, hj_jit_call(j, &x, 1, out, 2));
    float frozen = *(float *)hj_buffer_host_ptr(out[0]), live = *(float *)hj_buffer_host_ptr(out[1]);
    assert_true(frozen == vals[k] + 1);               /* the first call's branch, both times */
    assert_true(live == (vals[k] > 0 ? vals[k] + 1 : vals[k] - 1));
    hj_buffer_destroy(out[0]);
    hj_buffer_destroy(out[1]);
    hj_buffer_destroy(x);
  }
  assert_int_equal(tj_stats(j).compiles, 1);
  hj_jit_destroy(j);
  hj_ctx_destroy(ctx);
}

static hj_status tj_rowsum(hj_graph_t *g, const hj_tensor_t *p, int n, void *user) {
  int64_t d = 1;
  return hj_graph_output(g, hj_reduce(p[0], HJ_RED_SUM, &d, 1));
}

/* Another static size or dtype is a new trace; the stats say which changed. */
static void test_pitfall_static_shape_change(void **state) {
  hj_ctx_t *ctx = tj_ctx();
  hj_jit_param_t p[1] = { { "x", HJ_SHAPE(HJ_DYN(16), 4) } };
  hj_jit_t *j = tj_jit(ctx, tj_rowsum, NULL, p, 1, NULL);
  tj_first(j, ctx, HJ_SHAPE(3, 4), 0, NULL);
  tj_has(tj_stats(j).last_miss, "first call");
  tj_first(j, ctx, HJ_SHAPE(3, 5), 0, NULL);
  tj_has(tj_stats(j).last_miss, "param 'x' dim 1: 4 -> 5 (not a dynamic dim: a new trace)");
  double v[6] = { 1, 2, 3, 4, 5, 6 };
  hj_buffer_t *x = NULL, *out[1] = { NULL };
  CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_F64, HJ_SHAPE(3, 2), v, &x));
  CHECK_OK(ctx, hj_jit_call(j, &x, 1, out, 1));
  tj_has(tj_stats(j).last_miss, "param 'x': dtype f32 -> f64");
  const double *r = hj_buffer_host_ptr(out[0]);
  assert_true(r[0] == 3 && r[1] == 7 && r[2] == 11);
  assert_int_equal(tj_stats(j).compiles, 3);
  hj_buffer_destroy(x);
  hj_buffer_destroy(out[0]);
  /* the rank must match the declaration */
  x = tj_buf(ctx, HJ_SHAPE(12), 0);
  out[0] = NULL;
  assert_int_equal(hj_jit_call(j, &x, 1, out, 1), HJ_ERR_SHAPE);
  tj_has(hj_ctx_error(ctx), "declared with rank 2");
  hj_buffer_destroy(x);
  hj_jit_destroy(j);
  hj_ctx_destroy(ctx);
}

/* Outputs belong to the caller: a later call never overwrites an earlier result; a buffer
   passed in must have the real shape. */
static void test_pitfall_outputs_are_callers(void **state) {
  hj_ctx_t *ctx = tj_ctx();
  hj_jit_param_t p[1] = { { "x", HJ_SHAPE(2, HJ_DYN(16)) } };
  hj_jit_t *j = tj_jit(ctx, tj_softmax, NULL, p, 1, NULL);
  hj_buffer_t *x1 = tj_buf(ctx, HJ_SHAPE(2, 5), 1), *x2 = tj_buf(ctx, HJ_SHAPE(2, 6), 2), *a[1] = { 0 }, *b[1] = { 0 };
  CHECK_OK(ctx, hj_jit_call(j, &x1, 1, a, 1));
  float keep[10];
  memcpy(keep, hj_buffer_host_ptr(a[0]), sizeof keep);
  CHECK_OK(ctx, hj_jit_call(j, &x2, 1, b, 1));   /* the same bucket (8) */
  assert_ptr_not_equal(hj_buffer_host_ptr(a[0]), hj_buffer_host_ptr(b[0]));
  assert_memory_equal(keep, hj_buffer_host_ptr(a[0]), sizeof keep);
  /* the caller's buffer of the real shape is filled; a wrong one is refused */
  hj_buffer_t *mine = NULL;
  CHECK_OK(ctx, hj_buffer_create(ctx, HJ_F32, HJ_SHAPE(2, 5), &mine));
  CHECK_OK(ctx, hj_jit_call(j, &x1, 1, &mine, 1));
  assert_memory_equal(keep, hj_buffer_host_ptr(mine), sizeof keep);
  hj_buffer_t *wrong = mine;
  assert_int_equal(hj_jit_call(j, &x2, 1, &wrong, 1), HJ_ERR_SHAPE);
  tj_has(hj_ctx_error(ctx), "this call's result is f32[2,6]");
  hj_buffer_destroy(mine);
  hj_buffer_destroy(a[0]);
  hj_buffer_destroy(b[0]);
  hj_buffer_destroy(x1);
  hj_buffer_destroy(x2);
  hj_jit_destroy(j);
  hj_ctx_destroy(ctx);
}

/* ---- padding declined, errors, the log ------------------------------------------------------- */

static hj_status tj_sorted(hj_graph_t *g, const hj_tensor_t *p, int n, void *user) {
  return hj_graph_output(g, hj_sort(p[0], 0, false));
}

static void test_padding_declined(void **state) {
  hj_ctx_t *ctx = tj_ctx();
  hj_jit_param_t p[1] = { { "x", HJ_SHAPE(HJ_DYN(16)) } };
  hj_jit_t *j = tj_jit(ctx, tj_sorted, NULL, p, 1, NULL);
  for (int T = 3; T <= 5; T++) {
    hj_buffer_t *x = tj_buf(ctx, HJ_SHAPE(T), T), *out[1] = { NULL };
    CHECK_OK(ctx, hj_jit_call(j, &x, 1, out, 1));
    const float *y = hj_buffer_host_ptr(out[0]);
    assert_int_equal(hj_buffer_shape(out[0]).dims[0], T);
    for (int i = 1; i < T; i++) assert_true(y[i - 1] <= y[i]);
    hj_buffer_destroy(x);
    hj_buffer_destroy(out[0]);
  }
  hj_jit_stats_t s = tj_stats(j);
  assert_int_equal(s.compiles, 3);   /* exact sizes: one each */
  assert_int_equal(s.exact_compiles, 3);
  tj_has(s.pad_note, "op 'sort'");
  hj_jit_destroy(j);
  hj_ctx_destroy(ctx);
}

static hj_status tj_failing(hj_graph_t *g, const hj_tensor_t *p, int n, void *user) {
  hj_graph_output(g, hj_add(p[0], p[1]));   /* (<=4) + (5): a shape error, recorded by the graph */
  return HJ_OK;
}

static void test_errors(void **state) {
  hj_ctx_t *ctx = tj_ctx();
  hj_jit_param_t p[2] = { { "x", HJ_SHAPE(HJ_DYN(4)) }, { NULL, HJ_SHAPE(5) } };
  hj_jit_options_t o;
  hj_jit_options_init(&o);
  hj_jit_t *j = NULL;
  assert_int_equal(hj_jit_create(ctx, NULL, NULL, &o, &j), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_jit_create(ctx, tj_failing, NULL, NULL, &j), HJ_ERR_INVALID_ARG);
  o.nparams = 2;   /* params NULL */
  assert_int_equal(hj_jit_create(ctx, tj_failing, NULL, &o, &j), HJ_ERR_INVALID_ARG);
  assert_null(j);
  j = tj_jit(ctx, tj_failing, NULL, p, 2, NULL);
  hj_buffer_t *in[2] = { tj_buf(ctx, HJ_SHAPE(5), 0), tj_buf(ctx, HJ_SHAPE(5), 0) }, *out[1] = { NULL };
  assert_int_equal(hj_jit_call(j, in, 2, out, 1), HJ_ERR_SHAPE);   /* 5 > HJ_DYN(4) */
  tj_has(hj_ctx_error(ctx), "dim 0 of parameter 'x' is 5, declared HJ_DYN(4)");
  assert_int_equal(hj_jit_call(j, in, 1, out, 1), HJ_ERR_INVALID_ARG);
  tj_has(hj_ctx_error(ctx), "1 inputs given, the function has 2");
  hj_buffer_destroy(in[0]);
  in[0] = tj_buf(ctx, HJ_SHAPE(3), 0);
  assert_int_equal(hj_jit_call(j, in, 2, out, 1), HJ_ERR_SHAPE);   /* the graph's own error */
  tj_has(hj_ctx_error(ctx), "hj_add");
  assert_null(out[0]);
  assert_int_equal(tj_stats(j).compiles, 0);
  hj_buffer_t *nul[2] = { NULL, in[1] };
  assert_int_equal(hj_jit_call(j, nul, 2, out, 1), HJ_ERR_INVALID_ARG);
  tj_has(hj_ctx_error(ctx), "input 0 ('x') is NULL");
  hj_buffer_destroy(in[0]);
  hj_buffer_destroy(in[1]);
  hj_jit_destroy(j);
  /* a wrong number of outputs is refused after the trace, and nothing is made */
  hj_jit_param_t q[1] = { { "x", HJ_SHAPE(2, HJ_DYN(8)) } };
  j = tj_jit(ctx, tj_softmax, NULL, q, 1, NULL);
  hj_buffer_t *x = tj_buf(ctx, HJ_SHAPE(2, 3), 0), *two[2] = { NULL, NULL };
  assert_int_equal(hj_jit_call(j, &x, 1, two, 2), HJ_ERR_INVALID_ARG);
  tj_has(hj_ctx_error(ctx), "2 outputs given, the function has 1");
  assert_null(two[0]);
  hj_buffer_destroy(x);
  hj_jit_destroy(j);
  hj_jit_destroy(NULL);
  hj_ctx_destroy(ctx);
}

static void test_log_line(void **state) {
  hj_ctx_t *ctx = tj_ctx();
  setenv("HLOJIT_LOG", "1", 1);
  hj_jit_param_t p[1] = { { "x", HJ_SHAPE(2, HJ_DYN(16)) } };
  hj_jit_options_t o;
  hj_jit_options_init(&o);
  o.name = "logged";
  hj_jit_t *j = tj_jit(ctx, tj_softmax, NULL, p, 1, &o);
  unsetenv("HLOJIT_LOG");
  char path[] = "/tmp/hlojit_test_jit_log_XXXXXX";
  int fd = mkstemp(path), saved = dup(2);
  assert_true(fd >= 0);
  dup2(fd, 2);
  tj_check_softmax(ctx, j, 3);
  tj_check_softmax(ctx, j, 4);   /* a hit: no line */
  tj_check_softmax(ctx, j, 5);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(fd);
  char *text = tu_read_file(path, NULL);
  unlink(path);
  assert_non_null(text);
  tj_has(text, "hlojit: jit 'logged': miss 1 (first call): trace ");
  tj_has(text, "hlojit: jit 'logged': miss 2 (param 'x' dim 1: bucket 4 -> 8): trace ");
  int lines = 0;
  for (char *c = text; *c; c++) lines += *c == '\n';
  assert_int_equal(lines, 2);
  free(text);
  hj_jit_destroy(j);
  hj_ctx_destroy(ctx);
}

/* ---- a GPT-2-decode-shaped loop: the position is a runtime scalar ------------------------------ */

/* C channels, L the cache length. One attention head: the new token's k, v go into row
   |pos| of the caches (dynamic-update-slice), q attends over rows 0..pos (iota <= pos),
   and the updated caches are outputs (fed back in by the caller). */
enum { TJ_C = 8, TJ_L = 512 };

static hj_status tj_decode(hj_graph_t *g, const hj_tensor_t *p, int n, void *user) {
  hj_tensor_t x = p[0], kc = p[1], vc = p[2], pos = p[3];   // (1, C) (L, C) (L, C) ()
  hj_tensor_t zero = hj_scalar(g, HJ_S32, 0), st[2] = { pos, zero };
  hj_tensor_t q = hj_mul(x, hj_scalar(g, HJ_F32, 0.5)), k = hj_tanh(x), v = hj_sin(x);   // (1, C)
  hj_tensor_t k2 = hj_dynamic_update_slice(kc, k, st), v2 = hj_dynamic_update_slice(vc, v, st);
  int64_t perm[2] = { 1, 0 };
  hj_tensor_t s = hj_mul(hj_matmul(q, hj_transpose(k2, perm, 2)), hj_scalar(g, HJ_F32, 1 / sqrt(TJ_C)));  // (1, L)
  hj_tensor_t j = hj_iota(g, HJ_S32, HJ_SHAPE(1, TJ_L), 1);
  hj_tensor_t s2 = hj_select(hj_compare(j, pos, HJ_CMP_LE), s, hj_scalar(g, HJ_F32, -INFINITY));
  hj_graph_output(g, hj_matmul(hj_softmax(s2, -1), v2));   // (1, C)
  hj_graph_output(g, k2);
  return hj_graph_output(g, v2);
}

static void test_decode_runtime_position(void **state) {
  hj_ctx_t *ctx = tj_ctx();
  hj_jit_param_t p[4] = { { "x", HJ_SHAPE(1, TJ_C) }, { "k_cache", HJ_SHAPE(TJ_L, TJ_C) },
                          { "v_cache", HJ_SHAPE(TJ_L, TJ_C) }, { "pos", HJ_SCALAR } };
  hj_jit_t *j = tj_jit(ctx, tj_decode, NULL, p, 4, NULL);
  static double K[TJ_L][TJ_C], V[TJ_L][TJ_C];
  hj_buffer_t *kc = NULL, *vc = NULL;
  CHECK_OK(ctx, hj_buffer_create(ctx, HJ_F32, HJ_SHAPE(TJ_L, TJ_C), &kc));
  CHECK_OK(ctx, hj_buffer_create(ctx, HJ_F32, HJ_SHAPE(TJ_L, TJ_C), &vc));
  for (int32_t pos = 0; pos < 500; pos++) {
    float xv[TJ_C];
    for (int c = 0; c < TJ_C; c++) xv[c] = tj_val(pos * TJ_C + c);
    hj_buffer_t *in[4] = { NULL, kc, vc, NULL }, *out[3] = { NULL, NULL, NULL };
    CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_F32, HJ_SHAPE(1, TJ_C), xv, &in[0]));
    CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_S32, HJ_SCALAR, &pos, &in[3]));
    CHECK_OK(ctx, hj_jit_call(j, in, 4, out, 3));
    /* the reference, in double */
    double q[TJ_C], sc[TJ_L], m = -INFINITY, sum = 0;
    for (int c = 0; c < TJ_C; c++) {
      q[c] = 0.5 * xv[c];
      K[pos][c] = tanh(xv[c]);
      V[pos][c] = sin(xv[c]);
    }
    for (int t = 0; t <= pos; t++) {
      sc[t] = 0;
      for (int c = 0; c < TJ_C; c++) sc[t] += q[c] * K[t][c];
      sc[t] /= sqrt(TJ_C);
      m = fmax(m, sc[t]);
    }
    for (int t = 0; t <= pos; t++) sum += exp(sc[t] - m);
    const float *y = hj_buffer_host_ptr(out[0]);
    for (int c = 0; c < TJ_C; c++) {
      double want = 0;
      for (int t = 0; t <= pos; t++) want += exp(sc[t] - m) / sum * V[t][c];
      if (fabs(y[c] - want) > 1e-5 * fmax(1, fabs(want))) fail_msg("pos %d c %d: %.9g, want %.9g", pos, c, y[c], want);
    }
    hj_buffer_destroy(in[0]);
    hj_buffer_destroy(in[3]);
    hj_buffer_destroy(out[0]);
    hj_buffer_destroy(kc);
    hj_buffer_destroy(vc);
    kc = out[1];
    vc = out[2];
  }
  hj_jit_stats_t s = tj_stats(j);
  assert_int_equal(s.compiles, 1);
  assert_int_equal(s.memory_hits, 499);
  hj_buffer_destroy(kc);
  hj_buffer_destroy(vc);
  hj_jit_destroy(j);
  hj_ctx_destroy(ctx);
}

/* ---- ops for dynamic shapes ------------------------------------------------------------------ */

static hj_status tj_dyn_ops(hj_graph_t *g, const hj_tensor_t *p, int n, void *user) {
  hj_tensor_t x = p[0];   // (<=T, 3)
  int64_t d0 = 0;
  hj_graph_output(g, hj_mean(x, &d0, 1, false));                           // (3)
  hj_graph_output(g, hj_var(x, &d0, 1, true));                             // (1, 3)
  hj_graph_output(g, hj_cumulative(x, HJ_RED_SUM, 0, false));              // (<=T, 3)
  hj_graph_output(g, hj_cumulative(x, HJ_RED_MAX, 0, true));               // (<=T, 3)
  return hj_graph_output(g, hj_dim_size(x, 0));                            // ()
}

static void test_dynamic_ops(void **state) {
  hj_ctx_t *ctx = tj_ctx();
  hj_jit_param_t p[1] = { { "x", HJ_SHAPE(HJ_DYN(32), 3) } };
  hj_jit_t *j = tj_jit(ctx, tj_dyn_ops, NULL, p, 1, NULL);
  for (int T = 1; T <= 32; T += 3) {
    hj_buffer_t *x = tj_buf(ctx, HJ_SHAPE(T, 3), T), *out[5] = { NULL };
    CHECK_OK(ctx, hj_jit_call(j, &x, 1, out, 5));
    const float *xv = hj_buffer_host_ptr(x), *mean = hj_buffer_host_ptr(out[0]), *var = hj_buffer_host_ptr(out[1]);
    const float *cs = hj_buffer_host_ptr(out[2]), *cm = hj_buffer_host_ptr(out[3]);
    assert_int_equal(*(int32_t *)hj_buffer_host_ptr(out[4]), T);
    assert_int_equal(hj_buffer_shape(out[2]).dims[0], T);
    for (int c = 0; c < 3; c++) {
      double s = 0, v = 0, run = 0;
      for (int t = 0; t < T; t++) s += xv[t * 3 + c];
      for (int t = 0; t < T; t++) v += (xv[t * 3 + c] - s / T) * (xv[t * 3 + c] - s / T);
      assert_true(fabs(mean[c] - s / T) < 1e-5);
      assert_true(fabs(var[c] - v / T) < 1e-5);
      for (int t = 0; t < T; t++) {
        run += xv[t * 3 + c];
        assert_true(fabs(cs[t * 3 + c] - run) < 1e-4);
        double mx = -INFINITY;
        for (int u = t; u < T; u++) mx = fmax(mx, xv[u * 3 + c]);
        assert_true(cm[t * 3 + c] == (float)mx);
      }
    }
    hj_buffer_destroy(x);
    for (int k = 0; k < 5; k++) hj_buffer_destroy(out[k]);
  }
  assert_int_equal(tj_stats(j).compiles, 5);   /* 1 4 8 16 32 (T = 1, 4, 7, ...) */
  hj_jit_destroy(j);
  hj_ctx_destroy(ctx);
}

/* ---- threads, the evaluator backend ---------------------------------------------------------- */

typedef struct { hj_ctx_t *ctx; hj_jit_t *j; int first; int bad; } tj_worker;

static void *tj_work(void *arg) {
  tj_worker *w = arg;
  for (int k = 0; k < 60; k++) {
    int T = 1 + (w->first + 7 * k) % 16;
    hj_buffer_t *x = NULL, *out[1] = { NULL };
    float v[2 * 16];
    for (int i = 0; i < 2 * T; i++) v[i] = (float)((i * 13 + T) % 7) - 3;
    if (hj_buffer_from_host(w->ctx, HJ_F32, HJ_SHAPE(2, T), v, &x) != HJ_OK ||
        hj_jit_call(w->j, &x, 1, out, 1) != HJ_OK) {
      w->bad++;
      hj_buffer_destroy(x);
      continue;
    }
    const float *y = hj_buffer_host_ptr(out[0]);
    for (int r = 0; r < 2; r++) {
      double sum = 0;
      for (int i = 0; i < T; i++) sum += y[r * T + i];
      w->bad += fabs(sum - 1) > 1e-5 || hj_buffer_shape(out[0]).dims[1] != T;
    }
    hj_buffer_destroy(x);
    hj_buffer_destroy(out[0]);
  }
  return NULL;
}

/* Calls from several threads are serialised on the jit (and share its cache). */
static void test_threads(void **state) {
  hj_ctx_t *ctx = tj_ctx();
  hj_jit_param_t p[1] = { { "x", HJ_SHAPE(2, HJ_DYN(16)) } };
  hj_jit_t *j = tj_jit(ctx, tj_softmax, NULL, p, 1, NULL);
  pthread_t th[3];
  tj_worker w[3];
  for (int i = 0; i < 3; i++) {
    w[i] = (tj_worker){ ctx, j, i * 5, 0 };
    assert_int_equal(pthread_create(&th[i], NULL, tj_work, &w[i]), 0);
  }
  for (int i = 0; i < 3; i++) {
    pthread_join(th[i], NULL);
    assert_int_equal(w[i].bad, 0);
  }
  hj_jit_stats_t s = tj_stats(j);
  assert_int_equal(s.calls, 180);
  assert_int_equal(s.compiles, 5);   /* 1 2 4 8 16 */
  assert_int_equal(s.memory_hits, 175);
  hj_jit_destroy(j);
  hj_ctx_destroy(ctx);
}

/* The padded module runs on the reference evaluator as well. */
static void test_interp_backend(void **state) {
  hj_ctx_t *ctx = tu_ctx();   /* HJ_BACKEND_INTERP */
  hj_jit_param_t p[1] = { { "x", HJ_SHAPE(2, HJ_DYN(8)) } };
  hj_jit_t *j = tj_jit(ctx, tj_softmax, NULL, p, 1, NULL);
  for (int T = 1; T <= 8; T++) tj_check_softmax(ctx, j, T);
  assert_int_equal(tj_stats(j).compiles, 4);
  hj_jit_destroy(j);
  hj_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_power_of_two_buckets),
    cmocka_unit_test(test_explicit_buckets),
    cmocka_unit_test(test_lru_eviction),
    cmocka_unit_test(test_pitfall_frozen_values),
    cmocka_unit_test(test_pitfall_frozen_branches),
    cmocka_unit_test(test_pitfall_static_shape_change),
    cmocka_unit_test(test_pitfall_outputs_are_callers),
    cmocka_unit_test(test_padding_declined),
    cmocka_unit_test(test_errors),
    cmocka_unit_test(test_log_line),
    cmocka_unit_test(test_decode_runtime_position),
    cmocka_unit_test(test_dynamic_ops),
    cmocka_unit_test(test_threads),
    cmocka_unit_test(test_interp_backend),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
