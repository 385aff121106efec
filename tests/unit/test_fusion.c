/* test_fusion.c — the fusion passes (passes/fusion.c, sibling_fusion.c,
   epilogue_fusion.c) and the scheduler (passes/schedule.c).

   Checks, each on the module after the optimising pipeline (hlo_run_pipeline with the
   fusion passes, then hlo_pass_schedule):
   - kernel counts (hlo_count_kernels) on JAX-made modules (tests/fixtures/hlo_pass, made
     by tests/gen/gen_pass_fixtures.py): GELU 1, softmax 1, layer norm 1 (chained rows),
     moments 1, a GPT-2 block <= 11 with bias and GELU inside kOutput (matmul) fusions;
   - the evaluator gives the same bits before and after on random inputs with IEEE
     specials, for those modules, every JAX fixture, every hand-written fixture and every
     corpus module (skipped, saying so, when /work/shared/hlo-corpus is absent);
   - peak intermediate bytes of a GPT-2 small forward (12 layers, T = 64): one buffer per
     instruction vs fusion + scheduling + first-fit reuse; at least 50% lower;
   - small modules for each rule: expensive producers are not duplicated, cheap ones are,
     dot operands are never fused, a transpose stays its fusion's root, epilogues join
     dots, siblings merge, column reductions take no row-normalisation epilogue, the
     scheduler lowers peak bytes. */
#include "testutil.h"
#include "fusion_testutil.h"

/* ---- helpers ----------------------------------------------------------------------------- */

static hlo_module *tf_parse(const char *text) {
  hlo_module *m = NULL;
  CHECK_OK(ftu_ctx, hlo_parse_module(ftu_ctx, text, strlen(text), "test", &m));
  return m;
}

static void tf_print(const hlo_module *m) {
  char *text = NULL;
  if (hlo_print_module(m, &text) == HJ_OK) printf("%s\n", text);
  free(text);
}

/* Optimises a copy of |orig| (fusion passes only when |fuse_only|), checks the values. */
static hlo_module *tf_opt(const hlo_module *orig, bool fuse_only, const char *what) {
  hlo_module *m = hlo_module_clone(orig);
  assert_non_null(m);
  CHECK_OK(ftu_ctx, fuse_only ? ftu_fuse_only(m) : ftu_optimize(m));
  int same = ftu_same(orig, m, 2);
  if (same == 0 || same == -2) {
    tf_print(m);
    fail_msg("%s: %s after the passes", what, same == 0 ? "values differ" : "cannot evaluate");
  }
  return m;
}

/* Instructions with opcode |op| in all computations of |m|. */
static int tf_count_op(const hlo_module *m, hlo_opcode op) {
  int n = 0;
  for (ptrdiff_t c = 0; c < arrlen(m->comps); c++)
    for (ptrdiff_t i = 0; i < arrlen(m->comps[c]->instrs); i++) n += m->comps[c]->instrs[i]->op == op;
  return n;
}

static bool tf_comp_has(const hlo_comp *c, hlo_opcode op) {
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++)
    if (c->instrs[i]->op == op) return true;
  return false;
}

/* Fusions of the entry of kind |k| whose computation has |op| (HLO_OP_COUNT: any). */
static int tf_fusions(const hlo_module *m, hlo_fusion_kind k, hlo_opcode op) {
  int n = 0;
  for (ptrdiff_t i = 0; i < arrlen(m->entry->instrs); i++) {
    const hlo_instr *x = m->entry->instrs[i];
    if (x->op == HLO_OP_FUSION && x->fusion_kind == k &&
        (op == HLO_OP_COUNT || tf_comp_has(x->calls[0], op)))
      n++;
  }
  return n;
}

static hlo_module *tf_fixture(const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/fixtures/hlo_pass/%s.hlo", tu_data_dir(), name);
  hlo_module *m = ftu_parse_file(path);
  if (!m) fail_msg("%s: %s", path, hj_ctx_error(ftu_ctx));
  return m;
}

/* Kernel count of fixture |name| after the pipeline (values checked); prints it. */
static int tf_fixture_kernels(const char *name, hlo_module **out) {
  hlo_module *orig = tf_fixture(name);
  int before = hlo_count_kernels(orig);
  hlo_module *m = tf_opt(orig, false, name);
  int k = hlo_count_kernels(m);
  printf("  %-12s kernels %d -> %d\n", name, before, k);
  hlo_module_free(orig);
  if (out) *out = m;
  else hlo_module_free(m);
  return k;
}

/* ---- kernel counts on JAX modules --------------------------------------------------------- */

static void test_counts_small(void **state) {
  assert_int_equal(tf_fixture_kernels("gelu_tanh", NULL), 1);
  assert_int_equal(tf_fixture_kernels("softmax", NULL), 1);     /* max and sum chained in one row kernel */
  assert_int_equal(tf_fixture_kernels("layernorm", NULL), 1);   /* mean and variance likewise */
  assert_int_equal(tf_fixture_kernels("moments", NULL), 1);
}

static void test_counts_gpt2_block(void **state) {
  hlo_module *m = NULL;
  int k = tf_fixture_kernels("gpt2_block", &m);
  if (k > 11) tf_print(m);
  assert_true(k <= 11);   /* 14 before layer norm and softmax became one kernel each */
  /* every dot sits in a kOutput fusion; the MLP's has the bias and the GELU (tanh) */
  for (ptrdiff_t i = 0; i < arrlen(m->entry->instrs); i++)
    if (m->entry->instrs[i]->op == HLO_OP_DOT) printf("  unfused dot %s\n", m->entry->instrs[i]->name);
  assert_true(tf_fusions(m, HLO_FUSION_OUTPUT, HLO_OP_TANH) == 1);
  assert_true(tf_fusions(m, HLO_FUSION_OUTPUT, HLO_OP_BROADCAST) >= 3);   /* biases */
  assert_true(tf_fusions(m, HLO_FUSION_OUTPUT, HLO_OP_DOT) >= 4);
  hlo_module_free(m);
}

/* ---- peak bytes ----------------------------------------------------------------------------- */

static void tf_peak(const char *path, const char *what) {
  hlo_module *orig = ftu_parse_file(path);
  if (!orig) fail_msg("%s: %s", path, hj_ctx_error(ftu_ctx));
  hlo_pass_ctx pc;
  rt_pass_ctx_init(&pc, ftu_ctx);
  pc.dump_dir = NULL;
  bool ch = false;
  CHECK_OK(ftu_ctx, hlo_pass_inline_calls(&pc, orig, &ch));   /* calls hide instructions */
  int64_t naive = hlo_unshared_bytes(orig->entry), naive_peak = hlo_peak_live_bytes(orig->entry);
  hlo_module *m = hlo_module_clone(orig);
  CHECK_OK(ftu_ctx, ftu_optimize(m));
  int64_t after = hlo_peak_live_bytes(m->entry);
  printf("  %s: intermediate bytes, one buffer per instruction %lld (%.1f MiB); "
         "unfused with reuse %lld; fused + scheduled + reuse %lld (%.2f MiB): %.1f%% lower; "
         "kernels %d -> %d\n",
         what, (long long)naive, naive / 1048576.0, (long long)naive_peak, (long long)after,
         after / 1048576.0, 100.0 * (1.0 - (double)after / (double)naive),
         hlo_count_kernels(orig), hlo_count_kernels(m));
  assert_true(after * 2 <= naive);
  hlo_module_free(m);
  hlo_module_free(orig);
}

static void test_peak_bytes_gpt2(void **state) {
  char path[4096];
  snprintf(path, sizeof path, "%s/fixtures/hlo_pass/gpt2_small.hlo", tu_data_dir());
  tf_peak(path, "GPT-2 small forward (12 layers, T=64)");
  snprintf(path, sizeof path, "%s/fixtures/jax/gpt2_tiny.hlo", tu_data_dir());
  tf_peak(path, "gpt2_tiny");
}

/* ---- bitwise equality on every module ------------------------------------------------------ */

typedef struct tf_stats { int checked, skipped, kbefore, kafter; } tf_stats;

static void tf_file(const char *path, void *user) {
  tf_stats *s = user;
  hlo_module *orig = ftu_parse_file(path);
  if (!orig || ftu_max_numel(orig) > (1 << 22) || strstr(path, "gpt2_small")) {
    printf("  skipped %s: %s\n", path, orig ? "too large to evaluate twice" : hj_ctx_error(ftu_ctx));
    if (orig) hlo_module_free(orig);
    s->skipped++;
    return;
  }
  for (int mode = 0; mode < 3; mode++) {
    hlo_module *m = hlo_module_clone(orig);
    assert_non_null(m);
    hj_status st = mode == 2 ? ftu_canon_optimize(m) : mode ? ftu_fuse_only(m) : ftu_optimize(m);
    if (st != HJ_OK) fail_msg("%s: %s", path, hj_ctx_error(ftu_ctx));
    int same = ftu_same(orig, m, 2);
    if (same == 0 || same == -2) {
      tf_print(m);
      fail_msg("%s (%s): %s", path, mode == 2 ? "dot-canon + pipeline" : mode ? "fusion passes only" : "pipeline",
               same == 0 ? "values differ" : hj_ctx_error(ftu_ctx));
    }
    if (same == -1 && mode == 0) {
      printf("  skipped %s: the evaluator cannot run it: %s\n", path, hj_ctx_error(ftu_ctx));
      s->skipped++;
    } else if (mode == 0) {
      s->checked++;
      s->kbefore += hlo_count_kernels(orig);
      s->kafter += hlo_count_kernels(m);
    }
    hlo_module_free(m);
  }
  hlo_module_free(orig);
}

static void test_bitwise_fixtures(void **state) {
  const char *sub[] = { "jax", "hlo", "hlo_pass" };
  for (int i = 0; i < 3; i++) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/fixtures/%s", tu_data_dir(), sub[i]);
    tf_stats s = { 0 };
    int n = tu_each_hlo(dir, tf_file, &s);
    assert_true(n > 0);
    printf("  fixtures/%s: %d modules, %d bitwise equal after the pipeline (and after the "
           "fusion passes alone, and after dot-canon + pipeline), %d skipped; kernels %d -> %d\n",
           sub[i], n, s.checked, s.skipped, s.kbefore, s.kafter);
    assert_true(s.checked >= n / 2);
  }
}

static void test_bitwise_corpus(void **state) {
  tf_stats s = { 0 };
  int n = ftu_each_corpus_hlo(tf_file, &s);
  printf("  corpus: %d modules, %d bitwise equal, %d skipped; kernels %d -> %d\n", n, s.checked,
         s.skipped, s.kbefore, s.kafter);
}

/* ---- the rules, one small module each ---------------------------------------------------- */

#define TF_MOD(body) "HloModule m\nENTRY e {\n" body "}\n"
#define TF_SUM "HloModule m\nsum {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n" \
               " ROOT c = f32[] add(a, b)\n}\nmx {\n a = f32[] parameter(0)\n"              \
               " b = f32[] parameter(1)\n ROOT c = f32[] maximum(a, b)\n}\nENTRY e {\n"

static hlo_module *tf_rule(const char *text, int want_kernels) {
  hlo_module *orig = tf_parse(text);
  hlo_module *m = tf_opt(orig, true, "rule");
  hlo_module_free(orig);
  if (want_kernels >= 0 && hlo_count_kernels(m) != want_kernels) {
    tf_print(m);
    fail_msg("expected %d kernels, got %d", want_kernels, hlo_count_kernels(m));
  }
  return m;
}

/* tf_rule, then |want| instructions with opcode |op| in the result. */
static void tf_rule_count(const char *text, int want_kernels, hlo_opcode op, int want) {
  hlo_module *m = tf_rule(text, want_kernels);
  assert_int_equal(tf_count_op(m, op), want);
  hlo_module_free(m);
}

static void test_rule_duplication(void **state) {
  /* exp with two users: not duplicated (one exp in the module, its own kernel) */
  tf_rule_count(TF_MOD(" x = f32[64,64] parameter(0)\n e = f32[64,64] exponential(x)\n"
                       " o = f32[] constant(1)\n ob = f32[64,64] broadcast(o), dimensions={}\n"
                       " a = f32[64,64] add(e, ob)\n b = f32[64,64] multiply(e, e)\n"
                       " ROOT t = (f32[64,64], f32[64,64]) tuple(a, b)\n"), -1, HLO_OP_EXP, 1);
  /* negate with two users: duplicated into both, which then merge as siblings */
  tf_rule_count(TF_MOD(" x = f32[64,64] parameter(0)\n n = f32[64,64] negate(x)\n"
                       " a = f32[64,64] add(n, x)\n b = f32[64,64] multiply(n, x)\n"
                       " ROOT t = (f32[64,64], f32[64,64]) tuple(a, b)\n"), 1, HLO_OP_NEGATE, 2);
}

static void test_rule_dot_and_transpose(void **state) {
  /* dot operands are never fused: exp stays outside; bias + tanh become the epilogue */
  hlo_module *m = tf_rule(TF_MOD(" x = f32[16,32] parameter(0)\n w = f32[32,8] parameter(1)\n"
                                 " b = f32[8] parameter(2)\n e = f32[16,32] exponential(x)\n"
                                 " d = f32[16,8] dot(e, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                                 " bb = f32[16,8] broadcast(b), dimensions={1}\n"
                                 " s = f32[16,8] add(d, bb)\n ROOT r = f32[16,8] tanh(s)\n"), 2);
  assert_int_equal(tf_fusions(m, HLO_FUSION_OUTPUT, HLO_OP_TANH), 1);
  assert_int_equal(tf_fusions(m, HLO_FUSION_OUTPUT, HLO_OP_EXP), 0);
  hlo_module_free(m);
  /* a transpose takes its producer but stays the root of its fusion */
  m = tf_rule(TF_MOD(" x = f32[32,64] parameter(0)\n y = f32[32,64] parameter(1)\n"
                     " a = f32[32,64] add(x, y)\n t = f32[64,32] transpose(a), dimensions={1,0}\n"
                     " ROOT n = f32[64,32] negate(t)\n"), 2);
  for (ptrdiff_t i = 0; i < arrlen(m->entry->instrs); i++) {
    const hlo_instr *f = m->entry->instrs[i];
    if (f->op == HLO_OP_FUSION && tf_comp_has(f->calls[0], HLO_OP_TRANSPOSE))
      assert_int_equal(f->calls[0]->root->op, HLO_OP_TRANSPOSE);
  }
  hlo_module_free(m);
  /* x @ w.T: the transpose folds into the dot (no transposed copy) */
  tf_rule_count(TF_MOD(" x = f32[16,32] parameter(0)\n w = f32[8,32] parameter(1)\n"
                       " t = f32[32,8] transpose(w), dimensions={1,0}\n"
                       " ROOT d = f32[16,8] dot(x, t), lhs_contracting_dims={1},"
                       " rhs_contracting_dims={0}\n"),
                1, HLO_OP_TRANSPOSE, 0);
}

/* The fusion in |m| holding a dynamic-update-slice, and its in-place leaves. */
static uint64_t tf_dus_mask(const hlo_module *m, int *nleaves) {
  for (ptrdiff_t i = 0; i < arrlen(m->entry->instrs); i++) {
    const hlo_instr *f = m->entry->instrs[i];
    if (f->op == HLO_OP_FUSION && tf_comp_has(f->calls[0], HLO_OP_DYNAMIC_UPDATE_SLICE)) {
      hlo_dus_root dr[64];
      *nleaves = hlo_fusion_dus_roots(f, dr, 64);
      return hlo_fusion_dus_mask(f);
    }
  }
  *nleaves = 0;
  return 0;
}

#define TF_KV(extra, root)                                                                  \
  TF_MOD(" x = f32[1,96] parameter(0)\n kc = f32[4,8,64] parameter(1)\n"                   \
         " vc = f32[4,64,8] parameter(2)\n t = s32[] parameter(3)\n z = s32[] constant(0)\n"  \
         " e = f32[1,96] exponential(x)\n q = f32[1,32] slice(e), slice={[0:1], [0:32]}\n"    \
         " ks = f32[1,32] slice(e), slice={[0:1], [32:64]}\n k = f32[4,8,1] reshape(ks)\n"    \
         " vs = f32[1,32] slice(e), slice={[0:1], [64:96]}\n v = f32[4,1,8] reshape(vs)\n"    \
         " dk = f32[4,8,64] dynamic-update-slice(kc, k, z, z, t)\n"                           \
         " dv = f32[4,64,8] dynamic-update-slice(vc, v, z, t, z)\n" extra " ROOT r = " root "\n")

static void test_rule_dus(void **state) {
  int n = 0;
  /* a decode step: the updates' slices fuse into the updates, which merge with the query
     slice (same element count): exp, and one kernel with leaves q, dk, dv in place */
  hlo_module *m = tf_rule(TF_KV("", "(f32[1,32], f32[4,8,64], f32[4,64,8]) tuple(q, dk, dv)"), 2);
  assert_int_equal(__builtin_popcountll(tf_dus_mask(m, &n)), 2);   /* dk, dv; any order */
  assert_int_equal(n, 3);
  hlo_module_free(m);
  /* the buffer updated in place is never computed inside the update's kernel: negate(kc)
     stays a kernel of its own (dk still in place over it) */
  m = tf_rule(TF_MOD(" c = f32[16,8] parameter(0)\n u = f32[1,8] parameter(1)\n t = s32[] parameter(2)\n"
                     " z = s32[] constant(0)\n nc = f32[16,8] negate(c)\n nu = f32[1,8] negate(u)\n"
                     " ROOT d = f32[16,8] dynamic-update-slice(nc, nu, t, z)\n"), 2);
  assert_int_equal(tf_dus_mask(m, &n), 1);
  hlo_module_free(m);
  /* a sibling that reads a cache the other updates: no merge (it would read what the
     kernel overwrites), so q + dv merge and dk stays alone */
  m = tf_rule(TF_KV(" kr = f32[4,8,1] slice(kc), slice={[0:4], [0:8], [0:1]}\n"
                    " kq = f32[4,8,1] add(kr, k)\n",
                    "(f32[1,32], f32[4,8,64], f32[4,64,8], f32[4,8,1]) tuple(q, dk, dv, kq)"), -1);
  for (ptrdiff_t i = 0; i < arrlen(m->entry->instrs); i++) {
    const hlo_instr *f = m->entry->instrs[i];
    if (f->op != HLO_OP_FUSION) continue;
    hlo_dus_root dr[64];
    int nl = hlo_fusion_dus_roots(f, dr, 64);
    for (int j = 0; j < nl; j++)   /* every update that exists is still in place */
      if (dr[j].dus) assert_true(dr[j].param >= 0);
    for (int k = 0; k < f->noperands; k++)   /* and no kernel both reads and updates kc */
      if (f->operands[k]->op == HLO_OP_PARAMETER && f->operands[k]->index == 1 &&
          tf_comp_has(f->calls[0], HLO_OP_DYNAMIC_UPDATE_SLICE) && tf_comp_has(f->calls[0], HLO_OP_ADD))
        fail_msg("'%s' reads the k cache it updates", f->name);
  }
  hlo_module_free(m);
}

/* ir/inplace.c's rules, on hand-made fusions: per leaf, the parameter it may update in
   place (-1: none). */
static void test_dus_roots(void **state) {
  static const struct { const char *body, *shape, *root; int n, param[2]; } cases[] = {
    /* in place over parameter 0, through bitcasts both ways */
    { " b = f32[16,8] bitcast(c)\n d = f32[16,8] dynamic-update-slice(b, u, t, t)\n",
      "f32[128]", "bitcast(d)", 1, { 0 } },
    /* the buffer is also read elsewhere */
    { " d = f32[16,8] dynamic-update-slice(c, u, t, t)\n s = f32[1,8] slice(c), slice={[0:1], [0:8]}\n",
      "(f32[16,8], f32[1,8])", "tuple(d, s)", 2, { -1, -1 } },
    /* the dus's value is read by another leaf */
    { " d = f32[16,8] dynamic-update-slice(c, u, t, t)\n n = f32[16,8] negate(d)\n",
      "(f32[16,8], f32[16,8])", "tuple(d, n)", 2, { -1, -1 } },
    /* the same leaf twice */
    { " d = f32[16,8] dynamic-update-slice(c, u, t, t)\n", "(f32[16,8], f32[16,8])", "tuple(d, d)",
      2, { -1, -1 } },
    /* the update is read from the buffer itself */
    { " s = f32[1,8] slice(c), slice={[0:1], [0:8]}\n d = f32[16,8] dynamic-update-slice(c, s, t, t)\n",
      "f32[16,8]", "negate(d)", 1, { -1 } },
    /* a computed value at the root, beside an update in place */
    { " d = f32[16,8] dynamic-update-slice(c, u, t, t)\n n = f32[1,8] negate(u)\n",
      "(f32[1,8], f32[16,8])", "tuple(n, d)", 2, { -1, 0 } },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char text[1024];
    snprintf(text, sizeof text,
             "HloModule m\nf {\n c = f32[16,8] parameter(0)\n u = f32[1,8] parameter(1)\n"
             " t = s32[] parameter(2)\n%s ROOT r = %s %s\n}\nENTRY e {\n c = f32[16,8] parameter(0)\n"
             " u = f32[1,8] parameter(1)\n t = s32[] parameter(2)\n"
             " ROOT f = %s fusion(c, u, t), kind=kLoop, calls=f\n}\n",
             cases[i].body, cases[i].shape, cases[i].root, cases[i].shape);
    hlo_module *m = tf_parse(text);
    hlo_dus_root dr[64];
    assert_int_equal(hlo_fusion_dus_roots(m->entry->root, dr, 64), cases[i].n);
    for (int j = 0; j < cases[i].n; j++)
      if (dr[j].param != cases[i].param[j])
        fail_msg("case %zu leaf %d: parameter %d, expected %d", i, j, dr[j].param, cases[i].param[j]);
    hlo_module_free(m);
  }
  /* the same instruction passed as two operands: not in place */
  hlo_module *m = tf_parse("HloModule m\nf {\n c = f32[16,8] parameter(0)\n c2 = f32[16,8] parameter(1)\n"
                           " t = s32[] parameter(2)\n s = f32[1,8] slice(c2), slice={[0:1], [0:8]}\n"
                           " ROOT d = f32[16,8] dynamic-update-slice(c, s, t, t)\n}\nENTRY e {\n"
                           " c = f32[16,8] parameter(0)\n t = s32[] parameter(1)\n"
                           " ROOT f = f32[16,8] fusion(c, c, t), kind=kLoop, calls=f\n}\n");
  hlo_dus_root dr[64];
  assert_int_equal(hlo_fusion_dus_roots(m->entry->root, dr, 64), 1);
  assert_int_equal(dr[0].param, -1);
  hlo_module_free(m);
}

static void test_rule_reductions(void **state) {
  /* two reductions of x: one multi-output kernel */
  hlo_module *m = tf_rule(TF_SUM " x = f32[64,64] parameter(0)\n z = f32[] constant(0)\n"
                          " s = f32[64] reduce(x, z), dimensions={1}, to_apply=sum\n"
                          " q = f32[64,64] multiply(x, x)\n"
                          " s2 = f32[64] reduce(q, z), dimensions={1}, to_apply=sum\n"
                          " ROOT t = (f32[64], f32[64]) tuple(s, s2)\n}\n", 1);
  assert_int_equal(tf_fusions(m, HLO_FUSION_INPUT, HLO_OP_TUPLE), 1);
  hlo_module_free(m);
  /* a column reduction broadcast back: no row-normalisation epilogue (2 kernels) */
  m = tf_rule(TF_SUM " x = f32[64,32] parameter(0)\n z = f32[] constant(0)\n"
              " s = f32[32] reduce(x, z), dimensions={0}, to_apply=sum\n"
              " b = f32[64,32] broadcast(s), dimensions={1}\n ROOT r = f32[64,32] subtract(x, b)\n}\n", 2);
  hlo_module_free(m);
  /* a row reduction broadcast back: one kernel; with the rule off, two */
  const char *row = TF_SUM " x = f32[64,32] parameter(0)\n z = f32[] constant(0)\n"
                    " s = f32[64] reduce(x, z), dimensions={1}, to_apply=sum\n"
                    " b = f32[64,32] broadcast(s), dimensions={0}\n ROOT r = f32[64,32] subtract(x, b)\n}\n";
  hlo_module_free(tf_rule(row, 1));
  setenv("HLOJIT_FUSION_ROW_NORM", "0", 1);
  hlo_module_free(tf_rule(row, 2));
  unsetenv("HLOJIT_FUSION_ROW_NORM");
  /* chained rows: a reduce of the same rows reading the first's broadcast row value (layer
     norm's variance reading the mean): one kernel; then the second's value broadcast too */
  const char *chain = TF_SUM " x = f32[64,32] parameter(0)\n z = f32[] constant(0)\n"
                      " s = f32[64] reduce(x, z), dimensions={1}, to_apply=sum\n"
                      " b = f32[64,32] broadcast(s), dimensions={0}\n d = f32[64,32] subtract(x, b)\n"
                      " d2 = f32[64,32] multiply(d, d)\n q = f32[64] reduce(d2, z), dimensions={1}, to_apply=sum\n"
                      " qb = f32[64,32] broadcast(q), dimensions={0}\n ROOT r = f32[64,32] divide(d, qb)\n}\n";
  m = tf_rule(chain, 1);
  assert_int_equal(tf_fusions(m, HLO_FUSION_INPUT, HLO_OP_REDUCE), 1);
  hlo_module_free(m);
  setenv("HLOJIT_FUSION_ROW_NORM", "0", 1);
  hlo_module_free(tf_rule(chain, 3));
  unsetenv("HLOJIT_FUSION_ROW_NORM");
  /* ... but not a reduce of other rows (the second reduces a [32,64] transposed view) */
  hlo_module_free(tf_rule(TF_SUM " x = f32[64,64] parameter(0)\n z = f32[] constant(0)\n"
                          " s = f32[64] reduce(x, z), dimensions={1}, to_apply=sum\n"
                          " b = f32[64,64] broadcast(s), dimensions={0}\n d = f32[64,64] subtract(x, b)\n"
                          " q = f32[64] reduce(d, z), dimensions={0}, to_apply=sum\n"
                          " ROOT r = f32[64] negate(q)\n}\n", 2));
  /* a reduce epilogue on the reduced shape: one kernel */
  hlo_module_free(tf_rule(TF_SUM " x = f32[64,32] parameter(0)\n z = f32[] constant(0)\n"
                          " s = f32[64] reduce(x, z), dimensions={1}, to_apply=sum\n"
                          " c = f32[] constant(32)\n cb = f32[64] broadcast(c), dimensions={}\n"
                          " ROOT r = f32[64] divide(s, cb)\n}\n", 1));
}

static void test_schedule(void **state) {
  /* text order keeps both big exps live; the scheduler consumes each before the next */
  const char *text = TF_MOD(" x = f32[1024] parameter(0)\n a = f32[1024] exponential(x)\n"
                            " b = f32[1024] log(x)\n c = f32[1024] sine(x)\n"
                            " ra = f32[1024] add(a, x)\n rb = f32[1024] add(b, x)\n"
                            " rc = f32[1024] add(c, x)\n s1 = f32[1024] add(ra, rb)\n"
                            " ROOT s = f32[1024] add(s1, rc)\n");
  hlo_module *orig = tf_parse(text), *m = hlo_module_clone(orig);
  int64_t before = 0, after = 0;
  CHECK_OK(ftu_ctx, hlo_schedule_comp(m->entry, &before, &after));
  CHECK_OK(ftu_ctx, hlo_verify_module(m));
  printf("  schedule: peak bytes %lld -> %lld (no reuse: %lld)\n", (long long)before,
         (long long)after, (long long)hlo_unshared_bytes(m->entry));
  assert_true(after < before);
  assert_int_equal(ftu_same(orig, m, 1), 1);
  hlo_module_free(m);
  hlo_module_free(orig);
}

int main(void) {
  ftu_ctx = tu_ctx();
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_rule_duplication),
    cmocka_unit_test(test_rule_dot_and_transpose),
    cmocka_unit_test(test_rule_reductions),
    cmocka_unit_test(test_rule_dus),
    cmocka_unit_test(test_dus_roots),
    cmocka_unit_test(test_schedule),
    cmocka_unit_test(test_counts_small),
    cmocka_unit_test(test_counts_gpt2_block),
    cmocka_unit_test(test_peak_bytes_gpt2),
    cmocka_unit_test(test_bitwise_fixtures),
    cmocka_unit_test(test_bitwise_corpus),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  hj_ctx_destroy(ftu_ctx);
  return rc;
}
