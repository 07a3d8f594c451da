// ONNX ops whose output shape depends on their input values: NonZero, Unique,
// NonMaxSuppression, ImageDecoder, and Compress with a condition computed at run time.
//
// With constant inputs (shape arithmetic, small inputs bound by value) they fold here,
// on the host. With a run-time input the lowering throws RunTimeShapeError: OnnxRunner
// then ends the compiled segment before the node, runs it, evaluates the node on the
// host (this same lowering, over its inputs as constants: Importer::eval_host_node), and
// compiles the rest of the model for the shapes it produced (docs/ARCHITECTURE.md,
// "Run-time output shapes").
#include <algorithm>
#include <cmath>
#include <numeric>

#include "io/onnx/image_decode.h"
#include "io/onnx/ops_table.h"
#include "ir/dims.h"

namespace rlx::onnx {

namespace {

// Every present input constant: the node can be evaluated while importing.
bool all_const(const NodeCtx& c) {
  for (int i = 0; i < c.num_inputs(); ++i)
    if (c.has(i) && !c.is_const(i)) return false;
  return true;
}

[[noreturn]] void run_time(const NodeCtx& c) {
  throw RunTimeShapeError(detail::concat("ONNX ", c.where(), ": its output shape depends on the values of its inputs"),
                          &c.node);
}

// Elements of a constant as a sortable key: integers (and bool) exactly as int64, floats
// exactly as double; NaN sorts after everything and equals itself (numpy's unique).
struct Keys {
  bool integer = false;
  std::vector<int64_t> i;
  std::vector<double> f;
  explicit Keys(const HostTensor& t) : integer(!is_float(t.dtype)) {
    if (integer) i = tensor_to_i64(t);
    else f = tensor_to_f64(t);
  }
  // -1, 0, 1 for element a against element b.
  int cmp(int64_t a, int64_t b) const {
    if (integer) return i[size_t(a)] < i[size_t(b)] ? -1 : i[size_t(a)] > i[size_t(b)] ? 1 : 0;
    const double x = f[size_t(a)], y = f[size_t(b)];
    if (std::isnan(x) || std::isnan(y)) return std::isnan(x) == std::isnan(y) ? 0 : std::isnan(x) ? 1 : -1;
    return x < y ? -1 : x > y ? 1 : 0;
  }
};

HostTensor nonzero(const HostTensor& x) {
  // A scalar counts as one dim of one element (as ONNX Runtime and numpy do).
  const std::vector<int64_t> d = x.dims.empty() ? std::vector<int64_t>{1} : x.dims;
  const int64_t n = x.numel(), r = int64_t(d.size());
  const size_t es = dtype_size(x.dtype);
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* p = x.bytes.data() + size_t(i) * es;
    if (std::any_of(p, p + es, [](uint8_t b) { return b != 0; }) &&
        (is_complex(x.dtype) || read_scalar(p, x.dtype) != 0))  // -0.0 is zero
      hits.push_back(i);
  }
  const auto strides = row_major_strides(d);
  const int64_t k = int64_t(hits.size());
  std::vector<int64_t> out(size_t(r * k));
  for (int64_t j = 0; j < k; ++j)
    for (int64_t a = 0; a < r; ++a) out[size_t(a * k + j)] = (hits[size_t(j)] / strides[size_t(a)]) % d[size_t(a)];
  return make_i64({r, k}, out);
}

// Unique slices along `axis` of x (x flattened when there is no axis).
std::vector<HostTensor> unique(NodeCtx& c, HostTensor x, bool has_axis, int64_t axis, bool sorted) {
  if (is_complex(x.dtype)) c.unsupported("complex inputs");
  if (!has_axis) {
    x.dims = {x.numel()};
    axis = 0;
  }
  const std::vector<int64_t>& d = x.dims;
  const int64_t len = d[size_t(axis)];
  int64_t outer = 1, inner = 1;
  for (int64_t a = 0; a < axis; ++a) outer *= d[size_t(a)];
  for (size_t a = size_t(axis) + 1; a < d.size(); ++a) inner *= d[a];
  const Keys keys(x);
  // Lexicographic order of slices s and t (element by element: outer, then inner).
  auto cmp = [&](int64_t s, int64_t t) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < inner; ++j) {
        const int64_t base = o * len * inner + j;
        if (int r = keys.cmp(base + s * inner, base + t * inner)) return r;
      }
    return 0;
  };
  std::vector<int64_t> order(c.host_size(len));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t s, int64_t t) { return cmp(s, t) < 0; });
  // Groups of equal slices: first occurrence (the group's smallest index, first after the
  // stable sort) and count.
  std::vector<int64_t> first, count, group_of(static_cast<size_t>(len));
  for (size_t i = 0; i < order.size(); ++i) {
    if (i == 0 || cmp(order[i - 1], order[i]) != 0) {
      first.push_back(order[i]);
      count.push_back(0);
    }
    group_of[size_t(order[i])] = int64_t(first.size()) - 1;
    ++count.back();
  }
  const int64_t k = int64_t(first.size());
  std::vector<int64_t> pos(static_cast<size_t>(k));  // output position of each group
  std::iota(pos.begin(), pos.end(), 0);
  if (!sorted) {  // in order of first occurrence
    std::vector<int64_t> by_first(static_cast<size_t>(k));
    std::iota(by_first.begin(), by_first.end(), 0);
    std::sort(by_first.begin(), by_first.end(), [&](int64_t a, int64_t b) { return first[size_t(a)] < first[size_t(b)]; });
    for (int64_t p = 0; p < k; ++p) pos[size_t(by_first[size_t(p)])] = p;
  }
  std::vector<int64_t> indices(static_cast<size_t>(k)), counts(static_cast<size_t>(k)), inverse(static_cast<size_t>(len));
  for (int64_t g = 0; g < k; ++g) {
    indices[size_t(pos[size_t(g)])] = first[size_t(g)];
    counts[size_t(pos[size_t(g)])] = count[size_t(g)];
  }
  for (int64_t i = 0; i < len; ++i) inverse[size_t(i)] = pos[size_t(group_of[size_t(i)])];
  HostTensor y;
  y.dtype = x.dtype;
  y.onnx_type = x.onnx_type;
  y.dims = d;
  y.dims[size_t(axis)] = k;
  const size_t es = dtype_size(x.dtype);
  y.bytes.resize(size_t(outer * k * inner) * es);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t p = 0; p < k; ++p)
      std::copy_n(x.bytes.data() + size_t((o * len + indices[size_t(p)]) * inner) * es, size_t(inner) * es,
                  y.bytes.data() + size_t((o * k + p) * inner) * es);
  return {y, make_i64({k}, indices), make_i64({len}, inverse), make_i64({k}, counts)};
}

struct Box {
  float y0, x0, y1, x1;  // min and max corners
};

Box box_at(const float* p, bool center) {
  if (center) {  // [x_center, y_center, width, height]
    const float hw = p[2] / 2, hh = p[3] / 2;
    return {p[1] - hh, p[0] - hw, p[1] + hh, p[0] + hw};
  }
  return {std::min(p[0], p[2]), std::min(p[1], p[3]), std::max(p[0], p[2]), std::max(p[1], p[3])};
}

// IoU above the threshold; boxes that do not intersect (or have no area) never suppress.
bool suppresses(const Box& a, const Box& b, float threshold) {
  const float ih = std::min(a.y1, b.y1) - std::max(a.y0, b.y0), iw = std::min(a.x1, b.x1) - std::max(a.x0, b.x0);
  if (ih <= 0 || iw <= 0) return false;
  const float inter = ih * iw;
  const float uni = (a.y1 - a.y0) * (a.x1 - a.x0) + (b.y1 - b.y0) * (b.x1 - b.x0) - inter;
  if (uni <= 0) return false;
  return inter / uni > threshold;
}

HostTensor non_max_suppression(NodeCtx& c, const HostTensor& boxes, const HostTensor& scores, int64_t max_out,
                               float iou, bool has_score, float score_min, bool center) {
  if (boxes.dtype != DType::F32 || scores.dtype != DType::F32) c.unsupported("boxes and scores must be f32");
  if (boxes.dims.size() != 3 || boxes.dims[2] != 4)
    c.invalid("boxes must be [batches, boxes, 4], got ", Shape(boxes.dims, boxes.dtype).str());
  if (scores.dims.size() != 3 || scores.dims[0] != boxes.dims[0] || scores.dims[2] != boxes.dims[1])
    c.invalid("scores must be [batches, classes, boxes] for boxes ", Shape(boxes.dims, boxes.dtype).str(), ", got ",
              Shape(scores.dims, scores.dtype).str());
  if (!(iou >= 0 && iou <= 1)) c.invalid("iou_threshold must be in [0, 1], got ", iou);
  const int64_t nb = boxes.dims[0], nc = scores.dims[1], n = boxes.dims[1];
  const float* bp = reinterpret_cast<const float*>(boxes.bytes.data());
  const float* sp = reinterpret_cast<const float*>(scores.bytes.data());
  std::vector<int64_t> out;
  std::vector<int64_t> cand;
  std::vector<Box> kept;
  c.host_size(n);
  for (int64_t b = 0; b < nb && max_out > 0; ++b)
    for (int64_t k = 0; k < nc; ++k) {
      const float* s = sp + (b * nc + k) * n;
      cand.clear();
      for (int64_t i = 0; i < n; ++i)
        if (!has_score || s[i] > score_min) cand.push_back(i);
      // Highest score first; equal scores by box index.
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t i, int64_t j) { return s[i] > s[j]; });
      kept.clear();
      for (int64_t i : cand) {
        if (int64_t(kept.size()) >= max_out) break;
        const Box bx = box_at(bp + (b * n + i) * 4, center);
        if (std::any_of(kept.begin(), kept.end(), [&](const Box& o) { return suppresses(o, bx, iou); })) continue;
        kept.push_back(bx);
        out.insert(out.end(), {b, k, i});
      }
    }
  return make_i64({int64_t(out.size() / 3), 3}, out);
}

std::vector<Value> constants(NodeCtx& c, const std::vector<HostTensor>& ts) {
  std::vector<Value> v;
  for (const HostTensor& t : ts) v.push_back(c.im.constant(t));
  return v;
}

}  // namespace

std::vector<Value> lower_on_host(NodeCtx& c) {
  throw RunTimeShapeError(detail::concat("ONNX ", c.where(), ": strings, sequences and optionals run on the host"),
                          &c.node);
}

std::vector<Value> lower_nonzero(NodeCtx& c) {
  if (!all_const(c)) run_time(c);
  return constants(c, {nonzero(c.const_input(0, "X"))});
}

std::vector<Value> lower_unique(NodeCtx& c) {
  if (!all_const(c)) run_time(c);
  HostTensor x = c.const_input(0, "X");
  const bool has_axis = c.has_attr("axis");
  const int64_t axis = has_axis ? c.axis(c.attr_int("axis", 0), int64_t(x.dims.size())) : 0;
  if (has_axis && x.dims.empty()) c.invalid("axis given for a scalar input");
  return constants(c, unique(c, std::move(x), has_axis, axis, c.attr_int("sorted", 1) != 0));
}

std::vector<Value> lower_non_max_suppression(NodeCtx& c) {
  if (!all_const(c)) run_time(c);
  auto scalar = [&](int i, const char* what, double def) {
    if (!c.has(i)) return def;
    std::vector<double> v = c.const_reals(i, what);
    if (v.size() != 1) c.invalid(what, " must hold one value, got ", v.size());
    return v[0];
  };
  const int64_t center = c.attr_int("center_point_box", 0);
  if (center != 0 && center != 1) c.invalid("center_point_box must be 0 or 1, got ", center);
  const double max_out = scalar(2, "max_output_boxes_per_class", 0);
  const float iou = float(scalar(3, "iou_threshold", 0));
  const float score_min = float(scalar(4, "score_threshold", 0));
  // Checked as a double first: converting NaN or a value past int64's range is undefined.
  const int64_t per_class = !(max_out > 0) ? 0 : max_out >= 9.2e18 ? int64_t(9.2e18) : int64_t(max_out);
  return constants(c, {non_max_suppression(c, c.const_input(0, "boxes"), c.const_input(1, "scores"), per_class, iou,
                                           c.has(4), score_min, center == 1)});
}

// ImageDecoder: encoded bytes [n] -> u8 [height, width, 3 or 1] (image_decode.h).
std::vector<Value> lower_image_decoder(NodeCtx& c) {
  if (!all_const(c)) run_time(c);
  const HostTensor x = c.const_input(0, "encoded_stream");
  if (x.dtype != DType::U8 || x.dims.size() != 1)
    c.invalid("encoded_stream must be a 1-D uint8 tensor, got ", Shape(x.dims, x.dtype).str());
  const std::string f = c.attr_str("pixel_format", "RGB");
  if (f != "RGB" && f != "BGR" && f != "Grayscale") c.invalid("pixel_format must be RGB, BGR or Grayscale, got '", f, "'");
  const PixelFormat pf = f == "RGB" ? PixelFormat::Rgb : f == "BGR" ? PixelFormat::Bgr : PixelFormat::Grayscale;
  return constants(c, {decode_image(x.bytes.data(), x.bytes.size(), pf, "ONNX " + c.where())});
}

// Compress: a gather of the positions the condition selects. The condition must be known
// to import the gather; when it is computed at run time the output's length is too, and
// the node runs on the host between compiled segments.
std::vector<Value> lower_compress(NodeCtx& c) {
  if (!c.is_const(1)) run_time(c);
  std::vector<int64_t> cond = c.const_ints(1, "condition");
  Value x = c.in(0);
  auto d = c.dims(0);
  int64_t ax = 0;
  if (c.has_attr("axis")) {
    ax = c.axis(c.attr_int("axis", 0), int64_t(d.size()));
  } else {
    x = c.reshape(x, {dims_numel(d)});
    d = {dims_numel(d)};
  }
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < int64_t(cond.size()) && i < d[size_t(ax)]; ++i)
    if (cond[size_t(i)]) keep.push_back(i);
  return {c.op(OpKind::Gather, {x, c.ints(keep)}, AxisAttrs{ax})};
}

}  // namespace rlx::onnx
