// The compile pipeline: bind dims -> verify -> dce -> fold-conv-affine -> constant-fold -> cse -> simplify
// -> fuse-norms -> fuse-attention -> fuse-matmul-epilogue -> fuse-conv-epilogue -> fuse-elementwise
// -> precision -> legalize -> constant-fold (the casts of constants legalize adds) -> dce -> plan-memory.
// Precision runs before legalize so that norms/softmax decomposed by legalize stay in
// f32 and half-precision nodes a backend lacks are wrapped in f32 casts by legalize.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "opt/plan.h"
#include "rlx/options.h"

namespace rlx::opt {

// What a backend says it runs natively. `supports` sees a node with its input types
// (nullptr = absent optional input) and says whether a native kernel exists.
struct BackendClaims {
  std::string name;
  std::function<bool(const Node&, const std::vector<const Shape*>&)> supports;
  // Optional: an f16 / bf16 node the backend supports but runs faster in f32 (its f32
  // kernels better than its half ones); legalize then wraps it in casts as it wraps a half
  // node the backend lacks. The value is the same: the f32 result rounded to the node's type.
  std::function<bool(const Node&, const std::vector<const Shape*>&)> prefers_f32;
  // Optional: the runs of nodes (first and last node id, in schedule order) of the final graph
  // that the backend will run as one launch. plan-memory plans each run as one step: what
  // any of its nodes reads stays live to its end, what any writes is live from its start,
  // so no result lands on bytes the launch still reads, nor on another of its results.
  std::function<std::vector<std::pair<int32_t, int32_t>>(const Graph&)> joint_steps;
};

// Evaluates one node on constant inputs (used by constant-fold). Given by the runtime so
// that opt does not depend on a backend. Returns the output bytes per output.
using ConstEvaluator =
    std::function<std::vector<Blob>(const Node&, const std::vector<Shape>& in_types,
                                    const std::vector<Blob>& in_values)>;

struct PipelineContext {
  BackendClaims claims;
  ConstEvaluator evaluate;   // may be empty: constant folding is then skipped
  CompileOptions options;
};

// Throws Error(Verify) / Error(Shape) / Error(Unsupported) (listing every unsupported node).
Plan compile_pipeline(const Graph& g, const PipelineContext& ctx);
// The fusion report condensed to one line per pass: rewrites made (ops absorbed), candidates
// left apart and the first reason (fusion_summary.cpp).
std::string summarize_fusion(const std::string& report);

// Replaces symbolic dims by the bound sizes and re-infers all types (specialization).
Graph bind_dims(const Graph& g, const std::map<std::string, int64_t>& bindings);

}  // namespace rlx::opt
