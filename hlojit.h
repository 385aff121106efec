/* hlojit.h — an embeddable tracing JIT for tensor programs, in C11.   MIT licence (see LICENSE).

   CONTENTS
      1  What it is                      here
      2  Example                         here
      3  Build options                   here
      4  Conventions and errors          here
      5  Threads                         here
      6  Backends: what runs where       here
      7  Code cache                      here
      8  What a compile costs            here
      9  Environment variables           here
     10  Contexts and graphs             with the declarations, below
     11  Ops, by family                  (elementwise, shape, indexing, reductions,
                                          dot, control flow, composites, linear layers)
     12  HLO modules                     (XLA's text; the pass pipeline)
     13  Compiling and running           (executables, their statistics)
     14  Buffers                         (.npy, zero-copy: wrapped, mapped, views)
     15  Donation                        (outputs that alias inputs)
     16  Names and bound inputs
     17  The tracing JIT and dynamic shapes
     18  Profiles
     19  PTX without a device
   Each of 10-19 is a "==== N ..." heading in the declarations below.

   1  WHAT IT IS
   A C program builds a tensor graph by calling ops (hj_matmul, hj_add, hj_softmax, ...).
   hlojit records the graph as an HLO module (XLA's IR; modules that JAX or XLA dumped in
   XLA's text format can be read, printed and run too), optimises and fuses it with HLO
   passes, compiles one kernel per fusion with LLVM (for the host CPU, or PTX for NVIDIA
   GPUs) and runs it on buffers. The tracing JIT (hj_jit_*) traces a C function on call,
   with shape buckets for dynamic dims, and keeps compiled code in memory and on disk. The
   reference evaluator (HJ_BACKEND_INTERP) runs any module with XLA's semantics in plain
   loops: it is the oracle the compiled backends are tested against.

   2  EXAMPLE (a two-layer MLP; error checks shortened to one)
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

   3  BUILD OPTIONS
   - After `make install PREFIX=...`: `cc prog.c $(pkg-config --cflags --libs hlojit)`
     (hlojit.pc's Libs carry LLVM's flags), or
   - link build/libhlojit.a or build/libhlojit.so (made by `make`) with
     `$(llvm-config-19 --ldflags --libs) -lm -lpthread -ldl`, or
   - define HLOJIT_IMPLEMENTATION in exactly one .c file before `#include "hlojit.h"`:
     the whole implementation, CPU and CUDA backends included, is then compiled into that
     translation unit. Compile it with -std=gnu11, -I pointing at the directory holding
     hlojit.h and hlojit_impl/ (and backends/ beside them), and
     -I$(llvm-config-19 --includedir); link with $(llvm-config-19 --ldflags --libs)
     -lm -lpthread -ldl. Add -DHLOJIT_NO_LLVM for the evaluator-only build (no LLVM headers
     or library; HJ_BACKEND_AUTO then runs modules on the reference evaluator and
     HJ_BACKEND_CPU fails, saying so).
   Every way needs the headers <stb/stb_ds.h> and <xxhash.h> (Debian libstb-dev,
   libxxhash-dev; header-only, nothing more to link). Nothing of CUDA is needed to build or
   to run: the driver and cuBLAS are opened with dlopen when a context first uses the CUDA
   backend.

   4  CONVENTIONS AND ERRORS
   - Every fallible call returns hj_status (HJ_OK == 0); the message is in hj_ctx_error(ctx)
     (per thread: section 5). Nothing in the library aborts or exits on bad input.
   - Ops on a graph never fail loudly: a bad op (shape mismatch, wrong dtype, bad handle)
     returns a poisoned tensor and records the first error with the op's name and shapes;
     hj_graph_status() and hj_compile() report it. An op given no way to tell its graph
     (every tensor argument HJ_NONE and no graph argument, hj_concat with n <= 0) returns
     HJ_NONE and records nothing; the op or hj_graph_output that receives it reports it.
   - Create functions set *out = NULL first and leave nothing allocated on failure.
   - Arrays are dense and row-major (C order). pred is one byte (0 or 1); f16 and bf16 are
     their 16-bit patterns (uint16_t). In .npy files bf16 is numpy's `V2` (two raw bytes,
     the bfloat16 bit pattern: `arr.view(ml_dtypes.bfloat16)`), read back from `V2` or from
     ml_dtypes' `<V2`.
   - Tuple-shaped entry parameters and results are passed flattened: one buffer per leaf,
     in order (depth first).
   - Binary ops broadcast NumPy-style (shapes aligned from the right, size-1 dims stretch).
   - Memory: the context's allocator (hj_allocator_t, section 10) serves graphs, modules,
     buffers, executables and the evaluator; what does not go through it says so there.

   5  THREADS
   - A context may be used by several threads at once: compiles, runs, JIT calls, buffers.
     Runs of one executable take turns (they share its arena); runs of different executables
     may overlap (on the CPU they share the context's thread pool, one parallel job at a
     time); a JIT's calls take turns. A graph, a buffer being written and an executable
     being destroyed belong to one thread at a time.
   - hj_ctx_error is per thread: a call failing on one thread does not change the message
     another thread reads (for the first 64 threads that use the context; any more share
     one message).
   - tests/unit/test_threads.c checks this (also under ThreadSanitizer: make test-threads).

   6  BACKENDS: WHAT RUNS WHERE
   HJ_BACKEND_AUTO (the default) takes the first backend built in that compiles the module,
   in the order CUDA, CPU, evaluator; each one skipped says why in hj_exec_stats().note.
   - CUDA (HJ_BACKEND_CUDA): PTX through LLVM's NVPTX backend, loaded with the driver API;
     the same fusions as on the CPU with GPU thread mappings, a shared-memory tiled matmul
     (a skinny one for at most 8 rows: decode) and cuBLAS, chosen per shape; buffers in
     managed memory (host-readable after a run, no copy call); runs replayed as CUDA graphs.
     Without a driver or a device it fails at context use with "no CUDA device: ...", and
     AUTO moves on. hj_module_to_ptx (section 19) makes the PTX without either. Checked
     without a GPU (every kernel through ptxas, a test double of the driver, an emulator of
     the GPU thread model); `make test-gpu` and tools/gpu_check.sh are the checks on one.
   - CPU (HJ_BACKEND_CPU): LLVM ORC for the host's vector units, kernels run on a thread
     pool of the context's threads. Emitters: loop, reduction (with softmax and layer-norm
     row normalisation), transpose, in-place dynamic-update-slice, and matmul (f32, and f32
     x bf16 with the weights widened as they are read; weights in its panel order read in
     place: HJ_LINEAR_PANELS). Convolutions without groups (f32/bf16/f16) become a patch
     matrix and one matmul (im2col), the others, pools and max-pool gradients run in
     elemental kernels (loop fusions); the same on the GPU.
   - On both compiled backends a fusion no emitter takes (sort, topk, scatter, dots
     other than f32 and f32 x bf16 -> f32) runs on the evaluator inside the compiled
     program; hj_exec_stats().evaluator_fallbacks counts them.
   - The evaluator (HJ_BACKEND_INTERP) runs every module hlojit can parse or build.
   A module with bounded dynamic dims (HJ_DYN, `f32[<=64,768]`) compiled with hj_compile
   runs at its bounds (get-dimension-size reads the bound); hj_jit_call (section 17) runs it
   at any real size.

   7  CODE CACHE
   The compiled backends keep what they compiled, keyed by the emitted LLVM IR (names made
   canonical) with the LLVM version and the target:
   - in the context: a module compiled again in the same context (also after its first
     executable was destroyed) reuses the machine code (CUDA: the PTX); the HLO passes and
     the LLVM IR emission run again, the LLVM optimisation and code generation do not;
   - on disk, for the next process: the CPU's machine code as relocatable objects loaded into
     the JIT (the key adds the target triple, CPU name and features), the CUDA backend's PTX
     (the key adds the GPU arch, PTX ISA and the libdevice file; a hit skips libdevice, O3
     and NVPTX; the driver's own cache, ~/.nv/ComputeCache, keeps the SASS). PTX the driver
     refuses is never stored, and a stored PTX it refuses is deleted and compiled again.
   hj_exec_stats().code_source says where the code came from (HJ_CODE_COMPILED, _MEMORY,
   _DISK). Directory: hj_ctx_options.cache_dir, else $HLOJIT_CACHE_DIR, else
   $XDG_CACHE_HOME/hlojit, else ~/.cache/hlojit; "off" disables it. $HLOJIT_CACHE_MAX_MB
   bounds it (default 1024; least recently used entries go first). Writes are atomic (a
   temporary file renamed), so processes may share a directory; a truncated, corrupt,
   foreign or mismatched entry is a miss: compiled again and rewritten, never loaded.

   8  WHAT A COMPILE COSTS (CPU backend; hj_exec_stats splits it, `hlojit opt --stats` and
   `hlojit run --stats` print it)
   - HLO passes, buffer assignment, thunks (passes_ms, per pass in pass_times): near-linear
     in the number of instructions, tens of ms for a 12-layer GPT-2, a few hundred for 48
     layers or a 50,000-instruction chain. Debug builds (the Makefile's default, no NDEBUG)
     verify the module after every pass that changed it: about a third of that.
   - LLVM: emission (emit_ms), the optimisation pipeline (optimize_ms) and code generation
     (codegen_ms) are paid once per DISTINCT kernel (kernels_distinct), not per fusion:
     fusions that are structurally identical (same ops, shapes, layouts, attributes and
     constants, whatever their names) share one kernel, launched with each one's buffers.
     A kernel costs 20-60 ms of LLVM time, a big one (the transpose kernel of the attention
     head split) several hundred. A GPT-2 124M prefill compiles about 23 distinct kernels
     whether it has 1, 12 or 48 layers (174 launches at 12): about 1 s cold on 2 cores,
     the 48-layer one about 1.2x that.
   - The kernels are spread over one LLVM module per thread of the context
     (hj_ctx_options.num_threads; llvm_modules says how many) and compiled in parallel.
   What makes it cheaper:
   - compile once, run many times: keep the hj_exec_t (a second compile of the same module
     pays the passes and the emission again: section 7);
   - repeat structure: values that differ between otherwise identical layers (a layer
     index, per-layer scales) belong in parameters, not in constants — a constant's bytes
     are part of a kernel's identity, so one per layer means one kernel per layer;
   - few distinct shapes: every shape is its own kernel;
   - num_threads = 0 (every core) for the compile's parallel LLVM work;
   - fusion on (no_fusion compiles one kernel per op).
   The cost is dominated by a few big kernels: on GPT-2 the attention head-split transpose
   kernel alone is about a third of the LLVM time (its IR is ~3,500 instructions of
   unrolled in-register transposes). O3 stays the pipeline: O2 buys no compile time over
   O3; O1 costs the GPT-2 prefill 12% of run time, O1 for the kernels that are not matmuls
   2.5-4% while saving 12-18% of the LLVM time.

   9  ENVIRONMENT VARIABLES (each also has an option or a default that needs none)
     HLOJIT_DUMP_TO=DIR        every stage as text: HLO before and after each pass, the
                               buffer assignment, thunks, LLVM IR, PTX (dump_dir option)
     HLOJIT_CACHE_DIR, HLOJIT_CACHE_MAX_MB, XDG_CACHE_HOME     section 7
     HLOJIT_PROFILE=1          time every thunk; print the report when an executable that
                               ran is destroyed (section 18; profile option)
     HLOJIT_LOG=1              one line on stderr per JIT miss (section 17)
     HLOJIT_LLVM_PIPELINE, HLOJIT_LLVM_PIPELINE_LIGHT   replace the LLVM pipeline
                               ("default<O3>"), of all kernels / of those that are not
                               matmuls: for experiments
     HLOJIT_FUSION_ROW_NORM=0  no softmax/layer-norm row normalisation in fusion
     HLOJIT_CUDA_DEVICE=N      the device ordinal (default 0)
     HLOJIT_CUDA_GRAPHS=0      plain launches instead of CUDA graphs
     HLOJIT_CUDA_GEMM=measure|rule|tiled|cublas   how a GPU matmul's kernel is chosen
                               (default measure: both timed on first use);
                               HLOJIT_CUDA_GEMM_LOG=1 prints each choice
     HLOJIT_CUDA_TF32=1        cuBLAS may use TF32
     HLOJIT_LIBCUDA, HLOJIT_LIBCUBLAS, HLOJIT_LIBDEVICE, HLOJIT_PTXAS, CUDA_HOME
                               where the CUDA libraries, libdevice and ptxas are found
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

/* ==== 10 CONTEXTS AND GRAPHS ============================================================== */
typedef enum hj_status {
  HJ_OK = 0,
  HJ_ERR_INVALID_ARG,   /* NULL, bad handle, out-of-range argument */
  HJ_ERR_SHAPE,         /* shapes or dtypes do not fit the op */
  HJ_ERR_PARSE,         /* HLO text or .npy that cannot be read */
  HJ_ERR_UNSUPPORTED,   /* valid input hlojit cannot honour */
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

/* Allocator used for the context, graphs, module arenas (every instruction, shape,
   attribute and constant), buffers, executables and their arenas, and the reference
   evaluator's frames, scratch and values (which also serve constant folding and the
   evaluator fallback inside compiled programs). |align| is a power of two. A NULL from
   |alloc| is handled: the call in progress fails with HJ_ERR_OOM and a message, and every
   block taken is given back (tests/unit/test_api_faults.c fails each allocation in turn).
   Keep the allocator valid until everything made with the context is destroyed.
   Not through it (they use malloc/realloc/free):
   - stb_ds containers (instruction and computation lists, graph handle tables, hash maps,
     string builders): stb_ds passes its allocator hook a NULL context and has no failure
     path (arrput writes through the new pointer), so an allocator that may fail would
     turn OOM into a crash;
   - LLVM (contexts, modules, the ORC JIT, machine code): LLVM-C takes no allocator;
   - scratch arrays of the passes, the verifier, cloning, the compile driver, buffer
     assignment and thunk runs, the emitters' plans, the backends' own state (the CPU
     backend's JIT and thread pool, each backend's executable struct), the copy of a
     graph's module, hj_exec_run's pointer arrays, .npy headers and hj_module_print's text
     (freed with free() by contract): each is checked and fails with HJ_ERR_OOM; they
     are made where no context is at hand.
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
  int num_threads;          /* 0: all cores (those of the process's CPU affinity mask:
                               taskset, a container's cpuset). Idle workers spin up to
                               0.2 ms after a job before sleeping (not when num_threads >
                               cores); a thread waiting for a core does not hold up a
                               kernel, the others run its share (same results) */
  hj_allocator_t allocator; /* all NULL: malloc/free */
  const char *dump_dir;     /* NULL: $HLOJIT_DUMP_TO, if set */
  bool no_fusion;           /* compiled backends: skip the fusion passes (one kernel per op);
                               for measuring what fusion buys */
  const char *cache_dir;    /* the disk cache of compiled code: NULL: $HLOJIT_CACHE_DIR, else
                               $XDG_CACHE_HOME/hlojit, else ~/.cache/hlojit; "off": none
                               (HLOJIT_CACHE_MAX_MB bounds it, default 1024) */
  bool profile;             /* time every thunk of every run (hj_exec_profile); default:
                               $HLOJIT_PROFILE is set and not "0" */
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

/* ---- the context ---- */
void hj_ctx_options_init(hj_ctx_options_t *opt);
hj_status hj_ctx_create(const hj_ctx_options_t *opt, hj_ctx_t **out); /* opt may be NULL */
void hj_ctx_destroy(hj_ctx_t *ctx);
const char *hj_ctx_error(const hj_ctx_t *ctx); /* last error message; "" if none */
void hj_ctx_clear_error(hj_ctx_t *ctx);
const char *hj_status_name(hj_status s);
const char *hj_dtype_name(hj_dtype_t t);        /* "f32", ...; NULL if out of range */
size_t hj_dtype_size(hj_dtype_t t);             /* bytes per element; 0 if out of range */
/* Product of |dims| (bounds for dynamic); -1 when it does not fit in int64_t or a dim is
   INT64_MIN, 0 for an invalid rank. Graphs take shapes of at most 2^53 elements. */
int64_t hj_shape_numel(hj_shape_t s);

/* ---- graphs ---- */
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

/* ==== 11 OPS, BY FAMILY =================================================================== */
/* ---- leaves and constants ---- */
hj_tensor_t hj_param(hj_graph_t *g, hj_dtype_t t, hj_shape_t s, const char *name);
/* A tuple-shaped parameter (for while bodies): |n| element types and shapes. */
hj_tensor_t hj_param_tuple(hj_graph_t *g, const hj_dtype_t *types, const hj_shape_t *shapes,
                           int n, const char *name);
hj_tensor_t hj_constant(hj_graph_t *g, hj_dtype_t t, hj_shape_t s, const void *data); /* copied */
hj_tensor_t hj_scalar(hj_graph_t *g, hj_dtype_t t, double v);
hj_tensor_t hj_full(hj_graph_t *g, hj_dtype_t t, hj_shape_t s, double v);
hj_tensor_t hj_iota(hj_graph_t *g, hj_dtype_t t, hj_shape_t s, int dim);

/* ---- elementwise, unary ---- */
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

/* ---- elementwise, binary (NumPy broadcasting; both operands must have the same dtype) ---- */
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
/* ---- elementwise, ternary (NumPy broadcasting of all three) ---- */
hj_tensor_t hj_select(hj_tensor_t pred, hj_tensor_t on_true, hj_tensor_t on_false);
hj_tensor_t hj_clamp(hj_tensor_t lo, hj_tensor_t x, hj_tensor_t hi);  /* XLA's operand order */

hj_tensor_t hj_convert(hj_tensor_t x, hj_dtype_t t);          /* value conversion */
hj_tensor_t hj_bitcast_convert(hj_tensor_t x, hj_dtype_t t);  /* same-size reinterpretation */
hj_tensor_t hj_copy(hj_tensor_t x);
/* XLA's reduce-precision: |x| (float) rounded to |mantissa_bits| (0..64) mantissa bits, half
   to even, then to the range of |exponent_bits| (1..64) exponent bits: overflow to signed
   infinity, underflow (subnormals too) to signed zero; the result keeps x's dtype. (8, 7)
   rounds f32 as bf16 would, (5, 10) as f16 (but without f16's subnormals). */
hj_tensor_t hj_reduce_precision(hj_tensor_t x, int exponent_bits, int mantissa_bits);

/* ---- shape and indexing (arrays of dims have |n| entries) ---- */
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
/* A tuple of |n| slices of |x| along |axis|; |sizes| sums to x's size there. Take it apart
   with hj_unpack (or hj_get_tuple_element): see "multi-result ops" below. */
hj_tensor_t hj_split(hj_tensor_t x, int axis, const int64_t *sizes, int n);
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

/* ---- reductions, scatter, sort (reducers for hj_reduce, hj_scatter, hj_reduce_window,
   hj_cumulative) ---- */
typedef enum hj_reducer { HJ_RED_SUM = 0, HJ_RED_PROD, HJ_RED_MAX, HJ_RED_MIN, HJ_RED_AND,
                          HJ_RED_OR, HJ_RED_REPLACE, HJ_RED_COUNT } hj_reducer_t;
/* Reduces |dims| away with the reducer's identity as init (REPLACE is not a reducer). */
hj_tensor_t hj_reduce(hj_tensor_t x, hj_reducer_t r, const int64_t *dims, int n);
hj_tensor_t hj_scatter(hj_tensor_t operand, hj_tensor_t indices, hj_tensor_t updates,
                       const hj_scatter_dims_t *d, hj_reducer_t combine);
/* XLA's topk: the |k| largest (|largest|) or smallest elements of the last dim and their
   s32 indices, as a tuple (values (..., k), indices (..., k)): hj_unpack it. Ordered by
   XLA's total order (NaN above +inf, +0 above -0), ties by the lower index. */
hj_tensor_t hj_topk(hj_tensor_t x, int64_t k, bool largest);
/* Sorts along |dim|; ascending unless |descending|. NaNs sort last (total order). */
hj_tensor_t hj_sort(hj_tensor_t x, int dim, bool descending);

typedef struct hj_dot_dims {
  const int64_t *lhs_batch;      int n_lhs_batch;
  const int64_t *rhs_batch;      int n_rhs_batch;
  const int64_t *lhs_contracting; int n_lhs_contracting;
  const int64_t *rhs_contracting; int n_rhs_contracting;
} hj_dot_dims_t;
/* XLA's DotGeneral. The result's dims, in this order (XLA's rule): the batch dims (in
   lhs_batch order), then a's remaining dims (in a's order), then b's remaining dims (in b's
   order). E.g. a (B, T, C), b (C, N), contracting a's 2 with b's 0, no batch: (B, T, N).
   Operand dtypes: the same, or floats of different widths (XLA's mixed-precision dot), whose
   result is the wider type: f32 activations x bf16 weights -> f32. The CPU backend runs an
   f32 x bf16 matmul (also through hj_matmul and hj_linear) in its kernels, widening the
   bf16 operand as it reads it, so the result has the bits of the f32 dot of the widened
   operand at half the weight bytes. Other float dots (bf16 x bf16, f16) run as an f32 dot
   rounded once to the result type (XLA:CPU's rule); f64, integer (wrapping, as XLA's) and
   pred dots as loop kernels. */
hj_tensor_t hj_dot_general(hj_tensor_t a, hj_tensor_t b, const hj_dot_dims_t *d);

/* ---- tuples and control flow ----
   With sub-graphs (hj_graph_create_sub) as computations.
   Multi-result ops: every op with several results (hj_split, hj_while, hj_conditional,
   hj_call of a sub-graph with several outputs, hj_reduce_with and hj_sort_with of several
   operands) returns ONE tensor, a tuple; hj_get_tuple_element takes one element and
   hj_unpack all of them. The tuple costs nothing: the compiler removes it. */
hj_tensor_t hj_tuple(hj_graph_t *g, const hj_tensor_t *xs, int n);
hj_tensor_t hj_get_tuple_element(hj_tensor_t t, int index);
/* out[i] = element i of tuple |t|, for the |n| elements it has (another count is an error
   recorded in the graph: HJ_ERR_SHAPE); a poisoned |t| gives poisoned tensors and the
   graph's status. */
hj_status hj_unpack(hj_tensor_t t, hj_tensor_t *out, int n);
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

/* ---- windows, running reductions, dynamic sizes ----
   hj_dim_size: the real size of dim |dim| of |x| as an s32 scalar (a constant for a static
   dim; XLA's get-dimension-size for a bounded one: section 17).
   hj_reduce_window: XLA's reduce-window with |r|'s identity as init; |window| per dim,
   |strides| (NULL: 1) and |pad_lo|, |pad_hi| (NULL: 0) per dim.
   hj_cumulative: the inclusive running reduction along |axis| (r = HJ_RED_SUM: cumsum,
   HJ_RED_MAX: running max, ...), from the end when |reverse|. */
hj_tensor_t hj_dim_size(hj_tensor_t x, int dim);
hj_tensor_t hj_reduce_window(hj_tensor_t x, hj_reducer_t r, const int64_t *window,
                             const int64_t *strides, const int64_t *pad_lo, const int64_t *pad_hi);
hj_tensor_t hj_cumulative(hj_tensor_t x, hj_reducer_t r, int axis, bool reverse);

/* ---- random numbers ----
   XLA's counter-based generators, stateless: the state is a u64[2] tensor (a key and a
   counter; philox also takes a u64[3]: key, counter low, counter high); every call returns
   the tuple (new state, values) — hj_unpack it, and pass the new state to the next draw.
   hj_rng_bits: |shape| of random bits of integer type |t|, XLA's rng-bit-generator bit for
   bit (jax.lax.rng_bit_generator; HJ_RNG_DEFAULT is philox, as XLA:CPU). hj_rng_uniform:
   f32 in [0, 1), 23 random mantissa bits each (XLA's and JAX's construction). */
typedef enum hj_rng_algorithm { HJ_RNG_DEFAULT = 0, HJ_RNG_THREE_FRY, HJ_RNG_PHILOX } hj_rng_algorithm_t;
hj_tensor_t hj_rng_bits(hj_tensor_t state, hj_rng_algorithm_t alg, hj_dtype_t t, hj_shape_t shape);
hj_tensor_t hj_rng_uniform(hj_tensor_t state, hj_rng_algorithm_t alg, hj_shape_t shape);

/* ---- linear algebra ----
   LAPACK's routines as jax.numpy.linalg calls them (custom-calls to jaxlib's CPU LAPACK
   targets, run by LAPACK through OpenBLAS, found at run time: a module that needs it and a
   machine without it fail at run time with a message). Matrices are the last two dims, any
   dims before a batch; f32 or f64.
   hj_cholesky: the factor L (L L^T = a; |lower|) or U (U^T U = a) of a symmetric positive
   definite |a| (only its |lower| / upper triangle is read), the other triangle zero; NaN
   in the triangle of a matrix that is not positive definite (JAX's rule).
   hj_triangular_solve: x with op(a) x = b (|left_side|) or x op(a) = b, a triangular
   (|lower| or upper triangle read; ones assumed on the diagonal when |unit_diagonal|),
   op(a) = a^T when |transpose_a|. A solve with a symmetric positive definite a:
   l = hj_cholesky(a, true); y = hj_triangular_solve(l, b, true, true, false, false);
   x = hj_triangular_solve(l, y, true, true, true, false). */
hj_tensor_t hj_cholesky(hj_tensor_t a, bool lower);
hj_tensor_t hj_triangular_solve(hj_tensor_t a, hj_tensor_t b, bool left_side, bool lower,
                                bool transpose_a, bool unit_diagonal);

/* ---- convolution and pooling ----
   hj_conv_general: XLA's convolution with every field. Which dim of x (the input), w (the
   kernel) and the result plays which role: in_batch / in_feature / in_spatial[i] of x,
   k_in / k_out / k_spatial[i] of w, out_batch / out_feature / out_spatial[i] of the result
   (n_spatial spatial dims, 0 to 6; window dim i slides over spatial dim i of all three).
   Per spatial dim: stride, pad_lo / pad_hi (may be negative), lhs_dilation (holes between
   input elements: a transposed convolution), rhs_dilation (atrous), reversal (the kernel
   read backwards); a 0 stride or dilation means 1. feature_group_count G: x's features are
   G groups of w's input features, w's output features G groups of outputs (depthwise: G =
   input features); batch_group_count B: the batch splits into B groups across the output
   features (weight gradients of grouped convolutions); 0 means 1, at most one above 1. The
   result's batch is x's / B, its features w's output features, its spatial sizes
   floor((padded dilated input - dilated window) / stride) + 1. x and w: the same dtype, or
   floats of different widths (the result is the wider). f16/bf16 accumulate in f32; the CPU
   and CUDA backends run f32/bf16/f16 convolutions without groups on the packed matmul
   (im2col), the rest (groups, integers, f64) in elemental kernels; nothing falls back to
   the evaluator. Zero-initialise the struct and set what you need.
   hj_conv: the layer. HJ_NHWC: x (N, spatial..., C), w (spatial..., C/groups, O), result
   (N, spatial..., O); HJ_NCHW: x (N, C, spatial...), w (O, C/groups, spatial...), result
   (N, O, spatial...). |opts| NULL: stride 1, "valid", no dilation, groups 1, no bias.
   Padding HJ_PAD_SAME gives ceil(in / stride) outputs (XLA's and TensorFlow's split: the
   odd element at the end), HJ_PAD_EXPLICIT takes pad_lo / pad_hi. bias: a vector of the
   output features of the result's dtype, or HJ_NONE (a zeroed tensor counts as none).
   hj_conv_transpose: the transposed convolution of jax.lax.conv_transpose (kernel not
   flipped): the input dilated by the stride; "same" gives in * stride outputs, "valid"
   (in - 1) * stride + max(dilated window, stride); explicit pads apply to the dilated input.
   hj_max_pool, hj_avg_pool: reduce-window over the spatial dims of an NHWC or NCHW x;
   |window| per spatial dim (required), stride NULL: the window; avg divides by the window
   size, or with exclude_pad by the taps inside the input. Gradients of all of these are
   XLA's convolution and select-and-scatter, which hlojit runs too (HLO text from jax.grad). */
typedef enum hj_conv_layout { HJ_NHWC = 0, HJ_NCHW } hj_conv_layout_t;
typedef enum hj_pad_mode { HJ_PAD_VALID = 0, HJ_PAD_SAME, HJ_PAD_EXPLICIT } hj_pad_mode_t;
typedef struct hj_conv_general {
  int n_spatial;
  int64_t in_batch, in_feature, in_spatial[HJ_MAX_RANK - 2];
  int64_t k_in, k_out, k_spatial[HJ_MAX_RANK - 2];
  int64_t out_batch, out_feature, out_spatial[HJ_MAX_RANK - 2];
  int64_t stride[HJ_MAX_RANK - 2], pad_lo[HJ_MAX_RANK - 2], pad_hi[HJ_MAX_RANK - 2];
  int64_t lhs_dilation[HJ_MAX_RANK - 2], rhs_dilation[HJ_MAX_RANK - 2];
  bool reversal[HJ_MAX_RANK - 2];
  int64_t feature_group_count, batch_group_count;
} hj_conv_general_t;
typedef struct hj_conv_opts {
  hj_conv_layout_t layout;
  const int64_t *stride, *dilation;        /* per spatial dim; NULL: 1 */
  hj_pad_mode_t padding;
  const int64_t *pad_lo, *pad_hi;          /* HJ_PAD_EXPLICIT */
  int64_t groups;                          /* 0: 1 */
  hj_tensor_t bias;
} hj_conv_opts_t;
typedef struct hj_pool_opts {
  hj_conv_layout_t layout;
  const int64_t *window, *stride;          /* per spatial dim; stride NULL: the window */
  hj_pad_mode_t padding;
  const int64_t *pad_lo, *pad_hi;          /* HJ_PAD_EXPLICIT */
  bool exclude_pad;                        /* hj_avg_pool: count only the taps inside x */
} hj_pool_opts_t;
hj_tensor_t hj_conv_general(hj_tensor_t x, hj_tensor_t w, const hj_conv_general_t *p);
hj_tensor_t hj_conv(hj_tensor_t x, hj_tensor_t w, const hj_conv_opts_t *opts);
hj_tensor_t hj_conv_transpose(hj_tensor_t x, hj_tensor_t w, const hj_conv_opts_t *opts);
hj_tensor_t hj_max_pool(hj_tensor_t x, const hj_pool_opts_t *opts);
hj_tensor_t hj_avg_pool(hj_tensor_t x, const hj_pool_opts_t *opts);

/* ---- composites (built from the ops above) ---- */
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
/* A linear layer: x (..., in) times the weights, plus the bias |b| (out) unless it is
   HJ_NONE -> (..., out). The weights as checkpoints store them: HJ_LINEAR_IN_OUT, w (in,
   out), y = x @ w (JAX, Hugging Face GPT-2's Conv1D); HJ_LINEAR_OUT_IN, w (out, in),
   y = x @ w^T (PyTorch nn.Linear, llm.c). Neither layout is transposed at run time. w may
   be bf16 with an f32 x (a mixed-precision dot, hj_dot_general): weights kept in bf16.
   HJ_LINEAR_PANELS: w (in/kc, out/nr, kc, nr), f32 or bf16 (x f32): the (in, out) matrix
   cut into kc x nr blocks, each row-major, block (p, q) holding rows p*kc.. and columns q*nr.. -- the order
   in which the CPU backend's matmul micro-kernel reads its weights, so it reads them in
   place instead of repacking them on every run (GPT-2 124M, a prefill of 64 tokens: the
   packing was 17-20% of it; bf16 panels are widened as the kernels load them).
   hj_linear_panels gives kc and nr for a backend and a shape; hj_linear_pack (f32) and
   hj_linear_pack_bf16 write a matrix of either other layout in that order. Where the backend
   has no panel order or another nr (CUDA, another CPU), the dot is still right but
   transposes w on every run. */
typedef enum hj_linear_layout { HJ_LINEAR_IN_OUT = 0, HJ_LINEAR_OUT_IN, HJ_LINEAR_PANELS,
                                HJ_LINEAR_LAYOUT_COUNT } hj_linear_layout_t;
hj_tensor_t hj_linear(hj_tensor_t x, hj_tensor_t w, hj_tensor_t b, hj_linear_layout_t layout);
/* The panel order (HJ_LINEAR_PANELS) of |backend| (HJ_BACKEND_CPU; AUTO: the CPU's too)
   for an (in, out) weight: *nr its micro-kernel's width (48 floats with AVX-512, 16 with
   AVX2), *kc a divisor of |in| near its preferred K step. HJ_ERR_UNSUPPORTED, with the
   reason, when the backend has none or |out| is not a multiple of nr. */
hj_status hj_linear_panels(hj_ctx_t *ctx, hj_backend_t backend, int64_t in, int64_t out,
                           int64_t *kc, int64_t *nr);
/* Writes |w| (in, out) for HJ_LINEAR_IN_OUT, (out, in) for HJ_LINEAR_OUT_IN, f32 row-major)
   into |dst| (in * out floats, not overlapping |w|) in the panel order of |kc| and |nr|,
   which must divide |in| and |out|. */
hj_status hj_linear_pack(hj_ctx_t *ctx, const float *w, hj_linear_layout_t layout, int64_t in,
                         int64_t out, int64_t kc, int64_t nr, float *dst);
/* hj_linear_pack for bf16 weights (their 16-bit patterns): the same order, the bits moved
   as they are. */
hj_status hj_linear_pack_bf16(hj_ctx_t *ctx, const uint16_t *w, hj_linear_layout_t layout, int64_t in,
                              int64_t out, int64_t kc, int64_t nr, uint16_t *dst);

/* ==== 12 HLO MODULES: XLA'S TEXT AND THE PASS PIPELINE ==================================== */
/* Time spent in one HLO pass during a compile or hj_module_optimize_timed (summed over its
   runs: the simplification passes run several rounds). */
typedef struct hj_pass_time {
  const char *name;           /* "sibling-fusion", ... (static storage) */
  double ms;
  int runs;
} hj_pass_time_t;

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
/* hj_module_optimize that also says where the time went: the first |cap| passes (by name,
   summed over their runs, pipeline order) into |times|, their number into *n (it may
   exceed |cap|). |times| may be NULL when |cap| is 0; |n| may be NULL. */
hj_status hj_module_optimize_timed(hj_module_t *m, hj_pass_time_t *times, int cap, int *n);

/* ==== 13 COMPILING AND RUNNING ============================================================ */
/* The executable keeps its own copy of the graph's module. */
hj_status hj_compile(hj_graph_t *g, hj_exec_t **out);
/* The executable borrows |m|: keep it alive until hj_exec_destroy. */
hj_status hj_compile_module(hj_ctx_t *ctx, hj_module_t *m, hj_exec_t **out);
/* Runs with |nin| input buffers (flattened entry parameters, in order). Each out[i] that is
   NULL receives a new buffer (the caller destroys it); a non-NULL one must have the output's
   dtype and shape and is overwritten. With inputs bound (hj_exec_bind), |in| holds only the
   unbound ones; an output that aliases an input (donation) follows the rules of "donation"
   below. */
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
  int kernels_sort, kernels_scatter;   /* sorting networks (topk too); scatters */
  int kernels_scan;           /* prefix scans (cumsum, cummax): a running fold per row */
  int inplace_updates;        /* outputs the dus kernels write in place: a dynamic-update-slice
                                 of a donated or dying buffer writes only its update (a
                                 decode step: 2 per layer, the k and v caches) */
  int evaluator_fallbacks;    /* fusions the evaluator runs: runtime_ops + unsupported */
  int runtime_ops;            /* of which ops no emitter takes by design (0 on the CPU and
                                 CUDA backends: while, conditional and call run as thunks) */
  int library_calls;          /* custom-calls a library runs on the host (LAPACK): not
                                 fallbacks, XLA:CPU calls the same routines */
  int emit_errors;            /* of which an emitter failed with something else than
                                 HJ_ERR_UNSUPPORTED (a bug: the message is in the thunk dump) */
  int copies;                 /* copy thunks (outputs that are parameters, constants, twice) */
  int64_t arena_bytes;        /* peak scratch memory of the buffer plans, all computations */
  double compile_ms;          /* wall time of hj_compile / hj_compile_module, of which: */
  double passes_ms;           /*   clone, HLO passes, buffer assignment, thunks */
  double emit_ms;             /*   LLVM IR emission */
  double optimize_ms;         /*   the LLVM pipeline (O3), all modules (wall time: in
                                   parallel when there are several) */
  double codegen_ms;          /*   machine code (object files, in parallel), loading them
                                   into the JIT and resolving every kernel */
  const char *note;           /* AUTO: why each backend before the one used was skipped,
                                 then "; using the NAME backend"; "" otherwise */
  int64_t bytes_moved;        /* per run: bytes of the input and output buffers of every
                                 kernel, matmul, evaluator and copy thunk, each thunk once
                                 (while/conditional bodies once, not per iteration) */
  int code_source;            /* where the machine code (CUDA: the PTX) came from:
                                 HJ_CODE_COMPILED, _MEMORY (the same code was made in this
                                 context already), _DISK */
  /* where the compile time went */
  int kernels_distinct;       /* kernels emitted and compiled: fusions whose fused
                                 computations are structurally identical (hlo_fingerprint
                                 plus a full equality check) share one; the kernels_* counts
                                 above count launches, this counts code */
  int llvm_modules;           /* LLVM modules the kernels were split into (compiled in
                                 parallel on the context's threads) */
  double fingerprint_ms;      /* fingerprinting the optimised module (within passes_ms) and
                                 each fusion (within emit_ms) */
  const hj_pass_time_t *pass_times;  /* per pass (name, ms, runs), pipeline order; owned by
                                        the executable, valid until hj_exec_destroy */
  int npass_times;
} hj_exec_stats_t;
enum { HJ_CODE_COMPILED = 0, HJ_CODE_MEMORY = 1, HJ_CODE_DISK = 2 };
hj_status hj_exec_stats(const hj_exec_t *e, hj_exec_stats_t *out);

/* ==== 14 BUFFERS ========================================================================== */
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

/* ---- buffers without a copy ----
   Every buffer is reference counted: the create/wrap/map/view call returns one reference,
   hj_buffer_retain adds one, hj_buffer_destroy drops one; the storage goes with the last
   (for a wrapped buffer: |release| is called then, once). A buffer must outlive the runs it
   is passed to and the executables it is bound to (binding takes a reference itself).

   Alignment: the kernels load and store elements at their natural alignment (f32 at 4
   bytes, f64 at 8) and never assume more, so |data| must be a multiple of the element size;
   a multiple of 64 bytes (a cache line, an AVX-512 vector: what hj_buffer_create gives) is
   faster for the vector loops. Misaligned data, or fewer than |nbytes| = elements x element
   size bytes, is refused (HJ_ERR_INVALID_ARG, with a message). A read-only buffer (mapped,
   or wrapped with HJ_BUFFER_READ_ONLY) may be an input, never an output: hj_exec_run
   refuses it there (and as a donated input that would be written in place, see below).
   hj_buffer_host_ptr of a read-only buffer points at memory that faults when written. */
enum { HJ_BUFFER_READ_ONLY = 1 };
typedef void (*hj_release_fn)(void *user, void *data);
/* A buffer over the caller's |data| (|nbytes| bytes, at least what |t| and |s| need; not
   copied). |release| (may be NULL) is called with |user| and |data| when the last reference
   goes. |flags|: 0 or HJ_BUFFER_READ_ONLY. On failure |release| is not called. */
hj_status hj_buffer_wrap(hj_ctx_t *ctx, hj_dtype_t t, hj_shape_t s, void *data, size_t nbytes,
                         unsigned flags, hj_release_fn release, void *user, hj_buffer_t **out);
/* Maps bytes [offset, offset + elements x size) of the file at |path| read-only (mmap,
   MAP_PRIVATE): nothing is read until a kernel touches it, and pages come from the page
   cache (weights: no copy, shared between processes). |offset| must be a multiple of the
   element size; a file too short for the region is refused. The mapping lives until the
   last reference goes (the file may be closed or renamed meanwhile). */
hj_status hj_buffer_map_file(hj_ctx_t *ctx, const char *path, uint64_t offset, hj_dtype_t t,
                             hj_shape_t s, hj_buffer_t **out);
/* A buffer viewing bytes [offset, offset + elements x size) of |base| (no copy; read-only
   if |base| is). It holds a reference to |base|. For one mapped checkpoint file and one view
   per weight. */
hj_status hj_buffer_view(hj_buffer_t *base, size_t offset, hj_dtype_t t, hj_shape_t s,
                         hj_buffer_t **out);
hj_buffer_t *hj_buffer_retain(hj_buffer_t *b);   /* one more reference; returns |b| */
bool hj_buffer_is_read_only(const hj_buffer_t *b);

/* ==== 15 DONATION: OUTPUTS THAT ALIAS INPUTS (XLA'S input_output_alias) =================== */
/* An output declared to alias a parameter is written into that parameter's buffer: the
   caller donates the input, and after the run the buffer holds the output's value (JAX's
   donate_argnums). A dynamic-update-slice of a donated KV cache then writes only the
   updated rows (hj_exec_stats: inplace_updates counts it, and no copy thunk is made;
   updates of several caches from one row, as a decode step's k and v, are one kernel); an
   elementwise update (x = x + d) runs in place too. The module prints the pair in its
   header as XLA does: `input_output_alias={ {0}: (2, {}, may-alias) }`, and a module read
   from such text has the alias (whether may- or must-alias, hlojit treats it the same).

   Rules (each refused with a message otherwise): |output| is a flattened output leaf (the
   hj_graph_output order when every output is an array), |param| an array parameter of the
   top graph, both of the same byte size; an output aliases at most one parameter and a
   parameter at most one output. Where the graph still reads the parameter after the
   output is written (e.g. cache' = dus(cache, ..); y = f(cache)), the compiler computes the
   output elsewhere and copies it in at the end: correct, one copy (stats.copies).

   At run time, for an aliased pair (output k, input i) hj_exec_run accepts in out[k]:
   - in[i] itself (the fast path: the run updates it in place), or NULL: out[k] is then set
     to in[i] with one more reference (destroy both handles, or neither); where the pair
     differs in dtype or shape, to a view of in[i] with the output's (hj_buffer_view);
   - another writable buffer of the output's shape: in[i] is copied into it first (once)
     and the run updates that copy; in[i] is left as it was.
   A read-only in[i] with out[k] NULL gets a new output buffer (the copy path); a read-only
   in[i] passed as out[k] too is refused. If in[i]'s memory is also passed as another
   input, the run works on a temporary and copies the result into out[k] afterwards.
   Non-aliased outputs may share memory with nothing that the run reads or writes; if they
   do, the run computes them into temporaries and copies (correct, slower). */
/* Declares that output leaf |output| of top graph |g| aliases parameter |param|. */
hj_status hj_graph_alias(hj_graph_t *g, int output, hj_tensor_t param);
/* hj_graph_output(g, t) and hj_graph_alias(g, <that output>, param): t must be an array. */
hj_status hj_graph_output_aliased(hj_graph_t *g, hj_tensor_t t, hj_tensor_t param);
/* The input leaf that output leaf |output| aliases, -1 for none (or out of range). */
int hj_module_output_alias(const hj_module_t *m, int output);
int hj_exec_output_alias(const hj_exec_t *e, int output);

/* ==== 16 NAMES AND BOUND INPUTS =========================================================== */
/* Input order: the flattened leaves of the entry's parameters, in parameter order, i.e.
   the order of the hj_param / hj_param_tuple calls on the top graph (a tuple parameter
   expanded depth first). Output order: the flattened leaves of the outputs, in
   hj_graph_output order. Names: a graph input is named by its hj_param name (a tuple
   parameter's leaves "name{0}", "name{1,2}", ...; an unnamed one "in<k>"); an output by
   hj_graph_output_named ("out<k>" otherwise, tuple leaves "name{j}"). A module's inputs are
   named after its parameter instructions (tuple leaves "name{j}"), its outputs "out<k>".
   Names need not be unique; a look-up of a name that several carry fails. */
hj_status hj_graph_output_named(hj_graph_t *g, hj_tensor_t t, const char *name);
const char *hj_exec_input_name(const hj_exec_t *e, int i);    /* NULL out of range */
const char *hj_exec_output_name(const hj_exec_t *e, int i);
/* The index of the input (output) named |name|; -1 with a message in the context when no
   input or several have it. */
int hj_exec_find_input(const hj_exec_t *e, const char *name);
int hj_exec_find_output(const hj_exec_t *e, const char *name);
/* Binds |b| to input |i| (a reference is taken; the previous binding's is dropped); b NULL
   unbinds. Wrong dtype or shape: HJ_ERR_SHAPE, nothing changes. Not while a run of |e| is
   in progress.
   Calling convention once inputs are bound: hj_exec_run takes only the unbound inputs, in
   input order (nin == hj_exec_num_unbound_inputs(e)); passing all of them (a bound input
   also given) is an error. A bound input that an output aliases is updated in place by
   every run (a KV cache bound once); out[k] may be the bound buffer or NULL. */
hj_status hj_exec_bind(hj_exec_t *e, int i, hj_buffer_t *b);
hj_status hj_exec_bind_name(hj_exec_t *e, const char *name, hj_buffer_t *b);
int hj_exec_num_unbound_inputs(const hj_exec_t *e);
hj_buffer_t *hj_exec_bound(const hj_exec_t *e, int i);      /* NULL when unbound */

/* ==== 17 THE TRACING JIT AND DYNAMIC SHAPES =============================================== */
/* hj_jit_create wraps a C function that builds a graph, |build|(g, params, n, user): it
   receives a fresh graph and one tensor per declared parameter and builds the computation
   with the ops above, marking its results with hj_graph_output, exactly as for hj_compile.
   hj_jit_call runs it on buffers: the first call with a new signature traces |build| (calls
   it once), compiles, and keeps the executable in an LRU memory cache; later calls with the
   same signature run the cached executable at once.

   Dynamic dims. A parameter dim declared HJ_DYN(max) may have any size 1..max at each call.
   It is rounded up to its bucket — the next power of two, never above max; or the smallest
   of options.buckets that holds it (max is always the last bucket) — and the trace sees it
   as a bounded dim `<=bucket` (printed f32[<=64,768], as XLA writes it). The inputs are
   padded to the bucket with zeros, the real sizes reach the kernels as s32 runtime scalars,
   every reduction, dot contraction, softmax max and sum, mean/var divisor, cumulative op,
   gather, concatenate, pad, reverse and slice that crosses a padded dim is masked or
   corrected (passes/dynamic_padder.c), and the outputs come back at their real sizes
   (without a copy when only their leading dim is cut). Results equal the unpadded
   computation up to f32 rounding (reductions may sum in another order). So lengths 1..1000
   of one function compile at most 11 times (1, 2, 4, ..., 512, 1000).
   A graph the padder cannot pad (scatter or sort along a dynamic dim, a reshape that
   splits or merges a dynamic dim into minor position, while loops over dynamic state, an
   iota of a dynamic shape reduced over) is compiled at each exact size instead; the stats'
   pad_note says why.
   The cache key is (this jit, the bucketed shapes, the dtypes, padding or exact); the
   function and its options belong to the jit object itself.

   Runtime scalars. Values that change every call without recompiling are inputs, not
   shapes: a KV-cache position is an s32[] parameter used as a dynamic-(update-)slice start
   and in a mask (iota < pos), the cache itself has its static maximum length. One compile
   serves every position.

   Pitfalls of tracing (each has a test in tests/unit/test_jit.c):
   - C values read inside |build| are frozen into the trace: a global or |user| field read
     there is a constant of the compiled code; change it and calls keep the old value until
     something retraces. Pass what changes as a parameter.
   - Branches are frozen the same way: |build| cannot see data (tensors have no values while
     tracing); an `if` on a C variable picks one side for good. Use hj_select or
     hj_conditional for data-dependent choices.
   - A shape change outside the declared dynamic dims (another static size, another dtype)
     is a new trace and a new compile; hj_jit_stats().last_miss names the parameter, the dim
     or the dtype that changed. The rank must match the declaration.
   - Outputs are the caller's buffers: each call makes new ones (or fills the ones passed,
     which must have the real output shape); nothing returned aliases the JIT's state, so a
     later call never overwrites an earlier result.
   - Inside |build|, hj_tensor_shape() of a dynamic dim gives -bucket (the bound, negated);
     the real size as a tensor is hj_dim_size(). Reshape targets are static: write the
     dynamic dim as -1 (inferred) or as the bound.
   Statistics count calls, compiles, memory hits, disk hits (compiles whose machine code came
   from the disk cache), evictions, and the trace and compile times; with HLOJIT_LOG=1 every
   miss prints one line on stderr:
     hlojit: jit 'NAME': miss 3 (param 'x' dim 0: bucket 8 -> 16 (size 9)): trace 0.1 ms, compile 41.0 ms */
typedef struct hj_jit hj_jit_t;

typedef struct hj_jit_param {
  const char *name;                /* NULL: "argN" */
  hj_shape_t shape;                /* HJ_DYN(max) for dynamic dims; the rank is checked, the
                                      static sizes are the expected ones (not checked: another
                                      size is a new trace) */
} hj_jit_param_t;

typedef struct hj_jit_options {
  const char *name;                /* the function's name in messages and logs; "jit" */
  const hj_jit_param_t *params;    /* copied by hj_jit_create */
  int nparams;
  const int64_t *buckets;          /* ascending sizes dynamic dims round up to; NULL: powers
                                      of two. Copied. */
  int nbuckets;
  int cache_entries;               /* executables kept in memory (LRU); default 16 */
  bool no_padding;                 /* compile every exact shape (no buckets): for comparison */
} hj_jit_options_t;

/* Builds the graph of one trace; returns HJ_OK or an error (the message in the context or
   the graph). */
typedef hj_status (*hj_jit_build_fn)(hj_graph_t *g, const hj_tensor_t *params, int nparams,
                                     void *user);

typedef struct hj_jit_stats {
  int64_t calls;
  int64_t compiles;                /* traces compiled (memory misses) */
  int64_t memory_hits;
  int64_t disk_hits;               /* compiles whose machine code came from the disk cache */
  int64_t exact_compiles;          /* of the compiles, at exact sizes (padding declined) */
  int64_t evictions;               /* executables dropped by the LRU */
  int entries;                     /* executables in memory now */
  double trace_ms;                 /* total: build function, module, dynamic padder */
  double compile_ms;               /* total: hj_compile_module of the traces, of which */
  double passes_ms, emit_ms, optimize_ms, codegen_ms;   /* (hj_exec_stats' parts, summed) */
  const char *last_miss;           /* why the last compile happened; "" before any */
  const char *pad_note;            /* why padding is off (exact sizes); "" when it is on */
} hj_jit_stats_t;

void hj_jit_options_init(hj_jit_options_t *opt);
/* |opt| must declare the parameters. *out is NULL on failure. */
hj_status hj_jit_create(hj_ctx_t *ctx, hj_jit_build_fn build, void *user,
                        const hj_jit_options_t *opt, hj_jit_t **out);
/* Runs the function on |nin| input buffers (one per declared parameter). Each out[i] that is
   NULL receives a new buffer of the real output shape (the caller destroys it); a non-NULL
   one must have that shape and dtype and is overwritten. Calls on one jit are serialised. */
hj_status hj_jit_call(hj_jit_t *jit, hj_buffer_t *const *in, int nin, hj_buffer_t **out, int nout);
hj_status hj_jit_stats(const hj_jit_t *jit, hj_jit_stats_t *out);  /* strings live in |jit| */
void hj_jit_destroy(hj_jit_t *jit);

/* ==== 18 PROFILES ========================================================================= */
/* With profiling on (hj_ctx_options_t.profile, $HLOJIT_PROFILE=1, or hj_exec_set_profiling)
   every thunk of a run is timed. With $HLOJIT_PROFILE=1 the report (hj_exec_profile_text)
   is also printed on stderr when an executable that ran is destroyed. Timing a thunk costs
   two clock reads (~50 ns). */
typedef struct hj_profile_entry {
  const char *instr;          /* the HLO instruction the thunk runs (fusion, copy, while) */
  const char *kernel;         /* its kernel's symbol; "" when it has none */
  const char *kind;           /* loop reduction transpose matmul dus | copy eval while cond;
                                 "module" for a backend that times only whole runs */
  int depth;                  /* 0: the entry; 1: inside a while or conditional; ... */
  int64_t calls;              /* times it ran (inside a while: once per iteration) */
  double ms;                  /* total over the calls (while/cond: what runs inside too) */
  int64_t bytes;              /* per call: its input and output leaves (an in-place
                                 dynamic-update-slice: the update, read and written) */
  int64_t flops;              /* per call: 2*M*N*K per dot, one per element of each
                                 arithmetic op, one per input element of a reduce */
} hj_profile_entry_t;
hj_status hj_exec_set_profiling(hj_exec_t *e, bool on);
/* The entries (malloc'd, sorted by |ms|, largest first; free() them) and the number of
   runs and their wall time (|runs|, |run_ms| may be NULL). */
hj_status hj_exec_profile(const hj_exec_t *e, hj_profile_entry_t **entries, int *n,
                          int64_t *runs, double *run_ms);
/* The report as text (malloc'd; free()): per thunk ms per run, share, calls, GB/s, GFLOP/s,
   kind, instruction and kernel, sorted; then the compile times. */
hj_status hj_exec_profile_text(const hj_exec_t *e, char **text);
void hj_exec_profile_reset(hj_exec_t *e);

/* ==== 19 PTX WITHOUT A DEVICE ============================================================= */
/* The PTX of every kernel |m| compiles to on the CUDA backend, for |arch| ("sm_80", the
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
