/* exec.c — compile and run (hlojit.h's hj_compile*, hj_exec_*), through the backend table.

   Backend choice: an explicit HJ_BACKEND_CPU / _INTERP / _CUDA uses that backend and its
   failure is the caller's error (a backend not built in says so). HJ_BACKEND_AUTO walks
   hlo_backends (backend.h) in order and takes the first backend whose per-context state can
   be made and whose compile succeeds; each one skipped adds "NAME: STATUS: message" to the
   executable's note (hj_exec_stats().note), and its error is cleared. Today's order: cuda,
   cpu, then interp (the evaluator runs every module).

   Runs (hj_exec_run): the caller's inputs and the bound ones make the full input list;
   every buffer is checked against the flattened signature; missing outputs are made (an
   aliased one is its input, with one more reference). Then the memory each output will be
   given is settled, so that the backend sees shared memory only where the module declares
   it (backend.h):
     - an aliased pair (output k, input i) gets ONE pointer: in[i]'s when out[k] is in[i]
       (in place; a NULL out[k] becomes in[i], or a view of it when the pair differs in
       dtype or shape), else out[k]'s, into which in[i] is copied first;
     - an output whose memory overlaps any input it does not alias, or another output, is
       computed into a temporary (an aliased one starting from a copy of its input) and
       copied into the caller's buffer after the run.
   New buffers and references taken for a failed run are dropped again. */
#include "api.h"
#include "../backend.h"
#include "../text/text.h"
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int64_t exe_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double exe_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Writes the module's text to $dump_dir/NAME.hlo; a dump that fails is not an error. */
static void exe_dump(hj_ctx_t *ctx, const hlo_module *m) {
  if (!ctx->opt.dump_dir || !*ctx->opt.dump_dir) return;
  char *text = NULL, path[1024];
  hj__err_saved saved;
  hj__err_save(ctx, &saved);
  if (hlo_print_module(m, &text) == HJ_OK) {
    snprintf(path, sizeof path, "%s/%s.hlo", ctx->opt.dump_dir, m->name);
    FILE *f = fopen(path, "wb");
    if (f) {
      fputs(text, f);
      fclose(f);
    }
  }
  free(text);
  hj__err_restore(ctx, &saved);
}

/* Compiles |e->m| with |be|, making the context's state for it first. */
static hj_status exe_try(hj_exec_t *e, const hlo_backend *be) {
  hj_ctx_t *ctx = e->ctx;
  void *state = NULL;
  hj_status st = hj__backend_state(ctx, be, &state);
  if (st == HJ_OK) st = be->compile(ctx, state, e->m, &e->x);
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
                          be->name, hj_status_name(st), hj__ctx_err(ctx));
    if (n >= sizeof e->note) n = sizeof e->note - 1;
    hj_ctx_clear_error(ctx);
  }
  if (st == HJ_OK && n) snprintf(e->note + n, sizeof e->note - n, "; using the %s backend", e->be->name);
  return st;
}

static hj_status exe_compile(hj_ctx_t *ctx, hlo_module *m, bool owns, const hj_graph_t *g,
                             hj_exec_t **out) {
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
  memset(e, 0, sizeof *e);
  e->ctx = ctx, e->m = m, e->owns = owns;
  e->ins = hj__leaves(m, false);
  e->outs = hj__leaves(m, true);
  st = hj__exec_io_init(e, g);
  if (st == HJ_OK) st = be ? exe_try(e, be) : exe_auto(e);
  if (st != HJ_OK) {
    e->owns = false;
    hj_exec_destroy(e);
    return st;
  }
  exe_dump(ctx, m);
  e->compile_ms = exe_now_ms() - t0;
  if (ctx->opt.profile) hj_exec_set_profiling(e, true);
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
  if ((st = exe_compile(g->ctx, m, true, g, out)) != HJ_OK) hlo_module_free(m);
  return st;
}

hj_status hj_compile_module(hj_ctx_t *ctx, hj_module_t *m, hj_exec_t **out) {
  if (!out) return hj__err(ctx, HJ_ERR_INVALID_ARG, "hj_compile_module: out is NULL");
  *out = NULL;
  if (!ctx) return HJ_ERR_INVALID_ARG;
  if (!m) return hj__err(ctx, HJ_ERR_INVALID_ARG, "hj_compile_module: module is NULL");
  return exe_compile(ctx, m, false, NULL, out);
}

int hj_exec_num_inputs(const hj_exec_t *e) { return e ? (int)arrlen(e->ins) : 0; }
int hj_exec_num_outputs(const hj_exec_t *e) { return e ? (int)arrlen(e->outs) : 0; }
hj_backend_t hj_exec_backend(const hj_exec_t *e) { return e && e->be ? e->be->kind : HJ_BACKEND_COUNT; }

void hj_exec_destroy(hj_exec_t *e) {
  if (!e) return;
  const char *env = getenv("HLOJIT_PROFILE");
  if (env && *env && strcmp(env, "0") != 0 && e->be && atomic_load(&e->runs) > 0) {
    char *text = NULL;
    if (hj_exec_profile_text(e, &text) == HJ_OK) fputs(text, stderr);
    free(text);
  }
  hj__exec_io_free(e);
  if (e->be && e->be->exec_free) e->be->exec_free(e->x);
  arrfree(e->ins);
  arrfree(e->outs);
  if (e->owns) hlo_module_free(e->m);
  hj__free(e->ctx, e);
}

/* ---- runs ------------------------------------------------------------------------------------ */

/* "f32[4,8]" of |b| vs the leaf it should be. */
static hj_status exe_misfit(hj_exec_t *e, const char *what, int i, const char *name,
                            const hj_buffer_t *b, const hlo_shape *want) {
  char b0[128], b1[128];
  hlo_shape bs = hj__buffer_hlo_shape(b);
  return hj__err(e->ctx, HJ_ERR_SHAPE, "hj_exec_run: %s %d ('%s') is %s, module '%s' wants %s", what, i,
                 name, hlo_shape_str(&bs, b0, sizeof b0), e->m->name, hlo_shape_str(want, b1, sizeof b1));
}

/* The full input list: the bound inputs and, in order, the |nin| given ones. */
static hj_status exe_inputs(hj_exec_t *e, hj_buffer_t *const *in, int nin, hj_buffer_t **full) {
  int n = (int)arrlen(e->ins), unbound = n - e->nbound;
  if (e->nbound && nin == n) {
    int first = 0;
    while (!e->bound[first]) first++;
    return hj__err(e->ctx, HJ_ERR_INVALID_ARG, "hj_exec_run: %d inputs given, but %d of module '%s''s %d "
                   "inputs are bound (input %d, '%s', is): give the %d unbound ones, in input order", nin,
                   e->nbound, e->m->name, n, first, e->in_names[first], unbound);
  }
  if (nin != unbound)
    return hj__err(e->ctx, HJ_ERR_INVALID_ARG, "hj_exec_run: %d inputs given, module '%s' has %d%s", nin,
                   e->m->name, unbound, e->nbound ? " unbound ones" : "");
  if (nin > 0 && !in) return hj__err(e->ctx, HJ_ERR_INVALID_ARG, "hj_exec_run: input array is NULL");
  for (int i = 0, k = 0; i < n; i++) {
    if (e->bound[i]) {
      full[i] = e->bound[i];
      continue;
    }
    if (!(full[i] = in[k++]))
      return hj__err(e->ctx, HJ_ERR_INVALID_ARG, "hj_exec_run: input %d ('%s') is NULL", i, e->in_names[i]);
    if (!hj__buffer_fits(full[i], e->ins[i])) return exe_misfit(e, "input", i, e->in_names[i], full[i], e->ins[i]);
  }
  return HJ_OK;
}

static hj_status exe_outputs(hj_exec_t *e, hj_buffer_t **out, int nout) {
  int n = (int)arrlen(e->outs);
  if (nout != n)
    return hj__err(e->ctx, HJ_ERR_INVALID_ARG, "hj_exec_run: %d outputs given, module '%s' has %d", nout,
                   e->m->name, n);
  if (nout > 0 && !out) return hj__err(e->ctx, HJ_ERR_INVALID_ARG, "hj_exec_run: output array is NULL");
  for (int k = 0; k < n; k++) {
    if (!out[k]) continue;
    if (!hj__buffer_fits(out[k], e->outs[k])) return exe_misfit(e, "output", k, e->out_names[k], out[k], e->outs[k]);
    if (out[k]->read_only)
      return hj__err(e->ctx, HJ_ERR_INVALID_ARG, "hj_exec_run: output %d ('%s') is a read-only buffer "
                     "(mapped, or wrapped read-only)%s", k, e->out_names[k],
                     e->alias_in[k] >= 0 ? ": pass NULL or a writable buffer for a donated input that is read-only" : "");
  }
  return HJ_OK;
}

static bool exe_overlap(const void *a, size_t na, const void *b, size_t nb) {
  const uint8_t *x = a, *y = b;
  return na && nb && x < y + nb && y < x + na;
}

/* Per-run scratch of hj_exec_run. */
typedef struct exe_run {
  hj_buffer_t **full;                 /* N inputs */
  void **ip, **op;                    /* the pointers the backend gets */
  bool *made, *retained, *copy_in;    /* per output */
  hj_buffer_t **tmp;                  /* per output: computed into a temporary */
} exe_run;

/* Settles the memory of every output (see the top comment). */
static hj_status exe_plan_outputs(hj_exec_t *e, exe_run *r, hj_buffer_t **out) {
  int n = (int)arrlen(e->ins), nout = (int)arrlen(e->outs);
  hj_status st = HJ_OK;
  for (int i = 0; i < n; i++) r->ip[i] = r->full[i]->data;
  for (int k = 0; k < nout && st == HJ_OK; k++) {
    int a = e->alias_in[k];
    if (!out[k] && a >= 0 && !r->full[a]->read_only && hj__buffer_fits(r->full[a], e->outs[k])) {
      out[k] = hj_buffer_retain(r->full[a]);
      r->retained[k] = true;
    } else if (!out[k] && a >= 0 && !r->full[a]->read_only) {
      /* an alias between leaves of one byte size but another dtype or shape: the output is
         the input's memory under the output's dtype and shape (a view holding a reference) */
      st = hj_buffer_view(r->full[a], 0, (hj_dtype_t)e->outs[k]->type, hj__shape_from_hlo(e->outs[k]), &out[k]);
      r->made[k] = st == HJ_OK;
    } else if (!out[k]) {
      st = hj__buffer_new(e->ctx, "hj_exec_run", (hj_dtype_t)e->outs[k]->type,
                          hj__shape_from_hlo(e->outs[k]), &out[k]);
      r->made[k] = st == HJ_OK;
    }
    if (st != HJ_OK) break;
    r->op[k] = out[k]->data;
    if (a >= 0 && out[k]->data == r->full[a]->data && out[k]->nbytes == r->full[a]->nbytes) {
      if (r->full[a]->read_only)
        st = hj__err(e->ctx, HJ_ERR_INVALID_ARG, "hj_exec_run: input %d ('%s') is read-only but donated to "
                     "output %d, which would be written in place: pass NULL or a writable buffer as output %d",
                     a, e->in_names[a], k, k);
    } else if (a >= 0) {
      r->copy_in[k] = true;                     /* in[a] is copied into out[k] first */
      r->ip[a] = out[k]->data;
    }
  }
  for (int k = 0; k < nout && st == HJ_OK; k++) {         /* memory shared where it must not be */
    int a = e->alias_in[k];
    size_t nb = out[k]->nbytes;
    bool clash = r->copy_in[k] && exe_overlap(r->op[k], nb, r->full[a]->data, r->full[a]->nbytes);
    for (int i = 0; i < n && !clash; i++)
      clash = i != a && exe_overlap(r->op[k], nb, r->ip[i], r->full[i]->nbytes);
    for (int j = 0; j < nout && !clash; j++)
      clash = j != k && exe_overlap(r->op[k], nb, r->op[j], out[j]->nbytes);
    if (!clash) continue;
    if ((st = hj__buffer_new(e->ctx, "hj_exec_run", out[k]->dtype, out[k]->shape, &r->tmp[k])) != HJ_OK) break;
    r->op[k] = r->tmp[k]->data;
    if (a >= 0) {
      r->ip[a] = r->tmp[k]->data;
      r->copy_in[k] = true;
    }
  }
  for (int k = 0; k < nout && st == HJ_OK; k++)            /* the copies of donated inputs */
    if (r->copy_in[k]) memcpy(r->op[k], r->full[e->alias_in[k]]->data, out[k]->nbytes);
  return st;
}

hj_status hj_exec_run(hj_exec_t *e, hj_buffer_t *const *in, int nin, hj_buffer_t **out, int nout) {
  if (!e) return HJ_ERR_INVALID_ARG;
  int n = (int)arrlen(e->ins), no = (int)arrlen(e->outs);
  exe_run r = {
    .full = calloc((size_t)n + 1, sizeof(hj_buffer_t *)),
    .ip = calloc((size_t)n + 1, sizeof(void *)),
    .op = calloc((size_t)no + 1, sizeof(void *)),
    .made = calloc((size_t)no + 1, sizeof(bool)),
    .retained = calloc((size_t)no + 1, sizeof(bool)),
    .copy_in = calloc((size_t)no + 1, sizeof(bool)),
    .tmp = calloc((size_t)no + 1, sizeof(hj_buffer_t *)),
  };
  hj_status st = r.full && r.ip && r.op && r.made && r.retained && r.copy_in && r.tmp ? HJ_OK
                 : hj__err(e->ctx, HJ_ERR_OOM, "hj_exec_run: out of memory");
  if (st == HJ_OK) st = exe_inputs(e, in, nin, r.full);
  if (st == HJ_OK) st = exe_outputs(e, out, nout);
  if (st == HJ_OK) st = exe_plan_outputs(e, &r, out);
  int64_t t0 = exe_now_ns();
  if (st == HJ_OK) st = e->be->run(e->x, r.ip, n, r.op, no);
  if (st == HJ_OK) {
    atomic_fetch_add(&e->runs, 1);
    atomic_fetch_add(&e->run_ns, exe_now_ns() - t0);
  }
  for (int k = 0; r.tmp && k < no; k++) {
    if (r.tmp[k] && st == HJ_OK) memcpy(out[k]->data, r.tmp[k]->data, out[k]->nbytes);
    hj_buffer_destroy(r.tmp[k]);
  }
  for (int k = 0; st != HJ_OK && r.made && r.retained && k < no && out; k++)
    if (r.made[k] || r.retained[k]) {
      hj_buffer_destroy(out[k]);
      out[k] = NULL;
    }
  free(r.full);
  free(r.ip);
  free(r.op);
  free(r.made);
  free(r.retained);
  free(r.copy_in);
  free(r.tmp);
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
