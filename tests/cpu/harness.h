// Test harness for CPU kernels: runs one node's kernel on given input bytes through the
// backend's one evaluator (backends/cpu/evaluate.h), outside the compile pipeline, so
// kernel tests compare against plain reference code without passes or the planner, on
// exactly the buffers constant folding uses.
#pragma once
#include <cstring>
#include <vector>

#include <span>

#include "backends/cpu/evaluate.h"
#include "rlx/error.h"
#include "rlx/graph.h"

namespace rlx::test {

template <class T>
std::vector<uint8_t> to_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

template <class T>
std::vector<T> from_bytes(const std::vector<uint8_t>& b) {
  std::vector<T> v(b.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), b.data(), v.size() * sizeof(T));
  return v;
}

// Runs node `node_id` of `g` (its inputs must be graph leaves or any node: only their
// types are used). `inputs` holds bytes per node input (empty vector for an absent
// optional input). Returns the bytes of every output. Throws if no kernel supports it.
inline std::vector<std::vector<uint8_t>> run_kernel(const Graph& g, int32_t node_id,
                                                    const std::vector<std::vector<uint8_t>>& inputs,
                                                    int threads = 1, int64_t extent_actual = 0,
                                                    int64_t extent_upper = 0) {
  const Node& node = g.node(node_id);
  std::vector<const Shape*> in_types;
  std::vector<std::span<const uint8_t>> values;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const Value& v = node.inputs[i];
    in_types.push_back(v.valid() ? &g.type(v) : nullptr);
    values.emplace_back(v.valid() ? std::span<const uint8_t>(inputs.at(i)) : std::span<const uint8_t>());
  }
  std::vector<std::vector<uint8_t>> outs;
  for (const Blob& b : cpu::evaluate_node(node, in_types, values, cpu::EvalOptions{threads, extent_actual, extent_upper}))
    outs.emplace_back(b.data(), b.data() + b.size());
  return outs;
}

}  // namespace rlx::test
