// OnnxValue: the public value of any kind, its descriptions, and its protobuf decoding.
#include "io/onnx/host_value.h"

#include <filesystem>
#include <fstream>
#include <limits>

namespace rlx::onnx {

OnnxValue OnnxValue::of(TypedTensor t, int onnx_type) {
  OnnxValue v;
  v.onnx_type = onnx_type ? onnx_type : onnx_type_of(t.dtype);
  v.tensor = std::move(t);
  return v;
}

OnnxValue OnnxValue::of_strings(std::vector<int64_t> dims, std::vector<std::string> strings) {
  OnnxValue v;
  v.onnx_type = kString;
  v.tensor.dtype = DType::U8;
  v.tensor.dims = std::move(dims);
  v.strings = std::move(strings);
  return v;
}

OnnxValue OnnxValue::sequence(std::vector<OnnxValue> items, int elem_type) {
  OnnxValue v;
  v.kind = ValueKind::Sequence;
  v.onnx_type = elem_type;
  if (!elem_type && !items.empty() && items[0].kind == ValueKind::Tensor) v.onnx_type = items[0].onnx_type;
  v.items = std::move(items);
  return v;
}

OnnxValue OnnxValue::optional(std::optional<OnnxValue> x, int elem_type) {
  OnnxValue v;
  v.kind = ValueKind::Optional;
  v.onnx_type = elem_type ? elem_type : x ? x->onnx_type : 0;
  if (x) v.items.push_back(std::move(*x));
  return v;
}

std::string OnnxValue::describe() const {
  switch (kind) {
    case ValueKind::Tensor: {
      std::string s = is_string() ? "string" : std::string(dtype_name(tensor.dtype));
      s += "[";
      for (size_t i = 0; i < tensor.dims.size(); ++i) s += (i ? "," : "") + std::to_string(tensor.dims[i]);
      return s + "]";
    }
    case ValueKind::Sequence:
      return "sequence(" + std::to_string(items.size()) + (items.empty() ? "" : " x " + items[0].describe()) + ")";
    case ValueKind::Optional: return items.empty() ? "optional(none)" : "optional(" + items[0].describe() + ")";
    case ValueKind::Map: return "map";
  }
  return "value";
}

int64_t checked_numel(const std::vector<int64_t>& dims, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) fail(ErrorCategory::Shape, what, ": negative dim ", d);
    if (d && n > std::numeric_limits<int64_t>::max() / d) fail(ErrorCategory::Shape, what, ": too many elements");
    n *= d;
  }
  return n;
}

namespace {

constexpr int kMaxNesting = 16;

OnnxValue decode_strings(const pb::TensorProto& t, const std::string& what) {
  std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
  int64_t n = checked_numel(dims, what);
  if (t.data_location() == pb::TensorProto::EXTERNAL || t.has_raw_data())
    fail(ErrorCategory::Parse, what, ": a string tensor keeps its elements in string_data");
  if (int64_t(t.string_data_size()) != n)
    fail(ErrorCategory::Parse, what, ": ", t.string_data_size(), " strings for ", n, " elements");
  return OnnxValue::of_strings(std::move(dims), {t.string_data().begin(), t.string_data().end()});
}

OnnxValue decode_seq(const pb::SequenceProto& s, const std::string& base_dir, const std::string& what, int depth);

OnnxValue decode_opt(const pb::OptionalProto& o, const std::string& base_dir, const std::string& what, int depth) {
  if (depth > kMaxNesting) fail(ErrorCategory::Parse, what, ": values nested deeper than ", kMaxNesting);
  switch (o.elem_type()) {
    case pb::OptionalProto::UNDEFINED: return OnnxValue::optional(std::nullopt);
    case pb::OptionalProto::TENSOR:
      if (!o.has_tensor_value()) return OnnxValue::optional(std::nullopt);
      return OnnxValue::optional(decode_value(o.tensor_value(), base_dir, what));
    case pb::OptionalProto::SEQUENCE:
      if (!o.has_sequence_value()) return OnnxValue::optional(std::nullopt);
      return OnnxValue::optional(decode_seq(o.sequence_value(), base_dir, what, depth + 1));
    default: fail(ErrorCategory::Unsupported, what, ": optional of element kind ", int(o.elem_type()));
  }
}

OnnxValue decode_seq(const pb::SequenceProto& s, const std::string& base_dir, const std::string& what, int depth) {
  if (depth > kMaxNesting) fail(ErrorCategory::Parse, what, ": values nested deeper than ", kMaxNesting);
  std::vector<OnnxValue> items;
  switch (s.elem_type()) {
    case pb::SequenceProto::UNDEFINED:
    case pb::SequenceProto::TENSOR:
      for (int i = 0; i < s.tensor_values_size(); ++i)
        items.push_back(decode_value(s.tensor_values(i), base_dir, what + " element " + std::to_string(i)));
      break;
    case pb::SequenceProto::SEQUENCE:
      for (int i = 0; i < s.sequence_values_size(); ++i)
        items.push_back(decode_seq(s.sequence_values(i), base_dir, what + " element " + std::to_string(i), depth + 1));
      break;
    case pb::SequenceProto::OPTIONAL:
      for (int i = 0; i < s.optional_values_size(); ++i)
        items.push_back(decode_opt(s.optional_values(i), base_dir, what + " element " + std::to_string(i), depth + 1));
      break;
    default: fail(ErrorCategory::Unsupported, what, ": sequence of element kind ", int(s.elem_type()));
  }
  return OnnxValue::sequence(std::move(items));
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(ErrorCategory::Io, "cannot open '", path, "'");
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

}  // namespace

OnnxValue decode_value(const pb::TensorProto& t, const std::string& base_dir, const std::string& what) {
  if (t.data_type() == kString) return decode_strings(t, what);
  return from_host(decode_tensor(t, base_dir, what));
}

OnnxValue decode_value(const pb::SequenceProto& s, const std::string& base_dir, const std::string& what) {
  return decode_seq(s, base_dir, what, 0);
}

OnnxValue decode_value(const pb::OptionalProto& o, const std::string& base_dir, const std::string& what) {
  return decode_opt(o, base_dir, what, 0);
}

OnnxValue read_value_file(const std::string& path, const pb::TypeProto& type) {
  std::string data = read_file(path);
  std::string dir = std::filesystem::path(path).parent_path().string();
  std::string what = "'" + path + "'";
  if (type.has_sequence_type()) {
    pb::SequenceProto s;
    if (!s.ParseFromString(data)) fail(ErrorCategory::Parse, what, " is not a valid SequenceProto");
    return decode_value(s, dir, what);
  }
  if (type.has_optional_type()) {
    pb::OptionalProto o;
    if (!o.ParseFromString(data)) fail(ErrorCategory::Parse, what, " is not a valid OptionalProto");
    return decode_value(o, dir, what);
  }
  if (type.has_map_type() || type.has_sparse_tensor_type())
    fail(ErrorCategory::Unsupported, what, ": map and sparse values are not supported");
  pb::TensorProto t;
  if (!t.ParseFromString(data)) fail(ErrorCategory::Parse, what, " is not a valid TensorProto");
  return decode_value(t, dir, what);
}

HostTensor to_host(const OnnxValue& v, const std::string& what) {
  if (!v.is_numeric()) fail(ErrorCategory::Unsupported, what, " is ", v.describe(), ", not a numeric tensor");
  return HostTensor{v.onnx_type ? v.onnx_type : onnx_type_of(v.tensor.dtype), v.tensor.dtype, v.tensor.dims,
                    v.tensor.bytes};
}

OnnxValue from_host(HostTensor h) {
  int t = h.onnx_type;
  return OnnxValue::of(TypedTensor{h.dtype, std::move(h.dims), std::move(h.bytes)}, t);
}

}  // namespace rlx::onnx
