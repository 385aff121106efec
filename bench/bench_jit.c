/* bench_jit.c — the tracing JIT's latencies (issue 11): cold compile, memory hit, and what a
   hit costs over running the executable directly; for a tiny function, a GPT-2 block and a
   12-layer GPT-2 forward (124M shapes), CPU backend, 1 thread.

   // T sequence (dynamic, HJ_DYN(1024)), C 768 channels, H 12 heads of D 64, V 50257 vocab
   Sections:
     overhead   f(x) = x + 1 on f32[T]: hj_jit_call at T = 1024 (its bucket: no copy) and at
                T = 1000 (padded copy in, output cut back without a copy), against
                hj_exec_run of the same graph compiled statically at f32[1024], alternating
                rounds, best per-call time of each. overhead = jit - exec (goal < 20 us).
     block      the GPT-2 block of bench_block.c written as a jit build function (x (<=T, C)
                and 12 weights): the cold first call (compile time and its parts: passes,
                LLVM IR emission, O3, machine code), then hits at T = 64 (= its bucket) and
                T = 50 (bucket 64: padded), against hj_exec_run of the block compiled
                statically at T = 64.
     gpt2       the whole forward: ids (<=T) -> wte + wpe, 12 blocks, ln_f, logits (T, V)
                with wte transposed; random weights (~124M floats); cold compile and its
                parts, then hits at T = 64 and 50.
     disk hit   for the block and the forward: a second context (a new LLVM JIT, as in a new
                process) with the same cache directory makes its first call: its code comes
                from the disk cache. Goal: cold / disk hit >= 20.
   Each section starts from an empty cache directory (under /tmp, removed afterwards), so
   the cold call really compiles. The cold compile's parts come from hj_jit_stats (summed
   hj_exec_stats of the compiles).
   Checks: outputs finite, one compile per bucket, the disk-hit call's code from disk and its
   output bit-identical to the cold call's. Exit status 1 if a check fails. */
#define _GNU_SOURCE
#include "hlojit.h"
#include "bench_util.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BJ_C = 768, BJ_H = 12, BJ_D = 64, BJ_V = 50257, BJ_L = 12, BJ_TMAX = 1024, BJ_NW = 12 };

static int bj_fails;

static void bj_check(bool ok, const char *what) {
  if (!ok) {
    printf("CHECK FAILED: %s\n", what);
    bj_fails++;
  }
}

static hj_buffer_t *bj_random(hj_ctx_t *ctx, hj_shape_t s, float lo, float hi, uint32_t seed) {
  int64_t n = hj_shape_numel(s);
  hj_buffer_t *b = NULL;
  if (hj_buffer_create(ctx, HJ_F32, s, &b) != HJ_OK) return NULL;
  float *d = hj_buffer_host_ptr(b);
  uint32_t r = seed * 2654435761u + 1;
  for (int64_t i = 0; i < n; i++) {
    r = r * 1664525u + 1013904223u;
    d[i] = lo + (hi - lo) * (float)(r >> 8) / 16777216.0f;
  }
  return b;
}

/* ---- the GPT-2 block and forward as build functions -------------------------------------- */

static hj_shape_t bj_w_shape(int i) {   /* ln1 g b, attn W b, proj W b, ln2 g b, fc W b, fcproj W b */
  switch (i) {
  case 2: return HJ_SHAPE(BJ_C, 3 * BJ_C);
  case 3: return HJ_SHAPE(3 * BJ_C);
  case 4: return HJ_SHAPE(BJ_C, BJ_C);
  case 8: return HJ_SHAPE(BJ_C, 4 * BJ_C);
  case 9: return HJ_SHAPE(4 * BJ_C);
  case 10: return HJ_SHAPE(4 * BJ_C, BJ_C);
  default: return HJ_SHAPE(BJ_C);
  }
}

static hj_tensor_t bj_heads(hj_tensor_t t, const int64_t *perm) {
  return hj_transpose(hj_reshape(t, HJ_SHAPE(-1, BJ_H, BJ_D)), perm, 3);   // (H, T, D) or (H, D, T)
}

/* x (<=Tb, C) through one block with weights w[0..11]. */
static hj_tensor_t bj_block(hj_graph_t *g, hj_tensor_t x, const hj_tensor_t *w) {
  int64_t Tb = llabs(hj_tensor_shape(x).dims[0]);   /* the bucket (negative: bounded) */
  hj_tensor_t h = hj_layer_norm(x, w[0], w[1], 1e-5);
  hj_tensor_t qkv = hj_add(hj_matmul(h, w[2]), w[3]), s[3];                 // (T, 3C)
  const int64_t sizes[3] = { BJ_C, BJ_C, BJ_C };
  if (hj_unpack(hj_split(qkv, 1, sizes, 3), s, 3) != HJ_OK) return HJ_NONE;
  static const int64_t hd[3] = { 1, 0, 2 }, kt[3] = { 1, 2, 0 };
  hj_tensor_t q = bj_heads(s[0], hd), k = bj_heads(s[1], kt), v = bj_heads(s[2], hd);
  hj_tensor_t att = hj_mul(hj_matmul(q, k), hj_scalar(g, HJ_F32, 1.0 / sqrt((double)BJ_D)));   // (H, T, T)
  att = hj_softmax(hj_select(hj_causal_mask(g, Tb), att, hj_scalar(g, HJ_F32, -INFINITY)), 2);
  hj_tensor_t y = hj_reshape(hj_transpose(hj_matmul(att, v), hd, 3), HJ_SHAPE(-1, BJ_C));     // (T, C)
  hj_tensor_t x1 = hj_add(x, hj_add(hj_matmul(y, w[4]), w[5]));
  hj_tensor_t f = hj_gelu_tanh(hj_add(hj_matmul(hj_layer_norm(x1, w[6], w[7], 1e-5), w[8]), w[9]));
  return hj_add(x1, hj_add(hj_matmul(f, w[10]), w[11]));
}

static hj_status bj_build_block(hj_graph_t *g, const hj_tensor_t *p, int n, void *u) {
  return hj_graph_output(g, bj_block(g, p[0], p + 1));
}

/* ids (<=T), wte (V, C), wpe (TMAX, C), 12 x 12 block weights, ln_f g b -> logits (T, V) */
static hj_status bj_build_gpt2(hj_graph_t *g, const hj_tensor_t *p, int n, void *u) {
  int64_t Tb = llabs(hj_tensor_shape(p[0]).dims[0]);
  int64_t start[2] = { 0, 0 }, limit[2] = { Tb, BJ_C }, perm[2] = { 1, 0 };
  hj_tensor_t x = hj_add(hj_embedding(p[1], p[0]), hj_slice(p[2], start, limit, NULL));   // (T, C)
  for (int l = 0; l < BJ_L; l++) x = bj_block(g, x, p + 3 + BJ_NW * l);
  const hj_tensor_t *lnf = p + 3 + BJ_NW * BJ_L;
  x = hj_layer_norm(x, lnf[0], lnf[1], 1e-5);
  return hj_graph_output(g, hj_matmul(x, hj_transpose(p[1], perm, 2)));   // (T, V)
}

/* ---- timing helpers ------------------------------------------------------------------------ */

/* Best seconds per call of hj_jit_call over |reps| calls, outputs destroyed each time. */
static double bj_time_jit(hj_ctx_t *ctx, hj_jit_t *j, hj_buffer_t **in, int nin, int reps) {
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    hj_buffer_t *out[1] = { NULL };
    double t0 = bench_now();
    hj_status st = hj_jit_call(j, in, nin, out, 1);
    double t = bench_now() - t0;
    if (st != HJ_OK) {
      printf("hj_jit_call: %s\n", hj_ctx_error(ctx));
      bj_fails++;
      return NAN;
    }
    hj_buffer_destroy(out[0]);
    if (t < best) best = t;
  }
  return best;
}

static double bj_time_exec(hj_ctx_t *ctx, hj_exec_t *e, hj_buffer_t **in, int nin, int reps) {
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    hj_buffer_t *out[1] = { NULL };
    double t0 = bench_now();
    hj_status st = hj_exec_run(e, in, nin, out, 1);
    double t = bench_now() - t0;
    if (st != HJ_OK) {
      printf("hj_exec_run: %s\n", hj_ctx_error(ctx));
      bj_fails++;
      return NAN;
    }
    hj_buffer_destroy(out[0]);
    if (t < best) best = t;
  }
  return best;
}

static hj_jit_t *bj_jit(hj_ctx_t *ctx, const char *name, hj_jit_build_fn fn, hj_jit_param_t *p, int n) {
  hj_jit_options_t o;
  hj_jit_options_init(&o);
  o.name = name;
  o.params = p;
  o.nparams = n;
  hj_jit_t *j = NULL;
  if (hj_jit_create(ctx, fn, NULL, &o, &j) != HJ_OK) printf("hj_jit_create: %s\n", hj_ctx_error(ctx));
  return j;
}

/* Prints the cold first call; returns its trace + compile ms. */
static double bj_print_cold(const char *what, hj_jit_t *j, double wall_ms) {
  hj_jit_stats_t s;
  hj_jit_stats(j, &s);
  double other = s.compile_ms - s.passes_ms - s.emit_ms - s.optimize_ms - s.codegen_ms;
  printf("%-8s cold first call %9.1f ms: trace %.1f, compile %.1f = passes %.1f + emit %.1f + O3 %.1f + "
         "machine code %.1f + other %.1f\n", what, wall_ms, s.trace_ms, s.compile_ms, s.passes_ms, s.emit_ms,
         s.optimize_ms, s.codegen_ms, other);
  return s.trace_ms + s.compile_ms;
}

/* The two disk-hit ratios: of the first calls (each also runs the function once) and of
   their trace + compile parts (the goal: what the cache saves). */
static void bj_print_disk(const char *what, double cold, double disk, double cold_c, double disk_c) {
  printf("%-8s disk hit (new context, same cache dir): first call %.1f ms, cold / disk hit %.0fx; trace + compile "
         "%.1f ms against %.1f ms cold: %.0fx (goal >= 20: %s)\n", what, disk, cold / disk, disk_c, cold_c,
         cold_c / disk_c, cold_c / disk_c >= 20 ? "met" : "NOT met");
}

static bool bj_finite(hj_buffer_t *b) {
  const float *d = hj_buffer_host_ptr(b);
  size_t n = hj_buffer_nbytes(b) / sizeof(float);
  for (size_t i = 0; i < n; i++)
    if (!isfinite(d[i])) return false;
  return true;
}

static hj_ctx_t *bj_ctx(const char *cache_dir) {
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  o.backend = HJ_BACKEND_CPU;
  o.num_threads = 1;
  o.cache_dir = cache_dir;
  hj_ctx_t *ctx = NULL;
  if (hj_ctx_create(&o, &ctx) != HJ_OK) return NULL;
  return ctx;
}

/* The first call of |fn| in a fresh context on cache directory |dir| (as a second process
   would make it): its ms; checks that the code came from disk and the output equals |ref|. */
/* The first call of |name| in a new context over the cache |dir|: its wall ms, and in
   *compile_ms the JIT's trace + compile part of it (what the cache can save; the run is
   the same either way). */
static double bj_disk_hit(const char *dir, const char *name, hj_jit_build_fn fn, hj_jit_param_t *p, int n,
                          hj_buffer_t **in, hj_buffer_t *ref, double *compile_ms) {
  hj_ctx_t *ctx = bj_ctx(dir);
  hj_jit_t *j = ctx ? bj_jit(ctx, name, fn, p, n) : NULL;
  hj_buffer_t *out[1] = { NULL };
  double t0 = bench_now();
  hj_status st = j ? hj_jit_call(j, in, n, out, 1) : HJ_ERR_INVALID_ARG;
  double ms = 1e3 * (bench_now() - t0);
  hj_jit_stats_t s = { 0 };
  if (j) hj_jit_stats(j, &s);
  *compile_ms = s.trace_ms + s.compile_ms;
  bj_check(st == HJ_OK && s.disk_hits == 1, "disk hit: the code came from the disk cache");
  printf("%-8s disk hit: trace %.1f, compile %.1f = passes %.1f + emit %.1f + O3 %.1f + load and link %.1f + other %.1f "
         "(the first compile of a context also starts its LLVM JIT)\n", name, s.trace_ms, s.compile_ms, s.passes_ms,
         s.emit_ms, s.optimize_ms, s.codegen_ms, s.compile_ms - s.passes_ms - s.emit_ms - s.optimize_ms - s.codegen_ms);
  bj_check(st == HJ_OK && hj_buffer_nbytes(out[0]) == hj_buffer_nbytes(ref) &&
           memcmp(hj_buffer_host_ptr(out[0]), hj_buffer_host_ptr(ref), hj_buffer_nbytes(ref)) == 0,
           "disk hit: the same bits as the cold call");
  hj_buffer_destroy(out[0]);
  hj_jit_destroy(j);
  hj_ctx_destroy(ctx);
  return ms;
}

/* ---- sections ------------------------------------------------------------------------------- */

static hj_status bj_add1(hj_graph_t *g, const hj_tensor_t *p, int n, void *u) {
  return hj_graph_output(g, hj_add(p[0], hj_scalar(g, HJ_F32, 1)));
}

static void bj_overhead(hj_ctx_t *ctx) {
  hj_jit_param_t p[1] = { { "x", HJ_SHAPE(HJ_DYN(1024)) } };
  hj_jit_t *j = bj_jit(ctx, "add1", bj_add1, p, 1);
  hj_graph_t *g = NULL;
  hj_exec_t *e = NULL;
  hj_graph_create(ctx, "add1_static", &g);
  hj_graph_output(g, hj_add(hj_param(g, HJ_F32, HJ_SHAPE(1024), "x"), hj_scalar(g, HJ_F32, 1)));
  if (!j || hj_compile(g, &e) != HJ_OK) {
    printf("overhead: setup failed: %s\n", hj_ctx_error(ctx));
    bj_fails++;
    return;
  }
  hj_buffer_t *x1024 = bj_random(ctx, HJ_SHAPE(1024), -1, 1, 1), *x1000 = bj_random(ctx, HJ_SHAPE(1000), -1, 1, 2);
  bj_time_jit(ctx, j, &x1024, 1, 1);   /* compile both buckets (the same one) */
  double tj = 1e30, tp = 1e30, te = 1e30;
  for (int round = 0; round < 20; round++) {
    tj = fmin(tj, bj_time_jit(ctx, j, &x1024, 1, 200));
    tp = fmin(tp, bj_time_jit(ctx, j, &x1000, 1, 200));
    te = fmin(te, bj_time_exec(ctx, e, &x1024, 1, 200));
  }
  hj_jit_stats_t s;
  hj_jit_stats(j, &s);
  bj_check(s.compiles == 1, "add1: one compile for T = 1024 and 1000");
  printf("overhead add1 f32[T]: exec %.2f us; jit hit T=1024 %.2f us (overhead %.2f us); T=1000 padded %.2f us "
         "(overhead %.2f us); goal < 20 us: %s\n", 1e6 * te, 1e6 * tj, 1e6 * (tj - te), 1e6 * tp, 1e6 * (tp - te),
         1e6 * (tp - te) < 20 && 1e6 * (tj - te) < 20 ? "met" : "NOT met");
  hj_buffer_destroy(x1024);
  hj_buffer_destroy(x1000);
  hj_exec_destroy(e);
  hj_graph_destroy(g);
  hj_jit_destroy(j);
}

static void bj_section_block(const char *dir) {
  hj_ctx_t *ctx = bj_ctx(dir);
  hj_jit_param_t p[1 + BJ_NW] = { { "x", HJ_SHAPE(HJ_DYN(BJ_TMAX), BJ_C) } };
  for (int i = 0; i < BJ_NW; i++) p[1 + i] = (hj_jit_param_t){ NULL, bj_w_shape(i) };
  hj_jit_t *j = bj_jit(ctx, "gpt2_block", bj_build_block, p, 1 + BJ_NW);
  hj_buffer_t *in[1 + BJ_NW], *in50[1 + BJ_NW];
  in[0] = bj_random(ctx, HJ_SHAPE(64, BJ_C), -1, 1, 7);
  for (int i = 0; i < BJ_NW; i++) {
    bool gain = i == 0 || i == 6;
    in[1 + i] = gain ? bj_random(ctx, bj_w_shape(i), 0.9f, 1.1f, 10 + i) : bj_random(ctx, bj_w_shape(i), -0.04f, 0.04f, 10 + i);
    in50[1 + i] = in[1 + i];
  }
  in50[0] = bj_random(ctx, HJ_SHAPE(50, BJ_C), -1, 1, 8);
  /* the same block compiled statically at T = 64, for the direct run */
  hj_graph_t *g = NULL;
  hj_exec_t *e = NULL;
  hj_graph_create(ctx, "gpt2_block_static", &g);
  hj_tensor_t sp[1 + BJ_NW];
  sp[0] = hj_param(g, HJ_F32, HJ_SHAPE(HJ_DYN(64), BJ_C), "x");   /* bound 64 = T: runs at it */
  for (int i = 0; i < BJ_NW; i++) sp[1 + i] = hj_param(g, HJ_F32, bj_w_shape(i), "w");
  hj_graph_output(g, bj_block(g, sp[0], sp + 1));
  hj_status cst = hj_compile(g, &e);
  double t0 = bench_now();
  hj_buffer_t *out[1] = { NULL };
  hj_status st = j ? hj_jit_call(j, in, 1 + BJ_NW, out, 1) : HJ_ERR_INVALID_ARG;
  double cold = 1e3 * (bench_now() - t0);
  if (st != HJ_OK || cst != HJ_OK) {
    printf("block: %s\n", hj_ctx_error(ctx));
    bj_fails++;
    return;
  }
  bj_check(bj_finite(out[0]), "block output finite");
  double cold_c = bj_print_cold("block", j, cold), disk_c = 0;
  double disk = bj_disk_hit(dir, "gpt2_block", bj_build_block, p, 1 + BJ_NW, in, out[0], &disk_c);
  hj_buffer_destroy(out[0]);
  bj_print_disk("block", cold, disk, cold_c, disk_c);
  double tj = 1e30, tp = 1e30, te = 1e30;
  for (int round = 0; round < 5; round++) {
    tj = fmin(tj, bj_time_jit(ctx, j, in, 1 + BJ_NW, 3));
    tp = fmin(tp, bj_time_jit(ctx, j, in50, 1 + BJ_NW, 3));
    te = fmin(te, bj_time_exec(ctx, e, in, 1 + BJ_NW, 3));
  }
  hj_jit_stats_t s;
  hj_jit_stats(j, &s);
  bj_check(s.compiles == 1, "block: one compile for T = 64 and 50");
  printf("block    hit T=64 %.3f ms, T=50 (bucket 64) %.3f ms; static exec T=64 %.3f ms; hit / exec %.3f; "
         "cold / hit %.0fx\n", 1e3 * tj, 1e3 * tp, 1e3 * te, tj / te, cold / (1e3 * tj));
  hj_buffer_destroy(in[0]);
  hj_buffer_destroy(in50[0]);
  for (int i = 0; i < BJ_NW; i++) hj_buffer_destroy(in[1 + i]);
  hj_exec_destroy(e);
  hj_graph_destroy(g);
  hj_jit_destroy(j);
  hj_ctx_destroy(ctx);
}

static void bj_section_gpt2(const char *dir) {
  hj_ctx_t *ctx = bj_ctx(dir);
  enum { NP = 3 + BJ_NW * BJ_L + 2 };
  hj_jit_param_t p[NP];
  p[0] = (hj_jit_param_t){ "ids", HJ_SHAPE(HJ_DYN(BJ_TMAX)) };
  p[1] = (hj_jit_param_t){ "wte", HJ_SHAPE(BJ_V, BJ_C) };
  p[2] = (hj_jit_param_t){ "wpe", HJ_SHAPE(BJ_TMAX, BJ_C) };
  for (int l = 0; l < BJ_L; l++)
    for (int i = 0; i < BJ_NW; i++) p[3 + BJ_NW * l + i] = (hj_jit_param_t){ NULL, bj_w_shape(i) };
  p[NP - 2] = p[NP - 1] = (hj_jit_param_t){ "ln_f", HJ_SHAPE(BJ_C) };
  hj_jit_t *j = bj_jit(ctx, "gpt2_124M", bj_build_gpt2, p, NP);
  hj_buffer_t *in[NP], *in50[NP];
  int64_t nweights = 0;
  for (int i = 1; i < NP; i++) {
    int w = i >= 3 && i < NP - 2 ? (i - 3) % BJ_NW : -1;
    bool gain = w == 0 || w == 6 || i == NP - 2;
    in[i] = gain ? bj_random(ctx, p[i].shape, 0.9f, 1.1f, (uint32_t)i) : bj_random(ctx, p[i].shape, -0.04f, 0.04f, (uint32_t)i);
    in50[i] = in[i];
    nweights += hj_shape_numel(p[i].shape);
  }
  int32_t ids[64];
  for (int t = 0; t < 64; t++) ids[t] = (t * 7919) % BJ_V;
  hj_buffer_from_host(ctx, HJ_S32, HJ_SHAPE(64), ids, &in[0]);
  hj_buffer_from_host(ctx, HJ_S32, HJ_SHAPE(50), ids, &in50[0]);
  printf("gpt2     %lld weights (%.0f MiB)\n", (long long)nweights, nweights * 4.0 / (1 << 20));
  double t0 = bench_now();
  hj_buffer_t *out[1] = { NULL };
  hj_status st = j ? hj_jit_call(j, in, NP, out, 1) : HJ_ERR_INVALID_ARG;
  double cold = 1e3 * (bench_now() - t0);
  if (st != HJ_OK) {
    printf("gpt2: %s\n", hj_ctx_error(ctx));
    bj_fails++;
    return;
  }
  bj_check(hj_buffer_shape(out[0]).dims[0] == 64 && hj_buffer_shape(out[0]).dims[1] == BJ_V, "gpt2 logits (64, V)");
  bj_check(bj_finite(out[0]), "gpt2 logits finite");
  double cold_c = bj_print_cold("gpt2", j, cold), disk_c = 0;
  double disk = bj_disk_hit(dir, "gpt2_124M", bj_build_gpt2, p, NP, in, out[0], &disk_c);
  hj_buffer_destroy(out[0]);
  bj_print_disk("gpt2", cold, disk, cold_c, disk_c);
  double tj = 1e30, tp = 1e30;
  for (int round = 0; round < 3; round++) {
    tj = fmin(tj, bj_time_jit(ctx, j, in, NP, 1));
    tp = fmin(tp, bj_time_jit(ctx, j, in50, NP, 1));
  }
  hj_jit_stats_t s;
  hj_jit_stats(j, &s);
  bj_check(s.compiles == 1, "gpt2: one compile for T = 64 and 50");
  printf("gpt2     hit T=64 %.1f ms, T=50 (bucket 64) %.1f ms; cold / hit %.0fx\n", 1e3 * tj, 1e3 * tp,
         cold / (1e3 * tj));
  hj_buffer_destroy(in[0]);
  hj_buffer_destroy(in50[0]);
  for (int i = 1; i < NP; i++) hj_buffer_destroy(in[i]);
  hj_jit_destroy(j);
  hj_ctx_destroy(ctx);
}

int main(int argc, char **argv) {
  bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;   /* no 12-layer forward */
  bench_load load = bench_load_now();
  char root[] = "/tmp/hlojit_bench_jit_XXXXXX", dir[64];
  if (!mkdtemp(root)) return 1;
  hj_ctx_t *ctx = bj_ctx("off");
  if (!ctx) return 1;
  bj_overhead(ctx);
  hj_ctx_destroy(ctx);
  snprintf(dir, sizeof dir, "%s/block", root);
  bj_section_block(dir);
  snprintf(dir, sizeof dir, "%s/gpt2", root);
  if (!quick) bj_section_gpt2(dir);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  if (system(cmd) != 0) printf("could not remove %s\n", root);
  bench_load_report(load);
  if (bj_fails) printf("bench_jit: %d check(s) FAILED\n", bj_fails);
  return bj_fails ? 1 : 0;
}
