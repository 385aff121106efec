/* interp_backend.c — the reference evaluator as a backend (HJ_BACKEND_INTERP, and the last
   one HJ_BACKEND_AUTO tries): compile keeps a copy of the module, run evaluates it.

   A run views the caller's input leaves as literals without copying (the evaluator never
   writes its arguments), evaluates the entry with hlo_eval_module, and copies the result
   leaves into the output pointers. Slow on purpose and obviously correct: the oracle every
   compiled backend is tested against. Donated inputs (input_output_alias) share memory
   with their outputs: the whole result exists before the first output is written, and
   result leaves that view an input are copied aside first (interp_stage). */
#include "../../hlojit_impl/backend.h"
#include "../../hlojit_impl/eval/eval.h"
#include <stdlib.h>

typedef struct interp_exec {
  hj_ctx_t *ctx;
  hlo_module *m;                      /* the executable's own copy */
} interp_exec;

static hj_status interp_compile(hj_ctx_t *ctx, void *state, const hlo_module *m, void **out) {
  (void)state;
  *out = NULL;
  interp_exec *x = calloc(1, sizeof *x);
  if (!x) return hj__err(ctx, HJ_ERR_OOM, "evaluator: out of memory");
  x->ctx = ctx;
  if (!(x->m = hlo_module_clone_in(ctx, m))) {
    free(x);
    return hj__ctx_last(ctx) ? hj__ctx_last(ctx) : HJ_ERR_OOM;
  }
  *out = x;
  return HJ_OK;
}

/* Leaf data for hlo_literal_view_tree: input pointer |k| of the array |in| (ud). */
static void *interp_in_data(const void *in, int k) { return ((void *const *)in)[k]; }

/* Donated inputs (input_output_alias) are also output buffers: a result leaf that views an
   input (a parameter passed through, a reshape of one) could be overwritten by the copy of
   an earlier output into that input's buffer. Such leaves are copied aside first. */
static hj_status interp_stage(interp_exec *x, void *const *in, const hlo_literal **lv, int nout,
                              void ***staged) {
  const hlo_shape **ps = NULL;
  for (ptrdiff_t p = 0; p < arrlen(x->m->entry->params); p++) hlo_shape_leaves(&x->m->entry->params[p]->shape, &ps);
  hj_status st = (*staged = calloc((size_t)nout + 1, sizeof **staged)) ? HJ_OK
                 : hj__err(x->ctx, HJ_ERR_OOM, "hj_exec_run: out of memory");
  for (int i = 0; st == HJ_OK && i < nout; i++) {
    const uint8_t *d = lv[i]->data;
    bool views = false;
    for (ptrdiff_t k = 0; k < arrlen(ps) && !views; k++) {
      const uint8_t *b = in[k];
      int64_t n = hlo_shape_is_array(ps[k]) ? hlo_shape_bytes(ps[k]) : 0;
      views = b && d && d < b + n && b < d + lv[i]->nbytes;
    }
    if (!views || !lv[i]->nbytes) continue;
    if (!((*staged)[i] = malloc((size_t)lv[i]->nbytes))) st = hj__err(x->ctx, HJ_ERR_OOM, "hj_exec_run: out of memory");
    else memcpy((*staged)[i], d, (size_t)lv[i]->nbytes);
  }
  arrfree(ps);
  return st;
}

static hj_status interp_run(void *exec, void *const *in, int nin, void *const *out, int nout) {
  interp_exec *x = exec;
  const hlo_comp *entry = x->m->entry;
  int np = (int)arrlen(entry->params), k = 0;
  void **scratch = NULL;
  hlo_literal **args = NULL, *res = NULL;
  const hlo_literal **lv = NULL;
  hj_status st = HJ_OK;
  for (int i = 0; i < np && st == HJ_OK; i++) {
    hlo_literal *a = hlo_literal_view_tree(&entry->params[i]->shape, interp_in_data, in, &k, &scratch);
    if (!a) st = hj__err(x->ctx, HJ_ERR_OOM, "hj_exec_run: out of memory");
    arrput(args, a);
  }
  if (st == HJ_OK && k != nin)
    st = hj__err(x->ctx, HJ_ERR_INTERNAL, "evaluator: %d input leaves given, the module has %d", nin, k);
  if (st == HJ_OK) st = hlo_eval_module(x->ctx, x->m, args, np, &res);
  if (st == HJ_OK) {
    hlo_literal_leaves(res, &lv);
    if ((int)arrlen(lv) != nout)
      st = hj__err(x->ctx, HJ_ERR_INTERNAL, "hj_exec_run: the result has %d leaves, expected %d",
                   (int)arrlen(lv), nout);
  }
  void **staged = NULL;
  if (st == HJ_OK && x->m->naliases > 0) st = interp_stage(x, in, lv, nout, &staged);
  for (int i = 0; st == HJ_OK && i < nout; i++)
    if (lv[i]->nbytes && out[i] != lv[i]->data)
      memcpy(out[i], staged && staged[i] ? staged[i] : lv[i]->data, (size_t)lv[i]->nbytes);
  for (int i = 0; staged && i < nout; i++) free(staged[i]);
  free(staged);
  arrfree(lv);
  hlo_literal_free(res);
  for (ptrdiff_t i = 0; i < arrlen(scratch); i++) free(scratch[i]);
  arrfree(scratch);
  arrfree(args);
  return st;
}

static void interp_exec_free(void *exec) {
  interp_exec *x = exec;
  if (!x) return;
  hlo_module_free(x->m);
  free(x);
}

static void interp_stats(const void *exec, hj_exec_stats_t *s) {
  (void)exec;
  memset(s, 0, sizeof *s);
  s->backend = HJ_BACKEND_INTERP;
}

const hlo_backend hlo_backend_interp = {
  .name = "interp",
  .kind = HJ_BACKEND_INTERP,
  .compile = interp_compile,
  .run = interp_run,
  .stats = interp_stats,
  .exec_free = interp_exec_free,
};
