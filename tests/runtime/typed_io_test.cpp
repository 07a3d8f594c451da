// Typed I/O at the boundary, for all 13 dtypes: exact round trips in the own dtype,
// the f32 convenience conversions, half-precision rounding, complex lanes and the
// c128 hi/lo split across an f32 boundary.
#include <cmath>
#include <limits>
#include <random>

#include "runtime/typed_io.h"
#include "runtime_test_util.h"

namespace rlx::test {
namespace {

constexpr DType kAll[] = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I8,   DType::I16, DType::I32,
                          DType::I64, DType::U8,  DType::U32,  DType::Bool, DType::C64, DType::C128};

// x:D[2,3] -> outputs x itself and concat(x, x) along axis 0.
Graph echo_graph(DType d) {
  Graph g("echo");
  auto x = g.input("x", Shape({2, 3}, d));
  g.set_outputs({x, g.concat({x, x}, 0)}, {"same", "cat"});
  return g;
}

std::vector<uint8_t> random_bytes(DType d, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(n * dtype_size(d));
  for (auto& v : b) v = uint8_t(rng());
  if (d == DType::Bool)
    for (auto& v : b) v &= 1;
  return b;
}

TEST(TypedIo, AllDtypesRoundTripExactly) {
  static_assert(std::size(kAll) == size_t(kNumDTypes));
  for (DType d : kAll) {
    SCOPED_TRACE(std::string(dtype_name(d)));
    CompiledGraph net = compile(echo_graph(d));
    TypedTensor x{d, {2, 3}, random_bytes(d, 6, uint32_t(d) + 1)};
    auto out = net.run_typed({{"x", x}});
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].dtype, d);
    EXPECT_EQ(out[0].dims, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(out[0].bytes, x.bytes);
    std::vector<uint8_t> twice = x.bytes;
    twice.insert(twice.end(), x.bytes.begin(), x.bytes.end());
    EXPECT_EQ(out[1].dims, (std::vector<int64_t>{4, 3}));
    EXPECT_EQ(out[1].bytes, twice);
  }
}

// What the f32 convenience form must store for value v in a slot of dtype d.
double expected_store(DType d, double v) {
  auto sat = [&](double lo, double hi) { return std::isnan(v) ? 0.0 : std::trunc(std::clamp(v, lo, hi)); };
  switch (d) {
    case DType::I8: return sat(-128, 127);
    case DType::I16: return sat(-32768, 32767);
    case DType::I32: return sat(-2147483648.0, 2147483647.0);
    case DType::I64: return sat(-9223372036854775808.0, 9223372036854775807.0);
    case DType::U8: return sat(0, 255);
    case DType::U32: return sat(0, 4294967295.0);
    case DType::Bool: return v != 0 ? 1 : 0;
    default: return v;
  }
}

TEST(TypedIo, F32ConvenienceConvertsEveryRealDtype) {
  const std::vector<float> in{3.75f, -3.75f, 300.f, -1e20f, 0.5f, 0.f};
  for (DType d : kAll) {
    if (is_complex(d)) continue;
    SCOPED_TRACE(std::string(dtype_name(d)));
    CompiledGraph net = compile(echo_graph(d));
    auto out = net.run({{"x", in}});
    ASSERT_EQ(out[0].size(), 6u);
    ASSERT_EQ(out[1].size(), 12u);
    for (size_t i = 0; i < in.size(); ++i) {
      double want = expected_store(d, in[i]);
      if (d == DType::F16) want = std::isinf(want) || std::fabs(want) > 65504 ? std::copysign(INFINITY, want) : want;
      if (d == DType::BF16 || d == DType::F16) {
        // 3.75, 300, 0.5, 0 are exact in both; -1e20 is inf in f16 and ~-1e20 in bf16.
        if (std::fabs(in[i]) < 1e10f) EXPECT_EQ(out[0][i], float(want)) << i;
        else if (d == DType::F16) EXPECT_TRUE(std::isinf(out[0][i]) && out[0][i] < 0);
        else EXPECT_NEAR(out[0][i], -1e20, 1e20 * 0x1p-8);
      } else {
        EXPECT_EQ(out[0][i], float(want)) << i << " in " << in[i];
      }
      EXPECT_EQ(out[1][i], out[0][i]);
      EXPECT_EQ(out[1][i + 6], out[0][i]);
    }
  }
}

TEST(TypedIo, F32ConvenienceSaturatesAndZeroesNan) {
  CompiledGraph net = compile(echo_graph(DType::I32));
  auto out = net.run({{"x", {NAN, INFINITY, -INFINITY, 2147483647.f, -2.5f, 2.5f}}});
  EXPECT_EQ(out[0], (std::vector<float>{0, 2147483647.f, -2147483648.f, 2147483647.f, -2, 2}));
  CompiledGraph b = compile(echo_graph(DType::Bool));
  EXPECT_EQ(b.run({{"x", {NAN, 0, -0.f, 0.25f, -7, 1}}})[0], (std::vector<float>{1, 0, 0, 1, 1, 1}));
}

TEST(TypedIo, ComplexTakesTwoF32LanesPerElement) {
  CompiledGraph net = compile(echo_graph(DType::C64));
  std::vector<float> reim{1, -1, 2, -2, 3, -3, 4, -4, 5, -5, 6, -6};
  auto out = net.run({{"x", reim}});
  EXPECT_EQ(out[0], reim);
  expect_error([&] { net.run({{"x", std::vector<float>(6)}}); }, ErrorCategory::InvalidArgument, "needs 12");
  // c128 slot fed with f32 pairs: widened per component.
  CompiledGraph wide = compile(echo_graph(DType::C128));
  auto t = wide.run_typed({{"x", typed<float>(DType::F32, {}, reim)}});
  std::vector<double> want(reim.begin(), reim.end());
  EXPECT_EQ(unpack<double>(t[0].bytes), want);
  // c64 data into a c128 input, and c128 data into a c64 input (per component).
  auto c = wide.run_typed({{"x", typed<float>(DType::C64, {2, 3}, reim)}});
  EXPECT_EQ(unpack<double>(c[0].bytes), want);
  CompiledGraph narrow = compile(echo_graph(DType::C64));
  auto n = narrow.run_typed({{"x", typed<double>(DType::C128, {2, 3}, want)}});
  EXPECT_EQ(unpack<float>(n[0].bytes), reim);
}

TEST(TypedIo, HalfPrecisionRoundsToNearestEven) {
  CompiledGraph h = compile(echo_graph(DType::F16));
  // 1+2^-11 is halfway between 1 and 1+2^-10: ties to even (1.0). 1+3*2^-11 -> 1+2^-9.
  std::vector<float> x{1.0f, 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65520.f, -0.f, 0x1p-24f};
  auto out = h.run_typed({{"x", typed<float>(DType::F32, {2, 3}, x)}});
  EXPECT_EQ(unpack<uint16_t>(out[0].bytes), (std::vector<uint16_t>{0x3C00, 0x3C00, 0x3C02, 0x7C00, 0x8000, 0x0001}));
  CompiledGraph b = compile(echo_graph(DType::BF16));
  std::vector<float> y{1.0f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -2.f, 0.f, 1e-40f};
  auto ob = b.run_typed({{"x", typed<float>(DType::F32, {2, 3}, y)}});
  auto bits = unpack<uint16_t>(ob[0].bytes);
  EXPECT_EQ(bits[0], 0x3F80);
  EXPECT_EQ(bits[1], 0x3F80);
  EXPECT_EQ(bits[2], 0x3F82);
  EXPECT_EQ(bits[3], 0xC000);
  EXPECT_EQ(bits[4], 0x0000);
  // And back: f16/bf16 outputs read through run() widen exactly.
  EXPECT_EQ(h.run({{"x", {0.5f, 2, 4, 8, 16, 1024}}})[0], (std::vector<float>{0.5f, 2, 4, 8, 16, 1024}));
}

TEST(TypedIo, C128AcrossF32BoundaryKeepsDoubleFloatPrecision) {
  // An f32 graph holding c128 values as four lanes each: (re_hi, re_lo, im_hi, im_lo).
  Graph g("lanes");
  auto x = g.input("x", Shape({3, 4}, DType::F32));
  g.set_outputs({g.concat({x, x}, 0)}, {"y"});
  CompiledGraph net = compile(g);
  std::vector<double> vals{M_PI, -1.0 / 3, std::exp(1.0) * 1e5, 1e-30, -123456.789012345678, 0.1};
  auto out = net.run_typed({{"x", typed<double>(DType::C128, {3}, vals)}});
  ASSERT_EQ(out[0].dtype, DType::F32);
  std::vector<float> lanes = unpack<float>(out[0].bytes);
  ASSERT_EQ(lanes.size(), 24u);
  for (size_t i = 0; i < vals.size(); ++i) {
    EXPECT_EQ(lanes[2 * i], float(vals[i]));
    EXPECT_EQ(lanes[2 * i + 1], float(vals[i] - double(float(vals[i]))));
  }
  TypedTensor back = runtime::convert_tensor(out[0], DType::C128);
  EXPECT_EQ(back.dtype, DType::C128);
  EXPECT_EQ(back.dims, (std::vector<int64_t>{6, 1}));
  std::vector<double> rec = unpack<double>(back.bytes);
  ASSERT_EQ(rec.size(), 12u);
  for (size_t i = 0; i < 12; ++i) {
    double want = vals[i % 6];
    EXPECT_LE(std::fabs(rec[i] - want), std::fabs(want) * 0x1p-46) << i;
    EXPECT_NE(rec[i], double(float(want))) << "lo lane lost at " << i;  // better than f32 alone
  }
  // 12 f32 lanes hold exactly 3 c128 values; 2 or 4 do not fit.
  expect_error([&] { net.run_typed({{"x", typed<double>(DType::C128, {2}, {1, 2, 3, 4})}}); },
               ErrorCategory::InvalidArgument, "needs 3 c128");
}

TEST(TypedIo, StrictModeRefusesLossyOrUnrelatedPairs) {
  CompiledGraph net = compile(echo_graph(DType::I64));
  expect_error([&] { net.run_typed({{"x", typed<int32_t>(DType::I32, {2, 3}, {1, 2, 3, 4, 5, 6})}}); },
               ErrorCategory::InvalidArgument, "i64");
  expect_error([&] { net.run_typed({{"x", typed<float>(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6})}}); },
               ErrorCategory::InvalidArgument, "i64");
  auto ok = net.run_typed({{"x", typed<int64_t>(DType::I64, {2, 3}, {1, -2, 3, -4, 5, int64_t(1) << 62})}});
  EXPECT_EQ(unpack<int64_t>(ok[0].bytes), (std::vector<int64_t>{1, -2, 3, -4, 5, int64_t(1) << 62}));
  EXPECT_FALSE(runtime::find_boundary(DType::Bool, DType::F32, false));
  EXPECT_FALSE(runtime::find_boundary(DType::F16, DType::C64, false));
  EXPECT_TRUE(runtime::find_boundary(DType::F32, DType::U8, true));
  EXPECT_FALSE(runtime::find_boundary(DType::F32, DType::U8, false));
}

TEST(TypedIo, ConvertRealsSaturates) {
  std::vector<double> v{1e300, -1e300, NAN, 127.9, -128.9, 0.999};
  std::vector<int8_t> i8(6);
  runtime::convert_reals(DType::F64, v.data(), DType::I8, i8.data(), 6);
  EXPECT_EQ(i8, (std::vector<int8_t>{127, -128, 0, 127, -128, 0}));
  std::vector<uint32_t> u32(6);
  runtime::convert_reals(DType::F64, v.data(), DType::U32, u32.data(), 6);
  EXPECT_EQ(u32, (std::vector<uint32_t>{4294967295u, 0, 0, 127, 0, 0}));
  std::vector<int64_t> i64(6);
  runtime::convert_reals(DType::F64, v.data(), DType::I64, i64.data(), 6);
  EXPECT_EQ(i64[0], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(i64[1], std::numeric_limits<int64_t>::min());
  std::vector<int64_t> big{int64_t(1) << 40, -5};
  std::vector<float> f(2);
  runtime::convert_reals(DType::I64, big.data(), DType::F32, f.data(), 2);
  EXPECT_EQ(f, (std::vector<float>{0x1p40f, -5.f}));
}

}  // namespace
}  // namespace rlx::test
