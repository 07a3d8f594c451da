#include "runtime/backend_registry.h"

#include <memory>

#include "backends/cpu/backend.h"
#include "backends/null/backend.h"
#ifdef RLX_HAVE_CUDA
#include "backends/cuda/backend.h"
#endif

namespace rlx {

std::string_view device_name(Device d) {
  switch (d) {
    case Device::Cpu: return "cpu";
    case Device::Cuda: return "cuda";
    case Device::Null: return "null";
  }
  return "?";
}

namespace runtime {

namespace {
struct Registry {
  std::vector<std::unique_ptr<backend::Backend>> owned;
  std::vector<const backend::Backend*> view;
  Registry() {
    owned.push_back(cpu::make_backend());
    owned.push_back(null_backend::make_backend());
#ifdef RLX_HAVE_CUDA
    owned.push_back(cuda::make_backend());
#endif
    for (const auto& b : owned) view.push_back(b.get());
  }
};
const Registry& registry() {
  static const Registry r;
  return r;
}
}  // namespace

const std::vector<const backend::Backend*>& backends() { return registry().view; }

const backend::Backend& backend_for(Device d) {
  // Only the asked-for backend is probed on the way to success: probing a GPU backend
  // starts its driver, which a CPU-only caller must not pay for. The list of what is
  // available is made only for the error.
  const backend::Backend* found = nullptr;
  for (const backend::Backend* b : backends())
    if (b->device() == d) found = b;
  std::string why;
  if (found && found->available(&why)) return *found;
  std::string available;
  for (const backend::Backend* b : backends()) {
    std::string reason;
    if (b != found && b->device() != Device::Null && b->available(&reason))
      available += (available.empty() ? "" : ", ") + b->name();
  }
  if (!found)
    fail(ErrorCategory::Unsupported, "no ", device_name(d), " backend in this build of rlx (available devices: ",
         available, ")");
  fail(ErrorCategory::Unsupported, "the ", device_name(d), " backend cannot run here: ", why,
       " (available devices: ", available, ")");
}

const opt::ConstEvaluator& host_evaluator() {
  static const opt::ConstEvaluator eval = backend_for(Device::Cpu).const_evaluator();
  return eval;
}

}  // namespace runtime
}  // namespace rlx
