// Internal: the op table as data, derived from include/rlx/ops.def.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "rlx/graph.h"

namespace rlx::ir {

// Op traits. Each is true of exactly the ops that carry it, and code reads it instead of
// keeping a list of its own; tests/ir/op_traits_test.cpp checks every trait against the
// code it describes.
enum Trait : uint32_t {
  kLeaf = 1u << 0,           // no inputs: input, param, constant
  kUnary = 1u << 1,          // elementwise, one input
  kBinary = 1u << 2,         // elementwise, two broadcasting inputs
  kElementwise = 1u << 3,    // output[i] depends on input[i] only (with broadcasting)
  kBoolResult = 1u << 4,     // the output dtype is bool (comparisons, logical ops, is_nan, is_inf)
  kReduction = 1u << 5,      // reduces along axes (precision keeps these in f32)
  kDataMovement = 1u << 6,   // moves elements without arithmetic
  kView = 1u << 7,           // may alias its input (reshape, identity, bitcast)
  kFusable = 1u << 8,        // may join a fused elementwise chain
  kHasDecomposition = 1u << 9,  // opt::decompose lowers it into other ops (legalize's fallback)
  kCommutative = 1u << 11,   // binary op with f(a, b) == f(b, a) (cse canonicalizes operands)
  kFloatOnly = 1u << 12,     // accepts only floating dtypes
  // Writes into the storage of input 0 where view_of lets the output share it (the kernel
  // always runs; where it cannot share, the kernel copies input 0 first): cache_write.
  kInPlace = 1u << 13,
};

// The attributes of an elementwise op as two numbers, the form fused_elementwise programs
// (FusedOp::alpha/beta) and the CPU elementwise engine carry: ScalarAttrs as they are,
// clip (min, max), gelu (tanh_approx, 0), mod (fmod, 0), is_inf (detect_negative,
// detect_positive), 0/0 for attribute-less ops. attrs_from_params is the inverse for
// `kind`; it throws Error(Shape) for numbers the op's attributes cannot take.
void scalar_params(const Attrs& a, double& alpha, double& beta);
Attrs attrs_from_params(OpKind kind, double alpha, double beta);
// True when scalar_params() represents these attributes completely.
bool has_scalar_params(const Attrs& a);

// Elementwise ops whose input and output are both floating (the float-only unary ops
// that do not answer with bool).
bool is_float_unary(OpKind k);
// Number of operands of an elementwise op (1, 2, or 3 for where); -1 for other ops.
int elementwise_arity(OpKind k);

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

// A conv2d / fused_conv2d / max_pool2d / avg_pool2d in its channels-last (nhwc) form.
bool is_channels_last(const Node& node);

// Runs the op's shape inference for `node` given its input types (checks arity first).
std::vector<Shape> infer_outputs(const Node& node, const std::vector<const Shape*>& inputs);

}  // namespace rlx::ir
