// The generated fused_elementwise kernels (fused_jit.h): every unary and arithmetic op, in
// each storage type, with linear, broadcast-scalar and strided operands (and with linear and
// scalar ones only: the 16-byte loop), compiles under
// NVRTC for sm_90 (no GPU needed; skips when NVRTC cannot be loaded). That the kernels
// compute what the interpreter does is checked on the GPU by the e2e suite
// (RLX_E2E_DEVICE=cuda) and the ONNX node suite (rlx test-onnx --device cuda).
#include <gtest/gtest.h>

#ifdef RLX_HAVE_CUDA
#include "backends/cuda/fused_jit.h"
#include "backends/cuda/jit.h"

namespace rlx::cuda {
namespace {

FusedArgs program_over_all_ops() {
  FusedArgs a;
  a.it.rank = 2;
  a.it.dims[0] = 6, a.it.dims[1] = 10;
  a.it.numel = 60;
  a.n_in = 3;
  a.in[0].s[0] = 10, a.in[0].s[1] = 1;  // linear
  a.in[1].base = 3;                      // one element
  a.in[2].s[0] = 0, a.in[2].s[1] = 1;    // a row broadcast over the first dim
  return a;
}

TEST(FusedJit, EveryOpCompilesInEveryStorageType) {
  std::string why;
  if (jit::compile("extern \"C\" __global__ void k() {}", "k", "sm_90", &why).empty() &&
      why.find("cannot load NVRTC") != std::string::npos)
    GTEST_SKIP() << why;
  for (ET t : {ET::F32, ET::F16, ET::BF16}) {
    // One program per batch of ops (at most kMaxFusedOps instructions each).
    std::vector<FusedInstr> all;
    for (int u = int(UnaryOp::Abs); u <= int(UnaryOp::Sign); ++u) {
      if (UnaryOp(u) == UnaryOp::IsNaN || UnaryOp(u) == UnaryOp::IsInf) continue;
      FusedInstr f;
      f.kind = 0;
      f.u.op = UnaryOp(u);
      f.u.alpha = 0.5f, f.u.beta = 2.0f;
      all.push_back(f);
    }
    for (int b = int(BinaryOp::Add); b <= int(BinaryOp::FloorMod); ++b) {
      FusedInstr f;
      f.kind = 1;
      f.b = BinaryOp(b);
      all.push_back(f);
    }
    FusedInstr id;
    id.kind = 2;
    all.push_back(id);
    for (size_t first = 0; first < all.size(); first += kMaxFusedOps)
    for (bool broadcast_row : {true, false}) {
      // Without the broadcast row every input is linear or one element: the 16-byte path.
      FusedArgs a = program_over_all_ops();
      if (!broadcast_row) a.in[2] = a.in[0];
      EXPECT_EQ(fused_vector_width(a, t), broadcast_row ? 1 : t == ET::F32 ? 4 : 8);
      for (size_t j = first; j < std::min(all.size(), first + kMaxFusedOps); ++j) {
        FusedInstr f = all[j];
        const int prev = a.n_in + a.n_ops - 1;  // chain: each op reads the last result and an input
        f.x = prev;
        f.y = int(j % 3);
        a.ops[a.n_ops++] = f;
      }
      const std::string src = fused_source(a, t);
      std::string err;
      EXPECT_FALSE(jit::compile(src, kFusedKernelName, "sm_90", &err).empty()) << err << "\n" << src;
    }
  }
}

}  // namespace
}  // namespace rlx::cuda
#endif
