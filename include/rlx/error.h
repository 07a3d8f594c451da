// rlx::Error: the one exception type every public call throws.
// Each error carries a category so callers can tell bad input from an unsupported
// feature from an internal bug, and a message that names the node, input or file
// offset at fault. Failed calls leave the object they were called on usable.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace rlx {

enum class ErrorCategory {
  InvalidArgument,  // bad name, wrong element count, wrong dtype, out-of-range
  Shape,            // shape inference or binding failed
  Unsupported,      // an op / dtype / feature no backend here handles
  Parse,            // text IR, npy, model file could not be read
  Io,               // file system errors
  Verify,           // graph failed the verifier
  Internal,         // invariant broken inside rlx (a bug)
};

std::string_view category_name(ErrorCategory c);

class Error : public std::runtime_error {
 public:
  Error(ErrorCategory category, const std::string& message);
  ErrorCategory category() const { return category_; }

 private:
  ErrorCategory category_;
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

// Builds the message from streamable pieces and throws.
template <class... Args>
[[noreturn]] void fail(ErrorCategory c, const Args&... args) {
  throw Error(c, detail::concat(args...));
}

}  // namespace rlx

// Invariant check that stays on in release builds.
#define RLX_CHECK(cond, ...)                                                        \
  do {                                                                             \
    if (!(cond)) ::rlx::fail(::rlx::ErrorCategory::Internal, "internal check failed: " #cond " at ", \
                             __FILE__, ":", __LINE__, " ", ##__VA_ARGS__);          \
  } while (0)
