/* internal.h — the one private header of hlojit: the HLO IR and every internal prototype,
   grouped by the file that defines them (a `---- file.c ----` line above each group).

   The IR, in XLA's sense:
     module   — computations (callees before callers, as XLA prints them) and the entry;
     comp     — instructions in a topological order (the text's order), a root, parameters;
     instr    — opcode, shape, operands, called computations, attributes.
   Everything of a module lives in the module's arena and dies with it.

   Literals (constants and evaluator values) hold dense, row-major, logical-order data:
   layouts (minor_to_major) are parsed, printed and kept, but never change values, except
   for `bitcast`, whose meaning is physical and which the evaluator honours.
   Element storage: pred = uint8 0/1, f16 and bf16 = uint16 bit patterns. */
#ifndef HLOJIT_INTERNAL_H
#define HLOJIT_INTERNAL_H

#include "../hlojit.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <stb/stb_ds.h>   /* arr* dynamic arrays, hm* hash maps (Debian libstb-dev) */

#define HLO_MAX_RANK HJ_MAX_RANK

/* ---- element types ------------------------------------------------------------------
   X(ENUM, text, bytes, class). The array types share values with hj_dtype_t. */
typedef enum { HLO_CLASS_PRED, HLO_CLASS_SINT, HLO_CLASS_UINT, HLO_CLASS_FLOAT,
               HLO_CLASS_OTHER } hlo_type_class;

#define HLO_TYPES(X)                                                                      \
  X(PRED, "pred", 1, HLO_CLASS_PRED)                                                      \
  X(S8, "s8", 1, HLO_CLASS_SINT)   X(S16, "s16", 2, HLO_CLASS_SINT)                       \
  X(S32, "s32", 4, HLO_CLASS_SINT) X(S64, "s64", 8, HLO_CLASS_SINT)                       \
  X(U8, "u8", 1, HLO_CLASS_UINT)   X(U16, "u16", 2, HLO_CLASS_UINT)                       \
  X(U32, "u32", 4, HLO_CLASS_UINT) X(U64, "u64", 8, HLO_CLASS_UINT)                       \
  X(F16, "f16", 2, HLO_CLASS_FLOAT) X(BF16, "bf16", 2, HLO_CLASS_FLOAT)                   \
  X(F32, "f32", 4, HLO_CLASS_FLOAT) X(F64, "f64", 8, HLO_CLASS_FLOAT)                     \
  X(TUPLE, "tuple", 0, HLO_CLASS_OTHER) X(TOKEN, "token", 0, HLO_CLASS_OTHER)

typedef enum {
#define X(e, s, b, c) HLO_##e,
  HLO_TYPES(X)
#undef X
  HLO_TYPE_COUNT
} hlo_type;
_Static_assert((int)HLO_F64 == (int)HJ_F64 && (int)HLO_TUPLE == (int)HJ_DTYPE_COUNT,
               "hlo_type must extend hj_dtype_t");

/* ---- opcodes --------------------------------------------------------------------------
   X(ENUM, text, arity, kind). arity -1: variadic. Enum, printer and parser derive from it. */
typedef enum { HLO_KIND_UNARY, HLO_KIND_BINARY, HLO_KIND_OTHER } hlo_op_kind;

#define HLO_OPCODES(X)                                                                    \
  X(PARAMETER, "parameter", 0, HLO_KIND_OTHER)                                            \
  X(CONSTANT, "constant", 0, HLO_KIND_OTHER)                                              \
  X(IOTA, "iota", 0, HLO_KIND_OTHER)                                                      \
  X(BROADCAST, "broadcast", 1, HLO_KIND_OTHER)                                            \
  X(RESHAPE, "reshape", 1, HLO_KIND_OTHER)                                                \
  X(BITCAST, "bitcast", 1, HLO_KIND_OTHER)                                                \
  X(TRANSPOSE, "transpose", 1, HLO_KIND_OTHER)                                            \
  X(SLICE, "slice", 1, HLO_KIND_OTHER)                                                    \
  X(DYNAMIC_SLICE, "dynamic-slice", -1, HLO_KIND_OTHER)                                   \
  X(DYNAMIC_UPDATE_SLICE, "dynamic-update-slice", -1, HLO_KIND_OTHER)                     \
  X(CONCATENATE, "concatenate", -1, HLO_KIND_OTHER)                                       \
  X(PAD, "pad", 2, HLO_KIND_OTHER)                                                        \
  X(REVERSE, "reverse", 1, HLO_KIND_OTHER)                                                \
  X(GATHER, "gather", 2, HLO_KIND_OTHER)                                                  \
  X(SCATTER, "scatter", -1, HLO_KIND_OTHER)                                               \
  X(SELECT, "select", 3, HLO_KIND_OTHER)                                                  \
  X(CLAMP, "clamp", 3, HLO_KIND_OTHER)                                                    \
  X(COMPARE, "compare", 2, HLO_KIND_OTHER)                                                \
  X(CONVERT, "convert", 1, HLO_KIND_OTHER)                                                \
  X(BITCAST_CONVERT, "bitcast-convert", 1, HLO_KIND_OTHER)                                \
  X(COPY, "copy", 1, HLO_KIND_OTHER)                                                      \
  X(ABS, "abs", 1, HLO_KIND_UNARY)                                                        \
  X(NEGATE, "negate", 1, HLO_KIND_UNARY)                                                  \
  X(EXP, "exponential", 1, HLO_KIND_UNARY)                                                \
  X(EXPM1, "exponential-minus-one", 1, HLO_KIND_UNARY)                                    \
  X(LOG, "log", 1, HLO_KIND_UNARY)                                                        \
  X(LOG1P, "log-plus-one", 1, HLO_KIND_UNARY)                                             \
  X(LOGISTIC, "logistic", 1, HLO_KIND_UNARY)                                              \
  X(TANH, "tanh", 1, HLO_KIND_UNARY)                                                      \
  X(SQRT, "sqrt", 1, HLO_KIND_UNARY)                                                      \
  X(RSQRT, "rsqrt", 1, HLO_KIND_UNARY)                                                    \
  X(CBRT, "cbrt", 1, HLO_KIND_UNARY)                                                      \
  X(SIN, "sine", 1, HLO_KIND_UNARY)                                                       \
  X(COS, "cosine", 1, HLO_KIND_UNARY)                                                     \
  X(TAN, "tan", 1, HLO_KIND_UNARY)                                                        \
  X(ERF, "erf", 1, HLO_KIND_UNARY)                                                        \
  X(FLOOR, "floor", 1, HLO_KIND_UNARY)                                                    \
  X(CEIL, "ceil", 1, HLO_KIND_UNARY)                                                      \
  X(ROUND_EVEN, "round-nearest-even", 1, HLO_KIND_UNARY)                                  \
  X(ROUND_AFZ, "round-nearest-afz", 1, HLO_KIND_UNARY)                                    \
  X(SIGN, "sign", 1, HLO_KIND_UNARY)                                                      \
  X(NOT, "not", 1, HLO_KIND_UNARY)                                                        \
  X(IS_FINITE, "is-finite", 1, HLO_KIND_UNARY)                                            \
  X(POPCNT, "popcnt", 1, HLO_KIND_UNARY)                                                  \
  X(CLZ, "count-leading-zeros", 1, HLO_KIND_UNARY)                                        \
  X(ADD, "add", 2, HLO_KIND_BINARY)                                                       \
  X(SUBTRACT, "subtract", 2, HLO_KIND_BINARY)                                             \
  X(MULTIPLY, "multiply", 2, HLO_KIND_BINARY)                                             \
  X(DIVIDE, "divide", 2, HLO_KIND_BINARY)                                                 \
  X(REMAINDER, "remainder", 2, HLO_KIND_BINARY)                                           \
  X(POWER, "power", 2, HLO_KIND_BINARY)                                                   \
  X(MAXIMUM, "maximum", 2, HLO_KIND_BINARY)                                               \
  X(MINIMUM, "minimum", 2, HLO_KIND_BINARY)                                               \
  X(ATAN2, "atan2", 2, HLO_KIND_BINARY)                                                   \
  X(AND, "and", 2, HLO_KIND_BINARY)                                                       \
  X(OR, "or", 2, HLO_KIND_BINARY)                                                         \
  X(XOR, "xor", 2, HLO_KIND_BINARY)                                                       \
  X(SHL, "shift-left", 2, HLO_KIND_BINARY)                                                \
  X(SHRA, "shift-right-arithmetic", 2, HLO_KIND_BINARY)                                   \
  X(SHRL, "shift-right-logical", 2, HLO_KIND_BINARY)                                      \
  X(REDUCE, "reduce", -1, HLO_KIND_OTHER)                                                 \
  X(REDUCE_WINDOW, "reduce-window", -1, HLO_KIND_OTHER)                                   \
  X(DOT, "dot", 2, HLO_KIND_OTHER)                                                        \
  X(TUPLE, "tuple", -1, HLO_KIND_OTHER)                                                   \
  X(GET_TUPLE_ELEMENT, "get-tuple-element", 1, HLO_KIND_OTHER)                            \
  X(CALL, "call", -1, HLO_KIND_OTHER)                                                     \
  X(MAP, "map", -1, HLO_KIND_OTHER)                                                       \
  X(WHILE, "while", 1, HLO_KIND_OTHER)                                                    \
  X(CONDITIONAL, "conditional", -1, HLO_KIND_OTHER)                                       \
  X(SORT, "sort", -1, HLO_KIND_OTHER)                                                     \
  X(FUSION, "fusion", -1, HLO_KIND_OTHER)                                                 \
  X(OPT_BARRIER, "opt-barrier", 1, HLO_KIND_OTHER)

typedef enum {
#define X(e, s, a, k) HLO_OP_##e,
  HLO_OPCODES(X)
#undef X
  HLO_OP_COUNT
} hlo_opcode;

typedef enum { HLO_CMP_EQ, HLO_CMP_NE, HLO_CMP_LT, HLO_CMP_LE, HLO_CMP_GT, HLO_CMP_GE,
               HLO_CMP_COUNT } hlo_cmp_dir;  /* same values as hj_cmp_t */
/* compare's type= attribute. DEFAULT: from the element type (FLOAT for floats, SIGNED,
   UNSIGNED); TOTALORDER: floats by total order (-NaN < -inf < ... < -0 < +0 < ... < NaN). */
typedef enum { HLO_CMPT_DEFAULT, HLO_CMPT_FLOAT, HLO_CMPT_TOTALORDER, HLO_CMPT_SIGNED,
               HLO_CMPT_UNSIGNED, HLO_CMPT_COUNT } hlo_cmp_type;
typedef enum { HLO_FUSION_LOOP, HLO_FUSION_INPUT, HLO_FUSION_OUTPUT, HLO_FUSION_CUSTOM,
               HLO_FUSION_KIND_COUNT } hlo_fusion_kind;  /* kLoop kInput kOutput kCustom */

/* ---- shapes, literals, instructions ------------------------------------------------- */
typedef struct hlo_shape {
  hlo_type type;                      /* element type, HLO_TUPLE or HLO_TOKEN */
  int rank;
  int64_t dims[HLO_MAX_RANK];         /* for a bounded dynamic dim: its bound */
  bool dynamic[HLO_MAX_RANK];         /* `<=N` */
  bool has_layout;                    /* a `{...}` layout was given / is meaningful */
  int8_t minor_to_major[HLO_MAX_RANK];
  int ntuple;                         /* tuple: element shapes */
  struct hlo_shape *tuple;
} hlo_shape;

typedef struct { int64_t *v; int n; } hlo_ints;   /* an attribute list like {1,0} */

typedef struct hlo_literal {
  hlo_shape shape;
  uint8_t *data;                      /* array: numel * type size bytes, row-major */
  int64_t nbytes;
  struct hlo_literal **elems;         /* tuple: ntuple element literals */
  int nelems;
  bool owned;                         /* data/elems malloc'd by hlo_literal_new & co. */
} hlo_literal;

typedef struct hlo_dot_dims { hlo_ints lhs_batch, rhs_batch, lhs_contract, rhs_contract; } hlo_dot_dims;
typedef struct hlo_gather_dims {
  hlo_ints offset_dims, collapsed_slice_dims, start_index_map, slice_sizes,
           operand_batching_dims, start_indices_batching_dims;
  int64_t index_vector_dim;
  bool indices_are_sorted;
} hlo_gather_dims;
typedef struct hlo_scatter_dims {
  hlo_ints update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims,
           input_batching_dims, scatter_indices_batching_dims;
  int64_t index_vector_dim;
  bool indices_are_sorted, unique_indices;
} hlo_scatter_dims;

/* window={size=1x10 stride=.. pad=0_0x9_0 lhs_dilate=.. rhs_dilate=..}; absent parts are
   1 (size, stride, dilations) or 0 (pads); n == operand rank when present. */
typedef struct hlo_window {
  hlo_ints size, stride, pad_lo, pad_hi, base_dilation, window_dilation;
} hlo_window;

typedef struct hlo_comp hlo_comp;
typedef struct hj_module hlo_module;

typedef struct hlo_instr {
  hlo_opcode op;
  int id;                             /* unique in the module */
  const char *name;
  hlo_shape shape;
  struct hlo_instr **operands;        /* arena array */
  int noperands;
  hlo_comp **calls;                   /* to_apply / calls / {condition, body} / branches */
  int ncalls;
  hlo_comp *parent;
  /* attributes: only the op's own are meaningful */
  int64_t index;                      /* parameter number, tuple index, iota_dimension */
  hlo_ints dims;                      /* dimensions={}: broadcast reduce transpose reverse
                                         concatenate(1) sort(1) map */
  hlo_ints slice_start, slice_limit, slice_stride;     /* slice={[a:b:s], ...} */
  hlo_ints ds_sizes;                  /* dynamic_slice_sizes */
  hlo_ints pad_lo, pad_hi, pad_interior;               /* padding=lo_hi_int x ... */
  hlo_cmp_dir cmp_dir;
  hlo_cmp_type cmp_type;
  hlo_dot_dims dot;
  hlo_gather_dims gather;
  hlo_scatter_dims scatter;
  hlo_window window;                  /* reduce-window */
  hlo_fusion_kind fusion_kind;
  bool is_stable;                     /* sort */
  bool is_root;
  hlo_literal *literal;               /* constant (arena) */
} hlo_instr;

struct hlo_comp {
  const char *name;
  hlo_instr **instrs;                 /* stb_ds array, topological (text) order */
  hlo_instr **params;                 /* stb_ds array, by parameter number */
  hlo_instr *root;
  hlo_module *module;
  bool is_entry;
};

typedef struct hlo_arena_block hlo_arena_block;
typedef struct hlo_arena {
  hj_ctx_t *ctx;                      /* allocator; may be NULL (malloc) */
  hlo_arena_block *head;
} hlo_arena;

struct hj_module {
  hj_ctx_t *ctx;
  const char *name;
  hlo_arena arena;
  hlo_comp **comps;                   /* stb_ds array, definition order */
  hlo_comp *entry;
  int next_id;
};

struct hj_ctx {
  hj_ctx_options_t opt;
  hj_status last;
  char err[4096];
  /* backends/cpu/cpu_backend.c: the context's JIT and thread pool, made on the first CPU
     compile (NULL until then); freed by hj_ctx_destroy through cpu_backend_ctx_free. */
  void *cpu_backend;
  /* api.c: why HJ_BACKEND_AUTO did not get the CPU backend ("" when it did). */
  char backend_note[512];
};

/* ---- core.c: errors, arenas, string builder, types, shapes, IR construction --------- */
/* Records "fmt..." as the context's message and returns |code| (ctx may be NULL). */
hj_status hj__err(hj_ctx_t *ctx, hj_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void *hj__alloc(hj_ctx_t *ctx, size_t size);       /* ctx's allocator, 64-byte aligned; NULL on OOM */
void hj__free(hj_ctx_t *ctx, void *p);

void hlo_arena_init(hlo_arena *a, hj_ctx_t *ctx);
void *hlo_arena_alloc(hlo_arena *a, size_t size);  /* zeroed, 16-aligned; NULL on OOM */
void hlo_arena_free(hlo_arena *a);

/* A growable string (stb_ds char array, NUL-terminated after each append). */
void sb_printf(char **sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_puts(char **sb, const char *s);

const char *hlo_type_name(hlo_type t);
int hlo_type_size(hlo_type t);                     /* bytes; 0 for tuple/token */
hlo_type_class hlo_type_class_of(hlo_type t);
bool hlo_type_is_float(hlo_type t);
bool hlo_type_is_int(hlo_type t);                  /* signed or unsigned integer (not pred) */
bool hlo_type_from_name(const char *s, size_t n, hlo_type *out);
const char *hlo_opcode_name(hlo_opcode op);
int hlo_opcode_arity(hlo_opcode op);               /* -1: variadic */
hlo_op_kind hlo_opcode_kind(hlo_opcode op);
bool hlo_opcode_from_name(const char *s, size_t n, hlo_opcode *out);
const char *hlo_cmp_dir_name(hlo_cmp_dir d);       /* "EQ", ... */
const char *hlo_cmp_type_name(hlo_cmp_type t);     /* "FLOAT", "TOTALORDER", ... */
const char *hlo_fusion_kind_name(hlo_fusion_kind k);  /* "kLoop", ... */

hlo_shape hlo_shape_array(hlo_type t, int rank, const int64_t *dims); /* default layout */
hlo_shape hlo_shape_scalar(hlo_type t);
void hlo_shape_set_default_layout(hlo_shape *s);   /* minor_to_major = {rank-1, ..., 0} */
bool hlo_shape_is_array(const hlo_shape *s);
int64_t hlo_shape_numel(const hlo_shape *s);       /* arrays; bounds for dynamic dims */
int64_t hlo_shape_bytes(const hlo_shape *s);       /* arrays */
/* Same type, dims, dynamic flags and tuple structure; layouts ignored. */
bool hlo_shape_compatible(const hlo_shape *a, const hlo_shape *b);
bool hlo_shape_equal(const hlo_shape *a, const hlo_shape *b); /* also layouts (where both have one) */
bool hlo_shape_layout_is_default(const hlo_shape *s);
/* Appends "f32[2,<=3]{1,0}" / "(f32[], s32[4])"; layouts printed for rank >= 1 arrays
   when |with_layout|. */
void hlo_shape_print(char **sb, const hlo_shape *s, bool with_layout);
const char *hlo_shape_str(const hlo_shape *s, char *buf, size_t n);  /* for messages */
/* Row-major strides (in elements) of an array shape. */
void hlo_shape_strides(const hlo_shape *s, int64_t *strides);

hlo_module *hlo_module_new(hj_ctx_t *ctx, const char *name);  /* NULL (error set) on OOM */
void hlo_module_free(hlo_module *m);
void *hlo_alloc(hlo_module *m, size_t n);          /* zeroed arena memory */
char *hlo_strdup(hlo_module *m, const char *s);
char *hlo_strndup(hlo_module *m, const char *s, size_t n);
hlo_ints hlo_ints_dup(hlo_module *m, const int64_t *v, int n);
hlo_shape hlo_shape_dup(hlo_module *m, const hlo_shape *s);   /* deep copy of tuples into arena */
hlo_comp *hlo_comp_new(hlo_module *m, const char *name);      /* appended to m->comps */
hlo_comp *hlo_module_find_comp(const hlo_module *m, const char *name);
/* Appends a new instruction to |c|: operands copied, shape deep-copied; name NULL gives
   "<opcode>.<id>". Attributes are zero; the caller fills them. NULL on OOM. */
hlo_instr *hlo_instr_new(hlo_comp *c, hlo_opcode op, const char *name, const hlo_shape *shape,
                         hlo_instr *const *operands, int noperands);
void hlo_instr_set_calls(hlo_instr *ins, hlo_comp *const *calls, int n);
/* Flattened leaves of a (possibly nested tuple) shape, depth first, appended to |out|
   (stb_ds array of pointers into |s|). */
void hlo_shape_leaves(const hlo_shape *s, const hlo_shape ***out);

/* ---- core.c: half-precision and element access --------------------------------------- */
float hlo_f16_to_f32(uint16_t h);
uint16_t hlo_f32_to_f16(float f);                  /* round to nearest even */
float hlo_bf16_to_f32(uint16_t h);
uint16_t hlo_f32_to_bf16(float f);                 /* round to nearest even, NaN stays NaN */
/* Element |i| of raw storage of type |t| read as double / int64 / uint64, and written from
   those (conversion rules of XLA's convert: float->int saturates, NaN->0). */
double hlo_load_f64(hlo_type t, const void *base, int64_t i);
int64_t hlo_load_s64(hlo_type t, const void *base, int64_t i);
uint64_t hlo_load_u64(hlo_type t, const void *base, int64_t i);
void hlo_store_f64(hlo_type t, void *base, int64_t i, double v);
void hlo_store_s64(hlo_type t, void *base, int64_t i, int64_t v);   /* wraps (two's complement) */
void hlo_store_u64(hlo_type t, void *base, int64_t i, uint64_t v);  /* wraps */

/* ---- literal.c: literals ------------------------------------------------------------ */
/* malloc'd literal of |shape| (tuples get element literals), zeroed. NULL (error) on OOM. */
hlo_literal *hlo_literal_new(hj_ctx_t *ctx, const hlo_shape *shape);
void hlo_literal_free(hlo_literal *l);             /* frees owned data and elements */
hlo_literal *hlo_literal_clone(hj_ctx_t *ctx, const hlo_literal *l);
/* A literal viewing |data| (not owned). */
hlo_literal hlo_literal_view(const hlo_shape *shape, void *data);
/* hlo_literal_view_tree: a literal of |s| viewing consecutive array leaves (tuple shapes
   become tuples of views): leaf data = |data|(ud, *k), *k advancing by one per leaf. Every
   allocation goes to the stb_ds array *scratch (the caller frees each and the array, also
   on failure); NULL on OOM. hlo_literal_leaves: appends the array leaves of |l|, depth
   first, to the stb_ds array *out. */
typedef void *(*hlo_leaf_data_fn)(const void *ud, int k);
hlo_literal *hlo_literal_view_tree(const hlo_shape *s, hlo_leaf_data_fn data, const void *ud,
                                   int *k, void ***scratch);
void hlo_literal_leaves(const hlo_literal *l, const hlo_literal ***out);
bool hlo_literal_equal(const hlo_literal *a, const hlo_literal *b);  /* bitwise, same shape */
/* A tuple literal taking ownership of |elems| (n literals made by hlo_literal_new & co.);
   its shape is built from theirs. On failure (NULL, error set) the elements are freed. */
hlo_literal *hlo_literal_tuple(hj_ctx_t *ctx, hlo_literal **elems, int n);

/* ---- shape_infer.c: shape inference ---------------------------------------------------
   Computes the result shape of |ins| from its operands, called computations and attributes
   (the result layout is the default). Used by the parser for shape-less instructions and by
   the builder and verifier. Errors name the op and the shapes. */
hj_status hlo_infer_shape(hj_ctx_t *ctx, const hlo_instr *ins, hlo_shape *out);
/* shape_infer.c helpers shared with shape_infer_index.c (dynamic-slice, dynamic-update-
   slice, gather, scatter; hlo_infer_shape in shape_infer.c is the one switch).
   hlo_si_cx: the instruction being inferred, with room for the shapes of one message.
   hlo_si_err: HJ_ERR_SHAPE with "op 'NAME' (instr): msg". hlo_si_str: |s| as text in
   c->buf[k] (k < 4). hlo_si_op: operand |i|'s shape. hlo_si_nops / hlo_si_array: the
   operand count is |n| / operand |i| is an array, else an error. hlo_si_result: |s| with
   the default layout. hlo_si_same_dims: equal rank and dims. hlo_si_dims_ok: |v| holds
   distinct values in [0, n) (|sorted|: strictly increasing). hlo_si_has: |x| is in |v|.
   hlo_si_ints_str: "{1,2}" into |buf|. hlo_si_tuple: a tuple of |n| shapes in the
   module's arena (|elems| NULL: the caller fills them). hlo_si_reducer: called
   computation |ci| takes 2N scalars of |types| and returns N of them (scalar or tuple).
   hlo_si_index_op (shape_infer_index.c): the four indexing ops. */
typedef struct hlo_si_cx {
  hj_ctx_t *ctx;
  const hlo_instr *ins;
  char buf[4][200];     /* shape strings for one message */
} hlo_si_cx;
hj_status hlo_si_err(hlo_si_cx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *hlo_si_str(hlo_si_cx *c, int k, const hlo_shape *s);
const hlo_shape *hlo_si_op(hlo_si_cx *c, int i);
hj_status hlo_si_nops(hlo_si_cx *c, int n);
hj_status hlo_si_array(hlo_si_cx *c, int i);
hlo_shape hlo_si_result(const hlo_shape *s);
bool hlo_si_same_dims(const hlo_shape *a, const hlo_shape *b);
bool hlo_si_dims_ok(hlo_ints v, int64_t n, bool sorted);
bool hlo_si_has(hlo_ints v, int64_t x);
const char *hlo_si_ints_str(hlo_ints v, char *buf, size_t n);
hj_status hlo_si_tuple(hlo_si_cx *c, const hlo_shape *elems, int n, hlo_shape *out);
hj_status hlo_si_reducer(hlo_si_cx *c, int ci, const hlo_type *types, int n);
hj_status hlo_si_index_op(hlo_si_cx *c, hlo_shape *out);

/* ---- verify.c: the verifier -----------------------------------------------------------
   Structure (operand counts, called computations and their signatures, parameter numbers,
   a root per computation, an entry, attributes in range) and shapes (declared shape ==
   inferred shape, layouts ignored; layouts valid permutations). */
hj_status hlo_verify_module(hlo_module *m);

/* ---- hlo_print.c: HLO text printer ----------------------------------------------------
   Writes text XLA's parser reads: `HloModule name, entry_computation_layout={...}`, then
   each computation `name {` ... `}` (callees first, `ENTRY` on the entry, `ROOT` on roots),
   every instruction with its full shape and layout, operands by name. */
hj_status hlo_print_module(const hlo_module *m, char **out);  /* *out malloc'd */
void hlo_print_instr(char **sb, const hlo_instr *ins);         /* one line, no newline */
void hlo_print_literal(char **sb, const hlo_literal *l);       /* `{1, 2}` / `1.5` / `(..)` */

/* ---- hlo_parse.c: HLO text parser ----------------------------------------------------- */
hj_status hlo_parse_module(hj_ctx_t *ctx, const char *text, size_t len, const char *filename,
                           hlo_module **out);

/* ---- hlo_lex.c: tokenizer of HLO text (used only by hlo_parse*.c) ----------------------
   The text need not be NUL-terminated: every read is bounded by |len|. Tokens are byte
   spans of the text; line:column are worked out only when an error is reported. */
typedef enum { HLO_TK_EOF, HLO_TK_IDENT, HLO_TK_INT, HLO_TK_FLOAT, HLO_TK_STRING,
               HLO_TK_PUNCT, HLO_TK_ARROW, HLO_TK_ERROR } hlo_tok_kind;
typedef struct hlo_tok {
  hlo_tok_kind kind;
  size_t pos;                         /* first byte (the '%' of "%name", the '"' of a string) */
  const char *s;                      /* payload: name without '%', string without quotes */
  size_t n;
  char c;                             /* PUNCT: the character */
  const char *err;                    /* ERROR: what is wrong (static text) */
} hlo_tok;
typedef struct hlo_lexer { const char *text; size_t len, pos; } hlo_lexer;

void hlo_lex_init(hlo_lexer *lx, const char *text, size_t len);
hlo_tok hlo_lex_next(hlo_lexer *lx);                 /* skips blanks and comments first */
hlo_tok hlo_lex_peek(const hlo_lexer *lx);
/* Next significant character (after blanks and comments) without consuming it; -1 at the
   end or before an unterminated comment. */
int hlo_lex_peekc(hlo_lexer *lx);
int hlo_lex_rawc(const hlo_lexer *lx, size_t pos);   /* byte at |pos|, -1 past the end */
/* `-?[0-9]+` right at lx->pos (no blanks skipped): 0 ok, 1 no digits, 2 overflow. */
int hlo_lex_raw_int(hlo_lexer *lx, int64_t *v);
/* Skips one balanced `{...}`, `(...)` or `[...]` group (strings and comments inside are
   honoured, nesting at most 64) starting at the next significant character, or else one
   bare word (`true`, `1`, `kLoop`). false: *errpos and *err say what is wrong. */
bool hlo_lex_skip_value(hlo_lexer *lx, size_t *errpos, const char **err);
/* Token text as numbers. INT: false on overflow of 64 bits. FLOAT/INT: correctly rounded
   (strtod/strtof in the C locale); "inf", "-inf", "nan", "-nan" are accepted. */
bool hlo_lex_tok_int(const hlo_tok *t, bool *neg, uint64_t *mag);
bool hlo_lex_tok_double(const hlo_tok *t, double *d);
bool hlo_lex_tok_float(const hlo_tok *t, float *f);
/* Records "file:line:col: msg\n<source line>\n<caret>" in |ctx| and returns |code|. */
hj_status hlo_lex_error(const hlo_lexer *lx, hj_ctx_t *ctx, const char *filename, size_t pos,
                        hj_status code, const char *msg);

/* ---- hlo_parse.c, hlo_parse_attrs.c: parser state shared by the two files ------------- */
typedef struct hlo_prs_fixup {        /* a use of a computation not defined yet */
  hlo_instr *ins;
  int slot;                           /* index into ins->calls */
  const char *name;
  size_t pos;
} hlo_prs_fixup;
typedef struct hlo_parser {
  hj_ctx_t *ctx;
  const char *filename;
  hlo_lexer lx;
  hlo_module *m;
  hlo_comp *comp;                                   /* computation being parsed */
  struct hlo_prs_name { char *key; hlo_instr *value; } *names;  /* its instructions */
  struct hlo_prs_comp { char *key; hlo_comp *value; } *comps;   /* computations by name */
  struct hlo_prs_param { hlo_instr *ins; size_t pos; } *params;  /* its parameters (stb_ds) */
  struct hlo_prs_cpos { hlo_comp *key; size_t value; } *comp_pos; /* where each is named */
  struct hlo_prs_ipos { hlo_instr *key; size_t value; } *instr_pos; /* where each is written */
  hlo_prs_fixup *fixups;                            /* stb_ds */
  char *tmp;                                        /* stb_ds scratch for NUL-terminated names */
  int depth;                                        /* tuples, literals, nested operands */
} hlo_parser;
#define HLO_PRS_MAX_DEPTH 64
/* Formats the message and reports it at byte |pos| (see hlo_lex_error). */
hj_status hlo_prs_err(hlo_parser *P, size_t pos, hj_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Reports |t| as unexpected ("expected WHAT, got 'x'"), or the lexer's own error. */
hj_status hlo_prs_unexpected(hlo_parser *P, const hlo_tok *t, const char *what);
hj_status hlo_prs_expect(hlo_parser *P, char punct);   /* consumes |punct| or fails */
bool hlo_prs_accept(hlo_parser *P, char punct);        /* consumes |punct| if next */
const char *hlo_prs_cstr(hlo_parser *P, const char *s, size_t n);  /* valid until next call */
/* hlo_parse_attrs.c: `, name=value` attributes of |ins| up to the end of the instruction
   (|oppos|: where the opcode is, for "missing attribute" errors); the constant literal. */
hj_status hlo_prs_attrs(hlo_parser *P, hlo_instr *ins, size_t oppos, bool allow_attrs);
hj_status hlo_prs_literal(hlo_parser *P, hlo_instr *ins);

/* ---- eval.c, eval_ops.c: reference evaluator ------------------------------------------
   Runs |c| on |args| (one literal per parameter; tuple parameters as tuple literals).
   *out is a new literal the caller frees with hlo_literal_free. */
hj_status hlo_eval_computation(hj_ctx_t *ctx, const hlo_comp *c, hlo_literal *const *args,
                               int nargs, hlo_literal **out);
hj_status hlo_eval_module(hj_ctx_t *ctx, const hlo_module *m, hlo_literal *const *args,
                          int nargs, hlo_literal **out);
/* eval_ops.c: the structural ops. |ops| are the evaluated operands; *out is a new literal.
   Returns HJ_ERR_UNSUPPORTED for opcodes it does not handle. */
hj_status hlo_eval_structural(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops, hlo_literal **out);
/* eval.c: applies a scalar computation (reduce/scatter/sort/map comparator) to |n| scalar
   literals; fast paths are the caller's business. */
hj_status hlo_eval_scalar_call(hj_ctx_t *ctx, const hlo_comp *c, hlo_literal *const *args, int n, hlo_literal **out);
/* eval.c: elementwise unary/binary on raw element values (used by eval_ops.c fast paths for
   reducers): applies |op| (an HLO_KIND_BINARY opcode) to element i of a and element j of b
   (both of type t), storing into element k of dst (type t). */
void hlo_eval_binary_elem(hlo_opcode op, hlo_type t, const void *a, int64_t i, const void *b, int64_t j, void *dst, int64_t k);

/* ---- eval_elem.c: the evaluator's elementwise kernels ----------------------------------
   unary and binary ops, compare, select, clamp, convert, copy, and bitcast-convert between
   types of one width, on raw element storage, with XLA's semantics for every type. */
typedef struct hlo_elem_op {
  hlo_opcode op;
  hlo_type out;                       /* result element type */
  hlo_type in[3];                     /* operand element types */
  int nin;
  hlo_cmp_dir dir;                    /* compare */
  hlo_cmp_type cmp_type;              /* compare */
} hlo_elem_op;
/* Fills |e| from |ins|; false when |ins| is not one of the ops above (or not on arrays). */
bool hlo_elem_op_of(const hlo_instr *ins, hlo_elem_op *e);
/* NULL when the kernels handle |e|, else why not ("not defined on s32", ...). */
const char *hlo_elem_unsupported(const hlo_elem_op *e);
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
   hlo_evo_err: HJ_ERR_SHAPE with "op 'NAME' (name: result shape; operand shapes): msg".
   hlo_evo_binary_reducer: the opcode when |c| is exactly op(param0, param1) on scalars of
   type |t| for op in {add multiply maximum minimum and or}, else HLO_OP_COUNT; *swapped
   says the root is op(param1, param0) (max/min are not bitwise commutative on ±0, NaN). */
bool hlo_evo_next(int rank, const int64_t *dims, int64_t *idx);
void hlo_evo_copy(void *dst, int64_t dst_off, const int64_t *dst_strides, const void *src,
                  int64_t src_off, const int64_t *src_strides, int rank, const int64_t *dims,
                  int esize);
int64_t hlo_evo_load_index(hlo_type t, const void *base, int64_t i);
hj_status hlo_evo_err(hj_ctx_t *ctx, const hlo_instr *ins, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
hlo_opcode hlo_evo_binary_reducer(const hlo_comp *c, hlo_type t, bool *swapped);
/* The slow path of reduce, reduce-window and scatter: for k < n (n <= HLO_EVO_MAX_N),
   acc[k][ai] = c(acc[0][ai], ..., acc[n-1][ai], x[0][xi], ..., x[n-1][xi])_k through
   hlo_eval_scalar_call. */
#define HLO_EVO_MAX_N 32
hj_status hlo_evo_combine(hj_ctx_t *ctx, const hlo_comp *c, int n, hlo_literal *const *acc,
                          int64_t ai, hlo_literal *const *x, int64_t xi);
/* eval_gather.c / eval_reduce.c: fill the preallocated result |r| (shape ins->shape). */
hj_status hlo_eval_gather(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops, hlo_literal *r);
hj_status hlo_eval_scatter(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops, hlo_literal *r);
hj_status hlo_eval_reduce(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops, hlo_literal *r);
hj_status hlo_eval_reduce_window(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops, hlo_literal *r);
hj_status hlo_eval_sort(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops, hlo_literal *r);
hj_status hlo_eval_dot(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops, hlo_literal *r);

/* ---- ir_clone.c: deep copies of modules and instructions -------------------------------
   hlo_module_clone: a copy of |m| with its own arena (computations in the same order, ids,
   names, literals, attributes and called computations all copied); NULL (error in
   m->ctx) on OOM. hlo_module_clone_in: the same, the copy belonging to |ctx| (its arena
   and its errors), e.g. a compile's context. hlo_instr_clone_into: appends a copy of
   |src| to |c| with |operands| (src->noperands of them) and |calls| (src->ncalls),
   every attribute and the literal copied into c's module; |name| NULL keeps src's name.
   NULL on OOM. hlo_instr_dup_lists: gives |d| (a struct copy of another instruction) its
   own copy in m's arena of every hlo_ints attribute (dims, slice, pad, dot, gather, scatter,
   window lists); false on OOM. */
hlo_module *hlo_module_clone(const hlo_module *m);
hlo_module *hlo_module_clone_in(hj_ctx_t *ctx, const hlo_module *m);
hlo_instr *hlo_instr_clone_into(hlo_comp *c, const hlo_instr *src, const char *name,
                                hlo_instr *const *operands, hlo_comp *const *calls);
bool hlo_instr_dup_lists(hlo_module *m, hlo_instr *d);

/* ---- passes ----------------------------------------------------------------------------
   One entry point per file; *changed says whether the module changed. Each leaves a module
   that verifies. */
/* passes/inline_calls.c: every `call` replaced by a copy of its callee's body (repeated
   until no call is left); computations no longer called are removed. */
hj_status pass_inline_calls(hlo_module *m, bool *changed);
/* passes/wrap_fusions.c: in the entry and in while/conditional computations reachable
   from it, every instruction that is not parameter, constant, tuple, get-tuple-element,
   reshape, bitcast with default layouts, fusion, while, conditional or opt-barrier becomes
   a single-op fusion "wrapped_NAME" (kInput for reduce, kOutput for dot, else kLoop)
   calling a new computation "wrapped_NAME_computation" placed before its user in m->comps
   (an operand used twice is passed once). Idempotent. */
hj_status pass_wrap_fusions(hlo_module *m, bool *changed);
/* passes/dce.c: drops instructions nobody uses (parameters and roots stay) and
   computations unreachable from the entry. */
hj_status pass_dce(hlo_module *m, bool *changed);
/* passes/dce.c: only the sweep of unreachable computations; true when any was removed. */
bool pass_dce_comps(hlo_module *m);

/* ---- ir_edit.c ------------------------------------------------------------------------------
   Editing utilities for passes. Users are computed on demand (the IR stores none): after
   editing, rebuild a user map. Edits that make an earlier instruction use a later one are
   fixed by hlo_comp_topo_sort (stable: the identity on an order that is already
   topological). Cloning an instruction into another computation: hlo_instr_clone_into
   (ir_clone.c).
   hlo_users: the distinct users of |ins| in |c| in text order; *out is an stb_ds array the
   caller arrfree's; returns their number. hlo_user_count: the same number, no array.
   hlo_user_map: users of every instruction of one computation (each user listed once per
   operand instruction, text order); hlo_user_map_get returns the stb_ds array (NULL: no
   users; do not free) and its length in *n (n may be NULL).
   hlo_comp_set_root: sets c->root and the is_root flags.
   hlo_replace_operand: every operand slot of |user| equal to |old| becomes |neu|; true if any.
   hlo_replace_all_uses: every use of |old| in |c| (and c's root) becomes |neu| (|neu| itself
   is left alone, so neu = f(old) works); true if anything changed. |old| stays in c.
   hlo_remove_instr: drops |ins| from c->instrs (the caller made sure nothing uses it);
   false (nothing done) for parameters, the root, or an instruction not in |c|.
   hlo_instr_move_before: moves |ins| to just before |before| (NULL: to the end).
   hlo_instr_new_before: hlo_instr_new, placed before |before| (NULL: appended).
   hlo_comp_topo_sort: stable topological re-sort; HJ_ERR_INTERNAL on a cycle or on an
   operand that is not in |c|.
   hlo_comp_dce: drops instructions the root does not reach (parameters stay).
   hlo_module_reachable: entry first, then the computations it calls (transitively),
   breadth first; *out: stb_ds array to arrfree.
   hlo_module_prune_comps: drops computations the entry does not reach from m->comps.
   hlo_module_dce: prune + hlo_comp_dce of every computation.
   hlo_literal_to_arena: a deep copy of |l| in m's arena (owned = false); NULL on OOM.
   hlo_constant_new_before: a constant instruction holding an arena copy of |l| (shape:
   l's, default layout unless l's has one), before |before|; NULL (error set) on OOM. */
typedef struct hlo_user_map {
  struct hlo_user_entry { int key; hlo_instr **value; } *map;   /* stb_ds, by instr id */
} hlo_user_map;
int hlo_users(const hlo_comp *c, const hlo_instr *ins, hlo_instr ***out);
int hlo_user_count(const hlo_comp *c, const hlo_instr *ins);
void hlo_user_map_build(hlo_user_map *um, const hlo_comp *c);
hlo_instr **hlo_user_map_get(const hlo_user_map *um, const hlo_instr *ins, int *n);
void hlo_user_map_free(hlo_user_map *um);
void hlo_comp_set_root(hlo_comp *c, hlo_instr *root);
bool hlo_replace_operand(hlo_instr *user, const hlo_instr *old, hlo_instr *neu);
bool hlo_replace_all_uses(hlo_comp *c, hlo_instr *old, hlo_instr *neu);
bool hlo_remove_instr(hlo_comp *c, hlo_instr *ins);
bool hlo_instr_move_before(hlo_comp *c, hlo_instr *ins, const hlo_instr *before);
hlo_instr *hlo_instr_new_before(hlo_comp *c, const hlo_instr *before, hlo_opcode op,
                                const char *name, const hlo_shape *shape,
                                hlo_instr *const *operands, int noperands);
hj_status hlo_comp_topo_sort(hlo_comp *c);
hj_status hlo_comp_dce(hlo_comp *c, bool *changed);
hj_status hlo_module_reachable(const hlo_module *m, hlo_comp ***out);
hj_status hlo_module_prune_comps(hlo_module *m, bool *changed);
hj_status hlo_module_dce(hlo_module *m, bool *changed);
hlo_literal *hlo_literal_to_arena(hlo_module *m, const hlo_literal *l);
hlo_instr *hlo_constant_new_before(hlo_comp *c, const hlo_instr *before, const hlo_literal *l);

/* ---- passes/pass.c, passes/pipeline.c --------------------------------------------------------
   The pass framework (DESIGN.md section 4). A pass is
     hj_status hlo_pass_NAME(hlo_pass_ctx *pc, hlo_module *m, bool *changed);
   it edits |m| in place, sets *changed, and leaves a module that verifies.
   hlo_pass_ctx_init: |dump_dir| from ctx->opt.dump_dir, else $HLOJIT_DUMP_TO, else NULL
   (no dumps); verify_each false (debug builds verify after every pass anyway).
   hlo_pass_run: runs |fn|; then verifies the module (#ifndef NDEBUG, or verify_each; a
   failure names the pass) and, with a dump dir, writes DUMP_DIR/NNN.NAME.txt (HLO text,
   NNN = ++dump_seq, written whether or not the pass changed anything).
   hlo_pass_dump: writes one such file (the pipeline dumps "input" first).
   hlo_run_pipeline: the whole list (pipeline.c); |opt| NULL: defaults. */
typedef struct hlo_pass_ctx {
  hj_ctx_t *ctx;
  const char *dump_dir;     /* NULL: no dumps */
  int dump_seq;             /* number of the last dump file */
  bool verify_each;         /* verify after every pass in release builds too */
} hlo_pass_ctx;
typedef hj_status (*hlo_pass_fn)(hlo_pass_ctx *pc, hlo_module *m, bool *changed);
typedef struct hlo_pipeline_options {
  bool fusion;              /* run the fusion passes; default true */
  bool layout_norm;         /* default true */
  int max_simplify_rounds;  /* algsimp/fold/CSE/DCE repeated until no change; default 8 */
} hlo_pipeline_options;
void hlo_pass_ctx_init(hlo_pass_ctx *pc, hj_ctx_t *ctx);
hj_status hlo_pass_run(hlo_pass_ctx *pc, const char *name, hlo_pass_fn fn, hlo_module *m,
                       bool *changed);
hj_status hlo_pass_dump(hlo_pass_ctx *pc, const char *name, const hlo_module *m);
void hlo_pipeline_options_init(hlo_pipeline_options *o);
hj_status hlo_run_pipeline(hlo_pass_ctx *pc, hlo_module *m, const hlo_pipeline_options *opt);
/* The simplification passes (one file each under passes/; see each file's comment).
   hlo_pass_inline_calls and hlo_pass_dce adapt pass_inline_calls and pass_dce. */
hj_status hlo_pass_inline_calls(hlo_pass_ctx *pc, hlo_module *m, bool *changed);
hj_status hlo_pass_tuple_simplify(hlo_pass_ctx *pc, hlo_module *m, bool *changed);
hj_status hlo_pass_algsimp(hlo_pass_ctx *pc, hlo_module *m, bool *changed);
hj_status hlo_pass_constant_fold(hlo_pass_ctx *pc, hlo_module *m, bool *changed);
hj_status hlo_pass_cse(hlo_pass_ctx *pc, hlo_module *m, bool *changed);
hj_status hlo_pass_dce(hlo_pass_ctx *pc, hlo_module *m, bool *changed);
hj_status hlo_pass_layout_norm(hlo_pass_ctx *pc, hlo_module *m, bool *changed);
/* The fusion passes (passes/fusion.c, sibling_fusion.c, epilogue_fusion.c). pipeline.c
   redeclares one weak while its file is absent and then skips it, so it builds first. */
hj_status hlo_pass_fusion(hlo_pass_ctx *pc, hlo_module *m, bool *changed);
hj_status hlo_pass_sibling_fusion(hlo_pass_ctx *pc, hlo_module *m, bool *changed);
hj_status hlo_pass_matmul_epilogue_fusion(hlo_pass_ctx *pc, hlo_module *m, bool *changed);

/* ---- passes/fusion.c, fusion_util.c, sibling_fusion.c, epilogue_fusion.c, schedule.c -------
   hlo_count_kernels (fusion.c): instructions of the entry that run as a kernel: fusions
   and every other instruction except parameter, constant, tuple, get-tuple-element,
   bitcast and reshape (the runtime aliases those).
   fusion_util.c, the surgery shared by the fusion passes:
   hlo_op_is_elementwise: unary/binary ops, select, clamp, compare, convert, copy,
   same-width bitcast-convert, on arrays. hlo_transpose_is_real: a transpose that moves
   data (not only size-1 dims). hlo_fusion_hero: the dot, else the first reduce, else the
   first real transpose of a fused computation (NULL: none). hlo_fusion_relabel: kind from
   the hero (dot kOutput, reduce kInput, else kLoop). hlo_shape_total_bytes: bytes of all
   array leaves. hlo_fusion_make: replaces |ins| of |c| by a one-instruction fusion (in
   its place, uses redirected; its fused computation goes before |c| in m->comps); NULL
   (error set) on OOM. hlo_fusion_absorb: clones |producer| (plain, or a fusion with an
   array root) into |fusion| in place of the parameter(s) that stood for it; the
   producer's operands become operands of the fusion (distinct); |dup|: give the clones
   fresh names (the producer stays in use elsewhere); the producer itself stays in |c|.
   schedule.c: hlo_pass_schedule reorders the entry and the while/conditional
   computations reached from it (a topological order) to lower peak live bytes: a greedy
   list scheduler that runs the ready instruction freeing the most bytes. With a dump dir
   it writes DUMP_DIR/schedule.txt (bytes before/after per computation).
   hlo_schedule_comp: the same for one computation; *before / *after (may be NULL): peak
   bytes (hlo_peak_live_bytes) before and after.
   hlo_peak_live_bytes: arena bytes for the intermediate values of |c| in its text order:
   one buffer per value-producing instruction (not parameters, constants, root outputs or
   aliases: reshape, default-layout bitcast, tuple, get-tuple-element, opt-barrier),
   live from its instruction to its last (alias-followed) use, placed first-fit, 64-byte
   aligned. hlo_unshared_bytes: the same buffers' sum without reuse (one buffer per
   instruction). */
int hlo_count_kernels(const hlo_module *m);
bool hlo_op_is_elementwise(const hlo_instr *ins);
bool hlo_transpose_is_real(const hlo_instr *t);
const hlo_instr *hlo_fusion_hero(const hlo_comp *fc);
void hlo_fusion_relabel(hlo_instr *fusion);
int64_t hlo_shape_total_bytes(const hlo_shape *s);
hlo_instr *hlo_fusion_make(hlo_comp *c, hlo_instr *ins);
/* Does |x| read a dot (or a dot fusion) that nothing else in |c| reads? epilogue_fusion.c
   may still give |x| to that dot, so the other fusion passes leave it alone. */
bool hlo_reads_lone_dot(const hlo_comp *c, const hlo_instr *x);
/* Moves |nc|, the computation appended last to m->comps, to just before |before| (callees
   first); it stays last when |before| is not in m->comps. */
void hlo_module_insert_comp_before(hlo_module *m, hlo_comp *nc, const hlo_comp *before);
/* The entry and the while/conditional computations reached from it (stb_ds array). */
void hlo_control_comps(hlo_comp *entry, hlo_comp ***out);
/* A fusion pass's driver: |fn|(comp, &any) on each of hlo_control_comps(m->entry) until one
   fails; then, when any changed, hlo_module_prune_comps; *changed (may be NULL) = any. */
typedef hj_status (*hlo_comp_pass_fn)(hlo_comp *c, bool *changed);
hj_status hlo_fusion_run_control_comps(hlo_module *m, hlo_comp_pass_fn fn, bool *changed);
hj_status hlo_fusion_absorb(hlo_comp *c, hlo_instr *fusion, hlo_instr *producer, bool dup);
hj_status hlo_pass_schedule(hlo_pass_ctx *pc, hlo_module *m, bool *changed);
hj_status hlo_schedule_comp(hlo_comp *c, int64_t *before, int64_t *after);
int64_t hlo_peak_live_bytes(const hlo_comp *c);
int64_t hlo_unshared_bytes(const hlo_comp *c);

/* ---- runtime/buffer_assign.c: where every value of one computation lives ---------------
   Values are the array leaves of the computation's instructions (tuple shapes flattened
   depth first). Each leaf maps to a storage group; aliases (tuple, get-tuple-element,
   reshape, default-layout bitcast, opt-barrier) share their operand's group, an in-place
   dynamic-update-slice shares its operand 0's. A group lives in the caller's input buffer
   (a parameter leaf), the caller's output buffer (a root leaf written by a kernel), a
   constant, or one 64-byte aligned slot of the arena, reused first-fit once its last user
   has run (liveness over the text order). */
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
typedef struct ba_plan {
  const hlo_comp *comp;
  /* per instruction (index = position in comp->instrs): its leaves' locations */
  ba_loc **leaves;          /* stb_ds array of stb_ds arrays */
  bool *dus_inplace;        /* per instruction: a fusion updating its operand 0 in place */
  int64_t *scratch;         /* per instruction: arena offset of its scratch, -1 if none */
  ba_const *consts;         /* stb_ds */
  ba_copy *copies;          /* stb_ds: root leaves copied at the end */
  int nin, nout;            /* flattened parameter leaves, root leaves */
  int64_t arena_bytes;      /* peak */
  int64_t values_bytes;     /* sum of arena values without reuse (for the dump) */
  int *inplace_operand;     /* per instruction: the operand whose arena slot the fusion's
                               output 0 takes (in-place elementwise, ba_assign_ex), -1 none */
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

/* ---- backends/cpu/cpu_backend.c: the CPU backend as api.c sees it ----------------------
   cpu_backend_compile: clones |m| and compiles the copy (the executable does not keep |m|).
   cpu_backend_run: |in| / |out| are the flattened leaves' host pointers (outputs must not
   alias inputs; the caller sees to it). One run at a time per executable. */
typedef struct cpu_exec cpu_exec;
hj_status cpu_backend_compile(hj_ctx_t *ctx, const hlo_module *m, cpu_exec **out);
hj_status cpu_backend_run(cpu_exec *x, void *const *in, int nin, void *const *out, int nout);
void cpu_backend_exec_free(cpu_exec *x);
void cpu_backend_stats(const cpu_exec *x, hj_exec_stats_t *s);
void cpu_backend_ctx_free(hj_ctx_t *ctx);           /* the JIT and pool of ctx->cpu_backend */

/* ---- npy.c: NumPy .npy files ------------------------------------------------------------ */
hj_status hlo_npy_read(hj_ctx_t *ctx, const char *path, hlo_literal **out);
hj_status hlo_npy_write(hj_ctx_t *ctx, const char *path, const hlo_literal *l);

/* ---- api.c, builder.c, composites.c: graphs, executables, buffers ---------------------
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
  bool frozen;                        /* sub-graph whose root was fixed by a use */
  int nparams;
  hj_status status;                   /* first error of an op on this graph */
  char err[1024];
  /* top only: small computations built once and reused (NULL until first use) */
  hlo_comp *reducers[HJ_RED_COUNT][HJ_DTYPE_COUNT];
  hlo_comp *sorters[2][HJ_DTYPE_COUNT];          /* ascending, descending */
  struct hj_graph *argmax_fns[HJ_DTYPE_COUNT];
};

struct hj_buffer {
  hj_ctx_t *ctx;
  hj_dtype_t dtype;
  hj_shape_t shape;
  size_t nbytes;
  void *data;                         /* hj__alloc'd, 64-byte aligned */
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
hlo_comp *hj__comp_new(hlo_module *m, const char *name);
/* api.c: a copy of the graph's module with its computations in callee-first order and
   the entry last (root: the single output or a tuple of outputs). */
hj_status hj__graph_module(hj_graph_t *g, hlo_module **out);

/* ---- passes/dot_canon.c ------------------------------------------------------------------
   Rewrites every dot of every computation into the matmul emitter's form: lhs [B,M,K] or
   [M,K] (contracting = last), rhs [B,K,N]/[K,N] or, when that avoids a physical transpose,
   [B,N,K]/[N,K]; batch dims {0} or none; transposes/reshapes around it, and a reshape of the
   [B,M,N] result back to the dot's shape. *changed: some dot was rewritten. */
hj_status pass_dot_canonicalize(hlo_module *m, bool *changed);

/* ---- passes/fusion_split.c ---------------------------------------------------------------
   The computation partitioner: a fused instruction that the elemental emitter would
   evaluate at more than 8 distinct index tuples (64 for index maps only) is materialised
   by a fusion of its own placed before its consumer (chains of slices/broadcast diamonds
   otherwise emit exponentially). Run by the CPU backend after the pipeline. Exact.
   hlo_fusion_index_tuples: the most distinct index tuples at which the emitter evaluates
   one non-leaf instruction of fused computation |fc| (capped at 65); for tests. */
hj_status pass_fusion_split(hlo_module *m, bool *changed);
int hlo_fusion_index_tuples(const hlo_comp *fc);

#endif /* HLOJIT_INTERNAL_H */
