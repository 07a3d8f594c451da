// LLM kernels of the CUDA backend: qmatmul / qmatmul_id over weight rows in their GGUF block
// format (F32, F16, BF16, F64, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
// IQ4_NL, IQ4_XS: every format the CPU reads, decoded in registers;
// nothing is expanded in memory; one warp per output element), rotary, and cache_write
// (the new rows into a cache, in place on a resident handle). f32 accumulation in a fixed
// order per output, so runs repeat bit for bit.
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "backends/cuda/device_util.cuh"
#include "backends/cuda/kernels.h"

namespace rlx::cuda {
namespace {

constexpr int kWarps = 8;

using dev::warp_sum;
__device__ inline float half_at(const uint8_t* p) {
  __half h;
  memcpy(&h, p, 2);
  return __half2float(h);
}

__device__ inline void scale_min_k4(int j, const uint8_t* q, int& d, int& m) {
  if (j < 4) {
    d = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

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
__device__ inline float f16_dot_from(const uint8_t* row, const float* x, int64_t n8, int64_t i, float acc) {
  const uint4* r = reinterpret_cast<const uint4*>(row);
  const float4* xv = reinterpret_cast<const float4*>(x);
  for (; i < n8; i += 32 * U) {
    uint4 u[U];
#pragma unroll
    for (int t = 0; t < U; ++t) u[t] = i + 32 * t < n8 ? __ldg(r + i + 32 * t) : make_uint4(0, 0, 0, 0);
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
                                     float& a, float& b) {
  constexpr int U = kF16Group / 2 > 0 ? kF16Group / 2 : 1;
  const uint4* pa = reinterpret_cast<const uint4*>(ra);
  const uint4* pb = reinterpret_cast<const uint4*>(rb);
  const float4* xv = reinterpret_cast<const float4*>(x);
  for (; i < n8; i += 32 * U) {
    uint4 ua[U], ub[U];
#pragma unroll
    for (int t = 0; t < U; ++t) {
      const bool in = i + 32 * t < n8;
      ua[t] = in ? __ldg(pa + i + 32 * t) : make_uint4(0, 0, 0, 0);
      ub[t] = in ? __ldg(pb + i + 32 * t) : make_uint4(0, 0, 0, 0);
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
template <int F>
__device__ inline float row_dot(const uint8_t* w, const float* x, int64_t k, int lane) {
  constexpr int fmt = F;
  float acc = 0;
  if (fmt == 0) {
    const float* r = reinterpret_cast<const float*>(w);
    for (int64_t i = lane; i < k; i += 32) acc = fmaf(r[i], x[i], acc);
  } else if (fmt == 1 && (k & 7) == 0 && ((reinterpret_cast<uintptr_t>(w) | reinterpret_cast<uintptr_t>(x)) & 15) == 0) {
    acc = f16_dot_from(w, x, k / 8, lane, 0.0f);
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
__device__ inline void f16_prefetch(const uint8_t* row, int64_t n8, int lane, uint4* u) {
  const uint4* r = reinterpret_cast<const uint4*>(row);
#pragma unroll
  for (int t = 0; t < P; ++t) u[t] = lane + 32 * t < n8 ? __ldg(r + lane + 32 * t) : make_uint4(0, 0, 0, 0);
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
__device__ inline float f16_dot_prefetched(const uint4* u, const uint8_t* row, const float* x, int64_t n8, int lane) {
  return f16_dot_from(row, x, n8, lane + 32 * P, f16_dot_held<P>(u, x, n8, lane));
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
  __device__ void fetch(const QMatMulArgs& a, const uint8_t* w, const float* x, int64_t row, int lane) {
    if constexpr (F == 1) {
      on = f16_wide<F>(a, w, x);
      if (on) f16_prefetch<P>(w + row * a.row_bytes, a.k / 8, lane, u);
    } else if constexpr (F == 2) {
      on = (reinterpret_cast<uintptr_t>(x) & 7) == 0;
      if (on) q4_0_prefetch(w + row * a.row_bytes, a.k / 32, lane, q);
    }
  }
  __device__ float dot(const QMatMulArgs& a, const uint8_t* w, const float* x, int64_t row, int lane) const {
    if constexpr (F == 1) return f16_dot_prefetched<P>(u, w + row * a.row_bytes, x, a.k / 8, lane);
    else if constexpr (F == 2) return q4_0_dot_prefetched(q, w + row * a.row_bytes, x, a.k / 32, lane);
    else return 0.0f;
  }
  // dot() of this fetch's row (sa) and of `other`'s (sb) with the same x; F16 rows stream
  // the rest of both at once (f16_dot2_from), the same bits as two dot() calls.
  __device__ void dot2(const RowFetch& other, const QMatMulArgs& a, const uint8_t* w, const float* x, int64_t row,
                       int64_t other_row, int lane, float& sa, float& sb) const {
    if constexpr (F == 1) {
      const int64_t n8 = a.k / 8;
      sa = f16_dot_held<P>(u, x, n8, lane);
      sb = f16_dot_held<P>(other.u, x, n8, lane);
      f16_dot2_from(w + row * a.row_bytes, w + other_row * a.row_bytes, x, n8, lane + 32 * P, sa, sb);
    } else {
      sa = dot(a, w, x, row, lane);
      sb = other.dot(a, w, x, other_row, lane);
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
  RowFetch<F, P> first;
  if (o < a.m * a.n) first.fetch(a, w, x, o % a.n, lane);
  // A settled residual's element is fetched before the wait too, one trip to memory less
  // after it (TinyLlama-1.1B-shaped F16 decode on the H200: +0.8 %, alternated rounds).
  const bool early = a.residual_settled && residual && lane == 0 && o < a.m * a.n;
  const float r0 = early ? residual[o] : 0.0f;
  dev::grid_wait();
  dev::grid_next();
  if (first.on) {
    const int64_t i = o / a.n, j = o % a.n;
    const float s = warp_sum(first.dot(a, w, x + i * a.k, j, lane));
    if (lane == 0) y[o] = residual ? __fadd_rn(s, early ? r0 : residual[o]) : s;
    o += int64_t(gridDim.x) * kWarps;
  }
  for (; o < a.m * a.n; o += int64_t(gridDim.x) * kWarps) {
    const int64_t i = o / a.n, j = o % a.n;
    const float s = warp_sum(row_dot<F>(w + j * a.row_bytes, x + i * a.k, a.k, lane));
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
__global__ void norm_qmatmul_kernel(QMatMulArgs a, const float* x, const float* scale, float eps, const uint8_t* w,
                                    float* y, int64_t gate_row) {
  extern __shared__ float4 xs4[];
  __shared__ float part[kWarps];
  float* xs = reinterpret_cast<float*>(xs4);
  const int lane = threadIdx.x & 31;
  const int64_t rows = Glu ? a.n / 2 : a.n, up_row = Glu && gate_row == 0 ? rows : 0;
  int64_t o = blockIdx.x * int64_t(kWarps) + threadIdx.x / 32;
  RowFetch<F, Glu ? P / 2 : P> first, second;  // Glu: the up row, then the gate row
  if (o < rows) {
    first.fetch(a, w, xs, up_row + o, lane);
    if constexpr (Glu) second.fetch(a, w, xs, gate_row + o, lane);
  }
  dev::grid_wait();
  dev::grid_next();
  const float inv = a.k >= 1024 ? dev::inv_rms<true, kWarps>(x, a.k, 0.0f, eps, part)
                                : dev::inv_rms<false, kWarps>(x, a.k, 0.0f, eps, nullptr);
  dev::row_batches(
      threadIdx.x, a.k, blockDim.x, [&](int64_t i) { return make_float2(x[i], scale ? scale[i] : 1.0f); },
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
      first.dot2(second, a, w, xs, up_row + o, gate_row + o, lane, su, sg);
      su = warp_sum(su);
      sg = warp_sum(sg);
      if (lane == 0) y[o] = glu(sg, su);
    } else {
      const float s = warp_sum(first.dot(a, w, xs, o, lane));
      if (lane == 0) y[o] = s;
    }
    o += int64_t(gridDim.x) * kWarps;
  }
  for (; o < rows; o += int64_t(gridDim.x) * kWarps) {
    if constexpr (Glu) {
      float su = 0, sg = 0;
      if (F == 1 && first.on) {  // F16 rows of whole 16-byte chunks (f16_wide): both at once
        f16_dot2_from(w + (up_row + o) * a.row_bytes, w + (gate_row + o) * a.row_bytes, xs, a.k / 8, lane, su, sg);
      } else {
        su = row_dot<F>(w + (up_row + o) * a.row_bytes, xs, a.k, lane);
        sg = row_dot<F>(w + (gate_row + o) * a.row_bytes, xs, a.k, lane);
      }
      su = warp_sum(su);
      sg = warp_sum(sg);
      if (lane == 0) y[o] = glu(sg, su);
    } else {
      const float s = warp_sum(row_dot<F>(w + o * a.row_bytes, xs, a.k, lane));
      if (lane == 0) y[o] = s;
    }
  }
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
    const float s = warp_sum(row_dot<F>(w + (e * a.n + j) * a.row_bytes, xr, a.k, lane));
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
  put(r * a.d + i0, x0 * co - x1 * si);
  put(r * a.d + i1, x1 * co + x0 * si);
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
const auto kNormQMatMul = [](auto f) { return &norm_qmatmul_kernel<decltype(f)::value, kPrefetch, false>; };
const auto kNormQMatMulGlu = [](auto f) { return &norm_qmatmul_kernel<decltype(f)::value, kPrefetch, true>; };
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
