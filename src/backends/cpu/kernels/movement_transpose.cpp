// Transpose: out dim k = in dim perm[k]. At build time size-1 dims are dropped and
// input dims that stay adjacent and in order are merged, which turns most permutations
// into a plain copy, a row gather (innermost dim kept: one memcpy per row) or a batch
// of 2-D planes (innermost dim moved), transposed in cache-sized square tiles.
#include "backends/cpu/kernels/reduce_movement_common.h"

namespace rlx::cpu::reduce_movement {
namespace {

struct TransposeCfg {
  enum Mode { Copy, Rows, Planes } mode = Copy;
  int nd = 0;  // outer dims (row or plane enumeration, output order)
  std::array<int64_t, kMaxDims> dim{}, in_stride{}, out_stride{};
  int64_t count = 0;   // elements (Copy), rows (Rows) or planes (Planes)
  int64_t row = 0;     // Rows: elements per row
  int64_t a = 0, b = 0;         // Planes: out-inner extent a, in-inner extent b
  int64_t a_in_stride = 0, b_out_stride = 0;
  int64_t tile = 16;
  int64_t lead = 0;    // extent on dim 0 (kept in place, outermost of the enumeration)
  int64_t active(const RunCtx& ctx, int64_t n) const {
    return lead ? n / lead * ctx.rows(lead) : n;
  }
};

// dst[j * A + i] = src[i * stride + j] for i < A, j < n.
template <int A, class T>
inline void interleave(const T* src, int64_t stride, int64_t n, T* dst) {
  const T* r[A];
  for (int i = 0; i < A; ++i) r[i] = src + i * stride;
  for (int64_t j = 0; j < n; ++j)
    for (int i = 0; i < A; ++i) dst[j * A + i] = r[i][j];
}

template <size_t E>
struct Transpose {
  using T = typename ElemOfSize<E>::T;
  static void fn(const RunCtx& ctx, const void* cfg, void* const* bufs) {
    const auto& c = *static_cast<const TransposeCfg*>(cfg);
    const T* x = static_cast<const T*>(bufs[0]);
    T* y = static_cast<T*>(bufs[1]);
    if (c.mode == TransposeCfg::Copy) {
      const int64_t n = c.active(ctx, c.count);
      auto body = [&](int64_t b, int64_t e) { std::memcpy(y + b, x + b, size_t(e - b) * E); };
      par_for(ctx, n, 65536 / E, body);
      return;
    }
    if (c.mode == TransposeCfg::Rows) {
      auto body = [&](int64_t b, int64_t e) {
        Odometer in;
        in.init(c.nd, c.dim.data(), c.in_stride.data());
        in.seek(b);
        for (int64_t r = b; r < e; ++r, in.next())
          std::memcpy(y + r * c.row, x + in.offset, size_t(c.row) * E);
      };
      par_for(ctx, c.active(ctx, c.count), grain_for(c.row * int64_t(E), 65536), body);
      return;
    }
    // Planes: out[ob + j*b_out_stride + i] = in[ib + i*a_in_stride + j], i < a, j < b.
    if (c.a <= 4 && c.b_out_stride == c.a) {  // a >= 2: merging drops dims of size 1
      // A few input rows interleaved into one contiguous output row (ConvTranspose with
      // kernel == stride lowers to this: [.., 2, 2, h, w] -> [.., h, 2, w, 2]): one pass per
      // plane, every output element written once in order, instead of tiles of a x 32.
      auto body = [&](int64_t b, int64_t e) {
        Odometer in, out;
        in.init(c.nd, c.dim.data(), c.in_stride.data());
        out.init(c.nd, c.dim.data(), c.out_stride.data());
        in.seek(b);
        out.seek(b);
        for (int64_t p = b; p < e; ++p, in.next(), out.next()) {
          const T* src = x + in.offset;
          T* dst = y + out.offset;
          if (c.a == 2) interleave<2>(src, c.a_in_stride, c.b, dst);
          else if (c.a == 3) interleave<3>(src, c.a_in_stride, c.b, dst);
          else interleave<4>(src, c.a_in_stride, c.b, dst);
        }
      };
      par_for(ctx, c.active(ctx, c.count), grain_for(c.a * c.b * int64_t(E), 65536), body);
      return;
    }
    const int64_t T_ = c.tile;
    const int64_t ta = (c.a + T_ - 1) / T_, tb = (c.b + T_ - 1) / T_;
    const int64_t tiles = ta * tb;
    auto body = [&](int64_t b, int64_t e) {
      Odometer in, out;
      in.init(c.nd, c.dim.data(), c.in_stride.data());
      out.init(c.nd, c.dim.data(), c.out_stride.data());
      for (int64_t it = b; it < e; ++it) {
        const int64_t p = it / tiles, t = it % tiles;
        if (it == b || t == 0) {
          in.seek(p);
          out.seek(p);
        }
        const int64_t i0 = (t / tb) * T_, j0 = (t % tb) * T_;
        const int64_t i1 = std::min(c.a, i0 + T_), j1 = std::min(c.b, j0 + T_);
        const T* src = x + in.offset;
        T* dst = y + out.offset;
        // Contiguous writes of each output row segment, strided reads (measured faster
        // here than staging the tile through a buffer).
        for (int64_t j = j0; j < j1; ++j) {
          T* drow = dst + j * c.b_out_stride;
          const T* scol = src + j;
          for (int64_t i = i0; i < i1; ++i) drow[i] = scol[i * c.a_in_stride];
        }
      }
    };
    par_for(ctx, c.active(ctx, c.count) * tiles, 4, body);
  }
};

KernelCall build_transpose(const Node& node, const std::vector<const Shape*>& in,
                           const std::vector<Shape>& out) {
  const auto d = dims_of(*in[0]);
  const int rank = int(d.size());
  std::vector<int64_t> perm = node.attr<TransposeAttrs>().perm;
  if (perm.empty())  // default: reverse the dims
    for (int k = rank - 1; k >= 0; --k) perm.push_back(k);
  if (int(perm.size()) != rank)
    node_fail(ErrorCategory::InvalidArgument, node, "perm has ", perm.size(), " entries for rank ", rank);
  std::vector<bool> seen(rank, false);
  for (auto& p : perm) {
    p = normalize_axis(p, rank, "perm entry");
    if (seen[p]) node_fail(ErrorCategory::InvalidArgument, node, "perm repeats axis ", p);
    seen[p] = true;
  }
  KernelFn fn = by_elem_size<Transpose>(dtype_size(in[0]->dtype()));
  if (!fn) node_fail(ErrorCategory::Unsupported, node, "element size ", dtype_size(in[0]->dtype()));
  TransposeCfg c;
  const int64_t numel = prod(d);
  // An empty tensor moves nothing (so it trivially honours an extent); the row/plane
  // modes below would divide by a merged extent of 0.
  if (numel == 0) {
    c.mode = TransposeCfg::Copy;
    c.count = 0;
    return make_call(fn, c, true);
  }
  const bool extent = rank > 1 && perm[0] == 0 && d[0] > 1;
  // Drop size-1 dims, renumber, then merge input dims p, p+1 that stay adjacent in the
  // output. Under an extent dim 0 stays first in both orders, so it remains the
  // outermost factor of the first merged group and the active rows form a prefix.
  std::vector<int> keep_id(rank, -1);
  std::vector<int64_t> kd;
  for (int i = 0; i < rank; ++i)
    if (d[i] != 1) { keep_id[i] = int(kd.size()); kd.push_back(d[i]); }
  std::vector<int> kp;
  for (int k = 0; k < rank; ++k)
    if (keep_id[perm[k]] >= 0) kp.push_back(keep_id[perm[k]]);
  // Groups in output order: each is a run of consecutive input dims.
  std::vector<std::pair<int, int>> groups;  // [first, last] input dims
  for (int q : kp) {
    if (!groups.empty() && groups.back().second + 1 == q) groups.back().second = q;
    else groups.push_back({q, q});
  }
  // Merged input dims in input order, and the output order of them.
  std::vector<int> order(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) order[g] = int(g);
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return groups[a].first < groups[b].first; });
  const int m = int(groups.size());
  std::vector<int64_t> md(m), in_pos(m);  // merged size per group; input position
  for (int r = 0; r < m; ++r) in_pos[order[r]] = r;
  for (int g = 0; g < m; ++g) {
    md[g] = 1;
    for (int q = groups[g].first; q <= groups[g].second; ++q) md[g] *= kd[q];
  }
  // Row-major strides of the merged input (input order) and output (group order).
  std::vector<int64_t> ist(m), ost(m);
  {
    int64_t s = 1;
    for (int r = m - 1; r >= 0; --r) { ist[order[r]] = s; s *= md[order[r]]; }
    s = 1;
    for (int g = m - 1; g >= 0; --g) { ost[g] = s; s *= md[g]; }
  }
  if (m > kMaxDims + 1) node_fail(ErrorCategory::Unsupported, node, "too many dims after merging");
  if (extent) c.lead = d[0];
  if (m <= 1) {
    c.mode = TransposeCfg::Copy;
    c.count = numel;
  } else if (in_pos[m - 1] == m - 1) {  // innermost input dim stays innermost
    c.mode = TransposeCfg::Rows;
    c.row = md[m - 1];
    c.nd = m - 1;
    for (int g = 0; g < m - 1; ++g) { c.dim[g] = md[g]; c.in_stride[g] = ist[g]; c.out_stride[g] = ost[g]; }
    c.count = numel / c.row;
  } else {
    c.mode = TransposeCfg::Planes;
    const int gb = order[m - 1];  // group holding the innermost input dim
    c.a = md[m - 1];
    c.a_in_stride = ist[m - 1];
    c.b = md[gb];
    c.b_out_stride = ost[gb];
    for (int g = 0; g < m - 1; ++g) {
      if (g == gb) continue;
      c.dim[c.nd] = md[g];
      c.in_stride[c.nd] = ist[g];
      c.out_stride[c.nd] = ost[g];
      ++c.nd;
    }
    c.count = numel / (c.a * c.b);
    const size_t es = dtype_size(in[0]->dtype());
    c.tile = es <= 4 ? 32 : 16;
  }
  const bool ext = c.lead != 0;
  return make_call(fn, c, ext);
}

}  // namespace

void register_transpose_kernel(KernelRegistry& r) { r.add(OpKind::Transpose, build_transpose); }

}  // namespace rlx::cpu::reduce_movement
