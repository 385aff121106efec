/* test_buffers.c — buffers over memory hlojit did not allocate (hj_buffer_wrap,
   hj_buffer_map_file, hj_buffer_view) and reference counts.

   No copy: a wrapped buffer's data is the caller's pointer; the caller changes its memory
   between two runs and the second run sees the change; a donated, wrapped KV cache is
   updated in the caller's own memory by the in-place kernel (copies == 0). A mapped file
   region is read where it lies (the pointer is inside the mapping: page offset kept) and
   views of one mapped file serve as several weights. Refusals, each with a message:
   misaligned data, offsets and views; regions too small (wrap, map past the end of the
   file, view past the end of its base); a read-only buffer as an output. Lifetimes: the
   release callback runs once, at the last reference, never on a failed wrap; a view keeps
   its base alive after the base's handle is destroyed (ASan checks the memory). */
#include "testutil.h"
#include "api_testutil.h"
#include "cpu_testutil.h"
#include <unistd.h>

static int tb_released;
static void tb_release(void *user, void *data) {
  tb_released++;
  assert_ptr_equal(user, data);
}

/* y = x * 2 + 1 over f32[n]. */
static hj_exec_t *tb_affine(hj_ctx_t *ctx, int n, hj_graph_t **g) {
  CHECK_OK(ctx, hj_graph_create(ctx, "affine", g));
  hj_tensor_t x = hj_param(*g, HJ_F32, HJ_SHAPE(n), "x");
  CHECK_OK(ctx, hj_graph_output(*g, hj_add(hj_mul(x, hj_scalar(*g, HJ_F32, 2)), hj_scalar(*g, HJ_F32, 1))));
  hj_exec_t *e;
  CHECK_OK(ctx, hj_compile(*g, &e));
  return e;
}

static void test_wrap_no_copy(void **state) {
  (void)state;
  hj_ctx_t *ctx = cb_ctx(HJ_BACKEND_CPU, 1, NULL);
  hj_graph_t *g;
  hj_exec_t *e = tb_affine(ctx, 64, &g);
  float *mem = aligned_alloc(64, 64 * sizeof(float)), *res = aligned_alloc(64, 64 * sizeof(float));
  for (int i = 0; i < 64; i++) mem[i] = (float)i;
  hj_buffer_t *x, *y;
  tb_released = 0;
  CHECK_OK(ctx, hj_buffer_wrap(ctx, HJ_F32, HJ_SHAPE(64), mem, 64 * sizeof(float), 0, tb_release, mem, &x));
  CHECK_OK(ctx, hj_buffer_wrap(ctx, HJ_F32, HJ_SHAPE(64), res, 64 * sizeof(float), 0, tb_release, res, &y));
  assert_ptr_equal(hj_buffer_host_ptr(x), mem);
  assert_false(hj_buffer_is_read_only(x));
  hj_buffer_t *out[1] = { y };
  CHECK_OK(ctx, hj_exec_run(e, &x, 1, out, 1));
  assert_ptr_equal(out[0], y);
  for (int i = 0; i < 64; i++) assert_true(res[i] == 2.0f * i + 1);
  for (int i = 0; i < 64; i++) mem[i] = (float)(100 - i);      /* the caller's memory changes */
  CHECK_OK(ctx, hj_exec_run(e, &x, 1, out, 1));
  for (int i = 0; i < 64; i++) assert_true(res[i] == 2.0f * (100 - i) + 1);
  /* references: the callback runs at the last one, once */
  assert_ptr_equal(hj_buffer_retain(x), x);
  hj_buffer_destroy(x);
  assert_int_equal(tb_released, 0);
  hj_buffer_destroy(x);
  hj_buffer_destroy(y);
  assert_int_equal(tb_released, 2);
  free(mem);
  free(res);
  hj_exec_destroy(e);
  hj_graph_destroy(g);
  hj_ctx_destroy(ctx);
}

/* A donated wrapped buffer is updated in the caller's memory by the kernel itself. */
static void test_wrap_donated_in_place(void **state) {
  (void)state;
  hj_ctx_t *ctx = cb_ctx(HJ_BACKEND_CPU, 1, NULL);
  hj_graph_t *g;
  CHECK_OK(ctx, hj_graph_create(ctx, "upd", &g));
  hj_tensor_t c = hj_param(g, HJ_F32, HJ_SHAPE(32, 16), "c"), u = hj_param(g, HJ_F32, HJ_SHAPE(1, 16), "u");
  hj_tensor_t i = hj_param(g, HJ_S32, HJ_SCALAR, "i"), st[2] = { i, hj_scalar(g, HJ_S32, 0) };
  CHECK_OK(ctx, hj_graph_output_aliased(g, hj_dynamic_update_slice(c, u, st), c));
  hj_exec_t *e;
  CHECK_OK(ctx, hj_compile(g, &e));
  hj_exec_stats_t s;
  CHECK_OK(ctx, hj_exec_stats(e, &s));
  assert_int_equal(s.kernels_dus, 1);
  assert_int_equal(s.copies, 0);
  assert_int_equal(s.kernels_loop, 0);
  static float cache[32 * 16] __attribute__((aligned(64)));
  float row[16];
  for (int k = 0; k < 32 * 16; k++) cache[k] = -1;
  for (int k = 0; k < 16; k++) row[k] = (float)k;
  int at = 5;
  hj_buffer_t *bc, *bu, *bi;
  CHECK_OK(ctx, hj_buffer_wrap(ctx, HJ_F32, HJ_SHAPE(32, 16), cache, sizeof cache, 0, NULL, NULL, &bc));
  CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_F32, HJ_SHAPE(1, 16), row, &bu));
  CHECK_OK(ctx, hj_buffer_from_host(ctx, HJ_S32, HJ_SCALAR, &at, &bi));
  hj_buffer_t *in[3] = { bc, bu, bi }, *out[1] = { bc };
  CHECK_OK(ctx, hj_exec_run(e, in, 3, out, 1));
  for (int r = 0; r < 32; r++)
    for (int k = 0; k < 16; k++) assert_true(cache[r * 16 + k] == (r == at ? (float)k : -1.0f));
  hj_buffer_destroy(bc);
  hj_buffer_destroy(bu);
  hj_buffer_destroy(bi);
  hj_exec_destroy(e);
  hj_graph_destroy(g);
  hj_ctx_destroy(ctx);
}

static void test_wrap_refusals(void **state) {
  (void)state;
  hj_ctx_t *ctx = tu_ctx();
  static double mem[16] __attribute__((aligned(64)));
  hj_buffer_t *b = (hj_buffer_t *)1;
  tb_released = 0;
  assert_int_equal(hj_buffer_wrap(ctx, HJ_F32, HJ_SHAPE(4), (char *)mem + 2, 64, 0, tb_release, mem, &b),
                   HJ_ERR_INVALID_ARG);
  assert_null(b);
  ta_has(hj_ctx_error(ctx), "not aligned to the 4-byte elements of f32[4]");
  assert_int_equal(hj_buffer_wrap(ctx, HJ_F64, HJ_SHAPE(4), (char *)mem + 4, 64, 0, NULL, NULL, &b),
                   HJ_ERR_INVALID_ARG);
  ta_has(hj_ctx_error(ctx), "8-byte elements of f64[4]");
  assert_int_equal(hj_buffer_wrap(ctx, HJ_F32, HJ_SHAPE(4, 4), mem, 60, 0, tb_release, mem, &b),
                   HJ_ERR_INVALID_ARG);
  ta_has(hj_ctx_error(ctx), "the memory has 60 bytes, f32[4,4] needs 64");
  assert_int_equal(hj_buffer_wrap(ctx, HJ_F32, HJ_SHAPE(4), NULL, 64, 0, NULL, NULL, &b), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_buffer_wrap(ctx, HJ_F32, HJ_SHAPE(4), mem, 64, 8, NULL, NULL, &b), HJ_ERR_INVALID_ARG);
  ta_has(hj_ctx_error(ctx), "unknown flags 0x8");
  assert_int_equal(tb_released, 0);
  /* a read-only buffer as an output */
  hj_graph_t *g;
  CHECK_OK(ctx, hj_graph_create(ctx, "neg", &g));
  CHECK_OK(ctx, hj_graph_output(g, hj_neg(hj_param(g, HJ_F32, HJ_SHAPE(4), "x"))));
  hj_exec_t *e;
  CHECK_OK(ctx, hj_compile(g, &e));
  hj_buffer_t *ro, *x;
  CHECK_OK(ctx, hj_buffer_wrap(ctx, HJ_F32, HJ_SHAPE(4), mem, 64, HJ_BUFFER_READ_ONLY, NULL, NULL, &ro));
  CHECK_OK(ctx, hj_buffer_create(ctx, HJ_F32, HJ_SHAPE(4), &x));
  assert_true(hj_buffer_is_read_only(ro));
  hj_buffer_t *out[1] = { ro };
  assert_int_equal(hj_exec_run(e, &x, 1, out, 1), HJ_ERR_INVALID_ARG);
  ta_has(hj_ctx_error(ctx), "output 0 ('out0') is a read-only buffer");
  out[0] = NULL;
  CHECK_OK(ctx, hj_exec_run(e, &ro, 1, out, 1));     /* as an input it is fine */
  hj_buffer_destroy(out[0]);
  hj_buffer_destroy(ro);
  hj_buffer_destroy(x);
  hj_exec_destroy(e);
  hj_graph_destroy(g);
  hj_ctx_destroy(ctx);
}

/* A file: a 12-byte header, then f32 0, 1, 2, ... (n of them). */
static const char *tb_file(int n, char *path, size_t np) {
  snprintf(path, np, "/tmp/hj_map_XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  char head[12] = "HJTESTHEADER";
  assert_int_equal(write(fd, head, sizeof head), (ssize_t)sizeof head);
  for (int i = 0; i < n; i++) {
    float v = (float)i;
    assert_int_equal(write(fd, &v, 4), 4);
  }
  close(fd);
  return path;
}

static void test_map_file(void **state) {
  (void)state;
  hj_ctx_t *ctx = cb_ctx(HJ_BACKEND_CPU, 1, NULL);
  char path[64];
  tb_file(5000, path, sizeof path);
  hj_buffer_t *w;
  CHECK_OK(ctx, hj_buffer_map_file(ctx, path, 12, HJ_F32, HJ_SHAPE(64), &w));
  assert_true(hj_buffer_is_read_only(w));
  assert_int_equal((uintptr_t)hj_buffer_host_ptr(w) % 4096, 12);     /* where the file has it */
  hj_graph_t *g;
  hj_exec_t *e = tb_affine(ctx, 64, &g);
  hj_buffer_t *out[1] = { NULL };
  CHECK_OK(ctx, hj_exec_run(e, &w, 1, out, 1));
  const float *y = hj_buffer_host_ptr(out[0]);
  for (int i = 0; i < 64; i++) assert_true(y[i] == 2.0f * i + 1);
  hj_buffer_destroy(out[0]);
  out[0] = NULL;
  /* a region past one page, at an offset that is not page aligned */
  hj_buffer_t *w2;
  CHECK_OK(ctx, hj_buffer_map_file(ctx, path, 12 + 4 * 4000, HJ_F32, HJ_SHAPE(64), &w2));
  CHECK_OK(ctx, hj_exec_run(e, &w2, 1, out, 1));
  y = hj_buffer_host_ptr(out[0]);
  for (int i = 0; i < 64; i++) assert_true(y[i] == 2.0f * (4000 + i) + 1);
  hj_buffer_destroy(out[0]);
  /* refusals */
  hj_buffer_t *b = (hj_buffer_t *)1;
  assert_int_equal(hj_buffer_map_file(ctx, path, 13, HJ_F32, HJ_SHAPE(64), &b), HJ_ERR_INVALID_ARG);
  assert_null(b);
  ta_has(hj_ctx_error(ctx), "from offset 13 is at 0xd, not aligned to the 4-byte elements");
  assert_int_equal(hj_buffer_map_file(ctx, path, 12 + 4 * 4990, HJ_F32, HJ_SHAPE(64), &b), HJ_ERR_INVALID_ARG);
  ta_has(hj_ctx_error(ctx), "has 40 bytes, f32[64] needs 256");
  assert_int_equal(hj_buffer_map_file(ctx, path, 1 << 30, HJ_F32, HJ_SHAPE(1), &b), HJ_ERR_INVALID_ARG);
  ta_has(hj_ctx_error(ctx), "offset 1073741824 is past the end of");
  assert_int_equal(hj_buffer_map_file(ctx, "/nonexistent/w.bin", 0, HJ_F32, HJ_SHAPE(1), &b), HJ_ERR_IO);
  ta_has(hj_ctx_error(ctx), "cannot open '/nonexistent/w.bin'");
  assert_int_equal(hj_buffer_map_file(ctx, "/tmp", 0, HJ_F32, HJ_SHAPE(1), &b), HJ_ERR_IO);
  ta_has(hj_ctx_error(ctx), "is not a regular file");
  /* the evaluator reads the same 4-byte aligned (not 64) mapping (UBSan checks its loads) */
  hj_ctx_t *ev = cb_ctx(HJ_BACKEND_INTERP, 1, NULL);
  hj_graph_t *g2;
  hj_exec_t *e2 = tb_affine(ev, 64, &g2);
  out[0] = NULL;
  CHECK_OK(ev, hj_exec_run(e2, &w2, 1, out, 1));
  y = hj_buffer_host_ptr(out[0]);
  for (int i = 0; i < 64; i++) assert_true(y[i] == 2.0f * (4000 + i) + 1);
  hj_buffer_destroy(out[0]);
  hj_exec_destroy(e2);
  hj_graph_destroy(g2);
  hj_ctx_destroy(ev);
  hj_buffer_destroy(w);
  hj_buffer_destroy(w2);
  hj_exec_destroy(e);
  hj_graph_destroy(g);
  unlink(path);
  hj_ctx_destroy(ctx);
}

/* One mapped file, one view per "weight"; the views outlive the base handle. */
static void test_views(void **state) {
  (void)state;
  hj_ctx_t *ctx = cb_ctx(HJ_BACKEND_CPU, 1, NULL);
  char path[64];
  tb_file(1000, path, sizeof path);
  hj_buffer_t *file, *a, *b, *c, *bad = (hj_buffer_t *)1;
  CHECK_OK(ctx, hj_buffer_map_file(ctx, path, 0, HJ_U8, HJ_SHAPE(12 + 4000), &file));
  CHECK_OK(ctx, hj_buffer_view(file, 12, HJ_F32, HJ_SHAPE(8, 8), &a));       /* 0..63 */
  CHECK_OK(ctx, hj_buffer_view(file, 12 + 4 * 64, HJ_F32, HJ_SHAPE(8), &b)); /* 64..71 */
  CHECK_OK(ctx, hj_buffer_view(a, 4 * 8, HJ_F32, HJ_SHAPE(8), &c));          /* a view of a view: 8..15 */
  assert_true(hj_buffer_is_read_only(a));
  assert_int_equal(hj_buffer_view(file, 13, HJ_F32, HJ_SHAPE(8), &bad), HJ_ERR_INVALID_ARG);
  assert_null(bad);
  ta_has(hj_ctx_error(ctx), "not aligned to the 4-byte elements of f32[8]");
  assert_int_equal(hj_buffer_view(file, 12 + 3992, HJ_F32, HJ_SHAPE(8), &bad), HJ_ERR_INVALID_ARG);
  ta_has(hj_ctx_error(ctx), "the base buffer from byte 4004 has 8 bytes, f32[8] needs 32");
  hj_buffer_destroy(file);                                  /* a, b and c keep it mapped */
  hj_graph_t *g;
  CHECK_OK(ctx, hj_graph_create(ctx, "lin", &g));
  hj_tensor_t w = hj_param(g, HJ_F32, HJ_SHAPE(8, 8), "w"), bias = hj_param(g, HJ_F32, HJ_SHAPE(8), "b");
  hj_tensor_t x = hj_param(g, HJ_F32, HJ_SHAPE(1, 8), "x");
  CHECK_OK(ctx, hj_graph_output(g, hj_add(hj_matmul(x, w), bias)));
  hj_exec_t *e;
  CHECK_OK(ctx, hj_compile(g, &e));
  hj_buffer_t *in[3] = { a, b, c }, *out[1] = { NULL };
  hj_buffer_t *x1;
  CHECK_OK(ctx, hj_buffer_view(c, 0, HJ_F32, HJ_SHAPE(1, 8), &x1));
  in[2] = x1;
  CHECK_OK(ctx, hj_exec_run(e, in, 3, out, 1));
  const float *y = hj_buffer_host_ptr(out[0]);
  for (int j = 0; j < 8; j++) {
    double s = 64 + j;
    for (int k = 0; k < 8; k++) s += (double)(8 + k) * (8 * k + j);
    assert_true(fabs(y[j] - s) <= 1e-3);
  }
  hj_buffer_destroy(out[0]);
  hj_buffer_destroy(x1);
  hj_buffer_destroy(a);
  hj_buffer_destroy(b);
  hj_buffer_destroy(c);
  hj_exec_destroy(e);
  hj_graph_destroy(g);
  unlink(path);
  hj_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_wrap_no_copy),
    cmocka_unit_test(test_wrap_donated_in_place),
    cmocka_unit_test(test_wrap_refusals),
    cmocka_unit_test(test_map_file),
    cmocka_unit_test(test_views),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
