// Newer sequence-model ONNX ops, composed as their ONNX function bodies do:
// SwiGLU, CausalConvWithState (depthwise causal conv with a carried state) and
// LinearAttention (linear / gated / delta / gated_delta state updates, unrolled over
// the static sequence length, computed in f32).
#include <cmath>

#include "io/onnx/ops_table.h"

namespace rlx::onnx {

// swish(a, alpha) * b
std::vector<Value> lower_swiglu(NodeCtx& c) {
  Value a = c.in(0), b = c.in(1);
  double alpha = double(float(c.attr_float("alpha", 1.0)));
  Value gate = alpha == 1.0 ? c.op(OpKind::Silu, {a})
                            : c.op(OpKind::Mul, {a, c.op(OpKind::Sigmoid, {c.op(OpKind::Mul, {a, c.scalar(alpha, c.dtype(0))})})});
  return {c.op(OpKind::Mul, {gate, b})};
}

// y = act(conv1d(concat(state, x), w, b)); present_state = the last K-1 steps.
std::vector<Value> lower_causal_conv_with_state(NodeCtx& c) {
  auto xd = c.dims(0), wd = c.dims(1);
  if (xd.size() != 3 || wd.size() != 3) c.invalid("input and weight must be 3-D");
  int64_t k = wd[2];
  DType t = c.dtype(0);
  Value state = c.has(3) ? c.in(3) : c.full({xd[0], xd[1], k - 1}, 0, t);
  Value padded = k > 1 ? c.concat({state, c.in(0)}, 2) : c.in(0);
  int64_t group = c.attr_int("group", xd[1]);
  int64_t len = c.vdims(padded)[2];
  Value x4 = c.reshape(padded, {xd[0], xd[1], 1, len});
  Value w4 = c.reshape(c.in(1), {wd[0], wd[1], 1, k});
  ConvAttrs a;
  a.group = group;
  std::vector<Value> in{x4, w4};
  if (c.has(2)) in.push_back(c.in(2));
  Value y = c.op(OpKind::Conv2d, in, a);
  auto yd = c.vdims(y);
  y = c.reshape(y, {yd[0], yd[1], yd[3]});
  std::string act = c.attr_str("activation", "none");
  if (act == "silu" || act == "swish") {
    y = c.cast(c.op(OpKind::Silu, {c.cast(y, DType::F32)}), t);
  } else if (act != "none" && !act.empty()) {
    c.invalid("unknown activation '", act, "'");
  }
  Value present = c.slice(padded, {len - (k - 1)}, {len}, {2});
  return {y, present};
}

namespace {

// [B, T, H*D] -> [T, B, H, D] (f32)
Value steps_first(NodeCtx& c, Value x, int64_t heads) {
  auto d = c.vdims(x);
  return c.transpose(c.cast(c.reshape(x, {d[0], d[1], heads, d[2] / heads}), DType::F32), {1, 0, 2, 3});
}

Value step(NodeCtx& c, Value x, int64_t t) {  // x[t] of [T, ...]
  auto d = c.vdims(x);
  Value s = c.slice(x, {t}, {t + 1}, {0});
  d.erase(d.begin());
  return c.reshape(s, d);
}

}  // namespace

std::vector<Value> lower_linear_attention(NodeCtx& c) {
  auto qd = c.dims(0), kd = c.dims(1), vd = c.dims(2);
  if (qd.size() != 3 || kd.size() != 3 || vd.size() != 3) c.invalid("query, key and value must be 3-D");
  int64_t hq = c.attr_int("q_num_heads", 0), hkv = c.attr_int("kv_num_heads", 0);
  if (hq <= 0 || hkv <= 0 || hq % hkv || qd[2] % hq || vd[2] % hkv) c.invalid("bad head counts");
  std::string rule = c.attr_str("update_rule", "gated_delta");
  bool gated = rule == "gated" || rule == "gated_delta", delta = rule == "delta" || rule == "gated_delta";
  if (!gated && !delta && rule != "linear") c.invalid("unknown update_rule '", rule, "'");
  int64_t b = qd[0], steps = qd[1], dk = qd[2] / hq, dv = vd[2] / hkv, group = hq / hkv;
  DType t = c.dtype(0);
  double scale = c.has_attr("scale") ? double(float(c.attr_float("scale", 0))) : 1.0 / std::sqrt(double(dk));
  Value q = steps_first(c, c.in(0), hq), k = steps_first(c, c.in(1), hkv), v = steps_first(c, c.in(2), hkv);
  Value decay, beta;
  if (gated) {
    if (!c.has(4)) c.invalid("update rule '", rule, "' needs decay (input 4)");
    decay = steps_first(c, c.in(4), hkv);  // [T, B, Hkv, dk or 1]
  }
  if (delta) {
    if (!c.has(5)) c.invalid("update rule '", rule, "' needs beta (input 5)");
    auto bd = c.dims(5);
    Value bb = c.cast(c.reshape(c.in(5), {bd[0], bd[1], bd[2] == 1 ? 1 : hkv, 1}), DType::F32);
    beta = c.transpose(bb, {1, 0, 2, 3});  // [T, B, Hkv|1, 1]
  }
  Value state = c.has(3) ? c.cast(c.in(3), DType::F32) : c.full({b, hkv, dk, dv}, 0, DType::F32);
  Value sc = c.scalar(double(float(scale)), DType::F32);
  std::vector<Value> outs;
  for (int64_t s = 0; s < steps; ++s) {
    Value kt = c.unsqueeze(step(c, k, s), {3});  // [B, Hkv, dk, 1]
    Value vt = step(c, v, s);                     // [B, Hkv, dv]
    if (gated) state = c.op(OpKind::Mul, {state, c.unsqueeze(c.op(OpKind::Exp, {step(c, decay, s)}), {3})});
    Value write = vt;
    if (delta) {
      Value retrieved = c.reshape(c.op(OpKind::MatMul, {c.transpose(state, {0, 1, 3, 2}), kt}), {b, hkv, dv});
      write = c.op(OpKind::Mul, {step(c, beta, s), c.op(OpKind::Sub, {vt, retrieved})});
    }
    state = c.op(OpKind::Add, {state, c.op(OpKind::MatMul, {kt, c.unsqueeze(write, {2})})});
    Value read = state;
    if (group > 1)
      read = c.reshape(c.expand(c.unsqueeze(state, {2}), {b, hkv, group, dk, dv}), {b, hq, dk, dv});
    Value qt = c.unsqueeze(step(c, q, s), {2});  // [B, Hq, 1, dk]
    Value o = c.op(OpKind::Mul, {sc, c.reshape(c.op(OpKind::MatMul, {qt, read}), {b, hq, dv})});
    outs.push_back(c.reshape(c.cast(o, t), {b, 1, hq * dv}));
  }
  Value y = c.concat(outs, 1);
  return {c.op(OpKind::Identity, {y}), c.cast(state, t)};
}

}  // namespace rlx::onnx
