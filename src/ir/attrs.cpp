#include "rlx/attrs.h"

#include <cstring>
#include <functional>

#include "rlx/error.h"

namespace rlx {

namespace {
constexpr std::string_view kOpNames[] = {
#define RLX_OP(kind, name, attrs, min_in, max_in, n_out, traits, infer) name,
#include "rlx/ops.def"
#undef RLX_OP
};

// A pointer to one attribute field, for generic equality and hashing.
using FieldPtr = std::variant<const int64_t*, const double*, const bool*, const DType*, const Activation*,
                              const PadMode*, const std::vector<int64_t>*, const std::vector<double>*,
                              const std::string*, const Blob*, const std::vector<FusedOp>*>;

struct FieldCollector {
  std::vector<FieldPtr> fields;
  template <class T> void operator()(const char*, T& field) { fields.push_back(FieldPtr(&field)); }
};

std::vector<FieldPtr> collect(const Attrs& a) {
  FieldCollector c;
  std::visit([&](const auto& s) { const_cast<std::decay_t<decltype(s)>&>(s).visit(c); }, a);
  return c.fields;
}

void mix(size_t& h, size_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); }

size_t hash_field(const FieldPtr& f) {
  return std::visit(
      [](auto p) -> size_t {
        using T = std::decay_t<decltype(*p)>;
        size_t h = 0;
        if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          for (auto x : *p) mix(h, std::hash<int64_t>()(x));
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          for (auto x : *p) mix(h, std::hash<double>()(x));
        } else if constexpr (std::is_same_v<T, std::string>) {
          h = std::hash<std::string>()(*p);
        } else if constexpr (std::is_same_v<T, Blob>) {
          // Size plus a sample of bytes: cheap for large constants, still discriminating.
          h = p->size();
          const uint8_t* d = p->data();
          size_t n = p->size(), step = n > 256 ? n / 64 : 1;
          for (size_t i = 0; i < n; i += step) mix(h, d[i]);
        } else if constexpr (std::is_same_v<T, std::vector<FusedOp>>) {
          for (const auto& op : *p) {
            mix(h, size_t(op.kind));
            for (auto a : op.args) mix(h, size_t(a));
            mix(h, std::hash<double>()(op.alpha));
            mix(h, size_t(op.type));
          }
        } else if constexpr (std::is_enum_v<T>) {
          h = size_t(*p);
        } else {
          h = std::hash<T>()(*p);
        }
        return h;
      },
      f);
}
}  // namespace

std::string_view op_name(OpKind k) {
  auto i = size_t(k);
  if (i >= size_t(kNumOpKinds)) return "<invalid-op>";
  return kOpNames[i];
}

bool operator==(const Blob& a, const Blob& b) {
  if (a.size() != b.size()) return false;
  if (a.data() == b.data() || a.size() == 0) return true;
  return std::memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string_view enum_name(Activation a) {
  switch (a) {
    case Activation::None: return "none";
    case Activation::Relu: return "relu";
    case Activation::Gelu: return "gelu";
    case Activation::GeluTanh: return "gelu_tanh";
    case Activation::Silu: return "silu";
    case Activation::Sigmoid: return "sigmoid";
    case Activation::Tanh: return "tanh";
    case Activation::LeakyRelu: return "leaky_relu";
  }
  return "?";
}

std::string_view enum_name(PadMode m) {
  switch (m) {
    case PadMode::Constant: return "constant";
    case PadMode::Reflect: return "reflect";
    case PadMode::Edge: return "edge";
  }
  return "?";
}

bool parse_enum(std::string_view s, Activation& out) {
  for (int i = 0; i <= int(Activation::LeakyRelu); ++i)
    if (enum_name(Activation(i)) == s) { out = Activation(i); return true; }
  return false;
}

bool parse_enum(std::string_view s, PadMode& out) {
  for (int i = 0; i <= int(PadMode::Edge); ++i)
    if (enum_name(PadMode(i)) == s) { out = PadMode(i); return true; }
  return false;
}

Attrs default_attrs(OpKind k) {
  switch (k) {
#define RLX_OP(kind, name, attrs, min_in, max_in, n_out, traits, infer) \
  case OpKind::kind: return attrs{};
#include "rlx/ops.def"
#undef RLX_OP
  }
  fail(ErrorCategory::Internal, "default_attrs: invalid op kind ", int(k));
}

bool attrs_equal(const Attrs& a, const Attrs& b) {
  if (a.index() != b.index()) return false;
  auto fa = collect(a), fb = collect(b);
  for (size_t i = 0; i < fa.size(); ++i) {
    bool same = std::visit(
        [&](auto p) {
          using P = decltype(p);
          return *p == *std::get<P>(fb[i]);
        },
        fa[i]);
    if (!same) return false;
  }
  return true;
}

size_t attrs_hash(const Attrs& a) {
  size_t h = a.index();
  for (const auto& f : collect(a)) mix(h, hash_field(f));
  return h;
}

}  // namespace rlx
