// Internal: K-quant block quantizers (256 elements per block), bit-exact with ggml's
// reference quantize_row_q4_K_ref / quantize_row_q6_K_ref.
#pragma once
#include <cstdint>

namespace rlx::quant {

void quantize_block_q4_k(const float* x, uint8_t* block);  // 144 bytes
void quantize_block_q6_k(const float* x, uint8_t* block);  // 210 bytes

}  // namespace rlx::quant
