// Internal: a Plan compiled for CUDA. Every value is a (segment, param, offset)
// reference: arena values by byte offset from the device arena, weights values by the
// param that holds them (params live in their own device allocations, looked up by name,
// so executables of different plans can share them). Leaves, planned views and empty
// nodes get no step; every other node one Launch (lower.h), or two adjacent nodes one
// launch together where lower_pair has a fused kernel for them (RLX_CUDA_FUSE=0: never).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/lower.h"
#include "opt/plan.h"
#include "opt/plan_refs.h"

namespace rlx::cuda {

using Ref = opt::ValueRef;  // where a value lives (opt/plan_refs.h)
using ParamSlot = opt::ParamSlot;

struct Step {
  Launch fn;
  int32_t node = -1;
  int32_t fused = -1;  // step fusion (lower_pair): the first node of the pair, `node` the second
  const char* label = nullptr;  // a fused group's name in the profile (null: from the node kinds)
  uint32_t first = 0, count = 0;  // into Program::refs: inputs, then outputs (of both, when fused)
  uint64_t settled = 0;  // LaunchCtx::settled (settled_refs)
};

// Which of a step's refs its kernels may read before they wait for their predecessor
// (dev::grid_wait): a kernel starts early only under the one before it, which lets it start
// after its own wait, so what was written before that one launched is finished and visible.
// So a ref is settled unless the launch before may write it: that is the step before,
// and, where that step may launch nothing or a library's kernels (which need not wait
// before they let a successor start), the one before it too, and so on. The first step
// settles nothing (the run before may still be copying handles). Refs past the 64th: never.
struct StepBytes {
  using Range = std::pair<int64_t, int64_t>;  // arena bytes [first, second)
  std::vector<Range> refs;    // each ref's bytes (empty: none in the arena, as weights)
  std::vector<Range> writes;  // the bytes the step writes
  bool waits = false;  // it always launches, and only kernels that wait before their successor starts
};
std::vector<uint64_t> settled_refs(const std::vector<StepBytes>& steps);
// Whether two byte ranges share a byte (an empty one shares none).
inline bool overlaps(const StepBytes::Range& a, const StepBytes::Range& b) {
  return a.first < a.second && b.first < b.second && a.first < b.second && b.first < a.second;
}

struct Program {
  opt::Plan plan;
  std::vector<Step> steps;
  std::vector<Ref> refs;
  std::vector<std::vector<Ref>> values;  // [node][output]
  std::vector<ParamSlot> params;
  struct Constant {
    Ref where;
    Blob bytes;
  };
  std::vector<Constant> constants;
  size_t scratch_bytes = 0;  // the largest scratch_need of a step
  bool uses_dnn = false;     // some step runs through cuDNN (the executable makes a handle)
};

// The runs of nodes compile_program will run as one launch and that need the memory plan's
// help to (BackendClaims::joint_steps): a decode step's rotaries, K / V cache writes and the
// kv_attention reading them (f16 caches; none when RLX_CUDA_FUSE=0). Matched on the graph
// alone, so a run listed here may still be refused at compile_program (which checks the
// plan's bytes again); listing it costs at most a little arena.
std::vector<std::pair<int32_t, int32_t>> joint_steps(const Graph& g);

// Error(Unsupported) naming the node when no CUDA kernel runs it; Error(Internal) when the
// memory plan disagrees with the graph.
std::shared_ptr<Program> compile_program(opt::Plan plan, const LowerOptions& opts = {});

}  // namespace rlx::cuda
