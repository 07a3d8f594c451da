// rlx bench FILE [--threads N] [--input NAME=FILE.npy ...] [--shape NAME=D0,D1,...] [--runs N]
// Compiles once, runs `--warmup` untimed runs, then `--runs` timed runs, and prints
//   rlx p50_ms=X p90_ms=Y runs=N threads=T first_ms=F
// (p50/p90 as element floor(q * N) of the sorted run times, the same quantiles as
// bench/models/ort_run.js; first_ms: import + compile + first run). Inputs not given are
// filled deterministically: floating-point elements from a 32-bit LCG seeded with 1 per
// tensor (state = state * 1664525 + 1013904223, value (state >> 8) / 2^24, in [0, 1);
// bench/models/make_input.js writes the same values), integers and bools 0. Their dims
// come from the model, from --shape, or from --bind for symbolic dims; --save-inputs DIR
// writes each generated input as DIR/NAME.npy.
// .onnx files run through onnx::OnnxRunner (dynamic input shapes); other formats through
// load_model + Session::compile.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <thread>

#include "cli.h"
#include "runtime/npy.h"

#ifdef RLX_HAVE_ONNX
#include "rlx/onnx.h"
#endif

namespace rlx::cli {

namespace {

struct InputDecl {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> dims;             // -1: not known
  std::vector<std::string> dim_names;    // symbol name per dim ("" when none)
};

std::string dims_str(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

// The deterministic fill described at the top of this file, for input `name`; refused when it
// would take more than `cap` bytes (the compile's memory cap: max_arena_bytes, or the machine's
// memory), before anything is allocated.
TypedTensor generated_input(const std::string& name, DType dtype, const std::vector<int64_t>& dims, int64_t cap) {
  const int64_t n = Shape(dims, dtype).numel();  // checked: the tensor can exist
  if (n > cap / dtype_size(dtype))
    fail(ErrorCategory::ResourceExhausted, "input '", name, "' (", dtype_name(dtype), dims_str(dims), ") would take ", n,
         " x ", dtype_size(dtype), " bytes to generate, more than the memory cap of ", cap,
         " bytes (the machine's memory, or RLX_MAX_ARENA_BYTES)");
  TypedTensor t{dtype, dims, std::vector<uint8_t>(size_t(n) * dtype_size(dtype), 0)};
  if (!is_float(dtype) && !is_complex(dtype)) return t;  // integers and bools: 0
  uint32_t state = 1;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return float(state >> 8) * (1.0f / 16777216.0f);
  };
  const int64_t lanes = is_complex(dtype) ? 2 * n : n;
  for (int64_t i = 0; i < lanes; ++i) {
    float v = next();
    uint8_t* p = t.bytes.data();
    switch (dtype) {
      case DType::F32: case DType::C64: std::memcpy(p + 4 * i, &v, 4); break;
      case DType::F64: case DType::C128: { double d = v; std::memcpy(p + 8 * i, &d, 8); break; }
      case DType::F16: { uint16_t h = f32_to_f16(v); std::memcpy(p + 2 * i, &h, 2); break; }
      case DType::BF16: { uint16_t h = f32_to_bf16(v); std::memcpy(p + 2 * i, &h, 2); break; }
      default: break;
    }
  }
  return t;
}

void save_input(const std::string& dir, const std::string& name, const TypedTensor& t) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail(ErrorCategory::Io, "cannot create directory '", dir, "': ", ec.message());
  std::string stem;  // input names may hold '/' or ':'; keep the file inside `dir`
  for (char c : name) stem += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') ? c : '_';
  if (stem.empty() || stem == "." || stem == "..") stem = "input";
  runtime::write_npy((std::filesystem::path(dir) / (stem + ".npy")).string(), t);
}

// Inputs from --input files, the rest generated; dims of generated inputs from --shape,
// then the declared dims with symbols resolved through --bind.
std::map<std::string, TypedTensor> gather_inputs(const Args& args, const std::vector<InputDecl>& decls,
                                                 const CompileOptions& opts) {
  std::map<std::string, TypedTensor> given;
  for (const std::string& a : args.all("--input")) {
    auto [name, file] = split_assignment(a, "--input");
    if (given.count(name)) throw UsageError("--input '" + name + "' given twice");
    given[name] = runtime::read_npy(file);
  }
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const std::string& a : args.all("--shape")) {
    auto [name, text] = split_assignment(a, "--shape");
    shapes[name] = parse_dims(text, "--shape " + name);
  }
  // A misspelt name first: it is why an input would be missing its dims or be generated below.
  auto declared = [&](const std::string& name) {
    return std::any_of(decls.begin(), decls.end(), [&](const InputDecl& d) { return d.name == name; });
  };
  for (const auto& [name, t] : given)
    if (!declared(name)) throw UsageError("--input '" + name + "': the model has no such input");
  for (const auto& [name, dims] : shapes)
    if (!declared(name)) throw UsageError("--shape '" + name + "': the model has no such input");
  const int64_t cap = effective_memory_cap(apply_env(opts));  // what one generated input may take
  std::map<std::string, TypedTensor> inputs;
  for (const InputDecl& d : decls) {
    if (auto it = given.find(d.name); it != given.end()) {
      inputs[d.name] = std::move(it->second);
      given.erase(it);
      std::cout << "input " << d.name << ": " << dtype_name(inputs[d.name].dtype)
                << dims_str(inputs[d.name].dims) << " from file\n";
      continue;
    }
    std::vector<int64_t> dims = d.dims;
    if (auto it = shapes.find(d.name); it != shapes.end()) dims = it->second;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] >= 0) continue;
      const std::string& sym = i < d.dim_names.size() ? d.dim_names[i] : "";
      auto b = sym.empty() ? opts.dim_bindings.end() : opts.dim_bindings.find(sym);
      if (b == opts.dim_bindings.end())
        throw UsageError("input '" + d.name + "' has a dynamic dim " + std::to_string(i) +
                         (sym.empty() ? "" : " ('" + sym + "')") +
                         ": give --input " + d.name + "=FILE.npy, --shape " + d.name +
                         "=D0,D1,... or --bind SYM=SIZE");
      dims[i] = b->second;
    }
    inputs[d.name] = generated_input(d.name, d.dtype, dims, cap);
    std::cout << "input " << d.name << ": " << dtype_name(d.dtype) << dims_str(dims) << " generated\n";
    if (args.has("--save-inputs")) save_input(args.get("--save-inputs"), d.name, inputs[d.name]);
  }
  return inputs;
}

struct Timing {
  double first_ms = 0, p50 = 0, p90 = 0;
  int runs = 0;
};

// first(): compile + first run; again(): one warm run.
Timing measure(const std::function<void()>& first, const std::function<void()>& again, int warmup, int runs) {
  using clock = std::chrono::steady_clock;
  Timing t;
  auto t0 = clock::now();
  first();
  t.first_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  for (int i = 0; i < warmup; ++i) again();
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    auto a = clock::now();
    again();
    ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - a).count());
  }
  std::sort(ms.begin(), ms.end());
  auto q = [&](double p) { return ms[std::min(ms.size() - 1, size_t(p * double(ms.size())))]; };
  t.p50 = q(0.5);
  t.p90 = q(0.9);
  t.runs = runs;
  return t;
}

// --resident: the inputs bound once as handles (on a device backend they stay in device
// memory) and no output read back, so a timed run is run() and its one wait.
void bind_resident(CompiledGraph& net, const std::map<std::string, TypedTensor>& inputs) {
  for (const auto& [name, v] : inputs) net.bind_handle(name, v);
}
void run_resident(CompiledGraph& net) { net.run_read_outputs({}, {}); }

}  // namespace

int cmd_bench(const Args& args) {
  const std::string& path = args.positional[0];
  const int runs = int(integer(args, "--runs", 50, 1, 1 << 30));
  const int warmup = int(integer(args, "--warmup", 3, 0, 1 << 30));
  const CompileOptions opts = compile_options_from(args);
  const Device device = device_named(args.get("--device", "cpu"), "--device");
  Timing t;
  int threads = 0;

  const bool is_onnx = path.size() >= 5 && path.compare(path.size() - 5, 5, ".onnx") == 0;
  if (is_onnx) {
#ifndef RLX_HAVE_ONNX
    fail(ErrorCategory::Unsupported, "'", path, "': this rlx was built without the ONNX importer");
#else
    if (args.has("--param")) throw UsageError("--param is not supported for .onnx models (weights come from the file)");
    onnx::OnnxModel model = onnx::load_onnx(path);
    std::vector<InputDecl> decls;
    for (const onnx::OnnxValueInfo& v : model.inputs) {
      if (!v.is_tensor) fail(ErrorCategory::Unsupported, "'", path, "': input '", v.name, "' is not a tensor");
      decls.push_back({v.name, v.dtype, v.dims, v.dim_params});
    }
    onnx::OnnxRunner runner(std::move(model), Session(device, opts));
    const std::map<std::string, TypedTensor> inputs = gather_inputs(args, decls, opts);
    if (args.has("--resident")) {
      std::map<std::string, std::vector<int64_t>> shapes;
      for (const auto& [name, v] : inputs) shapes[name] = v.dims;
      std::shared_ptr<CompiledGraph> net;
      t = measure([&] {
            net = runner.compiled(shapes);
            bind_resident(*net, inputs);
            run_resident(*net);
          },
          [&] { run_resident(*net); }, warmup, runs);
    } else {
      t = measure([&] { runner.run(inputs); }, [&] { runner.run(inputs); }, warmup, runs);
    }
    // As Session resolves it (asking the runner would compile again for by-value inputs).
    const CompileOptions effective = apply_env(opts);
    threads = device != Device::Cpu ? 1
              : effective.threads > 0 ? effective.threads
                                      : int(std::max(1u, std::thread::hardware_concurrency()));
#endif
  } else {
    CompileOptions loaded = opts;  // what the loader leaves to bind
    Graph g = load_model(path, loaded);
    std::vector<InputDecl> decls;
    for (int32_t id : g.input_nodes()) {
      const Node& n = g.node(id);
      const Shape& s = n.outputs.at(0);
      InputDecl d{n.name, s.dtype(), {}, {}};
      for (const Dim& dim : s.dims()) {
        d.dims.push_back(dim.is_static() ? dim.value() : -1);
        d.dim_names.push_back(dim.is_static() ? "" : g.symbols().at(size_t(dim.symbol_id())));
      }
      decls.push_back(std::move(d));
    }
    const std::map<std::string, TypedTensor> inputs = gather_inputs(args, decls, opts);
    // Symbols not bound by --bind take their sizes from the inputs (given or --shape).
    CompileOptions bound = loaded;
    bind_symbols_from_inputs(g, inputs, bound);
    CompiledGraph net;
    const bool resident = args.has("--resident");
    t = measure([&] {
          net = Session(device, bound).compile(std::move(g));
          set_params_from_args(net, args);
          if (resident) bind_resident(net, inputs);
          if (resident) run_resident(net);
          else net.run_typed(inputs);
        },
        [&] {
          if (resident) run_resident(net);
          else net.run_typed(inputs);
        },
        warmup, runs);
    threads = net.capabilities().threads;
  }
  std::printf("rlx p50_ms=%.3f p90_ms=%.3f runs=%d threads=%d first_ms=%.1f\n", t.p50, t.p90, t.runs, threads,
              t.first_ms);
  return 0;
}

Command bench_command() {
  Command c{"bench", "time warm runs of a model: p50/p90 latency in ms (inputs not given are generated)",
            "FILE [--input NAME=FILE.npy ...] [--runs N] [options]", 1, 1, compile_option_specs(), &cmd_bench};
  c.options.insert(c.options.begin(),
                   {{"--input", "NAME=FILE.npy", "feed input NAME from FILE.npy", true},
                    {"--param", "NAME=FILE.npy", "set param NAME from FILE.npy (.rlx models)", true},
                    {"--device", "cpu|cuda", "the backend (default cpu; times on cuda include the input and output copies unless --resident)", false},
                    {"--resident", "", "bind the inputs once (they stay on the device) and read no output: times run() alone", false},
                    {"--shape", "NAME=D0,D1,...", "dims of a generated input ('scalar' for rank 0)", true},
                    {"--runs", "N", "timed runs (default 50)", false},
                    {"--warmup", "N", "untimed runs after the first (default 3)", false},
                    {"--save-inputs", "DIR", "write each generated input as DIR/NAME.npy", false}});
  return c;
}

}  // namespace rlx::cli
