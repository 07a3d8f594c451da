#include "rlx/graph.h"

#include <cstring>

#include "ir/element.h"
#include "ir/op_table.h"

namespace rlx {

Graph::Graph(std::string name) : name_(std::move(name)) {}

const Node& Graph::node(int32_t id) const {
  if (id < 0 || size_t(id) >= nodes_.size())
    fail(ErrorCategory::InvalidArgument, "graph '", name_, "': no node ", id);
  return nodes_[size_t(id)];
}

Node& Graph::mutable_node(int32_t id) {
  if (id < 0 || size_t(id) >= nodes_.size())
    fail(ErrorCategory::InvalidArgument, "graph '", name_, "': no node ", id);
  return nodes_[size_t(id)];
}

const Shape& Graph::type(Value v) const {
  const Node& n = node(v.node);
  if (v.out < 0 || size_t(v.out) >= n.outputs.size())
    fail(ErrorCategory::InvalidArgument, "node '", n.name, "' has no output ", v.out);
  return n.outputs[size_t(v.out)];
}

int Graph::symbol(const std::string& name) {
  // Refused here rather than by the verifier later: the graph would then hold a symbol no
  // binding can name, and every compile of it would fail.
  if (name.empty()) fail(ErrorCategory::InvalidArgument, "graph '", name_, "': a symbol needs a name");
  auto it = symbol_ids_.find(name);
  if (it != symbol_ids_.end()) return it->second;
  int id = int(symbols_.size());
  symbols_.push_back(name);
  symbol_ids_.emplace(name, id);
  return id;
}

std::string Graph::unique_name(OpKind kind, const std::string& wanted) {
  if (!wanted.empty() && !node_names_.count(wanted)) return wanted;
  std::string base = wanted.empty() ? std::string(op_name(kind)) : wanted;
  for (size_t i = nodes_.size();; ++i) {
    std::string n = base + "_" + std::to_string(i);
    if (!node_names_.count(n)) return n;
  }
}

int32_t Graph::append_node(Node node) {
  for (const Value& v : node.inputs) {
    if (v.valid() && (size_t(v.node) >= nodes_.size() || v.out < 0 ||
                      size_t(v.out) >= nodes_[size_t(v.node)].outputs.size()))
      fail(ErrorCategory::Verify, "node '", node.name, "': input refers to a value not defined before it");
  }
  node.name = unique_name(node.kind, node.name);
  auto id = int32_t(nodes_.size());
  node_names_.emplace(node.name, id);
  nodes_.push_back(std::move(node));
  return id;
}

std::vector<Value> Graph::add(OpKind kind, std::vector<Value> inputs, Attrs attrs, const std::string& name) {
  return detail::guard("Graph::add", [&] { return add_unguarded(kind, std::move(inputs), std::move(attrs), name); });
}

std::vector<Value> Graph::add_unguarded(OpKind kind, std::vector<Value> inputs, Attrs attrs, const std::string& name) {
  Node n;
  n.kind = kind;
  n.name = unique_name(kind, name);
  n.attrs = std::move(attrs);
  n.inputs = std::move(inputs);
  std::vector<const Shape*> in;
  in.reserve(n.inputs.size());
  for (const Value& v : n.inputs) {
    if (!v.valid()) { in.push_back(nullptr); continue; }
    if (size_t(v.node) >= nodes_.size())
      fail(ErrorCategory::InvalidArgument, "node '", n.name, "' (", op_name(kind), "): input refers to unknown node ", v.node);
    in.push_back(&type(v));
  }
  n.outputs = ir::infer_outputs(n, in);
  int32_t id = append_node(std::move(n));
  std::vector<Value> outs;
  for (size_t i = 0; i < nodes_[size_t(id)].outputs.size(); ++i) outs.push_back(Value{id, int32_t(i)});
  return outs;
}

Value Graph::add1(OpKind kind, std::vector<Value> inputs, Attrs attrs, const std::string& name) {
  auto outs = add(kind, std::move(inputs), std::move(attrs), name);
  if (outs.size() != 1) fail(ErrorCategory::Internal, op_name(kind), " has ", outs.size(), " outputs");
  return outs[0];
}

// ---- leaves

Value Graph::input(const std::string& name, Shape type) {
  if (name.empty()) fail(ErrorCategory::InvalidArgument, "graph '", name_, "': input needs a name");
  if (find_input(name) >= 0) fail(ErrorCategory::InvalidArgument, "graph '", name_, "': duplicate input '", name, "'");
  Node n;
  n.kind = OpKind::Input;
  n.name = name;
  n.attrs = LeafAttrs{name, {}};
  n.outputs = {std::move(type)};
  return Value{append_node(std::move(n)), 0};
}

Value Graph::param(const std::string& name, Shape type, Blob init) {
  if (name.empty()) fail(ErrorCategory::InvalidArgument, "graph '", name_, "': param needs a name");
  if (find_param(name) >= 0) fail(ErrorCategory::InvalidArgument, "graph '", name_, "': duplicate param '", name, "'");
  if (!init.empty() && type.is_static() && init.size() != type.bytes())
    fail(ErrorCategory::InvalidArgument, "param '", name, "': initial data has ", init.size(),
         " bytes, type ", type.str(), " needs ", type.bytes());
  Node n;
  n.kind = OpKind::Param;
  n.name = name;
  n.attrs = LeafAttrs{name, std::move(init)};
  n.outputs = {std::move(type)};
  return Value{append_node(std::move(n)), 0};
}

Value Graph::constant(Shape type, Blob bytes, const std::string& name) {
  if (!type.is_static()) fail(ErrorCategory::Shape, "constant '", name, "' must have a static shape");
  if (bytes.size() != type.bytes())
    fail(ErrorCategory::InvalidArgument, "constant '", name, "': ", bytes.size(), " bytes given, type ",
         type.str(), " needs ", type.bytes());
  Node n;
  n.kind = OpKind::Constant;
  n.name = name;
  n.attrs = ConstantAttrs{std::move(bytes)};
  n.outputs = {std::move(type)};
  return Value{append_node(std::move(n)), 0};
}

namespace {
template <class T>
Blob blob_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return Blob(std::move(b));
}
}  // namespace

Value Graph::constant_f32(std::vector<int64_t> dims, const std::vector<float>& values, const std::string& name) {
  return constant(Shape(std::move(dims), DType::F32), blob_of(values), name);
}

Value Graph::constant_i64(std::vector<int64_t> dims, const std::vector<int64_t>& values, const std::string& name) {
  return constant(Shape(std::move(dims), DType::I64), blob_of(values), name);
}

Value Graph::constant_values(std::vector<int64_t> dims, DType dtype, const std::vector<double>& values,
                             const std::string& name) {
  std::vector<uint8_t> b(values.size() * dtype_size(dtype), 0);
  for (size_t i = 0; i < values.size(); ++i) write_element(b.data(), dtype, int64_t(i), values[i]);
  return constant(Shape(std::move(dims), dtype), Blob(std::move(b)), name);
}

Value Graph::scalar(double value, DType dtype) { return constant_values({}, dtype, {value}); }

void Graph::set_outputs(std::vector<Value> values, std::vector<std::string> names) {
  if (!names.empty() && names.size() != values.size())
    fail(ErrorCategory::InvalidArgument, "set_outputs: ", values.size(), " values but ", names.size(), " names");
  std::vector<GraphOutput> outs;
  for (size_t i = 0; i < values.size(); ++i) {
    type(values[i]);  // validates
    std::string nm = names.empty() ? std::string() : names[i];
    if (nm.empty()) {
      const Node& n = node(values[i].node);
      nm = n.outputs.size() == 1 ? n.name : n.name + ":" + std::to_string(values[i].out);
    }
    for (const auto& o : outs)
      if (o.name == nm) fail(ErrorCategory::InvalidArgument, "set_outputs: duplicate output name '", nm, "'");
    outs.push_back({values[i], nm});
  }
  outputs_ = std::move(outs);
}

int32_t Graph::find_input(const std::string& name) const {
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].kind == OpKind::Input && std::get<LeafAttrs>(nodes_[i].attrs).name == name) return int32_t(i);
  return -1;
}

int32_t Graph::find_param(const std::string& name) const {
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].kind == OpKind::Param && std::get<LeafAttrs>(nodes_[i].attrs).name == name) return int32_t(i);
  return -1;
}

std::vector<int32_t> Graph::input_nodes() const {
  std::vector<int32_t> v;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].kind == OpKind::Input) v.push_back(int32_t(i));
  return v;
}

std::vector<int32_t> Graph::param_nodes() const {
  std::vector<int32_t> v;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].kind == OpKind::Param) v.push_back(int32_t(i));
  return v;
}

// ---- builder methods with attributes

Value Graph::gelu(Value x, bool tanh_approx) { return add1(OpKind::Gelu, {x}, GeluAttrs{tanh_approx}); }
Value Graph::leaky_relu(Value x, double alpha) { return add1(OpKind::LeakyRelu, {x}, ScalarAttrs{alpha, 0}); }
Value Graph::clip(Value x, double lo, double hi) { return add1(OpKind::Clip, {x}, ClipAttrs{lo, hi}); }
Value Graph::mod(Value a, Value b, bool fmod) { return add1(OpKind::Mod, {a, b}, ModAttrs{fmod}); }
Value Graph::cast(Value x, DType to) { return add1(OpKind::Cast, {x}, CastAttrs{to}); }
Value Graph::bitcast(Value x, DType to) { return add1(OpKind::BitCast, {x}, CastAttrs{to}); }
Value Graph::fused_matmul(Value a, Value b, Value bias, Activation act, double alpha) {
  std::vector<Value> in{a, b};
  if (bias.valid()) in.push_back(bias);
  return add1(OpKind::FusedMatMul, std::move(in), FusedMatMulAttrs{act, alpha});
}

Value Graph::qmatmul_id(Value x, Value w, Value ids, uint32_t format, int64_t k) {
  return add1(OpKind::QMatMulId, {x, w, ids}, QMatMulAttrs{int64_t(format), k});
}

Value Graph::qmatmul(Value x, Value w, uint32_t format, int64_t k) {
  return add1(OpKind::QMatMul, {x, w}, QMatMulAttrs{int64_t(format), k});
}

Value Graph::reduce_sum(Value x, std::vector<int64_t> axes, bool keepdims) { return add1(OpKind::ReduceSum, {x}, ReduceAttrs{std::move(axes), keepdims}); }
Value Graph::reduce_mean(Value x, std::vector<int64_t> axes, bool keepdims) { return add1(OpKind::ReduceMean, {x}, ReduceAttrs{std::move(axes), keepdims}); }
Value Graph::reduce_max(Value x, std::vector<int64_t> axes, bool keepdims) { return add1(OpKind::ReduceMax, {x}, ReduceAttrs{std::move(axes), keepdims}); }
Value Graph::reduce_min(Value x, std::vector<int64_t> axes, bool keepdims) { return add1(OpKind::ReduceMin, {x}, ReduceAttrs{std::move(axes), keepdims}); }
Value Graph::reduce_prod(Value x, std::vector<int64_t> axes, bool keepdims) { return add1(OpKind::ReduceProd, {x}, ReduceAttrs{std::move(axes), keepdims}); }
Value Graph::argmax(Value x, int64_t axis, bool keepdims, bool select_last) { return add1(OpKind::ArgMax, {x}, ArgReduceAttrs{axis, keepdims, select_last}); }
Value Graph::argmin(Value x, int64_t axis, bool keepdims, bool select_last) { return add1(OpKind::ArgMin, {x}, ArgReduceAttrs{axis, keepdims, select_last}); }
std::pair<Value, Value> Graph::topk(Value x, int64_t k, int64_t axis, bool largest, bool sorted) {
  auto o = add(OpKind::TopK, {x}, TopKAttrs{k, axis, largest, sorted});
  return {o[0], o[1]};
}

Value Graph::softmax(Value x, int64_t axis) { return add1(OpKind::Softmax, {x}, AxisAttrs{axis}); }
Value Graph::log_softmax(Value x, int64_t axis) { return add1(OpKind::LogSoftmax, {x}, AxisAttrs{axis}); }
Value Graph::layer_norm(Value x, Value scale, Value bias, int64_t axis, double eps) {
  std::vector<Value> in{x, scale};
  if (bias.valid()) in.push_back(bias);
  return add1(OpKind::LayerNorm, std::move(in), NormAttrs{axis, eps});
}
Value Graph::rms_norm(Value x, Value scale, int64_t axis, double eps) {
  return add1(OpKind::RmsNorm, {x, scale}, NormAttrs{axis, eps});
}

Value Graph::reshape(Value x, std::vector<int64_t> shape) { return add1(OpKind::Reshape, {x}, ShapeAttrs{std::move(shape)}); }
Value Graph::transpose(Value x, std::vector<int64_t> perm) { return add1(OpKind::Transpose, {x}, TransposeAttrs{std::move(perm)}); }
Value Graph::slice(Value x, std::vector<int64_t> starts, std::vector<int64_t> ends, std::vector<int64_t> axes,
                   std::vector<int64_t> steps) {
  return add1(OpKind::Slice, {x}, SliceAttrs{std::move(starts), std::move(ends), std::move(axes), std::move(steps)});
}
Value Graph::concat(std::vector<Value> xs, int64_t axis) { return add1(OpKind::Concat, std::move(xs), AxisAttrs{axis}); }
std::vector<Value> Graph::split(Value x, int64_t axis, std::vector<int64_t> sizes) {
  return add(OpKind::Split, {x}, SplitAttrs{axis, std::move(sizes)});
}
Value Graph::gather(Value x, Value indices, int64_t axis) { return add1(OpKind::Gather, {x, indices}, AxisAttrs{axis}); }
Value Graph::expand(Value x, std::vector<int64_t> shape) { return add1(OpKind::Expand, {x}, ShapeAttrs{std::move(shape)}); }
Value Graph::pad(Value x, std::vector<int64_t> pads, PadMode mode, double value) {
  return add1(OpKind::Pad, {x}, PadAttrs{std::move(pads), mode, value});
}
Value Graph::tile(Value x, std::vector<int64_t> repeats) { return add1(OpKind::Tile, {x}, TileAttrs{std::move(repeats)}); }

Value Graph::conv2d(Value x, Value w, Value bias, std::vector<int64_t> strides, std::vector<int64_t> pads,
                    std::vector<int64_t> dilations, int64_t group) {
  std::vector<Value> in{x, w};
  if (bias.valid()) in.push_back(bias);
  return add1(OpKind::Conv2d, std::move(in), ConvAttrs{std::move(strides), std::move(pads), std::move(dilations), group});
}
Value Graph::fused_conv2d(Value x, Value w, Value bias, Value residual, const FusedConvAttrs& attrs) {
  std::vector<Value> in{x, w, bias};
  if (residual.valid()) in.push_back(residual);
  else if (!bias.valid()) in.pop_back();
  return add1(OpKind::FusedConv2d, std::move(in), attrs);
}
Value Graph::max_pool2d(Value x, std::vector<int64_t> kernel, std::vector<int64_t> strides, std::vector<int64_t> pads) {
  PoolAttrs a;
  a.kernel = std::move(kernel);
  a.strides = std::move(strides);
  a.pads = std::move(pads);
  return add1(OpKind::MaxPool2d, {x}, std::move(a));
}
Value Graph::avg_pool2d(Value x, std::vector<int64_t> kernel, std::vector<int64_t> strides, std::vector<int64_t> pads,
                        bool count_include_pad) {
  PoolAttrs a;
  a.kernel = std::move(kernel);
  a.strides = std::move(strides);
  a.pads = std::move(pads);
  a.count_include_pad = count_include_pad;
  return add1(OpKind::AvgPool2d, {x}, std::move(a));
}
Value Graph::attention(Value q, Value k, Value v, Value mask, bool causal, double scale) {
  std::vector<Value> in{q, k, v};
  if (mask.valid()) in.push_back(mask);
  return add1(OpKind::Attention, std::move(in), AttentionAttrs{scale, causal});
}
Value Graph::rotary(Value x, Value cos, Value sin, bool interleaved) {
  return add1(OpKind::Rotary, {x, cos, sin}, RotaryAttrs{interleaved});
}

Value Graph::kv_attention(Value q, Value k_cache, Value v_cache, Value k_new, Value v_new, Value past, double scale) {
  return add1(OpKind::KvAttention, {q, k_cache, v_cache, k_new, v_new, past}, AttentionAttrs{scale, false});
}
Value Graph::cache_write(Value cache, Value rows, Value past) {
  return add1(OpKind::CacheWrite, {cache, rows, past}, NoAttrs{});
}

}  // namespace rlx
