// Internal: cuBLAS, loaded on first use. Linking it would map and relocate its hundreds of
// megabytes into every process that links rlx, GPU or not (measured: +150 MB RSS for
// `rlx --help`), so the CUDA backend opens libcublas.so.13 when it first compiles a graph
// and resolves the few entry points it calls.
#pragma once
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

}  // namespace rlx::cuda
