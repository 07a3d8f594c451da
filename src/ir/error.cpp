#include "rlx/error.h"

namespace rlx {

std::string_view category_name(ErrorCategory c) {
  switch (c) {
    case ErrorCategory::InvalidArgument: return "invalid argument";
    case ErrorCategory::Shape: return "shape error";
    case ErrorCategory::Unsupported: return "unsupported";
    case ErrorCategory::Parse: return "parse error";
    case ErrorCategory::Io: return "i/o error";
    case ErrorCategory::Verify: return "verification failed";
    case ErrorCategory::Internal: return "internal error";
    case ErrorCategory::ResourceExhausted: return "resource exhausted";
  }
  return "error";
}

Error::Error(ErrorCategory category, const std::string& message)
    : std::runtime_error(message), category_(category) {}

}  // namespace rlx
