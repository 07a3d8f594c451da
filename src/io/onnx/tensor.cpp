// TensorProto decoding: typed fields, raw_data and external data, with every size
// checked against the dims before anything is allocated from them.
#include "io/onnx/tensor.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "rlx/error.h"

namespace rlx::onnx {

namespace {

struct MiniFormat {
  int exp_bits, man_bits, bias;
  bool has_inf;     // IEEE-style inf/NaN at the top exponent (E5M2)
  bool fnuz;        // 0x80 is the only NaN; no negative zero
  bool fn_nan;      // E4M3FN: only S.1111.111 is NaN
  bool has_sign;
};

MiniFormat format_of(int t) {
  switch (t) {
    case kF8E4M3FN: return {4, 3, 7, false, false, true, true};
    case kF8E4M3FNUZ: return {4, 3, 8, false, true, false, true};
    case kF8E5M2: return {5, 2, 15, true, false, false, true};
    case kF8E5M2FNUZ: return {5, 2, 16, false, true, false, true};
    case kF4E2M1: return {2, 1, 1, false, false, false, true};
    default: fail(ErrorCategory::Internal, "not a minifloat type: ", t);
  }
}

double max_finite(const MiniFormat& f) {
  int top = (1 << f.exp_bits) - 1;
  int max_exp = f.has_inf ? top - 1 : top;
  int max_man = (1 << f.man_bits) - 1;
  if (f.fn_nan) max_man -= 1;  // S.1111.111 is NaN
  return std::ldexp(1.0 + double(max_man) / double(1 << f.man_bits), max_exp - f.bias);
}

int64_t numel_checked(const std::vector<int64_t>& dims, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) fail(ErrorCategory::Parse, what, ": negative dim ", d);
    if (__builtin_mul_overflow(n, d, &n) || n > (int64_t(1) << 40))
      fail(ErrorCategory::Parse, what, ": element count overflows");
  }
  return n;
}

// Reads [offset, offset+length) of an external data file confined to base_dir.
std::vector<uint8_t> read_external(const pb::TensorProto& t, const std::string& base_dir, const std::string& what) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    try {
      if (kv.key() == "location") location = kv.value();
      else if (kv.key() == "offset") offset = std::stoll(kv.value());
      else if (kv.key() == "length") length = std::stoll(kv.value());
    } catch (const std::exception&) {
      fail(ErrorCategory::Parse, what, ": bad external_data value for '", kv.key(), "'");
    }
  }
  if (location.empty()) fail(ErrorCategory::Parse, what, ": external data without a location");
  std::filesystem::path rel(location);
  if (rel.is_absolute()) fail(ErrorCategory::Parse, what, ": external data location '", location, "' is absolute");
  for (const auto& part : rel)
    if (part == "..") fail(ErrorCategory::Parse, what, ": external data location '", location, "' leaves the model folder");
  if (offset < 0) fail(ErrorCategory::Parse, what, ": negative external data offset");
  std::filesystem::path full = std::filesystem::path(base_dir.empty() ? "." : base_dir) / rel;
  std::error_code ec;
  auto size = std::filesystem::file_size(full, ec);
  if (ec) fail(ErrorCategory::Io, what, ": cannot open external data file '", full.string(), "'");
  if (length < 0) length = int64_t(size) - offset;
  if (length < 0 || uint64_t(offset) + uint64_t(length) > size)
    fail(ErrorCategory::Parse, what, ": external data [", offset, ", +", length, ") exceeds file '", full.string(),
         "' of ", size, " bytes");
  std::ifstream f(full, std::ios::binary);
  if (!f) fail(ErrorCategory::Io, what, ": cannot open external data file '", full.string(), "'");
  std::vector<uint8_t> out(static_cast<size_t>(length));
  f.seekg(offset);
  if (length > 0 && !f.read(reinterpret_cast<char*>(out.data()), length))
    fail(ErrorCategory::Io, what, ": short read from '", full.string(), "'");
  return out;
}

// Typed fields -> the stored (raw) layout.
std::vector<uint8_t> typed_to_raw(const pb::TensorProto& t, int type, int64_t stored_bytes, const std::string& what) {
  std::vector<uint8_t> raw;
  auto need = [&](int64_t have, int64_t want) {
    if (have != want)
      fail(ErrorCategory::Parse, what, ": ", onnx_type_name(type), " tensor has ", have, " values, dims need ", want);
  };
  int bits = stored_bits(type);
  switch (type) {
    case kFloat:
    case kComplex64:
      need(t.float_data_size() * 4, stored_bytes);
      raw.resize(size_t(stored_bytes));
      if (stored_bytes) std::memcpy(raw.data(), t.float_data().data(), size_t(stored_bytes));
      return raw;
    case kDouble:
    case kComplex128:
      need(t.double_data_size() * 8, stored_bytes);
      raw.resize(size_t(stored_bytes));
      if (stored_bytes) std::memcpy(raw.data(), t.double_data().data(), size_t(stored_bytes));
      return raw;
    case kInt64:
      need(t.int64_data_size() * 8, stored_bytes);
      raw.resize(size_t(stored_bytes));
      if (stored_bytes) std::memcpy(raw.data(), t.int64_data().data(), size_t(stored_bytes));
      return raw;
    case kUint32:
    case kUint64: {
      int sz = type == kUint32 ? 4 : 8;
      need(t.uint64_data_size() * sz, stored_bytes);
      raw.resize(size_t(stored_bytes));
      for (int i = 0; i < t.uint64_data_size(); ++i) {
        uint64_t v = t.uint64_data(i);
        std::memcpy(raw.data() + size_t(i) * size_t(sz), &v, size_t(sz));
      }
      return raw;
    }
    case kString: fail(ErrorCategory::Unsupported, what, ": string tensors are not supported");
    default: break;
  }
  // Everything else lives in int32_data: one value per element, or one packed byte
  // per entry for sub-byte types.
  int per = bits >= 8 ? bits / 8 : 1;
  need(int64_t(t.int32_data_size()) * per, stored_bytes);
  raw.resize(size_t(stored_bytes));
  for (int i = 0; i < t.int32_data_size(); ++i) {
    uint32_t v = uint32_t(t.int32_data(i));
    std::memcpy(raw.data() + size_t(i) * size_t(per), &v, size_t(per));
  }
  return raw;
}

// Stored layout -> dense carried elements.
// raw: the stored bytes (already checked to be as many as n elements need). Reads them in
// place, so a tensor's message bytes are copied once, straight into what is carried (a
// model's largest initializer is then held twice at most, not three times, while it decodes).
std::vector<uint8_t> raw_to_carried(const uint8_t* raw, int type, DType dt, int64_t n) {
  std::vector<uint8_t> out(static_cast<size_t>(n) * dtype_size(dt));
  int bits = stored_bits(type);
  if (bits < 8) {
    int per_byte = 8 / bits;
    uint32_t mask = (1u << bits) - 1;
    for (int64_t i = 0; i < n; ++i) {
      uint32_t v = (raw[size_t(i / per_byte)] >> ((i % per_byte) * bits)) & mask;
      if (type == kF4E2M1) {
        float f = decode_minifloat(v, type);
        std::memcpy(out.data() + size_t(i) * 4, &f, 4);
      } else if (type == kInt4 || type == kInt2) {
        int32_t s = int32_t(v << (32 - bits)) >> (32 - bits);
        out[size_t(i)] = uint8_t(int8_t(s));
      } else {
        out[size_t(i)] = uint8_t(v);
      }
    }
    return out;
  }
  if (is_minifloat(type)) {
    for (int64_t i = 0; i < n; ++i) {
      float f = decode_minifloat(raw[size_t(i)], type);
      std::memcpy(out.data() + size_t(i) * 4, &f, 4);
    }
    return out;
  }
  if (type == kUint16) {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t v;
      std::memcpy(&v, raw + size_t(i) * 2, 2);
      int32_t w = v;
      std::memcpy(out.data() + size_t(i) * 4, &w, 4);
    }
    return out;
  }
  if (type == kBool) {
    for (int64_t i = 0; i < n; ++i) out[size_t(i)] = raw[size_t(i)] != 0;
    return out;
  }
  if (!out.empty()) std::memcpy(out.data(), raw, out.size());
  return out;
}

}  // namespace

namespace {
const char* const kTypeNames[] = {"UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64",
                                  "STRING", "BOOL", "FLOAT16", "DOUBLE", "UINT32", "UINT64", "COMPLEX64",
                                  "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
                                  "FLOAT8E5M2FNUZ", "UINT4", "INT4", "FLOAT4E2M1", "FLOAT8E8M0", "UINT2", "INT2"};
}  // namespace

std::string onnx_type_name(int t) {
  if (t >= 0 && t < int(std::size(kTypeNames))) return kTypeNames[t];
  return "type " + std::to_string(t);
}

std::optional<int> onnx_type_named(std::string_view name) {
  for (int t = 1; t < int(std::size(kTypeNames)); ++t) {
    const std::string_view n = kTypeNames[t];
    if (n.size() == name.size() &&
        std::equal(n.begin(), n.end(), name.begin(), [](char a, char b) { return a == std::toupper(static_cast<unsigned char>(b)); }))
      return t;
  }
  return std::nullopt;
}

std::optional<DType> carried_dtype(int t) {
  switch (t) {
    case kFloat: return DType::F32;
    case kUint8: return DType::U8;
    case kInt8: return DType::I8;
    case kUint16: return DType::I32;
    case kInt16: return DType::I16;
    case kInt32: return DType::I32;
    case kInt64: return DType::I64;
    case kBool: return DType::Bool;
    case kFloat16: return DType::F16;
    case kDouble: return DType::F64;
    case kUint32: return DType::U32;
    case kUint64: return DType::I64;
    case kComplex64: return DType::C64;
    case kComplex128: return DType::C128;
    case kBFloat16: return DType::BF16;
    case kF8E4M3FN: case kF8E4M3FNUZ: case kF8E5M2: case kF8E5M2FNUZ: case kF4E2M1: case kF8E8M0:
      return DType::F32;
    case kUint4: case kUint2: return DType::U8;
    case kInt4: case kInt2: return DType::I8;
    default: return std::nullopt;
  }
}

int onnx_type_of(DType d) {
  switch (d) {
    case DType::F32: return kFloat;
    case DType::F16: return kFloat16;
    case DType::BF16: return kBFloat16;
    case DType::F64: return kDouble;
    case DType::I8: return kInt8;
    case DType::I16: return kInt16;
    case DType::I32: return kInt32;
    case DType::I64: return kInt64;
    case DType::U8: return kUint8;
    case DType::U32: return kUint32;
    case DType::Bool: return kBool;
    case DType::C64: return kComplex64;
    case DType::C128: return kComplex128;
  }
  return kUndefined;
}

int stored_bits(int t) {
  switch (t) {
    case kUint4: case kInt4: case kF4E2M1: return 4;
    case kUint2: case kInt2: return 2;
    case kF8E4M3FN: case kF8E4M3FNUZ: case kF8E5M2: case kF8E5M2FNUZ: case kF8E8M0: return 8;
    case kUint16: return 16;
    case kUint64: return 64;
    default: {
      auto d = carried_dtype(t);
      return d ? int(dtype_size(*d)) * 8 : 8;
    }
  }
}

bool is_minifloat(int t) {
  return t == kF8E4M3FN || t == kF8E4M3FNUZ || t == kF8E5M2 || t == kF8E5M2FNUZ || t == kF4E2M1 || t == kF8E8M0;
}

float decode_minifloat(uint32_t bits, int t) {
  if (t == kF8E8M0) {
    if (bits == 0xFF) return std::numeric_limits<float>::quiet_NaN();
    return std::ldexp(1.0f, int(bits) - 127);
  }
  MiniFormat f = format_of(t);
  int total = 1 + f.exp_bits + f.man_bits;
  uint32_t sign = (bits >> (total - 1)) & 1;
  uint32_t e = (bits >> f.man_bits) & ((1u << f.exp_bits) - 1);
  uint32_t m = bits & ((1u << f.man_bits) - 1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  if (f.fnuz && bits == (1u << (total - 1))) return nan;
  if (f.fn_nan && e == (1u << f.exp_bits) - 1 && m == (1u << f.man_bits) - 1) return nan;
  if (f.has_inf && e == (1u << f.exp_bits) - 1)
    return m == 0 ? (sign ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity()) : nan;
  double v = e == 0 ? std::ldexp(double(m), 1 - f.bias - f.man_bits)
                    : std::ldexp(1.0 + double(m) / double(1 << f.man_bits), int(e) - f.bias);
  return float(sign ? -v : v);
}

float round_to_minifloat(float x, int t, bool saturate) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  if (t == kF8E8M0) {  // nearest power of two (ties up), NaN for non-positive
    if (std::isnan(x) || x <= 0) return x == 0 ? std::ldexp(1.0f, -127) : nan;
    if (std::isinf(x)) return saturate ? std::ldexp(1.0f, 127) : nan;
    int e;
    double m = std::frexp(double(x), &e);  // x = m * 2^e, m in [0.5, 1)
    int k = m > 0.75 ? e : e - 1;          // round the exponent to nearest in log-linear sense
    if (m == 0.75) k = e;
    k = std::max(k, -127);
    if (k > 127) return saturate ? std::ldexp(1.0f, 127) : nan;
    return std::ldexp(1.0f, k);
  }
  MiniFormat f = format_of(t);
  if (std::isnan(x)) return t == kF4E2M1 ? nan : nan;
  double mx = max_finite(f);
  double a = std::fabs(double(x));
  bool neg = std::signbit(x);
  auto signed_result = [&](double v) {
    if (v == 0 && f.fnuz) return 0.0f;
    return float(neg ? -v : v);
  };
  if (std::isinf(x)) {
    if (saturate || t == kF4E2M1) return signed_result(mx);
    return f.has_inf ? x : nan;
  }
  if (a == 0) return signed_result(0);
  int e;
  std::frexp(a, &e);  // a in [2^(e-1), 2^e)
  int exp = std::max(e - 1, 1 - f.bias);
  double quantum = std::ldexp(1.0, exp - f.man_bits);
  double q = std::nearbyint(a / quantum) * quantum;
  if (q > mx) {
    if (saturate || t == kF4E2M1) return signed_result(mx);
    return f.has_inf ? (neg ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity()) : nan;
  }
  return signed_result(q);
}

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

HostTensor decode_tensor(const pb::TensorProto& t, const std::string& base_dir, const std::string& what_in) {
  std::string what = what_in.empty() ? "tensor '" + t.name() + "'" : what_in;
  HostTensor out;
  out.onnx_type = t.data_type();
  auto dt = carried_dtype(out.onnx_type);
  if (out.onnx_type == kString) fail(ErrorCategory::Unsupported, what, ": string tensors are not supported");
  if (!dt) fail(ErrorCategory::Parse, what, ": unknown element type ", out.onnx_type);
  out.dtype = *dt;
  out.dims.assign(t.dims().begin(), t.dims().end());
  int64_t n = numel_checked(out.dims, what);
  int bits = stored_bits(out.onnx_type);
  if (out.onnx_type == kComplex64 || out.onnx_type == kComplex128) bits *= 1;  // dtype size covers both parts
  int64_t stored = (n * bits + 7) / 8;
  std::vector<uint8_t> held;  // external or typed data, gathered first; raw_data is read in place
  const uint8_t* raw = nullptr;
  size_t raw_size = 0;
  if (t.data_location() == pb::TensorProto::EXTERNAL) {
    held = read_external(t, base_dir, what);
  } else if (t.has_raw_data()) {
    raw = reinterpret_cast<const uint8_t*>(t.raw_data().data());
    raw_size = t.raw_data().size();
  } else {
    held = typed_to_raw(t, out.onnx_type, stored, what);
  }
  if (!raw) {
    raw = held.data();
    raw_size = held.size();
  }
  if (int64_t(raw_size) != stored)
    fail(ErrorCategory::Parse, what, ": ", onnx_type_name(out.onnx_type), " data has ", raw_size,
         " bytes, dims ", n, " elements need ", stored);
  out.bytes = raw_to_carried(raw, out.onnx_type, out.dtype, n);
  return out;
}

HostTensor read_tensor_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(ErrorCategory::Io, "cannot open '", path, "'");
  std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  pb::TensorProto t;
  if (!t.ParseFromString(data)) fail(ErrorCategory::Parse, "'", path, "' is not a valid TensorProto");
  std::string dir = std::filesystem::path(path).parent_path().string();
  return decode_tensor(t, dir, "'" + path + "'");
}

double read_scalar(const uint8_t* p, DType d) {
  switch (d) {
    case DType::F32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::F64: { double v; std::memcpy(&v, p, 8); return v; }
    case DType::F16: { uint16_t v; std::memcpy(&v, p, 2); return f16_to_f32(v); }
    case DType::BF16: { uint16_t v; std::memcpy(&v, p, 2); return bf16_to_f32(v); }
    case DType::I8: return double(int8_t(*p));
    case DType::U8: return double(*p);
    case DType::Bool: return *p ? 1.0 : 0.0;
    case DType::I16: { int16_t v; std::memcpy(&v, p, 2); return v; }
    case DType::I32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::U32: { uint32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::I64: { int64_t v; std::memcpy(&v, p, 8); return double(v); }
    default: fail(ErrorCategory::Unsupported, "cannot read a ", dtype_name(d), " element as a real number");
  }
}

namespace {
// A double as an integer with the runtime Cast's semantics: truncate toward zero, NaN -> 0,
// saturate to int64; narrower types then wrap. A plain conversion of NaN or an
// out-of-range value is undefined behaviour.
int64_t to_i64_saturating(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
  if (v <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return int64_t(v);
}
}  // namespace

void write_scalar(uint8_t* p, DType d, double v) {
  switch (d) {
    case DType::F32: { float x = float(v); std::memcpy(p, &x, 4); return; }
    case DType::F64: std::memcpy(p, &v, 8); return;
    case DType::F16: { uint16_t x = f32_to_f16(float(v)); std::memcpy(p, &x, 2); return; }
    case DType::BF16: { uint16_t x = f32_to_bf16(float(v)); std::memcpy(p, &x, 2); return; }
    case DType::I8: *p = uint8_t(int8_t(to_i64_saturating(v))); return;
    case DType::U8: *p = uint8_t(to_i64_saturating(v)); return;
    case DType::Bool: *p = v != 0; return;
    case DType::I16: { int16_t x = int16_t(to_i64_saturating(v)); std::memcpy(p, &x, 2); return; }
    case DType::I32: { int32_t x = int32_t(to_i64_saturating(v)); std::memcpy(p, &x, 4); return; }
    case DType::U32: { uint32_t x = uint32_t(to_i64_saturating(v)); std::memcpy(p, &x, 4); return; }
    case DType::I64: { int64_t x = to_i64_saturating(v); std::memcpy(p, &x, 8); return; }
    default: fail(ErrorCategory::Unsupported, "cannot write a real number as ", dtype_name(d));
  }
}

std::vector<int64_t> tensor_to_i64(const HostTensor& t) {
  int64_t n = t.numel();
  std::vector<int64_t> v(static_cast<size_t>(n));
  size_t es = dtype_size(t.dtype);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* p = t.bytes.data() + size_t(i) * es;
    if (t.dtype == DType::I64) std::memcpy(&v[size_t(i)], p, 8);
    else v[size_t(i)] = to_i64_saturating(read_scalar(p, t.dtype));
  }
  return v;
}

std::vector<double> tensor_to_f64(const HostTensor& t) {
  int64_t n = t.numel();
  std::vector<double> v(static_cast<size_t>(n));
  size_t es = dtype_size(t.dtype);
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = read_scalar(t.bytes.data() + size_t(i) * es, t.dtype);
  return v;
}

HostTensor make_tensor(DType d, std::vector<int64_t> dims, const std::vector<double>& values) {
  HostTensor t;
  t.dtype = d;
  t.onnx_type = onnx_type_of(d);
  t.dims = std::move(dims);
  t.bytes.resize(values.size() * dtype_size(d));
  for (size_t i = 0; i < values.size(); ++i) write_scalar(t.bytes.data() + i * dtype_size(d), d, values[i]);
  return t;
}

HostTensor make_i64(std::vector<int64_t> dims, const std::vector<int64_t>& values) {
  HostTensor t;
  t.dtype = DType::I64;
  t.onnx_type = kInt64;
  t.dims = std::move(dims);
  t.bytes.resize(values.size() * 8);
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

}  // namespace rlx::onnx
