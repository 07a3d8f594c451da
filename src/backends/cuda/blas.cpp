#include "backends/cuda/blas.h"

#include <mutex>
#include <string>

#include "backends/cuda/dynlib.h"
#include "rlx/error.h"

namespace rlx::cuda {

const Blas& blas() {
  static Blas b;
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] {
    DynLib lib({"libcublas.so.13", "libcublas.so"}, "cuBLAS");
    auto sym = [&](auto& fn, const char* name) { lib.sym(fn, name); };
    sym(b.create, "cublasCreate_v2");
    sym(b.destroy, "cublasDestroy_v2");
    sym(b.set_stream, "cublasSetStream_v2");
    sym(b.set_workspace, "cublasSetWorkspace_v2");
    sym(b.set_pointer_mode, "cublasSetPointerMode_v2");
    sym(b.sgemm_strided_batched, "cublasSgemmStridedBatched");
    error = lib.error();
  });
  if (!error.empty()) fail(ErrorCategory::Unsupported, "CUDA backend: ", error);
  return b;
}

const BlasLt& blas_lt() {
  static BlasLt b;
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] {
    DynLib lib({"libcublasLt.so.13", "libcublasLt.so"}, "cuBLASLt");
    auto sym = [&](auto& fn, const char* name) { lib.sym(fn, name); };
    sym(b.create, "cublasLtCreate");
    sym(b.desc_create, "cublasLtMatmulDescCreate");
    sym(b.desc_destroy, "cublasLtMatmulDescDestroy");
    sym(b.desc_set, "cublasLtMatmulDescSetAttribute");
    sym(b.layout_create, "cublasLtMatrixLayoutCreate");
    sym(b.layout_destroy, "cublasLtMatrixLayoutDestroy");
    sym(b.layout_set, "cublasLtMatrixLayoutSetAttribute");
    sym(b.pref_create, "cublasLtMatmulPreferenceCreate");
    sym(b.pref_destroy, "cublasLtMatmulPreferenceDestroy");
    sym(b.pref_set, "cublasLtMatmulPreferenceSetAttribute");
    sym(b.heuristic, "cublasLtMatmulAlgoGetHeuristic");
    sym(b.matmul, "cublasLtMatmul");
    error = lib.error();
    if (error.empty()) {
      const cublasStatus_t st = b.create(&b.handle);
      if (st != CUBLAS_STATUS_SUCCESS) error = "cublasLtCreate failed (status " + std::to_string(int(st)) + ")";
    }
  });
  if (!error.empty()) fail(ErrorCategory::Unsupported, "CUDA backend: ", error);
  return b;
}

}  // namespace rlx::cuda
