/* cpu_backend.c — the CPU backend's entry in the backend table (backend.h): what only the
   CPU does around the shared compile driver (runtime/compile.c).

   compile(module): rt_compile with the CPU target:
     - emitter target: the host's vector width (AVX-512 64 bytes, AVX2 32, else 16), FMA
       and F16C, read from the JIT's CPU features;
     - passes: dot_canonicalize before the shared pipeline (after inlining inside it would
       be too late for epilogue fusion to see the matmul shapes it will get), then
       fusion_split (the computation partitioner: no exponential elemental emission) and
       wrap_fusions (every op a fusion: emitters only take fusions);
     - module hooks: the driver spreads each executable's distinct kernels over up to one
       LLVM module per pool thread, each in a fresh context (cpu_jit_module_create);
       finishing them goes through the code cache (cpu_code_cache.c: code already loaded
       in this context, from the disk cache, or O3 and an object file per module on the
       pool's threads, then stored), adds the code to ORC under trackers the cache
       refcounts, looks up every kernel and prepares the matmul plans (their scratch is
       allocated once per executable).
   run: th_program_run on the entry with the caller's leaf pointers; kernels split their
   parallel range over the context's thread pool, matmuls go to cpu_matmul_run. Runs of one
   executable are serialised (they share its arenas); runs of different executables may
   overlap.

   Per context (ctx_create, made on the first CPU compile): one cpu_jit and one thread pool
   of options.num_threads threads (0: every core of the affinity mask). */
#include "cpu_jit.h"
#include "cpu_code_cache.h"
#include "threadpool.h"
#include "cpu_matmul.h"
#include "../../hlojit_impl/emitters/matmul_plan.h"
#include "../../hlojit_impl/backend.h"
#include "../../hlojit_impl/runtime/runtime.h"
#include <pthread.h>
#include <stdlib.h>

typedef struct cpb_state {
  cpu_jit *jit;
  tp_pool *pool;
  cpu_cc *cc;                          /* the code cache (cpu_code_cache.h) */
} cpb_state;

typedef struct cpu_exec {
  rt_exec base;                        /* module, programs, kernels, stats */
  cpb_state *be;
  cpu_cc_code *code[RT_MAX_MODULES];   /* the executable's JIT code, one per LLVM module
                                          (shared with equal modules: cpu_code_cache.c) */
  int ncode;
  void *matmul_scratch;                /* packed panels, shared by every matmul thunk */
  th_runtime run;
  pthread_mutex_t run_mu;              /* runs share the arenas: one at a time */
} cpu_exec;

/* ---- per-context state ------------------------------------------------------------------ */

static hj_status cpb_ctx_create(hj_ctx_t *ctx, void **out) {
  *out = NULL;
  cpb_state *s = calloc(1, sizeof *s);
  if (!s) return hj__err(ctx, HJ_ERR_OOM, "CPU backend: out of memory");
  hj_status st = cpu_jit_create(ctx, &s->jit);
  if (st == HJ_OK && (st = tp_create(ctx->opt.num_threads, &s->pool)) != HJ_OK)
    hj__err(ctx, st, "CPU backend: cannot start %d threads", ctx->opt.num_threads);
  if (st == HJ_OK) st = cpu_cc_create(ctx, &s->cc);
  if (st != HJ_OK) {
    tp_destroy(s->pool);
    cpu_jit_destroy(s->jit);
    free(s);
    return st;
  }
  *out = s;
  return HJ_OK;
}

static void cpb_ctx_destroy(hj_ctx_t *ctx, void *state) {
  cpb_state *s = state;
  (void)ctx;
  if (!s) return;
  tp_destroy(s->pool);
  cpu_cc_destroy(s->cc);
  cpu_jit_destroy(s->jit);
  free(s);
}

/* ---- the target ------------------------------------------------------------------------------ */

static bool cpb_has_feature(const char *features, const char *f) {
  size_t n = strlen(f);
  for (const char *s = features; s && (s = strstr(s, f)); s += n)
    if ((s == features || s[-1] == ',') && (s[n] == ',' || s[n] == 0)) return true;
  return false;
}

static emit_target cpb_emit_target(cpu_jit *j) {
  const char *f = cpu_jit_cpu_features(j);
  emit_target t = { .gpu = false, .vector_bytes = 16 };
  if (cpb_has_feature(f, "+avx2")) t.vector_bytes = 32;
  if (cpb_has_feature(f, "+avx512f")) t.vector_bytes = 64;
  t.has_fma = cpb_has_feature(f, "+fma");
  t.has_f16c = cpb_has_feature(f, "+f16c");
  t.matmul_panel_nr = emit_matmul_panel_nr(t.vector_bytes);
  return t;
}

/* The passes this backend adds around the shared pipeline (passes/pipeline.c's names). */
static const char *const cpb_pre[] = { "conv-lower", "select-and-scatter-lower", "sort-lower",
                                  "rng-lower", "dot-canonicalize" };
static const char *const cpb_post[] = { "fusion-split", "wrap-fusions" };

typedef struct cpb_compile {          /* the ud of the target hooks during one compile */
  hj_ctx_t *ctx;
  cpu_exec *x;
} cpb_compile;

static hj_status cpb_module_begin(void *ud, const char *name, LLVMContextRef *llctx,
                                  LLVMModuleRef *mod, void **handle) {
  cpb_compile *c = ud;
  *handle = NULL;
  cpu_jit_module *jm = calloc(1, sizeof *jm);
  if (!jm) return hj__err(c->ctx, HJ_ERR_OOM, "CPU backend: out of memory");
  hj_status st = cpu_jit_module_create(c->x->be->jit, name, jm);
  if (st != HJ_OK) {
    free(jm);
    return st;
  }
  *llctx = jm->llctx;
  *mod = jm->mod;
  *handle = jm;
  return HJ_OK;
}

static void cpb_module_discard(void *ud, void *handle) {
  cpu_jit_module_dispose(handle);
  free(handle);
}

static void cpb_unique_name(void *ud, const char *prefix, char *buf, size_t n) {
  cpb_compile *c = ud;
  cpu_jit_unique_name(c->x->be->jit, prefix, buf, n);
}

static bool cpb_light_set(void) {
  const char *e = getenv("HLOJIT_LLVM_PIPELINE_LIGHT");
  return e && *e;
}

static void cpb_module_class(void *ud, void *handle, int cls) {
  ((cpu_jit_module *)handle)->light = cls == 1;
}

static void cpb_kernel_name(void *ud, const char *base, char *buf, size_t n) {
  cpb_compile *c = ud;
  cpu_jit_kernel_name(c->x->be->jit, base, buf, n);
}

/* Resolves every kernel thunk and prepares the matmul plans (their scratch: the largest). */
static hj_status cpb_resolve(cpb_compile *c, rt_exec *base) {
  cpu_exec *x = c->x;
  cpu_jit *j = x->be->jit;
  size_t scratch = 0;
  hj_status st = HJ_OK;
  for (ptrdiff_t i = 0; i < arrlen(base->kernels) && st == HJ_OK; i++) {
    th_thunk *t = base->kernels[i];
    if (t->kind == TH_KERNEL) {
      st = cpu_jit_lookup(j, t->sym, &t->fn);
    } else {
      st = cpu_matmul_prepare(j, t->matmul);
      size_t s = cpu_matmul_scratch_bytes(t->matmul, tp_size(x->be->pool));
      if (s > scratch) scratch = s;
    }
  }
  if (st == HJ_OK && scratch > 0 && !(x->matmul_scratch = hj__alloc(c->ctx, scratch)))
    st = hj__err(c->ctx, HJ_ERR_OOM, "CPU backend: out of memory for %zu bytes of matmul scratch", scratch);
  return st;
}

/* The emitted modules (one, or one per pool thread: the driver spreads the distinct kernels
   over them by size) through the code cache: each module's code already loaded, from disk,
   or optimised and turned into an object file on its own thread with its own TargetMachine
   (cpu_jit_optimize_mt / _codegen_mt: the same pipeline and code generator as ORC's, so the
   same machine code); then every kernel is looked up (linking only). optimize_ms is O3's
   wall time, codegen_ms the rest (objects, loading, linking, matmul plans). */
static hj_status cpb_module_finish_many(void *ud, void *const *handles, int n, rt_exec *base) {
  cpb_compile *c = ud;
  cpu_exec *x = c->x;
  double t1 = rt_now_ms();
  int source;
  hj_status st = cpu_cc_finish(x->be->cc, x->be->jit, x->be->pool, (cpu_jit_module *const *)handles, n,
                               base, x->code, &source);              /* consumes the modules */
  for (int i = 0; i < n; i++) free(handles[i]);
  if (st == HJ_OK) x->ncode = n;
  double t2 = t1 + base->stats.optimize_ms;
  if (st == HJ_OK) st = cpb_resolve(c, base);
  base->stats.codegen_ms = rt_now_ms() - t2;
  return st;
}

static hj_status cpb_module_finish(void *ud, void *handle, rt_exec *base) {
  return cpb_module_finish_many(ud, &handle, 1, base);
}

/* ---- run hooks ------------------------------------------------------------------------------- */

typedef struct { void (*fn)(void **, int64_t, int64_t); void **bufs; } cpb_call;

static void cpb_trampoline(void *user, int64_t b, int64_t e) {
  cpb_call *c = user;
  c->fn(c->bufs, b, e);
}

static hj_status cpb_run_kernel(void *ud, const th_thunk *t, void **bufs) {
  cpu_exec *x = ud;
  cpb_call c = { (void (*)(void **, int64_t, int64_t))t->fn, bufs };
  tp_parallel_for(x->be->pool, t->parallel_n, t->grain, cpb_trampoline, &c);
  return HJ_OK;
}

static hj_status cpb_run_matmul(void *ud, const th_thunk *t, void **bufs) {
  cpu_exec *x = ud;
  cpu_matmul_run(t->matmul, bufs, x->be->pool, x->matmul_scratch);
  return HJ_OK;
}

/* ---- the table's functions ------------------------------------------------------------------------ */

static void cpb_exec_free(void *exec) {
  cpu_exec *x = exec;
  if (!x) return;
  for (int i = 0; i < x->ncode && x->be; i++) cpu_cc_release(x->be->cc, x->be->jit, x->code[i]);
  hj__free(x->base.ctx, x->matmul_scratch);
  rt_exec_free(&x->base);
  pthread_mutex_destroy(&x->run_mu);
  free(x);
}

static hj_status cpb_compile_module(hj_ctx_t *ctx, void *state, const hlo_module *m, void **out) {
  *out = NULL;
  cpu_exec *x = calloc(1, sizeof *x);
  if (!x) return hj__err(ctx, HJ_ERR_OOM, "CPU backend: out of memory");
  x->be = state;
  x->base.ctx = ctx;
  pthread_mutex_init(&x->run_mu, NULL);
  cpb_compile c = { ctx, x };
  rt_target t = {
    .name = "CPU backend",
    .emit = cpb_emit_target(x->be->jit),
    .pre = cpb_pre, .npre = (int)(sizeof cpb_pre / sizeof cpb_pre[0]),
    .post = cpb_post, .npost = (int)(sizeof cpb_post / sizeof cpb_post[0]),
    .ud = &c,
    .module_begin = cpb_module_begin,
    .module_discard = cpb_module_discard,
    .unique_name = cpb_unique_name,
    .module_finish = cpb_module_finish,
    .kernel_name = cpb_kernel_name,
    .max_modules = tp_size(x->be->pool),
    .module_finish_many = cpb_module_finish_many,
    /* matmul kernels apart only when the others get a pipeline of their own (measured:
       default<O1> for them saves 12-18% of the LLVM CPU time of a GPT-2 compile but costs
       2.5-4% of the prefill forward's run time, so by default all get O3: cpu_jit.c) */
    .module_class = cpb_light_set() ? cpb_module_class : NULL,
  };
  hj_status st = rt_compile(ctx, m, &t, &x->base);
  if (st != HJ_OK) {
    cpb_exec_free(x);
    return st;
  }
  x->base.stats.backend = HJ_BACKEND_CPU;
  x->run = (th_runtime){ .ctx = ctx, .ud = x, .kernel = cpb_run_kernel, .matmul = cpb_run_matmul };
  *out = x;
  return HJ_OK;
}

static hj_status cpb_run(void *exec, void *const *in, int nin, void *const *out, int nout) {
  cpu_exec *x = exec;
  const th_program *e = x->base.entry;
  if (nin != e->plan.nin || nout != e->plan.nout)
    return hj__err(x->base.ctx, HJ_ERR_INTERNAL, "CPU backend: %d/%d leaves given, the plan has %d/%d",
                   nin, nout, e->plan.nin, e->plan.nout);
  pthread_mutex_lock(&x->run_mu);
  hj_status st = th_program_run(&x->run, x->base.entry, in, out);
  pthread_mutex_unlock(&x->run_mu);
  return st;
}

static void cpb_stats(const void *exec, hj_exec_stats_t *s) { *s = ((const cpu_exec *)exec)->base.stats; }

/* Profiles: the runtime times the thunks (th_runtime.profile), profile.c reports them. */
static void cpb_set_profiling(void *exec, bool on) { ((cpu_exec *)exec)->run.profile = on; }
static hj_status cpb_profile(const void *exec, hj_profile_entry_t **out) {
  th_profile_append(((const cpu_exec *)exec)->base.entry, 0, out);
  return HJ_OK;
}
static void cpb_profile_reset(void *exec) { th_profile_reset(((cpu_exec *)exec)->base.entry); }

/* The panel order of hj_linear_panels: the micro-kernel's nr (emitters/matmul.c) and, for
   kc, the divisor of |in| among the multiples of 8 nearest below the K step of 384 that
   the plain matmul takes (else |in| itself, up to 768). */
static hj_status cpb_linear_panels(hj_ctx_t *ctx, void *state, int64_t in, int64_t out,
                                   int64_t *kc, int64_t *nr) {
  cpb_state *s = state;
  int64_t n = emit_matmul_panel_nr(cpb_emit_target(s->jit).vector_bytes), k = 0;
  for (int64_t c = 384; c >= 8 && !k; c -= 8)
    if (in % c == 0) k = c;
  if (!k && in <= 768) k = in;
  if (!k || out % n)
    return hj__err(ctx, HJ_ERR_UNSUPPORTED, "hj_linear_panels: the CPU's panels are %lld wide with a K step "
                   "dividing in; (in %lld, out %lld) %s", (long long)n, (long long)in, (long long)out,
                   k ? "has out not a multiple of it" : "has no K step of 8..384 dividing in");
  *kc = k, *nr = n;
  return HJ_OK;
}

const hlo_backend hlo_backend_cpu = {
  .name = "cpu",
  .kind = HJ_BACKEND_CPU,
  .ctx_create = cpb_ctx_create,
  .ctx_destroy = cpb_ctx_destroy,
  .compile = cpb_compile_module,
  .run = cpb_run,
  .stats = cpb_stats,
  .exec_free = cpb_exec_free,
  .set_profiling = cpb_set_profiling,
  .profile = cpb_profile,
  .profile_reset = cpb_profile_reset,
  .linear_panels = cpb_linear_panels,
};
