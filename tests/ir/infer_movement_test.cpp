// Shape inference: reshape, transpose, slice, concat, split, gather, expand, pad, tile.
#include <limits>
#include <random>

#include "ir_test_util.h"

namespace rlx {
namespace {

Shape t(std::vector<int64_t> d, DType dt = DType::F32) { return Shape(std::move(d), dt); }
Shape ts(std::vector<Dim> d, DType dt = DType::F32) { return Shape(std::move(d), dt); }
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

TEST(InferReshape, StaticAndMinusOne) {
  Graph g;
  auto x = g.input("x", t({2, 3, 4}));
  EXPECT_EQ(g.type(g.reshape(x, {6, 4})), t({6, 4}));
  EXPECT_EQ(g.type(g.reshape(x, {-1, 12})), t({2, 12}));
  EXPECT_EQ(g.type(g.reshape(x, {4, -1, 1})), t({4, 6, 1}));
  EXPECT_EQ(g.type(g.reshape(x, {24})), t({24}));
  auto s = g.input("s", t({1}));
  EXPECT_EQ(g.type(g.reshape(s, {})), Shape::scalar(DType::F32));
  EXPECT_RLX_ERROR(g.add1(OpKind::Reshape, {x}, ShapeAttrs{{5, 5}}, "r1"), Shape, "node 'r1' (reshape)", "24",
                   "[5,5]");
  EXPECT_RLX_ERROR(g.add1(OpKind::Reshape, {x}, ShapeAttrs{{-1, -1}}, "r2"), Shape, "node 'r2'", "more than one -1");
  EXPECT_RLX_ERROR(g.add1(OpKind::Reshape, {x}, ShapeAttrs{{-1, 5}}, "r3"), Shape, "node 'r3'", "cannot reshape");
  EXPECT_RLX_ERROR(g.add1(OpKind::Reshape, {x}, ShapeAttrs{{-2, 12}}, "r4"), Shape, "node 'r4'", "invalid dim -2");
  auto z = g.input("z", t({0, 3}));
  EXPECT_RLX_ERROR(g.add1(OpKind::Reshape, {z}, ShapeAttrs{{0, -1}}, "r5"), Shape, "node 'r5'", "multiply to 0");
  EXPECT_EQ(g.type(g.reshape(z, {3, 0})), t({3, 0}));
}

TEST(InferReshape, SymbolicNeedsBindingUnlessExact) {
  Graph g;
  Dim s = g.sym("seq");
  auto x = g.input("x", ts({s, 12, 64}));
  EXPECT_EQ(g.type(g.reshape(x, {-1, 768})), ts({s, 768}));
  EXPECT_EQ(g.type(g.reshape(x, {-1, 12, 8, 8})), ts({s, 12, 8, 8}));
  EXPECT_RLX_ERROR(g.add1(OpKind::Reshape, {x}, ShapeAttrs{{-1, 64}}, "rs"), Shape, "node 'rs'", "bind");
  EXPECT_RLX_ERROR(g.add1(OpKind::Reshape, {x}, ShapeAttrs{{4, 768}}, "rs2"), Shape, "node 'rs2'", "bind");
}

TEST(InferTranspose, PermAndDefault) {
  Graph g;
  Dim s = g.sym("s");
  auto x = g.input("x", ts({2, s, 4}));
  EXPECT_EQ(g.type(g.transpose(x, {1, 2, 0})), ts({s, 4, 2}));
  EXPECT_EQ(g.type(g.transpose(x, {})), ts({4, s, 2}));
  EXPECT_RLX_ERROR(g.add1(OpKind::Transpose, {x}, TransposeAttrs{{0, 0, 1}}, "tp"), Shape, "node 'tp' (transpose)",
                   "not a permutation");
  EXPECT_RLX_ERROR(g.add1(OpKind::Transpose, {x}, TransposeAttrs{{0, 1}}, "tp2"), Shape, "node 'tp2'", "rank 3");
}

// ONNX Slice reference: normalize, clamp, then count the visited indices one by one.
int64_t ref_slice_len(int64_t n, int64_t start, int64_t end, int64_t step) {
  if (n == 0) return 0;
  auto norm = [n](int64_t v) { return v < 0 ? v + n : v; };
  int64_t s = norm(start), e = norm(end);
  if (step > 0) {
    s = std::clamp<int64_t>(s, 0, n);
    e = std::clamp<int64_t>(e, 0, n);
  } else {
    s = std::clamp<int64_t>(s, 0, n - 1);
    e = std::clamp<int64_t>(e, -1, n - 1);
  }
  int64_t count = 0;
  for (__int128 i = s; step > 0 ? i < e : i > e; i += step) ++count;  // 128-bit: steps may be huge
  return count;
}

TEST(InferSlice, MatchesReferenceOverRandomArguments) {
  std::mt19937 rng(7);
  const int64_t special[] = {kMax, kMin, kMax - 1, kMin + 1};
  auto pick = [&](int64_t n) -> int64_t {
    std::uniform_int_distribution<int> u(0, 9);
    int r = u(rng);
    if (r == 0) return special[rng() % 4];
    return std::uniform_int_distribution<int64_t>(-n - 3, n + 3)(rng);
  };
  for (int iter = 0; iter < 3000; ++iter) {
    int64_t n = std::uniform_int_distribution<int64_t>(0, 9)(rng);
    int64_t start = pick(n), end = pick(n);
    int64_t step = std::uniform_int_distribution<int64_t>(-4, 4)(rng);
    if (step == 0) step = iter % 2 ? kMax : kMin + 1;
    Graph g;
    auto x = g.input("x", t({3, n}));
    auto y = g.slice(x, {start}, {end}, {1}, {step});
    ASSERT_EQ(g.type(y), t({3, ref_slice_len(n, start, end, step)}))
        << "n=" << n << " start=" << start << " end=" << end << " step=" << step;
  }
}

TEST(InferSlice, DefaultAxesAndSteps) {
  Graph g;
  auto x = g.input("x", t({10, 7, 6}));
  EXPECT_EQ(g.type(g.slice(x, {2, 1}, {8, 5})), t({6, 4, 6}));
  EXPECT_EQ(g.type(g.slice(x, {-1}, {kMin}, {2}, {-2})), t({10, 7, 3}));
  EXPECT_RLX_ERROR(g.add1(OpKind::Slice, {x}, SliceAttrs{{0, 0, 0, 0}, {1, 1, 1, 1}, {}, {}}, "sl"), Shape,
                   "node 'sl'", "4 axes");
}

TEST(InferSlice, SymbolicAxes) {
  Graph g;
  Dim s = g.sym("s");
  auto x = g.input("x", ts({10, s, 6}));
  EXPECT_EQ(g.type(g.slice(x, {2, 1}, {8, 5}, {0, 2})), ts({6, s, 4}));
  EXPECT_EQ(g.type(g.slice(x, {0}, {kMax}, {1})), ts({10, s, 6}));
  EXPECT_EQ(g.type(g.slice(x, {-1}, {kMin}, {1}, {-1})), ts({10, s, 6}));
  EXPECT_RLX_ERROR(g.add1(OpKind::Slice, {x}, SliceAttrs{{1}, {4}, {1}, {}}, "sl"), Shape, "node 'sl' (slice)",
                   "bind");
  EXPECT_RLX_ERROR(g.add1(OpKind::Slice, {x}, SliceAttrs{{1}, {4, 5}, {}, {}}, "sl2"), Shape, "node 'sl2'", "length");
  EXPECT_RLX_ERROR(g.add1(OpKind::Slice, {x}, SliceAttrs{{1}, {4}, {0}, {0}}, "sl3"), Shape, "node 'sl3'", "0");
  EXPECT_RLX_ERROR(g.add1(OpKind::Slice, {x}, SliceAttrs{{1, 1}, {4, 4}, {0, -3}, {}}, "sl4"), Shape, "node 'sl4'",
                   "repeats");
  EXPECT_RLX_ERROR(g.add1(OpKind::Slice, {x}, SliceAttrs{{1}, {4}, {3}, {}}, "sl5"), Shape, "node 'sl5'", "axes 3");
}

TEST(InferConcat, SumsTheAxis) {
  Graph g;
  Dim s = g.sym("s");
  auto a = g.input("a", ts({s, 2, 3}));
  auto b = g.input("b", ts({s, 5, 3}));
  EXPECT_EQ(g.type(g.concat({a, b}, 1)), ts({s, 7, 3}));
  EXPECT_EQ(g.type(g.concat({a, b, a}, -2)), ts({s, 9, 3}));
  EXPECT_EQ(g.type(g.concat({a}, 0)), ts({s, 2, 3}));
  auto e = g.input("e", ts({0, 2, 3}));
  EXPECT_EQ(g.type(g.concat({e, a}, 0)), ts({s, 2, 3}));
  EXPECT_RLX_ERROR(g.add1(OpKind::Concat, {a, a}, AxisAttrs{0}, "c1"), Shape, "node 'c1' (concat)", "bind");
  EXPECT_RLX_ERROR(g.add1(OpKind::Concat, {a, b}, AxisAttrs{2}, "c2"), Shape, "node 'c2'", "input 1", "axis 1");
  auto h = g.input("h", ts({s, 2, 3}, DType::F16));
  EXPECT_RLX_ERROR(g.add1(OpKind::Concat, {a, h}, AxisAttrs{1}, "c3"), Shape, "node 'c3'", "dtype");
  auto sc = g.input("sc", Shape::scalar(DType::F32));
  EXPECT_RLX_ERROR(g.add1(OpKind::Concat, {sc, sc}, AxisAttrs{0}, "c4"), Shape, "node 'c4'", "scalars");
}

TEST(InferSplit, SizesGiveOutputs) {
  Graph g;
  auto x = g.input("x", t({4, 10}));
  auto outs = g.split(x, 1, {3, 0, 7});
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(g.type(outs[0]), t({4, 3}));
  EXPECT_EQ(g.type(outs[1]), t({4, 0}));
  EXPECT_EQ(g.type(outs[2]), t({4, 7}));
  EXPECT_RLX_ERROR(g.add(OpKind::Split, {x}, SplitAttrs{1, {3, 3}}, "sp"), Shape, "node 'sp' (split)", "sum to 6",
                   "10");
  EXPECT_RLX_ERROR(g.add(OpKind::Split, {x}, SplitAttrs{1, {}}, "sp2"), Shape, "node 'sp2'", "empty");
  EXPECT_RLX_ERROR(g.add(OpKind::Split, {x}, SplitAttrs{0, {5, -1}}, "sp3"), Shape, "node 'sp3'", "negative");
  Dim s = g.sym("s");
  auto y = g.input("y", ts({s, 4}));
  EXPECT_EQ(g.type(g.split(y, 1, {2, 2})[1]), ts({s, 2}));
  EXPECT_RLX_ERROR(g.add(OpKind::Split, {y}, SplitAttrs{0, {1}}, "sp4"), Shape, "node 'sp4'", "bind");
}

TEST(InferGather, IndicesShapeReplacesTheAxis) {
  Graph g;
  Dim s = g.sym("s");
  auto x = g.input("emb", t({100, 16}, DType::F16));
  auto ids = g.input("ids", ts({2, s}, DType::I64));
  EXPECT_EQ(g.type(g.gather(x, ids, 0)), ts({2, s, 16}, DType::F16));
  auto i32 = g.input("i32", t({3}, DType::I32));
  EXPECT_EQ(g.type(g.gather(x, i32, 1)), t({100, 3}, DType::F16));
  auto sc = g.input("sc", Shape::scalar(DType::I64));
  EXPECT_EQ(g.type(g.gather(x, sc, -1)), t({100}, DType::F16));
  auto f = g.input("f", t({3}));
  EXPECT_RLX_ERROR(g.add1(OpKind::Gather, {x, f}, AxisAttrs{0}, "ga"), Shape, "node 'ga' (gather)", "indices",
                   "i32 or i64");
  EXPECT_RLX_ERROR(g.add1(OpKind::Gather, {x, ids}, AxisAttrs{2}, "ga2"), Shape, "node 'ga2'", "axis 2");
}

TEST(InferExpand, BroadcastsBothWays) {
  Graph g;
  Dim s = g.sym("s");
  auto x = g.input("x", t({3, 1}));
  EXPECT_EQ(g.type(g.expand(x, {2, 1, 6})), t({2, 3, 6}));
  EXPECT_EQ(g.type(g.expand(x, {1})), t({3, 1}));
  auto y = g.input("y", ts({s, 1}));
  EXPECT_EQ(g.type(g.expand(y, {1, 4})), ts({s, 4}));
  EXPECT_RLX_ERROR(g.add1(OpKind::Expand, {x}, ShapeAttrs{{4, 2}}, "ex"), Shape, "node 'ex' (expand)", "broadcast");
  EXPECT_RLX_ERROR(g.add1(OpKind::Expand, {y}, ShapeAttrs{{5, 4}}, "ex2"), Shape, "node 'ex2'", "bind");
  EXPECT_RLX_ERROR(g.add1(OpKind::Expand, {x}, ShapeAttrs{{-1, 2}}, "ex3"), Shape, "node 'ex3'", "negative");
}

TEST(InferPad, BeginsThenEnds) {
  Graph g;
  Dim s = g.sym("s");
  auto x = g.input("x", ts({s, 4, 5}));
  EXPECT_EQ(g.type(g.pad(x, {0, 1, 2, 0, 3, -1})), ts({s, 8, 6}));
  EXPECT_EQ(g.type(g.pad(x, {0, 3, 0, 0, 0, 4}, PadMode::Reflect)), ts({s, 7, 9}));
  EXPECT_RLX_ERROR(g.add1(OpKind::Pad, {x}, PadAttrs{{0, 4, 0, 0, 0, 0}, PadMode::Reflect, 0}, "p1"), Shape,
                   "node 'p1' (pad)", "reflect");
  EXPECT_RLX_ERROR(g.add1(OpKind::Pad, {x}, PadAttrs{{1, 0, 0, 0, 0, 0}, PadMode::Constant, 0}, "p2"), Shape,
                   "node 'p2'", "bind");
  EXPECT_RLX_ERROR(g.add1(OpKind::Pad, {x}, PadAttrs{{0, 0}, PadMode::Constant, 0}, "p3"), Shape, "node 'p3'",
                   "pads must have 6");
  EXPECT_RLX_ERROR(g.add1(OpKind::Pad, {x}, PadAttrs{{0, -3, 0, 0, -2, 0}, PadMode::Constant, 0}, "p4"), Shape,
                   "node 'p4'", "below zero");
  auto e = g.input("e", t({0}));
  EXPECT_RLX_ERROR(g.add1(OpKind::Pad, {e}, PadAttrs{{1, 0}, PadMode::Edge, 0}, "p5"), Shape, "node 'p5'", "edge");
}

TEST(InferTile, MultipliesDims) {
  Graph g;
  Dim s = g.sym("s");
  auto x = g.input("x", ts({s, 2, 3}, DType::I8));
  EXPECT_EQ(g.type(g.tile(x, {1, 3, 0})), ts({s, 6, 0}, DType::I8));
  EXPECT_RLX_ERROR(g.add1(OpKind::Tile, {x}, TileAttrs{{2, 1, 1}}, "t1"), Shape, "node 't1' (tile)", "bind");
  EXPECT_RLX_ERROR(g.add1(OpKind::Tile, {x}, TileAttrs{{1, 1}}, "t2"), Shape, "node 't2'", "repeats must have 3");
  EXPECT_RLX_ERROR(g.add1(OpKind::Tile, {x}, TileAttrs{{1, -1, 1}}, "t3"), Shape, "node 't3'", "negative");
}

}  // namespace
}  // namespace rlx
