/* cuda_codegen.h — LLVM module -> PTX text through LLVM 19's NVPTX backend (LLVM-C only),
   libdevice linking, and a ptxas check for tests. No CUDA toolkit is needed to generate
   PTX; libdevice and ptxas are optional extras found in the toolkit when it is there.

   Life of a kernel:
     cuda_codegen *cg; cuda_codegen_create(CUDA_SM_80, &cg, &e);   // one per arch (and context)
     LLVMModuleRef mod = ...;  cuda_codegen_prepare_module(cg, mod); // triple, data layout
     ... build the kernel with the IRBuilder; emit_gpu_mark_kernel(mod, fn, 256, 0) ...
     char *ptx; cuda_compile_ptx(cg, mod, &ptx, &e);   // libdevice if used, O3, PTX; free(ptx)
     cuda_ptxas(ptx, "sm_80", &info);                   // tests: assemble it, read -v figures

   Invariants
   - Targets: sm_80 with PTX 7.0 is the baseline (its PTX is JIT-compiled by the driver for
     any later GPU); sm_90a with PTX 8.0 for compute capability 9.0 (Hopper-only features).
     LLVM 19 knows no newer target.
   - Kernels use the PTX kernel calling convention (LLVMPTXKernelCallConv), which is how
     cuda_optimize tells kernels from helpers: every other defined function and global is
     made internal before O3, so helpers (and libdevice) are inlined or dropped and never
     appear as PTX symbols. (The `internalize` pass cannot be used by name: it would make
     kernels internal too and empty the module.)
   - Math: libdevice is linked only into modules that call __nv_* functions, and only when
     it can be found ($HLOJIT_LIBDEVICE, $CUDA_HOME/nvvm/libdevice/libdevice.10.bc,
     /usr/local/cuda/...); it is part of the toolkit, not the driver, so a user machine may
     lack it and emitters must not depend on it (hlojit's own math emitters cover the
     hot functions). A module calling __nv_* without libdevice fails with a message.
   - Intrinsics are declared through cuda_intrinsic, which refuses names LLVM does not
     know (LLVM 19 spells the approximate exp2 `llvm.nvvm.ex2.approx.f`; `...f32` would
     silently become an external call that ptxas then rejects).
   - No flush-to-zero, no fast math by default (module flag nvvm-reflect-ftz = 0).
   Threads: a cuda_codegen may be used from several threads; O3 and PTX emission are
   serialised inside. Modules are the caller's, each in its own LLVMContext. */
#ifndef HLOJIT_CUDA_CODEGEN_H
#define HLOJIT_CUDA_CODEGEN_H

#include "cuda_error.h"
#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>
#include <stdbool.h>

typedef enum cuda_arch { CUDA_SM_80, CUDA_SM_90A, CUDA_ARCH_COUNT } cuda_arch;

const char *cuda_arch_name(cuda_arch a);        /* "sm_80", "sm_90a" */
int cuda_arch_ptx_version(cuda_arch a);         /* 70, 80 */
/* "sm_80" / "sm_90a" (also "80", "90a"); anything else is HJ_ERR_INVALID_ARG. */
hj_status cuda_arch_parse(const char *s, cuda_arch *out, cuda_error *e);
/* The arch to generate for a device: 9.0 -> sm_90a, else (8.0 or newer) sm_80; older
   devices are HJ_ERR_UNSUPPORTED. */
hj_status cuda_arch_for_device(int cc_major, int cc_minor, cuda_arch *out, cuda_error *e);

typedef struct cuda_codegen cuda_codegen;

hj_status cuda_codegen_create(cuda_arch arch, cuda_codegen **out, cuda_error *e);
void cuda_codegen_destroy(cuda_codegen *cg);   /* NULL is fine */
cuda_arch cuda_codegen_arch(const cuda_codegen *cg);
/* What the PTX of a module depends on besides its IR, for code caches: LLVM's version, the
   triple, arch and PTX ISA, the pipeline, and the libdevice file (path, size, mtime) or
   none. Reads libdevice if it was not read yet. */
void cuda_codegen_code_id(cuda_codegen *cg, char *buf, size_t n);

/* Sets |mod|'s triple (nvptx64-nvidia-cuda) and data layout, and nvvm-reflect-ftz = 0. */
void cuda_codegen_prepare_module(cuda_codegen *cg, LLVMModuleRef mod);


/* The declaration of intrinsic |name| (|overloads|: its overloaded types, n may be 0), or
   NULL with HJ_ERR_INTERNAL when LLVM has no such intrinsic. */
LLVMValueRef cuda_intrinsic(LLVMModuleRef mod, const char *name, LLVMTypeRef *overloads, int n,
                            cuda_error *e);

/* Where libdevice.10.bc is (see above); false when nowhere. */
bool cuda_libdevice_path(char *buf, size_t n);
/* Links libdevice into |mod| when |mod| declares any __nv_* function; HJ_OK doing nothing
   otherwise. The file is read once per cuda_codegen and parsed lazily per module (only
   what the module calls is materialised). */
hj_status cuda_link_libdevice(cuda_codegen *cg, LLVMModuleRef mod, cuda_error *e);

/* Verifies |mod| (HJ_ERR_BACKEND with the verifier's message: an emitter bug), makes
   non-kernels internal, runs default<O3> (NVVMReflect runs inside) with the target
   machine as cost model. */
hj_status cuda_optimize(cuda_codegen *cg, LLVMModuleRef mod, cuda_error *e);
/* PTX text of |mod| (malloc'd, NUL-terminated) in *ptx; NULL on failure. */
hj_status cuda_emit_ptx(cuda_codegen *cg, LLVMModuleRef mod, char **ptx, cuda_error *e);
/* cuda_link_libdevice + cuda_optimize + cuda_emit_ptx. */
hj_status cuda_compile_ptx(cuda_codegen *cg, LLVMModuleRef mod, char **ptx, cuda_error *e);

/* ---- ptxas, for tests --------------------------------------------------------------------- */
typedef enum { CUDA_PTXAS_OK, CUDA_PTXAS_FAILED, CUDA_PTXAS_SKIPPED } cuda_ptxas_result;

typedef struct cuda_ptxas_kernel {
  char name[128];
  int registers, shared_bytes, stack_bytes, spill_stores, spill_loads;
} cuda_ptxas_kernel;

typedef struct cuda_ptxas_info {
  char ptxas[512];            /* the program run; for SKIPPED, why there is none */
  char log[16384];            /* what ptxas printed (-v), truncated */
  int nkernels;
  cuda_ptxas_kernel kernels[32];   /* from -v, in the order ptxas reports them */
} cuda_ptxas_info;

/* Assembles |ptx| with `ptxas -arch=|arch| -v` (from $HLOJIT_PTXAS, else $CUDA_HOME/bin,
   else /usr/local/cuda/bin; never PATH, so a test's result does not depend on it).
   SKIPPED when there is no ptxas (info->ptxas says so). */
cuda_ptxas_result cuda_ptxas(const char *ptx, const char *arch, cuda_ptxas_info *info);

#endif /* HLOJIT_CUDA_CODEGEN_H */
