/* gpu_internal.h — private glue of the GPU emitters (gpu_*.c; emit.h, "GPU targets"): GPU
   kernel functions, thread and block ids, shared memory, barriers, warp shuffles, guarded
   regions, and the per-hero entry points that gpu_emitter.c dispatches to. LLVM-C core API
   and NVVM intrinsics only (no target headers). Every name starts with emitg_.

   Thread mapping vocabulary: a *block* of T threads (blockDim.x, at most 256 here, a
   multiple of 32) runs on one SM; a *warp* is 32 consecutive threads of a block, which
   exchange registers with shuffles (shfl.sync) without shared memory. Shared memory
   (addrspace 3) is per block; bar.sync (llvm.nvvm.barrier0) orders its writes before
   other threads' reads. */
#ifndef HLOJIT_GPU_INTERNAL_H
#define HLOJIT_GPU_INTERNAL_H

#include "emit_internal.h"

#define EMITG_WARP 32

/* ---- gpu_kernel.c ------------------------------------------------------------------------ */
/* Makes kernel NAME with the GPU ABI (emit.h) for |fusion| and positions the builder in its
   entry block: f->params / f->outs are the pointer parameters (noalias, and readonly for
   inputs, except operand |inplace_operand| and output 0 when >= 0: the same buffer), every
   one `align 16`; f->begin / f->end are NULL. |max_threads| is the launch bound (.maxntid). */
hj_status emitg_kernel_begin(emit_fn *f, emit_module *em, const char *name,
                             const hlo_instr *fusion, int inplace_operand, int max_threads);
/* The same with any set of shared buffers: operands with bit k of |alias_params| and outputs
   with bit j of |alias_outs| get neither noalias nor readonly (gpu_dus.c). */
hj_status emitg_kernel_begin_aliased(emit_fn *f, emit_module *em, const char *name,
                                     const hlo_instr *fusion, uint64_t alias_params,
                                     uint64_t alias_outs, int max_threads);
/* %tid.x, %ntid.x, %ctaid.x, ... ("tid.x", "ctaid.y") as i32; and as i64. */
LLVMValueRef emitg_sreg(emit_fn *f, const char *which);
LLVMValueRef emitg_sreg64(emit_fn *f, const char *which);
/* The global thread id ctaid.x * ntid.x + tid.x (i64) for a 1-D launch. */
LLVMValueRef emitg_global_id(emit_fn *f);
/* A shared-memory array of |n| elements of |t| (internal global in addrspace 3), named
   NAME_suffix after the kernel. Index it with emitg_shared_ptr. */
LLVMValueRef emitg_shared(emit_fn *f, LLVMTypeRef t, uint64_t n, const char *suffix);
LLVMValueRef emitg_shared_ptr(emit_fn *f, LLVMTypeRef t, LLVMValueRef arr, LLVMValueRef i);
void emitg_barrier(emit_fn *f);                     /* bar.sync 0: the whole block */
/* Lane |src| (i32) of |v|'s warp (shfl.sync.idx), or the lane |delta| above (shfl.sync.down;
   the top lanes get their own value); any compute type (split into i32 pieces). */
LLVMValueRef emitg_shfl_idx(emit_fn *f, LLVMValueRef v, LLVMValueRef src);
LLVMValueRef emitg_shfl_down(emit_fn *f, LLVMValueRef v, int delta);
/* Guarded region: code between _begin and _end runs only where |cond| (i1) holds. The
   element cache is cleared at both ends (values made inside do not dominate after). */
typedef struct emitg_region { LLVMBasicBlockRef body, after; } emitg_region;
void emitg_if_begin(emit_fn *f, emitg_region *r, LLVMValueRef cond, const char *name);
void emitg_if_end(emit_fn *f, emitg_region *r);
/* The element size in bytes that |fusion| moves at most (operands and output leaves). */
int emitg_max_elem_bytes(const hlo_instr *fusion);
/* Fills the launch of |out| for a 1-D grid of |threads| threads in blocks of |block|. */
void emitg_launch_1d(emit_kernel *out, int64_t threads, int block);
/* A kernel of one thread per row: thread r < |rows| runs |row|(f, |plan|, r) (r an i64),
   blocks of up to 128 threads; |nouts| output buffers expected; the launch and |kind| set
   in |out|. The sequential-per-row kernels (top-k, scatter, scan) use it. */
typedef void emitg_row_fn(emit_fn *f, const void *plan, LLVMValueRef row);
hj_status emitg_rows(emit_module *em, const hlo_instr *fusion, const char *name, int64_t rows, int nouts,
                     emitg_row_fn *row, const void *plan, emit_kind kind, emit_kernel *out);

/* ---- the emitters ------------------------------------------------------------------------ */
/* gpu_loop.c: every output element from the elemental emitter, V consecutive elements per
   thread (vector loads and stores when aligned), a bounds-checked tail. Never refuses what
   the elemental emitter can do: the fallback of the other GPU emitters. */
hj_status emitg_loop(emit_module *em, const hlo_instr *fusion, const char *name,
                     int inplace_operand, emit_kernel *out);
/* gpu_dus.c: in-place dynamic-update-slices (leaves |mask|, dus.c's plan), one thread per
   updated element. */
hj_status emitg_dus(emit_module *em, const hlo_instr *fusion, uint64_t mask, const char *name,
                    emit_kernel *out);
/* gpu_sort.c: one block per row, the network's steps between barriers; gpu_scatter.c: one
   thread per row of the operand's leading dim (sort.c's and scatter.c's plans). */
hj_status emitg_sort(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero,
                     const char *name, emit_kernel *out);
hj_status emitg_scatter(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero,
                        const char *name, emit_kernel *out);
/* gpu_scan.c: scan.c's running fold, one thread per row. */
hj_status emitg_scan(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero, const char *name,
                     emit_kernel *out);
/* gpu_transpose.c: 32x33 shared-memory tiles. */
hj_status emitg_transpose(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero,
                          const char *name, emit_kernel *out);
/* gpu_reduction.c: rows by warps or blocks (shuffles, then shared memory), columns through
   a shared tile. */
hj_status emitg_reduction(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero,
                          const char *name, emit_kernel *out);
/* gpu_matmul.c: the tiled kernel (through emit_target.gpu_tiled_matmul) and the library
   path's epilogue kernel. */
hj_status emitg_matmul(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero,
                       const char *name, emit_kernel *out);

/* matmul.c: the CPU matmul emitter's acceptance (shapes, buffers, epilogue), shared. */
struct emit_matmul_plan;
const char *emitp_matmul_check(const hlo_instr *fusion, const hlo_instr *dot,
                               struct emit_matmul_plan *p, bool *epi);

#endif /* HLOJIT_GPU_INTERNAL_H */
