// attention (ops.def) of whole sequences (prefill, encoders), flash-style, in two kernels.
//
// Tensor cores (f16 / bf16, head dims multiples of 16, 16-byte aligned operands), up to 128
// keys: every key in shared memory, one pass (attention_short_kernel, below). Longer: a block holds
// 64 query rows (4 warps of 16) and streams the keys through shared memory 64 at a time. Per
// tile a warp computes its 16 x 64 scores with WMMA (f32 accumulation) into shared memory;
// two lanes per row apply scale, mask and causality, update the row's running max and sum and
// write the probabilities in the storage type (the sum is of those rounded values, so the
// output stays an exact convex combination of the weights used); the output, kept in f32 in
// shared memory, is rescaled and then accumulated with P V on the tensor cores.
//
// CUDA cores (every other case, f32 included): a block holds 16
// query rows (4 warps of 4 rows) and streams the keys through shared memory 32 at a time,
// keeping per row a running max, sum and output (online softmax), so the [Sq, Sk] scores
// never reach memory. Lane j of a warp scores key j of the tile against the warp's 4 rows
// (K rows padded by one float in shared memory so the 32 lanes read 32 banks); the
// probabilities then go round the warp by shuffles and each lane accumulates its share of
// the output dims (lane + 32c) from the V tile. f32 arithmetic in a fixed order for every
// storage type (f32, f16, bf16), so runs repeat bit for bit. The additive mask broadcasts
// through element strides; causal aligns the last query with the last key; a row that sees
// no key (or only -inf scores) gives zeros, as on the CPU.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <mutex>
#include <type_traits>

#include "backends/cuda/device_util.cuh"
#include "backends/cuda/kernels.h"

namespace rlx::cuda {
namespace {

constexpr int kAttnWarps = 4, kAttnRows = 4, kAttnKeys = 32;
constexpr int kAttnBlockRows = kAttnWarps * kAttnRows;

__device__ inline int64_t imin(int64_t x, int64_t y) { return x < y ? x : y; }
__device__ inline int64_t imax(int64_t x, int64_t y) { return x > y ? x : y; }

// NC: output dims per lane (dv <= 32 NC).
template <class T, int NC>
__global__ void __launch_bounds__(kAttnWarps * 32)
    attention_kernel(AttentionArgs a, const T* q, const T* k, const T* v, const T* mask, T* out) {
  dev::grid_wait();
  dev::grid_next();
  extern __shared__ float smem[];
  const int d = int(a.d), dv = int(a.dv), kst = d + 1;
  float* qs = smem;                                  // [16][d], scaled
  float* ks = qs + kAttnBlockRows * d;               // [32][d + 1]
  float* vs = ks + kAttnKeys * kst;                  // [32][dv]
  const int64_t qblocks = (a.sq + kAttnBlockRows - 1) / kAttnBlockRows;
  const int64_t qb = blockIdx.x % qblocks, h = (blockIdx.x / qblocks) % a.hq, b = blockIdx.x / (qblocks * a.hq);
  const int64_t hk = h / (a.hq / a.hkv);
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  const int64_t row0 = qb * kAttnBlockRows;
  const T* qb_ptr = q + b * a.qst[0] + h * a.qst[1];
  const T* kb_ptr = k + b * a.kst[0] + hk * a.kst[1];
  const T* vb_ptr = v + b * a.vst[0] + hk * a.vst[1];
  for (int e = threadIdx.x; e < kAttnBlockRows * d; e += blockDim.x) {
    const int64_t i = row0 + e / d;
    qs[e] = i < a.sq ? dev::ldf(qb_ptr[i * a.qst[2] + e % d]) * a.scale : 0.0f;
  }
  // Keys the block's last row may see (causal: query i sees keys j <= i + sk - sq).
  const int64_t last = imin(row0 + kAttnBlockRows, a.sq) - 1;
  const int64_t kend = a.causal ? imax(0, imin(a.sk, last + a.sk - a.sq + 1)) : a.sk;
  float m[kAttnRows], l[kAttnRows], acc[kAttnRows][NC];
#pragma unroll
  for (int r = 0; r < kAttnRows; ++r) {
    m[r] = -INFINITY;
    l[r] = 0;
#pragma unroll
    for (int c = 0; c < NC; ++c) acc[r][c] = 0;
  }
  for (int64_t j0 = 0; j0 < kend; j0 += kAttnKeys) {
    __syncthreads();  // the previous tile is no longer read (and qs is written, the first time)
    const int n = int(imin(kAttnKeys, kend - j0));
    for (int e = threadIdx.x; e < kAttnKeys * d; e += blockDim.x) {
      const int j = e / d, c = e % d;
      ks[j * kst + c] = j < n ? dev::ldf(kb_ptr[(j0 + j) * a.kst[2] + c]) : 0.0f;
    }
    for (int e = threadIdx.x; e < kAttnKeys * dv; e += blockDim.x) {
      const int j = e / dv;
      vs[e] = j < n ? dev::ldf(vb_ptr[(j0 + j) * a.vst[2] + e % dv]) : 0.0f;
    }
    __syncthreads();
    float s[kAttnRows];
#pragma unroll
    for (int r = 0; r < kAttnRows; ++r) s[r] = 0;
    const float* kr = ks + lane * kst;
    const float* qw = qs + warp * kAttnRows * d;
    for (int c = 0; c < d; ++c) {
      const float kv = kr[c];
#pragma unroll
      for (int r = 0; r < kAttnRows; ++r) s[r] = fmaf(qw[r * d + c], kv, s[r]);
    }
    const int64_t j = j0 + lane;
    float p[kAttnRows];
#pragma unroll
    for (int r = 0; r < kAttnRows; ++r) {
      const int64_t i = row0 + warp * kAttnRows + r;
      const int64_t end = a.causal ? i + a.sk - a.sq + 1 : a.sk;  // exclusive
      const bool live = i < a.sq && lane < n && j < end;
      float x = -INFINITY;
      if (live) {
        x = s[r];
        if (mask) x += dev::ldf(mask[b * a.mst[0] + h * a.mst[1] + i * a.mst[2] + j * a.mst[3]]);
      }
      const float mn = fmaxf(m[r], dev::warp_max(x));
      // mn = -inf: nothing visible yet; keep the (zero) state.
      const float alpha = mn == -INFINITY ? 1.0f : __expf(m[r] - mn);
      p[r] = mn == -INFINITY ? 0.0f : __expf(x - mn);
      l[r] = l[r] * alpha + dev::warp_sum(p[r]);
      m[r] = mn;
#pragma unroll
      for (int c = 0; c < NC; ++c) acc[r][c] *= alpha;
    }
    for (int jj = 0; jj < n; ++jj) {
      float vv[NC];
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        const int e = lane + 32 * c;
        vv[c] = e < dv ? vs[jj * dv + e] : 0.0f;
      }
#pragma unroll
      for (int r = 0; r < kAttnRows; ++r) {
        const float pj = __shfl_sync(0xFFFFFFFFu, p[r], jj);
#pragma unroll
        for (int c = 0; c < NC; ++c) acc[r][c] = fmaf(pj, vv[c], acc[r][c]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kAttnRows; ++r) {
    const int64_t i = row0 + warp * kAttnRows + r;
    if (i >= a.sq) continue;
    const float inv = l[r] > 0 ? 1.0f / l[r] : 0.0f;
    T* o = out + b * a.ost[0] + h * a.ost[1] + i * a.ost[2];
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      const int e = lane + 32 * c;
      if (e < dv) o[e] = dev::stf<T>(acc[r][c] * inv);
    }
  }
}

// ---- tensor-core kernel (f16 / bf16)

constexpr int kTcWarps = 4, kTcRows = 16 * kTcWarps, kTcKeys = 64;
constexpr int kTcLdS = kTcKeys + 4, kTcLdP = kTcKeys + 8;  // padded rows (WMMA wants ldm % 8 halves / 4 floats)

// Byte offsets of the kernel's shared memory, host and device alike: Q [64][d + 8], K [64][d + 8]
// and V [64][dv + 8] in the storage type (2 bytes), then per warp S [16][kTcLdS] f32, P
// [16][kTcLdP] storage, O [16][dv + 4] f32. With d and dv multiples of 16 every region and row
// block starts on 32 bytes, as WMMA's loads and stores want.
struct TcLayout {
  size_t k, v, s, p, o, bytes;  // Q at 0
  __host__ __device__ constexpr TcLayout(int64_t d, int64_t dv)
      : k(size_t(kTcRows) * size_t(d + 8) * 2),
        v(k + size_t(kTcKeys) * size_t(d + 8) * 2),
        s(v + size_t(kTcKeys) * size_t(dv + 8) * 2),
        p(s + size_t(kTcWarps) * 16 * kTcLdS * 4),
        o(p + size_t(kTcWarps) * 16 * kTcLdP * 2),
        bytes(o + size_t(kTcWarps) * 16 * size_t(dv + 4) * 4) {}
};
constexpr size_t kTcSmemMax = TcLayout(kAttentionMaxDim, kAttentionMaxDim).bytes;

// Copies `count` rows of w elements (w % 8 == 0), src rows `sld` elements apart, into shared
// memory with row stride ld, 16 bytes at a time; rows past `live` are zeros. The copies are
// asynchronous (every one of a tile in flight at once, where a load then a store per
// iteration cost a round trip each: 8 of them for 128 keys of 64 dims), so they reach the
// block only after dev::copy_async_wait() and a barrier.
template <class T>
__device__ inline void tile_load(T* dst, int ld, const T* src, int64_t sld, int64_t w, int count, int live) {
  const int vecs = int(w / 8);
  for (int e = threadIdx.x; e < count * vecs; e += blockDim.x) {
    const int r = e / vecs, c = (e - r * vecs) * 8;
    if (r < live) dev::copy16_async(dst + r * ld + c, src + int64_t(r) * sld + c);
    else *reinterpret_cast<uint4*>(dst + r * ld + c) = make_uint4(0, 0, 0, 0);
  }
}
template <class T>
__global__ void __launch_bounds__(kTcWarps * 32)
    attention_tc_kernel(AttentionArgs a, const T* q, const T* k, const T* v, const T* mask, T* out) {
  using namespace nvcuda;
  dev::grid_wait();
  dev::grid_next();
  extern __shared__ __align__(128) unsigned char tc_smem_raw[];
  const int d = int(a.d), dv = int(a.dv), ldk = d + 8, ldv = dv + 8, ldo = dv + 4;
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  const TcLayout L(d, dv);
  T* qs = reinterpret_cast<T*>(tc_smem_raw);
  T* ks = reinterpret_cast<T*>(tc_smem_raw + L.k);
  T* vs = reinterpret_cast<T*>(tc_smem_raw + L.v);
  float* ss = reinterpret_cast<float*>(tc_smem_raw + L.s) + warp * 16 * kTcLdS;  // this warp's rows
  T* ps = reinterpret_cast<T*>(tc_smem_raw + L.p) + warp * 16 * kTcLdP;
  float* os = reinterpret_cast<float*>(tc_smem_raw + L.o) + warp * 16 * ldo;
  const int64_t qblocks = (a.sq + kTcRows - 1) / kTcRows;
  const int64_t qb = blockIdx.x % qblocks, h = (blockIdx.x / qblocks) % a.hq, b = blockIdx.x / (qblocks * a.hq);
  const int64_t hk = h / (a.hq / a.hkv);
  const int64_t row0 = qb * kTcRows;
  tile_load(qs, ldk, q + b * a.qst[0] + h * a.qst[1] + row0 * a.qst[2], a.qst[2], a.d, kTcRows,
            int(imin(kTcRows, a.sq - row0)));
  const T* kb_ptr = k + b * a.kst[0] + hk * a.kst[1];
  const T* vb_ptr = v + b * a.vst[0] + hk * a.vst[1];
  // This lane's row of the warp's 16 and its half of the columns.
  const int r = lane >> 1, hf = lane & 1;
  const int64_t i = row0 + warp * 16 + r;
  const int64_t end = a.causal ? i + a.sk - a.sq + 1 : a.sk;  // exclusive
  const int half_dv = dv / 2;
  for (int c = 0; c < half_dv; ++c) os[r * ldo + hf * half_dv + c] = 0.0f;
  float m = -INFINITY, l = 0;
  const int64_t last = imin(row0 + kTcRows, a.sq) - 1;
  const int64_t kend = a.causal ? imax(0, imin(a.sk, last + a.sk - a.sq + 1)) : a.sk;
  for (int64_t j0 = 0; j0 < kend; j0 += kTcKeys) {
    __syncthreads();  // the previous tile is no longer read
    const int n = int(imin(kTcKeys, kend - j0));
    tile_load(ks, ldk, kb_ptr + j0 * a.kst[2], a.kst[2], a.d, kTcKeys, n);
    tile_load(vs, ldv, vb_ptr + j0 * a.vst[2], a.vst[2], a.dv, kTcKeys, n);
    dev::copy_async_wait();  // this thread's copies (the query tile's too, the first time) landed
    __syncthreads();
    // S = Q K^T for the warp's 16 rows.
    for (int nb = 0; nb < kTcKeys / 16; ++nb) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
      for (int kk = 0; kk < d / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
        wmma::load_matrix_sync(fa, qs + warp * 16 * ldk + kk * 16, ldk);
        wmma::load_matrix_sync(fb, ks + nb * 16 * ldk + kk * 16, ldk);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(ss + nb * 16, acc, kTcLdS, wmma::mem_row_major);
    }
    __syncwarp();
    // Online softmax: lanes 2r and 2r + 1 share row r, 32 columns each.
    float* sr = ss + r * kTcLdS + hf * 32;
    float mx = -INFINITY;
    for (int c = 0; c < 32; ++c) {
      const int64_t j = j0 + hf * 32 + c;
      float x = -INFINITY;
      if (i < a.sq && hf * 32 + c < n && j < end) {
        x = sr[c] * a.scale;
        if (mask) x += dev::ldf(mask[b * a.mst[0] + h * a.mst[1] + i * a.mst[2] + j * a.mst[3]]);
      }
      sr[c] = x;
      mx = fmaxf(mx, x);
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, 1));
    const float mn = fmaxf(m, mx);
    const float alpha = mn == -INFINITY ? 1.0f : __expf(m - mn);
    float sum = 0;
    T* pr = ps + r * kTcLdP + hf * 32;
    for (int c = 0; c < 32; ++c) {
      const T p = dev::stf<T>(mn == -INFINITY ? 0.0f : __expf(sr[c] - mn));
      pr[c] = p;
      sum += dev::ldf(p);
    }
    sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 1);
    l = l * alpha + sum;
    m = mn;
    for (int c = 0; c < half_dv; ++c) os[r * ldo + hf * half_dv + c] *= alpha;
    __syncwarp();
    // O += P V.
    for (int ob = 0; ob < dv / 16; ++ob) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::load_matrix_sync(acc, os + ob * 16, ldo, wmma::mem_row_major);
      for (int kk = 0; kk < kTcKeys / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
        wmma::load_matrix_sync(fa, ps + kk * 16, kTcLdP);
        wmma::load_matrix_sync(fb, vs + kk * 16 * ldv + ob * 16, ldv);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(os + ob * 16, acc, ldo, wmma::mem_row_major);
    }
    __syncwarp();
  }
  dev::copy_async_wait();  // no key tile (kend = 0): the query tile's copies are still this thread's
  if (i < a.sq) {
    const float inv = l > 0 ? 1.0f / l : 0.0f;
    T* o = out + b * a.ost[0] + h * a.ost[1] + i * a.ost[2] + hf * half_dv;
    for (int c = 0; c < half_dv; ++c) o[c] = dev::stf<T>(os[r * ldo + hf * half_dv + c] * inv);
  }
}

// ---- tensor-core kernel for short key ranges (Sk <= kShortKeys: an encoder's sequence)
//
// Every key fits in shared memory at once, so there is no running max to rescale by: per warp
// S = Q K^T (16 rows x all keys) in one pass, then a plain softmax with a warp per row (lanes
// over the columns, max and sum by shuffles), the probabilities rounded to the storage type
// and normalized by the sum of the rounded ones (as the streaming kernel does), then O = P V
// with the accumulators in registers. Two block barriers in all; the streaming kernel pays
// one rescale of its shared-memory output per key tile, which is what made it slow at 128
// tokens.
constexpr int kShortKeys = 128;

// Byte offsets: Q [64][d + 8], K [skp][d + 8], V [skp][dv + 8] (storage type), per warp a
// [16][w] f32 region (S with w >= skp + 4, then O with w >= dv + 4), per warp P [16][skp + 8]
// (storage type), per warp 16 row scales (f32). skp: Sk rounded up to 16.
struct ShortLayout {
  size_t k, v, s, p, inv, bytes;
  int64_t skp, ldw;
  __host__ __device__ constexpr ShortLayout(int64_t d, int64_t dv, int64_t sk)
      : k(size_t(kTcRows) * size_t(d + 8) * 2),
        v(k + size_t((sk + 15) / 16 * 16) * size_t(d + 8) * 2),
        s(v + size_t((sk + 15) / 16 * 16) * size_t(dv + 8) * 2),
        p(s + size_t(kTcWarps) * 16 * size_t(((sk + 15) / 16 * 16 + 4) > dv + 4 ? (sk + 15) / 16 * 16 + 4 : dv + 4) * 4),
        inv(p + size_t(kTcWarps) * 16 * size_t((sk + 15) / 16 * 16 + 8) * 2),
        bytes(inv + size_t(kTcWarps) * 16 * 4),
        skp((sk + 15) / 16 * 16),
        ldw(((sk + 15) / 16 * 16 + 4) > dv + 4 ? (sk + 15) / 16 * 16 + 4 : dv + 4) {}
};
constexpr size_t kShortSmemMax = ShortLayout(kAttentionMaxDim, kAttentionMaxDim, kShortKeys).bytes;

template <class T>
__global__ void __launch_bounds__(kTcWarps * 32)
    attention_short_kernel(AttentionArgs a, const T* q, const T* k, const T* v, const T* mask, T* out) {
  using namespace nvcuda;
  dev::grid_wait();
  dev::grid_next();
  extern __shared__ __align__(128) unsigned char short_smem_raw[];
  const int d = int(a.d), dv = int(a.dv), ldq = d + 8, ldv = dv + 8;
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  const ShortLayout L(d, dv, a.sk);
  const int skp = int(L.skp), ldw = int(L.ldw), ldp = skp + 8;
  T* qs = reinterpret_cast<T*>(short_smem_raw);
  T* ks = reinterpret_cast<T*>(short_smem_raw + L.k);
  T* vs = reinterpret_cast<T*>(short_smem_raw + L.v);
  float* ws = reinterpret_cast<float*>(short_smem_raw + L.s) + warp * 16 * ldw;  // S, then O
  T* ps = reinterpret_cast<T*>(short_smem_raw + L.p) + warp * 16 * ldp;
  float* inv = reinterpret_cast<float*>(short_smem_raw + L.inv) + warp * 16;
  const int64_t qblocks = (a.sq + kTcRows - 1) / kTcRows;
  const int64_t qb = blockIdx.x % qblocks, h = (blockIdx.x / qblocks) % a.hq, b = blockIdx.x / (qblocks * a.hq);
  const int64_t hk = h / (a.hq / a.hkv);
  const int64_t row0 = qb * kTcRows;
  tile_load(qs, ldq, q + b * a.qst[0] + h * a.qst[1] + row0 * a.qst[2], a.qst[2], a.d, kTcRows,
            int(imin(kTcRows, a.sq - row0)));
  tile_load(ks, ldq, k + b * a.kst[0] + hk * a.kst[1], a.kst[2], a.d, skp, int(a.sk));
  tile_load(vs, ldv, v + b * a.vst[0] + hk * a.vst[1], a.vst[2], a.dv, skp, int(a.sk));
  dev::copy_async_wait();
  __syncthreads();
  // S = Q K^T for the warp's 16 rows and every key.
  for (int nb = 0; nb < skp / 16; ++nb) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int kk = 0; kk < d / 16; ++kk) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
      wmma::load_matrix_sync(fa, qs + warp * 16 * ldq + kk * 16, ldq);
      wmma::load_matrix_sync(fb, ks + nb * 16 * ldq + kk * 16, ldq);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(ws + nb * 16, acc, ldw, wmma::mem_row_major);
  }
  __syncwarp();
  // Softmax, four rows at a time: lane group g = lane / 8 takes row 4 * pass + g, lane q = lane % 8
  // its columns q + 8t (t < 16 covers 128 keys); max and sum over the group's 8 lanes (three
  // shuffles each where a warp per row took five, and four rows' chains side by side).
  {
    const int g = lane >> 3, q8 = lane & 7;
    for (int pass = 0; pass < 4; ++pass) {
      const int r = 4 * pass + g;
      const int64_t i = row0 + warp * 16 + r;
      const int64_t end = a.causal ? i + a.sk - a.sq + 1 : a.sk;  // exclusive
      const T* mrow = mask && i < a.sq ? mask + b * a.mst[0] + h * a.mst[1] + i * a.mst[2] : nullptr;
      float x[kShortKeys / 8];
      float mx = -INFINITY;
#pragma unroll
      for (int t = 0; t < kShortKeys / 8; ++t) {
        const int64_t c = q8 + 8 * t;
        x[t] = -INFINITY;
        if (i < a.sq && c < a.sk && c < end) {
          x[t] = ws[r * ldw + c] * a.scale;
          if (mrow) x[t] += dev::ldf(mrow[c * a.mst[3]]);
        }
        mx = fmaxf(mx, x[t]);
      }
      for (int o = 4; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, o));
      float sum = 0;
#pragma unroll
      for (int t = 0; t < kShortKeys / 8; ++t) {
        const int c = q8 + 8 * t;
        if (c >= skp) break;
        const T p = dev::stf<T>(mx == -INFINITY ? 0.0f : __expf(x[t] - mx));
        ps[r * ldp + c] = p;
        sum += dev::ldf(p);
      }
      for (int o = 4; o > 0; o >>= 1) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, o);
      if (q8 == 0) inv[r] = sum > 0 ? 1.0f / sum : 0.0f;
    }
  }
  __syncwarp();
  // O = P V into the (now free) S region.
  for (int ob = 0; ob < dv / 16; ++ob) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int kk = 0; kk < skp / 16; ++kk) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
      wmma::load_matrix_sync(fa, ps + kk * 16, ldp);
      wmma::load_matrix_sync(fb, vs + kk * 16 * ldv + ob * 16, ldv);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(ws + ob * 16, acc, ldw, wmma::mem_row_major);
  }
  __syncwarp();
  for (int e = lane; e < 16 * dv; e += 32) {
    const int r = e / dv, c = e - r * dv;
    const int64_t i = row0 + warp * 16 + r;
    if (i < a.sq) out[b * a.ost[0] + h * a.ost[1] + i * a.ost[2] + c] = dev::stf<T>(ws[r * ldw + c] * inv[r]);
  }
}

template <class T>
cudaError_t attention_typed(const AttentionArgs& a, const void* q, const void* k, const void* v, const void* mask,
                            void* out, cudaStream_t s) {
  if constexpr (!std::is_same_v<T, float>) {
    // Every row start on 16 bytes: the bases, and the strides in whole 8-element vectors.
    bool rows16 = true;
    for (const int64_t* st : {a.qst, a.kst, a.vst, a.ost})
      for (int i = 0; i < 3; ++i) rows16 = rows16 && st[i] % 8 == 0;
    if (a.d % 16 == 0 && a.dv % 16 == 0 && rows16 && dev::aligned16(q) && dev::aligned16(k) && dev::aligned16(v) &&
        dev::aligned16(out)) {
      const int64_t tblocks = a.b * a.hq * ((a.sq + kTcRows - 1) / kTcRows);
      if (tblocks == 0) return cudaSuccess;
      if (a.sk <= kShortKeys)
        return dev::launch(attention_short_kernel<T>, dim3(unsigned(tblocks)), dim3(kTcWarps * 32),
                           ShortLayout(a.d, a.dv, a.sk).bytes, s, a, static_cast<const T*>(q), static_cast<const T*>(k),
                           static_cast<const T*>(v), static_cast<const T*>(mask), static_cast<T*>(out));
      return dev::launch(attention_tc_kernel<T>, dim3(unsigned(tblocks)), dim3(kTcWarps * 32), TcLayout(a.d, a.dv).bytes, s, a,
                         static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
                         static_cast<const T*>(mask), static_cast<T*>(out));
    }
  }
  const int64_t blocks = a.b * a.hq * ((a.sq + kAttnBlockRows - 1) / kAttnBlockRows);
  if (blocks == 0) return cudaSuccess;
  const size_t smem = size_t(kAttnBlockRows * a.d + kAttnKeys * (a.d + 1) + kAttnKeys * a.dv) * sizeof(float);
  auto args = [&](auto kern) {
    return dev::launch(kern, dim3(unsigned(blocks)), dim3(kAttnWarps * 32), smem, s, a, static_cast<const T*>(q),
                       static_cast<const T*>(k), static_cast<const T*>(v), static_cast<const T*>(mask),
                       static_cast<T*>(out));
  };
  if (a.dv <= 32) return args(attention_kernel<T, 1>);
  if (a.dv <= 64) return args(attention_kernel<T, 2>);
  return args(attention_kernel<T, 4>);
}

}  // namespace

cudaError_t attention_prepare() {
  static std::once_flag once;
  static cudaError_t err = cudaSuccess;
  std::call_once(once, [] {
    err = cudaFuncSetAttribute(attention_tc_kernel<__half>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               int(kTcSmemMax));
    if (err == cudaSuccess)
      err = cudaFuncSetAttribute(attention_tc_kernel<__nv_bfloat16>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 int(kTcSmemMax));
    if (err == cudaSuccess)
      err = cudaFuncSetAttribute(attention_short_kernel<__half>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 int(kShortSmemMax));
    if (err == cudaSuccess)
      err = cudaFuncSetAttribute(attention_short_kernel<__nv_bfloat16>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 int(kShortSmemMax));
  });
  return err;
}

cudaError_t attention(const AttentionArgs& a, ET et, const void* q, const void* k, const void* v, const void* mask,
                      void* out, cudaStream_t s) {
  if (a.d > kAttentionMaxDim || a.dv > kAttentionMaxDim || a.d < 1 || a.hkv < 1 || a.hq % a.hkv != 0)
    return cudaErrorInvalidValue;
  if (a.sk == 0) return cudaMemsetAsync(out, 0, size_t(a.b * a.hq * a.sq * a.dv) * (et == ET::F32 ? 4 : 2), s);
  switch (et) {
    case ET::F32: return attention_typed<float>(a, q, k, v, mask, out, s);
    case ET::F16: return attention_typed<__half>(a, q, k, v, mask, out, s);
    case ET::BF16: return attention_typed<__nv_bfloat16>(a, q, k, v, mask, out, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace rlx::cuda
