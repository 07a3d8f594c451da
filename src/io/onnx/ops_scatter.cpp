// Scatter ONNX ops (ScatterElements, Scatter, ScatterND, TensorScatter) without a
// scatter IR op: every update gets its flat target position; an output position
// compares against all of them ([positions, updates] mask), then takes the last
// writer (reduction none, as the reference) or reduces the matching updates.
#include <limits>

#include "io/onnx/ops_table.h"
#include "ir/dims.h"

namespace rlx::onnx {

namespace {

constexpr int64_t kMaxMaskElements = int64_t(1) << 26;

Value wrap(NodeCtx& c, Value idx, int64_t n) {
  idx = c.cast(idx, DType::I64);
  Value neg = c.op(OpKind::Less, {idx, c.scalar(0, DType::I64)});
  return c.op(OpKind::Where, {neg, c.op(OpKind::Add, {idx, c.scalar(double(n), DType::I64)}), idx});
}

// data2 [P, R], target [U] (flat row of each update), upd2 [U, R] -> [P, R].
Value scatter_rows(NodeCtx& c, Value data2, Value target, Value upd2, const std::string& reduction) {
  auto dd = c.vdims(data2), ud = c.vdims(upd2);
  int64_t p = dd[0], r = dd[1], u = ud[0];
  if (p * u > kMaxMaskElements || (reduction != "none" && p * u * r > kMaxMaskElements))
    c.unsupported("scatter of ", u, " updates into ", p, " rows is too large for the mask form");
  DType t = c.g.type(data2).dtype();
  std::vector<int64_t> rows(c.host_size(p)), ups(c.host_size(u));
  for (int64_t i = 0; i < p; ++i) rows[size_t(i)] = i;
  for (int64_t i = 0; i < u; ++i) ups[size_t(i)] = i;
  Value match = c.op(OpKind::Equal, {c.reshape(target, {1, u}), c.im.constant(make_i64({p, 1}, rows))});  // [P, U]
  Value any = c.reshape(c.cast(c.reduce(OpKind::ReduceMax, c.cast(match, DType::U8), {1}, false), DType::Bool), {p, 1});
  if (reduction == "none") {
    Value writer = c.reduce(OpKind::ReduceMax,
                            c.op(OpKind::Where, {match, c.im.constant(make_i64({1, u}, ups)), c.scalar(-1, DType::I64)}),
                            {1}, false);  // [P]
    Value src = c.op(OpKind::Gather, {upd2, c.op(OpKind::Max, {writer, c.scalar(0, DType::I64)})}, AxisAttrs{0});
    return c.op(OpKind::Where, {any, src, data2});
  }
  Value m3 = c.reshape(match, {p, u, 1});
  Value u3 = c.reshape(upd2, {1, u, r});
  double lo = is_float(t) ? -std::numeric_limits<double>::infinity() : -9.2233720368547758e18;
  double hi = -lo;
  if (reduction == "add") {
    Value s = c.reduce(OpKind::ReduceSum, c.op(OpKind::Where, {m3, u3, c.scalar(0, t)}), {1}, false);
    return c.op(OpKind::Add, {data2, s});
  }
  if (reduction == "mul") {
    Value s = c.reduce(OpKind::ReduceProd, c.op(OpKind::Where, {m3, u3, c.scalar(1, t)}), {1}, false);
    return c.op(OpKind::Mul, {data2, s});
  }
  if (reduction == "max") {
    Value s = c.reduce(OpKind::ReduceMax, c.op(OpKind::Where, {m3, u3, c.scalar(lo, t)}), {1}, false);
    return c.op(OpKind::Where, {any, c.op(OpKind::Max, {data2, s}), data2});
  }
  if (reduction == "min") {
    Value s = c.reduce(OpKind::ReduceMin, c.op(OpKind::Where, {m3, u3, c.scalar(hi, t)}), {1}, false);
    return c.op(OpKind::Where, {any, c.op(OpKind::Min, {data2, s}), data2});
  }
  c.invalid("unknown reduction '", reduction, "'");
}

}  // namespace

std::vector<Value> lower_scatter_elements(NodeCtx& c) {
  auto d = c.dims(0), id = c.dims(1);
  int64_t r = int64_t(d.size());
  if (int64_t(id.size()) != r) c.invalid("indices must have the rank of the data");
  int64_t ax = c.axis(c.attr_int("axis", 0), r);
  auto ds = row_major_strides(d), is = row_major_strides(id);
  int64_t u = dims_numel(id), n = dims_numel(d);
  std::vector<int64_t> base(c.host_size(u));
  for (int64_t i = 0; i < u; ++i) {
    int64_t off = 0;
    for (int64_t k = 0; k < r; ++k)
      if (k != ax) off += ((i / is[size_t(k)]) % id[size_t(k)]) * ds[size_t(k)];
    base[size_t(i)] = off;
  }
  Value idx = wrap(c, c.in(1), d[size_t(ax)]);
  Value target = c.op(OpKind::Add, {c.im.constant(make_i64(id, base)),
                                    c.op(OpKind::Mul, {idx, c.scalar(double(ds[size_t(ax)]), DType::I64)})});
  Value out = scatter_rows(c, c.reshape(c.in(0), {n, 1}), c.reshape(target, {u}), c.reshape(c.in(2), {u, 1}),
                           c.attr_str("reduction", "none"));
  return {c.reshape(out, d)};
}

std::vector<Value> lower_scatter_nd(NodeCtx& c) {
  auto d = c.dims(0), id = c.dims(1);
  if (id.empty()) c.invalid("indices must have rank >= 1");
  int64_t k = id.back();
  if (k > int64_t(d.size())) c.invalid("index depth ", k, " exceeds the data rank");
  std::vector<int64_t> lead(d.begin(), d.begin() + k), rest(d.begin() + k, d.end());
  int64_t p = dims_numel(lead), r = dims_numel(rest);
  int64_t u = dims_numel(id) / std::max<int64_t>(k, 1);
  if (k == 0) u = dims_numel(std::vector<int64_t>(id.begin(), id.end() - 1));
  Value idx = c.reshape(c.cast(c.in(1), DType::I64), {u, k});
  auto ls = row_major_strides(lead);
  Value target = c.full({u}, 0, DType::I64);
  for (int64_t j = 0; j < k; ++j) {
    Value col = wrap(c, c.reshape(c.slice(idx, {j}, {j + 1}, {1}), {u}), d[size_t(j)]);
    target = c.op(OpKind::Add, {target, c.op(OpKind::Mul, {col, c.scalar(double(ls[size_t(j)]), DType::I64)})});
  }
  Value out = scatter_rows(c, c.reshape(c.in(0), {p, r}), target, c.reshape(c.in(2), {u, r}),
                           c.attr_str("reduction", "none"));
  return {c.reshape(out, d)};
}

// present = cache with `update` written along `axis` at write_indices[b] (per batch),
// wrapping around the cache length in circular mode.
std::vector<Value> lower_tensor_scatter(NodeCtx& c) {
  auto cd = c.dims(0), ud = c.dims(1);
  int64_t r = int64_t(cd.size());
  if (int64_t(ud.size()) != r) c.invalid("update must have the rank of the cache");
  int64_t ax = c.axis(c.attr_int("axis", -2), r);
  if (ax == 0) c.invalid("axis must not be the batch axis");
  std::string mode = c.attr_str("mode", "linear");
  int64_t len = cd[size_t(ax)], s = ud[size_t(ax)], b = cd[0];
  Value w = c.has(2) ? c.cast(c.in(2), DType::I64) : c.full({b}, 0, DType::I64);
  std::vector<int64_t> bshape(size_t(r), 1), jshape(size_t(r), 1);
  bshape[0] = b;
  jshape[size_t(ax)] = len;
  std::vector<int64_t> iota(c.host_size(len));
  for (int64_t i = 0; i < len; ++i) iota[size_t(i)] = i;
  Value rel = c.op(OpKind::Sub, {c.im.constant(make_i64(jshape, iota)), c.reshape(w, bshape)});  // j - w[b]
  if (mode == "circular") rel = c.op(OpKind::Mod, {rel, c.scalar(double(len), DType::I64)}, ModAttrs{false});
  else if (mode != "linear") c.invalid("unknown mode '", mode, "'");
  Value valid = c.op(OpKind::And, {c.op(OpKind::GreaterEqual, {rel, c.scalar(0, DType::I64)}),
                                   c.op(OpKind::Less, {rel, c.scalar(double(s), DType::I64)})});
  Value relc = c.op(OpKind::Clip, {rel}, ClipAttrs{0, double(s - 1)});
  std::vector<int64_t> out_shape = cd;
  relc = c.expand(relc, out_shape);
  // Gather along `axis` of the update at the cache-shaped grid (flat form).
  auto us = row_major_strides(ud), os = row_major_strides(out_shape);
  int64_t n = dims_numel(out_shape);
  std::vector<int64_t> base(c.host_size(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (int64_t k = 0; k < r; ++k)
      if (k != ax) off += ((i / os[size_t(k)]) % out_shape[size_t(k)]) * us[size_t(k)];
    base[size_t(i)] = off;
  }
  Value lin = c.op(OpKind::Add, {c.im.constant(make_i64(out_shape, base)),
                                 c.op(OpKind::Mul, {relc, c.scalar(double(us[size_t(ax)]), DType::I64)})});
  Value src = c.op(OpKind::Gather, {c.reshape(c.in(1), {dims_numel(ud)}), lin}, AxisAttrs{0});
  return {c.op(OpKind::Where, {valid, src, c.in(0)})};
}

// MaxUnpool: zeros with each value placed at its flat index (indices as MaxPool gives).
std::vector<Value> lower_max_unpool(NodeCtx& c) {
  auto xd = c.dims(0);
  if (xd.size() < 3) c.invalid("input must have rank >= 3");
  size_t sp = xd.size() - 2;
  auto kernel = c.attr_ints("kernel_shape");
  auto strides = c.attr_ints("strides", std::vector<int64_t>(sp, 1));
  auto pads = c.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  if (kernel.size() != sp || strides.size() != sp || pads.size() != 2 * sp) c.invalid("attributes do not match the rank");
  // Indices address the inferred unpooled shape; a larger output_shape pads its ends.
  std::vector<int64_t> out{xd[0], xd[1]};
  for (size_t i = 0; i < sp; ++i) out.push_back((xd[i + 2] - 1) * strides[i] - pads[i] - pads[i + sp] + kernel[i]);
  int64_t n = dims_numel(out), u = dims_numel(xd);
  Value zeros = c.full({n, 1}, 0, c.dtype(0));
  Value target = c.reshape(c.cast(c.in(1), DType::I64), {u});
  Value y = c.reshape(scatter_rows(c, zeros, target, c.reshape(c.in(0), {u, 1}), "none"), out);
  if (c.has(2)) {
    auto want = c.const_ints(2, "output_shape");
    if (want.size() != xd.size()) c.invalid("output_shape must have the input's rank");
    std::vector<int64_t> p(2 * want.size(), 0);
    for (size_t i = 0; i < want.size(); ++i) p[i + want.size()] = want[i] - out[i];
    y = c.op(OpKind::Pad, {y}, PadAttrs{p, PadMode::Constant, 0});
  }
  return {y};
}

}  // namespace rlx::onnx
