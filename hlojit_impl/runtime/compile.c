/* runtime/compile.c — the target-independent compile driver (runtime.h, "compile.c").

   What every compiled backend does to turn a module into an executable, written once:
   clone, passes (the backend's own steps around the shared pipeline), one thunk program per
   computation with its buffer plan, and the emission loop over the pending fusions into one
   LLVM module through the emitter target (rt_target.emit). The backend then finishes the
   module (CPU: O3 and ORC; CUDA: NVPTX and cuModuleLoadData) and runs the thunks.

   Fallback: a fusion the emitters do not take (EMIT_KIND_RUNTIME: sort, scatter, ...) or
   that an emitter declines or fails on stays an evaluator thunk (TH_EVAL), with the reason
   in the thunk dump; an emitter error is counted (stats.emit_errors) because it is a bug,
   HJ_ERR_UNSUPPORTED is not. Either way the compile succeeds and the context's error
   message is what it was before the attempt. */
#include "runtime.h"
#include "../text/text.h"
#include <llvm-c/Analysis.h>
#include "../emitters/matmul_plan.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>

typedef struct rtc_pending {           /* a fusion thunk waiting for its kernel */
  th_program *p;
  int thunk;
  bool dus_inplace;
  int inplace_operand;                 /* output 0 is this operand's buffer, -1 none */
} rtc_pending;

typedef struct rtc_build {
  hj_ctx_t *ctx;
  const rt_target *t;
  rt_exec *x;
  rtc_pending *pending;                /* stb_ds */
} rtc_build;

static atomic_int rtc_dump_seq;

/* ---- dumps ---------------------------------------------------------------------------------- */

/* Writes |text| to DIR/NNN.NAME.WHAT; dumps never fail a compile. */
static void rtc_dump(hj_ctx_t *ctx, int seq, const char *name, const char *what, const char *text) {
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

static void rtc_dump_module(hj_ctx_t *ctx, int seq, const hlo_module *m) {
  if (!ctx->opt.dump_dir || !*ctx->opt.dump_dir) return;
  char *text = NULL;
  hj_status last = ctx->last;
  if (hlo_print_module(m, &text) == HJ_OK) rtc_dump(ctx, seq, m->name, "after_passes.hlo", text);
  ctx->last = last;
  free(text);
}

static void rtc_dumps(rtc_build *B) {
  hj_ctx_t *ctx = B->ctx;
  rt_exec *x = B->x;
  if (!ctx->opt.dump_dir || !*ctx->opt.dump_dir) return;
  char *sb = NULL;
  for (ptrdiff_t i = 0; i < arrlen(x->programs); i++) ba_plan_print(&x->programs[i]->plan, &sb);
  rtc_dump(ctx, x->seq, x->m->name, "buffer_assignment.txt", sb);
  arrfree(sb);
  sb = NULL;
  const hj_exec_stats_t *s = &x->stats;
  sb_printf(&sb, "# fusions %d: loop %d, reduction %d, transpose %d, matmul %d, dus %d; "
            "evaluator %d (runtime ops %d, emitter errors %d); copies %d; arena %lld bytes; "
            "moved %lld bytes per run\n",
            s->fusions, s->kernels_loop, s->kernels_reduction, s->kernels_transpose,
            s->kernels_matmul, s->kernels_dus, s->evaluator_fallbacks, s->runtime_ops,
            s->emit_errors, s->copies, (long long)s->arena_bytes, (long long)s->bytes_moved);
  th_program_print(x->entry, &sb, 0);
  rtc_dump(ctx, x->seq, x->m->name, "thunks.txt", sb);
  arrfree(sb);
}

/* ---- passes ------------------------------------------------------------------------------ */

/* The backend's steps around the shared pipeline (inlining, simplification, fusion,
   scheduling); every step verified and dumped by hlo_pass_run. */
static hj_status rtc_passes(hj_ctx_t *ctx, const rt_target *t, hlo_module *m) {
  bool ch;
  hlo_pass_ctx pc;
  rt_pass_ctx_init(&pc, ctx);
  hlo_pipeline_options po;
  hlo_pipeline_options_init(&po);
  po.fusion = !ctx->opt.no_fusion;
  hj_status st = HJ_OK;
  for (int i = 0; i < t->npre && st == HJ_OK; i++) st = hlo_pass_run(&pc, t->pre[i].name, t->pre[i].fn, m, &ch);
  if (st == HJ_OK) st = hlo_run_pipeline(&pc, m, &po);
  for (int i = 0; i < t->npost && st == HJ_OK; i++) st = hlo_pass_run(&pc, t->post[i].name, t->post[i].fn, m, &ch);
  if (st == HJ_OK) st = hlo_verify_module(m);
  if (st != HJ_OK && !ctx->err[0]) hj__err(ctx, st, "%s: the pass pipeline failed", t->name);
  return st;
}

/* ---- programs (buffer plan + thunk skeleton) ----------------------------------------------- */

static hj_status rtc_program(rtc_build *B, const hlo_comp *c, th_program **out);

static void rtc_leaves(const th_program *p, const hlo_instr *ins, ba_loc **dst) {
  int k = ba_instr_pos(&p->plan, ins);
  for (ptrdiff_t j = 0; k >= 0 && j < arrlen(p->plan.leaves[k]); j++) arrput(*dst, p->plan.leaves[k][j]);
}

/* Thunk for instruction |i| of |p| (nothing for the aliasing ops). */
static hj_status rtc_thunk(rtc_build *B, th_program *p, int i) {
  const hlo_instr *ins = p->comp->instrs[i];
  th_thunk t = { .ins = ins };
  hj_status st = HJ_OK;
  switch (ins->op) {
  case HLO_OP_PARAMETER: case HLO_OP_CONSTANT: case HLO_OP_TUPLE: case HLO_OP_GET_TUPLE_ELEMENT:
  case HLO_OP_RESHAPE: case HLO_OP_BITCAST: case HLO_OP_OPT_BARRIER:
    return HJ_OK;
  case HLO_OP_FUSION: {
    t.kind = TH_EVAL;
    for (int k = 0; k < ins->noperands; k++) rtc_leaves(p, ins->operands[k], &t.args);
    rtc_leaves(p, ins, &t.outs);
    rtc_pending pe = { p, (int)arrlen(p->thunks), p->plan.dus_inplace[i], p->plan.inplace_operand[i] };
    arrput(B->pending, pe);
    B->x->stats.fusions++;
    break;
  }
  case HLO_OP_WHILE:
    t.kind = TH_WHILE;
    rtc_leaves(p, ins->operands[0], &t.args);
    rtc_leaves(p, ins, &t.outs);
    t.scratch = p->plan.scratch[i];
    for (int k = 0; k < 2 && st == HJ_OK; k++) {
      th_program *sub = NULL;
      st = rtc_program(B, ins->calls[k], &sub);
      arrput(t.sub, sub);
    }
    break;
  case HLO_OP_CONDITIONAL:
    t.kind = TH_COND;
    rtc_leaves(p, ins->operands[0], &t.args);
    rtc_leaves(p, ins, &t.outs);
    for (int b = 0; b < ins->ncalls && st == HJ_OK; b++) {
      arrput(t.arg_off, (int)arrlen(t.args));
      rtc_leaves(p, ins->operands[b + 1], &t.args);
      th_program *sub = NULL;
      st = rtc_program(B, ins->calls[b], &sub);
      arrput(t.sub, sub);
    }
    break;
  default:
    st = hj__err(B->ctx, HJ_ERR_UNSUPPORTED, "%s: no thunk for op '%s' (%s) in '%s'", B->t->name,
                 hlo_opcode_name(ins->op), ins->name, p->comp->name);
  }
  arrput(p->thunks, t);
  return st;
}

/* Buffer assignment's question for in-place elementwise: only loop kernels in linear mode. */
static bool rtc_may_inplace(const hlo_instr *fusion, int operand, void *ud) {
  (void)ud;
  const hlo_instr *hero = NULL;
  return emit_classify(fusion, false, &hero) == EMIT_KIND_LOOP && emit_loop_inplace_ok(fusion, operand);
}

static hj_status rtc_program(rtc_build *B, const hlo_comp *c, th_program **out) {
  th_program *p = calloc(1, sizeof *p);
  *out = p;
  if (!p) return hj__err(B->ctx, HJ_ERR_OOM, "%s: out of memory", B->t->name);
  p->comp = c;
  arrput(B->x->programs, p);
  int n = (int)arrlen(c->instrs);
  int64_t *scr = calloc((size_t)n + 1, sizeof *scr);
  if (!scr) return hj__err(B->ctx, HJ_ERR_OOM, "%s: out of memory", B->t->name);
  for (int i = 0; i < n; i++)
    if (c->instrs[i]->op == HLO_OP_WHILE) scr[i] = th_while_scratch_bytes(c->instrs[i]);
  hj_status st = ba_assign_ex(B->ctx, c, scr, rtc_may_inplace, NULL, &p->plan);
  free(scr);
  if (st == HJ_OK) st = th_program_alloc(B->ctx, p);
  if (st == HJ_OK) B->x->stats.arena_bytes += p->plan.arena_bytes;
  for (ptrdiff_t k = 0; st == HJ_OK && k < arrlen(p->plan.stages); k++) {   /* donation */
    th_thunk t = { .kind = TH_COPY, .ins = c->root };
    arrput(t.args, p->plan.stages[k].src);
    arrput(t.outs, p->plan.stages[k].dst);
    arrput(p->thunks, t);
    B->x->stats.copies++;
  }
  for (int i = 0; i < n && st == HJ_OK; i++) st = rtc_thunk(B, p, i);
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

/* Deletes the functions emitted under |prefix| (NAME, NAME.x, NAME_x). */
static void rtc_delete_fns(LLVMModuleRef mod, const char *prefix) {
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

/* True when a function emitted under |prefix| does not verify. */
static bool rtc_broken(LLVMModuleRef mod, const char *prefix) {
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

static void rtc_count(hj_exec_stats_t *s, emit_kind k) {
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
static bool rtc_emit_one(rtc_build *B, emit_module *em, rtc_pending *pe) {
  hj_ctx_t *ctx = B->ctx;
  rt_exec *x = B->x;
  th_thunk *t = &pe->p->thunks[pe->thunk];
  const hlo_instr *hero = NULL;
  emit_kind kind = emit_classify(t->ins, pe->dus_inplace, &hero);
  if (kind == EMIT_KIND_RUNTIME) {
    t->runtime_op = true;
    snprintf(t->why, sizeof t->why, "no emitter for '%s'",
             hero ? hlo_opcode_name(hero->op) : "this fusion");
    x->stats.evaluator_fallbacks++;
    x->stats.runtime_ops++;
    return false;
  }
  char name[64];
  B->t->unique_name(B->t->ud, "hjk", name, sizeof name);
  hj_status last = ctx->last;
  char *saved = malloc(sizeof ctx->err);
  if (saved) memcpy(saved, ctx->err, sizeof ctx->err);
  ctx->err[0] = 0;
  emit_kernel k = { .kind = kind };
  hj_status st = emit_fusion_inplace(em, t->ins, name, pe->dus_inplace, pe->inplace_operand, &k);
  if (st == HJ_OK && rtc_broken(em->mod, name))
    st = hj__err(ctx, HJ_ERR_INTERNAL, "emit '%s': the LLVM verifier rejects the kernel", t->ins->name);
  if (st == HJ_OK && k.kind == EMIT_KIND_MATMUL && !k.matmul)
    st = hj__err(ctx, HJ_ERR_INTERNAL, "emit '%s': matmul kernel without a plan", t->ins->name);
  if (st != HJ_OK) {
    snprintf(t->why, sizeof t->why, "%s: %.180s", hlo_status_name(st), ctx->err[0] ? ctx->err : "(no message)");
    t->emit_error = st != HJ_ERR_UNSUPPORTED;
    x->stats.evaluator_fallbacks++;
    x->stats.emit_errors += t->emit_error;
    rtc_delete_fns(em->mod, name);
    emit_matmul_plan_free(k.matmul);
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
  if (k.matmul) arrput(x->matmuls, k.matmul);
  rtc_count(&x->stats, k.kind);
  return true;
}

/* Steps 4-5: every pending fusion into one module, then the backend finishes it. */
static hj_status rtc_emit_all(rtc_build *B) {
  const rt_target *t = B->t;
  rt_exec *x = B->x;
  if (arrlen(B->pending) == 0) return HJ_OK;
  char modname[160];
  snprintf(modname, sizeof modname, "%03d.%s", x->seq, x->m->name);
  LLVMContextRef llctx;
  LLVMModuleRef mod;
  void *handle = NULL;
  hj_status st = t->module_begin(t->ud, modname, &llctx, &mod, &handle);
  if (st != HJ_OK) return st;
  double t0 = rt_now_ms();
  emit_module em;
  emit_module_init(&em, B->ctx, llctx, mod, &t->emit);
  t->unique_name(t->ud, "hjs", em.shared_prefix, sizeof em.shared_prefix);
  int nk = 0;
  for (ptrdiff_t i = 0; i < arrlen(B->pending); i++) nk += rtc_emit_one(B, &em, &B->pending[i]);
  emit_module_dispose(&em);
  x->stats.emit_ms = rt_now_ms() - t0;
  if (nk == 0) {
    t->module_discard(t->ud, handle);
    return HJ_OK;
  }
  for (ptrdiff_t i = 0; i < arrlen(B->pending); i++) {
    th_thunk *th = &B->pending[i].p->thunks[B->pending[i].thunk];
    if (th->kind == TH_KERNEL || th->kind == TH_MATMUL) arrput(x->kernels, th);
  }
  return t->module_finish(t->ud, handle, x);
}

/* hj_exec_stats.bytes_moved: the leaves each data-moving thunk reads and writes, every
   program once (nested while/conditional programs counted once, not per iteration). */
static int64_t rtc_bytes_moved(const rt_exec *x) {
  int64_t n = 0;
  for (ptrdiff_t i = 0; i < arrlen(x->programs); i++)
    for (ptrdiff_t k = 0; k < arrlen(x->programs[i]->thunks); k++) {
      const th_thunk *t = &x->programs[i]->thunks[k];
      if (t->kind != TH_KERNEL && t->kind != TH_MATMUL && t->kind != TH_EVAL && t->kind != TH_COPY) continue;
      for (ptrdiff_t a = 0; a < arrlen(t->args); a++) n += t->args[a].bytes;
      for (ptrdiff_t o = 0; o < arrlen(t->outs); o++) n += t->outs[o].bytes;
    }
  return n;
}

/* ---- the driver --------------------------------------------------------------------------------- */

hj_status rt_compile(hj_ctx_t *ctx, const hlo_module *m, const rt_target *t, rt_exec *out) {
  memset(out, 0, sizeof *out);
  double t0 = rt_now_ms();
  rt_exec *x = out;
  x->ctx = ctx;
  x->stats.note = "";
  x->seq = atomic_fetch_add(&rtc_dump_seq, 1);
  rtc_build B = { .ctx = ctx, .t = t, .x = x };
  hj_status st = HJ_OK;
  if (!(x->m = hlo_module_clone_in(ctx, m))) st = ctx->last ? ctx->last : HJ_ERR_OOM;
  if (st == HJ_OK) st = rtc_passes(ctx, t, x->m);
  if (st == HJ_OK) rtc_dump_module(ctx, x->seq, x->m);
  if (st == HJ_OK) st = rtc_program(&B, x->m->entry, &x->entry);
  x->stats.passes_ms = rt_now_ms() - t0;
  if (st == HJ_OK) st = rtc_emit_all(&B);
  if (st == HJ_OK) x->stats.bytes_moved = rtc_bytes_moved(x);
  if (st == HJ_OK) rtc_dumps(&B);
  arrfree(B.pending);
  if (st != HJ_OK) {
    rt_exec_free(x);
    return st;
  }
  x->stats.compile_ms = rt_now_ms() - t0;
  return HJ_OK;
}

void rt_exec_free(rt_exec *x) {
  if (!x) return;
  th_program_free(x->ctx, x->entry);
  for (ptrdiff_t i = 0; i < arrlen(x->matmuls); i++) emit_matmul_plan_free(x->matmuls[i]);
  arrfree(x->matmuls);
  arrfree(x->programs);
  arrfree(x->kernels);
  hlo_module_free(x->m);
  memset(x, 0, sizeof *x);
}
