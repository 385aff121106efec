/* test_fusion_fuzz.c — differential fuzzing of the optimising pipeline and of the CPU
   backend (issue 4): 1,000 random well-typed HLO graphs of up to 30 ops (elementwise,
   broadcast, reduce, dot, transpose, slice, concatenate, select, reshape; 1 graph in 16
   also a panel-order dot, below) from a fixed-seed PRNG. For each graph:
   (a-c) the evaluator must give the same bits on the graph after the fusion passes and
         the scheduler alone, after the whole pipeline, and after dot canonicalisation and
         the pipeline (the CPU backend's order);
   (d)   the graph compiled by hj_compile_module on a CPU context (the backend's own
         pipeline: dot canonicalisation, passes with fusion, the partitioner, wrapping,
         emission, LLVM O3) must match the evaluator on the UNOPTIMISED graph: integers
         and preds exactly, floats within the tolerance stated in fusion_testutil.h
         (ftu_cpu_check: twice each element's measured sensitivity to rounding, NaN/inf
         positions equal), and no fusion may hit an emitter error (hj_exec_stats
         emit_errors). The test prints how many graphs compiled with 0 evaluator
         fallbacks, the compile time, and how many output elements matched bitwise,
         within tolerance, or were ill-conditioned (not compared).
   A failing graph is shrunk — instructions replaced by parameters, tuple outputs dropped,
   the root replaced by one of its tuple operands, while it still fails the same way — and
   written to build/fusion-fuzz-failures/; copy it into tests/fixtures/fuzz_regress/
   (with a comment saying what it caught), where every file is rerun by this test through
   (a)-(d), and must also compile with 0 evaluator fallbacks.

   Environment: HLOJIT_FUZZ_GRAPHS (or HLOJIT_FUZZ_N) the number of graphs (1000; the
   ASan run uses 100), HLOJIT_FUZZ_SEED the first seed (1), HLOJIT_FUZZ_JOBS the worker
   processes (default: the online CPUs, at most 16; LLVM compiles one module at a time
   per process, ~50-100 ms a graph, so 1,000 graphs take about a minute per core),
   HLOJIT_FUZZ_VERBOSE=1 names the graphs that fell back to the evaluator.

   The generator, and what its panel-order dots (1 graph in 16) are, is in fusion_fuzz_gen.h. */
#include "testutil.h"
#include "fusion_testutil.h"
#include "fusion_fuzz_gen.h"
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- checking and shrinking ---------------------------------------------------------------- */

/* The CPU backend's context: one JIT and one thread pool for every graph. */
static hj_ctx_t *fz_cpu;
static int fz_rounds = 2;

/* 0: |m| passes; 1: values differ after the fusion passes alone; 2: after the whole
   pipeline; 3: after dot canonicalisation and the pipeline; 4: a pass failed; 5: the CPU
   backend's outputs differ from the evaluator on |m| (ftu_cpu_check's tolerance); 6: the
   CPU backend fails to compile or run it; 7: an emitter error (a kernel fell back to the
   evaluator for a reason other than HJ_ERR_UNSUPPORTED); -1: the evaluator cannot run
   the original (not counted). |t| (may be NULL) collects the CPU figures. */
static int fz_check(const hlo_module *m, char *why, size_t nwhy, ftu_tally *t) {
  static const char *names[] = { "fusion passes", "pipeline", "dot-canon + pipeline" };
  for (int mode = 0; mode < 3; mode++) {
    hlo_module *o = hlo_module_clone(m);
    if (!o) fail_msg("clone failed");
    hj_status st = mode == 2 ? ftu_canon_optimize(o) : mode ? ftu_optimize(o) : ftu_fuse_only(o);
    int same = st == HJ_OK ? ftu_same(m, o, 2) : 3;
    hlo_module_free(o);
    if (st != HJ_OK) {
      snprintf(why, nwhy, "%s: %s", names[mode], hj_ctx_error(ftu_ctx));
      return 4;
    }
    if (same == -1) return -1;
    if (same != 1) {
      snprintf(why, nwhy, "%s: %s", names[mode], same == 0 ? "values differ" : hj_ctx_error(ftu_ctx));
      return mode + 1;
    }
  }
  char w[1024];
  int r = ftu_cpu_check(fz_cpu, m, fz_rounds, t, w, sizeof w);
  if (r > 0) snprintf(why, nwhy, "%s", w);
  return r <= 0 ? r : r == 1 ? 5 : r == 2 ? 6 : 7;
}

/* A copy of |m| where entry instruction |k| is a new parameter of its shape (NULL when it
   cannot be: parameters, the root, tuples). */
static hlo_module *fz_cut(const hlo_module *m, ptrdiff_t k) {
  const hlo_instr *x = m->entry->instrs[k];
  if (x->op == HLO_OP_PARAMETER || x == m->entry->root || !hlo_shape_is_array(&x->shape))
    return NULL;
  hlo_module *c = hlo_module_clone(m);
  hlo_comp *e = c->entry;
  hlo_instr *old = e->instrs[k];
  char name[64];
  snprintf(name, sizeof name, "cut.%d", c->next_id);
  hlo_instr *p = hlo_instr_new_before(e, old, HLO_OP_PARAMETER, name, &old->shape, NULL, 0);
  p->index = arrlen(e->params);
  arrput(e->params, p);
  hlo_replace_all_uses(e, old, p);
  bool ch;
  hlo_comp_dce(e, &ch);
  return c;
}

/* A copy of |m| whose root is operand |i| of the root tuple. */
static hlo_module *fz_reroot(const hlo_module *m, int i) {
  const hlo_instr *r = m->entry->root;
  if (r->op != HLO_OP_TUPLE || i >= r->noperands || r->noperands < 2) return NULL;
  hlo_module *c = hlo_module_clone(m);
  hlo_comp_set_root(c->entry, c->entry->root->operands[i]);
  bool ch;
  hlo_comp_dce(c->entry, &ch);
  return c;
}

/* A copy of |m| whose root tuple lacks operand |i|. */
static hlo_module *fz_drop_output(const hlo_module *m, int i) {
  const hlo_instr *r = m->entry->root;
  if (r->op != HLO_OP_TUPLE || i >= r->noperands || r->noperands < 3) return NULL;
  hlo_module *c = hlo_module_clone(m);
  hlo_comp *e = c->entry;
  hlo_instr *old = e->root, *ops[64];
  int n = 0;
  for (int k = 0; k < old->noperands && n < 64; k++)
    if (k != i) ops[n++] = old->operands[k];
  hlo_shape *leaves = hlo_alloc(c, sizeof(hlo_shape) * (size_t)n);
  for (int k = 0; k < n; k++) leaves[k] = ops[k]->shape;
  hlo_shape ts = { .type = HLO_TUPLE, .ntuple = n, .tuple = leaves };
  char name[64];
  snprintf(name, sizeof name, "out.%d", c->next_id);
  hlo_instr *t = hlo_instr_new(e, HLO_OP_TUPLE, name, &ts, ops, n);
  hlo_comp_set_root(e, t);
  hlo_remove_instr(e, old);
  bool ch;
  hlo_comp_dce(e, &ch);
  return c;
}

/* Drops parameters nobody uses (renumbering the rest). */
static void fz_drop_params(hlo_module *m) {
  hlo_comp *e = m->entry;
  for (ptrdiff_t i = arrlen(e->params) - 1; i >= 0; i--) {
    if (hlo_user_count(e, e->params[i]) || e->root == e->params[i]) continue;
    hlo_instr *p = e->params[i];
    for (ptrdiff_t k = 0; k < arrlen(e->instrs); k++)
      if (e->instrs[k] == p) { arrdel(e->instrs, k); break; }
    arrdel(e->params, i);
  }
  for (ptrdiff_t i = 0; i < arrlen(e->params); i++) e->params[i]->index = i;
}

/* Greedy shrink of |m| (owned) while fz_check keeps returning |kind|. */
static hlo_module *fz_shrink(hlo_module *m, int kind) {
  char why[1200];
  for (bool progress = true; progress;) {
    progress = false;
    int nout = m->entry->root->op == HLO_OP_TUPLE ? m->entry->root->noperands : 0;
    for (int i = 0; i < 3 + nout && !progress; i++) {
      hlo_module *c = i < 3 ? fz_reroot(m, i) : fz_drop_output(m, i - 3);
      if (c && fz_check(c, why, sizeof why, NULL) == kind) {
        hlo_module_free(m);
        m = c;
        progress = true;
      } else if (c) {
        hlo_module_free(c);
      }
    }
    for (ptrdiff_t k = arrlen(m->entry->instrs) - 1; k >= 0 && !progress; k--) {
      hlo_module *c = fz_cut(m, k);
      if (!c) continue;
      fz_drop_params(c);
      if (fz_check(c, why, sizeof why, NULL) == kind) {
        hlo_module_free(m);
        m = c;
        progress = true;
      } else {
        hlo_module_free(c);
      }
    }
  }
  return m;
}

static double fz_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void fz_save(const hlo_module *m, uint64_t seed) {
  mkdir("build", 0777);
  mkdir("build/fusion-fuzz-failures", 0777);
  char path[256], *text = NULL;
  snprintf(path, sizeof path, "build/fusion-fuzz-failures/fuzz_%llu.hlo", (unsigned long long)seed);
  if (hlo_print_module(m, &text) != HJ_OK) return;
  FILE *f = fopen(path, "w");
  if (f) {
    fputs(text, f);
    fclose(f);
    printf("  shrunk failing graph written to %s\n", path);
  }
  free(text);
}

/* ---- tests ----------------------------------------------------------------------------------- */

/* What a run over some seeds found (summed over the workers). */
typedef struct fz_sum {
  int passed, unevaluable, failed[8], kb, ka, fusions, kinds[HLO_FUSION_KIND_COUNT], multi, rownorm;
  int dus_multi;                        /* fusions with two or more in-place candidates */
  /* panel-order dots [0] of the CPU's nr, [1] of another: in the graphs checked, at M = 1,
     in graphs that passed (a)-(d), and of those with no evaluator fallback */
  int panels[2], panels_m1[2], panels_passed[2], panels_clean[2];
  ftu_tally ct;
} fz_sum;

/* Counts |m|'s panel-order dots into |S|'s [0] (the CPU's nr) and [1] (another); with
   |passed|, into the passed and clean (|fallbacks| 0) counts instead. */
static void fz_count_panels(const hlo_module *m, fz_sum *S, bool passed, int fallbacks) {
  for (ptrdiff_t i = 0; i < arrlen(m->entry->instrs); i++) {
    const hlo_instr *d = m->entry->instrs[i];
    if (!hlo_dot_is_panels(d, NULL)) continue;
    int o = d->operands[1]->shape.dims[3] != fz_panel_nr;
    if (passed) {
      S->panels_passed[o]++;
      S->panels_clean[o] += fallbacks == 0;
    } else {
      S->panels[o]++;
      S->panels_m1[o] += d->shape.dims[0] == 1;
    }
  }
}

/* Checks the graphs of seeds seed0 + i, i in [0, n) with i % nw == w. */
static void fz_run(uint64_t seed0, int n, int w, int nw, fz_sum *S) {
  for (int i = w; i < n; i += nw) {
    uint64_t seed = seed0 + (uint64_t)i;
    char *text = fz_module(seed), why[1200];
    hlo_module *m = NULL;
    if (hlo_parse_module(ftu_ctx, text, strlen(text), "fuzz", &m) != HJ_OK)
      fail_msg("seed %llu: generated module does not parse: %s\n%s", (unsigned long long)seed,
               hj_ctx_error(ftu_ctx), text);
    free(text);
    fz_sinks_to_root(m);
    fz_count_panels(m, S, false, 0);
    S->ct.last_fallbacks = 0;
    int r = fz_check(m, why, sizeof why, &S->ct);
    if (S->ct.last_fallbacks && getenv("HLOJIT_FUZZ_VERBOSE"))
      printf("  seed %llu: %d evaluator fallback(s)\n", (unsigned long long)seed, S->ct.last_fallbacks);
    if (r == 0) {
      S->passed++;
      fz_count_panels(m, S, true, S->ct.last_fallbacks);
      hlo_module *o = hlo_module_clone(m);
      if (ftu_optimize(o) == HJ_OK) {
        S->kb += hlo_count_kernels(m);
        S->ka += hlo_count_kernels(o);
        for (ptrdiff_t k = 0; k < arrlen(o->entry->instrs); k++) {
          const hlo_instr *f = o->entry->instrs[k];
          if (f->op != HLO_OP_FUSION) continue;
          S->fusions++;
          S->kinds[f->fusion_kind]++;
          S->multi += f->calls[0]->root->op == HLO_OP_TUPLE;
          S->dus_multi += __builtin_popcountll(hlo_fusion_dus_mask(f)) >= 2;
          S->rownorm += f->fusion_kind == HLO_FUSION_INPUT && f->calls[0]->root->op != HLO_OP_TUPLE &&
                        hlo_shape_numel(&f->shape) > hlo_shape_numel(&hlo_fusion_hero(f->calls[0])->shape);
        }
      }
      hlo_module_free(o);
    } else if (r < 0) {
      S->unevaluable++;
    } else {
      S->failed[r]++;
      printf("  seed %llu fails (%s); shrinking\n", (unsigned long long)seed, why);
      fflush(stdout);
      m = fz_shrink(m, r);
      fz_save(m, seed);
    }
    fflush(stdout);
    hlo_module_free(m);
  }
}

static void fz_add(fz_sum *a, const fz_sum *b) {
  a->passed += b->passed; a->unevaluable += b->unevaluable;
  for (int k = 0; k < 8; k++) a->failed[k] += b->failed[k];
  a->kb += b->kb; a->ka += b->ka; a->fusions += b->fusions; a->multi += b->multi; a->rownorm += b->rownorm;
  a->dus_multi += b->dus_multi;
  for (int k = 0; k < HLO_FUSION_KIND_COUNT; k++) a->kinds[k] += b->kinds[k];
  for (int k = 0; k < 2; k++) {
    a->panels[k] += b->panels[k]; a->panels_m1[k] += b->panels_m1[k];
    a->panels_passed[k] += b->panels_passed[k]; a->panels_clean[k] += b->panels_clean[k];
  }
  ftu_tally *x = &a->ct;
  const ftu_tally *y = &b->ct;
  x->graphs += y->graphs; x->compiled += y->compiled; x->clean += y->clean;
  x->fallback_graphs += y->fallback_graphs; x->emit_error_graphs += y->emit_error_graphs;
  x->runtime_ops += y->runtime_ops; x->elems += y->elems; x->exact += y->exact;
  x->loose += y->loose; x->illcond += y->illcond; x->compile_ms += y->compile_ms;
  x->max_err_ratio = fmax(x->max_err_ratio, y->max_err_ratio);
  x->passes_ms += y->passes_ms; x->emit_ms += y->emit_ms; x->optimize_ms += y->optimize_ms;
  x->codegen_ms += y->codegen_ms;
  x->fusions += y->fusions;
  for (int k = 0; k < 5; k++) x->kernels[k] += y->kernels[k];
  x->inplace_updates += y->inplace_updates;
}

/* Worker processes: this very binary, re-executed with HLOJIT_FUZZ_WORKER=w/W (a fresh
   process: no LLVM or thread-pool state crosses a fork), each checking every W-th seed
   and ending its output with "FZSUM <hex bytes of its fz_sum>". LLVM compiles one
   module at a time per process, so W processes are what uses W cores. */
static const char fz_tag[] = "FZSUM ";

static int fz_worker_main(const char *spec) {
  int w = 0, nw = 1;
  if (sscanf(spec, "%d/%d", &w, &nw) != 2 || nw < 1 || w < 0 || w >= nw) return 2;
  const char *ns = getenv("HLOJIT_FUZZ_GRAPHS"), *ss = getenv("HLOJIT_FUZZ_SEED");
  fz_sum S;
  memset(&S, 0, sizeof S);
  fz_run(ss ? strtoull(ss, NULL, 10) : 1, ns ? atoi(ns) : 1000, w, nw, &S);
  printf("%s", fz_tag);
  for (size_t i = 0; i < sizeof S; i++) printf("%02x", ((unsigned char *)&S)[i]);
  printf("\n");
  return 0;
}

/* Runs |nw| workers; false when one of them could not be started or did not report. */
static bool fz_run_workers(int nw, fz_sum *S) {
  char exe[4096];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len <= 0) return false;
  exe[len] = 0;
  FILE *p[16] = { 0 };
  for (int w = 0; w < nw; w++) {
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "HLOJIT_FUZZ_WORKER=%d/%d '%s'", w, nw, exe);
    if (!(p[w] = popen(cmd, "r"))) return false;
  }
  bool ok = true;
  for (int w = 0; w < nw; w++) {
    char line[4096];
    bool got = false;
    while (fgets(line, sizeof line, p[w])) {
      if (strncmp(line, fz_tag, strlen(fz_tag)) != 0) { fputs(line, stdout); continue; }
      fz_sum one;
      const char *h = line + strlen(fz_tag);
      got = strlen(h) >= 2 * sizeof one;
      for (size_t i = 0; got && i < sizeof one; i++) {
        unsigned v;
        got = sscanf(h + 2 * i, "%2x", &v) == 1;
        ((unsigned char *)&one)[i] = (unsigned char)v;
      }
      if (got) fz_add(S, &one);
    }
    int rc = pclose(p[w]);
    if (!got || rc != 0) {
      printf("  worker %d/%d failed (exit status %d, %s)\n", w, nw, rc, got ? "reported" : "no report");
      ok = false;
    }
  }
  return ok;
}

static void test_fuzz(void **state) {
  const char *ns = getenv("HLOJIT_FUZZ_GRAPHS"), *ss = getenv("HLOJIT_FUZZ_SEED"), *js = getenv("HLOJIT_FUZZ_JOBS");
  if (!ns) ns = getenv("HLOJIT_FUZZ_N");
  if (ns) setenv("HLOJIT_FUZZ_GRAPHS", ns, 1);
  int n = ns ? atoi(ns) : 1000;
  long nw = js ? atol(js) : sysconf(_SC_NPROCESSORS_ONLN);
  if (nw < 1) nw = 1;
  if (nw > 16) nw = 16;
  if (nw > n / 20) nw = n / 20 > 1 ? n / 20 : 1;
  uint64_t seed0 = ss ? strtoull(ss, NULL, 10) : 1;
  fz_sum S;
  memset(&S, 0, sizeof S);
  double t0 = fz_now_ms();
  fflush(stdout);
  if (nw > 1) assert_true(fz_run_workers((int)nw, &S));
  else fz_run(seed0, n, 0, 1, &S);
  const ftu_tally *ct = &S.ct;
  const int *failed = S.failed;
  printf("  %d random graphs: %d bitwise equal, %d not evaluable, failures: fusion passes %d, "
         "pipeline %d, dot-canon + pipeline %d, pass errors %d; kernels %d -> %d (%d fusions)\n",
         n, S.passed, S.unevaluable, failed[1], failed[2], failed[3], failed[4], S.kb, S.ka, S.fusions);
  printf("  fusions made: %d kLoop, %d kInput (%d row-normalisation), %d kOutput, %d multi-output\n",
         S.kinds[HLO_FUSION_LOOP], S.kinds[HLO_FUSION_INPUT], S.rownorm, S.kinds[HLO_FUSION_OUTPUT], S.multi);
  printf("  panel-order dots: %d of the CPU's nr %lld (%d at M = 1), %d passed (a)-(d), %d of them with 0 "
         "evaluator fallbacks; %d of another nr (%d at M = 1), %d passed, %d with 0 fallbacks\n",
         S.panels[0], (long long)fz_panel_nr, S.panels_m1[0], S.panels_passed[0], S.panels_clean[0],
         S.panels[1], S.panels_m1[1], S.panels_passed[1], S.panels_clean[1]);
  printf("  CPU backend: %d compiled (%lld fusions, %.1f ms each), %d with 0 evaluator fallbacks, %d with fallbacks "
         "(%d runtime ops), %d with emitter errors; failures: values %d, compile/run %d, emitter errors %d\n",
         ct->compiled, (long long)ct->fusions, ct->compiled ? ct->compile_ms / ct->compiled : 0.0, ct->clean, ct->fallback_graphs,
         ct->runtime_ops, ct->emit_error_graphs, failed[5], failed[6], failed[7]);
  printf("  cache updates (fz_cache_updates): %d dus kernels, %d outputs written in place; %d fusions with two "
         "or more updates\n", (int)ct->kernels[4], ct->inplace_updates, S.dus_multi);
  if (ct->compiled)
    printf("  CPU compile time per graph: passes %.1f ms, emission %.1f ms, O3 %.1f ms, codegen %.1f ms\n",
           ct->passes_ms / ct->compiled, ct->emit_ms / ct->compiled, ct->optimize_ms / ct->compiled,
           ct->codegen_ms / ct->compiled);
  printf("  CPU outputs: %lld elements, %lld bitwise equal, %lld within tolerance (max |err|/tol %.3f), "
         "%lld of them loosely (sensitivity > 2^-10), %lld ill-conditioned (not compared)\n",
         (long long)ct->elems, (long long)ct->exact, (long long)(ct->elems - ct->exact - ct->illcond),
         ct->max_err_ratio, (long long)ct->loose, (long long)ct->illcond);
  printf("  %.1f s with %ld worker process(es) (HLOJIT_FUZZ_JOBS)\n", (fz_now_ms() - t0) / 1e3, nw);
  int nfail = 0;
  for (int k = 1; k < 8; k++) nfail += failed[k];
  assert_int_equal(nfail, 0);
  assert_int_equal(S.passed + S.unevaluable, n);
  if (n >= 500) assert_true(ct->inplace_updates > 0);   /* the in-place path did run */
}

/* The CPU comparison is not vacuous: on the evaluator's own result of a module with
   transcendentals and a reduction, a change of 2^-12 relative in one element is caught,
   a change of one ulp is accepted. */
static void test_cpu_tolerance_bites(void **state) {
  static const char text[] =
    "HloModule tol\nadd_f {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
    "ENTRY main {\n  x = f32[4,8] parameter(0)\n  y = f32[4,8] parameter(1)\n  t = f32[4,8] tanh(x)\n"
    "  e = f32[4,8] exponential(y)\n  m = f32[4,8] multiply(t, e)\n  z = f32[] constant(0)\n"
    "  r = f32[4] reduce(m, z), dimensions={1}, to_apply=add_f\n  ROOT out = (f32[4,8], f32[4]) tuple(m, r)\n}\n";
  hlo_module *m = NULL;
  CHECK_OK(ftu_ctx, hlo_parse_module(ftu_ctx, text, strlen(text), "tol", &m));
  hlo_module *mods[FTU_PROBES + 1];
  for (int k = 0; k <= FTU_PROBES; k++) assert_non_null(mods[k] = ftu_probe_module(m, k));
  hlo_literal **args = ftu_args(m, 5), *x = NULL, *ref[FTU_PROBES + 1] = { 0 };
  CHECK_OK(ftu_ctx, hlo_eval_module(ftu_ctx, m, args, 2, &x));
  assert_true(ftu_probe_eval(mods, args, 2, ref));
  int caught = 0, accepted = 0, tried = 0;
  for (int leaf = 0; leaf < 2; leaf++) {
    hlo_literal *l = x->elems[leaf];
    for (int64_t i = 0; i < hlo_shape_numel(&l->shape); i++) {
      float v = ((float *)l->data)[i];
      if (!isfinite(v) || fabsf(v) < 1e-3f) continue;
      tried++;
      for (int big = 0; big < 2; big++) {
        hlo_literal *y = hlo_literal_clone(ftu_ctx, x);
        ((float *)y->elems[leaf]->data)[i] = big ? v * (1 + 1.0f / 4096) : nextafterf(v, INFINITY);
        ftu_tally t = { 0 };
        char why[512];
        bool ok = ftu_compare(x, y, ref[0], ref + 1, FTU_PROBES, &t, why, sizeof why);
        if (big) caught += !ok;
        else accepted += ok;
        hlo_literal_free(y);
      }
    }
  }
  printf("  %d elements: a 2^-12 relative error caught in %d, one ulp accepted in %d\n", tried, caught, accepted);
  assert_true(tried > 20);
  assert_int_equal(caught, tried);
  assert_int_equal(accepted, tried);
  for (int k = 0; k <= FTU_PROBES; k++) {
    hlo_literal_free(ref[k]);
    hlo_module_free(mods[k]);
  }
  hlo_literal_free(x);
  ftu_free_args(args, 2);
  hlo_module_free(m);
}

static void test_fuzz_regressions(void **state) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/fixtures/fuzz_regress", tu_data_dir());
  DIR *d = opendir(dir);
  if (!d) {
    printf("  no regressions in %s\n", dir);
    return;
  }
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".hlo") != 0) continue;
    char path[8192], why[1200];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    hlo_module *m = ftu_parse_file(path);
    if (!m) fail_msg("%s: %s", path, hj_ctx_error(ftu_ctx));
    ftu_tally t = { 0 };
    int r = fz_check(m, why, sizeof why, &t);
    if (r > 0) fail_msg("%s: %s", path, why);
    /* the generator makes no sort/scatter: every fusion of a fixture must get a kernel */
    if (t.fallback_graphs) fail_msg("%s: %d fusion(s) fell back to the evaluator on the CPU backend "
                                    "(HLOJIT_DUMP_TO's thunk dump says why)", path, t.last_fallbacks);
    hlo_module_free(m);
    n++;
  }
  closedir(d);
  printf("  %d regression graphs pass\n", n);
}

int main(void) {
  ftu_ctx = tu_ctx();
  fz_cpu = ftu_cpu_ctx_new();
  ftu_few_specials = fz_few_specials;
  int64_t kc = 0;
  if (hj_linear_panels(fz_cpu, HJ_BACKEND_CPU, 768, 768, &kc, &fz_panel_nr) != HJ_OK) fz_panel_nr = 0;
  const char *worker = getenv("HLOJIT_FUZZ_WORKER");
  if (worker) {
    int rc = fz_worker_main(worker);
    hj_ctx_destroy(fz_cpu);
    hj_ctx_destroy(ftu_ctx);
    return rc;
  }
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_cpu_tolerance_bites),
    cmocka_unit_test(test_fuzz_regressions),
    cmocka_unit_test(test_fuzz),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  hj_ctx_destroy(fz_cpu);
  hj_ctx_destroy(ftu_ctx);
  return rc;
}
