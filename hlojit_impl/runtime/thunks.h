/* runtime/thunks.h — the executable's program: a buffer plan plus a thunk sequence per
   computation (the entry, and nested ones for while and conditional).

   A thunk names its buffers by location (ba_loc: input leaf, output leaf, constant, arena
   offset); a run resolves them against the frame it runs in (the program's arena, the
   caller's input and output pointers). Thunks:
     KERNEL  tp_parallel_for over [0, parallel_n) calling fn(bufs, begin, end), bufs = the
             operand leaves then the output leaves (emit.h's kernel ABI);
     MATMUL  cpu_matmul_run(plan, bufs, pool, scratch) (backends/cpu/cpu_matmul.h);
     COPY    memcpy of one leaf (root leaves that are parameters, constants or repeats);
     EVAL    the reference evaluator on the fused computation over literal views of the
             operand leaves, result leaves copied into the output leaves (ops without an
             emitter, and fusions an emitter declined: |why| says which);
     WHILE   init copied into the state (the while's own leaves), then: cond program
             (state -> pred in scratch), body program (state -> next state in scratch),
             next copied into state;
     COND    runs branch b's program with its operand's leaves as inputs and the
             conditional's leaves as outputs.
   LLVM-free: only the CPU backend (backends/cpu) fills |fn| and |matmul|. */
#ifndef HLOJIT_THUNKS_H
#define HLOJIT_THUNKS_H

#include "../internal.h"

typedef enum { TH_KERNEL, TH_MATMUL, TH_COPY, TH_EVAL, TH_WHILE, TH_COND, TH_KIND_COUNT } th_kind;

typedef void (*th_kernel_fn)(void **bufs, int64_t begin, int64_t end);
typedef struct th_program th_program;
struct tp_pool;
struct emit_matmul_plan;

typedef struct th_thunk {
  th_kind kind;
  const hlo_instr *ins;
  ba_loc *args;                  /* stb_ds: input leaves (COND: selector first) */
  ba_loc *outs;                  /* stb_ds: output leaves */
  /* KERNEL / MATMUL */
  char sym[96];                  /* kernel symbol */
  const char *emitter;           /* emit_kind_name */
  th_kernel_fn fn;
  int64_t parallel_n, grain;
  struct emit_matmul_plan *matmul;
  /* EVAL */
  char why[200];                 /* why the evaluator runs it */
  bool runtime_op;               /* no emitter by design (sort, scatter, ...) */
  bool emit_error;               /* the emitter failed with something else than UNSUPPORTED */
  /* WHILE (sub[0] cond, sub[1] body), COND (sub[b] branch b) */
  th_program **sub;              /* stb_ds */
  int *arg_off;                  /* COND: first args index of branch b's operand leaves */
  int64_t scratch;               /* WHILE: arena offset of next state + pred */
  void **bufs;                   /* KERNEL/MATMUL: pointer table reused by every run */
} th_thunk;

struct th_program {
  const hlo_comp *comp;
  ba_plan plan;
  th_thunk *thunks;              /* stb_ds */
  uint8_t *arena;                /* plan.arena_bytes, 64-byte aligned */
  void **consts;                 /* per plan.consts: 64-byte aligned copy of the data */
};

typedef struct th_runtime {      /* what a run needs besides the program */
  hj_ctx_t *ctx;
  struct tp_pool *pool;
  void *matmul_scratch;
  /* cpu_matmul_run, set by the backend (NULL: no matmul driver linked) */
  void (*matmul_run)(const struct emit_matmul_plan *p, void **bufs, struct tp_pool *pool, void *scratch);
  int64_t iterations;            /* while iterations run (statistics) */
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

#endif /* HLOJIT_THUNKS_H */
