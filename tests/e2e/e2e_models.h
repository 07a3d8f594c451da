// Model-sized graphs for the end-to-end tests: the shared builders of
// tests/memplan/test_graphs.h at small sizes, seeded weights scaled like a trained
// network's (so activations stay O(1) through many layers), and a small transformer
// block with rms_norm, rotary, GQA attention and a fused gelu MLP.
#pragma once
#include <cmath>
#include <string>

#include "e2e_util.h"
#include "memplan/test_graphs.h"

namespace rlx::e2e {

// Weights for every param of `g`: matrices and conv kernels ~ U(-1,1)/sqrt(fan_in),
// norm gains ~ 1 +- 0.1, biases and other vectors ~ U(-0.1, 0.1).
inline Feeds random_params(const Graph& g, uint32_t seed) {
  Rng rng(seed);
  Feeds p;
  for (int32_t id : g.param_nodes()) {
    const Node& n = g.node(id);
    const std::string& name = n.attr<LeafAttrs>().name;
    const std::vector<int64_t> d = n.outputs[0].static_dims();
    const DType dt = n.outputs[0].dtype();
    const bool gain = name.size() > 2 && (name.ends_with(".g") || name.ends_with("norm"));
    if (d.size() >= 2) {
      int64_t fan_in = d.size() == 4 ? d[1] * d[2] * d[3] : d[0];
      const double s = 1.0 / std::sqrt(double(std::max<int64_t>(fan_in, 1)));
      p[name] = rng.tensor(d, -s * std::sqrt(3.0), s * std::sqrt(3.0), dt);
    } else if (gain) {
      p[name] = rng.tensor(d, 0.9, 1.1, dt);
    } else {
      p[name] = rng.tensor(d, -0.1, 0.1, dt);
    }
  }
  return p;
}

inline Feeds random_inputs(const Graph& g, uint32_t seed, double lo = -1, double hi = 1) {
  Rng rng(seed);
  Feeds in;
  for (int32_t id : g.input_nodes()) {
    const Node& n = g.node(id);
    in[n.attr<LeafAttrs>().name] = rng.tensor(n.outputs[0].static_dims(), lo, hi, n.outputs[0].dtype());
  }
  return in;
}

inline Graph small_encoder(int layers) {
  test_graphs::TransformerConfig c;
  c.layers = layers;
  c.seq = 24, c.hidden = 48, c.heads = 4, c.mlp = 96;
  return test_graphs::transformer_encoder(c);
}

inline Graph small_cnn() {
  test_graphs::CnnConfig c;
  c.image = 20;
  c.stage_channels = {8, 16, 24};
  c.blocks_per_stage = 1;
  c.batch = 2;
  return test_graphs::residual_cnn(c);
}

// A pre-norm decoder block on x[1, seq, hidden]: rms_norm, q/k/v projections, rotary on
// q and k, GQA causal attention, output projection + residual, rms_norm, gelu MLP
// (matmul + bias + gelu, a fused_matmul candidate) + residual.
inline Graph decoder_block(int64_t seq = 11, int64_t hidden = 32, int64_t heads = 4, int64_t kv_heads = 2,
                           int64_t mlp = 72) {
  Graph g("decoder_block");
  const int64_t d = hidden / heads;
  auto p = [&](const std::string& name, std::vector<int64_t> dims) { return g.param(name, Shape(dims, DType::F32)); };
  Value x = g.input("x", Shape({1, seq, hidden}, DType::F32));
  Value cos = g.input("cos", Shape({seq, d / 2}, DType::F32));
  Value sin = g.input("sin", Shape({seq, d / 2}, DType::F32));
  Value h = g.rms_norm(x, p("attn_norm", {hidden}));
  auto heads_of = [&](Value v, int64_t n) { return g.transpose(g.reshape(v, {1, seq, n, d}), {0, 2, 1, 3}); };
  Value q = heads_of(g.matmul(h, p("wq", {hidden, heads * d})), heads);
  Value k = heads_of(g.matmul(h, p("wk", {hidden, kv_heads * d})), kv_heads);
  Value v = heads_of(g.matmul(h, p("wv", {hidden, kv_heads * d})), kv_heads);
  q = g.rotary(q, cos, sin);
  k = g.rotary(k, cos, sin);
  Value a = g.attention(q, k, v, {}, true);
  Value merged = g.reshape(g.transpose(a, {0, 2, 1, 3}), {1, seq, hidden});
  Value x1 = g.add(x, g.matmul(merged, p("wo", {hidden, hidden})));
  Value h2 = g.rms_norm(x1, p("mlp_norm", {hidden}));
  Value up = g.gelu(g.add(g.matmul(h2, p("w1", {hidden, mlp})), p("b1", {mlp})));
  Value y = g.add(x1, g.add(g.matmul(up, p("w2", {mlp, hidden})), p("b2", {hidden})));
  g.set_outputs({y, g.softmax(g.reduce_mean(y, {2}, false), -1)}, {"y", "p"});
  return g;
}

inline Feeds rope_tables(int64_t seq, int64_t half) {
  T c({seq, half}), s({seq, half});
  for (int64_t p = 0; p < seq; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double th = double(p) * std::pow(10000.0, -double(i) / double(half));
      c.v[size_t(p * half + i)] = double(float(std::cos(th)));
      s.v[size_t(p * half + i)] = double(float(std::sin(th)));
    }
  return {{"cos", c}, {"sin", s}};
}

inline Feeds decoder_inputs(uint32_t seed, int64_t seq = 11, int64_t hidden = 32, int64_t heads = 4) {
  Feeds in = rope_tables(seq, hidden / heads / 2);
  in["x"] = Rng(seed).tensor({1, seq, hidden}, -1, 1);
  return in;
}

}  // namespace rlx::e2e
