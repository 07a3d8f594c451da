#pragma once
#define RLX_VERSION_STRING "0.1.0"
namespace rlx {
inline constexpr const char* kVersion = RLX_VERSION_STRING;
}
