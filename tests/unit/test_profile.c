/* test_profile.c — run-time profiles (hj_exec_profile, hj_exec_profile_text,
   hj_exec_set_profiling, hj_exec_profile_reset) on the CPU backend and the evaluator.

   A graph with a matmul, a reduction (softmax), a while loop (3 iterations) and a donated
   dynamic-update-slice: with profiling on, every thunk reports its calls (the while body's
   once per iteration), a positive time for the thunks that ran, bytes and FLOPs as
   runtime/profile.c defines them (the matmul 2*M*N*K, the in-place dus the bytes it reads
   and the update's, never the cache); entries come sorted by time; reset zeroes them; with profiling off the calls stay
   0 and only the run count moves. The evaluator backend gives one "module" entry. */
#include "testutil.h"
#include "api_testutil.h"
#include "cpu_testutil.h"

static hj_graph_t *tpr_graph(hj_ctx_t *ctx) {
  hj_graph_t *g, *cond, *body;
  CHECK_OK(ctx, hj_graph_create(ctx, "prof", &g));
  hj_tensor_t a = hj_param(g, HJ_F32, HJ_SHAPE(8, 16), "a"), b = hj_param(g, HJ_F32, HJ_SHAPE(16, 4), "b");
  hj_tensor_t c = hj_param(g, HJ_F32, HJ_SHAPE(32, 4), "cache"), i = hj_param(g, HJ_S32, HJ_SCALAR, "i");
  hj_tensor_t y = hj_softmax(hj_matmul(a, b), 1);                                  /* (8, 4) */
  CHECK_OK(ctx, hj_graph_create_sub(g, "cond", &cond));
  CHECK_OK(ctx, hj_graph_output(cond, hj_compare(hj_param(cond, HJ_S32, HJ_SCALAR, "k"),
                                                 hj_scalar(cond, HJ_S32, 3), HJ_CMP_LT)));
  CHECK_OK(ctx, hj_graph_create_sub(g, "body", &body));
  CHECK_OK(ctx, hj_graph_output(body, hj_add(hj_param(body, HJ_S32, HJ_SCALAR, "k"), hj_scalar(body, HJ_S32, 1))));
  hj_tensor_t n = hj_while(cond, body, hj_scalar(g, HJ_S32, 0));
  hj_tensor_t st[2] = { hj_add(i, n), hj_scalar(g, HJ_S32, 0) };
  CHECK_OK(ctx, hj_graph_output(g, y));
  CHECK_OK(ctx, hj_graph_output_aliased(g, hj_dynamic_update_slice(c, hj_slice(y, (int64_t[]){ 0, 0 },
                                                                                (int64_t[]){ 1, 4 }, NULL), st), c));
  return g;
}

static void tpr_run(hj_exec_t *e, hj_ctx_t *ctx, int runs) {
  hj_buffer_t *in[4], *out[2] = { NULL, NULL };
  CHECK_OK(ctx, hj_buffer_create(ctx, HJ_F32, HJ_SHAPE(8, 16), &in[0]));
  CHECK_OK(ctx, hj_buffer_create(ctx, HJ_F32, HJ_SHAPE(16, 4), &in[1]));
  CHECK_OK(ctx, hj_buffer_create(ctx, HJ_F32, HJ_SHAPE(32, 4), &in[2]));
  int iv = 5;
  CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_S32, HJ_SCALAR, &iv, &in[3]));
  for (int r = 0; r < runs; r++) {
    out[1] = in[2];
    CHECK_OK(ctx, hj_exec_run(e, in, 4, out, 2));
  }
  const float *cache = hj_buffer_host_ptr(in[2]);
  assert_true(cache[8 * 4] == 0.25f);              /* row 5 + 3: softmax of zeros */
  hj_buffer_destroy(out[0]);
  for (int k = 0; k < 4; k++) hj_buffer_destroy(in[k]);
}

static const hj_profile_entry_t *tpr_find(const hj_profile_entry_t *v, int n, const char *kind) {
  for (int i = 0; i < n; i++)
    if (!strcmp(v[i].kind, kind)) return &v[i];
  return NULL;
}

static void test_cpu_profile(void **state) {
  (void)state;
  hj_ctx_t *ctx = cb_ctx(HJ_BACKEND_CPU, 1, NULL);
  hj_graph_t *g = tpr_graph(ctx);
  hj_exec_t *e;
  CHECK_OK(ctx, hj_compile(g, &e));
  /* off by default (no $HLOJIT_PROFILE in the tests' environment): only runs count */
  tpr_run(e, ctx, 1);
  hj_profile_entry_t *v;
  int n;
  int64_t runs;
  double wall;
  CHECK_OK(ctx, hj_exec_profile(e, &v, &n, &runs, &wall));
  assert_int_equal(runs, 1);
  assert_true(wall > 0);
  for (int i = 0; i < n; i++) assert_int_equal(v[i].calls, 0);
  free(v);
  CHECK_OK(ctx, hj_exec_set_profiling(e, true));
  hj_exec_profile_reset(e);
  tpr_run(e, ctx, 2);
  CHECK_OK(ctx, hj_exec_profile(e, &v, &n, &runs, &wall));
  assert_int_equal(runs, 2);
  for (int i = 1; i < n; i++) assert_true(v[i - 1].ms >= v[i].ms);
  const hj_profile_entry_t *mm = tpr_find(v, n, "matmul"), *dus = tpr_find(v, n, "dus"), *wh = tpr_find(v, n, "while");
  assert_non_null(mm);
  assert_non_null(dus);
  assert_non_null(wh);
  assert_int_equal(mm->calls, 2);
  assert_true(mm->ms > 0);
  assert_int_equal(mm->flops, 2 * 8 * 4 * 16);
  assert_true(mm->bytes >= (8 * 16 + 16 * 4) * 4);
  /* the (1, 4) row written, the (8, 4) softmax output it is sliced from (the slice fuses
     into the update) and its starts; not the 512-byte cache */
  if (dus->bytes < 16 + 128 || dus->bytes > 16 + 128 + 64) fail_msg("dus moves %lld bytes", (long long)dus->bytes);
  assert_int_equal(wh->calls, 2);
  assert_int_equal(wh->depth, 0);
  bool nested = false;
  for (int i = 0; i < n; i++)
    if (v[i].depth == 1 && v[i].calls == 2 * 3) nested = true;   /* the body, per iteration */
  assert_true(nested);
  assert_non_null(mm->kernel);
  assert_true(strlen(mm->kernel) > 0);
  free(v);
  char *text;
  CHECK_OK(ctx, hj_exec_profile_text(e, &text));
  ta_has(text, "profile of 'prof' (cpu backend): 2 runs");
  ta_has(text, "matmul");
  ta_has(text, "compile: ");
  free(text);
  hj_exec_profile_reset(e);
  CHECK_OK(ctx, hj_exec_profile(e, &v, &n, &runs, NULL));
  assert_int_equal(runs, 0);
  for (int i = 0; i < n; i++) assert_int_equal(v[i].calls, 0);
  free(v);
  hj_exec_destroy(e);
  hj_graph_destroy(g);
  hj_ctx_destroy(ctx);
}

/* A decode step's fused cache updates (two outputs written in place beside the query):
   the profile counts the qkv row read, q written and the two updates written, never the
   caches (2 x 8 KiB). */
static void test_cpu_profile_two_updates(void **state) {
  (void)state;
  static const char *text =
    "HloModule kv, input_output_alias={ {1}: (1, {}), {2}: (2, {}) }\nENTRY main {\n"
    "  qkv = f32[1,96] parameter(0)\n  kc = f32[4,8,64] parameter(1)\n  vc = f32[4,64,8] parameter(2)\n"
    "  t = s32[] parameter(3)\n  z = s32[] constant(0)\n"
    "  q = f32[1,32] slice(qkv), slice={[0:1], [0:32]}\n"
    "  ks = f32[1,32] slice(qkv), slice={[0:1], [32:64]}\n  k = f32[4,8,1] reshape(ks)\n"
    "  vs = f32[1,32] slice(qkv), slice={[0:1], [64:96]}\n  v = f32[4,1,8] reshape(vs)\n"
    "  dk = f32[4,8,64] dynamic-update-slice(kc, k, z, z, t)\n"
    "  dv = f32[4,64,8] dynamic-update-slice(vc, v, z, t, z)\n"
    "  ROOT r = (f32[1,32], f32[4,8,64], f32[4,64,8]) tuple(q, dk, dv)\n}\n";
  hj_ctx_t *ctx = cb_ctx(HJ_BACKEND_CPU, 1, NULL);
  hj_module_t *m = cb_parse(ctx, text);
  hj_exec_t *e;
  CHECK_OK(ctx, hj_compile_module(ctx, m, &e));
  CHECK_OK(ctx, hj_exec_set_profiling(e, true));
  hj_buffer_t **in = cb_inputs(ctx, m, 3), *out[3] = { NULL, in[1], in[2] };
  CHECK_OK(ctx, hj_exec_run(e, in, 4, out, 3));
  hj_profile_entry_t *v;
  int n;
  CHECK_OK(ctx, hj_exec_profile(e, &v, &n, NULL, NULL));
  const hj_profile_entry_t *dus = tpr_find(v, n, "dus");
  assert_non_null(dus);
  assert_int_equal(dus->calls, 1);
  int64_t want = 96 * 4 + 4 + 3 * 32 * 4;   /* qkv and t read; q, k, v written */
  if (dus->bytes != want) fail_msg("the updates move %lld bytes, expected %lld", (long long)dus->bytes,
                                   (long long)want);
  free(v);
  hj_buffer_destroy(out[0]);
  cb_free_bufs(in, 4);
  hj_exec_destroy(e);
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
}

static void test_interp_profile(void **state) {
  (void)state;
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  o.backend = HJ_BACKEND_INTERP;
  o.profile = true;
  hj_ctx_t *ctx;
  CHECK_OK(NULL, hj_ctx_create(&o, &ctx));
  hj_graph_t *g = tpr_graph(ctx);
  hj_exec_t *e;
  CHECK_OK(ctx, hj_compile(g, &e));
  tpr_run(e, ctx, 3);
  hj_profile_entry_t *v;
  int n;
  int64_t runs;
  CHECK_OK(ctx, hj_exec_profile(e, &v, &n, &runs, NULL));
  assert_int_equal(n, 1);
  assert_string_equal(v[0].kind, "module");
  assert_int_equal(v[0].calls, 3);
  assert_true(v[0].ms > 0);
  free(v);
  assert_int_equal(hj_exec_profile(e, NULL, &n, NULL, NULL), HJ_ERR_INVALID_ARG);
  hj_exec_destroy(e);
  hj_graph_destroy(g);
  hj_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_cpu_profile),
    cmocka_unit_test(test_cpu_profile_two_updates),
    cmocka_unit_test(test_interp_profile),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
