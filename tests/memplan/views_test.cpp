// view_of: an output is a view exactly when its elements are a contiguous, in-order run
// of the input's elements. Checked against a brute-force enumeration of the elements a
// plain slice / split / transpose selects.
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "opt/memory_plan.h"

namespace rlx::opt {
namespace {

// Flat input indices of the output elements, in output row-major order, for a slice
// with ONNX semantics (negative indices wrap, then clamp per step direction).
std::vector<int64_t> slice_elements(const std::vector<int64_t>& dims, const SliceAttrs& a) {
  const int rank = int(dims.size());
  std::vector<std::vector<int64_t>> picks(rank);
  for (int ax = 0; ax < rank; ++ax) {
    picks[ax].resize(size_t(dims[ax]));
    std::iota(picks[ax].begin(), picks[ax].end(), 0);
  }
  for (size_t i = 0; i < a.starts.size(); ++i) {
    int ax = int(a.axes.empty() ? int64_t(i) : a.axes[i]);
    if (ax < 0) ax += rank;
    const int64_t d = dims[ax], step = a.steps.empty() ? 1 : a.steps[i];
    int64_t s = a.starts[i] < 0 ? a.starts[i] + d : a.starts[i];
    int64_t e = a.ends[i] < 0 ? a.ends[i] + d : a.ends[i];
    picks[ax].clear();
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      for (int64_t k = s; k < e; k += step) picks[ax].push_back(k);
    } else if (d > 0) {
      s = std::clamp<int64_t>(s, 0, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
      for (int64_t k = s; k > e; k += step) picks[ax].push_back(k);
    }
  }
  std::vector<int64_t> out{0};
  for (int ax = 0; ax < rank; ++ax) {
    std::vector<int64_t> next;
    for (int64_t base : out)
      for (int64_t k : picks[ax]) next.push_back(base * dims[ax] + k);
    out.swap(next);
  }
  return out;
}

// The expected answer: a view at element offset first, or nothing.
std::optional<int64_t> contiguous_start(const std::vector<int64_t>& idx) {
  if (idx.empty()) return std::nullopt;
  for (size_t k = 1; k < idx.size(); ++k)
    if (idx[k] != idx[0] + int64_t(k)) return std::nullopt;
  return idx[0];
}

TEST(ViewOf, RandomSlicesMatchBruteForce) {
  std::mt19937 rng(1234);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  int views = 0, copies = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    const int rank = int(pick(1, 4));
    std::vector<int64_t> dims;
    for (int i = 0; i < rank; ++i) dims.push_back(pick(1, 5));
    SliceAttrs a;
    std::vector<int64_t> axes(rank);
    std::iota(axes.begin(), axes.end(), 0);
    std::shuffle(axes.begin(), axes.end(), rng);
    const int n = int(pick(1, rank));
    const bool explicit_axes = pick(0, 1) || n < rank;
    for (int i = 0; i < n; ++i) {
      const int64_t d = dims[explicit_axes ? axes[i] : i];
      if (explicit_axes) a.axes.push_back(pick(0, 1) ? axes[i] : axes[i] - rank);
      int64_t step = pick(0, 3) ? 1 : (pick(0, 1) ? pick(2, 3) : -pick(1, 2));
      a.steps.push_back(step);
      a.starts.push_back(pick(0, 5) ? pick(-d - 1, d + 1) : (step > 0 ? 0 : INT64_MAX));
      a.ends.push_back(pick(0, 5) ? pick(-d - 1, d + 1) : (step > 0 ? INT64_MAX : INT64_MIN));
    }
    if (!explicit_axes) a.axes.clear();
    if (pick(0, 1) && std::all_of(a.steps.begin(), a.steps.end(), [](int64_t s) { return s == 1; }))
      a.steps.clear();
    const DType dt = pick(0, 1) ? DType::F32 : DType::F16;
    Graph g("s");
    Value x = g.input("x", Shape(dims, dt));
    Value y = g.add1(OpKind::Slice, {x}, a);
    const std::vector<int64_t> idx = slice_elements(dims, a);
    ASSERT_EQ(int64_t(idx.size()), g.type(y).numel()) << "reference disagrees with shape inference";
    const auto expect = contiguous_start(idx);
    const auto got = view_of(g, y.node, 0);
    ASSERT_EQ(got.has_value(), expect.has_value()) << g.type(x).str() << " -> " << g.type(y).str();
    if (got) {
      EXPECT_EQ(got->input, 0);
      EXPECT_EQ(got->byte_offset, *expect * int64_t(dtype_size(dt)));
      ++views;
    } else {
      ++copies;
    }
  }
  EXPECT_GT(views, 300);  // the generator must exercise both outcomes
  EXPECT_GT(copies, 300);
}

TEST(ViewOf, SplitIsAViewOnlyWhenLeadingAxesAreOne) {
  Graph g("split");
  Value x = g.input("x", Shape({1, 6, 4}, DType::F32));
  std::vector<Value> a = g.split(x, 1, {1, 3, 2});
  const int64_t offsets[] = {0, 16, 64};
  for (int o = 0; o < 3; ++o) {
    auto v = view_of(g, a[0].node, o);
    ASSERT_TRUE(v) << o;
    EXPECT_EQ(v->byte_offset, offsets[o]);
  }
  std::vector<Value> b = g.split(x, 2, {2, 2});  // axis 1 has size 6: strided pieces
  EXPECT_FALSE(view_of(g, b[0].node, 0));
  EXPECT_FALSE(view_of(g, b[0].node, 1));
  std::vector<Value> c = g.split(x, -3, {1});  // the whole tensor
  ASSERT_TRUE(view_of(g, c[0].node, 0));
  std::vector<Value> z = g.split(x, 1, {0, 6});  // an empty piece is never a view
  EXPECT_FALSE(view_of(g, z[0].node, 0));
  ASSERT_TRUE(view_of(g, z[0].node, 1));
  EXPECT_EQ(view_of(g, z[0].node, 1)->byte_offset, 0);
}

TEST(ViewOf, TransposeMovingOnlyUnitAxes) {
  Graph g("t");
  Value x = g.input("x", Shape({1, 5, 1, 3}, DType::F32));
  EXPECT_TRUE(view_of(g, g.transpose(x, {1, 0, 3, 2}).node, 0));
  EXPECT_TRUE(view_of(g, g.transpose(x, {2, 1, 0, 3}).node, 0));
  EXPECT_FALSE(view_of(g, g.transpose(x, {0, 3, 2, 1}).node, 0));
  Value m = g.input("m", Shape({4, 4}, DType::F32));
  EXPECT_FALSE(view_of(g, g.transpose(m, {1, 0}).node, 0));
  EXPECT_TRUE(view_of(g, g.transpose(m, {0, 1}).node, 0));
}

TEST(ViewOf, ReshapeIdentityAndSameTypeCast) {
  Graph g("v");
  Value x = g.input("x", Shape({2, 3}, DType::F32));
  EXPECT_TRUE(view_of(g, g.reshape(x, {3, 2}).node, 0));
  EXPECT_TRUE(view_of(g, g.identity(x).node, 0));
  EXPECT_TRUE(view_of(g, g.cast(x, DType::F32).node, 0));
  EXPECT_FALSE(view_of(g, g.cast(x, DType::I32).node, 0));  // same size, different bits
  EXPECT_FALSE(view_of(g, g.cast(x, DType::F16).node, 0));
  EXPECT_FALSE(view_of(g, g.relu(x).node, 0));
  EXPECT_FALSE(view_of(g, g.expand(x, {4, 2, 3}).node, 0));
  Value e = g.input("e", Shape({0, 3}, DType::F32));
  EXPECT_FALSE(view_of(g, g.reshape(e, {3, 0}).node, 0));  // zero-size: no location at all
  EXPECT_FALSE(view_of(g, x.node, 0));                      // leaves are roots
}

}  // namespace
}  // namespace rlx::opt
