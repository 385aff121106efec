/* builder_linalg.c — hlojit.h's linear algebra: hj_cholesky and hj_triangular_solve, as the
   custom-calls to jaxlib's CPU LAPACK targets that jax.numpy.linalg emits (ir.h's
   HLO_CUSTOM_TARGETS; eval/eval_lapack.c calls LAPACK), with JAX's post-processing, so a
   module built here and one JAX lowered run the same instructions:
     hj_cholesky(a, lower): potrf(a) -> (factor, info); the other triangle zeroed; a matrix
       whose info is not 0 (not positive definite) comes out NaN in its triangle.
     hj_triangular_solve(a, b, ...): trsm(a, b) with side/uplo/trans_x/diag from the flags.
   Matrices are the last two dims, any dims before are a batch; f32 or f64. */
#include "api.h"
#include <math.h>

static hj_tensor_t bla_poison(hj_graph_t *g) { return (hj_tensor_t){ g, -1 }; }

static bool bla_matrix(hj_graph_t *g, const char *op, const hlo_instr *x, bool square) {
  const hlo_shape *s = &x->shape;
  if (!hlo_shape_is_array(s) || s->rank < 2 || (s->type != HLO_F32 && s->type != HLO_F64)) {
    char b[64];
    hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: needs f32 or f64 matrices (rank >= 2, batch dims first), not %s",
                   op, hlo_shape_str(s, b, sizeof b));
    return false;
  }
  for (int d = 0; d < s->rank; d++)
    if (s->dims[d] < 0) {
      hj__graph_fail(g, HJ_ERR_UNSUPPORTED, "%s: dynamic dims are not supported", op);
      return false;
    }
  if (square && s->dims[s->rank - 1] != s->dims[s->rank - 2]) {
    char b[64];
    hj__graph_fail(g, HJ_ERR_SHAPE, "%s: needs square matrices, not %s", op, hlo_shape_str(s, b, sizeof b));
    return false;
  }
  return true;
}

hj_tensor_t hj_cholesky(hj_tensor_t a, bool lower) {
  const char *op = "hj_cholesky";
  hj_graph_t *g;
  hlo_instr *x;
  if (!hj__operands(op, &a, 1, &g, &x) || !bla_matrix(g, op, x, true)) return bla_poison(g);
  hlo_instr *cc = hj__op_begin(g, op, HLO_OP_CUSTOM_CALL, NULL, &x, 1);
  if (cc) {
    cc->custom.target = x->shape.type == HLO_F32 ? HLO_CUSTOM_SPOTRF : HLO_CUSTOM_DPOTRF;
    cc->custom.uplo = lower ? 'L' : 'U';
  }
  hj_tensor_t t = hj__op_finish(g, op, cc);
  hj_tensor_t f = hj_get_tuple_element(t, 0), info = hj_get_tuple_element(t, 1);
  const hlo_shape *s = &x->shape;
  int r = s->rank;
  hj_dtype_t dt = hj_tensor_dtype(a);
  hj_shape_t ms = hj__shape_from_hlo(s);
  int64_t bdims[HLO_MAX_RANK];
  for (int d = 0; d < r - 2; d++) bdims[d] = d;
  hj_tensor_t ok = hj_broadcast_in_dim(hj_compare(info, hj_scalar(g, HJ_S32, 0), HJ_CMP_EQ), ms, bdims, r - 2);
  hj_tensor_t rows = hj_iota(g, HJ_S32, ms, r - 2), cols = hj_iota(g, HJ_S32, ms, r - 1);
  hj_tensor_t keep = hj_compare(rows, cols, lower ? HJ_CMP_GE : HJ_CMP_LE);
  hj_tensor_t v = hj_select(ok, f, hj_full(g, dt, ms, NAN));
  return hj_select(keep, v, hj_full(g, dt, ms, 0));
}

hj_tensor_t hj_triangular_solve(hj_tensor_t a, hj_tensor_t b, bool left_side, bool lower, bool transpose_a,
                                bool unit_diagonal) {
  const char *op = "hj_triangular_solve";
  hj_tensor_t ts[2] = { a, b };
  hj_graph_t *g;
  hlo_instr *x[2];
  if (!hj__operands(op, ts, 2, &g, x) || !bla_matrix(g, op, x[0], true) || !bla_matrix(g, op, x[1], false) ||
      !hj__same_type(g, op, x[0], x[1]))
    return bla_poison(g);
  hlo_instr *cc = hj__op_begin(g, op, HLO_OP_CUSTOM_CALL, NULL, x, 2);
  if (cc) {
    cc->custom.target = x[0]->shape.type == HLO_F32 ? HLO_CUSTOM_STRSM : HLO_CUSTOM_DTRSM;
    cc->custom.side = left_side ? 'L' : 'R';
    cc->custom.uplo = lower ? 'L' : 'U';
    cc->custom.trans_x = transpose_a ? 'T' : 'N';
    cc->custom.diag = unit_diagonal ? 'U' : 'N';
  }
  return hj__op_finish(g, op, cc);
}
