// dft / idft (the CPU's mixed-radix FFT) against a direct sum in long double, for lengths
// with every factor pattern (1, primes, powers of two, mixed, a large prime), complex and
// real input, f32 / f64 / f16, forward and inverse; 1- and 2-thread bit identity; and the
// decomposition other backends run (cos / sin products) on the same inputs.
//
// Error bound (derived, not fitted): the kernel computes in double (u = 2^-53) for every
// type. With S = sum_j |x_j| (complex moduli) every intermediate of the decimation-in-
// frequency transform has modulus <= S; a level of factor f adds at most (f + 1) u S from
// its f rounded products and sums, 2 u S from the twiddle product and u S from the rounded
// twiddles: |y_k - exact| <= sum over levels of (f + 4) u S. The inverse divides by n and
// rounds once more (u |y|); the output rounds once to its type (u_out |y|: 2^-24 for f32,
// 2^-11 for f16, plus half_extra below). The decomposition (f32 products) sums n products per element in f32:
// (n + 4) 2^-24 S.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "gemm_test_util.h"
#include "harness.h"
#include "opt/passes.h"
#include "rlx/rlx.h"

namespace rlx::test {
namespace {

std::vector<int64_t> factors(int64_t n) {
  std::vector<int64_t> f;
  for (int64_t p = 2; p * p <= n; ++p)
    while (n % p == 0) f.push_back(p), n /= p;
  if (n > 1) f.push_back(n);
  return f;
}

// Past the output's one rounding: f32 results may be subnormal (half the smallest spacing,
// 2^-150); f16 results round through f32 (one more 2^-24 |y|) and are subnormal below
// 2^-14 (spacing 2^-24, so 2^-25 absolute).
double half_extra(DType t, double w) {
  if (t == DType::F16) return 0x1p-24 * std::fabs(w) + 0x1p-25;
  if (t == DType::BF16) return 0x1p-24 * std::fabs(w) + 0x1p-134;
  return t == DType::F64 ? 0.0 : 0x1p-150;
}

// Unit roundoff of the output type (its one rounding).
double out_unit(DType t) { return t == DType::F16 ? 0x1p-11 : t == DType::BF16 ? 0x1p-8 : t == DType::F64 ? 0x1p-53 : 0x1p-24; }

struct Case {
  int64_t rows, n, c;  // c: 1 real, 2 complex
  DType type;
  bool inverse;
};

// y [rows, n, 2] in long double from x as the kernel sees it.
std::vector<long double> reference(const Case& k, const std::vector<double>& x) {
  std::vector<long double> y(size_t(k.rows * k.n * 2));
  const long double sign = k.inverse ? 1.0L : -1.0L;
  std::vector<long double> cs(size_t(k.n)), sn(size_t(k.n));
  for (int64_t e = 0; e < k.n; ++e) {
    const long double th = 2.0L * std::numbers::pi_v<long double> * (long double)e / (long double)k.n;
    cs[size_t(e)] = std::cos(th);
    sn[size_t(e)] = sign * std::sin(th);
  }
  for (int64_t r = 0; r < k.rows; ++r)
    for (int64_t q = 0; q < k.n; ++q) {
      long double re = 0, im = 0;
      for (int64_t j = 0; j < k.n; ++j) {
        const long double cr = cs[size_t(j * q % k.n)], ci = sn[size_t(j * q % k.n)];
        const long double xr = x[size_t((r * k.n + j) * k.c)], xi = k.c == 2 ? x[size_t((r * k.n + j) * 2 + 1)] : 0;
        re += xr * cr - xi * ci;
        im += xr * ci + xi * cr;
      }
      if (k.inverse) re /= k.n, im /= k.n;
      y[size_t((r * k.n + q) * 2)] = re;
      y[size_t((r * k.n + q) * 2 + 1)] = im;
    }
  return y;
}

// Per row: sum_j |x_j|.
std::vector<double> row_sums(const Case& k, const std::vector<double>& x) {
  std::vector<double> s(size_t(k.rows), 0.0);
  for (int64_t r = 0; r < k.rows; ++r)
    for (int64_t j = 0; j < k.n; ++j) {
      const double xr = x[size_t((r * k.n + j) * k.c)], xi = k.c == 2 ? x[size_t((r * k.n + j) * 2 + 1)] : 0;
      s[size_t(r)] += std::hypot(xr, xi);
    }
  return s;
}

void expect_within(const Case& k, const std::vector<double>& got, const std::vector<long double>& want,
                   const std::vector<double>& sums, double per_s) {
  for (int64_t r = 0; r < k.rows; ++r)
    for (int64_t i = 0; i < 2 * k.n; ++i) {
      const size_t at = size_t(r * 2 * k.n + i);
      const double w = double(want[at]);
      const double bound = per_s * sums[size_t(r)] / (k.inverse ? double(k.n) : 1.0) +
                           (k.inverse ? 0x1p-53 * std::fabs(w) : 0.0) + out_unit(k.type) * std::fabs(w) +
                           half_extra(k.type, w);
      ASSERT_LE(std::fabs(got[at] - w), bound) << "row " << r << " element " << i << " n " << k.n;
    }
}

std::vector<double> run_dft(const Case& k, const std::vector<uint8_t>& xb, int threads) {
  Graph g;
  Value x = g.input("x", Shape({k.rows, k.n, k.c}, k.type));
  Value y = g.add1(k.inverse ? OpKind::Idft : OpKind::Dft, {x});
  g.set_outputs({y});
  return bytes_to_doubles(run_kernel(g, y.node, {xb}, threads)[0], k.type);
}

TEST(Dft, MatchesTheDirectSumWithinTheDerivedBound) {
  int seed = 1;
  for (int64_t n : {1, 2, 3, 4, 5, 7, 8, 10, 12, 16, 30, 97, 128, 360, 1000})
    for (DType t : {DType::F32, DType::F64, DType::F16})
      for (int64_t c : {1, 2})
        for (bool inverse : {false, true}) {
          const Case k{3, n, c, t, inverse};
          SCOPED_TRACE(std::string(dtype_name(t)) + (inverse ? " idft" : " dft") + " n=" + std::to_string(n) +
                       " c=" + std::to_string(c));
          const auto vals = random_floats(size_t(k.rows * n * c), uint32_t(seed++), -2.0f, 2.0f);
          const auto xb = float_bytes(vals, t);
          const auto x = bytes_to_doubles(xb, t);
          double levels = 0;
          for (int64_t f : factors(n)) levels += double(f + 4);
          expect_within(k, run_dft(k, xb, 1), reference(k, x), row_sums(k, x), levels * 0x1p-53);
        }
}

TEST(Dft, SameBitsOnOneAndTwoThreads) {
  const Case k{64, 360, 2, DType::F32, false};
  const auto xb = float_bytes(random_floats(size_t(k.rows * k.n * 2), 77), DType::F32);
  EXPECT_EQ(run_dft(k, xb, 1), run_dft(k, xb, 2));
}

TEST(Dft, ErrorsNameTheShape) {
  Graph g;
  Value x = g.input("x", Shape({4, 3}, DType::F32));
  try {
    g.add1(OpKind::Dft, {x});
    FAIL() << "a last dim of 3 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1 (real) or 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(g.add1(OpKind::Idft, {g.input("i", Shape({4, 2}, DType::I32))}), Error);
}

// The decomposition (legalize's fallback for a backend without dft), compiled on the CPU.
TEST(Dft, DecompositionMatchesTheDirectSum) {
  for (bool inverse : {false, true}) {
    const Case k{2, 12, 2, DType::F32, inverse};
    Graph g;
    Value x = g.input("x", Shape({k.rows, k.n, k.c}, k.type));
    g.set_outputs({g.add1(inverse ? OpKind::Idft : OpKind::Dft, {x})});
    opt::BackendClaims all_but{"fake", [](const Node& n, const std::vector<const Shape*>&) {
                                 return n.kind != OpKind::Dft && n.kind != OpKind::Idft;
                               }};
    Graph lowered = opt::legalize(g, all_but, nullptr);
    for (const Node& n : lowered.nodes()) ASSERT_TRUE(n.kind != OpKind::Dft && n.kind != OpKind::Idft);
    const auto xb = float_bytes(random_floats(size_t(k.rows * k.n * 2), 5), DType::F32);
    const auto x64 = bytes_to_doubles(xb, DType::F32);
    auto out = Session(Device::Cpu).compile(lowered).run_typed({{"x", TypedTensor{DType::F32, {k.rows, k.n, 2}, xb}}});
    expect_within(k, bytes_to_doubles(out[0].bytes, DType::F32), reference(k, x64), row_sums(k, x64),
                  double(k.n + 4) * 0x1p-24);
  }
}

}  // namespace
}  // namespace rlx::test
