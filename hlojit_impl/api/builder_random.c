/* builder_random.c — hlojit.h's random numbers: hj_rng_bits (XLA's rng-bit-generator:
   three-fry or philox from a u64[2] state, the bits XLA computes, bit for bit) and
   hj_rng_uniform (floats in [0, 1) from them, the way XLA and JAX make them: the top
   mantissa bits under exponent 0, minus 1). Each returns (new state, values) as a tuple;
   feed the state back for the next draw. */
#include "api.h"

static hj_tensor_t brn_poison(hj_graph_t *g) { return (hj_tensor_t){ g, -1 }; }

hj_tensor_t hj_rng_bits(hj_tensor_t state, hj_rng_algorithm_t alg, hj_dtype_t t, hj_shape_t shape) {
  const char *op = "hj_rng_bits";
  hj_graph_t *g;
  hlo_instr *s;
  if (!hj__operands(op, &state, 1, &g, &s)) return brn_poison(g);
  if ((unsigned)alg > HJ_RNG_PHILOX)
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: algorithm %d is not one of hj_rng_algorithm_t", op, (int)alg);
  if (t != HJ_U8 && t != HJ_U16 && t != HJ_U32 && t != HJ_U64 && t != HJ_S8 && t != HJ_S16 && t != HJ_S32 && t != HJ_S64)
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: the bits' dtype must be an integer type", op);
  hlo_shape el[2] = { s->shape };
  if (!hj__shape_to_hlo(t, shape, &el[1]))
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: invalid shape (rank or a negative dim)", op);
  hlo_shape ts = { .type = HLO_TUPLE, .ntuple = 2, .tuple = el };
  hlo_instr *ins = hj__op_begin(g, op, HLO_OP_RNG_BIT_GENERATOR, &ts, &s, 1);
  if (ins) ins->rng_algorithm = (int64_t)alg;   /* hj_rng_algorithm_t follows hlo_rng_algorithm */
  return hj__op_finish(g, op, ins);
}

hj_tensor_t hj_rng_uniform(hj_tensor_t state, hj_rng_algorithm_t alg, hj_shape_t shape) {
  hj_tensor_t r = hj_rng_bits(state, alg, HJ_U32, shape);
  hj_tensor_t parts[2];
  if (hj_unpack(r, parts, 2) != HJ_OK) return r;
  hj_graph_t *g = r.graph;
  hj_tensor_t bits = hj_shr_logical(parts[1], hj_full(g, HJ_U32, shape, 9));
  hj_tensor_t one_to_two = hj_bitcast_convert(hj_or(bits, hj_full(g, HJ_U32, shape, 0x3f800000)), HJ_F32);
  hj_tensor_t u = hj_sub(one_to_two, hj_full(g, HJ_F32, shape, 1.0));
  hj_tensor_t out[2] = { parts[0], u };
  return hj_tuple(g, out, 2);
}
