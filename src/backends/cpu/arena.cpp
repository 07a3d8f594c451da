#include "backends/cpu/arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "backends/cpu/huge_pages.h"
#include "rlx/error.h"

namespace rlx::cpu {

namespace {
int64_t page_size() {
  static const int64_t p = [] {
    long v = sysconf(_SC_PAGESIZE);
    return v > 0 ? int64_t(v) : int64_t(4096);
  }();
  return p;
}
}  // namespace

Arena::Arena(int64_t bytes, int64_t alignment) {
  if (bytes < 0) fail(ErrorCategory::Internal, "arena of negative size ", bytes);
  if (alignment <= 0 || (alignment & (alignment - 1)) != 0)
    fail(ErrorCategory::InvalidArgument, "arena alignment ", alignment, " is not a power of two");
  size_ = bytes;
  if (bytes == 0) return;
  // Page-aligned mappings satisfy every alignment up to the page size.
  if (bytes >= kMapThreshold && alignment <= page_size()) {
    alloc_bytes_ = size_t((bytes + page_size() - 1) / page_size() * page_size());
    void* p = mmap(nullptr, alloc_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      fail(ErrorCategory::ResourceExhausted, "cannot map an arena of ", bytes, " bytes: ", std::strerror(errno));
    data_ = static_cast<uint8_t*>(p);
    mapped_ = true;
    if (alloc_bytes_ >= kHugeMin) advise_huge(p, alloc_bytes_);  // see huge_pages.h
    return;
  }
  alloc_bytes_ = size_t((bytes + alignment - 1) / alignment * alignment);
  void* p = std::aligned_alloc(size_t(alignment), alloc_bytes_);
  if (!p) fail(ErrorCategory::ResourceExhausted, "cannot allocate an arena of ", bytes, " bytes");
  std::memset(p, 0, alloc_bytes_);
  data_ = static_cast<uint8_t*>(p);
}

Arena::~Arena() { free_memory(); }

Arena::Arena(Arena&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      alloc_bytes_(std::exchange(o.alloc_bytes_, 0)),
      mapped_(std::exchange(o.mapped_, false)) {}

Arena& Arena::operator=(Arena&& o) noexcept {
  if (this != &o) {
    free_memory();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    alloc_bytes_ = std::exchange(o.alloc_bytes_, 0);
    mapped_ = std::exchange(o.mapped_, false);
  }
  return *this;
}

void Arena::free_memory() {
  if (!data_) return;
  if (mapped_) munmap(data_, alloc_bytes_);
  else std::free(data_);
  data_ = nullptr;
}

int64_t Arena::release(int64_t begin, int64_t end) {
  if (!mapped_ || !data_) return 0;
  if (begin < 0) begin = 0;
  if (end > size_) end = size_;
  const int64_t p = page_size();
  int64_t first = (begin + p - 1) / p * p;
  // The tail page past size_ belongs to this mapping too, so an end at size_ covers it.
  int64_t last = end == size_ ? int64_t(alloc_bytes_) : end / p * p;
  if (last <= first) return 0;
  // MADV_DONTNEED on a private anonymous mapping zero-fills on the next touch.
  if (madvise(data_ + first, size_t(last - first), MADV_DONTNEED) != 0) return 0;
  return last - first;
}

}  // namespace rlx::cpu
