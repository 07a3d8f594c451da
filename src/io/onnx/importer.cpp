// The importer: graph inputs, initializers, nodes (through the op table), outputs,
// and emit() with eager constant folding.
#include "io/onnx/importer.h"

#include <algorithm>
#include <limits>
#include <unordered_set>

#include "io/onnx/const_eval.h"
#include "io/onnx/ops_table.h"
#include "ir/op_table.h"

namespace rlx::onnx {

Importer::Importer(const ModelSource& src, const ImportOptions& opts, Graph& g) : src_(src), opts_(opts), g_(g) {
  scopes_.emplace_back();
}

Value Importer::lookup(const std::string& name) const {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    auto f = it->find(name);
    if (f != it->end()) return f->second;
  }
  fail(ErrorCategory::Parse, src_.path, ": node '", cur_node_, "' uses value '", name, "' that is not defined before it");
}

void Importer::define(const std::string& name, Value v) {
  if (name.empty()) return;
  scopes_.back()[name] = v;
}

int Importer::onnx_type_of_name(const std::string& name) const {
  auto it = onnx_types_.find(name);
  return it == onnx_types_.end() ? 0 : it->second;
}

bool Importer::is_const(Value v) const { return v.valid() && g_.node(v.node).kind == OpKind::Constant; }

std::optional<HostTensor> Importer::const_tensor(Value v) const {
  if (!is_const(v)) return std::nullopt;
  const Node& n = g_.node(v.node);
  HostTensor t;
  t.dtype = n.outputs[0].dtype();
  t.onnx_type = onnx_type_of(t.dtype);
  t.dims = n.outputs[0].static_dims();
  const Blob& b = n.attr<ConstantAttrs>().value;
  t.bytes.assign(b.data(), b.data() + b.size());
  return t;
}

Value Importer::constant(const HostTensor& t) {
  return g_.constant(Shape(t.dims, t.dtype), Blob(t.bytes), cur_node_);
}

std::vector<Value> Importer::emit(OpKind k, std::vector<Value> in, Attrs a) {
  Node n;
  n.kind = k;
  n.name = cur_node_;
  n.attrs = std::move(a);
  n.inputs = std::move(in);
  std::vector<const Shape*> types;
  bool all_const = true, any = false;
  for (const Value& v : n.inputs) {
    types.push_back(v.valid() ? &g_.type(v) : nullptr);
    if (v.valid()) {
      any = true;
      all_const = all_const && is_const(v);
    }
  }
  if (all_const && any) {
    n.outputs = ir::infer_outputs(n, types);
    bool small = true;
    for (const Shape& s : n.outputs) small = small && s.is_static() && s.numel() <= opts_.fold_max_elements;
    if (small) {
      // Views of a constant share its bytes; everything else runs its CPU kernel.
      if (k == OpKind::Identity || k == OpKind::Reshape) {
        const Blob& b = g_.node(n.inputs[0].node).attr<ConstantAttrs>().value;
        return {g_.constant(n.outputs[0], b, cur_node_)};
      }
      std::vector<const Blob*> vals;
      for (const Value& v : n.inputs) vals.push_back(v.valid() ? &g_.node(v.node).attr<ConstantAttrs>().value : nullptr);
      if (auto out = eval_const_node(n, types, vals)) {
        std::vector<Value> res;
        for (size_t o = 0; o < out->size(); ++o) res.push_back(g_.constant(n.outputs[o], (*out)[o], cur_node_));
        return res;
      }
    }
  }
  return g_.add(k, std::move(n.inputs), std::move(n.attrs), cur_node_);
}

Value Importer::emit1(OpKind k, std::vector<Value> in, Attrs a) {
  auto outs = emit(k, std::move(in), std::move(a));
  if (outs.size() != 1) fail(ErrorCategory::Internal, op_name(k), " has ", outs.size(), " outputs");
  return outs[0];
}

// The initializer decoded once per model (source_initializer: later imports share its Blob).
ModelSource::Initializer Importer::initializer(const pb::TensorProto& t) { return source_initializer(src_, t); }

void Importer::define_initializer(const pb::TensorProto& t) {
  cur_node_ = t.name();
  if (t.name().empty()) fail(ErrorCategory::Parse, src_.path, ": an initializer has no name");
  if (t.data_type() == kString) {  // read by host nodes only (host_eval decodes it)
    host_values_.insert(t.name());
    return;
  }
  const ModelSource::Initializer h = initializer(t);
  const Shape shape(h.dims, h.dtype);
  Value v;
  if (opts_.weights_as_params && is_float(h.dtype) && shape.numel() >= opts_.param_min_elements &&
      g_.find_param(t.name()) < 0) {
    v = g_.param(t.name(), shape, h.bytes);
  } else {
    v = g_.constant(shape, h.bytes, cur_node_);
  }
  define(t.name(), v);
  set_onnx_type(t.name(), t.data_type());
}

void Importer::define_constant(const std::string& name, const HostTensor& t) {
  cur_node_ = name;
  define(name, constant(t));
  set_onnx_type(name, t.onnx_type);
}

void Importer::import_value_types_and_initializers(const pb::GraphProto& gp) {
  for (const auto& vi : gp.value_info())
    if (vi.type().has_tensor_type() && vi.type().tensor_type().elem_type() != 0)
      set_onnx_type(vi.name(), vi.type().tensor_type().elem_type());
  import_initializers(gp);
}

void Importer::import_initializers(const pb::GraphProto& gp) {
  for (const auto& t : gp.initializer()) define_initializer(t);
  for (const auto& st : gp.sparse_initializer()) {
    (void)st;
    fail(ErrorCategory::Unsupported, src_.path, ": sparse initializers are not supported");
  }
}

namespace {

// A node that makes a host value whatever its inputs: an op the table runs on the host, a
// string constant, a cast to strings.
bool makes_host_value(const pb::NodeProto& n, const OpEntry* e) {
  if (e && e->lower == lower_on_host) return true;
  if (n.op_type() == "Constant")
    for (const auto& a : n.attribute())
      if (a.name() == "value_string" || a.name() == "value_strings" || (a.has_t() && a.t().data_type() == kString))
        return true;
  if (n.op_type() == "Cast")
    for (const auto& a : n.attribute())
      if (a.name() == "to" && (a.i() == kString || a.s() == "STRING" || a.s() == "string")) return true;
  return false;
}

bool host_typed(const pb::ValueInfoProto& vi) {
  const auto& t = vi.type();
  return t.has_sequence_type() || t.has_optional_type() || t.has_map_type() ||
         (t.has_tensor_type() && t.tensor_type().elem_type() == kString);
}

}  // namespace

bool Importer::graph_needs_host(const pb::GraphProto& g) const {
  for (const auto& vi : g.input())
    if (host_typed(vi)) return true;
  for (const auto& vi : g.output())
    if (host_typed(vi)) return true;
  for (const auto& t : g.initializer())
    if (t.data_type() == kString) return true;
  for (const auto& n : g.node()) {
    int64_t opset = src_.opset;
    if (!is_default_domain(n.domain())) {
      auto it = src_.opsets.find(n.domain());
      opset = it == src_.opsets.end() ? 0 : it->second;
    }
    if (makes_host_value(n, find_op(n.domain(), n.op_type(), opset))) return true;
    for (const auto& a : n.attribute()) {
      if (a.has_g() && graph_needs_host(a.g())) return true;
      for (const auto& sg : a.graphs())
        if (graph_needs_host(sg)) return true;
    }
  }
  return false;
}

bool Importer::needs_host(const pb::NodeProto& n) const {
  if (!host_values_.empty()) {
    std::unordered_set<std::string> read;
    names_read(n, read);
    for (const auto& name : read)
      if (host_values_.count(name)) return true;
  }
  for (const auto& a : n.attribute()) {
    if (a.has_g() && graph_needs_host(a.g())) return true;
    for (const auto& sg : a.graphs())
      if (graph_needs_host(sg)) return true;
  }
  return false;
}

void Importer::lower_node(const pb::NodeProto& n) {
  cur_node_ = n.name().empty() ? (n.output_size() ? n.output(0) : n.op_type()) : n.name();
  if (needs_host(n))
    throw RunTimeShapeError(detail::concat("ONNX node '", cur_node_, "' (", n.op_type(),
                                           ") reads or makes strings, sequences or optionals: it runs on the host"),
                            &n);
  const bool default_domain = is_default_domain(n.domain());
  if (!has_domain(n.domain()))
    fail(ErrorCategory::Unsupported, "ONNX node '", cur_node_, "' (", n.op_type(), ") uses domain '", n.domain(),
         "', of which rlx lowers no op");
  int64_t opset = src_.opset;
  if (!default_domain) {
    auto it = src_.opsets.find(n.domain());
    if (it == src_.opsets.end())
      fail(ErrorCategory::Parse, "ONNX node '", cur_node_, "' (", n.op_type(), ") uses domain '", n.domain(),
           "', which the model does not import (no opset_import entry)");
    opset = it->second;
  }
  const std::string where = default_domain ? "" : " of domain '" + n.domain() + "'";
  bool known = false;
  const OpEntry* e = find_op(n.domain(), n.op_type(), opset, &known);
  if (!e) {
    if (known)
      fail(ErrorCategory::Unsupported, "ONNX op '", n.op_type(), "'", where, " (node '", cur_node_,
           "') is not supported at opset ", opset);
    fail(ErrorCategory::Unsupported, "ONNX op '", n.op_type(), "'", where, " (node '", cur_node_, "', opset ", opset,
         ") is not supported");
  }
  NodeCtx ctx(*this, n);
  ctx.opset = opset;
  std::vector<Value> outs = e->lower(ctx);
  // Types carried widened (uint16, float8, ...) pass through ops that keep the dtype.
  int in_type = n.input_size() && !n.input(0).empty() ? onnx_type_of_name(n.input(0)) : 0;
  for (int i = 0; i < n.output_size(); ++i) {
    if (n.output(i).empty()) continue;
    if (size_t(i) >= outs.size() || !outs[size_t(i)].valid())
      ctx.unsupported("output ", i, " ('", n.output(i), "') is not supported");
    define(n.output(i), outs[size_t(i)]);
    if (in_type && !onnx_type_of_name(n.output(i)) && carried_dtype(in_type) == g_.type(outs[size_t(i)]).dtype() &&
        onnx_type_of(g_.type(outs[size_t(i)]).dtype()) != in_type)
      set_onnx_type(n.output(i), in_type);
  }
}

void Importer::import_body_nodes(const pb::GraphProto& gp) {
  for (const auto& n : gp.node()) lower_node(n);
}

namespace {

// Declared dims of a graph input; -1 with a symbol name for symbolic / unknown dims.
void declared_dims(const pb::ValueInfoProto& vi, std::vector<int64_t>& dims, std::vector<std::string>& params,
                   bool& has_shape) {
  const auto& tt = vi.type().tensor_type();
  has_shape = tt.has_shape();
  for (int i = 0; i < tt.shape().dim_size(); ++i) {
    const auto& d = tt.shape().dim(i);
    if (d.has_dim_value() && d.dim_value() >= 0) {
      dims.push_back(d.dim_value());
      params.emplace_back();
    } else {
      dims.push_back(-1);
      params.push_back(d.has_dim_param() && !d.dim_param().empty() ? d.dim_param()
                                                                  : vi.name() + "_dim" + std::to_string(i));
    }
  }
}

}  // namespace

Segment Importer::import_main(const std::map<std::string, std::vector<int64_t>>& shapes,
                              const std::map<std::string, TypedTensor>& values, Split split) {
  const pb::GraphProto& gp = src_.model.graph();
  std::unordered_map<std::string, bool> is_init;
  for (const auto& t : gp.initializer()) is_init[t.name()] = true;
  for (const auto& vi : gp.input()) {
    if (is_init.count(vi.name())) continue;
    cur_node_ = vi.name();
    if (vi.type().has_map_type() || vi.type().has_sparse_tensor_type())
      fail(ErrorCategory::Unsupported, src_.path, ": input '", vi.name(), "' is a map or sparse tensor (not supported)");
    if (host_typed(vi)) {  // strings, sequences, optionals: read by host nodes only
      host_values_.insert(vi.name());
      continue;
    }
    int et = vi.type().tensor_type().elem_type();
    auto dt = carried_dtype(et);
    if (!dt) fail(ErrorCategory::Unsupported, src_.path, ": input '", vi.name(), "' has element type ", onnx_type_name(et));
    std::vector<int64_t> dims;
    std::vector<std::string> params;
    bool has_shape = false;
    declared_dims(vi, dims, params, has_shape);
    if (auto v = values.find(vi.name()); v != values.end()) {
      HostTensor h{et, v->second.dtype, v->second.dims, v->second.bytes};
      if (h.dtype != *dt) fail(ErrorCategory::InvalidArgument, src_.path, ": input '", vi.name(), "' is ", dtype_name(*dt));
      if (has_shape && h.dims.size() != dims.size())
        fail(ErrorCategory::Shape, src_.path, ": input '", vi.name(), "' has rank ", dims.size(), ", got dims of rank ",
             h.dims.size());
      define_constant(vi.name(), h);
      continue;
    }
    auto given = shapes.find(vi.name());
    std::vector<Dim> rd;
    if (given != shapes.end()) {
      if (has_shape && given->second.size() != dims.size())
        fail(ErrorCategory::Shape, src_.path, ": input '", vi.name(), "' has rank ", dims.size(), ", got dims of rank ",
             given->second.size());
      for (size_t i = 0; i < given->second.size(); ++i) {
        int64_t d = given->second[i];
        if (d < 0) fail(ErrorCategory::Shape, src_.path, ": input '", vi.name(), "' dim ", i, " is negative");
        if (has_shape && dims[i] >= 0 && dims[i] != d)
          fail(ErrorCategory::Shape, src_.path, ": input '", vi.name(), "' dim ", i, " is ", dims[i], ", got ", d);
        rd.emplace_back(d);
      }
    } else {
      if (!has_shape)
        throw DynamicShapeError(src_.path + ": input '" + vi.name() + "' has no declared shape");
      for (size_t i = 0; i < dims.size(); ++i) rd.push_back(dims[i] >= 0 ? Dim(dims[i]) : g_.sym(params[i]));
    }
    define_input(vi.name(), Shape(std::move(rd), *dt), et);
  }
  import_value_types_and_initializers(gp);
  std::unordered_set<std::string> passed;
  for (const auto& [name, t] : values) passed.insert(name);
  return import_from(0, split, passed);
}

void Importer::define_input(const std::string& name, const Shape& s, int onnx_type) {
  define(name, g_.input(name, s));
  set_onnx_type(name, onnx_type);
}

namespace {

}  // namespace

void names_read(const pb::NodeProto& n, std::unordered_set<std::string>& out) {
  for (const auto& i : n.input()) out.insert(i);
  for (const auto& a : n.attribute()) {
    if (a.has_g())
      for (const auto& b : a.g().node()) names_read(b, out);
    for (const auto& g : a.graphs())
      for (const auto& b : g.node()) names_read(b, out);
  }
}

Segment Importer::import_segment(int begin, const std::vector<SegmentInput>& inputs,
                                 const std::map<std::string, HostTensor>& constants, Split split) {
  const pb::GraphProto& gp = src_.model.graph();
  if (begin < 0 || begin > gp.node_size())
    fail(ErrorCategory::Internal, src_.path, ": segment start ", begin, " of ", gp.node_size(), " nodes");
  for (const SegmentInput& in : inputs) {
    cur_node_ = in.name;
    if (in.host) host_values_.insert(in.name);
    else define_input(in.name, Shape(in.dims, in.dtype), in.onnx_type);
  }
  std::unordered_set<std::string> passed;
  for (const auto& [name, t] : constants) {
    define_constant(name, t);
    passed.insert(name);
  }
  import_value_types_and_initializers(gp);
  return import_from(begin, split, passed);
}

Segment Importer::import_from(int begin, Split split, const std::unordered_set<std::string>& passed) {
  const pb::GraphProto& gp = src_.model.graph();
  const int n = gp.node_size();
  Segment seg;
  seg.begin = begin;
  std::unordered_set<std::string> own;  // names the segment's nodes define
  for (int i = begin; i < n; ++i) {
    const pb::NodeProto& node = gp.node(i);
    if (split == Split::None) {
      lower_node(node);
      continue;
    }
    try {
      lower_node(node);
    } catch (const RunTimeShapeError& e) {
      if (e.node != &node)
        fail(ErrorCategory::Unsupported, e.what(), " (inside a subgraph of node '", cur_node_,
             "': only a node of the main graph can run between compiled segments)");
      seg.end = i;
    } catch (const ConstantRequiredError& e) {
      // A value this segment computes: stop before the node, and the next segment takes
      // that value by value. An input of the segment is bound by value by the runner.
      if (split != Split::HostNodesAndValues || !own.count(e.value)) throw;
      seg.end = i;
      seg.bind = e.value;
    }
    if (seg.end >= 0) break;
    for (const auto& o : node.output()) own.insert(o);
  }
  std::vector<Value> outs;
  std::vector<std::string> names;
  if (seg.end < 0) {
    for (const auto& vo : gp.output()) {
      cur_node_ = vo.name();
      if (host_values_.count(vo.name()) && !scopes_.front().count(vo.name())) continue;  // the runner holds it
      Value v = lookup(vo.name());
      if (vo.type().has_tensor_type() && vo.type().tensor_type().elem_type() != 0) {
        int et = vo.type().tensor_type().elem_type();
        auto dt = carried_dtype(et);
        if (dt && *dt != g_.type(v).dtype())
          fail(ErrorCategory::InvalidArgument, src_.path, ": output '", vo.name(), "' is ",
               dtype_name(g_.type(v).dtype()), " but the model declares ", onnx_type_name(et));
      }
      outs.push_back(v);
      names.push_back(vo.name());
    }
    g_.set_outputs(outs, names);
    seg.outputs = names;
    return seg;
  }
  // What the rest of the model reads: the nodes from `end` on and the model's outputs.
  std::unordered_set<std::string> later;
  for (int i = seg.end; i < n; ++i) names_read(gp.node(i), later);
  for (const auto& vo : gp.output()) later.insert(vo.name());
  std::vector<std::string> sorted(later.begin(), later.end());
  std::sort(sorted.begin(), sorted.end());
  const auto& top = scopes_.front();
  for (const std::string& name : sorted) {
    auto it = top.find(name);
    if (name.empty() || it == top.end()) continue;
    if (is_const(it->second)) {  // initializers are imported again by the next segment
      if (own.count(name) || passed.count(name)) seg.constants[name] = *const_tensor(it->second);
    } else if (own.count(name)) {
      outs.push_back(it->second);
      names.push_back(name);
    } else if (g_.node(it->second.node).kind == OpKind::Input) {
      seg.forward.push_back(name);
    }
  }
  seg.outputs = names;
  for (const auto& list : {seg.outputs, seg.forward})
    for (const std::string& name : list) {
      const int t = onnx_type_of_name(name);
      seg.types[name] = t ? t : onnx_type_of(g_.type(lookup(name)).dtype());
    }
  g_.set_outputs(outs, names);
  return seg;
}

std::vector<HostTensor> Importer::eval_node(const pb::NodeProto& node, const std::map<std::string, HostTensor>& values) {
  // Everything folds (nothing runs later): no size limit, no params.
  opts_.fold_max_elements = std::numeric_limits<int64_t>::max();
  opts_.weights_as_params = false;
  for (const auto& [name, t] : values) define_constant(name, t);
  // The main-graph initializers it reads (only those: a model's other weights stay untouched).
  std::unordered_set<std::string> wanted;
  names_read(node, wanted);
  for (const auto& t : src_.model.graph().initializer())
    if (wanted.count(t.name()) && !values.count(t.name())) define_initializer(t);
  lower_node(node);
  std::vector<HostTensor> out;
  for (const auto& name : node.output()) {
    if (name.empty()) {
      out.emplace_back();
      continue;
    }
    auto t = const_tensor(lookup(name));
    if (!t) fail(ErrorCategory::Internal, "ONNX node '", cur_node_, "' (", node.op_type(), ") did not fold on the host");
    t->onnx_type = onnx_type_of_name(name) ? onnx_type_of_name(name) : t->onnx_type;
    out.push_back(std::move(*t));
  }
  return out;
}

std::vector<Value> Importer::import_body(const pb::GraphProto& body, const std::vector<Value>& inputs) {
  // The scope and the current node name are restored even when the body throws.
  struct Restore {
    Importer& im;
    std::string node;
    ~Restore() {
      im.scopes_.pop_back();
      im.cur_node_ = node;
    }
  } restore{*this, cur_node_};
  scopes_.emplace_back();
  for (int i = 0; i < body.input_size() && size_t(i) < inputs.size(); ++i) define(body.input(i).name(), inputs[size_t(i)]);
  import_initializers(body);
  import_body_nodes(body);
  std::vector<Value> outs;
  for (const auto& vo : body.output()) outs.push_back(lookup(vo.name()));
  return outs;
}

}  // namespace rlx::onnx
