// GGUF reader: maps the file and parses header, metadata and tensor infos, checking every
// count, length and offset against the bytes that are actually there.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rlx/gguf.h"

namespace rlx::gguf {

struct File::Mapping {
  void* addr = nullptr;
  size_t size = 0;
  std::vector<uint8_t> owned;  // File::parse: the bytes live here instead
  ~Mapping() {
    if (addr) munmap(addr, size);
  }
};

namespace {

constexpr int kMaxDims = 4;          // ggml tensors have at most 4 dims
constexpr int kMaxArrayDepth = 8;    // nested arrays deeper than this are refused

class Cursor {
 public:
  Cursor(const uint8_t* p, uint64_t n, const std::string& path) : p_(p), n_(n), path_(path) {}
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return n_ - pos_; }

  template <class... A>
  [[noreturn]] void error_at(uint64_t at, const A&... a) const {
    fail(ErrorCategory::Parse, "GGUF file '", path_, "': at byte offset ", at, ": ", a...);
  }
  void need(uint64_t bytes, const char* what) const {
    if (bytes > left())
      error_at(pos_, "truncated: ", what, " needs ", bytes, " bytes, ", left(), " left in the file");
  }
  template <class T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string string(const char* what) {
    uint64_t at = pos_;
    uint64_t len = read<uint64_t>(what);
    if (len > left()) error_at(at, what, " has length ", len, " but only ", left(), " bytes follow");
    std::string s(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return s;
  }

 private:
  const uint8_t* p_;
  uint64_t n_;
  uint64_t pos_ = 0;
  const std::string& path_;
};

uint64_t min_value_bytes(ValueType t) {
  switch (t) {
    case ValueType::U8: case ValueType::I8: case ValueType::Bool: return 1;
    case ValueType::U16: case ValueType::I16: return 2;
    case ValueType::U32: case ValueType::I32: case ValueType::F32: return 4;
    case ValueType::U64: case ValueType::I64: case ValueType::F64: return 8;
    case ValueType::String: return 8;      // the length
    case ValueType::Array: return 12;      // element type + count
  }
  return 1;
}

bool valid_value_type(uint32_t t) { return t <= 12; }

int64_t read_int(Cursor& c, ValueType t) {
  switch (t) {
    case ValueType::U8: return c.read<uint8_t>("a u8 value");
    case ValueType::I8: return c.read<int8_t>("an i8 value");
    case ValueType::U16: return c.read<uint16_t>("a u16 value");
    case ValueType::I16: return c.read<int16_t>("an i16 value");
    case ValueType::U32: return c.read<uint32_t>("a u32 value");
    case ValueType::I32: return c.read<int32_t>("an i32 value");
    case ValueType::U64: return static_cast<int64_t>(c.read<uint64_t>("a u64 value"));
    case ValueType::I64: return c.read<int64_t>("an i64 value");
    case ValueType::Bool: {
      uint64_t at = c.pos();
      uint8_t b = c.read<uint8_t>("a bool value");
      if (b > 1) c.error_at(at, "bool value is ", int(b), " (must be 0 or 1)");
      return b;
    }
    default: return 0;
  }
}

MetaValue read_value(Cursor& c, ValueType t, int depth) {
  MetaValue v;
  v.type = t;
  switch (t) {
    case ValueType::F32: v.f = c.read<float>("an f32 value"); return v;
    case ValueType::F64: v.f = c.read<double>("an f64 value"); return v;
    case ValueType::String: v.str = c.string("a string value"); return v;
    case ValueType::Array: {
      uint64_t at = c.pos();
      if (depth >= kMaxArrayDepth) c.error_at(at, "arrays nested deeper than ", kMaxArrayDepth);
      uint32_t et = c.read<uint32_t>("an array element type");
      if (!valid_value_type(et)) c.error_at(at, "unknown array element type ", et);
      v.elem_type = static_cast<ValueType>(et);
      uint64_t n = c.read<uint64_t>("an array length");
      // Every element takes at least min_value_bytes, so a count the file cannot hold
      // is refused before anything is allocated for it.
      if (n > c.left() / min_value_bytes(v.elem_type))
        c.error_at(at, "array of ", n, " ", value_type_name(v.elem_type), " elements cannot fit in the ",
                   c.left(), " bytes left");
      switch (v.elem_type) {
        case ValueType::String:
          v.strs.reserve(n);
          for (uint64_t k = 0; k < n; ++k) v.strs.push_back(c.string("a string array element"));
          break;
        case ValueType::Array:
          v.items.reserve(n);
          for (uint64_t k = 0; k < n; ++k) v.items.push_back(read_value(c, ValueType::Array, depth + 1));
          break;
        case ValueType::F32:
          v.floats.reserve(n);
          for (uint64_t k = 0; k < n; ++k) v.floats.push_back(c.read<float>("an f32 array element"));
          break;
        case ValueType::F64:
          v.floats.reserve(n);
          for (uint64_t k = 0; k < n; ++k) v.floats.push_back(c.read<double>("an f64 array element"));
          break;
        default:
          v.ints.reserve(n);
          for (uint64_t k = 0; k < n; ++k) v.ints.push_back(read_int(c, v.elem_type));
      }
      return v;
    }
    default: v.i = read_int(c, t); return v;
  }
}

}  // namespace

File File::open(const std::string& path) {
  return detail::guard("gguf::File::open", [&] {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(ErrorCategory::Io, "cannot open GGUF file '", path, "': ", std::strerror(errno));
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      fail(ErrorCategory::Io, "GGUF file '", path, "' is not a regular file");
    }
    File f;
    f.map_ = std::make_shared<Mapping>();
    f.path_ = path;
    f.size_ = static_cast<uint64_t>(st.st_size);
    if (f.size_ > 0) {
      void* a = mmap(nullptr, f.size_, PROT_READ, MAP_SHARED, fd, 0);
      if (a == MAP_FAILED) {
        int e = errno;
        ::close(fd);
        fail(ErrorCategory::Io, "cannot map GGUF file '", path, "': ", std::strerror(e));
      }
      f.map_->addr = a;
      f.map_->size = f.size_;
      f.base_ = static_cast<const uint8_t*>(a);
    }
    ::close(fd);
    f.parse_all();
    return f;
  });
}

void File::release(const TensorInfo& t) const {
  if (!map_ || !map_->addr) return;  // parsed from memory: nothing mapped
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t b = reinterpret_cast<uintptr_t>(data(t)), e = b + t.bytes;
  const uintptr_t pb = (b + page - 1) / page * page, pe = e / page * page;  // whole pages inside the tensor
  if (pe > pb) madvise(reinterpret_cast<void*>(pb), pe - pb, MADV_DONTNEED);
}

File File::parse(std::span<const uint8_t> bytes, const std::string& name) {
  return detail::guard("gguf::File::parse", [&] {
    File f;
    f.map_ = std::make_shared<Mapping>();
    f.map_->owned.assign(bytes.begin(), bytes.end());
    f.base_ = f.map_->owned.data();
    f.size_ = bytes.size();
    f.path_ = name;
    f.parse_all();
    return f;
  });
}

void File::parse_all() {
  Cursor c(base_, size_, path_);
  uint32_t magic = c.read<uint32_t>("the magic");
  if (std::memcmp(&magic, "GGUF", 4) != 0) c.error_at(0, "not a GGUF file (magic is not \"GGUF\")");
  version_ = c.read<uint32_t>("the version");
  if (version_ == 1) c.error_at(4, "GGUF version 1 is not supported (only 2 and 3)");
  if (version_ != 2 && version_ != 3) {
    if ((version_ & 0xffff) == 0) c.error_at(4, "big-endian GGUF files are not supported");
    c.error_at(4, "unknown GGUF version ", version_, " (supported: 2, 3)");
  }
  uint64_t n_tensors = c.read<uint64_t>("the tensor count");
  uint64_t n_kv = c.read<uint64_t>("the metadata count");
  // A key-value pair takes at least 8 (key length) + 4 (type) + 1 bytes; a tensor info
  // 8 (name length) + 4 (n_dims) + 4 (type) + 8 (offset).
  if (n_kv > c.left() / 13) c.error_at(16, "metadata count ", n_kv, " cannot fit in a file of ", size_, " bytes");
  if (n_tensors > c.left() / 24)
    c.error_at(8, "tensor count ", n_tensors, " cannot fit in a file of ", size_, " bytes");

  meta_.reserve(n_kv);
  for (uint64_t k = 0; k < n_kv; ++k) {
    uint64_t at = c.pos();
    std::string key = c.string("a metadata key");
    if (key.empty()) c.error_at(at, "empty metadata key");
    if (meta_index_.count(key)) c.error_at(at, "duplicate metadata key '", key, "'");
    uint64_t type_at = c.pos();
    uint32_t t = c.read<uint32_t>("a metadata value type");
    if (!valid_value_type(t)) c.error_at(type_at, "metadata key '", key, "' has unknown value type ", t);
    MetaValue v = read_value(c, static_cast<ValueType>(t), 0);
    meta_index_[key] = meta_.size();
    meta_.emplace_back(std::move(key), std::move(v));
  }

  if (const MetaValue* a = find("general.alignment")) {
    if (a->type != ValueType::U32) fail(ErrorCategory::Parse, "GGUF file '", path_, "': general.alignment is ",
                                        value_type_name(a->type), ", expected u32");
    uint64_t al = static_cast<uint64_t>(a->i);
    if (al == 0 || (al & (al - 1)) != 0 || al > (uint64_t(1) << 20))
      fail(ErrorCategory::Parse, "GGUF file '", path_, "': general.alignment ", al,
           " is not a power of two up to 2^20");
    alignment_ = al;
  }

  tensors_.reserve(n_tensors);
  for (uint64_t k = 0; k < n_tensors; ++k) {
    uint64_t at = c.pos();
    TensorInfo t;
    t.name = c.string("a tensor name");
    if (tensor_index_.count(t.name)) c.error_at(at, "duplicate tensor name '", t.name, "'");
    uint64_t dims_at = c.pos();
    uint32_t nd = c.read<uint32_t>("a tensor's dim count");
    if (nd > kMaxDims) c.error_at(dims_at, "tensor '", t.name, "' has ", nd, " dims (at most ", kMaxDims, ")");
    int64_t elems = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      uint64_t dim_at = c.pos();
      uint64_t v = c.read<uint64_t>("a tensor dim");
      if (v > uint64_t(INT64_MAX) || (v != 0 && static_cast<uint64_t>(elems) > uint64_t(INT64_MAX) / v))
        c.error_at(dim_at, "tensor '", t.name, "': dims overflow 64 bits");
      t.dims.push_back(static_cast<int64_t>(v));
      elems *= static_cast<int64_t>(v);
    }
    uint64_t type_at = c.pos();
    uint32_t ty = c.read<uint32_t>("a tensor type");
    const TypeTraits* tr = type_traits(ty);
    if (!tr) c.error_at(type_at, "tensor '", t.name, "' has unknown type ", ty);
    t.type = static_cast<TensorType>(ty);
    int64_t row = t.dims.empty() ? 1 : t.dims[0];
    if (row % tr->block_elems != 0)
      c.error_at(dims_at, "tensor '", t.name, "': row of ", row, " elements is not a whole number of ", tr->name,
                 " blocks of ", tr->block_elems);
    uint64_t off_at = c.pos();
    t.offset = c.read<uint64_t>("a tensor offset");
    if (t.offset % alignment_ != 0)
      c.error_at(off_at, "tensor '", t.name, "': data offset ", t.offset, " is not a multiple of the alignment ",
                 alignment_);
    uint64_t blocks = static_cast<uint64_t>(elems / tr->block_elems);
    if (blocks > UINT64_MAX / static_cast<uint64_t>(tr->block_bytes) ||
        row / tr->block_elems > INT64_MAX / tr->block_bytes)  // a row's bytes too, even with 0 rows
      c.error_at(dims_at, "tensor '", t.name, "': byte size overflows 64 bits");
    t.bytes = blocks * static_cast<uint64_t>(tr->block_bytes);
    tensor_index_[t.name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }

  uint64_t pos = c.pos();
  data_offset_ = (pos + alignment_ - 1) / alignment_ * alignment_;
  if (tensors_.empty()) return;  // vocab-only files may end right after the infos
  if (data_offset_ > size_)
    fail(ErrorCategory::Parse, "GGUF file '", path_, "': data section at byte offset ", data_offset_,
         " starts past the end of the file (", size_, " bytes)");
  uint64_t data_bytes = size_ - data_offset_;
  // Bounds and overlaps, in offset order.
  std::vector<size_t> order(tensors_.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
  uint64_t end = 0;
  const TensorInfo* prev = nullptr;
  for (size_t k : order) {
    const TensorInfo& t = tensors_[k];
    if (t.offset > data_bytes || t.bytes > data_bytes - t.offset)
      fail(ErrorCategory::Parse, "GGUF file '", path_, "': tensor '", t.name, "' (", t.bytes,
           " bytes at byte offset ", data_offset_ + t.offset, ") runs past the end of the file (", size_,
           " bytes)");
    if (prev && t.offset < end)
      fail(ErrorCategory::Parse, "GGUF file '", path_, "': tensor '", t.name, "' at byte offset ",
           data_offset_ + t.offset, " overlaps tensor '", prev->name, "' (ends at byte offset ", data_offset_ + end,
           ")");
    end = t.offset + t.bytes;
    prev = &t;
  }
}

}  // namespace rlx::gguf
