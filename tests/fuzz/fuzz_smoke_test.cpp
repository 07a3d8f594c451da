// The short fuzz run inside `make test` (g++, no libFuzzer): the same target bodies as
// fuzz/<name>_fuzz.cpp replay every seed of fuzz/corpus/<name>/, the fixed regressions
// under fuzz/regressions/<name>/, and a few thousand deterministic mutations of the
// seeds (seeded PRNG: bit flips, byte sets, truncations, splices, ...). Each input must
// either be accepted or be refused with rlx::Error; anything else fails the test and
// the input is written to <build>/fuzz-smoke-failures/ for replay with the libFuzzer
// binary. RLX_FUZZ_SMOKE_DUMP=DIR also writes every generated input to DIR.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "../../fuzz/gguf_target.h"
#include "../../fuzz/npy_target.h"
#include "../../fuzz/text_target.h"
#ifdef RLX_HAVE_ONNX
#include "../../fuzz/onnx_target.h"
#endif
#include "mutator.h"

namespace rlx::fuzz {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;
using Body = std::function<bool(const uint8_t*, size_t)>;

const fs::path kFuzzDir = fs::path(RLX_SOURCE_DIR) / "fuzz";

Bytes read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void write_bytes(const fs::path& p, const Bytes& b) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

struct Input {
  std::string origin;  // seed file name, or "mutation N of SEED"
  Bytes bytes;
};

std::vector<Input> files_in(const fs::path& dir, const std::set<std::string>& skip = {}) {
  std::vector<Input> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && !skip.count(e.path().filename().string()))
      out.push_back({e.path().filename().string(), read_bytes(e.path())});
  std::sort(out.begin(), out.end(), [](const Input& a, const Input& b) { return a.origin < b.origin; });
  return out;
}

// Regressions still open (not yet fixed by their owner): "target/file  reason" per line
// in fuzz/regressions/open.txt. Their bytes are skipped wherever they come up (seed,
// mutation or regression): replaying them would crash the test. Fixed: delete the line.
std::string key_of(const Bytes& b) { return std::string(b.begin(), b.end()); }

struct OpenRegressions {
  std::set<std::string> names;
  std::set<std::string> contents;
};

OpenRegressions open_regressions(const std::string& target) {
  OpenRegressions open;
  std::ifstream f(kFuzzDir / "regressions" / "open.txt");
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::string entry = line.substr(0, line.find_first_of(" \t"));
    if (entry.rfind(target + "/", 0) != 0) continue;
    open.names.insert(entry.substr(target.size() + 1));
    open.contents.insert(key_of(read_bytes(kFuzzDir / "regressions" / entry)));
  }
  return open;
}

struct ReplayResult {
  int inputs = 0, accepted = 0, skipped = 0;
  std::vector<std::string> findings;  // "origin: message"
};

// Runs `body` on each input; any exception leaving it is a finding (its input is saved).
ReplayResult replay(const std::string& target, const Body& body, const std::vector<Input>& inputs) {
  ReplayResult r;
  const char* dump = std::getenv("RLX_FUZZ_SMOKE_DUMP");
  const std::set<std::string> open = open_regressions(target).contents;
  for (const Input& in : inputs) {
    if (open.count(key_of(in.bytes))) {
      ++r.skipped;
      continue;
    }
    if (dump) write_bytes(fs::path(dump) / target / ("in-" + std::to_string(r.inputs)), in.bytes);
    ++r.inputs;
    std::string what;
    try {
      if (body(in.bytes.data(), in.bytes.size())) ++r.accepted;
      continue;
    } catch (const std::exception& e) {
      what = std::string(typeid(e).name()) + ": " + e.what();
    } catch (...) {
      what = "a non-std exception";
    }
    fs::path saved = fs::path(RLX_BINARY_DIR) / "fuzz-smoke-failures" / target /
                     ("finding-" + std::to_string(r.findings.size()));
    write_bytes(saved, in.bytes);
    r.findings.push_back(in.origin + " (saved as " + saved.string() + "): " + what.substr(0, 2000));
  }
  return r;
}

void expect_no_findings(const ReplayResult& r) {
  for (size_t i = 0; i < r.findings.size() && i < 10; ++i) ADD_FAILURE() << r.findings[i];
  EXPECT_TRUE(r.findings.empty()) << r.findings.size() << " findings in " << r.inputs << " inputs";
}

// `count` mutations of the seeds (1-3 mutation steps each), deterministic per `seed`.
std::vector<Input> mutations(const std::vector<Input>& seeds, int count, uint64_t seed,
                             const std::vector<std::string>& tokens, size_t max_size) {
  std::vector<Bytes> corpus;
  for (const auto& s : seeds) corpus.push_back(s.bytes);
  Mutator m(seed, tokens);
  std::vector<Input> out;
  for (int i = 0; i < count; ++i) {
    size_t k = m.below(corpus.size());
    out.push_back({"mutation " + std::to_string(i) + " of " + seeds[k].origin, m.mutate(corpus[k], corpus, max_size)});
  }
  return out;
}

struct TargetSpec {
  std::string name;
  Body body;
  int mutations;
  std::vector<std::string> tokens;  // dictionary for the token-insert mutation
  double min_seed_accept;           // share of seeds that must be accepted
};

TargetSpec npy_spec() {
  return {"npy", npy_one_input, 20000,
          {"\x93NUMPY", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", "'shape': ()",
           "'shape': (0,)", "'shape': (18446744073709551615, 2)", "'fortran_order': True", "'descr': '>i8'",
           "'descr': '|b1'", "'descr': '<V2'", "'descr': '<c16'", "'descr': '<u2'", "(9223372036854775807,",
           ", ", "\n", "\x01\x00", "\x03\x00", "\xff\xff"},
          1.0};
}

TargetSpec text_spec() {
  return {"text", text_one_input, 8000,
          {"graph g {\n", "}\n", "%0", "%1.0", "%2:2", " = input \"x\" : f32[2,3]\n", "param", "constant",
           "{init=0x0000803f}", "{value=0x01}", "symbols(n)", "f32[n,4]", "i64[]", "bool[1]", "c128[2]",
           "outputs(%0)", " as \"y\"", "name=\"a\"", "-1", "0", "9223372036854775807", "-9223372036854775808",
           "1e308", "nan", "inf", "[]", "[1,2,3]", "axis=", "sizes=[1,1]", "perm=[1,0]", "program=[relu(0):f32]",
           "matmul(", "reshape(", "split(", "conv2d(", "attention(", "fused_elementwise(", "\\\"", "\""},
          1.0};
}

#ifdef RLX_HAVE_ONNX
TargetSpec onnx_spec() {
  return {"onnx", onnx_one_input, 16000,
          {"\x08\x07", "\x08\x01", "\x10\x01", "\x18\x02", "\x20\x00", "\xff\xff\xff\xff\x0f", "\x80\x80\x80\x80\x80\x01",
           "\x01\x00\x00\x00\x00\x00\x00\x80", "Reshape", "Gather", "Slice", "Concat", "Expand", "Loop", "If", "Scan",
           "ConstantOfShape", "Range", "Tile", "Pad", "Resize", "axis", "axes", "perm", "value"},
          0.75};
}
#endif

void run_seeds(const TargetSpec& t) {
  std::vector<Input> seeds = files_in(kFuzzDir / "corpus" / t.name);
  ASSERT_GE(seeds.size(), 3u) << "seed corpus fuzz/corpus/" << t.name << " is missing";
  ReplayResult r = replay(t.name, t.body, seeds);
  expect_no_findings(r);
  // Seeds are meant to reach deep into the target: most of them must be accepted.
  EXPECT_GE(double(r.accepted), t.min_seed_accept * r.inputs)
      << r.accepted << " of " << r.inputs << " seeds accepted";
}

void run_mutations(const TargetSpec& t, uint64_t seed) {
  std::vector<Input> seeds = files_in(kFuzzDir / "corpus" / t.name);
  ASSERT_FALSE(seeds.empty());
  auto start = std::chrono::steady_clock::now();
  ReplayResult r = replay(t.name, t.body, mutations(seeds, t.mutations, seed, t.tokens, 64 << 10));
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  expect_no_findings(r);
  std::printf("[ fuzz     ] %s: %d mutations, %d accepted, %d skipped (open regressions), %.1f s\n",
              t.name.c_str(), r.inputs, r.accepted, r.skipped, s);
  // Mutations that are all refused would test only the first bytes of the parser.
  EXPECT_GT(r.accepted, 0);
}

// Replays fuzz/regressions/<target>/ (the folder must exist and hold inputs). With
// `hostile`, every regression is an input that must be refused with rlx::Error: one that
// is accepted means the bug it records (e.g. a size that wraps) is back.
void run_regressions(const std::string& target, const Body& body, bool hostile) {
  OpenRegressions open = open_regressions(target);
  const fs::path dir = kFuzzDir / "regressions" / target;
  ASSERT_TRUE(fs::is_directory(dir)) << dir << " is missing";
  auto inputs = files_in(dir, open.names);
  ASSERT_FALSE(inputs.empty()) << dir << " holds no regression inputs";
  ReplayResult r = replay(target, body, inputs);
  expect_no_findings(r);
  if (hostile) {
    EXPECT_EQ(r.accepted, 0) << r.accepted << " hostile regression inputs of " << target << " were accepted";
  }
  std::printf("[ fuzz     ] %s: %zu fixed regressions replayed, %zu still open (fuzz/regressions/open.txt)\n",
              target.c_str(), inputs.size(), open.names.size());
}

TargetSpec gguf_spec() {
  return {"gguf", gguf_one_input, 6000,
          {"GGUF", "\x03\x00\x00\x00", "\x02\x00\x00\x00", "general.alignment", "tokenizer.ggml.model",
           "tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.pre", "llama", "gpt2", "qwen2",
           "\x08\x00\x00\x00", "\x09\x00\x00\x00", "\x0c\x00\x00\x00", "\xff\xff\xff\xff\xff\xff\xff\x7f",
           "\x00\x00\x00\x00\x00\x00\x00\x00", "\x20\x00\x00\x00\x00\x00\x00\x00", "<0x41>", "\xe2\x96\x81"},
          1.0};
}

TEST(FuzzSmoke, GgufSeeds) { run_seeds(gguf_spec()); }
TEST(FuzzSmoke, GgufMutations) { run_mutations(gguf_spec(), 0x67677566); }
TEST(FuzzSmoke, GgufRegressions) { run_regressions("gguf", gguf_one_input, true); }
TEST(FuzzSmoke, NpySeeds) { run_seeds(npy_spec()); }
TEST(FuzzSmoke, NpyMutations) { run_mutations(npy_spec(), 0x6e7079); }
TEST(FuzzSmoke, NpyRegressions) { run_regressions("npy", npy_one_input, true); }
TEST(FuzzSmoke, TextSeeds) { run_seeds(text_spec()); }
TEST(FuzzSmoke, TextMutations) { run_mutations(text_spec(), 0x74657874); }
TEST(FuzzSmoke, TextRegressions) { run_regressions("text", text_one_input, true); }
#ifdef RLX_HAVE_ONNX
TEST(FuzzSmoke, OnnxSeeds) { run_seeds(onnx_spec()); }
TEST(FuzzSmoke, OnnxMutations) { run_mutations(onnx_spec(), 0x6f6e6e78); }
TEST(FuzzSmoke, OnnxRegressions) { run_regressions("onnx", onnx_one_input, false); }
#endif

// ---- the harness itself can fail

TEST(FuzzSmokeHarness, ReportsEveryExceptionButRlxError) {
  std::vector<Input> inputs = {{"a", {1}}, {"b", {2}}, {"c", {3}}, {"d", {4}}, {"e", {5}}};
  Body body = [](const uint8_t* d, size_t) {
    return guard([&] {
      switch (d[0]) {
        case 1: return;                                                    // accepted
        case 2: fail(ErrorCategory::Parse, "refused");                     // refused: fine
        case 3: throw std::out_of_range("vector::at");                     // a finding
        case 4: fail(ErrorCategory::Internal, "internal check failed");    // a finding
        default: throw Finding("round trip differs");                      // a finding
      }
    });
  };
  ReplayResult r = replay("harness-check", body, inputs);
  EXPECT_EQ(r.inputs, 5);
  EXPECT_EQ(r.accepted, 1);
  // An Internal rlx::Error is a finding only in strict mode (RLX_FUZZ_STRICT=1).
  ASSERT_EQ(r.findings.size(), strict_mode() ? 3u : 2u);
  EXPECT_NE(r.findings[0].find("c (saved as"), std::string::npos) << r.findings[0];
  EXPECT_NE(r.findings[0].find("vector::at"), std::string::npos);
  if (strict_mode()) {
    EXPECT_NE(r.findings[1].find("internal error"), std::string::npos) << r.findings[1];
  }
  EXPECT_NE(r.findings.back().find("round trip differs"), std::string::npos);
  fs::remove_all(fs::path(RLX_BINARY_DIR) / "fuzz-smoke-failures" / "harness-check");
}

TEST(FuzzSmokeHarness, MutationsAreDeterministicAndChangeTheInput) {
  std::vector<Input> seeds = {{"s0", Bytes(40, 'a')}, {"s1", Bytes(25, 'b')}};
  auto a = mutations(seeds, 200, 42, {"tok"}, 1 << 10);
  auto b = mutations(seeds, 200, 42, {"tok"}, 1 << 10);
  auto c = mutations(seeds, 200, 43, {"tok"}, 1 << 10);
  int changed = 0, differ = 0, spliced = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].bytes, b[i].bytes) << i;
    EXPECT_LE(a[i].bytes.size(), size_t(1 << 10));
    const Bytes& from = a[i].origin.find("s0") != std::string::npos ? seeds[0].bytes : seeds[1].bytes;
    changed += a[i].bytes != from;
    differ += a[i].bytes != c[i].bytes;
    spliced += std::count(a[i].bytes.begin(), a[i].bytes.end(), 'a') > 0 &&
               std::count(a[i].bytes.begin(), a[i].bytes.end(), 'b') > 0;
  }
  EXPECT_GT(changed, 180);
  EXPECT_GT(differ, 150);
  EXPECT_GT(spliced, 10);
}

TEST(FuzzSmokeHarness, SizeHelpersSaturate) {
  EXPECT_EQ(bounded_numel(Shape({3, 4}, DType::F32), 2), 12);
  // A Shape cannot be larger than 2^62 bytes; symbols bound to a large size can saturate.
  EXPECT_THROW(Shape({int64_t(1) << 40, int64_t(1) << 40, 7}, DType::F32), Error);
  Graph s;
  Shape sym(std::vector<Dim>{s.sym("a"), s.sym("b"), Dim(7)}, DType::F32);
  EXPECT_EQ(bounded_numel(sym, int64_t(1) << 40), kSaturated);
  EXPECT_EQ(bounded_numel(Shape({int64_t(1) << 40, 0}, DType::F32), 2), 0);
  Graph g;
  Dim n = g.sym("n");
  auto x = g.input("x", Shape(std::vector<Dim>{n, 8}, DType::F32));
  g.set_outputs({g.relu(x)});
  EXPECT_TRUE(fits_budget(g));
  EXPECT_FALSE(fits_budget(g, GraphBudget{96, 1 << 16, 1 << 20, int64_t(1) << 20}));
}

}  // namespace
}  // namespace rlx::fuzz
