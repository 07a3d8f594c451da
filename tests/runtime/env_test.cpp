// RLX_* environment variables: each one overrides its option, bad values are errors,
// and every variable apply_env reads is listed in the registry (`rlx --help-env`).
#include <set>

#include "runtime_test_util.h"

namespace rlx::test {
namespace {

TEST(Env, RegistryListsEachVariableOnce) {
  std::set<std::string> names;
  for (const EnvVar& v : env_registry()) {
    EXPECT_EQ(v.name.rfind("RLX_", 0), 0u) << v.name;
    EXPECT_FALSE(v.meaning.empty()) << v.name;
    EXPECT_TRUE(names.insert(v.name).second) << "duplicate " << v.name;
  }
  for (const char* n : {"RLX_THREADS", "RLX_PRECISION", "RLX_FUSE", "RLX_DISPATCH_REPORT", "RLX_ARENA_REPORT",
                        "RLX_VERIFY", "RLX_ISA"})
    EXPECT_TRUE(names.count(n)) << n;
}

TEST(Env, UnsetChangesNothing) {
  CompileOptions o;
  o.threads = 5;
  o.fuse_elementwise = false;
  CompileOptions r = apply_env(o);
  EXPECT_EQ(r.threads, 5);
  EXPECT_FALSE(r.fuse_elementwise);
  EXPECT_TRUE(r.fuse_matmul_epilogue);
  EXPECT_TRUE(r.fuse_norms);
  EXPECT_TRUE(r.fuse_gelu);
  EXPECT_TRUE(r.channels_last);
  EXPECT_FALSE(r.dispatch_report);
}

TEST(Env, ChannelsLastSwitch) {
  {
    ScopedEnv c("RLX_CHANNELS_LAST", "0");
    EXPECT_FALSE(apply_env(CompileOptions{}).channels_last);
    EXPECT_TRUE(apply_env(CompileOptions{}).fuse_elementwise);  // a layout pass, not one of RLX_FUSE's
  }
  ScopedEnv c("RLX_CHANNELS_LAST", "sideways");
  expect_error([] { apply_env({}); }, ErrorCategory::InvalidArgument, "RLX_CHANNELS_LAST='sideways'");
}

TEST(Env, PrecisionTf32) {
  ScopedEnv p("RLX_PRECISION", "tf32");
  EXPECT_EQ(apply_env(CompileOptions{}).precision, Precision::TF32);
}

TEST(Env, OverridesOptions) {
  ScopedEnv t("RLX_THREADS", "3"), p("RLX_PRECISION", "bf16"), f("RLX_FUSE", "0"), d("RLX_DISPATCH_REPORT", "1"),
      a("RLX_ARENA_REPORT", "true"), v("RLX_VERIFY", "1"), i("RLX_ISA", "scalar");
  CompileOptions r = apply_env(CompileOptions{});
  EXPECT_EQ(r.threads, 3);
  EXPECT_EQ(r.precision, Precision::BF16);
  EXPECT_FALSE(r.fuse_elementwise);
  EXPECT_FALSE(r.fuse_matmul_epilogue);
  EXPECT_FALSE(r.fuse_norms);
  EXPECT_FALSE(r.fuse_gelu);
  EXPECT_TRUE(r.dispatch_report);
  EXPECT_TRUE(r.arena_report);
  EXPECT_TRUE(r.verify_each_pass);
}

TEST(Env, BadValuesAreErrorsNamingTheVariable) {
  {
    ScopedEnv t("RLX_THREADS", "many");
    expect_error([] { apply_env({}); }, ErrorCategory::InvalidArgument, "RLX_THREADS='many'");
    // ...and a compile fails the same way, before doing any work.
    expect_error([] { Session().compile(hello_graph()); }, ErrorCategory::InvalidArgument, "RLX_THREADS");
  }
  {
    ScopedEnv t("RLX_THREADS", "0");
    expect_error([] { apply_env({}); }, ErrorCategory::InvalidArgument, "RLX_THREADS");
  }
  {
    ScopedEnv t("RLX_THREADS", std::to_string(kMaxThreads + 1).c_str());
    expect_error([] { apply_env({}); }, ErrorCategory::InvalidArgument, "RLX_THREADS");
  }
  {
    ScopedEnv p("RLX_PRECISION", "f8");
    expect_error([] { apply_env({}); }, ErrorCategory::InvalidArgument, "RLX_PRECISION='f8'");
  }
  {
    ScopedEnv f("RLX_FUSE", "maybe");
    expect_error([] { apply_env({}); }, ErrorCategory::InvalidArgument, "RLX_FUSE='maybe'");
  }
  {
    ScopedEnv i("RLX_ISA", "sse2");
    expect_error([] { apply_env({}); }, ErrorCategory::InvalidArgument, "RLX_ISA='sse2'");
  }
}

// CompileOptions::threads outside [0, kMaxThreads] is refused before any work (a mistyped
// count must not start tens of thousands of threads), and the session still compiles after.
TEST(Env, ThreadCountsOutOfRangeAreRefused) {
  for (int bad : {-1, kMaxThreads + 1, 100000}) {
    CompileOptions o;
    o.threads = bad;
    Session s(Device::Cpu, o);
    expect_error([&] { s.compile(hello_graph()); }, ErrorCategory::InvalidArgument,
                 "CompileOptions::threads is " + std::to_string(bad));
  }
  CompileOptions o;
  o.threads = 2;
  EXPECT_EQ(Session(Device::Cpu, o).compile(hello_graph()).capabilities().threads, 2);
}

TEST(Env, ThreadsReachTheCompiledGraph) {
  ScopedEnv t("RLX_THREADS", "2");
  CompiledGraph net = Session(Device::Cpu, CompileOptions{}).compile(hello_graph());
  EXPECT_EQ(net.capabilities().threads, 2);
  net.set_param("w", kHelloW);
  EXPECT_EQ(net.run({{"x", {1, 2, 3, 4}}})[0], (std::vector<float>{4, 6}));
}

TEST(Env, ReportsGoToStderr) {
  ScopedEnv d("RLX_DISPATCH_REPORT", "1"), a("RLX_ARENA_REPORT", "1");
  testing::internal::CaptureStderr();
  CompiledGraph net = Session().compile(hello_graph());
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("dispatch report"), std::string::npos) << err;
  EXPECT_NE(err.find("matmul"), std::string::npos) << err;
  EXPECT_NE(err.find("memory plan"), std::string::npos) << err;
  EXPECT_NE(err.find(net.report().memory), std::string::npos) << err;
}

}  // namespace
}  // namespace rlx::test
