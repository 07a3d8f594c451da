// Dtype rules of the elementwise ops on the CPU: which compute dtype each operand is
// staged to, which span runs, and how the result reaches the output dtype.
#include <cmath>
#include <limits>

#include "backends/cpu/kernels/elementwise_engine.h"
#include "ir/op_table.h"
#include "rlx/error.h"

namespace rlx::cpu::ew {
namespace {

int op_cost(OpKind k) {
  switch (k) {
    case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Max: case OpKind::Min:
    case OpKind::Relu: case OpKind::Neg: case OpKind::Abs: case OpKind::Identity: case OpKind::Cast:
    case OpKind::Where: case OpKind::Equal: case OpKind::NotEqual: case OpKind::Less:
    case OpKind::LessEqual: case OpKind::Greater: case OpKind::GreaterEqual: case OpKind::And:
    case OpKind::Or: case OpKind::Xor: case OpKind::Not: case OpKind::BitwiseAnd:
    case OpKind::BitwiseOr: case OpKind::BitwiseXor: case OpKind::BitwiseNot: case OpKind::Clip:
    case OpKind::Sign: case OpKind::IsNaN: case OpKind::IsInf:
      return 1;
    case OpKind::Div: case OpKind::Sqrt: case OpKind::Rsqrt: case OpKind::Reciprocal:
    case OpKind::Floor: case OpKind::Ceil: case OpKind::Round: case OpKind::LeakyRelu:
    case OpKind::Mod: case OpKind::HardSigmoid: case OpKind::HardSwish: case OpKind::Softsign:
    case OpKind::ThresholdedRelu:
      return 2;
    default:
      return 8;  // transcendental
  }
}

// Integer clip bounds: ceil(alpha), floor(beta), saturated to the dtype's range.
void int_bounds(DType t, double alpha, double beta, OpParams& p) {
  double lo = 0, hi = 0;
  switch (t) {
    case DType::I8: lo = -128; hi = 127; break;
    case DType::I16: lo = -32768; hi = 32767; break;
    case DType::I32: lo = -2147483648.0; hi = 2147483647.0; break;
    case DType::I64: lo = -9223372036854775808.0; hi = 9223372036854775807.0; break;
    case DType::U8: lo = 0; hi = 255; break;
    case DType::U32: lo = 0; hi = 4294967295.0; break;
    default: return;
  }
  const double a = std::isnan(alpha) ? lo : std::ceil(alpha);
  const double b = std::isnan(beta) ? hi : std::floor(beta);
  // The int64 extremes are not exact doubles: compare before converting.
  p.lo = a <= lo ? int64_t(t == DType::I64 ? std::numeric_limits<int64_t>::min() : int64_t(lo))
                 : a >= hi ? (t == DType::I64 ? std::numeric_limits<int64_t>::max() : int64_t(hi))
                           : int64_t(a);
  p.hi = b >= hi ? (t == DType::I64 ? std::numeric_limits<int64_t>::max() : int64_t(hi))
                 : b <= lo ? (t == DType::I64 ? std::numeric_limits<int64_t>::min() : int64_t(lo))
                           : int64_t(b);
}

}  // namespace

bool resolve_op(OpKind k, const std::vector<DType>& in, DType out, double alpha, double beta,
                Isa isa, SegOp& op, std::string& why) {
  op = SegOp{};
  op.kind = k;
  op.out = out;
  op.cost = op_cost(k);
  op.params.alpha = alpha;
  op.params.beta = beta;
  op.params.alpha_f = float(alpha);
  op.params.beta_f = float(beta);
  const int n = ir::elementwise_arity(k);
  if (n < 0) {
    why = std::string("'") + std::string(op_name(k)) + "' is not an elementwise op";
    return false;
  }
  if (int(in.size()) != n) {
    why = std::string(op_name(k)) + " takes " + std::to_string(n) + " operands, got " +
          std::to_string(in.size());
    return false;
  }
  op.arity = n;
  auto stage = [&](int i, DType c) { op.stage[i] = in[i] == c ? nullptr : convert_fn(in[i], c, isa); };
  auto finish = [&](DType res) { op.finish = res == out ? nullptr : convert_fn(res, out, isa); };
  auto unsupported = [&] {
    why = std::string(op_name(k)) + " on ";
    for (size_t i = 0; i < in.size(); ++i) {
      if (i) why += ",";
      why += dtype_name(in[i]);
    }
    why += " -> " + std::string(dtype_name(out)) + " is not supported by the CPU backend";
    return false;
  };

  switch (k) {
    case OpKind::Identity:
    case OpKind::Cast:
      op.form = Form::Convert;
      op.convert = convert_fn(in[0], out, isa);
      return true;
    case OpKind::IsNaN:
    case OpKind::IsInf: {
      if (!is_float(in[0])) return unsupported();
      const DType c = compute_dtype(in[0]);
      stage(0, c);
      // is_inf (ir::scalar_params): alpha = detect_negative, beta = detect_positive.
      op.params.detect_neg = alpha != 0;
      op.params.detect_pos = beta != 0;
      op.unary = unary_span(k, c, isa);
      finish(DType::Bool);
      return op.unary != nullptr || unsupported();
    }
    case OpKind::Not: {
      stage(0, DType::Bool);
      op.unary = unary_span(k, DType::Bool, isa);
      finish(DType::Bool);
      return true;
    }
    case OpKind::Where: {
      op.form = Form::Where;
      stage(0, DType::Bool);
      stage(1, out);
      stage(2, out);
      op.where = where_span(dtype_size(out));
      return op.where != nullptr || unsupported();
    }
    case OpKind::Equal: case OpKind::NotEqual: case OpKind::Less: case OpKind::LessEqual:
    case OpKind::Greater: case OpKind::GreaterEqual: {
      const DType c = compute_dtype(promote(in[0], in[1]));
      op.form = Form::Binary;
      stage(0, c);
      stage(1, c);
      op.binary = compare_span(k, c);
      finish(DType::Bool);
      return bool(op.binary) || unsupported();
    }
    case OpKind::And: case OpKind::Or: case OpKind::Xor: {
      op.form = Form::Binary;
      stage(0, DType::Bool);
      stage(1, DType::Bool);
      op.binary = binary_span(k, DType::Bool, isa);
      finish(DType::Bool);
      return true;
    }
    case OpKind::Pow: {
      // Float results compute in the result's float type; integer bases compute exactly
      // in I64 with an integer exponent, or in F64 (then truncate) with a float one.
      DType c;
      if (is_float(out)) c = compute_dtype(out);
      else if (is_integer(out) && (is_integer(in[1]) || in[1] == DType::Bool)) c = DType::I64;
      else if (is_integer(out) && is_float(in[1])) c = DType::F64;
      else return unsupported();
      if (is_complex(in[0]) || is_complex(in[1])) return unsupported();
      op.form = Form::Binary;
      stage(0, c);
      stage(1, c);
      op.binary = binary_span(k, c, isa);
      finish(c);
      return bool(op.binary) || unsupported();
    }
    case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div: case OpKind::Max:
    case OpKind::Min: case OpKind::Mod: case OpKind::BitwiseAnd: case OpKind::BitwiseOr:
    case OpKind::BitwiseXor: {
      const DType c = compute_dtype(out);
      op.form = Form::Binary;
      op.params.flag = k == OpKind::Mod && alpha == 1;  // fmod semantics
      stage(0, c);
      stage(1, c);
      op.binary = binary_span(k, c, isa);
      finish(c);
      return bool(op.binary) || unsupported();
    }
    default:
      break;
  }
  // Remaining unary ops: compute in the output's compute dtype.
  if (ir::is_float_unary(k) && !(is_float(in[0]) && is_float(out))) return unsupported();
  const DType c = compute_dtype(out);
  if (k == OpKind::Clip) int_bounds(c, alpha, beta, op.params);
  if (k == OpKind::Gelu) op.params.flag = alpha == 1;
  stage(0, c);
  op.unary = unary_span(k, c, isa);
  finish(c);
  return op.unary != nullptr || unsupported();
}

}  // namespace rlx::cpu::ew
