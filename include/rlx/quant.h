// Block-quantized weight formats (ggml's block layouts, numbered as in ggml and GGUF), with
// reference dequantization and quantization that are bit-exact with llama.cpp's reference
// code (see tests/gguf/quants_test.cpp). The IR's qmatmul op and the CPU kernels read these
// formats directly; the GGUF importer uses the same code.
#pragma once
#include <cstdint>
#include <cstddef>

namespace rlx::quant {

struct Format {
  uint32_t id = 0;
  const char* name = nullptr;   // "q4_K", as llama.cpp prints it
  int64_t block_elems = 0;      // elements per block (1 for plain types)
  int64_t block_bytes = 0;      // bytes per block
};

// The format with ggml type number `id`; nullptr for a number that is not one (ggml's
// retired numbers 4, 5, 31-33, 36-38 included).
const Format* find(uint32_t id);
const Format& get(uint32_t id);  // Error(InvalidArgument) naming the number
bool from_name(const char* name, uint32_t& id);  // case-insensitive
// Bytes of `elems` elements (a whole number of blocks, else Error(InvalidArgument)).
int64_t row_bytes(uint32_t id, int64_t elems);

// Dequantizes `n` elements (a whole number of blocks). Supported: f32, f16, bf16, f64,
// q4_0, q4_1, q5_0, q5_1, q8_0, q2_K..q6_K, iq4_nl, iq4_xs; others Error(Unsupported).
bool can_dequantize(uint32_t id);
void dequantize(uint32_t id, const void* src, float* dst, int64_t n);
// Quantizes `n` floats (a whole number of blocks) as ggml's reference quantizers do without
// an importance matrix. Supported: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q6_K.
bool can_quantize(uint32_t id);
void quantize(uint32_t id, const float* src, void* dst, int64_t n);

// ggml type numbers used by name in code.
inline constexpr uint32_t kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14,
                           kIQ4_NL = 20, kIQ4_XS = 23, kBF16 = 30;

// rlx's own layouts (numbers from 256, never in a GGUF file): weights repacked at load time
// for a kernel. q4_0x16: Q4_0 rows interleaved in panels of 16 rows (the row count must be
// a multiple of 16); per panel and block, 288 bytes: the 16 rows' f16 scales, then 4 groups
// of 64 bytes where byte [64g + 4r + j] holds row r's element 4g+j (low nibble) and
// 16+4g+j (high nibble). Same size as Q4_0; only qmatmul reads it (no row dequantizer).
inline constexpr uint32_t kQ4_0x16 = 256;
// Repacks an [rows, k] Q4_0 matrix (rows % 16 == 0) into q4_0x16; dst has the same size.
void repack_q4_0x16(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t k);

}  // namespace rlx::quant
