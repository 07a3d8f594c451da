// Internal: shape helpers of the CUDA lowering (lower.cpp, lower_compute.cpp).
#pragma once
#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "backends/cuda/gemm.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/lower.h"
#include "ir/dims.h"

namespace rlx::cuda {

inline std::optional<ET> et_of(DType t) {
  switch (t) {
    case DType::F32: return ET::F32;
    case DType::F16: return ET::F16;
    case DType::BF16: return ET::BF16;
    case DType::F64: return ET::F64;
    case DType::I8: return ET::I8;
    case DType::U8: return ET::U8;
    case DType::I16: return ET::I16;
    case DType::I32: return ET::I32;
    case DType::I64: return ET::I64;
    case DType::U32: return ET::U32;
    case DType::Bool: return ET::Bool;
    default: return std::nullopt;
  }
}

// How a fused_matmul's bias reaches the product (gemm.h): one value per output column
// (numel n, every dim but the last 1), the output's own shape, or neither (nullopt).
inline std::optional<GemmSpec::Bias> matmul_bias_kind(const Shape& bias, const Shape& out) {
  const auto bd = bias.static_dims(), od = out.static_dims();
  if (bd == od) return GemmSpec::Bias::Full;
  const int64_t n = od.empty() ? 1 : od.back();
  if (bias.numel() == n && (bd.empty() || bd.back() == n) && bd.size() <= std::max<size_t>(od.size(), 1))
    return GemmSpec::Bias::Row;
  return std::nullopt;
}

// The float types the GEMM, convolution and pool kernels store (computing in f32).
inline bool float_storage(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

inline bool static_rank_ok(const Shape* s) { return s && s->is_static() && s->rank() <= kMaxRank; }

inline Iter iter_of(const std::vector<int64_t>& d) {
  Iter it;
  it.rank = int(d.size());
  for (size_t k = 0; k < d.size(); ++k) {
    it.dims[k] = d[k];
    it.numel *= d[k];
  }
  return it;
}
// Strides of an operand broadcast (numpy, right-aligned) to `out` dims (ir/dims.h).
inline Strides broadcast_strides(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  std::vector<int64_t> v;
  RLX_CHECK(broadcast_read_strides(in, out, v), "operand does not broadcast to the output");
  Strides st;
  for (size_t k = 0; k < v.size(); ++k) st.s[k] = v[k];
  return st;
}
inline Strides strides_of(const std::vector<int64_t>& s, int64_t base = 0) {
  Strides st;
  for (size_t k = 0; k < s.size(); ++k) st.s[k] = s[k];
  st.base = base;
  return st;
}

// Tile as a strided copy: output axis k of in[k] * reps elements is iterated as two dims,
// the repeat (input stride 0, output stride in[k] * out stride) and the element (the
// input's stride, the output's), dims of extent 1 left out; nullopt past kMaxRank dims.
struct TileAsCopy {
  std::vector<int64_t> dims, sx, sy;
};
inline std::optional<TileAsCopy> tile_as_copy(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  if (in.size() != out.size()) return std::nullopt;
  const auto is = row_major_strides(in), os = row_major_strides(out);
  TileAsCopy t;
  for (size_t k = 0; k < in.size(); ++k) {
    const int64_t reps = in[k] ? out[k] / in[k] : 0;
    if (reps != 1) {
      t.dims.push_back(reps);
      t.sx.push_back(0);
      t.sy.push_back(in[k] * os[k]);
    }
    if (in[k] != 1) {
      t.dims.push_back(in[k]);
      t.sx.push_back(is[k]);
      t.sy.push_back(os[k]);
    }
  }
  if (t.dims.size() > size_t(kMaxRank)) return std::nullopt;
  return t;
}

inline int64_t norm_cols(const Node& n, const Shape& x) {
  const int ax = normalize_axis(n.attr<NormAttrs>().axis, x.rank(), "norm axis");
  int64_t cols = 1;
  for (int k = ax; k < x.rank(); ++k) cols *= x.static_dims()[size_t(k)];
  return cols;
}


// A qmatmul node's kernel arguments (rows of W [n, row_bytes] against out_elems / n rows of x).
inline QMatMulArgs qmatmul_args(const Node& n, const std::vector<const Shape*>& in, int64_t out_elems) {
  const auto& at = n.attr<QMatMulAttrs>();
  const auto wd = in[1]->static_dims();
  return QMatMulArgs{int(at.format), out_elems / std::max<int64_t>(wd[0], 1), wd[0], at.k, wd[1]};
}
// A cache_write node's kernel arguments (cache [b, h, c, d], rows [b, h, t, d]).
inline CacheWriteArgs cache_write_args(const std::vector<const Shape*>& in) {
  const auto cd = in[0]->static_dims();
  return CacheWriteArgs{cd[0], cd[1], cd[2], in[1]->static_dims()[2], cd[3]};
}

// A kv_attention node's kernel arguments (q [b, hq, t, d], caches [b, hkv, c, d]).
inline KvAttentionArgs kv_attention_args(const Node& n, const std::vector<const Shape*>& in) {
  const auto qd = in[0]->static_dims(), kd = in[1]->static_dims();
  KvAttentionArgs a{qd[0], qd[1], kd[1], qd[2], kd[2], qd[3], 1.0f};
  const double sc = n.attr<AttentionAttrs>().scale;
  a.scale = float(sc != 0 ? sc : 1.0 / std::sqrt(double(a.d)));
  return a;
}
// A rotary node's kernel arguments; Error(Shape) naming the node for cos/sin that do not fit.
RotaryArgs rotary_args(const Node& n, const std::vector<const Shape*>& in);

// The inputs (gate, up) of a fused_elementwise node whose program is exactly silu(gate) * up
// in f32 (the product's operands in either order); nullopt for any other program.
inline std::optional<std::pair<int, int>> swiglu_operands(const Node& n) {
  const auto* at = std::get_if<FusedElementwiseAttrs>(&n.attrs);
  if (n.kind != OpKind::FusedElementwise || !at || at->program.size() != 2 || n.inputs.size() != 2) return std::nullopt;
  const FusedOp& s = at->program[0];
  const FusedOp& m = at->program[1];
  if (s.kind != OpKind::Silu || s.type != DType::F32 || s.args.size() != 1 || s.args[0] > 1 || s.args[0] < 0 ||
      m.kind != OpKind::Mul || m.type != DType::F32 || m.args.size() != 2)
    return std::nullopt;
  const int gate = s.args[0], up = 1 - gate;
  if ((m.args[0] == 2 && m.args[1] == up) || (m.args[1] == 2 && m.args[0] == up)) return std::pair{gate, up};
  return std::nullopt;
}

// The launch of the compute families (reductions, softmax, norms, matmul, pad, conv,
// pools, argmax / argmin): lower_compute.cpp. Error(Unsupported) for anything else.
// A fused_conv2d the backend claims: relu over conv + per-channel bias (+ a residual of the
// output's type), f32 / f16 / bf16, through cuDNN's fused convolution (lower_compute.cpp).
bool fused_conv_claimed(const Node& n, const std::vector<const Shape*>& in);
// Scratch bytes of a pow whose operands' types differ (lower.cpp stages them), else 0.
size_t mixed_pow_scratch(const Node& n, const std::vector<const Shape*>& in);
// Channels-last convolutions and pools (the channels-last pass asks): convolutions where
// cuDNN runs them (the kernels here are NCHW), pools everywhere; RLX_CUDA_NHWC=0: never.
bool nhwc_allowed();
bool nhwc_conv_claimed(const Node& n, const std::vector<const Shape*>& in);

Launch lower_compute(const Node& n, const std::vector<const Shape*>& in, const std::vector<Shape>& out,
                     const LowerOptions& opts);

}  // namespace rlx::cuda
