// huge_pages.h: blocks for packed weights in mappings of their own, 2 MiB aligned, ending at
// the block's last 4 KiB page (so a partial huge page adds no memory), zero-filled.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "backends/cpu/huge_pages.h"

namespace rlx::cpu {
namespace {

// The [start, end) of the mapping of /proc/self/maps that starts at p, or {0, 0}.
std::pair<uintptr_t, uintptr_t> mapping_at(const void* p) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long long a = 0, b = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx", &a, &b) == 2 && uintptr_t(a) == reinterpret_cast<uintptr_t>(p))
      return {uintptr_t(a), uintptr_t(b)};
  }
  return {0, 0};
}

TEST(HugePages, BlocksAreAlignedZeroedAndEndAtTheirLastPage) {
  for (size_t bytes : {kHugeMin, kHugeMin + 100, 3 * kHugeMin + 4096 * 3 + 1}) {
    auto* p = static_cast<uint8_t*>(map_huge(bytes));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHugeMin, 0u) << bytes;
    size_t nonzero = 0;
    for (size_t i = 0; i < bytes; i += 997) nonzero += p[i] != 0;
    EXPECT_EQ(nonzero, 0u) << bytes;
    p[0] = 1, p[bytes - 1] = 2;  // writable to the end
    EXPECT_EQ(p[0] + p[bytes - 1], 3);
    // Where the kernel has transparent huge pages, MADV_HUGEPAGE marks the mapping, so it is
    // not merged with a neighbour: it must end at the block's last page, not a 2 MiB boundary.
    if (std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled").good()) {
      const auto [begin, end] = mapping_at(p);
      EXPECT_EQ(begin, reinterpret_cast<uintptr_t>(p)) << bytes;
      EXPECT_EQ(end - begin, (bytes + 4095) / 4096 * 4096) << bytes;
    }
    unmap_huge(p, bytes);
  }
}

TEST(HugePages, PackedFloatsTakeSmallBlocksFromTheHeapAndLargeOnesMapped) {
  PackedFloats small(100), large(kHugeMin / sizeof(float) + 7);
  for (float v : small) ASSERT_EQ(v, 0.0f);
  for (size_t i = 0; i < large.size(); i += 1021) ASSERT_EQ(large[i], 0.0f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(large.data()) % kHugeMin, 0u);
  large.back() = 1.5f;
  small.back() = 2.5f;
  PackedFloats copy = large;  // copies and moves go through the same allocator
  EXPECT_EQ(copy.back(), 1.5f);
  PackedFloats moved = std::move(copy);
  EXPECT_EQ(moved.back(), 1.5f);
  release_free_heap();  // harmless at any time
  EXPECT_EQ(small.back(), 2.5f);
}

}  // namespace
}  // namespace rlx::cpu
