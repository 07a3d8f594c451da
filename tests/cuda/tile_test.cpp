// Tile on CUDA: one strided copy whose iteration dims are each output axis split into its
// repeat and its element (tile_as_copy, lower_util.h). The plan is checked on the host (it
// must walk the output in order, reading input element o_k mod in_k on every axis, and be
// refused past the copy kernel's dims); the kernel against the CPU's bytes in 1-, 2-, 4-
// and 8-byte types (skips without a usable CUDA device).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "rlx/rlx.h"

#ifdef RLX_HAVE_CUDA
#include "backends/cuda/lower_util.h"
#endif

namespace rlx {
namespace {

#ifdef RLX_HAVE_CUDA
TEST(CudaTilePlan, WalksTheOutputInOrderFromTheRightInputElements) {
  struct Case {
    std::vector<int64_t> in, reps;
  };
  const std::vector<Case> cases = {{{2, 3}, {2, 1}},       {{1, 4, 1}, {3, 1, 2}},      {{2, 3, 4, 5}, {1, 2, 1, 3}},
                                   {{5}, {1}},             {{3, 1}, {1, 4}},            {{2, 2, 2, 2}, {2, 2, 2, 2}},
                                   {{7, 1, 3}, {1, 5, 1}}, {{1, 1, 1, 1}, {2, 3, 1, 1}}};
  for (const Case& c : cases) {
    std::vector<int64_t> out;
    for (size_t k = 0; k < c.in.size(); ++k) out.push_back(c.in[k] * c.reps[k]);
    SCOPED_TRACE("in rank " + std::to_string(c.in.size()) + ", first dim " + std::to_string(c.in[0]));
    const auto plan = cuda::tile_as_copy(c.in, out);
    ASSERT_TRUE(plan.has_value());
    int64_t total = 1;
    for (int64_t d : plan->dims) total *= d;
    int64_t numel = 1;
    for (int64_t d : out) numel *= d;
    ASSERT_EQ(total, numel);
    std::vector<int64_t> idx(plan->dims.size(), 0);
    for (int64_t flat = 0; flat < total; ++flat) {
      int64_t xo = 0, yo = 0;
      for (size_t k = 0; k < idx.size(); ++k) {
        xo += idx[k] * plan->sx[k];
        yo += idx[k] * plan->sy[k];
      }
      ASSERT_EQ(yo, flat) << "the copy must walk the output in row-major order";
      int64_t want = 0, rest = flat;
      std::vector<int64_t> o(out.size());
      for (size_t k = out.size(); k-- > 0;) {
        o[k] = rest % out[k];
        rest /= out[k];
      }
      for (size_t k = 0; k < out.size(); ++k) want = want * c.in[k] + o[k] % c.in[k];
      ASSERT_EQ(xo, want) << "output element " << flat;
      for (size_t k = idx.size(); k-- > 0;) {
        if (++idx[k] < plan->dims[k]) break;
        idx[k] = 0;
      }
    }
  }
  // Five axes that each repeat need ten copy dims: more than the kernel takes (legalize
  // then leaves the node to another backend).
  EXPECT_FALSE(cuda::tile_as_copy({2, 2, 2, 2, 2}, {4, 4, 4, 4, 4}).has_value());
  EXPECT_TRUE(cuda::tile_as_copy({2, 2, 2, 2, 2}, {4, 4, 4, 2, 2}).has_value());
}
#endif

// x f32[2, 3, 4], y f32[5]: tiled along every axis, some, none, in type t, brought back to
// f32 (exactly: the values are small integers over 8).
Graph tiles(DType t) {
  Graph g("tiles");
  Value x = g.cast(g.input("x", Shape({2, 3, 4}, DType::F32)), t);
  Value y = g.cast(g.input("y", Shape({5}, DType::F32)), t);
  std::vector<Value> outs = {g.tile(x, {2, 1, 3}), g.tile(x, {1, 1, 1}), g.tile(x, {3, 2, 2}), g.tile(y, {4}),
                             g.tile(g.reshape(y, {5, 1}), {1, 6})};
  std::vector<std::string> names;
  for (Value& v : outs) {
    v = g.cast(v, DType::F32);
    names.push_back("o" + std::to_string(names.size()));
  }
  g.set_outputs(outs, names);
  return g;
}

TEST(CudaTile, GivesTheCpuBytesInEveryWidth) {
  REQUIRE_CUDA();
  for (DType t : {DType::F32, DType::F16, DType::I8, DType::I64, DType::Bool}) {
    SCOPED_TRACE(dtype_name(t));
    std::map<std::string, std::vector<float>> feeds;
    std::vector<float> x(24), y(5);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 7 % 29) - 14) / (t == DType::F32 || t == DType::F16 ? 8.0f : 1.0f);
    for (size_t i = 0; i < y.size(); ++i) y[i] = float(int(i * 3 % 5) - 2);
    feeds["x"] = x;
    feeds["y"] = y;
    const auto want = Session(Device::Cpu).compile(tiles(t)).run(feeds);
    const auto got = Session(Device::Cuda).compile(tiles(t)).run(feeds);
    ASSERT_EQ(got.size(), want.size());
    for (size_t o = 0; o < want.size(); ++o) EXPECT_EQ(got[o], want[o]) << "output " << o;
  }
}

}  // namespace
}  // namespace rlx
