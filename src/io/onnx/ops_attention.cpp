// Transformer ONNX ops as compositions that follow the ONNX function bodies:
// Attention (opset 23/24: GQA, 3-D/4-D layouts, past KV, bool/float masks padded to
// the KV length, causal offset by the past or by nonpad_kv_seqlen, local windows,
// softcap, fully-masked rows -> zeros, qk_matmul_output modes) and RotaryEmbedding.
#include <cmath>
#include <limits>

#include "io/onnx/ops_table.h"

namespace rlx::onnx {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// [B, S, H*D] -> [B, H, S, D]
Value heads_first(NodeCtx& c, Value x, int64_t heads) {
  auto d = c.vdims(x);
  if (d.size() != 3) c.invalid("with 3-D Q, K and V must be 3-D as well, got rank ", d.size());
  if (heads <= 0 || d[2] % heads) c.invalid("hidden size ", d[2], " is not divisible by ", heads, " heads");
  return c.transpose(c.reshape(x, {d[0], d[1], heads, d[2] / heads}), {0, 2, 1, 3});
}

// K or V [B, Hkv, S, D] for `q_heads` query heads: kv head h serves query heads h*G ..
// h*G+G-1 (G = q_heads / Hkv), as a broadcast copy; unchanged when the counts agree.
Value repeat_kv_heads(NodeCtx& c, Value x, int64_t q_heads) {
  const auto d = c.vdims(x);
  const int64_t kvh = d[1];
  if (kvh <= 0 || q_heads % kvh) c.invalid("q heads ", q_heads, " are not a multiple of kv heads ", kvh);
  if (kvh == q_heads) return x;
  const int64_t rep = q_heads / kvh;
  return c.reshape(c.expand(c.reshape(x, {d[0], kvh, 1, d[2], d[3]}), {d[0], kvh, rep, d[2], d[3]}),
                   {d[0], q_heads, d[2], d[3]});
}

// A bias of `dims` from a boolean condition: cond ? -inf : 0.
Value neg_inf_where(NodeCtx& c, Value cond, DType t) {
  return c.op(OpKind::Where, {cond, c.scalar(kNegInf, t), c.scalar(0, t)});
}

}  // namespace

std::vector<Value> lower_attention(NodeCtx& c) {
  Value q = c.in(0), k = c.in(1), v = c.in(2);
  DType t = c.dtype(0);
  for (int i = 0; i < 3; ++i)
    if (c.rank(i) != 3 && c.rank(i) != 4) c.invalid("Q, K, V must be 3-D or 4-D, input ", i, " has rank ", c.rank(i));
  bool three_d = c.rank(0) == 3;
  if (three_d) {
    q = heads_first(c, q, c.attr_int("q_num_heads", 0));
    k = heads_first(c, k, c.attr_int("kv_num_heads", 0));
    v = heads_first(c, v, c.attr_int("kv_num_heads", 0));
  }
  auto qd = c.vdims(q), kd = c.vdims(k), vd = c.vdims(v);
  if (qd.size() != 4 || kd.size() != 4 || vd.size() != 4) c.invalid("Q, K, V must be 3-D or 4-D");
  int64_t batch = qd[0], qh = qd[1], qs = qd[2], hs = qd[3];
  int64_t past = 0;
  for (int i = 4; i < 6; ++i)
    if (c.has(i) && c.rank(i) != 4) c.invalid("past_key/past_value must be 4-D, input ", i, " has rank ", c.rank(i));
  if (c.has(4)) {
    past = c.dims(4)[2];
    k = c.concat({c.in(4), k}, 2);
  }
  if (c.has(5)) v = c.concat({c.in(5), v}, 2);
  Value present_k = k, present_v = v;
  int64_t total = c.vdims(k)[2];
  int64_t new_kv = kd[2];
  // ---- the additive bias [.., qs, total]
  Value bias = c.full({qs, total}, 0, t);
  if (c.has(3)) {
    Value m = c.in(3);
    if (c.dtype(3) == DType::Bool) m = c.op(OpKind::Where, {m, c.scalar(0, t), c.scalar(kNegInf, t)});
    else m = c.cast(m, t);
    auto md = c.vdims(m);
    if (md.back() < total) {
      std::vector<int64_t> pads(2 * md.size(), 0);
      pads.back() = total - md.back();
      m = c.op(OpKind::Pad, {m}, PadAttrs{pads, PadMode::Constant, kNegInf});
    }
    bias = m;
  }
  std::vector<int64_t> row(c.host_size(qs)), col(c.host_size(total));
  for (int64_t i = 0; i < qs; ++i) row[size_t(i)] = i;
  for (int64_t j = 0; j < total; ++j) col[size_t(j)] = j;
  Value row2 = c.im.constant(make_i64({qs, 1}, row)), col2 = c.im.constant(make_i64({1, total}, col));
  bool nonpad = c.has(6);
  // Absolute query positions: row + past, or row + nonpad_kv_seqlen[b] - qs per batch.
  Value pos, cols = col2;
  if (nonpad) {
    Value off = c.reshape(c.op(OpKind::Sub, {c.cast(c.in(6), DType::I64), c.scalar(double(qs), DType::I64)}),
                          {batch, 1, 1, 1});
    pos = c.op(OpKind::Add, {c.reshape(row2, {1, 1, qs, 1}), off});
    cols = c.reshape(col2, {1, 1, 1, total});
  } else {
    pos = c.op(OpKind::Add, {row2, c.scalar(double(past), DType::I64)});
  }
  if (c.attr_int("is_causal", 0)) bias = c.op(OpKind::Add, {bias, neg_inf_where(c, c.op(OpKind::Less, {pos, cols}), t)});
  int64_t left = c.attr_int("left_window_size", -1), right = c.attr_int("right_window_size", -1);
  if (left >= 0 || right >= 0) {
    Value diff = c.op(OpKind::Sub, {pos, cols});
    Value ok;
    if (left >= 0) ok = c.op(OpKind::LessEqual, {diff, c.scalar(double(left), DType::I64)});
    if (right >= 0) {
      Value r = c.op(OpKind::LessEqual, {c.op(OpKind::Neg, {diff}), c.scalar(double(right), DType::I64)});
      ok = ok.valid() ? c.op(OpKind::And, {ok, r}) : r;
    }
    bias = c.op(OpKind::Add, {bias, neg_inf_where(c, c.op(OpKind::Not, {ok}), t)});
  }
  if (nonpad) {  // keys at or past nonpad_kv_seqlen[b] are masked
    Value lim = c.reshape(c.cast(c.in(6), DType::I64), {batch, 1});
    Value keep = c.op(OpKind::Less, {c.reshape(col2, {1, total}), lim});
    bias = c.op(OpKind::Add, {bias, c.reshape(neg_inf_where(c, c.op(OpKind::Not, {keep}), t), {batch, 1, 1, total})});
  }
  (void)new_kv;
  // ---- grouped heads: kv head h serves query heads h*rep .. h*rep+rep-1
  k = repeat_kv_heads(c, k, qh);
  v = repeat_kv_heads(c, v, qh);
  double scale = c.has_attr("scale") ? double(float(c.attr_float("scale", 0))) : 1.0 / std::sqrt(double(hs));
  Value sf = c.scalar(std::sqrt(double(float(scale))), t);
  Value qk = c.op(OpKind::MatMul, {c.op(OpKind::Mul, {q, sf}), c.op(OpKind::Mul, {c.transpose(k, {0, 1, 3, 2}), sf})});
  Value mode0 = qk;
  double softcap = double(float(c.attr_float("softcap", 0)));
  if (softcap > 0) {
    Value cap = c.scalar(softcap, t);
    qk = c.op(OpKind::Mul, {c.op(OpKind::Tanh, {c.op(OpKind::Div, {qk, cap})}), cap});
  }
  Value mode1 = qk;
  qk = c.op(OpKind::Add, {qk, bias});
  Value mode2 = qk;
  DType sm_t = t;
  if (c.has_attr("softmax_precision")) {
    auto d = carried_dtype(int(c.attr_int("softmax_precision", 1)));
    if (d) sm_t = *d;
  }
  Value p = c.cast(c.op(OpKind::Softmax, {c.cast(qk, sm_t)}, AxisAttrs{-1}), t);
  Value row_max = c.reduce(OpKind::ReduceMax, bias, {int64_t(c.vdims(bias).size()) - 1}, true);
  Value all_masked = c.op(OpKind::Equal, {row_max, c.scalar(kNegInf, t)});
  p = c.op(OpKind::Where, {all_masked, c.scalar(0, t), p});
  Value y = c.op(OpKind::MatMul, {p, v});
  if (three_d) {
    auto yd = c.vdims(y);
    y = c.reshape(c.transpose(y, {0, 2, 1, 3}), {yd[0], yd[2], yd[1] * yd[3]});
  }
  int64_t mode = c.attr_int("qk_matmul_output_mode", 0);
  Value qk_out = mode == 0 ? mode0 : mode == 1 ? mode1 : mode == 2 ? mode2 : p;
  return {y, present_k, present_v, qk_out};
}

std::vector<Value> lower_rotary_embedding(NodeCtx& c) {
  Value x = c.in(0);
  auto xd = c.dims(0);
  bool interleaved = c.attr_int("interleaved", 0) != 0;
  Value xin;
  if (xd.size() == 3) {
    int64_t heads = c.attr_int("num_heads", 0);
    if (heads <= 0 || xd[2] % heads) c.invalid("num_heads must divide the hidden size");
    xin = c.reshape(x, {xd[0], xd[1], heads, xd[2] / heads});
  } else if (xd.size() == 4) {
    xin = c.transpose(x, {0, 2, 1, 3});  // [B, S, H, D]
  } else {
    c.invalid("input must be 3-D or 4-D");
  }
  auto d = c.vdims(xin);
  int64_t hs = d[3];
  int64_t rd = c.attr_int("rotary_embedding_dim", 0);
  if (rd <= 0) rd = hs;
  if (rd > hs || rd % 2) c.invalid("rotary_embedding_dim ", rd, " must be even and <= the head size ", hs);
  Value cosv = c.in(1), sinv = c.in(2);
  if (c.has(3)) {
    cosv = c.op(OpKind::Gather, {cosv, c.cast(c.in(3), DType::I64)}, AxisAttrs{0});
    sinv = c.op(OpKind::Gather, {sinv, c.cast(c.in(3), DType::I64)}, AxisAttrs{0});
  }
  cosv = c.unsqueeze(c.slice(cosv, {0}, {rd / 2}, {2}), {2});  // [B, S, 1, rd/2]
  sinv = c.unsqueeze(c.slice(sinv, {0}, {rd / 2}, {2}), {2});
  Value rot = rd == hs ? xin : c.slice(xin, {0}, {rd}, {3});
  Value x1, x2;
  if (interleaved) {
    x1 = c.slice(rot, {0}, {rd}, {3}, {2});
    x2 = c.slice(rot, {1}, {rd + 1}, {3}, {2});
  } else {
    x1 = c.slice(rot, {0}, {rd / 2}, {3});
    x2 = c.slice(rot, {rd / 2}, {rd}, {3});
  }
  Value real = c.op(OpKind::Sub, {c.op(OpKind::Mul, {cosv, x1}), c.op(OpKind::Mul, {sinv, x2})});
  Value imag = c.op(OpKind::Add, {c.op(OpKind::Mul, {sinv, x1}), c.op(OpKind::Mul, {cosv, x2})});
  Value rotated;
  if (interleaved) {
    auto rdims = c.vdims(real);
    std::vector<int64_t> un = rdims;
    un.push_back(1);
    rotated = c.concat({c.reshape(real, un), c.reshape(imag, un)}, 4);
    std::vector<int64_t> back = rdims;
    back[3] = rd;
    rotated = c.reshape(rotated, back);
  } else {
    rotated = c.concat({real, imag}, 3);
  }
  if (rd < hs) rotated = c.concat({rotated, c.slice(xin, {rd}, {hs}, {3})}, 3);
  if (xd.size() == 4) return {c.transpose(rotated, {0, 2, 1, 3})};
  return {c.reshape(rotated, xd)};
}

// FlexAttention (ai.onnx.preview): Q [B, Hq, L, E], K [B, Hkv, S, E], V [B, Hkv, S, Ev] ->
// Y [B, Hq, L, Ev] = prob_mod(softmax(score_mod((Q K^T) * scale))) V, the two modifiers
// optional subgraphs over the whole [B, Hq, L, S] tensor (imported inline, so they fold and
// fuse like the rest of the graph); K/V head h serves query heads h*G .. h*G+G-1 (G = Hq /
// Hkv); scale defaults to 1 / sqrt(E).
std::vector<Value> lower_flex_attention(NodeCtx& c) {
  Value q = c.in(0), k = c.in(1), v = c.in(2);
  if (c.rank(0) != 4 || c.rank(1) != 4 || c.rank(2) != 4)
    c.invalid("Q, K and V must be rank 4, got ", c.type(0).str(), ", ", c.type(1).str(), ", ", c.type(2).str());
  const auto qd = c.dims(0), kd = c.dims(1), vd = c.dims(2);
  if (kd[0] != qd[0] || vd[0] != qd[0] || kd[3] != qd[3] || vd[1] != kd[1] || vd[2] != kd[2])
    c.invalid("Q ", c.type(0).str(), ", K ", c.type(1).str(), " and V ", c.type(2).str(),
              " do not fit (batch, head size, kv heads and kv length must agree)");
  if (!is_float(c.dtype(0)) || c.dtype(1) != c.dtype(0) || c.dtype(2) != c.dtype(0))
    c.invalid("Q, K and V must be floats of one type");
  const DType t = c.dtype(0);
  const int64_t qh = qd[1];
  k = repeat_kv_heads(c, k, qh);
  v = repeat_kv_heads(c, v, qh);
  const double scale = c.has_attr("scale") ? double(float(c.attr_float("scale", 0))) : 1.0 / std::sqrt(double(qd[3]));
  Value scores = c.op(OpKind::Mul, {c.op(OpKind::MatMul, {q, c.transpose(k, {0, 1, 3, 2})}), c.scalar(scale, t)});
  auto modify = [&](const char* name, Value x) {
    const pb::GraphProto* g = c.attr_graph(name);
    if (!g) return x;
    std::vector<Value> out = c.im.import_body(*g, {x});
    if (out.size() != 1) c.invalid(name, " must have one output, has ", out.size());
    if (!(c.g.type(out[0]) == c.g.type(x)))
      c.invalid(name, " must keep its input's type ", c.g.type(x).str(), ", gives ", c.g.type(out[0]).str());
    return out[0];
  };
  scores = modify("score_mod", scores);
  Value probs = modify("prob_mod", c.op(OpKind::Softmax, {scores}, AxisAttrs{-1}));
  return {c.op(OpKind::MatMul, {probs, v})};
}

}  // namespace rlx::onnx
