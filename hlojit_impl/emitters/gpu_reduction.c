/* gpu_reduction.c — placeholder */
#include "gpu_internal.h"
hj_status emitg_reduction(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero,
                       const char *name, emit_kernel *out) {
  return hj__err(em->ctx, HJ_ERR_UNSUPPORTED, "GPU reduction: not yet");
}
