// Normalization ONNX ops: LayerNormalization and RMSNormalization (IR ops when only Y
// is wanted, compositions otherwise), BatchNormalization (inference),
// InstanceNormalization, GroupNormalization, LRN, MeanVarianceNormalization,
// LpNormalization.
#include "io/onnx/ops_table.h"

namespace rlx::onnx {

namespace {

std::vector<int64_t> range_axes(int64_t from, int64_t to) {
  std::vector<int64_t> a;
  for (int64_t i = from; i < to; ++i) a.push_back(i);
  return a;
}

// [C] -> [C, 1, ..., 1] to broadcast against [N, C, spatial...].
Value per_channel(NodeCtx& c, Value v, size_t rank) {
  // X is [N, C, ...]: a rank below 2 has no channel axis (and `rank - 1` would wrap).
  if (rank < 2) c.invalid("input X must have rank >= 2 ([N, C, ...]), got rank ", rank);
  auto d = c.vdims(v);
  if (d.size() != 1) c.invalid("per-channel inputs must be 1-D [C], got rank ", d.size());
  std::vector<int64_t> shape = d;
  while (shape.size() < rank - 1) shape.push_back(1);
  return c.reshape(v, shape);
}

DType stash_dtype(NodeCtx& c, DType t) {
  if (c.attr_int("stash_type", 1) == 1 && (t == DType::F16 || t == DType::BF16)) return DType::F32;
  return t;
}

}  // namespace

std::vector<Value> lower_layer_norm(NodeCtx& c) {
  auto d = c.dims(0);
  int64_t r = int64_t(d.size());
  int64_t ax = c.axis(c.attr_int("axis", -1), r);
  double eps = double(float(c.attr_float("epsilon", 1e-5)));
  Value x = c.in(0), scale = c.in(1), bias = c.in_or(2);
  DType t = c.dtype(0);
  if (!c.wants(1) && !c.wants(2) && (c.attr_int("stash_type", 1) == 1 || t == DType::F32)) {
    std::vector<Value> in{x, scale};
    if (bias.valid()) in.push_back(bias);
    return {c.op(OpKind::LayerNorm, in, NormAttrs{ax, eps})};
  }
  DType st = stash_dtype(c, t);
  auto axes = range_axes(ax, r);
  Value xf = c.cast(x, st);
  Value mean = c.reduce(OpKind::ReduceMean, xf, axes, true);
  Value dev = c.op(OpKind::Sub, {xf, mean});
  Value var = c.reduce(OpKind::ReduceMean, c.op(OpKind::Mul, {dev, dev}), axes, true);
  Value inv = c.op(OpKind::Reciprocal, {c.op(OpKind::Sqrt, {c.op(OpKind::Add, {var, c.scalar(eps, st)})})});
  Value y = c.cast(c.op(OpKind::Mul, {dev, inv}), t);
  y = c.op(OpKind::Mul, {y, scale});
  if (bias.valid()) y = c.op(OpKind::Add, {y, bias});
  return {y, mean, inv};
}

std::vector<Value> lower_rms_norm(NodeCtx& c) {
  auto d = c.dims(0);
  int64_t r = int64_t(d.size());
  int64_t ax = c.axis(c.attr_int("axis", -1), r);
  double eps = double(float(c.attr_float("epsilon", 1e-5)));
  Value x = c.in(0), scale = c.in(1);
  DType t = c.dtype(0);
  if (c.attr_int("stash_type", 1) == 1 || t == DType::F32) return {c.op(OpKind::RmsNorm, {x, scale}, NormAttrs{ax, eps})};
  auto axes = range_axes(ax, r);
  Value ms = c.reduce(OpKind::ReduceMean, c.op(OpKind::Mul, {x, x}), axes, true);
  Value inv = c.op(OpKind::Reciprocal, {c.op(OpKind::Sqrt, {c.op(OpKind::Add, {ms, c.scalar(eps, t)})})});
  return {c.op(OpKind::Mul, {c.op(OpKind::Mul, {x, inv}), scale})};
}

// Inference: running statistics. Training mode (opset 14+): batch statistics
// (population variance) and updated running statistics, as the reference.
std::vector<Value> lower_batch_norm(NodeCtx& c) {
  auto d = c.dims(0);
  // Before opset 7 the mode is is_test (0, the default: training); from 14 training_mode.
  bool training = c.opset < 7 ? c.attr_int("is_test", 0) == 0 : c.attr_int("training_mode", 0) != 0;
  if (!training && (c.wants(1) || c.wants(2))) c.unsupported("running statistics outputs outside training mode");
  if (c.wants(3) || c.wants(4)) c.unsupported("the saved mean / variance outputs are not supported");
  // spatial 0 (before opset 9): statistics per activation, [C, D1, ...], not per channel.
  const bool spatial = c.opset >= 9 || c.attr_int("spatial", 1) != 0;
  if (!spatial && training) c.unsupported("training mode with spatial 0 is not supported");
  double eps = double(float(c.attr_float("epsilon", 1e-5)));
  Value x = c.in(0);
  DType t = c.dtype(0);
  size_t r = d.size();
  auto stat = [&](int i) {
    Value v = c.cast(c.in(i), t);
    if (spatial) return per_channel(c, v, r);
    std::vector<int64_t> want(d.begin() + 1, d.end());
    if (c.vdims(v) != want) c.invalid("with spatial 0, input ", i, " must have X's dims after N");
    return c.unsqueeze(v, {0});
  };
  Value scale = stat(1), bias = stat(2);
  Value mean = stat(3), var = stat(4);
  Value run_mean, run_var;
  if (training) {
    std::vector<int64_t> axes{0};
    for (size_t i = 2; i < r; ++i) axes.push_back(int64_t(i));
    Value bm = c.reduce(OpKind::ReduceMean, x, axes, true);
    Value dev = c.op(OpKind::Sub, {x, bm});
    Value bv = c.reduce(OpKind::ReduceMean, c.op(OpKind::Mul, {dev, dev}), axes, true);
    double m = double(float(c.attr_float("momentum", 0.9)));
    auto blend = [&](Value running, Value batch) {
      return c.op(OpKind::Add, {c.op(OpKind::Mul, {running, c.scalar(m, t)}), c.op(OpKind::Mul, {batch, c.scalar(1 - m, t)})});
    };
    int64_t ch = d.size() > 1 ? d[1] : 1;
    run_mean = c.reshape(blend(mean, bm), {ch});
    run_var = c.reshape(blend(var, bv), {ch});
    mean = bm;
    var = bv;
  }
  Value den = c.op(OpKind::Sqrt, {c.op(OpKind::Add, {var, c.scalar(eps, t)})});
  if (!training) {
    // Inference: one affine map per channel, y = x * s + (bias - mean * s) with
    // s = scale / sqrt(var + eps); the per-channel terms fold to constants here when the
    // statistics are initializers, and fold-conv-affine then moves them into a preceding
    // convolution's weights.
    Value s = c.op(OpKind::Div, {scale, den});
    Value shift = c.op(OpKind::Sub, {bias, c.op(OpKind::Mul, {mean, s})});
    return {c.op(OpKind::Add, {c.op(OpKind::Mul, {x, s}), shift}), run_mean, run_var};
  }
  Value y = c.op(OpKind::Div, {c.op(OpKind::Sub, {x, mean}), den});
  return {c.op(OpKind::Add, {c.op(OpKind::Mul, {y, scale}), bias}), run_mean, run_var};
}

std::vector<Value> lower_instance_norm(NodeCtx& c) {
  auto d = c.dims(0);
  double eps = double(float(c.attr_float("epsilon", 1e-5)));
  Value x = c.in(0);
  DType t = c.dtype(0);
  auto axes = range_axes(2, int64_t(d.size()));
  Value mean = c.reduce(OpKind::ReduceMean, x, axes, true);
  Value dev = c.op(OpKind::Sub, {x, mean});
  Value var = c.reduce(OpKind::ReduceMean, c.op(OpKind::Mul, {dev, dev}), axes, true);
  Value y = c.op(OpKind::Div, {dev, c.op(OpKind::Sqrt, {c.op(OpKind::Add, {var, c.scalar(eps, t)})})});
  y = c.op(OpKind::Mul, {y, per_channel(c, c.in(1), d.size())});
  return {c.op(OpKind::Add, {y, per_channel(c, c.in(2), d.size())})};
}

std::vector<Value> lower_group_norm(NodeCtx& c) {
  auto d = c.dims(0);
  if (d.size() < 2) c.invalid("input must have rank >= 2");
  int64_t groups = c.attr_int("num_groups", 0);
  if (groups <= 0 || d[1] % groups) c.invalid("num_groups ", groups, " does not divide the channels ", d[1]);
  double eps = double(float(c.attr_float("epsilon", 1e-5)));
  DType t = c.dtype(0);
  DType st = c.opset >= 21 ? stash_dtype(c, t) : t;
  int64_t n = d[0], ch = d[1], rest = 1;
  for (size_t i = 2; i < d.size(); ++i) rest *= d[i];
  Value x = c.cast(c.reshape(c.in(0), {n, groups, (ch / groups) * rest}), st);
  Value mean = c.reduce(OpKind::ReduceMean, x, {2}, true);
  Value dev = c.op(OpKind::Sub, {x, mean});
  Value var = c.reduce(OpKind::ReduceMean, c.op(OpKind::Mul, {dev, dev}), {2}, true);
  Value y = c.op(OpKind::Div, {dev, c.op(OpKind::Sqrt, {c.op(OpKind::Add, {var, c.scalar(eps, st)})})});
  y = c.cast(c.reshape(y, d), t);
  Value scale = c.in(1), bias = c.in(2);
  if (c.opset < 21) {  // per-group scale and bias
    scale = c.reshape(c.expand(c.reshape(scale, {groups, 1}), {groups, ch / groups}), {ch});
    bias = c.reshape(c.expand(c.reshape(bias, {groups, 1}), {groups, ch / groups}), {ch});
  }
  y = c.op(OpKind::Mul, {y, per_channel(c, scale, d.size())});
  return {c.op(OpKind::Add, {y, per_channel(c, bias, d.size())})};
}

// y = x / (bias + alpha / size * sum of x^2 over a channel window)^beta
std::vector<Value> lower_lrn(NodeCtx& c) {
  auto d = c.dims(0);
  if (d.size() < 3) c.invalid("input must have rank >= 3");
  int64_t size = c.attr_int("size", 0);
  if (size <= 0) c.invalid("size must be positive");
  double alpha = double(float(c.attr_float("alpha", 1e-4))), beta = double(float(c.attr_float("beta", 0.75)));
  double bias = double(float(c.attr_float("bias", 1.0)));
  Value x = c.in(0);
  DType t = c.dtype(0);
  int64_t rest = 1;
  for (size_t i = 2; i < d.size(); ++i) rest *= d[i];
  Value sq = c.reshape(c.op(OpKind::Mul, {x, x}), {d[0], 1, d[1], rest});
  PoolAttrs a;
  a.kernel = {size, 1};
  a.strides = {1, 1};
  a.pads = {(size - 1) / 2, 0, size - 1 - (size - 1) / 2, 0};
  a.count_include_pad = true;
  Value sum = c.op(OpKind::Mul, {c.op(OpKind::AvgPool2d, {sq}, a), c.scalar(double(size), t)});
  sum = c.reshape(sum, d);
  Value base = c.op(OpKind::Add, {c.scalar(bias, t), c.op(OpKind::Mul, {sum, c.scalar(alpha / double(size), t)})});
  return {c.op(OpKind::Div, {x, c.op(OpKind::Pow, {base, c.scalar(beta, t)})})};
}

std::vector<Value> lower_mvn(NodeCtx& c) {
  std::vector<int64_t> axes = c.attr_ints("axes", {0, 2, 3});
  for (auto& a : axes) a = c.axis(a, c.rank(0));
  Value x = c.in(0);
  DType t = c.dtype(0);
  Value mean = c.reduce(OpKind::ReduceMean, x, axes, true);
  Value sq_mean = c.reduce(OpKind::ReduceMean, c.op(OpKind::Mul, {x, x}), axes, true);
  Value var = c.op(OpKind::Sub, {sq_mean, c.op(OpKind::Mul, {mean, mean})});
  Value den = c.op(OpKind::Add, {c.op(OpKind::Sqrt, {var}), c.scalar(1e-9, t)});
  return {c.op(OpKind::Div, {c.op(OpKind::Sub, {x, mean}), den})};
}

std::vector<Value> lower_lp_norm(NodeCtx& c) {
  int64_t ax = c.axis(c.attr_int("axis", -1), c.rank(0));
  int64_t p = c.attr_int("p", 2);
  Value x = c.in(0);
  Value norm;
  if (p == 1) norm = c.reduce(OpKind::ReduceSum, c.op(OpKind::Abs, {x}), {ax}, true);
  else if (p == 2) norm = c.op(OpKind::Sqrt, {c.reduce(OpKind::ReduceSum, c.op(OpKind::Mul, {x, x}), {ax}, true)});
  else c.invalid("p must be 1 or 2, got ", p);
  // A zero norm gives 0 (the reference divides only where the norm is non-zero).
  Value zero = c.scalar(0, c.dtype(0));
  Value is_zero = c.op(OpKind::Equal, {norm, zero});
  Value safe = c.op(OpKind::Where, {is_zero, c.scalar(1, c.dtype(0)), norm});
  return {c.op(OpKind::Where, {is_zero, zero, c.op(OpKind::Div, {x, safe})})};
}

}  // namespace rlx::onnx
