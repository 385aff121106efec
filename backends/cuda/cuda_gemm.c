/* cuda_gemm.c — matmul thunks on the GPU (cuda_exec.h): our kernel (made by the emitters:
   emitters/gpu_matmul.c with gpu_mm.h's generators) or cuBLAS.

   Two ways to run a matmul fusion (matmul_plan.h, gpu_* fields):
     TILED   NAME_mm(A, B, C, operand 0, ..., operand n-1) with the fusion's epilogue fused:
             gpu_mm_tiled.c's tiled kernel, or for M <= EMIT_GPU_SKINNY_MAX_M (8) rows gpu_mm_skinny.c's
             skinny kernel (a decode step's matmuls), both with the same ABI;
     CUBLAS  cublasGemmStridedBatchedEx, f32 in and out, CUBLAS_COMPUTE_32F (TF32 only with
             HLOJIT_CUDA_TF32=1: CUBLAS_COMPUTE_32F_FAST_TF32), then NAME_epi in place when
             the fusion has an epilogue. Row-major C[M,N] = A[M,K] op(B) is column-major
             C^T = op(B)^T A^T: m = N, n = M, the operands swapped, op(B) transposed when B
             is [N,K].
   The choice, per shape (batch, M, N, K, B layout, epilogue) and arch, once per process:
     HLOJIT_CUDA_GEMM=measure (default)  on the first run that meets the shape, each way
             runs once to warm up and three times timed (host clock around a stream sync);
             the faster wins and is cached; the winner runs last, so the output is its;
     rule    ours, except cuBLAS when 8 < M < 16 (a 64-row tile would be mostly empty,
             and the skinny kernel is for 8 rows at most);
     tiled / cublas   that one (when it exists).
   Measuring times eager runs; in a CUDA graph our kernel is one node, updated in place
   when a buffer changes, while cuBLAS's are library nodes that make the graph be captured
   again when their addresses change (cuda_run.c). Only the ways that exist compete: no
   cuBLAS (not installed, handle failed) -> ours; no kernel of ours (more than 16 operands,
   a shape the generators refuse) -> cuBLAS; neither -> the compile fails with why (and
   AUTO moves on to the CPU backend).
   Once chosen, every run of the executable takes the same way: results are the same bits
   on every run. */
#include "cuda_exec.h"
#include <stdlib.h>
#include <time.h>

/* ---- the choice cache ------------------------------------------------------------------------- */

typedef struct cg_key { int arch; int64_t b, m, n, k; bool b_nk, epi; } cg_key;
typedef struct cg_entry { cg_key key; int choice; double tiled_ms, blas_ms; } cg_entry;
static pthread_mutex_t cg_mu = PTHREAD_MUTEX_INITIALIZER;
static cg_entry cg_cache[512];
static int cg_ncache;

static cg_key cg_key_of(const cub_exec *x, const struct emit_matmul_plan *p) {
  cg_key k = { (int)x->be->arch, p->B, p->M, p->N, p->K, p->rhs_transposed, p->epi_name[0] != 0 };
  return k;
}

static int cg_lookup(const cg_key *k) {
  int c = CUB_MM_UNDECIDED;
  pthread_mutex_lock(&cg_mu);
  for (int i = 0; i < cg_ncache; i++)
    if (!memcmp(&cg_cache[i].key, k, sizeof *k)) c = cg_cache[i].choice;
  pthread_mutex_unlock(&cg_mu);
  return c;
}

static void cg_store(const cg_key *k, int choice, double tms, double bms) {
  pthread_mutex_lock(&cg_mu);
  if (cg_ncache < (int)(sizeof cg_cache / sizeof cg_cache[0]))
    cg_cache[cg_ncache++] = (cg_entry){ *k, choice, tms, bms };
  pthread_mutex_unlock(&cg_mu);
  if (getenv("HLOJIT_CUDA_GEMM_LOG"))
    fprintf(stderr, "hlojit cuda: gemm %lldx%lldx%lld batch %lld%s%s: tiled %.3f ms, cuBLAS %.3f ms -> %s\n",
            (long long)k->m, (long long)k->n, (long long)k->k, (long long)k->b, k->b_nk ? " B^T" : "",
            k->epi ? " +epilogue" : "", tms, bms, choice == CUB_MM_TILED ? "tiled" : "cuBLAS");
}

/* HLOJIT_CUDA_GEMM=rule (see the top). */
static int cg_rule(const struct emit_matmul_plan *p) {
  return p->M > EMIT_GPU_SKINNY_MAX_M && p->M < 16 ? CUB_MM_CUBLAS : CUB_MM_TILED;
}

/* ---- prepare ------------------------------------------------------------------------------------ */

hj_status cub_mm_prepare(cub_exec *x, th_thunk *t) {
  hj_ctx_t *ctx = x->base.ctx;
  struct emit_matmul_plan *p = t->matmul;
  cub_state *s = x->be;
  if (!p || !p->gpu) return hj__err(ctx, HJ_ERR_INTERNAL, "CUDA backend: matmul thunk '%s' without a GPU plan", t->ins->name);
  if (arrcap(x->mms) == 0) {   /* thunks point into it: room for all of them, once */
    int n = 0;
    for (ptrdiff_t i = 0; i < arrlen(x->base.kernels); i++) n += x->base.kernels[i]->kind == TH_MATMUL;
    arrsetcap(x->mms, n + 1);
  }
  if (arrlen(x->mms) >= (ptrdiff_t)arrcap(x->mms))
    return hj__err(ctx, HJ_ERR_INTERNAL, "CUDA backend: more matmul thunks than counted");
  cub_mm mm = { .p = p };
  cuda_error e;
  hj_status st = HJ_OK;
  pthread_mutex_lock(&s->mu);
  if (p->gpu_tiled_name[0]) st = cuda_module_function(s->dv, x->mod, p->gpu_tiled_name, &mm.tiled, &e);
  if (st == HJ_OK && p->epi_name[0]) st = cuda_module_function(s->dv, x->mod, p->epi_name, &mm.epi, &e);
  pthread_mutex_unlock(&s->mu);
  if (st != HJ_OK) return cub_err(ctx, &e);
  /* cuBLAS is loaded (once per context) only where it may be used */
  pthread_mutex_lock(&s->mu);
  bool have_blas = !(s->gemm_mode == CUB_GEMM_TILED && mm.tiled) && cuda_device_blas(s->dv) != NULL;
  pthread_mutex_unlock(&s->mu);
  bool blas = have_blas && p->M <= INT32_MAX && p->N <= INT32_MAX && p->K <= INT32_MAX && p->B <= INT32_MAX;
  bool tiled = mm.tiled != NULL;
  if (!blas && !tiled)
    return hj__err(ctx, HJ_ERR_UNSUPPORTED, "CUDA backend: matmul '%s' (%lldx%lldx%lld): no tiled kernel "
                   "and no cuBLAS (%s)", t->ins->name, (long long)p->M, (long long)p->N, (long long)p->K,
                   s->dv->blas_why[0] ? s->dv->blas_why : "shape beyond cuBLAS's int range");
  if (!blas) mm.choice = CUB_MM_TILED;
  else if (!tiled) mm.choice = CUB_MM_CUBLAS;
  else if (s->gemm_mode == CUB_GEMM_TILED) mm.choice = CUB_MM_TILED;
  else if (s->gemm_mode == CUB_GEMM_CUBLAS) mm.choice = CUB_MM_CUBLAS;
  else if (s->gemm_mode == CUB_GEMM_RULE) mm.choice = cg_rule(p);
  else {
    cg_key k = cg_key_of(x, p);
    mm.choice = cg_lookup(&k);
  }
  for (int i = 0; i < 3 + 16; i++) mm.params[i] = &mm.vals[i];
  arrput(x->mms, mm);
  t->fn = &x->mms[arrlen(x->mms) - 1];
  return HJ_OK;
}

/* ---- run ------------------------------------------------------------------------------------------ */

static hj_status cg_blas(cub_exec *x, const struct emit_matmul_plan *p, void *A, void *B, void *C) {
  cub_state *s = x->be;
  cuda_driver *d = s->d;
  float one = 1, zero = 0;
  int m = (int)p->N, n = (int)p->M, k = (int)p->K;
  int ldb = (int)(p->rhs_transposed ? p->K : p->N), lda = (int)p->K;
  if (ldb < 1) ldb = 1;
  if (lda < 1) lda = 1;
  long long sa = (long long)(p->M * p->K), sb = (long long)(p->K * p->N), sc = (long long)(p->M * p->N);
  cublasStatus_t r = d->cublasGemmStridedBatchedEx(
      s->dv->blas, p->rhs_transposed ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, B, CUDA_R_32F,
      ldb, sb, A, CUDA_R_32F, lda, sa, &zero, C, CUDA_R_32F, m, sc, (int)p->B,
      s->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  cuda_error e;
  if (cuda_blas_check(d, r, &e, "cublasGemmStridedBatchedEx(%dx%dx%d, batch %lld)", (int)p->M, (int)p->N,
                      (int)p->K, (long long)p->B) != HJ_OK)
    return cub_err(x->base.ctx, &e);
  return HJ_OK;
}

static hj_status cg_run_tiled(cub_exec *x, cub_mm *mm, void **bufs) {
  const struct emit_matmul_plan *p = mm->p;
  mm->vals[0] = bufs[p->lhs_buf];
  mm->vals[1] = bufs[p->rhs_buf];
  mm->vals[2] = bufs[p->out_buf];
  for (int i = 0; i < p->gpu_n_extra; i++) mm->vals[3 + i] = bufs[i];
  return cub_launch(x, mm->tiled, p->gpu_tiled_name, p->gpu_grid, p->gpu_block, p->gpu_shared, mm->vals,
                    3 + p->gpu_n_extra);
}

static hj_status cg_run_blas(cub_exec *x, cub_mm *mm, const th_thunk *t, void **bufs) {
  const struct emit_matmul_plan *p = mm->p;
  void *ptrs[3] = { bufs[p->lhs_buf], bufs[p->rhs_buf], bufs[p->out_buf] };
  bool issue;
  hj_status st = cub_library_call(x, ptrs, 3, &issue);
  if (st == HJ_OK && issue) st = cg_blas(x, p, ptrs[0], ptrs[1], ptrs[2]);
  if (st == HJ_OK && mm->epi)
    st = cub_launch(x, mm->epi, p->epi_name, p->gpu_epi_grid, p->gpu_epi_block, 0, bufs,
                    (int)(arrlen(t->args) + arrlen(t->outs)));
  return st;
}

static double cg_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Times |way| (3 runs after a warm-up), in ms per run; < 0 on failure. */
static double cg_time(cub_exec *x, cub_mm *mm, const th_thunk *t, void **bufs, int way) {
  cuda_error e;
  double t0 = 0;
  for (int i = 0; i < 4; i++) {
    if (i == 1) {
      if (cuda_device_sync(x->be->dv, &e) != HJ_OK) return -1;
      t0 = cg_now();
    }
    hj_status st = way == CUB_MM_TILED ? cg_run_tiled(x, mm, bufs) : cg_run_blas(x, mm, t, bufs);
    if (st != HJ_OK) return -1;
  }
  if (cuda_device_sync(x->be->dv, &e) != HJ_OK) return -1;
  return (cg_now() - t0) / 3;
}

hj_status cub_mm_run(cub_exec *x, const th_thunk *t, void **bufs) {
  cub_mm *mm = t->fn;
  if (!mm) return hj__err(x->base.ctx, HJ_ERR_INTERNAL, "CUDA backend: matmul '%s' not prepared", t->ins->name);
  if (mm->choice == CUB_MM_UNDECIDED) {
    cg_key k = cg_key_of(x, mm->p);
    mm->choice = cg_lookup(&k);
  }
  if (mm->choice == CUB_MM_UNDECIDED && x->mode == CUB_EAGER) {
    hj_ctx_t *ctx = x->base.ctx;
    hj__err_saved saved;   /* a side that fails is only not chosen */
    hj__err_save(ctx, &saved);
    double tms = cg_time(x, mm, t, bufs, CUB_MM_TILED);
    double bms = cg_time(x, mm, t, bufs, CUB_MM_CUBLAS);
    char why[300];   /* the last side's failure, if both failed */
    snprintf(why, sizeof why, "%.290s", hj__ctx_err(ctx));
    hj__err_restore(ctx, &saved);
    int choice = tms < 0 && bms < 0 ? CUB_MM_UNDECIDED : bms < 0 || (tms >= 0 && tms <= bms) ? CUB_MM_TILED
                                                                                           : CUB_MM_CUBLAS;
    if (choice == CUB_MM_UNDECIDED)
      return hj__err(ctx, HJ_ERR_BACKEND, "CUDA backend: matmul '%s': neither way ran (%s)", t->ins->name, why);
    mm->choice = choice;
    cg_key k = cg_key_of(x, mm->p);
    cg_store(&k, choice, tms, bms);
  }
  if (mm->choice == CUB_MM_UNDECIDED) mm->choice = cg_rule(mm->p);
  return mm->choice == CUB_MM_TILED ? cg_run_tiled(x, mm, bufs) : cg_run_blas(x, mm, t, bufs);
}
