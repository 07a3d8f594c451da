// argmax / argmin (I64 output, select_last_index) and topk (values + I64 indices).
//
// Ordering: NaN compares greater than every number, so argmax/argmin both return the
// first NaN (last with select_last_index), matching numpy; topk puts NaNs first when
// largest and last when smallest. Equal values keep the lower index first (ONNX), and
// topk always returns its k results sorted, also when sorted=false.
#include <algorithm>

#include "backends/cpu/kernels/reduce_movement_common.h"

namespace rlx::cpu::reduce_movement {
namespace {

constexpr int64_t kColChunk = 256;

template <class A> bool is_nan(A v) {
  if constexpr (std::is_floating_point_v<A>) return v != v;
  else return false;
}

struct ArgCfg {
  int64_t outer = 1, n = 0, inner = 1;
  bool select_last = false;
  int64_t lead = 0;  // input dim 0 when the extent applies (outer's leading factor)
  int64_t active_outer(const RunCtx& ctx) const {
    return lead ? outer / lead * ctx.rows(lead) : outer;
  }
};

// True when v should replace the current best b (index order: v comes later).
template <bool kMax, class A> bool better(A v, A b, bool last) {
  if (is_nan(b)) return last && is_nan(v);
  if (is_nan(v)) return true;
  if (kMax ? v > b : v < b) return true;
  return last && v == b;
}

// Contiguous row: a branch-free pass finds the extreme value (and whether a NaN is
// present), a second pass finds its first (or last) index.
template <class E, bool kMax>
int64_t arg_row(const typename E::S* row, int64_t n, bool last) {
  using A = typename E::A;
  A lane[8];
  for (auto& l : lane) l = E::load(row[0]);
  int nan = 0;
  for (int64_t i = 0; i < n; i += 8) {
    const int64_t w = std::min<int64_t>(8, n - i);
    for (int64_t j = 0; j < w; ++j) {
      const A v = E::load(row[i + j]);
      nan |= is_nan(v);
      lane[j] = (kMax ? v > lane[j] : v < lane[j]) ? v : lane[j];
    }
  }
  A best = lane[0];
  for (int j = 1; j < 8; ++j) best = (kMax ? lane[j] > best : lane[j] < best) ? lane[j] : best;
  auto hit = [&](int64_t i) {
    const A v = E::load(row[i]);
    return nan ? is_nan(v) : v == best;
  };
  if (last) {
    for (int64_t i = n - 1; i > 0; --i)
      if (hit(i)) return i;
    return 0;
  }
  for (int64_t i = 0; i < n; ++i)
    if (hit(i)) return i;
  return 0;
}

template <class E, bool kMax>
void run_arg(const RunCtx& ctx, const void* cfg, void* const* bufs) {
  using A = typename E::A;
  const auto& c = *static_cast<const ArgCfg*>(cfg);
  const auto* x = static_cast<const typename E::S*>(bufs[0]);
  auto* y = static_cast<int64_t*>(bufs[1]);
  const int64_t outer = c.active_outer(ctx);
  if (c.inner == 1) {
    auto body = [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) y[o] = arg_row<E, kMax>(x + o * c.n, c.n, c.select_last);
    };
    par_for(ctx, outer, grain_for(c.n), body);
    return;
  }
  // Strided axis: chunks of columns scan the axis row by row.
  const int64_t chunks = (c.inner + kColChunk - 1) / kColChunk;
  auto body = [&](int64_t b, int64_t e) {
    A best[kColChunk];
    int64_t bi[kColChunk];
    for (int64_t it = b; it < e; ++it) {
      const int64_t o = it / chunks, c0 = (it % chunks) * kColChunk;
      const int64_t w = std::min(kColChunk, c.inner - c0);
      const typename E::S* base = x + o * c.n * c.inner + c0;
      for (int64_t j = 0; j < w; ++j) { best[j] = E::load(base[j]); bi[j] = 0; }
      for (int64_t i = 1; i < c.n; ++i) {
        const typename E::S* row = base + i * c.inner;
        for (int64_t j = 0; j < w; ++j) {
          const A v = E::load(row[j]);
          if (better<kMax>(v, best[j], c.select_last)) { best[j] = v; bi[j] = i; }
        }
      }
      std::copy(bi, bi + w, y + o * c.inner + c0);
    }
  };
  par_for(ctx, outer * chunks, grain_for(c.n * std::min(c.inner, kColChunk)), body);
}

// Splits dims around `axis` into outer / n / inner.
void split_around(const std::vector<int64_t>& d, int axis, int64_t& outer, int64_t& n,
                  int64_t& inner) {
  outer = prod(d, 0, axis);
  n = d[axis];
  inner = prod(d, axis + 1);
}

KernelCall build_arg(const Node& node, const std::vector<const Shape*>& in,
                     const std::vector<Shape>& out) {
  const auto& at = node.attr<ArgReduceAttrs>();
  const auto d = dims_of(*in[0]);
  if (d.empty()) {  // a scalar: the only index is 0
    ArgCfg c;
    c.n = 1;
    KernelFn fn = nullptr;
    visit_real(in[0]->dtype(), [&](auto e) {
      fn = node.kind == OpKind::ArgMax ? &run_arg<decltype(e), true> : &run_arg<decltype(e), false>;
    });
    if (!fn) node_fail(ErrorCategory::Unsupported, node, "dtype ", dtype_name(in[0]->dtype()));
    return make_call(fn, c);
  }
  const int axis = normalize_axis(at.axis, int(d.size()), "argmax/argmin axis");
  ArgCfg c;
  split_around(d, axis, c.outer, c.n, c.inner);
  c.select_last = at.select_last_index;
  if (c.n == 0 && c.outer * c.inner > 0)
    node_fail(ErrorCategory::InvalidArgument, node, "reduced axis ", axis, " is empty");
  const bool extent = axis > 0 && d[0] > 1;
  if (extent) c.lead = d[0];
  KernelFn fn = nullptr;
  visit_real(in[0]->dtype(), [&](auto e) {
    fn = node.kind == OpKind::ArgMax ? &run_arg<decltype(e), true> : &run_arg<decltype(e), false>;
  });
  if (!fn) node_fail(ErrorCategory::Unsupported, node, "dtype ", dtype_name(in[0]->dtype()));
  return make_call(fn, c, extent);
}

// ---- topk
struct TopKCfg {
  int64_t outer = 1, n = 0, inner = 1, k = 0;
  bool largest = true;
  int64_t lead = 0;
  int64_t active_outer(const RunCtx& ctx) const {
    return lead ? outer / lead * ctx.rows(lead) : outer;
  }
};

template <class E>
void run_topk(const RunCtx& ctx, const void* cfg, void* const* bufs) {
  using A = typename E::A;
  const auto& c = *static_cast<const TopKCfg*>(cfg);
  const auto* x = static_cast<const typename E::S*>(bufs[0]);
  auto* vals = static_cast<typename E::S*>(bufs[1]);
  auto* idxs = static_cast<int64_t*>(bufs[2]);
  const int64_t rows = c.active_outer(ctx) * c.inner;
  if (c.k == 0) return;
  auto body = [&](int64_t b, int64_t e) {
    // Per-thread scratch, reused across runs so steady-state runs do not allocate.
    thread_local std::vector<A> key;
    thread_local std::vector<int64_t> ord;
    key.resize(size_t(c.n));
    ord.resize(size_t(c.n));
    const bool largest = c.largest;
    auto before = [&](int64_t a, int64_t b2) {
      const A ka = key[a], kb = key[b2];
      const bool na = is_nan(ka), nb = is_nan(kb);
      if (na || nb) {
        if (na && nb) return a < b2;
        return largest ? na : nb;
      }
      if (ka != kb) return largest ? ka > kb : ka < kb;
      return a < b2;
    };
    for (int64_t r = b; r < e; ++r) {
      const int64_t o = r / c.inner, i = r % c.inner;
      const typename E::S* src = x + o * c.n * c.inner + i;
      for (int64_t j = 0; j < c.n; ++j) {
        key[j] = E::load(src[j * c.inner]);
        ord[j] = j;
      }
      if (c.k < c.n) std::partial_sort(ord.begin(), ord.begin() + c.k, ord.end(), before);
      else std::sort(ord.begin(), ord.end(), before);
      typename E::S* vo = vals + o * c.k * c.inner + i;
      int64_t* io = idxs + o * c.k * c.inner + i;
      for (int64_t j = 0; j < c.k; ++j) {
        vo[j * c.inner] = src[ord[j] * c.inner];
        io[j * c.inner] = ord[j];
      }
    }
  };
  par_for(ctx, rows, grain_for(c.n * 8), body);
}

KernelCall build_topk(const Node& node, const std::vector<const Shape*>& in,
                      const std::vector<Shape>& out) {
  const auto& at = node.attr<TopKAttrs>();
  const auto d = dims_of(*in[0]);
  if (d.empty()) node_fail(ErrorCategory::InvalidArgument, node, "topk needs rank >= 1");
  const int axis = normalize_axis(at.axis, int(d.size()), "topk axis");
  TopKCfg c;
  split_around(d, axis, c.outer, c.n, c.inner);
  c.k = at.k;
  c.largest = at.largest;
  if (c.k < 0 || c.k > c.n)
    node_fail(ErrorCategory::InvalidArgument, node, "k=", c.k, " outside [0, ", c.n, "]");
  const bool extent = axis > 0 && d[0] > 1;
  if (extent) c.lead = d[0];
  KernelFn fn = nullptr;
  visit_real(in[0]->dtype(), [&](auto e) { fn = &run_topk<decltype(e)>; });
  if (!fn) node_fail(ErrorCategory::Unsupported, node, "dtype ", dtype_name(in[0]->dtype()));
  return make_call(fn, c, extent);
}

bool real_input(const Node&, const std::vector<const Shape*>& in) {
  return !in.empty() && in[0] && !is_complex(in[0]->dtype());
}

}  // namespace

void register_arg_reduce_kernels(KernelRegistry& r) {
  r.add(OpKind::ArgMax, build_arg, real_input);
  r.add(OpKind::ArgMin, build_arg, real_input);
  r.add(OpKind::TopK, build_topk, real_input);
}

}  // namespace rlx::cpu::reduce_movement
