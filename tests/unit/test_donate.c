/* test_donate.c — donation (input_output_alias) from the graph to the run, on the CPU
   backend and on the evaluator (the oracle).

   A KV-cache decode step: cache' = dus(cache, k_row, (pos, 0)); scores = q . cache'^T masked
   to rows <= pos; y = softmax(scores) @ cache'. With cache' donated to cache:
   - the results equal a plain C reference in double precision, and the evaluator's;
   - the dus runs in place: stats.kernels_dus == 1, stats.copies == 0, the buffer assignment
     dump says "in place (dynamic-update-slice)", and the caller's cache buffer (same pointer)
     holds the new row afterwards, the other rows untouched;
   a test that fails when the copy comes back (copies != 0, or a loop kernel instead of the
   dus). Then every run-time path of hlojit.h's rules: NULL output (the input, one more
   reference), another output buffer (copied once, input unchanged), a bound cache updated
   over several steps, a read-only donated input, the donated buffer passed twice; and the
   plans that cannot run in place: the old cache read after the update (copied at the end),
   a passthrough, two parameters swapped (staged), an elementwise update in place. */
#include "testutil.h"
#include "api_testutil.h"
#include "cpu_testutil.h"
#include <math.h>
#include <unistd.h>

enum { TD_T = 16, TD_C = 8 };   /* cache rows, channels */

typedef struct td_step {
  hj_graph_t *g;
  hj_tensor_t cache, k, q, pos;
} td_step;

/* The decode step; |donate|: cache' aliases cache. Output 0 cache' (T, C), output 1 y (1, C). */
static td_step td_build(hj_ctx_t *ctx, bool donate) {
  td_step s;
  CHECK_OK(ctx, hj_graph_create(ctx, "decode", &s.g));
  s.cache = hj_param(s.g, HJ_F32, HJ_SHAPE(TD_T, TD_C), "cache");
  s.k = hj_param(s.g, HJ_F32, HJ_SHAPE(1, TD_C), "k");
  s.q = hj_param(s.g, HJ_F32, HJ_SHAPE(1, TD_C), "q");
  s.pos = hj_param(s.g, HJ_S32, HJ_SCALAR, "pos");
  hj_tensor_t zero = hj_scalar(s.g, HJ_S32, 0);
  hj_tensor_t starts[2] = { s.pos, zero };
  hj_tensor_t c2 = hj_dynamic_update_slice(s.cache, s.k, starts);                 /* (T, C) */
  hj_tensor_t sc = hj_matmul(s.q, hj_transpose(c2, (int64_t[]){ 1, 0 }, 2));     /* (1, T) */
  hj_tensor_t row = hj_iota(s.g, HJ_S32, HJ_SHAPE(1, TD_T), 1);
  hj_tensor_t keep = hj_compare(row, s.pos, HJ_CMP_LE);
  sc = hj_select(keep, sc, hj_scalar(s.g, HJ_F32, -INFINITY));
  hj_tensor_t y = hj_matmul(hj_softmax(sc, 1), c2);                               /* (1, C) */
  if (donate) CHECK_OK(ctx, hj_graph_output_aliased(s.g, c2, s.cache));
  else CHECK_OK(ctx, hj_graph_output(s.g, c2));
  CHECK_OK(ctx, hj_graph_output_named(s.g, y, "y"));
  return s;
}

static float td_val(int i, int j, int salt) { return (float)sin(0.37 * i + 0.11 * j + salt) * 0.5f; }

/* The reference: cache rows < pos from the old cache, row pos = k; y = softmax-weighted rows. */
static void td_reference(const float *cache, const float *k, const float *q, int pos, float *c2,
                         double *y) {
  memcpy(c2, cache, sizeof(float) * TD_T * TD_C);
  memcpy(c2 + pos * TD_C, k, sizeof(float) * TD_C);
  double sc[TD_T], mx = -INFINITY, sum = 0;
  for (int t = 0; t <= pos; t++) {
    sc[t] = 0;
    for (int c = 0; c < TD_C; c++) sc[t] += (double)q[c] * c2[t * TD_C + c];
    if (sc[t] > mx) mx = sc[t];
  }
  for (int t = 0; t <= pos; t++) sum += sc[t] = exp(sc[t] - mx);
  for (int c = 0; c < TD_C; c++) {
    y[c] = 0;
    for (int t = 0; t <= pos; t++) y[c] += sc[t] / sum * c2[t * TD_C + c];
  }
}

static hj_buffer_t *td_f32(hj_ctx_t *ctx, hj_shape_t s, int salt) {
  hj_buffer_t *b;
  CHECK_OK(ctx, hj_buffer_create(ctx, HJ_F32, s, &b));
  float *p = hj_buffer_host_ptr(b);
  int cols = s.rank == 2 ? (int)s.dims[1] : 1;
  for (int64_t i = 0; i < hj_shape_numel(s); i++) p[i] = td_val((int)(i / cols), (int)(i % cols), salt);
  return b;
}

static hj_buffer_t *td_s32(hj_ctx_t *ctx, int v) {
  hj_buffer_t *b;
  CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_S32, HJ_SCALAR, &v, &b));
  return b;
}

/* A fresh dump directory (for the buffer assignment text); "" when none can be made. */
static char td_dir[64];
static const char *td_dump_dir(void) {
  snprintf(td_dir, sizeof td_dir, "/tmp/hj_donate_XXXXXX");
  return mkdtemp(td_dir) ? td_dir : "";
}

/* The buffer assignment dump of the last compile in |dir| contains |what|. */
static bool td_dump_has(const char *dir, const char *what) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "grep -qF '%s' %s/*buffer_assignment.txt", what, dir);
  return system(cmd) == 0;
}

static void td_rmdir(const char *dir) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (*dir && system(cmd) != 0) print_message("could not remove %s\n", dir);
}

/* One step on |b| at |pos|, checked against the reference; returns the exec's stats. */
static void td_step_check(hj_ctx_t *ctx, hj_exec_t *e, hj_buffer_t *cache, int pos, int salt) {
  hj_buffer_t *k = td_f32(ctx, HJ_SHAPE(1, TD_C), salt + 1), *q = td_f32(ctx, HJ_SHAPE(1, TD_C), salt + 2);
  hj_buffer_t *p = td_s32(ctx, pos);
  float want_c[TD_T * TD_C];
  double want_y[TD_C];
  td_reference(hj_buffer_host_ptr(cache), hj_buffer_host_ptr(k), hj_buffer_host_ptr(q), pos, want_c, want_y);
  void *before = hj_buffer_host_ptr(cache);
  hj_buffer_t *in[4] = { cache, k, q, p }, *out[2] = { cache, NULL };
  CHECK_OK(ctx, hj_exec_run(e, in, 4, out, 2));
  assert_ptr_equal(out[0], cache);
  assert_ptr_equal(hj_buffer_host_ptr(cache), before);
  assert_memory_equal(hj_buffer_host_ptr(cache), want_c, sizeof want_c);
  ta_close_f32(hj_buffer_host_ptr(out[1]), want_y, TD_C, 1e-5);
  hj_buffer_destroy(out[1]);
  hj_buffer_destroy(k);
  hj_buffer_destroy(q);
  hj_buffer_destroy(p);
}

static void test_decode_in_place(void **state) {
  (void)state;
  const char *dir = td_dump_dir();
  hj_ctx_t *ctx = cb_ctx(HJ_BACKEND_CPU, 0, dir);
  td_step s = td_build(ctx, true);
  hj_exec_t *e;
  CHECK_OK(ctx, hj_compile(s.g, &e));
  assert_int_equal(hj_exec_output_alias(e, 0), 0);
  assert_int_equal(hj_exec_output_alias(e, 1), -1);
  hj_exec_stats_t st;
  CHECK_OK(ctx, hj_exec_stats(e, &st));
  if (st.kernels_dus != 1 || st.inplace_updates != 1 || st.copies != 0)
    fail_msg("the donated cache is copied: kernels_dus %d, in place %d, copies %d", st.kernels_dus,
             st.inplace_updates, st.copies);
  assert_true(td_dump_has(dir, "output 0 aliases input 0: in place (dynamic-update-slice)"));
  hj_buffer_t *cache = td_f32(ctx, HJ_SHAPE(TD_T, TD_C), 0);
  for (int pos = 0; pos < 5; pos++) td_step_check(ctx, e, cache, pos * 3, 10 * pos);
  hj_buffer_destroy(cache);
  hj_exec_destroy(e);
  hj_graph_destroy(s.g);
  hj_ctx_destroy(ctx);
  td_rmdir(dir);
}

/* Without donation the same graph copies the cache (a loop kernel writes all of it): the
   contrast the test above guards. The HLO text carries the alias only when donated. */
static void test_decode_without_donation(void **state) {
  (void)state;
  hj_ctx_t *ctx = cb_ctx(HJ_BACKEND_CPU, 1, NULL);
  td_step s = td_build(ctx, false), d = td_build(ctx, true);
  hj_exec_t *e;
  CHECK_OK(ctx, hj_compile(s.g, &e));
  hj_exec_stats_t st;
  CHECK_OK(ctx, hj_exec_stats(e, &st));
  assert_int_equal(st.kernels_dus, 0);
  hj_exec_destroy(e);
  hj_module_t *m;
  char *text;
  CHECK_OK(ctx, hj_graph_to_module(d.g, &m));
  CHECK_OK(ctx, hj_module_print(m, &text));
  ta_has(text, "HloModule decode, input_output_alias={ {0}: (0, {}, may-alias) }, entry_computation_layout=");
  assert_int_equal(hj_module_output_alias(m, 0), 0);
  free(text);
  hj_module_destroy(m);
  CHECK_OK(ctx, hj_graph_to_module(s.g, &m));
  CHECK_OK(ctx, hj_module_print(m, &text));
  assert_null(strstr(text, "input_output_alias"));
  free(text);
  hj_module_destroy(m);
  hj_graph_destroy(s.g);
  hj_graph_destroy(d.g);
  hj_ctx_destroy(ctx);
}

/* The run-time paths, each on the CPU backend and the evaluator. */
static void td_run_paths(hj_backend_t be) {
  hj_ctx_t *ctx = cb_ctx(be, 0, NULL);
  td_step s = td_build(ctx, true);
  hj_exec_t *e;
  CHECK_OK(ctx, hj_compile(s.g, &e));
  hj_buffer_t *k = td_f32(ctx, HJ_SHAPE(1, TD_C), 1), *q = td_f32(ctx, HJ_SHAPE(1, TD_C), 2);
  hj_buffer_t *p = td_s32(ctx, 4), *cache = td_f32(ctx, HJ_SHAPE(TD_T, TD_C), 0);
  float old[TD_T * TD_C], want_c[TD_T * TD_C];
  double want_y[TD_C];
  memcpy(old, hj_buffer_host_ptr(cache), sizeof old);
  td_reference(old, hj_buffer_host_ptr(k), hj_buffer_host_ptr(q), 4, want_c, want_y);

  /* NULL output: it is the input, with one more reference */
  hj_buffer_t *in[4] = { cache, k, q, p }, *out[2] = { NULL, NULL };
  CHECK_OK(ctx, hj_exec_run(e, in, 4, out, 2));
  assert_ptr_equal(out[0], cache);
  assert_memory_equal(hj_buffer_host_ptr(cache), want_c, sizeof want_c);
  ta_close_f32(hj_buffer_host_ptr(out[1]), want_y, TD_C, 1e-5);
  hj_buffer_destroy(out[0]);                       /* the extra reference */
  hj_buffer_destroy(out[1]);

  /* another output buffer: the input is copied into it once and left as it was */
  memcpy(hj_buffer_host_ptr(cache), old, sizeof old);
  hj_buffer_t *other;
  CHECK_OK(ctx, hj_buffer_create(ctx, HJ_F32, HJ_SHAPE(TD_T, TD_C), &other));
  out[0] = other, out[1] = NULL;
  CHECK_OK(ctx, hj_exec_run(e, in, 4, out, 2));
  assert_memory_equal(hj_buffer_host_ptr(other), want_c, sizeof want_c);
  assert_memory_equal(hj_buffer_host_ptr(cache), old, sizeof old);
  ta_close_f32(hj_buffer_host_ptr(out[1]), want_y, TD_C, 1e-5);
  hj_buffer_destroy(out[1]);

  /* the donated buffer's memory also passed as another input: k is a view of its row 0 */
  hj_buffer_t *row0;
  CHECK_OK(ctx, hj_buffer_view(cache, 0, HJ_F32, HJ_SHAPE(1, TD_C), &row0));
  float k0[TD_C];
  memcpy(k0, hj_buffer_host_ptr(row0), sizeof k0);
  td_reference(old, k0, hj_buffer_host_ptr(q), 4, want_c, want_y);
  hj_buffer_t *in2[4] = { cache, row0, q, p };
  out[0] = cache, out[1] = NULL;
  CHECK_OK(ctx, hj_exec_run(e, in2, 4, out, 2));
  assert_memory_equal(hj_buffer_host_ptr(cache), want_c, sizeof want_c);
  ta_close_f32(hj_buffer_host_ptr(out[1]), want_y, TD_C, 1e-5);
  hj_buffer_destroy(out[1]);
  hj_buffer_destroy(row0);

  /* a read-only donated input: NULL gets a new buffer, passing it as the output is refused */
  hj_buffer_t *ro;
  CHECK_OK(ctx, hj_buffer_wrap(ctx, HJ_F32, HJ_SHAPE(TD_T, TD_C), old, sizeof old, HJ_BUFFER_READ_ONLY,
                               NULL, NULL, &ro));
  td_reference(old, hj_buffer_host_ptr(k), hj_buffer_host_ptr(q), 4, want_c, want_y);
  hj_buffer_t *in3[4] = { ro, k, q, p };
  out[0] = out[1] = NULL;
  CHECK_OK(ctx, hj_exec_run(e, in3, 4, out, 2));
  assert_ptr_not_equal(out[0], ro);
  assert_memory_equal(hj_buffer_host_ptr(out[0]), want_c, sizeof want_c);
  hj_buffer_destroy(out[0]);
  hj_buffer_destroy(out[1]);
  out[0] = ro, out[1] = NULL;
  assert_int_equal(hj_exec_run(e, in3, 4, out, 2), HJ_ERR_INVALID_ARG);
  ta_has(hj_ctx_error(ctx), "output 0 ('out0') is a read-only buffer");
  assert_null(out[1]);
  hj_buffer_destroy(ro);

  /* bound: the cache is bound once, every run updates it */
  memcpy(hj_buffer_host_ptr(cache), old, sizeof old);
  CHECK_OK(ctx, hj_exec_bind_name(e, "cache", cache));
  float cur[TD_T * TD_C];
  memcpy(cur, old, sizeof cur);
  for (int pos = 0; pos < 4; pos++) {
    hj_buffer_t *kk = td_f32(ctx, HJ_SHAPE(1, TD_C), 5 + pos), *pp = td_s32(ctx, pos);
    td_reference(cur, hj_buffer_host_ptr(kk), hj_buffer_host_ptr(q), pos, want_c, want_y);
    hj_buffer_t *in4[3] = { kk, q, pp }, *o4[2] = { cache, NULL };
    CHECK_OK(ctx, hj_exec_run(e, in4, 3, o4, 2));
    assert_memory_equal(hj_buffer_host_ptr(cache), want_c, sizeof want_c);
    ta_close_f32(hj_buffer_host_ptr(o4[1]), want_y, TD_C, 1e-5);
    memcpy(cur, want_c, sizeof cur);
    hj_buffer_destroy(o4[1]);
    hj_buffer_destroy(kk);
    hj_buffer_destroy(pp);
  }
  hj_buffer_destroy(other);
  hj_buffer_destroy(cache);          /* the binding keeps it alive */
  assert_non_null(hj_exec_bound(e, 0));
  hj_buffer_destroy(k);
  hj_buffer_destroy(q);
  hj_buffer_destroy(p);
  hj_exec_destroy(e);                /* drops the binding's reference: ASan checks the rest */
  hj_graph_destroy(s.g);
  hj_ctx_destroy(ctx);
}

static void test_run_paths_cpu(void **state) { (void)state; td_run_paths(HJ_BACKEND_CPU); }
static void test_run_paths_interp(void **state) { (void)state; td_run_paths(HJ_BACKEND_INTERP); }

/* Plans that cannot simply run in place, from HLO text (the CPU backend against the
   evaluator on the same inputs, run the same donated way). */
static void td_module_vs_eval(const char *text, const char *note, int want_copies) {
  const char *dir = td_dump_dir();
  hj_ctx_t *cpu = cb_ctx(HJ_BACKEND_CPU, 0, dir), *ev = cb_ctx(HJ_BACKEND_INTERP, 0, NULL);
  hj_module_t *m = cb_parse(cpu, text), *m2 = cb_parse(ev, text);
  hj_exec_t *e, *e2;
  CHECK_OK(cpu, hj_compile_module(cpu, m, &e));
  CHECK_OK(ev, hj_compile_module(ev, m2, &e2));
  int nin = hj_exec_num_inputs(e), nout = hj_exec_num_outputs(e);
  hj_buffer_t **a = cb_inputs(cpu, m, 7), **b = cb_inputs(ev, m2, 7);
  hj_buffer_t *oa[8] = { 0 }, *ob[8] = { 0 };
  CHECK_OK(cpu, hj_exec_run(e, a, nin, oa, nout));
  CHECK_OK(ev, hj_exec_run(e2, b, nin, ob, nout));
  for (int k = 0; k < nout; k++) {
    char why[256];
    if (!cb_close(oa[k], ob[k], 1e-5, 1e-6, 0, why, sizeof why)) fail_msg("output %d: %s", k, why);
    if (hj_exec_output_alias(e, k) >= 0) assert_ptr_equal(oa[k], a[hj_exec_output_alias(e, k)]);
  }
  hj_exec_stats_t st;
  CHECK_OK(cpu, hj_exec_stats(e, &st));
  assert_int_equal(st.copies, want_copies);
  if (!td_dump_has(dir, note)) fail_msg("the buffer assignment does not say \"%s\"", note);
  for (int k = 0; k < nout; k++) hj_buffer_destroy(oa[k]), hj_buffer_destroy(ob[k]);
  cb_free_bufs(a, nin);
  cb_free_bufs(b, nin);
  hj_exec_destroy(e);
  hj_exec_destroy(e2);
  hj_module_destroy(m);
  hj_module_destroy(m2);
  hj_ctx_destroy(cpu);
  hj_ctx_destroy(ev);
  td_rmdir(dir);
}

static void test_plans(void **state) {
  (void)state;
  /* the old cache is read after the update: computed aside, copied in at the end */
  td_module_vs_eval(
    "HloModule late, input_output_alias={ {0}: (0, {}, may-alias) }\n"
    "ENTRY main {\n  c = f32[16,8] parameter(0)\n  u = f32[1,8] parameter(1)\n  i = s32[] parameter(2)\n"
    "  z = s32[] constant(0)\n  d = f32[16,8] dynamic-update-slice(c, u, i, z)\n"
    "  e = f32[16,8] exponential(d)\n  s = f32[16,8] add(e, c)\n"
    "  ROOT t = (f32[16,8], f32[16,8]) tuple(d, s)\n}\n",
    "copied at the end", 1);
  /* an elementwise update in place: x' = x * 0.5 + d */
  td_module_vs_eval(
    "HloModule axpy, input_output_alias={ {}: (0, {}, may-alias) }\n"
    "ENTRY main {\n  x = f32[1000] parameter(0)\n  d = f32[1000] parameter(1)\n"
    "  h = f32[] constant(0.5)\n  hb = f32[1000] broadcast(h), dimensions={}\n"
    "  m = f32[1000] multiply(x, hb)\n  ROOT r = f32[1000] add(m, d)\n}\n",
    "in place (elementwise)", 0);
  /* the output is the parameter */
  td_module_vs_eval(
    "HloModule pass, input_output_alias={ {0}: (0, {}, may-alias) }\n"
    "ENTRY main {\n  x = f32[4] parameter(0)\n  n = f32[4] negate(x)\n"
    "  ROOT r = (f32[4], f32[4]) tuple(x, n)\n}\n",
    "the output is the parameter", 0);
  /* two donated parameters swapped: one staged, both copied at the end */
  td_module_vs_eval(
    "HloModule swap, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, may-alias) }\n"
    "ENTRY main {\n  x = f32[4] parameter(0)\n  y = f32[4] parameter(1)\n"
    "  ROOT r = (f32[4], f32[4]) tuple(y, x)\n}\n",
    "another parameter: staged, copied at the end", 4);
}

/* hj_graph_alias misuse: each refusal names the problem. */
static void test_alias_errors(void **state) {
  (void)state;
  hj_ctx_t *ctx = cb_ctx(HJ_BACKEND_INTERP, 0, NULL);
  hj_graph_t *g, *sub;
  CHECK_OK(ctx, hj_graph_create(ctx, "g", &g));
  hj_tensor_t x = hj_param(g, HJ_F32, HJ_SHAPE(4), "x"), y = hj_param(g, HJ_S32, HJ_SHAPE(2), "y");
  hj_tensor_t n = hj_neg(x);
  assert_int_equal(hj_graph_alias(g, 0, x), HJ_ERR_INVALID_ARG);
  ta_has(hj_ctx_error(ctx), "output 0 does not exist (graph 'g' has 0 output leaves so far)");
  CHECK_OK(ctx, hj_graph_output(g, n));
  assert_int_equal(hj_graph_alias(g, 0, n), HJ_ERR_INVALID_ARG);
  ta_has(hj_ctx_error(ctx), "not an array parameter of graph 'g'");
  assert_int_equal(hj_graph_alias(g, 0, y), HJ_ERR_SHAPE);
  ta_has(hj_ctx_error(ctx), "output 0 (f32[4]) and parameter 'y.1' (s32[2]) differ in size");
  CHECK_OK(ctx, hj_graph_alias(g, 0, x));
  assert_int_equal(hj_graph_alias(g, 0, x), HJ_ERR_INVALID_ARG);
  ta_has(hj_ctx_error(ctx), "output 0 already aliases parameter 'x.0'");
  assert_int_equal(hj_graph_output_aliased(g, hj_abs(x), x), HJ_ERR_INVALID_ARG);
  ta_has(hj_ctx_error(ctx), "parameter 'x.0' is already aliased by output 0");
  CHECK_OK(ctx, hj_graph_create_sub(g, "s", &sub));
  assert_int_equal(hj_graph_alias(sub, 0, x), HJ_ERR_INVALID_ARG);
  ta_has(hj_ctx_error(ctx), "'s' is a sub-graph");
  hj_exec_t *e;
  CHECK_OK(ctx, hj_compile(g, &e));
  assert_int_equal(hj_exec_num_outputs(e), 1);      /* the failed output_aliased left none */
  hj_exec_destroy(e);
  hj_graph_destroy(g);
  hj_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_decode_in_place),
    cmocka_unit_test(test_decode_without_donation),
    cmocka_unit_test(test_run_paths_cpu),
    cmocka_unit_test(test_run_paths_interp),
    cmocka_unit_test(test_plans),
    cmocka_unit_test(test_alias_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
