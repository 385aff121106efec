/* bench_block.c — what fusion buys on a GPT-2 transformer block (CPU backend).

   The block (GPT-2 small: C = 768, 12 heads of 64, MLP 4C; B = 1, T = 64 and 256), built
   with the C API on x f32[T, C] and random weights (13 parameters):
     h   = layer_norm(x; g1, b1)                      qkv = h @ W_attn + b_attn  [T, 3C]
     q, k, v = split(qkv) -> [12, T, 64] (k as [12, 64, T])
     att = softmax(select(causal_mask, (q @ k) * 1/8, -inf))      y = att @ v  [12, T, 64]
     x1  = x + (y as [T, C]) @ W_proj + b_proj
     out = x1 + gelu_tanh(layer_norm(x1; g2, b2) @ W_fc + b_fc) @ W_fcproj + b_fcproj
   Compiled twice with HJ_BACKEND_CPU: fused (the pass pipeline as is) and unfused
   (hj_ctx_options.no_fusion: every op its own kernel), each with 1 and 2 threads (the pool
   size is a context option: one context per variant and thread count).

   Printed per T and variant, from hj_exec_stats: kernels by kind, evaluator fallbacks,
   bytes moved per run (the input and output buffers of every kernel/matmul/evaluator/copy
   thunk: what the block's kernels read and write, at least once), arena bytes, compile ms;
   and the best time per run over alternating rounds (fused and unfused take turns, rounds
   of >= 0.2 s: the machine may be shared). Speed-up = unfused time / fused time (goal,
   issue 4: >= 1.5). To show where the time goes, the block's six matmuls are also timed
   alone (one graph, same shapes, own inputs): block time - matmul time is the part fusion
   can shorten, and unfused / matmuls bounds the speed-up fusion can give. Checks: fused and unfused outputs agree within 1e-4 relative
   (max |diff| / max |ref|), and at T = 64 both agree with the reference evaluator
   (HJ_BACKEND_INTERP) within the same bound. Exit status 1 if a check fails. */
#define _GNU_SOURCE
#include "hlojit.h"
#include "bench_util.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>

enum { BB_C = 768, BB_H = 12, BB_D = 64, BB_NIN = 13 };


/* Parameter shapes, in graph order. */
static hj_shape_t bb_in_shape(int i, int64_t T) {
  switch (i) {
  case 0: return HJ_SHAPE(T, BB_C);
  case 3: return HJ_SHAPE(BB_C, 3 * BB_C);
  case 4: return HJ_SHAPE(3 * BB_C);
  case 5: return HJ_SHAPE(BB_C, BB_C);
  case 9: return HJ_SHAPE(BB_C, 4 * BB_C);
  case 10: return HJ_SHAPE(4 * BB_C);
  case 11: return HJ_SHAPE(4 * BB_C, BB_C);
  default: return HJ_SHAPE(BB_C);   /* layer-norm gains and biases, biases of C */
  }
}

static hj_tensor_t bb_heads(hj_tensor_t t, int64_t T, const int64_t *perm) {
  return hj_transpose(hj_reshape(t, HJ_SHAPE(T, BB_H, BB_D)), perm, 3);
}

static hj_status bb_build(hj_ctx_t *ctx, int64_t T, hj_graph_t **out) {
  static const char *names[BB_NIN] = { "x", "ln1_g", "ln1_b", "w_attn", "b_attn", "w_proj", "b_proj",
                                       "ln2_g", "ln2_b", "w_fc", "b_fc", "w_fcproj", "b_fcproj" };
  hj_graph_t *g = NULL;
  hj_status st = hj_graph_create(ctx, "gpt2_block", &g);
  if (st) return st;
  hj_tensor_t p[BB_NIN];
  for (int i = 0; i < BB_NIN; i++) p[i] = hj_param(g, HJ_F32, bb_in_shape(i, T), names[i]);
  hj_tensor_t x = p[0];
  hj_tensor_t h = hj_layer_norm(x, p[1], p[2], 1e-5);
  hj_tensor_t qkv = hj_add(hj_matmul(h, p[3]), p[4]);
  hj_tensor_t s[3];
  const int64_t sizes[3] = { BB_C, BB_C, BB_C };
  if ((st = hj_unpack(hj_split(qkv, 1, sizes, 3), s, 3))) goto fail;
  static const int64_t hd[3] = { 1, 0, 2 }, kt[3] = { 1, 2, 0 };
  hj_tensor_t q = bb_heads(s[0], T, hd), k = bb_heads(s[1], T, kt), v = bb_heads(s[2], T, hd);
  hj_tensor_t att = hj_mul(hj_matmul(q, k), hj_scalar(g, HJ_F32, 1.0 / sqrt((double)BB_D)));
  att = hj_select(hj_causal_mask(g, T), att, hj_scalar(g, HJ_F32, -INFINITY));
  att = hj_softmax(att, 2);
  hj_tensor_t y = hj_reshape(hj_transpose(hj_matmul(att, v), hd, 3), HJ_SHAPE(T, BB_C));
  hj_tensor_t x1 = hj_add(x, hj_add(hj_matmul(y, p[5]), p[6]));
  hj_tensor_t f = hj_gelu_tanh(hj_add(hj_matmul(hj_layer_norm(x1, p[7], p[8], 1e-5), p[9]), p[10]));
  hj_tensor_t o = hj_add(x1, hj_add(hj_matmul(f, p[11]), p[12]));
  if ((st = hj_graph_output(g, o)) == HJ_OK) {
    *out = g;
    return HJ_OK;
  }
fail:
  hj_graph_destroy(g);
  return st;
}

/* The block's six matmuls alone, each on its own parameters (same shapes, no epilogues,
   no layer norm, softmax, transposes): the time no fusion can remove. */
enum { BB_MM_NIN = 12 };
static hj_shape_t bb_mm_shape(int i, int64_t T) {
  static const int64_t kn[6][2] = { { BB_C, 3 * BB_C }, { 0, 0 }, { 0, 0 }, { BB_C, BB_C },
                                    { BB_C, 4 * BB_C }, { 4 * BB_C, BB_C } };
  int m = i / 2;
  if (m == 1) return i % 2 ? HJ_SHAPE(BB_H, BB_D, T) : HJ_SHAPE(BB_H, T, BB_D);   /* q @ k */
  if (m == 2) return i % 2 ? HJ_SHAPE(BB_H, T, BB_D) : HJ_SHAPE(BB_H, T, T);      /* att @ v */
  return i % 2 ? HJ_SHAPE(kn[m][0], kn[m][1]) : HJ_SHAPE(T, kn[m][0]);
}

static hj_status bb_build_mm(hj_ctx_t *ctx, int64_t T, hj_graph_t **out) {
  hj_graph_t *g = NULL;
  hj_status st = hj_graph_create(ctx, "gpt2_block_matmuls", &g);
  for (int m = 0; m < 6 && !st; m++) {   /* parameters in order (argument order is unspecified) */
    hj_tensor_t a = hj_param(g, HJ_F32, bb_mm_shape(2 * m, T), "a");
    hj_tensor_t b = hj_param(g, HJ_F32, bb_mm_shape(2 * m + 1, T), "b");
    st = hj_graph_output(g, hj_matmul(a, b));
  }
  if (st) hj_graph_destroy(g);
  else *out = g;
  return st;
}

/* Random inputs like GPT-2's: x ~ U(-1, 1), weights ~ U(-0.04, 0.04) (std ~0.02), layer-norm
   gains 1 + U(-0.1, 0.1), biases U(-0.02, 0.02). */
static hj_status bb_inputs(hj_ctx_t *ctx, int64_t T, hj_buffer_t **in) {
  uint32_t r = 2024u + (uint32_t)T;
  for (int i = 0; i < BB_NIN; i++) {
    hj_shape_t s = bb_in_shape(i, T);
    int64_t n = hj_shape_numel(s);
    float *d = malloc((size_t)n * sizeof *d);
    if (!d) return HJ_ERR_OOM;
    bool gain = i == 1 || i == 7, weight = s.rank == 2 && i != 0;
    double scale = i == 0 ? 1.0 : weight ? 0.04 : gain ? 0.1 : 0.02;
    for (int64_t j = 0; j < n; j++) {
      r = r * 1664525u + 1013904223u;
      double u = (double)(r >> 8) / (1 << 24) * 2.0 - 1.0;
      d[j] = (float)((gain ? 1.0 : 0.0) + scale * u);
    }
    hj_status st = hj_buffer_from_host(ctx, HJ_F32, s, d, &in[i]);
    free(d);
    if (st) return st;
  }
  return HJ_OK;
}

typedef struct bb_exe {
  hj_exec_t *e;
  hj_graph_t *g;
  hj_buffer_t **in, *out, *outs[6];   /* outs: the matmul-only graph's six results */
  int nin, nout;
  hj_exec_stats_t s;
  int err;
} bb_exe;

static void bb_run(bb_exe *x) {
  if (hj_exec_run(x->e, x->in, x->nin, x->nout == 1 ? &x->out : x->outs, x->nout) != HJ_OK) x->err = 1;
}

static double bb_best(bb_exe *x, double secs) {
  double best = 1e30, start = bench_now();
  for (int r = 0; r < 2 || bench_now() - start < secs; r++) {
    double t0 = bench_now();
    bb_run(x);
    double t = bench_now() - t0;
    if (t < best) best = t;
  }
  return best;
}

/* max |a - b| / max |b| */
static double bb_rel(const hj_buffer_t *a, const hj_buffer_t *b) {
  const float *p = hj_buffer_host_ptr((hj_buffer_t *)a), *q = hj_buffer_host_ptr((hj_buffer_t *)b);
  int64_t n = (int64_t)(hj_buffer_nbytes(a) / 4);
  double md = 0, mr = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)p[i] - q[i]);
    if (!(d <= md)) md = d;   /* NaN counts as a mismatch */
    if (fabs(q[i]) > mr) mr = fabs(q[i]);
  }
  return mr > 0 ? md / mr : md;
}

static int bb_kernels(const hj_exec_stats_t *s) {
  return s->kernels_loop + s->kernels_reduction + s->kernels_transpose + s->kernels_matmul + s->kernels_dus;
}

static hj_status bb_compile(hj_ctx_t *ctx, int64_t T, hj_buffer_t **in, bb_exe *x) {
  hj_status st = bb_build(ctx, T, &x->g);
  if (!st) st = hj_compile(x->g, &x->e);
  if (!st) st = hj_buffer_create(ctx, HJ_F32, HJ_SHAPE(T, BB_C), &x->out);
  if (st) {
    fprintf(stderr, "bench_block: T=%lld: %s: %s\n", (long long)T, hj_status_name(st), hj_ctx_error(ctx));
    return st;
  }
  x->in = in;
  x->nin = BB_NIN, x->nout = 1;
  hj_exec_stats(x->e, &x->s);
  return HJ_OK;
}

/* The matmul-only graph with its own inputs (outputs made by the first run). */
static hj_status bb_compile_mm(hj_ctx_t *ctx, int64_t T, hj_buffer_t **in, bb_exe *x) {
  hj_status st = bb_build_mm(ctx, T, &x->g);
  if (!st) st = hj_compile(x->g, &x->e);
  for (int i = 0; i < BB_MM_NIN && !st; i++) st = hj_buffer_create(ctx, HJ_F32, bb_mm_shape(i, T), &in[i]);
  if (st) {
    fprintf(stderr, "bench_block: matmuls T=%lld: %s: %s\n", (long long)T, hj_status_name(st), hj_ctx_error(ctx));
    return st;
  }
  x->in = in;
  x->nin = BB_MM_NIN, x->nout = 6;
  hj_exec_stats(x->e, &x->s);
  return HJ_OK;
}

static void bb_free(bb_exe *x) {
  for (int i = 0; i < 6; i++) hj_buffer_destroy(x->outs[i]);
  hj_buffer_destroy(x->out);
  hj_exec_destroy(x->e);
  hj_graph_destroy(x->g);
}

int main(void) {
  bench_load load0 = bench_load_now();
  static const int64_t Ts[] = { 64, 256 };
  static const int threads[] = { 1, 2 };
  hj_ctx_t *ctx[2][2] = { { 0 } };   /* [fused?0:1][thread index] */
  hj_ctx_t *ref_ctx = NULL;
  for (int v = 0; v < 2; v++)
    for (int t = 0; t < 2; t++) {
      hj_ctx_options_t o;
      hj_ctx_options_init(&o);
      o.backend = HJ_BACKEND_CPU;
      o.num_threads = threads[t];
      o.no_fusion = v == 1;
      if (hj_ctx_create(&o, &ctx[v][t])) return 1;
    }
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  o.backend = HJ_BACKEND_INTERP;
  if (hj_ctx_create(&o, &ref_ctx)) return 1;
  int bad = 0;
  printf("GPT-2 block (C=768, 12 heads, MLP 3072, B=1), HJ_BACKEND_CPU, fused vs no_fusion, same run\n");
  printf("\n%4s %-8s | %7s %-22s %4s | %9s %9s | %8s | %9s %9s\n", "T", "variant", "kernels",
         "(loop/red/tr/mm/dus)", "eval", "moved MiB", "arena MiB", "compile", "1 thr ms", "2 thr ms");
  struct { double speed[2], bytes, rel, ref_rel[2], mm[2], rest[2][2]; bool have_ref; } sum[2];
  char csplit[2][2][128];   /* compile time split, printed after the tables */
  for (int ti = 0; ti < 2; ti++) {
    int64_t T = Ts[ti];
    hj_buffer_t *in[BB_NIN] = { 0 };
    if (bb_inputs(ref_ctx, T, in)) return 1;
    bb_exe x[3][2];   /* fused, unfused, matmuls only */
    hj_buffer_t *mm_in[2][BB_MM_NIN];
    memset(x, 0, sizeof x);
    memset(mm_in, 0, sizeof mm_in);
    for (int v = 0; v < 2; v++)
      for (int t = 0; t < 2; t++)
        if (bb_compile(ctx[v][t], T, in, &x[v][t])) return 1;
    for (int t = 0; t < 2; t++)
      if (bb_compile_mm(ctx[0][t], T, mm_in[t], &x[2][t])) return 1;
    double best[3][2];
    for (int t = 0; t < 2; t++) {
      for (int v = 0; v < 3; v++) bb_run(&x[v][t]);   /* warm-up: first touch of arenas, outputs */
      best[0][t] = best[1][t] = best[2][t] = 1e30;
      for (int round = 0; round < 3; round++)
        for (int v = 0; v < 3; v++) {
          double b = bb_best(&x[v][t], 0.2);
          if (b < best[v][t]) best[v][t] = b;
        }
    }
    for (int v = 0; v < 2; v++) {
      const hj_exec_stats_t *s = &x[v][0].s;
      snprintf(csplit[ti][v], sizeof csplit[ti][v], "%4lld %-8s | %8.1f = %6.1f + %6.1f + %6.1f + %6.1f",
               (long long)T, v ? "unfused" : "fused", s->compile_ms, s->passes_ms, s->emit_ms,
               s->optimize_ms, s->codegen_ms);
      char kinds[64];
      snprintf(kinds, sizeof kinds, "(%d/%d/%d/%d/%d)", s->kernels_loop, s->kernels_reduction,
               s->kernels_transpose, s->kernels_matmul, s->kernels_dus);
      printf("%4lld %-8s | %7d %-22s %4d | %9.2f %9.2f | %8.1f | %9.3f %9.3f%s\n", (long long)T,
             v ? "unfused" : "fused", bb_kernels(s), kinds, s->evaluator_fallbacks,
             (double)s->bytes_moved / 1048576.0, (double)s->arena_bytes / 1048576.0, s->compile_ms,
             best[v][0] * 1e3, best[v][1] * 1e3, x[v][0].err || x[v][1].err ? "  RUN FAILED" : "");
      bad |= x[v][0].err || x[v][1].err;
    }
    bad |= x[2][0].err || x[2][1].err;
    for (int t = 0; t < 2; t++) {
      sum[ti].speed[t] = best[1][t] / best[0][t];
      sum[ti].mm[t] = best[2][t];
      for (int v = 0; v < 2; v++) sum[ti].rest[v][t] = best[v][t] - best[2][t];
    }
    sum[ti].bytes = (double)x[1][0].s.bytes_moved / (double)x[0][0].s.bytes_moved;
    sum[ti].rel = bb_rel(x[0][0].out, x[1][0].out);
    bad |= !(sum[ti].rel <= 1e-4);
    for (int v = 0; v < 2; v++)   /* the thread count must not change the values */
      bad |= !(bb_rel(x[v][1].out, x[v][0].out) <= 1e-6);
    sum[ti].have_ref = T == 64;
    if (sum[ti].have_ref) {   /* the reference evaluator on the same graph and inputs */
      bb_exe r;
      memset(&r, 0, sizeof r);
      if (bb_compile(ref_ctx, T, in, &r)) return 1;
      bb_run(&r);
      for (int v = 0; v < 2; v++) {
        sum[ti].ref_rel[v] = r.err ? INFINITY : bb_rel(x[v][0].out, r.out);
        bad |= !(sum[ti].ref_rel[v] <= 1e-4);
      }
      bb_free(&r);
    }
    for (int v = 0; v < 3; v++)
      for (int t = 0; t < 2; t++) bb_free(&x[v][t]);
    for (int i = 0; i < BB_NIN; i++) hj_buffer_destroy(in[i]);
    for (int t = 0; t < 2; t++)
      for (int i = 0; i < BB_MM_NIN; i++) hj_buffer_destroy(mm_in[t][i]);
  }
  printf("\n%4s | %-24s | %-14s | %s\n", "T", "speed-up fused (1 / 2 thr)", "bytes unf/fus",
         "max rel diff fused vs unfused (vs evaluator: fused, unfused)");
  for (int ti = 0; ti < 2; ti++) {
    printf("%4lld | %10.2fx %10.2fx  | %13.2fx | %.2e", (long long)Ts[ti], sum[ti].speed[0],
           sum[ti].speed[1], sum[ti].bytes, sum[ti].rel);
    if (sum[ti].have_ref) printf("  (%.2e, %.2e)", sum[ti].ref_rel[0], sum[ti].ref_rel[1]);
    printf("%s\n", sum[ti].rel <= 1e-4 ? "" : "  MISMATCH");
  }
  printf("\nWhere the time goes: the six matmuls alone (same shapes, own inputs) vs the rest of\n"
         "the block (block time - matmul time), which is all that fusion can shorten.\n");
  printf("%4s | %-19s | %-27s | %-27s | %s\n", "T", "matmuls ms (1/2 thr)", "rest unfused ms (1/2 thr)",
         "rest fused ms (1/2 thr)", "bound on speed-up (1/2 thr)");
  for (int ti = 0; ti < 2; ti++)
    printf("%4lld | %8.3f %9.3f  | %12.3f %12.3f  | %12.3f %12.3f  | %8.2fx %8.2fx\n", (long long)Ts[ti],
           sum[ti].mm[0] * 1e3, sum[ti].mm[1] * 1e3, sum[ti].rest[1][0] * 1e3, sum[ti].rest[1][1] * 1e3,
           sum[ti].rest[0][0] * 1e3, sum[ti].rest[0][1] * 1e3,
           (sum[ti].mm[0] + sum[ti].rest[1][0]) / sum[ti].mm[0], (sum[ti].mm[1] + sum[ti].rest[1][1]) / sum[ti].mm[1]);
  printf("(bound = unfused / matmuls: the speed-up if fusion removed every non-matmul cost)\n");
  printf("\ncompile ms (1-thread contexts; fused T=64 is its context's first compile)\n");
  printf("%4s %-8s | %8s = %6s + %6s + %6s + %6s\n", "T", "variant", "total", "passes", "emit", "O3", "codegen");
  for (int ti = 0; ti < 2; ti++)
    for (int v = 0; v < 2; v++) printf("%s\n", csplit[ti][v]);
  printf("\nkernels: loop/reduction/transpose/matmul/dus; eval: evaluator fallbacks. moved: bytes of\n"
         "the buffers each thunk reads and writes, per run. Goal (issue 4): speed-up >= 1.5x.\n");
  bench_load_report(load0);
  for (int v = 0; v < 2; v++)
    for (int t = 0; t < 2; t++) hj_ctx_destroy(ctx[v][t]);
  hj_ctx_destroy(ref_ctx);
  return bad;
}
