// The runtime driven through the backend interface by the null backend (claims no op,
// keeps values in host memory of its own): what every backend gets from the runtime.
#include <gtest/gtest.h>

#include <cstring>

#include "rlx/rlx.h"
#include "runtime/backend_registry.h"

namespace rlx::test {
namespace {

std::vector<uint8_t> f32(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

TEST(NullBackend, IsRegisteredButNotListedAsADevice) {
  bool found = false;
  for (const backend::Backend* b : runtime::backends()) found = found || b->name() == "null";
  EXPECT_TRUE(found);
  for (Device d : Session::available_devices()) EXPECT_NE(d, Device::Null);
  EXPECT_EQ(runtime::backend_for(Device::Null).name(), "null");
}

TEST(NullBackend, ComputeIsRefusedListingEveryNode) {
  Graph g("compute");
  Value x = g.input("x", Shape({4}, DType::F32));
  g.set_outputs({g.relu(g.exp(x))});
  CompileOptions o;
  o.fuse_elementwise = false;
  try {
    Session(Device::Null, o).compile(g);
    FAIL() << "expected Unsupported";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::Unsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find("exp"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("relu"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cannot run 2 nodes"), std::string::npos) << e.what();
  }
}

// A backend without the quantized-weight kernels refuses them by name: no op decomposes
// qmatmul / qmatmul_id / kv_attention into an f32 expansion of the weights.
TEST(NullBackend, QuantizedWeightOpsAreUnsupportedNotExpanded) {
  Graph g("q");
  Value x = g.input("x", Shape({2, 64}, DType::F32));
  Value w = g.param("w", Shape({3, 68}, DType::U8));  // q8_0 rows of 64
  g.set_outputs({g.qmatmul(x, w, 8, 64)});
  try {
    Session(Device::Null).compile(g);
    FAIL() << "expected Unsupported";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::Unsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find("qmatmul"), std::string::npos) << e.what();
  }
}

// Leaves straight to outputs: inputs, params and constants cross the interface with
// conversion at the boundary, handles feed an output back into an input, clones and
// shared params behave as on the CPU.
TEST(NullBackend, LeavesCrossTheInterface) {
  Graph g("leaves");
  Value x = g.input("x", Shape({2}, DType::F32));
  Value w = g.param("w", Shape({3}, DType::F32));
  Value c = g.constant_f32({2}, {7, 8}, "c");
  g.set_outputs({x, w, c}, {"x_out", "w_out", "c_out"});
  CompiledGraph net = Session(Device::Null).compile(g);
  EXPECT_EQ(net.capabilities().device, "null");
  EXPECT_EQ(net.report().num_thunks, 0);
  try {
    net.run({{"x", {1, 2}}});
    FAIL() << "expected the unset param to be named";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("param 'w'"), std::string::npos) << e.what();
  }
  net.set_param("w", {4, 5, 6});
  auto out = net.run({{"x", {1, 2}}});
  EXPECT_EQ(out[0], (std::vector<float>{1, 2}));
  EXPECT_EQ(out[1], (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(out[2], (std::vector<float>{7, 8}));
  // Typed I/O converts at the boundary (f64 in, f32 slot).
  std::vector<double> xd{0.5, -1.5};
  std::vector<uint8_t> xb(16);
  std::memcpy(xb.data(), xd.data(), 16);
  auto typed = net.run_typed({{"x", TypedTensor{DType::F64, {2}, xb}}});
  EXPECT_EQ(typed[0].bytes, f32({0.5f, -1.5f}));

  CompiledGraph copy = net.clone();
  copy.set_param("w", {9, 9, 9});
  EXPECT_EQ(net.run({{"x", {1, 2}}})[1], (std::vector<float>{4, 5, 6}));  // clones do not share weights
  CompiledGraph other = Session(Device::Null).compile(g);
  other.share_params_from(net);
  EXPECT_EQ(other.run({{"x", {3, 3}}})[1], (std::vector<float>{4, 5, 6}));
  // A CPU graph cannot read the null backend's weights.
  CompiledGraph cpu = Session(Device::Cpu).compile(g);
  try {
    cpu.share_params_from(net);
    FAIL() << "expected InvalidArgument";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("another backend"), std::string::npos) << e.what();
  }
}

TEST(NullBackend, HandlesKeepStateAcrossRuns) {
  Graph g("state");
  Value s = g.input("s", Shape({2}, DType::F32));
  g.set_outputs({s}, {"s"});
  CompiledGraph net = Session(Device::Null).compile(g);
  net.bind_handle("s", TypedTensor{DType::F32, {2}, f32({1, 2})});
  net.run({});
  EXPECT_EQ(net.read_handle("s").bytes, f32({1, 2}));
}

}  // namespace
}  // namespace rlx::test
