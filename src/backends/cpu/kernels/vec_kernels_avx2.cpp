// AVX2 instances of the kernels written once over the vector traits: the norm rows
// (norm_rows_vec.h), the row kernels (row_kernels_vec.h) and the Winograd transforms
// (conv_winograd_vec.h), over vec_traits_avx2.h and
// vec_math.h. Only this file's functions carry the AVX2 target; they are reached only
// through norm_rows_f32_avx2(), row_kernels_avx2() and winograd_kernels_avx2(), which are used when detect_isa()
// says the CPU has AVX2.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "backends/cpu/kernels/conv_winograd.h"
#include "backends/cpu/kernels/isa_region.h"
#include "backends/cpu/kernels/norm_rows.h"
#include "backends/cpu/kernels/row_kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

RLX_ISA_REGION_BEGIN("avx2,fma,f16c")

namespace rlx::cpu::avx2_vec_kernels {
namespace {
#include "backends/cpu/kernels/vec_traits_avx2.h"
#include "backends/cpu/kernels/vec_math.h"
#include "backends/cpu/kernels/norm_rows_vec.h"
#include "backends/cpu/kernels/row_kernels_vec.h"
#include "backends/cpu/kernels/conv_winograd_vec.h"
}  // namespace
}  // namespace rlx::cpu::avx2_vec_kernels

RLX_ISA_REGION_END()

namespace rlx::cpu {
namespace reduce_movement {
const NormRows<float>* norm_rows_f32_avx2() {
  using namespace avx2_vec_kernels;
  static const NormRows<float> rows{softmax_row, log_softmax_row, layer_norm_row, rms_norm_row};
  return &rows;
}
}  // namespace reduce_movement

const RowKernels* row_kernels_avx2() {
  using namespace avx2_vec_kernels;
  static const RowKernels table{activate_row, exp_sum_row, max_row, scale_row, add_row, accumulate_row, tile_epilogue, max_taps,
                                  conv_row, copy_even, max3_s2, scale_add_max_row, dw_rows};
  return &table;
}

const WinogradKernels* winograd_kernels_avx2() {
  using namespace avx2_vec_kernels;
  static const WinogradKernels table{{wino_input<2>, wino_input<4>}, {wino_output<2>, wino_output<4>}};
  return &table;
}
}  // namespace rlx::cpu

#else
namespace rlx::cpu {
namespace reduce_movement {
const NormRows<float>* norm_rows_f32_avx2() { return nullptr; }
}  // namespace reduce_movement
const RowKernels* row_kernels_avx2() { return nullptr; }
const WinogradKernels* winograd_kernels_avx2() { return nullptr; }
}  // namespace rlx::cpu
#endif
