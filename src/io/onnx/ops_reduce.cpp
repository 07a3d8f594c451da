// Reductions and softmax-like ONNX ops: Reduce*, ArgMax/ArgMin, TopK, Softmax,
// LogSoftmax, Hardmax, CumSum, CumProd.
#include <cmath>
#include <limits>

#include "io/onnx/ops_table.h"

namespace rlx::onnx {

namespace {

// Axes from the attribute (old opsets) or the optional input; `from_input_since` is
// the opset at which the op moved its axes to input 1.
std::vector<int64_t> reduce_axes(NodeCtx& c, int from_input_since, bool& noop) {
  std::vector<int64_t> axes;
  if (c.opset < from_input_since) axes = c.attr_ints("axes");
  else if (c.has(1)) axes = c.const_ints(1, "axes");
  noop = axes.empty() && c.attr_int("noop_with_empty_axes", 0) != 0;
  int64_t r = c.rank(0);
  for (auto& a : axes) a = c.axis(a, r);
  return axes;
}

// The reduced output of an empty reduction: the identity of the reduction.
Value empty_reduction(NodeCtx& c, const std::vector<int64_t>& axes, bool keepdims, double identity) {
  auto d = c.dims(0);
  std::vector<int64_t> out;
  for (size_t i = 0; i < d.size(); ++i) {
    bool red = axes.empty() || std::find(axes.begin(), axes.end(), int64_t(i)) != axes.end();
    if (!red) out.push_back(d[i]);
    else if (keepdims) out.push_back(1);
  }
  DType t = c.dtype(0);
  if (is_integer(t) && std::isinf(identity))
    identity = identity > 0 ? (t == DType::I64 ? 9.2233720368547758e18 : std::pow(2.0, dtype_size(t) * 8 - (is_signed(t) ? 1 : 0)) - 1)
                            : (is_signed(t) ? -std::pow(2.0, dtype_size(t) * 8 - 1) : 0);
  return c.full(out, identity, t);
}

bool reduces_empty(NodeCtx& c, const std::vector<int64_t>& axes) {
  const Shape& s = c.type(0);
  for (int i = 0; i < s.rank(); ++i) {
    bool red = axes.empty() || std::find(axes.begin(), axes.end(), int64_t(i)) != axes.end();
    if (red && s.dims()[size_t(i)] == Dim(0)) return true;
  }
  return false;
}

}  // namespace

std::vector<Value> lower_reduce(NodeCtx& c) {
  const std::string& t = c.node.op_type();
  bool noop = false;
  auto axes = reduce_axes(c, t == "ReduceSum" ? 13 : 18, noop);
  bool keep = c.attr_int("keepdims", 1) != 0;
  Value x = c.in(0);
  if (noop) return {c.op(OpKind::Identity, {x})};
  const double inf = std::numeric_limits<double>::infinity();
  bool is_bool = c.dtype(0) == DType::Bool;
  if (reduces_empty(c, axes)) {
    double id = 0;
    if (t == "ReduceProd") id = 1;
    else if (t == "ReduceMax" || t == "ReduceLogSum" || t == "ReduceLogSumExp") id = is_bool ? 0 : -inf;
    else if (t == "ReduceMin") id = is_bool ? 1 : inf;
    else if (t == "ReduceMean") id = std::numeric_limits<double>::quiet_NaN();
    return {empty_reduction(c, axes, keep, id)};
  }
  if (t == "ReduceSum") return {c.reduce(OpKind::ReduceSum, x, axes, keep)};
  if (t == "ReduceMean") return {c.reduce(OpKind::ReduceMean, x, axes, keep)};
  if (is_bool && (t == "ReduceMax" || t == "ReduceMin")) {  // any / all
    Value u = c.cast(x, DType::U8);
    return {c.cast(c.reduce(t == "ReduceMax" ? OpKind::ReduceMax : OpKind::ReduceMin, u, axes, keep), DType::Bool)};
  }
  if (t == "ReduceMax") return {c.reduce(OpKind::ReduceMax, x, axes, keep)};
  if (t == "ReduceMin") return {c.reduce(OpKind::ReduceMin, x, axes, keep)};
  if (t == "ReduceProd") return {c.reduce(OpKind::ReduceProd, x, axes, keep)};
  if (t == "ReduceL1") return {c.reduce(OpKind::ReduceSum, c.op(OpKind::Abs, {x}), axes, keep)};
  if (t == "ReduceSumSquare") return {c.reduce(OpKind::ReduceSum, c.op(OpKind::Mul, {x, x}), axes, keep)};
  if (t == "ReduceL2") {
    Value s = c.reduce(OpKind::ReduceSum, c.op(OpKind::Mul, {x, x}), axes, keep);
    if (!is_float(c.dtype(0))) {
      DType dt = c.dtype(0);
      return {c.cast(c.op(OpKind::Sqrt, {c.cast(s, DType::F64)}), dt)};
    }
    return {c.op(OpKind::Sqrt, {s})};
  }
  if (t == "ReduceLogSum") return {c.op(OpKind::Log, {c.reduce(OpKind::ReduceSum, x, axes, keep)})};
  if (t == "ReduceLogSumExp") {
    // log(sum(exp(x - m))) + m with m the max, for range.
    Value m = c.reduce(OpKind::ReduceMax, x, axes, true);
    Value is_inf = c.op(OpKind::Equal, {c.op(OpKind::Abs, {m}), c.scalar(inf, c.dtype(0))});
    Value mfin = c.op(OpKind::Where, {is_inf, c.scalar(0, c.dtype(0)), m});
    Value s = c.reduce(OpKind::ReduceSum, c.op(OpKind::Exp, {c.op(OpKind::Sub, {x, mfin})}), axes, true);
    Value r = c.op(OpKind::Add, {c.op(OpKind::Log, {s}), mfin});
    if (!keep) {
      std::vector<int64_t> out;
      auto d = c.vdims(r);
      for (size_t i = 0; i < d.size(); ++i)
        if (!(axes.empty() || std::find(axes.begin(), axes.end(), int64_t(i)) != axes.end())) out.push_back(d[i]);
      r = c.reshape(r, out);
    }
    return {r};
  }
  c.unsupported("no reduction mapping");
}

std::vector<Value> lower_arg_reduce(NodeCtx& c) {
  OpKind k = c.node.op_type() == "ArgMax" ? OpKind::ArgMax : OpKind::ArgMin;
  int64_t ax = c.axis(c.attr_int("axis", 0), c.rank(0));
  ArgReduceAttrs a{ax, c.attr_int("keepdims", 1) != 0, c.attr_int("select_last_index", 0) != 0};
  return {c.op(k, {c.in(0)}, a)};
}

std::vector<Value> lower_topk(NodeCtx& c) {
  int64_t k = c.opset < 10 ? c.attr_int("k", 0) : c.const_ints(1, "k").at(0);
  int64_t ax = c.axis(c.attr_int("axis", -1), c.rank(0));
  TopKAttrs a{k, ax, c.attr_int("largest", 1) != 0, c.attr_int("sorted", 1) != 0};
  return c.im.emit(OpKind::TopK, {c.in(0)}, a);
}

namespace {

// Opset < 13 softmax-family semantics: flatten to [outer, inner] at axis.
Value flat_softmax(NodeCtx& c, OpKind k) {
  auto d = c.dims(0);
  int64_t r = int64_t(d.size());
  if (c.opset >= 13) return c.op(k, {c.in(0)}, AxisAttrs{c.axis(c.attr_int("axis", -1), r)});
  int64_t ax = c.attr_int("axis", 1);
  if (ax < 0) ax += r;
  if (ax < 0 || ax > r) c.invalid("axis out of range");
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < r; ++i) (i < ax ? outer : inner) *= d[size_t(i)];
  Value y = c.op(k, {c.reshape(c.in(0), {outer, inner})}, AxisAttrs{1});
  return c.reshape(y, d);
}

}  // namespace

std::vector<Value> lower_softmax(NodeCtx& c) {
  return {flat_softmax(c, c.node.op_type() == "LogSoftmax" ? OpKind::LogSoftmax : OpKind::Softmax)};
}

std::vector<Value> lower_hardmax(NodeCtx& c) {
  auto d = c.dims(0);
  int64_t r = int64_t(d.size());
  Value x = c.in(0);
  std::vector<int64_t> work = d;
  int64_t ax;
  if (c.opset >= 13) {
    ax = c.axis(c.attr_int("axis", -1), r);
  } else {
    int64_t a = c.attr_int("axis", 1);
    if (a < 0) a += r;
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < r; ++i) (i < a ? outer : inner) *= d[size_t(i)];
    work = {outer, inner};
    x = c.reshape(x, work);
    ax = 1;
  }
  Value am = c.op(OpKind::ArgMax, {x}, ArgReduceAttrs{ax, true, false});
  std::vector<int64_t> iota_dims(work.size(), 1);
  iota_dims[size_t(ax)] = work[size_t(ax)];
  std::vector<int64_t> iota(c.host_size(work[size_t(ax)]));
  for (size_t i = 0; i < iota.size(); ++i) iota[i] = int64_t(i);
  Value hit = c.op(OpKind::Equal, {am, c.im.constant(make_i64(iota_dims, iota))});
  Value y = c.cast(hit, c.dtype(0));
  return {c.reshape(y, d)};
}

// Inclusive scan by log-step doubling: x += shift(x, 2^k) with the identity shifted in.
std::vector<Value> lower_cumulative(NodeCtx& c) {
  bool prod = c.node.op_type() == "CumProd";
  OpKind k = prod ? OpKind::Mul : OpKind::Add;
  double identity = prod ? 1 : 0;
  auto d = c.dims(0);
  int64_t r = int64_t(d.size());
  int64_t ax = c.axis(c.const_ints(1, "axis").at(0), r);
  bool exclusive = c.attr_int("exclusive", 0) != 0, reverse = c.attr_int("reverse", 0) != 0;
  int64_t n = d[size_t(ax)];
  Value x = c.in(0);
  auto flip = [&](Value v) { return c.slice(v, {-1}, {std::numeric_limits<int64_t>::min()}, {ax}, {-1}); };
  auto shift = [&](Value v, int64_t s) {  // v shifted by s along ax, identity in front
    std::vector<int64_t> pads(size_t(2 * r), 0);
    pads[size_t(ax)] = s;
    Value cut = c.slice(v, {0}, {n - s}, {ax});
    return c.op(OpKind::Pad, {cut}, PadAttrs{pads, PadMode::Constant, identity});
  };
  if (n == 0) return {c.op(OpKind::Identity, {x})};
  if (reverse) x = flip(x);
  if (exclusive) x = shift(x, 1);
  for (int64_t s = 1; s < n; s *= 2) x = c.op(k, {x, shift(x, s)});
  if (reverse) x = flip(x);
  return {x};
}

}  // namespace rlx::onnx
