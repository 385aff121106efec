/* runtime/thunks.c — running and printing thunk sequences (runtime/runtime.h).

   A run of a program is a frame {program, input pointers, output pointers}; every ba_loc
   of a thunk resolves against it (th_ptr). Thunks run in order on the calling thread;
   kernel and matmul thunks go to the backend's hooks (the CPU backend splits a kernel's
   parallel range over its pool; the emitters guarantee the same bits for any split).

   Evaluator fallback: the fused computation's parameters are literal views of the operand
   leaves (tuple operands become tuple views over consecutive leaves); the evaluator never
   writes its arguments, and its result leaves are copied into the output leaves, so an
   output that aliases operand 0 (in-place dynamic-update-slice) is fine too.

   Profiling (th_runtime.profile): each thunk's wall time and count accumulate in its
   prof_* fields (a while's time includes its nested programs'); profile.c reads them. */
#include "runtime.h"
#include "../eval/eval.h"
#include "../emitters/matmul_plan.h"
#include <stdlib.h>
#include <time.h>

typedef struct th_frame {
  th_program *p;
  void *const *in, *const *out;
} th_frame;

const char *th_kind_name(th_kind k) {
  static const char *n[TH_KIND_COUNT] = { "kernel", "matmul", "copy", "eval", "while", "cond" };
  return (unsigned)k < TH_KIND_COUNT ? n[k] : "?";
}

static void *th_ptr(const th_frame *f, const ba_loc *l) {
  switch (l->where) {
  case BA_PARAM: return f->in[l->index];
  case BA_OUTPUT: return f->out[l->index];
  case BA_CONST: return f->p->consts[l->index];
  case BA_ARENA: return f->p->arena + l->index;
  default: return NULL;
  }
}

int64_t th_while_scratch_bytes(const hlo_instr *w) {
  const hlo_shape **sh = NULL;
  hlo_shape_leaves(&w->shape, &sh);
  int64_t n = 64;                                   /* the predicate */
  for (ptrdiff_t i = 0; i < arrlen(sh); i++)
    if (hlo_shape_is_array(sh[i])) n += (hlo_shape_bytes(sh[i]) + 63) / 64 * 64;
  arrfree(sh);
  return n;
}

hj_status th_program_alloc(hj_ctx_t *ctx, th_program *p) {
  p->arena = hj__alloc(ctx, (size_t)(p->plan.arena_bytes ? p->plan.arena_bytes : 64));
  p->consts = calloc((size_t)arrlen(p->plan.consts) + 1, sizeof(void *));
  if (!p->arena || !p->consts) return hj__err(ctx, HJ_ERR_OOM, "out of memory for the arena of '%s'", p->comp->name);
  for (ptrdiff_t k = 0; k < arrlen(p->plan.consts); k++) {
    const hlo_literal *l = p->plan.consts[k].lit;
    if (!(p->consts[k] = hj__alloc(ctx, (size_t)l->nbytes)))
      return hj__err(ctx, HJ_ERR_OOM, "out of memory for constant '%s'", p->plan.consts[k].ins->name);
    if (l->nbytes) memcpy(p->consts[k], l->data, (size_t)l->nbytes);
  }
  return HJ_OK;
}

void th_program_free(hj_ctx_t *ctx, th_program *p) {
  if (!p) return;
  for (ptrdiff_t i = 0; i < arrlen(p->thunks); i++) {
    th_thunk *t = &p->thunks[i];
    for (ptrdiff_t k = 0; k < arrlen(t->sub); k++) th_program_free(ctx, t->sub[k]);
    arrfree(t->sub);
    arrfree(t->args);
    arrfree(t->outs);
    arrfree(t->arg_off);
    free(t->bufs);
  }
  arrfree(p->thunks);
  for (ptrdiff_t k = 0; p->consts && k < arrlen(p->plan.consts); k++) hj__free(ctx, p->consts[k]);
  free(p->consts);
  hj__free(ctx, p->arena);
  ba_plan_free(&p->plan);
  free(p);
}

/* ---- kernels ------------------------------------------------------------------------------ */

/* The kernel's pointer table, resolved in frame |f| (runs of one program never overlap:
   the backend serialises runs of an executable, so the table is reused). */
static hj_status th_bufs(const th_frame *f, th_thunk *t, void ***bufs) {
  if (!t->bufs) t->bufs = malloc(sizeof(void *) * (size_t)(arrlen(t->args) + arrlen(t->outs) + 1));
  void **v = t->bufs;
  if (!v) return HJ_ERR_OOM;
  int k = 0;
  for (ptrdiff_t i = 0; i < arrlen(t->args); i++) v[k++] = th_ptr(f, &t->args[i]);
  for (ptrdiff_t i = 0; i < arrlen(t->outs); i++) v[k++] = th_ptr(f, &t->outs[i]);
  *bufs = v;
  return HJ_OK;
}

/* ---- evaluator fallback ------------------------------------------------------------------- */

/* The operand leaves of one eval thunk, for th_arg_data. */
typedef struct th_args { const th_frame *f; const th_thunk *t; } th_args;

/* Leaf data for hlo_literal_view_tree: the thunk's argument leaf |k| (NULL past the end). */
static void *th_arg_data(const void *ud, int k) {
  const th_args *a = ud;
  return k < arrlen(a->t->args) ? th_ptr(a->f, &a->t->args[k]) : NULL;
}

static hj_status th_eval(th_runtime *rt, const th_frame *f, const th_thunk *t) {
  const hlo_instr *ins = t->ins;
  if (rt->host_sync) {   /* the device's writes first (th_runtime.host_sync) */
    hj_status hs = rt->host_sync(rt->ud);
    if (hs != HJ_OK) return hs;
  }
  void **scratch = NULL;
  hlo_literal **args = NULL, *res = NULL;
  const hlo_literal **lv = NULL;
  hj_status st = HJ_OK;
  int k = 0;
  th_args src = { f, t };
  for (int i = 0; i < ins->noperands && st == HJ_OK; i++) {
    hlo_literal *a = hlo_literal_view_tree(&ins->operands[i]->shape, th_arg_data, &src, &k,
                                           &scratch);
    if (!a) st = hj__err(rt->ctx, HJ_ERR_OOM, "evaluator fallback: out of memory");
    arrput(args, a);
  }
  if (st == HJ_OK) st = hlo_eval_computation(rt->ctx, ins->calls[0], args, ins->noperands, &res);
  if (st == HJ_OK) {
    hlo_literal_leaves(res, &lv);
    if (arrlen(lv) != arrlen(t->outs))
      st = hj__err(rt->ctx, HJ_ERR_INTERNAL, "evaluator fallback of '%s': %d result leaves, %d outputs",
                   ins->name, (int)arrlen(lv), (int)arrlen(t->outs));
  }
  for (ptrdiff_t i = 0; st == HJ_OK && i < arrlen(lv); i++) {
    void *dst = th_ptr(f, &t->outs[i]);
    if (dst && lv[i]->nbytes) memcpy(dst, lv[i]->data, (size_t)lv[i]->nbytes);
  }
  arrfree(lv);
  hlo_literal_free(res);
  for (ptrdiff_t i = 0; i < arrlen(scratch); i++) free(scratch[i]);
  arrfree(scratch);
  arrfree(args);
  return st;
}

/* ---- control flow ------------------------------------------------------------------------- */

static hj_status th_while(th_runtime *rt, const th_frame *f, const th_thunk *t) {
  int n = (int)arrlen(t->outs);
  void **state = malloc(sizeof(void *) * (size_t)(n + 1)), **next = malloc(sizeof(void *) * (size_t)(n + 1));
  hj_status st = state && next ? HJ_OK : hj__err(rt->ctx, HJ_ERR_OOM, "while: out of memory");
  uint8_t *scr = f->p->arena + t->scratch, *pred = scr;
  int64_t off = 64;
  for (int i = 0; st == HJ_OK && i < n; i++) {
    state[i] = th_ptr(f, &t->outs[i]);
    next[i] = scr + off;
    off += (t->outs[i].bytes + 63) / 64 * 64;
    void *src = th_ptr(f, &t->args[i]);
    if (src && state[i] && src != state[i] && t->outs[i].bytes)
      st = rt->copy ? rt->copy(rt->ud, state[i], src, (size_t)t->outs[i].bytes)
                    : (memcpy(state[i], src, (size_t)t->outs[i].bytes), HJ_OK);
  }
  while (st == HJ_OK) {
    void *po = pred;
    if ((st = th_program_run(rt, t->sub[0], state, &po)) != HJ_OK) break;
    if (rt->host_sync && (st = rt->host_sync(rt->ud)) != HJ_OK) break;
    if (!*pred) break;
    if ((st = th_program_run(rt, t->sub[1], state, next)) != HJ_OK) break;
    for (int i = 0; i < n && st == HJ_OK; i++)
      if (state[i] && t->outs[i].bytes)
        st = rt->copy ? rt->copy(rt->ud, state[i], next[i], (size_t)t->outs[i].bytes)
                      : (memcpy(state[i], next[i], (size_t)t->outs[i].bytes), HJ_OK);
    rt->iterations++;
  }
  free(state);
  free(next);
  return st;
}

static hj_status th_cond(th_runtime *rt, const th_frame *f, const th_thunk *t) {
  const hlo_instr *sel = t->ins->operands[0];
  if (rt->host_sync) {   /* the selector may come from the device */
    hj_status hs = rt->host_sync(rt->ud);
    if (hs != HJ_OK) return hs;
  }
  const void *sp = th_ptr(f, &t->args[0]);
  int nb = (int)arrlen(t->sub), b;
  if (sel->shape.type == HLO_PRED) {
    b = *(const uint8_t *)sp ? 0 : 1;
  } else {
    int64_t v = hlo_load_s64(sel->shape.type, sp, 0);
    b = v < 0 || v >= nb ? nb - 1 : (int)v;
  }
  int from = t->arg_off[b], to = b + 1 < nb ? t->arg_off[b + 1] : (int)arrlen(t->args);
  void **in = malloc(sizeof(void *) * (size_t)(to - from + 1));
  void **out = malloc(sizeof(void *) * (size_t)(arrlen(t->outs) + 1));
  hj_status st = in && out ? HJ_OK : hj__err(rt->ctx, HJ_ERR_OOM, "conditional: out of memory");
  for (int i = from; st == HJ_OK && i < to; i++) in[i - from] = th_ptr(f, &t->args[i]);
  for (ptrdiff_t i = 0; st == HJ_OK && i < arrlen(t->outs); i++) out[i] = th_ptr(f, &t->outs[i]);
  if (st == HJ_OK) st = th_program_run(rt, t->sub[b], in, out);
  free(in);
  free(out);
  return st;
}

/* ---- the sequence --------------------------------------------------------------------------- */

static int64_t th_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

hj_status th_program_run(th_runtime *rt, th_program *p, void *const *in, void *const *out) {
  th_frame f = { p, in, out };
  for (ptrdiff_t i = 0; i < arrlen(p->thunks); i++) {
    th_thunk *t = &p->thunks[i];
    hj_status st = HJ_OK;
    void **bufs = NULL;
    int64_t t0 = rt->profile ? th_now_ns() : 0;
    switch (t->kind) {
    case TH_KERNEL:
      if (t->parallel_n <= 0) break;
      if ((st = th_bufs(&f, t, &bufs)) != HJ_OK) break;
      st = rt->kernel(rt->ud, t, bufs);
      break;
    case TH_MATMUL:
      if ((st = th_bufs(&f, t, &bufs)) != HJ_OK) break;
      st = rt->matmul ? rt->matmul(rt->ud, t, bufs)
                      : hj__err(rt->ctx, HJ_ERR_INTERNAL, "matmul thunk without a driver");
      break;
    case TH_COPY: {
      void *src = th_ptr(&f, &t->args[0]), *dst = th_ptr(&f, &t->outs[0]);
      if (src && dst && src != dst && t->outs[0].bytes)
        st = rt->copy ? rt->copy(rt->ud, dst, src, (size_t)t->outs[0].bytes)
                      : (memcpy(dst, src, (size_t)t->outs[0].bytes), HJ_OK);
      break;
    }
    case TH_EVAL: st = th_eval(rt, &f, t); break;
    case TH_WHILE: st = th_while(rt, &f, t); break;
    case TH_COND: st = th_cond(rt, &f, t); break;
    default: st = hj__err(rt->ctx, HJ_ERR_INTERNAL, "unknown thunk kind %d", (int)t->kind); break;
    }
    (void)bufs;
    if (rt->profile) {
      t->prof_ns += th_now_ns() - t0;
      t->prof_calls++;
    }
    if (st == HJ_OK) continue;
    if (st == HJ_ERR_OOM && !hj__ctx_err(rt->ctx)[0]) hj__err(rt->ctx, st, "thunk '%s': out of memory", t->ins->name);
    return st;
  }
  return HJ_OK;
}

/* ---- text ------------------------------------------------------------------------------------ */

static void th_locs(char **sb, const char *what, const ba_loc *v) {
  sb_printf(sb, " %s(", what);
  for (ptrdiff_t i = 0; i < arrlen(v); i++) {
    if (i) sb_puts(sb, ", ");
    if (v[i].where == BA_ARENA) sb_printf(sb, "arena@%lld", (long long)v[i].index);
    else sb_printf(sb, "%s %lld", ba_where_name(v[i].where), (long long)v[i].index);
  }
  sb_puts(sb, ")");
}

/* " fns(ukr NAME, gemv NAME, ...)": a matmul thunk's symbol names the plan, not a function;
   these are the functions it calls, renamed with the module (code_key.c) like every kernel. */
static void th_matmul_fns(char **sb, const struct emit_matmul_plan *p) {
  const char *what[] = { "ukr", "ukr", "gemv", "epi", "tiled" };
  const char *name[] = { p->ukr_name[0], p->ukr_name[1], p->gemv_name, p->epi_name, p->gpu_tiled_name };
  int n = 0;
  for (int i = 0; i < 5; i++)
    if (name[i][0]) sb_printf(sb, "%s%s %s", n++ ? ", " : " fns(", what[i], name[i]);
  if (n) sb_puts(sb, ")");
}

void th_program_print(const th_program *p, char **sb, int depth) {
  char ind[64];
  int d = depth * 4 < 60 ? depth * 4 : 60;
  memset(ind, ' ', (size_t)d);
  ind[d] = 0;
  sb_printf(sb, "%sprogram %s: %d thunks, arena %lld bytes\n", ind, p->comp->name,
            (int)arrlen(p->thunks), (long long)p->plan.arena_bytes);
  for (ptrdiff_t i = 0; i < arrlen(p->thunks); i++) {
    const th_thunk *t = &p->thunks[i];
    sb_printf(sb, "%s  %3d %-6s %s", ind, (int)i, th_kind_name(t->kind), t->ins->name);
    if (t->kind == TH_KERNEL || t->kind == TH_MATMUL)
      sb_printf(sb, " [%s %s n=%lld grain=%lld]", t->emitter ? t->emitter : "?", t->sym,
                (long long)t->parallel_n, (long long)t->grain);
    if (t->kind == TH_MATMUL && t->matmul)   /* the plan's functions, as the dumped .ll names them */
      th_matmul_fns(sb, t->matmul);
    if (t->kind == TH_EVAL)
      sb_printf(sb, " [%s: %s]", t->runtime_op ? "runtime op" : t->emit_error ? "EMITTER ERROR" : "fallback", t->why);
    th_locs(sb, "in", t->args);
    th_locs(sb, "out", t->outs);
    sb_puts(sb, "\n");
    for (ptrdiff_t k = 0; k < arrlen(t->sub); k++) {
      sb_printf(sb, "%s    %s:\n", ind, t->kind == TH_WHILE ? (k ? "body" : "condition") : "branch");
      th_program_print(t->sub[k], sb, depth + 2);
    }
  }
}
