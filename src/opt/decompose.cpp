// Decompositions used by legalize. Each rule writes the op's definition (ops.def)
// in primitives; numerically stable forms are chosen where it matters (softmax
// subtracts the max, softplus avoids exp overflow).
#include "opt/decompose.h"

#include <cmath>
#include <cstring>
#include <numbers>

#include "ir/op_table.h"
#include "opt/rewrite.h"

namespace rlx::opt {

namespace {

// Emits intermediates as "<name>/<op>" and the final node as "<name>".
class Builder {
 public:
  Builder(Emitter& e, const Node& n) : e_(e), name_(n.name) {}

  Graph& g() { return e_.graph(); }
  const Shape& type(Value v) { return g().type(v); }
  Value op(OpKind k, std::vector<Value> in, Attrs a) {
    return e_.emit(k, std::move(in), std::move(a), sub_name(name_, std::string(op_name(k))))[0];
  }
  Value op(OpKind k, std::vector<Value> in) { return op(k, std::move(in), default_attrs(k)); }
  Value last(OpKind k, std::vector<Value> in, Attrs a) { return e_.emit(k, std::move(in), std::move(a), name_)[0]; }
  Value last(OpKind k, std::vector<Value> in) { return last(k, std::move(in), default_attrs(k)); }
  Value scalar(double v, DType t) { return g().scalar(v, t); }
  Value scalar_like(double v, Value x) { return scalar(v, type(x).dtype()); }

 private:
  Emitter& e_;
  std::string name_;
};

using Out = std::optional<std::vector<Value>>;
Out one(Value v) { return std::vector<Value>{v}; }

std::vector<int64_t> tail_axes(int axis, int rank) {
  std::vector<int64_t> a;
  for (int i = axis; i < rank; ++i) a.push_back(i);
  return a;
}

// Emits `act` applied to x; `final` selects whether it is the last node.
Value apply_activation(Builder& b, Activation act, double alpha, Value x, bool final) {
  auto emit = [&](OpKind k, Attrs a) { return final ? b.last(k, {x}, a) : b.op(k, {x}, a); };
  switch (act) {
    case Activation::None: return x;
    case Activation::Relu: return emit(OpKind::Relu, NoAttrs{});
    case Activation::Gelu: return emit(OpKind::Gelu, GeluAttrs{false});
    case Activation::GeluTanh: return emit(OpKind::Gelu, GeluAttrs{true});
    case Activation::Silu: return emit(OpKind::Silu, NoAttrs{});
    case Activation::Sigmoid: return emit(OpKind::Sigmoid, NoAttrs{});
    case Activation::Tanh: return emit(OpKind::Tanh, NoAttrs{});
    case Activation::LeakyRelu: return emit(OpKind::LeakyRelu, ScalarAttrs{alpha, 0});
  }
  return x;
}

Out layer_norm(Builder& b, const Node& n) {
  Value x = n.inputs[0];
  const auto& a = n.attr<NormAttrs>();
  int rank = b.type(x).rank();
  auto axes = tail_axes(normalize_axis(a.axis, rank, "layer_norm axis"), rank);
  bool has_scale = n.inputs.size() > 1 && n.inputs[1].valid();
  bool has_bias = n.inputs.size() > 2 && n.inputs[2].valid();
  Value mean = b.op(OpKind::ReduceMean, {x}, ReduceAttrs{axes, true});
  Value d = b.op(OpKind::Sub, {x, mean});
  Value var = b.op(OpKind::ReduceMean, {b.op(OpKind::Mul, {d, d})}, ReduceAttrs{axes, true});
  Value inv = b.op(OpKind::Rsqrt, {b.op(OpKind::Add, {var, b.scalar_like(a.epsilon, x)})});
  if (!has_scale && !has_bias) return one(b.last(OpKind::Mul, {d, inv}));
  Value y = b.op(OpKind::Mul, {d, inv});
  if (!has_bias) return one(b.last(OpKind::Mul, {y, n.inputs[1]}));
  if (has_scale) y = b.op(OpKind::Mul, {y, n.inputs[1]});
  return one(b.last(OpKind::Add, {y, n.inputs[2]}));
}

Out rms_norm(Builder& b, const Node& n) {
  Value x = n.inputs[0];
  const auto& a = n.attr<NormAttrs>();
  int rank = b.type(x).rank();
  auto axes = tail_axes(normalize_axis(a.axis, rank, "rms_norm axis"), rank);
  Value ms = b.op(OpKind::ReduceMean, {b.op(OpKind::Mul, {x, x})}, ReduceAttrs{axes, true});
  Value inv = b.op(OpKind::Rsqrt, {b.op(OpKind::Add, {ms, b.scalar_like(a.epsilon, x)})});
  if (n.inputs.size() > 1 && n.inputs[1].valid())
    return one(b.last(OpKind::Mul, {b.op(OpKind::Mul, {x, inv}), n.inputs[1]}));
  return one(b.last(OpKind::Mul, {x, inv}));
}

Out fused_matmul(Builder& b, const Node& n) {
  const auto& a = n.attr<FusedMatMulAttrs>();
  bool has_bias = n.inputs.size() > 2 && n.inputs[2].valid();
  bool has_act = a.activation != Activation::None;
  if (!has_bias && !has_act) return one(b.last(OpKind::MatMul, {n.inputs[0], n.inputs[1]}));
  Value y = b.op(OpKind::MatMul, {n.inputs[0], n.inputs[1]});
  if (has_bias) {
    if (!has_act) return one(b.last(OpKind::Add, {y, n.inputs[2]}));
    y = b.op(OpKind::Add, {y, n.inputs[2]});
  }
  return one(apply_activation(b, a.activation, a.alpha, y, true));
}

Out fused_conv2d(Builder& b, const Node& n) {
  const auto& a = n.attr<FusedConvAttrs>();
  std::vector<Value> in{n.inputs[0], n.inputs[1]};
  if (n.inputs.size() > 2 && n.inputs[2].valid()) in.push_back(n.inputs[2]);
  const bool has_res = n.inputs.size() > 3 && n.inputs[3].valid(), has_act = a.activation != Activation::None;
  if (!has_res && !has_act) return one(b.last(OpKind::Conv2d, in, a.conv()));
  Value y = b.op(OpKind::Conv2d, in, a.conv());
  if (has_res) {
    if (!has_act) return one(b.last(OpKind::Add, {y, n.inputs[3]}));
    y = b.op(OpKind::Add, {y, n.inputs[3]});
  }
  return one(apply_activation(b, a.activation, a.alpha, y, true));
}

// A channels-last conv2d / pool: the NCHW op between transposes (x and, for a conv, w to
// channels first; the result back to channels last). An NCHW one has no decomposition.
Out channels_first(Builder& b, const Node& n, std::string* why) {
  const bool conv = n.kind == OpKind::Conv2d;
  if (!ir::is_channels_last(n)) return std::nullopt;  // the op itself: nothing to add to "unsupported"
  const TransposeAttrs to_first{{0, 3, 1, 2}};
  std::vector<Value> in{b.op(OpKind::Transpose, {n.inputs[0]}, to_first)};
  Attrs a = n.attrs;
  if (conv) {
    in.push_back(b.op(OpKind::Transpose, {n.inputs[1]}, to_first));
    if (n.inputs.size() > 2 && n.inputs[2].valid()) in.push_back(n.inputs[2]);
    ConvAttrs c = n.attr<ConvAttrs>();
    c.nhwc = false;
    a = c;
  } else {
    PoolAttrs p = n.attr<PoolAttrs>();
    p.nhwc = false;
    a = p;
  }
  return one(b.last(OpKind::Transpose, {b.op(n.kind, in, a)}, TransposeAttrs{{0, 2, 3, 1}}));
}

// ONNX ConvInteger's definition: an f64 conv of the zero-point-shifted operands (every
// product and sum of u8/i8 differences is exact in f64), then i32. The input is padded with
// zeros after the shift, i.e. with x_zp before it.
Out conv_integer(Builder& b, const Node& n) {
  Value x = b.op(OpKind::Cast, {n.inputs[0]}, CastAttrs{DType::F64});
  Value w = b.op(OpKind::Cast, {n.inputs[1]}, CastAttrs{DType::F64});
  Value xz = b.op(OpKind::Cast, {n.inputs[2]}, CastAttrs{DType::F64});
  Value wz = b.op(OpKind::Cast, {n.inputs[3]}, CastAttrs{DType::F64});
  const int64_t m = b.type(w).static_dims()[0];
  xz = b.op(OpKind::Reshape, {xz}, ShapeAttrs{{}});
  wz = b.op(OpKind::Reshape, {wz}, ShapeAttrs{{b.type(wz).numel() == 1 ? 1 : m, 1, 1, 1}});
  Value y = b.op(OpKind::Conv2d, {b.op(OpKind::Sub, {x, xz}), b.op(OpKind::Sub, {w, wz})}, n.attrs);
  return one(b.last(OpKind::Cast, {y}, CastAttrs{DType::I32}));
}

// dft / idft by their definition: the rows of real and imaginary parts times constant
// cos / sin matrices (entries in double, rounded once to x's type); O(n^2) per row.
Out dft(Builder& b, const Node& n, bool inverse, std::string* why) {
  Value x = n.inputs[0];
  const Shape& xs = b.type(x);
  if (!xs.is_static()) {
    *why = "dft decomposition needs static dims, got " + xs.str();
    return std::nullopt;
  }
  const std::vector<int64_t> d = xs.static_dims();
  const int r = int(d.size());
  const int64_t len = d[size_t(r - 2)], c = d.back();
  int64_t rows = 1;
  for (int i = 0; i < r - 2; ++i) rows *= d[size_t(i)];
  const DType t = xs.dtype();
  if (len > 8192) {  // two len x len matrices: 512 MiB of f32 at 8192
    *why = "dft decomposition: a transform of " + std::to_string(len) + " points would need two " +
           std::to_string(len) + "^2 matrices";
    return std::nullopt;
  }
  std::vector<double> cs(size_t(len * len)), sn(size_t(len * len));
  for (int64_t j = 0; j < len; ++j)
    for (int64_t k = 0; k < len; ++k) {
      const double th = 2.0 * std::numbers::pi * double((j * k) % len) / double(len);
      cs[size_t(j * len + k)] = std::cos(th);
      sn[size_t(j * len + k)] = std::sin(th);
    }
  Value cm = b.g().constant_values({len, len}, t, cs), sm = b.g().constant_values({len, len}, t, sn);
  auto part = [&](int64_t i) {
    Value p = b.op(OpKind::Slice, {x}, SliceAttrs{{i}, {i + 1}, {int64_t(r - 1)}, {1}});
    return b.op(OpKind::Reshape, {p}, ShapeAttrs{{rows, len}});
  };
  Value xr = part(0);
  Value rc = b.op(OpKind::MatMul, {xr, cm}), rs = b.op(OpKind::MatMul, {xr, sm});
  Value yr, yi;
  if (c == 2) {  // forward: (xr + i xi)(cos - i sin); inverse: (xr + i xi)(cos + i sin)
    Value xi = part(1);
    Value ic = b.op(OpKind::MatMul, {xi, cm}), is = b.op(OpKind::MatMul, {xi, sm});
    yr = b.op(inverse ? OpKind::Sub : OpKind::Add, {rc, is});
    yi = b.op(inverse ? OpKind::Add : OpKind::Sub, {ic, rs});
  } else {
    yr = rc;
    yi = inverse ? rs : b.op(OpKind::Neg, {rs});
  }
  if (inverse) {
    Value inv = b.scalar(1.0 / double(len), t);
    yr = b.op(OpKind::Mul, {yr, inv});
    yi = b.op(OpKind::Mul, {yi, inv});
  }
  std::vector<int64_t> od = d;
  od.back() = 1;
  yr = b.op(OpKind::Reshape, {yr}, ShapeAttrs{od});
  yi = b.op(OpKind::Reshape, {yi}, ShapeAttrs{od});
  return one(b.last(OpKind::Concat, {yr, yi}, AxisAttrs{int64_t(r - 1)}));
}

Out softmax(Builder& b, const Node& n, bool log) {
  Value x = n.inputs[0];
  int64_t axis = n.attr<AxisAttrs>().axis;
  Value m = b.op(OpKind::ReduceMax, {x}, ReduceAttrs{{axis}, true});
  Value d = b.op(OpKind::Sub, {x, m});
  Value e = b.op(OpKind::Exp, {d});
  Value s = b.op(OpKind::ReduceSum, {e}, ReduceAttrs{{axis}, true});
  if (log) return one(b.last(OpKind::Sub, {d, b.op(OpKind::Log, {s})}));
  return one(b.last(OpKind::Div, {e, s}));
}

// Repeats the heads of a [B,Hkv,S,D] tensor `group` times each -> [B,Hkv*group,S,D].
Value repeat_heads(Builder& b, Value x, int64_t group) {
  auto d = b.type(x).static_dims();
  Value r = b.op(OpKind::Reshape, {x}, ShapeAttrs{{d[0], d[1], 1, d[2], d[3]}});
  Value e = b.op(OpKind::Expand, {r}, ShapeAttrs{{d[0], d[1], group, d[2], d[3]}});
  return b.op(OpKind::Reshape, {e}, ShapeAttrs{{d[0], d[1] * group, d[2], d[3]}});
}

Out attention(Builder& b, const Node& n, std::string* why) {
  Value q = n.inputs[0], k = n.inputs[1], v = n.inputs[2];
  const auto& a = n.attr<AttentionAttrs>();
  const Shape& qt = b.type(q);
  const Shape& kt = b.type(k);
  DType dt = qt.dtype();
  if (!qt.is_static() || !kt.is_static() || !b.type(v).is_static()) {
    *why = "attention decomposition needs static shapes (bind the symbols first)";
    return std::nullopt;
  }
  // bshd: the heads-first computation between transposes of the operands and the result.
  const int hax = a.bshd ? 2 : 1, sax = a.bshd ? 1 : 2;
  int64_t hq = qt.dims()[hax].value(), hkv = kt.dims()[hax].value();
  int64_t sq = qt.dims()[sax].value(), sk = kt.dims()[sax].value(), dh = qt.dims()[3].value();
  if (a.bshd) {
    const TransposeAttrs swap{{0, 2, 1, 3}};
    q = b.op(OpKind::Transpose, {q}, swap);
    k = b.op(OpKind::Transpose, {k}, swap);
    v = b.op(OpKind::Transpose, {v}, swap);
  }
  if (hq != hkv) {
    k = repeat_heads(b, k, hq / hkv);
    v = repeat_heads(b, v, hq / hkv);
  }
  Value kT = b.op(OpKind::Transpose, {k}, TransposeAttrs{{0, 1, 3, 2}});
  Value s = b.op(OpKind::MatMul, {q, kT});
  double scale = a.scale != 0 ? a.scale : 1.0 / std::sqrt(double(dh));
  s = b.op(OpKind::Mul, {s, b.scalar(scale, dt)});
  if (n.inputs.size() > 3 && n.inputs[3].valid()) s = b.op(OpKind::Add, {s, n.inputs[3]});
  if (a.causal) {
    // Query i sees keys j <= i + (sk - sq): the last query is aligned with the last key.
    Shape mt({sq, sk}, dt);
    std::vector<uint8_t> bytes(mt.bytes());
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t j = 0; j < sk; ++j)
        write_element(bytes.data(), dt, i * sk + j, j <= i + (sk - sq) ? 0.0 : -INFINITY);
    Value mask = b.g().constant(mt, Blob(std::move(bytes)), sub_name(n.name, "causal_mask"));
    s = b.op(OpKind::Add, {s, mask});
  }
  Value p = b.op(OpKind::Softmax, {s}, AxisAttrs{-1});
  if (!a.bshd) return one(b.last(OpKind::MatMul, {p, v}));
  return one(b.last(OpKind::Transpose, {b.op(OpKind::MatMul, {p, v})}, TransposeAttrs{{0, 2, 1, 3}}));
}

Out rotary(Builder& b, const Node& n, std::string* why) {
  Value x = n.inputs[0], c = n.inputs[1], s = n.inputs[2];
  const Shape& xt = b.type(x);
  const int64_t axis = xt.rank() - 1;
  const int64_t half = b.type(c).dims()[1].value();
  const int64_t r = 2 * half;
  const int64_t dh = xt.dims()[size_t(axis)].value();
  bool interleaved = n.attr<RotaryAttrs>().interleaved;
  auto slice = [&](int64_t start, int64_t end, int64_t step) {
    std::vector<int64_t> steps;
    if (step != 1) steps.push_back(step);
    return b.op(OpKind::Slice, {x}, SliceAttrs{{start}, {end}, {axis}, steps});
  };
  Value x1, x2;  // the two members of each rotated pair
  if (interleaved) {
    if (!xt.is_static()) {
      *why = "interleaved rotary decomposition needs static shapes (bind the symbols first)";
      return std::nullopt;
    }
    x1 = slice(0, r, 2);
    x2 = slice(1, r, 2);
  } else {
    x1 = slice(0, half, 1);
    x2 = slice(half, r, 1);
  }
  // (x1, x2) -> (x1*cos - x2*sin, x2*cos + x1*sin)
  Value o1 = b.op(OpKind::Sub, {b.op(OpKind::Mul, {x1, c}), b.op(OpKind::Mul, {x2, s})});
  Value o2 = b.op(OpKind::Add, {b.op(OpKind::Mul, {x2, c}), b.op(OpKind::Mul, {x1, s})});
  std::vector<Value> parts;
  if (interleaved) {
    // Stack the pairs on a new last axis and flatten it back: [.., half, 2] -> [.., r].
    auto d = b.type(o1).static_dims();
    auto d1 = d;
    d1.push_back(1);
    Value st = b.op(OpKind::Concat,
                    {b.op(OpKind::Reshape, {o1}, ShapeAttrs{d1}), b.op(OpKind::Reshape, {o2}, ShapeAttrs{d1})},
                    AxisAttrs{-1});
    d.back() = r;
    if (r == dh) return one(b.last(OpKind::Reshape, {st}, ShapeAttrs{d}));
    parts.push_back(b.op(OpKind::Reshape, {st}, ShapeAttrs{d}));
  } else {
    parts = {o1, o2};
  }
  if (r < dh) parts.push_back(slice(r, dh, 1));
  return one(b.last(OpKind::Concat, parts, AxisAttrs{axis}));
}

// The primitives of a fused elementwise program, in order.
Out unfuse(Builder& b, const Node& n) {
  const auto& prog = n.attr<FusedElementwiseAttrs>().program;
  const int n_in = int(n.inputs.size());
  std::vector<Value> results;
  for (size_t i = 0; i < prog.size(); ++i) {
    const FusedOp& op = prog[i];
    Attrs a = ir::attrs_from_params(op.kind, op.alpha, op.beta);
    if (auto* c = std::get_if<CastAttrs>(&a)) c->to = op.type;
    std::vector<Value> in;
    for (int32_t arg : op.args) in.push_back(arg < n_in ? n.inputs[size_t(arg)] : results[size_t(arg - n_in)]);
    results.push_back(i + 1 == prog.size() ? b.last(op.kind, in, a) : b.op(op.kind, in, a));
  }
  return one(results.back());
}

// Unary activations and friends, written in more basic elementwise ops.
Out unary(Builder& b, const Node& n) {
  Value x = n.inputs[0];
  auto k = [&](double v) { return b.scalar_like(v, x); };
  double alpha = 0, beta = 0;
  ir::scalar_params(n.attrs, alpha, beta);  // clip: (min, max); gelu: (tanh_approx, 0)
  switch (n.kind) {
    case OpKind::Identity:
      return one(x);
    case OpKind::Neg:
      return one(b.last(OpKind::Mul, {x, k(-1)}));
    case OpKind::Reciprocal:
      return one(b.last(OpKind::Div, {k(1), x}));
    case OpKind::Rsqrt:
      return one(b.last(OpKind::Div, {k(1), b.op(OpKind::Sqrt, {x})}));
    case OpKind::Relu:
      return one(b.last(OpKind::Max, {x, k(0)}));
    case OpKind::Sigmoid:  // 1 / (1 + exp(-x))
      return one(b.last(OpKind::Div, {k(1), b.op(OpKind::Add, {k(1), b.op(OpKind::Exp, {b.op(OpKind::Neg, {x})})})}));
    case OpKind::Tanh:  // 2 * sigmoid(2x) - 1
      return one(b.last(OpKind::Sub, {b.op(OpKind::Mul, {b.op(OpKind::Sigmoid, {b.op(OpKind::Mul, {x, k(2)})}), k(2)}),
                                      k(1)}));
    case OpKind::Silu:
      return one(b.last(OpKind::Mul, {x, b.op(OpKind::Sigmoid, {x})}));
    case OpKind::Gelu: {
      Value inner;
      if (alpha == 1) {  // tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        Value x3 = b.op(OpKind::Mul, {b.op(OpKind::Mul, {x, x}), x});
        Value poly = b.op(OpKind::Add, {x, b.op(OpKind::Mul, {x3, k(0.044715)})});
        inner = b.op(OpKind::Tanh, {b.op(OpKind::Mul, {poly, k(std::sqrt(2.0 / std::numbers::pi))})});
      } else {  // erf form: 0.5 x (1 + erf(x / sqrt(2)))
        inner = b.op(OpKind::Erf, {b.op(OpKind::Mul, {x, k(1.0 / std::numbers::sqrt2)})});
      }
      Value half_x = b.op(OpKind::Mul, {x, k(0.5)});
      return one(b.last(OpKind::Mul, {half_x, b.op(OpKind::Add, {inner, k(1)})}));
    }
    case OpKind::Softplus: {  // max(x, 0) + log(1 + exp(-|x|))
      Value t = b.op(OpKind::Exp, {b.op(OpKind::Neg, {b.op(OpKind::Abs, {x})})});
      Value l = b.op(OpKind::Log, {b.op(OpKind::Add, {t, k(1)})});
      return one(b.last(OpKind::Add, {b.op(OpKind::Max, {x, k(0)}), l}));
    }
    case OpKind::Softsign:
      return one(b.last(OpKind::Div, {x, b.op(OpKind::Add, {b.op(OpKind::Abs, {x}), k(1)})}));
    case OpKind::Mish:
      return one(b.last(OpKind::Mul, {x, b.op(OpKind::Tanh, {b.op(OpKind::Softplus, {x})})}));
    case OpKind::HardSigmoid:  // clip(alpha x + beta, 0, 1)
      return one(b.last(OpKind::Clip, {b.op(OpKind::Add, {b.op(OpKind::Mul, {x, k(alpha)}), k(beta)})},
                        ClipAttrs{0, 1}));
    case OpKind::HardSwish: {  // x * clip(x/6 + 1/2, 0, 1)
      Value h = b.op(OpKind::Clip, {b.op(OpKind::Add, {b.op(OpKind::Mul, {x, k(1.0 / 6)}), k(0.5)})},
                     ClipAttrs{0, 1});
      return one(b.last(OpKind::Mul, {x, h}));
    }
    case OpKind::LeakyRelu:  // max(x, 0) + alpha * min(x, 0)
      return one(b.last(OpKind::Add, {b.op(OpKind::Max, {x, k(0)}),
                                      b.op(OpKind::Mul, {b.op(OpKind::Min, {x, k(0)}), k(alpha)})}));
    case OpKind::Elu:
    case OpKind::Selu: {  // x > 0 ? x : alpha (exp(x) - 1); selu scales by gamma (beta)
      Value neg = b.op(OpKind::Mul, {b.op(OpKind::Sub, {b.op(OpKind::Exp, {x}), k(1)}), k(alpha)});
      Value pos = b.op(OpKind::Greater, {x, k(0)});
      if (n.kind == OpKind::Elu) return one(b.last(OpKind::Where, {pos, x, neg}));
      return one(b.last(OpKind::Mul, {b.op(OpKind::Where, {pos, x, neg}), k(beta)}));
    }
    case OpKind::Celu: {  // max(x, 0) + min(0, alpha (exp(x / alpha) - 1))
      Value e = b.op(OpKind::Exp, {b.op(OpKind::Div, {x, k(alpha)})});
      Value neg = b.op(OpKind::Min, {b.op(OpKind::Mul, {b.op(OpKind::Sub, {e, k(1)}), k(alpha)}), k(0)});
      return one(b.last(OpKind::Add, {b.op(OpKind::Max, {x, k(0)}), neg}));
    }
    case OpKind::ThresholdedRelu:
      return one(b.last(OpKind::Where, {b.op(OpKind::Greater, {x, k(alpha)}), x, k(0)}));
    case OpKind::Clip: {
      // Infinite bounds mean "no bound" (and do not fit integer types).
      bool lo = std::isfinite(alpha), hi = std::isfinite(beta);
      if (!lo && !hi) return one(x);
      if (lo && hi) return one(b.last(OpKind::Min, {b.op(OpKind::Max, {x, k(alpha)}), k(beta)}));
      return one(lo ? b.last(OpKind::Max, {x, k(alpha)}) : b.last(OpKind::Min, {x, k(beta)}));
    }
    default:
      return std::nullopt;
  }
}

}  // namespace

bool has_decomposition(OpKind kind) { return ir::has_trait(kind, ir::kHasDecomposition); }

// The trait is the gate: an op decomposes exactly when ops.def says so (tests check that
// each op with the trait really does).
std::optional<std::vector<Value>> decompose(Emitter& e, const Node& n, std::string* why) {
  std::string dummy;
  if (!why) why = &dummy;
  if (!has_decomposition(n.kind)) {
    *why = "no decomposition for " + std::string(op_name(n.kind));
    return std::nullopt;
  }
  Builder b(e, n);
  switch (n.kind) {
    case OpKind::LayerNorm: return layer_norm(b, n);
    case OpKind::RmsNorm: return rms_norm(b, n);
    case OpKind::FusedMatMul: return fused_matmul(b, n);
    case OpKind::FusedConv2d: return fused_conv2d(b, n);  // nhwc: its conv2d is nhwc too
    case OpKind::Conv2d:
    case OpKind::MaxPool2d:
    case OpKind::AvgPool2d: return channels_first(b, n, why);
    case OpKind::ConvInteger: return conv_integer(b, n);
    case OpKind::Dft: return dft(b, n, false, why);
    case OpKind::Idft: return dft(b, n, true, why);
    case OpKind::Attention: return attention(b, n, why);
    case OpKind::Rotary: return rotary(b, n, why);
    case OpKind::Softmax: return softmax(b, n, false);
    case OpKind::LogSoftmax: return softmax(b, n, true);
    case OpKind::FusedElementwise: return unfuse(b, n);
    default:
      if (ir::has_trait(n.kind, ir::kUnary)) {
        if (auto r = unary(b, n)) return r;
      }
      fail(ErrorCategory::Internal, "decompose: ", op_name(n.kind), " has the kHasDecomposition trait but no rule");
  }
}

}  // namespace rlx::opt
