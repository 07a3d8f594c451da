// Linear algebra: numpy matmul (1-D promotion, batch broadcasting) and the fused
// act(matmul + bias) epilogue.
#include <cstdint>

#include "ir/ops/infer_util.h"
#include "rlx/quant.h"

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

namespace {
// The checks qmatmul and qmatmul_id share: the format, x's features, w's row bytes.
void check_qweight(const InferCtx& ctx, const Shape& x, const Shape& w, int w_rank) {
  const auto& a = ctx.node.attr<QMatMulAttrs>();
  const quant::Format* f = a.format >= 0 && a.format <= INT32_MAX ? quant::find(static_cast<uint32_t>(a.format)) : nullptr;
  if (!f) ctx.error("unknown weight format ", a.format);
  if (a.k < 1 || a.k % f->block_elems != 0)
    ctx.error("k=", a.k, " is not a positive whole number of ", f->name, " blocks (", f->block_elems, " elements)");
  if (x.dtype() != DType::F32) ctx.error("x (input 0) must be f32, got ", x.str());
  if (x.rank() < 1) ctx.error("x (input 0) must have at least one dim");
  const int64_t xk = static_dim(ctx, x.dims().back(), "the last dim of x");
  if (xk != a.k) ctx.error("x ", x.str(), " has ", xk, " features but the weight rows hold k=", a.k);
  if (w.dtype() != DType::U8 || w.rank() != w_rank)
    ctx.error("w (input 1) must be u8 of rank ", w_rank, " ([", w_rank == 3 ? "E, " : "", "N, row bytes]), got ", w.str());
  const int64_t rb = static_dim(ctx, w.dims().back(), "the row bytes of w");
  if (a.format == quant::kQ4_0x16 && static_dim(ctx, w.dims()[w_rank - 2], "the rows of w") % 16 != 0)
    ctx.error("q4_0x16 weights hold panels of 16 rows; w ", w.str(), " does not");
  if (rb != a.k / f->block_elems * f->block_bytes)
    ctx.error("w ", w.str(), " rows hold ", rb, " bytes, ", a.k, " ", f->name, " elements take ",
              a.k / f->block_elems * f->block_bytes);
}
}  // namespace

std::vector<Shape> infer_qmatmul_id(const InferCtx& ctx) {
  const Shape& x = ctx.input(0);
  const Shape& w = ctx.input(1);
  const Shape& ids = ctx.input(2);
  check_qweight(ctx, x, w, 3);
  if (ids.rank() != 2 || (ids.dtype() != DType::I64 && ids.dtype() != DType::I32))
    ctx.error("ids (input 2) must be i64 or i32 [T, S], got ", ids.str());
  if (x.rank() != 2 && x.rank() != 3) ctx.error("x (input 0) must be [T, K] or [T, S, K], got ", x.str());
  require_same_dim(ctx, x.dims()[0], "the tokens of x", ids.dims()[0], "the tokens of ids");
  if (x.rank() == 3) require_same_dim(ctx, x.dims()[1], "the slots of x", ids.dims()[1], "the slots of ids");
  return {Shape(std::vector<Dim>{ids.dims()[0], ids.dims()[1], w.dims()[1]}, DType::F32)};
}

std::vector<Shape> infer_qmatmul(const InferCtx& ctx) {
  const Shape& x = ctx.input(0);
  const Shape& w = ctx.input(1);
  check_qweight(ctx, x, w, 2);
  std::vector<Dim> d = x.dims();
  d.back() = w.dims()[0];
  return {Shape(d, DType::F32)};
}

}  // namespace rlx::ir
