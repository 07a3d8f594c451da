// Internal: ONNX element types and TensorProto decoding.
//
// Every ONNX tensor type is carried as an rlx dtype (see include/rlx/onnx.h): sub-byte
// and 8-bit float types are unpacked/decoded at this boundary, so HostTensor::bytes
// always hold dense elements of HostTensor::dtype. Decoding validates sizes against
// the dims and throws Error(Parse) naming `what`.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/onnx/proto.h"
#include "rlx/graph.h"

namespace rlx::onnx {

enum OnnxType : int {
  kUndefined = 0, kFloat = 1, kUint8 = 2, kInt8 = 3, kUint16 = 4, kInt16 = 5, kInt32 = 6, kInt64 = 7,
  kString = 8, kBool = 9, kFloat16 = 10, kDouble = 11, kUint32 = 12, kUint64 = 13, kComplex64 = 14,
  kComplex128 = 15, kBFloat16 = 16, kF8E4M3FN = 17, kF8E4M3FNUZ = 18, kF8E5M2 = 19, kF8E5M2FNUZ = 20,
  kUint4 = 21, kInt4 = 22, kF4E2M1 = 23, kF8E8M0 = 24, kUint2 = 25, kInt2 = 26,
};

std::string onnx_type_name(int t);  // "FLOAT", "INT64", ..., "type 99"
// The type called `name` by onnx_type_name ("FLOAT", ...; any case), nullopt for none.
std::optional<int> onnx_type_named(std::string_view name);
// The dtype a type is carried as; nullopt for strings and unknown codes.
std::optional<DType> carried_dtype(int onnx_type);
// The ONNX type whose natural representation is `d` (inverse of carried_dtype on the
// types that are not widened).
int onnx_type_of(DType d);
// Bits per stored element (4 for int4/uint4/float4, 2 for int2/uint2, else 8 * size).
int stored_bits(int onnx_type);
bool is_minifloat(int onnx_type);  // float8 variants, float4, e8m0
float decode_minifloat(uint32_t bits, int onnx_type);
// Rounds f to the nearest value of the minifloat type (ties to even); saturate clamps
// out-of-range finite values to the largest finite value (else they become inf/NaN as
// the type defines). Returns the decoded value of the result.
float round_to_minifloat(float f, int onnx_type, bool saturate);

struct HostTensor {
  int onnx_type = kFloat;
  DType dtype = DType::F32;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
  int64_t numel() const;
  Shape shape() const { return Shape(dims, dtype); }
};

// Decodes raw_data / typed fields / external data (resolved under base_dir).
HostTensor decode_tensor(const pb::TensorProto& t, const std::string& base_dir, const std::string& what);
// Reads a TensorProto from a .pb file (conformance data).
HostTensor read_tensor_file(const std::string& path);

// Element access helpers for small constant tensors of any real dtype.
std::vector<int64_t> tensor_to_i64(const HostTensor& t);
std::vector<double> tensor_to_f64(const HostTensor& t);
double read_scalar(const uint8_t* p, DType d);
void write_scalar(uint8_t* p, DType d, double v);
HostTensor make_tensor(DType d, std::vector<int64_t> dims, const std::vector<double>& values);
HostTensor make_i64(std::vector<int64_t> dims, const std::vector<int64_t>& values);

}  // namespace rlx::onnx
