/* fuzz_hlo_check.c — the stages one fuzzer input goes through (fuzz_hlo.c's top comment
   lists them) and the comparison of the CPU backend with the evaluator. Only the public API
   runs the module; ir/ir.h is included for typed element access (f16/bf16 to double). The
   exception is the fuzz_hlo_emu build (FUZZ_HLO_EMU, no ASan): its last stage compiles the
   module with the CUDA backend's emitters for the GPU emulator (tests/unit/cuda_emu.h, the
   runtime's internals) and compares it with the evaluator at the same levels as the CPU. */
#include "fuzz_hlo_driver.h"
#include "hlojit_impl/ir/ir.h"
#include <math.h>
#include <time.h>
#ifdef FUZZ_HLO_EMU
#include "tests/unit/cuda_emu.h"
#endif

/* A stage slower than this is named on stderr (the pipeline should be near-linear; issue 14
   leaves pass-pipeline time to the compile-time work, but the fuzzer reports it). */
#define FZ_SLOW_MS 2000.0

static double fz_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void fz_slow(const char *stage, double t0, uint64_t seed) {
  double ms = fz_ms() - t0;
  if (ms > FZ_SLOW_MS) fprintf(stderr, "fuzz_hlo: seed %llu: slow %s: %.0f ms\n", (unsigned long long)seed, stage, ms);
}

int fz_stage_init(fz_stage_ctx *sc, bool cpu) {
  memset(sc, 0, sizeof *sc);
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  o.backend = HJ_BACKEND_INTERP;
  o.num_threads = 1;
  if (hj_ctx_create(&o, &sc->interp) != HJ_OK) return -1;
  if (!cpu) return 0;
  o.backend = HJ_BACKEND_CPU;
  if (hj_ctx_create(&o, &sc->cpu) != HJ_OK) return -1;
#ifdef FUZZ_HLO_EMU
  cuda_emu *emu = calloc(1, sizeof *emu);
  if (!emu || emu_create(sc->interp, emu) != HJ_OK) return free(emu), -1;
  sc->emu = emu;
#endif
  return 0;
}

void fz_stage_free(fz_stage_ctx *sc) {
#ifdef FUZZ_HLO_EMU
  if (sc->emu) emu_destroy(sc->emu);
  free(sc->emu);
#endif
  hj_ctx_destroy(sc->cpu);
  hj_ctx_destroy(sc->interp);
  memset(sc, 0, sizeof *sc);
}

__attribute__((format(printf, 3, 4)))
static fz_result fz_res(fz_kind k, const char *stage, const char *fmt, ...) {
  fz_result r = { .kind = k };
  int n = snprintf(r.detail, sizeof r.detail, "%s: ", stage);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r.detail + n, sizeof r.detail - (size_t)n, fmt, ap);
  va_end(ap);
  return r;
}

/* A failed call's result: a defect when it left no message or is HJ_ERR_INTERNAL, else the
   stage's clean refusal. */
static bool fz_out_set;

static fz_result fz_failed(hj_ctx_t *ctx, hj_status st, const char *stage, fz_kind refused) {
  const char *msg = hj_ctx_error(ctx);
  if (fz_out_set) {
    fz_out_set = false;
    return fz_res(FZ_D_OUT_SET, stage, "hj_compile_module failed (%s) but set *out", hj_status_name(st));
  }
  if (!msg || !msg[0]) return fz_res(FZ_D_NO_MESSAGE, stage, "%s with no message", hj_status_name(st));
  if (st == HJ_ERR_INTERNAL) return fz_res(FZ_D_INTERNAL, stage, "%.900s", msg);
  return fz_res(refused, stage, "%s: %.900s", hj_status_name(st), msg);
}

/* A ':' followed by digits, ':', digits. */
static bool fz_has_position(const char *msg) {
  for (const char *p = msg; *p; p++) {
    if (*p != ':' || p[1] < '0' || p[1] > '9') continue;
    const char *q = p + 1;
    while (*q >= '0' && *q <= '9') q++;
    if (*q == ':' && q[1] >= '0' && q[1] <= '9') return true;
  }
  return false;
}

/* hj_module_parse from an exact-size heap copy (no NUL after it: ASan sees overreads). */
static hj_status fz_parse(hj_ctx_t *ctx, const char *text, hj_module_t **m) {
  size_t n = strlen(text);
  char *copy = malloc(n ? n : 1);
  if (!copy) abort();
  memcpy(copy, text, n);
  hj_ctx_clear_error(ctx);
  *m = (hj_module_t *)(uintptr_t)1;
  hj_status st = hj_module_parse(ctx, copy, n, "fuzz.hlo", m);
  free(copy);
  return st;
}

/* ---- inputs and outputs -------------------------------------------------------------------- */

static uint64_t fz_mix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/* Values exact in every type: floats k/32 in [-2, 2) (1 in 16 a special), integers small
   (1 in 8 at the type's limits), pred 0/1. */
static void fz_fill(hlo_type t, void *p, int64_t n, uint64_t seed) {
  uint64_t s = seed;
  static const double sp[] = { NAN, INFINITY, -INFINITY, -0.0, 0.0, 1.0, -1.0, 0.5 };
  int bits = 8 * hlo_type_size(t);
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = fz_mix(&s);
    if (hlo_type_is_float(t)) {
      double v = (r & 15) == 0 ? sp[(r >> 4) % 8] : (double)((int64_t)((r >> 8) % 128) - 64) / 32.0;
      hlo_store_f64(t, p, i, v);
    } else if (t == HLO_PRED) {
      hlo_store_u64(t, p, i, r & 1);
    } else if ((r & 7) == 0) {
      bool s_ = hlo_type_class_of(t) == HLO_CLASS_SINT;
      uint64_t mx = bits == 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1;
      uint64_t lim[4] = { 0, s_ ? mx >> 1 : mx, s_ ? (mx >> 1) + 1 : 1, mx };   /* 0 max min -1 */
      hlo_store_u64(t, p, i, lim[(r >> 3) % 4]);
    } else {
      int64_t v = (int64_t)((r >> 8) % 16) - (hlo_type_class_of(t) == HLO_CLASS_SINT ? 8 : 0);
      hlo_store_s64(t, p, i, v);
    }
  }
}

typedef struct { int n; hj_buffer_t *b[64]; } fz_bufs;

static void fz_bufs_free(fz_bufs *b) {
  for (int i = 0; i < b->n; i++) hj_buffer_destroy(b->b[i]);
  b->n = 0;
}

static int fz_inputs(hj_ctx_t *ctx, const hj_module_t *m, uint64_t seed, fz_bufs *in) {
  in->n = 0;
  int n = hj_module_num_inputs(m);
  if (n < 0 || n > 64) return -1;
  int64_t total = 0;
  for (int i = 0; i < n; i++) {
    hj_dtype_t t;
    hj_shape_t s;
    if (hj_module_input(m, i, &t, &s) != HJ_OK) return -1;
    for (int d = 0; d < s.rank; d++) if (s.dims[d] < 0) s.dims[d] = -s.dims[d];
    int64_t ne = hj_shape_numel(s);
    if (ne < 0 || (total += ne) > 200000) return -1;   /* too big to be worth running */
    if (hj_buffer_create(ctx, t, s, &in->b[i]) != HJ_OK) return -1;
    in->n = i + 1;
    fz_fill((hlo_type)t, hj_buffer_host_ptr(in->b[i]), ne, seed * 1000003 + (uint64_t)i);
  }
  return 0;
}

/* fz_out_set: a failing hj_compile_module left *out non-NULL (fz_failed reports it). */

/* Runs |m| on |ctx|'s backend; outputs into |out|. */
static hj_status fz_exec(hj_ctx_t *ctx, hj_module_t *m, const fz_bufs *in, fz_bufs *out,
                         hj_exec_stats_t *stats) {
  out->n = 0;
  hj_exec_t *e = (hj_exec_t *)(uintptr_t)1;
  hj_ctx_clear_error(ctx);
  hj_status st = hj_compile_module(ctx, m, &e);
  if (st != HJ_OK) {
    if (e) fz_out_set = true;
    return st;
  }
  int nout = hj_exec_num_outputs(e);
  if (nout < 0 || nout > 64) {
    hj_exec_destroy(e);
    return HJ_ERR_UNSUPPORTED;
  }
  if (stats) hj_exec_stats(e, stats);
  hj_buffer_t *o[64] = { 0 };
  st = hj_exec_run(e, in->b, in->n, o, nout);
  if (st == HJ_OK) {
    out->n = nout;
    memcpy(out->b, o, sizeof(hj_buffer_t *) * (size_t)nout);
  } else {
    for (int i = 0; i < nout; i++) hj_buffer_destroy(o[i]);
  }
  hj_exec_destroy(e);
  return st;
}

/* Bitwise equal outputs (NaN equal NaN whatever its bits, for |nan_any|). */
static bool fz_same(const fz_bufs *a, const fz_bufs *b, bool nan_any, char *why, size_t n) {
  if (a->n != b->n) { snprintf(why, n, "%d vs %d outputs", a->n, b->n); return false; }
  for (int k = 0; k < a->n; k++) {
    hlo_type t = (hlo_type)hj_buffer_dtype(a->b[k]);
    size_t nb = hj_buffer_nbytes(a->b[k]);
    if (nb != hj_buffer_nbytes(b->b[k]) || t != (hlo_type)hj_buffer_dtype(b->b[k])) {
      snprintf(why, n, "output %d: dtype or size differ", k);
      return false;
    }
    const void *x = hj_buffer_host_ptr(a->b[k]), *y = hj_buffer_host_ptr(b->b[k]);
    if (!memcmp(x, y, nb)) continue;
    int es = hlo_type_size(t);
    for (int64_t i = 0; es && i < (int64_t)nb / es; i++) {
      if (!memcmp((const char *)x + i * es, (const char *)y + i * es, (size_t)es)) continue;
      if (nan_any && hlo_type_is_float(t) && isnan(hlo_load_f64(t, x, i)) && isnan(hlo_load_f64(t, y, i)))
        continue;
      snprintf(why, n, "output %d element %lld: %.9g vs %.9g", k, (long long)i, hlo_load_f64(t, x, i),
               hlo_load_f64(t, y, i));
      return false;
    }
  }
  return true;
}

/* A backend's |c| (the CPU's, the emulated GPU's) against the evaluator's |e| at the
   levels of fuzz_hlo.h. */
static bool fz_close(const fz_bufs *c, const fz_bufs *e, const int *levels, int nlev, char *why,
                     size_t n) {
  if (c->n != e->n) { snprintf(why, n, "%d vs %d outputs", c->n, e->n); return false; }
  for (int k = 0; k < e->n; k++) {
    hlo_type t = (hlo_type)hj_buffer_dtype(e->b[k]);
    int lvl = k < nlev ? levels[k] : hlo_type_is_float(t) ? FHG_SKIP : FHG_EXACT;
    if (lvl == FHG_SKIP) continue;
    fz_bufs one_c = { 1, { c->b[k] } }, one_e = { 1, { e->b[k] } };
    if (lvl == FHG_EXACT || !hlo_type_is_float(t)) {
      char sub[300];
      if (!fz_same(&one_c, &one_e, true, sub, sizeof sub)) {
        snprintf(why, n, "exact output %d: %.300s", k, sub);
        return false;
      }
      continue;
    }
    const void *x = hj_buffer_host_ptr(c->b[k]), *y = hj_buffer_host_ptr(e->b[k]);
    int64_t ne = (int64_t)hj_buffer_nbytes(e->b[k]) / hlo_type_size(t);
    double mx = 0, rtol = t == HLO_F16 || t == HLO_BF16 ? 1.0 / 32 : 1.0 / 4096;
    for (int64_t i = 0; i < ne; i++) {
      double b = hlo_load_f64(t, y, i);
      if (isfinite(b) && fabs(b) > mx) mx = fabs(b);
    }
    for (int64_t i = 0; i < ne; i++) {
      double a = hlo_load_f64(t, x, i), b = hlo_load_f64(t, y, i);
      if ((isnan(a) && isnan(b)) || a == b) continue;   /* -0 == +0 here */
      if (isfinite(a) && isfinite(b) && fabs(a - b) <= rtol * (fabs(b) + mx)) continue;
      snprintf(why, n, "output %d element %lld: %.9g, evaluator %.9g (rtol %g of |b| + max %g)", k,
               (long long)i, a, b, rtol, mx);
      return false;
    }
  }
  return true;
}

/* The comparison is not vacuous: on f32 outputs, one ulp fails an exact output and passes a
   close one, 2^-9 relative fails a close one; an integer off by one fails. */
bool fz_compare_bites(void) {
  hj_ctx_t *ctx = NULL;
  if (hj_ctx_create(NULL, &ctx) != HJ_OK) return false;
  float base[4] = { 1.5f, -2.25f, 0.125f, 3.0f }, ulp[4], far[4];
  int32_t iv[4] = { 1, 2, 3, 4 }, iw[4] = { 1, 2, 3, 5 };
  memcpy(ulp, base, sizeof base);
  memcpy(far, base, sizeof base);
  ulp[2] = nextafterf(ulp[2], 1.0f);
  far[3] = 3.0f * (1 + 1.0f / 512);
  fz_bufs B = { 1 }, U = { 1 }, F = { 1 }, I = { 1 }, J = { 1 };
  bool ok = hj_buffer_from_host(ctx, HJ_F32, HJ_SHAPE(4), base, &B.b[0]) == HJ_OK &&
            hj_buffer_from_host(ctx, HJ_F32, HJ_SHAPE(4), ulp, &U.b[0]) == HJ_OK &&
            hj_buffer_from_host(ctx, HJ_F32, HJ_SHAPE(4), far, &F.b[0]) == HJ_OK &&
            hj_buffer_from_host(ctx, HJ_S32, HJ_SHAPE(4), iv, &I.b[0]) == HJ_OK &&
            hj_buffer_from_host(ctx, HJ_S32, HJ_SHAPE(4), iw, &J.b[0]) == HJ_OK;
  char why[300];
  int exact[1] = { FHG_EXACT }, close[1] = { FHG_CLOSE };
  ok = ok && !fz_close(&U, &B, exact, 1, why, sizeof why) && fz_close(&U, &B, close, 1, why, sizeof why) &&
       !fz_close(&F, &B, close, 1, why, sizeof why) && fz_close(&B, &B, exact, 1, why, sizeof why) &&
       !fz_close(&J, &I, close, 1, why, sizeof why);
  fz_bufs_free(&B), fz_bufs_free(&U), fz_bufs_free(&F), fz_bufs_free(&I), fz_bufs_free(&J);
  hj_ctx_destroy(ctx);
  return ok;
}

/* ---- the stages --------------------------------------------------------------------------- */

static fz_result fz_opt_stage(fz_stage_ctx *sc, const char *printed, const fz_bufs *in,
                              const fz_bufs *ref) {
  hj_ctx_t *ctx = sc->interp;
  hj_module_t *m = NULL;
  if (fz_parse(ctx, printed, &m) != HJ_OK) return fz_res(FZ_D_REPRINT, "opt", "re-parse: %.800s", hj_ctx_error(ctx));
  hj_ctx_clear_error(ctx);
  hj_status st = hj_module_optimize(m);
  fz_result r = { .kind = FZ_OK };
  if (st != HJ_OK) {
    r = fz_failed(ctx, st, "opt", FZ_REFUSED_OPT);
  } else if ((st = hj_module_verify(m)) != HJ_OK) {
    r = fz_res(FZ_D_OPT, "opt", "the result does not verify: %.800s", hj_ctx_error(ctx));
  } else {
    char *t1 = NULL, *t2 = NULL;
    hj_module_t *m2 = NULL;
    if (hj_module_print(m, &t1) != HJ_OK || fz_parse(ctx, t1, &m2) != HJ_OK ||
        hj_module_print(m2, &t2) != HJ_OK || strcmp(t1, t2))
      r = fz_res(FZ_D_OPT, "opt", "the optimised module does not print back: %.600s", hj_ctx_error(ctx));
    hj_module_destroy(m2 == (hj_module_t *)(uintptr_t)1 ? NULL : m2);
    free(t1);
    free(t2);
    if (r.kind == FZ_OK && ref) {
      fz_bufs out;
      st = fz_exec(ctx, m, in, &out, NULL);
      char why[400];
      if (st != HJ_OK) r = fz_failed(ctx, st, "opt+interp", FZ_REFUSED_OPT);
      else if (!fz_same(&out, ref, false, why, sizeof why)) r = fz_res(FZ_D_OPT_VALUES, "opt", "%s", why);
      fz_bufs_free(&out);
    }
  }
  hj_module_destroy(m);
  return r;
}

static fz_result fz_cpu_stage(fz_stage_ctx *sc, hj_module_t *m, const fhg_module *gm, const fz_bufs *in,
                              const fz_bufs *ref) {
  hj_ctx_t *ctx = sc->cpu;
  fz_bufs out;
  hj_exec_stats_t es;
  memset(&es, 0, sizeof es);
  hj_status st = fz_exec(ctx, m, in, &out, &es);
  if (st != HJ_OK) return fz_failed(ctx, st, "cpu", FZ_REFUSED_CPU);
  fz_result r = { .kind = FZ_OK };
  char why[600];
  if (es.emit_errors > 0)
    r = fz_res(FZ_D_EMIT, "cpu", "%d emitter error(s) (HLOJIT_DUMP_TO's thunk dump names them)", es.emit_errors);
  /* an ill-typed edit that stayed valid has no levels: an integer made from a float (a
     bitcast of an f32-class log, say) may differ by design; its values are not compared */
  else if (ref && gm->well_typed && !fz_close(&out, ref, gm->exact, gm->nout, why, sizeof why))
    r = fz_res(FZ_D_CPU_VALUES, "cpu", "%s", why);
  fz_bufs_free(&out);
  return r;
}

#ifdef FUZZ_HLO_EMU
/* The module compiled for the emulated GPU, run on |in|, against the evaluator's |ref|. */
static fz_result fz_emu_stage(fz_stage_ctx *sc, hj_module_t *m, const fhg_module *gm, const fz_bufs *in,
                              const fz_bufs *ref) {
  hj_ctx_t *ctx = sc->interp;
  hj_ctx_clear_error(ctx);
  emu_exec x;
  hj_status st = emu_compile_module(sc->emu, m, &x);
  fz_result r = { .kind = FZ_OK };
  fz_bufs out = { 0 };
  void *ip[64], *op[64];
  for (int i = 0; i < in->n; i++) ip[i] = hj_buffer_host_ptr(in->b[i]);
  for (int k = 0; st == HJ_OK && k < ref->n; k++) {
    st = hj_buffer_create(ctx, hj_buffer_dtype(ref->b[k]), hj_buffer_shape(ref->b[k]), &out.b[k]);
    if (st != HJ_OK) break;
    out.n = k + 1;
    op[k] = hj_buffer_host_ptr(out.b[k]);
    memset(op[k], 0xA5, hj_buffer_nbytes(out.b[k]));   /* unwritten shows */
  }
  if (st == HJ_OK) st = emu_run(&x, ip, op);
  char why[600];
  if (st != HJ_OK) r = fz_failed(ctx, st, "emu", FZ_REFUSED_EMU);
  else if (x.base.stats.emit_errors > 0)
    r = fz_res(FZ_D_EMIT, "emu", "%d emitter error(s) (HLOJIT_DUMP_TO's thunk dump names them)", x.base.stats.emit_errors);
  else if (gm->well_typed && !fz_close(&out, ref, gm->exact, gm->nout, why, sizeof why))
    r = fz_res(FZ_D_EMU_VALUES, "emu", "%s", why);
  fz_bufs_free(&out);
  emu_exec_free(&x);
  return r;
}
#endif

fz_result fz_check(fz_stage_ctx *sc, const fhg_module *gm, uint64_t seed) {
  hj_ctx_t *ctx = sc->interp;
  hj_module_t *m = NULL, *m2 = NULL;
  hj_status st = fz_parse(ctx, gm->text, &m);
  if (st != HJ_OK) {
    const char *msg = hj_ctx_error(ctx);
    if (m) return fz_res(FZ_D_OUT_SET, "parse", "*out is not NULL after %s", hj_status_name(st));
    if (!msg[0]) return fz_res(FZ_D_NO_MESSAGE, "parse", "%s with no message", hj_status_name(st));
    if (st != HJ_ERR_OOM && !fz_has_position(msg)) return fz_res(FZ_D_NO_POSITION, "parse", "%.900s", msg);
    if (gm->well_typed) return fz_res(FZ_D_VALID_REJECTED, "parse", "%.900s", msg);
    return fz_res(FZ_REJECTED, "parse", "%s (%.800s)", gm->mutation ? gm->mutation : "-", msg);
  }
  fz_result r = { .kind = gm->well_typed ? FZ_OK : FZ_MUTANT_OK };
  fz_bufs in = { 0 }, ref = { 0 }, ref2 = { 0 };
  bool have_ref = false;
  /* print -> parse -> print */
  char *t1 = NULL, *t2 = NULL;
  if (hj_module_print(m, &t1) != HJ_OK || !t1) {
    r = fz_res(FZ_D_REPRINT, "print", "hj_module_print failed: %.800s", hj_ctx_error(ctx));
    goto done;
  }
  if (fz_parse(ctx, t1, &m2) != HJ_OK) {
    m2 = NULL;
    r = fz_res(FZ_D_REPRINT, "print", "the printed text does not parse: %.800s", hj_ctx_error(ctx));
    goto done;
  }
  if (hj_module_print(m2, &t2) != HJ_OK || strcmp(t1, t2)) {
    size_t k = 0;
    while (t2 && t1[k] && t1[k] == t2[k]) k++;
    r = fz_res(FZ_D_REPRINT, "print", "not a fixed point at byte %zu: %.120s", k, t1 + (k > 40 ? k - 40 : 0));
    goto done;
  }
  /* interp, on the original and on the re-parsed module */
  if (fz_inputs(ctx, m, seed, &in) != 0) goto done;
  double ti = fz_ms();
  st = fz_exec(ctx, m, &in, &ref, NULL);
  fz_slow("interp", ti, seed);
  if (st != HJ_OK) {
    r = fz_failed(ctx, st, "interp", FZ_REFUSED_INTERP);
    if (fz_is_defect(r.kind)) goto done;
  } else {
    have_ref = true;
    char why[400];
    if ((st = fz_exec(ctx, m2, &in, &ref2, NULL)) != HJ_OK) {
      r = fz_failed(ctx, st, "interp(re-parsed)", FZ_REFUSED_INTERP);
      if (r.kind == FZ_REFUSED_INTERP) r = fz_res(FZ_D_REPARSE_VALUES, "interp", "the re-parsed module fails: %s", r.detail);
      goto done;
    }
    if (!fz_same(&ref, &ref2, false, why, sizeof why)) {
      r = fz_res(FZ_D_REPARSE_VALUES, "interp", "%s", why);
      goto done;
    }
  }
  /* opt, then cpu (a refusal by one stage still lets the later ones look for defects) */
  double t0 = fz_ms();
  fz_result o = fz_opt_stage(sc, t1, &in, have_ref ? &ref : NULL);
  fz_slow("opt", t0, seed);
  if (fz_is_defect(o.kind)) { r = o; goto done; }
  if (sc->cpu) {
    t0 = fz_ms();
    fz_result c = fz_cpu_stage(sc, m, gm, &in, have_ref ? &ref : NULL);
    fz_slow("cpu", t0, seed);
    if (fz_is_defect(c.kind)) { r = c; goto done; }
    if (c.kind != FZ_OK && r.kind <= FZ_MUTANT_OK) r = c;
  }
#ifdef FUZZ_HLO_EMU
  if (sc->emu && have_ref) {
    t0 = fz_ms();
    fz_result g = fz_emu_stage(sc, m, gm, &in, &ref);
    fz_slow("emu", t0, seed);
    if (fz_is_defect(g.kind)) { r = g; goto done; }
    if (g.kind != FZ_OK && r.kind <= FZ_MUTANT_OK) r = g;
  }
#endif
  if (o.kind != FZ_OK && r.kind <= FZ_MUTANT_OK) r = o;
done:
  fz_bufs_free(&in);
  fz_bufs_free(&ref);
  fz_bufs_free(&ref2);
  free(t1);
  free(t2);
  hj_module_destroy(m2);
  hj_module_destroy(m);
  return r;
}
