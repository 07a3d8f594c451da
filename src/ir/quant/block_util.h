// Internal: helpers the block (de)quantizers share, with ggml's arithmetic.
#pragma once
#include <cstdint>
#include <cstring>

#include "ir/host_device.h"
#include "rlx/dtype.h"

namespace rlx::quant::detail {

// The IEEE half at p (unaligned), as float.
inline float h2f(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// Stores v as an IEEE half at p (round to nearest even).
inline void put_f16(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

// The 16 non-uniform levels of IQ4_NL / IQ4_XS (a nibble picks one).
inline constexpr int8_t kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// The 6-bit scale d and min m of sub-block j of a Q4_K / Q5_K block's 12 scale bytes q (T:
// uint8_t for the CPU's (de)quantizers, int in the CUDA backend's row dots, which include
// this header for it).
template <class T>
RLX_HOST_DEVICE inline void scale_min_k4(int j, const uint8_t* q, T& d, T& m) {
  if (j < 4) {
    d = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

}  // namespace rlx::quant::detail
