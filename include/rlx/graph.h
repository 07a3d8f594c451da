// Graph: the IR. Nodes in topological order; each node has an OpKind, a typed
// attribute struct, input values and inferred output types. Inputs, params and
// constants are leaf nodes. Builder methods infer output types and throw a Shape
// error naming the node when the inputs do not fit.
//
// Copies: copying a Graph copies its nodes, but control-flow bodies (Node::subgraphs) are
// held by shared_ptr and shared between the copies; passes never modify a body in place
// (a pass that changes one builds a new Graph), so treat bodies as immutable.
// Thread safety: concurrent reads of one Graph are safe, writes are not.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "rlx/attrs.h"
#include "rlx/error.h"
#include "rlx/shape.h"

namespace rlx {

class Graph;

// A value produced by a node: output `out` of node `node`.
struct Value {
  int32_t node = -1;
  int32_t out = 0;
  bool valid() const { return node >= 0; }
  friend bool operator==(Value a, Value b) { return a.node == b.node && a.out == b.out; }
  // By node, then output: a value can key an ordered map or set.
  friend bool operator<(Value a, Value b) { return a.node != b.node ? a.node < b.node : a.out < b.out; }
};

struct Node {
  OpKind kind = OpKind::Identity;
  std::string name;              // unique within the graph after add (auto "kind_N" if empty)
  std::vector<Value> inputs;     // Value{-1} marks an absent optional input
  std::vector<Shape> outputs;    // inferred types
  Attrs attrs;
  std::vector<std::shared_ptr<Graph>> subgraphs;  // control-flow bodies (owned)

  template <class A> const A& attr() const { return std::get<A>(attrs); }
  template <class A> A& attr() { return std::get<A>(attrs); }
};

struct GraphOutput {
  Value value;
  std::string name;
};

class Graph {
 public:
  explicit Graph(std::string name = "main");

  const std::string& name() const { return name_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const Node& node(int32_t id) const;
  Node& mutable_node(int32_t id);
  const Shape& type(Value v) const;
  const std::vector<GraphOutput>& outputs() const { return outputs_; }

  // Symbols for dynamic dims. symbol("batch") returns the same id on every call; an empty
  // name is InvalidArgument (the graph unchanged).
  int symbol(const std::string& name);
  const std::vector<std::string>& symbols() const { return symbols_; }
  Dim sym(const std::string& name) { return Dim::symbol(symbol(name)); }

  // ---- leaves
  Value input(const std::string& name, Shape type);
  Value param(const std::string& name, Shape type, Blob init = {});
  Value constant(Shape type, Blob bytes, const std::string& name = "");
  Value constant_f32(std::vector<int64_t> dims, const std::vector<float>& values, const std::string& name = "");
  Value constant_i64(std::vector<int64_t> dims, const std::vector<int64_t>& values, const std::string& name = "");
  // Values given as doubles, converted to `dtype` as a Cast would (floats rounded to nearest,
  // integers truncated; complex values get the real part); scalar() is its one-element case.
  Value constant_values(std::vector<int64_t> dims, DType dtype, const std::vector<double>& values,
                        const std::string& name = "");
  Value scalar(double value, DType dtype);

  // Generic node creation: checks arity against the op table and infers output types.
  // Throws Shape/InvalidArgument errors naming the node; the graph is unchanged on throw.
  std::vector<Value> add(OpKind kind, std::vector<Value> inputs, Attrs attrs,
                         const std::string& name = "");
  Value add1(OpKind kind, std::vector<Value> inputs, Attrs attrs, const std::string& name = "");
  Value add1(OpKind kind, std::vector<Value> inputs) { return add1(kind, std::move(inputs), default_attrs(kind)); }

  void set_outputs(std::vector<Value> values, std::vector<std::string> names = {});
  // Appends a node with already-known output types (used by passes and the parser).
  int32_t append_node(Node node);
  void set_outputs_raw(std::vector<GraphOutput> outs) { outputs_ = std::move(outs); }
  void set_symbols(std::vector<std::string> s) { symbols_ = std::move(s); }

  // Lookup of leaves by public name; -1 if absent.
  int32_t find_input(const std::string& name) const;
  int32_t find_param(const std::string& name) const;
  std::vector<int32_t> input_nodes() const;   // in creation order
  std::vector<int32_t> param_nodes() const;

  // ---- builder methods (named after the ops; outputs inferred)
#define RLX_UNARY(fn, kind) Value fn(Value x) { return add1(OpKind::kind, {x}); }
  RLX_UNARY(abs, Abs) RLX_UNARY(neg, Neg) RLX_UNARY(exp, Exp) RLX_UNARY(log, Log)
  RLX_UNARY(sqrt, Sqrt) RLX_UNARY(rsqrt, Rsqrt) RLX_UNARY(reciprocal, Reciprocal)
  RLX_UNARY(sin, Sin) RLX_UNARY(cos, Cos) RLX_UNARY(tanh, Tanh) RLX_UNARY(sigmoid, Sigmoid)
  RLX_UNARY(relu, Relu) RLX_UNARY(silu, Silu) RLX_UNARY(softplus, Softplus) RLX_UNARY(erf, Erf)
  RLX_UNARY(floor, Floor) RLX_UNARY(ceil, Ceil) RLX_UNARY(round, Round) RLX_UNARY(sign, Sign)
  RLX_UNARY(logical_not, Not) RLX_UNARY(identity, Identity)
#undef RLX_UNARY
  Value gelu(Value x, bool tanh_approx = false);
  Value leaky_relu(Value x, double alpha);
  Value clip(Value x, double lo, double hi);
#define RLX_BINARY(fn, kind) Value fn(Value a, Value b) { return add1(OpKind::kind, {a, b}); }
  RLX_BINARY(add, Add) RLX_BINARY(sub, Sub) RLX_BINARY(mul, Mul) RLX_BINARY(div, Div)
  RLX_BINARY(pow, Pow) RLX_BINARY(max, Max) RLX_BINARY(min, Min)
  RLX_BINARY(eq, Equal) RLX_BINARY(ne, NotEqual) RLX_BINARY(lt, Less) RLX_BINARY(le, LessEqual)
  RLX_BINARY(gt, Greater) RLX_BINARY(ge, GreaterEqual)
  RLX_BINARY(logical_and, And) RLX_BINARY(logical_or, Or) RLX_BINARY(matmul, MatMul)
#undef RLX_BINARY
  Value mod(Value a, Value b, bool fmod = false);
  Value where(Value cond, Value a, Value b) { return add1(OpKind::Where, {cond, a, b}); }
  Value cast(Value x, DType to);
  // The same bytes as `to`; for another element size the innermost dim (static) is rescaled.
  Value bitcast(Value x, DType to);
  Value fused_matmul(Value a, Value b, Value bias, Activation act, double alpha = 0);
  // x @ W^T for W stored as N rows of k elements in block format `format` (rlx/quant.h), w u8[N, row bytes].
  Value qmatmul(Value x, Value w, uint32_t format, int64_t k);
  // Mixture of experts: slot s of token t uses expert ids[t, s] of w u8[E, N, row bytes].
  Value qmatmul_id(Value x, Value w, Value ids, uint32_t format, int64_t k);

  Value reduce_sum(Value x, std::vector<int64_t> axes, bool keepdims = true);
  Value reduce_mean(Value x, std::vector<int64_t> axes, bool keepdims = true);
  Value reduce_max(Value x, std::vector<int64_t> axes, bool keepdims = true);
  Value reduce_min(Value x, std::vector<int64_t> axes, bool keepdims = true);
  Value reduce_prod(Value x, std::vector<int64_t> axes, bool keepdims = true);
  Value argmax(Value x, int64_t axis, bool keepdims = true, bool select_last = false);
  Value argmin(Value x, int64_t axis, bool keepdims = true, bool select_last = false);
  std::pair<Value, Value> topk(Value x, int64_t k, int64_t axis = -1, bool largest = true, bool sorted = true);

  Value softmax(Value x, int64_t axis = -1);
  Value log_softmax(Value x, int64_t axis = -1);
  Value layer_norm(Value x, Value scale, Value bias, int64_t axis = -1, double eps = 1e-5);
  Value rms_norm(Value x, Value scale, int64_t axis = -1, double eps = 1e-6);

  Value reshape(Value x, std::vector<int64_t> shape);
  Value transpose(Value x, std::vector<int64_t> perm);
  Value slice(Value x, std::vector<int64_t> starts, std::vector<int64_t> ends,
              std::vector<int64_t> axes = {}, std::vector<int64_t> steps = {});
  Value concat(std::vector<Value> xs, int64_t axis);
  std::vector<Value> split(Value x, int64_t axis, std::vector<int64_t> sizes);
  Value gather(Value x, Value indices, int64_t axis = 0);
  Value expand(Value x, std::vector<int64_t> shape);
  Value pad(Value x, std::vector<int64_t> pads, PadMode mode = PadMode::Constant, double value = 0);
  Value tile(Value x, std::vector<int64_t> repeats);

  Value conv2d(Value x, Value w, Value bias, std::vector<int64_t> strides = {1, 1},
               std::vector<int64_t> pads = {0, 0, 0, 0}, std::vector<int64_t> dilations = {1, 1},
               int64_t group = 1);
  // act(conv2d(x, w, bias) + residual); bias and residual may be absent (invalid).
  Value fused_conv2d(Value x, Value w, Value bias, Value residual, const FusedConvAttrs& attrs);
  Value max_pool2d(Value x, std::vector<int64_t> kernel, std::vector<int64_t> strides,
                   std::vector<int64_t> pads = {0, 0, 0, 0});
  Value avg_pool2d(Value x, std::vector<int64_t> kernel, std::vector<int64_t> strides,
                   std::vector<int64_t> pads = {0, 0, 0, 0}, bool count_include_pad = false);
  Value attention(Value q, Value k, Value v, Value mask = {}, bool causal = false, double scale = 0);
  Value rotary(Value x, Value cos, Value sin, bool interleaved = false);
  Value kv_attention(Value q, Value k_cache, Value v_cache, Value k_new, Value v_new, Value past, double scale = 0);
  // cache with rows [past[b], past[b] + T) replaced by rows; in place on a graph input (ops.def).
  Value cache_write(Value cache, Value rows, Value past);

 private:
  std::string unique_name(OpKind kind, const std::string& wanted);
  std::vector<Value> add_unguarded(OpKind kind, std::vector<Value> inputs, Attrs attrs, const std::string& name);

  std::string name_;
  std::vector<Node> nodes_;
  std::vector<GraphOutput> outputs_;
  std::vector<std::string> symbols_;
  std::unordered_map<std::string, int> symbol_ids_;
  std::unordered_map<std::string, int32_t> node_names_;
};

}  // namespace rlx
