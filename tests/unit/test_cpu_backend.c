/* test_cpu_backend.c — the CPU backend's pipeline, piece by piece: ir_clone (every module
   of the corpus and the JAX fixtures prints the same after a deep copy), inline_calls,
   wrap_fusions, buffer assignment (slot sharing, aliases, output copies, dynamic-update-slice
   and elementwise kernels in place) and the backend's dumps and backend choice. Pass results
   are checked against hand-written expectations and against the reference evaluator on the
   module before the pass, bit for bit; in-place runs must equal the evaluator bit for bit,
   the in-place dynamic-update-slice within 1e-6 relative + 1e-7. Whole modules, the corpus,
   determinism and compile latency are in test_cpu_modules.c. */
#include "testutil.h"
#include "cpu_testutil.h"
#include "hlojit_impl/emitters/emit.h"
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------------------------ */

static char *cb_print(const hlo_module *m) {
  char *t = NULL;
  CHECK_OK(m->ctx, hlo_print_module(m, &t));
  return t;
}

/* ---- ir_clone ------------------------------------------------------------------------------- */

static void test_clone_prints_the_same(void **state) {
  hj_ctx_t *ctx = tu_ctx();
  char jax[1024];
  snprintf(jax, sizeof jax, "%s/fixtures/jax", tu_data_dir());
  const char *dirs[] = { cb_corpus_dir(), jax };
  const int min_modules[] = { 40, 30 };   /* 56 and 38 today */
  for (int d = 0; d < 2; d++) {
    char **files = cb_list(dirs[d]);
    if (!files && d == 0) {
      print_message("corpus part skipped: no HLO corpus at %s\n", dirs[d]);
      continue;
    }
    int n = 0;
    for (ptrdiff_t i = 0; i < arrlen(files); i++) {
      hj_module_t *m = NULL;
      if (hj_module_parse_file(ctx, files[i], &m) != HJ_OK) continue;
      char *a = cb_print(m);
      hlo_module *c = hlo_module_clone(m);
      assert_non_null(c);
      hj_module_destroy(m);                       /* the clone must not share anything */
      char *b = cb_print(c);
      if (strcmp(a, b)) fail_msg("clone of %s prints differently", files[i]);
      CHECK_OK(ctx, hlo_verify_module(c));
      free(a);
      free(b);
      hlo_module_free(c);
      n++;
    }
    cb_free_list(files);
    print_message("cloned %d modules of %s\n", n, dirs[d]);
    if (n < min_modules[d]) {
      hj_ctx_destroy(ctx);
      fail_msg("only %d modules of %s cloned (expected at least %d)", n, dirs[d], min_modules[d]);
    }
  }
  hj_ctx_destroy(ctx);
}

/* ---- passes ----------------------------------------------------------------------------------- */

/* The module's results on the evaluator before and after |pass| are the same bits. */
static void cb_same_results(hj_ctx_t *ctx, hlo_module *before, hlo_module *after) {
  hj_buffer_t **in = cb_inputs(ctx, before, 7);
  hj_buffer_t **r0 = cb_run(ctx, before, in, NULL), **r1 = cb_run(ctx, after, in, NULL);
  int nout = hj_module_num_outputs(before);
  for (int k = 0; k < nout; k++)
    assert_memory_equal(hj_buffer_host_ptr(r0[k]), hj_buffer_host_ptr(r1[k]), hj_buffer_nbytes(r0[k]));
  cb_free_bufs(r0, nout);
  cb_free_bufs(r1, nout);
  cb_free_bufs(in, hj_module_num_inputs(before));
}

static const char cb_inline_text[] =
  "HloModule inl\n"
  "sq {\n  p = f32[4] parameter(0)\n  ROOT m = f32[4] multiply(p, p)\n}\n"
  "sq_plus {\n  a = f32[4] parameter(0)\n  b = f32[4] parameter(1)\n"
  "  c = f32[4] call(a), to_apply=sq\n  ROOT s = f32[4] add(c, b)\n}\n"
  "ENTRY main {\n  x = f32[4] parameter(0)\n  y = f32[4] parameter(1)\n"
  "  r = f32[4] call(x, y), to_apply=sq_plus\n  ROOT t = f32[4] subtract(r, x)\n}\n";

static void test_inline_calls(void **state) {
  hj_ctx_t *ctx = tu_ctx();
  hlo_module *m = cb_parse(ctx, cb_inline_text), *c = hlo_module_clone(m);
  bool ch = false;
  CHECK_OK(ctx, hlo_pass_inline_calls(NULL, c, &ch));
  assert_true(ch);
  CHECK_OK(ctx, hlo_verify_module(c));
  char *t = cb_print(c);
  assert_null(strstr(t, "call("));
  assert_int_equal(arrlen(c->comps), 1);                  /* sq and sq_plus are gone */
  const hlo_comp *e = c->entry;
  assert_int_equal(arrlen(e->instrs), 5);                 /* x y multiply add subtract */
  assert_int_equal(e->instrs[2]->op, HLO_OP_MULTIPLY);
  assert_ptr_equal(e->instrs[2]->operands[0], e->params[0]);
  assert_ptr_equal(e->instrs[2]->operands[1], e->params[0]);
  assert_int_equal(e->instrs[3]->op, HLO_OP_ADD);
  assert_ptr_equal(e->instrs[3]->operands[1], e->params[1]);
  assert_ptr_equal(e->root->operands[0], e->instrs[3]);
  cb_same_results(ctx, m, c);
  free(t);
  hlo_module_free(c);
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
}

static const char cb_wrap_text[] =
  "HloModule wrap\n"
  "add_f {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
  "ENTRY main {\n  x = f32[4,8] parameter(0)\n  w = f32[8,3] parameter(1)\n"
  "  c = f32[] constant(0)\n  e = f32[4,8] exponential(x)\n"
  "  d = f32[4,3] dot(e, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
  "  r = f32[4] reduce(e, c), dimensions={1}, to_apply=add_f\n  rs = f32[2,2] reshape(r)\n"
  "  t = (f32[4,3], f32[2,2]) tuple(d, rs)\n  g = f32[4,3] get-tuple-element(t), index=0\n"
  "  m = f32[4,8] multiply(e, e)\n"
  "  ROOT out = (f32[4,3], f32[2,2], f32[4,8]) tuple(g, rs, m)\n}\n";

static void test_wrap_fusions(void **state) {
  hj_ctx_t *ctx = tu_ctx();
  hlo_module *m = cb_parse(ctx, cb_wrap_text), *c = hlo_module_clone(m);
  bool ch = false;
  CHECK_OK(ctx, hlo_pass_wrap_fusions(NULL, c, &ch));
  assert_true(ch);
  CHECK_OK(ctx, hlo_verify_module(c));
  char *t = cb_print(c);
  const char *want[] = {
    "wrapped_e = f32[4,8]{1,0} fusion(x), kind=kLoop, calls=wrapped_e_computation",
    "wrapped_d = f32[4,3]{1,0} fusion(wrapped_e, w), kind=kOutput, calls=wrapped_d_computation",
    "wrapped_r = f32[4]{0} fusion(wrapped_e, c), kind=kInput, calls=wrapped_r_computation",
    "rs = f32[2,2]{1,0} reshape(wrapped_r)",
    "t = (f32[4,3]{1,0}, f32[2,2]{1,0}) tuple(wrapped_d, rs)",
    "g = f32[4,3]{1,0} get-tuple-element(t), index=0",
    "wrapped_m = f32[4,8]{1,0} fusion(wrapped_e), kind=kLoop, calls=wrapped_m_computation",
    "ROOT m = f32[4,8]{1,0} multiply(param_0",             /* the operand used twice: one param */
    "c = f32[] constant(0)",
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (!strstr(t, want[i])) fail_msg("missing '%s' in:\n%s", want[i], t);
  /* fused computations come before the entry (callees first) */
  assert_true(strstr(t, "wrapped_m_computation {") < strstr(t, "ENTRY main"));
  cb_same_results(ctx, m, c);
  ch = true;
  CHECK_OK(ctx, hlo_pass_wrap_fusions(NULL, c, &ch));                /* idempotent */
  assert_false(ch);
  free(t);
  hlo_module_free(c);
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
}

/* ---- buffer assignment ------------------------------------------------------------------------ */

/* Parses |text|, wraps it, and assigns the entry's buffers. */
static hlo_module *cb_plan(hj_ctx_t *ctx, const char *text, ba_plan *p) {
  hlo_module *m = cb_parse(ctx, text);
  bool ch;
  CHECK_OK(ctx, hlo_pass_wrap_fusions(NULL, m, &ch));
  CHECK_OK(ctx, ba_assign(ctx, m->entry, NULL, p));
  return m;
}

static const ba_loc *cb_loc(const ba_plan *p, const char *name, int leaf) {
  for (ptrdiff_t i = 0; i < arrlen(p->comp->instrs); i++)
    if (!strcmp(p->comp->instrs[i]->name, name)) return &p->leaves[i][leaf];
  fail_msg("no instruction '%s'", name);
  return NULL;
}

static void test_buffer_chain_peak(void **state) {
  hj_ctx_t *ctx = tu_ctx();
  ba_plan p;
  hlo_module *m = cb_plan(ctx,
    "HloModule chain\nENTRY main {\n  p = f32[1024] parameter(0)\n  a = f32[1024] exponential(p)\n"
    "  b = f32[1024] negate(a)\n  c = f32[1024] sine(b)\n  ROOT d = f32[1024] cosine(c)\n}\n", &p);
  assert_int_equal(p.arena_bytes, 8192);                   /* a and c share a slot */
  assert_int_equal(p.values_bytes, 12288);
  const ba_loc *a = cb_loc(&p, "wrapped_a", 0), *b = cb_loc(&p, "wrapped_b", 0), *c = cb_loc(&p, "wrapped_c", 0);
  assert_int_equal(a->where, BA_ARENA);
  assert_int_equal(c->where, BA_ARENA);
  assert_int_equal(a->index, c->index);
  assert_true(b->index != a->index);
  assert_int_equal(cb_loc(&p, "wrapped_d", 0)->where, BA_OUTPUT);
  assert_int_equal(cb_loc(&p, "p", 0)->where, BA_PARAM);
  assert_int_equal(a->index % 64, 0);
  assert_int_equal(b->index % 64, 0);
  char *sb = NULL;
  ba_plan_print(&p, &sb);
  assert_non_null(strstr(sb, "arena 8192 bytes peak"));
  arrfree(sb);
  ba_plan_free(&p);
  hlo_module_free(m);
  hj_ctx_destroy(ctx);
}

static void test_buffer_aliases(void **state) {
  hj_ctx_t *ctx = tu_ctx();
  ba_plan p;
  hlo_module *m = cb_plan(ctx,
    "HloModule alias\nENTRY main {\n  p = f32[16] parameter(0)\n  a = f32[16] exponential(p)\n"
    "  r = f32[4,4] reshape(a)\n  t = (f32[4,4], f32[16]) tuple(r, p)\n"
    "  g0 = f32[4,4] get-tuple-element(t), index=0\n  g1 = f32[16] get-tuple-element(t), index=1\n"
    "  k = f32[2] constant({1, 2})\n"
    "  ROOT o = (f32[4,4], f32[16], f32[2], f32[4,4]) tuple(g0, g1, k, r)\n}\n", &p);
  assert_int_equal(cb_loc(&p, "wrapped_a", 0)->where, BA_OUTPUT);
  assert_int_equal(cb_loc(&p, "wrapped_a", 0)->index, 0);
  assert_int_equal(cb_loc(&p, "r", 0)->where, BA_OUTPUT);
  assert_int_equal(cb_loc(&p, "g0", 0)->where, BA_OUTPUT);
  assert_int_equal(cb_loc(&p, "t", 1)->where, BA_PARAM);
  assert_int_equal(cb_loc(&p, "g1", 0)->where, BA_PARAM);
  assert_int_equal(cb_loc(&p, "k", 0)->where, BA_CONST);
  assert_int_equal(p.arena_bytes, 0);
  /* output 1 is a parameter, 2 a constant, 3 a repeat of output 0: three copies */
  assert_int_equal(arrlen(p.copies), 3);
  assert_int_equal(p.copies[0].out, 1);
  assert_int_equal(p.copies[0].src.where, BA_PARAM);
  assert_int_equal(p.copies[1].src.where, BA_CONST);
  assert_int_equal(p.copies[2].src.where, BA_OUTPUT);
  assert_int_equal(p.copies[2].src.index, 0);
  ba_plan_free(&p);
  hlo_module_free(m);
  /* the same module runs on the CPU backend like on the evaluator */
  hj_ctx_t *cpu = cb_ctx(HJ_BACKEND_CPU, 0, NULL);
  m = cb_parse(cpu,
    "HloModule alias\nENTRY main {\n  p = f32[16] parameter(0)\n  a = f32[16] exponential(p)\n"
    "  r = f32[4,4] reshape(a)\n  t = (f32[4,4], f32[16]) tuple(r, p)\n"
    "  g0 = f32[4,4] get-tuple-element(t), index=0\n  g1 = f32[16] get-tuple-element(t), index=1\n"
    "  k = f32[2] constant({1, 2})\n"
    "  ROOT o = (f32[4,4], f32[16], f32[2], f32[4,4]) tuple(g0, g1, k, r)\n}\n");
  hj_buffer_t **in = cb_inputs(cpu, m, 3), **o = cb_run(cpu, m, in, NULL);
  float *x = hj_buffer_host_ptr(in[0]), *o0 = hj_buffer_host_ptr(o[0]), *o1 = hj_buffer_host_ptr(o[1]);
  float *o2 = hj_buffer_host_ptr(o[2]), *o3 = hj_buffer_host_ptr(o[3]);
  for (int i = 0; i < 16; i++) {
    assert_float_equal(o0[i], expf(x[i]), 1e-6 * (1 + fabsf(o0[i])));
    assert_true(o1[i] == x[i] && o3[i] == o0[i]);
  }
  assert_true(o2[0] == 1 && o2[1] == 2);
  cb_free_bufs(o, 4);
  cb_free_bufs(in, 1);
  hj_module_destroy(m);
  hj_ctx_destroy(cpu);
  hj_ctx_destroy(ctx);
}

static const char *cb_dus_fmt =
  "HloModule dus\nENTRY main {\n  p = f32[8,4] parameter(0)\n  u = f32[1,4] parameter(1)\n"
  "  i = s32[] parameter(2)\n  z = s32[] constant(0)\n  a = f32[8,4] exponential(p)\n"
  "  d = f32[8,4] dynamic-update-slice(%s, u, i, z)\n  ROOT n = %s\n}\n";

static bool cb_dus_inplace(hj_ctx_t *ctx, const char *operand, const char *root) {
  char text[1024];
  snprintf(text, sizeof text, cb_dus_fmt, operand, root);
  ba_plan p;
  hlo_module *m = cb_plan(ctx, text, &p);
  int k = -1;
  for (ptrdiff_t i = 0; i < arrlen(m->entry->instrs); i++)
    if (!strcmp(m->entry->instrs[i]->name, "wrapped_d")) k = (int)i;
  assert_true(k >= 0);
  bool r = p.dus_inplace[k];
  if (r) assert_int_equal(p.leaves[k][0].index, cb_loc(&p, "wrapped_a", 0)->index);
  ba_plan_free(&p);
  hlo_module_free(m);
  return r;
}

static void test_buffer_dus_inplace(void **state) {
  hj_ctx_t *ctx = tu_ctx();
  assert_true(cb_dus_inplace(ctx, "a", "f32[8,4] negate(d)"));                 /* a dies at d */
  assert_false(cb_dus_inplace(ctx, "a", "(f32[8,4], f32[8,4]) tuple(d, a)")); /* a lives on */
  assert_false(cb_dus_inplace(ctx, "p", "f32[8,4] negate(d)"));              /* a parameter */
  assert_true(cb_dus_inplace(ctx, "a", "f32[8,4] copy(d)"));
  /* and in place it computes what the evaluator computes */
  char text[1024];
  snprintf(text, sizeof text, cb_dus_fmt, "a", "f32[8,4] negate(d)");
  hj_ctx_t *cpu = cb_ctx(HJ_BACKEND_CPU, 0, NULL);
  hlo_module *m = cb_parse(cpu, text);
  hj_buffer_t **in = cb_inputs(cpu, m, 5);
  *(int32_t *)hj_buffer_host_ptr(in[2]) = 3;
  hj_buffer_t **o = cb_run(cpu, m, in, NULL), **r = cb_run(ctx, m, in, NULL);
  char why[256];
  if (!cb_close(o[0], r[0], 1e-6, 1e-7, 0, why, sizeof why)) fail_msg("dus in place: %s", why);
  cb_free_bufs(o, 1);
  cb_free_bufs(r, 1);
  cb_free_bufs(in, 3);
  hj_module_destroy(m);
  hj_ctx_destroy(cpu);
  hj_ctx_destroy(ctx);
}

/* A decode step's cache updates: the query slice and the k and v updates of one qkv row.
   Unfused (|fused| false), the pipeline's fusion and sibling fusion must make them one dus
   kernel; given fused, buffer assignment must put leaves 1 and 2 in place, over the donated
   caches (|donate|) or over arena values that die there. */
static char *cb_kv_text(bool fused, bool donate) {
  char *t = NULL;
  sb_printf(&t, "HloModule kv%s\n", donate ? ", input_output_alias={ {1}: (1, {}), {2}: (2, {}) }" : "");
  const char *body =
    "  z = s32[] constant(0)\n"
    "  q = f32[1,32] slice(qkv), slice={[0:1], [0:32]}\n"
    "  ks = f32[1,32] slice(qkv), slice={[0:1], [32:64]}\n  k = f32[4,8,1] reshape(ks)\n"
    "  vs = f32[1,32] slice(qkv), slice={[0:1], [64:96]}\n  v = f32[4,1,8] reshape(vs)\n"
    "  dk = f32[4,8,64] dynamic-update-slice(kc, k, z, z, t)\n"
    "  dv = f32[4,64,8] dynamic-update-slice(vc, v, z, t, z)\n";
  const char *params =
    "  kc = f32[4,8,64] parameter(1)\n  vc = f32[4,64,8] parameter(2)\n  t = s32[] parameter(3)\n";
  const char *shape = "(f32[1,32], f32[4,8,64], f32[4,64,8])";
  if (fused) {
    sb_printf(&t, "fused {\n  qkv = f32[1,96] parameter(0)\n%s%s  ROOT r = %s tuple(q, dk, dv)\n}\n",
              params, body, shape);
    sb_printf(&t, "ENTRY main {\n  x = f32[1,96] parameter(0)\n  pk = f32[4,8,64] parameter(1)\n"
                  "  pv = f32[4,64,8] parameter(2)\n  t = s32[] parameter(3)\n"
                  "  qkv = f32[1,96] exponential(x)\n");
    if (donate) sb_printf(&t, "  ROOT f = %s fusion(qkv, pk, pv, t), kind=kLoop, calls=fused\n}\n", shape);
    else sb_printf(&t, "  kc = f32[4,8,64] negate(pk)\n  vc = f32[4,64,8] negate(pv)\n"
                       "  ROOT f = %s fusion(qkv, kc, vc, t), kind=kLoop, calls=fused\n}\n", shape);
  } else {
    sb_printf(&t, "ENTRY main {\n  x = f32[1,96] parameter(0)\n%s  qkv = f32[1,96] exponential(x)\n%s"
                  "  ROOT r = %s tuple(q, dk, dv)\n}\n", params, body, shape);
  }
  return t;
}

static void test_buffer_dus_siblings(void **state) {
  hj_ctx_t *ctx = tu_ctx();
  for (int donate = 0; donate < 2; donate++) {
    char *t = cb_kv_text(true, donate);
    ba_plan p;
    hlo_module *m = cb_plan(ctx, t, &p);
    int k = ba_instr_pos(&p, m->entry->root);
    assert_true(k >= 0);
    assert_int_equal(p.dus_inplace[k], 6);   /* leaves 1 and 2, not the query */
    if (donate) {
      assert_int_equal(p.leaves[k][1].where, BA_OUTPUT);
      assert_int_equal(p.leaves[k][2].where, BA_OUTPUT);
      assert_int_equal(arrlen(p.copies), 0);
    } else {
      assert_int_equal(p.leaves[k][1].index, cb_loc(&p, "wrapped_kc", 0)->index);
      assert_int_equal(p.leaves[k][2].index, cb_loc(&p, "wrapped_vc", 0)->index);
    }
    ba_plan_free(&p);
    hlo_module_free(m);
    arrfree(t);
  }
  /* through the whole pipeline: one dus kernel, the evaluator's results, caches donated or
     not, every position (63 and 99 clamp to the last) */
  for (int donate = 0; donate < 2; donate++) {
    char *t = cb_kv_text(false, donate);
    hj_ctx_t *cpu = cb_ctx(HJ_BACKEND_CPU, 2, NULL);
    hlo_module *m = cb_parse(cpu, t);
    const int pos[] = { 0, 17, 63, 99 };
    for (int i = 0; i < 4; i++) {
      hj_buffer_t **in = cb_inputs(cpu, m, 11 + i);
      *(int32_t *)hj_buffer_host_ptr(in[3]) = pos[i];
      hj_exec_stats_t st;
      hj_buffer_t **o = cb_run(cpu, m, in, &st), **r = cb_run(ctx, m, in, NULL);
      assert_int_equal(st.kernels_dus, 1);
      assert_int_equal(st.kernels_loop + st.kernels_dus, 2);   /* the exponential, and it */
      assert_int_equal(st.inplace_updates, donate ? 2 : 0);    /* else the caches are read */
      assert_int_equal(st.evaluator_fallbacks, 0);
      char why[256];
      for (int j = 0; j < 3; j++)
        if (!cb_close(o[j], r[j], 1e-6, 0, 0, why, sizeof why))   /* exp: emit_math vs libm */
          fail_msg("kv updates, donate %d, pos %d, output %d: %s", donate, pos[i], j, why);
      cb_free_bufs(o, 3);
      cb_free_bufs(r, 3);
      cb_free_bufs(in, 4);
    }
    hj_module_destroy(m);
    hj_ctx_destroy(cpu);
    arrfree(t);
  }
  hj_ctx_destroy(ctx);
}

/* A fusion given the cache twice, once through a view (a reshape shares its buffer): the
   update may not go in place, or the exponential would read a row the update overwrote.
   The fusion is as XLA could dump it (the pipeline keeps a given fusion). */
static void test_buffer_dus_view(void **state) {
  static const char text[] =
    "HloModule dus_view\n"
    "fused {\n  p0 = f32[4,8] parameter(0)\n  p1 = f32[32] parameter(1)\n"
    "  u = f32[1,8] parameter(2)\n  i = s32[] parameter(3)\n  z = s32[] constant(0)\n"
    "  d = f32[4,8] dynamic-update-slice(p0, u, i, z)\n  e = f32[32] exponential(p1)\n"
    "  ROOT r = (f32[4,8], f32[32]) tuple(d, e)\n}\n"
    "ENTRY main {\n  k0 = f32[4,8] parameter(0)\n  u = f32[1,8] parameter(1)\n"
    "  i = s32[] parameter(2)\n  kc = f32[4,8] negate(k0)\n  b = f32[32] reshape(kc)\n"
    "  ROOT f = (f32[4,8], f32[32]) fusion(kc, b, u, i), kind=kLoop, calls=fused\n}\n";
  hj_ctx_t *ctx = tu_ctx();
  ba_plan p;
  hlo_module *m = cb_plan(ctx, text, &p);
  assert_int_equal(p.dus_inplace[ba_instr_pos(&p, m->entry->root)], 0);
  ba_plan_free(&p);
  hlo_module_free(m);
  hj_ctx_t *cpu = cb_ctx(HJ_BACKEND_CPU, 2, NULL);
  m = cb_parse(cpu, text);
  for (int row = 0; row < 4; row++) {
    hj_buffer_t **in = cb_inputs(cpu, m, 5 + row);
    *(int32_t *)hj_buffer_host_ptr(in[2]) = row;
    hj_buffer_t **o = cb_run(cpu, m, in, NULL), **r = cb_run(ctx, m, in, NULL);
    char why[256];
    for (int j = 0; j < 2; j++)
      if (!cb_close(o[j], r[j], 1e-6, 0, 0, why, sizeof why))
        fail_msg("update of row %d, output %d: %s", row, j, why);
    cb_free_bufs(o, 2);
    cb_free_bufs(r, 2);
    cb_free_bufs(in, 3);
  }
  hj_module_destroy(m);
  hj_ctx_destroy(cpu);
  hj_ctx_destroy(ctx);
}

/* ---- in-place elementwise ------------------------------------------------------------------------ */

/* The CPU backend's question (cpu_backend.c): a linear loop kernel reading |operand| at its
   own index only. */
static bool cb_may_inplace(const hlo_instr *fusion, int operand, void *ud) {
  (void)ud;
  const hlo_instr *hero = NULL;
  return emit_classify(fusion, 0, &hero) == EMIT_KIND_LOOP && emit_loop_inplace_ok(fusion, operand);
}

/* Where in-place must and must not happen (comments: the expected inplace_operand). */
static const char *cb_inplace_text =
  "HloModule inplace\n"
  "row_fused {\n  x = f32[64,16] parameter(0)\n  v = f32[16] parameter(1)\n"
  "  bv = f32[64,16] broadcast(v), dimensions={1}\n  ROOT s = f32[64,16] add(x, bv)\n}\n"
  "twice_fused {\n  t0 = f32[64,16] parameter(0)\n  t1 = f32[64,16] parameter(1)\n"
  "  ROOT mx = f32[64,16] maximum(t0, t1)\n}\n"
  "rev_fused {\n  y = f32[1024] parameter(0)\n  ROOT r = f32[1024] reverse(y), dimensions={0}\n}\n"
  "bcast_fused {\n  z = f32[1024] parameter(0)\n  s0 = f32[1] slice(z), slice={[0:1]}\n"
  "  s1 = f32[] reshape(s0)\n  b1 = f32[1024] broadcast(s1), dimensions={}\n"
  "  ROOT m = f32[1024] multiply(z, b1)\n}\n"
  "ENTRY main {\n  p = f32[64,16] parameter(0)\n  q = f32[64,16] parameter(1)\n"
  "  v = f32[16] parameter(2)\n"
  "  a = f32[64,16] multiply(p, q)\n"                                  /* -1: parameters */
  "  b = f32[64,16] add(a, q)\n"                                       /* 0 */
  "  c = f32[64,16] negate(b)\n"                                       /* 0 */
  "  d = f32[64,16] subtract(q, c)\n"                                  /* 1 */
  "  e = f32[64,16] fusion(d, d), kind=kLoop, calls=twice_fused\n"    /* -1: passed twice */
  "  f = f32[64,16] abs(e)\n"                                          /* -1: e lives on */
  "  g = f32[64,16] add(f, e)\n"                                       /* 0 */
  "  h = f32[64,16] fusion(g, v), kind=kLoop, calls=row_fused\n"      /* -1: row mode */
  "  r1 = f32[1024] reshape(h)\n"
  "  i = f32[1024] fusion(r1), kind=kLoop, calls=rev_fused\n"         /* -1: reads elsewhere */
  "  j = f32[1024] negate(i)\n"                                        /* 0 */
  "  k = f32[1024] fusion(j), kind=kLoop, calls=bcast_fused\n"        /* -1: element 0 for all */
  "  ROOT o = f32[1024] multiply(k, k)\n}\n";  /* 0: wrapped with one operand, read twice at i */

static void test_buffer_inplace_elementwise(void **state) {
  hj_ctx_t *ctx = tu_ctx();
  hlo_module *m = cb_parse(ctx, cb_inplace_text);
  bool ch;
  CHECK_OK(ctx, hlo_pass_wrap_fusions(NULL, m, &ch));
  ba_plan p, plain;
  CHECK_OK(ctx, ba_assign_ex(ctx, m->entry, NULL, cb_may_inplace, NULL, &p));
  CHECK_OK(ctx, ba_assign(ctx, m->entry, NULL, &plain));
  struct { const char *name; int want; } cases[] = {
    { "wrapped_a", -1 }, { "wrapped_b", 0 }, { "wrapped_c", 0 }, { "wrapped_d", 1 },
    { "e", -1 }, { "wrapped_f", -1 }, { "wrapped_g", 0 }, { "h", -1 }, { "i", -1 },
    { "wrapped_j", 0 }, { "k", -1 }, { "wrapped_o", 0 },
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int at = -1;
    for (ptrdiff_t i = 0; i < arrlen(m->entry->instrs); i++)
      if (!strcmp(m->entry->instrs[i]->name, cases[c].name)) at = (int)i;
    if (at < 0) fail_msg("no instruction '%s'", cases[c].name);
    if (p.inplace_operand[at] != cases[c].want)
      fail_msg("%s: in place over operand %d, want %d", cases[c].name, p.inplace_operand[at], cases[c].want);
    assert_int_equal(plain.inplace_operand[at], -1);
    if (cases[c].want >= 0) {   /* the same slot as that operand */
      const hlo_instr *o = m->entry->instrs[at]->operands[cases[c].want];
      assert_int_equal(p.leaves[at][0].where, cb_loc(&p, o->name, 0)->where);   /* o: output */
      assert_int_equal(p.leaves[at][0].index, cb_loc(&p, o->name, 0)->index);
    }
  }
  /* a..d share one slot, as do g, j: 3 slots of 4 KiB live at most (e, f, g) vs 4 */
  printf("in-place elementwise: arena %lld bytes peak, %lld without in place\n",
         (long long)p.arena_bytes, (long long)plain.arena_bytes);
  assert_true(p.arena_bytes < plain.arena_bytes);
  char *sb = NULL;
  ba_plan_print(&p, &sb);
  assert_non_null(strstr(sb, "wrapped_b"));
  assert_non_null(strstr(sb, "(in place over operand 1)"));
  arrfree(sb);
  ba_plan_free(&p);
  ba_plan_free(&plain);
  hlo_module_free(m);
  hj_ctx_destroy(ctx);
}

/* One exact-op chain over f32[256,256] (several threads' chunks), compiled op by op
   (no_fusion): every link after the first goes in place, the last one into the output, so
   the arena is empty (two 256 KiB slots without in place); and the module above, where
   most fusions must not go in place. Both equal the evaluator bit for bit. */
static void test_inplace_elementwise_runs(void **state) {
  static const char *chain =
    "HloModule chain\nENTRY main {\n  p = f32[256,256] parameter(0)\n  q = f32[256,256] parameter(1)\n"
    "  a = f32[256,256] multiply(p, q)\n  b = f32[256,256] add(a, q)\n  c = f32[256,256] negate(b)\n"
    "  d = f32[256,256] subtract(q, c)\n  e = f32[256,256] multiply(d, p)\n"
    "  ROOT f = f32[256,256] add(e, q)\n}\n";
  const char *texts[2] = { chain, cb_inplace_text };
  hj_ctx_t *ref = tu_ctx();
  for (int t = 0; t < 2; t++) {
    char dir[] = "/tmp/hlojit_inplaceXXXXXX";
    assert_non_null(mkdtemp(dir));
    hj_ctx_options_t o;
    hj_ctx_options_init(&o);
    o.backend = HJ_BACKEND_CPU;
    o.num_threads = 4;
    o.no_fusion = true;
    o.dump_dir = dir;
    hj_ctx_t *cpu = NULL;
    if (hj_ctx_create(&o, &cpu) != HJ_OK) fail_msg("hj_ctx_create failed");
    hlo_module *m = cb_parse(cpu, texts[t]);
    hj_buffer_t **in = cb_inputs(cpu, m, 11 + (uint64_t)t);
    hj_exec_stats_t s;
    hj_buffer_t **got = cb_run(cpu, m, in, &s), **want = cb_run(ref, m, in, NULL);
    assert_int_equal(s.evaluator_fallbacks, 0);
    assert_int_equal(hj_buffer_nbytes(got[0]), hj_buffer_nbytes(want[0]));
    if (memcmp(hj_buffer_host_ptr(got[0]), hj_buffer_host_ptr(want[0]), hj_buffer_nbytes(want[0])))
      fail_msg("module %d: in-place results differ from the evaluator", t);
    if (t == 0) assert_int_equal(s.arena_bytes, 0);
    bool seen = false;                           /* the dump names the decision */
    DIR *dd = opendir(dir);
    struct dirent *de;
    while ((de = readdir(dd))) {
      if (de->d_name[0] == '.') continue;
      char path[2048];
      snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
      if (strstr(de->d_name, "buffer_assignment.txt")) {
        size_t n = 0;
        char *txt = tu_read_file(path, &n);
        seen |= txt && strstr(txt, "(in place over operand") != NULL;
        free(txt);
      }
      unlink(path);
    }
    closedir(dd);
    rmdir(dir);
    assert_true(seen);
    cb_free_bufs(got, 1);
    cb_free_bufs(want, 1);
    cb_free_bufs(in, hj_module_num_inputs(m));
    hj_module_destroy(m);
    hj_ctx_destroy(cpu);
  }
  hj_ctx_destroy(ref);
}

/* A matmul thunk's line in thunks.txt names the plan's functions (ukr, gemv, epi) as the
   dumped LLVM IR names them after the code cache renamed the module: each named function is
   defined in the dumped .opt.ll (the thunk's own symbol names the plan, no function). */
static void test_dump_names_matmul_functions(void **state) {
  char dir[] = "/tmp/hlojit_cpu_mmdumpXXXXXX";
  assert_non_null(mkdtemp(dir));
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  o.backend = HJ_BACKEND_CPU;
  o.dump_dir = dir;
  o.cache_dir = "off";   /* compiled here, so the IR is dumped (a disk hit dumps none) */
  hj_ctx_t *ctx = NULL;
  if (hj_ctx_create(&o, &ctx) != HJ_OK) fail_msg("hj_ctx_create failed");
  hlo_module *m = cb_parse(ctx, "HloModule mv\nENTRY e {\n  x = f32[1,64] parameter(0)\n"
                                "  w = f32[64,32] parameter(1)\n  b = f32[1,32] parameter(2)\n"
                                "  d = f32[1,32] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                                "  ROOT r = f32[1,32] add(d, b)\n}\n");
  hj_exec_t *e = NULL;
  CHECK_OK(ctx, hj_compile_module(ctx, m, &e));
  hj_exec_destroy(e);
  char *thunks = cb_dump_read(dir, "thunks.txt"), *ir = cb_dump_read(dir, ".opt.ll");
  cb_dump_remove(dir);
  assert_non_null(thunks);
  assert_non_null(ir);
  const char *f = strstr(thunks, " fns(");
  if (!f) fail_msg("no fns(...) on the matmul thunk:\n%s", thunks);
  const char *end = strchr(f, ')'), *kinds[] = { "gemv ", "epi " };
  assert_non_null(end);
  for (int k = 0; k < 2; k++) {
    const char *at = strstr(f, kinds[k]);
    if (!at || at > end) fail_msg("no %sfunction in '%.*s'", kinds[k], (int)(end - f + 1), f);
    at += strlen(kinds[k]);
    size_t len = strcspn(at, ",)");
    char def[200];
    snprintf(def, sizeof def, "@%.*s(", (int)len, at);
    const char *in_ir = strstr(ir, def);
    if (!in_ir) fail_msg("%s is not in the dumped IR", def);
    const char *line = in_ir;
    while (line > ir && line[-1] != '\n') line--;
    if (strncmp(line, "define", 6)) fail_msg("%s: first use is not its definition", def);
  }
  free(thunks);
  free(ir);
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
}

/* ---- API integration and dumps -------------------------------------------------------- */

static void test_backends_and_dumps(void **state) {
  char dir[] = "/tmp/hlojit_cpu_dumpXXXXXX";
  assert_non_null(mkdtemp(dir));
  hj_ctx_t *ctx = cb_ctx(HJ_BACKEND_AUTO, 0, dir);
  hlo_module *m = cb_parse(ctx, cb_wrap_text);
  hj_exec_t *e = NULL;
  setenv("HLOJIT_LIBCUDA", "/nonexistent/libcuda.so.1", 1);   /* AUTO tries CUDA first */
  CHECK_OK(ctx, hj_compile_module(ctx, m, &e));
  unsetenv("HLOJIT_LIBCUDA");
  assert_int_equal(hj_exec_backend(e), HJ_BACKEND_CPU);    /* AUTO without a GPU: the CPU */
  hj_exec_stats_t s;
  CHECK_OK(ctx, hj_exec_stats(e, &s));
  assert_int_equal(s.fusions, 4);  /* e, d, m and the reduce; the reshape of its result aliases it */
  assert_int_equal(s.backend, HJ_BACKEND_CPU);
  if (!strstr(s.note, "the cuda backend failed") || !strstr(s.note, "no CUDA device"))
    fail_msg("AUTO's note: '%s'", s.note);
  hj_exec_destroy(e);
  const char *want[] = { "after_passes.hlo", "buffer_assignment.txt", "thunks.txt" };
  for (int k = 0; k < 3; k++) {
    DIR *d = opendir(dir);
    struct dirent *de;
    bool found = false;
    while ((de = readdir(d)))
      if (strstr(de->d_name, want[k])) {
        found = true;
        char p[2048];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        size_t n = 0;
        char *t = tu_read_file(p, &n);
        assert_true(t && n > 0);
        if (k == 2) assert_non_null(strstr(t, "program main"));
        free(t);
        unlink(p);
      }
    closedir(d);
    if (!found) fail_msg("no *%s in %s", want[k], dir);
  }
  cb_dump_remove(dir);                         /* the rest (LLVM IR, module text) */
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
  ctx = cb_ctx(HJ_BACKEND_INTERP, 0, NULL);     /* INTERP stays the evaluator */
  m = cb_parse(ctx, cb_wrap_text);
  CHECK_OK(ctx, hj_compile_module(ctx, m, &e));
  assert_int_equal(hj_exec_backend(e), HJ_BACKEND_INTERP);
  hj_exec_destroy(e);
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_clone_prints_the_same),
    cmocka_unit_test(test_inline_calls),
    cmocka_unit_test(test_wrap_fusions),
    cmocka_unit_test(test_buffer_chain_peak),
    cmocka_unit_test(test_buffer_aliases),
    cmocka_unit_test(test_buffer_dus_inplace),
    cmocka_unit_test(test_buffer_dus_siblings),
    cmocka_unit_test(test_buffer_dus_view),
    cmocka_unit_test(test_buffer_inplace_elementwise),
    cmocka_unit_test(test_inplace_elementwise_runs),
    cmocka_unit_test(test_backends_and_dumps),
    cmocka_unit_test(test_dump_names_matmul_functions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
