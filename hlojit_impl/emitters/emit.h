/* emit.h — the target-independent emitters: one fusion -> one kernel in LLVM IR (LLVM-C
   core API only; no target headers). Shared by backends/cpu and, later, backends/cuda: only
   the thread mapping (emit_target) and a few hooks differ per target.

   Kept out of ir/ir.h so that the IR, parser and evaluator build without LLVM.

   Vocabulary
   - A *fusion* is an HLO fusion instruction; its fused computation (calls[0]) is what is
     emitted. Before the fusion pass exists, every instruction is wrapped into a single-op
     fusion (passes/wrap_fusions.c), so emitters only ever see fusions.
   - The *hero* decides the emitter (classify.c, emit_classify): dot -> matmul, reduce ->
     reduction, a real transpose at the root -> transpose, dynamic-update-slice whose
     operand buffer may be updated in place -> dus, sort -> sort, scatter -> scatter, a
     prefix-scan reduce-window (cumsum) reached through elementwise epilogues -> scan,
     while/conditional/call/... -> runtime (no kernel: the runtime runs them as thunk
     sequences), else loop.
   - Buffers are dense, row-major in logical order (layouts are ignored except by bitcast,
     exactly like the evaluator).

   Kernel ABI (loop, reduction, transpose, dus kernels):
       void NAME(void **bufs, int64_t begin, int64_t end);
   bufs = the fusion's operand buffers in operand order (= fused parameter numbers), then its
   output buffers (the leaves of the fusion's shape, depth first). [begin, end) is a range of
   the kernel's parallel dimension (emit_kernel.parallel_n): the runtime splits it over the
   thread pool; any split must give bitwise-identical results (determinism). A kernel never
   reads an output buffer before writing it and no output aliases an input (so parameters are
   noalias), except the dus kernel, whose in-place outputs *are* the operands they update.
   (Also excepted: an in-place loop kernel, emit_fusion_inplace below, whose output 0 is the
   operand it reads only at the element it writes.)

   Elemental emission: emit_elemental(f, ins, idx) returns the value of |ins| at multi-index
   |idx| (i64 values), in the compute type (emit_compute_type). It emits straight-line code in
   the current block: no branches, so cached values dominate later uses in the same block.
   Out-of-bounds loads are never emitted: concatenate/pad/dynamic-update-slice/gather select
   between values loaded at clamped, in-bounds indices. Code that opens loops or blocks must
   call emit_cache_clear() when it moves to a block that the cached values do not dominate. */
#ifndef HLOJIT_EMIT_H
#define HLOJIT_EMIT_H

#include "../ir/ir.h"
#include <llvm-c/Core.h>

/* ---- module-wide state ------------------------------------------------------------------ */
struct emit_module;
struct emit_gpu_mm;

typedef struct emit_target {
  bool gpu;            /* false: host CPU */
  int vector_bytes;    /* preferred vector register size: 64 (AVX-512), 32 (AVX2), 16 */
  bool has_fma;
  bool has_f16c;       /* hardware half <-> float conversion */
  /* CPU: the nr (floats) of the matmul micro-kernel, which a dot whose rhs is in panel
     order (passes/dot_canon.c, hj_linear's HJ_LINEAR_PANELS) must have to be read in place;
     0: no panel-order rhs (dot_canon turns it into a plain one). emit_matmul_panel_nr. */
  int matmul_panel_nr;
  /* GPU only (gpu true; see "GPU targets" below): */
  int gpu_sm;          /* the arch the PTX is for: 80 (sm_80) or 90 (sm_90a) */
  int gpu_sm_count;    /* multiprocessors of the device (0: unknown; tiling choices) */
  bool gpu_libdevice;  /* libdevice can be linked: functions the CPU takes from libm become
                          __nv_* calls; false: fusions needing them are HJ_ERR_UNSUPPORTED */
  /* The target runs our tiled and skinny matmul kernels (gpu_mm.h); false: matmul fusions
     take the library (cuBLAS) path only. */
  bool gpu_tiled_matmul;
} emit_target;

typedef struct emit_module {
  hj_ctx_t *ctx;
  LLVMContextRef llctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  emit_target target;
  LLVMTypeRef t_void, t_i1, t_i8, t_i16, t_i32, t_i64, t_f16, t_f32, t_f64, t_ptr;
  /* Non-empty: a prefix unique in the JIT, under which kernels that depend only on their
     parameters (the matmul micro-kernels) are emitted once per module and shared by every
     fusion that needs them. Empty: each fusion emits its own, under its name. */
  char shared_prefix[32];
} emit_module;

/* Sets up types and a builder for |mod| (owned by the caller, as is |llctx|). */
void emit_module_init(emit_module *em, hj_ctx_t *ctx, LLVMContextRef llctx, LLVMModuleRef mod,
                      const emit_target *target);
void emit_module_dispose(emit_module *em);   /* the builder only */

/* ---- one kernel function ------------------------------------------------------------------ */
typedef struct emit_index {
  int rank;
  LLVMValueRef v[HLO_MAX_RANK];   /* i64 */
} emit_index;

typedef struct emit_cache_entry emit_cache_entry;

typedef struct emit_fn {
  emit_module *em;
  LLVMValueRef fn;                /* the inner function (noalias pointer params) */
  const hlo_instr *fusion;
  const hlo_comp *comp;           /* fusion->calls[0] */
  LLVMValueRef params[64];        /* base pointer of each fused parameter, by number */
  int nparams;
  LLVMValueRef outs[64];          /* base pointer of each output leaf */
  int nouts;
  LLVMValueRef begin, end;        /* i64: the parallel range */
  /* When set, emit_elemental returns |override_val| for |override_ins| instead of emitting
     it: the matmul and reduction emitters compute their hero themselves and let the
     elemental emitter produce the epilogue around it. */
  const hlo_instr *override_ins;
  LLVMValueRef override_val;
  /* More such pairs, honoured the same way: the first |noverrides| entries (reduction.c's
     row normalisation: every reduce of a row, once computed, for the ops that use it). */
  const hlo_instr *override_ins2[8];
  LLVMValueRef override_val2[8];
  int noverrides;
  emit_cache_entry *cache;        /* stb_ds array: (instr, index) -> value */
  hj_status status;               /* first error (emit_fail); emitters check it at the end */
} emit_fn;

/* Creates `void NAME(ptr bufs, i64 begin, i64 end)` and an inner always-inline function
   NAME.impl(ptr noalias p0..., ptr noalias out0..., i64 begin, i64 end) in which the caller
   emits the body (builder positioned at its entry). */
hj_status emit_kernel_begin(emit_fn *f, emit_module *em, const char *name,
                            const hlo_instr *fusion);
hj_status emit_kernel_end(emit_fn *f);   /* `ret void`, frees the cache, returns f->status */
/* The same, with output 0 over operand |inplace_operand| (-1: none; loop.c's in-place
   elementwise kernels), so neither gets noalias. */
hj_status emit_kernel_begin_ex(emit_fn *f, emit_module *em, const char *name,
                               const hlo_instr *fusion, int inplace_operand);
/* And in general: the operands with bit k of |alias_params| set and the outputs with bit j
   of |alias_outs| set share buffers (dus.c: several leaves updated in place); none of them
   gets noalias. */
hj_status emit_kernel_begin_aliased(emit_fn *f, emit_module *em, const char *name,
                                    const hlo_instr *fusion, uint64_t alias_params,
                                    uint64_t alias_outs);

/* Records the first error ("emit 'NAME': ...") and returns it; emission goes on with
   placeholder values (LLVMGetUndef) so callers need not check every step. */
hj_status emit_fail(emit_fn *f, hj_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void emit_cache_clear(emit_fn *f);

/* ---- types, loads, stores, indices ------------------------------------------------------ */
/* Storage: pred/s8/u8 i8, s16/u16/bf16 i16, f16 half, s32/u32 i32, s64/u64 i64, f32, f64.
   Compute: pred i1, ints their width, f16/bf16/f32 float, f64 double. */
LLVMTypeRef emit_storage_type(emit_module *em, hlo_type t);
LLVMTypeRef emit_compute_type(emit_module *em, hlo_type t);
LLVMValueRef emit_load_elem(emit_fn *f, hlo_type t, LLVMValueRef base, LLVMValueRef linear);
void emit_store_elem(emit_fn *f, hlo_type t, LLVMValueRef base, LLVMValueRef linear, LLVMValueRef v);
/* LLVM constants, the one set every emitter (and the GPU matmul generators) uses:
   emit_ci / emit_cf: |v| as a constant of integer type |t| (sign-extended) / float type
   |t|; emit_i64 / emit_i32: of the module's i64 / i32. */
static inline LLVMValueRef emit_ci(LLVMTypeRef t, int64_t v) {
  return LLVMConstInt(t, (unsigned long long)v, 1);
}
static inline LLVMValueRef emit_cf(LLVMTypeRef t, double v) { return LLVMConstReal(t, v); }
#define emit_i64(f, v) emit_ci((f)->em->t_i64, (v))
#define emit_i32(f, v) emit_ci((f)->em->t_i32, (v))
LLVMValueRef emit_linear_index(emit_fn *f, const hlo_shape *s, const emit_index *idx);
void emit_delinearize(emit_fn *f, const hlo_shape *s, LLVMValueRef linear, emit_index *out);

/* The index of a matmul epilogue's |root| at the dot's (b, m, n) = |bmn| (the dot's
   [B, M, N] result is |bmn_dims|): the root's dims that are not 1 take the dot's dims that
   are not 1, in order; the others index 0 (CPU and GPU matmul epilogues). A root whose
   leading dims split the dot's rows (hlo_dot_epilogue_dims) takes m delinearised over them
   and n last. */
void emit_dot_root_index(emit_fn *f, const hlo_instr *root, const int64_t bmn_dims[3],
                         const LLVMValueRef bmn[3], emit_index *idx);

/* A counted loop: iv runs begin, begin+step, ... < end. Between _begin and _end the builder
   is in the body; after _end it is in the exit block. Clears the cache at both ends. */
typedef struct emit_loop {
  LLVMBasicBlockRef preheader, header, body, latch, exit;
  LLVMValueRef iv, step;
  bool no_vectorize;   /* set before emit_loop_end: the body is already vector code, so
                          LLVM's loop vectoriser must not widen it again (llvm.loop metadata) */
} emit_loop;
void emit_loop_begin(emit_fn *f, emit_loop *l, LLVMValueRef begin, LLVMValueRef end,
                     int64_t step, const char *name);
void emit_loop_end(emit_fn *f, emit_loop *l);

/* ---- elemental.c, elemental_index.c: scalar code for every op at an index --------------- */
LLVMValueRef emit_elemental(emit_fn *f, const hlo_instr *ins, const emit_index *idx);
/* Applies a scalar computation (reducer, comparator, map body) to |n| compute-type values;
   writes its |nout| results (more than one for a tuple root). */
void emit_scalar_call(emit_fn *f, const hlo_comp *c, LLVMValueRef *args, int n,
                      LLVMValueRef *results, int nout);

/* ---- emit_math.c: vectorisable math (polynomials, no libm calls for the hot functions) -- */
/* |x| is float or double (or a vector of them). Accuracy is stated in emit_math.c. */
LLVMValueRef emit_math_unary(emit_fn *f, hlo_opcode op, LLVMValueRef x);
LLVMValueRef emit_math_binary(emit_fn *f, hlo_opcode op, LLVMValueRef a, LLVMValueRef b);

/* ---- classify.c: hero analysis; emitter.c: the one switch from kind to emitter ---------- */
typedef enum {
  EMIT_KIND_LOOP, EMIT_KIND_REDUCTION, EMIT_KIND_TRANSPOSE, EMIT_KIND_MATMUL,
  EMIT_KIND_DUS, EMIT_KIND_SORT, EMIT_KIND_SCATTER, EMIT_KIND_SCAN, EMIT_KIND_RUNTIME,
  EMIT_KIND_COUNT
} emit_kind;
const char *emit_kind_name(emit_kind k);
/* The hero of |fusion| (its fused computation) and the emitter it calls for. |dus_mask|:
   bit j set when the runtime gives output leaf j, a dynamic-update-slice, the buffer of the
   operand it updates (runtime/buffer_assign.c; ir/inplace.c says which leaves may). */
emit_kind emit_classify(const hlo_instr *fusion, uint64_t dus_mask, const hlo_instr **hero);

struct emit_matmul_plan;   /* matmul.c / backends: how the runtime drives a matmul kernel */
typedef struct emit_kernel {
  char name[96];            /* the symbol of the kernel (ABI above) */
  emit_kind kind;
  int64_t parallel_n;       /* the runtime calls kernel(bufs, b, e) over [0, parallel_n) */
  int64_t grain;            /* minimum iterations per chunk */
  struct emit_matmul_plan *matmul;  /* EMIT_KIND_MATMUL: shapes, blocking, symbols (malloc'd) */
  /* GPU targets: the launch geometry of kernel |name| (threads = grid x block), and the
     dynamic shared memory it needs (the same for eager launches and graph nodes). */
  unsigned grid[3], block[3], shared_bytes;
} emit_kernel;
/* Emits the kernel(s) of |fusion| into |em| under names starting with |name|.
   HJ_ERR_UNSUPPORTED (with a message) when no emitter takes it: the runtime then falls back
   to the evaluator for this fusion and counts it. */
hj_status emit_fusion(emit_module *em, const hlo_instr *fusion, const char *name,
                      uint64_t dus_mask, emit_kernel *out);
/* loop.c: in-place elementwise. emit_loop_inplace_ok: |fusion| is a single-output loop
   fusion in linear mode that reads operand |operand| only at the element it writes, so
   output 0 may be given that operand's buffer (buffer assignment asks this).
   emit_loop_fusion_inplace: the loop kernel with output 0 over operand |operand|
   (HJ_ERR_UNSUPPORTED, nothing emitted, if emit_loop_inplace_ok does not hold).
   emitter.c's emit_fusion_inplace: emit_fusion, except that with |inplace_operand| >= 0
   output 0 is that operand's buffer (emit_loop_fusion_inplace, or the GPU's loop
   emitter). */
bool emit_loop_inplace_ok(const hlo_instr *fusion, int operand);
hj_status emit_loop_fusion_inplace(emit_module *em, const hlo_instr *fusion, const char *name,
                                   int operand, emit_kernel *out);
hj_status emit_fusion_inplace(emit_module *em, const hlo_instr *fusion, const char *name,
                              uint64_t dus_mask, int inplace_operand, emit_kernel *out);

/* ---- loop.c, reduction.c, transpose.c, dus.c, matmul.c: the emitters -------------------- */
hj_status emit_loop_fusion(emit_module *em, const hlo_instr *fusion, const char *name, emit_kernel *out);
hj_status emit_reduction_fusion(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero,
                                const char *name, emit_kernel *out);
hj_status emit_transpose_fusion(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero,
                                const char *name, emit_kernel *out);
hj_status emit_dus_fusion(emit_module *em, const hlo_instr *fusion, uint64_t dus_mask,
                          const char *name, emit_kernel *out);
hj_status emit_matmul_fusion(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero,
                             const char *name, emit_kernel *out);
/* sort.c: a sorting network per row, in place in the outputs (passes/sort_lower.c made the
   comparator a total, stable order); scatter.c: the operand copied, then the updates
   applied in order, parallel over the operand's leading dim. */
hj_status emit_sort_fusion(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero,
                           const char *name, emit_kernel *out);
hj_status emit_scatter_fusion(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero,
                              const char *name, emit_kernel *out);
/* scan.c: a prefix-scan reduce-window (cumsum, cummax) and its elementwise epilogue, one
   running fold per row. */
hj_status emit_scan_fusion(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero,
                           const char *name, emit_kernel *out);

/* ---- GPU targets (emit_target.gpu): the same fusions, GPU thread mappings ----------------
   emit_fusion and emit_fusion_inplace hand a GPU target's fusions to the GPU emitters
   (gpu_*.c; gpu_emitter.c has the dispatch): the hero analysis (emit_classify), the elemental
   emitter and emit_math are the same as on the CPU; only the thread mapping differs.

   GPU kernel ABI: a PTX kernel (LLVMPTXKernelCallConv, launch bound in nvvm.annotations)
       void NAME(ptr p0, ..., ptr p{n-1}, ptr out0, ..., ptr out{m-1})
   with the fusion's operand buffers then its output leaves (as the CPU's bufs), every
   pointer 16-byte aligned (the runtime guarantees it), launched on emit_kernel.grid x
   .block threads with .shared_bytes of dynamic shared memory. parallel_n is the number of
   output elements (0: nothing to launch). Names contain no '.' (PTX would spell it _$_).

   Matmul fusions (EMIT_KIND_MATMUL) on a GPU fill emit_kernel.matmul's gpu_* fields
   (matmul_plan.h): the tiled or skinny kernel (gpu_mm.h's generators, the epilogue fused;
   when emit_target.gpu_tiled_matmul) and, for the library path, an epilogue kernel applied
   in place after the gemm. */
typedef struct emit_gpu_mm_epi {   /* what a GPU matmul's epilogue sees per element (the
                                      tiled and skinny generators call it straight) */
  LLVMBuilderRef b;                /* positioned where the value is needed */
  LLVMModuleRef mod;
  LLVMValueRef kernel;
  LLVMValueRef acc;                /* f32: the dot product */
  LLVMValueRef row, col, batch;    /* i64, row and col clamped into [0,M) x [0,N) */
  const LLVMValueRef *extra;       /* the kernel's extra pointer parameters */
  int n_extra;
} emit_gpu_mm_epi;

/* gpu_kernel.c, the one place kernels are marked (the fusion kernels and the CUDA
   backend's matmul generators): makes |fn| a kernel (PTX kernel calling convention)
   launched with at most |max_threads| threads per block (.maxntid; 0: no bound) and meant
   to run |min_blocks| blocks per SM at once (.minnctapersm; 0: no target), both through
   nvvm.annotations. ptxas budgets registers from both: with .maxntid 256 alone, ptxas 13
   for sm_90 caps the tiled matmul at 128 registers and spills; with .minnctapersm 2 it
   fits the same 128 registers without spilling. */
void emit_gpu_mark_kernel(LLVMModuleRef mod, LLVMValueRef fn, int max_threads, int min_blocks);
/* gpu_emitter.c: emit_fusion / emit_fusion_inplace for a GPU target. */
hj_status emit_gpu_fusion(emit_module *em, const hlo_instr *fusion, const char *name,
                          uint64_t dus_mask, int inplace_operand, emit_kernel *out);

#endif /* HLOJIT_EMIT_H */
