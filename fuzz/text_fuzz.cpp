// libFuzzer entry point for the text target; the body lives in text_target.h so the
// g++ smoke test (tests/fuzz) replays the same code without libFuzzer.
#include "text_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rlx::fuzz::text_one_input(data, size);
  return 0;
}
