// rlx run FILE --input NAME=FILE.npy ... --output-dir DIR: one .npy per output.
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

int cmd_run(const Args& args) {
  if (!args.has("--output-dir")) throw UsageError("'rlx run' needs --output-dir DIR");
  const std::string& path = args.positional[0];
  std::map<std::string, TypedTensor> inputs;
  for (const std::string& a : args.all("--input")) {
    auto [name, file] = split_assignment(a, "--input");
    if (inputs.count(name)) throw UsageError("--input '" + name + "' given twice");
    inputs[name] = runtime::read_npy(file);
  }
  const Device device = device_named(args.get("--device", "cpu"), "--device");
  std::vector<TypedTensor> outs;
  std::vector<std::string> names, types;
  if (std::filesystem::path(path).extension() == ".onnx") {
#ifdef RLX_HAVE_ONNX
    // ONNX models may have symbolic dims: the runner compiles per concrete input shapes.
    if (args.has("--param")) throw UsageError("--param is not supported for .onnx models (weights come from the file)");
    onnx::OnnxRunner runner(onnx::load_onnx(path), Session(device, compile_options_from(args)));
    outs = runner.run(inputs);
    for (size_t i = 0; i < outs.size(); ++i) {
      names.push_back(runner.model().outputs.at(i).name);
      types.push_back(std::string(dtype_name(outs[i].dtype)));
    }
#else
    fail(ErrorCategory::Unsupported, "this rlx was built without the ONNX importer");
#endif
  } else {
    CompileOptions opts = compile_options_from(args);
    Graph g = load_model(path, opts);
    CompiledGraph net = Session(device, opts).compile(g);
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
