// The `rlx` command line: a table of commands, a small argument parser, and a table of
// model formats chosen by file extension. A new command (test-onnx, bench, ...) is one
// entry in commands() plus its handler file; a new model format (.onnx, .gguf) is one
// entry in model_formats(). The CLI stays thin: it parses flags and calls the library.
#pragma once
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "rlx/rlx.h"

namespace rlx::cli {

// Bad command-line use: printed as one "rlx: error: ..." line, exit status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct OptionSpec {
  std::string name;        // "--input"
  std::string value;       // placeholder for the value ("NAME=FILE.npy"); empty: a flag
  std::string help;
  bool repeatable = false;
};

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> values;  // option -> values given, in order
  bool has(const std::string& opt) const { return values.count(opt) > 0; }
  // The single value of `opt`, or `fallback` when absent.
  std::string get(const std::string& opt, const std::string& fallback = "") const;
  const std::vector<std::string>& all(const std::string& opt) const;
};

struct Command {
  std::string name;
  std::string summary;                 // one line for `rlx --help`
  std::string usage;                   // e.g. "FILE.rlx [options]"
  int min_positional = 0, max_positional = 0;
  std::vector<OptionSpec> options;
  int (*run)(const Args& args) = nullptr;
};

const std::vector<Command>& commands();
const Command* find_command(const std::string& name);
// Parses argv[first..argc) against `cmd`; throws UsageError naming the bad argument.
Args parse_args(const Command& cmd, int argc, char** argv, int first);
std::string command_help(const Command& cmd);

// Model files by extension.
// `opts` carries --bind: an importer that needs concrete dims to import (ONNX models whose
// shape arithmetic depends on symbolic input dims) resolves them through it and removes the
// bindings it used, so that compiling the graph it returns does not look for those symbols.
using InputDims = std::map<std::string, std::vector<int64_t>>;
struct ModelFormat {
  std::string extension;    // ".rlx"
  std::string description;
  // input_dims: sizes for named inputs, used where the file leaves a dim symbolic or unknown
  // (a static dim must equal the size given).
  Graph (*load)(const std::string& path, CompileOptions& opts, const InputDims& input_dims) = nullptr;
};
const std::vector<ModelFormat>& model_formats();
// "Model formats: .rlx (rlx text IR), .onnx (ONNX model)" for --help texts.
std::string model_formats_line();
// Loads by extension; throws Error(Unsupported) naming the known extensions.
Graph load_model(const std::string& path, CompileOptions& opts, const InputDims& input_dims = {});

// --param NAME=FILE.npy ...: each file's dtype converts to the param's, its dims must equal
// the param's dims (a transposed weight is an error, not a silently wrong result). A name
// that is no param of `net` is an error, or skipped with only_its_own (a graph holding part
// of the model, as rlx diff's nodes run alone).
void set_params_from_args(CompiledGraph& net, const Args& args, bool only_its_own = false);

// Options shared by compiling commands: --threads, --precision, --bind, --no-fuse.
std::vector<OptionSpec> compile_option_specs();
CompileOptions compile_options_from(const Args& args);

// Binds each symbolic dim of `g`'s inputs that `opts.dim_bindings` leaves open to its size in
// the input given for it (`inputs`, by name; inputs not given are skipped): a tensor of the
// wrong rank, or one that gives a symbol another size than --bind or an earlier input did, is
// a UsageError naming the input.
void bind_symbols_from_inputs(const Graph& g, const std::map<std::string, TypedTensor>& inputs, CompileOptions& opts);

// The value of `opt` as a number in [lo, hi] (`dflt` when absent); UsageError naming it otherwise.
double number(const Args& a, const std::string& opt, double dflt, double lo, double hi);
// `s` as a whole decimal number in [lo, hi] into `v` (the one integer parser of the CLI's
// options); false, `v` unchanged, for anything else ("2.5", "1e3", "", overflow).
bool whole_number(const std::string& s, int64_t lo, int64_t hi, int64_t& v);
// The value of `opt` as a whole number in [lo, hi] (`dflt` when absent), parsed exactly ("2.5"
// and "1e3" are refused); UsageError naming it otherwise.
int64_t integer(const Args& a, const std::string& opt, int64_t dflt, int64_t lo, int64_t hi);
// The same for an unsigned 64-bit value in [0, 2^64 - 1] (a sampler's seed).
uint64_t unsigned_integer(const Args& a, const std::string& opt, uint64_t dflt);
// A device name ("cpu", "cuda") given to `opt`; UsageError naming both otherwise.
Device device_named(const std::string& name, const std::string& opt);

// "name=value" -> {name, value}; throws UsageError naming `opt`.
std::pair<std::string, std::string> split_assignment(const std::string& s, const std::string& opt);
// An integer in [lo, 2^40]; UsageError naming `what` otherwise.
int64_t positive_int(const std::string& s, const std::string& what, int64_t lo);
// "D0,D1,..." (or "scalar": no dims) as sizes >= 0; UsageError naming `what` otherwise.
std::vector<int64_t> parse_dims(const std::string& text, const std::string& what);

// Command handlers (one file each).
int cmd_check(const Args& args);
int cmd_run(const Args& args);
int cmd_diff(const Args& args);  // tools/rlx/cmd_diff.cpp
Command bench_command();  // tools/rlx/cmd_bench.cpp
int cmd_test_onnx(const Args& args);            // tools/rlx/cmd_test_onnx.cpp
std::vector<OptionSpec> test_onnx_option_specs();
Command onnx_coverage_command();  // tools/rlx/cmd_onnx_coverage.cpp (ONNX builds only)
std::vector<Command> gguf_commands();  // tools/rlx/cmd_gguf.cpp: inspect, quantize
std::vector<Command> generate_commands();  // tools/rlx/cmd_generate.cpp: generate, tokenize

}  // namespace rlx::cli
