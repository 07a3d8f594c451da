// precision: the F16/BF16 policies. Compute nodes (matmul, fused_matmul, conv, pooling,
// attention, rotary, elementwise arithmetic, fused elementwise programs) run in the low
// type: their f32 operands are cast down. Reductions, softmax and norms keep f32: their
// low operands are cast back up, except that softmax and the norms take low operands and
// give a low result where the backend claims that form and does not prefer f32 for it
// (BackendClaims::prefers_f32) (its kernels then read and write
// the low type and compute the statistics in f32: what the casts around an f32 node would
// give, less the two extra passes over memory and with scale / bias rounded to the low
// type). Data movement follows its input. Graph inputs, params
// and outputs keep their types (the boundary). Casts are deduplicated: one cast per
// (value, type), a value cast down and needed in f32 again reuses the f32 original, and
// f32 constants are converted at compile time instead of cast per run.
#include <map>

#include "opt/passes.h"
#include "opt/rewrite.h"

namespace rlx::opt {

namespace {

enum class Mode { Low, Keep, Follow };

Mode mode_of(OpKind k) {
  switch (k) {
    case OpKind::MatMul: case OpKind::FusedMatMul: case OpKind::Conv2d: case OpKind::FusedConv2d: case OpKind::MaxPool2d:
    case OpKind::AvgPool2d: case OpKind::Attention: case OpKind::Rotary: case OpKind::FusedElementwise:
      return Mode::Low;
    case OpKind::Cast: case OpKind::Identity: case OpKind::TopK:
      return Mode::Follow;
    default:
      break;
  }
  if (ir::has_trait(k, ir::kReduction)) return Mode::Keep;
  if (ir::has_trait(k, ir::kDataMovement)) return Mode::Follow;
  if (ir::has_trait(k, ir::kElementwise)) return Mode::Low;
  return Mode::Keep;
}


class Precisioner {
 public:
  Precisioner(const Graph& g, DType low, const BackendClaims* claims) : g_(g), rw_(g), low_(low), claims_(claims) {}

  Graph run() {
    const auto& nodes = g_.nodes();
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Node& n = nodes[i];
      if (ir::has_trait(n.kind, ir::kLeaf) || !n.subgraphs.empty()) {
        if (ir::has_trait(n.kind, ir::kLeaf)) rw_.copy(int32_t(i));
        else rw_.copy_with_inputs(int32_t(i), restored_inputs(n));
        continue;
      }
      switch (mode_of(n.kind)) {
        case Mode::Low: lower(int32_t(i)); break;
        case Mode::Keep:
          if (low_kept_claimed(n)) lower(int32_t(i));
          else rw_.copy_with_inputs(int32_t(i), restored_inputs(n));
          break;
        case Mode::Follow: follow(int32_t(i)); break;
      }
    }
    // The boundary: outputs come back in their original types.
    for (const auto& o : g_.outputs()) rw_.set(o.value, want(o.value, g_.type(o.value).dtype()));
    return dce(rw_.finish());
  }

 private:
  std::vector<Value> restored_inputs(const Node& n) {
    std::vector<Value> in;
    for (Value v : n.inputs) in.push_back(v.valid() ? want(v, g_.type(v).dtype()) : v);
    return in;
  }

  // Softmax or a norm whose every float operand is f32, claimed by the backend with all of
  // them in the low type and not preferred in f32 (BackendClaims::prefers_f32: legalize would
  // only wrap the low node in casts back to f32, two passes over memory the f32 node saves).
  bool low_kept_claimed(const Node& n) const {
    if (!claims_ || !claims_->supports) return false;
    if (n.kind != OpKind::Softmax && n.kind != OpKind::LogSoftmax && n.kind != OpKind::LayerNorm &&
        n.kind != OpKind::RmsNorm)
      return false;
    std::vector<Shape> low_in;
    for (Value v : n.inputs) {
      if (!v.valid()) {
        low_in.emplace_back();
        continue;
      }
      const Shape& s = g_.type(v);
      if (s.dtype() != DType::F32) return false;
      low_in.push_back(s.with_dtype(low_));
    }
    std::vector<const Shape*> ptrs;
    for (size_t k = 0; k < n.inputs.size(); ++k) ptrs.push_back(n.inputs[k].valid() ? &low_in[k] : nullptr);
    Node c = n;
    for (Shape& o : c.outputs) o = o.with_dtype(low_);
    return claims_->supports(c, ptrs) && !(claims_->prefers_f32 && claims_->prefers_f32(c, ptrs));
  }

  void lower(int32_t id) {
    const Node& n = g_.node(id);
    std::vector<Value> in;
    for (Value v : n.inputs) {
      if (!v.valid()) { in.push_back(v); continue; }
      DType t = g_.type(v).dtype();
      in.push_back(want(v, t == DType::F32 ? low_ : t));
    }
    Node c = n;
    c.inputs = std::move(in);
    if (auto* f = std::get_if<FusedElementwiseAttrs>(&c.attrs))
      for (auto& op : f->program)
        if (op.type == DType::F32) op.type = low_;
    c.outputs = ir::infer_outputs(c, input_types(rw_.dst(), c));
    rw_.append(id, std::move(c));
  }

  void follow(int32_t id) {
    const Node& n = g_.node(id);
    Graph& d = rw_.dst();
    std::vector<Value> in = rw_.map_inputs(n);
    if (n.kind == OpKind::Cast && d.type(in[0]).dtype() == n.attr<CastAttrs>().to) {
      rw_.replace(id, {in[0]});  // the operand already has the target type
      return;
    }
    // Multi-input data movement (concat) stays low only if all its f32 operands are low.
    bool all_low = true;
    for (size_t i = 0; i < in.size(); ++i)
      if (in[i].valid() && g_.type(n.inputs[i]).dtype() == DType::F32 && d.type(in[i]).dtype() != low_)
        all_low = false;
    if (!all_low && n.inputs.size() > 1 && n.kind != OpKind::Gather) in = restored_inputs(n);
    if (n.kind == OpKind::Gather) in[1] = want(n.inputs[1], g_.type(n.inputs[1]).dtype());
    rw_.copy_with_inputs(id, std::move(in));
  }

  // The rewritten source value `v` in dtype `t` (reusing casts and originals).
  Value want(Value v, DType t) {
    Graph& d = rw_.dst();
    Value cur = rw_.map(v);
    if (d.type(cur).dtype() == t) return cur;
    auto key = std::make_pair(cur, t);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    if (auto it = origin_.find(cur); it != origin_.end() && d.type(it->second).dtype() == t) return it->second;
    const Node& p = d.node(cur.node);
    std::string name = is_auto_name(p, cur.node) ? std::string() : sub_name(p.name, std::string(dtype_name(t)));
    Value r;
    if (p.kind == OpKind::Constant && is_float(t) && is_float(d.type(cur).dtype())) {
      const Shape& s = d.type(cur);
      const Blob& b = p.attr<ConstantAttrs>().value;
      Shape ts = s.with_dtype(t);
      std::vector<uint8_t> bytes(ts.bytes());
      int64_t count = s.numel();
      for (int64_t i = 0; i < count; ++i) write_element(bytes.data(), t, i, read_element(b.data(), s.dtype(), i));
      r = d.constant(ts, Blob(std::move(bytes)), name);
    } else {
      r = d.add1(OpKind::Cast, {cur}, CastAttrs{t}, name);
    }
    cache_[key] = r;
    origin_[r] = cur;
    return r;
  }

  const Graph& g_;
  Rewriter rw_;
  DType low_;
  const BackendClaims* claims_;
  std::map<std::pair<Value, DType>, Value> cache_;
  std::map<Value, Value> origin_;  // value made by a cast/conversion -> its source
};

}  // namespace

Graph apply_precision(const Graph& g, Precision p, const BackendClaims* claims) {
  if (p == Precision::F32 || p == Precision::TF32) return g;  // TF32 is a backend math mode
  return Precisioner(g, p == Precision::F16 ? DType::F16 : DType::BF16, claims).run();
}

}  // namespace rlx::opt
