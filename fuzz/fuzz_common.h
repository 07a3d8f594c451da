// Shared pieces of the fuzz target bodies (fuzz/<name>_target.h). Each body is a plain
// function of the input bytes, compiled both into a libFuzzer executable (clang,
// fuzz/<name>_fuzz.cpp) and into the g++ smoke test (tests/fuzz/fuzz_smoke_test.cpp).
//
// Contract of every body: an input is either accepted or refused with rlx::Error. A
// finding leaves the body as anything else: a crash or sanitizer report, any other
// exception, or rlx::fuzz::Finding, thrown for a broken property (a text round trip that
// is not exact, an imported graph the verifier refuses, ...; with RLX_FUZZ_STRICT=1 also
// an Internal-category rlx::Error). Under libFuzzer an escaping exception ends in
// std::terminate, which prints its type and message and aborts.
//
// Size limits keep each input fast and inside the 2 GiB RSS budget of a fuzz run: every
// graph of at most max_nodes nodes is compiled, whatever its shapes, under a small memory
// cap (CompileOptions::max_arena_bytes): huge or overflowing sizes must be refused with
// rlx::Error there. Only graphs whose values are all small (fits_budget) are also run.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "rlx/rlx.h"

namespace rlx::fuzz {

// A broken property on a fuzz input (not a parse refusal).
class Finding : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// Strict mode (environment RLX_FUZZ_STRICT=1): an Internal-category rlx::Error, which
// says an invariant inside rlx broke rather than that the input is bad, is a finding too.
inline bool strict_mode() {
  static const bool strict = [] {
    const char* v = std::getenv("RLX_FUZZ_STRICT");
    return v && *v && std::string(v) != "0";
  }();
  return strict;
}

// Runs `body`: true when it completes, false when it refuses the input with rlx::Error.
template <class F>
bool guard(F&& body) {
  try {
    body();
    return true;
  } catch (const Error& e) {
    if (e.category() == ErrorCategory::Internal && strict_mode())
      throw Finding(std::string("internal error (RLX_FUZZ_STRICT): ") + e.what());
    return false;
  }
}

// Deterministic filler bytes for inputs and params: the fuzz input, cycled.
class ByteSource {
 public:
  ByteSource(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t next() {
    if (size_ == 0) return 0;
    uint8_t b = data_[pos_];
    pos_ = (pos_ + 1) % size_;
    return b;
  }
  std::vector<uint8_t> bytes(size_t n) {
    std::vector<uint8_t> out(n);
    for (auto& b : out) b = next();
    return out;
  }
  // `n` elements of `t`: integers are mostly small (-2..5: valid indices, axes and
  // sizes reach deeper), one time in eight raw bytes; floats and bool are raw bytes.
  std::vector<uint8_t> tensor(DType t, size_t n) {
    size_t es = dtype_size(t);
    bool small = t != DType::F32 && t != DType::F16 && t != DType::BF16 && t != DType::F64 && t != DType::C64 &&
                 t != DType::C128 && t != DType::Bool && next() >= 32;
    if (!small) return bytes(n * es);
    std::vector<uint8_t> out(n * es);
    for (size_t i = 0; i < n; ++i) {
      int64_t v = int64_t(next() % 8) - 2;
      std::memcpy(out.data() + i * es, &v, es);  // little-endian: the low bytes of v
    }
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// What a fuzz input may compile and run.
struct GraphBudget {
  int64_t max_nodes = 96;                  // all graphs, subgraphs included
  int64_t max_value_elements = 1 << 16;    // per node output
  int64_t max_total_elements = 1 << 20;    // sum over node outputs
  int64_t symbol_size = 2;                 // every symbolic dim is bound to this size
  int64_t max_arena_bytes = int64_t(64) << 20;  // compile cap on the arena and on the weights
};

inline constexpr int64_t kSaturated = int64_t(1) << 62;

// Element count with symbolic dims counted as `symbol_size`; saturates at kSaturated.
inline int64_t bounded_numel(const Shape& s, int64_t symbol_size) {
  int64_t n = 1;
  for (const Dim& d : s.dims()) {
    int64_t v = d.is_static() ? d.raw() : symbol_size;
    if (v == 0) return 0;
    if (n > kSaturated / v) n = kSaturated;
    else n *= v;
  }
  return n;
}

namespace detail {
inline bool fits_nodes(const Graph& g, const GraphBudget& b, int64_t& nodes, int depth) {
  if (depth > 8) return false;
  for (const Node& n : g.nodes()) {
    if (++nodes > b.max_nodes) return false;
    for (const auto& sub : n.subgraphs)
      if (sub && !fits_nodes(*sub, b, nodes, depth + 1)) return false;
  }
  return true;
}

inline bool fits_budget(const Graph& g, const GraphBudget& b, int64_t& nodes, int64_t& total, int depth) {
  if (depth > 8) return false;
  for (const Node& n : g.nodes()) {
    if (++nodes > b.max_nodes) return false;
    for (const Shape& s : n.outputs) {
      int64_t e = bounded_numel(s, b.symbol_size);
      if (e > b.max_value_elements) return false;
      total += e;
      if (total > b.max_total_elements) return false;
    }
    for (const auto& sub : n.subgraphs)
      if (sub && !fits_budget(*sub, b, nodes, total, depth + 1)) return false;
  }
  return true;
}
}  // namespace detail

inline bool fits_budget(const Graph& g, const GraphBudget& b = {}) {
  int64_t nodes = 0, total = 0;
  return detail::fits_budget(g, b, nodes, total, 0);
}

// Compiles `g` on the CPU (one thread, every symbol bound to b.symbol_size, the verifier
// after each pass, the arena and weights capped at b.max_arena_bytes), then, when every
// value is small, sets params without initial data and runs once on inputs filled from
// `src`. Graphs of more than b.max_nodes nodes are skipped. rlx::Error propagates to the
// caller's guard; a compile that "succeeds" past the cap is a finding.
inline void compile_and_run(const Graph& g, ByteSource& src, const GraphBudget& b = {}) {
  int64_t nodes = 0;
  if (!detail::fits_nodes(g, b, nodes, 0)) return;
  CompileOptions opts;
  opts.threads = 1;
  opts.verify_each_pass = true;
  opts.max_arena_bytes = b.max_arena_bytes;
  for (const std::string& s : g.symbols()) opts.dim_bindings[s] = b.symbol_size;
  CompiledGraph cg = Session(Device::Cpu, opts).compile(g);
  const CompileReport& rep = cg.report();
  if (rep.arena_bytes > b.max_arena_bytes || rep.weight_bytes - rep.constant_bytes > b.max_arena_bytes)
    throw Finding("compile accepted a plan above the memory cap: arena " + std::to_string(rep.arena_bytes) +
                  " bytes, weights " + std::to_string(rep.weight_bytes));
  if (!fits_budget(cg.graph(), b)) return;
  for (int32_t id : g.param_nodes()) {
    const Node& n = g.node(id);
    const auto& leaf = n.attr<LeafAttrs>();
    if (!leaf.init.empty() || n.outputs.empty()) continue;
    const Shape& t = n.outputs[0];
    std::vector<uint8_t> bytes = src.tensor(t.dtype(), size_t(bounded_numel(t, b.symbol_size)));
    cg.set_param_typed(leaf.name, bytes.data(), bytes.size(), t.dtype());
  }
  std::map<std::string, TypedTensor> feed;
  for (const std::string& name : cg.input_names()) {
    Shape t = cg.input_type(name);
    if (!t.is_static()) return;  // a compile that leaves symbols unbound: nothing to run
    TypedTensor in;
    in.dtype = t.dtype();
    in.dims = t.static_dims();
    in.bytes = src.tensor(t.dtype(), size_t(bounded_numel(t, b.symbol_size)));
    feed.emplace(name, std::move(in));
  }
  std::vector<TypedTensor> outs = cg.run_typed(feed);
  if (outs.size() != g.outputs().size())
    throw Finding("run_typed returned " + std::to_string(outs.size()) + " outputs for a graph with " +
                  std::to_string(g.outputs().size()));
}

}  // namespace rlx::fuzz
