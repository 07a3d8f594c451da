// Spatial and index kernels of the CUDA backend: convolution (group 1: im2col into the
// executable's scratch, then one cuBLASLt product per chunk of images, lower_compute.cpp,
// on tensor cores for f16 / bf16 / TF32; grouped and depthwise: direct, one thread per
// output element, f32 accumulation over input channel, kernel row, column), pooling, pad,
// and argmax / argmin (a long row over a cluster of blocks). Not yet: implicit GEMM without
// the col buffer, fused activations.
#include <cooperative_groups.h>

#include <algorithm>
#include <cstdint>
#include <cuda/std/limits>
#include <type_traits>

#include "backends/cuda/device_util.cuh"
#include "backends/cuda/kernels.h"

namespace rlx::cuda {
namespace {

using dev::Elem;
using dev::ldf;
using dev::offset_of;
using dev::stf;

using dev::grid_for;
namespace cg = cooperative_groups;

// col rows k = (ci * kh + ky) * kw + kx (rows k >= K, the padding up to kp, are zeros),
// columns p = oy * ow + ox, for image n0 + i: col[i][k][p], or col[k][i * P + p] when
// `folded`. A block row per (k, image): the tap is decoded once per block, each thread
// divides only p.
template <class T>
__global__ void im2col_kernel(ConvArgs a, const T* x, int64_t n0, int64_t images, T* col, int64_t kp, bool folded) {
  const int64_t P = a.oh * a.ow, K = a.c * a.kh * a.kw;
  const int ow = int(a.ow);
  for (int64_t img = blockIdx.z; img < images; img += gridDim.z)
    for (int64_t k = blockIdx.y; k < kp; k += gridDim.y) {
      T* cp = folded ? col + k * images * P + img * P : col + (img * kp + k) * P;
      if (k >= K) {
        for (int64_t p = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; p < P; p += int64_t(gridDim.x) * blockDim.x)
          cp[p] = T(0);
        continue;
      }
      // 32-bit decoding (K and the plane sizes are far below 2^31; 64-bit division is slow).
      const int kw = int(a.kw), kh = int(a.kh), k32 = int(k);
      const int kx = k32 % kw, ky = (k32 / kw) % kh, ci = k32 / (kw * kh);
      const T* xp = x + ((n0 + img) * a.c + ci) * a.h * a.w;
      const int dy = ky * int(a.dh) - int(a.pt), dx = kx * int(a.dw) - int(a.pl);
      const int sh = int(a.sh), sw = int(a.sw), h = int(a.h), w = int(a.w), P32 = int(P);
      for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < P32; p += gridDim.x * blockDim.x) {
        const int oy = p / ow, ox = p - oy * ow;
        const int iy = oy * sh + dy, ix = ox * sw + dx;
        cp[p] = (iy >= 0 && iy < h && ix >= 0 && ix < w) ? xp[iy * w + ix] : T(0);
      }
    }
}

template <class T>
__global__ void channel_bias_kernel(const T* bias, T* y, int64_t cout, int64_t p, int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = stf<T>(ldf(y[i]) + ldf(bias[(i / p) % cout]));
}

template <class T>
__global__ void conv2d_kernel(ConvArgs a, const T* x, const T* w, const T* bias, T* y) {
  const int64_t total = a.n * a.cout * a.oh * a.ow;
  const int64_t cg = a.c / a.group, og = a.cout / a.group;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ox = i % a.ow, oy = (i / a.ow) % a.oh, co = (i / (a.ow * a.oh)) % a.cout, n = i / (a.ow * a.oh * a.cout);
    const int64_t g = co / og;
    // f64 as the CPU oracle's direct loops: the bias first, then each product rounded and
    // added in (channel, row, column) order; the float types by fma in f32, the bias last.
    constexpr bool f64 = std::is_same_v<T, double>;
    using A = std::conditional_t<f64, double, float>;
    A acc = f64 && bias ? A(bias[co]) : A(0);
    for (int64_t ci = 0; ci < cg; ++ci) {
      const T* xp = x + ((n * a.c + g * cg + ci) * a.h) * a.w;
      const T* wp = w + ((co * cg + ci) * a.kh) * a.kw;
      for (int64_t ky = 0; ky < a.kh; ++ky) {
        const int64_t iy = oy * a.sh - a.pt + ky * a.dh;
        if (iy < 0 || iy >= a.h) continue;
        for (int64_t kx = 0; kx < a.kw; ++kx) {
          const int64_t ix = ox * a.sw - a.pl + kx * a.dw;
          if (ix < 0 || ix >= a.w) continue;
          if constexpr (f64) acc = __dadd_rn(acc, __dmul_rn(wp[ky * a.kw + kx], xp[iy * a.w + ix]));
          else acc = fmaf(ldf(xp[iy * a.w + ix]), ldf(wp[ky * a.kw + kx]), acc);
        }
      }
    }
    if constexpr (f64) y[i] = acc;
    else y[i] = stf<T>(bias ? acc + ldf(bias[co]) : acc);
  }
}

// Taps [lo, hi) of a window (tap t at start + t*d) inside [0, n); `padded`: inside the
// padded extent [-pad_begin, n + pad_end).
struct Taps {
  int64_t lo, hi, padded;
};
__device__ inline Taps taps(int64_t start, int64_t k, int64_t d, int64_t n, int64_t pb, int64_t pe) {
  if (d == 1) {  // the same bounds without the 64-bit divisions (a pool was bound by them: ResNet-50's took 178 us)
    const int64_t lo = min(k, max(int64_t(0), -start)), hi = max(lo, min(k, n - start));
    const int64_t plo = min(k, max(int64_t(0), -pb - start)), phi = max(plo, min(k, n + pe - start));
    return {lo, hi, phi - plo};
  }
  auto first_at_least = [&](int64_t bound) { return bound <= start ? int64_t(0) : (bound - start + d - 1) / d; };
  const int64_t lo = min(k, first_at_least(0)), hi = max(lo, min(k, first_at_least(n)));
  const int64_t plo = min(k, first_at_least(-pb)), phi = max(plo, min(k, first_at_least(n + pe)));
  return {lo, hi, phi - plo};
}

// An element as the pool, arg-reduction and top-k kernels hold it: the half types in f32
// (exact; and the CPU oracle pools them in f32), every other type as itself (f64, the
// integers, bool). widen() / narrow<T>() convert to and from it.
template <class T>
using Wide = std::conditional_t<std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>, float, T>;
template <class T>
__device__ inline Wide<T> widen(T v) {
  if constexpr (std::is_same_v<Wide<T>, T>) return v;
  else return ldf(v);
}
template <class T>
__device__ inline T narrow(Wide<T> v) {
  if constexpr (std::is_same_v<Wide<T>, T>) return v;
  else return stf<T>(v);
}

// Output element i is (plane p, row oy, column ox, channel ch) with ch innermost (a.c = 1:
// NCHW planes; a.c = C: NHWC, neighbouring threads reading neighbouring channels).
template <class T>
__global__ void pool2d_kernel(PoolArgs a, const T* x, T* y) {
  const int64_t total = a.planes * a.oh * a.ow * a.c;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t ox, oy, p, ch;
    if (total <= 0x7fffffff) {  // 32-bit division where it fits (64-bit costs several times more)
      const unsigned c = unsigned(a.c), j0 = unsigned(i), j = j0 / c, ow = unsigned(a.ow), oh = unsigned(a.oh),
                     q = j / ow;
      ch = j0 - j * c, ox = j - q * ow, oy = q % oh, p = q / oh;
    } else {
      const int64_t j = i / a.c;
      ch = i % a.c, ox = j % a.ow, oy = (j / a.ow) % a.oh, p = j / (a.ow * a.oh);
    }
    const int64_t y0 = oy * a.sh - a.pt, x0 = ox * a.sw - a.pl;
    const Taps ty = taps(y0, a.kh, a.dh, a.h, a.pt, a.pb), tx = taps(x0, a.kw, a.dw, a.w, a.pl, a.pr);
    const T* xp = x + p * a.h * a.w * a.c + ch;
    using A = Wide<T>;  // integers: max pooling only (the CPU has no integer average)
    if (a.is_max) {
      A m;
      if constexpr (std::is_integral_v<A>) m = ::cuda::std::numeric_limits<A>::lowest();
      else m = A(-INFINITY);
      for (int64_t ky = ty.lo; ky < ty.hi; ++ky)
        for (int64_t kx = tx.lo; kx < tx.hi; ++kx) {
          const A v = widen(xp[((y0 + ky * a.dh) * a.w + x0 + kx * a.dw) * a.c]);
          if (v > m || v != v) m = v;
        }
      y[i] = narrow<T>(m);
    } else if constexpr (!std::is_integral_v<A>) {
      A s = 0;
      for (int64_t ky = ty.lo; ky < ty.hi; ++ky)
        for (int64_t kx = tx.lo; kx < tx.hi; ++kx) s += widen(xp[((y0 + ky * a.dh) * a.w + x0 + kx * a.dw) * a.c]);
      const int64_t count = a.count_include_pad ? ty.padded * tx.padded : (ty.hi - ty.lo) * (tx.hi - tx.lo);
      y[i] = narrow<T>(count > 0 ? s / A(count) : A(0));
    }
  }
}

// Channels last with C a multiple of a 16-byte vector: each thread pools one vector of V
// neighbouring channels (one 16-byte load per tap), in the scalar kernel's order per channel
// (the same compare-and-select, NaN kept; the same f32 sum and count), so the same bits.
template <class T>
__global__ void pool2d_vec_kernel(PoolArgs a, const T* x, T* y) {
  constexpr int V = 16 / sizeof(T);
  const int64_t cv = a.c / V, total = a.planes * a.oh * a.ow * cv;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t ox, oy, p, ch;
    if (total <= 0x7fffffff) {
      const unsigned c = unsigned(cv), j0 = unsigned(i), j = j0 / c, ow = unsigned(a.ow), oh = unsigned(a.oh),
                     q = j / ow;
      ch = j0 - j * c, ox = j - q * ow, oy = q % oh, p = q / oh;
    } else {
      const int64_t j = i / cv;
      ch = i % cv, ox = j % a.ow, oy = (j / a.ow) % a.oh, p = j / (a.ow * a.oh);
    }
    const int64_t y0 = oy * a.sh - a.pt, x0 = ox * a.sw - a.pl;
    const Taps ty = taps(y0, a.kh, a.dh, a.h, a.pt, a.pb), tx = taps(x0, a.kw, a.dw, a.w, a.pl, a.pr);
    const T* xp = x + p * a.h * a.w * a.c + ch * V;
    float acc[V];
#pragma unroll
    for (int e = 0; e < V; ++e) acc[e] = a.is_max ? -INFINITY : 0.0f;
    for (int64_t ky = ty.lo; ky < ty.hi; ++ky)
      for (int64_t kx = tx.lo; kx < tx.hi; ++kx) {
        const uint4 raw = *reinterpret_cast<const uint4*>(xp + ((y0 + ky * a.dh) * a.w + x0 + kx * a.dw) * a.c);
        const T* v = reinterpret_cast<const T*>(&raw);
#pragma unroll
        for (int e = 0; e < V; ++e) {
          const float f = ldf(v[e]);
          if (a.is_max) {
            if (f > acc[e] || f != f) acc[e] = f;
          } else {
            acc[e] += f;
          }
        }
      }
    const int64_t count = a.count_include_pad ? ty.padded * tx.padded : (ty.hi - ty.lo) * (tx.hi - tx.lo);
    uint4 out;
    T* o = reinterpret_cast<T*>(&out);
#pragma unroll
    for (int e = 0; e < V; ++e)
      o[e] = stf<T>(a.is_max ? acc[e] : count > 0 ? acc[e] / float(count) : 0.0f);
    *reinterpret_cast<uint4*>(y + i * V) = out;
  }
}

template <int E>
__global__ void pad_kernel(const void* xv, Iter in, PadArgs a, void* yv, Iter out) {
  using T = typename Elem<E>::T;
  const T* x = static_cast<const T*>(xv);
  T* y = static_cast<T*>(yv);
  T fill;
  memcpy(&fill, &a.fill, E);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < out.numel; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = i, src = 0, stride = 1;
    bool outside = false;
#pragma unroll
    for (int k = kMaxRank - 1; k >= 0; --k) {  // constant indices (see dev::offset_of)
      if (k >= out.rank) continue;
      const int64_t o = r % out.dims[k], n = in.dims[k];
      r /= out.dims[k];
      int64_t s = o - a.begin[k];
      if (s < 0 || s >= n) {
        if (a.mode == 0 || n == 0) {
          outside = true;
        } else if (a.mode == 2) {
          s = s < 0 ? 0 : n - 1;
        } else if (n == 1) {
          s = 0;
        } else {  // reflect about the edges, excluding them (period 2(n-1))
          const int64_t period = 2 * (n - 1);
          s %= period;
          if (s < 0) s += period;
          if (s >= n) s = period - s;
        }
      }
      src += s * stride;
      stride *= n;
    }
    y[i] = outside ? fill : x[src];
  }
}

// (v, i) ranks before (w, j) in arg_kernel's scan order: NaN above every number (the first
// NaN, or the last with `last`), then the larger (max) or smaller value, then the lower index
// (the higher with `last`). A total order, so any split of the scan gives arg_kernel's answer.
template <class V>
__device__ inline bool arg_before(bool is_max, bool last, V v, int64_t i, V w, int64_t j) {
  const bool vn = v != v, wn = w != w;
  if (vn || wn) return vn && wn ? (last ? i > j : i < j) : vn;
  if (v != w) return is_max ? v > w : v < w;
  return last ? i > j : i < j;
}

// One block per output for long rows (a vocabulary's logits): the threads scan strided
// elements, kArgLoads loads in flight each before their comparisons (one load at a time left a
// 32,000-element row at ~50 us, a memory round trip per element), then the block keeps the
// first candidate in arg_before's order.
constexpr int kArgThreads = 1024, kArgLoads = 8;
// (b, bi) updated with elements [from, to) of the row at `base` (stride `inner`), thread t
// taking from + t, + step, ...; bi < 0: no candidate yet.
__device__ inline void arg_scan(bool is_max, bool last, const float* x, int64_t base, int64_t inner, int64_t from,
                                int64_t to, float& b, int64_t& bi) {
  const int64_t step = blockDim.x;
  for (int64_t k0 = from + threadIdx.x; k0 < to; k0 += step * kArgLoads) {
    float v[kArgLoads];
#pragma unroll
    for (int u = 0; u < kArgLoads; ++u) v[u] = k0 + u * step < to ? x[base + (k0 + u * step) * inner] : 0.0f;
#pragma unroll
    for (int u = 0; u < kArgLoads; ++u) {
      const int64_t k = k0 + u * step;
      if (k < to && (bi < 0 || arg_before(is_max, last, v[u], k, b, bi))) b = v[u], bi = k;
    }
  }
}
// The first of the warp's candidates in arg_before's order, in every lane.
__device__ inline void arg_warp_merge(bool is_max, bool last, float& b, int64_t& bi) {
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xFFFFFFFFu, b, o);
    const int64_t oi = __shfl_xor_sync(0xFFFFFFFFu, bi, o);
    if (oi >= 0 && (bi < 0 || arg_before(is_max, last, ov, oi, b, bi))) b = ov, bi = oi;
  }
}
__global__ void __launch_bounds__(kArgThreads) arg_block_kernel(bool is_max, bool last, const float* x, int64_t outer,
                                                                int64_t n, int64_t inner, int64_t* y) {
  __shared__ float sv[kArgThreads / 32];
  __shared__ int64_t si[kArgThreads / 32];
  for (int64_t c = blockIdx.x; c < outer * inner; c += gridDim.x) {
    const int64_t base = (c / inner) * n * inner + c % inner;
    float b = 0;
    int64_t bi = -1;
    arg_scan(is_max, last, x, base, inner, 0, n, b, bi);
    arg_warp_merge(is_max, last, b, bi);
    if ((threadIdx.x & 31) == 0) sv[threadIdx.x / 32] = b, si[threadIdx.x / 32] = bi;
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < int(blockDim.x / 32); ++w)
        if (si[w] >= 0 && (bi < 0 || arg_before(is_max, last, sv[w], si[w], b, bi))) b = sv[w], bi = si[w];
      y[c] = bi;
    }
    __syncthreads();
  }
}

// A long row with few outputs (a decode step's logits: one row of 32,000) over a cluster of
// kArgCluster blocks: block r scans the row's r-th span as arg_block_kernel scans a row, and
// block 0 takes the first of the blocks' candidates in arg_before's order (a total order, so
// the same index as one block), reading them from the others' shared memory. One block alone
// was bound by its own comparisons (12.8 us for 32,000 elements on an H100).
constexpr int kArgCluster = 8;
__global__ void __launch_bounds__(kArgThreads) arg_cluster_kernel(bool is_max, bool last, const float* x, int64_t n,
                                                                  int64_t inner, int64_t* y) {
  __shared__ float sv[kArgThreads / 32];
  __shared__ int64_t si[kArgThreads / 32];
  dev::grid_wait();
  const cg::cluster_group cluster = cg::this_cluster();
  const int rank = int(cluster.block_rank());
  const int64_t c = blockIdx.x / kArgCluster;  // the output
  const int64_t base = (c / inner) * n * inner + c % inner;
  const int64_t span = (n + kArgCluster - 1) / kArgCluster, from = rank * span, to = from + span < n ? from + span : n;
  float b = 0;
  int64_t bi = -1;
  arg_scan(is_max, last, x, base, inner, from, to, b, bi);
  arg_warp_merge(is_max, last, b, bi);
  if ((threadIdx.x & 31) == 0) sv[threadIdx.x / 32] = b, si[threadIdx.x / 32] = bi;
  cluster.sync();  // every block's candidates written and visible to the cluster
  if (rank == 0 && threadIdx.x < 32) {
    // Lane l takes warp l's candidate of every block; then the lanes merge.
    b = 0;
    bi = -1;
    for (int r = 0; r < kArgCluster; ++r) {
      const float ov = cluster.map_shared_rank(&sv[0], r)[threadIdx.x];
      const int64_t oi = cluster.map_shared_rank(&si[0], r)[threadIdx.x];
      if (oi >= 0 && (bi < 0 || arg_before(is_max, last, ov, oi, b, bi))) b = ov, bi = oi;
    }
    arg_warp_merge(is_max, last, b, bi);
    if (threadIdx.x == 0) y[c] = bi;
  }
  cluster.sync();  // no block leaves while block 0 still reads its shared memory
}

template <class T>
__global__ void arg_kernel(bool is_max, bool last, const T* x, int64_t outer, int64_t n, int64_t inner, int64_t* y) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < outer * inner; c += int64_t(gridDim.x) * blockDim.x) {
    const int64_t base = (c / inner) * n * inner + c % inner;
    Wide<T> b = widen(x[base]);
    int64_t bi = 0;
    for (int64_t k = 1; k < n; ++k) {
      const Wide<T> v = widen(x[base + k * inner]);
      if (arg_before(is_max, last, v, k, b, bi)) b = v, bi = k;
    }
    y[c] = bi;
  }
}

// The CPU's total order for topk: NaN ranks first when largest (last otherwise), equal keys
// by index. True when (va, a) comes before (vb, b).
template <class V>
__device__ inline bool topk_before(bool largest, V va, int64_t a, V vb, int64_t b) {
  const bool na = va != va, nb = vb != vb;
  if (na || nb) return (na && nb) ? a < b : (largest ? na : nb);
  if (va != vb) return largest ? va > vb : va < vb;
  return a < b;
}

// One thread per row of [outer, n, inner]: the j-th output is the first element, in that
// order, after the (j-1)-th (selection: k passes over the row).
template <class T>
__global__ void topk_kernel(bool largest, const T* x, int64_t outer, int64_t n, int64_t inner, int64_t k, T* vals,
                            int64_t* idx) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < outer * inner; r += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = r / inner, i = r % inner;
    const T* src = x + o * n * inner + i;
    int64_t prev = -1;
    Wide<T> pv = 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t best = -1;
      Wide<T> bv = 0;
      for (int64_t c = 0; c < n; ++c) {
        const Wide<T> v = widen(src[c * inner]);
        if (prev >= 0 && !topk_before(largest, pv, prev, v, c)) continue;
        if (best < 0 || topk_before(largest, v, c, bv, best)) best = c, bv = v;
      }
      vals[(o * k + j) * inner + i] = src[best * inner];
      idx[(o * k + j) * inner + i] = best;
      prev = best;
      pv = bv;
    }
  }
}

}  // namespace

cudaError_t topk(bool largest, ET t, const void* x, int64_t outer, int64_t n, int64_t inner, int64_t k, void* vals,
                 int64_t* idx, cudaStream_t s) {
  if (outer * inner * k == 0) return cudaSuccess;
  return dev::by_type(t, [&](auto z) {
    using T = decltype(z);
    topk_kernel<<<grid_for(outer * inner, 128), 128, 0, s>>>(largest, static_cast<const T*>(x), outer, n, inner, k,
                                                            static_cast<T*>(vals), idx);
  });
}

using dev::by_float;

cudaError_t conv2d(const ConvArgs& a, ET t, const void* x, const void* wt, const void* bias, void* y, cudaStream_t s) {
  const int64_t total = a.n * a.cout * a.oh * a.ow;
  if (total == 0) return cudaSuccess;
  auto run = [&](auto z) {
    using T = decltype(z);
    conv2d_kernel<<<grid_for(total, 128), 128, 0, s>>>(a, static_cast<const T*>(x), static_cast<const T*>(wt),
                                                        static_cast<const T*>(bias), static_cast<T*>(y));
  };
  if (t != ET::F64) return by_float(t, run);
  run(double{});
  return cudaGetLastError();
}

cudaError_t im2col(const ConvArgs& a, int elem, const void* x, int64_t n0, int64_t images, void* col, int64_t kp,
                   bool folded, cudaStream_t s) {
  const int64_t P = a.oh * a.ow;
  if (images * kp * P == 0) return cudaSuccess;
  // Decoded in 32 bits (im2col_kernel): refuse what does not fit.
  if (P > 0x7fffffff || kp > 0x7fffffff || a.h * a.w > 0x7fffffff || a.oh * a.sh + a.kh * a.dh > 0x7fffffff)
    return cudaErrorInvalidValue;
  const dim3 g(unsigned(std::min<int64_t>((P + 255) / 256, 64)), unsigned(std::min<int64_t>(kp, 65535)),
               unsigned(std::min<int64_t>(images, 65535)));
  if (elem == 4)
    im2col_kernel<<<g, 256, 0, s>>>(a, static_cast<const float*>(x), n0, images, static_cast<float*>(col), kp, folded);
  else if (elem == 2)
    im2col_kernel<<<g, 256, 0, s>>>(a, static_cast<const __half*>(x), n0, images, static_cast<__half*>(col), kp, folded);
  else return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t add_channel_bias(ET t, const void* bias, void* y, int64_t n, int64_t cout, int64_t p, cudaStream_t s) {
  const int64_t total = n * cout * p;
  if (total == 0) return cudaSuccess;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    channel_bias_kernel<<<grid_for(total, 256), 256, 0, s>>>(static_cast<const T*>(bias), static_cast<T*>(y), cout, p,
                                                             total);
  });
}

cudaError_t pool2d(const PoolArgs& a, ET t, const void* x, void* y, cudaStream_t s) {
  const int64_t total = a.planes * a.oh * a.ow * a.c;
  if (total == 0) return cudaSuccess;
  const bool aligned = dev::aligned16(x) && dev::aligned16(y);
  if (t != ET::F32 && t != ET::F16 && t != ET::BF16) {  // f64, and the integers' max pooling: the scalar kernel
    if (!a.is_max && t != ET::F64) return cudaErrorInvalidValue;
    return dev::by_type(t, [&](auto z) {
      using T = decltype(z);
      pool2d_kernel<<<grid_for(total, 256), 256, 0, s>>>(a, static_cast<const T*>(x), static_cast<T*>(y));
    });
  }
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    constexpr int V = 16 / sizeof(T);
    if (a.c > 1 && a.c % V == 0 && aligned)
      pool2d_vec_kernel<<<grid_for(total / V, 256), 256, 0, s>>>(a, static_cast<const T*>(x), static_cast<T*>(y));
    else
      pool2d_kernel<<<grid_for(total, 256), 256, 0, s>>>(a, static_cast<const T*>(x), static_cast<T*>(y));
  });
}

cudaError_t pad(int elem, const void* x, const Iter& in, const PadArgs& a, void* y, const Iter& out, cudaStream_t s) {
  if (out.numel == 0) return cudaSuccess;
  const unsigned g = grid_for(out.numel, 256);
  switch (elem) {
    case 1: pad_kernel<1><<<g, 256, 0, s>>>(x, in, a, y, out); break;
    case 2: pad_kernel<2><<<g, 256, 0, s>>>(x, in, a, y, out); break;
    case 4: pad_kernel<4><<<g, 256, 0, s>>>(x, in, a, y, out); break;
    case 8: pad_kernel<8><<<g, 256, 0, s>>>(x, in, a, y, out); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t arg_reduce(bool is_max, bool select_last, ET t, const void* xv, int64_t outer, int64_t n, int64_t inner,
                       int64_t* y, cudaStream_t s) {
  if (outer * inner == 0) return cudaSuccess;
  if (t != ET::F32)  // the other types: a thread per output
    return dev::by_type(t, [&](auto z) {
      using T = decltype(z);
      arg_kernel<<<grid_for(outer * inner, 256), 256, 0, s>>>(is_max, select_last, static_cast<const T*>(xv), outer, n,
                                                             inner, y);
    });
  const auto* x = static_cast<const float*>(xv);
  // A thread per output scans its row alone: for long rows with few outputs, a block each.
  if (n >= 8192 && outer * inner <= 64 && clusters()) {
    cudaLaunchAttribute attr[2];
    const cudaLaunchConfig_t cfg =
        cluster_config(dim3(unsigned(outer * inner * kArgCluster)), dim3(kArgThreads), kArgCluster, s, attr);
    return cudaLaunchKernelEx(&cfg, arg_cluster_kernel, is_max, select_last, x, n, inner, y);
  }
  if (n >= 2048 && outer * inner <= 4096) {
    arg_block_kernel<<<unsigned(outer * inner), kArgThreads, 0, s>>>(is_max, select_last, x, outer, n, inner, y);
    return cudaGetLastError();
  }
  arg_kernel<<<grid_for(outer * inner, 256), 256, 0, s>>>(is_max, select_last, x, outer, n, inner, y);
  return cudaGetLastError();
}

}  // namespace rlx::cuda
