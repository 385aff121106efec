/* cuda_exec.h — the CUDA backend's private types, shared by its files:
     cuda_backend.c  the table entry: per-context state, compile (rt_compile with a GPU
                     emitter target; PTX; cuModuleLoadData), offline PTX, stats, buffers;
     cuda_mem.c      managed allocations: the registry of what we allocated (to tell our
                     memory from the caller's), residency flags and prefetches;
     cuda_run.c      running an executable: staging, prefetching, eager launches, CUDA
                     graphs (record, replay, update in place);
     cuda_gemm.c     matmul thunks: our kernel (the emitters make it: gpu_mm.h's tiled one,
                     or the skinny one for M <= 8 rows) or cuBLAS (+ epilogue kernel),
                     chosen per shape;
     cuda_code_cache.c  the PTX cache: each module's PTX once per key, in memory and on disk.

   Invariants
   - Every buffer a kernel sees is device-accessible and 16-byte aligned: managed memory we
     allocated (the context's buffers, the executables' arenas, constants and staging
     copies). A caller pointer that is not inside one of our managed allocations (or not
     aligned) is staged: copied into a managed staging buffer of the executable before the
     run and (outputs) back after it.
   - Runs of one executable are serialised (run_mu); each run binds the device's context
     on the calling thread, issues everything on the device's one stream and synchronises
     before returning, so the host reads results through the same pointers with no copy. */
#ifndef HLOJIT_CUDA_EXEC_H
#define HLOJIT_CUDA_EXEC_H

#include "cuda_codegen.h"
#include "cuda_driver.h"
#include "../../hlojit_impl/emitters/gpu_mm.h"
#include "../../hlojit_impl/backend.h"
#include "../../hlojit_impl/runtime/runtime.h"
#include "../../hlojit_impl/emitters/matmul_plan.h"
#include <pthread.h>
#include <stdatomic.h>

/* One managed allocation of ours. |on_host|: the host may have touched it since the last
   prefetch to the device (new, host-written, or read back), so the next run prefetches it. */
typedef struct cub_alloc {
  uintptr_t base;
  size_t bytes;
  bool on_host;
} cub_alloc;

typedef struct cub_cc cub_cc;

typedef struct cub_state {             /* per context */
  hj_ctx_t *ctx;
  cuda_driver *d;
  cuda_device *dv;
  cuda_codegen *cg;
  cub_cc *cc;                          /* the PTX cache (cuda_code_cache.c) */
  cuda_arch arch;
  bool libdevice;                      /* libdevice.10.bc found (sin, pow, f64 math) */
  bool graphs;                         /* the driver has graphs */
  int gemm_mode;                       /* CUB_GEMM_*: HLOJIT_CUDA_GEMM */
  bool tf32;                           /* HLOJIT_CUDA_TF32=1: cuBLAS may use TF32 */
  pthread_mutex_t mu;                  /* allocs, the device's stream between runs */
  cub_alloc *allocs;                   /* stb_ds, sorted by base */
  char desc[1200];                     /* driver and device, for messages */
} cub_state;

enum { CUB_GEMM_MEASURE, CUB_GEMM_RULE, CUB_GEMM_TILED, CUB_GEMM_CUBLAS };
enum { CUB_MM_UNDECIDED, CUB_MM_TILED, CUB_MM_CUBLAS };

typedef struct cub_mm {                /* a matmul thunk's runtime (th_thunk.fn points here) */
  struct emit_matmul_plan *p;
  CUfunction tiled, epi;               /* NULL: not made / no epilogue */
  int choice;                          /* CUB_MM_* */
  void *vals[3 + 16];                  /* the tiled kernel's arguments: A, B, C, extra... */
  void *params[3 + 16];                /* &vals[i] */
} cub_mm;

/* Graph bookkeeping, per device call of a run in the order the calls come (a graphable
   program has no control flow, so the k-th call of every run is the same work). */
typedef struct cub_node {
  bool library;                        /* cuBLAS gemm or memcpy: nodes we cannot update */
  CUgraphNode node;                    /* our kernel's node */
  void **vals;                         /* stb_ds: the argument values the node holds */
  void *ptrs[4];                       /* library: the addresses it was captured with */
  int nptrs;
} cub_node;

typedef struct cub_stage {             /* a managed copy of a caller's leaf */
  void *p;
  size_t bytes;
} cub_stage;

enum { CUB_EAGER, CUB_CAPTURE, CUB_REPLAY };
enum { CUB_RECAPTURE_LIMIT = 3 };   /* captures in a row before an executable gives graphs up */

typedef struct cub_exec {
  rt_exec base;
  cub_state *be;
  char *ptx;                           /* the module's PTX (malloc'd) */
  CUmodule mod;                        /* NULL offline (no device) */
  bool offline;
  int name_seq;                        /* unique_name within this module */
  th_runtime run;
  pthread_mutex_t run_mu;
  /* device memory that replaced each program's host arena and constants */
  void **host_arena;                   /* stb_ds, per program: the pointer rt_compile made */
  void ***host_consts;                 /* stb_ds, per program */
  cub_mm *mms;                         /* stb_ds */
  cub_stage *stage_in, *stage_out;     /* stb_ds, per leaf */
  /* graphs */
  bool graphable;                      /* entry program of kernels, matmuls and copies only */
  bool host_work;                      /* some program has evaluator/while/conditional thunks:
                                          the host touches the arenas during a run */
  char graph_why[160];                 /* why not, for the stats line */
  int mode;                            /* CUB_*: what the hooks do during this run */
  bool recapture;                      /* a library node's addresses changed */
  int recaptures_in_row;               /* runs since the last replay that captured again */
  int runs;
  CUgraph graph;
  CUgraphExec gexec;
  cub_node *nodes;                     /* stb_ds, per device call (cub_node) */
  int call;                            /* the current run's next call index */
  size_t *in_bytes, *out_bytes;        /* stb_ds: bytes of each entry input / output leaf */
  int captures, node_updates, replays, eager_runs;
} cub_exec;

/* ---- cuda_mem.c ------------------------------------------------------------------------ */
/* Managed memory of |bytes| (checked against free memory), registered in |s|, 256-byte
   aligned, marked on_host. */
hj_status cub_alloc_managed(cub_state *s, size_t bytes, void **out);
void cub_free_managed(cub_state *s, void *p);
/* The registered allocation holding [p, p + bytes), or NULL (caller memory). Under s->mu. */
cub_alloc *cub_find(cub_state *s, const void *p, size_t bytes);
/* Prefetch [p, p + bytes) (ours) to the device if its allocation is marked on_host. */
hj_status cub_to_device(cub_state *s, const void *p, size_t bytes);
/* Marks the allocation holding |p| as host-touched and prefetches it to the host (after
   the stream's work): what hj_buffer_host_ptr needs before the host reads. */
void cub_to_host(cub_state *s, const void *p, size_t bytes);
/* hj__err with the cuda_error's status and message. */
hj_status cub_err(hj_ctx_t *ctx, const cuda_error *e);
/* cuda_backend.c: $name is "0", "off" or "no". */
bool cub_env_off(const char *name);

/* ---- cuda_code_cache.c: the PTX cache (the file's comment says how it works) ---------------
   cub_cc_create: one per context, its disk part in ctx->opt.cache_dir (NULL: $HLOJIT_CACHE_DIR,
     else $XDG_CACHE_HOME/hlojit, else ~/.cache/hlojit; "off": memory only).
   cub_cc_lookup: |mod|'s key into *key (free it with rt_code_key_free) and, on a hit, its PTX
     (*ptx malloc'd, *source HJ_CODE_MEMORY or _DISK; |mod| untouched); on a miss *ptx is NULL
     and *source HJ_CODE_COMPILED: the caller compiles |mod|.
   cub_cc_put: after the driver loaded |ptx|: kept in memory, and written to disk when it was
     compiled (|source|). cub_cc_drop: a hit the driver refused, out of memory and disk. */
hj_status cub_cc_create(hj_ctx_t *ctx, cub_cc **out);
void cub_cc_destroy(cub_cc *c);
hj_status cub_cc_lookup(cub_cc *c, cuda_codegen *cg, LLVMModuleRef mod, rt_code_key *key, char **ptx,
                        int *source);
void cub_cc_put(cub_cc *c, const rt_code_key *key, const char *ptx, int source);
void cub_cc_drop(cub_cc *c, const rt_code_key *key);

/* ---- cuda_run.c ------------------------------------------------------------------------- */
hj_status cub_run(cub_exec *x, void *const *in, int nin, void *const *out, int nout);
/* One of our kernels, as the run's next device call: launched (eager), launched into the
   capture with its node recorded (capture), or its node's arguments updated in place when
   |vals| differ from what the node holds (replay). |vals|: the argument values (pointers). */
hj_status cub_launch(cub_exec *x, CUfunction f, const char *name, const unsigned grid[3],
                     const unsigned block[3], unsigned shared, void *const *vals, int nvals);
/* Library work (cuBLAS, memcpy) on buffers |ptrs| as the run's next device call: *issue says
   whether the caller must issue it now (eager, capture); on replay it is in the graph
   already, and addresses that changed make the graph be captured again. */
hj_status cub_library_call(cub_exec *x, void *const *ptrs, int nptrs, bool *issue);
hj_status cub_copy_hook(cub_exec *x, void *dst, const void *src, size_t n);
hj_status cub_kernel(cub_exec *x, const th_thunk *t, void **bufs);
/* After compile: whether the entry program can be a graph (sets graphable / graph_why). */
void cub_graph_plan(cub_exec *x);
void cub_graph_free(cub_exec *x);

/* ---- cuda_gemm.c ------------------------------------------------------------------------ */
/* Resolves the functions of matmul thunk |t| in x->mod and makes its cub_mm (t->fn). */
hj_status cub_mm_prepare(cub_exec *x, th_thunk *t);
/* The th_runtime matmul hook (eager, capture or replay per x->mode). */
hj_status cub_mm_run(cub_exec *x, const th_thunk *t, void **bufs);

#endif /* HLOJIT_CUDA_EXEC_H */
