/* test_threads.c — one context used by several threads at once (hlojit.h, THREADS): the
   first compiles on a fresh context racing to make its backend state, runs of one
   executable and of two executables from four threads, compiles while other threads run,
   one tracing JIT called from four threads with lengths across its buckets, and error
   messages that stay each thread's own (a failing call on one thread does not change what
   hj_ctx_error says on another). Every result is compared bit for bit with the same run
   made by one thread before. On the CPU backend, the evaluator and AUTO. `make test-threads`
   runs this binary built with ThreadSanitizer as well. */
#include "testutil.h"
#include <pthread.h>

enum { N = 48, THREADS = 4, RUNS = 60 };

typedef struct tt_env {
  hj_ctx_t *ctx;
  hj_exec_t *ex[2];
  hj_jit_t *jit;
  float x[THREADS][N * N], w[N * N], ref[THREADS][2][N * N];
  int bad;
} tt_env;

static hj_status tt_graph(hj_graph_t *g, const hj_tensor_t *p, int np, void *user) {
  (void)np;
  hj_tensor_t y = hj_softmax(hj_matmul(p[0], p[1]), 1);
  return hj_graph_output(g, hj_add(y, user ? hj_tanh(p[0]) : p[0]));
}

static hj_exec_t *tt_build(hj_ctx_t *ctx, int variant) {
  hj_graph_t *g = NULL;
  CHECK_OK(ctx, hj_graph_create(ctx, "tt", &g));
  hj_tensor_t p[2] = { hj_param(g, HJ_F32, HJ_SHAPE(N, N), "x"), hj_param(g, HJ_F32, HJ_SHAPE(N, N), "w") };
  CHECK_OK(ctx, tt_graph(g, p, 2, variant ? (void *)1 : NULL));
  hj_exec_t *e = NULL;
  CHECK_OK(ctx, hj_compile(g, &e));
  hj_graph_destroy(g);
  return e;
}

static void tt_run(tt_env *E, hj_exec_t *e, const float *x, float *y) {
  hj_buffer_t *in[2], *out[1] = { NULL };
  CHECK_OK(E->ctx, hj_buffer_from_host(E->ctx, HJ_F32, HJ_SHAPE(N, N), x, &in[0]));
  CHECK_OK(E->ctx, hj_buffer_from_host(E->ctx, HJ_F32, HJ_SHAPE(N, N), E->w, &in[1]));
  CHECK_OK(E->ctx, hj_exec_run(e, in, 2, out, 1));
  memcpy(y, hj_buffer_host_ptr(out[0]), sizeof(float) * N * N);
  hj_buffer_destroy(in[0]);
  hj_buffer_destroy(in[1]);
  hj_buffer_destroy(out[0]);
}

typedef struct tt_arg { tt_env *E; int t; } tt_arg;

static void tt_check(tt_env *E, const float *y, const float *want, size_t n) {
  if (memcmp(y, want, n * sizeof(float))) __atomic_add_fetch(&E->bad, 1, __ATOMIC_RELAXED);
}

static void *tt_runner(void *p) {   /* both executables, alternately */
  tt_arg *a = p;
  float y[N * N];
  for (int i = 0; i < RUNS; i++) {
    int v = (i + a->t) & 1;
    tt_run(a->E, a->E->ex[v], a->E->x[a->t], y);
    tt_check(a->E, y, a->E->ref[a->t][v], N * N);
  }
  return NULL;
}

static void *tt_compiler(void *p) {   /* graphs of its own, while the others run */
  tt_arg *a = p;
  float y[N * N];
  for (int i = 0; i < 4; i++) {
    int v = (i + a->t) & 1;
    hj_exec_t *e = tt_build(a->E->ctx, v);
    tt_run(a->E, e, a->E->x[a->t], y);
    tt_check(a->E, y, a->E->ref[a->t][v], N * N);
    hj_exec_destroy(e);
  }
  return NULL;
}

static void *tt_jit_caller(void *p) {   /* rows of softmax(xW) + x do not depend on the others */
  tt_arg *a = p;
  hj_ctx_t *ctx = a->E->ctx;
  for (int i = 0; i < 24; i++) {
    int64_t T = 1 + (i * 7 + a->t * 13) % N;
    hj_buffer_t *in[2], *out[1] = { NULL };
    CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_F32, HJ_SHAPE(T, N), a->E->x[a->t], &in[0]));
    CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_F32, HJ_SHAPE(N, N), a->E->w, &in[1]));
    CHECK_OK(ctx, hj_jit_call(a->E->jit, in, 2, out, 1));
    tt_check(a->E, hj_buffer_host_ptr(out[0]), a->E->ref[a->t][0], (size_t)(T * N));
    hj_buffer_destroy(in[0]);
    hj_buffer_destroy(in[1]);
    hj_buffer_destroy(out[0]);
  }
  return NULL;
}

static void *tt_first(void *p) {   /* the first compile on a fresh context */
  tt_arg *a = p;
  hj_exec_t *e = tt_build(a->E->ctx, a->t & 1);
  float y[N * N];
  tt_run(a->E, e, a->E->x[a->t], y);
  tt_check(a->E, y, a->E->ref[a->t][a->t & 1], N * N);
  hj_exec_destroy(e);
  return NULL;
}

static void tt_threads(tt_env *E, void *(*fn)(void *), void *(*fn0)(void *)) {
  pthread_t th[THREADS];
  tt_arg a[THREADS];
  for (int t = 0; t < THREADS; t++) {
    a[t] = (tt_arg){ E, t };
    assert_int_equal(pthread_create(&th[t], NULL, t == 0 && fn0 ? fn0 : fn, &a[t]), 0);
  }
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
}

static hj_ctx_t *tt_ctx(hj_backend_t b) {
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  o.backend = b;
  o.num_threads = 2;
  hj_ctx_t *ctx = NULL;
  if (hj_ctx_create(&o, &ctx) != HJ_OK) fail_msg("hj_ctx_create failed");
  return ctx;
}

static void tt_backend(hj_backend_t b) {
  tt_env *E = calloc(1, sizeof *E);
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < N * N; i++) E->w[i] = (float)((s = s * 6364136223846793005ull + 1) >> 40) / 16777216.0f - 0.5f;
  for (int t = 0; t < THREADS; t++)
    for (int i = 0; i < N * N; i++) E->x[t][i] = (float)((s = s * 6364136223846793005ull + 1) >> 40) / 16777216.0f - 0.5f;
  /* the references: one thread, a context of their own */
  E->ctx = tt_ctx(b);
  E->ex[0] = tt_build(E->ctx, 0);
  E->ex[1] = tt_build(E->ctx, 1);
  for (int t = 0; t < THREADS; t++)
    for (int v = 0; v < 2; v++) tt_run(E, E->ex[v], E->x[t], E->ref[t][v]);
  hj_exec_destroy(E->ex[0]);
  hj_exec_destroy(E->ex[1]);
  hj_ctx_destroy(E->ctx);
  /* a fresh context: the first compiles race to make its backend state */
  E->ctx = tt_ctx(b);
  tt_threads(E, tt_first, NULL);
  assert_int_equal(E->bad, 0);
  E->ex[0] = tt_build(E->ctx, 0);
  E->ex[1] = tt_build(E->ctx, 1);
  tt_threads(E, tt_runner, NULL);
  assert_int_equal(E->bad, 0);
  tt_threads(E, tt_runner, tt_compiler);
  assert_int_equal(E->bad, 0);
  hj_jit_param_t jp[2] = { { "x", HJ_SHAPE(HJ_DYN(N), N) }, { "w", HJ_SHAPE(N, N) } };
  hj_jit_options_t jo;
  hj_jit_options_init(&jo);
  jo.params = jp;
  jo.nparams = 2;
  CHECK_OK(E->ctx, hj_jit_create(E->ctx, tt_graph, NULL, &jo, &E->jit));
  tt_threads(E, tt_jit_caller, NULL);
  assert_int_equal(E->bad, 0);
  hj_jit_stats_t js;
  CHECK_OK(E->ctx, hj_jit_stats(E->jit, &js));
  assert_int_equal(js.calls, THREADS * 24);
  print_message("  %s: 4 threads: first compiles, %d runs of two executables, compiles while running, "
                "%lld JIT calls (%lld compiles): all bitwise equal to one thread's\n",
                b == HJ_BACKEND_CPU ? "CPU" : b == HJ_BACKEND_AUTO ? "AUTO" : "evaluator", 2 * THREADS * RUNS, (long long)js.calls,
                (long long)js.compiles);
  hj_jit_destroy(E->jit);
  hj_exec_destroy(E->ex[0]);
  hj_exec_destroy(E->ex[1]);
  hj_ctx_destroy(E->ctx);
  free(E);
}

static void test_cpu(void **state) { tt_backend(HJ_BACKEND_CPU); }
static void test_interp(void **state) { tt_backend(HJ_BACKEND_INTERP); }
/* AUTO: each first use also tries (and, without a GPU, fails to make) the CUDA backend */
static void test_auto(void **state) { tt_backend(HJ_BACKEND_AUTO); }

/* Each thread fails its own way, over and over, and reads its own message back. */
typedef struct tt_err { hj_ctx_t *ctx; hj_exec_t *e; int t, wrong; } tt_err;

static void *tt_failer(void *p) {
  tt_err *a = p;
  char want[64];
  for (int i = 0; i < 400; i++) {
    hj_status st;
    if (a->t & 1) {   /* a parse error naming this thread's file */
      snprintf(want, sizeof want, "thread%d.hlo", a->t);
      hj_module_t *m = NULL;
      st = hj_module_parse(a->ctx, "HloModule x\nENTRY e {\n  ROOT p = f32[ parameter(0)\n}\n", 50, want, &m);
    } else {          /* a run given the wrong number of inputs */
      snprintf(want, sizeof want, "%d input", a->t + 3);
      hj_buffer_t *in[8] = { 0 };
      st = hj_exec_run(a->e, in, a->t + 3, NULL, 0);
    }
    if (st == HJ_OK || !strstr(hj_ctx_error(a->ctx), want)) __atomic_add_fetch(&a->wrong, 1, __ATOMIC_RELAXED);
  }
  return NULL;
}

static void test_errors_per_thread(void **state) {
  hj_ctx_t *ctx = tt_ctx(HJ_BACKEND_INTERP);
  hj_exec_t *e = tt_build(ctx, 0);
  pthread_t th[THREADS];
  tt_err a[THREADS];
  for (int t = 0; t < THREADS; t++) {
    a[t] = (tt_err){ ctx, e, t, 0 };
    assert_int_equal(pthread_create(&th[t], NULL, tt_failer, &a[t]), 0);
  }
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  for (int t = 0; t < THREADS; t++)
    if (a[t].wrong) fail_msg("thread %d read another thread's message %d times in 400", t, a[t].wrong);
  hj_ctx_clear_error(ctx);   /* this thread's: the others' were their own */
  assert_string_equal(hj_ctx_error(ctx), "");
  hj_exec_destroy(e);
  hj_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_cpu),
    cmocka_unit_test(test_interp),
    cmocka_unit_test(test_auto),
    cmocka_unit_test(test_errors_per_thread),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
