// Eager folding while importing goes through the runtime's host evaluator (the CPU
// backend's one evaluator, backends/cpu/evaluate.h): the importer names no backend.
#include "io/onnx/const_eval.h"

#include "runtime/backend_registry.h"

namespace rlx::onnx {

std::optional<std::vector<Blob>> eval_const_node(const Node& node, const std::vector<const Shape*>& in_types,
                                                 const std::vector<const Blob*>& in_values) {
  std::vector<Shape> types;
  std::vector<Blob> values;
  for (size_t i = 0; i < in_types.size(); ++i) {
    types.push_back(in_types[i] ? *in_types[i] : Shape());
    values.push_back(in_types[i] && in_values[i] ? *in_values[i] : Blob());
  }
  try {
    return runtime::host_evaluator()(node, types, values);
  } catch (const Error& e) {
    if (e.category() == ErrorCategory::Unsupported) return std::nullopt;  // left for the compiler
    throw;
  }
}

}  // namespace rlx::onnx
