// GGUF metadata values: sizes, printing, typed lookups on a File.
#include <cstdio>
#include <sstream>

#include "rlx/gguf.h"

namespace rlx::gguf {

namespace {
bool is_int_type(ValueType t) {
  return t == ValueType::U8 || t == ValueType::I8 || t == ValueType::U16 || t == ValueType::I16 ||
         t == ValueType::U32 || t == ValueType::I32 || t == ValueType::U64 || t == ValueType::I64 ||
         t == ValueType::Bool;
}
bool is_float_type(ValueType t) { return t == ValueType::F32 || t == ValueType::F64; }

std::string quoted(const std::string& s, size_t max_chars = 64) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < max_chars; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') { out += '\\'; out += static_cast<char>(c); }
    else if (c == '\n') out += "\\n";
    else if (c < 0x20) { char b[8]; std::snprintf(b, sizeof b, "\\x%02x", c); out += b; }
    else out += static_cast<char>(c);
  }
  if (s.size() > max_chars) out += "...";
  return out + "\"";
}
}  // namespace

uint64_t MetaValue::array_size() const {
  if (type != ValueType::Array) return 0;
  if (elem_type == ValueType::String) return strs.size();
  if (elem_type == ValueType::Array) return items.size();
  if (is_float_type(elem_type)) return floats.size();
  return ints.size();
}

std::string MetaValue::to_string(size_t max_items) const {
  std::ostringstream os;
  switch (type) {
    case ValueType::String: return quoted(str);
    case ValueType::Bool: return i ? "true" : "false";
    case ValueType::F32:
    case ValueType::F64: os << f; return os.str();
    case ValueType::Array: {
      uint64_t n = array_size();
      os << "[" << value_type_name(elem_type) << " x " << n << "]";
      if (n == 0) return os.str();
      os << " ";
      for (uint64_t k = 0; k < n && k < max_items; ++k) {
        if (k) os << ", ";
        if (elem_type == ValueType::String) os << quoted(strs[k], 24);
        else if (elem_type == ValueType::Array) os << items[k].to_string(max_items);
        else if (is_float_type(elem_type)) os << floats[k];
        else os << ints[k];
      }
      if (n > max_items) os << ", ...";
      return os.str();
    }
    default:
      if (type == ValueType::U64) os << static_cast<uint64_t>(i);
      else os << i;
      return os.str();
  }
}

MetaValue meta_string(const std::string& s) {
  MetaValue v;
  v.type = ValueType::String;
  v.str = s;
  return v;
}
MetaValue meta_int(ValueType t, int64_t x) {
  MetaValue v;
  v.type = t;
  v.i = x;
  return v;
}
MetaValue meta_float(ValueType t, double x) {
  MetaValue v;
  v.type = t;
  v.f = x;
  return v;
}

// ---- typed lookups
const MetaValue* File::find(const std::string& key) const {
  auto it = meta_index_.find(key);
  return it == meta_index_.end() ? nullptr : &meta_[it->second].second;
}

namespace {
[[noreturn]] void wrong_kind(const std::string& path, const std::string& key, const MetaValue& v, const char* want) {
  fail(ErrorCategory::Parse, "GGUF file '", path, "': metadata key '", key, "' is ", value_type_name(v.type),
       v.type == ValueType::Array ? std::string(" of ") + value_type_name(v.elem_type) : std::string(),
       ", expected ", want);
}
}  // namespace

std::string File::get_string(const std::string& key) const {
  const MetaValue* v = find(key);
  if (!v) fail(ErrorCategory::Parse, "GGUF file '", path_, "': metadata key '", key, "' is missing");
  if (v->type != ValueType::String) wrong_kind(path_, key, *v, "a string");
  return v->str;
}
std::string File::get_string(const std::string& key, const std::string& dflt) const {
  return has(key) ? get_string(key) : dflt;
}
int64_t File::get_int(const std::string& key) const {
  const MetaValue* v = find(key);
  if (!v) fail(ErrorCategory::Parse, "GGUF file '", path_, "': metadata key '", key, "' is missing");
  if (!is_int_type(v->type)) wrong_kind(path_, key, *v, "an integer");
  return v->i;
}
int64_t File::get_int(const std::string& key, int64_t dflt) const { return has(key) ? get_int(key) : dflt; }
double File::get_float(const std::string& key, double dflt) const {
  const MetaValue* v = find(key);
  if (!v) return dflt;
  if (is_float_type(v->type)) return v->f;
  if (is_int_type(v->type)) return static_cast<double>(v->i);
  wrong_kind(path_, key, *v, "a number");
}
bool File::get_bool(const std::string& key, bool dflt) const {
  const MetaValue* v = find(key);
  if (!v) return dflt;
  if (!is_int_type(v->type)) wrong_kind(path_, key, *v, "a bool");
  return v->i != 0;
}
const std::vector<std::string>& File::get_strings(const std::string& key) const {
  const MetaValue* v = find(key);
  if (!v) fail(ErrorCategory::Parse, "GGUF file '", path_, "': metadata key '", key, "' is missing");
  if (v->type != ValueType::Array || v->elem_type != ValueType::String) wrong_kind(path_, key, *v, "an array of strings");
  return v->strs;
}
std::vector<double> File::get_numbers(const std::string& key) const {
  const MetaValue* v = find(key);
  if (!v) fail(ErrorCategory::Parse, "GGUF file '", path_, "': metadata key '", key, "' is missing");
  if (v->type != ValueType::Array) wrong_kind(path_, key, *v, "an array of numbers");
  if (is_float_type(v->elem_type)) return v->floats;
  if (!is_int_type(v->elem_type)) wrong_kind(path_, key, *v, "an array of numbers");
  return std::vector<double>(v->ints.begin(), v->ints.end());
}

void File::drop_arrays(const std::string& prefix) {
  for (auto& [k, v] : meta_)
    if (v.type == ValueType::Array && k.compare(0, prefix.size(), prefix) == 0) {
      std::vector<int64_t>().swap(v.ints);
      std::vector<double>().swap(v.floats);
      std::vector<std::string>().swap(v.strs);
      std::vector<MetaValue>().swap(v.items);
    }
}

const TensorInfo* File::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}
const TensorInfo& File::tensor(const std::string& name) const {
  const TensorInfo* t = find_tensor(name);
  if (!t) fail(ErrorCategory::Parse, "GGUF file '", path_, "': no tensor named '", name, "'");
  return *t;
}
const uint8_t* File::data(const TensorInfo& t) const { return base_ + data_offset_ + t.offset; }

}  // namespace rlx::gguf
