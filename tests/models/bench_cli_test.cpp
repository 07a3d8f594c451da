// `rlx bench` on .rlx graphs (no model download): generated inputs follow the documented
// generator (checked against a plain reimplementation here), dims come from the graph,
// --shape or --bind, given inputs are used as they are, and bad use is one error line.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "rlx/rlx.h"
#include "runtime/npy.h"

namespace rlx::test {
namespace {

namespace fs = std::filesystem;

// The documented fill: 32-bit LCG seeded with 1 per tensor, (state >> 8) / 2^24.
std::vector<float> reference_fill(size_t n) {
  std::vector<float> v(n);
  uint32_t state = 1;
  for (float& x : v) {
    state = state * 1664525u + 1013904223u;
    x = float(double(state >> 8) / 16777216.0);
  }
  return v;
}

std::vector<float> as_floats(const TypedTensor& t) {
  std::vector<float> v(t.bytes.size() / 4);
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

class BenchRlx : public testing::Test {
 protected:
  void SetUp() override {
    bin_ = fs::path(RLX_BINARY_DIR) / "rlx";
    ASSERT_TRUE(fs::exists(bin_)) << bin_ << " is missing: build the rlx_cli target";
    dir_ = fs::path(testing::TempDir()) /
           ("rlx_bench_" + std::string(testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // y = softmax(x @ w) over a symbolic batch; n: an i64 input that is only passed through.
    Graph g("bench");
    auto x = g.input("x", Shape(std::vector<Dim>{g.sym("batch"), Dim(4)}, DType::F32));
    auto n = g.input("n", Shape({2}, DType::I64));
    std::vector<float> w(16);
    for (int i = 0; i < 16; ++i) w[size_t(i)] = float(i % 5) * 0.25f;
    auto wc = g.constant_f32({4, 4}, w);
    g.set_outputs({g.softmax(g.matmul(x, wc)), g.identity(n)}, {"y", "n_out"});
    model_ = (dir_ / "m.rlx").string();
    std::ofstream(model_) << print_graph(g);
  }
  void TearDown() override { fs::remove_all(dir_); }

  int rlx(const std::string& args) {
    std::string cmd = "'";  // built with += (GCC 12 warns falsely on "'" + string + ...)
    cmd += bin_.string() + "' " + args + " >'" + (dir_ / "out.txt").string() + "' 2>'" + (dir_ / "err.txt").string() + "'";
    const int raw = std::system(cmd.c_str());
    auto slurp = [](const fs::path& p) {
      std::stringstream ss;
      ss << std::ifstream(p).rdbuf();
      return ss.str();
    };
    out_ = slurp(dir_ / "out.txt");
    err_ = slurp(dir_ / "err.txt");
    return WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  }

  fs::path bin_, dir_;
  std::string model_, out_, err_;
};

TEST_F(BenchRlx, GeneratesInputsFromBoundSymbols) {
  const fs::path saved = dir_ / "in";
  ASSERT_EQ(rlx("bench '" + model_ + "' --bind batch=3 --runs 4 --warmup 1 --threads 1 --save-inputs '" +
                saved.string() + "'"),
            0)
      << err_;
  EXPECT_NE(out_.find("input x: f32[3,4] generated"), std::string::npos) << out_;
  EXPECT_NE(out_.find("input n: i64[2] generated"), std::string::npos) << out_;
  EXPECT_NE(out_.find("rlx p50_ms="), std::string::npos) << out_;
  EXPECT_NE(out_.find("runs=4 threads=1"), std::string::npos) << out_;
  TypedTensor x = runtime::read_npy((saved / "x.npy").string());
  EXPECT_EQ(x.dtype, DType::F32);
  EXPECT_EQ(x.dims, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(as_floats(x), reference_fill(12));
  for (float v : as_floats(x)) EXPECT_TRUE(v >= 0.0f && v < 1.0f) << v;
  TypedTensor n = runtime::read_npy((saved / "n.npy").string());
  EXPECT_EQ(n.dtype, DType::I64);
  EXPECT_EQ(n.bytes, std::vector<uint8_t>(16, 0));
}

TEST_F(BenchRlx, ShapeOptionAndGivenInputs) {
  const fs::path saved = dir_ / "in";
  TypedTensor n{DType::I64, {2}, std::vector<uint8_t>(16, 7)};
  runtime::write_npy((dir_ / "n.npy").string(), n);
  ASSERT_EQ(rlx("bench '" + model_ + "' --shape x=5,4 --input n='" + (dir_ / "n.npy").string() +
                "' --runs 2 --save-inputs '" + saved.string() + "'"),
            0)
      << err_;
  EXPECT_NE(out_.find("input x: f32[5,4] generated"), std::string::npos) << out_;
  EXPECT_NE(out_.find("input n: i64[2] from file"), std::string::npos) << out_;
  EXPECT_TRUE(fs::exists(saved / "x.npy"));
  EXPECT_FALSE(fs::exists(saved / "n.npy")) << "only generated inputs are saved";
  EXPECT_EQ(as_floats(runtime::read_npy((saved / "x.npy").string())), reference_fill(20));
}

TEST_F(BenchRlx, BadUseIsOneErrorLine) {
  EXPECT_EQ(rlx("bench '" + model_ + "' --runs 1"), 2);
  EXPECT_NE(err_.find("input 'x' has a dynamic dim 0 ('batch')"), std::string::npos) << err_;
  EXPECT_EQ(rlx("bench '" + model_ + "' --bind batch=2 --runs 0"), 2);
  EXPECT_NE(err_.find("option '--runs': '0' is not an integer in [1, "), std::string::npos) << err_;
  EXPECT_EQ(rlx("bench '" + model_ + "' --bind batch=2 --input q"), 2);
  EXPECT_NE(err_.find("--input 'q': expected NAME=VALUE"), std::string::npos) << err_;
  runtime::write_npy((dir_ / "q.npy").string(), TypedTensor{DType::F32, {1}, std::vector<uint8_t>(4, 0)});
  EXPECT_EQ(rlx("bench '" + model_ + "' --bind batch=2 --input q='" + (dir_ / "q.npy").string() + "'"), 2);
  EXPECT_NE(err_.find("--input 'q': the model has no such input"), std::string::npos) << err_;
  EXPECT_EQ(rlx("bench '" + model_ + "' --bind batch=2 --shape x=2,x"), 2);
  EXPECT_NE(err_.find("--shape x 'x'"), std::string::npos) << err_;
  EXPECT_EQ(rlx("bench '" + (dir_ / "missing.rlx").string() + "'"), 1);
  EXPECT_EQ(err_.rfind("rlx: error: ", 0), 0u) << err_;
}

}  // namespace
}  // namespace rlx::test
