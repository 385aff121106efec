/* cpu_matmul.h — the CPU matmul driver: packing, blocking and threading around the JIT'd
   micro-kernel that hlojit_impl/emitters/matmul.c emits (plan = struct emit_matmul_plan,
   defined in hlojit_impl/emitters/matmul_plan.h; opaque here). The runtime calls, per
   executable: cpu_matmul_prepare once after the JIT module is added (symbol lookup), then
   cpu_matmul_run per execution with the kernel's buffers (ABI of emit.h: the fusion's
   operands, then its outputs). */
#ifndef HLOJIT_CPU_MATMUL_H
#define HLOJIT_CPU_MATMUL_H
#include "cpu_jit.h"
#include "threadpool.h"

struct emit_matmul_plan;
hj_status cpu_matmul_prepare(cpu_jit *j, struct emit_matmul_plan *p);
/* Scratch (packed panels) needed for |nthreads| workers; the runtime allocates it once per
   executable (64-byte aligned) and passes it to every run. */
size_t cpu_matmul_scratch_bytes(const struct emit_matmul_plan *p, int nthreads);
/* Blocks until C (and the fused epilogue, if any) is written. Results are bitwise the same
   for any thread count of |pool| (NULL: the calling thread alone). */
void cpu_matmul_run(const struct emit_matmul_plan *p, void **bufs, tp_pool *pool, void *scratch);
void cpu_matmul_plan_free(struct emit_matmul_plan *p);
#endif
