/* reduction_internal.h — the reduction emitter's plan, shared by its two files:
   reduction_analyse.c (what a fusion's reduces, outputs and reads are: red_analyse) and
   reduction.c (the kernel it emits; its top comment is the design of both). */
#ifndef HLOJIT_REDUCTION_INTERNAL_H
#define HLOJIT_REDUCTION_INTERNAL_H

#include "emit.h"

#define RED_MAX_HEROES 8
#define RED_MAX_N 8         /* results of a variadic reduce handled here */
#define RED_MAX_LANES 64
#define RED_CB 512          /* most kept columns per block in the column strategy */
#define RED_MAX_OV 9        /* emit_fn: override_ins + override_ins2[8] */
#define RED_SYM_ZERO (-1)   /* symbolic index component: a size-1 dim */
#define RED_SYM_RED (-2)    /* ... a reduced dim (never a row's kept index) */
#define RED_MAX_STASH 4     /* stashed values per fusion (emit_fn has 8 override slots) */

typedef enum { RED_LEAF_DIRECT, RED_LEAF_KEPT, RED_LEAF_INPUT, RED_LEAF_FULL } red_leaf_kind;

typedef struct red_leaf {
  const hlo_instr *ins;     /* computes the leaf (NULL for a result of a variadic hero) */
  red_leaf_kind kind;
  int hero, k;              /* DIRECT: hero and result; INPUT/FULL: hero whose input shape */
  hlo_type type;
  hlo_shape shape;
} red_leaf;

typedef struct red_hero {
  const hlo_instr *ins;
  int n;                    /* inputs = results */
  bool reduced[HLO_MAX_RANK];
  int64_t K;
  hlo_type types[RED_MAX_N];
  int lanes;                /* > 1: the partial-accumulator order (see the top) */
  hlo_opcode op;            /* lanes: the reducer's one binary op ... */
  bool swapped;             /* ... written op(param1, param0) */
  unsigned deps;            /* the heroes its operands read (bit per hero) */
} red_hero;

typedef struct red_vis { const hlo_instr *key; int value; } red_vis;

typedef struct red_plan {
  red_hero h[RED_MAX_HEROES];
  int nh;
  int order[RED_MAX_HEROES];      /* heroes, each after those it reads */
  red_leaf leaf[64];
  int nleaves;
  const hlo_instr *ov[RED_MAX_OV];  /* overridden per row: each reduce (n == 1), each  */
  int ov_hero[RED_MAX_OV], ov_k[RED_MAX_OV], nov;   /* get-tuple-element of a variadic one */
  hlo_shape kept;           /* the heroes' common result dims */
  bool column, full;        /* full: some FULL leaf */
  int64_t Cm, Co, nb, cb;   /* column: minor kept dim, outer kept count, blocks per row,
                               columns per block */
  red_vis *mask;            /* analysis memo: instruction -> the heroes it reads */
  struct red_stash { const hlo_instr *ins; int leaf, hero; } stash[RED_MAX_STASH];   /* hero: the
                               pass that stores it (the leaf's own hero or another over its shape) */
  int nstash;               /* costly values kept in a FULL leaf's buffer (red_find_stashes) */
} red_plan;

typedef struct red_sym { const hlo_instr *ins; int rank; int v[HLO_MAX_RANK]; } red_sym;

/* Fills |p| for |fusion| (HJ_ERR_UNSUPPORTED with the reason when the emitter cannot take
   it: the runtime then uses the loop emitter or the evaluator). */
hj_status red_analyse(emit_module *em, const hlo_instr *fusion, red_plan *p);
/* The hero's reduced dims are its input's minor-most ones. */
bool red_is_row(const red_hero *h);

#endif
