// Helpers shared by the runtime tests: small graphs with known results, byte packing,
// a scoped environment variable, and an "expect rlx::Error of this category" check.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "rlx/rlx.h"

namespace rlx::test {

template <class T>
std::vector<uint8_t> pack(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

template <class T>
std::vector<T> unpack(const std::vector<uint8_t>& b) {
  std::vector<T> v(b.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), b.data(), v.size() * sizeof(T));
  return v;
}

template <class T>
std::vector<T> unpack(const TensorView& t) {
  std::vector<T> v(t.bytes / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), t.data, v.size() * sizeof(T));
  return v;
}

template <class T>
TypedTensor typed(DType dt, std::vector<int64_t> dims, const std::vector<T>& v) {
  return TypedTensor{dt, std::move(dims), pack(v)};
}

// Runs `f` and checks it throws rlx::Error of `cat` whose message contains `needle`.
inline void expect_error(const std::function<void()>& f, ErrorCategory cat, const std::string& needle = "") {
  try {
    f();
    ADD_FAILURE() << "expected rlx::Error(" << category_name(cat) << ") containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), cat) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
  }
}

// Sets an environment variable for the scope, restoring the old value after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_.c_str(), old_->c_str(), 1);
    else unsetenv(name_.c_str());
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// DESIGN.md section 5: y = x[1,4] @ w[4,2].
inline Graph hello_graph() {
  Graph g("hello");
  auto x = g.input("x", Shape({1, 4}, DType::F32));
  auto w = g.param("w", Shape({4, 2}, DType::F32));
  g.set_outputs({g.matmul(x, w)}, {"y"});
  return g;
}
inline const std::vector<float> kHelloW{1, 0, 0, 1, 1, 0, 0, 1};

inline CompileOptions test_options(int threads = 2) {
  CompileOptions o;
  o.threads = threads;
  o.verify_each_pass = true;
  return o;
}

inline CompiledGraph compile(const Graph& g, int threads = 2) {
  return Session(Device::Cpu, test_options(threads)).compile(g);
}

// Reference matmul, row-major: a[m,k] @ b[k,n].
inline std::vector<float> ref_matmul(const std::vector<float>& a, const std::vector<float>& b, int m, int k, int n) {
  std::vector<float> c(size_t(m) * n, 0.f);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int p = 0; p < k; ++p) s += double(a[size_t(i) * k + p]) * b[size_t(p) * n + j];
      c[size_t(i) * n + j] = float(s);
    }
  return c;
}

}  // namespace rlx::test
