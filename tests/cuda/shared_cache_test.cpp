// One KV cache for several CUDA passes (CompiledGraph::bind_handle_shared): a bound input's
// bytes leave the pass's arena, so two passes bound to one 32 MiB buffer give 2 x 32 MiB of
// device memory back (measured with cudaMemGetInfo), and the step reads the rows the
// prompt pass wrote. Skips without a usable CUDA device.
#include <gtest/gtest.h>

#ifdef RLX_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "cuda_test_util.h"

namespace rlx::cuda_test {
namespace {

constexpr int64_t H = 4, C = 16384, D = 128;  // [1, H, C, D] f32: 32 MiB
constexpr size_t kCache = size_t(H * C * D) * 4;

CompiledGraph pass(int64_t Tn) {
  Graph g("cache_pass");
  Value kc = g.input("kc", Shape({1, H, C, D}, DType::F32));
  Value rows = g.input("rows", Shape({1, H, Tn, D}, DType::F32));
  Value past = g.input("past", Shape({1}, DType::I64));
  // The cache's first position of each head after the write: what the step reads back.
  g.set_outputs({g.slice(g.cache_write(kc, rows, past), {0}, {1}, {2})}, {"first"});
  return Session(Device::Cuda).compile(g);
}

size_t free_bytes() {
  size_t f = 0, t = 0;
  EXPECT_EQ(cudaMemGetInfo(&f, &t), cudaSuccess);
  return f;
}

TEST(CudaSharedCache, BoundCachesLeaveTheArena) {
  REQUIRE_CUDA();
  CompiledGraph prompt = pass(4), step = pass(1);
  prompt.bind_handle("kc", TypedTensor{DType::F32, {1, H, C, D}, std::vector<uint8_t>(kCache, 0)});
  SharedBuffer buf = prompt.allocate_shared(kCache);
  const size_t before = free_bytes();
  ASSERT_TRUE(prompt.bind_handle_shared("kc", buf, 0));
  ASSERT_TRUE(step.bind_handle_shared("kc", buf, 0));

  // (An arena is laid out for its bindings when it is next used: here by the runs.)
  TypedTensor rows = random_f32({1, H, 4, D}, 5);
  TypedTensor past{DType::I64, {1}, std::vector<uint8_t>(8, 0)};
  prompt.run_typed({{"rows", rows}, {"past", past}});
  TypedTensor one = random_f32({1, H, 1, D}, 6);
  const int64_t at = 4;
  std::memcpy(past.bytes.data(), &at, 8);
  std::vector<TypedTensor> out = step.run_typed({{"rows", one}, {"past", past}});
  const size_t after = free_bytes();
  // Each arena shrinks by the cache (whole 256-byte units; the driver's allocation granules
  // may round the arenas by up to 2 MiB each).
  EXPECT_GE(after, before + 2 * kCache - (size_t(4) << 20)) << "before " << before << ", after " << after;
  ASSERT_EQ(out.size(), 1u);
  // Position 0 of every head: the prompt's first row, read by the step from the buffer.
  for (int64_t h = 0; h < H; ++h)
    ASSERT_EQ(std::memcmp(out[0].bytes.data() + h * D * 4, rows.bytes.data() + h * 4 * D * 4, size_t(D) * 4), 0)
        << "head " << h;
  std::vector<float> got(D);
  buf.read(size_t((0 * C + 4) * D) * 4, got.data(), size_t(D) * 4);  // head 0, position 4: the step's row
  EXPECT_EQ(std::memcmp(got.data(), one.bytes.data(), size_t(D) * 4), 0);
}

}  // namespace
}  // namespace rlx::cuda_test
#endif
