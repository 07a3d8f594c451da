// rlx::Error: the one exception type every public call throws.
// Each error carries a category so callers can tell bad input from an unsupported
// feature from an internal bug, and a message that names the node, input or file
// offset at fault. Failed calls leave the object they were called on usable.
#pragma once
#include <sstream>
#include <new>
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
  ResourceExhausted,  // a plan or allocation above a limit (CompileOptions, the machine's memory)
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

namespace detail {
// Turns any standard exception escaping `f` into an rlx::Error naming `where`:
// bad_alloc and length_error (a container asked for more than it can hold) become
// ResourceExhausted, anything else Internal. Every public entry point runs through it,
// so callers only ever see rlx::Error.
template <class F>
decltype(auto) guard(const char* where, F&& f) {
  try {
    return f();
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    fail(ErrorCategory::ResourceExhausted, where, ": out of memory");
  } catch (const std::length_error& e) {
    fail(ErrorCategory::ResourceExhausted, where, ": size too large (", e.what(), ")");
  } catch (const std::exception& e) {
    fail(ErrorCategory::Internal, where, ": ", e.what());
  }
}
}  // namespace detail

}  // namespace rlx

// Invariant check that stays on in release builds.
#define RLX_CHECK(cond, ...)                                                        \
  do {                                                                             \
    if (!(cond)) ::rlx::fail(::rlx::ErrorCategory::Internal, "internal check failed: " #cond " at ", \
                             __FILE__, ":", __LINE__, " ", ##__VA_ARGS__);          \
  } while (0)
