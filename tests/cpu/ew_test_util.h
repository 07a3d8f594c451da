// Helpers for the elementwise kernel tests: typed element access for all 13 dtypes,
// random tensors, running one node through the harness, reference rounding and
// tolerant comparison.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ir/op_table.h"
#include "harness.h"
#include "rlx/graph.h"

namespace rlx::test::ew {

struct Tensor {
  Shape shape;
  std::vector<uint8_t> bytes;
};

inline int64_t numel_of(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

// Element i as a complex number (real dtypes have imaginary part 0).
inline std::complex<double> getc(DType t, const uint8_t* p, int64_t i) {
  auto rd = [&](auto tag) {
    decltype(tag) v;
    std::memcpy(&v, p + i * int64_t(sizeof(v)), sizeof(v));
    return v;
  };
  switch (t) {
    case DType::F32: return rd(float());
    case DType::F64: return rd(double());
    case DType::F16: return f16_to_f32(rd(uint16_t()));
    case DType::BF16: return bf16_to_f32(rd(uint16_t()));
    case DType::I8: return double(rd(int8_t()));
    case DType::I16: return double(rd(int16_t()));
    case DType::I32: return double(rd(int32_t()));
    case DType::I64: return double(rd(int64_t()));
    case DType::U8: return double(rd(uint8_t()));
    case DType::U32: return double(rd(uint32_t()));
    case DType::Bool: return rd(uint8_t()) != 0 ? 1.0 : 0.0;
    case DType::C64: { auto v = rd(std::complex<float>()); return {v.real(), v.imag()}; }
    case DType::C128: return rd(std::complex<double>());
  }
  return 0;
}
inline double get(DType t, const uint8_t* p, int64_t i) { return getc(t, p, i).real(); }
// Exact integer read (I64 values beyond 2^53 survive).
inline int64_t geti(DType t, const uint8_t* p, int64_t i) {
  auto rd = [&](auto tag) {
    decltype(tag) v;
    std::memcpy(&v, p + i * int64_t(sizeof(v)), sizeof(v));
    return int64_t(v);
  };
  switch (t) {
    case DType::I8: return rd(int8_t());
    case DType::I16: return rd(int16_t());
    case DType::I32: return rd(int32_t());
    case DType::I64: return rd(int64_t());
    case DType::U8: return rd(uint8_t());
    case DType::U32: return rd(uint32_t());
    case DType::Bool: return rd(uint8_t()) != 0;
    default: return int64_t(get(t, p, i));
  }
}

// Stores v (in range for the dtype) as element i.
inline void putc(DType t, uint8_t* p, int64_t i, std::complex<double> c) {
  const double v = c.real();
  auto wr = [&](auto x) { std::memcpy(p + i * int64_t(sizeof(x)), &x, sizeof(x)); };
  switch (t) {
    case DType::F32: wr(float(v)); break;
    case DType::F64: wr(v); break;
    case DType::F16: wr(f32_to_f16(float(v))); break;
    case DType::BF16: wr(f32_to_bf16(float(v))); break;
    case DType::I8: wr(int8_t(v)); break;
    case DType::I16: wr(int16_t(v)); break;
    case DType::I32: wr(int32_t(v)); break;
    case DType::I64: wr(int64_t(v)); break;
    case DType::U8: wr(uint8_t(v)); break;
    case DType::U32: wr(uint32_t(v)); break;
    case DType::Bool: wr(uint8_t(v != 0)); break;
    case DType::C64: wr(std::complex<float>(float(c.real()), float(c.imag()))); break;
    case DType::C128: wr(c); break;
  }
}
inline void put(DType t, uint8_t* p, int64_t i, double v) { putc(t, p, i, v); }

// Uniform values in [lo, hi] (integers rounded; complex gets a random imaginary part).
inline Tensor random_tensor(DType t, std::vector<int64_t> dims, double lo, double hi, uint32_t seed) {
  Tensor x{Shape(dims, t), {}};
  const int64_t n = numel_of(dims);
  x.bytes.resize(size_t(n) * dtype_size(t));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < n; ++i) {
    double v = u(rng);
    if (is_integer(t) || t == DType::Bool) v = std::round(v);
    if (t == DType::Bool) v = (int64_t(std::fabs(v)) % 2);
    putc(t, x.bytes.data(), i, is_complex(t) ? std::complex<double>(v, u(rng)) : std::complex<double>(v));
  }
  return x;
}

inline Tensor from_values(DType t, std::vector<int64_t> dims, const std::vector<double>& v) {
  Tensor x{Shape(dims, t), std::vector<uint8_t>(v.size() * dtype_size(t))};
  for (size_t i = 0; i < v.size(); ++i) put(t, x.bytes.data(), int64_t(i), v[i]);
  return x;
}

struct OpResult {
  Shape shape;
  std::vector<uint8_t> bytes;
};

// Builds a graph with one input per tensor and one `kind` node; runs it.
inline OpResult run_op(OpKind kind, const std::vector<Tensor>& ins, Attrs attrs, int threads = 1,
                       int64_t extent_actual = 0, int64_t extent_upper = 0) {
  Graph g("t");
  std::vector<Value> vals;
  for (size_t i = 0; i < ins.size(); ++i) vals.push_back(g.input(std::string("x").append(std::to_string(i)), ins[i].shape));
  Value y = g.add1(kind, vals, std::move(attrs), "op");
  std::vector<std::vector<uint8_t>> bytes;
  for (const auto& t : ins) bytes.push_back(t.bytes);
  auto outs = run_kernel(g, y.node, bytes, threads, extent_actual, extent_upper);
  return {g.type(y), outs.at(0)};
}

// The op's attributes from two numbers (ScalarAttrs, or clip/gelu/mod/is_inf's own structs
// through ir::attrs_from_params); ops without such attributes ignore them.
inline Attrs scalar_attrs(OpKind k, double alpha = 0, double beta = 0) {
  Attrs a = default_attrs(k);
  return ir::has_scalar_params(a) && !std::holds_alternative<NoAttrs>(a) ? ir::attrs_from_params(k, alpha, beta) : a;
}

// Runs `fn` with RLX_ISA set to `isa` (restored afterwards).
template <class Fn> auto with_isa(const char* isa, Fn fn) {
  const char* old = std::getenv("RLX_ISA");
  std::string saved = old ? old : "";
  setenv("RLX_ISA", isa, 1);
  struct Restore {
    std::string v;
    bool had;
    ~Restore() { had ? (void)setenv("RLX_ISA", v.c_str(), 1) : (void)unsetenv("RLX_ISA"); }
  } restore{saved, old != nullptr};
  return fn();
}

// Rounds a double to f32 precision. The float passes through a volatile: GCC 12.2 at -O2
// turns two neighbouring double(float(x)) into one 2-lane vector truncate + extend and then
// folds that pair away, so the rounding silently disappears (it made the C64 cast
// reference exact in the RelWithDebInfo/ASan build).
inline double round_f32(double v) {
  volatile float f = float(v);
  return double(f);
}

// Rounds a double reference to dtype t's precision (the kernel's final rounding).
inline double round_to(DType t, double v) {
  switch (t) {
    case DType::F32: return round_f32(v);
    case DType::F16: return f16_to_f32(f32_to_f16(float(v)));
    case DType::BF16: return bf16_to_f32(f32_to_bf16(float(v)));
    default: return v;
  }
}

struct Tol {
  double rtol = 0, atol = 0;
};
inline Tol float_tol(DType t, double scale = 1) {
  switch (t) {
    case DType::F32: return {3e-6 * scale, 1e-37};
    case DType::F64: return {1e-13 * scale, 1e-300};
    case DType::F16: return {2e-3 * scale, 1e-7};
    case DType::BF16: return {1.6e-2 * scale, 1e-37};
    default: return {0, 0};
  }
}

inline bool close(double got, double ref, Tol tol) {
  if (std::isnan(ref)) return std::isnan(got);
  if (std::isinf(ref)) return got == ref;
  return std::fabs(got - ref) <= tol.atol + tol.rtol * std::fabs(ref);
}

// Compares every element of `got` (dtype t) with `ref`; reports the first few misses.
inline void expect_all_close(DType t, const std::vector<uint8_t>& got, const std::vector<double>& ref,
                             Tol tol, const std::string& what, const std::vector<double>* inputs = nullptr) {
  ASSERT_EQ(got.size(), ref.size() * dtype_size(t)) << what;
  int bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = get(t, got.data(), int64_t(i));
    if (!close(g, ref[i], tol)) {
      if (++bad <= 5)
        ADD_FAILURE() << what << " [" << i << "]: got " << g << " want " << ref[i]
                      << (inputs ? " input " + std::to_string((*inputs)[i]) : std::string());
    }
  }
}

}  // namespace rlx::test::ew
