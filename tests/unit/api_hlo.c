/* api_hlo.c — the driver of tests/py/test_conv_api.py: builds one case of hlojit.h's
   convolution and pooling API (hj_conv, hj_conv_transpose, hj_conv_general, hj_max_pool,
   hj_avg_pool), its random numbers and its linear algebra (hj_cholesky, hj_triangular_solve) with the public
   API only and writes the graph's module as HLO text, which the test runs through `hlojit
   run` and compares with JAX (jax.lax.conv_general_dilated, conv_transpose, reduce_window,
   jnp.linalg.cholesky, lax.linalg.triangular_solve) on the same inputs; and its random
   numbers (hj_rng_bits, hj_rng_uniform) against lax.rng_bit_generator.

     api_hlo CASE OUT.hlo     (CASE: see the table below; `list` prints them)

   Exit status 0 with the module written; 1 with the library's message on stderr (the
   error cases expect that, naming the function). */
#include "hlojit.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef hj_tensor_t (*cah_fn)(hj_graph_t *g);

static hj_tensor_t cah_param(hj_graph_t *g, const char *name, hj_dtype_t t, hj_shape_t s) {
  return hj_param(g, t, s, name);
}

static hj_tensor_t conv_nhwc_same_bias(hj_graph_t *g) {
  hj_tensor_t x = cah_param(g, "x", HJ_F32, HJ_SHAPE(2, 7, 6, 3)), w = cah_param(g, "w", HJ_F32, HJ_SHAPE(3, 3, 3, 5));
  hj_tensor_t b = cah_param(g, "b", HJ_F32, HJ_SHAPE(5));
  int64_t st[2] = { 2, 1 };
  hj_conv_opts_t o = { .layout = HJ_NHWC, .stride = st, .padding = HJ_PAD_SAME, .bias = b };
  return hj_conv(x, w, &o);
}

static hj_tensor_t conv_nchw_groups(hj_graph_t *g) {
  hj_tensor_t x = cah_param(g, "x", HJ_F32, HJ_SHAPE(2, 6, 9, 9)), w = cah_param(g, "w", HJ_F32, HJ_SHAPE(6, 2, 3, 3));
  int64_t lo[2] = { 1, 0 }, hi[2] = { 2, 1 }, dil[2] = { 1, 2 };
  hj_conv_opts_t o = { .layout = HJ_NCHW, .padding = HJ_PAD_EXPLICIT, .pad_lo = lo, .pad_hi = hi,
                       .dilation = dil, .groups = 3 };
  return hj_conv(x, w, &o);
}

static hj_tensor_t conv_depthwise(hj_graph_t *g) {
  hj_tensor_t x = cah_param(g, "x", HJ_F32, HJ_SHAPE(1, 8, 8, 4)), w = cah_param(g, "w", HJ_F32, HJ_SHAPE(3, 3, 1, 8));
  hj_conv_opts_t o = { .layout = HJ_NHWC, .padding = HJ_PAD_SAME, .groups = 4 };
  return hj_conv(x, w, &o);
}

static hj_tensor_t conv_1d_default(hj_graph_t *g) {
  hj_tensor_t x = cah_param(g, "x", HJ_F32, HJ_SHAPE(2, 11, 4)), w = cah_param(g, "w", HJ_F32, HJ_SHAPE(3, 4, 6));
  return hj_conv(x, w, NULL);   /* NHWC, stride 1, valid */
}

static hj_tensor_t conv_bf16(hj_graph_t *g) {
  hj_tensor_t x = cah_param(g, "x", HJ_BF16, HJ_SHAPE(1, 6, 6, 8)), w = cah_param(g, "w", HJ_BF16, HJ_SHAPE(3, 3, 8, 4));
  hj_conv_opts_t o = { .padding = HJ_PAD_SAME };
  return hj_conv(x, w, &o);
}

static hj_tensor_t conv_transpose_same(hj_graph_t *g) {
  hj_tensor_t x = cah_param(g, "x", HJ_F32, HJ_SHAPE(1, 5, 5, 3)), w = cah_param(g, "w", HJ_F32, HJ_SHAPE(3, 3, 3, 2));
  int64_t st[2] = { 2, 2 };
  hj_conv_opts_t o = { .layout = HJ_NHWC, .stride = st, .padding = HJ_PAD_SAME };
  return hj_conv_transpose(x, w, &o);
}

static hj_tensor_t conv_transpose_valid(hj_graph_t *g) {
  hj_tensor_t x = cah_param(g, "x", HJ_F32, HJ_SHAPE(1, 3, 4, 5)), w = cah_param(g, "w", HJ_F32, HJ_SHAPE(2, 3, 3, 2));
  int64_t st[2] = { 2, 3 };
  hj_conv_opts_t o = { .layout = HJ_NCHW, .stride = st, .padding = HJ_PAD_VALID };
  return hj_conv_transpose(x, w, &o);
}

static hj_tensor_t conv_general_rev(hj_graph_t *g) {
  /* input (H, N, W, C), kernel (O, H, W, I), output (C.. as N, O, H, W): reversal on W,
     lhs dilation on H, negative pad */
  hj_tensor_t x = cah_param(g, "x", HJ_F32, HJ_SHAPE(5, 2, 6, 3)), w = cah_param(g, "w", HJ_F32, HJ_SHAPE(4, 2, 3, 3));
  hj_conv_general_t p = { .n_spatial = 2, .in_batch = 1, .in_feature = 3, .in_spatial = { 0, 2 },
                          .k_in = 3, .k_out = 0, .k_spatial = { 1, 2 },
                          .out_batch = 0, .out_feature = 1, .out_spatial = { 2, 3 },
                          .stride = { 1, 2 }, .pad_lo = { 1, -1 }, .pad_hi = { 0, 2 },
                          .lhs_dilation = { 2, 1 }, .reversal = { false, true } };
  return hj_conv_general(x, w, &p);
}

static hj_tensor_t max_pool_same(hj_graph_t *g) {
  hj_tensor_t x = cah_param(g, "x", HJ_F32, HJ_SHAPE(2, 9, 9, 3));
  int64_t win[2] = { 3, 3 }, st[2] = { 2, 2 };
  hj_pool_opts_t o = { .layout = HJ_NHWC, .window = win, .stride = st, .padding = HJ_PAD_SAME };
  return hj_max_pool(x, &o);
}

static hj_tensor_t avg_pool_exclude(hj_graph_t *g) {
  hj_tensor_t x = cah_param(g, "x", HJ_F32, HJ_SHAPE(1, 2, 7, 7));
  int64_t win[2] = { 3, 3 }, st[2] = { 2, 2 };
  hj_pool_opts_t o = { .layout = HJ_NCHW, .window = win, .stride = st, .padding = HJ_PAD_SAME, .exclude_pad = true };
  return hj_avg_pool(x, &o);
}

static hj_tensor_t avg_pool_include(hj_graph_t *g) {
  hj_tensor_t x = cah_param(g, "x", HJ_F32, HJ_SHAPE(1, 6, 6, 2));
  int64_t win[2] = { 2, 2 };
  hj_pool_opts_t o = { .layout = HJ_NHWC, .window = win };
  return hj_avg_pool(x, &o);
}

/* errors: each must fail naming its function */
static hj_tensor_t err_features(hj_graph_t *g) {
  hj_tensor_t x = cah_param(g, "x", HJ_F32, HJ_SHAPE(1, 5, 5, 3)), w = cah_param(g, "w", HJ_F32, HJ_SHAPE(3, 3, 4, 2));
  return hj_conv(x, w, NULL);
}

static hj_tensor_t err_bias(hj_graph_t *g) {
  hj_tensor_t x = cah_param(g, "x", HJ_F32, HJ_SHAPE(1, 5, 5, 3)), w = cah_param(g, "w", HJ_F32, HJ_SHAPE(3, 3, 3, 2));
  hj_conv_opts_t o = { .bias = cah_param(g, "b", HJ_F32, HJ_SHAPE(3)) };
  return hj_conv(x, w, &o);
}

static hj_tensor_t err_pool_window(hj_graph_t *g) {
  hj_tensor_t x = cah_param(g, "x", HJ_F32, HJ_SHAPE(1, 5, 5, 3));
  int64_t win[2] = { 0, 2 };
  hj_pool_opts_t o = { .window = win };
  return hj_max_pool(x, &o);
}

static hj_tensor_t err_rank(hj_graph_t *g) {
  hj_tensor_t x = cah_param(g, "x", HJ_F32, HJ_SHAPE(5, 3)), w = cah_param(g, "w", HJ_F32, HJ_SHAPE(3, 3));
  return hj_conv_transpose(x, w, NULL);
}

static hj_tensor_t chol_lower(hj_graph_t *g) { return hj_cholesky(cah_param(g, "a", HJ_F32, HJ_SHAPE(7, 7)), true); }

static hj_tensor_t chol_upper_batched(hj_graph_t *g) {
  return hj_cholesky(cah_param(g, "a", HJ_F32, HJ_SHAPE(2, 3, 5, 5)), false);
}

static hj_tensor_t chol_solve(hj_graph_t *g) {   /* hlojit.h's recipe: a x = b, a SPD */
  hj_tensor_t a = cah_param(g, "a", HJ_F32, HJ_SHAPE(6, 6)), b = cah_param(g, "b", HJ_F32, HJ_SHAPE(6, 2));
  hj_tensor_t l = hj_cholesky(a, true);
  return hj_triangular_solve(l, hj_triangular_solve(l, b, true, true, false, false), true, true, true, false);
}

static hj_tensor_t trisolve_right_upper(hj_graph_t *g) {
  hj_tensor_t a = cah_param(g, "a", HJ_F32, HJ_SHAPE(5, 5)), b = cah_param(g, "b", HJ_F32, HJ_SHAPE(3, 5));
  return hj_triangular_solve(a, b, false, false, false, true);
}

static hj_tensor_t rng_bits_threefry(hj_graph_t *g) {
  return hj_get_tuple_element(hj_rng_bits(cah_param(g, "s", HJ_U64, HJ_SHAPE(2)), HJ_RNG_THREE_FRY, HJ_U32,
                                          HJ_SHAPE(3, 5)), 1);
}

static hj_tensor_t rng_uniform_philox(hj_graph_t *g) {
  return hj_get_tuple_element(hj_rng_uniform(cah_param(g, "s", HJ_U64, HJ_SHAPE(2)), HJ_RNG_PHILOX, HJ_SHAPE(7, 9)), 1);
}

static hj_tensor_t err_rng_state(hj_graph_t *g) {
  return hj_rng_bits(cah_param(g, "s", HJ_U32, HJ_SHAPE(4)), HJ_RNG_DEFAULT, HJ_U32, HJ_SHAPE(3));
}

static hj_tensor_t err_chol_square(hj_graph_t *g) { return hj_cholesky(cah_param(g, "a", HJ_F32, HJ_SHAPE(3, 4)), true); }

static hj_tensor_t err_trisolve_type(hj_graph_t *g) {
  return hj_triangular_solve(cah_param(g, "a", HJ_F32, HJ_SHAPE(3, 3)), cah_param(g, "b", HJ_S32, HJ_SHAPE(3, 2)),
                             true, true, false, false);
}

static const struct { const char *name; cah_fn fn; } cah_cases[] = {
#define C(f) { #f, f }
  C(conv_nhwc_same_bias), C(conv_nchw_groups), C(conv_depthwise), C(conv_1d_default), C(conv_bf16),
  C(conv_transpose_same), C(conv_transpose_valid), C(conv_general_rev), C(max_pool_same),
  C(avg_pool_exclude), C(avg_pool_include), C(err_features), C(err_bias), C(err_pool_window), C(err_rank),
  C(chol_lower), C(chol_upper_batched), C(chol_solve), C(trisolve_right_upper), C(err_chol_square),
  C(err_trisolve_type), C(rng_bits_threefry), C(rng_uniform_philox), C(err_rng_state),
#undef C
};

int main(int argc, char **argv) {
  int n = (int)(sizeof cah_cases / sizeof cah_cases[0]);
  if (argc == 2 && !strcmp(argv[1], "list")) {
    for (int i = 0; i < n; i++) printf("%s\n", cah_cases[i].name);
    return 0;
  }
  if (argc != 3) {
    fprintf(stderr, "usage: api_hlo CASE|list OUT.hlo\n");
    return 1;
  }
  int k = 0;
  while (k < n && strcmp(cah_cases[k].name, argv[1])) k++;
  if (k == n) {
    fprintf(stderr, "api_hlo: no case '%s'\n", argv[1]);
    return 1;
  }
  hj_ctx_t *ctx = NULL;
  hj_graph_t *g = NULL;
  hj_module_t *m = NULL;
  char *text = NULL;
  if (hj_ctx_create(NULL, &ctx) || hj_graph_create(ctx, cah_cases[k].name, &g) ||
      hj_graph_output(g, cah_cases[k].fn(g)) || hj_graph_to_module(g, &m) || hj_module_print(m, &text)) {
    fprintf(stderr, "api_hlo: %s\n", ctx ? hj_ctx_error(ctx) : "no context");
    return 1;
  }
  FILE *f = fopen(argv[2], "w");
  if (!f || fputs(text, f) < 0 || fclose(f)) {
    fprintf(stderr, "api_hlo: cannot write %s\n", argv[2]);
    return 1;
  }
  free(text);
  hj_module_destroy(m);
  hj_graph_destroy(g);
  hj_ctx_destroy(ctx);
  return 0;
}
