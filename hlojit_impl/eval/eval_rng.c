/* eval_rng.c — rng-bit-generator for the reference evaluator, bit for bit what XLA computes
   (its RngBitGeneratorExpander over xla/hlo/builder/lib/prng.cc's generators; XLA:CPU's
   default algorithm is Philox). The CPU and CUDA backends lower the op to the same
   arithmetic in HLO (passes/rng_lower.c); this file is the oracle they are checked against,
   written as plain loops over the output elements.

   Three-fry (state u64[2] = key, counter): Threefry-2x32 with 20 rounds (Salmon et al.,
   SC 2011) of the 64-bit counter (low, high 32-bit halves) under the key's halves.
     32 bits and narrower: the data shape S is split in halves along its first even dim
       (else its largest): element idx reads the pair made for counter + the row-major
       index of idx in the half shape (idx[split] / 2 there), member idx[split] % 2
       (a scalar: member 0 of counter + 0); the counter advances by the half shape's size.
       Narrower types keep the low bits.
     64 bits: element i (row-major) is pair(counter + i) as lo | hi << 32; the counter
       advances by numel(S).
     new state = (key, counter').
   Philox (state u64[3] = key, counter low, counter high; or u64[2] = key, counter, the
   key doubling as the counter's high word): Philox-4x32 with 10 rounds of the 128-bit
   counter + j (carry into the high word) under the key's halves; 32 bits and narrower:
   element i is word i % 4 of block i / 4; 64 bits: element i is words (0,1) or (2,3) of
   block i / 2. The counter advances by the blocks used; new state = (key, counter') (u64[2]
   state: its low word only). */
#include "eval_internal.h"

static uint32_t evrng_rotl(uint32_t v, int d) { return v << d | v >> (32 - d); }

static void evrng_threefry(const uint32_t key[2], const uint32_t in[2], uint32_t out[2]) {
  static const int rot[8] = { 13, 15, 26, 6, 17, 29, 16, 24 };
  uint32_t ks[3] = { key[0], key[1], 0x1BD11BDAu ^ key[0] ^ key[1] };
  uint32_t x0 = in[0] + ks[0], x1 = in[1] + ks[1];
  for (int g = 0; g < 5; g++) {   /* 5 groups of 4 rounds, a key injection after each */
    for (int r = 0; r < 4; r++) {
      x0 += x1;
      x1 = evrng_rotl(x1, rot[(g % 2) * 4 + r]);
      x1 ^= x0;
    }
    x0 += ks[(g + 1) % 3];
    x1 += ks[(g + 2) % 3] + (uint32_t)(g + 1);
  }
  out[0] = x0, out[1] = x1;
}

static void evrng_philox(const uint32_t key[2], const uint32_t in[4], uint32_t out[4]) {
  uint32_t k0 = key[0], k1 = key[1], x[4] = { in[0], in[1], in[2], in[3] };
  for (int r = 0; r < 10; r++) {
    uint64_t p0 = (uint64_t)x[0] * 0xD2511F53u, p1 = (uint64_t)x[2] * 0xCD9E8D57u;
    uint32_t y[4] = { (uint32_t)(p1 >> 32) ^ x[1] ^ k0, (uint32_t)p1, (uint32_t)(p0 >> 32) ^ x[3] ^ k1, (uint32_t)p0 };
    memcpy(x, y, sizeof x);
    k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
  }
  memcpy(out, x, sizeof x);
}

hj_status hlo_eval_rng_bits(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops, hlo_literal *r) {
  const hlo_literal *st = ops[0];
  if (r->shape.type != HLO_TUPLE || r->nelems != 2 || st->shape.type != HLO_U64 || st->shape.rank != 1 ||
      st->shape.dims[0] < 2)
    return hlo_evo_err(ctx, ins, "needs a u64 state and a (state, bits) result");
  const uint64_t *s = (const uint64_t *)st->data;
  hlo_literal *ns = r->elems[0], *bits = r->elems[1];
  uint64_t *o = (uint64_t *)ns->data;
  const hlo_shape *S = &bits->shape;
  hlo_type t = S->type;
  int w = 8 * hlo_type_size(t);
  int64_t n = hlo_shape_numel(S);
  uint64_t key64 = s[0];
  uint32_t key[2] = { (uint32_t)key64, (uint32_t)(key64 >> 32) };
  memcpy(o, s, (size_t)st->shape.dims[0] * 8);
  if (ins->rng_algorithm == HLO_RNG_THREE_FRY) {
    uint64_t ctr = s[1];
    if (w == 64) {
      for (int64_t i = 0; i < n; i++) {
        uint64_t c = ctr + (uint64_t)i;
        uint32_t in[2] = { (uint32_t)c, (uint32_t)(c >> 32) }, out[2];
        evrng_threefry(key, in, out);
        hlo_store_u64(t, bits->data, i, (uint64_t)out[0] | (uint64_t)out[1] << 32);
      }
      o[1] = ctr + (uint64_t)n;
      return HJ_OK;
    }
    int split = hlo_rng_split_dim(S);
    int64_t half[HLO_MAX_RANK], idx[HLO_MAX_RANK] = { 0 }, hn = 1;
    for (int d = 0; d < S->rank; d++) half[d] = d == split ? (S->dims[d] + 1) / 2 : S->dims[d];
    for (int d = 0; d < S->rank; d++) hn *= half[d];
    for (int64_t i = 0; i < n; i++) {
      int64_t lin = 0;
      for (int d = 0; d < S->rank; d++) lin = lin * half[d] + (d == split ? idx[d] / 2 : idx[d]);
      uint64_t c = ctr + (uint64_t)lin;
      uint32_t in[2] = { (uint32_t)c, (uint32_t)(c >> 32) }, out[2];
      evrng_threefry(key, in, out);
      hlo_store_u64(t, bits->data, i, out[S->rank ? idx[split] % 2 : 0]);
      for (int d = S->rank - 1; d >= 0 && ++idx[d] == S->dims[d]; d--) idx[d] = 0;
    }
    o[1] = ctr + (uint64_t)(S->rank ? hn : 1);
    return HJ_OK;
  }
  /* philox: the 128-bit counter (lo, hi); a u64[2] state uses (s[1], s[0]) */
  bool three = st->shape.dims[0] >= 3;
  uint64_t lo = s[1], hi = three ? s[2] : s[0];
  int per = w == 64 ? 2 : 4;                        /* elements per block */
  int64_t blocks = (n + per - 1) / per;
  for (int64_t b = 0; b < blocks; b++) {
    uint64_t l = lo + (uint64_t)b, h = hi + (l < lo);
    uint32_t in[4] = { (uint32_t)l, (uint32_t)(l >> 32), (uint32_t)h, (uint32_t)(h >> 32) }, out[4];
    evrng_philox(key, in, out);
    for (int j = 0; j < per && b * per + j < n; j++) {
      uint64_t v = w == 64 ? (uint64_t)out[2 * j] | (uint64_t)out[2 * j + 1] << 32 : out[j];
      hlo_store_u64(t, bits->data, b * per + j, v);
    }
  }
  uint64_t l = lo + (uint64_t)blocks;
  o[1] = l;
  if (three) o[2] = hi + (l < lo);
  return HJ_OK;
}
