// Internal: the CUDA lowering of one plan node to a launch closure, and what it claims.
// A Launch enqueues the node's work on ctx.stream (no host synchronization, so a schedule
// of them can be captured into a CUDA Graph); it throws rlx::Error naming the node when a
// launch is refused. bufs: the node's inputs, then its outputs (device pointers; nullptr
// for absent optional inputs and empty values).
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <functional>
#include <optional>
#include <vector>

#include "rlx/graph.h"

namespace rlx::cuda {

struct LaunchCtx {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  int* err = nullptr;  // device error record (kernels.h)
  int step = 0;        // 1-based schedule step of the node (named in a device error)
  void* scratch = nullptr;  // the executable's scratch (Program::scratch_bytes), one step at a time
  void* workspace = nullptr;  // the BLAS workspace (cuBLAS, cuBLASLt and cuDNN share it: one stream)
  size_t workspace_bytes = 0;
  void* dnn = nullptr;  // the executable's cuDNN handle (dnn.h), when its program uses one
  // Bit i: bufs[i] is settled (Step::settled): no launch that may still run when this step's
  // kernels start writes it, so they may read it before they wait for their predecessor.
  uint64_t settled = 0;
  bool is_settled(int i) const { return i >= 0 && i < 64 && ((settled >> i) & 1) != 0; }
};

// What the lowering takes from the compile options.
struct LowerOptions {
  bool tf32 = false;  // Precision::TF32: f32 matmuls and convolutions on TF32 tensor cores
  bool* uses_dnn = nullptr;  // set when a launch needs LaunchCtx::dnn
};
using Launch = std::function<void(const LaunchCtx& ctx, void* const* bufs)>;

// True when a CUDA kernel runs `node` with these input types (in[i] nullptr: absent).
bool supports(const Node& node, const std::vector<const Shape*>& in);
// The node's launch; Error(Unsupported) naming the node when supports() is false.
Launch lower(const Node& node, const std::vector<const Shape*>& in, const std::vector<Shape>& out,
             const LowerOptions& opts = {});
// Bytes of LaunchCtx::scratch the node's launch uses (0 for most).
size_t scratch_need(const Node& node, const std::vector<const Shape*>& in, const std::vector<Shape>& out,
                    const LowerOptions& opts = {});

// Step fusion (lower_pairs.cpp): `first` and `second` adjacent in the schedule, second's
// input `fed` reading first's single result (through views at the same bytes), or fed -1:
// second does not read it (an independent pair). `sole_reader`: nothing else reads that
// result (no other node, no graph output); the fused kernel then leaves it unwritten. The
// caller has checked that second's results overlap none of first's inputs (nor, unless
// sole_reader, first's results). The launch's bufs are first's inputs and outputs, then
// second's. nullopt when the pair has no fused kernel; every fused kernel rounds as the
// two launches would.
struct PairSide {
  const Node* node = nullptr;
  std::vector<const Shape*> in;
  const std::vector<Shape>* out = nullptr;
};
std::optional<Launch> lower_pair(const PairSide& first, const PairSide& second, int fed, bool sole_reader);
// Six adjacent nodes of a decode step (compile_program matches them): two rotaries, then
// two cast -> cache_write pairs; rotary `rk` (0 or 1) feeds the cast of pair `ck` (0 or 1):
// K's chain; the other rotary is Q's, the other pair V's. yk_sole, k_sole, v_sole: the K
// rotary's, the K cast's, the V cast's results have no other reader (left unwritten). The
// launch's bufs are the six nodes' inputs and outputs in order. One kv_store launch
// (kernels.h), nullopt when the dtypes or shapes do not fit it.
std::optional<Launch> lower_kv_store(const PairSide (&s)[6], int rk, int ck, bool yk_sole, bool k_sole, bool v_sole);
// The same six (K's rotary read by its cast alone) and then the kv_attention reading Q's
// rotary (its only reader), both caches and both casts' results (read by nothing else
// outside the seven), with one position input for all three: one kv_store_attention launch
// (kernels.h), nullopt when the types do not fit it (f16 caches only). bufs: the seven
// nodes' inputs and outputs in order.
std::optional<Launch> lower_kv_attention(const PairSide (&s)[7], int rk, int ck);

// rms_norm -> qmatmul -> fused_elementwise (compile_program matches them): a decode step's
// norm, the feed-forward's gate/up product (m == 1) and the SwiGLU program (swiglu_operands)
// over the product's two halves, the gate half from row gate_row (0 or n / 2). The caller has
// checked that the norm's and the product's results have no other reader (left unwritten)
// and that the program's result misses the norm's inputs. bufs: the nodes' inputs and
// outputs in order. nullopt when the types or shapes do not fit.
std::optional<Launch> lower_norm_swiglu(const PairSide& norm, const PairSide& product, const PairSide& program,
                                        int64_t gate_row);

// Throws Error naming `what` (a kernel or call) and the node when `e` is an error.
void check(cudaError_t e, const char* what, const Node& node);
void check_blas(cublasStatus_t s, const char* what, const Node& node);

}  // namespace rlx::cuda
