// Data movement, part 1: copies (reshape / identity when the planner cannot alias),
// concat, split and gather. Everything moves raw bytes, so every dtype is supported.
// The other ops live in movement_index.cpp (slice, expand, pad, tile) and
// movement_transpose.cpp.
#include "backends/cpu/kernels/reduce_movement_common.h"

namespace rlx::cpu {
namespace reduce_movement {
void register_index_copy_kernels(KernelRegistry& r);  // movement_index.cpp
void register_transpose_kernel(KernelRegistry& r);    // movement_transpose.cpp
}

namespace {
using namespace reduce_movement;

constexpr int64_t kCopyPiece = 1 << 16;  // bytes per parallel piece of a flat copy

// Scales a byte count of a tensor whose leading dim is `lead` to the active rows.
int64_t active_bytes(const RunCtx& ctx, int64_t bytes, int64_t lead) {
  return lead ? bytes / lead * ctx.rows(lead) : bytes;
}

void parallel_memcpy(const RunCtx& ctx, uint8_t* dst, const uint8_t* src, int64_t bytes) {
  if (dst == src || bytes <= 0) return;
  auto body = [&](int64_t b, int64_t e) {
    const int64_t lo = b * kCopyPiece, hi = std::min(bytes, e * kCopyPiece);
    std::memcpy(dst + lo, src + lo, size_t(hi - lo));
  };
  par_for(ctx, (bytes + kCopyPiece - 1) / kCopyPiece, 4, body);
}

// ---- reshape / identity
struct CopyCfg {
  int64_t bytes = 0, lead = 0;
};

void run_copy(const RunCtx& ctx, const void* cfg, void* const* bufs) {
  const auto& c = *static_cast<const CopyCfg*>(cfg);
  parallel_memcpy(ctx, static_cast<uint8_t*>(bufs[1]), static_cast<const uint8_t*>(bufs[0]),
                  active_bytes(ctx, c.bytes, c.lead));
}

KernelCall build_copy(const Node& node, const std::vector<const Shape*>& in,
                      const std::vector<Shape>& out) {
  CopyCfg c;
  c.bytes = int64_t(out[0].bytes());
  if (int64_t(in[0]->bytes()) != c.bytes)
    node_fail(ErrorCategory::Internal, node, "input and output sizes differ");
  const auto di = dims_of(*in[0]), dout = dims_of(out[0]);
  // Leading rows line up when both leading dims are equal (rows then have equal bytes).
  const bool extent = !di.empty() && !dout.empty() && di[0] == dout[0] && di[0] > 1;
  if (extent) c.lead = di[0];
  return make_call(run_copy, c, extent);
}

// ---- concat / split: per outer row, one contiguous chunk per part
struct PartsCfg {
  int64_t outer = 1, row_bytes = 0, lead = 0;
  std::vector<int64_t> chunk, offset;  // per part: bytes per outer row, offset in the row
};

PartsCfg parts_cfg(const Node& node, const Shape& whole, const std::vector<const Shape*>& parts,
                   int64_t axis_attr) {
  const auto d = dims_of(whole);
  if (d.empty()) node_fail(ErrorCategory::InvalidArgument, node, "needs rank >= 1");
  const int axis = normalize_axis(axis_attr, int(d.size()), "axis");
  PartsCfg c;
  c.outer = prod(d, 0, axis);
  const int64_t es = int64_t(dtype_size(whole.dtype()));
  int64_t off = 0;
  for (const Shape* p : parts) {
    const auto pd = dims_of(*p);
    const int64_t b = prod(pd, axis) * es;
    c.chunk.push_back(b);
    c.offset.push_back(off);
    off += b;
  }
  c.row_bytes = off;
  if (c.row_bytes != prod(d, axis) * es)
    node_fail(ErrorCategory::Internal, node, "parts do not add up to the whole along the axis");
  if (axis > 0 && d[0] > 1) c.lead = d[0];
  return c;
}

int64_t active_outer(const RunCtx& ctx, const PartsCfg& c) {
  return c.lead ? c.outer / c.lead * ctx.rows(c.lead) : c.outer;
}

void run_concat(const RunCtx& ctx, const void* cfg, void* const* bufs) {
  const auto& c = *static_cast<const PartsCfg*>(cfg);
  const int64_t np = int64_t(c.chunk.size());
  auto* y = static_cast<uint8_t*>(bufs[np]);
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t it = b; it < e; ++it) {
      const int64_t o = it / np, p = it % np;
      if (c.chunk[p])
        std::memcpy(y + o * c.row_bytes + c.offset[p],
                    static_cast<const uint8_t*>(bufs[p]) + o * c.chunk[p], size_t(c.chunk[p]));
    }
  };
  par_for(ctx, active_outer(ctx, c) * np, grain_for(c.row_bytes / std::max<int64_t>(1, np), 65536),
          body);
}

void run_split(const RunCtx& ctx, const void* cfg, void* const* bufs) {
  const auto& c = *static_cast<const PartsCfg*>(cfg);
  const int64_t np = int64_t(c.chunk.size());
  const auto* x = static_cast<const uint8_t*>(bufs[0]);
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t it = b; it < e; ++it) {
      const int64_t o = it / np, p = it % np;
      if (c.chunk[p])
        std::memcpy(static_cast<uint8_t*>(bufs[1 + p]) + o * c.chunk[p],
                    x + o * c.row_bytes + c.offset[p], size_t(c.chunk[p]));
    }
  };
  par_for(ctx, active_outer(ctx, c) * np, grain_for(c.row_bytes / std::max<int64_t>(1, np), 65536),
          body);
}

KernelCall build_concat(const Node& node, const std::vector<const Shape*>& in,
                        const std::vector<Shape>& out) {
  for (const Shape* s : in)
    if (!s) node_fail(ErrorCategory::InvalidArgument, node, "absent input");
  PartsCfg c = parts_cfg(node, out[0], in, node.attr<AxisAttrs>().axis);
  const bool extent = c.lead != 0;
  return make_call(run_concat, std::move(c), extent);
}

KernelCall build_split(const Node& node, const std::vector<const Shape*>& in,
                       const std::vector<Shape>& out) {
  std::vector<const Shape*> parts;
  for (const Shape& s : out) parts.push_back(&s);
  PartsCfg c = parts_cfg(node, *in[0], parts, node.attr<SplitAttrs>().axis);
  const bool extent = c.lead != 0;
  return make_call(run_split, std::move(c), extent);
}

// ---- gather: out = data[:axis] + indices.shape + data[axis+1:]
struct GatherCfg {
  int64_t outer = 1, n = 0, nidx = 0, inner_bytes = 0, lead = 0;
  DType idx_t = DType::I64;
  std::string node_name;
};

template <class I>
void run_gather_t(const RunCtx& ctx, const void* cfg, void* const* bufs) {
  const auto& c = *static_cast<const GatherCfg*>(cfg);
  const auto* x = static_cast<const uint8_t*>(bufs[0]);
  const auto* idx = static_cast<const I*>(bufs[1]);
  auto* y = static_cast<uint8_t*>(bufs[2]);
  // Validate first, on the calling thread, so a bad index throws before any write.
  for (int64_t j = 0; j < c.nidx; ++j) {
    const int64_t v = int64_t(idx[j]);
    if (v < -c.n || v >= c.n)
      fail(ErrorCategory::InvalidArgument, "node '", c.node_name, "' (gather): index ", v,
           " at position ", j, " is out of range for an axis of size ", c.n);
  }
  const int64_t outer = c.lead ? c.outer / c.lead * ctx.rows(c.lead) : c.outer;
  // One element per index (a gather along the last axis, e.g. a nearest-neighbour Resize):
  // typed loads per outer row instead of a division and a memcpy call per element.
  auto elements = [&](auto tag) {
    using T = decltype(tag);
    const T* xs = reinterpret_cast<const T*>(x);
    T* ys = reinterpret_cast<T*>(y);
    par_for(ctx, outer, grain_for(c.nidx * int64_t(sizeof(T)), 65536), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        const T* row = xs + o * c.n;
        T* out = ys + o * c.nidx;
        for (int64_t j = 0; j < c.nidx; ++j) {
          const int64_t v = int64_t(idx[j]);
          out[j] = row[v < 0 ? v + c.n : v];
        }
      }
    });
  };
  switch (c.inner_bytes) {
    case 1: return elements(uint8_t{});
    case 2: return elements(uint16_t{});
    case 4: return elements(uint32_t{});
    case 8: return elements(uint64_t{});
    default: break;
  }
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t it = b; it < e; ++it) {
      const int64_t o = it / c.nidx, j = it % c.nidx;
      int64_t v = int64_t(idx[j]);
      if (v < 0) v += c.n;
      std::memcpy(y + it * c.inner_bytes, x + (o * c.n + v) * c.inner_bytes, size_t(c.inner_bytes));
    }
  };
  if (c.inner_bytes > 0) par_for(ctx, outer * c.nidx, grain_for(c.inner_bytes, 65536), body);
}

KernelFn gather_fn(DType t) {
  switch (t) {
    case DType::I64: return run_gather_t<int64_t>;
    case DType::I32: return run_gather_t<int32_t>;
    case DType::I16: return run_gather_t<int16_t>;
    case DType::I8: return run_gather_t<int8_t>;
    case DType::U8: return run_gather_t<uint8_t>;
    case DType::U32: return run_gather_t<uint32_t>;
    default: return nullptr;
  }
}

KernelCall build_gather(const Node& node, const std::vector<const Shape*>& in,
                        const std::vector<Shape>& out) {
  const auto d = dims_of(*in[0]);
  if (d.empty()) node_fail(ErrorCategory::InvalidArgument, node, "data needs rank >= 1");
  const int axis = normalize_axis(node.attr<AxisAttrs>().axis, int(d.size()), "gather axis");
  GatherCfg c;
  c.outer = prod(d, 0, axis);
  c.n = d[axis];
  c.nidx = in[1]->numel();
  c.inner_bytes = prod(d, axis + 1) * int64_t(dtype_size(in[0]->dtype()));
  c.idx_t = in[1]->dtype();
  c.node_name = node.name;
  KernelFn fn = gather_fn(c.idx_t);
  if (!fn) node_fail(ErrorCategory::Unsupported, node, "index dtype ", dtype_name(c.idx_t));
  const bool extent = axis > 0 && d[0] > 1;
  if (extent) c.lead = d[0];
  return make_call(fn, std::move(c), extent);
}

bool gather_supports(const Node&, const std::vector<const Shape*>& in) {
  return in.size() == 2 && in[1] && gather_fn(in[1]->dtype()) != nullptr;
}

}  // namespace

void register_movement_kernels(KernelRegistry& r) {
  r.add(OpKind::Reshape, build_copy);
  r.add(OpKind::Identity, build_copy);
  r.add(OpKind::BitCast, build_copy);  // where the planner did not alias it: the bytes copied
  r.add(OpKind::Concat, build_concat);
  r.add(OpKind::Split, build_split);
  r.add(OpKind::Gather, build_gather, gather_supports);
  reduce_movement::register_index_copy_kernels(r);
  reduce_movement::register_transpose_kernel(r);
}

}  // namespace rlx::cpu
