/* runtime/runtime.h — executables: buffer assignment, thunk programs and the
   target-independent compile driver (DESIGN.md sections 6 and 8). Stands on the IR, the
   passes, the emitters and (for the fallback thunk and constant folding) the evaluator;
   a backend (backends/) supplies the emitter target, finishes the LLVM module and runs the
   kernels. Only backends/ include LLVM target or CUDA headers. */
#ifndef HLOJIT_RUNTIME_H
#define HLOJIT_RUNTIME_H

#include "../ir/ir.h"

/* ---- runtime/buffer_assign.c: where every value of one computation lives ---------------
   Values are the array leaves of the computation's instructions (tuple shapes flattened
   depth first). Each leaf maps to a storage group; aliases (tuple, get-tuple-element,
   reshape, default-layout bitcast, opt-barrier) share their operand's group, an in-place
   dynamic-update-slice shares its operand 0's. A group lives in the caller's input buffer
   (a parameter leaf), the caller's output buffer (a root leaf written by a kernel), a
   constant, or one 64-byte aligned slot of the arena, reused first-fit once its last user
   has run (liveness over the text order).
   The entry's input_output_alias pairs (output k, input i) share memory at run time
   (backend.h): output k is computed in input i's buffer when nothing reads the parameter
   after the output's first write, or in place by the instruction that reads it last (a
   dynamic-update-slice or in-place elementwise fusion); else it is computed in the arena
   and copied in at the end (ba_plan.copies), after every read of the parameter. */
typedef enum { BA_NONE, BA_PARAM, BA_OUTPUT, BA_CONST, BA_ARENA } ba_where;
typedef struct ba_loc {
  ba_where where;
  int64_t index;            /* PARAM: flattened input leaf; OUTPUT: output leaf;
                               CONST: constant leaf (ba_plan.consts); ARENA: byte offset */
  int64_t bytes;
} ba_loc;
typedef struct ba_const {   /* a constant leaf the runtime must provide */
  const hlo_instr *ins;
  const hlo_literal *lit;   /* the array literal of this leaf */
} ba_const;
typedef struct ba_copy {    /* a root leaf that needs a copy into the output buffer */
  int out;                  /* output leaf */
  ba_loc src;
} ba_copy;
typedef struct ba_stage {   /* a parameter leaf copied into the arena before the first thunk */
  ba_loc src, dst;          /* PARAM, ARENA */
} ba_stage;
typedef struct ba_alias_note {  /* what became of one input_output_alias pair (the dump) */
  int out, in;              /* flattened output and input leaves */
  const char *how;          /* "in place (dynamic-update-slice)", "copied at the end: ...", ... */
} ba_alias_note;
typedef struct ba_plan {
  const hlo_comp *comp;
  /* per instruction (index = position in comp->instrs): its leaves' locations */
  ba_loc **leaves;          /* stb_ds array of stb_ds arrays */
  uint64_t *dus_inplace;    /* per instruction: bit j set when the fusion's output leaf j is a
                               dynamic-update-slice written over its operand's buffer */
  int64_t *scratch;         /* per instruction: arena offset of its scratch, -1 if none */
  ba_const *consts;         /* stb_ds */
  ba_copy *copies;          /* stb_ds: root leaves copied at the end */
  int nin, nout;            /* flattened parameter leaves, root leaves */
  int64_t arena_bytes;      /* peak */
  int64_t values_bytes;     /* sum of arena values without reuse (for the dump) */
  int *inplace_operand;     /* per instruction: the operand whose arena slot the fusion's
                               output 0 takes (in-place elementwise, ba_assign_ex), -1 none */
  ba_stage *stages;         /* stb_ds: copies to make before the first thunk */
  ba_alias_note *aliases;   /* stb_ds: the entry's input_output_alias pairs, as planned */
} ba_plan;
/* |scratch_bytes| (may be NULL): per instruction (comp->instrs order) bytes of scratch
   it needs while it runs (the while thunk's next state). *out is filled; free it with
   ba_plan_free. */
hj_status ba_assign(hj_ctx_t *ctx, const hlo_comp *c, const int64_t *scratch_bytes, ba_plan *out);
void ba_plan_free(ba_plan *p);
void ba_plan_print(const ba_plan *p, char **sb);   /* appends the text form */
const char *ba_where_name(ba_where w);
int ba_instr_pos(const ba_plan *p, const hlo_instr *ins);   /* index in comp->instrs, -1 */
/* ba_assign with in-place elementwise: a single-output fusion may write its output over
   operand k's arena slot when that slot dies there, has the output's size and element count,
   is passed to it once, and |may_inplace|(fusion, k, ud) says the kernel reads operand k only
   at the element it is writing (the backend asks its emitter). NULL: no such reuse. */
typedef bool (*ba_inplace_fn)(const hlo_instr *fusion, int operand, void *ud);
hj_status ba_assign_ex(hj_ctx_t *ctx, const hlo_comp *c, const int64_t *scratch_bytes,
                       ba_inplace_fn may_inplace, void *ud, ba_plan *out);

/* ---- thunks.c: the executable's program ----------------------------------------------------
   A buffer plan plus a thunk sequence per computation (the entry, and nested ones for
   while and conditional).

   A thunk names its buffers by location (ba_loc: input leaf, output leaf, constant, arena
   offset); a run resolves them against the frame it runs in (the program's arena, the
   caller's input and output pointers). Thunks:
     KERNEL  the backend's kernel hook: fn over [0, parallel_n) with bufs = the operand
             leaves then the output leaves (emit.h's kernel ABI; the CPU backend splits
             the range over its thread pool);
     MATMUL  the backend's matmul hook with the plan (the CPU backend's cpu_matmul_run);
     COPY    memcpy of one leaf (root leaves that are parameters, constants or repeats);
     EVAL    the reference evaluator on the fused computation over literal views of the
             operand leaves, result leaves copied into the output leaves (ops without an
             emitter, and fusions an emitter declined: |why| says which);
     WHILE   init copied into the state (the while's own leaves), then: cond program
             (state -> pred in scratch), body program (state -> next state in scratch),
             next copied into state;
     COND    runs branch b's program with its operand's leaves as inputs and the
             conditional's leaves as outputs.
   LLVM-free: the backend fills |fn| (compile.c's finish hook) and runs kernels. */
typedef enum { TH_KERNEL, TH_MATMUL, TH_COPY, TH_EVAL, TH_WHILE, TH_COND, TH_KIND_COUNT } th_kind;

typedef struct th_program th_program;
struct emit_matmul_plan;

typedef struct th_thunk {
  th_kind kind;
  const hlo_instr *ins;
  ba_loc *args;                  /* stb_ds: input leaves (COND: selector first) */
  ba_loc *outs;                  /* stb_ds: output leaves */
  /* KERNEL / MATMUL */
  char sym[96];                  /* kernel symbol */
  const char *emitter;           /* emit_kind_name */
  void *fn;                      /* the backend's handle of the kernel (CPU: its address) */
  int64_t parallel_n, grain;
  struct emit_matmul_plan *matmul;
  uint64_t dus_inplace;          /* the dus kernel: bit j, output leaf j written in place (only
                                    its update: what the profile counts) */
  /* EVAL */
  char why[200];                 /* why the evaluator runs it */
  bool runtime_op;               /* no emitter by design (sort, scatter, ...) */
  bool emit_error;               /* the emitter failed with something else than UNSUPPORTED */
  /* WHILE (sub[0] cond, sub[1] body), COND (sub[b] branch b) */
  th_program **sub;              /* stb_ds */
  int *arg_off;                  /* COND: first args index of branch b's operand leaves */
  int64_t scratch;               /* WHILE: arena offset of next state + pred */
  void **bufs;                   /* KERNEL/MATMUL: pointer table reused by every run */
  int64_t prof_calls, prof_ns;   /* runs and time of this thunk while profiling */
  /* KERNEL on a GPU target: the launch geometry the emitter chose (emit_kernel's), the same
     for eager launches and graph nodes */
  unsigned grid[3], block[3], shared_bytes;
} th_thunk;

struct th_program {
  const hlo_comp *comp;
  ba_plan plan;
  th_thunk *thunks;              /* stb_ds */
  uint8_t *arena;                /* plan.arena_bytes, 64-byte aligned */
  void **consts;                 /* per plan.consts: 64-byte aligned copy of the data */
};

/* What a run needs besides the program: the backend runs KERNEL and MATMUL thunks (|bufs|:
   the thunk's operand leaves then its output leaves, resolved in the running frame); the
   runtime runs everything else on the calling thread. */
typedef struct th_runtime {
  hj_ctx_t *ctx;
  void *ud;                      /* the backend's, passed to the hooks */
  hj_status (*kernel)(void *ud, const th_thunk *t, void **bufs);
  hj_status (*matmul)(void *ud, const th_thunk *t, void **bufs);
  int64_t iterations;            /* while iterations run (statistics) */
  bool profile;                  /* time each thunk into its prof_* counters */
  /* Optional, for backends whose kernels run asynchronously on another device (CUDA):
     host_sync runs before the runtime touches buffer data on the calling thread (an
     evaluator thunk, a while predicate, a conditional's selector), so that what the
     device wrote is there; copy replaces memcpy for copy thunks (NULL: memcpy). */
  hj_status (*host_sync)(void *ud);
  hj_status (*copy)(void *ud, void *dst, const void *src, size_t bytes);
} th_runtime;

/* Allocates the arena and the constant copies of |p| (after its plan is made). */
hj_status th_program_alloc(hj_ctx_t *ctx, th_program *p);
/* Runs |p| with the flattened input/output leaf pointers of its computation. */
hj_status th_program_run(th_runtime *rt, th_program *p, void *const *in, void *const *out);
/* Frees |p|, its nested programs and thunks (not the matmul plans: the backend owns them). */
void th_program_free(hj_ctx_t *ctx, th_program *p);
/* Appends the thunk sequence as text, nested programs indented by |depth|. */
void th_program_print(const th_program *p, char **sb, int depth);
const char *th_kind_name(th_kind k);
/* While scratch: bytes for the next state of |w| and the predicate. */
int64_t th_while_scratch_bytes(const hlo_instr *w);

/* ---- profile.c: per-thunk profiles (hj_exec_profile) -------------------------------------
   th_profile_append: one hj_profile_entry_t per thunk of |p| and of its nested programs
   (depth + 1), appended to the stb_ds array *out; names point into |p|.
   th_profile_reset: zeroes the counters of |p| and its nested programs.
   th_thunk_bytes / th_thunk_flops: what a thunk moves and computes per call (the meaning
   of hj_profile_entry_t's fields). */
void th_profile_append(const th_program *p, int depth, hj_profile_entry_t **out);
void th_profile_reset(th_program *p);
int64_t th_thunk_bytes(const th_thunk *t);
int64_t th_thunk_flops(const th_thunk *t);


/* ---- pass_hooks.c ----------------------------------------------------------------------------
   rt_pass_ctx_init: hlo_pass_ctx_init with the evaluator and printer hooks the passes use
   (constant folding, dumps); whatever runs passes (the compile driver, hj_module_optimize,
   tests) uses it. rt_now_ms: CLOCK_MONOTONIC in milliseconds. */
typedef struct hlo_pass_ctx hlo_pass_ctx;   /* passes/passes.h: callers include it */
void rt_pass_ctx_init(hlo_pass_ctx *pc, hj_ctx_t *ctx);
double rt_now_ms(void);

/* ---- disk_cache.c: the on-disk cache of compiled code ---------------------------------------
   A directory of entry files keyed by the whole key material (see the file's comment for
   the format, the atomic writes and the eviction). LLVM-free; a cache never fails what it
   serves: problems are misses.
   rt_dcache_resolve_dir: the directory for |dir| (NULL: $HLOJIT_CACHE_DIR, else
     $XDG_CACHE_HOME/hlojit, else $HOME/.cache/hlojit); false when the cache is off ("off")
     or no directory is known.
   rt_dcache_open: *out NULL (and HJ_OK) when off or the directory cannot be made;
     |max_bytes| 0: $HLOJIT_CACHE_MAX_MB MiB (fractions allowed), else 1 GiB.
   rt_dcache_get: true on a hit, *payload malloc'd (free it), *n its bytes; false on a miss,
     |why| (may be NULL) saying why: "no entry", or the reason a bad entry was rejected (it
     is deleted). rt_dcache_put: atomic write, then eviction down to max_bytes; HJ_ERR_IO
     (message set) when the write failed, which callers may ignore.
   rt_dcache_evict: deletes least recently used entries while the directory holds more than
     max_bytes, and temporary files older than ten minutes; returns how many entries.
   rt_dcache_entry_path: the file of |key| (for tests and tools). */
typedef struct rt_dcache rt_dcache;
typedef struct rt_dcache_stats {
  int64_t hits, misses, rejected, writes, write_errors, evictions;
} rt_dcache_stats;
bool rt_dcache_resolve_dir(const char *dir, char *buf, size_t n);
hj_status rt_dcache_open(hj_ctx_t *ctx, const char *dir, int64_t max_bytes, rt_dcache **out);
void rt_dcache_close(rt_dcache *c);
const char *rt_dcache_dir(const rt_dcache *c);
bool rt_dcache_get(rt_dcache *c, const void *key, size_t klen, void **payload, size_t *n, char *why,
                   size_t whyn);
hj_status rt_dcache_put(rt_dcache *c, const void *key, size_t klen, const void *payload, size_t n);
int64_t rt_dcache_evict(rt_dcache *c);
rt_dcache_stats rt_dcache_get_stats(rt_dcache *c);
void rt_dcache_entry_path(const rt_dcache *c, const void *key, size_t klen, char *buf, size_t n);
/* XXH3-128 of |data| as 32 hex digits (the entry names' hash; for keys built by backends). */
void rt_dcache_digest(const void *data, size_t n, char hex[33]);

/* The compile driver needs LLVM (the emitters); the evaluator-only single-header build
   (HLOJIT_NO_LLVM) has neither. */
#ifndef HLOJIT_NO_LLVM
#include "../emitters/emit.h"

/* ---- compile.c: the target-independent compile driver -------------------------------------
   rt_compile(ctx, m, target, out):
     1. clone |m| (the executable owns its copy; the caller keeps |m|);
     2. passes: target->pre (given as data), the shared pipeline (hlo_run_pipeline with
        target->pipeline), target->post; the result verified and dumped
        (NNN.NAME.after_passes.hlo);
     3. one program per computation the runtime runs (the entry; while condition and body
        and conditional branches, recursively): buffer assignment and a thunk skeleton,
        each fusion pending emission (its dus_inplace decision and its in-place
        elementwise operand: buffer assignment asks emit_loop_inplace_ok whether the loop
        kernel reads that operand only at the element it writes);
     4. the LLVM module(s) (target->module_begin; one, or up to max_modules for a target
        that compiles them in parallel, kernels spread by size) for all pending fusions;
        fusions that are structurally identical (hlo_encode_fusion, same in-place
        decisions) share one kernel, named after its fingerprint; emit_classify ->
        EMIT_KIND_RUNTIME becomes an evaluator thunk; else emit_fusion_inplace -> a kernel
        (or a matmul plan); any error from the emitter (HJ_ERR_UNSUPPORTED, or a bug)
        deletes what it emitted and makes the fusion an evaluator thunk, counted and named
        in the thunk dump; the context's error is restored so that a successful compile
        leaves no stale message;
     5. target->module_finish: optimise and load the module (CPU: O3 and ORC), resolving
        every thunk of out->kernels (KERNEL: its fn; MATMUL: its plan's kernels);
     6. dumps NNN.NAME.buffer_assignment.txt and NNN.NAME.thunks.txt. */
typedef struct rt_exec {         /* the target-independent part of an executable */
  hj_ctx_t *ctx;
  hlo_module *m;                 /* the optimised copy */
  th_program *entry;
  th_program **programs;         /* stb_ds: every program (entry first) */
  th_thunk **kernels;            /* stb_ds: the KERNEL and MATMUL thunks */
  struct emit_matmul_plan **matmuls;   /* stb_ds: owned */
  hj_exec_stats_t stats;         /* compile statistics; the backend sets |backend| */
  int seq;                       /* dump number: files NNN.NAME.* */
  hj_pass_time_t *pass_times;    /* stb_ds: stats.pass_times */
  hlo_fingerprint fingerprint;   /* of the optimised module (hlo_fingerprint_module): the
                                    key a cache of compiled code can use; kernel symbols
                                    are hjk_<their fusion's fingerprint>, shared matmul
                                    kernels hjs_<this fingerprint>_<module> */
} rt_exec;

typedef struct rt_target {
  const char *name;              /* "CPU backend", for messages */
  emit_target emit;
  /* The backend's own passes, by name (hlo_pass_find), run before / after the shared
     pipeline (hlo_run_pipeline). */
  const char *const *pre, *const *post;
  int npre, npost;
  void *ud;                      /* the backend's, passed to every hook */
  /* A fresh LLVM context and module named |name| for the kernels of one executable;
     *handle is the backend's (given back to module_discard or module_finish). */
  hj_status (*module_begin)(void *ud, const char *name, LLVMContextRef *llctx,
                            LLVMModuleRef *mod, void **handle);
  void (*module_discard)(void *ud, void *handle);     /* nothing was emitted into it */
  /* A symbol prefix unique in the backend's code space ("|prefix|.N"). */
  void (*unique_name)(void *ud, const char *prefix, char *buf, size_t n);
  /* Optimises and loads the module (consuming |handle|) and resolves x->kernels; records
     stats.optimize_ms and stats.codegen_ms. */
  hj_status (*module_finish)(void *ud, void *handle, rt_exec *x);
  /* Optional (NULL: every symbol from unique_name "hjk"): the symbol of a kernel whose
     fingerprint names |base| ("hjk_<16 hex>"), unique in the backend's code space:
     |base| itself the first time, so the name is the same in every process. */
  void (*kernel_name)(void *ud, const char *base, char *buf, size_t n);
  /* Optional, with max_modules > 1: the kernels are spread over up to max_modules modules
     (RT_MAX_MODULES at most; fewer for small programs), each in its own LLVM context, which
     this hook optimises and loads (consuming the |n| handles; the backend may do it on
     several threads) before resolving x->kernels like module_finish. */
  int max_modules;
  hj_status (*module_finish_many)(void *ud, void *const *handles, int n, rt_exec *x);
  /* Optional, with module_finish_many: matmul kernels and the others go to separate
     modules (up to max_modules of each, alternating), and each module is told its class
     after module_begin (0: matmul kernels, 1: the rest), so the backend may optimise the
     classes differently. */
  void (*module_class)(void *ud, void *handle, int cls);
} rt_target;
#define RT_MAX_MODULES 16

/* Compiles |m| (not kept) for |t| into *out (zeroed first; on failure what was made is
   freed). Free a compiled one with rt_exec_free (after the backend unloaded its code). */
hj_status rt_compile(hj_ctx_t *ctx, const hlo_module *m, const rt_target *t, rt_exec *out);
void rt_exec_free(rt_exec *x);

/* ---- code_key.c: the key of an emitted module's machine code, for code caches ------------------
   rt_code_key_make: renames |mod|'s definitions canonically, hashes its IR, and gives the
   key material (|target_id|: the code's identity, e.g. LLVM version, triple, CPU, features)
   and its digest; the functions end up named "hj<digest>.f<i>" and x's kernel thunks and
   matmul plans (x may be NULL) follow. Call it after emission, before optimisation. */
typedef struct rt_code_key {
  char *key;                     /* malloc'd, NUL-terminated key material */
  size_t len;
  char digest[33];               /* XXH3-128 of the key, hex: the disk entry's name */
} rt_code_key;
hj_status rt_code_key_make(hj_ctx_t *ctx, LLVMModuleRef mod, const char *target_id, rt_exec *x,
                           rt_code_key *out);
/* rt_code_key_make_named: the same key for a module whose names are already canonical (the
   same content has the same names in every process); nothing is renamed. */
hj_status rt_code_key_make_named(hj_ctx_t *ctx, LLVMModuleRef mod, const char *target_id, rt_code_key *out);
void rt_code_key_free(rt_code_key *k);
#endif /* HLOJIT_NO_LLVM */

#endif /* HLOJIT_RUNTIME_H */
