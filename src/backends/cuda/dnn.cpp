#include "backends/cuda/dnn.h"

#include <string>

#include "backends/cuda/dynlib.h"
#include "rlx/error.h"

#if __has_include(<cudnn.h>)
#include <cudnn.h>
#define RLX_HAVE_CUDNN_HEADERS 1
// cuDNN 9 marks the descriptor API deprecated in favour of its graph API; it is still the
// library's supported legacy path and all this file needs.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif

namespace rlx::cuda {

#ifdef RLX_HAVE_CUDNN_HEADERS
namespace {

struct Dnn {
  cudnnStatus_t (*create)(cudnnHandle_t*) = nullptr;
  cudnnStatus_t (*destroy)(cudnnHandle_t) = nullptr;
  cudnnStatus_t (*set_stream)(cudnnHandle_t, cudaStream_t) = nullptr;
  cudnnStatus_t (*tensor_create)(cudnnTensorDescriptor_t*) = nullptr;
  cudnnStatus_t (*tensor_set)(cudnnTensorDescriptor_t, cudnnTensorFormat_t, cudnnDataType_t, int, int, int, int) = nullptr;
  cudnnStatus_t (*tensor_destroy)(cudnnTensorDescriptor_t) = nullptr;
  cudnnStatus_t (*filter_create)(cudnnFilterDescriptor_t*) = nullptr;
  cudnnStatus_t (*filter_set)(cudnnFilterDescriptor_t, cudnnDataType_t, cudnnTensorFormat_t, int, int, int, int) = nullptr;
  cudnnStatus_t (*filter_destroy)(cudnnFilterDescriptor_t) = nullptr;
  cudnnStatus_t (*conv_create)(cudnnConvolutionDescriptor_t*) = nullptr;
  cudnnStatus_t (*conv_set)(cudnnConvolutionDescriptor_t, int, int, int, int, int, int, cudnnConvolutionMode_t,
                            cudnnDataType_t) = nullptr;
  cudnnStatus_t (*conv_math)(cudnnConvolutionDescriptor_t, cudnnMathType_t) = nullptr;
  cudnnStatus_t (*conv_groups)(cudnnConvolutionDescriptor_t, int) = nullptr;
  cudnnStatus_t (*conv_destroy)(cudnnConvolutionDescriptor_t) = nullptr;
  cudnnStatus_t (*algos)(cudnnHandle_t, cudnnTensorDescriptor_t, cudnnFilterDescriptor_t, cudnnConvolutionDescriptor_t,
                         cudnnTensorDescriptor_t, int, int*, cudnnConvolutionFwdAlgoPerf_t*) = nullptr;
  cudnnStatus_t (*forward)(cudnnHandle_t, const void*, cudnnTensorDescriptor_t, const void*, cudnnFilterDescriptor_t,
                           const void*, cudnnConvolutionDescriptor_t, cudnnConvolutionFwdAlgo_t, void*, size_t,
                           const void*, cudnnTensorDescriptor_t, void*) = nullptr;
  cudnnStatus_t (*forward_fused)(cudnnHandle_t, const void*, cudnnTensorDescriptor_t, const void*,
                                 cudnnFilterDescriptor_t, const void*, cudnnConvolutionDescriptor_t,
                                 cudnnConvolutionFwdAlgo_t, void*, size_t, const void*, cudnnTensorDescriptor_t,
                                 const void*, cudnnTensorDescriptor_t, const void*, cudnnActivationDescriptor_t,
                                 cudnnTensorDescriptor_t, void*) = nullptr;
  cudnnStatus_t (*act_create)(cudnnActivationDescriptor_t*) = nullptr;
  cudnnStatus_t (*act_set)(cudnnActivationDescriptor_t, cudnnActivationMode_t, cudnnNanPropagation_t, double) = nullptr;
  cudnnStatus_t (*act_destroy)(cudnnActivationDescriptor_t) = nullptr;
  std::string error;
};

const Dnn& dnn() {
  static Dnn d;
  static std::once_flag once;
  std::call_once(once, [] {
    DynLib lib({"libcudnn.so.9", "libcudnn.so"}, "cuDNN");
    auto sym = [&](auto& fn, const char* name) { lib.sym(fn, name); };
    sym(d.create, "cudnnCreate");
    sym(d.destroy, "cudnnDestroy");
    sym(d.set_stream, "cudnnSetStream");
    sym(d.tensor_create, "cudnnCreateTensorDescriptor");
    sym(d.tensor_set, "cudnnSetTensor4dDescriptor");
    sym(d.tensor_destroy, "cudnnDestroyTensorDescriptor");
    sym(d.filter_create, "cudnnCreateFilterDescriptor");
    sym(d.filter_set, "cudnnSetFilter4dDescriptor");
    sym(d.filter_destroy, "cudnnDestroyFilterDescriptor");
    sym(d.conv_create, "cudnnCreateConvolutionDescriptor");
    sym(d.conv_set, "cudnnSetConvolution2dDescriptor");
    sym(d.conv_math, "cudnnSetConvolutionMathType");
    sym(d.conv_groups, "cudnnSetConvolutionGroupCount");
    sym(d.conv_destroy, "cudnnDestroyConvolutionDescriptor");
    sym(d.algos, "cudnnGetConvolutionForwardAlgorithm_v7");
    sym(d.forward, "cudnnConvolutionForward");
    sym(d.forward_fused, "cudnnConvolutionBiasActivationForward");
    sym(d.act_create, "cudnnCreateActivationDescriptor");
    sym(d.act_set, "cudnnSetActivationDescriptor");
    sym(d.act_destroy, "cudnnDestroyActivationDescriptor");
    d.error = lib.error();
  });
  return d;
}

cudnnDataType_t dnn_type(ET t) {
  return t == ET::F16 ? CUDNN_DATA_HALF : t == ET::BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

}  // namespace

bool dnn_available(std::string* why) {
  const Dnn& d = dnn();
  if (!d.error.empty() && why) *why = d.error;
  return d.error.empty();
}

struct DnnConv::Desc {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnActivationDescriptor_t act = nullptr;
  cudnnConvolutionFwdAlgo_t algo{};
  size_t workspace = 0;
};

DnnConv::DnnConv(const ConvArgs& a, ET t, bool tf32, const Node& node, bool fused_relu)
    : d_(std::make_unique<Desc>()) {
  const Dnn& d = dnn();
  if (!d.error.empty()) fail(ErrorCategory::Unsupported, "node '", node.name, "': ", d.error);
  const cudnnDataType_t dt = dnn_type(t);
  auto ok = [&](cudnnStatus_t s, const char* what) {
    if (s != CUDNN_STATUS_SUCCESS)
      fail(ErrorCategory::Unsupported, "node '", node.name, "': cuDNN ", what, " refused (status ", int(s), ")");
  };
  ok(d.tensor_create(&d_->x), "tensor descriptor");
  ok(d.tensor_create(&d_->y), "tensor descriptor");
  ok(d.filter_create(&d_->w), "filter descriptor");
  ok(d.conv_create(&d_->conv), "convolution descriptor");
  // Dims are given in NCHW order whatever the format; NHWC's filter is [cout, kh, kw, c / group].
  const cudnnTensorFormat_t fmt = a.nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  ok(d.tensor_set(d_->x, fmt, dt, int(a.n), int(a.c), int(a.h), int(a.w)), "input shape");
  ok(d.tensor_set(d_->y, fmt, dt, int(a.n), int(a.cout), int(a.oh), int(a.ow)), "output shape");
  ok(d.filter_set(d_->w, dt, fmt, int(a.cout), int(a.c / a.group), int(a.kh), int(a.kw)), "filter shape");
  ok(d.conv_set(d_->conv, int(a.pt), int(a.pl), int(a.sh), int(a.sw), int(a.dh), int(a.dw), CUDNN_CROSS_CORRELATION,
                CUDNN_DATA_FLOAT),
     "convolution");
  ok(d.conv_groups(d_->conv, int(a.group)), "group count");
  if (fused_relu) {  // bias per output channel, of the data's type; relu keeps NaN as rlx's relu does
    ok(d.tensor_create(&d_->bias), "tensor descriptor");
    ok(d.tensor_set(d_->bias, CUDNN_TENSOR_NCHW, dt, 1, int(a.cout), 1, 1), "bias shape");
    ok(d.act_create(&d_->act), "activation descriptor");
    ok(d.act_set(d_->act, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0), "relu activation");
  }
  // f32 stays f32 unless TF32 was asked for (cuDNN would take TF32 by default); half types
  // on tensor cores.
  const cudnnMathType_t math = t != ET::F32 ? CUDNN_TENSOR_OP_MATH : tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  ok(d.conv_math(d_->conv, math), "math type");
  // The algorithm: the fastest of cuDNN's heuristic list whose workspace fits the cap (it
  // becomes the executable's scratch: scratch_need). A process-wide handle asks (the
  // heuristics run on the host; the handle only names the device).
  static std::mutex mu;
  static cudnnHandle_t asker = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (!asker) ok(d.create(&asker), "handle");
  cudnnConvolutionFwdAlgoPerf_t perf[16];
  int found = 0;
  ok(d.algos(asker, d_->x, d_->w, d_->conv, d_->y, 16, &found, perf), "algorithm heuristics");
  for (int i = 0; i < found; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= kMaxWorkspace) {
      d_->algo = perf[i].algo;
      d_->workspace = perf[i].memory;
      return;
    }
  fail(ErrorCategory::Unsupported, "node '", node.name, "': cuDNN has no convolution algorithm within ", kMaxWorkspace,
       " bytes of workspace");
}

DnnConv::~DnnConv() {
  const Dnn& d = dnn();
  if (d_->x) d.tensor_destroy(d_->x);
  if (d_->y) d.tensor_destroy(d_->y);
  if (d_->w) d.filter_destroy(d_->w);
  if (d_->conv) d.conv_destroy(d_->conv);
  if (d_->bias) d.tensor_destroy(d_->bias);
  if (d_->act) d.act_destroy(d_->act);
}

void DnnConv::run(const LaunchCtx& ctx, const void* x, const void* w, void* y, const Node& node) const {
  const Dnn& d = dnn();
  auto h = static_cast<cudnnHandle_t>(ctx.dnn);
  if (!h) fail(ErrorCategory::Internal, "node '", node.name, "': no cuDNN handle");
  const float one = 1.0f, zero = 0.0f;
  const cudnnStatus_t s = d.forward(h, &one, d_->x, x, d_->w, w, d_->conv, d_->algo, d_->workspace ? ctx.scratch : nullptr,
                                    d_->workspace, &zero, d_->y, y);
  if (s != CUDNN_STATUS_SUCCESS)
    fail(ErrorCategory::Internal, "node '", node.name, "': cuDNN convolution failed (status ", int(s), ")");
}

void DnnConv::run_fused(const LaunchCtx& ctx, const void* x, const void* w, const void* bias, const void* residual,
                        void* y, const Node& node) const {
  const Dnn& d = dnn();
  auto h = static_cast<cudnnHandle_t>(ctx.dnn);
  if (!h) fail(ErrorCategory::Internal, "node '", node.name, "': no cuDNN handle");
  if (!d_->act) fail(ErrorCategory::Internal, "node '", node.name, "': convolution not built with its epilogue");
  // y = relu(conv + residual + bias); without a residual z is y itself, scaled by 0.
  const float one = 1.0f, zero = 0.0f;
  const cudnnStatus_t s =
      d.forward_fused(h, &one, d_->x, x, d_->w, w, d_->conv, d_->algo, d_->workspace ? ctx.scratch : nullptr,
                      d_->workspace, residual ? &one : &zero, d_->y, residual ? residual : y, d_->bias, bias, d_->act,
                      d_->y, y);
  if (s != CUDNN_STATUS_SUCCESS)
    fail(ErrorCategory::Internal, "node '", node.name, "': cuDNN convolution with bias and relu failed (status ", int(s),
         ")");
}

size_t DnnConv::workspace() const { return d_->workspace; }

void* dnn_create_handle(cudaStream_t stream) {
  const Dnn& d = dnn();
  if (!d.error.empty()) return nullptr;
  cudnnHandle_t h = nullptr;
  if (d.create(&h) != CUDNN_STATUS_SUCCESS) return nullptr;
  if (d.set_stream(h, stream) != CUDNN_STATUS_SUCCESS) {
    d.destroy(h);
    return nullptr;
  }
  return h;
}
void dnn_destroy_handle(void* handle) {
  if (handle) dnn().destroy(static_cast<cudnnHandle_t>(handle));
}

#else  // no cuDNN headers in this build

struct DnnConv::Desc {};
bool dnn_available(std::string* why) {
  if (why) *why = "this rlx was built without the cuDNN headers";
  return false;
}
DnnConv::DnnConv(const ConvArgs&, ET, bool, const Node& node, bool) {
  fail(ErrorCategory::Unsupported, "node '", node.name, "': this rlx was built without the cuDNN headers");
}
DnnConv::~DnnConv() = default;
void DnnConv::run(const LaunchCtx&, const void*, const void*, void*, const Node&) const {}
void DnnConv::run_fused(const LaunchCtx&, const void*, const void*, const void*, const void*, void*, const Node&) const {}
size_t DnnConv::workspace() const { return 0; }
void* dnn_create_handle(cudaStream_t) { return nullptr; }
void dnn_destroy_handle(void*) {}

#endif

}  // namespace rlx::cuda
