/* cnn.c — an image classifier in plain C: a small ResNet (examples/cnn/make_model.py has
   the model, its weights and JAX's outputs) built with hlojit's convolution API, compiled
   once, run on a batch of images.

     cnn MODEL_DIR OUT_DIR [--backend auto|cpu|interp|cuda] [--runs N]

   Reads MODEL_DIR/<param>.npy and images.npy, builds
     stem   = relu(conv3x3(x, 3 -> 16) + b)
     pool   = max_pool 3x3 stride 2 "same"
     block1 = relu(conv3x3(relu(conv3x3(pool) + b)) + b + pool)
     block2 = relu(conv3x3(relu(conv3x3 stride 2(block1) + b)) + b + conv1x1 stride 2(block1) + b)
     dw     = relu(depthwise conv3x3(block2) + b)
     gap    = avg_pool over the whole 8x8 map, reshaped to (N, 32)
     logits = gap @ fc_w + fc_b
   (batch norm already folded into the weights by make_model.py), and writes every layer
   as OUT_DIR/<layer>.npy, which cnn_check.py compares with JAX's. Prints the predicted class
   of each image, the compile's statistics (evaluator fallbacks must be 0) and, with
   --runs, the best time of a batch. Exit status 1 on any error, with the library's message. */
#include "hlojit.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define CNN_NPARAM 16
static const char *const cnn_param_names[CNN_NPARAM] = {
  "stem_w", "stem_b", "b1c1_w", "b1c1_b", "b1c2_w", "b1c2_b", "b2c1_w", "b2c1_b",
  "b2c2_w", "b2c2_b", "b2sc_w", "b2sc_b", "dw_w", "dw_b", "fc_w", "fc_b",
};
#define CNN_NOUT 7
static const char *const cnn_layers[CNN_NOUT] = { "stem", "pool", "block1", "block2", "dw", "gap", "logits" };

static double cnn_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* relu(conv(x, w) + b) or, with |relu| false, conv(x, w) + b: NHWC, "same" padding. */
static hj_tensor_t cnn_relu(hj_graph_t *g, hj_tensor_t y) {
  return hj_max(y, hj_broadcast_to(hj_scalar(g, HJ_F32, 0.0), hj_tensor_shape(y)));
}

static hj_tensor_t cnn_conv(hj_graph_t *g, hj_tensor_t x, hj_tensor_t w, hj_tensor_t b, int64_t stride,
                            int64_t groups, bool relu) {
  int64_t st[2] = { stride, stride };
  hj_conv_opts_t o = { .layout = HJ_NHWC, .stride = st, .padding = HJ_PAD_SAME, .groups = groups, .bias = b };
  hj_tensor_t y = hj_conv(x, w, &o);
  return relu ? cnn_relu(g, y) : y;
}

/* The model on images x and parameters p; outputs every layer in cnn_layers' order. */
static void cnn_build(hj_graph_t *g, hj_tensor_t x, const hj_tensor_t *p) {
  hj_tensor_t stem = cnn_conv(g, x, p[0], p[1], 1, 1, true);
  int64_t win[2] = { 3, 3 }, st[2] = { 2, 2 };
  hj_pool_opts_t po = { .layout = HJ_NHWC, .window = win, .stride = st, .padding = HJ_PAD_SAME };
  hj_tensor_t pool = hj_max_pool(stem, &po);
  hj_tensor_t a = cnn_conv(g, pool, p[2], p[3], 1, 1, true);
  hj_tensor_t block1 = cnn_relu(g, hj_add(cnn_conv(g, a, p[4], p[5], 1, 1, false), pool));
  a = cnn_conv(g, block1, p[6], p[7], 2, 1, true);
  hj_tensor_t sc = cnn_conv(g, block1, p[10], p[11], 2, 1, false);
  hj_tensor_t block2 = cnn_relu(g, hj_add(cnn_conv(g, a, p[8], p[9], 1, 1, false), sc));
  hj_tensor_t dw = cnn_conv(g, block2, p[12], p[13], 1, hj_tensor_shape(block2).dims[3], true);
  hj_shape_t ds = hj_tensor_shape(dw);
  int64_t gw[2] = { ds.dims[1], ds.dims[2] };
  hj_pool_opts_t ga = { .layout = HJ_NHWC, .window = gw };
  hj_tensor_t gap = hj_reshape(hj_avg_pool(dw, &ga), HJ_SHAPE(ds.dims[0], ds.dims[3]));
  hj_tensor_t logits = hj_linear(gap, p[14], p[15], HJ_LINEAR_IN_OUT);
  hj_tensor_t outs[CNN_NOUT] = { stem, pool, block1, block2, dw, gap, logits };
  for (int i = 0; i < CNN_NOUT; i++) hj_graph_output(g, outs[i]);
}

static int cnn_fail(hj_ctx_t *ctx, const char *what) {
  fprintf(stderr, "cnn: %s: %s\n", what, ctx ? hj_ctx_error(ctx) : "");
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: cnn MODEL_DIR OUT_DIR [--backend auto|cpu|interp|cuda] [--runs N]\n");
    return 1;
  }
  const char *dir = argv[1], *out = argv[2];
  hj_ctx_options_t opt;
  hj_ctx_options_init(&opt);
  int runs = 0;
  for (int i = 3; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--runs")) runs = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--backend"))
      opt.backend = !strcmp(argv[i + 1], "cpu") ? HJ_BACKEND_CPU : !strcmp(argv[i + 1], "interp") ? HJ_BACKEND_INTERP
                    : !strcmp(argv[i + 1], "cuda") ? HJ_BACKEND_CUDA : HJ_BACKEND_AUTO;
    else return fprintf(stderr, "cnn: unknown argument '%s'\n", argv[i]), 1;
  }
  hj_ctx_t *ctx = NULL;
  if (hj_ctx_create(&opt, &ctx)) return cnn_fail(ctx, "context");
  /* inputs: the images, then the parameters, read from .npy */
  hj_buffer_t *in[1 + CNN_NPARAM] = { NULL };
  char path[4096];
  for (int i = 0; i <= CNN_NPARAM; i++) {
    snprintf(path, sizeof path, "%s/%s.npy", dir, i == 0 ? "images" : cnn_param_names[i - 1]);
    if (hj_buffer_read_npy(ctx, path, &in[i])) return cnn_fail(ctx, path);
  }
  hj_graph_t *g = NULL;
  if (hj_graph_create(ctx, "cnn", &g)) return cnn_fail(ctx, "graph");
  hj_tensor_t x = hj_param(g, hj_buffer_dtype(in[0]), hj_buffer_shape(in[0]), "images"), p[CNN_NPARAM];
  for (int i = 0; i < CNN_NPARAM; i++)
    p[i] = hj_param(g, hj_buffer_dtype(in[1 + i]), hj_buffer_shape(in[1 + i]), cnn_param_names[i]);
  cnn_build(g, x, p);
  hj_exec_t *e = NULL;
  double t0 = cnn_now();
  if (hj_compile(g, &e)) return cnn_fail(ctx, "compile");
  double compile_ms = 1e3 * (cnn_now() - t0);
  hj_buffer_t *res[CNN_NOUT] = { NULL };
  if (hj_exec_run(e, in, 1 + CNN_NPARAM, res, CNN_NOUT)) return cnn_fail(ctx, "run");
  double best = 1e30;
  for (int r = 0; r < runs; r++) {
    double t = cnn_now();
    if (hj_exec_run(e, in, 1 + CNN_NPARAM, res, CNN_NOUT)) return cnn_fail(ctx, "run");
    double ms = 1e3 * (cnn_now() - t);
    if (ms < best) best = ms;
  }
  mkdir(out, 0777);
  for (int k = 0; k < CNN_NOUT; k++) {
    snprintf(path, sizeof path, "%s/%s.npy", out, cnn_layers[k]);
    if (hj_buffer_write_npy(res[k], path)) return cnn_fail(ctx, path);
  }
  const float *logits = hj_buffer_host_ptr(res[CNN_NOUT - 1]);
  hj_shape_t ls = hj_buffer_shape(res[CNN_NOUT - 1]);
  for (int64_t i = 0; i < ls.dims[0]; i++) {
    int best_c = 0;
    for (int c = 1; c < ls.dims[1]; c++)
      if (logits[i * ls.dims[1] + c] > logits[i * ls.dims[1] + best_c]) best_c = c;
    printf("image %lld: class %d (logit %.4f)\n", (long long)i, best_c, logits[i * ls.dims[1] + best_c]);
  }
  hj_exec_stats_t st;
  if (hj_exec_stats(e, &st)) return cnn_fail(ctx, "stats");
  printf("stats: backend=%s compile_ms=%.1f kernels: loop=%d reduction=%d matmul=%d evaluator_fallbacks=%d\n",
         st.backend == HJ_BACKEND_CPU ? "cpu" : st.backend == HJ_BACKEND_CUDA ? "cuda" : "interp", compile_ms, st.kernels_loop, st.kernels_reduction, st.kernels_matmul, st.evaluator_fallbacks);
  if (runs > 0) printf("best of %d runs: %.3f ms per batch of %lld\n", runs, best, (long long)ls.dims[0]);
  for (int k = 0; k < CNN_NOUT; k++) hj_buffer_destroy(res[k]);
  for (int i = 0; i <= CNN_NPARAM; i++) hj_buffer_destroy(in[i]);
  hj_exec_destroy(e);
  hj_graph_destroy(g);
  hj_ctx_destroy(ctx);
  return 0;
}
