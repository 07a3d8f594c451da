// Loss ONNX ops: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss. The class
// pick is a compare-with-iota mask summed over the class axis (exact: one term).
#include "io/onnx/ops_table.h"

namespace rlx::onnx {

namespace {

// loss = -input[n, target[n, ...], ...] * weight[target]; ignored targets weigh 0.
std::vector<Value> nll(NodeCtx& c, Value input, Value target, Value weight) {
  auto d = c.vdims(input);
  if (d.size() < 2) c.invalid("input must have rank >= 2");
  DType t = c.g.type(input).dtype();
  int64_t classes = d[1];
  std::string reduction = c.attr_str("reduction", "mean");
  Value tgt = c.cast(target, DType::I64);
  auto td = c.vdims(tgt);
  Value valid;
  if (c.has_attr("ignore_index")) {
    valid = c.op(OpKind::NotEqual, {tgt, c.scalar(double(c.attr_int("ignore_index", 0)), DType::I64)});
    tgt = c.op(OpKind::Where, {valid, tgt, c.scalar(0, DType::I64)});
  }
  std::vector<int64_t> iota(c.host_size(classes));
  for (int64_t i = 0; i < classes; ++i) iota[size_t(i)] = i;
  std::vector<int64_t> iota_dims(d.size(), 1);
  iota_dims[1] = classes;
  Value hit = c.op(OpKind::Equal, {c.unsqueeze(tgt, {1}), c.im.constant(make_i64(iota_dims, iota))});
  Value picked = c.reduce(OpKind::ReduceSum, c.op(OpKind::Where, {hit, input, c.scalar(0, t)}), {1}, false);
  Value w;
  if (weight.valid()) w = c.op(OpKind::Gather, {weight, tgt}, AxisAttrs{0});
  else w = c.full(td, 1, t);
  if (valid.valid()) w = c.op(OpKind::Where, {valid, w, c.scalar(0, t)});
  Value loss = c.op(OpKind::Neg, {c.op(OpKind::Mul, {picked, w})});
  if (reduction == "none") return {loss};
  Value sum = c.reduce(OpKind::ReduceSum, loss, {}, false);
  if (reduction == "sum") return {sum};
  if (reduction != "mean") c.invalid("unknown reduction '", reduction, "'");
  if (!weight.valid() && !valid.valid()) return {c.reduce(OpKind::ReduceMean, loss, {}, false)};
  return {c.op(OpKind::Div, {sum, c.reduce(OpKind::ReduceSum, w, {}, false)})};
}

}  // namespace

std::vector<Value> lower_nll_loss(NodeCtx& c) { return nll(c, c.in(0), c.in(1), c.in_or(2)); }

std::vector<Value> lower_softmax_cross_entropy(NodeCtx& c) {
  Value logp = c.op(OpKind::LogSoftmax, {c.in(0)}, AxisAttrs{1});
  std::vector<Value> out = nll(c, logp, c.in(1), c.in_or(2));
  out.push_back(logp);
  return out;
}

}  // namespace rlx::onnx
