// fuse-attention: golden before/after plus the report text, for the chain an exporter writes
// (matmul, scale, mask add, softmax, matmul) and for the chains that must stay apart.
#include "opt/passes.h"
#include "opt/pipeline.h"
#include "opt_test_util.h"

namespace rlx::opt::test {
namespace {

TEST(FuseAttention, BertStyleChainWithTransposedKeysScaleAndMask) {
  // q [1,2,4,8]; keys [1,4,2,8] as the heads split leaves them, transposed straight to
  // kt [1,2,8,4] (the export's k.transpose(-1,-2) composed with the split's transpose);
  // scores / 4 + mask[1,1,1,4]. k becomes one transpose [0,2,1,3] of the keys.
  Graph g = parse(R"(
graph main {
  %0 = input "q" : f32[1,2,4,8]
  %1 = input "keys" : f32[1,4,2,8]
  %2 = input "v" : f32[1,2,4,8]
  %3 = input "mask" : f32[1,1,1,4]
  %4 = constant {value=)" + hex_f32({4}) + R"(} : f32[]
  %5 = transpose(%1) {perm=[0, 2, 3, 1]} name="kt" : f32[1,2,8,4]
  %6 = matmul(%0, %5) name="qk" : f32[1,2,4,4]
  %7 = div(%6, %4) name="scaled" : f32[1,2,4,4]
  %8 = add(%7, %3) name="masked" : f32[1,2,4,4]
  %9 = softmax(%8) {axis=-1} name="p" : f32[1,2,4,4]
  %10 = matmul(%9, %2) name="ctx" : f32[1,2,4,8]
  outputs(%10)
}
)");
  std::string report;
  expect_graph(fuse_attention(g, &report), R"(
graph main {
  %0 = input "q" : f32[1,2,4,8]
  %1 = input "keys" : f32[1,4,2,8]
  %2 = input "v" : f32[1,2,4,8]
  %3 = input "mask" : f32[1,1,1,4]
  %4 = constant {value=)" + hex_f32({4}) + R"(} : f32[]
  %5 = transpose(%1) {perm=[0, 2, 1, 3]} name="ctx/k" : f32[1,2,4,8]
  %6 = attention(%0, %5, %2, %3) {scale=0.25} name="ctx" : f32[1,2,4,8]
  outputs(%6)
}
)");
  EXPECT_EQ(report,
            "fuse-attention: node 'ctx' = attention of [transpose 'kt', matmul 'qk', div 'scaled' (scale), "
            "add 'masked' (mask), softmax 'p', matmul 'ctx'], scale 0.25\n");
}

TEST(FuseAttention, MaskOnTheLeftScaleByProductAndNoScale) {
  // a: the mask (itself a product with a constant) added on the left of scores * 0.5, keys
  // already transposed as an input (k = one transpose of kt); b: no scale and no mask, kt a
  // transpose [0,1,3,2] of k itself (the two cancel: k is used as it is; the scale is 1, not
  // the op's default 1/sqrt(D)).
  Graph g = parse(R"(
graph main {
  %0 = input "q" : f32[2,3,5,4]
  %1 = input "kt" : f32[2,3,4,6]
  %2 = input "v" : f32[2,3,6,7]
  %3 = input "m" : f32[2,1,5,6]
  %4 = constant {value=)" + hex_f32({-100}) + R"(} : f32[]
  %5 = constant {value=)" + hex_f32({0.5}) + R"(} : f32[]
  %6 = mul(%3, %4) name="mask" : f32[2,1,5,6]
  %7 = matmul(%0, %1) name="qk" : f32[2,3,5,6]
  %8 = mul(%5, %7) name="scaled" : f32[2,3,5,6]
  %9 = add(%6, %8) name="masked" : f32[2,3,5,6]
  %10 = softmax(%9) {axis=3} name="p" : f32[2,3,5,6]
  %11 = matmul(%10, %2) name="a" : f32[2,3,5,7]
  %12 = input "k" : f32[2,3,6,4]
  %13 = transpose(%12) {perm=[0, 1, 3, 2]} name="kt2" : f32[2,3,4,6]
  %14 = matmul(%0, %13) name="qk2" : f32[2,3,5,6]
  %15 = softmax(%14) name="p2" : f32[2,3,5,6]
  %16 = matmul(%15, %2) name="b" : f32[2,3,5,7]
  outputs(%11, %16)
}
)");
  std::string report;
  expect_graph(fuse_attention(g, &report), R"(
graph main {
  %0 = input "q" : f32[2,3,5,4]
  %1 = input "kt" : f32[2,3,4,6]
  %2 = input "v" : f32[2,3,6,7]
  %3 = input "m" : f32[2,1,5,6]
  %4 = constant {value=)" + hex_f32({-100}) + R"(} : f32[]
  %5 = constant {value=)" + hex_f32({0.5}) + R"(} : f32[]
  %6 = mul(%3, %4) name="mask" : f32[2,1,5,6]
  %7 = transpose(%1) {perm=[0, 1, 3, 2]} name="a/k" : f32[2,3,6,4]
  %8 = attention(%0, %7, %2, %6) {scale=0.5} name="a" : f32[2,3,5,7]
  %9 = input "k" : f32[2,3,6,4]
  %10 = attention(%0, %9, %2) {scale=1} name="b" : f32[2,3,5,7]
  outputs(%8, %10)
}
)");
  EXPECT_EQ(report,
            "fuse-attention: node 'a' = attention of [matmul 'qk', mul 'scaled' (scale), add 'masked' (mask), "
            "softmax 'p', matmul 'a'], scale 0.5\n"
            "fuse-attention: node 'b' = attention of [transpose 'kt2', matmul 'qk2', softmax 'p2', matmul 'b'], "
            "scale 1\n");
}

TEST(FuseAttention, ChainsThatMustStayApartAreReportedWithTheReason) {
  // s1: the scores are also a graph output; s2: softmax over axis 2 (not a candidate, not
  // reported); s3: a mask that broadcasts the scores to a larger shape; s4: a scale by a
  // non-splat constant; s5: probabilities read on the right of the matmul.
  Graph g = parse(R"(
graph main {
  %0 = input "q" : f32[1,2,4,8]
  %1 = input "kt" : f32[1,2,8,4]
  %2 = input "v" : f32[1,2,4,8]
  %3 = input "big" : f32[2,2,4,4]
  %4 = constant {value=)" + hex_f32({1, 2, 3, 4}) + R"(} : f32[4]
  %5 = matmul(%0, %1) name="qk1" : f32[1,2,4,4]
  %6 = softmax(%5) name="s1" : f32[1,2,4,4]
  %7 = matmul(%6, %2) name="o1" : f32[1,2,4,8]
  %8 = matmul(%0, %1) name="qk2" : f32[1,2,4,4]
  %9 = softmax(%8) {axis=2} name="s2" : f32[1,2,4,4]
  %10 = matmul(%9, %2) name="o2" : f32[1,2,4,8]
  %11 = matmul(%0, %1) name="qk3" : f32[1,2,4,4]
  %12 = add(%11, %3) name="m3" : f32[2,2,4,4]
  %13 = softmax(%12) name="s3" : f32[2,2,4,4]
  %14 = matmul(%13, %2) name="o3" : f32[2,2,4,8]
  %15 = matmul(%0, %1) name="qk4" : f32[1,2,4,4]
  %16 = div(%15, %4) name="d4" : f32[1,2,4,4]
  %17 = softmax(%16) name="s4" : f32[1,2,4,4]
  %18 = matmul(%17, %2) name="o4" : f32[1,2,4,8]
  %19 = matmul(%0, %1) name="qk5" : f32[1,2,4,4]
  %20 = softmax(%19) name="s5" : f32[1,2,4,4]
  %21 = matmul(%19, %20) name="o5" : f32[1,2,4,4]
  outputs(%7, %5, %10, %14, %18, %21)
}
)");
  std::string report;
  const Graph out = fuse_attention(g, &report);
  EXPECT_EQ(print_graph(out), print_graph(g));
  EXPECT_EQ(report,
            "fuse-attention: not fused: softmax 's1': the scores have another reader\n"
            "fuse-attention: not fused: softmax 's3': the mask f32[2,2,4,4] changes the scores' type "
            "f32[1,2,4,4]\n"
            "fuse-attention: not fused: softmax 's4': div 'd4' is not a scale by one constant\n"
            "fuse-attention: not fused: softmax 's5': the probabilities are not read by one matmul as its left "
            "operand\n");
}

// The chain in its plainest form (no scale, no mask, kt a transpose of k), for the claims tests.
const std::string kPlainChain = R"(
graph main {
  %0 = input "q" : f32[1,2,4,8]
  %1 = input "k" : f32[1,2,4,8]
  %2 = input "v" : f32[1,2,4,8]
  %3 = transpose(%1) {perm=[0, 1, 3, 2]} name="kt" : f32[1,2,8,4]
  %4 = matmul(%0, %3) name="qk" : f32[1,2,4,4]
  %5 = softmax(%4) name="p" : f32[1,2,4,4]
  %6 = matmul(%5, %2) name="ctx" : f32[1,2,4,8]
  outputs(%6)
}
)";

TEST(FuseAttention, OnlyWhatTheBackendClaims) {
  const std::string& text = kPlainChain;
  Graph g = parse(text);
  BackendClaims none{"test", [](const Node& n, const std::vector<const Shape*>&) {
                       return n.kind != OpKind::Attention;
                     }};
  std::string report;
  expect_graph(fuse_attention(g, &report, &none), text);
  EXPECT_EQ(report, "fuse-attention: not fused: softmax 'p': the test backend does not run attention of f32[1,2,4,8]\n");
  // A backend that claims it sees k with kt's last two axes swapped.
  std::vector<int64_t> seen_k;
  BackendClaims all{"test", [&](const Node& n, const std::vector<const Shape*>& in) {
                      if (n.kind == OpKind::Attention) seen_k = in[1]->static_dims();
                      return true;
                    }};
  report.clear();
  const Graph out = fuse_attention(g, &report, &all);
  EXPECT_EQ(seen_k, (std::vector<int64_t>{1, 2, 4, 8}));
  ASSERT_EQ(out.nodes().size(), 4u);
  EXPECT_EQ(out.nodes()[3].kind, OpKind::Attention);
  EXPECT_EQ(out.nodes()[3].inputs[1], (Value{1, 0}));
}

TEST(FuseAttention, ClaimsAreAskedAboutTheTypeThePrecisionPassWillGive) {
  // A backend that runs only f16 attention: an f32 chain fuses when the precision pass will
  // run it in f16, and stays apart otherwise.
  const std::string& text = kPlainChain;
  Graph g = parse(text);
  BackendClaims f16_only{"test", [](const Node& n, const std::vector<const Shape*>& in) {
                           return n.kind != OpKind::Attention || in[0]->dtype() == DType::F16;
                         }};
  std::string report;
  expect_graph(fuse_attention(g, &report, &f16_only, DType::F32), text);
  EXPECT_EQ(report, "fuse-attention: not fused: softmax 'p': the test backend does not run attention of f32[1,2,4,8]\n");
  report.clear();
  const Graph out = fuse_attention(g, &report, &f16_only, DType::F16);
  ASSERT_EQ(out.nodes().size(), 4u);
  EXPECT_EQ(out.nodes()[3].kind, OpKind::Attention);
  EXPECT_EQ(out.type(Value{3, 0}).dtype(), DType::F32);  // the precision pass lowers it later
}

// The encoder's chain with its heads split from [B,S,H,D] projections and merged back: q and
// v transposes [0,2,1,3], keys [0,2,3,1], the output's one reader [0,2,1,3].
const std::string kEncoderChain = R"(
graph main {
  %0 = input "q" : f32[1,4,2,8]
  %1 = input "k" : f32[1,4,2,8]
  %2 = input "v" : f32[1,4,2,8]
  %3 = input "mask" : f32[1,1,1,4]
  %4 = constant {value=)" + hex_f32({4}) + R"(} : f32[]
  %5 = transpose(%0) {perm=[0, 2, 1, 3]} name="qh" : f32[1,2,4,8]
  %6 = transpose(%1) {perm=[0, 2, 3, 1]} name="kt" : f32[1,2,8,4]
  %7 = transpose(%2) {perm=[0, 2, 1, 3]} name="vh" : f32[1,2,4,8]
  %8 = matmul(%5, %6) name="qk" : f32[1,2,4,4]
  %9 = div(%8, %4) name="scaled" : f32[1,2,4,4]
  %10 = add(%9, %3) name="masked" : f32[1,2,4,4]
  %11 = softmax(%10) {axis=-1} name="p" : f32[1,2,4,4]
  %12 = matmul(%11, %7) name="ctx" : f32[1,2,4,8]
  %13 = transpose(%12) {perm=[0, 2, 1, 3]} name="merged" : f32[1,4,2,8]
  outputs(%13)
}
)";

TEST(FuseAttention, HeadsReadInPlaceWhenTheBackendClaimsIt) {
  Graph g = parse(kEncoderChain);
  std::string report;
  expect_graph(fuse_attention(g, &report), R"(
graph main {
  %0 = input "q" : f32[1,4,2,8]
  %1 = input "k" : f32[1,4,2,8]
  %2 = input "v" : f32[1,4,2,8]
  %3 = input "mask" : f32[1,1,1,4]
  %4 = constant {value=)" + hex_f32({4}) + R"(} : f32[]
  %5 = attention(%0, %1, %2, %3) {scale=0.25, bshd=true} name="merged" : f32[1,4,2,8]
  outputs(%5)
}
)");
  EXPECT_EQ(report,
            "fuse-attention: node 'merged' = attention of [transpose 'kt', matmul 'qk', div 'scaled' (scale), "
            "add 'masked' (mask), softmax 'p', matmul 'ctx', transpose 'merged', transpose 'qh', transpose 'vh'], "
            "scale 0.25, heads in place (bshd)\n");
  // A backend without the heads-inner form gets the heads-first node, and the report says why.
  BackendClaims first_only{"test", [](const Node& n, const std::vector<const Shape*>&) {
                             return n.kind != OpKind::Attention || !n.attr<AttentionAttrs>().bshd;
                           }};
  report.clear();
  expect_graph(fuse_attention(g, &report, &first_only), R"(
graph main {
  %0 = input "q" : f32[1,4,2,8]
  %1 = input "k" : f32[1,4,2,8]
  %2 = input "v" : f32[1,4,2,8]
  %3 = input "mask" : f32[1,1,1,4]
  %4 = constant {value=)" + hex_f32({4}) + R"(} : f32[]
  %5 = transpose(%0) {perm=[0, 2, 1, 3]} name="qh" : f32[1,2,4,8]
  %6 = transpose(%2) {perm=[0, 2, 1, 3]} name="vh" : f32[1,2,4,8]
  %7 = transpose(%1) {perm=[0, 2, 1, 3]} name="ctx/k" : f32[1,2,4,8]
  %8 = attention(%5, %7, %6, %3) {scale=0.25} name="ctx" : f32[1,2,4,8]
  %9 = transpose(%8) {perm=[0, 2, 1, 3]} name="merged" : f32[1,4,2,8]
  outputs(%9)
}
)");
  EXPECT_EQ(report,
            "fuse-attention: heads not read in place at softmax 'p': the test backend does not run attention of "
            "f32[1,4,2,8] with the heads in place (bshd)\n"
            "fuse-attention: node 'ctx' = attention of [transpose 'kt', matmul 'qk', div 'scaled' (scale), "
            "add 'masked' (mask), softmax 'p', matmul 'ctx'], scale 0.25\n");
}

TEST(FuseAttention, HeadsStaySplitWhenTheMergeHasCompany) {
  // The heads-first output has a second reader: the heads-first node, transposes kept.
  std::string text = kEncoderChain;
  const std::string out = "  outputs(%13)";
  text.replace(text.find(out), out.size(), "  %14 = relu(%12) name=\"other\" : f32[1,2,4,8]\n  outputs(%13, %14)");
  Graph g = parse(text);
  std::string report;
  const Graph fused = fuse_attention(g, &report);
  EXPECT_EQ(report.find("bshd"), std::string::npos) << report;
  int transposes = 0, attentions = 0;
  for (const Node& n : fused.nodes()) {
    transposes += n.kind == OpKind::Transpose;
    attentions += n.kind == OpKind::Attention && !n.attr<AttentionAttrs>().bshd;
  }
  EXPECT_EQ(attentions, 1);
  EXPECT_EQ(transposes, 4);  // q, v, k (composed) and the merge
}

}  // namespace
}  // namespace rlx::opt::test
