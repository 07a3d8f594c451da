// Helpers for the reduce / norm / movement kernel tests: typed encode/decode through
// doubles, seeded random inputs, a runner that checks 1 vs 2 threads give identical
// bytes, and tolerance comparison per dtype.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu/harness.h"
#include "rlx/rlx.h"

namespace rlx::test::reduce_movement {

// Scalars per element: 2 for complex (re, im), else 1.
inline int parts(DType t) { return is_complex(t) ? 2 : 1; }

inline std::vector<uint8_t> encode(DType t, const std::vector<double>& v) {
  const size_t n = v.size() / size_t(parts(t));
  std::vector<uint8_t> b(n * dtype_size(t));
  for (size_t i = 0; i < n; ++i) {
    uint8_t* p = b.data() + i * dtype_size(t);
    const double x = v[i * size_t(parts(t))];
    auto put = [&](auto val) { std::memcpy(p, &val, sizeof(val)); };
    switch (t) {
      case DType::F32: put(float(x)); break;
      case DType::F64: put(x); break;
      case DType::F16: put(f32_to_f16(float(x))); break;
      case DType::BF16: put(f32_to_bf16(float(x))); break;
      case DType::I8: put(int8_t(x)); break;
      case DType::I16: put(int16_t(x)); break;
      case DType::I32: put(int32_t(x)); break;
      case DType::I64: put(int64_t(x)); break;
      case DType::U8: put(uint8_t(x)); break;
      case DType::U32: put(uint32_t(x)); break;
      case DType::Bool: put(uint8_t(x != 0)); break;
      case DType::C64: put(std::complex<float>(float(x), float(v[2 * i + 1]))); break;
      case DType::C128: put(std::complex<double>(x, v[2 * i + 1])); break;
    }
  }
  return b;
}

inline std::vector<double> decode(DType t, const std::vector<uint8_t>& b) {
  const size_t n = b.size() / dtype_size(t);
  std::vector<double> v;
  v.reserve(n * size_t(parts(t)));
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = b.data() + i * dtype_size(t);
    auto get = [&](auto val) { std::memcpy(&val, p, sizeof(val)); return val; };
    switch (t) {
      case DType::F32: v.push_back(get(float())); break;
      case DType::F64: v.push_back(get(double())); break;
      case DType::F16: v.push_back(f16_to_f32(get(uint16_t()))); break;
      case DType::BF16: v.push_back(bf16_to_f32(get(uint16_t()))); break;
      case DType::I8: v.push_back(get(int8_t())); break;
      case DType::I16: v.push_back(get(int16_t())); break;
      case DType::I32: v.push_back(get(int32_t())); break;
      case DType::I64: v.push_back(double(get(int64_t()))); break;
      case DType::U8: v.push_back(get(uint8_t())); break;
      case DType::U32: v.push_back(get(uint32_t())); break;
      case DType::Bool: v.push_back(get(uint8_t()) != 0); break;
      case DType::C64: { auto c = get(std::complex<float>()); v.push_back(c.real()); v.push_back(c.imag()); break; }
      case DType::C128: { auto c = get(std::complex<double>()); v.push_back(c.real()); v.push_back(c.imag()); break; }
    }
  }
  return v;
}

// Values representable in t: integers for integer types, dtype-rounded for floats.
inline std::vector<double> random_values(DType t, int64_t n, uint32_t seed, double lo = -3,
                                         double hi = 3) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(size_t(n) * size_t(parts(t)));
  for (auto& x : v) x = is_float(t) || is_complex(t) ? u(rng) : std::round(u(rng));
  if (t == DType::U8 || t == DType::U32)
    for (auto& x : v) x = std::abs(x);
  return decode(t, encode(t, v));
}

inline std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(n);
  for (auto& x : b) x = uint8_t(rng());
  return b;
}

// Runs the node with 1 and 2 threads; the outputs must be bit-identical.
inline std::vector<std::vector<uint8_t>> run2(const Graph& g, Value v,
                                              const std::vector<std::vector<uint8_t>>& in,
                                              int64_t ext_actual = 0, int64_t ext_upper = 0) {
  auto a = run_kernel(g, v.node, in, 1, ext_actual, ext_upper);
  auto b = run_kernel(g, v.node, in, 2, ext_actual, ext_upper);
  EXPECT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    EXPECT_TRUE(a[i] == b[i]) << "output " << i << " differs between 1 and 2 threads";
  return a;
}

// Default relative tolerance per dtype (a few ulps of the storage type).
inline double default_rtol(DType t) {
  switch (t) {
    case DType::F32: case DType::C64: return 2e-5;
    case DType::F64: case DType::C128: return 1e-12;
    case DType::F16: return 2e-3;
    case DType::BF16: return 1.6e-2;
    default: return 0;
  }
}

// |got - want| <= rtol * (|want| + mag) + atol, elementwise; NaN must match NaN.
// `mag` (optional, per element) widens the bound where the reference cancels.
inline void expect_close(const std::vector<double>& got, const std::vector<double>& want,
                         double rtol, double atol = 0, const std::vector<double>& mag = {},
                         const std::string& what = "") {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    const double g = got[i], w = want[i];
    if (std::isnan(w) || std::isnan(g)) {
      if (!(std::isnan(w) && std::isnan(g))) { ADD_FAILURE() << what << " [" << i << "] got " << g << " want " << w; ++bad; }
      continue;
    }
    if (std::isinf(w) || std::isinf(g)) {
      if (g != w) { ADD_FAILURE() << what << " [" << i << "] got " << g << " want " << w; ++bad; }
      continue;
    }
    const double m = mag.empty() ? 0.0 : mag[i];
    const double tol = rtol * (std::abs(w) + m) + atol;
    if (!(std::abs(g - w) <= tol)) {
      ADD_FAILURE() << what << " [" << i << "] got " << g << " want " << w << " tol " << tol;
      ++bad;
    }
  }
}

// Row-major helpers for reference code.
inline std::vector<int64_t> strides_of(const std::vector<int64_t>& d) {
  std::vector<int64_t> s(d.size(), 1);
  for (int i = int(d.size()) - 2; i >= 0; --i) s[size_t(i)] = s[size_t(i) + 1] * d[size_t(i) + 1];
  return s;
}
inline int64_t numel_of(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}
// Unflattens flat index f over dims d.
inline std::vector<int64_t> unflatten(int64_t f, const std::vector<int64_t>& d) {
  std::vector<int64_t> idx(d.size());
  for (int i = int(d.size()) - 1; i >= 0; --i) {
    idx[size_t(i)] = d[size_t(i)] ? f % d[size_t(i)] : 0;
    f = d[size_t(i)] ? f / d[size_t(i)] : 0;
  }
  return idx;
}

// Sets RLX_ISA for the scope of a test (detect_isa reads it at every call).
struct ScopedIsa {
  explicit ScopedIsa(const char* v) { setenv("RLX_ISA", v, 1); }
  ~ScopedIsa() { unsetenv("RLX_ISA"); }
};

}  // namespace rlx::test::reduce_movement
