/* reduction_plan.h — what the reduction analysis (reduction_analyse.c, the CPU emitter's) tells
   the GPU reduction emitter (gpu_reduction.c), so that both accept the same fusions for the
   same reasons: the heroes (every reduce, one kept shape), the order in which they are
   computed (each after the heroes it reads), the output leaves and their kinds, and the
   instructions overridden with a row's values. reduction.c fills it from its own plan
   (emitp_red_plan); the field meanings are reduction.c's (its top comment). */
#ifndef HLOJIT_REDUCTION_PLAN_H
#define HLOJIT_REDUCTION_PLAN_H

#include "emit.h"

#define EMITP_RED_MAX_HEROES 8
#define EMITP_RED_MAX_N 8
#define EMITP_RED_MAX_OV 9

typedef enum { EMITP_LEAF_DIRECT, EMITP_LEAF_KEPT, EMITP_LEAF_INPUT, EMITP_LEAF_FULL } emitp_leaf_kind;

typedef struct emitp_red_hero {
  const hlo_instr *ins;       /* the reduce */
  int n;                      /* inputs = results (variadic > 1) */
  bool reduced[HLO_MAX_RANK]; /* of the input's dims */
  int64_t K;                  /* elements reduced per kept index */
  hlo_type types[EMITP_RED_MAX_N];
  unsigned deps;              /* heroes its operands read (bit per hero) */
  bool row;                   /* the reduced dims are the minor-most ones */
} emitp_red_hero;

typedef struct emitp_red_leaf {
  const hlo_instr *ins;       /* computes it (NULL: a result of a variadic hero) */
  emitp_leaf_kind kind;
  int hero, k;                /* DIRECT: hero and result; INPUT/FULL: the hero whose input shape */
  hlo_type type;
  hlo_shape shape;
} emitp_red_leaf;

typedef struct emitp_red_plan {
  emitp_red_hero h[EMITP_RED_MAX_HEROES];
  int nh;
  int order[EMITP_RED_MAX_HEROES];
  emitp_red_leaf leaf[64];
  int nleaves;
  const hlo_instr *ov[EMITP_RED_MAX_OV];     /* overridden per row with hero ov_hero's */
  int ov_hero[EMITP_RED_MAX_OV], ov_k[EMITP_RED_MAX_OV], nov;   /* result ov_k */
  hlo_shape kept;             /* the heroes' common result dims */
  bool column;                /* every hero reduces major dims into minor kept dims */
  bool full;                  /* some FULL leaf */
} emitp_red_plan;

/* reduction.c: the analysis; HJ_ERR_UNSUPPORTED (with why) when it refuses the fusion. */
hj_status emitp_red_plan_make(emit_module *em, const hlo_instr *fusion, emitp_red_plan *out);
/* reduction.c: the input index of a reduce over |in| with reduced dims |reduced|, from the
   kept index |kidx| and the row-major linear index |rlin| over the reduced dims. */
void emitp_red_in_index(emit_fn *f, const hlo_shape *in, const bool *reduced, const emit_index *kidx,
                        LLVMValueRef rlin, emit_index *out);

#endif /* HLOJIT_REDUCTION_PLAN_H */
