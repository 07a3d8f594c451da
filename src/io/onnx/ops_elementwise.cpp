// Elementwise ONNX ops: unary math, parameterized activations, binary arithmetic and
// comparison, variadic Sum/Mean/Max/Min, Where, Clip, BitShift, Identity, Dropout.
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "io/onnx/ops_table.h"

namespace rlx::onnx {

namespace {

const std::map<std::string, OpKind, std::less<>>& unary_kinds() {
  static const std::map<std::string, OpKind, std::less<>> m = {
      {"Abs", OpKind::Abs},         {"Neg", OpKind::Neg},       {"Exp", OpKind::Exp},
      {"Log", OpKind::Log},         {"Sqrt", OpKind::Sqrt},     {"Reciprocal", OpKind::Reciprocal},
      {"Sin", OpKind::Sin},         {"Cos", OpKind::Cos},       {"Tan", OpKind::Tan},
      {"Asin", OpKind::Asin},       {"Acos", OpKind::Acos},     {"Atan", OpKind::Atan},
      {"Sinh", OpKind::Sinh},       {"Cosh", OpKind::Cosh},     {"Asinh", OpKind::Asinh},
      {"Acosh", OpKind::Acosh},     {"Atanh", OpKind::Atanh},   {"Tanh", OpKind::Tanh},
      {"Sigmoid", OpKind::Sigmoid}, {"Relu", OpKind::Relu},     {"Softplus", OpKind::Softplus},
      {"Softsign", OpKind::Softsign}, {"Erf", OpKind::Erf},     {"Floor", OpKind::Floor},
      {"Ceil", OpKind::Ceil},       {"Round", OpKind::Round},   {"Sign", OpKind::Sign},
      {"IsNaN", OpKind::IsNaN},     {"Not", OpKind::Not},       {"BitwiseNot", OpKind::BitwiseNot},
      {"Mish", OpKind::Mish},       {"HardSwish", OpKind::HardSwish},
  };
  return m;
}

const std::map<std::string, OpKind, std::less<>>& binary_kinds() {
  static const std::map<std::string, OpKind, std::less<>> m = {
      {"Add", OpKind::Add},           {"Sub", OpKind::Sub},
      {"Mul", OpKind::Mul},           {"Div", OpKind::Div},
      {"Pow", OpKind::Pow},           {"Equal", OpKind::Equal},
      {"Less", OpKind::Less},         {"Greater", OpKind::Greater},
      {"LessOrEqual", OpKind::LessEqual}, {"GreaterOrEqual", OpKind::GreaterEqual},
      {"And", OpKind::And},           {"Or", OpKind::Or},
      {"Xor", OpKind::Xor},           {"BitwiseAnd", OpKind::BitwiseAnd},
      {"BitwiseOr", OpKind::BitwiseOr}, {"BitwiseXor", OpKind::BitwiseXor},
  };
  return m;
}

}  // namespace

namespace {

// uint16 is carried as i32: results of ops that can leave [0, 65535] wrap back.
Value wrap_u16(NodeCtx& c, int onnx_t, Value v) {
  if (onnx_t != kUint16) return v;
  c.set_out_type(0, kUint16);
  return c.op(OpKind::BitwiseAnd, {v, c.scalar(65535, DType::I32)});
}

}  // namespace

std::vector<Value> lower_unary(NodeCtx& c) {
  auto it = unary_kinds().find(c.node.op_type());
  if (it == unary_kinds().end()) c.unsupported("no unary mapping");
  Value y = c.op(it->second, {c.in(0)});
  if (it->second == OpKind::BitwiseNot || it->second == OpKind::Neg) y = wrap_u16(c, c.onnx_type(0), y);
  return {y};
}

namespace {

// Opsets 1-6 broadcast B onto A only when `broadcast` is 1: B's dims are a contiguous run
// of A's starting at `axis` (by default the trailing ones); with broadcast 0 the shapes
// must be equal. B comes back reshaped to A's rank, so numpy broadcasting then does the
// rest.
Value legacy_broadcast(NodeCtx& c, Value a, Value b) {
  const auto da = c.vdims(a), db = c.vdims(b);
  const std::string ta = c.g.type(a).str(), tb = c.g.type(b).str();
  if (!c.attr_int("broadcast", 0)) {
    if (da != db) c.invalid("shapes ", ta, " and ", tb, " differ and broadcast is 0");
    return b;
  }
  const int64_t ra = int64_t(da.size()), rb = int64_t(db.size());
  if (rb > ra) c.invalid("B ", tb, " has a higher rank than A ", ta);
  const int64_t axis = c.has_attr("axis") ? c.axis(c.attr_int("axis", 0), ra) : ra - rb;
  if (axis + rb > ra) c.invalid("B ", tb, " at axis ", axis, " runs past A ", ta);
  std::vector<int64_t> shape(size_t(axis), 1);
  for (int64_t i = 0; i < rb; ++i) {
    if (db[size_t(i)] != da[size_t(axis + i)] && db[size_t(i)] != 1)
      c.invalid("B ", tb, " does not match A ", ta, " at axis ", axis);
    shape.push_back(db[size_t(i)]);
  }
  while (int64_t(shape.size()) < ra) shape.push_back(1);
  return shape == db ? b : c.reshape(b, shape);
}

}  // namespace

std::vector<Value> lower_binary(NodeCtx& c) {
  auto it = binary_kinds().find(c.node.op_type());
  if (it == binary_kinds().end()) c.unsupported("no binary mapping");
  Value a = c.in(0), b = c.in(1);
  if (c.opset < 7) b = legacy_broadcast(c, a, b);
  Value y = c.op(it->second, {a, b});
  OpKind k = it->second;
  if (k == OpKind::Add || k == OpKind::Sub || k == OpKind::Mul) y = wrap_u16(c, c.onnx_type(0), y);
  return {y};
}

// Parameterized activations whose ScalarAttrs carry the ONNX attributes.
std::vector<Value> lower_activation(NodeCtx& c) {
  const std::string& t = c.node.op_type();
  ScalarAttrs s;
  OpKind k;
  if (t == "LeakyRelu") { k = OpKind::LeakyRelu; s.alpha = c.attr_float("alpha", 0.01); }
  else if (t == "Elu") { k = OpKind::Elu; s.alpha = c.attr_float("alpha", 1.0); }
  else if (t == "Celu") { k = OpKind::Celu; s.alpha = c.attr_float("alpha", 1.0); }
  else if (t == "ThresholdedRelu") { k = OpKind::ThresholdedRelu; s.alpha = c.attr_float("alpha", 1.0); }
  else if (t == "Selu") {
    k = OpKind::Selu;
    s.alpha = c.attr_float("alpha", 1.67326319217681884765625);
    s.beta = c.attr_float("gamma", 1.05070102214813232421875);
  } else if (t == "HardSigmoid") {
    k = OpKind::HardSigmoid;
    s.alpha = c.attr_float("alpha", 0.2);
    s.beta = c.attr_float("beta", 0.5);
  } else {
    c.unsupported("no activation mapping");
  }
  // ONNX stores these attributes as float32; use that exact value.
  s.alpha = double(float(s.alpha));
  s.beta = double(float(s.beta));
  return {c.op(k, {c.in(0)}, s)};
}

std::vector<Value> lower_gelu(NodeCtx& c) {
  std::string approx = c.attr_str("approximate", "none");
  if (approx != "none" && approx != "tanh") c.invalid("approximate must be 'none' or 'tanh', got '", approx, "'");
  return {c.op(OpKind::Gelu, {c.in(0)}, GeluAttrs{approx == "tanh"})};
}

// x * sigmoid(alpha * x)
std::vector<Value> lower_swish(NodeCtx& c) {
  Value x = c.in(0);
  double alpha = double(float(c.attr_float("alpha", 1.0)));
  if (alpha == 1.0) return {c.op(OpKind::Silu, {x})};
  Value ax = c.op(OpKind::Mul, {x, c.scalar(alpha, c.dtype(0))});
  return {c.op(OpKind::Mul, {x, c.op(OpKind::Sigmoid, {ax})})};
}

// where(x < 0, slope * x, x), slope broadcast unidirectionally to x.
std::vector<Value> lower_prelu(NodeCtx& c) {
  Value x = c.in(0), slope = c.in(1);
  // Opsets 1-6: a 1-D slope of C entries is per channel (axis 1), not numpy-aligned to the
  // last axis.
  if (c.opset < 7 && c.rank(1) == 1 && c.rank(0) >= 2) {
    const auto dx = c.dims(0), ds = c.dims(1);
    if (ds[0] != 1) {
      if (ds[0] != dx[1]) c.invalid("slope of ", ds[0], " entries for ", dx[1], " channels");
      std::vector<int64_t> shape(dx.size() - 1, 1);
      shape[0] = ds[0];
      slope = c.reshape(slope, shape);
    }
  }
  Value zero = c.scalar(0, c.dtype(0));
  Value neg = c.op(OpKind::Less, {x, zero});
  return {c.op(OpKind::Where, {neg, c.op(OpKind::Mul, {x, slope}), x})};
}

// y = x < -lambd ? x + bias : (x > lambd ? x - bias : 0)
std::vector<Value> lower_shrink(NodeCtx& c) {
  Value x = c.in(0);
  DType t = c.dtype(0);
  double lambd = double(float(c.attr_float("lambd", 0.5))), bias = double(float(c.attr_float("bias", 0.0)));
  Value lo = c.op(OpKind::Less, {x, c.scalar(-lambd, t)});
  Value hi = c.op(OpKind::Greater, {x, c.scalar(lambd, t)});
  Value zero = c.scalar(0, t);
  Value upper = c.op(OpKind::Where, {hi, c.op(OpKind::Sub, {x, c.scalar(bias, t)}), zero});
  return {c.op(OpKind::Where, {lo, c.op(OpKind::Add, {x, c.scalar(bias, t)}), upper})};
}

std::vector<Value> lower_is_inf(NodeCtx& c) {
  Value x = c.in(0);
  DType t = c.dtype(0);
  bool pos = c.attr_int("detect_positive", 1) != 0, neg = c.attr_int("detect_negative", 1) != 0;
  const double inf = std::numeric_limits<double>::infinity();
  Value p = c.op(OpKind::Equal, {x, c.scalar(inf, t)});
  Value n = c.op(OpKind::Equal, {x, c.scalar(-inf, t)});
  if (pos && neg) return {c.op(OpKind::Or, {p, n})};
  if (pos) return {p};
  if (neg) return {n};
  return {c.op(OpKind::And, {p, n})};  // always false, shaped like x
}

std::vector<Value> lower_mod(NodeCtx& c) {
  bool fmod = c.attr_int("fmod", 0) != 0;
  return {c.op(OpKind::Mod, {c.in(0), c.in(1)}, ModAttrs{fmod})};
}

std::vector<Value> lower_variadic(NodeCtx& c) {
  const std::string& t = c.node.op_type();
  OpKind k = t == "Max" ? OpKind::Max : t == "Min" ? OpKind::Min : OpKind::Add;
  if (c.num_inputs() < 1) c.invalid("needs at least one input");
  Value acc = c.in(0);
  for (int i = 1; i < c.num_inputs(); ++i) acc = c.op(k, {acc, c.in(i)});
  if (t == "Mean") {
    if (c.num_inputs() == 1) return {acc};
    acc = c.op(OpKind::Div, {acc, c.scalar(double(c.num_inputs()), c.g.type(acc).dtype())});
  }
  return {acc};
}

std::vector<Value> lower_where(NodeCtx& c) { return {c.op(OpKind::Where, {c.in(0), c.in(1), c.in(2)})}; }

std::vector<Value> lower_clip(NodeCtx& c) {
  Value x = c.in(0);
  DType t = c.dtype(0);
  double inf = std::numeric_limits<double>::infinity();
  double lo = -inf, hi = inf;
  if (c.opset < 11) {
    lo = double(float(c.attr_float("min", -3.4028234663852886e38)));
    hi = double(float(c.attr_float("max", 3.4028234663852886e38)));
    return {c.op(OpKind::Clip, {x}, ClipAttrs{lo, hi})};
  }
  bool lo_const = !c.has(1) || c.is_const(1), hi_const = !c.has(2) || c.is_const(2);
  if (lo_const && hi_const) {
    if (c.has(1)) lo = c.const_reals(1, "min").at(0);
    if (c.has(2)) hi = c.const_reals(2, "max").at(0);
    if (is_integer(t)) {
      // Integer clip bounds are exact only inside the type's range.
      if (std::isinf(lo)) lo = -9.2233720368547758e18;
      if (std::isinf(hi)) hi = 9.2233720368547758e18;
    }
    if (!c.has(1) && !c.has(2)) return {c.op(OpKind::Identity, {x})};
    if (is_integer(t) && (std::fabs(lo) > 9.0e15 || std::fabs(hi) > 9.0e15)) {
      // Bounds beyond double's exact integers: use max/min with typed constants.
      if (c.has(1)) x = c.op(OpKind::Max, {x, c.cast(c.in(1), t)});
      if (c.has(2)) x = c.op(OpKind::Min, {x, c.cast(c.in(2), t)});
      return {x};
    }
    return {c.op(OpKind::Clip, {x}, ClipAttrs{lo, hi})};
  }
  if (c.has(1)) x = c.op(OpKind::Max, {x, c.in(1)});
  if (c.has(2)) x = c.op(OpKind::Min, {x, c.in(2)});
  return {x};
}

// Shifts by gathering powers of two: x << y == x * 2^y, x >> y == x / 2^y (unsigned).
std::vector<Value> lower_bitshift(NodeCtx& c) {
  std::string dir = c.attr_str("direction", "");
  if (dir != "LEFT" && dir != "RIGHT") c.invalid("direction must be LEFT or RIGHT, got '", dir, "'");
  Value x = c.in(0), y = c.in(1);
  DType t = c.dtype(0);
  if (!is_integer(t)) c.invalid("needs integer inputs");
  int bits = int(dtype_size(t)) * 8;
  std::vector<uint8_t> table(size_t(bits + 1) * dtype_size(t), 0);
  for (int i = 0; i < bits; ++i) {
    uint64_t p = uint64_t(1) << i;
    std::memcpy(table.data() + size_t(i) * dtype_size(t), &p, dtype_size(t));
  }
  // Shifts by the full width or more, or by a negative amount, push every bit out
  // (table entry `bits` is 0): 0, or -1 for a negative value shifted right.
  HostTensor tab;
  tab.dtype = t;
  tab.dims = {bits + 1};
  tab.bytes = table;
  Value y64 = c.cast(y, DType::I64);
  Value out_of_range = c.op(OpKind::Or, {c.op(OpKind::Less, {y64, c.scalar(0, DType::I64)}),
                                         c.op(OpKind::GreaterEqual, {y64, c.scalar(bits, DType::I64)})});
  Value idx = c.op(OpKind::Where, {out_of_range, c.scalar(bits, DType::I64), y64});
  Value pw = c.op(OpKind::Gather, {c.im.constant(tab), idx}, AxisAttrs{0});
  if (dir == "LEFT") return {wrap_u16(c, c.onnx_type(0), c.op(OpKind::Mul, {x, pw}))};
  Value zero = c.scalar(0, t);
  Value is_zero = c.op(OpKind::Equal, {pw, zero});
  Value safe = c.op(OpKind::Where, {is_zero, c.scalar(1, t), pw});
  // Floor division (arithmetic shift): (x - floor_mod(x, p)) / p is exact.
  Value q = c.op(OpKind::Div, {c.op(OpKind::Sub, {x, c.op(OpKind::Mod, {x, safe}, ModAttrs{false})}), safe});
  Value fill = zero;
  if (is_signed(t)) fill = c.op(OpKind::Where, {c.op(OpKind::Less, {x, zero}), c.scalar(-1, t), zero});
  return {c.op(OpKind::Where, {is_zero, fill, q})};
}

std::vector<Value> lower_identity(NodeCtx& c) { return {c.in(0)}; }

// Inference-mode dropout: identity, and an all-true mask when asked for.
std::vector<Value> lower_dropout(NodeCtx& c) {
  // Opsets 1-6: training mode unless is_test is set (a ratio of 0 drops nothing either way).
  if (c.opset < 7 && !c.attr_int("is_test", 0) && double(float(c.attr_float("ratio", 0.5))) != 0)
    c.unsupported("training-mode dropout (random; is_test is 0) is not supported");
  if (c.opset >= 12 && c.has(2)) {
    if (c.const_ints(2, "training_mode").at(0) != 0) {
      double ratio = c.has(1) ? c.const_reals(1, "ratio").at(0) : 0.5;
      if (ratio != 0) c.unsupported("training-mode dropout (random) is not supported");
    }
  }
  Value x = c.in(0);
  std::vector<Value> out{x};
  // The mask is of the input's type before opset 10, bool from it.
  if (c.wants(1)) out.push_back(c.full(c.dims(0), 1, c.opset < 10 ? c.dtype(0) : DType::Bool));
  return out;
}

}  // namespace rlx::onnx
