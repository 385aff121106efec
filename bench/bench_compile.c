/* bench_compile.c — JIT latency of the CPU backend: wall time of hj_compile_module.

   Modules (built with the C API, converted once with hj_graph_to_module, so only the compile
   is timed):
     add1     x + y on f32[1024]: one small fusion (the floor: pipeline, one kernel, JIT);
     chain40  40 elementwise ops in a chain on f32[1024] (add/mul/sub/max/min with a second
              parameter, neg/abs/tanh/exp): the fusion pass makes it one loop kernel;
     chain40 no_fusion  the same module with hj_ctx_options.no_fusion: one kernel per op.
   Each is compiled 10 times two ways:
     fresh    a new context for every compile (hj_ctx_create untimed; the compile then pays
              for the context's LLVM JIT (target machine, LLJIT) and its thread pool);
     reused   one context, warmed by one untimed compile, then 10 compiles (the steady state
              of a program that compiles many modules).
   Printed: best and median ms of hj_compile_module, the parts of the median compile from
   hj_exec_stats (passes = clone + HLO passes + buffer assignment + thunks; emit = LLVM IR;
   O3; codegen = JIT add + lookups; "other" = the rest of the wall time: verification, dumps;
   in fresh contexts the JIT and thread pool start inside "passes"), the kernel count after fusion and the number
   of instructions of the module's entry. Backend HJ_BACKEND_CPU, 1 thread. */
#define _GNU_SOURCE
#include "hlojit.h"
#include "bench_util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>

#define BC_REPS 10

static double bc_now_ms(void) { return 1e3 * bench_now(); }

/* x + y on f32[n] */
static hj_status bc_add1(hj_ctx_t *ctx, hj_module_t **out) {
  hj_graph_t *g = NULL;
  hj_status st = hj_graph_create(ctx, "add1", &g);
  if (st) return st;
  hj_tensor_t x = hj_param(g, HJ_F32, HJ_SHAPE(1024), "x"), y = hj_param(g, HJ_F32, HJ_SHAPE(1024), "y");
  st = hj_graph_output(g, hj_add(x, y));
  if (!st) st = hj_graph_to_module(g, out);
  hj_graph_destroy(g);
  return st;
}

/* 40 elementwise ops, each on the previous result (and y for the binary ones). */
static hj_status bc_chain40(hj_ctx_t *ctx, hj_module_t **out) {
  hj_graph_t *g = NULL;
  hj_status st = hj_graph_create(ctx, "chain40", &g);
  if (st) return st;
  hj_tensor_t x = hj_param(g, HJ_F32, HJ_SHAPE(1024), "x"), y = hj_param(g, HJ_F32, HJ_SHAPE(1024), "y");
  hj_tensor_t v = x;
  for (int i = 0; i < 40; i++) {
    switch (i % 10) {
    case 0: v = hj_add(v, y); break;
    case 1: v = hj_mul(v, y); break;
    case 2: v = hj_tanh(v); break;
    case 3: v = hj_sub(v, y); break;
    case 4: v = hj_max(v, y); break;
    case 5: v = hj_neg(v); break;
    case 6: v = hj_min(v, y); break;
    case 7: v = hj_exp(v); break;
    case 8: v = hj_abs(v); break;
    default: v = hj_mul(v, x); break;
    }
  }
  st = hj_graph_output(g, v);
  if (!st) st = hj_graph_to_module(g, out);
  hj_graph_destroy(g);
  return st;
}

/* Instructions of the entry computation, from the printed module. */
static int bc_entry_instrs(const hj_module_t *m) {
  char *text = NULL;
  if (hj_module_print(m, &text)) return -1;
  const char *e = strstr(text, "\nENTRY ");
  int n = 0;
  for (const char *p = e ? strchr(e + 1, '\n') : NULL; p && p[1] && p[1] != '}'; p = strchr(p + 1, '\n'))
    n += strstr(p, " = ") != NULL && strstr(p, " = ") < strchr(p + 1, '\n');
  free(text);
  return n;
}

typedef hj_status (*bc_build_fn)(hj_ctx_t *, hj_module_t **);

typedef struct bc_result {
  double wall[BC_REPS], passes[BC_REPS], emit[BC_REPS], opt[BC_REPS], cg[BC_REPS];
  int kernels, fallbacks, instrs;
} bc_result;

static hj_status bc_ctx(bool no_fusion, hj_ctx_t **ctx) {
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  o.backend = HJ_BACKEND_CPU;
  o.num_threads = 1;
  o.no_fusion = no_fusion;
  return hj_ctx_create(&o, ctx);
}

/* One timed compile of |m| in |ctx|; fills slot |k| of |r|. */
static hj_status bc_once(hj_ctx_t *ctx, hj_module_t *m, bc_result *r, int k) {
  hj_exec_t *e = NULL;
  double t0 = bc_now_ms();
  hj_status st = hj_compile_module(ctx, m, &e);
  double t1 = bc_now_ms();
  if (st) {
    fprintf(stderr, "bench_compile: %s: %s\n", hj_status_name(st), hj_ctx_error(ctx));
    return st;
  }
  hj_exec_stats_t s;
  hj_exec_stats(e, &s);
  if (k >= 0) {
    r->wall[k] = t1 - t0, r->passes[k] = s.passes_ms, r->emit[k] = s.emit_ms;
    r->opt[k] = s.optimize_ms, r->cg[k] = s.codegen_ms;
  }
  r->kernels = s.kernels_loop + s.kernels_reduction + s.kernels_transpose + s.kernels_matmul + s.kernels_dus;
  r->fallbacks = s.evaluator_fallbacks;
  hj_exec_destroy(e);
  return HJ_OK;
}

static hj_status bc_measure(bc_build_fn build, bool no_fusion, bool fresh, bc_result *r) {
  hj_ctx_t *ctx = NULL;
  hj_module_t *m = NULL;
  hj_status st = HJ_OK;
  if (!fresh) {   /* one context, one warm-up compile */
    if ((st = bc_ctx(no_fusion, &ctx)) || (st = build(ctx, &m)) || (st = bc_once(ctx, m, r, -1))) goto done;
  }
  for (int k = 0; k < BC_REPS && !st; k++) {
    if (fresh) {
      if ((st = bc_ctx(no_fusion, &ctx)) || (st = build(ctx, &m))) break;
    }
    st = bc_once(ctx, m, r, k);
    if (fresh) {
      hj_module_destroy(m), m = NULL;
      hj_ctx_destroy(ctx), ctx = NULL;
    }
  }
  if (!st && !m && (st = bc_ctx(no_fusion, &ctx)) == HJ_OK && (st = build(ctx, &m)) == HJ_OK)
    r->instrs = bc_entry_instrs(m);
  else if (!st)
    r->instrs = bc_entry_instrs(m);
done:
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
  return st;
}

int main(void) {
  bench_load load0 = bench_load_now();
  static const struct { const char *name; bc_build_fn build; bool no_fusion; } mods[] = {
    { "add f32[1024]", bc_add1, false },
    { "chain40 f32[1024]", bc_chain40, false },
    { "chain40 no_fusion", bc_chain40, true },
  };
  printf("JIT latency: hj_compile_module wall time, %d compiles each, HJ_BACKEND_CPU, 1 thread\n\n", BC_REPS);
  printf("%-18s %-6s %6s %7s | %7s %7s | %7s %6s %6s %7s %6s | %s\n", "module", "ctx", "instrs",
         "kernels", "best ms", "median", "passes", "emit", "O3", "codegen", "other", "fallbacks");
  int bad = 0;
  for (size_t i = 0; i < sizeof mods / sizeof mods[0]; i++)
    for (int fresh = 1; fresh >= 0; fresh--) {
      bc_result r;
      memset(&r, 0, sizeof r);
      if (bc_measure(mods[i].build, mods[i].no_fusion, fresh, &r)) return 1;
      /* the median run (lower median of 10) and its own split, so the parts add up */
      int order[BC_REPS];
      for (int k = 0; k < BC_REPS; k++) order[k] = k;
      for (int a = 1; a < BC_REPS; a++)   /* insertion sort of run indices by wall time */
        for (int b = a; b > 0 && r.wall[order[b]] < r.wall[order[b - 1]]; b--) {
          int t = order[b];
          order[b] = order[b - 1], order[b - 1] = t;
        }
      int md = order[(BC_REPS - 1) / 2];
      double parts = r.passes[md] + r.emit[md] + r.opt[md] + r.cg[md];
      printf("%-18s %-6s %6d %7d | %7.2f %7.2f | %7.2f %6.2f %6.2f %7.2f %6.2f | %d\n", mods[i].name,
             fresh ? "fresh" : "reused", r.instrs, r.kernels, r.wall[order[0]], r.wall[md], r.passes[md],
             r.emit[md], r.opt[md], r.cg[md], r.wall[md] - parts, r.fallbacks);
      if (r.fallbacks) bad = 1;
    }
  printf("\ninstrs: instructions of the entry before the passes (parameters included);\n"
         "kernels: after the pass pipeline. median = the lower median of the %d compiles; the\n"
         "parts are that compile's hj_exec_stats (passes include the context's JIT/pool start\n"
         "when fresh); other = its wall time - their sum (verification, bookkeeping).\n",
         BC_REPS);
  bench_load_report(load0);
  return bad;
}
