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
#include "../passes/passes.h"
#include "../text/text.h"
#include <llvm-c/Analysis.h>
#include "../emitters/matmul_plan.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>

typedef struct rtc_pending {           /* a fusion thunk waiting for its kernel */
  th_program *p;
  int thunk;
  uint64_t dus_inplace;                /* bit j: output leaf j is a dus in place */
  int inplace_operand;                 /* output 0 is this operand's buffer, -1 none */
} rtc_pending;

/* One distinct kernel of this compile: the fusions whose keys (hlo_encode_fusion plus the
   in-place decisions) are equal share it. */
typedef struct rtc_kern {
  uint8_t *key;                        /* stb_ds */
  hlo_fingerprint fp;
  th_thunk *first;                     /* the thunk it was emitted for */
  bool failed;                         /* the emitter declined or failed: all fall back */
  int module;                          /* the LLVM module it went into */
} rtc_kern;

typedef struct rtc_build {
  hj_ctx_t *ctx;
  const rt_target *t;
  rt_exec *x;
  rtc_pending *pending;                /* stb_ds */
  rtc_kern *kerns;                     /* stb_ds */
  const hlo_comp *pos_comp;            /* the computation |pos| describes */
  int *pos, pos_lo, npos;              /* id - pos_lo -> position in pos_comp->instrs, -1 */
  int *slots;                          /* open addressing over kerns by fp.lo; -1 empty */
  int nslots;                          /* a power of two */
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
  hj__err_saved saved;
  hj__err_save(ctx, &saved);
  if (hlo_print_module(m, &text) == HJ_OK) rtc_dump(ctx, seq, m->name, "after_passes.hlo", text);
  hj__err_restore(ctx, &saved);
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
  sb_printf(&sb, "# fusions %d: loop %d, reduction %d, transpose %d, matmul %d, dus %d "
            "(%d outputs in place), sort %d, scatter %d, scan %d; library calls %d; "
            "evaluator %d (runtime ops %d, emitter errors %d); copies %d; arena %lld bytes; "
            "moved %lld bytes per run; %d distinct kernels in %d LLVM modules\n",
            s->fusions, s->kernels_loop, s->kernels_reduction, s->kernels_transpose,
            s->kernels_matmul, s->kernels_dus, s->inplace_updates, s->kernels_sort, s->kernels_scatter, s->kernels_scan,
            s->library_calls,
            s->evaluator_fallbacks, s->runtime_ops,
            s->emit_errors, s->copies, (long long)s->arena_bytes, (long long)s->bytes_moved,
            s->kernels_distinct, s->llvm_modules);
  th_program_print(x->entry, &sb, 0);
  rtc_dump(ctx, x->seq, x->m->name, "thunks.txt", sb);
  arrfree(sb);
}

/* ---- passes ------------------------------------------------------------------------------ */

/* One of the backend's own passes, by name. */
static hj_status rtc_step(hlo_pass_ctx *pc, const rt_target *t, const char *name, hlo_module *m) {
  hlo_pass_fn fn = hlo_pass_find(name);
  bool ch;
  if (!fn) return hj__err(pc->ctx, HJ_ERR_INTERNAL, "%s: no pass named '%s'", t->name, name);
  return hlo_pass_run(pc, name, fn, m, &ch);
}

/* The backend's steps around the shared pipeline (inlining, simplification, fusion,
   scheduling); every step verified and dumped by hlo_pass_run. */
static hj_status rtc_passes(hj_ctx_t *ctx, const rt_target *t, hlo_module *m, rt_exec *x) {
  hlo_pass_ctx pc;
  rt_pass_ctx_init(&pc, ctx);
  pc.time_passes = true;
  pc.times = x->pass_times;          /* appended to what the driver measured before */
  pc.matmul_panel_nr = t->emit.gpu ? 0 : t->emit.matmul_panel_nr;
  hlo_pipeline_options po;
  hlo_pipeline_options_init(&po);
  po.fusion = !ctx->opt.no_fusion;
  hj_status st = HJ_OK;
  for (int i = 0; i < t->npre && st == HJ_OK; i++) st = rtc_step(&pc, t, t->pre[i], m);
  if (st == HJ_OK) st = hlo_run_pipeline(&pc, m, &po);
  for (int i = 0; i < t->npost && st == HJ_OK; i++) st = rtc_step(&pc, t, t->post[i], m);
  if (st == HJ_OK) {
    double t0 = rt_now_ms();
    st = hlo_verify_module(m);
    hj_pass_time_t vt = { "verify", rt_now_ms() - t0, 1 };
    arrput(pc.times, vt);
  }
  if (st != HJ_OK && !hj__ctx_err(ctx)[0]) hj__err(ctx, st, "%s: the pass pipeline failed", t->name);
  x->pass_times = pc.times;          /* the executable keeps them (stats.pass_times) */
  return st;
}

/* ---- programs (buffer plan + thunk skeleton) ----------------------------------------------- */

static hj_status rtc_program(rtc_build *B, const hlo_comp *c, th_program **out);

/* Position of |ins| in the program's computation (rtc_build.pos: by id, for the program
   being built; ba_instr_pos searches, which made building thunks quadratic). */
static int rtc_pos(const rtc_build *B, const th_program *p, const hlo_instr *ins) {
  if (B->pos_comp == p->comp && ins->id >= B->pos_lo && ins->id - B->pos_lo < B->npos) {
    int k = B->pos[ins->id - B->pos_lo];
    if (k >= 0 && k < arrlen(p->comp->instrs) && p->comp->instrs[k] == ins) return k;
  }
  return ba_instr_pos(&p->plan, ins);
}

static void rtc_leaves(const rtc_build *B, const th_program *p, const hlo_instr *ins, ba_loc **dst) {
  int k = rtc_pos(B, p, ins);
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
    for (int k = 0; k < ins->noperands; k++) rtc_leaves(B, p, ins->operands[k], &t.args);
    rtc_leaves(B, p, ins, &t.outs);
    rtc_pending pe = { p, (int)arrlen(p->thunks), p->plan.dus_inplace[i], p->plan.inplace_operand[i] };
    arrput(B->pending, pe);
    B->x->stats.fusions++;
    break;
  }
  case HLO_OP_WHILE:
    t.kind = TH_WHILE;
    rtc_leaves(B, p, ins->operands[0], &t.args);
    rtc_leaves(B, p, ins, &t.outs);
    t.scratch = p->plan.scratch[i];
    for (int k = 0; k < 2 && st == HJ_OK; k++) {
      th_program *sub = NULL;
      st = rtc_program(B, ins->calls[k], &sub);
      arrput(t.sub, sub);
    }
    break;
  case HLO_OP_CONDITIONAL:
    t.kind = TH_COND;
    rtc_leaves(B, p, ins->operands[0], &t.args);
    rtc_leaves(B, p, ins, &t.outs);
    for (int b = 0; b < ins->ncalls && st == HJ_OK; b++) {
      arrput(t.arg_off, (int)arrlen(t.args));
      rtc_leaves(B, p, ins->operands[b + 1], &t.args);
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

/* rtc_build.pos for |c| (on OOM it stays unset: rtc_pos searches). */
static void rtc_pos_build(rtc_build *B, const hlo_comp *c) {
  free(B->pos);
  B->pos = NULL;
  B->pos_comp = NULL;
  ptrdiff_t n = arrlen(c->instrs);
  int lo = n ? c->instrs[0]->id : 0, hi = lo;
  for (ptrdiff_t i = 0; i < n; i++) {
    if (c->instrs[i]->id < lo) lo = c->instrs[i]->id;
    if (c->instrs[i]->id > hi) hi = c->instrs[i]->id;
  }
  if (!(B->pos = malloc(sizeof *B->pos * (size_t)(hi - lo + 1)))) return;
  for (int i = 0; i <= hi - lo; i++) B->pos[i] = -1;
  for (ptrdiff_t i = 0; i < n; i++) B->pos[c->instrs[i]->id - lo] = (int)i;
  B->pos_lo = lo;
  B->npos = hi - lo + 1;
  B->pos_comp = c;
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
  for (int i = 0; i < n && st == HJ_OK; i++) {
    if (B->pos_comp != c) rtc_pos_build(B, c);   /* again after a nested program */
    st = rtc_thunk(B, p, i);
  }
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

/* LLVM instructions in |mod|: what the optimiser and code generator will chew on (a
   module's compile time grows with it), for spreading kernels over modules. */
static double rtc_ir_size(LLVMModuleRef mod) {
  double n = 0;
  for (LLVMValueRef fn = LLVMGetFirstFunction(mod); fn; fn = LLVMGetNextFunction(fn))
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
      for (LLVMValueRef i = LLVMGetFirstInstruction(bb); i; i = LLVMGetNextInstruction(i)) n++;
  return n;
}

static void rtc_count(hj_exec_stats_t *s, emit_kind k, uint64_t dus_inplace) {
  if (k == EMIT_KIND_DUS) s->inplace_updates += __builtin_popcountll(dus_inplace);
  switch (k) {
  case EMIT_KIND_LOOP: s->kernels_loop++; break;
  case EMIT_KIND_REDUCTION: s->kernels_reduction++; break;
  case EMIT_KIND_TRANSPOSE: s->kernels_transpose++; break;
  case EMIT_KIND_MATMUL: s->kernels_matmul++; break;
  case EMIT_KIND_DUS: s->kernels_dus++; break;
  case EMIT_KIND_SORT: s->kernels_sort++; break;
  case EMIT_KIND_SCATTER: s->kernels_scatter++; break;
  case EMIT_KIND_SCAN: s->kernels_scan++; break;
  default: break;
  }
}

/* ---- kernel deduplication ---------------------------------------------------------------
   Fusions that are structurally the same (hlo_encode_fusion: ops, shapes, layouts,
   attributes, constants' bytes, up to names) and got the same in-place decisions share one
   kernel: emitted, optimised and compiled once, launched with each thunk's buffers (and for
   matmuls one plan, shared by the thunks). The fingerprint finds the candidates, the bytes
   decide. A 12-layer model then compiles about as many kernels as a 1-layer one. */

/* The key of pending fusion |pe| into *key (stb_ds); false when it cannot be encoded. */
static bool rtc_key(const rtc_pending *pe, const th_thunk *t, emit_kind kind, uint8_t **key) {
  if (!hlo_encode_fusion(t->ins, key)) return false;
  int64_t tail[3] = { (int64_t)pe->dus_inplace, pe->inplace_operand, kind };
  memcpy(arraddnptr(*key, sizeof tail), tail, sizeof tail);
  return true;
}

static hj_status rtc_slots_grow(rtc_build *B) {
  int n = B->nslots ? B->nslots * 2 : 64;
  int *sl = malloc(sizeof *sl * (size_t)n);
  if (!sl) return hj__err(B->ctx, HJ_ERR_OOM, "%s: out of memory", B->t->name);
  for (int i = 0; i < n; i++) sl[i] = -1;
  for (ptrdiff_t k = 0; k < arrlen(B->kerns); k++) {
    int h = (int)(B->kerns[k].fp.lo & (uint64_t)(n - 1));
    while (sl[h] >= 0) h = (h + 1) & (n - 1);
    sl[h] = (int)k;
  }
  free(B->slots);
  B->slots = sl;
  B->nslots = n;
  return HJ_OK;
}

/* The kernel with key |key|, or -1. */
static int rtc_find(const rtc_build *B, hlo_fingerprint fp, const uint8_t *key) {
  if (!B->nslots) return -1;
  for (int h = (int)(fp.lo & (uint64_t)(B->nslots - 1)); B->slots[h] >= 0; h = (h + 1) & (B->nslots - 1)) {
    const rtc_kern *k = &B->kerns[B->slots[h]];
    if (k->fp.lo == fp.lo && k->fp.hi == fp.hi && arrlen(k->key) == arrlen(key) &&
        memcmp(k->key, key, (size_t)arrlen(key)) == 0)
      return B->slots[h];
  }
  return -1;
}

static hj_status rtc_add(rtc_build *B, rtc_kern *k) {
  if (2 * (arrlen(B->kerns) + 1) > B->nslots) {
    hj_status st = rtc_slots_grow(B);
    if (st != HJ_OK) return st;
  }
  arrput(B->kerns, *k);
  int h = (int)(k->fp.lo & (uint64_t)(B->nslots - 1));
  while (B->slots[h] >= 0) h = (h + 1) & (B->nslots - 1);
  B->slots[h] = (int)arrlen(B->kerns) - 1;
  return HJ_OK;
}

/* Thunk |t| runs the kernel already emitted for thunk |src|. */
static void rtc_share(th_thunk *t, const th_thunk *src) {
  t->kind = src->kind;
  snprintf(t->sym, sizeof t->sym, "%s", src->sym);
  t->emitter = src->emitter;
  t->parallel_n = src->parallel_n;
  t->grain = src->grain;
  t->matmul = src->matmul;
  t->dus_inplace = src->dus_inplace;
  memcpy(t->grid, src->grid, sizeof t->grid);   /* GPU targets: the same launch geometry */
  memcpy(t->block, src->block, sizeof t->block);
  t->shared_bytes = src->shared_bytes;
  t->runtime_op = src->runtime_op;
  t->emit_error = src->emit_error;
  snprintf(t->why, sizeof t->why, "%s", src->why);
}

/* Step 4 for one pending fusion, into the least loaded of the |nmod| modules |ems|
   (|load|: LLVM instructions in it; |nkern|: kernels). Returns true when the thunk got a kernel
   (emitted now or shared with an identical fusion). */
static bool rtc_emit_one(rtc_build *B, emit_module *ems, int nmod, double *load, int *nkern,
                         rtc_pending *pe) {
  hj_ctx_t *ctx = B->ctx;
  rt_exec *x = B->x;
  th_thunk *t = &pe->p->thunks[pe->thunk];
  const hlo_instr *hero = NULL;
  emit_kind kind = emit_classify(t->ins, pe->dus_inplace, &hero);
  if (kind == EMIT_KIND_RUNTIME) {
    t->runtime_op = true;
    if (hero && hero->op == HLO_OP_CUSTOM_CALL) {   /* LAPACK on the host: the work is the library's */
      snprintf(t->why, sizeof t->why, "library call '%s'", hlo_custom_target_name(hero->custom.target));
      x->stats.library_calls++;
      return false;
    }
    snprintf(t->why, sizeof t->why, "no emitter for '%s'",
             hero ? hlo_opcode_name(hero->op) : "this fusion");
    x->stats.evaluator_fallbacks++;
    x->stats.runtime_ops++;
    return false;
  }
  double tf = rt_now_ms();
  rtc_kern rk = { .module = -1 };
  bool keyed = rtc_key(pe, t, kind, &rk.key);
  int found = -1;
  if (keyed) {
    rk.fp = hlo_fingerprint_bytes(rk.key, (size_t)arrlen(rk.key));
    found = rtc_find(B, rk.fp, rk.key);
  }
  x->stats.fingerprint_ms += rt_now_ms() - tf;
  if (found >= 0) {
    const rtc_kern *k = &B->kerns[found];
    arrfree(rk.key);
    rtc_share(t, k->first);
    if (k->failed) {
      x->stats.evaluator_fallbacks++;
      x->stats.emit_errors += t->emit_error;
      return false;
    }
    rtc_count(&x->stats, kind, pe->dus_inplace);
    return true;
  }
  /* the least loaded module (load: LLVM instructions emitted into it so far) of the
     kernel's class when the target splits them (matmuls in the first half) */
  int first = 0, step = 1;   /* split: even modules matmuls, odd ones the rest (so that a
                                 parallel split into contiguous ranges mixes the classes) */
  if (B->t->module_class && nmod >= 2) {
    first = kind == EMIT_KIND_MATMUL ? 0 : 1;
    step = 2;
  }
  int mi = first;
  for (int i = first + step; i < nmod; i += step)
    if (load[i] < load[mi]) mi = i;
  emit_module *em = &ems[mi];
  char name[64];
  if (keyed && B->t->kernel_name) {
    char base[40];
    snprintf(base, sizeof base, "hjk_%016llx", (unsigned long long)rk.fp.lo);
    B->t->kernel_name(B->t->ud, base, name, sizeof name);
  } else {
    B->t->unique_name(B->t->ud, "hjk", name, sizeof name);
  }
  hj__err_saved saved;
  hj__err_save(ctx, &saved);
  hj__ctx_err(ctx)[0] = 0;
  emit_kernel k = { .kind = kind };
  hj_status st = emit_fusion_inplace(em, t->ins, name, pe->dus_inplace, pe->inplace_operand, &k);
  if (st == HJ_OK && rtc_broken(em->mod, name))
    st = hj__err(ctx, HJ_ERR_INTERNAL, "emit '%s': the LLVM verifier rejects the kernel", t->ins->name);
  if (st == HJ_OK && k.kind == EMIT_KIND_MATMUL && !k.matmul)
    st = hj__err(ctx, HJ_ERR_INTERNAL, "emit '%s': matmul kernel without a plan", t->ins->name);
  if (st != HJ_OK) {
    snprintf(t->why, sizeof t->why, "%s: %.180s", hlo_status_name(st), hj__ctx_err(ctx)[0] ? hj__ctx_err(ctx) : "(no message)");
    t->emit_error = st != HJ_ERR_UNSUPPORTED;
    x->stats.evaluator_fallbacks++;
    x->stats.emit_errors += t->emit_error;
    rtc_delete_fns(em->mod, name);
    emit_matmul_plan_free(k.matmul);
  }
  hj__err_restore(ctx, &saved);
  if (st == HJ_OK) {
    t->kind = k.kind == EMIT_KIND_MATMUL ? TH_MATMUL : TH_KERNEL;
    snprintf(t->sym, sizeof t->sym, "%s", k.name[0] ? k.name : name);
    t->emitter = emit_kind_name(k.kind);
    t->parallel_n = k.parallel_n;
    t->grain = k.grain;
    t->matmul = k.matmul;
    t->dus_inplace = k.kind == EMIT_KIND_DUS ? pe->dus_inplace : 0;
    memcpy(t->grid, k.grid, sizeof t->grid);     /* GPU targets: the launch geometry */
    memcpy(t->block, k.block, sizeof t->block);
    t->shared_bytes = k.shared_bytes;
    if (k.matmul) arrput(x->matmuls, k.matmul);
    rtc_count(&x->stats, k.kind, pe->dus_inplace);
    x->stats.kernels_distinct++;
    if (nmod > 1) load[mi] = rtc_ir_size(em->mod);
    nkern[mi]++;
  }
  rk.first = t;
  rk.failed = st != HJ_OK;
  rk.module = st == HJ_OK ? mi : -1;
  if (!keyed || rtc_add(B, &rk) != HJ_OK) arrfree(rk.key);
  return st == HJ_OK;
}

/* Steps 4-5: every pending fusion into the target's modules (several when it compiles
   them in parallel), then the backend finishes them. */
static hj_status rtc_emit_all(rtc_build *B) {
  const rt_target *t = B->t;
  rt_exec *x = B->x;
  if (arrlen(B->pending) == 0) return HJ_OK;
  int nmod = t->max_modules > 1 && t->module_finish_many ? t->max_modules : 1;
  if (t->module_class && t->module_finish_many) nmod *= 2;   /* matmuls and the rest apart */
  if (nmod > RT_MAX_MODULES) nmod = RT_MAX_MODULES;
  /* no more modules than about one per 4 distinct fusions: a module has a fixed cost */
  int cap = (int)((arrlen(B->pending) + 3) / 4);
  if (nmod > cap) nmod = cap < 1 ? 1 : cap;
  LLVMContextRef llctx[RT_MAX_MODULES];
  LLVMModuleRef mod[RT_MAX_MODULES];
  void *handle[RT_MAX_MODULES] = { 0 };
  emit_module em[RT_MAX_MODULES];
  double load[RT_MAX_MODULES] = { 0 };
  int nkern[RT_MAX_MODULES] = { 0 };
  hj_status st = HJ_OK;
  int made = 0;
  for (; made < nmod && st == HJ_OK; made++) {
    char modname[160];
    if (nmod == 1) snprintf(modname, sizeof modname, "%03d.%s", x->seq, x->m->name);
    else snprintf(modname, sizeof modname, "%03d.%s.%d", x->seq, x->m->name, made);
    st = t->module_begin(t->ud, modname, &llctx[made], &mod[made], &handle[made]);
    if (st != HJ_OK) break;
    if (t->module_class && nmod >= 2) t->module_class(t->ud, handle[made], made % 2);
    emit_module_init(&em[made], B->ctx, llctx[made], mod[made], &t->emit);
    if (t->kernel_name) {   /* from the optimised module's fingerprint: the same in every process */
      char base[40];
      snprintf(base, sizeof base, "hjs_%012llx_%d", (unsigned long long)(x->fingerprint.lo >> 16), made);
      t->kernel_name(t->ud, base, em[made].shared_prefix, sizeof em[made].shared_prefix);
    } else {
      t->unique_name(t->ud, "hjs", em[made].shared_prefix, sizeof em[made].shared_prefix);
    }
  }
  if (st != HJ_OK) {
    for (int i = 0; i < made; i++) {
      emit_module_dispose(&em[i]);
      t->module_discard(t->ud, handle[i]);
    }
    return st;
  }
  double t0 = rt_now_ms();
  int nk = 0;
  for (ptrdiff_t i = 0; i < arrlen(B->pending); i++) nk += rtc_emit_one(B, em, nmod, load, nkern, &B->pending[i]);
  for (int i = 0; i < nmod; i++) emit_module_dispose(&em[i]);
  x->stats.emit_ms = rt_now_ms() - t0;
  /* modules nothing went into are discarded */
  int used = 0;
  for (int i = 0; i < nmod; i++) {
    if (nkern[i]) handle[used++] = handle[i];
    else t->module_discard(t->ud, handle[i]);
  }
  if (nk == 0 || used == 0) {
    for (int i = 0; i < used; i++) t->module_discard(t->ud, handle[i]);
    return HJ_OK;
  }
  x->stats.llvm_modules = used;
  for (ptrdiff_t i = 0; i < arrlen(B->pending); i++) {
    th_thunk *th = &B->pending[i].p->thunks[B->pending[i].thunk];
    if (th->kind == TH_KERNEL || th->kind == TH_MATMUL) arrput(x->kernels, th);
  }
  if (used == 1 && !t->module_finish_many) return t->module_finish(t->ud, handle[0], x);
  return t->module_finish_many(t->ud, handle, used, x);
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
  if (!(x->m = hlo_module_clone_in(ctx, m))) st = hj__ctx_last(ctx) ? hj__ctx_last(ctx) : HJ_ERR_OOM;
  double tp = rt_now_ms();
  if (st == HJ_OK) {
    hj_pass_time_t ct = { "clone", tp - t0, 1 };
    arrput(x->pass_times, ct);
    st = rtc_passes(ctx, t, x->m, x);
  }
  if (st == HJ_OK) rtc_dump_module(ctx, x->seq, x->m);
  if (st == HJ_OK) {
    double tf = rt_now_ms();
    x->fingerprint = hlo_fingerprint_module(x->m);
    x->stats.fingerprint_ms += rt_now_ms() - tf;
  }
  tp = rt_now_ms();
  if (st == HJ_OK) st = rtc_program(&B, x->m->entry, &x->entry);
  hj_pass_time_t bt = { "buffer-assignment+thunks", rt_now_ms() - tp, 1 };
  arrput(x->pass_times, bt);
  x->stats.passes_ms = rt_now_ms() - t0;
  if (st == HJ_OK) st = rtc_emit_all(&B);
  if (st == HJ_OK) x->stats.bytes_moved = rtc_bytes_moved(x);
  if (st == HJ_OK) rtc_dumps(&B);
  arrfree(B.pending);
  for (ptrdiff_t i = 0; i < arrlen(B.kerns); i++) arrfree(B.kerns[i].key);
  arrfree(B.kerns);
  free(B.slots);
  free(B.pos);
  if (st != HJ_OK) {
    rt_exec_free(x);
    return st;
  }
  x->stats.compile_ms = rt_now_ms() - t0;
  x->stats.pass_times = x->pass_times;
  x->stats.npass_times = (int)arrlen(x->pass_times);
  return HJ_OK;
}

void rt_exec_free(rt_exec *x) {
  if (!x) return;
  th_program_free(x->ctx, x->entry);
  for (ptrdiff_t i = 0; i < arrlen(x->matmuls); i++) emit_matmul_plan_free(x->matmuls[i]);
  arrfree(x->matmuls);
  arrfree(x->programs);
  arrfree(x->kernels);
  arrfree(x->pass_times);
  hlo_module_free(x->m);
  memset(x, 0, sizeof *x);
}
