// Shape inference: matmul, fused_matmul, reductions, arg reductions, topk, norms.
#include "ir_test_util.h"

namespace rlx {
namespace {

Shape t(std::vector<int64_t> d, DType dt = DType::F32) { return Shape(std::move(d), dt); }
Shape ts(std::vector<Dim> d, DType dt = DType::F32) { return Shape(std::move(d), dt); }

// numpy matmul result dims, written independently of the rule under test.
std::vector<int64_t> numpy_matmul(std::vector<int64_t> a, std::vector<int64_t> b) {
  bool a1 = a.size() == 1, b1 = b.size() == 1;
  if (a1) a.insert(a.begin(), 1);
  if (b1) b.push_back(1);
  std::vector<int64_t> ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  while (ba.size() < bb.size()) ba.insert(ba.begin(), 1);
  while (bb.size() < ba.size()) bb.insert(bb.begin(), 1);
  std::vector<int64_t> out;
  for (size_t i = 0; i < ba.size(); ++i) out.push_back(std::max(ba[i], bb[i]));
  if (!a1) out.push_back(a[a.size() - 2]);
  if (!b1) out.push_back(b.back());
  return out;
}

TEST(InferMatMul, NumpySemantics) {
  std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{2, 3}, {3, 4}}, {{3}, {3, 4}},       {{2, 3}, {3}},          {{3}, {3}},
      {{5, 2, 3}, {3, 4}}, {{2, 3}, {7, 3, 4}}, {{6, 1, 2, 3}, {5, 3, 4}}, {{1, 2, 3}, {4, 1, 3, 2}},
  };
  for (const auto& [a, b] : cases) {
    Graph g;
    auto x = g.input("a", t(a));
    auto y = g.input("b", t(b));
    EXPECT_EQ(g.type(g.matmul(x, y)), t(numpy_matmul(a, b)));
  }
}

TEST(InferMatMul, Errors) {
  Graph g;
  auto a = g.input("a", t({2, 3}));
  auto b = g.input("b", t({4, 5}));
  EXPECT_RLX_ERROR(g.add1(OpKind::MatMul, {a, b}, NoAttrs{}, "mm"), Shape, "node 'mm' (matmul)", "contraction",
                   "f32[2,3]", "f32[4,5]");
  auto h = g.input("h", t({3, 5}, DType::F16));
  EXPECT_RLX_ERROR(g.add1(OpKind::MatMul, {a, h}, NoAttrs{}, "mm2"), Shape, "node 'mm2'", "same dtype");
  auto s = g.input("s", Shape::scalar(DType::F32));
  EXPECT_RLX_ERROR(g.add1(OpKind::MatMul, {s, a}, NoAttrs{}, "mm3"), Shape, "node 'mm3'", "rank >= 1");
  auto x = g.input("x", t({2, 2, 3}));
  auto y = g.input("y", t({3, 3, 4}));
  EXPECT_RLX_ERROR(g.add1(OpKind::MatMul, {x, y}, NoAttrs{}, "mm4"), Shape, "node 'mm4'", "broadcast");
  auto bb = g.input("bb", t({3, 3}, DType::Bool));
  EXPECT_RLX_ERROR(g.add1(OpKind::MatMul, {bb, bb}, NoAttrs{}, "mm5"), Shape, "node 'mm5'", "numeric");
}

TEST(InferMatMul, SymbolsPropagate) {
  Graph g;
  Dim b = g.sym("b"), m = g.sym("m"), k = g.sym("k");
  auto x = g.input("x", ts({b, m, k}));
  auto w = g.input("w", ts({k, 16}));
  EXPECT_EQ(g.type(g.matmul(x, w)), ts({b, m, 16}));
  auto w2 = g.input("w2", t({8, 16}));
  EXPECT_RLX_ERROR(g.add1(OpKind::MatMul, {x, w2}, NoAttrs{}, "sym"), Shape, "node 'sym'", "bind");
}

TEST(InferFusedMatMul, BiasAndActivation) {
  Graph g;
  auto a = g.input("a", t({4, 2, 3}));
  auto b = g.input("b", t({3, 5}));
  auto bias = g.input("bias", t({5}));
  EXPECT_EQ(g.type(g.fused_matmul(a, b, bias, Activation::Gelu)), t({4, 2, 5}));
  EXPECT_EQ(g.type(g.fused_matmul(a, b, Value{}, Activation::None)), t({4, 2, 5}));
  auto bias2 = g.input("bias2", t({2, 1}));
  EXPECT_EQ(g.type(g.fused_matmul(a, b, bias2, Activation::LeakyRelu, 0.2)), t({4, 2, 5}));
  auto wide = g.input("wide", t({3, 2, 5}));
  EXPECT_RLX_ERROR(g.add1(OpKind::FusedMatMul, {a, b, wide}, FusedMatMulAttrs{}, "fm"), Shape,
                   "node 'fm' (fused_matmul)", "bias", "does not broadcast");
  EXPECT_RLX_ERROR(g.add1(OpKind::FusedMatMul, {a, b}, FusedMatMulAttrs{Activation::Relu, 0.5}, "fa"), Shape,
                   "node 'fa'", "alpha");
  auto hb = g.input("hb", t({5}, DType::F16));
  EXPECT_RLX_ERROR(g.add1(OpKind::FusedMatMul, {a, b, hb}, FusedMatMulAttrs{}, "fh"), Shape, "node 'fh'", "dtype");
  auto ia = g.input("ia", t({2, 3}, DType::I32));
  auto ib = g.input("ib", t({3, 2}, DType::I32));
  EXPECT_EQ(g.type(g.fused_matmul(ia, ib, Value{}, Activation::None)), t({2, 2}, DType::I32));
  EXPECT_RLX_ERROR(g.add1(OpKind::FusedMatMul, {ia, ib}, FusedMatMulAttrs{Activation::Silu, 0}, "fi"), Shape,
                   "node 'fi'", "float");
}

TEST(InferReduce, AxesAndKeepdims) {
  Graph g;
  Dim s = g.sym("s");
  auto x = g.input("x", ts({2, s, 4}));
  EXPECT_EQ(g.type(g.reduce_sum(x, {-1})), ts({2, s, 1}));
  EXPECT_EQ(g.type(g.reduce_mean(x, {0, 2}, false)), ts({s}));
  EXPECT_EQ(g.type(g.reduce_max(x, {}, true)), t({1, 1, 1}));
  EXPECT_EQ(g.type(g.reduce_prod(x, {}, false)), Shape::scalar(DType::F32));
  EXPECT_EQ(g.type(g.reduce_min(x, {1}, false)), t({2, 4}));
  EXPECT_RLX_ERROR(g.add1(OpKind::ReduceSum, {x}, ReduceAttrs{{3}, true}, "r1"), Shape, "node 'r1' (reduce_sum)",
                   "axes 3", "rank 3");
  EXPECT_RLX_ERROR(g.add1(OpKind::ReduceSum, {x}, ReduceAttrs{{1, -2}, true}, "r2"), Shape, "node 'r2'", "repeats");
  auto b = g.input("b", t({2}, DType::Bool));
  EXPECT_RLX_ERROR(g.add1(OpKind::ReduceSum, {b}, ReduceAttrs{}, "r3"), Shape, "node 'r3'", "numeric");
  auto e = g.input("e", t({0, 3}));
  EXPECT_EQ(g.type(g.reduce_sum(e, {0})), t({1, 3}));
  EXPECT_RLX_ERROR(g.add1(OpKind::ReduceMax, {e}, ReduceAttrs{{0}, true}, "r4"), Shape, "node 'r4'", "empty");
}

TEST(InferArgReduce, I64Result) {
  Graph g;
  auto x = g.input("x", t({2, 5, 3}, DType::F16));
  EXPECT_EQ(g.type(g.argmax(x, 1)), t({2, 1, 3}, DType::I64));
  EXPECT_EQ(g.type(g.argmin(x, -1, false)), t({2, 5}, DType::I64));
  EXPECT_RLX_ERROR(g.add1(OpKind::ArgMax, {x}, ArgReduceAttrs{3, true, false}, "am"), Shape, "node 'am' (argmax)",
                   "axis 3");
}

TEST(InferTopK, ValuesAndIndices) {
  Graph g;
  Dim s = g.sym("s");
  auto x = g.input("x", ts({s, 10}, DType::BF16));
  auto [v, i] = g.topk(x, 3);
  EXPECT_EQ(g.type(v), ts({s, 3}, DType::BF16));
  EXPECT_EQ(g.type(i), ts({s, 3}, DType::I64));
  auto [v2, i2] = g.topk(x, 2, 0);  // symbolic axis: k checked once bound
  EXPECT_EQ(g.type(v2), t({2, 10}, DType::BF16));
  EXPECT_RLX_ERROR(g.add(OpKind::TopK, {x}, TopKAttrs{11, -1, true, true}, "tk"), Shape, "node 'tk' (topk)",
                   "k=11", "exceeds");
  EXPECT_RLX_ERROR(g.add(OpKind::TopK, {x}, TopKAttrs{-1, -1, true, true}, "tk2"), Shape, "node 'tk2'", ">= 0");
}

TEST(InferNorm, ScaleAndBiasBroadcastToNormalizedDims) {
  Graph g;
  auto x = g.input("x", t({2, 3, 8}));
  auto sc = g.input("scale", t({8}));
  auto bi = g.input("bias", t({8}));
  EXPECT_EQ(g.type(g.layer_norm(x, sc, bi)), t({2, 3, 8}));
  EXPECT_EQ(g.type(g.rms_norm(x, sc)), t({2, 3, 8}));
  auto sc2 = g.input("scale2", t({3, 1}));
  EXPECT_EQ(g.type(g.layer_norm(x, sc2, Value{}, 1)), t({2, 3, 8}));
  // Absent scale with a present bias.
  EXPECT_EQ(g.type(g.add1(OpKind::LayerNorm, {x, Value{}, bi}, NormAttrs{})), t({2, 3, 8}));
  auto bad = g.input("bad", t({3}));
  EXPECT_RLX_ERROR(g.add1(OpKind::RmsNorm, {x, bad}, NormAttrs{}, "rn"), Shape, "node 'rn' (rms_norm)", "scale",
                   "[8]");
  auto h = g.input("h", t({8}, DType::F16));
  EXPECT_RLX_ERROR(g.add1(OpKind::LayerNorm, {x, sc, h}, NormAttrs{}, "ln"), Shape, "node 'ln'", "bias", "dtype");
  EXPECT_RLX_ERROR(g.add1(OpKind::LayerNorm, {x}, NormAttrs{-1, -1.0}, "ln2"), Shape, "node 'ln2'", "epsilon");
  EXPECT_RLX_ERROR(g.add1(OpKind::LayerNorm, {x}, NormAttrs{3, 1e-5}, "ln3"), Shape, "node 'ln3'", "axis 3");
  auto i = g.input("i", t({4}, DType::I32));
  EXPECT_RLX_ERROR(g.add1(OpKind::LayerNorm, {i}, NormAttrs{}, "ln4"), Shape, "node 'ln4'", "float");
}

}  // namespace
}  // namespace rlx
