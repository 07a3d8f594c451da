// Block-quantized formats: geometry and names (ggml's block structs, ggml-common.h).
#include <cctype>
#include <cstdint>
#include <cstring>

#include "rlx/error.h"
#include "rlx/quant.h"

namespace rlx::quant {

namespace {

// Block sizes follow ggml's block structs: e.g. Q4_K is two f16 scales, 12 packed 6-bit
// sub-block scales and 128 bytes of nibbles for 256 elements.
constexpr Format kFormats[] = {
    {0, "f32", 1, 4},          {1, "f16", 1, 2},         {2, "q4_0", 32, 18},
    {3, "q4_1", 32, 20},       {6, "q5_0", 32, 22},      {7, "q5_1", 32, 24},
    {8, "q8_0", 32, 34},       {9, "q8_1", 32, 36},      {10, "q2_K", 256, 84},
    {11, "q3_K", 256, 110},    {12, "q4_K", 256, 144},   {13, "q5_K", 256, 176},
    {14, "q6_K", 256, 210},    {15, "q8_K", 256, 292},   {16, "iq2_xxs", 256, 66},
    {17, "iq2_xs", 256, 74},   {18, "iq3_xxs", 256, 98}, {19, "iq1_s", 256, 50},
    {20, "iq4_nl", 32, 18},    {21, "iq3_s", 256, 110},  {22, "iq2_s", 256, 82},
    {23, "iq4_xs", 256, 136},  {24, "i8", 1, 1},         {25, "i16", 1, 2},
    {26, "i32", 1, 4},         {27, "i64", 1, 8},        {28, "f64", 1, 8},
    {29, "iq1_m", 256, 56},    {30, "bf16", 1, 2},       {34, "tq1_0", 256, 54},
    {35, "tq2_0", 256, 66},    {39, "mxfp4", 32, 17},     {kQ4_0x16, "q4_0x16", 32, 18},
};

}  // namespace

const Format* find(uint32_t id) {
  for (const Format& f : kFormats)
    if (f.id == id) return &f;
  return nullptr;
}

const Format& get(uint32_t id) {
  const Format* f = find(id);
  if (!f) fail(ErrorCategory::InvalidArgument, "unknown quantized format (ggml type ", id, ")");
  return *f;
}

bool from_name(const char* name, uint32_t& id) {
  const size_t n = std::strlen(name);
  for (const Format& f : kFormats) {
    if (std::strlen(f.name) != n) continue;
    bool same = true;
    for (size_t i = 0; i < n && same; ++i)
      same = std::tolower(static_cast<unsigned char>(f.name[i])) == std::tolower(static_cast<unsigned char>(name[i]));
    if (same) {
      id = f.id;
      return true;
    }
  }
  return false;
}

int64_t row_bytes(uint32_t id, int64_t elems) {
  const Format& f = get(id);
  if (elems < 0 || elems % f.block_elems != 0)
    fail(ErrorCategory::InvalidArgument, "a row of ", elems, " elements is not a whole number of ", f.name,
         " blocks (", f.block_elems, " elements each)");
  if (elems / f.block_elems > INT64_MAX / f.block_bytes)
    fail(ErrorCategory::InvalidArgument, "a row of ", elems, " ", f.name, " elements is larger than 2^63 bytes");
  return elems / f.block_elems * f.block_bytes;
}

void repack_q4_0x16(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t k) {
  if (rows % 16 || k % 32) fail(ErrorCategory::InvalidArgument, "repack_q4_0x16: [", rows, ", ", k, "] is not [16n, 32m]");
  const int64_t nb = k / 32, rb = nb * 18;
  for (int64_t p = 0; p < rows / 16; ++p)
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* out = dst + (p * nb + b) * 288;
      for (int r = 0; r < 16; ++r) {
        const uint8_t* blk = src + (p * 16 + r) * rb + b * 18;
        std::memcpy(out + 2 * r, blk, 2);
        // qs[e] holds elements e (low nibble) and 16+e (high): group g of the panel is
        // qs[4g..4g+3] of every row, side by side.
        for (int g = 0; g < 4; ++g) std::memcpy(out + 32 + 64 * g + 4 * r, blk + 2 + 4 * g, 4);
      }
    }
}

}  // namespace rlx::quant
