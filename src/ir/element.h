// Internal: one element of a typed byte buffer, as a double. Shared by the graph's constant
// builder (Graph::constant_values) and the passes that read or rewrite constants.
#pragma once
#include <cstdint>

#include "rlx/dtype.h"

namespace rlx {

// Reads element i of a buffer of dtype t as a double (complex: the real part).
double read_element(const uint8_t* data, DType t, int64_t i);
// Writes `value` as element i of dtype t (rounding as a cast would; complex: imaginary part 0).
void write_element(uint8_t* data, DType t, int64_t i, double value);

}  // namespace rlx
