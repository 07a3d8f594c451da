// ai.onnx.ml ops that are tensor operations: ArrayFeatureExtractor (a gather along the
// last axis; a 1-D input is one row, so its result is [1, k] as the operator defines) and
// Binarizer (1 where X > threshold, else 0, in X's type).
#include "io/onnx/ops_table.h"

namespace rlx::onnx {

std::vector<Value> lower_array_feature_extractor(NodeCtx& c) {
  Value x = c.in(0);
  if (c.rank(0) == 0) c.invalid("X must have rank >= 1, got ", c.type(0).str());
  if (c.dtype(1) != DType::I64) c.invalid("Y (the indices) must be int64, got ", dtype_name(c.dtype(1)));
  if (c.rank(0) == 1) x = c.reshape(x, {1, c.dims(0)[0]});
  Value idx = c.reshape(c.in(1), {c.type(1).numel()});
  const int64_t axis = int64_t(c.vdims(x).size()) - 1;
  return {c.op(OpKind::Gather, {x, idx}, AxisAttrs{axis})};
}

std::vector<Value> lower_binarizer(NodeCtx& c) {
  const DType t = c.dtype(0);
  if (!is_float(t) && t != DType::I32 && t != DType::I64) c.invalid("X must be a float or int32/int64, got ", dtype_name(t));
  Value above = c.op(OpKind::Greater, {c.in(0), c.scalar(double(float(c.attr_float("threshold", 0))), t)});
  return {c.op(OpKind::Where, {above, c.scalar(1, t), c.scalar(0, t)})};
}

}  // namespace rlx::onnx
