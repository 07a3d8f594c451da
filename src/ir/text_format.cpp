// The text printer, structural graph equality and file loading (the parser is in
// text_parse.cpp). Format summary:
//
//   graph NAME {
//     symbols(batch, seq)                       # only when the graph has symbols
//     %0 = input "x" : f32[batch,4]
//     %1 = param "w" {init=0x0000803f...} : f32[4,2]
//     %2 = matmul(%0, %1) : f32[batch,2]
//     %3:2 = split(%2) {axis=1, sizes=[1,1]} : f32[batch,1], f32[batch,1]
//     %4 = add(%3.0, %3.1) name="sum" : f32[batch,1]
//     %5 = fused_elementwise(%4) {program=[relu(0):f32, leaky_relu(1){alpha=0.1}:f32]} : f32[batch,1]
//     outputs(%2 as "y", %5)
//   }
//
// Only attributes that differ from the struct's defaults are printed. A node name is
// printed only when it is not the automatic one (the public name for input/param,
// "<op>_<id>" otherwise); an output name only when it is not the default one.
// Control-flow bodies follow their node as nested `graph NAME { ... }` blocks.
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "ir/op_table.h"
#include "ir/text_fields.h"
#include "rlx/text.h"

namespace rlx {

namespace ir::text {

namespace {
struct Collector {
  std::vector<Field>* out;
  template <class T> void operator()(const char* name, T& f) { out->push_back(Field{name, FieldRef(&f)}); }
};
}  // namespace

std::vector<Field> fields_of(Attrs& a) {
  std::vector<Field> out;
  Collector c{&out};
  std::visit([&](auto& s) { s.visit(c); }, a);
  return out;
}

bool double_equal(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

bool field_equal(const FieldRef& a, const FieldRef& b) {
  if (a.index() != b.index()) return false;
  return std::visit(
      [&](auto* pa) {
        using P = decltype(pa);
        const auto& x = *pa;
        const auto& y = *std::get<P>(b);
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, double>) {
          // Distinguish -0.0 from 0.0 so a printed "-0" survives the default check.
          return double_equal(x, y) && std::signbit(x) == std::signbit(y);
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          if (x.size() != y.size()) return false;
          for (size_t i = 0; i < x.size(); ++i)
            if (!double_equal(x[i], y[i]) || std::signbit(x[i]) != std::signbit(y[i])) return false;
          return true;
        } else if constexpr (std::is_same_v<T, std::vector<FusedOp>>) {
          if (x.size() != y.size()) return false;
          for (size_t i = 0; i < x.size(); ++i)
            if (x[i].kind != y[i].kind || x[i].args != y[i].args || x[i].type != y[i].type ||
                !double_equal(x[i].alpha, y[i].alpha) || !double_equal(x[i].beta, y[i].beta))
              return false;
          return true;
        } else {
          return x == y;
        }
      },
      a);
}

std::string format_double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

bool is_identifier(std::string_view s) {
  if (s.empty()) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!alpha(s[0])) return false;
  for (char c : s)
    if (!alpha(c) && !(c >= '0' && c <= '9')) return false;
  return true;
}

std::string quote(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out = "\"";
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += "\\x";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

}  // namespace ir::text

namespace {

using namespace ir::text;

class Printer {
 public:
  explicit Printer(std::ostringstream& os) : os_(os) {}

  void graph(const Graph& g, int indent) {
    std::string pad(size_t(indent), ' ');
    os_ << pad << "graph " << (is_identifier(g.name()) ? g.name() : quote(g.name())) << " {\n";
    symbols_ = &g.symbols();
    if (!g.symbols().empty()) {
      os_ << pad << "  symbols(";
      for (size_t i = 0; i < g.symbols().size(); ++i) os_ << (i ? ", " : "") << ident_or_quote(g.symbols()[i]);
      os_ << ")\n";
    }
    for (size_t i = 0; i < g.nodes().size(); ++i) node(g, int32_t(i), indent + 2);
    os_ << pad << "  outputs(";
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      const GraphOutput& o = g.outputs()[i];
      os_ << (i ? ", " : "") << value(g, o.value);
      if (o.name != default_output_name(g, o.value)) os_ << " as " << quote(o.name);
    }
    os_ << ")\n" << pad << "}\n";
  }

 private:
  static std::string ident_or_quote(const std::string& s) { return is_identifier(s) ? s : quote(s); }

  static std::string default_output_name(const Graph& g, Value v) {
    if (v.node < 0 || size_t(v.node) >= g.nodes().size()) return "";
    const Node& n = g.nodes()[size_t(v.node)];
    return n.outputs.size() == 1 ? n.name : n.name + ":" + std::to_string(v.out);
  }

  static std::string value(const Graph& g, Value v) {
    if (!v.valid()) return "_";
    std::string s = "%";
    s += std::to_string(v.node);
    bool multi = size_t(v.node) < g.nodes().size() && g.nodes()[size_t(v.node)].outputs.size() != 1;
    if (multi || v.out != 0) {
      s += '.';
      s += std::to_string(v.out);
    }
    return s;
  }

  void type(const Shape& t) {
    os_ << dtype_name(t.dtype()) << "[";
    for (size_t i = 0; i < t.dims().size(); ++i) {
      Dim d = t.dims()[i];
      os_ << (i ? "," : "");
      if (d.is_static()) os_ << d.raw();
      else if (size_t(d.symbol_id()) < symbols_->size()) os_ << ident_or_quote((*symbols_)[size_t(d.symbol_id())]);
      else os_ << "s" << d.symbol_id();  // symbol unknown to the graph (the verifier rejects it)
    }
    os_ << "]";
  }

  void field_value(const FieldRef& f) {
    std::visit(
        [&](auto* p) {
          using T = std::decay_t<decltype(*p)>;
          if constexpr (std::is_same_v<T, int64_t>) os_ << *p;
          else if constexpr (std::is_same_v<T, double>) os_ << format_double(*p);
          else if constexpr (std::is_same_v<T, bool>) os_ << (*p ? "true" : "false");
          else if constexpr (std::is_same_v<T, DType>) os_ << dtype_name(*p);
          else if constexpr (std::is_same_v<T, Activation> || std::is_same_v<T, PadMode>) os_ << enum_name(*p);
          else if constexpr (std::is_same_v<T, std::string>) os_ << quote(*p);
          else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
            os_ << "[";
            for (size_t i = 0; i < p->size(); ++i) os_ << (i ? "," : "") << (*p)[i];
            os_ << "]";
          } else if constexpr (std::is_same_v<T, std::vector<double>>) {
            os_ << "[";
            for (size_t i = 0; i < p->size(); ++i) os_ << (i ? "," : "") << format_double((*p)[i]);
            os_ << "]";
          } else if constexpr (std::is_same_v<T, Blob>) {
            static const char* hex = "0123456789abcdef";
            std::string s = "0x";
            s.reserve(2 + 2 * p->size());
            for (size_t i = 0; i < p->size(); ++i) {
              s += hex[p->data()[i] >> 4];
              s += hex[p->data()[i] & 15];
            }
            os_ << s;
          } else if constexpr (std::is_same_v<T, std::vector<FusedOp>>) {
            os_ << "[";
            for (size_t i = 0; i < p->size(); ++i) {
              const FusedOp& op = (*p)[i];
              os_ << (i ? ", " : "") << op_name(op.kind) << "(";
              for (size_t j = 0; j < op.args.size(); ++j) os_ << (j ? "," : "") << op.args[j];
              os_ << ")";
              if (op.alpha != 0 || op.beta != 0 || std::signbit(op.alpha) || std::signbit(op.beta))
                os_ << "{alpha=" << format_double(op.alpha) << ", beta=" << format_double(op.beta) << "}";
              os_ << ":" << dtype_name(op.type);
            }
            os_ << "]";
          }
        },
        f);
  }

  void node(const Graph& g, int32_t id, int indent) {
    const Node& n = g.nodes()[size_t(id)];
    bool leaf_named = n.kind == OpKind::Input || n.kind == OpKind::Param;
    os_ << std::string(size_t(indent), ' ') << "%" << id;
    if (n.outputs.size() != 1) os_ << ":" << n.outputs.size();
    os_ << " = " << op_name(n.kind);
    Attrs attrs = n.attrs;  // a shallow copy: visit() needs a mutable struct
    std::string auto_name = std::string(op_name(n.kind)) + "_" + std::to_string(id);
    if (leaf_named && std::holds_alternative<LeafAttrs>(attrs)) {
      auto_name = std::get<LeafAttrs>(attrs).name;
      os_ << " " << quote(auto_name);
    }
    if (!ir::has_trait(n.kind, ir::kLeaf)) {
      os_ << "(";
      for (size_t i = 0; i < n.inputs.size(); ++i) os_ << (i ? ", " : "") << value(g, n.inputs[i]);
      os_ << ")";
    }
    Attrs defaults = default_attrs(n.kind);
    auto fields = fields_of(attrs);
    // A node holding the wrong struct (the verifier reports it) prints every field.
    auto dfields = attrs.index() == defaults.index() ? fields_of(defaults) : std::vector<Field>{};
    bool open = false;
    for (size_t i = 0; i < fields.size(); ++i) {
      if (leaf_named && fields[i].name == "name") continue;
      if (!dfields.empty() && field_equal(fields[i].ref, dfields[i].ref)) continue;
      os_ << (open ? ", " : " {") << fields[i].name << "=";
      field_value(fields[i].ref);
      open = true;
    }
    if (open) os_ << "}";
    if (n.name != auto_name) os_ << " name=" << quote(n.name);
    if (!n.outputs.empty()) {
      os_ << " : ";
      for (size_t i = 0; i < n.outputs.size(); ++i) {
        if (i) os_ << ", ";
        type(n.outputs[i]);
      }
    }
    os_ << "\n";
    for (const auto& sub : n.subgraphs) {
      const auto* saved = symbols_;
      if (sub) graph(*sub, indent + 2);
      symbols_ = saved;
    }
  }

  std::ostringstream& os_;
  const std::vector<std::string>* symbols_ = nullptr;
};

}  // namespace

std::string print_graph(const Graph& g) {
  std::ostringstream os;
  Printer(os).graph(g, 0);
  return os.str();
}

Graph load_graph_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(ErrorCategory::Io, "cannot open graph file '", path, "': ", std::strerror(errno));
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) fail(ErrorCategory::Io, "cannot read graph file '", path, "'");
  return parse_graph(ss.str(), path);
}

bool graphs_equal(const Graph& a, const Graph& b) {
  if (a.name() != b.name() || a.symbols() != b.symbols() || a.nodes().size() != b.nodes().size() ||
      a.outputs().size() != b.outputs().size())
    return false;
  for (size_t i = 0; i < a.nodes().size(); ++i) {
    const Node& x = a.nodes()[i];
    const Node& y = b.nodes()[i];
    if (x.kind != y.kind || x.name != y.name || !(x.inputs == y.inputs) || !(x.outputs == y.outputs) ||
        x.attrs.index() != y.attrs.index() || x.subgraphs.size() != y.subgraphs.size())
      return false;
    Attrs ax = x.attrs, ay = y.attrs;
    auto fx = fields_of(ax), fy = fields_of(ay);
    for (size_t f = 0; f < fx.size(); ++f)
      if (!field_equal(fx[f].ref, fy[f].ref)) return false;
    for (size_t s = 0; s < x.subgraphs.size(); ++s) {
      if (!x.subgraphs[s] || !y.subgraphs[s]) {
        if (x.subgraphs[s] != y.subgraphs[s]) return false;
        continue;
      }
      if (!graphs_equal(*x.subgraphs[s], *y.subgraphs[s])) return false;
    }
  }
  for (size_t i = 0; i < a.outputs().size(); ++i)
    if (!(a.outputs()[i].value == b.outputs()[i].value) || a.outputs()[i].name != b.outputs()[i].name) return false;
  return true;
}

}  // namespace rlx
