/* test_eval_ops.c — exact outputs of the evaluator's structural ops (eval_ops.c,
   eval_gather.c, eval_reduce.c) on small hand-built instructions, called through
   hlo_eval_structural. Expected values come from XLA's documentation and tests where they
   exist (gather OutOfBoundsIndex and TensorFlowGatherV1 from xla/tests/gather_operation_test.cc,
   the total order of compare type=TOTALORDER, the scatter out-of-bounds skip rule), else from
   hand loops written here independently of the implementation. Reducer fast paths are
   checked bit for bit against the per-element computation path. */
#include "testutil.h"
#include <math.h>

typedef struct {
  hj_ctx_t *ctx;
  hlo_module *m;
  hlo_comp *c;           /* holds the instructions under test and their placeholder operands */
  hlo_literal **owned;   /* stb_ds array: freed at teardown */
} tx;

static int setup(void **state) {
  tx *t = calloc(1, sizeof *t);
  t->ctx = tu_ctx();
  t->m = hlo_module_new(t->ctx, "test");
  t->c = hlo_comp_new(t->m, "main");
  *state = t;
  return 0;
}

static int teardown(void **state) {
  tx *t = *state;
  for (ptrdiff_t i = 0; i < arrlen(t->owned); i++) hlo_literal_free(t->owned[i]);
  arrfree(t->owned);
  hlo_module_free(t->m);
  hj_ctx_destroy(t->ctx);
  free(t);
  return 0;
}

/* ---- builders ------------------------------------------------------------------------------ */

static hlo_shape S(hlo_type ty, int rank, ...) {
  int64_t d[HLO_MAX_RANK];
  va_list ap;
  va_start(ap, rank);
  for (int i = 0; i < rank; i++) d[i] = va_arg(ap, int);
  va_end(ap);
  return hlo_shape_array(ty, rank, d);
}

/* A literal of |s| holding |v| (numel values; NULL: zeros). */
static hlo_literal *L(tx *t, hlo_shape s, const double *v) {
  hlo_literal *l = hlo_literal_new(t->ctx, &s);
  assert_non_null(l);
  arrput(t->owned, l);
  for (int64_t i = 0; v && i < hlo_shape_numel(&s); i++) {
    if (hlo_type_is_float(s.type)) hlo_store_f64(s.type, l->data, i, v[i]);
    else hlo_store_s64(s.type, l->data, i, (int64_t)v[i]);
  }
  return l;
}

#define V(...) ((const double[]){ __VA_ARGS__ })
#define IV(...) ints_of(t, (const int64_t[]){ __VA_ARGS__ }, \
                        (int)(sizeof((const int64_t[]){ __VA_ARGS__ }) / sizeof(int64_t)))
static hlo_ints ints_of(tx *t, const int64_t *v, int n) { return hlo_ints_dup(t->m, v, n); }

/* An instruction |op| of result shape |s| whose operands are placeholders shaped like |ops|. */
static hlo_instr *I(tx *t, hlo_opcode op, hlo_shape s, hlo_literal *const *ops, int n) {
  hlo_instr *p[16];
  for (int i = 0; i < n; i++) {
    p[i] = hlo_instr_new(t->c, HLO_OP_PARAMETER, NULL, &ops[i]->shape, NULL, 0);
    p[i]->index = i;
  }
  hlo_instr *ins = hlo_instr_new(t->c, op, NULL, &s, p, n);
  assert_non_null(ins);
  return ins;
}

static hlo_literal *run(tx *t, hlo_instr *ins, hlo_literal *const *ops) {
  hlo_literal *r = NULL;
  CHECK_OK(t->ctx, hlo_eval_structural(t->ctx, ins, ops, &r));
  arrput(t->owned, r);
  return r;
}

static hj_status run_err(tx *t, hlo_instr *ins, hlo_literal *const *ops) {
  hlo_literal *r = NULL;
  hj_status st = hlo_eval_structural(t->ctx, ins, ops, &r);
  if (r) arrput(t->owned, r);
  return st;
}

static void expect(const hlo_literal *l, const double *want, int64_t n) {
  assert_int_equal(hlo_shape_numel(&l->shape), n);
  for (int64_t i = 0; i < n; i++) {
    double got = hlo_load_f64(l->shape.type, l->data, i);
    if (!(got == want[i] || (isnan(got) && isnan(want[i]))))
      fail_msg("element %lld: got %.9g, want %.9g", (long long)i, got, want[i]);
  }
}
#define EXPECT(l, ...) expect((l), V(__VA_ARGS__), (int64_t)(sizeof(V(__VA_ARGS__)) / sizeof(double)))

/* Scalar computations: params p0..p(n-1) of the given types. */
static hlo_comp *comp_params(tx *t, const char *name, const hlo_type *ty, int n, hlo_instr **p) {
  hlo_comp *c = hlo_comp_new(t->m, name);
  for (int i = 0; i < n; i++) {
    hlo_shape s = hlo_shape_scalar(ty[i]);
    p[i] = hlo_instr_new(c, HLO_OP_PARAMETER, NULL, &s, NULL, 0);
    p[i]->index = i;
    arrput(c->params, p[i]);
  }
  return c;
}

static hlo_instr *op2(hlo_comp *c, hlo_opcode op, hlo_type ty, hlo_instr *a, hlo_instr *b) {
  hlo_shape s = hlo_shape_scalar(ty);
  hlo_instr *o[2] = { a, b };
  return hlo_instr_new(c, op, NULL, &s, o, 2);
}

static hlo_instr *cmp(hlo_comp *c, hlo_cmp_dir d, hlo_cmp_type ct, hlo_instr *a, hlo_instr *b) {
  hlo_instr *r = op2(c, HLO_OP_COMPARE, HLO_PRED, a, b);
  r->cmp_dir = d;
  r->cmp_type = ct;
  return r;
}

static void set_root(hlo_comp *c, hlo_instr *r) {
  c->root = r;
  r->is_root = true;
}

/* op(p0, p1), or op(p1, p0) when |swapped|. */
static hlo_comp *comp_bin(tx *t, hlo_opcode op, hlo_type ty, bool swapped) {
  hlo_instr *p[2];
  hlo_comp *c = comp_params(t, "bin", (hlo_type[]){ ty, ty }, 2, p);
  set_root(c, op2(c, op, ty, p[swapped], p[!swapped]));
  return c;
}

/* op(p0, p1 * 1): the same values as comp_bin, but no fast path recognises it. */
static hlo_comp *comp_bin_slow(tx *t, hlo_opcode op, hlo_type ty) {
  hlo_instr *p[2];
  hlo_comp *c = comp_params(t, "slow", (hlo_type[]){ ty, ty }, 2, p);
  hlo_shape s = hlo_shape_scalar(ty);
  hlo_instr *one = hlo_instr_new(c, HLO_OP_CONSTANT, NULL, &s, NULL, 0);
  one->literal = L(t, s, V(1));
  set_root(c, op2(c, op, ty, p[0], op2(c, HLO_OP_MULTIPLY, ty, p[1], one)));
  return c;
}

static void call(hlo_instr *ins, hlo_comp *c) { hlo_instr_set_calls(ins, &c, 1); }

static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* ---- index-only ops ---------------------------------------------------------------------------- */

static void test_iota_broadcast_reshape(void **state) {
  tx *t = *state;
  hlo_instr *i1 = I(t, HLO_OP_IOTA, S(HLO_S32, 2, 2, 3), NULL, 0);
  i1->index = 1;
  EXPECT(run(t, i1, NULL), 0, 1, 2, 0, 1, 2);
  hlo_instr *i0 = I(t, HLO_OP_IOTA, S(HLO_BF16, 2, 2, 3), NULL, 0);
  i0->index = 0;
  EXPECT(run(t, i0, NULL), 0, 0, 0, 1, 1, 1);

  hlo_literal *x = L(t, S(HLO_F32, 1, 3), V(1, 2, 3));
  hlo_instr *b1 = I(t, HLO_OP_BROADCAST, S(HLO_F32, 2, 2, 3), &x, 1);
  b1->dims = IV(1);
  EXPECT(run(t, b1, &x), 1, 2, 3, 1, 2, 3);
  hlo_instr *b0 = I(t, HLO_OP_BROADCAST, S(HLO_F32, 3, 3, 2, 1), &x, 1);
  b0->dims = IV(0);
  EXPECT(run(t, b0, &x), 1, 1, 2, 2, 3, 3);
  hlo_literal *sc = L(t, S(HLO_S8, 0), V(-7));
  hlo_instr *bs = I(t, HLO_OP_BROADCAST, S(HLO_S8, 2, 2, 2), &sc, 1);
  EXPECT(run(t, bs, &sc), -7, -7, -7, -7);

  hlo_literal *m = L(t, S(HLO_U16, 2, 2, 3), V(1, 2, 3, 4, 5, 6));
  hlo_instr *rs = I(t, HLO_OP_RESHAPE, S(HLO_U16, 3, 3, 1, 2), &m, 1);
  EXPECT(run(t, rs, &m), 1, 2, 3, 4, 5, 6);
}

static void test_transpose(void **state) {
  tx *t = *state;
  double v[24];
  for (int i = 0; i < 24; i++) v[i] = i;
  hlo_literal *x = L(t, S(HLO_F64, 3, 2, 3, 4), v);
  hlo_instr *tr = I(t, HLO_OP_TRANSPOSE, S(HLO_F64, 3, 4, 2, 3), &x, 1);
  tr->dims = IV(2, 0, 1);  /* out[i][j][k] = in[j][k][i] */
  hlo_literal *r = run(t, tr, &x);
  double want[24];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 2; j++)
      for (int k = 0; k < 3; k++) want[(i * 2 + j) * 3 + k] = j * 12 + k * 4 + i;
  expect(r, want, 24);

  hlo_literal *y = L(t, S(HLO_BF16, 2, 2, 3), V(1, 2, 3, 4, 5, 6));
  hlo_instr *t2 = I(t, HLO_OP_TRANSPOSE, S(HLO_BF16, 2, 3, 2), &y, 1);
  t2->dims = IV(1, 0);
  EXPECT(run(t, t2, &y), 1, 4, 2, 5, 3, 6);

  hlo_instr *bad = I(t, HLO_OP_TRANSPOSE, S(HLO_BF16, 2, 3, 2), &y, 1);
  bad->dims = IV(0, 0);
  assert_int_equal(run_err(t, bad, &y), HJ_ERR_SHAPE);
  assert_non_null(strstr(hj_ctx_error(t->ctx), "transpose"));
}

static void test_slice_reverse_concat(void **state) {
  tx *t = *state;
  hlo_literal *x = L(t, S(HLO_S32, 1, 10), V(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
  hlo_instr *sl = I(t, HLO_OP_SLICE, S(HLO_S32, 1, 3), &x, 1);
  sl->slice_start = IV(1), sl->slice_limit = IV(9), sl->slice_stride = IV(3);
  EXPECT(run(t, sl, &x), 1, 4, 7);

  hlo_literal *m = L(t, S(HLO_S32, 2, 2, 3), V(1, 2, 3, 4, 5, 6));
  hlo_instr *rv = I(t, HLO_OP_REVERSE, S(HLO_S32, 2, 2, 3), &m, 1);
  rv->dims = IV(0, 1);
  EXPECT(run(t, rv, &m), 6, 5, 4, 3, 2, 1);
  hlo_instr *rv1 = I(t, HLO_OP_REVERSE, S(HLO_S32, 2, 2, 3), &m, 1);
  rv1->dims = IV(1);
  EXPECT(run(t, rv1, &m), 3, 2, 1, 6, 5, 4);

  /* XLA's ConcatenateTest.ThreeR2Axis1 */
  hlo_literal *c[3] = { L(t, S(HLO_S32, 2, 3, 2), V(0, 1, 2, 3, 4, 5)),
                        L(t, S(HLO_S32, 2, 3, 2), V(0, -1, -2, -3, -4, -5)),
                        L(t, S(HLO_S32, 2, 3, 2), V(5, -4, -3, -2, 1, 0)) };
  hlo_instr *cc = I(t, HLO_OP_CONCATENATE, S(HLO_S32, 2, 3, 6), c, 3);
  cc->dims = IV(1);
  EXPECT(run(t, cc, c), 0, 1, 0, -1, 5, -4, 2, 3, -2, -3, -3, -2, 4, 5, -4, -5, 1, 0);
}

static void test_dynamic_slice_clamp(void **state) {
  tx *t = *state;
  hlo_literal *x = L(t, S(HLO_F32, 1, 5), V(0, 1, 2, 3, 4));
  hlo_literal *o1[2] = { x, L(t, S(HLO_S32, 0), V(4)) };
  hlo_instr *d1 = I(t, HLO_OP_DYNAMIC_SLICE, S(HLO_F32, 1, 2), o1, 2);
  d1->ds_sizes = IV(2);
  EXPECT(run(t, d1, o1), 3, 4);                    /* 4 clamps to 5-2 = 3 */
  hlo_literal *o2[2] = { x, L(t, S(HLO_S64, 0), V(-3)) };
  EXPECT(run(t, d1, o2), 0, 1);                    /* negative clamps to 0 */

  hlo_literal *m = L(t, S(HLO_S32, 2, 3, 3), V(1, 2, 3, 4, 5, 6, 7, 8, 9));
  hlo_literal *o3[3] = { m, L(t, S(HLO_U8, 0), V(200)), L(t, S(HLO_S8, 0), V(1)) };
  hlo_instr *d2 = I(t, HLO_OP_DYNAMIC_SLICE, S(HLO_S32, 2, 2, 2), o3, 3);
  d2->ds_sizes = IV(2, 2);
  EXPECT(run(t, d2, o3), 5, 6, 8, 9);              /* (200, 1) → (1, 1) */

  hlo_literal *z = L(t, S(HLO_S32, 1, 5), V(0, 0, 0, 0, 0));
  hlo_literal *o4[3] = { z, L(t, S(HLO_S32, 1, 2), V(9, 8)), L(t, S(HLO_S32, 0), V(10)) };
  hlo_instr *du = I(t, HLO_OP_DYNAMIC_UPDATE_SLICE, S(HLO_S32, 1, 5), o4, 3);
  EXPECT(run(t, du, o4), 0, 0, 0, 9, 8);
  EXPECT(z, 0, 0, 0, 0, 0);                        /* the operand is untouched */
  hlo_literal *o5[4] = { m, L(t, S(HLO_S32, 2, 1, 2), V(-1, -2)), L(t, S(HLO_S32, 0), V(-5)),
                         L(t, S(HLO_S32, 0), V(2)) };
  hlo_instr *du2 = I(t, HLO_OP_DYNAMIC_UPDATE_SLICE, S(HLO_S32, 2, 3, 3), o5, 4);
  EXPECT(run(t, du2, o5), 1, -1, -2, 4, 5, 6, 7, 8, 9);
}

static void test_pad(void **state) {
  tx *t = *state;
  hlo_literal *o[2] = { L(t, S(HLO_F32, 1, 3), V(1, 2, 3)), L(t, S(HLO_F32, 0), V(0)) };
  hlo_instr *p = I(t, HLO_OP_PAD, S(HLO_F32, 1, 6), o, 2);
  p->pad_lo = IV(-1), p->pad_hi = IV(2), p->pad_interior = IV(1);
  EXPECT(run(t, p, o), 0, 2, 0, 3, 0, 0);          /* [1,_,2,_,3] cropped by 1, +2 */
  hlo_instr *p2 = I(t, HLO_OP_PAD, S(HLO_F32, 1, 2), o, 2);
  p2->pad_lo = IV(-2), p2->pad_hi = IV(-1), p2->pad_interior = IV(1);
  EXPECT(run(t, p2, o), 2, 0);

  hlo_literal *q[2] = { L(t, S(HLO_S32, 2, 2, 2), V(1, 2, 3, 4)), L(t, S(HLO_S32, 0), V(-1)) };
  hlo_instr *p3 = I(t, HLO_OP_PAD, S(HLO_S32, 2, 2, 4), q, 2);
  p3->pad_lo = IV(0, 1), p3->pad_hi = IV(-1, 0), p3->pad_interior = IV(1, 1);
  /* rows: [r0, _, r1] minus the last → [r0, _]; cols: [_, a, _, b] */
  EXPECT(run(t, p3, q), -1, 1, -1, 2, -1, -1, -1, -1);
  hlo_instr *p4 = I(t, HLO_OP_PAD, S(HLO_S32, 2, 2, 4), q, 2);  /* wrong result shape */
  p4->pad_lo = IV(0, 0), p4->pad_hi = IV(0, 0), p4->pad_interior = IV(0, 0);
  assert_int_equal(run_err(t, p4, q), HJ_ERR_SHAPE);
}

static void test_bitcast_layout(void **state) {
  tx *t = *state;
  hlo_shape cm = S(HLO_F32, 2, 2, 3);
  cm.minor_to_major[0] = 0, cm.minor_to_major[1] = 1;  /* {0,1}: column-major */
  hlo_literal *x = L(t, cm, V(0, 1, 2, 3, 4, 5));      /* logical {{0,1,2},{3,4,5}} */
  hlo_instr *b1 = I(t, HLO_OP_BITCAST, S(HLO_F32, 1, 6), &x, 1);
  EXPECT(run(t, b1, &x), 0, 3, 1, 4, 2, 5);            /* the physical order */
  hlo_instr *b2 = I(t, HLO_OP_BITCAST, S(HLO_F32, 2, 3, 2), &x, 1);
  EXPECT(run(t, b2, &x), 0, 3, 1, 4, 2, 5);            /* {{0,3},{1,4},{2,5}}: a transpose */
  hlo_shape cm2 = S(HLO_F32, 2, 3, 2);
  cm2.minor_to_major[0] = 0, cm2.minor_to_major[1] = 1;
  hlo_instr *b3 = I(t, HLO_OP_BITCAST, cm2, &x, 1);    /* bytes 0 3 1 4 2 5, (i,j) at i+3j */
  EXPECT(run(t, b3, &x), 0, 4, 3, 2, 1, 5);
  /* the operand instruction's layout counts, not the (default) one of the literal */
  hlo_literal *xd = L(t, S(HLO_F32, 2, 2, 3), V(0, 1, 2, 3, 4, 5));
  EXPECT(run(t, b1, &xd), 0, 3, 1, 4, 2, 5);
  hlo_literal *y = L(t, S(HLO_S32, 1, 6), V(1, 2, 3, 4, 5, 6));
  hlo_instr *b4 = I(t, HLO_OP_BITCAST, S(HLO_F32, 2, 2, 3), &y, 1);  /* same size: fine */
  hlo_literal *r4 = run(t, b4, &y);
  assert_memory_equal(r4->data, y->data, 24);
  hlo_instr *b5 = I(t, HLO_OP_BITCAST, S(HLO_S16, 1, 6), &y, 1);
  assert_int_equal(run_err(t, b5, &y), HJ_ERR_SHAPE);
}

/* ---- gather / scatter ------------------------------------------------------------------------ */

static void test_gather(void **state) {
  tx *t = *state;
  hlo_literal *op = L(t, S(HLO_S32, 2, 3, 3), V(1, 2, 3, 4, 5, 6, 7, 8, 9));
  /* XLA gather_operation_test OutOfBoundsIndex */
  hlo_literal *o[2] = { op, L(t, S(HLO_S32, 2, 6, 2),
                              V(2, 7, 2, 1, 1, 1, 5, 1, 2147483647, 1, 1, 2)) };
  hlo_instr *g = I(t, HLO_OP_GATHER, S(HLO_S32, 3, 6, 1, 1), o, 2);
  g->gather.offset_dims = IV(1, 2), g->gather.start_index_map = IV(0, 1);
  g->gather.index_vector_dim = 1, g->gather.slice_sizes = IV(1, 1);
  EXPECT(run(t, g, o), 9, 8, 5, 8, 8, 6);

  /* TensorFlowGatherV1: rows {0, 2}; index_vector_dim == rank(indices) (implicit) */
  hlo_literal *o2[2] = { op, L(t, S(HLO_S32, 1, 2), V(0, 2)) };
  hlo_instr *g2 = I(t, HLO_OP_GATHER, S(HLO_S32, 2, 2, 3), o2, 2);
  g2->gather.offset_dims = IV(1), g2->gather.collapsed_slice_dims = IV(0);
  g2->gather.start_index_map = IV(0), g2->gather.index_vector_dim = 1;
  g2->gather.slice_sizes = IV(1, 3);
  EXPECT(run(t, g2, o2), 1, 2, 3, 7, 8, 9);

  /* batching dims: row b of the operand is indexed by indices[b] */
  hlo_literal *o3[2] = { L(t, S(HLO_F32, 2, 2, 4), V(1, 2, 3, 4, 5, 6, 7, 8)),
                         L(t, S(HLO_U32, 2, 2, 1), V(3, 1)) };
  hlo_instr *g3 = I(t, HLO_OP_GATHER, S(HLO_F32, 1, 2), o3, 2);
  g3->gather.collapsed_slice_dims = IV(1), g3->gather.start_index_map = IV(1);
  g3->gather.operand_batching_dims = IV(0), g3->gather.start_indices_batching_dims = IV(0);
  g3->gather.index_vector_dim = 1, g3->gather.slice_sizes = IV(1, 1);
  EXPECT(run(t, g3, o3), 4, 6);

  /* a 2-wide window with offset dim before the batch dim: out[w][b] = op[idx[b]][w+clamp] */
  hlo_literal *o4[2] = { op, L(t, S(HLO_S64, 2, 2, 2), V(0, 2, 2, -1)) };
  hlo_instr *g4 = I(t, HLO_OP_GATHER, S(HLO_S32, 2, 2, 2), o4, 2);
  g4->gather.offset_dims = IV(0), g4->gather.collapsed_slice_dims = IV(0);
  g4->gather.start_index_map = IV(0, 1), g4->gather.index_vector_dim = 1;
  g4->gather.slice_sizes = IV(1, 2);
  /* starts (0,2)→(0,1): {2,3}; (2,-1)→(2,0): {7,8}; out[w][b] */
  EXPECT(run(t, g4, o4), 2, 7, 3, 8);
}

static void test_scatter(void **state) {
  tx *t = *state;
  hlo_literal *o[3] = { L(t, S(HLO_F32, 1, 5), NULL), L(t, S(HLO_S32, 2, 4, 1), V(1, 4, -1, 3)),
                        L(t, S(HLO_F32, 2, 4, 2), V(1, 2, 3, 4, 5, 6, 7, 8)) };
  hlo_instr *s = I(t, HLO_OP_SCATTER, S(HLO_F32, 1, 5), o, 3);
  s->scatter.update_window_dims = IV(1), s->scatter.scatter_dims_to_operand_dims = IV(0);
  s->scatter.index_vector_dim = 1;
  call(s, comp_bin(t, HLO_OP_ADD, HLO_F32, false));
  /* windows at 4 ([4,5]) and -1 ([-1,0]) are partly out of bounds: skipped entirely */
  EXPECT(run(t, s, o), 0, 1, 2, 7, 8);
  call(s, comp_bin_slow(t, HLO_OP_ADD, HLO_F32));
  EXPECT(run(t, s, o), 0, 1, 2, 7, 8);

  /* duplicates with overwrite: the last in update order wins; implicit index vector dim */
  hlo_literal *q[3] = { L(t, S(HLO_S32, 1, 4), V(9, 9, 9, 9)), L(t, S(HLO_S32, 1, 3), V(2, 0, 2)),
                        L(t, S(HLO_S32, 1, 3), V(10, 20, 30)) };
  hlo_instr *s2 = I(t, HLO_OP_SCATTER, S(HLO_S32, 1, 4), q, 3);
  s2->scatter.inserted_window_dims = IV(0), s2->scatter.scatter_dims_to_operand_dims = IV(0);
  s2->scatter.index_vector_dim = 1;
  hlo_instr *p[2];
  hlo_comp *ow = comp_params(t, "overwrite", (hlo_type[]){ HLO_S32, HLO_S32 }, 2, p);
  set_root(ow, p[1]);
  call(s2, ow);
  EXPECT(run(t, s2, q), 20, 9, 30, 9);

  /* XLA's TensorFlowScatterV2_InversePermutation (golden): operand s32[5] zeros */
  hlo_literal *ip[3] = { L(t, S(HLO_S32, 1, 5), NULL), L(t, S(HLO_S32, 2, 5, 1), V(1, 3, 4, 2, 0)),
                         L(t, S(HLO_S32, 1, 5), V(0, 1, 2, 3, 4)) };
  hlo_instr *s3 = I(t, HLO_OP_SCATTER, S(HLO_S32, 1, 5), ip, 3);
  s3->scatter.inserted_window_dims = IV(0), s3->scatter.scatter_dims_to_operand_dims = IV(0);
  s3->scatter.index_vector_dim = 1;
  call(s3, ow);
  EXPECT(run(t, s3, ip), 4, 0, 3, 1, 2);

  /* variadic: (sum, count) through a tuple-returning computation */
  hlo_literal *vo[5] = { L(t, S(HLO_F32, 1, 3), NULL), L(t, S(HLO_S32, 1, 3), NULL),
                         L(t, S(HLO_S32, 1, 4), V(0, 2, 0, 7)),
                         L(t, S(HLO_F32, 1, 4), V(1.5, 2, 4, 8)), L(t, S(HLO_S32, 1, 4), V(1, 1, 1, 1)) };
  hlo_shape ts = { .type = HLO_TUPLE, .ntuple = 2 };
  hlo_shape el[2] = { S(HLO_F32, 1, 3), S(HLO_S32, 1, 3) };
  ts.tuple = el;
  hlo_instr *s4 = I(t, HLO_OP_SCATTER, ts, vo, 5);
  s4->scatter.inserted_window_dims = IV(0), s4->scatter.scatter_dims_to_operand_dims = IV(0);
  s4->scatter.index_vector_dim = 1;
  hlo_instr *vp[4];
  hlo_comp *sc = comp_params(t, "sumcount", (hlo_type[]){ HLO_F32, HLO_S32, HLO_F32, HLO_S32 }, 4, vp);
  hlo_instr *tu[2] = { op2(sc, HLO_OP_ADD, HLO_F32, vp[0], vp[2]), op2(sc, HLO_OP_ADD, HLO_S32, vp[1], vp[3]) };
  hlo_shape tss = { .type = HLO_TUPLE, .ntuple = 2 };
  hlo_shape tse[2] = { hlo_shape_scalar(HLO_F32), hlo_shape_scalar(HLO_S32) };
  tss.tuple = tse;
  set_root(sc, hlo_instr_new(sc, HLO_OP_TUPLE, NULL, &tss, tu, 2));
  call(s4, sc);
  hlo_literal *r4 = run(t, s4, vo);
  assert_int_equal(r4->nelems, 2);
  EXPECT(r4->elems[0], 5.5, 0, 2);                 /* index 7 is out of bounds: skipped */
  EXPECT(r4->elems[1], 2, 0, 1);
}

/* ---- reduce, reduce-window -------------------------------------------------------------------- */

/* XLA/JAX-style argmax reducer over (value, index): larger value wins, ties → lower index. */
static hlo_comp *comp_argmax(tx *t) {
  hlo_instr *p[4];
  hlo_comp *c = comp_params(t, "argmax", (hlo_type[]){ HLO_F32, HLO_S32, HLO_F32, HLO_S32 }, 4, p);
  hlo_instr *gt = cmp(c, HLO_CMP_GT, HLO_CMPT_DEFAULT, p[0], p[2]);
  hlo_instr *eq = cmp(c, HLO_CMP_EQ, HLO_CMPT_DEFAULT, p[0], p[2]);
  hlo_instr *lt = cmp(c, HLO_CMP_LT, HLO_CMPT_DEFAULT, p[1], p[3]);
  hlo_instr *keep = op2(c, HLO_OP_OR, HLO_PRED, gt, op2(c, HLO_OP_AND, HLO_PRED, eq, lt));
  hlo_shape sf = hlo_shape_scalar(HLO_F32), si = hlo_shape_scalar(HLO_S32);
  hlo_instr *sv = hlo_instr_new(c, HLO_OP_SELECT, NULL, &sf, (hlo_instr *[]){ keep, p[0], p[2] }, 3);
  hlo_instr *si_ = hlo_instr_new(c, HLO_OP_SELECT, NULL, &si, (hlo_instr *[]){ keep, p[1], p[3] }, 3);
  hlo_shape ts = { .type = HLO_TUPLE, .ntuple = 2 };
  ts.tuple = hlo_alloc(t->m, 2 * sizeof(hlo_shape));
  ts.tuple[0] = sf, ts.tuple[1] = si;
  set_root(c, hlo_instr_new(c, HLO_OP_TUPLE, NULL, &ts, (hlo_instr *[]){ sv, si_ }, 2));
  return c;
}

static void test_reduce_argmax(void **state) {
  tx *t = *state;
  hlo_literal *o[4] = { L(t, S(HLO_F32, 2, 2, 4), V(1, 5, 5, 2, 7, 0, 7, 7)),
                        L(t, S(HLO_S32, 2, 2, 4), V(0, 1, 2, 3, 0, 1, 2, 3)),
                        L(t, S(HLO_F32, 0), V(-INFINITY)), L(t, S(HLO_S32, 0), V(0)) };
  hlo_shape ts = { .type = HLO_TUPLE, .ntuple = 2 };
  hlo_shape el[2] = { S(HLO_F32, 1, 2), S(HLO_S32, 1, 2) };
  ts.tuple = el;
  hlo_instr *r = I(t, HLO_OP_REDUCE, ts, o, 4);
  r->dims = IV(1);
  call(r, comp_argmax(t));
  hlo_literal *res = run(t, r, o);
  EXPECT(res->elems[0], 5, 7);
  EXPECT(res->elems[1], 1, 0);
  /* over dim 0 instead: column-wise */
  hlo_shape el0[2] = { S(HLO_F32, 1, 4), S(HLO_S32, 1, 4) };
  ts.tuple = el0;
  hlo_literal *o2[4] = { o[0], L(t, S(HLO_S32, 2, 2, 4), V(0, 0, 0, 0, 1, 1, 1, 1)), o[2], o[3] };
  hlo_instr *r0 = I(t, HLO_OP_REDUCE, ts, o2, 4);
  r0->dims = IV(0);
  call(r0, comp_argmax(t));
  hlo_literal *res0 = run(t, r0, o2);
  EXPECT(res0->elems[0], 7, 5, 7, 7);
  EXPECT(res0->elems[1], 1, 0, 1, 1);
}

/* Fast (recognised) and slow (per-element computation) reducers give the same bits. */
static void test_reduce_fast_equals_slow(void **state) {
  tx *t = *state;
  enum { R = 3, C = 1001 };
  double *v = malloc(sizeof(double) * R * C);
  uint32_t seed = 12345;
  for (int i = 0; i < R * C; i++) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = ((double)(seed >> 8) / 16777216.0 - 0.5) * 1e3;
  }
  v[5] = -0.0;
  hlo_literal *x = L(t, S(HLO_F32, 2, R, C), v);
  struct { hlo_opcode op; double init; } cases[] = { { HLO_OP_ADD, 0 }, { HLO_OP_MAXIMUM, -INFINITY },
                                                     { HLO_OP_MULTIPLY, 1 } };
  for (int k = 0; k < 3; k++)
    for (int dim = 0; dim < 2; dim++) {
      hlo_literal *o[2] = { x, L(t, S(HLO_F32, 0), V(cases[k].init)) };
      hlo_shape rs = dim ? S(HLO_F32, 1, R) : S(HLO_F32, 1, C);
      hlo_instr *fast = I(t, HLO_OP_REDUCE, rs, o, 2), *fsw = I(t, HLO_OP_REDUCE, rs, o, 2);
      hlo_instr *slow = I(t, HLO_OP_REDUCE, rs, o, 2);
      fast->dims = fsw->dims = slow->dims = IV(dim);
      call(fast, comp_bin(t, cases[k].op, HLO_F32, false));
      call(fsw, comp_bin(t, cases[k].op, HLO_F32, true));
      call(slow, comp_bin_slow(t, cases[k].op, HLO_F32));
      hlo_literal *a = run(t, fast, o), *b = run(t, slow, o), *c = run(t, fsw, o);
      assert_memory_equal(a->data, b->data, (size_t)a->nbytes);
      if (cases[k].op != HLO_OP_MAXIMUM) assert_memory_equal(a->data, c->data, (size_t)a->nbytes);
    }
  /* the row sum is the plain left-to-right f32 sum (row-major order) */
  hlo_literal *o[2] = { x, L(t, S(HLO_F32, 0), V(0)) };
  hlo_instr *rs = I(t, HLO_OP_REDUCE, S(HLO_F32, 1, R), o, 2);
  rs->dims = IV(1);
  call(rs, comp_bin(t, HLO_OP_ADD, HLO_F32, false));
  hlo_literal *sum = run(t, rs, o);
  for (int r = 0; r < R; r++) {
    float s = 0;
    for (int c = 0; c < C; c++) s += (float)v[r * C + c];
    assert_int_equal(f32_bits(((float *)sum->data)[r]), f32_bits(s));
  }
  /* s32 add wraps; reduce to a scalar over both dims */
  hlo_literal *io[2] = { L(t, S(HLO_S32, 2, 2, 2), V(2147483647, 1, 5, -3)), L(t, S(HLO_S32, 0), V(0)) };
  hlo_instr *ri = I(t, HLO_OP_REDUCE, S(HLO_S32, 0), io, 2);
  ri->dims = IV(0, 1);
  call(ri, comp_bin(t, HLO_OP_ADD, HLO_S32, false));
  EXPECT(run(t, ri, io), -2147483648.0 + 2);
  free(v);
}

static void test_reduce_window(void **state) {
  tx *t = *state;
  hlo_literal *o[2] = { L(t, S(HLO_F32, 1, 4), V(1, 2, 3, 4)), L(t, S(HLO_F32, 0), V(0)) };
  hlo_instr *cs = I(t, HLO_OP_REDUCE_WINDOW, S(HLO_F32, 1, 4), o, 2);
  cs->window.size = IV(4), cs->window.pad_lo = IV(3), cs->window.pad_hi = IV(0);
  call(cs, comp_bin(t, HLO_OP_ADD, HLO_F32, false));
  EXPECT(run(t, cs, o), 1, 3, 6, 10);              /* cumsum */
  call(cs, comp_bin_slow(t, HLO_OP_ADD, HLO_F32));
  EXPECT(run(t, cs, o), 1, 3, 6, 10);

  hlo_literal *x = L(t, S(HLO_S32, 1, 8), V(0, 1, 2, 3, 4, 5, 6, 7));
  hlo_literal *q[2] = { x, L(t, S(HLO_S32, 0), V(0)) };
  hlo_instr *st = I(t, HLO_OP_REDUCE_WINDOW, S(HLO_S32, 1, 4), q, 2);
  st->window.size = IV(2), st->window.stride = IV(2);
  call(st, comp_bin(t, HLO_OP_ADD, HLO_S32, false));
  EXPECT(run(t, st, q), 1, 5, 9, 13);
  hlo_instr *wd = I(t, HLO_OP_REDUCE_WINDOW, S(HLO_S32, 1, 6), q, 2);
  wd->window.size = IV(2), wd->window.window_dilation = IV(2);
  call(wd, comp_bin(t, HLO_OP_ADD, HLO_S32, false));
  EXPECT(run(t, wd, q), 2, 4, 6, 8, 10, 12);       /* x[i] + x[i+2] */
  hlo_instr *bd = I(t, HLO_OP_REDUCE_WINDOW, S(HLO_S32, 1, 14), q, 2);
  bd->window.size = IV(2), bd->window.base_dilation = IV(2);
  call(bd, comp_bin(t, HLO_OP_MAXIMUM, HLO_S32, false));
  EXPECT(run(t, bd, q), 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7);  /* holes are skipped */

  /* 2-D max pool 2x2 stride 1 with init -inf */
  hlo_literal *m[2] = { L(t, S(HLO_F32, 2, 2, 3), V(1, 9, 2, 3, 4, 8)), L(t, S(HLO_F32, 0), V(-INFINITY)) };
  hlo_instr *mp = I(t, HLO_OP_REDUCE_WINDOW, S(HLO_F32, 2, 1, 2), m, 2);
  mp->window.size = IV(2, 2);
  call(mp, comp_bin(t, HLO_OP_MAXIMUM, HLO_F32, false));
  EXPECT(run(t, mp, m), 9, 9);
}

/* ---- sort --------------------------------------------------------------------------------- */

static void test_sort(void **state) {
  tx *t = *state;
  const float qnan = NAN, nnan = bits_f32(0xffc00000u);
  hlo_literal *k = L(t, S(HLO_F32, 1, 8), V(3, qnan, -1, nnan, 2, -0.0, 0.0, -INFINITY));
  hlo_instr *p[2];
  hlo_comp *lt = comp_params(t, "lt", (hlo_type[]){ HLO_F32, HLO_F32 }, 2, p);
  set_root(lt, cmp(lt, HLO_CMP_LT, HLO_CMPT_TOTALORDER, p[0], p[1]));
  hlo_instr *s = I(t, HLO_OP_SORT, S(HLO_F32, 1, 8), &k, 1);
  s->dims = IV(0), s->is_stable = true;
  call(s, lt);
  hlo_literal *r = run(t, s, &k);
  const float *f = (const float *)r->data;
  /* -NaN < -inf < -1 < -0 < +0 < 2 < 3 < +NaN */
  assert_int_equal(f32_bits(f[0]), 0xffc00000u);
  EXPECT(r, NAN, -INFINITY, -1, 0, 0, 2, 3, NAN);
  assert_true(signbit(f[3]) && !signbit(f[4]) && !signbit(f[7]));
  /* the same through the computation (not(rhs <= lhs) == lhs < rhs): same bits */
  hlo_comp *lt2 = comp_params(t, "lt2", (hlo_type[]){ HLO_F32, HLO_F32 }, 2, p);
  hlo_shape pr = hlo_shape_scalar(HLO_PRED);
  hlo_instr *le = cmp(lt2, HLO_CMP_LE, HLO_CMPT_TOTALORDER, p[1], p[0]);
  set_root(lt2, hlo_instr_new(lt2, HLO_OP_NOT, NULL, &pr, &le, 1));
  call(s, lt2);
  hlo_literal *r2 = run(t, s, &k);
  assert_memory_equal(r->data, r2->data, 32);

  /* stable with ties; variadic (keys, payload) sorted by keys descending along dim 1 */
  hlo_literal *kv[2] = { L(t, S(HLO_S32, 2, 2, 5), V(1, 0, 1, 0, 1, 5, 5, 4, 5, 6)),
                         L(t, S(HLO_S32, 2, 2, 5), V(0, 1, 2, 3, 4, 0, 1, 2, 3, 4)) };
  hlo_shape ts = { .type = HLO_TUPLE, .ntuple = 2 };
  hlo_shape el[2] = { S(HLO_S32, 2, 2, 5), S(HLO_S32, 2, 2, 5) };
  ts.tuple = el;
  hlo_instr *s2 = I(t, HLO_OP_SORT, ts, kv, 2);
  s2->dims = IV(1), s2->is_stable = true;
  hlo_instr *q[4];
  hlo_comp *gt = comp_params(t, "gt", (hlo_type[]){ HLO_S32, HLO_S32, HLO_S32, HLO_S32 }, 4, q);
  set_root(gt, cmp(gt, HLO_CMP_GT, HLO_CMPT_DEFAULT, q[0], q[1]));
  call(s2, gt);
  hlo_literal *r3 = run(t, s2, kv);
  EXPECT(r3->elems[0], 1, 1, 1, 0, 0, 6, 5, 5, 5, 4);
  EXPECT(r3->elems[1], 0, 2, 4, 1, 3, 4, 0, 1, 3, 2);
  /* lexicographic (key asc, payload desc) through a computation: the slow path */
  hlo_comp *lex = comp_params(t, "lex", (hlo_type[]){ HLO_S32, HLO_S32, HLO_S32, HLO_S32 }, 4, q);
  hlo_instr *klt = cmp(lex, HLO_CMP_LT, HLO_CMPT_DEFAULT, q[0], q[1]);
  hlo_instr *keq = cmp(lex, HLO_CMP_EQ, HLO_CMPT_DEFAULT, q[0], q[1]);
  hlo_instr *vgt = cmp(lex, HLO_CMP_GT, HLO_CMPT_DEFAULT, q[2], q[3]);
  set_root(lex, op2(lex, HLO_OP_OR, HLO_PRED, klt, op2(lex, HLO_OP_AND, HLO_PRED, keq, vgt)));
  call(s2, lex);
  hlo_literal *r4 = run(t, s2, kv);
  EXPECT(r4->elems[0], 0, 0, 1, 1, 1, 4, 5, 5, 5, 6);
  EXPECT(r4->elems[1], 3, 1, 4, 2, 0, 2, 3, 1, 0, 4);
}

/* ---- dot --------------------------------------------------------------------------------------- */

static void test_dot(void **state) {
  tx *t = *state;
  /* lhs [K=4, batch=2, M=3], rhs [N=5, K=4, batch=2]: batch and contracting dims not leading */
  enum { B = 2, M = 3, N = 5, K = 4 };
  double lv[K * B * M], rv[N * K * B], want[B * M * N];
  for (int i = 0; i < K * B * M; i++) lv[i] = (i * 7) % 11 - 5;
  for (int i = 0; i < N * K * B; i++) rv[i] = (i * 5) % 13 - 6;
  hlo_literal *o[2] = { L(t, S(HLO_F32, 3, K, B, M), lv), L(t, S(HLO_F32, 3, N, K, B), rv) };
  hlo_instr *d = I(t, HLO_OP_DOT, S(HLO_F32, 3, B, M, N), o, 2);
  d->dot.lhs_batch = IV(1), d->dot.rhs_batch = IV(2);
  d->dot.lhs_contract = IV(0), d->dot.rhs_contract = IV(1);
  for (int b = 0; b < B; b++)
    for (int m = 0; m < M; m++)
      for (int n = 0; n < N; n++) {
        double s = 0;
        for (int k = 0; k < K; k++) s += lv[(k * B + b) * M + m] * rv[(n * K + k) * B + b];
        want[(b * M + m) * N + n] = s;
      }
  expect(run(t, d, o), want, B * M * N);
  /* the same in bf16 → f32 and in s8 → s32 */
  hlo_literal *ob[2] = { L(t, S(HLO_BF16, 3, K, B, M), lv), L(t, S(HLO_BF16, 3, N, K, B), rv) };
  expect(run(t, d, ob), want, B * M * N);
  hlo_literal *oi[2] = { L(t, S(HLO_S8, 3, K, B, M), lv), L(t, S(HLO_S8, 3, N, K, B), rv) };
  hlo_instr *di = I(t, HLO_OP_DOT, S(HLO_S32, 3, B, M, N), oi, 2);
  di->dot = d->dot;
  expect(run(t, di, oi), want, B * M * N);

  /* f32 rounding happens once, from the exact double sum: 1 + 2^-24 + 2^-24 → 1 + 2^-23 */
  hlo_literal *e[2] = { L(t, S(HLO_F32, 1, 3), V(1, ldexp(1, -24), ldexp(1, -24))),
                        L(t, S(HLO_F32, 1, 3), V(1, 1, 1)) };
  hlo_instr *dv = I(t, HLO_OP_DOT, S(HLO_F32, 0), e, 2);
  dv->dot.lhs_contract = IV(0), dv->dot.rhs_contract = IV(0);
  EXPECT(run(t, dv, e), 1 + ldexp(1, -23));
  /* s32 wraps; pred is or-of-ands; an outer product (no contracting dims) */
  hlo_literal *w[2] = { L(t, S(HLO_S32, 1, 2), V(65536, 65536)), L(t, S(HLO_S32, 1, 2), V(32768, 32768)) };
  hlo_instr *dw = I(t, HLO_OP_DOT, S(HLO_S32, 0), w, 2);
  dw->dot = dv->dot;
  EXPECT(run(t, dw, w), 0);                        /* 2^32 wraps to 0 */
  hlo_literal *pb[2] = { L(t, S(HLO_PRED, 2, 2, 2), V(1, 0, 0, 0)), L(t, S(HLO_PRED, 2, 2, 2), V(0, 1, 1, 0)) };
  hlo_instr *dp = I(t, HLO_OP_DOT, S(HLO_PRED, 2, 2, 2), pb, 2);
  dp->dot.lhs_contract = IV(1), dp->dot.rhs_contract = IV(0);
  EXPECT(run(t, dp, pb), 0, 1, 0, 0);
  hlo_instr *op = I(t, HLO_OP_DOT, S(HLO_S32, 2, 2, 2), w, 2);
  EXPECT(run(t, op, w), -2147483648.0, -2147483648.0, -2147483648.0, -2147483648.0);
  /* mismatched contracting sizes: an error naming the sizes */
  hlo_literal *bad[2] = { L(t, S(HLO_F32, 2, 2, 3), NULL), L(t, S(HLO_F32, 2, 4, 2), NULL) };
  hlo_instr *db = I(t, HLO_OP_DOT, S(HLO_F32, 2, 2, 2), bad, 2);
  db->dot.lhs_contract = IV(1), db->dot.rhs_contract = IV(0);
  assert_int_equal(run_err(t, db, bad), HJ_ERR_SHAPE);
  assert_non_null(strstr(hj_ctx_error(t->ctx), "3 vs 4"));
}

static void test_unsupported(void **state) {
  tx *t = *state;
  hlo_literal *x = L(t, S(HLO_F32, 1, 2), V(1, 2));
  hlo_instr *a = I(t, HLO_OP_EXP, S(HLO_F32, 1, 2), &x, 1);
  assert_int_equal(run_err(t, a, &x), HJ_ERR_UNSUPPORTED);
  hlo_instr *sl = I(t, HLO_OP_SLICE, S(HLO_F32, 1, 3), &x, 1);
  sl->slice_start = IV(0), sl->slice_limit = IV(3);
  assert_int_equal(run_err(t, sl, &x), HJ_ERR_SHAPE);  /* limit past the end */
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_iota_broadcast_reshape, setup, teardown),
    cmocka_unit_test_setup_teardown(test_transpose, setup, teardown),
    cmocka_unit_test_setup_teardown(test_slice_reverse_concat, setup, teardown),
    cmocka_unit_test_setup_teardown(test_dynamic_slice_clamp, setup, teardown),
    cmocka_unit_test_setup_teardown(test_pad, setup, teardown),
    cmocka_unit_test_setup_teardown(test_bitcast_layout, setup, teardown),
    cmocka_unit_test_setup_teardown(test_gather, setup, teardown),
    cmocka_unit_test_setup_teardown(test_scatter, setup, teardown),
    cmocka_unit_test_setup_teardown(test_reduce_argmax, setup, teardown),
    cmocka_unit_test_setup_teardown(test_reduce_fast_equals_slow, setup, teardown),
    cmocka_unit_test_setup_teardown(test_reduce_window, setup, teardown),
    cmocka_unit_test_setup_teardown(test_sort, setup, teardown),
    cmocka_unit_test_setup_teardown(test_dot, setup, teardown),
    cmocka_unit_test_setup_teardown(test_unsupported, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
