/* test_cuda_emu.c — the CUDA backend's kernels (the GPU emitters' loop, reduction,
   transpose, dus and matmul kernels, and the tiled matmul generator) run on the host by the
   GPU EMULATOR of cuda_emu.h (the GPU's thread model — blocks, threads, barriers, warp
   shuffles — on the CPU; it proves kernel logic, not speed) and compared with the reference
   evaluator: every JAX fixture, every corpus module the evaluator runs, the hand-written
   fixtures, and shapes chosen to hit the mappings' edges (rows shorter than a warp, rows of
   one element, rows longer than 2048 (block mode), a reduce to a scalar, column
   reductions narrower and wider than a tile, a middle reduced dim, argmax, f16 and bf16,
   transposes of odd and 3-D shapes with producers, consumers and side outputs, element
   counts not a multiple of 4, the KV cache update, gather, concatenate, matmuls with
   ragged shapes, [N,K] B, batches and epilogues, on the tiled path (the skinny kernel for
   M <= 8, decode's attention among them) and on the library path). Tolerances are the CPU backend's (test_cpu_modules.c). Also: how many kernels
   needed fibers (barriers/shuffles), so a mapping that silently lost its shuffles shows.
   Under ASan: skipped, saying so (the emulator switches stacks). */
#include "testutil.h"
#include "cpu_testutil.h"

#if !defined(HLOJIT_CUDA_BACKEND) || !__has_include(<llvm-c/Core.h>)
static void test_cuda_emu_not_built(void **state) {
  print_message("skipped: the CUDA backend is not in this build (backends/cuda/cuda.mk)\n");
  skip();
}
int main(void) {
  const struct CMUnitTest tests[] = { cmocka_unit_test(test_cuda_emu_not_built) };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
#include "cuda_emu.h"

#define CE_NEED()                                                                          \
  do {                                                                                     \
    if (CUDA_EMU_UNDER_ASAN) {                                                             \
      print_message("skipped: the GPU emulator's fibers do not run under ASan\n");       \
      skip();                                                                              \
    }                                                                                      \
  } while (0)

#include "cuda_emu_check.h"

static void ce_text(const char *what, const char *text, hj_ctx_t *ref, cuda_emu *emu, ce_tally *t) {
  hlo_module *m = cb_parse(ref, text);
  for (int blas = 0; blas < 2; blas++) {
    hj_buffer_t **in = cb_inputs(ref, m, 11);
    ce_check(what, m, in, ref, emu, t, blas);
    cb_free_bufs(in, hj_module_num_inputs(m));
    bool dot = strstr(text, " dot(") != NULL;
    if (!dot) break;   /* the library path only matters for matmuls */
  }
  hj_module_destroy(m);
}

static void ce_dir(const char *what, const char *dir, int min_modules) {
  hj_ctx_t *ref = tu_ctx();
  cuda_emu emu;
  CHECK_OK(ref, emu_create(ref, &emu));
  char **files = cb_list(dir);
  if (!files) {
    print_message("skipped: no modules at %s\n", dir);
    emu_destroy(&emu);
    hj_ctx_destroy(ref);
    skip();
  }
  ce_tally t = { 0 };
  long f0 = E.fiber_launches, l0 = E.launches;
  for (ptrdiff_t i = 0; i < arrlen(files); i++) {
    hj_module_t *m = NULL;
    if (hj_module_parse_file(ref, files[i], &m) != HJ_OK) { t.skipped++; hj_ctx_clear_error(ref); continue; }
    hj_buffer_t **in = cb_inputs(ref, m, 1);
    hj_exec_t *e = NULL;
    int nout = hj_module_num_outputs(m);
    hj_buffer_t **o = calloc((size_t)nout + 1, sizeof *o);
    bool evaluable = hj_compile_module(ref, m, &e) == HJ_OK && hj_exec_run(e, in, hj_exec_num_inputs(e), o, nout) == HJ_OK;
    hj_exec_destroy(e);
    cb_free_bufs(o, nout);
    hj_ctx_clear_error(ref);
    if (evaluable) ce_check(files[i], m, in, ref, &emu, &t, false);
    else t.skipped++;
    cb_free_bufs(in, hj_module_num_inputs(m));
    hj_module_destroy(m);
  }
  cb_free_list(files);
  print_message("%s on the emulated GPU: %d modules, %d kernels, %d evaluator fallbacks, %d skipped; "
                "%ld launches, %ld with fibers\n", what, t.modules, t.kernels, t.fallbacks, t.skipped,
                E.launches - l0, E.fiber_launches - f0);
  assert_true(t.modules + t.skipped >= min_modules);
  emu_destroy(&emu);
  hj_ctx_destroy(ref);
}

static void test_jax_fixtures_emu(void **state) {
  CE_NEED();
  char d[1200];
  snprintf(d, sizeof d, "%.1000s/fixtures/jax", tu_data_dir());
  ce_dir("JAX fixtures", d, 38);
}

static void test_corpus_emu(void **state) {
  CE_NEED();
  ce_dir("the HLO corpus", cb_corpus_dir(), 40);
  char d[1200];
  snprintf(d, sizeof d, "%.1000s/golden", cb_corpus_dir());
  ce_dir("the golden corpus", d, 12);
}

static void test_fixtures_emu(void **state) {
  CE_NEED();
  const char *dirs[] = { "hlo", "hlo_pass", "fuzz_regress" };
  for (int i = 0; i < 3; i++) {
    char d[1200];
    snprintf(d, sizeof d, "%.1000s/fixtures/%s", tu_data_dir(), dirs[i]);
    /* hlo_pass holds GPT-2 blocks: with unit-scale random weights their values reach
       ~1300 after sums of 768 and 3072 products, which the GPU adds in other orders than
       the evaluator (the CPU backend differs by 0.9e-5 of max|want| on the same inputs,
       the emulated GPU by 1.5e-5; at weights scaled by 0.05 both are at 1e-6 relative) */
    ce_rel_max = i == 1 ? 5e-5 : 1e-5;
    ce_dir(dirs[i], d, 3);
  }
  ce_rel_max = 1e-5;
}

/* ---- edges of the mappings ------------------------------------------------------------------ */

#define CE_ADD "add { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b) }\n"
#define CE_MAX "mx { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] maximum(a, b) }\n"

static void ce_reduce(hj_ctx_t *ref, cuda_emu *emu, ce_tally *t, const char *type, const char *in_shape,
                      const char *out_shape, const char *dims) {
  char text[2048], what[256];
  snprintf(text, sizeof text,
           "HloModule r\nadd { a = %s[] parameter(0)\n b = %s[] parameter(1)\n ROOT s = %s[] add(a, b) }\n"
           "ENTRY main {\n  x = %s[%s] parameter(0)\n  z = %s[] constant(0)\n"
           "  r = %s[%s] reduce(x, z), dimensions={%s}, to_apply=add\n  one = %s[] constant(1)\n"
           "  ob = %s[%s] broadcast(one), dimensions={}\n  ROOT o = %s[%s] add(r, ob)\n}\n",
           type, type, type, type, in_shape, type, type, out_shape, dims, type, type, out_shape, type, out_shape);
  snprintf(what, sizeof what, "reduce %s[%s] dims={%s}", type, in_shape, dims);
  ce_text(what, text, ref, emu, t);
}

static void test_reductions_emu(void **state) {
  CE_NEED();
  hj_ctx_t *ref = tu_ctx();
  cuda_emu emu;
  CHECK_OK(ref, emu_create(ref, &emu));
  ce_tally t = { 0 };
  long f0 = E.fiber_launches;
  /* rows: shorter than a warp, one element, not a multiple of 8 rows, warp mode, block mode */
  static const char *rows[][3] = { { "13,7", "13", "1" }, { "9,1", "9", "1" }, { "37,100", "37", "1" },
                                   { "64,768", "64", "1" }, { "5,2049", "5", "1" }, { "3,5000", "3", "1" },
                                   { "3000", "", "0" }, { "2,3,40", "2,3", "2" }, { "4,6,33", "4", "1,2" } };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) ce_reduce(ref, &emu, &t, "f32", rows[i][0], rows[i][1], rows[i][2]);
  ce_reduce(ref, &emu, &t, "s32", "17,300", "17", "1");
  ce_reduce(ref, &emu, &t, "f64", "6,100", "6", "1");
  /* columns: narrower and wider than a tile, fewer rows than row groups, 3-D */
  static const char *cols[][3] = { { "100,20", "20", "0" }, { "7,70", "70", "0" }, { "300,513", "513", "0" },
                                   { "5,9,40", "40", "0,1" } };
  for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) ce_reduce(ref, &emu, &t, "f32", cols[i][0], cols[i][1], cols[i][2]);
  /* a middle reduced dim (sequential per kept index), f16 sums (sequential) */
  ce_reduce(ref, &emu, &t, "f32", "4,50,6", "4,6", "1");
  ce_reduce(ref, &emu, &t, "f16", "8,64", "8", "1");
  /* softmax, layer norm and max in bf16 (warp rows, two heroes), argmax (variadic) */
  ce_text("softmax 37x100", "HloModule sm\n" CE_MAX CE_ADD
          "ENTRY main {\n  x = f32[37,100] parameter(0)\n  ninf = f32[] constant(-inf)\n"
          "  m = f32[37] reduce(x, ninf), dimensions={1}, to_apply=mx\n  mb = f32[37,100] broadcast(m), dimensions={0}\n"
          "  d = f32[37,100] subtract(x, mb)\n  e = f32[37,100] exponential(d)\n  z = f32[] constant(0)\n"
          "  s = f32[37] reduce(e, z), dimensions={1}, to_apply=add\n  sb = f32[37,100] broadcast(s), dimensions={0}\n"
          "  ROOT o = f32[37,100] divide(e, sb)\n}\n", ref, &emu, &t);
  ce_text("softmax 3x3000 (block rows)", "HloModule sm2\n" CE_MAX CE_ADD
          "ENTRY main {\n  x = f32[3,3000] parameter(0)\n  ninf = f32[] constant(-inf)\n"
          "  m = f32[3] reduce(x, ninf), dimensions={1}, to_apply=mx\n  mb = f32[3,3000] broadcast(m), dimensions={0}\n"
          "  d = f32[3,3000] subtract(x, mb)\n  e = f32[3,3000] exponential(d)\n  z = f32[] constant(0)\n"
          "  s = f32[3] reduce(e, z), dimensions={1}, to_apply=add\n  sb = f32[3,3000] broadcast(s), dimensions={0}\n"
          "  ROOT o = f32[3,3000] divide(e, sb)\n}\n", ref, &emu, &t);
  ce_text("max bf16 rows", "HloModule mb\nmx { a = bf16[] parameter(0)\n b = bf16[] parameter(1)\n ROOT s = bf16[] maximum(a, b) }\n"
          "ENTRY main {\n  x = bf16[20,70] parameter(0)\n  ninf = bf16[] constant(-inf)\n"
          "  ROOT m = bf16[20] reduce(x, ninf), dimensions={1}, to_apply=mx\n}\n", ref, &emu, &t);
  ce_text("argmax", "HloModule am\nam { a = f32[] parameter(0)\n ai = s32[] parameter(1)\n b = f32[] parameter(2)\n"
          " bi = s32[] parameter(3)\n gt = pred[] compare(a, b), direction=GE\n v = f32[] select(gt, a, b)\n"
          " i = s32[] select(gt, ai, bi)\n ROOT t = (f32[], s32[]) tuple(v, i) }\n"
          "ENTRY main {\n  x = f32[10,77] parameter(0)\n  io = s32[10,77] iota(), iota_dimension=1\n"
          "  ninf = f32[] constant(-inf)\n  z = s32[] constant(0)\n"
          "  ROOT r = (f32[10], s32[10]) reduce(x, io, ninf, z), dimensions={1}, to_apply=am\n}\n", ref, &emu, &t);
  print_message("reductions on the emulated GPU: %d modules, %d kernels (%ld launches with fibers)\n", t.modules,
                t.kernels, E.fiber_launches - f0);
  assert_true(E.fiber_launches - f0 >= 10);   /* the warp/block/column mappings did run */
  emu_destroy(&emu);
  hj_ctx_destroy(ref);
}

static void test_transposes_and_loops_emu(void **state) {
  CE_NEED();
  hj_ctx_t *ref = tu_ctx();
  cuda_emu emu;
  CHECK_OK(ref, emu_create(ref, &emu));
  ce_tally t = { 0 };
  ce_text("transpose 33x70", "HloModule t1\nENTRY main {\n  p = f32[33,70] parameter(0)\n"
          "  ROOT t = f32[70,33] transpose(p), dimensions={1,0}\n}\n", ref, &emu, &t);
  ce_text("transpose 3-D with producer, consumer, side output",
          "HloModule t2\nENTRY main {\n  p = f32[5,40,37] parameter(0)\n  e = f32[5,40,37] exponential(p)\n"
          "  t = f32[5,37,40] transpose(e), dimensions={0,2,1}\n  n = f32[5,37,40] negate(t)\n"
          "  ROOT r = (f32[5,37,40], f32[5,40,37]) tuple(n, e)\n}\n", ref, &emu, &t);
  ce_text("transpose heads f32[64,12,64] -> [12,64,64]", "HloModule t3\nENTRY main {\n  p = f32[64,12,64] parameter(0)\n"
          "  ROOT t = f32[12,64,64] transpose(p), dimensions={1,2,0}\n}\n", ref, &emu, &t);
  ce_text("transpose f16 48x17", "HloModule t4\nENTRY main {\n  p = f16[48,17] parameter(0)\n"
          "  ROOT t = f16[17,48] transpose(p), dimensions={1,0}\n}\n", ref, &emu, &t);
  ce_text("elementwise 1001 elements (tail)", "HloModule l1\nENTRY main {\n  a = f32[1001] parameter(0)\n"
          "  b = f32[1001] parameter(1)\n  m = f32[1001] multiply(a, b)\n  ROOT t = f32[1001] tanh(m)\n}\n", ref, &emu, &t);
  ce_text("elementwise s8 and pred", "HloModule l2\nENTRY main {\n  a = s8[3,333] parameter(0)\n  b = s8[3,333] parameter(1)\n"
          "  s = s8[3,333] add(a, b)\n  c = pred[3,333] compare(a, b), direction=LT\n"
          "  ROOT r = (s8[3,333], pred[3,333]) tuple(s, c)\n}\n", ref, &emu, &t);
  ce_text("sin/pow f32, exp f64 (libdevice)", "HloModule l3\nENTRY main {\n  a = f32[77] parameter(0)\n  s = f32[77] sine(a)\n"
          "  p = f32[77] power(s, a)\n  d = f64[77] convert(a)\n  e = f64[77] exponential(d)\n"
          "  ROOT r = (f32[77], f64[77]) tuple(p, e)\n}\n", ref, &emu, &t);
  ce_text("broadcast + slice + concat + pad", "HloModule l4\nENTRY main {\n  a = f32[10,7] parameter(0)\n"
          "  b = f32[7] parameter(1)\n  bb = f32[10,7] broadcast(b), dimensions={1}\n  s = f32[10,7] add(a, bb)\n"
          "  sl = f32[4,7] slice(s), slice={[2:6], [0:7]}\n  c = f32[14,7] concatenate(s, sl), dimensions={0}\n"
          "  z = f32[] constant(0)\n  ROOT p = f32[16,9] pad(c, z), padding=1_1x1_1\n}\n", ref, &emu, &t);
  ce_text("gather (embedding)", "HloModule g\nENTRY main {\n  w = f32[50,16] parameter(0)\n  i = s32[7] parameter(1)\n"
          "  ROOT g = f32[7,16] gather(w, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, "
          "index_vector_dim=1, slice_sizes={1,16}\n}\n", ref, &emu, &t);
  ce_text("KV cache dus", "HloModule kv\nENTRY main {\n  c = f32[4,16,8] parameter(0)\n  u = f32[4,1,8] parameter(1)\n"
          "  t = s32[] parameter(2)\n  z = s32[] constant(0)\n  ROOT d = f32[4,16,8] dynamic-update-slice(c, u, z, t, z)\n}\n",
          ref, &emu, &t);
  /* a decode step's query slice and both cache updates, the caches donated: one kernel
     (sibling fusion), both caches updated in place (gpu_dus.c, two in-place leaves) */
  int k0 = t.kernels;
  ce_text("q + k,v cache updates (donated)",
          "HloModule kv2, input_output_alias={ {1}: (1, {}), {2}: (2, {}) }\nENTRY main {\n"
          "  x = f32[1,96] parameter(0)\n  kc = f32[4,8,64] parameter(1)\n  vc = f32[4,64,8] parameter(2)\n"
          "  t = s32[] parameter(3)\n  z = s32[] constant(0)\n  e = f32[1,96] exponential(x)\n"
          "  q = f32[1,32] slice(e), slice={[0:1], [0:32]}\n"
          "  ks = f32[1,32] slice(e), slice={[0:1], [32:64]}\n  k = f32[4,8,1] reshape(ks)\n"
          "  vs = f32[1,32] slice(e), slice={[0:1], [64:96]}\n  v = f32[4,1,8] reshape(vs)\n"
          "  dk = f32[4,8,64] dynamic-update-slice(kc, k, z, z, t)\n"
          "  dv = f32[4,64,8] dynamic-update-slice(vc, v, z, t, z)\n"
          "  ROOT r = (f32[1,32], f32[4,8,64], f32[4,64,8]) tuple(q, dk, dv)\n}\n", ref, &emu, &t);
  assert_int_equal(t.kernels - k0, 2);   /* the exponential, and the updates */
  /* (XLA's MultipleInplaceDus, two roots in place, runs with the corpus: test_corpus_emu) */
  print_message("transposes and loops on the emulated GPU: %d modules, %d kernels\n", t.modules, t.kernels);
  emu_destroy(&emu);
  hj_ctx_destroy(ref);
}

static void test_matmuls_emu(void **state) {
  CE_NEED();
  hj_ctx_t *ref = tu_ctx();
  cuda_emu emu;
  CHECK_OK(ref, emu_create(ref, &emu));
  ce_tally t = { 0 };
  /* {M, N, K, B as [N,K]}. M <= 8 runs the skinny kernel (gpu_mm_skinny.c): B [K,N] at each
     column-group width (N 40 -> 2, 3000 -> 8 groups), rows past a block's columns,
     partial k steps, K = 0; B [N,K] with float4 and scalar rows, a last block's warps
     past N */
  static const int shapes[][4] = { { 33, 65, 17, 0 }, { 1, 40, 300, 0 }, { 130, 129, 5, 0 }, { 64, 96, 128, 0 },
                                   { 2, 3, 0, 0 },    { 3, 37, 13, 0 },  { 8, 260, 70, 0 },  { 1, 3000, 33, 0 },
                                   { 5, 1000, 7, 0 }, { 1, 50, 260, 1 }, { 5, 9, 13, 1 },    { 8, 17, 128, 1 } };
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    int M = shapes[i][0], N = shapes[i][1], K = shapes[i][2], nk = shapes[i][3];
    char text[1024], what[128];
    snprintf(text, sizeof text,
             "HloModule mm\nENTRY main {\n  a = f32[%d,%d] parameter(0)\n  b = f32[%d,%d] parameter(1)\n"
             "  c = f32[%d] parameter(2)\n  r0 = f32[%d,%d] parameter(3)\n"
             "  d = f32[%d,%d] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={%d}\n"
             "  cb = f32[%d,%d] broadcast(c), dimensions={1}\n  e = f32[%d,%d] add(d, cb)\n"
             "  ROOT r = f32[%d,%d] add(e, r0)\n}\n", M, K, nk ? N : K, nk ? K : N, N, M, N, M, N, nk, M, N,
             M, N, M, N);
    snprintf(what, sizeof what, "matmul %dx%dx%d%s +bias +residual", M, N, K, nk ? ", B as [N,K]," : "");
    ce_text(what, text, ref, &emu, &t);
  }
  ce_text("matmul B as [N,K], batched (attention QK^T)",
          "HloModule qk\nENTRY main {\n  q = f32[3,20,16] parameter(0)\n  k = f32[3,30,16] parameter(1)\n"
          "  ROOT s = f32[3,20,30] dot(q, k), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
          "rhs_contracting_dims={2}\n}\n", ref, &emu, &t);
  ce_text("decode attention q k^T, 12 heads, one row",
          "HloModule qk1\nENTRY main {\n  q = f32[12,1,16] parameter(0)\n  k = f32[12,40,16] parameter(1)\n"
          "  ROOT s = f32[12,1,40] dot(q, k), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
          "rhs_contracting_dims={2}\n}\n", ref, &emu, &t);
  ce_text("decode attention p v, 12 heads, one row",
          "HloModule pv1\nENTRY main {\n  p = f32[12,1,40] parameter(0)\n  v = f32[12,40,16] parameter(1)\n"
          "  ROOT o = f32[12,1,16] dot(p, v), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
          "rhs_contracting_dims={1}\n}\n", ref, &emu, &t);
  ce_text("matmul 150x200x64 (128-tile candidate)", "HloModule big\nENTRY main {\n  a = f32[150,64] parameter(0)\n"
          "  b = f32[64,200] parameter(1)\n  ROOT d = f32[150,200] dot(a, b), lhs_contracting_dims={1}, "
          "rhs_contracting_dims={0}\n}\n", ref, &emu, &t);
  print_message("matmuls on the emulated GPU (tiled and library paths): %d runs, %d kernels\n", t.modules, t.kernels);
  emu_destroy(&emu);
  hj_ctx_destroy(ref);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_transposes_and_loops_emu),
    cmocka_unit_test(test_reductions_emu),
    cmocka_unit_test(test_matmuls_emu),
    cmocka_unit_test(test_fixtures_emu),
    cmocka_unit_test(test_jax_fixtures_emu),
    cmocka_unit_test(test_corpus_emu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
