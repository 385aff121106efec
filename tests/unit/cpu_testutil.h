/* cpu_testutil.h — shared by test_cpu_backend.c and test_cpu_modules.c: contexts for a
   given backend, deterministic inputs for a module's signature, compile-and-run, a
   tolerance-aware comparison of two buffers, and the .hlo files of a directory (the shared
   HLO corpus or the JAX fixtures), reading and removing a dump directory. Include after testutil.h. Everything is static inline, so
   a test file may use any part of it. */
#ifndef HLOJIT_CPU_TESTUTIL_H
#define HLOJIT_CPU_TESTUTIL_H
#include <dirent.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

static inline hj_ctx_t *cb_ctx(hj_backend_t b, int threads, const char *dump) {
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  o.backend = b;
  o.num_threads = threads;
  o.dump_dir = dump;
  hj_ctx_t *ctx = NULL;
  if (hj_ctx_create(&o, &ctx) != HJ_OK) fail_msg("hj_ctx_create failed");
  return ctx;
}

static inline hlo_module *cb_parse(hj_ctx_t *ctx, const char *text) {
  hj_module_t *m = NULL;
  CHECK_OK(ctx, hj_module_parse(ctx, text, strlen(text), "test", &m));
  return m;
}

/* Deterministic inputs: floats in [-1, 1), ints in [-8, 8) / [0, 16), pred 0/1. */
static inline hj_buffer_t **cb_inputs(hj_ctx_t *ctx, const hj_module_t *m, uint64_t seed) {
  int n = hj_module_num_inputs(m);
  hj_buffer_t **in = calloc((size_t)n + 1, sizeof *in);
  for (int i = 0; i < n; i++) {
    hj_dtype_t t;
    hj_shape_t s;
    CHECK_OK(ctx, hj_module_input(m, i, &t, &s));
    for (int d = 0; d < s.rank; d++) s.dims[d] = llabs(s.dims[d]);
    CHECK_OK(ctx, hj_buffer_create(ctx, t, s, &in[i]));
    uint8_t *p = hj_buffer_host_ptr(in[i]);
    uint64_t st = seed * 0x9e3779b97f4a7c15ull + (uint64_t)i * 0xd1b54a32d192ed03ull + 1;
    for (int64_t k = 0; k < hj_shape_numel(s); k++) {
      st ^= st << 13; st ^= st >> 7; st ^= st << 17;
      double f = (double)(st >> 11) / 9007199254740992.0 * 2 - 1;
      int64_t v = (int64_t)(st >> 60) - (hlo_type_class_of((hlo_type)t) == HLO_CLASS_SINT ? 8 : 0);
      if (t == HJ_PRED) v = (int64_t)(st >> 63);
      if (hlo_type_is_float((hlo_type)t)) hlo_store_f64((hlo_type)t, p, k, f);
      else hlo_store_s64((hlo_type)t, p, k, v);
    }
  }
  return in;
}

static inline void cb_free_bufs(hj_buffer_t **b, int n) {
  for (int i = 0; b && i < n; i++) hj_buffer_destroy(b[i]);
  free(b);
}

/* Runs |m| compiled in |ctx| on |in|; returns the new output buffers. An input that an
   output aliases (a donated one, updated in place) is run on a private copy, so |in| stays
   as given for the next run (the reference) and no output shares memory with another
   run's: comparing a backend's outputs with the evaluator's can then fail. */
static inline hj_buffer_t **cb_run(hj_ctx_t *ctx, hj_module_t *m, hj_buffer_t **in,
                                    hj_exec_stats_t *stats) {
  hj_exec_t *e = NULL;
  CHECK_OK(ctx, hj_compile_module(ctx, m, &e));
  int nout = hj_exec_num_outputs(e), nin = hj_exec_num_inputs(e);
  hj_buffer_t **out = calloc((size_t)nout + 1, sizeof *out), **run_in = calloc((size_t)nin + 1, sizeof *run_in);
  bool *copied = calloc((size_t)nin + 1, sizeof *copied);
  for (int i = 0; i < nin; i++) run_in[i] = in[i];
  for (int k = 0; k < nout; k++) {
    int a = hj_exec_output_alias(e, k);
    if (a < 0 || a >= nin || copied[a]) continue;
    CHECK_OK(ctx, hj_buffer_from_host(ctx, hj_buffer_dtype(in[a]), hj_buffer_shape(in[a]),
                                      hj_buffer_host_ptr(in[a]), &run_in[a]));
    copied[a] = true;
  }
  CHECK_OK(ctx, hj_exec_run(e, run_in, nin, out, nout));
  for (int i = 0; i < nin; i++)
    if (copied[i]) hj_buffer_destroy(run_in[i]);   /* an output holding it keeps a reference */
  free(run_in);
  free(copied);
  if (stats) CHECK_OK(ctx, hj_exec_stats(e, stats));
  hj_exec_destroy(e);
  return out;
}

/* |got| against |want|: exact for ints/pred; floats within rtol*|w| + atol + rel_max*max|w|. */
static inline bool cb_close(const hj_buffer_t *got, const hj_buffer_t *want, double rtol,
                            double atol, double rel_max, char *why, size_t nwhy) {
  hlo_type t = (hlo_type)hj_buffer_dtype(want);
  if (hj_buffer_nbytes(got) != hj_buffer_nbytes(want) ||
      hj_buffer_dtype(got) != hj_buffer_dtype(want)) {
    snprintf(why, nwhy, "dtype/size differ");
    return false;
  }
  const void *g = hj_buffer_host_ptr((hj_buffer_t *)got);
  const void *w = hj_buffer_host_ptr((hj_buffer_t *)want);
  int64_t n = (int64_t)hj_buffer_nbytes(want) / (hlo_type_size(t) ? hlo_type_size(t) : 1);
  if (!hlo_type_is_float(t)) {
    bool same = memcmp(g, w, hj_buffer_nbytes(want)) == 0;
    if (!same) snprintf(why, nwhy, "integer/pred elements differ");
    return same;
  }
  if (t == HLO_F16 || t == HLO_BF16) rtol = rtol > 0.0078125 ? rtol : 0.0078125;
  double mx = 0, worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double b = hlo_load_f64(t, w, i);
    if (isfinite(b) && fabs(b) > mx) mx = fabs(b);
  }
  for (int64_t i = 0; i < n; i++) {
    double a = hlo_load_f64(t, g, i), b = hlo_load_f64(t, w, i);
    if (isnan(b) || isnan(a)) {
      if (isnan(a) != isnan(b)) {
        snprintf(why, nwhy, "NaN at %lld differs", (long long)i);
        return false;
      }
      continue;
    }
    if (isinf(b) || isinf(a)) {
      if (a != b) {
        snprintf(why, nwhy, "inf at %lld: %g vs %g", (long long)i, a, b);
        return false;
      }
      continue;
    }
    double err = fabs(a - b), tol = rtol * fabs(b) + atol + rel_max * mx;
    if (err > worst) worst = err;
    if (err > tol) {
      snprintf(why, nwhy, "element %lld: %.9g vs %.9g (err %.3g > tol %.3g)", (long long)i, a, b,
               err, tol);
      return false;
    }
  }
  snprintf(why, nwhy, "max abs err %.3g", worst);
  return true;
}

/* Every JAX fixture (tests/fixtures/jax/MANIFEST.txt: name, inputs, outputs): the module
   parsed in |ref|, its inputs read in |in_ctx| (the backend's, so they land in its memory)
   and JAX's outputs in |ref|, handed to |fn|; then freed. Returns the fixtures seen. */
typedef void (*cb_fixture_fn)(const char *name, hj_module_t *m, hj_buffer_t **in, hj_buffer_t **jax, void *user);
static inline int cb_each_jax_fixture(hj_ctx_t *in_ctx, hj_ctx_t *ref, cb_fixture_fn fn, void *user) {
  char path[2048], dir[1024];
  snprintf(dir, sizeof dir, "%s/fixtures/jax", tu_data_dir());
  snprintf(path, sizeof path, "%s/MANIFEST.txt", dir);
  FILE *f = fopen(path, "r");
  if (!f) fail_msg("no %s", path);
  char line[512], name[256];
  int nin, nout, seen = 0;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#' || sscanf(line, "%255s %d %d", name, &nin, &nout) != 3) continue;
    snprintf(path, sizeof path, "%s/%s.hlo", dir, name);
    hj_module_t *m = NULL;
    CHECK_OK(ref, hj_module_parse_file(ref, path, &m));
    hj_buffer_t **in = calloc((size_t)nin + 1, sizeof *in), **jx = calloc((size_t)nout + 1, sizeof *jx);
    for (int i = 0; i < nin; i++) {
      snprintf(path, sizeof path, "%s/%s.in%d.npy", dir, name, i);
      CHECK_OK(in_ctx, hj_buffer_read_npy(in_ctx, path, &in[i]));
    }
    for (int k = 0; k < nout; k++) {
      snprintf(path, sizeof path, "%s/%s.out%d.npy", dir, name, k);
      CHECK_OK(ref, hj_buffer_read_npy(ref, path, &jx[k]));
    }
    fn(name, m, in, jx, user);
    cb_free_bufs(in, nin);
    cb_free_bufs(jx, nout);
    hj_module_destroy(m);
    seen++;
  }
  fclose(f);
  return seen;
}

/* The shared HLO corpus: $HLOJIT_CORPUS, else ../shared/hlo-corpus beside the checkout. */
static inline const char *cb_corpus_dir(void) {
  const char *d = getenv("HLOJIT_CORPUS");
  static char buf[1024];
  if (d) return d;
  snprintf(buf, sizeof buf, "%s/../../shared/hlo-corpus", tu_data_dir());
  struct stat st;
  if (stat(buf, &st) == 0) return buf;
  return "../shared/hlo-corpus";
}

/* A dump directory (hj_ctx_options.dump_dir): the text of the first file whose name
   contains |part| (free it), or NULL; and the directory removed with everything in it. */
static inline char *cb_dump_read(const char *dir, const char *part) {
  DIR *d = opendir(dir);
  if (!d) return NULL;
  char *t = NULL;
  for (struct dirent *e; !t && (e = readdir(d));)
    if (e->d_name[0] != '.' && strstr(e->d_name, part)) {
      char p[4096 + 256];
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      size_t n = 0;
      t = tu_read_file(p, &n);
    }
  closedir(d);
  return t;
}

static inline void cb_dump_remove(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    char p[4096 + 256];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

/* Every .hlo file of |dir| (sorted), as malloc'd paths in an stb_ds array. */
static inline char **cb_list(const char *dir) {
  char **v = NULL;
  DIR *d = opendir(dir);
  if (!d) return NULL;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t n = strlen(e->d_name);
    if (n < 5 || strcmp(e->d_name + n - 4, ".hlo")) continue;
    char *p = malloc(strlen(dir) + n + 2);
    sprintf(p, "%s/%s", dir, e->d_name);
    arrput(v, p);
  }
  closedir(d);
  for (ptrdiff_t i = 0; i < arrlen(v); i++)
    for (ptrdiff_t k = i + 1; k < arrlen(v); k++)
      if (strcmp(v[k], v[i]) < 0) { char *t = v[i]; v[i] = v[k]; v[k] = t; }
  return v;
}

static inline void cb_free_list(char **v) {
  for (ptrdiff_t i = 0; i < arrlen(v); i++) free(v[i]);
  arrfree(v);
}

#endif
