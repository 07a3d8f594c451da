// The compiled plan ("LIR"): the final graph plus where every value lives.
// Produced by opt::compile_pipeline, consumed by backends.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "rlx/graph.h"

namespace rlx::opt {

// Memory is two segments: weights (params; shareable between compiled graphs) and the
// arena (inputs, constants, activations, outputs).
enum class Segment : uint8_t { Arena, Weights };

struct Loc {
  Segment segment = Segment::Arena;
  int64_t offset = -1;  // bytes from the segment base; -1 = absent / zero-size
};

enum class BufferRole : uint8_t { Scratch, Input, Output, Param, Constant };

struct Buffer {          // one planned root buffer (views share their root's buffer)
  int32_t node = -1, out = 0;
  int64_t bytes = 0;
  int64_t offset = 0;
  BufferRole role = BufferRole::Scratch;
  int32_t first = 0, last = 0;  // schedule steps (node ids) of definition and last use
};

struct MemoryPlan {
  std::vector<std::vector<Loc>> loc;      // [node][output]
  std::vector<Buffer> buffers;            // roots placed in the arena or weights
  int64_t arena_bytes = 0;
  int64_t weights_bytes = 0;
  int64_t lower_bound_bytes = 0;          // max total bytes simultaneously live (arena)
  int64_t constant_bytes = 0;             // constants (e.g. ONNX initializers), held in the arena
  int64_t alignment = 64;
  // Arena ranges [begin, end) that hold inputs/constants (kept across runs); the rest
  // is scratch, cleared per run and released by release_scratch().
  std::vector<std::pair<int64_t, int64_t>> persistent;
  std::vector<std::pair<int64_t, int64_t>> scratch;
  std::string report(const Graph& g, int top = 8) const;  // RLX_ARENA_REPORT text
};

struct Plan {
  Graph graph;          // optimized, legalized, static shapes
  MemoryPlan memory;
  std::string dispatch_report;
  std::string fusion_report;
  std::string pass_log;  // one line per pass: name, nodes before -> after
};

}  // namespace rlx::opt
