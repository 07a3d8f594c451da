// Graph -> Graph rewriting support shared by the passes.
//
// A Rewriter copies a source graph into a fresh destination graph node by node while
// keeping a map from source values to destination values. A pass walks the source in
// order and, for each node, either copies it (inputs remapped), replaces its outputs by
// values already in the destination, or emits new nodes. finish() sets the graph
// outputs (names kept) and returns the destination. Names, leaves (their public names
// and data), symbols (same ids) and subgraphs are preserved by copy().
//
// Errors: mapping a source value that has not been mapped yet throws Error(Internal)
// naming the node; shape errors from re-inference propagate as Error(Shape).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/element.h"
#include "ir/op_table.h"
#include "rlx/graph.h"

namespace rlx::opt {

class Rewriter {
 public:
  explicit Rewriter(const Graph& src);

  const Graph& src() const { return src_; }
  Graph& dst() { return dst_; }
  const Graph& dst() const { return dst_; }

  // Destination value of a source value; an absent value (node -1) maps to absent.
  Value map(Value old) const;
  bool is_mapped(Value old) const;
  std::vector<Value> map_inputs(const Node& n) const;
  // Maps source value `old` to destination value `now`.
  void set(Value old, Value now);
  // The name to give the rewrite of source node `id`: its own name, or "" when that
  // name is the automatic "<op>_<id>" (the destination then picks its own automatic name).
  std::string name_of(int32_t id) const;
  // Maps every output of source node `id` to the given destination values (in order).
  void replace(int32_t id, const std::vector<Value>& now);

  // Copies source node `id` with its inputs remapped. Output types are kept when the
  // remapped inputs have the same types as in the source, re-inferred otherwise.
  // Returns the destination node id.
  int32_t copy(int32_t id);
  // Copies source node `id` with other (destination) inputs; output types re-inferred.
  int32_t copy_with_inputs(int32_t id, std::vector<Value> inputs);
  // Appends `node` (inputs and output types already set for the destination) as the
  // rewrite of source node `id`, mapping its outputs in order.
  int32_t append(int32_t id, Node node);

  // Adds a new node to the destination (types inferred). The name is made unique.
  std::vector<Value> emit(OpKind kind, std::vector<Value> inputs, Attrs attrs, const std::string& name = "");
  Value emit1(OpKind kind, std::vector<Value> inputs, Attrs attrs, const std::string& name = "");

  // Sets the destination outputs to the mapped source outputs (same names) and returns
  // the destination graph. The Rewriter must not be used afterwards.
  Graph finish();

 private:
  const Graph& src_;
  Graph dst_;
  std::vector<std::vector<Value>> map_;  // [src node][out] -> dst value
};

// g with chains of nodes each replaced by one node emitted at the chain's tail (the fusion
// passes): tail_of[i] >= 0 marks node i as a tail (the value is the caller's chain index),
// absorbed[i] drops node i (an inner node of a chain: only the chain read it). emit(rw, chain,
// tail) emits the fused node through rw and returns its value, which replaces the tail's
// output 0; every other node is copied.
template <class Emit>
Graph rewrite_chains(const Graph& g, const std::vector<char>& absorbed, const std::vector<int32_t>& tail_of,
                     Emit&& emit) {
  Rewriter rw(g);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (absorbed[i]) continue;  // emitted with its chain's tail
    if (tail_of[i] < 0) {
      rw.copy(int32_t(i));
      continue;
    }
    const Value f = emit(rw, tail_of[i], int32_t(i));
    rw.set(Value{int32_t(i), 0}, f);
  }
  return rw.finish();
}

// The chains a pass takes, in node order, for rewrite_chains: a chain (its inner nodes and its
// tail) is taken only when none of its nodes is in a chain taken before it.
struct ChainClaims {
  std::vector<char> absorbed;    // inner nodes of taken chains
  std::vector<int32_t> tail_of;  // tail node -> chain index, -1 elsewhere
  explicit ChainClaims(size_t nodes) : absorbed(nodes, 0), tail_of(nodes, -1) {}
  // Takes the chain as number `index` (true), or leaves it (false) when a node is already taken.
  bool claim(const std::vector<int32_t>& inner, int32_t tail, int32_t index);
};

// Who uses each value: users[node][out] lists the consuming node ids (one entry per
// input slot, so a node using a value twice appears twice); outputs[node][out] counts
// how many graph outputs refer to it.
// The activation a node applies to its only input, if a fused epilogue (fused_matmul,
// fused_conv2d) can express it (alpha: leaky_relu's slope).
bool activation_of(const Node& n, Activation& a, double& alpha);
// Node id, when it is such an activation and its output has `type`: its activation and alpha.
bool activation_keeping(const Graph& g, int32_t id, const Shape& type, Activation& a, double& alpha);

// For a binary node with `v` as one of its two operands: the other one (false otherwise).
bool other_operand(const Node& n, Value v, Value& other);

struct UseInfo {
  std::vector<std::vector<std::vector<int32_t>>> users;
  std::vector<std::vector<int>> outputs;

  int count(Value v) const;  // input slots + graph outputs
  // True when every use of `v` is by node `consumer` and `v` is not a graph output.
  bool only_used_by(Value v, int32_t consumer) const;
  // The one node reading `v` (one input slot, and `v` not a graph output), or -1.
  int32_t sole_user(Value v) const;
  // Total uses of all outputs of node `id` (input slots + graph outputs).
  int node_uses(int32_t id) const;
};
UseInfo compute_uses(const Graph& g);

// Input types of a node as the op table's inference wants them (nullptr = absent).
std::vector<const Shape*> input_types(const Graph& g, const Node& n);
// Builds a node (not added to any graph) and infers its outputs; throws Error(Shape).
Node make_node(const Graph& g, OpKind kind, std::vector<Value> inputs, Attrs attrs, const std::string& name);

// The single value every element of constant `v` has, as a double; nullopt when `v` is
// not a Constant node, is complex, or its elements differ. Zero-element constants: nullopt.
std::optional<double> splat_value(const Graph& g, Value v);

// A constant of type `like` (static) filled with `value`.
Value constant_filled(Graph& g, const Shape& like, double value, const std::string& name = "");

// True when every value of `from` is exactly representable in `to`.
bool is_lossless_cast(DType from, DType to);

// True when node `id` of a graph carries the automatic name "<op>_<id>".
bool is_auto_name(const Node& n, int32_t id);
// "<base>/<suffix>", or "" when base is "" (so derived names stay automatic).
std::string sub_name(const std::string& base, const std::string& suffix);

// The producer node of `v` in `g` when it has kind `k`; nullptr otherwise.
const Node* producer_of_kind(const Graph& g, Value v, OpKind k);

// Normalizes a transpose permutation (empty = reverse) for the given rank.
std::vector<int64_t> normalized_perm(const std::vector<int64_t>& perm, int rank);

// "f32[2,3], -, i64[4]" with absent inputs as "-" and symbols by their graph names.
std::string types_str(const Graph& g, const std::vector<Value>& values);
std::string shape_str(const Graph& g, const Shape& s);

}  // namespace rlx::opt
