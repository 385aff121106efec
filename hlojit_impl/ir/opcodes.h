/* ir/opcodes.h — the opcode table: every HLO opcode hlojit knows, once, with every fact a
   consumer asks about it. Included by ir/ir.h; nobody else keeps a list of opcodes.

   X(ENUM, text, arity, calls, kind, types, cost, emit, math, poly, eval, builder)

     ENUM    HLO_OP_ENUM.
     text    XLA's opcode text (printer and parser).
     arity   operand count; -1: variadic (hlo_operand_count_ok has the rule of each).
     calls   computations it calls (to_apply, calls, condition and body); -1: any number
             (conditional's branches, checked against its operands).
     kind    UNARY / BINARY: plain elementwise math (shape inference, the elemental
             emitter's and the evaluator's math switches); ELEM: the other elementwise
             ops (select, clamp, compare, convert, copy; bitcast-convert when the widths
             agree); OTHER: everything else.
     types   element types an elementwise op is defined on (shape inference and
             hlo_elem_unsupported, through hlo_types_admit): ANY, FLOAT (floats only), INT
             (integers only), BITS (integers or pred), SIGNED (signed integers or floats),
             NUMERIC (integers or floats).
     cost    what one element costs, for fusion's cost model and the reduction emitter's
             stash: FREE (constants), INDEX (pure index maps: read an operand elsewhere),
             CHEAP (one instruction or so), MID (divide, sqrt: a few), MATH (a
             transcendental: emit_math's polynomials or libm; never duplicated by fusion,
             stashed by the reduction emitter), HEAVY (a gather, dynamic slice, reduce or
             dot: never duplicated).
     emit    K: the emitters take it inside a fusion (CPU and GPU kernels); H: a hero with
             a kernel of its own (sort.c, topk.c, scatter.c and their GPU twins), alone in
             its fusion (the fusion passes never fuse it); R: no kernel does: a fusion
             holding one runs as a runtime thunk (control flow; custom-call, a library
             routine: LAPACK; rng-bit-generator, which the CPU and CUDA backends lower to
             integer arithmetic first, passes/rng_lower.c).
     math    the libm function (double; "f" appended for float) that computes a MATH op
             where emit_math has no approximation of its own (f64, libdevice on the GPU);
             0 for the rest.
     poly    1: emit_math computes the f32 op with a polynomial of its own (a few ulp from
             libm, which the evaluator uses: the fuzzers' and tests' tolerance); 0: libm, or
             no transcendental.
     eval    the evaluator's function for a structural op (eval/eval_ops.c's dispatch,
             signature hlo_eval_op_fn); 0 where the evaluator's elementwise kernels
             (eval_elem.c) or its interpreter loop (eval.c) run the op.
     builder hlojit.h's builder function: U(name) unary, B(name) binary, N none (the
             builder's other ops take attributes: api/builder_ops.c).

   Adding an elementwise op: a row here, its math in emitters/elemental.c or emit_math.c,
   its math in eval/eval_elem.c, its prototype in hlojit.h. */
#ifndef HLOJIT_IR_OPCODES_H
#define HLOJIT_IR_OPCODES_H

#define HLO_OPCODES(X)                                                                            \
  X(PARAMETER, "parameter", 0, 0, OTHER, ANY, INDEX, K, 0, 0, 0, N)                               \
  X(CONSTANT, "constant", 0, 0, OTHER, ANY, FREE, K, 0, 0, 0, N)                                  \
  X(IOTA, "iota", 0, 0, OTHER, ANY, INDEX, K, 0, 0, evo_iota, N)                                  \
  X(BROADCAST, "broadcast", 1, 0, OTHER, ANY, INDEX, K, 0, 0, evo_broadcast, N)                   \
  X(RESHAPE, "reshape", 1, 0, OTHER, ANY, INDEX, K, 0, 0, evo_reshape, N)                         \
  X(BITCAST, "bitcast", 1, 0, OTHER, ANY, INDEX, K, 0, 0, evo_bitcast, N)                         \
  X(TRANSPOSE, "transpose", 1, 0, OTHER, ANY, INDEX, K, 0, 0, evo_transpose, N)                   \
  X(SLICE, "slice", 1, 0, OTHER, ANY, INDEX, K, 0, 0, evo_slice, N)                               \
  X(DYNAMIC_SLICE, "dynamic-slice", -1, 0, OTHER, ANY, HEAVY, K, 0, 0, evo_dynamic_slice, N)      \
  X(DYNAMIC_UPDATE_SLICE, "dynamic-update-slice", -1, 0, OTHER, ANY, CHEAP, K, 0, 0,              \
    evo_dynamic_update_slice, N)                                                                  \
  X(CONCATENATE, "concatenate", -1, 0, OTHER, ANY, INDEX, K, 0, 0, evo_concatenate, N)            \
  X(PAD, "pad", 2, 0, OTHER, ANY, INDEX, K, 0, 0, evo_pad, N)                                     \
  X(REVERSE, "reverse", 1, 0, OTHER, ANY, INDEX, K, 0, 0, evo_reverse, N)                         \
  X(GATHER, "gather", 2, 0, OTHER, ANY, HEAVY, K, 0, 0, hlo_eval_gather, N)                       \
  X(SCATTER, "scatter", -1, 1, OTHER, ANY, CHEAP, H, 0, 0, hlo_eval_scatter, N)                   \
  X(SELECT, "select", 3, 0, ELEM, ANY, CHEAP, K, 0, 0, 0, N)                                      \
  X(CLAMP, "clamp", 3, 0, ELEM, ANY, CHEAP, K, 0, 0, 0, N)                                        \
  X(COMPARE, "compare", 2, 0, ELEM, ANY, CHEAP, K, 0, 0, 0, N)                                    \
  X(CONVERT, "convert", 1, 0, ELEM, ANY, CHEAP, K, 0, 0, 0, N)                                    \
  X(BITCAST_CONVERT, "bitcast-convert", 1, 0, ELEM, ANY, CHEAP, K, 0, 0, 0, N)                    \
  X(COPY, "copy", 1, 0, ELEM, ANY, CHEAP, K, 0, 0, 0, U(hj_copy))                                 \
  X(ABS, "abs", 1, 0, UNARY, SIGNED, CHEAP, K, 0, 0, 0, U(hj_abs))                                \
  X(NEGATE, "negate", 1, 0, UNARY, NUMERIC, CHEAP, K, 0, 0, 0, U(hj_neg))                         \
  X(EXP, "exponential", 1, 0, UNARY, FLOAT, MATH, K, "exp", 1, 0, U(hj_exp))                      \
  X(EXPM1, "exponential-minus-one", 1, 0, UNARY, FLOAT, MATH, K, "expm1", 1, 0, U(hj_expm1))      \
  X(LOG, "log", 1, 0, UNARY, FLOAT, MATH, K, "log", 1, 0, U(hj_log))                              \
  X(LOG1P, "log-plus-one", 1, 0, UNARY, FLOAT, MATH, K, "log1p", 1, 0, U(hj_log1p))               \
  X(LOGISTIC, "logistic", 1, 0, UNARY, FLOAT, MATH, K, 0, 1, 0, U(hj_logistic))                   \
  X(TANH, "tanh", 1, 0, UNARY, FLOAT, MATH, K, "tanh", 1, 0, U(hj_tanh))                          \
  X(SQRT, "sqrt", 1, 0, UNARY, FLOAT, MID, K, 0, 0, 0, U(hj_sqrt))                                \
  X(RSQRT, "rsqrt", 1, 0, UNARY, FLOAT, MID, K, 0, 0, 0, U(hj_rsqrt))                             \
  X(CBRT, "cbrt", 1, 0, UNARY, FLOAT, MATH, K, "cbrt", 0, 0, U(hj_cbrt))                          \
  X(SIN, "sine", 1, 0, UNARY, FLOAT, MATH, K, "sin", 0, 0, U(hj_sin))                             \
  X(COS, "cosine", 1, 0, UNARY, FLOAT, MATH, K, "cos", 0, 0, U(hj_cos))                           \
  X(TAN, "tan", 1, 0, UNARY, FLOAT, MATH, K, "tan", 0, 0, U(hj_tan))                              \
  X(ERF, "erf", 1, 0, UNARY, FLOAT, MATH, K, "erf", 1, 0, U(hj_erf))                              \
  X(FLOOR, "floor", 1, 0, UNARY, FLOAT, CHEAP, K, 0, 0, 0, U(hj_floor))                           \
  X(CEIL, "ceil", 1, 0, UNARY, FLOAT, CHEAP, K, 0, 0, 0, U(hj_ceil))                              \
  X(ROUND_EVEN, "round-nearest-even", 1, 0, UNARY, FLOAT, CHEAP, K, 0, 0, 0, U(hj_round_even))    \
  X(ROUND_AFZ, "round-nearest-afz", 1, 0, UNARY, FLOAT, CHEAP, K, 0, 0, 0, U(hj_round_afz))       \
  X(SIGN, "sign", 1, 0, UNARY, SIGNED, CHEAP, K, 0, 0, 0, U(hj_sign))                             \
  X(NOT, "not", 1, 0, UNARY, BITS, CHEAP, K, 0, 0, 0, U(hj_not))                                  \
  X(IS_FINITE, "is-finite", 1, 0, UNARY, FLOAT, CHEAP, K, 0, 0, 0, U(hj_is_finite))               \
  X(POPCNT, "popcnt", 1, 0, UNARY, INT, CHEAP, K, 0, 0, 0, U(hj_popcnt))                          \
  X(CLZ, "count-leading-zeros", 1, 0, UNARY, INT, CHEAP, K, 0, 0, 0, U(hj_clz))                   \
  X(REDUCE_PRECISION, "reduce-precision", 1, 0, UNARY, FLOAT, CHEAP, K, 0, 0, 0, N)               \
  X(ADD, "add", 2, 0, BINARY, ANY, CHEAP, K, 0, 0, 0, B(hj_add))                                  \
  X(SUBTRACT, "subtract", 2, 0, BINARY, ANY, CHEAP, K, 0, 0, 0, B(hj_sub))                        \
  X(MULTIPLY, "multiply", 2, 0, BINARY, ANY, CHEAP, K, 0, 0, 0, B(hj_mul))                        \
  X(DIVIDE, "divide", 2, 0, BINARY, ANY, MID, K, 0, 0, 0, B(hj_div))                              \
  X(REMAINDER, "remainder", 2, 0, BINARY, ANY, MID, K, 0, 0, 0, B(hj_rem))                        \
  X(POWER, "power", 2, 0, BINARY, ANY, MATH, K, "pow", 0, 0, B(hj_pow))                           \
  X(MAXIMUM, "maximum", 2, 0, BINARY, ANY, CHEAP, K, 0, 0, 0, B(hj_max))                          \
  X(MINIMUM, "minimum", 2, 0, BINARY, ANY, CHEAP, K, 0, 0, 0, B(hj_min))                          \
  X(ATAN2, "atan2", 2, 0, BINARY, FLOAT, MATH, K, "atan2", 0, 0, B(hj_atan2))                     \
  X(AND, "and", 2, 0, BINARY, BITS, CHEAP, K, 0, 0, 0, B(hj_and))                                 \
  X(OR, "or", 2, 0, BINARY, BITS, CHEAP, K, 0, 0, 0, B(hj_or))                                    \
  X(XOR, "xor", 2, 0, BINARY, BITS, CHEAP, K, 0, 0, 0, B(hj_xor))                                 \
  X(SHL, "shift-left", 2, 0, BINARY, INT, CHEAP, K, 0, 0, 0, B(hj_shl))                           \
  X(SHRA, "shift-right-arithmetic", 2, 0, BINARY, INT, CHEAP, K, 0, 0, 0, B(hj_shr_arith))        \
  X(SHRL, "shift-right-logical", 2, 0, BINARY, INT, CHEAP, K, 0, 0, 0, B(hj_shr_logical))         \
  X(REDUCE, "reduce", -1, 1, OTHER, ANY, HEAVY, K, 0, 0, hlo_eval_reduce, N)                      \
  X(REDUCE_WINDOW, "reduce-window", -1, 1, OTHER, ANY, HEAVY, K, 0, 0, hlo_eval_reduce_window, N) \
  X(DOT, "dot", 2, 0, OTHER, ANY, HEAVY, K, 0, 0, hlo_eval_dot, N)                                \
  X(CONVOLUTION, "convolution", 2, 0, OTHER, ANY, HEAVY, K, 0, 0, hlo_eval_convolution, N)         \
  X(SELECT_AND_SCATTER, "select-and-scatter", 3, 2, OTHER, ANY, HEAVY, K, 0, 0,                    \
    hlo_eval_select_and_scatter, N)                                                               \
  X(TUPLE, "tuple", -1, 0, OTHER, ANY, CHEAP, K, 0, 0, 0, N)                                      \
  X(GET_TUPLE_ELEMENT, "get-tuple-element", 1, 0, OTHER, ANY, CHEAP, K, 0, 0, 0, N)               \
  X(CALL, "call", -1, 1, OTHER, ANY, CHEAP, R, 0, 0, 0, N)                                        \
  X(MAP, "map", -1, 1, OTHER, ANY, CHEAP, K, 0, 0, 0, N)                                          \
  X(WHILE, "while", 1, 2, OTHER, ANY, CHEAP, R, 0, 0, 0, N)                                       \
  X(CONDITIONAL, "conditional", -1, -1, OTHER, ANY, CHEAP, R, 0, 0, 0, N)                         \
  X(SORT, "sort", -1, 1, OTHER, ANY, CHEAP, H, 0, 0, hlo_eval_sort, N)                            \
  X(TOPK, "topk", 1, 0, OTHER, ANY, CHEAP, H, 0, 0, evo_topk, N)                                  \
  X(CUSTOM_CALL, "custom-call", -1, 0, OTHER, ANY, HEAVY, R, 0, 0, hlo_eval_custom_call, N)        \
  X(RNG_BIT_GENERATOR, "rng-bit-generator", 1, 0, OTHER, ANY, HEAVY, R, 0, 0, hlo_eval_rng_bits, N) \
  X(FUSION, "fusion", -1, 1, OTHER, ANY, CHEAP, R, 0, 0, 0, N)                                    \
  X(OPT_BARRIER, "opt-barrier", 1, 0, OTHER, ANY, CHEAP, K, 0, 0, 0, N)                           \
  X(GET_DIMENSION_SIZE, "get-dimension-size", 1, 0, OTHER, ANY, CHEAP, K, 0, 0, 0, N)

typedef enum { HLO_KIND_UNARY, HLO_KIND_BINARY, HLO_KIND_ELEM, HLO_KIND_OTHER } hlo_op_kind;
typedef enum { HLO_TYPES_ANY, HLO_TYPES_FLOAT, HLO_TYPES_INT, HLO_TYPES_BITS, HLO_TYPES_SIGNED,
               HLO_TYPES_NUMERIC } hlo_op_types;
typedef enum { HLO_COST_FREE, HLO_COST_INDEX, HLO_COST_CHEAP, HLO_COST_MID, HLO_COST_MATH,
               HLO_COST_HEAVY } hlo_op_cost;
typedef enum { HLO_EMIT_K, HLO_EMIT_H, HLO_EMIT_R } hlo_op_emit;

typedef enum {
#define X(e, ...) HLO_OP_##e,
  HLO_OPCODES(X)
#undef X
  HLO_OP_COUNT
} hlo_opcode;

#endif /* HLOJIT_IR_OPCODES_H */
