/* hlojit.c — the command-line tool: print and run HLO text modules.

     hlojit print MODULE.hlo
     hlojit opt MODULE.hlo [--stats]
     hlojit run MODULE.hlo [--backend auto|interp|cpu|cuda] [--input FILE.npy]...
                           [--random-inputs SEED] [--out DIR] [--stats] [--profile]
                           [--runs N] [--cache-dir DIR]
     hlojit ptx MODULE.hlo... [--arch sm_80|sm_90a] [--out-dir DIR]

   It is a client of the public API only (hlojit.h): parse with hj_module_parse_file, compile
   with hj_compile_module, run with hj_exec_run, .npy through hj_buffer_read_npy and
   hj_buffer_write_npy. Inputs are the entry computation's flattened parameters (tuple
   parameters expanded depth first), one --input per leaf, in order.

   --random-inputs SEED: input k gets values from a splitmix64 stream seeded with SEED and k,
   so the same seed gives the same bits everywhere: floating types uniform in [-1, 1) (on a
   grid of 2^-23 for f32/f64 and 2^-7 for f16/bf16, so every value is exact in its type),
   signed integers uniform in [-8, 8), unsigned in [0, 16), pred 0 or 1 with even odds.

   Output: one summary line per output, `out0 f32[2,3] min=.. max=.. mean=.. first=[...]`
   (min/max skip NaNs; a `nan=K` field appears when there are any), and DIR/outK.npy with
   --out. --stats prints what the compiler made of the module on stderr (hj_exec_stats),
   with whether its machine code came from the disk cache (hit) or was compiled (miss).
   --cache-dir DIR: the disk cache of compiled code (hj_ctx_options.cache_dir; "off": none;
   default $HLOJIT_CACHE_DIR, else $XDG_CACHE_HOME/hlojit, else ~/.cache/hlojit).
   --profile times every thunk (hj_exec_set_profiling) and prints hj_exec_profile_text on
   stderr; --runs N runs the module N times on the same buffers first (donated inputs carry
   their updates from one run to the next). Exit status 0 on success, 1 on any error, with
   the library's message on stderr. */
#include "hlojit.h"
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define CLI_MAX_INPUTS 4096
#define CLI_FIRST 6   /* elements shown in first=[...] */

static const char cli_usage[] =
  "usage: hlojit print MODULE.hlo\n"
  "       hlojit opt MODULE.hlo [--stats]\n"
  "       hlojit run MODULE.hlo [--backend auto|interp|cpu|cuda] [--input FILE.npy]...\n"
  "                             [--random-inputs SEED] [--out DIR] [--stats] [--profile]\n"
  "                             [--runs N] [--cache-dir DIR]\n"
  "       hlojit ptx MODULE.hlo... [--arch sm_80|sm_90a] [--out-dir DIR]\n"
  "       hlojit --help | --version\n"
  "\n"
  "print  parse and verify MODULE.hlo (XLA HLO text), print its canonical text to stdout.\n"
  "opt    run the HLO pass pipeline (simplification, fusion, scheduling) on MODULE.hlo\n"
  "       and print the optimised module; --stats: the time of each pass on stderr.\n"
  "run    run MODULE.hlo's entry computation and print one line per output:\n"
  "         out0 f32[2,3] min=.. max=.. mean=.. first=[...]\n"
  "       --input FILE.npy      one per flattened entry parameter (tuples expanded depth\n"
  "                             first), in order; bf16 as .npy 'V2' (raw bfloat16 bits)\n"
  "       --random-inputs SEED  fill every input deterministically instead: floats uniform\n"
  "                             in [-1,1), signed ints in [-8,8), unsigned in [0,16), pred 0/1\n"
  "       --backend B           interp (reference evaluator), cpu, cuda, or auto (default)\n"
  "       --out DIR             also write DIR/out0.npy, DIR/out1.npy, ...\n"
  "       --stats               print the backend, kernels by kind, evaluator fallbacks,\n"
  "                             arena bytes, compile time and the code cache's hit or miss\n"
  "                             on stderr\n"
  "       --profile             time every thunk; print them on stderr, slowest first, with\n"
  "                             kind, bytes, FLOPs, GB/s, GFLOP/s and the compile times\n"
  "       --runs N              run N times (default 1) on the same buffers; outputs are\n"
  "                             those of the last run (donated inputs carry updates over)\n"
  "       --cache-dir DIR       the disk cache of compiled code ('off': none; default\n"
  "                             $HLOJIT_CACHE_DIR, else $XDG_CACHE_HOME/hlojit, else\n"
  "                             ~/.cache/hlojit)\n"
  "ptx    compile each MODULE.hlo for the CUDA backend without a GPU (NVPTX through LLVM)\n"
  "       and print the PTX of every kernel (--arch: sm_80, the default and portable\n"
  "       baseline, or sm_90a for compute capability 9.0); --out-dir DIR writes DIR/K.ptx\n"
  "       for the K-th module instead (0, 1, ...), and goes on past a module that fails.\n"
  "Exit status: 0 on success, 1 on any error (message on stderr).\n";

typedef struct {
  const char *module;
  const char *inputs[CLI_MAX_INPUTS];
  int ninputs;
  bool random;
  uint64_t seed;
  const char *out_dir;
  hj_backend_t backend;
  bool stats;
  const char *cache_dir;
  bool profile;
  long runs;                 /* 0: once */
} cli_run_args;

static int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int cli_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "hlojit: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  return 1;
}

static int cli_lib_fail(hj_ctx_t *ctx, hj_status st) {
  const char *msg = ctx ? hj_ctx_error(ctx) : "";
  if (msg && *msg) fprintf(stderr, "hlojit: %s\n", msg);
  else fprintf(stderr, "hlojit: %s (no message)\n", hj_status_name(st));
  return 1;
}

/* ---- formatting --------------------------------------------------------------------------- */

static void cli_shape_str(hj_dtype_t t, hj_shape_t s, char *buf, size_t n) {
  int k = snprintf(buf, n, "%s[", hj_dtype_name(t) ? hj_dtype_name(t) : "?");
  for (int i = 0; i < s.rank && k > 0 && (size_t)k < n; i++)
    k += snprintf(buf + k, n - (size_t)k, "%s%s%lld", i ? "," : "", s.dims[i] < 0 ? "<=" : "",
                  (long long)llabs(s.dims[i]));
  if (k > 0 && (size_t)k < n) snprintf(buf + k, n - (size_t)k, "]");
}

static double cli_half(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m | 0x400, e - 25);
  return h & 0x8000 ? -v : v;
}

static double cli_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Element |i| as a double (exact for ints up to 2^53; summary use only). */
static double cli_elem(hj_dtype_t t, const void *p, int64_t i) {
  switch (t) {
  case HJ_PRED: case HJ_U8: return ((const uint8_t *)p)[i];
  case HJ_S8: return ((const int8_t *)p)[i];
  case HJ_S16: return ((const int16_t *)p)[i];
  case HJ_S32: return ((const int32_t *)p)[i];
  case HJ_S64: return (double)((const int64_t *)p)[i];
  case HJ_U16: return ((const uint16_t *)p)[i];
  case HJ_U32: return ((const uint32_t *)p)[i];
  case HJ_U64: return (double)((const uint64_t *)p)[i];
  case HJ_F16: return cli_half(((const uint16_t *)p)[i]);
  case HJ_BF16: return cli_bf16(((const uint16_t *)p)[i]);
  case HJ_F32: return ((const float *)p)[i];
  case HJ_F64: return ((const double *)p)[i];
  default: return 0;
  }
}

static bool cli_is_float(hj_dtype_t t) { return t == HJ_F16 || t == HJ_BF16 || t == HJ_F32 || t == HJ_F64; }

/* Integers print exactly (64-bit ones from their storage, not through a double). */
static void cli_print_elem(hj_dtype_t t, const void *p, int64_t i) {
  if (t == HJ_S64) printf("%lld", (long long)((const int64_t *)p)[i]);
  else if (t == HJ_U64) printf("%llu", (unsigned long long)((const uint64_t *)p)[i]);
  else if (cli_is_float(t)) printf("%.7g", cli_elem(t, p, i));
  else printf("%.0f", cli_elem(t, p, i));
}

static void cli_summary(int k, hj_buffer_t *b) {
  hj_dtype_t t = hj_buffer_dtype(b);
  hj_shape_t s = hj_buffer_shape(b);
  const void *p = hj_buffer_host_ptr(b);
  int64_t n = hj_shape_numel(s), nans = 0;
  char buf[256];
  cli_shape_str(t, s, buf, sizeof buf);
  double mn = INFINITY, mx = -INFINITY, sum = 0;
  for (int64_t i = 0; i < n; i++) {
    double v = cli_elem(t, p, i);
    sum += v;
    if (isnan(v)) { nans++; continue; }
    if (v < mn) mn = v;
    if (v > mx) mx = v;
  }
  printf("out%d %s", k, buf);
  if (n > nans) printf(" min=%.7g max=%.7g", mn, mx);
  else printf(" min=- max=-");
  if (n > 0) printf(" mean=%.7g", sum / (double)n);
  else printf(" mean=-");
  if (nans) printf(" nan=%lld", (long long)nans);
  printf(" first=[");
  for (int64_t i = 0; i < n && i < CLI_FIRST; i++) {
    if (i) printf(", ");
    cli_print_elem(t, p, i);
  }
  printf("%s]\n", n > CLI_FIRST ? ", ..." : "");
}

/* ---- random inputs ------------------------------------------------------------------------ */

static uint64_t cli_splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* |v| is k/128 with |k| <= 128, exact in f16: build its bits directly. */
static uint16_t cli_to_half(float v) {
  if (v == 0) return 0;
  uint32_t u;
  memcpy(&u, &v, 4);
  uint32_t sign = (u >> 16) & 0x8000, e = ((u >> 23) & 0xff) - 127 + 15, m = (u >> 13) & 0x3ff;
  return (uint16_t)(sign | e << 10 | m);
}

static void cli_fill_random(hj_dtype_t t, void *p, int64_t n, uint64_t seed, int input) {
  uint64_t st = seed ^ (0xd1b54a32d192ed03ull * (uint64_t)(input + 1));
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = cli_splitmix(&st);
    float h = (float)((int)(r >> 56) - 128) / 128.0f;   /* [-1, 1) on a 2^-7 grid */
    switch (t) {
    case HJ_PRED: ((uint8_t *)p)[i] = (uint8_t)(r >> 63); break;
    case HJ_S8: ((int8_t *)p)[i] = (int8_t)((int)(r >> 60) - 8); break;
    case HJ_S16: ((int16_t *)p)[i] = (int16_t)((int)(r >> 60) - 8); break;
    case HJ_S32: ((int32_t *)p)[i] = (int)(r >> 60) - 8; break;
    case HJ_S64: ((int64_t *)p)[i] = (int)(r >> 60) - 8; break;
    case HJ_U8: ((uint8_t *)p)[i] = (uint8_t)(r >> 60); break;
    case HJ_U16: ((uint16_t *)p)[i] = (uint16_t)(r >> 60); break;
    case HJ_U32: ((uint32_t *)p)[i] = (uint32_t)(r >> 60); break;
    case HJ_U64: ((uint64_t *)p)[i] = r >> 60; break;
    case HJ_F16: ((uint16_t *)p)[i] = cli_to_half(h); break;
    case HJ_BF16: { uint32_t u; memcpy(&u, &h, 4); ((uint16_t *)p)[i] = (uint16_t)(u >> 16); break; }
    case HJ_F32: ((float *)p)[i] = (float)((double)(r >> 40) / 8388608.0 - 1.0); break;
    case HJ_F64: ((double *)p)[i] = (double)(r >> 11) / 4503599627370496.0 - 1.0; break;
    default: break;
    }
  }
}

/* ---- run ---------------------------------------------------------------------------------- */

static void cli_print_stats(const hj_exec_t *e) {
  static const char *names[] = { "auto", "interp", "cpu", "cuda" };
  hj_exec_stats_t s;
  if (hj_exec_stats(e, &s) != HJ_OK) return;
  fprintf(stderr, "stats: backend=%s compile_ms=%.2f fusions=%d kernels: loop=%d reduction=%d "
          "transpose=%d matmul=%d dus=%d sort=%d scatter=%d scan=%d library_calls=%d evaluator_fallbacks=%d (runtime_ops=%d emit_errors=%d) "
          "copies=%d arena_bytes=%lld\n", (unsigned)s.backend < 4 ? names[s.backend] : "?",
          s.compile_ms, s.fusions, s.kernels_loop, s.kernels_reduction, s.kernels_transpose,
          s.kernels_matmul, s.kernels_dus, s.kernels_sort, s.kernels_scatter, s.kernels_scan, s.library_calls, s.evaluator_fallbacks, s.runtime_ops, s.emit_errors,
          s.copies, (long long)s.arena_bytes);
  bool llvm = s.backend == HJ_BACKEND_CPU || s.backend == HJ_BACKEND_CUDA;   /* compiled code */
  if (llvm)
    fprintf(stderr, "stats: compile_ms: passes+plan=%.2f emit=%.2f optimize=%.2f codegen=%.2f\n",
            s.passes_ms, s.emit_ms, s.optimize_ms, s.codegen_ms);
  if (llvm)
    fprintf(stderr, "stats: code cache: %s\n", s.code_source == HJ_CODE_DISK ? "hit (disk)"
            : s.code_source == HJ_CODE_MEMORY ? "hit (memory)" : "miss (compiled)");
  if (s.backend == HJ_BACKEND_CPU)
    fprintf(stderr, "stats: kernels_distinct=%d llvm_modules=%d fingerprint_ms=%.2f\n",
            s.kernels_distinct, s.llvm_modules, s.fingerprint_ms);
  for (int i = 0; i < s.npass_times; i++)
    fprintf(stderr, "stats: pass %-26s %10.2f ms %4d runs\n", s.pass_times[i].name, s.pass_times[i].ms,
            s.pass_times[i].runs);
  if (s.note && *s.note) fprintf(stderr, "stats: note: %s\n", s.note);
}

static bool cli_shape_eq(hj_shape_t a, hj_shape_t b) {
  if (a.rank != b.rank) return false;
  for (int i = 0; i < a.rank; i++)
    if (llabs(a.dims[i]) != llabs(b.dims[i])) return false;
  return true;
}

/* Creates input |i|: read from its file (checked against the parameter) or made up. */
static int cli_make_input(hj_ctx_t *ctx, const hj_module_t *m, const cli_run_args *a, int i,
                          hj_buffer_t **out) {
  hj_dtype_t t;
  hj_shape_t s;
  hj_status st = hj_module_input(m, i, &t, &s);
  if (st) return cli_lib_fail(ctx, st);
  if (a->random) {
    hj_shape_t real = s;
    for (int d = 0; d < s.rank; d++) real.dims[d] = llabs(s.dims[d]);
    if ((st = hj_buffer_create(ctx, t, real, out))) return cli_lib_fail(ctx, st);
    cli_fill_random(t, hj_buffer_host_ptr(*out), hj_shape_numel(real), a->seed, i);
    return 0;
  }
  if ((st = hj_buffer_read_npy(ctx, a->inputs[i], out))) return cli_lib_fail(ctx, st);
  if (hj_buffer_dtype(*out) != t || !cli_shape_eq(hj_buffer_shape(*out), s)) {
    char want[256], got[256];
    cli_shape_str(t, s, want, sizeof want);
    cli_shape_str(hj_buffer_dtype(*out), hj_buffer_shape(*out), got, sizeof got);
    fprintf(stderr, "hlojit: %s: input %d is %s but the module's (flattened) parameter %d "
            "is %s\n", a->inputs[i], i, got, i, want);
    return 1;
  }
  return 0;
}

static int cli_mkdir(const char *dir) {
  char path[4096];
  if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) return cli_fail("%s: path too long", dir);
  for (char *p = path + 1;; p++) {
    if (*p == '/' || *p == 0) {
      char c = *p;
      *p = 0;
      if (mkdir(path, 0777) != 0 && errno != EEXIST)
        return cli_fail("cannot create directory %s: %s", path, strerror(errno));
      *p = c;
      if (!c) break;
    }
  }
  return 0;
}

static int cli_write_outputs(hj_ctx_t *ctx, hj_buffer_t **outs, int nout, const char *dir) {
  if (cli_mkdir(dir)) return 1;
  for (int k = 0; k < nout; k++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/out%d.npy", dir, k);
    hj_status st = hj_buffer_write_npy(outs[k], path);
    if (st) return cli_lib_fail(ctx, st);
  }
  return 0;
}

static int cli_run_module(hj_ctx_t *ctx, hj_module_t *m, const cli_run_args *a) {
  int nin = hj_module_num_inputs(m), nout = hj_module_num_outputs(m), rc = 1;
  if (!a->random && a->ninputs != nin) {
    fprintf(stderr, "hlojit: %s takes %d input%s (flattened entry parameters) but %d --input "
            "%s given%s\n", a->module, nin, nin == 1 ? "" : "s", a->ninputs,
            a->ninputs == 1 ? "was" : "were", nin && !a->ninputs ? " (or use --random-inputs SEED)" : "");
    return 1;
  }
  hj_buffer_t **in = calloc((size_t)nin + 1, sizeof *in), **out = calloc((size_t)nout + 1, sizeof *out);
  hj_exec_t *e = NULL;
  hj_status st;
  if (!in || !out) { fprintf(stderr, "hlojit: out of memory\n"); goto done; }
  for (int i = 0; i < nin; i++)
    if (cli_make_input(ctx, m, a, i, &in[i])) goto done;
  if ((st = hj_compile_module(ctx, m, &e)) || (a->profile && (st = hj_exec_set_profiling(e, true)))) {
    cli_lib_fail(ctx, st);
    goto done;
  }
  for (long r = 0; r < (a->runs > 0 ? a->runs : 1); r++)
    if ((st = hj_exec_run(e, in, nin, out, nout))) {
      cli_lib_fail(ctx, st);
      goto done;
    }
  if (a->stats) cli_print_stats(e);
  if (a->profile) {
    char *text = NULL;
    if ((st = hj_exec_profile_text(e, &text))) {
      cli_lib_fail(ctx, st);
      goto done;
    }
    fputs(text, stderr);
    free(text);
  }
  for (int k = 0; k < nout; k++) cli_summary(k, out[k]);
  rc = a->out_dir ? cli_write_outputs(ctx, out, nout, a->out_dir) : 0;
done:
  for (int i = 0; in && i < nin; i++) hj_buffer_destroy(in[i]);
  for (int k = 0; out && k < nout; k++) hj_buffer_destroy(out[k]);
  hj_exec_destroy(e);
  free(in);
  free(out);
  return rc;
}

/* ---- argument parsing --------------------------------------------------------------------- */

/* Matches "--name VALUE" and "--name=VALUE"; advances *i past what it used. */
static bool cli_opt(int argc, char **argv, int *i, const char *name, const char **val, int *err) {
  size_t n = strlen(name);
  const char *a = argv[*i];
  if (strncmp(a, name, n) != 0) return false;
  if (a[n] == '=') { *val = a + n + 1; return true; }
  if (a[n] != 0) return false;
  if (*i + 1 >= argc) { *err = cli_fail("%s needs a value", name); return true; }
  *val = argv[++*i];
  return true;
}

static int cli_parse_run(int argc, char **argv, cli_run_args *a) {
  for (int i = 2; i < argc; i++) {
    const char *v = NULL;
    int err = 0;
    if (cli_opt(argc, argv, &i, "--input", &v, &err)) {
      if (!err && a->ninputs == CLI_MAX_INPUTS) err = cli_fail("too many --input files");
      if (!err) a->inputs[a->ninputs++] = v;
    } else if (cli_opt(argc, argv, &i, "--random-inputs", &v, &err)) {
      char *end;
      if (!err) {
        errno = 0;
        a->seed = strtoull(v, &end, 0);
        if (errno || end == v || *end) err = cli_fail("--random-inputs: bad seed '%s'", v);
        a->random = true;
      }
    } else if (!strcmp(argv[i], "--stats")) {
      a->stats = true;
    } else if (cli_opt(argc, argv, &i, "--cache-dir", &v, &err)) {
      a->cache_dir = v;
    } else if (!strcmp(argv[i], "--profile")) {
      a->profile = true;
    } else if (cli_opt(argc, argv, &i, "--runs", &v, &err)) {
      char *end;
      if (!err) {
        errno = 0;
        a->runs = strtol(v, &end, 10);
        if (errno || end == v || *end || a->runs < 1 || a->runs > 1000000)
          err = cli_fail("--runs: bad count '%s' (1 to 1000000)", v);
      }
    } else if (cli_opt(argc, argv, &i, "--out", &v, &err)) {
      a->out_dir = v;
    } else if (cli_opt(argc, argv, &i, "--backend", &v, &err)) {
      static const char *names[] = { "auto", "interp", "cpu", "cuda" };
      int b = -1;
      for (int k = 0; !err && k < 4; k++) if (strcmp(v, names[k]) == 0) b = k;
      if (!err && b < 0) err = cli_fail("--backend: unknown backend '%s' (auto, interp, cpu, cuda)", v);
      a->backend = b == 0 ? HJ_BACKEND_AUTO : b == 1 ? HJ_BACKEND_INTERP : b == 2 ? HJ_BACKEND_CPU : HJ_BACKEND_CUDA;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      err = cli_fail("unknown option '%s' (see hlojit --help)", argv[i]);
    } else if (!a->module) {
      a->module = argv[i];
    } else {
      err = cli_fail("unexpected argument '%s'", argv[i]);
    }
    if (err) return err;
  }
  if (!a->module) return cli_fail("run: no module given (see hlojit --help)");
  if (a->random && a->ninputs)
    return cli_fail("give either --input files or --random-inputs, not both");
  return 0;
}

static double cli_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* hj_module_optimize; with |stats| the time of each pass on stderr, slowest first. */
static hj_status cli_optimize(hj_module_t *m, bool stats) {
  if (!stats) return hj_module_optimize(m);
  hj_pass_time_t t[64];
  int n = 0;
  double t0 = cli_now_ms();
  hj_status st = hj_module_optimize_timed(m, t, 64, &n);
  double total = cli_now_ms() - t0;
  if (n > 64) n = 64;
  for (int a = 1; a < n; a++)   /* insertion sort, slowest first */
    for (int b = a; b > 0 && t[b].ms > t[b - 1].ms; b--) {
      hj_pass_time_t x = t[b];
      t[b] = t[b - 1], t[b - 1] = x;
    }
  fprintf(stderr, "stats: opt %.2f ms in %d passes\n", total, n);
  for (int i = 0; i < n; i++)
    fprintf(stderr, "stats: pass %-26s %10.2f ms %5.1f%% %4d runs\n", t[i].name, t[i].ms,
            total > 0 ? 100.0 * t[i].ms / total : 0.0, t[i].runs);
  return st;
}

/* print (optimize false) / opt (true) when |run| is NULL; else run. */
static int cli_with_module(const char *path, hj_backend_t backend, const cli_run_args *run,
                           bool optimize, bool opt_stats) {
  hj_ctx_options_t opt;
  hj_ctx_options_init(&opt);
  opt.backend = backend;
  if (run) opt.cache_dir = run->cache_dir;
  hj_ctx_t *ctx = NULL;
  hj_module_t *m = NULL;
  hj_status st = hj_ctx_create(&opt, &ctx);
  if (st) return cli_lib_fail(ctx, st);
  int rc = 1;
  if ((st = hj_module_parse_file(ctx, path, &m))) {
    cli_lib_fail(ctx, st);
  } else if (run) {
    rc = cli_run_module(ctx, m, run);
  } else {
    char *text = NULL;
    if (optimize && (st = cli_optimize(m, opt_stats))) cli_lib_fail(ctx, st);
    else if ((st = hj_module_print(m, &text))) cli_lib_fail(ctx, st);
    else rc = fputs(text, stdout) < 0 || fflush(stdout) != 0;
    free(text);
  }
  hj_module_destroy(m);
  hj_ctx_destroy(ctx);
  return rc;
}

/* ---- ptx ------------------------------------------------------------------------------------ */

/* hlojit ptx MODULE... [--arch A] [--out-dir DIR] (hj_module_to_ptx, no device). */
static int cli_ptx(int argc, char **argv) {
  const char *arch = NULL, *dir = NULL;
  const char **mods = calloc((size_t)argc, sizeof *mods);
  int nm = 0, rc = 0;
  if (!mods) return cli_fail("out of memory");
  for (int i = 2; i < argc; i++) {
    const char *v = NULL;
    int err = 0;
    if (cli_opt(argc, argv, &i, "--arch", &v, &err)) arch = v;
    else if (cli_opt(argc, argv, &i, "--out-dir", &v, &err)) dir = v;
    else if (argv[i][0] == '-' && argv[i][1]) err = cli_fail("unknown option '%s' (see hlojit --help)", argv[i]);
    else mods[nm++] = argv[i];
    if (err) { free(mods); return err; }
  }
  if (nm == 0) { free(mods); return cli_fail("ptx: no module given (see hlojit --help)"); }
  if (!dir && nm > 1) { free(mods); return cli_fail("ptx: several modules need --out-dir DIR"); }
  if (dir && cli_mkdir(dir)) { free(mods); return 1; }
  hj_ctx_options_t opt;
  hj_ctx_options_init(&opt);
  opt.backend = HJ_BACKEND_INTERP;   /* no backend state is made: the PTX needs no device */
  hj_ctx_t *ctx = NULL;
  hj_status st = hj_ctx_create(&opt, &ctx);
  if (st) { free(mods); return cli_lib_fail(ctx, st); }
  for (int k = 0; k < nm; k++) {
    hj_module_t *m = NULL;
    char *ptx = NULL;
    if ((st = hj_module_parse_file(ctx, mods[k], &m)) || (st = hj_module_to_ptx(ctx, m, arch, &ptx))) {
      fprintf(stderr, "hlojit: %s: %s\n", mods[k], hj_ctx_error(ctx));
      rc = 1;
    } else if (!dir) {
      if (fputs(ptx, stdout) < 0 || fflush(stdout) != 0) rc = 1;
    } else {
      char path[4096];
      snprintf(path, sizeof path, "%s/%d.ptx", dir, k);
      FILE *f = fopen(path, "wb");
      if (!f || fputs(ptx, f) < 0) rc = cli_fail("cannot write %s: %s", path, strerror(errno));
      if (f) fclose(f);
    }
    free(ptx);
    hj_module_destroy(m);
    hj_ctx_clear_error(ctx);
    if (rc && !dir) break;
  }
  hj_ctx_destroy(ctx);
  free(mods);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(cli_usage, stderr);
    return 1;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
    fputs(cli_usage, stdout);
    return 0;
  }
  if (!strcmp(cmd, "--version")) {
    printf("hlojit %d.%d\n", HJ_VERSION_MAJOR, HJ_VERSION_MINOR);
    return 0;
  }
  if (!strcmp(cmd, "print")) {
    if (argc != 3 || argv[2][0] == '-') return cli_fail("usage: hlojit print MODULE.hlo");
    return cli_with_module(argv[2], HJ_BACKEND_AUTO, NULL, false, false);
  }
  if (!strcmp(cmd, "opt")) {
    bool stats = argc == 4 && !strcmp(argv[3], "--stats");
    if ((argc != 3 && !stats) || argv[2][0] == '-')
      return cli_fail("usage: hlojit opt MODULE.hlo [--stats]");
    return cli_with_module(argv[2], HJ_BACKEND_AUTO, NULL, true, stats);
  }
  if (!strcmp(cmd, "run")) {
    static cli_run_args a;  /* static: the input table is large */
    int err = cli_parse_run(argc, argv, &a);
    return err ? err : cli_with_module(a.module, a.backend, &a, false, false);
  }
  if (!strcmp(cmd, "ptx")) return cli_ptx(argc, argv);
  return cli_fail("unknown command '%s' (see hlojit --help)", cmd);
}
