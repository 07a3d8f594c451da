// Internal: the ONNX protobuf types (Debian's libonnx-dev) and the parsed model.
// `pb` names the protobuf namespace so it never clashes with rlx::onnx.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rlx/attrs.h"
#include "rlx/dtype.h"

// Debian's libonnx-dev is built with ONNX_ML; the rlx_onnx target defines these too.
#ifndef ONNX_ML
#define ONNX_ML 1
#endif
#ifndef ONNX_NAMESPACE
#define ONNX_NAMESPACE onnx
#endif
#include <onnx/onnx-data_pb.h>  // SequenceProto, OptionalProto (test data of non-tensor values)
#include <onnx/onnx_pb.h>

namespace pb = ::onnx;

namespace rlx::onnx {

struct ModelSource {
  // Initializers as imported (carried dtype and bytes), decoded once and shared by every
  // import of the model (each input-shape specialization); their data is then dropped from
  // `model`, so a model's weights are held once, not once in the message and once per graph.
  //
  // Once a compiled program holds what it needs (release_initializers, after each compile),
  // the main graph's entries keep only a weak reference: bytes a backend released (the CPU
  // repacks constant matmul weights and drops the originals) are then freed, and a later
  // import that needs them again (another input shape) decodes them afresh from the file.
  struct Initializer {
    DType dtype = DType::F32;
    std::vector<int64_t> dims;
    Blob bytes;        // empty while released
    Blob::Weak held;   // the released bytes, while a compiled program still holds them
    int main_index = -1;  // index in model.graph().initializer(); -1: a subgraph's (never released)
  };
  mutable std::mutex init_mu;
  mutable std::unordered_map<const pb::TensorProto*, Initializer> initializers;
  bool from_file = false;  // parsed from `path` (released initializers can be read again)
  int64_t file_size = 0, file_mtime_ns = 0;  // as parsed: a changed file is not read again

  pb::ModelProto model;
  std::string path;      // for messages
  std::string base_dir;  // external data files are resolved (and confined) here
  int64_t opset = 0;     // default domain ("" or "ai.onnx")
  std::map<std::string, int64_t> opsets;  // every imported domain
};

// The initializer `t` of `src`'s message (main graph or a subgraph), decoded once and shared
// by every import; reads the file again for bytes released since (see ModelSource). A copy:
// its Blob keeps the bytes alive while the caller uses them.
ModelSource::Initializer source_initializer(const ModelSource& src, const pb::TensorProto& t);
// Makes the main graph's decoded initializers weak (see ModelSource); a source not read
// from a file keeps them.
void release_initializers(const ModelSource& src);

// True for the default ONNX domain.
inline bool is_default_domain(std::string_view d) { return d.empty() || d == "ai.onnx"; }

}  // namespace rlx::onnx
