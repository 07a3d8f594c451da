// Internal: one row-major (strided-batched) matrix product through cuBLASLt, with its
// epilogue, described once at lowering and launched many times.
//
//   C[b] = act(A[b] (m x k) * B[b] (k x n) + bias) for b < batch
//
// A, B, C of one element type (f32, f16, bf16), accumulation and scaling in f32. f32 uses
// TF32 tensor cores only when `tf32` (Precision::TF32). bias: none; a vector of n (one value
// per output column, cuBLASLt's bias epilogue); or a full C-shaped matrix of `batch` blocks
// added through beta = 1. act: relu runs in cuBLASLt's epilogue; the other activations
// run as one elementwise pass over C afterwards (gemm.cpp says why not cuBLASLt's gelu). A stride of 0 broadcasts one
// matrix to every batch index. The algorithm is chosen by cuBLASLt's heuristic on first use,
// once per pointer alignment (views may start mid-buffer).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "backends/cuda/kernels.h"
#include "backends/cuda/lower.h"
#include "rlx/attrs.h"

namespace rlx::cuda {

struct GemmSpec {
  ET type = ET::F32;
  bool tf32 = false;
  int64_t m = 1, n = 1, k = 1, batch = 1;
  int64_t sa = 0, sb = 0;  // elements between batch matrices (0: broadcast)
  enum class Bias { None, Row, Full } bias = Bias::None;
  Activation act = Activation::None;
  double alpha = 0;  // leaky_relu slope
};

class LtGemm {
 public:
  explicit LtGemm(const GemmSpec& s);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;
  // Enqueues on ctx.stream; throws Error naming `node` when cuBLASLt refuses.
  void run(const LaunchCtx& ctx, const void* a, const void* b, const void* bias, void* c, const Node& node) const;
  const GemmSpec& spec() const { return s_; }

 private:
  struct Algo;
  const Algo& algo_for(unsigned align, const Node& node, size_t workspace) const;  // mu_ held
  GemmSpec s_;
  struct Desc;
  std::unique_ptr<Desc> d_;
  mutable std::mutex mu_;
  mutable std::map<unsigned, std::shared_ptr<Algo>> algos_;
};

}  // namespace rlx::cuda
