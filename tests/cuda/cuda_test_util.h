// What the CUDA tests share: seeded uniform inputs in [-1, 1].
#pragma once
#include <cstdint>
#include <random>
#include <vector>

namespace rlx::cuda_test {

inline std::vector<float> randoms(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

}  // namespace rlx::cuda_test
