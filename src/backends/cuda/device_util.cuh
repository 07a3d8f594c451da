// Internal: what the .cu files share: element types by size, float loads and stores of
// the storage types (f32, f16, bf16: half kernels compute in f32), strided offsets, grid sizes.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <utility>

#include "backends/cuda/kernels.h"

namespace rlx::cuda::dev {

template <int E>
struct Elem;
template <> struct Elem<1> { using T = uint8_t; };
template <> struct Elem<2> { using T = uint16_t; };
template <> struct Elem<4> { using T = uint32_t; };
template <> struct Elem<8> { using T = uint64_t; };
template <> struct Elem<16> { using T = uint4; };  // vectorized copies (strided_copy)

// A storage element as float, and a float rounded (to nearest even) into a storage element.
template <class T> __device__ inline float ldf(T v) { return float(v); }
template <> __device__ inline float ldf(__half v) { return __half2float(v); }
template <> __device__ inline float ldf(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T> __device__ inline T stf(float v) { return T(v); }
// f16: a NaN becomes the quiet NaN 0x7E00 with its sign (the CPU oracle's conversion; the
// cvt instruction gives 0x7FFF), every other value rounds to nearest even.
template <> __device__ inline __half stf(float v) {
  if (v != v) return __ushort_as_half((unsigned short)(((__float_as_uint(v) >> 16) & 0x8000u) | 0x7e00u));
  return __float2half_rn(v);
}
// bf16: a NaN keeps the top of its payload, quieted (the CPU oracle's conversion; the cvt
// instruction would give the canonical NaN), every other value rounds to nearest even.
template <> __device__ inline __nv_bfloat16 stf(float v) {
  if (v != v) return __ushort_as_bfloat16((unsigned short)((__float_as_uint(v) >> 16) | 0x40u));
  return __float2bfloat16_rn(v);
}

// One rotary pair (x0, x1) by (cos, sin): x0 co - x1 si and x1 co + x0 si, each product and
// the sum rounded on its own as the CPU computes them (no fma spans two ops), so that every
// kernel that rotates (rotary, kv_store, kv_store_attention) gives the same bits.
__device__ inline float rotate_first(float x0, float x1, float co, float si) {
  return __fsub_rn(__fmul_rn(x0, co), __fmul_rn(x1, si));
}
__device__ inline float rotate_second(float x0, float x1, float co, float si) {
  return __fadd_rn(__fmul_rn(x1, co), __fmul_rn(x0, si));
}

// Programmatic dependent launch (sm_90): a kernel started by launch() below may begin while
// the kernel before it on the stream still runs. It must call grid_wait() before it touches
// any memory: that returns once the previous kernel has finished and its writes are
// visible. grid_next() then lets the kernel after it start early in turn (after the wait,
// so at most one kernel runs ahead). Both are no-ops for kernels launched plainly and
// below sm_90. What it saves is the gap between dependent kernels (about a microsecond
// each), which is most of a decode step's time outside its products.
__device__ inline void grid_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ inline void grid_next() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// Launches kernel k, allowed to overlap the previous one's tail when pdl_enabled() (so k
// must begin with grid_wait()).
template <class... P, class... A>
cudaError_t launch(void (*k)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, A&&... args) {
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = pdl_config(grid, block, smem, s, &attr);
  return cudaLaunchKernelEx(&cfg, k, std::forward<A>(args)...);
}

// Sums in one fixed order (so every kernel that uses them, fused or not, gets the same
// bits): a warp's lanes by xor butterfly; a block's warps through `shared` (one float per
// warp), every thread adding the warp sums in warp order.
__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
  return v;
}
// A warp's largest value (NaN-free inputs; -inf where nothing is live), every lane gets it.
__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
  return v;
}
template <int Warps>
__device__ inline float block_sum(float v, float* shared) {
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  __syncthreads();  // `shared` may still be read from the previous sum
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float t = 0;
  for (int w = 0; w < Warps; ++w) t += shared[w];
  return t;
}

// RMS normalization's 1 / rms of a row of f32 (the sum of squares by fmaf, then
// rsqrt(mean + eps)): by one warp over its lanes (Block false), or by a block of Warps warps
// (Block true) over its threads. The norm kernels and the fused norm + product both use it.
// A thread's elements of a row, j = first, first + step, ... < n, kRowBatch at a time:
// load(j) of the whole batch first, then use(j, loaded) in j's order. A row that is no
// longer in L2 then costs one trip to memory per batch rather than per element (a decode
// step's fused norm + product waited on eight trips in a row before its first FMA: batched,
// TinyLlama-1.1B-shaped F16 decode on the H200 went 813-817 -> 923-949 tok/s in alternated
// rounds, Q4_0 886 -> 1000); the arithmetic and its order are the loop's.
constexpr int kRowBatch = 8;
template <class Load, class Use>
__device__ inline void row_batches(int64_t first, int64_t n, int64_t step, Load load, Use use) {
  using V = decltype(load(first));
  for (int64_t i = first; i < n; i += kRowBatch * step) {
    V v[kRowBatch];
#pragma unroll
    for (int u = 0; u < kRowBatch; ++u)
      if (i + u * step < n) v[u] = load(i + u * step);
#pragma unroll
    for (int u = 0; u < kRowBatch; ++u)
      if (i + u * step < n) use(i + u * step, v[u]);
  }
}
template <bool Block, int Warps, class T>
__device__ inline float inv_rms(const T* x, int64_t cols, float mean, float eps, float* shared) {
  float v = 0;
  const int64_t first = Block ? threadIdx.x : (threadIdx.x & 31), step = Block ? blockDim.x : 32;
  row_batches(first, cols, step, [&](int64_t i) { return ldf(x[i]); }, [&](int64_t, float e) {
    const float d = e - mean;
    v = fmaf(d, d, v);
  });
  const float s = Block ? block_sum<Warps>(v, shared) : warp_sum(v);
  return rsqrtf(s / float(cols) + eps);
}

// Element offset of row-major index i of `it` in an operand with strides `st`. The loops
// run over the constant kMaxRank so that every dims / strides index is a compile-time
// constant: an index known only at run time makes nvcc copy the whole parameter struct into
// each thread's local memory first (it made the strided kernels 30x slower). 32-bit
// division when the space fits (64-bit division costs several times more); the outermost
// dim needs none.
__device__ inline int64_t offset_of(int64_t i, const Iter& it, const Strides& st) {
  int64_t off = st.base;
  if (it.rank == 0) return off;
  if (it.numel <= 0x7fffffff) {
    uint32_t j = uint32_t(i);
#pragma unroll
    for (int k = kMaxRank - 1; k > 0; --k) {
      if (k >= it.rank) continue;
      const uint32_t d = uint32_t(it.dims[k]), q = j / d;
      off += int64_t(j - q * d) * st.s[k];
      j = q;
    }
    return off + int64_t(j) * st.s[0];
  }
#pragma unroll
  for (int k = kMaxRank - 1; k > 0; --k) {
    if (k >= it.rank) continue;
    const int64_t d = it.dims[k], q = i / d;
    off += (i - q * d) * st.s[k];
    i = q;
  }
  return off + i * st.s[0];
}

// 16 bytes from global to shared memory (both 16-byte aligned) without holding the thread
// (cp.async, sm_80+): the copy lands after copy_async_wait(), which waits for all of the
// thread's copies; other threads see it after a barrier that follows that wait.
__device__ inline void copy16_async(void* smem, const void* gmem) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem) : "memory");
}
__device__ inline void copy_async_wait() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// Calls f(T{}) with T the storage type of t, then returns the launch's status. by_float:
// the float storage types (f32, f16, bf16; cudaErrorInvalidValue for another); by_type:
// every ET.
template <class F>
cudaError_t by_float(ET t, F&& f) {
  switch (t) {
    case ET::F32: f(float{}); break;
    case ET::F16: f(__half{}); break;
    case ET::BF16: f(__nv_bfloat16{}); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}
template <class F>
cudaError_t by_type(ET t, F&& f) {
  switch (t) {
    case ET::F64: f(double{}); break;
    case ET::I8: f(int8_t{}); break;
    case ET::U8: f(uint8_t{}); break;
    case ET::I16: f(int16_t{}); break;
    case ET::I32: f(int32_t{}); break;
    case ET::I64: f(int64_t{}); break;
    case ET::U32: f(uint32_t{}); break;
    case ET::Bool: f(bool{}); break;
    default: return by_float(t, f);
  }
  return cudaGetLastError();
}

// Blocks for n work items of `per_block` each (at least 1, at most 65535 * 8: grid-stride
// loops cover the rest).
inline unsigned grid_for(int64_t n, int64_t per_block) {
  const int64_t b = (n + per_block - 1) / per_block;
  return unsigned(b < 1 ? 1 : b > 65535 * 8 ? 65535 * 8 : b);
}

// True when p is 16-byte aligned (a vector load's or a tensor-core tile's requirement).
inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// The device's multiprocessors (1 when it cannot be asked), read once.
inline int sm_count() {
  static const int n = [] {
    int dev = 0, c = 0;
    return cudaGetDevice(&dev) == cudaSuccess && cudaDeviceGetAttribute(&c, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess
               ? c
               : 1;
  }();
  return n;
}

}  // namespace rlx::cuda::dev
