/* api/optimize.c — hj_module_optimize: the public face of the pass pipeline
   (what `hlojit opt MODULE.hlo` prints). The module is rewritten in place; the pipeline
   keeps it verifying after every pass, and the values it computes bit for bit. */
#include "api.h"
#include "../runtime/runtime.h"

hj_status hj_module_optimize(hj_module_t *m) {
  if (!m) return hj__err(NULL, HJ_ERR_INVALID_ARG, "hj_module_optimize: module is NULL");
  if (!m->entry)
    return hj__err(m->ctx, HJ_ERR_INVALID_ARG, "hj_module_optimize: module '%s' has no entry",
                   m->name);
  hlo_pass_ctx pc;
  rt_pass_ctx_init(&pc, m->ctx);
  return hlo_run_pipeline(&pc, m, NULL);
}
