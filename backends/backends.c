/* backends.c — the one list of the backends built into this library (backend.h), in the
   order HJ_BACKEND_AUTO tries them: a compiled backend first, the reference evaluator last
   (it runs every module): CUDA (where a device answers), then the CPU, then the evaluator.
   Building with -DHLOJIT_NO_LLVM leaves out every backend that needs LLVM. A new backend
   adds its table here, and nowhere else. */
#include "../hlojit_impl/backend.h"

extern const hlo_backend hlo_backend_interp;
#ifndef HLOJIT_NO_LLVM
extern const hlo_backend hlo_backend_cuda;
extern const hlo_backend hlo_backend_cpu;
#endif

const hlo_backend *const hlo_backends[] = {
#ifndef HLOJIT_NO_LLVM
  &hlo_backend_cuda,
  &hlo_backend_cpu,
#endif
  &hlo_backend_interp,
  NULL,
};

const hlo_backend *hlo_backend_find(hj_backend_t kind) {
  for (int i = 0; hlo_backends[i]; i++)
    if (hlo_backends[i]->kind == kind) return hlo_backends[i];
  return NULL;
}
