// The text parser (format described in text_format.cpp). Every node's types are
// re-inferred through the op table and checked against the printed ones; errors are
// Error(Parse) with "source:line:col: message".
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "ir/op_table.h"
#include "ir/text_fields.h"
#include "rlx/text.h"

namespace rlx {

namespace {

using namespace ir::text;

enum class Tok { End, Ident, Label, Int, Float, Hex, String, Punct, Minus };

struct Token {
  Tok kind = Tok::End;
  std::string text;  // identifier / label name / number text / decoded string / hex digits / punctuation
  int line = 1, col = 1;
};

class Lexer {
 public:
  Lexer(std::string_view src, std::string_view source) : src_(src), source_(source) {}

  [[noreturn]] void error_at(int line, int col, const std::string& msg) const {
    fail(ErrorCategory::Parse, source_, ":", line, ":", col, ": ", msg);
  }

  Token next() {
    skip_space();
    Token t;
    t.line = line_;
    t.col = col_;
    if (pos_ >= src_.size()) return t;
    char c = src_[pos_];
    auto digit = [](char ch) { return ch >= '0' && ch <= '9'; };
    auto word = [&](char ch) { return is_identifier(std::string_view(&ch, 1)) || digit(ch); };
    if (is_identifier(std::string_view(&c, 1))) {
      t.kind = Tok::Ident;
      while (pos_ < src_.size() && word(src_[pos_])) t.text += take();
    } else if (c == '%') {
      take();
      t.kind = Tok::Label;
      while (pos_ < src_.size() && word(src_[pos_])) t.text += take();
      if (t.text.empty()) error_at(t.line, t.col, "expected a value label after '%'");
    } else if (c == '0' && pos_ + 1 < src_.size() && (src_[pos_ + 1] == 'x' || src_[pos_ + 1] == 'X')) {
      take();
      take();
      t.kind = Tok::Hex;
      while (pos_ < src_.size() && std::isxdigit(static_cast<unsigned char>(src_[pos_]))) t.text += take();
    } else if (digit(c) || (c == '-' && pos_ + 1 < src_.size() && digit(src_[pos_ + 1]))) {
      t.kind = Tok::Int;
      t.text += take();
      while (pos_ < src_.size() && digit(src_[pos_])) t.text += take();
      if (pos_ < src_.size() && src_[pos_] == '.' && pos_ + 1 < src_.size() && digit(src_[pos_ + 1])) {
        t.kind = Tok::Float;
        t.text += take();
        while (pos_ < src_.size() && digit(src_[pos_])) t.text += take();
      }
      if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
        t.kind = Tok::Float;
        t.text += take();
        if (pos_ < src_.size() && (src_[pos_] == '+' || src_[pos_] == '-')) t.text += take();
        if (pos_ >= src_.size() || !digit(src_[pos_])) error_at(line_, col_, "malformed exponent in number");
        while (pos_ < src_.size() && digit(src_[pos_])) t.text += take();
      }
    } else if (c == '"') {
      t.kind = Tok::String;
      take();
      string_body(t);
    } else if (c == '-') {
      take();
      t.kind = Tok::Minus;
      t.text = "-";
    } else if (std::string_view("=:,(){}[].").find(c) != std::string_view::npos) {
      t.kind = Tok::Punct;
      t.text = take();
    } else {
      error_at(t.line, t.col, std::string("unexpected character '") + c + "'");
    }
    return t;
  }

 private:
  char take() {
    char c = src_[pos_++];
    if (c == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    return c;
  }

  void skip_space() {
    while (pos_ < src_.size()) {
      char c = src_[pos_];
      if (c == '#') {
        while (pos_ < src_.size() && src_[pos_] != '\n') take();
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        take();
      } else {
        break;
      }
    }
  }

  void string_body(Token& t) {
    auto hexval = [](char h) {
      if (h >= '0' && h <= '9') return h - '0';
      if (h >= 'a' && h <= 'f') return h - 'a' + 10;
      if (h >= 'A' && h <= 'F') return h - 'A' + 10;
      return -1;
    };
    while (true) {
      if (pos_ >= src_.size() || src_[pos_] == '\n') error_at(t.line, t.col, "unterminated string");
      char c = take();
      if (c == '"') return;
      if (c != '\\') {
        t.text += c;
        continue;
      }
      if (pos_ >= src_.size()) error_at(t.line, t.col, "unterminated string");
      int el = line_, ec = col_;
      char e = take();
      switch (e) {
        case '"': t.text += '"'; break;
        case '\\': t.text += '\\'; break;
        case 'n': t.text += '\n'; break;
        case 't': t.text += '\t'; break;
        case 'r': t.text += '\r'; break;
        case 'x': {
          int hi = pos_ < src_.size() ? hexval(src_[pos_]) : -1;
          int lo = pos_ + 1 < src_.size() ? hexval(src_[pos_ + 1]) : -1;
          if (hi < 0 || lo < 0) error_at(el, ec, "\\x needs two hex digits");
          take();
          take();
          t.text += char(hi * 16 + lo);
          break;
        }
        default: error_at(el, ec, std::string("unknown escape '\\") + e + "'");
      }
    }
  }

  std::string_view src_, source_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
};

class Parser {
 public:
  Parser(std::string_view text, std::string_view source) : lex_(text, source) { tok_ = lex_.next(); }

  Graph parse_top() {
    Graph g = graph();
    if (tok_.kind != Tok::End) error("unexpected text after the graph");
    return g;
  }

 private:
  [[noreturn]] void error(const std::string& msg) const { error_at(tok_, msg); }
  [[noreturn]] void error_at(const Token& t, const std::string& msg) const { lex_.error_at(t.line, t.col, msg); }

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Tok::End: return "end of input";
      case Tok::String: return "a string";
      case Tok::Label: return "'%" + t.text + "'";
      case Tok::Hex: return "'0x" + t.text + "'";
      default: return "'" + t.text + "'";
    }
  }

  Token advance() {
    Token t = std::move(tok_);
    tok_ = lex_.next();
    return t;
  }
  bool is_punct(char c) const { return tok_.kind == Tok::Punct && tok_.text[0] == c; }
  bool is_word(std::string_view w) const { return tok_.kind == Tok::Ident && tok_.text == w; }
  bool accept(char c) {
    if (!is_punct(c)) return false;
    advance();
    return true;
  }
  void expect(char c) {
    if (!accept(c)) error(std::string("expected '") + c + "', found " + describe(tok_));
  }
  Token expect_kind(Tok k, const char* what) {
    if (tok_.kind != k) error(std::string("expected ") + what + ", found " + describe(tok_));
    return advance();
  }
  // The current token (an identifier or a string) as a symbol's name: the verifier's rule that
  // a symbol has a name, checked here where the name's place is known.
  Token symbol_name() {
    if (tok_.kind == Tok::String && tok_.text.empty()) error("empty symbol name");
    return advance();
  }
  void expect_word(std::string_view w) {
    if (!is_word(w)) error("expected '" + std::string(w) + "', found " + describe(tok_));
    advance();
  }

  int64_t parse_int(const char* what) {
    Token t = expect_kind(Tok::Int, what);
    int64_t v = 0;
    auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (r.ec != std::errc() || r.ptr != t.text.data() + t.text.size()) error_at(t, "integer " + t.text + " is out of range");
    return v;
  }

  double parse_double() {
    bool neg = false;
    if (tok_.kind == Tok::Minus) {
      advance();
      neg = true;
    }
    Token t = advance();
    double v = 0;
    if (t.kind == Tok::Ident && (t.text == "inf" || t.text == "nan")) {
      v = t.text == "inf" ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
    } else if (t.kind == Tok::Int || t.kind == Tok::Float) {
      auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
      if (r.ec != std::errc() || r.ptr != t.text.data() + t.text.size()) error_at(t, "bad number " + t.text);
    } else {
      error_at(t, "expected a number, found " + describe(t));
    }
    return neg ? -v : v;
  }

  DType parse_dtype() {
    Token t = expect_kind(Tok::Ident, "a dtype");
    auto d = dtype_from_name(t.text);
    if (!d) error_at(t, "unknown dtype '" + t.text + "'");
    return *d;
  }

  template <class E> E parse_enum_value(const char* what) {
    Token t = expect_kind(Tok::Ident, what);
    E e{};
    if (!parse_enum(t.text, e)) error_at(t, std::string("unknown ") + what + " '" + t.text + "'");
    return e;
  }

  Blob parse_blob() {
    Token t = expect_kind(Tok::Hex, "hex bytes (0x...)");
    if (t.text.size() % 2) error_at(t, "hex bytes need an even number of digits");
    std::vector<uint8_t> bytes(t.text.size() / 2);
    for (size_t i = 0; i < bytes.size(); ++i) {
      auto r = std::from_chars(t.text.data() + 2 * i, t.text.data() + 2 * i + 2, bytes[i], 16);
      if (r.ec != std::errc()) error_at(t, "bad hex digits");
    }
    return Blob(std::move(bytes));
  }

  std::vector<FusedOp> parse_program() {
    std::vector<FusedOp> prog;
    expect('[');
    while (!is_punct(']')) {
      if (!prog.empty()) expect(',');
      Token name = expect_kind(Tok::Ident, "an op name");
      FusedOp op;
      if (!ir::op_from_name(name.text, op.kind)) error_at(name, "unknown op '" + name.text + "'");
      expect('(');
      while (!is_punct(')')) {
        if (!op.args.empty()) expect(',');
        Token at = tok_;
        int64_t a = parse_int("an operand index");
        if (a < 0 || a > std::numeric_limits<int32_t>::max()) error_at(at, "operand index out of range");
        op.args.push_back(int32_t(a));
      }
      expect(')');
      if (accept('{')) {
        bool first = true;
        while (!is_punct('}')) {
          if (!first) expect(',');
          first = false;
          Token key = expect_kind(Tok::Ident, "alpha or beta");
          expect('=');
          if (key.text == "alpha") op.alpha = parse_double();
          else if (key.text == "beta") op.beta = parse_double();
          else error_at(key, "a program instruction has only alpha and beta, not '" + key.text + "'");
        }
        expect('}');
      }
      expect(':');
      op.type = parse_dtype();
      prog.push_back(std::move(op));
    }
    expect(']');
    return prog;
  }

  void parse_field(const FieldRef& f) {
    std::visit(
        [&](auto* p) {
          using T = std::decay_t<decltype(*p)>;
          if constexpr (std::is_same_v<T, int64_t>) *p = parse_int("an integer");
          else if constexpr (std::is_same_v<T, double>) *p = parse_double();
          else if constexpr (std::is_same_v<T, bool>) {
            Token t = expect_kind(Tok::Ident, "true or false");
            if (t.text != "true" && t.text != "false") error_at(t, "expected true or false, found " + describe(t));
            *p = t.text == "true";
          } else if constexpr (std::is_same_v<T, DType>) *p = parse_dtype();
          else if constexpr (std::is_same_v<T, Activation>) *p = parse_enum_value<Activation>("activation");
          else if constexpr (std::is_same_v<T, PadMode>) *p = parse_enum_value<PadMode>("pad mode");
          else if constexpr (std::is_same_v<T, std::string>) *p = expect_kind(Tok::String, "a string").text;
          else if constexpr (std::is_same_v<T, Blob>) *p = parse_blob();
          else if constexpr (std::is_same_v<T, std::vector<FusedOp>>) *p = parse_program();
          else {  // integer or double lists
            p->clear();
            expect('[');
            while (!is_punct(']')) {
              if (!p->empty()) expect(',');
              if constexpr (std::is_same_v<T, std::vector<int64_t>>) p->push_back(parse_int("an integer"));
              else p->push_back(parse_double());
            }
            expect(']');
          }
        },
        f);
  }

  void parse_attrs(Attrs& attrs, OpKind kind, bool leaf_named) {
    auto fields = fields_of(attrs);
    std::unordered_set<std::string> seen;
    bool first = true;
    while (!is_punct('}')) {
      if (!first) expect(',');
      first = false;
      Token key = expect_kind(Tok::Ident, "an attribute name");
      const Field* field = nullptr;
      for (const auto& f : fields)
        if (f.name == key.text) field = &f;
      if (!field || (leaf_named && key.text == "name"))
        error_at(key, "op " + std::string(op_name(kind)) + " has no attribute '" + key.text + "'");
      if (!seen.insert(key.text).second) error_at(key, "attribute '" + key.text + "' given twice");
      expect('=');
      parse_field(field->ref);
    }
    expect('}');
  }

  Shape parse_type(Graph& g) {
    Token start = tok_;
    DType dt = parse_dtype();
    std::vector<Dim> dims;
    expect('[');
    while (!is_punct(']')) {
      if (!dims.empty()) expect(',');
      if (tok_.kind == Tok::Int) {
        Token at = tok_;
        int64_t d = parse_int("a dim");
        if (d < 0) error_at(at, "negative dim " + at.text);
        dims.emplace_back(d);
      } else if (tok_.kind == Tok::Ident || tok_.kind == Tok::String) {
        dims.push_back(Dim::symbol(g.symbol(symbol_name().text)));
      } else {
        error("expected a dim (integer or symbol name), found " + describe(tok_));
      }
    }
    expect(']');
    try {
      return Shape(std::move(dims), dt);
    } catch (const Error& e) {
      error_at(start, e.what());
    }
  }

  // One scope of value labels per graph (nested bodies have their own).
  struct Scope {
    std::unordered_map<std::string, int32_t> labels;
    std::unordered_set<std::string> names;
  };

  Value parse_value(const Graph& g, const Scope& sc) {
    if (is_word("_")) {
      advance();
      return Value{};
    }
    Token t = expect_kind(Tok::Label, "a value (%label or _)");
    auto it = sc.labels.find(t.text);
    if (it == sc.labels.end()) error_at(t, "value '%" + t.text + "' is not defined before this use");
    Value v{it->second, 0};
    if (accept('.')) {
      Token at = tok_;
      int64_t o = parse_int("an output index");
      if (o < 0 || size_t(o) >= g.nodes()[size_t(v.node)].outputs.size())
        error_at(at, "'%" + t.text + "' has no output " + at.text);
      v.out = int32_t(o);
    }
    return v;
  }

  void parse_node(Graph& g, Scope& sc) {
    Token label = advance();
    if (sc.labels.count(label.text)) error_at(label, "value '%" + label.text + "' is defined twice");
    int64_t count = -1;
    if (accept(':')) {
      Token at = tok_;
      count = parse_int("an output count");
      if (count < 0) error_at(at, "negative output count");
    }
    expect('=');
    Token op = expect_kind(Tok::Ident, "an op name");
    Node n;
    if (!ir::op_from_name(op.text, n.kind)) error_at(op, "unknown op '" + op.text + "'");
    n.attrs = default_attrs(n.kind);
    bool leaf = ir::has_trait(n.kind, ir::kLeaf);
    bool leaf_named = n.kind == OpKind::Input || n.kind == OpKind::Param;
    std::string auto_name = op.text + "_" + std::to_string(g.nodes().size());
    if (leaf_named) {
      Token pub = expect_kind(Tok::String, "the public name (a string)");
      auto_name = pub.text;
      // Public names identify inputs and params at run time: each at most once (the verifier's rule).
      if ((n.kind == OpKind::Input ? g.find_input(auto_name) : g.find_param(auto_name)) >= 0)
        error_at(pub, std::string(op.text) + " name \"" + auto_name + "\" is used twice");
      std::get<LeafAttrs>(n.attrs).name = auto_name;
    }
    if (!leaf) {
      expect('(');
      while (!is_punct(')')) {
        if (!n.inputs.empty()) expect(',');
        n.inputs.push_back(parse_value(g, sc));
      }
      expect(')');
    }
    if (accept('{')) parse_attrs(n.attrs, n.kind, leaf_named);
    Token name_tok = tok_;
    if (is_word("name")) {
      advance();
      expect('=');
      n.name = expect_kind(Tok::String, "a node name (string)").text;
      if (n.name.empty()) error_at(name_tok, "empty node name");
      if (sc.names.count(n.name)) error_at(name_tok, "node name \"" + n.name + "\" is used twice");
    } else {
      n.name = auto_name;
    }
    Token type_tok = tok_;
    std::vector<Shape> printed;
    bool typed = accept(':');
    if (typed) {
      type_tok = tok_;
      do printed.push_back(parse_type(g));
      while (accept(','));
    }
    while (is_word("graph")) n.subgraphs.push_back(std::make_shared<Graph>(graph()));
    std::vector<Shape> inferred;
    if (leaf) {
      if (printed.size() != 1) error_at(type_tok, std::string("a ") + op.text + " needs exactly one type");
      n.outputs = printed;
    }
    try {
      std::vector<const Shape*> in;
      for (const Value& v : n.inputs) in.push_back(v.valid() ? &g.type(v) : nullptr);
      inferred = ir::infer_outputs(n, in);
    } catch (const Error& e) {
      error_at(op, e.what());
    }
    if (typed && printed != inferred) {
      std::string a, b;
      for (const auto& s : printed) a += (a.empty() ? "" : ", ") + s.str();
      for (const auto& s : inferred) b += (b.empty() ? "" : ", ") + s.str();
      error_at(type_tok, "printed type " + a + " does not match the inferred " + b);
    }
    if (count >= 0 && size_t(count) != inferred.size())
      error_at(label, "declares " + std::to_string(count) + " outputs but the op has " + std::to_string(inferred.size()));
    n.outputs = std::move(inferred);
    int32_t id = g.append_node(std::move(n));
    sc.labels.emplace(label.text, id);
    sc.names.insert(g.nodes()[size_t(id)].name);
  }

  void parse_outputs(Graph& g, const Scope& sc) {
    advance();
    expect('(');
    std::vector<GraphOutput> outs;
    std::unordered_set<std::string> names;
    while (!is_punct(')')) {
      if (!outs.empty()) expect(',');
      Token at = tok_;
      GraphOutput o;
      o.value = parse_value(g, sc);
      if (!o.value.valid()) error_at(at, "a graph output cannot be absent");
      if (is_word("as")) {
        advance();
        o.name = expect_kind(Tok::String, "an output name (string)").text;
        if (o.name.empty()) error_at(at, "empty output name");
      } else {
        const Node& n = g.nodes()[size_t(o.value.node)];
        o.name = n.outputs.size() == 1 ? n.name : n.name + ":" + std::to_string(o.value.out);
      }
      if (!names.insert(o.name).second) error_at(at, "output name \"" + o.name + "\" is used twice");
      outs.push_back(std::move(o));
    }
    expect(')');
    g.set_outputs_raw(std::move(outs));
  }

  Graph graph() {
    // Bodies nest by recursion; a bound keeps hostile input from exhausting the stack.
    if (++depth_ > kMaxDepth) error("graphs are nested more than " + std::to_string(kMaxDepth) + " deep");
    expect_word("graph");
    std::string name;
    if (tok_.kind == Tok::Ident || tok_.kind == Tok::String) name = advance().text;
    else error("expected a graph name, found " + describe(tok_));
    Graph g(name);
    Scope sc;
    expect('{');
    if (is_word("symbols")) {
      advance();
      expect('(');
      while (!is_punct(')')) {
        if (!g.symbols().empty()) expect(',');
        if (tok_.kind != Tok::Ident && tok_.kind != Tok::String) error("expected a symbol name, found " + describe(tok_));
        Token s = symbol_name();
        size_t before = g.symbols().size();
        g.symbol(s.text);
        if (g.symbols().size() == before) error_at(s, "symbol '" + s.text + "' declared twice");
      }
      expect(')');
    }
    bool have_outputs = false;
    while (!is_punct('}')) {
      if (tok_.kind == Tok::Label) {
        if (have_outputs) error("nodes must come before outputs(...)");
        parse_node(g, sc);
      } else if (is_word("outputs")) {
        if (have_outputs) error("outputs(...) given twice");
        have_outputs = true;
        parse_outputs(g, sc);
      } else {
        error("expected a node (%label = ...), outputs(...) or '}', found " + describe(tok_));
      }
    }
    expect('}');
    --depth_;
    return g;
  }

  static constexpr int kMaxDepth = 64;
  Lexer lex_;
  Token tok_;
  int depth_ = 0;
};

}  // namespace

Graph parse_graph(std::string_view text, std::string_view source) {
  return detail::guard("parsing graph text", [&] { return Parser(text, source).parse_top(); });
}

}  // namespace rlx
