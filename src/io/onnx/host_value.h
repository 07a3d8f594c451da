// Internal: values of every kind the runner carries on the host (string tensors,
// sequences, optionals; OnnxValue in rlx/onnx.h): their protobuf decoding and the
// conversions to the HostTensor the importer folds with.
#pragma once
#include <string>

#include "io/onnx/tensor.h"
#include "rlx/onnx.h"

namespace rlx::onnx {

// Any TensorProto (numeric or strings), SequenceProto or OptionalProto as a value;
// Error(Parse) naming `what` for malformed ones (dims that disagree with the data, an
// element type the kind does not allow, nesting deeper than 16).
OnnxValue decode_value(const pb::TensorProto& t, const std::string& base_dir, const std::string& what);
OnnxValue decode_value(const pb::SequenceProto& s, const std::string& base_dir, const std::string& what);
OnnxValue decode_value(const pb::OptionalProto& o, const std::string& base_dir, const std::string& what);
// Reads a serialized value of type `type` from a file (conformance data: a TensorProto,
// SequenceProto or OptionalProto by the kind of `type`).
OnnxValue read_value_file(const std::string& path, const pb::TypeProto& type);

// A numeric tensor value as the importer's constant (Unsupported naming `what` for any
// other kind) and back.
HostTensor to_host(const OnnxValue& v, const std::string& what);
OnnxValue from_host(HostTensor h);

// True for a value the compiled graphs cannot carry (strings, sequences, optionals).
inline bool is_host_value(const OnnxValue& v) { return !v.is_numeric(); }

// Elements of a shape, checked (Error(Shape) naming `what` for negative dims or an
// overflow).
int64_t checked_numel(const std::vector<int64_t>& dims, const std::string& what);

}  // namespace rlx::onnx
