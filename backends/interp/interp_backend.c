/* interp_backend.c — the reference evaluator as a backend (HJ_BACKEND_INTERP, and the last
   one HJ_BACKEND_AUTO tries): compile keeps a copy of the module, run evaluates it.

   A run views the caller's input leaves as literals without copying (the evaluator never
   writes its arguments), evaluates the entry with hlo_eval_module, and copies the result
   leaves into the output pointers. Slow on purpose and obviously correct: the oracle every
   compiled backend is tested against. */
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
    return ctx->last ? ctx->last : HJ_ERR_OOM;
  }
  *out = x;
  return HJ_OK;
}

/* Leaf data for hlo_literal_view_tree: input pointer |k| of the array |in| (ud). */
static void *interp_in_data(const void *in, int k) { return ((void *const *)in)[k]; }

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
  for (int i = 0; st == HJ_OK && i < nout; i++)
    if (lv[i]->nbytes) memcpy(out[i], lv[i]->data, (size_t)lv[i]->nbytes);
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
