// More runtime state end to end: handles across release_scratch, clones and precision
// policies; params as outputs; copy_params_from between different graphs;
// run_read_outputs; typed half-precision feeds.
#include <limits>
#include <thread>

#include "e2e_models.h"
#include "e2e_ref.h"

namespace rlx::e2e {
namespace {

// A decoder step with a KV cache: k_cache/v_cache [1, 2, W, 8] are inputs and outputs
// (shifted window + the new step's k/v), attention of the step's q over the window.
Graph kv_step_graph(int64_t W) {
  Graph g("kv_step");
  Value x = g.input("x", Shape({1, 1, 16}, DType::F32));
  Value kc = g.input("k_cache", Shape({1, 2, W, 8}, DType::F32));
  Value vc = g.input("v_cache", Shape({1, 2, W, 8}, DType::F32));
  auto heads = [&](Value v, int64_t h) { return g.transpose(g.reshape(v, {1, 1, h, 8}), {0, 2, 1, 3}); };
  Value q = heads(g.matmul(x, g.param("wq", Shape({16, 32}, DType::F32))), 4);
  Value k = heads(g.matmul(x, g.param("wk", Shape({16, 16}, DType::F32))), 2);
  Value v = heads(g.matmul(x, g.param("wv", Shape({16, 16}, DType::F32))), 2);
  Value k2 = g.slice(g.concat({kc, k}, 2), {1}, {W + 1}, {2});
  Value v2 = g.slice(g.concat({vc, v}, 2), {1}, {W + 1}, {2});
  Value a = g.reshape(g.transpose(g.attention(q, k2, v2), {0, 2, 1, 3}), {1, 1, 32});
  g.set_outputs({g.matmul(a, g.param("wo", Shape({32, 16}, DType::F32))), k2, v2}, {"y", "k_cache", "v_cache"});
  return g;
}

// Reference of one step: the same graph interpreted with caches given explicitly.
struct KvRef {
  Graph g;
  Feeds params;
  T kc, vc;
};

std::vector<T> ref_step(const KvRef& r, const T& x) {
  CompiledGraph net = compile_e2e(r.g, passes_off(default_options(1)));
  set_params(net, r.params);
  return run_net(net, {{"x", x}, {"k_cache", r.kc}, {"v_cache", r.vc}});
}

void kv_steps(Precision p, double tol) {
  const int64_t W = 6;
  KvRef r{kv_step_graph(W), {}, {}, {}};
  r.params = random_params(r.g, 1);
  Rng rng(2);
  r.kc = rng.tensor({1, 2, W, 8});
  r.vc = rng.tensor({1, 2, W, 8});
  CompileOptions o = default_options();
  o.precision = p;
  CompiledGraph net = compile_e2e(r.g, o);
  set_params(net, r.params);
  net.bind_handle("k_cache", to_typed(r.kc));
  net.bind_handle("v_cache", to_typed(r.vc));
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    T x = rng.tensor({1, 1, 16});
    std::vector<T> want = ref_step(r, x);
    if (step == 1) net.release_scratch();  // handles live in persistent memory
    if (step == 2) {
      CompiledGraph c = net.clone();  // the clone carries the caches
      expect_close(run_net(c, {{"x", x}})[0], want[0], tol, tol, "clone y");
    }
    std::vector<T> got = run_net(net, {{"x", x}});
    expect_close(got[0], want[0], tol, tol, "y");
    expect_close(from_typed(net.read_handle("k_cache")), want[1], tol, tol, "k_cache");
    expect_close(from_typed(net.read_handle("v_cache")), want[2], tol, tol, "v_cache");
    r.kc = want[1];
    r.vc = want[2];
  }
}

TEST(RuntimeState, KvCacheDecodeStepsF32) { kv_steps(Precision::F32, 1e-5); }
TEST(RuntimeState, KvCacheDecodeStepsF16Policy) { kv_steps(Precision::F16, 1e-2); }
TEST(RuntimeState, KvCacheDecodeStepsBF16Policy) { kv_steps(Precision::BF16, 5e-2); }

TEST(RuntimeState, ParamsAndConstantsAsOutputs) {
  Graph g("param_outputs");
  Value x = g.input("x", Shape({3, 4}, DType::F32));
  Value w = g.param("w", Shape({3, 4}, DType::F32));
  Value h = g.param("h", Shape({4}, DType::F16));
  g.set_outputs({w, g.add(x, w), g.reshape(w, {12}), h, g.transpose(w, {1, 0})}, {"w", "sum", "flat", "h", "wt"});
  for (const CompileOptions& o : {default_options(), passes_off(default_options(1))}) {
    CompiledGraph net = compile_e2e(g, o);
    Rng rng(3);
    T wv = rng.tensor({3, 4}), hv = rng.tensor({4}, -1, 1, DType::F16), xv = rng.tensor({3, 4});
    set_params(net, {{"w", wv}, {"h", hv}});
    std::vector<T> out = run_net(net, {{"x", xv}});
    expect_close(out[0], wv, 0, 0, "w");
    expect_close(out[1], ref::map(ref::binary(xv, wv, std::plus<double>(), DType::F32),
                                  [](double v) { return double(float(v)); }, DType::F32), 0, 0, "sum");
    expect_close(out[2], T({12}, wv.v), 0, 0, "flat");
    expect_close(out[3], hv, 0, 0, "h");
    expect_close(out[4], ref::transpose(wv, {1, 0}), 0, 0, "wt");
  }
}

TEST(RuntimeState, CopyParamsBetweenDifferentGraphs) {
  // Two graphs over the same params (a full block and a variant with another seq).
  Graph a = decoder_block(11), b = decoder_block(5);
  Feeds p = random_params(a, 4);
  CompiledGraph na = compile_e2e(a), nb = compile_e2e(b, passes_off(default_options(1)));
  set_params(na, p);
  nb.copy_params_from(na);
  Feeds in = decoder_inputs(5, 5);
  CompiledGraph ref = compile_e2e(b);
  set_params(ref, p);
  const std::vector<T> want = run_net(ref, in);
  const std::vector<T> got = run_net(nb, in);
  for (size_t o = 0; o < got.size(); ++o) EXPECT_LE(max_rel_diff(got[o], want[o]), 1e-5) << o;
  // Copied, not shared: changing na leaves nb alone.
  set_params(na, random_params(a, 99));
  const std::vector<T> again = run_net(nb, in);
  for (size_t o = 0; o < got.size(); ++o) expect_bitwise_equal(again[o], got[o], "after changing the source");
}

TEST(RuntimeState, RunReadOutputsAndTypedHalfFeeds) {
  Graph g = decoder_block();
  Feeds p = random_params(g, 7), in = decoder_inputs(8);
  CompiledGraph net = compile_e2e(g);
  set_params(net, p);
  const std::vector<T> full = run_net(net, in);
  std::map<std::string, TypedTensor> typed;
  for (const auto& [name, t] : in) typed.emplace(name, to_typed(t));
  std::vector<TypedTensor> only = net.run_read_outputs(typed, {1});
  ASSERT_EQ(only.size(), 1u);
  expect_bitwise_equal(from_typed(only[0]), full[1], "run_read_outputs(1)");
  // f16 data for the f32 input "x" widens at the boundary.
  T xh = in["x"];
  xh.dtype = DType::F16;
  xh = T(xh.dims, xh.v, DType::F16);
  for (double& v : xh.v) v = round_to(v, DType::F16);
  Feeds in_h = in;
  in_h["x"] = xh;
  T xr = xh;
  xr.dtype = DType::F32;
  Feeds in_r = in;
  in_r["x"] = xr;
  const std::vector<T> a = run_net(net, in_h), b = run_net(net, in_r);
  for (size_t o = 0; o < a.size(); ++o) expect_bitwise_equal(a[o], b[o], "f16 feed vs the same values in f32");
}

// Different graphs compiled and run at the same time from several threads (each net
// has its own pool; kernels keep per-thread scratch): results equal sequential runs.
TEST(RuntimeState, ConcurrentCompileAndRunOfDifferentGraphs) {
  std::vector<Graph> graphs{decoder_block(), small_cnn(), small_encoder(1), test_graphs::mlp(8, {40, 64, 10})};
  std::vector<Feeds> ins, params;
  std::vector<std::vector<T>> want;
  for (size_t i = 0; i < graphs.size(); ++i) {
    ins.push_back(graphs[i].name() == "decoder_block" ? decoder_inputs(uint32_t(i)) : random_inputs(graphs[i], uint32_t(i)));
    params.push_back(random_params(graphs[i], uint32_t(i + 10)));
    CompiledGraph net = compile_e2e(graphs[i]);
    set_params(net, params[i]);
    want.push_back(run_net(net, ins[i]));
  }
  std::vector<int> ok(graphs.size(), 1);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < graphs.size(); ++i)
    threads.emplace_back([&, i] {
      for (int rep = 0; rep < 3; ++rep) {
        CompiledGraph net = compile_e2e(graphs[i]);
        set_params(net, params[i]);
        for (int r = 0; r < 5; ++r) {
          std::vector<T> got = run_net(net, ins[i]);
          for (size_t o = 0; o < got.size(); ++o)
            if (got[o].v != want[i][o].v) ok[i] = 0;
        }
      }
    });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < graphs.size(); ++i) EXPECT_TRUE(ok[i]) << graphs[i].name() << " differs when run concurrently";
}

// A kernel error at run time (gather index out of range) is an rlx::Error naming the
// node, and the net runs normally afterwards.
TEST(RuntimeState, KernelErrorLeavesTheNetUsable) {
  Graph g("gather_oob");
  Value x = g.input("x", Shape({5, 3}, DType::F32));
  Value idx = g.input("idx", Shape({2}, DType::I64));
  g.set_outputs({g.relu(g.gather(x, idx, 0))});
  CompiledGraph net = compile_e2e(g);
  T xv = Rng(1).tensor({5, 3});
  EXPECT_THROW(run_net(net, {{"x", xv}, {"idx", T({2}, {1, 5}, DType::I64)}}), Error);
  EXPECT_THROW(run_net(net, {{"x", xv}, {"idx", T({2}, {-6, 0}, DType::I64)}}), Error);
  T idx_ok({2}, {4, -5}, DType::I64);
  const T want = ref::map(ref::gather(xv, idx_ok, 0), [](double v) { return v < 0 ? 0.0 : v; }, DType::F32);
  expect_close(run_net(net, {{"x", xv}, {"idx", idx_ok}})[0], want, 0, 0, "after the errors");
}

// cache_write on a handle: the graph input kc is read by nothing else, so the write lands in
// the handle's own storage (the device's, on CUDA) and the rows stay for the next run;
// read_handle_range brings single rows back. Exact: the op copies bytes.
void cache_write_handle(DType dt) {
  const int64_t B = 2, H = 2, C = 5, Tn = 2, D = 3;
  Graph g("cache_write_handle");
  Value kc = g.input("kc", Shape({B, H, C, D}, dt));
  Value rows = g.input("rows", Shape({B, H, Tn, D}, dt));
  Value past = g.input("past", Shape({B}, DType::I64));
  g.set_outputs({g.reduce_sum(g.cast(g.cache_write(kc, rows, past), DType::F32), {0, 1, 2, 3}, false)}, {"sum"});
  CompiledGraph net = compile_e2e(g);
  T cache({B, H, C, D}, dt);  // zeros
  net.bind_handle("kc", to_typed(cache));
  Rng rng(5);
  const std::vector<std::vector<double>> pasts{{0, 1}, {2, 3}};
  for (const auto& pv : pasts) {
    T r = rng.tensor({B, H, Tn, D});
    if (dt == DType::F16)
      for (double& x : r.v) x = f16_to_f32(f32_to_f16(float(x)));
    r.dtype = dt;
    for (int64_t bh = 0; bh < B * H; ++bh)
      for (int64_t t = 0; t < Tn; ++t)
        for (int64_t e = 0; e < D; ++e)
          cache.v[size_t((bh * C + int64_t(pv[size_t(bh / H)]) + t) * D + e)] = r.v[size_t((bh * Tn + t) * D + e)];
    T got = run_net(net, {{"rows", r}, {"past", T({B}, pv, DType::I64)}})[0];
    // The sum is the kernel's f32 reduction of the 60 cache values: each of the n - 1 adds
    // rounds by at most 2^-24 of a partial sum, so |error| <= (n - 1) * 2^-24 * sum |x|.
    double sum = 0, sum_abs = 0;
    for (double x : cache.v) {
      sum += x;
      sum_abs += std::fabs(x);
    }
    EXPECT_NEAR(got.v[0], sum, double(cache.v.size() - 1) * std::ldexp(1.0, -24) * sum_abs);
  }
  expect_close(from_typed(net.read_handle("kc")), cache, 0, 0, "the handle after two runs");
  // One row, (sequence 1, head 1, position 4), by range.
  const size_t elt = dtype_size(dt), row = size_t(D) * elt, at = size_t((3 * C + 4) * D) * elt;
  std::vector<uint8_t> got(row);
  net.read_handle_range("kc", at, got.data(), row);
  std::vector<uint8_t> want = to_bytes(cache);
  EXPECT_EQ(std::vector<uint8_t>(want.begin() + long(at), want.begin() + long(at + row)), got);
  EXPECT_THROW(net.read_handle_range("kc", want.size() - 1, got.data(), 2), Error);
  // An offset whose end wraps a size_t, and a null pointer with bytes to move: errors, not a
  // crash (the handle's bytes stay as they are).
  const size_t wrap = std::numeric_limits<size_t>::max() - 1;
  EXPECT_THROW(net.read_handle_range("kc", wrap, got.data(), 4), Error);
  EXPECT_THROW(net.write_handle("kc", wrap, got.data(), 4), Error);
  EXPECT_THROW(net.read_handle_range("kc", 0, nullptr, 4), Error);
  EXPECT_THROW(net.write_handle("kc", 0, nullptr, 4), Error);
  EXPECT_NO_THROW(net.write_handle("kc", 0, nullptr, 0));
  expect_close(from_typed(net.read_handle("kc")), cache, 0, 0, "the handle after refused calls");
  // A position past the cache: an error naming the op, and the net stays usable.
  T r = rng.tensor({B, H, Tn, D});
  r.dtype = dt;
  try {
    run_net(net, {{"rows", r}, {"past", T({B}, std::vector<double>{0, 4}, DType::I64)}});
    ADD_FAILURE() << "a row past the cache was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::InvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("cache_write"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(run_net(net, {{"rows", r}, {"past", T({B}, std::vector<double>{0, 0}, DType::I64)}}));
}

TEST(RuntimeState, CacheWriteKeepsRowsInTheHandleF32) { cache_write_handle(DType::F32); }
TEST(RuntimeState, CacheWriteKeepsRowsInTheHandleF16) { cache_write_handle(DType::F16); }

// copy_handle_ranges: the rows one graph wrote into its cache handle, handed to another
// graph's handle (a prompt pass and a decode pass with caches of their own), then the other
// graph appends to them. On the e2e device (CUDA: a device-to-device copy), from another
// backend (the null one: through host memory), and the ranges refused before anything moves.
TEST(RuntimeState, CopyHandleRangesBetweenGraphs) {
  const int64_t H = 2, C = 4, D = 3;
  auto graph = [&](int64_t Tn) {
    Graph g("cache_pass");
    Value kc = g.input("kc", Shape({1, H, C, D}, DType::F32));
    Value rows = g.input("rows", Shape({1, H, Tn, D}, DType::F32));
    Value past = g.input("past", Shape({1}, DType::I64));
    g.set_outputs({g.reduce_sum(g.cache_write(kc, rows, past), {0, 1, 2, 3}, false)}, {"sum"});
    return g;
  };
  CompiledGraph prompt = compile_e2e(graph(2)), step = compile_e2e(graph(1));
  T cache({1, H, C, D});  // zeros
  prompt.bind_handle("kc", to_typed(cache));
  step.bind_handle("kc", to_typed(cache));
  T r({1, H, 2, D});
  for (size_t i = 0; i < r.v.size(); ++i) r.v[i] = double(i + 1);
  run_net(prompt, {{"rows", r}, {"past", T({1}, std::vector<double>{0}, DType::I64)}});
  const size_t row = size_t(D) * 4, head = size_t(C) * row;
  // Positions [0, 2) of each head, the way the engine hands a prompt's rows to its decode pass.
  step.copy_handle_ranges(prompt, {{"kc", 0, "kc", 0, 2 * row}, {"kc", head, "kc", head, 2 * row}});
  for (int64_t h = 0; h < H; ++h)
    for (int64_t t = 0; t < 2; ++t)
      for (int64_t e = 0; e < D; ++e) cache.v[size_t((h * C + t) * D + e)] = r.v[size_t((h * 2 + t) * D + e)];
  expect_close(from_typed(step.read_handle("kc")), cache, 0, 0, "the copied rows");
  T r1({1, H, 1, D}, std::vector<double>{-1, -2, -3, -4, -5, -6});
  run_net(step, {{"rows", r1}, {"past", T({1}, std::vector<double>{2}, DType::I64)}});
  for (int64_t h = 0; h < H; ++h)
    for (int64_t e = 0; e < D; ++e) cache.v[size_t((h * C + 2) * D + e)] = r1.v[size_t(h * D + e)];
  expect_close(from_typed(step.read_handle("kc")), cache, 0, 0, "after the next step");

  // Refused, nothing copied: an unknown handle, a range past the end (in a list whose other
  // range is fine), overlapping ranges within one graph; the graph then still copies.
  auto refused = [&](CompiledGraph& to, const CompiledGraph& from, const std::vector<CompiledGraph::HandleCopy>& c,
                     const char* what) {
    try {
      to.copy_handle_ranges(from, c);
      ADD_FAILURE() << what << ": accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::InvalidArgument) << e.what();
    }
    expect_close(from_typed(step.read_handle("kc")), cache, 0, 0, what);
  };
  const size_t all = size_t(H) * head;
  refused(step, prompt, {{"kv", 0, "kc", 0, row}}, "an unknown handle");
  refused(step, prompt, {{"kc", 0, "kc", 0, row}, {"kc", all - row, "kc", all - row + 4, row}}, "past the end");
  refused(step, step, {{"kc", 0, "kc", row / 2, row}}, "overlapping within one graph");
  refused(step, step, {{"kc", 0, "kc", head, row}, {"kc", row - 4, "kc", head + row, row}}, "two writes overlapping");
  step.copy_handle_ranges(step, {{"kc", 3 * row, "kc", 0, row}});  // position 0 of head 0 to position 3
  for (int64_t e = 0; e < D; ++e) cache.v[size_t(3 * D + e)] = cache.v[size_t(e)];
  expect_close(from_typed(step.read_handle("kc")), cache, 0, 0, "within one graph");

  // Into a graph of another backend (the null one, which computes nothing: its graph only
  // passes the cache through): through host memory.
  Graph pass("cache_through");
  pass.set_outputs({pass.input("kc", Shape({1, H, C, D}, DType::F32))}, {"out"});
  CompiledGraph other = Session(Device::Null).compile(pass);
  other.bind_handle("kc", to_typed(T({1, H, C, D})));
  other.copy_handle_ranges(step, {{"kc", 0, "kc", 0, all}});
  expect_close(from_typed(other.read_handle("kc")), cache, 0, 0, "on another backend");
}

// Where the cache input is read elsewhere too (here: it is also an output), the write may
// not land in it: the result is a copy and the input stays as it was.
TEST(RuntimeState, CacheWriteCopiesWhenTheCacheIsReadElsewhere) {
  Graph g("cache_write_copy");
  Value kc = g.input("kc", Shape({1, 1, 3, 2}, DType::F32));
  Value rows = g.input("rows", Shape({1, 1, 1, 2}, DType::F32));
  Value past = g.input("past", Shape({1}, DType::I64));
  g.set_outputs({g.cache_write(kc, rows, past), kc}, {"written", "kc"});
  CompiledGraph net = compile_e2e(g);
  T c({1, 1, 3, 2}, std::vector<double>{1, 2, 3, 4, 5, 6});
  std::vector<T> out = run_net(net, {{"kc", c}, {"rows", T({1, 1, 1, 2}, std::vector<double>{9, 8})},
                                     {"past", T({1}, std::vector<double>{1}, DType::I64)}});
  expect_close(out[0], T({1, 1, 3, 2}, std::vector<double>{1, 2, 9, 8, 5, 6}), 0, 0, "written");
  expect_close(out[1], c, 0, 0, "the cache input");
}

}  // namespace
}  // namespace rlx::e2e
