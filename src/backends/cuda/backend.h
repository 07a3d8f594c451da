// The CUDA backend behind the abstract interface of backends/backend.h (built when the
// CUDA toolkit is found: RLX_HAVE_CUDA). It compiles a Plan into a schedule of kernel
// launches over one device arena (one cudaMalloc) and a device weights segment (shared by
// share_params_from), replays the schedule as a CUDA Graph after its first run, and folds
// constants with the CPU backend's evaluator. A machine without a GPU or driver reports it
// unavailable with the driver's reason. This header includes no CUDA header.
#pragma once
#include <memory>

#include "backends/backend.h"

namespace rlx::cuda {

std::unique_ptr<backend::Backend> make_backend();

}  // namespace rlx::cuda
