// Convolution and pooling ONNX ops over the IR's 2-D NCHW ops: 1-D as H=1, 3-D conv
// as a sum of 2-D convs over the kernel depth, N-D pooling axis by axis (max, average
// and Lp pooling are separable over a box window), ConvTranspose as a conv over the
// zero-upsampled input with the flipped kernel.
#include <limits>

#include "io/onnx/ops_table.h"

namespace rlx::onnx {

namespace {

struct Window {
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: begins then ends
};

// Reads kernel/strides/dilations/pads with auto_pad resolved, for `sp` spatial dims.
Window read_window(NodeCtx& c, const std::vector<int64_t>& in_sp, std::vector<int64_t> kernel, bool ceil_mode = false) {
  size_t sp = in_sp.size();
  Window w;
  w.kernel = kernel;
  w.strides = c.attr_ints("strides", std::vector<int64_t>(sp, 1));
  w.dilations = c.attr_ints("dilations", std::vector<int64_t>(sp, 1));
  w.pads = c.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  if (w.kernel.size() != sp || w.strides.size() != sp || w.dilations.size() != sp || w.pads.size() != 2 * sp)
    c.invalid("kernel/strides/dilations/pads do not match ", sp, " spatial dims");
  for (size_t i = 0; i < sp; ++i) {
    c.positive(w.kernel[i], "kernel_shape");
    c.positive(w.strides[i], "strides");
    c.positive(w.dilations[i], "dilations");
  }
  std::string ap = c.attr_str("auto_pad", "NOTSET");
  if (ap == "VALID") {
    std::fill(w.pads.begin(), w.pads.end(), 0);
  } else if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    for (size_t i = 0; i < sp; ++i) {
      int64_t out = (in_sp[i] + w.strides[i] - 1) / w.strides[i];
      int64_t ek = (w.kernel[i] - 1) * w.dilations[i] + 1;
      int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[i] + ek - in_sp[i]);
      int64_t small = total / 2, big = total - small;
      w.pads[i] = ap == "SAME_UPPER" ? small : big;
      w.pads[i + sp] = ap == "SAME_UPPER" ? big : small;
    }
  } else if (ap != "NOTSET" && !ap.empty()) {
    c.invalid("unknown auto_pad '", ap, "'");
  }
  (void)ceil_mode;
  return w;
}

std::vector<int64_t> spatial(const std::vector<int64_t>& d) { return std::vector<int64_t>(d.begin() + 2, d.end()); }

int64_t prod(const std::vector<int64_t>& v, size_t from = 0, size_t to = SIZE_MAX) {
  const size_t end = std::min(to, v.size());
  int64_t p = 1;
  for (auto it = v.begin() + long(std::min(from, end)); it != v.begin() + long(end); ++it) p *= *it;
  return p;
}

Value conv2d(NodeCtx& c, Value x, Value w, Value b, const std::vector<int64_t>& strides,
             const std::vector<int64_t>& pads4, const std::vector<int64_t>& dil, int64_t group) {
  ConvAttrs a;
  a.strides = strides;
  a.pads = pads4;
  a.dilations = dil;
  a.group = group;
  std::vector<Value> in{x, w};
  if (b.valid()) in.push_back(b);
  return c.op(OpKind::Conv2d, in, a);
}

// Pads that the IR conv refuses (negative) become an explicit pad/crop first.
Value pre_pad(NodeCtx& c, Value x, std::vector<int64_t>& pads4) {
  bool neg = false;
  for (int64_t p : pads4) neg = neg || p < 0;
  if (!neg) return x;
  std::vector<int64_t> full{0, 0, pads4[0], pads4[1], 0, 0, pads4[2], pads4[3]};
  std::fill(pads4.begin(), pads4.end(), 0);
  return c.op(OpKind::Pad, {x}, PadAttrs{full, PadMode::Constant, 0});
}

}  // namespace

std::vector<Value> lower_conv(NodeCtx& c) {
  auto xd = c.dims(0), wd = c.dims(1);
  if (xd.size() < 3 || wd.size() != xd.size()) c.invalid("input and weight must have the same rank >= 3");
  auto in_sp = spatial(xd);
  Window win = read_window(c, in_sp, c.attr_ints("kernel_shape", spatial(wd)));
  int64_t group = c.attr_int("group", 1);
  Value x = c.in(0), w = c.in(1), b = c.in_or(2);
  size_t sp = in_sp.size();
  if (sp == 1) {
    x = c.reshape(x, {xd[0], xd[1], 1, xd[2]});
    w = c.reshape(w, {wd[0], wd[1], 1, wd[2]});
    std::vector<int64_t> pads{0, win.pads[0], 0, win.pads[1]};
    x = pre_pad(c, x, pads);
    Value y = conv2d(c, x, w, b, {1, win.strides[0]}, pads, {1, win.dilations[0]}, group);
    auto yd = c.vdims(y);
    return {c.reshape(y, {yd[0], yd[1], yd[3]})};
  }
  if (sp == 2) {
    std::vector<int64_t> pads{win.pads[0], win.pads[1], win.pads[2], win.pads[3]};
    x = pre_pad(c, x, pads);
    return {conv2d(c, x, w, b, win.strides, pads, win.dilations, group)};
  }
  if (sp != 3) c.unsupported(sp, "-D convolution");
  // 3-D: y[:, :, od] = sum_kd conv2d(x[:, :, od*s + kd*dil], w[:, :, kd]); depth folds into batch.
  int64_t n = xd[0], ch = xd[1];
  std::vector<int64_t> pads6{0, 0, win.pads[0], 0, 0, 0, 0, win.pads[3], 0, 0};
  pads6 = {0, 0, win.pads[0], 0, 0, 0, 0, win.pads[3], 0, 0};
  x = c.op(OpKind::Pad, {x}, PadAttrs{pads6, PadMode::Constant, 0});
  int64_t depth = c.vdims(x)[2];
  int64_t sd = win.strides[0], dd = win.dilations[0], kd = wd[2];
  int64_t od = (depth - ((kd - 1) * dd + 1)) / sd + 1;
  if (od <= 0) c.invalid("depth is smaller than the kernel");
  std::vector<int64_t> pads4{win.pads[1], win.pads[2], win.pads[4], win.pads[5]};
  Value acc;
  for (int64_t k = 0; k < kd; ++k) {
    Value xs = c.slice(x, {k * dd}, {k * dd + (od - 1) * sd + 1}, {2}, {sd});  // [N, C, od, H, W]
    xs = c.transpose(xs, {0, 2, 1, 3, 4});
    xs = c.reshape(xs, {n * od, ch, xd[3], xd[4]});
    Value wk = c.reshape(c.slice(w, {k}, {k + 1}, {2}), {wd[0], wd[1], wd[3], wd[4]});
    std::vector<int64_t> p = pads4;
    xs = pre_pad(c, xs, p);
    Value y = conv2d(c, xs, wk, Value{}, {win.strides[1], win.strides[2]}, p, {win.dilations[1], win.dilations[2]}, group);
    acc = acc.valid() ? c.op(OpKind::Add, {acc, y}) : y;
  }
  auto yd = c.vdims(acc);  // [N*od, M, Ho, Wo]
  Value y = c.transpose(c.reshape(acc, {n, od, yd[1], yd[2], yd[3]}), {0, 2, 1, 3, 4});
  if (b.valid()) y = c.op(OpKind::Add, {y, c.reshape(b, {yd[1], 1, 1, 1})});
  return {y};
}

// ConvInteger of 2-D images as the IR's conv_integer, the zero points given (scalars, or
// w_zp per output channel); an invalid Value for other ranks and for negative pads (the
// caller takes the f64 path then).
Value conv_integer_2d(NodeCtx& c, Value x_zp, Value w_zp) {
  auto xd = c.dims(0), wd = c.dims(1);
  if (xd.size() != 4 || wd.size() != 4) return Value{};
  Window win = read_window(c, spatial(xd), c.attr_ints("kernel_shape", spatial(wd)));
  ConvAttrs a;
  a.strides = win.strides;
  a.pads = win.pads;
  a.dilations = win.dilations;
  a.group = c.attr_int("group", 1);
  for (int64_t p : a.pads)
    if (p < 0) return Value{};
  return c.op(OpKind::ConvInteger, {c.in(0), c.in(1), x_zp, w_zp}, a);
}

namespace {

// Zero-upsamples axis `a` by `s`: n values become (n - 1) * s + 1 with s - 1 zeros between.
Value zero_upsample(NodeCtx& c, Value x, int64_t a, int64_t s) {
  if (s == 1) return x;
  auto d = c.vdims(x);
  int64_t n = d[size_t(a)];
  std::vector<int64_t> un = d;
  un.insert(un.begin() + a + 1, 1);
  std::vector<int64_t> pads(2 * un.size(), 0);
  pads[size_t(a + 1) + un.size()] = s - 1;
  Value y = c.op(OpKind::Pad, {c.reshape(x, un)}, PadAttrs{pads, PadMode::Constant, 0});
  std::vector<int64_t> merged = d;
  merged[size_t(a)] = n * s;
  return c.slice(c.reshape(y, merged), {0}, {(n - 1) * s + 1}, {a});
}

// Lowers a Conv of (x, w[, b]) with the given attributes through lower_conv.
Value conv_with(NodeCtx& c, Value x, Value w, Value b, const std::vector<int64_t>& dil, int64_t group) {
  pb::NodeProto n;
  n.set_op_type("Conv");
  n.set_name(c.node.name());
  std::string base = c.im.current_node() + "__convt";
  c.im.define(base + "_x", x);
  c.im.define(base + "_w", w);
  n.add_input(base + "_x");
  n.add_input(base + "_w");
  if (b.valid()) {
    c.im.define(base + "_b", b);
    n.add_input(base + "_b");
  }
  auto* da = n.add_attribute();
  da->set_name("dilations");
  da->set_type(pb::AttributeProto::INTS);
  for (int64_t v : dil) da->add_ints(v);
  auto* ga = n.add_attribute();
  ga->set_name("group");
  ga->set_type(pb::AttributeProto::INT);
  ga->set_i(group);
  NodeCtx sub(c.im, n);
  return lower_conv(sub).at(0);
}

// A 2-D transposed conv whose kernel equals its stride (no padding, dilation or groups: the
// common learned 2x / 4x upsampling) writes every output pixel from exactly one input
// pixel: y[n, m, i*s + a, j*t + b] = sum_c x[n, c, i, j] w[c, m, a, b] (+ bias[m]). That is
// one matmul, W^T [m*s*t, C] by x [n, C, H*W], and a reshuffle of its result into the
// output's blocks: no zero-upsampled copy of the input and none of the 3/4 (for 2x2) of
// products by zero the general lowering below computes. Invalid Value when it does not apply.
Value conv_transpose_by_blocks(NodeCtx& c, const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                               const std::vector<int64_t>& dil, const std::vector<int64_t>& pads,
                               const std::vector<int64_t>& outpad, int64_t group) {
  auto xd = c.dims(0), wd = c.dims(1);
  if (xd.size() != 4 || group != 1) return {};
  for (size_t i = 0; i < 2; ++i)
    if (kernel[i] != strides[i] || dil[i] != 1 || pads[i] != 0 || pads[i + 2] != 0 || outpad[i] != 0) return {};
  if (wd[2] != kernel[0] || wd[3] != kernel[1]) return {};
  const int64_t n = xd[0], ch = xd[1], h = xd[2], w = xd[3], m = wd[1], s = kernel[0], t = kernel[1];
  // W [C, m, s, t] -> [C, m*s*t] -> W^T [m*s*t, C]
  Value wt = c.transpose(c.reshape(c.in(1), {ch, m * s * t}), {1, 0});
  Value prod = c.op(OpKind::MatMul, {wt, c.reshape(c.in(0), {n, ch, h * w})});  // [n, m*s*t, h*w]
  // [n, m, s, t, h, w] -> [n, m, h, s, w, t] -> [n, m, h*s, w*t]
  Value y = c.reshape(c.transpose(c.reshape(prod, {n, m, s, t, h, w}), {0, 1, 4, 2, 5, 3}), {n, m, h * s, w * t});
  if (c.has(2)) y = c.op(OpKind::Add, {y, c.reshape(c.in(2), {1, m, 1, 1})});
  return y;
}

}  // namespace

// A transposed conv is a stride-1 conv of the zero-upsampled, re-padded input with the
// kernel flipped and its channel roles swapped (per group); any spatial rank Conv takes.
std::vector<Value> lower_conv_transpose(NodeCtx& c) {
  auto xd = c.dims(0), wd = c.dims(1);
  if (xd.size() < 3 || wd.size() != xd.size()) c.invalid("input and weight must have the same rank >= 3");
  size_t sp = xd.size() - 2;
  auto in_sp = spatial(xd);
  std::vector<int64_t> kernel = c.attr_ints("kernel_shape", spatial(wd));
  std::vector<int64_t> strides = c.attr_ints("strides", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> dil = c.attr_ints("dilations", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> pads = c.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  std::vector<int64_t> outpad = c.attr_ints("output_padding", std::vector<int64_t>(sp, 0));
  std::vector<int64_t> out_shape = c.attr_ints("output_shape");
  std::string ap = c.attr_str("auto_pad", "NOTSET");
  int64_t group = c.attr_int("group", 1);
  if (kernel.size() != sp || strides.size() != sp || dil.size() != sp || pads.size() != 2 * sp || outpad.size() != sp)
    c.invalid("attributes do not match ", sp, " spatial dims");
  c.positive(group, "group");
  for (size_t i = 0; i < sp; ++i) {
    c.positive(kernel[i], "kernel_shape");
    c.positive(strides[i], "strides");
    c.positive(dil[i], "dilations");
  }
  if (out_shape.size() > sp) out_shape.erase(out_shape.begin(), out_shape.end() - long(sp));
  if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    out_shape.clear();
    for (size_t i = 0; i < sp; ++i) out_shape.push_back(in_sp[i] * strides[i]);
  }
  if (!out_shape.empty()) {
    for (size_t i = 0; i < sp; ++i) {
      int64_t total = strides[i] * (in_sp[i] - 1) + outpad[i] + ((kernel[i] - 1) * dil[i] + 1) - out_shape[i];
      int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // floor division, like the reference
      pads[i] = ap == "SAME_UPPER" ? half : total - half;
      pads[i + sp] = ap == "SAME_UPPER" ? total - half : half;
    }
  } else if (ap == "VALID") {
    std::fill(pads.begin(), pads.end(), 0);
  }
  int64_t ci = xd[1], mg = wd[1];
  if (ci % group) c.invalid("input channels ", ci, " are not divisible by group ", group);
  if (Value y = conv_transpose_by_blocks(c, kernel, strides, dil, pads, outpad, group); y.valid()) return {y};
  Value x = c.in(0);
  int64_t r = int64_t(xd.size());
  std::vector<int64_t> full(size_t(2 * r), 0);
  for (size_t i = 0; i < sp; ++i) {
    x = zero_upsample(c, x, int64_t(i) + 2, strides[i]);
    int64_t ek = (kernel[i] - 1) * dil[i] + 1;
    full[i + 2] = ek - 1 - pads[i];
    full[i + 2 + size_t(r)] = ek - 1 - pads[i + sp] + outpad[i];
  }
  x = c.op(OpKind::Pad, {x}, PadAttrs{full, PadMode::Constant, 0});
  // Weight [C, M/g, k...] -> [M, C/g, k...], every spatial axis flipped.
  int64_t cg = ci / group;
  std::vector<int64_t> wsplit{group, cg, mg};
  wsplit.insert(wsplit.end(), kernel.begin(), kernel.end());
  std::vector<int64_t> perm{0, 2, 1};
  for (size_t i = 0; i < sp; ++i) perm.push_back(int64_t(i) + 3);
  Value wt = c.transpose(c.reshape(c.in(1), wsplit), perm);
  std::vector<int64_t> wshape{group * mg, cg};
  wshape.insert(wshape.end(), kernel.begin(), kernel.end());
  wt = c.reshape(wt, wshape);
  const int64_t lo = std::numeric_limits<int64_t>::min();
  std::vector<int64_t> starts(sp, -1), ends(sp, lo), axes, steps(sp, -1);
  for (size_t i = 0; i < sp; ++i) axes.push_back(int64_t(i) + 2);
  wt = c.slice(wt, starts, ends, axes, steps);
  return {conv_with(c, x, wt, c.in_or(2), dil, group)};
}

namespace {

// Pools one spatial axis of x ([N, C, s...]) with a [k, 1] window: the axis becomes H
// and everything after it W.
Value pool_axis(NodeCtx& c, Value x, size_t axis, OpKind k, int64_t kern, int64_t stride, int64_t dil,
                int64_t pb, int64_t pe, bool ceil_mode, bool include_pad) {
  auto d = c.vdims(x);
  int64_t before = prod(d, 0, axis), after = prod(d, axis + 1);
  Value r = c.reshape(x, {1, before, d[axis], after});
  PoolAttrs a;
  a.kernel = {kern, 1};
  a.strides = {stride, 1};
  a.dilations = {dil, 1};
  a.pads = {pb, 0, pe, 0};
  a.ceil_mode = ceil_mode;
  a.count_include_pad = include_pad;
  Value y = c.op(k, {r}, a);
  auto yd = c.vdims(y);
  std::vector<int64_t> out = d;
  out[axis] = yd[2];
  return c.reshape(y, out);
}

Value pool_nd(NodeCtx& c, Value x, OpKind k, const Window& w, bool ceil_mode, bool include_pad) {
  auto d = c.vdims(x);
  size_t sp = d.size() - 2;
  if (sp == 2) {
    PoolAttrs a;
    a.kernel = w.kernel;
    a.strides = w.strides;
    a.dilations = w.dilations;
    a.pads = w.pads;
    a.ceil_mode = ceil_mode;
    a.count_include_pad = include_pad;
    return c.op(k, {x}, a);
  }
  for (size_t i = 0; i < sp; ++i)
    x = pool_axis(c, x, i + 2, k, w.kernel[i], w.strides[i], w.dilations[i], w.pads[i], w.pads[i + sp], ceil_mode,
                  include_pad);
  return x;
}

// Indices output of a 2-D MaxPool: the first window tap (row-major) equal to the max,
// as a flat index into the input (channels and batch included; storage_order 1 is
// column-major within each image).
Value max_pool_indices(NodeCtx& c, Value y, const Window& w, bool col_major) {
  auto xd = c.dims(0), yd = c.vdims(y);
  if (xd.size() != 4) c.unsupported("the Indices output for ", xd.size() - 2, "-D pooling");
  int64_t n = xd[0], ch = xd[1], h = xd[2], wd = xd[3], oh = yd[2], ow = yd[3];
  DType t = c.dtype(0);
  // -inf padding on every side; the end side covers ceil-mode windows too.
  int64_t eh = (oh - 1) * w.strides[0] + (w.kernel[0] - 1) * w.dilations[0] + 1;
  int64_t ew = (ow - 1) * w.strides[1] + (w.kernel[1] - 1) * w.dilations[1] + 1;
  int64_t pe_h = std::max<int64_t>(0, eh - h - w.pads[0]), pe_w = std::max<int64_t>(0, ew - wd - w.pads[1]);
  Value xp = c.op(OpKind::Pad, {c.in(0)},
                  PadAttrs{{0, 0, w.pads[0], w.pads[1], 0, 0, pe_h, pe_w}, PadMode::Constant, -std::numeric_limits<double>::infinity()});
  std::vector<int64_t> nc(static_cast<size_t>(n * ch));
  for (int64_t i = 0; i < n * ch; ++i) nc[size_t(i)] = i * h * wd;
  Value base = c.im.constant(make_i64({n, ch, 1, 1}, nc));
  Value idx = c.full({n, ch, oh, ow}, 0, DType::I64), found;
  for (int64_t kh = 0; kh < w.kernel[0]; ++kh)
    for (int64_t kw = 0; kw < w.kernel[1]; ++kw) {
      int64_t r0 = kh * w.dilations[0], c0 = kw * w.dilations[1];
      Value tap = c.slice(xp, {r0, c0}, {r0 + (oh - 1) * w.strides[0] + 1, c0 + (ow - 1) * w.strides[1] + 1}, {2, 3},
                          {w.strides[0], w.strides[1]});
      std::vector<int64_t> pos(static_cast<size_t>(oh * ow));
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          int64_t hh = i * w.strides[0] + r0 - w.pads[0], ww = j * w.strides[1] + c0 - w.pads[1];
          pos[size_t(i * ow + j)] = col_major ? ww * h + hh : hh * wd + ww;
        }
      Value at = c.op(OpKind::Add, {base, c.im.constant(make_i64({1, 1, oh, ow}, pos))});
      Value hit = c.op(OpKind::Equal, {tap, y});
      if (found.valid()) hit = c.op(OpKind::And, {hit, c.op(OpKind::Not, {found})});
      idx = c.op(OpKind::Where, {hit, at, idx});
      found = found.valid() ? c.op(OpKind::Or, {found, hit}) : hit;
    }
  (void)t;
  return idx;
}

}  // namespace

std::vector<Value> lower_pool(NodeCtx& c) {
  auto xd = c.dims(0);
  if (xd.size() < 3) c.invalid("input must have rank >= 3");
  const std::string& t = c.node.op_type();
  std::vector<int64_t> kernel = c.attr_ints("kernel_shape");
  Window w = read_window(c, spatial(xd), kernel);
  bool ceil_mode = c.attr_int("ceil_mode", 0) != 0;
  if (t == "MaxPool") {
    Value y = pool_nd(c, c.in(0), OpKind::MaxPool2d, w, ceil_mode, false);
    if (!c.wants(1)) return {y};
    return {y, max_pool_indices(c, y, w, c.attr_int("storage_order", 0) != 0)};
  }
  if (t == "AveragePool") {
    bool include = c.attr_int("count_include_pad", 0) != 0;
    return {pool_nd(c, c.in(0), OpKind::AvgPool2d, w, ceil_mode, include)};
  }
  // LpPool: (sum |x|^p)^(1/p) = (avg_including_pad(|x|^p) * window)^(1/p); p is a float at opset 1.
  double p = c.opset < 2 ? double(float(c.attr_float("p", 2.0))) : double(c.attr_int("p", 2));
  Value x = c.in(0);
  DType dt = c.dtype(0);
  Value xp = p == 2 ? c.op(OpKind::Mul, {x, x}) : c.op(OpKind::Pow, {c.op(OpKind::Abs, {x}), c.scalar(p, dt)});
  Value avg = pool_nd(c, xp, OpKind::AvgPool2d, w, ceil_mode, true);
  Value sum = c.op(OpKind::Mul, {avg, c.scalar(double(prod(kernel)), dt)});
  if (p == 2) return {c.op(OpKind::Sqrt, {sum})};
  return {c.op(OpKind::Pow, {sum, c.scalar(1.0 / p, dt)})};
}

std::vector<Value> lower_global_pool(NodeCtx& c) {
  auto xd = c.dims(0);
  std::vector<int64_t> axes;
  for (size_t i = 2; i < xd.size(); ++i) axes.push_back(int64_t(i));
  const std::string& t = c.node.op_type();
  Value x = c.in(0);
  if (t == "GlobalAveragePool") return {c.reduce(OpKind::ReduceMean, x, axes, true)};
  if (t == "GlobalMaxPool") return {c.reduce(OpKind::ReduceMax, x, axes, true)};
  const double p = c.opset < 2 ? double(float(c.attr_float("p", 2.0))) : double(c.attr_int("p", 2));  // a float at opset 1
  DType dt = c.dtype(0);
  Value xp = c.op(OpKind::Pow, {c.op(OpKind::Abs, {x}), c.scalar(p, dt)});
  return {c.op(OpKind::Pow, {c.reduce(OpKind::ReduceSum, xp, axes, true), c.scalar(1.0 / p, dt)})};
}

}  // namespace rlx::onnx
