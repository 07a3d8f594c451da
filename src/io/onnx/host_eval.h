// Internal: the host interpreter for the nodes the compiled graphs cannot carry.
//
// OnnxRunner ends a compiled segment before a node that reads or makes a string tensor, a
// sequence or an optional (Importer::needs_host, lower_on_host), and before a node whose
// output shape depends on values (RunTimeShapeError); HostEval runs that node here, over
// values of every kind (OnnxValue):
// - sequence and optional ops, Identity, and the string ops (host_strings.cpp) directly;
// - If, Loop and SequenceMap by interpreting their bodies node by node with this
//   interpreter (bodies may carry sequences);
// - every other node through the importer's own lowering with its inputs bound as
//   constants, folded by the CPU kernels (Importer::eval_node): one implementation of
//   each tensor op, here and in compiled graphs.
#pragma once
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/onnx/host_value.h"
#include "io/onnx/importer.h"

namespace rlx::onnx {

// Values by name, with the enclosing body's scope as parent (a body sees outer names).
class Scope {
 public:
  explicit Scope(const Scope* parent = nullptr) : parent_(parent) {}
  const OnnxValue* find(const std::string& name) const;
  void set(const std::string& name, OnnxValue v) { own_[name] = std::move(v); }
  OnnxValue* own(const std::string& name);

 private:
  const Scope* parent_;
  std::unordered_map<std::string, OnnxValue> own_;
};

class HostEval;

// What a host op sees: the node, its inputs (null when absent), attribute readers and
// errors that name the node.
struct HostNode {
  HostEval& ev;
  const pb::NodeProto& node;
  const Scope& scope;
  int64_t opset;
  std::vector<const OnnxValue*> in;

  bool has(int i) const { return i < int(in.size()) && in[size_t(i)]; }
  const OnnxValue& input(int i) const;  // InvalidArgument when absent
  // Input i by value: moved out of the scope when this node is its last reader there
  // (a sequence grown in a Loop body is then never copied), else copied.
  OnnxValue take(int i) const;
  std::vector<bool> last_use;  // per input: this node is the name's last reader in its scope
  const OnnxValue& tensor(int i) const;  // a tensor (numeric or strings), else InvalidArgument
  const OnnxValue& strings(int i) const;  // a string tensor
  int64_t scalar_int(int i, const char* what) const;  // a one-element integer tensor

  const pb::AttributeProto* attr(const char* name) const;
  int64_t attr_int(const char* name, int64_t def) const;
  std::string attr_str(const char* name, const std::string& def) const;
  std::vector<std::string> attr_strings(const char* name) const;
  std::vector<int64_t> attr_ints(const char* name) const;
  std::vector<float> attr_floats(const char* name) const;

  std::string where() const;  // "node 'n' (Op, opset N)"
  template <class... Args>
  [[noreturn]] void invalid(const Args&... args) const {
    fail(ErrorCategory::InvalidArgument, "ONNX ", where(), ": ", args...);
  }
  template <class... Args>
  [[noreturn]] void unsupported(const Args&... args) const {
    fail(ErrorCategory::Unsupported, "ONNX ", where(), ": ", args...);
  }
};

using HostFn = std::vector<OnnxValue> (*)(HostNode&);
// The string op for this node (host_strings.cpp), or nullptr: Constant / Cast / CastLike /
// Equal only when strings are involved; StringNormalizer, StringConcat, StringSplit,
// RegexFullMatch and ai.onnx.ml LabelEncoder always; and the ops that only move or select
// elements (Gather, Reshape, Transpose, Concat, Slice, Split, Where, Tile, ...) and the shape
// queries (Shape, Size) on strings: run on each string's index, then mapped back.
HostFn string_op(const pb::NodeProto& n, const std::vector<const OnnxValue*>& in);

class HostEval {
 public:
  HostEval(const ModelSource& src, const ImportOptions& opts) : src_(src), opts_(opts) {}
  // Runs `node` over the values `scope` (then the main graph's initializers) gives its
  // names. Returns its outputs in order (absent outputs as empty tensors).
  std::vector<OnnxValue> eval(const pb::NodeProto& node, const Scope& scope);
  // The same, where `own` is the scope's own map: inputs whose last reader is this node
  // (last_use) may be moved out of it.
  std::vector<OnnxValue> eval_in(const pb::NodeProto& node, Scope& scope, const std::vector<bool>& last_use);
  // Counts work against ImportOptions::host_work_limit (Error(ResourceExhausted) naming the node).
  void charge(int64_t units, const pb::NodeProto& node);
  // Runs a body: its inputs bound to `inputs` in order, outer names from `outer`; returns
  // its outputs.
  std::vector<OnnxValue> run_graph(const pb::GraphProto& g, std::vector<OnnxValue> inputs, const Scope& outer);
  // `node` through the importer's lowering, folded, with the names in `replace` bound to
  // those values instead of the scope's (string ops that move elements run on indices).
  std::vector<OnnxValue> fold_with(const pb::NodeProto& node, const Scope& scope,
                                   std::map<std::string, OnnxValue> replace);
  const ModelSource& source() const { return src_; }

 private:
  const OnnxValue* value(const std::string& name, const Scope& scope);
  OnnxValue initializer_value(const pb::TensorProto& t, const std::string& what) const;
  std::vector<OnnxValue> fold(const pb::NodeProto& node, const Scope& scope);
  int64_t opset_of(const pb::NodeProto& n) const;

  const ModelSource& src_;
  ImportOptions opts_;
  std::map<std::string, OnnxValue> inits_;  // main-graph initializers host ops read
  // Per body: for each node, which inputs it reads last (computed once, not per Loop iteration).
  const std::vector<std::vector<bool>>& last_uses(const pb::GraphProto& g);
  std::unordered_map<const pb::GraphProto*, std::vector<std::vector<bool>>> last_uses_;
  int depth_ = 0;
  int64_t work_ = 0;
};

// Numpy broadcasting of two shapes (Error(Shape) naming `what` when they do not broadcast),
// and the flat index into an operand of shape `dims` for output index `i` of `out`.
std::vector<int64_t> broadcast_dims(const std::vector<int64_t>& a, const std::vector<int64_t>& b, const std::string& what);
int64_t broadcast_index(int64_t i, const std::vector<int64_t>& out, const std::vector<int64_t>& dims);

}  // namespace rlx::onnx
