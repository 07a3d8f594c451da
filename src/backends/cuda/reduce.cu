// Reduction-shaped kernels of the CUDA backend: reduce (sum / mean / max / min / prod over
// any axes), softmax / log-softmax over one axis, layer / RMS norm over trailing dims, and
// gather. One warp per output (reductions) or per row (norms, softmax with inner == 1; a
// block per row for norms of rows of 1024 and more),
// the terms summed in float by warp shuffles, a fixed order for a given launch, so runs
// repeat bit for bit.
#include <algorithm>
#include <cfloat>
#include <cuda/std/limits>
#include <type_traits>

#include "backends/cuda/device_util.cuh"
#include "backends/cuda/kernels.h"

namespace rlx::cuda {
namespace {

using dev::block_sum;
using dev::Elem;
using dev::inv_rms;
using dev::ldf;
using dev::offset_of;
using dev::stf;

constexpr int kWarps = 8;  // warps per block

__device__ inline float combine(ReduceOp op, float a, float b) {
  switch (op) {
    case ReduceOp::Max: return (a != a || b != b) ? a + b : fmaxf(a, b);
    case ReduceOp::Min: return (a != a || b != b) ? a + b : fminf(a, b);
    case ReduceOp::Prod: return a * b;
    default: return a + b;
  }
}
__device__ inline float warp_all(ReduceOp op, float v) {
  for (int o = 16; o > 0; o >>= 1) v = combine(op, v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
  return v;
}

// Floats accumulate in their own type; integers in int64, sums and products wrapping (mod
// 2^64, then narrowed to T on store: the CPU oracle's bytes), the mean truncated.
template <class T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, T, int64_t>;
template <class A>
__device__ inline A combine_t(ReduceOp op, A a, A b) {
  if constexpr (std::is_floating_point_v<A>) {
    switch (op) {
      case ReduceOp::Max: return (a != a || b != b) ? a + b : (a > b ? a : b);
      case ReduceOp::Min: return (a != a || b != b) ? a + b : (a < b ? a : b);
      case ReduceOp::Prod: return a * b;
      default: return a + b;
    }
  } else {
    switch (op) {
      case ReduceOp::Max: return a > b ? a : b;
      case ReduceOp::Min: return a < b ? a : b;
      case ReduceOp::Prod: return A(uint64_t(a) * uint64_t(b));
      default: return A(uint64_t(a) + uint64_t(b));
    }
  }
}
template <class T>
__device__ inline Acc<T> identity_t(ReduceOp op) {
  if (op == ReduceOp::Prod) return Acc<T>(1);
  if (op != ReduceOp::Max && op != ReduceOp::Min) return Acc<T>(0);
  if constexpr (std::is_floating_point_v<T>) return op == ReduceOp::Max ? T(-INFINITY) : T(INFINITY);
  else return Acc<T>(op == ReduceOp::Max ? ::cuda::std::numeric_limits<T>::lowest() : ::cuda::std::numeric_limits<T>::max());
}
template <class A>
__device__ inline A warp_all_t(ReduceOp op, A v) {
  for (int o = 16; o > 0; o >>= 1) v = combine_t(op, v, A(__shfl_xor_sync(0xFFFFFFFFu, v, o)));
  return v;
}

template <class T>
__global__ void reduce_kernel(ReduceOp op, const T* x, Iter kept, Strides ks, Iter red, Strides rs, T* y) {
  const int lane = threadIdx.x & 31;
  for (int64_t o = blockIdx.x * int64_t(kWarps) + threadIdx.x / 32; o < kept.numel; o += int64_t(gridDim.x) * kWarps) {
    const int64_t base = offset_of(o, kept, ks);
    Acc<T> acc = identity_t<T>(op);
    for (int64_t r = lane; r < red.numel; r += 32) acc = combine_t(op, acc, Acc<T>(x[base + offset_of(r, red, rs)]));
    acc = warp_all_t(op, acc);
    if (lane != 0) continue;
    if constexpr (std::is_floating_point_v<T>) y[o] = op == ReduceOp::Mean ? T(acc / T(red.numel)) : acc;
    else y[o] = T(op == ReduceOp::Mean ? (red.numel ? acc / red.numel : 0) : acc);
  }
}

// Softmax over contiguous rows (inner == 1): one warp per row.
template <class T>
__global__ void softmax_rows(bool logsm, const T* x, T* y, int64_t rows, int64_t n) {
  const int lane = threadIdx.x & 31;
  for (int64_t r = blockIdx.x * int64_t(kWarps) + threadIdx.x / 32; r < rows; r += int64_t(gridDim.x) * kWarps) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    float m = -INFINITY;
    for (int64_t i = lane; i < n; i += 32) m = fmaxf(m, ldf(xr[i]));
    m = warp_all(ReduceOp::Max, m);
    float s = 0;
    for (int64_t i = lane; i < n; i += 32) s += expf(ldf(xr[i]) - m);
    s = warp_all(ReduceOp::Sum, s);
    if (logsm) {
      const float ls = logf(s);
      for (int64_t i = lane; i < n; i += 32) yr[i] = stf<T>(ldf(xr[i]) - m - ls);
    } else {
      const float inv = 1.0f / s;
      for (int64_t i = lane; i < n; i += 32) yr[i] = stf<T>(expf(ldf(xr[i]) - m) * inv);
    }
  }
}

// Softmax over a strided axis (inner > 1): one thread per (outer, inner) column.
template <class T>
__global__ void softmax_cols(bool logsm, const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < outer * inner; c += int64_t(gridDim.x) * blockDim.x) {
    const int64_t base = (c / inner) * n * inner + c % inner;
    float m = -INFINITY, s = 0;
    for (int64_t i = 0; i < n; ++i) m = fmaxf(m, ldf(x[base + i * inner]));
    for (int64_t i = 0; i < n; ++i) s += expf(ldf(x[base + i * inner]) - m);
    const float ls = logf(s), inv = 1.0f / s;
    for (int64_t i = 0; i < n; ++i) {
      const float v = ldf(x[base + i * inner]) - m;
      y[base + i * inner] = stf<T>(logsm ? v - ls : expf(v) * inv);
    }
  }
}

// y = (x - mean) * inv (* scale) (+ bias) over a thread's elements first, first + step, ...
// of a row, loads batched (row_batches). y may be x: each element is read before it is
// written, by the thread that writes it.
template <class T>
__device__ inline void normalize_row(const T* x, const T* scale, const T* bias, T* y, int64_t cols, float mean,
                                     float inv, int64_t first, int64_t step) {
  dev::row_batches(
      first, cols, step,
      [&](int64_t i) { return make_float3(ldf(x[i]), scale ? ldf(scale[i]) : 1.0f, bias ? ldf(bias[i]) : 0.0f); },
      [&](int64_t i, float3 e) {
        float o = (e.x - mean) * inv;
        if (scale) o *= e.y;
        if (bias) o += e.z;
        y[i] = stf<T>(o);
      });
}

template <class T>
__global__ void norm_rows(bool rms, const T* x, const T* scale, const T* bias, T* y, int64_t rows, int64_t cols,
                          float eps) {
  dev::grid_wait();
  dev::grid_next();
  const int lane = threadIdx.x & 31;
  for (int64_t r = blockIdx.x * int64_t(kWarps) + threadIdx.x / 32; r < rows; r += int64_t(gridDim.x) * kWarps) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    float mean = 0;
    if (!rms) {
      float s = 0;
      dev::row_batches(lane, cols, 32, [&](int64_t i) { return ldf(xr[i]); }, [&](int64_t, float e) { s += e; });
      mean = warp_all(ReduceOp::Sum, s) / float(cols);
    }
    const float inv = inv_rms<false, kWarps>(xr, cols, mean, eps, nullptr);
    normalize_row(xr, scale, bias, yr, cols, mean, inv, lane, 32);
  }
}

// The same with one block of kWarps warps per row, for long rows: a single warp walking
// thousands of columns is bound by the latency of its dependent loads.

template <class T>
__global__ void norm_rows_block(bool rms, const T* x, const T* scale, const T* bias, T* y, int64_t rows, int64_t cols,
                                float eps) {
  dev::grid_wait();
  dev::grid_next();
  __shared__ float part[kWarps];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    float mean = 0;
    if (!rms) {
      float s = 0;
      dev::row_batches(threadIdx.x, cols, blockDim.x, [&](int64_t i) { return ldf(xr[i]); },
                       [&](int64_t, float e) { s += e; });
      mean = block_sum<kWarps>(s, part) / float(cols);
    }
    const float inv = inv_rms<true, kWarps>(xr, cols, mean, eps, part);
    normalize_row(xr, scale, bias, yr, cols, mean, inv, threadIdx.x, blockDim.x);
  }
}

template <int E>
__global__ void gather_kernel(const void* data, int64_t outer, int64_t dim, int64_t inner, const void* idx, bool idx64,
                              int64_t n_idx, void* y, int* err, int step) {
  using T = typename Elem<E>::T;
  const int64_t total = outer * n_idx * inner;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t in_pos = i % inner, j = (i / inner) % n_idx, o = i / (inner * n_idx);
    int64_t k = idx64 ? static_cast<const int64_t*>(idx)[j] : static_cast<const int32_t*>(idx)[j];
    if (k < 0) k += dim;
    if (k < 0 || k >= dim) {  // recorded for the host; the element is written as zero bytes
      atomicCAS(err, 0, 1);
      atomicCAS(err + 1, 0, step);
      static_cast<T*>(y)[i] = T(0);
      continue;
    }
    static_cast<T*>(y)[i] = static_cast<const T*>(data)[(o * dim + k) * inner + in_pos];
  }
}

inline unsigned warp_blocks(int64_t n) { return dev::grid_for(n, kWarps); }

}  // namespace

cudaError_t reduce(ReduceOp op, ET t, const void* x, const Iter& kept, const Strides& ks, const Iter& red,
                   const Strides& rs, void* y, cudaStream_t s) {
  if (kept.numel == 0) return cudaSuccess;
  const unsigned g = warp_blocks(kept.numel);
#define RLX_RED(ET_, T_) \
  case ET_: reduce_kernel<T_><<<g, 32 * kWarps, 0, s>>>(op, static_cast<const T_*>(x), kept, ks, red, rs, static_cast<T_*>(y)); break;
  switch (t) {
    RLX_RED(ET::F32, float)
    RLX_RED(ET::F64, double)
    RLX_RED(ET::I8, int8_t)
    RLX_RED(ET::U8, uint8_t)
    RLX_RED(ET::I16, int16_t)
    RLX_RED(ET::I32, int32_t)
    RLX_RED(ET::I64, int64_t)
    RLX_RED(ET::U32, uint32_t)
    default: return cudaErrorInvalidValue;
  }
#undef RLX_RED
  return cudaGetLastError();
}

using dev::by_float;

cudaError_t softmax(bool log, ET t, const void* x, void* y, int64_t outer, int64_t n, int64_t inner, cudaStream_t s) {
  if (outer * n * inner == 0) return cudaSuccess;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    if (inner == 1)
      softmax_rows<<<warp_blocks(outer), 32 * kWarps, 0, s>>>(log, static_cast<const T*>(x), static_cast<T*>(y), outer, n);
    else
      softmax_cols<<<unsigned((outer * inner + 255) / 256), 256, 0, s>>>(log, static_cast<const T*>(x), static_cast<T*>(y),
                                                                        outer, n, inner);
  });
}

cudaError_t norm(bool rms, ET t, const void* x, const void* scale, const void* bias, void* y, int64_t rows, int64_t cols,
                 float eps, cudaStream_t s) {
  if (rows * cols == 0) return cudaSuccess;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    const T *xt = static_cast<const T*>(x), *st = static_cast<const T*>(scale), *bt = static_cast<const T*>(bias);
    T* yt = static_cast<T*>(y);
    if (cols >= 1024)
      dev::launch(norm_rows_block<T>, unsigned(std::min<int64_t>(rows, 65535 * 8)), 32 * kWarps, 0, s, rms, xt, st, bt, yt,
                  rows, cols, eps);
    else
      dev::launch(norm_rows<T>, warp_blocks(rows), 32 * kWarps, 0, s, rms, xt, st, bt, yt, rows, cols, eps);
  });
}

cudaError_t gather(int elem, const void* data, int64_t outer, int64_t dim, int64_t inner, const void* idx,
                   bool idx64, int64_t n_idx, void* y, int* err, int step, cudaStream_t s) {
  const int64_t total = outer * n_idx * inner;
  if (total == 0) return cudaSuccess;
  const unsigned g = dev::grid_for(total, 256);
  switch (elem) {
    case 1: gather_kernel<1><<<g, 256, 0, s>>>(data, outer, dim, inner, idx, idx64, n_idx, y, err, step); break;
    case 2: gather_kernel<2><<<g, 256, 0, s>>>(data, outer, dim, inner, idx, idx64, n_idx, y, err, step); break;
    case 4: gather_kernel<4><<<g, 256, 0, s>>>(data, outer, dim, inner, idx, idx64, n_idx, y, err, step); break;
    case 8: gather_kernel<8><<<g, 256, 0, s>>>(data, outer, dim, inner, idx, idx64, n_idx, y, err, step); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace rlx::cuda
