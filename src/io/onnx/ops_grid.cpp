// Sampling-grid ONNX ops: GridSample (2-D and 3-D; nearest / linear / cubic; zeros /
// border / reflection padding) as flat gathers at run-time computed indices following
// the ONNX reference step by step, AffineGrid (a matmul with a constant base grid),
// and Col2Im (a sum of zero-upsampled, shifted column blocks).
#include <cmath>

#include "io/onnx/ops_table.h"

namespace rlx::onnx {

namespace {

// Reflects x into [lo, hi] by the nearest border, repeatedly (reference _gs_reflect).
Value reflect(NodeCtx& c, Value x, double lo, double hi) {
  DType t = c.g.type(x).dtype();
  double rng = hi - lo;
  auto s = [&](double v) { return c.scalar(v, t); };
  auto side = [&](Value dx, bool low) {  // dx >= 0: distance past the border
    Value n = c.op(OpKind::Floor, {c.op(OpKind::Div, {dx, s(rng)})});
    Value r = c.op(OpKind::Sub, {dx, c.op(OpKind::Mul, {n, s(rng)})});
    Value even = c.op(OpKind::Equal, {c.op(OpKind::Mod, {n, s(2)}, ModAttrs{true}), s(0)});
    Value a = low ? c.op(OpKind::Add, {s(lo), r}) : c.op(OpKind::Sub, {s(hi), r});
    Value b = low ? c.op(OpKind::Sub, {s(hi), r}) : c.op(OpKind::Add, {s(lo), r});
    return c.op(OpKind::Where, {even, a, b});
  };
  Value below = c.op(OpKind::Less, {x, s(lo)}), above = c.op(OpKind::Greater, {x, s(hi)});
  Value fl = side(c.op(OpKind::Sub, {s(lo), x}), true), fh = side(c.op(OpKind::Sub, {x, s(hi)}), false);
  return c.op(OpKind::Where, {below, fl, c.op(OpKind::Where, {above, fh, x})});
}

// Keys cubic coefficients (A = -0.75) of the fraction f for taps -1, 0, 1, 2.
std::vector<Value> cubic_coeffs(NodeCtx& c, Value f) {
  DType t = c.g.type(f).dtype();
  const double a = -0.75;
  auto s = [&](double v) { return c.scalar(v, t); };
  auto mul = [&](Value p, Value q) { return c.op(OpKind::Mul, {p, q}); };
  auto add = [&](Value p, Value q) { return c.op(OpKind::Add, {p, q}); };
  auto sub = [&](Value p, Value q) { return c.op(OpKind::Sub, {p, q}); };
  Value x1 = add(f, s(1)), x2 = f, x3 = sub(s(1), f), x4 = sub(s(2), f);
  // far taps: ((a*x - 5a)*x + 8a)*x - 4a ; near taps: ((a+2)*x - (a+3))*x*x + 1
  auto far = [&](Value x) { return sub(mul(add(mul(sub(mul(s(a), x), s(5 * a)), x), s(8 * a)), x), s(4 * a)); };
  auto near = [&](Value x) { return add(mul(mul(sub(mul(s(a + 2), x), s(a + 3)), x), x), s(1)); };
  return {far(x1), near(x2), near(x3), far(x4)};
}

}  // namespace

std::vector<Value> lower_grid_sample(NodeCtx& c) {
  auto xd = c.dims(0), gd = c.dims(1);
  size_t sp = xd.size() - 2;
  if ((sp != 2 && sp != 3) || gd.size() != sp + 2 || gd.back() != int64_t(sp))
    c.unsupported("GridSample needs 4-D or 5-D input with a matching grid");
  std::string mode = c.attr_str("mode", c.opset < 20 ? "bilinear" : "linear");
  if (mode == "bilinear") mode = "linear";
  if (mode == "bicubic") mode = "cubic";
  std::string pad = c.attr_str("padding_mode", "zeros");
  bool align = c.attr_int("align_corners", 0) != 0;
  DType t = c.dtype(0);
  int64_t n = xd[0], ch = xd[1];
  std::vector<int64_t> dims(xd.begin() + 2, xd.end());
  for (int64_t v : dims) c.positive(v, "every spatial dim of the input");
  std::vector<int64_t> out_sp(gd.begin() + 1, gd.end() - 1);
  int64_t npts = 1;
  for (int64_t v : out_sp) npts *= v;
  Value grid = c.reshape(c.cast(c.in(1), t), {n, npts, int64_t(sp)});
  auto s = [&](double v) { return c.scalar(v, t); };
  // Per spatial dim (in dims order D?, H, W): denormalized coordinate [N, P].
  std::vector<Value> coord(sp);
  for (size_t i = 0; i < sp; ++i) {
    int64_t gi = int64_t(sp - 1 - i);  // grid holds (x, y[, z]) = reversed dims order
    Value g = c.reshape(c.slice(grid, {gi}, {gi + 1}, {2}), {n, npts});
    double len = double(dims[i]);
    Value x = align ? c.op(OpKind::Mul, {c.op(OpKind::Add, {g, s(1)}), s((len - 1) / 2)})
                    : c.op(OpKind::Div, {c.op(OpKind::Sub, {c.op(OpKind::Mul, {c.op(OpKind::Add, {g, s(1)}), s(len)}), s(1)}), s(2)});
    if (mode == "nearest") x = c.op(OpKind::Round, {x});
    double lo = align ? 0 : -0.5, hi = align ? len - 1 : len - 0.5;
    if (pad == "border") {
      Value out = c.op(OpKind::Or, {c.op(OpKind::Less, {x, s(lo)}), c.op(OpKind::Greater, {x, s(hi)})});
      x = c.op(OpKind::Where, {out, c.op(OpKind::Clip, {x}, ClipAttrs{0, len - 1}), x});
    } else if (pad == "reflection") {
      x = reflect(c, x, lo, hi);
    } else if (pad != "zeros") {
      c.invalid("unknown padding_mode '", pad, "'");
    }
    coord[i] = x;
  }
  // Taps per dim: integer index [N, P] (i64) and weight [N, P].
  std::vector<std::vector<Value>> tap_idx(sp), tap_w(sp);
  for (size_t i = 0; i < sp; ++i) {
    Value x = coord[i];
    if (mode == "nearest") {
      tap_idx[i] = {c.cast(x, DType::I64)};
      tap_w[i] = {Value{}};
      continue;
    }
    Value x0 = c.op(OpKind::Floor, {x});
    Value f = c.op(OpKind::Sub, {x, x0});
    Value i0 = c.cast(x0, DType::I64);
    if (mode == "linear") {
      tap_idx[i] = {i0, c.op(OpKind::Add, {i0, c.scalar(1, DType::I64)})};
      tap_w[i] = {c.op(OpKind::Sub, {s(1), f}), f};
    } else {
      for (int k = -1; k <= 2; ++k) tap_idx[i].push_back(c.op(OpKind::Add, {i0, c.scalar(k, DType::I64)}));
      tap_w[i] = cubic_coeffs(c, f);
    }
  }
  // Index handling per padding mode, then a flat gather over [N*C*spatial].
  int64_t img = 1;
  for (int64_t v : dims) img *= v;
  std::vector<int64_t> nbase(c.host_size(n * ch));
  for (int64_t b = 0; b < n * ch; ++b) nbase[size_t(b)] = b * img;
  Value base = c.im.constant(make_i64({n, ch, 1}, nbase));
  Value flat = c.reshape(c.in(0), {n * ch * img});
  Value acc;
  size_t taps = tap_idx[0].size();
  size_t combos = 1;
  for (size_t i = 0; i < sp; ++i) combos *= taps;
  for (size_t cmb = 0; cmb < combos; ++cmb) {
    Value lin = c.full({n, npts}, 0, DType::I64), valid, w;
    size_t rem = cmb;
    int64_t stride = img;
    std::vector<size_t> pick(sp);
    for (size_t i = sp; i-- > 0;) {
      pick[i] = rem % taps;
      rem /= taps;
    }
    for (size_t i = 0; i < sp; ++i) {
      Value idx = tap_idx[i][pick[i]];
      double len = double(dims[i]);
      if (pad == "zeros") {
        Value ok = c.op(OpKind::And, {c.op(OpKind::GreaterEqual, {idx, c.scalar(0, DType::I64)}),
                                      c.op(OpKind::Less, {idx, c.scalar(len, DType::I64)})});
        valid = valid.valid() ? c.op(OpKind::And, {valid, ok}) : ok;
        idx = c.op(OpKind::Clip, {idx}, ClipAttrs{0, len - 1});
      } else if (pad == "border") {
        idx = c.op(OpKind::Clip, {idx}, ClipAttrs{0, len - 1});
      } else {
        double lo = align ? 0 : -0.5, hi = align ? len - 1 : len - 0.5;
        idx = c.cast(c.op(OpKind::Floor, {reflect(c, c.cast(idx, t), lo, hi)}), DType::I64);
        idx = c.op(OpKind::Clip, {idx}, ClipAttrs{0, len - 1});
      }
      stride /= dims[i];
      lin = c.op(OpKind::Add, {lin, c.op(OpKind::Mul, {idx, c.scalar(double(stride), DType::I64)})});
      if (tap_w[i][pick[i]].valid()) w = w.valid() ? c.op(OpKind::Mul, {w, tap_w[i][pick[i]]}) : tap_w[i][pick[i]];
    }
    Value at = c.op(OpKind::Add, {base, c.reshape(lin, {n, 1, npts})});  // [N, C, P]
    Value v = c.op(OpKind::Gather, {flat, at}, AxisAttrs{0});
    if (valid.valid()) v = c.op(OpKind::Where, {c.reshape(valid, {n, 1, npts}), v, s(0)});
    if (w.valid()) v = c.op(OpKind::Mul, {v, c.reshape(w, {n, 1, npts})});
    acc = acc.valid() ? c.op(OpKind::Add, {acc, v}) : v;
  }
  std::vector<int64_t> out{n, ch};
  out.insert(out.end(), out_sp.begin(), out_sp.end());
  return {c.reshape(acc, out)};
}

// grid[n, h, w] = theta[n] @ (x_w, y_h, 1) with x, y on the normalized [-1, 1] grid.
std::vector<Value> lower_affine_grid(NodeCtx& c) {
  auto td = c.dims(0);
  auto size = c.const_ints(1, "size");
  bool align = c.attr_int("align_corners", 0) != 0;
  size_t sp = size.size() - 2;
  if ((sp != 2 && sp != 3) || td.size() != 3 || td[1] != int64_t(sp) || td[2] != int64_t(sp) + 1)
    c.invalid("theta must be [N, 2, 3] or [N, 3, 4] matching size");
  DType t = c.dtype(0);
  std::vector<int64_t> sd(size.begin() + 2, size.end());  // D?, H, W
  auto lin = [&](int64_t len, int64_t i) {
    if (len <= 1) return 0.0;
    return align ? -1.0 + 2.0 * double(i) / double(len - 1) : -1.0 + (2.0 * double(i) + 1.0) / double(len);
  };
  int64_t pts = 1;
  for (int64_t v : sd) pts *= v;
  std::vector<double> base;
  for (int64_t p = 0; p < pts; ++p) {
    std::vector<int64_t> idx(sp);
    int64_t rem = p;
    for (size_t i = sp; i-- > 0;) {
      idx[i] = rem % sd[i];
      rem /= sd[i];
    }
    for (size_t i = sp; i-- > 0;) base.push_back(lin(sd[i], idx[i]));  // x (W) first
    base.push_back(1.0);
  }
  Value b = c.im.constant(make_tensor(t, {1, pts, int64_t(sp) + 1}, base));
  Value g = c.op(OpKind::MatMul, {b, c.transpose(c.in(0), {0, 2, 1})});  // [N, P, sp]
  std::vector<int64_t> out{td[0]};
  out.insert(out.end(), sd.begin(), sd.end());
  out.push_back(int64_t(sp));
  return {c.reshape(g, out)};
}

// input [N, C*prod(block), L] -> image [N, C, d1, ..., dk] (any number k of spatial
// dims): each kernel offset's block is zero-upsampled by the strides, shifted by
// offset*dilation and summed; the padding is cropped at the end.
std::vector<Value> lower_col2im(NodeCtx& c) {
  auto d = c.dims(0);
  auto image = c.const_ints(1, "image_shape"), block = c.const_ints(2, "block_shape");
  const size_t sp = image.size();
  if (sp < 1 || block.size() != sp || d.size() != 3)
    c.invalid("image_shape and block_shape must have the same length >= 1 and the input rank 3");
  auto dil = c.attr_ints("dilations", std::vector<int64_t>(sp, 1)), strides = c.attr_ints("strides", std::vector<int64_t>(sp, 1));
  auto pads = c.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  if (dil.size() != sp || strides.size() != sp || pads.size() != 2 * sp)
    c.invalid("dilations, strides and pads must match the ", sp, " spatial dims");
  int64_t kk = 1;
  std::vector<int64_t> padded(sp), outs(sp);
  int64_t blocks = 1;
  for (size_t i = 0; i < sp; ++i) {
    c.positive(block[i], "block_shape");
    c.positive(dil[i], "dilations");
    c.positive(strides[i], "strides");
    kk *= block[i];
    padded[i] = image[i] + pads[i] + pads[i + sp];
    outs[i] = (padded[i] - (dil[i] * (block[i] - 1) + 1)) / strides[i] + 1;
    if (outs[i] < 1) c.invalid("the block does not fit the padded image along spatial dim ", i);
    blocks *= outs[i];
  }
  const int64_t n = d[0];
  if (d[1] % kk) c.invalid("input channels are not a multiple of the block size");
  const int64_t ch = d[1] / kk;
  if (blocks != d[2]) c.invalid("block count ", d[2], " does not match the image geometry (", blocks, " blocks)");
  std::vector<int64_t> xshape{n, ch};
  xshape.insert(xshape.end(), block.begin(), block.end());
  xshape.insert(xshape.end(), outs.begin(), outs.end());
  Value x = c.reshape(c.in(0), xshape);
  const int64_t r = 2 + int64_t(sp);
  Value acc;
  std::vector<int64_t> off(sp, 0);
  for (int64_t t = 0; t < kk; ++t) {
    int64_t rem = t;  // the kernel offset of tap t (row-major over block)
    for (size_t i = sp; i-- > 0;) {
      off[i] = rem % block[i];
      rem /= block[i];
    }
    std::vector<int64_t> starts(off), ends(off), axes;
    for (size_t i = 0; i < sp; ++i) {
      ends[i] += 1;
      axes.push_back(2 + int64_t(i));
    }
    // [n, ch, o1, 1, o2, 1, ...]: each spatial dim followed by the slot its stride fills with zeros
    std::vector<int64_t> inter{n, ch}, up{n, ch};
    for (size_t i = 0; i < sp; ++i) {
      inter.push_back(outs[i]);
      inter.push_back(1);
      up.push_back(outs[i] * strides[i]);
    }
    Value b = c.reshape(c.slice(x, starts, ends, axes), inter);
    std::vector<int64_t> zp(2 * inter.size(), 0);
    for (size_t i = 0; i < sp; ++i) zp[inter.size() + 3 + 2 * i] = strides[i] - 1;
    b = c.reshape(c.op(OpKind::Pad, {b}, PadAttrs{zp, PadMode::Constant, 0}), up);
    std::vector<int64_t> shift(size_t(2 * r), 0);
    for (size_t i = 0; i < sp; ++i) {
      const int64_t begin = off[i] * dil[i];
      shift[2 + i] = begin;
      shift[size_t(r) + 2 + i] = padded[i] - begin - outs[i] * strides[i];  // negative ends crop
    }
    b = c.op(OpKind::Pad, {b}, PadAttrs{shift, PadMode::Constant, 0});
    acc = acc.valid() ? c.op(OpKind::Add, {acc, b}) : b;
  }
  std::vector<int64_t> starts, ends, axes;
  for (size_t i = 0; i < sp; ++i) {
    starts.push_back(pads[i]);
    ends.push_back(pads[i] + image[i]);
    axes.push_back(2 + int64_t(i));
  }
  return {c.slice(acc, starts, ends, axes)};
}

// DeformConv (2-D): every kernel tap samples the input bilinearly (zero outside) at
// its offset position, scaled by the mask; the sampled columns [N, C*K, P] then
// meet the weights in one matmul per group.
std::vector<Value> lower_deform_conv(NodeCtx& c) {
  auto xd = c.dims(0), wd = c.dims(1), od = c.dims(2);
  if (xd.size() != 4 || wd.size() != 4 || od.size() != 4) c.unsupported("DeformConv beyond 2-D");
  auto kernel = c.attr_ints("kernel_shape", {wd[2], wd[3]});
  auto strides = c.attr_ints("strides", {1, 1}), dil = c.attr_ints("dilations", {1, 1});
  auto pads = c.attr_ints("pads", {0, 0, 0, 0});
  int64_t group = c.positive(c.attr_int("group", 1), "group"), og = c.positive(c.attr_int("offset_group", 1), "offset_group");
  if (kernel.size() != 2 || strides.size() != 2 || dil.size() != 2 || pads.size() != 4) c.invalid("bad window attributes");
  if (kernel[0] != wd[2] || kernel[1] != wd[3]) c.invalid("kernel_shape does not match the weight");
  for (int i = 0; i < 2; ++i) {
    c.positive(strides[size_t(i)], "strides");
    c.positive(dil[size_t(i)], "dilations");
  }
  int64_t n = xd[0], ch = xd[1], h = xd[2], w = xd[3], kh = kernel[0], kw = kernel[1], k = kh * kw;
  int64_t oh = od[2], ow = od[3], p = oh * ow, m = wd[0];
  if (ch % og || ch % group || m % group || od[1] != og * k * 2) c.invalid("channels, groups and offsets do not match");
  DType t = c.dtype(0);
  auto s = [&](double v) { return c.scalar(v, t); };
  Value off = c.reshape(c.in(2), {n, og, k, 2, p});
  Value mask = c.has(4) ? c.reshape(c.in(4), {n, og, k, p}) : Value{};
  Value flat = c.reshape(c.in(0), {n * ch * h * w});
  std::vector<int64_t> nc(c.host_size(n * ch));
  for (int64_t i = 0; i < n * ch; ++i) nc[size_t(i)] = i * h * w;
  Value base = c.im.constant(make_i64({n, og, ch / og, 1}, nc));
  // Grid positions of the output pixels (without offsets), per tap.
  std::vector<Value> taps;
  for (int64_t i = 0; i < kh; ++i)
    for (int64_t j = 0; j < kw; ++j) {
      int64_t tap = i * kw + j;
      std::vector<double> gy(c.host_size(p)), gx(c.host_size(p));
      for (int64_t a = 0; a < oh; ++a)
        for (int64_t b = 0; b < ow; ++b) {
          gy[size_t(a * ow + b)] = double(a * strides[0] - pads[0] + i * dil[0]);
          gx[size_t(a * ow + b)] = double(b * strides[1] - pads[1] + j * dil[1]);
        }
      auto part = [&](int64_t which) {  // offset [N, og, P] for this tap
        return c.reshape(c.slice(off, {tap, which}, {tap + 1, which + 1}, {2, 3}), {n, og, p});
      };
      Value y = c.op(OpKind::Add, {c.im.constant(make_tensor(t, {1, 1, p}, gy)), part(0)});
      Value x = c.op(OpKind::Add, {c.im.constant(make_tensor(t, {1, 1, p}, gx)), part(1)});
      Value y0 = c.op(OpKind::Floor, {y}), x0 = c.op(OpKind::Floor, {x});
      Value fy = c.op(OpKind::Sub, {y, y0}), fx = c.op(OpKind::Sub, {x, x0});
      Value iy = c.cast(y0, DType::I64), ix = c.cast(x0, DType::I64);
      Value acc;
      for (int dy = 0; dy < 2; ++dy)
        for (int dx = 0; dx < 2; ++dx) {
          Value yy = c.op(OpKind::Add, {iy, c.scalar(dy, DType::I64)}), xx = c.op(OpKind::Add, {ix, c.scalar(dx, DType::I64)});
          Value ok = c.op(OpKind::And, {c.op(OpKind::And, {c.op(OpKind::GreaterEqual, {yy, c.scalar(0, DType::I64)}),
                                                             c.op(OpKind::Less, {yy, c.scalar(double(h), DType::I64)})}),
                                        c.op(OpKind::And, {c.op(OpKind::GreaterEqual, {xx, c.scalar(0, DType::I64)}),
                                                           c.op(OpKind::Less, {xx, c.scalar(double(w), DType::I64)})})});
          Value lin = c.op(OpKind::Add, {c.op(OpKind::Mul, {c.op(OpKind::Clip, {yy}, ClipAttrs{0, double(h - 1)}),
                                                             c.scalar(double(w), DType::I64)}),
                                         c.op(OpKind::Clip, {xx}, ClipAttrs{0, double(w - 1)})});
          Value at = c.op(OpKind::Add, {base, c.reshape(lin, {n, og, 1, p})});  // [N, og, C/og, P]
          Value v = c.op(OpKind::Where, {c.reshape(ok, {n, og, 1, p}), c.op(OpKind::Gather, {flat, at}, AxisAttrs{0}), s(0)});
          Value wy = dy ? fy : c.op(OpKind::Sub, {s(1), fy}), wx = dx ? fx : c.op(OpKind::Sub, {s(1), fx});
          v = c.op(OpKind::Mul, {v, c.reshape(c.op(OpKind::Mul, {wy, wx}), {n, og, 1, p})});
          acc = acc.valid() ? c.op(OpKind::Add, {acc, v}) : v;
        }
      if (mask.valid()) acc = c.op(OpKind::Mul, {acc, c.reshape(c.slice(mask, {tap}, {tap + 1}, {2}), {n, og, 1, p})});
      taps.push_back(c.reshape(acc, {n, ch, 1, p}));
    }
  Value cols = c.reshape(c.concat(taps, 2), {n, ch * k, p});  // channel-major, then tap
  int64_t cg = ch / group, mg = m / group;
  std::vector<Value> outs;
  for (int64_t g = 0; g < group; ++g) {
    Value wg = c.reshape(c.slice(c.in(1), {g * mg}, {(g + 1) * mg}, {0}), {mg, cg * k});
    Value xg = group == 1 ? cols : c.slice(cols, {g * cg * k}, {(g + 1) * cg * k}, {1});
    outs.push_back(c.op(OpKind::MatMul, {wg, xg}));  // [N, mg, P]
  }
  Value y = c.reshape(c.concat(outs, 1), {n, m, oh, ow});
  if (c.has(3)) y = c.op(OpKind::Add, {y, c.reshape(c.in(3), {m, 1, 1})});
  return {y};
}

// RoiAlign with a fixed sampling_ratio: per roi bin, sampling_ratio^2 bilinear
// samples (reference clamping rules) from run-time roi coordinates, averaged or
// max-pooled (max over the weighted corner terms, as the reference does).
std::vector<Value> lower_roi_align(NodeCtx& c) {
  auto xd = c.dims(0), rd = c.dims(1);
  if (xd.size() != 4 || rd.size() != 2 || rd[1] != 4) c.invalid("X must be 4-D and rois [num_rois, 4]");
  int64_t sr = c.attr_int("sampling_ratio", 0);
  if (sr <= 0) c.unsupported("adaptive sampling (sampling_ratio 0) needs the roi sizes at import");
  int64_t oh = c.positive(c.attr_int("output_height", 1), "output_height");
  int64_t ow = c.positive(c.attr_int("output_width", 1), "output_width");
  double scale = double(float(c.attr_float("spatial_scale", 1.0)));
  bool half_pixel = c.attr_str("coordinate_transformation_mode", "half_pixel") == "half_pixel";
  bool is_max = c.attr_str("mode", "avg") == "max";
  int64_t n = xd[0], ch = xd[1], h = xd[2], w = xd[3], r = rd[0], p = oh * ow;
  DType t = c.dtype(0);
  auto s = [&](double v) { return c.scalar(v, t); };
  auto op2 = [&](OpKind k, Value a, Value b) { return c.op(k, {a, b}); };
  Value rois = c.cast(c.in(1), t);
  auto coord = [&](int64_t i) { return c.reshape(c.slice(rois, {i}, {i + 1}, {1}), {r, 1}); };
  double off = half_pixel ? 0.5 : 0.0;
  Value x1 = op2(OpKind::Sub, op2(OpKind::Mul, coord(0), s(scale)), s(off));
  Value y1 = op2(OpKind::Sub, op2(OpKind::Mul, coord(1), s(scale)), s(off));
  Value rw = op2(OpKind::Sub, op2(OpKind::Sub, op2(OpKind::Mul, coord(2), s(scale)), s(off)), x1);
  Value rh = op2(OpKind::Sub, op2(OpKind::Sub, op2(OpKind::Mul, coord(3), s(scale)), s(off)), y1);
  if (!half_pixel) {
    rw = op2(OpKind::Max, rw, s(1));
    rh = op2(OpKind::Max, rh, s(1));
  }
  Value bh = op2(OpKind::Div, rh, s(double(oh))), bw = op2(OpKind::Div, rw, s(double(ow)));
  std::vector<double> prow(c.host_size(p)), pcol(c.host_size(p));
  for (int64_t a = 0; a < oh; ++a)
    for (int64_t b = 0; b < ow; ++b) prow[size_t(a * ow + b)] = double(a), pcol[size_t(a * ow + b)] = double(b);
  Value prow_c = c.im.constant(make_tensor(t, {1, p}, prow)), pcol_c = c.im.constant(make_tensor(t, {1, p}, pcol));
  Value batch = c.reshape(c.cast(c.in(2), DType::I64), {r, 1, 1});
  std::vector<int64_t> cidx(c.host_size(ch));
  for (int64_t i = 0; i < ch; ++i) cidx[size_t(i)] = i * h * w;
  Value base = op2(OpKind::Add, op2(OpKind::Mul, batch, c.scalar(double(ch * h * w), DType::I64)),
                   c.im.constant(make_i64({1, ch, 1}, cidx)));  // [R, C, 1]
  Value flat = c.reshape(c.in(0), {n * ch * h * w});
  Value acc;
  for (int64_t iy = 0; iy < sr; ++iy)
    for (int64_t ix = 0; ix < sr; ++ix) {
      // sample = start + bin * (p + (i + 0.5) / sr)
      Value y = op2(OpKind::Add, y1, op2(OpKind::Mul, bh, op2(OpKind::Add, prow_c, s((double(iy) + 0.5) / double(sr)))));
      Value x = op2(OpKind::Add, x1, op2(OpKind::Mul, bw, op2(OpKind::Add, pcol_c, s((double(ix) + 0.5) / double(sr)))));
      Value inside = c.op(OpKind::Not, {op2(OpKind::Or, op2(OpKind::Or, op2(OpKind::Less, y, s(-1)), op2(OpKind::Greater, y, s(double(h)))),
                                            op2(OpKind::Or, op2(OpKind::Less, x, s(-1)), op2(OpKind::Greater, x, s(double(w)))))});
      auto axis = [&](Value v, int64_t len, Value& lo, Value& hi, Value& frac) {
        v = op2(OpKind::Max, v, s(0));
        Value f = c.op(OpKind::Floor, {v});
        Value edge = op2(OpKind::GreaterEqual, f, s(double(len - 1)));
        Value lo_f = c.op(OpKind::Where, {edge, s(double(len - 1)), f});
        Value hi_f = c.op(OpKind::Where, {edge, s(double(len - 1)), op2(OpKind::Add, f, s(1))});
        v = c.op(OpKind::Where, {edge, s(double(len - 1)), v});
        frac = op2(OpKind::Sub, v, lo_f);
        lo = c.cast(lo_f, DType::I64);
        hi = c.cast(hi_f, DType::I64);
      };
      Value ylo, yhi, ly, xlo, xhi, lx;
      axis(y, h, ylo, yhi, ly);
      axis(x, w, xlo, xhi, lx);
      Value hy = op2(OpKind::Sub, s(1), ly), hx = op2(OpKind::Sub, s(1), lx);
      Value sample;
      for (int corner = 0; corner < 4; ++corner) {
        Value yy = corner < 2 ? ylo : yhi, xx = corner % 2 ? xhi : xlo;
        Value wt = op2(OpKind::Mul, corner < 2 ? hy : ly, corner % 2 ? lx : hx);
        Value lin = op2(OpKind::Add, op2(OpKind::Mul, yy, c.scalar(double(w), DType::I64)), xx);  // [R, P]
        Value v = c.op(OpKind::Gather, {flat, op2(OpKind::Add, base, c.reshape(lin, {r, 1, p}))}, AxisAttrs{0});
        v = op2(OpKind::Mul, v, c.reshape(wt, {r, 1, p}));
        if (!sample.valid()) sample = v;
        else sample = op2(is_max ? OpKind::Max : OpKind::Add, sample, v);
      }
      sample = c.op(OpKind::Where, {c.reshape(inside, {r, 1, p}), sample, s(0)});
      if (!acc.valid()) acc = sample;
      else acc = op2(is_max ? OpKind::Max : OpKind::Add, acc, sample);
    }
  if (!is_max) acc = op2(OpKind::Div, acc, s(double(sr * sr)));
  return {c.reshape(acc, {r, ch, oh, ow})};
}

}  // namespace rlx::onnx
