// One function per pass; each takes a graph and returns the rewritten graph.
// The name in the comment is the pass name used by flags, reports and test files.
#pragma once
#include <string>

#include "opt/pipeline.h"

namespace rlx::opt {

Graph dce(const Graph& g);                                           // dce
Graph constant_fold(const Graph& g, const ConstEvaluator& eval);     // constant-fold
Graph cse(const Graph& g);                                           // cse
Graph simplify(const Graph& g);                                      // simplify (algebraic)
Graph fuse_matmul_epilogue(const Graph& g, std::string* report);     // fuse-matmul-epilogue
// claims: when given, only chains whose fused node the backend claims are fused.
Graph fuse_conv_epilogue(const Graph& g, std::string* report,
                         const BackendClaims* claims = nullptr);  // fuse-conv-epilogue
Graph fuse_norms(const Graph& g, std::string* report);               // fuse-norms
Graph fuse_gelu(const Graph& g, std::string* report);                // fuse-gelu
// claims: when given, only attention nodes the backend claims replace their chains; asked
// about the types the node will have when the precision pass runs f32 compute in `low`
// (F16 / BF16; F32: no such pass).
Graph fuse_attention(const Graph& g, std::string* report, const BackendClaims* claims = nullptr,
                     DType low = DType::F32);  // fuse-attention
Graph fold_conv_affine(const Graph& g, std::string* report);         // fold-conv-affine
// channels-last: convolutions and pools the backend claims channels last (nhwc) become so,
// their activations passed on between them without transposes (the transposes back that
// nothing reads are dropped: dce runs inside when anything changed); claims asked about the types
// in `low` as fuse-attention's are. Without claims nothing changes.
Graph channels_last(const Graph& g, std::string* report, const BackendClaims* claims,
                    DType low = DType::F32);  // channels-last
Graph fuse_elementwise(const Graph& g, std::string* report);         // fuse-elementwise
// legalize: decomposes nodes the backend does not claim; throws Error(Unsupported) listing
// every node that has no native kernel and no decomposition. Fills the dispatch report.
Graph legalize(const Graph& g, const BackendClaims& claims, std::string* dispatch_report);
// precision; `claims` (optional): the backend's, asked whether it runs softmax and norms
// on low operands (precision.cpp).
Graph apply_precision(const Graph& g, Precision p, const BackendClaims* claims = nullptr);
// plan-memory. joint: runs of node ids [first, last] a backend runs as one launch
// (BackendClaims::joint_steps), planned as one step each.
MemoryPlan plan_memory(const Graph& g, int64_t alignment, const std::vector<std::pair<int32_t, int32_t>>& joint = {});
// Throws Error(Internal) if two simultaneously live buffers overlap or an output
// overlaps its own inputs (used by tests and RLX_VERIFY).
void verify_memory_plan(const Graph& g, const MemoryPlan& plan);

}  // namespace rlx::opt
