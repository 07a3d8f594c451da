// GGUF files (the llama.cpp model format): reader, writer, tensor element types.
//
// gguf::File reads GGUF v2 and v3: the header, every metadata value type (nested arrays
// included), the tensor infos and the alignment. Tensor data is memory-mapped and never
// copied: File::data(t) points into the mapping, which lives as long as any copy of the
// File. Every offset, count and length is checked against the file before it is used, so a
// truncated or inconsistent file (offsets past the end, absurd counts, unknown types,
// overlapping tensors, a row size that is not a whole number of blocks) is an
// Error(Parse) that names the file and the byte offset at fault.
//
// gguf::Writer builds a file in memory (metadata + tensors) and writes it, version 3,
// with the default alignment of 32 unless general.alignment says otherwise.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "rlx/error.h"
#include "rlx/quant.h"

namespace rlx::gguf {

// Metadata value types, numbered as in the file format.
enum class ValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7, String = 8,
  Array = 9, U64 = 10, I64 = 11, F64 = 12,
};
const char* value_type_name(ValueType t);

// Tensor element types, numbered as in ggml. Types ggml retired (4, 5, 31-33, 36-38)
// are absent; a file naming them is refused.
enum class TensorType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

// A type's block geometry and name (the format table of rlx/quant.h).
using TypeTraits = quant::Format;
// Traits of a known GGUF type; nullptr for a number that is not one (rlx's own layouts,
// numbered from 256, are not GGUF types).
const TypeTraits* type_traits(uint32_t type);
const TypeTraits& type_traits(TensorType type);
const char* type_name(TensorType type);
bool type_from_name(const std::string& name, TensorType& out);  // case-insensitive
// Bytes of `elems` elements (a multiple of the block size, else Error(InvalidArgument)).
int64_t row_bytes(TensorType type, int64_t elems);

// One metadata value. Scalars use the field of their kind (ints for every integer type and
// Bool, floats for F32/F64, str for String); arrays hold their element type and their
// elements in the vector of that kind (`items` for arrays of arrays).
struct MetaValue {
  ValueType type = ValueType::U8;
  ValueType elem_type = ValueType::U8;  // arrays only
  int64_t i = 0;                        // integer / bool scalars (U64 above 2^63 wraps)
  double f = 0;
  std::string str;
  std::vector<int64_t> ints;            // integer / bool arrays
  std::vector<double> floats;           // float arrays
  std::vector<std::string> strs;        // string arrays
  std::vector<MetaValue> items;         // arrays of arrays
  uint64_t array_size() const;
  std::string to_string(size_t max_items = 8) const;  // for inspect / error messages
};

struct TensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // ggml order: dims[0] is the fastest-varying (row length)
  TensorType type = TensorType::F32;
  uint64_t offset = 0;        // from the start of the data section
  uint64_t bytes = 0;
  int64_t elements() const;
};

class File {
 public:
  // Maps `path` read-only and parses it.
  static File open(const std::string& path);
  // Parses bytes already in memory (copied; for tests and fuzzing). `name` names them in errors.
  static File parse(std::span<const uint8_t> bytes, const std::string& name = "<memory>");

  uint32_t version() const { return version_; }
  const std::string& path() const { return path_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // file offset of the data section
  uint64_t file_bytes() const { return size_; }

  // Metadata in file order, and by key.
  const std::vector<std::pair<std::string, MetaValue>>& metadata() const { return meta_; }
  const MetaValue* find(const std::string& key) const;
  bool has(const std::string& key) const { return find(key) != nullptr; }
  // Typed lookups: Error(Parse) naming the key when absent (without a default) or of the
  // wrong kind.
  std::string get_string(const std::string& key) const;
  std::string get_string(const std::string& key, const std::string& dflt) const;
  int64_t get_int(const std::string& key) const;
  int64_t get_int(const std::string& key, int64_t dflt) const;
  double get_float(const std::string& key, double dflt) const;  // any numeric type
  bool get_bool(const std::string& key, bool dflt) const;
  const std::vector<std::string>& get_strings(const std::string& key) const;
  std::vector<double> get_numbers(const std::string& key) const;  // any numeric array

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(const std::string& name) const;
  const TensorInfo& tensor(const std::string& name) const;  // Error(Parse) naming it if absent
  // The tensor's bytes inside the mapping (valid while any copy of this File lives).
  const uint8_t* data(const TensorInfo& t) const;
  // Keeps the mapping alive (for bytes handed out by data() that outlive this File object,
  // e.g. CompiledGraph::set_param_external).
  std::shared_ptr<const void> keepalive() const { return map_; }
  // Tells the OS the tensor's pages of the mapping are not needed now (they count in RSS
  // once read; a repacked copy replaces them). Reading them again faults them back in.
  void release(const TensorInfo& t) const;
  // Frees the elements of the array values whose key starts with `prefix` (their values
  // read as empty arrays afterwards): an engine that has built its tokenizer from the
  // `tokenizer.` arrays does not keep a second copy of the vocabulary.
  void drop_arrays(const std::string& prefix);

 private:
  struct Mapping;
  void parse_all();
  std::shared_ptr<Mapping> map_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, MetaValue>> meta_;
  std::map<std::string, size_t> meta_index_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

class Writer {
 public:
  void set(const std::string& key, MetaValue v);  // replaces a key already set
  void set_string(const std::string& key, const std::string& s);
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_strings(const std::string& key, const std::vector<std::string>& v);
  void set_f32s(const std::string& key, const std::vector<float>& v);
  void set_i32s(const std::string& key, const std::vector<int32_t>& v);
  // Copies every metadata key of `f` whose key starts with `prefix` (e.g. "tokenizer.").
  void copy_metadata(const File& f, const std::string& prefix = "");
  // Adds a tensor; `data` must hold exactly row_bytes(type, dims[0]) * rows bytes.
  void add_tensor(const std::string& name, std::vector<int64_t> dims, TensorType type,
                  std::span<const uint8_t> data);
  std::vector<uint8_t> bytes() const;
  void write(const std::string& path) const;

 private:
  std::vector<std::pair<std::string, MetaValue>> meta_;
  struct Tensor {
    TensorInfo info;
    std::vector<uint8_t> data;
  };
  std::vector<Tensor> tensors_;
};

// Convenience constructors for metadata values.
MetaValue meta_string(const std::string& s);
MetaValue meta_int(ValueType t, int64_t v);
MetaValue meta_float(ValueType t, double v);

// ---- element types: dequantization and quantization (bit-exact with llama.cpp's
// reference code paths). `n` must be a multiple of the type's block size.
void dequantize(TensorType type, const void* src, float* dst, int64_t n);
bool can_dequantize(TensorType type);
// Quantizes `n` floats into `dst` (row_bytes(type, n) bytes). Types: F32, F16, BF16, Q8_0,
// Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q6_K.
void quantize(TensorType type, const float* src, void* dst, int64_t n);
bool can_quantize(TensorType type);

}  // namespace rlx::gguf
