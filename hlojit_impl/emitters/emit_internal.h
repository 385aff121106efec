/* emit_internal.h — private glue between the core emitter files (emit_core.c, elemental.c,
   elemental_index.c, elemental_window.c, emit_math.c, classify.c, loop.c, dus.c, emitter.c). Not for the hero emitters written by
   others: they use emit.h only. Every name here starts with emitp_.

   The cache (emit_fn.cache) holds three kinds of entries, in an stb_ds array used as a stack:
     value  — (instr, tuple element, index) -> the element's value;
     linear — (dims, index) -> the row-major linear index of that multi-index, recorded by
              emit_delinearize and the loop emitter so that emit_linear_index(dims, idx)
              gives back the original linear value instead of re-multiplying (a reshape or
              an elementwise read then costs nothing);
     mark   — a scope start. Loops and scalar calls push a mark and pop back to it when
              they end: values made inside are forgotten, values from before stay valid
              (the blocks before a loop dominate everything after it);
     dead   — cleared by emit_cache_clear (kept so that mark positions stay valid). */
#ifndef HLOJIT_EMIT_INTERNAL_H
#define HLOJIT_EMIT_INTERNAL_H

#include "emit.h"

typedef enum { EMITP_VALUE, EMITP_LINEAR, EMITP_MARK, EMITP_DEAD } emitp_entry_kind;

struct emit_cache_entry {
  emitp_entry_kind kind;
  const hlo_instr *ins;           /* value */
  int sub;                        /* value: tuple element (variadic reduce), else 0 */
  emit_index idx;
  int64_t dims[HLO_MAX_RANK];     /* linear: the shape's dims (rank = idx.rank) */
  LLVMValueRef v;
};

/* ---- emit_core.c ----------------------------------------------------------------------- */
LLVMValueRef emitp_cache_get(emit_fn *f, const hlo_instr *ins, int sub, const emit_index *idx);
void emitp_cache_put(emit_fn *f, const hlo_instr *ins, int sub, const emit_index *idx,
                     LLVMValueRef v);
void emitp_linear_put(emit_fn *f, const hlo_shape *s, const emit_index *idx, LLVMValueRef lin);
ptrdiff_t emitp_cache_mark(emit_fn *f);            /* pushes a mark; returns its position */
void emitp_cache_pop(emit_fn *f, ptrdiff_t mark);  /* drops the mark and everything after */
/* An alloca of |t| at the top of the current function's entry block (promoted by SROA). */
LLVMValueRef emitp_entry_alloca(emit_fn *f, LLVMTypeRef t, const char *name);
/* Declares (once) and calls llvm.NAME overloaded on |tys|; undef + emit_fail when LLVM
   does not know the intrinsic. */
LLVMValueRef emitp_intrinsic(emit_fn *f, const char *name, LLVMTypeRef *tys, int ntys,
                             LLVMValueRef *args, int nargs);
/* Calls the external scalar function |name| (registered in the JIT: libm) with |nargs|
   arguments of |x|'s type; a vector |x| is split into lanes, one call per lane. */
LLVMValueRef emitp_libcall(emit_fn *f, const char *name, LLVMValueRef *args, int nargs);
/* A constant i64 / the zero index of rank |rank|. */
void emitp_zero_index(emit_fn *f, int rank, emit_index *out);
LLVMValueRef emitp_undef(emit_fn *f, const hlo_shape *s);  /* placeholder after a failure */

/* ---- elemental.c ----------------------------------------------------------------------- */
/* Rounds a compute value of type |t| to what |t| can hold (f16/bf16 to nearest even;
   identity for the other types): every f16/bf16 op result goes through this, as the
   evaluator stores each op's result. */
LLVMValueRef emitp_round(emit_fn *f, hlo_type t, LLVMValueRef v);
/* convert's semantics between compute values (eval_elem.c). */
LLVMValueRef emitp_convert(emit_fn *f, LLVMValueRef v, hlo_type from, hlo_type to);
/* An integer compute value of type |t| as i64, like hlo_evo_load_index (u64 saturates). */
LLVMValueRef emitp_index_value(emit_fn *f, LLVMValueRef v, hlo_type t);
/* Operand |k| of |ins| at |idx|: the same index, or index 0 for a one-element operand. */
LLVMValueRef emitp_operand(emit_fn *f, const hlo_instr *ins, int k, const emit_index *idx);

/* ---- elemental_index.c ----------------------------------------------------------------- */
/* The index-only and computing structural ops (iota broadcast reshape bitcast transpose
   slice reverse pad concatenate dynamic-slice dynamic-update-slice gather reduce); NULL
   when |ins| is none of them. */
LLVMValueRef emitp_index_op(emit_fn *f, const hlo_instr *ins, const emit_index *idx);
/* Element |sub| of a (variadic) reduce or reduce-window at |idx|. */
LLVMValueRef emitp_reduce(emit_fn *f, const hlo_instr *ins, int sub, const emit_index *idx);
/* ---- elemental_window.c ---------------------------------------------------------------- */
/* reduce-window, convolution, select-and-scatter at |idx|; NULL when |ins| is none of them. */
LLVMValueRef emitp_window_op(emit_fn *f, const hlo_instr *ins, const emit_index *idx);
LLVMValueRef emitp_reduce_window(emit_fn *f, const hlo_instr *ins, int sub, const emit_index *idx);

/* ---- emit_core.c ------------------------------------------------------------------------ */
/* The start every kernel ABI (CPU and GPU) shares: |f| zeroed for |fusion| in |em|, which
   must have a fused computation, at most 64 operands and 1..64 output leaves. */
hj_status emitp_fn_init(emit_fn *f, emit_module *em, const hlo_instr *fusion);
/* Raw storage bits of a compute value (iN, N = 8 * size) and back. */
LLVMValueRef emitp_to_bits(emit_fn *f, hlo_type t, LLVMValueRef v);
LLVMValueRef emitp_from_bits(emit_fn *f, hlo_type t, LLVMValueRef bits);
/* Deletes the functions added to |mod| after |last| (NULL: all of them), uses first
   replaced by poison, so that a module a failed emitter left half-written verifies. */
void emitp_drop_after(LLVMModuleRef mod, LLVMValueRef last);

/* ---- emit_math.c ----------------------------------------------------------------------- */
bool emitp_math_handles(hlo_opcode op);            /* emit_math_unary/_binary take |op| */

/* ---- classify.c -------------------------------------------------------------------------- */
/* The root leaves of fused computation |c| (depth first through root tuples), at most |max|;
   -1 when there are more or a leaf is not an array instruction. */
int emitp_roots(const hlo_comp *c, const hlo_instr **roots, int max);
/* The array leaves of those roots: a root itself, or element |sub| of a variadic reduce
   (sub = -1 for a plain array); -1 when there are more than |max| or one is not an array.
   The CPU and GPU loop emitters write one output per leaf. */
typedef struct emitp_leaf { const hlo_instr *ins; int sub; const hlo_shape *shape; } emitp_leaf;
int emitp_leaves(const hlo_comp *c, emitp_leaf *out, int max);

/* ---- dus.c: the in-place dynamic-update-slice kernels' plan (CPU and GPU) -------------- */
typedef struct emitp_dus_leaf {
  emitp_leaf leaf;              /* the output leaf */
  const hlo_instr *dus;         /* in place: the dynamic-update-slice it writes the update of */
  const hlo_shape *space;       /* indices walked: the update's shape (in place), the leaf's */
  int64_t work;                 /* numel(space) */
} emitp_dus_leaf;
typedef struct emitp_dus_plan {
  emitp_dus_leaf leaf[64];
  int n;
  int64_t work;                 /* the largest leaf's work: the kernel's parallel range */
  uint64_t alias_params, alias_outs;   /* emit_kernel_begin_aliased */
} emitp_dus_plan;
/* The plan of |fusion| with leaves |mask| in place; HJ_ERR_UNSUPPORTED when a marked leaf
   is not an in-place candidate (ir/inplace.c). */
hj_status emitp_dus_plan_make(emit_module *em, const hlo_instr *fusion, uint64_t mask,
                              emitp_dus_plan *p);
/* start[d] of |dus|, clamped as XLA does (i64); emit at entry. */
void emitp_dus_starts(emit_fn *f, const hlo_instr *dus, LLVMValueRef *start);
/* Leaf |j| at index |idx| of its space (|lin| its linear index there): the update's element
   stored at start + idx (in place), else the leaf's element at lin. */
void emitp_dus_store(emit_fn *f, const emitp_dus_leaf *L, int j, const LLVMValueRef *start,
                     const emit_index *idx, LLVMValueRef lin);

/* ---- sort.c: the sort kernels' plan and network step (CPU and GPU) ---------------------- */
typedef struct emitp_sort_plan {
  const hlo_instr *sort;        /* the fusion's root */
  int nops;                     /* operands = outputs */
  hlo_type type[32];
  int64_t n, inner, rows;       /* row length (the sort dim), its stride, rows */
  int steps;                    /* ceil(log2 n): the network's t runs 1 .. steps */
} emitp_sort_plan;
hj_status emitp_sort_plan_make(emit_module *em, const hlo_instr *fusion, const hlo_instr *sort,
                               emitp_sort_plan *p);
/* The linear index of element 0 of row |row| (i64). */
LLVMValueRef emitp_sort_row_base(emit_fn *f, const emitp_sort_plan *p, LLVMValueRef row);
/* Element |i| of the row at |base|: every operand's value into its output. */
void emitp_sort_copy(emit_fn *f, const emitp_sort_plan *p, LLVMValueRef base, LLVMValueRef i);
/* Step (t, s) of the network for element |i| (all i64): compares and swaps it with its
   partner when that is above it and inside the row. Leaves the builder after it. */
void emitp_sort_step(emit_fn *f, const emitp_sort_plan *p, LLVMValueRef base, LLVMValueRef t,
                     LLVMValueRef s, LLVMValueRef i);
/* topk.c: a topk root (k <= HLO_TOPK_KERNEL_MAX_K) in the same plan (sort = the topk, n the
   last dim, nops 2: values and indices), and one row of it: the k best so far, in place. */
hj_status emitp_topk_plan_make(emit_module *em, const hlo_instr *fusion, const hlo_instr *tk, emitp_sort_plan *p);
void emitp_topk_row(emit_fn *f, const emitp_sort_plan *p, LLVMValueRef row);
/* ---- scatter.c: the scatter kernels' plan and body (CPU and GPU) ------------------------ */
typedef struct emitp_scatter_plan {
  const hlo_instr *sc;          /* the fusion's root */
  int n;                        /* operands = updates = outputs */
  int64_t ivd, nvec;            /* index_vector_dim, start vector length */
  int nb, idims[HLO_MAX_RANK];  /* the index's batch dims (all but ivd) */
  int sdims[HLO_MAX_RANK];      /* the update's batch dims (not window dims), in order */
  int nw, wdims[HLO_MAX_RANK];  /* the operand's window dims, increasing */
  int bpos[HLO_MAX_RANK];       /* input batching dim i takes batch position bpos[i] */
  int64_t wsize[HLO_MAX_RANK];  /* the window's extent per operand dim (1 if not a window dim) */
  hlo_shape bshape, wshape;     /* the update's batch and window dims as shapes */
  int64_t batch, window;        /* their element counts */
  int64_t rows, row_elems;      /* the operand's leading dim and the elements per row */
} emitp_scatter_plan;
hj_status emitp_scatter_plan_make(emit_module *em, const hlo_instr *fusion, const hlo_instr *sc,
                                  emitp_scatter_plan *p);
/* Rows [r0, r1) of the outputs: the operands' rows, then every update that lands there. */
void emitp_scatter_body(emit_fn *f, const emitp_scatter_plan *p, LLVMValueRef r0, LLVMValueRef r1);
/* ---- scan.c: the prefix-scan kernels' plan and row (CPU and GPU) ------------------------ */
typedef struct emitp_scan_plan {
  const hlo_instr *rw;          /* the prefix-scan reduce-window */
  emitp_leaf leaf[64];          /* the root leaves: the scan through elementwise epilogues */
  int nleaves;
  int64_t n, inner, rows;       /* scan length, its stride, rows */
} emitp_scan_plan;
hj_status emitp_scan_plan_make(emit_module *em, const hlo_instr *fusion, const hlo_instr *rw, emitp_scan_plan *p);
/* Row |row| (i64): the running fold and every leaf at each of its elements. */
void emitp_scan_row(emit_fn *f, const emitp_scan_plan *p, LLVMValueRef row);

#endif
