// Packed, cache-blocked single-precision GEMM (and double-precision for f64), with the ISA's
// microkernel, dot, GEMV, packing and widening chosen when a kernel call is built. The row
// helpers other kernels share (activations, exp-sum, row max, conv row) are row_kernels.h.
//
// Contract:
// - sgemm computes C = A*B (or C += A*B) for any element strides of A and B, so
//   transposed operands need no copy. A and B may be F32, F16 or BF16 (converted to F32
//   while packing); C is F32 with a row stride (ldc) and unit column stride.
// - Work is split over M/N blocks on the pool; K is never split across threads, and an
//   element's arithmetic does not depend on the tile it falls in, so results are
//   bit-identical for any thread count (and for pool == nullptr, which runs serially).
// - The optional epilogue runs once per finished tile of C, on the thread that computed
//   it, right after the tile's last K block, while the tile is still in cache.
// - Scratch (packing buffers) is thread-local and grows once; sgemm never throws on
//   valid sizes. Calls from inside a pool task run serially on that thread.
#pragma once
#include <cstdint>
#include <utility>

#include "backends/cpu/isa.h"
#include "rlx/attrs.h"
#include "rlx/dtype.h"

namespace rlx::cpu {

struct RowKernels;  // row_kernels.h

class ThreadPool;

// Element (i, j) of a matrix operand lives at data[i*rs + j*cs] (element units).
struct GemmOperand {
  const void* data = nullptr;
  DType dtype = DType::F32;  // F32, F16 or BF16
  int64_t rs = 0, cs = 1;
};

// Writes rows [k0, k0+kc) x columns [j0, j0+n) of a virtual B operand into dst as
// ceil(n/width) panels of `width` columns: panel q at dst + q*width*kc holds kc rows of
// `width` floats; columns past n in the last panel must be zero. Called concurrently
// from several threads: must be pure.
using GemmPackB = void (*)(const void* ctx, int64_t k0, int64_t kc, int64_t j0, int64_t n,
                           int64_t width, float* dst);

// Called on a finished tile: rows [i0, i0+m) x columns [j0, j0+n) of C at c (already
// offset to element (i0, j0)), row stride ldc.
using GemmTileFn = void (*)(const void* ctx, float* c, int64_t ldc, int64_t i0, int64_t j0,
                            int64_t m, int64_t n);

// An epilogue the driver applies to each finished tile of C in the microkernel's registers
// (instead of a GemmTileFn pass over the stored tile): per element (i, j) of C, in this order,
// v = the product (plus C when accumulating); v = v + bias[i]; v = v + res[i * ldr + j];
// v = max(0, v) (ReLU, NaN and -0 passed through, as RowKernels' ReLU) — the steps of
// RowKernels::tile_epilogue, so the same bits. Each part is optional (null / false).
struct GemmRowEpilogue {
  const float* bias = nullptr;  // one value per row of C
  const float* res = nullptr;   // an addend laid out like C, row stride ldr
  int64_t ldr = 0;
  bool relu = false;
  bool any() const { return bias || res || relu; }
};

struct SgemmProblem {
  int64_t m = 0, n = 0, k = 0;
  GemmOperand a, b;
  GemmPackB pack_b = nullptr;  // when set, B is produced by pack_b(pack_b_ctx, ...)
  const void* pack_b_ctx = nullptr;
  float* c = nullptr;
  int64_t ldc = 0;
  bool accumulate = false;  // true: C += A*B; false: C = A*B
  GemmTileFn epilogue = nullptr;
  const void* epilogue_ctx = nullptr;
  // Applied in registers where a tile is full width (a scalar pass with the same steps on
  // the others), after the last K block; runs before `epilogue` when both are set.
  GemmRowEpilogue row_epilogue;
  // Operands already packed by pack_a_full / pack_b_full (same kernels, m/n/k); when
  // set they replace a / b / pack_b, so an operand reused by many products is packed once.
  const float* a_packed = nullptr;
  const float* b_packed = nullptr;
  // With a_packed and m <= mc: the rows each mr-wide panel holds (panel t: rows [t * a_panel_rows,
  // ...)), at most mr, such that there are still ceil(m / mr) panels; 0 means mr. Equal-height
  // panels (49 rows as 10 + 10 + 10 + 10 + 9) keep a one-row tile, a chain of dependent FMAs,
  // out of the product.
  int64_t a_panel_rows = 0;
};

// Per-ISA kernels. Microkernel ukr[m] (1 <= m <= mr) computes an m x nr tile:
// acc = sum over kc of a[k*mr + i] * b[k*ldb + j] (A packed k-major with stride mr,
// B rows of nr floats at stride ldb), then c = acc, or c += acc when accumulate.
using GemmMicroKernel = void (*)(int64_t kc, const float* a, const float* b, int64_t ldb, float* c,
                                 int64_t ldc, bool accumulate);
// The microkernel with the row epilogue applied to the tile before it is stored (e already
// offset to the tile: bias to its first row, res to its first element); otherwise as
// GemmMicroKernel, the same arithmetic.
using GemmEpiKernel = void (*)(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc,
                               bool accumulate, const GemmRowEpilogue& e);
// The microkernel with B rows read in place: B row k at b + off[k] (nr floats, unaligned);
// otherwise as GemmMicroKernel, with the same arithmetic (the same bits for the same values).
using GemmOffsetKernel = void (*)(int64_t kc, const float* a, const float* b, const int64_t* off, float* c,
                                  int64_t ldc, bool accumulate);
// The offset kernel with the row epilogue applied in registers before the store (as
// GemmEpiKernel to GemmMicroKernel): a convolution's input rows read in place, bias, residual
// and ReLU of its last K block.
using GemmOffsetEpiKernel = void (*)(int64_t kc, const float* a, const float* b, const int64_t* off, float* c,
                                     int64_t ldc, bool accumulate, const GemmRowEpilogue& e);
// A tile whose A rows are read in place: for i < rows (the table's index) and j < nr,
// c[i*ldc + j] (=|+=) sum over k < kc of a[aoff[k] + i] * b[k*nr + j] (b a pre-packed panel), the
// microkernel's arithmetic (see gemm_vec.h's ukr_arows_vec).
using GemmARowsKernel = void (*)(int64_t kc, const float* a, const int64_t* aoff, const float* b, float* c,
                                 int64_t ldc, bool accumulate);
// A tile's last few columns (at most 8) with the rows as the vector: for i < rows, j < ncols
// (the table's index), c[i*ldc + j] (=|+=) the same sum as the microkernel's, from the same
// packed A panel and B rows (b + k*ldb).
using GemmColsKernel = void (*)(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc,
                                bool accumulate, int64_t rows);
// Dot-product kernel for small M with K-contiguous operands: for i < m (m <= 4) and
// j < n (n <= 4): c[i*rsc + j*csc] (=|+=) sum_k a[i*lda + k] * b[j*ldb + k].
using GemmDotKernel = void (*)(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                               const float* b, int64_t ldb, float* c, int64_t rsc, int64_t csc,
                               bool accumulate);

// Row-streaming kernel for small M with a row-major B: acc[i*w + j] = sum over k (in
// order) of a[i*rsa + k*csa] * b[k*ldb + j], for i < m (m <= 4), j < w. B rows are read
// as contiguous runs, which is what a memory-bound matrix-vector product needs.
using GemvKernel = void (*)(int64_t m, int64_t w, int64_t k, const float* a, int64_t rsa, int64_t csa,
                            const float* b, int64_t ldb, float* acc);

// Transposing pack: dst[k*width + r] = src[r*ld + k] for r < rows, k < kc; lanes
// rows..width-1 are zero. Packs row-major A panels (width mr) and K-contiguous B
// panels (width nr) without scalar scatter.
using TransposePack = void (*)(const float* src, int64_t ld, int64_t rows, int64_t kc, int64_t width, float* dst);

struct IsaKernels {
  Isa isa = Isa::Scalar;
  int mr = 0, nr = 0;                   // microkernel tile
  int64_t mc = 0, kc = 0, nc = 0;       // cache blocking
  GemmMicroKernel ukr[17] = {};         // indexed by rows, 1..mr
  GemmOffsetKernel ukr_off[17] = {};    // the same, B rows by offset
  GemmEpiKernel ukr_epi[17] = {};       // full-width tiles with the row epilogue; null where the ISA has none
  // The left nr/2 columns of a tile only, for a panel's last nr/2 or fewer columns (the same
  // arithmetic per element as the full kernels: the same bits); null where the ISA has none.
  GemmMicroKernel ukr_half[17] = {};
  GemmOffsetKernel ukr_off_half[17] = {};
  // ukr_off / ukr_off_half with the row epilogue; null where the ISA has none.
  GemmOffsetEpiKernel ukr_off_epi[17] = {};
  GemmOffsetEpiKernel ukr_off_half_epi[17] = {};
  // ukr, ukr_epi and ukr_half for pre-packed B panels (sgemm's b_packed, weights streamed from
  // memory): the same arithmetic, the next panel prefetched while this one is computed (see
  // gemm_vec.h); null where the ISA has none (the plain ones run).
  GemmMicroKernel ukr_stream[17] = {};
  GemmEpiKernel ukr_epi_stream[17] = {};
  GemmMicroKernel ukr_half_stream[17] = {};
  // Tiles of 1..8 columns (e.g. 196 = 6 x 32 + 4), indexed by columns; null where the ISA has none.
  GemmColsKernel ukr_cols[9] = {};
  // Tiles of 1..arows_max rows read in place (GemmARowsKernel), indexed by rows; null where the
  // ISA has none. Its rows are not a packed panel's, so it may take more than mr (two vectors of
  // accumulators per row: 14 rows fill AVX-512's 32 registers but for B and the broadcast).
  GemmARowsKernel ukr_arows[17] = {};
  int arows_max = 0;
  GemmDotKernel dot = nullptr;
  GemvKernel gemv = nullptr;
  // The same ISA's row kernels (row_kernels(isa)): the tile epilogue of tiles the microkernel
  // does not finish in registers, looked up once here rather than per tile.
  const RowKernels* rows = nullptr;
  TransposePack transpose_pack = nullptr;
  // dst[i] = src[i] widened from F16 (bf16 == false) or BF16 to F32, i < n.
  void (*widen)(const uint16_t* src, float* dst, int64_t n, bool bf16) = nullptr;
};

// table[n] = make.template operator()<n>() for n = 1..N: an ISA's kernel table indexed by rows
// (or columns), from one template per kernel, e.g.
//   fill_table<kMr>(t.ukr_off_epi, []<int M>() { return &ukr_off_epi_vec<M, kMr>; });
template <int N, class Fn, class Make>
void fill_table(Fn* table, Make&& make) {
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((table[I + 1] = make.template operator()<I + 1>()), ...);
  }(std::make_integer_sequence<int, N>{});
}

// Kernels for `isa` (a level this build lacks falls back to the next lower one).
const IsaKernels& isa_kernels(Isa isa);

// Whole-operand packing in sgemm's layout. A: for each K block pc (sizes kc of
// kernels.kc), mr-row panels at dst + pc*mpad + p*mr*kc (mpad = m rounded up to mr).
// B: for each K block, nr-column panels at dst + pc*npad + q*nr*kc. Sizes in floats.
int64_t packed_a_floats(const IsaKernels& kernels, int64_t m, int64_t k);
int64_t packed_b_floats(const IsaKernels& kernels, int64_t k, int64_t n);
void pack_a_full(const IsaKernels& kernels, const GemmOperand& a, int64_t m, int64_t k, float* dst);
void pack_b_full(const IsaKernels& kernels, const GemmOperand& b, int64_t k, int64_t n, float* dst);

// One rows x ncols tile (rows <= mr, ncols <= nr) over kc rows of B read in place at b + off[k]
// (ukr_off); a short tile goes through a temporary as the packed path's do, so the arithmetic,
// and the bits, are those of the packed product. C (=|+=) the tile at c with row stride ldc.
void gemm_tile_off(const IsaKernels& kernels, int64_t rows, int64_t ncols, int64_t kc, const float* a,
                   const float* b, const int64_t* off, float* c, int64_t ldc, bool accumulate);

// C = A*B (+ C) as described above. Sizes may be zero; k == 0 yields C = 0 (or C
// unchanged when accumulating), then the epilogue.
void sgemm(const SgemmProblem& p, ThreadPool* pool, const IsaKernels& kernels);

// Double-precision GEMM, blocked loops (no packing); same stride and determinism rules.
struct DgemmProblem {
  int64_t m = 0, n = 0, k = 0;
  const double* a = nullptr;
  int64_t rsa = 0, csa = 1;
  const double* b = nullptr;
  int64_t rsb = 0, csb = 1;
  double* c = nullptr;
  int64_t ldc = 0;
  bool accumulate = false;
};
void dgemm(const DgemmProblem& p, ThreadPool* pool);


// Element access for the float types the compute kernels accept (F32, F16, BF16, F64).
inline float load_as_f32(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::F64: return float(static_cast<const double*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}
inline void store_from_f32(void* p, DType t, int64_t i, float v) {
  switch (t) {
    case DType::F16: static_cast<uint16_t*>(p)[i] = f32_to_f16(v); return;
    case DType::BF16: static_cast<uint16_t*>(p)[i] = f32_to_bf16(v); return;
    case DType::F64: static_cast<double*>(p)[i] = v; return;
    default: static_cast<float*>(p)[i] = v; return;
  }
}

// Per-ISA tables, defined in gemm_scalar.cpp / gemm_avx2.cpp / gemm_avx512.cpp.
const IsaKernels* scalar_kernels();
const IsaKernels* avx2_kernels();
const IsaKernels* avx512_kernels();

}  // namespace rlx::cpu
