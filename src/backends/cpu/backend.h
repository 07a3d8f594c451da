// The CPU backend behind the abstract interface of backends/backend.h: the numerical
// oracle. Claims what kernel_registry() supports, folds constants with evaluate_node,
// and compiles a Plan into a cpu::Program run by cpu::Executable (executable.h).
#pragma once
#include <memory>

#include "backends/backend.h"

namespace rlx::cpu {

std::unique_ptr<backend::Backend> make_backend();

}  // namespace rlx::cpu
