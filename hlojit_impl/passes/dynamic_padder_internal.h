/* passes/dynamic_padder_internal.h — what dynamic_padder.c (the driver, the size
   inference, elementwise, shape, reduce and dot rules) and dynamic_padder_ops.c (the
   rewrites of slice, dynamic-slice, dynamic-update-slice, concatenate, pad, reverse,
   gather, reduce-window) share. For those two files only. */
#ifndef HLOJIT_DYNAMIC_PADDER_INTERNAL_H
#define HLOJIT_DYNAMIC_PADDER_INTERNAL_H

#include "passes.h"

/* What the padder knows of one array leaf: per dim, where its real size is. */
typedef struct pd_leaf {
  hlo_instr *size[HLO_MAX_RANK];  /* NULL: static (the bound is the size); PD_UNKNOWN: the
                                     shape says dynamic but no parameter gives its size;
                                     else an s32[] instruction of the entry */
  bool zp;                        /* the padded lanes hold zeros (parameters: the contract) */
} pd_leaf;

/* One value: 1 leaf for an array, ntuple leaves for a (flat) tuple. */
typedef struct pd_val {
  int n;
  pd_leaf *leaf;
} pd_val;

typedef struct pd_ctx {
  hlo_module *m;
  hlo_comp *c;                    /* the entry */
  hj_ctx_t *ctx;
  struct pd_entry { int key; pd_val *value; } *vals;   /* stb_ds, by instruction id */
  pass_dyn_info *info;
} pd_ctx;

extern hlo_instr pd_unknown_instr;
#define PD_UNKNOWN (&pd_unknown_instr)

/* dynamic_padder.c: values, errors and instruction builders (appended to the entry; the
   driver re-sorts it topologically at the end). Builders return NULL on OOM, error set. */
pd_val *pd_get(pd_ctx *P, const hlo_instr *ins);
pd_val *pd_new_val(pd_ctx *P, const hlo_instr *ins);      /* all static, zp false */
hj_status pd_unsup(pd_ctx *P, const hlo_instr *ins, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The real size of dim |d| of leaf |l| as an s32[] instruction: its size, or a constant of
   |bound| when static; NULL (UNSUPPORTED, naming |ins|) when unknown. */
hlo_instr *pd_size_of(pd_ctx *P, const hlo_instr *ins, const pd_leaf *l, int d, int64_t bound);
hlo_instr *pd_s32(pd_ctx *P, int64_t v);
hlo_instr *pd_scalar(pd_ctx *P, hlo_type t, double v);
hlo_instr *pd_binop(pd_ctx *P, hlo_opcode op, hlo_instr *a, hlo_instr *b);   /* same shape */
hlo_instr *pd_convert(pd_ctx *P, hlo_instr *x, hlo_type t);                  /* x itself when t */
hlo_instr *pd_broadcast(pd_ctx *P, hlo_instr *scalar, const hlo_shape *like);
/* select(iota(dim |d|) < |size|, x, |fill|) with |fill| a scalar of x's type. */
hlo_instr *pd_mask(pd_ctx *P, hlo_instr *x, int d, hlo_instr *size, hlo_instr *fill);
/* max(lo, min(x, hi)) on scalars of one type. */
hlo_instr *pd_clamp_scalar(pd_ctx *P, hlo_instr *lo, hlo_instr *x, hlo_instr *hi);
/* Merges elementwise: per dim, the first known size of |ops| (scalars skipped), else
   unknown if any is unknown, else static. */
void pd_merge(pd_ctx *P, pd_leaf *out, int rank, hlo_instr *const *ops, int n);

/* dynamic_padder_ops.c: one rule each; |ins| is an instruction of the entry. */
hj_status pd_slice(pd_ctx *P, hlo_instr *ins);
hj_status pd_dynamic_slice(pd_ctx *P, hlo_instr *ins);
hj_status pd_dynamic_update_slice(pd_ctx *P, hlo_instr *ins);
hj_status pd_concatenate(pd_ctx *P, hlo_instr *ins);
hj_status pd_pad(pd_ctx *P, hlo_instr *ins);
hj_status pd_reverse(pd_ctx *P, hlo_instr *ins);
hj_status pd_gather(pd_ctx *P, hlo_instr *ins);
hj_status pd_reduce_window(pd_ctx *P, hlo_instr *ins);

#endif /* HLOJIT_DYNAMIC_PADDER_INTERNAL_H */
