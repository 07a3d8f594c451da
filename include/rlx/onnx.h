// ONNX import. load_onnx parses a model (protobuf; external data resolved next to the
// model, bounds-checked) and imports it into an rlx::Graph. Shape arithmetic (Shape ->
// Gather -> Concat -> Reshape, ...) is folded while importing, so a model imported with
// concrete input shapes is a static graph. OnnxRunner hides dynamic shapes: it imports
// and compiles once per distinct set of input shapes (compile cache) and runs typed I/O.
//
// ONNX element types without an rlx dtype are carried widened at the I/O boundary:
// uint16 -> i32, uint64 -> i64, float8/float4 -> f32, int4/int2 -> i8, uint4/uint2 -> u8.
// Errors: Error(Parse) naming the file for malformed or truncated models,
// Error(Unsupported) naming op, node and opset for ops outside the op table,
// Error(Shape) for input shapes that do not fit the model.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rlx/compiled_graph.h"

namespace rlx::onnx {

struct ModelSource;  // the parsed protobuf (opaque)

// What an ONNX value is: a tensor (numeric or string), a sequence of values, an optional
// value, or a map (maps are not supported).
enum class ValueKind { Tensor, Sequence, Optional, Map };

struct OnnxValueInfo {
  std::string name;
  ValueKind kind = ValueKind::Tensor;
  int onnx_type = 0;             // TensorProto.DataType code (0: not a tensor / unknown)
  DType dtype = DType::F32;      // the rlx dtype it is carried as
  std::vector<int64_t> dims;     // -1: symbolic or unknown
  std::vector<std::string> dim_params;  // symbol name per dim ("" when static)
  bool is_tensor = true;         // false: sequence / optional / map (see kind)
};

// A value at a model's boundary of any kind the runner carries (OnnxRunner::run_values):
// - Tensor, numeric: `tensor` holds it in the dtype it is carried as; onnx_type its ONNX type.
// - Tensor of strings (onnx_type 8): `tensor.dims` the shape, `strings` the elements in
//   row-major order (tensor.bytes empty).
// - Sequence: `items` its elements (tensors or sequences); onnx_type the element type when
//   known (an empty sequence keeps it), else 0.
// - Optional: `items` empty (no value) or holding the one value; onnx_type as for sequences.
struct OnnxValue {
  ValueKind kind = ValueKind::Tensor;
  int onnx_type = 0;
  TypedTensor tensor;
  std::vector<std::string> strings;
  std::vector<OnnxValue> items;

  static OnnxValue of(TypedTensor t, int onnx_type = 0);  // onnx_type 0: the dtype's own
  static OnnxValue of_strings(std::vector<int64_t> dims, std::vector<std::string> strings);
  static OnnxValue sequence(std::vector<OnnxValue> items, int elem_type = 0);
  static OnnxValue optional(std::optional<OnnxValue> v, int elem_type = 0);
  bool is_string() const { return kind == ValueKind::Tensor && onnx_type == 8; }
  // A numeric tensor (what OnnxRunner::run carries).
  bool is_numeric() const { return kind == ValueKind::Tensor && onnx_type != 8; }
  // "f32[2,3]", "string[4]", "sequence(3 x f32[..])", "optional(none)", ...
  std::string describe() const;
};

struct ImportOptions {
  bool weights_as_params = false;    // float initializers >= param_min_elements become params
  int64_t param_min_elements = 1024;
  int64_t fold_max_elements = int64_t(1) << 22;  // eager folding limit per output
  // Work one node run on the host may do (OnnxRunner: strings, sequences, optionals, Loop
  // bodies interpreted there), in element operations (each node evaluated counts 1024 -- its
  // fixed cost, dispatch and for folded ops a kernel build, is that of moving about a
  // thousand elements -- plus the elements and sequence items it outputs); past it,
  // Error(ResourceExhausted).
  int64_t host_work_limit = int64_t(1) << 36;
};

struct OnnxModel {
  std::string path;
  int64_t ir_version = 0, opset = 0;  // opset of the default domain
  std::vector<OnnxValueInfo> inputs;  // graph inputs that are not initializers
  std::vector<OnnxValueInfo> outputs;
  // Imported with the declared input shapes (symbolic dims become graph symbols).
  // Empty, with `dynamic_reason` set, when the model needs concrete shapes to import.
  Graph graph;
  bool has_graph = false;
  std::string dynamic_reason;
  std::shared_ptr<const ModelSource> source;
};

OnnxModel load_onnx(const std::string& path, const ImportOptions& opts = {});
// `name` is used in messages; external data is looked up under `base_dir`.
OnnxModel load_onnx_bytes(const void* data, size_t size, const std::string& name = "<bytes>",
                          const std::string& base_dir = "", const ImportOptions& opts = {});
// Imports with the given concrete input dims (inputs not listed keep their declared dims).
// Inputs named in `values` are bound to those values as constants (they are then not
// inputs of the graph): for models that compute shapes from input values.
Graph import_graph(const OnnxModel& model, const std::map<std::string, std::vector<int64_t>>& shapes,
                   const ImportOptions& opts = {}, const std::map<std::string, TypedTensor>& values = {});

// Compiles per concrete input shapes (cache key: the bound input dims) and runs. When
// the model needs a graph input's value at compile time (a shape or axes fed as an
// input), small inputs are bound by value too and their values join the cache key.
// The cache keeps the 32 most recently used compiled graphs; compiled() hands out shared
// ownership, so a graph a caller holds stays valid after the cache evicts it.
// A model with a node whose output shape depends on input values (NonZero, Unique,
// NonMaxSuppression, ...; or a shape input the model computes from data) runs in
// segments: each compiled segment runs, the node is evaluated on the host, and the rest is
// compiled for the shapes (or values) that came out, cached per segment.
// compiled() / compiled_for() refuse such a model (Unsupported, naming the node): use run().
// The runner's copy of the model keeps no graph (model().graph is empty; has_graph still
// tells whether the model imported with its declared shapes): weights are held by the
// compiled graphs that read them, and a weight the CPU backend repacked (and released) is
// read again from the model file if a later import needs it.
// Threading: like CompiledGraph, one OnnxRunner is used from one thread at a time (run()
// updates the cache and runs a cached graph); give each thread its own runner.
class OnnxRunner {
 public:
  explicit OnnxRunner(OnnxModel model, Session session = Session(Device::Cpu), ImportOptions opts = {});
  ~OnnxRunner();
  OnnxRunner(OnnxRunner&&) noexcept;
  // Inputs by name, in the dtype each input is carried as (OnnxValueInfo::dtype; other
  // real dtypes are converted). Outputs in model output order.
  // A model with string, sequence or optional inputs or outputs runs through run_values.
  std::vector<TypedTensor> run(const std::map<std::string, TypedTensor>& inputs);
  // Inputs and outputs of any kind. Nodes that read or make strings, sequences or
  // optionals run on the host between compiled segments (like the nodes whose output
  // shapes depend on values); everything else compiles as usual.
  std::vector<OnnxValue> run_values(const std::map<std::string, OnnxValue>& inputs);
  // The compiled graph for these input shapes (the most recently used one when inputs
  // were bound by value); compiles without values when there is none.
  std::shared_ptr<CompiledGraph> compiled(const std::map<std::string, std::vector<int64_t>>& shapes);
  // Same, with the inputs in `values` bound by value.
  std::shared_ptr<CompiledGraph> compiled_for(const std::map<std::string, std::vector<int64_t>>& shapes,
                              const std::map<std::string, TypedTensor>& values);
  size_t cache_size() const;
  const OnnxModel& model() const;

 private:
  std::vector<OnnxValue> run_unguarded(const std::map<std::string, OnnxValue>& inputs);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlx::onnx
