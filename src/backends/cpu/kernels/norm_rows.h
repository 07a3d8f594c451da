// Row functions of the norm family: one contiguous row of n elements in, one out.
// Each may run in place (x == y). f32 has scalar, AVX2 and AVX-512 versions picked by
// ISA when a call is built; f64 uses the scalar template. Every version reduces in a
// fixed lane order, so a given version is deterministic for any thread count.
#pragma once
#include <cstdint>

#include "backends/cpu/isa.h"

namespace rlx::cpu::reduce_movement {

template <class A> struct NormRows {
  void (*softmax)(const A* x, A* y, int64_t n) = nullptr;
  void (*log_softmax)(const A* x, A* y, int64_t n) = nullptr;
  // scale / bias: nullptr when absent, else n elements.
  void (*layer_norm)(const A* x, A* y, int64_t n, const A* scale, const A* bias, A eps) = nullptr;
  void (*rms_norm)(const A* x, A* y, int64_t n, const A* scale, A eps) = nullptr;
};

// Best available for `isa` (falls back to a lower level when not compiled in).
const NormRows<float>& norm_rows_f32(Isa isa);
const NormRows<double>& norm_rows_f64();
// The vector versions (nullptr where not compiled in); call only when the CPU has the ISA.
const NormRows<float>* norm_rows_f32_avx2();
const NormRows<float>* norm_rows_f32_avx512();

}  // namespace rlx::cpu::reduce_movement
