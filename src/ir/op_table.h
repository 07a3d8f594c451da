// Internal: the op table as data, derived from include/rlx/ops.def.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "rlx/graph.h"

namespace rlx::ir {

enum Trait : uint32_t {
  kLeaf = 1u << 0,
  kUnary = 1u << 1,
  kBinary = 1u << 2,
  kElementwise = 1u << 3,
  kCompare = 1u << 4,
  kReduction = 1u << 5,
  kDataMovement = 1u << 6,
  kView = 1u << 7,          // may alias its input (reshape, identity)
  kFusable = 1u << 8,       // may join a fused elementwise chain
  kHasDecomposition = 1u << 9,
  kNondeterministic = 1u << 10,
  kCommutative = 1u << 11,
  kFloatOnly = 1u << 12,    // accepts only floating dtypes
};

// Inputs to shape inference. in[i] is nullptr for an absent optional input.
struct InferCtx {
  const Node& node;
  std::vector<const Shape*> in;

  int num_inputs() const { return int(in.size()); }
  bool has(int i) const { return i < int(in.size()) && in[i] != nullptr; }
  const Shape& input(int i) const;  // throws (naming the node) if absent
  template <class... Args>
  [[noreturn]] void error(const Args&... args) const {
    fail(ErrorCategory::Shape, "node '", node.name, "' (", op_name(node.kind), "): ", args...);
  }
};
using InferFn = std::vector<Shape> (*)(const InferCtx&);

// Declarations of every infer function named in ops.def (defined in src/ir/ops/*.cpp).
#define RLX_OP(kind, name, attrs, min_in, max_in, n_out, traits, infer) \
  std::vector<Shape> infer(const InferCtx&);
#include "rlx/ops.def"
#undef RLX_OP

struct OpInfo {
  OpKind kind;
  std::string_view name;
  int min_inputs, max_inputs, num_outputs;  // num_outputs -1: from attributes
  uint32_t traits;
  InferFn infer;
  size_t attrs_index;  // index of the attribute struct in the Attrs variant
};

const OpInfo& op_info(OpKind k);
const std::vector<OpInfo>& all_ops();
bool has_trait(OpKind k, Trait t);
// Looks up a kind by its text name; false if unknown.
bool op_from_name(std::string_view name, OpKind& out);

// Runs the op's shape inference for `node` given its input types (checks arity first).
std::vector<Shape> infer_outputs(const Node& node, const std::vector<const Shape*>& inputs);

}  // namespace rlx::ir
