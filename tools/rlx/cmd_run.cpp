// rlx run FILE --input NAME=FILE.npy ... --output-dir DIR: one .npy per output.
// ONNX models also take and give string tensors (NumPy '<U' arrays); a sequence output is
// written as one file per item (STEM_0.npy, STEM_1.npy, ...), an optional as its value
// (no file when it holds none).
#include <filesystem>
#include <iostream>
#include <set>

#include "cli.h"
#include "runtime/npy.h"
#ifdef RLX_HAVE_ONNX
#include "rlx/onnx.h"
#endif

namespace rlx::cli {

namespace {
// Output names may hold characters a file name should not ("/", ":"): keep
// [A-Za-z0-9._-], replace the rest by '_', and never produce "." or "..".
std::string file_stem(const std::string& name) {
  std::string s;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '_' || c == '-';
    s += ok ? c : '_';
  }
  if (s.empty() || s == "." || s == "..") s = "output";
  return s;
}
}  // namespace

#ifdef RLX_HAVE_ONNX
// One output of an ONNX model, flattened to the files it is written as: a file stem suffix
// and the tensor (numeric or strings) it holds.
struct OutFile {
  std::string suffix;
  const onnx::OnnxValue* value;
};
void flatten(const onnx::OnnxValue& v, const std::string& suffix, std::vector<OutFile>& out) {
  if (v.kind == onnx::ValueKind::Sequence) {
    for (size_t i = 0; i < v.items.size(); ++i) flatten(v.items[i], suffix + "_" + std::to_string(i), out);
    return;
  }
  if (v.kind == onnx::ValueKind::Optional) {
    if (!v.items.empty()) flatten(v.items[0], suffix, out);
    return;
  }
  if (v.kind != onnx::ValueKind::Tensor)
    fail(ErrorCategory::Unsupported, "an output of kind '", v.describe(), "' cannot be written as .npy");
  out.push_back(OutFile{suffix, &v});
}

// Strings, sequences or optionals at the boundary: runs through run_values and writes each
// output (flattened by `flatten`) as .npy files.
void run_values_to_files(onnx::OnnxRunner& runner, std::map<std::string, TypedTensor> inputs,
                         std::map<std::string, runtime::NpyStrings> text_inputs, const std::filesystem::path& dir) {
  std::map<std::string, onnx::OnnxValue> values;
  for (auto& [name, t] : inputs) values[name] = onnx::OnnxValue::of(std::move(t));
  for (auto& [name, s] : text_inputs) values[name] = onnx::OnnxValue::of_strings(s.dims, std::move(s.strings));
  const std::vector<onnx::OnnxValue> results = runner.run_values(values);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail(ErrorCategory::Io, "cannot create output directory '", dir.string(), "': ", ec.message());
  std::set<std::string> used;
  for (size_t i = 0; i < results.size(); ++i) {
    const std::string& name = runner.model().outputs.at(i).name;
    std::vector<OutFile> files;
    flatten(results[i], "", files);
    if (files.empty()) std::cout << "no value for " << name << " (" << results[i].describe() << ")\n";
    for (const OutFile& f : files) {
      std::string stem = file_stem(name) + f.suffix;
      for (int k = 1; used.count(stem); ++k) stem = file_stem(name) + f.suffix + "_" + std::to_string(k);
      used.insert(stem);
      const std::filesystem::path file = dir / (stem + ".npy");
      if (f.value->is_string()) runtime::write_npy_strings(file.string(), {f.value->tensor.dims, f.value->strings});
      else runtime::write_npy(file.string(), f.value->tensor);
      std::cout << "wrote " << file.string() << " (" << name << f.suffix << ": " << f.value->describe() << ")\n";
    }
  }
}
#endif

int cmd_run(const Args& args) {
  if (!args.has("--output-dir")) throw UsageError("'rlx run' needs --output-dir DIR");
  const std::string& path = args.positional[0];
  const bool is_onnx = std::filesystem::path(path).extension() == ".onnx";
  std::map<std::string, TypedTensor> inputs;
  std::map<std::string, runtime::NpyStrings> text_inputs;
  for (const std::string& a : args.all("--input")) {
    auto [name, file] = split_assignment(a, "--input");
    if (inputs.count(name) || text_inputs.count(name)) throw UsageError("--input '" + name + "' given twice");
    runtime::NpyArray arr = runtime::read_npy_any(file);
    if (!arr.is_strings) inputs[name] = std::move(arr.tensor);
    else if (is_onnx) text_inputs[name] = std::move(arr.text);
    else fail(ErrorCategory::Unsupported, "--input '", name, "': '", file, "' holds strings; only ONNX models take them");
  }
  const Device device = device_named(args.get("--device", "cpu"), "--device");
  std::vector<TypedTensor> outs;
  std::vector<std::string> names, types;
  if (is_onnx) {
#ifdef RLX_HAVE_ONNX
    // ONNX models may have symbolic dims: the runner compiles per concrete input shapes.
    if (args.has("--param")) throw UsageError("--param is not supported for .onnx models (weights come from the file)");
    onnx::OnnxRunner runner(onnx::load_onnx(path), Session(device, compile_options_from(args)));
    bool numeric = text_inputs.empty();
    for (const auto& o : runner.model().outputs)
      numeric = numeric && o.kind == onnx::ValueKind::Tensor && o.onnx_type != 8;
    if (numeric) {  // the plain path: no copies of the outputs into values
      outs = runner.run(inputs);
      for (size_t i = 0; i < outs.size(); ++i) {
        names.push_back(runner.model().outputs.at(i).name);
        types.push_back(std::string(dtype_name(outs[i].dtype)));
      }
    } else {
      run_values_to_files(runner, std::move(inputs), std::move(text_inputs), args.get("--output-dir"));
      return 0;
    }
#else
    fail(ErrorCategory::Unsupported, "this rlx was built without the ONNX importer");
#endif
  } else {
    CompileOptions opts = compile_options_from(args);
    Graph g = load_model(path, opts);
    bind_symbols_from_inputs(g, inputs, opts);  // symbols --bind leaves open: from the .npy files' dims
    CompiledGraph net = Session(device, opts).compile(std::move(g));
    set_params_from_args(net, args);
    outs = net.run_typed(inputs);
    names = net.output_names();
    for (size_t i = 0; i < outs.size(); ++i) types.push_back(net.output_type(int(i)).str());
  }

  const std::filesystem::path dir = args.get("--output-dir");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail(ErrorCategory::Io, "cannot create output directory '", dir.string(), "': ", ec.message());
  std::set<std::string> used;
  for (size_t i = 0; i < outs.size(); ++i) {
    std::string stem = file_stem(names[i]);
    for (int k = 1; used.count(stem); ++k) stem = file_stem(names[i]) + "_" + std::to_string(k);
    used.insert(stem);
    const std::filesystem::path file = dir / (stem + ".npy");
    runtime::write_npy(file.string(), outs[i]);
    std::cout << "wrote " << file.string() << " (" << names[i] << ": " << types[i] << ")\n";
  }
  return 0;
}

}  // namespace rlx::cli
