// Convolution and pooling over NCHW tensors.
#include "ir/ops/infer_util.h"

namespace rlx::ir {

using namespace detail;

namespace {

void check_window_attrs(const InferCtx& ctx, const std::vector<int64_t>& strides, const std::vector<int64_t>& pads,
                        const std::vector<int64_t>& dilations) {
  require_len(ctx, strides, 2, "strides");
  require_len(ctx, pads, 4, "pads");
  require_len(ctx, dilations, 2, "dilations");
  for (int64_t s : strides)
    if (s < 1) ctx.error("strides ", ints_str(strides), " must be >= 1");
  for (int64_t p : pads)
    if (p < 0) ctx.error("pads ", ints_str(pads), " must be >= 0");
  for (int64_t d : dilations)
    if (d < 1) ctx.error("dilations ", ints_str(dilations), " must be >= 1");
  // Window arithmetic stays far from int64 overflow with sizes below 2^31.
  for (const auto* v : {&strides, &pads, &dilations})
    for (int64_t x : *v)
      if (x >= (int64_t(1) << 31)) ctx.error("window attribute ", x, " is too large");
}

// Output size of one spatial axis; `i` is 0 for H, 1 for W; pads are [top, left, bottom, right].
Dim window_out(const InferCtx& ctx, Dim in, int i, int64_t k, const std::vector<int64_t>& strides,
               const std::vector<int64_t>& pads, const std::vector<int64_t>& dilations, bool ceil_mode) {
  int64_t s = strides[size_t(i)], pb = pads[size_t(i)], pe = pads[size_t(i + 2)], d = dilations[size_t(i)];
  if (in.is_symbolic()) {
    // Only the identity window keeps the size exactly.
    if (k == 1 && s == 1 && pb == 0 && pe == 0) return in;
    static_dim(ctx, in, i == 0 ? "input height" : "input width");
  }
  int64_t n = in.raw();
  if (n >= (int64_t(1) << 40) || k >= (int64_t(1) << 31))
    ctx.error("spatial size ", n, " or window ", k, " is too large");
  int64_t ek = d * (k - 1) + 1;  // effective (dilated) window; all terms < 2^31 so no overflow
  int64_t span = n + pb + pe;
  if (span < ek)
    ctx.error(i == 0 ? "height " : "width ", n, " (padded ", span, ") is smaller than the window ", ek);
  int64_t out = ceil_mode ? (span - ek + s - 1) / s + 1 : (span - ek) / s + 1;
  // In ceil mode the last window must start inside the input or its leading padding.
  if (ceil_mode && (out - 1) * s >= n + pb) --out;
  return Dim(out);
}

}  // namespace

// conv2d(x[N,C,H,W], w[M,C/group,kH,kW], bias?[M]) -> [N,M,Ho,Wo]
namespace {

// [N,H,W,C] -> [N,C,H,W] (the NCHW view of a channels-last shape) and back.
std::vector<Dim> nchw_of(const std::vector<Dim>& d) { return {d[0], d[3], d[1], d[2]}; }
std::vector<Dim> nhwc_of(const std::vector<Dim>& d) { return {d[0], d[2], d[3], d[1]}; }

// conv2d's output dims (NCHW) for input x and weight w, checking the channels and groups;
// nhwc: x, w and the result channels last (checked in their NCHW view).
std::vector<Dim> conv_out_dims(const InferCtx& ctx, const Shape& x_in, const Shape& w_in, const ConvAttrs& a) {
  require_rank(ctx, x_in, 4, a.nhwc ? "input 0 (NHWC)" : "input 0 (NCHW)");
  require_rank(ctx, w_in, 4, "weight (input 1)");
  if (a.nhwc) {
    const Shape x = x_in.with_dims(nchw_of(x_in.dims())), w = w_in.with_dims(nchw_of(w_in.dims()));
    ConvAttrs first = a;
    first.nhwc = false;
    return nhwc_of(conv_out_dims(ctx, x, w, first));
  }
  const Shape& x = x_in;
  const Shape& w = w_in;
  check_window_attrs(ctx, a.strides, a.pads, a.dilations);
  if (a.group < 1) ctx.error("group must be >= 1, got ", a.group);
  if (!w.is_static()) ctx.error("weight ", w.str(), " must have a static shape");
  auto wd = w.static_dims();
  int64_t c = static_dim(ctx, x.dims()[1], "the channel dim");
  if (wd[0] % a.group != 0) ctx.error("output channels ", wd[0], " are not divisible by group ", a.group);
  if (wd[1] * a.group != c)
    ctx.error("input has ", c, " channels but weight ", w.str(), " with group ", a.group, " expects ", wd[1] * a.group);
  Dim h = window_out(ctx, x.dims()[2], 0, wd[2], a.strides, a.pads, a.dilations, false);
  Dim wo = window_out(ctx, x.dims()[3], 1, wd[3], a.strides, a.pads, a.dilations, false);
  return {x.dims()[0], Dim(wd[0]), h, wo};
}

}  // namespace

// The output dims, with the optional bias (input 2) checked against them.
static std::vector<Dim> conv_out_dims_with_bias(const InferCtx& ctx, const Shape& x, const Shape& w,
                                                const ConvAttrs& a) {
  std::vector<Dim> out = conv_out_dims(ctx, x, w, a);
  if (ctx.has(2)) {
    const Shape& b = ctx.input(2);
    const Dim m = out[a.nhwc ? 3 : 1];
    require_same_dtype(ctx, b, "bias (input 2)", x, "input 0");
    if (b.rank() != 1 || !(b.dims()[0] == m)) ctx.error("bias ", b.str(), " must have shape [", m.raw(), "]");
  }
  return out;
}

std::vector<Shape> infer_conv2d(const InferCtx& ctx) {
  const Shape& x = ctx.input(0);
  const Shape& w = ctx.input(1);
  const auto& a = ctx.node.attr<ConvAttrs>();
  require_same_dtype(ctx, x, "input 0", w, "weight (input 1)");
  require_not_bool(ctx, x, "input 0");
  require_real(ctx, x, "input 0");
  return {x.with_dims(conv_out_dims_with_bias(ctx, x, w, a))};
}

std::vector<Shape> infer_fused_conv2d(const InferCtx& ctx) {
  const Shape& x = ctx.input(0);
  const Shape& w = ctx.input(1);
  const auto& a = ctx.node.attr<FusedConvAttrs>();
  require_same_dtype(ctx, x, "input 0", w, "weight (input 1)");
  require_float(ctx, x, "input 0");
  if (int(a.activation) > int(Activation::LeakyRelu)) ctx.error("invalid activation code ", int(a.activation));
  if (a.activation != Activation::LeakyRelu && a.alpha != 0)
    ctx.error("alpha is only used by leaky_relu, got alpha=", a.alpha, " with ", enum_name(a.activation));
  Shape y = x.with_dims(conv_out_dims_with_bias(ctx, x, w, a.conv()));
  if (ctx.has(3) && !(ctx.input(3) == y))
    ctx.error("residual (input 3) ", ctx.input(3).str(), " must have the conv's output type ", y.str());
  return {y};
}

std::vector<Shape> infer_conv_integer(const InferCtx& ctx) {
  const Shape& x = ctx.input(0);
  const Shape& w = ctx.input(1);
  const Shape& xz = ctx.input(2);
  const Shape& wz = ctx.input(3);
  for (const auto& [s, what] : {std::pair{&x, "input 0"}, std::pair{&w, "weight (input 1)"}})
    if (s->dtype() != DType::U8 && s->dtype() != DType::I8) ctx.error(what, " ", s->str(), " must be u8 or i8");
  if (ctx.node.attr<ConvAttrs>().nhwc) ctx.error("conv_integer is NCHW only (nhwc is set)");
  require_same_dtype(ctx, xz, "x_zero_point (input 2)", x, "input 0");
  require_same_dtype(ctx, wz, "w_zero_point (input 3)", w, "weight (input 1)");
  std::vector<Dim> out = conv_out_dims(ctx, x, w, ctx.node.attr<ConvAttrs>());
  if (!xz.is_static() || xz.numel() != 1) ctx.error("x_zero_point ", xz.str(), " must hold one element");
  if (!wz.is_static() || (wz.numel() != 1 && !(wz.rank() == 1 && wz.dims()[0] == out[1])))
    ctx.error("w_zero_point ", wz.str(), " must hold one element or one per output channel (", out[1].raw(), ")");
  return {Shape(std::move(out), DType::I32)};
}

std::vector<Shape> infer_pool2d(const InferCtx& ctx) {
  const Shape& x = ctx.input(0);
  const auto& a = ctx.node.attr<PoolAttrs>();
  require_rank(ctx, x, 4, a.nhwc ? "input 0 (NHWC)" : "input 0 (NCHW)");
  require_not_bool(ctx, x, "input 0");
  require_real(ctx, x, "input 0");
  require_len(ctx, a.kernel, 2, "kernel");
  for (int64_t k : a.kernel)
    if (k < 1 || k >= (int64_t(1) << 31)) ctx.error("kernel ", ints_str(a.kernel), " must be in [1, 2^31)");
  check_window_attrs(ctx, a.strides, a.pads, a.dilations);
  for (int i = 0; i < 4; ++i) {
    int64_t ek = a.dilations[size_t(i % 2)] * (a.kernel[size_t(i % 2)] - 1) + 1;
    if (a.pads[size_t(i)] >= ek) ctx.error("pads ", ints_str(a.pads), " must be smaller than the window ", ek);
  }
  const int hax = a.nhwc ? 1 : 2, cax = a.nhwc ? 3 : 1;
  Dim h = window_out(ctx, x.dims()[size_t(hax)], 0, a.kernel[0], a.strides, a.pads, a.dilations, a.ceil_mode);
  Dim w = window_out(ctx, x.dims()[size_t(hax + 1)], 1, a.kernel[1], a.strides, a.pads, a.dilations, a.ceil_mode);
  if (a.nhwc) return {x.with_dims({x.dims()[0], h, w, x.dims()[size_t(cax)]})};
  return {x.with_dims({x.dims()[0], x.dims()[size_t(cax)], h, w})};
}

}  // namespace rlx::ir
