// Runtime behaviours end to end on real model graphs: release_scratch, clones running
// concurrently, shared weights, the KV-cache handle pattern and the active extent.
#include <thread>

#include "e2e_models.h"
#include "e2e_ref.h"

namespace rlx::e2e {
namespace {

void expect_all_bitwise(const std::vector<T>& a, const std::vector<T>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t o = 0; o < a.size(); ++o) expect_bitwise_equal(a[o], b[o], what + " output " + std::to_string(o));
}

struct Block {
  Graph g = decoder_block();
  Feeds params = random_params(g, 11);
  Feeds in1 = decoder_inputs(12), in2 = decoder_inputs(13);
};

TEST(RuntimeE2e, ReleaseScratchThenIdenticalResults) {
  Block b;
  CompiledGraph net = compile_e2e(b.g, default_options());
  set_params(net, b.params);
  const std::vector<T> first = run_net(net, b.in1);
  net.release_scratch();
  expect_all_bitwise(run_net(net, b.in1), first, "after release_scratch");
  const std::vector<T> other = run_net(net, b.in2);
  net.release_scratch();
  net.release_scratch();
  expect_all_bitwise(run_net(net, b.in2), other, "second input after two releases");
  expect_all_bitwise(run_net(net, b.in1), first, "first input again");
}

TEST(RuntimeE2e, ClonesRunConcurrentlyWithIdenticalResults) {
  Block b;
  CompiledGraph net = compile_e2e(b.g, default_options());
  set_params(net, b.params);
  const std::vector<T> want1 = run_net(net, b.in1), want2 = run_net(net, b.in2);
  CompiledGraph c = net.clone();
  std::vector<T> got_a, got_b;
  bool same_a = true, same_b = true;
  auto loop = [](CompiledGraph& n, const Feeds& in, const std::vector<T>& want, bool& same, std::vector<T>& last) {
    for (int i = 0; i < 25; ++i) {
      last = run_net(n, in);
      for (size_t o = 0; o < last.size(); ++o)
        if (last[o].v != want[o].v) same = false;
    }
  };
  std::thread ta([&] { loop(net, b.in1, want1, same_a, got_a); });
  std::thread tb([&] { loop(c, b.in2, want2, same_b, got_b); });
  ta.join();
  tb.join();
  EXPECT_TRUE(same_a) << "the original changed its results while the clone ran";
  EXPECT_TRUE(same_b) << "the clone's results differ from the original's";
  expect_all_bitwise(got_b, want2, "clone");
  // And the other way round: clone on in1 is the original's in1 result.
  expect_all_bitwise(run_net(c, b.in1), want1, "clone on the first input");
}

TEST(RuntimeE2e, SharedParamsSeeEachOthersUpdates) {
  Block b;
  CompiledGraph a = compile_e2e(b.g, default_options());
  // The other net is compiled separately (threads and passes differ), then shares a's weights.
  CompiledGraph s = compile_e2e(b.g, passes_off(default_options(1)));
  set_params(a, b.params);
  s.share_params_from(a);
  const std::vector<T> base = run_net(a, b.in1);
  std::vector<T> shared = run_net(s, b.in1);
  for (size_t o = 0; o < base.size(); ++o) EXPECT_LE(max_rel_diff(shared[o], base[o]), 1e-5);

  // set_param on the original is seen by the sharer ...
  Feeds p2 = random_params(b.g, 99);
  set_params(a, {{"w1", p2["w1"]}});
  const std::vector<T> after = run_net(a, b.in1);
  EXPECT_GT(max_rel_diff(after[0], base[0]), 1e-3) << "changing w1 should change the output";
  shared = run_net(s, b.in1);
  for (size_t o = 0; o < after.size(); ++o) EXPECT_LE(max_rel_diff(shared[o], after[o]), 1e-5);
  // ... and set_param on the sharer by the original.
  set_params(s, {{"wo", p2["wo"]}});
  const std::vector<T> s2 = run_net(s, b.in1), a2 = run_net(a, b.in1);
  EXPECT_GT(max_rel_diff(a2[0], after[0]), 1e-3);
  for (size_t o = 0; o < a2.size(); ++o) EXPECT_LE(max_rel_diff(s2[o], a2[o]), 1e-5);
}

// cache[W, D] is an input and an output: cache' = (concat(cache, x)[n : n + W]) where x
// is [n, D]; y = cache' @ w summed over rows (reads the whole window).
TEST(RuntimeE2e, KvCacheHandleSlidingWindow) {
  const int64_t W = 7, D = 12, n = 2;
  Graph g("kv_window");
  Value cache = g.input("cache", Shape({W, D}, DType::F32));
  Value x = g.input("x", Shape({n, D}, DType::F32));
  Value w = g.param("w", Shape({D, 5}, DType::F32));
  Value next = g.slice(g.concat({cache, g.tanh(x)}, 0), {n}, {n + W}, {0});
  Value y = g.reduce_sum(g.matmul(next, w), {0}, false);
  g.set_outputs({next, y}, {"cache", "y"});
  CompiledGraph net = compile_e2e(g, default_options());
  Rng rng(31);
  T wv = rng.tensor({D, 5}), c0 = rng.tensor({W, D});
  set_params(net, {{"w", wv}});
  net.bind_handle("cache", to_typed(c0));
  T want = c0;
  for (int step = 0; step < 3; ++step) {
    T xs = rng.tensor({n, D}, -2, 2);
    std::vector<T> out = run_net(net, {{"x", xs}});
    T cat = ref::concat({want, ref::map(xs, [](double v) { return std::tanh(v); }, DType::F32)}, 0);
    want = ref::slice(cat, {n, 0}, {1, 1}, {W, D});
    expect_close(out[0], want, 1e-6, 1e-7, "cache output at step " + std::to_string(step));
    expect_close(out[1], ref::reduce(ref::matmul(want, wv), {0}, false, ref::Red::Sum), 2e-5, 2e-6,
                 "y at step " + std::to_string(step));
    expect_close(from_typed(net.read_handle("cache")), want, 1e-6, 1e-7, "handle at step " + std::to_string(step));
  }
}

// Row-wise graph: every op maps row r of x to row r of the outputs.
Graph rowwise_graph(int64_t rows, int64_t d, int64_t h) {
  Graph g("rowwise");
  Value x = g.input("x", Shape({rows, d}, DType::F32));
  Value s = g.param("s", Shape({d}, DType::F32)), b = g.param("b", Shape({d}, DType::F32));
  Value w = g.param("w", Shape({d, h}, DType::F32)), w2 = g.param("w2", Shape({h, d}, DType::F32));
  Value n = g.layer_norm(x, s, b);
  Value u = g.gelu(g.matmul(n, w));
  Value y = g.add(x, g.matmul(u, w2));
  g.set_outputs({y, g.softmax(u, -1), g.rms_norm(y, s)}, {"y", "p", "r"});
  return g;
}

TEST(RuntimeE2e, ActiveExtentLeadingRowsMatchFullRun) {
  const int64_t R = 16, d = 24, h = 40;
  Graph g = rowwise_graph(R, d, h);
  CompiledGraph net = compile_e2e(g, default_options());
  set_params(net, random_params(g, 41));
  for (int64_t actual : {int64_t(1), int64_t(5), int64_t(11), R}) {
    SCOPED_TRACE("actual " + std::to_string(actual));
    Feeds in = random_inputs(g, uint32_t(50 + actual));
    net.set_active_extent(R, R);
    const std::vector<T> full = run_net(net, in);
    net.set_active_extent(actual, R);
    const std::vector<T> part = run_net(net, in);
    for (size_t o = 0; o < full.size(); ++o) {
      const int64_t cols = full[o].dims[1];
      T a = full[o], p = part[o];
      a.v.resize(size_t(actual * cols));
      p.v.resize(size_t(actual * cols));
      a.dims[0] = p.dims[0] = actual;
      expect_bitwise_equal(p, a, "output " + std::to_string(o));
    }
  }
  net.set_active_extent(R, R);
  Feeds in = random_inputs(g, 99);
  const std::vector<T> again = run_net(net, in);
  CompiledGraph fresh = compile_e2e(g, default_options());
  set_params(fresh, random_params(g, 41));
  expect_all_bitwise(again, run_net(fresh, in), "full extent restored");
}

TEST(RuntimeE2e, RunSlotsAndRunAgreeWithRunTyped) {
  Block b;
  CompiledGraph net = compile_e2e(b.g, default_options());
  set_params(net, b.params);
  const std::vector<T> typed = run_net(net, b.in1);
  std::map<std::string, std::vector<float>> f32;
  for (const auto& [name, t] : b.in1) f32[name] = std::vector<float>(t.v.begin(), t.v.end());
  std::vector<std::vector<float>> plain = net.run(f32);
  ASSERT_EQ(plain.size(), typed.size());
  for (size_t o = 0; o < plain.size(); ++o)
    expect_bitwise_equal(T(typed[o].dims, std::vector<double>(plain[o].begin(), plain[o].end())), typed[o], "run()");
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<std::span<const uint8_t>> spans;
  for (const std::string& name : net.input_names()) bytes.push_back(to_bytes(b.in1.at(name)));
  for (const auto& v : bytes) spans.emplace_back(v);
  std::vector<TensorView> views = net.run_slots(spans);
  ASSERT_EQ(views.size(), typed.size());
  for (size_t o = 0; o < views.size(); ++o) {
    ASSERT_EQ(views[o].dtype, DType::F32);
    std::vector<float> v(views[o].bytes / 4);
    std::memcpy(v.data(), views[o].data, views[o].bytes);
    expect_bitwise_equal(T(typed[o].dims, std::vector<double>(v.begin(), v.end())), typed[o], "run_slots()");
  }
}

}  // namespace
}  // namespace rlx::e2e
