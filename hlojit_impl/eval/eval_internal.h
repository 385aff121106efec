/* eval/eval_internal.h — what the evaluator's files share (private to eval/). */
#ifndef HLOJIT_EVAL_INTERNAL_H
#define HLOJIT_EVAL_INTERNAL_H

#include "eval.h"

/* The evaluator's own memory comes from the context's allocator (hj_ctx_options_t), so a
   custom allocator sees (and can fail) every frame, scratch array and value; |n| * |size|
   bytes, NULL on overflow or OOM; zeroed when |zero|. Free with hj__free(ctx, p). Only the
   stb_ds id map of a sparse frame uses realloc (stb_ds has no failure path). */
static inline void *hlo_ev_alloc(hj_ctx_t *ctx, size_t n, size_t size, bool zero) {
  size_t b;
  if (__builtin_mul_overflow(n, size, &b)) return NULL;
  void *p = hj__alloc(ctx, b);
  if (p && zero) memset(p, 0, b);
  return p;
}

/* eval_ops.c: the structural ops. |ops| are the evaluated operands; *out is a new literal.
   Returns HJ_ERR_UNSUPPORTED for opcodes it does not handle. */
hj_status hlo_eval_structural(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops, hlo_literal **out);
/* eval_sprog.c: applies a scalar computation (reduce/scatter/sort/map comparator) to |n|
   scalar literals (a scalar program directly, anything else through the frame walker);
   fast paths are the caller's business. */
hj_status hlo_eval_scalar_call(hj_ctx_t *ctx, const hlo_comp *c, hlo_literal *const *args, int n, hlo_literal **out);
/* eval_sprog.c: map of |ins| (its computation over all elements) on operand values |ops|. */
hj_status hlo_eval_map(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops, hlo_literal **out);
/* eval.c: elementwise unary/binary on raw element values (used by eval_ops.c fast paths for
   reducers): applies |op| (an HLO_KIND_BINARY opcode) to element i of a and element j of b
   (both of type t), storing into element k of dst (type t). */
void hlo_eval_binary_elem(hlo_opcode op, hlo_type t, const void *a, int64_t i, const void *b, int64_t j, void *dst, int64_t k);


/* ---- eval_elem.c: the evaluator's elementwise kernels ----------------------------------
   unary and binary ops, compare, select, clamp, convert, copy, and bitcast-convert between
   types of one width (ir/opfacts.c's hlo_elem_op), on raw element storage, with XLA's
   semantics for every type. */
/* Runs |e| over |n| elements. in[k]: operand k's storage; bcast[k] (NULL: none) says that
   operand k is one element used for every output element. |out| may alias a non-broadcast
   operand of the output's type (in-place update). */
void hlo_elem_run(const hlo_elem_op *e, const void *const *in, const bool *bcast, void *out,
                  int64_t n);
/* eval_ops.c helpers shared with eval_gather.c and eval_reduce.c (the structural ops are
   split over these three files; hlo_eval_structural in eval_ops.c is the one switch).
   hlo_evo_next: advances the row-major multi-index |idx| over |dims|; false after the last.
   hlo_evo_copy: copies the box |dims| (element offsets, strides in elements, may be 0 or
   negative) from src[src_off + sum idx*src_strides] to dst[dst_off + sum idx*dst_strides].
   hlo_evo_load_index: an index element of any integer type as int64 (u64 saturates).
   hlo_evo_err: HJ_ERR_SHAPE with "op 'NAME' (name: result shape; operand shapes): msg". */
bool hlo_evo_next(int rank, const int64_t *dims, int64_t *idx);
void hlo_evo_copy(void *dst, int64_t dst_off, const int64_t *dst_strides, const void *src,
                  int64_t src_off, const int64_t *src_strides, int rank, const int64_t *dims,
                  int esize);
int64_t hlo_evo_load_index(hlo_type t, const void *base, int64_t i);
hj_status hlo_evo_err(hj_ctx_t *ctx, const hlo_instr *ins, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The slow path of reduce, reduce-window and scatter: for k < n (n <= HLO_EVO_MAX_N),
   acc[k][ai] = c(acc[0][ai], ..., acc[n-1][ai], x[0][xi], ..., x[n-1][xi])_k through
   hlo_eval_scalar_call. */
#define HLO_EVO_MAX_N 32
hj_status hlo_evo_combine(hj_ctx_t *ctx, const hlo_comp *c, int n, hlo_literal *const *acc,
                          int64_t ai, hlo_literal *const *x, int64_t xi);
/* A structural op's evaluation into the preallocated result |r| (shape ins->shape, not
   empty): the signature of the opcode table's eval column (eval_ops.c's dispatch). The
   ones in eval_gather.c, eval_reduce.c and eval_sprog.c (dot, sort): */
typedef hj_status hlo_eval_op_fn(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops,
                                 hlo_literal *r);
hj_status hlo_eval_gather(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops, hlo_literal *r);
hj_status hlo_eval_scatter(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops, hlo_literal *r);
hj_status hlo_eval_reduce(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops, hlo_literal *r);
hj_status hlo_eval_reduce_window(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops, hlo_literal *r);
hj_status hlo_eval_sort(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops, hlo_literal *r);
/* eval_rng.c: rng-bit-generator, XLA's three-fry and philox bit for bit. */
hj_status hlo_eval_rng_bits(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops, hlo_literal *r);
/* eval_lapack.c: custom-call to jaxlib's LAPACK targets, through LAPACK (dlopen). */
hj_status hlo_eval_custom_call(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops, hlo_literal *r);
hj_status hlo_eval_dot(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops, hlo_literal *r);
/* eval_window.c */
hj_status hlo_eval_convolution(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops, hlo_literal *r);
hj_status hlo_eval_select_and_scatter(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops,
                                      hlo_literal *r);


#endif
