// How long a decode product's first dependent step takes: every block of a launch reads the
// activation x (k floats) that the launch before it wrote, right after its wait
// (griddepcontrol.wait), as rlx's products and norms do. A chain of launches, each a grid of
// 2 blocks of 256 threads per SM, replayed in a CUDA graph with programmatic dependent
// launch; per launch, each thread loads its k / 256 elements of x at once, the block sums
// them, and the block's slice of the next launch's x is written. Modes:
//   0: no read of x (the boundary, the block sum and the writes alone);
//   1: every block reads the x the launch before wrote (the decode case);
//   2: every block reads one x that nothing writes (the same lines, long settled in L2);
//   3: each block reads its own settled x (distinct lines: no line read by every block).
// 1 against 2 is what the recent writes cost, 2 against 3 what every block reading the same
// lines at once costs. Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90a -o x_trip bench/gpu/x_trip.cu && ./x_trip
#include <algorithm>
#include <cstdio>
#include <vector>

namespace {

constexpr int kThreads = 256, kMost = 24;  // k <= 256 * kMost

__global__ void __launch_bounds__(kThreads) link(const float* x, const float* settled, float* next, float* sums, int k,
                                                  int mode) {
  __shared__ float part[kThreads / 32];
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const float* src = mode == 1 ? x : mode == 2 ? settled : settled + size_t(blockIdx.x) * k;
  float v[kMost];
#pragma unroll
  for (int t = 0; t < kMost; ++t) {
    const int i = threadIdx.x + t * kThreads;
    v[t] = mode != 0 && i < k ? __ldcg(src + i) : 1.0f;
  }
  float s = 0;
#pragma unroll
  for (int t = 0; t < kMost; ++t) s += v[t];
  for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(~0u, s, o);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float tot = 0;
    for (int w = 0; w < kThreads / 32; ++w) tot += part[w];
    sums[blockIdx.x] = tot;
  }
  // This block's slice of the next launch's x.
  for (int i = blockIdx.x * kThreads + threadIdx.x; i < k; i += gridDim.x * kThreads) next[i] = 0.5f * s + float(i);
}

}  // namespace

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int grid = 2 * sms, chain = 100;
  float *a, *b, *settled, *sums;
  const int most = kThreads * kMost;
  cudaMalloc(&a, sizeof(float) * most);
  cudaMalloc(&b, sizeof(float) * most);
  cudaMalloc(&settled, sizeof(float) * size_t(grid) * most);
  cudaMalloc(&sums, sizeof(float) * grid);
  cudaMemset(a, 0, sizeof(float) * most);
  cudaMemset(b, 0, sizeof(float) * most);
  cudaMemset(settled, 0, sizeof(float) * size_t(grid) * most);
  cudaStream_t st;
  cudaStreamCreate(&st);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  printf("x_trip: %d SMs, chains of %d launches of %d blocks x %d threads\n", sms, chain, grid, kThreads);
  const char* names[] = {"no read", "x the launch before wrote", "one settled x", "a settled x per block"};
  for (int k : {2048, 5632}) {
    std::vector<cudaGraphExec_t> ge(4);
    for (int mode = 0; mode < 4; ++mode) {
      cudaGraph_t g;
      cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal);
      cudaLaunchAttribute at;
      at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      at.val.programmaticStreamSerializationAllowed = 1;
      cudaLaunchConfig_t c = {};
      c.gridDim = grid;
      c.blockDim = kThreads;
      c.stream = st;
      c.attrs = &at;
      c.numAttrs = 1;
      for (int i = 0; i < chain; ++i) cudaLaunchKernelEx(&c, link, i % 2 ? b : a, settled, i % 2 ? a : b, sums, k, mode);
      cudaStreamEndCapture(st, &g);
      cudaGraphInstantiate(&ge[mode], g, 0);
      cudaGraphDestroy(g);
    }
    std::vector<std::vector<float>> us(4);
    for (int round = 0; round < 5; ++round)
      for (int mode = 0; mode < 4; ++mode) {
        for (int w = 0; w < 3; ++w) cudaGraphLaunch(ge[mode], st);
        cudaEventRecord(e0, st);
        const int reps = 20;
        for (int r = 0; r < reps; ++r) cudaGraphLaunch(ge[mode], st);
        cudaEventRecord(e1, st);
        cudaEventSynchronize(e1);
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        us[mode].push_back(ms * 1e3f / (reps * chain));
      }
    for (int mode = 0; mode < 4; ++mode) {
      std::vector<float> v = us[mode];
      std::sort(v.begin(), v.end());
      printf("k %d, %-28s %.3f us a launch (median of 5 rounds; %.3f - %.3f)\n", k, names[mode], v[2], v[0], v[4]);
    }
  }
  printf("last error: %s\n", cudaGetErrorString(cudaGetLastError()));
  return 0;
}
