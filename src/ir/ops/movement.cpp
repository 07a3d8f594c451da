// Data movement: reshape, transpose, slice, concat, split, gather, expand, pad, tile.
// Symbolic dims pass through where the result is exact; otherwise the rule asks for
// the symbol to be bound first.
#include <limits>

#include "ir/ops/infer_util.h"

namespace rlx::ir {

using namespace detail;

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

int64_t mul_checked(const InferCtx& ctx, int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) ctx.error("element count overflows int64 (", a, " x ", b, ")");
  return r;
}

// Length of one sliced axis with ONNX clamping; a symbolic dim is exact only for the
// whole axis (0:INT64_MAX:1) or its full reverse (-1:INT64_MIN:-1).
Dim slice_dim(const InferCtx& ctx, Dim d, int axis, int64_t start, int64_t end, int64_t step) {
  if (d.is_symbolic()) {
    if (step == 1 && start == 0 && end == kMax) return d;
    if (step == -1 && (start == -1 || start == kMax) && end == kMin) return d;
    ctx.error("slice of axis ", axis, " with symbolic size ", dim_str(d),
              " needs the size; bind the symbol first (only the full range passes through)");
  }
  int64_t n = d.raw();
  if (n == 0) return Dim(0);
  auto wrap = [n](int64_t v) { return v < 0 ? v + n : v; };
  auto clamp = [](int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); };
  int64_t s = wrap(start), e = wrap(end);
  if (step > 0) {
    s = clamp(s, 0, n);
    e = clamp(e, 0, n);
    return Dim(e > s ? (e - s - 1) / step + 1 : 0);
  }
  s = clamp(s, 0, n - 1);
  e = clamp(e, -1, n - 1);
  int64_t st = step == kMin ? kMax : -step;  // |kMin| does not fit; any step that large takes one element
  return Dim(s > e ? (s - e - 1) / st + 1 : 0);
}

}  // namespace

std::vector<Shape> infer_reshape(const InferCtx& ctx) {
  const Shape& x = ctx.input(0);
  const auto& target = ctx.node.attr<ShapeAttrs>().shape;
  int infer_at = -1;
  int64_t known = 1;  // product of the target dims other than -1
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == -1) {
      if (infer_at >= 0) ctx.error("shape ", ints_str(target), " has more than one -1");
      infer_at = int(i);
    } else if (target[i] < 0) {
      ctx.error("shape ", ints_str(target), " has invalid dim ", target[i]);
    } else {
      known = mul_checked(ctx, known, target[i]);
    }
  }
  std::vector<Dim> out(target.begin(), target.end());
  int64_t static_in = 1;
  std::vector<Dim> symbols;
  for (Dim d : x.dims()) {
    if (d.is_symbolic()) symbols.push_back(d);
    else static_in = mul_checked(ctx, static_in, d.raw());
  }
  if (!symbols.empty()) {
    // Exact only when one symbol carries over into the -1 slot unchanged.
    if (infer_at >= 0 && symbols.size() == 1 && static_in == known && known != 0) {
      out[size_t(infer_at)] = symbols[0];
      return {Shape(std::move(out), x.dtype())};
    }
    ctx.error("reshape of ", x.str(), " to ", ints_str(target),
              " needs the element count; bind the symbolic dims first");
  }
  if (infer_at >= 0) {
    if (known == 0) ctx.error("cannot infer -1 in ", ints_str(target), ": the other dims multiply to 0");
    if (static_in % known != 0)
      ctx.error("cannot reshape ", x.str(), " (", static_in, " elements) to ", ints_str(target));
    out[size_t(infer_at)] = Dim(static_in / known);
  } else if (known != static_in) {
    ctx.error("cannot reshape ", x.str(), " (", static_in, " elements) to ", ints_str(target), " (", known,
              " elements)");
  }
  return {Shape(std::move(out), x.dtype())};
}

std::vector<Shape> infer_transpose(const InferCtx& ctx) {
  const Shape& x = ctx.input(0);
  std::vector<int64_t> perm = ctx.node.attr<TransposeAttrs>().perm;
  if (perm.empty())  // ONNX default: reverse the axes
    for (int i = x.rank() - 1; i >= 0; --i) perm.push_back(i);
  if (int(perm.size()) != x.rank()) ctx.error("perm ", ints_str(perm), " does not match rank ", x.rank());
  std::vector<Dim> out;
  std::vector<bool> seen(size_t(x.rank()), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= x.rank() || seen[size_t(p)]) ctx.error("perm ", ints_str(perm), " is not a permutation");
    seen[size_t(p)] = true;
    out.push_back(x.dims()[size_t(p)]);
  }
  return {x.with_dims(std::move(out))};
}

std::vector<Shape> infer_slice(const InferCtx& ctx) {
  const Shape& x = ctx.input(0);
  const auto& a = ctx.node.attr<SliceAttrs>();
  size_t n = a.starts.size();
  if (a.ends.size() != n) ctx.error("starts ", ints_str(a.starts), " and ends ", ints_str(a.ends), " differ in length");
  if (!a.axes.empty() && a.axes.size() != n) ctx.error("axes ", ints_str(a.axes), " must match starts in length");
  if (!a.steps.empty() && a.steps.size() != n) ctx.error("steps ", ints_str(a.steps), " must match starts in length");
  std::vector<int64_t> axes = a.axes;
  if (axes.empty()) {
    if (int(n) > x.rank()) ctx.error("slices ", n, " axes of ", x.str());
    for (size_t i = 0; i < n; ++i) axes.push_back(int64_t(i));
  }
  std::vector<int> ax = norm_axes(ctx, axes, x.rank(), "axes");
  std::vector<Dim> out = x.dims();
  for (size_t i = 0; i < n; ++i) {
    int64_t step = a.steps.empty() ? 1 : a.steps[i];
    if (step == 0) ctx.error("steps ", ints_str(a.steps), " contain 0");
    out[size_t(ax[i])] = slice_dim(ctx, x.dims()[size_t(ax[i])], ax[i], a.starts[i], a.ends[i], step);
  }
  return {x.with_dims(std::move(out))};
}

std::vector<Shape> infer_concat(const InferCtx& ctx) {
  const Shape& first = ctx.input(0);
  if (first.rank() < 1) ctx.error("cannot concatenate scalars");
  int ax = norm_axis(ctx, ctx.node.attr<AxisAttrs>().axis, first.rank(), "axis");
  int64_t total = 0;
  std::vector<Dim> symbolic;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Shape& s = ctx.input(i);
    if (s.dtype() != first.dtype() || s.rank() != first.rank())
      ctx.error("input ", i, " ", s.str(), " does not match input 0 ", first.str(), " in dtype or rank");
    for (int d = 0; d < s.rank(); ++d) {
      if (d == ax) continue;
      if (!(s.dims()[size_t(d)] == first.dims()[size_t(d)]))
        ctx.error("input ", i, " ", s.str(), " differs from input 0 ", first.str(), " on axis ", d);
    }
    Dim d = s.dims()[size_t(ax)];
    if (d.is_symbolic()) symbolic.push_back(d);
    else if (__builtin_add_overflow(total, d.raw(), &total)) ctx.error("concatenated size overflows int64");
  }
  std::vector<Dim> out = first.dims();
  if (symbolic.empty()) out[size_t(ax)] = Dim(total);
  else if (symbolic.size() == 1 && total == 0) out[size_t(ax)] = symbolic[0];
  else ctx.error("concatenation along axis ", ax, " sums symbolic sizes; bind the symbols first");
  return {first.with_dims(std::move(out))};
}

std::vector<Shape> infer_split(const InferCtx& ctx) {
  const Shape& x = ctx.input(0);
  const auto& a = ctx.node.attr<SplitAttrs>();
  int ax = norm_axis(ctx, a.axis, x.rank(), "axis");
  if (a.sizes.empty()) ctx.error("sizes must not be empty");
  int64_t dim = static_dim(ctx, x.dims()[size_t(ax)], "the split axis");
  int64_t sum = 0;
  for (int64_t s : a.sizes) {
    if (s < 0) ctx.error("sizes ", ints_str(a.sizes), " contain a negative size");
    if (__builtin_add_overflow(sum, s, &sum)) ctx.error("sizes ", ints_str(a.sizes), " overflow int64");
  }
  if (sum != dim) ctx.error("sizes ", ints_str(a.sizes), " sum to ", sum, " but axis ", ax, " of ", x.str(), " has ", dim);
  std::vector<Shape> outs;
  for (int64_t s : a.sizes) {
    std::vector<Dim> d = x.dims();
    d[size_t(ax)] = Dim(s);
    outs.push_back(x.with_dims(std::move(d)));
  }
  return outs;
}

std::vector<Shape> infer_gather(const InferCtx& ctx) {
  const Shape& x = ctx.input(0);
  const Shape& idx = ctx.input(1);
  require_index(ctx, idx, "indices (input 1)");
  if (x.rank() < 1) ctx.error("cannot gather from a scalar");
  int ax = norm_axis(ctx, ctx.node.attr<AxisAttrs>().axis, x.rank(), "axis");
  std::vector<Dim> out(x.dims().begin(), x.dims().begin() + ax);
  out.insert(out.end(), idx.dims().begin(), idx.dims().end());
  out.insert(out.end(), x.dims().begin() + ax + 1, x.dims().end());
  return {x.with_dims(std::move(out))};
}

// expand: bidirectional numpy broadcast of the input with the target (ONNX Expand).
std::vector<Shape> infer_expand(const InferCtx& ctx) {
  const Shape& x = ctx.input(0);
  const auto& target = ctx.node.attr<ShapeAttrs>().shape;
  for (int64_t d : target)
    if (d < 0) ctx.error("shape ", ints_str(target), " has negative dim ", d);
  std::vector<Dim> t(target.begin(), target.end());
  return {x.with_dims(broadcast(ctx, x.dims(), t))};
}

std::vector<Shape> infer_pad(const InferCtx& ctx) {
  const Shape& x = ctx.input(0);
  const auto& a = ctx.node.attr<PadAttrs>();
  int r = x.rank();
  require_len(ctx, a.pads, size_t(2 * r), "pads");
  if (int(a.mode) > int(PadMode::Edge)) ctx.error("invalid pad mode code ", int(a.mode));
  std::vector<Dim> out = x.dims();
  for (int i = 0; i < r; ++i) {
    int64_t b = a.pads[size_t(i)], e = a.pads[size_t(i + r)];
    Dim d = x.dims()[size_t(i)];
    if (b == 0 && e == 0) continue;
    int64_t n = static_dim(ctx, d, "a padded axis");
    if (a.mode == PadMode::Reflect && (b >= n || e >= n))
      ctx.error("reflect padding ", b, ",", e, " must be smaller than dim ", n, " of axis ", i);
    if (a.mode == PadMode::Edge && n == 0 && (b > 0 || e > 0)) ctx.error("edge padding of empty axis ", i);
    int64_t m = 0;
    if (__builtin_add_overflow(n, b, &m) || __builtin_add_overflow(m, e, &m))
      ctx.error("pads ", ints_str(a.pads), " overflow int64");
    if (m < 0) ctx.error("pads ", ints_str(a.pads), " crop axis ", i, " of ", x.str(), " below zero");
    out[size_t(i)] = Dim(m);
  }
  return {x.with_dims(std::move(out))};
}

std::vector<Shape> infer_tile(const InferCtx& ctx) {
  const Shape& x = ctx.input(0);
  const auto& reps = ctx.node.attr<TileAttrs>().repeats;
  require_len(ctx, reps, size_t(x.rank()), "repeats");
  std::vector<Dim> out = x.dims();
  for (size_t i = 0; i < reps.size(); ++i) {
    if (reps[i] < 0) ctx.error("repeats ", ints_str(reps), " contain a negative count");
    if (reps[i] == 1) continue;
    out[i] = reps[i] == 0 ? Dim(0) : Dim(mul_checked(ctx, static_dim(ctx, out[i], "a tiled axis"), reps[i]));
  }
  return {x.with_dims(std::move(out))};
}

}  // namespace rlx::ir
