/* ir/ir.h — the HLO IR: the part every other part of hlojit stands on. It knows nothing
   above it (no text, evaluator, pass, emitter, runtime or backend).

   Owns: element types and opcodes (X-macro tables), shapes with layouts and bounded
   dynamic dims, literals, modules / computations / instructions and their arenas, the
   context struct (errors, allocator), shape inference, the verifier, cloning and editing
   utilities, and the opcode facts the evaluator, passes and emitters share (opcodes.h,
   opfacts.c). Prototypes are grouped by the file that defines them.

   The IR, in XLA's sense:
     module   — computations (callees before callers, as XLA prints them) and the entry;
     comp     — instructions in a topological order (the text's order), a root, parameters;
     instr    — opcode, shape, operands, called computations, attributes.
   Everything of a module lives in the module's arena and dies with it.

   Literals (constants and evaluator values) hold dense, row-major, logical-order data:
   layouts (minor_to_major) are parsed, printed and kept, but never change values, except
   for `bitcast`, whose meaning is physical and which the evaluator honours.
   Element storage: pred = uint8 0/1, f16 and bf16 = uint16 bit patterns. */
#ifndef HLOJIT_IR_H
#define HLOJIT_IR_H

#include "../../hlojit.h"
#include <pthread.h>
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

/* ---- opcodes: the table and its facts live in opcodes.h ---------------------------- */
#include "opcodes.h"

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
  /* owned: the allocator all of it came from (the context's at hlo_literal_new / clone /
     tuple; a copy, so the literal may outlive that context; all NULL: malloc/free) */
  hj_allocator_t alloc;
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

/* window={size=1x10 stride=.. pad=0_0x9_0 lhs_dilate=.. rhs_dilate=.. rhs_reversal=..};
   absent parts are 1 (size, stride, dilations) or 0 (pads, reversal); n == the number of
   windowed dims (operand rank; a convolution's spatial dims) when present. */
typedef struct hlo_window {
  hlo_ints size, stride, pad_lo, pad_hi, base_dilation, window_dilation, reversal;
} hlo_window;

/* A convolution's dim_labels=b01f_01io->b01f: which dim of the input (lhs), the kernel
   (rhs) and the output plays which role; the spatial lists are in window order (the
   digits 0, 1, ...), so window dim i slides over in_spatial[i], k_spatial[i] and
   out_spatial[i]. Group counts are 1 unless the text says otherwise. */
typedef struct hlo_conv_dims {
  int64_t in_batch, in_feature, k_in, k_out, out_batch, out_feature;
  hlo_ints in_spatial, k_spatial, out_spatial;
  int64_t feature_groups, batch_groups;   /* feature_group_count, batch_group_count */
} hlo_conv_dims;

/* custom-call: the targets hlojit runs (jaxlib's CPU LAPACK FFI kernels; an unknown target
   is a parse error naming it), and the characters of their backend_config (LAPACK's own:
   uplo 'L'/'U', side 'L'/'R', trans_x 'N'/'T'/'C', diag 'U'/'N', mode: syevd's 'V'/'N'
   (eigenvectors or not), gesdd's 'A'/'S'/'N' (full, economy or no U and V^T); 0 when
   absent). The
   matrices are the last two dims (any batch dims before), column-major in XLA's layout,
   which hlojit's logical row-major buffers do not need (eval/eval_lapack.c transposes). */
#define HLO_CUSTOM_TARGETS(X)                                                             \
  X(SPOTRF, "lapack_spotrf_ffi") X(DPOTRF, "lapack_dpotrf_ffi")                           \
  X(SGETRF, "lapack_sgetrf_ffi") X(DGETRF, "lapack_dgetrf_ffi")                           \
  X(STRSM, "lapack_strsm_ffi") X(DTRSM, "lapack_dtrsm_ffi")                               \
  X(SGEQRF, "lapack_sgeqrf_ffi") X(DGEQRF, "lapack_dgeqrf_ffi")                           \
  X(SORGQR, "lapack_sorgqr_ffi") X(DORGQR, "lapack_dorgqr_ffi")                           \
  X(SSYEVD, "lapack_ssyevd_ffi") X(DSYEVD, "lapack_dsyevd_ffi")                           \
  X(SGESDD, "lapack_sgesdd_ffi") X(DGESDD, "lapack_dgesdd_ffi")
typedef enum {
  HLO_CUSTOM_NONE,
#define X(e, s) HLO_CUSTOM_##e,
  HLO_CUSTOM_TARGETS(X)
#undef X
  HLO_CUSTOM_COUNT
} hlo_custom_target;
/* The targets come in (single, double) pairs, in this order: */
typedef enum { HLO_LAPACK_POTRF, HLO_LAPACK_GETRF, HLO_LAPACK_TRSM, HLO_LAPACK_GEQRF, HLO_LAPACK_ORGQR,
               HLO_LAPACK_SYEVD, HLO_LAPACK_GESDD } hlo_lapack_op;
static inline hlo_lapack_op hlo_custom_lapack_op(int64_t t) { return (hlo_lapack_op)((t - 1) / 2); }
static inline bool hlo_custom_is_f64(int64_t t) { return (t - 1) % 2 == 1; }
typedef struct hlo_custom_call {
  int64_t target;                     /* hlo_custom_target */
  int64_t uplo, side, trans_x, diag, mode;   /* backend_config characters */
} hlo_custom_call;

/* topk with k up to this runs as its own kernel (emitters/topk.c: O(n + k) per row); a
   larger k becomes a sort and a slice (passes/sort_lower.c). */
#define HLO_TOPK_KERNEL_MAX_K 64

/* rng-bit-generator's algorithm= (XLA's RandomAlgorithm); DEFAULT is Philox, as XLA:CPU. */
typedef enum { HLO_RNG_DEFAULT, HLO_RNG_THREE_FRY, HLO_RNG_PHILOX, HLO_RNG_COUNT } hlo_rng_algorithm;

typedef struct hlo_comp hlo_comp;
typedef struct hj_module hlo_module;

/* Every attribute of an instruction, once, in one order: I(field) an hlo_ints list, S(field)
   a scalar. Cloning copies the lists (clone.c), the structural encoding (fingerprint.c) and
   CSE's equality (passes/cse.c) walk them all; a new attribute is a field below and an
   entry here (and its text in text/parse_attrs.c and text/print.c). */
#define HLO_INSTR_ATTRS(I, S)                                                              \
  S(index) I(dims) I(slice_start) I(slice_limit) I(slice_stride) I(ds_sizes) I(pad_lo)     \
  I(pad_hi) I(pad_interior) S(cmp_dir) S(cmp_type) I(dot.lhs_batch) I(dot.rhs_batch)      \
  I(dot.lhs_contract) I(dot.rhs_contract) I(gather.offset_dims)                           \
  I(gather.collapsed_slice_dims) I(gather.start_index_map) I(gather.slice_sizes)          \
  I(gather.operand_batching_dims) I(gather.start_indices_batching_dims)                   \
  S(gather.index_vector_dim) S(gather.indices_are_sorted) I(scatter.update_window_dims)   \
  I(scatter.inserted_window_dims) I(scatter.scatter_dims_to_operand_dims)                 \
  I(scatter.input_batching_dims) I(scatter.scatter_indices_batching_dims)                 \
  S(scatter.index_vector_dim) S(scatter.indices_are_sorted) S(scatter.unique_indices)     \
  I(window.size) I(window.stride) I(window.pad_lo) I(window.pad_hi)                       \
  I(window.base_dilation) I(window.window_dilation) I(window.reversal) S(conv.in_batch)    \
  S(conv.in_feature) S(conv.k_in) S(conv.k_out) S(conv.out_batch) S(conv.out_feature)      \
  I(conv.in_spatial) I(conv.k_spatial) I(conv.out_spatial) S(conv.feature_groups)          \
  S(conv.batch_groups) S(fusion_kind) S(is_stable) S(exponent_bits) S(mantissa_bits) S(k)  \
  S(largest) S(custom.target) S(custom.uplo) S(custom.side) S(custom.trans_x) S(custom.diag) \
  S(custom.mode) S(rng_algorithm)

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
  hlo_window window;                  /* reduce-window, select-and-scatter, convolution */
  hlo_conv_dims conv;                 /* convolution */
  hlo_custom_call custom;             /* custom-call */
  int64_t rng_algorithm;              /* rng-bit-generator: hlo_rng_algorithm */
  hlo_fusion_kind fusion_kind;
  bool is_stable;                     /* sort */
  int64_t exponent_bits, mantissa_bits;  /* reduce-precision */
  int64_t k;                          /* topk */
  bool largest;                       /* topk */
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

/* One entry of the module's input_output_alias (XLA's HloInputOutputAliasConfig; JAX's
   donate_argnums): the root's array leaf at ShapeIndex |output| ({} when the root is an
   array) is written into the buffer of parameter |param| at ShapeIndex |param_index|. */
typedef struct hlo_alias {
  hlo_ints output;                    /* ShapeIndex into the entry root's shape */
  int64_t param;                      /* entry parameter number */
  hlo_ints param_index;               /* ShapeIndex into that parameter's shape */
  bool must;                          /* must-alias; else may-alias (hlojit treats both alike) */
} hlo_alias;

struct hj_module {
  hj_ctx_t *ctx;
  const char *name;
  hlo_arena arena;
  hlo_comp **comps;                   /* stb_ds array, definition order */
  hlo_comp *entry;
  int next_id;
  hlo_alias *aliases;                 /* arena array of |naliases|, output order (alias.c) */
  int naliases;
};

/* One thread's error on a context: hj_ctx_error is per thread, so that a call failing on
   one thread does not change the message another thread reads (core.c: hj__errslot_of). */
#define HJ__ERR_MAX 4096
typedef struct hj__errslot {
  pthread_t tid;
  struct hj__errslot *next;
  hj_status last;
  char err[HJ__ERR_MAX];
} hj__errslot;

/* The context. Any number of threads may use it at once (hlojit.h, THREADS). |errs|: the
   error of each thread that set or read one, for HJ__ERR_SLOTS threads; the others share
   |err_shared|. |backend_state| is each backend's per-context state (indexed by
   hj_backend_t; made on first use by hj__backend_state, freed by hj_ctx_destroy). */
#define HJ__ERR_SLOTS 64
struct hj_ctx {
  hj_ctx_options_t opt;
  uint64_t serial;                    /* unique per context made: the threads' cache key */
  pthread_mutex_t err_mu;             /* guards |errs| */
  pthread_mutex_t state_mu;           /* held while a backend_state is made (ctx_create may
                                         set an error: another lock) */
  hj__errslot *errs;
  hj__errslot err_shared;
  void *backend_state[HJ_BACKEND_COUNT];
  /* a backend's ctx_create failed when buffers asked for it (api.c): not retried there
     (atomic: read without the lock on every buffer's creation) */
  _Atomic bool backend_failed[HJ_BACKEND_COUNT];
};

/* The calling thread's error slot on |ctx| (made on first use; never NULL). */
hj__errslot *hj__errslot_of(const hj_ctx_t *ctx);
#define hj__ctx_err(ctx) (hj__errslot_of(ctx)->err)     /* the thread's message */
#define hj__ctx_last(ctx) (hj__errslot_of(ctx)->last)   /* the thread's last status */

/* ---- core.c: errors, allocation, arenas, string builder ------------------------------ */
/* Records "fmt..." as the context's message and returns |code| (ctx may be NULL). */
/* "HJ_OK", "HJ_ERR_SHAPE", ... ("HJ_ERR_UNKNOWN" out of range); hj_status_name's text. */
const char *hlo_status_name(hj_status s);
hj_status hj__err(hj_ctx_t *ctx, hj_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The context's error, status and message, saved before and put back after a call whose
   failure is not the caller's (a disk-cache probe, a dump, a kernel that may fall back to
   the evaluator): what the user reads from hj_ctx_error stays what it was. */
typedef struct hj__err_saved {
  hj_status last;
  char err[HJ__ERR_MAX];
} hj__err_saved;
void hj__err_save(const hj_ctx_t *ctx, hj__err_saved *s);
void hj__err_restore(hj_ctx_t *ctx, const hj__err_saved *s);
void *hj__alloc(hj_ctx_t *ctx, size_t size);       /* ctx's allocator, 64-byte aligned; NULL on OOM */
void hj__free(hj_ctx_t *ctx, void *p);

void hlo_arena_init(hlo_arena *a, hj_ctx_t *ctx);
void *hlo_arena_alloc(hlo_arena *a, size_t size);  /* zeroed, 16-aligned; NULL on OOM */
void hlo_arena_free(hlo_arena *a);

/* A growable string (stb_ds char array, NUL-terminated after each append). */
void sb_printf(char **sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_puts(char **sb, const char *s);

/* ---- shape.c: element types ---------------------------------------------------------- */
const char *hlo_type_name(hlo_type t);
int hlo_type_size(hlo_type t);                     /* bytes; 0 for tuple/token */
hlo_type_class hlo_type_class_of(hlo_type t);
bool hlo_type_is_float(hlo_type t);
bool hlo_type_is_int(hlo_type t);                  /* signed or unsigned integer (not pred) */
bool hlo_type_from_name(const char *s, size_t n, hlo_type *out);
/* ---- opfacts.c: the opcode table's columns (opcodes.h says what each means) ------------ */
const char *hlo_opcode_name(hlo_opcode op);
int hlo_opcode_arity(hlo_opcode op);               /* -1: variadic */
int hlo_opcode_calls(hlo_opcode op);               /* -1: any number */
hlo_op_kind hlo_opcode_kind(hlo_opcode op);
hlo_op_types hlo_opcode_types(hlo_opcode op);
hlo_op_cost hlo_opcode_cost(hlo_opcode op);
bool hlo_opcode_has_kernel(hlo_opcode op);         /* emit column K or H */
const char *hlo_opcode_libm(hlo_opcode op);        /* math column; NULL for none */
bool hlo_opcode_poly(hlo_opcode op);               /* poly column */
bool hlo_opcode_from_name(const char *s, size_t n, hlo_opcode *out);
const char *hlo_cmp_dir_name(hlo_cmp_dir d);       /* "EQ", ... */
const char *hlo_cmp_type_name(hlo_cmp_type t);     /* "FLOAT", "TOTALORDER", ... */
const char *hlo_fusion_kind_name(hlo_fusion_kind k);  /* "kLoop", ... */
const char *hlo_rng_algorithm_name(int64_t a);    /* "rng_default", ...; "?" */
/* rng-bit-generator with three-fry, 32 bits or narrower: the dim XLA splits the data shape
   in halves along (its first even dim, else its largest; 0 for a scalar). shape.c. */
int hlo_rng_split_dim(const hlo_shape *s);
const char *hlo_custom_target_name(int64_t t);     /* "lapack_spotrf_ffi", ...; "?" */
int64_t hlo_custom_target_from_name(const char *s, size_t n);   /* HLO_CUSTOM_NONE: unknown */

/* ---- shape.c: shapes ----------------------------------------------------------------- */
hlo_shape hlo_shape_array(hlo_type t, int rank, const int64_t *dims); /* default layout */
hlo_shape hlo_shape_scalar(hlo_type t);
void hlo_shape_set_default_layout(hlo_shape *s);   /* minor_to_major = {rank-1, ..., 0} */
bool hlo_shape_is_array(const hlo_shape *s);
/* Arrays; bounds for dynamic dims. Both saturate at INT64_MAX instead of overflowing (only
   a shape that fails hlo_shape_check can get there). */
int64_t hlo_shape_numel(const hlo_shape *s);
int64_t hlo_shape_bytes(const hlo_shape *s);
/* Same type, dims, dynamic flags and tuple structure; layouts ignored. */
bool hlo_shape_compatible(const hlo_shape *a, const hlo_shape *b);
bool hlo_shape_equal(const hlo_shape *a, const hlo_shape *b); /* also layouts (where both have one) */
bool hlo_shape_layout_is_default(const hlo_shape *s);
/* Appends "f32[2,<=3]{1,0}" / "(f32[], s32[4])"; layouts printed for rank >= 1 arrays
   when |with_layout|. */
void hlo_shape_print(char **sb, const hlo_shape *s, bool with_layout);
const char *hlo_shape_str(const hlo_shape *s, char *buf, size_t n);  /* for messages */
/* Row-major strides (in elements) of an array shape; all 0 for a zero-element shape (which
   addresses nothing and may have dims whose product overflows). */
void hlo_shape_strides(const hlo_shape *s, int64_t *strides);
/* Strides (in elements) of |s| in its physical layout (minor_to_major); row-major when it has
   none, all 0 when it has no elements. False when the layout is not a permutation of the
   dims. The evaluator's and the emitters' bitcast read memory through these. */
bool hlo_shape_layout_strides(const hlo_shape *s, int64_t *strides);
/* Equal rank and dims (types, layouts and dynamic flags ignored). */
bool hlo_same_dims(const hlo_shape *a, const hlo_shape *b);

/* ---- shape.c: checked shape arithmetic --------------------------------------------------
   The one place where element counts, byte sizes, strides and the extents that attributes
   give (slice, pad, windows) are computed, so that no attribute value (INT64_MIN ..
   INT64_MAX) can overflow int64 anywhere: shape inference, the builder, the verifier, the
   evaluator and the emitters all use these instead of open-coded products.
   HLO_MAX_NUMEL bounds the element count of every array (the parser's bound, 2^53: a
   double counts it exactly, and numel * 8 bytes, strides and linear indices of a non-empty
   array all fit in int64). A zero-element array may still have huge dims
   (f32[0,9223372036854775807,4] is valid, as in XLA); it addresses nothing, so its
   strides are all 0.
   hlo_add_ok / hlo_mul_ok: *r = a + b / a * b; false (r untouched) on int64 overflow.
   hlo_dims_numel: *n = the product of |dims|; false when a dim is negative or the product
   exceeds HLO_MAX_NUMEL (a zero dim makes it 0 whatever the others are).
   hlo_shape_check: an array shape (or every leaf of a tuple, nested at most 64 deep) has
   a rank in [0, HLO_MAX_RANK], dims >= 0 and at most HLO_MAX_NUMEL elements; NULL when it
   does, else why not ("has more than 2^53 elements", ...), a string literal.
   hlo_slice_count: the length of [start:limit:stride] (0 <= start, stride >= 1), which is
   0 when limit <= start; no overflow for any stride.
   hlo_pad_dim: *out = lo + dim + max(dim-1, 0) * interior + hi (XLA's padded size); false
   when dim < 0, interior < 0, the result is negative or does not fit in int64.
   hlo_pad_step: the distance between padded operand elements: interior + 1, or 1 when
   dim <= 1 (interior padding has no effect there, and INT64_MAX + 1 must not be formed).
   hlo_pad_range: of operand indices i in [0, dim), those whose padded position
   lo + i * step lies in [0, out_dim): [*i0, *i1) (empty: *i0 == *i1), and *first, the
   position of i0 (0 when empty). Exact for every lo (computed in 128 bits).
   hlo_window_dim: the reduce-window output size of one dim: bound = lo + dilated(dim,
   base_dil) + hi, win = dilated(size, win_dil), out = bound < win ? 0 : (bound - win) /
   stride + 1 (dilated(b, d) = b == 0 ? 0 : (b - 1) * d + 1); false on overflow or a
   negative bound (negative pads that eat more than the dim: XLA's StridedBound refuses it). */
#define HLO_MAX_NUMEL ((int64_t)1 << 53)
bool hlo_add_ok(int64_t a, int64_t b, int64_t *r);
bool hlo_mul_ok(int64_t a, int64_t b, int64_t *r);
bool hlo_dims_numel(int rank, const int64_t *dims, int64_t *n);
const char *hlo_shape_check(const hlo_shape *s);
int64_t hlo_slice_count(int64_t start, int64_t limit, int64_t stride);
bool hlo_pad_dim(int64_t dim, int64_t lo, int64_t hi, int64_t interior, int64_t *out);
int64_t hlo_pad_step(int64_t dim, int64_t interior);
void hlo_pad_range(int64_t dim, int64_t lo, int64_t step, int64_t out_dim, int64_t *i0,
                   int64_t *i1, int64_t *first);
bool hlo_window_dim(int64_t dim, int64_t size, int64_t stride, int64_t lo, int64_t hi,
                    int64_t base_dil, int64_t win_dil, int64_t *out);
/* |x| is one of the values of |v|. */
bool hlo_ints_has(hlo_ints v, int64_t x);

/* ---- module.c: modules, computations, instructions ------------------------------------ */
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

/* ---- element.c: half-precision and element access ------------------------------------ */
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

/* ---- verify.c: the verifier -----------------------------------------------------------
   Structure (operand counts, called computations and their signatures, parameter numbers,
   a root per computation, an entry, attributes in range) and shapes (declared shape ==
   inferred shape, layouts ignored; layouts valid permutations). */
hj_status hlo_verify_module(hlo_module *m);


/* ---- clone.c: deep copies of modules and instructions -------------------------------
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


/* ---- edit.c ------------------------------------------------------------------------------
   Editing utilities for passes. Users are computed on demand (the IR stores none): after
   editing, rebuild a user map. Edits that make an earlier instruction use a later one are
   fixed by hlo_comp_topo_sort (stable: the identity on an order that is already
   topological). Cloning an instruction into another computation: hlo_instr_clone_into
   (clone.c).
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


/* ---- alias.c: the entry's input_output_alias -----------------------------------------------
   hlo_shape_index_leaf: the flattened leaf number (depth first, as hj_exec_run counts) of
   the array leaf at ShapeIndex |idx| of |s|; -1 when |idx| is not a path to an array.
   hlo_leaf_shape_index: the inverse: the ShapeIndex of flattened leaf |leaf| of |s| into
   |idx| (HLO_MAX_RANK+8 entries at most), its length returned; -1 when out of range.
   hlo_module_add_alias: appends an entry (lists copied into m's arena), kept in output
   order; HJ_ERR_INVALID_ARG (message in m->ctx) when the output already has one.
   hlo_alias_flat: entry |k| as flattened leaves: *out_leaf of the root, *in_leaf of the
   entry's parameters (all of them, in order); false when it does not resolve.
   hlo_module_output_alias: the flattened input leaf that output leaf |out_leaf| aliases,
   -1 for none. hlo_module_copy_aliases: |src|'s entries into |dst| (clones); false on OOM.
   hlo_verify_aliases (called by hlo_verify_module): every entry resolves to array leaves of
   the same byte size, no output and no parameter leaf appears twice. */
#define HLO_MAX_SHAPE_INDEX 16
int hlo_shape_index_leaf(const hlo_shape *s, hlo_ints idx);
int hlo_leaf_shape_index(const hlo_shape *s, int leaf, int64_t *idx);
hj_status hlo_module_add_alias(hlo_module *m, const int64_t *output, int noutput, int64_t param,
                               const int64_t *param_index, int nparam_index, bool must);
bool hlo_alias_flat(const hlo_module *m, int k, int *out_leaf, int *in_leaf);
int hlo_module_output_alias(const hlo_module *m, int out_leaf);
bool hlo_module_copy_aliases(hlo_module *dst, const hlo_module *src);
hj_status hlo_verify_aliases(const hlo_module *m);


/* ---- opfacts.c: facts about opcodes shared by the evaluator, passes and emitters ---------
   hlo_op_is_elementwise: unary/binary ops, select, clamp, compare, convert, copy,
   same-width bitcast-convert, on arrays.
   hlo_elem_op: the elementwise operation of such an instruction, with its element types
   (the evaluator's kernels and the elemental emitter both run it).
   hlo_binary_reducer: the opcode when |c| is exactly op(param0, param1) on scalars of
   type |t| for op in {add multiply maximum minimum and or}, else HLO_OP_COUNT; *swapped
   says the root is op(param1, param0) (max/min are not bitwise commutative on ±0, NaN). */
bool hlo_op_is_elementwise(const hlo_instr *ins);
/* |n| operands are what |op| takes (its arity, or the rule of a variadic op: reduce's even
   count, scatter's odd one, ...); *want says what it takes ("an even number >= 2 of", ""
   for an exact arity), for messages. The parser and the evaluator check with it. */
bool hlo_operand_count_ok(hlo_opcode op, int n, const char **want);
/* Element type |t| is one that an op of the opcode table's types column |ty| takes; *want
   (when |want| is not NULL) names what it takes ("floating-point", "pred or integral",
   ...), for messages. */
bool hlo_types_admit(hlo_op_types ty, hlo_type t, const char **want);
typedef struct hlo_elem_op {
  hlo_opcode op;
  hlo_type out;                       /* result element type */
  hlo_type in[3];                     /* operand element types */
  int nin;
  hlo_cmp_dir dir;                    /* compare */
  hlo_cmp_type cmp_type;              /* compare */
  int exponent_bits, mantissa_bits;   /* reduce-precision */
} hlo_elem_op;
/* Fills |e| from |ins|; false when |ins| is not elementwise (or not on arrays). */
bool hlo_elem_op_of(const hlo_instr *ins, hlo_elem_op *e);
/* NULL when |e|'s element types are ones the op is defined on, else why not
   ("not defined on s32", ...). */
const char *hlo_elem_unsupported(const hlo_elem_op *e);
hlo_opcode hlo_binary_reducer(const hlo_comp *c, hlo_type t, bool *swapped);
/* A reduce-window that is a prefix scan (cumsum, cummax, ...): one input, along one dim d
   of size n the window n with pad n-1 before and 0 after, every other dim a window of 1
   without pads, strides and dilations 1. Its output i along d is init (+) x_0 (+) ... (+) x_i
   in that order (the evaluator reduces the valid taps only), so one running fold per row
   gives the same bits. *dim: d. */
bool hlo_reduce_window_is_prefix_scan(const hlo_instr *rw, int *dim);
/* The panel-order dot of passes/dot_canon.c in its canonical form: lhs [M,P,kc], rhs
   [P,Q,kc,nr], no batch dims, contracting {1,2} x {0,2} (the matmul emitter reads the rhs
   in place). Its result [M,Q,nr] is the rows of C [M,N = Q*nr]: *c2 gets that shape (the
   one epilogues see), when |c2| is not NULL. */
bool hlo_dot_is_panels(const hlo_instr *d, hlo_shape *c2);
/* A shape an elementwise epilogue of a dot of shape |ds| may have: the dot's non-size-1
   dims in order, or, for a dot whose non-size-1 dims are [M, N], any shape whose last dim
   is N and whose other dims multiply to M (the rows split: a convolution's [B*H*W, O] dot
   seen as [B, H, W, O]); either way element (m, n) keeps its row-major position.
   emit_dot_root_index maps (b, m, n) into such a shape. */
bool hlo_dot_epilogue_dims(const hlo_shape *s, const hlo_shape *ds);
/* The concatenate a loop fusion's computation |c| writes row by row (emitters/loop.c: one
   branch per row picks the operand, an inner loop copies it): c's root itself or through
   reshapes and bitcasts of the same element count with default layouts, an array
   concatenate whose axis is not its minor dim, with 2 to HLO_ROOT_CONCAT_MAX operands;
   NULL otherwise. Fusion counts its operands as evaluated once per own element. */
#define HLO_ROOT_CONCAT_MAX 256
const hlo_instr *hlo_root_concat(const hlo_comp *c);

/* ---- inplace.c: output leaves a fusion may write over an operand's buffer ---------------
   hlo_fusion_dus_roots: for each output leaf j of |fusion| (depth first, at most |max|),
   out[j].dus = the dynamic-update-slice the leaf is (through plain bitcasts) or NULL, and
   out[j].param = the fused parameter whose buffer the leaf may update in place (the rules
   are at the top of inplace.c), or -1. Returns the number of leaves, -1 when |fusion| is
   not a fusion or has more than |max| leaves. hlo_fusion_dus_mask: bit j set when leaf j
   has such a parameter (leaves 0..63). */
typedef struct hlo_dus_root {
  const hlo_instr *dus;
  int param;
} hlo_dus_root;
int hlo_fusion_dus_roots(const hlo_instr *fusion, hlo_dus_root *out, int max);
uint64_t hlo_fusion_dus_mask(const hlo_instr *fusion);

/* ---- fingerprint.c: structural identity (the compile driver's kernel dedup, disk caches) ----
   hlo_encode_comp / hlo_encode_fusion: append a canonical byte encoding of |c| (callees
   inline) / of fusion |fusion| (its kind, shape and operand shapes, then its fused
   computation) to the stb_ds array *out: equal bytes exactly when the structures are equal
   up to names and ids (ops, shapes and layouts, attributes, constants' bytes, operand
   positions, called computations). Deterministic across processes. false: malformed (no
   computation, nesting deeper than 64).
   hlo_fingerprint_bytes: a 128-bit hash of bytes; hlo_fingerprint_comp / _module: of the
   encoding of |c| / of the entry (zero when malformed). A fingerprint finds candidates;
   compare the encodings before treating two as the same. hlo_fingerprint_hex: 32 hex
   digits and a NUL. */
typedef struct hlo_fingerprint { uint64_t lo, hi; } hlo_fingerprint;
bool hlo_encode_comp(const hlo_comp *c, uint8_t **out);
bool hlo_encode_fusion(const hlo_instr *fusion, uint8_t **out);
hlo_fingerprint hlo_fingerprint_bytes(const void *p, size_t n);
hlo_fingerprint hlo_fingerprint_comp(const hlo_comp *c);
hlo_fingerprint hlo_fingerprint_module(const hlo_module *m);
void hlo_fingerprint_hex(hlo_fingerprint f, char out[33]);

#endif /* HLOJIT_IR_H */
