// Decompositions of composite ops into primitives, used by legalize.
//
// A decomposition emits its primitives through an Emitter, so the caller (legalize)
// can check each primitive against the backend's claims and legalize it in turn. The
// last node a decomposition emits carries the original node's name; the others are
// named "<name>/<op>". Constants (scalars, causal masks) are added to the graph
// directly: leaves need no kernel.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "rlx/graph.h"

namespace rlx::opt {

class Emitter {
 public:
  virtual ~Emitter() = default;
  virtual Graph& graph() = 0;
  // Adds one node (legalizing it as needed) and returns its outputs.
  virtual std::vector<Value> emit(OpKind kind, std::vector<Value> inputs, Attrs attrs, const std::string& name) = 0;
};

// True when decompose() knows `kind` (it may still refuse a particular node).
bool has_decomposition(OpKind kind);

// Emits node `n` (inputs already in the emitter's graph) as primitives and returns its
// outputs, or nullopt with `why` set when this node cannot be decomposed (for example
// symbolic dims where a reshape needs sizes). Results have exactly n's output types.
std::optional<std::vector<Value>> decompose(Emitter& e, const Node& n, std::string* why);

}  // namespace rlx::opt
