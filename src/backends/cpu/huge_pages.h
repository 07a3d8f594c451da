// Memory for long-lived buffers that every run streams through: the convolutions' packed weights
// and Winograd's transformed ones (ResNet-50 reads about 110 MB of them per image) and the
// arena. (Matmuls' packed weights stay on the heap: made at build, they reuse the pages of the
// constants released before them, and fresh mappings cost BERT-base's first run 4x in page
// zeroing.) Blocks of kHugeMin bytes or more are mappings of
// their own, 2 MiB aligned and marked MADV_HUGEPAGE before their first touch, so that where
// the kernel offers transparent huge pages (their `madvise` mode is Debian's default) the
// block's whole 2 MiB ranges are backed by one page each: a stream through the weights no
// longer takes a TLB miss and page walk every 4 KiB, which the hardware prefetchers do not
// cross. The mapping ends at the block's last 4 KiB page, so a partial 2 MiB range at its end
// stays in small pages and no memory is added to the process. Smaller blocks come from the
// heap. Where huge pages are off, the mapping is an ordinary one.
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace rlx::cpu {

inline constexpr size_t kHugeMin = size_t(2) << 20;

// A zero-filled block of `bytes` (>= kHugeMin) as above; throws Error(ResourceExhausted) when
// the memory cannot be mapped. Release with unmap_huge(p, bytes).
void* map_huge(size_t bytes);
void unmap_huge(void* p, size_t bytes);
// Marks [p, p + bytes) of an existing anonymous mapping for huge pages (the arena's).
void advise_huge(void* p, size_t bytes);
// Hands the heap's free pages back to the system (glibc's malloc_trim; nothing elsewhere):
// called once at the end of a build, whose released constants' pages the mappings above do not
// reuse (ResNet-50's peak RSS 281 -> 227 MB).
void release_free_heap();

template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes >= kHugeMin) return static_cast<T*>(map_huge(bytes));
    return static_cast<T*>(::operator new(bytes));
  }
  void deallocate(T* p, size_t n) noexcept {
    const size_t bytes = n * sizeof(T);
    if (bytes >= kHugeMin) unmap_huge(p, bytes);
    else ::operator delete(p);
  }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept { return true; }
};

// Packed weights: floats in HugePageAllocator memory.
using PackedFloats = std::vector<float, HugePageAllocator<float>>;

}  // namespace rlx::cpu
