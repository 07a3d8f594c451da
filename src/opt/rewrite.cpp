#include "opt/rewrite.h"

#include <cmath>
#include <cstring>
#include <sstream>

namespace rlx::opt {

Rewriter::Rewriter(const Graph& src) : src_(src), dst_(src.name()), map_(src.nodes().size()) {
  // Re-registering in order gives every symbol its source id.
  for (const auto& s : src.symbols()) dst_.symbol(s);
}

Value Rewriter::map(Value old) const {
  if (!old.valid()) return old;
  if (!is_mapped(old)) {
    std::string nm = size_t(old.node) < src_.nodes().size() ? src_.node(old.node).name : "?";
    fail(ErrorCategory::Internal, "rewrite of graph '", src_.name(), "': value ", nm, ":", old.out,
         " used before it was rewritten");
  }
  return map_[size_t(old.node)][size_t(old.out)];
}

bool Rewriter::is_mapped(Value old) const {
  if (!old.valid()) return true;
  if (size_t(old.node) >= map_.size()) return false;
  const auto& m = map_[size_t(old.node)];
  return size_t(old.out) < m.size() && m[size_t(old.out)].valid();
}

std::vector<Value> Rewriter::map_inputs(const Node& n) const {
  std::vector<Value> in;
  in.reserve(n.inputs.size());
  for (Value v : n.inputs) in.push_back(map(v));
  return in;
}

void Rewriter::set(Value old, Value now) {
  auto& m = map_.at(size_t(old.node));
  if (m.size() <= size_t(old.out)) m.resize(size_t(old.out) + 1);
  m[size_t(old.out)] = now;
}

void Rewriter::replace(int32_t id, const std::vector<Value>& now) {
  const Node& n = src_.node(id);
  RLX_CHECK(now.size() == n.outputs.size(), "replacing node '", n.name, "'");
  for (size_t i = 0; i < now.size(); ++i) set(Value{id, int32_t(i)}, now[i]);
}

std::string Rewriter::name_of(int32_t id) const {
  const Node& n = src_.node(id);
  return is_auto_name(n, id) ? std::string() : n.name;
}

int32_t Rewriter::copy(int32_t id) {
  const Node& n = src_.node(id);
  std::vector<Value> in = map_inputs(n);
  bool same = true;
  for (size_t i = 0; i < in.size() && same; ++i)
    if (in[i].valid() && !(dst_.type(in[i]) == src_.type(n.inputs[i]))) same = false;
  if (!same) return copy_with_inputs(id, std::move(in));
  Node c = n;
  c.inputs = std::move(in);
  return append(id, std::move(c));
}

int32_t Rewriter::copy_with_inputs(int32_t id, std::vector<Value> inputs) {
  const Node& n = src_.node(id);
  Node c = n;
  c.inputs = std::move(inputs);
  c.outputs = ir::infer_outputs(c, input_types(dst_, c));
  return append(id, std::move(c));
}

int32_t Rewriter::append(int32_t id, Node node) {
  const Node& n = src_.node(id);
  RLX_CHECK(node.outputs.size() == n.outputs.size(), "node '", n.name, "' changed its output count");
  if (node.name == n.name && is_auto_name(n, id)) node.name.clear();  // renumbered automatically
  int32_t nid = dst_.append_node(std::move(node));
  for (size_t o = 0; o < n.outputs.size(); ++o) set(Value{id, int32_t(o)}, Value{nid, int32_t(o)});
  return nid;
}

std::vector<Value> Rewriter::emit(OpKind kind, std::vector<Value> inputs, Attrs attrs, const std::string& name) {
  return dst_.add(kind, std::move(inputs), std::move(attrs), name);
}

Value Rewriter::emit1(OpKind kind, std::vector<Value> inputs, Attrs attrs, const std::string& name) {
  return dst_.add1(kind, std::move(inputs), std::move(attrs), name);
}

Graph Rewriter::finish() {
  std::vector<GraphOutput> outs;
  for (const auto& o : src_.outputs()) outs.push_back({map(o.value), o.name});
  dst_.set_outputs_raw(std::move(outs));
  return std::move(dst_);
}

// ---- uses

int UseInfo::count(Value v) const {
  return int(users[size_t(v.node)][size_t(v.out)].size()) + outputs[size_t(v.node)][size_t(v.out)];
}

int32_t UseInfo::sole_user(Value v) const {
  if (count(v) != 1 || outputs[size_t(v.node)][size_t(v.out)] != 0) return -1;
  return users[size_t(v.node)][size_t(v.out)][0];
}

bool activation_of(const Node& n, Activation& a, double& alpha) {
  alpha = 0;
  switch (n.kind) {
    case OpKind::Relu: a = Activation::Relu; return true;
    case OpKind::Silu: a = Activation::Silu; return true;
    case OpKind::Sigmoid: a = Activation::Sigmoid; return true;
    case OpKind::Tanh: a = Activation::Tanh; return true;
    case OpKind::Gelu:
      a = n.attr<GeluAttrs>().tanh_approx ? Activation::GeluTanh : Activation::Gelu;
      return true;
    case OpKind::LeakyRelu:
      a = Activation::LeakyRelu;
      alpha = n.attr<ScalarAttrs>().alpha;
      return true;
    default: return false;
  }
}

bool activation_keeping(const Graph& g, int32_t id, const Shape& type, Activation& a, double& alpha) {
  if (id < 0) return false;
  const Node& n = g.node(id);
  return activation_of(n, a, alpha) && n.outputs[0] == type;
}

bool other_operand(const Node& n, Value v, Value& other) {
  if (n.inputs.size() != 2) return false;
  if (n.inputs[0] == v) other = n.inputs[1];
  else if (n.inputs[1] == v) other = n.inputs[0];
  else return false;
  return true;
}

bool UseInfo::only_used_by(Value v, int32_t consumer) const {
  if (outputs[size_t(v.node)][size_t(v.out)] > 0) return false;
  const auto& u = users[size_t(v.node)][size_t(v.out)];
  if (u.empty()) return false;
  for (int32_t c : u)
    if (c != consumer) return false;
  return true;
}

int UseInfo::node_uses(int32_t id) const {
  int n = 0;
  for (size_t o = 0; o < users[size_t(id)].size(); ++o) n += count(Value{id, int32_t(o)});
  return n;
}

UseInfo compute_uses(const Graph& g) {
  UseInfo u;
  const auto& nodes = g.nodes();
  u.users.resize(nodes.size());
  u.outputs.resize(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    u.users[i].resize(nodes[i].outputs.size());
    u.outputs[i].assign(nodes[i].outputs.size(), 0);
  }
  for (size_t i = 0; i < nodes.size(); ++i)
    for (Value v : nodes[i].inputs)
      if (v.valid()) u.users[size_t(v.node)][size_t(v.out)].push_back(int32_t(i));
  for (const auto& o : g.outputs()) u.outputs[size_t(o.value.node)][size_t(o.value.out)]++;
  return u;
}

// ---- small helpers

std::vector<const Shape*> input_types(const Graph& g, const Node& n) {
  std::vector<const Shape*> in;
  in.reserve(n.inputs.size());
  for (Value v : n.inputs) in.push_back(v.valid() ? &g.type(v) : nullptr);
  return in;
}

Node make_node(const Graph& g, OpKind kind, std::vector<Value> inputs, Attrs attrs, const std::string& name) {
  Node n;
  n.kind = kind;
  n.name = name;
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  n.outputs = ir::infer_outputs(n, input_types(g, n));
  return n;
}

std::optional<double> splat_value(const Graph& g, Value v) {
  if (!v.valid()) return std::nullopt;
  const Node& n = g.node(v.node);
  if (n.kind != OpKind::Constant) return std::nullopt;
  const Shape& t = n.outputs[0];
  if (is_complex(t.dtype()) || !t.is_static()) return std::nullopt;
  const Blob& b = n.attr<ConstantAttrs>().value;
  int64_t count = t.numel();
  if (count == 0 || b.size() != t.bytes()) return std::nullopt;
  size_t es = dtype_size(t.dtype());
  // Compare bytes with the first element: exact and cheap for any dtype.
  for (int64_t i = 1; i < count; ++i)
    if (std::memcmp(b.data(), b.data() + size_t(i) * es, es) != 0) return std::nullopt;
  double x = read_element(b.data(), t.dtype(), 0);
  if (std::isnan(x)) return std::nullopt;
  return x;
}

Value constant_filled(Graph& g, const Shape& like, double value, const std::string& name) {
  std::vector<uint8_t> bytes(like.bytes());
  int64_t count = like.numel();
  for (int64_t i = 0; i < count; ++i) write_element(bytes.data(), like.dtype(), i, value);
  return g.constant(like, Blob(std::move(bytes)), name);
}

bool is_lossless_cast(DType from, DType to) {
  if (from == to) return true;
  if (to == DType::Bool) return from == DType::Bool;
  switch (from) {
    case DType::Bool: return true;
    case DType::F16:
    case DType::BF16: return to == DType::F32 || to == DType::F64 || to == DType::C64 || to == DType::C128;
    case DType::F32: return to == DType::F64 || to == DType::C64 || to == DType::C128;
    case DType::F64: return to == DType::C128;
    case DType::C64: return to == DType::C128;
    case DType::I8: return to == DType::I16 || to == DType::I32 || to == DType::I64 || to == DType::F16 ||
                           to == DType::BF16 || to == DType::F32 || to == DType::F64;
    case DType::U8: return to == DType::I16 || to == DType::I32 || to == DType::I64 || to == DType::U32 ||
                           to == DType::F16 || to == DType::BF16 || to == DType::F32 || to == DType::F64;
    case DType::I16: return to == DType::I32 || to == DType::I64 || to == DType::F32 || to == DType::F64;
    case DType::I32: return to == DType::I64 || to == DType::F64;
    case DType::U32: return to == DType::I64 || to == DType::F64;
    default: return false;
  }
}

bool is_auto_name(const Node& n, int32_t id) {
  std::string_view op = op_name(n.kind);
  std::string num = std::to_string(id);
  return n.name.size() == op.size() + 1 + num.size() && n.name.compare(0, op.size(), op) == 0 &&
         n.name[op.size()] == '_' && n.name.compare(op.size() + 1, num.size(), num) == 0;
}

std::string sub_name(const std::string& base, const std::string& suffix) {
  return base.empty() ? std::string() : base + "/" + suffix;
}

const Node* producer_of_kind(const Graph& g, Value v, OpKind k) {
  if (!v.valid()) return nullptr;
  const Node& n = g.node(v.node);
  return n.kind == k ? &n : nullptr;
}

std::vector<int64_t> normalized_perm(const std::vector<int64_t>& perm, int rank) {
  std::vector<int64_t> p(size_t(rank), 0);
  if (perm.empty()) {
    for (int i = 0; i < rank; ++i) p[size_t(i)] = rank - 1 - i;
    return p;
  }
  for (size_t i = 0; i < perm.size() && i < p.size(); ++i) p[i] = perm[i] < 0 ? perm[i] + rank : perm[i];
  return p;
}

std::string shape_str(const Graph& g, const Shape& s) {
  std::ostringstream os;
  os << dtype_name(s.dtype()) << "[";
  for (int i = 0; i < s.rank(); ++i) {
    if (i) os << ",";
    Dim d = s.dims()[size_t(i)];
    if (d.is_static()) os << d.value();
    else if (size_t(d.symbol_id()) < g.symbols().size()) os << g.symbols()[size_t(d.symbol_id())];
    else os << "s" << d.symbol_id();
  }
  os << "]";
  return os.str();
}

std::string types_str(const Graph& g, const std::vector<Value>& values) {
  std::string s;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) s += ", ";
    s += values[i].valid() ? shape_str(g, g.type(values[i])) : "-";
  }
  return s;
}

bool ChainClaims::claim(const std::vector<int32_t>& inner, int32_t tail, int32_t index) {
  bool taken = absorbed[size_t(tail)] || tail_of[size_t(tail)] >= 0;
  for (int32_t a : inner) taken = taken || absorbed[size_t(a)] || tail_of[size_t(a)] >= 0;
  if (taken) return false;
  for (int32_t a : inner) absorbed[size_t(a)] = 1;
  tail_of[size_t(tail)] = index;
  return true;
}

}  // namespace rlx::opt
