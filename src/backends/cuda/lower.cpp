// CUDA lowering: what the backend claims (supports), and each claimed op's Launch over
// kernels.h: element-wise (single ops and f32 fused_elementwise programs) and data movement
// here, the compute families in
// lower_compute.cpp. What is not claimed is decomposed by legalize where the op table has
// a decomposition, else reported unsupported by name.
#include "backends/cuda/lower.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <cstring>
#include <string>
#include <optional>

#include "backends/cuda/fused_jit.h"
#include "backends/cuda/jit.h"
#include "backends/cuda/lower_util.h"
#include "ir/op_table.h"

namespace rlx::cuda {

void check(cudaError_t e, const char* what, const Node& node) {
  if (e != cudaSuccess)
    fail(ErrorCategory::Internal, "CUDA ", what, " for node '", node.name, "' (", op_name(node.kind),
         "): ", cudaGetErrorString(e));
}
void check_blas(cublasStatus_t s, const char* what, const Node& node) {
  if (s != CUBLAS_STATUS_SUCCESS)
    fail(ErrorCategory::Internal, "cuBLAS ", what, " for node '", node.name, "' (", op_name(node.kind),
         "): status ", int(s));
}

namespace {

std::optional<UnaryOp> unary_of(OpKind k) {
  switch (k) {
#define RLX_U(K) case OpKind::K: return UnaryOp::K;
    RLX_U(Abs) RLX_U(Neg) RLX_U(Exp) RLX_U(Log) RLX_U(Sqrt) RLX_U(Rsqrt) RLX_U(Reciprocal) RLX_U(Sin) RLX_U(Cos)
    RLX_U(Tan) RLX_U(Asin) RLX_U(Acos) RLX_U(Atan) RLX_U(Sinh) RLX_U(Cosh) RLX_U(Asinh) RLX_U(Acosh) RLX_U(Atanh)
    RLX_U(Tanh) RLX_U(Sigmoid) RLX_U(Relu) RLX_U(Gelu) RLX_U(Silu) RLX_U(Softplus) RLX_U(Softsign) RLX_U(Mish)
    RLX_U(HardSwish) RLX_U(HardSigmoid) RLX_U(LeakyRelu) RLX_U(Elu) RLX_U(Selu) RLX_U(Celu) RLX_U(ThresholdedRelu)
    RLX_U(Clip) RLX_U(Erf) RLX_U(Floor) RLX_U(Ceil) RLX_U(Round) RLX_U(Sign) RLX_U(IsNaN) RLX_U(IsInf) RLX_U(Not)
#undef RLX_U
    case OpKind::BitwiseNot: return UnaryOp::BitNot;
    default: return std::nullopt;
  }
}

std::optional<BinaryOp> binary_of(const Node& n) {
  switch (n.kind) {
    case OpKind::Add: return BinaryOp::Add;
    case OpKind::Sub: return BinaryOp::Sub;
    case OpKind::Mul: return BinaryOp::Mul;
    case OpKind::Div: return BinaryOp::Div;
    case OpKind::Pow: return BinaryOp::Pow;
    case OpKind::Max: return BinaryOp::Max;
    case OpKind::Min: return BinaryOp::Min;
    case OpKind::Mod: return n.attr<ModAttrs>().fmod ? BinaryOp::FMod : BinaryOp::FloorMod;
    case OpKind::BitwiseAnd: return BinaryOp::BitAnd;
    case OpKind::BitwiseOr: return BinaryOp::BitOr;
    case OpKind::BitwiseXor: return BinaryOp::BitXor;
    case OpKind::And: return BinaryOp::And;
    case OpKind::Or: return BinaryOp::Or;
    case OpKind::Xor: return BinaryOp::Xor;
    case OpKind::Equal: return BinaryOp::Eq;
    case OpKind::NotEqual: return BinaryOp::Ne;
    case OpKind::Less: return BinaryOp::Lt;
    case OpKind::LessEqual: return BinaryOp::Le;
    case OpKind::Greater: return BinaryOp::Gt;
    case OpKind::GreaterEqual: return BinaryOp::Ge;
    default: return std::nullopt;
  }
}

// The float and integer types the element-wise and reduction kernels are built for.
bool float_type(DType t) { return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16; }
bool integer_type(DType t) {
  return t == DType::I8 || t == DType::U8 || t == DType::I16 || t == DType::I32 || t == DType::I64 || t == DType::U32;
}

bool binary_type_ok(BinaryOp op, DType t) {
  const bool fl = float_type(t);
  const bool in = integer_type(t);
  if (op == BinaryOp::And || op == BinaryOp::Or || op == BinaryOp::Xor) return t == DType::Bool;
  if (op >= BinaryOp::Eq) return fl || in || t == DType::Bool;
  if (op == BinaryOp::BitAnd || op == BinaryOp::BitOr || op == BinaryOp::BitXor) return in;
  return fl || in;
}

}  // namespace

// The unary's attributes as the kernel reads them.
UnaryArgs unary_args(const Node& n, UnaryOp u) {
  UnaryArgs a;
  a.op = u;
  if (n.kind == OpKind::Gelu && n.attr<GeluAttrs>().tanh_approx) a.op = UnaryOp::GeluTanh;
  if (n.kind == OpKind::HardSigmoid || n.kind == OpKind::LeakyRelu || n.kind == OpKind::Elu ||
      n.kind == OpKind::Selu || n.kind == OpKind::Celu || n.kind == OpKind::ThresholdedRelu) {
    a.alpha = float(n.attr<ScalarAttrs>().alpha);
    a.beta = float(n.attr<ScalarAttrs>().beta);
  }
  if (n.kind == OpKind::Clip) {
    a.alpha = float(n.attr<ClipAttrs>().min);
    a.beta = float(n.attr<ClipAttrs>().max);
  }
  if (n.kind == OpKind::IsInf) {
    a.neg = n.attr<IsInfAttrs>().detect_negative;
    a.pos = n.attr<IsInfAttrs>().detect_positive;
  }
  return a;
}

// A fused_elementwise program as the kernel runs it: every input and result of one float
// type (f32, f16 or bf16), only float unary ops, arithmetic binaries and identities; nullopt
// otherwise (legalize then splits the node into its ops, which are claimed one by one).
std::optional<FusedArgs> fused_program(const Node& n, const std::vector<const Shape*>& in,
                                       const std::vector<int64_t>& out_dims) {
  const auto* attrs = std::get_if<FusedElementwiseAttrs>(&n.attrs);
  if (!attrs || attrs->program.empty() || in.size() > size_t(kMaxFusedInputs) ||
      attrs->program.size() > size_t(kMaxFusedOps))
    return std::nullopt;
  FusedArgs a;
  a.it = iter_of(out_dims);
  a.n_in = int(in.size());
  if (in.empty() || !in[0]) return std::nullopt;
  const DType t = in[0]->dtype();
  if (t != DType::F32 && t != DType::F16 && t != DType::BF16) return std::nullopt;
  for (size_t k = 0; k < in.size(); ++k) {
    if (!in[k] || in[k]->dtype() != t) return std::nullopt;
    a.in[k] = broadcast_strides(in[k]->static_dims(), out_dims);
  }
  const int total = a.n_in + int(attrs->program.size());
  for (const FusedOp& op : attrs->program) {
    if (op.type != t) return std::nullopt;
    for (int32_t x : op.args)
      if (x < 0 || x >= total) return std::nullopt;
    Node sub;
    sub.kind = op.kind;
    try {
      sub.attrs = ir::attrs_from_params(op.kind, op.alpha, op.beta);
    } catch (const Error&) {
      return std::nullopt;
    }
    FusedInstr fi;
    if (op.kind == OpKind::Identity && op.args.size() == 1) {
      fi.kind = 2;
    } else if (auto u = unary_of(op.kind); u && op.args.size() == 1 && *u != UnaryOp::IsNaN && *u != UnaryOp::IsInf &&
                                            *u != UnaryOp::Not && *u != UnaryOp::BitNot) {
      fi.kind = 0;
      fi.u = unary_args(sub, *u);
    } else if (auto b = binary_of(sub); b && op.args.size() == 2 && *b <= BinaryOp::FloorMod) {
      fi.kind = 1;
      fi.b = *b;
      fi.y = op.args[1];
    } else {
      return std::nullopt;
    }
    fi.x = op.args[0];
    a.ops[a.n_ops++] = fi;
  }
  return a;
}

// A pow whose exponent's type is not the base's (ONNX allows any numeric exponent): as the
// CPU oracle computes it, both operands cast to one compute type (the result's float type,
// f32 for the half types; i64 for an integer base and exponent; f64 for an integer base
// and a float exponent, truncated on the cast back), then the result cast to its type.
namespace {
struct MixedPow {
  DType c;               // compute type
  size_t e_off, y_off;   // scratch offsets of the staged exponent and result (the base's is 0)
  size_t bytes;          // scratch in all
};
std::optional<MixedPow> mixed_pow(const Node& n, const std::vector<const Shape*>& in) {
  if (n.kind != OpKind::Pow || in.size() != 2 || !in[0] || !in[1] || n.outputs.size() != 1) return std::nullopt;
  const DType a = in[0]->dtype(), e = in[1]->dtype(), y = n.outputs[0].dtype();
  if (a == e || y != a || !(float_type(a) || integer_type(a))) return std::nullopt;
  if (!(float_type(e) || integer_type(e) || e == DType::Bool)) return std::nullopt;
  MixedPow p{};
  p.c = float_type(a) ? (a == DType::F64 ? DType::F64 : DType::F32) : float_type(e) ? DType::F64 : DType::I64;
  auto up = [](size_t b) { return (b + 255) / 256 * 256; };
  const size_t cs = dtype_size(p.c);
  p.e_off = up(a == p.c ? 0 : size_t(in[0]->numel()) * cs);
  p.y_off = up(p.e_off + (e == p.c ? 0 : size_t(in[1]->numel()) * cs));
  p.bytes = p.y_off + (y == p.c ? 0 : size_t(n.outputs[0].numel()) * cs);
  return p;
}
}  // namespace

size_t mixed_pow_scratch(const Node& n, const std::vector<const Shape*>& in) {
  for (const Shape* s : in)
    if (!static_rank_ok(s)) return 0;
  const auto p = mixed_pow(n, in);
  return p ? p->bytes : 0;
}

bool supports(const Node& n, const std::vector<const Shape*>& in) {
  for (const Shape* s : in)
    if (s && !static_rank_ok(s)) return false;
  if (in.empty() || !in[0]) return false;
  const DType t = in[0]->dtype();
  if (auto u = unary_of(n.kind)) {
    if (*u == UnaryOp::Not) return t == DType::Bool;
    const bool fl = float_type(t), in = integer_type(t);
    if (*u == UnaryOp::BitNot) return in;
    if (*u == UnaryOp::Abs || *u == UnaryOp::Neg || *u == UnaryOp::Sign || *u == UnaryOp::Relu) return fl || in;
    return fl;
  }
  if (mixed_pow(n, in)) return true;
  if (auto b = binary_of(n)) return in.size() == 2 && in[1] && in[1]->dtype() == t && binary_type_ok(*b, t);
  switch (n.kind) {
    case OpKind::Where:
      return in.size() == 3 && in[0]->dtype() == DType::Bool && in[1] && in[2] && in[1]->dtype() == in[2]->dtype() &&
             dtype_size(in[1]->dtype()) <= 8;
    case OpKind::Cast: return et_of(t) && et_of(n.attr<CastAttrs>().to);
    case OpKind::FusedElementwise:
      return n.outputs.size() == 1 && n.outputs[0].is_static() && n.outputs[0].dtype() == t &&
             fused_program(n, in, n.outputs[0].static_dims()).has_value();
    case OpKind::Identity:
    case OpKind::Reshape:
    case OpKind::BitCast:
    case OpKind::Transpose:
    case OpKind::Slice:
    case OpKind::Expand:
    case OpKind::Concat:
    case OpKind::Split: {
      const size_t e = dtype_size(t);
      return e == 1 || e == 2 || e == 4 || e == 8;
    }
    case OpKind::Tile: {
      const size_t e = dtype_size(t);
      return (e == 1 || e == 2 || e == 4 || e == 8) && n.outputs.size() == 1 && n.outputs[0].is_static() &&
             tile_as_copy(in[0]->static_dims(), n.outputs[0].static_dims()).has_value();
    }
    case OpKind::Gather: {
      const size_t e = dtype_size(t);
      return in.size() == 2 && in[1] && (in[1]->dtype() == DType::I64 || in[1]->dtype() == DType::I32) &&
             (e == 1 || e == 2 || e == 4 || e == 8);
    }
    case OpKind::ReduceSum:
    case OpKind::ReduceMean:
    case OpKind::ReduceProd:
    case OpKind::ReduceMax:
    case OpKind::ReduceMin: return t == DType::F32 || t == DType::F64 || integer_type(t);
    case OpKind::Softmax:
    case OpKind::LogSoftmax: return float_storage(t);
    case OpKind::LayerNorm:
    case OpKind::RmsNorm: {
      if (!float_storage(t)) return false;
      const int64_t cols = norm_cols(n, *in[0]);
      for (size_t i = 1; i < in.size(); ++i)  // per-element scale / bias of the normalized dims, of x's type
        if (in[i] && (in[i]->numel() != cols || in[i]->dtype() != t)) return false;
      return true;
    }
    case OpKind::MatMul:  // f64 and integer products by matmul_exact.cu, the float types by cuBLASLt
      return (float_storage(t) || (et_of(t) && exact_matmul_type(*et_of(t)))) && in.size() == 2 && in[1] &&
             in[1]->dtype() == t;
    case OpKind::FusedMatMul: {
      if (!float_storage(t) || in.size() < 2 || !in[1] || in[1]->dtype() != t || n.outputs.size() != 1) return false;
      if (in[0]->rank() == 0 || in[0]->static_dims().back() == 0) return false;  // k = 0: decomposed
      return in.size() < 3 || !in[2] || (in[2]->dtype() == t && matmul_bias_kind(*in[2], n.outputs[0]).has_value());
    }
    case OpKind::Pad: {
      const size_t e = dtype_size(t);
      return et_of(t) && (e == 1 || e == 2 || e == 4 || e == 8);
    }
    case OpKind::Conv2d:
      return (float_storage(t) || (t == DType::F64 && !n.attr<ConvAttrs>().nhwc)) && in.size() >= 2 && in[1] &&
             in[1]->dtype() == t && in[0]->rank() == 4 && (in.size() < 3 || !in[2] || in[2]->dtype() == t) &&
             (!n.attr<ConvAttrs>().nhwc || nhwc_conv_claimed(n, in));
    case OpKind::FusedConv2d: return float_storage(t) && fused_conv_claimed(n, in);
    case OpKind::MaxPool2d:  // f64 and integer pools (NCHW only) by the scalar kernel: the CPU's bits
    case OpKind::AvgPool2d:
      if (t == DType::F64 || (n.kind == OpKind::MaxPool2d && integer_type(t)))
        return in[0]->rank() == 4 && !n.attr<PoolAttrs>().nhwc;
      return float_storage(t) && in[0]->rank() == 4 && (!n.attr<PoolAttrs>().nhwc || nhwc_allowed());
    case OpKind::ArgMax:
    case OpKind::ArgMin:
    case OpKind::TopK: return et_of(t).has_value();
    case OpKind::QMatMul:
    case OpKind::QMatMulId: {
      // the formats the kernels are built for (not the rlx-internal repacks)
      return t == DType::F32 && qmatmul_format(int(n.attr<QMatMulAttrs>().format));
    }
    case OpKind::Attention: {  // the prefill kernel (attention.cu): head dims up to kAttentionMaxDim
      if (!float_storage(t) || in.size() < 3 || in[0]->rank() != 4 || !in[1] || !in[2]) return false;
      // RLX_CUDA_ATTENTION=0: never; =1: wherever the kernel runs; unset: where a head's
      // scores reach kAttentionMinScores* (below it the decomposition's cuBLAS products and
      // softmax kernel are faster; above it they also write Sq x Sk scores per head to memory).
      const char* e = std::getenv("RLX_CUDA_ATTENTION");
      if (e && std::string(e) == "0") return false;
      const auto qd = in[0]->static_dims(), kd = in[1]->static_dims(), vd = in[2]->static_dims();
      const bool bshd = n.attr<AttentionAttrs>().bshd;
      const int sax = bshd ? 1 : 2;
      // Over [B,S,H,D] operands in half precision the tensor-core kernel is claimed at any
      // size: there the alternative also transposes q, k, v and the output (four copies).
      const bool tc_bshd = bshd && t != DType::F32 && qd[3] % 16 == 0 && vd[3] % 16 == 0;
      const int64_t from = t == DType::F32 ? kAttentionMinScoresF32 : kAttentionMinScoresLow;
      if (!(e && std::string(e) == "1") && !tc_bshd && qd[size_t(sax)] * kd[size_t(sax)] < from) return false;
      for (size_t i = 1; i < in.size(); ++i)
        if (in[i] && in[i]->dtype() != t) return false;
      if (in.size() > 3 && in[3] && in[3]->rank() > 4) return false;
      return in[0]->static_dims().back() <= kAttentionMaxDim && in[2]->static_dims().back() <= kAttentionMaxDim;
    }
    case OpKind::KvAttention:
      return t == DType::F32 && in.size() == 6 && in[1] && (in[1]->dtype() == DType::F16 || in[1]->dtype() == DType::F32) &&
             in[3] && in[3]->dtype() == in[1]->dtype() && in[0]->static_dims().back() <= 256;
    case OpKind::Rotary:
      return t == DType::F32 && in[1] && in[2] && in[1]->dtype() == t && in[2]->dtype() == t && in[0]->rank() == 4 &&
             in[1]->rank() == 2;
    case OpKind::CacheWrite: {
      const size_t e = dtype_size(in[0]->dtype());
      return e == 1 || e == 2 || e == 4 || e == 8;
    }
    default: return false;
  }
}

Launch lower(const Node& n, const std::vector<const Shape*>& in, const std::vector<Shape>& out,
             const LowerOptions& opts) {
  if (!supports(n, in))
    fail(ErrorCategory::Unsupported, "no CUDA kernel runs node '", n.name, "' (", op_name(n.kind), ") with these types");
  const Node* np = &n;  // nodes outlive the program that holds these launches
  const DType t = in[0]->dtype();
  if (auto u = unary_of(n.kind)) {
    const UnaryArgs a = unary_args(n, *u);
    const int64_t count = in[0]->numel();
    const ET et = *et_of(t);
    return [np, a, et, count](const LaunchCtx& c, void* const* b) {
      check(unary(a, et, b[0], b[1], count, c.stream), "unary kernel", *np);
    };
  }
  if (auto p = mixed_pow(n, in)) {
    const auto od = out[0].static_dims();
    const Iter it = iter_of(od);
    const Strides sa = broadcast_strides(in[0]->static_dims(), od), sb = broadcast_strides(in[1]->static_dims(), od);
    const ET ea = *et_of(t), ee = *et_of(in[1]->dtype()), ec = *et_of(p->c), ey = *et_of(out[0].dtype());
    const int64_t na = in[0]->numel(), ne = in[1]->numel(), ny = out[0].numel();
    const MixedPow mp = *p;
    return [np, mp, it, sa, sb, ea, ee, ec, ey, na, ne, ny](const LaunchCtx& c, void* const* b) {
      auto* scratch = static_cast<uint8_t*>(c.scratch);
      const void* pa = b[0];
      const void* pe = b[1];
      void* py = ey == ec ? b[2] : scratch + mp.y_off;
      if (ea != ec) {
        check(cast(ea, ec, b[0], scratch, na, c.stream), "cast kernel (pow base)", *np);
        pa = scratch;
      }
      if (ee != ec) {
        check(cast(ee, ec, b[1], scratch + mp.e_off, ne, c.stream), "cast kernel (pow exponent)", *np);
        pe = scratch + mp.e_off;
      }
      check(binary(BinaryOp::Pow, ec, pa, sa, pe, sb, py, it, c.stream), "binary kernel", *np);
      if (ey != ec) check(cast(ec, ey, py, b[2], ny, c.stream), "cast kernel (pow result)", *np);
    };
  }
  if (auto op = binary_of(n)) {
    const auto od = out[0].static_dims();
    const Iter it = iter_of(od);
    const Strides sa = broadcast_strides(in[0]->static_dims(), od), sb = broadcast_strides(in[1]->static_dims(), od);
    const ET et = *et_of(t);
    const BinaryOp bop = *op;
    return [np, bop, et, it, sa, sb](const LaunchCtx& c, void* const* b) {
      check(binary(bop, et, b[0], sa, b[1], sb, b[2], it, c.stream), "binary kernel", *np);
    };
  }
  switch (n.kind) {
    case OpKind::FusedElementwise: {
      FusedArgs a = *fused_program(n, in, out[0].static_dims());
      const int n_in = int(in.size());
      const ET et = *et_of(t);
      // The program compiled into its own kernel (fused_jit.h); the interpreter kernel when
      // NVRTC cannot (or RLX_CUDA_JIT=0).
      const char* jit_env = std::getenv("RLX_CUDA_JIT");
      if (!(jit_env && std::string(jit_env) == "0")) {
        FusedArgs ca = a;
        Strides* ops[kMaxFusedInputs];
        for (int k = 0; k < ca.n_in; ++k) ops[k] = &ca.in[k];
        coalesce(ca.it, ops, ca.n_in);
        std::string why;
        if (const void* k = jit::kernel(fused_source(ca, et), kFusedKernelName, &why)) {
          const long long count = ca.it.numel, width = fused_vector_width(ca, et);
          return [np, k, n_in, count, width](const LaunchCtx& c, void* const* b) {
            if (count == 0) return;
            void* bufs[kMaxFusedInputs + 1];
            void* args[kMaxFusedInputs + 2];
            long long cnt = count;
            for (int q = 0; q <= n_in; ++q) {
              bufs[q] = b[q];
              args[q] = &bufs[q];
            }
            args[n_in + 1] = &cnt;
            const unsigned blocks = unsigned(std::min<long long>((count / width + 255) / 256 + 1, 65535LL * 8));
            cudaLaunchAttribute attr;  // the generated kernel waits for its predecessor first
            const cudaLaunchConfig_t cfg = pdl_config(dim3(blocks), dim3(256), 0, c.stream, &attr);
            check(cudaLaunchKernelExC(&cfg, k, args), "generated fused_elementwise kernel", *np);
          };
        }
        static std::once_flag warned;  // the interpreter is several times slower: say why, once
        std::call_once(warned, [&] { std::fprintf(stderr, "rlx: CUDA fused_elementwise programs run interpreted: %s\n", why.c_str()); });
      }
      return [np, a, n_in, et](const LaunchCtx& c, void* const* b) {
        FusedPtrs p;
        for (int k = 0; k < n_in; ++k) p.in[k] = b[k];
        check(fused(et, a, p, b[n_in], c.stream), "fused_elementwise kernel", *np);
      };
    }
    case OpKind::Where: {
      const auto od = out[0].static_dims();
      const Iter it = iter_of(od);
      const Strides sc = broadcast_strides(in[0]->static_dims(), od), sa = broadcast_strides(in[1]->static_dims(), od),
                    sb = broadcast_strides(in[2]->static_dims(), od);
      const int e = int(dtype_size(in[1]->dtype()));
      return [np, e, it, sc, sa, sb](const LaunchCtx& c, void* const* b) {
        check(where(e, b[0], sc, b[1], sa, b[2], sb, b[3], it, c.stream), "where kernel", *np);
      };
    }
    case OpKind::Cast: {
      const ET from = *et_of(t), to = *et_of(n.attr<CastAttrs>().to);
      const int64_t count = in[0]->numel();
      return [np, from, to, count](const LaunchCtx& c, void* const* b) {
        check(cast(from, to, b[0], b[1], count, c.stream), "cast kernel", *np);
      };
    }
    case OpKind::Identity:
    case OpKind::Reshape:
    case OpKind::BitCast: {  // not aliased by the planner: a plain copy
      const size_t bytes = out[0].bytes();
      return [np, bytes](const LaunchCtx& c, void* const* b) {
        if (bytes && b[0] != b[1]) check(cudaMemcpyAsync(b[1], b[0], bytes, cudaMemcpyDeviceToDevice, c.stream), "copy", *np);
      };
    }
    case OpKind::Transpose: {
      const auto id = in[0]->static_dims(), od = out[0].static_dims();
      const auto& perm = n.attr<TransposeAttrs>().perm;
      const auto cs = row_major_strides(id);
      std::vector<int64_t> src(od.size());
      for (size_t k = 0; k < od.size(); ++k) src[k] = cs[size_t(perm.empty() ? od.size() - 1 - k : size_t(perm[k]))];
      const Strides sx = strides_of(src), sy = strides_of(row_major_strides(od));
      const Iter it = iter_of(od);
      const int e = int(dtype_size(t));
      return [np, e, sx, sy, it](const LaunchCtx& c, void* const* b) {
        check(strided_copy(e, b[0], sx, b[1], sy, it, c.stream), "transpose kernel", *np);
      };
    }
    case OpKind::Slice: {
      const auto& at = n.attr<SliceAttrs>();
      const auto id = in[0]->static_dims(), od = out[0].static_dims();
      const int rank = int(id.size());
      const auto cs = row_major_strides(id);
      std::vector<int64_t> src = cs;
      int64_t base = 0;
      for (size_t i = 0; i < at.starts.size(); ++i) {
        const int ax = normalize_axis(at.axes.empty() ? int64_t(i) : at.axes[i], rank, "slice axis");
        const int64_t dim = id[size_t(ax)], step = at.steps.empty() ? 1 : at.steps[i];
        int64_t s = at.starts[i];
        if (s < 0) s += dim;
        s = step > 0 ? std::clamp<int64_t>(s, 0, dim) : std::clamp<int64_t>(s, 0, std::max<int64_t>(dim - 1, 0));
        base += s * cs[size_t(ax)];
        src[size_t(ax)] = cs[size_t(ax)] * step;
      }
      const Strides sx = strides_of(src, base), sy = strides_of(row_major_strides(od));
      const Iter it = iter_of(od);
      const int e = int(dtype_size(t));
      return [np, e, sx, sy, it](const LaunchCtx& c, void* const* b) {
        check(strided_copy(e, b[0], sx, b[1], sy, it, c.stream), "slice kernel", *np);
      };
    }
    case OpKind::Expand: {
      const auto od = out[0].static_dims();
      const Strides sx = broadcast_strides(in[0]->static_dims(), od), sy = strides_of(row_major_strides(od));
      const Iter it = iter_of(od);
      const int e = int(dtype_size(t));
      return [np, e, sx, sy, it](const LaunchCtx& c, void* const* b) {
        check(strided_copy(e, b[0], sx, b[1], sy, it, c.stream), "expand kernel", *np);
      };
    }
    case OpKind::Tile: {
      const std::optional<TileAsCopy> tc = tile_as_copy(in[0]->static_dims(), out[0].static_dims());
      RLX_CHECK(tc.has_value(), "tile: more dims than the copy kernel takes");
      const Strides sx = strides_of(tc->sx), sy = strides_of(tc->sy);
      const Iter it = iter_of(tc->dims);
      const int e = int(dtype_size(t));
      return [np, e, sx, sy, it](const LaunchCtx& c, void* const* b) {
        check(strided_copy(e, b[0], sx, b[1], sy, it, c.stream), "tile kernel", *np);
      };
    }
    case OpKind::Concat:
    case OpKind::Split: {
      // One strided copy per piece: the piece's dims, its offset along the axis of the whole.
      const bool concat = n.kind == OpKind::Concat;
      const Shape& whole = concat ? out[0] : *in[0];
      const auto wd = whole.static_dims();
      const int ax = normalize_axis(concat ? n.attr<AxisAttrs>().axis : n.attr<SplitAttrs>().axis, int(wd.size()), "axis");
      const auto ws = row_major_strides(wd);
      struct Piece {
        Iter it;
        Strides whole, part;
        int index;
      };
      std::vector<Piece> pieces;
      int64_t at = 0;
      const size_t count = concat ? in.size() : out.size();
      for (size_t i = 0; i < count; ++i) {
        const auto pd = (concat ? *in[i] : out[i]).static_dims();
        Piece p{iter_of(pd), strides_of(ws, at * ws[size_t(ax)]), strides_of(row_major_strides(pd)), int(i)};
        at += pd[size_t(ax)];
        if (p.it.numel) pieces.push_back(p);
      }
      const int e = int(dtype_size(t));
      const int nin = int(in.size());
      return [np, e, pieces, concat, nin](const LaunchCtx& c, void* const* b) {
        for (const Piece& p : pieces) {
          if (concat) check(strided_copy(e, b[p.index], p.part, b[nin], p.whole, p.it, c.stream), "concat kernel", *np);
          else check(strided_copy(e, b[0], p.whole, b[nin + p.index], p.part, p.it, c.stream), "split kernel", *np);
        }
      };
    }
    case OpKind::Gather: {
      const auto dd = in[0]->static_dims();
      const int ax = normalize_axis(n.attr<AxisAttrs>().axis, int(dd.size()), "gather axis");
      int64_t outer = 1, inner = 1;
      for (int k = 0; k < ax; ++k) outer *= dd[size_t(k)];
      for (size_t k = size_t(ax) + 1; k < dd.size(); ++k) inner *= dd[k];
      const int64_t dim = dd[size_t(ax)], n_idx = in[1]->numel();
      const bool idx64 = in[1]->dtype() == DType::I64;
      const int e = int(dtype_size(t));
      return [np, e, outer, dim, inner, idx64, n_idx](const LaunchCtx& c, void* const* b) {
        check(gather(e, b[0], outer, dim, inner, b[1], idx64, n_idx, b[2], c.err, c.step, c.stream), "gather kernel", *np);
      };
    }
    default: return lower_compute(n, in, out, opts);
  }
}

}  // namespace rlx::cuda
