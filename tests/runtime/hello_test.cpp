// Compiles examples/hello.cpp into this test (its main renamed) and checks it prints
// exactly "4 6": the DESIGN.md section 5 program, run as written.
#include <gtest/gtest.h>

#define main hello_example_main
#include "../../examples/hello.cpp"
#undef main

#include "runtime_test_util.h"

namespace rlx::test {

TEST(HelloExample, PrintsFourSix) {
  testing::internal::CaptureStdout();
  int rc = hello_example_main();
  std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(out, "4 6\n");
}

TEST(HelloExample, ApiShapeFromDesign) {
  CompiledGraph net = compile(hello_graph());
  net.set_param("w", kHelloW);
  std::vector<std::vector<float>> out = net.run({{"x", {1, 2, 3, 4}}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], (std::vector<float>{4, 6}));
  // Same object, new input: no state leaks between runs.
  out = net.run({{"x", {-1, 0.5f, 2, 8}}});
  EXPECT_EQ(out[0], ref_matmul({-1, 0.5f, 2, 8}, kHelloW, 1, 4, 2));
}

}  // namespace rlx::test
