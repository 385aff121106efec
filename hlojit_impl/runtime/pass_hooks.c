/* runtime/pass_hooks.c — what the passes reach through hooks (passes.h's hlo_pass_ctx): the
   evaluator for constant folding and the printer for dumps. Kept apart from compile.c so
   that the evaluator-only build (HLOJIT_NO_LLVM), which has no compile driver, runs the
   same pipeline for hj_module_optimize. */
#include "runtime.h"
#include "../passes/passes.h"
#include "../eval/eval.h"
#include "../text/text.h"
#include <time.h>

void rt_pass_ctx_init(hlo_pass_ctx *pc, hj_ctx_t *ctx) {
  hlo_pass_ctx_init(pc, ctx);
  pc->eval = hlo_eval_computation;
  pc->print = hlo_print_module;
}

double rt_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}
