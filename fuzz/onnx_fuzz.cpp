// libFuzzer entry point for the onnx target; the body lives in onnx_target.h so the
// g++ smoke test (tests/fuzz) replays the same code without libFuzzer.
#include "onnx_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rlx::fuzz::onnx_one_input(data, size);
  return 0;
}
