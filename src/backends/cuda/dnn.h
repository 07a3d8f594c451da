// Internal: group convolutions through cuDNN (libcudnn.so.9, loaded on first use like
// cuBLAS), NCHW or NHWC (ConvArgs::nhwc) in f32 / TF32 / f16 / bf16 with f32 accumulation. What cuDNN cannot take
// (asymmetric padding, a build without its headers, a machine without the library) stays
// on rlx's im2col + cuBLASLt path (lower_compute.cpp).
#pragma once
#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>

#include "backends/cuda/kernels.h"
#include "backends/cuda/lower.h"

namespace rlx::cuda {

// True when this build and machine can run convolutions through cuDNN (the library is
// loaded on the first call). `why` says why not.
bool dnn_available(std::string* why);

// One convolution's descriptors and algorithm (cuDNN's heuristics: the fastest whose
// workspace is at most kMaxWorkspace bytes; the launch finds it in LaunchCtx::scratch).
class DnnConv {
 public:
  static constexpr size_t kMaxWorkspace = size_t(256) << 20;
  // Error(Unsupported) when cuDNN refuses the shapes. fused_relu: also the descriptors of
  // run_fused's per-channel bias and relu.
  DnnConv(const ConvArgs& a, ET t, bool tf32, const Node& node, bool fused_relu = false);
  ~DnnConv();
  DnnConv(const DnnConv&) = delete;
  DnnConv& operator=(const DnnConv&) = delete;
  // y = conv(x, w) (no bias: the caller adds it), enqueued on ctx.stream with ctx.dnn.
  void run(const LaunchCtx& ctx, const void* x, const void* w, void* y, const Node& node) const;
  // y = relu(conv(x, w) + residual + bias) in one cuDNN call (cudnnConvolutionBiasActivationForward:
  // the epilogue in the convolution's kernel, no pass over y after it); bias [cout]; residual
  // y-shaped or nullptr. Needs fused_relu at construction.
  void run_fused(const LaunchCtx& ctx, const void* x, const void* w, const void* bias, const void* residual, void* y,
                 const Node& node) const;
  size_t workspace() const;  // bytes of scratch the algorithm needs

 private:
  struct Desc;
  std::unique_ptr<Desc> d_;
};

// A cuDNN handle for one executable's stream (nullptr when cuDNN is unavailable).
void* dnn_create_handle(cudaStream_t stream);
void dnn_destroy_handle(void* handle);

}  // namespace rlx::cuda
