// Arena: one aligned block of bytes, allocated once and zero-filled.
//
// Small blocks come from the heap (aligned_alloc). Blocks of kMapThreshold bytes or
// more are anonymous private mmaps, so release() can hand whole pages back to the OS
// (madvise MADV_DONTNEED: the pages read as zero on the next touch and are faulted in
// again by whoever writes them). On a heap block release() does nothing: the memory is
// too small to be worth returning. Move-only; not thread-safe (one owner).
#pragma once
#include <cstddef>
#include <cstdint>

namespace rlx::cpu {

class Arena {
 public:
  static constexpr int64_t kMapThreshold = int64_t(1) << 20;  // 1 MiB

  Arena() = default;
  // alignment: a power of two; bytes may be 0 (data() is then nullptr).
  // Throws Error(ResourceExhausted) when the memory cannot be obtained.
  Arena(int64_t bytes, int64_t alignment);
  ~Arena();
  Arena(Arena&& o) noexcept;
  Arena& operator=(Arena&& o) noexcept;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  uint8_t* data() const { return data_; }
  int64_t size() const { return size_; }
  bool mapped() const { return mapped_; }

  // Returns the pages lying wholly inside [begin, end) to the OS (mapped blocks only).
  // Returns the number of bytes released.
  int64_t release(int64_t begin, int64_t end);

 private:
  void free_memory();

  uint8_t* data_ = nullptr;
  int64_t size_ = 0;
  size_t alloc_bytes_ = 0;
  bool mapped_ = false;
};

}  // namespace rlx::cpu
