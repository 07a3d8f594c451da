// The MLP of a TinyLlama-1.1B-shaped F16 decode step, without rlx, in two schedules, to decide
// before rlx's kernels change whether removing the boundary between the gate/up product and the
// down product pays. 22 layers of distinct weights (gate/up 11264 x 2048, down 2048 x 5632: 69.2
// MB a layer, 1.52 GB a stack, so nothing stays in L2), x f32, one token:
//   (A) rlx's form: a gate/up launch (a warp per gate/up row pair, SwiGLU, its first pair's
//       chunks fetched before the wait for the launch before) and a down launch (a warp per
//       output row plus the residual, its first 8 chunks a lane fetched before the wait), both
//       under programmatic dependent launch;
//   (B) K-split: one launch in which block b takes a contiguous range of about 22 gate/up pairs,
//       makes their SwiGLU values in shared memory and multiplies them at once by the same rows
//       of the down matrix stored transposed (2048 wide, copied into shared memory by cp.async
//       while the pairs stream), writing a partial 2048-vector; then a small launch adds the
//       partials in a fixed order plus the residual. The down weights then stream with the
//       gate/up weights instead of after a boundary; the cost is 2.1 MB of partials a layer and
//       a short launch.
// Variants of B: when the down rows' copies are issued (after the wait, before it, or each
// with its pair), 16 warps at one block a multiprocessor, and B without the addition of the
// partials (timing only). Each schedule is recorded once into a CUDA graph (44 launches) and
// replayed; B's outputs after 22 layers are compared with A's (their sums run in different
// orders: agreement to ~1e-6 relative). Prints ms a stack, the weights' TB/s, and the copy
// rate measured alike.
// A and B read rows with rlx's own device functions (backends/cuda/quant_dot.cuh and
// device_util.cuh), so it builds against the source tree:
//   nvcc -O3 -arch=sm_90a -std=c++17 -Isrc -Iinclude -o mlp_ksplit bench/gpu/mlp_ksplit.cu && ./mlp_ksplit
// (the build makes it too, as build/bench/rlx_bench_mlp_ksplit, whenever it makes the CUDA backend).
// Measured in session 50 on an H100, on the harness's first build, which carried its own copies
// of those loops (the same loads, order and arithmetic; A's kernels at 58 and 48 registers, B's
// at 100, against 70, 52 and 124 now; copy 3,015 GB/s; three rounds, round 3): A 0.743 ms
// (2,049 GB/s); B 0.690-0.697 (x1.07-1.08), the row-with-its-pair form 0.685 (x1.08); 16
// warps a block 0.689-0.708; without the addition 0.617-0.622 (x1.20). But A is not rlx:
// rlx's own gate/up and down launches take 28.5 us a layer in its decode step (a kernel
// trace), A 33.8. Built into rlx (the down matrix transposed at load, the norm, gate/up,
// SwiGLU and split down product as one launch, a second adding the partials) the split
// form took 29.2 us plus 5.7 for the addition, and the step ran at 0.867 of the two-launch
// form (docs/performance.md, session 50): this harness overstates the split's gain.
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backends/cuda/device_util.cuh"
#include "backends/cuda/quant_dot.cuh"

namespace {

// rlx's own device pieces, so that A streams and sums exactly as rlx's products do.
using rlx::cuda::dev::copy16_async;
using rlx::cuda::dev::copy_async_wait;
using rlx::cuda::dev::grid_next;
using rlx::cuda::dev::grid_wait;
using rlx::cuda::dev::warp_sum;
using rlx::cuda::qdot::dot8_f16;
using rlx::cuda::qdot::f16_dot2_from;
using rlx::cuda::qdot::f16_dot_from;
using rlx::cuda::qdot::ldg_policy;
using rlx::cuda::qdot::weight_policy;

constexpr int H = 2048, F = 5632, L = 22, W = 8;  // hidden, feed-forward, layers, warps a block
constexpr int H8 = H / 8, F8 = F / 8;             // 16-byte chunks a row

#define CK(e)                                                                            \
  do {                                                                                   \
    cudaError_t r_ = (e);                                                                \
    if (r_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #e, cudaGetErrorString(r_)); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

// acc + the 8 halves in u times x[0..8).
__device__ inline float dot8(uint4 u, const float* x, float acc) {
  return dot8_f16(u, reinterpret_cast<const float4*>(x), acc);
}
__device__ inline float swiglu(float g, float u) { return g / (1.0f + expf(-g)) * u; }

// The gate (g) and up (u) rows' chunks lane + 32 t, t in [t0, 8) (rlx's groups of 8 chunks
// for a pair: 4 of each row).
__device__ inline void pair_rest(const uint4* g, const uint4* u, const float* xs, int lane, int t0, float& sg,
                                 float& su) {
  f16_dot2_from(reinterpret_cast<const uint8_t*>(g), reinterpret_cast<const uint8_t*>(u), xs, H8, lane + 32 * t0, sg,
                su, weight_policy(true));
}
// A warp's first pair: its first 4 chunks a lane of each row held in pg / pu (fetched before
// the wait), then the rest.
__device__ inline void first_pair(const uint4* pg, const uint4* pu, const uint4* g, const uint4* u, const float* xs,
                                  int lane, float& sg, float& su) {
#pragma unroll
  for (int t = 0; t < 4; ++t) sg = dot8(pg[t], xs + 8 * (lane + 32 * t), sg);
#pragma unroll
  for (int t = 0; t < 4; ++t) su = dot8(pu[t], xs + 8 * (lane + 32 * t), su);
  pair_rest(g, u, xs, lane, 4, sg, su);
}
// x [H] into shared memory by the block.
__device__ inline void stage_x(const float* x, float* xs) {
  for (int i = threadIdx.x; i < H / 4; i += blockDim.x) reinterpret_cast<float4*>(xs)[i] = reinterpret_cast<const float4*>(x)[i];
}

// (A) gate/up: rows 0..F-1 gate, F..2F-1 up; h[o] = swiglu(gate o . x, up o . x).
__global__ void __launch_bounds__(32 * W) gu_kernel(const uint4* w, const float* x, float* h) {
  __shared__ __align__(16) float xs[H];
  const int lane = threadIdx.x & 31;
  int o = blockIdx.x * W + threadIdx.x / 32;
  const int stride = gridDim.x * W;
  uint4 pg[4], pu[4];
  if (o < F)
#pragma unroll
    for (int t = 0; t < 4; ++t)
      pg[t] = ldg_policy(w + size_t(o) * H8 + lane + 32 * t, weight_policy(true)),
      pu[t] = ldg_policy(w + size_t(F + o) * H8 + lane + 32 * t, weight_policy(true));
  grid_wait();
  grid_next();
  stage_x(x, xs);
  __syncthreads();
  if (o < F) {
    float sg = 0, su = 0;
    first_pair(pg, pu, w + size_t(o) * H8, w + size_t(F + o) * H8, xs, lane, sg, su);
    sg = warp_sum(sg), su = warp_sum(su);
    if (lane == 0) h[o] = swiglu(sg, su);
    o += stride;
  }
  for (; o < F; o += stride) {
    float sg = 0, su = 0;
    pair_rest(w + size_t(o) * H8, w + size_t(F + o) * H8, xs, lane, 0, sg, su);
    sg = warp_sum(sg), su = warp_sum(su);
    if (lane == 0) h[o] = swiglu(sg, su);
  }
}

// (A) down: y[o] = down o . h + x[o], a warp a row (F8 = 704 chunks, 22 a lane), the first 8
// a lane fetched before the wait, the rest in groups of 8.
__global__ void __launch_bounds__(32 * W) down_kernel(const uint4* w, const float* h, const float* x, float* y) {
  const int lane = threadIdx.x & 31, o = blockIdx.x * W + threadIdx.x / 32;
  uint4 p[8];
  if (o < H)
#pragma unroll
    for (int t = 0; t < 8; ++t) p[t] = ldg_policy(w + size_t(o) * F8 + lane + 32 * t, weight_policy(true));
  grid_wait();
  grid_next();
  if (o >= H) return;
  float s = 0;
#pragma unroll
  for (int t = 0; t < 8; ++t) s = dot8(p[t], h + 8 * (lane + 32 * t), s);
  s = f16_dot_from(reinterpret_cast<const uint8_t*>(w + size_t(o) * F8), h, F8, lane + 32 * 8, s, weight_policy(true));
  s = warp_sum(s);
  if (lane == 0) y[o] = s + x[o];
}

// (B) block b: pairs [p0, p1) of gate/up (R <= rmax of them), their values hs, then partial[b]
// = sum_r hs[r] * downT[p0 + r] (downT: the down matrix transposed, F rows of H halves).
// Shared memory: xs[H] f32, hs[rmax] f32, the rows [rmax][H] halves. MODE says when the down
// rows' copies (cp.async) are issued: 0 all after the wait, 1 all before it, 2 each pair's
// row by the warp that takes the pair as it starts it (the first before the wait). NW warps;
// the down part: thread t makes columns [8 (t % 256), + 8) over the rows r = t / 256 mod
// NW / 8, the groups then added in a fixed order through shared memory.
template <int MODE, int NW>
__global__ void __launch_bounds__(32 * NW) fused_kernel(const uint4* w, const uint4* dt, const float* x, float* partial,
                                                      int rmax) {
  extern __shared__ __align__(16) float sm[];
  float* xs = sm;
  float* hs = sm + H;
  uint4* rows = reinterpret_cast<uint4*>(sm + H + rmax);
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  const int p0 = int(int64_t(blockIdx.x) * F / gridDim.x), p1 = int(int64_t(blockIdx.x + 1) * F / gridDim.x), R = p1 - p0;
  const auto copy_rows = [&] {
    for (int i = threadIdx.x; i < R * H8; i += blockDim.x) copy16_async(rows + i, dt + size_t(p0) * H8 + i);
  };
  const auto copy_row = [&](int r) {
    for (int i = lane; i < H8; i += 32) copy16_async(rows + r * H8 + i, dt + size_t(p0 + r) * H8 + i);
  };
  uint4 pg[4], pu[4];
  const int o0 = p0 + warp;
  if (o0 < p1)
#pragma unroll
    for (int t = 0; t < 4; ++t)
      pg[t] = ldg_policy(w + size_t(o0) * H8 + lane + 32 * t, weight_policy(true)),
      pu[t] = ldg_policy(w + size_t(F + o0) * H8 + lane + 32 * t, weight_policy(true));
  if (MODE == 1) copy_rows();
  if (MODE == 2 && o0 < p1) copy_row(o0 - p0);
  grid_wait();
  grid_next();
  if (MODE == 0) copy_rows();
  stage_x(x, xs);
  __syncthreads();
  for (int o = o0; o < p1; o += NW) {
    float sg = 0, su = 0;
    if (o == o0) {
      first_pair(pg, pu, w + size_t(o) * H8, w + size_t(F + o) * H8, xs, lane, sg, su);
    } else {
      if (MODE == 2) copy_row(o - p0);
      pair_rest(w + size_t(o) * H8, w + size_t(F + o) * H8, xs, lane, 0, sg, su);
    }
    sg = warp_sum(sg), su = warp_sum(su);
    if (lane == 0) hs[o - p0] = swiglu(sg, su);
  }
  copy_async_wait();
  __syncthreads();
  constexpr int NG = NW / 8;  // row groups
  const int c8 = threadIdx.x % 256, grp = threadIdx.x / 256;
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int r = grp; r < R; r += NG) {
    const uint4 u = rows[r * H8 + c8];
    __half2 hh[4];
    memcpy(hh, &u, 16);
    const float v = hs[r];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 f = __half22float2(hh[k]);
      acc[2 * k] = fmaf(v, f.x, acc[2 * k]);
      acc[2 * k + 1] = fmaf(v, f.y, acc[2 * k + 1]);
    }
  }
  for (int g = NG - 1; g > 0; --g) {  // group g's sums into group g - 1's, last first (xs is free now)
    if (grp == g)
      for (int k = 0; k < 8; ++k) xs[8 * c8 + k] = acc[k];
    __syncthreads();
    if (grp == g - 1)
      for (int k = 0; k < 8; ++k) acc[k] += xs[8 * c8 + k];
    __syncthreads();
  }
  if (grp == 0) {
    float4* out = reinterpret_cast<float4*>(partial + size_t(blockIdx.x) * H + 8 * c8);
    out[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
    out[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
  }
}

// (B) y[c] = x[c] + sum over the G partials in a fixed order: block of 32 columns, warp w adds
// partials w, w + 8, ..., then the warps' sums in warp order.
__global__ void __launch_bounds__(32 * W) reduce_kernel(const float* partial, int G, const float* x, float* y) {
  __shared__ float red[W][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, c = blockIdx.x * 32 + lane;
  grid_wait();
  grid_next();
  float s = 0;
  for (int b = warp; b < G; b += W) s += partial[size_t(b) * H + c];
  red[warp][lane] = s;
  __syncthreads();
  if (warp == 0) {
    float t = 0;
    for (int k = 0; k < W; ++k) t += red[k][lane];
    y[c] = t + x[c];
  }
}

// Deterministic weights in [-a, a]: gate/up by index; down and its transpose from the same
// (row, column) value.
__device__ inline float hash_unit(uint64_t i, uint32_t seed) {
  uint64_t z = i * 0x9E3779B97F4A7C15ull + seed;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return float((z ^ (z >> 31)) >> 40) / float(1 << 24) - 0.5f;
}
__global__ void init_gu(__half* w, uint32_t seed, float a) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < size_t(2) * F * H; i += size_t(gridDim.x) * blockDim.x)
    w[i] = __float2half(2 * a * hash_unit(i, seed));
}
__global__ void init_down(__half* d, __half* dt, uint32_t seed, float a) {  // d [H][F], dt [F][H]
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < size_t(H) * F; i += size_t(gridDim.x) * blockDim.x) {
    const size_t r = i / F, c = i % F;
    const __half v = __float2half(2 * a * hash_unit(i, seed));
    d[i] = v;
    dt[c * H + r] = v;
  }
}

// Every launch under programmatic dependent launch. Not dev::launch: that asks the backend's
// pdl_enabled() (its environment switch), which lives in the library this harness does not link.
template <class K, class... A>
void launch(K k, int grid, int warps, size_t smem, cudaStream_t s, A... args) {
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3(grid), c.blockDim = dim3(32 * warps), c.dynamicSmemBytes = smem, c.stream = s, c.attrs = at, c.numAttrs = 1;
  CK(cudaLaunchKernelEx(&c, k, args...));
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
// ms a replay of g: 3 warm-ups, then 5 timings of 20 replays, the median.
float time_graph(cudaGraphExec_t g, cudaStream_t s, cudaEvent_t a, cudaEvent_t b) {
  for (int i = 0; i < 3; ++i) CK(cudaGraphLaunch(g, s));
  std::vector<float> ms;
  for (int r = 0; r < 5; ++r) {
    CK(cudaEventRecord(a, s));
    for (int i = 0; i < 20; ++i) CK(cudaGraphLaunch(g, s));
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float t;
    CK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t / 20);
  }
  return median(ms);
}

struct Variant {
  const char* name;
  void (*kernel)(const uint4*, const uint4*, const float*, float*, int);  // a fused_kernel<MODE, NW>
  int warps, blocks_per_sm;
  bool reduce;  // false: the partials are not added (timing only; its output is not compared)
};

}  // namespace

int main() {
  int dev = 0, sms = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev));
  std::printf("%s, %d SMs\n", prop.name, sms);
  const Variant vars[] = {
      {"B0 (copies after the wait)", fused_kernel<0, 8>, 8, 2, true},
      {"B1 (copies before the wait)", fused_kernel<1, 8>, 8, 2, true},
      {"B2 (a row with its pair)", fused_kernel<2, 8>, 8, 2, true},
      {"B1 16 warps, 1 block/SM", fused_kernel<1, 16>, 16, 1, true},
      {"B2 16 warps, 1 block/SM", fused_kernel<2, 16>, 16, 1, true},
      {"B1 without the reduce", fused_kernel<1, 8>, 8, 2, false},
      {"B2 without the reduce", fused_kernel<2, 8>, 8, 2, false},
  };
  constexpr int NV = sizeof(vars) / sizeof(vars[0]);
  std::vector<__half*> gu(L), dn(L), dt(L);
  for (int l = 0; l < L; ++l) {
    CK(cudaMalloc(&gu[l], size_t(2) * F * H * 2));
    CK(cudaMalloc(&dn[l], size_t(H) * F * 2));
    CK(cudaMalloc(&dt[l], size_t(H) * F * 2));
    init_gu<<<1024, 256>>>(gu[l], 2 * l + 1, 0.02f);
    init_down<<<1024, 256>>>(dn[l], dt[l], 2 * l + 2, 0.02f);
  }
  CK(cudaGetLastError());
  float *xa, *h, *part;  // x of every layer boundary (L + 1 rows)
  CK(cudaMalloc(&xa, sizeof(float) * H * (L + 1)));
  CK(cudaMalloc(&h, sizeof(float) * F));
  CK(cudaMalloc(&part, sizeof(float) * size_t(2 * sms) * H));
  std::vector<float*> xb(NV);
  for (auto& p : xb) CK(cudaMalloc(&p, sizeof(float) * H * (L + 1)));
  std::vector<float> x0(H);
  for (int i = 0; i < H; ++i) x0[i] = std::sin(0.37f * i);
  CK(cudaMemcpy(xa, x0.data(), sizeof(float) * H, cudaMemcpyHostToDevice));
  for (auto p : xb) CK(cudaMemcpy(p, x0.data(), sizeof(float) * H, cudaMemcpyHostToDevice));
  // rlx's F16 products hold two blocks a multiprocessor through unused shared memory.
  const size_t cap = size_t(prop.sharedMemPerMultiprocessor) / 3 + 1;
  CK(cudaFuncSetAttribute(down_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(cap)));

  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const auto record = [&](auto body) {
    cudaGraph_t g;
    cudaGraphExec_t e;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    body();
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&e, g, 0));
    return e;
  };
  const auto w4 = [](const __half* p) { return reinterpret_cast<const uint4*>(p); };
  const int GA = 2 * sms;
  std::vector<cudaGraphExec_t> graphs;
  graphs.push_back(record([&] {
    for (int l = 0; l < L; ++l) {
      launch(gu_kernel, GA, W, 0, s, w4(gu[l]), (const float*)(xa + l * H), h);
      launch(down_kernel, H / W, W, cap, s, w4(dn[l]), (const float*)h, (const float*)(xa + l * H), xa + (l + 1) * H);
    }
  }));
  for (int v = 0; v < NV; ++v) {
    const int G = vars[v].blocks_per_sm * sms, rmax = ((F + G - 1) / G + 3) / 4 * 4;
    const size_t smem = sizeof(float) * (H + rmax) + size_t(rmax) * H * 2;
    const auto k = vars[v].kernel;
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    std::printf("%-32s %d blocks of %d-%d pairs, %zu bytes of shared memory a block\n", vars[v].name, G, F / G,
                (F + G - 1) / G, smem);
    float* x = xb[v];
    graphs.push_back(record([&] {
      for (int l = 0; l < L; ++l) {
        launch(k, G, vars[v].warps, smem, s, w4(gu[l]), w4(dt[l]), (const float*)(x + l * H), part, rmax);
        if (vars[v].reduce)
          launch(reduce_kernel, H / 32, W, 0, s, (const float*)part, G, (const float*)(x + l * H), x + (l + 1) * H);
      }
    }));
  }

  // Agreement after one replay each from the same x0.
  for (auto g : graphs) CK(cudaGraphLaunch(g, s));
  CK(cudaStreamSynchronize(s));
  std::vector<float> ya(H), yb(H);
  CK(cudaMemcpy(ya.data(), xa + L * H, sizeof(float) * H, cudaMemcpyDeviceToHost));
  for (int v = 0; v < NV; ++v) {
    if (!vars[v].reduce) continue;
    CK(cudaMemcpy(yb.data(), xb[v] + L * H, sizeof(float) * H, cudaMemcpyDeviceToHost));
    float diff = 0, mag = 0;
    for (int i = 0; i < H; ++i) diff = std::max(diff, std::fabs(ya[i] - yb[i])), mag = std::max(mag, std::fabs(ya[i]));
    std::printf("%-32s after %d layers: max |A - B| %.3g, max |A| %.3g (relative %.2g)%s\n", vars[v].name, L, diff, mag,
                diff / mag, diff <= 1e-3f * mag ? "" : "  DISAGREES");
  }

  // Copy rate (read + write of 1 GiB), as bench/gpu/llm_decode.sh counts it.
  void *ca, *cb;
  const size_t n = size_t(1) << 30;
  CK(cudaMalloc(&ca, n));
  CK(cudaMalloc(&cb, n));
  const double bytes = double(L) * (size_t(3) * F * H * 2);
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int round = 1; round <= 3; ++round) {
    std::vector<float> t;
    for (auto g : graphs) t.push_back(time_graph(g, s, e0, e1));
    CK(cudaMemcpyAsync(cb, ca, n, cudaMemcpyDeviceToDevice, s));
    CK(cudaEventRecord(e0, s));
    for (int i = 0; i < 10; ++i) CK(cudaMemcpyAsync(cb, ca, n, cudaMemcpyDeviceToDevice, s));
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float tc;
    CK(cudaEventElapsedTime(&tc, e0, e1));
    const double copy = 2.0 * n * 10 / (tc / 1e3) / 1e9;
    std::printf("round %d (copy %.0f GB/s):\n  %-32s %.3f ms %.0f GB/s\n", round, copy, "A (rlx's form)", t[0],
                bytes / (t[0] / 1e3) / 1e9);
    for (int v = 0; v < NV; ++v)
      std::printf("  %-32s %.3f ms %.0f GB/s (%.3f of A)\n", vars[v].name, t[v + 1], bytes / (t[v + 1] / 1e3) / 1e9,
                  t[0] / t[v + 1]);
  }
  return 0;
}
