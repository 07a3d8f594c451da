// channels-last: the convolutions and pools a backend claims in NHWC become so, their values
// passed on between them without transposes; elementwise nodes and the global average pool
// carried through; weights permuted once. Golden structure plus the values: the rewritten
// graph, run on the CPU (which decomposes the NHWC nodes into its NCHW kernels between
// transposes), against the original.
#include <cmath>
#include <map>

#include "opt/passes.h"
#include "opt/pipeline.h"
#include "opt_test_util.h"
#include "rlx/rlx.h"

namespace rlx::opt::test {
namespace {

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * float(int(i * 7 % 11) - 5);
  return v;
}

// x [1,2,8,8] -> conv (3x3, pad 1, bias) -> relu -> max pool 2x2 -> conv 1x1 -> add the
// pool's output (z) -> global average pool; y and z are also outputs (read in NCHW).
Graph chain(bool constant_weights) {
  Graph g("chain");
  Value x = g.input("x", Shape({1, 2, 8, 8}, DType::F32));
  Value w = constant_weights ? g.constant_f32({4, 2, 3, 3}, ramp(72, 0.1f), "w")
                             : g.input("w", Shape({4, 2, 3, 3}, DType::F32));
  Value y = g.relu(g.conv2d(x, w, g.constant_f32({4}, {0.5f, -0.25f, 0.0f, 1.0f}, "b"), {1, 1}, {1, 1, 1, 1}));
  Value p = g.max_pool2d(y, {2, 2}, {2, 2});
  Value z = g.add(g.conv2d(p, g.constant_f32({4, 4, 1, 1}, ramp(16, 0.2f), "w1"), Value()), p);
  g.set_outputs({g.reduce_mean(z, {2, 3}, true), y, z}, {"pooled", "y", "z"});
  return g;
}

const BackendClaims kAll{"test", [](const Node&, const std::vector<const Shape*>&) { return true; }};

TEST(ChannelsLast, ChainRunsChannelsLastWithOneTransposeIn) {
  const Graph g = chain(true);
  std::string report;
  const Graph out = channels_last(g, &report, &kAll);
  auto lines = [&](const std::string& what) {
    int n = 0;
    for (size_t at = report.find(what); at != std::string::npos; at = report.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(lines("channels last (nhwc)\n"), 3) << report;  // the two convs and the pool
  EXPECT_EQ(lines("carried"), 3) << report;                   // relu, add, the mean
  EXPECT_EQ(lines("channels-last: "), 6) << report;
  std::map<OpKind, int> kinds;
  for (const Node& n : out.nodes()) {
    ++kinds[n.kind];
    if (n.kind == OpKind::Conv2d) {
      EXPECT_TRUE(n.attr<ConvAttrs>().nhwc) << n.name;
    }
    if (n.kind == OpKind::MaxPool2d) {
      EXPECT_TRUE(n.attr<PoolAttrs>().nhwc) << n.name;
    }
    if (n.kind == OpKind::ReduceMean) {
      EXPECT_EQ(n.attr<ReduceAttrs>().axes, (std::vector<int64_t>{1, 2}));
    }
  }
  // x in, and y and z back to NCHW for their outputs; nothing else crosses layouts.
  EXPECT_EQ(kinds[OpKind::Transpose], 3);
  EXPECT_EQ(kinds[OpKind::Conv2d], 2);
  EXPECT_EQ(kinds[OpKind::Reshape], 1);  // [1,1,1,4] -> [1,4,1,1]
  EXPECT_EQ(out.type(out.outputs()[0].value), g.type(g.outputs()[0].value));
  EXPECT_EQ(out.type(out.outputs()[1].value), g.type(g.outputs()[1].value));
  EXPECT_EQ(out.type(out.outputs()[2].value), g.type(g.outputs()[2].value));

  // The same values. y and z: the same NCHW kernels on the same numbers (transposes move bits),
  // so the same bits. pooled: a mean of 16 in another order: two f32 sums of 16 terms differ
  // by at most 2 * 15 * 2^-24 * sum |z| <= 30 * 2^-24 * 16 * max |z|, over 16 for the mean.
  CompileOptions o;
  o.threads = 1;
  CompiledGraph a = Session(Device::Cpu, o).compile(g), b = Session(Device::Cpu, o).compile(out);
  const std::map<std::string, std::vector<float>> in{{"x", ramp(128, 0.3f)}};
  const auto want = a.run(in), got = b.run(in);
  EXPECT_EQ(got[1], want[1]);
  EXPECT_EQ(got[2], want[2]);
  float zmax = 0;
  for (float v : want[2]) zmax = std::max(zmax, std::fabs(v));
  for (size_t i = 0; i < want[0].size(); ++i) EXPECT_NEAR(got[0][i], want[0][i], 30 * std::ldexp(1.0, -24) * zmax) << i;
}

// A scalar operand rides along (mul by a constant), and a mean over H and W without kept dims
// is [N,C] either way (no reshape); the values as the original's (the same bound as above).
TEST(ChannelsLast, ScalarOperandsAndUnkeptMeans) {
  Graph g("scalar_mean");
  Value x = g.input("x", Shape({2, 3, 6, 6}, DType::F32));
  Value y = g.conv2d(x, g.constant_f32({5, 3, 3, 3}, ramp(135, 0.05f), "w"), Value(), {1, 1}, {1, 1, 1, 1});
  Value z = g.mul(y, g.constant_f32({}, {0.5f}, "half"));
  g.set_outputs({g.reduce_mean(z, {-1, -2}, false)}, {"pooled"});
  std::string report;
  const Graph out = channels_last(g, &report, &kAll);
  int transposes = 0, reshapes = 0;
  for (const Node& n : out.nodes()) {
    transposes += n.kind == OpKind::Transpose;
    reshapes += n.kind == OpKind::Reshape;
  }
  EXPECT_EQ(transposes, 1) << report;  // x in; nothing goes back
  EXPECT_EQ(reshapes, 0) << report;
  EXPECT_NE(report.find("' = mul 'mul"), std::string::npos) << report;
  EXPECT_EQ(out.type(out.outputs()[0].value), g.type(g.outputs()[0].value));
  CompileOptions o;
  o.threads = 1;
  CompiledGraph a = Session(Device::Cpu, o).compile(g), b = Session(Device::Cpu, o).compile(out);
  const std::map<std::string, std::vector<float>> in{{"x", ramp(216, 0.3f)}};
  const auto want = a.run(in)[0], got = b.run(in)[0];
  ASSERT_EQ(got.size(), want.size());
  // A mean of 36 in another order: within 2 * 35 * 2^-24 * sum |z| / 36 <= 70 * 2^-24 * max |z|,
  // max |z| read from z itself (the same graph up to the mul).
  Graph gz("z");
  {
    Value xz = gz.input("x", Shape({2, 3, 6, 6}, DType::F32));
    Value yz = gz.conv2d(xz, gz.constant_f32({5, 3, 3, 3}, ramp(135, 0.05f), "w"), Value(), {1, 1}, {1, 1, 1, 1});
    gz.set_outputs({gz.mul(yz, gz.constant_f32({}, {0.5f}, "half"))}, {"z"});
  }
  const std::vector<float> zs = Session(Device::Cpu, o).compile(gz).run(in)[0];
  float zmax = 0;
  for (float v : zs) zmax = std::max(zmax, std::fabs(v));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 70 * std::ldexp(1.0, -24) * zmax) << i;
}

TEST(ChannelsLast, NothingChangesWithoutClaimsOrConstantWeights) {
  const Graph g = chain(true);
  std::string report;
  expect_graph(channels_last(g, &report, nullptr), print_graph(g));
  EXPECT_EQ(report, "");
  const BackendClaims none{"test", [](const Node& n, const std::vector<const Shape*>&) {
                             return n.kind != OpKind::Conv2d && n.kind != OpKind::MaxPool2d;
                           }};
  expect_graph(channels_last(g, &report, &none), print_graph(g));
  EXPECT_EQ(report, "");
  // Weights that are not constants (a param or an input may change between runs): that conv
  // stays NCHW and says why; the pool after it still goes channels last.
  const Graph gi = chain(false);
  const Graph out = channels_last(gi, &report, &kAll);
  EXPECT_NE(report.find("channels-last: not fused: conv2d '"), std::string::npos) << report;
  EXPECT_NE(report.find("': its weights are not a constant; it stays NCHW\n"), std::string::npos) << report;
  int nchw_convs = 0;
  for (const Node& n : out.nodes()) nchw_convs += n.kind == OpKind::Conv2d && !n.attr<ConvAttrs>().nhwc;
  EXPECT_EQ(nchw_convs, 1);
}

}  // namespace
}  // namespace rlx::opt::test
