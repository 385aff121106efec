/* hlojit.h — an embeddable tracing JIT for tensor programs, in C11.   MIT licence (see LICENSE).

   WHAT IT IS
   A C program builds a tensor graph by calling ops (hj_matmul, hj_add, hj_softmax, ...).
   hlojit records the graph as an HLO module (XLA's IR; modules dumped by JAX or XLA in
   XLA's text format can be read and run too), and runs it. The compiler stages (HLO
   passes, fusion, LLVM code generation for the CPU and for NVIDIA GPUs) are being built
   in this order: see STATUS below. Modules run on the CPU backend (LLVM) by default; the
   reference evaluator (HJ_BACKEND_INTERP) gives XLA's semantics and is the oracle the
   backends are tested on.

   EXAMPLE (a two-layer MLP; error checks shortened to one)
       hj_ctx_options_t opt; hj_ctx_options_init(&opt);
       hj_ctx_t *ctx; if (hj_ctx_create(&opt, &ctx)) return 1;
       hj_graph_t *g; hj_graph_create(ctx, "mlp", &g);
       hj_tensor_t x  = hj_param(g, HJ_F32, HJ_SHAPE(4, 8), "x");      // (B, C)
       hj_tensor_t w1 = hj_param(g, HJ_F32, HJ_SHAPE(8, 16), "w1");    // (C, 4C)
       hj_tensor_t w2 = hj_param(g, HJ_F32, HJ_SHAPE(16, 8), "w2");    // (4C, C)
       hj_tensor_t y  = hj_matmul(hj_gelu_tanh(hj_matmul(x, w1)), w2); // (B, C)
       hj_graph_output(g, y);
       hj_exec_t *e;
       if (hj_compile(g, &e)) { fprintf(stderr, "%s\n", hj_ctx_error(ctx)); return 1; }
       hj_buffer_t *in[3], *out[1] = {NULL};
       hj_buffer_from_host(ctx, HJ_F32, HJ_SHAPE(4, 8), xdata, &in[0]);   // ... w1, w2
       hj_exec_run(e, in, 3, out, 1);               // out[0] is created by the run
       const float *p = hj_buffer_host_ptr(out[0]); // (B, C), row-major
       hj_buffer_destroy(out[0]); ... hj_exec_destroy(e); hj_graph_destroy(g); hj_ctx_destroy(ctx);

   BUILD OPTIONS
   - Link build/libhlojit.a or build/libhlojit.so (made by `make`) with
     `$(llvm-config-19 --ldflags --libs) -lm -lpthread -ldl`, or
   - define HLOJIT_IMPLEMENTATION in exactly one .c file before `#include "hlojit.h"`:
     the whole implementation, CPU backend included, is then compiled into that
     translation unit. Compile it with -std=gnu11, -I pointing at the directory holding
     hlojit.h and hlojit_impl/ (and backends/ beside them), and
     -I$(llvm-config-19 --includedir); link with $(llvm-config-19 --ldflags --libs)
     -lm -lpthread -ldl. Add -DHLOJIT_NO_LLVM for the evaluator-only build (no LLVM
     headers or library; HJ_BACKEND_AUTO then runs modules on the reference evaluator and
     HJ_BACKEND_CPU fails, saying so).

   CONVENTIONS
   - Every fallible call returns hj_status (HJ_OK == 0); the message is in hj_ctx_error(ctx).
     Nothing in the library aborts or exits on bad input.
   - Ops on the graph never fail loudly: a bad op (shape mismatch, wrong dtype, bad handle)
     returns a poisoned tensor and records the first error with the op's name and shapes;
     hj_graph_status() and hj_compile() report it.
   - Create functions set *out = NULL first and leave nothing allocated on failure.
   - Arrays are dense and row-major (C order). pred is one byte (0 or 1); f16 and bf16 are
     their 16-bit patterns (uint16_t). In .npy files bf16 is stored as numpy's `V2`
     (two raw bytes, the bfloat16 bit pattern; read it with ml_dtypes.bfloat16 via
     `arr.view(ml_dtypes.bfloat16)`), and read back from `V2` or from ml_dtypes' `<V2`.
   - Tuple-shaped entry parameters and results are passed flattened: one buffer per leaf,
     in order (depth first).
   - Binary ops broadcast NumPy-style (shapes aligned from the right, size-1 dims stretch).

   STATUS
   - works:   graph builder with every op below, HLO text parse/print (XLA-compatible),
              verifier, reference evaluator (HJ_BACKEND_INTERP), .npy I/O, the `hlojit`
              command-line tool (print, opt, run);
              the HLO pass pipeline (inlining, simplification, constant folding, CSE, DCE,
              layout normalisation, producer-consumer / sibling / matmul-epilogue fusion,
              scheduling; hj_module_optimize);
              the CPU backend (LLVM ORC; HJ_BACKEND_CPU, and AUTO): loop, reduction (incl.
              softmax/layer-norm row normalisation), transpose, in-place
              dynamic-update-slice and matmul (f32, packed, AVX-512/AVX2) emitters, one
              arena per executable, thread pool. Fusions without an emitter (sort, scatter,
              reduce-window, non-f32 dots) run on the evaluator inside the compiled program
              (hj_exec_stats counts them);
              the CUDA backend (NVPTX through LLVM, the driver and cuBLAS by dlopen; AUTO
              tries it first and falls back to the CPU, saying why, where there is no
              driver or device): the same emitters with GPU thread mappings, a
              shared-memory tiled matmul and cuBLAS, buffers in managed memory (host-
              readable after a run, no copy call), CUDA graphs (HLOJIT_CUDA_GRAPHS=0: off),
              hj_module_to_ptx / `hlojit ptx` without a GPU. Built and checked here
              without a GPU (ptxas, a test double of the driver); `make test-gpu` and
              tools/gpu_check.sh are the checks on one.
   - not yet: the tracing JIT with shape buckets, the disk cache (of PTX too), the GPT-2
              example. Bounded dynamic dims
              (HJ_DYN) are accepted and printed (`f32[<=64,768]`) and run at their bound.
*/
#ifndef HLOJIT_H
#define HLOJIT_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HJ_VERSION_MAJOR 0
#define HJ_VERSION_MINOR 1
#define HJ_MAX_RANK 8

typedef enum hj_status {
  HJ_OK = 0,
  HJ_ERR_INVALID_ARG,   /* NULL, bad handle, out-of-range argument */
  HJ_ERR_SHAPE,         /* shapes or dtypes do not fit the op */
  HJ_ERR_PARSE,         /* HLO text or .npy that cannot be read */
  HJ_ERR_UNSUPPORTED,   /* valid input hlojit cannot honour (yet) */
  HJ_ERR_OOM,
  HJ_ERR_IO,
  HJ_ERR_BACKEND,       /* LLVM, CUDA driver or cuBLAS said no */
  HJ_ERR_INTERNAL,
  HJ_STATUS_COUNT
} hj_status;

/* Element types. Values are only appended. */
typedef enum hj_dtype {
  HJ_PRED = 0, HJ_S8, HJ_S16, HJ_S32, HJ_S64, HJ_U8, HJ_U16, HJ_U32, HJ_U64,
  HJ_F16, HJ_BF16, HJ_F32, HJ_F64,
  HJ_DTYPE_COUNT
} hj_dtype_t;

typedef enum hj_backend {
  HJ_BACKEND_AUTO = 0,   /* the first backend built in that compiles the module, in the
                            order CUDA, CPU, evaluator; each one skipped says why in
                            hj_exec_stats().note */
  HJ_BACKEND_INTERP,     /* the reference evaluator: slow, obviously correct */
  HJ_BACKEND_CPU,
  HJ_BACKEND_CUDA,
  HJ_BACKEND_COUNT
} hj_backend_t;

/* A shape: |rank| dims, row-major. A negative dim -N is a bounded dynamic dim (<= N). */
typedef struct hj_shape {
  int rank;
  int64_t dims[HJ_MAX_RANK];
} hj_shape_t;

#define HJ__NARGS(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define HJ_SHAPE(...) ((hj_shape_t){ .rank = HJ__NARGS(__VA_ARGS__), .dims = { __VA_ARGS__ } })
#define HJ_SCALAR ((hj_shape_t){ .rank = 0 })
#define HJ_DYN(bound) (-(int64_t)(bound))
/* "No tensor", for optional arguments. A poisoned tensor has a graph and id < 0. */
#define HJ_NONE ((hj_tensor_t){ NULL, -1 })

/* Allocator used for the context, graph and module arenas and buffer storage.
   Containers inside the library (stb_ds) use malloc/realloc. |align| is a power of two.
   The default (posix_memalign/free) gives blocks of 2 MiB or more 2 MiB alignment and, on
   Linux, advises them as transparent huge pages (madvise MADV_HUGEPAGE): matmul kernels that
   walk weights row by row then miss the TLB far less. */
typedef struct hj_allocator {
  void *(*alloc)(void *user, size_t size, size_t align);
  void (*free)(void *user, void *ptr);
  void *user;
} hj_allocator_t;

typedef struct hj_ctx_options {
  hj_backend_t backend;     /* default HJ_BACKEND_AUTO */
  int num_threads;          /* 0: all cores. Idle workers spin up to 0.2 ms after a job
                               before sleeping (not when num_threads > cores) */
  hj_allocator_t allocator; /* all NULL: malloc/free */
  const char *dump_dir;     /* NULL: $HLOJIT_DUMP_TO, if set */
  bool no_fusion;           /* compiled backends: skip the fusion passes (one kernel per op);
                               for measuring what fusion buys */
} hj_ctx_options_t;

typedef struct hj_ctx hj_ctx_t;
typedef struct hj_graph hj_graph_t;
typedef struct hj_module hj_module_t;
typedef struct hj_exec hj_exec_t;
typedef struct hj_buffer hj_buffer_t;

/* A tensor is a small value: the graph it lives in and its index there. id < 0: poisoned. */
typedef struct hj_tensor {
  hj_graph_t *graph;
  int32_t id;
} hj_tensor_t;

/* ---- context ---------------------------------------------------------------------- */
void hj_ctx_options_init(hj_ctx_options_t *opt);
hj_status hj_ctx_create(const hj_ctx_options_t *opt, hj_ctx_t **out); /* opt may be NULL */
void hj_ctx_destroy(hj_ctx_t *ctx);
const char *hj_ctx_error(const hj_ctx_t *ctx); /* last error message; "" if none */
void hj_ctx_clear_error(hj_ctx_t *ctx);
const char *hj_status_name(hj_status s);
const char *hj_dtype_name(hj_dtype_t t);        /* "f32", ...; NULL if out of range */
size_t hj_dtype_size(hj_dtype_t t);             /* bytes per element; 0 if out of range */
int64_t hj_shape_numel(hj_shape_t s);           /* product of |dims| (bounds for dynamic) */

/* ---- graph building ------------------------------------------------------------------ */
hj_status hj_graph_create(hj_ctx_t *ctx, const char *name, hj_graph_t **out);
/* A sub-graph: a computation in the same module, for hj_call, hj_map, hj_while,
   hj_conditional, hj_reduce_with, hj_sort_with and hj_scatter_with. Its outputs are set
   with hj_graph_output like a top graph's. Freed with its parent. */
hj_status hj_graph_create_sub(hj_graph_t *parent, const char *name, hj_graph_t **out);
void hj_graph_destroy(hj_graph_t *g);
hj_status hj_graph_status(const hj_graph_t *g);  /* first error recorded by an op */
hj_ctx_t *hj_graph_ctx(const hj_graph_t *g);
/* Marks |t| as an output. Several outputs make a tuple result, in call order. */
hj_status hj_graph_output(hj_graph_t *g, hj_tensor_t t);
/* The graph as an HLO module (owned by the caller; free with hj_module_destroy). */
hj_status hj_graph_to_module(hj_graph_t *g, hj_module_t **out);

hj_dtype_t hj_tensor_dtype(hj_tensor_t t);       /* HJ_DTYPE_COUNT if poisoned or a tuple */
hj_shape_t hj_tensor_shape(hj_tensor_t t);       /* rank 0 if poisoned */
bool hj_tensor_ok(hj_tensor_t t);

/* Leaves and constants */
hj_tensor_t hj_param(hj_graph_t *g, hj_dtype_t t, hj_shape_t s, const char *name);
/* A tuple-shaped parameter (for while bodies): |n| element types and shapes. */
hj_tensor_t hj_param_tuple(hj_graph_t *g, const hj_dtype_t *types, const hj_shape_t *shapes,
                           int n, const char *name);
hj_tensor_t hj_constant(hj_graph_t *g, hj_dtype_t t, hj_shape_t s, const void *data); /* copied */
hj_tensor_t hj_scalar(hj_graph_t *g, hj_dtype_t t, double v);
hj_tensor_t hj_full(hj_graph_t *g, hj_dtype_t t, hj_shape_t s, double v);
hj_tensor_t hj_iota(hj_graph_t *g, hj_dtype_t t, hj_shape_t s, int dim);

/* Elementwise unary */
hj_tensor_t hj_abs(hj_tensor_t x);
hj_tensor_t hj_neg(hj_tensor_t x);
hj_tensor_t hj_exp(hj_tensor_t x);
hj_tensor_t hj_expm1(hj_tensor_t x);
hj_tensor_t hj_log(hj_tensor_t x);
hj_tensor_t hj_log1p(hj_tensor_t x);
hj_tensor_t hj_logistic(hj_tensor_t x);
hj_tensor_t hj_tanh(hj_tensor_t x);
hj_tensor_t hj_sqrt(hj_tensor_t x);
hj_tensor_t hj_rsqrt(hj_tensor_t x);
hj_tensor_t hj_cbrt(hj_tensor_t x);
hj_tensor_t hj_sin(hj_tensor_t x);
hj_tensor_t hj_cos(hj_tensor_t x);
hj_tensor_t hj_tan(hj_tensor_t x);
hj_tensor_t hj_erf(hj_tensor_t x);
hj_tensor_t hj_floor(hj_tensor_t x);
hj_tensor_t hj_ceil(hj_tensor_t x);
hj_tensor_t hj_round_even(hj_tensor_t x);        /* round-nearest-even */
hj_tensor_t hj_round_afz(hj_tensor_t x);         /* round-nearest-afz (half away from zero) */
hj_tensor_t hj_sign(hj_tensor_t x);
hj_tensor_t hj_not(hj_tensor_t x);               /* logical for pred, bitwise for ints */
hj_tensor_t hj_is_finite(hj_tensor_t x);         /* -> pred */
hj_tensor_t hj_popcnt(hj_tensor_t x);
hj_tensor_t hj_clz(hj_tensor_t x);

/* Elementwise binary (NumPy broadcasting; both operands must have the same dtype) */
hj_tensor_t hj_add(hj_tensor_t a, hj_tensor_t b);
hj_tensor_t hj_sub(hj_tensor_t a, hj_tensor_t b);
hj_tensor_t hj_mul(hj_tensor_t a, hj_tensor_t b);
hj_tensor_t hj_div(hj_tensor_t a, hj_tensor_t b);  /* integers: truncating; x/0 per XLA */
hj_tensor_t hj_rem(hj_tensor_t a, hj_tensor_t b);  /* sign of the dividend, like fmod */
hj_tensor_t hj_pow(hj_tensor_t a, hj_tensor_t b);
hj_tensor_t hj_max(hj_tensor_t a, hj_tensor_t b);  /* NaN propagates */
hj_tensor_t hj_min(hj_tensor_t a, hj_tensor_t b);
hj_tensor_t hj_atan2(hj_tensor_t a, hj_tensor_t b);
hj_tensor_t hj_and(hj_tensor_t a, hj_tensor_t b);
hj_tensor_t hj_or(hj_tensor_t a, hj_tensor_t b);
hj_tensor_t hj_xor(hj_tensor_t a, hj_tensor_t b);
hj_tensor_t hj_shl(hj_tensor_t a, hj_tensor_t b);
hj_tensor_t hj_shr_arith(hj_tensor_t a, hj_tensor_t b);
hj_tensor_t hj_shr_logical(hj_tensor_t a, hj_tensor_t b);

typedef enum hj_cmp { HJ_CMP_EQ = 0, HJ_CMP_NE, HJ_CMP_LT, HJ_CMP_LE, HJ_CMP_GT, HJ_CMP_GE,
                      HJ_CMP_COUNT } hj_cmp_t;
hj_tensor_t hj_compare(hj_tensor_t a, hj_tensor_t b, hj_cmp_t dir); /* -> pred */
/* Ternary (NumPy broadcasting of all three) */
hj_tensor_t hj_select(hj_tensor_t pred, hj_tensor_t on_true, hj_tensor_t on_false);
hj_tensor_t hj_clamp(hj_tensor_t lo, hj_tensor_t x, hj_tensor_t hi);  /* XLA's operand order */

hj_tensor_t hj_convert(hj_tensor_t x, hj_dtype_t t);          /* value conversion */
hj_tensor_t hj_bitcast_convert(hj_tensor_t x, hj_dtype_t t);  /* same-size reinterpretation */
hj_tensor_t hj_copy(hj_tensor_t x);

/* Shape ops. Arrays of dims have |n| entries. */
hj_tensor_t hj_broadcast_in_dim(hj_tensor_t x, hj_shape_t s, const int64_t *dims, int n);
hj_tensor_t hj_broadcast_to(hj_tensor_t x, hj_shape_t s);     /* NumPy rules */
/* One dim of |s| may be -1: inferred. Reshape targets are static (so -1 never means
   HJ_DYN(1)). */
hj_tensor_t hj_reshape(hj_tensor_t x, hj_shape_t s);
hj_tensor_t hj_transpose(hj_tensor_t x, const int64_t *perm, int n);
hj_tensor_t hj_slice(hj_tensor_t x, const int64_t *start, const int64_t *limit,
                     const int64_t *stride);                     /* stride may be NULL */
/* |starts|: one scalar integer tensor per dim of x; starts are clamped like XLA's. */
hj_tensor_t hj_dynamic_slice(hj_tensor_t x, const hj_tensor_t *starts, const int64_t *sizes);
hj_tensor_t hj_dynamic_update_slice(hj_tensor_t x, hj_tensor_t update, const hj_tensor_t *starts);
hj_tensor_t hj_concat(const hj_tensor_t *xs, int n, int axis);
/* |out| receives |n| tensors; |sizes| sums to x's size along |axis|. */
hj_status hj_split(hj_tensor_t x, int axis, const int64_t *sizes, int n, hj_tensor_t *out);
hj_tensor_t hj_pad(hj_tensor_t x, hj_tensor_t value, const int64_t *lo, const int64_t *hi,
                   const int64_t *interior);                     /* interior may be NULL */
hj_tensor_t hj_reverse(hj_tensor_t x, const int64_t *dims, int n);

typedef struct hj_gather_dims {
  const int64_t *offset_dims;          int n_offset_dims;
  const int64_t *collapsed_slice_dims; int n_collapsed_slice_dims;
  const int64_t *start_index_map;      int n_start_index_map;
  int64_t index_vector_dim;
  const int64_t *slice_sizes;          int n_slice_sizes;
} hj_gather_dims_t;
hj_tensor_t hj_gather(hj_tensor_t operand, hj_tensor_t indices, const hj_gather_dims_t *d);

typedef struct hj_scatter_dims {
  const int64_t *update_window_dims;           int n_update_window_dims;
  const int64_t *inserted_window_dims;         int n_inserted_window_dims;
  const int64_t *scatter_dims_to_operand_dims; int n_scatter_dims_to_operand_dims;
  int64_t index_vector_dim;
} hj_scatter_dims_t;

/* Reducers for hj_reduce and hj_scatter */
typedef enum hj_reducer { HJ_RED_SUM = 0, HJ_RED_PROD, HJ_RED_MAX, HJ_RED_MIN, HJ_RED_AND,
                          HJ_RED_OR, HJ_RED_REPLACE, HJ_RED_COUNT } hj_reducer_t;
/* Reduces |dims| away with the reducer's identity as init (REPLACE is not a reducer). */
hj_tensor_t hj_reduce(hj_tensor_t x, hj_reducer_t r, const int64_t *dims, int n);
hj_tensor_t hj_scatter(hj_tensor_t operand, hj_tensor_t indices, hj_tensor_t updates,
                       const hj_scatter_dims_t *d, hj_reducer_t combine);
/* Sorts along |dim|; ascending unless |descending|. NaNs sort last (total order). */
hj_tensor_t hj_sort(hj_tensor_t x, int dim, bool descending);

typedef struct hj_dot_dims {
  const int64_t *lhs_batch;      int n_lhs_batch;
  const int64_t *rhs_batch;      int n_rhs_batch;
  const int64_t *lhs_contracting; int n_lhs_contracting;
  const int64_t *rhs_contracting; int n_rhs_contracting;
} hj_dot_dims_t;
hj_tensor_t hj_dot_general(hj_tensor_t a, hj_tensor_t b, const hj_dot_dims_t *d);

/* Tuples and control flow, with sub-graphs (hj_graph_create_sub) as computations */
hj_tensor_t hj_tuple(hj_graph_t *g, const hj_tensor_t *xs, int n);
hj_tensor_t hj_get_tuple_element(hj_tensor_t t, int index);
hj_tensor_t hj_call(hj_graph_t *callee, const hj_tensor_t *args, int n);
hj_tensor_t hj_map(hj_graph_t *scalar_fn, const hj_tensor_t *args, int n);
/* |cond| takes the state and returns pred[]; |body| takes and returns the state. */
hj_tensor_t hj_while(hj_graph_t *cond, hj_graph_t *body, hj_tensor_t init);
/* |selector| is pred[] (2 branches: true first) or s32[] (n branches; out of range -> last). */
hj_tensor_t hj_conditional(hj_tensor_t selector, hj_graph_t *const *branches,
                           const hj_tensor_t *branch_args, int n);
/* Generic (variadic) reduce: |fn| takes 2n scalars (accumulators, then elements) and returns
   n (a tuple when n > 1). Result: one tensor or a tuple of n. */
hj_tensor_t hj_reduce_with(hj_graph_t *fn, const hj_tensor_t *xs, const hj_tensor_t *inits,
                           int n, const int64_t *dims, int ndims);
/* Generic sort of |n| same-shape operands along |dim| with a comparator taking 2n scalars. */
hj_tensor_t hj_sort_with(hj_graph_t *cmp, const hj_tensor_t *xs, int n, int dim, bool stable);

/* ---- composites (built from the ops above) ------------------------------------------- */
/* NumPy matmul: (..., M, K) x (..., K, N) -> (..., M, N); batch dims broadcast; a rank-1
   operand is a vector. */
hj_tensor_t hj_matmul(hj_tensor_t a, hj_tensor_t b);
hj_tensor_t hj_softmax(hj_tensor_t x, int axis);
hj_tensor_t hj_log_softmax(hj_tensor_t x, int axis);
/* Over the last dim: (x - mean) / sqrt(var + eps) * gamma + beta; gamma and beta (C) may
   each be HJ_NONE (absent). */
hj_tensor_t hj_layer_norm(hj_tensor_t x, hj_tensor_t gamma, hj_tensor_t beta, double eps);
hj_tensor_t hj_gelu_tanh(hj_tensor_t x);
hj_tensor_t hj_gelu_erf(hj_tensor_t x);
/* |dims| NULL: all dims. */
hj_tensor_t hj_mean(hj_tensor_t x, const int64_t *dims, int n, bool keepdims);
hj_tensor_t hj_var(hj_tensor_t x, const int64_t *dims, int n, bool keepdims); /* population */
/* pred[T, T], true where key <= query (the lower triangle). */
hj_tensor_t hj_causal_mask(hj_graph_t *g, int64_t T);
/* table (V, C), ids (...) integer -> (..., C); out-of-range ids clamp like XLA's gather. */
hj_tensor_t hj_embedding(hj_tensor_t table, hj_tensor_t ids);
hj_tensor_t hj_argmax(hj_tensor_t x, int axis);   /* -> s32, first maximum wins */

/* ---- modules: XLA's HLO text ----------------------------------------------------------- */
/* Parses HLO text (|len| bytes; |filename| names it in messages, may be NULL) and verifies
   it. Errors read "file:line:col: message" followed by the line and a caret. */
hj_status hj_module_parse(hj_ctx_t *ctx, const char *text, size_t len, const char *filename,
                          hj_module_t **out);
hj_status hj_module_parse_file(hj_ctx_t *ctx, const char *path, hj_module_t **out);
/* Canonical text; *text is malloc'd, NUL-terminated; free it with free(). */
hj_status hj_module_print(const hj_module_t *m, char **text);
hj_status hj_module_verify(hj_module_t *m);
void hj_module_destroy(hj_module_t *m);
/* The entry computation's signature, flattened to leaves (tuple parameters expanded). */
int hj_module_num_inputs(const hj_module_t *m);
int hj_module_num_outputs(const hj_module_t *m);
hj_status hj_module_input(const hj_module_t *m, int i, hj_dtype_t *t, hj_shape_t *s);
hj_status hj_module_output(const hj_module_t *m, int i, hj_dtype_t *t, hj_shape_t *s);
/* Runs the HLO pass pipeline on |m| in place (inlining, tuple and algebraic
   simplification, constant folding, CSE, DCE, layout normalisation, and fusion where it is
   built in). The result computes the same values, bit for bit. With the context's dump_dir
   (or $HLOJIT_DUMP_TO) each pass leaves DIR/NNN.PASS.txt. On failure |m| may be partly
   rewritten but still verifies, except for HJ_ERR_INTERNAL (a pass bug: the message names
   the pass). */
hj_status hj_module_optimize(hj_module_t *m);

/* ---- compile and run ------------------------------------------------------------------- */
/* The executable keeps its own copy of the graph's module. */
hj_status hj_compile(hj_graph_t *g, hj_exec_t **out);
/* The executable borrows |m|: keep it alive until hj_exec_destroy. */
hj_status hj_compile_module(hj_ctx_t *ctx, hj_module_t *m, hj_exec_t **out);
/* Runs with |nin| input buffers (flattened entry parameters). Each out[i] that is NULL
   receives a new buffer (the caller destroys it); a non-NULL one must have the output's
   dtype and shape and is overwritten. */
hj_status hj_exec_run(hj_exec_t *e, hj_buffer_t *const *in, int nin, hj_buffer_t **out, int nout);
int hj_exec_num_inputs(const hj_exec_t *e);
int hj_exec_num_outputs(const hj_exec_t *e);
hj_backend_t hj_exec_backend(const hj_exec_t *e);
void hj_exec_destroy(hj_exec_t *e);

/* What the compiler made of an executable. On the evaluator only |backend|, |note| and
   |compile_ms| are set. */
typedef struct hj_exec_stats {
  hj_backend_t backend;       /* the backend that runs it (AUTO resolved) */
  int fusions;                /* fusions after the pass pipeline (every nested one too) */
  int kernels_loop, kernels_reduction, kernels_transpose, kernels_matmul, kernels_dus;
  int evaluator_fallbacks;    /* fusions the evaluator runs: runtime_ops + unsupported */
  int runtime_ops;            /* of which sort, scatter, reduce-window...: no emitter by design */
  int emit_errors;            /* of which an emitter failed with something else than
                                 HJ_ERR_UNSUPPORTED (a bug: the message is in the thunk dump) */
  int copies;                 /* copy thunks (outputs that are parameters, constants, twice) */
  int64_t arena_bytes;        /* peak scratch memory of the buffer plans, all computations */
  double compile_ms;          /* wall time of hj_compile / hj_compile_module, of which: */
  double passes_ms;           /*   clone, HLO passes, buffer assignment, thunks */
  double emit_ms;             /*   LLVM IR emission */
  double optimize_ms;         /*   LLVM O3 */
  double codegen_ms;          /*   machine code (JIT add + lookups) */
  const char *note;           /* why AUTO did not get the CPU backend; "" otherwise */
  int64_t bytes_moved;        /* per run: bytes of the input and output buffers of every
                                 kernel, matmul, evaluator and copy thunk, each thunk once
                                 (while/conditional bodies once, not per iteration) */
} hj_exec_stats_t;
hj_status hj_exec_stats(const hj_exec_t *e, hj_exec_stats_t *out);

/* ---- buffers --------------------------------------------------------------------------- */
hj_status hj_buffer_create(hj_ctx_t *ctx, hj_dtype_t t, hj_shape_t s, hj_buffer_t **out); /* zeroed */
hj_status hj_buffer_from_host(hj_ctx_t *ctx, hj_dtype_t t, hj_shape_t s, const void *data,
                              hj_buffer_t **out);
void *hj_buffer_host_ptr(hj_buffer_t *b);
hj_status hj_buffer_copy_to_host(const hj_buffer_t *b, void *dst, size_t nbytes);
hj_dtype_t hj_buffer_dtype(const hj_buffer_t *b);
hj_shape_t hj_buffer_shape(const hj_buffer_t *b);
size_t hj_buffer_nbytes(const hj_buffer_t *b);
void hj_buffer_destroy(hj_buffer_t *b);
/* NumPy .npy files (format 1.0/2.0/3.0, C order, little-endian; bf16 as 'V2'). */
hj_status hj_buffer_read_npy(hj_ctx_t *ctx, const char *path, hj_buffer_t **out);
hj_status hj_buffer_write_npy(const hj_buffer_t *b, const char *path);

/* ---- CUDA: PTX without a device ------------------------------------------------------------
   The PTX of every kernel |m| compiles to on the CUDA backend, for |arch| ("sm_80", the
   portable baseline; "sm_90a" for compute capability 9.0; NULL: sm_80), made without a
   driver or a GPU (NVPTX through LLVM; nothing is loaded or run). *ptx is NUL-terminated
   text, released with free(); "" when every op runs in the evaluator. HJ_ERR_UNSUPPORTED
   when the CUDA backend is not part of this build. `hlojit ptx` prints it. */
hj_status hj_module_to_ptx(hj_ctx_t *ctx, hj_module_t *m, const char *arch, char **ptx);

#ifdef __cplusplus
}
#endif
#endif /* HLOJIT_H */

#ifdef HLOJIT_IMPLEMENTATION
#ifndef HLOJIT_IMPLEMENTATION_DONE
#define HLOJIT_IMPLEMENTATION_DONE
#include "hlojit_impl/all.c"
#endif
#endif
