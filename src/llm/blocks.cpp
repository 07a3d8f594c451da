// Shared LLM blocks (see blocks.h).
#include "llm/blocks.h"

#include <cmath>
#include <tuple>
#include <utility>

namespace rlx::llm {

std::string blk(int64_t il, const std::string& name) { return "blk." + std::to_string(il) + "." + name; }

namespace {
int64_t last_dim(const Graph& g, Value v) { return g.type(v).dims().back().value(); }
}  // namespace

Value linear(BuildCtx& c, Value x, const std::string& name, bool use_bias, bool use_scale, bool scale_first) {
  Graph& g = c.g;
  Value y = c.project(x, name + ".weight");
  const int64_t n = last_dim(g, y);
  const bool bias = use_bias && c.has(name + ".bias");
  const bool scale = use_scale && c.has(name + ".scale");
  if (scale && scale_first) y = g.mul(y, c.vec(name + ".scale", n, true));
  if (bias) y = g.add(y, c.vec(name + ".bias", n));
  if (scale && !scale_first) y = g.mul(y, c.vec(name + ".scale", n, true));
  return y;
}

std::vector<Value> linear_rows(BuildCtx& c, Value x, const std::vector<std::string>& names, bool use_bias, bool use_scale,
                               bool scale_first) {
  Graph& g = c.g;
  std::vector<std::string> weights;
  for (const std::string& n : names) weights.push_back(n + ".weight");
  std::vector<Value> ys = c.project_rows(x, weights);
  for (size_t i = 0; i < names.size(); ++i) {
    Value& y = ys[i];
    const bool bias = use_bias && c.has(names[i] + ".bias");
    const bool scale = use_scale && c.has(names[i] + ".scale");
    const int64_t n = last_dim(g, y);
    if (scale && scale_first) y = g.mul(y, c.vec(names[i] + ".scale", n, true));
    if (bias) y = g.add(y, c.vec(names[i] + ".bias", n));
    if (scale && !scale_first) y = g.mul(y, c.vec(names[i] + ".scale", n, true));
  }
  return ys;
}

Value rms_norm(BuildCtx& c, Value x, const std::string& weight) {
  return c.g.rms_norm(x, c.vec(weight, last_dim(c.g, x)), -1, c.hp.norm_eps);
}

Value layer_norm(BuildCtx& c, Value x, const std::string& weight, const std::string& bias) {
  const int64_t n = last_dim(c.g, x);
  return c.g.layer_norm(x, c.vec(weight, n), c.vec(bias, n), -1, c.hp.norm_eps);
}

namespace {
// [R, H*D] -> [1, H, R, D]: every row as a position of one sequence, the layout rotary
// reads with one cos/sin row per row.
Value heads(Graph& g, Value x, int64_t R, int64_t H, int64_t D) {
  return g.reshape(g.transpose(g.reshape(x, {R, H, D}), {1, 0, 2}), {1, H, R, D});
}
// [1, H, B*T, D] -> [B, H, T, D]
Value per_sequence(Graph& g, Value x, int64_t B, int64_t T, int64_t H, int64_t D) {
  if (B == 1) return x;
  return g.transpose(g.reshape(x, {H, B, T, D}), {1, 0, 2, 3});
}
}  // namespace

Value self_attention(BuildCtx& c, int64_t il, Value x, const AttnOpts& o) {
  Graph& g = c.g;
  const HParams& hp = c.hp;
  const int64_t R = c.R, D = hp.head_dim;
  Value q, k, v;
  if (c.has(blk(il, "attn_qkv.weight"))) {  // one fused projection, split [q | k | v]
    std::vector<Value> p = g.split(linear(c, x, blk(il, "attn_qkv"), true, true, true), -1,
                                   {hp.n_head * D, hp.n_head_kv * D, hp.n_head_kv * D});
    q = p[0], k = p[1], v = p[2];
  } else {
    std::vector<Value> p = linear_rows(c, x, {blk(il, "attn_q"), blk(il, "attn_k"), blk(il, "attn_v")}, true, true, true);
    q = p[0], k = p[1], v = p[2];
  }
  q = heads(g, q, R, hp.n_head, D);
  k = heads(g, k, R, hp.n_head_kv, D);
  v = heads(g, v, R, hp.n_head_kv, D);
  if (o.qk_norm) {
    q = rms_norm(c, q, blk(il, "attn_q_norm.weight"));
    k = rms_norm(c, k, blk(il, "attn_k_norm.weight"));
  }
  if (o.rope && hp.rope != RopeKind::None) {
    const bool interleaved = hp.rope == RopeKind::Norm;
    q = g.rotary(q, c.rope_cos(), c.rope_sin(), interleaved);
    k = g.rotary(k, c.rope_cos(), c.rope_sin(), interleaved);
  }
  // The new rows are stored in the cache's type (and read back from it, like llama.cpp
  // does): with an F16 cache the current token's K/V are rounded too.
  q = per_sequence(g, q, c.B, c.T, hp.n_head, D);
  k = per_sequence(g, k, c.B, c.T, hp.n_head_kv, D);
  v = per_sequence(g, v, c.B, c.T, hp.n_head_kv, D);
  // The new rows [B, Hkv, T, D] into the caches at each sequence's position, in place (the
  // cache inputs are persistent handles: the rows stay there for the next pass), then
  // attention over the filled cache rows and the new ones, read in place (kv_attention).
  // Each cast is built right before its write: a backend may run the two as one kernel.
  auto store = [&](Value rows, Value cache) {
    if (c.kv_type != DType::F32) rows = g.cast(rows, c.kv_type);
    return std::pair{rows, g.cache_write(cache, rows, c.past())};
  };
  Value kc, vc;
  std::tie(k, kc) = store(k, c.k_cache(il));
  std::tie(v, vc) = store(v, c.v_cache(il));
  const double scale = hp.attn_scale != 0 ? hp.attn_scale : 1.0 / std::sqrt(double(D));
  Value a = g.kv_attention(q, kc, vc, k, v, c.past(), scale);  // [B, H, T, D]
  a = g.reshape(g.transpose(a, {0, 2, 1, 3}), {R, hp.n_head * D});
  return linear(c, a, blk(il, "attn_output"), o.out_bias, true, true);
}

Value swiglu_ffn(BuildCtx& c, int64_t il, Value x, bool biases, bool scales) {
  Graph& g = c.g;
  std::vector<Value> p = linear_rows(c, x, {blk(il, "ffn_up"), blk(il, "ffn_gate")}, biases, scales, false);
  return linear(c, g.mul(g.silu(p[1]), p[0]), blk(il, "ffn_down"), biases, scales, false);
}

namespace {
// y[t, s, :] * scale[ids[t, s]] when the per-expert scale tensor exists.
Value expert_scale(BuildCtx& c, Value y, const std::string& name, Value ids) {
  if (!c.has(name)) return y;
  Value s = c.g.gather(c.vec(name, c.hp.n_expert), ids, 0);  // [T, S]
  return c.g.mul(y, c.g.reshape(s, {c.R, c.hp.n_expert_used, 1}));
}
}  // namespace

Value moe_ffn(BuildCtx& c, int64_t il, Value x) {
  Graph& g = c.g;
  const int64_t T = c.R, S = c.hp.n_expert_used;  // T: rows here
  Value probs = g.softmax(c.project(x, blk(il, "ffn_gate_inp.weight")), -1);  // [T, E]
  auto [w, ids] = g.topk(probs, S, -1, true, true);                             // [T, S]
  w = g.div(w, g.max(g.reduce_sum(w, {-1}, true), g.scalar(6.103515625e-5, DType::F32)));
  Value up = expert_scale(c, c.project_id(x, blk(il, "ffn_up_exps.weight"), ids), blk(il, "ffn_up_exps.scale"), ids);
  Value gate =
      expert_scale(c, c.project_id(x, blk(il, "ffn_gate_exps.weight"), ids), blk(il, "ffn_gate_exps.scale"), ids);
  Value h = g.mul(g.silu(gate), up);  // [T, S, n_ff]
  Value down =
      expert_scale(c, c.project_id(h, blk(il, "ffn_down_exps.weight"), ids), blk(il, "ffn_down_exps.scale"), ids);
  down = g.mul(down, g.reshape(w, {T, S, 1}));
  const int64_t E = c.hp.n_embd;
  Value out = g.reshape(g.slice(down, {0}, {1}, {1}), {T, E});
  for (int64_t s = 1; s < S; ++s) out = g.add(out, g.reshape(g.slice(down, {s}, {s + 1}, {1}), {T, E}));
  return out;
}

// GELU (tanh form) as llama.cpp's CPU backend evaluates it: through a table indexed by
// the f16 value of x, holding f16 results, with x <= -10 -> 0 and x >= 10 -> x. The f16
// rounding moves logits by ~1e-4, so matching llama.cpp means rounding the same way.
Value gelu_f16_table(Graph& g, Value x) {
  Value xh = g.cast(g.cast(x, DType::F16), DType::F32);
  Value y = g.cast(g.cast(g.gelu(xh, true), DType::F16), DType::F32);
  y = g.where(g.ge(x, g.scalar(10.0, DType::F32)), x, y);
  return g.where(g.le(x, g.scalar(-10.0, DType::F32)), g.scalar(0.0, DType::F32), y);
}

Value gelu_ffn(BuildCtx& c, int64_t il, Value x) {
  Value up = linear(c, x, blk(il, "ffn_up"), true, false, false);
  return linear(c, gelu_f16_table(c.g, up), blk(il, "ffn_down"), true, false, false);
}

Value embed(BuildCtx& c) { return c.embeddings(); }

void lm_head(BuildCtx& c, Value x, bool use_layer_norm, bool output_bias) {
  Graph& g = c.g;
  if (!c.all_rows && c.T > 1) {  // the last row of each sequence (or the one named: a padded prompt)
    if (c.last_row_input && c.B != 1)
      fail(ErrorCategory::Internal, "llm: a pass with a 'last' row input has one sequence, not ", c.B);
    x = c.last_row_input ? g.gather(x, c.last_row(), 0)
        : c.B == 1       ? g.slice(x, {c.T - 1}, {c.T}, {0})
                 : g.reshape(g.slice(g.reshape(x, {c.B, c.T, c.hp.n_embd}), {c.T - 1}, {c.T}, {1}), {c.B, c.hp.n_embd});
  }
  x = use_layer_norm ? layer_norm(c, x, "output_norm.weight", "output_norm.bias") : rms_norm(c, x, "output_norm.weight");
  // Tied embeddings: the output projection reads token_embd.weight's blocks.
  Value y = c.project(x, c.has("output.weight") ? "output.weight" : "token_embd.weight");
  if (output_bias && c.has("output.bias")) y = g.add(y, c.vec("output.bias", last_dim(g, y)));
  c.set_logits(y);
  c.finish();
}

}  // namespace rlx::llm
