/* emit_testutil.h — a harness for emitter tests: one fusion through emit_fusion (or one
   emitter), JIT-compiled and run, every output compared with the evaluator on the same
   inputs. Include after testutil.h; needs the LLVM include path (CPU_CFLAGS).

     etu_env env; etu_env_init(&env);                       // ctx + cpu_jit + host target
     etu_opts o = etu_opts_default();  o.ulp = 2;           // float tolerance in ulps
     etu_report r;
     hj_status st = etu_run_text(&env, hlo_text, "instr_name" or NULL (the entry root), &o, &r);
     // st: HJ_OK and r.bad == 0 when everything matched
     etu_env_free(&env);

   What a run does:
   1. parses the module; picks the instruction; if it is not a fusion, wraps it into a
      single-op fusion built in the same module (etu_wrap: a computation with one parameter
      per operand and a copy of the instruction as root — test-only, the real pass is
      passes/wrap_fusions.c);
   2. emits it into a fresh cpu_jit module (emit_fusion, or emit_loop_fusion when
      o.force_loop), runs O3, adds, looks the kernel up (o.ir receives the optimised IR);
   3. fills every operand deterministically (etu_fill: seeded; with o.edges, special values
      — NaN, ±inf, ±0, subnormals, INT_MIN/MAX, 0, -1, shift counts near the width — are
      mixed in), or with o.fill when the test needs specific values (indices);
   4. runs kernel(bufs, 0, parallel_n), then again split into 3 uneven chunks into freshly
      poisoned outputs (both must be bitwise equal: the range split is honoured);
   5. compares each output leaf with hlo_eval_computation of the fused computation: exact
      for integers and pred, floats within o.ulp ulps of their own type (NaN matches NaN),
      and reports the max ulp / abs error and the first mismatch. */
#ifndef HLOJIT_EMIT_TESTUTIL_H
#define HLOJIT_EMIT_TESTUTIL_H
#include "testutil.h"
#include "backends/cpu/cpu_jit.h"
#include "backends/cpu/threadpool.h"
#include "hlojit_impl/emitters/emit.h"
#include <math.h>
#include <time.h>

typedef struct etu_env {
  hj_ctx_t *ctx;
  cpu_jit *jit;
  emit_target target;
} etu_env;

typedef struct etu_opts {
  int64_t ulp;                    /* float tolerance (ulps of the element type) */
  double atol;                    /* ... or absolute error (for cancelling multi-op fusions) */
  bool edges;                     /* mix special values into the inputs */
  bool force_loop;                /* emit_loop_fusion instead of emit_fusion */
  uint64_t dus_inplace;           /* passed to emit_fusion (bit j: leaf j in place) */
  uint64_t seed;
  char **ir;                      /* when set: receives the optimised IR (free with free()) */
  /* when set: fills operand |k| (already filled by etu_fill) as the test needs */
  void (*fill)(int k, hlo_literal *l, void *user);
  void *user;
  bool quiet;                     /* no print on mismatch */
  bool bitwise;                   /* floats too must match bit for bit (NaN payloads included) */
} etu_opts;

typedef struct etu_report {
  emit_kind kind;                 /* what the fusion was emitted as */
  int64_t parallel_n, numel, bad;
  int64_t max_ulp;
  double max_abs;
  char first_bad[256];
  char kernel[96];
} etu_report;

static inline etu_opts etu_opts_default(void) {
  etu_opts o;
  memset(&o, 0, sizeof o);
  o.seed = 1;
  return o;
}

static inline void etu_env_init(etu_env *env) {
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  o.backend = HJ_BACKEND_CPU;
  memset(env, 0, sizeof *env);
  if (hj_ctx_create(&o, &env->ctx) != HJ_OK) fail_msg("hj_ctx_create failed");
  CHECK_OK(env->ctx, cpu_jit_create(env->ctx, &env->jit));
  __builtin_cpu_init();
  env->target.vector_bytes = __builtin_cpu_supports("avx512f") ? 64 : __builtin_cpu_supports("avx2") ? 32 : 16;
  env->target.has_fma = __builtin_cpu_supports("fma");
  env->target.has_f16c = __builtin_cpu_supports("f16c");
}

static inline void etu_env_free(etu_env *env) {
  cpu_jit_destroy(env->jit);
  hj_ctx_destroy(env->ctx);
}

/* ---- inputs ----------------------------------------------------------------------------- */

static inline uint64_t etu_rand(uint64_t *s) {   /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static inline void etu_fill(hlo_literal *l, uint64_t seed, bool edges) {
  hlo_type t = l->shape.type;
  int64_t n = hlo_shape_numel(&l->shape);
  int bits = t == HLO_PRED ? 1 : 8 * hlo_type_size(t);
  static const double fe[] = { NAN, -NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-40, -1e-40, 5e-324,
                               1e300, -1e300, 3.4e38, 65504.0, 70000.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5 };
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = etu_rand(&seed), r2 = etu_rand(&seed);
    int cls = (int)(r % 16);
    if (t == HLO_PRED) {
      l->data[i] = (uint8_t)(r2 & 1);
    } else if (hlo_type_is_float(t)) {
      double v = ((double)(r2 >> 11) / 9007199254740992.0) * 8.0 - 4.0;
      if (edges && cls == 0) v = fe[r2 % (sizeof fe / sizeof fe[0])];
      else if (cls == 1) v = ldexp(v, (int)(r2 % 40) - 20);
      hlo_store_f64(t, l->data, i, v);
    } else {
      uint64_t v = r2;
      if (cls < 8) v = (uint64_t)((int64_t)(r2 % 17) - 4);                  /* small, -4..12 */
      else if (cls < 10) v = (uint64_t)(bits - 2 + (int64_t)(r2 % 5));      /* near the width */
      else if (edges && cls == 10) {
        uint64_t lo = 1ull << (bits - 1);
        uint64_t ev[] = { 0, ~0ull, lo, lo - 1, 1, lo | 1 };
        v = ev[r2 % 6];
      }
      hlo_store_u64(t, l->data, i, v);   /* wraps to the width */
    }
  }
}

/* ---- wrapping one instruction into a fusion ------------------------------------------------ */

static inline hlo_instr *etu_find(hlo_module *m, const char *name) {
  for (ptrdiff_t c = 0; c < arrlen(m->comps); c++)
    for (ptrdiff_t i = 0; i < arrlen(m->comps[c]->instrs); i++)
      if (!strcmp(m->comps[c]->instrs[i]->name, name)) return m->comps[c]->instrs[i];
  return NULL;
}

/* A fusion (in a scratch computation of |m|) whose computation holds a copy of |ins| fed by
   one parameter per operand. */
static inline hlo_instr *etu_wrap(hlo_module *m, hlo_instr *ins) {
  char nm[256];
  snprintf(nm, sizeof nm, "etu_wrapped_%s", ins->name);
  hlo_comp *c = hlo_comp_new(m, nm);
  hlo_instr *ps[64];
  if (ins->noperands > 64) return NULL;
  for (int k = 0; k < ins->noperands; k++) {
    snprintf(nm, sizeof nm, "etu_p%d", k);
    ps[k] = hlo_instr_new(c, HLO_OP_PARAMETER, nm, &ins->operands[k]->shape, NULL, 0);
    ps[k]->index = k;
    arrput(c->params, ps[k]);
  }
  hlo_instr *cp = hlo_instr_new(c, ins->op, ins->name, &ins->shape, ps, ins->noperands);
  hlo_instr keep = *cp, tmp = *ins;
  tmp.id = keep.id; tmp.name = keep.name; tmp.shape = keep.shape; tmp.operands = keep.operands;
  tmp.noperands = keep.noperands; tmp.parent = c; tmp.is_root = true;
  *cp = tmp;
  c->root = cp;
  snprintf(nm, sizeof nm, "etu_harness_%s", ins->name);
  hlo_comp *h = hlo_comp_new(m, nm);
  hlo_instr *fu = hlo_instr_new(h, HLO_OP_FUSION, "etu_fusion", &ins->shape, ins->operands, ins->noperands);
  fu->fusion_kind = HLO_FUSION_LOOP;
  hlo_instr_set_calls(fu, &c, 1);
  return fu;
}

/* ---- comparison -------------------------------------------------------------------------- */

static inline int64_t etu_fkey(hlo_type t, const void *p, int64_t i) {
  switch (t) {
  case HLO_F16: case HLO_BF16: {
    int64_t u = ((const uint16_t *)p)[i];
    return u & 0x8000 ? -(u & 0x7fff) : u;
  }
  case HLO_F32: {
    int64_t u = ((const uint32_t *)p)[i];
    return u & 0x80000000u ? -(u & 0x7fffffff) : u;
  }
  default: {
    uint64_t u = ((const uint64_t *)p)[i];
    return u >> 63 ? -(int64_t)(u & 0x7fffffffffffffffull) : (int64_t)u;
  }
  }
}

/* Compares |got| with |want| (one leaf); updates |r|. */
static inline void etu_compare(const hlo_literal *want, const void *got, int64_t ulp, double atol,
                               bool bitwise, etu_report *r, int leaf) {
  hlo_type t = want->shape.type;
  int64_t n = hlo_shape_numel(&want->shape);
  int es = hlo_type_size(t);
  for (int64_t i = 0; i < n; i++) {
    bool ok;
    if (hlo_type_is_float(t) && !bitwise) {
      double a = hlo_load_f64(t, want->data, i), b = hlo_load_f64(t, got, i);
      if (isnan(a) || isnan(b)) {
        ok = isnan(a) && isnan(b);
      } else {
        int64_t d = etu_fkey(t, want->data, i) - etu_fkey(t, got, i);
        d = d < 0 ? -d : d;
        if (d > r->max_ulp) r->max_ulp = d;
        if (fabs(a - b) > r->max_abs && !isinf(a)) r->max_abs = fabs(a - b);
        ok = d <= ulp || fabs(a - b) <= atol;
      }
    } else {
      ok = !memcmp(want->data + i * es, (const uint8_t *)got + i * es, (size_t)es);
    }
    if (!ok && r->bad++ == 0) {
      if (hlo_type_is_float(t))
        snprintf(r->first_bad, sizeof r->first_bad, "leaf %d elem %lld: want %.9g got %.9g (%s)", leaf,
                 (long long)i, hlo_load_f64(t, want->data, i), hlo_load_f64(t, got, i), hlo_type_name(t));
      else
        snprintf(r->first_bad, sizeof r->first_bad, "leaf %d elem %lld: want %llu got %llu (%s)", leaf,
                 (long long)i, (unsigned long long)hlo_load_u64(t, want->data, i),
                 (unsigned long long)hlo_load_u64(t, got, i), hlo_type_name(t));
    }
  }
}

/* ---- one run -------------------------------------------------------------------------------- */

typedef void (*etu_kernel_fn)(void **bufs, int64_t begin, int64_t end);

/* Emits, compiles and looks up |fusion|; *k gets the kernel description. */
static inline hj_status etu_compile(etu_env *env, const hlo_instr *fusion, const etu_opts *o,
                                    emit_kernel *k, etu_kernel_fn *fn) {
  char name[64];
  cpu_jit_unique_name(env->jit, "etu_kernel", name, sizeof name);
  cpu_jit_module m;
  hj_status st = cpu_jit_module_create(env->jit, name, &m);
  if (st) return st;
  emit_module em;
  emit_module_init(&em, env->ctx, m.llctx, m.mod, &env->target);
  if (o->force_loop) {
    memset(k, 0, sizeof *k);
    st = emit_loop_fusion(&em, fusion, name, k);
  } else {
    st = emit_fusion(&em, fusion, name, o->dus_inplace, k);
  }
  emit_module_dispose(&em);
  if (!st) st = cpu_jit_optimize(env->jit, m.mod);
  if (!st && o->ir) {
    char *s = LLVMPrintModuleToString(m.mod);
    *o->ir = strdup(s);
    LLVMDisposeMessage(s);
  }
  if (st) {
    cpu_jit_module_dispose(&m);
    return st;
  }
  if ((st = cpu_jit_add_module(env->jit, &m, NULL))) return st;
  void *addr = NULL;
  if ((st = cpu_jit_lookup(env->jit, k->name, &addr))) return st;
  *fn = (etu_kernel_fn)addr;
  return HJ_OK;
}

/* Runs |fusion| against the evaluator (see the file comment). */
static inline hj_status etu_run_fusion(etu_env *env, const hlo_instr *fusion, const etu_opts *o,
                                       etu_report *r) {
  memset(r, 0, sizeof *r);
  emit_kernel k;
  etu_kernel_fn fn = NULL;
  hj_status st = etu_compile(env, fusion, o, &k, &fn);
  if (st) return st;
  r->kind = k.kind;
  r->parallel_n = k.parallel_n;
  snprintf(r->kernel, sizeof r->kernel, "%s", k.name);
  int nin = fusion->noperands;
  hlo_literal **in = calloc((size_t)nin + 1, sizeof *in), *want = NULL;
  for (int i = 0; i < nin && !st; i++) {
    if (!(in[i] = hlo_literal_new(env->ctx, &fusion->operands[i]->shape))) st = HJ_ERR_OOM;
    else etu_fill(in[i], o->seed * 1000003u + (uint64_t)i, o->edges);
    if (!st && o->fill) o->fill(i, in[i], o->user);
  }
  if (!st) st = hlo_eval_computation(env->ctx, fusion->calls[0], in, nin, &want);
  const hlo_literal *leaves[64];
  int nl = 0;
  if (!st) {
    if (want->shape.type == HLO_TUPLE)
      for (int e = 0; e < want->nelems && nl < 64; e++) leaves[nl++] = want->elems[e];
    else leaves[nl++] = want;
  }
  void *bufs[130], *outs2[64];
  for (int i = 0; i < nin && !st; i++) bufs[i] = in[i]->data;
  for (int e = 0; e < nl && !st; e++) {
    size_t nb = (size_t)want->nbytes, sz = leaves[e]->nbytes ? (size_t)leaves[e]->nbytes : 1;
    (void)nb;
    bufs[nin + e] = malloc(sz);
    outs2[e] = malloc(sz);
    memset(bufs[nin + e], 0xcd, sz);
    r->numel += hlo_shape_numel(&leaves[e]->shape);
  }
  if (!st) {
    fn(bufs, 0, k.parallel_n);
    for (int e = 0; e < nl; e++) etu_compare(leaves[e], bufs[nin + e], o->ulp, o->atol, o->bitwise, r, e);
    /* the same in three uneven chunks, into poisoned buffers: bitwise equal */
    void *first[64];
    for (int e = 0; e < nl; e++) {
      first[e] = bufs[nin + e];
      bufs[nin + e] = outs2[e];
      memset(outs2[e], 0x5a, leaves[e]->nbytes ? (size_t)leaves[e]->nbytes : 1);
    }
    int64_t n = k.parallel_n, a = n / 7, b = n / 2 + (n > 2);
    if (b > n) b = n;
    fn(bufs, 0, a);
    fn(bufs, a, b);
    fn(bufs, b, n);
    for (int e = 0; e < nl; e++) {
      if (memcmp(first[e], outs2[e], (size_t)leaves[e]->nbytes) && r->bad++ == 0)
        snprintf(r->first_bad, sizeof r->first_bad, "leaf %d: chunked run [0,%lld,%lld,%lld) differs",
                 e, (long long)a, (long long)b, (long long)n);
      free(first[e]);
      free(outs2[e]);
    }
  }
  if (r->bad && !o->quiet)
    print_message("etu: %s (%s, parallel_n %lld): %lld of %lld elements differ, max ulp %lld; "
                  "first: %s\n", fusion->name, emit_kind_name(r->kind), (long long)r->parallel_n,
                  (long long)r->bad, (long long)r->numel, (long long)r->max_ulp, r->first_bad);
  for (int i = 0; i < nin; i++) hlo_literal_free(in[i]);
  free(in);
  hlo_literal_free(want);
  return st;
}

/* Parses |text|, picks |instr| (NULL: the entry root), wraps it unless it is a fusion,
   and runs it. */
static inline hj_status etu_run_text(etu_env *env, const char *text, const char *instr,
                                     const etu_opts *o, etu_report *r) {
  hlo_module *m = NULL;
  memset(r, 0, sizeof *r);
  hj_status st = hlo_parse_module(env->ctx, text, strlen(text), "etu", &m);
  if (st) return st;
  hlo_instr *ins = instr ? etu_find(m, instr) : m->entry ? m->entry->root : NULL;
  if (!ins) st = hj__err(env->ctx, HJ_ERR_INVALID_ARG, "etu: no instruction '%s'", instr ? instr : "(root)");
  if (!st && ins->op != HLO_OP_FUSION && !(ins = etu_wrap(m, ins)))
    st = hj__err(env->ctx, HJ_ERR_INVALID_ARG, "etu: cannot wrap");
  if (!st) st = etu_run_fusion(env, ins, o, r);
  hlo_module_free(m);
  return st;
}

/* Fails the test unless the run succeeded with no mismatch. */
#define ETU_CHECK(env, text, instr, opts)                                                   \
  do {                                                                                    \
    etu_report r_;                                                                        \
    hj_status s_ = etu_run_text((env), (text), (instr), (opts), &r_);                     \
    if (s_) fail_msg("%s: %s\n%s", hj_status_name(s_), hj_ctx_error((env)->ctx), (text)); \
    if (r_.bad) fail_msg("%lld mismatches (max ulp %lld): %s\n%s", (long long)r_.bad,     \
                         (long long)r_.max_ulp, r_.first_bad, (text));                    \
  } while (0)


/* ---- pieces for tests that drive the emitters themselves --------------------------------
   (test_emit_heroes.c, test_emit_rownorm.c): an interpreter context with the JIT's host
   target, their own fusions, compiles and runs. */

/* env->ctx from tu_ctx() (the interpreter backend), env->jit, and env->target from the
   JIT's host CPU features (printed). 0, or -1 when the JIT cannot be created (a cmocka
   group setup). Free with etu_env_free. */
static inline int etu_env_init_host(etu_env *env) {
  memset(env, 0, sizeof *env);
  env->ctx = tu_ctx();
  if (cpu_jit_create(env->ctx, &env->jit) != HJ_OK) return -1;
  const char *feat = cpu_jit_cpu_features(env->jit);
  env->target.vector_bytes = strstr(feat, "+avx512f") ? 64 : strstr(feat, "+avx2") ? 32 : 16;
  env->target.has_fma = strstr(feat, "+fma") != NULL;
  env->target.has_f16c = strstr(feat, "+f16c") != NULL;
  print_message("host %s, vector_bytes %d\n", cpu_jit_cpu_name(env->jit), env->target.vector_bytes);
  return 0;
}

/* A kInput fusion instruction "|prefix|.fusion" calling |c|, fed by one parameter per
   parameter of |c|, in a scratch computation "|prefix|.wrap" of |m|. */
static inline hlo_instr *etu_wrap_comp(hlo_module *m, hlo_comp *c, const char *prefix) {
  char nm[64];
  snprintf(nm, sizeof nm, "%s.wrap", prefix);
  hlo_comp *w = hlo_comp_new(m, nm);
  hlo_instr *ps[64];
  int n = (int)arrlen(c->params);
  assert_true(n <= 64);
  for (int i = 0; i < n; i++) {
    ps[i] = hlo_instr_new(w, HLO_OP_PARAMETER, NULL, &c->params[i]->shape, NULL, 0);
    ps[i]->index = i;
    arrput(w->params, ps[i]);
  }
  snprintf(nm, sizeof nm, "%s.fusion", prefix);
  hlo_instr *f = hlo_instr_new(w, HLO_OP_FUSION, nm, &c->root->shape, ps, n);
  hlo_instr_set_calls(f, &c, 1);
  f->fusion_kind = HLO_FUSION_INPUT;
  w->root = f;
  f->parent = w;
  return f;
}

/* A fresh JIT module named after |prefix| (*name, |nname| bytes) and an emit_module on it
   for env->target: emit into *em, emit_module_dispose it, then etu_jit_finish (or
   cpu_jit_module_dispose *m). */
static inline void etu_jit_begin(etu_env *env, const char *prefix, char *name, size_t nname,
                                 cpu_jit_module *m, emit_module *em) {
  cpu_jit_unique_name(env->jit, prefix, name, nname);
  CHECK_OK(env->ctx, cpu_jit_module_create(env->jit, name, m));
  emit_module_init(em, env->ctx, m->llctx, m->mod, &env->target);
}

/* Optimises *m (|ir|: receives the optimised IR, free with LLVMDisposeMessage), adds it to
   the JIT and returns kernel |kernel|; fails the test on an error. */
static inline etu_kernel_fn etu_jit_finish(etu_env *env, cpu_jit_module *m, const char *kernel,
                                           char **ir) {
  CHECK_OK(env->ctx, cpu_jit_optimize(env->jit, m->mod));
  if (ir) *ir = LLVMPrintModuleToString(m->mod);
  CHECK_OK(env->ctx, cpu_jit_add_module(env->jit, m, NULL));
  void *addr = NULL;
  CHECK_OK(env->ctx, cpu_jit_lookup(env->jit, kernel, &addr));
  return (etu_kernel_fn)addr;
}

/* Uniform in [0, 1): an LCG step of *state. */
static inline double etu_rand01(uint64_t *state) {
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(*state >> 11) * 0x1.0p-53;
}

/* Leaves of a (tuple) literal, depth first, appended at out[*n]. */
static inline void etu_leaves(hlo_literal *l, hlo_literal **out, int *n) {
  if (l->shape.type != HLO_TUPLE) { out[(*n)++] = l; return; }
  for (int i = 0; i < l->nelems; i++) etu_leaves(l->elems[i], out, n);
}

/* fn(bufs, ...) over [0, |n|) in |chunks| chunks (tp_chunk_range), the last chunk first. */
static inline void etu_run_chunks(etu_kernel_fn fn, int64_t n, void **bufs, int chunks) {
  for (int c = chunks - 1; c >= 0; c--) {
    int64_t b, e;
    tp_chunk_range(n, chunks, c, &b, &e);
    if (e > b) fn(bufs, b, e);
  }
}

static inline double etu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Best of |reps| single-threaded runs of fn(bufs, 0, |n|), seconds. */
static inline double etu_best_time(etu_kernel_fn fn, int64_t n, void **bufs, int reps) {
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    double t0 = etu_now();
    fn(bufs, 0, n);
    double t = etu_now() - t0;
    if (t < best) best = t;
  }
  return best;
}

#endif
