/* test_gpt2_emu.c — GPT-2's graphs (examples/gpt2/model.c, as the session builds them)
   compiled by the CUDA backend's emitters and run on the GPU EMULATOR
   (tests/unit/cuda_emu.h: the GPU's thread model on the host; kernel logic, not speed),
   against the reference evaluator on the same inputs (cuda_emu_check.h: 1e-4 relative per
   element, or 1e-5 of the largest). `make test-gpt2-emu`; no GPU needed.

   Graphs, for two configs (L=2 C=64 NH=4 V=500, and the bundled model's L=4 C=144 NH=4
   V=2000), in both matrix layouts the session uses (llm.c's (out, in), and the kernel
   layouts of session.h: qkvw, attprojw, fcw (in, out), the head reading wte transposed):
   a prefill block at T = 32, the embedding and a block with the rows dim dynamic (as the
   tracing JIT traces the prefill), the whole model at T = 32 with the verify outputs, a
   decode block and the whole model's decode step with a 64-entry cache at position 37 (the
   caches donated: one buffer in and out, as the runtime passes them). Each with
   the tiled matmul kernel and with the library path (a host gemm + the epilogue kernel).
   Inputs are random (cpu_testutil.h's cb_inputs), but ids lie in [0, V) and positions are
   valid. Also: a decode block is 10 kernels (its graph nodes on a GPU). Under ASan:
   skipped, saying so (the emulator switches stacks). */
#include "testutil.h"
#include "cpu_testutil.h"
#include "model.h"

#if !defined(HLOJIT_CUDA_BACKEND) || !__has_include(<llvm-c/Core.h>)
static void test_gpt2_emu_not_built(void **state) {
  print_message("skipped: the CUDA backend is not in this build (backends/cuda/cuda.mk)\n");
  skip();
}
int main(void) {
  const struct CMUnitTest tests[] = { cmocka_unit_test(test_gpt2_emu_not_built) };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
#include "cuda_emu.h"
#include "cuda_emu_check.h"

enum { MAX_L = 4 };

/* Shapes only (gpt2_build reads shapes and layouts, never data). */
static void ge_weights(gpt2_weights *w, gpt2_layer *layer, gpt2_config cfg, bool kernel_layouts) {
  memset(w, 0, sizeof *w);
  w->cfg = cfg;
  const int64_t C = cfg.C;
  gpt2_tensor vec = { .dtype = GPT2_F32, .ndim = 1, .layout = GPT2_VECTOR };
  gpt2_tensor mat = { .dtype = GPT2_F32, .ndim = 2, .layout = GPT2_ROWS };
  w->wte = mat, w->wte.shape[0] = cfg.Vp, w->wte.shape[1] = C;
  w->wpe = mat, w->wpe.shape[0] = cfg.max_T, w->wpe.shape[1] = C;
  w->lnfw = w->lnfb = vec, w->lnfw.shape[0] = w->lnfb.shape[0] = C;
  for (int l = 0; l < cfg.L; l++) {
    gpt2_layer *y = &layer[l];
    gpt2_tensor *v[8] = { &y->ln1w, &y->ln1b, &y->qkvb, &y->attprojb, &y->ln2w, &y->ln2b, &y->fcb, &y->fcprojb };
    int64_t n[8] = { C, C, 3 * C, C, C, C, 4 * C, C };
    for (int i = 0; i < 8; i++) *v[i] = vec, v[i]->shape[0] = n[i];
    gpt2_tensor *m[4] = { &y->qkvw, &y->attprojw, &y->fcw, &y->fcprojw };
    int64_t out[4] = { 3 * C, C, 4 * C, C }, in[4] = { C, C, C, 4 * C };
    for (int i = 0; i < 4; i++) {
      bool io = kernel_layouts && i != 3;   /* session.h, LAYOUTS */
      *m[i] = mat;
      m[i]->layout = io ? GPT2_IN_OUT : GPT2_OUT_IN;
      m[i]->shape[0] = io ? in[i] : out[i];
      m[i]->shape[1] = io ? out[i] : in[i];
    }
  }
  w->layer = layer;
}

/* ids in [0, V), every position |pos| (and the prefill's row count n). */
static void ge_fix_ints(hj_buffer_t **in, const gpt2_sig *sig, const gpt2_spec *sp, int V, int pos) {
  if (sp->embed) {
    int32_t *ids = hj_buffer_host_ptr(in[sig->x_in]);
    int64_t n = hj_buffer_nbytes(in[sig->x_in]) / 4;
    for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)((i * 7919 + 13) % V);
  }
  for (int i = 0; i < sig->nin; i++)
    if (hj_buffer_dtype(in[i]) == HJ_S32 && hj_buffer_nbytes(in[i]) == 4 && !(sp->embed && i == sig->x_in))
      *(int32_t *)hj_buffer_host_ptr(in[i]) = pos;
}

static void ge_config(gpt2_config cfg) {
  hj_ctx_t *ref = tu_ctx();
  cuda_emu emu;
  CHECK_OK(ref, emu_create(ref, &emu));
  ce_tally t = { 0 };
  static gpt2_layer layer[MAX_L];
  for (int lay = 0; lay < 2; lay++) {
    gpt2_weights w;
    ge_weights(&w, layer, cfg, lay == 1);
    const gpt2_spec specs[] = {
      { .phase = GPT2_PREFILL, .n = 32, .n_blocks = 1 },
      { .phase = GPT2_PREFILL, .n = 32, .dyn_rows = true, .n_blocks = 1, .embed = true },
      { .phase = GPT2_PREFILL, .n = 32, .n_blocks = cfg.L, .embed = true, .head = true, .verify = true,
        .lm_head_t = lay == 1 },
      { .phase = GPT2_DECODE, .n = 1, .Tc = 64, .n_blocks = 1 },
      { .phase = GPT2_DECODE, .n = 1, .Tc = 64, .n_blocks = cfg.L, .embed = true, .head = true,
        .lm_head_t = lay == 1 },
    };
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
      const gpt2_spec *sp = &specs[k];
      char what[160];
      snprintf(what, sizeof what, "C=%d L=%d, %s layouts, %s, %d block(s)%s", cfg.C, cfg.L,
               lay ? "kernel" : "stored", sp->phase == GPT2_DECODE ? "decode" : "prefill", sp->n_blocks,
               sp->head ? " with embedding and head" : "");
      hj_graph_t *g = NULL;
      gpt2_sig sig;
      hj_module_t *m = NULL;
      CHECK_OK(ref, hj_graph_create(ref, "gpt2", &g));
      CHECK_OK(ref, gpt2_build(g, &w, sp, &sig));
      CHECK_OK(ref, hj_graph_to_module(g, &m));
      for (int blas = 0; blas < 2; blas++) {
        hj_buffer_t **in = cb_inputs(ref, m, 7 + k);
        ge_fix_ints(in, &sig, sp, cfg.V, sp->phase == GPT2_DECODE ? 37 : 0);
        int before = t.kernels;
        ce_check(what, m, in, ref, &emu, &t, blas);
        cb_free_bufs(in, hj_module_num_inputs(m));
        /* A decode block is 10 kernels, each a graph node run per layer (the GPU's decode
           time is mostly their count): six matmuls (the skinny kernel, epilogues fused),
           two layer norms and the softmax (one kernel each: chained rows), and one kernel
           that slices the query out of the qkv row and writes k and v into both caches in
           place (sibling fusion of in-place updates, emitters/dus.c). */
        if (sp->phase == GPT2_DECODE && sp->n_blocks == 1 && !blas && t.kernels - before != 10)
          fail_msg("%s: %d kernels, expected 10", what, t.kernels - before);
      }
      hj_module_destroy(m);
      hj_graph_destroy(g);
    }
  }
  print_message("GPT-2 C=%d L=%d on the emulated GPU: %d graph runs, %d kernels, %d evaluator fallbacks, "
                "all within the tolerance of the evaluator's\n", cfg.C, cfg.L, t.modules, t.kernels, t.fallbacks);
  emu_destroy(&emu);
  hj_ctx_destroy(ref);
}

static void test_gpt2_small_emu(void **state) {
  if (CUDA_EMU_UNDER_ASAN) {
    print_message("skipped: the GPU emulator's fibers do not run under ASan\n");
    skip();
  }
  ge_config((gpt2_config){ .max_T = 128, .V = 500, .Vp = 512, .L = 2, .NH = 4, .C = 64 });
}

static void test_gpt2_bundled_shape_emu(void **state) {
  if (CUDA_EMU_UNDER_ASAN) {
    print_message("skipped: the GPU emulator's fibers do not run under ASan\n");
    skip();
  }
  ge_config((gpt2_config){ .max_T = 256, .V = 2000, .Vp = 2048, .L = 4, .NH = 4, .C = 144 });
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_gpt2_small_emu),
    cmocka_unit_test(test_gpt2_bundled_shape_emu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
