/* fuzz_hlo_gen_internal.h — the generator's own shared parts (fuzz_hlo_gen.c: the value
   pool, literals, called computations, the module; fuzz_hlo_gen_ops.c: one function per op
   family). Not for the driver: it sees fuzz_hlo.h only. */
#ifndef FUZZ_HLO_GEN_INTERNAL_H
#define FUZZ_HLO_GEN_INTERNAL_H

#include "fuzz_hlo.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- element types (hj_dtype_t order) ----------------------------------------------- */
enum { T_PRED, T_S8, T_S16, T_S32, T_S64, T_U8, T_U16, T_U32, T_U64, T_F16, T_BF16, T_F32,
       T_F64, T_N };
static const char *const tname[T_N] = { "pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32",
                                        "u64", "f16", "bf16", "f32", "f64" };
static const int tbits[T_N] = { 1, 8, 16, 32, 64, 8, 16, 32, 64, 16, 16, 32, 64 };
static inline bool fg_is_f(int t) { return t >= T_F16; }
static inline bool fg_is_s(int t) { return t >= T_S8 && t <= T_S64; }
static inline bool fg_is_u(int t) { return t >= T_U8 && t <= T_U64; }
/* f32-class types whose transcendentals the CPU computes with its own polynomials */
static inline bool fg_approx_t(int t) { return t == T_F16 || t == T_BF16 || t == T_F32; }

/* ---- buffers and PRNG ------------------------------------------------------------------ */
typedef struct { char *p; size_t n, cap; } sbuf;

typedef struct { int t, rank, lvl; int64_t d[4]; } fv;

typedef struct {
  uint64_t s;
  sbuf body, comps;
  fv vals[256];
  int nv, nparams, ncomp;
  int keep[2], nkeep;   /* values the root returns besides its 1-3 picks (fg_op_fusion_update) */
  bool has_while;
} fg;

static inline uint64_t fg_rnd(fg *g) {
  g->s ^= g->s >> 12;
  g->s ^= g->s << 25;
  g->s ^= g->s >> 27;
  return g->s * 0x2545F4914F6CDD1DULL;
}
static inline int fg_rn(fg *g, int n) { return n > 0 ? (int)(fg_rnd(g) % (uint64_t)n) : 0; }
static inline bool fg_chance(fg *g, int permille) { return fg_rn(g, 1000) < permille; }

static inline int64_t fg_numel(const fv *v) {
  int64_t n = 1;
  for (int i = 0; i < v->rank; i++) n *= v->d[i];
  return n;
}

static inline int fg_maxl(int a, int b) { return a > b ? a : b; }
/* the level after a discontinuous op on a value of level |l| */
static inline int fg_disc(int l) { return l >= FHG_CLOSE ? FHG_SKIP : l; }


enum { R_ADD, R_MUL, R_MAX, R_MIN, R_AND, R_OR, R_REPLACE, R_N };


/* fuzz_hlo_gen.c: buffers, the pool, literals, called computations.
   fg_sb_add: printf onto |b|. fg_shape_str / fg_ints_str: "f32[2,3]" / "{1,0}".
   fg_def: starts "  vK = SHAPE " for a new pool value (the caller writes the rest) and
   returns K. fg_param / fg_make_const: a new parameter / constant (a literal when small,
   else a broadcast scalar). fg_get: a value of that type and dims (pool, convert, new).
   fg_pick: any pool value |ok| accepts (or a new one). fg_rand_dims / fg_rand_type: a
   random array shape / element type. fg_reducer_kind: a combiner defined on |t|;
   fg_reducer: the computation of it. fg_cmp_type: a `, type=...` suffix that orders |t|.
   fg_comparator: a sort comparator over |n| operand types comparing the first pair.
   fg_elementwise_comp: |n| parameters of shapes (types[i], dims) -> |rt|, exact ops only. */
void fg_sb_add(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fg_shape_str(char *buf, size_t n, int t, int rank, const int64_t *d);
void fg_ints_str(char *buf, size_t n, const int64_t *v, int k);
int fg_def(fg *g, int t, int rank, const int64_t *d, int lvl);
int fg_param(fg *g, int t, int rank, const int64_t *d);
int fg_make_const(fg *g, int t, int rank, const int64_t *d);
int fg_get(fg *g, int t, int rank, const int64_t *d);
int fg_pick(fg *g, bool (*ok)(const fv *));
void fg_rand_dims(fg *g, int *rank, int64_t *d);
int fg_rand_type(fg *g);
int fg_reducer_kind(fg *g, int t);
int fg_reducer(fg *g, int t, int kind);
const char *fg_cmp_type(fg *g, int t);
int fg_comparator(fg *g, const int *types, int n);
int fg_elementwise_comp(fg *g, const int *types, int n, int rank, const int64_t *d, int rt);
/* fuzz_hlo_gen_ops.c: a scalar init of |t| for reducer |kind| (its identity, or any value). */
int fg_identity_init(fg *g, int t, int kind);

/* fuzz_hlo_gen_ops.c: each appends one op (and what it needs) to the entry. */
void fg_op_unary(fg *g);
void fg_op_binary(fg *g);
void fg_op_compare(fg *g);
void fg_op_select_clamp(fg *g);
void fg_op_convert(fg *g);
void fg_op_iota(fg *g);
void fg_op_broadcast(fg *g);
void fg_op_reshape(fg *g);
void fg_op_transpose(fg *g);
void fg_op_slice(fg *g);
void fg_op_reverse(fg *g);
void fg_op_pad(fg *g);
void fg_op_concat(fg *g);
void fg_op_dynamic_slice(fg *g);
void fg_op_gather(fg *g);
void fg_op_scatter(fg *g);
void fg_op_reduce(fg *g);
/* fuzz_hlo_gen_window.c */
void fg_op_reduce_window(fg *g);
void fg_op_convolution(fg *g);
void fg_op_select_and_scatter(fg *g);
void fg_op_dot(fg *g);
void fg_op_sort(fg *g);
void fg_op_rng(fg *g);
void fg_op_map(fg *g);
void fg_op_call(fg *g);
void fg_op_fusion_update(fg *g);
void fg_op_while(fg *g);
void fg_op_conditional(fg *g);
void fg_op_tuple_misc(fg *g);

#endif
