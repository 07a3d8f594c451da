// Internal: kernels compiled at run time from generated source (NVRTC, libnvrtc.so.13,
// loaded on first use like cuBLAS: linking it would load it into every process), for the
// current device's architecture, loaded with the runtime's library API.
#pragma once
#include <string>
#include <vector>

namespace rlx::cuda::jit {

// The __global__ extern "C" function `name` of `source`, compiled once per distinct source
// per process (cached; thread-safe) and usable with cudaLaunchKernel. nullptr, with `why`
// set, when NVRTC cannot be loaded or refuses the source (its log in `why`).
const void* kernel(const std::string& source, const std::string& name, std::string* why);

// The compile step alone, for an explicit architecture ("sm_90"): the cubin, or empty with
// `why` set. Needs no device (the tests check generated sources on machines without one).
std::vector<char> compile(const std::string& source, const std::string& name, const std::string& arch, std::string* why);

}  // namespace rlx::cuda::jit
