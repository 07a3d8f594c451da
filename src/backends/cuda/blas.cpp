#include "backends/cuda/blas.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "rlx/error.h"

namespace rlx::cuda {

const Blas& blas() {
  static Blas b;
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] {
    void* h = nullptr;
    for (const char* name : {"libcublas.so.13", "libcublas.so"})
      if ((h = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!h) {
      const char* e = dlerror();
      error = std::string("cannot load cuBLAS (libcublas.so.13): ") + (e ? e : "not found");
      return;
    }
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      if (!fn && error.empty()) error = std::string("cuBLAS has no ") + name;
    };
    sym(b.create, "cublasCreate_v2");
    sym(b.destroy, "cublasDestroy_v2");
    sym(b.set_stream, "cublasSetStream_v2");
    sym(b.set_workspace, "cublasSetWorkspace_v2");
    sym(b.set_pointer_mode, "cublasSetPointerMode_v2");
    sym(b.sgemm_strided_batched, "cublasSgemmStridedBatched");
  });
  if (!error.empty()) fail(ErrorCategory::Unsupported, "CUDA backend: ", error);
  return b;
}

}  // namespace rlx::cuda
