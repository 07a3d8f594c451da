// NodeCtx: input, attribute and builder helpers shared by every lowering function.
#include <cstring>

#include "io/onnx/importer.h"

namespace rlx::onnx {

std::string NodeCtx::where() const {
  return detail::concat("node '", im.current_node(), "' (", node.op_type(), ", opset ", opset, ")");
}

Value NodeCtx::in(int i) const {
  if (!has(i)) invalid("input ", i, " is required");
  return im.lookup(node.input(i));
}

std::vector<int64_t> NodeCtx::vdims(Value v) const {
  const Shape& s = g.type(v);
  if (!s.is_static())
    throw DynamicShapeError(detail::concat("ONNX ", where(), ": needs the static shape of ", s.str(),
                                           "; import with concrete input shapes"));
  return s.static_dims();
}

size_t NodeCtx::host_size(int64_t n) const {
  if (n < 0 || n > (int64_t(1) << 26)) unsupported("a table of ", n, " elements is too large to build while importing");
  return size_t(n);
}

int64_t NodeCtx::positive(int64_t v, const char* what) const {
  if (v <= 0) invalid(what, " must be positive, got ", v);
  return v;
}

int NodeCtx::onnx_type(int i) const {
  if (!has(i)) invalid("input ", i, " is required");
  int t = im.onnx_type_of_name(node.input(i));
  return t ? t : onnx_type_of(dtype(i));
}

std::vector<int64_t> NodeCtx::dims(int i) const { return vdims(in(i)); }

HostTensor NodeCtx::const_input(int i, const char* what) const {
  Value v = in(i);
  auto t = im.const_tensor(v);
  if (!t) {
    if (!g.type(v).is_static())
      throw DynamicShapeError(detail::concat("ONNX ", where(), ": input ", i, " (", what,
                                             ") depends on symbolic dims; import with concrete input shapes"));
    throw ConstantRequiredError(detail::concat("ONNX ", where(), ": input ", i, " (", what, ") must be a constant"),
                                node.input(i));
  }
  return *t;
}

std::vector<int64_t> NodeCtx::const_ints(int i, const char* what) const { return tensor_to_i64(const_input(i, what)); }
std::vector<double> NodeCtx::const_reals(int i, const char* what) const { return tensor_to_f64(const_input(i, what)); }

const pb::AttributeProto* NodeCtx::attr(const char* name) const {
  for (const auto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t NodeCtx::attr_int(const char* name, int64_t def) const {
  const auto* a = attr(name);
  if (!a) return def;
  if (a->type() != pb::AttributeProto::INT && !a->has_i()) invalid("attribute '", name, "' must be an int");
  return a->i();
}

double NodeCtx::attr_float(const char* name, double def) const {
  const auto* a = attr(name);
  if (!a) return def;
  if (a->type() == pb::AttributeProto::INT) return double(a->i());
  return a->f();
}

std::string NodeCtx::attr_str(const char* name, const std::string& def) const {
  const auto* a = attr(name);
  return a ? a->s() : def;
}

std::vector<int64_t> NodeCtx::attr_ints(const char* name, std::vector<int64_t> def) const {
  const auto* a = attr(name);
  if (!a) return def;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

std::vector<float> NodeCtx::attr_floats(const char* name, std::vector<float> def) const {
  const auto* a = attr(name);
  if (!a) return def;
  return std::vector<float>(a->floats().begin(), a->floats().end());
}

std::optional<HostTensor> NodeCtx::attr_tensor(const char* name) const {
  const auto* a = attr(name);
  if (!a) return std::nullopt;
  if (!a->has_t()) invalid("attribute '", name, "' must be a tensor");
  return decode_tensor(a->t(), im.source().base_dir, detail::concat("attribute '", name, "' of ", where()));
}

const pb::GraphProto* NodeCtx::attr_graph(const char* name) const {
  const auto* a = attr(name);
  if (!a || !a->has_g()) return nullptr;
  return &a->g();
}

int64_t NodeCtx::axis(int64_t a, int64_t rank, const char* what) const {
  if (a < -rank || a >= rank) invalid(what, " ", a, " is out of range for rank ", rank);
  return a < 0 ? a + rank : a;
}

Value NodeCtx::scalar(double v, DType t) const { return full({}, v, t); }

Value NodeCtx::full(std::vector<int64_t> dims, double v, DType t) const {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || (d > 0 && n > (int64_t(1) << 40) / d)) invalid("bad dims for a constant");
    n *= d;
  }
  host_size(n);
  return im.constant(make_tensor(t, std::move(dims), std::vector<double>(size_t(n), v)));
}

Value NodeCtx::ints(const std::vector<int64_t>& v) const { return im.constant(make_i64({int64_t(v.size())}, v)); }

Value NodeCtx::cast(Value x, DType t) const {
  if (g.type(x).dtype() == t) return x;
  return op(OpKind::Cast, {x}, CastAttrs{t});
}

Value NodeCtx::reshape(Value x, std::vector<int64_t> shape) const {
  const Shape& s = g.type(x);
  if (s.is_static() && s.static_dims() == shape) return x;
  return op(OpKind::Reshape, {x}, ShapeAttrs{std::move(shape)});
}

Value NodeCtx::transpose(Value x, std::vector<int64_t> perm) const {
  bool ident = true;
  for (size_t i = 0; i < perm.size(); ++i) ident = ident && perm[i] == int64_t(i);
  if (ident && int(perm.size()) == g.type(x).rank()) return x;
  return op(OpKind::Transpose, {x}, TransposeAttrs{std::move(perm)});
}

Value NodeCtx::expand(Value x, std::vector<int64_t> shape) const {
  const Shape& s = g.type(x);
  if (s.is_static() && s.static_dims() == shape) return x;
  return op(OpKind::Expand, {x}, ShapeAttrs{std::move(shape)});
}

Value NodeCtx::slice(Value x, std::vector<int64_t> starts, std::vector<int64_t> ends, std::vector<int64_t> axes,
                     std::vector<int64_t> steps) const {
  return op(OpKind::Slice, {x}, SliceAttrs{std::move(starts), std::move(ends), std::move(axes), std::move(steps)});
}

Value NodeCtx::concat(std::vector<Value> xs, int64_t axis) const {
  if (xs.size() == 1) return xs[0];
  return op(OpKind::Concat, std::move(xs), AxisAttrs{axis});
}

Value NodeCtx::reduce(OpKind k, Value x, std::vector<int64_t> axes, bool keepdims) const {
  if (g.type(x).rank() == 0) return x;
  return op(k, {x}, ReduceAttrs{std::move(axes), keepdims});
}

Value NodeCtx::unsqueeze(Value x, std::vector<int64_t> axes) const {
  std::vector<int64_t> d = vdims(x);
  int64_t r = int64_t(d.size() + axes.size());
  std::vector<bool> ins(size_t(r), false);
  for (int64_t a : axes) {
    int64_t n = axis(a, r, "unsqueeze axis");
    if (ins[size_t(n)]) invalid("duplicate unsqueeze axis ", a);
    ins[size_t(n)] = true;
  }
  std::vector<int64_t> out;
  size_t j = 0;
  for (int64_t i = 0; i < r; ++i) out.push_back(ins[size_t(i)] ? 1 : d[j++]);
  return reshape(x, out);
}

}  // namespace rlx::onnx
