/* cuda_api.h — hlojit's own declarations of the CUDA driver API and cuBLAS subset it uses,
   so that the library builds where no CUDA toolkit is installed (nothing here includes
   cuda.h; both libraries are opened with dlopen at run time, cuda_driver.c).

   Invariants
   - Every name, value, struct layout and function signature here is CUDA's own, spelled as
     in cuda.h / cublas_api.h of CUDA 13.0, so code reads like any CUDA code. This header and
     the real cuda.h never meet in one translation unit — except in the test, which defines
     CUDA_API_LISTS_ONLY (below) to get the lists alone.
   - Everything is written once, as X-macro lists: the enums, struct fields, handle and scalar
     types and the function signatures. The declarations below are generated from the
     lists; cuda_driver.c generates its function table and loader from them; the test double
     (tests/cuda_double) generates its exports from them; tests/unit/test_cuda_api.c expands
     the same lists against the real cuda.h and cublas_api.h and checks every value, every
     struct size and field offset, and every function type (against cuda.h's prototypes and
     cudaTypedefs.h's versioned PFN_<name>_v<version> typedefs).
   - Enums list only the values we use or report; the driver may return others (the enum
     types are int-sized either way, as in cuda.h).

   Driver functions: X(name, version, symbol, required, params)
     name      the entry point's base name, as given to cuGetProcAddress and used as the
               member of the function table (d->cuMemAlloc(...));
     version   the CUDA version that introduced this ABI of |name| (cudaTypedefs.h's
               PFN_<name>_v<version>): cuGetProcAddress(name, version) returns exactly this
               ABI, and a driver older than |version| lacks it;
     symbol    the exported symbol with this ABI (cuMemAlloc_v2), for dlsym where the driver
               has no cuGetProcAddress_v2 (before CUDA 12.0);
     required  1: the backend cannot work without it; 0: a feature is off without it;
     params    the parameter list. All return CUresult.
   Versioned entry points, the reason for all this: cuMemAlloc is cuMemAlloc_v2 since 3.2;
   cuMemPrefetchAsync took a CUdevice until 12.2, a CUmemLocation and flags since (and CUDA
   13's cuda.h has only the new one under the plain name); the graph kernel-node functions
   take CUDA_KERNEL_NODE_PARAMS_v2 (with kern and ctx) since 12.0; cuStreamGetCaptureInfo
   has three ABIs (10.1, 11.3, 12.3); and CUDA 13 made cuCtxSynchronize_v2(CUcontext) the
   13.0 ABI of the name cuCtxSynchronize while cuda.h still declares the void one, so
   asking cuGetProcAddress for "cuCtxSynchronize" at 13000 would return the wrong one.
   Asking by (name, version) or by the suffixed symbol pins the ABI; asking for the plain
   symbol by dlsym, or everything at one version, would not. */
#ifndef HLOJIT_CUDA_API_H
#define HLOJIT_CUDA_API_H

#include <stddef.h>
#include <stdint.h>

/* ---- scalar and handle types: X(type, what it is) ---------------------------------------- */
#define CUDA_API_SCALARS(X)                                                                 \
  X(cuuint32_t, uint32_t)                                                                   \
  X(cuuint64_t, uint64_t)                                                                   \
  X(CUdevice, int)                                                                          \
  X(CUdeviceptr, unsigned long long)

/* X(handle type, struct tag it points to) */
#define CUDA_API_HANDLES(X)                                                                 \
  X(CUcontext, CUctx_st)                                                                    \
  X(CUmodule, CUmod_st)                                                                     \
  X(CUfunction, CUfunc_st)                                                                  \
  X(CUkernel, CUkern_st)                                                                    \
  X(CUstream, CUstream_st)                                                                  \
  X(CUgraph, CUgraph_st)                                                                    \
  X(CUgraphNode, CUgraphNode_st)                                                            \
  X(CUgraphExec, CUgraphExec_st)                                                            \
  X(cudaStream_t, CUstream_st)                                                              \
  X(cublasHandle_t, cublasContext)

/* ---- enums: X(name, value), one list per type ------------------------------------------- */
#define CUDA_API_RESULTS(X)                                                                 \
  X(CUDA_SUCCESS, 0)                                                                        \
  X(CUDA_ERROR_INVALID_VALUE, 1)                                                            \
  X(CUDA_ERROR_OUT_OF_MEMORY, 2)                                                            \
  X(CUDA_ERROR_NOT_INITIALIZED, 3)                                                          \
  X(CUDA_ERROR_DEINITIALIZED, 4)                                                            \
  X(CUDA_ERROR_STUB_LIBRARY, 34)                                                            \
  X(CUDA_ERROR_DEVICE_UNAVAILABLE, 46)                                                      \
  X(CUDA_ERROR_NO_DEVICE, 100)                                                              \
  X(CUDA_ERROR_INVALID_DEVICE, 101)                                                         \
  X(CUDA_ERROR_INVALID_IMAGE, 200)                                                          \
  X(CUDA_ERROR_INVALID_CONTEXT, 201)                                                        \
  X(CUDA_ERROR_NO_BINARY_FOR_GPU, 209)                                                      \
  X(CUDA_ERROR_INVALID_PTX, 218)                                                            \
  X(CUDA_ERROR_JIT_COMPILER_NOT_FOUND, 221)                                                 \
  X(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 222)                                                \
  X(CUDA_ERROR_INVALID_HANDLE, 400)                                                         \
  X(CUDA_ERROR_ILLEGAL_STATE, 401)                                                          \
  X(CUDA_ERROR_NOT_FOUND, 500)                                                              \
  X(CUDA_ERROR_ILLEGAL_ADDRESS, 700)                                                        \
  X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, 701)                                                \
  X(CUDA_ERROR_LAUNCH_TIMEOUT, 702)                                                         \
  X(CUDA_ERROR_MISALIGNED_ADDRESS, 716)                                                     \
  X(CUDA_ERROR_LAUNCH_FAILED, 719)                                                          \
  X(CUDA_ERROR_NOT_PERMITTED, 800)                                                          \
  X(CUDA_ERROR_NOT_SUPPORTED, 801)                                                          \
  X(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, 803)                                                 \
  X(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, 804)                                         \
  X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, 900)                                             \
  X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, 901)                                             \
  X(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, 910)                                              \
  X(CUDA_ERROR_UNKNOWN, 999)

#define CUDA_API_DEVICE_ATTRIBUTES(X)                                                       \
  X(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1)                                           \
  X(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 8)                                     \
  X(CU_DEVICE_ATTRIBUTE_WARP_SIZE, 10)                                                      \
  X(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, 12)                                        \
  X(CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 13)                                                     \
  X(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 16)                                           \
  X(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 38)                                                  \
  X(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 75)                                       \
  X(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 76)                                       \
  X(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 81)                           \
  X(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 83)                                                 \
  X(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 89)                                      \
  X(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 97)

#define CUDA_API_JIT_OPTIONS(X)                                                             \
  X(CU_JIT_WALL_TIME, 2)                                                                    \
  X(CU_JIT_INFO_LOG_BUFFER, 3)                                                              \
  X(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, 4)                                                   \
  X(CU_JIT_ERROR_LOG_BUFFER, 5)                                                             \
  X(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, 6)                                                  \
  X(CU_JIT_OPTIMIZATION_LEVEL, 7)                                                           \
  X(CU_JIT_LOG_VERBOSE, 12)                                                                 \
  X(CU_JIT_GENERATE_LINE_INFO, 13)

#define CUDA_API_FUNCTION_ATTRIBUTES(X)                                                     \
  X(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 0)                                             \
  X(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, 1)                                                 \
  X(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, 3)                                                  \
  X(CU_FUNC_ATTRIBUTE_NUM_REGS, 4)                                                          \
  X(CU_FUNC_ATTRIBUTE_PTX_VERSION, 5)                                                       \
  X(CU_FUNC_ATTRIBUTE_BINARY_VERSION, 6)                                                    \
  X(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 8)

#define CUDA_API_MEM_ATTACH(X) X(CU_MEM_ATTACH_GLOBAL, 1) X(CU_MEM_ATTACH_HOST, 2)

#define CUDA_API_MEM_LOCATION_TYPES(X)                                                      \
  X(CU_MEM_LOCATION_TYPE_INVALID, 0)                                                        \
  X(CU_MEM_LOCATION_TYPE_DEVICE, 1)                                                         \
  X(CU_MEM_LOCATION_TYPE_HOST, 2)

#define CUDA_API_STREAM_FLAGS(X) X(CU_STREAM_DEFAULT, 0) X(CU_STREAM_NON_BLOCKING, 1)

#define CUDA_API_CAPTURE_MODES(X)                                                           \
  X(CU_STREAM_CAPTURE_MODE_GLOBAL, 0)                                                       \
  X(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, 1)                                                 \
  X(CU_STREAM_CAPTURE_MODE_RELAXED, 2)

#define CUDA_API_CAPTURE_STATUS(X)                                                          \
  X(CU_STREAM_CAPTURE_STATUS_NONE, 0)                                                       \
  X(CU_STREAM_CAPTURE_STATUS_ACTIVE, 1)                                                     \
  X(CU_STREAM_CAPTURE_STATUS_INVALIDATED, 2)

#define CUDA_API_GRAPH_INSTANTIATE_FLAGS(X)                                                 \
  X(CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH, 1)                                     \
  X(CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD, 2)

#define CUDA_API_GRAPH_NODE_TYPES(X)                                                        \
  X(CU_GRAPH_NODE_TYPE_KERNEL, 0)                                                           \
  X(CU_GRAPH_NODE_TYPE_MEMCPY, 1)                                                           \
  X(CU_GRAPH_NODE_TYPE_MEMSET, 2)                                                           \
  X(CU_GRAPH_NODE_TYPE_EMPTY, 5)

#define CUDA_API_PROC_FLAGS(X)                                                              \
  X(CU_GET_PROC_ADDRESS_DEFAULT, 0)                                                         \
  X(CU_GET_PROC_ADDRESS_LEGACY_STREAM, 1)                                                   \
  X(CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, 2)

#define CUDA_API_PROC_RESULTS(X)                                                            \
  X(CU_GET_PROC_ADDRESS_SUCCESS, 0)                                                         \
  X(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, 1)                                                \
  X(CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, 2)

/* cuBLAS and library_types.h */
#define CUDA_API_CUBLAS_STATUS(X)                                                           \
  X(CUBLAS_STATUS_SUCCESS, 0)                                                               \
  X(CUBLAS_STATUS_NOT_INITIALIZED, 1)                                                       \
  X(CUBLAS_STATUS_ALLOC_FAILED, 3)                                                          \
  X(CUBLAS_STATUS_INVALID_VALUE, 7)                                                         \
  X(CUBLAS_STATUS_ARCH_MISMATCH, 8)                                                         \
  X(CUBLAS_STATUS_MAPPING_ERROR, 11)                                                        \
  X(CUBLAS_STATUS_EXECUTION_FAILED, 13)                                                     \
  X(CUBLAS_STATUS_INTERNAL_ERROR, 14)                                                       \
  X(CUBLAS_STATUS_NOT_SUPPORTED, 15)                                                        \
  X(CUBLAS_STATUS_LICENSE_ERROR, 16)

#define CUDA_API_CUBLAS_OPS(X) X(CUBLAS_OP_N, 0) X(CUBLAS_OP_T, 1) X(CUBLAS_OP_C, 2)

#define CUDA_API_CUBLAS_MATH(X)                                                             \
  X(CUBLAS_DEFAULT_MATH, 0)                                                                 \
  X(CUBLAS_PEDANTIC_MATH, 2)                                                                \
  X(CUBLAS_TF32_TENSOR_OP_MATH, 3)                                                          \
  X(CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION, 16)

#define CUDA_API_CUBLAS_COMPUTE(X)                                                          \
  X(CUBLAS_COMPUTE_32F, 68)                                                                 \
  X(CUBLAS_COMPUTE_32F_PEDANTIC, 69)                                                        \
  X(CUBLAS_COMPUTE_32F_FAST_TF32, 77)

#define CUDA_API_CUBLAS_ALGOS(X) X(CUBLAS_GEMM_DEFAULT, -1) X(CUBLAS_GEMM_DEFAULT_TENSOR_OP, 99)

#define CUDA_API_DATA_TYPES(X)                                                              \
  X(CUDA_R_32F, 0)                                                                          \
  X(CUDA_R_64F, 1)                                                                          \
  X(CUDA_R_16F, 2)                                                                          \
  X(CUDA_R_16BF, 14)

/* Every enum list with the type it makes: X(type, list). */
#define CUDA_API_ENUMS(X)                                                                   \
  X(CUresult, CUDA_API_RESULTS)                                                             \
  X(CUdevice_attribute, CUDA_API_DEVICE_ATTRIBUTES)                                         \
  X(CUjit_option, CUDA_API_JIT_OPTIONS)                                                     \
  X(CUfunction_attribute, CUDA_API_FUNCTION_ATTRIBUTES)                                     \
  X(CUmemAttach_flags, CUDA_API_MEM_ATTACH)                                                 \
  X(CUmemLocationType, CUDA_API_MEM_LOCATION_TYPES)                                         \
  X(CUstream_flags, CUDA_API_STREAM_FLAGS)                                                  \
  X(CUstreamCaptureMode, CUDA_API_CAPTURE_MODES)                                            \
  X(CUstreamCaptureStatus, CUDA_API_CAPTURE_STATUS)                                         \
  X(CUgraphInstantiate_flags, CUDA_API_GRAPH_INSTANTIATE_FLAGS)                             \
  X(CUgraphNodeType, CUDA_API_GRAPH_NODE_TYPES)                                             \
  X(CUdriverProcAddress_flags, CUDA_API_PROC_FLAGS)                                         \
  X(CUdriverProcAddressQueryResult, CUDA_API_PROC_RESULTS)                                  \
  X(cublasStatus_t, CUDA_API_CUBLAS_STATUS)                                                 \
  X(cublasOperation_t, CUDA_API_CUBLAS_OPS)                                                 \
  X(cublasMath_t, CUDA_API_CUBLAS_MATH)                                                     \
  X(cublasComputeType_t, CUDA_API_CUBLAS_COMPUTE)                                           \
  X(cublasGemmAlgo_t, CUDA_API_CUBLAS_ALGOS)                                                \
  X(cudaDataType, CUDA_API_DATA_TYPES)

/* ---- structs: F(field type, field name, array suffix or nothing) ------------------------- */
#define CUDA_API_MEM_LOCATION_FIELDS(F) F(CUmemLocationType, type, ) F(int, id, )

#define CUDA_API_GRAPH_EDGE_DATA_FIELDS(F)                                                  \
  F(unsigned char, from_port, )                                                             \
  F(unsigned char, to_port, )                                                               \
  F(unsigned char, type, )                                                                  \
  F(unsigned char, reserved, [5])

/* CUDA_KERNEL_NODE_PARAMS is the _v2 layout (CUDA 12.0+: kern and ctx appended); the graph
   functions below are the ones that take it (_v2 symbols, version 12000). */
#define CUDA_API_KERNEL_NODE_PARAMS_FIELDS(F)                                               \
  F(CUfunction, func, )                                                                     \
  F(unsigned int, gridDimX, )                                                               \
  F(unsigned int, gridDimY, )                                                               \
  F(unsigned int, gridDimZ, )                                                               \
  F(unsigned int, blockDimX, )                                                              \
  F(unsigned int, blockDimY, )                                                              \
  F(unsigned int, blockDimZ, )                                                              \
  F(unsigned int, sharedMemBytes, )                                                         \
  F(void **, kernelParams, )                                                                \
  F(void **, extra, )                                                                       \
  F(CUkernel, kern, )                                                                       \
  F(CUcontext, ctx, )

/* X(our type name, the name cuda.h gives the same layout, size on LP64, fields) */
#define CUDA_API_STRUCTS(X)                                                                 \
  X(CUmemLocation, CUmemLocation_v1, 8, CUDA_API_MEM_LOCATION_FIELDS)                       \
  X(CUgraphEdgeData, CUgraphEdgeData, 8, CUDA_API_GRAPH_EDGE_DATA_FIELDS)                   \
  X(CUDA_KERNEL_NODE_PARAMS, CUDA_KERNEL_NODE_PARAMS_v2, 72, CUDA_API_KERNEL_NODE_PARAMS_FIELDS)

/* ---- driver functions: X(name, version, symbol, required, params) (see the top) ---------- */
/* Resolved by dlsym before anything else (cuGetProcAddress needs nothing, cuInit comes
   first, the error names are needed to report cuInit's failure). */
#define CUDA_API_BOOT_FUNCS(X)                                                              \
  X(cuGetProcAddress, 12000, cuGetProcAddress_v2, 0,                                        \
    (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,                     \
     CUdriverProcAddressQueryResult *symbolStatus))                                         \
  X(cuInit, 2000, cuInit, 1, (unsigned int Flags))                                          \
  X(cuDriverGetVersion, 2020, cuDriverGetVersion, 1, (int *driverVersion))                  \
  X(cuGetErrorName, 6000, cuGetErrorName, 0, (CUresult error, const char **pStr))           \
  X(cuGetErrorString, 6000, cuGetErrorString, 0, (CUresult error, const char **pStr))

/* Resolved after cuInit, through cuGetProcAddress_v2 (or dlsym of |symbol| without it). */
#define CUDA_API_DRIVER_FUNCS(X)                                                            \
  X(cuDeviceGetCount, 2000, cuDeviceGetCount, 1, (int *count))                              \
  X(cuDeviceGet, 2000, cuDeviceGet, 1, (CUdevice *device, int ordinal))                     \
  X(cuDeviceGetAttribute, 2000, cuDeviceGetAttribute, 1,                                    \
    (int *pi, CUdevice_attribute attrib, CUdevice dev))                                     \
  X(cuDeviceGetName, 2000, cuDeviceGetName, 1, (char *name, int len, CUdevice dev))         \
  X(cuDeviceTotalMem, 3020, cuDeviceTotalMem_v2, 1, (size_t *bytes, CUdevice dev))          \
  X(cuDevicePrimaryCtxRetain, 7000, cuDevicePrimaryCtxRetain, 1,                            \
    (CUcontext *pctx, CUdevice dev))                                                        \
  X(cuDevicePrimaryCtxRelease, 11000, cuDevicePrimaryCtxRelease_v2, 1, (CUdevice dev))      \
  X(cuCtxSetCurrent, 4000, cuCtxSetCurrent, 1, (CUcontext ctx))                             \
  X(cuCtxSynchronize, 2000, cuCtxSynchronize, 1, (void))                                    \
  X(cuMemGetInfo, 3020, cuMemGetInfo_v2, 1, (size_t *free, size_t *total))                  \
  X(cuMemAlloc, 3020, cuMemAlloc_v2, 1, (CUdeviceptr *dptr, size_t bytesize))               \
  X(cuMemAllocManaged, 6000, cuMemAllocManaged, 1,                                          \
    (CUdeviceptr *dptr, size_t bytesize, unsigned int flags))                               \
  X(cuMemFree, 3020, cuMemFree_v2, 1, (CUdeviceptr dptr))                                   \
  X(cuMemPrefetchAsync, 12020, cuMemPrefetchAsync_v2, 0,                                    \
    (CUdeviceptr devPtr, size_t count, CUmemLocation location, unsigned int flags,          \
     CUstream hStream))                                                                     \
  X(cuMemcpyHtoD, 3020, cuMemcpyHtoD_v2, 1,                                                 \
    (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount))                         \
  X(cuMemcpyDtoH, 3020, cuMemcpyDtoH_v2, 1,                                                 \
    (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount))                               \
  X(cuMemcpyHtoDAsync, 3020, cuMemcpyHtoDAsync_v2, 1,                                       \
    (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream))       \
  X(cuMemcpyDtoHAsync, 3020, cuMemcpyDtoHAsync_v2, 1,                                       \
    (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream))             \
  X(cuMemcpyDtoDAsync, 3020, cuMemcpyDtoDAsync_v2, 1,                                       \
    (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream))     \
  X(cuMemsetD8Async, 3020, cuMemsetD8Async, 1,                                              \
    (CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream))                  \
  X(cuModuleLoadDataEx, 2010, cuModuleLoadDataEx, 1,                                        \
    (CUmodule *module, const void *image, unsigned int numOptions, CUjit_option *options,   \
     void **optionValues))                                                                  \
  X(cuModuleGetFunction, 2000, cuModuleGetFunction, 1,                                      \
    (CUfunction *hfunc, CUmodule hmod, const char *name))                                   \
  X(cuModuleUnload, 2000, cuModuleUnload, 1, (CUmodule hmod))                               \
  X(cuFuncGetAttribute, 2020, cuFuncGetAttribute, 1,                                        \
    (int *pi, CUfunction_attribute attrib, CUfunction hfunc))                               \
  X(cuFuncSetAttribute, 9000, cuFuncSetAttribute, 1,                                        \
    (CUfunction hfunc, CUfunction_attribute attrib, int value))                             \
  X(cuLaunchKernel, 4000, cuLaunchKernel, 1,                                                \
    (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,     \
     unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,                \
     unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra))     \
  X(cuStreamCreate, 2000, cuStreamCreate, 1, (CUstream *phStream, unsigned int Flags))      \
  X(cuStreamDestroy, 4000, cuStreamDestroy_v2, 1, (CUstream hStream))                       \
  X(cuStreamSynchronize, 2000, cuStreamSynchronize, 1, (CUstream hStream))                  \
  CUDA_API_GRAPH_FUNCS(X)

/* Graphs: stream capture (so cuBLAS's kernels are captured too, which building a graph by
   hand could not do), the node each launch made read back with cuStreamGetCaptureInfo, and
   kernel nodes updated in place. Optional: without any of them graphs are off. */
#define CUDA_API_GRAPH_FUNCS(X)                                                             \
  X(cuStreamBeginCapture, 10010, cuStreamBeginCapture_v2, 0,                                \
    (CUstream hStream, CUstreamCaptureMode mode))                                           \
  X(cuStreamEndCapture, 10000, cuStreamEndCapture, 0, (CUstream hStream, CUgraph *phGraph)) \
  X(cuStreamGetCaptureInfo, 12030, cuStreamGetCaptureInfo_v3, 0,                            \
    (CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out,        \
     CUgraph *graph_out, const CUgraphNode **dependencies_out,                              \
     const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out))                    \
  X(cuGraphInstantiateWithFlags, 11040, cuGraphInstantiateWithFlags, 0,                     \
    (CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags))                   \
  X(cuGraphLaunch, 10000, cuGraphLaunch, 0, (CUgraphExec hGraphExec, CUstream hStream))     \
  X(cuGraphExecKernelNodeSetParams, 12000, cuGraphExecKernelNodeSetParams_v2, 0,            \
    (CUgraphExec hGraphExec, CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS *nodeParams)) \
  X(cuGraphGetNodes, 10000, cuGraphGetNodes, 0,                                             \
    (CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes))                                 \
  X(cuGraphNodeGetType, 10000, cuGraphNodeGetType, 0,                                       \
    (CUgraphNode hNode, CUgraphNodeType *type))                                             \
  X(cuGraphKernelNodeGetParams, 12000, cuGraphKernelNodeGetParams_v2, 0,                    \
    (CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *nodeParams))                               \
  X(cuGraphExecDestroy, 10000, cuGraphExecDestroy, 0, (CUgraphExec hGraphExec))             \
  X(cuGraphDestroy, 10000, cuGraphDestroy, 0, (CUgraph hGraph))

/* Older ABIs kept for older drivers: X(member, name, version, symbol, required, params).
   cuMemPrefetchAsync before 12.2 (a CUdevice; CU_DEVICE_CPU for the host). cuda.h of CUDA
   13 no longer declares it, so the test checks it against cudaTypedefs.h alone. */
#define CUDA_API_LEGACY_FUNCS(X)                                                            \
  X(cuMemPrefetchAsync_v1, cuMemPrefetchAsync, 8000, cuMemPrefetchAsync, 0,                 \
    (CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream))

/* ---- cuBLAS: X(return type, symbol, required, params); dlsym'd by these names ------------ */
#define CUDA_API_CUBLAS_FUNCS(X)                                                            \
  X(cublasStatus_t, cublasCreate_v2, 1, (cublasHandle_t *handle))                           \
  X(cublasStatus_t, cublasDestroy_v2, 1, (cublasHandle_t handle))                           \
  X(cublasStatus_t, cublasGetVersion_v2, 1, (cublasHandle_t handle, int *version))          \
  X(cublasStatus_t, cublasSetStream_v2, 1, (cublasHandle_t handle, cudaStream_t streamId))  \
  X(cublasStatus_t, cublasSetMathMode, 1, (cublasHandle_t handle, cublasMath_t mode))       \
  X(cublasStatus_t, cublasGemmEx, 1,                                                        \
    (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,      \
     int n, int k, const void *alpha, const void *A, cudaDataType Atype, int lda,           \
     const void *B, cudaDataType Btype, int ldb, const void *beta, void *C,                 \
     cudaDataType Ctype, int ldc, cublasComputeType_t computeType, cublasGemmAlgo_t algo))  \
  X(cublasStatus_t, cublasGemmStridedBatchedEx, 1,                                          \
    (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,      \
     int n, int k, const void *alpha, const void *A, cudaDataType Atype, int lda,           \
     long long int strideA, const void *B, cudaDataType Btype, int ldb,                     \
     long long int strideB, const void *beta, void *C, cudaDataType Ctype, int ldc,         \
     long long int strideC, int batchCount, cublasComputeType_t computeType,                \
     cublasGemmAlgo_t algo))                                                                \
  X(const char *, cublasGetStatusString, 0, (cublasStatus_t status))

/* ---- the declarations ---------------------------------------------------------------------- */
#ifndef CUDA_API_LISTS_ONLY

#define CUDA_API_SCALAR_(type, what) typedef what type;
CUDA_API_SCALARS(CUDA_API_SCALAR_)
#undef CUDA_API_SCALAR_

#define CUDA_API_HANDLE_(type, tag) typedef struct tag *type;
CUDA_API_HANDLES(CUDA_API_HANDLE_)
#undef CUDA_API_HANDLE_

#define CUDA_API_ENUMERATOR_(name, value) name = value,
#define CUDA_API_ENUM_(type, list) typedef enum { list(CUDA_API_ENUMERATOR_) } type;
CUDA_API_ENUMS(CUDA_API_ENUM_)
#undef CUDA_API_ENUM_
/* C makes every enum int-sized whatever its values (cuda.h's too); the test checks theirs. */
#define CUDA_API_ENUM_SIZE_(type, list) _Static_assert(sizeof(type) == 4, #type);
CUDA_API_ENUMS(CUDA_API_ENUM_SIZE_)
#undef CUDA_API_ENUM_SIZE_
#undef CUDA_API_ENUMERATOR_

#define CU_DEVICE_CPU ((CUdevice)-1)        /* cuMemPrefetchAsync_v1: the host */
#define CU_DEVICE_INVALID ((CUdevice)-2)

#define CUDA_API_FIELD_(type, name, dims) type name dims;
#define CUDA_API_STRUCT_(name, real, size, fields) typedef struct { fields(CUDA_API_FIELD_) } name;
CUDA_API_STRUCTS(CUDA_API_STRUCT_)
#undef CUDA_API_STRUCT_
#if UINTPTR_MAX == UINT64_MAX
#define CUDA_API_STRUCT_SIZE_(name, real, size, fields) \
  _Static_assert(sizeof(name) == (size), #name " has cuda.h's size");
CUDA_API_STRUCTS(CUDA_API_STRUCT_SIZE_)
#undef CUDA_API_STRUCT_SIZE_
#endif
#undef CUDA_API_FIELD_

/* Function pointer types: cuda_pfn_cuMemAlloc, cuda_pfn_cublasGemmEx, ... */
#define CUDA_API_PFN_(name, version, symbol, required, params) \
  typedef CUresult (*cuda_pfn_##name) params;
#define CUDA_API_PFN_LEGACY_(member, name, version, symbol, required, params) \
  typedef CUresult (*cuda_pfn_##member) params;
#define CUDA_API_PFN_BLAS_(ret, symbol, required, params) typedef ret (*cuda_pfn_##symbol) params;
CUDA_API_BOOT_FUNCS(CUDA_API_PFN_)
CUDA_API_DRIVER_FUNCS(CUDA_API_PFN_)
CUDA_API_LEGACY_FUNCS(CUDA_API_PFN_LEGACY_)
CUDA_API_CUBLAS_FUNCS(CUDA_API_PFN_BLAS_)
#undef CUDA_API_PFN_
#undef CUDA_API_PFN_LEGACY_
#undef CUDA_API_PFN_BLAS_

#endif /* CUDA_API_LISTS_ONLY */
#endif /* HLOJIT_CUDA_API_H */
