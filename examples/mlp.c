/* mlp.c — one transformer block (GPT-2 style: pre-norm causal self-attention and an MLP)
   built through hlojit's C API and run by the reference evaluator.

     x (B, T, C) -> x + attn(ln1(x)) -> x1 + mlp(ln2(x1))
     attn: qkv = ln1 @ w_qkv + b_qkv (B, T, 3C), split into H heads, causal softmax of
           q k^T / sqrt(D), weighted sum of v, heads merged, @ w_proj + b_proj
     mlp:  gelu_tanh(ln2 @ w_fc + b_fc) @ w_fc2 + b_fc2

   Weights come from a seeded xorshift PRNG, so every run builds the same numbers. The
   inputs and the output are written as .npy into the directory argv[1] (default
   build/mlp_out), where examples/mlp_check.py recomputes the block in NumPy.
   Builds both against build/libhlojit.a and as a single translation unit
   (-DHLOJIT_IMPLEMENTATION).

   B batch, T sequence, C channels, H heads, D = C / H head size. */
#include "hlojit.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { MLP_B = 2, MLP_T = 8, MLP_C = 32, MLP_H = 4, MLP_D = MLP_C / MLP_H, MLP_NPARAM = 13 };

/* The block's parameters, in the order of the graph's inputs. */
static const struct {
  const char *name;
  int rank;
  int64_t dims[3];
  float scale, offset;   /* value = offset + scale * uniform(-1, 1) */
} mlp_params[MLP_NPARAM] = {
  { "x", 3, { MLP_B, MLP_T, MLP_C }, 1.0f, 0.0f },
  { "ln1_g", 1, { MLP_C }, 0.1f, 1.0f },
  { "ln1_b", 1, { MLP_C }, 0.1f, 0.0f },
  { "w_qkv", 2, { MLP_C, 3 * MLP_C }, 0.2f, 0.0f },
  { "b_qkv", 1, { 3 * MLP_C }, 0.02f, 0.0f },
  { "w_proj", 2, { MLP_C, MLP_C }, 0.2f, 0.0f },
  { "b_proj", 1, { MLP_C }, 0.02f, 0.0f },
  { "ln2_g", 1, { MLP_C }, 0.1f, 1.0f },
  { "ln2_b", 1, { MLP_C }, 0.1f, 0.0f },
  { "w_fc", 2, { MLP_C, 4 * MLP_C }, 0.2f, 0.0f },
  { "b_fc", 1, { 4 * MLP_C }, 0.02f, 0.0f },
  { "w_fc2", 2, { 4 * MLP_C, MLP_C }, 0.1f, 0.0f },
  { "b_fc2", 1, { MLP_C }, 0.02f, 0.0f },
};

static uint32_t mlp_rng = 0x2545F491u;

static float mlp_uniform(void) {  /* xorshift32 -> [-1, 1) */
  mlp_rng ^= mlp_rng << 13;
  mlp_rng ^= mlp_rng >> 17;
  mlp_rng ^= mlp_rng << 5;
  return (float)(mlp_rng >> 8) / 8388608.0f - 1.0f;
}

static hj_shape_t mlp_shape(int i) {
  hj_shape_t s = { .rank = mlp_params[i].rank };
  memcpy(s.dims, mlp_params[i].dims, sizeof(int64_t) * 3);
  return s;
}

/* (B, T, C) -> (B, H, T, D) */
static hj_tensor_t mlp_heads(hj_tensor_t t) {
  static const int64_t perm[4] = { 0, 2, 1, 3 };
  return hj_transpose(hj_reshape(t, HJ_SHAPE(MLP_B, MLP_T, MLP_H, MLP_D)), perm, 4);
}

static hj_tensor_t mlp_attention(hj_graph_t *g, hj_tensor_t h, const hj_tensor_t *p) {
  hj_tensor_t qkv = hj_add(hj_matmul(h, p[3]), p[4]);                  // (B, T, 3C)
  hj_tensor_t parts[3];
  const int64_t sizes[3] = { MLP_C, MLP_C, MLP_C };
  hj_unpack(hj_split(qkv, 2, sizes, 3), parts, 3);                      // 3 x (B, T, C)
  hj_tensor_t q = mlp_heads(parts[0]), k = mlp_heads(parts[1]), v = mlp_heads(parts[2]);
  static const int64_t kt[4] = { 0, 1, 3, 2 };
  hj_tensor_t att = hj_matmul(q, hj_transpose(k, kt, 4));              // (B, H, T, T)
  att = hj_mul(att, hj_scalar(g, HJ_F32, 1.0 / sqrt((double)MLP_D)));
  att = hj_select(hj_causal_mask(g, MLP_T), att, hj_scalar(g, HJ_F32, -INFINITY));
  att = hj_softmax(att, -1);
  static const int64_t back[4] = { 0, 2, 1, 3 };
  hj_tensor_t y = hj_transpose(hj_matmul(att, v), back, 4);            // (B, T, H, D)
  y = hj_reshape(y, HJ_SHAPE(MLP_B, MLP_T, MLP_C));                    // (B, T, C)
  return hj_add(hj_matmul(y, p[5]), p[6]);
}

static hj_tensor_t mlp_block(hj_graph_t *g, const hj_tensor_t *p) {
  hj_tensor_t x = p[0];                                                // (B, T, C)
  hj_tensor_t x1 = hj_add(x, mlp_attention(g, hj_layer_norm(x, p[1], p[2], 1e-5), p));
  hj_tensor_t h = hj_layer_norm(x1, p[7], p[8], 1e-5);
  h = hj_gelu_tanh(hj_add(hj_matmul(h, p[9]), p[10]));                 // (B, T, 4C)
  return hj_add(x1, hj_add(hj_matmul(h, p[11]), p[12]));              // (B, T, C)
}

/* mkdir -p */
static int mlp_mkdirs(const char *dir) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", dir);
  for (char *s = buf + 1; *s; s++) {
    if (*s != '/') continue;
    *s = 0;
    if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
    *s = '/';
  }
  return mkdir(buf, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

static int mlp_write(const hj_buffer_t *b, const char *dir, const char *name, hj_ctx_t *ctx) {
  char path[1200];
  snprintf(path, sizeof path, "%s/%s.npy", dir, name);
  if (hj_buffer_write_npy(b, path) == HJ_OK) return 0;
  fprintf(stderr, "mlp: writing %s: %s\n", path, hj_ctx_error(ctx));
  return -1;
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "build/mlp_out";
  int rc = 1;
  hj_ctx_t *ctx = NULL;
  hj_graph_t *g = NULL;
  hj_exec_t *e = NULL;
  hj_buffer_t *in[MLP_NPARAM] = { 0 }, *out[1] = { NULL };
  hj_ctx_options_t opt;
  hj_ctx_options_init(&opt);
  if (hj_ctx_create(&opt, &ctx) != HJ_OK || hj_graph_create(ctx, "block", &g) != HJ_OK) {
    fprintf(stderr, "mlp: cannot create a context and a graph\n");
    goto done;
  }

  hj_tensor_t p[MLP_NPARAM];
  for (int i = 0; i < MLP_NPARAM; i++) p[i] = hj_param(g, HJ_F32, mlp_shape(i), mlp_params[i].name);
  hj_graph_output(g, mlp_block(g, p));
  if (hj_compile(g, &e) != HJ_OK) {
    fprintf(stderr, "mlp: compile: %s\n", hj_ctx_error(ctx));
    goto done;
  }

  if (mlp_mkdirs(dir) != 0) {
    fprintf(stderr, "mlp: cannot create %s: %s\n", dir, strerror(errno));
    goto done;
  }
  for (int i = 0; i < MLP_NPARAM; i++) {
    int64_t n = hj_shape_numel(mlp_shape(i));
    float *v = malloc(sizeof(float) * (size_t)n);
    for (int64_t j = 0; v && j < n; j++)
      v[j] = mlp_params[i].offset + mlp_params[i].scale * mlp_uniform();
    hj_status st = v ? hj_buffer_from_host(ctx, HJ_F32, mlp_shape(i), v, &in[i]) : HJ_ERR_OOM;
    free(v);
    if (st != HJ_OK) fprintf(stderr, "mlp: buffer: %s\n", hj_ctx_error(ctx));
    if (st != HJ_OK || mlp_write(in[i], dir, mlp_params[i].name, ctx) != 0) goto done;
  }
  if (hj_exec_run(e, in, MLP_NPARAM, out, 1) != HJ_OK) {
    fprintf(stderr, "mlp: run: %s\n", hj_ctx_error(ctx));
    goto done;
  }
  if (mlp_write(out[0], dir, "out", ctx) != 0) goto done;

  const float *y = hj_buffer_host_ptr(out[0]);
  int64_t n = hj_shape_numel(hj_buffer_shape(out[0]));
  double sum = 0, asum = 0;
  for (int64_t i = 0; i < n; i++) sum += y[i], asum += fabs(y[i]);
  printf("out (B=%d, T=%d, C=%d), first values:", MLP_B, MLP_T, MLP_C);
  for (int i = 0; i < 8; i++) printf(" %.6f", y[i]);
  printf("\nchecksum: sum %.6f  sum|x| %.6f  (files in %s)\n", sum, asum, dir);
  rc = 0;
done:
  for (int i = 0; i < MLP_NPARAM; i++) hj_buffer_destroy(in[i]);
  hj_buffer_destroy(out[0]);
  hj_exec_destroy(e);
  hj_graph_destroy(g);
  hj_ctx_destroy(ctx);
  return rc;
}
