// SGEMM driver (packing, cache blocking, threading) and the blocked double-precision
// GEMM. Loop order: N blocks (nc) -> K blocks (kc, B block packed once, shared by all
// threads) -> M blocks (mc, A block packed per task) -> mr-row panels -> nr-column panels ->
// microkernel (block_tiles says why the row panels are the outer of the two).
#include "backends/cpu/kernels/gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <type_traits>

#include <xmmintrin.h>

#include "backends/cpu/kernels/row_kernels.h"
#include "backends/cpu/kernels/scratch.h"
#include "backends/cpu/thread_pool.h"

namespace rlx::cpu {
namespace {

// ---------------------------------------------------------------- scratch

thread_local Scratch<float> tl_pack_a, tl_pack_b, tl_widen, tl_gemv_parts;

// Runs f over [0, n) on the pool, or inline when there is no pool to use.
void run_range(ThreadPool* pool, int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f) {
  if (n <= 0) return;
  if (!pool || pool->size() <= 1 || n <= grain) {
    f(0, n);
    return;
  }
  pool->parallel_for(n, grain, f);
}

// ---------------------------------------------------------------- packing

template <class T>
inline float load_elem(const T* p, int64_t i);
template <>
inline float load_elem<float>(const float* p, int64_t i) { return p[i]; }
template <>
inline float load_elem<uint16_t>(const uint16_t* p, int64_t i) { return f16_to_f32(p[i]); }
struct Bf16 {
  uint16_t bits;
};
template <>
inline float load_elem<Bf16>(const Bf16* p, int64_t i) { return bf16_to_f32(p[i].bits); }

// Packs rows [i0, i0+m) x columns [k0, k0+kc) of A into mr-row panels, k-major:
// panel p holds a[k*mr + r] = A(i0 + p*mr + r, k0 + k). Rows past m are not written
// (the microkernel for a short panel never reads them).
template <class T>
void pack_a_typed(const GemmOperand& op, int64_t i0, int64_t m, int64_t k0, int64_t kc, int mr, float* dst) {
  const T* base = static_cast<const T*>(op.data);
  for (int64_t p = 0; p * mr < m; ++p) {
    const int64_t rows = std::min<int64_t>(mr, m - p * mr);
    float* d = dst + p * mr * kc;
    if (op.cs == 1) {
      for (int64_t r = 0; r < rows; ++r) {
        const T* src = base + (i0 + p * mr + r) * op.rs + k0;
        for (int64_t k = 0; k < kc; ++k) d[k * mr + r] = load_elem(src, k);
      }
    } else {
      for (int64_t k = 0; k < kc; ++k) {
        const T* src = base + (i0 + p * mr) * op.rs + (k0 + k) * op.cs;
        for (int64_t r = 0; r < rows; ++r) d[k * mr + r] = load_elem(src, r * op.rs);
      }
    }
  }
}

void pack_a(const IsaKernels& K, const GemmOperand& op, int64_t i0, int64_t m, int64_t k0, int64_t kc, int mr,
            float* dst) {
  if (op.dtype == DType::F32 && op.cs == 1) {
    const float* base = static_cast<const float*>(op.data);
    for (int64_t p = 0; p * mr < m; ++p)
      K.transpose_pack(base + (i0 + p * mr) * op.rs + k0, op.rs, std::min<int64_t>(mr, m - p * mr), kc, mr,
                       dst + p * mr * kc);
    return;
  }
  if (op.dtype == DType::F16 || op.dtype == DType::BF16) {
    // Widen with the ISA's converter, then pack as f32.
    const uint16_t* base = static_cast<const uint16_t*>(op.data);
    const bool bf16 = op.dtype == DType::BF16;
    if (op.cs == 1) {
      float* tmp = tl_widen.get(int64_t(mr) * kc);
      for (int64_t p = 0; p * mr < m; ++p) {
        const int64_t rows = std::min<int64_t>(mr, m - p * mr);
        for (int64_t r = 0; r < rows; ++r) K.widen(base + (i0 + p * mr + r) * op.rs + k0, tmp + r * kc, kc, bf16);
        K.transpose_pack(tmp, kc, rows, kc, mr, dst + p * mr * kc);
      }
      return;
    }
    if (op.rs == 1) {
      for (int64_t p = 0; p * mr < m; ++p) {
        const int64_t rows = std::min<int64_t>(mr, m - p * mr);
        for (int64_t k = 0; k < kc; ++k)
          K.widen(base + (i0 + p * mr) + (k0 + k) * op.cs, dst + p * mr * kc + k * mr, rows, bf16);
      }
      return;
    }
  }
  switch (op.dtype) {
    case DType::F16: return pack_a_typed<uint16_t>(op, i0, m, k0, kc, mr, dst);
    case DType::BF16: return pack_a_typed<Bf16>(op, i0, m, k0, kc, mr, dst);
    default: return pack_a_typed<float>(op, i0, m, k0, kc, mr, dst);
  }
}

// Packs rows [k0, k0+kc) x columns [j0, j0+n) of B as kc rows of `width` floats,
// zero-filling columns n..width-1.
template <class T>
void pack_b_typed(const GemmOperand& op, int64_t k0, int64_t kc, int64_t j0, int64_t n, int64_t width, float* dst) {
  const T* base = static_cast<const T*>(op.data);
  if (n < width)
    for (int64_t k = 0; k < kc; ++k) std::fill(dst + k * width + n, dst + (k + 1) * width, 0.0f);
  if (op.cs == 1) {
    for (int64_t k = 0; k < kc; ++k) {
      const T* src = base + (k0 + k) * op.rs + j0;
      float* d = dst + k * width;
      if constexpr (std::is_same_v<T, float>) {
        std::memcpy(d, src, size_t(n) * sizeof(float));
      } else {
        for (int64_t j = 0; j < n; ++j) d[j] = load_elem(src, j);
      }
    }
  } else if (op.rs == 1) {
    for (int64_t j = 0; j < n; ++j) {
      const T* src = base + (j0 + j) * op.cs + k0;
      for (int64_t k = 0; k < kc; ++k) dst[k * width + j] = load_elem(src, k);
    }
  } else {
    for (int64_t k = 0; k < kc; ++k)
      for (int64_t j = 0; j < n; ++j) dst[k * width + j] = load_elem(base, (k0 + k) * op.rs + (j0 + j) * op.cs);
  }
}

void pack_b(const IsaKernels& K, const SgemmProblem& p, int64_t k0, int64_t kc, int64_t j0, int64_t n, int64_t width,
            float* dst) {
  if (p.b.dtype == DType::F32 && p.b.rs == 1 && p.b.cs != 1)
    return K.transpose_pack(static_cast<const float*>(p.b.data) + j0 * p.b.cs + k0, p.b.cs, n, kc, width, dst);
  if (p.b.dtype == DType::F16 || p.b.dtype == DType::BF16) {
    const uint16_t* base = static_cast<const uint16_t*>(p.b.data);
    const bool bf16 = p.b.dtype == DType::BF16;
    if (p.b.cs == 1) {
      for (int64_t k = 0; k < kc; ++k) {
        K.widen(base + (k0 + k) * p.b.rs + j0, dst + k * width, n, bf16);
        std::fill(dst + k * width + n, dst + (k + 1) * width, 0.0f);
      }
      return;
    }
    if (p.b.rs == 1) {
      float* tmp = tl_widen.get(width * kc);
      for (int64_t j = 0; j < n; ++j) K.widen(base + (j0 + j) * p.b.cs + k0, tmp + j * kc, kc, bf16);
      return K.transpose_pack(tmp, kc, n, kc, width, dst);
    }
  }
  switch (p.b.dtype) {
    case DType::F16: return pack_b_typed<uint16_t>(p.b, k0, kc, j0, n, width, dst);
    case DType::BF16: return pack_b_typed<Bf16>(p.b, k0, kc, j0, n, width, dst);
    default: return pack_b_typed<float>(p.b, k0, kc, j0, n, width, dst);
  }
}

// Fixed-width copy with baseline SSE moves; GCC must not turn it into a memmove call.
template <int W>
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-loop-distribute-patterns")))
#endif
inline void copy_fixed(const float* __restrict src, float* __restrict dst) {
  for (int j = 0; j < W; j += 4) _mm_storeu_ps(dst + j, _mm_loadu_ps(src + j));
}

// Packs panels of nr columns covering columns [j0, j0+n) (panel q at dst + q*nr*kc).
// For a row-major f32 B it walks each row once across all panels, so B is read as long
// contiguous runs rather than nr-wide strips at a large stride.
void pack_b_panels(const IsaKernels& K, const SgemmProblem& p, int64_t k0, int64_t kc, int64_t j0, int64_t n, int nr,
                   float* dst) {
  const int64_t panels = (n + nr - 1) / nr;
  if (p.pack_b) return p.pack_b(p.pack_b_ctx, k0, kc, j0, n, nr, dst);
  if (p.b.dtype != DType::F32 || p.b.cs != 1) {
    for (int64_t q = 0; q < panels; ++q)
      pack_b(K, p, k0, kc, j0 + q * nr, std::min<int64_t>(nr, n - q * nr), nr, dst + q * nr * kc);
    return;
  }
  const float* base = static_cast<const float*>(p.b.data);
  const int64_t full = n / nr, rest = n - full * nr;
  for (int64_t k = 0; k < kc; ++k) {
    const float* src = base + (k0 + k) * p.b.rs + j0;
    if (k + 4 < kc)  // each row segment is its own page: fetch a few rows ahead
      for (int64_t j = 0; j < n; j += 16) _mm_prefetch(reinterpret_cast<const char*>(src + 4 * p.b.rs + j), _MM_HINT_T0);
    // Fixed-width copies (inlined, vectorized) instead of many short memcpy calls.
    if (nr == 32) {
      for (int64_t q = 0; q < full; ++q) copy_fixed<32>(src + q * nr, dst + (q * kc + k) * nr);
    } else if (nr == 16) {
      for (int64_t q = 0; q < full; ++q) copy_fixed<16>(src + q * nr, dst + (q * kc + k) * nr);
    } else {
      for (int64_t q = 0; q < full; ++q) std::memcpy(dst + (q * kc + k) * nr, src + q * nr, size_t(nr) * sizeof(float));
    }
    if (rest) {
      float* d = dst + (full * kc + k) * nr;
      std::memcpy(d, src + full * nr, size_t(rest) * sizeof(float));
      std::fill(d + rest, d + nr, 0.0f);
    }
  }
}

// ---------------------------------------------------------------- tile helpers

// Runs ukr on an m x ncols tile; short tiles go through a temporary so the microkernel
// always writes full columns (nr, or nr/2 through the half kernel when ncols <= nr/2: the
// full kernel's arithmetic on the left half, without the right half's products), with the
// same arithmetic as a full tile.
// `tile(dst, ld, accumulate, half)` computes a full rows x nr tile (or its left half).
template <class Tile>
inline void full_or_short_tile(const IsaKernels& K, int64_t rows, int64_t ncols, float* c, int64_t ldc, bool accumulate,
                               bool has_half, Tile&& tile) {
  if (ncols == K.nr) return tile(c, ldc, accumulate, false);
  const int64_t half = K.nr / 2;
  const bool use_half = has_half && ncols <= half;
  if (use_half && ncols == half) return tile(c, ldc, accumulate, true);
  alignas(64) float tmp[16 * 64];
  tile(tmp, int64_t(K.nr), false, use_half);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < ncols; ++j)
      c[i * ldc + j] = accumulate ? c[i * ldc + j] + tmp[i * K.nr + j] : tmp[i * K.nr + j];
}

// stream: B is pre-packed (the ukr_*_stream kernels where the ISA has them).
inline void compute_tile(const IsaKernels& K, int64_t rows, int64_t ncols, int64_t kc, const float* a,
                         const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate, bool stream = false) {
  if (ncols <= 8 && K.ukr_cols[ncols]) return K.ukr_cols[ncols](kc, a, b, ldb, c, ldc, accumulate, rows);
  const GemmMicroKernel full = stream && K.ukr_stream[rows] ? K.ukr_stream[rows] : K.ukr[rows];
  const GemmMicroKernel half = stream && K.ukr_half_stream[rows] ? K.ukr_half_stream[rows] : K.ukr_half[rows];
  full_or_short_tile(K, rows, ncols, c, ldc, accumulate, half != nullptr,
                     [&](float* d, int64_t ld, bool acc, bool use_half) {
                       (use_half ? half : full)(kc, a, b, ldb, d, ld, acc);
                     });
}

// A finished tile of C (rows [i0, i0+m) x columns [j0, j0+n) at c) that the microkernel did
// not finish itself: the row epilogue through RowKernels::tile_epilogue (the steps ukr_epi takes
// in registers), then the caller's epilogue.
void finish_tile(const IsaKernels& K, const SgemmProblem& p, float* c, int64_t ldc, int64_t i0, int64_t j0, int64_t m,
                 int64_t n) {
  const GemmRowEpilogue& e = p.row_epilogue;
  if (e.any())
    K.rows->tile_epilogue(c, ldc, m, n, e.bias ? e.bias + i0 : nullptr, e.res ? e.res + i0 * e.ldr + j0 : nullptr,
                          e.ldr, e.relu ? Activation::Relu : Activation::None, 0.0f);
  if (p.epilogue) p.epilogue(p.epilogue_ctx, c, ldc, i0, j0, m, n);
}

// The tiles of one K block of C rows [ic, ic + mc) and column panels [q0, q1): panel q's
// columns start at j0 + q * nr (clipped to jend), its packed B at bp + q * nr * kc; row tile
// t (rows [t * mt, t * mt + mt), mt <= mr, mr by default) reads the mr-wide A panel at
// ap + t * mr * kc. The epilogue follows the last K block.
// Row panels outside, column panels inside by default: the A panel stays in L1 while B's panels stream
// past it (the microkernel prefetches them), and C (with an epilogue's residual) is walked as
// mr rows left to right, a dozen sequential streams. Panels outside had every tile touch mr
// new lines in each of the block's 144 rows: ResNet-50's K = 64 convolutions (3.2 MB outputs
// plus residuals) 0.81-0.92 -> 0.64-0.66 ms each, 1024^3 on one thread 152-188 -> 199-203
// GFLOP/s (alternated). Except where B is pre-packed (constant weights, streamed from memory on
// every run in a large model): there the column panels are outside, so that B is consumed at an
// even rate, a panel per mr-row sweep, which the hardware prefetcher keeps up with; rows outside
// asked for every panel of the block at once, then none (ResNet-50's layer 4 on two threads,
// its 7x7 products: 7.74 -> 7.14 ms). Each tile's arithmetic is unchanged: the same bits.
struct InPlaceB {
  const float* b = nullptr;  // panel q's rows at b + q * nr, row stride ld, for q < panels
  int64_t ld = 0, panels = 0;
};
void block_tiles(const IsaKernels& K, const SgemmProblem& p, int64_t ic, int64_t mc, int64_t j0, int64_t jend,
                 int64_t q0, int64_t q1, int64_t kc, const float* ap, const float* bp, bool acc, bool last,
                 InPlaceB bin = {}, int64_t mt = 0) {
  const int mr = K.mr, nr = K.nr;
  if (mt == 0) mt = mr;  // rows per tile; row tile t's A panel at ap + t * mr * kc
  const bool q_outer = p.b_packed != nullptr;
  const int64_t nir = (mc + mt - 1) / mt, nq = q1 - q0;
  for (int64_t t = 0; t < nir * nq; ++t) {
    const int64_t it = q_outer ? t % nir : t / nq, q = q0 + (q_outer ? t / nir : t % nq);
    const int64_t ir = it * mt, rows = std::min<int64_t>(mt, mc - ir);
    const float* at = ap + it * mr * kc;
    const int64_t j = j0 + q * nr, ncols = std::min<int64_t>(nr, jend - j);
    float* cp = p.c + (ic + ir) * p.ldc + j;
    const bool in = q < bin.panels;
    const float* b = in ? bin.b + q * nr : bp + q * nr * kc;
    const int64_t ldb = in ? bin.ld : nr;
    if (last && ncols == nr && p.row_epilogue.any() && K.ukr_epi[rows]) {  // the epilogue in registers
      GemmRowEpilogue e = p.row_epilogue;
      if (e.bias) e.bias += ic + ir;
      if (e.res) e.res += (ic + ir) * e.ldr + j;
      (q_outer && !in && K.ukr_epi_stream[rows] ? K.ukr_epi_stream[rows] : K.ukr_epi[rows])(kc, at, b, ldb, cp, p.ldc,
                                                                                          acc, e);
      if (p.epilogue) p.epilogue(p.epilogue_ctx, cp, p.ldc, ic + ir, j, rows, ncols);
      continue;
    }
    compute_tile(K, rows, ncols, kc, at, b, ldb, cp, p.ldc, acc, q_outer && !in);
    if (last) finish_tile(K, p, cp, p.ldc, ic + ir, j, rows, ncols);
  }
}

// A row-major f32 B is read where it lies (its full panels: rows of nr floats at its own row
// stride) instead of being copied into panels first: with the row panels outside, a packed
// panel is streamed from L2 for every tile anyway, so the copy only added a pass over B (a
// pointwise conv's whole input). Not where the row stride is a multiple of 2 KB or more: the
// kc rows of a panel would then share a sixteenth of the L2's sets or less and evict each other
// (1024^3: 223 -> 181 GFLOP/s read in place). Same values, same microkernel: the same bits.
bool b_in_place(const SgemmProblem& p) {
  if (p.b.dtype != DType::F32 || p.b.cs != 1 || p.pack_b || p.b_packed) return false;
  const int64_t bytes = p.b.rs * int64_t(sizeof(float));
  return bytes > 0 && (bytes & -bytes) <= 1024;  // the largest power of two dividing the stride
}

// Stages columns [j0, j0+n) of K block [pc, pc+kc) of a B that b_in_place takes: the full
// panels are read in place (the result), a last partial panel is packed at its slot of buf
// (panel q at buf + q * nr * kc), where block_tiles finds it.
InPlaceB stage_b_in_place(const IsaKernels& K, const SgemmProblem& p, int64_t pc, int64_t kc, int64_t j0, int64_t n,
                          float* buf) {
  const int nr = K.nr;
  const InPlaceB bin{static_cast<const float*>(p.b.data) + pc * p.b.rs + j0, p.b.rs, n / nr};
  if (bin.panels * nr < n)
    pack_b_panels(K, p, pc, kc, j0 + bin.panels * nr, n - bin.panels * nr, nr, buf + bin.panels * nr * kc);
  return bin;
}

void zero_and_finish(const IsaKernels& K, const SgemmProblem& p) {
  for (int64_t i = 0; i < p.m; ++i)
    if (!p.accumulate) std::fill(p.c + i * p.ldc, p.c + i * p.ldc + p.n, 0.0f);
  finish_tile(K, p, p.c, p.ldc, 0, 0, p.m, p.n);
}

// ---------------------------------------------------------------- paths

// Small M (or small N), K-contiguous f32 operands (e.g. x @ W^T while decoding, or a
// matrix-vector product): dot products along K, no packing. Parallel over groups of
// four columns (rows when N is the small side).
void sgemm_dot(const SgemmProblem& p, ThreadPool* pool, const IsaKernels& K) {
  const float* a = static_cast<const float*>(p.a.data);
  const float* b = static_cast<const float*>(p.b.data);
  if (p.m <= 4) {
    const int64_t groups = (p.n + 3) / 4;
    run_range(pool, groups, 16, [&](int64_t g0, int64_t g1) {
      for (int64_t g = g0; g < g1; ++g) {
        const int64_t j = g * 4, cols = std::min<int64_t>(4, p.n - j);
        K.dot(p.m, cols, p.k, a, p.a.rs, b + j * p.b.cs, p.b.cs, p.c + j, p.ldc, 1, p.accumulate);
      }
      const int64_t j0 = g0 * 4, j1 = std::min(p.n, g1 * 4);
      finish_tile(K, p, p.c + j0, p.ldc, 0, j0, p.m, j1 - j0);
    });
    return;
  }
  // N <= 4: the roles swap (B columns are the short side), C is written transposed.
  const int64_t groups = (p.m + 3) / 4;
  run_range(pool, groups, 16, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t i = g * 4, rows = std::min<int64_t>(4, p.m - i);
      K.dot(p.n, rows, p.k, b, p.b.cs, a + i * p.a.rs, p.a.rs, p.c + i * p.ldc, 1, p.ldc, p.accumulate);
    }
    const int64_t i0 = g0 * 4, i1 = std::min(p.m, g1 * 4);
    finish_tile(K, p, p.c + i0 * p.ldc, p.ldc, i0, 0, i1 - i0, p.n);
  });
}

// One K block's sums of w columns (row i at s + i * lds) stored into C's rows at c, or added
// to them (`add`): C is built one K block at a time, in K order.
void add_block_sums(const SgemmProblem& p, float* c, const float* s, int64_t lds, int64_t w, bool add) {
  for (int64_t i = 0; i < p.m; ++i) {
    float* ci = c + i * p.ldc;
    const float* si = s + i * lds;
    if (add)
      for (int64_t j = 0; j < w; ++j) ci[j] = ci[j] + si[j];
    else
      std::memcpy(ci, si, size_t(w) * sizeof(float));
  }
}

// M <= 4 with a row-major f32 B: stream B rows through the gemv kernel, parallel over
// column chunks. Per kc block the kernel sums into an L1-resident buffer that is then
// stored or added to C: the same arithmetic as the packed path.
void sgemm_gemv(const SgemmProblem& p, ThreadPool* pool, const IsaKernels& K) {
  const float* a = static_cast<const float*>(p.a.data);
  const float* b = static_cast<const float*>(p.b.data);
  const int64_t threads = pool ? pool->size() : 1;
  // Wide chunks keep B reads long and sequential (one chunk per thread when N allows);
  // the accumulator (m x chunk floats) stays within 16 KiB of L1.
  const int64_t chunk = std::clamp<int64_t>(((p.n + threads - 1) / threads + 15) / 16 * 16, 64, 4096 / p.m);
  const int64_t chunks = (p.n + chunk - 1) / chunk;
  const int64_t kblocks = (p.k + K.kc - 1) / K.kc;
  if (threads > 1 && p.n < threads * 1024 && kblocks >= threads) {
    // Rows of B under 4 KiB a thread (ResNet-50's fc: 1000 columns): split by columns, each
    // thread read half of every row, short runs that its prefetchers lost at each page, and
    // two threads streamed barely faster than one (8 MB from memory: 0.23 ms one thread,
    // 0.19-0.21 two). Instead each task takes whole K blocks (a contiguous run of B's rows),
    // whole rows a pass where the accumulator allows (not the column path's chunk, half a row
    // here), into partial sums of its own, which are then added to C block by block in K order,
    // as the loop below adds its per-block sums: the same bits. The fc on two threads, in the
    // model: 0.224 -> 0.168-0.174 ms (alternated).
    const int64_t row_chunk = std::min(4096 / p.m, (p.n + 15) / 16 * 16);
    float* parts = tl_gemv_parts.get(kblocks * p.m * p.n);
    run_range(pool, kblocks, 1, [&](int64_t b0, int64_t b1) {
      float* acc = tl_pack_b.get(4 * row_chunk);
      for (int64_t kb = b0; kb < b1; ++kb) {
        const int64_t pc = kb * K.kc, kc = std::min(K.kc, p.k - pc);
        for (int64_t j0 = 0; j0 < p.n; j0 += row_chunk) {
          const int64_t w = std::min(row_chunk, p.n - j0);
          K.gemv(p.m, w, kc, a + pc * p.a.cs, p.a.rs, p.a.cs, b + pc * p.b.rs + j0, p.b.rs, acc);
          for (int64_t i = 0; i < p.m; ++i)
            std::memcpy(parts + (kb * p.m + i) * p.n + j0, acc + i * w, size_t(w) * sizeof(float));
        }
      }
    });
    for (int64_t kb = 0; kb < kblocks; ++kb)
      add_block_sums(p, p.c, parts + kb * p.m * p.n, p.n, p.n, p.accumulate || kb > 0);
    finish_tile(K, p, p.c, p.ldc, 0, 0, p.m, p.n);
    return;
  }
  run_range(pool, chunks, 1, [&](int64_t c0, int64_t c1) {
    float* acc = tl_pack_b.get(4 * chunk);
    for (int64_t ch = c0; ch < c1; ++ch) {
      const int64_t j0 = ch * chunk, w = std::min(chunk, p.n - j0);
      for (int64_t pc = 0; pc < p.k; pc += K.kc) {
        const int64_t kc = std::min(K.kc, p.k - pc);
        K.gemv(p.m, w, kc, a + pc * p.a.cs, p.a.rs, p.a.cs, b + pc * p.b.rs + j0, p.b.rs, acc);
        add_block_sums(p, p.c + j0, acc, w, w, p.accumulate || pc > 0);
      }
      finish_tile(K, p, p.c + j0, p.ldc, 0, j0, p.m, w);
    }
  });
}

// One M block (m <= mc): A is packed once (all of K) and shared; each task packs its own
// strip of B panels and computes the whole column strip, so no thread waits for a
// shared B block and small-M products read B only once.
void sgemm_strips(const SgemmProblem& p, ThreadPool* pool, const IsaKernels& K) {
  const int mr = K.mr, nr = K.nr;
  const int64_t kc_max = K.kc;
  const int64_t mpanels = (p.m + mr - 1) / mr, mpad = mpanels * mr;
  // Row tiles of equal height when A is packed here: 49 rows (ResNet-50's transposed 7x7
  // layers) as 10 + 10 + 10 + 10 + 9 instead of 4 x 12 + 1, whose one-row tile is a chain of
  // dependent FMAs at a quarter of the pipes' rate (a pre-packed A: the heights its packer
  // chose). Tile t's rows are panel t (mr wide, mt filled); every row's sum is the same FMAs in
  // the same order: the same bits.
  const int64_t mt = p.a_packed ? (p.a_panel_rows > 0 ? std::min<int64_t>(p.a_panel_rows, mr) : mr)
                                : (p.m + mpanels - 1) / mpanels;
  const float* ap = p.a_packed;
  if (!ap) {
    // The whole of A packed once (every strip reads all of it), in (K block, row chunk)
    // pieces spread over the pool when it is big enough to be worth a fork: a serial
    // pack of a 128 x 3072 activation took 5-8 % of the product's time on two threads.
    float* buf = tl_pack_a.get(mpad * p.k);
    const int64_t kblocks = (p.k + kc_max - 1) / kc_max;
    const int64_t chunks = pool && pool->size() > 1 && p.m * p.k >= 65536 ? std::min<int64_t>(mpanels, 4) : 1;
    run_range(pool, kblocks * chunks, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t pc = (t / chunks) * kc_max, kc = std::min(kc_max, p.k - pc), q = t % chunks;
        for (int64_t it = q * mpanels / chunks; it < (q + 1) * mpanels / chunks; ++it)
          if (it * mt < p.m)
            pack_a(K, p.a, it * mt, std::min(mt, p.m - it * mt), pc, kc, mr, buf + pc * mpad + it * mr * kc);
      }
    });
    ap = buf;
  }
  const int64_t panels = (p.n + nr - 1) / nr;
  const int64_t threads = pool ? pool->size() : 1;
  // Strips of a few panels each (a few per thread, each packing its own B); over a pre-packed
  // B (weights) nothing is packed per strip, and every strip walks all of A once per K block
  // (7x7 maps: 60 rows x K), so one strip per thread: ResNet-50's layer 4 8.69 -> 8.37 ms in
  // kernels on one thread, 5.50 -> 5.40 on two (its Winograd products too); BERT-base, PP-OCRv4
  // det and rec within the noise.
  const int64_t strip = p.b_packed ? (panels + threads - 1) / threads
                                   : std::clamp<int64_t>(panels / (4 * threads), 1, 16);
  const int64_t strips = (panels + strip - 1) / strip;
  run_range(pool, strips, 1, [&](int64_t s0, int64_t s1) {
    for (int64_t st = s0; st < s1; ++st) {
      const int64_t j0 = st * strip * nr, w = std::min(strip * nr, p.n - j0);
      const int64_t np = (w + nr - 1) / nr;
      float* buf = p.b_packed ? nullptr : tl_pack_b.get(np * nr * std::min(kc_max, p.k));
      for (int64_t pc = 0; pc < p.k; pc += kc_max) {
        const int64_t kc = std::min(kc_max, p.k - pc);
        const bool acc = p.accumulate || pc > 0;
        const bool last = pc + kc == p.k;
        const float* bp = buf;
        InPlaceB bin;
        if (p.b_packed) {
          bp = p.b_packed + pc * panels * nr + j0 * kc;
        } else if (b_in_place(p)) {
          bin = stage_b_in_place(K, p, pc, kc, j0, w, buf);
        } else {
          pack_b_panels(K, p, pc, kc, j0, w, nr, buf);
        }
        block_tiles(K, p, 0, p.m, j0, p.n, 0, np, kc, ap + pc * mpad, bp, acc, last, bin, mt);
      }
    }
  });
}

// B's K block [pc, pc + kc) over columns [jc, jc + nc) for block_tiles: a pre-packed B in
// place, a B that b_in_place takes read where it lies (bin), else packed into the calling
// thread's buffer, its panels spread over `pool` (nullable: packed here).
const float* b_block(const IsaKernels& K, const SgemmProblem& p, int64_t pc, int64_t kc, int64_t jc, int64_t nc,
                     int64_t npad, ThreadPool* pool, InPlaceB& bin) {
  const int nr = K.nr;
  if (p.b_packed) return p.b_packed + pc * npad + jc * kc;
  const int64_t panels = (nc + nr - 1) / nr;
  float* buf = tl_pack_b.get(panels * nr * kc);
  if (b_in_place(p)) {
    bin = stage_b_in_place(K, p, pc, kc, jc, nc, buf);
    return buf;
  }
  run_range(pool, panels, 8, [&](int64_t q0, int64_t q1) {
    pack_b_panels(K, p, pc, kc, jc + q0 * nr, std::min(nc, q1 * nr) - q0 * nr, nr, buf + q0 * nr * kc);
  });
  return buf;
}

void sgemm_packed(const SgemmProblem& p, ThreadPool* pool, const IsaKernels& K) {
  const int mr = K.mr, nr = K.nr;
  const int64_t threads = pool ? pool->size() : 1;
  const int64_t kc_max = K.kc, nc_max = K.nc;
  // M blocks of (about) equal height, as many as the largest block allows rounded up to a
  // multiple of the thread count: 1024 rows at mc 144 were 7 full blocks and one of 16,
  // which left one of two threads a block short. Only the row partition changes: every
  // element's sum over K is the same for any thread count.
  int64_t mc_max = K.mc;
  if (threads > 1) {
    const int64_t nb = (p.m + K.mc - 1) / K.mc, balanced = (nb + threads - 1) / threads * threads;
    mc_max = std::min<int64_t>(K.mc, ((p.m + balanced - 1) / balanced + mr - 1) / mr * mr);
  }
  const int64_t mblocks = (p.m + mc_max - 1) / mc_max;
  const int64_t mpad = (p.m + mr - 1) / mr * mr, npad = (p.n + nr - 1) / nr * nr;
  // Few columns and many K blocks (the late convolutions: 7x7 or 14x14 outputs over
  // thousands of K): the loop below would fork and join twice per K block for tasks of a
  // few microseconds. Instead one task per thread takes a contiguous run of M blocks
  // through every K block. A B that is a plain matrix each task packs itself, block by
  // block (a copy, and the block stays in the task's cache); a B that pack_b produces (a
  // convolution's im2col) is packed once, all of it first, its K blocks spread over the
  // pool: each task producing the whole im2col itself made it a third of a stride-2 3x3
  // conv's time at 14x14, on every thread. Same tiles, same K order: same bits.
  const int64_t all_panels = npad / nr;
  if (threads > 1 && p.n <= nc_max && all_panels <= 8 && p.k > kc_max && mblocks >= threads) {
    const float* bfull = p.b_packed;
    if (!bfull && p.pack_b) {
      // The caller's buffer, read by every task below (none of which packs B then).
      float* buf = tl_pack_b.get(p.k * npad);
      const int64_t kblocks = (p.k + kc_max - 1) / kc_max;
      run_range(pool, kblocks, 1, [&](int64_t k0, int64_t k1) {
        for (int64_t kb = k0; kb < k1; ++kb) {
          const int64_t pc = kb * kc_max;
          pack_b_panels(K, p, pc, std::min(kc_max, p.k - pc), 0, p.n, nr, buf + pc * npad);
        }
      });
      bfull = buf;
    }
    run_range(pool, threads, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t b0 = t * mblocks / threads, b1 = (t + 1) * mblocks / threads;
        float* bbuf = bfull ? nullptr : tl_pack_b.get(all_panels * nr * kc_max);
        float* abuf = p.a_packed ? nullptr : tl_pack_a.get(((mc_max + mr - 1) / mr) * mr * kc_max);
        for (int64_t pc = 0; pc < p.k; pc += kc_max) {
          const int64_t kc = std::min(kc_max, p.k - pc);
          const bool acc = p.accumulate || pc > 0, last = pc + kc == p.k;
          const float* bp = bfull ? bfull + pc * npad : bbuf;
          InPlaceB bin;
          if (!bfull && b_in_place(p)) {
            bin = stage_b_in_place(K, p, pc, kc, 0, p.n, bbuf);
          } else if (!bfull) {
            pack_b_panels(K, p, pc, kc, 0, p.n, nr, bbuf);
          }
          for (int64_t ib = b0; ib < b1; ++ib) {
            const int64_t ic = ib * mc_max, mc = std::min(mc_max, p.m - ic);
            const float* ap = p.a_packed ? p.a_packed + pc * mpad + ic * kc : abuf;
            if (!p.a_packed) pack_a(K, p.a, ic, mc, pc, kc, mr, abuf);
            block_tiles(K, p, ic, mc, 0, p.n, 0, all_panels, kc, ap, bp, acc, last, bin);
          }
        }
      }
    });
    return;
  }
  // A packed once (a convolution's weights) and many columns (its output positions): each
  // thread takes a contiguous range of columns through every K block and M block, one fork
  // for the product. Split by M blocks, each thread wrote half of every position's channels,
  // and the next layer, which splits its positions (the strips path, the Winograd blocks),
  // read half of its input from the other core's cache: on this VM 75-120 ns a round trip
  // between the two vCPUs, and 350-600 ns in the stretches where they sit apart (its "slow"
  // state: ResNet-50 two threads 16 -> 19 ms). ResNet-50, two threads, alternated: 16.02 ->
  // 15.93 ms (9 rounds), 18.81 -> 18.55 in the slow state (5 rounds). Same tiles, same K
  // order: the same bits.
  if (threads > 1 && p.a_packed && all_panels >= 4 * threads) {
    run_range(pool, threads, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t j0 = t * all_panels / threads * nr, j1 = std::min(p.n, (t + 1) * all_panels / threads * nr);
        for (int64_t jc = j0; jc < j1; jc += nc_max) {
          const int64_t nc = std::min(nc_max, j1 - jc);
          const int64_t panels = (nc + nr - 1) / nr;
          for (int64_t pc = 0; pc < p.k; pc += kc_max) {
            const int64_t kc = std::min(kc_max, p.k - pc);
            const bool acc = p.accumulate || pc > 0, last = pc + kc == p.k;
            InPlaceB bin;
            const float* bp = b_block(K, p, pc, kc, jc, nc, npad, nullptr, bin);
            for (int64_t ib = 0; ib < mblocks; ++ib) {
              const int64_t ic = ib * mc_max, mc = std::min(mc_max, p.m - ic);
              block_tiles(K, p, ic, mc, jc, jc + nc, 0, panels, kc, p.a_packed + pc * mpad + ic * kc, bp, acc, last,
                          bin);
            }
          }
        }
      }
    });
    return;
  }
  for (int64_t jc = 0; jc < p.n; jc += nc_max) {
    const int64_t nc = std::min(nc_max, p.n - jc);
    const int64_t panels = (nc + nr - 1) / nr;
    // Split the panels of this block so that there are a few tasks per thread, unless the M
    // blocks (of equal height) already divide evenly among the threads: then one task per M
    // block, whose thread packs its A block once. Split, the tasks of one block went to every
    // thread in turn and each packed it (a sixth of 256^3 on two threads; 256^3 344-362 -> 375-442
    // GFLOP/s, 512^3 316-343 -> 363-381, alternated).
    const int64_t want = threads > 1 ? 4 * threads : 1;
    const int64_t ngroups =
        mblocks % threads == 0 ? 1 : std::clamp<int64_t>((want + mblocks - 1) / mblocks, 1, panels);
    for (int64_t pc = 0; pc < p.k; pc += kc_max) {
      const int64_t kc = std::min(kc_max, p.k - pc);
      const bool acc = p.accumulate || pc > 0;
      const bool last = pc + kc == p.k;
      InPlaceB bin;
      const float* bp = b_block(K, p, pc, kc, jc, nc, npad, pool, bin);
      run_range(pool, mblocks * ngroups, 1, [&](int64_t t0, int64_t t1) {
        float* buf = p.a_packed ? nullptr : tl_pack_a.get(((mc_max + mr - 1) / mr) * mr * kc);
        const float* ap = buf;
        int64_t packed = -1;
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t ib = t / ngroups, g = t % ngroups;
          const int64_t ic = ib * mc_max, mc = std::min(mc_max, p.m - ic);
          if (p.a_packed) {
            ap = p.a_packed + pc * mpad + ic * kc;
          } else if (ib != packed) {
            pack_a(K, p.a, ic, mc, pc, kc, mr, buf);
            packed = ib;
          }
          block_tiles(K, p, ic, mc, jc, jc + nc, g * panels / ngroups, (g + 1) * panels / ngroups, kc, ap, bp, acc,
                      last, bin);
        }
      });
    }
  }
}

}  // namespace

// ---------------------------------------------------------------- public entry points

void gemm_tile_off(const IsaKernels& K, int64_t rows, int64_t ncols, int64_t kc, const float* a, const float* b,
                   const int64_t* off, float* c, int64_t ldc, bool accumulate) {
  full_or_short_tile(K, rows, ncols, c, ldc, accumulate, K.ukr_off_half[rows] != nullptr,
                     [&](float* d, int64_t ld, bool acc, bool half) {
                       (half ? K.ukr_off_half[rows] : K.ukr_off[rows])(kc, a, b, off, d, ld, acc);
                     });
}

const IsaKernels& isa_kernels(Isa isa) {
  static const IsaKernels& scalar = *scalar_kernels();
  if (isa == Isa::Avx512)
    if (const IsaKernels* t = avx512_kernels()) return *t;
  if (isa == Isa::Avx512 || isa == Isa::Avx2)
    if (const IsaKernels* t = avx2_kernels()) return *t;
  return scalar;
}

int64_t packed_a_floats(const IsaKernels& K, int64_t m, int64_t k) { return (m + K.mr - 1) / K.mr * K.mr * k; }
int64_t packed_b_floats(const IsaKernels& K, int64_t k, int64_t n) { return (n + K.nr - 1) / K.nr * K.nr * k; }

void pack_a_full(const IsaKernels& K, const GemmOperand& a, int64_t m, int64_t k, float* dst) {
  const int64_t mpad = (m + K.mr - 1) / K.mr * K.mr;
  for (int64_t pc = 0; pc < k; pc += K.kc) pack_a(K, a, 0, m, pc, std::min(K.kc, k - pc), K.mr, dst + pc * mpad);
}

void pack_b_full(const IsaKernels& K, const GemmOperand& b, int64_t k, int64_t n, float* dst) {
  SgemmProblem p;
  p.b = b;
  const int64_t npad = (n + K.nr - 1) / K.nr * K.nr;
  for (int64_t pc = 0; pc < k; pc += K.kc) pack_b_panels(K, p, pc, std::min(K.kc, k - pc), 0, n, K.nr, dst + pc * npad);
}

void sgemm(const SgemmProblem& p, ThreadPool* pool, const IsaKernels& K) {
  if (p.m <= 0 || p.n <= 0) return;
  if (p.k <= 0) return zero_and_finish(K, p);
  // Tiny problems are not worth waking the pool (results do not depend on it).
  if (double(p.m) * double(p.n) * double(p.k) < 64.0 * 64.0 * 64.0) pool = nullptr;
  const bool f32_ops = p.a.dtype == DType::F32 && p.b.dtype == DType::F32 && !p.pack_b && !p.a_packed && !p.b_packed;
  if (f32_ops && (p.m <= 4 || p.n <= 4) && p.a.cs == 1 && p.b.rs == 1) return sgemm_dot(p, pool, K);
  if (f32_ops && p.m <= 4 && p.b.cs == 1) return sgemm_gemv(p, pool, K);
  if (p.m <= K.mc) return sgemm_strips(p, pool, K);
  sgemm_packed(p, pool, K);
}

void dgemm(const DgemmProblem& p, ThreadPool* pool) {
  if (p.m <= 0 || p.n <= 0) return;
  constexpr int64_t kRowBlock = 8, kKBlock = 128;
  const int64_t blocks = (p.m + kRowBlock - 1) / kRowBlock;
  if (double(p.m) * double(p.n) * double(p.k) < 32.0 * 32.0 * 32.0) pool = nullptr;
  run_range(pool, blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t i0 = blk * kRowBlock, i1 = std::min(p.m, i0 + kRowBlock);
      if (p.rsb == 1 && p.csa == 1) {
        // K-contiguous B columns: one dot product per element.
        for (int64_t i = i0; i < i1; ++i)
          for (int64_t j = 0; j < p.n; ++j) {
            const double* ai = p.a + i * p.rsa;
            const double* bj = p.b + j * p.csb;
            double s = 0;
            for (int64_t k = 0; k < p.k; ++k) s += ai[k] * bj[k];
            double& cij = p.c[i * p.ldc + j];
            cij = p.accumulate ? cij + s : s;
          }
        continue;
      }
      if (!p.accumulate)
        for (int64_t i = i0; i < i1; ++i) std::fill(p.c + i * p.ldc, p.c + i * p.ldc + p.n, 0.0);
      // Each element still sums over k in order; the k blocks only keep B rows hot
      // across the rows of this block.
      for (int64_t k0 = 0; k0 < p.k; k0 += kKBlock)
        for (int64_t i = i0; i < i1; ++i) {
          double* ci = p.c + i * p.ldc;
          for (int64_t k = k0; k < std::min(p.k, k0 + kKBlock); ++k) {
            const double aik = p.a[i * p.rsa + k * p.csa];
            const double* bk = p.b + k * p.rsb;
            if (p.csb == 1)
              for (int64_t j = 0; j < p.n; ++j) ci[j] += aik * bk[j];
            else
              for (int64_t j = 0; j < p.n; ++j) ci[j] += aik * bk[j * p.csb];
          }
        }
    }
  });
}

}  // namespace rlx::cpu
