/* cpu_code_cache.h — the CPU backend's code cache (cpu_code_cache.c says how it works): one
   per context, made with the backend's state. Only backends/cpu uses it.

   cpu_cc_create: opens the disk cache of ctx->opt.cache_dir (NULL: $HLOJIT_CACHE_DIR, else
   $XDG_CACHE_HOME/hlojit, else ~/.cache/hlojit; "off": memory only).
   cpu_cc_finish: takes the |n| emitted modules |jms| of one compile (consumed in every case;
   the structs themselves stay the caller's), makes each one's names canonical (and renames
   x->kernels' symbols and matmul-plan kernels to match), and gets each one's machine code
   into the JIT: already loaded, from disk, or compiled (O3 and the object on |pool|'s
   threads, then stored). out[i]: module i's loaded code, released with cpu_cc_release when
   the executable dies; *source: HJ_CODE_COMPILED if any was compiled, else _DISK if any
   came from disk, else _MEMORY (also x->stats.code_source); x->stats.optimize_ms is O3's
   wall time (0 when nothing was compiled). The kernels are then looked up by their (new)
   names as usual. */
#ifndef HLOJIT_CPU_CODE_CACHE_H
#define HLOJIT_CPU_CODE_CACHE_H

#include "cpu_jit.h"
#include "threadpool.h"
#include "../../hlojit_impl/runtime/runtime.h"

typedef struct cpu_cc cpu_cc;
typedef struct cpu_cc_code cpu_cc_code;

hj_status cpu_cc_create(hj_ctx_t *ctx, cpu_cc **out);
void cpu_cc_destroy(cpu_cc *c);   /* before cpu_jit_destroy, which frees the code */
hj_status cpu_cc_finish(cpu_cc *c, cpu_jit *j, tp_pool *pool, cpu_jit_module *const *jms, int n,
                        rt_exec *x, cpu_cc_code **out, int *source);
void cpu_cc_release(cpu_cc *c, cpu_jit *j, cpu_cc_code *k);
const char *cpu_cc_dir(const cpu_cc *c);   /* "" when the disk cache is off */

#endif
