// Pipelined runs (CompiledGraph::commit_no_wait / sync_pending / run_pipelined) on the CPU:
// the same outputs as one run_typed per input set, in commit order; other calls wait for
// the queue and keep its outputs; a refused commit leaves the queue as it was; handles
// refreshed on the backend's side accumulate across pipelined runs; handles refreshed
// through host memory are refused. tests/cuda covers the asynchronous backend.
#include "runtime_test_util.h"

namespace rlx::test {
namespace {

// y0 = relu(x @ w), y1 = sum(x)
Graph small() {
  Graph g("pipe");
  Value x = g.input("x", Shape({2, 3}, DType::F32));
  Value w = g.param("w", Shape({3, 2}, DType::F32));
  g.set_outputs({g.relu(g.matmul(x, w)), g.reduce_sum(x, {0, 1}, false)}, {"y0", "y1"});
  return g;
}

CompiledGraph compiled() {
  CompiledGraph net = Session(Device::Cpu).compile(small());
  net.set_param("w", {1, -1, 2, 0.5, -3, 1});
  return net;
}

std::map<std::string, TypedTensor> input(float base) {
  std::vector<float> v(6);
  for (int i = 0; i < 6; ++i) v[size_t(i)] = base + float(i) * 0.5f;
  return {{"x", typed(DType::F32, {2, 3}, v)}};
}

TEST(Pipelined, CommitsGiveWhatRunTypedGivesInOrder) {
  CompiledGraph net = compiled(), ref = compiled();
  for (float b : {0.f, 1.f, -2.f}) net.commit_no_wait(input(b));
  EXPECT_EQ(net.pending_runs(), 3u);
  auto got = net.sync_pending();
  EXPECT_EQ(net.pending_runs(), 0u);
  ASSERT_EQ(got.size(), 3u);
  int i = 0;
  for (float b : {0.f, 1.f, -2.f}) {
    auto want = ref.run_typed(input(b));
    ASSERT_EQ(got[size_t(i)].size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_EQ(got[size_t(i)][k].bytes, want[k].bytes) << "run " << i << " output " << k;
      EXPECT_EQ(got[size_t(i)][k].dims, want[k].dims);
      EXPECT_EQ(got[size_t(i)][k].dtype, want[k].dtype);
    }
    ++i;
  }
  EXPECT_TRUE(net.sync_pending().empty());
}

TEST(Pipelined, OutputSelectionAndRunPipelined) {
  CompiledGraph net = compiled(), ref = compiled();
  auto got = net.run_pipelined({input(1), input(2)}, {1});
  ASSERT_EQ(got.size(), 2u);
  ASSERT_EQ(got[0].size(), 1u);
  EXPECT_EQ(got[1][0].bytes, ref.run_typed(input(2))[1].bytes);
  expect_error([&] { net.commit_no_wait(input(1), {2}); }, ErrorCategory::InvalidArgument, "output index 2");
}

TEST(Pipelined, OtherCallsWaitAndKeepTheQueuedOutputs) {
  CompiledGraph net = compiled(), ref = compiled();
  net.commit_no_wait(input(3));
  auto mid = net.run_typed(input(4));  // waits for the committed run, keeps its outputs
  EXPECT_EQ(mid[0].bytes, ref.run_typed(input(4))[0].bytes);
  net.set_param("w", {0, 0, 0, 0, 0, 0});
  net.commit_no_wait(input(5));
  auto got = net.sync_pending();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0][0].bytes, ref.run_typed(input(3))[0].bytes);  // ran with the old weights
  EXPECT_EQ(unpack<float>(got[1][0].bytes), (std::vector<float>{0, 0, 0, 0}));
}

TEST(Pipelined, ARefusedCommitLeavesTheQueue) {
  CompiledGraph net = compiled();
  net.commit_no_wait(input(1));
  expect_error([&] { net.commit_no_wait({{"nope", typed<float>(DType::F32, {1}, {1})}}); },
               ErrorCategory::InvalidArgument, "nope");
  expect_error([&] { net.commit_no_wait({}); }, ErrorCategory::InvalidArgument, "missing input 'x'");
  expect_error([&] { net.commit_no_wait({{"x", typed<float>(DType::F32, {3}, {1, 2, 3})}}); },
               ErrorCategory::InvalidArgument, "x");
  EXPECT_EQ(net.pending_runs(), 1u);
  EXPECT_EQ(net.sync_pending().size(), 1u);
}

// kv_out = kv + x, output "kv" refreshes the input handle "kv" on the backend's side.
TEST(Pipelined, BackendSideHandlesAccumulateAndHostSideOnesAreRefused) {
  Graph g("kv");
  Value kv = g.input("kv", Shape({4}, DType::F32));
  Value x = g.input("x", Shape({4}, DType::F32));
  Value next = g.add(kv, x);
  g.set_outputs({next, g.reduce_sum(next, {0}, false)}, {"kv", "y"});
  CompiledGraph net = Session(Device::Cpu).compile(g);
  net.bind_handle("kv", typed<float>(DType::F32, {4}, {0, 0, 0, 0}));
  const TypedTensor step = typed<float>(DType::F32, {4}, {1, 2, 3, 4});
  auto got = net.run_pipelined({{{"x", step}}, {{"x", step}}, {{"x", step}}}, {1});
  ASSERT_EQ(got.size(), 3u);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(unpack<float>(got[size_t(r)][0].bytes), (std::vector<float>{10.f * (r + 1)}));
  EXPECT_EQ(unpack<float>(net.read_handle("kv").bytes), (std::vector<float>{3, 6, 9, 12}));

  // An output-only handle is refreshed through host memory after every run: refused.
  CompiledGraph other = Session(Device::Cpu).compile(small());
  other.set_param("w", {1, 1, 1, 1, 1, 1});
  other.bind_handle("y1", typed<float>(DType::F32, {}, {0}));
  expect_error([&] { other.commit_no_wait(input(1)); }, ErrorCategory::InvalidArgument, "cannot be pipelined");
  EXPECT_EQ(other.pending_runs(), 0u);
}

// A decode-loop shape: the runs' state is handles only (kv accumulates, n counts the runs),
// committed with nothing read back; each run's outputs list is empty and the handles hold
// what that many sequential runs leave.
TEST(Pipelined, HandlesOnlyCommitsReadNothingBack) {
  Graph g("loop");
  Value kv = g.input("kv", Shape({4}, DType::F32));
  Value n = g.input("n", Shape({1}, DType::I64));
  Value x = g.input("x", Shape({4}, DType::F32));
  g.set_outputs({g.add(kv, x), g.add(n, g.scalar(1, DType::I64))}, {"kv", "n"});
  CompiledGraph net = Session(Device::Cpu).compile(g);
  net.bind_handle("kv", typed<float>(DType::F32, {4}, {0, 0, 0, 0}));
  net.bind_handle("n", typed<int64_t>(DType::I64, {1}, {5}));
  const std::map<std::string, TypedTensor> step{{"x", typed<float>(DType::F32, {4}, {1, 2, 3, 4})}};
  for (int r = 0; r < 3; ++r) net.commit_no_wait_handles_only(step);
  EXPECT_EQ(net.pending_runs(), 3u);
  auto got = net.sync_pending();
  ASSERT_EQ(got.size(), 3u);
  for (const auto& r : got) EXPECT_TRUE(r.empty());
  EXPECT_EQ(unpack<float>(net.read_handle("kv").bytes), (std::vector<float>{3, 6, 9, 12}));
  EXPECT_EQ(unpack<int64_t>(net.read_handle("n").bytes), (std::vector<int64_t>{8}));
  expect_error([&] { net.commit_no_wait_handles_only({}); }, ErrorCategory::InvalidArgument, "missing input 'x'");
  EXPECT_EQ(net.pending_runs(), 0u);
}

}  // namespace
}  // namespace rlx::test
