/* test_emit.c — the core emitters (emitters/emit_core.c, elemental*.c, emit_math.c, loop.c,
   emitter.c) against the evaluator, through emit_testutil.h: every elementwise op on every
   element type it is defined on (edge values mixed in: NaN, ±inf, -0, subnormals, INT_MIN,
   x/0, shifts >= width), every convert and bitcast-convert pair, every structural op the
   elemental emitter handles, reduce/map/tuples inside loop fusions, multi-op fusions from
   the corpus (../shared/hlo-corpus or $HLOJIT_CORPUS; skipped, saying so, without it).
   Exact for integers, pred and ops without rounding (and libm-backed math, which calls the
   evaluator's own libm); f32 polynomial math within the bounds stated in emit_math.c,
   f16/bf16 math within 1 ulp of the half type. Also: the optimised IR of an f32
   elementwise fusion holds <8 x float>/<16 x float> (AVX2 hosts), the ulp sweep of the f32
   math, classification, and a printed benchmark (GELU-tanh on 16M f32 vs a triad loop). */
#include "emit_testutil.h"
#include <time.h>

#if defined(__SANITIZE_ADDRESS__)
#define TE_SANITIZED 1
#else
#define TE_SANITIZED 0
#endif

static etu_env te_env;

static int te_setup(void **state) {
  etu_env_init(&te_env);
  return 0;
}
static int te_teardown(void **state) {
  etu_env_free(&te_env);
  return 0;
}

static const hlo_type te_types[] = { HLO_PRED, HLO_S8, HLO_S16, HLO_S32, HLO_S64, HLO_U8, HLO_U16,
                                     HLO_U32, HLO_U64, HLO_F16, HLO_BF16, HLO_F32, HLO_F64 };
#define TE_NT ((int)(sizeof te_types / sizeof te_types[0]))

static bool te_poly_math(hlo_opcode op) {
  return op == HLO_OP_EXP || op == HLO_OP_EXPM1 || op == HLO_OP_LOG || op == HLO_OP_LOG1P ||
         op == HLO_OP_TANH || op == HLO_OP_LOGISTIC || op == HLO_OP_ERF;
}

/* Tolerance of |op| on |t|: the polynomial math is approximate on f32/f16/bf16. The evaluator
   calls libm's f32 function (within 1 ulp itself); f32 tanh gets 4 ulps, not 3, as its own
   error (emit_math.c: 2.95 measured, bound 3.5) leaves no room for libm's. */
static int64_t te_ulp(hlo_opcode op, hlo_type t) {
  if (!te_poly_math(op) || t == HLO_F64) return 0;
  if (t != HLO_F32) return 1;
  return op == HLO_OP_TANH ? 4 : 3;
}

static void te_run(const char *text, const char *instr, int64_t ulp, bool edges, bool force_loop) {
  etu_opts o = etu_opts_default();
  o.ulp = ulp;
  o.edges = edges;
  o.force_loop = force_loop;
  ETU_CHECK(&te_env, text, instr, &o);
}

/* ---- elementwise ops × types -------------------------------------------------------------- */

static void te_elementwise(hlo_opcode op, int *ran, int *skipped) {
  for (int ti = 0; ti < TE_NT; ti++) {
    hlo_type t = te_types[ti];
    hlo_elem_op e = { .op = op, .out = t, .in = { t, t, t }, .nin = 1 };
    if (op == HLO_OP_CLAMP) e.nin = 3;
    else if (hlo_opcode_kind(op) == HLO_KIND_BINARY || op == HLO_OP_COMPARE) e.nin = 2;
    if (op == HLO_OP_SELECT) { e.nin = 3; e.in[0] = HLO_PRED; }
    if (op == HLO_OP_COMPARE || op == HLO_OP_IS_FINITE) e.out = HLO_PRED;
    if (hlo_elem_unsupported(&e)) continue;
    const char *tn = hlo_type_name(t), *on = hlo_opcode_name(op);
    char text[1024];
    int dirs = op == HLO_OP_COMPARE ? HLO_CMP_COUNT * (hlo_type_is_float(t) ? 2 : 1) : 1;
    for (int d = 0; d < dirs; d++) {
      int n = snprintf(text, sizeof text, "HloModule t\nENTRY e {\n");
      for (int k = 0; k < e.nin; k++)
        n += snprintf(text + n, sizeof text - (size_t)n, "  p%d = %s[37,29] parameter(%d)\n", k,
                      hlo_type_name(e.in[k]), k);
      n += snprintf(text + n, sizeof text - (size_t)n, "  ROOT r = %s[37,29] %s(", hlo_type_name(e.out), on);
      for (int k = 0; k < e.nin; k++) n += snprintf(text + n, sizeof text - (size_t)n, "%sp%d", k ? ", " : "", k);
      n += snprintf(text + n, sizeof text - (size_t)n, ")");
      if (op == HLO_OP_COMPARE)
        n += snprintf(text + n, sizeof text - (size_t)n, ", direction=%s%s",
                      hlo_cmp_dir_name((hlo_cmp_dir)(d % HLO_CMP_COUNT)), d >= HLO_CMP_COUNT ? ", type=TOTALORDER" : "");
      snprintf(text + n, sizeof text - (size_t)n, "\n}\n");
      (void)tn;
      hlo_module *m = NULL;
      if (hlo_parse_module(te_env.ctx, text, strlen(text), "v", &m) != HJ_OK) {
        (*skipped)++;   /* the verifier rejects it (pred abs, ...): nothing to emit */
        continue;
      }
      hlo_module_free(m);
      te_run(text, NULL, te_ulp(op, t), true, false);
      (*ran)++;
    }
  }
}

static void test_elementwise_all_types(void **state) {
  int ran = 0, skipped = 0;
  for (int op = 0; op < HLO_OP_COUNT; op++) {
    hlo_op_kind k = hlo_opcode_kind((hlo_opcode)op);
    if (k == HLO_KIND_UNARY || k == HLO_KIND_BINARY || op == HLO_OP_COMPARE || op == HLO_OP_SELECT ||
        op == HLO_OP_CLAMP || op == HLO_OP_COPY)
      te_elementwise((hlo_opcode)op, &ran, &skipped);
  }
  print_message("elementwise: %d op/type kernels match the evaluator (%d combinations the "
                "verifier rejects skipped)\n", ran, skipped);
  assert_true(ran > 300);
}

static void test_convert_all_pairs(void **state) {
  int ran = 0;
  char text[512];
  for (int a = 0; a < TE_NT; a++)
    for (int b = 0; b < TE_NT; b++) {
      snprintf(text, sizeof text, "HloModule t\nENTRY e {\n  p0 = %s[37,29] parameter(0)\n"
               "  ROOT r = %s[37,29] convert(p0)\n}\n", hlo_type_name(te_types[a]), hlo_type_name(te_types[b]));
      te_run(text, NULL, 0, true, false);
      ran++;
      if (hlo_type_size(te_types[a]) == hlo_type_size(te_types[b]) && te_types[a] != HLO_PRED &&
          te_types[b] != HLO_PRED) {
        snprintf(text, sizeof text, "HloModule t\nENTRY e {\n  p0 = %s[37,29] parameter(0)\n"
                 "  ROOT r = %s[37,29] bitcast-convert(p0)\n}\n", hlo_type_name(te_types[a]),
                 hlo_type_name(te_types[b]));
        te_run(text, NULL, 0, false, false);   /* NaN payloads may be quietened: no edges */
        ran++;
      }
    }
  print_message("convert / bitcast-convert: %d pairs match\n", ran);
}

static void test_bitcast_convert_widths(void **state) {
  te_run("HloModule t\nENTRY e {\n p0 = f32[5,7] parameter(0)\n ROOT r = u8[5,7,4] bitcast-convert(p0)\n}\n", NULL, 0, false, false);
  te_run("HloModule t\nENTRY e {\n p0 = u16[5,7,2] parameter(0)\n ROOT r = f32[5,7] bitcast-convert(p0)\n}\n", NULL, 0, false, false);
  te_run("HloModule t\nENTRY e {\n p0 = f64[9] parameter(0)\n ROOT r = s32[9,2] bitcast-convert(p0)\n}\n", NULL, 0, false, false);
  te_run("HloModule t\nENTRY e {\n p0 = s8[9,8] parameter(0)\n ROOT r = s64[9] bitcast-convert(p0)\n}\n", NULL, 0, false, false);
}

/* Bit patterns where rounding to bf16/f16 is delicate: ties, NaN payloads, the top. */
static void te_fill_bits(int k, hlo_literal *l, void *user) {
  static const uint32_t pat[] = { 0x3f808000, 0x3f818000, 0x3f80ffff, 0x3f817fff, 0x7f7fffff, 0x7f7f8000,
                                  0x7f800000, 0xff800000, 0x7f800001, 0x7fbfffff, 0x7fc00000, 0xffc00001,
                                  0xffffffff, 0x00000001, 0x80008000, 0x00018000, 0x477ff000, 0x477fefff,
                                  0x33000000, 0x33000001, 0x387fc000, 0x38800000, 0x0, 0x80000000 };
  int64_t n = hlo_shape_numel(&l->shape);
  for (int64_t i = 0; i < n; i++) {
    uint32_t u = i < (int64_t)(sizeof pat / sizeof pat[0]) ? pat[i] : (uint32_t)(i * 2654435761u);
    memcpy(l->data + 4 * i, &u, 4);
  }
}

/* f64 values a hair off f16 ties: rounding through f32 first would land on the tie. */
static void te_fill_ties(int k, hlo_literal *l, void *user) {
  int64_t n = hlo_shape_numel(&l->shape);
  for (int64_t i = 0; i < n; i++) {
    double m = 1.0 + (double)(i % 1024) / 1024.0, tie = m + 0x1p-11;   /* f16 tie above m */
    double v = ldexp(tie + (((i >> 2) & 1) ? 0x1p-40 : -0x1p-40), (int)(i % 40) - 24);
    ((double *)l->data)[i] = (i & 2) ? -v : v;
  }
}

static void test_half_rounding_bits(void **state) {
  const char *to[] = { "bf16", "f16" };
  for (int k = 0; k < 2; k++) {
    char text[256];
    snprintf(text, sizeof text, "HloModule t\nENTRY e {\n p0 = f32[4096] parameter(0)\n ROOT r = %s[4096] convert(p0)\n}\n", to[k]);
    etu_opts o = etu_opts_default();
    o.bitwise = k == 0;   /* bf16: bit-exact with hlo_f32_to_bf16, NaNs included */
    o.fill = te_fill_bits;
    ETU_CHECK(&te_env, text, NULL, &o);
  }
  /* f64 -> f16 rounds once (round-to-odd through f32): values just off f16 ties */
  etu_opts o = etu_opts_default();
  o.fill = te_fill_ties;
  o.bitwise = true;
  ETU_CHECK(&te_env, "HloModule t\nENTRY e {\n p0 = f64[4096] parameter(0)\n ROOT r = f16[4096] convert(p0)\n}\n", NULL, &o);
}

/* ---- structural ops --------------------------------------------------------------------- */

static void test_index_ops(void **state) {
  static const char *cases[] = {
    "p0 = f32[3,5] parameter(0)\n ROOT r = f32[3,4,5] broadcast(p0), dimensions={0,2}",
    "p0 = s16[] parameter(0)\n ROOT r = s16[4,5] broadcast(p0), dimensions={}",
    "p0 = f32[6,35] parameter(0)\n ROOT r = f32[2,3,5,7] reshape(p0)",
    "p0 = s8[210] parameter(0)\n ROOT r = s8[14,1,15] reshape(p0)",
    "p0 = f32[4,6]{0,1} parameter(0)\n ROOT r = f32[6,4]{1,0} bitcast(p0)",
    "p0 = bf16[2,3,4]{1,2,0} parameter(0)\n ROOT r = bf16[2,12]{1,0} bitcast(p0)",
    "p0 = f32[5,7,9] parameter(0)\n ROOT r = f32[9,5,7] transpose(p0), dimensions={2,0,1}",
    "p0 = u16[33,65] parameter(0)\n ROOT r = u16[65,33] transpose(p0), dimensions={1,0}",
    "p0 = f32[20,30] parameter(0)\n ROOT r = f32[5,7] slice(p0), slice={[2:17:3], [1:29:4]}",
    "p0 = s32[7,9] parameter(0)\n ROOT r = s32[7,9] reverse(p0), dimensions={0,1}",
    "p0 = f64[7,9] parameter(0)\n ROOT r = f64[7,9] reverse(p0), dimensions={1}",
    "p0 = f32[5,6] parameter(0)\n p1 = f32[] parameter(1)\n ROOT r = f32[10,17] pad(p0, p1), padding=-1_2_1x3_-2_2",
    "p0 = s8[4,3] parameter(0)\n p1 = s8[] parameter(1)\n ROOT r = s8[6,2] pad(p0, p1), padding=1_1x-1_0",
    "p0 = bf16[4,3] parameter(0)\n p1 = bf16[4,1] parameter(1)\n p2 = bf16[4,5] parameter(2)\n ROOT r = bf16[4,9] concatenate(p0, p1, p2), dimensions={1}",
    "p0 = pred[2,3] parameter(0)\n p1 = pred[5,3] parameter(1)\n ROOT r = pred[7,3] concatenate(p0, p1), dimensions={0}",
    "p0 = f32[10,12] parameter(0)\n i = s32[] parameter(1)\n j = s32[] parameter(2)\n ROOT r = f32[4,5] dynamic-slice(p0, i, j), dynamic_slice_sizes={4,5}",
    "p0 = s64[10,12] parameter(0)\n i = u8[] parameter(1)\n j = u8[] parameter(2)\n ROOT r = s64[10,3] dynamic-slice(p0, i, j), dynamic_slice_sizes={10,3}",
    "p0 = f32[10,12] parameter(0)\n u = f32[3,4] parameter(1)\n i = s32[] parameter(2)\n j = s32[] parameter(3)\n ROOT r = f32[10,12] dynamic-update-slice(p0, u, i, j)",
    "p0 = u64[10,12] parameter(0)\n u = u64[10,4] parameter(1)\n i = s16[] parameter(2)\n j = s16[] parameter(3)\n ROOT r = u64[10,12] dynamic-update-slice(p0, u, i, j)",
    "p0 = f32[50,16] parameter(0)\n i = s32[7,3] parameter(1)\n ROOT r = f32[7,3,16] gather(p0, i), offset_dims={2}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=2, slice_sizes={1,16}",
    "p0 = f32[8,9,10] parameter(0)\n i = s64[4,2] parameter(1)\n ROOT r = f32[4,9,3] gather(p0, i), offset_dims={1,2}, collapsed_slice_dims={0}, start_index_map={0,2}, index_vector_dim=1, slice_sizes={1,9,3}",
    "ROOT r = s32[5,7] iota(), iota_dimension=1",
    "ROOT r = f16[300] iota(), iota_dimension=0",
    "ROOT r = bf16[4,300] iota(), iota_dimension=1",
    "ROOT r = u8[300,2] iota(), iota_dimension=0",
    "c = f32[2,3] constant({{1, 2, 3}, {4, 5, 6}})\n p0 = f32[2,3] parameter(0)\n ROOT r = f32[2,3] add(p0, c)",
    "c = s8[4] constant({-128, 127, 0, -1})\n p0 = s8[4] parameter(0)\n ROOT r = s8[4] multiply(p0, c)",
    "c = pred[3] constant({true, false, true})\n p0 = pred[3] parameter(0)\n ROOT r = pred[3] xor(p0, c)",
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char text[1024];
    snprintf(text, sizeof text, "HloModule t\nENTRY e {\n %s\n}\n", cases[i]);
    etu_opts o = etu_opts_default();
    o.edges = true;
    ETU_CHECK(&te_env, text, "r", &o);
    o.seed = 7;   /* other start indices */
    ETU_CHECK(&te_env, text, "r", &o);
  }
}

/* reduce, map, tuples and opt-barrier inside loop fusions. */
static void test_fused_computations(void **state) {
  static const char *softmaxish =
    "HloModule r\nadd { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b) }\n"
    "fused {\n p0 = f32[6,33] parameter(0)\n c = f32[] constant(0)\n"
    " r = f32[6] reduce(p0, c), dimensions={1}, to_apply=add\n"
    " b = f32[6,33] broadcast(r), dimensions={0}\n ROOT d = f32[6,33] subtract(p0, b)\n}\n"
    "ENTRY e {\n p0 = f32[6,33] parameter(0)\n ROOT f = f32[6,33] fusion(p0), kind=kLoop, calls=fused\n}\n";
  te_run(softmaxish, NULL, 0, false, true);  /* the reduce inside a loop fusion, as named */
  static const char *f16sum =
    "HloModule r\nadd { a = f16[] parameter(0)\n b = f16[] parameter(1)\n ROOT s = f16[] add(a, b) }\n"
    "ENTRY e {\n p0 = f16[4,5,6] parameter(0)\n c = f16[] constant(0.5)\n"
    " ROOT r = f16[5] reduce(p0, c), dimensions={0,2}, to_apply=add\n}\n";
  te_run(f16sum, NULL, 0, true, true);
  static const char *argmax =
    "HloModule r\nam {\n a = f32[] parameter(0)\n ai = s32[] parameter(1)\n b = f32[] parameter(2)\n bi = s32[] parameter(3)\n"
    " gt = pred[] compare(a, b), direction=GE\n v = f32[] select(gt, a, b)\n i = s32[] select(gt, ai, bi)\n"
    " ROOT t = (f32[], s32[]) tuple(v, i)\n}\n"
    "ENTRY e {\n p0 = f32[9,17] parameter(0)\n io = s32[9,17] iota(), iota_dimension=1\n"
    " ninf = f32[] constant(-inf)\n z = s32[] constant(0)\n"
    " ROOT r = (f32[9], s32[9]) reduce(p0, io, ninf, z), dimensions={1}, to_apply=am\n}\n";
  te_run(argmax, NULL, 0, false, true);
  static const char *map =
    "HloModule m\nfma { x = f32[] parameter(0)\n y = f32[] parameter(1)\n m = f32[] multiply(x, y)\n"
    " one = f32[] constant(1)\n ROOT r = f32[] add(m, one) }\n"
    "ENTRY e {\n p0 = f32[8,9] parameter(0)\n p1 = f32[8,9] parameter(1)\n ROOT r = f32[8,9] map(p0, p1), dimensions={0,1}, to_apply=fma\n}\n";
  te_run(map, NULL, 0, true, false);
  static const char *multi =
    "HloModule m\nfused {\n p0 = bf16[8,130] parameter(0)\n p1 = bf16[8,130] parameter(1)\n"
    " a = bf16[8,130] add(p0, p1)\n m = bf16[8,130] multiply(a, p1)\n t = (bf16[8,130], bf16[8,130]) tuple(a, m)\n"
    " o = (bf16[8,130], bf16[8,130]) opt-barrier(t)\n g = bf16[8,130] get-tuple-element(o), index=1\n"
    " n = bf16[8,130] negate(g)\n ROOT r = (bf16[8,130], bf16[8,130], bf16[8,130]) tuple(a, n, m)\n}\n"
    "ENTRY e {\n p0 = bf16[8,130] parameter(0)\n p1 = bf16[8,130] parameter(1)\n"
    " ROOT f = (bf16[8,130], bf16[8,130], bf16[8,130]) fusion(p0, p1), kind=kLoop, calls=fused\n}\n";
  te_run(multi, NULL, 0, true, false);
  /* row mode with a transposed read and a broadcast along the minor dim */
  static const char *rows =
    "HloModule m\nfused {\n p0 = f32[64,48] parameter(0)\n p1 = f32[48] parameter(1)\n"
    " t = f32[48,64] transpose(p0), dimensions={1,0}\n b = f32[48,64] broadcast(p1), dimensions={0}\n"
    " ROOT r = f32[48,64] multiply(t, b)\n}\n"
    "ENTRY e {\n p0 = f32[64,48] parameter(0)\n p1 = f32[48] parameter(1)\n"
    " ROOT f = f32[48,64] fusion(p0, p1), kind=kLoop, calls=fused\n}\n";
  te_run(rows, NULL, 0, true, true);
}

/* ---- corpus -------------------------------------------------------------------------------- */

static void test_corpus_loop_fusions(void **state) {
  const char *dir = getenv("HLOJIT_CORPUS");
  if (!dir) dir = "../shared/hlo-corpus";
  static const char *files[] = {
    "docs_emitters_gelu_bf16.hlo", "gpu_emitters_concatenate_multiple_roots_epilogue.hlo",
    "gpu_emitters_concatenate_multiple_roots_shared_hero.hlo", "gpu_tests_concat_fusion_11_operands.hlo",
    "gpu_emitters_transpose_10.hlo", "gpu_emitters_transpose_102.hlo", "gpu_emitters_transpose_1302.hlo",
    "gpu_emitters_transpose_epilogue.hlo", "gpu_emitters_transpose_fused_transpose_021.hlo",
    "gpu_emitters_transpose_mixed_indexing.hlo", "gpu_emitters_transpose_multiple_roots.hlo",
    "gpu_emitters_transpose_partial_tile.hlo", "gpu_emitters_transpose_side_outputs.hlo",
    "cpu_tiled_broadcast.hlo", "cpu_tiled_clamp_scalar_bounds.hlo", "cpu_tiled_compare.hlo",
    "cpu_tiled_convert_s8_s32.hlo", "cpu_tiled_iota_2d.hlo", "cpu_tiled_reshape.hlo",
    "cpu_tiled_select_scalar_pred.hlo", "cpu_tiled_transpose_201.hlo",
  };
  int ran = 0, unsup = 0, missing = 0;
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    char *text = tu_read_file(path, NULL);
    if (!text) { missing++; continue; }
    if (TE_SANITIZED && strstr(files[i], "gelu")) { free(text); continue; }   /* 12.6M elements */
    etu_opts o = etu_opts_default();
    o.force_loop = true;
    o.ulp = strstr(files[i], "gelu") ? 1 : 0;
    etu_report r;
    hj_status st = etu_run_text(&te_env, text, NULL, &o, &r);
    if (st == HJ_ERR_UNSUPPORTED) {
      print_message("corpus %s: unsupported by the loop emitter: %s\n", files[i], hj_ctx_error(te_env.ctx));
      unsup++;
    } else if (st) {
      fail_msg("corpus %s: %s: %s", files[i], hj_status_name(st), hj_ctx_error(te_env.ctx));
    } else {
      if (r.bad) fail_msg("corpus %s: %lld mismatches: %s", files[i], (long long)r.bad, r.first_bad);
      print_message("corpus %s: %lld elements match (parallel_n %lld, max ulp %lld)\n", files[i],
                    (long long)r.numel, (long long)r.parallel_n, (long long)r.max_ulp);
      ran++;
    }
    free(text);
  }
  if (missing == (int)(sizeof files / sizeof files[0])) {
    print_message("skipped: no corpus at %s\n", dir);
    skip();
  }
  print_message("corpus: %d loop fusions match, %d unsupported, %d missing\n", ran, unsup, missing);
  assert_true(ran >= 12);
}

/* ---- IR, math accuracy, classification, benchmark ------------------------------------------ */

static const char *te_gelu_text(int64_t n, char *buf, size_t len) {
  snprintf(buf, len,
           "HloModule g\nfused {\n x = f32[%lld] parameter(0)\n h = f32[] constant(0.5)\n hb = f32[%lld] broadcast(h), dimensions={}\n"
           " k = f32[] constant(0.7978845608)\n kb = f32[%lld] broadcast(k), dimensions={}\n"
           " c = f32[] constant(0.044715)\n cb = f32[%lld] broadcast(c), dimensions={}\n"
           " one = f32[] constant(1)\n ob = f32[%lld] broadcast(one), dimensions={}\n"
           " x2 = f32[%lld] multiply(x, x)\n x3 = f32[%lld] multiply(x2, x)\n cx3 = f32[%lld] multiply(cb, x3)\n"
           " s = f32[%lld] add(x, cx3)\n ks = f32[%lld] multiply(kb, s)\n t = f32[%lld] tanh(ks)\n"
           " tp = f32[%lld] add(ob, t)\n hx = f32[%lld] multiply(hb, x)\n ROOT r = f32[%lld] multiply(hx, tp)\n}\n"
           "ENTRY e {\n x = f32[%lld] parameter(0)\n ROOT f = f32[%lld] fusion(x), kind=kLoop, calls=fused\n}\n",
           (long long)n, (long long)n, (long long)n, (long long)n, (long long)n, (long long)n, (long long)n,
           (long long)n, (long long)n, (long long)n, (long long)n, (long long)n, (long long)n, (long long)n,
           (long long)n, (long long)n);
  return buf;
}

static void test_vectorised_ir(void **state) {
  if (!__builtin_cpu_supports("avx2")) {
    print_message("skipped: host has no AVX2\n");
    skip();
  }
  char text[4096], *ir = NULL;
  etu_opts o = etu_opts_default();
  o.ulp = 3;
  o.atol = 1e-6;   /* 1 + tanh(v) cancels for v << 0: compare absolutely there */
  o.ir = &ir;
  ETU_CHECK(&te_env, te_gelu_text(100003, text, sizeof text), NULL, &o);
  bool vec = ir && (strstr(ir, "<8 x float>") || strstr(ir, "<16 x float>"));
  if (!vec) fail_msg("no <8 x float>/<16 x float> in the optimised IR:\n%.4000s", ir ? ir : "");
  free(ir);
}

static double te_libm(hlo_opcode op, double x) {
  switch (op) {
  case HLO_OP_EXP: return exp(x);
  case HLO_OP_EXPM1: return expm1(x);
  case HLO_OP_LOG: return log(x);
  case HLO_OP_LOG1P: return log1p(x);
  case HLO_OP_TANH: return tanh(x);
  case HLO_OP_LOGISTIC: return 1.0 / (1.0 + exp(-x));
  default: return erf(x);
  }
}

/* Max error in f32 ulps (of the reference) of each polynomial, over every |step|-th float, plus
   specials that must come out exactly as libm's (bit for bit, sign of zero included; NaN as NaN):
   ±0, ±inf, NaN, -NaN. The sweep holds subnormals of both signs. */
static void test_math_ulp(void **state) {
  static const hlo_opcode ops[] = { HLO_OP_EXP, HLO_OP_EXPM1, HLO_OP_LOG, HLO_OP_LOG1P,
                                    HLO_OP_TANH, HLO_OP_LOGISTIC, HLO_OP_ERF };
  static const double bound[] = { 2.5, 2.5, 2.5, 2.5, 3.5, 3.5, 3.5 };   /* emit_math.c */
  static const uint32_t specials[] = { 0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u,
                                       0x7fc00000u, 0xffc00000u };
  enum { NS = sizeof specials / sizeof specials[0] };
  uint32_t step = TE_SANITIZED ? 4099 : 257;
  int64_t ns = (int64_t)(0xffffffffu / step) + 1, n = ns + NS;
  float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++) {
    uint32_t u = i < ns ? (uint32_t)(i * step) : specials[i - ns];
    memcpy(&x[i], &u, 4);
  }
  for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
    char text[512];
    snprintf(text, sizeof text, "HloModule t\nENTRY e {\n p0 = f32[%lld] parameter(0)\n ROOT r = f32[%lld] %s(p0)\n}\n",
             (long long)n, (long long)n, hlo_opcode_name(ops[k]));
    hlo_module *m = NULL;
    CHECK_OK(te_env.ctx, hlo_parse_module(te_env.ctx, text, strlen(text), "ulp", &m));
    hlo_instr *fu = etu_wrap(m, m->entry->root);
    emit_kernel kern;
    etu_kernel_fn fn;
    etu_opts o = etu_opts_default();
    CHECK_OK(te_env.ctx, etu_compile(&te_env, fu, &o, &kern, &fn));
    void *bufs[2] = { x, y };
    fn(bufs, 0, kern.parallel_n);
    double worst = 0, wx = 0;
    int64_t badspecial = 0;
    for (int64_t i = 0; i < n; i++) {
      double ref = te_libm(ops[k], (double)x[i]);
      if (i >= ns || isnan(ref) || isinf(ref) || fabs(ref) > 3.4028234e38) {
        float rf = (float)ref;
        bool ok = isnan(rf) ? isnan(y[i]) : y[i] == rf && signbit(y[i]) == signbit(rf);
        if (!ok) {
          print_message("f32 %s(%a) = %a, libm gives %a\n", hlo_opcode_name(ops[k]), x[i], y[i], rf);
          badspecial++;
        }
        continue;
      }
      int e;
      frexp(ref, &e);
      double ulp = ldexp(1.0, (e - 24 < -149) ? -149 : e - 24);
      double err = fabs((double)y[i] - ref) / ulp;
      if (err > worst) { worst = err; wx = x[i]; }
    }
    print_message("f32 %-12s max error %.3f ulp (at x = %.9g) over %lld inputs, %lld special mismatches\n",
                  hlo_opcode_name(ops[k]), worst, wx, (long long)ns, (long long)badspecial);
    assert_true(worst <= bound[k]);
    assert_int_equal(badspecial, 0);
    hlo_module_free(m);
  }
  free(x);
  free(y);
}

static void test_classify(void **state) {
  static const struct { const char *body; emit_kind want; } cases[] = {
    { "p = f32[8,16] parameter(0)\n ROOT e = f32[8,16] exponential(p)", EMIT_KIND_LOOP },
    { "p = f32[8,16] parameter(0)\n c = f32[] constant(0)\n r = f32[8] reduce(p, c), dimensions={1}, to_apply=add\n ROOT v = bf16[8] convert(r)", EMIT_KIND_REDUCTION },
    { "p = f32[64,32] parameter(0)\n ROOT t = f32[32,64] transpose(p), dimensions={1,0}", EMIT_KIND_TRANSPOSE },
    { "p = f32[64,1,32] parameter(0)\n ROOT t = f32[1,64,32] transpose(p), dimensions={1,0,2}", EMIT_KIND_LOOP },
    { "p = f32[8,16] parameter(0)\n q = f32[16,4] parameter(1)\n ROOT d = f32[8,4] dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}", EMIT_KIND_MATMUL },
    { "p = f32[8] parameter(0)\n ROOT s = f32[8] sort(p), dimensions={0}, to_apply=lt", EMIT_KIND_SORT },
    { "p = f32[8] parameter(0)\n i = s32[3,1] parameter(1)\n u = f32[3] parameter(2)\n ROOT s = f32[8] scatter(p, i, u), "
      "update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add",
      EMIT_KIND_SCATTER },
    { "p = f32[8,2] parameter(0)\n ROOT t = (f32[8,1], s32[8,1]) topk(p), k=1", EMIT_KIND_SORT },
    { "p = u64[2] parameter(0)\n ROOT t = (u64[2], u32[4]) rng-bit-generator(p), algorithm=rng_philox",
      EMIT_KIND_RUNTIME },
    { "p = f32[4,8] parameter(0)\n c = f32[] constant(0)\n r = f32[4,8] reduce-window(p, c), "
      "window={size=1x8 pad=0_0x7_0}, to_apply=add\n ROOT e = f32[4,8] exponential(r)", EMIT_KIND_SCAN },
    { "p = f32[4,8] parameter(0)\n c = f32[] constant(0)\n ROOT r = f32[4,8] reduce-window(p, c), "
      "window={size=1x8 pad=0_0x0_7}, to_apply=add", EMIT_KIND_LOOP },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char text[1024];
    snprintf(text, sizeof text, "HloModule c\nadd { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b) }\n"
             "lt { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = pred[] compare(a, b), direction=LT }\n"
             "fused {\n %s\n}\nENTRY e {\n p = f32[8] parameter(0)\n ROOT x = f32[8] negate(p)\n}\n", cases[i].body);
    hlo_module *m = NULL;
    CHECK_OK(te_env.ctx, hlo_parse_module(te_env.ctx, text, strlen(text), "cls", &m));
    hlo_comp *c = hlo_module_find_comp(m, "fused");
    hlo_comp *h = hlo_comp_new(m, "h");
    hlo_instr *fu = hlo_instr_new(h, HLO_OP_FUSION, "fu", &c->root->shape, NULL, 0);
    hlo_instr_set_calls(fu, &c, 1);
    const hlo_instr *hero = NULL;
    emit_kind k = emit_classify(fu, false, &hero);
    if (k != cases[i].want) fail_msg("case %zu: %s, want %s", i, emit_kind_name(k), emit_kind_name(cases[i].want));
    hlo_module_free(m);
  }
  /* runtime heroes are HJ_ERR_UNSUPPORTED with a message naming the op */
  etu_report r;
  etu_opts o = etu_opts_default();
  o.quiet = true;
  hj_status st = etu_run_text(&te_env, "HloModule s\nENTRY e {\n p = u64[2] parameter(0)\n"
                              " ROOT t = (u64[2], u32[3]) rng-bit-generator(p), algorithm=rng_philox\n}\n",
                              NULL, &o, &r);
  assert_int_equal(st, HJ_ERR_UNSUPPORTED);
  assert_non_null(strstr(hj_ctx_error(te_env.ctx), "rng-bit-generator"));
}

static double te_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Not a timed assertion: prints GB/s of the GELU kernel and of a C triad in the same run. */
static void test_bench_gelu(void **state) {
  if (TE_SANITIZED) {
    print_message("skipped: benchmark under sanitizers\n");
    skip();
  }
  const int64_t n = 16 << 20;
  char text[4096];
  hlo_module *m = NULL;
  te_gelu_text(n, text, sizeof text);
  CHECK_OK(te_env.ctx, hlo_parse_module(te_env.ctx, text, strlen(text), "gelu", &m));
  emit_kernel kern;
  etu_kernel_fn fn;
  etu_opts o = etu_opts_default();
  CHECK_OK(te_env.ctx, etu_compile(&te_env, m->entry->root, &o, &kern, &fn));
  float *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4), *c = malloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++) { a[i] = (float)((i % 1000) - 500) * 0.01f; b[i] = 0; c[i] = 1; }
  void *bufs[2] = { a, b };
  double best = 1e30, tbest = 1e30;
  for (int rep = 0; rep < 5; rep++) {
    double t0 = te_now();
    fn(bufs, 0, kern.parallel_n);
    double t1 = te_now();
    if (t1 - t0 < best) best = t1 - t0;
  }
  volatile float s = 1.5f;
  for (int rep = 0; rep < 5; rep++) {
    float sv = s;
    double t0 = te_now();
    for (int64_t i = 0; i < n; i++) b[i] = a[i] + sv * c[i];
    double t1 = te_now();
    if (t1 - t0 < tbest) tbest = t1 - t0;
  }
  double gelu_gbs = 8.0 * n / best / 1e9, triad_gbs = 12.0 * n / tbest / 1e9;
  printf("bench: GELU-tanh f32[%lld] 1 thread: %.2f ms, %.1f GB/s (8 B/elem); triad: %.2f ms, %.1f GB/s "
         "(12 B/elem); ratio %.2f\n", (long long)n, best * 1e3, gelu_gbs, tbest * 1e3, triad_gbs, gelu_gbs / triad_gbs);
  free(a);
  free(b);
  free(c);
  hlo_module_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_elementwise_all_types),
    cmocka_unit_test(test_convert_all_pairs),
    cmocka_unit_test(test_bitcast_convert_widths),
    cmocka_unit_test(test_half_rounding_bits),
    cmocka_unit_test(test_index_ops),
    cmocka_unit_test(test_fused_computations),
    cmocka_unit_test(test_corpus_loop_fusions),
    cmocka_unit_test(test_vectorised_ir),
    cmocka_unit_test(test_math_ulp),
    cmocka_unit_test(test_classify),
    cmocka_unit_test(test_bench_gelu),
  };
  return cmocka_run_group_tests(tests, te_setup, te_teardown);
}
