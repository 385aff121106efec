/* jit/jit_trace.c — a cache miss: trace the build function at the key's shapes, pad, compile,
   and make the entry with its reusable buffers.

   Trace: a fresh graph named after the jit; one hj_param per declared parameter with the
   key's dtype and dims, each dynamic dim a bounded dim `<=bucket` (HJ_DYN) in padded mode,
   its exact size in exact mode; the build function; the graph's first error, if any, is the
   call's error. The module then goes through hlo_pass_dynamic_pad (padded mode): it becomes
   static, gains one s32[] parameter per dynamic parameter dim and the s32[] outputs of
   computed output sizes (pass_dyn_info says which). hj_compile_module compiles it; the
   entry owns the module (the executable borrows it).

   An entry's buffers, made once: the s32[] size inputs and size outputs, and the argument
   arrays handed to hj_exec_run; the padded input copies and the padded output scratch are
   made on first need (jit_run.c). */
#include "jit.h"
#include <stdlib.h>

void jit_entry_free(hj_jit_t *j, jit_entry *e) {
  if (!e) return;
  hj_exec_destroy(e->exec);
  hlo_module_free(e->m);
  for (int i = 0; i < e->nparams && e->in_pad; i++) hj_buffer_destroy(e->in_pad[i]);
  for (ptrdiff_t i = 0; e->size_in && i < arrlen(e->info.params); i++) hj_buffer_destroy(e->size_in[i]);
  for (int i = 0; e->size_out && i < e->info.nsize_outputs; i++) hj_buffer_destroy(e->size_out[i]);
  for (int i = 0; e->out_pad && i < e->noutputs; i++) hj_buffer_destroy(e->out_pad[i]);
  free(e->in_pad);
  free(e->size_in);
  free(e->size_out);
  free(e->out_pad);
  free(e->ins);
  free(e->outs);
  free(e->out_dtype);
  free(e->out_shape);
  free(e->key);
  pass_dyn_info_free(&e->info);
  free(e);
}

/* The parameter shapes of the trace, from the key. */
static hj_status jtr_params(hj_jit_t *j, hj_graph_t *g, const int64_t *key, int mode, hj_tensor_t *ts) {
  int at = 1;
  for (int i = 0; i < j->nparams; i++) {
    hj_dtype_t t = (hj_dtype_t)key[at];
    hj_shape_t s = { .rank = (int)key[at + 1] };
    for (int d = 0; d < s.rank; d++) {
      s.dims[d] = key[at + 2 + d];
      if (mode == JIT_MODE_PADDED && j->params[i].shape.dims[d] < 0) s.dims[d] = HJ_DYN(s.dims[d]);
    }
    at += 2 + s.rank;
    ts[i] = hj_param(g, t, s, j->params[i].name);
    if (!hj_tensor_ok(ts[i])) return hj_graph_status(g);
  }
  return HJ_OK;
}

/* Runs the build function on a fresh graph; *out is its module. */
static hj_status jtr_trace(hj_jit_t *j, const int64_t *key, int mode, hlo_module **out) {
  *out = NULL;
  hj_graph_t *g = NULL;
  hj_status st = hj_graph_create(j->ctx, j->name, &g);
  if (st != HJ_OK) return st;
  hj_tensor_t small[16], *ts = j->nparams <= 16 ? small : calloc((size_t)j->nparams, sizeof *ts);
  if (!ts) st = hj__err(j->ctx, HJ_ERR_OOM, "hj_jit_call: out of memory");
  if (st == HJ_OK) st = jtr_params(j, g, key, mode, ts);
  if (st == HJ_OK) {
    st = j->build(g, ts, j->nparams, j->user);
    hj_status gs = hj_graph_status(g);
    if (st == HJ_OK && gs != HJ_OK) st = gs;
    if (st != HJ_OK && !hj__ctx_err(j->ctx)[0])
      hj__err(j->ctx, st, "hj_jit_call '%s': the build function returned %s", j->name, hj_status_name(st));
  }
  if (st == HJ_OK) st = hj_graph_to_module(g, out);
  if (ts != small) free(ts);
  hj_graph_destroy(g);
  return st;
}

static hj_status jtr_scalar_buffers(hj_jit_t *j, int n, hj_buffer_t ***out) {
  *out = n > 0 ? calloc((size_t)n, sizeof **out) : NULL;
  if (n > 0 && !*out) return hj__err(j->ctx, HJ_ERR_OOM, "hj_jit_call: out of memory");
  for (int i = 0; i < n; i++) {
    hj_status st = hj_buffer_create(j->ctx, HJ_S32, HJ_SCALAR, &(*out)[i]);
    if (st != HJ_OK) return st;
  }
  return HJ_OK;
}

/* The entry's buffers and argument arrays. */
static hj_status jtr_buffers(hj_jit_t *j, jit_entry *e) {
  e->nparams = j->nparams;
  e->nin = hj_exec_num_inputs(e->exec);
  e->nout = hj_exec_num_outputs(e->exec);
  e->noutputs = e->mode == JIT_MODE_PADDED ? e->info.noutputs : e->nout;
  int nsp = (int)arrlen(e->info.params);
  if (e->nin != e->nparams + nsp || e->nout != e->noutputs + e->info.nsize_outputs)
    return hj__err(j->ctx, HJ_ERR_INTERNAL, "hj_jit_call '%s': the compiled module has %d/%d inputs/outputs, "
                   "the padder made %d/%d", j->name, e->nin, e->nout, e->nparams + nsp,
                   e->noutputs + e->info.nsize_outputs);
  hj_status st = jtr_scalar_buffers(j, nsp, &e->size_in);
  if (st == HJ_OK) st = jtr_scalar_buffers(j, e->info.nsize_outputs, &e->size_out);
  e->in_pad = calloc((size_t)e->nparams + 1, sizeof *e->in_pad);
  e->out_pad = calloc((size_t)e->noutputs + 1, sizeof *e->out_pad);
  e->ins = calloc((size_t)e->nin + 1, sizeof *e->ins);
  e->outs = calloc((size_t)e->nout + 1, sizeof *e->outs);
  if (st == HJ_OK && (!e->in_pad || !e->out_pad || !e->ins || !e->outs))
    st = hj__err(j->ctx, HJ_ERR_OOM, "hj_jit_call: out of memory");
  e->out_dtype = calloc((size_t)e->noutputs + 1, sizeof *e->out_dtype);
  e->out_shape = calloc((size_t)e->noutputs + 1, sizeof *e->out_shape);
  if (st == HJ_OK && (!e->out_dtype || !e->out_shape)) st = hj__err(j->ctx, HJ_ERR_OOM, "hj_jit_call: out of memory");
  for (int i = 0; st == HJ_OK && i < e->noutputs; i++)
    st = hj_module_output(e->m, i, &e->out_dtype[i], &e->out_shape[i]);
  for (int i = 0; st == HJ_OK && i < nsp; i++) e->ins[e->nparams + i] = e->size_in[i];
  for (int i = 0; st == HJ_OK && i < e->info.nsize_outputs; i++) e->outs[e->noutputs + i] = e->size_out[i];
  return st;
}

hj_status jit_trace_compile(hj_jit_t *j, const int64_t *key, int nkey, int mode, jit_entry **out,
                            bool *declined) {
  *out = NULL;
  *declined = false;
  double t0 = jit_now_ms();
  jit_entry *e = calloc(1, sizeof *e);
  if (!e || !(e->key = malloc(sizeof *key * (size_t)nkey))) {
    free(e);
    return hj__err(j->ctx, HJ_ERR_OOM, "hj_jit_call: out of memory");
  }
  memcpy(e->key, key, sizeof *key * (size_t)nkey);
  e->nkey = nkey;
  e->mode = mode;
  hj_status st = jtr_trace(j, key, mode, &e->m);
  if (st == HJ_OK && mode == JIT_MODE_PADDED) {
    st = hlo_pass_dynamic_pad(&(hlo_pass_ctx){ .dyn_info = &e->info }, e->m, NULL);
    if (st == HJ_ERR_UNSUPPORTED) {
      *declined = true;
      snprintf(j->pad_note, sizeof j->pad_note, "%.500s", hj__ctx_err(j->ctx));
    }
  }
  double t1 = jit_now_ms();
  if (st == HJ_OK) st = hj_compile_module(j->ctx, e->m, &e->exec);
  double t2 = jit_now_ms();
  if (st == HJ_OK) st = jtr_buffers(j, e);
  if (st != HJ_OK) {
    jit_entry_free(j, e);
    return st;
  }
  j->last_trace_ms = t1 - t0;
  j->last_compile_ms = t2 - t1;
  j->stats.trace_ms += t1 - t0;
  j->stats.compile_ms += t2 - t1;
  hj_exec_stats_t es;
  if (hj_exec_stats(e->exec, &es) == HJ_OK) {
    j->stats.passes_ms += es.passes_ms;
    j->stats.emit_ms += es.emit_ms;
    j->stats.optimize_ms += es.optimize_ms;
    j->stats.codegen_ms += es.codegen_ms;
    j->stats.disk_hits += es.code_source == HJ_CODE_DISK;
  }
  j->stats.compiles++;
  j->stats.exact_compiles += mode == JIT_MODE_EXACT;
  *out = e;
  return HJ_OK;
}
