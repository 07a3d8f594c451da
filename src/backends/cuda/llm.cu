// LLM kernels of the CUDA backend: qmatmul / qmatmul_id over weight rows in their GGUF block
// format (every format the CPU reads, decoded in registers by quant_dot.cuh's row_dot;
// nothing is expanded in memory; one warp per output element), rotary, and cache_write
// (the new rows into a cache, in place on a resident handle). f32 accumulation in a fixed
// order per output, so runs repeat bit for bit.
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "backends/cuda/device_util.cuh"
#include "backends/cuda/kernels.h"
#include "backends/cuda/quant_dot.cuh"

namespace rlx::cuda {
namespace {

constexpr int kWarps = 8;

using dev::warp_sum;
using namespace qdot;

// A warp's first F16 row, its loads issued before the kernel waits for its predecessor
// (dev::grid_wait): the weights are no kernel's result, so the first trip to memory overlaps
// the previous kernel's tail (and, in norm_qmatmul, the row's normalization). The row's
// first P 16-byte chunks per lane are held in `u`; f16_dot_prefetched then walks the
// chunks in row_dot's order (lane, lane + 32, ...), so it gives row_dot's bits.
template <int F>
__device__ inline bool f16_wide(const QMatMulArgs& a, const uint8_t* w, const float* x) {
  return F == 1 && (a.k & 7) == 0 && (a.row_bytes & 15) == 0 &&
         ((reinterpret_cast<uintptr_t>(w) | reinterpret_cast<uintptr_t>(x)) & 15) == 0;
}
template <int P>
__device__ inline void f16_prefetch(const uint8_t* row, int64_t n8, int lane, uint4* u, uint64_t pol) {
  const uint4* r = reinterpret_cast<const uint4*>(row);
#pragma unroll
  for (int t = 0; t < P; ++t) u[t] = lane + 32 * t < n8 ? ldg_policy(r + lane + 32 * t, pol) : make_uint4(0, 0, 0, 0);
}
// The sum over the P chunks held in u (a row's first, f16_prefetch), in row_dot's order.
template <int P>
__device__ inline float f16_dot_held(const uint4* u, const float* x, int64_t n8, int lane) {
  const float4* xv = reinterpret_cast<const float4*>(x);
  float acc = 0;
#pragma unroll
  for (int t = 0; t < P; ++t)
    if (lane + 32 * t < n8) acc = dot8_f16(u[t], xv + 2 * (lane + 32 * t), acc);
  return acc;
}
template <int P>
__device__ inline float f16_dot_prefetched(const uint4* u, const uint8_t* row, const float* x, int64_t n8, int lane,
                                          uint64_t pol) {
  return f16_dot_from(row, x, n8, lane + 32 * P, f16_dot_held<P>(u, x, n8, lane), pol);
}

// A warp's first row fetched before the kernel waits for its predecessor: P 16-byte chunks
// per lane of an F16 row (f16_wide), P / 4 rounds of Q4_0 blocks (x 8-byte aligned, as
// row_dot takes the vector path); other formats fetch nothing (on stays false). dot() then
// gives row_dot's bits for that row.
template <int F, int P>
struct RowFetch {
  uint4 u[F == 1 ? P : 1];
  Q4Prefetch<(P / 4 > 0 ? P / 4 : 1)> q;
  bool on = false;
  __device__ void fetch(const QMatMulArgs& a, const uint8_t* w, const float* x, int64_t row, int lane, uint64_t pol) {
    if constexpr (F == 1) {
      on = f16_wide<F>(a, w, x);
      if (on) f16_prefetch<P>(w + row * a.row_bytes, a.k / 8, lane, u, pol);
    } else if constexpr (F == 2) {
      on = (reinterpret_cast<uintptr_t>(x) & 7) == 0;
      if (on) q4_0_prefetch(w + row * a.row_bytes, a.k / 32, lane, q);
    }
  }
  __device__ float dot(const QMatMulArgs& a, const uint8_t* w, const float* x, int64_t row, int lane,
                      uint64_t pol) const {
    if constexpr (F == 1) return f16_dot_prefetched<P>(u, w + row * a.row_bytes, x, a.k / 8, lane, pol);
    else if constexpr (F == 2) return q4_0_dot_prefetched(q, w + row * a.row_bytes, x, a.k / 32, lane);
    else return 0.0f;
  }
  // dot() of this fetch's row (sa) and of `other`'s (sb) with the same x; F16 rows stream
  // the rest of both at once (f16_dot2_from), the same bits as two dot() calls.
  __device__ void dot2(const RowFetch& other, const QMatMulArgs& a, const uint8_t* w, const float* x, int64_t row,
                       int64_t other_row, int lane, float& sa, float& sb, uint64_t pol) const {
    if constexpr (F == 1) {
      const int64_t n8 = a.k / 8;
      sa = f16_dot_held<P>(u, x, n8, lane);
      sb = f16_dot_held<P>(other.u, x, n8, lane);
      f16_dot2_from(w + row * a.row_bytes, w + other_row * a.row_bytes, x, n8, lane + 32 * P, sa, sb, pol);
    } else {
      sa = dot(a, w, x, row, lane, pol);
      sb = other.dot(a, w, x, other_row, lane, pol);
    }
  }
};

// residual (nullable): y[o] = dot + residual[o], one f32 add after the dot as the add op
// rounds it; residual may be y itself (each element is read before it is written, by the
// lane that writes it).
template <int F, int P>
__global__ void qmatmul_kernel(QMatMulArgs a, const float* x, const uint8_t* w, const float* residual, float* y) {
  const int lane = threadIdx.x & 31;
  int64_t o = blockIdx.x * int64_t(kWarps) + threadIdx.x / 32;
  const uint64_t pol = weight_policy(a.m == 1);
  RowFetch<F, P> first;
  if (o < a.m * a.n) first.fetch(a, w, x, o % a.n, lane, pol);
  // A settled residual's element is fetched before the wait too, one trip to memory less
  // after it (TinyLlama-1.1B-shaped F16 decode on the H200: +0.8 %, alternated rounds).
  const bool early = a.residual_settled && residual && lane == 0 && o < a.m * a.n;
  const float r0 = early ? residual[o] : 0.0f;
  dev::grid_wait();
  dev::grid_next();
  if (first.on) {
    const int64_t i = o / a.n, j = o % a.n;
    const float s = warp_sum(first.dot(a, w, x + i * a.k, j, lane, pol));
    if (lane == 0) y[o] = residual ? __fadd_rn(s, early ? r0 : residual[o]) : s;
    o += int64_t(gridDim.x) * kWarps;
  }
  for (; o < a.m * a.n; o += int64_t(gridDim.x) * kWarps) {
    const int64_t i = o / a.n, j = o % a.n;
    const float s = warp_sum(row_dot<F>(w + j * a.row_bytes, x + i * a.k, a.k, lane, pol));
    if (lane == 0) y[o] = residual ? __fadd_rn(s, residual[o]) : s;
  }
}

// rms_norm of one row x [k] (scale nullable) and then qmatmul of it, for a decode step:
// every block normalizes x into shared memory exactly as the norm kernel does (inv_rms in
// the same form: a block's sum for k >= 1024, else a warp's, which each warp repeats), so
// the product reads the same bits the norm would have stored; its warps then take output
// rows as qmatmul_kernel does (each warp's first row fetched before the wait: RowFetch).
// Glu: the product's rows are two halves, gate (from row gate_row: 0 or n / 2) and up (the
// other); warp o takes row o of both and stores silu(gate) * up as the SwiGLU program
// computes it (x / (1 + exp(-x)), the product rounded): y has n / 2 elements. The early
// fetch is split between the two first rows (RowFetch<F, P / 2> each).
template <int F, int P, bool Glu>
__device__ __forceinline__ void norm_qmatmul_body(QMatMulArgs a, const float* x, const float* scale, float eps,
                                                  const uint8_t* w, float* y, int64_t gate_row) {
  extern __shared__ float4 xs4[];
  __shared__ float part[kWarps];
  float* xs = reinterpret_cast<float*>(xs4);
  const int lane = threadIdx.x & 31;
  const int64_t rows = Glu ? a.n / 2 : a.n, up_row = Glu && gate_row == 0 ? rows : 0;
  int64_t o = blockIdx.x * int64_t(kWarps) + threadIdx.x / 32;
  const uint64_t pol = weight_policy(true);     // a decode step's product (m == 1)
  RowFetch<F, Glu ? P / 2 : P> first, second;  // Glu: the up row, then the gate row
  if (o < rows) {
    first.fetch(a, w, xs, up_row + o, lane, pol);
    if constexpr (Glu) second.fetch(a, w, xs, gate_row + o, lane, pol);
  }
  // A settled scale is staged into xs before the wait, each thread the elements it
  // normalizes below (row_batches' split), so its trip to memory overlaps the predecessor
  // instead of following the wait: a norm's weights are rarely still in L2 by the next step.
  const bool early_scale = scale && a.scale_settled;
  if (early_scale)
    dev::row_batches(threadIdx.x, a.k, blockDim.x, [&](int64_t i) { return scale[i]; },
                     [&](int64_t i, float e) { xs[i] = e; });
  dev::grid_wait();
  dev::grid_next();
  const float inv = a.k >= 1024 ? dev::inv_rms<true, kWarps>(x, a.k, 0.0f, eps, part)
                                : dev::inv_rms<false, kWarps>(x, a.k, 0.0f, eps, nullptr);
  dev::row_batches(
      threadIdx.x, a.k, blockDim.x,
      [&](int64_t i) { return make_float2(x[i], early_scale ? xs[i] : scale ? scale[i] : 1.0f); },
      [&](int64_t i, float2 e) {
        float v = (e.x - 0.0f) * inv;
        if (scale) v *= e.y;
        xs[i] = v;
      });
  __syncthreads();
  const auto glu = [](float g, float up) { return __fmul_rn(g / (1.0f + expf(-g)), up); };
  if (first.on) {
    if constexpr (Glu) {
      float su, sg;
      first.dot2(second, a, w, xs, up_row + o, gate_row + o, lane, su, sg, pol);
      su = warp_sum(su);
      sg = warp_sum(sg);
      if (lane == 0) y[o] = glu(sg, su);
    } else {
      const float s = warp_sum(first.dot(a, w, xs, o, lane, pol));
      if (lane == 0) y[o] = s;
    }
    o += int64_t(gridDim.x) * kWarps;
  }
  for (; o < rows; o += int64_t(gridDim.x) * kWarps) {
    if constexpr (Glu) {
      float su = 0, sg = 0;
      if (F == 1 && first.on) {  // F16 rows of whole 16-byte chunks (f16_wide): both at once
        f16_dot2_from(w + (up_row + o) * a.row_bytes, w + (gate_row + o) * a.row_bytes, xs, a.k / 8, lane, su, sg,
                      pol);
      } else {
        su = row_dot<F>(w + (up_row + o) * a.row_bytes, xs, a.k, lane, pol);
        sg = row_dot<F>(w + (gate_row + o) * a.row_bytes, xs, a.k, lane, pol);
      }
      su = warp_sum(su);
      sg = warp_sum(sg);
      if (lane == 0) y[o] = glu(sg, su);
    } else {
      const float s = warp_sum(row_dot<F>(w + o * a.row_bytes, xs, a.k, lane, pol));
      if (lane == 0) y[o] = s;
    }
  }
}

template <int F, int P, bool Glu>
__global__ void norm_qmatmul_kernel(QMatMulArgs a, const float* x, const float* scale, float eps, const uint8_t* w,
                                    float* y, int64_t gate_row) {
  norm_qmatmul_body<F, P, Glu>(a, x, scale, eps, w, y, gate_row);
}
// The Q4_0 form, held to 80 registers, three blocks per multiprocessor (84 left two): its
// products are bound by the rate warps issue their decoding, not by memory, so more warps
// to choose from pay (ncu on an H100: the gate/up launch issued 0.52 instructions per
// scheduler and cycle). TinyLlama-1.1B-shaped Q4_0 decode on an H100, three alternated
// rounds, host loop 1,112.6 / 1,113.3 / 1,113.5 -> 1,129.4 / 1,132.1 / 1,130.2 tok/s, the
// same ids. The other formats keep the registers they take (F16: 92, two blocks).
template <int P, bool Glu>
__global__ void __launch_bounds__(32 * kWarps, 3)
    norm_qmatmul_q4_0_kernel(QMatMulArgs a, const float* x, const float* scale, float eps, const uint8_t* w, float* y,
                             int64_t gate_row) {
  norm_qmatmul_body<2, P, Glu>(a, x, scale, eps, w, y, gate_row);
}

template <int F>
__global__ void qmatmul_id_kernel(QMatMulArgs a, int64_t experts, int64_t slots, bool x_per_slot, const float* x,
                                  const uint8_t* w, const void* ids, bool ids64, float* y, int* err, int step) {
  const int lane = threadIdx.x & 31;
  const int64_t pairs = a.m;  // tokens * slots
  for (int64_t o = blockIdx.x * int64_t(kWarps) + threadIdx.x / 32; o < pairs * a.n; o += int64_t(gridDim.x) * kWarps) {
    const int64_t p = o / a.n, j = o % a.n;
    const int64_t e = ids64 ? static_cast<const int64_t*>(ids)[p] : static_cast<const int32_t*>(ids)[p];
    if (e < 0 || e >= experts) {
      if (lane == 0) {
        atomicCAS(err, 0, 1);
        atomicCAS(err + 1, 0, step);
        y[o] = 0;
      }
      continue;
    }
    const float* xr = x + (x_per_slot ? p : p / slots) * a.k;
    const float s = warp_sum(row_dot<F>(w + (e * a.n + j) * a.row_bytes, xr, a.k, lane, weight_policy(false)));
    if (lane == 0) y[o] = s;
  }
}

// Element i of the new rows [b, h, t, d] into the cache [b, h, c, d] at its sequence's
// position past[b] + t (outside [0, c - t]: recorded in err and skipped), and into
// `rounded` when that is not null. known >= 0: past[0], already read (one sequence).
template <typename T>
__device__ inline void store_row_element(const CacheWriteArgs& a, int64_t i, T v, T* rounded, const int64_t* past, T* out,
                                         int* err, int step, int64_t known = -1) {
  if (rounded) rounded[i] = v;
  const int64_t e = i % a.d, r = i / a.d, t = r % a.t, bh = r / a.t, p = known >= 0 ? known : past[bh / a.h];
  if (p < 0 || p > a.c - a.t) {
    atomicCAS(err, 0, 1);
    atomicCAS(err + 1, 0, step);
    return;
  }
  out[(bh * a.c + p + t) * a.d + e] = v;
}

// Element (row, e) of the new rows, stored at (row's sequence and head, past + its index).
// S == T: the rows as they are (T an unsigned type of the element's size); S float into a
// half type T: each rounded as the cast does, the rounded rows also stored in `rounded`
// when it is not null (the cast's own result, when other nodes read it).
template <typename S, typename T>
__global__ void cache_write_kernel(CacheWriteArgs a, const S* rows, T* rounded, const int64_t* past, T* out, int* err,
                                   int step) {
  dev::grid_wait();
  dev::grid_next();
  const int64_t total = a.rows();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    T v;
    if constexpr (std::is_same_v<S, T>) v = rows[i];
    else v = dev::stf<T>(rows[i]);
    store_row_element(a, i, v, rounded, past, out, err, step);
  }
}

// Pair i of row r (x [rows, d], position r % s): (2i, 2i+1) interleaved, else (i, i + half);
// work item t of rows * half pairs, then rows * (d - 2 half) unrotated dims copied. Each
// result goes to put(flat index, value).
template <class Put>
__device__ inline void rotary_item(const RotaryArgs& a, const float* x, const float* cs, const float* sn, int64_t t,
                                   Put put) {
  const int64_t pairs = a.rows * a.half, rest = a.d - 2 * a.half;
  if (t >= pairs) {  // the dims past the rotated ones, unchanged
    const int64_t r = (t - pairs) / rest, e = 2 * a.half + (t - pairs) % rest;
    put(r * a.d + e, x[r * a.d + e]);
    return;
  }
  const int64_t r = t / a.half, i = t % a.half, p = r % a.s;
  const int64_t i0 = a.interleaved ? 2 * i : i, i1 = a.interleaved ? 2 * i + 1 : i + a.half;
  const float x0 = x[r * a.d + i0], x1 = x[r * a.d + i1], co = cs[p * a.half + i], si = sn[p * a.half + i];
  put(r * a.d + i0, dev::rotate_first(x0, x1, co, si));
  put(r * a.d + i1, dev::rotate_second(x0, x1, co, si));
}
__device__ inline void rotary_item(const RotaryArgs& a, const float* x, const float* cs, const float* sn, float* y,
                                   int64_t t) {
  rotary_item(a, x, cs, sn, t, [y](int64_t j, float v) { y[j] = v; });
}
__host__ __device__ inline int64_t rotary_work(const RotaryArgs& a) { return a.rows * (a.half + a.d - 2 * a.half); }

__global__ void rotary_kernel(RotaryArgs a, const float* x, const float* cs, const float* sn, float* y) {
  dev::grid_wait();
  dev::grid_next();
  const int64_t work = rotary_work(a);
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < work; t += int64_t(gridDim.x) * blockDim.x)
    rotary_item(a, x, cs, sn, y, t);
}
// Two independent rotaries (a decode step's Q and K) in one launch: items [0, work(a)) of
// the first, the rest of the second.
__global__ void rotary_pair_kernel(RotaryArgs a, RotaryPtrs pa, RotaryArgs b, RotaryPtrs pb) {
  dev::grid_wait();
  dev::grid_next();
  const int64_t wa = rotary_work(a), work = wa + rotary_work(b);
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < work; t += int64_t(gridDim.x) * blockDim.x) {
    if (t < wa) rotary_item(a, pa.x, pa.cs, pa.sn, pa.y, t);
    else rotary_item(b, pb.x, pb.cs, pb.sn, pb.y, t - wa);
  }
}

// kv_store (kernels.h): items [0, wq) the Q rotary, [wq, wq + wk) the K rotary with each
// result rounded and stored into the K cache, the rest V's elements into the V cache.
template <typename T>
__global__ void kv_store_kernel(RotaryArgs qa, RotaryArgs ka, CacheWriteArgs kw, CacheWriteArgs vw, KvStorePtrs p,
                                int* err, int step) {
  // A single sequence's settled positions are read before the wait.
  const int64_t pk = kw.past_settled && kw.b == 1 ? p.k_past[0] : -1, pv = vw.past_settled && vw.b == 1 ? p.v_past[0] : -1;
  dev::grid_wait();
  dev::grid_next();
  const int64_t wq = rotary_work(qa), wk = rotary_work(ka), work = wq + wk + vw.rows();
  T* const k_rounded = static_cast<T*>(p.k_rounded);
  T* const k_out = static_cast<T*>(p.k_out);
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < work; t += int64_t(gridDim.x) * blockDim.x) {
    if (t < wq) {
      rotary_item(qa, p.q.x, p.q.cs, p.q.sn, p.q.y, t);
    } else if (t < wq + wk) {
      rotary_item(ka, p.k.x, p.k.cs, p.k.sn, t - wq, [&](int64_t j, float v) {
        if (p.k.y) p.k.y[j] = v;
        store_row_element(kw, j, dev::stf<T>(v), k_rounded, p.k_past, k_out, err, step, pk);
      });
    } else {
      const int64_t i = t - wq - wk;
      store_row_element(vw, i, dev::stf<T>(p.v[i]), static_cast<T*>(p.v_rounded), p.v_past, static_cast<T*>(p.v_out),
                        err, step, pv);
    }
  }
}

// The cache copied into `out` when the output does not share the cache's storage (the
// new rows are then written over the copy).
cudaError_t carry_cache(const CacheWriteArgs& a, size_t elem, const void* cache, void* out, cudaStream_t s) {
  if (out == cache) return cudaSuccess;
  return cudaMemcpyAsync(out, cache, size_t(a.cache()) * elem, cudaMemcpyDeviceToDevice, s);
}

}  // namespace

cudaError_t kv_store(const RotaryArgs& q, const RotaryArgs& k, const CacheWriteArgs& kw, const CacheWriteArgs& vw, ET to,
                     const KvStorePtrs& p, int* err, int step, cudaStream_t s) {
  if (to != ET::F16 && to != ET::BF16) return cudaErrorInvalidValue;
  if (const cudaError_t e = carry_cache(kw, 2, p.k_cache, p.k_out, s); e != cudaSuccess) return e;
  if (const cudaError_t e = carry_cache(vw, 2, p.v_cache, p.v_out, s); e != cudaSuccess) return e;
  const int64_t work = rotary_work(q) + rotary_work(k) + vw.rows();
  if (work == 0) return cudaSuccess;
  if (to == ET::F16) return dev::launch(kv_store_kernel<__half>, dev::grid_for(work, 256), 256, 0, s, q, k, kw, vw, p, err, step);
  return dev::launch(kv_store_kernel<__nv_bfloat16>, dev::grid_for(work, 256), 256, 0, s, q, k, kw, vw, p, err, step);
}

cudaError_t rotary(const RotaryArgs& a, const float* x, const float* cs, const float* sn, float* y, cudaStream_t s) {
  const int64_t work = rotary_work(a);
  if (work == 0) return cudaSuccess;
  return dev::launch(rotary_kernel, dev::grid_for(work, 256), 256, 0, s, a, x, cs, sn, y);
}

cudaError_t rotary_pair(const RotaryArgs& a, const RotaryPtrs& pa, const RotaryArgs& b, const RotaryPtrs& pb,
                        cudaStream_t s) {
  const int64_t work = rotary_work(a) + rotary_work(b);
  if (work == 0) return cudaSuccess;
  return dev::launch(rotary_pair_kernel, dev::grid_for(work, 256), 256, 0, s, a, pa, b, pb);
}

namespace {

// Launches cache_write_kernel<S, T> after copying the cache into `out` when the output does
// not share the cache's storage.
template <typename S, typename T>
cudaError_t write_rows(const CacheWriteArgs& a, const void* cache, const S* rows, T* rounded, const int64_t* past,
                       void* out, int* err, int step, cudaStream_t s) {
  if (const cudaError_t e = carry_cache(a, sizeof(T), cache, out, s); e != cudaSuccess) return e;
  const int64_t total = a.rows();
  if (total == 0) return cudaSuccess;
  return dev::launch(cache_write_kernel<S, T>, dev::grid_for(total, 256), 256, 0, s, a, rows, rounded, past,
                     static_cast<T*>(out), err, step);
}

}  // namespace

cudaError_t cache_write(const CacheWriteArgs& a, int elem, const void* cache, const void* rows, const int64_t* past,
                        void* out, int* err, int step, cudaStream_t s) {
  auto as = [&](auto z) {
    using T = decltype(z);
    return write_rows<T, T>(a, cache, static_cast<const T*>(rows), nullptr, past, out, err, step, s);
  };
  switch (elem) {
    case 1: return as(uint8_t{});
    case 2: return as(uint16_t{});
    case 4: return as(uint32_t{});
    case 8: return as(uint64_t{});
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t cache_write_cast(const CacheWriteArgs& a, ET to, const void* cache, const float* rows, void* rounded,
                             const int64_t* past, void* out, int* err, int step, cudaStream_t s) {
  if (to == ET::F16)
    return write_rows(a, cache, rows, static_cast<__half*>(rounded), past, out, err, step, s);
  if (to == ET::BF16)
    return write_rows(a, cache, rows, static_cast<__nv_bfloat16*>(rounded), past, out, err, step, s);
  return cudaErrorInvalidValue;
}

namespace {

// make(std::integral_constant<int, F>{}) for the weight format F of a call, one of the GGUF
// type ids the kernels are instantiated for (the formats the lowering claims: every format
// the CPU reads, src/ir/quant/dequant.cpp); nullptr for any other.
template <class Make>
auto for_format(int format, Make make) -> decltype(make(std::integral_constant<int, 0>{})) {
  switch (format) {
    case 0: return make(std::integral_constant<int, 0>{});
    case 1: return make(std::integral_constant<int, 1>{});
    case 2: return make(std::integral_constant<int, 2>{});
    case 3: return make(std::integral_constant<int, 3>{});
    case 6: return make(std::integral_constant<int, 6>{});
    case 7: return make(std::integral_constant<int, 7>{});
    case 8: return make(std::integral_constant<int, 8>{});
    case 12: return make(std::integral_constant<int, 12>{});
    case 13: return make(std::integral_constant<int, 13>{});
    case 14: return make(std::integral_constant<int, 14>{});
    case 10: return make(std::integral_constant<int, 10>{});
    case 11: return make(std::integral_constant<int, 11>{});
    case 20: return make(std::integral_constant<int, 20>{});
    case 23: return make(std::integral_constant<int, 23>{});
    case 28: return make(std::integral_constant<int, 28>{});
    case 30: return make(std::integral_constant<int, 30>{});
    default: return nullptr;
  }
}
// The F16 products fetch a row's first 8 x 16 bytes per lane before they wait for their
// predecessor (the whole row at k = 2048): TinyLlama-1.1B-shaped F16 decode on the H200
// 730-749 -> 784-801 tok/s against 4 chunks, in alternated runs.
constexpr int kPrefetch = 8;
const auto kQMatMul = [](auto f) { return &qmatmul_kernel<decltype(f)::value, kPrefetch>; };
template <int F, bool Glu>
auto norm_qmatmul_entry() {
  if constexpr (F == 2) return &norm_qmatmul_q4_0_kernel<kPrefetch, Glu>;
  else return &norm_qmatmul_kernel<F, kPrefetch, Glu>;
}
const auto kNormQMatMul = [](auto f) { return norm_qmatmul_entry<decltype(f)::value, false>(); };
const auto kNormQMatMulGlu = [](auto f) { return norm_qmatmul_entry<decltype(f)::value, true>(); };
auto norm_qmatmul_for(int format, bool glu) {
  return glu ? for_format(format, kNormQMatMulGlu) : for_format(format, kNormQMatMul);
}
const auto kQMatMulId = [](auto f) { return &qmatmul_id_kernel<decltype(f)::value>; };

}  // namespace

bool qmatmul_format(int format) { return for_format(format, kQMatMul) != nullptr; }

namespace {

// Dynamic shared memory (unused by the kernel) that lets at most `blocks` blocks of a
// kernel share a multiprocessor: the F16 product runs faster with fewer resident blocks
// than its registers allow, its rows then spread over every multiprocessor rather than
// piled on some (TinyLlama-1.1B-shaped F16 decode on the H200, alternated rounds: three
// blocks 754-758 -> 765-767 tok/s against five; with 8-chunk load groups and the batched
// norm loads, two blocks 951 / 960 / 954 against three 923 / 942 / 949, four 830-839
// against three 867-869; one block: 591). 0 when the device cannot be asked.
size_t occupancy_cap_bytes(int blocks) {
  static const size_t per_sm = [] {
    int dev = 0, b = 0;
    return cudaGetDevice(&dev) == cudaSuccess &&
                   cudaDeviceGetAttribute(&b, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev) == cudaSuccess
               ? size_t(b)
               : size_t(0);
  }();
  return per_sm ? per_sm / size_t(blocks + 1) + 1 : 0;
}

}  // namespace

cudaError_t qmatmul(const QMatMulArgs& a, const float* x, const uint8_t* w, const float* residual, float* y,
                    cudaStream_t s) {
  const auto k = for_format(a.format, kQMatMul);
  if (!k) return cudaErrorInvalidValue;
  if (a.m * a.n == 0) return cudaSuccess;
  size_t smem = 0;
  if (a.format == 1) {
    static const size_t cap = [k] {
      const size_t b = occupancy_cap_bytes(2);
      return b && cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(b)) == cudaSuccess
                 ? b
                 : (cudaGetLastError(), size_t(0));
    }();
    smem = cap;
  }
  return dev::launch(k, dev::grid_for(a.m * a.n, kWarps), 32 * kWarps, smem, s, a, x, w, residual, y);
}

unsigned norm_qmatmul_grid(const QMatMulArgs& a, bool glu) {
  // As many blocks as are resident at once (each normalizes the row once, then takes rows
  // until none are left), fewer when the rows run out first.
  const auto k = norm_qmatmul_for(a.format, glu);
  if (!k) return 0;  // norm_qmatmul refuses a grid of 0
  int per_sm = 1;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, 32 * kWarps, size_t(a.k) * sizeof(float)) != cudaSuccess ||
      per_sm < 1) {
    cudaGetLastError();  // the failed query's own error, not a kernel's
    per_sm = 1;
  }
  return std::min<unsigned>(dev::grid_for(glu ? a.n / 2 : a.n, kWarps), unsigned(dev::sm_count() * per_sm));
}

cudaError_t norm_qmatmul(const QMatMulArgs& a, unsigned grid, const float* x, const float* scale, float eps,
                         const uint8_t* w, float* y, cudaStream_t s, int64_t gate_row) {
  const bool glu = gate_row >= 0;
  const auto k = norm_qmatmul_for(a.format, glu);
  if (!k || a.m != 1 || a.k > kNormQMatMulMaxK || grid == 0 ||
      (glu && (a.n % 2 != 0 || (gate_row != 0 && gate_row != a.n / 2))))
    return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  return dev::launch(k, grid, 32 * kWarps, size_t(a.k) * sizeof(float), s, a, x, scale, eps, w, y, gate_row);
}

cudaError_t qmatmul_id(const QMatMulArgs& a, int64_t experts, int64_t slots, bool x_per_slot, const float* x,
                       const uint8_t* w, const void* ids, bool ids64, float* y, int* err, int step, cudaStream_t s) {
  const auto k = for_format(a.format, kQMatMulId);
  if (!k) return cudaErrorInvalidValue;
  if (a.m * a.n == 0) return cudaSuccess;
  k<<<dev::grid_for(a.m * a.n, kWarps), 32 * kWarps, 0, s>>>(a, experts, slots, x_per_slot, x, w, ids, ids64, y, err, step);
  return cudaGetLastError();
}

}  // namespace rlx::cuda
