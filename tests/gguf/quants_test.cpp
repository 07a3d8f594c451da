// Dequantization and quantization against llama.cpp v0.5.0's reference code, through the
// fixtures in tests/data/gguf/quants (made by tools/gguf-fixtures/make_quant_fixtures.cpp
// from ggml's own functions; see the README there). Both directions must be bit-exact:
// ggml's dequantizers round at most once per element, in float, and rlx does the same
// operations in the same order; the quantizers are compared byte for byte.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "rlx/gguf.h"

namespace rlx::gguf {
namespace {

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::string dir() { return std::string(RLX_SOURCE_DIR) + "/tests/data/gguf/quants/"; }

struct Case {
  TensorType type;
  bool quantize;
};

class Quants : public ::testing::TestWithParam<Case> {};

TEST_P(Quants, DequantizeIsBitExact) {
  const Case c = GetParam();
  const std::string name = type_name(c.type);
  std::vector<uint8_t> blocks = read_file(dir() + name + ".blocks");
  std::vector<uint8_t> ref = read_file(dir() + name + ".f32");
  ASSERT_FALSE(blocks.empty()) << "missing fixture " << dir() << name << ".blocks";
  const int64_t n = static_cast<int64_t>(ref.size() / 4);
  ASSERT_EQ(static_cast<int64_t>(blocks.size()), row_bytes(c.type, n));
  std::vector<float> got(static_cast<size_t>(n));
  dequantize(c.type, blocks.data(), got.data(), n);
  int bad = 0;
  for (int64_t i = 0; i < n && bad < 5; ++i) {
    uint32_t a, b;
    std::memcpy(&a, &got[static_cast<size_t>(i)], 4);
    std::memcpy(&b, ref.data() + 4 * i, 4);
    if (a != b) {
      float fb;
      std::memcpy(&fb, &b, 4);
      ADD_FAILURE() << name << " element " << i << ": got " << got[static_cast<size_t>(i)] << " want " << fb;
      ++bad;
    }
  }
}

TEST_P(Quants, QuantizeMatchesGgmlReference) {
  const Case c = GetParam();
  ASSERT_EQ(can_quantize(c.type), c.quantize) << type_name(c.type);
  if (!c.quantize) return;  // llama.cpp quantizes to it, rlx does not (rlx quantize refuses it)
  const std::string name = type_name(c.type);
  std::vector<uint8_t> src = read_file(dir() + name + ".qsrc.f32");
  std::vector<uint8_t> ref = read_file(dir() + name + ".qref");
  ASSERT_FALSE(src.empty()) << "missing fixture " << name << ".qsrc.f32";
  const int64_t n = static_cast<int64_t>(src.size() / 4);
  std::vector<float> x(static_cast<size_t>(n));
  std::memcpy(x.data(), src.data(), src.size());
  std::vector<uint8_t> got(static_cast<size_t>(row_bytes(c.type, n)));
  ASSERT_EQ(got.size(), ref.size());
  for (int64_t r = 0; r < n / 256; ++r)  // rows of 256, as the fixture was made
    quantize(c.type, x.data() + r * 256, got.data() + r * row_bytes(c.type, 256), 256);
  size_t diff = 0, first = got.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != ref[i]) {
      ++diff;
      first = std::min(first, i);
    }
  EXPECT_EQ(diff, 0u) << name << ": " << diff << " bytes differ, first at byte " << first;
}

INSTANTIATE_TEST_SUITE_P(
    Ggml, Quants,
    ::testing::Values(Case{TensorType::F16, true}, Case{TensorType::BF16, true}, Case{TensorType::Q4_0, true},
                      Case{TensorType::Q4_1, true}, Case{TensorType::Q5_0, true}, Case{TensorType::Q5_1, true},
                      Case{TensorType::Q8_0, true}, Case{TensorType::Q2_K, false}, Case{TensorType::Q3_K, false},
                      Case{TensorType::Q4_K, true}, Case{TensorType::Q5_K, false}, Case{TensorType::Q6_K, true},
                      Case{TensorType::IQ4_NL, false}, Case{TensorType::IQ4_XS, false}),
    [](const auto& info) { return std::string(type_name(info.param.type)); });

TEST(Quants, UnsupportedTypesAreClearErrors) {
  float out[256];
  uint8_t in[256] = {};
  try {
    dequantize(TensorType::IQ2_XXS, in, out, 256);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::Unsupported);
    EXPECT_NE(std::string(e.what()).find("iq2_xxs"), std::string::npos) << e.what();
  }
  try {
    quantize(TensorType::Q4_0, out, in, 31);  // not a whole block
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::InvalidArgument);
  }
}

// A block format holds finite values only: a row with inf or NaN is refused with the element
// named (the reference rounding would convert them to integers, which is undefined), for every
// block format rlx quantizes to; f16 / bf16 / f32 keep them.
TEST(Quants, NonFiniteRowsAreRefusedByBlockFormats) {
  for (TensorType t : {TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1,
                       TensorType::Q4_K, TensorType::Q6_K}) {
    for (float bad : {NAN, INFINITY, -INFINITY}) {
      std::vector<float> x(256, 0.5f);
      x[77] = bad;
      std::vector<uint8_t> q(static_cast<size_t>(row_bytes(t, 256)));
      try {
        quantize(t, x.data(), q.data(), 256);
        ADD_FAILURE() << type_name(t) << " took " << bad;
      } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::InvalidArgument);
        EXPECT_NE(std::string(e.what()).find("element 77 of the row"), std::string::npos) << e.what();
      }
    }
  }
  for (TensorType t : {TensorType::F32, TensorType::F16, TensorType::BF16}) {
    std::vector<float> x(32, 1.0f), back(32);
    x[3] = INFINITY;
    std::vector<uint8_t> q(static_cast<size_t>(row_bytes(t, 32)));
    quantize(t, x.data(), q.data(), 32);
    dequantize(t, q.data(), back.data(), 32);
    EXPECT_EQ(back[3], INFINITY) << type_name(t);
  }
}

}  // namespace
}  // namespace rlx::gguf
