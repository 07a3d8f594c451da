// HostEval: sequence and optional ops, Identity, control flow over host values, and the
// fold of every other node through the importer's lowering.
#include "io/onnx/host_eval.h"

#include <algorithm>
#include <cstring>

#include "io/onnx/ops_table.h"

namespace rlx::onnx {

const OnnxValue* Scope::find(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent_) {
    auto it = s->own_.find(name);
    if (it != s->own_.end()) return &it->second;
  }
  return nullptr;
}

OnnxValue* Scope::own(const std::string& name) {
  auto it = own_.find(name);
  return it == own_.end() ? nullptr : &it->second;
}

// ---- HostNode

std::string HostNode::where() const {
  std::string name = node.name().empty() ? (node.output_size() ? node.output(0) : node.op_type()) : node.name();
  return "node '" + name + "' (" + node.op_type() + ", opset " + std::to_string(opset) + ")";
}

const OnnxValue& HostNode::input(int i) const {
  if (!has(i)) invalid("input ", i, " is required");
  return *in[size_t(i)];
}

OnnxValue HostNode::take(int i) const {
  const OnnxValue& v = input(i);
  if (size_t(i) < last_use.size() && last_use[size_t(i)]) {
    // The scope's own value (const only through this view): nothing reads it after this node.
    if (OnnxValue* own = const_cast<Scope&>(scope).own(node.input(i)); own == &v) return std::move(*own);
  }
  return v;
}

const OnnxValue& HostNode::tensor(int i) const {
  const OnnxValue& v = input(i);
  if (v.kind != ValueKind::Tensor) invalid("input ", i, " must be a tensor, got ", v.describe());
  return v;
}

const OnnxValue& HostNode::strings(int i) const {
  const OnnxValue& v = tensor(i);
  if (!v.is_string()) invalid("input ", i, " must be a string tensor, got ", v.describe());
  return v;
}

int64_t HostNode::scalar_int(int i, const char* what) const {
  const OnnxValue& v = tensor(i);
  if (!v.is_numeric() || !is_integer(v.tensor.dtype) || checked_numel(v.tensor.dims, what) != 1)
    invalid(what, " must be one integer, got ", v.describe());
  return tensor_to_i64(to_host(v, what))[0];
}

const pb::AttributeProto* HostNode::attr(const char* name) const {
  for (const auto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t HostNode::attr_int(const char* name, int64_t def) const {
  const auto* a = attr(name);
  return a ? a->i() : def;
}

std::string HostNode::attr_str(const char* name, const std::string& def) const {
  const auto* a = attr(name);
  return a ? a->s() : def;
}

std::vector<std::string> HostNode::attr_strings(const char* name) const {
  const auto* a = attr(name);
  if (!a) return {};
  return {a->strings().begin(), a->strings().end()};
}

std::vector<int64_t> HostNode::attr_ints(const char* name) const {
  const auto* a = attr(name);
  if (!a) return {};
  return {a->ints().begin(), a->ints().end()};
}

std::vector<float> HostNode::attr_floats(const char* name) const {
  const auto* a = attr(name);
  if (!a) return {};
  return {a->floats().begin(), a->floats().end()};
}

// ---- broadcasting

std::vector<int64_t> broadcast_dims(const std::vector<int64_t>& a, const std::vector<int64_t>& b, const std::string& what) {
  size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) fail(ErrorCategory::Shape, what, ": dims ", da, " and ", db, " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t broadcast_index(int64_t i, const std::vector<int64_t>& out, const std::vector<int64_t>& dims) {
  int64_t idx = 0, stride = 1;
  size_t off = out.size() - dims.size();
  for (size_t k = out.size(); k-- > 0;) {
    int64_t coord = i % out[k];
    i /= out[k];
    if (k < off) continue;
    int64_t d = dims[k - off];
    if (d != 1) idx += coord * stride;
    stride *= d;
  }
  return idx;
}

namespace {

constexpr int kMaxDepth = 64;
constexpr int64_t kMaxIterations = int64_t(1) << 24;  // a Loop with neither trip count nor condition

OnnxValue bool_scalar(bool b) { return OnnxValue::of(TypedTensor{DType::Bool, {}, {uint8_t(b ? 1 : 0)}}, kBool); }

// ---- tensor pieces along an axis (numeric or strings)

// Rows [start, start + len) of axis `axis`.
OnnxValue slice_axis(const OnnxValue& t, int64_t axis, int64_t start, int64_t len) {
  const auto& d = t.tensor.dims;
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= d[size_t(k)];
  for (size_t k = size_t(axis) + 1; k < d.size(); ++k) inner *= d[k];
  const int64_t n = d[size_t(axis)];
  std::vector<int64_t> od = d;
  od[size_t(axis)] = len;
  if (t.is_string()) {
    std::vector<std::string> s;
    s.reserve(size_t(outer * len * inner));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = 0; k < len * inner; ++k) s.push_back(t.strings[size_t((o * n + start) * inner + k)]);
    return OnnxValue::of_strings(od, std::move(s));
  }
  const size_t es = dtype_size(t.tensor.dtype);
  std::vector<uint8_t> b(size_t(outer * len * inner) * es);
  for (int64_t o = 0; o < outer; ++o)
    if (len * inner != 0)
      std::memcpy(b.data() + size_t(o * len * inner) * es, t.tensor.bytes.data() + size_t((o * n + start) * inner) * es,
                  size_t(len * inner) * es);
  return OnnxValue::of(TypedTensor{t.tensor.dtype, od, std::move(b)}, t.onnx_type);
}

// Concatenation along `axis` of tensors of one type whose other dims agree.
OnnxValue concat_axis(const std::vector<const OnnxValue*>& xs, int64_t axis, const HostNode& h) {
  const OnnxValue& first = *xs[0];
  std::vector<int64_t> od = first.tensor.dims;
  int64_t total = 0;
  for (const OnnxValue* x : xs) {
    if (x->kind != ValueKind::Tensor || x->onnx_type != first.onnx_type || x->tensor.dims.size() != od.size())
      h.invalid("elements differ in type or rank: ", first.describe(), " and ", x->describe());
    for (size_t k = 0; k < od.size(); ++k)
      if (int64_t(k) != axis && x->tensor.dims[k] != od[k])
        h.invalid("elements differ in dims other than the axis: ", first.describe(), " and ", x->describe());
    total += x->tensor.dims[size_t(axis)];
  }
  od[size_t(axis)] = total;
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= od[size_t(k)];
  for (size_t k = size_t(axis) + 1; k < od.size(); ++k) inner *= od[k];
  if (first.is_string()) {
    std::vector<std::string> s;
    for (int64_t o = 0; o < outer; ++o)
      for (const OnnxValue* x : xs) {
        int64_t run = x->tensor.dims[size_t(axis)] * inner;
        for (int64_t k = 0; k < run; ++k) s.push_back(x->strings[size_t(o * run + k)]);
      }
    return OnnxValue::of_strings(od, std::move(s));
  }
  const size_t es = dtype_size(first.tensor.dtype);
  std::vector<uint8_t> b;
  b.reserve(size_t(outer * total * inner) * es);
  for (int64_t o = 0; o < outer; ++o)
    for (const OnnxValue* x : xs) {
      size_t run = size_t(x->tensor.dims[size_t(axis)] * inner) * es;
      const uint8_t* p = x->tensor.bytes.data() + size_t(o) * run;
      b.insert(b.end(), p, p + run);
    }
  return OnnxValue::of(TypedTensor{first.tensor.dtype, od, std::move(b)}, first.onnx_type);
}

OnnxValue with_dims(OnnxValue v, std::vector<int64_t> dims) {
  v.tensor.dims = std::move(dims);
  return v;
}

int64_t norm_axis(const HostNode& h, int64_t axis, int64_t rank, const char* what = "axis") {
  if (axis < -rank || axis >= rank) h.invalid(what, " ", axis, " is out of range for rank ", rank);
  return axis < 0 ? axis + rank : axis;
}

// ---- sequences

const OnnxValue& sequence_in(const HostNode& h, int i) {
  const OnnxValue& v = h.input(i);
  if (v.kind != ValueKind::Sequence) h.invalid("input ", i, " must be a sequence, got ", v.describe());
  return v;
}

// A position in [-n, n) (or [-n, n] when `end_ok`: insertion), normalized.
int64_t position(const HostNode& h, int i, int64_t n, bool end_ok) {
  int64_t p = h.scalar_int(i, "position");
  int64_t hi = end_ok ? n : n - 1;
  if (p < -n || p > hi) h.invalid("position ", p, " is out of range for a sequence of ", n);
  return p < 0 ? p + n : p;
}

void check_elem(const HostNode& h, const OnnxValue& seq, const OnnxValue& t) {
  if (t.kind != ValueKind::Tensor) h.invalid("sequence elements must be tensors, got ", t.describe());
  if (seq.onnx_type && t.onnx_type != seq.onnx_type)
    h.invalid("a ", onnx_type_name(t.onnx_type), " tensor in a sequence of ", onnx_type_name(seq.onnx_type));
}

std::vector<OnnxValue> sequence_empty(HostNode& h) {
  int t = int(h.attr_int("dtype", kFloat));
  if (t != kString && !carried_dtype(t)) h.invalid("dtype ", t, " is not a tensor type");
  return {OnnxValue::sequence({}, t)};
}

std::vector<OnnxValue> sequence_construct(HostNode& h) {
  std::vector<OnnxValue> items;
  for (size_t i = 0; i < h.in.size(); ++i) {
    const OnnxValue& t = h.tensor(int(i));
    if (!items.empty() && t.onnx_type != items[0].onnx_type)
      h.invalid("inputs differ in type: ", items[0].describe(), " and ", t.describe());
    items.push_back(t);
  }
  if (items.empty()) h.invalid("needs at least one input");
  return {OnnxValue::sequence(std::move(items))};
}

std::vector<OnnxValue> sequence_at(HostNode& h) {
  const OnnxValue& s = sequence_in(h, 0);
  return {s.items[size_t(position(h, 1, int64_t(s.items.size()), false))]};
}

std::vector<OnnxValue> sequence_insert(HostNode& h) {
  sequence_in(h, 0);
  const OnnxValue& t = h.tensor(1);
  OnnxValue s = h.take(0);
  check_elem(h, s, t);
  int64_t n = int64_t(s.items.size());
  int64_t p = h.has(2) ? position(h, 2, n, true) : n;
  s.items.insert(s.items.begin() + p, t);
  if (!s.onnx_type) s.onnx_type = t.onnx_type;
  return {std::move(s)};
}

std::vector<OnnxValue> sequence_erase(HostNode& h) {
  sequence_in(h, 0);
  OnnxValue s = h.take(0);
  int64_t n = int64_t(s.items.size());
  if (!n) h.invalid("erasing from an empty sequence");
  int64_t p = h.has(1) ? position(h, 1, n, false) : n - 1;
  s.items.erase(s.items.begin() + p);
  return {std::move(s)};
}

std::vector<OnnxValue> sequence_length(HostNode& h) {
  int64_t n = int64_t(sequence_in(h, 0).items.size());
  TypedTensor t{DType::I64, {}, std::vector<uint8_t>(8)};
  std::memcpy(t.bytes.data(), &n, 8);
  return {OnnxValue::of(std::move(t), kInt64)};
}

std::vector<OnnxValue> split_to_sequence(HostNode& h) {
  const OnnxValue& x = h.tensor(0);
  const int64_t rank = int64_t(x.tensor.dims.size());
  if (!rank) h.invalid("input must have rank >= 1");
  const int64_t axis = norm_axis(h, h.attr_int("axis", 0), rank);
  const int64_t n = x.tensor.dims[size_t(axis)];
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if (!h.has(1)) {
    sizes.assign(size_t(n), 1);
    squeeze = h.attr_int("keepdims", 1) == 0;
  } else {
    const OnnxValue& sp = h.tensor(1);
    if (!sp.is_numeric() || !is_integer(sp.tensor.dtype)) h.invalid("split must be integers, got ", sp.describe());
    std::vector<int64_t> v = tensor_to_i64(to_host(sp, "split"));
    if (sp.tensor.dims.empty()) {  // a scalar: chunks of that size, the last one shorter
      if (v[0] <= 0) h.invalid("split size ", v[0], " must be positive");
      for (int64_t at = 0; at < n; at += v[0]) sizes.push_back(std::min(v[0], n - at));
    } else {
      int64_t sum = 0;
      for (int64_t s : v) {
        if (s < 0) h.invalid("negative split ", s);
        sum += s;
      }
      if (sum != n) h.invalid("splits add up to ", sum, ", the axis has ", n);
      sizes = v;
    }
  }
  std::vector<OnnxValue> items;
  int64_t at = 0;
  for (int64_t s : sizes) {
    OnnxValue part = slice_axis(x, axis, at, s);
    if (squeeze) {
      std::vector<int64_t> d = part.tensor.dims;
      d.erase(d.begin() + axis);
      part = with_dims(std::move(part), std::move(d));
    }
    items.push_back(std::move(part));
    at += s;
  }
  return {OnnxValue::sequence(std::move(items), x.onnx_type)};
}

std::vector<OnnxValue> concat_from_sequence(HostNode& h) {
  const OnnxValue& s = sequence_in(h, 0);
  if (s.items.empty()) h.invalid("the sequence is empty");
  const bool new_axis = h.attr_int("new_axis", 0) != 0;
  const int64_t rank = int64_t(s.items[0].tensor.dims.size());
  const int64_t axis = norm_axis(h, h.attr_int("axis", 0), new_axis ? rank + 1 : rank);
  std::vector<OnnxValue> held;
  std::vector<const OnnxValue*> xs;
  for (const OnnxValue& t : s.items) {
    if (t.kind != ValueKind::Tensor) h.invalid("sequence elements must be tensors, got ", t.describe());
    if (new_axis) {
      std::vector<int64_t> d = t.tensor.dims;
      if (int64_t(d.size()) != rank) h.invalid("elements differ in rank");
      d.insert(d.begin() + axis, 1);
      held.push_back(with_dims(t, std::move(d)));
    }
  }
  for (size_t i = 0; i < s.items.size(); ++i) xs.push_back(new_axis ? &held[i] : &s.items[i]);
  return {concat_axis(xs, axis, h)};
}

// ---- optionals and Identity (any kind)

int optional_elem_type(const HostNode& h) {
  const auto* a = h.attr("type");
  if (!a || !a->has_tp()) return 0;
  const auto& tp = a->tp();
  if (tp.has_tensor_type()) return tp.tensor_type().elem_type();
  if (tp.has_sequence_type() && tp.sequence_type().elem_type().has_tensor_type())
    return tp.sequence_type().elem_type().tensor_type().elem_type();
  return 0;
}

std::vector<OnnxValue> optional(HostNode& h) {
  if (!h.has(0)) return {OnnxValue::optional(std::nullopt, optional_elem_type(h))};
  return {OnnxValue::optional(*h.in[0])};
}

std::vector<OnnxValue> optional_has_element(HostNode& h) {
  if (!h.has(0)) return {bool_scalar(false)};
  const OnnxValue& v = *h.in[0];
  return {bool_scalar(v.kind != ValueKind::Optional || !v.items.empty())};
}

std::vector<OnnxValue> optional_get_element(HostNode& h) {
  const OnnxValue& v = h.input(0);
  if (v.kind != ValueKind::Optional) return {v};
  if (v.items.empty()) h.invalid("the optional input holds no value");
  return {v.items[0]};
}

std::vector<OnnxValue> identity(HostNode& h) { return {h.input(0)}; }

// ---- control flow

const pb::GraphProto& graph_attr(const HostNode& h, const char* name) {
  const auto* a = h.attr(name);
  if (!a || !a->has_g()) h.invalid("attribute '", name, "' (a graph) is required");
  return a->g();
}

bool truth(const HostNode& h, const OnnxValue& v, const char* what) {
  if (!v.is_numeric() || checked_numel(v.tensor.dims, what) != 1) h.invalid(what, " must hold one value, got ", v.describe());
  return read_scalar(v.tensor.bytes.data(), v.tensor.dtype) != 0;
}

std::vector<OnnxValue> if_node(HostNode& h) {
  bool c = truth(h, h.tensor(0), "cond");
  const pb::GraphProto& g = graph_attr(h, c ? "then_branch" : "else_branch");
  auto outs = h.ev.run_graph(g, {}, h.scope);
  if (int(outs.size()) != h.node.output_size())
    h.invalid("the ", c ? "then" : "else", " branch gives ", outs.size(), " outputs, the node has ", h.node.output_size());
  return outs;
}

OnnxValue i64_scalar(int64_t v) {
  TypedTensor t{DType::I64, {}, std::vector<uint8_t>(8)};
  std::memcpy(t.bytes.data(), &v, 8);
  return OnnxValue::of(std::move(t), kInt64);
}

std::vector<OnnxValue> loop(HostNode& h) {
  const pb::GraphProto& body = graph_attr(h, "body");
  const bool has_m = h.has(0), has_cond = h.has(1);
  const int64_t m = has_m ? h.scalar_int(0, "trip count M") : 0;
  bool cond = has_cond ? truth(h, h.tensor(1), "cond") : true;
  const int carried = int(h.in.size()) - 2;
  if (carried < 0 || body.input_size() != carried + 2)
    h.invalid("the body takes ", body.input_size(), " inputs, the loop carries ", std::max(carried, 0), " values");
  const int scans = body.output_size() - 1 - carried;
  if (scans < 0) h.invalid("the body gives ", body.output_size(), " outputs for ", carried, " carried values");
  std::vector<OnnxValue> state;
  for (int i = 0; i < carried; ++i) state.push_back(h.has(2 + i) ? *h.in[size_t(2 + i)] : OnnxValue::optional(std::nullopt));
  std::vector<std::vector<OnnxValue>> scan(static_cast<size_t>(scans));
  for (int64_t it = 0; (!has_m || it < m) && cond; ++it) {
    if (!has_m && it >= kMaxIterations) h.invalid("ran ", kMaxIterations, " iterations with no trip count");
    std::vector<OnnxValue> ins{i64_scalar(it), bool_scalar(cond)};
    for (auto& s : state) ins.push_back(std::move(s));
    auto outs = h.ev.run_graph(body, std::move(ins), h.scope);
    cond = truth(h, outs[0], "the body's condition");
    for (int i = 0; i < carried; ++i) state[size_t(i)] = std::move(outs[size_t(1 + i)]);
    for (int i = 0; i < scans; ++i) {
      OnnxValue& v = outs[size_t(1 + carried + i)];
      if (v.kind != ValueKind::Tensor) h.invalid("scan output ", i, " must be a tensor, got ", v.describe());
      scan[size_t(i)].push_back(std::move(v));
    }
  }
  std::vector<OnnxValue> res = std::move(state);
  for (int i = 0; i < scans; ++i) {
    auto& parts = scan[size_t(i)];
    if (parts.empty()) {  // no iteration: an empty tensor of the declared element type
      int t = body.output(1 + carried + i).type().tensor_type().elem_type();
      auto dt = carried_dtype(t ? t : kFloat);
      res.push_back(t == kString ? OnnxValue::of_strings({0}, {})
                                 : OnnxValue::of(TypedTensor{dt.value_or(DType::F32), {0}, {}}, t ? t : kFloat));
      continue;
    }
    std::vector<OnnxValue> held;
    std::vector<const OnnxValue*> xs;
    for (auto& p : parts) {
      std::vector<int64_t> d = p.tensor.dims;
      d.insert(d.begin(), 1);
      held.push_back(with_dims(std::move(p), std::move(d)));
    }
    for (auto& p : held) xs.push_back(&p);
    res.push_back(concat_axis(xs, 0, h));
  }
  return res;
}

std::vector<OnnxValue> sequence_map(HostNode& h) {
  const pb::GraphProto& body = graph_attr(h, "body");
  const OnnxValue& first = sequence_in(h, 0);
  const size_t n = first.items.size();
  for (size_t i = 1; i < h.in.size(); ++i)
    if (h.has(int(i)) && h.in[i]->kind == ValueKind::Sequence && h.in[i]->items.size() != n)
      h.invalid("input sequences differ in length: ", n, " and ", h.in[i]->items.size());
  if (body.input_size() != int(h.in.size())) h.invalid("the body takes ", body.input_size(), " inputs, the node has ", h.in.size());
  std::vector<std::vector<OnnxValue>> outs(static_cast<size_t>(body.output_size()));
  for (size_t k = 0; k < n; ++k) {
    std::vector<OnnxValue> ins;
    for (size_t i = 0; i < h.in.size(); ++i) {
      const OnnxValue& v = h.input(int(i));
      ins.push_back(v.kind == ValueKind::Sequence ? v.items[k] : v);
    }
    auto r = h.ev.run_graph(body, std::move(ins), h.scope);
    for (size_t o = 0; o < r.size(); ++o) outs[o].push_back(std::move(r[o]));
  }
  std::vector<OnnxValue> res;
  for (size_t o = 0; o < outs.size(); ++o) {
    int t = 0;
    const auto& ty = body.output(int(o)).type();
    if (ty.has_tensor_type()) t = ty.tensor_type().elem_type();
    res.push_back(OnnxValue::sequence(std::move(outs[o]), t));
  }
  return res;
}

HostFn value_op(const std::string& op) {
  static const std::map<std::string, HostFn> ops = {
      {"SequenceEmpty", sequence_empty}, {"SequenceConstruct", sequence_construct}, {"SequenceAt", sequence_at},
      {"SequenceInsert", sequence_insert}, {"SequenceErase", sequence_erase}, {"SequenceLength", sequence_length},
      {"SplitToSequence", split_to_sequence}, {"ConcatFromSequence", concat_from_sequence},
      {"SequenceMap", sequence_map}, {"Optional", optional}, {"OptionalHasElement", optional_has_element},
      {"OptionalGetElement", optional_get_element}, {"Identity", identity}, {"If", if_node}, {"Loop", loop},
  };
  auto it = ops.find(op);
  return it == ops.end() ? nullptr : it->second;
}

}  // namespace

// ---- HostEval

int64_t HostEval::opset_of(const pb::NodeProto& n) const {
  if (is_default_domain(n.domain())) return src_.opset;
  auto it = src_.opsets.find(n.domain());
  return it == src_.opsets.end() ? 0 : it->second;
}

// Strings from the message; numbers through the source's decoded copy (the importer drops
// the message's data once it has decoded it).
OnnxValue HostEval::initializer_value(const pb::TensorProto& t, const std::string& what) const {
  if (t.data_type() == kString) return decode_value(t, src_.base_dir, what);
  const ModelSource::Initializer d = source_initializer(src_, t);
  TypedTensor tt{d.dtype, d.dims, std::vector<uint8_t>(d.bytes.data(), d.bytes.data() + d.bytes.size())};
  return OnnxValue::of(std::move(tt), t.data_type());
}

const OnnxValue* HostEval::value(const std::string& name, const Scope& scope) {
  if (const OnnxValue* v = scope.find(name)) return v;
  if (auto it = inits_.find(name); it != inits_.end()) return &it->second;
  for (const auto& t : src_.model.graph().initializer()) {
    if (t.name() != name) continue;
    return &inits_.emplace(name, initializer_value(t, src_.path + ": initializer '" + name + "'")).first->second;
  }
  return nullptr;
}

std::vector<OnnxValue> HostEval::fold(const pb::NodeProto& node, const Scope& scope) {
  std::unordered_set<std::string> read;
  names_read(node, read);
  std::map<std::string, HostTensor> values;
  for (const auto& name : read) {
    if (name.empty()) continue;
    const OnnxValue* v = scope.find(name);
    if (!v) continue;  // defined inside a body, or a main-graph initializer the importer defines
    if (!v->is_numeric())
      fail(ErrorCategory::Unsupported, "ONNX node '", node.name().empty() ? node.op_type() : node.name(), "' (",
           node.op_type(), ") reads '", name, "', a ", v->describe(), ": the op takes numeric tensors only");
    values.emplace(name, to_host(*v, name));
  }
  Graph scratch("host");
  Importer im(src_, opts_, scratch);
  std::vector<HostTensor> outs = im.eval_node(node, values);
  std::vector<OnnxValue> res;
  for (auto& h : outs) res.push_back(from_host(std::move(h)));
  return res;
}

std::vector<OnnxValue> HostEval::fold_with(const pb::NodeProto& node, const Scope& scope,
                                           std::map<std::string, OnnxValue> replace) {
  Scope inner(&scope);
  for (auto& [name, v] : replace) inner.set(name, std::move(v));
  return fold(node, inner);
}

namespace {

// What one node evaluation costs before its outputs (ImportOptions::host_work_limit): a
// Loop body of a few small nodes run many times is bounded by its node count, not only by
// the elements it makes (with the fuzz target's limit of 2^20 and one unit a node, a mutated
// Loop ran up to a million cheap node evaluations: over 10 s under ASan).
constexpr int64_t kNodeUnits = 1024;

// Elements a value holds (items of sequences counted with their elements).
int64_t value_size(const OnnxValue& v) {
  if (v.kind != ValueKind::Tensor) {
    int64_t n = int64_t(v.items.size());
    for (const auto& i : v.items) n += value_size(i);
    return n;
  }
  return v.is_string() ? int64_t(v.strings.size()) : int64_t(v.tensor.bytes.size() / std::max<size_t>(1, dtype_size(v.tensor.dtype)));
}

}  // namespace

void HostEval::charge(int64_t units, const pb::NodeProto& node) {
  work_ += units;
  if (work_ > opts_.host_work_limit)
    fail(ErrorCategory::ResourceExhausted, "ONNX node '", node.name().empty() ? node.op_type() : node.name(), "' (",
         node.op_type(), "): its evaluation on the host exceeded ", opts_.host_work_limit,
         " element operations (ImportOptions::host_work_limit)");
}

std::vector<OnnxValue> HostEval::eval(const pb::NodeProto& node, const Scope& scope) {
  return eval_in(node, const_cast<Scope&>(scope), {});
}

std::vector<OnnxValue> HostEval::eval_in(const pb::NodeProto& node, Scope& scope, const std::vector<bool>& last_use) {
  HostNode h{*this, node, scope, opset_of(node), {}, last_use};
  for (const auto& name : node.input()) {
    if (name.empty()) {
      h.in.push_back(nullptr);
      continue;
    }
    const OnnxValue* v = value(name, scope);
    if (!v) fail(ErrorCategory::Parse, src_.path, ": ", h.where(), " reads '", name, "', which is not defined before it");
    h.in.push_back(v);
  }
  HostFn fn = nullptr;
  if (is_default_domain(node.domain())) fn = value_op(node.op_type());
  if (!fn) fn = string_op(node, h.in);
  if (!fn) {
    std::vector<OnnxValue> outs = fold(node, scope);
    int64_t units = kNodeUnits;
    for (const auto& o : outs) units += value_size(o);
    charge(units, node);
    return outs;
  }
  // Identity and the optional ops on plain tensors: the same as the fold, done directly.
  std::vector<OnnxValue> outs = fn(h);
  if (int(outs.size()) < node.output_size()) outs.resize(size_t(node.output_size()));
  int64_t units = kNodeUnits;
  for (const auto& o : outs) units += value_size(o);
  charge(units, node);
  return outs;
}

// The last node reading each name (graph outputs read at the end): that node may move the
// value out of the body's scope instead of copying it.
const std::vector<std::vector<bool>>& HostEval::last_uses(const pb::GraphProto& g) {
  auto it = last_uses_.find(&g);
  if (it != last_uses_.end()) return it->second;
  std::unordered_map<std::string, int> last;
  for (int i = 0; i < g.node_size(); ++i) {
    std::unordered_set<std::string> read;
    names_read(g.node(i), read);
    for (const auto& name : read) last[name] = i;
  }
  for (const auto& vo : g.output()) last[vo.name()] = g.node_size();
  std::vector<std::vector<bool>> uses(static_cast<size_t>(g.node_size()));
  for (int i = 0; i < g.node_size(); ++i) {
    const pb::NodeProto& n = g.node(i);
    for (const auto& name : n.input()) {
      auto l = last.find(name);
      // Read once by this node only (a name given twice stays: the other read needs it).
      uses[size_t(i)].push_back(l != last.end() && l->second == i &&
                                std::count(n.input().begin(), n.input().end(), name) == 1);
    }
  }
  return last_uses_.emplace(&g, std::move(uses)).first->second;
}

std::vector<OnnxValue> HostEval::run_graph(const pb::GraphProto& g, std::vector<OnnxValue> inputs, const Scope& outer) {
  if (depth_ >= kMaxDepth) fail(ErrorCategory::Unsupported, src_.path, ": subgraphs nested deeper than ", kMaxDepth);
  struct Depth {
    int& d;
    ~Depth() { --d; }
  } depth{++depth_};
  Scope s(&outer);
  for (int i = 0; i < g.input_size(); ++i)
    s.set(g.input(i).name(), size_t(i) < inputs.size() ? std::move(inputs[size_t(i)]) : OnnxValue::optional(std::nullopt));
  for (const auto& t : g.initializer())
    s.set(t.name(), initializer_value(t, src_.path + ": initializer '" + t.name() + "' of graph '" + g.name() + "'"));
  const std::vector<std::vector<bool>>& uses = last_uses(g);
  for (int i = 0; i < g.node_size(); ++i) {
    const pb::NodeProto& n = g.node(i);
    const std::vector<bool>& last_use = uses[size_t(i)];
    auto outs = eval_in(n, s, last_use);
    for (int k = 0; k < n.output_size() && size_t(k) < outs.size(); ++k)
      if (!n.output(k).empty()) s.set(n.output(k), std::move(outs[size_t(k)]));
  }
  std::vector<OnnxValue> res;
  for (const auto& vo : g.output()) {
    const OnnxValue* v = value(vo.name(), s);
    if (!v) fail(ErrorCategory::Parse, src_.path, ": graph '", g.name(), "' output '", vo.name(), "' is never defined");
    res.push_back(*v);
  }
  return res;
}

}  // namespace rlx::onnx
