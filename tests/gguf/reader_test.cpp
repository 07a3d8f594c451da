// GGUF reader and writer: real files, round trips, and hostile inputs (every truncation,
// absurd counts, bad offsets, overlaps) that must be refused with Error(Parse) naming the
// byte offset, never a crash.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "rlx/gguf.h"

namespace rlx::gguf {
namespace {

std::string shared(const std::string& rel) { return std::string(RLX_SHARED_DIR) + "/gguf/" + rel; }

Writer small_model() {
  Writer w;
  w.set_string("general.architecture", "test");
  w.set_u32("test.block_count", 2);
  w.set_f32("test.eps", 1e-5f);
  w.set_bool("test.flag", true);
  w.set_strings("tokenizer.ggml.tokens", {"a", "b", "", "\xe2\x96\x81x"});
  w.set_f32s("tokenizer.ggml.scores", {0.5f, -1.f, 2.f, 3.f});
  w.set_i32s("tokenizer.ggml.token_type", {1, 1, 3, 6});
  std::vector<float> m(64 * 3);
  for (size_t i = 0; i < m.size(); ++i) m[i] = float(i) * 0.25f - 7.f;
  w.add_tensor("m.weight", {64, 3}, TensorType::F32,
               std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(m.data()), m.size() * 4));
  std::vector<uint8_t> q(static_cast<size_t>(row_bytes(TensorType::Q8_0, 64)));
  quantize(TensorType::Q8_0, m.data(), q.data(), 64);
  w.add_tensor("q.weight", {64}, TensorType::Q8_0, q);
  return w;
}

void expect_parse_error(const std::vector<uint8_t>& b, const std::string& must_contain = "") {
  try {
    File::parse(b, "hostile");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::Parse) << e.what();
    EXPECT_NE(std::string(e.what()).find("hostile"), std::string::npos) << e.what();
    if (!must_contain.empty()) {
      EXPECT_NE(std::string(e.what()).find(must_contain), std::string::npos) << e.what();
    }
  }
}

TEST(GgufReader, RoundTripsEveryValueKind) {
  std::vector<uint8_t> b = small_model().bytes();
  File f = File::parse(b, "rt");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_string("general.architecture"), "test");
  EXPECT_EQ(f.get_int("test.block_count"), 2);
  EXPECT_FLOAT_EQ(static_cast<float>(f.get_float("test.eps", 0)), 1e-5f);
  EXPECT_TRUE(f.get_bool("test.flag", false));
  EXPECT_EQ(f.get_strings("tokenizer.ggml.tokens")[3], "\xe2\x96\x81x");
  EXPECT_EQ(f.get_numbers("tokenizer.ggml.token_type")[2], 3);
  ASSERT_EQ(f.tensors().size(), 2u);
  const TensorInfo& m = f.tensor("m.weight");
  EXPECT_EQ(m.dims, (std::vector<int64_t>{64, 3}));
  float v;
  std::memcpy(&v, f.data(m) + 4 * 5, 4);
  EXPECT_EQ(v, 5 * 0.25f - 7.f);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  EXPECT_EQ(f.tensor("q.weight").bytes, 68u);
  // Lookups of absent or wrongly typed keys name the key.
  try {
    f.get_int("general.architecture");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("general.architecture"), std::string::npos);
  }
  EXPECT_THROW(f.tensor("nope"), Error);
}

TEST(GgufReader, ReadsTheSharedFixtures) {
  if (!std::filesystem::exists(shared("archs/llama-dense.gguf"))) GTEST_SKIP() << "no " << shared("");
  File f = File::open(shared("archs/llama-dense.gguf"));
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.tensors().size(), 64u);
  EXPECT_EQ(f.tensor("token_embd.weight").dims, (std::vector<int64_t>{256, 128}));
  File v = File::open(shared("vocab/ggml-vocab-qwen2.gguf"));
  EXPECT_EQ(v.tensors().size(), 0u);
  EXPECT_EQ(v.get_strings("tokenizer.ggml.tokens").size(), 151936u);
  EXPECT_EQ(v.get_strings("tokenizer.ggml.merges").size(), 151387u);
}

TEST(GgufReader, EveryTruncationIsRefused) {
  std::vector<uint8_t> b = small_model().bytes();
  File f = File::parse(b, "whole");
  const size_t end = f.data_offset() + f.tensor("q.weight").offset + f.tensor("q.weight").bytes;  // then padding
  for (size_t n = 0; n < end; ++n) {
    std::vector<uint8_t> t(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
    expect_parse_error(t);
  }
}

TEST(GgufReader, RandomCorruptionNeverCrashes) {
  std::vector<uint8_t> b = small_model().bytes();
  std::mt19937 rng(7);
  int refused = 0;
  for (int it = 0; it < 3000; ++it) {
    std::vector<uint8_t> c = b;
    for (int k = 0; k < 1 + it % 4; ++k) c[rng() % c.size()] = static_cast<uint8_t>(rng());
    try {
      File::parse(c, "x");
    } catch (const Error& e) {
      ASSERT_EQ(e.category(), ErrorCategory::Parse) << e.what();
      ++refused;
    }
  }
  EXPECT_GT(refused, 100);
}

// Byte offsets of fields in small_model()'s header, found by scanning for known text.
size_t find(const std::vector<uint8_t>& b, const std::string& s) {
  auto it = std::search(b.begin(), b.end(), s.begin(), s.end());
  return static_cast<size_t>(it - b.begin());
}

template <class T>
void put(std::vector<uint8_t>& b, size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof v);
}

TEST(GgufReader, HostileHeadersNameTheProblem) {
  const std::vector<uint8_t> good = small_model().bytes();
  {
    auto b = good;
    b[0] = 'X';
    expect_parse_error(b, "not a GGUF file");
  }
  {
    auto b = good;
    put<uint32_t>(b, 4, 1);
    expect_parse_error(b, "version 1");
  }
  {
    auto b = good;
    put<uint32_t>(b, 4, 0x03000000);
    expect_parse_error(b, "big-endian");
  }
  {
    auto b = good;
    put<uint64_t>(b, 8, uint64_t(1) << 60);
    expect_parse_error(b, "tensor count");
  }
  {
    auto b = good;
    put<uint64_t>(b, 16, ~uint64_t(0));
    expect_parse_error(b, "metadata count");
  }
  {  // a string array whose count cannot fit
    auto b = good;
    size_t at = find(b, "tokenizer.ggml.tokens") + 21 + 4 + 4;  // key, value type, element type
    put<uint64_t>(b, at, uint64_t(1) << 40);
    expect_parse_error(b, "cannot fit");
  }
  {  // unknown tensor type
    auto b = good;
    size_t at = find(b, "m.weight") + 8 + 4 + 16;
    put<uint32_t>(b, at, 4);  // a retired ggml type
    expect_parse_error(b, "unknown type 4");
  }
  {  // offset past the end
    auto b = good;
    size_t at = find(b, "q.weight") + 8 + 4 + 8 + 4;
    put<uint64_t>(b, at, uint64_t(1) << 20);
    expect_parse_error(b, "past the end");
  }
  {  // the two tensors overlap
    auto b = good;
    size_t at = find(b, "q.weight") + 8 + 4 + 8 + 4;
    put<uint64_t>(b, at, 0);
    expect_parse_error(b, "overlaps");
  }
  {  // misaligned offset
    auto b = good;
    size_t at = find(b, "q.weight") + 8 + 4 + 8 + 4;
    put<uint64_t>(b, at, 801);
    expect_parse_error(b, "alignment");
  }
  {  // a row that is not a whole number of blocks
    auto b = good;
    size_t at = find(b, "q.weight") + 8 + 4;
    put<uint64_t>(b, at, 63);
    expect_parse_error(b, "whole number");
  }
}

TEST(GgufWriter, RefusesInconsistentTensors) {
  Writer w;
  std::vector<uint8_t> d(10);
  EXPECT_THROW(w.add_tensor("t", {3}, TensorType::F32, d), Error);
  EXPECT_THROW(w.add_tensor("t", {31}, TensorType::Q4_0, d), Error);
  EXPECT_THROW(w.add_tensor("t", {}, TensorType::F32, d), Error);
}

}  // namespace
}  // namespace rlx::gguf
