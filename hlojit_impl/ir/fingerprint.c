/* ir/fingerprint.c — structural identity of computations and fusions (ir.h, "fingerprint").

   Two fusions whose kernels would be the same code must be recognised as such, whatever
   their names and ids: the compile driver emits one kernel for them (runtime/compile.c),
   and the tracing JIT's disk cache keys compiled code by the optimised module. Both need
   (1) a canonical byte encoding, equal exactly when the structures are equal, and (2) a
   fingerprint, a 128-bit hash of that encoding: the fingerprint finds candidates, the bytes
   decide (memcmp), so a hash collision can never merge two different kernels.

   The encoding, per computation (callees encoded inline where they are called):
     the number of instructions and parameters; per instruction, in text order: opcode,
     shape (type, dims, dynamic flags, layout, tuple elements), every attribute field (the
     same list CSE compares: index, dims, slice, dynamic-slice sizes, padding, compare
     direction and type, dot/gather/scatter dimension numbers, window, fusion kind,
     stability), a constant's literal (shape and every byte), operands as positions in the
     text order, called computations; then the root's position.
   A fusion adds its kind, its own shape and its operands' shapes (layouts included) in
   front of its fused computation. Not encoded: names, ids, the computation the fusion sits
   in. Everything is written as little-endian fixed-width integers, so the bytes (and the
   fingerprint) are the same in every process and on every run; the fingerprint of equal
   structures is equal across processes, as a disk cache needs.

   The hash: two 64-bit lanes, each a multiply-xorshift mix of 8-byte words with its own
   seed (splitmix64's finaliser), the length mixed in last. Not cryptographic: the equality
   check, not the hash, is what keeps different kernels apart. */
#include "ir.h"
#include <stdlib.h>

typedef struct { const hlo_instr *key; int value; } hfp_pos;

static void hfp_u64(uint8_t **out, uint64_t v) {
  uint8_t b[8];
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
  memcpy(arraddnptr(*out, 8), b, 8);
}

static void hfp_i64(uint8_t **out, int64_t v) { hfp_u64(out, (uint64_t)v); }

static void hfp_ints(uint8_t **out, hlo_ints v) {
  hfp_i64(out, v.n);
  for (int i = 0; i < v.n; i++) hfp_i64(out, v.v[i]);
}

static void hfp_shape(uint8_t **out, const hlo_shape *s) {
  hfp_i64(out, s->type);
  hfp_i64(out, s->rank);
  for (int d = 0; d < s->rank && d < HLO_MAX_RANK; d++) {
    hfp_i64(out, s->dims[d]);
    hfp_i64(out, s->dynamic[d]);
  }
  hfp_i64(out, s->has_layout);
  if (s->has_layout)
    for (int d = 0; d < s->rank && d < HLO_MAX_RANK; d++) hfp_i64(out, s->minor_to_major[d]);
  hfp_i64(out, s->type == HLO_TUPLE ? s->ntuple : 0);
  for (int i = 0; s->type == HLO_TUPLE && i < s->ntuple; i++) hfp_shape(out, &s->tuple[i]);
}

static void hfp_literal(uint8_t **out, const hlo_literal *l) {
  if (!l) {
    hfp_i64(out, -1);
    return;
  }
  hfp_shape(out, &l->shape);
  hfp_i64(out, l->nbytes);
  if (l->nbytes > 0 && l->data) memcpy(arraddnptr(*out, l->nbytes), l->data, (size_t)l->nbytes);
  hfp_i64(out, l->nelems);
  for (int i = 0; i < l->nelems; i++) hfp_literal(out, l->elems[i]);
}

static void hfp_attrs(uint8_t **out, const hlo_instr *x) {
#define I(f) hfp_ints(out, x->f);
#define S(f) hfp_i64(out, (int64_t)x->f);
  HLO_INSTR_ATTRS(I, S)
#undef I
#undef S
}

/* |depth| bounds the nesting of called computations (the verifier rejects cycles; this
   keeps a malformed module from recursing for ever). */
static bool hfp_comp(uint8_t **out, const hlo_comp *c, int depth) {
  if (depth > 64) return false;
  hfp_pos *pos = NULL;
  ptrdiff_t n = arrlen(c->instrs);
  for (ptrdiff_t i = 0; i < n; i++) hmput(pos, c->instrs[i], (int)i);
  hfp_u64(out, 0x636f6d70ull);   /* "comp" */
  hfp_i64(out, n);
  hfp_i64(out, arrlen(c->params));
  bool ok = true;
  for (ptrdiff_t i = 0; i < n && ok; i++) {
    const hlo_instr *x = c->instrs[i];
    hfp_i64(out, x->op);
    hfp_shape(out, &x->shape);
    hfp_attrs(out, x);
    if (x->op == HLO_OP_CONSTANT) hfp_literal(out, x->literal);
    hfp_i64(out, x->noperands);
    for (int k = 0; k < x->noperands; k++) {
      ptrdiff_t j = hmgeti(pos, x->operands[k]);
      hfp_i64(out, j < 0 ? -1 : pos[j].value);
    }
    hfp_i64(out, x->ncalls);
    for (int k = 0; k < x->ncalls && ok; k++) ok = x->calls[k] && hfp_comp(out, x->calls[k], depth + 1);
  }
  ptrdiff_t r = c->root ? hmgeti(pos, c->root) : -1;
  hfp_i64(out, r < 0 ? -1 : pos[r].value);
  hmfree(pos);
  return ok;
}

bool hlo_encode_comp(const hlo_comp *c, uint8_t **out) {
  return c && hfp_comp(out, c, 0);
}

bool hlo_encode_fusion(const hlo_instr *fusion, uint8_t **out) {
  if (!fusion || fusion->op != HLO_OP_FUSION || fusion->ncalls != 1 || !fusion->calls[0]) return false;
  hfp_u64(out, 0x667573696f6eull);   /* "fusion" */
  hfp_i64(out, fusion->fusion_kind);
  hfp_shape(out, &fusion->shape);
  hfp_i64(out, fusion->noperands);
  for (int k = 0; k < fusion->noperands; k++) hfp_shape(out, &fusion->operands[k]->shape);
  return hfp_comp(out, fusion->calls[0], 0);
}

static uint64_t hfp_mix(uint64_t z) {   /* splitmix64's finaliser */
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

hlo_fingerprint hlo_fingerprint_bytes(const void *p, size_t n) {
  const uint8_t *b = p;
  uint64_t h0 = 0x243f6a8885a308d3ull, h1 = 0x13198a2e03707344ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w = 0;
    for (int k = 0; k < 8; k++) w |= (uint64_t)b[i + k] << (8 * k);
    h0 = hfp_mix(h0 ^ w) + 0x9e3779b97f4a7c15ull;
    h1 = hfp_mix(h1 + w * 0xff51afd7ed558ccdull) ^ (h1 >> 17);
  }
  uint64_t w = 0;
  for (int k = 0; i + (size_t)k < n; k++) w |= (uint64_t)b[i + k] << (8 * k);
  h0 = hfp_mix(h0 ^ w ^ (uint64_t)n);
  h1 = hfp_mix(h1 + w + ((uint64_t)n << 1) + h0);
  hlo_fingerprint f = { h0, h1 };
  return f;
}

hlo_fingerprint hlo_fingerprint_comp(const hlo_comp *c) {
  uint8_t *bytes = NULL;
  hlo_fingerprint f = { 0, 0 };
  if (hlo_encode_comp(c, &bytes)) f = hlo_fingerprint_bytes(bytes, (size_t)arrlen(bytes));
  arrfree(bytes);
  return f;
}

hlo_fingerprint hlo_fingerprint_module(const hlo_module *m) {
  return m && m->entry ? hlo_fingerprint_comp(m->entry) : (hlo_fingerprint){ 0, 0 };
}

void hlo_fingerprint_hex(hlo_fingerprint f, char out[33]) {
  snprintf(out, 33, "%016llx%016llx", (unsigned long long)f.hi, (unsigned long long)f.lo);
}
