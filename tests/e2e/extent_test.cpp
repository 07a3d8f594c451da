// Active extent on row-wise graphs that use every op family along a leading row dim
// R: after set_active_extent(actual, R), the leading `actual` rows of every output are
// bit-identical to a full run (rows past `actual` are not compared). No param or
// other tensor has a leading dim equal to R, so only the row dim is truncated.
#include <cstring>

#include "e2e_models.h"

namespace rlx::e2e {
namespace {

constexpr int64_t R = 13;

// Everything except attention (next graph): norms, matmul with a
// fusable epilogue, softmaxes, concat/split/slice/transpose/gather/pad/tile/expand,
// where, reductions, arg-reductions, topk, conv and pools over a batch of R, casts.
Graph rowwise_ops() {
  Graph g("rowwise_ops");
  auto p = [&](const std::string& n, std::vector<int64_t> d) { return g.param(n, Shape(d, DType::F32)); };
  Value x = g.input("x", Shape({R, 24}, DType::F32));
  Value idx = g.input("idx", Shape({5}, DType::I64));
  Value x3 = g.reshape(x, {R, 4, 6});
  Value a1 = g.layer_norm(x, p("ln.s", {24}), p("ln.b", {24}));
  Value a2 = g.gelu(g.add(g.matmul(a1, p("w", {24, 20})), p("b", {20})));
  Value c = g.concat({a2, x}, 1);
  auto sp = g.split(c, 1, {10, 34});
  Value img = g.reshape(x, {R, 2, 3, 4});
  Value conv = g.conv2d(img, p("cw", {5, 2, 2, 2}), p("cb", {5}), {1, 1}, {1, 0, 0, 1});
  Value mx = g.reduce_max(x, {1}, true);
  auto [tv, ti] = g.topk(x, 3, 1);
  std::vector<Value> outs{
      g.softmax(a2, -1), g.log_softmax(a2, 1), g.rms_norm(a2, p("rms.s", {20})), sp[0], g.neg(sp[1]),
      g.slice(c, {3}, {40}, {1}, {2}), g.transpose(x3, {0, 2, 1}), g.gather(x, idx, 1), g.pad(x, {0, 2, 0, 3}),
      g.tile(x3, {1, 2, 1}), g.expand(mx, {R, 7}),
      g.where(g.gt(x, g.scalar(0, DType::F32)), x, g.mul(x, g.scalar(0.1, DType::F32))),
      g.reduce_sum(x, {1}, false), g.reduce_mean(x3, {1, 2}, true), g.argmax(x, 1), tv, ti,
      conv, g.max_pool2d(img, {2, 2}, {1, 1}), g.avg_pool2d(img, {2, 3}, {1, 1}, {0, 1, 0, 1}, true),
      g.cast(g.cast(a2, DType::F16), DType::F32), g.exp(g.tanh(g.mul(x, x))),
      g.transpose(g.reshape(a2, {R, 4, 5}), {0, 2, 1})};
  g.set_outputs(outs);
  return g;
}

// Attention and rotary with batch R.
Graph rowwise_attention() {
  Graph g("rowwise_attention");
  Value x = g.input("x", Shape({R, 2, 5, 8}, DType::F32));
  Value kv = g.input("kv", Shape({R, 1, 7, 8}, DType::F32));
  Value cos = g.input("cos", Shape({5, 4}, DType::F32)), sin = g.input("sin", Shape({5, 4}, DType::F32));
  Value q = g.rotary(x, cos, sin);
  g.set_outputs({g.attention(q, kv, kv, {}, true), g.attention(q, kv, kv), q});
  return g;
}

// `expect_truncation`: most outputs come from kernels that honour the extent.
void check_extent(const Graph& g, const Feeds& base, const Feeds& params, bool expect_truncation) {
  CompiledGraph net = compile_e2e(g, default_options());
  set_params(net, params);
  for (int64_t actual : {int64_t(1), int64_t(4), int64_t(12), R}) {
    SCOPED_TRACE(g.name() + ": actual " + std::to_string(actual));
    Feeds in = base;
    // Fresh data per extent so stale rows from an earlier run cannot pass for results.
    Rng rng(static_cast<uint32_t>(actual));
    for (auto& [name, t] : in)
      if (t.dtype == DType::F32 && name != "cos" && name != "sin")
        for (double& v : t.v) v = round_to(rng.uniform(-2, 2), DType::F32);
    net.set_active_extent(R, R);
    const std::vector<T> full = run_net(net, in);
    net.set_active_extent(actual, R);
    const std::vector<T> part = run_net(net, in);
    ASSERT_EQ(full.size(), part.size());
    int truncated = 0;  // outputs whose rows past `actual` were not recomputed
    for (size_t o = 0; o < full.size(); ++o) {
      ASSERT_EQ(full[o].dims.at(0), R) << "output " << o << " should lead with the row dim";
      const size_t keep = size_t(actual * (full[o].numel() / R));
      T a = full[o], b = part[o];
      for (size_t i = keep; i < a.v.size(); ++i)
        if (std::memcmp(&a.v[i], &b.v[i], sizeof(double)) != 0) {
          ++truncated;
          break;
        }
      a.v.resize(keep);
      b.v.resize(keep);
      a.dims[0] = b.dims[0] = actual;
      expect_bitwise_equal(b, a, "output " + std::to_string(o));
    }
    // Only a backend that says it skips rows (capabilities().active_extent) must have; one
    // that computes every row (CUDA) meets the contract with full runs.
    if (expect_truncation && actual < R && net.capabilities().active_extent) {
      EXPECT_GT(truncated, int(full.size()) / 2) << "the extent was not applied";
    }
  }
}

TEST(ActiveExtent, EveryOpFamilyAlongTheRowDim) {
  Graph g = rowwise_ops();
  Feeds in = random_inputs(g, 1);
  in["idx"] = T({5}, {23, 0, 7, -1, 7}, DType::I64);
  check_extent(g, in, random_params(g, 2), true);
}

TEST(ActiveExtent, AttentionAndRotaryOverRows) {
  Graph g = rowwise_attention();
  Feeds in = random_inputs(g, 3);
  Feeds rope = rope_tables(5, 4);
  in["cos"] = rope["cos"], in["sin"] = rope["sin"];
  // Attention and rotary run in full (their kernels do not take the extent).
  check_extent(g, in, {}, false);
}

}  // namespace
}  // namespace rlx::e2e
