// channels-last: convolutions and pools the backend claims in their channels-last form
// (nhwc: x [N,H,W,C], w [M,kH,kW,C/g], y [N,Ho,Wo,M]) become that form. A value one such node
// writes keeps its channels-last form for every converted reader, so a chain of them passes
// its activations on without a transpose: transposes remain only where the chain starts (x to
// channels last) and where an NCHW reader takes a value from it (one transpose back, emitted
// beside the converted node, dropped by dce when nothing reads it). Constant weights are
// permuted here, once (a weight that is not a constant keeps its conv NCHW). Also carried
// through: elementwise nodes whose rank-4 operands all have a channels-last form (the others
// single elements), and reductions over H and W (a global average pool) of a channels-last
// value, which reduce its axes 1 and 2 instead.
//
// Why: tensor-core convolution kernels (cuDNN's among them) read channels last; given NCHW
// they transpose every activation in and out of each convolution.
#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>

#include "opt/passes.h"
#include "opt/rewrite.h"

namespace rlx::opt {

namespace {

const TransposeAttrs kToLast{{0, 2, 3, 1}}, kToFirst{{0, 3, 1, 2}};

bool nhwc_candidate(OpKind k) {
  return k == OpKind::Conv2d || k == OpKind::FusedConv2d || k == OpKind::MaxPool2d || k == OpKind::AvgPool2d;
}

Attrs with_nhwc(const Node& n) {
  switch (n.kind) {
    case OpKind::Conv2d: { ConvAttrs a = n.attr<ConvAttrs>(); a.nhwc = true; return a; }
    case OpKind::FusedConv2d: { FusedConvAttrs a = n.attr<FusedConvAttrs>(); a.nhwc = true; return a; }
    default: { PoolAttrs a = n.attr<PoolAttrs>(); a.nhwc = true; return a; }
  }
}

// The bytes of a static [M, C, kH, kW] constant permuted to [M, kH, kW, C].
Blob weights_to_last(const Shape& t, const Blob& src) {
  const auto d = t.static_dims();
  const size_t e = dtype_size(t.dtype());
  std::vector<uint8_t> out(src.size());
  const int64_t m = d[0], c = d[1], kh = d[2], kw = d[3];
  for (int64_t o = 0; o < m; ++o)
    for (int64_t i = 0; i < c; ++i)
      for (int64_t y = 0; y < kh; ++y)
        for (int64_t x = 0; x < kw; ++x)
          std::memcpy(&out[size_t(((o * kh + y) * kw + x) * c + i) * e],
                      src.data() + size_t(((o * c + i) * kh + y) * kw + x) * e, e);
  return Blob(std::move(out));
}

class ChannelsLast {
 public:
  ChannelsLast(const Graph& g, const BackendClaims* claims, DType low) : g_(g), rw_(g), claims_(claims), low_(low) {}

  Graph run(std::string* report) {
    for (size_t i = 0; i < g_.nodes().size(); ++i) {
      const int32_t id = int32_t(i);
      const Node& n = g_.node(id);
      if (nhwc_candidate(n.kind) && !ir::is_channels_last(n) && convert_window(id)) continue;
      if (ir::has_trait(n.kind, ir::kElementwise) && convert_elementwise(id)) continue;
      if (ir::has_trait(n.kind, ir::kReduction) && convert_reduction(id)) continue;
      rw_.copy(id);
    }
    if (report) *report += rep_.str();
    // The transposes back to NCHW that no reader took go (dce), when anything changed.
    return converted_ > 0 ? dce(rw_.finish()) : rw_.finish();
  }

 private:
  // x in channels-last form (destination value): its converted producer's, or a transpose.
  Value last_of(Value src) {
    if (auto it = last_.find(src); it != last_.end()) return it->second;
    if (auto it = entry_.find(src); it != entry_.end()) return it->second;
    const Value t = rw_.emit1(OpKind::Transpose, {rw_.map(src)}, kToLast, sub_name(g_.node(src.node).name, "nhwc"));
    entry_[src] = t;
    return t;
  }

  // Records y_last as src's channels-last form and maps src to its NCHW transpose.
  void produced(int32_t id, Value y_last) {
    const Value src{id, 0};
    last_[src] = y_last;
    rw_.set(src, rw_.emit1(OpKind::Transpose, {y_last}, kToFirst, rw_.name_of(id)));
  }

  // A static constant's weights permuted to [M, kH, kW, C/g] (convert_window checked both).
  Value permuted_weight(Value w) {
    const Node& p = g_.node(w.node);
    if (auto it = weights_.find(w); it != weights_.end()) return it->second;
    const Shape& t = g_.type(w);
    const auto d = t.static_dims();
    const Value c = rw_.dst().constant(t.with_dims({d[0], d[2], d[3], d[1]}),
                                       weights_to_last(t, p.attr<ConstantAttrs>().value), sub_name(p.name, "nhwc"));
    weights_[w] = c;
    return c;
  }

  // Asked about the types the node will have once the precision pass runs f32 compute in low_.
  // (its outputs too: a claim may compare an operand with the output, as a residual's).
  bool claimed(const Node& n, const std::vector<const Shape*>& types) {
    if (!claims_ || !claims_->supports) return false;  // no backend to ask: keep NCHW
    auto lowered = [&](const Shape& t) { return low_ != DType::F32 && t.dtype() == DType::F32 ? t.with_dtype(low_) : t; };
    std::vector<Shape> low(types.size());
    std::vector<const Shape*> in(types.size(), nullptr);
    for (size_t k = 0; k < types.size(); ++k) {
      if (!types[k]) continue;
      low[k] = lowered(*types[k]);
      in[k] = &low[k];
    }
    Node asked = n;
    for (Shape& o : asked.outputs) o = lowered(o);
    return claims_->supports(asked, in);
  }

  bool convert_window(int32_t id) {
    const Node& n = g_.node(id);
    const bool conv = n.kind == OpKind::Conv2d || n.kind == OpKind::FusedConv2d;
    const Shape& x = g_.type(n.inputs[0]);
    if (x.rank() != 4 || !x.is_static() || n.outputs.size() != 1) return false;
    // The node as it would be, on its types (no destination values yet: nothing emitted
    // unless the backend claims it).
    auto last_dims = [](const Shape& t) { return t.with_dims({t.dims()[0], t.dims()[2], t.dims()[3], t.dims()[1]}); };
    std::vector<Shape> types(n.inputs.size());
    types[0] = last_dims(x);
    if (conv) {
      const Value w = n.inputs[1];
      if (g_.node(w.node).kind != OpKind::Constant || !g_.type(w).is_static()) {
        rep_ << "channels-last: not fused: " << op_name(n.kind) << " '" << n.name
             << "': its weights are not a constant; it stays NCHW\n";
        return false;
      }
      types[1] = last_dims(g_.type(w));
      for (size_t k = 2; k < n.inputs.size(); ++k)
        if (n.inputs[k].valid()) types[k] = k == 3 ? last_dims(g_.type(n.inputs[k])) : g_.type(n.inputs[k]);
    }
    Node cand;
    cand.kind = n.kind;
    cand.name = n.name;
    cand.attrs = with_nhwc(n);
    cand.inputs = n.inputs;  // source values: only their presence matters to inference and claims
    std::vector<const Shape*> in;
    for (size_t k = 0; k < types.size(); ++k) in.push_back(n.inputs[k].valid() ? &types[k] : nullptr);
    try {
      cand.outputs = ir::infer_outputs(cand, in);
    } catch (const Error& e) {
      rep_ << "channels-last: not fused: " << op_name(n.kind) << " '" << n.name << "': " << e.what() << "\n";
      return false;
    }
    if (!claimed(cand, in)) return false;  // the backend runs it NCHW: nothing to say
    std::vector<Value> ins{last_of(n.inputs[0])};
    if (conv) {
      ins.push_back(permuted_weight(n.inputs[1]));
      for (size_t k = 2; k < n.inputs.size(); ++k)
        ins.push_back(!n.inputs[k].valid() ? Value() : k == 3 ? last_of(n.inputs[k]) : rw_.map(n.inputs[k]));
    }
    const Value y = rw_.emit1(n.kind, ins, with_nhwc(n), sub_name(rw_.name_of(id), "nhwc"));
    produced(id, y);
    ++converted_;
    rep_ << "channels-last: node '" << rw_.dst().node(y.node).name << "' = " << op_name(n.kind) << " '" << n.name
         << "' channels last (nhwc)\n";
    return true;
  }

  // An elementwise node over channels-last values (every rank-4 operand has that form and
  // the output's shape; the others hold one element) runs on them as it is.
  bool convert_elementwise(int32_t id) {
    const Node& n = g_.node(id);
    if (n.outputs.size() != 1 || n.outputs[0].rank() != 4) return false;
    std::vector<Value> ins;
    bool any = false;
    for (const Value& v : n.inputs) {
      if (!v.valid()) return false;
      const Shape& t = g_.type(v);
      if (t.rank() == 4 && last_.count(v) && t.dims() == n.outputs[0].dims()) {
        ins.push_back(last_.at(v));
        any = true;
      } else if (t.is_static() && t.numel() == 1 && t.rank() <= 1) {
        ins.push_back(rw_.map(v));
      } else {
        return false;
      }
    }
    if (!any) return false;
    const Value y = rw_.emit1(n.kind, ins, n.attrs, sub_name(rw_.name_of(id), "nhwc"));
    produced(id, y);
    rep_ << "channels-last: node '" << rw_.dst().node(y.node).name << "' = " << op_name(n.kind) << " '" << n.name
         << "' carried channels last\n";
    return true;
  }

  // A reduction over exactly H and W of a channels-last value reduces its axes 1 and 2; kept
  // dims [N,1,1,C] hold the bytes of [N,C,1,1], so a reshape gives the NCHW result.
  bool convert_reduction(int32_t id) {
    const Node& n = g_.node(id);
    if (n.inputs.size() != 1 || n.outputs.size() != 1 || !last_.count(n.inputs[0])) return false;
    if (!std::holds_alternative<ReduceAttrs>(n.attrs)) return false;
    ReduceAttrs a = n.attr<ReduceAttrs>();
    std::vector<int64_t> axes = a.axes;
    for (int64_t& x : axes)
      if (x < 0) x += 4;
    std::sort(axes.begin(), axes.end());
    if (axes != std::vector<int64_t>{2, 3} || !n.outputs[0].is_static()) return false;
    a.axes = {1, 2};
    Value y = rw_.emit1(n.kind, {last_.at(n.inputs[0])}, a, sub_name(rw_.name_of(id), "nhwc"));
    if (a.keepdims) y = rw_.emit1(OpKind::Reshape, {y}, ShapeAttrs{n.outputs[0].static_dims()}, rw_.name_of(id));
    rw_.set(Value{id, 0}, y);
    rep_ << "channels-last: node '" << rw_.dst().node(y.node).name << "' = " << op_name(n.kind) << " '" << n.name
         << "' over axes 1, 2 channels last, carried\n";
    return true;
  }

  const Graph& g_;
  Rewriter rw_;
  const BackendClaims* claims_;
  DType low_;
  std::map<Value, Value> last_, entry_, weights_;
  std::ostringstream rep_;
  int converted_ = 0;
};

}  // namespace

Graph channels_last(const Graph& g, std::string* report, const BackendClaims* claims, DType low) {
  return ChannelsLast(g, claims, low).run(report);
}

}  // namespace rlx::opt
