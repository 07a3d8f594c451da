// Winograd convolution (3x3, stride 1, constant weights: conv_winograd.h) through a compiled
// graph, against a direct double-precision convolution, for F(2x2, 3x3) and F(4x4, 3x3)
// (RLX_CPU_WINOGRAD=4): partial tiles, asymmetric and no padding, several images, channel
// counts across GEMM K blocks and output-channel chunks, tile counts across blocks; 1 and 2
// threads bit-identical; every ISA level here (the scalar level takes the GEMM path).
//
// Tolerance, derived: with u = 2^-24, the transformed weights U are rounded once from exact
// values (u |U|); V = B^T d B is two passes of at most a terms (a = m + 2), the product sums
// Cin terms, and Y = A^T M A is two passes of at most a terms plus the bias: to first order
//   |error| <= (Cin + 4a + 4) * u * S,
//   S = |bias| + sum over ci of |A^T| (|G||g||G^T| .* |B^T||d||B|) |A|
// evaluated per output in double (the absolute value of every matrix and operand).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernels/conv_winograd.h"
#include "gemm_test_util.h"
#include "rlx/rlx.h"

namespace rlx::test {
namespace {

// The transforms' matrices (Lavin & Gray), for the bound only: a wrong matrix in the kernel
// shows as a wrong value against the direct convolution.
struct Mats {
  int m, a;
  std::vector<std::vector<double>> bt, g, at;
};
Mats mats(int m) {
  if (m == 2)
    return {2, 4,
            {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}},
            {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}},
            {{1, 1, 1, 0}, {0, 1, -1, -1}}};
  return {4, 6,
          {{4, 0, -5, 0, 1, 0}, {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0}, {0, -2, -1, 2, 1, 0},
           {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}},
          {{1.0 / 4, 0, 0}, {-1.0 / 6, -1.0 / 6, -1.0 / 6}, {-1.0 / 6, 1.0 / 6, -1.0 / 6},
           {1.0 / 24, 1.0 / 12, 1.0 / 6}, {1.0 / 24, -1.0 / 12, 1.0 / 6}, {0, 0, 1}},
          {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}}};
}

struct Case {
  int64_t n, c, h, w, cout;
  std::vector<int64_t> pads{1, 1, 1, 1};
  bool bias = true;
};

struct Ref {
  std::vector<double> y, bound;
  int64_t oh, ow;
};

Ref reference(const Case& k, int m, const std::vector<float>& x, const std::vector<float>& w,
              const std::vector<float>& b) {
  const Mats t = mats(m);
  const int a = t.a;
  Ref r;
  r.oh = k.h + k.pads[0] + k.pads[2] - 2;
  r.ow = k.w + k.pads[1] + k.pads[3] - 2;
  r.y.assign(size_t(k.n * k.cout * r.oh * r.ow), 0.0);
  r.bound.assign(r.y.size(), 0.0);
  auto in = [&](int64_t n, int64_t ci, int64_t y, int64_t xx) {
    return y < 0 || y >= k.h || xx < 0 || xx >= k.w ? 0.0 : double(x[size_t(((n * k.c + ci) * k.h + y) * k.w + xx)]);
  };
  // Direct convolution.
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t co = 0; co < k.cout; ++co)
      for (int64_t oy = 0; oy < r.oh; ++oy)
        for (int64_t ox = 0; ox < r.ow; ++ox) {
          double s = k.bias ? double(b[size_t(co)]) : 0.0;
          for (int64_t ci = 0; ci < k.c; ++ci)
            for (int ky = 0; ky < 3; ++ky)
              for (int kx = 0; kx < 3; ++kx)
                s += double(w[size_t(((co * k.c + ci) * 3 + ky) * 3 + kx)]) *
                     in(n, ci, oy - k.pads[0] + ky, ox - k.pads[1] + kx);
          r.y[size_t(((n * k.cout + co) * r.oh + oy) * r.ow + ox)] = s;
        }
  // S per output, tile by tile: |A^T| (sum over ci of |U| .* |V|) |A| + |bias|.
  const double eps = (double(k.c) + 4 * a + 4) * std::ldexp(1.0, -24);
  std::vector<double> absu(size_t(k.cout * k.c * a * a));
  for (int64_t co = 0; co < k.cout; ++co)
    for (int64_t ci = 0; ci < k.c; ++ci)
      for (int i = 0; i < a; ++i)
        for (int j = 0; j < a; ++j) {
          double s = 0;
          for (int p = 0; p < 3; ++p)
            for (int q = 0; q < 3; ++q)
              s += std::fabs(t.g[size_t(i)][size_t(p)]) * std::fabs(w[size_t(((co * k.c + ci) * 3 + p) * 3 + q)]) *
                   std::fabs(t.g[size_t(j)][size_t(q)]);
          absu[size_t(((co * k.c + ci) * a + i) * a + j)] = s;
        }
  std::vector<double> absv(size_t(k.c * a * a)), msum(size_t(a * a));
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t ty = 0; ty * m < r.oh; ++ty)
      for (int64_t tx = 0; tx * m < r.ow; ++tx) {
        for (int64_t ci = 0; ci < k.c; ++ci)
          for (int i = 0; i < a; ++i)
            for (int j = 0; j < a; ++j) {
              double s = 0;
              for (int p = 0; p < a; ++p)
                for (int q = 0; q < a; ++q)
                  s += std::fabs(t.bt[size_t(i)][size_t(p)]) *
                       std::fabs(in(n, ci, ty * m - k.pads[0] + p, tx * m - k.pads[1] + q)) *
                       std::fabs(t.bt[size_t(j)][size_t(q)]);
              absv[size_t((ci * a + i) * a + j)] = s;
            }
        for (int64_t co = 0; co < k.cout; ++co) {
          for (int e = 0; e < a * a; ++e) {
            double s = 0;
            for (int64_t ci = 0; ci < k.c; ++ci)
              s += absu[size_t((co * k.c + ci) * a * a + e)] * absv[size_t(ci * a * a + e)];
            msum[size_t(e)] = s;
          }
          for (int i = 0; i < m && ty * m + i < r.oh; ++i)
            for (int j = 0; j < m && tx * m + j < r.ow; ++j) {
              double s = k.bias ? std::fabs(double(b[size_t(co)])) : 0.0;
              for (int p = 0; p < a; ++p)
                for (int q = 0; q < a; ++q)
                  s += std::fabs(t.at[size_t(i)][size_t(p)]) * msum[size_t(p * a + q)] *
                       std::fabs(t.at[size_t(j)][size_t(q)]);
              r.bound[size_t(((n * k.cout + co) * r.oh + ty * m + i) * r.ow + tx * m + j)] = eps * s;
            }
        }
      }
  return r;
}

Graph conv_graph(const Case& k, const std::vector<float>& w, const std::vector<float>& b, Blob::Weak* weak) {
  Graph g("winograd");
  Value x = g.input("x", Shape({k.n, k.c, k.h, k.w}, DType::F32));
  Value wv = g.constant_f32({k.cout, k.c, 3, 3}, w);
  if (weak) *weak = g.node(wv.node).attr<ConstantAttrs>().value.weak();
  Value bv = k.bias ? g.constant_f32({k.cout}, b) : Value();
  g.set_outputs({g.conv2d(x, wv, bv, {1, 1}, k.pads, {1, 1}, 1)}, {"y"});
  return g;
}

void check(const Case& k, int m) {
  SCOPED_TRACE(::testing::Message() << "F(" << m << ",3) x=[" << k.n << "," << k.c << "," << k.h << "," << k.w
                                    << "] cout=" << k.cout << " pads=" << k.pads[0] << "," << k.pads[1] << ","
                                    << k.pads[2] << "," << k.pads[3] << " bias=" << k.bias);
  EnvOverride mode("RLX_CPU_WINOGRAD", m == 4 ? "4" : "2");
  const auto x = random_floats(size_t(k.n * k.c * k.h * k.w), 11);
  const auto w = random_floats(size_t(k.cout * k.c * 9), 12);
  const auto b = random_floats(size_t(k.cout), 13);
  const Ref ref = reference(k, m, x, w, b);
  for (const char* isa : isa_levels_here()) {
    IsaOverride o(isa);
    SCOPED_TRACE(std::string("RLX_ISA=") + isa);
    std::vector<float> first;
    for (int threads : {1, 2}) {
      CompileOptions opt;
      opt.threads = threads;
      Blob::Weak weak;
      CompiledGraph net = Session(Device::Cpu, opt).compile(conv_graph(k, w, b, &weak));
      // Only the Winograd path absorbs a conv's weights (its transformed copy replaces them).
      if (std::string(isa) != "scalar") {
        EXPECT_TRUE(weak.lock().empty()) << "the Winograd path was not taken";
      }
      const std::vector<float> y = net.run({{"x", x}})[0];
      ASSERT_EQ(y.size(), ref.y.size());
      if (threads == 1) {
        first = y;
        size_t bad = 0;
        for (size_t i = 0; i < y.size(); ++i)
          if (!(std::fabs(double(y[i]) - ref.y[i]) <= ref.bound[i] + 1e-30) && bad++ < 5)
            ADD_FAILURE() << "output " << i << ": " << y[i] << " vs " << ref.y[i] << " (bound " << ref.bound[i]
                          << ")";
        EXPECT_EQ(bad, 0u);
      } else {
        EXPECT_EQ(y, first) << "1 and 2 threads differ";
      }
    }
  }
}

TEST(ConvWinograd, TwoByTwoTiles) {
  check({1, 32, 14, 14, 48}, 2);                            // ResNet-like, whole tiles; 2 threads: split by tiles
  check({1, 64, 8, 8, 200}, 2);                             // 2 threads: one block split by output channels
  check({2, 16, 9, 13, 16, {1, 1, 1, 1}, false}, 2);        // partial tiles, two images, no bias
  check({1, 20, 11, 8, 24, {0, 1, 2, 0}}, 2);               // asymmetric pads
  check({1, 16, 10, 12, 40, {0, 0, 0, 0}}, 2);              // no padding
  check({1, 300, 6, 7, 200}, 2);                            // Cin over two K blocks, two channel chunks
  check({1, 16, 30, 30, 17}, 2);                            // 225 tiles over three blocks
}

TEST(ConvWinograd, FourByFourTiles) {
  check({1, 32, 14, 14, 48}, 4);
  check({2, 16, 9, 13, 16, {1, 1, 1, 1}, false}, 4);
  check({1, 20, 11, 8, 24, {0, 1, 2, 0}}, 4);
  check({1, 300, 10, 7, 130}, 4);
  check({1, 16, 45, 43, 20}, 4);
}

// Sizes the plan refuses (too few channels or tiles) keep the GEMM path and its weights.
TEST(ConvWinograd, SmallConvsKeepTheGemmPath) {
  EnvOverride mode("RLX_CPU_WINOGRAD", "2");
  for (const Case& k : {Case{1, 3, 16, 16, 32}, Case{1, 32, 2, 2, 32}}) {
    const auto w = random_floats(size_t(k.cout * k.c * 9), 12);
    const auto b = random_floats(size_t(k.cout), 13);
    Blob::Weak weak;
    CompiledGraph net = Session(Device::Cpu).compile(conv_graph(k, w, b, &weak));
    EXPECT_FALSE(weak.lock().empty());
  }
}

// The tile size the plan picks without RLX_CPU_WINOGRAD: F(4x4) on large maps and on smaller
// ones that at least 9 of its tiles cover with little overhang, F(2x2) elsewhere (the measured
// crossovers in plan_winograd).
TEST(ConvWinograd, PlanPicksTheTileSizeByTheMap) {
  EnvOverride mode("RLX_CPU_WINOGRAD", "");  // empty: the default rule
  const cpu::Isa isa = cpu::detect_isa();
  if (!cpu::winograd_kernels(isa)) GTEST_SKIP() << "no Winograd kernels at this ISA level";
  const struct {
    int64_t side, m;
  } cases[] = {{56, 4}, {28, 4}, {24, 4}, {20, 4}, {16, 4}, {12, 4}, {14, 2}, {10, 2}, {8, 2}, {7, 2}};
  for (const auto& k : cases) {
    cpu::WinogradConv plan;
    ASSERT_TRUE(cpu::plan_winograd(128, k.side, k.side, 128, k.side, k.side, 1, 1, isa, plan)) << k.side;
    EXPECT_EQ(plan.m, k.m) << k.side << "x" << k.side;
  }
}

// Half convs other than depthwise ones are not claimed in f16 / bf16 (conv.cpp's
// half_conv_native): legalize runs them in f32 between casts, with the weights widened once
// (the constant-fold after legalize), so they take the f32 kernels, Winograd here. Their
// output is then the f32 graph's on the same (widened) values, rounded once: the same bits,
// which the half GEMM path (another summation order) would not give.
TEST(ConvWinograd, HalfConvsTakeTheF32PathWithItsBits) {
  const Case k{1, 32, 14, 14, 48};
  for (DType t : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(t));
    auto in_t = [t](std::vector<float> v) {  // values that t holds exactly
      const std::vector<double> d = bytes_to_doubles(float_bytes(v, t), t);
      for (size_t i = 0; i < v.size(); ++i) v[i] = float(d[i]);
      return v;
    };
    const auto x = in_t(random_floats(size_t(k.n * k.c * k.h * k.w), 11));
    const auto w = in_t(random_floats(size_t(k.cout * k.c * 9), 12));
    const auto b = in_t(random_floats(size_t(k.cout), 13));
    const std::vector<float> y32 = Session(Device::Cpu).compile(conv_graph(k, w, b, nullptr)).run({{"x", x}})[0];

    Graph g("half");
    Value xv = g.input("x", Shape({k.n, k.c, k.h, k.w}, t));
    Value wv = g.constant(Shape({k.cout, k.c, 3, 3}, t), Blob(float_bytes(w, t)));
    Value bv = g.constant(Shape({k.cout}, t), Blob(float_bytes(b, t)));
    g.set_outputs({g.conv2d(xv, wv, bv, {1, 1}, k.pads, {1, 1}, 1)}, {"y"});
    CompiledGraph net = Session(Device::Cpu).compile(g);
    const TypedTensor y = net.run_typed({{"x", TypedTensor{t, {k.n, k.c, k.h, k.w}, float_bytes(x, t)}}})[0];
    ASSERT_EQ(y.dtype, t);
    EXPECT_TRUE(y.bytes == float_bytes(y32, t)) << "not the f32 path's output rounded once";
    auto half_convs = [t](const CompiledGraph& c) {
      int n = 0;
      for (const Node& node : c.graph().nodes()) n += node.kind == OpKind::Conv2d && node.outputs[0].dtype() == t;
      return n;
    };
    EXPECT_EQ(half_convs(net), 0);
    // RLX_CPU_HALF=native keeps the half kernel (and the weights in the half type).
    EnvOverride native("RLX_CPU_HALF", "native");
    EXPECT_EQ(half_convs(Session(Device::Cpu).compile(g)), 1);
  }
}

}  // namespace
}  // namespace rlx::test
