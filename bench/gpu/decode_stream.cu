// Decode-step weight streaming on a GPU, without rlx: how fast warps read F16 rows (one warp
// per row, 16-byte loads, a row's chunks in flight at once) over the matrices of a
// TinyLlama-1.1B step (22 layers of q/k/v 2560x2048, o 2048x2048, gate/up 11264x2048, down
// 2048x5632), laid out
//   (a) as one kernel per matrix, back to back in a CUDA graph (with and without programmatic
//       dependent launch: each warp's first row fetched before the wait), and two rows a warp;
//   (b) as one persistent kernel per step, a grid-wide barrier between matrices, each warp's
//       first row of the next matrix loaded before the barrier;
//   (c) the ceiling: the same bytes as one matrix in one launch (4 and 8 KB rows, 4 / 8 / 16
//       chunks in flight per lane);
// and the device's copy bandwidth (read + write, as bench/gpu/llm_decode.sh counts it). It
// decided the shape of rlx's decode products (docs/performance.md, session 28). Build and run
// on the GPU machine: nvcc -O3 -arch=sm_90a -o decode_stream bench/gpu/decode_stream.cu && ./decode_stream
#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <cstdio>
#include <vector>
namespace cg = cooperative_groups;

struct Mat { const uint4* w; int rows, k8; float* y; };  // k8: 16-byte chunks per row

__device__ inline float dot8(uint4 u) {
  __half2 h[4]; memcpy(h, &u, 16);
  float2 a = __half22float2(h[0]), b = __half22float2(h[1]), c = __half22float2(h[2]), d = __half22float2(h[3]);
  return a.x + a.y + b.x + b.y + c.x + c.y + d.x + d.y;
}
// acc + the chunks i, i + 32, ... (< k8) of row r, U a lane at a time (a group's loads all
// issued before its sums).
template <int U>
__device__ inline float chunks_from(const uint4* r, int k8, int i, float acc) {
  for (; i < k8; i += 32 * U) {
    uint4 u[U];
#pragma unroll
    for (int t = 0; t < U; ++t) u[t] = i + 32 * t < k8 ? __ldg(r + i + 32 * t) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int t = 0; t < U; ++t) acc += dot8(u[t]);
  }
  return acc;
}
__device__ inline float warp_total(float acc) {
  for (int o = 16; o; o >>= 1) acc += __shfl_xor_sync(~0u, acc, o);
  return acc;
}
template <int U>
__device__ inline float row_sum(const uint4* r, int k8, int lane) {
  return warp_total(chunks_from<U>(r, k8, lane, 0.0f));
}
// Row o's first U chunks per lane (zeros past the row or past the matrix), fetched ahead.
template <int U>
__device__ inline void fetch_first(const Mat& m, int o, int lane, uint4* pre) {
  for (int t = 0; t < U; ++t)
    pre[t] = o < m.rows && lane + 32 * t < m.k8 ? __ldg(m.w + size_t(o) * m.k8 + lane + 32 * t) : make_uint4(0, 0, 0, 0);
}
// Rows o, o + stride, ... of m into m.y: the first from its chunks fetched ahead (pre) and the
// rest of it, the others whole.
template <int U>
__device__ inline void rows_from(const Mat& m, int o, int stride, int lane, const uint4* pre) {
  if (o < m.rows) {
    float acc = 0;
    for (int t = 0; t < U; ++t) acc += dot8(pre[t]);
    acc = warp_total(chunks_from<U>(m.w + size_t(o) * m.k8, m.k8, lane + 32 * U, acc));
    if (lane == 0) m.y[o] = acc;
    o += stride;
  }
  for (; o < m.rows; o += stride) {
    const float s = row_sum<U>(m.w + size_t(o) * m.k8, m.k8, lane);
    if (lane == 0) m.y[o] = s;
  }
}
template <int U>
__global__ void one(Mat m) {
  const int lane = threadIdx.x & 31, wpb = blockDim.x / 32;
  for (int o = blockIdx.x * wpb + threadIdx.x / 32; o < m.rows; o += gridDim.x * wpb) {
    float s = row_sum<U>(m.w + size_t(o) * m.k8, m.k8, lane);
    if (lane == 0) m.y[o] = s;
  }
}

// As rlx's decode today: each warp's first row fetched, then wait for the previous kernel
// (programmatic dependent launch), then let the next one start.
template <int U>
__global__ void one_pdl(Mat m) {
  const int lane = threadIdx.x & 31, wpb = blockDim.x / 32;
  int o = blockIdx.x * wpb + threadIdx.x / 32;
  uint4 pre[U];
  fetch_first<U>(m, o, lane, pre);
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  rows_from<U>(m, o, gridDim.x * wpb, lane, pre);
}
// Two rows per warp at once (8 KB in flight a warp).
__global__ void two(Mat m) {
  const int lane = threadIdx.x & 31, wpb = blockDim.x / 32;
  for (int o = 2 * (blockIdx.x * wpb + threadIdx.x / 32); o < m.rows; o += 2 * gridDim.x * wpb) {
    const uint4* r0 = m.w + size_t(o) * m.k8;
    const uint4* r1 = o + 1 < m.rows ? r0 + m.k8 : r0;
    float a0 = 0, a1 = 0;
    for (int i = lane; i < m.k8; i += 256) {
      uint4 u[8], v[8];
#pragma unroll
      for (int t = 0; t < 8; ++t) { u[t] = i + 32 * t < m.k8 ? __ldg(r0 + i + 32 * t) : make_uint4(0,0,0,0); v[t] = i + 32 * t < m.k8 ? __ldg(r1 + i + 32 * t) : make_uint4(0,0,0,0); }
#pragma unroll
      for (int t = 0; t < 8; ++t) { a0 += dot8(u[t]); a1 += dot8(v[t]); }
    }
    for (int q = 16; q; q >>= 1) { a0 += __shfl_xor_sync(~0u, a0, q); a1 += __shfl_xor_sync(~0u, a1, q); }
    if (lane == 0) { m.y[o] = a0; if (o + 1 < m.rows) m.y[o + 1] = a1; }
  }
}
// All matrices of the step in one launch; before each barrier every warp loads its first
// row's chunks of the next matrix (held in registers), then sums them after the barrier.
template <int U>
__global__ void persistent(const Mat* mats, int n) {
  cg::grid_group grid = cg::this_grid();
  const int lane = threadIdx.x & 31, wpb = blockDim.x / 32;
  const int w0 = blockIdx.x * wpb + threadIdx.x / 32, stride = gridDim.x * wpb;
  uint4 pre[U];
  fetch_first<U>(mats[0], w0, lane, pre);
  for (int j = 0; j < n; ++j) {
    rows_from<U>(mats[j], w0, stride, lane, pre);
    if (j + 1 < n) {
      fetch_first<U>(mats[j + 1], w0, lane, pre);
      grid.sync();
    }
  }
}

int main() {
  int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int layers = 22;
  const int shapes[4][2] = {{2560, 2048}, {2048, 2048}, {11264, 2048}, {2048, 5632}};
  std::vector<Mat> mats;
  size_t bytes = 0;
  float* y; cudaMalloc(&y, 16 << 20);
  for (int l = 0; l < layers; ++l)
    for (auto& s : shapes) {
      uint4* w; size_t b = size_t(s[0]) * s[1] * 2; cudaMalloc(&w, b); cudaMemset(w, 0, b);
      mats.push_back({w, s[0], s[1] / 8, y}); bytes += b;
    }
  Mat* dm; cudaMalloc(&dm, mats.size() * sizeof(Mat)); cudaMemcpy(dm, mats.data(), mats.size() * sizeof(Mat), cudaMemcpyHostToDevice);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  cudaStream_t st; cudaStreamCreate(&st);
  printf("SMs %d, %d matrices, %.1f MB a step\n", sms, int(mats.size()), bytes / 1e6);
  // ms of `reps` calls of launch() on st, after `warm` untimed ones.
  auto time_ms = [&](int warm, int reps, auto launch) {
    for (int i = 0; i < warm; ++i) launch();
    cudaEventRecord(a, st);
    for (int i = 0; i < reps; ++i) launch();
    cudaEventRecord(b, st); cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b);
    return ms;
  };
  auto report = [&](const char* what, float ms, int reps) {
    printf("%-44s %8.3f ms a step  %7.1f GB/s\n", what, ms / reps, bytes / (ms / reps * 1e-3) / 1e9);
  };
  // The step captured once in a CUDA graph by `enqueue` (one launch per matrix), replayed 20
  // times after 3 of warm-up.
  auto time_graph = [&](const char* what, auto enqueue) {
    cudaGraph_t g; cudaGraphExec_t ge;
    cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal);
    for (auto& m : mats) enqueue(m);
    cudaStreamEndCapture(st, &g); cudaGraphInstantiate(&ge, g, 0);
    report(what, time_ms(3, 20, [&] { cudaGraphLaunch(ge, st); }), 20);
    cudaGraphExecDestroy(ge); cudaGraphDestroy(g);
  };
  for (int bps : {1, 2, 4}) {
    for (int warps : {8, 16}) {
      char name[96];
      // (a) one kernel per matrix
      snprintf(name, sizeof name, "kernel per matrix, %d blk/SM x %d warps", bps, warps);
      time_graph(name, [&](const Mat& m) { one<8><<<sms * bps, 32 * warps, 0, st>>>(m); });
      // (a2) with programmatic dependent launch
      cudaLaunchAttribute at; at.id = cudaLaunchAttributeProgrammaticStreamSerialization; at.val.programmaticStreamSerializationAllowed = 1;
      snprintf(name, sizeof name, "kernel per matrix + PDL, %d blk/SM x %d warps", bps, warps);
      time_graph(name, [&](const Mat& m) {
        cudaLaunchConfig_t c = {}; c.gridDim = sms * bps; c.blockDim = 32 * warps; c.stream = st; c.attrs = &at; c.numAttrs = 1;
        cudaLaunchKernelEx(&c, one_pdl<8>, m);
      });
      // (a3) two rows a warp
      snprintf(name, sizeof name, "two rows a warp, %d blk/SM x %d warps", bps, warps);
      time_graph(name, [&](const Mat& m) { two<<<sms * bps, 32 * warps, 0, st>>>(m); });
      // (b) persistent, grid-wide barriers
      int maxb = 0;
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&maxb, persistent<8>, 32 * warps, 0);
      if (bps > maxb) { printf("persistent %d blk/SM x %d warps: not co-resident (max %d)\n", bps, warps, maxb); continue; }
      int n = int(mats.size());
      void* args[] = {&dm, &n};
      const float ms = time_ms(2, 10, [&] {
        cudaLaunchCooperativeKernel((void*)persistent<8>, sms * bps, 32 * warps, args, 0, st);
      });
      snprintf(name, sizeof name, "persistent + grid.sync, %d blk/SM x %d warps", bps, warps);
      report(name, ms, 10);
    }
  }
  // Ceiling: the same bytes as one matrix, one launch
  {
    uint4* w; cudaMalloc(&w, bytes); cudaMemset(w, 0, bytes);
    Mat big{w, int(bytes / 4096), 256, y};
    float* yy; cudaMalloc(&yy, size_t(big.rows) * 4); big.y = yy;
    auto ceil = [&](auto kern, const char* tag, Mat big) {
      for (int bps : {1, 2, 4}) for (int warps : {8, 16}) {
        const float ms = time_ms(3, 10, [&] { kern<<<sms * bps, 32 * warps, 0, st>>>(big); });
        char name[96]; snprintf(name, sizeof name, "ceiling %s: one matrix, %d blk/SM x %d warps", tag, bps, warps);
        report(name, ms, 10);
      }
    };
    Mat wide{big.w, big.rows / 2, 512, big.y};
    ceil(one<4>, "U4", big); ceil(one<8>, "U8", big); ceil(one<16>, "U16 8KB rows", wide); ceil(one<8>, "U8 8KB rows", wide);
    cudaFree(w); cudaFree(yy);
  }
  // The copy bandwidth, as llm_decode.sh measures it (read + write)
  void *p, *q; size_t n = size_t(1) << 30; cudaMalloc(&p, n); cudaMalloc(&q, n);
  const float ms = time_ms(3, 10, [&] { cudaMemcpyAsync(q, p, n, cudaMemcpyDeviceToDevice, st); });
  printf("device copy (read + write): %.1f GB/s\n", 2.0 * n * 10 / (ms * 1e-3) / 1e9);
  printf("last error: %s\n", cudaGetErrorString(cudaGetLastError()));
  return 0;
}
