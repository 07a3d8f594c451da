// The one "run one node's CPU kernel outside a compiled graph" of rlx. Constant folding
// (through the CPU backend's const_evaluator), the ONNX importer's eager folding of shape
// arithmetic (through the runtime's host evaluator) and the kernel tests all use it, so
// they agree on buffer alignment and padding, size checks and error categories.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "rlx/graph.h"

namespace rlx::cpu {

struct EvalOptions {
  int threads = 1;
  int64_t extent_actual = 0, extent_upper = 0;  // active extent (kernel tests)
};

// Runs `node` (its output types already inferred) on `in_values` (one span per node
// input; absent optional inputs have a nullptr type and are ignored). Each buffer the
// kernel sees is 64-byte aligned and zero-padded to a multiple of 64 bytes (kernels may
// use aligned, whole-vector loads). Throws Error(Unsupported) when no CPU kernel runs the
// node with these types, Error(InvalidArgument) when a value's size does not match its
// type; kernel errors propagate with the node named.
std::vector<Blob> evaluate_node(const Node& node, const std::vector<const Shape*>& in_types,
                                const std::vector<std::span<const uint8_t>>& in_values, const EvalOptions& opts = {});

}  // namespace rlx::cpu
