// One element of a typed blob, read or written as a double (see element.h).
#include "ir/element.h"

#include <cstring>

namespace rlx {

double read_element(const uint8_t* data, DType t, int64_t i) {
  auto get = [&](auto tag) {
    decltype(tag) x;
    std::memcpy(&x, data + size_t(i) * sizeof(x), sizeof(x));
    return x;
  };
  switch (t) {
    case DType::F32: return get(float());
    case DType::F64: return get(double());
    case DType::F16: return f16_to_f32(get(uint16_t()));
    case DType::BF16: return bf16_to_f32(get(uint16_t()));
    case DType::I8: return get(int8_t());
    case DType::I16: return get(int16_t());
    case DType::I32: return get(int32_t());
    case DType::I64: return double(get(int64_t()));
    case DType::U8: return get(uint8_t());
    case DType::U32: return get(uint32_t());
    case DType::Bool: return get(uint8_t()) != 0 ? 1.0 : 0.0;
    case DType::C64: {
      float x;
      std::memcpy(&x, data + size_t(i) * 8, 4);
      return x;
    }
    case DType::C128: {
      double x;
      std::memcpy(&x, data + size_t(i) * 16, 8);
      return x;
    }
  }
  return 0;
}

void write_element(uint8_t* data, DType t, int64_t i, double value) {
  auto put = [&](auto x) { std::memcpy(data + size_t(i) * sizeof(x), &x, sizeof(x)); };
  switch (t) {
    case DType::F32: put(float(value)); break;
    case DType::F64: put(value); break;
    case DType::F16: put(f32_to_f16(float(value))); break;
    case DType::BF16: put(f32_to_bf16(float(value))); break;
    case DType::I8: put(int8_t(value)); break;
    case DType::I16: put(int16_t(value)); break;
    case DType::I32: put(int32_t(value)); break;
    case DType::I64: put(int64_t(value)); break;
    case DType::U8: put(uint8_t(value)); break;
    case DType::U32: put(uint32_t(value)); break;
    case DType::Bool: put(uint8_t(value != 0)); break;
    case DType::C64: {
      float re = float(value), im = 0;
      std::memcpy(data + size_t(i) * 8, &re, 4);
      std::memcpy(data + size_t(i) * 8 + 4, &im, 4);
      break;
    }
    case DType::C128: {
      double re = value, im = 0;
      std::memcpy(data + size_t(i) * 16, &re, 8);
      std::memcpy(data + size_t(i) * 16 + 8, &im, 8);
      break;
    }
  }
}

}  // namespace rlx
