/* passes/rng_lower.c — "rng-lower": rng-bit-generator as plain integer arithmetic over
   iotas (CPU and CUDA backends, first steps), so that the bits are one elementwise loop
   kernel, fused with what consumes them (the conversion to uniform floats), on every
   target. The semantics are eval/eval_rng.c's (XLA's, bit for bit); this is that
   computation written per output element:
     three-fry, 32 bits or narrower: idx's counter = state[1] + the row-major index of idx
       in the half shape (idx[split] >> 1 along the split dim), member idx[split] & 1;
       Threefry-2x32 (20 rounds) of the counter's halves under the key's; the member's word.
       Each element computes its pair's block (twice the work of XLA's concat of halves,
       one kernel instead of three).
     three-fry, 64 bits: counter = state[1] + i; word0 | word1 << 32.
     philox: block = i / 4 (i / 2 for 64 bits) added to the 128-bit counter (carry into
       the high word), Philox-4x32 (10 rounds), the element's word(s) of the block.
     new state: (key, the counter advanced), from the state's elements (slices, an add, a
       concatenate).
   The result replaces the op by tuple(new state, bits). Applies to every rng-bit-generator
   in the computations that run as kernels (the entry, while and conditional bodies). */
#include "passes.h"

typedef struct rnl {
  hlo_comp *c;
  const hlo_instr *before;
  hlo_shape S;                /* the data shape, as u32 (u64 for 64-bit data) while computing */
  hj_status st;
} rnl;

static hlo_instr *rnl_new(rnl *L, hlo_opcode op, const hlo_shape *s, hlo_instr **ops, int n) {
  if (L->st) return NULL;
  for (int k = 0; k < n; k++)
    if (!ops[k]) { L->st = HJ_ERR_OOM; return NULL; }
  hlo_instr *i = hlo_instr_new_before(L->c, L->before, op, NULL, s, ops, n);
  if (!i) L->st = HJ_ERR_OOM;
  return i;
}

/* A |t| constant |v| of shape |s| (a scalar broadcast when s has rank > 0). */
static hlo_instr *rnl_const(rnl *L, hlo_type t, uint64_t v, const hlo_shape *s) {
  if (L->st) return NULL;
  hlo_shape sc = hlo_shape_scalar(t);
  hlo_literal *l = hlo_literal_new(L->c->module->ctx, &sc);
  if (!l) { L->st = HJ_ERR_OOM; return NULL; }
  hlo_store_u64(t, l->data, 0, v);
  hlo_instr *k = hlo_constant_new_before(L->c, L->before, l);
  hlo_literal_free(l);
  if (!k) { L->st = HJ_ERR_OOM; return NULL; }
  if (!s || s->rank == 0) return k;
  hlo_shape bs = hlo_shape_array(t, s->rank, s->dims);
  return rnl_new(L, HLO_OP_BROADCAST, &bs, &k, 1);
}

static hlo_instr *rnl_bin(rnl *L, hlo_opcode op, hlo_instr *a, hlo_instr *b) {
  hlo_instr *ops[2] = { a, b };
  return a && b ? rnl_new(L, op, &a->shape, ops, 2) : NULL;
}

/* op(x, a constant |v| of x's type and shape) */
static hlo_instr *rnl_binc(rnl *L, hlo_opcode op, hlo_instr *x, uint64_t v) {
  return x ? rnl_bin(L, op, x, rnl_const(L, x->shape.type, v, &x->shape)) : NULL;
}

static hlo_instr *rnl_cvt(rnl *L, hlo_instr *x, hlo_type t) {
  if (!x) return NULL;
  hlo_shape s = x->shape;
  s.type = t;
  return rnl_new(L, HLO_OP_CONVERT, &s, &x, 1);
}

static hlo_instr *rnl_cmp(rnl *L, hlo_instr *a, hlo_instr *b, hlo_cmp_dir dir) {
  if (!a || !b) return NULL;
  hlo_shape s = a->shape;
  s.type = HLO_PRED;
  hlo_instr *ops[2] = { a, b };
  hlo_instr *r = rnl_new(L, HLO_OP_COMPARE, &s, ops, 2);
  if (r) r->cmp_dir = dir, r->cmp_type = HLO_CMPT_UNSIGNED;
  return r;
}

static hlo_instr *rnl_sel(rnl *L, hlo_instr *p, hlo_instr *a, hlo_instr *b) {
  hlo_instr *ops[3] = { p, a, b };
  return p && a && b ? rnl_new(L, HLO_OP_SELECT, &a->shape, ops, 3) : NULL;
}

/* Element |i| of the u64 state as a scalar. */
static hlo_instr *rnl_word(rnl *L, hlo_instr *state, int64_t i) {
  hlo_shape one = hlo_shape_array(HLO_U64, 1, (int64_t[]){ 1 }), sc = hlo_shape_scalar(HLO_U64);
  hlo_instr *s = rnl_new(L, HLO_OP_SLICE, &one, &state, 1);
  if (s) {
    int64_t a = i, b = i + 1, st = 1;
    s->slice_start = hlo_ints_dup(L->c->module, &a, 1);
    s->slice_limit = hlo_ints_dup(L->c->module, &b, 1);
    s->slice_stride = hlo_ints_dup(L->c->module, &st, 1);
    if (!s->slice_start.v || !s->slice_limit.v || !s->slice_stride.v) L->st = HJ_ERR_OOM;
  }
  return s ? rnl_new(L, HLO_OP_RESHAPE, &sc, &s, 1) : NULL;
}

/* |x| (a u64 or u32 scalar) broadcast to the data shape's dims as |t|. */
static hlo_instr *rnl_bcast(rnl *L, hlo_instr *x, hlo_type t) {
  if (x && x->shape.type != t) x = rnl_cvt(L, x, t);
  if (!x || L->S.rank == 0) return x;
  hlo_shape bs = hlo_shape_array(t, L->S.rank, L->S.dims);
  return rnl_new(L, HLO_OP_BROADCAST, &bs, &x, 1);
}

static hlo_instr *rnl_iota(rnl *L, int d) {
  hlo_shape s = hlo_shape_array(HLO_U64, L->S.rank, L->S.dims);
  hlo_instr *i = rnl_new(L, HLO_OP_IOTA, &s, NULL, 0);
  if (i) i->index = d;
  return i;
}

/* The row-major index of each element in the shape |dims| (u64), dim d read as coord[d]. */
static hlo_instr *rnl_linear(rnl *L, hlo_instr **coord, const int64_t *dims) {
  hlo_instr *lin = NULL;
  uint64_t stride = 1;
  for (int d = L->S.rank - 1; d >= 0; d--) {
    hlo_instr *t = stride == 1 ? coord[d] : rnl_binc(L, HLO_OP_MULTIPLY, coord[d], stride);
    lin = lin ? rnl_bin(L, HLO_OP_ADD, lin, t) : t;
    stride *= (uint64_t)dims[d];
  }
  return lin ? lin : rnl_const(L, HLO_U64, 0, &L->S);
}

static hlo_instr *rnl_shr(rnl *L, hlo_instr *x, int n) { return rnl_binc(L, HLO_OP_SHRL, x, (uint64_t)n); }

static hlo_instr *rnl_rotl(rnl *L, hlo_instr *v, int d) {
  return rnl_bin(L, HLO_OP_OR, rnl_binc(L, HLO_OP_SHL, v, (uint64_t)d), rnl_shr(L, v, 32 - d));
}

/* x = Threefry-2x32(x) under key (k0, k1), 20 rounds: eval_rng.c's evrng_threefry. */
static void rnl_threefry(rnl *L, hlo_instr **x, hlo_instr *k0, hlo_instr *k1) {
  static const int rot[8] = { 13, 15, 26, 6, 17, 29, 16, 24 };
  hlo_instr *ks[3] = { k0, k1, rnl_bin(L, HLO_OP_XOR, rnl_binc(L, HLO_OP_XOR, k0, 0x1BD11BDAu), k1) };
  x[0] = rnl_bin(L, HLO_OP_ADD, x[0], ks[0]);
  x[1] = rnl_bin(L, HLO_OP_ADD, x[1], ks[1]);
  for (int g = 0; g < 5; g++) {
    for (int r = 0; r < 4; r++) {
      x[0] = rnl_bin(L, HLO_OP_ADD, x[0], x[1]);
      x[1] = rnl_bin(L, HLO_OP_XOR, rnl_rotl(L, x[1], rot[(g % 2) * 4 + r]), x[0]);
    }
    x[0] = rnl_bin(L, HLO_OP_ADD, x[0], ks[(g + 1) % 3]);
    x[1] = rnl_bin(L, HLO_OP_ADD, x[1], rnl_binc(L, HLO_OP_ADD, ks[(g + 2) % 3], (uint64_t)g + 1));
  }
}

/* x = Philox-4x32(x) under key (k0, k1), 10 rounds: eval_rng.c's evrng_philox. */
static void rnl_philox(rnl *L, hlo_instr **x, hlo_instr *k0, hlo_instr *k1) {
  for (int r = 0; r < 10; r++) {
    hlo_instr *p0 = rnl_binc(L, HLO_OP_MULTIPLY, rnl_cvt(L, x[0], HLO_U64), 0xD2511F53u);
    hlo_instr *p1 = rnl_binc(L, HLO_OP_MULTIPLY, rnl_cvt(L, x[2], HLO_U64), 0xCD9E8D57u);
    hlo_instr *y[4] = {
      rnl_bin(L, HLO_OP_XOR, rnl_bin(L, HLO_OP_XOR, rnl_cvt(L, rnl_shr(L, p1, 32), HLO_U32), x[1]), k0),
      rnl_cvt(L, p1, HLO_U32),
      rnl_bin(L, HLO_OP_XOR, rnl_bin(L, HLO_OP_XOR, rnl_cvt(L, rnl_shr(L, p0, 32), HLO_U32), x[3]), k1),
      rnl_cvt(L, p0, HLO_U32) };
    memcpy(x, y, sizeof y);
    k0 = rnl_binc(L, HLO_OP_ADD, k0, 0x9E3779B9u);
    k1 = rnl_binc(L, HLO_OP_ADD, k1, 0xBB67AE85u);
  }
}

static hlo_instr *rnl_lo(rnl *L, hlo_instr *u64) { return rnl_cvt(L, u64, HLO_U32); }
static hlo_instr *rnl_hi(rnl *L, hlo_instr *u64) { return rnl_cvt(L, rnl_shr(L, u64, 32), HLO_U32); }
static hlo_instr *rnl_join(rnl *L, hlo_instr *lo, hlo_instr *hi) {   /* lo | hi << 32 as u64 */
  return rnl_bin(L, HLO_OP_OR, rnl_cvt(L, lo, HLO_U64), rnl_binc(L, HLO_OP_SHL, rnl_cvt(L, hi, HLO_U64), 32));
}

static hj_status rnl_rewrite(hlo_comp *c, hlo_instr *ins) {
  rnl L = { .c = c, .before = ins };
  hlo_instr *state = ins->operands[0];
  const hlo_shape *ds = &ins->shape.tuple[1];
  hlo_type t = ds->type;
  int w = 8 * hlo_type_size(t);
  L.S = hlo_shape_array(HLO_U32, ds->rank, ds->dims);
  int64_t n = hlo_shape_numel(ds), words = state->shape.dims[0];
  hlo_instr *key = rnl_word(&L, state, 0), *s1 = rnl_word(&L, state, 1);
  hlo_instr *k0 = rnl_bcast(&L, rnl_lo(&L, key), HLO_U32), *k1 = rnl_bcast(&L, rnl_hi(&L, key), HLO_U32);
  hlo_instr *coord[HLO_MAX_RANK];
  for (int d = 0; d < ds->rank; d++) coord[d] = rnl_iota(&L, d);
  hlo_instr *bits = NULL, *nstate[3] = { key, NULL, NULL };
  int nwords = 2;
  if (ins->rng_algorithm == HLO_RNG_THREE_FRY) {
    hlo_instr *x[2], *lin, *member = NULL;
    uint64_t advance = (uint64_t)n;
    if (w < 64) {
      int split = hlo_rng_split_dim(ds);
      int64_t half[HLO_MAX_RANK];
      advance = 1;
      for (int d = 0; d < ds->rank; d++) {
        half[d] = d == split ? (ds->dims[d] + 1) / 2 : ds->dims[d];
        advance *= (uint64_t)half[d];
      }
      if (ds->rank > 0) {
        member = rnl_binc(&L, HLO_OP_AND, coord[split], 1);
        coord[split] = rnl_shr(&L, coord[split], 1);
      }
      lin = rnl_linear(&L, coord, half);
    } else {
      lin = rnl_linear(&L, coord, ds->dims);
    }
    hlo_instr *ctr = rnl_bin(&L, HLO_OP_ADD, rnl_bcast(&L, s1, HLO_U64), lin);
    x[0] = rnl_lo(&L, ctr), x[1] = rnl_hi(&L, ctr);
    rnl_threefry(&L, x, k0, k1);
    if (w == 64) bits = rnl_join(&L, x[0], x[1]);
    else bits = member ? rnl_sel(&L, rnl_cmp(&L, member, rnl_const(&L, HLO_U64, 0, &L.S), HLO_CMP_EQ), x[0], x[1]) : x[0];
    nstate[1] = rnl_binc(&L, HLO_OP_ADD, s1, advance);
  } else {   /* philox (and the default) */
    bool three = words >= 3;
    hlo_instr *lo = s1, *hi = three ? rnl_word(&L, state, 2) : key;
    int per = w == 64 ? 2 : 4;
    hlo_instr *lin = rnl_linear(&L, coord, ds->dims);
    hlo_instr *blk = rnl_shr(&L, lin, per == 4 ? 2 : 1), *j = rnl_binc(&L, HLO_OP_AND, lin, (uint64_t)per - 1);
    hlo_instr *lob = rnl_bcast(&L, lo, HLO_U64), *l = rnl_bin(&L, HLO_OP_ADD, lob, blk);
    hlo_instr *h = rnl_bin(&L, HLO_OP_ADD, rnl_bcast(&L, hi, HLO_U64), rnl_cvt(&L, rnl_cmp(&L, l, lob, HLO_CMP_LT), HLO_U64));
    hlo_instr *x[4] = { rnl_lo(&L, l), rnl_hi(&L, l), rnl_lo(&L, h), rnl_hi(&L, h) };
    rnl_philox(&L, x, k0, k1);
    if (per == 2) {
      bits = rnl_sel(&L, rnl_cmp(&L, j, rnl_const(&L, HLO_U64, 0, &L.S), HLO_CMP_EQ), rnl_join(&L, x[0], x[1]),
                     rnl_join(&L, x[2], x[3]));
    } else {
      bits = x[3];
      for (int q = 2; q >= 0; q--)
        bits = rnl_sel(&L, rnl_cmp(&L, j, rnl_const(&L, HLO_U64, (uint64_t)q, &L.S), HLO_CMP_EQ), x[q], bits);
    }
    uint64_t blocks = (uint64_t)((n + per - 1) / per);
    hlo_instr *ln = rnl_binc(&L, HLO_OP_ADD, lo, blocks);
    nstate[1] = ln;
    if (three) {
      nstate[2] = rnl_bin(&L, HLO_OP_ADD, hi, rnl_cvt(&L, rnl_cmp(&L, ln, lo, HLO_CMP_LT), HLO_U64));
      nwords = 3;
    }
  }
  /* the data type: the low bits, the sign reinterpreted */
  hlo_type ut = w == 64 ? HLO_U64 : w == 32 ? HLO_U32 : w == 16 ? HLO_U16 : HLO_U8;
  if (bits && bits->shape.type != ut) bits = rnl_cvt(&L, bits, ut);
  if (bits && ut != t) {
    hlo_shape s = bits->shape;
    s.type = t;
    bits = rnl_new(&L, HLO_OP_BITCAST_CONVERT, &s, &bits, 1);
  }
  hlo_instr *parts[3];
  hlo_shape one = hlo_shape_array(HLO_U64, 1, (int64_t[]){ 1 });
  for (int i = 0; i < nwords; i++) parts[i] = nstate[i] ? rnl_new(&L, HLO_OP_RESHAPE, &one, &nstate[i], 1) : NULL;
  hlo_instr *ns = rnl_new(&L, HLO_OP_CONCATENATE, &state->shape, parts, nwords);
  if (ns) {
    int64_t z = 0;
    ns->dims = hlo_ints_dup(c->module, &z, 1);
    if (!ns->dims.v) L.st = HJ_ERR_OOM;
  }
  hlo_instr *el[2] = { ns, bits };
  hlo_instr *tup = rnl_new(&L, HLO_OP_TUPLE, &ins->shape, el, 2);
  if (L.st || !tup) return L.st ? L.st : HJ_ERR_OOM;
  hlo_replace_all_uses(c, ins, tup);
  if (c->root == ins) hlo_comp_set_root(c, tup);
  hlo_remove_instr(c, ins);
  return HJ_OK;
}

hj_status hlo_pass_rng_lower(hlo_pass_ctx *pc, hlo_module *m, bool *changed) {
  (void)pc;
  if (changed) *changed = false;
  for (ptrdiff_t ci = 0; ci < arrlen(m->comps); ci++) {
    hlo_comp *c = m->comps[ci];
    hlo_instr **todo = NULL;
    for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++)
      if (c->instrs[i]->op == HLO_OP_RNG_BIT_GENERATOR && c->instrs[i]->shape.type == HLO_TUPLE &&
          c->instrs[i]->shape.ntuple == 2 && c->instrs[i]->operands[0]->shape.rank == 1)
        arrput(todo, c->instrs[i]);
    for (ptrdiff_t i = 0; i < arrlen(todo); i++) {
      const char *nm = todo[i]->name;
      hj_status st = rnl_rewrite(c, todo[i]);
      if (st) {
        arrfree(todo);
        return hj__err(m->ctx, st, "pass rng-lower: out of memory rewriting '%s'", nm);
      }
      if (changed) *changed = true;
    }
    arrfree(todo);
  }
  return HJ_OK;
}
