/* cuda_emu_run.c — `hlojit run` for the GPU EMULATOR (cuda_emu.h): the command line the
   Python op tests drive (tests/py/opcases.py: run MODULE.hlo --backend B --input FILE.npy...
   --out DIR), but every module is compiled by the CUDA backend's emitters and passes and
   its kernels run on the host with the GPU's thread model. `make test-cuda-emu` points
   HLOJIT_BIN here, so every op test checks the GPU kernels' logic against NumPy without a
   GPU (it proves logic, not speed). --backend is accepted and ignored; --stats prints the
   compile's evaluator fallbacks as hlojit's does (`evaluator_fallbacks=N` on stderr); the
   exit status and error messages follow hlojit's (1 on any error, the library's message on
   stderr). */
#include "testutil.h"
#include "cuda_emu.h"
#include <sys/stat.h>

static int cer_fail(hj_ctx_t *ctx, const char *what) {
  fprintf(stderr, "hlojit (GPU emulator): %s: %s\n", what, ctx ? hj_ctx_error(ctx) : "");
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 3 || strcmp(argv[1], "run")) {
    fprintf(stderr, "usage: cuda_emu_run run MODULE.hlo [--backend B] [--input FILE.npy]... [--out DIR] [--stats]\n");
    return 1;
  }
  if (CUDA_EMU_UNDER_ASAN) {
    fprintf(stderr, "cuda_emu_run: the GPU emulator does not run under ASan\n");
    return 1;
  }
  const char *mod = argv[2], *out = NULL, *inputs[4096];
  int nin = 0;
  bool stats = false;
  for (int i = 3; i < argc; i++) {
    if (!strcmp(argv[i], "--input") && i + 1 < argc && nin < 4096) inputs[nin++] = argv[++i];
    else if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
    else if (!strcmp(argv[i], "--backend") && i + 1 < argc) i++;
    else if (!strcmp(argv[i], "--stats")) stats = true;
    else { fprintf(stderr, "cuda_emu_run: unknown argument '%s'\n", argv[i]); return 1; }
  }
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  o.backend = HJ_BACKEND_INTERP;
  hj_ctx_t *ctx = NULL;
  if (hj_ctx_create(&o, &ctx) != HJ_OK) return 1;
  hj_module_t *m = NULL;
  if (hj_module_parse_file(ctx, mod, &m) != HJ_OK) return cer_fail(ctx, mod);
  int want_in = hj_module_num_inputs(m), nout = hj_module_num_outputs(m);
  if (nin != want_in) {
    fprintf(stderr, "hlojit (GPU emulator): %s takes %d inputs, %d given\n", mod, want_in, nin);
    return 1;
  }
  hj_buffer_t **in = calloc((size_t)nin + 1, sizeof *in), **res = calloc((size_t)nout + 1, sizeof *res);
  void **ip = calloc((size_t)nin + 1, sizeof *ip), **op = calloc((size_t)nout + 1, sizeof *op);
  for (int i = 0; i < nin; i++) {
    if (hj_buffer_read_npy(ctx, inputs[i], &in[i]) != HJ_OK) return cer_fail(ctx, inputs[i]);
    ip[i] = hj_buffer_host_ptr(in[i]);
  }
  for (int k = 0; k < nout; k++) {
    hj_dtype_t t;
    hj_shape_t s;
    if (hj_module_output(m, k, &t, &s) != HJ_OK) return cer_fail(ctx, "output");
    for (int d = 0; d < s.rank; d++) s.dims[d] = llabs(s.dims[d]);
    if (hj_buffer_create(ctx, t, s, &res[k]) != HJ_OK) return cer_fail(ctx, "output buffer");
    op[k] = hj_buffer_host_ptr(res[k]);
    int a = hlo_module_output_alias(m, k);   /* donated: one buffer, as the runtime passes it */
    if (a >= 0 && hj_buffer_nbytes(in[a]) == hj_buffer_nbytes(res[k])) {
      memcpy(op[k], ip[a], hj_buffer_nbytes(res[k]));
      ip[a] = op[k];
    }
  }
  cuda_emu emu;
  emu_exec x;
  if (emu_create(ctx, &emu) != HJ_OK) return cer_fail(ctx, "emulator");
  if (emu_compile_module(&emu, m, &x) != HJ_OK) return cer_fail(ctx, "compile");
  if (stats) fprintf(stderr, "stats: backend=gpu-emulator evaluator_fallbacks=%d\n", x.base.stats.evaluator_fallbacks);
  if (emu_run(&x, ip, op) != HJ_OK) return cer_fail(ctx, "run");
  for (int k = 0; k < nout && out; k++) {
    char path[4096];
    mkdir(out, 0777);
    snprintf(path, sizeof path, "%s/out%d.npy", out, k);
    if (hj_buffer_write_npy(res[k], path) != HJ_OK) return cer_fail(ctx, path);
  }
  for (int k = 0; k < nout; k++) printf("out%d %s\n", k, hj_dtype_name(hj_buffer_dtype(res[k])));
  emu_exec_free(&x);
  emu_destroy(&emu);
  for (int i = 0; i < nin; i++) hj_buffer_destroy(in[i]);
  for (int k = 0; k < nout; k++) hj_buffer_destroy(res[k]);
  free(in);
  free(res);
  free(ip);
  free(op);
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
  return 0;
}
