// ONNX models stamped with opsets 1-6: the attribute forms those opsets had (broadcast /
// axis on the arithmetic ops, is_test / spatial on BatchNormalization, Dropout's is_test,
// Cast's type name, Reshape's shape attribute, Pad's paddings, Tile's tiles + axis inputs,
// Split's split input, Upsample's two scale attributes, PRelu's per-channel slope,
// GlobalLpPool's float p), each against plain loops, and the errors for what those opsets
// forbid (shapes that differ with broadcast 0, a B that does not line up at its axis,
// training-mode dropout).
#ifdef RLX_HAVE_ONNX
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "onnx_test_util.h"
#include "rlx/onnx.h"

namespace rlx::onnx::test {
namespace {

TypedTensor f32_tensor(std::vector<int64_t> dims, const std::vector<float>& v) {
  return TypedTensor{DType::F32, std::move(dims), f32_bytes(v)};
}

OnnxRunner runner_of(const ::onnx::ModelProto& m, const char* name) {
  const std::string b = bytes_of(m);
  return OnnxRunner(load_onnx_bytes(b.data(), b.size(), name));
}

// Deterministic values in [-1, 1).
std::vector<float> values(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (auto& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = float(int32_t(seed >> 8) % 2048) / 1024.0f - 1.0f;
  }
  return v;
}

// Opset 6: B lined up with A at `axis`, at the trailing dims without it, and a one-element
// B. Exact (sums and products of small integers).
TEST(OnnxLegacy, ArithmeticBroadcastsAlongAxisOrTrailingDims) {
  auto m = make_model(6);
  add_input(m, "x", 1, {2, 3, 2});
  add_f32_initializer(m, "c", {3}, {10, 20, 30});
  add_f32_initializer(m, "w", {2}, {1, 2});
  add_f32_initializer(m, "k", {1}, {3});
  auto* a = add_node(m, "Add", {"x", "c"}, {"a"});
  set_int_attr(a, "broadcast", 1);
  set_int_attr(a, "axis", 1);
  auto* s = add_node(m, "Sub", {"a", "w"}, {"s"});
  set_int_attr(s, "broadcast", 1);
  auto* p = add_node(m, "Mul", {"s", "k"}, {"y"});
  set_int_attr(p, "broadcast", 1);
  set_ints_attr(p, "consumed_inputs", {0, 0});  // opset 1's attribute, ignored
  add_output(m, "y", 1);
  std::vector<float> x(12);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i);
  auto out = runner_of(m, "legacy_add.onnx").run({{"x", f32_tensor({2, 3, 2}, x)}});
  std::vector<float> want;
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int w = 0; w < 2; ++w) want.push_back((x[size_t((n * 3 + c) * 2 + w)] + 10.0f * float(c + 1) - float(w + 1)) * 3);
  EXPECT_EQ(as_f32(out[0].bytes), want);
}

TEST(OnnxLegacy, BroadcastZeroNeedsEqualShapesAndBMustLineUp) {
  {
    auto m = make_model(1);
    add_input(m, "x", 1, {2, 3});
    add_f32_initializer(m, "c", {3}, {1, 2, 3});
    add_node(m, "Add", {"x", "c"}, {"y"}, "plain_add");
    add_output(m, "y", 1);
    Error e = expect_error([&] { runner_of(m, "b0.onnx").run({{"x", f32_tensor({2, 3}, values(6, 1))}}); },
                           ErrorCategory::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("plain_add"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("broadcast is 0"), std::string::npos) << e.what();
  }
  auto m = make_model(6);
  add_input(m, "x", 1, {2, 3});
  add_f32_initializer(m, "c", {2}, {1, 2});
  auto* n = add_node(m, "Mul", {"x", "c"}, {"y"}, "mul_axis1");
  set_int_attr(n, "broadcast", 1);
  set_int_attr(n, "axis", 1);  // [2] against A's dim 1 (3): no match
  add_output(m, "y", 1);
  Error e = expect_error([&] { runner_of(m, "axis.onnx").run({{"x", f32_tensor({2, 3}, values(6, 2))}}); },
                         ErrorCategory::InvalidArgument);
  EXPECT_NE(std::string(e.what()).find("mul_axis1"), std::string::npos) << e.what();
}

// What an exporter of the opset-6 era wrote for a small CNN: Conv, BatchNormalization with
// is_test / spatial / consumed_inputs, Relu, MaxPool, Flatten, Gemm with broadcast, Dropout
// with is_test. Against plain loops in double: every output is at most ~40 f32 roundings of
// terms below 8 in magnitude (18-term conv sums, then 12-term Gemm sums), < 40 * 8 * 2^-24
// = 2e-5; the bound is 1e-4.
TEST(OnnxLegacy, Opset6ConvNetAsOldExportersWroteIt) {
  const int C = 2, K = 3, H = 4, O = 4;
  auto m = make_model(6);
  add_input(m, "x", 1, {1, C, H, H});
  const auto w = values(K * C * 9, 3), b = values(K, 4), g = values(K, 5), be = values(K, 6), mu = values(K, 7);
  std::vector<float> var = values(K, 8);
  for (auto& v : var) v = v * v + 0.5f;
  const auto fw = values(O * K * 4, 9), fb = values(O, 10);
  add_f32_initializer(m, "w", {K, C, 3, 3}, w);
  add_f32_initializer(m, "b", {K}, b);
  add_f32_initializer(m, "g", {K}, g);
  add_f32_initializer(m, "be", {K}, be);
  add_f32_initializer(m, "mu", {K}, mu);
  add_f32_initializer(m, "var", {K}, var);
  add_f32_initializer(m, "fw", {O, K * 4}, fw);
  add_f32_initializer(m, "fb", {O}, fb);
  auto* conv = add_node(m, "Conv", {"x", "w", "b"}, {"c"});
  set_ints_attr(conv, "kernel_shape", {3, 3});
  set_ints_attr(conv, "pads", {1, 1, 1, 1});
  auto* bn = add_node(m, "BatchNormalization", {"c", "g", "be", "mu", "var"}, {"n"});
  set_int_attr(bn, "is_test", 1);
  set_int_attr(bn, "spatial", 1);
  set_float_attr(bn, "epsilon", 1e-5f);
  add_node(m, "Relu", {"n"}, {"r"});
  auto* mp = add_node(m, "MaxPool", {"r"}, {"p"});
  set_ints_attr(mp, "kernel_shape", {2, 2});
  set_ints_attr(mp, "strides", {2, 2});
  add_node(m, "Flatten", {"p"}, {"f"});
  auto* gemm = add_node(m, "Gemm", {"f", "fw", "fb"}, {"l"});
  set_int_attr(gemm, "transB", 1);
  set_int_attr(gemm, "broadcast", 1);
  auto* dr = add_node(m, "Dropout", {"l"}, {"y"});
  set_int_attr(dr, "is_test", 1);
  set_float_attr(dr, "ratio", 0.5f);
  add_output(m, "y", 1);
  const auto x = values(C * H * H, 11);
  auto out = runner_of(m, "legacy_cnn.onnx").run({{"x", f32_tensor({1, C, H, H}, x)}});

  std::vector<double> pooled;  // [K, 2, 2]
  for (int k = 0; k < K; ++k)
    for (int py = 0; py < 2; ++py)
      for (int px = 0; px < 2; ++px) {
        double best = 0;  // after relu every value is >= 0
        for (int dy = 0; dy < 2; ++dy)
          for (int dx = 0; dx < 2; ++dx) {
            const int oy = 2 * py + dy, ox = 2 * px + dx;
            double s = b[size_t(k)];
            for (int c = 0; c < C; ++c)
              for (int ky = 0; ky < 3; ++ky)
                for (int kx = 0; kx < 3; ++kx) {
                  const int iy = oy + ky - 1, ix = ox + kx - 1;
                  if (iy < 0 || iy >= H || ix < 0 || ix >= H) continue;
                  s += double(w[size_t(((k * C + c) * 3 + ky) * 3 + kx)]) * double(x[size_t((c * H + iy) * H + ix)]);
                }
            s = (s - mu[size_t(k)]) / std::sqrt(double(var[size_t(k)]) + 1e-5) * g[size_t(k)] + be[size_t(k)];
            best = std::max(best, std::max(s, 0.0));
          }
        pooled.push_back(best);
      }
  const auto y = as_f32(out[0].bytes);
  ASSERT_EQ(y.size(), size_t(O));
  EXPECT_EQ(out[0].dims, (std::vector<int64_t>{1, O}));
  for (int o = 0; o < O; ++o) {
    double s = fb[size_t(o)];
    for (int i = 0; i < K * 4; ++i) s += double(fw[size_t(o * K * 4 + i)]) * pooled[size_t(i)];
    EXPECT_NEAR(y[size_t(o)], s, 1e-4) << "output " << o;
  }
}

// Opset 1's attribute forms; exact (copies and small integers).
TEST(OnnxLegacy, Opset1CastReshapeConcatPadTileSplit) {
  auto m = make_model(1);
  add_input(m, "xi", 6, {6});
  add_i64_initializer(m, "tiles", {1}, {2});
  add_i64_initializer(m, "axis", {1}, {0});
  add_i64_initializer(m, "split", {2}, {1, 2});
  auto* cast = add_node(m, "Cast", {"xi"}, {"xf"});
  set_str_attr(cast, "to", "float");
  auto* rs = add_node(m, "Reshape", {"xf"}, {"a"});
  set_ints_attr(rs, "shape", {2, 3});
  add_node(m, "Concat", {"a", "a"}, {"cat"});  // no axis: 1 before opset 4
  auto* pad = add_node(m, "Pad", {"a"}, {"pad"});
  set_ints_attr(pad, "paddings", {0, 1, 0, 1});
  set_float_attr(pad, "value", 7);
  add_node(m, "Tile", {"a", "tiles", "axis"}, {"tile"});
  auto* sp = add_node(m, "Split", {"a", "split"}, {"s0", "s1"});
  set_int_attr(sp, "axis", 1);
  for (const char* o : {"cat", "pad", "tile", "s0", "s1"}) add_output(m, o, 1);
  std::vector<uint8_t> xi(6 * 4);
  for (int i = 0; i < 6; ++i) {
    const int32_t v = i + 1;
    std::memcpy(xi.data() + 4 * i, &v, 4);
  }
  auto out = runner_of(m, "legacy1.onnx").run({{"xi", TypedTensor{DType::I32, {6}, xi}}});
  EXPECT_EQ(out[0].dims, (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(as_f32(out[0].bytes), (std::vector<float>{1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}));
  EXPECT_EQ(out[1].dims, (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(as_f32(out[1].bytes), (std::vector<float>{7, 1, 2, 3, 7, 7, 4, 5, 6, 7}));
  EXPECT_EQ(out[2].dims, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(as_f32(out[2].bytes), (std::vector<float>{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(as_f32(out[3].bytes), (std::vector<float>{1, 4}));
  EXPECT_EQ(as_f32(out[4].bytes), (std::vector<float>{2, 3, 5, 6}));
}

// Opset 6: Upsample by attributes (nearest), PRelu's [C] slope per channel, and
// BatchNormalization with spatial 0 (statistics per activation). Upsample and PRelu are
// exact; the normalization against double within 4 roundings of values below 4 (1e-6).
TEST(OnnxLegacy, Opset6UpsamplePReluAndSpatialZeroBatchNorm) {
  auto m = make_model(6);
  add_input(m, "x", 1, {1, 2, 2, 2});
  add_f32_initializer(m, "slope", {2}, {0.5f, 0.25f});
  const auto g = values(8, 21), be = values(8, 22), mu = values(8, 23);
  std::vector<float> var = values(8, 24);
  for (auto& v : var) v = v * v + 0.5f;
  add_f32_initializer(m, "g", {2, 2, 2}, g);
  add_f32_initializer(m, "be", {2, 2, 2}, be);
  add_f32_initializer(m, "mu", {2, 2, 2}, mu);
  add_f32_initializer(m, "var", {2, 2, 2}, var);
  auto* up = add_node(m, "Upsample", {"x"}, {"up"});
  set_float_attr(up, "height_scale", 2);
  set_float_attr(up, "width_scale", 2);
  add_node(m, "PRelu", {"x", "slope"}, {"pr"});
  auto* bn = add_node(m, "BatchNormalization", {"x", "g", "be", "mu", "var"}, {"bn"});
  set_int_attr(bn, "is_test", 1);
  set_int_attr(bn, "spatial", 0);
  for (const char* o : {"up", "pr", "bn"}) add_output(m, o, 1);
  const std::vector<float> x{1, -2, 3, -4, -1, 2, -3, 4};
  auto out = runner_of(m, "legacy6.onnx").run({{"x", f32_tensor({1, 2, 2, 2}, x)}});
  EXPECT_EQ(out[0].dims, (std::vector<int64_t>{1, 2, 4, 4}));
  const auto up_v = as_f32(out[0].bytes);
  for (int c = 0; c < 2; ++c)
    for (int y = 0; y < 4; ++y)
      for (int xx = 0; xx < 4; ++xx)
        EXPECT_EQ(up_v[size_t((c * 4 + y) * 4 + xx)], x[size_t((c * 2 + y / 2) * 2 + xx / 2)]);
  EXPECT_EQ(as_f32(out[1].bytes), (std::vector<float>{1, -1, 3, -2, -0.25f, 2, -0.75f, 4}));
  const auto bn_v = as_f32(out[2].bytes);
  for (size_t i = 0; i < 8; ++i) {
    const double want = (double(x[i]) - mu[i]) / std::sqrt(double(var[i]) + 1e-5) * g[i] + be[i];
    EXPECT_NEAR(bn_v[i], want, 1e-6) << i;
  }
}

// Opset 1: a unary op with its consumed_inputs attribute, GlobalLpPool and LpPool with a
// float p. sqrt(1 + 9 + 16) in f32: within one rounding of the double value; the p = 1
// windows are exact.
TEST(OnnxLegacy, Opset1ReluAndLpPoolsWithAFloatP) {
  auto m = make_model(1);
  add_input(m, "x", 1, {1, 1, 2, 2});
  auto* r = add_node(m, "Relu", {"x"}, {"r"});
  set_ints_attr(r, "consumed_inputs", {1});
  auto* lp = add_node(m, "GlobalLpPool", {"r"}, {"y"});
  set_float_attr(lp, "p", 2.0f);
  auto* wlp = add_node(m, "LpPool", {"x"}, {"w"});  // windows of 1x2: |1|+|-2|... at p 1
  set_float_attr(wlp, "p", 1.0f);
  set_ints_attr(wlp, "kernel_shape", {1, 2});
  add_output(m, "y", 1);
  add_output(m, "w", 1);
  auto out = runner_of(m, "lp1.onnx").run({{"x", f32_tensor({1, 1, 2, 2}, {1, -2, 3, 4})}});
  EXPECT_EQ(out[0].dims, (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_NEAR(as_f32(out[0].bytes).at(0), std::sqrt(26.0), 1e-6);
  EXPECT_EQ(out[1].dims, (std::vector<int64_t>{1, 1, 2, 1}));
  EXPECT_EQ(as_f32(out[1].bytes), (std::vector<float>{3, 7}));
}

// Opset 1's RNN (its output_sequence attribute, dropped at 7, only made Y optional): two
// steps of tanh(x W^T + h R^T + Wb + Rb) against a double loop (a few roundings of values
// below 2: 1e-6).
TEST(OnnxLegacy, Opset1RnnWithOutputSequence) {
  const int S = 2, B = 1, I = 3, H = 2;
  auto m = make_model(1);
  add_input(m, "x", 1, {S, B, I});
  const auto w = values(H * I, 41), r = values(H * H, 42), b = values(2 * H, 43);
  add_f32_initializer(m, "w", {1, H, I}, w);
  add_f32_initializer(m, "r", {1, H, H}, r);
  add_f32_initializer(m, "b", {1, 2 * H}, b);
  auto* n = add_node(m, "RNN", {"x", "w", "r", "b"}, {"y", "yh"});
  set_int_attr(n, "hidden_size", H);
  set_int_attr(n, "output_sequence", 1);
  add_output(m, "y", 1);
  add_output(m, "yh", 1);
  const auto x = values(S * B * I, 44);
  auto out = runner_of(m, "rnn1.onnx").run({{"x", f32_tensor({S, B, I}, x)}});
  EXPECT_EQ(out[0].dims, (std::vector<int64_t>{S, 1, B, H}));
  const auto y = as_f32(out[0].bytes), yh = as_f32(out[1].bytes);
  std::vector<double> h(H, 0.0);
  for (int t = 0; t < S; ++t) {
    std::vector<double> nh(H);
    for (int j = 0; j < H; ++j) {
      double a = double(b[size_t(j)]) + b[size_t(H + j)];
      for (int i = 0; i < I; ++i) a += double(w[size_t(j * I + i)]) * x[size_t(t * I + i)];
      for (int k = 0; k < H; ++k) a += double(r[size_t(j * H + k)]) * h[size_t(k)];
      nh[size_t(j)] = std::tanh(a);
      EXPECT_NEAR(y[size_t(t * H + j)], nh[size_t(j)], 1e-6) << "step " << t << " unit " << j;
    }
    h = nh;
  }
  for (int j = 0; j < H; ++j) EXPECT_NEAR(yh[size_t(j)], h[size_t(j)], 1e-6);
}

TEST(OnnxLegacy, CastToAnUnknownTypeNameIsInvalid) {
  auto m = make_model(1);
  add_input(m, "x", 1, {2});
  set_str_attr(add_node(m, "Cast", {"x"}, {"y"}, "cast_q"), "to", "FLOAT128");
  add_output(m, "y", 1);
  Error e = expect_error([&] { runner_of(m, "cast1.onnx").run({{"x", f32_tensor({2}, {1, 2})}}); },
                         ErrorCategory::InvalidArgument);
  EXPECT_NE(std::string(e.what()).find("FLOAT128"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("cast_q"), std::string::npos) << e.what();
}

TEST(OnnxLegacy, TrainingModeDropoutIsUnsupported) {
  auto m = make_model(6);
  add_input(m, "x", 1, {4});
  add_node(m, "Dropout", {"x"}, {"y"}, "drop");  // is_test defaults to 0: training
  add_output(m, "y", 1);
  Error e = expect_error([&] { runner_of(m, "drop.onnx").run({{"x", f32_tensor({4}, values(4, 30))}}); },
                         ErrorCategory::Unsupported);
  EXPECT_NE(std::string(e.what()).find("drop"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("is_test"), std::string::npos) << e.what();
}

}  // namespace
}  // namespace rlx::onnx::test
#endif
