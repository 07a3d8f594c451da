// CUDA lowering of the compute families: reductions, softmax, layer / RMS norm, matmul
// (cuBLAS SGEMM, f32 accumulation: no TF32), pad, direct conv2d and pools, argmax /
// argmin. Element-wise and data movement are in lower.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cuda/blas.h"
#include "backends/cuda/lower_util.h"
#include "ir/op_table.h"

namespace rlx::cuda {

namespace {

// Matmul batches: the output's batch dims (numpy broadcasting of the operands' batch
// dims), each operand's element stride per batch dim (0 where it broadcasts). When every
// operand is either the whole batch or one matrix, one strided-batched call does it;
// otherwise one call per output batch index.
struct MatMulShape {
  int64_t m = 1, n = 1, k = 1, batch = 1, sa = 0, sb = 0;
  bool simple = true;
  Iter it;              // output batch dims
  Strides as, bs;       // operand matrix offsets (elements) per batch dim
};
MatMulShape matmul_shape(const Shape& a, const Shape& b) {
  const auto ad = a.static_dims(), bd = b.static_dims();
  MatMulShape s;
  s.k = ad.back();
  s.m = ad.size() >= 2 ? ad[ad.size() - 2] : 1;
  s.n = bd.size() >= 2 ? bd.back() : 1;
  std::vector<int64_t> ab(ad.begin(), ad.end() - std::min<size_t>(ad.size(), 2));
  std::vector<int64_t> bb(bd.begin(), bd.end() - std::min<size_t>(bd.size(), 2));
  const size_t nb = std::max(ab.size(), bb.size());
  std::vector<int64_t> ob(nb, 1);
  for (size_t i = 0; i < nb; ++i) {
    const int64_t x = i + ab.size() >= nb ? ab[i + ab.size() - nb] : 1, y = i + bb.size() >= nb ? bb[i + bb.size() - nb] : 1;
    ob[i] = std::max(x, y);
  }
  s.it = iter_of(ob);
  s.batch = s.it.numel;
  auto strides = [&](const std::vector<int64_t>& d, int64_t mat) {
    Strides st;
    int64_t run = mat;
    for (int i = int(d.size()) - 1; i >= 0; --i) {
      st.s[size_t(i) + nb - d.size()] = d[size_t(i)] == 1 ? 0 : run;
      run *= d[size_t(i)];
    }
    return st;
  };
  s.as = strides(ab, s.m * s.k);
  s.bs = strides(bb, s.k * s.n);
  int64_t an = 1, bn = 1;
  for (int64_t v : ab) an *= v;
  for (int64_t v : bb) bn *= v;
  // One strided-batched call: each operand is one matrix, or the whole batch laid out as the
  // output's (its batch dims equal the output's trailing batch dims, the rest are 1).
  auto whole = [&](const std::vector<int64_t>& d, int64_t cnt) {
    return cnt == s.batch && std::vector<int64_t>(ob.end() - std::ptrdiff_t(d.size()), ob.end()) == d;
  };
  s.simple = (an == 1 || whole(ab, an)) && (bn == 1 || whole(bb, bn));
  s.sa = an == 1 ? 0 : s.m * s.k;
  s.sb = bn == 1 ? 0 : s.k * s.n;
  if (bn == 1 && an > 1) {  // one B for a batch of contiguous A: one product of an*m rows (a weight)
    s.m *= an;
    s.batch = 1;
    s.it = iter_of({});
    s.sa = 0;
    s.simple = true;
  }
  return s;
}

// The pad value as element bytes of `t` (floats rounded to nearest, integers truncated).
uint64_t fill_bits(DType t, double v) {
  uint64_t bits = 0;
  auto put = [&](auto x) { std::memcpy(&bits, &x, sizeof x); };
  switch (t) {
    case DType::F32: put(float(v)); break;
    case DType::F64: put(v); break;
    case DType::F16: put(f32_to_f16(float(v))); break;
    case DType::BF16: put(f32_to_bf16(float(v))); break;
    case DType::Bool: put(uint8_t(v != 0)); break;
    case DType::I8: put(int8_t(v)); break;
    case DType::U8: put(uint8_t(v)); break;
    case DType::I16: put(int16_t(v)); break;
    case DType::I32: put(int32_t(v)); break;
    default: put(int64_t(v)); break;
  }
  return bits;
}

ConvArgs conv_args(const Node& n, const std::vector<const Shape*>& in, const std::vector<Shape>& out) {
  const auto& at = n.attr<ConvAttrs>();
  const auto xd = in[0]->static_dims(), wd = in[1]->static_dims(), od = out[0].static_dims();
  return ConvArgs{xd[0], xd[1], xd[2], xd[3], wd[0], wd[2], wd[3], od[2], od[3], at.strides[0], at.strides[1],
                  at.pads[0], at.pads[1], at.dilations[0], at.dilations[1], at.group};
}
bool conv_is_pointwise(const ConvArgs& a) {
  return a.kh == 1 && a.kw == 1 && a.sh == 1 && a.sw == 1 && a.pt == 0 && a.pl == 0 && a.oh == a.h && a.ow == a.w;
}
// Images per im2col chunk: as many as fit in 64 MiB of col, at least one.
int64_t conv_chunk(const ConvArgs& a) {
  const int64_t per_image = a.c * a.kh * a.kw * a.oh * a.ow * int64_t(sizeof(float));
  return std::clamp<int64_t>((int64_t(64) << 20) / std::max<int64_t>(per_image, 1), 1, std::max<int64_t>(a.n, 1));
}

}  // namespace

size_t scratch_need(const Node& n, const std::vector<const Shape*>& in, const std::vector<Shape>& out) {
  if (n.kind != OpKind::Conv2d || !supports(n, in)) return 0;
  const ConvArgs a = conv_args(n, in, out);
  if (a.group != 1 || conv_is_pointwise(a)) return 0;
  return size_t(conv_chunk(a) * a.c * a.kh * a.kw * a.oh * a.ow) * sizeof(float);
}

Launch lower_compute(const Node& n, const std::vector<const Shape*>& in, const std::vector<Shape>& out) {
  const Node* np = &n;
  const DType t = in[0]->dtype();
  switch (n.kind) {
    case OpKind::ReduceSum:
    case OpKind::ReduceMean:
    case OpKind::ReduceMax:
    case OpKind::ReduceMin:
    case OpKind::ReduceProd: {
      const auto id = in[0]->static_dims();
      const auto cs = contiguous(id);
      std::vector<bool> red(id.size(), n.attr<ReduceAttrs>().axes.empty());
      for (int64_t a : n.attr<ReduceAttrs>().axes) red[size_t(normalize_axis(a, int(id.size()), "reduce axis"))] = true;
      std::vector<int64_t> kd, ks, rd, rs;
      for (size_t k = 0; k < id.size(); ++k) {
        (red[k] ? rd : kd).push_back(id[k]);
        (red[k] ? rs : ks).push_back(cs[k]);
      }
      const Iter kept = iter_of(kd), rit = iter_of(rd);
      const Strides kst = strides_of(ks), rst = strides_of(rs);
      const ReduceOp op = n.kind == OpKind::ReduceSum ? ReduceOp::Sum : n.kind == OpKind::ReduceMean ? ReduceOp::Mean
                        : n.kind == OpKind::ReduceMax ? ReduceOp::Max : n.kind == OpKind::ReduceMin ? ReduceOp::Min
                                                                                                  : ReduceOp::Prod;
      const ET et = *et_of(t);
      return [np, op, et, kept, kst, rit, rst](const LaunchCtx& c, void* const* b) {
        check(reduce(op, et, b[0], kept, kst, rit, rst, b[1], c.stream), "reduce kernel", *np);
      };
    }
    case OpKind::Softmax:
    case OpKind::LogSoftmax: {
      const auto id = in[0]->static_dims();
      const int ax = normalize_axis(n.attr<AxisAttrs>().axis, int(id.size()), "softmax axis");
      int64_t outer = 1, inner = 1;
      for (int k = 0; k < ax; ++k) outer *= id[size_t(k)];
      for (size_t k = size_t(ax) + 1; k < id.size(); ++k) inner *= id[k];
      const int64_t len = id.empty() ? 1 : id[size_t(ax)];
      const bool log = n.kind == OpKind::LogSoftmax;
      return [np, log, outer, len, inner](const LaunchCtx& c, void* const* b) {
        check(softmax(log, static_cast<const float*>(b[0]), static_cast<float*>(b[1]), outer, len, inner, c.stream),
              "softmax kernel", *np);
      };
    }
    case OpKind::LayerNorm:
    case OpKind::RmsNorm: {
      const int64_t cols = norm_cols(n, *in[0]);
      const int64_t rows = in[0]->numel() / std::max<int64_t>(cols, 1);
      const float eps = float(n.attr<NormAttrs>().epsilon);
      const bool rms = n.kind == OpKind::RmsNorm;
      const bool has_scale = in.size() > 1 && in[1], has_bias = in.size() > 2 && in[2];
      const int nin = int(in.size());
      return [np, rms, rows, cols, eps, has_scale, has_bias, nin](const LaunchCtx& c, void* const* b) {
        check(norm(rms, static_cast<const float*>(b[0]), has_scale ? static_cast<const float*>(b[1]) : nullptr,
                   has_bias ? static_cast<const float*>(b[2]) : nullptr, static_cast<float*>(b[nin]), rows, cols, eps,
                   c.stream),
              "norm kernel", *np);
      };
    }
    case OpKind::MatMul: {
      const MatMulShape s = matmul_shape(*in[0], *in[1]);
      const size_t out_bytes = out[0].bytes();
      return [np, s, out_bytes](const LaunchCtx& c, void* const* b) {
        if (s.m * s.n * s.batch == 0) return;
        if (s.k == 0) {  // an empty contraction: zeros
          check(cudaMemsetAsync(b[2], 0, out_bytes, c.stream), "memset", *np);
          return;
        }
        const float one = 1.0f, zero = 0.0f;
        const float* A = static_cast<const float*>(b[0]);
        const float* B = static_cast<const float*>(b[1]);
        float* C = static_cast<float*>(b[2]);
        // Row-major C[m, n] = A[m, k] B[k, n] is column-major C^T = B^T A^T.
        auto gemm = [&](const float* a, long long sa, const float* bm, long long sb, float* cm, int count) {
          check_blas(blas().sgemm_strided_batched(c.blas, CUBLAS_OP_N, CUBLAS_OP_N, int(s.n), int(s.m), int(s.k), &one,
                                                  bm, int(s.n), sb, a, int(s.k), sa, &zero, cm, int(s.n), s.m * s.n,
                                                  count),
                     "sgemm", *np);
        };
        if (s.simple) {
          gemm(A, s.sa, B, s.sb, C, int(s.batch));
          return;
        }
        for (int64_t i = 0; i < s.batch; ++i) {  // mixed broadcasting: one product per output batch index
          int64_t oa = 0, ob = 0, r = i;
          for (int k = s.it.rank - 1; k >= 0; --k) {
            const int64_t idx = r % s.it.dims[k];
            r /= s.it.dims[k];
            oa += idx * s.as.s[k];
            ob += idx * s.bs.s[k];
          }
          gemm(A + oa, 0, B + ob, 0, C + i * s.m * s.n, 1);
        }
      };
    }
    case OpKind::Pad: {
      const auto& at = n.attr<PadAttrs>();
      const auto id = in[0]->static_dims(), od = out[0].static_dims();
      PadArgs pa;
      pa.mode = at.mode == PadMode::Constant ? 0 : at.mode == PadMode::Reflect ? 1 : 2;
      for (size_t k = 0; k < id.size(); ++k) pa.begin[k] = at.pads[k];
      pa.fill = fill_bits(t, at.value);
      const Iter iit = iter_of(id), oit = iter_of(od);
      const int e = int(dtype_size(t));
      return [np, e, iit, pa, oit](const LaunchCtx& c, void* const* b) {
        check(pad(e, b[0], iit, pa, b[1], oit, c.stream), "pad kernel", *np);
      };
    }
    case OpKind::Conv2d: {
      const ConvArgs a = conv_args(n, in, out);
      const bool has_bias = in.size() > 2 && in[2];
      const int nin = int(in.size());
      if (a.group == 1) {
        // y[img] [cout, P] = W [cout, K] col[img] [K, P]; column-major: y^T = col^T W^T, one
        // strided-batched SGEMM per chunk of images (a 1x1 stride-1 convolution reads x as col).
        const int64_t K = a.c * a.kh * a.kw, P = a.oh * a.ow;
        const bool direct = conv_is_pointwise(a);
        const int64_t chunk = direct ? a.n : conv_chunk(a);
        return [np, a, has_bias, nin, K, P, direct, chunk](const LaunchCtx& c, void* const* b) {
          const float one = 1.0f, zero = 0.0f;
          const float* x = static_cast<const float*>(b[0]);
          const float* w = static_cast<const float*>(b[1]);
          float* y = static_cast<float*>(b[nin]);
          for (int64_t n0 = 0; n0 < a.n; n0 += chunk) {
            const int64_t imgs = std::min(chunk, a.n - n0);
            const float* col = x + n0 * K * P;
            if (!direct) {
              check(im2col(a, x, n0, imgs, static_cast<float*>(c.scratch), c.stream), "im2col kernel", *np);
              col = static_cast<const float*>(c.scratch);
            }
            check_blas(blas().sgemm_strided_batched(c.blas, CUBLAS_OP_N, CUBLAS_OP_N, int(P), int(a.cout), int(K), &one,
                                                    col, int(P), K * P, w, int(K), 0, &zero, y + n0 * a.cout * P,
                                                    int(P), a.cout * P, int(imgs)),
                       "conv sgemm", *np);
          }
          if (has_bias)
            check(add_channel_bias(static_cast<const float*>(b[2]), y, a.n, a.cout, P, c.stream), "bias kernel", *np);
        };
      }
      return [np, a, has_bias, nin](const LaunchCtx& c, void* const* b) {
        check(conv2d(a, static_cast<const float*>(b[0]), static_cast<const float*>(b[1]),
                     has_bias ? static_cast<const float*>(b[2]) : nullptr, static_cast<float*>(b[nin]), c.stream),
              "conv2d kernel", *np);
      };
    }
    case OpKind::MaxPool2d:
    case OpKind::AvgPool2d: {
      const auto& at = n.attr<PoolAttrs>();
      const auto xd = in[0]->static_dims(), od = out[0].static_dims();
      PoolArgs a;
      a.is_max = n.kind == OpKind::MaxPool2d;
      a.count_include_pad = at.count_include_pad;
      a.planes = xd[0] * xd[1];
      a.h = xd[2], a.w = xd[3], a.oh = od[2], a.ow = od[3];
      a.kh = at.kernel[0], a.kw = at.kernel[1], a.sh = at.strides[0], a.sw = at.strides[1];
      a.pt = at.pads[0], a.pl = at.pads[1], a.pb = at.pads[2], a.pr = at.pads[3];
      a.dh = at.dilations[0], a.dw = at.dilations[1];
      return [np, a](const LaunchCtx& c, void* const* b) {
        check(pool2d(a, static_cast<const float*>(b[0]), static_cast<float*>(b[1]), c.stream), "pool kernel", *np);
      };
    }
    case OpKind::ArgMax:
    case OpKind::ArgMin: {
      const auto& at = n.attr<ArgReduceAttrs>();
      const auto id = in[0]->static_dims();
      const int ax = normalize_axis(at.axis, int(id.size()), "argmax/argmin axis");
      int64_t outer = 1, inner = 1;
      for (int k = 0; k < ax; ++k) outer *= id[size_t(k)];
      for (size_t k = size_t(ax) + 1; k < id.size(); ++k) inner *= id[k];
      const int64_t len = id.empty() ? 1 : id[size_t(ax)];
      const bool is_max = n.kind == OpKind::ArgMax, last = at.select_last_index;
      return [np, is_max, last, outer, len, inner](const LaunchCtx& c, void* const* b) {
        check(arg_reduce(is_max, last, static_cast<const float*>(b[0]), outer, len, inner, static_cast<int64_t*>(b[1]),
                         c.stream),
              "argmax kernel", *np);
      };
    }
    case OpKind::TopK: {
      const auto& at = n.attr<TopKAttrs>();
      const auto id = in[0]->static_dims();
      const int ax = normalize_axis(at.axis, int(id.size()), "topk axis");
      int64_t outer = 1, inner = 1;
      for (int k = 0; k < ax; ++k) outer *= id[size_t(k)];
      for (size_t k = size_t(ax) + 1; k < id.size(); ++k) inner *= id[k];
      const int64_t len = id[size_t(ax)], kk = at.k;
      if (kk < 0 || kk > len) fail(ErrorCategory::InvalidArgument, "node '", n.name, "' (topk): k=", kk, " outside [0, ", len, "]");
      const bool largest = at.largest;
      return [np, largest, outer, len, inner, kk](const LaunchCtx& c, void* const* b) {
        check(topk(largest, static_cast<const float*>(b[0]), outer, len, inner, kk, static_cast<float*>(b[1]),
                   static_cast<int64_t*>(b[2]), c.stream),
              "topk kernel", *np);
      };
    }
    case OpKind::QMatMul: {
      const auto& at = n.attr<QMatMulAttrs>();
      const auto wd = in[1]->static_dims();
      QMatMulArgs a{int(at.format), out[0].numel() / std::max<int64_t>(wd[0], 1), wd[0], at.k, wd[1]};
      return [np, a](const LaunchCtx& c, void* const* b) {
        check(qmatmul(a, static_cast<const float*>(b[0]), static_cast<const uint8_t*>(b[1]), static_cast<float*>(b[2]),
                      c.stream),
              "qmatmul kernel", *np);
      };
    }
    case OpKind::QMatMulId: {
      const auto& at = n.attr<QMatMulAttrs>();
      const auto wd = in[1]->static_dims(), idd = in[2]->static_dims();
      QMatMulArgs a{int(at.format), idd[0] * idd[1], wd[1], at.k, wd[2]};
      const int64_t experts = wd[0], slots = idd[1];
      const bool per_slot = in[0]->rank() == 3, ids64 = in[2]->dtype() == DType::I64;
      return [np, a, experts, slots, per_slot, ids64](const LaunchCtx& c, void* const* b) {
        check(qmatmul_id(a, experts, slots, per_slot, static_cast<const float*>(b[0]), static_cast<const uint8_t*>(b[1]),
                         b[2], ids64, static_cast<float*>(b[3]), c.err, c.step, c.stream),
              "qmatmul_id kernel", *np);
      };
    }
    case OpKind::KvAttention: {
      const auto qd = in[0]->static_dims(), kd = in[1]->static_dims();
      KvAttentionArgs a{qd[0], qd[1], kd[1], qd[2], kd[2], qd[3], 1.0f};
      const double sc = n.attr<AttentionAttrs>().scale;
      a.scale = float(sc != 0 ? sc : 1.0 / std::sqrt(double(a.d)));
      const bool f16 = in[1]->dtype() == DType::F16;
      return [np, a, f16](const LaunchCtx& c, void* const* b) {
        check(kv_attention(a, f16, static_cast<const float*>(b[0]), b[1], b[2], b[3], b[4],
                           static_cast<const int64_t*>(b[5]), static_cast<float*>(b[6]), c.err, c.step, c.stream),
              "kv_attention kernel", *np);
      };
    }
    case OpKind::Rotary: {
      const auto xd = in[0]->static_dims(), cd = in[1]->static_dims();
      if (cd[0] != xd[2] || 2 * cd[1] > xd[3] || in[2]->static_dims() != cd)
        fail(ErrorCategory::Shape, "node '", n.name, "' (rotary): cos/sin must be [S, R/2] with R <= D");
      const RotaryArgs a{xd[0] * xd[1] * xd[2], xd[2], xd[3], cd[1], n.attr<RotaryAttrs>().interleaved};
      return [np, a](const LaunchCtx& c, void* const* b) {
        check(rotary(a, static_cast<const float*>(b[0]), static_cast<const float*>(b[1]), static_cast<const float*>(b[2]),
                     static_cast<float*>(b[3]), c.stream),
              "rotary kernel", *np);
      };
    }
    case OpKind::CacheWrite: {
      const auto cd = in[0]->static_dims();
      const CacheWriteArgs a{cd[0], cd[1], cd[2], in[1]->static_dims()[2], cd[3]};
      const int elem = int(dtype_size(in[0]->dtype()));
      return [np, a, elem](const LaunchCtx& c, void* const* b) {
        check(cache_write(a, elem, b[0], b[1], static_cast<const int64_t*>(b[2]), b[3], c.err, c.step, c.stream),
              "cache_write kernel", *np);
      };
    }
    default: break;
  }
  fail(ErrorCategory::Unsupported, "no CUDA kernel runs node '", n.name, "' (", op_name(n.kind), ")");
}

}  // namespace rlx::cuda
