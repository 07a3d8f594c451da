// Resize / Upsample. Interpolation is separable, so each resized axis becomes one
// 1-D map computed here in double precision following the ONNX reference: nearest
// modes as a gather with constant indices, linear / cubic (with antialias and
// exclude_outside) as a matmul with a constant [in, out] weight matrix, and
// tf_crop_and_resize extrapolation as a where on a constant row mask.
#include <cmath>
#include <numeric>

#include "io/onnx/ops_table.h"

namespace rlx::onnx {

namespace {

struct Spec {
  std::string mode = "nearest", coord = "half_pixel", nearest = "round_prefer_floor";
  double cubic_a = -0.75, extrapolation = 0;
  bool exclude_outside = false, antialias = false;
};

// `out` is the integer output length; like the reference, the transforms use the
// unrounded length scale * in.
double original_coord(const Spec& s, double x, double scale, int64_t in, int64_t out, double roi_start,
                      double roi_end) {
  const std::string& m = s.coord;
  double width = scale * double(in);
  if (m == "align_corners") return width == 1 ? 0.0 : x * double(in - 1) / (width - 1);
  if (m == "asymmetric") return x / scale;
  if (m == "tf_crop_and_resize") {
    if (width == 1) return (roi_end - roi_start) * double(in - 1) / 2.0 + roi_start * double(in - 1);
    return roi_start * double(in - 1) + x * (roi_end - roi_start) * double(in - 1) / (width - 1);
  }
  if (m == "pytorch_half_pixel") return width == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
  if (m == "half_pixel_symmetric") {
    double adjustment = double(out) / width;
    double center = double(in) / 2.0;
    double offset = center * (1 - adjustment);
    return offset + (x + 0.5) / scale - 0.5;
  }
  return (x + 0.5) / scale - 0.5;  // half_pixel
}

std::vector<double> cubic_coeffs(double r, double a) {
  return {((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a, ((a + 2) * r - (a + 3)) * r * r + 1,
          ((a + 2) * (1 - r) - (a + 3)) * (1 - r) * (1 - r) + 1,
          ((a * ((1 - r) + 1) - 5 * a) * ((1 - r) + 1) + 8 * a) * ((1 - r) + 1) - 4 * a};
}

double cubic_kernel(double x, double a) {
  x = std::fabs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

std::vector<double> coeffs_for(const Spec& s, double ratio, double scale) {
  if (s.mode == "nearest") {
    if (ratio == 1.0) return {0, 1};
    const std::string& n = s.nearest;
    if (n == "round_prefer_ceil") return {ratio < 0.5 ? 1.0 : 0.0, ratio >= 0.5 ? 1.0 : 0.0};
    if (n == "floor") return {1, 0};
    if (n == "ceil") return {0, 1};
    return {ratio <= 0.5 ? 1.0 : 0.0, ratio > 0.5 ? 1.0 : 0.0};
  }
  if (s.antialias && scale < 1) {
    int64_t start = int64_t(std::floor(-1.0 / scale) + 1);
    if (s.mode == "cubic") start = int64_t(std::floor(-2.0 / scale) + 1);
    int64_t footprint = 2 - 2 * start;
    std::vector<double> c(static_cast<size_t>(footprint));
    double sum = 0;
    for (int64_t i = 0; i < footprint; ++i) {
      double arg = (double(start + i) - ratio) * scale;
      c[size_t(i)] = s.mode == "linear" ? std::clamp(1 - std::fabs(arg), 0.0, 1.0) : cubic_kernel(arg, s.cubic_a);
      sum += c[size_t(i)];
    }
    for (auto& v : c) v /= sum;
    return c;
  }
  if (s.mode == "linear") return {1 - ratio, ratio};
  return cubic_coeffs(ratio, s.cubic_a);
}

// The n neighbors of x in an edge-padded axis: the n nearest indices (ties to the
// smaller index), sorted; returned unpadded (may be outside [0, in)).
std::vector<int64_t> neighbors(double x, size_t n, int64_t in) {
  int64_t pad = int64_t((n + 1) / 2);
  double xp = x + double(pad);
  int64_t limit = in + 2 * pad;
  // The n nearest of [0, limit) to xp form a contiguous run around floor(xp).
  int64_t lo = int64_t(std::floor(xp)) - int64_t(n), hi = int64_t(std::floor(xp)) + int64_t(n) + 1;
  std::vector<int64_t> cand;
  for (int64_t i = std::max<int64_t>(0, lo); i < std::min(limit, hi); ++i) cand.push_back(i);
  std::stable_sort(cand.begin(), cand.end(), [&](int64_t a, int64_t b) {
    double da = std::fabs(xp - double(a)), db = std::fabs(xp - double(b));
    return da < db || (da == db && a < b);
  });
  cand.resize(std::min(cand.size(), n));
  std::sort(cand.begin(), cand.end());
  for (auto& i : cand) i -= pad;
  return cand;
}

// Builds the [out, in] map of one axis; extrap[j] marks rows that take the
// extrapolation value.
void axis_map(const Spec& s, int64_t in, int64_t out, double scale, double rs, double re,
              std::vector<double>& m, std::vector<bool>& extrap) {
  m.assign(size_t(out * in), 0.0);
  extrap.assign(size_t(out), false);
  for (int64_t j = 0; j < out; ++j) {
    double x = original_coord(s, double(j), scale, in, out, rs, re);
    if (s.coord == "tf_crop_and_resize" && (x < 0 || x > double(in - 1))) {
      extrap[size_t(j)] = true;
      continue;
    }
    double xi = std::floor(x);
    double ratio = x == xi ? 1.0 : x - xi;
    std::vector<double> co = coeffs_for(s, ratio, scale);
    std::vector<int64_t> idx = neighbors(x, co.size(), in);
    if (s.exclude_outside) {
      double sum = 0;
      for (size_t i = 0; i < idx.size(); ++i) {
        if (idx[i] < 0 || idx[i] >= in) co[i] = 0;
        sum += co[i];
      }
      if (sum != 0)
        for (auto& v : co) v /= sum;
    }
    for (size_t i = 0; i < idx.size() && i < co.size(); ++i) {
      int64_t k = std::clamp<int64_t>(idx[i], 0, in - 1);
      m[size_t(j * in + k)] += co[i];
    }
  }
}

Value resize_axis(NodeCtx& c, Value x, int64_t axis, const Spec& s, int64_t out, double scale, double rs, double re) {
  auto d = c.vdims(x);
  int64_t in = d[size_t(axis)];
  if (in <= 0 || out < 0) c.invalid("cannot resize an empty axis");
  c.host_size(in * out);
  std::vector<double> m;
  std::vector<bool> extrap;
  axis_map(s, in, out, scale, rs, re, m, extrap);
  bool any_extrap = std::find(extrap.begin(), extrap.end(), true) != extrap.end();
  DType t = c.g.type(x).dtype();
  Value y;
  // Each output's taps (input index, weight), and whether every output copies one input.
  std::vector<std::vector<std::pair<int64_t, double>>> taps_of(static_cast<size_t>(out));
  size_t taps = 0;
  bool one_hot = true;
  std::vector<int64_t> gidx(size_t(out), 0);
  for (int64_t j = 0; j < out; ++j) {
    auto& row = taps_of[size_t(j)];
    for (int64_t i = 0; i < in; ++i)
      if (m[size_t(j * in + i)] != 0) row.emplace_back(i, m[size_t(j * in + i)]);
    taps = std::max(taps, row.size());
    if (extrap[size_t(j)]) continue;
    if (row.size() != 1 || row[0].second != 1) one_hot = false;
    else gidx[size_t(j)] = row[0].first;
  }
  if (one_hot) {
    bool identity = out == in && !any_extrap;
    for (int64_t j = 0; j < out && identity; ++j) identity = gidx[size_t(j)] == j;
    if (identity) return x;
    // Every input index repeated k times in order (nearest upsampling by an integer factor):
    // a broadcast copy, [.., in, 1, ..] expanded to [.., in, k, ..], instead of a gather
    // that looks each element up through the index table.
    bool repeat = !any_extrap && out % in == 0 && out > in;
    const int64_t k = in > 0 ? out / in : 0;
    for (int64_t j = 0; j < out && repeat; ++j) repeat = gidx[size_t(j)] == j / k;
    if (repeat) {
      std::vector<int64_t> split(d.begin(), d.end()), wide(d.begin(), d.end()), joined(d.begin(), d.end());
      split.insert(split.begin() + axis + 1, 1);
      wide.insert(wide.begin() + axis + 1, k);
      joined[size_t(axis)] = out;
      return c.reshape(c.expand(c.reshape(x, split), wide), joined);
    }
    y = c.op(OpKind::Gather, {x, c.im.constant(make_i64({out}, gidx))}, AxisAttrs{axis});
  } else {
    if (!is_float(t)) c.unsupported(s.mode, " interpolation of ", dtype_name(t), " data");
    // Each output reads at most a few inputs (2 linear, 4 cubic): a gather per tap,
    // weighted and summed in f32 (f64 for f64; half types rounded once at the end),
    // instead of a product with the [in, out] matrix that is nearly all zeros (ISNet's 2x
    // upsamplings spent 200 ms of a 3 s run in those products).
    if (taps >= 1 && taps <= 4) {
      const DType ct = t == DType::F64 ? DType::F64 : DType::F32;
      std::vector<int64_t> wd(d.size(), 1);
      wd[size_t(axis)] = out;
      for (size_t k = 0; k < taps; ++k) {
        std::vector<int64_t> idx(static_cast<size_t>(out), 0);
        std::vector<double> w(static_cast<size_t>(out), 0.0);
        for (int64_t j = 0; j < out; ++j)
          if (k < taps_of[size_t(j)].size()) idx[size_t(j)] = taps_of[size_t(j)][k].first, w[size_t(j)] = taps_of[size_t(j)][k].second;
        Value g = c.op(OpKind::Gather, {x, c.ints(idx)}, AxisAttrs{axis});  // then widened: half the bytes moved
        Value term = c.op(OpKind::Mul, {t == ct ? g : c.cast(g, ct), c.im.constant(make_tensor(ct, wd, w))});
        y = k == 0 ? term : c.op(OpKind::Add, {y, term});
      }
      if (t != ct) y = c.cast(y, t);
    } else {  // wider kernels (antialiased downscaling): the matrix product
      int64_t r = int64_t(d.size());
      std::vector<int64_t> perm;
      for (int64_t i = 0; i < r; ++i)
        if (i != axis) perm.push_back(i);
      perm.push_back(axis);
      Value xt = c.transpose(x, perm);
      std::vector<double> mt(c.host_size(in * out));
      for (int64_t j = 0; j < out; ++j)
        for (int64_t i = 0; i < in; ++i) mt[size_t(i * out + j)] = m[size_t(j * in + i)];
      y = c.op(OpKind::MatMul, {xt, c.im.constant(make_tensor(t, {in, out}, mt))});
      std::vector<int64_t> inv(c.host_size(r));
      for (int64_t i = 0; i < r; ++i) inv[size_t(perm[size_t(i)])] = i;
      y = c.transpose(y, inv);
    }
  }
  if (any_extrap) {
    std::vector<int64_t> md(d.size(), 1);
    md[size_t(axis)] = out;
    std::vector<double> mask(extrap.begin(), extrap.end());
    y = c.op(OpKind::Where, {c.im.constant(make_tensor(DType::Bool, md, mask)), c.scalar(s.extrapolation, t), y});
  }
  return y;
}

}  // namespace

std::vector<Value> lower_resize(NodeCtx& c) {
  auto d = c.dims(0);
  int64_t r = int64_t(d.size());
  bool upsample = c.node.op_type() == "Upsample";
  Spec s;
  s.mode = c.attr_str("mode", "nearest");
  if (s.mode == "bilinear" || s.mode == "trilinear") s.mode = "linear";
  if (s.mode != "nearest" && s.mode != "linear" && s.mode != "cubic") c.invalid("unknown mode '", s.mode, "'");
  std::vector<double> scales, roi;
  std::vector<int64_t> sizes;
  if (upsample || c.opset < 11) {
    s.coord = "asymmetric";
    s.nearest = "floor";
    if (upsample && c.opset < 7) {  // 4-D, the two spatial scales as attributes
      if (r != 4) c.invalid("input must be 4-D before opset 7, got rank ", r);
      if (!c.has_attr("height_scale") || !c.has_attr("width_scale")) c.invalid("needs height_scale and width_scale");
      scales = {1.0, 1.0, double(float(c.attr_float("height_scale", 1))), double(float(c.attr_float("width_scale", 1)))};
    } else if (upsample && c.opset < 9) {
      auto f = c.attr_floats("scales");
      scales.assign(f.begin(), f.end());
    } else {
      scales = c.const_reals(1, "scales");
    }
  } else {
    s.coord = c.attr_str("coordinate_transformation_mode", "half_pixel");
    s.nearest = c.attr_str("nearest_mode", "round_prefer_floor");
    s.cubic_a = double(float(c.attr_float("cubic_coeff_a", -0.75)));
    s.exclude_outside = c.attr_int("exclude_outside", 0) != 0;
    s.extrapolation = double(float(c.attr_float("extrapolation_value", 0)));
    s.antialias = c.attr_int("antialias", 0) != 0;
    if (c.has(1)) roi = c.const_reals(1, "roi");
    if (c.has(2)) scales = c.const_reals(2, "scales");
    if (c.has(3)) sizes = c.const_ints(3, "sizes");
  }
  std::vector<int64_t> axes = c.attr_ints("axes");
  if (axes.empty())
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  for (auto& a : axes) a = c.axis(a, r);
  size_t na = axes.size();
  std::vector<double> sc(size_t(r), 1.0);
  std::vector<int64_t> out = d;
  if (!sizes.empty()) {
    if (sizes.size() != na) c.invalid("sizes must have one entry per axis");
    std::string policy = c.attr_str("keep_aspect_ratio_policy", "stretch");
    for (int64_t v : sizes)
      if (v <= 0 || v > (int64_t(1) << 24)) c.invalid("size ", v, " is out of range");
    if (policy == "stretch") {
      for (size_t i = 0; i < na; ++i) {
        out[size_t(axes[i])] = sizes[i];
        sc[size_t(axes[i])] = double(sizes[i]) / double(d[size_t(axes[i])]);
      }
    } else {
      double scale = policy == "not_larger" ? 1e300 : 0;
      for (size_t i = 0; i < na; ++i) {
        double v = double(sizes[i]) / double(d[size_t(axes[i])]);
        scale = policy == "not_larger" ? std::min(scale, v) : std::max(scale, v);
      }
      for (size_t i = 0; i < na; ++i) {
        sc[size_t(axes[i])] = scale;
        out[size_t(axes[i])] = int64_t(std::round(scale * double(d[size_t(axes[i])])));
      }
    }
  } else {
    if (scales.size() != na) c.invalid("scales must have one entry per axis (", na, "), got ", scales.size());
    for (size_t i = 0; i < na; ++i) {
      double f = double(float(scales[i]));
      if (!(f >= 1e-4 && f <= 1e4)) c.invalid("scale ", f, " is out of range");
      sc[size_t(axes[i])] = f;
      out[size_t(axes[i])] = int64_t(std::floor(double(d[size_t(axes[i])]) * f));
    }
  }
  std::vector<double> rs(size_t(r), 0.0), re(size_t(r), 1.0);
  if (s.coord == "tf_crop_and_resize") {
    if (roi.size() != 2 * na) c.invalid("roi must have 2 entries per axis");
    for (size_t i = 0; i < na; ++i) {
      rs[size_t(axes[i])] = roi[i];
      re[size_t(axes[i])] = roi[i + na];
    }
  }
  Value x = c.in(0);
  for (int64_t a = 0; a < r; ++a) {
    if (out[size_t(a)] == d[size_t(a)] && sc[size_t(a)] == 1.0 && s.coord != "tf_crop_and_resize") continue;
    x = resize_axis(c, x, a, s, out[size_t(a)], sc[size_t(a)], rs[size_t(a)], re[size_t(a)]);
  }
  return {c.op(OpKind::Identity, {x})};
}

}  // namespace rlx::onnx
