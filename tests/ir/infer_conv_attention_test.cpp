// Shape inference: conv2d, pooling, attention, rotary, leaves.
#include <random>

#include "ir/op_table.h"
#include "ir_test_util.h"

namespace rlx {
namespace {

Shape t(std::vector<int64_t> d, DType dt = DType::F32) { return Shape(std::move(d), dt); }
Shape ts(std::vector<Dim> d, DType dt = DType::F32) { return Shape(std::move(d), dt); }

// Counts window positions one by one (PyTorch/ONNX conventions): windows start every
// `s` padded positions. Floor mode: each window must fit. Ceil mode: keep adding
// windows until the previous one covered the last padded element, but never start
// one in the trailing padding.
int64_t ref_windows(int64_t n, int64_t k, int64_t s, int64_t pb, int64_t pe, int64_t d, bool ceil_mode) {
  int64_t span = n + pb + pe, ek = d * (k - 1) + 1, count = 0;
  for (int64_t p = 0;; p += s) {
    if (!ceil_mode && p + ek > span) break;
    if (ceil_mode && p > 0 && (p - s + ek >= span || p >= n + pb)) break;
    ++count;
  }
  return count;
}

TEST(InferConv2d, OutputSizes) {
  Graph g;
  auto x = g.input("x", t({2, 4, 10, 9}));
  auto w = g.param("w", t({8, 2, 3, 3}));
  auto b = g.param("b", t({8}));
  EXPECT_EQ(g.type(g.conv2d(x, w, b, {2, 2}, {1, 1, 1, 1}, {1, 1}, 2)), t({2, 8, 5, 5}));
  EXPECT_EQ(g.type(g.conv2d(x, w, Value{}, {1, 2}, {0, 1, 2, 0}, {2, 1}, 2)), t({2, 8, 8, 4}));
  auto w1 = g.param("w1", t({6, 4, 1, 1}));
  Dim n = g.sym("n"), h = g.sym("h");
  auto xs = g.input("xs", ts({n, 4, h, 7}));
  EXPECT_EQ(g.type(g.conv2d(xs, w1, Value{})), ts({n, 6, h, 7}));
}

TEST(InferConv2d, Errors) {
  Graph g;
  auto x = g.input("x", t({1, 4, 8, 8}));
  auto w = g.param("w", t({6, 3, 3, 3}));
  EXPECT_RLX_ERROR(g.add1(OpKind::Conv2d, {x, w}, ConvAttrs{}, "cv"), Shape, "node 'cv' (conv2d)", "4 channels",
                   "expects 3");
  auto w4 = g.param("w4", t({6, 2, 3, 3}));
  EXPECT_RLX_ERROR(g.add1(OpKind::Conv2d, {x, w4}, ConvAttrs{{1, 1}, {0, 0, 0, 0}, {1, 1}, 4}, "cv2"), Shape,
                   "node 'cv2'", "not divisible by group 4");
  auto w8 = g.param("w8", t({8, 2, 3, 3}));
  EXPECT_RLX_ERROR(g.add1(OpKind::Conv2d, {x, w8}, ConvAttrs{{1, 1}, {0, 0, 0, 0}, {1, 1}, 4}, "cv2b"), Shape,
                   "node 'cv2b'", "expects 8");
  EXPECT_RLX_ERROR(g.add1(OpKind::Conv2d, {x, w4}, ConvAttrs{{0, 1}, {0, 0, 0, 0}, {1, 1}, 2}, "cv3"), Shape,
                   "node 'cv3'", "strides");
  EXPECT_RLX_ERROR(g.add1(OpKind::Conv2d, {x, w4}, ConvAttrs{{1, 1}, {0, 0}, {1, 1}, 2}, "cv4"), Shape, "node 'cv4'",
                   "pads must have 4");
  auto big = g.param("big", t({6, 2, 9, 3}));
  EXPECT_RLX_ERROR(g.add1(OpKind::Conv2d, {x, big}, ConvAttrs{{1, 1}, {0, 0, 0, 0}, {1, 1}, 2}, "cv5"), Shape,
                   "node 'cv5'", "smaller than the window");
  auto bias = g.param("bias", t({5}));
  EXPECT_RLX_ERROR(g.add1(OpKind::Conv2d, {x, w4, bias}, ConvAttrs{{1, 1}, {0, 0, 0, 0}, {1, 1}, 2}, "cv6"), Shape,
                   "node 'cv6'", "bias", "[6]");
  auto x3 = g.input("x3", t({4, 8, 8}));
  EXPECT_RLX_ERROR(g.add1(OpKind::Conv2d, {x3, w4}, ConvAttrs{}, "cv7"), Shape, "node 'cv7'", "rank 4");
  Dim h = g.sym("h");
  auto xs = g.input("xs", ts({1, 4, h, 8}));
  EXPECT_RLX_ERROR(g.add1(OpKind::Conv2d, {xs, w4}, ConvAttrs{{1, 1}, {0, 0, 0, 0}, {1, 1}, 2}, "cv8"), Shape,
                   "node 'cv8'", "height", "bind");
}

TEST(InferPool2d, MatchesWindowCountReference) {
  std::mt19937 rng(3);
  for (int iter = 0; iter < 2000; ++iter) {
    auto u = [&](int lo, int hi) { return int64_t(std::uniform_int_distribution<int>(lo, hi)(rng)); };
    int64_t k = u(1, 4), s = u(1, 3), d = u(1, 2), n = u(1, 12);
    int64_t ek = d * (k - 1) + 1;
    int64_t pb = u(0, int(ek - 1)), pe = u(0, int(ek - 1));
    bool ceil_mode = iter % 2;
    if (n + pb + pe < ek) continue;
    Graph g;
    auto x = g.input("x", t({1, 2, n, 5}));
    PoolAttrs a;
    a.kernel = {k, 1};
    a.strides = {s, 1};
    a.pads = {pb, 0, pe, 0};
    a.dilations = {d, 1};
    a.ceil_mode = ceil_mode;
    auto y = g.add1(OpKind::MaxPool2d, {x}, a);
    ASSERT_EQ(g.type(y), t({1, 2, ref_windows(n, k, s, pb, pe, d, ceil_mode), 5}))
        << "n=" << n << " k=" << k << " s=" << s << " pads=" << pb << "," << pe << " d=" << d << " ceil=" << ceil_mode;
  }
}

TEST(InferPool2d, KnownCasesAndErrors) {
  Graph g;
  auto x = g.input("x", t({1, 3, 5, 4}));
  PoolAttrs a;
  a.kernel = {2, 2};
  a.strides = {2, 2};
  EXPECT_EQ(g.type(g.add1(OpKind::MaxPool2d, {x}, a)), t({1, 3, 2, 2}));
  a.ceil_mode = true;
  EXPECT_EQ(g.type(g.add1(OpKind::AvgPool2d, {x}, a)), t({1, 3, 3, 2}));
  // Ceil mode drops a last window that would start in the trailing padding.
  auto y = g.input("y", t({1, 1, 4, 4}));
  PoolAttrs c;
  c.kernel = {2, 2};
  c.strides = {3, 3};
  c.pads = {1, 1, 1, 1};
  c.ceil_mode = true;
  EXPECT_EQ(g.type(g.add1(OpKind::MaxPool2d, {y}, c)), t({1, 1, 2, 2}));
  PoolAttrs p;
  p.kernel = {2, 2};
  p.pads = {2, 0, 0, 0};
  EXPECT_RLX_ERROR(g.add1(OpKind::MaxPool2d, {x}, p, "mp"), Shape, "node 'mp' (max_pool2d)", "smaller than the window");
  PoolAttrs k0;
  k0.kernel = {0, 2};
  EXPECT_RLX_ERROR(g.add1(OpKind::AvgPool2d, {x}, k0, "ap"), Shape, "node 'ap' (avg_pool2d)", "kernel");
  PoolAttrs big;
  big.kernel = {6, 1};
  EXPECT_RLX_ERROR(g.add1(OpKind::AvgPool2d, {x}, big, "ap2"), Shape, "node 'ap2'", "height 5");
}

TEST(InferAttention, GroupedHeadsAndMask) {
  Graph g;
  Dim s = g.sym("seq");
  auto q = g.input("q", ts({2, 8, s, 64}, DType::F16));
  auto k = g.input("k", ts({2, 2, s, 64}, DType::F16));
  auto v = g.input("v", ts({2, 2, s, 32}, DType::F16));
  auto m = g.input("m", ts({1, 1, s, s}, DType::F16));
  EXPECT_EQ(g.type(g.attention(q, k, v, m, true)), ts({2, 8, s, 32}, DType::F16));
  EXPECT_EQ(g.type(g.attention(q, k, v)), ts({2, 8, s, 32}, DType::F16));
  auto k3 = g.input("k3", ts({2, 3, s, 64}, DType::F16));
  auto v3 = g.input("v3", ts({2, 3, s, 32}, DType::F16));
  EXPECT_RLX_ERROR(g.add1(OpKind::Attention, {q, k3, v3}, AttentionAttrs{}, "at"), Shape, "node 'at' (attention)",
                   "multiple");
  auto kd = g.input("kd", ts({2, 2, s, 32}, DType::F16));
  EXPECT_RLX_ERROR(g.add1(OpKind::Attention, {q, kd, v}, AttentionAttrs{}, "at2"), Shape, "node 'at2'", "head dim");
  auto mb = g.input("mb", ts({2, 8, s, 5}, DType::F16));
  EXPECT_RLX_ERROR(g.add1(OpKind::Attention, {q, k, v, mb}, AttentionAttrs{}, "at3"), Shape, "node 'at3'", "mask");
  auto mf = g.input("mf", ts({s, s}, DType::F32));
  EXPECT_RLX_ERROR(g.add1(OpKind::Attention, {q, k, v, mf}, AttentionAttrs{}, "at4"), Shape, "node 'at4'", "dtype");
  auto qi = g.input("qi", t({1, 1, 2, 4}, DType::I32));
  EXPECT_RLX_ERROR(g.add1(OpKind::Attention, {qi, qi, qi}, AttentionAttrs{}, "at5"), Shape, "node 'at5'", "float");
  auto q5 = g.input("q5", t({1, 1, 5, 4}));
  auto k4 = g.input("k4", t({1, 1, 4, 4}));
  EXPECT_EQ(g.type(g.attention(q5, k4, k4)), t({1, 1, 5, 4}));
  EXPECT_RLX_ERROR(g.add1(OpKind::Attention, {q5, k4, k4}, AttentionAttrs{0, true}, "at6"), Shape, "node 'at6'",
                   "causal");
}

TEST(InferAttention, HeadsInPlace) {
  // bshd: q [B,Sq,Hq,D], k / v [B,Sk,Hkv,D(v)] -> [B,Sq,Hq,Dv]; the mask still over [B,Hq,Sq,Sk].
  Graph g;
  auto q = g.input("q", t({2, 5, 8, 64}));
  auto k = g.input("k", t({2, 7, 2, 64}));
  auto v = g.input("v", t({2, 7, 2, 32}));
  auto m = g.input("m", t({2, 1, 5, 7}));
  AttentionAttrs a;
  a.bshd = true;
  EXPECT_EQ(g.type(g.add1(OpKind::Attention, {q, k, v, m}, a)), t({2, 5, 8, 32}));
  auto mb = g.input("mb", t({2, 1, 7, 5}));  // keys and queries swapped
  EXPECT_RLX_ERROR(g.add1(OpKind::Attention, {q, k, v, mb}, a, "at"), Shape, "node 'at'", "mask");
  auto v3 = g.input("v3", t({2, 7, 3, 32}));
  EXPECT_RLX_ERROR(g.add1(OpKind::Attention, {q, k, v3}, a, "at2"), Shape, "node 'at2'", "v heads");
}

TEST(InferConv2d, ChannelsLast) {
  // nhwc: x [N,H,W,C], w [M,kH,kW,C/g], bias [M] -> [N,Ho,Wo,M]; the residual of a fused conv
  // and the pools channels last too.
  Graph g;
  auto x = g.input("x", t({2, 10, 9, 4}));
  auto w = g.param("w", t({8, 3, 3, 2}));
  auto b = g.param("b", t({8}));
  ConvAttrs a{{2, 2}, {1, 1, 1, 1}, {1, 1}, 2, true};
  EXPECT_EQ(g.type(g.add1(OpKind::Conv2d, {x, w, b}, a)), t({2, 5, 5, 8}));
  FusedConvAttrs f;
  f.nhwc = true;
  f.activation = Activation::Relu;
  auto w1 = g.param("w1", t({6, 1, 1, 4}));
  auto r = g.input("r", t({2, 10, 9, 6}));
  EXPECT_EQ(g.type(g.fused_conv2d(x, w1, Value{}, r, f)), t({2, 10, 9, 6}));
  auto rn = g.input("rn", t({2, 6, 10, 9}));  // the NCHW residual
  EXPECT_RLX_ERROR(g.add1(OpKind::FusedConv2d, {x, w1, Value{}, rn}, f, "fc"), Shape, "node 'fc'", "residual");
  auto wn = g.param("wn", t({8, 2, 3, 3}));  // NCHW weights: 3 input channels a group, not 2
  EXPECT_RLX_ERROR(g.add1(OpKind::Conv2d, {x, wn}, a, "cv"), Shape, "node 'cv'", "4 channels");
  auto b6 = g.param("b6", t({6}));
  EXPECT_RLX_ERROR(g.add1(OpKind::Conv2d, {x, w, b6}, a, "cv2"), Shape, "node 'cv2'", "bias", "[8]");
  PoolAttrs p;
  p.kernel = {3, 3};
  p.strides = {2, 2};
  p.pads = {1, 1, 1, 1};
  p.nhwc = true;
  EXPECT_EQ(g.type(g.add1(OpKind::MaxPool2d, {x}, p)), t({2, 5, 5, 4}));
  auto xi = g.input("xi", t({1, 4, 4, 2}, DType::U8));
  auto wi = g.input("wi", t({2, 1, 1, 2}, DType::U8));
  auto z = g.input("z", t({1}, DType::U8));
  ConvAttrs ai;
  ai.nhwc = true;
  EXPECT_RLX_ERROR(g.add1(OpKind::ConvInteger, {xi, wi, z, z}, ai, "ci"), Shape, "node 'ci'", "NCHW only");
}

TEST(InferRotary, HalfWidthFromCos) {
  Graph g;
  Dim s = g.sym("s");
  auto x = g.input("x", ts({1, 4, s, 64}));
  auto c = g.input("cos", ts({s, 16}));
  auto sn = g.input("sin", ts({s, 16}));
  EXPECT_EQ(g.type(g.rotary(x, c, sn)), ts({1, 4, s, 64}));
  EXPECT_EQ(g.type(g.rotary(x, c, sn, true)), ts({1, 4, s, 64}));
  auto wide = g.input("wide", ts({s, 33}));
  EXPECT_RLX_ERROR(g.add1(OpKind::Rotary, {x, wide, wide}, RotaryAttrs{}, "ro"), Shape, "node 'ro' (rotary)",
                   "head dim 64");
  auto c5 = g.input("c5", t({5, 16}));
  EXPECT_RLX_ERROR(g.add1(OpKind::Rotary, {x, c5, c5}, RotaryAttrs{}, "ro2"), Shape, "node 'ro2'", "sequence");
  EXPECT_RLX_ERROR(g.add1(OpKind::Rotary, {x, c, wide}, RotaryAttrs{}, "ro3"), Shape, "node 'ro3'", "sin");
}

TEST(InferLeaf, ValidatesDeclaredType) {
  Node n;
  n.kind = OpKind::Constant;
  n.name = "c";
  n.attrs = ConstantAttrs{Blob(std::vector<uint8_t>(8))};
  n.outputs = {t({3})};
  EXPECT_RLX_ERROR(ir::infer_outputs(n, {}), Shape, "node 'c' (constant)", "8 bytes", "12");
  n.outputs = {t({2})};
  EXPECT_EQ(ir::infer_outputs(n, {}), std::vector<Shape>{t({2})});
  n.kind = OpKind::Input;
  n.attrs = LeafAttrs{"x", Blob(std::vector<uint8_t>(8))};
  EXPECT_RLX_ERROR(ir::infer_outputs(n, {}), Shape, "node 'c' (input)", "initial data");
  n.kind = OpKind::Param;
  n.attrs = LeafAttrs{"", {}};
  EXPECT_RLX_ERROR(ir::infer_outputs(n, {}), Shape, "public name");
  n.outputs = {};
  n.attrs = LeafAttrs{"p", {}};
  EXPECT_RLX_ERROR(ir::infer_outputs(n, {}), Shape, "exactly one output");
}

}  // namespace
}  // namespace rlx
