#include "runtime/npy.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>

namespace rlx::runtime {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

struct DescrInfo {
  const char* code;  // without the byte-order character
  DType dtype;
};
constexpr DescrInfo kDescrs[] = {
    {"f4", DType::F32}, {"f2", DType::F16},  {"f8", DType::F64},   {"i1", DType::I8},
    {"i2", DType::I16}, {"i4", DType::I32},  {"i8", DType::I64},   {"u1", DType::U8},
    {"u4", DType::U32}, {"b1", DType::Bool}, {"c8", DType::C64},   {"c16", DType::C128},
    {"V2", DType::BF16},
};

// A minimal reader of the Python literal NumPy writes as the header:
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string_view source, size_t base)
      : s_(text), source_(source), base_(base) {}

  std::string descr;
  std::optional<bool> fortran;
  std::optional<std::vector<int64_t>> shape;

  void parse() {
    expect('{');
    while (true) {
      skip_ws();
      if (peek() == '}') { ++i_; break; }
      std::string key = string_lit();
      expect(':');
      if (key == "descr") descr = string_lit();
      else if (key == "fortran_order") fortran = bool_lit();
      else if (key == "shape") shape = int_tuple();
      else error("unknown header key '", key, "'");
      skip_ws();
      if (peek() == ',') { ++i_; continue; }
      skip_ws();
      if (peek() == '}') { ++i_; break; }
      error("expected ',' or '}'");
    }
    skip_ws();
    if (i_ != s_.size()) error("unexpected text after the header dict");
    if (descr.empty()) error("header has no 'descr'");
    if (!fortran) error("header has no 'fortran_order'");
    if (!shape) error("header has no 'shape'");
  }

 private:
  template <class... A>
  [[noreturn]] void error(const A&... a) const {
    fail(ErrorCategory::Parse, source_, ": npy header byte ", base_ + i_, ": ", a...);
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    skip_ws();
    if (peek() != c) error("expected '", c, "'");
    ++i_;
  }
  std::string string_lit() {
    skip_ws();
    char q = peek();
    if (q != '\'' && q != '"') error("expected a quoted string");
    size_t start = ++i_;
    while (i_ < s_.size() && s_[i_] != q) ++i_;
    if (i_ >= s_.size()) error("unterminated string");
    return std::string(s_.substr(start, i_++ - start));
  }
  bool bool_lit() {
    skip_ws();
    if (s_.substr(i_, 4) == "True") { i_ += 4; return true; }
    if (s_.substr(i_, 5) == "False") { i_ += 5; return false; }
    error("expected True or False");
  }
  std::vector<int64_t> int_tuple() {
    skip_ws();
    char close = peek() == '(' ? ')' : peek() == '[' ? ']' : '\0';
    if (!close) error("expected a shape tuple");
    ++i_;
    std::vector<int64_t> dims;
    while (true) {
      skip_ws();
      if (peek() == close) { ++i_; break; }
      if (peek() < '0' || peek() > '9') error("expected a non-negative dimension");
      int64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (v > (INT64_MAX - 9) / 10) error("dimension too large");
        v = v * 10 + (s_[i_++] - '0');
      }
      if (peek() == 'L') ++i_;  // Python 2 long suffix
      dims.push_back(v);
      skip_ws();
      if (peek() == ',') { ++i_; continue; }
      if (peek() == close) { ++i_; break; }
      error("expected ',' or '", close, "' in the shape");
    }
    return dims;
  }

  std::string_view s_;
  std::string_view source_;
  size_t base_;
  size_t i_ = 0;
};

uint32_t read_le(const uint8_t* p, int n) {
  uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void byte_swap(std::vector<uint8_t>& b, size_t width) {
  for (size_t i = 0; i + width <= b.size(); i += width) std::reverse(b.begin() + i, b.begin() + i + width);
}

}  // namespace

std::string npy_descr(DType t) {
  for (const auto& d : kDescrs)
    if (d.dtype == t) return std::string(dtype_size(t) == 1 ? "|" : "<") + d.code;
  fail(ErrorCategory::Internal, "no npy descriptor for ", dtype_name(t));
}

TypedTensor parse_npy(std::span<const uint8_t> bytes, std::string_view source) {
  if (bytes.size() < kMagicLen + 4 || std::memcmp(bytes.data(), kMagic, kMagicLen) != 0)
    fail(ErrorCategory::Parse, source, ": not an npy file (bad magic at byte 0)");
  const int major = bytes[6];
  size_t len_bytes = major == 1 ? 2 : (major == 2 || major == 3) ? 4 : 0;
  if (!len_bytes)
    fail(ErrorCategory::Unsupported, source, ": npy format version ", major, ".", int(bytes[7]), " is not supported");
  const size_t header_start = 8 + len_bytes;
  if (bytes.size() < header_start) fail(ErrorCategory::Parse, source, ": truncated npy header at byte 8");
  const size_t header_len = read_le(bytes.data() + 8, int(len_bytes));
  if (bytes.size() < header_start + header_len)
    fail(ErrorCategory::Parse, source, ": npy header claims ", header_len, " bytes but the file has ",
         bytes.size() - header_start, " after byte ", header_start);
  std::string_view text(reinterpret_cast<const char*>(bytes.data() + header_start), header_len);
  HeaderParser hp(text, source, header_start);
  hp.parse();

  std::string code = hp.descr;
  char order = '|';
  if (!code.empty() && (code[0] == '<' || code[0] == '>' || code[0] == '|' || code[0] == '=')) {
    order = code[0];
    code = code.substr(1);
  }
  std::optional<DType> dtype;
  for (const auto& d : kDescrs)
    if (code == d.code) dtype = d.dtype;
  if (!dtype) fail(ErrorCategory::Unsupported, source, ": npy dtype '", hp.descr, "' has no rlx dtype");

  TypedTensor t;
  t.dtype = *dtype;
  t.dims = *hp.shape;
  if (*hp.fortran && t.dims.size() > 1)
    fail(ErrorCategory::Unsupported, source, ": Fortran-order npy arrays are not supported (rewrite in C order)");
  const size_t es = dtype_size(t.dtype);
  size_t count = 0;
  try {
    count = size_t(Shape(t.dims, t.dtype).numel());  // checked: fits kMaxTensorBytes
  } catch (const Error& e) {
    fail(ErrorCategory::Parse, source, ": npy header at byte ", header_start, ": ", e.what());
  }
  const size_t data_start = header_start + header_len;
  const size_t have = bytes.size() - data_start;
  if (have < count * es)
    fail(ErrorCategory::Parse, source, ": npy data truncated: shape needs ", count * es, " bytes at byte ",
         data_start, ", file has ", have);
  if (have > count * es)
    fail(ErrorCategory::Parse, source, ": ", have - count * es, " unexpected bytes after the npy data (byte ",
         data_start + count * es, ")");
  t.bytes.assign(bytes.begin() + data_start, bytes.end());
  if (order == '>' && es > 1) byte_swap(t.bytes, is_complex(t.dtype) ? es / 2 : es);
  return t;
}

TypedTensor read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(ErrorCategory::Io, "cannot open '", path, "': ", std::strerror(errno));
  std::vector<uint8_t> data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) fail(ErrorCategory::Io, "cannot read '", path, "'");
  return parse_npy(data, path);
}

std::vector<uint8_t> encode_npy(const TypedTensor& t) {
  size_t count = 0;
  try {
    count = size_t(Shape(t.dims, t.dtype).numel());  // checked: no negative or overflowing dims
  } catch (const Error& e) {
    fail(ErrorCategory::InvalidArgument, "npy: ", e.what());
  }
  if (count * dtype_size(t.dtype) != t.bytes.size())
    fail(ErrorCategory::InvalidArgument, "npy: ", t.bytes.size(), " bytes do not match ", dtype_name(t.dtype),
         " dims of ", count, " elements");
  std::string header = "{'descr': '" + npy_descr(t.dtype) + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < t.dims.size(); ++i) header += std::to_string(t.dims[i]) + (i + 1 < t.dims.size() ? ", " : "");
  if (t.dims.size() == 1) header += ",";
  header += "), }";
  // Pad with spaces so the data starts on a 64-byte boundary; the header ends in '\n'.
  size_t preamble = 10;
  if ((preamble + header.size() + 1 + 63) / 64 * 64 - preamble > 65535) preamble = 12;
  const size_t total = (preamble + header.size() + 1 + 63) / 64 * 64;
  header.append(total - preamble - header.size() - 1, ' ');
  header += '\n';

  std::vector<uint8_t> out(kMagic, kMagic + kMagicLen);
  out.push_back(preamble == 10 ? 1 : 2);
  out.push_back(0);
  const size_t hl = header.size();
  for (size_t i = 0; i < preamble - 8; ++i) out.push_back(uint8_t(hl >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), t.bytes.begin(), t.bytes.end());
  return out;
}

void write_npy(const std::string& path, const TypedTensor& t) {
  std::vector<uint8_t> data = encode_npy(t);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) fail(ErrorCategory::Io, "cannot create '", path, "': ", std::strerror(errno));
  f.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size()));
  if (!f) fail(ErrorCategory::Io, "cannot write '", path, "'");
}

}  // namespace rlx::runtime
