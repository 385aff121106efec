/* cuda_emu_check.h — one check of the GPU EMULATOR (cuda_emu.h) for the cmocka tests:
   a module compiled for the emulated GPU and run on given inputs, its outputs against the
   reference evaluator's (cpu_testutil.h's cb_run and cb_close: 1e-4 relative, 1e-6
   absolute per element, or ce_rel_max of the largest |want|). Used by
   tests/unit/test_cuda_emu.c (fixtures, corpus, edge shapes) and tests/gpt2/test_gpt2_emu.c
   (GPT-2's graphs). Include after testutil.h, cpu_testutil.h and cuda_emu.h. */
#ifndef HLOJIT_CUDA_EMU_CHECK_H
#define HLOJIT_CUDA_EMU_CHECK_H

typedef struct ce_tally { int modules, kernels, fallbacks, skipped; } ce_tally;

static double ce_rel_max = 1e-5;   /* of max|want|: see test_cuda_emu.c, test_fixtures_emu */

/* Emulated GPU vs evaluator on |m| with |in| (host buffers of |ref|); |blas|: matmuls by
   the library path (a host gemm and the epilogue kernel) instead of the tiled kernel. */
static void ce_check(const char *what, hj_module_t *m, hj_buffer_t **in, hj_ctx_t *ref, cuda_emu *emu,
                     ce_tally *t, bool blas) {
  emu->gemm_blas = blas;
  emu_exec x;
  hj_status st = emu_compile_module(emu, m, &x);
  if (st != HJ_OK) fail_msg("%s: compile for the emulator: %s", what, hj_ctx_error(ref));
  int nin = hj_module_num_inputs(m), nout = hj_module_num_outputs(m);
  hj_buffer_t **got = calloc((size_t)nout + 1, sizeof *got);
  void **ip = calloc((size_t)nin + 1, sizeof *ip), **op = calloc((size_t)nout + 1, sizeof *op);
  for (int i = 0; i < nin; i++) ip[i] = hj_buffer_host_ptr(in[i]);
  for (int k = 0; k < nout; k++) {
    hj_dtype_t dt;
    hj_shape_t s;
    CHECK_OK(ref, hj_module_output(m, k, &dt, &s));
    for (int d = 0; d < s.rank; d++) s.dims[d] = llabs(s.dims[d]);
    CHECK_OK(ref, hj_buffer_create(ref, dt, s, &got[k]));
    op[k] = hj_buffer_host_ptr(got[k]);
    /* a donated input (input_output_alias) is one buffer with its output, as the runtime
       passes it (backend.h): the output starts as a copy of the input, which stays as given
       for the reference */
    int a = hlo_module_output_alias(m, k);
    if (a >= 0 && a < nin && hj_buffer_nbytes(in[a]) == hj_buffer_nbytes(got[k])) {
      memcpy(op[k], ip[a], hj_buffer_nbytes(got[k]));
      ip[a] = op[k];
    } else {
      memset(op[k], 0xff, hj_buffer_nbytes(got[k]));   /* unwritten shows */
    }
  }
  st = emu_run(&x, ip, op);
  if (st != HJ_OK) fail_msg("%s: emulated run: %s", what, hj_ctx_error(ref));
  hj_buffer_t **want = cb_run(ref, m, in, NULL);
  char why[256];
  for (int k = 0; k < nout; k++)
    if (!cb_close(got[k], want[k], 1e-4, 1e-6, ce_rel_max, why, sizeof why))
      fail_msg("%s: output %d on the emulated GPU differs from the evaluator: %s", what, k, why);
  const hj_exec_stats_t *s = &x.base.stats;
  t->modules++;
  t->kernels += s->kernels_loop + s->kernels_reduction + s->kernels_transpose + s->kernels_matmul + s->kernels_dus + s->kernels_sort + s->kernels_scatter + s->kernels_scan;
  t->fallbacks += s->evaluator_fallbacks;
  if (s->emit_errors) fail_msg("%s: %d emitter errors", what, s->emit_errors);
  cb_free_bufs(got, nout);
  cb_free_bufs(want, nout);
  free(ip);
  free(op);
  emu_exec_free(&x);
}

#endif
