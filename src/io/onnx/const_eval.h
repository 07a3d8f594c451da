// Internal: evaluates one IR node on constant inputs with the host evaluator (used by the
// importer to fold shape arithmetic while importing). Returns nullopt when no CPU
// kernel handles the node; other errors propagate.
#pragma once
#include <optional>
#include <vector>

#include "rlx/graph.h"

namespace rlx::onnx {

std::optional<std::vector<Blob>> eval_const_node(const Node& node, const std::vector<const Shape*>& in_types,
                                                 const std::vector<const Blob*>& in_values);

}  // namespace rlx::onnx
