// Shared helpers for the GEMM / matmul / conv / attention kernel tests: deterministic
// random data, byte conversion for the harness, an RLX_ISA override guard and a
// tolerance check that reports the first mismatches.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/isa.h"
#include "harness.h"
#include "rlx/dtype.h"

namespace rlx::test {

// Values in [lo, hi) from a fixed-seed generator (same on every platform).
inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(n);
  uint64_t s = 0x9E3779B97F4A7C15ull ^ (uint64_t(seed) * 0xBF58476D1CE4E5B9ull);
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const double u = double(s >> 11) * (1.0 / 9007199254740992.0);
    x = float(lo + (hi - lo) * u);
  }
  return v;
}

// Bytes of `v` stored as dtype t (F32, F16, BF16 or F64).
inline std::vector<uint8_t> float_bytes(const std::vector<float>& v, DType t) {
  std::vector<uint8_t> b(v.size() * dtype_size(t));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (t) {
      case DType::F16: { uint16_t h = f32_to_f16(v[i]); std::memcpy(&b[i * 2], &h, 2); break; }
      case DType::BF16: { uint16_t h = f32_to_bf16(v[i]); std::memcpy(&b[i * 2], &h, 2); break; }
      case DType::F64: { double d = v[i]; std::memcpy(&b[i * 8], &d, 8); break; }
      default: std::memcpy(&b[i * 4], &v[i], 4); break;
    }
  }
  return b;
}

// Values of bytes stored as dtype t, widened to double.
inline std::vector<double> bytes_to_doubles(const std::vector<uint8_t>& b, DType t) {
  const size_t n = b.size() / dtype_size(t);
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) {
    switch (t) {
      case DType::F16: { uint16_t h; std::memcpy(&h, &b[i * 2], 2); v[i] = f16_to_f32(h); break; }
      case DType::BF16: { uint16_t h; std::memcpy(&h, &b[i * 2], 2); v[i] = bf16_to_f32(h); break; }
      case DType::F64: { double d; std::memcpy(&d, &b[i * 8], 8); v[i] = d; break; }
      default: { float f; std::memcpy(&f, &b[i * 4], 4); v[i] = f; break; }
    }
  }
  return v;
}

// The values `v` take after a round trip through dtype t (what a kernel actually sees).
inline std::vector<double> rounded(const std::vector<float>& v, DType t) {
  return bytes_to_doubles(float_bytes(v, t), t);
}

// Sets an environment variable for the guard's lifetime (kernel calls read RLX_ISA and
// RLX_CPU_WINOGRAD when they are built).
class EnvOverride {
 public:
  EnvOverride(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~EnvOverride() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }
  EnvOverride(const EnvOverride&) = delete;
  EnvOverride& operator=(const EnvOverride&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

class IsaOverride : public EnvOverride {
 public:
  explicit IsaOverride(const char* value) : EnvOverride("RLX_ISA", value) {}
};

// RLX_ISA values covering every kernel table this machine can run (native first).
inline std::vector<const char*> isa_levels_here() {
  std::vector<const char*> v{"native"};
  IsaOverride native("native");
  const cpu::Isa hw = cpu::detect_isa();
  if (hw == cpu::Isa::Avx512) v.push_back("avx2");
  if (hw != cpu::Isa::Scalar) v.push_back("scalar");
  return v;
}

// |got - want| <= atol + rtol * scale[i] (scale defaults to |want|), NaNs must match.
inline ::testing::AssertionResult all_close(const std::vector<double>& got, const std::vector<double>& want,
                                            double atol, double rtol, const std::vector<double>* scale = nullptr) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  size_t bad = 0;
  std::string first;
  for (size_t i = 0; i < got.size(); ++i) {
    const double s = scale ? (*scale)[i] : std::fabs(want[i]);
    const bool ok = (std::isnan(got[i]) && std::isnan(want[i])) ||
                    (std::isinf(want[i]) && got[i] == want[i]) ||
                    std::fabs(got[i] - want[i]) <= atol + rtol * s;
    if (!ok && bad++ < 5) first += " [" + std::to_string(i) + "] got " + std::to_string(got[i]) + " want " +
                                   std::to_string(want[i]) + ";";
  }
  if (bad) return ::testing::AssertionFailure() << bad << " of " << got.size() << " mismatch:" << first;
  return ::testing::AssertionSuccess();
}

}  // namespace rlx::test
