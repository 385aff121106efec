/* exec.c — compile and run (hlojit.h's hj_compile*, hj_exec_*), through the backend table.

   Backend choice: an explicit HJ_BACKEND_CPU / _INTERP / _CUDA uses that backend and its
   failure is the caller's error (a backend not built in says so). HJ_BACKEND_AUTO walks
   hlo_backends (backend.h) in order and takes the first backend whose per-context state can
   be made and whose compile succeeds; each one skipped adds "NAME: STATUS: message" to the
   executable's note (hj_exec_stats().note) and ctx->backend_note, and its error is cleared.
   Today's order: cpu, then interp (the evaluator runs every module).

   Runs: the API checks the buffers against the flattened signature, makes the missing
   output buffers, and computes an output that is also an input (or another output) into a
   temporary copied back afterwards, so that a backend never sees aliased buffers. New
   buffers made for a failed run are destroyed again. */
#include "api.h"
#include "../backend.h"
#include "../text/text.h"
#include <stdlib.h>
#include <time.h>

struct hj_exec {
  hj_ctx_t *ctx;
  hlo_module *m;
  bool owns;                          /* made by hj_compile: freed with the executable */
  const hlo_backend *be;
  void *x;                            /* the backend's executable */
  const hlo_shape **ins, **outs;      /* stb_ds: flattened leaves, pointing into m */
  double compile_ms;
  char note[512];                     /* why AUTO skipped backends; "" when it did not */
};

static double exe_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Writes the module's text to $dump_dir/NAME.hlo; a dump that fails is not an error. */
static void exe_dump(hj_ctx_t *ctx, const hlo_module *m) {
  if (!ctx->opt.dump_dir || !*ctx->opt.dump_dir) return;
  char *text = NULL, path[1024];
  hj_status last = ctx->last;
  char err[sizeof ctx->err];
  memcpy(err, ctx->err, sizeof err);
  if (hlo_print_module(m, &text) == HJ_OK) {
    snprintf(path, sizeof path, "%s/%s.hlo", ctx->opt.dump_dir, m->name);
    FILE *f = fopen(path, "wb");
    if (f) {
      fputs(text, f);
      fclose(f);
    }
  }
  free(text);
  ctx->last = last;
  memcpy(ctx->err, err, sizeof err);
}

/* Compiles |e->m| with |be|, making the context's state for it first. */
static hj_status exe_try(hj_exec_t *e, const hlo_backend *be) {
  hj_ctx_t *ctx = e->ctx;
  void **state = &ctx->backend_state[be->kind];
  hj_status st = HJ_OK;
  if (be->ctx_create && !*state) st = be->ctx_create(ctx, state);
  if (st == HJ_OK) st = be->compile(ctx, *state, e->m, &e->x);
  if (st == HJ_OK) e->be = be;
  return st;
}

/* AUTO: the first backend of the table that compiles |e->m|; the others' reasons noted. */
static hj_status exe_auto(hj_exec_t *e) {
  hj_ctx_t *ctx = e->ctx;
  hj_status st = HJ_ERR_UNSUPPORTED;
  size_t n = 0;
  for (int i = 0; hlo_backends[i] && st != HJ_OK; i++) {
    const hlo_backend *be = hlo_backends[i];
    if ((st = exe_try(e, be)) == HJ_OK) break;
    if (!hlo_backends[i + 1]) break;   /* the last one's error is the caller's */
    n += (size_t)snprintf(e->note + n, n < sizeof e->note ? sizeof e->note - n : 0,
                          "%sHJ_BACKEND_AUTO: the %s backend failed (%s: %.300s)", n ? "; " : "",
                          be->name, hj_status_name(st), ctx->err);
    if (n >= sizeof e->note) n = sizeof e->note - 1;
    hj_ctx_clear_error(ctx);
  }
  if (st == HJ_OK && n) {
    snprintf(e->note + n, sizeof e->note - n, "; using the %s backend", e->be->name);
    snprintf(ctx->backend_note, sizeof ctx->backend_note, "%s", e->note);
  }
  return st;
}

static hj_status exe_compile(hj_ctx_t *ctx, hlo_module *m, bool owns, hj_exec_t **out) {
  double t0 = exe_now_ms();
  hj_backend_t kind = ctx->opt.backend;
  const hlo_backend *be = kind == HJ_BACKEND_AUTO ? NULL : hlo_backend_find(kind);
  if (kind != HJ_BACKEND_AUTO && !be)
    return hj__err(ctx, HJ_ERR_UNSUPPORTED, "the %s backend is not part of this build (HLOJIT_NO_LLVM): "
                   "link build/libhlojit.a or build without HLOJIT_NO_LLVM, or use HJ_BACKEND_INTERP",
                   kind == HJ_BACKEND_CPU ? "CPU" : kind == HJ_BACKEND_CUDA ? "CUDA" : "requested");
  hj_status st = hlo_verify_module(m);
  if (st != HJ_OK) return st;
  if (!m->entry || !m->entry->root)
    return hj__err(ctx, HJ_ERR_INVALID_ARG, "module '%s' has no entry computation", m->name);
  hj_exec_t *e = hj__alloc(ctx, sizeof *e);
  if (!e) return hj__err(ctx, HJ_ERR_OOM, "out of memory creating an executable");
  *e = (hj_exec_t){ .ctx = ctx, .m = m, .owns = owns };
  e->ins = hj__leaves(m, false);
  e->outs = hj__leaves(m, true);
  ctx->backend_note[0] = 0;
  st = be ? exe_try(e, be) : exe_auto(e);
  if (st != HJ_OK) {
    e->owns = false;
    hj_exec_destroy(e);
    return st;
  }
  exe_dump(ctx, m);
  e->compile_ms = exe_now_ms() - t0;
  *out = e;
  return HJ_OK;
}

hj_status hj_compile(hj_graph_t *g, hj_exec_t **out) {
  if (!out) return hj__err(g ? g->ctx : NULL, HJ_ERR_INVALID_ARG, "hj_compile: out is NULL");
  *out = NULL;
  if (!g) return HJ_ERR_INVALID_ARG;
  hlo_module *m;
  hj_status st = hj_graph_to_module(g, &m);
  if (st != HJ_OK) return st;
  if ((st = exe_compile(g->ctx, m, true, out)) != HJ_OK) hlo_module_free(m);
  return st;
}

hj_status hj_compile_module(hj_ctx_t *ctx, hj_module_t *m, hj_exec_t **out) {
  if (!out) return hj__err(ctx, HJ_ERR_INVALID_ARG, "hj_compile_module: out is NULL");
  *out = NULL;
  if (!ctx) return HJ_ERR_INVALID_ARG;
  if (!m) return hj__err(ctx, HJ_ERR_INVALID_ARG, "hj_compile_module: module is NULL");
  return exe_compile(ctx, m, false, out);
}

int hj_exec_num_inputs(const hj_exec_t *e) { return e ? (int)arrlen(e->ins) : 0; }
int hj_exec_num_outputs(const hj_exec_t *e) { return e ? (int)arrlen(e->outs) : 0; }
hj_backend_t hj_exec_backend(const hj_exec_t *e) { return e && e->be ? e->be->kind : HJ_BACKEND_COUNT; }

hj_status hj_exec_stats(const hj_exec_t *e, hj_exec_stats_t *out) {
  if (!e || !out) return HJ_ERR_INVALID_ARG;
  memset(out, 0, sizeof *out);
  if (e->be->stats) e->be->stats(e->x, out);
  out->backend = e->be->kind;
  out->compile_ms = e->compile_ms;
  out->note = e->note;
  return HJ_OK;
}

void hj_exec_destroy(hj_exec_t *e) {
  if (!e) return;
  if (e->be && e->be->exec_free) e->be->exec_free(e->x);
  arrfree(e->ins);
  arrfree(e->outs);
  if (e->owns) hlo_module_free(e->m);
  hj__free(e->ctx, e);
}

/* Does buffer |b| hold an array of leaf shape |s| (dynamic dims at their bound)? */
static bool exe_fits(const hj_buffer_t *b, const hlo_shape *s) {
  if ((int)b->dtype != (int)s->type || b->shape.rank != s->rank) return false;
  for (int i = 0; i < s->rank; i++)
    if ((b->shape.dims[i] < 0 ? -b->shape.dims[i] : b->shape.dims[i]) != s->dims[i]) return false;
  return true;
}

static hj_status exe_check_buffers(hj_exec_t *e, hj_buffer_t *const *bufs, int n, bool outputs) {
  const hlo_shape **want = outputs ? e->outs : e->ins;
  const char *what = outputs ? "output" : "input";
  if (n != (int)arrlen(want))
    return hj__err(e->ctx, HJ_ERR_INVALID_ARG, "hj_exec_run: %d %ss given, module '%s' has %d", n, what,
                   e->m->name, (int)arrlen(want));
  if (n > 0 && !bufs) return hj__err(e->ctx, HJ_ERR_INVALID_ARG, "hj_exec_run: %s array is NULL", what);
  for (int i = 0; i < n; i++) {
    if (!bufs[i]) {
      if (outputs) continue;
      return hj__err(e->ctx, HJ_ERR_INVALID_ARG, "hj_exec_run: input %d is NULL", i);
    }
    if (exe_fits(bufs[i], want[i])) continue;
    char b0[128], b1[128];
    hlo_shape bs = hj__buffer_hlo_shape(bufs[i]);
    return hj__err(e->ctx, HJ_ERR_SHAPE, "hj_exec_run: %s %d is %s, module '%s' wants %s", what, i,
                   hlo_shape_str(&bs, b0, sizeof b0), e->m->name, hlo_shape_str(want[i], b1, sizeof b1));
  }
  return HJ_OK;
}

hj_status hj_exec_run(hj_exec_t *e, hj_buffer_t *const *in, int nin, hj_buffer_t **out, int nout) {
  if (!e) return HJ_ERR_INVALID_ARG;
  hj_status st = exe_check_buffers(e, in, nin, false);
  if (st == HJ_OK) st = exe_check_buffers(e, out, nout, true);
  if (st != HJ_OK) return st;
  void **ip = calloc((size_t)nin + 1, sizeof *ip), **op = calloc((size_t)nout + 1, sizeof *op);
  bool *made = calloc((size_t)nout + 1, sizeof *made);
  hj_buffer_t **tmp = calloc((size_t)nout + 1, sizeof *tmp);
  if (!ip || !op || !made || !tmp) st = hj__err(e->ctx, HJ_ERR_OOM, "hj_exec_run: out of memory");
  for (int i = 0; st == HJ_OK && i < nin; i++) ip[i] = in[i]->data;
  for (int i = 0; st == HJ_OK && i < nout; i++) {
    if (!out[i]) {
      st = hj__buffer_new(e->ctx, "hj_exec_run", (hj_dtype_t)e->outs[i]->type,
                          hj__shape_from_hlo(e->outs[i]), &out[i]);
      made[i] = st == HJ_OK;
    }
    if (st != HJ_OK) break;
    op[i] = out[i]->data;
    bool clash = false;
    for (int k = 0; k < nin && !clash; k++) clash = in[k]->data == out[i]->data;
    for (int k = 0; k < i && !clash; k++) clash = out[k]->data == out[i]->data;
    if (clash && (st = hj__buffer_new(e->ctx, "hj_exec_run", out[i]->dtype, out[i]->shape, &tmp[i])) == HJ_OK)
      op[i] = tmp[i]->data;
  }
  if (st == HJ_OK) st = e->be->run(e->x, ip, nin, op, nout);
  for (int i = 0; i < nout && tmp; i++) {
    if (tmp[i] && st == HJ_OK) memcpy(out[i]->data, tmp[i]->data, out[i]->nbytes);
    hj_buffer_destroy(tmp[i]);
  }
  for (int i = 0; st != HJ_OK && made && i < nout; i++)
    if (made[i]) {
      hj_buffer_destroy(out[i]);
      out[i] = NULL;
    }
  free(ip);
  free(op);
  free(made);
  free(tmp);
  return st;
}

/* ---- hj_module_to_ptx: the CUDA backend's code_text (backend.h), no device needed ---------- */
hj_status hj_module_to_ptx(hj_ctx_t *ctx, hj_module_t *m, const char *arch, char **ptx) {
  if (!ptx) return hj__err(ctx, HJ_ERR_INVALID_ARG, "hj_module_to_ptx: ptx is NULL");
  *ptx = NULL;
  if (!ctx) return HJ_ERR_INVALID_ARG;
  if (!m) return hj__err(ctx, HJ_ERR_INVALID_ARG, "hj_module_to_ptx: module is NULL");
  const hlo_backend *be = hlo_backend_find(HJ_BACKEND_CUDA);
  if (!be || !be->code_text)
    return hj__err(ctx, HJ_ERR_UNSUPPORTED, "hj_module_to_ptx: the CUDA backend is not part of this "
                   "build (HLOJIT_NO_LLVM)");
  hj_status st = hlo_verify_module(m);
  if (st != HJ_OK) return st;
  if (!m->entry || !m->entry->root)
    return hj__err(ctx, HJ_ERR_INVALID_ARG, "module '%s' has no entry computation", m->name);
  return be->code_text(ctx, m, arch, ptx);
}
