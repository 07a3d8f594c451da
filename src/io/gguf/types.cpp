// GGUF tensor types: the block formats of rlx/quant.h under GGUF's names.
#include "rlx/gguf.h"
#include "rlx/quant.h"

namespace rlx::gguf {

const TypeTraits* type_traits(uint32_t type) { return type < 256 ? quant::find(type) : nullptr; }

const TypeTraits& type_traits(TensorType type) {
  const TypeTraits* t = type_traits(static_cast<uint32_t>(type));
  if (!t) fail(ErrorCategory::InvalidArgument, "unknown GGUF tensor type ", static_cast<uint32_t>(type));
  return *t;
}

const char* type_name(TensorType type) { return type_traits(type).name; }

bool type_from_name(const std::string& name, TensorType& out) {
  uint32_t id = 0;
  if (!quant::from_name(name.c_str(), id) || !type_traits(id)) return false;
  out = static_cast<TensorType>(id);
  return true;
}

int64_t row_bytes(TensorType type, int64_t elems) { return quant::row_bytes(static_cast<uint32_t>(type), elems); }

bool can_dequantize(TensorType t) { return quant::can_dequantize(static_cast<uint32_t>(t)); }
void dequantize(TensorType t, const void* src, float* dst, int64_t n) {
  quant::dequantize(static_cast<uint32_t>(t), src, dst, n);
}
bool can_quantize(TensorType t) { return quant::can_quantize(static_cast<uint32_t>(t)); }
void quantize(TensorType t, const float* src, void* dst, int64_t n) { quant::quantize(static_cast<uint32_t>(t), src, dst, n); }

const char* value_type_name(ValueType t) {
  switch (t) {
    case ValueType::U8: return "u8";
    case ValueType::I8: return "i8";
    case ValueType::U16: return "u16";
    case ValueType::I16: return "i16";
    case ValueType::U32: return "u32";
    case ValueType::I32: return "i32";
    case ValueType::F32: return "f32";
    case ValueType::Bool: return "bool";
    case ValueType::String: return "string";
    case ValueType::Array: return "array";
    case ValueType::U64: return "u64";
    case ValueType::I64: return "i64";
    case ValueType::F64: return "f64";
  }
  return "?";
}

int64_t TensorInfo::elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;  // bounded when the file was read
  return n;
}

}  // namespace rlx::gguf
