/* api/optimize.c — hj_module_optimize: the public face of the pass pipeline
   (what `hlojit opt MODULE.hlo` prints). The module is rewritten in place; the pipeline
   keeps it verifying after every pass, and the values it computes bit for bit. */
#include "api.h"
#include "../passes/passes.h"
#include "../runtime/runtime.h"

hj_status hj_module_optimize(hj_module_t *m) {
  return hj_module_optimize_timed(m, NULL, 0, NULL);
}

hj_status hj_module_optimize_timed(hj_module_t *m, hj_pass_time_t *times, int cap, int *n) {
  if (n) *n = 0;
  if (!m) return hj__err(NULL, HJ_ERR_INVALID_ARG, "hj_module_optimize: module is NULL");
  if (!m->entry)
    return hj__err(m->ctx, HJ_ERR_INVALID_ARG, "hj_module_optimize: module '%s' has no entry",
                   m->name);
  if (cap < 0 || (cap > 0 && !times))
    return hj__err(m->ctx, HJ_ERR_INVALID_ARG, "hj_module_optimize_timed: bad times/cap");
  hlo_pass_ctx pc;
  rt_pass_ctx_init(&pc, m->ctx);
  pc.time_passes = true;
  hj_status st = hlo_run_pipeline(&pc, m, NULL);
#ifndef NDEBUG
  if (st == HJ_OK) st = hlo_verify_module(m);   /* passes that said "unchanged" were not checked */
#endif
  int k = (int)arrlen(pc.times);
  for (int i = 0; i < k && i < cap; i++) times[i] = pc.times[i];
  if (n) *n = k;
  hlo_pass_ctx_free(&pc);
  return st;
}
