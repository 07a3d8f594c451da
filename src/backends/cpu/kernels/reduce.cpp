// reduce_sum / mean / max / min / prod over any set of axes.
//
// The input dims are simplified at build time: size-1 dims are dropped and neighbours
// with the same kept/reduced status are merged. Two loop shapes cover every case:
//   row mode    (innermost merged dim reduced): each output reduces contiguous rows,
//               with 8 lane accumulators combined in a fixed order;
//   column mode (innermost merged dim kept): each output column chunk accumulates
//               rows of the reduced dims in order.
// Determinism: the split of a long row into blocks depends only on the static shape,
// and partials are combined in block order, so results never depend on thread count.
// Floats accumulate in f32 (f64 for F64), integers in int64 (wrapping), complex in
// their own precision. max/min propagate NaN.
#include <algorithm>

#include "backends/cpu/kernels/reduce_movement_common.h"

namespace rlx::cpu {
namespace reduce_movement {
void register_arg_reduce_kernels(KernelRegistry& r);  // reduce_arg.cpp
}

namespace {
using namespace reduce_movement;

constexpr int64_t kLanes = 8;
constexpr int64_t kMaxPartials = 256;  // stack partials per blocked group
constexpr int64_t kMinBlock = 4096;    // elements per block of a long row
constexpr int64_t kColChunk = 256;     // output columns per column-mode work item

template <class A> constexpr bool kIsInt = std::is_same_v<A, int64_t>;

template <class E> struct Sum {
  using A = typename E::A;
  static A init() { return A(0); }
  static A comb(A a, A b) {
    if constexpr (kIsInt<A>) return A(uint64_t(a) + uint64_t(b));
    else return a + b;
  }
  static A finish(A a, int64_t) { return a; }
};
template <class E> struct Mean : Sum<E> {
  using A = typename E::A;
  static A finish(A a, int64_t n) {
    if constexpr (kIsInt<A>) return n ? a / n : A(0);
    else return a / static_cast<typename E::A>(double(n));
  }
};
template <class E> struct Prod {
  using A = typename E::A;
  static A init() { return A(1); }
  static A comb(A a, A b) {
    if constexpr (kIsInt<A>) return A(uint64_t(a) * uint64_t(b));
    else return a * b;
  }
  static A finish(A a, int64_t) { return a; }
};
// max/min: empty reductions give -inf/+inf for floats and the type's limits for ints.
template <class E> struct Max {
  using A = typename E::A;
  static A init() {
    if constexpr (kIsInt<A>) return A(std::numeric_limits<typename E::S>::lowest());
    else return -std::numeric_limits<A>::infinity();
  }
  static A comb(A a, A v) { return (v > a || v != v) ? v : a; }
  static A pick(A a, A v) { return v > a ? v : a; }  // without NaN: vectorizes
  static A finish(A a, int64_t) { return a; }
  static constexpr bool kMinMax = true;
};
template <class E> struct Min {
  using A = typename E::A;
  static A init() {
    if constexpr (kIsInt<A>) return A(std::numeric_limits<typename E::S>::max());
    else return std::numeric_limits<A>::infinity();
  }
  static A comb(A a, A v) { return (v < a || v != v) ? v : a; }
  static A pick(A a, A v) { return v < a ? v : a; }
  static A finish(A a, int64_t) { return a; }
  static constexpr bool kMinMax = true;
};

struct ReduceCfg {
  int nk = 0, nr = 0;  // merged kept / reduced dims, in input order
  std::array<int64_t, kMaxDims> kdim{}, kstride{}, rdim{}, rstride{};
  bool row_mode = true;
  int64_t out_numel = 0, count = 1;
  int64_t block = 0, nblocks = 1;  // row mode with nr == 1: split of a long row
  int64_t lead = 0;                // input dim 0 when extent applies, else 0
  int64_t active_out(const RunCtx& ctx) const {
    return lead ? out_numel / lead * ctx.rows(lead) : out_numel;
  }
};

template <class Op> constexpr bool kMinMaxOp = requires { Op::kMinMax; };

// Reduces a contiguous run with 8 lanes; the lane structure fixes the order.
template <class E, class Op>
typename E::A reduce_contig(const typename E::S* x, int64_t n) {
  using A = typename E::A;
  A lane[kLanes];
  for (auto& l : lane) l = Op::init();
  if constexpr (kMinMaxOp<Op> && std::is_floating_point_v<A>) {
    // NaN tracked as a flag so the max/min lanes stay branch-free.
    int nan = 0;
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (int64_t j = 0; j < kLanes; ++j) {
        const A v = E::load(x[i + j]);
        nan |= v != v;
        lane[j] = Op::pick(lane[j], v);
      }
    for (int64_t j = 0; i < n; ++i, ++j) {
      const A v = E::load(x[i]);
      nan |= v != v;
      lane[j] = Op::pick(lane[j], v);
    }
    if (nan) return std::numeric_limits<A>::quiet_NaN();
  } else {
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (int64_t j = 0; j < kLanes; ++j) lane[j] = Op::comb(lane[j], E::load(x[i + j]));
    for (int64_t j = 0; i < n; ++i, ++j) lane[j] = Op::comb(lane[j], E::load(x[i]));
  }
  A a = Op::comb(Op::comb(lane[0], lane[1]), Op::comb(lane[2], lane[3]));
  A b = Op::comb(Op::comb(lane[4], lane[5]), Op::comb(lane[6], lane[7]));
  return Op::comb(a, b);
}

template <class E, class Op>
void run_rows(const RunCtx& ctx, const ReduceCfg& c, const typename E::S* x, typename E::S* y,
              int64_t n_out) {
  using A = typename E::A;
  const int64_t len = c.rdim[c.nr - 1];
  if (c.nr == 1 && c.nblocks > 1) {
    // Long rows: blocks of one group of outputs in parallel, then combine in order.
    const int64_t per_group = std::max<int64_t>(1, kMaxPartials / c.nblocks);
    A part[kMaxPartials];
    for (int64_t g0 = 0; g0 < n_out; g0 += per_group) {
      const int64_t g1 = std::min(n_out, g0 + per_group);
      auto body = [&](int64_t b, int64_t e) {
        Odometer ko;
        ko.init(c.nk, c.kdim.data(), c.kstride.data());
        for (int64_t it = b; it < e; ++it) {
          const int64_t o = g0 + it / c.nblocks, blk = it % c.nblocks;
          ko.seek(o);
          const int64_t s = blk * c.block, n = std::min(len, s + c.block) - s;
          part[it] = reduce_contig<E, Op>(x + ko.offset + s, n);
        }
      };
      par_for(ctx, (g1 - g0) * c.nblocks, 1, body);
      for (int64_t o = g0; o < g1; ++o) {
        const A* p = part + (o - g0) * c.nblocks;
        A acc = p[0];
        for (int64_t blk = 1; blk < c.nblocks; ++blk) acc = Op::comb(acc, p[blk]);
        y[o] = E::store(Op::finish(acc, c.count));
      }
    }
    return;
  }
  auto body = [&](int64_t b, int64_t e) {
    Odometer ko, ro;
    ko.init(c.nk, c.kdim.data(), c.kstride.data());
    ro.init(c.nr - 1, c.rdim.data(), c.rstride.data());
    const int64_t outer_r = c.count / len;
    ko.seek(b);
    for (int64_t o = b; o < e; ++o, ko.next()) {
      A acc = Op::init();
      ro.seek(0);
      for (int64_t r = 0; r < outer_r; ++r, ro.next())
        acc = Op::comb(acc, reduce_contig<E, Op>(x + ko.offset + ro.offset, len));
      y[o] = E::store(Op::finish(acc, c.count));
    }
  };
  par_for(ctx, n_out, grain_for(c.count), body);
}

template <class E, class Op>
void run_cols(const RunCtx& ctx, const ReduceCfg& c, const typename E::S* x, typename E::S* y,
              int64_t n_out) {
  using A = typename E::A;
  const int64_t cols = c.kdim[c.nk - 1];
  const int64_t chunks = (cols + kColChunk - 1) / kColChunk;
  const int64_t items = n_out / cols * chunks;
  auto body = [&](int64_t b, int64_t e) {
    Odometer ko, ro;
    ko.init(c.nk - 1, c.kdim.data(), c.kstride.data());
    ro.init(c.nr, c.rdim.data(), c.rstride.data());
    A acc[kColChunk];
    for (int64_t it = b; it < e; ++it) {
      const int64_t p = it / chunks, c0 = (it % chunks) * kColChunk;
      const int64_t w = std::min(kColChunk, cols - c0);
      ko.seek(p);
      const typename E::S* base = x + ko.offset + c0;
      for (int64_t j = 0; j < w; ++j) acc[j] = Op::init();
      if (c.nr == 1) {
        // Four rows per pass over acc (same order per column: r, r+1, r+2, r+3).
        const int64_t rs = c.rstride[0];
        int64_t r = 0;
        for (; r + 4 <= c.count; r += 4) {
          const typename E::S* r0 = base + r * rs;
          const typename E::S *r1 = r0 + rs, *r2 = r1 + rs, *r3 = r2 + rs;
          for (int64_t j = 0; j < w; ++j)
            acc[j] = Op::comb(Op::comb(Op::comb(Op::comb(acc[j], E::load(r0[j])), E::load(r1[j])),
                                       E::load(r2[j])),
                              E::load(r3[j]));
        }
        for (; r < c.count; ++r) {
          const typename E::S* row = base + r * rs;
          for (int64_t j = 0; j < w; ++j) acc[j] = Op::comb(acc[j], E::load(row[j]));
        }
      } else {
        ro.seek(0);
        for (int64_t r = 0; r < c.count; ++r, ro.next()) {
          const typename E::S* row = base + ro.offset;
          for (int64_t j = 0; j < w; ++j) acc[j] = Op::comb(acc[j], E::load(row[j]));
        }
      }
      typename E::S* out = y + p * cols + c0;
      for (int64_t j = 0; j < w; ++j) out[j] = E::store(Op::finish(acc[j], c.count));
    }
  };
  par_for(ctx, items, grain_for(c.count * std::min(cols, kColChunk)), body);
}

template <class E, template <class> class OpT>
void run_reduce(const RunCtx& ctx, const void* cfg, void* const* bufs) {
  using Op = OpT<E>;
  const auto& c = *static_cast<const ReduceCfg*>(cfg);
  const auto* x = static_cast<const typename E::S*>(bufs[0]);
  auto* y = static_cast<typename E::S*>(bufs[1]);
  const int64_t n_out = c.active_out(ctx);
  if (n_out <= 0) return;
  if (c.count == 0) {  // reduction over an empty set: the identity of the op
    const auto v = E::store(Op::finish(Op::init(), 0));
    std::fill(y, y + n_out, v);
  } else if (c.nr == 0) {  // nothing reduced: a (finished) copy
    for (int64_t i = 0; i < n_out; ++i) y[i] = E::store(Op::finish(E::load(x[i]), 1));
  } else if (c.row_mode) {
    run_rows<E, Op>(ctx, c, x, y, n_out);
  } else {
    run_cols<E, Op>(ctx, c, x, y, n_out);
  }
}

template <template <class> class OpT, bool kComplex, bool kBool>
KernelFn pick_reduce(DType t) {
  KernelFn fn = nullptr;
  if (t == DType::Bool && !kBool) return nullptr;
  auto pick = [&](auto e) { fn = &run_reduce<decltype(e), OpT>; };
  if constexpr (kComplex) visit_any(t, pick);
  else visit_real(t, pick);
  return fn;
}

KernelFn reduce_fn(OpKind k, DType t) {
  switch (k) {
    case OpKind::ReduceSum: return pick_reduce<Sum, true, true>(t);
    case OpKind::ReduceMean: return pick_reduce<Mean, true, false>(t);
    case OpKind::ReduceProd: return pick_reduce<Prod, true, true>(t);
    case OpKind::ReduceMax: return pick_reduce<Max, false, true>(t);
    case OpKind::ReduceMin: return pick_reduce<Min, false, true>(t);
    default: return nullptr;
  }
}

bool reduce_supports(const Node& node, const std::vector<const Shape*>& in) {
  return !in.empty() && in[0] && reduce_fn(node.kind, in[0]->dtype()) != nullptr;
}

KernelCall build_reduce(const Node& node, const std::vector<const Shape*>& in,
                        const std::vector<Shape>& out) {
  const auto& at = node.attr<ReduceAttrs>();
  const Shape& xs = *in[0];
  const auto d = dims_of(xs);
  const int rank = int(d.size());
  std::vector<bool> red(rank, at.axes.empty());
  for (int64_t a : at.axes) red[normalize_axis(a, rank, "reduce axis")] = true;

  ReduceCfg c;
  c.out_numel = out[0].numel();
  for (int i = 0; i < rank; ++i)
    if (red[i]) c.count *= d[i];
  // Merge: drop size-1 dims, join neighbours of the same kind.
  const auto st = row_major_strides(d);
  int last = -1;  // 0 kept, 1 reduced
  for (int i = 0; i < rank; ++i) {
    if (d[i] == 1) continue;
    const int kind = red[i] ? 1 : 0;
    auto& dims = kind ? c.rdim : c.kdim;
    auto& strides = kind ? c.rstride : c.kstride;
    int& n = kind ? c.nr : c.nk;
    if (kind == last) {
      dims[n - 1] *= d[i];
      strides[n - 1] = st[i];
    } else {
      if (n == kMaxDims) node_fail(ErrorCategory::Unsupported, node, "too many alternating axes");
      dims[n] = d[i];
      strides[n] = st[i];
      ++n;
    }
    last = kind;
  }
  c.row_mode = last == 1;
  if (c.count > 0 && c.nr > 0 && c.row_mode && c.nr == 1) {
    const int64_t len = c.rdim[0];
    const int64_t blk = std::max(kMinBlock, (len / 64 + kLanes) / kLanes * kLanes);
    c.nblocks = (len + blk - 1) / blk;
    c.block = blk;
  }
  bool extent = rank > 0 && !red[0] && d[0] > 1;
  if (extent) c.lead = d[0];
  KernelFn fn = reduce_fn(node.kind, xs.dtype());
  if (!fn) node_fail(ErrorCategory::Unsupported, node, "dtype ", dtype_name(xs.dtype()));
  return make_call(fn, c, extent);
}

}  // namespace

void register_reduce_kernels(KernelRegistry& r) {
  for (OpKind k : {OpKind::ReduceSum, OpKind::ReduceMean, OpKind::ReduceMax, OpKind::ReduceMin,
                   OpKind::ReduceProd})
    r.add(k, build_reduce, reduce_supports);
  reduce_movement::register_arg_reduce_kernels(r);
}

}  // namespace rlx::cpu
