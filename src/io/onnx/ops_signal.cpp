// Signal ONNX ops: DFT and STFT as the IR's dft / idft (a transform along axis -2 of
// [..., n, 1|2]), and the window generators (Hann, Hamming, Blackman) as constants.
#include <cmath>

#include "io/onnx/ops_table.h"

namespace rlx::onnx {

namespace {

// The transform of x [..., 1|2] along `axis`: moved before the complex axis, transformed,
// moved back; the result ends in 2.
Value fourier(NodeCtx& c, Value x, int64_t axis, bool inverse) {
  const int64_t r = int64_t(c.vdims(x).size());
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < r - 1; ++i)
    if (i != axis) perm.push_back(i);
  perm.push_back(axis);
  perm.push_back(r - 1);
  std::vector<int64_t> back(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) back[size_t(perm[i])] = int64_t(i);
  Value y = c.op(inverse ? OpKind::Idft : OpKind::Dft, {c.transpose(x, perm)});
  return c.transpose(y, back);
}

}  // namespace

std::vector<Value> lower_dft(NodeCtx& c) {
  auto d = c.dims(0);
  int64_t r = int64_t(d.size());
  if (r < 2 || (d.back() != 1 && d.back() != 2)) c.invalid("input must end in a dim of 1 (real) or 2 (complex)");
  int64_t axis;
  if (c.opset >= 20) axis = c.has(2) ? c.const_ints(2, "axis").at(0) : -2;
  else axis = c.attr_int("axis", 1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r - 1) c.invalid("axis out of range");
  bool inverse = c.attr_int("inverse", 0) != 0, onesided = c.attr_int("onesided", 0) != 0;
  int64_t n = d[size_t(axis)];
  Value x = c.in(0);
  if (inverse && onesided) {
    // Half spectrum in, real signal out: rebuild X[k] = conj(X[len - k]) for k >= n.
    if (d.back() != 2) c.invalid("an inverse one-sided DFT needs complex input");
    int64_t len = c.has(1) ? c.const_ints(1, "dft_length").at(0) : 2 * (n - 1);
    if (len <= 0) c.invalid("dft_length must be positive, got ", len);
    std::vector<int64_t> src(c.host_size(len));
    std::vector<double> sign(c.host_size(2 * len));
    for (int64_t k = 0; k < len; ++k) {
      bool mirror = k >= n;
      src[size_t(k)] = mirror ? len - k : k;
      sign[size_t(2 * k)] = 1;
      sign[size_t(2 * k + 1)] = mirror ? -1 : 1;
      if (src[size_t(k)] >= n || src[size_t(k)] < 0) c.invalid("dft_length ", len, " does not fit ", n, " bins");
    }
    Value full = c.op(OpKind::Gather, {x, c.ints(src)}, AxisAttrs{axis});
    std::vector<int64_t> sd(size_t(r), 1);
    sd[size_t(axis)] = len;
    sd.back() = 2;
    full = c.op(OpKind::Mul, {full, c.im.constant(make_tensor(c.dtype(0), sd, sign))});
    return {c.slice(fourier(c, full, axis, true), {0}, {1}, {r - 1})};  // the real part
  }
  int64_t len = c.has(1) ? c.const_ints(1, "dft_length").at(0) : n;
  if (len <= 0) c.invalid("dft_length must be positive, got ", len);
  // Pad with zeros or truncate the signal axis to the DFT length.
  if (len < n) x = c.slice(x, {0}, {len}, {axis});
  else if (len > n) {
    std::vector<int64_t> pads(size_t(2 * r), 0);
    pads[size_t(axis + r)] = len - n;
    x = c.op(OpKind::Pad, {x}, PadAttrs{pads, PadMode::Constant, 0});
  }
  Value y = fourier(c, x, axis, inverse);
  if (onesided) y = c.slice(y, {0}, {len / 2 + 1}, {axis});
  return {y};
}

// signal [B, L, 1|2] -> [B, frames, bins, 2]
std::vector<Value> lower_stft(NodeCtx& c) {
  auto d = c.dims(0);
  if (d.size() != 3 || (d[2] != 1 && d[2] != 2)) c.invalid("signal must be [batch, length, 1 or 2]");
  int64_t step = c.const_ints(1, "frame_step").at(0);
  Value window = c.in_or(2);
  if (window.valid() && c.vdims(window).size() != 1) c.invalid("window must be 1-D");
  int64_t flen = c.has(3) ? c.const_ints(3, "frame_length").at(0) : (window.valid() ? c.vdims(window)[0] : 0);
  if (flen <= 0 || step <= 0) c.invalid("frame_length and frame_step must be positive");
  if (window.valid() && c.vdims(window)[0] != flen)
    c.invalid("window of ", c.vdims(window)[0], " samples for frames of ", flen);
  bool onesided = c.attr_int("onesided", 1) != 0;
  int64_t b = d[0], len = d[1];
  if (flen > len) c.invalid("signal of ", len, " samples shorter than a frame of ", flen);
  const int64_t frames = (len - flen) / step + 1;  // >= 1: flen <= len
  std::vector<Value> fr;
  Value x = c.in(0);
  for (int64_t f = 0; f < frames; ++f)  // [B, flen, 1|2] -> [B, 1, flen, 1|2]
    fr.push_back(c.reshape(c.slice(x, {f * step}, {f * step + flen}, {1}), {b, 1, flen, d[2]}));
  Value xf = c.concat(fr, 1);
  if (window.valid()) xf = c.op(OpKind::Mul, {xf, c.reshape(c.cast(window, c.dtype(0)), {1, 1, flen, 1})});
  Value y = c.op(OpKind::Dft, {xf});  // [B, frames, flen, 2]
  if (onesided) y = c.slice(y, {0}, {flen / 2 + 1}, {2});
  return {y};
}

std::vector<Value> lower_window(NodeCtx& c) {
  int64_t size = c.const_ints(0, "size").at(0);
  if (size < 0) c.invalid("size must be >= 0");
  bool periodic = c.attr_int("periodic", 1) != 0;
  auto dt = carried_dtype(int(c.attr_int("output_datatype", kFloat)));
  if (!dt) c.unsupported("output_datatype");
  const std::string& op = c.node.op_type();
  double den = periodic ? double(size) : double(size - 1);
  std::vector<double> w(c.host_size(size));
  for (int64_t i = 0; i < size; ++i) {
    double a = 2.0 * M_PI * double(i) / den;
    if (op == "HannWindow") w[size_t(i)] = 0.5 - 0.5 * std::cos(a);
    else if (op == "HammingWindow") w[size_t(i)] = 25.0 / 46.0 - (1.0 - 25.0 / 46.0) * std::cos(a);
    else w[size_t(i)] = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a);
  }
  return {c.im.constant(make_tensor(*dt, {size}, w))};
}

// MelWeightMatrix: the [dft_length / 2 + 1, num_mel_bins] matrix of triangular mel filters
// (all five inputs must be known at import: they are scalars the runner binds by value).
// As the operator's reference computes it: num_mel_bins + 2 edges equally spaced on the mel
// scale (2595 log10(1 + f / 700)) from lower to upper edge, with the step the mel range
// over num_mel_bins + 2; each edge back in Hz and to a spectrogram bin as
// floor((dft_length + 1) f / sample_rate); filter i rises from edge i to edge i+1 (a
// single 1 when they coincide) and falls to edge i+2.
std::vector<Value> lower_mel_weight_matrix(NodeCtx& c) {
  const int64_t bins = c.const_ints(0, "num_mel_bins").at(0), dft = c.const_ints(1, "dft_length").at(0);
  const double rate = c.const_reals(2, "sample_rate").at(0), lo = c.const_reals(3, "lower_edge_hertz").at(0),
               hi = c.const_reals(4, "upper_edge_hertz").at(0);
  if (bins <= 0 || dft <= 0 || !(rate > 0))
    c.invalid("num_mel_bins, dft_length and sample_rate must be positive, got ", bins, ", ", dft, ", ", rate);
  if (!(lo >= 0) || !(hi >= lo)) c.invalid("the edges must satisfy 0 <= lower <= upper, got ", lo, " and ", hi);
  auto dt = carried_dtype(int(c.attr_int("output_datatype", kFloat)));
  if (!dt) c.unsupported("output_datatype");
  const int64_t spec = dft / 2 + 1;
  const double mel_lo = 2595 * std::log10(1 + lo / 700), mel_hi = 2595 * std::log10(1 + hi / 700);
  const double step = (mel_hi - mel_lo) / double(bins + 2);
  std::vector<int64_t> edge(c.host_size(bins + 2));
  for (int64_t i = 0; i < bins + 2; ++i) {
    const double hz = 700 * (std::pow(10.0, (double(i) * step + mel_lo) / 2595) - 1);
    edge[size_t(i)] = int64_t(std::floor(double(dft + 1) * hz / rate));
  }
  std::vector<double> w(c.host_size(spec * bins), 0.0);
  auto at = [&](int64_t j, int64_t i) -> double& {
    if (j < 0 || j >= spec) c.invalid("a mel filter edge (bin ", j, ") falls outside the ", spec, " spectrogram bins");
    return w[size_t(j * bins + i)];
  };
  for (int64_t i = 0; i < bins; ++i) {
    const int64_t l = edge[size_t(i)], m = edge[size_t(i + 1)], r = edge[size_t(i + 2)];
    if (m == l) {
      at(m, i) = 1;
    } else {
      for (int64_t j = l; j <= m; ++j) at(j, i) = double(j - l) / double(m - l);
    }
    for (int64_t j = m; j < r; ++j) at(j, i) = double(r - j) / double(r - m);
  }
  return {c.im.constant(make_tensor(*dt, {spec, bins}, w))};
}

}  // namespace rlx::onnx
