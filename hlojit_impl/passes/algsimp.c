/* passes/algsimp.c — algebraic simplification as a table of rewrite rules.

   Each row of alg_rules: an opcode, a match function (may this rule fire on |ins|?), a
   rewrite function (the replacement: an existing instruction, or new ones inserted just
   before |ins|, so the text order stays topological) and the rule as a comment. The
   driver walks every computation in text order and applies the first matching row of the
   instruction's opcode; the replaced instruction is left for DCE. The pipeline reruns the
   pass until nothing changes, so rules compose (neg(neg(neg x)) -> neg x in two sweeps).

   Exactness: every rule preserves values bit for bit under IEEE 754 and XLA's integer
   semantics. So for floats: no x*0 -> 0 (NaN, inf, -0), no x-x -> 0, no x+0 -> x (-0 + +0
   is +0) but x + -0 -> x and x - +0 -> x; x*1 and x/1 are exact. (A signalling NaN input
   would come out unquieted: the evaluator never makes one.)
   Layouts: a replacement must have exactly the instruction's shape, layout included (a
   bitcast user or the entry's root reads the layout); alg_same enforces it.
   "Constant c" below means a constant whose every element is c, or a broadcast of such a
   scalar constant. */
#include "passes.h"
#include <math.h>

typedef struct alg_rule {
  hlo_opcode op;
  bool (*match)(const hlo_instr *ins);
  hlo_instr *(*rewrite)(hlo_comp *c, hlo_instr *ins);   /* NULL: no rewrite after all */
} alg_rule;

/* ---- helpers ------------------------------------------------------------------------------- */

static hlo_instr *alg_same(const hlo_instr *ins, hlo_instr *x) {
  return hlo_shape_equal(&x->shape, &ins->shape) && hlo_shape_compatible(&x->shape, &ins->shape)
             ? x : NULL;
}

/* The literal every element of |x| comes from (a constant, or a broadcast scalar constant). */
static const hlo_literal *alg_const_lit(const hlo_instr *x) {
  if (x->op == HLO_OP_BROADCAST && x->operands[0]->op == HLO_OP_CONSTANT &&
      x->operands[0]->shape.rank == 0)
    x = x->operands[0];
  if (x->op != HLO_OP_CONSTANT || !x->literal || !hlo_shape_is_array(&x->shape)) return NULL;
  return x->literal->data || x->literal->nbytes == 0 ? x->literal : NULL;
}

typedef enum { ALG_ZERO, ALG_NEG_ZERO, ALG_ONE, ALG_TRUE, ALG_FALSE } alg_value;

/* Every element of |x| is |v| (bitwise for floats: +0 and -0 differ). */
static bool alg_is(const hlo_instr *x, alg_value v) {
  const hlo_literal *l = alg_const_lit(x);
  if (!l) return false;
  hlo_type t = l->shape.type;
  int64_t n = hlo_shape_numel(&l->shape);
  for (int64_t i = 0; i < n; i++) {
    bool ok;
    if (hlo_type_is_float(t)) {
      double d = hlo_load_f64(t, l->data, i);
      ok = (v == ALG_ZERO && d == 0 && !signbit(d)) || (v == ALG_NEG_ZERO && d == 0 && signbit(d)) ||
           (v == ALG_ONE && d == 1);
    } else if (t == HLO_PRED) {
      uint64_t u = hlo_load_u64(t, l->data, i);
      ok = (v == ALG_TRUE && u != 0) || (v == ALG_FALSE && u == 0);
    } else {
      uint64_t u = hlo_load_u64(t, l->data, i);
      ok = (v == ALG_ZERO && u == 0) || (v == ALG_ONE && u == 1);
    }
    if (!ok) return false;
  }
  return true;
}

static bool alg_int(const hlo_instr *ins) { return hlo_type_is_int(ins->shape.type); }
static bool alg_flt(const hlo_instr *ins) { return hlo_type_is_float(ins->shape.type); }

static hlo_instr *alg_op0(hlo_comp *c, hlo_instr *ins) { return alg_same(ins, ins->operands[0]); }
static hlo_instr *alg_op1(hlo_comp *c, hlo_instr *ins) { return alg_same(ins, ins->operands[1]); }
static hlo_instr *alg_op2(hlo_comp *c, hlo_instr *ins) { return alg_same(ins, ins->operands[2]); }
/* x = op(op(x)) */
static hlo_instr *alg_op00(hlo_comp *c, hlo_instr *ins) {
  return alg_same(ins, ins->operands[0]->operands[0]);
}

static bool alg_identity_perm(hlo_ints p) {
  for (int i = 0; i < p.n; i++)
    if (p.v[i] != i) return false;
  return true;
}

/* A new |op| of |x| with ins's shape, placed before |ins| (alg_comp rebuilds c->instrs as
   it walks: what is appended now lands before |ins|); attributes are the caller's. */
static hlo_instr *alg_new1(hlo_comp *c, hlo_instr *ins, hlo_opcode op, hlo_instr *x) {
  return hlo_instr_new(c, op, NULL, &ins->shape, &x, 1);
}

/* ---- add, subtract, multiply, divide --------------------------------------------------------- */

/* x + 0 -> x, 0 + x -> x (integers); x + -0 -> x, -0 + x -> x (floats) */
static bool alg_add_zero_r(const hlo_instr *i) {
  return (alg_int(i) && alg_is(i->operands[1], ALG_ZERO)) ||
         (alg_flt(i) && alg_is(i->operands[1], ALG_NEG_ZERO));
}
static bool alg_add_zero_l(const hlo_instr *i) {
  return (alg_int(i) && alg_is(i->operands[0], ALG_ZERO)) ||
         (alg_flt(i) && alg_is(i->operands[0], ALG_NEG_ZERO));
}
/* x - 0 -> x (integers, and floats with +0: x - +0 == x + -0 == x) */
static bool alg_sub_zero(const hlo_instr *i) {
  return (alg_int(i) || alg_flt(i)) && alg_is(i->operands[1], ALG_ZERO);
}
/* x * 1 -> x, 1 * x -> x (integers and floats), x / 1 -> x */
static bool alg_one_r(const hlo_instr *i) {
  return (alg_int(i) || alg_flt(i)) && alg_is(i->operands[1], ALG_ONE);
}
static bool alg_one_l(const hlo_instr *i) {
  return (alg_int(i) || alg_flt(i)) && alg_is(i->operands[0], ALG_ONE);
}
/* x * 0 -> 0, 0 * x -> 0 (integers only) */
static bool alg_mul_zero_r(const hlo_instr *i) { return alg_int(i) && alg_is(i->operands[1], ALG_ZERO); }
static bool alg_mul_zero_l(const hlo_instr *i) { return alg_int(i) && alg_is(i->operands[0], ALG_ZERO); }

/* ---- unary and logical ----------------------------------------------------------------------- */

/* neg(neg x) -> x (sign flipped twice; integers wrap twice) */
static bool alg_neg_neg(const hlo_instr *i) { return i->operands[0]->op == HLO_OP_NEGATE; }
/* not(not x) -> x */
static bool alg_not_not(const hlo_instr *i) { return i->operands[0]->op == HLO_OP_NOT; }
/* max(x, x) -> x, min(x, x) -> x, and(x, x) -> x, or(x, x) -> x */
static bool alg_same_operands(const hlo_instr *i) { return i->operands[0] == i->operands[1]; }
/* and(x, true) -> x, or(x, false) -> x (pred) */
static bool alg_and_true_r(const hlo_instr *i) {
  return i->shape.type == HLO_PRED && alg_is(i->operands[1], ALG_TRUE);
}
static bool alg_and_true_l(const hlo_instr *i) {
  return i->shape.type == HLO_PRED && alg_is(i->operands[0], ALG_TRUE);
}
static bool alg_or_false_r(const hlo_instr *i) {
  return i->shape.type == HLO_PRED && alg_is(i->operands[1], ALG_FALSE);
}
static bool alg_or_false_l(const hlo_instr *i) {
  return i->shape.type == HLO_PRED && alg_is(i->operands[0], ALG_FALSE);
}
/* select(true, a, b) -> a; select(false, a, b) -> b */
static bool alg_sel_true(const hlo_instr *i) { return alg_is(i->operands[0], ALG_TRUE); }
static bool alg_sel_false(const hlo_instr *i) { return alg_is(i->operands[0], ALG_FALSE); }
/* select(p, a, a) -> a */
static bool alg_sel_same(const hlo_instr *i) { return i->operands[1] == i->operands[2]; }

/* ---- shape ops ------------------------------------------------------------------------------- */

/* op x -> x when the op changes nothing: reshape/bitcast/copy to the same shape, convert
   to the same type, transpose by the identity, broadcast to the same rank (dims 0..r-1),
   reverse of no dims, concatenate of one operand. copy of the root stays (it may be what
   makes the output its own buffer). */
static bool alg_identity(const hlo_instr *i) {
  const hlo_instr *x = i->operands[0];
  if (!hlo_shape_equal(&x->shape, &i->shape) || !hlo_shape_compatible(&x->shape, &i->shape))
    return false;
  switch (i->op) {
  case HLO_OP_TRANSPOSE: return alg_identity_perm(i->dims);
  case HLO_OP_BROADCAST: return alg_identity_perm(i->dims);
  case HLO_OP_REVERSE: return i->dims.n == 0;
  case HLO_OP_CONCATENATE: return i->noperands == 1;
  case HLO_OP_COPY: return !i->is_root && i->parent->root != i;
  default: return true;   /* reshape, bitcast, convert */
  }
}

/* slice of the full range with stride 1 -> x */
static bool alg_slice_full(const hlo_instr *i) {
  const hlo_instr *x = i->operands[0];
  for (int d = 0; d < i->slice_start.n; d++)
    if (i->slice_start.v[d] != 0 || i->slice_limit.v[d] != x->shape.dims[d] ||
        (i->slice_stride.n > d && i->slice_stride.v[d] != 1))
      return false;
  return true;
}

/* pad with no padding at all -> x */
static bool alg_pad_none(const hlo_instr *i) {
  for (int d = 0; d < i->pad_lo.n; d++)
    if (i->pad_lo.v[d] != 0 || i->pad_hi.v[d] != 0 ||
        (i->pad_interior.n > d && i->pad_interior.v[d] != 0))
      return false;
  return true;
}

/* reshape(reshape x) -> reshape x (also for bitcast-free reshape chains) */
static bool alg_reshape_reshape(const hlo_instr *i) { return i->operands[0]->op == HLO_OP_RESHAPE; }
static hlo_instr *alg_reshape_of_x(hlo_comp *c, hlo_instr *ins) {
  return alg_new1(c, ins, HLO_OP_RESHAPE, ins->operands[0]->operands[0]);
}

/* transpose(transpose x, p2) with inner p1 -> transpose x, p[i] = p1[p2[i]] */
static bool alg_transpose_transpose(const hlo_instr *i) {
  return i->operands[0]->op == HLO_OP_TRANSPOSE;
}
static hlo_instr *alg_compose_transpose(hlo_comp *c, hlo_instr *ins) {
  const hlo_instr *t1 = ins->operands[0];
  int64_t p[HLO_MAX_RANK];
  for (int k = 0; k < ins->dims.n; k++) p[k] = t1->dims.v[ins->dims.v[k]];
  hlo_ints perm = { p, ins->dims.n };
  if (alg_identity_perm(perm)) return alg_same(ins, t1->operands[0]);
  hlo_instr *r = alg_new1(c, ins, HLO_OP_TRANSPOSE, t1->operands[0]);
  if (r) r->dims = hlo_ints_dup(c->module, p, ins->dims.n);
  return r;
}

/* broadcast(broadcast x, d1), d2 -> broadcast x, d[k] = d2[d1[k]] */
static bool alg_broadcast_broadcast(const hlo_instr *i) {
  return i->operands[0]->op == HLO_OP_BROADCAST;
}
static hlo_instr *alg_compose_broadcast(hlo_comp *c, hlo_instr *ins) {
  const hlo_instr *b1 = ins->operands[0];
  int64_t d[HLO_MAX_RANK];
  for (int k = 0; k < b1->dims.n; k++) d[k] = ins->dims.v[b1->dims.v[k]];
  hlo_instr *r = alg_new1(c, ins, HLO_OP_BROADCAST, b1->operands[0]);
  if (r) r->dims = hlo_ints_dup(c->module, d, b1->dims.n);
  return r;
}

/* reshape/transpose/copy(broadcast(scalar s)) -> broadcast(s) to the new shape: keeps
   scalar broadcasts next to their users, where fusion can take them */
static bool alg_of_scalar_broadcast(const hlo_instr *i) {
  const hlo_instr *b = i->operands[0];
  return b->op == HLO_OP_BROADCAST && b->operands[0]->shape.rank == 0 &&
         (i->op != HLO_OP_COPY || (!i->is_root && i->parent->root != i));
}
static hlo_instr *alg_scalar_broadcast(hlo_comp *c, hlo_instr *ins) {
  hlo_instr *r = alg_new1(c, ins, HLO_OP_BROADCAST, ins->operands[0]->operands[0]);
  if (r) r->dims = (hlo_ints){ NULL, 0 };
  return r;
}

/* slice(slice x) -> slice x: start = s1 + s2*t1, stride = t1*t2, limit = start + (n-1)*stride + 1 */
static bool alg_slice_slice(const hlo_instr *i) { return i->operands[0]->op == HLO_OP_SLICE; }
static hlo_instr *alg_compose_slice(hlo_comp *c, hlo_instr *ins) {
  const hlo_instr *s1 = ins->operands[0];
  int r = ins->shape.rank;
  int64_t st[HLO_MAX_RANK], li[HLO_MAX_RANK], sd[HLO_MAX_RANK];
  for (int d = 0; d < r; d++) {
    int64_t t1 = s1->slice_stride.n > d ? s1->slice_stride.v[d] : 1;
    int64_t t2 = ins->slice_stride.n > d ? ins->slice_stride.v[d] : 1;
    /* Only positions of elements that exist are formed (fuzz_hlo, issue 14): an empty dim
       is [0:0], one element needs no stride (t1 * t2 may not fit: strides of 2^31 or
       INT64_MAX pick single elements), and with two or more every product is a
       position inside the operand. */
    int64_t n = ins->shape.dims[d];
    st[d] = n == 0 ? 0 : s1->slice_start.v[d] + ins->slice_start.v[d] * t1;
    sd[d] = n <= 1 ? 1 : t1 * t2;
    li[d] = n == 0 ? 0 : st[d] + (n - 1) * sd[d] + 1;
  }
  hlo_instr *n = alg_new1(c, ins, HLO_OP_SLICE, s1->operands[0]);
  if (!n) return NULL;
  n->slice_start = hlo_ints_dup(c->module, st, r);
  n->slice_limit = hlo_ints_dup(c->module, li, r);
  n->slice_stride = hlo_ints_dup(c->module, sd, r);
  return n;
}

/* ---- the table -------------------------------------------------------------------------------- */

static const alg_rule alg_rules[] = {
  { HLO_OP_ADD, alg_add_zero_r, alg_op0 },          /* x + 0 -> x (int); x + -0 -> x (float) */
  { HLO_OP_ADD, alg_add_zero_l, alg_op1 },          /* 0 + x -> x (int); -0 + x -> x (float) */
  { HLO_OP_SUBTRACT, alg_sub_zero, alg_op0 },       /* x - 0 -> x (int, float +0) */
  { HLO_OP_MULTIPLY, alg_one_r, alg_op0 },          /* x * 1 -> x */
  { HLO_OP_MULTIPLY, alg_one_l, alg_op1 },          /* 1 * x -> x */
  { HLO_OP_MULTIPLY, alg_mul_zero_r, alg_op1 },     /* x * 0 -> 0 (int only) */
  { HLO_OP_MULTIPLY, alg_mul_zero_l, alg_op0 },     /* 0 * x -> 0 (int only) */
  { HLO_OP_DIVIDE, alg_one_r, alg_op0 },            /* x / 1 -> x */
  { HLO_OP_NEGATE, alg_neg_neg, alg_op00 },         /* neg(neg x) -> x */
  { HLO_OP_NOT, alg_not_not, alg_op00 },            /* not(not x) -> x */
  { HLO_OP_MAXIMUM, alg_same_operands, alg_op0 },   /* max(x, x) -> x */
  { HLO_OP_MINIMUM, alg_same_operands, alg_op0 },   /* min(x, x) -> x */
  { HLO_OP_AND, alg_same_operands, alg_op0 },       /* and(x, x) -> x */
  { HLO_OP_OR, alg_same_operands, alg_op0 },        /* or(x, x) -> x */
  { HLO_OP_AND, alg_and_true_r, alg_op0 },          /* and(x, true) -> x (pred) */
  { HLO_OP_AND, alg_and_true_l, alg_op1 },          /* and(true, x) -> x (pred) */
  { HLO_OP_OR, alg_or_false_r, alg_op0 },           /* or(x, false) -> x (pred) */
  { HLO_OP_OR, alg_or_false_l, alg_op1 },           /* or(false, x) -> x (pred) */
  { HLO_OP_SELECT, alg_sel_true, alg_op1 },         /* select(true, a, b) -> a */
  { HLO_OP_SELECT, alg_sel_false, alg_op2 },        /* select(false, a, b) -> b */
  { HLO_OP_SELECT, alg_sel_same, alg_op1 },         /* select(p, a, a) -> a */
  { HLO_OP_RESHAPE, alg_identity, alg_op0 },        /* reshape to the same shape -> x */
  { HLO_OP_RESHAPE, alg_reshape_reshape, alg_reshape_of_x }, /* reshape(reshape x) -> reshape x */
  { HLO_OP_RESHAPE, alg_of_scalar_broadcast, alg_scalar_broadcast }, /* reshape(bcast s) -> bcast s */
  { HLO_OP_BITCAST, alg_identity, alg_op0 },        /* bitcast to the same shape+layout -> x */
  { HLO_OP_CONVERT, alg_identity, alg_op0 },        /* convert to the same type -> x */
  { HLO_OP_COPY, alg_identity, alg_op0 },           /* copy x -> x (same layout, not the root) */
  { HLO_OP_COPY, alg_of_scalar_broadcast, alg_scalar_broadcast }, /* copy(bcast s) -> bcast s */
  { HLO_OP_TRANSPOSE, alg_identity, alg_op0 },      /* transpose by the identity -> x */
  { HLO_OP_TRANSPOSE, alg_transpose_transpose, alg_compose_transpose }, /* composed perm */
  { HLO_OP_TRANSPOSE, alg_of_scalar_broadcast, alg_scalar_broadcast }, /* transpose(bcast s) */
  { HLO_OP_BROADCAST, alg_identity, alg_op0 },      /* broadcast to the same dims -> x */
  { HLO_OP_BROADCAST, alg_broadcast_broadcast, alg_compose_broadcast }, /* composed dims */
  { HLO_OP_REVERSE, alg_identity, alg_op0 },        /* reverse of no dims -> x */
  { HLO_OP_CONCATENATE, alg_identity, alg_op0 },    /* concatenate(x) -> x */
  { HLO_OP_SLICE, alg_slice_full, alg_op0 },        /* slice of the full range -> x */
  { HLO_OP_SLICE, alg_slice_slice, alg_compose_slice }, /* slice(slice x) -> slice x */
  { HLO_OP_PAD, alg_pad_none, alg_op0 },            /* pad by nothing -> x */
};

/* Operand counts the rules rely on (a malformed module must not crash the pass). */
static bool alg_arity_ok(const hlo_instr *ins) {
  int a = hlo_opcode_arity(ins->op);
  return a < 0 ? ins->noperands >= 1 : ins->noperands == a;
}

/* One walk in text order. c->instrs is rebuilt as it goes: a rewrite's new instructions
   (appended by hlo_instr_new) land just before the instruction they replace, and uses are
   redirected by forwarding (hlo_fwd) when the walk reaches them, so the pass is linear
   (hlo_instr_new_before and hlo_replace_all_uses per rewrite were O(n) each: 1.1 s on a
   20k negate chain). Instructions added by rewrites are not revisited. */
static hj_status alg_comp(hlo_comp *c, bool *changed) {
  hlo_instr **snap = c->instrs;
  ptrdiff_t n = arrlen(snap);
  c->instrs = NULL;
  arrsetcap(c->instrs, n + 16);
  hlo_fwd fw = { 0 };
  for (ptrdiff_t i = 0; i < n; i++) {
    hlo_instr *ins = snap[i];
    hlo_fwd_apply(&fw, ins);
    for (size_t r = 0; alg_arity_ok(ins) && hlo_shape_is_array(&ins->shape) &&
                       r < sizeof alg_rules / sizeof alg_rules[0]; r++) {
      const alg_rule *rule = &alg_rules[r];
      if (rule->op != ins->op || !rule->match(ins)) continue;
      hlo_instr *rep = rule->rewrite(c, ins);
      if (!rep) continue;              /* e.g. the layouts differ; OOM left an error */
      hlo_fwd_set(&fw, ins, rep);      /* OOM: this one stays unreplaced */
      break;
    }
    arrput(c->instrs, ins);
  }
  hlo_fwd_root(&fw, c);
  *changed |= fw.changed;
  hlo_fwd_free(&fw);
  arrfree(snap);
  return HJ_OK;
}

hj_status hlo_pass_algsimp(hlo_pass_ctx *pc, hlo_module *m, bool *changed) {
  *changed = false;
  for (ptrdiff_t ci = 0; ci < arrlen(m->comps); ci++) {
    hj_status st = alg_comp(m->comps[ci], changed);
    if (st != HJ_OK) return st;
  }
  return HJ_OK;
}
