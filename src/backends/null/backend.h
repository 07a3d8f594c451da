// The null backend: claims no op, computes nothing, and keeps every value in host memory
// of its own. It exists for two reasons: tests drive the runtime through the backend
// interface with it (a graph whose outputs are its leaves compiles and runs; anything
// else is a clean Error(Unsupported) from legalize, listing every node), and it is the
// smallest complete example of what a backend must provide: start a new backend by
// copying backend.cpp beside it.
#pragma once
#include <memory>

#include "backends/backend.h"

namespace rlx::null_backend {

std::unique_ptr<backend::Backend> make_backend();

}  // namespace rlx::null_backend
