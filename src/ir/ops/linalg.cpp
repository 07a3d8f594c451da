// Linear algebra: numpy matmul (1-D promotion, batch broadcasting) and the fused
// act(matmul + bias) epilogue.
#include "ir/ops/infer_util.h"

namespace rlx::ir {

using namespace detail;

namespace {

Shape matmul_shape(const InferCtx& ctx, const Shape& a, const Shape& b) {
  if (a.rank() < 1) ctx.error("input 0 must have rank >= 1, got ", a.str());
  if (b.rank() < 1) ctx.error("input 1 must have rank >= 1, got ", b.str());
  require_same_dtype(ctx, a, "input 0", b, "input 1");
  require_not_bool(ctx, a, "input 0");
  const auto& ad = a.dims();
  const auto& bd = b.dims();
  Dim ka = ad.back();
  Dim kb = b.rank() == 1 ? bd[0] : bd[bd.size() - 2];
  if (!(ka == kb)) {
    if (ka.is_symbolic() || kb.is_symbolic())
      ctx.error("contraction dims ", dim_str(ka), " and ", dim_str(kb), " of ", a.str(), " x ", b.str(),
                " may differ; bind the symbols first");
    ctx.error("contraction dims do not match: ", a.str(), " x ", b.str());
  }
  std::vector<Dim> abatch(ad.begin(), ad.end() - std::min<size_t>(ad.size(), 2));
  std::vector<Dim> bbatch(bd.begin(), bd.end() - std::min<size_t>(bd.size(), 2));
  std::vector<Dim> out = broadcast(ctx, abatch, bbatch);
  if (a.rank() >= 2) out.push_back(ad[ad.size() - 2]);
  if (b.rank() >= 2) out.push_back(bd.back());
  return Shape(std::move(out), a.dtype());
}

}  // namespace

std::vector<Shape> infer_matmul(const InferCtx& ctx) {
  return {matmul_shape(ctx, ctx.input(0), ctx.input(1))};
}

std::vector<Shape> infer_fused_matmul(const InferCtx& ctx) {
  Shape out = matmul_shape(ctx, ctx.input(0), ctx.input(1));
  const auto& attrs = ctx.node.attr<FusedMatMulAttrs>();
  if (int(attrs.activation) > int(Activation::LeakyRelu))
    ctx.error("invalid activation code ", int(attrs.activation));
  if (attrs.activation != Activation::None) require_float(ctx, out, "the result of a matmul with an activation");
  if (attrs.activation != Activation::LeakyRelu && attrs.alpha != 0)
    ctx.error("alpha is only used by leaky_relu, got alpha=", attrs.alpha, " with ", enum_name(attrs.activation));
  if (ctx.has(2)) {
    const Shape& bias = ctx.input(2);
    require_same_dtype(ctx, bias, "bias (input 2)", out, "the matmul result");
    if (!broadcasts_to(bias.dims(), out.dims()))
      ctx.error("bias ", bias.str(), " does not broadcast to the matmul result ", out.str());
  }
  return {out};
}

}  // namespace rlx::ir
