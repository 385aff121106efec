/* bench_gpt2.h — a GPT-2 forward written against hlojit.h only, as a new user would: the
   prefill graph (T tokens -> the last position's logits) and the decode-step graph (one
   token at position |pos| against a KV cache), for bench_compile and the compile-time unit
   tests. Header-only (static inline functions).

   Parameters, in order (bg_param_shape gives each shape):
     prefill: ids s32[T], wte f32[V, C], wpe f32[maxT, C], 12 per layer (bg_layer_names),
              lnf_g, lnf_b;
     decode:  the same with ids s32[1], then pos s32[], then per layer k_cache, v_cache
              f32[H, S, D] (S = |cache|).
   Outputs: prefill logits f32[1, V] (of position T-1); decode logits f32[1, V] and per
   layer the updated k_cache, v_cache.

   The block is GPT-2's (pre-norm): h = ln1(x); qkv = h @ W_attn + b; heads of D = C/H;
   causal softmax(q k^T / sqrt(D)); x += y @ W_proj + b; x += gelu_tanh(ln2(x) @ W_fc + b)
   @ W_fcproj + b. Decode writes k and v of the new token into the caches at |pos|
   (dynamic-update-slice) and masks keys after |pos|. */
#ifndef HLOJIT_BENCH_GPT2_H
#define HLOJIT_BENCH_GPT2_H
#include "hlojit.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct bg_cfg {
  int L, C, H, V, maxT;
  int T;            /* prefill: tokens */
  int cache;        /* decode: KV cache length S (0: prefill) */
} bg_cfg;

enum { BG_PER_LAYER = 12 };
static const char *const bg_layer_names[BG_PER_LAYER] = {
  "ln1_g", "ln1_b", "w_attn", "b_attn", "w_proj", "b_proj",
  "ln2_g", "ln2_b", "w_fc", "b_fc", "w_fcproj", "b_fcproj"
};

static inline int bg_nparams(const bg_cfg *c) {
  return 3 + BG_PER_LAYER * c->L + 2 + (c->cache ? 1 + 2 * c->L : 0);
}

/* Shape and dtype of parameter |i|; |kind| 0 weight matrix, 1 gain, 2 bias, 3 ids/pos,
   4 cache (for the inputs' values). */
static inline hj_shape_t bg_param_shape(const bg_cfg *c, int i, hj_dtype_t *t, int *kind) {
  int64_t C = c->C, D = c->C / c->H;
  *t = HJ_F32;
  *kind = 0;
  if (i == 0) { *t = HJ_S32; *kind = 3; return HJ_SHAPE(c->cache ? 1 : c->T); }
  if (i == 1) return HJ_SHAPE(c->V, C);
  if (i == 2) return HJ_SHAPE(c->maxT, C);
  int k = i - 3;
  if (k < BG_PER_LAYER * c->L) {
    switch (k % BG_PER_LAYER) {
    case 0: case 6: *kind = 1; return HJ_SHAPE(C);
    case 2: return HJ_SHAPE(C, 3 * C);
    case 3: *kind = 2; return HJ_SHAPE(3 * C);
    case 4: return HJ_SHAPE(C, C);
    case 8: return HJ_SHAPE(C, 4 * C);
    case 9: *kind = 2; return HJ_SHAPE(4 * C);
    case 10: return HJ_SHAPE(4 * C, C);
    default: *kind = 2; return HJ_SHAPE(C);
    }
  }
  k -= BG_PER_LAYER * c->L;
  if (k == 0) { *kind = 1; return HJ_SHAPE(C); }
  if (k == 1) { *kind = 2; return HJ_SHAPE(C); }
  k -= 2;
  if (k == 0) { *t = HJ_S32; *kind = 3; return HJ_SCALAR; }
  *kind = 4;
  return HJ_SHAPE(c->H, c->cache, D);
}

/* [n, C] -> [H, n, D] (|perm| {1,0,2}) or [H, D, n] ({1,2,0}). */
static inline hj_tensor_t bg_heads(const bg_cfg *c, hj_tensor_t t, int64_t n, const int64_t *perm) {
  return hj_transpose(hj_reshape(t, HJ_SHAPE(n, c->H, c->C / c->H)), perm, 3);
}

/* One block on x [n, C]; |p| its 12 parameters. Decode (n = 1): |kc|, |vc| the caches, |pos|
   the position; *kc_out, *vc_out receive the updated caches. */
static inline hj_tensor_t bg_block(const bg_cfg *c, hj_graph_t *g, hj_tensor_t x, const hj_tensor_t *p, int64_t n,
                            hj_tensor_t kc, hj_tensor_t vc, hj_tensor_t pos, hj_tensor_t *kc_out,
                            hj_tensor_t *vc_out) {
  int64_t C = c->C, D = C / c->H;
  static const int64_t hd[3] = { 1, 0, 2 }, kt[3] = { 1, 2, 0 };
  hj_tensor_t h = hj_layer_norm(x, p[0], p[1], 1e-5);
  hj_tensor_t qkv = hj_add(hj_matmul(h, p[2]), p[3]);
  hj_tensor_t s[3];
  const int64_t sizes[3] = { C, C, C };
  if (hj_unpack(hj_split(qkv, 1, sizes, 3), s, 3)) return HJ_NONE;
  hj_tensor_t scale = hj_scalar(g, HJ_F32, 1.0 / sqrt((double)D));
  hj_tensor_t q = bg_heads(c, s[0], n, hd), att, v;
  if (!c->cache) {
    hj_tensor_t k = bg_heads(c, s[1], n, kt);
    v = bg_heads(c, s[2], n, hd);
    att = hj_mul(hj_matmul(q, k), scale);
    att = hj_select(hj_causal_mask(g, n), att, hj_scalar(g, HJ_F32, -INFINITY));
  } else {
    hj_tensor_t zero = hj_scalar(g, HJ_S32, 0), st[3] = { zero, pos, zero };
    *kc_out = hj_dynamic_update_slice(kc, bg_heads(c, s[1], 1, hd), st);   /* [H, S, D] */
    *vc_out = hj_dynamic_update_slice(vc, bg_heads(c, s[2], 1, hd), st);
    static const int64_t tr[3] = { 0, 2, 1 };
    att = hj_mul(hj_matmul(q, hj_transpose(*kc_out, tr, 3)), scale);    /* [H, 1, S] */
    hj_tensor_t key = hj_iota(g, HJ_S32, HJ_SHAPE(c->H, 1, c->cache), 2);
    att = hj_select(hj_compare(key, pos, HJ_CMP_LE), att, hj_scalar(g, HJ_F32, -INFINITY));
    v = *vc_out;
  }
  att = hj_softmax(att, 2);
  hj_tensor_t y = hj_reshape(hj_transpose(hj_matmul(att, v), hd, 3), HJ_SHAPE(n, C));
  hj_tensor_t x1 = hj_add(x, hj_add(hj_matmul(y, p[4]), p[5]));
  hj_tensor_t f = hj_gelu_tanh(hj_add(hj_matmul(hj_layer_norm(x1, p[6], p[7], 1e-5), p[8]), p[9]));
  return hj_add(x1, hj_add(hj_matmul(f, p[10]), p[11]));
}

/* The whole forward into a new graph *out (NULL on failure). */
static inline hj_status bg_build(hj_ctx_t *ctx, const bg_cfg *c, hj_graph_t **out) {
  *out = NULL;
  hj_graph_t *g = NULL;
  hj_status st = hj_graph_create(ctx, c->cache ? "gpt2_decode" : "gpt2_prefill", &g);
  if (st) return st;
  int np = bg_nparams(c);
  hj_tensor_t *p = calloc((size_t)np, sizeof *p);
  if (!p) {
    hj_graph_destroy(g);
    return HJ_ERR_OOM;
  }
  for (int i = 0; i < np; i++) {
    hj_dtype_t t;
    int kind;
    hj_shape_t s = bg_param_shape(c, i, &t, &kind);
    const char *name = i == 0 ? "ids" : i == 1 ? "wte" : i == 2 ? "wpe" : "p";
    if (i >= 3 && i < 3 + BG_PER_LAYER * c->L) name = bg_layer_names[(i - 3) % BG_PER_LAYER];
    p[i] = hj_param(g, t, s, name);
  }
  int64_t n = c->cache ? 1 : c->T, C = c->C;
  int lnf = 3 + BG_PER_LAYER * c->L, caches = lnf + 3;
  hj_tensor_t pos = c->cache ? p[lnf + 2] : HJ_NONE;
  hj_tensor_t x = hj_embedding(p[1], p[0]);                           /* [n, C] */
  if (!c->cache) {
    const int64_t b[2] = { 0, 0 }, e[2] = { n, C };
    x = hj_add(x, hj_slice(p[2], b, e, NULL));
  } else {
    hj_tensor_t st2[2] = { pos, hj_scalar(g, HJ_S32, 0) };
    const int64_t sz[2] = { 1, C };
    x = hj_add(x, hj_dynamic_slice(p[2], st2, sz));
  }
  hj_tensor_t *kv = c->cache ? calloc((size_t)(2 * c->L), sizeof *kv) : NULL;
  if (c->cache && !kv) st = HJ_ERR_OOM;
  for (int l = 0; l < c->L && !st; l++) {
    hj_tensor_t kc = c->cache ? p[caches + 2 * l] : HJ_NONE, vc = c->cache ? p[caches + 2 * l + 1] : HJ_NONE;
    x = bg_block(c, g, x, &p[3 + BG_PER_LAYER * l], n, kc, vc, pos, kv ? &kv[2 * l] : NULL,
                 kv ? &kv[2 * l + 1] : NULL);
  }
  x = hj_layer_norm(x, p[lnf], p[lnf + 1], 1e-5);
  if (n > 1) {
    const int64_t b[2] = { n - 1, 0 }, e[2] = { n, C };
    x = hj_slice(x, b, e, NULL);                                      /* [1, C] */
  }
  static const int64_t tr[2] = { 1, 0 };
  hj_tensor_t logits = hj_matmul(x, hj_transpose(p[1], tr, 2));       /* [1, V] */
  if (!st) st = hj_graph_output(g, logits);
  for (int l = 0; kv && l < 2 * c->L && !st; l++) st = hj_graph_output(g, kv[l]);
  if (!st) st = hj_graph_status(g);
  free(kv);
  free(p);
  if (st) {
    hj_graph_destroy(g);
    return st;
  }
  *out = g;
  return HJ_OK;
}

/* Inputs like GPT-2's, from a fixed LCG: weights U(-0.04, 0.04) (std ~0.02), gains
   1 + U(-0.1, 0.1), biases U(-0.02, 0.02), caches U(-1, 1), ids (7 i + 3) mod V, pos =
   cache / 2. in[] receives bg_nparams buffers (destroy them with bg_free_inputs). */
static inline hj_status bg_inputs(hj_ctx_t *ctx, const bg_cfg *c, uint32_t seed, hj_buffer_t **in) {
  int np = bg_nparams(c);
  for (int i = 0; i < np; i++) in[i] = NULL;
  for (int i = 0; i < np; i++) {
    hj_dtype_t t;
    int kind;
    hj_shape_t s = bg_param_shape(c, i, &t, &kind);
    int64_t n = hj_shape_numel(s);
    void *d = malloc((size_t)(n > 0 ? n : 1) * 4);
    if (!d) return HJ_ERR_OOM;
    uint32_t r = seed * 2654435761u + (uint32_t)i * 40503u + 1u;
    for (int64_t j = 0; j < n; j++) {
      if (kind == 3) {
        ((int32_t *)d)[j] = s.rank == 0 ? c->cache / 2 : (int32_t)((7 * j + 3) % c->V);
        continue;
      }
      r = r * 1664525u + 1013904223u;
      double u = (double)(r >> 8) / (1 << 24) * 2.0 - 1.0;
      double scale = kind == 0 ? 0.04 : kind == 1 ? 0.1 : kind == 2 ? 0.02 : 1.0;
      ((float *)d)[j] = (float)((kind == 1 ? 1.0 : 0.0) + scale * u);
    }
    hj_status st = hj_buffer_from_host(ctx, t, s, d, &in[i]);
    free(d);
    if (st) return st;
  }
  return HJ_OK;
}

static inline void bg_free_inputs(const bg_cfg *c, hj_buffer_t **in) {
  for (int i = 0; i < bg_nparams(c); i++) hj_buffer_destroy(in[i]);
}

/* GPT-2 124M at |L| layers: prefill of |T| tokens, or a decode step (|cache| > 0). */
static inline bg_cfg bg_gpt2_124m(int L, int T, int cache) {
  bg_cfg c = { .L = L, .C = 768, .H = 12, .V = 50257, .maxT = 1024, .T = T, .cache = cache };
  return c;
}
#endif
