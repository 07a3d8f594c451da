// GGUF / ggml element types: block geometry and names.
#include <cctype>

#include "rlx/gguf.h"

namespace rlx::gguf {

namespace {

struct Entry {
  uint32_t id;
  TypeTraits traits;
};
// Block sizes follow ggml's block structs (ggml-common.h): e.g. Q4_K is two f16 scales,
// 12 packed 6-bit sub-block scales and 128 bytes of nibbles for 256 elements.
constexpr Entry kTypes[] = {
    {0, {"f32", 1, 4}},          {1, {"f16", 1, 2}},         {2, {"q4_0", 32, 18}},
    {3, {"q4_1", 32, 20}},       {6, {"q5_0", 32, 22}},      {7, {"q5_1", 32, 24}},
    {8, {"q8_0", 32, 34}},       {9, {"q8_1", 32, 36}},      {10, {"q2_K", 256, 84}},
    {11, {"q3_K", 256, 110}},    {12, {"q4_K", 256, 144}},   {13, {"q5_K", 256, 176}},
    {14, {"q6_K", 256, 210}},    {15, {"q8_K", 256, 292}},   {16, {"iq2_xxs", 256, 66}},
    {17, {"iq2_xs", 256, 74}},   {18, {"iq3_xxs", 256, 98}}, {19, {"iq1_s", 256, 50}},
    {20, {"iq4_nl", 32, 18}},    {21, {"iq3_s", 256, 110}},  {22, {"iq2_s", 256, 82}},
    {23, {"iq4_xs", 256, 136}},  {24, {"i8", 1, 1}},         {25, {"i16", 1, 2}},
    {26, {"i32", 1, 4}},         {27, {"i64", 1, 8}},        {28, {"f64", 1, 8}},
    {29, {"iq1_m", 256, 56}},    {30, {"bf16", 1, 2}},       {34, {"tq1_0", 256, 54}},
    {35, {"tq2_0", 256, 66}},    {39, {"mxfp4", 32, 17}},
};

}  // namespace

const TypeTraits* type_traits(uint32_t type) {
  for (const Entry& e : kTypes)
    if (e.id == type) return &e.traits;
  return nullptr;
}

const TypeTraits& type_traits(TensorType type) {
  const TypeTraits* t = type_traits(static_cast<uint32_t>(type));
  if (!t) fail(ErrorCategory::InvalidArgument, "unknown GGUF tensor type ", static_cast<uint32_t>(type));
  return *t;
}

const char* type_name(TensorType type) { return type_traits(type).name; }

bool type_from_name(const std::string& name, TensorType& out) {
  for (const Entry& e : kTypes) {
    std::string n = e.traits.name;
    if (n.size() != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < n.size() && same; ++i)
      same = std::tolower(static_cast<unsigned char>(n[i])) == std::tolower(static_cast<unsigned char>(name[i]));
    if (same) {
      out = static_cast<TensorType>(e.id);
      return true;
    }
  }
  return false;
}

int64_t row_bytes(TensorType type, int64_t elems) {
  const TypeTraits& t = type_traits(type);
  if (elems < 0 || elems % t.block_elems != 0)
    fail(ErrorCategory::InvalidArgument, "a row of ", elems, " elements is not a whole number of ", t.name,
         " blocks (", t.block_elems, " elements each)");
  return elems / t.block_elems * t.block_bytes;
}

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
