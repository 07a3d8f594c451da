// GGUF writer (version 3): metadata in insertion order, tensors aligned in the data section.
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>

#include "rlx/gguf.h"

namespace rlx::gguf {

namespace {

class Out {
 public:
  std::vector<uint8_t> b;
  template <class T>
  void put(T v) {
    size_t at = b.size();
    b.resize(at + sizeof(T));
    std::memcpy(b.data() + at, &v, sizeof(T));
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
  }
  void pad_to(uint64_t alignment) {
    while (b.size() % alignment) b.push_back(0);
  }
};

void put_scalar(Out& o, ValueType t, const MetaValue& v, int64_t i, double f) {
  switch (t) {
    case ValueType::U8: o.put<uint8_t>(static_cast<uint8_t>(i)); break;
    case ValueType::I8: o.put<int8_t>(static_cast<int8_t>(i)); break;
    case ValueType::U16: o.put<uint16_t>(static_cast<uint16_t>(i)); break;
    case ValueType::I16: o.put<int16_t>(static_cast<int16_t>(i)); break;
    case ValueType::U32: o.put<uint32_t>(static_cast<uint32_t>(i)); break;
    case ValueType::I32: o.put<int32_t>(static_cast<int32_t>(i)); break;
    case ValueType::U64: o.put<uint64_t>(static_cast<uint64_t>(i)); break;
    case ValueType::I64: o.put<int64_t>(i); break;
    case ValueType::Bool: o.put<uint8_t>(i ? 1 : 0); break;
    case ValueType::F32: o.put<float>(static_cast<float>(f)); break;
    case ValueType::F64: o.put<double>(f); break;
    default: (void)v; break;
  }
}

void put_value(Out& o, const MetaValue& v) {
  if (v.type == ValueType::String) return o.str(v.str);
  if (v.type != ValueType::Array) return put_scalar(o, v.type, v, v.i, v.f);
  o.put<uint32_t>(static_cast<uint32_t>(v.elem_type));
  o.put<uint64_t>(v.array_size());
  if (v.elem_type == ValueType::String) {
    for (const std::string& s : v.strs) o.str(s);
  } else if (v.elem_type == ValueType::Array) {
    for (const MetaValue& it : v.items) put_value(o, it);
  } else if (v.elem_type == ValueType::F32 || v.elem_type == ValueType::F64) {
    for (double f : v.floats) put_scalar(o, v.elem_type, v, 0, f);
  } else {
    for (int64_t i : v.ints) put_scalar(o, v.elem_type, v, i, 0);
  }
}

}  // namespace

void Writer::set(const std::string& key, MetaValue v) {
  for (auto& kv : meta_)
    if (kv.first == key) {
      kv.second = std::move(v);
      return;
    }
  meta_.emplace_back(key, std::move(v));
}
void Writer::set_string(const std::string& key, const std::string& s) { set(key, meta_string(s)); }
void Writer::set_u32(const std::string& key, uint32_t v) { set(key, meta_int(ValueType::U32, v)); }
void Writer::set_i32(const std::string& key, int32_t v) { set(key, meta_int(ValueType::I32, v)); }
void Writer::set_u64(const std::string& key, uint64_t v) { set(key, meta_int(ValueType::U64, static_cast<int64_t>(v))); }
void Writer::set_f32(const std::string& key, float v) { set(key, meta_float(ValueType::F32, v)); }
void Writer::set_bool(const std::string& key, bool v) { set(key, meta_int(ValueType::Bool, v)); }
void Writer::set_strings(const std::string& key, const std::vector<std::string>& v) {
  MetaValue m;
  m.type = ValueType::Array;
  m.elem_type = ValueType::String;
  m.strs = v;
  set(key, std::move(m));
}
void Writer::set_f32s(const std::string& key, const std::vector<float>& v) {
  MetaValue m;
  m.type = ValueType::Array;
  m.elem_type = ValueType::F32;
  m.floats.assign(v.begin(), v.end());
  set(key, std::move(m));
}
void Writer::set_i32s(const std::string& key, const std::vector<int32_t>& v) {
  MetaValue m;
  m.type = ValueType::Array;
  m.elem_type = ValueType::I32;
  m.ints.assign(v.begin(), v.end());
  set(key, std::move(m));
}

void Writer::copy_metadata(const File& f, const std::string& prefix) {
  for (const auto& [k, v] : f.metadata())
    if (k.compare(0, prefix.size(), prefix) == 0) set(k, v);
}

void Writer::add_tensor(const std::string& name, std::vector<int64_t> dims, TensorType type,
                        std::span<const uint8_t> data) {
  if (dims.empty() || dims.size() > 4)
    fail(ErrorCategory::InvalidArgument, "GGUF tensor '", name, "': ", dims.size(), " dims (1 to 4 allowed)");
  for (const Tensor& t : tensors_)
    if (t.info.name == name) fail(ErrorCategory::InvalidArgument, "GGUF tensor '", name, "' added twice");
  int64_t rows = 1;
  const int64_t rb = row_bytes(type, dims[0]);  // refuses negative or overflowing rows
  for (size_t k = 1; k < dims.size(); ++k) {
    if (dims[k] < 0 || (dims[k] && rows > INT64_MAX / dims[k]))
      fail(ErrorCategory::InvalidArgument, "GGUF tensor '", name, "': dims overflow 64 bits");
    rows *= dims[k];
  }
  if (rb && rows > INT64_MAX / rb) fail(ErrorCategory::InvalidArgument, "GGUF tensor '", name, "': size overflows 64 bits");
  uint64_t want = static_cast<uint64_t>(rb * rows);
  if (data.size() != want)
    fail(ErrorCategory::InvalidArgument, "GGUF tensor '", name, "': ", data.size(), " bytes given, ", type_name(type),
         " of these dims needs ", want);
  Tensor t;
  t.info.name = name;
  t.info.dims = std::move(dims);
  t.info.type = type;
  t.info.bytes = want;
  t.data.assign(data.begin(), data.end());
  tensors_.push_back(std::move(t));
}

std::vector<uint8_t> Writer::bytes() const {
  uint64_t alignment = 32;
  for (const auto& [k, v] : meta_)
    if (k == "general.alignment" && v.i > 0) alignment = static_cast<uint64_t>(v.i);
  Out o;
  o.put<uint32_t>(0x46554747u);  // "GGUF" little-endian
  o.put<uint32_t>(3);
  o.put<uint64_t>(tensors_.size());
  o.put<uint64_t>(meta_.size());
  for (const auto& [k, v] : meta_) {
    o.str(k);
    o.put<uint32_t>(static_cast<uint32_t>(v.type));
    put_value(o, v);
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    o.str(t.info.name);
    o.put<uint32_t>(static_cast<uint32_t>(t.info.dims.size()));
    for (int64_t d : t.info.dims) o.put<uint64_t>(static_cast<uint64_t>(d));
    o.put<uint32_t>(static_cast<uint32_t>(t.info.type));
    o.put<uint64_t>(offset);
    offset += (t.info.bytes + alignment - 1) / alignment * alignment;
  }
  o.pad_to(alignment);
  for (const Tensor& t : tensors_) {
    o.b.insert(o.b.end(), t.data.begin(), t.data.end());
    o.pad_to(alignment);
  }
  return o.b;
}

void Writer::write(const std::string& path) const {
  detail::guard("gguf::Writer::write", [&] {
    std::vector<uint8_t> b = bytes();
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    if (!f) fail(ErrorCategory::Io, "cannot create '", path, "': ", std::strerror(errno));
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    if (!f) fail(ErrorCategory::Io, "cannot write '", path, "': ", std::strerror(errno));
  });
}

}  // namespace rlx::gguf
