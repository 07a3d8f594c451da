// Recurrent ONNX ops (RNN, GRU, LSTM), unrolled over the static sequence length: the
// input projection X*W^T runs as one matmul over all steps, then each step adds
// H*R^T and the biases and applies the gate activations. sequence_lens masks steps
// past a batch entry's length (state frozen, output zero), as the reference does.
#include <cmath>

#include "io/onnx/ops_table.h"

namespace rlx::onnx {

namespace {

struct Act {
  std::string name;
  double alpha = 0, beta = 0;
};

Value apply_act(NodeCtx& c, const Act& a, Value x) {
  DType t = c.g.type(x).dtype();
  const std::string& n = a.name;
  auto s = [&](double v) { return c.scalar(v, t); };
  if (n == "Sigmoid") return c.op(OpKind::Sigmoid, {x});
  if (n == "Tanh") return c.op(OpKind::Tanh, {x});
  if (n == "Relu") return c.op(OpKind::Relu, {x});
  if (n == "Softsign") return c.op(OpKind::Softsign, {x});
  if (n == "Softplus") return c.op(OpKind::Softplus, {x});
  if (n == "Affine") return c.op(OpKind::Add, {c.op(OpKind::Mul, {x, s(a.alpha)}), s(a.beta)});
  if (n == "LeakyRelu") return c.op(OpKind::LeakyRelu, {x}, ScalarAttrs{a.alpha, 0});
  if (n == "ThresholdedRelu") return c.op(OpKind::ThresholdedRelu, {x}, ScalarAttrs{a.alpha, 0});
  if (n == "ScaledTanh") return c.op(OpKind::Mul, {c.op(OpKind::Tanh, {c.op(OpKind::Mul, {x, s(a.beta)})}), s(a.alpha)});
  if (n == "HardSigmoid") return c.op(OpKind::HardSigmoid, {x}, ScalarAttrs{a.alpha, a.beta});
  if (n == "Elu") return c.op(OpKind::Elu, {x}, ScalarAttrs{a.alpha, 0});
  c.unsupported("activation '", n, "'");
}

// Activation list with per-activation defaults for alpha/beta.
std::vector<Act> read_acts(NodeCtx& c, const std::vector<std::string>& defaults, int dirs) {
  std::vector<std::string> names;
  if (const auto* a = c.attr("activations"))
    for (const auto& s : a->strings()) names.push_back(s);
  if (names.empty())
    for (int d = 0; d < dirs; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  auto alphas = c.attr_floats("activation_alpha"), betas = c.attr_floats("activation_beta");
  std::vector<Act> acts;
  size_t ai = 0, bi = 0;
  for (const auto& n : names) {
    Act a{n};
    bool needs_alpha = n == "Affine" || n == "LeakyRelu" || n == "ThresholdedRelu" || n == "ScaledTanh" ||
                       n == "HardSigmoid" || n == "Elu";
    bool needs_beta = n == "Affine" || n == "ScaledTanh" || n == "HardSigmoid";
    double da = n == "LeakyRelu" ? 0.01 : n == "HardSigmoid" ? 0.2 : 1.0;
    double db = n == "HardSigmoid" ? 0.5 : 0.0;
    a.alpha = needs_alpha ? (ai < alphas.size() ? double(alphas[ai++]) : da) : 0;
    a.beta = needs_beta ? (bi < betas.size() ? double(betas[bi++]) : db) : 0;
    acts.push_back(a);
  }
  if (acts.size() != defaults.size() * size_t(dirs)) c.invalid("expected ", defaults.size() * size_t(dirs), " activations");
  return acts;
}

Value slice0(NodeCtx& c, Value v, int64_t i) {  // v[i] dropping axis 0
  auto d = c.vdims(v);
  Value s = c.slice(v, {i}, {i + 1}, {0});
  d.erase(d.begin());
  return c.reshape(s, d);
}

Value clip_gate(NodeCtx& c, Value x, double clip) {
  if (clip <= 0) return x;
  return c.op(OpKind::Clip, {x}, ClipAttrs{-clip, clip});
}

}  // namespace

std::vector<Value> lower_rnn_family(NodeCtx& c) {
  const std::string& op = c.node.op_type();
  int gates = op == "LSTM" ? 4 : op == "GRU" ? 3 : 1;
  std::string direction = c.attr_str("direction", "forward");
  int dirs = direction == "bidirectional" ? 2 : 1;
  int64_t layout = c.attr_int("layout", 0);
  double clip = double(float(c.attr_float("clip", 0)));
  bool linear_before_reset = c.attr_int("linear_before_reset", 0) != 0;
  if (op == "LSTM" && c.attr_int("input_forget", 0)) c.unsupported("input_forget");
  // Untrusted ranks: X, W and R must all be rank 3 before any dim is read.
  for (int i = 0; i < 3; ++i)
    if (c.dims(i).size() != 3) c.invalid("input ", i, " must have rank 3, got rank ", c.dims(i).size());
  Value x = c.in(0);
  if (layout) x = c.transpose(x, {1, 0, 2});
  auto xd = c.vdims(x);  // [seq, batch, input]
  int64_t seq = xd[0], batch = xd[1];
  auto wd = c.dims(1), rdims = c.dims(2);
  if (xd.size() != 3 || wd.size() != 3 || rdims.size() != 3) c.invalid("X, W and R must be 3-D");
  int64_t hidden = c.attr_int("hidden_size", rdims[2]);
  if (hidden <= 0 || hidden > (int64_t(1) << 24) || wd[0] != dirs || wd[1] != gates * hidden ||
      rdims[1] != gates * hidden || rdims[2] != hidden || wd[2] != xd[2])
    c.invalid("W ", c.type(1).str(), " / R ", c.type(2).str(), " do not match hidden_size ", hidden, " and ", dirs,
              " direction(s)");
  DType t = c.dtype(0);
  std::vector<std::string> def_acts = op == "LSTM" ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                      : op == "GRU" ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                    : std::vector<std::string>{"Tanh"};
  std::vector<Act> acts = read_acts(c, def_acts, dirs);
  Value lens;
  if (c.has(4)) lens = c.cast(c.in(4), DType::I64);
  std::vector<Value> ys, hs, cs;
  for (int d = 0; d < dirs; ++d) {
    bool reverse = direction == "reverse" || d == 1;
    const Act* act = &acts[size_t(d) * def_acts.size()];
    Value w = slice0(c, c.in(1), d), r = slice0(c, c.in(2), d);  // [G*H, in], [G*H, H]
    Value wb, rb;
    if (c.has(3)) {
      Value b = slice0(c, c.in(3), d);  // [2*G*H]
      wb = c.slice(b, {0}, {gates * hidden}, {0});
      rb = c.slice(b, {gates * hidden}, {2 * gates * hidden}, {0});
    } else {
      wb = c.full({gates * hidden}, 0, t);
      rb = wb;
    }
    Value h = c.has(5) ? slice0(c, c.in(5), d) : c.full({batch, hidden}, 0, t);
    Value cell = (op == "LSTM" && c.has(6)) ? slice0(c, c.in(6), d) : c.full({batch, hidden}, 0, t);
    Value p;
    if (op == "LSTM" && c.has(7)) p = slice0(c, c.in(7), d);  // [3H]: i, o, f
    // X*W^T + Wb for every step at once: [seq, batch, G*H]
    Value xw = c.op(OpKind::Add, {c.op(OpKind::MatMul, {x, c.transpose(w, {1, 0})}), wb});
    Value rt = c.transpose(r, {1, 0});
    auto gate = [&](Value v, int g) { return c.slice(v, {g * hidden}, {(g + 1) * hidden}, {1}); };
    std::vector<Value> y(c.host_size(seq));
    for (int64_t s = 0; s < seq; ++s) {
      int64_t step = reverse ? seq - 1 - s : s;
      Value xt = slice0(c, xw, step);
      Value hn, cn;
      if (op == "RNN") {
        Value z = c.op(OpKind::Add, {c.op(OpKind::Add, {xt, c.op(OpKind::MatMul, {h, rt})}), rb});
        hn = apply_act(c, act[0], clip_gate(c, z, clip));
      } else if (op == "GRU") {
        Value hr = c.op(OpKind::MatMul, {h, rt});  // [batch, 3H] without bias
        Value rz = c.op(OpKind::Add, {c.slice(xt, {0}, {2 * hidden}, {1}),
                                      c.op(OpKind::Add, {c.slice(hr, {0}, {2 * hidden}, {1}),
                                                         c.slice(rb, {0}, {2 * hidden}, {0})})});
        Value zt = apply_act(c, act[0], clip_gate(c, gate(rz, 0), clip));
        Value rt_ = apply_act(c, act[0], clip_gate(c, gate(rz, 1), clip));
        Value rbh = c.slice(rb, {2 * hidden}, {3 * hidden}, {0});
        Value hh;
        if (linear_before_reset) {
          hh = c.op(OpKind::Mul, {rt_, c.op(OpKind::Add, {gate(hr, 2), rbh})});
        } else {
          Value rh = c.op(OpKind::Mul, {rt_, h});
          Value rth = c.slice(rt, {2 * hidden}, {3 * hidden}, {1});
          hh = c.op(OpKind::Add, {c.op(OpKind::MatMul, {rh, rth}), rbh});
        }
        Value ht = apply_act(c, act[1], clip_gate(c, c.op(OpKind::Add, {gate(xt, 2), hh}), clip));
        Value one = c.scalar(1, t);
        hn = c.op(OpKind::Add, {c.op(OpKind::Mul, {c.op(OpKind::Sub, {one, zt}), ht}), c.op(OpKind::Mul, {zt, h})});
      } else {  // LSTM, gates i o f c
        Value z = c.op(OpKind::Add, {c.op(OpKind::Add, {xt, c.op(OpKind::MatMul, {h, rt})}), rb});
        Value zi = gate(z, 0), zo = gate(z, 1), zf = gate(z, 2), zc = gate(z, 3);
        if (p.valid()) {
          zi = c.op(OpKind::Add, {zi, c.op(OpKind::Mul, {c.slice(p, {0}, {hidden}, {0}), cell})});
          zf = c.op(OpKind::Add, {zf, c.op(OpKind::Mul, {c.slice(p, {2 * hidden}, {3 * hidden}, {0}), cell})});
        }
        Value it = apply_act(c, act[0], clip_gate(c, zi, clip));
        Value ft = apply_act(c, act[0], clip_gate(c, zf, clip));
        Value ct = apply_act(c, act[1], clip_gate(c, zc, clip));
        cn = c.op(OpKind::Add, {c.op(OpKind::Mul, {ft, cell}), c.op(OpKind::Mul, {it, ct})});
        if (p.valid()) zo = c.op(OpKind::Add, {zo, c.op(OpKind::Mul, {c.slice(p, {hidden}, {2 * hidden}, {0}), cn})});
        Value ot = apply_act(c, act[0], clip_gate(c, zo, clip));
        hn = c.op(OpKind::Mul, {ot, apply_act(c, act[2], cn)});
      }
      if (lens.valid()) {
        Value live = c.reshape(c.op(OpKind::Less, {c.scalar(double(step), DType::I64), lens}), {batch, 1});
        y[size_t(step)] = c.op(OpKind::Where, {live, hn, c.scalar(0, t)});
        h = c.op(OpKind::Where, {live, hn, h});
        if (cn.valid()) cell = c.op(OpKind::Where, {live, cn, cell});
      } else {
        y[size_t(step)] = hn;
        h = hn;
        if (cn.valid()) cell = cn;
      }
    }
    std::vector<Value> steps;
    for (Value v : y) steps.push_back(c.reshape(v, {1, 1, batch, hidden}));
    ys.push_back(c.concat(steps, 0));  // [seq, 1, batch, H]
    hs.push_back(c.reshape(h, {1, batch, hidden}));
    cs.push_back(c.reshape(cell, {1, batch, hidden}));
  }
  Value y = c.concat(ys, 1), yh = c.concat(hs, 0), yc = c.concat(cs, 0);
  if (layout) {
    y = c.transpose(y, {2, 0, 1, 3});
    yh = c.transpose(yh, {1, 0, 2});
    yc = c.transpose(yc, {1, 0, 2});
  }
  std::vector<Value> out{y, yh};
  if (op == "LSTM") out.push_back(yc);
  for (auto& v : out) v = c.op(OpKind::Identity, {v});
  return out;
}

}  // namespace rlx::onnx
