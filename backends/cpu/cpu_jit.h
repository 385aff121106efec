/* cpu_jit.h — the CPU backend's private wrapper around LLVM 19's ORC LLJIT (LLVM-C only).

   One cpu_jit per context: a TargetMachine for the host CPU (name and features detected,
   opt level aggressive) that the O3 pipeline uses as its cost model, an LLJIT whose data
   layout matches it, and a table of runtime helpers (libm, memcpy/memset, hlojit runtime
   functions added later) that JIT code may call by name.

   Life of a kernel:
     cpu_jit_module m;  cpu_jit_module_create(j, "fusion.3", &m);   // own LLVM context
     ... build functions into m.mod with the LLVM-C IRBuilder in m.llctx ...
     cpu_jit_optimize(j, m.mod);                // verify, O3, dumps NAME.ll / NAME.opt.ll
     cpu_jit_add_module(j, &m, &rt);            // the JIT owns the module from here on
     cpu_jit_lookup(j, "fusion.3", &fn);        // machine code is generated here
     ... cpu_jit_remove(j, rt) frees the code when the executable dies ...

   Every LLVM error becomes hj__err(ctx, HJ_ERR_BACKEND, "LLVM: ...") with LLVM's message.
   Threads: each module has its own LLVMContext, so modules may be built on different
   threads; cpu_jit_optimize, _add_module, _lookup and _remove may be called from any thread
   (cpu_jit_optimize is serialised by a mutex inside; cpu_jit_optimize_mt and _codegen_mt
   run concurrently, each with a TargetMachine of its own). Only backends/ include this
   header. */
#ifndef HLOJIT_CPU_JIT_H
#define HLOJIT_CPU_JIT_H

#include "../../hlojit_impl/ir/ir.h"
#include <llvm-c/Core.h>
#include <llvm-c/Orc.h>
#include <llvm-c/TargetMachine.h>

typedef struct cpu_jit cpu_jit;

/* A module under construction. |tsc| owns |llctx|; |mod| lives in |llctx|. The target triple
   and data layout of |mod| are already set to the JIT's. */
typedef struct cpu_jit_module {
  LLVMOrcThreadSafeContextRef tsc;
  LLVMContextRef llctx;
  LLVMModuleRef mod;
  bool light;                   /* cpu_jit_optimize_mt: the light pipeline */
} cpu_jit_module;

/* Code added with a tracker can be freed on its own (cpu_jit_remove). */
typedef struct LLVMOrcOpaqueResourceTracker cpu_jit_rt;

/* A runtime helper: JIT code that calls the external function |name| gets |addr|. */
typedef struct cpu_jit_symbol {
  const char *name;
  void *addr;
} cpu_jit_symbol;

/* Creates the JIT for |ctx| (errors go there); *out is NULL on failure. Registers the
   default helpers (libm's float/double functions, memcpy, memmove, memset). Free with
   cpu_jit_destroy. */
hj_status cpu_jit_create(hj_ctx_t *ctx, cpu_jit **out);
void cpu_jit_destroy(cpu_jit *j);  /* frees all JIT code; NULL is fine */

/* Makes |n| more helpers callable from modules added afterwards. A name defined twice is
   an HJ_ERR_BACKEND error. */
hj_status cpu_jit_add_symbols(cpu_jit *j, const cpu_jit_symbol *syms, int n);

/* Host facts, owned by |j|: triple, CPU name ("znver4"), features ("+avx2,+fma,..."),
   data layout string. */
const char *cpu_jit_triple(const cpu_jit *j);
const char *cpu_jit_cpu_name(const cpu_jit *j);
const char *cpu_jit_cpu_features(const cpu_jit *j);
const char *cpu_jit_data_layout(const cpu_jit *j);
/* The host TargetMachine (owned by |j|), e.g. for LLVMGetTargetMachineTriple. */
LLVMTargetMachineRef cpu_jit_target_machine(const cpu_jit *j);

/* Writes "|prefix|.N" with a per-JIT counter into |buf| (symbol names must be unique per
   JIT: a second definition of a name is an error at add time). */
void cpu_jit_unique_name(cpu_jit *j, const char *prefix, char *buf, size_t n);

/* Starts module |name| in a fresh LLVM context. On failure *m is zeroed. Dispose an
   unused module with cpu_jit_module_dispose; cpu_jit_add_module consumes it. */
hj_status cpu_jit_module_create(cpu_jit *j, const char *name, cpu_jit_module *m);
void cpu_jit_module_dispose(cpu_jit_module *m);  /* zeroes *m; a zeroed *m is fine */

/* Verifies |mod| and runs "default<O3>" with the host TargetMachine (loop and SLP
   vectorisation on). When the context has a dump directory (options.dump_dir, else
   $HLOJIT_DUMP_TO) writes the IR before and after as DIR/NAME.ll and DIR/NAME.opt.ll,
   NAME being the module identifier. A module that does not verify is HJ_ERR_BACKEND with
   the verifier's message (an emitter bug, reported rather than crashed on). */
hj_status cpu_jit_optimize(cpu_jit *j, LLVMModuleRef mod);

/* A kernel symbol derived from |base| (a fingerprint, "hjk_<16 hex>"), unique in |j|:
   |base| itself the first time it is asked for, then "|base|.1", ... (so the names the
   first executable of a process gets are the same in every process). Thread-safe. */
void cpu_jit_kernel_name(cpu_jit *j, const char *base, char *buf, size_t n);

/* Compiling modules on several threads at once (each module in its own LLVM context):
   cpu_jit_optimize_mt is cpu_jit_optimize with a TargetMachine of its own (taken from a
   pool in |j|: no lock around the optimiser) and its error in |err| instead of the
   context (which other threads share), and with |light| the light pipeline (CJ_LIGHT in
   cpu_jit.c, for kernels that are not matmuls); cpu_jit_codegen_mt turns the optimised module into
   an object file in memory with such a TargetMachine (the code ORC would have generated
   at lookup: same TargetMachine options) and disposes of |m| in every case. Then, on one
   thread, cpu_jit_add_object hands the object file to the JIT under a new tracker *rt
   (cpu_jit_remove frees it); lookups only link. The code cache (cpu_code_cache.c) drives
   both. */
hj_status cpu_jit_optimize_mt(cpu_jit *j, LLVMModuleRef mod, bool light, char *err, size_t nerr);
hj_status cpu_jit_codegen_mt(cpu_jit *j, cpu_jit_module *m, LLVMMemoryBufferRef *obj, char *err,
                             size_t nerr);
/* Hands |m| to the JIT; *m is zeroed in every case (on failure the module is freed).
   |rt| may be NULL: then the code lives as long as the JIT. Otherwise *rt receives a
   tracker to pass to cpu_jit_remove exactly once. Code is generated lazily, on lookup. */
hj_status cpu_jit_add_module(cpu_jit *j, cpu_jit_module *m, cpu_jit_rt **rt);

/* Address of the JIT'd (or registered) function |name|; compiles it on first use. An
   unknown name or a missing external is HJ_ERR_BACKEND ("LLVM: Symbols not found: ..."). */
hj_status cpu_jit_lookup(cpu_jit *j, const char *name, void **addr);

/* Frees the code and data added under |rt| and releases |rt|. NULL is fine. */
hj_status cpu_jit_remove(cpu_jit *j, cpu_jit_rt *rt);

/* Object code, for the code cache (cpu_code_cache.c). cpu_jit_emit_object: |mod| (already
   optimised) compiled by the host TargetMachine into a relocatable object, *obj malloc'd.
   cpu_jit_add_object: an object file (copied) into the JIT under a new tracker (*rt, for
   cpu_jit_remove); a bad object is HJ_ERR_BACKEND with LLVM's message. cpu_jit_code_id: the
   identity of the code it makes, for cache keys: LLVM version, triple, CPU, features and
   the optimisation pipeline (|light|: the one of cpu_jit_optimize_mt's light modules). */
hj_status cpu_jit_emit_object(cpu_jit *j, LLVMModuleRef mod, void **obj, size_t *n);
hj_status cpu_jit_add_object(cpu_jit *j, const void *obj, size_t n, const char *name, cpu_jit_rt **rt);
void cpu_jit_code_id(const cpu_jit *j, bool light, char *buf, size_t n);

#endif
