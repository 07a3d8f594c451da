// Internal: cuBLAS and cuBLASLt, loaded on first use. Linking it would map and relocate its hundreds of
// megabytes into every process that links rlx, GPU or not (measured: +150 MB RSS for
// `rlx --help`), so the CUDA backend opens libcublas.so.13 when it first compiles a graph
// and resolves the few entry points it calls.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>

namespace rlx::cuda {

struct Blas {
  cublasStatus_t (*create)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*destroy)(cublasHandle_t) = nullptr;
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t) = nullptr;
  cublasStatus_t (*set_workspace)(cublasHandle_t, void*, size_t) = nullptr;
  cublasStatus_t (*set_pointer_mode)(cublasHandle_t, cublasPointerMode_t) = nullptr;
  cublasStatus_t (*sgemm_strided_batched)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                          const float*, const float*, int, long long, const float*, int, long long,
                                          const float*, float*, int, long long, int) = nullptr;
};

// The loaded library; Error(Unsupported) naming it and dlerror() when it cannot be loaded.
const Blas& blas();

// cuBLASLt (libcublasLt.so.13): the matmuls with fused epilogues and every precision.
struct BlasLt {
  cublasStatus_t (*create)(cublasLtHandle_t*) = nullptr;
  cublasStatus_t (*desc_create)(cublasLtMatmulDesc_t*, cublasComputeType_t, cudaDataType_t) = nullptr;
  cublasStatus_t (*desc_destroy)(cublasLtMatmulDesc_t) = nullptr;
  cublasStatus_t (*desc_set)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, const void*, size_t) = nullptr;
  cublasStatus_t (*layout_create)(cublasLtMatrixLayout_t*, cudaDataType, uint64_t, uint64_t, int64_t) = nullptr;
  cublasStatus_t (*layout_destroy)(cublasLtMatrixLayout_t) = nullptr;
  cublasStatus_t (*layout_set)(cublasLtMatrixLayout_t, cublasLtMatrixLayoutAttribute_t, const void*, size_t) = nullptr;
  cublasStatus_t (*pref_create)(cublasLtMatmulPreference_t*) = nullptr;
  cublasStatus_t (*pref_destroy)(cublasLtMatmulPreference_t) = nullptr;
  cublasStatus_t (*pref_set)(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t, const void*,
                             size_t) = nullptr;
  cublasStatus_t (*heuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,
                              cublasLtMatmulHeuristicResult_t[], int*) = nullptr;
  cublasStatus_t (*matmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void*, const void*, cublasLtMatrixLayout_t,
                           const void*, cublasLtMatrixLayout_t, const void*, const void*, cublasLtMatrixLayout_t, void*,
                           cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t*, void*, size_t, cudaStream_t) = nullptr;
  cublasLtHandle_t handle = nullptr;  // one per process, made on first use (it holds no stream)
};
const BlasLt& blas_lt();

}  // namespace rlx::cuda
