/* jit/jit.h — the tracing JIT (hlojit.h's hj_jit_*; DESIGN.md section 7): trace on call,
   shape buckets, the in-memory LRU cache of executables. Stands on the API (graphs, modules,
   hj_compile_module, hj_exec_run, buffers) and on the dynamic padder pass.

   Files: jit.c (create, call, stats, destroy; keys, buckets, the LRU, miss reasons, the
   log), jit_trace.c (a miss: trace the build function, pad, compile, the entry's scratch
   buffers), jit_run.c (a hit: pad the inputs, run, cut the outputs back to their real
   sizes).

   A call's signature is its key: per parameter the dtype, the rank and the dims, each
   dynamic dim at its bucket (at its real size when padding is off), and the mode. An entry
   owns the padded module (the executable borrows it), the executable, the padder's map of
   size parameters and outputs, and scratch buffers reused by every call that hits it. */
#ifndef HLOJIT_JIT_H
#define HLOJIT_JIT_H

#include "../api/api.h"
#include "../passes/passes.h"
#include <pthread.h>

enum { JIT_MODE_PADDED = 0, JIT_MODE_EXACT = 1 };

typedef struct jit_entry {
  int64_t *key;                 /* malloc'd, nkey values (jit_key_build's layout) */
  int nkey;
  uint64_t hash;
  int mode;                     /* JIT_MODE_* */
  hlo_module *m;                /* the padded module; the executable borrows it */
  hj_exec_t *exec;
  pass_dyn_info info;           /* empty in exact mode */
  int nparams, noutputs;        /* the function's own (before padding) */
  int nin, nout;                /* the executable's flattened leaves */
  hj_buffer_t **in_pad;         /* per parameter: padded copy (NULL until needed) */
  hj_buffer_t **size_in;        /* per size parameter: s32[] */
  hj_buffer_t **size_out;       /* per size output: s32[] */
  hj_buffer_t **out_pad;        /* per output: padded scratch for cut copies (lazily) */
  hj_buffer_t **ins, **outs;    /* the executable's argument arrays, reused */
  hj_dtype_t *out_dtype;        /* per output: dtype and (padded) shape */
  hj_shape_t *out_shape;
  uint64_t last_use;
} jit_entry;

struct hj_jit {
  hj_ctx_t *ctx;
  hj_jit_build_fn build;
  void *user;
  char name[64];
  hj_jit_param_t *params;       /* copied; names malloc'd */
  int nparams;
  int64_t *buckets;             /* copied, ascending */
  int nbuckets;
  int capacity;
  bool no_padding;
  bool log;                     /* HLOJIT_LOG=1 */
  jit_entry **entries;          /* stb_ds */
  uint64_t tick;
  int64_t *last_key;            /* the previous call's key (stb_ds), for miss reasons */
  bool pad_off;                 /* the padder declined this function: exact sizes */
  char pad_note[512];
  char last_miss[512];
  double last_trace_ms, last_compile_ms;   /* of the last miss, for the log */
  hj_jit_stats_t stats;
  pthread_mutex_t mu;
};

/* ---- jit.c ------------------------------------------------------------------------------------ */
double jit_now_ms(void);
/* The bucket of real size |r| of a dim declared HJ_DYN(max). */
int64_t jit_bucket(const hj_jit_t *j, int64_t r, int64_t max);

/* ---- jit_trace.c -------------------------------------------------------------------------------
   jit_trace_compile: traces |j|'s build function at the key's shapes and dtypes (|key| as
   jit.c lays it out), runs the padder (mode PADDED), compiles, and makes the entry.
   HJ_ERR_UNSUPPORTED with *declined set: the padder declined (its message in j->pad_note);
   the caller retries in exact mode. jit_entry_free: everything the entry owns. */
hj_status jit_trace_compile(hj_jit_t *j, const int64_t *key, int nkey, int mode, jit_entry **out,
                            bool *declined);
void jit_entry_free(hj_jit_t *j, jit_entry *e);

/* ---- jit_run.c ---------------------------------------------------------------------------------
   jit_run: one call of entry |e| on the caller's buffers (checked by jit.c against the
   key), with |real| the real size of every dim of every parameter (nparams x HJ_MAX_RANK). */
hj_status jit_run(hj_jit_t *j, jit_entry *e, hj_buffer_t *const *in, hj_buffer_t **out, int nout,
                  const int64_t *real);

#endif /* HLOJIT_JIT_H */
