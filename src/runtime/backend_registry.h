// The one place the runtime names backends: every backend built into this rlx,
// registered once, looked up by Device. Session::compile and available_devices() go
// through it; importers get the host constant evaluator from it (so they include no
// backend header).
#pragma once
#include <string>
#include <vector>

#include "backends/backend.h"

namespace rlx::runtime {

// Every built-in backend, in a fixed order (cpu, null, then device backends).
const std::vector<const backend::Backend*>& backends();
// The backend for `d`; Error(Unsupported) when none is built or it cannot run here
// (the message says why and lists the devices that are available).
const backend::Backend& backend_for(Device d);
// Evaluates one node on constant host data with the CPU kernels (the numerical oracle):
// the ONNX importer folds shape arithmetic with it. Error(Unsupported) when no kernel
// runs the node.
const opt::ConstEvaluator& host_evaluator();

}  // namespace rlx::runtime
