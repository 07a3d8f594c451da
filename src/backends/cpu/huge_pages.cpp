#include "backends/cpu/huge_pages.h"

#include <sys/mman.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "rlx/error.h"

namespace rlx::cpu {
namespace {
constexpr size_t kHugePage = size_t(2) << 20;

size_t page_bytes(size_t bytes) {
  static const size_t page = [] {
    const long v = sysconf(_SC_PAGESIZE);
    return v > 0 ? size_t(v) : size_t(4096);
  }();
  return (bytes + page - 1) / page * page;
}
}  // namespace

void* map_huge(size_t bytes) {
  const size_t len = page_bytes(bytes);
  // Over-map by one huge page, then cut the mapping down to a 2 MiB-aligned start.
  void* raw = mmap(nullptr, len + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED)
    fail(ErrorCategory::ResourceExhausted, "cannot map ", bytes, " bytes for packed weights: ", std::strerror(errno));
  const uintptr_t r = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t a = (r + kHugePage - 1) / kHugePage * kHugePage;
  if (a > r) munmap(raw, a - r);
  const uintptr_t end = r + len + kHugePage;
  if (end > a + len) munmap(reinterpret_cast<void*>(a + len), end - (a + len));
  advise_huge(reinterpret_cast<void*>(a), len);
  return reinterpret_cast<void*>(a);
}

void unmap_huge(void* p, size_t bytes) { munmap(p, page_bytes(bytes)); }

void advise_huge(void* p, size_t bytes) {
#ifdef MADV_HUGEPAGE
  madvise(p, bytes, MADV_HUGEPAGE);  // advice only: without transparent huge pages nothing changes
#else
  (void)p, (void)bytes;
#endif
}

void release_free_heap() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace rlx::cpu
