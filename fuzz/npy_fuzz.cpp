// libFuzzer entry point for the npy target; the body lives in npy_target.h so the
// g++ smoke test (tests/fuzz) replays the same code without libFuzzer.
#include "npy_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rlx::fuzz::npy_one_input(data, size);
  return 0;
}
