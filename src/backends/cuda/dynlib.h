// Internal: a shared library of the CUDA toolkit opened with dlopen on first use (cuBLAS,
// cuBLASLt, cuDNN, NVRTC: linking them would load hundreds of MB into every process that
// links rlx), and its entry points. The handle is never closed: the process keeps it.
#pragma once
#include <dlfcn.h>

#include <initializer_list>
#include <string>
#include <type_traits>

namespace rlx::cuda {

class DynLib {
 public:
  // Opens the first of `names` that loads; `what` names the library in errors ("cuBLAS").
  DynLib(std::initializer_list<const char*> names, const char* what) : what_(what) {
    for (const char* n : names)
      if ((h_ = dlopen(n, RTLD_NOW | RTLD_LOCAL))) return;
    const char* e = dlerror();
    error_ = std::string("cannot load ") + what + " (" + *names.begin() + "): " + (e ? e : "not found");
  }
  // Resolves `name` into `fn`; the first missing one becomes error().
  template <class F>
  void sym(F& fn, const char* name) {
    if (!h_) return;
    fn = reinterpret_cast<std::remove_reference_t<F>>(dlsym(h_, name));
    if (!fn && error_.empty()) error_ = what_ + " has no " + name;
  }
  // Empty when the library and every entry point asked for were found.
  const std::string& error() const { return error_; }

 private:
  void* h_ = nullptr;
  std::string what_, error_;
};

}  // namespace rlx::cuda
