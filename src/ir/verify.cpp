// The verifier: structural checks first (so re-inference only sees well-formed
// nodes), then every node's output types are re-inferred and compared.
#include <unordered_set>

#include "ir/op_table.h"
#include "rlx/text.h"

namespace rlx {

namespace {

class Verifier {
 public:
  Verifier(const Graph& g, std::string prefix) : g_(g), prefix_(std::move(prefix)) {}

  void run() {
    std::unordered_set<std::string> symbols;
    for (const auto& s : g_.symbols()) {
      if (s.empty()) error_graph("a symbol has an empty name");
      if (!symbols.insert(s).second) error_graph("symbol '" + s + "' is declared twice");
    }
    for (size_t i = 0; i < g_.nodes().size(); ++i) node(int32_t(i));
    std::unordered_set<std::string> names;
    for (size_t i = 0; i < g_.outputs().size(); ++i) {
      const GraphOutput& o = g_.outputs()[i];
      if (!value_ok(o.value)) error_graph("output " + std::to_string(i) + " ('" + o.name + "') refers to no value");
      if (o.name.empty()) error_graph("output " + std::to_string(i) + " has an empty name");
      if (!names.insert(o.name).second) error_graph("output name '" + o.name + "' is used twice");
    }
  }

 private:
  [[noreturn]] void error_graph(const std::string& msg) const {
    fail(ErrorCategory::Verify, prefix_, "graph '", g_.name(), "': ", msg);
  }
  [[noreturn]] void error_node(int32_t id, const std::string& msg) const {
    const Node& n = g_.nodes()[size_t(id)];
    fail(ErrorCategory::Verify, prefix_, "graph '", g_.name(), "': node '", n.name, "' (#", id, ", ",
         op_name(n.kind), "): ", msg);
  }

  bool value_ok(Value v) const {
    return v.node >= 0 && size_t(v.node) < g_.nodes().size() && v.out >= 0 &&
           size_t(v.out) < g_.nodes()[size_t(v.node)].outputs.size();
  }

  void node(int32_t id) {
    const Node& n = g_.nodes()[size_t(id)];
    if (size_t(n.kind) >= size_t(kNumOpKinds)) error_node(id, "invalid op kind " + std::to_string(int(n.kind)));
    const ir::OpInfo& info = ir::op_info(n.kind);
    if (n.name.empty()) error_node(id, "empty node name");
    if (!names_.insert(n.name).second) error_node(id, "node name is used twice");
    if (n.attrs.index() != info.attrs_index) error_node(id, "holds the wrong attribute struct for this op");
    int nin = int(n.inputs.size());
    if (nin < info.min_inputs || nin > info.max_inputs)
      error_node(id, "has " + std::to_string(nin) + " inputs, the op takes " + std::to_string(info.min_inputs) +
                         ".." + std::to_string(info.max_inputs));
    std::vector<const Shape*> in;
    for (int i = 0; i < nin; ++i) {
      Value v = n.inputs[size_t(i)];
      if (!v.valid()) {
        if (i < info.min_inputs) error_node(id, "required input " + std::to_string(i) + " is absent");
        in.push_back(nullptr);
        continue;
      }
      if (v.node >= id)
        error_node(id, "input " + std::to_string(i) + " refers to node #" + std::to_string(v.node) +
                           ", which does not precede it");
      if (!value_ok(v))
        error_node(id, "input " + std::to_string(i) + " refers to output " + std::to_string(v.out) + " of node #" +
                           std::to_string(v.node) + ", which does not exist");
      in.push_back(&g_.type(v));
    }
    if (info.num_outputs >= 0 && int(n.outputs.size()) != info.num_outputs)
      error_node(id, "has " + std::to_string(n.outputs.size()) + " outputs, the op has " +
                         std::to_string(info.num_outputs));
    for (const Shape& s : n.outputs)
      for (Dim d : s.dims())
        if (d.is_symbolic() && size_t(d.symbol_id()) >= g_.symbols().size())
          error_node(id, "output type " + s.str() + " uses a symbol the graph does not declare");
    if (n.kind == OpKind::Input || n.kind == OpKind::Param) {
      const auto& leaf = n.attr<LeafAttrs>();
      auto& seen = n.kind == OpKind::Input ? inputs_ : params_;
      if (!seen.insert(leaf.name).second)
        error_node(id, std::string(op_name(n.kind)) + " name '" + leaf.name + "' is used twice");
    }
    std::vector<Shape> inferred;
    try {
      inferred = ir::infer_outputs(n, in);
    } catch (const Error& e) {
      fail(ErrorCategory::Verify, prefix_, "graph '", g_.name(), "': ", e.what());
    }
    if (inferred.size() != n.outputs.size())
      error_node(id, "has " + std::to_string(n.outputs.size()) + " outputs, re-inference gives " +
                         std::to_string(inferred.size()));
    for (size_t k = 0; k < inferred.size(); ++k)
      if (!(inferred[k] == n.outputs[k]))
        error_node(id, "output " + std::to_string(k) + " has type " + n.outputs[k].str() +
                           " but re-inference gives " + inferred[k].str());
    for (size_t s = 0; s < n.subgraphs.size(); ++s) {
      if (!n.subgraphs[s]) error_node(id, "body " + std::to_string(s) + " is missing");
      Verifier(*n.subgraphs[s], prefix_ + "in body " + std::to_string(s) + " of node '" + n.name + "': ").run();
    }
  }

  const Graph& g_;
  std::string prefix_;
  std::unordered_set<std::string> names_, inputs_, params_;
};

}  // namespace

void verify_graph(const Graph& g) { Verifier(g, "").run(); }

}  // namespace rlx
