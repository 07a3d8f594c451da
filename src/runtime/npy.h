// NumPy .npy files: read and write tensors of every rlx dtype.
//
// Format versions 1.0, 2.0 and 3.0 are read (2-byte or 4-byte header length); files are
// written as 1.0 unless the header needs more than 65535 bytes (then 2.0). Only C order
// is accepted for rank >= 2 (fortran_order True is refused). Little-endian, big-endian
// ('>') and byte-order-free ('|') descriptors are read; data is always written
// little-endian. Descriptor <-> dtype: f4 f32, f2 f16, f8 f64, i1 i8, i2 i16, i4 i32,
// i8 i64, u1 u8, u4 u32, b1 bool, c8 c64, c16 c128, and V2 bf16 (NumPy has no bf16:
// such files load in NumPy as raw 2-byte voids; `.view(ml_dtypes.bfloat16)` reads them).
//
// String arrays: '<U{n}' (NumPy's fixed-width UTF-32) and '|S{n}' (bytes) read as
// NpyStrings (UTF-8; trailing NULs stripped, as NumPy does); strings are written as '<U{n}'
// with n the longest string's code points. parse_npy refuses them (a numeric tensor is
// expected there) and names parse_npy_any.
//
// Errors: Error(Parse) naming the file and the byte offset for malformed files (bad
// magic, truncated header or data, header syntax, unknown descriptor, trailing bytes),
// Error(Unsupported) for valid files rlx cannot hold (e.g. u2, fortran order),
// Error(Io) when the file cannot be read or written.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/compiled_graph.h"

namespace rlx::runtime {

TypedTensor parse_npy(std::span<const uint8_t> bytes, std::string_view source = "<npy>");
TypedTensor read_npy(const std::string& path);

struct NpyStrings {
  std::vector<int64_t> dims;
  std::vector<std::string> strings;  // row-major, UTF-8
};
// A numeric tensor or an array of strings, whichever the file holds.
struct NpyArray {
  bool is_strings = false;
  TypedTensor tensor;  // when !is_strings
  NpyStrings text;     // when is_strings
};
NpyArray parse_npy_any(std::span<const uint8_t> bytes, std::string_view source = "<npy>");
NpyArray read_npy_any(const std::string& path);
// Throws Error(InvalidArgument) on invalid UTF-8 or a count that does not match the dims.
std::vector<uint8_t> encode_npy_strings(const NpyStrings& s);
void write_npy_strings(const std::string& path, const NpyStrings& s);

// Throws Error(InvalidArgument) if the dims do not match the byte count.
std::vector<uint8_t> encode_npy(const TypedTensor& t);
void write_npy(const std::string& path, const TypedTensor& t);

std::string npy_descr(DType t);  // e.g. "<f4", "|b1", "<V2"

}  // namespace rlx::runtime
