// A reference interpreter of rlx::Graph for the end-to-end tests: walks the nodes in
// order and evaluates each with the plain references of e2e_ref.h in double precision,
// rounding every result to its node's dtype. It knows no pass, planner or kernel, so
// comparing a compiled graph with it checks the whole stack at once. Static shapes only.
#pragma once
#include <cmath>
#include <map>
#include <vector>

#include "e2e_ref.h"
#include "ir/op_table.h"
#include "e2e_util.h"

namespace rlx::e2e {

inline double ref_unary(OpKind k, double x, double alpha, double beta) {
  auto sigm = [](double v) { return 1 / (1 + std::exp(-v)); };
  auto softplus = [](double v) { return std::max(v, 0.0) + std::log1p(std::exp(-std::fabs(v))); };
  switch (k) {
    case OpKind::Identity: return x;
    case OpKind::Abs: return std::fabs(x);
    case OpKind::Neg: return -x;
    case OpKind::Exp: return std::exp(x);
    case OpKind::Log: return std::log(x);
    case OpKind::Sqrt: return std::sqrt(x);
    case OpKind::Rsqrt: return 1 / std::sqrt(x);
    case OpKind::Reciprocal: return 1 / x;
    case OpKind::Sin: return std::sin(x);
    case OpKind::Cos: return std::cos(x);
    case OpKind::Tan: return std::tan(x);
    case OpKind::Asin: return std::asin(x);
    case OpKind::Acos: return std::acos(x);
    case OpKind::Atan: return std::atan(x);
    case OpKind::Sinh: return std::sinh(x);
    case OpKind::Cosh: return std::cosh(x);
    case OpKind::Asinh: return std::asinh(x);
    case OpKind::Acosh: return std::acosh(x);
    case OpKind::Atanh: return std::atanh(x);
    case OpKind::Tanh: return std::tanh(x);
    case OpKind::Sigmoid: return sigm(x);
    case OpKind::Relu: return x < 0 ? 0.0 : x;
    case OpKind::Gelu: return alpha == 1 ? ref::gelu_tanh(x) : ref::gelu(x);
    case OpKind::Silu: return x * sigm(x);
    case OpKind::Softplus: return softplus(x);
    case OpKind::Softsign: return x / (1 + std::fabs(x));
    case OpKind::Mish: return x * std::tanh(softplus(x));
    case OpKind::HardSwish: return x * std::clamp(x / 6 + 0.5, 0.0, 1.0);
    case OpKind::HardSigmoid: return std::clamp(alpha * x + beta, 0.0, 1.0);
    case OpKind::LeakyRelu: return x < 0 ? alpha * x : x;
    case OpKind::Elu: return x < 0 ? alpha * std::expm1(x) : x;
    case OpKind::Selu: return x <= 0 ? beta * alpha * std::expm1(x) : beta * x;
    case OpKind::Celu: return x > 0 ? x : alpha * std::expm1(x / alpha);
    case OpKind::ThresholdedRelu: return x > alpha ? x : 0.0;
    case OpKind::Clip: return std::clamp(x, alpha, beta);
    case OpKind::Erf: return std::erf(x);
    case OpKind::Floor: return std::floor(x);
    case OpKind::Ceil: return std::ceil(x);
    case OpKind::Round: return std::nearbyint(x);
    case OpKind::Sign: return double((x > 0) - (x < 0));
    case OpKind::IsNaN: return std::isnan(x);
    case OpKind::Not: return x == 0;
    default: ADD_FAILURE() << "interp: no unary " << op_name(k); return 0;
  }
}

inline double ref_binary(OpKind k, double a, double b, double alpha) {
  switch (k) {
    case OpKind::Add: return a + b;
    case OpKind::Sub: return a - b;
    case OpKind::Mul: return a * b;
    case OpKind::Div: return a / b;
    case OpKind::Pow: return std::pow(a, b);
    case OpKind::Max: return std::max(a, b);
    case OpKind::Min: return std::min(a, b);
    case OpKind::Mod: {
      double r = std::fmod(a, b);
      if (alpha == 0 && r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    }
    case OpKind::And: return a != 0 && b != 0;
    case OpKind::Or: return a != 0 || b != 0;
    case OpKind::Xor: return (a != 0) != (b != 0);
    case OpKind::Equal: return a == b;
    case OpKind::NotEqual: return a != b;
    case OpKind::Less: return a < b;
    case OpKind::LessEqual: return a <= b;
    case OpKind::Greater: return a > b;
    case OpKind::GreaterEqual: return a >= b;
    default: ADD_FAILURE() << "interp: no binary " << op_name(k); return 0;
  }
}

namespace interp_detail {

inline T round_all(T t) {
  for (double& v : t.v) v = round_to(v, t.dtype);
  return t;
}

inline T from_blob(const Shape& s, const Blob& b) {
  TypedTensor tt{s.dtype(), s.static_dims(), std::vector<uint8_t>(b.data(), b.data() + b.size())};
  return from_typed(tt);
}

inline T act(const T& x, Activation a, double alpha) {
  switch (a) {
    case Activation::None: return x;
    case Activation::Relu: return ref::map(x, [](double v) { return v < 0 ? 0.0 : v; }, x.dtype);
    case Activation::Gelu: return ref::map(x, ref::gelu, x.dtype);
    case Activation::GeluTanh: return ref::map(x, ref::gelu_tanh, x.dtype);
    case Activation::Silu: return ref::map(x, [](double v) { return v / (1 + std::exp(-v)); }, x.dtype);
    case Activation::Sigmoid: return ref::map(x, [](double v) { return 1 / (1 + std::exp(-v)); }, x.dtype);
    case Activation::Tanh: return ref::map(x, [](double v) { return std::tanh(v); }, x.dtype);
    case Activation::LeakyRelu: return ref::map(x, [=](double v) { return v < 0 ? alpha * v : v; }, x.dtype);
  }
  return x;
}

inline int axis_of(int64_t a, int rank) { return int(a < 0 ? a + rank : a); }

}  // namespace interp_detail

// Evaluates `g` on `inputs` and `params` (by public name); returns the outputs.
inline std::vector<T> interpret(const Graph& g, const Feeds& inputs, const Feeds& params) {
  using namespace interp_detail;
  std::vector<std::vector<T>> val(g.nodes().size());
  for (size_t id = 0; id < g.nodes().size(); ++id) {
    const Node& n = g.nodes()[id];
    auto in = [&](size_t i) -> const T& { return val[size_t(n.inputs[i].node)][size_t(n.inputs[i].out)]; };
    auto has = [&](size_t i) { return i < n.inputs.size() && n.inputs[i].valid(); };
    const Shape& os = n.outputs[0];
    const DType od = os.dtype();
    std::vector<T> out;
    double alpha = 0, beta = 0;  // ScalarAttrs, or clip/gelu/mod/is_inf's attributes as numbers
    ir::scalar_params(n.attrs, alpha, beta);
    switch (n.kind) {
      case OpKind::Input: out.push_back(inputs.at(n.attr<LeafAttrs>().name)); break;
      case OpKind::Param: {
        const auto& la = n.attr<LeafAttrs>();
        auto it = params.find(la.name);
        out.push_back(it != params.end() ? it->second : from_blob(os, la.init));
        break;
      }
      case OpKind::Constant: out.push_back(from_blob(os, n.attr<ConstantAttrs>().value)); break;
      case OpKind::Cast: out.push_back(ref::map(in(0), [](double v) { return v; }, od)); break;
      case OpKind::Where:
        out.push_back(ref::zip({&in(0), &in(1), &in(2)}, [](const std::vector<double>& v) { return v[0] ? v[1] : v[2]; }, od));
        break;
      case OpKind::MatMul: out.push_back(ref::matmul(in(0), in(1))); break;
      case OpKind::FusedMatMul: {
        T y = ref::matmul(in(0), in(1));
        if (has(2)) y = ref::binary(y, in(2), std::plus<double>(), od);
        const auto& fa = n.attr<FusedMatMulAttrs>();
        out.push_back(act(y, fa.activation, fa.alpha));
        break;
      }
      case OpKind::ReduceSum: case OpKind::ReduceMean: case OpKind::ReduceMax: case OpKind::ReduceMin:
      case OpKind::ReduceProd: {
        const auto& ra = n.attr<ReduceAttrs>();
        const ref::Red r = n.kind == OpKind::ReduceSum ? ref::Red::Sum : n.kind == OpKind::ReduceMean ? ref::Red::Mean
                           : n.kind == OpKind::ReduceMax ? ref::Red::Max : n.kind == OpKind::ReduceMin ? ref::Red::Min
                                                                                                      : ref::Red::Prod;
        out.push_back(ref::reduce(in(0), ra.axes, ra.keepdims, r));
        break;
      }
      case OpKind::ArgMax: case OpKind::ArgMin: {
        const auto& aa = n.attr<ArgReduceAttrs>();
        out.push_back(ref::arg_reduce(in(0), axis_of(aa.axis, in(0).rank()), aa.keepdims, n.kind == OpKind::ArgMax,
                                      aa.select_last_index));
        break;
      }
      case OpKind::TopK: {
        const auto& ta = n.attr<TopKAttrs>();
        auto [v, i] = ref::topk(in(0), ta.k, axis_of(ta.axis, in(0).rank()), ta.largest);
        out = {v, i};
        break;
      }
      case OpKind::Softmax: case OpKind::LogSoftmax:
        out.push_back(ref::softmax(in(0), axis_of(n.attr<AxisAttrs>().axis, in(0).rank()), n.kind == OpKind::LogSoftmax));
        break;
      case OpKind::LayerNorm: case OpKind::RmsNorm: {
        const auto& na = n.attr<NormAttrs>();
        out.push_back(ref::norm(in(0), has(1) ? &in(1) : nullptr, has(2) ? &in(2) : nullptr,
                                axis_of(na.axis, in(0).rank()), na.epsilon, n.kind == OpKind::RmsNorm));
        break;
      }
      case OpKind::Reshape: {
        T y = in(0);
        y.dims = os.static_dims();
        out.push_back(y);
        break;
      }
      case OpKind::Transpose: out.push_back(ref::transpose(in(0), n.attr<TransposeAttrs>().perm)); break;
      case OpKind::Slice: out.push_back(ref::slice(in(0), n.attr<SliceAttrs>())); break;
      case OpKind::Concat: {
        std::vector<T> parts;
        for (size_t i = 0; i < n.inputs.size(); ++i) parts.push_back(in(i));
        out.push_back(ref::concat(parts, axis_of(n.attr<AxisAttrs>().axis, in(0).rank())));
        break;
      }
      case OpKind::Split: {
        const auto& sp = n.attr<SplitAttrs>();
        const int ax = axis_of(sp.axis, in(0).rank());
        int64_t at = 0;
        for (int64_t s : sp.sizes) {
          SliceAttrs a{{at}, {at + s}, {ax}, {}};
          out.push_back(ref::slice(in(0), a));
          at += s;
        }
        break;
      }
      case OpKind::Gather: out.push_back(ref::gather(in(0), in(1), axis_of(n.attr<AxisAttrs>().axis, in(0).rank()))); break;
      case OpKind::Expand: out.push_back(ref::expand(in(0), n.attr<ShapeAttrs>().shape)); break;
      case OpKind::Pad: {
        const auto& pa = n.attr<PadAttrs>();
        out.push_back(ref::pad(in(0), pa.pads, pa.mode, pa.value));
        break;
      }
      case OpKind::Tile: out.push_back(ref::tile(in(0), n.attr<TileAttrs>().repeats)); break;
      case OpKind::Conv2d: case OpKind::FusedConv2d: {
        // Channels last: the NCHW reference between transposes (x, w and the residual in).
        const bool fused = n.kind == OpKind::FusedConv2d;
        ConvAttrs ca = fused ? n.attr<FusedConvAttrs>().conv() : n.attr<ConvAttrs>();
        const bool last = ca.nhwc;
        ca.nhwc = false;
        const std::vector<int64_t> to_first{0, 3, 1, 2}, to_last{0, 2, 3, 1};
        auto first = [&](const T& x) { return last ? ref::transpose(x, to_first) : x; };
        T y = ref::conv2d(first(in(0)), first(in(1)), has(2) ? &in(2) : nullptr, ca);
        if (fused) {
          const auto& fa = n.attr<FusedConvAttrs>();
          if (has(3)) y = ref::binary(y, first(in(3)), std::plus<double>(), od);
          y = act(y, fa.activation, fa.alpha);
        }
        out.push_back(last ? ref::transpose(y, to_last) : y);
        break;
      }
      case OpKind::ConvInteger: out.push_back(ref::conv_integer(in(0), in(1), in(2), in(3), n.attr<ConvAttrs>())); break;
      case OpKind::Dft: case OpKind::Idft: out.push_back(ref::dft(in(0), n.kind == OpKind::Idft)); break;
      case OpKind::MaxPool2d: case OpKind::AvgPool2d: {
        if (!n.attr<PoolAttrs>().nhwc) {
          out.push_back(ref::pool2d(in(0), n.attr<PoolAttrs>(), n.kind == OpKind::MaxPool2d));
          break;
        }
        PoolAttrs pa = n.attr<PoolAttrs>();
        pa.nhwc = false;
        out.push_back(ref::transpose(ref::pool2d(ref::transpose(in(0), {0, 3, 1, 2}), pa, n.kind == OpKind::MaxPool2d),
                                     {0, 2, 3, 1}));
        break;
      }
      case OpKind::Attention: {
        const auto& aa = n.attr<AttentionAttrs>();
        if (!aa.bshd) {
          out.push_back(ref::attention(in(0), in(1), in(2), has(3) ? &in(3) : nullptr, aa.causal, aa.scale));
          break;
        }
        const std::vector<int64_t> swap{0, 2, 1, 3};  // [B,S,H,D] <-> [B,H,S,D]
        out.push_back(ref::transpose(ref::attention(ref::transpose(in(0), swap), ref::transpose(in(1), swap),
                                                    ref::transpose(in(2), swap), has(3) ? &in(3) : nullptr, aa.causal,
                                                    aa.scale),
                                     swap));
        break;
      }
      case OpKind::Rotary: out.push_back(ref::rotary(in(0), in(1), in(2), n.attr<RotaryAttrs>().interleaved)); break;
      default:
        if (ir::has_trait(n.kind, ir::kUnary)) {
          out.push_back(ref::map(in(0), [&](double v) { return ref_unary(n.kind, v, alpha, beta); }, od));
        } else if (n.inputs.size() == 2) {
          out.push_back(ref::binary(in(0), in(1), [&](double a, double b) { return ref_binary(n.kind, a, b, alpha); }, od));
        } else {
          ADD_FAILURE() << "interp: op " << op_name(n.kind) << " not interpreted";
          out.push_back(T(os.static_dims(), od));
        }
    }
    for (size_t o = 0; o < out.size(); ++o) {
      out[o].dtype = n.outputs[o].dtype();
      out[o] = round_all(out[o]);
    }
    val[id] = std::move(out);
  }
  std::vector<T> res;
  for (const GraphOutput& o : g.outputs()) res.push_back(val[size_t(o.value.node)][size_t(o.value.out)]);
  return res;
}

}  // namespace rlx::e2e
