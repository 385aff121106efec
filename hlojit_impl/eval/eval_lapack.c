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
     geqrf(a) -> (qr, tau): Householder QR (R above the diagonal, the reflectors below);
     orgqr(qr, tau) -> q: the first n columns of Q from the reflectors;
     syevd(a) -> (v, w, info): eigenvectors (columns of v, mode 'V') and ascending
       eigenvalues of a symmetric |uplo| triangle;
     gesdd(a) -> (a', s, u, vt, info): the SVD, u and vt full (mode 'A'), economy ('S') or
       not computed ('N': zeros); a' is LAPACK's scratch.
   Workspaces are LAPACK's own query (lwork = -1).
   info: LAPACK's (0: success; k > 0: the leading minor of order k is not positive
   definite / U(k,k) is exactly zero), which JAX turns into NaNs. */
#include "eval_internal.h"
#include <dlfcn.h>
#include <pthread.h>

/* LAPACK's Fortran interface, each routine for float (s) and double (d): one function type
   over `void *` matrices covers both (the caller passes the right one); hidden string
   lengths at the end (gfortran's ABI; OpenBLAS ignores them). */
typedef void evl_potrf(const char *, const int *, void *, const int *, int *, size_t);
typedef void evl_getrf(const int *, const int *, void *, const int *, int *, int *);
typedef void evl_trsm(const char *, const char *, const char *, const char *, const int *, const int *,
                      const void *, const void *, const int *, void *, const int *, size_t, size_t, size_t, size_t);
typedef void evl_geqrf(const int *, const int *, void *, const int *, void *, void *, const int *, int *);
typedef void evl_orgqr(const int *, const int *, const int *, void *, const int *, const void *, void *,
                       const int *, int *);
typedef void evl_syevd(const char *, const char *, const int *, void *, const int *, void *, void *, const int *,
                       int *, const int *, int *, size_t, size_t);
typedef void evl_gesdd(const char *, const int *, const int *, void *, const int *, void *, void *, const int *,
                       void *, const int *, void *, const int *, int *, int *, size_t);

static struct {
  pthread_once_t once;
  evl_potrf *potrf[2];   /* [0] single, [1] double */
  evl_getrf *getrf[2];
  evl_trsm *trsm[2];
  evl_geqrf *geqrf[2];
  evl_orgqr *orgqr[2];
  evl_syevd *syevd[2];
  evl_gesdd *gesdd[2];
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
    bool ok = true;
#define EVL_SYM(f, lib)                                                                   \
  ok &= (*(void **)&evl.f[0] = dlsym(lib, "s" #f "_")) != NULL;                              \
  ok &= (*(void **)&evl.f[1] = dlsym(lib, "d" #f "_")) != NULL;
    EVL_SYM(potrf, l) EVL_SYM(getrf, l) EVL_SYM(trsm, b) EVL_SYM(geqrf, l) EVL_SYM(syevd, l) EVL_SYM(gesdd, l)
    ok &= (*(void **)&evl.orgqr[0] = dlsym(l, "sorgqr_")) != NULL;
    ok &= (*(void **)&evl.orgqr[1] = dlsym(l, "dorgqr_")) != NULL;
#undef EVL_SYM
    if (!ok) snprintf(evl.why, sizeof evl.why, "%s lacks a LAPACK routine hlojit calls", libs[i][0]);
    return;
  }
  snprintf(evl.why, sizeof evl.why, "no LAPACK library (libopenblas.so.0, or liblapack.so.3 and "
           "libblas.so.3; Debian: libopenblas0)");
}

/* Matrix |i| of |l| (rows x cols, row-major) <-> column-major |buf|, of |l|'s own type
   (f32 or f64: the custom-call's operands are what the target takes). */
#define EVL_TRANSPOSE(T, dst, dstride_r, dstride_c, src, sstride_r, sstride_c)                 \
  for (int64_t r = 0; r < rows; r++)                                                          \
    for (int64_t c = 0; c < cols; c++)                                                        \
      ((T *)(dst))[r * (dstride_r) + c * (dstride_c)] = ((const T *)(src))[r * (sstride_r) + c * (sstride_c)];

static void evl_to_cm(const hlo_literal *l, int64_t i, int64_t rows, int64_t cols, void *buf, bool dbl) {
  if (dbl) { const double *s = (const double *)l->data + i * rows * cols; EVL_TRANSPOSE(double, buf, 1, rows, s, cols, 1) }
  else { const float *s = (const float *)l->data + i * rows * cols; EVL_TRANSPOSE(float, buf, 1, rows, s, cols, 1) }
}

static void evl_from_cm(hlo_literal *l, int64_t i, int64_t rows, int64_t cols, const void *buf, bool dbl) {
  if (dbl) { double *d = (double *)l->data + i * rows * cols; EVL_TRANSPOSE(double, d, cols, 1, buf, 1, rows) }
  else { float *d = (float *)l->data + i * rows * cols; EVL_TRANSPOSE(float, d, cols, 1, buf, 1, rows) }
}

/* |n| elements of vector |i| of |l| <-> |buf| (the same layout: no transpose). */
static void evl_vec_in(const hlo_literal *l, int64_t i, int64_t n, void *buf, bool dbl) {
  for (int64_t k = 0; k < n; k++) {
    double v = hlo_load_f64(l->shape.type, l->data, i * n + k);
    if (dbl) ((double *)buf)[k] = v;
    else ((float *)buf)[k] = (float)v;
  }
}

static void evl_vec_out(hlo_literal *l, int64_t i, int64_t n, const void *buf, bool dbl) {
  for (int64_t k = 0; k < n; k++)
    hlo_store_f64(l->shape.type, l->data, i * n + k, dbl ? ((const double *)buf)[k] : ((const float *)buf)[k]);
}

static char evl_char(int64_t v, char dflt) { return v ? (char)v : dflt; }

/* A workspace size LAPACK reported (a float or double holding an integer). */
static int evl_lwork(const void *w, bool dbl) {
  double v = dbl ? *(const double *)w : *(const float *)w;
  return v < 1 ? 1 : v > INT32_MAX / 2 ? INT32_MAX / 2 : (int)v + 1;
}

/* Scratch: the matrices and vectors of one batch element, and LAPACK's workspaces. */
typedef struct evl_buf { void *p[6]; } evl_buf;

static void *evl_alloc(hj_ctx_t *ctx, evl_buf *b, int slot, int64_t n, size_t es) {
  hj__free(ctx, b->p[slot]);
  b->p[slot] = hj__alloc(ctx, ((size_t)(n > 0 ? n : 0) + 1) * es);
  return b->p[slot];
}

static hj_status evl_run(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops, hlo_literal *r, evl_buf *B) {
  const hlo_custom_call *cc = &ins->custom;
  hlo_lapack_op op = hlo_custom_lapack_op(cc->target);
  bool dbl = hlo_custom_is_f64(cc->target);
  int D = dbl;
  size_t es = dbl ? 8 : 4;
  const hlo_shape *as = &ops[0]->shape;
  int rk = as->rank;
  int64_t m = as->dims[rk - 2], n = as->dims[rk - 1], k = m < n ? m : n, batch = 1;
  for (int d = 0; d < rk - 2; d++) batch *= as->dims[d];
  int64_t bm = 0, bn = 0;
  if (op == HLO_LAPACK_TRSM) bm = ops[1]->shape.dims[rk - 2], bn = ops[1]->shape.dims[rk - 1];
  if (m > INT32_MAX || n > INT32_MAX || bm > INT32_MAX || bn > INT32_MAX || m * n > INT32_MAX || bm * bn > INT32_MAX)
    return hlo_evo_err(ctx, ins, "matrices past 2^31 elements");
  int M = (int)m, N = (int)n, info = 0, lwork = -1, liwork = -1, iq;
  char q[2];
  void *a = evl_alloc(ctx, B, 0, m * n, es), *w = evl_alloc(ctx, B, 1, 2, es);
  if (!a || !w) return hj__err(ctx, HJ_ERR_OOM, "custom-call: out of memory");
  hlo_literal *const *out = r->shape.type == HLO_TUPLE ? r->elems : &r;
  for (int64_t i = 0; i < batch; i++) {
    evl_to_cm(ops[0], i, m, n, a, dbl);
    info = 0;
    switch (op) {
    case HLO_LAPACK_POTRF:
      q[0] = evl_char(cc->uplo, 'L');
      if (n) evl.potrf[D](q, &N, a, &N, &info, 1);
      break;
    case HLO_LAPACK_GETRF:
      if (m && n) evl.getrf[D](&M, &N, a, &M, (int32_t *)out[1]->data + i * k, &info);
      break;
    case HLO_LAPACK_TRSM: {
      int BM = (int)bm, BN = (int)bn;
      char side = evl_char(cc->side, 'L'), uplo = evl_char(cc->uplo, 'L'), tr = evl_char(cc->trans_x, 'N'),
           diag = evl_char(cc->diag, 'N');
      void *b = evl_alloc(ctx, B, 2, bm * bn, es);
      if (!b) return hj__err(ctx, HJ_ERR_OOM, "custom-call: out of memory");
      evl_to_cm(ops[1], i, bm, bn, b, dbl);
      double one_d = 1;
      float one_f = 1;
      if (bm && bn) evl.trsm[D](&side, &uplo, &tr, &diag, &BM, &BN, dbl ? (void *)&one_d : (void *)&one_f, a, &N, b, &BM,
                                1, 1, 1, 1);
      evl_from_cm(out[0], i, bm, bn, b, dbl);
      continue;
    }
    case HLO_LAPACK_GEQRF: {
      void *tau = evl_alloc(ctx, B, 2, k, es);
      if (!tau) return hj__err(ctx, HJ_ERR_OOM, "custom-call: out of memory");
      if (m && n) {
        lwork = -1;
        evl.geqrf[D](&M, &N, a, &M, tau, w, &lwork, &info);
        lwork = evl_lwork(w, dbl);
        if (!(w = evl_alloc(ctx, B, 1, lwork, es))) return hj__err(ctx, HJ_ERR_OOM, "custom-call: out of memory");
        evl.geqrf[D](&M, &N, a, &M, tau, w, &lwork, &info);
      }
      evl_vec_out(out[1], i, k, tau, dbl);
      break;
    }
    case HLO_LAPACK_ORGQR: {
      int64_t kt = ops[1]->shape.dims[rk - 2];
      int KT = (int)kt;
      void *tau = evl_alloc(ctx, B, 2, kt, es);
      if (!tau) return hj__err(ctx, HJ_ERR_OOM, "custom-call: out of memory");
      evl_vec_in(ops[1], i, kt, tau, dbl);
      if (m && n) {
        lwork = -1;
        evl.orgqr[D](&M, &N, &KT, a, &M, tau, w, &lwork, &info);
        lwork = evl_lwork(w, dbl);
        if (!(w = evl_alloc(ctx, B, 1, lwork, es))) return hj__err(ctx, HJ_ERR_OOM, "custom-call: out of memory");
        evl.orgqr[D](&M, &N, &KT, a, &M, tau, w, &lwork, &info);
      }
      evl_from_cm(out[0], i, m, n, a, dbl);
      continue;
    }
    case HLO_LAPACK_SYEVD: {
      char jobz = evl_char(cc->mode, 'V'), uplo = evl_char(cc->uplo, 'L');
      void *ev = evl_alloc(ctx, B, 2, n, es);
      if (!ev) return hj__err(ctx, HJ_ERR_OOM, "custom-call: out of memory");
      if (n) {
        lwork = liwork = -1;
        evl.syevd[D](&jobz, &uplo, &N, a, &N, ev, w, &lwork, &iq, &liwork, &info, 1, 1);
        lwork = evl_lwork(w, dbl), liwork = iq < 1 ? 1 : iq;
        int *iw = evl_alloc(ctx, B, 3, liwork, sizeof(int));
        if (!(w = evl_alloc(ctx, B, 1, lwork, es)) || !iw) return hj__err(ctx, HJ_ERR_OOM, "custom-call: out of memory");
        evl.syevd[D](&jobz, &uplo, &N, a, &N, ev, w, &lwork, iw, &liwork, &info, 1, 1);
      }
      evl_vec_out(out[1], i, n, ev, dbl);
      break;
    }
    case HLO_LAPACK_GESDD: {
      char jobz = evl_char(cc->mode, 'A');
      const hlo_shape *us = &out[2]->shape, *vs = &out[3]->shape;
      int64_t ur = us->dims[rk - 2], uc = us->dims[rk - 1], vr = vs->dims[rk - 2], vc = vs->dims[rk - 1];
      int LDU = ur > 0 ? (int)ur : 1, LDVT = vr > 0 ? (int)vr : 1;
      void *sv = evl_alloc(ctx, B, 2, k, es), *u = evl_alloc(ctx, B, 3, ur * uc, es),
           *vt = evl_alloc(ctx, B, 4, vr * vc, es);
      int *iw = evl_alloc(ctx, B, 5, 8 * k, sizeof(int));
      if (!sv || !u || !vt || !iw) return hj__err(ctx, HJ_ERR_OOM, "custom-call: out of memory");
      memset(u, 0, (size_t)(ur * uc) * es);
      memset(vt, 0, (size_t)(vr * vc) * es);
      if (m && n) {
        lwork = -1;
        evl.gesdd[D](&jobz, &M, &N, a, &M, sv, u, &LDU, vt, &LDVT, w, &lwork, iw, &info, 1);
        lwork = evl_lwork(w, dbl);
        if (!(w = evl_alloc(ctx, B, 1, lwork, es))) return hj__err(ctx, HJ_ERR_OOM, "custom-call: out of memory");
        evl.gesdd[D](&jobz, &M, &N, a, &M, sv, u, &LDU, vt, &LDVT, w, &lwork, iw, &info, 1);
      }
      evl_vec_out(out[1], i, k, sv, dbl);
      evl_from_cm(out[2], i, ur, uc, u, dbl);
      evl_from_cm(out[3], i, vr, vc, vt, dbl);
      break;
    }
    }
    evl_from_cm(out[0], i, m, n, a, dbl);
    if (op != HLO_LAPACK_GEQRF) ((int32_t *)out[r->nelems - 1]->data)[i] = info;
  }
  return HJ_OK;
}

hj_status hlo_eval_custom_call(hj_ctx_t *ctx, const hlo_instr *ins, hlo_literal *const *ops, hlo_literal *r) {
  int64_t t = ins->custom.target;
  if (t <= HLO_CUSTOM_NONE || t >= HLO_CUSTOM_COUNT || ops[0]->shape.rank < 2)
    return hlo_evo_err(ctx, ins, "not a LAPACK custom-call on matrices");
  pthread_once(&evl.once, evl_load);
  if (evl.why[0])
    return hlo_evo_err(ctx, ins, "custom-call target \"%s\" needs LAPACK: %s", hlo_custom_target_name(t), evl.why);
  evl_buf B = { { NULL } };
  hj_status st = evl_run(ctx, ins, ops, r, &B);
  for (int i = 0; i < 6; i++) hj__free(ctx, B.p[i]);
  return st;
}
