/* cpu_backend.c — the CPU backend: compile pipeline and run (DESIGN.md sections 5, 6, 8).

   compile(module):
     1. clone (the executable owns its copy; the caller keeps |m|);
     2. passes, in this order: inline_calls (the runtime has no call thunk), dot_canonicalize
        (after inlining, so dots inside called computations are seen; before wrapping, so
        the transposes/reshapes it adds get wrapped too), wrap_fusions (every op a fusion);
        the result is verified and dumped (NNN.NAME.after_passes.hlo);
     3. one program per computation run by the runtime (the entry; while condition/body and
        conditional branches, recursively): buffer assignment (runtime/buffer_assign.c) and
        a thunk skeleton, each fusion pending emission (with its dus_inplace decision and
        its in-place elementwise operand: buffer assignment asks emit_loop_inplace_ok
        whether the loop kernel reads that operand only at the element it writes);
     4. ONE LLVM module for all pending fusions: emit_classify -> EMIT_KIND_RUNTIME becomes
        an evaluator thunk; else emit_fusion -> a kernel (or a matmul plan); any error from
        the emitter (HJ_ERR_UNSUPPORTED, or a bug) deletes what it emitted and makes the
        fusion an evaluator thunk, counted and named in the thunk dump; the context's error
        is restored so a successful compile leaves no stale message;
     5. cpu_jit_optimize (O3; dumps NAME.ll / NAME.opt.ll), cpu_jit_add_module with a resource
        tracker (freed with the executable), lookups, matmul plans prepared;
     6. dumps NNN.NAME.buffer_assignment.txt and NNN.NAME.thunks.txt.
   run: th_program_run on the entry with the caller's leaf pointers; runs of one executable
   are serialised (they share its arenas), runs of different executables may overlap.

   Per context (ctx->cpu_backend, made on first use): one cpu_jit and one thread pool of
   options.num_threads threads (0: every core). Freed by hj_ctx_destroy. */
#include "cpu_jit.h"
#include "threadpool.h"
#include "cpu_matmul.h"
#include "../../hlojit_impl/emitters/emit.h"
#include "../../hlojit_impl/runtime/thunks.h"
#include <llvm-c/Analysis.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

typedef struct cpb_state {
  cpu_jit *jit;
  tp_pool *pool;
} cpb_state;

struct cpu_exec {
  hj_ctx_t *ctx;
  cpb_state *be;
  hlo_module *m;
  th_program *entry;
  cpu_jit_rt *rt;
  th_runtime run;
  struct emit_matmul_plan **matmuls;   /* stb_ds: owned, freed with the executable */
  hj_exec_stats_t stats;
  pthread_mutex_t run_mu;              /* runs share the arenas: one at a time */
};

typedef struct cpb_pending {           /* a fusion thunk waiting for its kernel */
  th_program *p;
  int thunk;
  bool dus_inplace;
  int inplace_operand;                 /* output 0 is this operand's buffer, -1 none */
} cpb_pending;

typedef struct cpb_build {
  hj_ctx_t *ctx;
  cpu_exec *x;
  cpb_pending *pending;                /* stb_ds */
  th_program **all;                    /* stb_ds: every program, for the dumps */
} cpb_build;

static atomic_int cpb_dump_seq;

static double cpb_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- per-context state ------------------------------------------------------------------ */

static hj_status cpb_state_get(hj_ctx_t *ctx, cpb_state **out) {
  if (ctx->cpu_backend) {
    *out = ctx->cpu_backend;
    return HJ_OK;
  }
  cpb_state *s = calloc(1, sizeof *s);
  if (!s) return hj__err(ctx, HJ_ERR_OOM, "CPU backend: out of memory");
  hj_status st = cpu_jit_create(ctx, &s->jit);
  if (st == HJ_OK && (st = tp_create(ctx->opt.num_threads, &s->pool)) != HJ_OK)
    hj__err(ctx, st, "CPU backend: cannot start %d threads", ctx->opt.num_threads);
  if (st != HJ_OK) {
    cpu_jit_destroy(s->jit);
    free(s);
    return st;
  }
  ctx->cpu_backend = s;
  *out = s;
  return HJ_OK;
}

void cpu_backend_ctx_free(hj_ctx_t *ctx) {
  cpb_state *s = ctx ? ctx->cpu_backend : NULL;
  if (!s) return;
  tp_destroy(s->pool);
  cpu_jit_destroy(s->jit);
  free(s);
  ctx->cpu_backend = NULL;
}

/* ---- dumps ---------------------------------------------------------------------------------- */

/* Writes |text| to DIR/NNN.NAME.WHAT; dumps never fail a compile (the error is restored). */
static void cpb_dump(hj_ctx_t *ctx, int seq, const char *name, const char *what, const char *text) {
  const char *dir = ctx->opt.dump_dir;
  if (!dir || !*dir || !text) return;
  mkdir(dir, 0777);
  char path[4096];
  snprintf(path, sizeof path, "%s/%03d.%s.%s", dir, seq, name, what);
  FILE *f = fopen(path, "wb");
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

/* ---- programs (buffer plan + thunk skeleton) ----------------------------------------------- */

static hj_status cpb_program(cpb_build *B, const hlo_comp *c, th_program **out);

static void cpb_leaves(const th_program *p, const hlo_instr *ins, ba_loc **dst) {
  int k = ba_instr_pos(&p->plan, ins);
  for (ptrdiff_t j = 0; k >= 0 && j < arrlen(p->plan.leaves[k]); j++) arrput(*dst, p->plan.leaves[k][j]);
}

/* Thunk for instruction |i| of |p| (nothing for the aliasing ops). */
static hj_status cpb_thunk(cpb_build *B, th_program *p, int i) {
  const hlo_instr *ins = p->comp->instrs[i];
  th_thunk t = { .ins = ins };
  hj_status st = HJ_OK;
  switch (ins->op) {
  case HLO_OP_PARAMETER: case HLO_OP_CONSTANT: case HLO_OP_TUPLE: case HLO_OP_GET_TUPLE_ELEMENT:
  case HLO_OP_RESHAPE: case HLO_OP_BITCAST: case HLO_OP_OPT_BARRIER:
    return HJ_OK;
  case HLO_OP_FUSION: {
    t.kind = TH_EVAL;
    for (int k = 0; k < ins->noperands; k++) cpb_leaves(p, ins->operands[k], &t.args);
    cpb_leaves(p, ins, &t.outs);
    cpb_pending pe = { p, (int)arrlen(p->thunks), p->plan.dus_inplace[i], p->plan.inplace_operand[i] };
    arrput(B->pending, pe);
    B->x->stats.fusions++;
    break;
  }
  case HLO_OP_WHILE:
    t.kind = TH_WHILE;
    cpb_leaves(p, ins->operands[0], &t.args);
    cpb_leaves(p, ins, &t.outs);
    t.scratch = p->plan.scratch[i];
    for (int k = 0; k < 2 && st == HJ_OK; k++) {
      th_program *sub = NULL;
      st = cpb_program(B, ins->calls[k], &sub);
      arrput(t.sub, sub);
    }
    break;
  case HLO_OP_CONDITIONAL:
    t.kind = TH_COND;
    cpb_leaves(p, ins->operands[0], &t.args);
    cpb_leaves(p, ins, &t.outs);
    for (int b = 0; b < ins->ncalls && st == HJ_OK; b++) {
      arrput(t.arg_off, (int)arrlen(t.args));
      cpb_leaves(p, ins->operands[b + 1], &t.args);
      th_program *sub = NULL;
      st = cpb_program(B, ins->calls[b], &sub);
      arrput(t.sub, sub);
    }
    break;
  default:
    st = hj__err(B->ctx, HJ_ERR_UNSUPPORTED, "CPU backend: no thunk for op '%s' (%s) in '%s'",
                 hlo_opcode_name(ins->op), ins->name, p->comp->name);
  }
  arrput(p->thunks, t);
  return st;
}

/* Buffer assignment's question for in-place elementwise: only loop kernels in linear mode. */
static bool cpb_may_inplace(const hlo_instr *fusion, int operand, void *ud) {
  (void)ud;
  const hlo_instr *hero = NULL;
  return emit_classify(fusion, false, &hero) == EMIT_KIND_LOOP && emit_loop_inplace_ok(fusion, operand);
}

static hj_status cpb_program(cpb_build *B, const hlo_comp *c, th_program **out) {
  th_program *p = calloc(1, sizeof *p);
  *out = p;
  if (!p) return hj__err(B->ctx, HJ_ERR_OOM, "CPU backend: out of memory");
  p->comp = c;
  arrput(B->all, p);
  int n = (int)arrlen(c->instrs);
  int64_t *scr = calloc((size_t)n + 1, sizeof *scr);
  if (!scr) return hj__err(B->ctx, HJ_ERR_OOM, "CPU backend: out of memory");
  for (int i = 0; i < n; i++)
    if (c->instrs[i]->op == HLO_OP_WHILE) scr[i] = th_while_scratch_bytes(c->instrs[i]);
  hj_status st = ba_assign_ex(B->ctx, c, scr, cpb_may_inplace, NULL, &p->plan);
  free(scr);
  if (st == HJ_OK) st = th_program_alloc(B->ctx, p);
  if (st == HJ_OK) B->x->stats.arena_bytes += p->plan.arena_bytes;
  for (int i = 0; i < n && st == HJ_OK; i++) st = cpb_thunk(B, p, i);
  for (ptrdiff_t k = 0; st == HJ_OK && k < arrlen(p->plan.copies); k++) {
    const ba_copy *cp = &p->plan.copies[k];
    th_thunk t = { .kind = TH_COPY, .ins = c->root };
    arrput(t.args, cp->src);
    ba_loc dst = { BA_OUTPUT, cp->out, cp->src.bytes };
    arrput(t.outs, dst);
    arrput(p->thunks, t);
    B->x->stats.copies++;
  }
  return st;
}

/* ---- emission -------------------------------------------------------------------------------- */

static bool cpb_has_feature(const char *features, const char *f) {
  size_t n = strlen(f);
  for (const char *s = features; s && (s = strstr(s, f)); s += n)
    if ((s == features || s[-1] == ',') && (s[n] == ',' || s[n] == 0)) return true;
  return false;
}

static emit_target cpb_target(cpu_jit *j) {
  const char *f = cpu_jit_cpu_features(j);
  emit_target t = { .gpu = false, .vector_bytes = 16 };
  if (cpb_has_feature(f, "+avx2")) t.vector_bytes = 32;
  if (cpb_has_feature(f, "+avx512f")) t.vector_bytes = 64;
  t.has_fma = cpb_has_feature(f, "+fma");
  t.has_f16c = cpb_has_feature(f, "+f16c");
  return t;
}

/* Deletes the functions emitted under |prefix| (NAME, NAME.x, NAME_x). */
static void cpb_delete_fns(LLVMModuleRef mod, const char *prefix) {
  size_t n = strlen(prefix);
  LLVMValueRef fn = LLVMGetFirstFunction(mod);
  while (fn) {
    LLVMValueRef next = LLVMGetNextFunction(fn);
    size_t len;
    const char *nm = LLVMGetValueName2(fn, &len);
    if (len >= n && strncmp(nm, prefix, n) == 0 && (len == n || nm[n] == '.' || nm[n] == '_'))
      LLVMDeleteFunction(fn);
    fn = next;
  }
}

/* Non-zero when a function emitted under |prefix| does not verify. */
static bool cpb_broken(LLVMModuleRef mod, const char *prefix) {
  size_t n = strlen(prefix);
  for (LLVMValueRef fn = LLVMGetFirstFunction(mod); fn; fn = LLVMGetNextFunction(fn)) {
    size_t len;
    const char *nm = LLVMGetValueName2(fn, &len);
    if (len >= n && strncmp(nm, prefix, n) == 0 && (len == n || nm[n] == '.' || nm[n] == '_') &&
        LLVMCountBasicBlocks(fn) > 0 && LLVMVerifyFunction(fn, LLVMReturnStatusAction))
      return true;
  }
  return false;
}

static void cpb_count(hj_exec_stats_t *s, emit_kind k) {
  switch (k) {
  case EMIT_KIND_LOOP: s->kernels_loop++; break;
  case EMIT_KIND_REDUCTION: s->kernels_reduction++; break;
  case EMIT_KIND_TRANSPOSE: s->kernels_transpose++; break;
  case EMIT_KIND_MATMUL: s->kernels_matmul++; break;
  case EMIT_KIND_DUS: s->kernels_dus++; break;
  default: break;
  }
}

/* Step 4 for one pending fusion. Returns true when a kernel was emitted. */
static bool cpb_emit_one(cpb_build *B, emit_module *em, cpb_pending *pe) {
  hj_ctx_t *ctx = B->ctx;
  th_thunk *t = &pe->p->thunks[pe->thunk];
  const hlo_instr *hero = NULL;
  emit_kind kind = emit_classify(t->ins, pe->dus_inplace, &hero);
  if (kind == EMIT_KIND_RUNTIME) {
    t->runtime_op = true;
    snprintf(t->why, sizeof t->why, "no emitter for '%s'",
             hero ? hlo_opcode_name(hero->op) : "this fusion");
    B->x->stats.evaluator_fallbacks++;
    B->x->stats.runtime_ops++;
    return false;
  }
  char name[64];
  cpu_jit_unique_name(B->x->be->jit, "hjk", name, sizeof name);
  hj_status last = ctx->last;
  char *saved = malloc(sizeof ctx->err);
  if (saved) memcpy(saved, ctx->err, sizeof ctx->err);
  ctx->err[0] = 0;
  emit_kernel k = { .kind = kind };
  hj_status st = emit_fusion_inplace(em, t->ins, name, pe->dus_inplace, pe->inplace_operand, &k);
  if (st == HJ_OK && cpb_broken(em->mod, name))
    st = hj__err(ctx, HJ_ERR_INTERNAL, "emit '%s': the LLVM verifier rejects the kernel", t->ins->name);
  if (st == HJ_OK && k.kind == EMIT_KIND_MATMUL && !k.matmul)
    st = hj__err(ctx, HJ_ERR_INTERNAL, "emit '%s': matmul kernel without a plan", t->ins->name);
  if (st != HJ_OK) {
    snprintf(t->why, sizeof t->why, "%s: %.180s", hj_status_name(st), ctx->err[0] ? ctx->err : "(no message)");
    t->emit_error = st != HJ_ERR_UNSUPPORTED;
    B->x->stats.evaluator_fallbacks++;
    B->x->stats.emit_errors += t->emit_error;
    cpb_delete_fns(em->mod, name);
    if (k.matmul) cpu_matmul_plan_free(k.matmul);
  }
  ctx->last = last;
  if (saved) memcpy(ctx->err, saved, sizeof ctx->err);
  free(saved);
  if (st != HJ_OK) return false;
  t->kind = k.kind == EMIT_KIND_MATMUL ? TH_MATMUL : TH_KERNEL;
  snprintf(t->sym, sizeof t->sym, "%s", k.name[0] ? k.name : name);
  t->emitter = emit_kind_name(k.kind);
  t->parallel_n = k.parallel_n;
  t->grain = k.grain;
  t->matmul = k.matmul;
  if (k.matmul) arrput(B->x->matmuls, k.matmul);
  cpb_count(&B->x->stats, k.kind);
  return true;
}

/* Steps 4-5: every pending fusion into one module, then JIT and resolve. */
static hj_status cpb_emit_all(cpb_build *B, const char *modname) {
  cpu_exec *x = B->x;
  cpu_jit *j = x->be->jit;
  if (arrlen(B->pending) == 0) return HJ_OK;
  cpu_jit_module jm;
  hj_status st = cpu_jit_module_create(j, modname, &jm);
  if (st != HJ_OK) return st;
  emit_target target = cpb_target(j);
  double t0 = cpb_now_ms();
  emit_module em;
  emit_module_init(&em, B->ctx, jm.llctx, jm.mod, &target);
  cpu_jit_unique_name(j, "hjs", em.shared_prefix, sizeof em.shared_prefix);
  int nk = 0;
  for (ptrdiff_t i = 0; i < arrlen(B->pending); i++) nk += cpb_emit_one(B, &em, &B->pending[i]);
  emit_module_dispose(&em);
  double t1 = cpb_now_ms();
  x->stats.emit_ms = t1 - t0;
  if (nk == 0) {
    cpu_jit_module_dispose(&jm);
    return HJ_OK;
  }
  if ((st = cpu_jit_optimize(j, jm.mod)) != HJ_OK) {
    cpu_jit_module_dispose(&jm);
    return st;
  }
  double t2 = cpb_now_ms();
  x->stats.optimize_ms = t2 - t1;
  if ((st = cpu_jit_add_module(j, &jm, &x->rt)) != HJ_OK) return st;
  size_t scratch = 0;
  for (ptrdiff_t i = 0; i < arrlen(B->pending) && st == HJ_OK; i++) {
    th_thunk *t = &B->pending[i].p->thunks[B->pending[i].thunk];
    if (t->kind == TH_KERNEL) {
      void *addr = NULL;
      st = cpu_jit_lookup(j, t->sym, &addr);
      t->fn = (th_kernel_fn)addr;
    } else if (t->kind == TH_MATMUL) {
      st = cpu_matmul_prepare(j, t->matmul);
      size_t s = cpu_matmul_scratch_bytes(t->matmul, tp_size(x->be->pool));
      if (s > scratch) scratch = s;
    }
  }
  x->stats.codegen_ms = cpb_now_ms() - t2;
  if (st == HJ_OK && scratch > 0 && !(x->run.matmul_scratch = hj__alloc(B->ctx, scratch)))
    st = hj__err(B->ctx, HJ_ERR_OOM, "CPU backend: out of memory for %zu bytes of matmul scratch", scratch);
  return st;
}

/* hj_exec_stats.bytes_moved: the leaves each data-moving thunk reads and writes, every
   program once (nested while/conditional programs counted once, not per iteration). */
static int64_t cpb_bytes_moved(const cpb_build *B) {
  int64_t n = 0;
  for (ptrdiff_t i = 0; i < arrlen(B->all); i++)
    for (ptrdiff_t k = 0; k < arrlen(B->all[i]->thunks); k++) {
      const th_thunk *t = &B->all[i]->thunks[k];
      if (t->kind != TH_KERNEL && t->kind != TH_MATMUL && t->kind != TH_EVAL && t->kind != TH_COPY) continue;
      for (ptrdiff_t a = 0; a < arrlen(t->args); a++) n += t->args[a].bytes;
      for (ptrdiff_t o = 0; o < arrlen(t->outs); o++) n += t->outs[o].bytes;
    }
  return n;
}

/* ---- compile and run -------------------------------------------------------------------------- */

static void cpb_matmul_run(const struct emit_matmul_plan *p, void **bufs, struct tp_pool *pool, void *scratch) {
  cpu_matmul_run(p, bufs, pool, scratch);
}

/* Dots are canonicalised first so that epilogue fusion sees the matmul shapes it will
   get; the shared pipeline (inlining, simplification, fusion, scheduling) follows; what
   fusion left unfused becomes single-op fusions, since emitters only take fusions. */
static hj_status cpb_passes(hj_ctx_t *ctx, hlo_module *m) {
  bool ch;
  hlo_pass_ctx pc;
  hlo_pass_ctx_init(&pc, ctx);
  hlo_pipeline_options po;
  hlo_pipeline_options_init(&po);
  po.fusion = !ctx->opt.no_fusion;
  hj_status st = pass_dot_canonicalize(m, &ch);
  if (st == HJ_OK) st = hlo_run_pipeline(&pc, m, &po);
  if (st == HJ_OK) st = pass_fusion_split(m, &ch);   /* no exponential elemental emission */
  if (st == HJ_OK) st = pass_wrap_fusions(m, &ch);
  if (st == HJ_OK) st = hlo_verify_module(m);
  if (st != HJ_OK && !ctx->err[0]) hj__err(ctx, st, "CPU backend: the pass pipeline failed");
  return st;
}

static void cpb_dumps(cpb_build *B, int seq) {
  hj_ctx_t *ctx = B->ctx;
  if (!ctx->opt.dump_dir || !*ctx->opt.dump_dir) return;
  char *sb = NULL;
  for (ptrdiff_t i = 0; i < arrlen(B->all); i++) ba_plan_print(&B->all[i]->plan, &sb);
  cpb_dump(ctx, seq, B->x->m->name, "buffer_assignment.txt", sb);
  arrfree(sb);
  sb = NULL;
  const hj_exec_stats_t *s = &B->x->stats;
  sb_printf(&sb, "# fusions %d: loop %d, reduction %d, transpose %d, matmul %d, dus %d; "
            "evaluator %d (runtime ops %d, emitter errors %d); copies %d; arena %lld bytes; "
            "moved %lld bytes per run\n",
            s->fusions, s->kernels_loop, s->kernels_reduction, s->kernels_transpose,
            s->kernels_matmul, s->kernels_dus, s->evaluator_fallbacks, s->runtime_ops,
            s->emit_errors, s->copies, (long long)s->arena_bytes, (long long)s->bytes_moved);
  th_program_print(B->x->entry, &sb, 0);
  cpb_dump(ctx, seq, B->x->m->name, "thunks.txt", sb);
  arrfree(sb);
}

hj_status cpu_backend_compile(hj_ctx_t *ctx, const hlo_module *m, cpu_exec **out) {
  *out = NULL;
  double t0 = cpb_now_ms();
  cpu_exec *x = calloc(1, sizeof *x);
  if (!x) return hj__err(ctx, HJ_ERR_OOM, "CPU backend: out of memory");
  x->ctx = ctx;
  pthread_mutex_init(&x->run_mu, NULL);
  x->stats.backend = HJ_BACKEND_CPU;
  x->stats.note = "";
  cpb_build B = { .ctx = ctx, .x = x };
  int seq = atomic_fetch_add(&cpb_dump_seq, 1);
  hj_status st = cpb_state_get(ctx, &x->be);
  if (st == HJ_OK && !(x->m = hlo_module_clone_in(ctx, m))) st = ctx->last ? ctx->last : HJ_ERR_OOM;
  if (st == HJ_OK) st = cpb_passes(ctx, x->m);
  if (st == HJ_OK && ctx->opt.dump_dir && *ctx->opt.dump_dir) {
    char *text = NULL;
    hj_status last = ctx->last;
    if (hlo_print_module(x->m, &text) == HJ_OK) cpb_dump(ctx, seq, x->m->name, "after_passes.hlo", text);
    ctx->last = last;
    free(text);
  }
  if (st == HJ_OK) st = cpb_program(&B, x->m->entry, &x->entry);
  char modname[160];
  snprintf(modname, sizeof modname, "%03d.%s", seq, x->m ? x->m->name : "module");
  x->stats.passes_ms = cpb_now_ms() - t0;
  if (st == HJ_OK) st = cpb_emit_all(&B, modname);
  x->run = (th_runtime){ .ctx = ctx, .pool = x->be ? x->be->pool : NULL,
                         .matmul_scratch = x->run.matmul_scratch, .matmul_run = cpb_matmul_run };
  if (st == HJ_OK) x->stats.bytes_moved = cpb_bytes_moved(&B);
  if (st == HJ_OK) cpb_dumps(&B, seq);
  arrfree(B.pending);
  arrfree(B.all);
  if (st != HJ_OK) {
    cpu_backend_exec_free(x);
    return st;
  }
  x->stats.compile_ms = cpb_now_ms() - t0;
  *out = x;
  return HJ_OK;
}

hj_status cpu_backend_run(cpu_exec *x, void *const *in, int nin, void *const *out, int nout) {
  if (nin != x->entry->plan.nin || nout != x->entry->plan.nout)
    return hj__err(x->ctx, HJ_ERR_INTERNAL, "CPU backend: %d/%d leaves given, the plan has %d/%d",
                   nin, nout, x->entry->plan.nin, x->entry->plan.nout);
  pthread_mutex_lock(&x->run_mu);
  hj_status st = th_program_run(&x->run, x->entry, in, out);
  pthread_mutex_unlock(&x->run_mu);
  return st;
}

void cpu_backend_stats(const cpu_exec *x, hj_exec_stats_t *s) { *s = x->stats; }

void cpu_backend_exec_free(cpu_exec *x) {
  if (!x) return;
  if (x->rt && x->be) cpu_jit_remove(x->be->jit, x->rt);
  th_program_free(x->ctx, x->entry);
  for (ptrdiff_t i = 0; i < arrlen(x->matmuls); i++) cpu_matmul_plan_free(x->matmuls[i]);
  arrfree(x->matmuls);
  hj__free(x->ctx, x->run.matmul_scratch);
  hlo_module_free(x->m);
  pthread_mutex_destroy(&x->run_mu);
  free(x);
}
