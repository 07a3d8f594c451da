// Would a decode step run as one persistent kernel stream its weights faster than as one
// launch per phase (rlx today: programmatic dependent launch, a graph replayed)? A
// TinyLlama-1.1B-shaped F16 step without rlx, per layer: the norm + q/k/v product, a short
// phase standing in for rotary + cache writes and another for the decode attention (a few
// blocks wait a fixed time, then pass their slice on), the output projection + residual,
// the norm + gate/up product with its SwiGLU (a warp takes a gate row and its up row), the
// down product + residual; then the norm + logits. Every product reads the activation its
// predecessor wrote (staged in shared memory by every block, each thread's elements loaded
// at once, as rlx's norm kernels do), one warp a row. Schedules:
//  - launches: each phase its own kernel, a warp's first row (8 16-byte chunks a lane)
//    fetched into registers before `griddepcontrol.wait` (as rlx's products);
//  - persistent: one cooperative kernel for the whole step, the same blocks and warps; a
//    warp fetches its first row of the next product as soon as it is done with the current
//    phase, then waits for the phase's producers (per-phase counters in global memory), so
//    the next weights are in flight through the wait and the short phases on every warp,
//    whatever the occupancy of the kernel before;
//  - streamed (persistent, or launches): each warp keeps S 4 KB units of its upcoming
//    weights in flight in its shared memory (cp.async), across phases in the persistent
//    kernel, from before the wait in a launch;
//  - bulk copies (launches, or persistent): each block's weights arrive by the copy engine
//    (cp.async.bulk) in rings of S 4 KB slots per consumer warp, issued by a producer warp
//    that needs nothing from the phases before, so it runs ahead of the consumers by up to
//    S x 4 KB a warp (ring_kernel / ring_step_kernel, below);
//  - early: a launch lets the next one start at once instead of after its own wait;
//  - nothing but the boundaries: empty launches / counter waits, what one costs alone.
// Every schedule gives the same bits (checked), so only the schedule differs. Build and run
// on the GPU machine:
//   nvcc -O3 -arch=sm_90a -o persistent_layer bench/gpu/persistent_layer.cu && ./persistent_layer
// Arguments (optional): rotary ns, attention ns (the short phases' waits; 1800 / 4000 by default).
// RING_ONLY=1: run one build of each bulk-copy schedule once and stop (for compute-sanitizer).
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

constexpr int kP = 8;         // 16-byte chunks a lane fetches of its first row
constexpr int kThreads = 256;
constexpr int kMaxK = 5632;   // the longest activation staged in shared memory

enum Kind : int { kGemv, kNormGemv, kNormGlu, kShort };

// One phase: a product y[rows] = W[rows, k] x (+ res), of x normalized first (kNorm*), or for
// kNormGlu y[o] = silu(W[o] xn) * W[o + rows] xn; or kShort: blocks [0, blocks) wait ns, then
// y[i] = 0.5 x[i] for i < rows.
struct Phase {
  int kind, rows, k8, blocks, ns;
  const uint4* w;
  const float *x, *res;
  float* y;
};

constexpr int kMaxPhases = 22 * 6 + 2;
__constant__ Phase c_phases[kMaxPhases];

// acc + dot(8 halves in u, x[0..8)), x in shared memory (every product stages its input).
__device__ inline float dot8(uint4 u, const float4* x, float acc) {
  __half2 h[4];
  memcpy(h, &u, 16);
  const float4 a = x[0], b = x[1];
  const float xs[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(h[i]);
    acc = fmaf(f.x, xs[2 * i], acc);
    acc = fmaf(f.y, xs[2 * i + 1], acc);
  }
  return acc;
}

// A warp's first row(s) of a phase, fetched early: kP chunks of row o, or kP / 2 of the gate
// row and of the up row.
struct Fetch {
  uint4 u[kP];
  int o = -1;
};

__device__ inline void fetch(const Phase& p, int o, int lane, Fetch& f) {
  f.o = -1;
  if (p.kind == kShort || o >= p.rows) return;
  f.o = o;
  if (p.kind == kNormGlu) {
#pragma unroll
    for (int t = 0; t < kP / 2; ++t) {
      const int c = lane + 32 * t;
      f.u[t] = c < p.k8 ? __ldg(p.w + size_t(o) * p.k8 + c) : make_uint4(0, 0, 0, 0);
      f.u[kP / 2 + t] = c < p.k8 ? __ldg(p.w + size_t(o + p.rows) * p.k8 + c) : make_uint4(0, 0, 0, 0);
    }
  } else {
#pragma unroll
    for (int t = 0; t < kP; ++t) {
      const int c = lane + 32 * t;
      f.u[t] = c < p.k8 ? __ldg(p.w + size_t(o) * p.k8 + c) : make_uint4(0, 0, 0, 0);
    }
  }
}

__device__ inline float dot_from(const uint4* r, const float4* x, int k8, int c, float acc) {
  for (; c < k8; c += 256) {
    uint4 u[8];
#pragma unroll
    for (int t = 0; t < 8; ++t) u[t] = c + 32 * t < k8 ? __ldg(r + c + 32 * t) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int t = 0; t < 8; ++t)
      if (c + 32 * t < k8) acc = dot8(u[t], x + 2 * (c + 32 * t), acc);
  }
  return acc;
}
__device__ inline float warp_sum(float v) {
#pragma unroll
  for (int s = 16; s; s >>= 1) v += __shfl_xor_sync(~0u, v, s);
  return v;
}

// The first `threads` threads of the block meet at `bar` (0: the whole block, __syncthreads).
__device__ inline void meet(int bar, int threads) {
  if (bar == 0) __syncthreads();
  else asm volatile("bar.sync %0, %1;" ::"r"(bar), "r"(threads) : "memory");
}
// x into shared memory, rms-normalized for the norm phases (every block, as rlx's norm +
// product); read with .cg loads (past L1, which is not coherent across the persistent
// kernel's barriers), once a block (its first wpb warps), where a warp's rows then read it many times.
// laps (profiling, nullable): + cycles until x's loads arrived, then the first barrier, then the rest.
// in_place: x is in xs4 already (raw), to be normalized there.
__device__ inline const float4* stage_x(const Phase& p, float4* xs4, float* part, int wpb, int bar = 0,
                                        long long* laps = nullptr, bool in_place = false) {
  long long t0 = laps ? clock64() : 0;
  const auto lap = [&](int i) {
    const long long t = clock64();
    laps[i] += t - t0;
    t0 = t;
  };
  // A thread's elements (i, i + nt, ...: at most kMaxK / 256) are loaded at once, one trip
  // to L2 rather than one per element (nt is 256 in every schedule here).
  constexpr int kMost = (kMaxK + 255) / 256;
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, k = 8 * p.k8, nt = 32 * wpb;
  float v[kMost];
#pragma unroll
  for (int t = 0; t < kMost; ++t) {
    const int i = threadIdx.x + t * nt;
    v[t] = i >= k ? 0.0f : in_place ? reinterpret_cast<const float*>(xs4)[i] : __ldcg(p.x + i);
  }
  if (laps) {
    float all = 0;
#pragma unroll
    for (int t = 0; t < kMost; ++t) all += v[t];
    asm volatile("" ::"f"(all));
    lap(0);
  }
  float inv = 1.0f;
  if (p.kind != kGemv) {
    float s = 0;
#pragma unroll
    for (int t = 0; t < kMost; ++t)
      if (threadIdx.x + t * nt < k) s = fmaf(v[t], v[t], s);
    s = warp_sum(s);
    if (lane == 0) part[warp] = s;
    meet(bar, nt);
    if (laps) lap(1);
    float tot = 0;
    for (int w = 0; w < wpb; ++w) tot += part[w];
    inv = rsqrtf(tot / float(k) + 1e-5f);
  }
  float* xs = reinterpret_cast<float*>(xs4);
#pragma unroll
  for (int t = 0; t < kMost; ++t)
    if (threadIdx.x + t * nt < k) xs[threadIdx.x + t * nt] = p.kind != kGemv ? v[t] * inv : v[t];
  meet(bar, nt);
  if (laps) lap(2);
  return xs4;
}

// A kShort phase's work for this block, by its first nt threads.
__device__ inline void short_phase(const Phase& p, int nt) {
  if (int(blockIdx.x) >= p.blocks) return;
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); while (t - t0 < (unsigned long long)p.ns);
  for (int i = blockIdx.x * nt + threadIdx.x; i < p.rows; i += p.blocks * nt) p.y[i] = 0.5f * __ldcg(p.x + i);
}

// The phase's work for this block (every block of the grid takes part; a kShort phase only
// its first `blocks`). `f` holds the warp's first row, fetched earlier.
// staged: x is in xs4 already, normalized (phase_mc_kernel).
__device__ void run_phase(const Phase& p, const Fetch& f, float4* xs4, float* part, bool staged = false) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, wpb = blockDim.x / 32;
  if (p.kind == kShort) {
    short_phase(p, blockDim.x);
    return;
  }
  const float4* x = staged ? xs4 : stage_x(p, xs4, part, blockDim.x / 32);
  const int all = gridDim.x * wpb;
  for (int o = blockIdx.x * wpb + warp; o < p.rows; o += all) {
    const bool held = o == f.o;
    if (p.kind == kNormGlu) {
      const uint4 *rg = p.w + size_t(o) * p.k8, *ru = p.w + size_t(o + p.rows) * p.k8;
      float g = 0, u = 0;
      int c = lane;
      if (held) {
#pragma unroll
        for (int t = 0; t < kP / 2; ++t)
          if (c + 32 * t < p.k8) {
            g = dot8(f.u[t], x + 2 * (c + 32 * t), g);
            u = dot8(f.u[kP / 2 + t], x + 2 * (c + 32 * t), u);
          }
        c += 32 * kP / 2;
      }
      g = warp_sum(dot_from(rg, x, p.k8, c, g));
      u = warp_sum(dot_from(ru, x, p.k8, c, u));
      if (lane == 0) p.y[o] = __fmul_rn(g / (1.0f + expf(-g)), u);
    } else {
      const uint4* r = p.w + size_t(o) * p.k8;
      float acc = 0;
      int c = lane;
      if (held) {
#pragma unroll
        for (int t = 0; t < kP; ++t)
          if (c + 32 * t < p.k8) acc = dot8(f.u[t], x + 2 * (c + 32 * t), acc);
        c += 32 * kP;
      }
      acc = warp_sum(dot_from(r, x, p.k8, c, acc));
      if (lane == 0) p.y[o] = p.res ? acc + __ldcg(p.res + o) : acc;
    }
  }
}

// One launch per phase: the first row fetched before the wait for the launch before.
// dry: only the wait and the trigger (what a launch boundary alone costs).
// early: the next launch may start at once (not only after this one's wait), so a chain of
// launches can be resident together, each waiting for the one before.
__global__ void __launch_bounds__(kThreads) phase_kernel(int i, int dry, int early) {
  __shared__ float4 xs4[kMaxK / 4];
  __shared__ float part[kThreads / 32];
  const Phase& p = c_phases[i];
  if (early) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  Fetch f;
  if (!dry) fetch(p, blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, threadIdx.x & 31, f);
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (!early) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (!dry) run_phase(p, f, xs4, part);
}

// Phase i's completion counter: 8 shards 128 bytes apart (block b adds 1 to shard b % 8
// when it is done with the phase: release), so the arrivals of a phase spread over several
// L2 slices; a block that takes part in phase i + 1 waits until every block that does work
// in phase i has arrived (8 threads poll a shard each: acquire). A block with no work in a
// phase (a short phase's) neither arrives nor waits there: what depends on it waits for its
// producers, and they for theirs.
constexpr int kShards = 8, kStride = 32;
__device__ inline unsigned* counters(unsigned* bar, int i) { return bar + size_t(i) * kShards * kStride; }
__device__ inline bool takes_part(const Phase& p) { return p.kind != kShort || int(blockIdx.x) < p.blocks; }
__device__ inline int producers(const Phase& p) { return p.kind == kShort ? min(p.blocks, int(gridDim.x)) : int(gridDim.x); }
__device__ inline void arrive(unsigned* c, int bar = 0, int nt = 0) {
  meet(bar, nt);
  if (threadIdx.x == 0)
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(c + (blockIdx.x % kShards) * kStride) : "memory");
}
__device__ inline void wait_for(unsigned* c, int n, int bar = 0, int nt = 0) {
  if (threadIdx.x < kShards) {
    const unsigned want = unsigned(n / kShards + (int(threadIdx.x) < n % kShards));
    const unsigned* at = c + threadIdx.x * kStride;
    unsigned v;
    do asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(at) : "memory"); while (v < want);
  }
  meet(bar, nt);
}

// The whole step, phases [0, n), in one cooperative launch.
// dry: only the barriers (what a grid-wide barrier alone costs).
__global__ void __launch_bounds__(kThreads) step_kernel(int n, unsigned* bar, int dry) {
  __shared__ float4 xs4[kMaxK / 4];
  __shared__ float part[kThreads / 32];
  const int o = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x & 31;
  Fetch f;
  if (dry) {
    for (int i = 0; i < n; ++i) {
      if (i > 0) wait_for(counters(bar, i - 1), gridDim.x);
      arrive(counters(bar, i));
    }
    return;
  }
  fetch(c_phases[0], o, lane, f);
  int held = 0;  // the phase whose first row f holds
  for (int i = 0; i < n; ++i) {
    if (!takes_part(c_phases[i])) continue;
    if (i > 0) wait_for(counters(bar, i - 1), producers(c_phases[i - 1]));
    if (held != i) f.o = -1;
    run_phase(c_phases[i], f, xs4, part);
    arrive(counters(bar, i));
    // The next product's first row (past any short phases), fetched before this warp
    // reaches the barrier, and held through the short phases.
    if (held <= i) {
      int next = i + 1;
      while (next < n && c_phases[next].kind == kShort) ++next;
      if (next < n) {
        fetch(c_phases[next], o, lane, f);
        held = next;
      }
    }
  }
}

// ---- persistent, the weights streamed through shared memory
//
// Each warp walks its weight "units" (4 KB: a segment of kSeg chunks of one row) in the
// order it consumes them, across phases: per product phase, per row of the warp, per
// segment (kNormGlu: the gate row's, then the up row's). It keeps S units in flight in a
// ring of shared memory (cp.async, one group a unit); consuming a unit issues the next.
// So the next phase's weights stream while this warp waits at a barrier or sits out a
// short phase: up to S x 4 KB a warp, where the register fetch holds 4 KB.
constexpr int kSeg = 256;

struct Cursor {
  int ph = -1, o = 0, seg = 0, up = 0;
};
__device__ inline void next_phase(Cursor& c, int n, int gw) {
  for (++c.ph; c.ph < n; ++c.ph)
    if (c_phases[c.ph].kind != kShort && gw < c_phases[c.ph].rows) break;
  c.o = gw;
  c.seg = c.up = 0;
}
__device__ inline void advance(Cursor& c, int n, int gw, int all) {
  const Phase& p = c_phases[c.ph];
  if (p.kind == kNormGlu && !c.up) {
    c.up = 1;
    return;
  }
  c.up = 0;
  if (++c.seg * kSeg < p.k8) return;
  c.seg = 0;
  c.o += all;
  if (c.o >= p.rows) next_phase(c, n, gw);
}

__device__ inline void wait_groups(int pending) {  // at most `pending` groups still in flight
  switch (pending) {
    case 0: asm volatile("cp.async.wait_group 0;" ::: "memory"); break;
    case 1: asm volatile("cp.async.wait_group 1;" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;" ::: "memory"); break;
    case 3: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
    case 4: asm volatile("cp.async.wait_group 4;" ::: "memory"); break;
    case 5: asm volatile("cp.async.wait_group 5;" ::: "memory"); break;
    case 6: asm volatile("cp.async.wait_group 6;" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 7;" ::: "memory"); break;
  }
}

struct Stream {
  uint4* ring;  // this warp's S slots of kSeg chunks
  int S, n, gw, all, lane;
  int issued = 0, used = 0;
  Cursor ahead;  // the next unit to issue
  // The next unit into its slot (an empty group past the last unit, so that the groups
  // still count units).
  __device__ void issue() {
    if (ahead.ph < n) {
      const Phase& p = c_phases[ahead.ph];
      const uint4* src = p.w + size_t(ahead.o + (ahead.up ? p.rows : 0)) * p.k8 + ahead.seg * kSeg;
      const int len = min(kSeg, p.k8 - ahead.seg * kSeg);
      uint4* dst = ring + (issued % S) * kSeg;
#pragma unroll
      for (int t = 0; t < kSeg / 32; ++t) {
        const int c = lane + 32 * t;
        if (c < len) {
          const unsigned d = unsigned(__cvta_generic_to_shared(dst + c));
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src + c) : "memory");
        }
      }
      advance(ahead, n, gw, all);
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
    ++issued;
  }
  __device__ const uint4* wait_next() {
    wait_groups(issued - used - 1);
    return ring + (used % S) * kSeg;
  }
  __device__ void release() {
    ++used;
    issue();
  }
};

__device__ inline float unit_dot(const uint4* u, const float4* x, int len, int lane, float acc) {
#pragma unroll
  for (int t = 0; t < kSeg / 32; ++t) {
    const int c = lane + 32 * t;
    if (c < len) acc = dot8(u[c], x + 2 * c, acc);
  }
  return acc;
}

// Row o's result from the lanes' partial sums g (and up): silu(g) * up for kNormGlu, else
// the sum plus the residual (as run_phase stores them: the same bits).
__device__ inline void finish_row(const Phase& p, int o, int lane, float g, float up) {
  g = warp_sum(g);
  if (p.kind == kNormGlu) {
    up = warp_sum(up);
    if (lane == 0) p.y[o] = __fmul_rn(g / (1.0f + expf(-g)), up);
  } else if (lane == 0) {
    p.y[o] = p.res ? g + __ldcg(p.res + o) : g;
  }
}

__device__ void run_phase_stream(const Phase& p, Stream& st, float4* xs4, float* part) {
  if (p.kind == kShort) {
    Fetch none;
    run_phase(p, none, xs4, part);
    return;
  }
  const float4* x = stage_x(p, xs4, part, blockDim.x / 32);
  const int lane = st.lane;
  for (int o = st.gw; o < p.rows; o += st.all) {
    float acc = 0, up = 0;
    for (int seg = 0; seg * kSeg < p.k8; ++seg) {
      const int len = min(kSeg, p.k8 - seg * kSeg);
      const float4* xs = x + 2 * seg * kSeg;
      acc = unit_dot(st.wait_next(), xs, len, lane, acc);
      st.release();
      if (p.kind == kNormGlu) {
        up = unit_dot(st.wait_next(), xs, len, lane, up);
        st.release();
      }
    }
    finish_row(p, o, lane, acc, up);
  }
}

// This warp's stream over the units of phases [first, n), its first S units issued.
__device__ inline Stream start_stream(uint4* ring, int S, int first, int n) {
  const int wpb = blockDim.x / 32, warp = threadIdx.x / 32;
  Stream st;
  st.ring = ring + size_t(warp) * S * kSeg;
  st.S = S;
  st.n = n;
  st.gw = blockIdx.x * wpb + warp;
  st.all = gridDim.x * wpb;
  st.lane = threadIdx.x & 31;
  st.ahead.ph = first - 1;
  next_phase(st.ahead, n, st.gw);
  for (int u = 0; u < S; ++u) st.issue();
  return st;
}

// One launch per phase, each warp's first S units of the phase's weights issued into its
// shared memory before the wait for the launch before (a block of the next launch that
// fits beside this one's streams while this one finishes).
__global__ void __launch_bounds__(kThreads) phase_stream_kernel(int i, int S) {
  __shared__ float4 xs4[kMaxK / 4];
  __shared__ float part[kThreads / 32];
  extern __shared__ uint4 ring[];
  Stream st = start_stream(ring, S, i, i + 1);  // this phase's units only
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  run_phase_stream(c_phases[i], st, xs4, part);
  asm volatile("cp.async.wait_all;" ::: "memory");
}

// The whole step in one cooperative launch, the weights streamed through S slots a warp.
__global__ void __launch_bounds__(kThreads) stream_kernel(int n, unsigned* bar, int S) {
  __shared__ float4 xs4[kMaxK / 4];
  __shared__ float part[kThreads / 32];
  extern __shared__ uint4 ring[];
  Stream st = start_stream(ring, S, 0, n);
  for (int i = 0; i < n; ++i) {
    if (!takes_part(c_phases[i])) continue;
    if (i > 0) wait_for(counters(bar, i - 1), producers(c_phases[i - 1]));
    run_phase_stream(c_phases[i], st, xs4, part);
    arrive(counters(bar, i));
  }
  asm volatile("cp.async.wait_all;" ::: "memory");
}

// ---- the weights streamed by the copy engine through rings in shared memory
//
// A block's rows of a product are a contiguous range [r0, r1); consumer warp w (of 8) takes
// rows w, w + 8, ... of it, each as units of at most 4 KB (kSeg chunks of the row; kNormGlu:
// a segment of the gate row, then the same of the up row), which arrive in the warp's own
// ring of S slots. A ninth warp produces: its lane w issues one bulk copy (cp.async.bulk,
// completing on the slot's "full" mbarrier) per unit of warp w, in the order the warp takes
// them, refilling a slot once the warp has arrived on the slot's "empty" barrier. Weights are nobody's result, so it
// starts at once, and the rings fill while the consumers wait. A warp's units walk its row
// in row_dot's order (the same bits as the other schedules). One launch per product
// (ring_kernel; with early, the next launch may start at once, so its rings fill beside
// this one's tail where two blocks fit a SM), or the whole step in one persistent launch
// (ring_step_kernel), where the producer runs on into the next products through the phase
// waits and the short phases, up to S x 4 KB a warp ahead. (Measured on an H100, session
// 40: the units issued by the consumer warps themselves, each the unit S ahead when it is
// done with a slot, were slower in both forms; so were all units issued by one producer
// thread, in row order: its index arithmetic bound the stream.)
constexpr int kRingWarps = 8, kRingThreads = 32 * (kRingWarps + 1);

__device__ inline unsigned smem_addr(const void* p) { return unsigned(__cvta_generic_to_shared(p)); }
__device__ inline void mbar_init(uint64_t* b, unsigned n) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(b)), "r"(n) : "memory");
}
__device__ inline void mbar_arrive(uint64_t* b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(b)) : "memory");
}
__device__ inline void mbar_expect(uint64_t* b, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(b)), "r"(bytes) : "memory");
}
__device__ inline void mbar_wait(uint64_t* b, unsigned parity) {
  asm volatile(
      "{\n .reg .pred done;\n WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n @!done bra WAIT;\n}"
      ::"r"(smem_addr(b)), "r"(parity) : "memory");
}
__device__ inline void bulk_copy(void* dst, const void* src, unsigned bytes, uint64_t* b) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(smem_addr(dst)), "l"(src), "r"(bytes), "r"(smem_addr(b)) : "memory");
}
__host__ __device__ inline size_t rings_smem(int S) { return size_t(kRingWarps) * S * (kSeg * 16 + 16); }
__host__ __device__ inline size_t ring_smem(const Phase& p, int S) { return size_t(p.k8) * 32 + rings_smem(S); }

// A block's rings: S slots of kSeg chunks per consumer warp, a "full" and an "empty"
// barrier per slot; warp w's slots are w * S, ..., w * S + S - 1, taken in turn (RingPos).
struct Rings {
  uint4* slots;
  uint64_t *full, *empty;
  int S;
};
__device__ inline Rings make_rings(uint4* at, int S) {
  Rings r{at, nullptr, nullptr, S};
  r.full = reinterpret_cast<uint64_t*>(at + size_t(kRingWarps) * S * kSeg);
  r.empty = r.full + kRingWarps * S;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kRingWarps * S; ++s) {
      mbar_init(r.full + s, 1);
      mbar_init(r.empty + s, 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  return r;
}
__device__ inline void block_rows(const Phase& p, int& r0, int& n) {
  r0 = int(int64_t(p.rows) * blockIdx.x / gridDim.x);
  n = int(int64_t(p.rows) * (blockIdx.x + 1) / gridDim.x) - r0;
}
// Cycles spent, summed over the blocks of a profiled run (RING_PROFILE): [0] the consumer
// warps' whole run, [1] their waits for full slots, [2] their phase waits, [3] their x
// staging, [4] the producer's whole run, [5] its waits for empty slots.
// [6], [7], [8]: the staging's parts (stage_x's laps).
__device__ unsigned long long g_ring_prof[10];  // [9]: the consumers' arrivals (the block's barrier)
struct Clock {
  long long t;
  __device__ void start() { t = clock64(); }
  __device__ long long lap() {
    const long long n = clock64(), d = n - t;
    t = n;
    return d;
  }
};

// Where a warp's ring stands: its next slot and how many times the ring has wrapped.
struct RingPos {
  int slot = 0;
  unsigned round = 0;
  __device__ void next(int S) {
    if (++slot == S) {
      slot = 0;
      ++round;
    }
  }
};
// Producer lane w (< kRingWarps): every unit of product phase p for consumer warp w, in
// the order it consumes them; the lanes run side by side, each waiting only for its own
// warp's slots. waited: cycles waiting for empty slots (Prof).
template <bool Prof = false>
__device__ inline void produce(const Phase& p, const Rings& r, int w, RingPos& at, long long* waited = nullptr) {
  int r0, n;
  block_rows(p, r0, n);
  const int segs = (p.k8 + kSeg - 1) / kSeg, parts = p.kind == kNormGlu ? 2 : 1;
  for (int j = w; j < n; j += kRingWarps)
    for (int seg = 0; seg < segs; ++seg) {
      const unsigned bytes = unsigned(min(kSeg, p.k8 - seg * kSeg) * 16);
      for (int part = 0; part < parts; ++part) {
        const int s = w * r.S + at.slot;
        if (at.round > 0) {
          long long t0 = 0;
          if constexpr (Prof) t0 = clock64();
          mbar_wait(r.empty + s, (at.round - 1) & 1);
          if constexpr (Prof) *waited += clock64() - t0;
        }
        mbar_expect(r.full + s, bytes);
        bulk_copy(r.slots + size_t(s) * kSeg, p.w + size_t(r0 + j + part * p.rows) * p.k8 + seg * kSeg, bytes,
                  r.full + s);
        at.next(r.S);
      }
    }
}
// Consumer warp `warp`: its rows of product phase p from its ring. waited: cycles waiting
// for full slots (Prof).
template <bool Prof = false>
__device__ inline void consume(const Phase& p, const Rings& r, const float4* x, int warp, int lane, RingPos& at,
                               long long* waited = nullptr) {
  int r0, n;
  block_rows(p, r0, n);
  const int segs = (p.k8 + kSeg - 1) / kSeg, parts = p.kind == kNormGlu ? 2 : 1;
  for (int j = warp; j < n; j += kRingWarps) {
    float g = 0, up = 0;
    for (int seg = 0; seg < segs; ++seg) {
      const int len = min(kSeg, p.k8 - seg * kSeg);
      const float4* xs = x + 2 * seg * kSeg;
      for (int part = 0; part < parts; ++part) {
        const int s = warp * r.S + at.slot;
        long long t0 = 0;
        if constexpr (Prof) t0 = clock64();
        mbar_wait(r.full + s, at.round & 1);
        if constexpr (Prof) *waited += clock64() - t0;
        const uint4* u = r.slots + size_t(s) * kSeg;
        float a = part ? up : g;
#pragma unroll
        for (int t = 0; t < kSeg / 32; ++t) {
          const int c = lane + 32 * t;
          if (c < len) a = dot8(u[c], xs + 2 * c, a);
        }
        if (part) up = a;
        else g = a;
        __syncwarp();
        if (lane == 0) mbar_arrive(r.empty + s);
        at.next(r.S);
      }
    }
    finish_row(p, r0 + j, lane, g, up);
  }
}

// One product phase, one launch.
__global__ void __launch_bounds__(kRingThreads) ring_kernel(int i, int S, int early) {
  __shared__ float part[kRingWarps];
  extern __shared__ uint4 dyn[];
  const Phase& p = c_phases[i];
  if (early) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  const Rings r = make_rings(dyn + p.k8 * 2, S);
  RingPos at;
  if (warp == kRingWarps) {
    if (lane < kRingWarps) produce(p, r, lane, at);
    return;
  }
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (!early) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const float4* x = stage_x(p, reinterpret_cast<float4*>(dyn), part, kRingWarps, 1);
  consume(p, r, x, warp, lane, at);
}

// The whole step in one cooperative launch, one block a SM; the consumers wait for each
// phase's producers as step_kernel does.
// Prof: where the cycles go (g_ring_prof), for a run that is not timed.
template <bool Prof>
__global__ void __launch_bounds__(kRingThreads) ring_step_kernel(int n, unsigned* bar, int S) {
  __shared__ float part[kRingWarps];
  __shared__ float4 xs4[kMaxK / 4];
  extern __shared__ uint4 dyn[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, nt = 32 * kRingWarps;
  Clock clk;
  clk.start();
  const Rings r = make_rings(dyn, S);
  RingPos at;
  if (warp == kRingWarps) {
    long long waited = 0;
    if (lane < kRingWarps) {
      for (int i = 0; i < n; ++i)
        if (c_phases[i].kind != kShort) produce<Prof>(c_phases[i], r, lane, at, &waited);
      if constexpr (Prof) {
        atomicAdd(g_ring_prof + 4, (unsigned long long)clk.lap());
        atomicAdd(g_ring_prof + 5, (unsigned long long)waited);
      }
    }
    return;
  }
  long long full_wait = 0, phase_wait = 0, staging = 0, laps[3] = {0, 0, 0}, arriving = 0;
  const long long start = clk.t;
  for (int i = 0; i < n; ++i) {
    const Phase& p = c_phases[i];
    if (!takes_part(p)) continue;
    if constexpr (Prof) clk.lap();
    if (i > 0) wait_for(counters(bar, i - 1), producers(c_phases[i - 1]), 1, nt);
    if constexpr (Prof) phase_wait += clk.lap();
    if (p.kind == kShort) {
      short_phase(p, nt);
    } else {
      const float4* x = stage_x(p, xs4, part, kRingWarps, 1, Prof ? laps : nullptr);
      if constexpr (Prof) staging += clk.lap();
      consume<Prof>(p, r, x, warp, lane, at, &full_wait);
    }
    if constexpr (Prof) clk.lap();
    arrive(counters(bar, i), 1, nt);
    if constexpr (Prof) arriving += clk.lap();
  }
  if constexpr (Prof)
    if (lane == 0) {
      atomicAdd(g_ring_prof + 0, (unsigned long long)(clock64() - start));
      atomicAdd(g_ring_prof + 1, (unsigned long long)full_wait);
      atomicAdd(g_ring_prof + 2, (unsigned long long)phase_wait);
      atomicAdd(g_ring_prof + 3, (unsigned long long)staging);
      for (int i = 0; i < 3; ++i) atomicAdd(g_ring_prof + 6 + i, (unsigned long long)laps[i]);
      atomicAdd(g_ring_prof + 9, (unsigned long long)arriving);
    }
}

// ---- x to every block of a cluster: one multicast bulk copy per slice
//
// As phase_kernel (rlx's form), but a product's x reaches the blocks of each cluster of C
// (launched with that cluster shape) by C bulk copies, block r copying slice r of x into
// the shared memory of every block of its cluster (cp.async.bulk ... .multicast::cluster),
// so L2 serves each line of x to a cluster once instead of to every block: every block of
// the grid reads the same x right after its wait, and those reads, not the weights, were
// most of a phase's time in the profiled ring schedule. The norm then reads x from shared
// memory in stage_x's order (the same bits).
__device__ inline unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ inline unsigned cluster_size() {
  unsigned n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
  return n;
}
__device__ inline void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ inline void bulk_multicast(void* dst, const void* src, unsigned bytes, uint64_t* b, unsigned short mask) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, [%3], %4;"
      ::"r"(smem_addr(dst)), "l"(src), "r"(bytes), "r"(smem_addr(b)), "h"(mask) : "memory");
}
__global__ void __launch_bounds__(kThreads) phase_mc_kernel(int i, int early) {
  __shared__ float4 xs4[kMaxK / 4];
  __shared__ float part[kThreads / 32];
  __shared__ uint64_t got;
  const Phase& p = c_phases[i];
  if (early) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  Fetch f;
  fetch(p, blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, threadIdx.x & 31, f);
  const unsigned C = cluster_size(), rank = cluster_rank();
  const int k = 8 * p.k8, per = k / int(C);
  if (threadIdx.x == 0) {
    mbar_init(&got, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    mbar_expect(&got, unsigned(k * 4));
  }
  cluster_sync();  // every block's barrier ready before any copy lands in it
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (!early) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (threadIdx.x == 0) {
    asm volatile("fence.proxy.async.global;" ::: "memory");
    bulk_multicast(reinterpret_cast<float*>(xs4) + rank * per, p.x + rank * per, unsigned(per * 4), &got,
                   (unsigned short)((1u << C) - 1));
  }
  mbar_wait(&got, 0);
  stage_x(p, xs4, part, blockDim.x / 32, 0, nullptr, true);
  run_phase(p, f, xs4, part, true);
  cluster_sync();  // no block leaves while a copy into it may be in flight
}

__global__ void fill(__half* w, size_t n, unsigned seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    w[i] = __float2half((float(h & 0xffff) / 32768.0f - 1.0f) * scale);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int rot_ns = argc > 1 ? atoi(argv[1]) : 1800, att_ns = argc > 2 ? atoi(argv[2]) : 4000;
  int sms = 0, per_sm = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, step_kernel, kThreads, 0);
  const int layers = 22, d = 2048, ff = 5632, qkv = 2560, vocab = 32000;
  float *h, *h2, *q, *att, *act, *logits, *saved;
  for (float** b : {&h, &h2, &q, &att, &act, &logits}) cudaMalloc(b, sizeof(float) * vocab);
  cudaMalloc(&saved, sizeof(float) * vocab);
  unsigned* bar;
  const size_t bar_bytes = sizeof(unsigned) * kMaxPhases * kShards * kStride;
  cudaMalloc(&bar, bar_bytes);
  std::vector<Phase> ph;
  double bytes = 0;
  unsigned seed = 1;
  auto mat = [&](int rows, int k) {
    __half* w;
    const size_t n = size_t(rows) * k;
    cudaMalloc(&w, n * 2);
    fill<<<1024, 256>>>(w, n, seed++, 1.0f / std::sqrt(float(k)));
    bytes += 2.0 * n;
    return reinterpret_cast<const uint4*>(w);
  };
  for (int l = 0; l < layers; ++l) {
    ph.push_back({kNormGemv, qkv, d / 8, 0, 0, mat(qkv, d), h, nullptr, q});
    ph.push_back({kShort, d, 0, 40, rot_ns, nullptr, q, nullptr, att});
    ph.push_back({kShort, d, 0, 128, att_ns, nullptr, att, nullptr, att});  // in place: each element by one thread
    ph.push_back({kGemv, d, d / 8, 0, 0, mat(d, d), att, h, h2});
    ph.push_back({kNormGlu, ff, d / 8, 0, 0, mat(2 * ff, d), h2, nullptr, act});
    ph.push_back({kGemv, d, ff / 8, 0, 0, mat(d, ff), act, h2, h});
  }
  ph.push_back({kNormGemv, vocab, d / 8, 0, 0, mat(vocab, d), h, nullptr, logits});
  const int n = int(ph.size());
  cudaMemcpyToSymbol(c_phases, ph.data(), sizeof(Phase) * ph.size());
  cudaDeviceSynchronize();
  std::vector<float> init(d);
  for (int i = 0; i < d; ++i) init[i] = std::sin(0.37f * i);
  float* h0;  // the step's input row, copied into h at the start of every step
  cudaMalloc(&h0, sizeof(float) * d);
  cudaMemcpy(h0, init.data(), sizeof(float) * d, cudaMemcpyHostToDevice);
  printf("persistent_layer: %d SMs, %d blocks of %d threads resident a SM, %d phases, %.1f MB of weights a step; "
         "short phases %d + %d ns\n", sms, per_sm, kThreads, n, bytes / 1e6, rot_ns, att_ns);

  cudaStream_t st;
  cudaStreamCreate(&st);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  // A graph of one step: the input row reset, then the launches (mode 0), the persistent
  // kernel with the register fetch (1) or with S slots a warp of shared memory (2).
  auto build = [&](int mode, int blocks_per_sm, int S, int dry, int early) -> cudaGraphExec_t {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal);
    cudaMemcpyAsync(h, h0, sizeof(float) * d, cudaMemcpyDeviceToDevice, st);
    const int grid = sms * blocks_per_sm;
    cudaLaunchAttribute at;
    cudaLaunchConfig_t c = {};
    c.stream = st;
    c.attrs = &at;
    c.numAttrs = 1;
    c.blockDim = kThreads;
    if (mode == 1 || mode == 2 || mode == 5) {
      cudaMemsetAsync(bar, 0, bar_bytes, st);
      at.id = cudaLaunchAttributeCooperative;
      at.val.cooperative = 1;
      c.gridDim = grid;
      if (mode == 1) {
        cudaLaunchKernelEx(&c, step_kernel, n, bar, dry);
      } else if (mode == 5) {
        c.blockDim = kRingThreads;
        c.dynamicSmemBytes = rings_smem(S);
        if (dry) cudaLaunchKernelEx(&c, ring_step_kernel<true>, n, bar, S);
        else cudaLaunchKernelEx(&c, ring_step_kernel<false>, n, bar, S);
      } else {
        c.dynamicSmemBytes = size_t(kThreads / 32) * S * kSeg * 16;
        cudaLaunchKernelEx(&c, stream_kernel, n, bar, S);
      }
    } else {
      at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      at.val.programmaticStreamSerializationAllowed = 1;
      for (int i = 0; i < n; ++i) {
        c.gridDim = ph[size_t(i)].kind == kShort ? ph[size_t(i)].blocks : grid;
        c.blockDim = kThreads;
        if (mode == 3 && ph[size_t(i)].kind != kShort) {
          c.dynamicSmemBytes = size_t(kThreads / 32) * S * kSeg * 16;
          cudaLaunchKernelEx(&c, phase_stream_kernel, i, S);
        } else if (mode == 6 && ph[size_t(i)].kind != kShort) {
          cudaLaunchAttribute two[2];
          two[0] = at;
          two[1].id = cudaLaunchAttributeClusterDimension;
          two[1].val.clusterDim.x = unsigned(S);
          two[1].val.clusterDim.y = two[1].val.clusterDim.z = 1;
          cudaLaunchConfig_t cc = c;
          cc.attrs = two;
          cc.numAttrs = 2;
          cc.dynamicSmemBytes = 0;
          cudaLaunchKernelEx(&cc, phase_mc_kernel, i, early);
        } else if (mode == 4 && ph[size_t(i)].kind != kShort) {
          c.blockDim = kRingThreads;
          c.dynamicSmemBytes = ring_smem(ph[size_t(i)], S);
          cudaLaunchKernelEx(&c, ring_kernel, i, S, early);
        } else {
          c.dynamicSmemBytes = 0;
          cudaLaunchKernelEx(&c, phase_kernel, i, dry, early);
        }
      }
    }
    cudaStreamEndCapture(st, &g);
    if (cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) {
      printf("instantiate failed: %s\n", cudaGetErrorString(cudaGetLastError()));
      exit(1);
    }
    cudaGraphDestroy(g);
    return ge;
  };
  auto time = [&](cudaGraphExec_t ge) {
    for (int i = 0; i < 5; ++i) cudaGraphLaunch(ge, st);
    cudaEventRecord(e0, st);
    const int reps = 40;
    for (int i = 0; i < reps; ++i) cudaGraphLaunch(ge, st);
    cudaEventRecord(e1, st);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    return ms / reps;
  };
  const int most_slots = 5;  // the deepest ring asked for below
  const int ring_bytes = kThreads / 32 * most_slots * kSeg * 16;
  for (const void* k : {(const void*)stream_kernel, (const void*)phase_stream_kernel})
    if (cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, ring_bytes) != cudaSuccess)
      printf("cannot give a block %d KB of shared memory: %s\n", ring_bytes >> 10, cudaGetErrorString(cudaGetLastError()));
  // The largest ring launch: the down product's x (22 KB) and rings of up to 200 KB.
  int optin = 0;
  cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
  if (cudaFuncSetAttribute(ring_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin - 64) != cudaSuccess)
    printf("ring_kernel: %s\n", cudaGetErrorString(cudaGetLastError()));
  cudaFuncAttributes rsa;
  cudaFuncGetAttributes(&rsa, ring_step_kernel<false>);
  for (const void* k : {(const void*)ring_step_kernel<false>, (const void*)ring_step_kernel<true>})
    if (cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, optin - int(rsa.sharedSizeBytes)) != cudaSuccess)
      printf("ring_step_kernel: %s\n", cudaGetErrorString(cudaGetLastError()));
  // The most shared memory a ring launch of this step asks for with S slots a warp.
  auto ring_most = [&](int S) {
    size_t most = 0;
    for (const Phase& q : ph)
      if (q.kind != kShort) most = std::max(most, ring_smem(q, S));
    return most;
  };
  struct Build {
    char name[96];
    cudaGraphExec_t ge;
    int dry;
  };
  std::vector<Build> builds;
  auto add = [&](int mode, int bps, int S, int dry = 0, int early = 0) {
    int fit = 0;
    if (mode == 0) cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, phase_kernel, kThreads, 0);
    if (mode == 1) fit = per_sm;
    if (mode == 2)
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, stream_kernel, kThreads, size_t(kThreads / 32) * S * kSeg * 16);
    if (mode == 3)
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, phase_stream_kernel, kThreads, size_t(kThreads / 32) * S * kSeg * 16);
    if (mode == 6) cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, phase_mc_kernel, kThreads, 0);
    if (mode == 5)
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, ring_step_kernel<false>, kRingThreads, rings_smem(S));
    if (mode == 4) {
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, ring_kernel, kRingThreads, ring_most(S));
      printf("(rings of %d x 4 KB a warp: up to %zu B of shared memory a block, %d blocks fit a SM)\n", S,
             ring_most(S), fit);
    }
    if (fit < bps) {
      printf("(%s, %d blocks a SM, S %d: only %d fit)\n", mode == 0 ? "launches" : "persistent", bps, S, fit);
      return;
    }
    Build b;
    if (mode == 0) snprintf(b.name, sizeof b.name, "launches, %d block(s) a SM", bps);
    if (mode == 1) snprintf(b.name, sizeof b.name, "persistent, register fetch, %d block(s) a SM", bps);
    if (mode == 2) snprintf(b.name, sizeof b.name, "persistent, %d x 4 KB a warp, %d block(s) a SM", S, bps);
    if (mode == 3) snprintf(b.name, sizeof b.name, "launches, %d x 4 KB a warp, %d block(s) a SM", S, bps);
    if (mode == 6) snprintf(b.name, sizeof b.name, "launches, %d block(s) a SM, x multicast to clusters of %d", bps, S);
    if (mode == 5) snprintf(b.name, sizeof b.name, "persistent, bulk copies, %d x 4 KB a warp, %d block(s) a SM", S, bps);
    if (mode == 4) snprintf(b.name, sizeof b.name, "launches, bulk copies, %d x 4 KB a warp, %d block(s) a SM", S, bps);
    if (early) snprintf(b.name + strlen(b.name), sizeof b.name - strlen(b.name), ", early");
    if (dry) snprintf(b.name, sizeof b.name, "%s, %d block(s) a SM: nothing but", mode == 0 ? "launch boundaries" : "barriers", bps);
    b.dry = dry;
    b.ge = build(mode, bps, S, dry, early);
    builds.push_back(b);
  };
  if (getenv("RING_PROFILE")) {  // where a persistent ring step's cycles go, S slots a warp
    for (int S : {2, 4, 6}) {
      builds.clear();
      add(5, 1, S, 1);
      for (int rep = 0; rep < 3; ++rep) cudaGraphLaunch(builds[0].ge, st);  // warm
      unsigned long long z[10] = {}, got[10];
      cudaMemcpyToSymbol(g_ring_prof, z, sizeof z);
      const int reps = 10;
      cudaEventRecord(e0, st);
      for (int rep = 0; rep < reps; ++rep) cudaGraphLaunch(builds[0].ge, st);
      cudaEventRecord(e1, st);
      cudaEventSynchronize(e1);
      float ms;
      cudaEventElapsedTime(&ms, e0, e1);
      cudaMemcpyFromSymbol(got, g_ring_prof, sizeof got);
      const double cw = double(got[0]);
      printf("S %d: %.3f ms a step (profiled); consumer warps: full-slot waits %.1f %%, phase waits %.1f %%, x staging "
             "%.1f %%, the rest %.1f %%; producer: empty-slot waits %.1f %% of its run, its run %.1f %% of the "
             "consumers'\n",
             S, ms / reps, 100 * got[1] / cw, 100 * got[2] / cw, 100 * got[3] / cw,
             100 * (1 - (got[1] + got[2] + got[3]) / cw), 100.0 * got[5] / got[4], 100.0 * got[4] * 8 / cw);
      printf("      x staging: loads %.1f %%, first barrier %.1f %%, stores and second barrier %.1f %%; %.0f cycles "
             "a consumer warp and step; arrivals %.1f %%\n", 100 * got[6] / cw, 100 * got[7] / cw, 100 * got[8] / cw,
             cw / (8.0 * sms), 100 * got[9] / cw);
    }
    return 0;
  }
  if (getenv("RING_ONLY")) {  // one ring build, run once (for compute-sanitizer)
    add(4, 1, 2, 0, 1);
    add(5, 1, 2);
    add(6, 2, 8);
    for (Build& b : builds) {
      cudaGraphLaunch(b.ge, st);
      printf("%s: %s\n", b.name, cudaGetErrorString(cudaStreamSynchronize(st)));
    }
    return 0;
  }
  add(0, 2, 0);
  add(0, 1, 0);
  add(0, 3, 0);
  add(1, 2, 0);
  add(1, 1, 0);
  add(2, 2, 1);
  add(2, 2, 2);
  add(2, 1, 2);
  add(2, 1, 4);
  add(2, 1, 5);
  add(3, 1, 1);
  add(3, 1, 2);
  add(3, 2, 1);
  add(3, 1, 4);
  add(0, 2, 0, 1);
  add(1, 2, 0, 1);
  add(0, 2, 0, 0, 1);
  for (int C : {2, 4, 8}) add(6, 2, C);
  add(6, 2, 8, 0, 1);
  for (int S : {3, 4, 6}) add(4, 1, S, 0, 1);
  for (int S : {3, 4, 5, 6}) add(5, 1, S);
  std::vector<float> ref(vocab), got(vocab);
  bool all_same = true;
  for (size_t i = 0; i < builds.size(); ++i) {
    if (builds[i].dry) continue;
    cudaGraphLaunch(builds[i].ge, st);
    if (cudaStreamSynchronize(st) != cudaSuccess) {
      printf("%s: %s\n", builds[i].name, cudaGetErrorString(cudaGetLastError()));
      return 1;
    }
    cudaMemcpy((i ? got : ref).data(), logits, sizeof(float) * vocab, cudaMemcpyDeviceToHost);
    if (i && std::memcmp(got.data(), ref.data(), sizeof(float) * vocab) != 0) {
      all_same = false;
      printf("  %s: logits differ from the first build's\n", builds[i].name);
    }
  }
  printf("same logits in every build: %s (logit 0 = %.6f)\n", all_same ? "yes" : "NO", ref[0]);
  std::vector<std::vector<float>> ms(builds.size());
  for (int round = 0; round < 3; ++round)
    for (size_t i = 0; i < builds.size(); ++i) ms[i].push_back(time(builds[i].ge));
  printf("ms a step, three alternated rounds (GB/s of weights at the median)\n");
  double best = 0;
  for (size_t i = 0; i < builds.size(); ++i) {
    std::vector<float> v = ms[i];
    std::sort(v.begin(), v.end());
    if (builds[i].dry) {
      printf("  %-46s %.3f %.3f %.3f  (%.2f us each of %d)\n", builds[i].name, ms[i][0], ms[i][1], ms[i][2],
             v[1] * 1e3 / (n - 1), n - 1);
      continue;
    }
    printf("  %-46s %.3f %.3f %.3f  (%.0f)\n", builds[i].name, ms[i][0], ms[i][1], ms[i][2], bytes / (v[1] * 1e-3) / 1e9);
    best = std::max(best, bytes / (v[1] * 1e-3) / 1e9);
  }
  void *p, *c;
  const size_t cb = size_t(1) << 30;
  cudaMalloc(&p, cb);
  cudaMalloc(&c, cb);
  cudaEventRecord(e0, st);
  for (int i = 0; i < 10; ++i) cudaMemcpyAsync(c, p, cb, cudaMemcpyDeviceToDevice, st);
  cudaEventRecord(e1, st);
  cudaEventSynchronize(e1);
  float copy_ms;
  cudaEventElapsedTime(&copy_ms, e0, e1);
  const double copy = 2.0 * cb * 10 / (copy_ms * 1e-3) / 1e9;
  printf("device copy (read + write): %.1f GB/s; the fastest build's median: %.1f %% of it\n", copy, best / copy * 100);
  printf("last error: %s\n", cudaGetErrorString(cudaGetLastError()));
  return 0;
}
