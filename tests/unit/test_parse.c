/* test_parse.c — the HLO text parser (text/lex.c, parse.c, parse_attrs.c).

   What is checked, and against what:
   - every module of XLA's own test suites in ../shared/hlo-corpus (and golden/) parses,
     except the c128 one, which fails naming c128 at its line:column (skipped when the corpus
     is absent; $HLOJIT_CORPUS overrides the place);
   - every JAX-written fixture (tests/fixtures/jax, NAME.hlo) parses, and its entry computation
     has the parameters JAX's own .npy inputs say (count, dtype, dims) and as many results
     as MANIFEST.txt lists;
   - attributes land in the right fields, on hand-written modules in XLA's syntax;
   - constants: values, element order, rounding (f32 by IEEE round-to-nearest-even from the
     decimal, checked on a halfway case where rounding through double gives the wrong
     float), range checks, f16/bf16 bit patterns from their IEEE definitions;
   - errors: each names the problem, its line:column, and shows the line with a caret;
   - robustness: a module cut at every byte parses or fails cleanly (run under ASan too),
     and the text is never read past its length. */
#include "testutil.h"
#include <dirent.h>
#include <math.h>
#include <sys/stat.h>

/* ---- helpers ----------------------------------------------------------------------- */

static hlo_module *tp_parse_ok(hj_ctx_t *ctx, const char *text) {
  hlo_module *m = NULL;
  CHECK_OK(ctx, hlo_parse_module(ctx, text, strlen(text), NULL, &m));
  assert_non_null(m);
  return m;
}

static void tp_has(const char *msg, const char *part) {
  if (!strstr(msg, part)) fail_msg("message \"%s\" lacks \"%s\"", msg, part);
}

/* The message has "<input>:LINE:COL: ", |part|, and ends in a line that is a caret. */
static void tp_check_msg(const char *msg, const char *linecol, const char *part) {
  char head[64];
  snprintf(head, sizeof head, ":%s: ", linecol);
  tp_has(msg, head);
  tp_has(msg, part);
  const char *last = strrchr(msg, '\n');
  if (!last) fail_msg("message \"%s\" has no source line", msg);
  const char *p = last + 1;
  while (*p == ' ' || *p == '\t') p++;
  if (strcmp(p, "^") != 0) fail_msg("message \"%s\" does not end in a caret line", msg);
}

static void tp_fails(const char *text, hj_status code, const char *linecol, const char *part) {
  hj_ctx_t *ctx = tu_ctx();
  hlo_module *m = (hlo_module *)1;
  hj_status st = hlo_parse_module(ctx, text, strlen(text), NULL, &m);
  if (st != code)
    fail_msg("got %s (%s), want %s for:\n%s", hj_status_name(st), hj_ctx_error(ctx), hj_status_name(code), text);
  assert_null(m);
  tp_check_msg(hj_ctx_error(ctx), linecol, part);
  hj_ctx_destroy(ctx);
}

static hlo_instr *tp_find(const hlo_comp *c, const char *name) {
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++)
    if (strcmp(c->instrs[i]->name, name) == 0) return c->instrs[i];
  fail_msg("no instruction '%s' in '%s'", name, c->name);
  return NULL;
}

static void tp_ints(hlo_ints v, int n, const int64_t *want) {
  assert_int_equal(v.n, n);
  for (int i = 0; i < n; i++) assert_int_equal(v.v[i], want[i]);
}
#define TP_INTS(v, ...)                                                                   \
  tp_ints(v, (int)(sizeof((int64_t[]){ __VA_ARGS__ }) / sizeof(int64_t)), (int64_t[]){ __VA_ARGS__ })

/* The corpus directory, or NULL. */
static const char *tp_corpus(void) {
  static char path[1024];
  const char *env = getenv("HLOJIT_CORPUS");
  const char *cands[3] = { env, "../shared/hlo-corpus", NULL };
  snprintf(path, sizeof path, "%s/../../shared/hlo-corpus", tu_data_dir());
  cands[2] = path;
  struct stat sb;
  for (int i = 0; i < 3; i++)
    if (cands[i] && stat(cands[i], &sb) == 0 && S_ISDIR(sb.st_mode)) return cands[i];
  return NULL;
}

/* Parses every *.hlo in |dir|; returns how many parsed, fails on any error except the file
   whose name contains |expect_fail| (which must fail naming c128 at a line:col). */
static int tp_parse_dir(const char *dir, const char *expect_fail, int *nfailed_as_expected) {
  DIR *d = opendir(dir);
  if (!d) fail_msg("cannot open %s", dir);
  int ok = 0;
  hj_ctx_t *ctx = tu_ctx();
  for (struct dirent *e; (e = readdir(d));) {
    size_t n = strlen(e->d_name);
    if (n < 5 || strcmp(e->d_name + n - 4, ".hlo") != 0) continue;
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    size_t len = 0;
    char *text = tu_read_file(path, &len);
    assert_non_null(text);
    hlo_module *m = NULL;
    hj_status st = hlo_parse_module(ctx, text, len, path, &m);
    if (expect_fail && strstr(e->d_name, expect_fail)) {
      assert_int_equal(st, HJ_ERR_UNSUPPORTED);
      tp_check_msg(hj_ctx_error(ctx), "8:11", "element type 'c128' is not supported");
      tp_has(hj_ctx_error(ctx), e->d_name);
      (*nfailed_as_expected)++;
    } else {
      if (st != HJ_OK) fail_msg("%s: %s", path, hj_ctx_error(ctx));
      assert_non_null(m->entry);
      assert_non_null(m->entry->root);
      ok++;
    }
    hlo_module_free(m);
    free(text);
  }
  closedir(d);
  hj_ctx_destroy(ctx);
  return ok;
}

/* ---- the corpora ------------------------------------------------------------------- */

static void test_corpus(void **state) {
  (void)state;
  const char *dir = tp_corpus();
  if (!dir) {
    printf("skipped: no hlo-corpus (set HLOJIT_CORPUS)\n");
    skip();
  }
  int c128 = 0;
  int n = tp_parse_dir(dir, "_c128", &c128);
  char golden[1200];
  snprintf(golden, sizeof golden, "%s/golden", dir);
  n += tp_parse_dir(golden, NULL, &c128);
  assert_int_equal(c128, 1);
  assert_true(n >= 60);
}

/* 'shape': (5, 7) and 'descr': '<f4' from a .npy header. Returns the rank or -1. */
static int tp_npy_shape(const char *path, int64_t *dims, char *descr) {
  size_t len = 0;
  char *p = tu_read_file(path, &len);
  if (!p) return -1;
  int rank = -1;
  /* The magic "\x93NUMPY\x01\x00" and the header length hold NULs: blank them. */
  for (size_t i = 0; i < 12 && i < len; i++)
    if (!p[i]) p[i] = ' ';
  char *d = strstr(p, "'descr': '"), *s = strstr(p, "'shape': (");
  if (d && s) {
    sscanf(d + 10, "%7[^']", descr);
    rank = 0;
    for (char *q = s + 10; *q && *q != ')';) {
      if (*q >= '0' && *q <= '9') dims[rank++] = strtoll(q, &q, 10);
      else q++;
    }
  }
  free(p);
  return rank;
}

static hlo_type tp_npy_type(const char *descr) {
  static const struct { const char *d; hlo_type t; } m[] = {
    { "<f4", HLO_F32 }, { "<f8", HLO_F64 }, { "<f2", HLO_F16 }, { "|b1", HLO_PRED }, { "<i4", HLO_S32 },
    { "<i8", HLO_S64 }, { "|i1", HLO_S8 }, { "|u1", HLO_U8 }, { "<u4", HLO_U32 }, { "<V2", HLO_BF16 },
  };
  for (size_t i = 0; i < sizeof m / sizeof *m; i++)
    if (strcmp(m[i].d, descr) == 0) return m[i].t;
  return HLO_TYPE_COUNT;
}

static void test_jax_fixtures(void **state) {
  (void)state;
  char dir[1024], path[1200];
  snprintf(dir, sizeof dir, "%s/fixtures/jax", tu_data_dir());
  int dummy = 0;
  int n = tp_parse_dir(dir, NULL, &dummy);
  assert_true(n >= 30);
  /* Interfaces against JAX's own inputs and MANIFEST.txt ("name nin nout"). */
  snprintf(path, sizeof path, "%s/MANIFEST.txt", dir);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  hj_ctx_t *ctx = tu_ctx();
  char line[256], name[128];
  int nin, nout, checked = 0;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#' || sscanf(line, "%127s %d %d", name, &nin, &nout) != 3) continue;
    snprintf(path, sizeof path, "%s/%s.hlo", dir, name);
    size_t len = 0;
    char *text = tu_read_file(path, &len);
    assert_non_null(text);
    hlo_module *m = NULL;
    CHECK_OK(ctx, hlo_parse_module(ctx, text, len, path, &m));
    assert_int_equal(arrlen(m->entry->params), nin);
    const hlo_shape *out = &m->entry->root->shape;
    if (nout > 1 || out->type == HLO_TUPLE) assert_int_equal(out->ntuple, nout);
    for (int k = 0; k < nin; k++) {
      int64_t dims[16];
      char descr[8] = "";
      snprintf(path, sizeof path, "%s/%s.in%d.npy", dir, name, k);
      int rank = tp_npy_shape(path, dims, descr);
      assert_true(rank >= 0);
      const hlo_shape *s = &m->entry->params[k]->shape;
      assert_int_equal(s->rank, rank);
      for (int i = 0; i < rank; i++) assert_int_equal(s->dims[i], dims[i]);
      if (tp_npy_type(descr) != HLO_TYPE_COUNT) assert_int_equal(s->type, tp_npy_type(descr));
    }
    checked++;
    hlo_module_free(m);
    free(text);
  }
  fclose(f);
  hj_ctx_destroy(ctx);
  assert_true(checked >= 30);
}

/* ---- syntax and attributes ----------------------------------------------------------- */

static const char tp_module[] =
  "// a leading comment\n"
  "HloModule test_mod, is_scheduled=true, entry_computation_layout={(f32[4,8]{1,0})->f32[4]{0}},\n"
  "  input_output_alias={ }, buffer_donor={ (0, {}) }, frontend_attributes={a=\"b}\"}\n"
  "\n"
  "%add (x: f32[], y: f32[]) -> f32[] {\n"
  "  %y = f32[] parameter(1)\n"
  "  %x = f32[] parameter(0)\n"
  "  ROOT %s = f32[] add(f32[] %x, f32[] %y), metadata={op_name=\"jit(f)/add\" source_line=3}\n"
  "} // add\n"
  "\n"
  "cond {\n"
  "  p = (s32[], f32[4]) parameter(0)\n"
  "  i = get-tuple-element(p), index=0\n"
  "  n = s32[] constant(3)\n"
  "  ROOT lt = compare(i, n), direction=LT, type=SIGNED\n"
  "}\n"
  "body {\n"
  "  p = (s32[], f32[4]) parameter(0)\n"
  "  i = s32[] get-tuple-element(p), index=0\n"
  "  v = f32[4] get-tuple-element(p), index=1\n"
  "  one = s32[] constant(1)\n"
  "  i2 = s32[] add(i, one)\n"
  "  tuple.1 = (s32[], /*index=1*/f32[4]{0}) tuple(i2, v)\n"
  "}\n"
  "main.9 {\n"
  "  a = f32[4,<=8]{1,0:T(8,128)} parameter(0), sharding={replicated}\n"
  "  zero = f32[] constant(0)\n"
  "  r = f32[4] reduce(a, zero), dimensions={1}, to_apply=%add,\n"
  "      backend_config={\"x\":{\"y\":[1,2]}}\n"
  "  sl = f32[2,3] slice(a), slice={[0:4:2], [1:4]}\n"
  "  pd = f32[6,4] pad(sl, zero), padding=1_2_1x0_1\n"
  "  rw = f32[4] reduce-window(r, zero), window={size=3 pad=2_0}, to_apply=add\n"
  "  c0 = s32[] constant(0)\n"
  "  t = (s32[], f32[4]) tuple(c0, rw)\n"
  "  w = (s32[], f32[4]) while(t), condition=cond, body=body\n"
  "  d = f32[4,4] dot(a, a), lhs_contracting_dims={1}, rhs_contracting_dims={1},"
  " operand_precision={highest,highest}\n"
  "  ROOT out = f32[4] get-tuple-element(w), index=1\n"
  "}\n";

static void test_syntax(void **state) {
  (void)state;
  hj_ctx_t *ctx = tu_ctx();
  hlo_module *m = tp_parse_ok(ctx, tp_module);
  assert_string_equal(m->name, "test_mod");
  assert_int_equal(arrlen(m->comps), 4);
  hlo_comp *e = m->entry;
  assert_string_equal(e->name, "main.9"); /* no ENTRY: the last computation */
  assert_true(e->is_entry);
  assert_string_equal(e->root->name, "out");
  hlo_comp *add = hlo_module_find_comp(m, "add");
  assert_non_null(add);
  assert_string_equal(add->params[0]->name, "x"); /* by number, not by text order */
  assert_string_equal(add->params[1]->name, "y");
  assert_string_equal(add->root->name, "s");
  hlo_comp *body = hlo_module_find_comp(m, "body");
  assert_string_equal(body->root->name, "tuple.1"); /* no ROOT: the last instruction */
  assert_true(body->root->is_root);
  hlo_instr *lt = tp_find(hlo_module_find_comp(m, "cond"), "lt");
  assert_int_equal(lt->shape.type, HLO_PRED); /* inferred */
  assert_int_equal(lt->cmp_dir, HLO_CMP_LT);
  assert_int_equal(lt->cmp_type, HLO_CMPT_SIGNED);

  hlo_instr *a = tp_find(e, "a");
  assert_int_equal(a->shape.rank, 2);
  assert_int_equal(a->shape.dims[1], 8);
  assert_true(a->shape.dynamic[1]);
  assert_false(a->shape.dynamic[0]);
  assert_true(a->shape.has_layout);
  hlo_instr *r = tp_find(e, "r");
  TP_INTS(r->dims, 1);
  assert_int_equal(r->ncalls, 1);
  assert_ptr_equal(r->calls[0], add);
  hlo_instr *sl = tp_find(e, "sl");
  TP_INTS(sl->slice_start, 0, 1);
  TP_INTS(sl->slice_limit, 4, 4);
  TP_INTS(sl->slice_stride, 2, 1);
  hlo_instr *pd = tp_find(e, "pd");
  TP_INTS(pd->pad_lo, 1, 0);
  TP_INTS(pd->pad_hi, 2, 1);
  TP_INTS(pd->pad_interior, 1, 0);
  hlo_instr *rw = tp_find(e, "rw");
  TP_INTS(rw->window.size, 3);
  TP_INTS(rw->window.stride, 1);
  TP_INTS(rw->window.pad_lo, 2);
  TP_INTS(rw->window.pad_hi, 0);
  TP_INTS(rw->window.base_dilation, 1);
  TP_INTS(rw->window.window_dilation, 1);
  hlo_instr *w = tp_find(e, "w");
  assert_int_equal(w->ncalls, 2);
  assert_string_equal(w->calls[0]->name, "cond");
  assert_string_equal(w->calls[1]->name, "body");
  hlo_instr *d = tp_find(e, "d");
  TP_INTS(d->dot.lhs_contract, 1);
  TP_INTS(d->dot.rhs_contract, 1);
  assert_int_equal(d->dot.lhs_batch.n, 0);
  hlo_instr *out = tp_find(e, "out");
  assert_int_equal(out->index, 1);
  assert_true(out->is_root);
  hlo_module_free(m);
  hj_ctx_destroy(ctx);
}

static void test_gather_scatter_conditional(void **state) {
  (void)state;
  hj_ctx_t *ctx = tu_ctx();
  hlo_module *m = tp_parse_ok(ctx,
    "upd { a = s32[] parameter(0)\n ROOT b = s32[] parameter(1) }\n"
    "b0 { p = f32[3] parameter(0)\n ROOT n = f32[3] negate(p) }\n"
    "b1 { p = f32[3] parameter(0)\n ROOT n = f32[3] abs(p) }\n"
    "ENTRY main {\n"
    "  op = s32[3,3] parameter(0)\n"
    "  idx = s32[2] parameter(1)\n"
    "  g = s32[2,3] gather(op, idx), offset_dims={1}, collapsed_slice_dims={0},\n"
    "      start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}, indices_are_sorted=true\n"
    "  u = s32[2,3] parameter(2)\n"
    "  s = s32[3,3] scatter(op, idx, u), update_window_dims={1}, inserted_window_dims={0},\n"
    "      scatter_dims_to_operand_dims={0}, index_vector_dim=1, unique_indices=true, to_apply=upd\n"
    "  k = s32[] parameter(3)\n"
    "  x = f32[3] parameter(4)\n"
    "  c = f32[3] conditional(k, x, x), branch_computations={b0, %b1}\n"
    "  pr = pred[] parameter(5)\n"
    "  c2 = f32[3] conditional(pr, x, x), false_computation=b1, true_computation=b0\n"
    "  ROOT t = (s32[2,3], s32[3,3], f32[3], f32[3]) tuple(g, s, c, c2)\n"
    "}\n");
  hlo_comp *e = m->entry;
  hlo_instr *g = tp_find(e, "g");
  TP_INTS(g->gather.offset_dims, 1);
  TP_INTS(g->gather.collapsed_slice_dims, 0);
  TP_INTS(g->gather.start_index_map, 0);
  TP_INTS(g->gather.slice_sizes, 1, 3);
  assert_int_equal(g->gather.index_vector_dim, 1);
  assert_true(g->gather.indices_are_sorted);
  hlo_instr *s = tp_find(e, "s");
  TP_INTS(s->scatter.update_window_dims, 1);
  TP_INTS(s->scatter.inserted_window_dims, 0);
  TP_INTS(s->scatter.scatter_dims_to_operand_dims, 0);
  assert_int_equal(s->scatter.index_vector_dim, 1);
  assert_true(s->scatter.unique_indices);
  assert_false(s->scatter.indices_are_sorted);
  assert_string_equal(s->calls[0]->name, "upd");
  hlo_instr *c = tp_find(e, "c"), *c2 = tp_find(e, "c2");
  assert_int_equal(c->ncalls, 2);
  assert_string_equal(c->calls[1]->name, "b1");
  assert_int_equal(c2->ncalls, 2);
  assert_string_equal(c2->calls[0]->name, "b0"); /* {true, false} whatever the text order */
  assert_string_equal(c2->calls[1]->name, "b1");
  hlo_module_free(m);
  hj_ctx_destroy(ctx);
}

/* Uses before definitions (computations), nested operands, and fusion. */
static void test_forward_refs_and_nesting(void **state) {
  (void)state;
  hj_ctx_t *ctx = tu_ctx();
  hlo_module *m = tp_parse_ok(ctx,
    "ENTRY e {\n"
    "  p = f32[2] parameter(0)\n"
    "  f = f32[2] fusion(p), kind=kInput, calls=fused\n"
    "  ROOT r = f32[2] add(f32[2] f, f32[2] multiply(p, f32[2] constant({1, 2})))\n"
    "}\n"
    "fused { q = f32[2] parameter(0)\n ROOT n = f32[2] negate(q) }\n");
  assert_string_equal(m->entry->name, "e");
  assert_string_equal(m->comps[0]->name, "fused"); /* callees first */
  hlo_instr *f = tp_find(m->entry, "f");
  assert_int_equal(f->fusion_kind, HLO_FUSION_INPUT);
  assert_ptr_equal(f->calls[0], m->comps[0]);
  hlo_instr *r = m->entry->root;
  assert_string_equal(r->name, "r");
  assert_int_equal(r->operands[1]->op, HLO_OP_MULTIPLY);
  assert_int_equal(r->operands[1]->operands[1]->op, HLO_OP_CONSTANT);
  assert_int_equal(arrlen(m->entry->instrs), 5);
  hlo_module_free(m);
  hj_ctx_destroy(ctx);
}

/* ---- constants ------------------------------------------------------------------------ */

static uint32_t tp_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static const hlo_literal *tp_const(hlo_module *m, const char *name) {
  hlo_instr *ins = tp_find(m->entry, name);
  assert_int_equal(ins->op, HLO_OP_CONSTANT);
  assert_non_null(ins->literal);
  return ins->literal;
}

static void test_constants(void **state) {
  (void)state;
  hj_ctx_t *ctx = tu_ctx();
  hlo_module *m = tp_parse_ok(ctx,
    "ENTRY e {\n"
    "  a = f32[2,3]{0,1} constant({ {1, 2.5, -3}, {4e-1, inf, -inf} })\n"
    "  b = f32[] constant(1.00000005960464477539062501)\n"  /* just above halfway: 1 + 2^-23 */
    "  c = f32[] constant(nan)\n"
    "  d = f16[2] constant({0.1, -65504})\n"
    "  e = bf16[2] constant({0.1, -nan})\n"
    "  f = s8[3] constant({-128, 127, 0})\n"
    "  g = u64[] constant(18446744073709551615)\n"
    "  h = pred[3] constant({true, false, 1})\n"
    "  i = (s32[], (f32[], pred[])) constant((7, (0.5, true)))\n"
    "  j = f32[2,2] constant({...})\n"
    "  k = f64[] constant(0.1)\n"
    "  l = f32[0,2] constant({})\n"
    "  ROOT t = (f32[2,3], f32[]) tuple(a, b)\n"
    "}\n");
  const hlo_literal *a = tp_const(m, "a");
  const float *av = (const float *)a->data; /* logical row-major whatever the layout */
  assert_true(av[0] == 1.0f && av[1] == 2.5f && av[2] == -3.0f && av[3] == 0.4f);
  assert_true(isinf(av[4]) && av[4] > 0 && isinf(av[5]) && av[5] < 0);
  assert_int_equal(a->nbytes, 24);
  assert_int_equal(tp_f32_bits(*(const float *)tp_const(m, "b")->data), 0x3f800001);
  assert_true(isnan(*(const float *)tp_const(m, "c")->data));
  const uint16_t *dv = (const uint16_t *)tp_const(m, "d")->data;
  assert_int_equal(dv[0], 0x2e66); /* IEEE half nearest to 0.1 */
  assert_int_equal(dv[1], 0xfbff); /* -max half */
  const uint16_t *ev = (const uint16_t *)tp_const(m, "e")->data;
  assert_int_equal(ev[0], 0x3dcd); /* bfloat16 nearest to 0.1 */
  assert_int_equal(ev[1] & 0xff80, 0xff80);
  assert_true((ev[1] & 0x7f) != 0);
  const int8_t *fv = (const int8_t *)tp_const(m, "f")->data;
  assert_true(fv[0] == -128 && fv[1] == 127 && fv[2] == 0);
  assert_true(*(const uint64_t *)tp_const(m, "g")->data == UINT64_MAX);
  const uint8_t *hv = tp_const(m, "h")->data;
  assert_true(hv[0] == 1 && hv[1] == 0 && hv[2] == 1);
  const hlo_literal *i = tp_const(m, "i");
  assert_int_equal(i->nelems, 2);
  assert_int_equal(*(const int32_t *)i->elems[0]->data, 7);
  assert_int_equal(i->elems[1]->nelems, 2);
  assert_true(*(const float *)i->elems[1]->elems[0]->data == 0.5f);
  assert_int_equal(i->elems[1]->elems[1]->data[0], 1);
  const hlo_literal *j = tp_const(m, "j"); /* elided: zeros */
  for (int k = 0; k < 4; k++) assert_true(((const float *)j->data)[k] == 0.0f);
  assert_true(*(const double *)tp_const(m, "k")->data == 0.1);
  assert_int_equal(tp_const(m, "l")->nbytes, 0);
  hlo_module_free(m);
  hj_ctx_destroy(ctx);
}

/* ---- errors ---------------------------------------------------------------------------- */

static void test_errors(void **state) {
  (void)state;
  const char *P0 = "ENTRY e {\n  p = f32[2] parameter(0)\n";
  char buf[4096];
#define TP_E(body, code, lc, part)                                                          \
  do {                                                                                    \
    snprintf(buf, sizeof buf, "%s%s", P0, body);                                          \
    tp_fails(buf, code, lc, part);                                                        \
  } while (0)
  TP_E("  ROOT a = f32[2] frobnicate(p)\n}\n", HJ_ERR_UNSUPPORTED, "3:19", "unknown opcode 'frobnicate'");
  TP_E("  ROOT a = f33[2] negate(p)\n}\n", HJ_ERR_PARSE, "3:12", "unknown element type 'f33'");
  TP_E("  ROOT a = f32[2 negate(p)\n}\n", HJ_ERR_PARSE, "3:18", "expected ','");
  TP_E("  ROOT a = f32[2] negate(p\n}\n", HJ_ERR_PARSE, "4:1", "expected ','");
  TP_E("  ROOT a = f32[2] negate(q)\n}\n", HJ_ERR_PARSE, "3:26", "unknown operand 'q'");
  TP_E("  p = f32[2] negate(p)\n}\n", HJ_ERR_PARSE, "3:3", "'p' is already defined");
  TP_E("  ROOT a = f32[1,1,1,1,1,1,1,1,1] reshape(p)\n}\n", HJ_ERR_UNSUPPORTED, "3:32", "more than 8 dimensions");
  TP_E("  ROOT a = f32[2] negate(", HJ_ERR_PARSE, "3:26", "the end of the text");
  TP_E("  ROOT c = f32[3] constant({1, 2})\n}\n", HJ_ERR_PARSE, "3:33", "constant has 2 elements in dimension 0");
  TP_E("  ROOT c = f32[2,2] constant({{1, 2}, {3, 4}, {5, 6}})\n}\n", HJ_ERR_PARSE, "3:45", "more than 2 elements");
  TP_E("  ROOT a = f32[2] custom-call(p), custom_call_target=\"foo\"\n}\n", HJ_ERR_UNSUPPORTED, "3:54",
       "custom-call target \"foo\" is not supported");
  TP_E("  ROOT a = f32[2] all-reduce(p), replica_groups={}\n}\n", HJ_ERR_UNSUPPORTED, "3:19",
       "opcode 'all-reduce' is not supported");
  TP_E("  ROOT a = c64[2] convert(p)\n}\n", HJ_ERR_UNSUPPORTED, "3:12", "element type 'c64' is not supported");
  TP_E("  ROOT a = f32[2] negate(p), foo=1\n}\n", HJ_ERR_PARSE, "3:30", "unknown attribute 'foo'");
  TP_E("  ROOT a = f32[2] negate(p), dimensions={0}\n}\n", HJ_ERR_PARSE, "3:30", "does not apply to op 'negate'");
  TP_E("  ROOT a = pred[2] compare(p, p)\n}\n", HJ_ERR_PARSE, "3:20", "needs the attribute 'direction'");
  TP_E("  ROOT a = pred[2] compare(p, p), direction=LT, direction=GT\n}\n", HJ_ERR_PARSE, "3:49", "given twice");
  TP_E("  ROOT c = s8[] constant(128)\n}\n", HJ_ERR_PARSE, "3:26", "out of range for s8");
  TP_E("  ROOT c = u32[] constant(-1)\n}\n", HJ_ERR_PARSE, "3:27", "out of range for u32");
  TP_E("  ROOT c = f16[] constant(70000)\n}\n", HJ_ERR_PARSE, "3:27", "out of range for f16");
  TP_E("  ROOT a = f32[2]{1} negate(p)\n}\n", HJ_ERR_PARSE, "3:19", "layout entry '1'");
  TP_E("  q = f32[2] parameter(2)\n}\n", HJ_ERR_PARSE, "3:24", "numbers must be 0..1");
  TP_E("  ROOT a = f32[] reduce(p, p), dimensions={0}, to_apply=nowhere\n}\n", HJ_ERR_PARSE, "3:57",
       "unknown computation 'nowhere'");
  TP_E("  ROOT a = f32[2] negate(p), sharding={devices=[2]0,1}\n}\n", HJ_ERR_UNSUPPORTED, "3:39",
       "sharding '{devices=[2]0,1}' is not supported");
  TP_E("  ROOT a = f32[2] negate(p) /* never closed\n}\n", HJ_ERR_PARSE, "3:29", "unterminated /* comment");
  TP_E("  ROOT a = f32[2] negate(p)\n  ROOT b = f32[2] negate(p)\n}\n", HJ_ERR_PARSE, "4:8", "second ROOT");
  TP_E("  ROOT a = f32[2] add(p)\n}\n", HJ_ERR_PARSE, "3:22", "takes 2 operands, got 1");
  TP_E("  ROOT a = f32[?] negate(p)\n}\n", HJ_ERR_UNSUPPORTED, "3:16", "unbounded dynamic dimension");
  TP_E("  ROOT a = f32[99999999999999999999] negate(p)\n}\n", HJ_ERR_PARSE, "3:16", "out of range");
  TP_E("  ROOT a = f32[65536,65536,65536,65536] broadcast(p), dimensions={0}\n}\n", HJ_ERR_PARSE, "3:15",
       "too many elements");
  TP_E("  ROOT a = s32[2] iota()\n}\n", HJ_ERR_PARSE, "3:19", "needs the attribute 'iota_dimension'");
  TP_E("  ROOT a = f32[2] pad(p, p), padding=1_\n}\n", HJ_ERR_PARSE, "3:40", "expected padding");
  TP_E("  ROOT a = f32[2] constant(1)\n}\n", HJ_ERR_PARSE, "3:28", "expected '{'");
  TP_E("  ROOT c = f32[] constant(1.5.5)\n}\n", HJ_ERR_PARSE, "3:30", "expected ')'");
  TP_E("  ROOT a = negate(p), metadata={op_name=[\"x\"\n}\n", HJ_ERR_PARSE, "4:1", "mismatched closing bracket");
  TP_E("  ROOT a = f32[2] negate(p)\n}\nENTRY f { q = f32[] parameter(0) }\nENTRY g { q = f32[] parameter(0) }\n",
       HJ_ERR_PARSE, "5:7", "second ENTRY");
  /* The verifier's findings are located too: at the instruction they name. */
  TP_E("  ROOT a = f32[3] negate(p)\n}\n", HJ_ERR_SHAPE, "3:12", "declares f32[3]");
#undef TP_E
  /* A tuple shape nested deeper than the limit. */
  char deep[512] = "e { ROOT p = ";
  for (int i = 0; i < 70; i++) strcat(deep, "(");
  strcat(deep, "f32[]");
  for (int i = 0; i < 70; i++) strcat(deep, ")");
  strcat(deep, " parameter(0) }");
  tp_fails(deep, HJ_ERR_PARSE, "1:78", "nested too deeply");
  /* Computations that call each other. */
  tp_fails("a { p = f32[] parameter(0)\n ROOT c = f32[] call(p), to_apply=b }\n"
           "b { p = f32[] parameter(0)\n ROOT c = f32[] call(p), to_apply=a }\n"
           "ENTRY e { p = f32[] parameter(0)\n ROOT c = f32[] call(p), to_apply=a }\n",
           HJ_ERR_PARSE, "1:1", "cycle");
  tp_fails("a { p = f32[] parameter(0)\n ROOT c = f32[] call(p), to_apply=a }\n", HJ_ERR_PARSE, "2:35",
           "calls itself");
  tp_fails("", HJ_ERR_PARSE, "1:1", "no computation");
  /* The file name leads the message. */
  hj_ctx_t *ctx = tu_ctx();
  hlo_module *m = NULL;
  const char *t = "e { ROOT p = f32[] parameter(0) } junk";
  assert_int_equal(hlo_parse_module(ctx, t, strlen(t), "dir/x.hlo", &m), HJ_ERR_PARSE);
  tp_has(hj_ctx_error(ctx), "dir/x.hlo:1:39: expected '{'");
  hj_ctx_destroy(ctx);
}

/* ---- robustness ------------------------------------------------------------------------ */

/* The text is read only up to |len|: what follows must not matter. */
static void test_length_respected(void **state) {
  (void)state;
  hj_ctx_t *ctx = tu_ctx();
  const char *t = "e { ROOT p = f32[] parameter(0) }GARBAGE{{{";
  hlo_module *m = NULL;
  CHECK_OK(ctx, hlo_parse_module(ctx, t, strlen(t) - 10, NULL, &m));
  hlo_module_free(m);
  /* A number, a name, a comment and a string cut by the end of the buffer. */
  const char *cuts[] = { "e { ROOT p = f32[] constant(1.5", "e { ROOT p", "e { ROOT p = f32[] parameter(0) } /",
                         "e { ROOT p = f32[] parameter(0), backend_config=\"abc" };
  for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
    size_t n = strlen(cuts[i]);
    char *exact = malloc(n); /* no NUL after it: ASan sees any read past the end */
    memcpy(exact, cuts[i], n);
    m = (hlo_module *)1;
    hj_status st = hlo_parse_module(ctx, exact, n, NULL, &m);
    assert_int_equal(st, HJ_ERR_PARSE);
    assert_null(m);
    free(exact);
  }
  hj_ctx_destroy(ctx);
}

/* Every prefix of a module with most of the syntax parses or fails with a located message. */
static void test_truncations(void **state) {
  (void)state;
  hj_ctx_t *ctx = tu_ctx();
  size_t n = strlen(tp_module);
  int ok = 0;
  for (size_t k = 0; k <= n; k++) {
    char *exact = malloc(k ? k : 1);
    memcpy(exact, tp_module, k);
    hlo_module *m = (hlo_module *)1;
    hj_status st = hlo_parse_module(ctx, exact, k, NULL, &m);
    if (st == HJ_OK) {
      ok++;
      hlo_module_free(m);
    } else {
      assert_null(m);
      if (st == HJ_ERR_PARSE) tp_has(hj_ctx_error(ctx), "^");
    }
    free(exact);
  }
  assert_true(ok >= 1); /* at least the whole text */
  hj_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_corpus),
    cmocka_unit_test(test_jax_fixtures),
    cmocka_unit_test(test_syntax),
    cmocka_unit_test(test_gather_scatter_conditional),
    cmocka_unit_test(test_forward_refs_and_nesting),
    cmocka_unit_test(test_constants),
    cmocka_unit_test(test_errors),
    cmocka_unit_test(test_length_respected),
    cmocka_unit_test(test_truncations),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
