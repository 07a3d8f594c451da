// Normalization: layer_norm(x, scale?, bias?) and rms_norm(x, scale?) over [axis, rank).
// (softmax/log_softmax use infer_unary in elementwise.cpp.)
#include <cmath>

#include "ir/ops/infer_util.h"

namespace rlx::ir {

using namespace detail;

std::vector<Shape> infer_norm(const InferCtx& ctx) {
  const Shape& x = ctx.input(0);
  const auto& a = ctx.node.attr<NormAttrs>();
  check_float_only(ctx);
  int ax = norm_axis(ctx, a.axis, x.rank(), "axis");
  if (!(a.epsilon >= 0) || !std::isfinite(a.epsilon)) ctx.error("epsilon must be finite and >= 0, got ", a.epsilon);
  std::vector<Dim> normalized(x.dims().begin() + ax, x.dims().end());
  const char* names[] = {"", "scale (input 1)", "bias (input 2)"};
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has(i)) continue;
    const Shape& p = ctx.input(i);
    require_same_dtype(ctx, p, names[i], x, "input 0");
    if (!broadcasts_to(p.dims(), normalized))
      ctx.error(names[i], " ", p.str(), " does not broadcast to the normalized dims ", dims_str(normalized));
  }
  return {x};
}

}  // namespace rlx::ir
