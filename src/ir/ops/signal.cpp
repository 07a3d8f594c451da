// Signal: dft / idft(x [..., n, 1|2]) -> [..., n, 2] (complex as its last axis).
#include "ir/ops/infer_util.h"

namespace rlx::ir {

using namespace detail;

std::vector<Shape> infer_dft(const InferCtx& ctx) {
  const Shape& x = ctx.input(0);
  check_float_only(ctx);
  if (x.rank() < 2) ctx.error("input ", x.str(), " must have rank >= 2: [..., n, 1 or 2]");
  const Dim c = x.dims().back();
  if (!(c == Dim(1)) && !(c == Dim(2)))
    ctx.error("input ", x.str(), " must end in a dim of 1 (real) or 2 (real, imaginary)");
  std::vector<Dim> out = x.dims();
  out.back() = Dim(2);
  return {x.with_dims(std::move(out))};
}

}  // namespace rlx::ir
