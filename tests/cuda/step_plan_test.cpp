// The CUDA lowering's step groups on a decode step's attention block, planned and lowered
// without a GPU (opt::compile_pipeline with the backend's claims, then compile_program,
// which only records launches): the rotaries, the K / V casts and cache writes and the
// kv_attention after them are one step, because the backend lists them as a joint run for
// the memory plan (BackendClaims::joint_steps); without that listing the planner may put the
// attention's result on the bytes of the product the launch still reads.
#include <gtest/gtest.h>

#ifdef RLX_HAVE_CUDA
#include <iostream>
#include <memory>
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

// The program of the block, with or without the backend's joint runs.
std::shared_ptr<Program> program(bool joint) {
  auto be = make_backend();
  auto cpu = cpu::make_backend();
  CompileOptions o;
  opt::PipelineContext ctx{be->claims(o), cpu->const_evaluator(), o};
  if (!joint) ctx.claims.joint_steps = nullptr;
  return compile_program(opt::compile_pipeline(attention_block(), ctx));
}
// The labels of the program's steps ("-" for one node's), joined.
std::string labels(const Program& prog) {
  std::string s;
  for (const Step& st : prog.steps) s += std::string(st.label ? st.label : "-") + ";";
  return s;
}
// Whether the plan places values a and b on a common byte (of one segment).
bool share_bytes(const Program& prog, Value a, Value b) {
  const Graph& g = prog.plan.graph;
  const opt::Loc la = prog.plan.memory.loc[size_t(a.node)][size_t(a.out)];
  const opt::Loc lb = prog.plan.memory.loc[size_t(b.node)][size_t(b.out)];
  if (la.segment != lb.segment || la.offset < 0 || lb.offset < 0) return false;
  return overlaps({la.offset, la.offset + int64_t(g.type(a).bytes())},
                  {lb.offset, lb.offset + int64_t(g.type(b).bytes())});
}
// Whether the plan puts the attention's result on bytes of the q | k | v product (the first
// qmatmul), which the fused launch still reads while it writes that result.
bool attention_on_product(const Program& prog) {
  const Graph& g = prog.plan.graph;
  int32_t att = -1, product = -1;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (g.nodes()[i].kind == OpKind::KvAttention) att = int32_t(i);
    if (g.nodes()[i].kind == OpKind::QMatMul && product < 0) product = int32_t(i);
  }
  return att >= 0 && product >= 0 && share_bytes(prog, Value{att, 0}, Value{product, 0});
}

TEST(CudaStepPlan, TheDecodeAttentionBlockIsOneLaunchFromRotariesToAttention) {
  const std::shared_ptr<Program> with = program(true), without = program(false);
  std::cout << "[ steps    ] with joint steps: " << labels(*with) << "  without: " << labels(*without) << "\n";
  EXPECT_NE(labels(*with).find("rotary+kv_store+kv_attention"), std::string::npos) << labels(*with);
  EXPECT_FALSE(attention_on_product(*with));
  // Without the joint run the planner gives the attention's result the product's bytes
  // (free once V's cast has read them), and compile_program refuses the seven-node launch:
  // the six go together, the attention on its own.
  EXPECT_TRUE(attention_on_product(*without)) << "the planner no longer shares these bytes: this case no longer "
                                                 "shows the refusal";
  EXPECT_EQ(labels(*without).find("rotary+kv_store+kv_attention"), std::string::npos) << labels(*without);
  EXPECT_NE(labels(*without).find("rotary+kv_store"), std::string::npos) << labels(*without);
}

}  // namespace
}  // namespace rlx::cuda
#endif
