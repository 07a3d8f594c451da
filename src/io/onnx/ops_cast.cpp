// Casts and quantization: Cast, CastLike, QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear. Types without an rlx dtype are carried widened (see
// include/rlx/onnx.h), so casting to them is a composition on the carrier:
// float8/float4 round to the type's grid (exact compare/where chains), int4/int2 wrap.
#include <cmath>
#include <limits>

#include "io/onnx/ops_table.h"

namespace rlx::onnx {

namespace {

struct Mini {
  int exp_bits, man_bits, bias;
  bool has_inf;
};

Mini mini_of(int t) {
  switch (t) {
    case kF8E4M3FN: return {4, 3, 7, false};
    case kF8E4M3FNUZ: return {4, 3, 8, false};
    case kF8E5M2: return {5, 2, 15, true};
    case kF8E5M2FNUZ: return {5, 2, 16, false};
    case kF4E2M1: return {2, 1, 1, false};
    default: fail(ErrorCategory::Internal, "not a minifloat: ", t);
  }
}

}  // namespace

// Rounds f32 values to the minifloat grid (ties to even), with the type's overflow rule.
Value round_to_minifloat_graph(NodeCtx& c, Value x, int type, bool saturate) {
  Mini m = mini_of(type);
  const DType f = DType::F32;
  x = c.cast(x, f);
  Value a = c.op(OpKind::Abs, {x});
  int emin = 1 - m.bias;
  int top = (1 << m.exp_bits) - 1;
  int emax = (m.has_inf ? top - 1 : top) - m.bias;
  double maxv = static_cast<double>(round_to_minifloat(std::numeric_limits<float>::max(), type, true));
  Value quantum = c.scalar(std::ldexp(1.0, emin - m.man_bits), f);
  for (int e = emin + 1; e <= emax; ++e) {
    Value ge = c.op(OpKind::GreaterEqual, {a, c.scalar(std::ldexp(1.0, e), f)});
    quantum = c.op(OpKind::Where, {ge, c.scalar(std::ldexp(1.0, e - m.man_bits), f), quantum});
  }
  Value q = c.op(OpKind::Mul, {c.op(OpKind::Round, {c.op(OpKind::Div, {a, quantum})}), quantum});
  double over = std::numeric_limits<double>::quiet_NaN();
  if (saturate || type == kF4E2M1) over = maxv;
  else if (m.has_inf) over = std::numeric_limits<double>::infinity();
  q = c.op(OpKind::Where, {c.op(OpKind::Greater, {q, c.scalar(maxv, f)}), c.scalar(over, f), q});
  Value y = c.op(OpKind::Where, {c.op(OpKind::Less, {x, c.scalar(0, f)}), c.op(OpKind::Neg, {q}), q});
  // float4 has no NaN: NaN maps to the pattern 0x8 (negative zero) like the reference.
  double nan_out = type == kF4E2M1 ? -0.0 : std::numeric_limits<double>::quiet_NaN();
  return c.op(OpKind::Where, {c.op(OpKind::IsNaN, {x}), c.scalar(nan_out, f), y});
}

namespace {

// FLOAT8E8M0 holds 2^k, k in [-127, 127] (0xFF is NaN). The exponent estimate from
// log is corrected against an exact table of powers of two, so the result is exact.
Value round_to_e8m0(NodeCtx& c, Value x, const std::string& mode, bool saturate) {
  if (mode != "up" && mode != "down" && mode != "nearest") c.invalid("unknown round_mode '", mode, "'");
  const DType f = DType::F32;
  x = c.cast(x, f);
  std::vector<double> pw(257);
  for (int i = 0; i < 257; ++i) pw[size_t(i)] = std::ldexp(1.0, i - 128);  // 2^-128 .. 2^128
  Value table = c.im.constant(make_tensor(DType::F64, {257}, pw));
  auto two_to = [&](Value k) {  // 2^k for integer k in [-128, 128], in f64
    return c.op(OpKind::Gather, {table, c.op(OpKind::Add, {k, c.scalar(128, DType::I64)})}, AxisAttrs{0});
  };
  Value xd = c.cast(x, DType::F64);
  Value pos = c.op(OpKind::Greater, {xd, c.scalar(0, DType::F64)});
  Value safe = c.op(OpKind::Where, {pos, xd, c.scalar(1, DType::F64)});
  Value est = c.op(OpKind::Floor, {c.op(OpKind::Div, {c.op(OpKind::Log, {safe}), c.scalar(std::log(2.0), DType::F64)})});
  Value k = c.cast(c.op(OpKind::Clip, {est}, ClipAttrs{-127, 127}), DType::I64);
  // Make 2^k <= x < 2^(k+1) (within the clip range).
  Value one = c.scalar(1, DType::I64);
  k = c.op(OpKind::Where, {c.op(OpKind::Greater, {two_to(k), safe}), c.op(OpKind::Sub, {k, one}), k});
  k = c.op(OpKind::Where, {c.op(OpKind::LessEqual, {two_to(c.op(OpKind::Add, {k, one})), safe}), c.op(OpKind::Add, {k, one}), k});
  Value lo = two_to(k), hi = two_to(c.op(OpKind::Add, {k, one}));
  Value up = c.op(OpKind::Where, {c.op(OpKind::Equal, {lo, safe}), k, c.op(OpKind::Add, {k, one})});
  Value r = k;
  if (mode == "up") r = up;
  else if (mode == "nearest")
    r = c.op(OpKind::Where, {c.op(OpKind::GreaterEqual, {c.op(OpKind::Sub, {safe, lo}), c.op(OpKind::Sub, {hi, safe})}),
                             c.op(OpKind::Add, {k, one}), k});
  Value over = c.op(OpKind::Greater, {r, c.scalar(127, DType::I64)});
  r = c.op(OpKind::Clip, {r}, ClipAttrs{-127, 127});
  Value y = c.cast(two_to(r), f);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (!saturate) y = c.op(OpKind::Where, {over, c.scalar(nan, f), y});
  // Zero and negatives take the smallest code (2^-127); NaN stays NaN; inf saturates.
  y = c.op(OpKind::Where, {pos, y, c.scalar(std::ldexp(1.0, -127), f)});
  Value inf = c.op(OpKind::Equal, {x, c.scalar(std::numeric_limits<double>::infinity(), f)});
  y = c.op(OpKind::Where, {inf, c.scalar(saturate ? std::ldexp(1.0, 127) : nan, f), y});
  return c.op(OpKind::Where, {c.op(OpKind::IsNaN, {x}), c.scalar(nan, f), y});
}

// Wraps integers into a `bits`-wide two's complement (signed) or unsigned range.
Value wrap_bits(NodeCtx& c, Value v64, int bits, bool is_signed_type) {
  Value mask = c.scalar(double((1 << bits) - 1), DType::I64);
  if (!is_signed_type) return c.op(OpKind::BitwiseAnd, {v64, mask});
  Value half = c.scalar(double(1 << (bits - 1)), DType::I64);
  return c.op(OpKind::Sub, {c.op(OpKind::BitwiseAnd, {c.op(OpKind::Add, {v64, half}), mask}), half});
}

Value cast_to(NodeCtx& c, Value x, int to, bool saturate) {
  if (to == kString) lower_on_host(c);  // strings live on the host
  auto dt = carried_dtype(to);
  if (!dt) c.unsupported("cast to ", onnx_type_name(to));
  DType from = c.g.type(x).dtype();
  switch (to) {
    case kF8E4M3FN: case kF8E4M3FNUZ: case kF8E5M2: case kF8E5M2FNUZ: case kF4E2M1:
      return round_to_minifloat_graph(c, x, to, saturate);
    case kF8E8M0: return round_to_e8m0(c, x, c.attr_str("round_mode", "up"), saturate);
    case kInt4: case kUint4: case kInt2: case kUint2: {
      int bits = (to == kInt4 || to == kUint4) ? 4 : 2;
      Value v = is_float(from) ? c.cast(c.op(OpKind::Round, {x}), DType::I64) : c.cast(x, DType::I64);
      if (from == DType::Bool) v = c.cast(x, DType::I64);
      return c.cast(wrap_bits(c, v, bits, to == kInt4 || to == kInt2), *dt);
    }
    case kUint16: {
      Value v = c.cast(x, DType::I64);
      return c.cast(c.op(OpKind::BitwiseAnd, {v, c.scalar(65535, DType::I64)}), DType::I32);
    }
    default: return c.cast(x, *dt);
  }
}

}  // namespace

// Cast's `to`: an int (the TensorProto type) from opset 6, before it the type's name
// ("FLOAT", "INT64", ... in any case).
int cast_target(NodeCtx& c) {
  const auto* a = c.attr("to");
  if (!a || a->type() != pb::AttributeProto::STRING) return int(c.attr_int("to", 0));
  if (auto t = onnx_type_named(a->s())) return *t;
  c.invalid("'to' names no ONNX type: '", a->s(), "'");
}

std::vector<Value> lower_cast(NodeCtx& c) {
  int to = cast_target(c);
  bool sat = c.attr_int("saturate", 1) != 0;
  Value y = cast_to(c, c.in(0), to, sat);
  c.set_out_type(0, to);
  if (y == c.in(0)) return {c.op(OpKind::Identity, {y})};
  return {y};
}

// BitCast: the same bits read as `to` (equal bit widths). Where both types are carried in
// an rlx dtype of their own width, the IR's bitcast (a view: no copy where the planner can
// alias it). A type carried widened (uint16 in i32) holds its value exactly, so between
// integer types of one width the reinterpretation is the wrapping integer cast; float <->
// widened types have no such equivalence and are refused.
std::vector<Value> lower_bitcast(NodeCtx& c) {
  const int from = c.onnx_type(0), to = int(c.attr_int("to", 0));
  if (from == kString || to == kString) c.unsupported("BitCast of STRING");
  const auto df = carried_dtype(from), dt = carried_dtype(to);
  if (!df || !dt || is_minifloat(from) || is_minifloat(to))
    c.unsupported("BitCast from ", onnx_type_name(from), " to ", onnx_type_name(to));
  if (stored_bits(from) != stored_bits(to))
    c.invalid("BitCast from ", onnx_type_name(from), " (", stored_bits(from), " bits) to ", onnx_type_name(to), " (",
              stored_bits(to), " bits): the bit widths differ");
  c.set_out_type(0, to);
  const bool exact_from = int(dtype_size(*df)) * 8 == stored_bits(from), exact_to = int(dtype_size(*dt)) * 8 == stored_bits(to);
  if (exact_from && exact_to) {
    if (*df == *dt) return {c.op(OpKind::Identity, {c.in(0)})};
    return {c.g.bitcast(c.in(0), *dt)};
  }
  if (is_float(*df) || is_float(*dt))
    c.unsupported("BitCast between ", onnx_type_name(from), " and ", onnx_type_name(to), " (a type carried widened)");
  return {cast_to(c, c.in(0), to, false)};  // integers of one width: reinterpretation = wrapping conversion
}

std::vector<Value> lower_cast_like(NodeCtx& c) {
  int to = c.onnx_type(1);
  bool sat = c.attr_int("saturate", 1) != 0;
  Value y = cast_to(c, c.in(0), to, sat);
  c.set_out_type(0, to);
  if (y == c.in(0)) return {c.op(OpKind::Identity, {y})};
  return {y};
}

namespace {

// Broadcasts a quantization parameter (scalar, per-axis 1-D, or blocked) against x.
Value qparam(NodeCtx& c, Value p, const std::vector<int64_t>& xd, int64_t axis_attr, int64_t block) {
  auto pd = c.vdims(p);
  int64_t n = 1;
  for (int64_t v : pd) n *= v;
  if (pd.empty() || (n == 1 && block == 0)) return c.reshape(p, {});
  int64_t axis = c.axis(axis_attr, int64_t(xd.size()));
  if (block > 0) {
    if (pd.size() != xd.size()) c.invalid("blocked quantization parameters must have the input's rank");
    std::vector<int64_t> un = pd;
    un.insert(un.begin() + axis + 1, 1);
    Value v = c.reshape(p, un);
    std::vector<int64_t> ex = un;
    ex[size_t(axis + 1)] = block;
    v = c.expand(v, ex);
    std::vector<int64_t> merged = pd;
    merged[size_t(axis)] = pd[size_t(axis)] * block;
    v = c.reshape(v, merged);
    return c.slice(v, {0}, {xd[size_t(axis)]}, {axis});
  }
  if (pd.size() != 1 || pd[0] != xd[size_t(axis)])
    c.invalid("per-axis parameter of shape [", pd.size() ? pd[0] : 0, "] does not match axis ", axis);
  std::vector<int64_t> shape(xd.size(), 1);
  shape[size_t(axis)] = pd[0];
  return c.reshape(p, shape);
}

void quant_range(int t, double& lo, double& hi) {
  switch (t) {
    case kUint8: lo = 0; hi = 255; return;
    case kInt8: lo = -128; hi = 127; return;
    case kUint16: lo = 0; hi = 65535; return;
    case kInt16: lo = -32768; hi = 32767; return;
    case kInt32: lo = -2147483648.0; hi = 2147483647.0; return;
    case kUint4: lo = 0; hi = 15; return;
    case kInt4: lo = -8; hi = 7; return;
    case kUint2: lo = 0; hi = 3; return;
    case kInt2: lo = -2; hi = 1; return;
    default: fail(ErrorCategory::Unsupported, "quantization to ", onnx_type_name(t), " is not supported");
  }
}

}  // namespace

std::vector<Value> lower_quantize_linear(NodeCtx& c) {
  auto xd = c.dims(0);
  int64_t axis = c.attr_int("axis", 1);
  int64_t block = c.attr_int("block_size", 0);
  int to = kUint8;
  if (c.has(2)) to = c.onnx_type(2);
  else if (c.has_attr("output_dtype") && c.attr_int("output_dtype", 0) != 0) to = int(c.attr_int("output_dtype", 0));
  bool sat = c.attr_int("saturate", 1) != 0;
  const DType f = DType::F32;
  Value x = c.cast(c.in(0), f);
  Value scale = qparam(c, c.cast(c.in(1), f), xd, axis, block);
  Value y = c.op(OpKind::Div, {x, scale});
  if (is_minifloat(to)) {
    if (c.has(2)) y = c.op(OpKind::Add, {y, qparam(c, c.cast(c.in(2), f), xd, axis, block)});
    c.set_out_type(0, to);
    return {round_to_minifloat_graph(c, y, to, sat)};
  }
  double lo, hi;
  quant_range(to, lo, hi);
  y = c.op(OpKind::Round, {y});
  if (c.has(2)) y = c.op(OpKind::Add, {y, qparam(c, c.cast(c.in(2), f), xd, axis, block)});
  y = c.op(OpKind::Clip, {y}, ClipAttrs{lo, hi});
  c.set_out_type(0, to);
  return {c.cast(y, *carried_dtype(to))};
}

std::vector<Value> lower_dequantize_linear(NodeCtx& c) {
  auto xd = c.dims(0);
  int64_t axis = c.attr_int("axis", 1);
  int64_t block = c.attr_int("block_size", 0);
  DType out = c.dtype(1);
  if (c.has_attr("output_dtype") && c.attr_int("output_dtype", 0) != 0) {
    auto d = carried_dtype(int(c.attr_int("output_dtype", 0)));
    if (!d) c.unsupported("output_dtype");
    out = *d;
  }
  const DType f = DType::F32;
  Value x = c.cast(c.in(0), f);
  if (c.has(2)) x = c.op(OpKind::Sub, {x, qparam(c, c.cast(c.in(2), f), xd, axis, block)});
  Value scale = qparam(c, c.cast(c.in(1), f), xd, axis, block);
  return {c.cast(c.op(OpKind::Mul, {x, scale}), out)};
}

// y_scale = (max(0, max(x)) - min(0, min(x))) / 255; zp = saturate(round(-min / scale)).
std::vector<Value> lower_dynamic_quantize_linear(NodeCtx& c) {
  const DType f = DType::F32;
  Value x = c.cast(c.in(0), f);
  Value zero = c.scalar(0, f);
  Value mx = c.op(OpKind::Max, {c.reduce(OpKind::ReduceMax, x, {}, false), zero});
  Value mn = c.op(OpKind::Min, {c.reduce(OpKind::ReduceMin, x, {}, false), zero});
  Value scale = c.op(OpKind::Div, {c.op(OpKind::Sub, {mx, mn}), c.scalar(255, f)});
  Value zp = c.op(OpKind::Clip, {c.op(OpKind::Round, {c.op(OpKind::Div, {c.op(OpKind::Neg, {mn}), scale})})},
                  ClipAttrs{0, 255});
  Value y = c.op(OpKind::Round, {c.op(OpKind::Div, {x, scale})});
  y = c.op(OpKind::Clip, {c.op(OpKind::Add, {y, zp})}, ClipAttrs{0, 255});
  return {c.cast(y, DType::U8), scale, c.cast(zp, DType::U8)};
}

}  // namespace rlx::onnx
