// Data-movement ONNX ops: Concat, Split, Slice, Gather, GatherElements, GatherND,
// Tile, Pad, OneHot, Trilu, CenterCropPad, ReverseSequence. Gathers with computed
// indices are expressed as one flat gather with int64 index arithmetic.
#include "io/onnx/ops_table.h"
#include "ir/dims.h"

namespace rlx::onnx {

namespace {

// Negative indices count from the end of an axis of size n.
Value wrap_indices(NodeCtx& c, Value idx, int64_t n) {
  DType t = c.g.type(idx).dtype();
  if (t != DType::I32 && t != DType::I64) idx = c.cast(idx, DType::I64), t = DType::I64;
  Value neg = c.op(OpKind::Less, {idx, c.scalar(0, t)});
  return c.op(OpKind::Where, {neg, c.op(OpKind::Add, {idx, c.scalar(double(n), t)}), idx});
}

}  // namespace

std::vector<Value> lower_concat(NodeCtx& c) {
  std::vector<Value> xs;
  for (int i = 0; i < c.num_inputs(); ++i)
    if (c.has(i)) xs.push_back(c.in(i));
  if (xs.empty()) c.invalid("needs at least one input");
  int64_t axis = c.attr_int("axis", c.opset < 4 ? 1 : 0);
  // Empty inputs contribute nothing; drop them unless all are empty.
  std::vector<Value> nonempty;
  for (Value v : xs) {
    const Shape& s = c.g.type(v);
    if (!(s.is_static() && s.numel() == 0)) nonempty.push_back(v);
  }
  if (!nonempty.empty() && nonempty.size() < xs.size()) xs = nonempty;
  if (xs.size() == 1) return {c.op(OpKind::Identity, {xs[0]})};
  return {c.op(OpKind::Concat, xs, AxisAttrs{axis})};
}

std::vector<Value> lower_split(NodeCtx& c) {
  auto d = c.dims(0);
  int64_t ax = c.axis(c.attr_int("axis", 0), int64_t(d.size()));
  std::vector<int64_t> sizes;
  if (c.opset < 2 && c.has(1)) sizes = c.const_ints(1, "split");  // opset 1: an input or the attribute
  else if (c.opset < 13) sizes = c.attr_ints("split");
  else if (c.has(1)) sizes = c.const_ints(1, "split");
  int n_out = c.num_outputs();
  if (sizes.empty()) {
    int64_t dim = d[size_t(ax)];
    if (c.opset >= 18 && c.has_attr("num_outputs")) {
      int64_t n = c.attr_int("num_outputs", n_out);
      if (n != n_out) c.invalid("num_outputs ", n, " does not match the ", n_out, " outputs of the node");
      int64_t chunk = (dim + n - 1) / n;
      for (int64_t i = 0; i < n; ++i) sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - i * chunk)));
    } else {
      if (n_out <= 0 || dim % n_out) c.invalid("axis of size ", dim, " does not split evenly into ", n_out);
      sizes.assign(size_t(n_out), dim / n_out);
    }
  }
  if (int(sizes.size()) != n_out) c.invalid("split has ", sizes.size(), " sizes for ", n_out, " outputs");
  if (sizes.size() == 1) return {c.op(OpKind::Identity, {c.in(0)})};
  return c.im.emit(OpKind::Split, {c.in(0)}, SplitAttrs{ax, sizes});
}

std::vector<Value> lower_slice(NodeCtx& c) {
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset < 10) {
    starts = c.attr_ints("starts");
    ends = c.attr_ints("ends");
    axes = c.attr_ints("axes");
  } else {
    starts = c.const_ints(1, "starts");
    ends = c.const_ints(2, "ends");
    if (c.has(3)) axes = c.const_ints(3, "axes");
    if (c.has(4)) steps = c.const_ints(4, "steps");
  }
  int64_t r = c.rank(0);
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
  for (auto& a : axes) a = c.axis(a, r);
  return {c.slice(c.in(0), starts, ends, axes, steps)};
}

std::vector<Value> lower_gather(NodeCtx& c) {
  auto d = c.dims(0);
  int64_t ax = c.axis(c.attr_int("axis", 0), int64_t(d.size()));
  Value idx;
  if (c.is_const(1)) {
    HostTensor t = c.const_input(1, "indices");
    std::vector<int64_t> v = tensor_to_i64(t);
    for (auto& i : v) {
      if (i < -d[size_t(ax)] || i >= d[size_t(ax)]) c.invalid("index ", i, " is out of range for axis of size ", d[size_t(ax)]);
      if (i < 0) i += d[size_t(ax)];
    }
    idx = c.im.constant(make_i64(t.dims, v));
  } else {
    idx = wrap_indices(c, c.in(1), d[size_t(ax)]);
  }
  return {c.op(OpKind::Gather, {c.in(0), idx}, AxisAttrs{ax})};
}

// out[i] = x[i with axis coordinate replaced by idx[i]]: one flat gather.
std::vector<Value> lower_gather_elements(NodeCtx& c) {
  auto d = c.dims(0);
  auto id = c.dims(1);
  int64_t r = int64_t(d.size());
  if (int64_t(id.size()) != r) c.invalid("indices must have the rank of the data");
  int64_t ax = c.axis(c.attr_int("axis", 0), r);
  auto xs = row_major_strides(d), is = row_major_strides(id);
  int64_t n = dims_numel(id);
  std::vector<int64_t> base(c.host_size(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (int64_t k = 0; k < r; ++k)
      if (k != ax) off += ((i / is[size_t(k)]) % id[size_t(k)]) * xs[size_t(k)];
    base[size_t(i)] = off;
  }
  Value idx = c.cast(wrap_indices(c, c.in(1), d[size_t(ax)]), DType::I64);
  Value lin = c.op(OpKind::Add, {c.im.constant(make_i64(id, base)),
                                 c.op(OpKind::Mul, {idx, c.scalar(double(xs[size_t(ax)]), DType::I64)})});
  Value flat = c.reshape(c.in(0), {dims_numel(d)});
  return {c.op(OpKind::Gather, {flat, lin}, AxisAttrs{0})};
}

std::vector<Value> lower_gather_nd(NodeCtx& c) {
  auto d = c.dims(0);
  auto id = c.dims(1);
  int64_t b = c.attr_int("batch_dims", 0);
  if (id.empty()) c.invalid("indices must have rank >= 1");
  int64_t k = id.back();
  int64_t r = int64_t(d.size());
  if (b < 0 || b + k > r) c.invalid("batch_dims ", b, " + index depth ", k, " exceed data rank ", r);
  // Flatten data to [B * P, rest...] where P = prod(d[b .. b+k)).
  int64_t bsz = 1, p = 1;
  for (int64_t i = 0; i < b; ++i) bsz *= d[size_t(i)];
  for (int64_t i = b; i < b + k; ++i) p *= d[size_t(i)];
  std::vector<int64_t> rest(d.begin() + b + k, d.end());
  std::vector<int64_t> flat_dims{bsz * p};
  flat_dims.insert(flat_dims.end(), rest.begin(), rest.end());
  Value flat = c.reshape(c.in(0), flat_dims);
  std::vector<int64_t> out_idx(id.begin(), id.end() - 1);  // index grid shape
  int64_t m = dims_numel(out_idx);
  // Batch part: each index row's batch position times P.
  int64_t per_batch = 1;
  for (size_t i = size_t(b); i < out_idx.size(); ++i) per_batch *= out_idx[i];
  std::vector<int64_t> base(c.host_size(m));
  for (int64_t i = 0; i < m; ++i) base[size_t(i)] = (per_batch ? i / per_batch : 0) * p;
  Value lin = c.im.constant(make_i64(out_idx, base));
  Value idx = c.cast(c.in(1), DType::I64);
  if (p == 0) c.invalid("cannot gather from an empty indexed axis");
  int64_t stride = p;
  for (int64_t j = 0; j < k; ++j) {
    stride /= d[size_t(b + j)];
    Value col = c.reshape(c.slice(idx, {j}, {j + 1}, {int64_t(id.size()) - 1}), out_idx);
    col = wrap_indices(c, col, d[size_t(b + j)]);
    lin = c.op(OpKind::Add, {lin, c.op(OpKind::Mul, {col, c.scalar(double(stride), DType::I64)})});
  }
  return {c.op(OpKind::Gather, {flat, lin}, AxisAttrs{0})};
}

std::vector<Value> lower_tile(NodeCtx& c) {
  if (c.opset < 6) {  // inputs (x, tiles, axis): `tiles` copies along one axis
    const auto tiles = c.const_ints(1, "tiles"), axis = c.const_ints(2, "axis");
    if (tiles.size() != 1 || axis.size() != 1) c.invalid("tiles and axis must be single values");
    std::vector<int64_t> repeats(size_t(c.rank(0)), 1);
    repeats[size_t(c.axis(axis[0], c.rank(0)))] = c.positive(tiles[0], "tiles");
    return {c.op(OpKind::Tile, {c.in(0)}, TileAttrs{repeats})};
  }
  return {c.op(OpKind::Tile, {c.in(0)}, TileAttrs{c.const_ints(1, "repeats")})};
}

std::vector<Value> lower_pad(NodeCtx& c) {
  int64_t r = c.rank(0);
  std::vector<int64_t> pads;
  std::string mode = c.attr_str("mode", "constant");
  double value = 0;
  if (c.opset < 11) {
    pads = c.attr_ints(c.opset < 2 ? "paddings" : "pads");
    value = c.attr_float("value", 0);
  } else {
    pads = c.const_ints(1, "pads");
    if (c.has(2)) {
      auto v = c.const_reals(2, "constant_value");
      if (!v.empty()) value = v[0];
    }
    if (c.has(3)) {
      auto axes = c.const_ints(3, "axes");
      if (pads.size() != 2 * axes.size()) c.invalid("pads must have 2 entries per axis");
      std::vector<int64_t> full(size_t(2 * r), 0);
      for (size_t i = 0; i < axes.size(); ++i) {
        int64_t a = c.axis(axes[i], r);
        full[size_t(a)] = pads[i];
        full[size_t(a + r)] = pads[i + axes.size()];
      }
      pads = full;
    }
  }
  if (int64_t(pads.size()) != 2 * r) c.invalid("pads has ", pads.size(), " entries for rank ", r);
  Value x = c.in(0);
  if (mode == "constant") return {c.op(OpKind::Pad, {x}, PadAttrs{pads, PadMode::Constant, value})};
  if (mode == "reflect") return {c.op(OpKind::Pad, {x}, PadAttrs{pads, PadMode::Reflect, 0})};
  if (mode == "edge") return {c.op(OpKind::Pad, {x}, PadAttrs{pads, PadMode::Edge, 0})};
  if (mode != "wrap") c.invalid("unknown mode '", mode, "'");
  // wrap: per axis, concat(tail, x, head); negative pads crop first.
  auto d = c.dims(0);
  for (int64_t a = 0; a < r; ++a) {
    int64_t pb = pads[size_t(a)], pe = pads[size_t(a + r)];
    int64_t n = d[size_t(a)];
    if (pb < 0 || pe < 0) {
      x = c.slice(x, {std::max<int64_t>(0, -pb)}, {n - std::max<int64_t>(0, -pe)}, {a});
      n = c.vdims(x)[size_t(a)];
      pb = std::max<int64_t>(0, pb);
      pe = std::max<int64_t>(0, pe);
    }
    if (pb == 0 && pe == 0) continue;
    if (n == 0) c.invalid("cannot wrap-pad an empty axis");
    std::vector<Value> parts;
    for (int64_t left = pb; left > 0;) {  // the last `left` elements, possibly repeated
      int64_t take = std::min(n, left);
      parts.insert(parts.begin(), c.slice(x, {n - take}, {n}, {a}));
      left -= take;
    }
    std::vector<Value> all = parts;
    all.push_back(x);
    for (int64_t right = pe; right > 0;) {
      int64_t take = std::min(n, right);
      all.push_back(c.slice(x, {0}, {take}, {a}));
      right -= take;
    }
    x = c.concat(all, a);
  }
  return {c.op(OpKind::Identity, {x})};
}

std::vector<Value> lower_one_hot(NodeCtx& c) {
  auto id = c.dims(0);
  const double dv = c.const_reals(1, "depth").at(0);
  // Checked as a double first: converting one past int64's range (or NaN) is undefined.
  if (!(dv >= 1.0 && dv < 9.2e18)) c.invalid("depth must be positive and below 2^63, got ", dv);
  const int64_t depth = int64_t(dv);
  Value values = c.in(2);
  DType vt = c.dtype(2);
  int64_t r = int64_t(id.size()) + 1;
  int64_t ax = c.axis(c.attr_int("axis", -1), r);
  Value idx = c.in(0);
  if (is_float(c.dtype(0))) idx = c.op(OpKind::Floor, {idx});  // the reference truncates toward -inf only for ints
  idx = wrap_indices(c, c.cast(idx, DType::I64), depth);
  idx = c.unsqueeze(idx, {ax});
  std::vector<int64_t> iota_dims(size_t(r), 1);
  iota_dims[size_t(ax)] = depth;
  std::vector<int64_t> iota(c.host_size(depth));
  for (int64_t i = 0; i < depth; ++i) iota[size_t(i)] = i;
  Value hit = c.op(OpKind::Equal, {idx, c.im.constant(make_i64(iota_dims, iota))});
  Value off = c.reshape(c.slice(values, {0}, {1}, {0}), {});
  Value on = c.reshape(c.slice(values, {1}, {2}, {0}), {});
  (void)vt;
  return {c.op(OpKind::Where, {hit, on, off})};
}

std::vector<Value> lower_trilu(NodeCtx& c) {
  auto d = c.dims(0);
  if (d.size() < 2) c.invalid("input must have rank >= 2");
  int64_t k = c.has(1) ? c.const_ints(1, "k").at(0) : 0;
  bool upper = c.attr_int("upper", 1) != 0;
  int64_t n = d[d.size() - 2], m = d.back();
  std::vector<double> mask(c.host_size(n * m));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) mask[size_t(i * m + j)] = upper ? (j - i >= k) : (j - i <= k);
  Value mk = c.im.constant(make_tensor(DType::Bool, {n, m}, mask));
  return {c.op(OpKind::Where, {mk, c.in(0), c.scalar(0, c.dtype(0))})};
}

std::vector<Value> lower_center_crop_pad(NodeCtx& c) {
  auto d = c.dims(0);
  auto shape = c.const_ints(1, "shape");
  int64_t r = int64_t(d.size());
  std::vector<int64_t> axes = c.attr_ints("axes");
  if (axes.empty())
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  if (axes.size() != shape.size()) c.invalid("shape must have one entry per axis");
  std::vector<int64_t> pads(size_t(2 * r), 0);
  Value x = c.in(0);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = c.axis(axes[i], r);
    int64_t have = d[size_t(a)], want = shape[i];
    if (want < have) {
      int64_t start = (have - want) / 2;
      x = c.slice(x, {start}, {start + want}, {a});
    } else if (want > have) {
      int64_t before = (want - have) / 2;
      pads[size_t(a)] = before;
      pads[size_t(a + r)] = want - have - before;
    }
  }
  return {c.op(OpKind::Pad, {x}, PadAttrs{pads, PadMode::Constant, 0})};
}

// out[b, t] = x[b, len[b]-1-t] for t < len[b], else x[b, t] (time/batch axes from attrs).
std::vector<Value> lower_reverse_sequence(NodeCtx& c) {
  auto d = c.dims(0);
  int64_t r = int64_t(d.size());
  int64_t ta = c.attr_int("time_axis", 0), ba = c.attr_int("batch_axis", 1);
  if (r < 2 || (ta != 0 && ta != 1) || (ba != 0 && ba != 1) || ta == ba) c.invalid("bad time/batch axes");
  std::vector<int64_t> tdims(size_t(r), 1), bdims(size_t(r), 1);
  tdims[size_t(ta)] = d[size_t(ta)];
  bdims[size_t(ba)] = d[size_t(ba)];
  std::vector<int64_t> iota(c.host_size(d[size_t(ta)]));
  for (size_t i = 0; i < iota.size(); ++i) iota[i] = int64_t(i);
  Value t = c.im.constant(make_i64(tdims, iota));
  Value len = c.reshape(c.cast(c.in(1), DType::I64), bdims);
  Value rev = c.op(OpKind::Sub, {c.op(OpKind::Sub, {len, c.scalar(1, DType::I64)}), t});
  Value inside = c.op(OpKind::Less, {t, len});
  Value src = c.op(OpKind::Where, {inside, rev, t});  // broadcast [.., T, .., B, ..]
  src = c.expand(src, d);
  // Gather along the time axis elementwise: reuse the flat-index form.
  auto xs = row_major_strides(d);
  int64_t n = dims_numel(d);
  std::vector<int64_t> base(c.host_size(n));
  for (int64_t i = 0; i < n; ++i) base[size_t(i)] = i - ((i / xs[size_t(ta)]) % d[size_t(ta)]) * xs[size_t(ta)];
  Value lin = c.op(OpKind::Add, {c.im.constant(make_i64(d, base)),
                                 c.op(OpKind::Mul, {src, c.scalar(double(xs[size_t(ta)]), DType::I64)})});
  return {c.op(OpKind::Gather, {c.reshape(c.in(0), {n}), lin}, AxisAttrs{0})};
}

// Optional ops applied to plain tensors (optional-typed values are not supported).
std::vector<Value> lower_optional_tensor(NodeCtx& c) {
  if (c.node.op_type() == "OptionalGetElement") return {c.op(OpKind::Identity, {c.in(0)})};
  return {c.im.constant(make_tensor(DType::Bool, {}, {c.has(0) ? 1.0 : 0.0}))};
}

}  // namespace rlx::onnx
