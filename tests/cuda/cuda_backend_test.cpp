// The CUDA backend against the CPU oracle, through the public API, on a GPU machine.
// Without a usable CUDA device (CI, or a build without the toolkit) every test skips with
// the reason the runtime gives. The broad per-op check is the e2e suite run with
// RLX_E2E_DEVICE=cuda; these tests cover what is CUDA's own: a transformer-shaped graph
// end to end, graph replay across runs, clone and shared params, errors found on the
// device naming their node with the executable still usable.
// Tolerances: matmul and the norms accumulate K (or the row) f32 terms in another order
// than the CPU: |diff| <= 2 * K * 2^-24 * sum |terms| per output on each side; the inputs
// are in [-1, 1] with K = 64, so the bound used, 4 * 64 * 2^-24 * 64 (about 1e-3 of the
// unit scale, relative to the largest output), covers both with slack; transcendental
// functions differ by a few ulps (CUDA's libdevice vs the CPU's vector math).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "cuda_test_util.h"
#include "rlx/rlx.h"

namespace rlx {
namespace {

using cuda_test::randoms;

// x [B, S, 64] -> layer_norm -> @ W [64, 64] -> gelu -> split heads [B, 4, S, 16] ->
// softmax over S -> reduce_mean -> concat with a gathered row -> outputs.
Graph block_graph(int64_t B, int64_t S) {
  Graph g("cuda_block");
  Value x = g.input("x", Shape({B, S, 64}, DType::F32));
  Value idx = g.input("idx", Shape({3}, DType::I64));
  Value scale = g.param("scale", Shape({64}, DType::F32));
  Value bias = g.param("bias", Shape({64}, DType::F32));
  Value w = g.param("w", Shape({64, 64}, DType::F32));
  Value h = g.layer_norm(x, scale, bias, -1, 1e-5);
  h = g.gelu(g.matmul(h, w));
  Value heads = g.transpose(g.reshape(h, {B, S, 4, 16}), {0, 2, 1, 3});
  Value p = g.softmax(heads, 2);
  Value m = g.reduce_mean(p, {3}, false);                // [B, 4, S]
  Value rows = g.gather(g.reshape(h, {B * S, 64}), idx, 0);  // [3, 64]
  Value cat = g.concat({rows, g.slice(g.reshape(h, {B * S, 64}), {0}, {2})}, 0);  // [5, 64]
  Value mask = g.gt(cat, g.scalar(0.0, DType::F32));
  Value sel = g.where(mask, cat, g.mul(cat, g.scalar(0.5, DType::F32)));
  g.set_outputs({m, sel, g.rms_norm(x, scale, -1, 1e-6)}, {"m", "sel", "rms"});
  return g;
}

void set_block_params(CompiledGraph& net) {
  net.set_param("scale", randoms(64, 1));
  net.set_param("bias", randoms(64, 2));
  net.set_param("w", randoms(64 * 64, 3));
}

void expect_near_all(const std::vector<float>& got, const std::vector<float>& want, double tol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double mx = 0;
  for (float v : want) mx = std::max(mx, double(std::fabs(v)));
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(double(got[i]) - want[i]) <= tol * std::max(mx, 1.0)) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: cuda " << got[i] << ", cpu " << want[i];
  EXPECT_EQ(bad, 0) << what;
}

const double kTol = 4.0 * 64 * std::ldexp(1.0, -24) * 64;

// Norms of long rows take the block-per-row kernel (1,024 columns and more) and a thread's
// elements in batches of 8 with a short last batch (1,100 columns: 4 or 5 per thread of 256);
// 100 columns the warp-per-row kernel with its tail. Tolerance: the row's C squares summed in
// another order on each side (relative error of the sum at most C 2^-24), halved by the
// square root, plus a few ulps of rsqrt and the products after it: 4 C 2^-24 relative to the
// largest output covers both sides with slack.
TEST(CudaBackend, LongRowNormsMatchCpu) {
  REQUIRE_CUDA();
  for (int64_t C : {100, 1100, 2048}) {
    Graph g("norms");
    Value x = g.input("x", Shape({3, C}, DType::F32));
    Value scale = g.param("scale", Shape({C}, DType::F32));
    Value bias = g.param("bias", Shape({C}, DType::F32));
    g.set_outputs({g.layer_norm(x, scale, bias, -1, 1e-5), g.rms_norm(x, scale, -1, 1e-6)}, {"ln", "rms"});
    CompiledGraph cpu = Session(Device::Cpu).compile(g), gpu = Session(Device::Cuda).compile(g);
    for (CompiledGraph* n : {&cpu, &gpu}) {
      n->set_param("scale", randoms(size_t(C), 11));
      n->set_param("bias", randoms(size_t(C), 12));
    }
    const std::map<std::string, std::vector<float>> in{{"x", randoms(size_t(3 * C), 13)}};
    auto want = cpu.run(in), got = gpu.run(in);
    const double tol = 4.0 * double(C) * std::ldexp(1.0, -24);
    expect_near_all(got.at(0), want.at(0), tol, "layer_norm");
    expect_near_all(got.at(1), want.at(1), tol, "rms_norm");
  }
}

// Arg-reductions over long rows (a vocabulary's logits) take the block-per-output kernel:
// it must pick the CPU's index exactly, ties (the first, or the last with select_last) and
// NaN (ranked above every number) included. Rows of 5,000 values from a set of 7 (many ties),
// one row with NaNs, one of 32,000 with its maximum near the end; indices are exact in f32.
TEST(CudaBackend, ArgReductionsOfLongRowsPickTheCpuIndex) {
  REQUIRE_CUDA();
  // 5,000: one block per row; 9,001 and 32,000: a cluster of blocks per row (its last
  // span shorter), with NaNs and the maximum in different blocks' spans.
  for (int64_t n : {int64_t(5000), int64_t(9001), int64_t(32000)}) {
    Graph g("arg");
    Value x = g.input("x", Shape({3, n}, DType::F32));
    std::vector<Value> outs;
    for (bool last : {false, true}) {
      outs.push_back(g.cast(g.argmax(x, -1, false, last), DType::F32));
      outs.push_back(g.cast(g.argmin(x, -1, false, last), DType::F32));
    }
    g.set_outputs(outs, {"max", "min", "max_last", "min_last"});
    CompiledGraph cpu = Session(Device::Cpu).compile(g), gpu = Session(Device::Cuda).compile(g);
    std::vector<float> v(size_t(3 * n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = float(int((i * 2654435761u) % 7) - 3);
    v[size_t(n) + 17] = std::nanf("");
    v[size_t(n) + size_t(n) - 5] = std::nanf("");
    v[size_t(2 * n) + size_t(n) - 3] = 9.0f;
    const std::map<std::string, std::vector<float>> in{{"x", v}};
    auto want = cpu.run(in), got = gpu.run(in);
    for (size_t k = 0; k < want.size(); ++k) EXPECT_EQ(got.at(k), want.at(k)) << "n " << n << " output " << k;
  }
  // Along the first axis (strided rows: [n, 3], argmax over n).
  Graph g("arg_cols");
  const int64_t n = 20000;
  Value x = g.input("x", Shape({n, 3}, DType::F32));
  g.set_outputs({g.cast(g.argmax(x, 0, false), DType::F32), g.cast(g.argmin(x, 0, false, true), DType::F32)},
                {"max", "min_last"});
  CompiledGraph cpu = Session(Device::Cpu).compile(g), gpu = Session(Device::Cuda).compile(g);
  std::vector<float> v(size_t(3 * n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(int((i * 40503u) % 11) - 5);
  v[3 * 15000 + 1] = 7.0f;
  const std::map<std::string, std::vector<float>> in{{"x", v}};
  auto want = cpu.run(in), got = gpu.run(in);
  for (size_t k = 0; k < want.size(); ++k) EXPECT_EQ(got.at(k), want.at(k)) << "columns, output " << k;
}

// Handles fed from outputs (a decode loop's token and position) are copied by the run itself,
// inside the replayed graph: small ones by the run's last kernel (8 bytes by bytes, 1 KB by
// 16-byte units), one over 64 KB by a copy.
// Pipelined runs with nothing read back, plain runs between them, and a clone all leave
// what the CPU's runs leave.
TEST(CudaBackend, HandleCopiesRideWithTheRun) {
  REQUIRE_CUDA();
  const int64_t big = 20000;  // 80 KB: past the run-end kernel's copies
  Graph g("loop");
  Value kv = g.input("kv", Shape({big}, DType::F32));
  Value n = g.input("n", Shape({1}, DType::I64));
  Value acc = g.input("acc", Shape({256}, DType::F32));
  Value x = g.input("x", Shape({big}, DType::F32));
  Value next = g.add(kv, x);
  g.set_outputs({next, g.add(n, g.scalar(1, DType::I64)), g.reduce_sum(next, {0}, false),
                 g.add(acc, g.slice(x, {0}, {256}, {0}, {1}))},
                {"kv", "n", "sum", "acc"});
  const std::map<std::string, TypedTensor> step{{"x", cuda_test::random_f32({big}, 11)}};
  auto setup = [&](CompiledGraph& net) {
    net.bind_handle("kv", TypedTensor{DType::F32, {big}, std::vector<uint8_t>(size_t(big) * 4, 0)});
    net.bind_handle("n", TypedTensor{DType::I64, {1}, std::vector<uint8_t>(8, 0)});
    net.bind_handle("acc", TypedTensor{DType::F32, {256}, std::vector<uint8_t>(256 * 4, 0)});
  };
  CompiledGraph cpu = Session(Device::Cpu).compile(g), gpu = Session(Device::Cuda).compile(g);
  setup(cpu);
  setup(gpu);
  for (int r = 0; r < 5; ++r) {  // eager, capture, replays
    auto a = cpu.run_typed(step), b = gpu.run_typed(step);
    EXPECT_EQ(b[1].bytes, a[1].bytes) << "run " << r;
  }
  for (int r = 0; r < 4; ++r) {
    cpu.commit_no_wait_handles_only(step);
    gpu.commit_no_wait_handles_only(step);
  }
  EXPECT_EQ(gpu.sync_pending().size(), 4u);
  cpu.sync_pending();
  EXPECT_EQ(gpu.read_handle("n").bytes, cpu.read_handle("n").bytes);
  EXPECT_EQ(gpu.read_handle("kv").bytes, cpu.read_handle("kv").bytes);  // sums of the same f32 adds
  EXPECT_EQ(gpu.read_handle("acc").bytes, cpu.read_handle("acc").bytes);
  CompiledGraph twin = gpu.clone(), cpu_twin = cpu.clone();
  twin.run_typed(step);
  cpu_twin.run_typed(step);
  EXPECT_EQ(twin.read_handle("n").bytes, cpu_twin.read_handle("n").bytes);
  EXPECT_EQ(gpu.read_handle("n").bytes, cpu.read_handle("n").bytes);  // the original did not move
}

TEST(CudaBackend, TransformerBlockMatchesCpu) {
  REQUIRE_CUDA();
  const int64_t B = 2, S = 24;
  Graph g = block_graph(B, S);
  CompiledGraph cpu = Session(Device::Cpu).compile(g), gpu = Session(Device::Cuda).compile(g);
  set_block_params(cpu);
  set_block_params(gpu);
  EXPECT_EQ(gpu.capabilities().device, "cuda");
  std::map<std::string, std::vector<float>> in{{"x", randoms(size_t(B * S * 64), 7)}, {"idx", {5, -1, 0}}};
  auto want = cpu.run(in);
  // Run 1 is eager, run 2 captures the CUDA Graph, runs 3+ replay it: all must agree.
  std::vector<std::vector<float>> first;
  for (int r = 0; r < 4; ++r) {
    auto got = gpu.run(in);
    ASSERT_EQ(got.size(), want.size());
    const char* names[] = {"m", "sel", "rms"};
    for (size_t o = 0; o < got.size(); ++o) expect_near_all(got[o], want[o], kTol, names[o]);
    if (r == 0) first = got;
    else EXPECT_EQ(got, first) << "run " << r << " differs from run 0 (graph replay must repeat bit for bit)";
  }
  // New inputs through the replayed graph.
  in["x"] = randoms(size_t(B * S * 64), 8);
  auto want2 = cpu.run(in), got2 = gpu.run(in);
  for (size_t o = 0; o < got2.size(); ++o) expect_near_all(got2[o], want2[o], kTol, "second input");
}

TEST(CudaBackend, CloneAndSharedParams) {
  REQUIRE_CUDA();
  Graph g = block_graph(1, 8);
  CompiledGraph a = Session(Device::Cuda).compile(g);
  set_block_params(a);
  std::map<std::string, std::vector<float>> in{{"x", randoms(8 * 64, 9)}, {"idx", {1, 2, 3}}};
  auto ra = a.run(in);
  CompiledGraph b = a.clone();
  EXPECT_EQ(b.run(in), ra);
  CompiledGraph c = Session(Device::Cuda).compile(g);
  c.share_params_from(a);
  EXPECT_EQ(c.run(in), ra);
  a.set_param("w", randoms(64 * 64, 4));  // shared by c, not by the clone b
  auto ra2 = a.run(in);
  EXPECT_EQ(c.run(in), ra2);
  EXPECT_EQ(b.run(in), ra);
  EXPECT_NE(ra2, ra);
}

TEST(CudaBackend, DeviceErrorNamesTheNodeAndTheExecutableStaysUsable) {
  REQUIRE_CUDA();
  Graph g = block_graph(1, 8);
  CompiledGraph net = Session(Device::Cuda).compile(g);
  set_block_params(net);
  std::map<std::string, std::vector<float>> good{{"x", randoms(8 * 64, 10)}, {"idx", {0, 1, 2}}};
  auto ok = net.run(good);
  for (int attempt = 0; attempt < 2; ++attempt) {  // eager, then through the captured graph
    auto bad = good;
    bad["idx"] = {0, 99, 1};
    try {
      net.run(bad);
      FAIL() << "an index out of range ran";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::InvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find("gather"), std::string::npos) << e.what();
    }
    EXPECT_EQ(net.run(good), ok);
  }
}

// The block graph's feeds as typed tensors: x as f32, the gather indices as i64 (the
// input's own type; typed runs convert no integer inputs).
std::map<std::string, TypedTensor> typed_feeds(const std::vector<float>& x, const std::vector<int64_t>& idx) {
  std::map<std::string, TypedTensor> t;
  TypedTensor a;
  a.dtype = DType::F32;
  a.bytes.resize(x.size() * sizeof(float));
  std::memcpy(a.bytes.data(), x.data(), a.bytes.size());
  TypedTensor b;
  b.dtype = DType::I64;
  b.bytes.resize(idx.size() * sizeof(int64_t));
  std::memcpy(b.bytes.data(), idx.data(), b.bytes.size());
  t["x"] = std::move(a);
  t["idx"] = std::move(b);
  return t;
}

// Pipelined runs: several commits queue back to back on the stream (inputs of run i+1
// uploaded behind run i, outputs staged in pinned memory) and give, bit for bit, what one
// run_typed per input set gives; a device error in one of them is raised by sync_pending,
// which drops the queue, and the graph keeps running.
TEST(CudaBackend, PipelinedRunsMatchSequentialOnesAndErrorsSurfaceAtSync) {
  REQUIRE_CUDA();
  Graph g = block_graph(2, 8);
  CompiledGraph net = Session(Device::Cuda).compile(g), ref = Session(Device::Cuda).compile(g);
  set_block_params(net);
  set_block_params(ref);
  std::vector<std::map<std::string, TypedTensor>> runs;
  for (uint32_t r = 0; r < 4; ++r)
    runs.push_back(typed_feeds(randoms(2 * 8 * 64, 20 + r), {int64_t(r), 1, 2}));
  auto got = net.run_pipelined(runs);
  ASSERT_EQ(got.size(), runs.size());
  for (size_t r = 0; r < runs.size(); ++r) {
    auto want = ref.run_typed(runs[r]);
    ASSERT_EQ(got[r].size(), want.size());
    for (size_t o = 0; o < want.size(); ++o) EXPECT_EQ(got[r][o].bytes, want[o].bytes) << "run " << r << " output " << o;
  }
  auto bad = runs;
  bad[1] = typed_feeds(randoms(2 * 8 * 64, 30), {0, 99, 1});
  for (const auto& r : bad) net.commit_no_wait(r);
  try {
    net.sync_pending();
    FAIL() << "an index out of range ran";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::InvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("gather"), std::string::npos) << e.what();
  }
  EXPECT_EQ(net.pending_runs(), 0u);
  EXPECT_EQ(net.run_typed(runs[2])[0].bytes, ref.run_typed(runs[2])[0].bytes);
}

// Graphs that fold to constants (what the ONNX runner makes when shape inputs are bound):
// the output is a constant, or an op of constants only.
TEST(CudaBackend, ConstantOutputs) {
  REQUIRE_CUDA();
  Graph g("consts");
  Value x = g.input("x", Shape({2, 3}, DType::F32));
  Value c = g.expand(g.scalar(1.5, DType::F32), {4, 3, 2});
  const std::vector<float> mv{1, -1, 2, -2, 3, -3};
  std::vector<uint8_t> mb(mv.size() * sizeof(float));
  std::memcpy(mb.data(), mv.data(), mb.size());
  Value mask = g.gt(g.constant(Shape({2, 3}, DType::F32), Blob(mb)), g.scalar(0.0, DType::F32));
  g.set_outputs({c, g.where(mask, x, g.scalar(0.0, DType::F32))}, {"c", "w"});
  for (int r = 0; r < 3; ++r) {
    CompiledGraph net = Session(Device::Cuda).compile(g);
    auto out = net.run({{"x", {1, 2, 3, 4, 5, 6}}});
    EXPECT_EQ(out[0], std::vector<float>(24, 1.5f)) << "run " << r;
    EXPECT_EQ(out[1], (std::vector<float>{1, 0, 3, 0, 5, 0})) << "run " << r;
  }
}

}  // namespace
}  // namespace rlx
