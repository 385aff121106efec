/* eval_lapack.c — custom-call to jaxlib's CPU LAPACK targets (ir.h's HLO_CUSTOM_TARGETS),
   by calling LAPACK: the evaluator's function for the op, and so what the CPU and CUDA
   backends run for it (a runtime thunk over host memory, counted as a library call, not as
   an evaluator fallback). LAPACK is found at run time (dlopen: OpenBLAS, which ships LAPACK,
   or the reference liblapack + libblas), so hlojit builds and runs without it, and a module
   that needs it says so when it runs.

   Conventions, jaxlib's FFI kernels' (jaxlib/cpu/lapack_kernels.cc): the matrices are the
   last two dims of each operand, any dims before are a batch, each matrix handed to LAPACK
   column-major (XLA's operand_layout_constraints). hlojit's buffers are row-major in logical
   order, so each matrix is transposed into a column-major scratch, factored or solved there,
   and transposed back: O(n^2) next to LAPACK's O(n^3).
     potrf(a) -> (factor, info): Cholesky in the |uplo| triangle; the other keeps its input.
     getrf(a) -> (lu, ipiv, info): P A = L U, ipiv 1-based (JAX subtracts 1 in HLO).
     trsm(a, b) -> x: op(a) x = b (side 'L') or x op(a) = b ('R'), op by trans_x, a
       triangular (uplo), unit diagonal when diag = 'U'; alpha = 1.
   info: LAPACK's (0: success; k > 0: the leading minor of order k is not positive
   definite / U(k,k) is exactly zero), which JAX turns into NaNs. */
#include "eval_internal.h"
#include <dlfcn.h>
#include <pthread.h>

typedef void evl_potrf_s(const char *, const int *, float *, const int *, int *, size_t);
typedef void evl_potrf_d(const char *, const int *, double *, const int *, int *, size_t);
typedef void evl_getrf_s(const int *, const int *, float *, const int *, int *, int *);
typedef void evl_getrf_d(const int *, const int *, double *, const int *, int *, int *);
typedef void evl_trsm_s(const char *, const char *, const char *, const char *, const int *, const int *,
                        const float *, const float *, const int *, float *, const int *, size_t, size_t,
                        size_t, size_t);
typedef void evl_trsm_d(const char *, const char *, const char *, const char *, const int *, const int *,
                        const double *, const double *, const int *, double *, const int *, size_t, size_t,
                        size_t, size_t);

static struct {
  pthread_once_t once;
  evl_potrf_s *spotrf;
  evl_potrf_d *dpotrf;
  evl_getrf_s *sgetrf;
  evl_getrf_d *dgetrf;
  evl_trsm_s *strsm;
  evl_trsm_d *dtrsm;
  char why[256];
} evl = { .once = PTHREAD_ONCE_INIT };

static void evl_load(void) {
  /* OpenBLAS (LAPACK and BLAS in one), else the reference libraries */
  static const char *const libs[][2] = { { "libopenblas.so.0", NULL }, { "libopenblas.so", NULL },
                                         { "liblapack.so.3", "libblas.so.3" } };
  for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
    void *l = dlopen(libs[i][0], RTLD_NOW | RTLD_LOCAL);
    void *b = l && libs[i][1] ? dlopen(libs[i][1], RTLD_NOW | RTLD_LOCAL) : l;
    if (!l || !b) continue;
    evl.spotrf = (evl_potrf_s *)dlsym(l, "spotrf_");
    evl.dpotrf = (evl_potrf_d *)dlsym(l, "dpotrf_");
    evl.sgetrf = (evl_getrf_s *)dlsym(l, "sgetrf_");
    evl.dgetrf = (evl_getrf_d *)dlsym(l, "dgetrf_");
    evl.strsm = (evl_trsm_s *)dlsym(b, "strsm_");
    evl.dtrsm = (evl_trsm_d *)dlsym(b, "dtrsm_");
    if (evl.spotrf && evl.dpotrf && evl.sgetrf && evl.dgetrf && evl.strsm && evl.dtrsm) return;
    snprintf(evl.why, sizeof evl.why, "%s lacks a LAPACK routine hlojit calls", libs[i][0]);
    return;
  }
  snprintf(evl.why, sizeof evl.why, "no LAPACK library (libopenblas.so.0, or liblapack.so.3 and "
           "libblas.so.3; Debian: libopenblas0)");
}

/* Matrix |i| of |l| (rows x cols, row-major) <-> column-major |buf| of doubles or floats. */
static void evl_to_cm(const hlo_literal *l, int64_t i, int64_t rows, int64_t cols, void *buf, bool dbl) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) {
      double v = hlo_load_f64(l->shape.type, l->data, (i * rows + r) * cols + c);
      if (dbl) ((double *)buf)[r + c * rows] = v;
      else ((float *)buf)[r + c * rows] = (float)v;
    }
}

static void evl_from_cm(hlo_literal *l, int64_t i, int64_t rows, int64_t cols, const void *buf, bool dbl) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++)
      hlo_store_f64(l->shape.type, l->data, (i * rows + r) * cols + c,
                    dbl ? ((const double *)buf)[r + c * rows] : ((const float *)buf)[r + c * rows]);
}

static char evl_char(int64_t v, char dflt) { return v ? (char)v : dflt; }

hj_status hlo_eval_custom_call(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops, hlo_literal *r) {
  const hlo_custom_call *cc = &ins->custom;
  int64_t t = cc->target;
  pthread_once(&evl.once, evl_load);
  if (evl.why[0])
    return hlo_evo_err(ctx, ins, "custom-call target \"%s\" needs LAPACK: %s", hlo_custom_target_name(t), evl.why);
  bool dbl = t == HLO_CUSTOM_DPOTRF || t == HLO_CUSTOM_DGETRF || t == HLO_CUSTOM_DTRSM;
  const hlo_shape *as = &ops[0]->shape;
  int rk = as->rank;
  if (rk < 2) return hlo_evo_err(ctx, ins, "needs matrices");
  int64_t m = as->dims[rk - 2], n = as->dims[rk - 1], batch = 1;
  for (int d = 0; d < rk - 2; d++) batch *= as->dims[d];
  if (m > INT32_MAX || n > INT32_MAX) return hlo_evo_err(ctx, ins, "matrices past 2^31 rows or columns");
  bool trsm = t == HLO_CUSTOM_STRSM || t == HLO_CUSTOM_DTRSM;
  int64_t bm = trsm ? ops[1]->shape.dims[rk - 2] : 0, bn = trsm ? ops[1]->shape.dims[rk - 1] : 0;
  if (bm > INT32_MAX || bn > INT32_MAX) return hlo_evo_err(ctx, ins, "matrices past 2^31 rows or columns");
  size_t es = dbl ? 8 : 4;
  size_t na = (size_t)(m * n) + 1, nb = (size_t)(bm * bn) + 1;
  void *a = hj__alloc(ctx, na * es), *b = hj__alloc(ctx, nb * es);
  if (!a || !b) {
    hj__free(ctx, a), hj__free(ctx, b);
    return hj__err(ctx, HJ_ERR_OOM, "custom-call: out of memory");
  }
  int M = (int)m, N = (int)n, info = 0;
  for (int64_t i = 0; i < batch; i++) {
    if (trsm) {
      int BM = (int)bm, BN = (int)bn;
      char side = evl_char(cc->side, 'L'), uplo = evl_char(cc->uplo, 'L'), tr = evl_char(cc->trans_x, 'N'),
           diag = evl_char(cc->diag, 'N');
      evl_to_cm(ops[0], i, m, n, a, dbl);
      evl_to_cm(ops[1], i, bm, bn, b, dbl);
      if (bm && bn) {
        if (dbl) {
          double one = 1;
          evl.dtrsm(&side, &uplo, &tr, &diag, &BM, &BN, &one, a, &M, b, &BM, 1, 1, 1, 1);
        } else {
          float one = 1;
          evl.strsm(&side, &uplo, &tr, &diag, &BM, &BN, &one, a, &M, b, &BM, 1, 1, 1, 1);
        }
      }
      evl_from_cm(r, i, bm, bn, b, dbl);
      continue;
    }
    hlo_literal *out = r->elems[0], *inf = r->elems[r->nelems - 1];
    evl_to_cm(ops[0], i, m, n, a, dbl);
    info = 0;
    if (t == HLO_CUSTOM_SPOTRF || t == HLO_CUSTOM_DPOTRF) {
      char uplo = evl_char(cc->uplo, 'L');
      if (n) {
        if (dbl) evl.dpotrf(&uplo, &N, a, &N, &info, 1);
        else evl.spotrf(&uplo, &N, a, &N, &info, 1);
      }
    } else {
      int k = M < N ? M : N;
      int32_t *ipiv = (int32_t *)r->elems[1]->data + i * k;
      if (m && n) {
        if (dbl) evl.dgetrf(&M, &N, a, &M, ipiv, &info);
        else evl.sgetrf(&M, &N, a, &M, ipiv, &info);
      }
    }
    evl_from_cm(out, i, m, n, a, dbl);
    ((int32_t *)inf->data)[i] = info;
  }
  hj__free(ctx, a);
  hj__free(ctx, b);
  return HJ_OK;
}
