/* test_alias_text.c — the module's input_output_alias (ir/alias.c) in HLO text
   (text/parse_header.c, print.c) and in the verifier.

   The header forms are XLA's (HloModule::ToString / HloParser::ParseAliasing): what JAX
   0.10 prints for `jax.jit(f, donate_argnums=0)` is parsed, printed back byte for byte,
   and round-trips; the kind may be absent (may-alias), and tuple shape indices on both
   sides map to the flattened leaves hj_exec_run counts. Errors: syntax at a line:column
   with a caret; entries that name no array leaf, differ in size or repeat an output or a
   parameter are refused by the verifier, pointing at the attribute. */
#include "testutil.h"

/* What JAX printed for f(c, u, i) = (dynamic_update_slice(c, u, (i, 0)), sum(c)),
   donate_argnums=0 (the body shortened). */
static const char ta_jax[] =
  "HloModule jit_f, input_output_alias={ {0}: (0, {}, may-alias) }, entry_computation_layout="
  "{(f32[8,4]{1,0}, f32[1,4]{1,0}, s32[])->(f32[8,4]{1,0}, f32[])}\n"
  "\n"
  "region_0.1 {\n"
  "  a = f32[] parameter(0)\n"
  "  b = f32[] parameter(1)\n"
  "  ROOT s = f32[] add(a, b)\n"
  "}\n"
  "\n"
  "ENTRY main.2 {\n"
  "  c.1 = f32[8,4]{1,0} parameter(0)\n"
  "  u.1 = f32[1,4]{1,0} parameter(1)\n"
  "  i.1 = s32[] parameter(2)\n"
  "  constant.5 = s32[] constant(0)\n"
  "  dynamic_update_slice.1 = f32[8,4]{1,0} dynamic-update-slice(c.1, u.1, i.1, constant.5)\n"
  "  constant.3 = f32[] constant(0)\n"
  "  reduce_sum.7 = f32[] reduce(c.1, constant.3), dimensions={0,1}, to_apply=region_0.1\n"
  "  ROOT tuple.1 = (f32[8,4]{1,0}, f32[]) tuple(dynamic_update_slice.1, reduce_sum.7)\n"
  "}\n";

static hlo_module *tat_parse(hj_ctx_t *ctx, const char *text) {
  hlo_module *m = NULL;
  CHECK_OK(ctx, hlo_parse_module(ctx, text, strlen(text), "<t>", &m));
  return m;
}

static char *tat_print(hlo_module *m) {
  char *s = NULL;
  CHECK_OK(m->ctx, hlo_print_module(m, &s));
  return s;
}

static void test_jax_header_round_trip(void **state) {
  (void)state;
  hj_ctx_t *ctx = tu_ctx();
  hlo_module *m = tat_parse(ctx, ta_jax);
  assert_int_equal(m->naliases, 1);
  assert_int_equal(m->aliases[0].param, 0);
  assert_int_equal(m->aliases[0].output.n, 1);
  assert_int_equal(m->aliases[0].output.v[0], 0);
  assert_int_equal(m->aliases[0].param_index.n, 0);
  assert_false(m->aliases[0].must);
  int o, i;
  assert_true(hlo_alias_flat(m, 0, &o, &i));
  assert_int_equal(o, 0);
  assert_int_equal(i, 0);
  assert_int_equal(hlo_module_output_alias(m, 0), 0);
  assert_int_equal(hlo_module_output_alias(m, 1), -1);
  char *s = tat_print(m);
  const char *want = "HloModule jit_f, input_output_alias={ {0}: (0, {}, may-alias) }, "
                     "entry_computation_layout={(f32[8,4]{1,0}, f32[1,4]{1,0}, s32[])->"
                     "(f32[8,4]{1,0}, f32[])}\n";
  if (strncmp(s, want, strlen(want)) != 0) fail_msg("header:\n%.300s", s);
  /* parse(print) prints the same; a clone keeps the aliases */
  hlo_module *m2 = tat_parse(ctx, s), *m3 = hlo_module_clone(m2);
  char *s2 = tat_print(m2), *s3 = tat_print(m3);
  assert_string_equal(s, s2);
  assert_string_equal(s, s3);
  free(s);
  free(s2);
  free(s3);
  hlo_module_free(m);
  hlo_module_free(m2);
  hlo_module_free(m3);
  hj_ctx_destroy(ctx);
}

/* Tuple indices on both sides; kinds; the printed order is the output order whatever the
   text's. */
static void test_tuple_indices_and_kinds(void **state) {
  (void)state;
  hj_ctx_t *ctx = tu_ctx();
  const char *text =
    "HloModule t, input_output_alias={ {1,1}: (1, {}), {0}: (0, {1}, must-alias) }\n"
    "ENTRY e {\n"
    "  p = (f32[2], f32[3]) parameter(0)\n"
    "  q = s32[4] parameter(1)\n"
    "  a = f32[3] get-tuple-element(p), index=1\n"
    "  b = f32[2] get-tuple-element(p), index=0\n"
    "  inner = (f32[2], s32[4]) tuple(b, q)\n"
    "  ROOT r = (f32[3], (f32[2], s32[4])) tuple(a, inner)\n"
    "}\n";
  hlo_module *m = tat_parse(ctx, text);
  assert_int_equal(m->naliases, 2);
  int o, i;
  assert_true(hlo_alias_flat(m, 0, &o, &i));   /* {0} -> p{1}: output leaf 0, input leaf 1 */
  assert_int_equal(o, 0);
  assert_int_equal(i, 1);
  assert_true(hlo_alias_flat(m, 1, &o, &i));   /* {1,1} -> q: output leaf 2, input leaf 2 */
  assert_int_equal(o, 2);
  assert_int_equal(i, 2);
  char *s = tat_print(m);
  if (!strstr(s, "input_output_alias={ {0}: (0, {1}, must-alias), {1,1}: (1, {}, may-alias) }"))
    fail_msg("printed:\n%.400s", s);
  free(s);
  int64_t idx[HLO_MAX_SHAPE_INDEX];
  assert_int_equal(hlo_leaf_shape_index(&m->entry->root->shape, 2, idx), 2);
  assert_int_equal(idx[0], 1);
  assert_int_equal(idx[1], 1);
  assert_int_equal(hlo_leaf_shape_index(&m->entry->root->shape, 3, idx), -1);
  hlo_module_free(m);
  hj_ctx_destroy(ctx);
}

/* Parse and verify |text|; the error must be |code| and mention |part| (and, for syntax
   errors, |linecol|). */
static void tat_fails(const char *text, hj_status code, const char *linecol, const char *part) {
  hj_ctx_t *ctx = tu_ctx();
  hlo_module *m = NULL;
  hj_status st = hlo_parse_module(ctx, text, strlen(text), "<t>", &m);
  if (st != code) fail_msg("got %s (%s), want %s", hj_status_name(st), hj_ctx_error(ctx), hj_status_name(code));
  assert_null(m);
  const char *msg = hj_ctx_error(ctx);
  if (!strstr(msg, part)) fail_msg("message \"%s\" lacks \"%s\"", msg, part);
  if (linecol && !strstr(msg, linecol)) fail_msg("message \"%s\" lacks \"%s\"", msg, linecol);
  if (!strrchr(msg, '^')) fail_msg("message \"%s\" has no caret", msg);
  hj_ctx_destroy(ctx);
}

#define TAT_BODY                                                                            \
  "ENTRY e {\n  p = f32[4] parameter(0)\n  q = s32[2] parameter(1)\n"                      \
  "  n = f32[4] negate(p)\n  ROOT r = (f32[4], s32[2]) tuple(n, q)\n}\n"

static void test_errors(void **state) {
  (void)state;
  tat_fails("HloModule t, input_output_alias={ {0} (0, {}) }\n" TAT_BODY, HJ_ERR_PARSE,
            "<t>:1:39:", "expected ':'");
  tat_fails("HloModule t, input_output_alias={ {0}: (0, {}, maybe) }\n" TAT_BODY, HJ_ERR_PARSE,
            "<t>:1:48:", "'may-alias' or 'must-alias'");
  tat_fails("HloModule t, input_output_alias={ {0}: (-1, {}) }\n" TAT_BODY, HJ_ERR_PARSE,
            "<t>:1:41:", "parameter number out of range");
  tat_fails("HloModule t, input_output_alias={ {0}: (0, {}), {0}: (1, {}) }\n" TAT_BODY,
            HJ_ERR_PARSE, "<t>:1:49:", "already aliases parameter 0");
  /* the verifier's: pointed at the attribute */
  tat_fails("HloModule t, input_output_alias={ {2}: (0, {}) }\n" TAT_BODY, HJ_ERR_SHAPE,
            "<t>:1:14:", "output {2} is not an array");
  tat_fails("HloModule t, input_output_alias={ {0}: (5, {}) }\n" TAT_BODY, HJ_ERR_SHAPE,
            "<t>:1:14:", "parameter 5 at {} is not an array parameter leaf");
  tat_fails("HloModule t, input_output_alias={ {0}: (0, {0}) }\n" TAT_BODY, HJ_ERR_SHAPE, NULL,
            "parameter 0 at {0} is not");
  tat_fails("HloModule t, input_output_alias={ {1}: (0, {}) }\n" TAT_BODY, HJ_ERR_SHAPE, NULL,
            "output {1} (s32[2]) and parameter 0 at {} (f32[4]) differ in size");
  tat_fails("HloModule t, input_output_alias={ {0}: (0, {}), {1}: (0, {}) }\n"
            "ENTRY e {\n  p = f32[4] parameter(0)\n  n = f32[4] negate(p)\n"
            "  ROOT r = (f32[4], f32[4]) tuple(n, p)\n}\n",
            HJ_ERR_SHAPE, NULL, "parameter {} appears twice");
  /* the same bytes with other dims is XLA's rule too: accepted */
  hj_ctx_t *ctx = tu_ctx();
  hlo_module *m = tat_parse(ctx, "HloModule t, input_output_alias={ {} : (0, {}) }\n"
                                 "ENTRY e {\n  p = f32[4] parameter(0)\n"
                                 "  ROOT r = s32[2,2] bitcast-convert(f32[2,2] reshape(p))\n}\n");
  assert_int_equal(m->naliases, 1);
  hlo_module_free(m);
  hj_ctx_destroy(ctx);
}

/* A module without aliases prints no attribute (the XLA corpus round trip covers the
   rest). */
static void test_absent(void **state) {
  (void)state;
  hj_ctx_t *ctx = tu_ctx();
  hlo_module *m = tat_parse(ctx, "HloModule t, input_output_alias={ }\n" TAT_BODY);
  char *s = tat_print(m);
  assert_null(strstr(s, "input_output_alias"));
  free(s);
  hlo_module_free(m);
  hj_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_jax_header_round_trip),
    cmocka_unit_test(test_tuple_indices_and_kinds),
    cmocka_unit_test(test_errors),
    cmocka_unit_test(test_absent),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
