// kv_attention over a KV cache (ops.def) on the CUDA backend: f32 queries against f16 or
// f32 cache rows plus the step's new rows, online softmax, f32 sums in a fixed order so that
// runs repeat bit for bit. Two kernels:
//  - by query: a block per (sequence, query head, query), its warps splitting the keys. A
//    prompt's many queries fill the device this way; also the fallback for f32 caches and
//    head dims that are not whole 16-byte chunks.
//  - by KV head (a decode step's few queries, f16 caches): a thread-block cluster per
//    (sequence, KV head, pair of query heads sharing it, query), its blocks splitting the
//    keys, by 16-byte loads, the first of them issued before the wait for the kernel before.
//    Also run fused with the step's kv_store (kv_store_attention): the queries rotated and
//    the new K / V row made in registers, and written into the caches by one lane group.
#include <cooperative_groups.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "backends/cuda/device_util.cuh"
#include "backends/cuda/kernels.h"

namespace rlx::cuda {
namespace {

using dev::warp_sum;

// ---- by query

constexpr int kMaxDimPerLane = 8;  // head dims up to 256
constexpr int kRows = 4;  // key rows a warp of kv_attention loads at once

template <bool F16>
__device__ inline float cache_at(const void* base, int64_t i) {
  if constexpr (F16) return __half2float(static_cast<const __half*>(base)[i]);
  else return static_cast<const float*>(base)[i];
}

// One block per (sequence, query head, query), split over the keys: warp w visits rows
// w, w + W, ... (cache rows, then the new rows up to this query) with its own running
// max and sum, the lanes splitting the head dim; the warps' partial states are then merged
// in a fixed order (so runs repeat bit for bit). A decode step's few queries thus use
// W warps each instead of one walking the whole cache. Dl: the head dim's elements per
// lane (d <= 32 Dl), a compile-time bound so that the per-lane arrays stay in registers.
template <bool F16, int Dl, int W>
__global__ void __launch_bounds__(32 * W)
    kv_attention_kernel(KvAttentionArgs a, const float* q, const void* kc, const void* vc, const void* kn,
                        const void* vn, const int64_t* past, float* out, int* err, int step) {
  dev::grid_wait();
  dev::grid_next();
  static_assert(W <= 32, "the merge takes the warps' states as the lanes of one warp");
  __shared__ float part_m[W], part_l[W], part_f[W], part_acc[W][32 * Dl];
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  const int64_t group = a.hq / a.hkv, tasks = a.b * a.hq * a.t;
  for (int64_t task = blockIdx.x; task < tasks; task += gridDim.x) {
    const int64_t t = task % a.t, h = (task / a.t) % a.hq, b = task / (a.t * a.hq), hk = h / group;
    const int64_t np = past[b];
    if (np < 0 || np > a.c) {
      if (threadIdx.x == 0) {
        atomicCAS(err, 0, 1);
        atomicCAS(err + 1, 0, step);
      }
      for (int64_t e = threadIdx.x; e < a.d; e += blockDim.x) out[task * a.d + e] = 0;
      continue;
    }
    float qv[Dl], acc[Dl];
#pragma unroll
    for (int r = 0; r < Dl; ++r) {
      const int64_t e = lane + 32 * r;
      qv[r] = e < a.d ? q[task * a.d + e] * a.scale : 0.0f;
      acc[r] = 0;
    }
    float m = -INFINITY, l = 0;
    const int64_t cache_base = (b * a.hkv + hk) * a.c * a.d, new_base = (b * a.hkv + hk) * a.t * a.d;
    const int64_t n = np + t + 1;
    // kRows of the warp's rows at a time (j, j + W, ...): their K and V loads are all
    // issued before any of their arithmetic, so a warp waits on memory once per kRows rows,
    // and the running max / sum are corrected once per batch.
    for (int64_t j = warp; j < n; j += int64_t(W) * kRows) {
      float s[kRows], v[kRows][Dl];
#pragma unroll
      for (int u = 0; u < kRows; ++u) {
        const int64_t ju = j + int64_t(W) * u;
        const bool live = ju < n, cached = ju < np;
        const void* kb = cached ? kc : kn;
        const void* vb = cached ? vc : vn;
        const int64_t row = cached ? cache_base + ju * a.d : new_base + (ju - np) * a.d;
        s[u] = 0;
#pragma unroll
        for (int r = 0; r < Dl; ++r) {
          const int64_t e = lane + 32 * r;
          const bool in = live && e < a.d;
          s[u] = in ? fmaf(qv[r], cache_at<F16>(kb, row + e), s[u]) : s[u];
          v[u][r] = in ? cache_at<F16>(vb, row + e) : 0.0f;
        }
      }
      float mn = m;
#pragma unroll
      for (int u = 0; u < kRows; ++u) {
        s[u] = warp_sum(s[u]);
        if (j + int64_t(W) * u < n) mn = fmaxf(mn, s[u]);
      }
      const float corr = expf(m - mn);
      l *= corr;
#pragma unroll
      for (int r = 0; r < Dl; ++r) acc[r] *= corr;
#pragma unroll
      for (int u = 0; u < kRows; ++u) {
        if (j + int64_t(W) * u >= n) break;
        const float p = expf(s[u] - mn);
        l += p;
#pragma unroll
        for (int r = 0; r < Dl; ++r) acc[r] = fmaf(p, v[u][r], acc[r]);
      }
      m = mn;
    }
    if (lane == 0) {
      part_m[warp] = m;
      part_l[warp] = l;
    }
#pragma unroll
    for (int r = 0; r < Dl; ++r) part_acc[warp][lane + 32 * r] = acc[r];
    __syncthreads();
    // Merge: every row was visited by exactly one warp; a warp that saw none has m = -inf.
    // The first warp finds the maximum (fmaxf: any order gives it) and each warp's factor
    // exp(m_w - max) once, lane w; the sums below then add the warps in order 0, 1, ...
    // (bits fixed by W), with no exp of their own.
    if (warp == 0) {
      const float mw = lane < W ? part_m[lane] : -INFINITY;
      float mx = mw;
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      if (lane < W) part_f[lane] = mw == -INFINITY ? 0.0f : expf(mw - mx);
    }
    __syncthreads();
    float sum = 0;
    for (int w = 0; w < W; ++w) sum += part_m[w] == -INFINITY ? 0.0f : part_l[w] * part_f[w];
    const float inv = 1.0f / sum;
    for (int64_t e = threadIdx.x; e < a.d; e += blockDim.x) {
      float o = 0;
      for (int w = 0; w < W; ++w)
        if (part_m[w] != -INFINITY) o += part_acc[w][e] * part_f[w];
      out[task * a.d + e] = o * inv;
    }
    __syncthreads();  // the partial states are rewritten by the next task
  }
}


// ---- by KV head (decode)
//
// A cluster of kDecCluster blocks of kDecWarps warps per (sequence, KV head, pair of the
// query heads that share it, query). A K / V row of d halves is read by d / 8 lanes, 16 bytes
// each (LPR lanes per row, so a warp reads 32 / LPR consecutive rows per load); each lane
// keeps the 8 query elements and 8 output sums of its dims for each of the block's GM query
// heads, so a row, once loaded, serves both heads. The cluster's "row streams" (lane group,
// warp, block) take kDecUnroll rows a round each, loaded before any arithmetic, each block
// a contiguous span of the round's rows; each stream runs its own online softmax. The states are
// merged in a fixed order: the lane groups of a warp by an xor butterfly, the warps of a
// block through shared memory in warp order, the blocks of the cluster by every block
// reading the others' shared memory (distributed shared memory) in rank order. One launch,
// no scratch memory; the bits depend on the shapes only, not on the batch or the run.
//
// Measured on the H200 (TinyLlama-1.1B-shaped F16 decode, `rlx llm-bench -p 0`, alternated
// with the by-query kernel in one call): after 2,048 cached tokens 499-503 -> 631-671 tok/s;
// 128 tokens from empty 795-821 against 791-812 (the same within the noise). Heads per
// block: 2 beat 4 (626-643 / 783-789) and 8 (600-603 / 720-736): a lane's work per row grows
// with the heads while the rows it waits for do not; 1 was no better than 2. 16 warps per
// block or clusters of 4 were slower after 2,048 tokens (590-631).
constexpr int kDecWarps = 8;
constexpr int kDecCluster = 8;  // the portable cluster size
constexpr int kDecUnroll = 4;
constexpr int kDecHeads = 2;  // query heads per block (GM) when the group has more than one

// The 8 halves of u as floats.
__device__ inline void halves8(uint4 u, float* f) {
  __half2 h[4];
  memcpy(h, &u, 16);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 p = __half22float2(h[i]);
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}

// kv_store_attention: what the fused kernel reads instead of rotated / rounded rows (the
// rotaries' inputs and their tables, V's f32 rows) and the caches it writes. One new row per
// (sequence, KV head) (t = 1), head dims of 8 LPR, both rotaries over the whole head.
struct KvNewRows {
  bool interleaved_q = false, interleaved_k = false;
  RotaryPtrs q, k;  // y unused
  const float* v = nullptr;
  __half* kc = nullptr;  // the caches, written in place
  __half* vc = nullptr;
};

// The 8 floats at p (16-byte aligned).
__device__ inline void load8(const float* p, float* f) {
  const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
  f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
}

// A row's lane share, loaded before any of it is used (so that every load after the wait is
// one trip to memory): dims e0 .. e0 + 7 of x and the cos / sin its rotation needs (the 4 of
// pairs (2i, 2i + 1) interleaved, else the 8 of dims e0 .. e0 + 7 mod half).
struct RotaryShare {
  float x[8], co[8], si[8];
};
__device__ inline void load_share(const RotaryPtrs& r, int64_t row, int64_t pos, int d, int e0, bool interleaved,
                                  RotaryShare& s) {
  const int half = d / 2;
  load8(r.x + row * d + e0, s.x);
  if (interleaved) {
    const float4 c = *reinterpret_cast<const float4*>(r.cs + pos * half + e0 / 2),
                 n = *reinterpret_cast<const float4*>(r.sn + pos * half + e0 / 2);
    s.co[0] = c.x, s.co[1] = c.y, s.co[2] = c.z, s.co[3] = c.w, s.si[0] = n.x, s.si[1] = n.y, s.si[2] = n.z, s.si[3] = n.w;
  } else {
    load8(r.cs + pos * half + e0 % half, s.co);
    load8(r.sn + pos * half + e0 % half, s.si);
  }
}
// The share rotated as rotary_item rotates it (llm.cu): (2i, 2i + 1) in the lane's own
// dims, or (i, i + half) with the partner dims from lane sub ^ LPR / 2 (the lane half a row
// away; every lane of the warp calls this).
template <int LPR>
__device__ inline void rotate_share(const RotaryShare& s, bool interleaved, int sub, float* y) {
  if (interleaved) {
#pragma unroll
    for (int k = 0; k < 8; k += 2) {
      y[k] = dev::rotate_first(s.x[k], s.x[k + 1], s.co[k / 2], s.si[k / 2]);
      y[k + 1] = dev::rotate_second(s.x[k], s.x[k + 1], s.co[k / 2], s.si[k / 2]);
    }
    return;
  }
  const bool first = sub < LPR / 2;
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const float other = __shfl_xor_sync(0xFFFFFFFFu, s.x[k], LPR / 2);
    y[k] = first ? dev::rotate_first(s.x[k], other, s.co[k], s.si[k]) : dev::rotate_second(other, s.x[k], s.co[k], s.si[k]);
  }
}

// 8 floats rounded to f16 as the cast does (dev::stf), packed as one 16-byte load gives them.
__device__ inline uint4 halves8_of(const float* f) {
  __half h[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) h[k] = dev::stf<__half>(f[k]);
  uint4 u;
  memcpy(&u, h, 16);
  return u;
}

// Held to 128 registers (two blocks' worth per multiprocessor; 146 without the bound, 32
// bytes spilled with it): a block then fits an SM beside two blocks of the products launched
// around it (64 registers x 256 threads each), or beside one more of its own. TinyLlama-1.1B-
// shaped F16 decode on an H100, alternated in one call, tok/s: after 2,048 cached tokens
// 790.6 / 790.2 -> 874.6 / 878.0; 128 tokens from an empty cache 993.9 / 994.6 / 994.5 ->
// 992.0 / 992.7 / 991.9 (greedy; within the noise). Which co-residency pays at depth was not
// isolated.
template <int LPR, int GM, bool FUSED>
__global__ void __launch_bounds__(32 * kDecWarps, 2)
    kv_decode_kernel(KvAttentionArgs a, const float* q, const __half* kc, const __half* vc, const __half* kn,
                     const __half* vn, const int64_t* past, float* out, int* err, int step, KvNewRows f) {
  namespace cg = cooperative_groups;
  constexpr int RS = 32 / LPR, W = kDecWarps, C = kDecCluster, U = kDecUnroll, DW = 8 * LPR;
  __shared__ float wm[W][GM], wl[W][GM], wo[W][GM][DW];  // each warp's state
  __shared__ float bm[GM], bl[GM], bo[GM][DW];           // the block's, read by the cluster
  const cg::cluster_group cluster = cg::this_cluster();
  const int rank = int(cluster.block_rank());
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, slot = lane / LPR, sub = lane % LPR;
  const int d = int(a.d);
  const int64_t group = a.hq / a.hkv, chunks = (group + GM - 1) / GM, gi = blockIdx.x / C;
  const int64_t t = gi % a.t, chunk = (gi / a.t) % chunks, hk = (gi / (a.t * chunks)) % a.hkv,
                b = gi / (a.t * chunks * a.hkv);
  const int64_t h0 = hk * group + chunk * GM;
  const int heads = int(group - chunk * GM < GM ? group - chunk * GM : GM);
  const auto row = [&](int g) { return ((b * a.hq + h0 + g) * a.t + t) * d; };  // head g's query and output
  const bool dims = 8 * sub < d;  // the lane's 8 dims are in the head
  // Rows in rounds of C W RS U: block `rank` takes the round's span of W RS U rows from
  // rank * W RS U, lane group `slot` of warp `warp` the rows warp RS + slot + u NS of it (NS
  // = W RS: a warp's RS rows are contiguous). A cache short enough that every row is in rank
  // 0's first span is attended by that block alone (below): TinyLlama-1.1B-shaped F16 decode
  // on the H200, 128 tokens from an empty cache, four alternated rounds: 952 / 977 / 957 /
  // 963 tok/s against 935 / 942 / 952 / 920 without it.
  const int64_t ns = int64_t(W) * RS, span = ns * U, jb0 = rank * span + int64_t(warp) * RS;
  const int64_t cache_base = (b * a.hkv + hk) * a.c * d, new_base = (b * a.hkv + hk) * a.t * d;
  // The first round's cache rows are fetched before the wait for the kernel before (which
  // writes this step's rows, at past and after, and the queries): rows below past were
  // written by earlier steps and are final, and every row below C is inside the cache, so
  // the loads are safe whatever past is; rows at past or after are fetched again from the
  // new rows once past is known. (So the first trip to memory overlaps the kernel before.)
  uint4 kr[U], vr[U], knew = make_uint4(0, 0, 0, 0), vnew = knew;
  const auto fetch = [&](int64_t jb, int64_t np, int64_t n) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t j = jb + slot + u * ns;
      kr[u] = vr[u] = make_uint4(0, 0, 0, 0);
      if (j < n && dims) {
        const bool cached = j < np;
        if (FUSED && !cached) {  // the one new row (fused: t = 1), made below
          kr[u] = knew, vr[u] = vnew;
          continue;
        }
        const int64_t off = (cached ? cache_base + j * d : new_base + (j - np) * d) + 8 * sub;
        kr[u] = *reinterpret_cast<const uint4*>((cached ? kc : kn) + off);
        vr[u] = *reinterpret_cast<const uint4*>((cached ? vc : vn) + off);
      }
    }
  };
  // When past is settled (read before the wait), a block past rank 0 whose query's rows all
  // lie in rank 0's first span (the "alone" case below) leaves before it fetches or waits: it
  // would only fetch rows it discards and hold a multiprocessor slot through the wait that
  // the kernels around it could use. Its past is read before its fetch (the fetch waits on
  // that load, before the wait for the kernel before, where the trip is hidden); rank 0
  // fetches first. TinyLlama-1.1B-shaped F16 decode on an H100, 128 tokens, two alternated
  // rounds: generate_greedy 967.3 / 967.0 -> 983.5 / 983.8 tok/s from an empty cache, 780.9
  // -> 780.2 (medians of three rounds) after 2,048 cached tokens.
  // The two tests on past, made here for the early exit and after the wait for everyone: past
  // in [0, C] (else the error below), and every row of the query in rank 0's first span.
  const auto in_range = [&](int64_t p) { return p >= 0 && p <= a.c; };
  const auto alone_at = [&](int64_t p) { return p + t + 1 <= span; };
  int64_t np_settled = 0;
  if (a.past_settled && rank != 0) {
    np_settled = past[b];
    if (in_range(np_settled) && alone_at(np_settled)) return;
    fetch(jb0, a.c, a.c);
  } else {
    fetch(jb0, a.c, a.c);
    if (a.past_settled) np_settled = past[b];
  }
  dev::grid_wait();
  dev::grid_next();
  const int64_t np = a.past_settled ? np_settled : past[b];
  if (!in_range(np)) {  // the whole cluster sees the same np: no block reaches a cluster barrier
    if (threadIdx.x == 0) {
      atomicCAS(err, 0, 1);
      atomicCAS(err + 1, 0, step);
    }
    for (int e = rank * blockDim.x + threadIdx.x; e < heads * d; e += C * blockDim.x) out[row(e / d) + e % d] = 0;
    return;
  }
  const int64_t n = np + t + 1;
  // The rows fetched early that are not cache rows (this step's, at past and after) are
  // fetched again from the new rows now, before the queries: both trips at once.
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t j = jb0 + slot + u * ns;
    if (!FUSED && j >= np && j < n && dims) {
      const int64_t off = new_base + (j - np) * d + 8 * sub;
      kr[u] = *reinterpret_cast<const uint4*>(kn + off);
      vr[u] = *reinterpret_cast<const uint4*>(vn + off);
    }
  }
  float qv[GM][8], acc[GM][8], m[GM], l[GM];
  if constexpr (FUSED) {
    // Everything this launch makes instead of reading: the queries rotated, and the new K /
    // V row (row past of the attention: t = 1) rotated and rounded by every lane group (the
    // same addresses for all, so one trip for each) and written into the caches at past by
    // one lane group per (sequence, KV head) (the rows below past, which the attention
    // reads, are not touched); a position past the cache's last row is recorded, as
    // cache_write does. Every load is issued before any use: one trip after the wait.
    RotaryShare qs[GM], ks;
    float vx[8];
    const int64_t bh = b * a.hkv + hk;
#pragma unroll
    for (int g = 0; g < GM; ++g)
      if (g < heads) load_share(f.q, row(g) / d, 0, d, 8 * sub, f.interleaved_q, qs[g]);
    load_share(f.k, bh, 0, d, 8 * sub, f.interleaved_k, ks);
    load8(f.v + bh * d + 8 * sub, vx);
    float y[8];
    rotate_share<LPR>(ks, f.interleaved_k, sub, y);
    knew = halves8_of(y);
    vnew = halves8_of(vx);
#pragma unroll
    for (int g = 0; g < GM; ++g) {
      rotate_share<LPR>(qs[g], f.interleaved_q, sub, y);
#pragma unroll
      for (int k = 0; k < 8; ++k) qv[g][k] = g < heads ? y[k] * a.scale : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (jb0 + slot + u * ns == np) kr[u] = knew, vr[u] = vnew;
    if (chunk == 0 && rank == 0 && warp == 0 && slot == 0) {
      if (np > a.c - 1) {
        if (sub == 0) {
          atomicCAS(err, 0, 1);
          atomicCAS(err + 1, 0, step);
        }
      } else {
        *reinterpret_cast<uint4*>(f.kc + cache_base + np * d + 8 * sub) = knew;
        *reinterpret_cast<uint4*>(f.vc + cache_base + np * d + 8 * sub) = vnew;
      }
    }
  }
#pragma unroll
  for (int g = 0; g < GM; ++g) {
    m[g] = -INFINITY;
    l[g] = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) acc[g][k] = 0;
    if constexpr (!FUSED) {
#pragma unroll
      for (int k = 0; k < 8; ++k) qv[g][k] = 0;
      if (g < heads && dims) {
        const float4* qr = reinterpret_cast<const float4*>(q + row(g) + 8 * sub);
        const float4 x0 = qr[0], x1 = qr[1];
        const float x[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
        for (int k = 0; k < 8; ++k) qv[g][k] = x[k] * a.scale;
      }
    }
  }
  // Every row in rank 0's first span: the other blocks have nothing to add (their states
  // would merge in as exp(-inf) = 0 terms), so they leave now (or left before their fetch,
  // when past is settled) and rank 0 stores the result from its own state, with no cluster
  // barrier (the whole cluster sees the same n). The same bits as the merge: rank 0's terms
  // scaled by exp(0) = 1 plus zeros.
  const bool alone = alone_at(np);
  if (alone && rank != 0) return;
  // jb is the warp's first row of the round (uniform across the warp, so every lane takes
  // part in the shuffles); the lane group's rows are jb + slot + u NS.
  for (int64_t jb = jb0; jb < n; jb += int64_t(C) * span) {
    if (jb != jb0) fetch(jb, np, n);
    float s[U][GM], mn[GM];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float kf[8];
      halves8(kr[u], kf);
#pragma unroll
      for (int g = 0; g < GM; ++g) {
        float v = 0;
#pragma unroll
        for (int k = 0; k < 8; ++k) v = fmaf(qv[g][k], kf[k], v);
#pragma unroll
        for (int o = LPR / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
        s[u][g] = v;
      }
    }
#pragma unroll
    for (int g = 0; g < GM; ++g) {
      mn[g] = m[g];
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (jb + slot + u * ns < n) mn[g] = fmaxf(mn[g], s[u][g]);
      // A lane group with no row this round keeps its state (and m - mn would be NaN).
      const float corr = mn[g] == -INFINITY ? 1.0f : expf(m[g] - mn[g]);
      l[g] *= corr;
#pragma unroll
      for (int k = 0; k < 8; ++k) acc[g][k] *= corr;
      m[g] = mn[g];
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (jb + slot + u * ns >= n) break;
      float vf[8];
      halves8(vr[u], vf);
#pragma unroll
      for (int g = 0; g < GM; ++g) {
        const float p = expf(s[u][g] - mn[g]);
        l[g] += p;
#pragma unroll
        for (int k = 0; k < 8; ++k) acc[g][k] = fmaf(p, vf[k], acc[g][k]);
      }
    }
  }
  // The warp's lane groups merged (xor butterfly over the group bits of the lane).
#pragma unroll
  for (int o = LPR; o < 32; o <<= 1) {
#pragma unroll
    for (int g = 0; g < GM; ++g) {
      const float mo = __shfl_xor_sync(0xFFFFFFFFu, m[g], o), lo = __shfl_xor_sync(0xFFFFFFFFu, l[g], o);
      const float mx = fmaxf(m[g], mo);
      const float fa = m[g] == -INFINITY ? 0.0f : expf(m[g] - mx), fb = mo == -INFINITY ? 0.0f : expf(mo - mx);
      l[g] = l[g] * fa + lo * fb;
#pragma unroll
      for (int k = 0; k < 8; ++k) acc[g][k] = acc[g][k] * fa + __shfl_xor_sync(0xFFFFFFFFu, acc[g][k], o) * fb;
      m[g] = mx;
    }
  }
  if (slot == 0) {
#pragma unroll
    for (int g = 0; g < GM; ++g) {
      if (sub == 0) {
        wm[warp][g] = m[g];
        wl[warp][g] = l[g];
      }
#pragma unroll
      for (int k = 0; k < 8; ++k) wo[warp][g][8 * sub + k] = acc[g][k];
    }
  }
  __syncthreads();
  // The block's warps merged, in warp order.
  for (int e = threadIdx.x; e < GM * DW; e += blockDim.x) {
    const int g = e / DW, c = e % DW;
    float mx = -INFINITY;
    for (int w = 0; w < W; ++w) mx = fmaxf(mx, wm[w][g]);
    float o = 0, sum = 0;
    for (int w = 0; w < W; ++w) {
      const float f = wm[w][g] == -INFINITY ? 0.0f : expf(wm[w][g] - mx);
      o += wo[w][g][c] * f;
      sum += wl[w][g] * f;
    }
    bo[g][c] = o;
    if (c == 0) {
      bm[g] = mx;
      bl[g] = sum;
    }
  }
  if (alone) {
    __syncthreads();
    for (int e = threadIdx.x; e < heads * d; e += blockDim.x) out[row(e / d) + e % d] = bo[e / d][e % d] / bl[e / d];
    return;
  }
  cluster.sync();  // every block's state written and visible to the cluster
  // The cluster's blocks merged, in rank order; each block stores a share of the outputs.
  for (int e = rank * blockDim.x + threadIdx.x; e < heads * d; e += C * blockDim.x) {
    const int g = e / d, c = e % d;
    float mr[C], mx = -INFINITY;
#pragma unroll
    for (int r = 0; r < C; ++r) {
      mr[r] = cluster.map_shared_rank(&bm[0], r)[g];
      mx = fmaxf(mx, mr[r]);
    }
    float o = 0, sum = 0;
#pragma unroll
    for (int r = 0; r < C; ++r) {
      const float f = mr[r] == -INFINITY ? 0.0f : expf(mr[r] - mx);
      o += cluster.map_shared_rank(&bo[0][0], r)[g * DW + c] * f;
      sum += cluster.map_shared_rank(&bl[0], r)[g] * f;
    }
    out[row(g) + c] = o / sum;
  }
  cluster.sync();  // no block leaves while another still reads its shared memory
}

using DecodeFn = void (*)(KvAttentionArgs, const float*, const __half*, const __half*, const __half*, const __half*,
                          const int64_t*, float*, int*, int, KvNewRows);

// The kernel for lanes per row LPR and `heads` query heads per block (1 or kDecHeads).
template <int LPR, bool FUSED>
DecodeFn decode_for(int heads) {
  return heads == 1 ? kv_decode_kernel<LPR, 1, FUSED> : kv_decode_kernel<LPR, kDecHeads, FUSED>;
}
template <bool FUSED>
DecodeFn decode_for_dim(int64_t d, int heads) {
  return d <= 32 ? decode_for<4, FUSED>(heads) : d <= 64 ? decode_for<8, FUSED>(heads)
         : d <= 128 ? decode_for<16, FUSED>(heads) : decode_for<32, FUSED>(heads);
}

// A decode step's few queries (one per head and sequence, at most 4 queries a multiprocessor):
// the by-KV-head kernel's work, and many warps per query for the by-query one.
bool few_queries(const KvAttentionArgs& a) { return a.b * a.hq * a.t * 8 < int64_t(dev::sm_count()) * 32; }

// The by-KV-head kernel when it applies (f16 caches, head dims of whole 16-byte chunks up to
// 256, 16-byte aligned operands, a device with clusters); cudaErrorNotSupported otherwise.
// With f (kv_store_attention): the new rows made from f's f32 rows (q, kn, vn unread) and
// written into f's caches.
cudaError_t kv_decode(const KvAttentionArgs& a, const float* q, const void* kc, const void* vc, const void* kn,
                      const void* vn, const int64_t* past, float* out, int* err, int step, cudaStream_t s,
                      const KvNewRows* f = nullptr) {
  if (a.d % 8 != 0 || a.d > 256 || a.hkv <= 0 || a.hq % a.hkv != 0 || !clusters())
    return cudaErrorNotSupported;
  for (const void* p : {static_cast<const void*>(q), kc, vc, kn, vn})
    if (!dev::aligned16(p)) return cudaErrorNotSupported;
  if (f)  // the f32 rows and the rotary tables by 16-byte loads, the caches by 16-byte stores
    for (const void* p : {static_cast<const void*>(f->q.cs), static_cast<const void*>(f->q.sn),
                          static_cast<const void*>(f->k.x), static_cast<const void*>(f->k.cs),
                          static_cast<const void*>(f->k.sn), static_cast<const void*>(f->v),
                          static_cast<const void*>(f->kc), static_cast<const void*>(f->vc)})
      if (!dev::aligned16(p)) return cudaErrorNotSupported;
  const int64_t group = a.hq / a.hkv;
  const int heads = group == 1 ? 1 : kDecHeads;
  const DecodeFn fn = f ? decode_for_dim<true>(a.d, heads) : decode_for_dim<false>(a.d, heads);
  const int64_t blocks = a.b * a.hkv * ((group + heads - 1) / heads) * a.t * kDecCluster;
  if (blocks >= int64_t(1) << 31) return cudaErrorNotSupported;  // gridDim.x < 2^31
  cudaLaunchAttribute attr[2];
  const cudaLaunchConfig_t cfg = cluster_config(dim3(unsigned(blocks)), dim3(32 * kDecWarps), kDecCluster, s, attr);
  return cudaLaunchKernelEx(&cfg, fn, a, q, static_cast<const __half*>(kc), static_cast<const __half*>(vc),
                            static_cast<const __half*>(kn), static_cast<const __half*>(vn), past, out, err, step,
                            f ? *f : KvNewRows{});
}

}  // namespace

cudaError_t kv_attention(const KvAttentionArgs& a, bool f16, const float* q, const void* kc, const void* vc,
                         const void* kn, const void* vn, const int64_t* past, float* out, int* err, int step,
                         cudaStream_t s) {
  const int64_t tasks = a.b * a.hq * a.t;
  if (tasks == 0 || a.d == 0) return cudaSuccess;
  if (a.d > 32 * kMaxDimPerLane) return cudaErrorInvalidValue;
  const unsigned g = unsigned(std::min<int64_t>(tasks, 65535 * 8));
  using Fn = void (*)(KvAttentionArgs, const float*, const void*, const void*, const void*, const void*, const int64_t*,
                      float*, int*, int);
  // Few queries (a decode step: one per head and sequence) over f16 caches: by KV head.
  // Where that kernel does not apply (f32 caches, head dims not of whole 16-byte chunks)
  // they split the keys over 32 warps each (16 for head dims over 128, whose per-lane state
  // would not fit 32 warps' registers; before the by-KV-head kernel this took TinyLlama's
  // F16 decode after 2,048 cached tokens from 267 (8 warps) to 496 tok/s). A prompt's many
  // queries fill the device with 8 warps each.
  const bool few = few_queries(a);
  if (few && f16) {
    const cudaError_t e = kv_decode(a, q, kc, vc, kn, vn, past, out, err, step, s);
    if (e != cudaErrorNotSupported) return e;
  }
  const int warps = !few ? 8 : a.d > 128 ? 16 : 32;
  // The kernel for head dims up to 32 Dl, with `warps` warps per block.
  auto with = [&](auto dl) -> Fn {
    constexpr int Dl = decltype(dl)::value;
    if (warps == 8) return f16 ? kv_attention_kernel<true, Dl, 8> : kv_attention_kernel<false, Dl, 8>;
    if constexpr (Dl > 4) return f16 ? kv_attention_kernel<true, Dl, 16> : kv_attention_kernel<false, Dl, 16>;
    else return f16 ? kv_attention_kernel<true, Dl, 32> : kv_attention_kernel<false, Dl, 32>;
  };
  const Fn fn = a.d <= 64    ? with(std::integral_constant<int, 2>{})
                : a.d <= 128 ? with(std::integral_constant<int, 4>{})
                             : with(std::integral_constant<int, 8>{});
  return dev::launch(fn, g, 32 * warps, 0, s, a, q, kc, vc, kn, vn, past, out, err, step);
}

cudaError_t kv_store_attention(const RotaryArgs& qa, const RotaryArgs& ka, const CacheWriteArgs& kw,
                               const CacheWriteArgs& vw, const KvStorePtrs& p, const KvAttentionArgs& a, float* out,
                               int* err, int step, cudaStream_t s) {
  // The fused kernel: a decode step's few queries (as kv_attention picks the by-KV-head
  // kernel), one new row per sequence, head dims of whole lane groups (32, 64, 128, 256),
  // rotaries over the whole head, caches in place, the rotaries' rows in the attention's
  // layout and every shape agreeing (the lowering checks the graph's; these are the
  // launch's own conditions; kv_decode checks the alignments).
  const auto layout = [&](const RotaryArgs& r, int64_t h) {
    return r.rows == a.b * h * a.t && r.s == a.t && r.d == a.d && 2 * r.half == a.d;
  };
  const auto cache = [&](const CacheWriteArgs& w) {
    return w.b == a.b && w.h == a.hkv && w.c == a.c && w.t == a.t && w.d == a.d;
  };
  const bool lanes = a.d == 32 || a.d == 64 || a.d == 128 || a.d == 256;
  if (a.b * a.hq > 0 && few_queries(a) && a.t == 1 && lanes && p.k_out == p.k_cache && p.v_out == p.v_cache &&
      layout(qa, a.hq) && layout(ka, a.hkv) && cache(kw) && cache(vw) && p.k_past == p.v_past && !p.k.y) {
    const KvNewRows f{qa.interleaved, ka.interleaved, p.q, p.k, p.v, static_cast<__half*>(p.k_out),
                      static_cast<__half*>(p.v_out)};
    const cudaError_t e =
        kv_decode(a, p.q.x, p.k_out, p.v_out, p.k_rounded, p.v_rounded, p.k_past, out, err, step, s, &f);
    if (e != cudaErrorNotSupported) return e;
  }
  if (const cudaError_t e = kv_store(qa, ka, kw, vw, ET::F16, p, err, step, s); e != cudaSuccess) return e;
  return kv_attention(a, true, p.q.y, p.k_out, p.v_out, p.k_rounded, p.v_rounded, p.k_past, out, err, step, s);
}

}  // namespace rlx::cuda
