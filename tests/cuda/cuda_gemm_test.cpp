// The CUDA backend's cuBLASLt products against the CPU oracle: fused_matmul with every
// bias form and activation, the batch layouts (one weight for a batch, a batch of both,
// mixed broadcasting), and matmul / convolution under the TF32, F16 and BF16 policies.
// Skips without a usable CUDA device.
//
// Tolerances, derived per output element from the computation. Each side accumulates the
// K products in f32 in its own order: |error| <= K * 2^-24 * S, S = sum |a_i b_i| (the CPU
// computes S itself: the same graph run on |a|, |b|). A policy that rounds the operands to
// a p-bit significand (TF32 and F16: p = 11, u = 2^-11; BF16: p = 8, u = 2^-8) adds
// 2u * S for the two rounded factors, and a low output rounds once more: u * |y|. The test
// allows twice the sum of these terms (the bounds are first order) and 2^-20 absolute.
// A chain of L products (conv, then a pointwise conv, then a max pool) carries each
// layer's relative error through |w|-weighted sums, so with S the abs graph's output it adds
// L * (K * 2^-24 + 2u) * S (K the largest contraction; a layer's rounded output is the next
// one's rounded operand), and the last rounding is at most u * S (|y| <= S); max pooling
// moves no error above the largest of its window's (|max a - max b| <= max |a - b|) and
// the abs graph's pool takes the largest S.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>

#include "cuda_test_util.h"
#include "rlx/rlx.h"

namespace rlx {
namespace {

using cuda_test::randoms;
std::vector<float> absolute(std::vector<float> v) {
  for (float& x : v) x = std::fabs(x);
  return v;
}
int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s.static_dims()) n *= d;
  return n;
}

using Feeds = std::map<std::string, std::vector<float>>;

Feeds random_feeds(const Graph& g, uint32_t seed) {
  Feeds f;
  for (int32_t id : g.input_nodes()) {
    const Node& n = g.node(id);
    f[n.attr<LeafAttrs>().name] = randoms(size_t(numel(n.outputs[0])), seed++);
  }
  return f;
}

// Runs g on CUDA under `p` and on the CPU in f32; checks every output element against the
// bound above for a chain of `layers` products. `abs_graph`: g with its activation dropped
// (so S is the CPU's run of it on |inputs|). Returns the largest |cuda - cpu| seen and the
// largest share of the bound f32 arithmetic alone may use (2 * layers * K * 2^-24 * S).
struct Checked {
  double worst = 0, f32_bound = 0;
};
Checked check(const Graph& g, const Graph& abs_graph, Precision p, double u, bool low_out, const char* what,
              int layers = 1) {
  CompileOptions o;
  o.precision = p;
  CompiledGraph gpu = Session(Device::Cuda, o).compile(g), cpu = Session(Device::Cpu).compile(g),
                cpu_abs = Session(Device::Cpu).compile(abs_graph);
  const Feeds in = random_feeds(g, 11);
  Feeds in_abs;
  for (const auto& [k, v] : in) in_abs[k] = absolute(v);
  int64_t k_terms = 1;
  for (const Node& n : g.nodes())
    if (n.kind == OpKind::MatMul || n.kind == OpKind::FusedMatMul)
      k_terms = std::max(k_terms, g.type(n.inputs[0]).static_dims().back());
    else if (n.kind == OpKind::Conv2d || n.kind == OpKind::FusedConv2d) {
      const auto wd = g.type(n.inputs[1]).static_dims();
      k_terms = std::max(k_terms, wd[1] * wd[2] * wd[3]);
    }
  const auto got = gpu.run(in), want = cpu.run(in), s = cpu_abs.run(in_abs);
  Checked r;
  for (size_t o2 = 0; o2 < got.size(); ++o2) {
    int bad = 0;
    for (size_t i = 0; i < got[o2].size(); ++i) {
      const double d = std::fabs(double(got[o2][i]) - want[o2][i]);
      const double acc = 2 * layers * double(k_terms) * std::ldexp(1.0, -24) * s[o2][i];
      const double last = layers > 1 ? s[o2][i] : std::fabs(want[o2][i]);
      const double bound = acc + 2 * (layers * 2 * u * s[o2][i] + (low_out ? u * last : 0.0)) + std::ldexp(1.0, -20);
      r.worst = std::max(r.worst, d);
      r.f32_bound = std::max(r.f32_bound, acc);
      if (!(d <= bound) && bad++ < 5)
        ADD_FAILURE() << what << " output " << o2 << "[" << i << "]: cuda " << got[o2][i] << ", cpu " << want[o2][i]
                      << ", bound " << bound;
    }
  }
  return r;
}

struct Layout {
  std::vector<int64_t> a, b, bias;  // bias empty: none
};

Graph product(const Layout& l, Activation act, bool fused) {
  Graph g("product");
  Value a = g.input("a", Shape(l.a, DType::F32));
  Value b = g.input("b", Shape(l.b, DType::F32));
  Value bias = l.bias.empty() ? Value() : g.input("bias", Shape(l.bias, DType::F32));
  g.set_outputs({fused ? g.fused_matmul(a, b, bias, act, act == Activation::LeakyRelu ? 0.1 : 0.0) : g.matmul(a, b)},
                {"y"});
  return g;
}

// fused_matmul in f32: the CPU's activations are monotone and 1-Lipschitz-ish near the
// products (|act'| <= 1.13 for gelu), so the product's bound carries over; the abs graph
// drops the activation.
TEST(CudaGemm, FusedMatMulEpiloguesAndBatchLayoutsMatchCpu) {
  REQUIRE_CUDA();
  const std::vector<Layout> layouts = {
      {{2, 3, 20, 48}, {48, 36}, {36}},          // one weight for the batch, a row bias
      {{2, 3, 20, 48}, {48, 36}, {2, 3, 20, 36}},  // a full bias
      {{4, 20, 48}, {4, 48, 36}, {}},            // a batch of both, no bias
      {{2, 1, 20, 48}, {1, 3, 48, 36}, {1, 36}}, // mixed broadcasting
  };
  for (const Layout& l : layouts)
    for (Activation act : {Activation::None, Activation::Relu, Activation::GeluTanh, Activation::Gelu,
                           Activation::Silu, Activation::LeakyRelu}) {
      SCOPED_TRACE(std::string(enum_name(act)) + " a" + Shape(l.a, DType::F32).str());
      check(product(l, act, true), product(l, Activation::None, true), Precision::F32, 0, false, "fused_matmul");
    }
}

TEST(CudaGemm, PoliciesRoundAsTheirTypesSay) {
  REQUIRE_CUDA();
  const Layout l{{3, 40, 128}, {128, 72}, {72}};
  const Graph g = product(l, Activation::None, true);
  for (auto [p, u, low] : {std::tuple{Precision::TF32, std::ldexp(1.0, -11), false},
                           std::tuple{Precision::F16, std::ldexp(1.0, -11), true},
                           std::tuple{Precision::BF16, std::ldexp(1.0, -8), true}}) {
    SCOPED_TRACE(int(p));
    const Checked c = check(g, g, p, u, low, "policy");
    // The rounding must show: a difference past what f32 arithmetic alone can produce (K =
    // 128 terms; the policy's rounding of 128-term sums of products in [-1, 1] is ~u * sqrt(K)
    // * E|ab| per element, ~30x that share at TF32), else the policy was ignored.
    EXPECT_GT(c.worst, c.f32_bound);
  }
  // Two f32 sums of the same K = 128 products in different orders differ like a random walk
  // of K roundings: ~2^-24 * sqrt(K) * |partial sums| (|y| ~ 6 here), ~4e-6 per element;
  // 1e-4 is 25 times that, well past the largest of the 8640 elements under that model.
  EXPECT_LT(check(g, g, Precision::F32, 0, false, "f32").worst, 1e-4);
}

// Whether cuDNN loads here (the fused convolution is then claimed natively).
bool dnn_loads() {
  Graph g("probe");
  FusedConvAttrs a;
  a.activation = Activation::Relu;
  g.set_outputs({g.fused_conv2d(g.input("x", Shape({1, 4, 6, 6}, DType::F32)), g.input("w", Shape({4, 4, 3, 3}, DType::F32)),
                                g.input("b", Shape({4}, DType::F32)), Value(), a)},
                {"y"});
  return Session(Device::Cuda).compile(g).report().dispatch.find("fused_conv2d: native") != std::string::npos;
}

// The product layouts of conv_plan: aligned (batched over images), W's rows padded
// (K = 3*7*7 = 147) with the images folded (P = 7*7), and a pointwise one folded.
struct Conv {
  std::vector<int64_t> x, w;
  int64_t stride, pad;
};
const std::vector<Conv> kConvs = {{{3, 8, 12, 12}, {16, 8, 3, 3}, 1, 1},
                                  {{2, 3, 13, 13}, {8, 3, 7, 7}, 2, 3},
                                  {{2, 12, 7, 7}, {10, 12, 1, 1}, 1, 0}};

TEST(CudaGemm, ConvolutionUnderLowPolicies) {
  REQUIRE_CUDA();
  Graph g("conv");
  Value x = g.input("x", Shape({3, 8, 12, 12}, DType::F32));
  Value w = g.input("w", Shape({16, 8, 3, 3}, DType::F32));
  Value bias = g.input("bias", Shape({16}, DType::F32));
  Value y = g.conv2d(x, w, bias, {1, 1}, {1, 1, 1, 1});
  Value pw = g.conv2d(y, g.input("w1", Shape({8, 16, 1, 1}, DType::F32)), Value());  // pointwise: x read as col
  g.set_outputs({y, g.max_pool2d(pw, {2, 2}, {2, 2})}, {"y", "pooled"});
  // The first conv alone (one layer), and the whole chain (two products, then the pool).
  Graph first("conv1");
  {
    Value x1 = first.input("x", Shape({3, 8, 12, 12}, DType::F32));
    Value w1 = first.input("w", Shape({16, 8, 3, 3}, DType::F32));
    Value b1 = first.input("bias", Shape({16}, DType::F32));
    first.set_outputs({first.conv2d(x1, w1, b1, {1, 1}, {1, 1, 1, 1})}, {"y"});
  }
  // Both convolution paths: cuDNN (where it loads) and im2col + cuBLASLt (RLX_CUDA_CUDNN=0).
  for (const char* dnn : {"1", "0"})
  for (auto [p, u, low] : {std::tuple{Precision::F32, 0.0, false}, std::tuple{Precision::TF32, std::ldexp(1.0, -11), false},
                           std::tuple{Precision::F16, std::ldexp(1.0, -11), true},
                           std::tuple{Precision::BF16, std::ldexp(1.0, -8), true}}) {
    setenv("RLX_CUDA_CUDNN", dnn, 1);
    SCOPED_TRACE(std::string("RLX_CUDA_CUDNN=") + dnn + " policy " + std::to_string(int(p)));
    for (const Conv& cv : kConvs) {
      Graph one("conv_layout");
      Value x1 = one.input("x", Shape(cv.x, DType::F32));
      Value w1 = one.input("w", Shape(cv.w, DType::F32));
      Value b1 = one.input("bias", Shape({cv.w[0]}, DType::F32));
      one.set_outputs({one.conv2d(x1, w1, b1, {cv.stride, cv.stride}, {cv.pad, cv.pad, cv.pad, cv.pad})}, {"y"});
      check(one, one, p, u, low, "conv layout");
    }
    check(first, first, p, u, low, "conv");
    check(g, g, p, u, low, "conv, pointwise conv, pool", 2);
  }
  unsetenv("RLX_CUDA_CUDNN");
}

// fused_conv2d (relu over conv + bias [+ a residual]) runs as one cuDNN call where cuDNN
// loads (fused_conv_claimed): against the CPU within the convolution bound above (relu moves
// no error up; the abs graph drops it, so its S counts |bias| and |residual| too), under each
// policy, with and without the residual, at the shapes of conv_plan's layouts. The same chain
// written as conv2d -> add -> relu fuses exactly when the backend claims the node.
TEST(CudaGemm, FusedConvolutionEpilogue) {
  REQUIRE_CUDA();
  auto graph = [](const Conv& cv, bool residual, Activation act) {
    Graph g("fused_conv");
    FusedConvAttrs a;
    a.strides = {cv.stride, cv.stride};
    a.pads = {cv.pad, cv.pad, cv.pad, cv.pad};
    a.dilations = {1, 1};
    a.activation = act;
    Value x = g.input("x", Shape(cv.x, DType::F32));
    Value w = g.input("w", Shape(cv.w, DType::F32));
    Value b = g.input("bias", Shape({cv.w[0]}, DType::F32));
    const int64_t oh = (cv.x[2] + 2 * cv.pad - cv.w[2]) / cv.stride + 1, ow = (cv.x[3] + 2 * cv.pad - cv.w[3]) / cv.stride + 1;
    Value r = residual ? g.input("r", Shape({cv.x[0], cv.w[0], oh, ow}, DType::F32)) : Value();
    g.set_outputs({g.fused_conv2d(x, w, b, r, a)}, {"y"});
    return g;
  };
  for (auto [p, u, low] : {std::tuple{Precision::F32, 0.0, false}, std::tuple{Precision::TF32, std::ldexp(1.0, -11), false},
                           std::tuple{Precision::F16, std::ldexp(1.0, -11), true},
                           std::tuple{Precision::BF16, std::ldexp(1.0, -8), true}}) {
    SCOPED_TRACE("policy " + std::to_string(int(p)));
    for (const Conv& cv : kConvs)
      for (bool residual : {false, true})
        check(graph(cv, residual, Activation::Relu), graph(cv, residual, Activation::None), p, u, low,
              residual ? "fused conv + residual + relu" : "fused conv + relu");
  }
  // Claimed (dispatched natively) where cuDNN loads; the exported chain then becomes the node.
  const Conv& cv = kConvs[0];
  const bool native = Session(Device::Cuda).compile(graph(cv, true, Activation::Relu)).report().dispatch.find(
                          "fused_conv2d: native") != std::string::npos;
  Graph chain("conv_add_relu");
  Value x = chain.input("x", Shape(cv.x, DType::F32));
  Value y = chain.conv2d(x, chain.input("w", Shape(cv.w, DType::F32)), chain.input("bias", Shape({16}, DType::F32)),
                         {1, 1}, {1, 1, 1, 1});
  chain.set_outputs({chain.relu(chain.add(y, chain.input("r", Shape({3, 16, 12, 12}, DType::F32))))}, {"y"});
  const CompiledGraph net = Session(Device::Cuda).compile(chain);
  EXPECT_EQ(net.report().fusion.find("= fused_conv2d of") != std::string::npos, native) << net.report().fusion;
  std::printf("fused_conv2d through cuDNN: %s\n", native ? "yes" : "no (cuDNN does not load here)");
}

// Pools channels last (the node's nhwc form, as the channels-last pass writes it) against the
// CPU, which runs them as its NCHW kernels between transposes, under the policies that claim
// them (TF32: f32 values; F16): C = 16 takes the vector kernel
// (16-byte loads of 4 f32 / 8 half channels), C = 6 the scalar one; max pooling is exact (the
// same bits; padding taps never count), the average is a sum of at most 9 taps in f32 in
// either order, within 2 * 9 * 2^-24 * max |x| (inputs in [-1, 1]) plus, in f16, one rounding
// of the output (2^-11 |y|) on each side.
TEST(CudaGemm, ChannelsLastPools) {
  REQUIRE_CUDA();
  for (int64_t c : {16, 6})
    for (Precision p : {Precision::TF32, Precision::F16})  // (exact f32 keeps its pools NCHW)
      for (OpKind k : {OpKind::MaxPool2d, OpKind::AvgPool2d}) {
        SCOPED_TRACE(std::string(op_name(k)) + " C=" + std::to_string(c) + " policy " + std::to_string(int(p)));
        Graph g("pool");
        PoolAttrs a;
        a.kernel = {3, 3};
        a.strides = {2, 2};
        a.pads = {1, 1, 1, 1};
        a.nhwc = true;
        g.set_outputs({g.add1(k, {g.input("x", Shape({2, 9, 11, c}, DType::F32))}, a)}, {"y"});
        CompileOptions o;
        o.precision = p;
        CompiledGraph gpu = Session(Device::Cuda, o).compile(g), cpu = Session(Device::Cpu, o).compile(g);
        EXPECT_NE(gpu.report().dispatch.find(std::string(op_name(k)) + ": native 1"), std::string::npos)
            << gpu.report().dispatch;
        const Feeds in = random_feeds(g, 5);
        const auto got = gpu.run(in)[0], want = cpu.run(in)[0];
        ASSERT_EQ(got.size(), want.size());
        if (k == OpKind::MaxPool2d) {
          EXPECT_EQ(got, want);
          continue;
        }
        const double u = p == Precision::F16 ? std::ldexp(1.0, -11) : 0.0;
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_NEAR(got[i], want[i], 2 * 9 * std::ldexp(1.0, -24) + 2 * u * std::fabs(want[i])) << i;
      }
}

// The channels-last pass on CUDA: a ResNet-shaped chain with constant weights (conv + bias +
// relu, max pool, conv + bias + the pooled residual + relu, global average pool) runs its two
// fused convolutions and the pool channels last (NHWC cuDNN descriptors, the pool kernel with
// the channels innermost, the average over axes 1 and 2), against the CPU's NCHW run within
// the bound above for two products and the pool (the mean of a window's errors is within the
// bound of its mean S: the bound is linear in S, and the 36-term f32 sum's own rounding is
// inside the K = 144 term), under every policy (exact f32 stays NCHW: the backend claims the
// channels-last forms only where its convolutions run on tensor cores). RLX_CUDA_NHWC=0 keeps
// the chain NCHW.
TEST(CudaGemm, ChannelsLastChain) {
  REQUIRE_CUDA();
  auto graph = [](bool abs) {
    Graph g("resnet_chain");
    auto weights = [&](std::vector<int64_t> d, uint32_t seed) {
      int64_t n = 1;
      for (int64_t x : d) n *= x;
      std::vector<float> v = randoms(size_t(n), seed);
      return g.constant_f32(d, abs ? absolute(v) : v);
    };
    Value x = g.input("x", Shape({2, 8, 12, 12}, DType::F32));
    Value y = g.conv2d(x, weights({16, 8, 3, 3}, 21), weights({16}, 22), {1, 1}, {1, 1, 1, 1});
    if (!abs) y = g.relu(y);
    Value p = g.max_pool2d(y, {2, 2}, {2, 2});
    Value z = g.add(g.conv2d(p, weights({16, 16, 3, 3}, 23), weights({16}, 24), {1, 1}, {1, 1, 1, 1}), p);
    if (!abs) z = g.relu(z);
    g.set_outputs({g.reduce_mean(z, {2, 3}, true)}, {"y"});
    return g;
  };
  for (const char* nhwc : {"1", "0"}) {
    setenv("RLX_CUDA_NHWC", nhwc, 1);
    for (auto [p, u, low] : {std::tuple{Precision::F32, 0.0, false}, std::tuple{Precision::TF32, std::ldexp(1.0, -11), false},
                             std::tuple{Precision::F16, std::ldexp(1.0, -11), true},
                             std::tuple{Precision::BF16, std::ldexp(1.0, -8), true}}) {
      SCOPED_TRACE(std::string("RLX_CUDA_NHWC=") + nhwc + " policy " + std::to_string(int(p)));
      check(graph(false), graph(true), p, u, low, "channels-last chain", 3);
      CompileOptions o;
      o.precision = p;
      const std::string fusion = Session(Device::Cuda, o).compile(graph(false)).report().fusion;
      const bool want = std::string(nhwc) == "1" && dnn_loads() && p != Precision::F32;  // exact f32 stays NCHW
      int nhwc_nodes = 0;
      for (size_t at = fusion.find("channels last (nhwc)"); at != std::string::npos;
           at = fusion.find("channels last (nhwc)", at + 1))
        ++nhwc_nodes;
      EXPECT_EQ(nhwc_nodes, want ? 3 : 0) << fusion;  // the two fused convs and the pool
    }
  }
  unsetenv("RLX_CUDA_NHWC");
}

}  // namespace
}  // namespace rlx
