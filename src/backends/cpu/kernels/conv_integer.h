// Internal: the integer product of conv_integer (conv_integer.cpp), per instruction set.
//
// Operands, packed by conv_integer.cpp: w4 holds m_pad rows of k4n groups of 4 signed bytes
// (row stride 4 * k4n); x4 holds k4n groups, each `nc` columns of 4 unsigned bytes (group
// stride 4 * nc), so one group of 16 columns is 64 contiguous bytes. The kernel writes
// c[m * nc + j] = sum over groups g and t < 4 of w4[m][4g + t] * x4[g][j][t] (int32, wrapping)
// for m < m_pad and j < nc; m_pad is a multiple of kIntRows and nc of kIntCols.
#pragma once
#include <cstdint>

namespace rlx::cpu {

inline constexpr int64_t kIntRows = 8, kIntCols = 32;

using IntGemmFn = void (*)(const int8_t* w4, int64_t k4n, const uint8_t* x4, int64_t nc, int64_t m_pad, int32_t* c);

void int_gemm_scalar(const int8_t* w4, int64_t k4n, const uint8_t* x4, int64_t nc, int64_t m_pad, int32_t* c);
// u8 x s8 widened to int16 pairs (vpmaddwd): AVX2, and AVX-512 machines without VNNI.
void int_gemm_avx2(const int8_t* w4, int64_t k4n, const uint8_t* x4, int64_t nc, int64_t m_pad, int32_t* c);
// vpdpbusd: four u8 x s8 products into each int32 lane (AVX-512 VNNI).
void int_gemm_vnni(const int8_t* w4, int64_t k4n, const uint8_t* x4, int64_t nc, int64_t m_pad, int32_t* c);

}  // namespace rlx::cpu
