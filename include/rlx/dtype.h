// Element types and the one promotion table.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace rlx {

// Append only: the numeric values index per-dtype tables (kNumDTypes entries) and may be
// stored by users; the text format and .npy files name dtypes, not numbers.
enum class DType : uint8_t { F32, F16, BF16, F64, I8, I16, I32, I64, U8, U32, Bool, C64, C128 };
inline constexpr int kNumDTypes = 13;

size_t dtype_size(DType t);                 // bytes per element (C64 = 8, C128 = 16, Bool = 1)
std::string_view dtype_name(DType t);       // "f32", "f16", "bf16", ..., "bool", "c64", "c128"
std::optional<DType> dtype_from_name(std::string_view name);

bool is_float(DType t);     // F32, F16, BF16, F64
bool is_integer(DType t);   // I8..I64, U8, U32
bool is_signed(DType t);    // floats and signed integers
bool is_complex(DType t);   // C64, C128

// Result type of a binary arithmetic op on a and b (numpy-like: float beats int,
// wider beats narrower, complex beats real). Bool promotes to the other operand.
DType promote(DType a, DType b);

// Half-precision conversions used at boundaries and by kernels.
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);      // round to nearest even
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);     // round to nearest even

}  // namespace rlx
