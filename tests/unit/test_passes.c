/* test_passes.c — the HLO pass pipeline (passes/) and the IR editing utilities
   (ir/edit.c).

   Each rewrite rule: a small module, the pass, then (1) the printed entry root line checked
   against the expected text, (2) the evaluator on the rewritten module checked bit for bit
   against the evaluator on the original, on random inputs salted with IEEE special values
   (±0, ±inf, NaN, 1): a rule that is not exact for floats fails here. The whole pipeline
   (minus fusion) is checked the same way on every JAX fixture and every corpus module
   (skipped, saying so, when /work/shared/hlo-corpus is absent), with CSE and DCE idempotent
   on the result. */
#include "testutil.h"
#include "fusion_testutil.h"
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

static hj_ctx_t *tp_ctx;

/* ---- helpers --------------------------------------------------------------------------- */

static uint64_t tp_rng = 0x9e3779b97f4a7c15ull;
static uint64_t tp_next(void) {
  tp_rng ^= tp_rng << 13;
  tp_rng ^= tp_rng >> 7;
  tp_rng ^= tp_rng << 17;
  return tp_rng;
}

static void tp_fill(hlo_literal *l, bool specials) {
  for (int i = 0; i < l->nelems; i++) tp_fill(l->elems[i], specials);
  if (!hlo_shape_is_array(&l->shape)) return;
  hlo_type t = l->shape.type;
  int64_t n = hlo_shape_numel(&l->shape);
  static const double sp[] = { 0.0, -0.0, INFINITY, -INFINITY, NAN, 1.0, -1.0 };
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = tp_next();
    if (hlo_type_is_float(t)) {
      double v = ((double)(r >> 11) / 9007199254740992.0) * 4.0 - 2.0;
      if (specials && r % 5 == 0) v = sp[(r >> 3) % 7];
      hlo_store_f64(t, l->data, i, v);
    } else if (t == HLO_PRED) {
      hlo_store_u64(t, l->data, i, r & 1);
    } else {
      hlo_store_s64(t, l->data, i, (int64_t)(r % 9) - (hlo_type_class_of(t) == HLO_CLASS_SINT ? 4 : 0));
    }
  }
}

static hlo_module *tp_parse(const char *text) {
  hlo_module *m = NULL;
  CHECK_OK(tp_ctx, hlo_parse_module(tp_ctx, text, strlen(text), "test", &m));
  return m;
}

static hlo_literal **tp_args(const hlo_module *m, bool specials) {
  int n = (int)arrlen(m->entry->params);
  hlo_literal **args = calloc((size_t)n + 1, sizeof *args);
  for (int i = 0; i < n; i++) {
    args[i] = hlo_literal_new(tp_ctx, &m->entry->params[i]->shape);
    assert_non_null(args[i]);
    tp_fill(args[i], specials);
  }
  return args;
}

static void tp_free_args(hlo_literal **args, int n) {
  for (int i = 0; i < n; i++) hlo_literal_free(args[i]);
  free(args);
}

/* |a| and |b| evaluate to the same bits on |rounds| random inputs; false if |a| itself
   cannot be evaluated (the caller decides whether that is a skip). */
static bool tp_same_values(const hlo_module *a, const hlo_module *b, int rounds, bool specials,
                           const char *what) {
  int n = (int)arrlen(a->entry->params);
  for (int r = 0; r < rounds; r++) {
    hlo_literal **args = tp_args(a, specials);
    hlo_literal *x = NULL, *y = NULL;
    if (hlo_eval_module(tp_ctx, a, args, n, &x) != HJ_OK) {
      tp_free_args(args, n);
      return false;
    }
    CHECK_OK(tp_ctx, hlo_eval_module(tp_ctx, b, args, n, &y));
    if (!hlo_literal_equal(x, y)) {
      char *text = NULL;
      hlo_print_module(b, &text);
      fail_msg("%s: values differ after the passes; optimised module:\n%s", what, text);
    }
    hlo_literal_free(x);
    hlo_literal_free(y);
    tp_free_args(args, n);
  }
  return true;
}

/* The entry's ROOT line of |m| without indentation (static buffer). */
static const char *tp_root_line(const hlo_module *m) {
  static char line[1024];
  char *text = NULL;
  CHECK_OK(tp_ctx, hlo_print_module(m, &text));
  const char *e = strstr(text, "ENTRY ");
  const char *r = e ? strstr(e, "ROOT ") : NULL;
  assert_non_null(r);
  size_t k = strcspn(r, "\n");
  snprintf(line, sizeof line, "%.*s", (int)k, r);
  free(text);
  return line;
}

static int tp_count_op(const hlo_comp *c, hlo_opcode op) {
  int n = 0;
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++) n += c->instrs[i]->op == op;
  return n;
}

/* Runs |fn| then DCE on a copy of |text|, checks the values against the original and
   that the entry root line contains |want|; returns the optimised module. */
static hlo_module *tp_pass(const char *text, hlo_pass_fn fn, const char *want) {
  hlo_module *orig = tp_parse(text), *m = hlo_module_clone(orig);
  assert_non_null(m);
  hlo_pass_ctx pc;
  rt_pass_ctx_init(&pc, tp_ctx);
  pc.dump_dir = NULL;
  pc.verify_each = true;
  bool ch = false;
  CHECK_OK(tp_ctx, hlo_pass_run(&pc, "pass", fn, m, &ch));
  CHECK_OK(tp_ctx, hlo_pass_run(&pc, "dce", hlo_pass_dce, m, &ch));
  const char *root = tp_root_line(m);
  if (!strstr(root, want)) fail_msg("root line '%s' lacks '%s'", root, want);
  assert_true(tp_same_values(orig, m, 4, true, want));
  hlo_module_free(orig);
  return m;
}

#define TP_MOD(body) "HloModule m\nENTRY e {\n" body "}\n"
#define TP_RULE(text, fn, want) hlo_module_free(tp_pass(text, fn, want))

/* ---- algebraic simplification ------------------------------------------------------------ */

static void test_algsimp_add_sub(void **state) {
  /* x + -0 -> x for floats; x + +0 is not x (-0 + +0 = +0) and must stay */
  TP_RULE(TP_MOD("a = f32[64] parameter(0)\n z = f32[] constant(-0)\n"
                 " b = f32[64] broadcast(z), dimensions={}\n ROOT r = f32[64] add(a, b)\n"),
          hlo_pass_algsimp, "ROOT a = f32[64]{0} parameter(0)");
  TP_RULE(TP_MOD("a = f32[64] parameter(0)\n z = f32[] constant(0)\n"
                 " b = f32[64] broadcast(z), dimensions={}\n ROOT r = f32[64] add(b, a)\n"),
          hlo_pass_algsimp, "ROOT r = f32[64]{0} add(b, a)");
  TP_RULE(TP_MOD("a = s32[4] parameter(0)\n z = s32[4] constant({0, 0, 0, 0})\n"
                 " ROOT r = s32[4] add(z, a)\n"),
          hlo_pass_algsimp, "ROOT a = s32[4]{0} parameter(0)");
  /* x - +0 -> x (floats too); x - x stays for floats (inf - inf is NaN) */
  TP_RULE(TP_MOD("a = f32[64] parameter(0)\n z = f32[] constant(0)\n"
                 " b = f32[64] broadcast(z), dimensions={}\n ROOT r = f32[64] subtract(a, b)\n"),
          hlo_pass_algsimp, "ROOT a = f32[64]{0} parameter(0)");
  TP_RULE(TP_MOD("a = f32[64] parameter(0)\n ROOT r = f32[64] subtract(a, a)\n"),
          hlo_pass_algsimp, "ROOT r = f32[64]{0} subtract(a, a)");
}

static void test_algsimp_mul_div(void **state) {
  TP_RULE(TP_MOD("a = f32[64] parameter(0)\n o = f32[] constant(1)\n"
                 " b = f32[64] broadcast(o), dimensions={}\n ROOT r = f32[64] multiply(b, a)\n"),
          hlo_pass_algsimp, "ROOT a = f32[64]{0} parameter(0)");
  TP_RULE(TP_MOD("a = bf16[64] parameter(0)\n o = bf16[] constant(1)\n"
                 " b = bf16[64] broadcast(o), dimensions={}\n ROOT r = bf16[64] divide(a, b)\n"),
          hlo_pass_algsimp, "ROOT a = bf16[64]{0} parameter(0)");
  /* x * 0: integers only */
  TP_RULE(TP_MOD("a = s32[8] parameter(0)\n z = s32[] constant(0)\n"
                 " b = s32[8] broadcast(z), dimensions={}\n ROOT r = s32[8] multiply(a, b)\n"),
          hlo_pass_algsimp, "ROOT b = s32[8]{0} broadcast(z), dimensions={}");
  TP_RULE(TP_MOD("a = f32[64] parameter(0)\n z = f32[] constant(0)\n"
                 " b = f32[64] broadcast(z), dimensions={}\n ROOT r = f32[64] multiply(a, b)\n"),
          hlo_pass_algsimp, "ROOT r = f32[64]{0} multiply(a, b)");
}

static void test_algsimp_unary_logic_select(void **state) {
  TP_RULE(TP_MOD("a = f32[64] parameter(0)\n n = f32[64] negate(a)\n ROOT r = f32[64] negate(n)\n"),
          hlo_pass_algsimp, "ROOT a = f32[64]{0} parameter(0)");
  TP_RULE(TP_MOD("a = pred[8] parameter(0)\n n = pred[8] not(a)\n ROOT r = pred[8] not(n)\n"),
          hlo_pass_algsimp, "ROOT a = pred[8]{0} parameter(0)");
  TP_RULE(TP_MOD("a = f32[64] parameter(0)\n ROOT r = f32[64] maximum(a, a)\n"),
          hlo_pass_algsimp, "ROOT a = f32[64]{0} parameter(0)");
  TP_RULE(TP_MOD("a = pred[8] parameter(0)\n t = pred[] constant(true)\n"
                 " b = pred[8] broadcast(t), dimensions={}\n ROOT r = pred[8] and(b, a)\n"),
          hlo_pass_algsimp, "ROOT a = pred[8]{0} parameter(0)");
  TP_RULE(TP_MOD("a = s16[8] parameter(0)\n b = s16[8] minimum(a, a)\n c = s16[8] and(b, b)\n"
                 " ROOT r = s16[8] or(c, c)\n"),
          hlo_pass_algsimp, "ROOT a = s16[8]{0} parameter(0)");   /* chains in one sweep */
  TP_RULE(TP_MOD("a = pred[8] parameter(0)\n f = pred[8] constant({0, 0, 0, 0, 0, 0, 0, 0})\n"
                 " ROOT r = pred[8] or(f, a)\n"),
          hlo_pass_algsimp, "ROOT a = pred[8]{0} parameter(0)");
  TP_RULE(TP_MOD("a = f32[8] parameter(0)\n b = f32[8] parameter(1)\n t = pred[] constant(true)\n"
                 " ROOT r = f32[8] select(t, a, b)\n"),
          hlo_pass_algsimp, "ROOT a = f32[8]{0} parameter(0)");
  TP_RULE(TP_MOD("a = f32[8] parameter(0)\n b = f32[8] parameter(1)\n t = pred[] constant(false)\n"
                 " p = pred[8] broadcast(t), dimensions={}\n ROOT r = f32[8] select(p, a, b)\n"),
          hlo_pass_algsimp, "ROOT b = f32[8]{0} parameter(1)");
  TP_RULE(TP_MOD("a = f32[8] parameter(0)\n p = pred[8] parameter(1)\n"
                 " ROOT r = f32[8] select(p, a, a)\n"),
          hlo_pass_algsimp, "ROOT a = f32[8]{0} parameter(0)");
}

static void test_algsimp_shapes(void **state) {
  TP_RULE(TP_MOD("a = f32[2,3,4] parameter(0)\n r1 = f32[6,4] reshape(a)\n ROOT r = f32[24] reshape(r1)\n"),
          hlo_pass_algsimp, "= f32[24]{0} reshape(a)");
  TP_RULE(TP_MOD("a = f32[2,3,4] parameter(0)\n r1 = f32[24] reshape(a)\n ROOT r = f32[2,3,4] reshape(r1)\n"),
          hlo_pass_algsimp, "= f32[2,3,4]{2,1,0} reshape(a)");   /* next round: -> a */
  TP_RULE(TP_MOD("a = f32[2,3,4] parameter(0)\n t1 = f32[3,4,2] transpose(a), dimensions={1,2,0}\n"
                 " ROOT r = f32[2,3,4] transpose(t1), dimensions={2,0,1}\n"),
          hlo_pass_algsimp, "ROOT a = f32[2,3,4]{2,1,0} parameter(0)");
  TP_RULE(TP_MOD("a = f32[2,3,4] parameter(0)\n t1 = f32[3,4,2] transpose(a), dimensions={1,2,0}\n"
                 " ROOT r = f32[4,3,2] transpose(t1), dimensions={1,0,2}\n"),
          hlo_pass_algsimp, "= f32[4,3,2]{2,1,0} transpose(a), dimensions={2,1,0}");
  TP_RULE(TP_MOD("a = f32[3] parameter(0)\n b1 = f32[2,3] broadcast(a), dimensions={1}\n"
                 " ROOT r = f32[4,2,3] broadcast(b1), dimensions={1,2}\n"),
          hlo_pass_algsimp, "= f32[4,2,3]{2,1,0} broadcast(a), dimensions={2}");
  TP_RULE(TP_MOD("a = f32[10] parameter(0)\n s1 = f32[4] slice(a), slice={[2:10:2]}\n"
                 " ROOT r = f32[2] slice(s1), slice={[1:4:2]}\n"),
          hlo_pass_algsimp, "= f32[2]{0} slice(a), slice={[4:9:4]}");
  TP_RULE(TP_MOD("a = f32[10,3] parameter(0)\n ROOT r = f32[10,3] slice(a), slice={[0:10], [0:3]}\n"),
          hlo_pass_algsimp, "ROOT a = f32[10,3]{1,0} parameter(0)");
  TP_RULE(TP_MOD("a = f32[5] parameter(0)\n c = f32[5] convert(a)\n k = f32[5] copy(c)\n"
                 " ROOT r = f32[5] negate(k)\n"),
          hlo_pass_algsimp, "ROOT r = f32[5]{0} negate(a)");
  TP_RULE(TP_MOD("a = f32[5] parameter(0)\n ROOT k = f32[5] copy(a)\n"),   /* root copy stays */
          hlo_pass_algsimp, "ROOT k = f32[5]{0} copy(a)");
  TP_RULE(TP_MOD("a = f32[5] parameter(0)\n c = f32[5] concatenate(a), dimensions={0}\n"
                 " z = f32[] constant(0)\n p = f32[5] pad(c, z), padding=0_0\n"
                 " ROOT r = f32[5] reverse(p), dimensions={}\n"),
          hlo_pass_algsimp, "ROOT a = f32[5]{0} parameter(0)");
  TP_RULE(TP_MOD("s = f32[] parameter(0)\n b = f32[6] broadcast(s), dimensions={}\n"
                 " ROOT r = f32[2,3] reshape(b)\n"),
          hlo_pass_algsimp, "= f32[2,3]{1,0} broadcast(s), dimensions={}");
  TP_RULE(TP_MOD("s = f32[] parameter(0)\n b = f32[2,3] broadcast(s), dimensions={}\n"
                 " t = f32[3,2] transpose(b), dimensions={1,0}\n k = f32[3,2] copy(t)\n"
                 " ROOT r = f32[3,2] negate(k)\n"),
          hlo_pass_algsimp, "ROOT r = f32[3,2]{1,0} negate(broadcast.");
  TP_RULE(TP_MOD("a = f32[2,3] parameter(0)\n b = f32[2,3] broadcast(a), dimensions={0,1}\n"
                 " c = f32[2,3] bitcast(b)\n ROOT r = f32[2,3] transpose(c), dimensions={0,1}\n"),
          hlo_pass_algsimp, "ROOT a = f32[2,3]{1,0} parameter(0)");
  /* layouts differ: reshape to the same dims is not the identity */
  TP_RULE(TP_MOD("a = f32[2,3]{1,0} parameter(0)\n ROOT r = f32[2,3]{0,1} copy(a)\n"),
          hlo_pass_algsimp, "ROOT r = f32[2,3]{0,1} copy(a)");
}

/* ---- constant folding, CSE, tuples, layouts ------------------------------------------------ */

static void test_constant_fold(void **state) {
  hlo_module *m = tp_pass(TP_MOD("a = s32[2] constant({1, 2})\n b = s32[2] constant({2, 3})\n"
                                 " c = s32[2] add(a, b)\n p = s32[2] parameter(0)\n"
                                 " ROOT r = s32[2] multiply(c, p)\n"),
                          hlo_pass_constant_fold, "multiply(");
  assert_int_equal(tp_count_op(m->entry, HLO_OP_ADD), 0);
  char *text = NULL;
  CHECK_OK(tp_ctx, hlo_print_module(m, &text));
  assert_non_null(strstr(text, "constant({3, 5})"));
  free(text);
  hlo_module_free(m);
  /* reduce with its computation folds; broadcast and big results do not */
  m = tp_pass("HloModule m\nadd {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n"
              " ROOT s = f32[] add(x, y)\n}\nENTRY e {\n c = f32[3] constant({1, 2, 4})\n"
              " z = f32[] constant(0)\n s = f32[] reduce(c, z), dimensions={0}, to_apply=add\n"
              " b = f32[2000] broadcast(s), dimensions={}\n i = f32[2000] iota(), iota_dimension=0\n"
              " ROOT r = f32[2000] add(b, i)\n}\n",
              hlo_pass_constant_fold, "ROOT r = f32[2000]{0} add(b, i)");
  assert_int_equal(tp_count_op(m->entry, HLO_OP_REDUCE), 0);
  assert_int_equal(tp_count_op(m->entry, HLO_OP_BROADCAST), 1);
  hlo_module_free(m);
}

static void test_cse(void **state) {
  hlo_module *m = tp_pass(TP_MOD("a = f32[4] parameter(0)\n b = f32[4] parameter(1)\n"
                                 " c1 = f32[] constant(2)\n c2 = f32[] constant(2)\n"
                                 " c3 = f32[] constant(3)\n x = f32[4] broadcast(c1), dimensions={}\n"
                                 " y = f32[4] broadcast(c2), dimensions={}\n"
                                 " w = f32[4] broadcast(c3), dimensions={}\n"
                                 " s1 = f32[4] add(a, x)\n s2 = f32[4] add(a, y)\n s3 = f32[4] add(a, w)\n"
                                 " s4 = f32[4] add(b, x)\n t = f32[4] multiply(s1, s2)\n"
                                 " u = f32[4] multiply(s3, s4)\n ROOT r = f32[4] subtract(t, u)\n"),
                          hlo_pass_cse, "ROOT r = f32[4]{0} subtract(t, u)");
  assert_int_equal(tp_count_op(m->entry, HLO_OP_CONSTANT), 2);
  assert_int_equal(tp_count_op(m->entry, HLO_OP_ADD), 3);
  assert_int_equal(tp_count_op(m->entry, HLO_OP_PARAMETER), 2);
  hlo_pass_ctx pc;
  rt_pass_ctx_init(&pc, tp_ctx);
  bool ch = true;
  CHECK_OK(tp_ctx, hlo_pass_cse(&pc, m, &ch));
  assert_false(ch);
  hlo_module_free(m);
  /* compare directions are attributes: not merged */
  m = tp_pass(TP_MOD("a = f32[4] parameter(0)\n b = f32[4] parameter(1)\n"
                     " p = pred[4] compare(a, b), direction=LT\n q = pred[4] compare(a, b), direction=GT\n"
                     " ROOT r = pred[4] and(p, q)\n"),
              hlo_pass_cse, "ROOT r = pred[4]{0} and(p, q)");
  hlo_module_free(m);
}

static void test_tuple_simplify(void **state) {
  TP_RULE(TP_MOD("a = f32[4] parameter(0)\n b = s32[2] parameter(1)\n t = (f32[4], s32[2]) tuple(a, b)\n"
                 " ROOT g = s32[2] get-tuple-element(t), index=1\n"),
          hlo_pass_tuple_simplify, "ROOT b = s32[2]{0} parameter(1)");
  TP_RULE(TP_MOD("p = (f32[4], s32[2]) parameter(0)\n g0 = f32[4] get-tuple-element(p), index=0\n"
                 " g1 = s32[2] get-tuple-element(p), index=1\n ROOT t = (f32[4], s32[2]) tuple(g0, g1)\n"),
          hlo_pass_tuple_simplify, "ROOT p = (f32[4]{0}, s32[2]{0}) parameter(0)");
  TP_RULE(TP_MOD("p = (f32[4], s32[2]) parameter(0)\n g0 = f32[4] get-tuple-element(p), index=0\n"
                 " g1 = s32[2] get-tuple-element(p), index=1\n ROOT t = (s32[2], f32[4]) tuple(g1, g0)\n"),
          hlo_pass_tuple_simplify, "ROOT t = (s32[2]{0}, f32[4]{0}) tuple(g1, g0)");
}

static void test_layout_norm(void **state) {
  TP_RULE(TP_MOD("a = f32[2,6]{1,0} parameter(0)\n ROOT r = f32[3,4]{1,0} bitcast(a)\n"),
          hlo_pass_layout_norm, "= f32[3,4]{1,0} reshape(a)");
  TP_RULE(TP_MOD("a = f32[2,6]{0,1} parameter(0)\n ROOT r = f32[12]{0} bitcast(a)\n"),
          hlo_pass_layout_norm, "ROOT r = f32[12]{0} bitcast(a)");
  hlo_module *m = tp_pass(TP_MOD("a = f32[2,3,4]{2,1,0} parameter(0)\n"
                                 " ROOT r = f32[2,3,4]{0,2,1} copy(a)\n"),
                          hlo_pass_layout_norm, "= f32[2,3,4]{0,2,1} bitcast(");
  char *text = NULL;
  CHECK_OK(tp_ctx, hlo_print_module(m, &text));
  assert_non_null(strstr(text, "f32[3,4,2]{2,1,0} transpose(a), dimensions={1,2,0}"));
  free(text);
  hlo_module_free(m);
}

/* ---- ir/edit.c ------------------------------------------------------------------------------ */

static void test_ir_edit(void **state) {
  hlo_module *m = tp_parse("HloModule m\nunused {\n ROOT z = f32[] constant(0)\n}\n"
                           "ENTRY e {\n a = f32[4] parameter(0)\n b = f32[4] negate(a)\n"
                           " c = f32[4] abs(b)\n ROOT r = f32[4] add(b, c)\n}\n");
  hlo_comp *c = m->entry;
  hlo_instr *a = c->params[0], *b = c->instrs[1], **us = NULL;
  assert_int_equal(hlo_users(c, b, &us), 2);
  arrfree(us);
  hlo_user_map um;
  hlo_user_map_build(&um, c);
  int n = 0;
  hlo_instr **ub = hlo_user_map_get(&um, b, &n);
  assert_int_equal(n, 2);
  assert_ptr_equal(ub[0], c->instrs[2]);
  assert_null(hlo_user_map_get(&um, c->root, &n));
  hlo_user_map_free(&um);
  /* a new instruction appended at the end and used earlier: topo sort moves it up */
  hlo_instr *e = hlo_instr_new(c, HLO_OP_EXP, "e", &a->shape, &a, 1);
  assert_true(hlo_replace_all_uses(c, b, e) || true);
  assert_int_equal(hlo_user_count(c, b), 0);
  assert_true(hlo_remove_instr(c, b));
  CHECK_OK(tp_ctx, hlo_comp_topo_sort(c));
  assert_ptr_equal(c->instrs[1], e);
  assert_false(hlo_remove_instr(c, c->root));
  assert_false(hlo_remove_instr(c, a));
  CHECK_OK(tp_ctx, hlo_verify_module(m));
  /* inserted before a given instruction */
  hlo_instr *k = hlo_instr_new_before(c, c->root, HLO_OP_NEGATE, "k", &a->shape, &a, 1);
  assert_non_null(k);
  assert_ptr_equal(c->instrs[arrlen(c->instrs) - 2], k);
  hlo_module_free(m);
}

static void test_ir_edit_root_and_prune(void **state) {
  hlo_module *m = tp_parse("HloModule m\nunused {\n ROOT z = f32[] constant(0)\n}\n"
                           "ENTRY e {\n a = f32[4] parameter(0)\n ROOT r = f32[4] negate(a)\n}\n");
  hlo_comp *c = m->entry;
  hlo_instr *old = c->root;
  hlo_instr *k = hlo_instr_new(c, HLO_OP_ABS, "k", &old->shape, &old, 1);
  assert_true(hlo_replace_all_uses(c, old, k));
  assert_ptr_equal(c->root, k);
  assert_true(k->is_root && !old->is_root);
  assert_ptr_equal(k->operands[0], old);          /* the replacement keeps using |old| */
  bool ch = false;
  CHECK_OK(tp_ctx, hlo_comp_dce(c, &ch));
  assert_false(ch);
  CHECK_OK(tp_ctx, hlo_module_prune_comps(m, &ch));
  assert_true(ch);
  assert_int_equal(arrlen(m->comps), 1);
  CHECK_OK(tp_ctx, hlo_verify_module(m));
  hlo_module_free(m);
}

/* ---- the pipeline on real modules --------------------------------------------------------- */

/* Largest array (elements) any instruction of |m| makes: the evaluator runs everything twice. */
static int64_t tp_max_numel(const hlo_module *m) {
  int64_t mx = 0;
  for (ptrdiff_t ci = 0; ci < arrlen(m->comps); ci++)
    for (ptrdiff_t i = 0; i < arrlen(m->comps[ci]->instrs); i++) {
      const hlo_shape **leaves = NULL;
      hlo_shape_leaves(&m->comps[ci]->instrs[i]->shape, &leaves);
      for (ptrdiff_t k = 0; k < arrlen(leaves); k++)
        if (hlo_shape_is_array(leaves[k]) && hlo_shape_numel(leaves[k]) > mx)
          mx = hlo_shape_numel(leaves[k]);
      arrfree(leaves);
    }
  return mx;
}

static int tp_ninstrs(const hlo_module *m) {
  int n = 0;
  for (ptrdiff_t ci = 0; ci < arrlen(m->comps); ci++) n += (int)arrlen(m->comps[ci]->instrs);
  return n;
}

typedef struct tp_stats { int checked, skipped, before, after; } tp_stats;

/* The pipeline (no fusion) on one file: bitwise equal values, CSE and DCE idempotent. */
static void tp_pipeline_file(const char *path, void *user) {
  tp_stats *s = user;
  hlo_module *orig = NULL;
  hj_status st = tu_parse_path(tp_ctx, path, &orig, NULL);
  if (st != HJ_OK || tp_max_numel(orig) > (1 << 24)) {
    printf("  skipped %s: %s\n", path, st != HJ_OK ? hj_ctx_error(tp_ctx) : "too large to evaluate twice");
    if (st == HJ_OK) hlo_module_free(orig);
    s->skipped++;
    return;
  }
  hlo_module *m = hlo_module_clone(orig);
  assert_non_null(m);
  hlo_pass_ctx pc;
  rt_pass_ctx_init(&pc, tp_ctx);
  pc.dump_dir = NULL;
  pc.verify_each = true;
  hlo_pipeline_options opt;
  hlo_pipeline_options_init(&opt);
  opt.fusion = getenv("HLOJIT_TEST_FUSION") != NULL;   /* fusion passes: their own tests */
  st = hlo_run_pipeline(&pc, m, &opt);
  if (st != HJ_OK) fail_msg("%s: %s", path, hj_ctx_error(tp_ctx));
  if (!tp_same_values(orig, m, 2, true, path)) {
    printf("  skipped %s: the evaluator cannot run it: %s\n", path, hj_ctx_error(tp_ctx));
    s->skipped++;
  } else {
    s->checked++;
    s->before += tp_ninstrs(orig);
    s->after += tp_ninstrs(m);
  }
  bool ch = true;
  CHECK_OK(tp_ctx, hlo_pass_cse(&pc, m, &ch));
  if (ch) fail_msg("%s: CSE changed the module a second time", path);
  CHECK_OK(tp_ctx, hlo_pass_dce(&pc, m, &ch));
  if (ch) fail_msg("%s: DCE changed the module a second time", path);
  hlo_module_free(m);
  hlo_module_free(orig);
}

static void test_pipeline_jax_fixtures(void **state) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/fixtures/jax", tu_data_dir());
  tp_stats s = { 0 };
  int n = tu_each_hlo(dir, tp_pipeline_file, &s);
  assert_true(n > 0);
  printf("  pipeline on %d JAX fixtures: %d bitwise equal, %d skipped, instructions %d -> %d\n",
         n, s.checked, s.skipped, s.before, s.after);
  assert_true(s.checked > n / 2);
}

static void test_pipeline_corpus(void **state) {
  tp_stats s = { 0 };
  int n = ftu_each_corpus_hlo(tp_pipeline_file, &s);
  printf("  pipeline on %d corpus modules: %d bitwise equal, %d skipped, instructions %d -> %d\n",
         n, s.checked, s.skipped, s.before, s.after);
}

static void test_pipeline_dumps(void **state) {
  char dir[] = "/tmp/hlojit_passes_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char sub[4200];
  snprintf(sub, sizeof sub, "%s/a/b", dir);   /* created on the way */
  hlo_module *m = tp_parse(TP_MOD("a = f32[4] parameter(0)\n n = f32[4] negate(a)\n"
                                  " ROOT r = f32[4] negate(n)\n"));
  hlo_pass_ctx pc;
  rt_pass_ctx_init(&pc, tp_ctx);
  pc.dump_dir = sub;
  CHECK_OK(tp_ctx, hlo_run_pipeline(&pc, m, NULL));
  assert_true(pc.dump_seq >= 7);
  const char *want[] = { "000.input.txt", "001.inline-calls.txt", "003.tuple-simplify.txt",
                         "004.algsimp.txt" };   /* 002: dynamic-padder */
  for (int i = 0; i < 4; i++) {
    char p[4400];
    snprintf(p, sizeof p, "%s/%s", sub, want[i]);
    char *t = tu_read_file(p, NULL);
    if (!t) fail_msg("missing dump %s", p);
    hlo_module *back = NULL;
    CHECK_OK(tp_ctx, hlo_parse_module(tp_ctx, t, strlen(t), p, &back));
    hlo_module_free(back);
    if (i == 3) assert_non_null(strstr(t, "ROOT a = f32[4]{0} parameter(0)"));
    free(t);
  }
  hlo_module_free(m);
  char cmd[4300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

/* The public entry point runs the whole pipeline (fusion too, when it is built in): the
   multiply by one is gone wherever the body ended up, and the values are the same. */
static void test_optimize_api(void **state) {
  const char *t = TP_MOD("a = f32[64] parameter(0)\n o = f32[] constant(1)\n"
                         " b = f32[64] broadcast(o), dimensions={}\n m = f32[64] multiply(a, b)\n"
                         " ROOT r = f32[64] negate(m)\n");
  hj_module_t *m = NULL, *orig = NULL;
  CHECK_OK(tp_ctx, hj_module_parse(tp_ctx, t, strlen(t), "t", &m));
  CHECK_OK(tp_ctx, hj_module_parse(tp_ctx, t, strlen(t), "t", &orig));
  CHECK_OK(tp_ctx, hj_module_optimize(m));
  for (ptrdiff_t ci = 0; ci < arrlen(m->comps); ci++)
    assert_int_equal(tp_count_op(m->comps[ci], HLO_OP_MULTIPLY), 0);
  assert_true(tp_same_values(orig, m, 4, true, "hj_module_optimize"));
  hj_module_destroy(m);
  hj_module_destroy(orig);
  assert_int_equal(hj_module_optimize(NULL), HJ_ERR_INVALID_ARG);
}

static int tp_setup(void **state) {
  tp_ctx = tu_ctx();
  return 0;
}

static int tp_teardown(void **state) {
  hj_ctx_destroy(tp_ctx);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_algsimp_add_sub),
    cmocka_unit_test(test_algsimp_mul_div),
    cmocka_unit_test(test_algsimp_unary_logic_select),
    cmocka_unit_test(test_algsimp_shapes),
    cmocka_unit_test(test_constant_fold),
    cmocka_unit_test(test_cse),
    cmocka_unit_test(test_tuple_simplify),
    cmocka_unit_test(test_layout_norm),
    cmocka_unit_test(test_ir_edit),
    cmocka_unit_test(test_ir_edit_root_and_prune),
    cmocka_unit_test(test_pipeline_dumps),
    cmocka_unit_test(test_optimize_api),
    cmocka_unit_test(test_pipeline_jax_fixtures),
    cmocka_unit_test(test_pipeline_corpus),
  };
  return cmocka_run_group_tests(tests, tp_setup, tp_teardown);
}
