// fused_conv2d (conv + bias + residual + activation in the conv's epilogue) on every CPU conv
// path: the same bits as the unfused conv2d -> add -> activation nodes, which run the same
// operations in the same order (the activations are the same vector functions).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "gemm_test_util.h"
#include "rlx/rlx.h"

namespace rlx::test {
namespace {

struct Case {
  const char* path;
  std::vector<int64_t> x, w, strides, pads;
  int64_t group = 1;
  bool const_w = false;  // constant weights: prepacked or Winograd paths
};

Value activation(Graph& g, Value y, Activation a) {
  switch (a) {
    case Activation::Relu: return g.relu(y);
    // A slope that is a float, as every ONNX one is: the fused epilogue holds it as a float,
    // the leaky_relu node as a double (a slope like 0.1 would round differently).
    case Activation::LeakyRelu: return g.leaky_relu(y, double(0.2f));
    case Activation::Sigmoid: return g.sigmoid(y);
    case Activation::Gelu: return g.gelu(y, false);
    default: return y;
  }
}

std::vector<float> run(const Case& k, Activation act, bool residual, bool fuse, int threads, std::string* fused) {
  const auto xv = random_floats(size_t(k.x[0] * k.x[1] * k.x[2] * k.x[3]), 1);
  const auto wv = random_floats(size_t(k.w[0] * k.w[1] * k.w[2] * k.w[3]), 2);
  const auto bv = random_floats(size_t(k.w[0]), 3);
  Graph g("fused_conv");
  Value x = g.input("x", Shape(k.x, DType::F32));
  Value w = k.const_w ? g.constant_f32(k.w, wv) : g.param("w", Shape(k.w, DType::F32));
  Value y = g.conv2d(x, w, g.constant_f32({k.w[0]}, bv), k.strides, k.pads, {1, 1}, k.group);
  std::vector<float> rv;
  if (residual) {
    rv = random_floats(size_t(g.type(y).numel()), 4);
    y = g.add(y, g.input("r", g.type(y)));
  }
  y = activation(g, y, act);
  g.set_outputs({y}, {"y"});
  CompileOptions o;
  o.threads = threads;
  o.fuse_matmul_epilogue = fuse;
  o.fuse_elementwise = false;  // the unfused reference keeps add and activation as nodes
  CompiledGraph net = Session(Device::Cpu, o).compile(std::move(g));
  if (fused) *fused = net.report().fusion;
  if (!k.const_w) net.set_param("w", wv);
  std::map<std::string, std::vector<float>> in{{"x", xv}};
  if (residual) in["r"] = rv;
  return net.run(in)[0];
}

TEST(ConvFused, EveryPathGivesTheUnfusedBits) {
  const std::vector<Case> cases = {
      {"im2col GEMM", {1, 8, 9, 9}, {16, 8, 3, 3}, {2, 2}, {1, 1, 1, 1}},
      {"input rows in place", {1, 4, 6, 50}, {8, 4, 3, 3}, {1, 1}, {1, 1, 1, 1}},
      // 48 columns (a full and a half-width tile, both with the epilogue in registers), 14
      // channels (a 12-row and a 2-row tile), stride 2 through the phase-split rows.
      {"input rows in place, stride 2", {1, 3, 10, 96}, {14, 3, 7, 7}, {2, 2}, {3, 3, 3, 3}},
      {"pointwise", {2, 16, 5, 5}, {24, 16, 1, 1}, {1, 1}, {0, 0, 0, 0}},
      {"transposed", {1, 32, 5, 5}, {64, 32, 3, 3}, {1, 1}, {1, 1, 1, 1}},
      {"transposed, packed weights", {1, 32, 5, 5}, {64, 32, 1, 1}, {1, 1}, {0, 0, 0, 0}, 1, true},
      {"dot (one output)", {1, 8, 3, 3}, {12, 8, 3, 3}, {1, 1}, {0, 0, 0, 0}},
      {"depthwise direct", {1, 8, 10, 10}, {8, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, 8},
      {"depthwise direct, stride 2", {1, 8, 11, 40}, {8, 1, 5, 5}, {2, 2}, {2, 2, 2, 2}, 8},
      {"Winograd", {1, 16, 12, 12}, {32, 16, 3, 3}, {1, 1}, {1, 1, 1, 1}, 1, true},
      {"Winograd 4x4", {1, 16, 26, 25}, {20, 16, 3, 3}, {1, 1}, {1, 1, 1, 1}, 1, true},
  };
  for (const Case& k : cases)
    for (Activation act :
         {Activation::None, Activation::Relu, Activation::LeakyRelu, Activation::Sigmoid, Activation::Gelu})
      for (bool residual : {false, true}) {
        if (act == Activation::None && !residual) continue;
        SCOPED_TRACE(std::string(k.path) + ", activation " + std::string(enum_name(act)) +
                     (residual ? ", residual" : ""));
        std::string report;
        const auto want = run(k, act, residual, false, 1, nullptr);
        const auto got = run(k, act, residual, true, 1, &report);
        EXPECT_NE(report.find("= fused_conv2d of"), std::string::npos) << report;
        EXPECT_EQ(got, want);
        EXPECT_EQ(run(k, act, residual, true, 2, nullptr), want) << "2 threads";
      }
}

// f16 convs (the GEMM path through its f32 workspace, and the depthwise direct kernel): the
// epilogue runs in f32 before the output's one rounding. A relu gives the unfused bits (relu
// commutes with rounding). A residual add (no activation) does not: the unfused nodes round
// the conv's output c and then the sum, the fused one rounds the sum once, so with u = 2^-11
// they differ by at most u (|c| + 2 |c + r|) <= u (3 |y| + |r|) to first order, plus the
// smallest f16 subnormal (2^-24) where the values underflow.
TEST(ConvFused, HalfConvs) {
  for (int64_t group : {1, 4}) {
    for (bool residual : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "group " << group << (residual ? ", residual" : ""));
      const std::vector<float> rv = random_floats(392, 4);
      auto run_half = [&](bool fuse, std::string* report) {
        Graph g("half");
        Value x = g.input("x", Shape({1, 4, 7, 7}, DType::F16));
        Value w = g.param("w", Shape({8, 4 / group, 3, 3}, DType::F16));
        Value y = g.conv2d(x, w, Value(), {1, 1}, {1, 1, 1, 1}, {1, 1}, group);
        if (residual) y = g.add(y, g.input("r", g.type(y)));
        g.set_outputs({residual ? y : g.relu(y)}, {"y"});
        CompileOptions o;
        o.fuse_matmul_epilogue = fuse;
        o.fuse_elementwise = false;
        CompiledGraph net = Session(Device::Cpu, o).compile(std::move(g));
        if (report) *report = net.report().fusion;
        net.set_param("w", random_floats(size_t(8 * (4 / group) * 9), 2));
        std::map<std::string, std::vector<float>> in{{"x", random_floats(196, 1)}};
        if (residual) in["r"] = rv;
        return net.run(in)[0];
      };
      std::string report;
      const auto got = run_half(true, &report), want = run_half(false, nullptr);
      EXPECT_NE(report.find("= fused_conv2d of"), std::string::npos) << report;
      if (!residual) {
        EXPECT_EQ(got, want);
      } else {
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i)
          EXPECT_LE(std::fabs(got[i] - want[i]),
                    std::ldexp(3 * std::fabs(want[i]) + std::fabs(double(f16_to_f32(f32_to_f16(rv[i])))), -11) +
                        std::ldexp(1.0, -24))
              << i;
      }
    }
  }
}

}  // namespace
}  // namespace rlx::test
