// The string ops, run on the host (HostEval): string constants, Cast / CastLike to and
// from strings, Equal on strings, StringNormalizer (ICU case mapping), StringConcat,
// StringSplit, RegexFullMatch (RE2, the syntax the op specifies) and ai.onnx.ml
// LabelEncoder over any key and value types.
#include <unicode/locid.h>
#include <unicode/unistr.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "io/onnx/host_eval.h"

#ifdef RLX_HAVE_RE2
#include <re2/re2.h>
#endif

namespace rlx::onnx {

namespace {

OnnxValue bools(std::vector<int64_t> dims, const std::vector<bool>& v) {
  std::vector<uint8_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = v[i] ? 1 : 0;
  return OnnxValue::of(TypedTensor{DType::Bool, std::move(dims), std::move(b)}, kBool);
}

// ---- Constant

std::vector<OnnxValue> constant(HostNode& h) {
  if (const auto* a = h.attr("value"); a && a->has_t())
    return {decode_value(a->t(), h.ev.source().base_dir, "attribute 'value' of " + h.where())};
  if (const auto* a = h.attr("value_string")) return {OnnxValue::of_strings({}, {a->s()})};
  auto s = h.attr_strings("value_strings");
  const int64_t n = int64_t(s.size());
  return {OnnxValue::of_strings({n}, std::move(s))};
}

// ---- Cast

std::string number_text(const uint8_t* p, DType d) {
  double v = read_scalar(p, d);
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "INF" : "-INF";
  char buf[64];
  std::to_chars_result r;
  if (d == DType::I64) {
    int64_t x;
    std::memcpy(&x, p, 8);
    r = std::to_chars(buf, buf + sizeof buf, x);
  } else if (is_integer(d) || d == DType::Bool) {
    r = std::to_chars(buf, buf + sizeof buf, int64_t(v));
  } else if (d == DType::F64) {
    r = std::to_chars(buf, buf + sizeof buf, v);  // shortest text that reads back to the same value
  } else {
    r = std::to_chars(buf, buf + sizeof buf, float(v));
  }
  return std::string(buf, r.ptr);
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

// Cast's float -> integer rule: truncate toward zero, NaN -> 0, saturate to int64 (checked
// as a double first: converting past int64's range is undefined); then wrap to the type.
int64_t cast_to_int(double v) {
  if (!(v == v)) return 0;
  if (v >= 9223372036854775807.0) return std::numeric_limits<int64_t>::max();
  if (v <= -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return int64_t(v);
}

void store_int(uint8_t* p, DType t, int64_t x) {
  switch (t) {
    case DType::Bool: *p = x != 0; break;
    case DType::I8: case DType::U8: *p = uint8_t(uint64_t(x)); break;
    case DType::I16: { uint16_t v = uint16_t(uint64_t(x)); std::memcpy(p, &v, 2); break; }
    case DType::I32: case DType::U32: { uint32_t v = uint32_t(uint64_t(x)); std::memcpy(p, &v, 4); break; }
    default: std::memcpy(p, &x, 8); break;
  }
}

double parse_number(const HostNode& h, const std::string& s) {
  std::string_view t(s);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front()))) t.remove_prefix(1);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.remove_suffix(1);
  if (iequals(t, "INF") || iequals(t, "+INF")) return std::numeric_limits<double>::infinity();
  if (iequals(t, "-INF")) return -std::numeric_limits<double>::infinity();
  if (iequals(t, "NaN")) return std::numeric_limits<double>::quiet_NaN();
  if (!t.empty() && t.front() == '+') t.remove_prefix(1);
  double v = 0;
  auto r = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || r.ec != std::errc() || r.ptr != t.data() + t.size())
    h.invalid("cannot cast '", s, "' to a number");
  return v;
}

OnnxValue cast_strings(const HostNode& h, const OnnxValue& x, int to) {
  if (x.is_string()) {
    if (to == kString) return x;
    auto dt = carried_dtype(to);
    if (!dt) h.unsupported("cast of strings to ", onnx_type_name(to));
    const int64_t n = int64_t(x.strings.size());
    std::vector<uint8_t> b(size_t(n) * dtype_size(*dt));
    for (int64_t i = 0; i < n; ++i) {
      const std::string& s = x.strings[size_t(i)];
      uint8_t* p = b.data() + size_t(i) * dtype_size(*dt);
      if (*dt == DType::I64) {  // integers exactly where the text is one
        int64_t v = 0;
        auto r = std::from_chars(s.data(), s.data() + s.size(), v);
        if (r.ec == std::errc() && r.ptr == s.data() + s.size()) {
          std::memcpy(p, &v, 8);
          continue;
        }
      }
      double v = parse_number(h, s);
      if (is_integer(*dt) || *dt == DType::Bool) {
        store_int(p, *dt, cast_to_int(v));
        continue;
      }
      if (is_minifloat(to)) v = round_to_minifloat(float(v), to, h.attr_int("saturate", 1) != 0);
      write_scalar(p, *dt, v);
    }
    return OnnxValue::of(TypedTensor{*dt, x.tensor.dims, std::move(b)}, to);
  }
  if (to != kString) h.invalid("not a cast to or from strings");
  const size_t es = dtype_size(x.tensor.dtype);
  std::vector<std::string> s;
  for (size_t i = 0; i * es < x.tensor.bytes.size(); ++i) s.push_back(number_text(x.tensor.bytes.data() + i * es, x.tensor.dtype));
  return OnnxValue::of_strings(x.tensor.dims, std::move(s));
}

int cast_to(const HostNode& h) {
  const auto* a = h.attr("to");
  if (!a) h.invalid("attribute 'to' is required");
  if (a->type() == pb::AttributeProto::STRING) {
    if (auto t = onnx_type_named(a->s())) return *t;
    h.invalid("'to' names no ONNX type: '", a->s(), "'");
  }
  return int(a->i());
}

std::vector<OnnxValue> cast(HostNode& h) { return {cast_strings(h, h.tensor(0), cast_to(h))}; }
std::vector<OnnxValue> cast_like(HostNode& h) { return {cast_strings(h, h.tensor(0), h.tensor(1).onnx_type)}; }

// ---- Equal, StringConcat (broadcasting)

template <class F>
void broadcast2(const HostNode& h, const OnnxValue& a, const OnnxValue& b, std::vector<int64_t>& out, F&& f) {
  out = broadcast_dims(a.tensor.dims, b.tensor.dims, "ONNX " + h.where());
  int64_t n = checked_numel(out, "ONNX " + h.where());
  for (int64_t i = 0; i < n; ++i)
    f(a.strings[size_t(broadcast_index(i, out, a.tensor.dims))], b.strings[size_t(broadcast_index(i, out, b.tensor.dims))]);
}

std::vector<OnnxValue> equal(HostNode& h) {
  const OnnxValue &a = h.strings(0), &b = h.strings(1);
  std::vector<int64_t> dims;
  std::vector<bool> r;
  broadcast2(h, a, b, dims, [&](const std::string& x, const std::string& y) { r.push_back(x == y); });
  return {bools(std::move(dims), r)};
}

std::vector<OnnxValue> string_concat(HostNode& h) {
  const OnnxValue &a = h.strings(0), &b = h.strings(1);
  std::vector<int64_t> dims;
  std::vector<std::string> r;
  broadcast2(h, a, b, dims, [&](const std::string& x, const std::string& y) { r.push_back(x + y); });
  return {OnnxValue::of_strings(std::move(dims), std::move(r))};
}

// ---- StringNormalizer

std::string change_case(const std::string& s, const std::string& action, const icu::Locale& loc) {
  if (action == "NONE") return s;
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(s);
  if (action == "LOWER") u.toLower(loc);
  else u.toUpper(loc);
  std::string out;
  u.toUTF8String(out);
  return out;
}

std::vector<OnnxValue> string_normalizer(HostNode& h) {
  const OnnxValue& x = h.strings(0);
  const auto& d = x.tensor.dims;
  const bool two = d.size() == 2;
  if (!(d.size() == 1 || (two && d[0] == 1))) h.invalid("input must be [C] or [1, C], got ", x.describe());
  const std::string action = h.attr_str("case_change_action", "NONE");
  if (action != "NONE" && action != "LOWER" && action != "UPPER") h.invalid("unknown case_change_action '", action, "'");
  const bool sensitive = h.attr_int("is_case_sensitive", 0) != 0;
  const std::string locale = h.attr_str("locale", "en_US");
  icu::Locale loc(locale.c_str());
  if (loc.isBogus()) h.invalid("unknown locale '", locale, "'");
  std::set<std::string> stop;
  for (const auto& w : h.attr_strings("stopwords")) stop.insert(sensitive ? w : change_case(w, "LOWER", loc));
  std::vector<std::string> kept;
  for (const auto& s : x.strings)
    if (!stop.count(sensitive ? s : change_case(s, "LOWER", loc))) kept.push_back(change_case(s, action, loc));
  if (kept.empty()) kept.emplace_back();  // all removed: one empty string
  const int64_t c = int64_t(kept.size());
  return {OnnxValue::of_strings(two ? std::vector<int64_t>{1, c} : std::vector<int64_t>{c}, std::move(kept))};
}

// ---- StringSplit

// Python's str.split: on runs of whitespace (no delimiter) or on each delimiter, at most
// `maxsplit` splits (negative: no limit).
std::vector<std::string> split(const std::string& s, const std::string& delim, int64_t maxsplit) {
  std::vector<std::string> out;
  if (delim.empty()) {
    size_t i = 0;
    auto space = [&](size_t k) { return std::isspace(static_cast<unsigned char>(s[k])) != 0; };
    while (i < s.size()) {
      while (i < s.size() && space(i)) ++i;
      if (i == s.size()) break;
      if (maxsplit >= 0 && int64_t(out.size()) == maxsplit) {
        size_t e = s.size();
        while (e > i && space(e - 1)) --e;
        out.push_back(s.substr(i, e - i));
        break;
      }
      size_t j = i;
      while (j < s.size() && !space(j)) ++j;
      out.push_back(s.substr(i, j - i));
      i = j;
    }
    return out;
  }
  size_t i = 0;
  for (;;) {
    size_t j = s.find(delim, i);
    if (j == std::string::npos || (maxsplit >= 0 && int64_t(out.size()) == maxsplit)) {
      out.push_back(s.substr(i));
      return out;
    }
    out.push_back(s.substr(i, j - i));
    i = j + delim.size();
  }
}

std::vector<OnnxValue> string_split(HostNode& h) {
  const OnnxValue& x = h.strings(0);
  const std::string delim = h.attr_str("delimiter", "");
  const auto* m = h.attr("maxsplit");
  const int64_t maxsplit = m ? m->i() : -1;
  std::vector<std::vector<std::string>> parts;
  size_t width = 0;
  for (const auto& s : x.strings) {
    parts.push_back(split(s, delim, maxsplit));
    width = std::max(width, parts.back().size());
  }
  std::vector<std::string> flat;
  std::vector<uint8_t> counts(parts.size() * 8);
  for (size_t i = 0; i < parts.size(); ++i) {
    int64_t n = int64_t(parts[i].size());
    std::memcpy(counts.data() + i * 8, &n, 8);
    for (size_t k = 0; k < width; ++k) flat.push_back(k < parts[i].size() ? std::move(parts[i][k]) : std::string());
  }
  std::vector<int64_t> yd = x.tensor.dims;
  yd.push_back(int64_t(width));
  return {OnnxValue::of_strings(std::move(yd), std::move(flat)),
          OnnxValue::of(TypedTensor{DType::I64, x.tensor.dims, std::move(counts)}, kInt64)};
}

// ---- RegexFullMatch

std::vector<OnnxValue> regex_full_match(HostNode& h) {
  const OnnxValue& x = h.strings(0);
  const std::string pattern = h.attr_str("pattern", "");
#ifdef RLX_HAVE_RE2
  RE2::Options o;
  o.set_log_errors(false);
  RE2 re(pattern, o);
  if (!re.ok()) h.invalid("pattern '", pattern, "' is not a valid RE2 expression: ", re.error());
  std::vector<bool> r;
  for (const auto& s : x.strings) r.push_back(RE2::FullMatch(s, re));
  return {bools(x.tensor.dims, r)};
#else
  (void)x;
  h.unsupported("this build has no RE2 (install libre2-dev and rebuild) for pattern '", pattern, "'");
#endif
}

// ---- LabelEncoder (ai.onnx.ml)

// Keys, values and defaults as one-dimensional values of their type: from the list
// attributes (`<what>_strings`, `_int64s`, `_floats`) or `<what>_tensor`.
OnnxValue attr_list(const HostNode& h, const std::string& what) {
  if (const auto* a = h.attr((what + "_tensor").c_str()); a && a->has_t())
    return decode_value(a->t(), h.ev.source().base_dir, "attribute '" + what + "_tensor' of " + h.where());
  if (const auto* a = h.attr((what + "_strings").c_str()))
    return OnnxValue::of_strings({a->strings_size()}, {a->strings().begin(), a->strings().end()});
  if (const auto* a = h.attr((what + "_int64s").c_str())) {
    std::vector<int64_t> v(a->ints().begin(), a->ints().end());
    return from_host(make_i64({int64_t(v.size())}, v));
  }
  if (const auto* a = h.attr((what + "_floats").c_str())) {
    std::vector<double> v(a->floats().begin(), a->floats().end());
    return from_host(make_tensor(DType::F32, {int64_t(v.size())}, v));
  }
  return OnnxValue::of_strings({0}, {});
}

// Element i as a lookup key: strings by their bytes, numbers by value (NaN equal to NaN).
std::string key_of(const OnnxValue& v, size_t i) {
  if (v.is_string()) return "s" + v.strings[i];
  double x = read_scalar(v.tensor.bytes.data() + i * dtype_size(v.tensor.dtype), v.tensor.dtype);
  if (std::isnan(x)) return "nan";
  if (is_integer(v.tensor.dtype)) {
    int64_t k = 0;
    std::memcpy(&k, v.tensor.bytes.data() + i * dtype_size(v.tensor.dtype), std::min<size_t>(8, dtype_size(v.tensor.dtype)));
    return "n" + number_text(v.tensor.bytes.data() + i * dtype_size(v.tensor.dtype), v.tensor.dtype);
  }
  if (x == 0) x = 0;  // -0 and +0 are one key
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, x);
  return "n" + std::string(buf, r.ptr);
}

std::vector<OnnxValue> label_encoder(HostNode& h) {
  const OnnxValue& x = h.tensor(0);
  const OnnxValue keys = attr_list(h, "keys"), values = attr_list(h, "values");
  const size_t nk = keys.is_string() ? keys.strings.size() : size_t(checked_numel(keys.tensor.dims, "keys"));
  const size_t nv = values.is_string() ? values.strings.size() : size_t(checked_numel(values.tensor.dims, "values"));
  if (!nk || nk != nv) h.invalid(nk, " keys and ", nv, " values: both must be given, one value per key");
  if (keys.is_string() != x.is_string()) h.invalid("keys are ", keys.describe(), ", the input is ", x.describe());
  // The default: default_tensor (one element) or the list type's scalar default.
  OnnxValue def;
  if (const auto* a = h.attr("default_tensor"); a && a->has_t()) {
    def = decode_value(a->t(), h.ev.source().base_dir, "attribute 'default_tensor' of " + h.where());
  } else if (values.is_string()) {
    def = OnnxValue::of_strings({1}, {h.attr_str("default_string", "_Unused")});
  } else if (values.onnx_type == kInt64) {
    def = from_host(make_i64({1}, {h.attr_int("default_int64", -1)}));
  } else {
    const auto* a = h.attr("default_float");
    def = from_host(make_tensor(DType::F32, {1}, {a ? double(a->f()) : -0.0}));
  }
  if (def.onnx_type != values.onnx_type) h.invalid("the default is ", def.describe(), ", the values ", values.describe());
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < nk; ++i) index.emplace(key_of(keys, i), i);
  const size_t n = x.is_string() ? x.strings.size() : size_t(checked_numel(x.tensor.dims, "input"));
  if (values.is_string()) {
    std::vector<std::string> out;
    for (size_t i = 0; i < n; ++i) {
      auto it = index.find(key_of(x, i));
      out.push_back(it == index.end() ? def.strings.at(0) : values.strings[it->second]);
    }
    return {OnnxValue::of_strings(x.tensor.dims, std::move(out))};
  }
  const size_t es = dtype_size(values.tensor.dtype);
  if (def.tensor.bytes.size() < es) h.invalid("the default holds no value");
  std::vector<uint8_t> out(n * es);
  for (size_t i = 0; i < n; ++i) {
    auto it = index.find(key_of(x, i));
    const uint8_t* src = it == index.end() ? def.tensor.bytes.data() : values.tensor.bytes.data() + it->second * es;
    std::memcpy(out.data() + i * es, src, es);
  }
  return {OnnxValue::of(TypedTensor{values.tensor.dtype, x.tensor.dims, std::move(out)}, values.onnx_type)};
}

// ---- ops that move, select or measure elements, on strings

// Every string input replaced by the indices of its elements in one table (i64, the same
// dims), the node folded by its own lowering, and each output of a moving op mapped back
// through the table (the shape queries' outputs are numbers already).
std::vector<OnnxValue> by_index(HostNode& h, bool moves) {
  if (h.attr_str("reduction", "none") != "none") h.unsupported("a scatter reduction over strings");
  std::vector<std::string> table;
  std::map<std::string, OnnxValue> replace;
  for (size_t i = 0; i < h.in.size(); ++i) {
    const OnnxValue* v = h.in[i];
    const std::string& name = h.node.input(int(i));
    if (!v || !v->is_string() || replace.count(name)) continue;
    std::vector<int64_t> idx(v->strings.size());
    for (size_t k = 0; k < idx.size(); ++k) idx[k] = int64_t(table.size() + k);
    table.insert(table.end(), v->strings.begin(), v->strings.end());
    replace.emplace(name, from_host(make_i64(v->tensor.dims, idx)));
  }
  std::vector<OnnxValue> outs = h.ev.fold_with(h.node, h.scope, std::move(replace));
  if (!moves) return outs;
  for (int o = 0; o < h.node.output_size() && size_t(o) < outs.size(); ++o) {
    OnnxValue& v = outs[size_t(o)];
    if (h.node.output(o).empty()) continue;
    if (!v.is_numeric() || v.tensor.dtype != DType::I64) h.invalid("output ", o, " is not an element of the strings");
    std::vector<std::string> s;
    for (int64_t k : tensor_to_i64(to_host(v, "output"))) {
      if (k < 0 || k >= int64_t(table.size())) h.invalid("output ", o, " holds an element that is not one of the strings");
      s.push_back(table[size_t(k)]);
    }
    v = OnnxValue::of_strings(v.tensor.dims, std::move(s));
  }
  return outs;
}

std::vector<OnnxValue> moved_strings(HostNode& h) { return by_index(h, true); }
std::vector<OnnxValue> string_shape(HostNode& h) { return by_index(h, false); }

bool moves_elements(const std::string& op) {
  static const std::set<std::string> ops = {
      "Gather", "GatherElements", "GatherND", "Reshape", "Transpose", "Concat", "Slice", "Squeeze", "Unsqueeze",
      "Flatten", "Expand", "Tile", "Split", "Compress", "Where", "ReverseSequence", "DepthToSpace", "SpaceToDepth",
      "ScatterElements", "ScatterND", "Scatter"};
  return ops.count(op) > 0;
}

bool has_string_attr(const pb::NodeProto& n) {
  for (const auto& a : n.attribute())
    if (a.name() == "value_string" || a.name() == "value_strings" || (a.has_t() && a.t().data_type() == kString))
      return true;
  return false;
}

}  // namespace

HostFn string_op(const pb::NodeProto& n, const std::vector<const OnnxValue*>& in) {
  bool strings = false;
  for (const OnnxValue* v : in) strings = strings || (v && v->is_string());
  const std::string& op = n.op_type();
  if (n.domain() == "ai.onnx.ml") return op == "LabelEncoder" ? label_encoder : nullptr;
  if (!is_default_domain(n.domain())) return nullptr;
  if (op == "StringNormalizer") return string_normalizer;
  if (op == "StringConcat") return string_concat;
  if (op == "StringSplit") return string_split;
  if (op == "RegexFullMatch") return regex_full_match;
  if (op == "Constant" && has_string_attr(n)) return constant;
  if (op == "Equal" && strings) return equal;
  if (op == "CastLike" && strings) return cast_like;
  if (op == "Cast") {
    bool to_string = false;
    for (const auto& a : n.attribute())
      if (a.name() == "to") to_string = a.i() == kString || iequals(a.s(), "STRING");
    if (strings || to_string) return cast;
  }
  if (strings && moves_elements(op)) return moved_strings;
  if (strings && (op == "Shape" || op == "Size")) return string_shape;
  return nullptr;
}

}  // namespace rlx::onnx
