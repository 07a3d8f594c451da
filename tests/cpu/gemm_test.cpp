// sgemm / dgemm and the per-ISA vector helpers, tested directly (no graph): every path
// (dot, gemv, strips, shared-B packed, N and K blocking), strided/transposed operands,
// F16/BF16 operands, accumulate, epilogue coverage, 1 vs 2 threads bit-identical, and
// every ISA level this machine has against a double-precision reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernels/gemm.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cpu/kernels/row_kernels.h"
#include "gemm_test_util.h"

namespace rlx::cpu {
namespace {

using test::random_floats;

// C [m, n] = A [m, k] B [k, n], all three row-major f32 with no padding.
SgemmProblem row_major(int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c) {
  SgemmProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a = {a, DType::F32, k, 1};
  p.b = {b, DType::F32, n, 1};
  p.c = c;
  p.ldc = n;
  return p;
}

// Levels available here (scalar always; the native level and everything below it).
std::vector<Isa> isa_levels() {
  std::vector<Isa> v{Isa::Scalar};
  test::IsaOverride native("native");
  const Isa hw = detect_isa();
  if (hw == Isa::Avx2 || hw == Isa::Avx512) v.push_back(Isa::Avx2);
  if (hw == Isa::Avx512) v.push_back(Isa::Avx512);
  return v;
}

struct Case {
  int64_t m, n, k;
  bool trans_a = false, trans_b = false;
  DType ta = DType::F32, tb = DType::F32;
  bool accumulate = false;
};

// Stores a logical [rows, cols] matrix either row-major or transposed (column-major),
// padded with a junk column/row so strides differ from the logical size.
struct Operand {
  std::vector<uint8_t> bytes;
  std::vector<double> logical;  // rounded to the operand dtype, row-major [rows, cols]
  GemmOperand op;
};

Operand make_operand(int64_t rows, int64_t cols, bool trans, DType t, uint32_t seed) {
  Operand o;
  const int64_t ld = (trans ? rows : cols) + 3;
  const int64_t outer = trans ? cols : rows;
  std::vector<float> storage = random_floats(size_t(outer * ld), seed);
  o.bytes = test::float_bytes(storage, t);
  const std::vector<double> vals = test::rounded(storage, t);
  o.logical.resize(size_t(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) o.logical[size_t(i * cols + j)] = vals[size_t(trans ? j * ld + i : i * ld + j)];
  o.op = {o.bytes.data(), t, trans ? 1 : ld, trans ? ld : 1};
  return o;
}

struct Result {
  std::vector<float> c;
  std::vector<int> epilogue_hits;
};

// Epilogue that counts visits per element (each must be visited exactly once) and
// adds 1 so its effect is visible in C.
struct HitCtx {
  std::vector<int>* hits;
  int64_t n;
};
void count_hits(const void* vctx, float* c, int64_t ldc, int64_t i0, int64_t j0, int64_t m, int64_t n) {
  const HitCtx& h = *static_cast<const HitCtx*>(vctx);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      ++(*h.hits)[size_t((i0 + i) * h.n + j0 + j)];
      c[i * ldc + j] += 1.0f;
    }
}

Result run_case(const Case& cs, const Operand& a, const Operand& b, const std::vector<float>& c0, Isa isa,
                int threads, bool epilogue) {
  Result r;
  const int64_t ldc = cs.n + 5;
  r.c.assign(size_t(cs.m * ldc), 0.0f);
  for (int64_t i = 0; i < cs.m; ++i)
    for (int64_t j = 0; j < cs.n; ++j) r.c[size_t(i * ldc + j)] = c0[size_t(i * cs.n + j)];
  r.epilogue_hits.assign(size_t(cs.m * cs.n), 0);
  HitCtx hctx{&r.epilogue_hits, cs.n};
  SgemmProblem p;
  p.m = cs.m;
  p.n = cs.n;
  p.k = cs.k;
  p.a = a.op;
  p.b = b.op;
  p.c = r.c.data();
  p.ldc = ldc;
  p.accumulate = cs.accumulate;
  if (epilogue) {
    p.epilogue = count_hits;
    p.epilogue_ctx = &hctx;
  }
  ThreadPool pool(threads);
  sgemm(p, &pool, isa_kernels(isa));
  // Compact to [m, n] and check that the padding columns were left alone.
  std::vector<float> packed(size_t(cs.m * cs.n));
  for (int64_t i = 0; i < cs.m; ++i) {
    for (int64_t j = 0; j < cs.n; ++j) packed[size_t(i * cs.n + j)] = r.c[size_t(i * ldc + j)];
    for (int64_t j = cs.n; j < ldc; ++j) EXPECT_EQ(r.c[size_t(i * ldc + j)], 0.0f) << "wrote past n at row " << i;
  }
  r.c = packed;
  return r;
}

void check_case(const Case& cs) {
  SCOPED_TRACE(::testing::Message() << "m=" << cs.m << " n=" << cs.n << " k=" << cs.k << " ta=" << cs.trans_a
                                    << " tb=" << cs.trans_b << " types=" << dtype_name(cs.ta) << "/"
                                    << dtype_name(cs.tb) << " acc=" << cs.accumulate);
  const Operand a = make_operand(cs.m, cs.k, cs.trans_a, cs.ta, 11);
  const Operand b = make_operand(cs.k, cs.n, cs.trans_b, cs.tb, 23);
  const std::vector<float> c0 = random_floats(size_t(cs.m * cs.n), 37);
  std::vector<double> want(size_t(cs.m * cs.n)), scale(size_t(cs.m * cs.n));
  for (int64_t i = 0; i < cs.m; ++i)
    for (int64_t j = 0; j < cs.n; ++j) {
      double s = cs.accumulate ? c0[size_t(i * cs.n + j)] : 0.0, abs = std::fabs(s);
      for (int64_t k = 0; k < cs.k; ++k) {
        const double t = a.logical[size_t(i * cs.k + k)] * b.logical[size_t(k * cs.n + j)];
        s += t;
        abs += std::fabs(t);
      }
      want[size_t(i * cs.n + j)] = s + 1.0;  // the epilogue adds 1
      scale[size_t(i * cs.n + j)] = abs + 1.0;
    }
  for (Isa isa : isa_levels()) {
    SCOPED_TRACE(std::string("isa=") + std::string(isa_name(isa)));
    const Result r1 = run_case(cs, a, b, c0, isa, 1, true);
    const Result r2 = run_case(cs, a, b, c0, isa, 2, true);
    for (int h : r1.epilogue_hits) ASSERT_EQ(h, 1) << "epilogue must visit every element once";
    EXPECT_TRUE(std::equal(r1.c.begin(), r1.c.end(), r2.c.begin(), [](float x, float y) {
      return std::memcmp(&x, &y, sizeof(float)) == 0;
    })) << "1 and 2 threads differ";
    std::vector<double> got(r1.c.begin(), r1.c.end());
    EXPECT_TRUE(test::all_close(got, want, 1e-6, 2e-6 * std::sqrt(double(cs.k) + 1), &scale));
  }
}

TEST(Gemm, OddSizesRowMajor) {
  for (int64_t m : {1, 2, 5, 7, 13, 33})
    for (int64_t n : {1, 3, 16, 33, 70})
      for (int64_t k : {1, 7, 33})
        check_case({m, n, k});
}

TEST(Gemm, TransposedOperandsAllPaths) {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (auto [m, n, k] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
               {1, 77, 300}, {3, 5, 129}, {4, 129, 70}, {9, 40, 65}, {129, 3, 33}, {150, 97, 300}})
        check_case({m, n, k, ta, tb});
}

TEST(Gemm, BlockingBoundaries) {
  // m above every mc (shared packed B), k above kc, n above nc.
  check_case({300, 70, 530});
  check_case({20, 2100, 40});
  check_case({161, 33, 257});
  // Rows in several M blocks, re-balanced for two threads (equal heights, not 7 full + 1
  // short): 1 and 2 threads still agree bit for bit.
  check_case({1000, 20, 40});
  check_case({1009, 37, 300});
}

TEST(Gemm, AccumulateAndHalfTypes) {
  check_case({7, 33, 129, false, false, DType::F32, DType::F32, true});
  check_case({2, 50, 64, false, true, DType::F32, DType::F32, true});
  check_case({150, 40, 70, false, false, DType::F32, DType::F32, true});
  check_case({17, 45, 61, false, true, DType::F16, DType::F16});
  check_case({3, 45, 61, true, false, DType::BF16, DType::F32});
  check_case({140, 20, 300, false, false, DType::F32, DType::BF16, true});
  check_case({150, 40, 300, false, true, DType::F16, DType::F16});    // m > mc: packed in tasks
  check_case({160, 35, 270, true, false, DType::BF16, DType::BF16});
}

TEST(Gemm, ZeroK) {
  std::vector<float> c(6, 5.0f);
  SgemmProblem p;
  p.m = 2;
  p.n = 3;
  p.k = 0;
  p.c = c.data();
  p.ldc = 3;
  sgemm(p, nullptr, isa_kernels(detect_isa()));
  for (float x : c) EXPECT_EQ(x, 0.0f);
  std::fill(c.begin(), c.end(), 5.0f);
  p.accumulate = true;
  sgemm(p, nullptr, isa_kernels(detect_isa()));
  for (float x : c) EXPECT_EQ(x, 5.0f);
}

TEST(Gemm, PackedAndStreamingPathsAgreeBitwise) {
  // A row computed with m <= 4 (gemv path) equals the same row inside a large GEMM
  // (packed path): both sum k in kc blocks with the same FMA order.
  const int64_t k = 600, n = 100;
  const std::vector<float> a = random_floats(size_t(200 * k), 3), b = random_floats(size_t(k * n), 4);
  const IsaKernels& ks = isa_kernels(detect_isa());
  std::vector<float> big(size_t(200 * n)), small(size_t(2 * n));
  SgemmProblem p = row_major(200, n, k, a.data(), b.data(), big.data());
  sgemm(p, nullptr, ks);
  p.m = 2;
  p.a.data = a.data() + 150 * k;
  p.c = small.data();
  sgemm(p, nullptr, ks);
  for (int64_t j = 0; j < 2 * n; ++j) ASSERT_EQ(small[size_t(j)], big[size_t(150 * n + j)]) << j;
}

// m <= 4 over a row-major B of few columns on two threads: the tasks take whole K blocks into
// partial sums that are added to C in K order afterwards; every element must keep one thread's
// bits (which adds each block's sum to C as it goes), with and without accumulate, bias and ReLU.
TEST(Gemm, GemvSplitByKBlocksGivesOneThreadsBits) {
  ThreadPool pool(2);
  for (Isa isa : isa_levels()) {
    SCOPED_TRACE(std::string("isa=") + std::string(isa_name(isa)));
    const IsaKernels& ks = isa_kernels(isa);
    for (int64_t m : {1, 3}) {
      // m * n * k over 64^3, below which sgemm leaves the pool unused.
      const int64_t n = 400, k = 4 * ks.kc + 17;
      const std::vector<float> a = random_floats(size_t(m * k), 21), b = random_floats(size_t(k * n), 22);
      const std::vector<float> bias = random_floats(size_t(m), 23), c0 = random_floats(size_t(m * n), 24);
      for (bool accumulate : {false, true}) {
        for (bool epi : {false, true}) {
          auto run = [&](ThreadPool* tp) {
            std::vector<float> c = c0;
            SgemmProblem p = row_major(m, n, k, a.data(), b.data(), c.data());
            p.accumulate = accumulate;
            if (epi) p.row_epilogue = {bias.data(), nullptr, 0, true};
            sgemm(p, tp, ks);
            return c;
          };
          const std::vector<float> one = run(nullptr), two = run(&pool);
          ASSERT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * sizeof(float)))
              << "m " << m << " accumulate " << accumulate << " epi " << epi;
        }
      }
    }
  }
}

// A panel's last nr/2 or fewer columns take the half-width kernel; each of those elements must
// be the bits it has inside a full panel: the columns of an n = nr + w product (w = nr/2, a
// few less, 1) equal the same columns of the n = 2 nr product, on every ISA level, in place
// (ukr_off through gemm_tile_off) and packed.
TEST(Gemm, HalfWidthTailsGiveTheFullPanelsBits) {
  for (Isa isa : isa_levels()) {
    SCOPED_TRACE(std::string("isa=") + std::string(isa_name(isa)));
    const IsaKernels& ks = isa_kernels(isa);
    const int64_t m = 2 * ks.mr + 3, k = 300, nr = ks.nr, wide = 2 * nr;
    const std::vector<float> a = random_floats(size_t(m * k), 5), b = random_floats(size_t(k * wide), 6);
    auto product = [&](int64_t n) {
      std::vector<float> c(size_t(m * n));
      SgemmProblem p;
      p.m = m;
      p.n = n;
      p.k = k;
      p.a = {a.data(), DType::F32, k, 1};
      p.b = {b.data(), DType::F32, wide, 1};  // the first n columns of the same B
      p.c = c.data();
      p.ldc = n;
      sgemm(p, nullptr, ks);
      return c;
    };
    const std::vector<float> full = product(wide);
    // Half-width tails (nr / 2, nr / 2 - 3) and the column kernel's (8, 4, 1: ukr_cols).
    for (int64_t w : {nr / 2, nr / 2 - 3, int64_t(8), int64_t(4), int64_t(1)}) {
      const std::vector<float> tail = product(nr + w);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < nr + w; ++j)
          ASSERT_EQ(tail[size_t(i * (nr + w) + j)], full[size_t(i * wide + j)]) << "w=" << w << " " << i << "," << j;
    }
    // One tile read in place (B rows by offset), 5 columns, against the full tile's first 5.
    const int64_t rows = std::min<int64_t>(ks.mr, 4), kc = 40;
    std::vector<float> ap(size_t(ks.mr * kc));
    for (int64_t kk = 0; kk < kc; ++kk)
      for (int64_t r = 0; r < rows; ++r) ap[size_t(kk * ks.mr + r)] = a[size_t(r * k + kk)];
    std::vector<int64_t> off(static_cast<size_t>(kc));
    for (int64_t kk = 0; kk < kc; ++kk) off[size_t(kk)] = kk * wide;
    std::vector<float> c5(size_t(rows * 5)), c32(size_t(rows * nr));
    gemm_tile_off(ks, rows, 5, kc, ap.data(), b.data(), off.data(), c5.data(), 5, false);
    gemm_tile_off(ks, rows, nr, kc, ap.data(), b.data(), off.data(), c32.data(), nr, false);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < 5; ++j) ASSERT_EQ(c5[size_t(r * 5 + j)], c32[size_t(r * nr + j)]) << r << "," << j;
  }
}

// The row epilogue (bias per row, an addend laid out like C, ReLU) applied by the driver — in
// the microkernel's registers on full-width tiles, as a plain pass on the rest — must give the
// bits of the product followed by RowKernels::tile_epilogue (the pass conv used before), on
// every path (dot: n <= 4, gemv: m <= 4, strips: m <= mc, shared-B packed: m > mc; k across
// kc; accumulate), every ISA level, 1 and 2 threads; with a row of NaN sums, which ReLU passes
// through, and a row of zero sums.
TEST(Gemm, RowEpilogueGivesTheTileEpiloguesBits) {
  ThreadPool pool(2);
  for (Isa isa : isa_levels()) {
    SCOPED_TRACE(std::string("isa=") + std::string(isa_name(isa)));
    const IsaKernels& ks = isa_kernels(isa);
    const RowKernels& rk = row_kernels(isa);
    struct Shape3 {
      int64_t m, n, k;
    };
    for (const Shape3 sh : {Shape3{3, 70, 50}, Shape3{37, 3, 90}, Shape3{2 * ks.mr + 5, 3 * ks.nr + 7, 2 * ks.kc + 9},
                            Shape3{ks.mc + 29, 2 * ks.nr + 1, 64}}) {
      for (int variant = 0; variant < 8; ++variant) {
        const bool with_bias = variant & 1, with_res = variant & 2, relu = variant & 4;
        for (bool accumulate : {false, true}) {
          SCOPED_TRACE(testing::Message() << sh.m << "x" << sh.n << "x" << sh.k << " variant " << variant
                                          << " accumulate " << accumulate);
          std::vector<float> a = random_floats(size_t(sh.m * sh.k), 11), b = random_floats(size_t(sh.k * sh.n), 12);
          // Row 0 of A zero (C's first row sums to exactly 0); a NaN in row 1 of A makes C's
          // second row NaN.
          std::fill(a.begin(), a.begin() + sh.k, 0.0f);
          if (sh.m > 1) a[size_t(sh.k)] = std::nanf("");
          std::vector<float> bias = random_floats(size_t(sh.m), 13), res = random_floats(size_t(sh.m * (sh.n + 2)), 14);
          for (float& v : bias) v -= 0.5f;
          for (float& v : res) v -= 0.5f;
          const std::vector<float> c0 = random_floats(size_t(sh.m * sh.n), 15);
          auto run = [&](bool fused, ThreadPool* tp) {
            std::vector<float> c = c0;
            SgemmProblem p;
            p.m = sh.m;
            p.n = sh.n;
            p.k = sh.k;
            p.a = {a.data(), DType::F32, sh.k, 1};
            // n <= 4: B K-contiguous (stored as [n, k]), which takes the dot path.
            p.b = sh.n <= 4 ? GemmOperand{b.data(), DType::F32, 1, sh.k} : GemmOperand{b.data(), DType::F32, sh.n, 1};
            p.c = c.data();
            p.ldc = sh.n;
            p.accumulate = accumulate;
            if (fused) p.row_epilogue = {with_bias ? bias.data() : nullptr, with_res ? res.data() : nullptr, sh.n + 2, relu};
            sgemm(p, tp, ks);
            if (!fused)
              rk.tile_epilogue(c.data(), sh.n, sh.m, sh.n, with_bias ? bias.data() : nullptr,
                               with_res ? res.data() : nullptr, sh.n + 2, relu ? Activation::Relu : Activation::None, 0);
            return c;
          };
          const std::vector<float> want = run(false, nullptr);
          for (ThreadPool* tp : {static_cast<ThreadPool*>(nullptr), &pool}) {
            const std::vector<float> got = run(true, tp);
            ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
                << (tp ? "2 threads" : "1 thread");
          }
        }
      }
    }
  }
}

TEST(Gemm, PrepackedOperandsMatchPackingInside) {
  // Shapes through the strips path (m <= mc) and the shared-B path (m > mc), with k
  // crossing kc; A row-major, B transposed, so both transposing packs are involved. Packed
  // inside, the strips path cuts M into row tiles of equal height (30 = 10 + 10 + 10, 49 =
  // 4 x 10 + 9, 13 = 7 + 6); pre-packed A keeps mr-row tiles: the bits must not differ.
  for (Isa isa : isa_levels()) {
    const IsaKernels& ks = isa_kernels(isa);
    for (auto [m, n, k] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {30, 70, 300}, {49, 64, 530}, {13, 40, 100}, {200, 45, 520}}) {
      const std::vector<float> a = random_floats(size_t(m * k), 12), b = random_floats(size_t(n * k), 13);
      SgemmProblem p;
      p.m = m;
      p.n = n;
      p.k = k;
      p.a = {a.data(), DType::F32, k, 1};
      p.b = {b.data(), DType::F32, 1, k};
      std::vector<float> c1(size_t(m * n)), c2(size_t(m * n));
      p.c = c1.data();
      p.ldc = n;
      ThreadPool pool(2);
      sgemm(p, &pool, ks);
      std::vector<float> ap(size_t(packed_a_floats(ks, m, k))), bp(size_t(packed_b_floats(ks, k, n)));
      pack_a_full(ks, p.a, m, k, ap.data());
      pack_b_full(ks, p.b, k, n, bp.data());
      p.a_packed = ap.data();
      p.b_packed = bp.data();
      p.c = c2.data();
      sgemm(p, &pool, ks);
      EXPECT_EQ(c1, c2) << "m=" << m << " isa " << isa_name(isa);
      // With the row epilogue in registers (pre-packed B takes the ukr_*_stream kernels).
      const std::vector<float> bias = random_floats(size_t(m), 14);
      p.row_epilogue = {bias.data(), nullptr, 0, true};
      p.c = c2.data();
      sgemm(p, &pool, ks);
      p.a_packed = nullptr;
      p.b_packed = nullptr;
      p.c = c1.data();
      sgemm(p, &pool, ks);
      EXPECT_EQ(c1, c2) << "with the epilogue, m=" << m << " isa " << isa_name(isa);
    }
  }
}

// Pre-packed A (a convolution's weights) with many columns: two threads split the columns
// (sgemm_packed's column ranges) and give the bits of one thread, with B read in place
// (row-major) and packed (transposed), K across kc, M past mc, and the row epilogue.
TEST(Gemm, PrepackedWeightsSplitByColumnsGiveOneThreadsBits) {
  for (Isa isa : isa_levels()) {
    const IsaKernels& ks = isa_kernels(isa);
    for (bool b_rows : {true, false}) {
      const int64_t m = 3 * ks.mc + 7, n = 8 * ks.nr * 2 + 5, k = ks.kc + 37;
      const std::vector<float> a = random_floats(size_t(m * k), 21), b = random_floats(size_t(n * k), 22);
      const std::vector<float> bias = random_floats(size_t(m), 23);
      std::vector<float> ap(size_t(packed_a_floats(ks, m, k)));
      SgemmProblem p;
      p.m = m;
      p.n = n;
      p.k = k;
      p.a = {a.data(), DType::F32, k, 1};
      p.b = b_rows ? GemmOperand{b.data(), DType::F32, n, 1} : GemmOperand{b.data(), DType::F32, 1, k};
      pack_a_full(ks, p.a, m, k, ap.data());
      p.a_packed = ap.data();
      p.row_epilogue = {bias.data(), nullptr, 0, true};
      std::vector<float> one(size_t(m * n)), two(size_t(m * n));
      p.ldc = n;
      p.c = one.data();
      sgemm(p, nullptr, ks);
      ThreadPool pool(2);
      p.c = two.data();
      sgemm(p, &pool, ks);
      EXPECT_EQ(one, two) << "isa " << isa_name(isa) << (b_rows ? ", B row-major" : ", B transposed");
      // And the product itself, against a double reference: k + 1 roundings of 2^-24 (the
      // products' FMAs and the bias add) bound the error by (k + 1) 2^-24 (sum |a b| + |bias|).
      size_t bad = 0;
      for (int64_t i = 0; i < m; i += 37)
        for (int64_t j = 0; j < n; j += 11) {
          double r = 0, mag = std::fabs(double(bias[size_t(i)]));
          for (int64_t q = 0; q < k; ++q) {
            const double t = double(a[size_t(i * k + q)]) * b[size_t(b_rows ? q * n + j : j * k + q)];
            r += t;
            mag += std::fabs(t);
          }
          r = std::max(0.0, r + bias[size_t(i)]);
          bad += !(std::fabs(r - one[size_t(i * n + j)]) <= double(k + 1) * std::ldexp(1.0, -24) * mag);
        }
      EXPECT_EQ(bad, 0u) << "isa " << isa_name(isa);
    }
  }
}

TEST(Dgemm, MatchesReferenceWithStrides) {
  for (bool tb : {false, true}) {
    const int64_t m = 37, n = 29, k = 300;
    std::vector<double> a(size_t(m * k)), b(size_t(k * n)), c(size_t(m * n), 2.0);
    const auto ra = random_floats(a.size(), 5), rb = random_floats(b.size(), 6);
    std::copy(ra.begin(), ra.end(), a.begin());
    std::copy(rb.begin(), rb.end(), b.begin());
    DgemmProblem p;
    p.m = m;
    p.n = n;
    p.k = k;
    p.a = a.data();
    p.rsa = k;
    p.b = b.data();
    p.rsb = tb ? 1 : n;
    p.csb = tb ? k : 1;
    p.c = c.data();
    p.ldc = n;
    p.accumulate = true;
    ThreadPool pool(2);
    dgemm(p, &pool);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 2.0;
        for (int64_t kk = 0; kk < k; ++kk) s += a[size_t(i * k + kk)] * b[size_t(tb ? j * k + kk : kk * n + j)];
        ASSERT_NEAR(c[size_t(i * n + j)], s, 1e-12 * k) << i << "," << j;
      }
  }
}

TEST(VectorMath, ActivationsMatchScalarReference) {
  std::vector<float> x = random_floats(203, 9, -12.0f, 12.0f);
  x.insert(x.end(), {0.0f, -0.0f, 1e-6f, -1e-6f, 88.0f, -88.0f, -100.0f, 100.0f});
  for (Isa isa : isa_levels()) {
    const RowKernels& ks = row_kernels(isa);
    for (Activation act : {Activation::None, Activation::Relu, Activation::LeakyRelu, Activation::Sigmoid,
                           Activation::Silu, Activation::Tanh, Activation::Gelu, Activation::GeluTanh}) {
      std::vector<float> y = x;
      ks.activate(y.data(), int64_t(y.size()), act, 0.125f);
      for (size_t i = 0; i < x.size(); ++i) {
        const double want = activate_scalar(x[i], act, 0.125f);
        EXPECT_NEAR(y[i], want, 2e-6 + 2e-6 * std::fabs(want))
            << "act " << int(act) << " x=" << x[i] << " isa " << isa_name(isa);
      }
    }
  }
}

// The one-call tile epilogue gives the bits of add, accumulate and activate applied row by row
// (its contract), at every ISA level: with and without bias and residual (no bias must not
// add +0: a -0 stays -0), rows longer than a vector with a tail, every activation.
TEST(VectorMath, TileEpilogueIsTheRowByRowSteps) {
  const int64_t m = 5, n = 37, ldc = 41, ldr = 39;
  std::vector<float> c0 = random_floats(size_t(m * ldc), 21, -3.0f, 3.0f);
  c0[2] = -0.0f;
  c0[ldc + 5] = 0.0f;
  const std::vector<float> bias = random_floats(size_t(m), 22), res = random_floats(size_t(m * ldr), 23);
  for (Isa isa : isa_levels()) {
    const RowKernels& ks = row_kernels(isa);
    for (Activation act : {Activation::None, Activation::Relu, Activation::LeakyRelu, Activation::Sigmoid,
                           Activation::Silu, Activation::Tanh, Activation::Gelu, Activation::GeluTanh})
      for (int form = 0; form < 4; ++form) {
        const float* b = form & 1 ? bias.data() : nullptr;
        const float* x = form & 2 ? res.data() : nullptr;
        std::vector<float> got = c0, want = c0;
        ks.tile_epilogue(got.data(), ldc, m, n, b, x, ldr, act, 0.125f);
        for (int64_t r = 0; r < m; ++r) {
          float* y = want.data() + r * ldc;
          if (b) ks.add(y, n, b[r]);
          if (x) ks.accumulate(y, x + r * ldr, n);
          ks.activate(y, n, act, 0.125f);
        }
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
            << "act " << int(act) << " form " << form << " isa " << isa_name(isa);
      }
  }
}

TEST(VectorMath, ExpSumMaxScale) {
  std::vector<float> x = random_floats(77, 10, -30.0f, 5.0f);
  x[3] = -INFINITY;
  for (Isa isa : isa_levels()) {
    const RowKernels& ks = row_kernels(isa);
    EXPECT_EQ(ks.max(x.data(), int64_t(x.size())), *std::max_element(x.begin(), x.end()));
    EXPECT_EQ(ks.max(x.data(), 0), -INFINITY);
    std::vector<float> y = x;
    const float sum = ks.exp_sum(y.data(), int64_t(y.size()), 2.0f);
    double want_sum = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double e = std::exp(double(x[i]) - 2.0);
      want_sum += e;
      // x - shift is rounded to float first: relative error up to |x - shift| * 2^-24.
      if (i == 3) continue;  // -inf, checked below
      EXPECT_NEAR(y[i], e, e * (3e-7 + 1.2e-7 * std::fabs(double(x[i]) - 2.0)) + 1e-30) << i;
    }
    EXPECT_EQ(y[3], 0.0f);
    EXPECT_NEAR(sum, want_sum, 1e-6 * want_sum);
    ks.scale(y.data(), int64_t(y.size()), 0.5f);
    EXPECT_FLOAT_EQ(y[1], 0.5f * float(std::exp(double(x[1]) - 2.0)));
  }
}

}  // namespace
}  // namespace rlx::cpu
