// Internal: per-thread scratch for kernels that pack or stage operands (GEMM panels,
// conv_integer's columns). Grow-only and 64-byte aligned, one per thread and role, so
// steady-state runs allocate nothing.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

namespace rlx::cpu {

template <class T>
class Scratch {
 public:
  T* get(int64_t count) {
    if (count > cap_) {
      const int64_t bytes = (count * int64_t(sizeof(T)) + 63) / 64 * 64;
      data_.reset(static_cast<T*>(std::aligned_alloc(64, size_t(bytes))));
      if (!data_) throw std::bad_alloc();
      cap_ = bytes / int64_t(sizeof(T));
    }
    return data_.get();
  }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> data_;
  int64_t cap_ = 0;
};

}  // namespace rlx::cpu
