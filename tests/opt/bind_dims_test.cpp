// bind-dims: golden before/after and the errors.
#include "opt/pipeline.h"
#include "opt_test_util.h"

namespace rlx::opt::test {
namespace {

const char* kDynamic = R"(
graph main {
  symbols(batch, seq)
  %0 = input "x" : f32[batch,seq,4]
  %1 = param "w" : f32[4,2]
  %2 = matmul(%0, %1) name="mm" : f32[batch,seq,2]
  %3 = reduce_sum(%2) {axes=[1]} name="s" : f32[batch,1,2]
  outputs(%3)
}
)";

TEST(BindDims, BindsAllSymbols) {
  expect_graph(bind_dims(parse(kDynamic), {{"batch", 2}, {"seq", 3}}), R"(
graph main {
  symbols(batch, seq)
  %0 = input "x" : f32[2,3,4]
  %1 = param "w" : f32[4,2]
  %2 = matmul(%0, %1) name="mm" : f32[2,3,2]
  %3 = reduce_sum(%2) {axes=[1]} name="s" : f32[2,1,2]
  outputs(%3)
}
)");
}

TEST(BindDims, PartialBindingKeepsTheOtherSymbols) {
  expect_graph(bind_dims(parse(kDynamic), {{"seq", 5}}), R"(
graph main {
  symbols(batch, seq)
  %0 = input "x" : f32[batch,5,4]
  %1 = param "w" : f32[4,2]
  %2 = matmul(%0, %1) name="mm" : f32[batch,5,2]
  %3 = reduce_sum(%2) {axes=[1]} name="s" : f32[batch,1,2]
  outputs(%3)
}
)");
}

template <class F>
std::string error_of(F&& f, ErrorCategory want) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), want) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected an error";
  return "";
}

TEST(BindDims, UnknownOrNegativeBindingsAreRejected) {
  Graph g = parse(kDynamic);
  std::string msg = error_of([&] { bind_dims(g, {{"batchh", 2}}); }, ErrorCategory::InvalidArgument);
  EXPECT_NE(msg.find("'batchh'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("symbols: batch, seq"), std::string::npos) << msg;
  msg = error_of([&] { bind_dims(g, {{"seq", -1}}); }, ErrorCategory::InvalidArgument);
  EXPECT_NE(msg.find("'seq'"), std::string::npos) << msg;
}

TEST(BindDims, BindingThatBreaksShapesNamesTheNode) {
  Graph g = parse(R"(
graph main {
  symbols(q, k)
  %0 = input "Q" : f32[1,1,q,4]
  %1 = input "K" : f32[1,1,k,4]
  %2 = attention(%0, %1, %1) {causal=true} name="attn" : f32[1,1,q,4]
  outputs(%2)
}
)");
  EXPECT_NO_THROW(bind_dims(g, {{"q", 2}, {"k", 3}}));
  std::string msg = error_of([&] { bind_dims(g, {{"q", 3}, {"k", 2}}); }, ErrorCategory::Shape);
  EXPECT_NE(msg.find("'attn'"), std::string::npos) << msg;
}

TEST(BindDims, ParamInitialDataMustFitTheBoundType) {
  // The builder accepts initial data on a symbolic param (the text format does not).
  Graph g("main");
  Value p = g.param("p", Shape(std::vector<Dim>{g.sym("n")}, DType::F32), Blob(std::vector<uint8_t>(8)));
  g.set_outputs({g.neg(p)});
  EXPECT_NO_THROW(bind_dims(g, {{"n", 2}}));
  std::string msg = error_of([&] { bind_dims(g, {{"n", 3}}); }, ErrorCategory::Shape);
  EXPECT_NE(msg.find("'p'"), std::string::npos) << msg;
}

}  // namespace
}  // namespace rlx::opt::test
