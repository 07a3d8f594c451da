// Does fetching upcoming weights into L2 during a decode step's latency-bound launches pay?
// A TinyLlama-1.1B-shaped F16 step without rlx: per layer the q/k/v product, two short
// launches that read next to nothing (standing in for rotary + cache writes and the decode
// attention: each waits a fixed time), the output projection, gate/up and down, then the
// logits; every launch under programmatic dependent launch (as rlx's), captured once in a
// CUDA graph. Each launch may first hint a byte range of the weights that come after it into
// L2 (`prefetch.global.L2`, one 128-byte line per hint, spread over all its threads): the
// range runs from where the hints so far end to `budget` bytes past the launch's own first
// weight byte, so the hints stay at most `budget` ahead of the reads. Policies: every launch
// hints / only the short launches hint. Separately, when a product lets the next launch start
// (griddepcontrol.launch_dependents): right after its own wait (as rlx's kernels do, so the
// next launch's blocks and their early loads arrive while it still streams), or once every
// warp of the block has begun its last row (the early loads then land in its drain).
// Last, how fast a few SMs alone can pull bytes into L2 by such hints (what a prefetcher
// running beside the step on spare SMs would get), against every SM.
// Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90a -o l2_prefetch bench/gpu/l2_prefetch.cu && ./l2_prefetch
#include <cuda_fp16.h>
#include <cstdio>
#include <cstring>
#include <vector>

struct Seg { const char* p; long long bytes; };
struct Hint { Seg s[4]; int n; int evict_last; };
struct Mat { const uint4* w; int rows, k8; float* y; };

__device__ inline void hint_lines(const Hint& h) {
  const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x, all = (long long)gridDim.x * blockDim.x;
  for (int i = 0; i < h.n; ++i)
    for (long long o = t * 128; o < h.s[i].bytes; o += all * 128) {
      if (h.evict_last) asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(h.s[i].p + o));
      else asm volatile("prefetch.global.L2 [%0];" ::"l"(h.s[i].p + o));
    }
}
__device__ inline float dot8(uint4 u) {
  __half2 h[4]; memcpy(h, &u, 16);
  float2 a = __half22float2(h[0]), b = __half22float2(h[1]), c = __half22float2(h[2]), d = __half22float2(h[3]);
  return a.x + a.y + b.x + b.y + c.x + c.y + d.x + d.y;
}
// One warp per row, eight 16-byte chunks per lane in flight; each warp's first eight fetched
// before the wait for the previous launch (as rlx's products).
__global__ void gemv(Mat m, Hint h, int late) {
  __shared__ int at_last;
  if (threadIdx.x == 0) at_last = 0;
  __syncthreads();
  hint_lines(h);
  const int lane = threadIdx.x & 31, wpb = blockDim.x / 32;
  int o = blockIdx.x * wpb + threadIdx.x / 32;
  uint4 pre[8];
  for (int t = 0; t < 8; ++t)
    pre[t] = o < m.rows && lane + 32 * t < m.k8 ? __ldg(m.w + size_t(o) * m.k8 + lane + 32 * t) : make_uint4(0, 0, 0, 0);
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (!late) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  // late: the block's last warp to begin its last row (or to find none) lets the next start
  auto last_begun = [&] {
    if (late && lane == 0 && atomicAdd(&at_last, 1) == wpb - 1) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  };
  if (o >= m.rows) last_begun();
  bool first = true;
  for (; o < m.rows; o += gridDim.x * wpb) {
    if (o + gridDim.x * wpb >= m.rows) last_begun();
    const uint4* r = m.w + size_t(o) * m.k8;
    float acc = 0;
    int i = lane;
    if (first) { for (int t = 0; t < 8; ++t) acc += dot8(pre[t]); i += 256; first = false; }
    for (; i < m.k8; i += 256) {
      uint4 u[8];
#pragma unroll
      for (int t = 0; t < 8; ++t) u[t] = i + 32 * t < m.k8 ? __ldg(r + i + 32 * t) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int t = 0; t < 8; ++t) acc += dot8(u[t]);
    }
    for (int q = 16; q; q >>= 1) acc += __shfl_xor_sync(~0u, acc, q);
    if (lane == 0) m.y[o] = acc;
  }
}
// Hints for `bytes` from p into L2, one line per hint, spread over the grid's threads.
__global__ void hint_only(const char* p, long long bytes) {
  Hint h{};
  h.s[0] = {p, bytes};
  h.n = 1;
  hint_lines(h);
}
// The lines of [p, p + bytes) summed (so the reads are not dropped), one 16-byte load per
// thread at a time.
__global__ void read_all(const uint4* p, long long n16, float* out) {
  float acc = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n16; i += (long long)gridDim.x * blockDim.x)
    acc += dot8(__ldg(p + i));
  if (acc == 12345.f) *out = acc;
}

// A launch that reads next to nothing and takes `ns` (the rotary / attention stand-in).
__global__ void idle(int ns, Hint h) {
  hint_lines(h);
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); while (t - t0 < (unsigned long long)ns);
}

struct Step { int kind; Mat m; int ns, blocks; long long first, end; Hint h; };  // kind 0 gemv, 1 idle

int main(int argc, char** argv) {
  int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  int l2 = 0; cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0);
  const int layers = 22, rot_ns = argc > 1 ? atoi(argv[1]) : 1800, att_ns = argc > 2 ? atoi(argv[2]) : 4000;
  float* y; cudaMalloc(&y, 16 << 20);
  std::vector<Step> steps;
  std::vector<Seg> stream;  // the weights in the order they are read
  long long pos = 0;
  auto mat = [&](int rows, int k) {
    uint4* w; size_t b = size_t(rows) * k * 2; cudaMalloc(&w, b); cudaMemset(w, 0, b);
    Step s{}; s.kind = 0; s.m = {w, rows, k / 8, y}; s.first = pos; pos += b; s.end = pos;
    steps.push_back(s); stream.push_back({(const char*)w, (long long)b});
  };
  auto idle_step = [&](int ns, int blocks) { Step s{}; s.kind = 1; s.ns = ns; s.blocks = blocks; s.first = s.end = pos; steps.push_back(s); };
  for (int l = 0; l < layers; ++l) {
    mat(2560, 2048); idle_step(rot_ns, 40); idle_step(att_ns, 256); mat(2048, 2048); mat(11264, 2048); mat(2048, 5632);
  }
  mat(32000, 2048);
  printf("%s: %d SMs, L2 %.1f MB, %zu launches, %.1f MB of weights a step; idle launches %d + %d ns\n",
         "l2_prefetch", sms, l2 / 1e6, steps.size(), pos / 1e6, rot_ns, att_ns);
  // The stream's bytes [a, b) as segments of the matrices.
  auto range = [&](long long a, long long b, Hint& h) {
    h.n = 0; long long at = 0;
    for (auto& s : stream) {
      const long long lo = std::max(a, at), hi = std::min(b, at + s.bytes);
      if (lo < hi && h.n < 4) h.s[h.n++] = {s.p + (lo - at), hi - lo};
      at += s.bytes;
    }
  };
  cudaStream_t st; cudaStreamCreate(&st);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  auto run = [&](const char* name, long long budget, bool idle_only, int evict_last, int late = 0) {
    long long frontier = 0;
    for (auto& s : steps) {
      s.h = {}; s.h.evict_last = evict_last;
      if (budget > 0 && (!idle_only || s.kind == 1)) {
        const long long a = std::max(frontier, s.end), b = std::min(s.first + budget, pos);
        if (a < b) { range(a, b, s.h); frontier = b; }
      }
    }
    cudaLaunchAttribute at; at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at.val.programmaticStreamSerializationAllowed = 1;
    cudaGraph_t g; cudaGraphExec_t ge;
    cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal);
    for (auto& s : steps) {
      cudaLaunchConfig_t c = {}; c.stream = st; c.attrs = &at; c.numAttrs = 1;
      if (s.kind == 0) { c.gridDim = sms * 2; c.blockDim = 256; cudaLaunchKernelEx(&c, gemv, s.m, s.h, late); }
      else { c.gridDim = s.blocks; c.blockDim = 128; cudaLaunchKernelEx(&c, idle, s.ns, s.h); }
    }
    cudaStreamEndCapture(st, &g); cudaGraphInstantiate(&ge, g, 0);
    for (int i = 0; i < 5; ++i) cudaGraphLaunch(ge, st);
    cudaEventRecord(e0, st);
    const int reps = 30;
    for (int i = 0; i < reps; ++i) cudaGraphLaunch(ge, st);
    cudaEventRecord(e1, st); cudaEventSynchronize(e1);
    float ms; cudaEventElapsedTime(&ms, e0, e1);
    printf("%-34s%s %5lld MB  %8.3f ms a step  %7.1f GB/s of weights\n", name, late ? " (late)" : "", budget >> 20, ms / reps,
           pos / (ms / reps * 1e-3) / 1e9);
    cudaGraphExecDestroy(ge); cudaGraphDestroy(g);
  };
  for (int round = 0; round < 2; ++round) {
    run("no hints", 0, false, 0);
    run("no hints", 0, false, 0, 1);
    for (long long mb : {8, 16, 24, 32}) {
      run("every launch hints", mb << 20, false, 0);
      run("only the idle launches hint", mb << 20, true, 0);
      run("every launch, evict_last", mb << 20, false, 1);
      run("every launch hints", mb << 20, false, 0, 1);
    }
  }
  // Hint throughput: 24 MB hinted by a grid on `blocks` SMs (1,024 threads each), then read by
  // every SM; the read alone from a cold L2 (a 256 MB sweep before each) for comparison.
  {
    const long long bytes = 24ll << 20;
    char* buf; cudaMalloc(&buf, bytes); cudaMemset(buf, 0, bytes);
    char* sweep; const size_t sw = size_t(256) << 20; cudaMalloc(&sweep, sw);
    auto cold = [&] { cudaMemsetAsync(sweep, 1, sw, st); };
    auto timed = [&](auto f) {
      cold();
      cudaEventRecord(e0, st); f(); cudaEventRecord(e1, st); cudaEventSynchronize(e1);
      float ms; cudaEventElapsedTime(&ms, e0, e1); return ms * 1e3f;
    };
    for (int r = 0; r < 2; ++r) {
      const float read_cold = timed([&] { read_all<<<sms * 4, 256, 0, st>>>((const uint4*)buf, bytes / 16, y); });
      printf("24 MB read by every SM from a cold L2: %.1f us (%.0f GB/s)\n", read_cold, bytes / (read_cold * 1e-6) / 1e9);
      for (int blocks : {4, 8, 16, sms}) {
        const float hint = timed([&] { hint_only<<<blocks, 1024, 0, st>>>(buf, bytes); });
        cudaEventRecord(e0, st);
        read_all<<<sms * 4, 256, 0, st>>>((const uint4*)buf, bytes / 16, y);
        cudaEventRecord(e1, st); cudaEventSynchronize(e1);
        float ms; cudaEventElapsedTime(&ms, e0, e1);
        printf("  hinted by %3d SMs: the hint launch %.1f us, then the read %.1f us\n", blocks, hint, ms * 1e3f);
      }
    }
    cudaFree(buf); cudaFree(sweep);
  }
  // Without the idle launches' time: the floor the hints could reach.
  for (auto& s : steps) if (s.kind == 1) s.ns = 0;
  run("idle launches 0 ns, no hints", 0, false, 0);
  void *p, *q; size_t n = size_t(1) << 30; cudaMalloc(&p, n); cudaMalloc(&q, n);
  cudaEventRecord(e0, st);
  for (int i = 0; i < 10; ++i) cudaMemcpyAsync(q, p, n, cudaMemcpyDeviceToDevice, st);
  cudaEventRecord(e1, st); cudaEventSynchronize(e1);
  float ms; cudaEventElapsedTime(&ms, e0, e1);
  printf("device copy (read + write): %.1f GB/s\n", 2.0 * n * 10 / (ms * 1e-3) / 1e9);
  printf("last error: %s\n", cudaGetErrorString(cudaGetLastError()));
  return 0;
}
