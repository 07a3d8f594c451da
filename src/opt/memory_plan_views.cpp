// View analysis: which node outputs alias a contiguous run of an input (see memory_plan.h).
#include <algorithm>
#include <limits>
#include <vector>

#include "ir/dims.h"
#include "ir/op_table.h"
#include "opt/memory_plan.h"

namespace rlx::opt {
namespace {

struct Dims {
  std::vector<int64_t> in, out;
  int64_t in_bytes = 0, out_bytes = 0, elem = 0;
};

bool static_dims(const Shape& in, const Shape& out, Dims& d) {
  if (!in.is_static() || !out.is_static()) return false;
  d.in = in.static_dims();
  d.out = out.static_dims();
  d.in_bytes = int64_t(in.bytes());
  d.out_bytes = int64_t(out.bytes());
  d.elem = int64_t(dtype_size(in.dtype()));
  return true;
}

// Row-major element strides of `dims`.
// Per-axis (start, step) of a slice after ONNX clamping, checked against the inferred
// output dims; false when the attributes do not describe the output (then: no view).
bool slice_geometry(const SliceAttrs& a, const Dims& d, std::vector<int64_t>& start,
                    std::vector<int64_t>& step) {
  const int rank = int(d.in.size());
  if (int(d.out.size()) != rank || a.starts.size() != a.ends.size()) return false;
  if (!a.axes.empty() && a.axes.size() != a.starts.size()) return false;
  if (!a.steps.empty() && a.steps.size() != a.starts.size()) return false;
  start.assign(rank, 0);
  step.assign(rank, 1);
  std::vector<int64_t> count = d.in;
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < a.starts.size(); ++i) {
    int64_t axis = a.axes.empty() ? int64_t(i) : a.axes[i];
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank || seen[axis]) return false;
    seen[axis] = true;
    const int64_t dim = d.in[axis];
    const int64_t st = a.steps.empty() ? 1 : a.steps[i];
    if (st == 0) return false;
    // ONNX: negative indices count from the end (no overflow: dim > 0 is added to a
    // negative number), then clamp to the valid range for the step's direction.
    int64_t b = a.starts[i], e = a.ends[i];
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    int64_t n = 0;
    // |step| beyond any dim selects at most one element; capping it avoids overflow.
    const int64_t mag = st == std::numeric_limits<int64_t>::min()
                            ? dim + 1
                            : std::min(st < 0 ? -st : st, dim + 1);
    if (dim == 0) {
      n = 0;
    } else if (st > 0) {
      b = std::clamp<int64_t>(b, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      n = e > b ? (e - b - 1) / mag + 1 : 0;
    } else {
      b = std::clamp<int64_t>(b, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      n = b > e ? (b - e - 1) / mag + 1 : 0;
    }
    start[axis] = b;
    step[axis] = st;
    count[axis] = n;
  }
  return count == d.out;
}

std::optional<ViewOf> slice_view(const SliceAttrs& a, const Dims& d) {
  std::vector<int64_t> start, step;
  if (!slice_geometry(a, d, start, step)) return std::nullopt;
  const int rank = int(d.in.size());
  // k: the last axis not taken whole (in order); axes after it are whole.
  int k = rank - 1;
  while (k >= 0 && d.out[k] == d.in[k] && (step[k] == 1 || d.in[k] == 1)) --k;
  if (k >= 0 && d.out[k] > 1 && step[k] != 1) return std::nullopt;
  for (int i = 0; i < k; ++i)
    if (d.out[i] != 1) return std::nullopt;
  const std::vector<int64_t> strides = row_major_strides(d.in);
  int64_t offset = 0;
  for (int i = 0; i <= k; ++i) offset += start[i] * strides[i];
  // Whole axes after k start at 0 (step 1 over the full extent, or a size-1 axis).
  return ViewOf{0, offset * d.elem};
}

std::optional<ViewOf> split_view(const Graph& g, const Node& n, int32_t out, const Dims& d) {
  const int rank = int(d.in.size());
  int axis = int(n.attr<SplitAttrs>().axis);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return std::nullopt;
  for (int i = 0; i < axis; ++i)
    if (d.in[i] != 1) return std::nullopt;
  // Output j starts after the extents of outputs 0..j-1 along the axis.
  int64_t before = 0;
  for (int32_t j = 0; j < out; ++j) {
    const Shape& s = n.outputs[j];
    if (!s.is_static() || s.rank() != rank) return std::nullopt;
    before += s.dim(axis).value();
  }
  const std::vector<int64_t> strides = row_major_strides(d.in);
  return ViewOf{0, before * strides[axis] * d.elem};
}

bool transpose_is_view(const TransposeAttrs& a, const Dims& d) {
  const int rank = int(d.in.size());
  if (int(a.perm.size()) != rank) return false;
  int64_t last = -1;
  for (int64_t p : a.perm) {
    if (p < 0) p += rank;
    if (p < 0 || p >= rank) return false;
    if (d.in[p] == 1) continue;
    if (p < last) return false;
    last = p;
  }
  return true;
}

// An in-place op's output may take input 0's storage only where nobody else can observe
// the write: input 0 comes straight from a graph input, which no other node reads and
// which is not itself a graph output.
bool in_place_ok(const Graph& g, const Node& n, int32_t node) {
  const Value c = n.inputs[0];
  if (g.node(c.node).kind != OpKind::Input) return false;
  for (const GraphOutput& go : g.outputs())
    if (go.value == c) return false;
  for (size_t id = size_t(c.node) + 1; id < g.nodes().size(); ++id) {
    if (int32_t(id) == node) continue;
    for (const Value& in : g.nodes()[id].inputs)
      if (in == c) return false;
  }
  int uses = 0;
  for (const Value& in : n.inputs) uses += in == c ? 1 : 0;
  return uses == 1;
}

}  // namespace

std::optional<ViewOf> view_of(const Graph& g, int32_t node, int32_t out) {
  const Node& n = g.node(node);
  if (n.inputs.empty() || !n.inputs[0].valid() || out < 0 || out >= int32_t(n.outputs.size()))
    return std::nullopt;
  Dims d;
  if (!static_dims(g.type(n.inputs[0]), n.outputs[out], d)) return std::nullopt;
  // Same bytes in the same order; only bitcast reads them as another dtype (of one size).
  if (d.out_bytes == 0 || (n.kind != OpKind::BitCast && g.type(n.inputs[0]).dtype() != n.outputs[out].dtype()))
    return std::nullopt;

  std::optional<ViewOf> v;
  if (ir::has_trait(n.kind, ir::kInPlace)) {
    if (d.out_bytes == d.in_bytes && in_place_ok(g, n, node)) v = ViewOf{0, 0};
  } else if (ir::has_trait(n.kind, ir::kView)) {
    if (d.out_bytes == d.in_bytes) v = ViewOf{0, 0};
  } else {
    switch (n.kind) {
      case OpKind::Cast:
        if (d.out_bytes == d.in_bytes) v = ViewOf{0, 0};
        break;
      case OpKind::Transpose:
        if (d.out_bytes == d.in_bytes && transpose_is_view(n.attr<TransposeAttrs>(), d))
          v = ViewOf{0, 0};
        break;
      case OpKind::Slice:
        v = slice_view(n.attr<SliceAttrs>(), d);
        break;
      case OpKind::Split:
        v = split_view(g, n, out, d);
        break;
      default:
        break;
    }
  }
  // Never alias past the end of the input, whatever the attributes claimed.
  if (v && (v->byte_offset < 0 || v->byte_offset + d.out_bytes > d.in_bytes)) return std::nullopt;
  return v;
}

}  // namespace rlx::opt
