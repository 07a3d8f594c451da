// Every CompiledGraph method, and every bad use: each error is an rlx::Error of the
// right category naming the culprit, and the object keeps working afterwards.
#include <algorithm>
#include <limits>

#include "runtime_test_util.h"

namespace rlx::test {
namespace {

const std::vector<float> kX{1, 2, 3, 4};
const std::vector<float> kY{4, 6};

// After any failed call the graph must still give the right answer.
void expect_hello_works(CompiledGraph& net) {
  auto out = net.run({{"x", kX}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], kY);
}

// Two outputs of different dtypes: y = x @ w (f32[1,2]) and s = reduce_sum(x) (f32[1,1]).
Graph two_output_graph() {
  Graph g("two");
  auto x = g.input("x", Shape({1, 4}, DType::F32));
  auto w = g.param("w", Shape({4, 2}, DType::F32));
  g.set_outputs({g.matmul(x, w), g.reduce_sum(x, {1})}, {"y", "s"});
  return g;
}

TEST(CompiledGraph, SetParamTypedWidensHalfPrecision) {
  CompiledGraph net = compile(hello_graph());
  std::vector<uint16_t> w16, wbf;
  for (float v : kHelloW) {
    w16.push_back(f32_to_f16(v));
    wbf.push_back(f32_to_bf16(v));
  }
  net.set_param_typed("w", w16.data(), w16.size() * 2, DType::F16);
  expect_hello_works(net);
  net.set_param_typed("w", wbf.data(), wbf.size() * 2, DType::BF16);
  expect_hello_works(net);
  std::vector<double> w64(kHelloW.begin(), kHelloW.end());
  net.set_param_typed("w", w64.data(), w64.size() * 8, DType::F64);
  expect_hello_works(net);
}

TEST(CompiledGraph, SetParamErrorsLeaveObjectUsable) {
  CompiledGraph net = compile(hello_graph());
  net.set_param("w", kHelloW);
  expect_error([&] { net.set_param("nope", kHelloW); }, ErrorCategory::InvalidArgument, "unknown param 'nope'");
  expect_error([&] { net.set_param("w", {1, 2, 3}); }, ErrorCategory::InvalidArgument, "param 'w'");
  std::vector<int32_t> wi(8, 1);
  expect_error([&] { net.set_param_typed("w", wi.data(), 32, DType::I32); }, ErrorCategory::InvalidArgument, "i32");
  expect_error([&] { net.set_param_typed("w", kHelloW.data(), 30, DType::F32); }, ErrorCategory::InvalidArgument,
               "whole number");
  expect_error([&] { net.set_param_typed("w", nullptr, 32, DType::F32); }, ErrorCategory::InvalidArgument, "null");
  expect_hello_works(net);
}

TEST(CompiledGraph, SetParamRangeIsBounded) {
  CompiledGraph net = compile(hello_graph());
  // Two halves of w, written as raw f32 bytes.
  net.set_param_range("w", 0, kHelloW.data(), 16);
  net.set_param_range("w", 16, kHelloW.data() + 4, 16);
  expect_hello_works(net);
  float one = 1;
  expect_error([&] { net.set_param_range("w", 29, &one, 4); }, ErrorCategory::InvalidArgument, "do not fit");
  expect_error([&] { net.set_param_range("w", 33, &one, 0); }, ErrorCategory::InvalidArgument, "do not fit");
  expect_error([&] { net.set_param_range("w", std::numeric_limits<size_t>::max(), &one, 4); },
               ErrorCategory::InvalidArgument, "do not fit");
  expect_error([&] { net.set_param_range("v", 0, &one, 4); }, ErrorCategory::InvalidArgument, "unknown param");
  expect_hello_works(net);
  // A range write changes only its bytes: w[3][1] (last element) = 2 -> y[1] = 2 + 2*4.
  float two = 2;
  net.set_param_range("w", 28, &two, 4);
  EXPECT_EQ(net.run({{"x", kX}})[0], (std::vector<float>{4, 10}));
}

TEST(CompiledGraph, UnsetParamIsAnErrorUntilSet) {
  CompiledGraph net = compile(hello_graph());
  expect_error([&] { net.run({{"x", kX}}); }, ErrorCategory::InvalidArgument, "param 'w'");
  expect_error([&] { net.finalize_params(); }, ErrorCategory::InvalidArgument, "w");
  net.set_param("w", kHelloW);
  net.finalize_params();
  expect_hello_works(net);
  net.set_param("w", std::vector<float>(8, 1));  // still allowed after finalize
  EXPECT_EQ(net.run({{"x", kX}})[0], (std::vector<float>{10, 10}));
}

TEST(CompiledGraph, ParamWithInitialDataNeedsNoSet) {
  Graph g("init");
  auto x = g.input("x", Shape({1, 4}, DType::F32));
  auto w = g.param("w", Shape({4, 2}, DType::F32), Blob(pack(kHelloW)));
  g.set_outputs({g.matmul(x, w)});
  CompiledGraph net = compile(g);
  net.finalize_params();
  expect_hello_works(net);
  // The initial data lives only in the weights segment, not also in the compiled graph.
  for (int32_t id : net.graph().param_nodes()) EXPECT_TRUE(net.graph().node(id).attr<LeafAttrs>().init.empty());
  CompiledGraph c = net.clone();
  expect_hello_works(c);
}

TEST(CompiledGraph, RunInputErrorsLeaveObjectUsable) {
  CompiledGraph net = compile(hello_graph());
  net.set_param("w", kHelloW);
  expect_error([&] { net.run({{"x", kX}, {"z", kX}}); }, ErrorCategory::InvalidArgument, "unknown input 'z'");
  expect_error([&] { net.run({}); }, ErrorCategory::InvalidArgument, "missing input 'x'");
  expect_error([&] { net.run({{"x", {1, 2, 3}}}); }, ErrorCategory::InvalidArgument, "input 'x'");
  expect_error([&] { net.run_typed({{"x", typed<int32_t>(DType::I32, {1, 4}, {1, 2, 3, 4})}}); },
               ErrorCategory::InvalidArgument, "i32");
  expect_error([&] { net.run_typed({{"x", typed<float>(DType::F32, {4, 1}, kX)}}); },
               ErrorCategory::InvalidArgument, "dims");
  // Dims whose product wraps int64 (2^32 * 2^32 = 2^64 -> 0 when wrapped) or is negative.
  expect_error([&] { net.run_typed({{"x", typed<float>(DType::F32, {int64_t(1) << 32, int64_t(1) << 32, 4}, kX)}}); },
               ErrorCategory::Shape, "overflows");
  expect_error([&] { net.run_typed({{"x", typed<float>(DType::F32, {-1, -4}, kX)}}); },
               ErrorCategory::InvalidArgument, "negative dim");
  expect_hello_works(net);
}

TEST(CompiledGraph, RunTypedConvertsAtTheBoundary) {
  CompiledGraph net = compile(hello_graph());
  net.set_param("w", kHelloW);
  std::vector<uint16_t> x16, xbf;
  for (float v : kX) {
    x16.push_back(f32_to_f16(v));
    xbf.push_back(f32_to_bf16(v));
  }
  for (auto t : {typed(DType::F16, {1, 4}, x16), typed(DType::BF16, {1, 4}, xbf), typed<float>(DType::F32, {}, kX),
                 typed<double>(DType::F64, {1, 4}, {1, 2, 3, 4})}) {
    auto out = net.run_typed({{"x", t}});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].dtype, DType::F32);
    EXPECT_EQ(out[0].dims, (std::vector<int64_t>{1, 2}));
    EXPECT_EQ(unpack<float>(out[0].bytes), kY) << dtype_name(t.dtype);
  }
}

TEST(CompiledGraph, RunSlotsGivesArenaViews) {
  CompiledGraph net = compile(hello_graph());
  net.set_param("w", kHelloW);
  std::vector<uint8_t> x = pack(kX);
  auto views = net.run_slots({std::span<const uint8_t>(x)});
  ASSERT_EQ(views.size(), 1u);
  EXPECT_EQ(views[0].dtype, DType::F32);
  EXPECT_EQ(views[0].dims, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(views[0].bytes, 8u);
  EXPECT_EQ(unpack<float>(views[0]), kY);
  expect_error([&] { net.run_slots({}); }, ErrorCategory::InvalidArgument, "1 (x)");
  std::vector<uint8_t> short_x(12);
  expect_error([&] { net.run_slots({std::span<const uint8_t>(short_x)}); }, ErrorCategory::InvalidArgument,
               "needs 16 bytes");
  expect_hello_works(net);
}

TEST(CompiledGraph, RunReadOutputsSelects) {
  CompiledGraph net = compile(two_output_graph());
  net.set_param("w", kHelloW);
  auto x = typed<float>(DType::F32, {1, 4}, kX);
  auto only_s = net.run_read_outputs({{"x", x}}, {1});
  ASSERT_EQ(only_s.size(), 1u);
  EXPECT_EQ(unpack<float>(only_s[0].bytes), (std::vector<float>{10}));
  auto both = net.run_read_outputs({{"x", x}}, {1, 0});
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(unpack<float>(both[1].bytes), kY);
  expect_error([&] { net.run_read_outputs({{"x", x}}, {2}); }, ErrorCategory::InvalidArgument, "output index 2");
  expect_error([&] { net.run_read_outputs({{"x", x}}, {-1}); }, ErrorCategory::InvalidArgument, "output index -1");
  EXPECT_EQ(net.run({{"x", kX}})[1], (std::vector<float>{10}));
}

TEST(CompiledGraph, NamesTypesAndIntrospection) {
  CompiledGraph net = compile(two_output_graph(), 3);
  EXPECT_EQ(net.input_names(), (std::vector<std::string>{"x"}));
  EXPECT_EQ(net.output_names(), (std::vector<std::string>{"y", "s"}));
  EXPECT_EQ(net.param_names(), (std::vector<std::string>{"w"}));
  EXPECT_EQ(net.input_type("x"), Shape({1, 4}, DType::F32));
  EXPECT_EQ(net.output_type(0), Shape({1, 2}, DType::F32));
  EXPECT_EQ(net.output_type(1), Shape({1, 1}, DType::F32));
  expect_error([&] { net.input_type("w"); }, ErrorCategory::InvalidArgument, "unknown input 'w'");
  expect_error([&] { net.output_type(2); }, ErrorCategory::InvalidArgument, "out of range");

  Capabilities c = net.capabilities();
  EXPECT_EQ(c.device, "cpu");
  EXPECT_EQ(c.threads, 3);
  EXPECT_TRUE(c.isa == "scalar" || c.isa == "avx2" || c.isa == "avx512") << c.isa;
  EXPECT_TRUE(c.handles && c.clone && c.active_extent);

  const CompileReport& r = net.report();
  EXPECT_GE(r.num_thunks, 2);
  EXPECT_GT(r.arena_bytes, 0);
  EXPECT_GE(r.arena_bytes, r.lower_bound_bytes);
  EXPECT_EQ(r.weight_bytes % 32, 0);
  EXPECT_GE(r.weight_bytes, 32);
  EXPECT_FALSE(r.memory.empty());
  EXPECT_FALSE(r.passes.empty());
  EXPECT_NE(r.dispatch.find("matmul"), std::string::npos) << r.dispatch;
  EXPECT_GE(net.graph().nodes().size(), 3u);
}

TEST(CompiledGraph, CopyParamsIsIndependentShareIsNot) {
  CompiledGraph a = compile(hello_graph());
  CompiledGraph b = compile(hello_graph());
  CompiledGraph c = compile(hello_graph());
  a.set_param("w", kHelloW);
  b.copy_params_from(a);
  c.share_params_from(a);
  expect_hello_works(b);
  expect_hello_works(c);
  a.set_param("w", std::vector<float>(8, 1));
  EXPECT_EQ(b.run({{"x", kX}})[0], kY);                          // copy: unchanged
  EXPECT_EQ(c.run({{"x", kX}})[0], (std::vector<float>{10, 10}));  // shared: sees the write
  c.set_param("w", kHelloW);                                      // and writes through
  EXPECT_EQ(a.run({{"x", kX}})[0], kY);
}

TEST(CompiledGraph, CopyAndShareRefuseOtherParams) {
  CompiledGraph net = compile(hello_graph());
  net.set_param("w", kHelloW);
  Graph other("other");
  auto x = other.input("x", Shape({1, 4}, DType::F32));
  auto w = other.param("w", Shape({4, 3}, DType::F32));
  other.set_outputs({other.matmul(x, w)});
  CompiledGraph o = compile(other);
  expect_error([&] { net.copy_params_from(o); }, ErrorCategory::InvalidArgument, "param 'w'");
  expect_error([&] { net.share_params_from(o); }, ErrorCategory::InvalidArgument, "param 'w'");
  Graph none("none");
  none.set_outputs({none.relu(none.input("x", Shape({1, 4}, DType::F32)))});
  CompiledGraph n = compile(none);
  expect_error([&] { net.copy_params_from(n); }, ErrorCategory::InvalidArgument, "no param 'w'");
  expect_hello_works(net);
}

TEST(CompiledGraph, EmptyObjectThrows) {
  CompiledGraph empty;
  expect_error([&] { empty.run({}); }, ErrorCategory::InvalidArgument, "empty");
  expect_error([&] { empty.report(); }, ErrorCategory::InvalidArgument, "empty");
  CompiledGraph net = compile(hello_graph());
  CompiledGraph moved = std::move(net);
  moved.set_param("w", kHelloW);
  expect_hello_works(moved);
  expect_error([&] { net.input_names(); }, ErrorCategory::InvalidArgument, "empty");  // NOLINT: moved from
}

// Without a usable GPU (a build without CUDA, or no driver / device), asking for CUDA is
// one clear Unsupported error that says why and what is available.
TEST(Session, DevicesAndCuda) {
  auto devs = Session::available_devices();
  ASSERT_GE(devs.size(), 1u);
  EXPECT_EQ(devs[0], Device::Cpu);
  if (std::find(devs.begin(), devs.end(), Device::Cuda) != devs.end()) GTEST_SKIP() << "a CUDA device is available here";
  try {
    Session(Device::Cuda).compile(hello_graph());
    FAIL() << "compiling for CUDA without a usable device succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::Unsupported);
    const std::string m = e.what();
    EXPECT_TRUE(m.find("no cuda backend in this build of rlx (available devices: cpu)") != std::string::npos ||
                (m.find("the cuda backend cannot run here: ") != std::string::npos &&
                 m.find("(available devices: cpu)") != std::string::npos))
        << m;
  }
}

TEST(Session, MalformedGraphFailsVerification) {
  Graph g("bad");
  auto x = g.input("x", Shape({1, 4}, DType::F32));
  Node n;
  n.kind = OpKind::Relu;
  n.inputs = {x};
  n.outputs = {Shape({1, 5}, DType::F32)};  // relu keeps the shape: wrong
  n.attrs = NoAttrs{};
  int32_t id = g.append_node(std::move(n));
  g.set_outputs({Value{id, 0}});
  try {
    compile(g);
    ADD_FAILURE() << "expected a verification error";
  } catch (const Error& e) {
    EXPECT_TRUE(e.category() == ErrorCategory::Verify || e.category() == ErrorCategory::Shape) << e.what();
  }
}

TEST(Session, UnsupportedGraphListsTheNode) {
  Graph g("int_conv");
  auto x = g.input("x", Shape({1, 1, 3, 3}, DType::I8));
  auto w = g.input("w", Shape({1, 1, 1, 1}, DType::I8));
  g.set_outputs({g.conv2d(x, w, {})}, {"y"});
  expect_error([&] { compile(g); }, ErrorCategory::Unsupported, "conv2d");
}

TEST(Session, ConstantsFoldThroughCpuKernels) {
  Graph g("fold");
  auto y = g.input("y", Shape({2}, DType::F32));
  g.set_outputs({g.add(y, g.mul(g.constant_f32({2}, {1, 2}), g.constant_f32({2}, {3, 4})))});
  CompiledGraph net = compile(g);
  for (const Node& n : net.graph().nodes()) EXPECT_NE(n.kind, OpKind::Mul);
  EXPECT_NE(net.report().passes.find("constant-fold"), std::string::npos);
  EXPECT_EQ(net.run({{"y", {10, 20}}})[0], (std::vector<float>{13, 28}));
}

TEST(CompiledGraph, KernelErrorNamesTheNodeAndObjectStaysUsable) {
  Graph g("gather");
  auto x = g.input("x", Shape({4}, DType::F32));
  auto i = g.input("i", Shape({2}, DType::I64));
  g.set_outputs({g.add1(OpKind::Gather, {x, i}, AxisAttrs{0}, "pick")});
  CompiledGraph net = compile(g);
  auto xs = typed<float>(DType::F32, {4}, {1, 2, 3, 4});
  try {
    net.run_typed({{"x", xs}, {"i", typed<int64_t>(DType::I64, {2}, {1, 10})}});
    ADD_FAILURE() << "an out-of-range gather index must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'pick'"), std::string::npos) << e.what();
  }
  auto ok = net.run_typed({{"x", xs}, {"i", typed<int64_t>(DType::I64, {2}, {3, 0})}});
  EXPECT_EQ(unpack<float>(ok[0].bytes), (std::vector<float>{4, 1}));
}

TEST(Session, SymbolicDimsAreBound) {
  Graph g("dyn");
  auto x = g.input("x", Shape(std::vector<Dim>{g.sym("batch"), 4}, DType::F32));
  auto w = g.param("w", Shape({4, 2}, DType::F32));
  g.set_outputs({g.matmul(x, w)});
  CompileOptions o = test_options();
  o.dim_bindings["batch"] = 2;
  CompiledGraph net = Session(Device::Cpu, o).compile(g);
  EXPECT_EQ(net.input_type("x"), Shape({2, 4}, DType::F32));
  net.set_param("w", kHelloW);
  std::vector<float> x2{1, 2, 3, 4, 0, 1, 0, 1};
  EXPECT_EQ(net.run({{"x", x2}})[0], ref_matmul(x2, kHelloW, 2, 4, 2));
}

// compile(Graph&&) takes the graph and drops its constants' bytes after the pipeline (so a
// backend's released constants are freed): binding symbolic dims and building the I/O
// interface must not need them, and the weights must still be right.
TEST(Session, CompileTakingTheGraphWithSymbolicDimsAndConstants) {
  Graph g("dyn_const");
  auto x = g.input("x", Shape(std::vector<Dim>{g.sym("batch"), 16}, DType::F32));
  std::vector<float> wv(16 * 64);
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = float(int(i % 7) - 3);
  auto w = g.constant_f32({16, 64}, wv);
  g.set_outputs({g.matmul(x, w)});
  const Blob::Weak weak = g.node(w.node).attr<ConstantAttrs>().value.weak();
  CompileOptions o = test_options();
  o.dim_bindings["batch"] = 6;
  CompiledGraph net = Session(Device::Cpu, o).compile(std::move(g));
  EXPECT_TRUE(weak.lock().empty()) << "the prepacked weight's bytes are still held";
  EXPECT_EQ(net.input_type("x"), Shape({6, 16}, DType::F32));
  std::vector<float> xv(6 * 16);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = float(int(i % 5) - 2);
  EXPECT_EQ(net.run({{"x", xv}})[0], ref_matmul(xv, wv, 6, 16, 64));
}

}  // namespace
}  // namespace rlx::test
