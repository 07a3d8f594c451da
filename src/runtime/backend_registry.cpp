#include "runtime/backend_registry.h"

#include <memory>

#include "backends/cpu/backend.h"
#include "backends/null/backend.h"

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
  std::string available;
  const backend::Backend* found = nullptr;
  std::string why;
  for (const backend::Backend* b : backends()) {
    std::string reason;
    const bool ok = b->available(&reason);
    if (ok && b->device() != Device::Null) available += (available.empty() ? "" : ", ") + b->name();
    if (b->device() == d) {
      found = b;
      if (!ok) why = reason;
    }
  }
  if (!found)
    fail(ErrorCategory::Unsupported, "no ", device_name(d), " backend in this build of rlx (available devices: ",
         available, ")");
  if (!why.empty())
    fail(ErrorCategory::Unsupported, "the ", device_name(d), " backend cannot run here: ", why,
         " (available devices: ", available, ")");
  return *found;
}

const opt::ConstEvaluator& host_evaluator() {
  static const opt::ConstEvaluator eval = backend_for(Device::Cpu).const_evaluator();
  return eval;
}

}  // namespace runtime
}  // namespace rlx
