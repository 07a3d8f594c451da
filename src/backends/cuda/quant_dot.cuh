// The lane's share of a weight row's dot product with x, per GGUF weight format (F32, F16,
// BF16, F64, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS): the
// row read as stored and decoded in registers, one warp per row, each value formed as the
// CPU's dequantizer forms it (src/ir/quant/dequant.cpp), f32 sums in a fixed order per lane
// (warp_sum adds the lanes). row_dot is the entry; the rest are its per-format paths and
// the pieces llm.cu's kernels reuse (the F16 and Q4_0 first-row fetches).
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "ir/quant/block_util.h"

namespace rlx::cuda::qdot {

__device__ inline float half_at(const uint8_t* p) {
  __half h;
  memcpy(&h, p, 2);
  return __half2float(h);
}

using quant::detail::scale_min_k4;  // the CPU's, for the unaligned Q4_K / Q5_K path

// scale_min_k4 over the 12 scale bytes held as three words (bytes 0-3, 4-7, 8-11): shifts
// instead of a byte array indexed at run time, which would live in local memory.
__device__ inline void scale_min_k4_words(int j, uint32_t s0, uint32_t s1, uint32_t s2, int& d, int& m) {
  const int i = 8 * (j & 3);
  const int b0 = int(s0 >> i) & 0xFF, b1 = int(s1 >> i) & 0xFF, b2 = int(s2 >> i) & 0xFF;
  if (j < 4) {
    d = b0 & 63;
    m = b1 & 63;
  } else {
    d = (b2 & 0xF) | ((b0 >> 6) << 4);
    m = (b2 >> 4) | ((b1 >> 6) << 4);
  }
}

// acc + dot(8 halves in u, x[0..8) as two float4).
__device__ inline float dot8_f16(uint4 u, const float4* x, float acc) {
  const float4 x0 = x[0], x1 = x[1];
  __half2 h[4];
  memcpy(h, &u, 16);
  const float2 f0 = __half22float2(h[0]), f1 = __half22float2(h[1]), f2 = __half22float2(h[2]), f3 = __half22float2(h[3]);
  acc = fmaf(f0.x, x0.x, acc);
  acc = fmaf(f0.y, x0.y, acc);
  acc = fmaf(f1.x, x0.z, acc);
  acc = fmaf(f1.y, x0.w, acc);
  acc = fmaf(f2.x, x1.x, acc);
  acc = fmaf(f2.y, x1.y, acc);
  acc = fmaf(f3.x, x1.z, acc);
  return fmaf(f3.y, x1.w, acc);
}

// The L2 policy of a weight row's loads. A decode step (one row of x: `once`) reads each
// weight once and then streams the rest of the model, some GB, through a 50 MB L2 before it
// reads that weight again; loaded evict_first, the weights leave in L2 more of what the step
// does reuse (activations, residuals, the norms' scales, KV rows). TinyLlama-1.1B-shaped F16
// decode on an H100, alternated against plain __ldg loads: +0.8 % from an empty cache, +1.1 %
// after 2,048 cached tokens (docs/performance.md, session 52). Rows that several rows of x
// read (prefill) keep the normal policy.
__device__ inline uint64_t weight_policy(bool once) {
  uint64_t p;
  if (once) asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  else asm("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(p));
  return p;
}
// __ldg's load (volatile, as the toolkit writes it: the compiler keeps a group's loads
// together ahead of their uses; a non-volatile form measured 5 % slower) under policy pol.
__device__ inline uint4 ldg_policy(const uint4* a, uint64_t pol) {
  uint4 v;
  asm volatile("ld.global.nc.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(a), "l"(pol));
  return v;
}

// acc + the lane's chunks i, i + 32, ... (< n8) of an F16 row with x, in that order, by
// 16-byte loads: 8 halves per lane, a warp streams 512 contiguous bytes of the row. The
// loads go in groups of U, all of a group's issued before its FMAs (a short last group
// loads only the chunks the row has), so each trip to memory carries U x 512 bytes per
// warp: the product is bound by the round trips its warps wait for, not by arithmetic.
// TinyLlama-1.1B-shaped F16 decode on the H200, three alternated rounds: groups of 8
// 848 / 849 / 851 tok/s, of 4 807 / 811 / 804, of 16 827 / 824 / 831 (more registers, fewer
// warps); the loop before (groups of 4, the tail one chunk per trip) 811 / 814 / 808.
constexpr int kF16Group = 8;
template <int U = kF16Group>
__device__ inline float f16_dot_from(const uint8_t* row, const float* x, int64_t n8, int64_t i, float acc,
                                    uint64_t pol) {
  const uint4* r = reinterpret_cast<const uint4*>(row);
  const float4* xv = reinterpret_cast<const float4*>(x);
  for (; i < n8; i += 32 * U) {
    uint4 u[U];
#pragma unroll
    for (int t = 0; t < U; ++t) u[t] = i + 32 * t < n8 ? ldg_policy(r + i + 32 * t, pol) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int t = 0; t < U; ++t)
      if (i + 32 * t < n8) acc = dot8_f16(u[t], xv + 2 * (i + 32 * t), acc);
  }
  return acc;
}
// f16_dot_from over two rows with the same x at once (a SwiGLU's gate and up rows): each
// group loads U / 2 chunks of both, so the trip carries as much as f16_dot_from's; each sum
// in f16_dot_from's order (its bits).
__device__ inline void f16_dot2_from(const uint8_t* ra, const uint8_t* rb, const float* x, int64_t n8, int64_t i,
                                     float& a, float& b, uint64_t pol) {
  constexpr int U = kF16Group / 2 > 0 ? kF16Group / 2 : 1;
  const uint4* pa = reinterpret_cast<const uint4*>(ra);
  const uint4* pb = reinterpret_cast<const uint4*>(rb);
  const float4* xv = reinterpret_cast<const float4*>(x);
  for (; i < n8; i += 32 * U) {
    uint4 ua[U], ub[U];
#pragma unroll
    for (int t = 0; t < U; ++t) {
      const bool in = i + 32 * t < n8;
      ua[t] = in ? ldg_policy(pa + i + 32 * t, pol) : make_uint4(0, 0, 0, 0);
      ub[t] = in ? ldg_policy(pb + i + 32 * t, pol) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int t = 0; t < U; ++t)
      if (i + 32 * t < n8) a = dot8_f16(ua[t], xv + 2 * (i + 32 * t), a);
#pragma unroll
    for (int t = 0; t < U; ++t)
      if (i + 32 * t < n8) b = dot8_f16(ub[t], xv + 2 * (i + 32 * t), b);
  }
}

// dot(x[0..32), one 32-element block) of Q4_0 / Q4_1 / Q5_0 / Q5_1 (ggml's layouts: d, then
// the min for _1, the 32 fifth bits for Q5, then 16 bytes of nibbles: element i is the low
// nibble of byte i, element 16 + i its high nibble).
__device__ inline float block32_dot(int fmt, const uint8_t* blk, const float* x) {
  const bool five = fmt == 6 || fmt == 7, has_min = fmt == 3 || fmt == 7;
  const float d = half_at(blk), mn = has_min ? half_at(blk + 2) : 0.0f;
  uint32_t qh = 0;
  if (five) memcpy(&qh, blk + (has_min ? 4 : 2), 4);
  const uint8_t* qs = blk + (five ? 4 : 0) + (has_min ? 4 : 2);
  const float off = fmt == 2 ? 8.0f : fmt == 6 ? 16.0f : 0.0f;
  float s = 0, sx = 0;
  for (int i = 0; i < 16; ++i) {
    const int lo = (qs[i] & 0x0F) | (five ? int((qh >> i) & 1) << 4 : 0);
    const int hi = (qs[i] >> 4) | (five ? int((qh >> (i + 16)) & 1) << 4 : 0);
    s = fmaf(float(lo) - off, x[i], s);
    s = fmaf(float(hi) - off, x[16 + i], s);
    sx += x[i] + x[16 + i];
  }
  return d * s + mn * sx;
}

// dot(x[0..256), one super-block) of Q4_K / Q5_K (layouts: src/ir/quant/dequant.cpp), for
// rows that k45_dot cannot take (x or the blocks not aligned for its vector loads).
__device__ inline float superblock_dot(int fmt, const uint8_t* blk, const float* x) {
  float acc = 0;
  const bool five = fmt == 13;  // Q4_K / Q5_K: d, dmin, 12 scale bytes, (qh[32],) qs[128]
  const float d = half_at(blk), dmin = half_at(blk + 2);
  const uint8_t* scales = blk + 4;
  const uint8_t* qh = blk + 16;
  const uint8_t* qs = blk + (five ? 48 : 16);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    scale_min_k4(j, scales, sc, m);
    const float dl = d * float(sc), ml = dmin * float(m);
    const uint8_t* q = qs + 32 * (j / 2);
    for (int l = 0; l < 32; ++l) {
      int v = (j & 1) ? q[l] >> 4 : q[l] & 0x0F;
      if (five && ((qh[l] >> j) & 1)) v += 16;
      acc = fmaf(dl * float(v) - ml, x[32 * j + l], acc);
    }
  }
  return acc;
}

// Q4_0 / Q8_0 rows of nb 32-element blocks, lanes over the elements of a block rather than a
// block per lane: a warp's loads of x are then contiguous (a block per lane strided them by
// 128 bytes, one cache line per lane per load, which bound these formats to a tenth of the
// memory's bandwidth), and so are its 2-byte loads of the quants. Q4_0: eight lanes per
// block, lane l taking nibble bytes 2l and 2l + 1 (elements 2l, 2l + 1 and 16 + 2l,
// 17 + 2l); Q8_0: sixteen lanes per block, lane l taking int8 elements 2l, 2l + 1. Each
// lane adds d * (its share of the block) to its sum, blocks in increasing order; U blocks'
// loads are issued before their FMAs.
__device__ inline float scale_at(const uint8_t* blk) {
  return __half2float(__ushort_as_half(__ldg(reinterpret_cast<const unsigned short*>(blk))));
}
constexpr int kQ4U = 8;  // Q4_0 blocks a lane loads before their FMAs
__device__ inline float q4_0_part(int v, float2 lo, float2 hi) {
  const int b0 = v & 0xFF, b1 = v >> 8;
  float s = float((b0 & 15) - 8) * lo.x;
  s = fmaf(float((b1 & 15) - 8), lo.y, s);
  s = fmaf(float((b0 >> 4) - 8), hi.x, s);
  return fmaf(float((b1 >> 4) - 8), hi.y, s);
}
// acc + the lane's blocks from b (g, g + 4, ...: b is g plus a multiple of 4 kQ4U) on.
__device__ inline float q4_0_dot_from(const uint8_t* w, const float* x, int64_t nb, int lane, int64_t b, float acc) {
  constexpr int U = kQ4U;
  const int l = lane & 7;
  for (; b + 4 * (U - 1) < nb; b += 4 * U) {
    int v[U];
    float d[U];
    float2 lo[U], hi[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint8_t* blk = w + 18 * (b + 4 * u);
      v[u] = __ldg(reinterpret_cast<const unsigned short*>(blk + 2) + l);
      d[u] = scale_at(blk);
      lo[u] = *reinterpret_cast<const float2*>(x + 32 * (b + 4 * u) + 2 * l);
      hi[u] = *reinterpret_cast<const float2*>(x + 32 * (b + 4 * u) + 16 + 2 * l);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc = fmaf(d[u], q4_0_part(v[u], lo[u], hi[u]), acc);
  }
  for (; b < nb; b += 4) {
    const uint8_t* blk = w + 18 * b;
    const int v = __ldg(reinterpret_cast<const unsigned short*>(blk + 2) + l);
    acc = fmaf(scale_at(blk),
               q4_0_part(v, *reinterpret_cast<const float2*>(x + 32 * b + 2 * l),
                         *reinterpret_cast<const float2*>(x + 32 * b + 16 + 2 * l)),
               acc);
  }
  return acc;
}
__device__ inline float q4_0_dot(const uint8_t* w, const float* x, int64_t nb, int lane) {
  return q4_0_dot_from(w, x, nb, lane, lane >> 3, 0.0f);
}
// A Q4_0 row's first two rounds of kQ4U blocks per lane (the whole row at k = 2048), their
// quants and scales loaded before the kernel waits for its predecessor, as f16_prefetch;
// q4_0_dot_prefetched then adds them in q4_0_dot's order and continues from there (same bits).
template <int R>
struct Q4Prefetch {
  int v[R][kQ4U];
  float d[R][kQ4U];
};
template <int R>
__device__ inline void q4_0_prefetch(const uint8_t* w, int64_t nb, int lane, Q4Prefetch<R>& p) {
  const int g = lane >> 3, l = lane & 7;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t b = g + int64_t(4 * kQ4U) * r;
    if (b + 4 * (kQ4U - 1) >= nb) break;
#pragma unroll
    for (int u = 0; u < kQ4U; ++u) {
      const uint8_t* blk = w + 18 * (b + 4 * u);
      p.v[r][u] = __ldg(reinterpret_cast<const unsigned short*>(blk + 2) + l);
      p.d[r][u] = scale_at(blk);
    }
  }
}
template <int R>
__device__ inline float q4_0_dot_prefetched(const Q4Prefetch<R>& p, const uint8_t* w, const float* x, int64_t nb,
                                            int lane) {
  const int g = lane >> 3, l = lane & 7;
  float acc = 0;
  int64_t b = g;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (b + 4 * (kQ4U - 1) >= nb) break;
#pragma unroll
    for (int u = 0; u < kQ4U; ++u) {
      const float* xb = x + 32 * (b + 4 * u);
      acc = fmaf(p.d[r][u], q4_0_part(p.v[r][u], *reinterpret_cast<const float2*>(xb + 2 * l),
                                      *reinterpret_cast<const float2*>(xb + 16 + 2 * l)), acc);
    }
    b += 4 * kQ4U;
  }
  return q4_0_dot_from(w, x, nb, lane, b, acc);
}
__device__ inline float q8_0_dot(const uint8_t* w, const float* x, int64_t nb, int lane) {
  constexpr int U = 8;
  const int g = lane >> 4, l = lane & 15;
  float acc = 0;
  auto part = [](int v, float2 xv) { return fmaf(float(int8_t(v >> 8)), xv.y, float(int8_t(v & 0xFF)) * xv.x); };
  int64_t b = g;
  for (; b + 2 * (U - 1) < nb; b += 2 * U) {
    int v[U];
    float d[U];
    float2 xv[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint8_t* blk = w + 34 * (b + 2 * u);
      v[u] = __ldg(reinterpret_cast<const unsigned short*>(blk + 2) + l);
      d[u] = scale_at(blk);
      xv[u] = *reinterpret_cast<const float2*>(x + 32 * (b + 2 * u) + 2 * l);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc = fmaf(d[u], part(v[u], xv[u]), acc);
  }
  for (; b < nb; b += 2) {
    const uint8_t* blk = w + 34 * b;
    const int v = __ldg(reinterpret_cast<const unsigned short*>(blk + 2) + l);
    acc = fmaf(scale_at(blk), part(v, *reinterpret_cast<const float2*>(x + 32 * b + 2 * l)), acc);
  }
  return acc;
}

// Q4_1 / Q5_0 / Q5_1 rows, eight lanes per block as q4_0_dot: lane l takes nibble bytes 2l,
// 2l + 1 (elements 2l, 2l + 1 and 16 + 2l, 17 + 2l, their fifth bits at the same positions
// of qh), each value formed as the CPU's dequantizer does (d q + m, or d (q - 16)). Needs
// 8-byte aligned x and 2-byte aligned blocks.
template <int F>
__device__ inline float block32_lanes_dot(const uint8_t* w, const float* x, int64_t nb, int lane) {
  constexpr bool five = F == 6 || F == 7, has_min = F == 3 || F == 7;
  constexpr int bytes = F == 3 ? 20 : F == 6 ? 22 : 24, qh_at = has_min ? 4 : 2, qs_at = qh_at + (five ? 4 : 0);
  const int l = lane & 7;
  float acc = 0;
#pragma unroll 4
  for (int64_t b = lane >> 3; b < nb; b += 4) {
    const uint8_t* blk = w + bytes * b;
    const unsigned short* u = reinterpret_cast<const unsigned short*>(blk);
    const int v = __ldg(u + qs_at / 2 + l);
    const uint32_t qh = five ? uint32_t(__ldg(u + qh_at / 2)) | (uint32_t(__ldg(u + qh_at / 2 + 1)) << 16) : 0u;
    const float2 lo = *reinterpret_cast<const float2*>(x + 32 * b + 2 * l);
    const float2 hi = *reinterpret_cast<const float2*>(x + 32 * b + 16 + 2 * l);
    const float d = scale_at(blk), m = has_min ? scale_at(blk + 2) : 0.0f;
    const int pos[4] = {2 * l, 2 * l + 1, 16 + 2 * l, 17 + 2 * l};
    const int nib[4] = {v & 0xF, (v >> 8) & 0xF, (v >> 4) & 0xF, v >> 12};
    const float xs[4] = {lo.x, lo.y, hi.x, hi.y};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int q = nib[i] | (five ? int((qh >> pos[i]) & 1) << 4 : 0);
      const float wv = has_min ? d * float(q) + m : d * float(q - 16);
      acc = fmaf(wv, xs[i], acc);
    }
  }
  return acc;
}

// Q4_K / Q5_K rows of nb super-blocks, eight lanes per super-block (a warp works on four at
// once, as q4_0_dot on blocks): lane (c, f) = ((lane % 8) / 2, lane % 2) loads 16 nibble
// bytes at 32c + 16f of qs in one 16-byte load, elements 64c + 16f + i of sub-block 2c (low
// nibbles) and 64c + 32 + 16f + i of sub-block 2c + 1 (high nibbles), i < 16, with Q5_K's
// fifth bits from qh bytes 16f + i (bits 2c, 2c + 1). 32 products per 16 bytes loaded, the
// loads of x contiguous. Needs 16-byte aligned x and blocks.
template <bool Five>
__device__ inline float k45_dot(const uint8_t* w, const float* x, int64_t nb, int lane) {
  constexpr int bytes = Five ? 176 : 144;
  const int c = (lane & 7) >> 1, f = lane & 1;
  float acc = 0;
#pragma unroll 2
  for (int64_t b = lane >> 3; b < nb; b += 4) {
    const uint8_t* blk = w + bytes * b;
    const uint4 qs = __ldg(reinterpret_cast<const uint4*>(blk + (Five ? 48 : 16) + 32 * c + 16 * f));
    const uint4 qh = Five ? __ldg(reinterpret_cast<const uint4*>(blk + 16 + 16 * f)) : make_uint4(0, 0, 0, 0);
    const uint32_t dm = __ldg(reinterpret_cast<const uint32_t*>(blk));
    const uint32_t s0 = __ldg(reinterpret_cast<const uint32_t*>(blk + 4)), s1 = __ldg(reinterpret_cast<const uint32_t*>(blk + 8)),
                   s2 = __ldg(reinterpret_cast<const uint32_t*>(blk + 12));
    const float d = __half2float(__ushort_as_half(uint16_t(dm & 0xFFFF))), dmin = __half2float(__ushort_as_half(uint16_t(dm >> 16)));
    int sc0, m0, sc1, m1;
    scale_min_k4_words(2 * c, s0, s1, s2, sc0, m0);
    scale_min_k4_words(2 * c + 1, s0, s1, s2, sc1, m1);
    const float dl0 = d * float(sc0), ml0 = dmin * float(m0), dl1 = d * float(sc1), ml1 = dmin * float(m1);
    const float4* xl = reinterpret_cast<const float4*>(x + 256 * b + 64 * c + 16 * f);
    const float4* xh = reinterpret_cast<const float4*>(x + 256 * b + 64 * c + 32 + 16 * f);
    const uint32_t q[4] = {qs.x, qs.y, qs.z, qs.w}, h[4] = {qh.x, qh.y, qh.z, qh.w};
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      const float4 a = xl[t], e = xh[t];
      const float av[4] = {a.x, a.y, a.z, a.w}, ev[4] = {e.x, e.y, e.z, e.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int byte = int(q[t] >> (8 * i)) & 0xFF, hb = int(h[t] >> (8 * i)) & 0xFF;
        const int lo = (byte & 0x0F) + (Five && ((hb >> (2 * c)) & 1) ? 16 : 0);
        const int hi = (byte >> 4) + (Five && ((hb >> (2 * c + 1)) & 1) ? 16 : 0);
        acc = fmaf(dl0 * float(lo) - ml0, av[i], acc);
        acc = fmaf(dl1 * float(hi) - ml1, ev[i], acc);
      }
    }
  }
  return acc;
}
// Q6_K rows (210-byte super-blocks: only 2-byte aligned), lane (h, j) = (lane / 16, lane % 16)
// taking elements l = 2j, 2j + 1 of half h (and l + 32, + 64, + 96): two bytes of each of
// its three quant runs per load. Needs 8-byte aligned x and 2-byte aligned blocks.
__device__ inline float q6_k_dot(const uint8_t* w, const float* x, int64_t nb, int lane) {
  const int h = lane >> 4, j = lane & 15, is = j >> 3;
  float acc = 0;
#pragma unroll 2
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = w + 210 * b;
    const unsigned short* u = reinterpret_cast<const unsigned short*>(blk);
    const int ql0 = __ldg(u + 32 * h + j), ql1 = __ldg(u + 32 * h + 16 + j), qh = __ldg(u + 64 + 16 * h + j);
    const float d = scale_at(blk + 208);
    const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192 + 8 * h + is);
    const float d0 = d * float(__ldg(sc)), d1 = d * float(__ldg(sc + 2)), d2 = d * float(__ldg(sc + 4)),
                d3 = d * float(__ldg(sc + 6));
    const float* xh = x + 256 * b + 128 * h + 2 * j;
#pragma unroll
    for (int e = 0; e < 2; ++e) {  // elements l = 2j + e
      const int a = (ql0 >> (8 * e)) & 0xFF, c = (ql1 >> (8 * e)) & 0xFF, hb = (qh >> (8 * e)) & 0xFF;
      const int q1 = ((a & 0xF) | (((hb >> 0) & 3) << 4)) - 32;
      const int q2 = ((c & 0xF) | (((hb >> 2) & 3) << 4)) - 32;
      const int q3 = ((a >> 4) | (((hb >> 4) & 3) << 4)) - 32;
      const int q4 = ((c >> 4) | (((hb >> 6) & 3) << 4)) - 32;
      acc = fmaf(d0 * float(q1), xh[e], acc);
      acc = fmaf(d1 * float(q2), xh[32 + e], acc);
      acc = fmaf(d2 * float(q3), xh[64 + e], acc);
      acc = fmaf(d3 * float(q4), xh[96 + e], acc);
    }
  }
  return acc;
}

// The formats below: each block's values formed as the CPU's dequantizer forms them
// (src/ir/quant/dequant.cpp), then multiplied into the lane's sum. IQ4_NL, IQ4_XS, Q2_K and
// Q3_K spread the warp's lanes over a block's elements as Q4_0 and the K-quants above do
// (contiguous loads of x) where x and the rows are aligned for it, else a block per lane;
// F64 an element per lane.

// BF16: an element is the high half of an f32.
__device__ inline float bf16_at(uint16_t h) { return __uint_as_float(uint32_t(h) << 16); }
// acc + dot(8 bf16 in u, x[0..8) as two float4).
__device__ inline float dot8_bf16(uint4 u, const float4* x, float acc) {
  const float4 x0 = x[0], x1 = x[1];
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
  const float xs[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    acc = fmaf(__uint_as_float(w[i] << 16), xs[2 * i], acc);
    acc = fmaf(__uint_as_float(w[i] & 0xFFFF0000u), xs[2 * i + 1], acc);
  }
  return acc;
}

// Level q (0..15) of IQ4_NL / IQ4_XS's 16 non-uniform levels {-127, -104, -83, -65, -49, -35,
// -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}, packed as int8 bytes into four words and picked
// by a byte permute: a table in memory would serialize a warp's different indices.
__device__ inline float iq4_level(int q) {
  const uint32_t lo = __byte_perm(0xBFAD9881u, 0xF6EADDCFu, unsigned(q & 7));
  const uint32_t hi = __byte_perm(0x26190D01u, 0x71594535u, unsigned(q & 7));
  return float(int8_t((q & 8 ? hi : lo) & 0xFF));
}

// IQ4_NL (18 bytes): d, then 16 bytes of level indices (element i low nibble of byte i, 16 + i high).
__device__ inline float iq4_nl_block_dot(const uint8_t* b, const float* x) {
  const float d = half_at(b);
  float acc = 0;
  for (int j = 0; j < 16; ++j) {
    const int q = b[2 + j];
    acc = fmaf(d * iq4_level(q & 0xF), x[j], acc);
    acc = fmaf(d * iq4_level(q >> 4), x[j + 16], acc);
  }
  return acc;
}

// IQ4_XS (136 bytes): d, scales_h (2 high bits of each sub-block's 6-bit scale), scales_l[4]
// (their low nibbles), then 8 sub-blocks of 32 as IQ4_NL's 16 bytes.
__device__ inline float iq4_xs_block_dot(const uint8_t* b, const float* x) {
  const float d = half_at(b);
  const int scales_h = b[2] | (b[3] << 8);
  float acc = 0;
  for (int ib = 0; ib < 8; ++ib) {
    const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) | (((scales_h >> (2 * ib)) & 3) << 4);
    const float dl = d * float(ls - 32);
    const uint8_t* qs = b + 8 + 16 * ib;
    const float* xs = x + 32 * ib;
    for (int j = 0; j < 16; ++j) {
      acc = fmaf(dl * iq4_level(qs[j] & 0xF), xs[j], acc);
      acc = fmaf(dl * iq4_level(qs[j] >> 4), xs[j + 16], acc);
    }
  }
  return acc;
}

// Q2_K (84 bytes): scales[16] (low nibble a sub-block's scale, high nibble its min), qs[64]
// (2-bit values, four per byte at shifts 0, 2, 4, 6), d, dmin.
__device__ inline float q2_k_block_dot(const uint8_t* b, const float* x) {
  const float d = half_at(b + 80), mn = half_at(b + 82);
  float acc = 0;
  int is = 0, e = 0;
  for (int n = 0; n < 2; ++n) {
    const uint8_t* q = b + 16 + 32 * n;
    for (int j = 0; j < 4; ++j)
      for (int half = 0; half < 2; ++half) {
        const int sc = b[is++];
        const float dl = d * float(sc & 0xF), ml = mn * float(sc >> 4);
        for (int l = 0; l < 16; ++l) acc = fmaf(dl * float((q[l + 16 * half] >> (2 * j)) & 3) - ml, x[e++], acc);
      }
  }
  return acc;
}

// Q3_K (110 bytes): hmask[32] (a value's third bit; clear means minus 4), qs[64] (low 2 bits
// as Q2_K), scales[12] (sixteen 6-bit scales, offset 32), d.
__device__ inline float q3_k_block_dot(const uint8_t* b, const float* x) {
  const float d = half_at(b + 108);
  const uint8_t* sb = b + 96;
  int8_t scales[16];
  for (int i = 0; i < 16; ++i) {
    // The low nibble from byte i % 8 (high nibble for i >= 8), the top two bits from byte
    // 8 + i % 4 at shift 2 * (i / 4).
    const int lo = i < 8 ? sb[i] & 0xF : sb[i - 8] >> 4;
    const int hi = (sb[8 + i % 4] >> (2 * (i / 4))) & 3;
    scales[i] = int8_t(lo | (hi << 4));
  }
  float acc = 0;
  int is = 0, e = 0;
  for (int n = 0; n < 2; ++n) {
    const uint8_t* q = b + 32 + 32 * n;
    for (int j = 0; j < 4; ++j) {
      const int m = 1 << (4 * n + j);
      for (int half = 0; half < 2; ++half) {
        const float dl = d * float(scales[is++] - 32);
        for (int l = 16 * half; l < 16 * half + 16; ++l)
          acc = fmaf(dl * float(((q[l] >> (2 * j)) & 3) - ((b[l] & m) ? 0 : 4)), x[e++], acc);
      }
    }
  }
  return acc;
}

// IQ4_NL rows, eight lanes per block as q4_0_dot (lane l: nibble bytes 2l, 2l + 1). Needs
// 8-byte aligned x and 2-byte aligned blocks.
__device__ inline float iq4_nl_dot(const uint8_t* w, const float* x, int64_t nb, int lane) {
  const int l = lane & 7;
  float acc = 0;
#pragma unroll 4
  for (int64_t b = lane >> 3; b < nb; b += 4) {
    const uint8_t* blk = w + 18 * b;
    const int v = __ldg(reinterpret_cast<const unsigned short*>(blk + 2) + l);
    const float2 lo = *reinterpret_cast<const float2*>(x + 32 * b + 2 * l);
    const float2 hi = *reinterpret_cast<const float2*>(x + 32 * b + 16 + 2 * l);
    const float d = scale_at(blk);
    acc = fmaf(d * iq4_level(v & 0xF), lo.x, acc);
    acc = fmaf(d * iq4_level((v >> 8) & 0xF), lo.y, acc);
    acc = fmaf(d * iq4_level((v >> 4) & 0xF), hi.x, acc);
    acc = fmaf(d * iq4_level(v >> 12), hi.y, acc);
  }
  return acc;
}
// IQ4_XS rows, lane (ib, q) = (lane / 4, lane % 4) taking nibble bytes 4q .. 4q + 3 of
// sub-block ib: elements 32 ib + 4q + i (low nibbles) and + 16 (high). Needs 16-byte
// aligned x and 4-byte aligned blocks.
__device__ inline float iq4_xs_dot(const uint8_t* w, const float* x, int64_t nb, int lane) {
  const int ib = lane >> 2, q = lane & 3;
  float acc = 0;
#pragma unroll 2
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = w + 136 * b;
    const uint32_t qs = __ldg(reinterpret_cast<const uint32_t*>(blk + 8 + 16 * ib + 4 * q));
    const int sh = __ldg(reinterpret_cast<const unsigned short*>(blk + 2)), sl = __ldg(blk + 4 + ib / 2);
    const int ls = ((sl >> (4 * (ib & 1))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4);
    const float dl = scale_at(blk) * float(ls - 32);
    const float4 xl = *reinterpret_cast<const float4*>(x + 256 * b + 32 * ib + 4 * q);
    const float4 xh = *reinterpret_cast<const float4*>(x + 256 * b + 32 * ib + 16 + 4 * q);
    const float xlv[4] = {xl.x, xl.y, xl.z, xl.w}, xhv[4] = {xh.x, xh.y, xh.z, xh.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int c = int(qs >> (8 * i)) & 0xFF;
      acc = fmaf(dl * iq4_level(c & 0xF), xlv[i], acc);
      acc = fmaf(dl * iq4_level(c >> 4), xhv[i], acc);
    }
  }
  return acc;
}
// Q2_K rows, sixteen lanes per super-block (a warp works on two at once): lane t = lane % 16
// loads quant bytes 4t .. 4t + 3 of qs in one word. Byte 32n + 16h + i holds element
// 128n + 32j + 16h + i at bits 2j (j = 0..3), whose scale is sub-block 8n + 2j + h. Needs
// 16-byte aligned x and 4-byte aligned blocks.
__device__ inline float q2_k_dot(const uint8_t* w, const float* x, int64_t nb, int lane) {
  const int t = lane & 15, n = t >> 3, h = (t >> 2) & 1, i = 4 * (t & 3);
  float acc = 0;
#pragma unroll 2
  for (int64_t b = lane >> 4; b < nb; b += 2) {
    const uint8_t* blk = w + 84 * b;
    const uint32_t v = __ldg(reinterpret_cast<const uint32_t*>(blk + 16) + t);
    const uint32_t sa = __ldg(reinterpret_cast<const uint32_t*>(blk + 8 * n)), sb = __ldg(reinterpret_cast<const uint32_t*>(blk + 8 * n + 4));
    const uint32_t dm = __ldg(reinterpret_cast<const uint32_t*>(blk + 80));
    const float d = __half2float(__ushort_as_half(uint16_t(dm & 0xFFFF))), dmin = __half2float(__ushort_as_half(uint16_t(dm >> 16)));
    const float* xb = x + 256 * b + 128 * n + 16 * h + i;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int sc = int(((j < 2 ? sa : sb) >> (8 * (2 * (j & 1) + h))) & 0xFF);  // byte 8n + 2j + h
      const float dl = d * float(sc & 0xF), ml = dmin * float(sc >> 4);
      const float4 xv = *reinterpret_cast<const float4*>(xb + 32 * j);
      const float xs[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
      for (int k = 0; k < 4; ++k) acc = fmaf(dl * float((v >> (8 * k + 2 * j)) & 3) - ml, xs[k], acc);
    }
  }
  return acc;
}
// Q3_K rows, sixteen lanes per super-block (a warp works on two at once): lane t = lane % 16
// takes quant bytes 4t .. 4t + 3 of qs and their high bits from hmask bytes (4t) % 32 .. + 3
// (110-byte blocks: 2-byte loads, two a word); byte 32n + 16h + i holds element
// 128n + 32j + 16h + i at bits 2j, whose scale is sub-block 8n + 2j + h; the twelve scale
// bytes are read once per block as words. Needs 16-byte aligned x and 2-byte aligned blocks.
__device__ inline float q3_k_dot(const uint8_t* w, const float* x, int64_t nb, int lane) {
  const int t = lane & 15, n = t >> 3, h = (t >> 2) & 1, i = 4 * (t & 3), hp = (2 * t) & 15;
  float acc = 0;
#pragma unroll 2
  for (int64_t b = lane >> 4; b < nb; b += 2) {
    const uint8_t* blk = w + 110 * b;
    const unsigned short* u = reinterpret_cast<const unsigned short*>(blk);
    const uint32_t v = uint32_t(__ldg(u + 16 + 2 * t)) | (uint32_t(__ldg(u + 17 + 2 * t)) << 16);
    const uint32_t hm = uint32_t(__ldg(u + hp)) | (uint32_t(__ldg(u + hp + 1)) << 16);
    uint32_t sw[3];
#pragma unroll
    for (int k = 0; k < 3; ++k) sw[k] = uint32_t(__ldg(u + 48 + 2 * k)) | (uint32_t(__ldg(u + 49 + 2 * k)) << 16);
    auto byte = [&](int k) { return int(((k < 4 ? sw[0] : k < 8 ? sw[1] : sw[2]) >> (8 * (k & 3))) & 0xFF); };
    const float d = scale_at(blk + 108);
    const float* xb = x + 256 * b + 128 * n + 16 * h + i;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int is = 8 * n + 2 * j + h;
      const int lo = n == 0 ? byte(is) & 0xF : byte(is - 8) >> 4;
      const int hi = (byte(8 + (is & 3)) >> (2 * (is >> 2))) & 3;
      const float dl = d * float((lo | (hi << 4)) - 32);
      const uint32_t m = 1u << (4 * n + j);
      const float4 xv = *reinterpret_cast<const float4*>(xb + 32 * j);
      const float xs[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
      for (int k = 0; k < 4; ++k)
        acc = fmaf(dl * float(int((v >> (8 * k + 2 * j)) & 3) - (((hm >> (8 * k)) & m) ? 0 : 4)), xs[k], acc);
    }
  }
  return acc;
}

// Lane's share of dot(x[0..k), row): F32 / F16 by element, 32-element formats by block,
// K-quants by super-block.
// The format is a template argument: the kernels are instantiated per format (for_format),
// so each holds only its own format's code and registers.
// pol: the L2 policy of an F16 row's loads (weight_policy); the decode products make it once a kernel.
template <int F>
__device__ inline float row_dot(const uint8_t* w, const float* x, int64_t k, int lane, uint64_t pol) {
  constexpr int fmt = F;
  float acc = 0;
  if (fmt == 0) {
    const float* r = reinterpret_cast<const float*>(w);
    for (int64_t i = lane; i < k; i += 32) acc = fmaf(r[i], x[i], acc);
  } else if (fmt == 1 && (k & 7) == 0 && ((reinterpret_cast<uintptr_t>(w) | reinterpret_cast<uintptr_t>(x)) & 15) == 0) {
    acc = f16_dot_from(w, x, k / 8, lane, 0.0f, pol);
  } else if (fmt == 2 && (reinterpret_cast<uintptr_t>(x) & 7) == 0) {
    acc = q4_0_dot(w, x, k / 32, lane);
  } else if (fmt == 8 && (reinterpret_cast<uintptr_t>(x) & 7) == 0) {
    acc = q8_0_dot(w, x, k / 32, lane);
  } else if (fmt == 1) {
    for (int64_t i = lane; i < k; i += 32) acc = fmaf(half_at(w + 2 * i), x[i], acc);
  } else if (fmt == 8) {
    for (int64_t b = lane; b < k / 32; b += 32) {
      const uint8_t* blk = w + 34 * b;
      const float d = half_at(blk);
      float s = 0;
      for (int i = 0; i < 32; ++i) s = fmaf(float(int8_t(blk[2 + i])), x[32 * b + i], s);
      acc = fmaf(d, s, acc);
    }
  } else if ((fmt == 3 || fmt == 6 || fmt == 7) &&
             ((reinterpret_cast<uintptr_t>(x) & 7) | (reinterpret_cast<uintptr_t>(w) & 1)) == 0) {
    acc = block32_lanes_dot<fmt>(w, x, k / 32, lane);
  } else if (fmt == 2 || fmt == 3 || fmt == 6 || fmt == 7) {
    const int bytes = fmt == 2 ? 18 : fmt == 3 ? 20 : fmt == 6 ? 22 : 24;
    for (int64_t b = lane; b < k / 32; b += 32) acc += block32_dot(fmt, w + bytes * b, x + 32 * b);
  } else if ((fmt == 12 || fmt == 13) && ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(w)) & 15) == 0) {
    acc = fmt == 12 ? k45_dot<false>(w, x, k / 256, lane) : k45_dot<true>(w, x, k / 256, lane);
  } else if (fmt == 14) {  // rows of 210-byte blocks from an aligned param: always 2-byte aligned
    acc = q6_k_dot(w, x, k / 256, lane);
  } else if (fmt == 30 && (k & 7) == 0 && ((reinterpret_cast<uintptr_t>(w) | reinterpret_cast<uintptr_t>(x)) & 15) == 0) {
    const uint4* r = reinterpret_cast<const uint4*>(w);
    const float4* xv = reinterpret_cast<const float4*>(x);
    for (int64_t i = lane; i < k / 8; i += 32) acc = dot8_bf16(__ldg(r + i), xv + 2 * i, acc);
  } else if (fmt == 30) {
    for (int64_t i = lane; i < k; i += 32) acc = fmaf(bf16_at(uint16_t(w[2 * i] | (w[2 * i + 1] << 8))), x[i], acc);
  } else if (fmt == 28) {
    for (int64_t i = lane; i < k; i += 32) {
      double v;
      memcpy(&v, w + 8 * i, 8);
      acc = fmaf(float(v), x[i], acc);
    }
  } else if (fmt == 20 && ((reinterpret_cast<uintptr_t>(x) & 7) | (reinterpret_cast<uintptr_t>(w) & 1)) == 0) {
    acc = iq4_nl_dot(w, x, k / 32, lane);
  } else if (fmt == 20) {
    for (int64_t b = lane; b < k / 32; b += 32) acc += iq4_nl_block_dot(w + 18 * b, x + 32 * b);
  } else if (fmt == 23 && ((reinterpret_cast<uintptr_t>(x) & 15) | (reinterpret_cast<uintptr_t>(w) & 3)) == 0) {
    acc = iq4_xs_dot(w, x, k / 256, lane);
  } else if (fmt == 23) {
    for (int64_t b = lane; b < k / 256; b += 32) acc += iq4_xs_block_dot(w + 136 * b, x + 256 * b);
  } else if (fmt == 10 && ((reinterpret_cast<uintptr_t>(x) & 15) | (reinterpret_cast<uintptr_t>(w) & 3)) == 0) {
    acc = q2_k_dot(w, x, k / 256, lane);
  } else if (fmt == 11 && ((reinterpret_cast<uintptr_t>(x) & 15) | (reinterpret_cast<uintptr_t>(w) & 1)) == 0) {
    acc = q3_k_dot(w, x, k / 256, lane);
  } else if (fmt == 10) {
    for (int64_t b = lane; b < k / 256; b += 32) acc += q2_k_block_dot(w + 84 * b, x + 256 * b);
  } else if (fmt == 11) {
    for (int64_t b = lane; b < k / 256; b += 32) acc += q3_k_block_dot(w + 110 * b, x + 256 * b);
  } else {
    const int bytes = fmt == 12 ? 144 : 176;
    for (int64_t b = lane; b < k / 256; b += 32) acc += superblock_dot(fmt, w + bytes * b, x + 256 * b);
  }
  return acc;
}

}  // namespace rlx::cuda::qdot
