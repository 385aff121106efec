/* bench_hlo.c — the best wall time of one HLO module on the CPU backend, for the scripts
   that compare hlojit with XLA:CPU on the same module (bench/bench_conv.py).

   Usage: bench_hlo MODULE.hlo [RUNS] — inputs are random (uniform in [-1, 1) for floats,
   small integers otherwise, fixed seed), the module is compiled once, run twice to warm up
   (page faults of the arena and the outputs), then RUNS times (default 10). Prints one
   line `compile_ms=.. best_ms=.. median_ms=.. fallbacks=N`, then bench_util.h's machine-load
   line. Exit status 1 on any error. */
#include "hlojit.h"
#include "bench_util.h"
#include <stdlib.h>

static int bh_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void bh_fill(hj_buffer_t *b, uint64_t seed) {
  void *p = hj_buffer_host_ptr(b);
  int64_t n = hj_shape_numel(hj_buffer_shape(b));
  hj_dtype_t t = hj_buffer_dtype(b);
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    double u = (double)(seed >> 11) / 9007199254740992.0 * 2 - 1;
    switch (t) {
    case HJ_F32: ((float *)p)[i] = (float)u; break;
    case HJ_F64: ((double *)p)[i] = u; break;
    case HJ_S32: ((int32_t *)p)[i] = (int32_t)(u * 8); break;
    default: memset((char *)p + (size_t)i * hj_dtype_size(t), 0, hj_dtype_size(t)); break;
    }
  }
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: bench_hlo MODULE.hlo [RUNS]\n");
    return 1;
  }
  bench_load l0 = bench_load_now();
  int runs = argc > 2 ? atoi(argv[2]) : 10;
  if (runs < 1 || runs > 100000) runs = 10;
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  o.backend = HJ_BACKEND_CPU;
  hj_ctx_t *ctx = NULL;
  hj_module_t *m = NULL;
  hj_exec_t *e = NULL;
  if (hj_ctx_create(&o, &ctx) || hj_module_parse_file(ctx, argv[1], &m)) goto fail;
  int nin = hj_module_num_inputs(m), nout = hj_module_num_outputs(m);
  hj_buffer_t **in = calloc((size_t)nin + 1, sizeof *in), **out = calloc((size_t)nout + 1, sizeof *out);
  for (int i = 0; i < nin; i++) {
    hj_dtype_t t;
    hj_shape_t s;
    if (hj_module_input(m, i, &t, &s) || hj_buffer_create(ctx, t, s, &in[i])) goto fail;
    bh_fill(in[i], 1234 + (uint64_t)i);
  }
  double t0 = bench_now();
  if (hj_compile_module(ctx, m, &e)) goto fail;
  double compile_ms = 1e3 * (bench_now() - t0), *ms = calloc((size_t)runs, sizeof *ms);
  for (int r = 0; r < runs + 2; r++) {
    double a = bench_now();
    if (hj_exec_run(e, in, nin, out, nout)) goto fail;
    if (r >= 2) ms[r - 2] = 1e3 * (bench_now() - a);
  }
  qsort(ms, (size_t)runs, sizeof *ms, bh_cmp);
  hj_exec_stats_t st;
  if (hj_exec_stats(e, &st)) goto fail;
  printf("compile_ms=%.2f best_ms=%.4f median_ms=%.4f fallbacks=%d\n", compile_ms, ms[0], ms[runs / 2],
         st.evaluator_fallbacks);
  bench_load_report(l0);
  return 0;
fail:
  fprintf(stderr, "bench_hlo: %s\n", ctx ? hj_ctx_error(ctx) : "no context");
  return 1;
}
