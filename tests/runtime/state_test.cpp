// State across runs: persistent handles (the KV-cache pattern), clones running
// concurrently, release_scratch, and the active extent.
#include <cmath>
#include <thread>

#include "runtime_test_util.h"

namespace rlx::test {
namespace {

// kv_out = kv + x is output "kv" (refreshes the handle); y = sum(kv_out).
Graph kv_graph() {
  Graph g("kv");
  auto kv = g.input("kv", Shape({4}, DType::F32));
  auto x = g.input("x", Shape({4}, DType::F32));
  auto next = g.add(kv, x);
  g.set_outputs({next, g.reduce_sum(next, {0}, false)}, {"kv", "y"});
  return g;
}

TEST(Handles, KvPatternAccumulatesAcrossRuns) {
  CompiledGraph net = compile(kv_graph());
  net.bind_handle("kv", typed<float>(DType::F32, {4}, {0, 0, 0, 0}));
  const std::vector<float> x{1, 2, 3, 4};
  for (int step = 1; step <= 3; ++step) {
    auto out = net.run({{"x", x}});
    EXPECT_EQ(out[0], (std::vector<float>{1.f * step, 2.f * step, 3.f * step, 4.f * step}));
    EXPECT_EQ(out[1], (std::vector<float>{10.f * step}));
  }
  TypedTensor kv = net.read_handle("kv");
  EXPECT_EQ(kv.dtype, DType::F32);
  EXPECT_EQ(kv.dims, (std::vector<int64_t>{4}));
  EXPECT_EQ(unpack<float>(kv.bytes), (std::vector<float>{3, 6, 9, 12}));
  // Rebinding resets the state; half-precision initial data is widened.
  std::vector<uint16_t> h{f32_to_f16(100), f32_to_f16(0), f32_to_f16(0), f32_to_f16(0)};
  net.bind_handle("kv", typed(DType::F16, {4}, h));
  EXPECT_EQ(net.run({{"x", x}})[0], (std::vector<float>{101, 2, 3, 4}));
  // run_slots: the handle-fed input takes an empty span.
  std::vector<uint8_t> xb = pack(x);
  auto views = net.run_slots({{}, std::span<const uint8_t>(xb)});
  EXPECT_EQ(unpack<float>(views[0]), (std::vector<float>{102, 4, 6, 8}));
}

TEST(Handles, BadUseIsAnErrorAndStateSurvives) {
  CompiledGraph net = compile(kv_graph());
  net.bind_handle("kv", typed<float>(DType::F32, {4}, {1, 1, 1, 1}));
  expect_error([&] { net.run({{"x", {0, 0, 0, 0}}, {"kv", {5, 5, 5, 5}}}); }, ErrorCategory::InvalidArgument,
               "fed by a handle");
  std::vector<uint8_t> xb(16);
  expect_error([&] { net.run_slots({std::span<const uint8_t>(xb), std::span<const uint8_t>(xb)}); },
               ErrorCategory::InvalidArgument, "fed by a handle");
  expect_error([&] { net.bind_handle("nothing", typed<float>(DType::F32, {4}, {0, 0, 0, 0})); },
               ErrorCategory::InvalidArgument, "no input or output named 'nothing'");
  expect_error([&] { net.bind_handle("kv", typed<float>(DType::F32, {3}, {0, 0, 0})); },
               ErrorCategory::InvalidArgument, "kv");
  expect_error([&] { net.bind_handle("kv", typed<int32_t>(DType::I32, {4}, {0, 0, 0, 0})); },
               ErrorCategory::InvalidArgument, "i32");
  expect_error([&] { net.read_handle("x"); }, ErrorCategory::InvalidArgument, "no handle named 'x'");
  EXPECT_EQ(unpack<float>(net.read_handle("kv").bytes), (std::vector<float>{1, 1, 1, 1}));
  EXPECT_EQ(net.run({{"x", {1, 0, 0, 0}}})[0], (std::vector<float>{2, 1, 1, 1}));
}

TEST(Handles, InputOnlyAndOutputOnly) {
  Graph g("io");
  auto x = g.input("x", Shape({4}, DType::F32));
  auto bias = g.input("bias", Shape({4}, DType::F32));
  auto y = g.add(x, bias);
  g.set_outputs({y, g.relu(y)}, {"y", "r"});
  CompiledGraph net = compile(g);
  net.bind_handle("bias", typed<float>(DType::F32, {4}, {10, 20, 30, 40}));  // feeds every run
  net.bind_handle("r", typed<float>(DType::F32, {4}, {0, 0, 0, 0}));         // refreshed by every run
  EXPECT_EQ(net.run({{"x", {1, 2, 3, 4}}})[0], (std::vector<float>{11, 22, 33, 44}));
  EXPECT_EQ(net.run({{"x", {-100, 0, 0, 0}}})[0], (std::vector<float>{-90, 20, 30, 40}));
  EXPECT_EQ(unpack<float>(net.read_handle("r").bytes), (std::vector<float>{0, 20, 30, 40}));
  EXPECT_EQ(unpack<float>(net.read_handle("bias").bytes), (std::vector<float>{10, 20, 30, 40}));
  expect_error([&] { net.run({}); }, ErrorCategory::InvalidArgument, "missing input 'x'");
}

// A graph with real work per run: relu(x @ w) + x, x and w [n, n].
Graph work_graph(int n) {
  Graph g("work");
  auto x = g.input("x", Shape({n, n}, DType::F32));
  auto w = g.param("w", Shape({n, n}, DType::F32));
  g.set_outputs({g.add(g.relu(g.matmul(x, w)), x)});
  return g;
}

std::vector<float> ref_work(const std::vector<float>& x, const std::vector<float>& w, int n) {
  std::vector<float> y = ref_matmul(x, w, n, n, n);
  for (size_t i = 0; i < y.size(); ++i) y[i] = std::max(y[i], 0.f) + x[i];
  return y;
}

std::vector<float> ramp(size_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(int(i * 7919 % 23) - 11) * scale + offset;
  return v;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << "element " << i;
}

TEST(Clone, IndependentAndRunsConcurrently) {
  const int n = 48;
  CompiledGraph a = compile(work_graph(n));
  const std::vector<float> w = ramp(size_t(n) * n, 0.01f, 0);
  a.set_param("w", w);
  CompiledGraph b = a.clone();
  const std::vector<float> xa = ramp(size_t(n) * n, 0.5f, 1), xb = ramp(size_t(n) * n, -0.25f, 2);
  const std::vector<float> ya = ref_work(xa, w, n), yb = ref_work(xb, w, n);
  bool ok_a = true, ok_b = true;
  auto loop = [n](CompiledGraph& net, const std::vector<float>& x, const std::vector<float>& y, bool& ok) {
    for (int i = 0; i < 60 && ok; ++i) {
      auto out = net.run({{"x", x}});
      for (size_t k = 0; k < y.size(); ++k)
        if (std::fabs(out[0][k] - y[k]) > 1e-4f * (1 + std::fabs(y[k]))) ok = false;
    }
    (void)n;
  };
  std::thread ta([&] { loop(a, xa, ya, ok_a); });
  std::thread tb([&] { loop(b, xb, yb, ok_b); });
  ta.join();
  tb.join();
  EXPECT_TRUE(ok_a);
  EXPECT_TRUE(ok_b);
  // Params are copied, not shared: changing the clone leaves the original alone.
  b.set_param("w", std::vector<float>(size_t(n) * n, 0));
  expect_close(a.run({{"x", xa}})[0], ya, 1e-4f);
  std::vector<float> relu_only(xa);
  expect_close(b.run({{"x", xa}})[0], relu_only, 0);
}

TEST(Clone, CarriesHandleState) {
  CompiledGraph net = compile(kv_graph());
  net.bind_handle("kv", typed<float>(DType::F32, {4}, {1, 2, 3, 4}));
  net.run({{"x", {1, 1, 1, 1}}});
  CompiledGraph c = net.clone();
  EXPECT_EQ(unpack<float>(c.read_handle("kv").bytes), (std::vector<float>{2, 3, 4, 5}));
  c.run({{"x", {1, 1, 1, 1}}});
  EXPECT_EQ(unpack<float>(c.read_handle("kv").bytes), (std::vector<float>{3, 4, 5, 6}));
  EXPECT_EQ(unpack<float>(net.read_handle("kv").bytes), (std::vector<float>{2, 3, 4, 5}));
}

TEST(Scratch, ReleaseThenIdenticalResults) {
  // Arena well over 1 MiB so it is mmapped and pages really go back to the OS.
  Graph g("big");
  auto x = g.input("x", Shape({512, 256}, DType::F32));
  auto h = g.relu(g.sub(x, g.scalar(0.5, DType::F32)));
  g.set_outputs({g.add(g.mul(h, h), x)});
  CompiledGraph net = compile(g);
  EXPECT_GT(net.report().arena_bytes, int64_t(1) << 20);
  const std::vector<float> x0 = ramp(512 * 256, 0.1f, 0);
  auto first = net.run({{"x", x0}});
  net.release_scratch();
  auto second = net.run({{"x", x0}});
  EXPECT_EQ(first, second);
  net.release_scratch();
  net.release_scratch();  // twice in a row is fine
  const std::vector<float> x1 = ramp(512 * 256, -0.3f, 1);
  auto third = net.run({{"x", x1}});
  for (size_t i = 0; i < x1.size(); i += 997) {
    float r = std::max(x1[i] - 0.5f, 0.f);
    ASSERT_NEAR(third[0][i], r * r + x1[i], 1e-5f * (1 + std::fabs(x1[i]))) << i;
  }
}

TEST(ActiveExtent, LeadingRowsAreExactRestRunOrStay) {
  const int rows = 8, cols = 5;
  Graph g("extent");
  auto x = g.input("x", Shape({rows, cols}, DType::F32));
  auto w = g.param("w", Shape({cols, cols}, DType::F32));
  g.set_outputs({g.add(g.matmul(x, w), x)});
  // Without RLX_VERIFY's scratch poisoning, so rows a kernel leaves alone keep the
  // previous run's values (with it they read as NaN: they are not defined).
  CompileOptions o = test_options();
  o.verify_each_pass = false;
  CompiledGraph net = Session(Device::Cpu, o).compile(g);
  const std::vector<float> w0 = ramp(cols * cols, 0.25f, 0);
  net.set_param("w", w0);
  auto ref = [&](const std::vector<float>& xs) {
    auto y = ref_matmul(xs, w0, rows, cols, cols);
    for (size_t i = 0; i < y.size(); ++i) y[i] += xs[i];
    return y;
  };
  const std::vector<float> a = ramp(rows * cols, 1, 0), b = ramp(rows * cols, -2, 3);
  const std::vector<float> ya = ref(a), yb = ref(b);
  expect_close(net.run({{"x", a}})[0], ya, 1e-5f);

  net.set_active_extent(3, rows);
  auto out = net.run({{"x", b}})[0];
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      size_t i = size_t(r) * cols + c;
      if (r < 3) {
        ASSERT_NEAR(out[i], yb[i], 1e-5f * (1 + std::fabs(yb[i]))) << r << "," << c;
      } else {
        // Rows past the extent: computed in full by kernels that do not honour it,
        // untouched (still the previous run's) by kernels that do.
        bool full = std::fabs(out[i] - yb[i]) <= 1e-5f * (1 + std::fabs(yb[i]));
        bool kept = std::fabs(out[i] - ya[i]) <= 1e-5f * (1 + std::fabs(ya[i]));
        ASSERT_TRUE(full || kept) << r << "," << c << ": " << out[i];
      }
    }
  expect_error([&] { net.set_active_extent(0, rows); }, ErrorCategory::InvalidArgument, "set_active_extent");
  expect_error([&] { net.set_active_extent(9, rows); }, ErrorCategory::InvalidArgument, "set_active_extent");
  expect_error([&] { net.set_active_extent(1, 0); }, ErrorCategory::InvalidArgument, "set_active_extent");
  // An `upper` that no dim of the graph has would silently run in full: an error.
  expect_error([&] { net.set_active_extent(2, 977); }, ErrorCategory::InvalidArgument, "no dim of the compiled graph is 977");
  net.set_active_extent(rows, rows);  // back to full runs
  expect_close(net.run({{"x", b}})[0], yb, 1e-5f);

  // With poisoning on, the leading rows are still exact.
  CompiledGraph checked = compile(g);
  checked.set_param("w", w0);
  checked.set_active_extent(2, rows);
  auto lead = checked.run({{"x", a}})[0];
  lead.resize(2 * cols);
  expect_close(lead, std::vector<float>(ya.begin(), ya.begin() + 2 * cols), 1e-5f);
}

}  // namespace
}  // namespace rlx::test
