/* bench_gpt2_gpu.c — GPT-2 prefill and decode on the CUDA backend (issue 13's GPU part;
   `make bench-gpt2-gpu MODEL=FILE`, tools/gpu_check.sh; bench/README.md).

   bench_gpt2_gpu --model FILE [--rounds N]

   The model is examples/gpt2's session on HJ_BACKEND_CUDA (every tensor f32 on the
   device, managed memory), three times: with CUDA graphs (each executable's kernels
   replayed as one graph) and one block graph run per layer (layers_per_graph 1, each run
   synchronised), the same with HLOJIT_CUDA_GRAPHS=0 (every kernel its own launch), and
   with graphs and the whole model as one graph (layers_per_graph 0, the session's default
   on CUDA: one run, one graph, one synchronisation a step).
   Timed, the sessions taking turns in every round, best of the run:
     prefill of 64 and 256 tokens (last-position logits), and
     decode at 256: the step feeding position 255, the KV cache at its 256-entry bucket;
   host clock around each call (a call returns when its logits can be read on the host).
   Yardstick, in the same rounds: cuMemcpyDtoDAsync of 256 MiB on the same device (bytes
   read + written per second: the HBM rate a streaming kernel can reach). Decode's bound is
   the weight bytes a step must read (every tensor but the wpe rows it does not use) at that
   rate. The goal is absolute: a decode step in at most 0.5 ms on an H200 (the
   bound there is about 0.1 ms); the ratio bound / step shows how close to the HBM a step
   comes. Checks (exit status 1): the graph and plain sessions' logits are the same bits
   (the whole-model session's within 1e-4 of their largest), and every decode ran with
   the 256-entry cache.

   No GPU: prints "skipped: ..." and exits 0. HLOJIT_BENCH_DRY=1 with HLOJIT_LIBCUDA naming
   the CUDA test double runs it once to check the program (tools/gpu_check.sh --dry-run):
   the figures are then meaningless and said to be. */
#define _GNU_SOURCE
#include "hlojit.h"
#include "bench_util.h"
#include "backends/cuda/cuda_driver.h"
#include "examples/gpt2/session.h"
#include "examples/gpt2/weights.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { T1 = 64, T2 = 256 };

static bool G_dry;

typedef struct side {
  const char *name;
  gpt2_session *s;
  int32_t ids[T2];
  double pf[2], dec;
  int bad;
} side;

static double prefill_once(side *x, int T) {
  const float *lg;
  gpt2_err err;
  double t0 = bench_now();
  if (gpt2_session_prefill(x->s, x->ids, T, &lg, &err)) {
    printf("FAILED: %s: prefill T=%d: %s\n", x->name, T, err.msg);
    x->bad = 1;
  }
  return bench_now() - t0;
}

/* The step at position T2 - 1; |out| (V floats) gets its logits when not NULL. */
static double decode_once(side *x, float *out, int V) {
  const float *lg;
  gpt2_err err;
  gpt2_session_rewind(x->s, T2 - 1);
  double t0 = bench_now();
  if (gpt2_session_decode(x->s, 42, &lg, &err)) {
    printf("FAILED: %s: decode: %s\n", x->name, err.msg);
    x->bad = 1;
    return 1e30;
  }
  double t = bench_now() - t0;
  if (out) memcpy(out, lg, sizeof(float) * (size_t)V);
  return t;
}

static void keep_min(double *best, double t) {
  if (t < *best) *best = t;
}

/* Best time of one 256 MiB device-to-device copy (1 MiB in a dry run). */
static double copy_once(cuda_driver *d, cuda_device *dv, CUdeviceptr a, CUdeviceptr b, size_t bytes) {
  cuda_error ce;
  double best = 1e30;
  for (int k = 0; k < (G_dry ? 1 : 5); k++) {
    if (cuda_device_sync(dv, &ce) != HJ_OK) return 1e30;
    double t0 = bench_now();
    if (cuda_check(d, d->cuMemcpyDtoDAsync(b, a, bytes, dv->stream), &ce, "cuMemcpyDtoDAsync") ||
        cuda_device_sync(dv, &ce) != HJ_OK)
      return 1e30;
    keep_min(&best, bench_now() - t0);
  }
  return best;
}

/* The bytes a decode step must read: every tensor but the wpe rows past the one it uses,
   as f32 (the GPU sessions widen bf16). */
static double weight_bytes(const gpt2_weights *w) {
  double n = 0;
  for (int i = 0; i < gpt2_weights_count(w); i++) {
    const gpt2_tensor *t = gpt2_weights_get(w, i);
    double e = (double)t->shape[0] * (t->ndim > 1 ? (double)t->shape[1] : 1);
    if (t == &w->wpe) e = (double)w->cfg.C;
    n += e;
  }
  return 4 * n;
}

int main(int argc, char **argv) {
  const char *model = NULL;
  int rounds = 3;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else {
      printf("usage: bench_gpt2_gpu --model FILE [--rounds N]\n");
      return 2;
    }
  }
  if (!model) {
    printf("bench_gpt2_gpu: --model FILE is required (tools/gpu_check.sh makes a 124M-shaped one with "
           "tests/gpt2/gen_checkpoints.py)\n");
    return 2;
  }
  G_dry = getenv("HLOJIT_BENCH_DRY") != NULL;
  if (G_dry) rounds = 1;
  const char *lib = getenv("HLOJIT_LIBCUDA");
  if (lib && strstr(lib, "cuda_double") && !G_dry) {
    printf("skipped: no CUDA device: HLOJIT_LIBCUDA=%s is the CUDA test double (HLOJIT_BENCH_DRY=1 to "
           "check this program on it)\n", lib);
    return 0;
  }
  cuda_error ce;
  cuda_driver *d = NULL;
  cuda_device *dv = NULL;
  if (cuda_driver_open(NULL, &d, &ce) != HJ_OK) {
    printf("skipped: %s\n", ce.msg);
    return 0;
  }
  if (cuda_device_open(d, 0, &dv, &ce) != HJ_OK) {
    printf("skipped: no usable CUDA device: %s\n", ce.msg);
    cuda_driver_close(d);
    return 0;
  }
  char d1[1024], d2[512];
  cuda_driver_describe(d, d1, sizeof d1);
  cuda_device_describe(dv, d2, sizeof d2);
  printf("%s\n%s%s\n", d1, d2,
         G_dry ? "\nDRY RUN on the CUDA test double: kernels do not run, every figure below is meaningless" : "");

  gpt2_weights *w = NULL;
  gpt2_err err;
  if (gpt2_weights_load(model, &w, &err)) {
    printf("FAILED: %s\n", err.msg);
    return 1;
  }
  const gpt2_config cfg = w->cfg;
  if (cfg.max_T < T2) {
    printf("FAILED: %s: a context of %d positions; the benchmark needs %d\n", model, cfg.max_T, T2);
    return 1;
  }
  enum { NS = 3 };
  side sd[NS] = { { .name = "block graphs" }, { .name = "block, plain" }, { .name = "whole model" } };
  bench_load l0 = bench_load_now();
  for (int k = 0; k < NS; k++) {   /* plain first: HLOJIT_CUDA_GRAPHS is read as executables are made */
    int v = (k + 1) % NS;
    if (v == 1) setenv("HLOJIT_CUDA_GRAPHS", "0", 1);
    gpt2_session_opts o;
    gpt2_session_opts_init(&o);
    o.backend = HJ_BACKEND_CUDA;
    o.layers_per_graph = v == 2 ? 0 : 1;   /* (0 is the session's default on CUDA) */
    side *x = &sd[v];
    if (gpt2_session_create(w, &o, &x->s, &err)) {
      printf("FAILED: %s: %s\n", x->name, err.msg);
      return 1;
    }
    for (int i = 0; i < T2; i++) x->ids[i] = (int32_t)((i * 7919) % cfg.V);
    prefill_once(x, T1);   /* compile every bucket, outside the timed rounds */
    prefill_once(x, T2);
    prefill_once(x, T2 - 1);
    decode_once(x, NULL, cfg.V);
    if (x->bad) return 1;
    x->pf[0] = x->pf[1] = x->dec = 1e30;
    unsetenv("HLOJIT_CUDA_GRAPHS");
  }
  size_t cbytes = G_dry ? (size_t)1 << 20 : (size_t)256 << 20;
  CUdeviceptr ca, cb;
  if (cuda_mem_alloc(dv, cbytes, &ca, &ce) || cuda_mem_alloc(dv, cbytes, &cb, &ce)) {
    printf("FAILED: allocating the copy's buffers: %s\n", ce.msg);
    return 1;
  }
  double t_copy = 1e30;
  float *lg[NS];
  for (int v = 0; v < NS; v++)
    if (!(lg[v] = malloc(sizeof(float) * (size_t)cfg.V))) return 1;
  for (int r = 0; r < rounds; r++) {
    keep_min(&t_copy, copy_once(d, dv, ca, cb, cbytes));
    for (int v = 0; v < NS; v++) {
      side *x = &sd[v];
      for (int k = 0; k < (G_dry ? 1 : 5); k++) keep_min(&x->pf[0], prefill_once(x, T1));
      for (int k = 0; k < (G_dry ? 1 : 3); k++) keep_min(&x->pf[1], prefill_once(x, T2));
      prefill_once(x, T2 - 1);
      for (int k = 0; k < (G_dry ? 1 : 50); k++) keep_min(&x->dec, decode_once(x, k ? NULL : lg[v], cfg.V));
    }
  }
  int fail = sd[0].bad || sd[1].bad || sd[2].bad;
  double wb = weight_bytes(w), hbm = 2.0 * (double)cbytes / t_copy, bound = wb / hbm;
  printf("\nGPT-2 (L=%d C=%d NH=%d V=%d) from %s, f32 on the device; device-to-device copy of %zu MiB: "
         "%.0f GB/s (read + write)\n", cfg.L, cfg.C, cfg.NH, cfg.V, model, cbytes >> 20, hbm * 1e-9);
  printf("%-15s | prefill T=%d ms   tok/s | prefill T=%d ms   tok/s | decode at %d: ms   tok/s  bound ms  ratio\n",
         "", T1, T2, T2);
  for (int v = 0; v < NS; v++) {
    side *x = &sd[v];
    printf("%-15s | %14.3f %7.0f | %15.3f %7.0f | %16.3f %7.0f %9.3f %6.2f\n", x->name, x->pf[0] * 1e3,
           T1 / x->pf[0], x->pf[1] * 1e3, T2 / x->pf[1], x->dec * 1e3, 1 / x->dec, bound * 1e3, bound / x->dec);
  }
  double best = sd[0].dec < sd[2].dec ? sd[0].dec : sd[2].dec;
  printf("decode: %.3f ms a step as one graph (the default on CUDA), %.3f with a graph per block (goal <= 0.5 "
         "ms: %s); block graphs against plain launches: %.2fx; the bound reads %.1f MB of weights at the copy's "
         "rate\n", sd[2].dec * 1e3, sd[0].dec * 1e3, G_dry ? "dry run" : best <= 0.5e-3 ? "met" : "NOT met",
         sd[1].dec / sd[0].dec, wb * 1e-6);
  for (int v = 0; v < NS; v++) {
    gpt2_session_stats st;
    gpt2_session_get_stats(sd[v].s, &st);
    if (st.cache_entries != T2) {
      printf("FAILED: %s: the decode ran with a cache of %d entries, not %d\n", sd[v].name, st.cache_entries, T2);
      fail = 1;
    }
  }
  bool same = !memcmp(lg[0], lg[1], sizeof(float) * (size_t)cfg.V);
  double dmax = 0, amax = 0;
  for (int i = 0; i < cfg.V; i++) {
    double dd = fabs((double)lg[2][i] - lg[0][i]), a = fabs((double)lg[0][i]);
    if (!(dd <= dmax)) dmax = dd;   /* NaN too */
    if (a > amax) amax = a;
  }
  bool near = dmax <= 1e-4 * amax;
  printf("logits of the decode step: block graphs and plain launches %s; whole model against block graphs: max |diff| "
         "%.2e of max %.2e%s\n", same ? "bitwise equal" : "DIFFER", dmax, amax, near ? "" : " (over 1e-4 of it)");
  if ((!same || !near) && !G_dry) fail = 1;
  bench_load_report(l0);
  for (int v = 0; v < NS; v++) {
    gpt2_session_free(sd[v].s);
    free(lg[v]);
  }
  cuda_mem_free(dv, ca, &ce);
  cuda_mem_free(dv, cb, &ce);
  gpt2_weights_free(w);
  cuda_device_close(dv);
  cuda_driver_close(d);
  printf("== bench_gpt2_gpu: %s\n", fail ? "FAILED (a check above)" : G_dry ? "dry run complete" : "every check passed");
  return fail;
}
