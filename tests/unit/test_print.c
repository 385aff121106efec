/* test_print.c — the HLO text printer.

   Small modules built with the IR constructors must print exactly the lines XLA prints for
   them (the expected lines follow XLA's HloInstruction::ToString as JAX's as_text() shows it
   in tests/fixtures/jax, and XLA's literal printing, e.g. `{ { 1, 2 }, { 3, 4 } }`).
   Literals: special floats, -0, shortest round-tripping decimals, nesting.
   Round trip over every XLA-written module we have (the JAX fixtures and the shared XLA
   corpus): parse -> print -> parse -> print gives the same text the second time, and the
   two parsed modules are structurally equal. */
#include "testutil.h"
#include <math.h>

typedef struct { hj_ctx_t *ctx; hlo_module *m; hlo_literal **lits; } tp_env;

static int tp_setup(void **state) {
  tp_env *e = calloc(1, sizeof *e);
  e->ctx = tu_ctx();
  e->m = hlo_module_new(e->ctx, "m");
  *state = e;
  return 0;
}

static int tp_teardown(void **state) {
  tp_env *e = *state;
  for (ptrdiff_t i = 0; i < arrlen(e->lits); i++) hlo_literal_free(e->lits[i]);
  arrfree(e->lits);
  hlo_module_free(e->m);
  hj_ctx_destroy(e->ctx);
  free(e);
  return 0;
}

static hlo_shape tp_sh(hlo_type t, int rank, ...) {
  int64_t d[8];
  va_list ap;
  va_start(ap, rank);
  for (int i = 0; i < rank; i++) d[i] = va_arg(ap, int);
  va_end(ap);
  return hlo_shape_array(t, rank, d);
}

static hlo_instr *tp_param(hlo_comp *c, const char *name, int i, hlo_shape s) {
  return tu_set_param(c, i, hlo_instr_new(c, HLO_OP_PARAMETER, name, &s, NULL, 0));
}

#define I(...) TU_INTS(e->m, __VA_ARGS__)

/* A literal of |s| whose elements are |v| (stored through hlo_store_f64). */
static hlo_literal *tp_lit(tp_env *e, hlo_shape s, int n, const double *v) {
  hlo_literal *l = hlo_literal_new(e->ctx, &s);
  for (int i = 0; i < n; i++) hlo_store_f64(s.type, l->data, i, v[i]);
  arrput(e->lits, l);
  return l;
}

static void tp_expect_lit(tp_env *e, hlo_shape s, int n, const double *v, const char *want) {
  char *sb = NULL;
  hlo_print_literal(&sb, tp_lit(e, s, n, v));
  assert_string_equal(sb, want);
  arrfree(sb);
}

static void tp_expect_instr(const hlo_instr *ins, const char *want) {
  char *sb = NULL;
  hlo_print_instr(&sb, ins);
  assert_string_equal(sb, want);
  arrfree(sb);
}

/* ---- modules and instructions --------------------------------------------------------- */

static void test_module_text(void **state) {
  tp_env *e = *state;
  /* The entry is created first: the printer must still put the callee above it. */
  hlo_comp *main = hlo_comp_new(e->m, "main"), *add = hlo_comp_new(e->m, "add");
  main->is_entry = true;
  e->m->entry = main;
  hlo_shape f = hlo_shape_scalar(HLO_F32);
  hlo_instr *x = tp_param(add, "x", 0, f), *y = tp_param(add, "y", 1, f);
  hlo_instr *xy[2] = { x, y };
  add->root = hlo_instr_new(add, HLO_OP_ADD, "s", &f, xy, 2);
  hlo_instr *p0 = tp_param(main, "p0", 0, tp_sh(HLO_F32, 2, 2, 3));
  hlo_instr *p1 = tp_param(main, "p1", 1, hlo_shape_scalar(HLO_S32));
  hlo_instr *c = hlo_instr_new(main, HLO_OP_CONSTANT, "c", &f, NULL, 0);
  c->literal = tp_lit(e, f, 1, (double[]){ 0 });
  hlo_instr *ops[2] = { p0, c };
  hlo_shape r2 = tp_sh(HLO_F32, 1, 2);
  hlo_instr *r = hlo_instr_new(main, HLO_OP_REDUCE, "r", &r2, ops, 2);
  r->dims = I(1);
  hlo_instr_set_calls(r, &add, 1);
  main->root = r;
  (void)p1;
  char *text = NULL;
  CHECK_OK(e->ctx, hlo_print_module(e->m, &text));
  assert_string_equal(text,
    "HloModule m, entry_computation_layout={(f32[2,3]{1,0}, s32[])->f32[2]{0}}\n"
    "\n"
    "add {\n"
    "  x = f32[] parameter(0)\n"
    "  y = f32[] parameter(1)\n"
    "  ROOT s = f32[] add(x, y)\n"
    "}\n"
    "\n"
    "ENTRY main {\n"
    "  p0 = f32[2,3]{1,0} parameter(0)\n"
    "  p1 = s32[] parameter(1)\n"
    "  c = f32[] constant(0)\n"
    "  ROOT r = f32[2]{0} reduce(p0, c), dimensions={1}, to_apply=add\n"
    "}\n");
  free(text);
}

static void test_instr_attrs(void **state) {
  tp_env *e = *state;
  hlo_comp *c = hlo_comp_new(e->m, "main"), *k = hlo_comp_new(e->m, "k"), *k2 = hlo_comp_new(e->m, "k2");
  hlo_instr *a = tp_param(c, "a", 0, tp_sh(HLO_F32, 2, 6, 16));
  hlo_instr *v = tp_param(c, "v", 1, hlo_shape_scalar(HLO_F32));
  hlo_shape s;

  s = tp_sh(HLO_F32, 2, 3, 8);
  hlo_instr *i = hlo_instr_new(c, HLO_OP_SLICE, "sl", &s, &a, 1);
  i->slice_start = I(0, 0);
  i->slice_limit = I(6, 16);
  i->slice_stride = I(2, 2);
  tp_expect_instr(i, "sl = f32[3,8]{1,0} slice(a), slice={[0:6:2], [0:16:2]}");
  i->slice_stride = I(1, 1);
  tp_expect_instr(i, "sl = f32[3,8]{1,0} slice(a), slice={[0:6], [0:16]}");

  hlo_instr *av[2] = { a, v };
  s = tp_sh(HLO_F32, 2, 6, 7);
  i = hlo_instr_new(c, HLO_OP_PAD, "pad.1", &s, av, 2);
  i->pad_lo = I(1, 0);
  i->pad_hi = I(2, 3);
  i->pad_interior = I(0, 0);
  tp_expect_instr(i, "pad.1 = f32[6,7]{1,0} pad(a, v), padding=1_2x0_3");   /* fixture pad_constant */
  i->pad_interior = I(0, 1);
  i->pad_lo = I(0, -1);
  tp_expect_instr(i, "pad.1 = f32[6,7]{1,0} pad(a, v), padding=0_2_0x-1_3_1");

  hlo_instr *aa[2] = { a, a };
  s = tp_sh(HLO_PRED, 2, 6, 16);
  i = hlo_instr_new(c, HLO_OP_COMPARE, "lt", &s, aa, 2);
  i->cmp_dir = HLO_CMP_LT;
  tp_expect_instr(i, "lt = pred[6,16]{1,0} compare(a, a), direction=LT");
  i->cmp_type = HLO_CMPT_TOTALORDER;
  tp_expect_instr(i, "lt = pred[6,16]{1,0} compare(a, a), direction=LT, type=TOTALORDER");

  s = tp_sh(HLO_F32, 3, 2, 6, 6);
  i = hlo_instr_new(c, HLO_OP_DOT, "d", &s, aa, 2);
  i->dot = (hlo_dot_dims){ .lhs_batch = I(0), .rhs_batch = I(0), .lhs_contract = I(2), .rhs_contract = I(2) };
  tp_expect_instr(i, "d = f32[2,6,6]{2,1,0} dot(a, a), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
                     "rhs_batch_dims={0}, rhs_contracting_dims={2}");
  i->dot = (hlo_dot_dims){ .lhs_contract = I(1), .rhs_contract = I(0) };
  tp_expect_instr(i, "d = f32[2,6,6]{2,1,0} dot(a, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}");

  s = tp_sh(HLO_F32, 2, 4, 3);
  i = hlo_instr_new(c, HLO_OP_GATHER, "g", &s, aa, 2);                 /* fixture take_along_axis */
  i->gather = (hlo_gather_dims){ .offset_dims = { NULL, 0 }, .collapsed_slice_dims = I(1),
                                 .start_index_map = I(1), .operand_batching_dims = I(0),
                                 .start_indices_batching_dims = I(0), .index_vector_dim = 2,
                                 .slice_sizes = I(1, 1) };
  tp_expect_instr(i, "g = f32[4,3]{1,0} gather(a, a), offset_dims={}, collapsed_slice_dims={1}, "
                     "start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0}, "
                     "index_vector_dim=2, slice_sizes={1,1}");

  hlo_instr *sc3[3] = { a, v, a };
  i = hlo_instr_new(c, HLO_OP_SCATTER, "sc", &a->shape, sc3, 3);
  i->scatter = (hlo_scatter_dims){ .update_window_dims = I(1, 2), .inserted_window_dims = { NULL, 0 },
                                   .scatter_dims_to_operand_dims = I(0), .index_vector_dim = 1,
                                   .unique_indices = true };
  hlo_instr_set_calls(i, &k, 1);
  tp_expect_instr(i, "sc = f32[6,16]{1,0} scatter(a, v, a), update_window_dims={1,2}, "
                     "inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
                     "unique_indices=true, to_apply=k");

  s = tp_sh(HLO_F32, 2, 6, 16);
  i = hlo_instr_new(c, HLO_OP_REDUCE_WINDOW, "rw", &s, av, 2);         /* fixture cumsum */
  i->window = (hlo_window){ .size = I(1, 10), .stride = I(1, 1), .pad_lo = I(0, 9), .pad_hi = I(0, 0),
                            .base_dilation = I(1, 1), .window_dilation = I(1, 1) };
  hlo_instr_set_calls(i, &k, 1);
  tp_expect_instr(i, "rw = f32[6,16]{1,0} reduce-window(a, v), window={size=1x10 pad=0_0x9_0}, to_apply=k");
  i->window.stride = I(2, 1);
  i->window.window_dilation = I(1, 2);
  tp_expect_instr(i, "rw = f32[6,16]{1,0} reduce-window(a, v), window={size=1x10 stride=2x1 "
                     "pad=0_0x9_0 rhs_dilate=1x2}, to_apply=k");

  hlo_shape tup = { .type = HLO_TUPLE, .ntuple = 2, .tuple = (hlo_shape[]){ hlo_shape_scalar(HLO_S32), a->shape } };
  hlo_instr *t = hlo_instr_new(c, HLO_OP_TUPLE, "t", &tup, av, 2);
  tp_expect_instr(t, "t = (s32[], f32[6,16]{1,0}) tuple(a, v)");
  i = hlo_instr_new(c, HLO_OP_WHILE, "w", &tup, &t, 1);
  hlo_comp *ck[2] = { k, k2 };
  hlo_instr_set_calls(i, ck, 2);
  tp_expect_instr(i, "w = (s32[], f32[6,16]{1,0}) while(t), condition=k, body=k2");
  i = hlo_instr_new(c, HLO_OP_GET_TUPLE_ELEMENT, "gte", &a->shape, &i, 1);
  i->index = 1;
  tp_expect_instr(i, "gte = f32[6,16]{1,0} get-tuple-element(w), index=1");

  hlo_instr *pp = tp_param(c, "pp", 2, hlo_shape_scalar(HLO_PRED));
  hlo_instr *ix = tp_param(c, "ix", 3, hlo_shape_scalar(HLO_S32));
  hlo_instr *cond[3] = { pp, a, a };
  i = hlo_instr_new(c, HLO_OP_CONDITIONAL, "cnd", &a->shape, cond, 3);
  hlo_instr_set_calls(i, ck, 2);
  tp_expect_instr(i, "cnd = f32[6,16]{1,0} conditional(pp, a, a), true_computation=k, false_computation=k2");
  cond[0] = ix;
  i = hlo_instr_new(c, HLO_OP_CONDITIONAL, "cnd2", &a->shape, cond, 3);
  hlo_instr_set_calls(i, ck, 2);
  tp_expect_instr(i, "cnd2 = f32[6,16]{1,0} conditional(ix, a, a), branch_computations={k, k2}");

  i = hlo_instr_new(c, HLO_OP_FUSION, "fu", &a->shape, &a, 1);
  i->fusion_kind = HLO_FUSION_INPUT;
  hlo_instr_set_calls(i, &k, 1);
  tp_expect_instr(i, "fu = f32[6,16]{1,0} fusion(a), kind=kInput, calls=k");
  i = hlo_instr_new(c, HLO_OP_SORT, "so", &a->shape, &a, 1);
  i->dims = I(1);
  i->is_stable = true;
  hlo_instr_set_calls(i, &k, 1);
  tp_expect_instr(i, "so = f32[6,16]{1,0} sort(a), dimensions={1}, is_stable=true, to_apply=k");

  s = tp_sh(HLO_S32, 2, 4, 5);
  i = hlo_instr_new(c, HLO_OP_IOTA, "io", &s, NULL, 0);
  i->index = 1;
  tp_expect_instr(i, "io = s32[4,5]{1,0} iota(), iota_dimension=1");
  hlo_instr *dsop[3] = { a, ix, ix };
  s = tp_sh(HLO_F32, 2, 1, 3);
  i = hlo_instr_new(c, HLO_OP_DYNAMIC_SLICE, "ds", &s, dsop, 3);
  i->ds_sizes = I(1, 3);
  tp_expect_instr(i, "ds = f32[1,3]{1,0} dynamic-slice(a, ix, ix), dynamic_slice_sizes={1,3}");

  /* bounded dynamic dims and a non-default layout */
  s = tp_sh(HLO_F32, 3, 2, 6, 16);
  s.dynamic[1] = true;
  s.minor_to_major[0] = 1; s.minor_to_major[1] = 2; s.minor_to_major[2] = 0;
  i = hlo_instr_new(c, HLO_OP_BROADCAST, "b", &s, &a, 1);
  i->dims = I(1, 2);
  c->root = i;
  tp_expect_instr(i, "ROOT b = f32[2,<=6,16]{1,2,0} broadcast(a), dimensions={1,2}");
}

/* ---- literals -------------------------------------------------------------------------- */

static void test_literal_floats(void **state) {
  tp_env *e = *state;
  double v[] = { 1.5, -0.0, INFINITY, -INFINITY, NAN, 0.1, 1e20, 3.4028234663852886e38, 1.0 / 3 };
  tp_expect_lit(e, tp_sh(HLO_F32, 1, 9), 9, v,
                "{1.5, -0.0, inf, -inf, nan, 0.1, 1e+20, 3.4028235e+38, 0.33333334}");
  tp_expect_lit(e, tp_sh(HLO_F64, 1, 4), 4, (double[]){ 0.1, 1.0 / 3, -0.0, 5e-324 },
                "{0.1, 0.3333333333333333, -0.0, 5e-324}");
  /* XLA prints bf16 0.1 as 0.1001 and f16 0.1 as 0.099976: shortest is as exact, fewer digits. */
  tp_expect_lit(e, tp_sh(HLO_BF16, 1, 3), 3, (double[]){ 0.1, 3, -0.0 }, "{0.1, 3, -0.0}");
  tp_expect_lit(e, tp_sh(HLO_F16, 1, 3), 3, (double[]){ 0.1, 65504, 1.0 / 3 }, "{0.1, 65504, 0.3333}");
  tp_expect_lit(e, hlo_shape_scalar(HLO_F32), 1, (double[]){ -NAN }, "-nan");
  tp_expect_lit(e, hlo_shape_scalar(HLO_F32), 1, (double[]){ -0.0 }, "-0.0");
  /* every f32 bit pattern we print must read back: a sweep over many */
  char *sb = NULL;
  for (uint32_t u = 1; u < 0x7f800000u; u += 0x00f0f0f1u) {
    float f;
    memcpy(&f, &u, 4);
    hlo_literal l = hlo_literal_view(&(hlo_shape){ .type = HLO_F32 }, &f);
    arrsetlen(sb, 0);
    hlo_print_literal(&sb, &l);
    assert_true(strtof(sb, NULL) == f);
  }
  arrfree(sb);
}

static void test_literal_ints_and_nesting(void **state) {
  tp_env *e = *state;
  tp_expect_lit(e, tp_sh(HLO_PRED, 1, 3), 3, (double[]){ 1, 0, 1 }, "{true, false, true}");
  tp_expect_lit(e, hlo_shape_scalar(HLO_PRED), 1, (double[]){ 0 }, "false");
  tp_expect_lit(e, tp_sh(HLO_S32, 2, 2, 2), 4, (double[]){ 1, 2, 3, -4 }, "{ { 1, 2 }, { 3, -4 } }");
  tp_expect_lit(e, tp_sh(HLO_F32, 3, 2, 1, 2), 4, (double[]){ 1, 2, 3, 4 },
                "{ { { 1, 2 } }, { { 3, 4 } } }");
  tp_expect_lit(e, tp_sh(HLO_F32, 1, 0), 0, NULL, "{}");
  tp_expect_lit(e, tp_sh(HLO_F32, 2, 2, 0), 0, NULL, "{ {}, {} }");
  hlo_shape s64 = hlo_shape_scalar(HLO_S64), u64 = hlo_shape_scalar(HLO_U64);
  hlo_literal *l = tp_lit(e, s64, 0, NULL);
  *(int64_t *)l->data = INT64_MIN;
  char *sb = NULL;
  hlo_print_literal(&sb, l);
  assert_string_equal(sb, "-9223372036854775808");
  l = tp_lit(e, u64, 0, NULL);
  *(uint64_t *)l->data = UINT64_MAX;
  arrsetlen(sb, 0);
  hlo_print_literal(&sb, l);
  assert_string_equal(sb, "18446744073709551615");
  arrfree(sb);
}

/* ---- round trip over XLA-written modules ----------------------------------------------- */

static bool tp_ints_eq(hlo_ints a, hlo_ints b) {
  if (a.n != b.n) return false;
  for (int i = 0; i < a.n; i++)
    if (a.v[i] != b.v[i]) return false;
  return true;
}

/* NULL when equal, else what differs. Both modules come from the parser, so absent
   optional attributes are zero on both sides. */
static const char *tp_instr_diff(const hlo_instr *a, const hlo_instr *b) {
  if (a->op != b->op || strcmp(a->name, b->name)) return "opcode or name";
  if (!hlo_shape_equal(&a->shape, &b->shape)) return "shape";
  if (a->noperands != b->noperands || a->ncalls != b->ncalls) return "operand or call count";
  for (int i = 0; i < a->noperands; i++)
    if (strcmp(a->operands[i]->name, b->operands[i]->name)) return "operand";
  for (int i = 0; i < a->ncalls; i++)
    if (strcmp(a->calls[i]->name, b->calls[i]->name)) return "called computation";
  if (a->index != b->index || !tp_ints_eq(a->dims, b->dims)) return "index or dimensions";
  if (!tp_ints_eq(a->slice_start, b->slice_start) || !tp_ints_eq(a->slice_limit, b->slice_limit) ||
      !tp_ints_eq(a->ds_sizes, b->ds_sizes) || !tp_ints_eq(a->pad_lo, b->pad_lo) ||
      !tp_ints_eq(a->pad_hi, b->pad_hi))
    return "slice or padding";
  if (a->cmp_dir != b->cmp_dir || a->cmp_type != b->cmp_type) return "comparison";
  const hlo_dot_dims *x = &a->dot, *y = &b->dot;
  if (!tp_ints_eq(x->lhs_batch, y->lhs_batch) || !tp_ints_eq(x->rhs_batch, y->rhs_batch) ||
      !tp_ints_eq(x->lhs_contract, y->lhs_contract) || !tp_ints_eq(x->rhs_contract, y->rhs_contract))
    return "dot dims";
  const hlo_gather_dims *g = &a->gather, *h = &b->gather;
  if (!tp_ints_eq(g->offset_dims, h->offset_dims) || !tp_ints_eq(g->collapsed_slice_dims, h->collapsed_slice_dims) ||
      !tp_ints_eq(g->start_index_map, h->start_index_map) || !tp_ints_eq(g->slice_sizes, h->slice_sizes) ||
      g->index_vector_dim != h->index_vector_dim || g->indices_are_sorted != h->indices_are_sorted)
    return "gather dims";
  const hlo_scatter_dims *s = &a->scatter, *t = &b->scatter;
  if (!tp_ints_eq(s->update_window_dims, t->update_window_dims) ||
      !tp_ints_eq(s->inserted_window_dims, t->inserted_window_dims) ||
      !tp_ints_eq(s->scatter_dims_to_operand_dims, t->scatter_dims_to_operand_dims) ||
      s->index_vector_dim != t->index_vector_dim || s->unique_indices != t->unique_indices)
    return "scatter dims";
  if (!tp_ints_eq(a->window.size, b->window.size)) return "window";
  if (a->fusion_kind != b->fusion_kind || a->is_stable != b->is_stable) return "fusion kind or is_stable";
  if (a->op == HLO_OP_CONSTANT && !hlo_literal_equal(a->literal, b->literal)) return "literal";
  return NULL;
}

static void tp_modules_equal(const hlo_module *a, const hlo_module *b, const char *path) {
  assert_int_equal(arrlen(a->comps), arrlen(b->comps));
  for (ptrdiff_t i = 0; i < arrlen(a->comps); i++) {
    const hlo_comp *x = a->comps[i], *y = b->comps[i];
    assert_string_equal(x->name, y->name);
    assert_int_equal(arrlen(x->instrs), arrlen(y->instrs));
    assert_int_equal(x->is_entry, y->is_entry);
    for (ptrdiff_t j = 0; j < arrlen(x->instrs); j++) {
      const char *d = tp_instr_diff(x->instrs[j], y->instrs[j]);
      if (d) fail_msg("%s: %s of '%s' differs after a round trip", path, d, x->instrs[j]->name);
    }
    assert_string_equal(x->root->name, y->root->name);
  }
}

typedef struct tp_trips { hj_ctx_t *ctx; int n; } tp_trips;

/* parse -> print -> parse -> print of one file; counts it unless it is the module that
   must be rejected. */
static void tp_round_trip_file(const char *path, void *user) {
  tp_trips *r = user;
  hj_ctx_t *ctx = r->ctx;
  char *src = NULL, *t1 = NULL, *t2 = NULL;
  hlo_module *m1 = NULL, *m2 = NULL;
  hj_status st = tu_parse_path(ctx, path, &m1, &src);
  if (st != HJ_OK && strstr(src, "c128")) {   /* the module that must be rejected */
    free(src);
    return;
  }
  if (st) fail_msg("%s: %s", path, hj_ctx_error(ctx));
  CHECK_OK(ctx, hlo_print_module(m1, &t1));
  st = hlo_parse_module(ctx, t1, strlen(t1), path, &m2);
  if (st) fail_msg("%s: printed text does not parse: %s\n%s", path, hj_ctx_error(ctx), t1);
  CHECK_OK(ctx, hlo_print_module(m2, &t2));
  if (strcmp(t1, t2)) fail_msg("%s: second print differs:\n%s\n----\n%s", path, t1, t2);
  tp_modules_equal(m1, m2, path);
  hlo_module_free(m1);
  hlo_module_free(m2);
  free(t1);
  free(t2);
  free(src);
  r->n++;
}

/* Modules of |dir| that made the round trip (0 when |dir| is absent). */
static int tp_round_trip_dir(hj_ctx_t *ctx, const char *dir) {
  tp_trips r = { ctx, 0 };
  tu_each_hlo(dir, tp_round_trip_file, &r);
  return r.n;
}

static void test_round_trip(void **state) {
  tp_env *e = *state;
  tu_xla_dirs x = tu_xla_module_dirs();
  int n = tp_round_trip_dir(e->ctx, x.dir[0]);
  assert_true(n >= 20);
  int nc = tp_round_trip_dir(e->ctx, x.dir[1]);
  nc += tp_round_trip_dir(e->ctx, x.dir[2]);
  print_message("round trip: %d JAX fixtures, %d corpus modules%s\n", n, nc,
                nc ? "" : " (corpus not found: skipped)");
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_module_text, tp_setup, tp_teardown),
    cmocka_unit_test_setup_teardown(test_instr_attrs, tp_setup, tp_teardown),
    cmocka_unit_test_setup_teardown(test_literal_floats, tp_setup, tp_teardown),
    cmocka_unit_test_setup_teardown(test_literal_ints_and_nesting, tp_setup, tp_teardown),
    cmocka_unit_test_setup_teardown(test_round_trip, tp_setup, tp_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
