// max/avg pooling (NCHW, stride, pads [top, left, bottom, right], dilation, ceil mode,
// count_include_pad): each output row's and column's window taps found once at build; f32 max
// pools fold their windows in registers (RowKernels), ResNet's 3x3 / 2 window separably; half
// types pool as f32 planes.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernel.h"
#include "backends/cpu/kernels/conv_element.h"
#include "backends/cpu/kernels/elementwise_types.h"
#include "backends/cpu/kernels/row_kernels.h"
#include "backends/cpu/thread_pool.h"
#include "ir/op_table.h"

namespace rlx::cpu {
namespace {

using namespace conv_element;

// Taps of one window along an axis (tap t sits at start + t*d): [lo, hi) fall inside the
// input; `padded` counts those inside input + padding (ceil mode can put taps past the
// trailing padding, which never count).
struct Taps {
  int64_t lo, hi, padded;
};

struct PoolCfg {
  DType type = DType::F32;
  bool is_max = true, count_include_pad = false;
  int64_t planes = 0, h = 0, w = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, pt = 0, pl = 0, pb = 0, pr = 0, dh = 1, dw = 1;
  // Each output row's and column's window taps, computed once at build: finding them takes
  // divisions that cost more than the window's few compares (ResNet-50's 3x3 max pool ran
  // at a tenth of the speed that way).
  std::vector<Taps> rows, cols;
  std::vector<int64_t> tap_cols;  // per kx: [lo, hi) of the output columns whose window reads tap kx inside the input
  ew::ConvertFn to_f32 = nullptr, from_f32 = nullptr;  // half types: whole planes converted
  const RowKernels* vec = nullptr;  // f32 max pooling's window in registers (max_taps)
  // A 3-wide window from one column left of each stride-2 step (ResNet's pool): each input row
  // folds in registers (RowKernels::max3_s2, the same taps in the same order), no phase rows.
  bool max3_s2 = false;
};

template <class T> using PoolAcc = std::conditional_t<std::is_integral_v<T>, T, AccOf<T>>;
template <class T> inline PoolAcc<T> pload(const T* p) {
  if constexpr (std::is_integral_v<T>) return *p;
  else return load(p);
}
template <class T> inline void pstore(T* p, PoolAcc<T> v) {
  if constexpr (std::is_integral_v<T>) *p = v;
  else store(p, v);
}

inline Taps window_taps(int64_t start, int64_t k, int64_t d, int64_t n, int64_t pad_begin, int64_t pad_end) {
  auto first_at_least = [&](int64_t bound) { return bound <= start ? int64_t(0) : (bound - start + d - 1) / d; };
  const int64_t lo = std::min(k, first_at_least(0)), hi = std::max(lo, std::min(k, first_at_least(n)));
  const int64_t plo = std::min(k, first_at_least(-pad_begin));
  const int64_t phi = std::max(plo, std::min(k, first_at_least(n + pad_end)));
  return {lo, hi, phi - plo};
}

// Row by row: for each output row, each tap (ky, kx) updates the whole run of output
// columns whose window holds it (cfg.tap_cols), so consecutive updates are independent
// (the per-window loop was one dependent chain of compare-selects, ~10 cycles a tap).
template <class T>
void pool_plane(const PoolCfg& c, const T* x, T* o) {
  using Acc = PoolAcc<T>;
  thread_local std::vector<Acc> acc;
  acc.resize(size_t(c.ow));
  const Acc lowest = std::numeric_limits<Acc>::has_infinity ? -std::numeric_limits<Acc>::infinity()
                                                            : std::numeric_limits<Acc>::lowest();
  for (int64_t oy = 0; oy < c.oh; ++oy) {
    const int64_t y0 = oy * c.sh - c.pt;
    const Taps& ty = c.rows[size_t(oy)];
    std::fill(acc.begin(), acc.end(), c.is_max ? lowest : Acc(0));
    for (int64_t ky = ty.lo; ky < ty.hi; ++ky) {
      const T* row = x + (y0 + ky * c.dh) * c.w;
      for (int64_t kx = 0; kx < c.kw; ++kx) {
        const int64_t lo = c.tap_cols[size_t(2 * kx)], hi = c.tap_cols[size_t(2 * kx + 1)];
        const int64_t off = kx * c.dw - c.pl;  // input column of output column ox: ox * sw + off
        if (c.is_max) {
          for (int64_t ox = lo; ox < hi; ++ox) {
            const Acc v = pload(row + (ox * c.sw + off));
            const bool take = (v > acc[size_t(ox)]) | (v != v);  // NaN propagates
            acc[size_t(ox)] = take ? v : acc[size_t(ox)];
          }
        } else {
          for (int64_t ox = lo; ox < hi; ++ox) acc[size_t(ox)] += pload(row + (ox * c.sw + off));
        }
      }
    }
    for (int64_t ox = 0; ox < c.ow; ++ox) {
      if (c.is_max) {
        pstore(o + oy * c.ow + ox, acc[size_t(ox)]);
      } else {
        const Taps& tx = c.cols[size_t(ox)];
        const int64_t count = c.count_include_pad ? ty.padded * tx.padded : (ty.hi - ty.lo) * (tx.hi - tx.lo);
        pstore(o + oy * c.ow + ox, count > 0 ? Acc(acc[size_t(ox)] / Acc(count)) : Acc(0));
      }
    }
  }
}

// f32 max pooling with width stride 2 (ResNet's 3x3 / 2 after the stem), separably: each input
// row a window reads is split into its even and odd columns (phase rows with -inf margins, so
// that tap kx of every output column reads a contiguous run: input column 2 * ox + q is
// even[ox + q / 2] or odd[ox + (q - 1) / 2]; a column outside the image reads -inf, which the
// max step never takes, as if the tap were skipped) and folded over kx into a row of ow
// horizontal maxima; an output row is then the fold of its window's rows of those, one
// RowKernels::max_taps call each. The same result as pool_plane's fold over (ky, kx): with a
// strict compare the fold returns the first maximal element (-0 and +0 as they came) and
// with NaN taken whenever it comes, the last NaN; folding each row first and then the rows
// picks the same element. (A 9-tap fold per output row over phase copies of every row
// before: ResNet-50's pool 0.41 -> 0.36 ms standalone on one thread.)
void max_pool_plane_s2(const PoolCfg& c, const float* x, float* o) {
  if (c.max3_s2 && c.kh <= kMax3S2Rows) {
    // Each output row straight from its input rows, in registers (RowKernels::max3_s2), not
    // a row of horizontal maxima per input row written and read back with a call for each:
    // ResNet-50's pool 0.177 -> 0.141 ms, one thread, in the model (ONNX Runtime's, over
    // 16-channel blocks with a plain max: 0.075).
    for (int64_t oy = 0; oy < c.oh; ++oy) {
      const int64_t y0 = oy * c.sh - c.pt;
      const Taps& ty = c.rows[size_t(oy)];
      const float* rows[kMax3S2Rows];
      int64_t taps = 0;
      for (int64_t ky = ty.lo; ky < ty.hi; ++ky) rows[taps++] = x + (y0 + ky * c.dh) * c.w;
      c.vec->max3_s2(o + oy * c.ow, rows, taps, c.w, c.ow);
    }
    return;
  }
  const int64_t we = (c.w + 1) / 2, wo = c.w / 2;
  // Tap kx reads phase (kx - pl) mod 2 from column ox + floor((kx - pl) / 2): margins for the
  // lowest and highest such column over every ox < ow.
  const int64_t lm = std::max<int64_t>(0, -floor_half(-c.pl));
  const int64_t hi = c.ow - 1 + floor_half((c.kw - 1) * c.dw - c.pl);
  const int64_t len = lm + std::max(hi + 1, we);  // a phase row: lm margin, columns, right margin
  thread_local std::vector<float> phase, hmax;
  thread_local std::vector<uint8_t> have;
  thread_local std::vector<const float*> src, rows_src;
  phase.resize(size_t(2 * len));
  hmax.resize(size_t(c.h * c.ow));
  have.assign(size_t(c.h), 0);
  src.resize(size_t(c.kw));
  rows_src.resize(size_t(c.kh));
  float* ev = phase.data() + lm;
  float* od = ev + len;
  if (!c.max3_s2) {
    std::fill(phase.begin(), phase.end(), -std::numeric_limits<float>::infinity());  // margins stay -inf
    for (int64_t kx = 0; kx < c.kw; ++kx) {
      const int64_t q = kx * c.dw - c.pl, half = floor_half(q);
      src[size_t(kx)] = (q - 2 * half == 0 ? ev : od) + half;
    }
  }
  auto row_max = [&](int64_t y) {  // hmax row y from input row y (even columns read r[0 .. 2we - 2], odd r[1 .. 2wo - 1])
    if (c.max3_s2) {
      const float* r = x + y * c.w;
      c.vec->max3_s2(hmax.data() + y * c.ow, &r, 1, c.w, c.ow);
    } else {
      c.vec->copy_even(ev, x + y * c.w, we);
      c.vec->copy_even(od, x + y * c.w + 1, wo);
      c.vec->max_taps(hmax.data() + y * c.ow, c.kw, src.data(), c.ow);
    }
    have[size_t(y)] = 1;
  };
  for (int64_t oy = 0; oy < c.oh; ++oy) {
    const int64_t y0 = oy * c.sh - c.pt;
    const Taps& ty = c.rows[size_t(oy)];
    int64_t taps = 0;
    for (int64_t ky = ty.lo; ky < ty.hi; ++ky) {
      const int64_t y = y0 + ky * c.dh;
      if (!have[size_t(y)]) row_max(y);
      rows_src[size_t(taps++)] = hmax.data() + y * c.ow;
    }
    c.vec->max_taps(o + oy * c.ow, taps, rows_src.data(), c.ow);
  }
}

template <class T>
void run_pool_typed(const RunCtx& ctx, const PoolCfg& c, const void* x, void* out) {
  const bool split = std::is_same_v<T, float> && c.is_max && c.sw == 2 && c.vec;
  for_each_index(ctx.pool, c.planes, [&](int64_t p) {
    if constexpr (std::is_same_v<T, float>)
      if (split)
        return max_pool_plane_s2(c, static_cast<const float*>(x) + p * c.h * c.w,
                                 static_cast<float*>(out) + p * c.oh * c.ow);
    pool_plane<T>(c, static_cast<const T*>(x) + p * c.h * c.w, static_cast<T*>(out) + p * c.oh * c.ow);
  });
}

// Half planes pool as f32 (the accumulator pool_plane<F16> uses anyway): each plane widened
// a vector at a time, pooled, and narrowed back with the same rounding as its store; the
// bits equal the per-element path's.
void run_pool_half(const RunCtx& ctx, const PoolCfg& c, const void* x, void* out) {
  for_each_index(ctx.pool, c.planes, [&](int64_t p) {
    thread_local std::vector<float> in, res;
    in.resize(size_t(c.h * c.w));
    res.resize(size_t(c.oh * c.ow));
    c.to_f32(static_cast<const uint16_t*>(x) + p * c.h * c.w, in.data(), c.h * c.w);
    pool_plane<float>(c, in.data(), res.data());
    c.from_f32(res.data(), static_cast<uint16_t*>(out) + p * c.oh * c.ow, c.oh * c.ow);
  });
}

void run_pool(const RunCtx& ctx, const void* vcfg, void* const* bufs) {
  const PoolCfg& c = *static_cast<const PoolCfg*>(vcfg);
  const void* x = bufs[0];
  void* out = bufs[1];
  switch (c.type) {
    case DType::F32: return run_pool_typed<float>(ctx, c, x, out);
    case DType::F64: return run_pool_typed<double>(ctx, c, x, out);
    case DType::F16:
    case DType::BF16: return run_pool_half(ctx, c, x, out);
    case DType::I8: return run_pool_typed<int8_t>(ctx, c, x, out);
    case DType::I16: return run_pool_typed<int16_t>(ctx, c, x, out);
    case DType::I32: return run_pool_typed<int32_t>(ctx, c, x, out);
    case DType::I64: return run_pool_typed<int64_t>(ctx, c, x, out);
    case DType::U8: return run_pool_typed<uint8_t>(ctx, c, x, out);
    case DType::U32: return run_pool_typed<uint32_t>(ctx, c, x, out);
    default: fail(ErrorCategory::Internal, "pool kernel called with unsupported dtype ", dtype_name(c.type));
  }
}

bool supports_max_pool(const Node& node, const std::vector<const Shape*>& in) {
  if (ir::is_channels_last(node)) return false;
  return conv_float_type(in[0]->dtype()) || is_integer(in[0]->dtype());
}

bool supports_avg_pool(const Node& node, const std::vector<const Shape*>& in) {
  if (ir::is_channels_last(node)) return false;
  return conv_float_type(in[0]->dtype());
}

KernelCall build_pool(const Node& node, const std::vector<const Shape*>& in, const std::vector<Shape>& out) {
  const auto& a = node.attr<PoolAttrs>();
  const std::vector<int64_t> xd = in[0]->static_dims(), od = out[0].static_dims();
  if (xd.size() != 4 || od.size() != 4 || a.kernel.size() != 2 || a.strides.size() != 2 || a.pads.size() != 4 ||
      a.dilations.size() != 2)
    fail(ErrorCategory::Shape, "node '", node.name, "' (", op_name(node.kind), "): malformed shapes or attributes");
  PoolCfg c;
  c.type = in[0]->dtype();
  c.is_max = node.kind == OpKind::MaxPool2d;
  c.count_include_pad = a.count_include_pad;
  c.planes = xd[0] * xd[1];
  c.h = xd[2], c.w = xd[3], c.oh = od[2], c.ow = od[3];
  c.kh = a.kernel[0], c.kw = a.kernel[1], c.sh = a.strides[0], c.sw = a.strides[1];
  c.pt = a.pads[0], c.pl = a.pads[1], c.pb = a.pads[2], c.pr = a.pads[3];
  c.dh = a.dilations[0], c.dw = a.dilations[1];
  c.vec = &row_kernels(detect_isa());
  c.max3_s2 = c.is_max && c.sw == 2 && c.kw == 3 && c.dw == 1 && c.pl == 1;
  if (c.type == DType::F16 || c.type == DType::BF16) {
    c.to_f32 = ew::convert_fn(c.type, DType::F32, detect_isa());
    c.from_f32 = ew::convert_fn(DType::F32, c.type, detect_isa());
  }
  for (int64_t oy = 0; oy < c.oh; ++oy) c.rows.push_back(window_taps(oy * c.sh - c.pt, c.kh, c.dh, c.h, c.pt, c.pb));
  for (int64_t ox = 0; ox < c.ow; ++ox) c.cols.push_back(window_taps(ox * c.sw - c.pl, c.kw, c.dw, c.w, c.pl, c.pr));
  for (int64_t kx = 0; kx < c.kw; ++kx) {  // a tap is inside for a contiguous run of columns
    int64_t lo = c.ow, hi = c.ow;
    for (int64_t ox = 0; ox < c.ow; ++ox)
      if (kx >= c.cols[size_t(ox)].lo && kx < c.cols[size_t(ox)].hi) {
        if (lo == c.ow) lo = ox;
        hi = ox + 1;
      }
    if (lo == c.ow) hi = lo;
    c.tap_cols.push_back(lo);
    c.tap_cols.push_back(hi);
  }
  return make_call(run_pool, std::move(c));
}

}  // namespace

void register_pool_kernels(KernelRegistry& r) {
  r.add(OpKind::MaxPool2d, build_pool, supports_max_pool);
  r.add(OpKind::AvgPool2d, build_pool, supports_avg_pool);
}

}  // namespace rlx::cpu
