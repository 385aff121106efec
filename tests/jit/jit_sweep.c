/* jit_sweep.c — the driver of tests/py/test_jit_numpy.py: runs one function through the
   tracing JIT (CPU backend) for every length 1..N of its dynamic dim and writes every
   call's inputs and outputs as raw little-endian arrays, so that NumPy can recompute each
   result on the unpadded data. Public API only (hlojit.h).

     jit_sweep FUNC N OUT.bin     FUNC: softmax meanvar matmul attention gather concat cumsum
                                        decode (N steps of a KV-cache decode, N <= 512)
                                        block (a small GPT-2 block writing a KV cache, N <= 512)

   Per length n (per step for decode), in order: each input, then each output, as float32
   (int32 for integer arrays), C order; shapes are FUNC's (below), known to the test. Inputs
   come from a splitmix64 stream seeded with (FUNC, n): floats uniform in [-1, 1), gather
   indices in [-2, n + 2) (out of range on purpose: the gather clamps, as np.clip does).
   The last line on stdout is the JIT's statistics:
     stats calls=C compiles=K memory_hits=H exact_compiles=E disk_hits=D trace_ms=.. compile_ms=..
   Exit status 0 on success, 1 with the library's message on stderr. */
#include "hlojit.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* T the dynamic length; C small widths. */
static hj_status sw_softmax(hj_graph_t *g, const hj_tensor_t *p, int n, void *u) {
  return hj_graph_output(g, hj_softmax(p[0], -1));                         // (2, T)
}

static hj_status sw_meanvar(hj_graph_t *g, const hj_tensor_t *p, int n, void *u) {
  int64_t d = 0;
  hj_graph_output(g, hj_mean(p[0], &d, 1, false));                         // (3)
  return hj_graph_output(g, hj_var(p[0], &d, 1, false));                   // (3)
}

static hj_status sw_matmul(hj_graph_t *g, const hj_tensor_t *p, int n, void *u) {
  return hj_graph_output(g, hj_matmul(p[0], p[1]));                        // (2, T) x (T, 3)
}

static hj_status sw_attention(hj_graph_t *g, const hj_tensor_t *p, int n, void *u) {
  int64_t perm[2] = { 1, 0 };
  hj_tensor_t s = hj_mul(hj_matmul(p[0], hj_transpose(p[1], perm, 2)), hj_scalar(g, HJ_F32, 0.5));  // (T, T)
  hj_shape_t ss = hj_tensor_shape(s);                                      // (<=T, <=T)
  hj_tensor_t qi = hj_iota(g, HJ_S32, ss, 0), ki = hj_iota(g, HJ_S32, ss, 1);
  hj_tensor_t m = hj_select(hj_compare(ki, qi, HJ_CMP_LE), s, hj_scalar(g, HJ_F32, -INFINITY));
  return hj_graph_output(g, hj_matmul(hj_softmax(m, -1), p[2]));           // (T, 4)
}

static hj_status sw_gather(hj_graph_t *g, const hj_tensor_t *p, int n, void *u) {
  return hj_graph_output(g, hj_embedding(p[0], p[1]));                     // (T, 3)[(T)] -> (T, 3)
}

static hj_status sw_concat(hj_graph_t *g, const hj_tensor_t *p, int n, void *u) {
  hj_tensor_t xs[3] = { p[0], p[1], p[2] };
  return hj_graph_output(g, hj_concat(xs, 3, 0));                          // (2T + 3, 2)
}

static hj_status sw_cumsum(hj_graph_t *g, const hj_tensor_t *p, int n, void *u) {
  return hj_graph_output(g, hj_cumulative(p[0], HJ_RED_SUM, 1, false));    // (2, T)
}

/* One head of GPT-2 decode (C = 8, cache L = 512): x's k and v written at row pos,
   attention over rows 0..pos. */
static hj_status sw_decode(hj_graph_t *g, const hj_tensor_t *p, int n, void *u) {
  hj_tensor_t x = p[0], pos = p[3], st[2] = { pos, hj_scalar(g, HJ_S32, 0) };   // (1, 8), ()
  hj_tensor_t k2 = hj_dynamic_update_slice(p[1], hj_tanh(x), st);              // (L, 8)
  hj_tensor_t v2 = hj_dynamic_update_slice(p[2], hj_sin(x), st);
  int64_t perm[2] = { 1, 0 };
  hj_tensor_t s = hj_mul(hj_matmul(x, hj_transpose(k2, perm, 2)), hj_scalar(g, HJ_F32, 0.35355339059327373));
  hj_tensor_t j = hj_iota(g, HJ_S32, HJ_SHAPE(1, 512), 1);
  s = hj_select(hj_compare(j, pos, HJ_CMP_LE), s, hj_scalar(g, HJ_F32, -INFINITY));   // (1, L)
  hj_graph_output(g, hj_matmul(hj_softmax(s, -1), v2));                          // (1, 8)
  hj_graph_output(g, k2);
  return hj_graph_output(g, v2);
}

/* A GPT-2 block at small widths (C 16, H 2 heads of 8, MLP 64) that also writes its keys
   into a KV cache (512, 16) at row 0 — a bucketed prefill: x (T, C), 12 weights, the cache
   -> y (T, C), the updated cache. */
static hj_tensor_t sw_heads(hj_tensor_t t, const int64_t *perm) {
  return hj_transpose(hj_reshape(t, HJ_SHAPE(-1, 2, 8)), perm, 3);
}

static hj_status sw_block(hj_graph_t *g, const hj_tensor_t *p, int n, void *u) {
  hj_tensor_t x = p[0];
  int64_t Tb = -hj_tensor_shape(x).dims[0];
  hj_tensor_t h = hj_layer_norm(x, p[1], p[2], 1e-5), s[3];
  hj_tensor_t qkv = hj_add(hj_matmul(h, p[3]), p[4]);                        // (T, 48)
  const int64_t sizes[3] = { 16, 16, 16 };
  hj_status st = hj_unpack(hj_split(qkv, 1, sizes, 3), s, 3);
  if (st != HJ_OK) return st;
  static const int64_t hd[3] = { 1, 0, 2 }, kt[3] = { 1, 2, 0 };
  hj_tensor_t q = sw_heads(s[0], hd), k = sw_heads(s[1], kt), v = sw_heads(s[2], hd);
  hj_tensor_t att = hj_mul(hj_matmul(q, k), hj_scalar(g, HJ_F32, 1.0 / sqrt(8.0)));   // (H, T, T)
  att = hj_softmax(hj_select(hj_causal_mask(g, Tb), att, hj_scalar(g, HJ_F32, -INFINITY)), 2);
  hj_tensor_t y = hj_reshape(hj_transpose(hj_matmul(att, v), hd, 3), HJ_SHAPE(-1, 16));   // (T, C)
  hj_tensor_t x1 = hj_add(x, hj_add(hj_matmul(y, p[5]), p[6]));
  hj_tensor_t f = hj_gelu_tanh(hj_add(hj_matmul(hj_layer_norm(x1, p[7], p[8], 1e-5), p[9]), p[10]));
  hj_graph_output(g, hj_add(x1, hj_add(hj_matmul(f, p[11]), p[12])));
  hj_tensor_t zero = hj_scalar(g, HJ_S32, 0), st0[2] = { zero, zero };
  return hj_graph_output(g, hj_dynamic_update_slice(p[13], s[1], st0));     // (512, C)
}

typedef struct sw_fn {
  const char *name;
  hj_jit_build_fn build;
  int nin, nout;
  hj_shape_t decl[14];
} sw_fn;

#define D HJ_DYN(1000)
static const sw_fn sw_fns[] = {
  { "softmax", sw_softmax, 1, 1, { HJ_SHAPE(2, D) } },
  { "meanvar", sw_meanvar, 1, 2, { HJ_SHAPE(D, 3) } },
  { "matmul", sw_matmul, 2, 1, { HJ_SHAPE(2, D), HJ_SHAPE(D, 3) } },
  { "attention", sw_attention, 3, 1, { HJ_SHAPE(D, 4), HJ_SHAPE(D, 4), HJ_SHAPE(D, 4) } },
  { "gather", sw_gather, 2, 1, { HJ_SHAPE(D, 3), HJ_SHAPE(D) } },
  { "concat", sw_concat, 3, 1, { HJ_SHAPE(D, 2), HJ_SHAPE(3, 2), HJ_SHAPE(D, 2) } },
  { "cumsum", sw_cumsum, 1, 1, { HJ_SHAPE(2, D) } },
  { "decode", sw_decode, 4, 3, { HJ_SHAPE(1, 8), HJ_SHAPE(512, 8), HJ_SHAPE(512, 8), HJ_SCALAR } },
  { "block", sw_block, 14, 2, { HJ_SHAPE(HJ_DYN(512), 16), HJ_SHAPE(16), HJ_SHAPE(16), HJ_SHAPE(16, 48),
                                HJ_SHAPE(48), HJ_SHAPE(16, 16), HJ_SHAPE(16), HJ_SHAPE(16), HJ_SHAPE(16),
                                HJ_SHAPE(16, 64), HJ_SHAPE(64), HJ_SHAPE(64, 16), HJ_SHAPE(16), HJ_SHAPE(512, 16) } },
};
#undef D

static uint64_t sw_state;
static uint64_t sw_next(void) {   /* splitmix64 */
  uint64_t z = (sw_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static int sw_fail(hj_ctx_t *ctx, const char *what) {
  fprintf(stderr, "jit_sweep: %s: %s\n", what, ctx ? hj_ctx_error(ctx) : "");
  return 1;
}

/* The call's shape of declared shape |s| at length |n|. */
static hj_shape_t sw_at(hj_shape_t s, int64_t n) {
  for (int d = 0; d < s.rank; d++)
    if (s.dims[d] < 0) s.dims[d] = n;
  return s;
}

static int sw_write(FILE *f, hj_buffer_t *b) {
  return fwrite(hj_buffer_host_ptr(b), 1, hj_buffer_nbytes(b), f) == hj_buffer_nbytes(b) ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: jit_sweep FUNC N OUT.bin\n");
    return 1;
  }
  const sw_fn *fn = NULL;
  for (size_t i = 0; i < sizeof sw_fns / sizeof sw_fns[0]; i++)
    if (strcmp(argv[1], sw_fns[i].name) == 0) fn = &sw_fns[i];
  int N = atoi(argv[2]);
  bool decode = fn && fn->build == sw_decode;
  if (!fn || N < 1 || N > 1000 || ((decode || fn->build == sw_block) && N > 512)) {
    fprintf(stderr, "jit_sweep: unknown function '%s' or N %d out of range\n", argv[1], N);
    return 1;
  }
  FILE *f = fopen(argv[3], "wb");
  if (!f) return sw_fail(NULL, "cannot write the output file");
  hj_ctx_options_t co;
  hj_ctx_options_init(&co);
  co.backend = HJ_BACKEND_CPU;
  co.num_threads = 1;
  hj_ctx_t *ctx;
  if (hj_ctx_create(&co, &ctx) != HJ_OK) return sw_fail(NULL, "hj_ctx_create");
  hj_jit_param_t params[14];
  for (int i = 0; i < fn->nin; i++) params[i] = (hj_jit_param_t){ NULL, fn->decl[i] };
  hj_jit_options_t jo;
  hj_jit_options_init(&jo);
  jo.name = fn->name;
  jo.params = params;
  jo.nparams = fn->nin;
  hj_jit_t *jit;
  if (hj_jit_create(ctx, fn->build, NULL, &jo, &jit) != HJ_OK) return sw_fail(ctx, "hj_jit_create");
  hj_buffer_t *cache[2] = { NULL, NULL };   /* decode: the KV caches, fed back */
  for (int c = 0; decode && c < 2; c++)
    if (hj_buffer_create(ctx, HJ_F32, HJ_SHAPE(512, 8), &cache[c]) != HJ_OK) return sw_fail(ctx, "cache");
  int rc = 0;
  for (int n = 1; n <= N && rc == 0; n++) {
    sw_state = (uint64_t)n * 1000003u + (uint64_t)(fn - sw_fns);
    hj_buffer_t *in[14] = { NULL }, *out[3] = { NULL };
    for (int i = 0; i < fn->nin && rc == 0; i++) {
      bool idx = fn->build == sw_gather && i == 1;
      bool pos = decode && i == 3;
      if (decode && (i == 1 || i == 2)) {
        in[i] = cache[i - 1];
        continue;
      }
      hj_shape_t s = sw_at(fn->decl[i], n);
      int64_t cnt = hj_shape_numel(s);
      void *data = malloc(sizeof(float) * (size_t)(cnt ? cnt : 1));
      for (int64_t k = 0; k < cnt; k++) {
        if (idx) ((int32_t *)data)[k] = (int32_t)(sw_next() % (uint64_t)(n + 4)) - 2;
        else ((float *)data)[k] = (float)((double)(sw_next() >> 11) / 9007199254740992.0 * 2.0 - 1.0);
      }
      if (pos) *(int32_t *)data = n - 1;
      if (hj_buffer_from_host(ctx, idx || pos ? HJ_S32 : HJ_F32, s, data, &in[i]) != HJ_OK) rc = sw_fail(ctx, "input");
      free(data);
    }
    if (rc == 0 && hj_jit_call(jit, in, fn->nin, out, fn->nout) != HJ_OK) rc = sw_fail(ctx, "hj_jit_call");
    for (int i = 0; i < fn->nin && rc == 0; i++)
      if (!decode || i == 0 || i == 3) rc = sw_write(f, in[i]);
    for (int o = 0; o < fn->nout && rc == 0; o++)
      if (!decode || o == 0) rc = sw_write(f, out[o]);
    for (int i = 0; i < fn->nin; i++)
      if (!decode || i == 0 || i == 3) hj_buffer_destroy(in[i]);
    if (decode && rc == 0) {
      hj_buffer_destroy(cache[0]);
      hj_buffer_destroy(cache[1]);
      cache[0] = out[1];
      cache[1] = out[2];
      hj_buffer_destroy(out[0]);
    } else {
      for (int o = 0; o < fn->nout; o++) hj_buffer_destroy(out[o]);
    }
  }
  if (fclose(f) != 0 && rc == 0) rc = sw_fail(NULL, "writing the output file");
  hj_jit_stats_t st;
  hj_jit_stats(jit, &st);
  printf("stats calls=%lld compiles=%lld memory_hits=%lld exact_compiles=%lld disk_hits=%lld trace_ms=%.1f "
         "compile_ms=%.1f\n", (long long)st.calls, (long long)st.compiles, (long long)st.memory_hits,
         (long long)st.exact_compiles, (long long)st.disk_hits, st.trace_ms, st.compile_ms);
  if (st.pad_note[0]) printf("pad_note %s\n", st.pad_note);
  hj_buffer_destroy(cache[0]);
  hj_buffer_destroy(cache[1]);
  hj_jit_destroy(jit);
  hj_ctx_destroy(ctx);
  return rc;
}
