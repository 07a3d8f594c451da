// Integer and quantized linear algebra: MatMulInteger and QLinearMatMul (exact i32
// matmul of zero-point-shifted operands), ConvInteger and QLinearConv over 2-D images as
// the IR's conv_integer (int8 kernels, int32 accumulation; other ranks: an f64 conv of the
// shifted operands, exact for any i8/u8 sizes), requantized like the reference:
// rint(acc * (a_scale * b_scale / y_scale) + y_zero_point), saturated.
#include "io/onnx/ops_table.h"

namespace rlx::onnx {

// Declared in ops_conv.cpp.
std::vector<Value> lower_conv(NodeCtx& c);
Value conv_integer_2d(NodeCtx& c, Value x_zp, Value w_zp);

namespace {

// x - zp with zp broadcast per row (rows_axis = -2 for A) or per column (for B).
Value shifted(NodeCtx& c, Value x, Value zp, DType t, int where) {
  Value xs = c.cast(x, t);
  if (!zp.valid()) return xs;
  auto zd = c.vdims(zp);
  int64_t n = 1;
  for (int64_t d : zd) n *= d;
  Value z = c.cast(zp, t);
  if (n > 1 && zd.size() == 1) {
    auto xd = c.vdims(x);
    if (where == 0) z = c.reshape(z, {n, 1});  // per row of A
    else if (where == 2) {                   // per output channel of a conv weight
      std::vector<int64_t> s(xd.size(), 1);
      s[0] = n;
      z = c.reshape(z, s);
    }
  } else if (n == 1) {
    z = c.reshape(z, {});
  }
  return c.op(OpKind::Sub, {xs, z});
}

void int_range(int onnx_t, double& lo, double& hi) {
  if (onnx_t == kInt8) lo = -128, hi = 127;
  else if (onnx_t == kUint8) lo = 0, hi = 255;
  else if (onnx_t == kInt32) lo = -2147483648.0, hi = 2147483647.0;
  else fail(ErrorCategory::Unsupported, "requantization to ", onnx_type_name(onnx_t));
}

Value scale_like(NodeCtx& c, Value s, bool per_column) {
  auto d = c.vdims(s);
  int64_t n = 1;
  for (int64_t v : d) n *= v;
  Value f = c.cast(s, DType::F32);
  if (n == 1) return c.reshape(f, {});
  return per_column ? c.reshape(f, {n}) : c.reshape(f, {n, 1});
}

// rint(acc * a_scale * b_scale / y_scale + y_zp), saturated to y_zp's type.
Value requantize(NodeCtx& c, Value acc, Value scale, Value y_zp, int y_type) {
  Value y = c.op(OpKind::Mul, {c.cast(acc, DType::F32), scale});
  if (y_zp.valid()) y = c.op(OpKind::Add, {y, c.reshape(c.cast(y_zp, DType::F32), {})});
  y = c.op(OpKind::Round, {y});
  double lo, hi;
  int_range(y_type, lo, hi);
  y = c.op(OpKind::Clip, {y}, ClipAttrs{lo, hi});
  return c.cast(y, *carried_dtype(y_type));
}

}  // namespace

std::vector<Value> lower_matmul_integer(NodeCtx& c) {
  Value a = shifted(c, c.in(0), c.in_or(2), DType::I32, 0);
  Value b = shifted(c, c.in(1), c.in_or(3), DType::I32, 1);
  return {c.op(OpKind::MatMul, {a, b})};
}

std::vector<Value> lower_qlinear_matmul(NodeCtx& c) {
  Value a = shifted(c, c.in(0), c.in_or(2), DType::I32, 0);
  Value b = shifted(c, c.in(3), c.in_or(5), DType::I32, 1);
  Value acc = c.op(OpKind::MatMul, {a, b});
  Value scale = c.op(OpKind::Div, {c.op(OpKind::Mul, {scale_like(c, c.in(1), false), scale_like(c, c.in(4), true)}),
                                   c.reshape(c.cast(c.in(6), DType::F32), {})});
  int y_type = c.has(7) ? c.onnx_type(7) : c.onnx_type(0);
  c.set_out_type(0, y_type);
  return {requantize(c, acc, scale, c.in_or(7), y_type)};
}

namespace {

// Runs the Conv lowering on (x, w[, bias]) of this node with f64 operands.
Value conv_f64(NodeCtx& c, Value x, Value w, Value bias) {
  pb::NodeProto n = c.node;
  n.clear_input();
  std::string xs = n.name() + "__x", ws = n.name() + "__w", bs = n.name() + "__b";
  c.im.define(xs, x);
  c.im.define(ws, w);
  n.add_input(xs);
  n.add_input(ws);
  if (bias.valid()) {
    c.im.define(bs, bias);
    n.add_input(bs);
  }
  NodeCtx sub(c.im, n);
  return lower_conv(sub).at(0);
}

// The integer accumulator of a 2-D conv of 8-bit x (input xi) and w (input wi) with their
// zero points (inputs xzi, wzi; 0 of each type when absent) as the IR's conv_integer (integer
// kernels); an invalid Value where it does not apply (other ranks or types, negative pads).
Value integer_conv(NodeCtx& c, int xi, int wi, int xzi, int wzi) {
  auto eight_bit = [&](int i) { return c.dtype(i) == DType::U8 || c.dtype(i) == DType::I8; };
  if (c.rank(xi) != 4 || !eight_bit(xi) || !eight_bit(wi)) return Value{};
  auto zero_point = [&](int i, int of) {
    if (!c.has(i)) return c.scalar(0, c.dtype(of));
    Value z = c.in(i);
    auto d = c.vdims(z);
    int64_t n = 1;
    for (int64_t v : d) n *= v;
    if (n == 1) return c.reshape(z, {});
    return d.size() == 1 ? z : c.reshape(z, {n});  // per output channel
  };
  pb::NodeProto n = c.node;  // conv_integer_2d reads x and w as inputs 0 and 1
  n.clear_input();
  n.add_input(c.node.input(xi));
  n.add_input(c.node.input(wi));
  NodeCtx sub(c.im, n);
  sub.opset = c.opset;
  return conv_integer_2d(sub, zero_point(xzi, xi), zero_point(wzi, wi));
}

}  // namespace

std::vector<Value> lower_conv_integer(NodeCtx& c) {
  if (Value y = integer_conv(c, 0, 1, 2, 3); y.valid()) return {y};
  Value x = shifted(c, c.in(0), c.in_or(2), DType::F64, 1);
  Value w = shifted(c, c.in(1), c.in_or(3), DType::F64, 2);
  return {c.cast(conv_f64(c, x, w, Value{}), DType::I32)};
}

// Inputs: x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias (i32).
std::vector<Value> lower_qlinear_conv(NodeCtx& c) {
  Value acc = integer_conv(c, 0, 3, 2, 5);
  if (acc.valid()) {
    if (c.has(8)) acc = c.op(OpKind::Add, {acc, c.reshape(c.cast(c.in(8), DType::I32), {c.vdims(acc)[1], 1, 1})});
  } else {
    Value x = shifted(c, c.in(0), c.in_or(2), DType::F64, 1);
    Value w = shifted(c, c.in(3), c.in_or(5), DType::F64, 2);
    Value bias = c.has(8) ? c.cast(c.in(8), DType::F64) : Value{};
    acc = conv_f64(c, x, w, bias);
  }
  auto yd = c.vdims(acc);
  Value ws = c.cast(c.in(4), DType::F32);
  auto wsd = c.vdims(ws);
  int64_t n = 1;
  for (int64_t d : wsd) n *= d;
  std::vector<int64_t> per_channel(yd.size(), 1);
  per_channel[1] = n;
  ws = n == 1 ? c.reshape(ws, {}) : c.reshape(ws, per_channel);
  Value scale = c.op(OpKind::Div, {c.op(OpKind::Mul, {c.reshape(c.cast(c.in(1), DType::F32), {}), ws}),
                                   c.reshape(c.cast(c.in(6), DType::F32), {})});
  int y_type = c.has(7) ? c.onnx_type(7) : c.onnx_type(0);
  c.set_out_type(0, y_type);
  return {requantize(c, acc, scale, c.in_or(7), y_type)};
}

}  // namespace rlx::onnx
