// Internal: the ONNX -> rlx::Graph importer and the context a lowering function sees.
//
// The importer walks the ONNX graph in order, maps each node through the op table
// (ops_table.h) and records the rlx Value of every ONNX value name (scoped, so If /
// Loop / Scan bodies see outer names). emit() folds a node eagerly when all its inputs
// are constants (through the CPU kernels), so shape arithmetic becomes constants and
// ops that take attributes as inputs (Reshape shape, Slice starts, Pad pads, ...) can
// read them. A value that is needed as a constant but depends on a symbolic input dim
// raises DynamicShapeError: the model then has to be imported per concrete shapes.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "io/onnx/proto.h"
#include "io/onnx/tensor.h"
#include "rlx/onnx.h"

namespace rlx::onnx {

// Error(Shape) whose cause is a symbolic input dim (importing with concrete shapes fixes it).
class DynamicShapeError : public Error {
 public:
  explicit DynamicShapeError(const std::string& msg) : Error(ErrorCategory::Shape, msg) {}
};

// Error(Unsupported): a value that must be a constant (a shape, axes, pads, ...) is
// computed at run time. `value` names that ONNX value ("" when unknown). The runner
// binds it by value: a graph input directly; a value the model computes by ending the
// compiled segment before the node (import_segment).
class ConstantRequiredError : public Error {
 public:
  explicit ConstantRequiredError(const std::string& msg, std::string value = "")
      : Error(ErrorCategory::Unsupported, msg), value(std::move(value)) {}
  std::string value;
};

// Error(Unsupported): `node`'s output shape depends on the values of its run-time inputs
// (NonZero, Unique, NonMaxSuppression, ...). The runner ends the compiled segment before
// a top-level node that throws this and evaluates the node on the host (eval_host_node).
class RunTimeShapeError : public Error {
 public:
  RunTimeShapeError(const std::string& msg, const pb::NodeProto* node)
      : Error(ErrorCategory::Unsupported, msg), node(node) {}
  const pb::NodeProto* node;
};

// Where an import may end a segment early (OnnxRunner): never (the whole graph or an
// error); before a node that needs run-time values to import (RunTimeShapeError); and
// also before a node that needs a value this segment computes (ConstantRequiredError: the
// runner tries binding small graph inputs by value first, as that compiles to one graph).
enum class Split { None, HostNodes, HostNodesAndValues };

// One compiled segment of a model run in segments (nodes [begin, end) of the main graph).
struct SegmentInput {
  std::string name;
  // A value the compiled graphs cannot carry (string tensor, sequence, optional): a node
  // that reads it runs on the host.
  bool host = false;
  DType dtype = DType::F32;
  int onnx_type = 0;
  std::vector<int64_t> dims;
};
struct Segment {
  int begin = 0;
  // The node the segment stops before; -1 when it runs to the model's outputs.
  int end = -1;
  // end >= 0: `bind` empty when node `end` is evaluated on the host (RunTimeShapeError);
  // else the value it needs by value (ConstantRequiredError), and the next segment starts at it.
  std::string bind;
  bool host_node() const { return end >= 0 && bind.empty(); }
  // end >= 0: the graph's outputs, by name (values computed in this segment and read at or
  // after `end`); the inputs still read later (`forward`); constants read later (`constants`,
  // passed into the next segment by value). end < 0: the model's outputs the graph computes
  // (the others are host values the runner holds).
  std::vector<std::string> outputs;
  std::vector<std::string> forward;
  std::map<std::string, HostTensor> constants;
  std::map<std::string, int> types;  // the ONNX type of each output and forwarded input
};

// Every value name node `n` reads, its subgraphs' reads included (a superset of the outer
// names a body uses: the names a body defines itself are not defined outside it).
void names_read(const pb::NodeProto& n, std::unordered_set<std::string>& out);

class Importer {
 public:
  Importer(const ModelSource& src, const ImportOptions& opts, Graph& g);

  // Imports the main graph; `shapes` overrides declared input dims; inputs named in
  // `values` become constants with those values (value specialization). With a `split`
  // other than Split::None it may stop early, as import_segment does (the returned Segment
  // says where); with Split::None the whole graph is imported or the error propagates.
  Segment import_main(const std::map<std::string, std::vector<int64_t>>& shapes,
                      const std::map<std::string, TypedTensor>& values = {}, Split split = Split::None);
  // Imports a subgraph body inline (If branch, unrolled Loop/Scan iteration): body
  // inputs are bound to `inputs` (fewer allowed: the rest must not be used), outer
  // names stay visible. Returns the body outputs.
  std::vector<Value> import_body(const pb::GraphProto& body, const std::vector<Value>& inputs);
  // Imports main-graph nodes from `begin` with `inputs` as graph inputs and `constants`
  // as constants (a segment of a model run in segments, OnnxRunner): up to the end, or up
  // to the first top-level node that throws RunTimeShapeError (or, with
  // Split::HostNodesAndValues, ConstantRequiredError for a value this segment computes).
  // Returns where it stopped and what crosses over.
  Segment import_segment(int begin, const std::vector<SegmentInput>& inputs,
                         const std::map<std::string, HostTensor>& constants, Split split);
  // Evaluates `node` (of the main graph or a body) on the host over `values` (the names it
  // reads, its subgraphs' outer reads included, each bound as a constant; main-graph
  // initializers it reads that are not given are defined here): the node's own lowering,
  // folded. Returns its outputs in order (absent outputs as empty tensors).
  std::vector<HostTensor> eval_node(const pb::NodeProto& node, const std::map<std::string, HostTensor>& values);
  // True when `node` must run on the host (host_eval.h): it reads a host value (string
  // tensor, sequence, optional) or is, or holds in a subgraph, an op that makes one.
  bool needs_host(const pb::NodeProto& node) const;

  Graph& graph() { return g_; }
  const ModelSource& source() const { return src_; }
  ModelSource::Initializer initializer(const pb::TensorProto& t);
  const ImportOptions& options() const { return opts_; }
  int64_t opset() const { return src_.opset; }

  Value lookup(const std::string& name) const;  // throws Parse naming the current node
  void define(const std::string& name, Value v);

  // Adds a node (or folds it into constants). `name` names the node in the graph.
  std::vector<Value> emit(OpKind k, std::vector<Value> in, Attrs a);
  Value emit1(OpKind k, std::vector<Value> in, Attrs a);
  Value constant(const HostTensor& t);
  bool is_const(Value v) const;
  std::optional<HostTensor> const_tensor(Value v) const;

  const std::string& current_node() const { return cur_node_; }

  // ONNX element type of a value name when it differs from the natural type of its
  // carried dtype (float8, uint16, ...); 0 when not recorded.
  int onnx_type_of_name(const std::string& name) const;
  void set_onnx_type(const std::string& name, int t) { onnx_types_[name] = t; }

 private:
  void import_initializers(const pb::GraphProto& g);
  void import_body_nodes(const pb::GraphProto& g);
  Segment import_from(int begin, Split split, const std::unordered_set<std::string>& passed);
  void lower_node(const pb::NodeProto& n);
  void define_input(const std::string& name, const Shape& s, int onnx_type);
  void define_constant(const std::string& name, const HostTensor& t);
  void define_initializer(const pb::TensorProto& t);
  void import_value_types_and_initializers(const pb::GraphProto& gp);
  bool graph_needs_host(const pb::GraphProto& g) const;

  const ModelSource& src_;
  ImportOptions opts_;
  Graph& g_;
  std::vector<std::unordered_map<std::string, Value>> scopes_;
  std::string cur_node_;
  std::unordered_map<std::string, int> onnx_types_;
  std::unordered_set<std::string> host_values_;  // names of values only the host holds
};

// What a lowering function sees: one ONNX node, its inputs as rlx Values, attribute
// accessors, and builders. Errors name the node, its op type and the opset.
class NodeCtx {
 public:
  NodeCtx(Importer& im, const pb::NodeProto& n) : im(im), g(im.graph()), node(n), opset(im.opset()) {}

  Importer& im;
  Graph& g;
  const pb::NodeProto& node;
  int64_t opset;

  // ---- inputs
  int num_inputs() const { return node.input_size(); }
  bool has(int i) const { return i < node.input_size() && !node.input(i).empty(); }
  Value in(int i) const;            // throws if absent
  Value in_or(int i) const { return has(i) ? in(i) : Value{}; }
  const Shape& type(int i) const { return g.type(in(i)); }
  DType dtype(int i) const { return type(i).dtype(); }
  int rank(int i) const { return type(i).rank(); }
  std::vector<int64_t> dims(int i) const;  // static dims (DynamicShapeError if symbolic)
  bool is_const(int i) const { return has(i) && im.is_const(in(i)); }
  HostTensor const_input(int i, const char* what) const;  // Unsupported unless constant
  std::vector<int64_t> const_ints(int i, const char* what) const;
  std::vector<double> const_reals(int i, const char* what) const;

  // ---- attributes
  const pb::AttributeProto* attr(const char* name) const;
  bool has_attr(const char* name) const { return attr(name) != nullptr; }
  int64_t attr_int(const char* name, int64_t def) const;
  double attr_float(const char* name, double def) const;
  std::string attr_str(const char* name, const std::string& def) const;
  std::vector<int64_t> attr_ints(const char* name, std::vector<int64_t> def = {}) const;
  std::vector<float> attr_floats(const char* name, std::vector<float> def = {}) const;
  std::optional<HostTensor> attr_tensor(const char* name) const;
  const pb::GraphProto* attr_graph(const char* name) const;

  // ---- outputs
  int num_outputs() const { return node.output_size(); }
  bool wants(int i) const { return i < node.output_size() && !node.output(i).empty(); }
  // The ONNX element type of input i (recorded type, else the carried dtype's own).
  int onnx_type(int i) const;
  // Records the ONNX element type of output i (for types carried widened).
  void set_out_type(int i, int t) const {
    if (wants(i)) im.set_onnx_type(node.output(i), t);
  }

  // ---- builders (fold through the importer)
  Value op(OpKind k, std::vector<Value> in, Attrs a) const { return im.emit1(k, std::move(in), std::move(a)); }
  Value op(OpKind k, std::vector<Value> in) const { return op(k, std::move(in), default_attrs(k)); }
  Value scalar(double v, DType t) const;                        // rank-0 constant
  Value full(std::vector<int64_t> dims, double v, DType t) const;
  Value ints(const std::vector<int64_t>& v) const;              // 1-D i64 constant
  Value cast(Value x, DType t) const;
  Value reshape(Value x, std::vector<int64_t> shape) const;
  Value transpose(Value x, std::vector<int64_t> perm) const;
  Value expand(Value x, std::vector<int64_t> shape) const;
  Value slice(Value x, std::vector<int64_t> starts, std::vector<int64_t> ends, std::vector<int64_t> axes,
              std::vector<int64_t> steps = {}) const;
  Value concat(std::vector<Value> xs, int64_t axis) const;
  Value reduce(OpKind k, Value x, std::vector<int64_t> axes, bool keepdims) const;
  Value unsqueeze(Value x, std::vector<int64_t> axes) const;
  std::vector<int64_t> vdims(Value v) const;  // static dims of any value

  // Checks an element count for a host-side table built while importing (0 <= n <=
  // 2^26); Unsupported naming the node otherwise.
  size_t host_size(int64_t n) const;
  // Requires v > 0 (InvalidArgument naming `what`); returns v.
  int64_t positive(int64_t v, const char* what) const;

  // Normalizes an axis against a rank (InvalidArgument naming the node).
  int64_t axis(int64_t a, int64_t rank, const char* what = "axis") const;

  std::string where() const;  // "node 'n' (Op, opset N)"
  template <class... Args>
  [[noreturn]] void unsupported(const Args&... args) const {
    fail(ErrorCategory::Unsupported, "ONNX ", where(), ": ", args...);
  }
  template <class... Args>
  [[noreturn]] void invalid(const Args&... args) const {
    fail(ErrorCategory::InvalidArgument, "ONNX ", where(), ": ", args...);
  }
};

}  // namespace rlx::onnx

namespace rlx::onnx {

// Parses and checks a model (Error(Parse) naming `name`), without importing it.
std::shared_ptr<ModelSource> parse_model(const void* data, size_t size, const std::string& name,
                                         const std::string& base_dir);
std::shared_ptr<ModelSource> parse_model_file(const std::string& path);
// Fills value infos and imports with the declared shapes.
OnnxModel make_model(std::shared_ptr<ModelSource> src, const ImportOptions& opts);

}  // namespace rlx::onnx
