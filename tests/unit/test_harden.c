/* test_harden.c — regressions for the defects of issue 14, each found by a hostile-input
   campaign; every test here failed on main at 56b42b2 (wrong value, UBSan report, crash,
   exponential time or a poison without a message) and passes with the fixes:
     1  pad with interior padding INT64_MAX on a dim of size 1 (XLA: lo + hi + 1 elements)
     2  integer power with a negative exponent: (-1)^-n = +-1, 1^-n = 1, else 0
     3  10,000 nested calls on the evaluator (native recursion overflowed the stack)
     4  a fused DAG whose nodes are each used twice, v_i = v_{i-1} + v_{i-2}: emission time
     6  signed overflow on attribute values: slice with stride INT64_MAX (one element),
        reduce-window pads lo + dim + hi with a negative hi and huge dilations, pad with
        lo = -INT64_MAX and hi = INT64_MAX, strides of f32[0,INT64_MAX,4]
     7  builder shapes whose element count overflows, dims of INT64_MIN, hj_shape_numel
     8  poisoned tensors without a message: hj_tuple of HJ_NONE, hj_scatter with a logical
        combiner on f32 (hj_concat with n <= 0 cannot name a graph: HJ_NONE, documented)
   Expected values are worked out by hand in each test from XLA's semantics. Every module
   runs on the evaluator and on the CPU backend with parameters as inputs, so that constant
   folding does not hide the kernels; the ASan/UBSan build of this file (make unit-asan)
   turns each overflow into a failure. */
#include "testutil.h"
#include "api_testutil.h"

static hj_ctx_t *th_interp, *th_cpu;

/* Compiles |text| on |ctx|, runs it on |nin| inputs of the given s64 or f32 host data (one
   array per input, |nel| elements each, dtype |t|), copies output 0 (|nout_el| elements of
   |osize| bytes) into |out|; returns the exec stats. */
static hj_exec_stats_t th_run(hj_ctx_t *ctx, const char *text, hj_dtype_t t, int nin,
                              const void *const *data, const hj_shape_t *shapes, void *out,
                              size_t out_bytes) {
  hj_module_t *m = NULL;
  CHECK_OK(ctx, hj_module_parse(ctx, text, strlen(text), "harden.hlo", &m));
  hj_exec_t *e = NULL;
  CHECK_OK(ctx, hj_compile_module(ctx, m, &e));
  hj_buffer_t *in[4] = { 0 }, *res[1] = { 0 };
  for (int i = 0; i < nin; i++) CHECK_OK(ctx, hj_buffer_from_host(ctx, t, shapes[i], data[i], &in[i]));
  CHECK_OK(ctx, hj_exec_run(e, in, nin, res, 1));
  CHECK_OK(ctx, hj_buffer_copy_to_host(res[0], out, out_bytes));
  hj_exec_stats_t st;
  CHECK_OK(ctx, hj_exec_stats(e, &st));
  hj_buffer_destroy(res[0]);
  for (int i = 0; i < nin; i++) hj_buffer_destroy(in[i]);
  hj_exec_destroy(e);
  hj_module_destroy(m);
  return st;
}

/* ---- 1: pad with huge interior padding ---------------------------------------------------- */

static void test_pad_interior_int64_max(void **state) {
  /* dim of size 1: interior padding inserts nothing, the result is lo + 1 + hi = 3 */
  static const char text[] =
    "HloModule pad\nENTRY main {\n  p = s32[1] parameter(0)\n  z = s32[] parameter(1)\n"
    "  ROOT r = s32[3] pad(p, z), padding=1_1_9223372036854775807\n}\n";
  int32_t x = -4, v = 7;
  const void *data[2] = { &x, &v };
  hj_shape_t sh[2] = { HJ_SHAPE(1), HJ_SCALAR };
  hj_ctx_t *ctxs[2] = { th_interp, th_cpu };
  for (int c = 0; c < 2; c++) {
    int32_t got[3] = { 0 };
    th_run(ctxs[c], text, HJ_S32, 2, data, sh, got, sizeof got);
    assert_int_equal(got[0], 7);
    assert_int_equal(got[1], -4);
    assert_int_equal(got[2], 7);
  }
}

/* lo = -INT64_MAX crops every element; hi = INT64_MAX grows it back: 3 pad values. And
   lo = INT64_MIN with hi = INT64_MAX + 1 - ... : lo + hi = -1 on a dim of 4 -> 3 elements,
   all padding (the operand lands at positions INT64_MIN..INT64_MIN+3). */
static void test_pad_extreme_edges(void **state) {
  static const char text[] =
    "HloModule pad2\nENTRY main {\n  p = f32[3,4] parameter(0)\n  z = f32[] parameter(1)\n"
    "  ROOT r = f32[3,3] pad(p, z), padding=-9223372036854775807_9223372036854775807x"
    "-9223372036854775808_9223372036854775807\n}\n";
  float x[12], v = 2.5f;
  for (int i = 0; i < 12; i++) x[i] = (float)i;
  const void *data[2] = { x, &v };
  hj_shape_t sh[2] = { HJ_SHAPE(3, 4), HJ_SCALAR };
  hj_ctx_t *ctxs[2] = { th_interp, th_cpu };
  for (int c = 0; c < 2; c++) {
    float got[9] = { 0 };
    th_run(ctxs[c], text, HJ_F32, 2, data, sh, got, sizeof got);
    for (int i = 0; i < 9; i++) assert_true(got[i] == 2.5f);
  }
}

/* ---- 2: integer power with negative exponents --------------------------------------------- */

static void test_int_power_negative(void **state) {
  static const char *types[] = { "s8", "s16", "s32", "s64" };
  static const hj_dtype_t dt[] = { HJ_S8, HJ_S16, HJ_S32, HJ_S64 };
  /* base, exponent, expected */
  static const int64_t cases[][3] = {
    { -1, -2, 1 }, { -1, -3, -1 }, { -1, -1, -1 }, { 1, -5, 1 }, { 2, -1, 0 }, { -2, -1, 0 },
    { 0, -1, 0 }, { -1, 0, 1 }, { -1, 3, -1 }, { 3, 2, 9 }, { -1, -128, 1 }, { -1, -127, -1 },
  };
  enum { N = sizeof cases / sizeof cases[0] };
  hj_ctx_t *ctxs[2] = { th_interp, th_cpu };
  for (int t = 0; t < 4; t++) {
    char text[512];
    snprintf(text, sizeof text,
             "HloModule pow\nENTRY main {\n  a = %s[%d] parameter(0)\n  b = %s[%d] parameter(1)\n"
             "  ROOT r = %s[%d] power(a, b)\n}\n", types[t], N, types[t], N, types[t], N);
    uint8_t a[N * 8], b[N * 8];
    for (int i = 0; i < N; i++) {
      hlo_store_s64((hlo_type)dt[t], a, i, cases[i][0]);
      hlo_store_s64((hlo_type)dt[t], b, i, cases[i][1]);
    }
    const void *data[2] = { a, b };
    hj_shape_t sh[2] = { HJ_SHAPE(N), HJ_SHAPE(N) };
    for (int c = 0; c < 2; c++) {
      uint8_t got[N * 8];
      th_run(ctxs[c], text, dt[t], 2, data, sh, got, (size_t)N * hj_dtype_size(dt[t]));
      for (int i = 0; i < N; i++)
        if (hlo_load_s64((hlo_type)dt[t], got, i) != cases[i][2])
          fail_msg("%s %s: power(%lld, %lld) = %lld, want %lld", types[t], c ? "cpu" : "interp",
                   (long long)cases[i][0], (long long)cases[i][1],
                   (long long)hlo_load_s64((hlo_type)dt[t], got, i), (long long)cases[i][2]);
    }
  }
  /* constant folding (the evaluator through the pass hook) gives the same */
  static const char folded[] =
    "HloModule powc\nENTRY main {\n  a = s32[3] constant({-1, -1, 1})\n  b = s32[3] constant({-2, -3, -5})\n"
    "  ROOT r = s32[3] power(a, b)\n}\n";
  hj_module_t *m = NULL;
  CHECK_OK(th_interp, hj_module_parse(th_interp, folded, strlen(folded), "powc", &m));
  CHECK_OK(th_interp, hj_module_optimize(m));
  char *printed = NULL;
  CHECK_OK(th_interp, hj_module_print(m, &printed));
  ta_has(printed, "constant({1, -1, 1})");
  free(printed);
  hj_module_destroy(m);
}

/* ---- 3: deeply nested calls ------------------------------------------------------------------ */

static char *th_call_chain(int n) {
  char *sb = NULL;
  sb_puts(&sb, "HloModule calls\nc0 {\n  p = f32[4] parameter(0)\n  ROOT r = f32[4] negate(p)\n}\n");
  for (int i = 1; i < n; i++)
    sb_printf(&sb, "c%d {\n  p = f32[4] parameter(0)\n  ROOT r = f32[4] call(p), to_apply=c%d\n}\n", i, i - 1);
  sb_printf(&sb, "ENTRY main {\n  p = f32[4] parameter(0)\n  ROOT r = f32[4] call(p), to_apply=c%d\n}\n", n - 1);
  char *s = strdup(sb);
  arrfree(sb);
  return s;
}

static void test_nested_calls_10000(void **state) {
  char *text = th_call_chain(10000);
  float x[4] = { 1, -2, 3, -4 }, got[4];
  const void *data[1] = { x };
  hj_shape_t sh[1] = { HJ_SHAPE(4) };
  th_run(th_interp, text, HJ_F32, 1, data, sh, got, sizeof got);
  for (int i = 0; i < 4; i++) assert_true(got[i] == -x[i]);
  free(text);
}

/* A while whose body calls a chain, inside a conditional: the task stack resumes each. */
static void test_nested_control(void **state) {
  static const char text[] =
    "HloModule ctl\n"
    "inc { p = s32[] parameter(0)\n  one = s32[] constant(1)\n  ROOT r = s32[] add(p, one) }\n"
    "twice { p = s32[] parameter(0)\n  a = s32[] call(p), to_apply=inc\n  ROOT b = s32[] call(a), to_apply=inc }\n"
    "cond { s = (s32[], s32[]) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n"
    "  n = s32[] constant(5)\n  ROOT lt = pred[] compare(i, n), direction=LT }\n"
    "body { s = (s32[], s32[]) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n"
    "  x = s32[] get-tuple-element(s), index=1\n  i1 = s32[] call(i), to_apply=inc\n"
    "  x2 = s32[] call(x), to_apply=twice\n  ROOT t = (s32[], s32[]) tuple(i1, x2) }\n"
    "yes { p = s32[] parameter(0)\n  z = s32[] constant(0)\n  t = (s32[], s32[]) tuple(z, p)\n"
    "  w = (s32[], s32[]) while(t), condition=cond, body=body\n  ROOT r = s32[] get-tuple-element(w), index=1 }\n"
    "no { p = s32[] parameter(0)\n  ROOT r = s32[] negate(p) }\n"
    "ENTRY main {\n  k = pred[] parameter(0)\n  x = s32[] parameter(1)\n"
    "  ROOT c = s32[] conditional(k, x, x), true_computation=yes, false_computation=no\n}\n";
  hj_module_t *m = NULL;
  CHECK_OK(th_interp, hj_module_parse(th_interp, text, strlen(text), "ctl", &m));
  hj_exec_t *e = NULL;
  CHECK_OK(th_interp, hj_compile_module(th_interp, m, &e));
  for (int k = 0; k < 2; k++) {
    uint8_t p = (uint8_t)k;
    int32_t x = 3, got = 0;
    hj_buffer_t *in[2], *out[1] = { NULL };
    CHECK_OK(th_interp, hj_buffer_from_host(th_interp, HJ_PRED, HJ_SCALAR, &p, &in[0]));
    CHECK_OK(th_interp, hj_buffer_from_host(th_interp, HJ_S32, HJ_SCALAR, &x, &in[1]));
    CHECK_OK(th_interp, hj_exec_run(e, in, 2, out, 1));
    CHECK_OK(th_interp, hj_buffer_copy_to_host(out[0], &got, sizeof got));
    assert_int_equal(got, k ? 3 + 2 * 5 : -3);
    hj_buffer_destroy(out[0]);
    hj_buffer_destroy(in[0]);
    hj_buffer_destroy(in[1]);
  }
  hj_exec_destroy(e);
  hj_module_destroy(m);
}

/* Computations applied per element still nest natively: 100 levels of reduce-in-reducer
   get a clear error, not a stack overflow. */
static void test_nested_reducers_limit(void **state) {
  char *sb = NULL;
  sb_puts(&sb, "HloModule red\nr0 {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n");
  for (int i = 1; i < 100; i++)
    sb_printf(&sb, "r%d {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
              "  s = f32[] reduce(a, b), dimensions={}, to_apply=r%d\n  ROOT n = f32[] negate(s)\n}\n", i, i - 1);
  sb_puts(&sb, "ENTRY main {\n  x = f32[2] parameter(0)\n  z = f32[] constant(0)\n"
               "  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply=r99\n}\n");
  hj_module_t *m = NULL;
  CHECK_OK(th_interp, hj_module_parse(th_interp, sb, strlen(sb), "red", &m));
  arrfree(sb);
  hj_exec_t *e = NULL;
  CHECK_OK(th_interp, hj_compile_module(th_interp, m, &e));
  hj_buffer_t *in[1], *out[1] = { NULL };
  CHECK_OK(th_interp, hj_buffer_create(th_interp, HJ_F32, HJ_SHAPE(2), &in[0]));
  assert_int_equal(hj_exec_run(e, in, 1, out, 1), HJ_ERR_UNSUPPORTED);
  ta_has(hj_ctx_error(th_interp), "more than 64 levels");
  assert_null(out[0]);
  hj_buffer_destroy(in[0]);
  hj_exec_destroy(e);
  hj_module_destroy(m);
}

/* ---- 4: exponential emission of a shared DAG -------------------------------------------------- */

static void test_dag_emission_linear(void **state) {
  char *sb = NULL;
  int n = 60;
  sb_puts(&sb, "HloModule fib\nENTRY main {\n  v0 = f32[64] parameter(0)\n  v1 = f32[64] parameter(1)\n");
  for (int i = 2; i < n; i++) sb_printf(&sb, "  v%d = f32[64] add(v%d, v%d)\n", i, i - 1, i - 2);
  sb_printf(&sb, "  ROOT r = f32[64] negate(v%d)\n}\n", n - 1);
  float a[64], b[64], got[64];
  for (int i = 0; i < 64; i++) a[i] = (float)(i % 3) * 1e-12f, b[i] = (float)(i % 5) * 1e-12f;
  const void *data[2] = { a, b };
  hj_shape_t sh[2] = { HJ_SHAPE(64), HJ_SHAPE(64) };
  hj_exec_stats_t st = th_run(th_cpu, sb, HJ_F32, 2, data, sh, got, sizeof got);
  arrfree(sb);
  /* before: 2.9 s at 40 nodes, over 100 s at 60; linear: well under a millisecond */
  printf("  fused DAG of %d shared nodes: emission %.2f ms, %d kernel(s)\n", n, st.emit_ms,
         st.kernels_loop);
  assert_true(st.emit_ms < 2000);
  /* fib: v_{n-1} = F(n-2) a + F(n-1) b; exact for these small values in f64 */
  double f0 = 0, f1 = 1;
  for (int i = 2; i < n; i++) { double t = f0 + f1; f0 = f1; f1 = t; }
  for (int i = 0; i < 64; i++) {
    double want = -(f0 * a[i] + f1 * b[i]);
    assert_true(fabs(got[i] - want) <= 1e-5 * fabs(want) + 1e-30);
  }
}

/* ---- 6: overflow on attribute values ---------------------------------------------------------- */

static void test_slice_huge_stride(void **state) {
  /* XLA: [0:2:INT64_MAX] is one element; main inferred f32[-1] (and UBSan overflowed) */
  static const char text[] =
    "HloModule s\nENTRY main {\n  p = f32[4,4] parameter(0)\n"
    "  ROOT r = f32[1,2] slice(p), slice={[1:3:9223372036854775807], [0:4:2]}\n}\n";
  float x[16], got[2];
  for (int i = 0; i < 16; i++) x[i] = (float)i;
  const void *data[1] = { x };
  hj_shape_t sh[1] = { HJ_SHAPE(4, 4) };
  hj_ctx_t *ctxs[2] = { th_interp, th_cpu };
  for (int c = 0; c < 2; c++) {
    th_run(ctxs[c], text, HJ_F32, 1, data, sh, got, sizeof got);
    assert_true(got[0] == 4.0f && got[1] == 6.0f);
  }
  /* shape inference from text with no declared shape */
  static const char inferred[] =
    "HloModule s2\nENTRY main {\n  p = f32[4] parameter(0)\n  ROOT r = slice(p), slice={[0:2:9223372036854775807]}\n}\n";
  hj_module_t *m = NULL;
  CHECK_OK(th_interp, hj_module_parse(th_interp, inferred, strlen(inferred), "s2", &m));
  hj_dtype_t t;
  hj_shape_t s;
  CHECK_OK(th_interp, hj_module_output(m, 0, &t, &s));
  assert_int_equal(s.rank, 1);
  assert_int_equal(s.dims[0], 1);
  hj_module_destroy(m);
}

static void test_reduce_window_extremes(void **state) {
  /* lo + dim + hi with lo = INT64_MAX, hi = -(INT64_MAX - 3): 4 + 3 = 7 positions, all
     padding (the input starts at position INT64_MAX): 7 init values */
  static const char text[] =
    "HloModule rw\nadd { a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b) }\n"
    "ENTRY main {\n  p = f32[4] parameter(0)\n  z = f32[] parameter(1)\n"
    "  ROOT r = f32[7] reduce-window(p, z), window={size=1 pad=9223372036854775807_-9223372036854775804}, to_apply=add\n}\n";
  float x[4] = { 1, 2, 3, 4 }, z = 0.5f, got[7];
  const void *data[2] = { x, &z };
  hj_shape_t sh[2] = { HJ_SHAPE(4), HJ_SCALAR };
  hj_ctx_t *ctxs[2] = { th_interp, th_cpu };
  for (int c = 0; c < 2; c++) {
    th_run(ctxs[c], text, HJ_F32, 2, data, sh, got, sizeof got);
    for (int i = 0; i < 7; i++) assert_true(got[i] == 0.5f);
  }
  /* a window dilation whose dilated size overflows: a clean shape error */
  static const char bad[] =
    "HloModule rw2\nadd { a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b) }\n"
    "ENTRY main {\n  p = f32[4] parameter(0)\n  z = f32[] constant(0)\n"
    "  ROOT r = f32[1] reduce-window(p, z), window={size=3 rhs_dilate=9223372036854775807}, to_apply=add\n}\n";
  hj_module_t *m = (hj_module_t *)1;
  assert_int_equal(hj_module_parse(th_interp, bad, strlen(bad), "rw2", &m), HJ_ERR_SHAPE);
  assert_null(m);
  ta_has(hj_ctx_error(th_interp), "overflows");
  /* a huge window over padding only costs its taps: size 2^40, one input element */
  static const char big[] =
    "HloModule rw3\nadd { a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b) }\n"
    "ENTRY main {\n  p = f32[1] parameter(0)\n  z = f32[] parameter(1)\n"
    "  ROOT r = f32[2] reduce-window(p, z), window={size=1099511627776 pad=1099511627775_1}, to_apply=add\n}\n";
  float one = 3.0f, got2[2];
  const void *d2[2] = { &one, &z };
  hj_shape_t s2[2] = { HJ_SHAPE(1), HJ_SCALAR };
  th_run(th_interp, big, HJ_F32, 2, d2, s2, got2, sizeof got2);
  assert_true(got2[0] == 3.5f && got2[1] == 3.5f);
}

static void test_zero_element_huge_dims(void **state) {
  /* f32[0,INT64_MAX,4]: valid (no elements); its strides used to overflow */
  static const char text[] =
    "HloModule z\nENTRY main {\n  p = f32[0,9223372036854775807,4] parameter(0)\n"
    "  t = f32[4,9223372036854775807,0] transpose(p), dimensions={2,1,0}\n"
    "  s = f32[4,1,0] slice(t), slice={[0:4], [9223372036854775806:9223372036854775807], [0:0]}\n"
    "  ROOT r = f32[4,1,0] reverse(s), dimensions={0,1}\n}\n";
  hj_module_t *m = NULL;
  CHECK_OK(th_interp, hj_module_parse(th_interp, text, strlen(text), "z", &m));
  hlo_literal *arg = hlo_literal_new(th_interp, &m->entry->params[0]->shape), *out = NULL;
  assert_non_null(arg);
  CHECK_OK(th_interp, hlo_eval_module(th_interp, m, &arg, 1, &out));
  assert_int_equal(out->nbytes, 0);
  int64_t st[3] = { 1, 1, 1 };
  hlo_shape_strides(&m->entry->params[0]->shape, st);
  for (int i = 0; i < 3; i++) assert_int_equal(st[i], 0);
  hlo_literal_free(out);
  hlo_literal_free(arg);
  hj_module_destroy(m);
}

/* A result whose element count passes 2^53 (every dim fine on its own) is a shape error,
   not a silent overflow downstream. */
static void test_result_numel_bound(void **state) {
  static const char text[] =
    "HloModule d\nENTRY main {\n  a = f32[4194304,1] parameter(0)\n  b = f32[1,4194304] parameter(1)\n"
    "  ROOT r = dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
  hj_module_t *m = NULL;
  CHECK_OK(th_interp, hj_module_parse(th_interp, text, strlen(text), "d", &m));   /* 2^44: fine */
  hj_module_destroy(m);
  static const char big[] =
    "HloModule d\nENTRY main {\n  a = f32[4294967296,1] parameter(0)\n  b = f32[1,4294967296] parameter(1)\n"
    "  ROOT r = dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
  m = (hj_module_t *)1;
  assert_int_equal(hj_module_parse(th_interp, big, strlen(big), "d", &m), HJ_ERR_SHAPE);
  assert_null(m);
  ta_has(hj_ctx_error(th_interp), "more than 2^53 elements");
}

/* ---- 7: builder shapes that overflow ---------------------------------------------------------- */

static void test_builder_numel_overflow(void **state) {
  ta_fix *f = *state;
  hj_shape_t s1 = HJ_SHAPE(4294967296LL, 4294967296LL), s2 = HJ_SHAPE(INT64_MAX, 2);
  assert_int_equal(hj_shape_numel(s1), -1);
  assert_int_equal(hj_shape_numel(s2), -1);
  assert_int_equal(hj_shape_numel(HJ_SHAPE(INT64_MIN)), -1);
  assert_int_equal(hj_shape_numel(HJ_SHAPE(0, INT64_MAX, 4)), 0);
  assert_int_equal(hj_shape_numel(HJ_SHAPE(HJ_DYN(3), 5)), 15);
  hj_tensor_t p = hj_param(f->g, HJ_F32, s1, "p");
  assert_false(hj_tensor_ok(p));
  assert_int_equal(hj_graph_status(f->g), HJ_ERR_INVALID_ARG);
  ta_has(hj_ctx_error(f->ctx), "hj_param");
  ta_has(hj_ctx_error(f->ctx), "more than 2^53 elements");
}

static void test_builder_full_and_min_dim(void **state) {
  ta_fix *f = *state;
  assert_false(hj_tensor_ok(hj_full(f->g, HJ_F32, HJ_SHAPE(INT64_MAX, 2), 1.0)));
  ta_has(hj_ctx_error(f->ctx), "hj_full");
  hj_graph_t *g2;
  CHECK_OK(f->ctx, hj_graph_create(f->ctx, "g2", &g2));
  hj_tensor_t p = hj_param(g2, HJ_F32, HJ_SHAPE(INT64_MIN), "p");
  assert_false(hj_tensor_ok(p));
  ta_has(hj_ctx_error(f->ctx), "INT64_MIN");
  /* a graph of valid big shapes still compiles and prints back */
  hj_graph_t *g3;
  CHECK_OK(f->ctx, hj_graph_create(f->ctx, "g3", &g3));
  hj_tensor_t q = hj_param(g3, HJ_F32, HJ_SHAPE(0, INT64_MAX, 4), "q");
  assert_true(hj_tensor_ok(q));
  CHECK_OK(f->ctx, hj_graph_output(g3, hj_neg(q)));
  hj_module_t *m = NULL;
  CHECK_OK(f->ctx, hj_graph_to_module(g3, &m));
  char *text = NULL;
  CHECK_OK(f->ctx, hj_module_print(m, &text));
  hj_module_t *m2 = NULL;
  CHECK_OK(f->ctx, hj_module_parse(f->ctx, text, strlen(text), "g3", &m2));
  free(text);
  hj_module_destroy(m2);
  hj_module_destroy(m);
  hj_graph_destroy(g3);
  hj_graph_destroy(g2);
}

static void test_builder_reshape_overflow(void **state) {
  ta_fix *f = *state;
  hj_tensor_t x = hj_param(f->g, HJ_F32, HJ_SHAPE(4), "x");
  assert_false(hj_tensor_ok(hj_reshape(x, HJ_SHAPE(-1, INT64_MAX, 4))));
  ta_has(hj_ctx_error(f->ctx), "hj_reshape");
}

/* ---- 8: poisons without a message ------------------------------------------------------------- */

static void test_tuple_of_none(void **state) {
  ta_fix *f = *state;
  hj_tensor_t xs[1] = { HJ_NONE };
  hj_tensor_t t = hj_tuple(f->g, xs, 1);
  assert_false(hj_tensor_ok(t));
  assert_int_equal(hj_graph_status(f->g), HJ_ERR_INVALID_ARG);
  ta_has(hj_ctx_error(f->ctx), "hj_tuple: operand 0 is HJ_NONE");
}

static void test_call_of_none(void **state) {
  ta_fix *f = *state;
  hj_graph_t *sub;
  CHECK_OK(f->ctx, hj_graph_create_sub(f->g, "s", &sub));
  CHECK_OK(f->ctx, hj_graph_output(sub, hj_neg(hj_param(sub, HJ_F32, HJ_SHAPE(2), "a"))));
  hj_tensor_t args[1] = { HJ_NONE };
  assert_false(hj_tensor_ok(hj_call(sub, args, 1)));
  assert_int_equal(hj_graph_status(f->g), HJ_ERR_INVALID_ARG);
  ta_has(hj_ctx_error(f->ctx), "hj_call: operand 0 is HJ_NONE");
}

static void test_scatter_logical_f32(void **state) {
  ta_fix *f = *state;
  hj_tensor_t op = hj_param(f->g, HJ_F32, HJ_SHAPE(4), "op");
  hj_tensor_t ix = hj_param(f->g, HJ_S32, HJ_SHAPE(2, 1), "ix");
  hj_tensor_t up = hj_param(f->g, HJ_F32, HJ_SHAPE(2), "up");
  int64_t ins[1] = { 0 }, sd[1] = { 0 };
  hj_scatter_dims_t d = { .inserted_window_dims = ins, .n_inserted_window_dims = 1,
                          .scatter_dims_to_operand_dims = sd, .n_scatter_dims_to_operand_dims = 1,
                          .index_vector_dim = 1 };
  hj_tensor_t r = hj_scatter(op, ix, up, &d, HJ_RED_AND);
  assert_false(hj_tensor_ok(r));
  assert_int_equal(hj_graph_status(f->g), HJ_ERR_SHAPE);
  ta_has(hj_ctx_error(f->ctx), "hj_scatter: reducer HJ_RED_AND is not defined on f32");
  /* the same combiner on s32 is fine */
  hj_tensor_t oi = hj_param(f->g, HJ_S32, HJ_SHAPE(4), "oi");
  hj_tensor_t ui = hj_param(f->g, HJ_S32, HJ_SHAPE(2), "ui");
  assert_true(hj_tensor_ok(hj_scatter(oi, ix, ui, &d, HJ_RED_OR)));
}

/* hj_concat with no tensors cannot tell the graph: HJ_NONE (no graph at all), and the op
   or hj_graph_output that receives it reports it. */
static void test_concat_empty_is_none(void **state) {
  ta_fix *f = *state;
  hj_tensor_t xs[1] = { hj_param(f->g, HJ_F32, HJ_SHAPE(2), "x") };
  hj_tensor_t c = hj_concat(xs, 0, 0);
  assert_null(c.graph);
  assert_false(hj_tensor_ok(c));
  assert_int_not_equal(hj_graph_output(f->g, c), HJ_OK);
  ta_has(hj_ctx_error(f->ctx), "hj_graph_output");
  assert_false(hj_tensor_ok(hj_add(xs[0], c)));
  ta_has(hj_ctx_error(f->ctx), "hj_add: operand 1 is HJ_NONE");
}

/* argv[1], when given, selects the tests to run (a cmocka filter pattern, e.g. '*pad*'). */
int main(int argc, char **argv) {
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  o.backend = HJ_BACKEND_INTERP;
  if (hj_ctx_create(&o, &th_interp) != HJ_OK) return 1;
  o.backend = HJ_BACKEND_CPU;
  o.num_threads = 1;
  if (hj_ctx_create(&o, &th_cpu) != HJ_OK) return 1;
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_pad_interior_int64_max),
    cmocka_unit_test(test_pad_extreme_edges),
    cmocka_unit_test(test_int_power_negative),
    cmocka_unit_test(test_nested_calls_10000),
    cmocka_unit_test(test_nested_control),
    cmocka_unit_test(test_nested_reducers_limit),
    cmocka_unit_test(test_dag_emission_linear),
    cmocka_unit_test(test_slice_huge_stride),
    cmocka_unit_test(test_reduce_window_extremes),
    cmocka_unit_test(test_zero_element_huge_dims),
    cmocka_unit_test(test_result_numel_bound),
    cmocka_unit_test_setup_teardown(test_builder_numel_overflow, ta_setup, ta_teardown),
    cmocka_unit_test_setup_teardown(test_builder_full_and_min_dim, ta_setup, ta_teardown),
    cmocka_unit_test_setup_teardown(test_builder_reshape_overflow, ta_setup, ta_teardown),
    cmocka_unit_test_setup_teardown(test_tuple_of_none, ta_setup, ta_teardown),
    cmocka_unit_test_setup_teardown(test_call_of_none, ta_setup, ta_teardown),
    cmocka_unit_test_setup_teardown(test_scatter_logical_f32, ta_setup, ta_teardown),
    cmocka_unit_test_setup_teardown(test_concat_empty_is_none, ta_setup, ta_teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  hj_ctx_destroy(th_cpu);
  hj_ctx_destroy(th_interp);
  return rc;
}
