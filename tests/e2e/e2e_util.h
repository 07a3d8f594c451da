// Helpers of the end-to-end tests: a plain host tensor (dims + values held as double,
// plus the dtype it travels in), seeded random data, running a graph through the public
// API (Session -> CompiledGraph -> run_typed), and comparisons that name the first
// mismatching element.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "rlx/rlx.h"

namespace rlx::e2e {

inline int64_t numel_of(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// A host tensor: row-major values as double, carried in `dtype` at the API boundary.
struct T {
  std::vector<int64_t> dims;
  std::vector<double> v;
  DType dtype = DType::F32;
  T() = default;
  T(std::vector<int64_t> d, DType t = DType::F32) : dims(std::move(d)), v(size_t(numel_of(dims)), 0.0), dtype(t) {}
  T(std::vector<int64_t> d, std::vector<double> vals, DType t = DType::F32)
      : dims(std::move(d)), v(std::move(vals)), dtype(t) {}
  int64_t numel() const { return int64_t(v.size()); }
  int rank() const { return int(dims.size()); }
  Shape shape() const { return Shape(dims, dtype); }
};

// Rounds a double to what `t` can hold (floats round to nearest, integers truncate).
inline double round_to(double x, DType t) {
  switch (t) {
    case DType::F32: return double(float(x));
    case DType::F16: return double(f16_to_f32(f32_to_f16(float(x))));
    case DType::BF16: return double(bf16_to_f32(f32_to_bf16(float(x))));
    case DType::Bool: return x != 0 ? 1.0 : 0.0;
    case DType::F64: return x;
    default: return std::trunc(x);
  }
}

inline std::vector<uint8_t> to_bytes(const T& t) {
  std::vector<uint8_t> b(t.v.size() * dtype_size(t.dtype));
  for (size_t i = 0; i < t.v.size(); ++i) {
    uint8_t* p = b.data() + i * dtype_size(t.dtype);
    const double x = t.v[i];
    auto put = [&](auto y) { std::memcpy(p, &y, sizeof(y)); };
    switch (t.dtype) {
      case DType::F32: put(float(x)); break;
      case DType::F64: put(x); break;
      case DType::F16: put(f32_to_f16(float(x))); break;
      case DType::BF16: put(f32_to_bf16(float(x))); break;
      case DType::I8: put(int8_t(x)); break;
      case DType::I16: put(int16_t(x)); break;
      case DType::I32: put(int32_t(x)); break;
      case DType::I64: put(int64_t(x)); break;
      case DType::U8: put(uint8_t(x)); break;
      case DType::U32: put(uint32_t(x)); break;
      case DType::Bool: put(uint8_t(x != 0)); break;
      default: ADD_FAILURE() << "e2e: no host packing for " << dtype_name(t.dtype);
    }
  }
  return b;
}

inline T from_typed(const TypedTensor& tt) {
  T t(tt.dims, tt.dtype);
  const size_t es = dtype_size(tt.dtype);
  EXPECT_EQ(tt.bytes.size(), t.v.size() * es);
  for (size_t i = 0; i < t.v.size() && (i + 1) * es <= tt.bytes.size(); ++i) {
    const uint8_t* p = tt.bytes.data() + i * es;
    auto get = [&](auto y) { std::memcpy(&y, p, sizeof(y)); return y; };
    switch (tt.dtype) {
      case DType::F32: t.v[i] = get(float()); break;
      case DType::F64: t.v[i] = get(double()); break;
      case DType::F16: t.v[i] = f16_to_f32(get(uint16_t())); break;
      case DType::BF16: t.v[i] = bf16_to_f32(get(uint16_t())); break;
      case DType::I8: t.v[i] = get(int8_t()); break;
      case DType::I16: t.v[i] = get(int16_t()); break;
      case DType::I32: t.v[i] = get(int32_t()); break;
      case DType::I64: t.v[i] = double(get(int64_t())); break;
      case DType::U8: t.v[i] = get(uint8_t()); break;
      case DType::U32: t.v[i] = get(uint32_t()); break;
      case DType::Bool: t.v[i] = get(uint8_t()) ? 1 : 0; break;
      default: ADD_FAILURE() << "e2e: no host unpacking for " << dtype_name(tt.dtype);
    }
  }
  return t;
}

inline TypedTensor to_typed(const T& t) { return TypedTensor{t.dtype, t.dims, to_bytes(t)}; }

// Seeded random data. Every test builds its own Rng from a fixed seed.
class Rng {
 public:
  explicit Rng(uint32_t seed) : gen_(seed) {}
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(gen_); }
  int64_t integer(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(gen_); }
  // Uniform values in [lo, hi), rounded to the dtype.
  T tensor(std::vector<int64_t> dims, double lo = -1, double hi = 1, DType dt = DType::F32) {
    T t(std::move(dims), dt);
    const bool integral = !is_float(dt) && dt != DType::Bool;
    for (double& x : t.v) {
      if (dt == DType::Bool) x = integer(0, 1);
      else if (integral) x = double(integer(int64_t(lo), int64_t(hi)));
      else x = round_to(uniform(lo, hi), dt);
    }
    return t;
  }

 private:
  std::mt19937 gen_;
};

inline CompileOptions default_options(int threads = 2) {
  CompileOptions o;
  o.threads = threads;
  o.verify_each_pass = true;
  return o;
}

inline CompileOptions passes_off(CompileOptions o) {
  o.fuse_elementwise = o.fuse_matmul_epilogue = o.fuse_norms = o.fuse_gelu = o.fuse_attention = o.constant_fold = o.cse = o.simplify = false;
  return o;
}

// Known bugs (repro tests in bugs_test.cpp, skipped while open). Set a flag to false
// once its fix lands.
// RLX_ISA=native is accepted by detect_isa and rejected by apply_env.
inline constexpr bool kBugIsaNativeRejected = false;

inline bool has_op(const Graph& g, OpKind k) {
  for (const Node& n : g.nodes())
    if (n.kind == k) return true;
  return false;
}

// The one compile entry of these tests (a place to steer around a crashing bug while
// its fix is pending): Session(Device::Cpu, o).compile(g). RLX_E2E_DEVICE=cuda runs the
// same cases on the CUDA backend (on a GPU machine; cases it cannot compile then fail).
inline Device e2e_device() {
  const char* d = std::getenv("RLX_E2E_DEVICE");
  return d && std::string(d) == "cuda" ? Device::Cuda : Device::Cpu;
}
inline CompiledGraph compile_e2e(const Graph& g, const CompileOptions& o = default_options()) {
  return Session(e2e_device(), o).compile(g);
}

using Feeds = std::map<std::string, T>;

inline void set_params(CompiledGraph& net, const Feeds& params) {
  for (const auto& [name, t] : params) {
    std::vector<uint8_t> b = to_bytes(t);
    net.set_param_typed(name, b.data(), b.size(), t.dtype);
  }
}

inline std::vector<T> run_net(CompiledGraph& net, const Feeds& inputs) {
  std::map<std::string, TypedTensor> in;
  for (const auto& [name, t] : inputs) in.emplace(name, to_typed(t));
  std::vector<T> out;
  for (const TypedTensor& tt : net.run_typed(in)) out.push_back(from_typed(tt));
  return out;
}

// Compiles `g` with `opts`, sets `params`, runs once with `inputs`.
inline std::vector<T> run_graph(const Graph& g, const Feeds& inputs, const Feeds& params = {},
                                const CompileOptions& opts = default_options()) {
  CompiledGraph net = compile_e2e(g, opts);
  set_params(net, params);
  return run_net(net, inputs);
}

// Checks |got - want| <= atol + rtol * |want| per element (NaN must match NaN; equal
// infinities match). Reports the first few mismatches.
inline void expect_close(const T& got, const T& want, double rtol, double atol, const std::string& what) {
  ASSERT_EQ(got.dims, want.dims) << what << ": dims differ";
  ASSERT_EQ(got.v.size(), want.v.size()) << what;
  int bad = 0;
  std::ostringstream os;
  for (size_t i = 0; i < got.v.size(); ++i) {
    const double g = got.v[i], w = want.v[i];
    bool ok;
    if (std::isnan(w)) ok = std::isnan(g);
    else if (std::isinf(w)) ok = g == w;
    else ok = std::fabs(g - w) <= atol + rtol * std::fabs(w);
    if (!ok && bad++ < 5) os << "\n  [" << i << "] got " << g << " want " << w << " (diff " << g - w << ")";
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.v.size() << " elements differ" << os.str();
}

// Relative to the whole tensor: max|got - want| <= rtol * max(max|want|, tiny).
inline double max_rel_diff(const T& got, const T& want) {
  double md = 0, mw = 0;
  for (size_t i = 0; i < got.v.size() && i < want.v.size(); ++i) {
    md = std::max(md, std::fabs(got.v[i] - want.v[i]));
    mw = std::max(mw, std::fabs(want.v[i]));
  }
  return md / std::max(mw, 1e-30);
}

inline void expect_bitwise_equal(const T& a, const T& b, const std::string& what) {
  ASSERT_EQ(a.dims, b.dims) << what;
  int bad = 0;
  std::ostringstream os;
  for (size_t i = 0; i < a.v.size(); ++i) {
    const bool same = std::memcmp(&a.v[i], &b.v[i], sizeof(double)) == 0 || (std::isnan(a.v[i]) && std::isnan(b.v[i]));
    if (!same && bad++ < 5) os << "\n  [" << i << "] " << a.v[i] << " vs " << b.v[i];
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << a.v.size() << " elements differ" << os.str();
}

// Per-dtype tolerance of a computed float result.
inline double rtol_of(DType t) {
  switch (t) {
    case DType::F16: return 2e-3;
    case DType::BF16: return 1.6e-2;
    case DType::F64: return 1e-12;
    default: return 2e-5;
  }
}

}  // namespace rlx::e2e
