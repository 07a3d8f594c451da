// The types the CUDA kernels take beyond f32 / f16 / bf16: every integer width (u32 and i16
// among them) through the element-wise, reduction, pooling and selection kernels, f64 pools,
// convolutions and selections, and pow with an exponent of another type. Each graph runs on
// the CPU (the oracle) and on CUDA; the results are compared byte for byte wherever both
// compute exactly (integers wrap the same way; the f64 inputs are chosen so that every sum is
// exact), else within the math libraries' documented error (pow). Skips without a usable CUDA
// device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda_test_util.h"
#include "rlx/rlx.h"

namespace rlx {
namespace {

template <class T>
TypedTensor tensor_of(DType t, std::vector<int64_t> dims, const std::vector<T>& v) {
  TypedTensor r{t, std::move(dims), std::vector<uint8_t>(v.size() * sizeof(T))};
  std::memcpy(r.bytes.data(), v.data(), r.bytes.size());
  return r;
}

template <class T>
std::vector<T> values_of(const TypedTensor& t) {
  std::vector<T> v(t.bytes.size() / sizeof(T));
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

// Runs g on both devices and expects every output's dtype, dims and bytes equal.
void expect_same_bytes(const Graph& g, const std::map<std::string, TypedTensor>& feeds) {
  const auto want = Session(Device::Cpu).compile(g).run_typed(feeds);
  const auto got = Session(Device::Cuda).compile(g).run_typed(feeds);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE("output " + std::to_string(i) + " (" + g.outputs()[i].name + ")");
    EXPECT_EQ(got[i].dtype, want[i].dtype);
    EXPECT_EQ(got[i].dims, want[i].dims);
    EXPECT_EQ(got[i].bytes, want[i].bytes);  // NaNs too: f16 and bf16 NaN bits as the CPU writes them
  }
}

// Random integers over T's whole range, with the values that stress the definitions (0, +-1,
// the extremes: x / 0, MIN / -1, MIN % -1, wrapping sums and products) at fixed places.
template <class T>
std::vector<T> integers(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(n);
  for (T& x : v) x = T(rng());
  const T special[] = {T(0), T(1), T(-1), std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), T(2), T(-2)};
  for (size_t i = 0; i < std::size(special) && 5 * i < n; ++i) v[5 * i] = special[i];
  return v;
}

template <class T>
void check_integer_type(DType t) {
  SCOPED_TRACE(dtype_name(t));
  constexpr int64_t M = 4, N = 33;
  Graph g("integer_ops");
  const Value a = g.input("a", Shape({M, N}, t)), b = g.input("b", Shape({1, N}, t));
  const Value e = g.input("e", Shape({M, N}, t));
  std::vector<Value> outs = {g.add(a, b), g.sub(a, b), g.mul(a, b), g.div(a, b), g.mod(a, b), g.mod(a, b, true),
                             g.max(a, b), g.min(a, b), g.pow(a, e),
                             g.add1(OpKind::BitwiseAnd, {a, b}), g.add1(OpKind::BitwiseOr, {a, b}),
                             g.add1(OpKind::BitwiseXor, {a, b}), g.add1(OpKind::BitwiseNot, {a}),
                             g.eq(a, b), g.lt(a, b), g.le(a, b), g.gt(a, b), g.ge(a, b),
                             g.abs(a), g.sign(a), g.relu(a),
                             g.reduce_sum(a, {1}), g.reduce_mean(a, {1}), g.reduce_prod(a, {0}),
                             g.reduce_max(a, {1}), g.reduce_min(a, {0}, false),
                             g.argmax(a, 1), g.argmin(a, 0, true, true),
                             g.cast(a, DType::U32), g.cast(a, DType::I16), g.cast(a, DType::F64), g.cast(a, DType::F32),
                             g.max_pool2d(g.reshape(a, {1, M, 3, 11}), {2, 3}, {1, 2}, {0, 1, 1, 1})};
  if (std::is_signed_v<T>) outs.push_back(g.neg(a));
  const auto [tv, ti] = g.topk(a, 5, 1);
  outs.push_back(tv);
  outs.push_back(ti);
  g.set_outputs(outs);
  // Exponents in [-2, 9] (signed) or [0, 9]: negative ones give 0 unless |a| is 1.
  std::vector<T> ev = integers<T>(size_t(M * N), 7);
  for (T& x : ev) x = std::is_signed_v<T> ? T(int64_t(uint64_t(x) % 12) - 2) : T(uint64_t(x) % 10);
  expect_same_bytes(g, {{"a", tensor_of(t, {M, N}, integers<T>(size_t(M * N), 1))},
                        {"b", tensor_of(t, {1, N}, integers<T>(size_t(N), 2))},
                        {"e", tensor_of(t, {M, N}, ev)}});
}

TEST(CudaTypedOps, IntegersGiveTheCpuBytesInEveryWidth) {
  REQUIRE_CUDA();
  check_integer_type<int8_t>(DType::I8);
  check_integer_type<uint8_t>(DType::U8);
  check_integer_type<int16_t>(DType::I16);
  check_integer_type<int32_t>(DType::I32);
  check_integer_type<uint32_t>(DType::U32);
  check_integer_type<int64_t>(DType::I64);
}

// f64 values k / 8 with small k: every product is a multiple of 2^-6 and every sum of the
// convolutions (at most 27 products and the bias) and the pools stays far below 2^46 of that
// unit, so all of them are exact in f64 whatever the order, and the averages are one
// correctly rounded division on both sides: the same bytes.
std::vector<double> eighths(size_t n, int span, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> u(-span, span);
  std::vector<double> v(n);
  for (double& x : v) x = u(rng) / 8.0;
  return v;
}

TEST(CudaTypedOps, F64ConvolutionsPoolsAndSelectionsGiveTheCpuBytes) {
  REQUIRE_CUDA();
  Graph g("f64_ops");
  const Value x = g.input("x", Shape({2, 3, 7, 9}, DType::F64));
  const Value w = g.input("w", Shape({4, 3, 3, 3}, DType::F64)), bias = g.input("bias", Shape({4}, DType::F64));
  const Value wg = g.input("wg", Shape({3, 1, 3, 3}, DType::F64));
  const auto [tv, ti] = g.topk(g.reshape(x, {6, 63}), 4, -1, false);
  g.set_outputs({g.conv2d(x, w, bias, {2, 1}, {1, 0, 1, 2}, {1, 2}), g.conv2d(x, wg, Value{}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 3),
                 g.avg_pool2d(x, {3, 2}, {2, 2}, {1, 0, 1, 1}, false), g.avg_pool2d(x, {3, 2}, {2, 2}, {1, 0, 1, 1}, true),
                 g.max_pool2d(x, {2, 3}, {1, 2}, {1, 1, 0, 1}), tv, ti, g.argmax(x, 3, false, true), g.argmin(x, 1)});
  expect_same_bytes(g, {{"x", tensor_of(DType::F64, {2, 3, 7, 9}, eighths(2 * 3 * 7 * 9, 64, 1))},
                        {"w", tensor_of(DType::F64, {4, 3, 3, 3}, eighths(4 * 27, 16, 2))},
                        {"bias", tensor_of(DType::F64, {4}, eighths(4, 64, 3))},
                        {"wg", tensor_of(DType::F64, {3, 1, 3, 3}, eighths(27, 16, 4))}});
}

// Selections are comparisons only: the same indices and values in every type, ties (values
// repeat) and NaN (first when largest, as on the CPU) included.
TEST(CudaTypedOps, SelectionsPickTheCpuElementsInEveryType) {
  REQUIRE_CUDA();
  for (DType t : {DType::F16, DType::BF16, DType::F64, DType::I8, DType::U8, DType::I32, DType::U32, DType::I64}) {
    SCOPED_TRACE(dtype_name(t));
    const bool fl = t == DType::F16 || t == DType::BF16 || t == DType::F64;
    Graph g("selections");
    const Value x = g.cast(g.input("x", Shape({3, 40}, DType::F32)), t);
    const auto [lv, li] = g.topk(x, 6, 1, true);
    const auto [sv, si] = g.topk(x, 3, 0, false);
    g.set_outputs({lv, li, sv, si, g.argmax(x, 1), g.argmin(x, 1, false, true), g.argmax(x, 0, true, true)});
    std::vector<float> v(120);
    for (size_t i = 0; i < v.size(); ++i) v[i] = float(int(i * 29 % 23) - (t == DType::U8 || t == DType::U32 ? 0 : 11));
    if (fl) v[17] = v[64] = std::nanf("");
    expect_same_bytes(g, {{"x", tensor_of(DType::F32, {3, 40}, v)}});
  }
}

// pow(base, exponent) of two types computes as the CPU does: in the result's float type
// (f32 for f16), in f64 for an integer base and a float exponent (truncated back), in i64
// for two integer types. Integer results are compared exactly: the exponents give powers at
// least 0.01 from any integer (or exact small integers), far outside pow's error of a few
// f64 ulps. Float results: CUDA's powf is within 4 ulps of the correctly rounded value
// (the CUDA C Programming Guide's table of maximum ulp errors), glibc's powf within 1, so
// the two are at most 5 f32 ulps apart; f16 results round that f32 value once more (one f16
// ulp); f64: CUDA's pow 2 ulps, glibc's 1: 3 f64 ulps.
TEST(CudaTypedOps, PowOfMixedTypesComputesAsTheCpu) {
  REQUIRE_CUDA();
  struct Case {
    DType base, exp;
  };
  const Case cases[] = {{DType::F32, DType::I32}, {DType::F32, DType::I64}, {DType::F32, DType::U32},
                        {DType::F16, DType::I32}, {DType::F64, DType::I64}, {DType::F64, DType::F32},
                        {DType::I32, DType::F32}, {DType::I64, DType::F32}, {DType::I32, DType::I64},
                        {DType::U8, DType::I32}, {DType::I64, DType::F64}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(dtype_name(c.base)) + " ^ " + std::string(dtype_name(c.exp)));
    const bool int_base = c.base != DType::F32 && c.base != DType::F16 && c.base != DType::F64;
    const bool float_exp = c.exp == DType::F32 || c.exp == DType::F64;
    Graph g("mixed_pow");
    const Value b = g.cast(g.input("b", Shape({2, 6}, DType::F64)), c.base);
    const Value e = g.cast(g.input("e", Shape({6}, DType::F64)), c.exp);
    g.set_outputs({g.cast(g.pow(b, e), DType::F64)}, {"y"});
    // Bases 1 .. 12 (x 0.75 for float bases; the fourth negated); exponents small integers
    // (-2 for float bases and signed exponents) or, for an integer base and a float exponent, quarters whose
    // powers of these bases are 1 (of 1) or at least 0.005 from an integer.
    std::vector<double> bv(12), ev(6);
    for (size_t i = 0; i < bv.size(); ++i) bv[i] = double(i + 1) * (int_base ? 1.0 : 0.75);
    if (c.base != DType::U8) bv[3] = -bv[3];  // (a fractional power of it is NaN: 0 as an integer on both sides)
    const double ints[] = {0, 1, 2, 3, 5, int_base || c.exp == DType::U32 ? 4.0 : -2.0};
    const double fracs[] = {0.5, 1.5, 2.25, 0.25, 1.75, 2.5};
    for (size_t i = 0; i < ev.size(); ++i) ev[i] = float_exp && int_base ? fracs[i] : ints[i];
    const std::map<std::string, TypedTensor> feeds = {{"b", tensor_of(DType::F64, {2, 6}, bv)},
                                                      {"e", tensor_of(DType::F64, {6}, ev)}};
    const auto want = values_of<double>(Session(Device::Cpu).compile(g).run_typed(feeds)[0]);
    const auto got = values_of<double>(Session(Device::Cuda).compile(g).run_typed(feeds)[0]);
    ASSERT_EQ(got.size(), want.size());
    const double ulps = int_base ? 0 : c.base == DType::F32 ? 5 * std::ldexp(1.0, -23)
                                     : c.base == DType::F16 ? std::ldexp(1.0, -10) : 3 * std::ldexp(1.0, -52);
    for (size_t i = 0; i < want.size(); ++i) {
      if (got[i] != want[i]) {  // equal infinities would make the bound inf - inf
        EXPECT_NEAR(got[i], want[i], ulps * std::fabs(want[i])) << "element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace rlx
