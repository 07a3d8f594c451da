// The CUDA lowering's step groups on a decode step's attention block, planned and lowered
// without a GPU (opt::compile_pipeline with the backend's claims, then compile_program,
// which only records launches): the rotaries, the K / V casts and cache writes and the
// kv_attention after them are one step, because the backend lists them as a joint run for
// the memory plan (BackendClaims::joint_steps); without that listing the planner may put the
// attention's result on the bytes of the product the launch still reads.
#include <gtest/gtest.h>

#ifdef RLX_HAVE_CUDA
#include <iostream>
#include <string>

#include "backends/cpu/backend.h"
#include "backends/cuda/backend.h"
#include "backends/cuda/program.h"
#include "opt/pipeline.h"
#include "rlx/quant.h"

namespace rlx::cuda {
namespace {

// TinyLlama's attention block in small: x -> one product for q | k | v (F16 rows) -> heads ->
// rotaries -> K / V rows cast to f16 and written into the caches -> kv_attention -> the
// output product. The product's result is free once V's cast has read it: the plan may
// reuse its bytes for the attention's result unless it knows the last six run together.
Graph attention_block() {
  constexpr int64_t E = 256, Hq = 4, Hk = 2, D = 64, C = 16;
  Graph g("attention_block");
  Value x = g.input("x", Shape({1, E}, DType::F32));
  Value w = g.param("wqkv", Shape({(Hq + 2 * Hk) * D, quant::row_bytes(quant::kF16, E)}, DType::U8));
  Value wo = g.param("wo", Shape({E, quant::row_bytes(quant::kF16, Hq * D)}, DType::U8));
  Value kc = g.input("kc", Shape({1, Hk, C, D}, DType::F16)), vc = g.input("vc", Shape({1, Hk, C, D}, DType::F16));
  Value past = g.input("past", Shape({1}, DType::I64));
  Value cs = g.input("cos", Shape({1, D / 2}, DType::F32)), sn = g.input("sin", Shape({1, D / 2}, DType::F32));
  std::vector<Value> p = g.split(g.qmatmul(x, w, quant::kF16, E), -1, {Hq * D, Hk * D, Hk * D});
  auto heads = [&](Value v, int64_t h) { return g.reshape(v, {1, h, 1, D}); };
  Value q = g.rotary(heads(p[0], Hq), cs, sn), k = g.rotary(heads(p[1], Hk), cs, sn);
  Value rk = g.cast(k, DType::F16);  // each cast right before its write, as the LLM blocks build them
  Value wk = g.cache_write(kc, rk, past);
  Value rv = g.cast(heads(p[2], Hk), DType::F16);
  Value wv = g.cache_write(vc, rv, past);
  Value a = g.reshape(g.kv_attention(q, wk, wv, rk, rv, past), {1, Hq * D});
  g.set_outputs({g.qmatmul(a, wo, quant::kF16, Hq * D)});
  return g;
}

// The labels of the program's fused steps, joined.
std::string labels(bool joint) {
  auto be = make_backend();
  auto cpu = cpu::make_backend();
  CompileOptions o;
  opt::PipelineContext ctx{be->claims(o), cpu->const_evaluator(), o};
  if (!joint) ctx.claims.joint_steps = nullptr;
  std::shared_ptr<Program> prog = compile_program(opt::compile_pipeline(attention_block(), ctx));
  std::string s;
  for (const Step& st : prog->steps) s += std::string(st.label ? st.label : "-") + ";";
  return s;
}

TEST(CudaStepPlan, TheDecodeAttentionBlockIsOneLaunchFromRotariesToAttention) {
  const std::string with = labels(true);
  EXPECT_NE(with.find("rotary+kv_store+kv_attention"), std::string::npos) << with;
  // Without the joint run the plan is free to share bytes the fused launch would read and
  // write at once; then the launch is refused and the six go together without the attention.
  const std::string without = labels(false);
  std::cout << "[ steps    ] with joint steps: " << with << "  without: " << without << "\n";
}

}  // namespace
}  // namespace rlx::cuda
#endif
