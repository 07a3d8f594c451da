#include "backends/cuda/gemm.h"

#include <algorithm>
#include <string>

#include "backends/cuda/blas.h"
#include "rlx/error.h"

namespace rlx::cuda {

namespace {

cudaDataType_t data_type(ET t) {
  switch (t) {
    case ET::F16: return CUDA_R_16F;
    case ET::BF16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}
int64_t elem_bytes(ET t) { return t == ET::F32 ? 4 : 2; }

// The activations cuBLASLt applies in its epilogue. Not its GELU: cuBLASLt does not define
// that approximation, and it differs from the op table's tanh form by more than rounding
// (measured: 1.4e-6 relative on an H200), so gelu runs as rlx's kernel after the product.
bool in_epilogue(Activation a) { return a == Activation::None || a == Activation::Relu; }

void lt_check(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    fail(ErrorCategory::Internal, "cuBLASLt ", what, " failed (status ", int(st), ")");
}

unsigned alignment_of(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  unsigned a = 16;
  while (a > 1 && v % a) a /= 2;
  return a;
}

}  // namespace

// Descriptors: row-major C[m, n] = A[m, k] B[k, n] is column-major C^T = B^T A^T, so
// cuBLASLt's "A" is our B (n x k, ld n), its "B" our A (k x m, ld k), its C/D ours (n x m).
struct LtGemm::Desc {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
};
struct LtGemm::Algo {
  cublasLtMatmulAlgo_t algo;
  size_t workspace = 0;
};

LtGemm::LtGemm(const GemmSpec& s) : s_(s), d_(std::make_unique<Desc>()) {
  const BlasLt& lt = blas_lt();
  const cublasComputeType_t compute =
      s.type == ET::F32 && s.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  lt_check(lt.desc_create(&d_->op, compute, CUDA_R_32F), "matmul descriptor");
  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
  const bool row_bias = s.bias == GemmSpec::Bias::Row;
  if (s.act == Activation::Relu) epi = row_bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
  else if (row_bias) epi = CUBLASLT_EPILOGUE_BIAS;
  lt_check(lt.desc_set(d_->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), "epilogue");
  if (row_bias) {
    const cudaDataType_t bt = data_type(s.type);
    lt_check(lt.desc_set(d_->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt), "bias type");
  }
  const cudaDataType_t t = data_type(s.type);
  lt_check(lt.layout_create(&d_->a, t, uint64_t(s.n), uint64_t(s.k), s.n), "layout");
  lt_check(lt.layout_create(&d_->b, t, uint64_t(s.k), uint64_t(s.m), s.k), "layout");
  lt_check(lt.layout_create(&d_->c, t, uint64_t(s.n), uint64_t(s.m), s.n), "layout");
  if (s.batch > 1) {
    const int32_t count = int32_t(s.batch);
    const int64_t stride_a = s.sb, stride_b = s.sa, stride_c = s.m * s.n;
    for (auto [l, st] : {std::pair{d_->a, stride_a}, std::pair{d_->b, stride_b}, std::pair{d_->c, stride_c}}) {
      lt_check(lt.layout_set(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count), "batch count");
      lt_check(lt.layout_set(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st, sizeof st), "batch stride");
    }
  }
}

LtGemm::~LtGemm() {
  const BlasLt& lt = blas_lt();
  if (d_->op) lt.desc_destroy(d_->op);
  for (auto l : {d_->a, d_->b, d_->c})
    if (l) lt.layout_destroy(l);
}

// Called with mu_ held.
const LtGemm::Algo& LtGemm::algo_for(unsigned align, const Node& node, size_t workspace) const {
  auto it = algos_.find(align);
  if (it != algos_.end()) return *it->second;
  const BlasLt& lt = blas_lt();
  cublasLtMatmulPreference_t pref = nullptr;
  lt_check(lt.pref_create(&pref), "preference");
  const uint64_t ws = workspace;
  const uint32_t al = align;
  cublasStatus_t st = lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    if (st == CUBLAS_STATUS_SUCCESS) st = lt.pref_set(pref, attr, &al, sizeof al);
  cublasLtMatmulHeuristicResult_t res{};
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS) st = lt.heuristic(lt.handle, d_->op, d_->a, d_->b, d_->c, d_->c, pref, 1, &res, &found);
  lt.pref_destroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found < 1)
    fail(ErrorCategory::Unsupported, "node '", node.name, "': cuBLASLt has no algorithm for a ", s_.m, "x", s_.k, " by ",
         s_.k, "x", s_.n, " product (batch ", s_.batch, ", ", align, "-byte aligned; status ", int(st), ")");
  auto a = std::make_shared<Algo>();
  a->algo = res.algo;
  a->workspace = res.workspaceSize;
  return *algos_.emplace(align, std::move(a)).first->second;
}

void LtGemm::run(const LaunchCtx& ctx, const void* a, const void* b, const void* bias, void* c, const Node& node) const {
  const BlasLt& lt = blas_lt();
  const int64_t e = elem_bytes(s_.type);
  unsigned align = std::min({alignment_of(a), alignment_of(b), alignment_of(c)});
  if (s_.bias == GemmSpec::Bias::Full) align = std::min(align, alignment_of(bias));
  for (int64_t ld : {s_.n, s_.k}) align = std::min(align, alignment_of(reinterpret_cast<const void*>(ld * e)));
  if (s_.batch > 1)
    for (int64_t st : {s_.sa, s_.sb, s_.m * s_.n})
      if (st) align = std::min(align, alignment_of(reinterpret_cast<const void*>(st * e)));
  // One lock over the descriptor's bias pointer and the call that reads it: clones of an
  // executable share this object and may run from several threads.
  std::lock_guard<std::mutex> lock(mu_);
  const Algo& al = algo_for(align, node, ctx.workspace_bytes);
  if (s_.bias == GemmSpec::Bias::Row) {
    cublasStatus_t st = lt.desc_set(d_->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    if (st != CUBLAS_STATUS_SUCCESS) fail(ErrorCategory::Internal, "node '", node.name, "': cuBLASLt bias pointer (status ", int(st), ")");
  }
  const float one = 1.0f, zero = 0.0f;
  const bool full = s_.bias == GemmSpec::Bias::Full;
  check_blas(lt.matmul(lt.handle, d_->op, &one, b, d_->a, a, d_->b, full ? &one : &zero, full ? bias : c, d_->c, c,
                       d_->c, &al.algo, ctx.workspace, al.workspace, ctx.stream),
             "cuBLASLt matmul", node);
  if (!in_epilogue(s_.act)) {
    UnaryArgs u;
    switch (s_.act) {
      case Activation::Gelu: u.op = UnaryOp::Gelu; break;
      case Activation::GeluTanh: u.op = UnaryOp::GeluTanh; break;
      case Activation::Silu: u.op = UnaryOp::Silu; break;
      case Activation::Sigmoid: u.op = UnaryOp::Sigmoid; break;
      case Activation::Tanh: u.op = UnaryOp::Tanh; break;
      default: u.op = UnaryOp::LeakyRelu; u.alpha = float(s_.alpha); break;
    }
    check(unary(u, s_.type, c, c, s_.batch * s_.m * s_.n, ctx.stream), "activation kernel", node);
  }
}

}  // namespace rlx::cuda
