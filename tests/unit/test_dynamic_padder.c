/* test_dynamic_padder.c — the dynamic padder (passes/dynamic_padder.c), checked against the
   unpadded computation on the reference evaluator.

   Each case is one HLO template with placeholders for the dynamic size n:
     $D        a dim of size n: "s" in the unpadded module, "<=B" in the padded one;
     $N        the number n (s, or B);
     $A(a,b,c) a dim of size (a n + b) / c ("<=" and the bound in the padded one);
     $V(a,b,c) the number (a n + b) / c.
   For every real size s in 1..B (from the case's minimum) the unpadded module (every n = s)
   and the padded one (n = B, bounded dims, then hlo_pass_dynamic_pad) run on the same data:
   the padded inputs hold the unpadded values at the same indices and zeros elsewhere (the
   pass's contract), the size parameters hold s, and each output, cut back to the real size
   the pass reports (a size parameter or a size output), must equal the unpadded output bit
   for bit — zeros appended to a sum, -inf to a max, 0 * x to a dot change no bit on the
   evaluator, which sums in index order. Float inputs are never 0 (x/x is 1 on real lanes,
   NaN on padded ones: the NaN guard cases), integer inputs run a little past the real size
   (clamping cases). A second table holds modules the pass must decline (UNSUPPORTED). */
#include "testutil.h"
#include <math.h>

#define TDP_B 8

typedef struct tdp_case {
  const char *name;
  const char *text;
  int min_s;                   /* smallest real size the module is defined for */
  int int_lo, int_hi;          /* integer inputs in [int_lo, s + int_hi] */
} tdp_case;

#define TDP_REDUCERS                                                                     \
  "add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }\n"       \
  "max { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT m = f32[] maximum(a, b) }\n"

static const tdp_case tdp_cases[] = {
  { "softmax", "HloModule softmax\n" TDP_REDUCERS
    "ENTRY e {\n  x = f32[3,$D] parameter(0)\n  ninf = f32[] constant(-inf)\n"
    "  m = f32[3] reduce(x, ninf), dimensions={1}, to_apply=max\n"
    "  mb = f32[3,$D] broadcast(m), dimensions={0}\n  z = f32[3,$D] subtract(x, mb)\n"
    "  ex = f32[3,$D] exponential(z)\n  zero = f32[] constant(0)\n"
    "  s = f32[3] reduce(ex, zero), dimensions={1}, to_apply=add\n"
    "  sb = f32[3,$D] broadcast(s), dimensions={0}\n  ROOT r = f32[3,$D] divide(ex, sb)\n}\n", 1, 0, 0 },
  { "mean_var", "HloModule mean_var\n" TDP_REDUCERS
    "ENTRY e {\n  x = f32[$D,2] parameter(0)\n  zero = f32[] constant(0)\n"
    "  s = f32[2] reduce(x, zero), dimensions={0}, to_apply=add\n"
    "  n = s32[] get-dimension-size(x), dimensions={0}\n  nf = f32[] convert(n)\n"
    "  nb = f32[2] broadcast(nf), dimensions={}\n  mean = f32[2] divide(s, nb)\n"
    "  mb = f32[$D,2] broadcast(mean), dimensions={1}\n  d = f32[$D,2] subtract(x, mb)\n"
    "  d2 = f32[$D,2] multiply(d, d)\n  v = f32[2] reduce(d2, zero), dimensions={0}, to_apply=add\n"
    "  var = f32[2] divide(v, nb)\n  ROOT t = (f32[2], f32[2], s32[]) tuple(mean, var, n)\n}\n", 1, 0, 0 },
  { "dot_params", "HloModule dot_params\n"
    "ENTRY e {\n  x = f32[2,$D] parameter(0)\n  y = f32[$D,3] parameter(1)\n"
    "  ROOT d = f32[2,3] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n", 1, 0, 0 },
  { "dot_masked", "HloModule dot_masked\n"
    "ENTRY e {\n  x = f32[2,$D] parameter(0)\n  y = f32[$D,3] parameter(1)\n"
    "  ex = f32[2,$D] exponential(x)\n  ey = f32[$D,3] divide(y, y)\n"
    "  ROOT d = f32[2,3] dot(ex, ey), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n", 1, 0, 0 },
  { "causal_attention", "HloModule attention\n" TDP_REDUCERS
    "ENTRY e {\n  q = f32[$D,4] parameter(0)\n  k = f32[$D,4] parameter(1)\n  v = f32[$D,4] parameter(2)\n"
    "  s = f32[$D,$D] dot(q, k), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n"
    "  i = s32[$D,$D] iota(), iota_dimension=0\n  j = s32[$D,$D] iota(), iota_dimension=1\n"
    "  c = pred[$D,$D] compare(j, i), direction=LE\n  ninf = f32[] constant(-inf)\n"
    "  nb = f32[$D,$D] broadcast(ninf), dimensions={}\n  sm = f32[$D,$D] select(c, s, nb)\n"
    "  m = f32[$D] reduce(sm, ninf), dimensions={1}, to_apply=max\n"
    "  mb = f32[$D,$D] broadcast(m), dimensions={0}\n  z = f32[$D,$D] subtract(sm, mb)\n"
    "  ex = f32[$D,$D] exponential(z)\n  zero = f32[] constant(0)\n"
    "  t = f32[$D] reduce(ex, zero), dimensions={1}, to_apply=add\n"
    "  tb = f32[$D,$D] broadcast(t), dimensions={0}\n  p = f32[$D,$D] divide(ex, tb)\n"
    "  ROOT o = f32[$D,4] dot(p, v), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n", 1, 0, 0 },
  { "gather", "HloModule gather\n"
    "ENTRY e {\n  x = f32[$D,3] parameter(0)\n  i = s32[$D] parameter(1)\n"
    "  ROOT g = f32[$D,3] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, "
    "index_vector_dim=1, slice_sizes={1,3}\n}\n", 1, -2, 2 },
  { "concatenate", "HloModule concatenate\n" TDP_REDUCERS
    "ENTRY e {\n  a = f32[$D,2] parameter(0)\n  b = f32[3,2] parameter(1)\n  c = f32[$D,2] parameter(2)\n"
    "  k = f32[$A(2,3,1),2] concatenate(a, b, c), dimensions={0}\n  zero = f32[] constant(0)\n"
    "  s = f32[2] reduce(k, zero), dimensions={0}, to_apply=add\n"
    "  ROOT t = (f32[$A(2,3,1),2], f32[2]) tuple(k, s)\n}\n", 1, 0, 0 },
  { "cumsum", "HloModule cumsum\n" TDP_REDUCERS
    "ENTRY e {\n  x = f32[2,$D] parameter(0)\n  zero = f32[] constant(0)\n"
    "  c = f32[2,$D] reduce-window(x, zero), window={size=1x$N pad=0_0x$V(1,-1,1)_0}, to_apply=add\n"
    "  r = f32[2,$D] reduce-window(x, zero), window={size=1x$N pad=0_0x0_$V(1,-1,1)}, to_apply=add\n"
    "  ROOT t = (f32[2,$D], f32[2,$D]) tuple(c, r)\n}\n", 1, 0, 0 },
  { "pad_reverse", "HloModule pad_reverse\n" TDP_REDUCERS
    "ENTRY e {\n  x = f32[$D,2] parameter(0)\n  c = f32[] constant(7)\n"
    "  p = f32[$A(2,2,1),2] pad(x, c), padding=1_2_1x0_0\n"
    "  r = f32[$D,2] reverse(x), dimensions={0}\n  ROOT t = (f32[$A(2,2,1),2], f32[$D,2]) tuple(p, r)\n}\n",
    1, 0, 0 },
  { "slices", "HloModule slices\n"
    "ENTRY e {\n  x = f32[$D,2] parameter(0)\n  i = s32[] parameter(1)\n  z = s32[] constant(0)\n"
    "  s = f32[$V(1,0,2),2] slice(x), slice={[1:$N:2], [0:2]}\n"
    "  d = f32[1,2] dynamic-slice(x, i, z), dynamic_slice_sizes={1,2}\n"
    "  ROOT t = (f32[$V(1,0,2),2], f32[1,2]) tuple(s, d)\n}\n", 2, -2, 2 },
  { "dus_static_update", "HloModule dus_static_update\n"
    "ENTRY e {\n  x = f32[$D,3] parameter(0)\n  u = f32[1,3] parameter(1)\n  i = s32[] parameter(2)\n"
    "  z = s32[] constant(0)\n  ROOT d = f32[$D,3] dynamic-update-slice(x, u, i, z)\n}\n", 1, -2, 2 },
  { "dus_dynamic_update", "HloModule dus_dynamic_update\n"
    "ENTRY e {\n  x = f32[9,3] parameter(0)\n  u = f32[$D,3] parameter(1)\n  i = s32[] parameter(2)\n"
    "  z = s32[] constant(0)\n  ROOT d = f32[9,3] dynamic-update-slice(x, u, i, z)\n}\n", 1, -2, 2 },
  { "reshape_transpose", "HloModule reshape_transpose\n" TDP_REDUCERS
    "ENTRY e {\n  x = f32[$D,4] parameter(0)\n  r = f32[$A(4,0,1)] reshape(x)\n  ninf = f32[] constant(-inf)\n"
    "  m = f32[] reduce(r, ninf), dimensions={0}, to_apply=max\n"
    "  t = f32[4,$D] transpose(x), dimensions={1,0}\n  zero = f32[] constant(0)\n"
    "  s = f32[4] reduce(t, zero), dimensions={1}, to_apply=add\n"
    "  ROOT o = (f32[$A(4,0,1)], f32[], f32[4]) tuple(r, m, s)\n}\n", 1, 0, 0 },
  { "argmax", "HloModule argmax\n"
    "amax { av = f32[] parameter(0)  ai = s32[] parameter(1)  bv = f32[] parameter(2)  bi = s32[] parameter(3)\n"
    "  gt = pred[] compare(av, bv), direction=GE\n  v = f32[] select(gt, av, bv)\n  i = s32[] select(gt, ai, bi)\n"
    "  ROOT t = (f32[], s32[]) tuple(v, i) }\n"
    "ENTRY e {\n  x = f32[2,$D] parameter(0)\n  io = s32[2,$D] iota(), iota_dimension=1\n"
    "  ninf = f32[] constant(-inf)\n  z = s32[] constant(0)\n"
    "  r = (f32[2], s32[2]) reduce(x, io, ninf, z), dimensions={1}, to_apply=amax\n"
    "  ROOT i = s32[2] get-tuple-element(r), index=1\n}\n", 1, 0, 0 },
  { "nan_rows_guarded", "HloModule nan_rows\n" TDP_REDUCERS
    "ENTRY e {\n  x = f32[$D,4] parameter(0)\n  xx = f32[$D,4] multiply(x, x)\n  l = f32[$D,4] log(xx)\n"
    "  ninf = f32[] constant(-inf)\n  zero = f32[] constant(0)\n"
    "  m = f32[$D] reduce(l, ninf), dimensions={1}, to_apply=max\n"
    "  mb = f32[$D,4] broadcast(m), dimensions={0}\n  lm = f32[$D,4] subtract(l, mb)\n"
    "  ex = f32[$D,4] exponential(lm)\n  s = f32[$D] reduce(ex, zero), dimensions={1}, to_apply=add\n"
    "  sb = f32[$D,4] broadcast(s), dimensions={0}\n  p = f32[$D,4] divide(ex, sb)\n"
    "  c = f32[4] reduce(p, zero), dimensions={0}, to_apply=add\n"
    "  y = f32[$D,4] divide(x, x)\n  w = f32[4] reduce(y, zero), dimensions={0}, to_apply=add\n"
    "  ROOT t = (f32[4], f32[4]) tuple(c, w)\n}\n", 1, 0, 0 },
};

static const tdp_case tdp_declined[] = {
  { "sort_along", "HloModule sort_along\n"
    "lt { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT c = pred[] compare(a, b), direction=LT }\n"
    "ENTRY e {\n  x = f32[$D] parameter(0)\n  ROOT s = f32[$D] sort(x), dimensions={0}, to_apply=lt\n}\n", 1, 0, 0 },
  { "reshape_split", "HloModule reshape_split\n"
    "ENTRY e {\n  x = f32[$A(4,0,1)] parameter(0)\n  ROOT r = f32[$N,4] reshape(x)\n}\n", 1, 0, 0 },
  { "iota_reduced", "HloModule iota_reduced\n" TDP_REDUCERS
    "ENTRY e {\n  x = f32[$D] parameter(0)\n  i = f32[$D] iota(), iota_dimension=0\n"
    "  zero = f32[] constant(0)\n  ROOT s = f32[] reduce(i, zero), dimensions={0}, to_apply=add\n}\n", 1, 0, 0 },
};

/* ---- templates and data ------------------------------------------------------------------------ */

/* The template with every placeholder at n (|padded|: bounded dims). malloc'd. */
static char *tdp_subst(const char *t, int64_t n, bool padded) {
  char *sb = NULL;
  for (const char *p = t; *p; p++) {
    if (*p != '$') {
      arrput(sb, *p);
      continue;
    }
    long a = 1, b = 0, c = 1;
    char kind = p[1];
    p++;
    if (kind == 'A' || kind == 'V') {
      int used = 0;
      if (sscanf(p + 1, "(%ld,%ld,%ld)%n", &a, &b, &c, &used) != 3) fail_msg("bad placeholder in %s", t);
      p += used;
    }
    char num[32];
    bool dim = kind == 'D' || kind == 'A';
    snprintf(num, sizeof num, "%s%lld", dim && padded ? "<=" : "", (long long)((a * n + b) / c));
    for (char *q = num; *q; q++) arrput(sb, *q);
  }
  arrput(sb, 0);
  char *r = strdup(sb);
  arrfree(sb);
  return r;
}

static hlo_module *tdp_parse(hj_ctx_t *ctx, const char *text) {
  hlo_module *m = NULL;
  hj_status st = hlo_parse_module(ctx, text, strlen(text), "tdp", &m);
  if (st != HJ_OK) fail_msg("parse: %s\n%s", hj_ctx_error(ctx), text);
  return m;
}

/* A value that depends only on the multi-index |idx| of parameter |p|. */
static uint64_t tdp_hash(int p, const int64_t *idx, int rank) {
  uint64_t h = 0x9e3779b97f4a7c15ull * (uint64_t)(p + 1);
  for (int d = 0; d < rank; d++) h = (h ^ (uint64_t)(idx[d] + 1)) * 0xff51afd7ed558ccdull;
  return h ^ (h >> 29);
}

/* Parameter |p|'s data at shape |s|; |real|: the unpadded dims (lanes outside are 0). */
static hlo_literal *tdp_input(hj_ctx_t *ctx, const tdp_case *tc, int p, const hlo_shape *s, const int64_t *real,
                              int64_t sz) {
  hlo_shape as = *s;
  memset(as.dynamic, 0, sizeof as.dynamic);
  hlo_literal *l = hlo_literal_new(ctx, &as);
  assert_non_null(l);
  int64_t n = hlo_shape_numel(&as), idx[HLO_MAX_RANK] = { 0 };
  for (int64_t i = 0; i < n; i++) {
    bool in = true;
    for (int d = 0; d < as.rank; d++) in &= idx[d] < real[d];
    uint64_t h = tdp_hash(p, idx, as.rank);
    if (in && hlo_type_is_float(as.type)) hlo_store_f64(as.type, l->data, i, ((double)(h % 2000) - 999.5) / 1000.0);
    else if (in) hlo_store_s64(as.type, l->data, i, tc->int_lo + (int64_t)(h % (uint64_t)(sz + tc->int_hi - tc->int_lo + 1)));
    for (int d = as.rank - 1; d >= 0; d--) {
      if (++idx[d] < as.dims[d]) break;
      idx[d] = 0;
    }
  }
  return l;
}

/* |padded| (dims |pd|) cut to |real|'s dims equals |real|, bit for bit (NaN = NaN). */
static void tdp_compare(const char *what, const hlo_literal *real, const hlo_literal *padded) {
  const hlo_shape *rs = &real->shape, *ps = &padded->shape;
  assert_int_equal(rs->rank, ps->rank);
  int es = hlo_type_size(rs->type);
  int64_t n = hlo_shape_numel(rs), idx[HLO_MAX_RANK] = { 0 }, pst[HLO_MAX_RANK];
  hlo_shape_strides(ps, pst);
  for (int64_t i = 0; i < n; i++) {
    int64_t pi = 0;
    for (int d = 0; d < rs->rank; d++) pi += idx[d] * pst[d];
    const uint8_t *a = real->data + i * es, *b = padded->data + pi * es;
    bool nan = hlo_type_is_float(rs->type) && isnan(hlo_load_f64(rs->type, a, 0)) && isnan(hlo_load_f64(rs->type, b, 0));
    if (memcmp(a, b, (size_t)es) != 0 && !nan)
      fail_msg("%s: element %lld: unpadded %.9g, padded %.9g", what, (long long)i, hlo_load_f64(rs->type, a, 0),
               hlo_load_f64(rs->type, b, 0));
    for (int d = rs->rank - 1; d >= 0; d--) {
      if (++idx[d] < rs->dims[d]) break;
      idx[d] = 0;
    }
  }
}

static const hlo_literal *tdp_leaf(const hlo_literal *l, int k) {
  return l->shape.type == HLO_TUPLE ? l->elems[k] : l;
}

/* One case at real size |s|. */
static void tdp_run(hj_ctx_t *ctx, const tdp_case *tc, int64_t s) {
  char *tu = tdp_subst(tc->text, s, false), *tp = tdp_subst(tc->text, TDP_B, true);
  hlo_module *mu = tdp_parse(ctx, tu), *mp = tdp_parse(ctx, tp);
  int np = (int)arrlen(mu->entry->params);
  hlo_literal *au[16] = { 0 }, *ap[32] = { 0 };
  for (int p = 0; p < np; p++) {
    const hlo_shape *us = &mu->entry->params[p]->shape;
    au[p] = tdp_input(ctx, tc, p, us, us->dims, s);
    ap[p] = tdp_input(ctx, tc, p, &mp->entry->params[p]->shape, us->dims, s);
  }
  pass_dyn_info info;
  hj_status st = hlo_pass_dynamic_pad(&(hlo_pass_ctx){ .dyn_info = &info }, mp, NULL);
  if (st != HJ_OK) fail_msg("%s: hlo_pass_dynamic_pad: %s", tc->name, hj_ctx_error(ctx));
  assert_int_equal(info.nparams, np);
  for (ptrdiff_t k = 0; k < arrlen(info.params); k++) {
    hlo_shape ss = hlo_shape_scalar(HLO_S32);
    ap[info.params[k].size_param] = hlo_literal_new(ctx, &ss);
    *(int32_t *)ap[info.params[k].size_param]->data =
        (int32_t)mu->entry->params[info.params[k].param]->shape.dims[info.params[k].dim];
  }
  int nargs = np + (int)arrlen(info.params);
  hlo_literal *ru = NULL, *rp = NULL;
  CHECK_OK(ctx, hlo_eval_module(ctx, mu, au, np, &ru));
  CHECK_OK(ctx, hlo_eval_module(ctx, mp, ap, nargs, &rp));
  /* cut each padded output to the sizes the pass says, then compare */
  for (int o = 0; o < info.noutputs; o++) {
    hlo_literal cut = *tdp_leaf(rp, o);
    for (ptrdiff_t k = 0; k < arrlen(info.outs); k++) {
      const pass_dyn_out *u = &info.outs[k];
      if (u->output != o) continue;
      int32_t v = u->size_param >= 0 ? *(int32_t *)ap[u->size_param]->data
                                     : *(int32_t *)tdp_leaf(rp, u->size_output)->data;
      cut.shape.dims[u->dim] = v;
    }
    const hlo_literal *want = tdp_leaf(ru, o);
    char what[96];
    snprintf(what, sizeof what, "%s s=%lld output %d", tc->name, (long long)s, o);
    for (int d = 0; d < want->shape.rank; d++)
      if (cut.shape.dims[d] != want->shape.dims[d])
        fail_msg("%s: dim %d is %lld, unpadded %lld", what, d, (long long)cut.shape.dims[d],
                 (long long)want->shape.dims[d]);
    tdp_compare(what, want, tdp_leaf(rp, o));
  }
  hlo_literal_free(ru);
  hlo_literal_free(rp);
  for (int p = 0; p < nargs; p++) hlo_literal_free(ap[p]);
  for (int p = 0; p < np; p++) hlo_literal_free(au[p]);
  pass_dyn_info_free(&info);
  hlo_module_free(mu);
  hlo_module_free(mp);
  free(tu);
  free(tp);
}

static void test_padded_equals_unpadded(void **state) {
  hj_ctx_t *ctx = tu_ctx();
  for (size_t c = 0; c < sizeof tdp_cases / sizeof tdp_cases[0]; c++)
    for (int64_t s = tdp_cases[c].min_s; s <= TDP_B; s++) tdp_run(ctx, &tdp_cases[c], s);
  hj_ctx_destroy(ctx);
}

/* The pass declines what its rules do not cover, naming the op. */
static void test_declined(void **state) {
  hj_ctx_t *ctx = tu_ctx();
  static const char *const ops[] = { "sort", "reshape", "reduce" };
  for (size_t c = 0; c < sizeof tdp_declined / sizeof tdp_declined[0]; c++) {
    char *tp = tdp_subst(tdp_declined[c].text, TDP_B, true);
    hlo_module *m = tdp_parse(ctx, tp);
    pass_dyn_info info;
    hj_status st = hlo_pass_dynamic_pad(&(hlo_pass_ctx){ .dyn_info = &info }, m, NULL);
    if (st != HJ_ERR_UNSUPPORTED) fail_msg("%s: got %s (%s)", tdp_declined[c].name, hj_status_name(st), hj_ctx_error(ctx));
    char want[64];
    snprintf(want, sizeof want, "op '%s'", ops[c]);
    if (!strstr(hj_ctx_error(ctx), want)) fail_msg("%s: message \"%s\" lacks \"%s\"", tdp_declined[c].name, hj_ctx_error(ctx), want);
    hj_ctx_clear_error(ctx);
    pass_dyn_info_free(&info);
    hlo_module_free(m);
    free(tp);
  }
  hj_ctx_destroy(ctx);
}

/* The pipeline's line: get-dimension-size reads the bound; a module compiled on its own
   runs at its bounds, as before. */
static void test_pipeline_folds_dimension_size(void **state) {
  hj_ctx_t *ctx = tu_ctx();
  hlo_module *m = tdp_parse(ctx, "HloModule g\nENTRY e {\n  x = f32[<=6,2] parameter(0)\n"
                                 "  ROOT n = s32[] get-dimension-size(x), dimensions={0}\n}\n");
  hlo_pass_ctx pc;
  rt_pass_ctx_init(&pc, ctx);
  bool ch = false;
  CHECK_OK(ctx, hlo_pass_dynamic_padder(&pc, m, &ch));
  assert_true(ch);
  assert_int_equal(m->entry->root->op, HLO_OP_CONSTANT);
  assert_int_equal(*(int32_t *)m->entry->root->literal->data, 6);
  char *text = NULL;
  CHECK_OK(ctx, hlo_print_module(m, &text));
  free(text);
  hlo_module_free(m);
  hj_ctx_destroy(ctx);
}

/* The padded module's signature: one s32[] parameter per dynamic dim, in order; an output
   size that is not a parameter comes back as an s32[] output. */
static void test_signature(void **state) {
  hj_ctx_t *ctx = tu_ctx();
  char *tp = tdp_subst(tdp_cases[6].text, TDP_B, true);   /* concatenate */
  hlo_module *m = tdp_parse(ctx, tp);
  pass_dyn_info info;
  CHECK_OK(ctx, hlo_pass_dynamic_pad(&(hlo_pass_ctx){ .dyn_info = &info }, m, NULL));
  assert_int_equal(arrlen(info.params), 2);
  assert_int_equal(info.params[0].param, 0);
  assert_int_equal(info.params[0].size_param, 3);
  assert_int_equal(info.params[1].param, 2);
  assert_int_equal(info.params[1].size_param, 4);
  assert_int_equal(info.noutputs, 2);
  assert_int_equal(info.nsize_outputs, 1);
  assert_int_equal(arrlen(info.outs), 1);
  assert_int_equal(info.outs[0].size_output, 2);
  for (ptrdiff_t i = 0; i < arrlen(m->entry->instrs); i++)
    for (int d = 0; d < m->entry->instrs[i]->shape.rank; d++) assert_false(m->entry->instrs[i]->shape.dynamic[d]);
  pass_dyn_info_free(&info);
  hlo_module_free(m);
  free(tp);
  hj_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_padded_equals_unpadded),
    cmocka_unit_test(test_declined),
    cmocka_unit_test(test_pipeline_folds_dimension_size),
    cmocka_unit_test(test_signature),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
