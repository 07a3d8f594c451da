// Elementwise rules: unary, cast, binary (numpy broadcasting, promoted dtype),
// logical, compare, where, and fused elementwise programs.
#include <string>

#include "ir/ops/infer_util.h"

namespace rlx::ir {

using namespace detail;

namespace {

bool is_int_or_bool(DType t) { return is_integer(t) || t == DType::Bool; }

}  // namespace

std::vector<Shape> infer_unary(const InferCtx& ctx) {
  const Shape& x = ctx.input(0);
  OpKind k = ctx.node.kind;
  check_float_only(ctx);
  switch (k) {
    case OpKind::Identity: break;
    case OpKind::Neg: require_not_bool(ctx, x, "input 0"); break;
    case OpKind::Abs:
    case OpKind::Relu:
    case OpKind::Clip:
    case OpKind::Sign:
      require_not_bool(ctx, x, "input 0");
      require_real(ctx, x, "input 0");
      break;
    case OpKind::BitwiseNot:
      if (!is_int_or_bool(x.dtype())) ctx.error("input 0 must be an integer or bool type, got ", x.str());
      break;
    case OpKind::Softmax:
    case OpKind::LogSoftmax: norm_axis(ctx, ctx.node.attr<AxisAttrs>().axis, x.rank(), "axis"); break;
    default: break;
  }
  return {x};
}

std::vector<Shape> infer_unary_bool(const InferCtx& ctx) {
  const Shape& x = ctx.input(0);
  check_float_only(ctx);
  if (ctx.node.kind == OpKind::Not && x.dtype() != DType::Bool)
    ctx.error("input 0 must be bool, got ", x.str());
  return {x.with_dtype(DType::Bool)};
}

std::vector<Shape> infer_cast(const InferCtx& ctx) {
  DType to = ctx.node.attr<CastAttrs>().to;
  if (size_t(to) >= size_t(kNumDTypes)) ctx.error("invalid target dtype code ", int(to));
  return {ctx.input(0).with_dtype(to)};
}

std::vector<Shape> infer_bitcast(const InferCtx& ctx) {
  const DType to = ctx.node.attr<CastAttrs>().to;
  if (size_t(to) >= size_t(kNumDTypes)) ctx.error("invalid target dtype code ", int(to));
  const Shape& x = ctx.input(0);
  const int64_t from_size = int64_t(dtype_size(x.dtype())), to_size = int64_t(dtype_size(to));
  if (from_size == to_size) return {x.with_dtype(to)};
  // Element sizes differ: the same bytes with the innermost dim rescaled (a row of 2E u8 is
  // a row of E f16), which must then be static and hold whole elements of both types.
  if (x.rank() == 0 || !x.dims().back().is_static() || (x.dims().back().value() * from_size) % to_size != 0)
    ctx.error("bitcast from ", x.str(), " (", from_size, "-byte elements) to ", dtype_name(to), " (", to_size,
              " bytes): the innermost dim must be static and its bytes a whole number of ", dtype_name(to), " elements");
  std::vector<Dim> d = x.dims();
  d.back() = Dim(d.back().value() * from_size / to_size);
  return {Shape(std::move(d), to)};
}

std::vector<Shape> infer_binary(const InferCtx& ctx) {
  const Shape& a = ctx.input(0);
  const Shape& b = ctx.input(1);
  auto dims = broadcast(ctx, a.dims(), b.dims());
  DType t = promote(a.dtype(), b.dtype());
  OpKind k = ctx.node.kind;
  if (k == OpKind::BitwiseAnd || k == OpKind::BitwiseOr || k == OpKind::BitwiseXor) {
    if (!is_int_or_bool(a.dtype()) || !is_int_or_bool(b.dtype()))
      ctx.error("operands must be integer or bool types, got ", a.str(), " and ", b.str());
  } else {
    if (t == DType::Bool) ctx.error("arithmetic on bool operands (", a.str(), ", ", b.str(), "); cast first");
    if ((k == OpKind::Max || k == OpKind::Min || k == OpKind::Mod) && is_complex(t))
      ctx.error("operands must be real types, got ", a.str(), " and ", b.str());
  }
  return {Shape(std::move(dims), t)};
}

// pow: the result keeps the base's dtype (ONNX semantics); the exponent may differ.
std::vector<Shape> infer_binary_lhs(const InferCtx& ctx) {
  const Shape& a = ctx.input(0);
  const Shape& b = ctx.input(1);
  auto dims = broadcast(ctx, a.dims(), b.dims());
  require_not_bool(ctx, a, "input 0");
  require_not_bool(ctx, b, "input 1");
  require_real(ctx, a, "input 0");
  require_real(ctx, b, "input 1");
  return {Shape(std::move(dims), a.dtype())};
}

std::vector<Shape> infer_logical(const InferCtx& ctx) {
  const Shape& a = ctx.input(0);
  const Shape& b = ctx.input(1);
  if (a.dtype() != DType::Bool || b.dtype() != DType::Bool)
    ctx.error("operands must be bool, got ", a.str(), " and ", b.str());
  return {Shape(broadcast(ctx, a.dims(), b.dims()), DType::Bool)};
}

std::vector<Shape> infer_compare(const InferCtx& ctx) {
  const Shape& a = ctx.input(0);
  const Shape& b = ctx.input(1);
  auto dims = broadcast(ctx, a.dims(), b.dims());
  OpKind k = ctx.node.kind;
  if (k != OpKind::Equal && k != OpKind::NotEqual && (is_complex(a.dtype()) || is_complex(b.dtype())))
    ctx.error("ordering needs real operands, got ", a.str(), " and ", b.str());
  return {Shape(std::move(dims), DType::Bool)};
}

std::vector<Shape> infer_where(const InferCtx& ctx) {
  const Shape& c = ctx.input(0);
  const Shape& a = ctx.input(1);
  const Shape& b = ctx.input(2);
  if (c.dtype() != DType::Bool) ctx.error("condition (input 0) must be bool, got ", c.str());
  require_same_dtype(ctx, a, "input 1", b, "input 2");
  auto dims = broadcast(ctx, broadcast(ctx, c.dims(), a.dims()), b.dims());
  return {Shape(std::move(dims), a.dtype())};
}

// Each instruction is checked by running its own op's rule on the operand types,
// so a fused program obeys exactly the rules of the ops it replaced.
std::vector<Shape> infer_fused_elementwise(const InferCtx& ctx) {
  const auto& prog = ctx.node.attr<FusedElementwiseAttrs>().program;
  if (prog.empty()) ctx.error("empty program");
  const int n_in = ctx.num_inputs();
  std::vector<Shape> results;
  results.reserve(prog.size());
  for (size_t i = 0; i < prog.size(); ++i) {
    const FusedOp& op = prog[i];
    std::string where = "program[" + std::to_string(i) + "]";
    if (size_t(op.kind) >= size_t(kNumOpKinds)) ctx.error(where, ": invalid op kind ", int(op.kind));
    const OpInfo& info = op_info(op.kind);
    bool ok_kind = op.kind == OpKind::Identity || op.kind == OpKind::Cast ||
                   ((info.traits & kElementwise) && (info.traits & kFusable) && op.kind != OpKind::FusedElementwise);
    if (!ok_kind) ctx.error(where, ": ", info.name, " cannot appear in a fused elementwise program");
    if (int(op.args.size()) < info.min_inputs || int(op.args.size()) > info.max_inputs)
      ctx.error(where, ": ", info.name, " takes ", info.min_inputs, " operands, got ", op.args.size());
    Node sub;
    sub.kind = op.kind;
    sub.name = ctx.node.name + "." + where;
    try {
      sub.attrs = attrs_from_params(op.kind, op.alpha, op.beta);
    } catch (const Error& e) {
      ctx.error(where, ": ", e.what());
    }
    if (auto* c = std::get_if<CastAttrs>(&sub.attrs)) c->to = op.type;
    std::vector<const Shape*> operands;
    for (int32_t a : op.args) {
      if (a < 0 || a >= n_in + int(i))
        ctx.error(where, ": operand ", a, " must name an input (0..", n_in - 1, ") or an earlier result");
      if (a < n_in && !ctx.has(a)) ctx.error(where, ": operand ", a, " names an absent input");
      operands.push_back(a < n_in ? ctx.in[size_t(a)] : &results[size_t(a - n_in)]);
    }
    InferCtx sub_ctx{sub, operands};
    auto out = info.infer(sub_ctx);
    if (out.size() != 1) ctx.error(where, ": ", info.name, " must have one output");
    if (out[0].dtype() != op.type)
      ctx.error(where, ": ", info.name, " produces ", dtype_name(out[0].dtype()), " but the program says ",
                dtype_name(op.type));
    results.push_back(std::move(out[0]));
  }
  return {results.back()};
}

}  // namespace rlx::ir
