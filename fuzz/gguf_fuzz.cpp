// libFuzzer entry point for the gguf target; the body lives in gguf_target.h so the g++
// smoke test (tests/fuzz) replays the same code without libFuzzer.
#include "gguf_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rlx::fuzz::gguf_one_input(data, size);
  return 0;
}
