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
  struct Initializer {
    DType dtype = DType::F32;
    std::vector<int64_t> dims;
    Blob bytes;
  };
  mutable std::mutex init_mu;
  mutable std::unordered_map<const pb::TensorProto*, Initializer> initializers;

  pb::ModelProto model;
  std::string path;      // for messages
  std::string base_dir;  // external data files are resolved (and confined) here
  int64_t opset = 0;     // default domain ("" or "ai.onnx")
  std::map<std::string, int64_t> opsets;  // every imported domain
};

// True for the default ONNX domain.
inline bool is_default_domain(std::string_view d) { return d.empty() || d == "ai.onnx"; }

}  // namespace rlx::onnx
