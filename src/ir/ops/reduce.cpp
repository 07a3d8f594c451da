// Reductions: reduce_* (axes empty = all), argmax/argmin (i64 result), topk.
#include "ir/ops/infer_util.h"

namespace rlx::ir {

using namespace detail;

namespace {

std::vector<Dim> reduced_dims(const std::vector<Dim>& dims, const std::vector<bool>& reduce, bool keepdims) {
  std::vector<Dim> out;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (!reduce[i]) out.push_back(dims[i]);
    else if (keepdims) out.push_back(Dim(1));
  }
  return out;
}

}  // namespace

std::vector<Shape> infer_reduce(const InferCtx& ctx) {
  const Shape& x = ctx.input(0);
  const auto& a = ctx.node.attr<ReduceAttrs>();
  require_not_bool(ctx, x, "input 0");
  OpKind k = ctx.node.kind;
  if (k == OpKind::ReduceMax || k == OpKind::ReduceMin) require_real(ctx, x, "input 0");
  std::vector<bool> reduce(size_t(x.rank()), a.axes.empty());
  for (int ax : norm_axes(ctx, a.axes, x.rank(), "axes")) reduce[size_t(ax)] = true;
  if (k == OpKind::ReduceMax || k == OpKind::ReduceMin) {
    // max/min of nothing has no identity value.
    for (size_t i = 0; i < reduce.size(); ++i)
      if (reduce[i] && x.dims()[i] == Dim(0))
        ctx.error("cannot take ", op_name(k), " over empty axis ", i, " of ", x.str());
  }
  return {Shape(reduced_dims(x.dims(), reduce, a.keepdims), x.dtype())};
}

std::vector<Shape> infer_arg_reduce(const InferCtx& ctx) {
  const Shape& x = ctx.input(0);
  const auto& a = ctx.node.attr<ArgReduceAttrs>();
  require_real(ctx, x, "input 0");
  int ax = norm_axis(ctx, a.axis, x.rank(), "axis");
  if (x.dims()[size_t(ax)] == Dim(0)) ctx.error("cannot take ", op_name(ctx.node.kind), " over empty axis of ", x.str());
  std::vector<bool> reduce(size_t(x.rank()), false);
  reduce[size_t(ax)] = true;
  return {Shape(reduced_dims(x.dims(), reduce, a.keepdims), DType::I64)};
}

// topk -> (values: input dtype, indices: i64), both with dim k on the axis.
std::vector<Shape> infer_topk(const InferCtx& ctx) {
  const Shape& x = ctx.input(0);
  const auto& a = ctx.node.attr<TopKAttrs>();
  require_real(ctx, x, "input 0");
  int ax = norm_axis(ctx, a.axis, x.rank(), "axis");
  if (a.k < 0) ctx.error("k must be >= 0, got ", a.k);
  Dim d = x.dims()[size_t(ax)];
  // A symbolic axis is checked against k once bound.
  if (d.is_static() && a.k > d.raw()) ctx.error("k=", a.k, " exceeds dim ", d.raw(), " of axis ", ax, " in ", x.str());
  std::vector<Dim> dims = x.dims();
  dims[size_t(ax)] = Dim(a.k);
  return {Shape(dims, x.dtype()), Shape(dims, DType::I64)};
}

}  // namespace rlx::ir
