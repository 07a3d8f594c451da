// View analysis shared by the memory planner, its verifier and the backends.
//
// A node output is a *view* when it can live inside one of the node's inputs with no
// copy: its bytes are exactly a contiguous run of the input's bytes, in the same order.
// The planner gives such an output the location input + byte_offset (no buffer of its
// own) and keeps the input's root alive for as long as the view is used. A backend may
// skip the node entirely: running a copy kernel on it would be a no-op (each element is
// read and written at the same address).
//
// Views recognised (exactly; anything else is not a view):
//   - ops with the kView trait (identity, reshape, bitcast), byte sizes equal;
//   - cast to the input's own dtype;
//   - transpose whose permutation keeps the relative order of the axes of size > 1;
//   - slice whose selected region is contiguous: scanning from the last axis, every axis
//     is taken whole until one axis k that is taken with step 1 (or as a single index),
//     and every axis before k selects a single index;
//   - split where every axis before the split axis has size 1 (each output is then a
//     contiguous chunk).
// In-place ops (kInPlace: cache_write) share input 0's storage the same way, but only
// where the write cannot be observed (input 0 is a graph input read by nothing else and not
// an output); their kernel always runs, since it writes (part of) the shared bytes.
// Zero-size outputs are never views (they have no location at all).
#pragma once
#include <cstdint>
#include <optional>

#include "rlx/graph.h"

namespace rlx::opt {

struct ViewOf {
  int input = 0;            // which input of the node the output aliases
  int64_t byte_offset = 0;  // where the output starts inside that input
};

// Requires static shapes on the node's inputs and outputs (returns nullopt otherwise).
std::optional<ViewOf> view_of(const Graph& g, int32_t node, int32_t out);

}  // namespace rlx::opt
