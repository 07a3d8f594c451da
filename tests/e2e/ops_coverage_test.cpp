// Runs the registered end-to-end cases of every op kind in the op table. A kind with no
// case fails here, so adding an op to ops.def without an end-to-end case is caught.
#include "ir/op_table.h"
#include "op_cases.h"

namespace rlx {
// gtest prints the parameter of a failing case by this name.
inline void PrintTo(OpKind k, std::ostream* os) { *os << op_name(k); }
}  // namespace rlx

namespace rlx::e2e {
namespace {

class OpE2e : public ::testing::TestWithParam<OpKind> {};

TEST_P(OpE2e, MatchesReference) {
  const OpKind k = GetParam();
  auto it = op_cases().find(k);
  ASSERT_TRUE(it != op_cases().end() && !it->second.empty())
      << "no end-to-end case for op '" << op_name(k) << "': add one in tests/e2e/ops_*_test.cpp";
  for (const OpCase& c : it->second) {
    SCOPED_TRACE(c.name);
    c.run();
  }
}

std::vector<OpKind> every_kind() {
  std::vector<OpKind> kinds;
  for (const ir::OpInfo& info : ir::all_ops()) kinds.push_back(info.kind);
  return kinds;
}

INSTANTIATE_TEST_SUITE_P(AllOps, OpE2e, ::testing::ValuesIn(every_kind()),
                         [](const ::testing::TestParamInfo<OpKind>& p) { return std::string(op_name(p.param)); });

TEST(OpE2eTable, EveryKindOfTheTableIsListed) {
  EXPECT_EQ(int(every_kind().size()), kNumOpKinds);
  for (const auto& [k, cases] : op_cases()) EXPECT_FALSE(cases.empty()) << op_name(k);
}

}  // namespace
}  // namespace rlx::e2e
