/* api/api.h — the public API's implementation (hlojit.h's functions), in three layers,
   each calling only the ones before it (`python3 tools/file_graph.py hlojit_impl/api`
   shows no circle):
     1. contexts, modules, buffers and .npy files: api.c, buffer.c, npy.c, optimize.c
        (hj_module_optimize);
     2. the graph builder: builder.c (graphs, tensors, emission, captures, elementwise ops),
        builder_ops.c (the structural ops), control.c (tuples, calls, loops, closures),
        graph_io.c (names, aliases), composites.c, graph_module.c (graph -> module);
     3. executables: exec_io.c (names, bindings), exec_profile.c (statistics, profiles),
        exec.c (compile through the backend table, run).
   The top part of the library: it may use every part below, and reaches backends only
   through backend.h. */
#ifndef HLOJIT_API_H
#define HLOJIT_API_H

#include "../ir/ir.h"

/* A buffer: |data| of |nbytes| bytes, dense row-major. Who owns the storage: |kind|
   (buffer.c); the struct and the storage go with the last reference (|refs|). */
typedef enum { HJB_OWNED, HJB_WRAPPED, HJB_MAPPED, HJB_VIEW } hjb_kind;
struct hj_buffer {
  hj_ctx_t *ctx;
  hj_dtype_t dtype;
  hj_shape_t shape;
  size_t nbytes;
  void *data;                         /* OWNED: hj__alloc'd (64-byte aligned) or |mem|'s */
  _Atomic int refs;
  hjb_kind kind;
  bool read_only;
  hj_release_fn release;              /* WRAPPED: called with |user| and |data| */
  void *user;
  void *map_addr;                     /* MAPPED: munmap(map_addr, map_len) */
  size_t map_len;
  struct hj_buffer *base;             /* VIEW: the buffer viewed (one reference held) */
  /* OWNED: HJ_BACKEND_COUNT: |data| is from the context's allocator; else the backend whose
     buffer_alloc made it (backend.h: CUDA managed memory), which frees it. Other kinds:
     HJ_BACKEND_COUNT (a view follows |base|). */
  hj_backend_t mem;
};

/* ---- api.c ---------------------------------------------------------------------------------
   hj__buffer_new: an uninitialised buffer of |t| and |s| (|fn| names the caller in
   messages). hj__buffer_hlo_shape: its shape as an hlo_shape. hj__leaves: the flattened
   leaf shapes of the entry's parameters (|outputs| false) or of its root (stb_ds array of
   pointers into |m|; NULL for a module without an entry). */
hj_status hj__buffer_new(hj_ctx_t *ctx, const char *fn, hj_dtype_t t, hj_shape_t s,
                         hj_buffer_t **out);
/* ---- buffer.c: wrapped, mapped and view buffers; reference counts -----------------------
   hj__buffer_free: the storage and the struct (the last reference went).
   hj__buffer_bytes: bytes |t| and |s| need (elements x size), or -1 with a message naming
   |fn| for a bad dtype, rank or an overflow. */
void hj__buffer_free(hj_buffer_t *b);
/* The context's state for backend |be|, made once by its ctx_create under the context's
   lock (threads compiling or allocating at once make one); a failure keeps nothing. */
struct hlo_backend;
hj_status hj__backend_state(hj_ctx_t *ctx, const struct hlo_backend *be, void **state);
/* api.c: frees an OWNED buffer's storage where it came from (the allocator or |mem|). */
void hj__buffer_free_data(hj_buffer_t *b);
int64_t hj__buffer_bytes(hj_ctx_t *ctx, const char *fn, hj_dtype_t t, hj_shape_t s);
hlo_shape hj__buffer_hlo_shape(const hj_buffer_t *b);
const hlo_shape **hj__leaves(const hlo_module *m, bool outputs);

/* ---- exec.c, exec_io.c, exec_profile.c: executables ------------------------------------
   exec.c compiles through the backend table and runs; exec_io.c keeps the names, the
   aliases and the bound inputs; exec_profile.c the profiles. */
struct hlo_backend;
struct hj_exec {
  hj_ctx_t *ctx;
  hlo_module *m;
  bool owns;                          /* made by hj_compile: freed with the executable */
  const struct hlo_backend *be;
  void *x;                            /* the backend's executable */
  const hlo_shape **ins, **outs;      /* stb_ds: flattened leaves, pointing into m */
  double compile_ms;
  char note[512];                     /* why AUTO skipped backends; "" when it did not */
  char **in_names, **out_names;       /* stb_ds of malloc'd names, one per leaf */
  int *alias_in;                      /* per output leaf: the input leaf it aliases, -1 */
  hj_buffer_t **bound;                /* per input leaf: a reference, or NULL */
  int nbound;
  bool profiling;
  _Atomic int64_t runs, run_ns;       /* every run, and their wall time */
};
/* exec_io.c: fills in_names / out_names (from |g|'s names, or the module's when NULL) and
   alias_in; hj__exec_io_free releases them and the bindings. */
hj_status hj__exec_io_init(hj_exec_t *e, const hj_graph_t *g);
void hj__exec_io_free(hj_exec_t *e);
/* buffer.c: does buffer |b| hold an array of leaf shape |s| (dynamic dims at their bound)? */
bool hj__buffer_fits(const hj_buffer_t *b, const hlo_shape *s);

/* ---- npy.c: NumPy .npy files ------------------------------------------------------------ */
hj_status hlo_npy_read(hj_ctx_t *ctx, const char *path, hlo_literal **out);
hj_status hlo_npy_write(hj_ctx_t *ctx, const char *path, const hlo_literal *l);

/* ---- builder.c, builder_ops.c, composites.c, graph_module.c: graphs ----------------------
   A graph is one computation of a module. A top graph owns the module and every sub-graph
   made from it (sub-graphs share the module: they are its other computations). A tensor
   {g, id} names g->vals[id]; a failing op returns {g, -1} (poisoned). The graph keeps its
   first error (so does its top graph) for hj_graph_status and hj_compile. */
struct hj_graph {
  hj_ctx_t *ctx;
  hlo_module *m;                      /* the top graph's module, shared by sub-graphs */
  hlo_comp *comp;
  struct hj_graph *top;               /* the top graph (itself for a top graph) */
  struct hj_graph **subs;             /* top only: stb_ds array of sub-graphs it owns */
  hlo_instr **vals;                   /* stb_ds: tensor id -> instruction */
  hlo_instr **outputs;                /* stb_ds: hj_graph_output order */
  /* names and aliases (top graph; graph_io.c), captures (sub-graphs; control.c) */
  struct hj_graph *parent;            /* the graph hj_graph_create_sub was given */
  char **param_names;                 /* stb_ds, by parameter number: strdup'd, NULL unnamed */
  char **output_names;                /* stb_ds, parallel to |outputs|: strdup'd or NULL */
  struct hj_graph_alias { int output; hlo_instr *param; } *aliases;   /* stb_ds */
  struct hj_capture {                 /* a tensor of an enclosing graph used here */
    hj_tensor_t src;                  /* in an ancestor graph */
    hlo_instr *ins;                   /* its stand-in here (a parameter until closed) */
  } *captures;                        /* stb_ds */
  int closed_as;                      /* 0, or the opcode whose closure fixed |captures| */
  bool frozen;                        /* sub-graph whose root was fixed by a use */
  int nparams;
  hj_status status;                   /* first error of an op on this graph */
  char err[1024];
  /* top only: small computations built once and reused (NULL until first use) */
  hlo_comp *reducers[HJ_RED_COUNT][HJ_DTYPE_COUNT];
  hlo_comp *sorters[2][HJ_DTYPE_COUNT];          /* ascending, descending */
  struct hj_graph *argmax_fns[HJ_DTYPE_COUNT];
};


/* builder.c: the pieces composites.c shares. */
/* Records the graph's first error (also in its top graph and the context) and returns a
   poisoned tensor of |g|. */
hj_tensor_t hj__graph_fail(hj_graph_t *g, hj_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The instruction of |t| when |t| is a live tensor of its graph; NULL when poisoned (with
   an error recorded, naming |op|, for a bad handle). */
hlo_instr *hj__tensor_instr(const char *op, hj_tensor_t t);
/* hlo shape of an hj shape; false (no error set) when the rank or a dim is invalid. */
bool hj__shape_to_hlo(hj_dtype_t t, hj_shape_t s, hlo_shape *out);
hj_shape_t hj__shape_from_hlo(const hlo_shape *s);
/* Resolves |n| operand tensors of op |op| to instructions of one graph (*g, set whenever
   any operand has a graph). False when one is poisoned, HJ_NONE or from another graph
   (errors recorded except for poisoned ones, which stay silent). */
bool hj__operands(const char *op, const hj_tensor_t *ts, int n, hj_graph_t **g, hlo_instr **out);
/* Appends |opc| with |operands| to g's computation; |declared| is the shape for ops whose
   shape is an attribute (broadcast, reshape, iota, convert, parameter, constant), else
   NULL. The caller sets attributes, then hj__op_finish infers the shape and returns the
   new tensor, or drops the instruction and returns a poisoned tensor naming |op|. */
hlo_instr *hj__op_begin(hj_graph_t *g, const char *op, hlo_opcode opc, const hlo_shape *declared,
                        hlo_instr *const *operands, int n);
hj_tensor_t hj__op_finish(hj_graph_t *g, const char *op, hlo_instr *ins);
/* "f32[4,8]" of |t| into |buf| ("<poisoned>" when not live). */
const char *hj__tensor_str(hj_tensor_t t, char *buf, size_t n);
/* builder.c: the pieces builder_ops.c shares. Helpers that emit return the new
   instruction (it also gets a tensor id), or NULL with the graph's error recorded.
   hj__graph_name: the name messages use (the module's for a top graph).
   hj__emit: hj__op_begin + hj__op_finish for a helper instruction.
   hj__const: a constant of |shape| (static array) copying |data| (pred made 0/1);
   hj__scalar_const: a |t| scalar of value |v|.
   hj__expand: |x| NumPy-broadcast to |target|'s dims (already checked; |x| itself when
   the dims are equal), a reshape dropping stretched size-1 dims, then a broadcast.
   hj__tensor_of: the tensor of recent instruction |ins| of |g| (poisoned when NULL).
   hj__same_type: |a| and |b| have one dtype, else an error naming both shapes.
   hj__comp_new: a computation of |m| named |name| made a unique identifier (".N"). */
const char *hj__graph_name(const hj_graph_t *g);
hlo_instr *hj__emit(hj_graph_t *g, const char *op, hlo_opcode opc, const hlo_shape *decl,
                    hlo_instr *const *operands, int n);
hlo_instr *hj__const(hj_graph_t *g, const char *op, const hlo_shape *shape, const void *data);
hlo_instr *hj__scalar_const(hj_graph_t *g, const char *op, hlo_type t, double v);
hlo_instr *hj__expand(hj_graph_t *g, const char *op, hlo_instr *x, const hlo_shape *target);
hj_tensor_t hj__tensor_of(hj_graph_t *g, hlo_instr *ins);
bool hj__same_type(hj_graph_t *g, const char *op, hlo_instr *a, hlo_instr *b);
/* hj__dot_types: a dot's operands have one dtype, or are floats of different widths (a
   mixed-precision dot, f32 x bf16: the result is the wider type); else hj__same_type's error. */
bool hj__dot_types(hj_graph_t *g, const char *op, hlo_instr *a, hlo_instr *b);
hlo_comp *hj__comp_new(hlo_module *m, const char *name);
/* builder.c (captures) and control.c (closing them): tensors of enclosing graphs used in
   sub-graphs (see control.c's top comment).
   hj__is_ancestor: |a| encloses |b| (b's parent, or its parent's, ...).
   hj__capture: |t|'s stand-in in |g| (made on first use; NULL with an error recorded).
   hj__close_while / _branches / _call: at a call of sub-graphs that capture, close them
   (once) and give the caller's extended operands: *ext the init tuple (while), the branch
   operand tuples (|ext| has n entries), or an stb_ds array of args + sources (call; the
   caller arrfree's it). 0: nothing captured (use the plain operands); 1: done; -1: error
   recorded in the caller's graph. */
bool hj__is_ancestor(const hj_graph_t *a, const hj_graph_t *b);
bool hj__has_captures(const hj_graph_t *g);
hlo_instr *hj__capture(hj_graph_t *g, const char *op, hj_tensor_t t);
int hj__close_while(hj_graph_t *cond, hj_graph_t *body, hj_tensor_t init, hj_tensor_t *ext);
int hj__close_branches(hj_tensor_t selector, hj_graph_t *const *branches, const hj_tensor_t *args, int n,
                       hj_tensor_t *ext);
int hj__close_call(hj_graph_t *caller, hj_graph_t *callee, const hj_tensor_t *args, int n,
                   hj_tensor_t **ext);
/* graph_io.c: names and aliases of a graph's inputs and outputs (hj_graph_output_named,
   hj_graph_alias). hj__graph_name_param records parameter |index|'s user name (|name| may
   be NULL); hj__graph_io_free frees what graph_io.c and control.c keep in a graph. */
void hj__graph_name_param(hj_graph_t *g, int64_t index, const char *name);
char *hj__strdup(const char *s);   /* malloc'd copy (names); NULL on OOM */
void hj__graph_io_free(hj_graph_t *g);
/* graph_module.c: a copy of the graph's module with its computations in callee-first
   order and the entry last (root: the single output or a tuple of outputs). */
hj_status hj__graph_module(hj_graph_t *g, hlo_module **out);


/* builder.c (hardening): why |t| and |s| make no valid array shape ("an invalid dtype",
   "a rank outside [0, 8]", "a dim of INT64_MIN (no bound)", "more than 2^53 elements"),
   or NULL when they do; hj__shape_to_hlo accepts exactly the shapes this accepts. */
const char *hj__shape_problem(hj_dtype_t t, hj_shape_t s);

#endif /* HLOJIT_API_H */
