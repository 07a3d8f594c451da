// CUDA lowering of the compute families: reductions, softmax, layer / RMS norm, matmul
// (cuBLAS SGEMM, f32 accumulation: no TF32), pad, direct conv2d and pools, argmax /
// argmin. Element-wise and data movement are in lower.cpp.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/cuda/blas.h"
#include "backends/cuda/dnn.h"
#include "backends/cuda/gemm.h"
#include "backends/cuda/lower_util.h"
#include "ir/dims.h"
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
  const ConvAttrs at = n.kind == OpKind::FusedConv2d ? n.attr<FusedConvAttrs>().conv() : n.attr<ConvAttrs>();
  auto xd = in[0]->static_dims(), wd = in[1]->static_dims(), od = out[0].static_dims();
  if (at.nhwc)  // [N,H,W,C] -> the NCHW order of the dims (the layout travels in ConvArgs::nhwc)
    for (auto* d : {&xd, &wd, &od}) *d = {(*d)[0], (*d)[3], (*d)[1], (*d)[2]};
  ConvArgs a{xd[0], xd[1], xd[2], xd[3], wd[0], wd[2], wd[3], od[2], od[3], at.strides[0], at.strides[1],
             at.pads[0], at.pads[1], at.dilations[0], at.dilations[1], at.group};
  a.nhwc = at.nhwc;
  return a;
}
bool conv_is_pointwise(const ConvArgs& a) {
  return a.kh == 1 && a.kw == 1 && a.sh == 1 && a.sw == 1 && a.pt == 0 && a.pl == 0 && a.oh == a.h && a.ow == a.w;
}
// How a group-1 convolution runs as products (cuBLASLt wants 16-byte aligned leading
// dims for its tensor-core kernels; misaligned ones fall to kernels many times slower):
//  - W [cout, K]: when K is not a multiple of 16 bytes, W is copied into scratch with its
//    rows padded to kp (and col gets kp - K zero rows);
//  - y [img][cout, P]: when P is not, the chunk's images are folded into one product
//    W x col [kp, imgs * P] into scratch, permuted into y after;
//  - a pointwise (1x1, stride 1, no pad) convolution with neither reads x as col itself.
struct ConvPlan {
  int64_t K = 0, kp = 0, P = 0, chunk = 1;
  bool pad_w = false, fold = false, direct = false;
  size_t w_off = 0, col_off = 0, y_off = 0, bytes = 0;  // scratch layout
};
// cuDNN runs the convolution when it can take it: its padding is symmetric (pads past the
// last window change nothing), the sizes fit its ints and the library loads
// (RLX_CUDA_CUDNN=0: never).
bool conv_through_dnn(const ConvArgs& a) {
  const char* env = std::getenv("RLX_CUDA_CUDNN");
  if (env && std::string(env) == "0") return false;
  const int64_t oh_sym = (a.h + 2 * a.pt - (a.kh - 1) * a.dh - 1) / a.sh + 1;
  const int64_t ow_sym = (a.w + 2 * a.pl - (a.kw - 1) * a.dw - 1) / a.sw + 1;
  const bool fits_int = a.n * a.c * a.h * a.w < (int64_t(1) << 31) && a.n * a.cout * a.oh * a.ow < (int64_t(1) << 31);
  return oh_sym == a.oh && ow_sym == a.ow && fits_int && a.n * a.cout * a.oh * a.ow > 0 && a.c > 0 &&
         dnn_available(nullptr);
}

size_t round256(size_t b) { return (b + 255) / 256 * 256; }
ConvPlan conv_plan(const ConvArgs& a, int64_t e) {
  ConvPlan p;
  const int64_t align = 16 / e;
  p.K = a.c * a.kh * a.kw;
  p.P = a.oh * a.ow;
  p.pad_w = p.K % align != 0;
  p.kp = p.pad_w ? (p.K + align - 1) / align * align : p.K;
  p.fold = p.P % align != 0;
  p.direct = conv_is_pointwise(a) && !p.pad_w && !p.fold;
  if (p.direct) {
    p.chunk = std::max<int64_t>(a.n, 1);
    return p;
  }
  // Images per chunk: as many as fit in 64 MiB of col (and of the folded product), at least one.
  const int64_t per_image = (p.kp + (p.fold ? a.cout : 0)) * p.P * e;
  p.chunk = std::clamp<int64_t>((int64_t(64) << 20) / std::max<int64_t>(per_image, 1), 1, std::max<int64_t>(a.n, 1));
  p.w_off = 0;
  p.col_off = p.pad_w ? round256(size_t(a.cout * p.kp * e)) : 0;
  p.y_off = p.col_off + round256(size_t(p.chunk * p.kp * p.P * e));
  p.bytes = p.y_off + (p.fold ? size_t(p.chunk * a.cout * p.P * e) : 0);
  return p;
}

}  // namespace

bool nhwc_allowed() {
  const char* e = std::getenv("RLX_CUDA_NHWC");
  return !(e && std::string(e) == "0");
}

bool nhwc_conv_claimed(const Node& n, const std::vector<const Shape*>& in) {
  if (n.kind != OpKind::Conv2d || !n.attr<ConvAttrs>().nhwc || !nhwc_allowed() || in.size() < 2 || !in[0] || !in[1])
    return false;
  if (!in[0]->is_static() || !in[1]->is_static() || n.outputs.size() != 1 || !n.outputs[0].is_static()) return false;
  return conv_through_dnn(conv_args(n, in, n.outputs));
}

bool fused_conv_claimed(const Node& n, const std::vector<const Shape*>& in) {
  if (n.kind != OpKind::FusedConv2d || in.size() < 3 || !in[0] || !in[1] || !in[2] || n.outputs.size() != 1) return false;
  const DType t = in[0]->dtype();
  const auto& fa = n.attr<FusedConvAttrs>();
  if (fa.activation != Activation::Relu || in[0]->rank() != 4 || in[1]->dtype() != t || in[2]->dtype() != t) return false;
  if (in.size() > 3 && in[3] && !(*in[3] == n.outputs[0])) return false;
  if (!n.outputs[0].is_static() || !in[0]->is_static() || !in[1]->is_static() ||
      in[2]->numel() != n.outputs[0].static_dims()[fa.nhwc ? 3 : 1])
    return false;
  if (fa.nhwc && !nhwc_allowed()) return false;
  return conv_through_dnn(conv_args(n, in, n.outputs));
}

size_t scratch_need(const Node& n, const std::vector<const Shape*>& in, const std::vector<Shape>& out,
                    const LowerOptions& opts) {
  if (n.kind == OpKind::Pow) return mixed_pow_scratch(n, in);
  if (n.kind == OpKind::FusedConv2d && supports(n, in))
    return DnnConv(conv_args(n, in, out), *et_of(in[0]->dtype()), opts.tf32, n, true).workspace();
  if (n.kind != OpKind::Conv2d || !supports(n, in) || in[0]->dtype() == DType::F64) return 0;
  const ConvArgs a = conv_args(n, in, out);
  if (conv_through_dnn(a)) return DnnConv(a, *et_of(in[0]->dtype()), opts.tf32, n).workspace();
  if (a.group != 1) return 0;
  return conv_plan(a, int64_t(dtype_size(in[0]->dtype()))).bytes;
}

RotaryArgs rotary_args(const Node& n, const std::vector<const Shape*>& in) {
  const auto xd = in[0]->static_dims(), cd = in[1]->static_dims();
  if (cd[0] != xd[2] || 2 * cd[1] > xd[3] || in[2]->static_dims() != cd)
    fail(ErrorCategory::Shape, "node '", n.name, "' (rotary): cos/sin must be [S, R/2] with R <= D");
  return RotaryArgs{xd[0] * xd[1] * xd[2], xd[2], xd[3], cd[1], n.attr<RotaryAttrs>().interleaved};
}

Launch lower_compute(const Node& n, const std::vector<const Shape*>& in, const std::vector<Shape>& out,
                     const LowerOptions& opts) {
  const Node* np = &n;
  const DType t = in[0]->dtype();
  switch (n.kind) {
    case OpKind::ReduceSum:
    case OpKind::ReduceMean:
    case OpKind::ReduceMax:
    case OpKind::ReduceMin:
    case OpKind::ReduceProd: {
      const auto id = in[0]->static_dims();
      const auto cs = row_major_strides(id);
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
      const ET et = *et_of(t);
      return [np, log, outer, len, inner, et](const LaunchCtx& c, void* const* b) {
        check(softmax(log, et, b[0], b[1], outer, len, inner, c.stream), "softmax kernel", *np);
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
      const ET et = *et_of(t);
      return [np, rms, rows, cols, eps, has_scale, has_bias, nin, et](const LaunchCtx& c, void* const* b) {
        check(norm(rms, et, b[0], has_scale ? b[1] : nullptr, has_bias ? b[2] : nullptr, b[nin], rows, cols, eps, c.stream),
              "norm kernel", *np);
      };
    }
    case OpKind::MatMul:
    case OpKind::FusedMatMul: {
      const MatMulShape s = matmul_shape(*in[0], *in[1]);
      if (!float_storage(t)) {  // f64 / integers (supports claims only a plain matmul of them)
        const ET et = *et_of(t);
        return [np, s, et](const LaunchCtx& c, void* const* b) {
          check(exact_matmul(et, b[0], b[1], b[2], s.m, s.n, s.k, s.it, s.as, s.bs, c.stream), "matmul kernel", *np);
        };
      }
      const size_t out_bytes = out[0].bytes();
      const int64_t e = int64_t(dtype_size(t));
      const bool has_bias = n.kind == OpKind::FusedMatMul && in.size() > 2 && in[2];
      GemmSpec g;
      g.type = *et_of(t);
      g.tf32 = opts.tf32;
      g.m = s.m, g.n = s.n, g.k = s.k;
      g.batch = s.simple ? s.batch : 1;
      g.sa = s.simple ? s.sa : 0;
      g.sb = s.simple ? s.sb : 0;
      if (n.kind == OpKind::FusedMatMul) {
        g.act = n.attr<FusedMatMulAttrs>().activation;
        g.alpha = n.attr<FusedMatMulAttrs>().alpha;
      }
      if (has_bias) g.bias = *matmul_bias_kind(*in[2], out[0]);
      const int nin = int(in.size());
      std::shared_ptr<const LtGemm> gemm;
      if (s.m * s.n * s.batch > 0 && s.k > 0) gemm = std::make_shared<const LtGemm>(g);
      return [np, s, gemm, out_bytes, e, has_bias, nin](const LaunchCtx& c, void* const* b) {
        if (s.m * s.n * s.batch == 0) return;
        if (!gemm) {  // an empty contraction of a plain matmul: zeros
          check(cudaMemsetAsync(b[nin], 0, out_bytes, c.stream), "memset", *np);
          return;
        }
        const auto* A = static_cast<const uint8_t*>(b[0]);
        const auto* B = static_cast<const uint8_t*>(b[1]);
        const auto* bias = has_bias ? static_cast<const uint8_t*>(b[2]) : nullptr;
        auto* C = static_cast<uint8_t*>(b[nin]);
        if (s.simple) {
          gemm->run(c, A, B, bias, C, *np);
          return;
        }
        const bool full_bias = has_bias && gemm->spec().bias == GemmSpec::Bias::Full;
        for (int64_t i = 0; i < s.batch; ++i) {  // mixed broadcasting: one product per output batch index
          int64_t oa = 0, ob = 0, r = i;
          for (int k = s.it.rank - 1; k >= 0; --k) {
            const int64_t idx = r % s.it.dims[k];
            r /= s.it.dims[k];
            oa += idx * s.as.s[k];
            ob += idx * s.bs.s[k];
          }
          const int64_t oc = i * s.m * s.n;
          gemm->run(c, A + oa * e, B + ob * e, full_bias ? bias + oc * e : bias, C + oc * e, *np);
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
    case OpKind::FusedConv2d: {  // claimed only through cuDNN with bias and relu (fused_conv_claimed)
      const ConvArgs a = conv_args(n, in, out);
      auto conv = std::make_shared<const DnnConv>(a, *et_of(t), opts.tf32, n, true);
      if (opts.uses_dnn) *opts.uses_dnn = true;
      const bool has_res = in.size() > 3 && in[3];
      const int nin = int(in.size());
      return [np, conv, has_res, nin](const LaunchCtx& c, void* const* b) {
        conv->run_fused(c, b[0], b[1], b[2], has_res ? b[3] : nullptr, b[nin], *np);
      };
    }
    case OpKind::Conv2d: {
      const ConvArgs a = conv_args(n, in, out);
      const bool has_bias = in.size() > 2 && in[2];
      const int nin = int(in.size());
      const ET et = *et_of(t);
      const int64_t e = int64_t(dtype_size(t));
      const bool direct = t == DType::F64;  // the direct kernel below, in the CPU oracle's order (conv.cu)
      if (!direct && conv_through_dnn(a)) {
        auto conv = std::make_shared<const DnnConv>(a, et, opts.tf32, n);
        if (opts.uses_dnn) *opts.uses_dnn = true;
        // The bias over y [n, cout, P], or channels last over y [n * P, cout, 1].
        const int64_t rows = a.nhwc ? a.n * a.oh * a.ow : a.n, per = a.nhwc ? 1 : a.oh * a.ow;
        return [np, a, conv, has_bias, nin, et, rows, per](const LaunchCtx& c, void* const* b) {
          conv->run(c, b[0], b[1], b[nin], *np);
          if (has_bias) check(add_channel_bias(et, b[2], b[nin], rows, a.cout, per, c.stream), "bias kernel", *np);
        };
      }
      if (a.nhwc)  // claimed only where cuDNN runs it (lower.cpp)
        fail(ErrorCategory::Internal, "node '", n.name, "' (conv2d, nhwc): cuDNN cannot run it");
      if (!direct && a.group == 1) {
        // y[img] [cout, P] = W [cout, kp] col[img] [kp, P]: one strided-batched product per
        // chunk of images with W broadcast, or one folded product (conv_plan).
        const ConvPlan cp = conv_plan(a, e);
        if (a.n * a.cout * cp.P == 0 || cp.K == 0) {  // an empty contraction: the bias alone
          const size_t bytes = out[0].bytes();
          return [np, a, cp, bytes, nin, has_bias, et](const LaunchCtx& c, void* const* b) {
            if (!bytes) return;
            check(cudaMemsetAsync(b[nin], 0, bytes, c.stream), "memset", *np);
            if (has_bias) check(add_channel_bias(et, b[2], b[nin], a.n, a.cout, cp.P, c.stream), "bias kernel", *np);
          };
        }
        auto spec = [&](int64_t imgs) {
          GemmSpec g;
          g.type = et;
          g.tf32 = opts.tf32;
          g.m = a.cout, g.k = cp.kp;
          if (cp.fold) g.n = imgs * cp.P;
          else g.n = cp.P, g.batch = imgs, g.sa = 0, g.sb = cp.kp * cp.P;
          return std::make_shared<const LtGemm>(g);
        };
        std::shared_ptr<const LtGemm> full = spec(cp.chunk), tail = a.n % cp.chunk ? spec(a.n % cp.chunk) : nullptr;
        return [np, a, has_bias, nin, cp, full, tail, et, e](const LaunchCtx& c, void* const* b) {
          const auto* x = static_cast<const uint8_t*>(b[0]);
          auto* y = static_cast<uint8_t*>(b[nin]);
          auto* scratch = static_cast<uint8_t*>(c.scratch);
          const void* w = b[1];
          if (cp.pad_w) {
            PadArgs pa;  // zero columns K .. kp-1
            check(pad(int(e), b[1], iter_of({a.cout, cp.K}), pa, scratch + cp.w_off, iter_of({a.cout, cp.kp}), c.stream),
                  "weight pad kernel", *np);
            w = scratch + cp.w_off;
          }
          for (int64_t n0 = 0; n0 < a.n; n0 += cp.chunk) {
            const int64_t imgs = std::min(cp.chunk, a.n - n0);
            const void* col = x + n0 * cp.K * cp.P * e;
            if (!cp.direct) {
              check(im2col(a, int(e), x, n0, imgs, scratch + cp.col_off, cp.kp, cp.fold, c.stream), "im2col kernel", *np);
              col = scratch + cp.col_off;
            }
            uint8_t* dst = y + n0 * a.cout * cp.P * e;
            const LtGemm& g = imgs == cp.chunk ? *full : *tail;
            if (!cp.fold) {
              g.run(c, w, col, nullptr, dst, *np);
              continue;
            }
            g.run(c, w, col, nullptr, scratch + cp.y_off, *np);
            // [cout][imgs][P] -> [imgs][cout][P]
            Strides sx, sy;
            sx.s[0] = cp.P, sx.s[1] = imgs * cp.P, sx.s[2] = 1;
            sy.s[0] = a.cout * cp.P, sy.s[1] = cp.P, sy.s[2] = 1;
            check(strided_copy(int(e), scratch + cp.y_off, sx, dst, sy, iter_of({imgs, a.cout, cp.P}), c.stream),
                  "conv permute kernel", *np);
          }
          if (has_bias) check(add_channel_bias(et, b[2], y, a.n, a.cout, cp.P, c.stream), "bias kernel", *np);
        };
      }
      return [np, a, has_bias, nin, et](const LaunchCtx& c, void* const* b) {
        check(conv2d(a, et, b[0], b[1], has_bias ? b[2] : nullptr, b[nin], c.stream), "conv2d kernel", *np);
      };
    }
    case OpKind::MaxPool2d:
    case OpKind::AvgPool2d: {
      const auto& at = n.attr<PoolAttrs>();
      const auto xd = in[0]->static_dims(), od = out[0].static_dims();
      PoolArgs a;
      a.is_max = n.kind == OpKind::MaxPool2d;
      a.count_include_pad = at.count_include_pad;
      if (at.nhwc) {
        a.planes = xd[0], a.c = xd[3];
        a.h = xd[1], a.w = xd[2], a.oh = od[1], a.ow = od[2];
      } else {
        a.planes = xd[0] * xd[1];
        a.h = xd[2], a.w = xd[3], a.oh = od[2], a.ow = od[3];
      }
      a.kh = at.kernel[0], a.kw = at.kernel[1], a.sh = at.strides[0], a.sw = at.strides[1];
      a.pt = at.pads[0], a.pl = at.pads[1], a.pb = at.pads[2], a.pr = at.pads[3];
      a.dh = at.dilations[0], a.dw = at.dilations[1];
      const ET et = *et_of(t);
      return [np, a, et](const LaunchCtx& c, void* const* b) {
        check(pool2d(a, et, b[0], b[1], c.stream), "pool kernel", *np);
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
      const ET et = *et_of(t);
      return [np, is_max, last, et, outer, len, inner](const LaunchCtx& c, void* const* b) {
        check(arg_reduce(is_max, last, et, b[0], outer, len, inner, static_cast<int64_t*>(b[1]), c.stream),
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
      const ET et = *et_of(t);
      return [np, largest, et, outer, len, inner, kk](const LaunchCtx& c, void* const* b) {
        check(topk(largest, et, b[0], outer, len, inner, kk, b[1], static_cast<int64_t*>(b[2]), c.stream), "topk kernel",
              *np);
      };
    }
    case OpKind::QMatMul: {
      const QMatMulArgs a = qmatmul_args(n, in, out[0].numel());
      return [np, a](const LaunchCtx& c, void* const* b) {
        check(qmatmul(a, static_cast<const float*>(b[0]), static_cast<const uint8_t*>(b[1]), nullptr, static_cast<float*>(b[2]),
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
    case OpKind::Attention: {
      auto qd = in[0]->static_dims(), kd = in[1]->static_dims(), vd = in[2]->static_dims();
      const auto& at = n.attr<AttentionAttrs>();
      if (at.bshd)  // [B,S,H,D] operands: the dims heads-first, the layout in the strides
        for (auto* d : {&qd, &kd, &vd}) std::swap((*d)[1], (*d)[2]);
      AttentionArgs a;
      a.b = qd[0], a.hq = qd[1], a.sq = qd[2], a.d = qd[3];
      a.hkv = kd[1], a.sk = kd[2], a.dv = vd[3];
      a.set_strides(at.bshd);
      a.scale = float(at.scale != 0 ? at.scale : 1.0 / std::sqrt(double(std::max<int64_t>(a.d, 1))));
      a.causal = at.causal;
      const bool masked = in.size() > 3 && in[3];
      if (masked) {  // element strides over [b, hq, sq, sk], 0 where the mask broadcasts
        std::vector<int64_t> st;
        if (!broadcast_read_strides(in[3]->static_dims(), {a.b, a.hq, a.sq, a.sk}, st))
          fail(ErrorCategory::Shape, "node '", n.name, "' (attention", at.bshd ? ", bshd" : "", "): mask ", in[3]->str(),
               " does not broadcast to the scores [", a.b, ",", a.hq, ",", a.sq, ",", a.sk, "] of q ", in[0]->str());
        std::copy(st.begin(), st.end(), a.mst);
      }
      const ET et = *et_of(t);
      if (cudaError_t e = attention_prepare(); e != cudaSuccess)
        fail(ErrorCategory::Internal, "node '", n.name, "' (attention): setting up the kernel: ", cudaGetErrorString(e));
      const size_t n_in = in.size();  // the output's buffer follows every input slot, absent ones too
      return [np, a, et, masked, n_in](const LaunchCtx& c, void* const* b) {
        check(attention(a, et, b[0], b[1], b[2], masked ? b[3] : nullptr, b[n_in], c.stream),
              "attention kernel", *np);
      };
    }
    case OpKind::KvAttention: {
      const KvAttentionArgs a = kv_attention_args(n, in);
      const bool f16 = in[1]->dtype() == DType::F16;
      return [np, a, f16](const LaunchCtx& c, void* const* b) {
        KvAttentionArgs as = a;
        as.past_settled = c.is_settled(5);
        check(kv_attention(as, f16, static_cast<const float*>(b[0]), b[1], b[2], b[3], b[4],
                           static_cast<const int64_t*>(b[5]), static_cast<float*>(b[6]), c.err, c.step, c.stream),
              "kv_attention kernel", *np);
      };
    }
    case OpKind::Rotary: {
      const RotaryArgs a = rotary_args(n, in);
      return [np, a](const LaunchCtx& c, void* const* b) {
        check(rotary(a, static_cast<const float*>(b[0]), static_cast<const float*>(b[1]), static_cast<const float*>(b[2]),
                     static_cast<float*>(b[3]), c.stream),
              "rotary kernel", *np);
      };
    }
    case OpKind::CacheWrite: {
      const CacheWriteArgs a = cache_write_args(in);
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
