// Internal: the ONNX protobuf types (Debian's libonnx-dev) and the parsed model.
// `pb` names the protobuf namespace so it never clashes with rlx::onnx.
#pragma once
#include <map>
#include <string>

// Debian's libonnx-dev is built with ONNX_ML; the rlx_onnx target defines these too.
#ifndef ONNX_ML
#define ONNX_ML 1
#endif
#ifndef ONNX_NAMESPACE
#define ONNX_NAMESPACE onnx
#endif
#include <onnx/onnx_pb.h>

namespace pb = ::onnx;

namespace rlx::onnx {

struct ModelSource {
  pb::ModelProto model;
  std::string path;      // for messages
  std::string base_dir;  // external data files are resolved (and confined) here
  int64_t opset = 0;     // default domain ("" or "ai.onnx")
  std::map<std::string, int64_t> opsets;  // every imported domain
};

// True for the default ONNX domain.
inline bool is_default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

}  // namespace rlx::onnx
