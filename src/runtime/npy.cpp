#include "runtime/npy.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>

#include "ir/utf8.h"

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

namespace {

NpyArray parse_any(std::span<const uint8_t> bytes, std::string_view source) {
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
  // Strings: U{n} (n UTF-32 code units per element) or S{n} (n bytes).
  size_t str_width = 0, unit = 0;
  if (code.size() > 1 && (code[0] == 'U' || code[0] == 'S') &&
      code.find_first_not_of("0123456789", 1) == std::string::npos && code.size() < 10) {
    unit = code[0] == 'U' ? 4 : 1;
    str_width = size_t(std::stoull(code.substr(1)));
    if (str_width == 0) fail(ErrorCategory::Unsupported, source, ": npy dtype '", hp.descr, "' holds no characters");
  }
  std::optional<DType> dtype;
  for (const auto& d : kDescrs)
    if (code == d.code) dtype = d.dtype;
  if (!dtype && !unit) fail(ErrorCategory::Unsupported, source, ": npy dtype '", hp.descr, "' has no rlx dtype");

  NpyArray a;
  a.is_strings = unit != 0;
  const std::vector<int64_t> dims = *hp.shape;
  if (*hp.fortran && dims.size() > 1)
    fail(ErrorCategory::Unsupported, source, ": Fortran-order npy arrays are not supported (rewrite in C order)");
  const size_t es = unit ? unit * str_width : dtype_size(*dtype);
  size_t count = 0;
  try {
    count = size_t(Shape(dims, unit ? DType::U8 : *dtype).numel());  // checked: fits kMaxTensorBytes
  } catch (const Error& e) {
    fail(ErrorCategory::Parse, source, ": npy header at byte ", header_start, ": ", e.what());
  }
  const size_t data_start = header_start + header_len;
  const size_t have = bytes.size() - data_start;
  if (es != 0 && count > (size_t(1) << 40) / es)
    fail(ErrorCategory::Parse, source, ": npy header at byte ", header_start, ": ", count, " elements of ", es,
         " bytes are too large");
  if (have < count * es)
    fail(ErrorCategory::Parse, source, ": npy data truncated: shape needs ", count * es, " bytes at byte ",
         data_start, ", file has ", have);
  if (have > count * es)
    fail(ErrorCategory::Parse, source, ": ", have - count * es, " unexpected bytes after the npy data (byte ",
         data_start + count * es, ")");
  if (a.is_strings) {
    a.text.dims = dims;
    a.text.strings.resize(count);
    const uint8_t* p = bytes.data() + data_start;
    for (size_t i = 0; i < count; ++i, p += es) {
      std::string& str = a.text.strings[i];
      size_t len = str_width;  // trailing NULs are padding
      auto at = [&](size_t k) {
        return unit == 1 ? uint32_t(p[k])
                         : order == '>' ? (uint32_t(p[4 * k]) << 24 | uint32_t(p[4 * k + 1]) << 16 |
                                           uint32_t(p[4 * k + 2]) << 8 | p[4 * k + 3])
                                        : read_le(p + 4 * k, 4);
      };
      while (len > 0 && at(len - 1) == 0) --len;
      for (size_t k = 0; k < len; ++k) {
        if (unit == 1) {
          str += char(p[k]);
        } else if (is_unicode_scalar(at(k))) {
          utf8_append(str, at(k));
        } else {
          fail(ErrorCategory::Parse, source, ": element ", i, " holds an invalid code point ", at(k), " (byte ",
               data_start + i * es + 4 * k, ")");
        }
      }
    }
    return a;
  }
  TypedTensor& t = a.tensor;
  t.dtype = *dtype;
  t.dims = dims;
  t.bytes.assign(bytes.begin() + data_start, bytes.end());
  if (order == '>' && es > 1) byte_swap(t.bytes, is_complex(t.dtype) ? es / 2 : es);
  return a;
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(ErrorCategory::Io, "cannot open '", path, "': ", std::strerror(errno));
  std::vector<uint8_t> data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) fail(ErrorCategory::Io, "cannot read '", path, "'");
  return data;
}

void write_file(const std::string& path, const std::vector<uint8_t>& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) fail(ErrorCategory::Io, "cannot create '", path, "': ", std::strerror(errno));
  f.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size()));
  if (!f) fail(ErrorCategory::Io, "cannot write '", path, "'");
}

// The .npy preamble and header for `descr` and `dims`, padded so the data starts on a
// 64-byte boundary.
std::vector<uint8_t> npy_header(const std::string& descr, const std::vector<int64_t>& dims) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < dims.size(); ++i) header += std::to_string(dims[i]) + (i + 1 < dims.size() ? ", " : "");
  if (dims.size() == 1) header += ",";
  header += "), }";
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
  return out;
}

}  // namespace

TypedTensor parse_npy(std::span<const uint8_t> bytes, std::string_view source) {
  NpyArray a = parse_any(bytes, source);
  if (a.is_strings)
    fail(ErrorCategory::Unsupported, source, ": the npy file holds strings where a numeric tensor is expected");
  return std::move(a.tensor);
}

NpyArray parse_npy_any(std::span<const uint8_t> bytes, std::string_view source) { return parse_any(bytes, source); }
NpyArray read_npy_any(const std::string& path) { return parse_any(read_file(path), path); }

std::vector<uint8_t> encode_npy_strings(const NpyStrings& s) {
  size_t count = 0;
  try {
    count = size_t(Shape(s.dims, DType::U8).numel());
  } catch (const Error& e) {
    fail(ErrorCategory::InvalidArgument, "npy: ", e.what());
  }
  if (count != s.strings.size())
    fail(ErrorCategory::InvalidArgument, "npy: ", s.strings.size(), " strings do not match dims of ", count,
         " elements");
  std::vector<std::vector<uint32_t>> cps(count);
  size_t width = 1;  // NumPy's narrowest string type is U1
  for (size_t i = 0; i < count; ++i) {
    if (!utf8_decode_strict(s.strings[i], cps[i]))
      fail(ErrorCategory::InvalidArgument, "npy: string ", i, " is not valid UTF-8");
    width = std::max(width, cps[i].size());
  }
  std::vector<uint8_t> out = npy_header("<U" + std::to_string(width), s.dims);
  for (const auto& c : cps)
    for (size_t k = 0; k < width; ++k) {
      const uint32_t v = k < c.size() ? c[k] : 0;
      for (int b = 0; b < 4; ++b) out.push_back(uint8_t(v >> (8 * b)));
    }
  return out;
}

void write_npy_strings(const std::string& path, const NpyStrings& s) { write_file(path, encode_npy_strings(s)); }

TypedTensor read_npy(const std::string& path) { return parse_npy(read_file(path), path); }

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
  std::vector<uint8_t> out = npy_header(npy_descr(t.dtype), t.dims);
  out.insert(out.end(), t.bytes.begin(), t.bytes.end());
  return out;
}

void write_npy(const std::string& path, const TypedTensor& t) { write_file(path, encode_npy(t)); }

}  // namespace rlx::runtime
