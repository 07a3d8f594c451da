#include "rlx/dtype.h"

#include <bit>
#include <cstring>

#include "rlx/error.h"

namespace rlx {

namespace {
struct DTypeInfo {
  std::string_view name;
  size_t size;
};
constexpr DTypeInfo kInfo[kNumDTypes] = {
    {"f32", 4}, {"f16", 2}, {"bf16", 2}, {"f64", 8}, {"i8", 1},  {"i16", 2},  {"i32", 4},
    {"i64", 8}, {"u8", 1},  {"u32", 4},  {"bool", 1}, {"c64", 8}, {"c128", 16},
};
const DTypeInfo& info(DType t) {
  auto i = size_t(t);
  if (i >= size_t(kNumDTypes)) fail(ErrorCategory::InvalidArgument, "invalid dtype code ", i);
  return kInfo[i];
}

// Rank in the promotion lattice within a class; the wider/higher wins.
int float_rank(DType t) {
  switch (t) {
    case DType::F16: return 1;
    case DType::BF16: return 2;
    case DType::F32: return 3;
    case DType::F64: return 4;
    default: return 0;
  }
}
int int_rank(DType t) {
  switch (t) {
    case DType::Bool: return 0;
    case DType::U8: return 1;
    case DType::I8: return 2;
    case DType::I16: return 3;
    case DType::U32: return 4;
    case DType::I32: return 5;
    case DType::I64: return 6;
    default: return -1;
  }
}
}  // namespace

size_t dtype_size(DType t) { return info(t).size; }
std::string_view dtype_name(DType t) { return info(t).name; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (kInfo[i].name == name) return DType(i);
  return std::nullopt;
}

bool is_float(DType t) { return float_rank(t) > 0; }
bool is_integer(DType t) { return int_rank(t) > 0; }
bool is_signed(DType t) {
  return is_float(t) || t == DType::I8 || t == DType::I16 || t == DType::I32 || t == DType::I64;
}
bool is_complex(DType t) { return t == DType::C64 || t == DType::C128; }

DType promote(DType a, DType b) {
  if (a == b) return a;
  if (is_complex(a) || is_complex(b)) {
    bool wide = a == DType::C128 || b == DType::C128 || a == DType::F64 || b == DType::F64;
    return wide ? DType::C128 : DType::C64;
  }
  if (is_float(a) || is_float(b)) {
    if (!is_float(a)) return b;
    if (!is_float(b)) return a;
    // f16 with bf16 has no exact common narrow type: go to f32.
    if ((a == DType::F16 && b == DType::BF16) || (a == DType::BF16 && b == DType::F16)) return DType::F32;
    return float_rank(a) > float_rank(b) ? a : b;
  }
  // Mixed signedness: the smallest signed type holding both (u32 with a signed -> i64).
  if ((a == DType::U32 && is_signed(b) && b != DType::I64) || (b == DType::U32 && is_signed(a) && a != DType::I64))
    return DType::I64;
  if ((a == DType::U8 && b == DType::I8) || (a == DType::I8 && b == DType::U8)) return DType::I16;
  return int_rank(a) > int_rank(b) ? a : b;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do { ++e; man <<= 1; } while ((man & 0x400) == 0);
      bits = sign | (uint32_t(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t f32_to_f16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint16_t sign = uint16_t((x >> 16) & 0x8000);
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) {  // inf or nan (keep nan quiet)
    return uint16_t(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 | ((absx >> 13) & 0x3ff) : 0));
  }
  if (absx >= 0x477ff000u) return uint16_t(sign | 0x7c00);  // rounds to inf
  if (absx < 0x38800000u) {  // result is subnormal or zero
    if (absx < 0x33000000u) return sign;  // below half the smallest subnormal
    uint32_t man = (absx & 0x7fffff) | 0x800000;
    int shift = 126 - int(absx >> 23);  // 14 + (113 - exp)
    uint32_t rounded = man >> (shift - 1 + 1);
    uint32_t rem = man & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (rounded & 1))) ++rounded;
    return uint16_t(sign | rounded);
  }
  // normal: rebias exponent, round mantissa to nearest even
  uint32_t v = absx - 0x38000000u;  // exponent bias 127 -> 15
  uint32_t rounded = v >> 13;
  uint32_t rem = v & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (rounded & 1))) ++rounded;
  return uint16_t(sign | rounded);
}

float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

uint16_t f32_to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40);  // quiet nan
  uint32_t lsb = (x >> 16) & 1;
  x += 0x7fffu + lsb;
  return uint16_t(x >> 16);
}

}  // namespace rlx
