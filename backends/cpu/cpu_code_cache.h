/* cpu_code_cache.h — the CPU backend's code cache (cpu_code_cache.c says how it works): one
   per context, made with the backend's state. Only backends/cpu uses it.

   cpu_cc_create: opens the disk cache of ctx->opt.cache_dir (NULL: $HLOJIT_CACHE_DIR, else
   $XDG_CACHE_HOME/hlojit, else ~/.cache/hlojit; "off": memory only).
   cpu_cc_finish: takes the emitted module |jm| (consumed in every case; the struct itself
   stays the caller's), makes its names canonical (and renames x->kernels' symbols and
   matmul-plan kernels to match), and gets its machine code into the JIT: already loaded,
   from disk, or compiled (O3, object, stored). *out: the loaded code, released with
   cpu_cc_release when the executable dies; *source: HJ_CODE_COMPILED / _MEMORY / _DISK
   (also x->stats.code_source); x->stats.optimize_ms is O3's time (0 on a hit). The kernels
   are then looked up by their (new) names as usual. */
#ifndef HLOJIT_CPU_CODE_CACHE_H
#define HLOJIT_CPU_CODE_CACHE_H

#include "cpu_jit.h"
#include "../../hlojit_impl/runtime/runtime.h"

typedef struct cpu_cc cpu_cc;
typedef struct cpu_cc_code cpu_cc_code;

hj_status cpu_cc_create(hj_ctx_t *ctx, cpu_cc **out);
void cpu_cc_destroy(cpu_cc *c);   /* before cpu_jit_destroy, which frees the code */
hj_status cpu_cc_finish(cpu_cc *c, cpu_jit *j, cpu_jit_module *jm, rt_exec *x, cpu_cc_code **out, int *source);
void cpu_cc_release(cpu_cc *c, cpu_jit *j, cpu_cc_code *k);
const char *cpu_cc_dir(const cpu_cc *c);   /* "" when the disk cache is off */

#endif
