// What the CUDA tests share: the skip without a usable device, seeded uniform inputs in
// [-1, 1].
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "rlx/rlx.h"

namespace rlx::cuda_test {

// Empty when CUDA runs here; else the reason the runtime gives.
inline std::string cuda_unavailable() {
  for (Device d : Session::available_devices())
    if (d == Device::Cuda) return "";
  try {
    Graph g;
    g.set_outputs({g.relu(g.input("x", Shape({1}, DType::F32)))});
    Session(Device::Cuda).compile(g);
  } catch (const Error& e) {
    return e.what();
  }
  return "CUDA is not listed as available";
}

#define REQUIRE_CUDA()                                                              \
  do {                                                                              \
    const std::string why = ::rlx::cuda_test::cuda_unavailable();                   \
    if (!why.empty()) GTEST_SKIP() << "no usable CUDA device: " << why;             \
  } while (0)

inline std::vector<float> randoms(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// An f32 tensor of `dims` holding randoms(seed) scaled by amp.
inline TypedTensor random_f32(std::vector<int64_t> dims, uint32_t seed, float amp = 1.0f) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<float> v = randoms(size_t(n), seed);
  for (float& x : v) x *= amp;
  TypedTensor t{DType::F32, std::move(dims), std::vector<uint8_t>(v.size() * sizeof(float))};
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

}  // namespace rlx::cuda_test
