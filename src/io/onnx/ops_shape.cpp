// Shape-level ONNX ops: Constant, Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze,
// Transpose, Expand, ConstantOfShape, Range, EyeLike, DepthToSpace, SpaceToDepth.
// Shape/Size of static inputs and every op on constants become constants.
#include <cmath>

#include "io/onnx/ops_table.h"

namespace rlx::onnx {

std::vector<Value> lower_constant(NodeCtx& c) {
  if (const auto* a = c.attr("value"); a && a->has_t() && a->t().data_type() == kString) lower_on_host(c);
  if (c.has_attr("value_string") || c.has_attr("value_strings")) lower_on_host(c);  // strings live on the host
  if (auto t = c.attr_tensor("value")) return {c.im.constant(*t)};
  if (c.has_attr("value_float")) return {c.scalar(c.attr_float("value_float", 0), DType::F32)};
  if (c.has_attr("value_int")) return {c.im.constant(make_i64({}, {c.attr_int("value_int", 0)}))};
  if (c.has_attr("value_floats")) {
    auto f = c.attr_floats("value_floats");
    return {c.im.constant(make_tensor(DType::F32, {int64_t(f.size())}, std::vector<double>(f.begin(), f.end())))};
  }
  if (c.has_attr("value_ints")) {
    auto v = c.attr_ints("value_ints");
    return {c.im.constant(make_i64({int64_t(v.size())}, v))};
  }
  if (c.has_attr("sparse_value")) c.unsupported("sparse constants are not supported");
  c.invalid("has no value attribute");
}

std::vector<Value> lower_shape(NodeCtx& c) {
  const Shape& s = c.type(0);
  int64_t r = s.rank();
  int64_t start = c.attr_int("start", 0), end = c.attr_int("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  std::vector<int64_t> out;
  for (int64_t i = start; i < end; ++i) {
    Dim d = s.dims()[size_t(i)];
    if (d.is_symbolic())
      throw DynamicShapeError(detail::concat("ONNX ", c.where(), ": the shape of ", s.str(),
                                             " is symbolic; import with concrete input shapes"));
    out.push_back(d.raw());
  }
  return {c.im.constant(make_i64({int64_t(out.size())}, out))};
}

std::vector<Value> lower_size(NodeCtx& c) {
  int64_t n = 1;
  for (int64_t d : c.dims(0)) n *= d;
  return {c.im.constant(make_i64({}, {n}))};
}

std::vector<Value> lower_reshape(NodeCtx& c) {
  Value x = c.in(0);
  std::vector<int64_t> shape;
  if (c.opset < 5) shape = c.attr_ints("shape");
  else shape = c.const_ints(1, "shape");
  bool allowzero = c.attr_int("allowzero", 0) != 0;
  const Shape& s = c.type(0);
  std::vector<int64_t> target;
  int unknown = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t v = shape[i];
    if (v == 0 && !allowzero) {
      if (int(i) >= s.rank()) c.invalid("shape entry 0 at ", i, " copies a dim the input (rank ", s.rank(), ") lacks");
      Dim d = s.dims()[i];
      if (d.is_symbolic()) { ++unknown; target.push_back(-1); }
      else target.push_back(d.raw());
    } else if (v == -1) {
      ++unknown;
      target.push_back(-1);
    } else if (v < 0) {
      c.invalid("invalid shape entry ", v);
    } else {
      target.push_back(v);
    }
  }
  if (unknown > 1) {
    if (!s.is_static())
      throw DynamicShapeError(detail::concat("ONNX ", c.where(), ": reshape of ", s.str(),
                                             " needs concrete dims; import with concrete input shapes"));
    c.invalid("shape has more than one -1");
  }
  return {c.op(OpKind::Reshape, {x}, ShapeAttrs{target})};
}

std::vector<Value> lower_flatten(NodeCtx& c) {
  auto d = c.dims(0);
  int64_t r = int64_t(d.size());
  int64_t a = c.attr_int("axis", 1);
  if (a < 0) a += r;
  if (a < 0 || a > r) c.invalid("axis ", c.attr_int("axis", 1), " is out of range for rank ", r);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < r; ++i) (i < a ? outer : inner) *= d[size_t(i)];
  return {c.reshape(c.in(0), {outer, inner})};
}

std::vector<Value> lower_squeeze(NodeCtx& c) {
  auto d = c.dims(0);
  int64_t r = int64_t(d.size());
  std::vector<int64_t> axes = c.opset < 13 ? c.attr_ints("axes") : (c.has(1) ? c.const_ints(1, "axes") : std::vector<int64_t>{});
  std::vector<bool> drop(size_t(r), false);
  if (axes.empty()) {
    for (int64_t i = 0; i < r; ++i) drop[size_t(i)] = d[size_t(i)] == 1;
  } else {
    for (int64_t a : axes) {
      int64_t n = c.axis(a, r);
      if (d[size_t(n)] != 1) c.invalid("cannot squeeze axis ", a, " of size ", d[size_t(n)]);
      drop[size_t(n)] = true;
    }
  }
  std::vector<int64_t> out;
  for (int64_t i = 0; i < r; ++i)
    if (!drop[size_t(i)]) out.push_back(d[size_t(i)]);
  return {c.op(OpKind::Reshape, {c.in(0)}, ShapeAttrs{out})};
}

std::vector<Value> lower_unsqueeze(NodeCtx& c) {
  std::vector<int64_t> axes = c.opset < 13 ? c.attr_ints("axes") : c.const_ints(1, "axes");
  Value x = c.in(0);
  std::vector<int64_t> d = c.dims(0);
  int64_t r = int64_t(d.size() + axes.size());
  std::vector<bool> ins(size_t(r), false);
  for (int64_t a : axes) {
    int64_t n = c.axis(a, r);
    if (ins[size_t(n)]) c.invalid("duplicate axis ", a);
    ins[size_t(n)] = true;
  }
  std::vector<int64_t> out;
  size_t j = 0;
  for (int64_t i = 0; i < r; ++i) out.push_back(ins[size_t(i)] ? 1 : d[j++]);
  return {c.op(OpKind::Reshape, {x}, ShapeAttrs{out})};
}

std::vector<Value> lower_transpose(NodeCtx& c) {
  std::vector<int64_t> perm = c.attr_ints("perm");
  if (perm.empty())
    for (int i = c.rank(0) - 1; i >= 0; --i) perm.push_back(i);
  return {c.op(OpKind::Transpose, {c.in(0)}, TransposeAttrs{perm})};
}

std::vector<Value> lower_expand(NodeCtx& c) {
  std::vector<int64_t> shape = c.const_ints(1, "shape");
  return {c.op(OpKind::Expand, {c.in(0)}, ShapeAttrs{shape})};
}

std::vector<Value> lower_constant_of_shape(NodeCtx& c) {
  std::vector<int64_t> shape = c.const_ints(0, "shape");
  for (int64_t d : shape)
    if (d < 0) c.invalid("negative dim ", d);
  HostTensor v = make_tensor(DType::F32, {}, {0.0});
  if (auto t = c.attr_tensor("value")) {
    if (t->numel() != 1) c.invalid("value must hold one element");
    v = *t;
  }
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d && n > (int64_t(1) << 62) / d) c.invalid("shape ", Shape(shape, v.dtype).str(), " has more than 2^62 elements");
    n *= d;
  }
  Value one = c.im.constant(HostTensor{v.onnx_type, v.dtype, {}, v.bytes});
  if (n <= c.im.options().fold_max_elements) {
    HostTensor full{v.onnx_type, v.dtype, shape, {}};
    full.bytes.resize(size_t(n) * v.bytes.size());
    for (int64_t i = 0; i < n; ++i) std::copy(v.bytes.begin(), v.bytes.end(), full.bytes.begin() + i * int64_t(v.bytes.size()));
    return {c.im.constant(full)};
  }
  return {c.expand(one, shape)};
}

// Range is folded into a constant here; past this many elements the model is refused
// rather than materialising gigabytes at import.
constexpr int64_t kMaxRangeElements = int64_t(1) << 28;

std::vector<Value> lower_range(NodeCtx& c) {
  DType t = c.dtype(0);
  HostTensor s = c.const_input(0, "start"), l = c.const_input(1, "limit"), d = c.const_input(2, "delta");
  if (is_integer(t)) {
    int64_t start = tensor_to_i64(s).at(0), limit = tensor_to_i64(l).at(0), delta = tensor_to_i64(d).at(0);
    if (delta == 0) c.invalid("delta is 0");
    // In 128 bits: limit - start can overflow int64.
    const __int128 span = __int128(limit) - start + delta + (delta > 0 ? -1 : 1);
    const __int128 cnt = std::max<__int128>(0, span / delta);
    if (cnt > kMaxRangeElements) c.invalid("Range of ", int64_t(std::min<__int128>(cnt, INT64_MAX)), " elements is too large");
    int64_t n = int64_t(cnt);
    std::vector<double> v;
    std::vector<int64_t> vi;
    for (int64_t i = 0; i < n; ++i) vi.push_back(start + i * delta);
    if (t == DType::I64) return {c.im.constant(make_i64({n}, vi))};
    v.assign(vi.begin(), vi.end());
    return {c.im.constant(make_tensor(t, {n}, v))};
  }
  double start = tensor_to_f64(s).at(0), limit = tensor_to_f64(l).at(0), delta = tensor_to_f64(d).at(0);
  if (delta == 0) c.invalid("delta is 0");
  const double cnt = std::ceil((limit - start) / delta);
  if (std::isnan(cnt)) c.invalid("Range start ", start, ", limit ", limit, ", delta ", delta, " has no length");
  if (cnt > double(kMaxRangeElements)) c.invalid("Range of ", cnt, " elements is too large");
  int64_t n = std::max<int64_t>(0, int64_t(std::max(cnt, 0.0)));
  std::vector<double> v;
  // Accumulate in the output type like the reference (start + i * delta per element).
  for (int64_t i = 0; i < n; ++i) {
    if (t == DType::F32) v.push_back(double(float(start) + float(i) * float(delta)));
    else v.push_back(start + double(i) * delta);
  }
  return {c.im.constant(make_tensor(t, {n}, v))};
}

std::vector<Value> lower_eye_like(NodeCtx& c) {
  auto d = c.dims(0);
  if (d.size() != 2) c.invalid("input must be 2-D");
  DType t = c.dtype(0);
  if (c.has_attr("dtype")) {
    auto dt = carried_dtype(int(c.attr_int("dtype", 1)));
    if (!dt) c.unsupported("dtype ", onnx_type_name(int(c.attr_int("dtype", 1))));
    t = *dt;
  }
  int64_t k = c.attr_int("k", 0);
  std::vector<double> v(size_t(d[0] * d[1]), 0.0);
  for (int64_t i = 0; i < d[0]; ++i) {
    int64_t j = i + k;
    if (j >= 0 && j < d[1]) v[size_t(i * d[1] + j)] = 1;
  }
  return {c.im.constant(make_tensor(t, d, v))};
}

std::vector<Value> lower_depth_to_space(NodeCtx& c) {
  auto d = c.dims(0);
  if (d.size() != 4) c.invalid("input must be 4-D");
  int64_t b = c.attr_int("blocksize", 0);
  if (b <= 0 || d[1] % (b * b)) c.invalid("blocksize ", b, " does not divide the channels ", d[1]);
  int64_t n = d[0], ch = d[1] / (b * b), h = d[2], w = d[3];
  Value x = c.in(0);
  if (c.attr_str("mode", "DCR") == "DCR") {
    x = c.reshape(x, {n, b, b, ch, h, w});
    x = c.transpose(x, {0, 3, 4, 1, 5, 2});
  } else {
    x = c.reshape(x, {n, ch, b, b, h, w});
    x = c.transpose(x, {0, 1, 4, 2, 5, 3});
  }
  return {c.reshape(x, {n, ch, h * b, w * b})};
}

std::vector<Value> lower_space_to_depth(NodeCtx& c) {
  auto d = c.dims(0);
  if (d.size() != 4) c.invalid("input must be 4-D");
  int64_t b = c.attr_int("blocksize", 0);
  if (b <= 0 || d[2] % b || d[3] % b) c.invalid("blocksize ", b, " does not divide the spatial dims");
  int64_t n = d[0], ch = d[1], h = d[2] / b, w = d[3] / b;
  Value x = c.reshape(c.in(0), {n, ch, h, b, w, b});
  if (c.attr_str("mode", "DCR") == "CRD") x = c.transpose(x, {0, 1, 3, 5, 2, 4});
  else x = c.transpose(x, {0, 3, 5, 1, 2, 4});
  return {c.reshape(x, {n, ch * b * b, h, w})};
}

}  // namespace rlx::onnx
