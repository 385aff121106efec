/* test_shape.c — shape inference (hlo_infer_shape) and the verifier.

   Each case builds a small computation with the IR constructors, infers one instruction's
   shape and compares its text with the shape XLA gives for the same instruction (the
   expected shapes are the ones in XLA's operation semantics and in the JAX dumps under
   tests/fixtures/jax). Error cases check that the message names the op, the instruction
   and the shapes. The last tests run the verifier over every JAX fixture and every module
   of the shared XLA corpus, whose declared shapes were written by XLA itself: each one must
   agree with our inference. */
#include "testutil.h"

/* ---- helpers ------------------------------------------------------------------------------ */

typedef struct { hj_ctx_t *ctx; hlo_module *m; hlo_comp *c; } ts_env;

static int ts_setup(void **state) {
  ts_env *e = calloc(1, sizeof *e);
  e->ctx = tu_ctx();
  e->m = hlo_module_new(e->ctx, "t");
  e->c = hlo_comp_new(e->m, "main");
  e->c->is_entry = true;
  e->m->entry = e->c;
  *state = e;
  return 0;
}

static int ts_teardown(void **state) {
  ts_env *e = *state;
  hlo_module_free(e->m);
  hj_ctx_destroy(e->ctx);
  free(e);
  return 0;
}

/* "f32[2,<=3]" or "(f32[2], s32[])" -> shape (tuples in the module's arena). */
static hlo_shape ts_parse(hlo_module *m, const char **p) {
  hlo_shape s = { 0 };
  if (**p == '(') {
    hlo_shape el[16];
    int n = 0;
    (*p)++;
    while (**p && **p != ')') {
      el[n++] = ts_parse(m, p);
      while (**p == ',' || **p == ' ') (*p)++;
    }
    (*p)++;
    s.type = HLO_TUPLE;
    s.ntuple = n;
    s.tuple = hlo_alloc(m, sizeof(hlo_shape) * (size_t)(n ? n : 1));
    memcpy(s.tuple, el, sizeof(hlo_shape) * (size_t)n);
    return s;
  }
  const char *b = strchr(*p, '[');
  assert_true(b && hlo_type_from_name(*p, (size_t)(b - *p), &s.type));
  *p = b + 1;
  while (**p != ']') {
    if (**p == ',') (*p)++;
    if (strncmp(*p, "<=", 2) == 0) { s.dynamic[s.rank] = true; *p += 2; }
    s.dims[s.rank++] = strtoll(*p, (char **)p, 10);
  }
  (*p)++;
  hlo_shape_set_default_layout(&s);
  return s;
}

static hlo_shape ts_shape(hlo_module *m, const char *txt) { return ts_parse(m, &txt); }

static hlo_instr *ts_param(hlo_comp *c, int i, const char *shape) {
  hlo_shape s = ts_shape(c->module, shape);
  return tu_set_param(c, i, hlo_instr_new(c, HLO_OP_PARAMETER, NULL, &s, NULL, 0));
}

/* An instruction with operands (NULL-terminated) and a declared shape (NULL: none). */
static hlo_instr *ts_op(hlo_comp *c, hlo_opcode op, const char *shape, ...) {
  hlo_instr *ops[16];
  int n = 0;
  va_list ap;
  va_start(ap, shape);
  for (hlo_instr *o; (o = va_arg(ap, hlo_instr *));) ops[n++] = o;
  va_end(ap);
  hlo_shape s = { 0 };
  if (shape) s = ts_shape(c->module, shape);
  hlo_instr *ins = hlo_instr_new(c, op, NULL, &s, ops, n);
  c->root = ins;
  return ins;
}

#define I(...) TU_INTS(e->m, __VA_ARGS__)
#define I0 ((hlo_ints){ NULL, 0 })

static void ts_expect(ts_env *e, const hlo_instr *ins, const char *want) {
  hlo_shape s;
  CHECK_OK(e->ctx, hlo_infer_shape(e->ctx, ins, &s));
  char buf[256];
  assert_string_equal(hlo_shape_str(&s, buf, sizeof buf), want);
}

/* The inference fails with a message containing every string given (NULL-terminated). */
static void ts_expect_err(ts_env *e, const hlo_instr *ins, ...) {
  hlo_shape s;
  hj_status st = hlo_infer_shape(e->ctx, ins, &s);
  if (st == HJ_OK) fail_msg("'%s' inferred, expected an error", ins->name);
  const char *msg = hj_ctx_error(e->ctx);
  va_list ap;
  va_start(ap, ins);
  for (const char *w; (w = va_arg(ap, const char *));)
    if (!strstr(msg, w)) fail_msg("message \"%s\" lacks \"%s\"", msg, w);
  va_end(ap);
}

/* A scalar computation (x, y) -> op(x, y) of |type|, or a comparator returning pred. */
static hlo_comp *ts_scalar_fn(ts_env *e, const char *name, const char *type, hlo_opcode op, int nparams) {
  hlo_comp *k = hlo_comp_new(e->m, name);
  hlo_instr *p[8];
  for (int i = 0; i < nparams; i++) p[i] = ts_param(k, i, type);
  hlo_instr *r = hlo_instr_new(k, op, NULL, &p[0]->shape, p, 2);
  if (op == HLO_OP_COMPARE) {
    r->shape = hlo_shape_scalar(HLO_PRED);
    r->cmp_dir = HLO_CMP_LT;
  }
  k->root = r;
  return k;
}

static void ts_calls(hlo_instr *ins, hlo_comp *a, hlo_comp *b) {
  hlo_comp *k[2] = { a, b };
  hlo_instr_set_calls(ins, k, b ? 2 : 1);
}

/* ---- inference ------------------------------------------------------------------------ */

static void test_elementwise(void **state) {
  ts_env *e = *state;
  hlo_instr *a = ts_param(e->c, 0, "f32[2,<=3]"), *b = ts_param(e->c, 1, "f32[2,3]");
  hlo_instr *ip = ts_param(e->c, 2, "s32[4]"), *pp = ts_param(e->c, 3, "pred[4]");
  ts_expect(e, ts_op(e->c, HLO_OP_ADD, NULL, a, b, NULL), "f32[2,<=3]");   /* dynamic propagates */
  ts_expect(e, ts_op(e->c, HLO_OP_ATAN2, NULL, b, b, NULL), "f32[2,3]");
  ts_expect(e, ts_op(e->c, HLO_OP_EXP, NULL, a, NULL), "f32[2,<=3]");
  ts_expect(e, ts_op(e->c, HLO_OP_IS_FINITE, NULL, b, NULL), "pred[2,3]");
  ts_expect(e, ts_op(e->c, HLO_OP_NOT, NULL, pp, NULL), "pred[4]");
  ts_expect(e, ts_op(e->c, HLO_OP_POPCNT, NULL, ip, NULL), "s32[4]");
  ts_expect(e, ts_op(e->c, HLO_OP_SHRL, NULL, ip, ip, NULL), "s32[4]");
  ts_expect(e, ts_op(e->c, HLO_OP_AND, NULL, pp, pp, NULL), "pred[4]");
  ts_expect(e, ts_op(e->c, HLO_OP_COMPARE, NULL, a, b, NULL), "pred[2,<=3]");
  ts_expect(e, ts_op(e->c, HLO_OP_COPY, NULL, a, NULL), "f32[2,<=3]");
  ts_expect(e, ts_op(e->c, HLO_OP_CONVERT, "bf16[2,3]", b, NULL), "bf16[2,3]");
  ts_expect(e, ts_op(e->c, HLO_OP_BITCAST_CONVERT, "u32[2,3]", b, NULL), "u32[2,3]");
  /* XLA's width rule: a wider source gains a minor dim, a narrower one loses it */
  hlo_instr *bytes = ts_op(e->c, HLO_OP_BITCAST_CONVERT, "u8[2,3,4]", b, NULL);
  ts_expect(e, bytes, "u8[2,3,4]");
  ts_expect(e, ts_op(e->c, HLO_OP_BITCAST_CONVERT, "f32[2,3]", bytes, NULL), "f32[2,3]");
}

static void test_select_clamp(void **state) {
  ts_env *e = *state;
  hlo_instr *x = ts_param(e->c, 0, "f32[5]"), *sp = ts_param(e->c, 1, "pred[]");
  hlo_instr *vp = ts_param(e->c, 2, "pred[5]"), *lo = ts_param(e->c, 3, "f32[]");
  ts_expect(e, ts_op(e->c, HLO_OP_SELECT, NULL, sp, x, x, NULL), "f32[5]");
  ts_expect(e, ts_op(e->c, HLO_OP_SELECT, NULL, vp, x, x, NULL), "f32[5]");
  ts_expect(e, ts_op(e->c, HLO_OP_CLAMP, NULL, lo, x, lo, NULL), "f32[5]");
  ts_expect(e, ts_op(e->c, HLO_OP_CLAMP, NULL, x, x, x, NULL), "f32[5]");
}

static void test_shape_ops(void **state) {
  ts_env *e = *state;
  hlo_instr *a = ts_param(e->c, 0, "f32[<=4,3]"), *v = ts_param(e->c, 1, "f32[]");
  hlo_instr *b = ts_param(e->c, 2, "f32[2,3]");
  hlo_instr *ins = ts_op(e->c, HLO_OP_BROADCAST, "f32[3,4,5]", a, NULL);
  ins->dims = I(1, 0);
  ts_expect(e, ins, "f32[3,<=4,5]");                          /* operand dim 0 -> result dim 1 */
  ts_expect(e, ts_op(e->c, HLO_OP_RESHAPE, "f32[12]", a, NULL), "f32[12]");
  ins = ts_op(e->c, HLO_OP_TRANSPOSE, NULL, a, NULL);
  ins->dims = I(1, 0);
  ts_expect(e, ins, "f32[3,<=4]");
  ins = ts_op(e->c, HLO_OP_SLICE, NULL, b, NULL);             /* XLA: ceil((limit-start)/stride) */
  ins->slice_start = I(0, 0);
  ins->slice_limit = I(2, 3);
  ins->slice_stride = I(1, 2);
  ts_expect(e, ins, "f32[2,2]");
  ins = ts_op(e->c, HLO_OP_CONCATENATE, NULL, a, b, b, NULL);
  ins->dims = I(0);
  ts_expect(e, ins, "f32[<=8,3]");
  ins = ts_op(e->c, HLO_OP_PAD, NULL, b, v, NULL);            /* 2+1+2+1*1 = 6, 3-1+0+2*2 = 6 */
  ins->pad_lo = I(1, -1);
  ins->pad_hi = I(2, 0);
  ins->pad_interior = I(1, 2);
  ts_expect(e, ins, "f32[6,6]");
  ins = ts_op(e->c, HLO_OP_REVERSE, NULL, b, NULL);
  ins->dims = I(0, 1);
  ts_expect(e, ins, "f32[2,3]");
  ins = ts_op(e->c, HLO_OP_IOTA, "s32[4,5]", NULL);
  ins->index = 1;
  ts_expect(e, ins, "s32[4,5]");
  ts_expect(e, ts_op(e->c, HLO_OP_BITCAST, "u8[24]", b, NULL), "u8[24]");
}

static void test_dynamic_slice(void **state) {
  ts_env *e = *state;
  hlo_instr *a = ts_param(e->c, 0, "f32[6,4]"), *i = ts_param(e->c, 1, "s32[]");
  hlo_instr *u = ts_param(e->c, 2, "f32[1,3]");
  hlo_instr *ins = ts_op(e->c, HLO_OP_DYNAMIC_SLICE, NULL, a, i, i, NULL);
  ins->ds_sizes = I(1, 3);
  ts_expect(e, ins, "f32[1,3]");
  ts_expect(e, ts_op(e->c, HLO_OP_DYNAMIC_UPDATE_SLICE, NULL, a, u, i, i, NULL), "f32[6,4]");
}

static void test_gather(void **state) {
  ts_env *e = *state;
  /* XLA's TensorFlowGatherV1 and JAX's take_embedding: rows of a matrix. */
  hlo_instr *a = ts_param(e->c, 0, "s32[3,3]"), *ix = ts_param(e->c, 1, "s32[2]");
  hlo_instr *g = ts_op(e->c, HLO_OP_GATHER, NULL, a, ix, NULL);
  g->gather = (hlo_gather_dims){ .offset_dims = I(1), .collapsed_slice_dims = I(0),
                                 .start_index_map = I(0), .index_vector_dim = 1, .slice_sizes = I(1, 3) };
  ts_expect(e, g, "s32[2,3]");
  /* JAX take_along_axis (fixture take_along_axis.hlo): batching dims. */
  hlo_instr *t = ts_param(e->c, 2, "f32[4,5]"), *tix = ts_param(e->c, 3, "s32[4,3,1]");
  g = ts_op(e->c, HLO_OP_GATHER, NULL, t, tix, NULL);
  g->gather = (hlo_gather_dims){ .offset_dims = I0, .collapsed_slice_dims = I(1), .start_index_map = I(1),
                                 .operand_batching_dims = I(0), .start_indices_batching_dims = I(0),
                                 .index_vector_dim = 2, .slice_sizes = I(1, 1) };
  ts_expect(e, g, "f32[4,3]");
  /* XLA semantics doc: offset dims interleaved with batch dims. */
  hlo_instr *o = ts_param(e->c, 4, "f32[16,11]"), *ix2 = ts_param(e->c, 5, "s32[5,2]");
  g = ts_op(e->c, HLO_OP_GATHER, NULL, o, ix2, NULL);
  g->gather = (hlo_gather_dims){ .offset_dims = I(0, 2), .collapsed_slice_dims = I0,
                                 .start_index_map = I(0, 1), .index_vector_dim = 1, .slice_sizes = I(8, 6) };
  ts_expect(e, g, "f32[8,5,6]");
}

static void test_scatter(void **state) {
  ts_env *e = *state;
  /* The corpus's variadic_scatter_simple: two operands -> a tuple. */
  hlo_instr *o1 = ts_param(e->c, 0, "f32[50,5]"), *o2 = ts_param(e->c, 1, "s32[50,5]");
  hlo_instr *ix = ts_param(e->c, 2, "s32[24,1]");
  hlo_instr *u1 = ts_param(e->c, 3, "f32[24,1,3]"), *u2 = ts_param(e->c, 4, "s32[24,1,3]");
  hlo_comp *k = hlo_comp_new(e->m, "override");
  hlo_instr *kp[4] = { ts_param(k, 0, "f32[]"), ts_param(k, 1, "s32[]"), ts_param(k, 2, "f32[]"),
                       ts_param(k, 3, "s32[]") };
  hlo_instr *kops[2] = { kp[2], kp[3] };
  k->root = hlo_instr_new(k, HLO_OP_TUPLE, NULL, NULL, kops, 2);
  k->root->shape = ts_shape(e->m, "(f32[], s32[])");
  hlo_instr *s = ts_op(e->c, HLO_OP_SCATTER, NULL, o1, o2, ix, u1, u2, NULL);
  s->scatter = (hlo_scatter_dims){ .update_window_dims = I(1, 2), .inserted_window_dims = I0,
                                   .scatter_dims_to_operand_dims = I(0), .index_vector_dim = 1 };
  ts_calls(s, k, NULL);
  ts_expect(e, s, "(f32[50,5], s32[50,5])");
  /* Single operand: the operand's shape. */
  hlo_comp *add = ts_scalar_fn(e, "add", "f32[]", HLO_OP_ADD, 2);
  hlo_instr *op = ts_param(e->c, 5, "f32[3,3]"), *ix1 = ts_param(e->c, 6, "s32[2]");
  hlo_instr *up = ts_param(e->c, 7, "f32[2,3]");
  s = ts_op(e->c, HLO_OP_SCATTER, NULL, op, ix1, up, NULL);
  s->scatter = (hlo_scatter_dims){ .update_window_dims = I(1), .inserted_window_dims = I(0),
                                   .scatter_dims_to_operand_dims = I(0), .index_vector_dim = 1 };
  ts_calls(s, add, NULL);
  ts_expect(e, s, "f32[3,3]");
}

static void test_reduce(void **state) {
  ts_env *e = *state;
  hlo_comp *add = ts_scalar_fn(e, "add", "f32[]", HLO_OP_ADD, 2);
  hlo_instr *x = ts_param(e->c, 0, "f32[<=5,7]"), *z = ts_param(e->c, 1, "f32[]");
  hlo_instr *r = ts_op(e->c, HLO_OP_REDUCE, NULL, x, z, NULL);
  r->dims = I(1);
  ts_calls(r, add, NULL);
  ts_expect(e, r, "f32[<=5]");                                 /* kept dims keep their flags */
  /* argmax (fixture argmax.hlo): (f32, s32) variadic reduce -> tuple */
  hlo_comp *k = hlo_comp_new(e->m, "argmax");
  hlo_instr *p[4] = { ts_param(k, 0, "f32[]"), ts_param(k, 1, "s32[]"), ts_param(k, 2, "f32[]"),
                      ts_param(k, 3, "s32[]") };
  hlo_instr *two[2] = { p[0], p[1] };
  k->root = hlo_instr_new(k, HLO_OP_TUPLE, NULL, NULL, two, 2);
  k->root->shape = ts_shape(e->m, "(f32[], s32[])");
  hlo_instr *io = ts_param(e->c, 2, "s32[5,7]"), *iz = ts_param(e->c, 3, "s32[]");
  hlo_instr *x2 = ts_param(e->c, 4, "f32[5,7]");
  r = ts_op(e->c, HLO_OP_REDUCE, NULL, x2, io, z, iz, NULL);
  r->dims = I(1);
  ts_calls(r, k, NULL);
  ts_expect(e, r, "(f32[5], s32[5])");
  /* reduce-window from the cumsum fixture: size=1x10 pad=0_0x9_0 over f32[3,10]. */
  hlo_instr *y = ts_param(e->c, 5, "f32[3,10]");
  hlo_instr *w = ts_op(e->c, HLO_OP_REDUCE_WINDOW, NULL, y, z, NULL);
  w->window = (hlo_window){ .size = I(1, 10), .pad_lo = I(0, 9), .pad_hi = I(0, 0) };
  ts_calls(w, add, NULL);
  ts_expect(e, w, "f32[3,10]");
  w = ts_op(e->c, HLO_OP_REDUCE_WINDOW, NULL, y, z, NULL);   /* (10-3)/2+1 = 4 */
  w->window = (hlo_window){ .size = I(1, 3), .stride = I(1, 2) };
  ts_calls(w, add, NULL);
  ts_expect(e, w, "f32[3,4]");
}

static void test_dot(void **state) {
  ts_env *e = *state;
  hlo_instr *l = ts_param(e->c, 0, "f32[2,6,8]"), *r = ts_param(e->c, 1, "f32[2,6,8]");
  hlo_instr *d = ts_op(e->c, HLO_OP_DOT, NULL, l, r, NULL);   /* fixture attention_causal */
  d->dot = (hlo_dot_dims){ .lhs_batch = I(0), .rhs_batch = I(0), .lhs_contract = I(2), .rhs_contract = I(2) };
  ts_expect(e, d, "f32[2,6,6]");
  hlo_instr *x = ts_param(e->c, 2, "bf16[<=4,768]"), *w = ts_param(e->c, 3, "bf16[768,64]");
  d = ts_op(e->c, HLO_OP_DOT, "f32[4,64]", x, w, NULL);       /* preferred type f32 */
  d->dot = (hlo_dot_dims){ .lhs_contract = I(1), .rhs_contract = I(0) };
  ts_expect(e, d, "f32[<=4,64]");
  d = ts_op(e->c, HLO_OP_DOT, NULL, x, w, NULL);              /* outer product, no dims */
  ts_expect(e, d, "bf16[<=4,768,768,64]");
}

static void test_sort_map_tuple(void **state) {
  ts_env *e = *state;
  hlo_instr *k = ts_param(e->c, 0, "f32[4,9]"), *v = ts_param(e->c, 1, "s32[4,9]");
  hlo_comp *cmp = hlo_comp_new(e->m, "cmp");
  hlo_instr *p[4] = { ts_param(cmp, 0, "f32[]"), ts_param(cmp, 1, "f32[]"), ts_param(cmp, 2, "s32[]"),
                      ts_param(cmp, 3, "s32[]") };
  hlo_shape pr = hlo_shape_scalar(HLO_PRED);
  hlo_instr *lt = hlo_instr_new(cmp, HLO_OP_COMPARE, NULL, &pr, p, 2);
  cmp->root = lt;
  hlo_instr *s = ts_op(e->c, HLO_OP_SORT, NULL, k, v, NULL);
  s->dims = I(1);
  ts_calls(s, cmp, NULL);
  ts_expect(e, s, "(f32[4,9], s32[4,9])");
  hlo_comp *add = ts_scalar_fn(e, "add", "f32[]", HLO_OP_ADD, 2);
  hlo_instr *m = ts_op(e->c, HLO_OP_MAP, NULL, k, k, NULL);
  m->dims = I(0, 1);
  ts_calls(m, add, NULL);
  ts_expect(e, m, "f32[4,9]");
  hlo_instr *t = ts_op(e->c, HLO_OP_TUPLE, NULL, k, v, NULL);
  ts_expect(e, t, "(f32[4,9], s32[4,9])");
  t->shape = ts_shape(e->m, "(f32[4,9], s32[4,9])");
  hlo_instr *g = ts_op(e->c, HLO_OP_GET_TUPLE_ELEMENT, NULL, t, NULL);
  g->index = 1;
  ts_expect(e, g, "s32[4,9]");
  ts_expect(e, ts_op(e->c, HLO_OP_OPT_BARRIER, NULL, t, NULL), "(f32[4,9], s32[4,9])");
}

static void test_control(void **state) {
  ts_env *e = *state;
  hlo_comp *body = hlo_comp_new(e->m, "body"), *cond = hlo_comp_new(e->m, "cond");
  hlo_instr *bp = ts_param(body, 0, "(s32[], f32[3])");
  body->root = bp;                                            /* identity body */
  ts_param(cond, 0, "(s32[], f32[3])");
  hlo_shape pr = hlo_shape_scalar(HLO_PRED);
  cond->root = hlo_instr_new(cond, HLO_OP_CONSTANT, NULL, &pr, NULL, 0);
  hlo_instr *st = ts_param(e->c, 0, "(s32[], f32[3])");
  hlo_instr *w = ts_op(e->c, HLO_OP_WHILE, NULL, st, NULL);
  ts_calls(w, cond, body);
  ts_expect(e, w, "(s32[], f32[3])");
  /* call and fusion: the callee's root */
  hlo_comp *f = hlo_comp_new(e->m, "f");
  hlo_instr *fp = ts_param(f, 0, "f32[3]");
  hlo_instr *fops[2] = { fp, fp };
  f->root = hlo_instr_new(f, HLO_OP_MULTIPLY, NULL, &fp->shape, fops, 2);
  hlo_instr *x = ts_param(e->c, 1, "f32[3]");
  hlo_instr *call = ts_op(e->c, HLO_OP_CALL, NULL, x, NULL);
  ts_calls(call, f, NULL);
  ts_expect(e, call, "f32[3]");
  hlo_instr *fu = ts_op(e->c, HLO_OP_FUSION, NULL, x, NULL);
  ts_calls(fu, f, NULL);
  ts_expect(e, fu, "f32[3]");
  /* conditional with an s32 index and two branches */
  hlo_instr *i = ts_param(e->c, 2, "s32[]");
  hlo_instr *c = ts_op(e->c, HLO_OP_CONDITIONAL, NULL, i, x, x, NULL);
  ts_calls(c, f, f);
  ts_expect(e, c, "f32[3]");
}

/* ---- errors ------------------------------------------------------------------------------ */

static void test_errors_elementwise(void **state) {
  ts_env *e = *state;
  hlo_instr *a = ts_param(e->c, 0, "f32[2]"), *b = ts_param(e->c, 1, "f32[3]");
  hlo_instr *i = ts_param(e->c, 2, "s32[2]");
  hlo_instr *x = ts_op(e->c, HLO_OP_ADD, NULL, a, b, NULL);
  ts_expect_err(e, x, "op 'add'", x->name, "f32[2]", "f32[3]", "no implicit broadcast", NULL);
  x = ts_op(e->c, HLO_OP_MULTIPLY, NULL, a, i, NULL);
  ts_expect_err(e, x, "op 'multiply'", "element types differ", "f32[2]", "s32[2]", NULL);
  x = ts_op(e->c, HLO_OP_EXP, NULL, i, NULL);
  ts_expect_err(e, x, "op 'exponential'", "floating-point", "s32[2]", NULL);
  x = ts_op(e->c, HLO_OP_SHL, NULL, a, a, NULL);
  ts_expect_err(e, x, "op 'shift-left'", "integral", "f32[2]", NULL);
  x = ts_op(e->c, HLO_OP_BITCAST_CONVERT, "pred[2]", a, NULL);
  ts_expect_err(e, x, "pred can only be bitcast to pred", "f32[2]", NULL);
}

static void test_errors_shape_ops(void **state) {
  ts_env *e = *state;
  hlo_instr *a = ts_param(e->c, 0, "f32[2,3]");
  hlo_instr *x = ts_op(e->c, HLO_OP_BROADCAST, NULL, a, NULL);   /* shape-less parse */
  x->dims = I(0, 1);
  ts_expect_err(e, x, "cannot infer the shape of 'broadcast' without a declared shape", x->name, NULL);
  x = ts_op(e->c, HLO_OP_RESHAPE, "f32[5]", a, NULL);
  ts_expect_err(e, x, "op 'reshape'", "cannot reshape f32[2,3] to f32[5]", NULL);
  x = ts_op(e->c, HLO_OP_TRANSPOSE, NULL, a, NULL);
  x->dims = I(0, 0);
  ts_expect_err(e, x, "not a permutation", "{0,0}", "f32[2,3]", NULL);
  x = ts_op(e->c, HLO_OP_SLICE, NULL, a, NULL);
  x->slice_start = I(0, 1);
  x->slice_limit = I(2, 4);
  ts_expect_err(e, x, "op 'slice'", "[1:4:1]", "dim 1", "f32[2,3]", NULL);
  hlo_instr *b = ts_param(e->c, 1, "f32[2,4]");
  x = ts_op(e->c, HLO_OP_CONCATENATE, NULL, a, b, NULL);
  x->dims = I(0);
  ts_expect_err(e, x, "op 'concatenate'", "f32[2,4]", "f32[2,3]", "outside dimension 0", NULL);
  hlo_instr *fi = ts_param(e->c, 2, "f32[]");
  x = ts_op(e->c, HLO_OP_DYNAMIC_SLICE, NULL, a, fi, fi, NULL);
  x->ds_sizes = I(1, 1);
  ts_expect_err(e, x, "op 'dynamic-slice'", "integer scalar", "f32[]", NULL);
}

static void test_errors_dot_gather(void **state) {
  ts_env *e = *state;
  hlo_instr *l = ts_param(e->c, 0, "f32[4,768]"), *r = ts_param(e->c, 1, "f32[512,64]");
  hlo_instr *d = ts_op(e->c, HLO_OP_DOT, NULL, l, r, NULL);
  d->dot = (hlo_dot_dims){ .lhs_contract = I(1), .rhs_contract = I(0) };
  char want[64];
  snprintf(want, sizeof want, "op 'dot' (%s): contracting dim sizes 768 vs 512", d->name);
  ts_expect_err(e, d, want, "(lhs f32[4,768], rhs f32[512,64])", NULL);
  hlo_instr *a = ts_param(e->c, 2, "s32[3,3]"), *ix = ts_param(e->c, 3, "s32[2]");
  hlo_instr *g = ts_op(e->c, HLO_OP_GATHER, NULL, a, ix, NULL);
  g->gather = (hlo_gather_dims){ .offset_dims = I(1), .collapsed_slice_dims = I(0),
                                 .start_index_map = I(0), .index_vector_dim = 1, .slice_sizes = I(2, 3) };
  ts_expect_err(e, g, "op 'gather'", "slice size 2 invalid for dim 0 of s32[3,3]", "collapsed", NULL);
}

static void test_errors_called(void **state) {
  ts_env *e = *state;
  hlo_comp *iadd = ts_scalar_fn(e, "iadd", "s32[]", HLO_OP_ADD, 2);
  hlo_instr *x = ts_param(e->c, 0, "f32[5,7]"), *z = ts_param(e->c, 1, "f32[]");
  hlo_instr *r = ts_op(e->c, HLO_OP_REDUCE, NULL, x, z, NULL);
  r->dims = I(1);
  ts_calls(r, iadd, NULL);
  ts_expect_err(e, r, "op 'reduce'", "computation 'iadd' parameter 0 is s32[], expected f32[]", NULL);
  hlo_comp *body = hlo_comp_new(e->m, "body"), *cond = hlo_comp_new(e->m, "cond");
  ts_param(body, 0, "f32[3]");
  body->root = hlo_instr_new(body, HLO_OP_CONSTANT, NULL, &z->shape, NULL, 0);
  ts_param(cond, 0, "f32[3]");
  hlo_shape pr = hlo_shape_scalar(HLO_PRED);
  cond->root = hlo_instr_new(cond, HLO_OP_CONSTANT, NULL, &pr, NULL, 0);
  hlo_instr *s = ts_param(e->c, 2, "f32[3]");
  hlo_instr *w = ts_op(e->c, HLO_OP_WHILE, NULL, s, NULL);
  ts_calls(w, cond, body);
  ts_expect_err(e, w, "op 'while'", "body 'body' returns f32[], the loop state is f32[3]", NULL);
  hlo_instr *srt = ts_op(e->c, HLO_OP_SORT, NULL, s, NULL);
  srt->dims = I(0);
  hlo_comp *fadd = ts_scalar_fn(e, "fadd", "f32[]", HLO_OP_ADD, 2);
  ts_calls(srt, fadd, NULL);
  ts_expect_err(e, srt, "op 'sort'", "comparator 'fadd' must return pred[], returns f32[]", NULL);
}


/* Every opcode has a rule: none answers "no shape inference". */
static void test_every_opcode(void **state) {
  ts_env *e = *state;
  for (int op = 0; op < HLO_OP_COUNT; op++) {
    hlo_instr *ins = ts_op(e->c, (hlo_opcode)op, "f32[2]", NULL);
    hlo_shape s;
    hlo_infer_shape(e->ctx, ins, &s);
    if (strstr(hj_ctx_error(e->ctx), "no shape inference"))
      fail_msg("opcode '%s' has no shape rule", hlo_opcode_name((hlo_opcode)op));
  }
}

/* Random operands and attributes: inference must answer (OK or an error), never crash or
   read out of bounds (run under ASan/UBSan by `make unit-asan`). */
static hlo_ints ts_rand_ints(ts_env *e, unsigned *seed) {
  int64_t v[12];
  int n = rand_r(seed) % 10;
  for (int i = 0; i < n; i++) v[i] = rand_r(seed) % 12 - 2;
  return hlo_ints_dup(e->m, v, n);
}

static void test_random_instructions(void **state) {
  ts_env *e = *state;
  static const char *shapes[] = { "f32[]", "s32[]", "f32[2,3]", "s32[3,1]", "pred[2,3]",
                                  "f32[1,2,3,1,2,3,1,2]", "(f32[], s32[])", "s32[4,<=3]" };
  hlo_instr *ps[8];
  for (int i = 0; i < 8; i++) ps[i] = ts_param(e->c, i, shapes[i]);
  hlo_comp *add = ts_scalar_fn(e, "add", "f32[]", HLO_OP_ADD, 2);
  unsigned seed = 12345;
  int ok = 0;
  for (int it = 0; it < 20000; it++) {
    hlo_opcode op = (hlo_opcode)(rand_r(&seed) % HLO_OP_COUNT);
    hlo_instr *ops[6];
    int n = rand_r(&seed) % 6;
    for (int i = 0; i < n; i++) ops[i] = ps[rand_r(&seed) % 8];
    hlo_shape d = ts_shape(e->m, shapes[rand_r(&seed) % 8]);
    hlo_instr *ins = hlo_instr_new(e->c, op, NULL, &d, ops, n);
    ins->dims = ts_rand_ints(e, &seed);
    ins->index = rand_r(&seed) % 5 - 1;
    ins->slice_start = ts_rand_ints(e, &seed);
    ins->slice_limit = ts_rand_ints(e, &seed);
    ins->slice_stride = ts_rand_ints(e, &seed);
    ins->ds_sizes = ts_rand_ints(e, &seed);
    ins->pad_lo = ts_rand_ints(e, &seed);
    ins->pad_hi = ts_rand_ints(e, &seed);
    ins->dot = (hlo_dot_dims){ ts_rand_ints(e, &seed), ts_rand_ints(e, &seed), ts_rand_ints(e, &seed),
                               ts_rand_ints(e, &seed) };
    ins->gather = (hlo_gather_dims){ ts_rand_ints(e, &seed), ts_rand_ints(e, &seed), ts_rand_ints(e, &seed),
                                     ts_rand_ints(e, &seed), ts_rand_ints(e, &seed), ts_rand_ints(e, &seed),
                                     .index_vector_dim = rand_r(&seed) % 4 };
    ins->scatter = (hlo_scatter_dims){ ts_rand_ints(e, &seed), ts_rand_ints(e, &seed), ts_rand_ints(e, &seed),
                                       ts_rand_ints(e, &seed), ts_rand_ints(e, &seed),
                                       .index_vector_dim = rand_r(&seed) % 4 };
    ins->window = (hlo_window){ ts_rand_ints(e, &seed), ts_rand_ints(e, &seed), ts_rand_ints(e, &seed),
                                ts_rand_ints(e, &seed), ts_rand_ints(e, &seed), ts_rand_ints(e, &seed) };
    hlo_comp *k[2] = { add, add };
    hlo_instr_set_calls(ins, k, rand_r(&seed) % 3);
    hlo_shape s;
    ok += hlo_infer_shape(e->ctx, ins, &s) == HJ_OK;
  }
  print_message("random instructions: %d of 20000 inferred\n", ok);
}

/* ---- the verifier ---------------------------------------------------------------------- */

static void test_verify_module(void **state) {
  ts_env *e = *state;
  hlo_instr *a = ts_param(e->c, 0, "f32[2]");
  hlo_instr *x = ts_op(e->c, HLO_OP_ADD, "f32[2]", a, a, NULL);
  CHECK_OK(e->ctx, hlo_verify_module(e->m));
  x->shape = ts_shape(e->m, "f32[3]");                        /* declared != inferred */
  assert_int_equal(hlo_verify_module(e->m), HJ_ERR_SHAPE);
  assert_non_null(strstr(hj_ctx_error(e->ctx), "declares f32[3] but its operands give f32[2]"));
  x->shape = ts_shape(e->m, "f32[2]");
  x->shape.minor_to_major[0] = 1;                             /* bad layout */
  assert_int_equal(hlo_verify_module(e->m), HJ_ERR_SHAPE);
  assert_non_null(strstr(hj_ctx_error(e->ctx), "invalid layout"));
  x->shape = ts_shape(e->m, "f32[2]");
  a->index = 1;                                               /* parameter numbering */
  assert_int_equal(hlo_verify_module(e->m), HJ_ERR_SHAPE);
  assert_non_null(strstr(hj_ctx_error(e->ctx), "numbered 0..0"));
  a->index = 0;
  hlo_comp *f = hlo_comp_new(e->m, "f");                      /* f calls itself */
  hlo_instr *fp = ts_param(f, 0, "f32[2]");
  hlo_instr *fc = hlo_instr_new(f, HLO_OP_CALL, NULL, &fp->shape, &fp, 1);
  ts_calls(fc, f, NULL);
  f->root = fc;
  assert_int_equal(hlo_verify_module(e->m), HJ_ERR_SHAPE);
  assert_non_null(strstr(hj_ctx_error(e->ctx), "'f': calls itself"));
}

static void test_verify_cross_computation(void **state) {
  ts_env *e = *state;
  hlo_instr *a = ts_param(e->c, 0, "f32[2]");
  e->c->root = a;
  hlo_comp *f = hlo_comp_new(e->m, "f");
  f->root = hlo_instr_new(f, HLO_OP_NEGATE, NULL, &a->shape, &a, 1);
  assert_int_equal(hlo_verify_module(e->m), HJ_ERR_SHAPE);
  assert_non_null(strstr(hj_ctx_error(e->ctx), "uses 'parameter."));
  assert_non_null(strstr(hj_ctx_error(e->ctx), "of computation 'main'"));
}

/* Every module XLA or JAX wrote: their declared shapes are XLA's inference. */
typedef struct ts_verified { hj_ctx_t *ctx; int n, nfail; } ts_verified;

static void ts_verify_file(const char *path, void *user) {
  ts_verified *v = user;
  char *text = NULL;
  hlo_module *m = NULL;
  hj_status st = tu_parse_path(v->ctx, path, &m, &text);
  if (st == HJ_OK) st = hlo_verify_module(m);
  if (st != HJ_OK && !strstr(text, "c128")) {
    print_message("FAIL %s: %s\n", path, hj_ctx_error(v->ctx));
    v->nfail++;
  }
  v->n++;
  hlo_module_free(m);
  free(text);
}

static void test_verify_xla_modules(void **state) {
  ts_env *e = *state;
  tu_xla_dirs x = tu_xla_module_dirs();
  ts_verified v = { e->ctx, 0, 0 };
  tu_each_hlo(x.dir[0], ts_verify_file, &v);
  assert_true(v.n >= 20);                                      /* the fixtures are in the repo */
  tu_each_hlo(x.dir[1], ts_verify_file, &v);
  tu_each_hlo(x.dir[2], ts_verify_file, &v);
  print_message("verified %d modules, %d failures\n", v.n, v.nfail);
  assert_int_equal(v.nfail, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_elementwise, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_select_clamp, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_shape_ops, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_dynamic_slice, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_gather, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_scatter, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_reduce, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_dot, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_sort_map_tuple, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_control, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_errors_elementwise, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_errors_shape_ops, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_errors_dot_gather, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_errors_called, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_every_opcode, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_random_instructions, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_verify_module, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_verify_cross_computation, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_verify_xla_modules, ts_setup, ts_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
