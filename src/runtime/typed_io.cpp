#include "runtime/typed_io.h"

#include "ir/dims.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

namespace rlx::runtime {

namespace {

// The real dtype a value's components are stored in, and how many per element.
DType real_view(DType t) {
  if (t == DType::C64) return DType::F32;
  if (t == DType::C128) return DType::F64;
  return t;
}
int lanes(DType t) { return is_complex(t) ? 2 : 1; }

template <class T>
T saturate(double v) {
  if (v != v) return T(0);
  if (v <= double(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
  if (v >= double(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return T(v);
}

template <class T>
void load_as(const void* src, double* dst, size_t n) {
  const T* s = static_cast<const T*>(src);
  for (size_t i = 0; i < n; ++i) dst[i] = double(s[i]);
}

void load(DType t, const void* src, double* dst, size_t n) {
  switch (t) {
    case DType::F32: load_as<float>(src, dst, n); return;
    case DType::F64: load_as<double>(src, dst, n); return;
    case DType::F16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    case DType::BF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::I8: load_as<int8_t>(src, dst, n); return;
    case DType::I16: load_as<int16_t>(src, dst, n); return;
    case DType::I32: load_as<int32_t>(src, dst, n); return;
    case DType::I64: load_as<int64_t>(src, dst, n); return;
    case DType::U8: load_as<uint8_t>(src, dst, n); return;
    case DType::U32: load_as<uint32_t>(src, dst, n); return;
    case DType::Bool: {
      const auto* s = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = s[i] != 0 ? 1.0 : 0.0;
      return;
    }
    case DType::C64:
    case DType::C128: break;
  }
  fail(ErrorCategory::Internal, "load of complex dtype as reals");
}

template <class T>
void store_int(const double* src, void* dst, size_t n) {
  T* d = static_cast<T*>(dst);
  for (size_t i = 0; i < n; ++i) d[i] = saturate<T>(src[i]);
}

void store(DType t, const double* src, void* dst, size_t n) {
  switch (t) {
    case DType::F32: {
      auto* d = static_cast<float*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = float(src[i]);
      return;
    }
    case DType::F64: std::memcpy(dst, src, n * sizeof(double)); return;
    case DType::F16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_f16(float(src[i]));
      return;
    }
    case DType::BF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_bf16(float(src[i]));
      return;
    }
    case DType::I8: store_int<int8_t>(src, dst, n); return;
    case DType::I16: store_int<int16_t>(src, dst, n); return;
    case DType::I32: store_int<int32_t>(src, dst, n); return;
    case DType::I64: store_int<int64_t>(src, dst, n); return;
    case DType::U8: store_int<uint8_t>(src, dst, n); return;
    case DType::U32: store_int<uint32_t>(src, dst, n); return;
    case DType::Bool: {
      auto* d = static_cast<uint8_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = src[i] != 0.0 ? 1 : 0;  // NaN != 0: true, as in C
      return;
    }
    case DType::C64:
    case DType::C128: break;
  }
  fail(ErrorCategory::Internal, "store of complex dtype as reals");
}

}  // namespace

void convert_reals(DType from, const void* src, DType to, void* dst, size_t n) {
  if (from == to) {
    if (n) std::memcpy(dst, src, n * dtype_size(from));
    return;
  }
  // Through a small stack buffer of doubles: exact for every real dtype but i64/u64
  // magnitudes past 2^53, which no float boundary can hold anyway.
  constexpr size_t kChunk = 256;
  double buf[kChunk];
  const size_t fs = dtype_size(from), ts = dtype_size(to);
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  for (size_t i = 0; i < n; i += kChunk) {
    size_t m = std::min(kChunk, n - i);
    load(from, s + i * fs, buf, m);
    store(to, buf, d + i * ts, m);
  }
}

std::optional<size_t> Boundary::user_elems(size_t slot_elems) const {
  if ((slot_elems * size_t(user_group)) % size_t(slot_group) != 0) return std::nullopt;
  return slot_elems * size_t(user_group) / size_t(slot_group);
}

std::optional<Boundary> find_boundary(DType user, DType slot, bool lenient) {
  Boundary b;
  b.user = user;
  b.slot = slot;
  if (user == slot) return b;
  if (user == DType::C128 && slot == DType::F32) {
    b.kind = Boundary::Kind::HiLo;
    b.slot_group = 4;
    return b;
  }
  const bool uc = is_complex(user), sc = is_complex(slot);
  bool ok = false;
  if (uc && sc) ok = true;                                               // c64 <-> c128
  else if (uc || sc) ok = (uc ? slot : user) == DType::F32;              // complex as f32 pairs
  else if (is_float(user) && is_float(slot)) ok = true;                  // widen / narrow
  else if (lenient && user == DType::F32) ok = true;                     // f32 convenience
  if (!ok) return std::nullopt;
  b.kind = real_view(user) == real_view(slot) ? Boundary::Kind::Copy : Boundary::Kind::Real;
  const int lu = lanes(user), ls = lanes(slot), g = std::gcd(lu, ls);
  b.user_group = ls / g;
  b.slot_group = lu / g;
  return b;
}

Boundary boundary_or_throw(DType user, DType slot, bool lenient, const std::string& what) {
  auto b = find_boundary(user, slot, lenient);
  if (!b)
    fail(ErrorCategory::InvalidArgument, what, " is ", dtype_name(slot), ", got ", dtype_name(user),
         " (no conversion between them)");
  return *b;
}

void to_slot(const Boundary& b, const void* user, void* slot, size_t user_elems) {
  if (b.kind == Boundary::Kind::HiLo) {
    const auto* s = static_cast<const double*>(user);
    auto* d = static_cast<float*>(slot);
    for (size_t i = 0; i < 2 * user_elems; ++i) {
      const float hi = float(s[i]);
      d[2 * i] = hi;
      d[2 * i + 1] = float(s[i] - double(hi));
    }
    return;
  }
  const size_t reals = user_elems * size_t(lanes(b.user));
  convert_reals(real_view(b.user), user, real_view(b.slot), slot, reals);
}

void to_user(const Boundary& b, const void* slot, void* user, size_t user_elems) {
  if (b.kind == Boundary::Kind::HiLo) {
    const auto* s = static_cast<const float*>(slot);
    auto* d = static_cast<double*>(user);
    for (size_t i = 0; i < 2 * user_elems; ++i) d[i] = double(s[2 * i]) + double(s[2 * i + 1]);
    return;
  }
  const size_t reals = user_elems * size_t(lanes(b.user));
  convert_reals(real_view(b.slot), slot, real_view(b.user), user, reals);
}

int64_t numel_of(const std::vector<int64_t>& dims) {
  for (int64_t d : dims)
    if (d < 0) fail(ErrorCategory::InvalidArgument, "tensor has a negative dim ", d);
  return dims_numel(dims);  // checked: an overflowing product is Error(Shape)
}

TypedTensor convert_tensor(const TypedTensor& t, DType to) {
  const size_t es = dtype_size(t.dtype);
  if (t.bytes.size() % es != 0)
    fail(ErrorCategory::InvalidArgument, "tensor of ", t.bytes.size(), " bytes is not a whole number of ",
         dtype_name(t.dtype), " elements");
  const size_t n = t.bytes.size() / es;
  TypedTensor r;
  r.dtype = to;
  // `from_groups` source elements become `to_groups` target elements.
  bool read_back = true;
  auto b = find_boundary(to, t.dtype, false);
  if (!b) {
    b = find_boundary(t.dtype, to, false);
    read_back = false;
  }
  if (!b)
    fail(ErrorCategory::InvalidArgument, "no conversion from ", dtype_name(t.dtype), " to ", dtype_name(to));
  const int from_g = read_back ? b->slot_group : b->user_group;
  const int to_g = read_back ? b->user_group : b->slot_group;
  r.dims = t.dims;
  if (from_g != to_g) {
    if (r.dims.empty()) r.dims = {int64_t(n)};
    int64_t& last = r.dims.back();
    if ((last * to_g) % from_g != 0)
      fail(ErrorCategory::InvalidArgument, "cannot convert ", dtype_name(t.dtype), " to ", dtype_name(to),
           ": last dim ", last, " is not a multiple of ", from_g);
    last = last * to_g / from_g;
  }
  if (n % size_t(from_g) != 0)
    fail(ErrorCategory::InvalidArgument, "cannot convert ", n, " ", dtype_name(t.dtype), " elements to ",
         dtype_name(to), " in groups of ", from_g);
  const size_t out_n = n / size_t(from_g) * size_t(to_g);
  r.bytes.resize(out_n * dtype_size(to));
  if (read_back) to_user(*b, t.bytes.data(), r.bytes.data(), out_n);
  else to_slot(*b, t.bytes.data(), r.bytes.data(), n);
  return r;
}

}  // namespace rlx::runtime
