// Internal: a Plan compiled for CUDA. Every value is a (segment, param, offset)
// reference: arena values by byte offset from the device arena, weights values by the
// param that holds them (params live in their own device allocations, looked up by name,
// so executables of different plans can share them). Leaves, planned views and empty
// nodes get no step; every other node one Launch (lower.h), or two adjacent nodes one
// launch together where lower_pair has a fused kernel for them (RLX_CUDA_FUSE=0: never).
#pragma once
#include <memory>
#include <string>
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
};

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

// Error(Unsupported) naming the node when no CUDA kernel runs it; Error(Internal) when the
// memory plan disagrees with the graph.
std::shared_ptr<Program> compile_program(opt::Plan plan, const LowerOptions& opts = {});

}  // namespace rlx::cuda
