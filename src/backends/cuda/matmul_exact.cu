// Matrix products cuBLASLt has no type for: f64 (a fused multiply-add per term in double,
// k in order) and the integer types (the terms summed modulo 2^64 and narrowed: wrapping
// in the element type, as the CPU's integer products and numpy's fixed-width arithmetic
// do, so the CPU's bytes). One thread per output element; the batch offsets of A and B
// come from the output's batch index (any broadcasting) through dev::offset_of. For small products: ONNX's
// MatMulInteger / QLinearMatMul and f64 graphs, not the models' float products.
#include <type_traits>

#include "backends/cuda/device_util.cuh"
#include "backends/cuda/kernels.h"

namespace rlx::cuda {
namespace {

template <class T>
__global__ void exact_matmul_kernel(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, Iter it,
                                    Strides as, Strides bs) {
  dev::grid_wait();
  dev::grid_next();
  const int64_t total = it.numel * m * n;
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < total; o += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = o % n, i = (o / n) % m, batch = o / (m * n);
    const T* ar = a + dev::offset_of(batch, it, as) + i * k;
    const T* bc = b + dev::offset_of(batch, it, bs) + j;
    if constexpr (std::is_same_v<T, double>) {
      double acc = 0;
      for (int64_t t = 0; t < k; ++t) acc = fma(ar[t], bc[t * n], acc);
      c[o] = acc;
    } else {
      uint64_t acc = 0;
      for (int64_t t = 0; t < k; ++t) acc += uint64_t(int64_t(ar[t])) * uint64_t(int64_t(bc[t * n]));
      c[o] = T(acc);
    }
  }
}

template <class T>
cudaError_t launch_exact(const void* a, const void* b, void* c, int64_t m, int64_t n, int64_t k, const Iter& it,
                         const Strides& as, const Strides& bs, cudaStream_t s) {
  const int64_t total = it.numel * m * n;
  if (total == 0) return cudaSuccess;
  return dev::launch(exact_matmul_kernel<T>, dev::grid_for(total, 256), 256, 0, s, static_cast<const T*>(a),
                     static_cast<const T*>(b), static_cast<T*>(c), m, n, k, it, as, bs);
}

}  // namespace

bool exact_matmul_type(ET t) {
  return t == ET::F64 || t == ET::I8 || t == ET::U8 || t == ET::I16 || t == ET::I32 || t == ET::U32 || t == ET::I64;
}

cudaError_t exact_matmul(ET t, const void* a, const void* b, void* c, int64_t m, int64_t n, int64_t k, const Iter& it,
                         const Strides& as, const Strides& bs, cudaStream_t s) {
  switch (t) {
    case ET::F64: return launch_exact<double>(a, b, c, m, n, k, it, as, bs, s);
    case ET::I8: return launch_exact<int8_t>(a, b, c, m, n, k, it, as, bs, s);
    case ET::U8: return launch_exact<uint8_t>(a, b, c, m, n, k, it, as, bs, s);
    case ET::I16: return launch_exact<int16_t>(a, b, c, m, n, k, it, as, bs, s);
    case ET::I32: return launch_exact<int32_t>(a, b, c, m, n, k, it, as, bs, s);
    case ET::U32: return launch_exact<uint32_t>(a, b, c, m, n, k, it, as, bs, s);
    case ET::I64: return launch_exact<int64_t>(a, b, c, m, n, k, it, as, bs, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace rlx::cuda
