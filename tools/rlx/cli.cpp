// The command table, argument parsing, model formats and shared compile options.
#include "cli.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <set>
#include <sstream>

#include "opt/pipeline.h"
#include "opt/rewrite.h"
#include "runtime/npy.h"
#ifdef RLX_HAVE_ONNX
#include "rlx/onnx.h"
#endif

namespace rlx::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> table = [] {
    std::vector<Command> t;
    {
      Command c{"check", "parse, verify and compile a model; print the dispatch report, pass log and memory plan",
                "FILE [options]", 1, 1, compile_option_specs(), &cmd_check};
      c.options.push_back({"--device", "cpu|cuda", "the backend to compile for (default cpu)", false});
      c.options.push_back({"--verbose", "", "the whole fusion report (every rewrite, every miss and why)", false});
      t.push_back(std::move(c));
    }
    {
      Command c{"run", "run a model on .npy inputs and write one .npy per output",
                "FILE --input NAME=FILE.npy ... --output-dir DIR [options]", 1, 1,
                compile_option_specs(), &cmd_run};
      c.options.insert(c.options.begin(),
                       {{"--input", "NAME=FILE.npy", "feed input NAME from FILE.npy", true},
                        {"--param", "NAME=FILE.npy", "set param NAME from FILE.npy", true},
                        {"--output-dir", "DIR", "directory for the outputs (created if missing)", false},
                        {"--device", "cpu|cuda", "the backend (default cpu)", false}});
      t.push_back(std::move(c));
    }
    {
      Command c{"diff", "run a model on two devices or two precisions; name the first node whose output diverges",
                "FILE (--devices A,B | --precision P,Q) [options]", 1, 1, compile_option_specs(), &cmd_diff};
      for (OptionSpec& o : c.options)
        if (o.name == "--precision") o = {"--precision", "P,Q", "compare two precision policies (f32, tf32, f16, bf16) on one device", false};
      c.options.insert(c.options.begin(),
                       {{"--devices", "A,B", "compare two backends (cpu, cuda) at one precision", false},
                        {"--input", "NAME=FILE.npy", "feed input NAME from FILE.npy (others: seeded random)", true},
                        {"--param", "NAME=FILE.npy", "set param NAME from FILE.npy", true},
                        {"--rtol", "R", "relative tolerance (default 1e-4; 1e-2 with a half precision)", false},
                        {"--atol", "A", "absolute tolerance (default 1e-5; 1e-2 with a half precision)", false},
                        {"--shape", "NAME=D0,D1,...", "dims of a generated input ('scalar' for rank 0; its symbols take them)", true},
                        {"--seed", "S", "seed of the generated inputs (default 1)", false},
                        {"--alone", "N", "run up to N diverging nodes alone, fed the first side's inputs, to find the first that diverges by itself (default 64; 0 off)", false}});
      t.push_back(std::move(c));
    }
    t.push_back(bench_command());
    {
      Command c{"test-onnx", "run ONNX backend test cases; one PASS/FAIL/SKIP line each, then a summary",
                "PATH... [options]", 1, 1 << 20, test_onnx_option_specs(), &cmd_test_onnx};
      t.push_back(std::move(c));
    }
#ifdef RLX_HAVE_ONNX
    t.push_back(onnx_coverage_command());
#endif
    for (Command& c : gguf_commands()) t.push_back(std::move(c));
    for (Command& c : generate_commands()) t.push_back(std::move(c));
    return t;
  }();
  return table;
}

const Command* find_command(const std::string& name) {
  for (const Command& c : commands())
    if (c.name == name) return &c;
  return nullptr;
}

std::string Args::get(const std::string& opt, const std::string& fallback) const {
  auto it = values.find(opt);
  return it == values.end() || it->second.empty() ? fallback : it->second.back();
}

const std::vector<std::string>& Args::all(const std::string& opt) const {
  static const std::vector<std::string> none;
  auto it = values.find(opt);
  return it == values.end() ? none : it->second;
}

Args parse_args(const Command& cmd, int argc, char** argv, int first) {
  Args a;
  for (int i = first; i < argc; ++i) {
    std::string s = argv[i];
    if (s.size() > 1 && s[0] == '-') {
      std::string name = s, value;
      bool inline_value = false;
      if (auto eq = s.find('='); eq != std::string::npos && s.rfind("--", 0) == 0) {
        name = s.substr(0, eq);
        value = s.substr(eq + 1);
        inline_value = true;
      }
      const OptionSpec* spec = nullptr;
      for (const OptionSpec& o : cmd.options)
        if (o.name == name) spec = &o;
      if (!spec) throw UsageError("unknown option '" + name + "' for 'rlx " + cmd.name + "' (see rlx " + cmd.name + " --help)");
      if (spec->value.empty()) {
        if (inline_value) throw UsageError("option '" + name + "' takes no value");
        a.values[name].push_back("1");
        continue;
      }
      if (!inline_value) {
        if (i + 1 >= argc) throw UsageError("option '" + name + "' needs a value (" + spec->value + ")");
        value = argv[++i];
      }
      if (!spec->repeatable && a.has(name)) throw UsageError("option '" + name + "' given twice");
      a.values[name].push_back(value);
      continue;
    }
    a.positional.push_back(s);
  }
  if (int(a.positional.size()) < cmd.min_positional)
    throw UsageError("'rlx " + cmd.name + "' needs a model FILE (see rlx " + cmd.name + " --help)");
  if (int(a.positional.size()) > cmd.max_positional)
    throw UsageError("unexpected argument '" + a.positional[size_t(cmd.max_positional)] + "' for 'rlx " + cmd.name + "'");
  return a;
}

std::string command_help(const Command& cmd) {
  std::string s = "usage: rlx " + cmd.name + " " + cmd.usage + "\n\n" + cmd.summary + "\n";
  if (cmd.name == "check" || cmd.name == "run" || cmd.name == "bench" || cmd.name == "diff")
    s += "\n" + model_formats_line() + "\n";
  if (cmd.name == "check" || cmd.name == "run" || cmd.name == "diff") s += "Inputs and params (--input, --param): .npy files.\n";
  if (cmd.name == "test-onnx")
    s += "\nPATH: an ONNX backend test case (a directory holding model.onnx and test_data_set_N/ with\n"
         "input_K.pb / output_K.pb TensorProto files) or a directory of such cases.\n";
  if (!cmd.options.empty()) s += "\nOptions:\n";
  for (const OptionSpec& o : cmd.options) {
    std::string left = "  " + o.name + (o.value.empty() ? "" : " " + o.value);
    if (left.size() < 28) left.append(28 - left.size(), ' ');
    else left += "  ";
    s += left + o.help + (o.repeatable ? " (repeatable)" : "") + "\n";
  }
  return s;
}

// ---------------------------------------------------------------- model formats

namespace {
// Every name in `dims` must be one of `inputs`.
void check_input_names(const InputDims& dims, const std::vector<std::string>& inputs, const std::string& path) {
  for (const auto& [name, d] : dims)
    if (std::find(inputs.begin(), inputs.end(), name) == inputs.end()) {
      std::string known;
      for (const std::string& i : inputs) known += (known.empty() ? "" : ", ") + i;
      fail(ErrorCategory::InvalidArgument, "'", path, "': the model has no input '", name, "' (inputs: ", known, ")");
    }
}

// The dims given for input `name` against its declared ones (-1: symbolic or unknown): the
// same rank, and the static dims equal.
void check_given_dims(const std::string& path, const std::string& name, const std::vector<int64_t>& declared,
                      const std::vector<int64_t>& given) {
  if (given.size() != declared.size())
    fail(ErrorCategory::Shape, "'", path, "': input '", name, "' has ", declared.size(), " dims, ", given.size(),
         " given");
  for (size_t i = 0; i < declared.size(); ++i)
    if (declared[i] >= 0 && declared[i] != given[i])
      fail(ErrorCategory::Shape, "'", path, "': input '", name, "' dim ", i, " is ", declared[i], ", ", given[i],
           " given");
}

// The symbols of each named input's dims bound to the sizes given (its static dims must equal
// them); other inputs keep theirs.
Graph bind_input_dims(Graph g, const InputDims& dims, const std::string& path) {
  std::vector<std::string> names;
  for (const Node& n : g.nodes())
    if (n.kind == OpKind::Input) names.push_back(n.name);
  check_input_names(dims, names, path);
  std::map<std::string, int64_t> bound;
  for (const Node& n : g.nodes()) {
    if (n.kind != OpKind::Input) continue;
    auto it = dims.find(n.name);
    if (it == dims.end()) continue;
    const Shape& s = n.outputs[0];
    std::vector<int64_t> declared;
    for (const Dim& d : s.dims()) declared.push_back(d.is_static() ? d.value() : -1);
    check_given_dims(path, n.name, declared, it->second);
    for (int i = 0; i < s.rank(); ++i) {
      const Dim d = s.dims()[size_t(i)];
      const int64_t v = it->second[size_t(i)];
      if (d.is_static()) continue;
      const std::string& sym = g.symbols()[size_t(d.symbol_id())];
      if (auto b = bound.find(sym); b != bound.end() && b->second != v)
        fail(ErrorCategory::Shape, "'", path, "': input '", n.name, "' dim ", i, " ('", sym, "') given as ", v,
             ", another input gives it ", b->second);
      bound[sym] = v;
    }
  }
  return bound.empty() ? g : opt::bind_dims(g, bound);
}

#ifdef RLX_HAVE_ONNX
// The model imported with its declared input dims, or those given for an input (its whole
// shape); a model that needs concrete dims to import gets the remaining symbolic ones from --bind.
Graph load_onnx_graph(const std::string& path, CompileOptions& opts, const InputDims& input_dims) {
  onnx::OnnxModel m = onnx::load_onnx(path);
  if (m.has_graph) return bind_input_dims(std::move(m.graph), input_dims, path);
  std::vector<std::string> names;
  for (const onnx::OnnxValueInfo& in : m.inputs) names.push_back(in.name);
  check_input_names(input_dims, names, path);
  std::map<std::string, std::vector<int64_t>> shapes;
  std::set<std::string> used;
  for (const onnx::OnnxValueInfo& in : m.inputs) {
    std::vector<int64_t> dims = in.dims;
    if (auto given = input_dims.find(in.name); given != input_dims.end()) {
      check_given_dims(path, in.name, dims, given->second);
      shapes[in.name] = given->second;
      continue;
    }
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] >= 0) continue;
      const std::string sym = i < in.dim_params.size() ? in.dim_params[i] : "";
      auto b = sym.empty() ? opts.dim_bindings.end() : opts.dim_bindings.find(sym);
      if (b == opts.dim_bindings.end())
        fail(ErrorCategory::Shape, "'", path, "': input '", in.name, "' dim ", i,
             sym.empty() ? std::string(" is unknown") : " ('" + sym + "') is symbolic",
             ", and the model needs concrete dims to import (", m.dynamic_reason, ")",
             sym.empty() ? std::string("") : ": bind it with --bind " + sym + "=SIZE");
      dims[i] = b->second;
      used.insert(sym);
    }
    shapes[in.name] = dims;
  }
  Graph g = onnx::import_graph(m, shapes);
  for (const std::string& sym : used) opts.dim_bindings.erase(sym);  // now static in `g`
  return g;
}
#endif
}  // namespace

const std::vector<ModelFormat>& model_formats() {
  static const std::vector<ModelFormat> table = {
      {".rlx", "rlx text IR",
       [](const std::string& path, CompileOptions&, const InputDims& dims) {
         return bind_input_dims(load_graph_file(path), dims, path);
       }},
#ifdef RLX_HAVE_ONNX
      {".onnx", "ONNX model", &load_onnx_graph},
#endif
  };
  return table;
}

std::string model_formats_line() {
  std::string s = "Model formats:";
  for (const ModelFormat& f : model_formats()) s += " " + f.extension + " (" + f.description + ")";
  return s;
}

void set_params_from_args(CompiledGraph& net, const Args& args, bool only_its_own) {
  const std::vector<std::string> own = only_its_own ? net.param_names() : std::vector<std::string>{};
  for (const std::string& a : args.all("--param")) {
    auto [name, file] = split_assignment(a, "--param");
    if (only_its_own && std::find(own.begin(), own.end(), name) == own.end()) continue;
    const Shape want = net.param_type(name);  // names the params when `name` is not one
    TypedTensor t = runtime::read_npy(file);
    if (t.dims != want.static_dims()) {
      std::string have = "[";
      for (size_t i = 0; i < t.dims.size(); ++i) {
        if (i) have += ',';
        have += std::to_string(t.dims[i]);
      }
      fail(ErrorCategory::InvalidArgument, "--param ", name, "=", file, ": the file holds ", dtype_name(t.dtype), have,
           "], param '", name, "' is ", want.str(), " (dims must match exactly)");
    }
    net.set_param_typed(name, t.bytes.data(), t.bytes.size(), t.dtype);
  }
}

Graph load_model(const std::string& path, CompileOptions& opts, const InputDims& input_dims) {
  const std::string ext = std::filesystem::path(path).extension().string();
  std::string known;
  for (const ModelFormat& f : model_formats()) {
    if (f.extension == ext) return f.load(path, opts, input_dims);
    known += (known.empty() ? "" : ", ") + f.extension;
  }
  fail(ErrorCategory::Unsupported, "'", path, "': unknown model file type '", ext, "' (known: ", known, ")");
}

// ---------------------------------------------------------------- compile options

std::vector<OptionSpec> compile_option_specs() {
  return {
      {"--threads", "N", "worker threads (default: all cores; RLX_THREADS overrides)", false},
      {"--precision", "P", "compute precision policy: f32 (default), tf32, f16 or bf16", false},
      {"--bind", "SYM=N", "bind the dynamic dim SYM to size N", true},
      {"--no-fuse", "", "turn off the fusion passes", false},
  };
}

Device device_named(const std::string& name, const std::string& opt) {
  if (name == "cpu") return Device::Cpu;
  if (name == "cuda") return Device::Cuda;
  throw UsageError("option '" + opt + "': '" + name + "' is not cpu or cuda");
}

double number(const Args& a, const std::string& opt, double dflt, double lo, double hi) {
  if (!a.has(opt)) return dflt;
  const std::string s = a.get(opt);
  try {
    size_t used = 0;
    double v = std::stod(s, &used);
    if (used != s.size() || !(v >= lo && v <= hi)) throw std::invalid_argument(s);
    return v;
  } catch (const std::exception&) {
    std::ostringstream os;
    os << "option '" << opt << "': '" << s << "' is not a number in [" << lo << ", " << hi << "]";
    throw UsageError(os.str());
  }
}

void bind_symbols_from_inputs(const Graph& g, const std::map<std::string, TypedTensor>& inputs, CompileOptions& opts) {
  for (int32_t id : g.input_nodes()) {
    const Node& n = g.node(id);
    auto it = inputs.find(n.name);
    if (it == inputs.end()) continue;
    const auto& want = n.outputs.at(0).dims();
    const std::vector<int64_t>& dims = it->second.dims;
    if (dims.size() != want.size())
      throw UsageError("input '" + n.name + "' has rank " + std::to_string(dims.size()) + ", the model expects " +
                       std::to_string(want.size()) + " (" + opt::shape_str(g, n.outputs.at(0)) + ")");
    for (size_t i = 0; i < dims.size(); ++i) {
      if (want[i].is_static()) continue;
      const std::string& sym = g.symbols().at(size_t(want[i].symbol_id()));
      auto [b, fresh] = opts.dim_bindings.emplace(sym, dims[i]);
      if (!fresh && b->second != dims[i])
        throw UsageError("input '" + n.name + "' gives '" + sym + "' = " + std::to_string(dims[i]) +
                         ", but it is already " + std::to_string(b->second));
    }
  }
}

bool whole_number(const std::string& s, int64_t lo, int64_t hi, int64_t& v) {
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno != 0 || x < lo || x > hi) return false;
  v = x;
  return true;
}

int64_t integer(const Args& a, const std::string& opt, int64_t dflt, int64_t lo, int64_t hi) {
  if (!a.has(opt)) return dflt;
  const std::string s = a.get(opt);
  int64_t v = 0;
  if (!whole_number(s, lo, hi, v))
    throw UsageError("option '" + opt + "': '" + s + "' is not an integer in [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]");
  return v;
}

uint64_t unsigned_integer(const Args& a, const std::string& opt, uint64_t dflt) {
  if (!a.has(opt)) return dflt;
  const std::string s = a.get(opt);
  char* end = nullptr;
  errno = 0;
  // strtoull would take "-1" as 2^64 - 1: a sign is refused before it parses.
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (s.empty() || s.find('-') != std::string::npos || *end != '\0' || errno != 0)
    throw UsageError("option '" + opt + "': '" + s + "' is not an integer in [0, " +
                     std::to_string(std::numeric_limits<uint64_t>::max()) + "]");
  return v;
}

int64_t positive_int(const std::string& s, const std::string& what, int64_t lo) {
  int64_t v = 0;
  if (!whole_number(s, lo, int64_t(1) << 40, v))
    throw UsageError(what + " '" + s + "': expected an integer >= " + std::to_string(lo));
  return v;
}

std::vector<int64_t> parse_dims(const std::string& text, const std::string& what) {
  std::vector<int64_t> dims;
  if (text == "scalar") return dims;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    dims.push_back(positive_int(text.substr(start, comma - start), what, 0));
    start = comma + 1;
  }
  return dims;
}

std::pair<std::string, std::string> split_assignment(const std::string& s, const std::string& opt) {
  auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size())
    throw UsageError(opt + " '" + s + "': expected NAME=VALUE");
  return {s.substr(0, eq), s.substr(eq + 1)};
}

namespace {
int64_t parse_int(const std::string& s, const std::string& what, int64_t lo, int64_t hi) {
  int64_t v = 0;
  if (!whole_number(s, lo, hi, v))
    throw UsageError(what + " '" + s + "': expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
  return v;
}
}  // namespace

CompileOptions compile_options_from(const Args& args) {
  CompileOptions o;
  if (args.has("--threads")) o.threads = int(parse_int(args.get("--threads"), "--threads", 1, kMaxThreads));
  if (args.has("--precision")) {
    const std::string p = args.get("--precision");
    if (p == "f32") o.precision = Precision::F32;
    else if (p == "tf32") o.precision = Precision::TF32;
    else if (p == "f16") o.precision = Precision::F16;
    else if (p == "bf16") o.precision = Precision::BF16;
    else throw UsageError("--precision '" + p + "': expected f32, tf32, f16 or bf16");
  }
  for (const std::string& b : args.all("--bind")) {
    auto [sym, n] = split_assignment(b, "--bind");
    o.dim_bindings[sym] = parse_int(n, "--bind " + sym, 0, int64_t(1) << 40);
  }
  if (args.has("--no-fuse")) o.fuse_elementwise = o.fuse_matmul_epilogue = o.fuse_norms = o.fuse_gelu = o.fuse_attention = false;
  return o;
}

}  // namespace rlx::cli
