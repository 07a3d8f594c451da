// Graph builders shared by tests: realistic model graphs (transformer encoder, deep
// residual CNN, MLP) and small graphs exercising views and edge cases. Header-only so
// any test folder can `#include "memplan/test_graphs.h"` without extra sources.
//
// Params carry no initial data (only types); every builder returns a graph whose
// outputs are set. All shapes are static.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "rlx/graph.h"

namespace rlx::test_graphs {

struct TransformerConfig {
  int layers = 12;
  int64_t seq = 128, hidden = 768, heads = 12, mlp = 3072;
};

// BERT-style post-norm encoder on x[seq, hidden]: per layer q/k/v projections, heads
// split by reshape+transpose, scaled softmax attention, output projection, residual +
// layer_norm, then a gelu MLP with residual + layer_norm.
inline Graph transformer_encoder(const TransformerConfig& c = {}) {
  Graph g("transformer_encoder");
  const int64_t d = c.hidden / c.heads;
  auto p = [&](const std::string& name, std::vector<int64_t> dims) {
    return g.param(name, Shape(std::move(dims), DType::F32));
  };
  Value x = g.input("x", Shape({c.seq, c.hidden}, DType::F32));
  const Value scale = g.scalar(1.0 / std::sqrt(double(d)), DType::F32);
  for (int l = 0; l < c.layers; ++l) {
    const std::string L = "l" + std::to_string(l) + ".";
    auto linear = [&](Value in, const std::string& name, int64_t n_in, int64_t n_out) {
      Value w = p(L + name + ".w", {n_in, n_out});
      Value b = p(L + name + ".b", {n_out});
      return g.add(g.matmul(in, w), b);
    };
    Value q = linear(x, "q", c.hidden, c.hidden);
    Value k = linear(x, "k", c.hidden, c.hidden);
    Value v = linear(x, "v", c.hidden, c.hidden);
    Value qh = g.transpose(g.reshape(q, {c.seq, c.heads, d}), {1, 0, 2});  // [H,S,D]
    Value kh = g.transpose(g.reshape(k, {c.seq, c.heads, d}), {1, 2, 0});  // [H,D,S]
    Value vh = g.transpose(g.reshape(v, {c.seq, c.heads, d}), {1, 0, 2});  // [H,S,D]
    Value scores = g.mul(g.matmul(qh, kh), scale);                         // [H,S,S]
    Value probs = g.softmax(scores, -1);
    Value ctx = g.matmul(probs, vh);                                       // [H,S,D]
    Value merged = g.reshape(g.transpose(ctx, {1, 0, 2}), {c.seq, c.hidden});
    Value attn = linear(merged, "o", c.hidden, c.hidden);
    Value h1 = g.layer_norm(g.add(x, attn), p(L + "ln1.g", {c.hidden}), p(L + "ln1.b", {c.hidden}));
    Value m = g.gelu(linear(h1, "fc1", c.hidden, c.mlp));
    Value m2 = linear(m, "fc2", c.mlp, c.hidden);
    x = g.layer_norm(g.add(h1, m2), p(L + "ln2.g", {c.hidden}), p(L + "ln2.b", {c.hidden}));
  }
  g.set_outputs({x}, {"y"});
  return g;
}

struct CnnConfig {
  int64_t batch = 1, image = 64, in_channels = 3, classes = 10;
  std::vector<int64_t> stage_channels{32, 64, 128, 256};
  int blocks_per_stage = 3;
};

// Residual CNN (NCHW): a 3x3 stem, then per stage a 2x2 max-pool (except the first), a
// 1x1 channel projection, and basic blocks relu(x + conv(relu(conv(x)))); global mean
// pool and a linear classifier. The default has 28 conv2d layers.
inline Graph residual_cnn(const CnnConfig& c = {}) {
  Graph g("residual_cnn");
  int n_conv = 0;
  auto conv = [&](Value x, int64_t cin, int64_t cout, int64_t k) {
    const std::string n = "conv" + std::to_string(n_conv++);
    Value w = g.param(n + ".w", Shape({cout, cin, k, k}, DType::F32));
    Value b = g.param(n + ".b", Shape({cout}, DType::F32));
    const int64_t pad = k / 2;
    return g.conv2d(x, w, b, {1, 1}, {pad, pad, pad, pad});
  };
  Value x = g.input("image", Shape({c.batch, c.in_channels, c.image, c.image}, DType::F32));
  int64_t ch = c.stage_channels.front();
  x = g.relu(conv(x, c.in_channels, ch, 3));
  for (size_t s = 0; s < c.stage_channels.size(); ++s) {
    if (s > 0) x = g.max_pool2d(x, {2, 2}, {2, 2});
    if (c.stage_channels[s] != ch) {
      x = g.relu(conv(x, ch, c.stage_channels[s], 1));
      ch = c.stage_channels[s];
    }
    for (int b = 0; b < c.blocks_per_stage; ++b) {
      Value y = g.relu(conv(x, ch, ch, 3));
      y = conv(y, ch, ch, 3);
      x = g.relu(g.add(x, y));
    }
  }
  Value pooled = g.reshape(g.reduce_mean(x, {2, 3}, true), {c.batch, ch});
  Value fc = g.param("fc.w", Shape({ch, c.classes}, DType::F32));
  Value fb = g.param("fc.b", Shape({c.classes}, DType::F32));
  g.set_outputs({g.add(g.matmul(pooled, fc), fb)}, {"logits"});
  return g;
}

// MLP classifier: x[batch, in] -> hidden layers with relu -> softmax over classes.
inline Graph mlp(int64_t batch = 64, std::vector<int64_t> widths = {784, 1024, 1024, 512, 10}) {
  Graph g("mlp");
  Value x = g.input("x", Shape({batch, widths[0]}, DType::F32));
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    const std::string n = "fc" + std::to_string(i);
    Value w = g.param(n + ".w", Shape({widths[i], widths[i + 1]}, DType::F32));
    Value b = g.param(n + ".b", Shape({widths[i + 1]}, DType::F32));
    x = g.add(g.matmul(x, w), b);
    if (i + 2 < widths.size()) x = g.relu(x);
  }
  g.set_outputs({g.softmax(x, -1)}, {"probs"});
  return g;
}

// Views of an input and of a computed value, a multi-output split that aliases and one
// that does not, and graph outputs that are views. Node names are fixed (tests look
// them up by name); byte offsets of the views are documented next to each.
inline Graph views_and_split() {
  Graph g("views");
  Value x = g.input("x", Shape({4, 6, 8}, DType::F32));               // 768 bytes
  Value y = g.add1(OpKind::Exp, {x}, NoAttrs{}, "y");
  Value r = g.add1(OpKind::Reshape, {y}, ShapeAttrs{{24, 8}}, "r");    // view of y, +0
  Value i = g.add1(OpKind::Identity, {r}, NoAttrs{}, "i");            // view of y, +0
  Value c = g.add1(OpKind::Cast, {i}, CastAttrs{DType::F32}, "c");    // view of y, +0
  Value s1 = g.add1(OpKind::Slice, {c}, SliceAttrs{{4}, {12}, {0}, {}}, "s1");  // +4*8*4 = 128
  Value a = g.add1(OpKind::Relu, {s1}, NoAttrs{}, "a");
  Value s2 = g.add1(OpKind::Slice, {x}, SliceAttrs{{1, 0}, {2, 6}, {0, 1}, {}}, "s2");  // x +192
  Value t = g.add1(OpKind::Transpose, {s2}, TransposeAttrs{{1, 0, 2}}, "t");           // x +192
  Value s3 = g.add1(OpKind::Slice, {x}, SliceAttrs{{0, 0, 2}, {4, 6, 4}, {0, 1, 2}, {}}, "s3");  // copy
  Value n3 = g.add1(OpKind::Neg, {s3}, NoAttrs{}, "n3");
  std::vector<Value> parts = g.add(OpKind::Split, {y}, SplitAttrs{0, {1, 2, 1}}, "split0");  // +0,+192,+576
  Value sum = g.add1(OpKind::Add, {parts[1], parts[1]}, NoAttrs{}, "sum");
  std::vector<Value> cols = g.add(OpKind::Split, {x}, SplitAttrs{1, {2, 4}}, "split1");  // copies
  Value cast16 = g.add1(OpKind::Cast, {s1}, CastAttrs{DType::F16}, "cast16");           // a copy
  g.set_outputs({a, t, n3, parts[2], sum, cols[0], cols[1], cast16},
                {"a", "t", "n3", "p2", "sum", "c0", "c1", "h"});
  return g;
}

// x -> relu -> exp -> neg, all f32[16] (64 bytes each): peak live = x + two temporaries.
inline Graph chain4() {
  Graph g("chain4");
  Value x = g.input("x", Shape({16}, DType::F32));
  Value a = g.relu(x);
  Value b = g.exp(a);
  Value c = g.neg(b);
  g.set_outputs({c});
  return g;
}

// Zero-size tensors next to a normal path.
inline Graph zero_size() {
  Graph g("zero_size");
  Value z = g.input("z", Shape({0, 4}, DType::F32));
  Value x = g.input("x", Shape({2, 4}, DType::F32));
  Value zr = g.relu(z);
  Value zv = g.reshape(zr, {4, 0});
  Value e = g.slice(x, {1}, {1}, {0});  // empty slice of a real tensor
  Value y = g.exp(x);
  g.set_outputs({zr, zv, e, y});
  return g;
}

// The graph's output is its input (no compute at all).
inline Graph output_is_input() {
  Graph g("output_is_input");
  Value x = g.input("x", Shape({3, 5}, DType::F32));
  g.set_outputs({x});
  return g;
}

// An output that later nodes also consume, the same value output twice, an unused
// value, and an output that is a view of a param.
inline Graph output_reused() {
  Graph g("output_reused");
  Value x = g.input("x", Shape({32, 32}, DType::F32));
  Value w = g.param("w", Shape({32, 32}, DType::F32));
  Value a = g.relu(x);
  Value unused = g.exp(a);
  (void)unused;
  Value b = g.matmul(a, w);
  Value c = g.tanh(b);
  Value wv = g.reshape(w, {1024});
  g.set_outputs({a, c, c, wv}, {"a", "c", "c_again", "w_flat"});
  return g;
}

}  // namespace rlx::test_graphs
