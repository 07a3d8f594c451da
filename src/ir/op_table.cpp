#include "ir/op_table.h"

#include <unordered_map>

namespace rlx::ir {

namespace {
template <class T, class V> struct VariantIndex;
template <class T, class... Ts> struct VariantIndex<T, std::variant<Ts...>> {
  static constexpr size_t value = [] {
    size_t i = 0;
    bool found = false;
    ((found = found || std::is_same_v<T, Ts>, i += found ? 0 : 1), ...);
    return i;
  }();
};

std::vector<OpInfo> build_table() {
  return {
#define RLX_OP(kind, name, attrs, min_in, max_in, n_out, traits, infer) \
  OpInfo{OpKind::kind, name, min_in, max_in, n_out, uint32_t(traits), &infer, VariantIndex<attrs, Attrs>::value},
#include "rlx/ops.def"
#undef RLX_OP
  };
}
}  // namespace

const std::vector<OpInfo>& all_ops() {
  static const std::vector<OpInfo> table = build_table();
  return table;
}

const OpInfo& op_info(OpKind k) {
  const auto& t = all_ops();
  if (size_t(k) >= t.size()) fail(ErrorCategory::Internal, "invalid op kind ", int(k));
  return t[size_t(k)];
}

bool has_trait(OpKind k, Trait t) { return (op_info(k).traits & t) != 0; }

void scalar_params(const Attrs& a, double& alpha, double& beta) {
  alpha = beta = 0;
  if (const auto* s = std::get_if<ScalarAttrs>(&a)) alpha = s->alpha, beta = s->beta;
  else if (const auto* c = std::get_if<ClipAttrs>(&a)) alpha = c->min, beta = c->max;
  else if (const auto* g = std::get_if<GeluAttrs>(&a)) alpha = g->tanh_approx;
  else if (const auto* m = std::get_if<ModAttrs>(&a)) alpha = m->fmod;
  else if (const auto* i = std::get_if<IsInfAttrs>(&a)) alpha = i->detect_negative, beta = i->detect_positive;
}

bool has_scalar_params(const Attrs& a) {
  return std::holds_alternative<NoAttrs>(a) || std::holds_alternative<ScalarAttrs>(a) ||
         std::holds_alternative<ClipAttrs>(a) || std::holds_alternative<GeluAttrs>(a) ||
         std::holds_alternative<ModAttrs>(a) || std::holds_alternative<IsInfAttrs>(a);
}

Attrs attrs_from_params(OpKind kind, double alpha, double beta) {
  Attrs a = default_attrs(kind);
  auto flag = [&](double v, const char* what) {
    if (v != 0 && v != 1) fail(ErrorCategory::Shape, op_name(kind), ": ", what, " must be 0 or 1, got ", v);
    return v == 1;
  };
  if (auto* s = std::get_if<ScalarAttrs>(&a)) *s = ScalarAttrs{alpha, beta};
  else if (auto* c = std::get_if<ClipAttrs>(&a)) *c = ClipAttrs{alpha, beta};
  else if (auto* g = std::get_if<GeluAttrs>(&a)) g->tanh_approx = flag(alpha, "tanh_approx");
  else if (auto* m = std::get_if<ModAttrs>(&a)) m->fmod = flag(alpha, "fmod");
  else if (auto* i = std::get_if<IsInfAttrs>(&a)) *i = IsInfAttrs{flag(alpha, "detect_negative"), flag(beta, "detect_positive")};
  else if (alpha != 0 || beta != 0) fail(ErrorCategory::Shape, op_name(kind), " takes no alpha/beta");
  return a;
}

bool is_float_unary(OpKind k) { return has_trait(k, kUnary) && has_trait(k, kFloatOnly) && !has_trait(k, kBoolResult); }

int elementwise_arity(OpKind k) {
  const OpInfo& op = op_info(k);
  if (!(op.traits & kElementwise) || op.min_inputs != op.max_inputs) return -1;  // fused_elementwise: variadic
  return op.min_inputs;
}

bool op_from_name(std::string_view name, OpKind& out) {
  static const auto index = [] {
    std::unordered_map<std::string_view, OpKind> m;
    for (const auto& op : all_ops()) m.emplace(op.name, op.kind);
    return m;
  }();
  auto it = index.find(name);
  if (it == index.end()) return false;
  out = it->second;
  return true;
}

const Shape& InferCtx::input(int i) const {
  if (!has(i)) error("input ", i, " is required but absent");
  return *in[size_t(i)];
}

std::vector<Shape> infer_outputs(const Node& node, const std::vector<const Shape*>& inputs) {
  const OpInfo& info = op_info(node.kind);
  int n = int(inputs.size());
  if (n < info.min_inputs || n > info.max_inputs)
    fail(ErrorCategory::Shape, "node '", node.name, "' (", info.name, "): expects ", info.min_inputs,
         info.min_inputs == info.max_inputs ? "" : "..",
         info.min_inputs == info.max_inputs ? std::string() : std::to_string(info.max_inputs),
         " inputs, got ", n);
  if (node.attrs.index() != info.attrs_index)
    fail(ErrorCategory::Verify, "node '", node.name, "' (", info.name, "): wrong attribute struct");
  InferCtx ctx{node, inputs};
  // Required inputs (all up to min_inputs) must be present.
  for (int i = 0; i < info.min_inputs; ++i)
    if (!inputs[size_t(i)]) ctx.error("input ", i, " is required but absent");
  std::vector<Shape> out;
  try {
    out = info.infer(ctx);
  } catch (const Error& e) {
    // Errors raised below the rule (an output Shape too large to exist, a checked product)
    // do not know the node: name it here.
    if (std::string_view(e.what()).starts_with("node '")) throw;
    fail(e.category(), "node '", node.name, "' (", info.name, "): ", e.what());
  }
  if (info.num_outputs >= 0 && int(out.size()) != info.num_outputs)
    fail(ErrorCategory::Internal, "node '", node.name, "': inference gave ", out.size(), " outputs");
  return out;
}

bool is_channels_last(const Node& node) {
  switch (node.kind) {
    case OpKind::Conv2d: return node.attr<ConvAttrs>().nhwc;
    case OpKind::FusedConv2d: return node.attr<FusedConvAttrs>().nhwc;
    case OpKind::MaxPool2d:
    case OpKind::AvgPool2d: return node.attr<PoolAttrs>().nhwc;
    default: return false;
  }
}

}  // namespace rlx::ir
