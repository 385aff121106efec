/* bench_decode.c — a GPT-2-124M-shaped decode step with donated KV caches (issue 10).

   // L layers, C channels, NH heads, hs = C / NH, Tc cache entries per head
   The graph: L = 12 blocks of GPT-2 124M (C 768, NH 12, MLP 4C, f32, weights (in, out) with
   hj_linear), one token at a run-time position pos (an s32 input: no recompile per token):
       h = ln_1(x); q, k, v = split(h @ Wqkv + b)                     (1, C) each
       Kc' = dus(Kc, k as (NH, 1, hs), (0, pos, 0)); Vc' likewise       (NH, Tc, hs)
       s = q . Kc'^T / sqrt(hs), masked to entries <= pos; a = softmax(s) @ Vc'
       x += a @ Wproj + b; x += gelu(ln_2(x) @ Wfc + b) @ Wfcproj + b
   Outputs: x and the 2L updated caches. The lm head is left out (the stack's cost is what
   moves with Tc). Weights (85M floats, 340 MB) are made once and bound to every executable
   (hj_exec_bind), so each step passes only x and pos.

   Variants, each at Tc = 256 and 1024: "donated" (every updated cache aliases its input:
   the dus writes one row per head in place; the caches are bound too) and "copy" (no
   aliases: each step writes whole new caches, as before issue 10).

   What it checks: with donation the step at Tc = 1024 costs more than at 256 only by what
   attention reads in addition: extra = L x 2 (K, V) x (1024 - 256) x C x 4 B = 56.6 MB,
   whose time bound = extra / bw, bw = a read-only stream over fresh memory on the same
   number of threads, timed in the same rounds. Printed: both step times, their difference,
   the bound and the ratio (difference / bound); the copy variant's difference for contrast
   (it also writes the caches and reads them once more). Rounds alternate the variants and
   the yardstick; the best time of each is kept (noise from other processes only adds).
   `bench_decode [THREADS]` (default 1). */
#include "hlojit.h"
#include "bench_util.h"
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

enum { BD_L = 12, BD_C = 768, BD_NH = 12, BD_HS = 64, BD_F = 3072, BD_ROUNDS = 8, BD_STEPS = 4 };
static const char *bd_wname[12] = { "ln1w", "ln1b", "qkvw", "qkvb", "projw", "projb",
                                    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb" };
static const hj_shape_t bd_wshape[12] = {
  { 1, { BD_C } }, { 1, { BD_C } }, { 2, { BD_C, 3 * BD_C } }, { 1, { 3 * BD_C } },
  { 2, { BD_C, BD_C } }, { 1, { BD_C } }, { 1, { BD_C } }, { 1, { BD_C } },
  { 2, { BD_C, BD_F } }, { 1, { BD_F } }, { 2, { BD_F, BD_C } }, { 1, { BD_C } } };

#define BD_TRY(x) do { if ((st = (x)) != HJ_OK) goto fail; } while (0)

/* (1, C) -> (NH, 1, hs) */
static hj_tensor_t bd_heads(hj_tensor_t t) {
  static const int64_t perm[3] = { 1, 0, 2 };
  return hj_transpose(hj_reshape(t, HJ_SHAPE(1, BD_NH, BD_HS)), perm, 3);
}

/* The decode graph at cache size |tc|; |donate|: caches alias their inputs. */
static hj_status bd_graph(hj_ctx_t *ctx, int tc, bool donate, hj_graph_t **out) {
  hj_graph_t *g;
  hj_status st = hj_graph_create(ctx, donate ? "decode_donated" : "decode_copy", &g);
  if (st) return st;
  hj_tensor_t x = hj_param(g, HJ_F32, HJ_SHAPE(1, BD_C), "x"), pos = hj_param(g, HJ_S32, HJ_SCALAR, "pos");
  hj_tensor_t w[BD_L][12], kc[BD_L], vc[BD_L], kn[BD_L], vn[BD_L];
  char name[64];
  for (int l = 0; l < BD_L; l++) {
    for (int i = 0; i < 12; i++) {
      snprintf(name, sizeof name, "h%d.%s", l, bd_wname[i]);
      w[l][i] = hj_param(g, HJ_F32, bd_wshape[i], name);
    }
    snprintf(name, sizeof name, "h%d.kc", l);
    kc[l] = hj_param(g, HJ_F32, HJ_SHAPE(BD_NH, tc, BD_HS), name);
    snprintf(name, sizeof name, "h%d.vc", l);
    vc[l] = hj_param(g, HJ_F32, HJ_SHAPE(BD_NH, tc, BD_HS), name);
  }
  hj_tensor_t zero = hj_scalar(g, HJ_S32, 0), starts[3] = { zero, pos, zero };
  hj_tensor_t keep = hj_compare(hj_iota(g, HJ_S32, HJ_SHAPE(BD_NH, 1, tc), 2), pos, HJ_CMP_LE);
  hj_tensor_t ninf = hj_scalar(g, HJ_F32, -INFINITY), scale = hj_scalar(g, HJ_F32, 1.0 / sqrt(BD_HS));
  for (int l = 0; l < BD_L; l++) {
    hj_tensor_t *p = w[l], qkv[3];
    hj_tensor_t h = hj_layer_norm(x, p[0], p[1], 1e-5);
    if ((st = hj_unpack(hj_split(hj_linear(h, p[2], p[3], HJ_LINEAR_IN_OUT), 1,
                                 (int64_t[]){ BD_C, BD_C, BD_C }, 3), qkv, 3)))
      goto fail;
    kn[l] = hj_dynamic_update_slice(kc[l], bd_heads(qkv[1]), starts);         /* (NH, Tc, hs) */
    vn[l] = hj_dynamic_update_slice(vc[l], bd_heads(qkv[2]), starts);
    int64_t b0 = 0, c2 = 2;
    hj_dot_dims_t qk = { &b0, 1, &b0, 1, &c2, 1, &c2, 1 };                    /* (NH, 1, Tc) */
    hj_tensor_t s = hj_mul(hj_dot_general(bd_heads(qkv[0]), kn[l], &qk), scale);
    hj_tensor_t a = hj_matmul(hj_softmax(hj_select(keep, s, ninf), 2), vn[l]);   /* (NH, 1, hs) */
    a = hj_reshape(hj_transpose(a, (int64_t[]){ 1, 0, 2 }, 3), HJ_SHAPE(1, BD_C));
    x = hj_add(x, hj_linear(a, p[4], p[5], HJ_LINEAR_IN_OUT));
    hj_tensor_t f = hj_gelu_tanh(hj_linear(hj_layer_norm(x, p[6], p[7], 1e-5), p[8], p[9], HJ_LINEAR_IN_OUT));
    x = hj_add(x, hj_linear(f, p[10], p[11], HJ_LINEAR_IN_OUT));
  }
  BD_TRY(hj_graph_output_named(g, x, "x"));
  for (int l = 0; l < BD_L; l++) {
    BD_TRY(donate ? hj_graph_output_aliased(g, kn[l], kc[l]) : hj_graph_output(g, kn[l]));
    BD_TRY(donate ? hj_graph_output_aliased(g, vn[l], vc[l]) : hj_graph_output(g, vn[l]));
  }
  *out = g;
  return HJ_OK;
fail:
  hj_graph_destroy(g);
  return st;
}

static uint64_t bd_rng = 88172645463325252ull;
static float bd_normal(float sd) {   /* Irwin-Hall: good enough for weights */
  float s = 0;
  for (int i = 0; i < 4; i++) {
    bd_rng ^= bd_rng << 13, bd_rng ^= bd_rng >> 7, bd_rng ^= bd_rng << 17;
    s += (float)(bd_rng >> 40) / 16777216.0f - 0.5f;
  }
  return s * sd * 1.7320508f;
}

static hj_status bd_fill(hj_ctx_t *ctx, hj_shape_t s, float sd, float mean, hj_buffer_t **b) {
  hj_status st = hj_buffer_create(ctx, HJ_F32, s, b);
  float *p = st ? NULL : hj_buffer_host_ptr(*b);
  for (int64_t i = 0; p && i < hj_shape_numel(s); i++) p[i] = mean + (sd ? bd_normal(sd) : 0);
  return st;
}

/* One variant: its executable with weights (and, donated, caches) bound, its outputs. */
typedef struct bd_var {
  int tc;
  bool donate;
  hj_exec_t *e;
  hj_buffer_t *caches[2 * BD_L], *outs[1 + 2 * BD_L];
  double best_ms;                     /* per step */
  hj_exec_stats_t st;
} bd_var;

static hj_status bd_make(hj_ctx_t *ctx, bd_var *v, hj_buffer_t *const *weights) {
  hj_graph_t *g = NULL;
  hj_status st = bd_graph(ctx, v->tc, v->donate, &g);
  if (st) return st;
  st = hj_compile(g, &v->e);
  hj_graph_destroy(g);
  if (st) return st;
  char name[64];
  for (int l = 0; l < BD_L && !st; l++)
    for (int i = 0; i < 12 && !st; i++) {
      snprintf(name, sizeof name, "h%d.%s", l, bd_wname[i]);
      st = hj_exec_bind_name(v->e, name, weights[l * 12 + i]);
    }
  for (int k = 0; k < 2 * BD_L && !st; k++) {
    st = bd_fill(ctx, HJ_SHAPE(BD_NH, v->tc, BD_HS), 0.5f, 0, &v->caches[k]);
    snprintf(name, sizeof name, "h%d.%s", k / 2, k % 2 ? "vc" : "kc");
    if (!st) st = hj_exec_bind_name(v->e, name, v->caches[k]);
    if (!st) v->outs[1 + k] = v->donate ? hj_buffer_retain(v->caches[k]) : NULL;
  }
  if (!st) st = hj_exec_stats(v->e, &v->st);
  return st;
}

/* |n| steps at positions tc-n .. tc-1; the best per-step time is kept. */
static hj_status bd_steps(hj_ctx_t *ctx, bd_var *v, hj_buffer_t *x, int n) {
  hj_status st = HJ_OK;
  for (int s = 0; s < n && !st; s++) {
    int pos = v->tc - n + s;
    hj_buffer_t *pb;
    if ((st = hj_buffer_from_host(ctx, HJ_S32, HJ_SCALAR, &pos, &pb))) break;
    hj_buffer_t *in[2] = { x, pb };
    double t0 = bench_now();
    st = hj_exec_run(v->e, in, 2, v->outs, 1 + 2 * BD_L);
    double ms = (bench_now() - t0) * 1e3;
    if (ms < v->best_ms) v->best_ms = ms;
    hj_buffer_destroy(pb);
  }
  return st;
}

/* ---- the yardstick: read-only streams over fresh memory --------------------------------- */
typedef struct { const uint64_t *p; size_t n; uint64_t sum; } bd_part;
static void *bd_read(void *arg) {
  bd_part *q = arg;
  uint64_t a = 0, b = 0, c = 0, d = 0;
  for (size_t i = 0; i + 4 <= q->n; i += 4) a += q->p[i], b ^= q->p[i + 1], c += q->p[i + 2], d ^= q->p[i + 3];
  q->sum = a + b + c + d;
  return NULL;
}

static uint64_t *bd_pool;
static size_t bd_pool_words, bd_pool_at;
enum { BD_STREAM_MB = 128, BD_POOL_MB = 640 };

/* GB/s of one read of the next 128 MiB of the 640 MiB pool on |nt| threads. */
static double bd_bandwidth(int nt, uint64_t *sink) {
  size_t n = (size_t)BD_STREAM_MB << 17;         /* words */
  if (bd_pool_at + n > bd_pool_words) bd_pool_at = 0;
  bd_part parts[8];
  pthread_t th[8];
  double t0 = bench_now();
  for (int i = 0; i < nt; i++) {
    parts[i] = (bd_part){ bd_pool + bd_pool_at + n / nt * i, n / nt, 0 };
    if (i) pthread_create(&th[i], NULL, bd_read, &parts[i]);
  }
  bd_read(&parts[0]);
  for (int i = 1; i < nt; i++) pthread_join(th[i], NULL);
  double s = bench_now() - t0;
  for (int i = 0; i < nt; i++) *sink += parts[i].sum;
  bd_pool_at += n;
  return (double)n * 8 / s / 1e9;
}

int main(int argc, char **argv) {
  int nt = argc > 1 ? atoi(argv[1]) : 1;
  if (nt < 1 || nt > 8) nt = 1;
  bench_load load = bench_load_now();
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  o.backend = HJ_BACKEND_CPU;
  o.num_threads = nt;
  hj_ctx_t *ctx = NULL;
  hj_status st = hj_ctx_create(&o, &ctx);
  if (st) return fprintf(stderr, "bench_decode: no context\n"), 1;
  hj_buffer_t *weights[BD_L * 12] = { 0 }, *x = NULL;
  bd_var v[4] = { { 256, true }, { 1024, true }, { 256, false }, { 1024, false } };
  for (int k = 0; k < 4; k++) v[k].best_ms = INFINITY;
  for (int l = 0; l < BD_L && !st; l++)
    for (int i = 0; i < 12 && !st; i++) {
      bool norm = i == 0 || i == 6, bias = bd_wshape[i].rank == 1;
      st = bd_fill(ctx, bd_wshape[i], norm ? 0 : bias ? 0.01f : 0.02f, norm ? 1.0f : 0, &weights[l * 12 + i]);
    }
  if (!st) st = bd_fill(ctx, HJ_SHAPE(1, BD_C), 1, 0, &x);
  double tc0 = bench_now();
  for (int k = 0; k < 4 && !st; k++) st = bd_make(ctx, &v[k], weights);
  double compile_s = bench_now() - tc0;
  bd_pool_words = (size_t)BD_POOL_MB << 17;
  bd_pool = aligned_alloc(64, bd_pool_words * 8);
  if (!bd_pool) st = HJ_ERR_OOM;
  for (size_t i = 0; bd_pool && i < bd_pool_words; i++) bd_pool[i] = i * 0x9e3779b97f4a7c15ull;
  if (st) {
    fprintf(stderr, "bench_decode: %s: %s\n", hj_status_name(st), hj_ctx_error(ctx));
    return 1;
  }
  printf("bench_decode: GPT-2 124M block stack (L %d, C %d, NH %d, MLP %d), one token, %d thread%s; "
         "4 executables compiled in %.1f s\n", BD_L, BD_C, BD_NH, BD_F, nt, nt > 1 ? "s" : "", compile_s);
  double bw = 0;
  uint64_t sink = 0;
  for (int r = 0; r < BD_ROUNDS && !st; r++)
    for (int k = 0; k < 4 && !st; k++) {
      st = bd_steps(ctx, &v[k], x, r == 0 ? 1 : BD_STEPS);   /* round 0 warms up */
      double b = bd_bandwidth(nt, &sink);
      if (b > bw) bw = b;
    }
  if (st) {
    fprintf(stderr, "bench_decode: %s: %s\n", hj_status_name(st), hj_ctx_error(ctx));
    return 1;
  }
  printf("\n  %-8s %6s %10s %8s %7s %10s\n", "variant", "Tc", "ms/step", "inplace", "copies", "caches MB");
  for (int k = 0; k < 4; k++)
    printf("  %-8s %6d %10.2f %8d %7d %10.1f\n", v[k].donate ? "donated" : "copy", v[k].tc, v[k].best_ms,
           v[k].st.inplace_updates, v[k].st.copies, 2.0 * BD_L * BD_NH * v[k].tc * BD_HS * 4 / 1e6);
  double extra = 2.0 * BD_L * (1024 - 256) * BD_C * 4, bound = extra / (bw * 1e9) * 1e3;
  double dd = v[1].best_ms - v[0].best_ms, dc = v[3].best_ms - v[2].best_ms;
  printf("\n  read bandwidth (fresh memory, %d thread%s, best of the rounds): %.1f GB/s\n", nt, nt > 1 ? "s" : "", bw);
  printf("  extra attention reads at Tc 1024 over 256: %.1f MB -> bound %.2f ms\n", extra / 1e6, bound);
  printf("  donated: t(1024) - t(256) = %.2f ms = %.2f x the bound\n", dd, dd / bound);
  printf("  copy:    t(1024) - t(256) = %.2f ms = %.2f x the bound (whole caches written each step)\n", dc,
         dc / bound);
  bool ok = v[0].st.inplace_updates == 2 * BD_L && v[1].st.inplace_updates == 2 * BD_L && v[0].st.copies == 0 &&
            v[1].st.copies == 0 && dd < 2 * bound;
  printf("  %s: donated caches updated in place (%d in place, copies %d) and the Tc difference %s 2x the bound\n",
         ok ? "OK" : "FAILED", v[1].st.inplace_updates, v[1].st.copies, dd < 2 * bound ? "within" : "NOT within");
  bench_load_report(load);
  for (int k = 0; k < 4; k++) {
    for (int j = 0; j < 2 * BD_L; j++) hj_buffer_destroy(v[k].caches[j]);
    for (int j = 0; j < 1 + 2 * BD_L; j++) hj_buffer_destroy(v[k].outs[j]);
    hj_exec_destroy(v[k].e);
  }
  for (int i = 0; i < BD_L * 12; i++) hj_buffer_destroy(weights[i]);
  hj_buffer_destroy(x);
  free(bd_pool);
  hj_ctx_destroy(ctx);
  if (sink == 42) printf("\n");
  return ok ? 0 : 1;
}
