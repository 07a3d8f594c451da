// Plain reference implementations (double precision, loops over multi-indices) of the
// ops the end-to-end tests check. Written for clarity, not speed; shapes are small.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "e2e_util.h"

namespace rlx::e2e::ref {

inline std::vector<int64_t> strides_of(const std::vector<int64_t>& d) {
  std::vector<int64_t> s(d.size(), 1);
  for (int i = int(d.size()) - 2; i >= 0; --i) s[size_t(i)] = s[size_t(i) + 1] * d[size_t(i) + 1];
  return s;
}

// Calls f(multi_index, flat) for every element of dims in row-major order.
inline void for_each(const std::vector<int64_t>& dims, const std::function<void(const std::vector<int64_t>&, int64_t)>& f) {
  const int64_t n = numel_of(dims);
  std::vector<int64_t> idx(dims.size(), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    f(idx, flat);
    for (int a = int(dims.size()) - 1; a >= 0; --a) {
      if (++idx[size_t(a)] < dims[size_t(a)]) break;
      idx[size_t(a)] = 0;
    }
  }
}

// Offset in `src` (dims) of output index `idx` under numpy right-aligned broadcasting.
inline int64_t bcast_offset(const std::vector<int64_t>& src, const std::vector<int64_t>& idx) {
  const auto st = strides_of(src);
  const size_t lead = idx.size() - src.size();
  int64_t off = 0;
  for (size_t a = 0; a < src.size(); ++a) off += (src[a] == 1 ? 0 : idx[lead + a]) * st[a];
  return off;
}

inline std::vector<int64_t> bcast_dims(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t x = i + a.size() >= r ? a[i + a.size() - r] : 1;
    const int64_t y = i + b.size() >= r ? b[i + b.size() - r] : 1;
    out[i] = x == 1 ? y : x;
  }
  return out;
}

inline T map(const T& x, const std::function<double(double)>& f, DType out) {
  T y(x.dims, out);
  for (size_t i = 0; i < x.v.size(); ++i) y.v[i] = f(x.v[i]);
  return y;
}

inline T zip(const std::vector<const T*>& xs, const std::function<double(const std::vector<double>&)>& f, DType out) {
  std::vector<int64_t> dims = xs[0]->dims;
  for (const T* x : xs) dims = bcast_dims(dims, x->dims);
  T y(dims, out);
  std::vector<double> args(xs.size());
  for_each(dims, [&](const std::vector<int64_t>& idx, int64_t flat) {
    for (size_t k = 0; k < xs.size(); ++k) args[k] = xs[k]->v[size_t(bcast_offset(xs[k]->dims, idx))];
    y.v[size_t(flat)] = f(args);
  });
  return y;
}

inline T binary(const T& a, const T& b, const std::function<double(double, double)>& f, DType out) {
  return zip({&a, &b}, [&](const std::vector<double>& v) { return f(v[0], v[1]); }, out);
}

// numpy matmul: 1-D operands are promoted and the added dim dropped afterwards.
inline T matmul(const T& a0, const T& b0) {
  T a = a0, b = b0;
  const bool a1 = a.rank() == 1, b1 = b.rank() == 1;
  if (a1) a.dims.insert(a.dims.begin(), 1);
  if (b1) b.dims.push_back(1);
  const int64_t m = a.dims[a.dims.size() - 2], k = a.dims.back(), n = b.dims.back();
  std::vector<int64_t> ab(a.dims.begin(), a.dims.end() - 2), bb(b.dims.begin(), b.dims.end() - 2);
  std::vector<int64_t> batch = bcast_dims(ab, bb);
  std::vector<int64_t> od = batch;
  od.push_back(m);
  od.push_back(n);
  T y(od, a0.dtype);
  int64_t bi = 0;
  for_each(batch, [&](const std::vector<int64_t>& idx, int64_t) {
    const int64_t ao = bcast_offset(ab, idx) * m * k, bo = bcast_offset(bb, idx) * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += a.v[size_t(ao + i * k + p)] * b.v[size_t(bo + p * n + j)];
        y.v[size_t((bi * m + i) * n + j)] = s;
      }
    ++bi;
  });
  if (a1) y.dims.erase(y.dims.end() - 2);
  if (b1) y.dims.pop_back();
  return y;
}

enum class Red { Sum, Mean, Max, Min, Prod };

inline T reduce(const T& x, std::vector<int64_t> axes, bool keepdims, Red kind) {
  const int r = x.rank();
  if (axes.empty())
    for (int a = 0; a < r; ++a) axes.push_back(a);
  std::vector<bool> red(size_t(r), false);
  for (int64_t a : axes) red[size_t(a < 0 ? a + r : a)] = true;
  std::vector<int64_t> kd = x.dims;
  for (int a = 0; a < r; ++a)
    if (red[size_t(a)]) kd[size_t(a)] = 1;
  const double init = kind == Red::Max ? -INFINITY : kind == Red::Min ? INFINITY : kind == Red::Prod ? 1 : 0;
  T y(kd, x.dtype);
  std::fill(y.v.begin(), y.v.end(), init);
  std::vector<int64_t> cnt(y.v.size(), 0);
  for_each(x.dims, [&](const std::vector<int64_t>& idx, int64_t flat) {
    std::vector<int64_t> o = idx;
    for (int a = 0; a < r; ++a)
      if (red[size_t(a)]) o[size_t(a)] = 0;
    double& acc = y.v[size_t(bcast_offset(kd, o))];
    cnt[size_t(bcast_offset(kd, o))]++;
    const double v = x.v[size_t(flat)];
    switch (kind) {
      case Red::Sum: case Red::Mean: acc += v; break;
      case Red::Max: acc = std::max(acc, v); break;
      case Red::Min: acc = std::min(acc, v); break;
      case Red::Prod: acc *= v; break;
    }
  });
  if (kind == Red::Mean)
    for (size_t i = 0; i < y.v.size(); ++i) y.v[i] /= double(cnt[i]);
  if (!keepdims) {
    std::vector<int64_t> d;
    for (int a = 0; a < r; ++a)
      if (!red[size_t(a)]) d.push_back(x.dims[size_t(a)]);
    y.dims = d;
  }
  return y;
}

// Moves `axis` last: returns (outer rows of the other dims in order, length along axis)
// as an index map rows[r][j] = flat offset of element j of row r.
inline std::vector<std::vector<int64_t>> rows_along(const std::vector<int64_t>& dims, int axis) {
  const auto st = strides_of(dims);
  std::vector<int64_t> outer = dims;
  outer[size_t(axis)] = 1;
  std::vector<std::vector<int64_t>> rows;
  for_each(outer, [&](const std::vector<int64_t>& idx, int64_t) {
    int64_t base = 0;
    for (size_t a = 0; a < dims.size(); ++a) base += idx[a] * st[a];
    std::vector<int64_t> row;
    for (int64_t j = 0; j < dims[size_t(axis)]; ++j) row.push_back(base + j * st[size_t(axis)]);
    rows.push_back(std::move(row));
  });
  return rows;
}

inline T arg_reduce(const T& x, int axis, bool keepdims, bool is_max, bool select_last) {
  std::vector<int64_t> kd = x.dims;
  kd[size_t(axis)] = 1;
  T y(kd, DType::I64);
  auto rows = rows_along(x.dims, axis);
  for (size_t r = 0; r < rows.size(); ++r) {
    int64_t best = 0;
    for (int64_t j = 1; j < int64_t(rows[r].size()); ++j) {
      const double v = x.v[size_t(rows[r][size_t(j)])], b = x.v[size_t(rows[r][size_t(best)])];
      const bool better = is_max ? (v > b || (select_last && v == b)) : (v < b || (select_last && v == b));
      if (better) best = j;
    }
    y.v[r] = double(best);
  }
  if (!keepdims) y.dims.erase(y.dims.begin() + axis);
  return y;
}

inline std::pair<T, T> topk(const T& x, int64_t k, int axis, bool largest) {
  std::vector<int64_t> od = x.dims;
  od[size_t(axis)] = k;
  T vals(od, x.dtype), idxs(od, DType::I64);
  auto in_rows = rows_along(x.dims, axis), out_rows = rows_along(od, axis);
  for (size_t r = 0; r < in_rows.size(); ++r) {
    std::vector<int64_t> order(in_rows[r].size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      const double va = x.v[size_t(in_rows[r][size_t(a)])], vb = x.v[size_t(in_rows[r][size_t(b)])];
      return largest ? va > vb : va < vb;
    });
    for (int64_t j = 0; j < k; ++j) {
      vals.v[size_t(out_rows[r][size_t(j)])] = x.v[size_t(in_rows[r][size_t(order[size_t(j)])])];
      idxs.v[size_t(out_rows[r][size_t(j)])] = double(order[size_t(j)]);
    }
  }
  return {vals, idxs};
}

inline T softmax(const T& x, int axis, bool log) {
  T y(x.dims, x.dtype);
  for (const auto& row : rows_along(x.dims, axis)) {
    double m = -INFINITY, s = 0;
    for (int64_t o : row) m = std::max(m, x.v[size_t(o)]);
    for (int64_t o : row) s += std::exp(x.v[size_t(o)] - m);
    for (int64_t o : row) y.v[size_t(o)] = log ? x.v[size_t(o)] - m - std::log(s) : std::exp(x.v[size_t(o)] - m) / s;
  }
  return y;
}

// Normalizes over [axis, rank): layer_norm (mean and variance) or rms_norm.
inline T norm(const T& x, const T* scale, const T* bias, int axis, double eps, bool rms) {
  const int64_t inner = numel_of(std::vector<int64_t>(x.dims.begin() + axis, x.dims.end()));
  const int64_t outer = x.numel() / inner;
  T y(x.dims, x.dtype);
  for (int64_t r = 0; r < outer; ++r) {
    const double* p = x.v.data() + r * inner;
    double mean = 0, var = 0;
    if (!rms) {
      for (int64_t j = 0; j < inner; ++j) mean += p[j];
      mean /= double(inner);
    }
    for (int64_t j = 0; j < inner; ++j) var += (p[j] - mean) * (p[j] - mean);
    var /= double(inner);
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < inner; ++j) {
      double v = (p[j] - mean) * inv;
      if (scale) v *= scale->v[size_t(j % scale->numel())];
      if (bias) v += bias->v[size_t(j % bias->numel())];
      y.v[size_t(r * inner + j)] = v;
    }
  }
  return y;
}

inline T transpose(const T& x, const std::vector<int64_t>& perm) {
  std::vector<int64_t> od;
  for (int64_t p : perm) od.push_back(x.dims[size_t(p)]);
  const auto st = strides_of(x.dims);
  T y(od, x.dtype);
  for_each(od, [&](const std::vector<int64_t>& idx, int64_t flat) {
    int64_t off = 0;
    for (size_t a = 0; a < perm.size(); ++a) off += idx[a] * st[size_t(perm[a])];
    y.v[size_t(flat)] = x.v[size_t(off)];
  });
  return y;
}

// Gathers y[idx] = x[src(idx)] for an output of dims `od`; src returns a flat offset.
inline T remap(const T& x, const std::vector<int64_t>& od, const std::function<int64_t(const std::vector<int64_t>&)>& src) {
  T y(od, x.dtype);
  for_each(od, [&](const std::vector<int64_t>& idx, int64_t flat) {
    const int64_t o = src(idx);
    y.v[size_t(flat)] = o < 0 ? 0.0 : x.v[size_t(o)];
  });
  return y;
}

// Slice with explicit per-axis start/step/count (already clamped by the caller).
inline T slice(const T& x, const std::vector<int64_t>& start, const std::vector<int64_t>& step,
               const std::vector<int64_t>& count) {
  const auto st = strides_of(x.dims);
  return remap(x, count, [&](const std::vector<int64_t>& idx) {
    int64_t off = 0;
    for (size_t a = 0; a < idx.size(); ++a) off += (start[a] + idx[a] * step[a]) * st[a];
    return off;
  });
}

// Slice with ONNX semantics (negative indices, clamping, negative steps).
inline T slice(const T& x, const SliceAttrs& a) {
  const int r = x.rank();
  std::vector<int64_t> start(size_t(r), 0), step(size_t(r), 1), count = x.dims;
  for (size_t i = 0; i < a.starts.size(); ++i) {
    const int64_t ax = a.axes.empty() ? int64_t(i) : (a.axes[i] < 0 ? a.axes[i] + r : a.axes[i]);
    const int64_t n = x.dims[size_t(ax)], st = a.steps.empty() ? 1 : a.steps[i];
    int64_t b = a.starts[i], e = a.ends[i];
    if (b < 0) b += n;
    if (e < 0) e += n;
    if (st > 0) {
      b = std::clamp<int64_t>(b, 0, n);
      e = std::clamp<int64_t>(e, 0, n);
    } else {
      b = std::clamp<int64_t>(b, 0, n - 1);
      e = std::clamp<int64_t>(e, -1, n - 1);
    }
    start[size_t(ax)] = b, step[size_t(ax)] = st;
    count[size_t(ax)] = std::max<int64_t>(0, st > 0 ? (e - b + st - 1) / st : (b - e - st - 1) / -st);
  }
  return slice(x, start, step, count);
}

inline T concat(const std::vector<T>& xs, int axis) {
  std::vector<int64_t> od = xs[0].dims;
  od[size_t(axis)] = 0;
  for (const T& x : xs) od[size_t(axis)] += x.dims[size_t(axis)];
  T y(od, xs[0].dtype);
  for_each(od, [&](const std::vector<int64_t>& idx, int64_t flat) {
    int64_t i = idx[size_t(axis)];
    size_t k = 0;
    while (i >= xs[k].dims[size_t(axis)]) i -= xs[k++].dims[size_t(axis)];
    std::vector<int64_t> j = idx;
    j[size_t(axis)] = i;
    y.v[size_t(flat)] = xs[k].v[size_t(bcast_offset(xs[k].dims, j))];
  });
  return y;
}

inline T gather(const T& x, const T& indices, int axis) {
  std::vector<int64_t> od(x.dims.begin(), x.dims.begin() + axis);
  od.insert(od.end(), indices.dims.begin(), indices.dims.end());
  od.insert(od.end(), x.dims.begin() + axis + 1, x.dims.end());
  const auto st = strides_of(x.dims);
  const int ir = indices.rank();
  return remap(x, od, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> ii(idx.begin() + axis, idx.begin() + axis + ir);
    int64_t g = int64_t(indices.v[size_t(bcast_offset(indices.dims, ii))]);
    if (g < 0) g += x.dims[size_t(axis)];
    int64_t off = 0;
    for (int a = 0; a < axis; ++a) off += idx[size_t(a)] * st[size_t(a)];
    off += g * st[size_t(axis)];
    for (int a = axis + 1; a < x.rank(); ++a) off += idx[size_t(a - axis - 1 + axis + ir)] * st[size_t(a)];
    return off;
  });
}

inline T expand(const T& x, const std::vector<int64_t>& shape) {
  const auto od = bcast_dims(x.dims, shape);
  return remap(x, od, [&](const std::vector<int64_t>& idx) { return bcast_offset(x.dims, idx); });
}

inline T pad(const T& x, const std::vector<int64_t>& pads, PadMode mode, double value) {
  const int r = x.rank();
  std::vector<int64_t> od = x.dims;
  for (int a = 0; a < r; ++a) od[size_t(a)] += pads[size_t(a)] + pads[size_t(a + r)];
  const auto st = strides_of(x.dims);
  T y(od, x.dtype);
  for_each(od, [&](const std::vector<int64_t>& idx, int64_t flat) {
    int64_t off = 0;
    bool outside = false;
    for (int a = 0; a < r; ++a) {
      int64_t i = idx[size_t(a)] - pads[size_t(a)];
      const int64_t n = x.dims[size_t(a)];
      if (i < 0 || i >= n) {
        if (mode == PadMode::Constant) outside = true;
        else if (mode == PadMode::Edge) i = std::clamp<int64_t>(i, 0, n - 1);
        else {  // reflect (no edge repeat)
          while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;
        }
      }
      off += i * st[size_t(a)];
    }
    y.v[size_t(flat)] = outside ? value : x.v[size_t(off)];
  });
  return y;
}

inline T tile(const T& x, const std::vector<int64_t>& reps) {
  std::vector<int64_t> od = x.dims;
  for (size_t a = 0; a < od.size(); ++a) od[a] *= reps[a];
  const auto st = strides_of(x.dims);
  return remap(x, od, [&](const std::vector<int64_t>& idx) {
    int64_t off = 0;
    for (size_t a = 0; a < idx.size(); ++a) off += (idx[a] % x.dims[a]) * st[a];
    return off;
  });
}

inline T conv2d(const T& x, const T& w, const T* b, const ConvAttrs& a) {
  const int64_t n = x.dims[0], c = x.dims[1], h = x.dims[2], wd = x.dims[3];
  const int64_t co = w.dims[0], cg = w.dims[1], kh = w.dims[2], kw = w.dims[3];
  const int64_t oh = (h + a.pads[0] + a.pads[2] - a.dilations[0] * (kh - 1) - 1) / a.strides[0] + 1;
  const int64_t ow = (wd + a.pads[1] + a.pads[3] - a.dilations[1] * (kw - 1) - 1) / a.strides[1] + 1;
  const int64_t cog = co / a.group;
  T y({n, co, oh, ow}, x.dtype);
  for (int64_t ni = 0; ni < n; ++ni)
    for (int64_t o = 0; o < co; ++o)
      for (int64_t yi = 0; yi < oh; ++yi)
        for (int64_t xi = 0; xi < ow; ++xi) {
          double s = b ? b->v[size_t(o)] : 0.0;
          const int64_t g = o / cog;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t p = 0; p < kh; ++p)
              for (int64_t q = 0; q < kw; ++q) {
                const int64_t iy = yi * a.strides[0] - a.pads[0] + p * a.dilations[0];
                const int64_t ix = xi * a.strides[1] - a.pads[1] + q * a.dilations[1];
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                s += x.v[size_t(((ni * c + g * cg + ci) * h + iy) * wd + ix)] *
                     w.v[size_t(((o * cg + ci) * kh + p) * kw + q)];
              }
          y.v[size_t(((ni * co + o) * oh + yi) * ow + xi)] = s;
        }
  (void)c;
  return y;
}

// ONNX ConvInteger: conv2d of (x - x_zp) and (w - w_zp[m]) (every value an exact double), as i32.
inline T conv_integer(const T& x, const T& w, const T& xz, const T& wz, const ConvAttrs& a) {
  T xs = x, ws = w;
  for (double& v : xs.v) v -= xz.v[0];
  const int64_t per = ws.numel() / ws.dims[0];
  for (int64_t i = 0; i < ws.numel(); ++i) ws.v[size_t(i)] -= wz.v[size_t(wz.numel() == 1 ? 0 : i / per)];
  xs.dtype = ws.dtype = DType::F64;
  T y = conv2d(xs, ws, nullptr, a);
  y.dtype = DType::I32;
  return y;
}

// dft / idft along axis -2 of [..., n, 1|2] (ops.def), by the direct sum in double.
inline T dft(const T& x, bool inverse) {
  const int64_t n = x.dims[size_t(x.rank() - 2)], c = x.dims.back(), rows = x.numel() / (n * c);
  std::vector<int64_t> od = x.dims;
  od.back() = 2;
  T y(od, x.dtype);
  const double sign = inverse ? 1.0 : -1.0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < n; ++k) {
      double re = 0, im = 0;
      for (int64_t j = 0; j < n; ++j) {
        const double th = 2.0 * M_PI * double(j * k % n) / double(n);
        const double xr = x.v[size_t((r * n + j) * c)], xi = c == 2 ? x.v[size_t((r * n + j) * 2 + 1)] : 0.0;
        re += xr * std::cos(th) - xi * sign * std::sin(th);
        im += xr * sign * std::sin(th) + xi * std::cos(th);
      }
      y.v[size_t((r * n + k) * 2)] = inverse ? re / double(n) : re;
      y.v[size_t((r * n + k) * 2 + 1)] = inverse ? im / double(n) : im;
    }
  return y;
}

inline T pool2d(const T& x, const PoolAttrs& a, bool is_max) {
  const int64_t n = x.dims[0], c = x.dims[1], h = x.dims[2], w = x.dims[3];
  auto out_len = [&](int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t d) {
    const int64_t span = in + p0 + p1 - d * (k - 1) - 1;
    int64_t o = (a.ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (a.ceil_mode && (o - 1) * s >= in + p0) --o;  // last window must start inside
    return o;
  };
  const int64_t oh = out_len(h, a.kernel[0], a.strides[0], a.pads[0], a.pads[2], a.dilations[0]);
  const int64_t ow = out_len(w, a.kernel[1], a.strides[1], a.pads[1], a.pads[3], a.dilations[1]);
  T y({n, c, oh, ow}, x.dtype);
  for (int64_t nc = 0; nc < n * c; ++nc)
    for (int64_t yi = 0; yi < oh; ++yi)
      for (int64_t xi = 0; xi < ow; ++xi) {
        double acc = is_max ? -INFINITY : 0;
        int64_t cnt = 0, padded = 0;
        for (int64_t p = 0; p < a.kernel[0]; ++p)
          for (int64_t q = 0; q < a.kernel[1]; ++q) {
            const int64_t iy = yi * a.strides[0] - a.pads[0] + p * a.dilations[0];
            const int64_t ix = xi * a.strides[1] - a.pads[1] + q * a.dilations[1];
            // count_include_pad counts window cells inside the padded extent only.
            if (iy < h + a.pads[2] && ix < w + a.pads[3]) ++padded;
            if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
            const double v = x.v[size_t((nc * h + iy) * w + ix)];
            acc = is_max ? std::max(acc, v) : acc + v;
            ++cnt;
          }
        y.v[size_t((nc * oh + yi) * ow + xi)] = is_max ? acc : acc / double(a.count_include_pad ? padded : cnt);
      }
  return y;
}

// attention(q[B,Hq,Sq,D], k[B,Hkv,Sk,D], v[B,Hkv,Sk,Dv], mask broadcast to [B,Hq,Sq,Sk]).
inline T attention(const T& q, const T& k, const T& v, const T* mask, bool causal, double scale) {
  const int64_t B = q.dims[0], hq = q.dims[1], sq = q.dims[2], d = q.dims[3];
  const int64_t hkv = k.dims[1], sk = k.dims[2], dv = v.dims[3];
  if (scale == 0) scale = 1.0 / std::sqrt(double(d));
  T y({B, hq, sq, dv}, q.dtype);
  std::vector<double> s(static_cast<size_t>(sk));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t hk = h / (hq / hkv);
      for (int64_t i = 0; i < sq; ++i) {
        double m = -INFINITY;
        for (int64_t j = 0; j < sk; ++j) {
          double acc = 0;
          for (int64_t t = 0; t < d; ++t)
            acc += q.v[size_t(((b * hq + h) * sq + i) * d + t)] * k.v[size_t(((b * hkv + hk) * sk + j) * d + t)];
          acc *= scale;
          if (mask) acc += mask->v[size_t(bcast_offset(mask->dims, {b, h, i, j}))];
          if (causal && j > i + (sk - sq)) acc = -INFINITY;
          s[size_t(j)] = acc;
          m = std::max(m, acc);
        }
        double z = 0;
        for (double& e : s) z += (e = std::exp(e - m));
        for (int64_t t = 0; t < dv; ++t) {
          double acc = 0;
          for (int64_t j = 0; j < sk; ++j) acc += s[size_t(j)] * v.v[size_t(((b * hkv + hk) * sk + j) * dv + t)];
          y.v[size_t(((b * hq + h) * sq + i) * dv + t)] = acc / z;
        }
      }
    }
  return y;
}

// rotary(x[B,H,S,D], cos[S,R/2], sin[S,R/2]).
inline T rotary(const T& x, const T& c, const T& s, bool interleaved) {
  const int64_t S = x.dims[2], D = x.dims[3], half = c.dims[1];
  T y = x;
  const int64_t rows = x.numel() / D;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t pos = r % S;
    for (int64_t i = 0; i < half; ++i) {
      const int64_t i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : i + half;
      const double x1 = x.v[size_t(r * D + i1)], x2 = x.v[size_t(r * D + i2)];
      const double cv = c.v[size_t(pos * half + i)], sv = s.v[size_t(pos * half + i)];
      y.v[size_t(r * D + i1)] = x1 * cv - x2 * sv;
      y.v[size_t(r * D + i2)] = x2 * cv + x1 * sv;
    }
  }
  return y;
}

inline double gelu(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }
inline double gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
}

}  // namespace rlx::e2e::ref
