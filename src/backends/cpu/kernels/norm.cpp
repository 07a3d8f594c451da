// softmax / log_softmax over any axis, layer_norm and rms_norm over [axis, rank).
// Contiguous rows (softmax on the last axis, every norm) go through the row functions of
// norm_rows.h (SIMD for f32); F16/BF16 rows are widened to f32 in a per-thread buffer.
// Softmax over an inner axis walks column chunks and keeps per-column running values.
// Work is split by rows only, so results are identical for any thread count.
#include "backends/cpu/kernels/norm_rows.h"
#include "backends/cpu/kernels/reduce_movement_common.h"

namespace rlx::cpu {
namespace {
using namespace reduce_movement;

constexpr int64_t kColChunk = 64;

template <class E> constexpr bool kWide = std::is_same_v<typename E::S, typename E::A>;

// Rows of f32 (or f64) for the compute type of E, for the ISA chosen at build time.
template <class A> const NormRows<A>& rows_for(Isa isa) {
  if constexpr (std::is_same_v<A, double>) return norm_rows_f64();
  else return norm_rows_f32(isa);
}

// Per-thread scratch of the compute type; grows once, reused by later runs.
template <class A> A* scratch(int slot, int64_t n) {
  thread_local std::vector<A> buf[4];
  if (int64_t(buf[slot].size()) < n) buf[slot].resize(size_t(n));
  return buf[slot].data();
}

struct SoftmaxCfg {
  int64_t outer = 1, n = 1, inner = 1, lead = 0;
  bool log = false;
  Isa isa = Isa::Scalar;
  int64_t active_outer(const RunCtx& ctx) const {
    return lead ? outer / lead * ctx.rows(lead) : outer;
  }
};

template <class E>
void softmax_rows(const RunCtx& ctx, const SoftmaxCfg& c, const typename E::S* x,
                  typename E::S* y) {
  using A = typename E::A;
  const auto& rf = rows_for<A>(c.isa);
  const auto fn = c.log ? rf.log_softmax : rf.softmax;
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      const typename E::S* xr = x + o * c.n;
      typename E::S* yr = y + o * c.n;
      if constexpr (kWide<E>) {
        fn(xr, yr, c.n);
      } else {
        A* t = scratch<A>(0, c.n);
        for (int64_t i = 0; i < c.n; ++i) t[i] = E::load(xr[i]);
        fn(t, t, c.n);
        for (int64_t i = 0; i < c.n; ++i) yr[i] = E::store(t[i]);
      }
    }
  };
  par_for(ctx, c.active_outer(ctx), grain_for(c.n * 4), body);
}

template <class E>
void softmax_cols(const RunCtx& ctx, const SoftmaxCfg& c, const typename E::S* x,
                  typename E::S* y) {
  using A = typename E::A;
  const int64_t chunks = (c.inner + kColChunk - 1) / kColChunk;
  auto body = [&](int64_t b, int64_t e) {
    A mx[kColChunk], sm[kColChunk];
    for (int64_t it = b; it < e; ++it) {
      const int64_t o = it / chunks, c0 = (it % chunks) * kColChunk;
      const int64_t w = std::min(kColChunk, c.inner - c0);
      const int64_t base = o * c.n * c.inner + c0;
      for (int64_t j = 0; j < w; ++j) { mx[j] = -std::numeric_limits<A>::infinity(); sm[j] = 0; }
      for (int64_t r = 0; r < c.n; ++r)
        for (int64_t j = 0; j < w; ++j) {
          const A v = E::load(x[base + r * c.inner + j]);
          mx[j] = v > mx[j] ? v : mx[j];
        }
      for (int64_t r = 0; r < c.n; ++r)
        for (int64_t j = 0; j < w; ++j) sm[j] += std::exp(E::load(x[base + r * c.inner + j]) - mx[j]);
      if (c.log)
        for (int64_t j = 0; j < w; ++j) sm[j] = std::log(sm[j]);
      for (int64_t r = 0; r < c.n; ++r)
        for (int64_t j = 0; j < w; ++j) {
          const int64_t at = base + r * c.inner + j;
          const A d = E::load(x[at]) - mx[j];
          y[at] = E::store(c.log ? d - sm[j] : std::exp(d) / sm[j]);
        }
    }
  };
  par_for(ctx, c.active_outer(ctx) * chunks, grain_for(c.n * kColChunk * 4), body);
}

template <class E>
void run_softmax(const RunCtx& ctx, const void* cfg, void* const* bufs) {
  const auto& c = *static_cast<const SoftmaxCfg*>(cfg);
  const auto* x = static_cast<const typename E::S*>(bufs[0]);
  auto* y = static_cast<typename E::S*>(bufs[1]);
  if (c.n == 0) return;
  if (c.inner == 1) softmax_rows<E>(ctx, c, x, y);
  else softmax_cols<E>(ctx, c, x, y);
}

KernelCall build_softmax(const Node& node, const std::vector<const Shape*>& in,
                         const std::vector<Shape>& out) {
  const auto d = dims_of(*in[0]);
  SoftmaxCfg c;
  c.log = node.kind == OpKind::LogSoftmax;
  c.isa = detect_isa();
  bool extent = false;
  if (!d.empty()) {
    const int axis = normalize_axis(node.attr<AxisAttrs>().axis, int(d.size()), "softmax axis");
    c.outer = prod(d, 0, axis);
    c.n = d[axis];
    c.inner = prod(d, axis + 1);
    extent = axis > 0 && d[0] > 1;
    if (extent) c.lead = d[0];
  }
  KernelFn fn = nullptr;
  visit_float(in[0]->dtype(), [&](auto e) { fn = &run_softmax<decltype(e)>; });
  if (!fn) node_fail(ErrorCategory::Unsupported, node, "dtype ", dtype_name(in[0]->dtype()));
  return make_call(fn, c, extent);
}

// ---- layer_norm / rms_norm
double load_as_double(const void* p, DType t, int64_t i) {
  double v = 0;
  visit_float(t, [&](auto e) {
    using E = decltype(e);
    v = double(E::load(static_cast<const typename E::S*>(p)[i]));
  });
  return v;
}

struct NormCfg {
  int64_t outer = 1, n = 1, lead = 0;
  int nin = 1;  // node inputs; the output follows them in bufs
  double eps = 1e-5;
  bool rms = false;
  Isa isa = Isa::Scalar;
  DType scale_t = DType::F32, bias_t = DType::F32;
  // Element of scale / bias for each normalized position; empty when it is the identity.
  std::vector<int64_t> scale_map, bias_map;
  bool scale_direct = false, bias_direct = false;  // usable as A* without conversion
  int64_t active_outer(const RunCtx& ctx) const {
    return lead ? outer / lead * ctx.rows(lead) : outer;
  }
};

// Returns p as A* when direct, else widens it (through the map) into scratch `slot`.
template <class A>
const A* param_row(const void* p, DType t, const std::vector<int64_t>& map, bool direct,
                   int64_t n, int slot) {
  if (!p) return nullptr;
  if (direct) return static_cast<const A*>(p);
  A* s = scratch<A>(slot, n);
  for (int64_t i = 0; i < n; ++i) s[i] = A(load_as_double(p, t, map.empty() ? i : map[i]));
  return s;
}

template <class E>
void run_norm(const RunCtx& ctx, const void* cfg, void* const* bufs) {
  using A = typename E::A;
  const auto& c = *static_cast<const NormCfg*>(cfg);
  const auto* x = static_cast<const typename E::S*>(bufs[0]);
  const void* sp = c.nin > 1 ? bufs[1] : nullptr;
  const void* bp = c.nin > 2 && !c.rms ? bufs[2] : nullptr;
  auto* y = static_cast<typename E::S*>(bufs[c.nin]);
  const auto& rf = rows_for<A>(c.isa);
  const A eps = A(c.eps);
  auto body = [&](int64_t b, int64_t e) {
    const A* s = param_row<A>(sp, c.scale_t, c.scale_map, c.scale_direct, c.n, 1);
    const A* bi = param_row<A>(bp, c.bias_t, c.bias_map, c.bias_direct, c.n, 2);
    for (int64_t o = b; o < e; ++o) {
      const typename E::S* xr = x + o * c.n;
      typename E::S* yr = y + o * c.n;
      if constexpr (kWide<E>) {
        if (c.rms) rf.rms_norm(xr, yr, c.n, s, eps);
        else rf.layer_norm(xr, yr, c.n, s, bi, eps);
      } else {
        A* t = scratch<A>(0, c.n);
        for (int64_t i = 0; i < c.n; ++i) t[i] = E::load(xr[i]);
        if (c.rms) rf.rms_norm(t, t, c.n, s, eps);
        else rf.layer_norm(t, t, c.n, s, bi, eps);
        for (int64_t i = 0; i < c.n; ++i) yr[i] = E::store(t[i]);
      }
    }
  };
  if (c.n > 0) par_for(ctx, c.active_outer(ctx), grain_for(c.n * 4), body);
}

// Maps each position of the normalized dims `nd` to an element of a parameter of
// shape `pd` (numpy broadcasting, right-aligned). Sets `identity` when no map is needed.
std::vector<int64_t> broadcast_map(const Node& node, const char* what,
                                   const std::vector<int64_t>& pd,
                                   const std::vector<int64_t>& nd, bool& identity) {
  std::vector<int64_t> p = pd;
  while (p.size() > nd.size()) {
    if (p.front() != 1)
      node_fail(ErrorCategory::Shape, node, what, " does not broadcast to the normalized dims");
    p.erase(p.begin());
  }
  p.insert(p.begin(), nd.size() - p.size(), 1);
  identity = true;
  for (size_t i = 0; i < nd.size(); ++i) {
    if (p[i] != nd[i] && p[i] != 1)
      node_fail(ErrorCategory::Shape, node, what, " does not broadcast to the normalized dims");
    if (p[i] != nd[i]) identity = false;
  }
  if (identity) return {};
  const auto ps = row_major_strides(p);
  const int64_t n = prod(nd);
  std::vector<int64_t> map(static_cast<size_t>(n));
  std::vector<int64_t> idx(nd.size(), 0);
  for (int64_t f = 0; f < n; ++f) {
    int64_t off = 0;
    for (size_t i = 0; i < nd.size(); ++i)
      if (p[i] != 1) off += idx[i] * ps[i];
    map[size_t(f)] = off;
    for (int i = int(nd.size()) - 1; i >= 0; --i) {
      if (++idx[i] < nd[i]) break;
      idx[i] = 0;
    }
  }
  return map;
}

KernelCall build_norm(const Node& node, const std::vector<const Shape*>& in,
                      const std::vector<Shape>& out) {
  const auto& at = node.attr<NormAttrs>();
  const auto d = dims_of(*in[0]);
  const DType t = in[0]->dtype();
  NormCfg c;
  c.rms = node.kind == OpKind::RmsNorm;
  c.nin = int(in.size());
  c.eps = at.epsilon;
  c.isa = detect_isa();
  bool extent = false;
  int axis = 0;
  if (!d.empty()) {
    axis = normalize_axis(at.axis, int(d.size()), "norm axis");
    c.outer = prod(d, 0, axis);
    c.n = prod(d, axis);
    extent = axis > 0 && d[0] > 1;
    if (extent) c.lead = d[0];
  }
  const std::vector<int64_t> nd(d.begin() + axis, d.end());
  const DType wide = t == DType::F64 ? DType::F64 : DType::F32;
  auto setup = [&](int i, const char* what, DType& pt, std::vector<int64_t>& map, bool& direct) {
    if (int(in.size()) <= i || !in[i]) return;
    pt = in[i]->dtype();
    if (!is_float(pt)) node_fail(ErrorCategory::Unsupported, node, what, " dtype ", dtype_name(pt));
    bool identity = false;
    map = broadcast_map(node, what, dims_of(*in[i]), nd, identity);
    direct = identity && pt == wide;
  };
  setup(1, "scale", c.scale_t, c.scale_map, c.scale_direct);
  if (!c.rms) setup(2, "bias", c.bias_t, c.bias_map, c.bias_direct);
  KernelFn fn = nullptr;
  visit_float(t, [&](auto e) { fn = &run_norm<decltype(e)>; });
  if (!fn) node_fail(ErrorCategory::Unsupported, node, "dtype ", dtype_name(t));
  return make_call(fn, std::move(c), extent);
}

bool float_input(const Node&, const std::vector<const Shape*>& in) {
  if (in.empty() || !in[0] || !is_float(in[0]->dtype())) return false;
  for (size_t i = 1; i < in.size(); ++i)
    if (in[i] && !is_float(in[i]->dtype())) return false;
  return true;
}

}  // namespace

void register_norm_kernels(KernelRegistry& r) {
  r.add(OpKind::Softmax, build_softmax, float_input);
  r.add(OpKind::LogSoftmax, build_softmax, float_input);
  r.add(OpKind::LayerNorm, build_norm, float_input);
  r.add(OpKind::RmsNorm, build_norm, float_input);
  for (OpKind k : {OpKind::Softmax, OpKind::LogSoftmax, OpKind::LayerNorm, OpKind::RmsNorm})
    r.add_prefers_f32(k, any_half_input);
}

}  // namespace rlx::cpu
