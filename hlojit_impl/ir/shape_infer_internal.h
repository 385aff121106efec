/* ir/shape_infer_internal.h — the helpers shape_infer.c shares with shape_infer_index.c
   and shape_infer_reduce.c (private to those three files). */
#ifndef HLOJIT_SHAPE_INFER_INTERNAL_H
#define HLOJIT_SHAPE_INFER_INTERNAL_H

#include "ir.h"

/* shape_infer.c helpers shared with shape_infer_index.c (dynamic-slice, dynamic-update-
   slice, gather, scatter; hlo_infer_shape in shape_infer.c is the one switch).
   hlo_si_cx: the instruction being inferred, with room for the shapes of one message.
   hlo_si_err: HJ_ERR_SHAPE with "op 'NAME' (instr): msg". hlo_si_str: |s| as text in
   c->buf[k] (k < 4). hlo_si_op: operand |i|'s shape. hlo_si_nops / hlo_si_array: the
   operand count is |n| / operand |i| is an array, else an error. hlo_si_result: |s| with
   the default layout. hlo_si_dims_ok: |v| holds
   distinct values in [0, n) (|sorted|: strictly increasing).
   hlo_si_ints_str: "{1,2}" into |buf|. hlo_si_tuple: a tuple of |n| shapes in the
   module's arena (|elems| NULL: the caller fills them). hlo_si_reducer: called
   computation |ci| takes 2N scalars of |types| and returns N of them (scalar or tuple).
   hlo_si_unset: |s| is the zeroed shape a shape-less parse leaves. hlo_si_with_type: |s|
   with the default layout and type |t|. hlo_si_callee: called computation |i|, checked to
   have a root and all its parameters. hlo_si_sig: computation |k| takes exactly the |n|
   shapes |want| (layouts ignored).
   hlo_si_index_op (shape_infer_index.c): the four indexing ops. hlo_si_reduce_like
   (shape_infer_reduce.c): reduce, reduce-window, dot, sort. */
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
bool hlo_si_dims_ok(hlo_ints v, int64_t n, bool sorted);
const char *hlo_si_ints_str(hlo_ints v, char *buf, size_t n);
hj_status hlo_si_tuple(hlo_si_cx *c, const hlo_shape *elems, int n, hlo_shape *out);
hj_status hlo_si_reducer(hlo_si_cx *c, int ci, const hlo_type *types, int n);
bool hlo_si_unset(const hlo_shape *s);
hlo_shape hlo_si_with_type(const hlo_shape *s, hlo_type t);
hj_status hlo_si_callee(hlo_si_cx *c, int i, const hlo_comp **out);
hj_status hlo_si_sig(hlo_si_cx *c, const hlo_comp *k, const hlo_shape *const *want, int n);
hj_status hlo_si_index_op(hlo_si_cx *c, hlo_shape *out);
hj_status hlo_si_reduce_like(hlo_si_cx *c, hlo_shape *out);


#endif
