/* cuda_double_blas.c — the cuBLAS half of the CUDA test double (cuda_double.h). A TEST
   DOUBLE: handles are plain allocations; cublasGemmEx and cublasGemmStridedBatchedEx are
   computed on the host, naively, for f32 data with f32 compute, in cuBLAS's column-major
   convention — so that a caller's mapping of row-major tensors onto cuBLAS arguments
   (transposes, leading dimensions, strides) can be checked numerically without a GPU.
   Every gemm is logged (cuda_double_log.gemm) with its arguments. */
#include "backends/cuda/cuda_api.h"
#include "tests/cuda_double/cuda_double.h"
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define DBL_BLAS_PROTO(ret, symbol, required, params) EXPORT ret symbol params;
CUDA_API_CUBLAS_FUNCS(DBL_BLAS_PROTO)

/* from cuda_double.c (same library) */
EXPORT long long cuda_double_get(const char *key);
EXPORT const cuda_double_log *cuda_double_log_get(void);
__attribute__((visibility("hidden"))) void dbl_blas_handles(int delta);

struct cublasContext { cudaStream_t stream; cublasMath_t math; };

cublasStatus_t cublasCreate_v2(cublasHandle_t *h) {
  *h = NULL;
  long long err = cuda_double_get("blas_create_error");
  if (err) return (cublasStatus_t)err;
  *h = calloc(1, sizeof **h);
  if (!*h) return CUBLAS_STATUS_ALLOC_FAILED;
  dbl_blas_handles(+1);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t h) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  free(h);
  dbl_blas_handles(-1);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetVersion_v2(cublasHandle_t h, int *v) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  *v = 130100;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  h->stream = s;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  h->math = m;
  return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t s) {
  return s == CUBLAS_STATUS_SUCCESS ? "test double: success" : "test double: failure";
}

/* C (m x n, ldc) = alpha * op(A) * op(B) + beta * C, column-major, in double. */
static void dbl_sgemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                      const float *A, int lda, const float *B, int ldb, float beta, float *C,
                      int ldc) {
  for (int j = 0; j < n; j++)
    for (int i = 0; i < m; i++) {
      double acc = 0;
      for (int p = 0; p < k; p++) {
        double a = ta == CUBLAS_OP_N ? A[i + (size_t)p * lda] : A[p + (size_t)i * lda];
        double b = tb == CUBLAS_OP_N ? B[p + (size_t)j * ldb] : B[j + (size_t)p * ldb];
        acc += a * b;
      }
      float *c = &C[i + (size_t)j * ldc];
      *c = (float)(alpha * acc + (beta != 0 ? beta * (double)*c : 0.0));
    }
}

static cublasStatus_t dbl_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                               int m, int n, int k, const void *alpha, const void *A,
                               cudaDataType at, int lda, long long sa, const void *B,
                               cudaDataType bt, int ldb, long long sb, const void *beta,
                               void *C, cudaDataType ct, int ldc, long long sc, int batch,
                               cublasComputeType_t compute, cublasGemmAlgo_t algo) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m < 0 || n < 0 || k < 0 || batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (lda < (ta == CUBLAS_OP_N ? m : k) || lda < 1 || ldb < (tb == CUBLAS_OP_N ? k : n) ||
      ldb < 1 || ldc < m || ldc < 1)
    return CUBLAS_STATUS_INVALID_VALUE;
  cuda_double_log *L = (cuda_double_log *)cuda_double_log_get();
  if (L->ngemm < 64) {
    cuda_double_gemm *g = &L->gemm[L->ngemm++];
    *g = (cuda_double_gemm){ ta, tb, m, n, k, lda, ldb, ldc, batch, sa, sb, sc, at, bt, ct,
                             compute, algo, h->math, *(const float *)alpha,
                             *(const float *)beta, h->stream };
  }
  if (at != CUDA_R_32F || bt != CUDA_R_32F || ct != CUDA_R_32F ||
      (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_PEDANTIC &&
       compute != CUBLAS_COMPUTE_32F_FAST_TF32))
    return CUBLAS_STATUS_NOT_SUPPORTED;   /* the double only computes f32 */
  for (int b = 0; b < batch; b++)
    dbl_sgemm(ta, tb, m, n, k, *(const float *)alpha, (const float *)A + b * sa, lda,
              (const float *)B + b * sb, ldb, *(const float *)beta, (float *)C + b * sc, ldc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, const void *alpha, const void *A, cudaDataType at,
                            int lda, const void *B, cudaDataType bt, int ldb, const void *beta,
                            void *C, cudaDataType ct, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo) {
  return dbl_gemm(h, ta, tb, m, n, k, alpha, A, at, lda, 0, B, bt, ldb, 0, beta, C, ct, ldc, 0,
                  1, compute, algo);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta,
                                          cublasOperation_t tb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType at,
                                          int lda, long long sa, const void *B, cudaDataType bt,
                                          int ldb, long long sb, const void *beta, void *C,
                                          cudaDataType ct, int ldc, long long sc, int batch,
                                          cublasComputeType_t compute, cublasGemmAlgo_t algo) {
  return dbl_gemm(h, ta, tb, m, n, k, alpha, A, at, lda, sa, B, bt, ldb, sb, beta, C, ct, ldc,
                  sc, batch, compute, algo);
}
