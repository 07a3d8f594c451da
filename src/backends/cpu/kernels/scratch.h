// Internal: per-thread scratch for kernels that pack or stage operands (GEMM panels,
// conv_integer's columns). Grow-only and 64-byte aligned, one per thread and role, so
// steady-state runs allocate nothing.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

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

// A std::vector allocator giving 64-byte aligned storage: operands packed once (conv and
// matmul weights, Winograd's transformed weights) whose 128-byte panel rows the microkernels
// load. From malloc most started 16, 32 or 48 bytes into a cache line (ResNet-50's: so every
// panel row was three lines and every vector load split across two), and where depended on
// the allocator's state. Measured on ResNet-50 (one and two threads, 11 alternated rounds),
// the times were within the noise either way; aligned, a layer's time no longer depends on
// where its weights happened to land.
template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64))); }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(64)); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const { return true; }
  template <class U>
  bool operator!=(const CacheLineAllocator<U>&) const { return false; }
};
using AlignedFloats = std::vector<float, CacheLineAllocator<float>>;

}  // namespace rlx::cpu
