/* test_api_hostile_io.c — test_api_hostile.c's campaign (issue 14) over the API that came
   later: buffers over caller memory, mapped files and views; donation (hj_graph_alias);
   names and bound inputs; profiles; hj_module_optimize_timed; hj_module_to_ptx; the tracing
   JIT (hj_jit_*).
   Each function gets NULL, bad handles, out-of-range indices and counts, overflowing
   shapes and offsets, and each rule hlojit.h states for it is checked both ways (refused
   with a message and nothing changed; accepted and the values right). The rules, from
   hlojit.h:
   - wrap: |data| aligned to the element size, at least elements x size bytes, not NULL;
     |release| never called on failure; map: a region inside the file, |offset| a multiple
     of the element size; view: a region inside the base; a read-only buffer (mapped,
     wrapped read-only, a view of either) is never an output, nor a donated input that a
     run would write in place;
   - alias: a top graph's output leaf and array parameter of the same byte size, each in one
     pair at most; an output that aliases a parameter of another dtype or shape still
     comes back with the output's dtype and shape;
   - names: a missing or ambiguous look-up is -1 with a message; bind: a wrong shape or
     dtype is HJ_ERR_SHAPE and nothing changes; a run then takes only the unbound inputs;
   - jit: options declare the parameters (ranks, dims, ascending buckets >= 1); a call
     checks counts, ranks, dynamic sizes (1..max); a build function that fails gives its
     error with a message; an output buffer must have the real shape and be writable.
   This file runs under ASan/UBSan too (make unit-asan). test_api_hostile.c's coverage test
   scans this file as well. */
#include "testutil.h"
#include "api_testutil.h"
#include <limits.h>
#include <unistd.h>

static hj_ctx_t *th_ctx;

/* |call| returns |code| and leaves *b NULL; with |msg|, a message is in the context. */
#define REFUSED(b, code, msg, call)                                                        \
  do {                                                                                     \
    (b) = (hj_buffer_t *)1;                                                                \
    hj_ctx_clear_error(th_ctx);                                                            \
    hj_status st_ = (call);                                                                \
    if (st_ != (code)) fail_msg("%s: %s, want %s (%s)", #call, hj_status_name(st_),        \
                                hj_status_name(code), hj_ctx_error(th_ctx));                \
    if ((b) != NULL) fail_msg("%s: *out is not NULL", #call);                              \
    if ((msg) && !hj_ctx_error(th_ctx)[0]) fail_msg("%s: no message", #call);              \
  } while (0)

static int th_released;
static void th_release(void *user, void *data) { th_released++; }

/* y = -x over f32[n], compiled on the evaluator; with |donate| the output aliases x. */
static hj_exec_t *th_neg(int n, bool donate, hj_graph_t **g) {
  CHECK_OK(th_ctx, hj_graph_create(th_ctx, "neg", g));
  hj_tensor_t x = hj_param(*g, HJ_F32, HJ_SHAPE(n), "x");
  CHECK_OK(th_ctx, donate ? hj_graph_output_aliased(*g, hj_neg(x), x) : hj_graph_output(*g, hj_neg(x)));
  hj_exec_t *e;
  CHECK_OK(th_ctx, hj_compile(*g, &e));
  return e;
}

/* ---- wrapped, mapped and view buffers ----------------------------------------------------- */

static void test_buffer_wrap_misuse(void **state) {
  const int64_t M = INT64_MAX, m = INT64_MIN;
  float *mem = aligned_alloc(64, 256);
  for (int i = 0; i < 64; i++) mem[i] = (float)i;
  hj_buffer_t *b;
  th_released = 0;
  assert_int_equal(hj_buffer_wrap(th_ctx, HJ_F32, HJ_SHAPE(4), mem, 16, 0, th_release, NULL, NULL), HJ_ERR_INVALID_ARG);
  REFUSED(b, HJ_ERR_INVALID_ARG, false, hj_buffer_wrap(NULL, HJ_F32, HJ_SHAPE(4), mem, 16, 0, th_release, NULL, &b));
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_wrap(th_ctx, HJ_F32, HJ_SHAPE(4), NULL, 16, 0, th_release, NULL, &b));
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_wrap(th_ctx, HJ_F32, HJ_SHAPE(4), (char *)mem + 2, 32, 0, th_release, NULL, &b));
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_wrap(th_ctx, HJ_F64, HJ_SHAPE(4), (char *)mem + 4, 64, 0, th_release, NULL, &b));
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_wrap(th_ctx, HJ_F32, HJ_SHAPE(4), mem, 15, 0, th_release, NULL, &b));
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_wrap(th_ctx, HJ_F32, HJ_SHAPE(4), mem, 0, 0, th_release, NULL, &b));
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_wrap(th_ctx, HJ_F32, HJ_SHAPE(4), mem, 16, 2, th_release, NULL, &b));
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_wrap(th_ctx, HJ_F32, HJ_SHAPE(4), mem, 16, ~0u, th_release, NULL, &b));
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_wrap(th_ctx, (hj_dtype_t)-1, HJ_SHAPE(4), mem, 16, 0, th_release, NULL, &b));
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_wrap(th_ctx, HJ_DTYPE_COUNT, HJ_SHAPE(4), mem, 16, 0, th_release, NULL, &b));
  hj_shape_t bad[] = { { .rank = 9 }, { .rank = -1 }, HJ_SHAPE(m), HJ_SHAPE(2, m), HJ_SHAPE(M, 2),
                       HJ_SHAPE(4294967296LL, 4294967296LL), HJ_SHAPE(9007199254740993LL), HJ_SHAPE(HJ_DYN(M)) };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_wrap(th_ctx, HJ_U8, bad[i], mem, SIZE_MAX, 0, th_release, NULL, &b));
  assert_int_equal(th_released, 0);   /* never on a failed wrap */
  /* accepted: exactly big enough, more than enough, read-only, no release */
  CHECK_OK(th_ctx, hj_buffer_wrap(th_ctx, HJ_F32, HJ_SHAPE(2, 2), mem, 16, HJ_BUFFER_READ_ONLY, th_release, NULL, &b));
  assert_true(hj_buffer_is_read_only(b));
  assert_int_equal(hj_buffer_nbytes(b), 16);
  hj_graph_t *g;
  hj_exec_t *e = th_neg(4, false, &g);
  hj_buffer_t *out[1] = { b };
  hj_ctx_clear_error(th_ctx);
  assert_int_equal(hj_exec_run(e, &b, 1, out, 1), HJ_ERR_SHAPE);   /* [2,2] is not [4] */
  hj_buffer_destroy(b);
  assert_int_equal(th_released, 1);
  CHECK_OK(th_ctx, hj_buffer_wrap(th_ctx, HJ_F32, HJ_SHAPE(4), mem, 256, HJ_BUFFER_READ_ONLY, NULL, NULL, &b));
  out[0] = b;
  hj_ctx_clear_error(th_ctx);
  assert_int_equal(hj_exec_run(e, &b, 1, out, 1), HJ_ERR_INVALID_ARG);   /* read-only output */
  ta_has(hj_ctx_error(th_ctx), "read-only");
  out[0] = NULL;
  CHECK_OK(th_ctx, hj_exec_run(e, &b, 1, out, 1));   /* read-only input: fine */
  assert_true(((float *)hj_buffer_host_ptr(out[0]))[3] == -3.0f);
  assert_true(mem[3] == 3.0f);
  hj_buffer_destroy(out[0]);
  hj_buffer_destroy(b);
  assert_false(hj_buffer_is_read_only(NULL));
  assert_null(hj_buffer_retain(NULL));
  hj_exec_destroy(e);
  hj_graph_destroy(g);
  free(mem);
}

/* A file of 25 f32 (100 bytes), values 0..24. */
static void th_write_file(char *path, size_t n) {
  snprintf(path, n, "/tmp/hlojit_hostile_%d.bin", (int)getpid());
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  for (int i = 0; i < 25; i++) {
    float v = (float)i;
    assert_int_equal(fwrite(&v, 4, 1, f), 1);
  }
  fclose(f);
}

static void test_buffer_map_misuse(void **state) {
  char path[128];
  th_write_file(path, sizeof path);
  hj_buffer_t *b;
  assert_int_equal(hj_buffer_map_file(th_ctx, path, 0, HJ_F32, HJ_SHAPE(4), NULL), HJ_ERR_INVALID_ARG);
  REFUSED(b, HJ_ERR_INVALID_ARG, false, hj_buffer_map_file(NULL, path, 0, HJ_F32, HJ_SHAPE(4), &b));
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_map_file(th_ctx, NULL, 0, HJ_F32, HJ_SHAPE(4), &b));
  REFUSED(b, HJ_ERR_IO, true, hj_buffer_map_file(th_ctx, "/nonexistent/weights.bin", 0, HJ_F32, HJ_SHAPE(4), &b));
  REFUSED(b, HJ_ERR_IO, true, hj_buffer_map_file(th_ctx, "/tmp", 0, HJ_F32, HJ_SHAPE(4), &b));   /* a directory */
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_map_file(th_ctx, path, 2, HJ_F32, HJ_SHAPE(4), &b));   /* misaligned */
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_map_file(th_ctx, path, 200, HJ_F32, HJ_SHAPE(4), &b)); /* past the end */
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_map_file(th_ctx, path, 104, HJ_F32, HJ_SHAPE(0), &b)); /* empty, past it */
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_map_file(th_ctx, path, 96, HJ_F32, HJ_SHAPE(2), &b));  /* runs past it */
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_map_file(th_ctx, path, 0, HJ_F32, HJ_SHAPE(26), &b));
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_map_file(th_ctx, path, UINT64_MAX - 3, HJ_F32, HJ_SHAPE(1), &b));
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_map_file(th_ctx, path, UINT64_MAX - 3, HJ_F32, HJ_SHAPE(0), &b));
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_map_file(th_ctx, path, 0, HJ_F32, HJ_SHAPE(INT64_MIN), &b));
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_map_file(th_ctx, path, 0, HJ_F32, HJ_SHAPE(INT64_MAX, 2), &b));
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_map_file(th_ctx, path, 0, (hj_dtype_t)99, HJ_SHAPE(1), &b));
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_map_file(th_ctx, path, 0, HJ_F32, (hj_shape_t){ .rank = 9 }, &b));
  /* accepted: the whole file, an empty region at its end, a region in the middle */
  CHECK_OK(th_ctx, hj_buffer_map_file(th_ctx, path, 100, HJ_F32, HJ_SHAPE(0), &b));
  hj_buffer_destroy(b);
  CHECK_OK(th_ctx, hj_buffer_map_file(th_ctx, path, 0, HJ_F32, HJ_SHAPE(25), &b));
  hj_buffer_destroy(b);
  CHECK_OK(th_ctx, hj_buffer_map_file(th_ctx, path, 8, HJ_F32, HJ_SHAPE(4), &b));
  assert_true(hj_buffer_is_read_only(b));
  assert_true(((float *)hj_buffer_host_ptr(b))[0] == 2.0f);
  /* read-only: an input, not an output, not a donated input written in place */
  hj_graph_t *g, *g2;
  hj_exec_t *e = th_neg(4, false, &g), *d = th_neg(4, true, &g2);
  hj_buffer_t *out[1] = { b };
  hj_ctx_clear_error(th_ctx);
  assert_int_equal(hj_exec_run(e, &b, 1, out, 1), HJ_ERR_INVALID_ARG);
  ta_has(hj_ctx_error(th_ctx), "read-only");
  hj_ctx_clear_error(th_ctx);
  assert_int_equal(hj_exec_run(d, &b, 1, out, 1), HJ_ERR_INVALID_ARG);
  ta_has(hj_ctx_error(th_ctx), "read-only");
  assert_ptr_equal(out[0], b);
  out[0] = NULL;   /* a donated read-only input gets a new output buffer */
  CHECK_OK(th_ctx, hj_exec_run(d, &b, 1, out, 1));
  assert_ptr_not_equal(out[0], b);
  assert_false(hj_buffer_is_read_only(out[0]));
  assert_true(((float *)hj_buffer_host_ptr(out[0]))[1] == -3.0f && ((float *)hj_buffer_host_ptr(b))[1] == 3.0f);
  hj_buffer_destroy(out[0]);
  hj_buffer_destroy(b);
  hj_exec_destroy(d);
  hj_exec_destroy(e);
  hj_graph_destroy(g2);
  hj_graph_destroy(g);
  unlink(path);
}

static void test_buffer_view_misuse(void **state) {
  float host[16];
  for (int i = 0; i < 16; i++) host[i] = (float)i;
  hj_buffer_t *base, *b;
  CHECK_OK(th_ctx, hj_buffer_from_host(th_ctx, HJ_F32, HJ_SHAPE(16), host, &base));   /* 64 bytes */
  assert_int_equal(hj_buffer_view(base, 0, HJ_F32, HJ_SHAPE(1), NULL), HJ_ERR_INVALID_ARG);
  REFUSED(b, HJ_ERR_INVALID_ARG, false, hj_buffer_view(NULL, 0, HJ_F32, HJ_SHAPE(1), &b));
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_view(base, 2, HJ_F32, HJ_SHAPE(1), &b));    /* misaligned */
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_view(base, 64, HJ_F32, HJ_SHAPE(1), &b));   /* past the end */
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_view(base, 60, HJ_F32, HJ_SHAPE(2), &b));
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_view(base, 0, HJ_F32, HJ_SHAPE(17), &b));
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_view(base, 68, HJ_F32, HJ_SHAPE(0), &b));   /* empty, past it */
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_view(base, SIZE_MAX, HJ_U8, HJ_SHAPE(1), &b));
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_view(base, SIZE_MAX - 3, HJ_F32, HJ_SHAPE(0), &b));
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_view(base, 0, HJ_F32, HJ_SHAPE(INT64_MIN), &b));
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_view(base, 0, HJ_U8, HJ_SHAPE(INT64_MAX, 4), &b));
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_view(base, 0, (hj_dtype_t)-3, HJ_SHAPE(1), &b));
  /* accepted: an empty view at the end; a view of a view (of the root's memory) outliving
     both handles; a view past its own base's end but inside the root is refused */
  CHECK_OK(th_ctx, hj_buffer_view(base, 64, HJ_F32, HJ_SHAPE(0), &b));
  hj_buffer_destroy(b);
  hj_buffer_t *v1, *v2;
  CHECK_OK(th_ctx, hj_buffer_view(base, 16, HJ_F32, HJ_SHAPE(2, 4), &v1));   /* elements 4..11 */
  REFUSED(b, HJ_ERR_INVALID_ARG, true, hj_buffer_view(v1, 32, HJ_F32, HJ_SHAPE(1), &b));
  CHECK_OK(th_ctx, hj_buffer_view(v1, 4, HJ_S32, HJ_SHAPE(2), &v2));          /* elements 5, 6 as bits */
  hj_buffer_destroy(base);
  hj_buffer_destroy(v1);
  float got[2];
  CHECK_OK(th_ctx, hj_buffer_copy_to_host(v2, got, sizeof got));
  assert_true(got[0] == 5.0f && got[1] == 6.0f);
  assert_false(hj_buffer_is_read_only(v2));
  hj_buffer_destroy(v2);
  /* a view of a read-only buffer is read-only: never an output */
  CHECK_OK(th_ctx, hj_buffer_wrap(th_ctx, HJ_F32, HJ_SHAPE(16), host, sizeof host, HJ_BUFFER_READ_ONLY, NULL, NULL, &base));
  CHECK_OK(th_ctx, hj_buffer_view(base, 32, HJ_F32, HJ_SHAPE(4), &v1));
  hj_buffer_destroy(base);
  assert_true(hj_buffer_is_read_only(v1));
  hj_graph_t *g;
  hj_exec_t *e = th_neg(4, false, &g);
  hj_buffer_t *out[1] = { v1 };
  hj_ctx_clear_error(th_ctx);
  assert_int_equal(hj_exec_run(e, &v1, 1, out, 1), HJ_ERR_INVALID_ARG);
  assert_true(host[8] == 8.0f);
  hj_buffer_destroy(v1);
  hj_exec_destroy(e);
  hj_graph_destroy(g);
}

/* ---- donation ------------------------------------------------------------------------------ */

static void test_alias_misuse(void **state) {
  hj_graph_t *g, *g2, *sub;
  CHECK_OK(th_ctx, hj_graph_create(th_ctx, "alias", &g));
  CHECK_OK(th_ctx, hj_graph_create(th_ctx, "other", &g2));
  CHECK_OK(th_ctx, hj_graph_create_sub(g, "sub", &sub));
  hj_tensor_t x = hj_param(g, HJ_F32, HJ_SHAPE(4), "x"), s = hj_param(g, HJ_S32, HJ_SHAPE(4), "s");
  hj_tensor_t w = hj_param(g, HJ_F32, HJ_SHAPE(5), "w"), q = hj_param(g, HJ_F32, HJ_SHAPE(2, 2), "q");
  hj_tensor_t t = hj_param_tuple(g, (hj_dtype_t[]){ HJ_F32 }, (hj_shape_t[]){ HJ_SHAPE(4) }, 1, "t");
  hj_tensor_t y = hj_param(g2, HJ_F32, HJ_SHAPE(4), "y"), p = hj_param(sub, HJ_F32, HJ_SHAPE(4), "p");
  assert_int_equal(hj_graph_alias(g, 0, x), HJ_ERR_INVALID_ARG);   /* no outputs yet */
  CHECK_OK(th_ctx, hj_graph_output(g, hj_neg(x)));                  /* output 0: f32[4] */
  struct { const char *what; hj_graph_t *g; int out; hj_tensor_t param; hj_status want; } cases[] = {
    { "a sub-graph", sub, 0, p, HJ_ERR_INVALID_ARG },
    { "output -1", g, -1, x, HJ_ERR_INVALID_ARG },
    { "output 1 of 1", g, 1, x, HJ_ERR_INVALID_ARG },
    { "output INT_MAX", g, INT_MAX, x, HJ_ERR_INVALID_ARG },
    { "output INT_MIN", g, INT_MIN, x, HJ_ERR_INVALID_ARG },
    { "not a parameter", g, 0, hj_neg(x), HJ_ERR_INVALID_ARG },
    { "HJ_NONE", g, 0, HJ_NONE, HJ_ERR_INVALID_ARG },
    { "poisoned", g, 0, (hj_tensor_t){ g, -1 }, HJ_ERR_INVALID_ARG },
    { "another graph's parameter", g, 0, y, HJ_ERR_INVALID_ARG },
    { "a sub-graph's parameter", g, 0, p, HJ_ERR_INVALID_ARG },
    { "a tuple parameter", g, 0, t, HJ_ERR_INVALID_ARG },
    { "another byte size", g, 0, w, HJ_ERR_SHAPE },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    hj_ctx_clear_error(th_ctx);
    hj_status st = hj_graph_alias(cases[i].g, cases[i].out, cases[i].param);
    if (st != cases[i].want) fail_msg("hj_graph_alias, %s: %s", cases[i].what, hj_status_name(st));
    if (!hj_ctx_error(th_ctx)[0]) fail_msg("hj_graph_alias, %s: no message", cases[i].what);
  }
  assert_int_equal(hj_graph_alias(NULL, 0, x), HJ_ERR_INVALID_ARG);
  /* a bad handle also poisons its graph (any op given one does): on a graph of its own */
  hj_graph_t *g3;
  CHECK_OK(th_ctx, hj_graph_create(th_ctx, "bad", &g3));
  CHECK_OK(th_ctx, hj_graph_output(g3, hj_param(g3, HJ_F32, HJ_SHAPE(4), "x")));
  assert_int_equal(hj_graph_alias(g3, 0, (hj_tensor_t){ g3, 99999 }), HJ_ERR_INVALID_ARG);
  assert_int_not_equal(hj_graph_status(g3), HJ_OK);
  hj_graph_destroy(g3);
  CHECK_OK(th_ctx, hj_graph_alias(g, 0, x));
  assert_int_equal(hj_graph_alias(g, 0, x), HJ_ERR_INVALID_ARG);    /* the same pair again */
  assert_int_equal(hj_graph_alias(g, 0, q), HJ_ERR_INVALID_ARG);    /* an output aliases one parameter */
  CHECK_OK(th_ctx, hj_graph_output(g, hj_neg(x)));                  /* output 1 */
  assert_int_equal(hj_graph_alias(g, 1, x), HJ_ERR_INVALID_ARG);    /* two outputs, one parameter */
  /* the same byte size, another dtype / another shape: accepted (XLA's rule) */
  CHECK_OK(th_ctx, hj_graph_alias(g, 1, s));
  /* hj_graph_output_aliased: a refusal leaves no output behind */
  assert_int_equal(hj_graph_output_aliased(NULL, x, x), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_graph_output_aliased(g, hj_tuple(g, &x, 1), q), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_graph_output_aliased(g, hj_neg(x), hj_neg(x)), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_graph_output_aliased(g, hj_neg(x), x), HJ_ERR_INVALID_ARG);   /* x is taken */
  assert_int_equal(hj_graph_output_aliased(g, HJ_NONE, q), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_graph_output_aliased(g, y, q), HJ_ERR_INVALID_ARG);
  CHECK_OK(th_ctx, hj_graph_output_aliased(g, hj_add(x, x), q));    /* output 2: f32[4] into f32[2,2] */
  hj_module_t *m;
  CHECK_OK(th_ctx, hj_graph_to_module(g, &m));
  assert_int_equal(hj_module_num_outputs(m), 3);
  int want[] = { 0, 1, 3 };
  for (int k = 0; k < 3; k++) assert_int_equal(hj_module_output_alias(m, k), want[k]);
  assert_int_equal(hj_module_output_alias(m, 3), -1);
  assert_int_equal(hj_module_output_alias(m, -1), -1);
  assert_int_equal(hj_module_output_alias(m, INT_MIN), -1);
  assert_int_equal(hj_module_output_alias(NULL, 0), -1);
  hj_exec_t *e;
  CHECK_OK(th_ctx, hj_compile(g, &e));
  for (int k = 0; k < 3; k++) assert_int_equal(hj_exec_output_alias(e, k), want[k]);
  assert_int_equal(hj_exec_output_alias(e, 3), -1);
  assert_int_equal(hj_exec_output_alias(e, INT_MIN), -1);
  assert_int_equal(hj_exec_output_alias(NULL, 0), -1);
  /* a run: every output has the output's dtype and shape, whichever parameter it aliases */
  float xv[4] = { 1, 2, 3, 4 }, wv[5] = { 0 }, qv[4] = { 0 };
  int32_t sv[4] = { 0 };
  hj_buffer_t *in[5], *out[3] = { NULL, NULL, NULL };
  CHECK_OK(th_ctx, hj_buffer_from_host(th_ctx, HJ_F32, HJ_SHAPE(4), xv, &in[0]));
  CHECK_OK(th_ctx, hj_buffer_from_host(th_ctx, HJ_S32, HJ_SHAPE(4), sv, &in[1]));
  CHECK_OK(th_ctx, hj_buffer_from_host(th_ctx, HJ_F32, HJ_SHAPE(5), wv, &in[2]));
  CHECK_OK(th_ctx, hj_buffer_from_host(th_ctx, HJ_F32, HJ_SHAPE(2, 2), qv, &in[3]));
  CHECK_OK(th_ctx, hj_buffer_from_host(th_ctx, HJ_F32, HJ_SHAPE(4), xv, &in[4]));   /* t{0} */
  CHECK_OK(th_ctx, hj_exec_run(e, in, 5, out, 3));
  for (int k = 0; k < 3; k++) {
    if (hj_buffer_dtype(out[k]) != HJ_F32 || hj_buffer_shape(out[k]).rank != 1 || hj_buffer_shape(out[k]).dims[0] != 4)
      fail_msg("output %d comes back as %s of rank %d", k, hj_dtype_name(hj_buffer_dtype(out[k])),
               hj_buffer_shape(out[k]).rank);
    const float *o = hj_buffer_host_ptr(out[k]);
    for (int i = 0; i < 4; i++)
      if (o[i] != (k == 2 ? 2 * xv[i] : -xv[i])) fail_msg("output %d [%d] = %g", k, i, o[i]);
  }
  for (int k = 0; k < 3; k++) hj_buffer_destroy(out[k]);
  /* a read-only donated input passed as its output too is refused, and nothing is written */
  hj_buffer_t *ro;
  CHECK_OK(th_ctx, hj_buffer_wrap(th_ctx, HJ_F32, HJ_SHAPE(4), xv, sizeof xv, HJ_BUFFER_READ_ONLY, NULL, NULL, &ro));
  hj_buffer_t *in2[5] = { ro, in[1], in[2], in[3], in[4] }, *out2[3] = { ro, NULL, NULL };
  hj_ctx_clear_error(th_ctx);
  assert_int_equal(hj_exec_run(e, in2, 5, out2, 3), HJ_ERR_INVALID_ARG);
  assert_true(out2[1] == NULL && out2[2] == NULL && xv[0] == 1.0f);
  hj_buffer_destroy(ro);
  for (int i = 0; i < 5; i++) hj_buffer_destroy(in[i]);
  hj_exec_destroy(e);
  hj_module_destroy(m);
  hj_graph_destroy(g2);
  hj_graph_destroy(g);
}

/* ---- names and bound inputs ------------------------------------------------------------------ */

static void test_names_bind_misuse(void **state) {
  hj_graph_t *g, *g2;
  CHECK_OK(th_ctx, hj_graph_create(th_ctx, "io", &g));
  CHECK_OK(th_ctx, hj_graph_create(th_ctx, "other", &g2));
  hj_tensor_t x0 = hj_param(g, HJ_F32, HJ_SHAPE(4), "x"), x1 = hj_param(g, HJ_F32, HJ_SHAPE(4), "x");
  hj_tensor_t u = hj_param(g, HJ_F32, HJ_SHAPE(4), NULL), c = hj_param(g, HJ_F32, HJ_SHAPE(4), "c");
  assert_int_equal(hj_graph_output_named(NULL, x0, "a"), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_graph_output_named(g, HJ_NONE, "a"), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_graph_output_named(g, hj_param(g2, HJ_F32, HJ_SHAPE(4), "y"), "a"), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_graph_output_named(g2, (hj_tensor_t){ g2, 4242 }, "a"), HJ_ERR_INVALID_ARG);
  hj_ctx_clear_error(th_ctx);
  CHECK_OK(th_ctx, hj_graph_output_named(g, hj_add(x0, x1), "y"));   /* out 0 */
  CHECK_OK(th_ctx, hj_graph_output_named(g, hj_mul(x0, u), NULL));   /* out 1: "out1" */
  CHECK_OK(th_ctx, hj_graph_output_named(g, hj_sub(x0, u), "y"));    /* out 2: "y" again */
  CHECK_OK(th_ctx, hj_graph_output_aliased(g, hj_add(c, u), c));      /* out 3: donated c */
  hj_exec_t *e;
  CHECK_OK(th_ctx, hj_compile(g, &e));
  char longname[5000];
  memset(longname, 'n', sizeof longname - 1);
  longname[sizeof longname - 1] = 0;
  const char *missing[] = { "nope", "", longname, "x{0}", "in2 " };
  for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++) {
    hj_ctx_clear_error(th_ctx);
    assert_int_equal(hj_exec_find_input(e, missing[i]), -1);
    ta_has(hj_ctx_error(th_ctx), "no input named");
    hj_ctx_clear_error(th_ctx);
    assert_int_equal(hj_exec_find_output(e, missing[i]), -1);
    ta_has(hj_ctx_error(th_ctx), "no output named");
  }
  hj_ctx_clear_error(th_ctx);
  assert_int_equal(hj_exec_find_input(e, "x"), -1);   /* two inputs are named x */
  ta_has(hj_ctx_error(th_ctx), "2 inputs of 'io' are named 'x'");
  hj_ctx_clear_error(th_ctx);
  assert_int_equal(hj_exec_find_output(e, "y"), -1);
  ta_has(hj_ctx_error(th_ctx), "2 outputs of 'io' are named 'y'");
  hj_ctx_clear_error(th_ctx);
  assert_int_equal(hj_exec_find_input(e, NULL), -1);
  assert_true(hj_ctx_error(th_ctx)[0] != 0);
  assert_int_equal(hj_exec_find_output(e, NULL), -1);
  assert_int_equal(hj_exec_find_input(NULL, "x"), -1);
  assert_int_equal(hj_exec_find_output(NULL, "y"), -1);
  assert_int_equal(hj_exec_find_input(e, "in2"), 2);
  assert_int_equal(hj_exec_find_input(e, "c"), 3);
  assert_int_equal(hj_exec_find_output(e, "out1"), 1);
  assert_null(hj_exec_input_name(e, -1));
  assert_null(hj_exec_input_name(e, 4));
  assert_null(hj_exec_output_name(e, INT_MIN));
  assert_null(hj_exec_input_name(NULL, 0));
  /* bind: bad executables, indices, shapes and dtypes change nothing */
  float one[4] = { 1, 1, 1, 1 }, two[4] = { 2, 2, 2, 2 };
  hj_buffer_t *f4, *f5, *f22, *s4, *f0, *cb;
  CHECK_OK(th_ctx, hj_buffer_from_host(th_ctx, HJ_F32, HJ_SHAPE(4), one, &f4));
  CHECK_OK(th_ctx, hj_buffer_create(th_ctx, HJ_F32, HJ_SHAPE(5), &f5));
  CHECK_OK(th_ctx, hj_buffer_create(th_ctx, HJ_F32, HJ_SHAPE(2, 2), &f22));
  CHECK_OK(th_ctx, hj_buffer_create(th_ctx, HJ_S32, HJ_SHAPE(4), &s4));
  CHECK_OK(th_ctx, hj_buffer_create(th_ctx, HJ_F32, HJ_SCALAR, &f0));
  CHECK_OK(th_ctx, hj_buffer_from_host(th_ctx, HJ_F32, HJ_SHAPE(4), two, &cb));
  assert_int_equal(hj_exec_bind(NULL, 0, f4), HJ_ERR_INVALID_ARG);
  int bad_i[] = { -1, 4, INT_MAX, INT_MIN };
  for (int k = 0; k < 4; k++) {
    hj_ctx_clear_error(th_ctx);
    assert_int_equal(hj_exec_bind(e, bad_i[k], f4), HJ_ERR_INVALID_ARG);
    ta_has(hj_ctx_error(th_ctx), "out of range");
  }
  hj_buffer_t *wrong[] = { f5, f22, s4, f0 };
  for (int k = 0; k < 4; k++) {
    hj_ctx_clear_error(th_ctx);
    assert_int_equal(hj_exec_bind(e, 2, wrong[k]), HJ_ERR_SHAPE);
    assert_true(hj_ctx_error(th_ctx)[0] != 0);
    assert_null(hj_exec_bound(e, 2));
    assert_int_equal(hj_exec_num_unbound_inputs(e), 4);
  }
  assert_int_equal(hj_exec_bind_name(NULL, "c", f4), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_exec_bind_name(e, NULL, f4), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_exec_bind_name(e, "nope", f4), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_exec_bind_name(e, "x", f4), HJ_ERR_INVALID_ARG);   /* ambiguous */
  assert_int_equal(hj_exec_bind_name(e, "in2", s4), HJ_ERR_SHAPE);
  assert_int_equal(hj_exec_num_unbound_inputs(e), 4);
  assert_int_equal(hj_exec_num_unbound_inputs(NULL), 0);
  assert_null(hj_exec_bound(NULL, 0));
  assert_null(hj_exec_bound(e, -1));
  assert_null(hj_exec_bound(e, 4));
  /* unbinding what is not bound is a no-op; binding twice drops the first reference */
  CHECK_OK(th_ctx, hj_exec_bind(e, 3, NULL));
  assert_int_equal(hj_exec_num_unbound_inputs(e), 4);
  CHECK_OK(th_ctx, hj_exec_bind_name(e, "c", f4));
  CHECK_OK(th_ctx, hj_exec_bind_name(e, "c", cb));   /* the donated input, bound: updated in place */
  hj_buffer_destroy(cb);                             /* the binding keeps it alive */
  CHECK_OK(th_ctx, hj_exec_bind(e, 2, f4));
  assert_int_equal(hj_exec_num_unbound_inputs(e), 2);
  hj_buffer_t *in[4] = { f4, f4, f4, f4 }, *out[4] = { NULL, NULL, NULL, NULL };
  hj_ctx_clear_error(th_ctx);
  assert_int_equal(hj_exec_run(e, in, 4, out, 4), HJ_ERR_INVALID_ARG);   /* bound ones given too */
  ta_has(hj_ctx_error(th_ctx), "bound");
  assert_int_equal(hj_exec_run(e, in, 3, out, 4), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_exec_run(e, in, 1, out, 4), HJ_ERR_INVALID_ARG);
  for (int k = 0; k < 4; k++) assert_null(out[k]);
  for (int r = 0; r < 2; r++) {   /* c += u, twice, in the bound buffer */
    CHECK_OK(th_ctx, hj_exec_run(e, in, 2, out, 4));
    assert_ptr_equal(out[3], hj_exec_bound(e, 3));
    assert_true(((float *)hj_buffer_host_ptr(out[3]))[0] == 3.0f + r && ((float *)hj_buffer_host_ptr(out[0]))[0] == 2.0f);
    for (int k = 0; k < 4; k++) {
      hj_buffer_destroy(out[k]);
      out[k] = NULL;
    }
  }
  /* a read-only buffer bound to the donated input: each run makes a new output, the
     bound memory stays as it was; passing it as the output is refused */
  hj_buffer_t *ro;
  CHECK_OK(th_ctx, hj_buffer_wrap(th_ctx, HJ_F32, HJ_SHAPE(4), two, sizeof two, HJ_BUFFER_READ_ONLY, NULL, NULL, &ro));
  CHECK_OK(th_ctx, hj_exec_bind(e, 3, ro));
  CHECK_OK(th_ctx, hj_exec_run(e, in, 2, out, 4));
  assert_ptr_not_equal(out[3], ro);
  assert_true(((float *)hj_buffer_host_ptr(out[3]))[0] == 3.0f && two[0] == 2.0f);
  for (int k = 0; k < 4; k++) {
    hj_buffer_destroy(out[k]);
    out[k] = NULL;
  }
  out[3] = ro;
  hj_ctx_clear_error(th_ctx);
  assert_int_equal(hj_exec_run(e, in, 2, out, 4), HJ_ERR_INVALID_ARG);
  assert_true(out[0] == NULL && two[0] == 2.0f);
  hj_buffer_destroy(ro);
  /* unbound again: the full convention */
  CHECK_OK(th_ctx, hj_exec_bind(e, 3, NULL));
  CHECK_OK(th_ctx, hj_exec_bind(e, 2, NULL));
  assert_int_equal(hj_exec_num_unbound_inputs(e), 4);
  out[3] = NULL;
  assert_int_equal(hj_exec_run(e, in, 2, out, 4), HJ_ERR_INVALID_ARG);
  hj_buffer_t *f4b;
  CHECK_OK(th_ctx, hj_buffer_from_host(th_ctx, HJ_F32, HJ_SHAPE(4), one, &f4b));
  hj_buffer_t *in4[4] = { f4, f4, f4, f4b };
  CHECK_OK(th_ctx, hj_exec_run(e, in4, 4, out, 4));
  for (int k = 0; k < 4; k++) hj_buffer_destroy(out[k]);
  hj_buffer_destroy(f4b);
  hj_buffer_t *all[] = { f4, f5, f22, s4, f0 };
  for (int k = 0; k < 5; k++) hj_buffer_destroy(all[k]);
  hj_exec_destroy(e);
  hj_graph_destroy(g2);
  hj_graph_destroy(g);
}

/* ---- profiles and timed optimisation ------------------------------------------------------- */

static void test_profile_misuse(void **state) {
  hj_graph_t *g;
  hj_exec_t *e = th_neg(4, false, &g);   /* the evaluator: one "module" entry */
  hj_profile_entry_t *v = (hj_profile_entry_t *)1;
  int n = 7;
  int64_t runs = 7;
  assert_int_equal(hj_exec_set_profiling(NULL, true), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_exec_profile(NULL, &v, &n, &runs, NULL), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_exec_profile(e, NULL, &n, NULL, NULL), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_exec_profile(e, &v, NULL, NULL, NULL), HJ_ERR_INVALID_ARG);
  CHECK_OK(th_ctx, hj_exec_profile(e, &v, &n, NULL, NULL));   /* before any run */
  assert_int_equal(n, 1);
  assert_int_equal(v[0].calls, 0);
  free(v);
  char *text = (char *)1;
  assert_int_equal(hj_exec_profile_text(NULL, &text), HJ_ERR_INVALID_ARG);
  assert_null(text);
  assert_int_equal(hj_exec_profile_text(e, NULL), HJ_ERR_INVALID_ARG);
  hj_exec_profile_reset(NULL);
  CHECK_OK(th_ctx, hj_exec_set_profiling(e, true));
  hj_buffer_t *x, *out[1] = { NULL };
  CHECK_OK(th_ctx, hj_buffer_create(th_ctx, HJ_F32, HJ_SHAPE(4), &x));
  for (int r = 0; r < 3; r++) {
    CHECK_OK(th_ctx, hj_exec_run(e, &x, 1, out, 1));
    hj_buffer_destroy(out[0]);
    out[0] = NULL;
  }
  assert_int_not_equal(hj_exec_run(e, &x, 1, NULL, 1), HJ_OK);   /* a failed run is not counted */
  double ms = -1;
  CHECK_OK(th_ctx, hj_exec_profile(e, &v, &n, &runs, &ms));
  assert_int_equal(runs, 3);
  assert_true(n == 1 && v[0].calls == 3 && ms >= 0);
  assert_string_equal(v[0].kind, "module");
  free(v);
  CHECK_OK(th_ctx, hj_exec_profile_text(e, &text));
  ta_has(text, "3 runs");
  free(text);
  hj_exec_profile_reset(e);
  CHECK_OK(th_ctx, hj_exec_profile(e, &v, &n, &runs, NULL));
  assert_int_equal(runs, 0);
  free(v);
  CHECK_OK(th_ctx, hj_exec_set_profiling(e, false));
  hj_buffer_destroy(x);
  hj_exec_destroy(e);
  hj_graph_destroy(g);
}

static void test_optimize_timed_misuse(void **state) {
  int n = 77;
  hj_pass_time_t times[3];
  assert_int_equal(hj_module_optimize_timed(NULL, times, 3, &n), HJ_ERR_INVALID_ARG);
  assert_int_equal(n, 0);
  static const char text[] = "HloModule t\nENTRY main {\n  p = f32[4] parameter(0)\n  n = f32[4] negate(p)\n"
                             "  ROOT r = f32[4] add(n, p)\n}\n";
  hj_module_t *m;
  CHECK_OK(th_ctx, hj_module_parse(th_ctx, text, strlen(text), "t", &m));
  hj_ctx_clear_error(th_ctx);
  assert_int_equal(hj_module_optimize_timed(m, NULL, 3, &n), HJ_ERR_INVALID_ARG);
  assert_true(hj_ctx_error(th_ctx)[0] != 0);
  assert_int_equal(hj_module_optimize_timed(m, times, -1, &n), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_module_optimize_timed(m, times, INT_MIN, NULL), HJ_ERR_INVALID_ARG);
  CHECK_OK(th_ctx, hj_module_optimize_timed(m, NULL, 0, NULL));
  CHECK_OK(th_ctx, hj_module_optimize_timed(m, NULL, 0, &n));
  assert_true(n > 1);
  times[1].name = "untouched";
  CHECK_OK(th_ctx, hj_module_optimize_timed(m, times, 1, &n));   /* the first pass only */
  assert_true(n > 1 && times[0].name && times[0].runs >= 1 && times[0].ms >= 0);
  assert_string_equal(times[1].name, "untouched");
  CHECK_OK(th_ctx, hj_module_verify(m));
  hj_module_destroy(m);
}

/* ---- hj_module_to_ptx: PTX without a device ----------------------------------------------- */
static void test_module_to_ptx_misuse(void **state) {
  static const char text[] = "HloModule t\nENTRY main {\n  p = f32[64] parameter(0)\n"
                             "  ROOT n = f32[64] negate(p)\n}\n";
  hj_module_t *m;
  char *ptx = (char *)1;
  CHECK_OK(th_ctx, hj_module_parse(th_ctx, text, strlen(text), "t", &m));
  assert_int_equal(hj_module_to_ptx(th_ctx, m, "sm_80", NULL), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_module_to_ptx(NULL, m, "sm_80", &ptx), HJ_ERR_INVALID_ARG);
  assert_null(ptx);
  ptx = (char *)1;
  hj_ctx_clear_error(th_ctx);
  assert_int_equal(hj_module_to_ptx(th_ctx, NULL, "sm_80", &ptx), HJ_ERR_INVALID_ARG);
  assert_null(ptx);
  assert_true(hj_ctx_error(th_ctx)[0] != 0);
#ifdef HLOJIT_CUDA_BACKEND
  static const char *bad[] = { "", "sm_", "sm_75", "sm_80x", "SM_80", "sm_90" };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ptx = (char *)1;
    hj_ctx_clear_error(th_ctx);
    hj_status st = hj_module_to_ptx(th_ctx, m, bad[i], &ptx);
    if (st != HJ_ERR_INVALID_ARG) fail_msg("arch '%s': %s, want INVALID_ARG", bad[i], hj_status_name(st));
    assert_null(ptx);
    ta_has(hj_ctx_error(th_ctx), "unknown CUDA arch");
  }
  /* accepted: the baseline by NULL and by name, and sm_90a; the kernel is in the text */
  static const char *good[] = { NULL, "sm_80", "90a" };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    CHECK_OK(th_ctx, hj_module_to_ptx(th_ctx, m, good[i], &ptx));
    assert_non_null(ptx);
    ta_has(ptx, ".entry");
    ta_has(ptx, good[i] && strstr(good[i], "90a") ? ".target sm_90a" : ".target sm_80");
    free(ptx);
  }
  /* the module is left as it was: it still runs on the evaluator */
  CHECK_OK(th_ctx, hj_module_verify(m));
#else
  assert_int_equal(hj_module_to_ptx(th_ctx, m, "sm_80", &ptx), HJ_ERR_UNSUPPORTED);
  assert_null(ptx);
#endif
  hj_module_destroy(m);
}

/* ---- the tracing JIT ------------------------------------------------------------------------ */

/* y = cumsum(x, last axis) * 2 and its size: over f32[<=8] (or whatever the key gives). */
static hj_status tj_ok(hj_graph_t *g, const hj_tensor_t *p, int n, void *user) {
  hj_tensor_t y = hj_mul(hj_cumulative(p[0], HJ_RED_SUM, -1, false), hj_scalar(g, HJ_F32, 2));
  hj_status st = hj_graph_output(g, y);
  return st ? st : hj_graph_output(g, hj_dim_size(p[0], 0));
}
static hj_status tj_fail_silent(hj_graph_t *g, const hj_tensor_t *p, int n, void *user) { return HJ_ERR_UNSUPPORTED; }
static hj_status tj_poison(hj_graph_t *g, const hj_tensor_t *p, int n, void *user) {
  hj_graph_output(g, hj_reshape(p[0], HJ_SHAPE(3, 3)));   /* recorded in the graph */
  return HJ_OK;
}
static hj_status tj_nothing(hj_graph_t *g, const hj_tensor_t *p, int n, void *user) { return HJ_OK; }
static hj_status tj_const(hj_graph_t *g, const hj_tensor_t *p, int n, void *user) {
  return hj_graph_output(g, hj_full(g, HJ_F32, HJ_SHAPE(2), 5));
}

static void test_jit_create_misuse(void **state) {
  hj_jit_options_init(NULL);
  hj_jit_param_t p1[1] = { { "x", HJ_SHAPE(HJ_DYN(8)) } };
  hj_jit_options_t o;
  hj_jit_t *j = (hj_jit_t *)1;
  hj_jit_options_init(&o);
  o.params = p1, o.nparams = 1;
  assert_int_equal(hj_jit_create(th_ctx, tj_ok, NULL, &o, NULL), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_jit_create(NULL, tj_ok, NULL, &o, &j), HJ_ERR_INVALID_ARG);
  assert_null(j);
  hj_ctx_clear_error(th_ctx);
  j = (hj_jit_t *)1;
  assert_int_equal(hj_jit_create(th_ctx, NULL, NULL, &o, &j), HJ_ERR_INVALID_ARG);
  assert_null(j);
  assert_int_equal(hj_jit_create(th_ctx, tj_ok, NULL, NULL, &j), HJ_ERR_INVALID_ARG);
  hj_jit_param_t r9 = { "x", { .rank = 9 } }, rneg = { "x", { .rank = -1 } }, rmin = { "x", { .rank = INT_MIN } };
  hj_jit_param_t dmin = { "x", HJ_SHAPE(4, INT64_MIN) }, dmin2 = { "x", HJ_SHAPE(INT64_MIN) };
  const int64_t desc[] = { 4, 2 }, zero[] = { 0, 4 }, same[] = { 2, 2 }, neg[] = { -5 }, huge[] = { 2, INT64_MAX };
  struct { const char *what; const hj_jit_param_t *p; int np; const int64_t *bk; int nb; } bad[] = {
    { "nparams -1", p1, -1, NULL, 0 },
    { "nparams INT_MIN", p1, INT_MIN, NULL, 0 },
    { "params NULL", NULL, 1, NULL, 0 },
    { "rank 9", &r9, 1, NULL, 0 },
    { "rank -1", &rneg, 1, NULL, 0 },
    { "rank INT_MIN", &rmin, 1, NULL, 0 },
    { "a dim of INT64_MIN", &dmin, 1, NULL, 0 },
    { "only a dim of INT64_MIN", &dmin2, 1, NULL, 0 },
    { "buckets descending", p1, 1, desc, 2 },
    { "bucket 0", p1, 1, zero, 2 },
    { "buckets repeated", p1, 1, same, 2 },
    { "bucket -5", p1, 1, neg, 1 },
    { "nbuckets -1", p1, 1, desc, -1 },
    { "buckets NULL", p1, 1, NULL, 3 },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    hj_jit_options_init(&o);
    o.params = bad[i].p, o.nparams = bad[i].np, o.buckets = bad[i].bk, o.nbuckets = bad[i].nb;
    hj_ctx_clear_error(th_ctx);
    j = (hj_jit_t *)1;
    hj_status st = hj_jit_create(th_ctx, tj_ok, NULL, &o, &j);
    if (st != HJ_ERR_INVALID_ARG) fail_msg("hj_jit_create, %s: %s", bad[i].what, hj_status_name(st));
    if (j) fail_msg("hj_jit_create, %s: *out is not NULL", bad[i].what);
    if (!hj_ctx_error(th_ctx)[0]) fail_msg("hj_jit_create, %s: no message", bad[i].what);
  }
  /* accepted: a bucket above every max (capped), a huge one, HJ_DYN(0) (that is a static
     0), no parameters at all, a negative cache size (the default) */
  hj_jit_options_init(&o);
  o.params = p1, o.nparams = 1, o.buckets = huge, o.nbuckets = 2, o.cache_entries = -3, o.name = NULL;
  CHECK_OK(th_ctx, hj_jit_create(th_ctx, tj_ok, NULL, &o, &j));
  hj_jit_destroy(j);
  hj_jit_param_t d0 = { NULL, HJ_SHAPE(HJ_DYN(0)) };
  o.params = &d0, o.buckets = NULL, o.nbuckets = 0;
  CHECK_OK(th_ctx, hj_jit_create(th_ctx, tj_ok, NULL, &o, &j));
  hj_jit_destroy(j);
  hj_jit_options_init(&o);
  CHECK_OK(th_ctx, hj_jit_create(th_ctx, tj_const, NULL, &o, &j));
  hj_buffer_t *out[1] = { NULL };
  CHECK_OK(th_ctx, hj_jit_call(j, NULL, 0, out, 1));
  assert_true(((float *)hj_buffer_host_ptr(out[0]))[1] == 5.0f);
  hj_buffer_destroy(out[0]);
  hj_jit_destroy(j);
  hj_jit_destroy(NULL);
}

static hj_buffer_t *tj_buf(hj_dtype_t t, hj_shape_t s) {
  hj_buffer_t *b;
  CHECK_OK(th_ctx, hj_buffer_create(th_ctx, t, s, &b));
  if (t == HJ_F32)
    for (int64_t i = 0; i < hj_shape_numel(s); i++) ((float *)hj_buffer_host_ptr(b))[i] = (float)(i + 1);
  return b;
}

static hj_jit_t *tj_make(hj_jit_build_fn fn) {
  hj_jit_param_t p[1] = { { "x", HJ_SHAPE(HJ_DYN(8)) } };
  hj_jit_options_t o;
  hj_jit_options_init(&o);
  o.name = "hostile";
  o.params = p, o.nparams = 1;
  hj_jit_t *j;
  CHECK_OK(th_ctx, hj_jit_create(th_ctx, fn, NULL, &o, &j));
  return j;
}

/* |call| fails with |code| (HJ_OK: any error), a message, and no output made. */
#define CALL_REFUSED(code, call, outs, nouts)                                                \
  do {                                                                                       \
    hj_ctx_clear_error(th_ctx);                                                              \
    hj_status st_ = (call);                                                                  \
    if (st_ == HJ_OK || ((code) != HJ_OK && st_ != (code)) || st_ == HJ_ERR_INTERNAL)        \
      fail_msg("%s: %s (%s)", #call, hj_status_name(st_), hj_ctx_error(th_ctx));             \
    if (!hj_ctx_error(th_ctx)[0]) fail_msg("%s: no message", #call);                         \
    for (int k_ = 0; k_ < (nouts); k_++)                                                     \
      if ((outs)[k_]) fail_msg("%s: output %d was left behind", #call, k_);                  \
  } while (0)

static void test_jit_call_misuse(void **state) {
  hj_jit_t *j = tj_make(tj_ok);
  hj_buffer_t *x3 = tj_buf(HJ_F32, HJ_SHAPE(3)), *out[2] = { NULL, NULL };
  assert_int_equal(hj_jit_call(NULL, &x3, 1, out, 2), HJ_ERR_INVALID_ARG);
  CALL_REFUSED(HJ_ERR_INVALID_ARG, hj_jit_call(j, &x3, 0, out, 2), out, 2);
  CALL_REFUSED(HJ_ERR_INVALID_ARG, hj_jit_call(j, &x3, 2, out, 2), out, 2);
  CALL_REFUSED(HJ_ERR_INVALID_ARG, hj_jit_call(j, &x3, -1, out, 2), out, 2);
  CALL_REFUSED(HJ_ERR_INVALID_ARG, hj_jit_call(j, NULL, 1, out, 2), out, 2);
  CALL_REFUSED(HJ_ERR_INVALID_ARG, hj_jit_call(j, &x3, 1, NULL, 2), out, 2);
  CALL_REFUSED(HJ_ERR_INVALID_ARG, hj_jit_call(j, &x3, 1, out, 1), out, 1);
  CALL_REFUSED(HJ_ERR_INVALID_ARG, hj_jit_call(j, &x3, 1, out, 3), out, 2);
  CALL_REFUSED(HJ_ERR_INVALID_ARG, hj_jit_call(j, &x3, 1, out, -1), out, 2);
  hj_buffer_t *nul[1] = { NULL };
  CALL_REFUSED(HJ_ERR_INVALID_ARG, hj_jit_call(j, nul, 1, out, 2), out, 2);
  hj_buffer_t *r2 = tj_buf(HJ_F32, HJ_SHAPE(1, 3)), *r0 = tj_buf(HJ_F32, HJ_SCALAR);
  hj_buffer_t *x9 = tj_buf(HJ_F32, HJ_SHAPE(9)), *x0 = tj_buf(HJ_F32, HJ_SHAPE(0));
  hj_buffer_t *i3 = tj_buf(HJ_S32, HJ_SHAPE(3));
  CALL_REFUSED(HJ_ERR_SHAPE, hj_jit_call(j, &r2, 1, out, 2), out, 2);   /* rank */
  CALL_REFUSED(HJ_ERR_SHAPE, hj_jit_call(j, &r0, 1, out, 2), out, 2);
  CALL_REFUSED(HJ_ERR_SHAPE, hj_jit_call(j, &x9, 1, out, 2), out, 2);   /* above HJ_DYN(8) */
  CALL_REFUSED(HJ_ERR_SHAPE, hj_jit_call(j, &x0, 1, out, 2), out, 2);   /* below 1 */
  CALL_REFUSED(HJ_OK, hj_jit_call(j, &i3, 1, out, 2), out, 2);          /* s32: the trace fails */
  /* outputs of the wrong shape, or read-only, are refused and left as they were */
  hj_buffer_t *o4 = tj_buf(HJ_F32, HJ_SHAPE(4)), *o3i = tj_buf(HJ_S32, HJ_SHAPE(3)), *ro;
  float mem[3] = { 7, 7, 7 };
  CHECK_OK(th_ctx, hj_buffer_wrap(th_ctx, HJ_F32, HJ_SHAPE(3), mem, sizeof mem, HJ_BUFFER_READ_ONLY, NULL, NULL, &ro));
  hj_buffer_t *bad_outs[] = { o4, o3i, ro };
  for (int k = 0; k < 3; k++) {
    hj_buffer_t *o[2] = { bad_outs[k], NULL };
    hj_ctx_clear_error(th_ctx);
    hj_status st = hj_jit_call(j, &x3, 1, o, 2);
    if (st == HJ_OK || st == HJ_ERR_INTERNAL) fail_msg("output %d accepted: %s", k, hj_status_name(st));
    assert_true(hj_ctx_error(th_ctx)[0] != 0);
    assert_ptr_equal(o[0], bad_outs[k]);
    assert_null(o[1]);
  }
  assert_true(mem[0] == 7.0f && mem[2] == 7.0f);
  /* after all that, a call works and gives the values */
  CHECK_OK(th_ctx, hj_jit_call(j, &x3, 1, out, 2));
  const float *y = hj_buffer_host_ptr(out[0]);
  assert_int_equal(hj_buffer_shape(out[0]).dims[0], 3);
  assert_true(y[0] == 2.0f && y[1] == 6.0f && y[2] == 12.0f);
  assert_int_equal(*(const int32_t *)hj_buffer_host_ptr(out[1]), 3);
  hj_buffer_t *keep[2] = { out[0], out[1] };
  CHECK_OK(th_ctx, hj_jit_call(j, &x3, 1, out, 2));   /* into the caller's buffers */
  assert_ptr_equal(out[0], keep[0]);
  hj_jit_stats_t s;
  assert_int_equal(hj_jit_stats(NULL, &s), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_jit_stats(j, NULL), HJ_ERR_INVALID_ARG);
  CHECK_OK(th_ctx, hj_jit_stats(j, &s));
  assert_true(s.calls >= 2 && s.compiles >= 1 && s.last_miss && s.pad_note);
  hj_buffer_t *all[] = { x3, r2, r0, x9, x0, i3, o4, o3i, ro, out[0], out[1] };
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) hj_buffer_destroy(all[k]);
  hj_jit_destroy(j);
  /* build functions that fail: an error with a message, no entry, nothing made */
  hj_jit_build_fn bad[] = { tj_fail_silent, tj_poison, tj_nothing };
  for (int k = 0; k < 3; k++) {
    j = tj_make(bad[k]);
    hj_buffer_t *x = tj_buf(HJ_F32, HJ_SHAPE(5)), *o[2] = { NULL, NULL };
    for (int r = 0; r < 2; r++) CALL_REFUSED(HJ_OK, hj_jit_call(j, &x, 1, o, 1), o, 1);
    CHECK_OK(th_ctx, hj_jit_stats(j, &s));
    assert_int_equal(s.entries, 0);
    hj_buffer_destroy(x);
    hj_jit_destroy(j);
  }
}

int main(int argc, char **argv) {
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  th_ctx = tu_ctx();
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_buffer_wrap_misuse),
    cmocka_unit_test(test_buffer_map_misuse),
    cmocka_unit_test(test_buffer_view_misuse),
    cmocka_unit_test(test_alias_misuse),
    cmocka_unit_test(test_names_bind_misuse),
    cmocka_unit_test(test_profile_misuse),
    cmocka_unit_test(test_optimize_timed_misuse),
    cmocka_unit_test(test_module_to_ptx_misuse),
    cmocka_unit_test(test_jit_create_misuse),
    cmocka_unit_test(test_jit_call_misuse),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  hj_ctx_destroy(th_ctx);
  return rc;
}
