/* eval/eval.h — the reference evaluator: plain loops over every op with XLA's semantics.
   The oracle every backend is tested against; inside compiled programs it is reached only
   through the runtime's fallback thunk (and the constant folder, through the hook the
   runtime gives the passes), never by emitters or passes directly. Stands on the IR. */
#ifndef HLOJIT_EVAL_H
#define HLOJIT_EVAL_H

#include "../ir/ir.h"

/* ---- eval.c, eval_ops.c: reference evaluator ------------------------------------------
   Runs |c| on |args| (one literal per parameter; tuple parameters as tuple literals).
   *out is a new literal the caller frees with hlo_literal_free. */
hj_status hlo_eval_computation(hj_ctx_t *ctx, const hlo_comp *c, hlo_literal *const *args,
                               int nargs, hlo_literal **out);
hj_status hlo_eval_module(hj_ctx_t *ctx, const hlo_module *m, hlo_literal *const *args,
                          int nargs, hlo_literal **out);

#endif /* HLOJIT_EVAL_H */
