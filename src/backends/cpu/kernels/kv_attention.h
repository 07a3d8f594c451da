// Internal: the per-ISA kernels of kv_attention (kv_attention.cpp), over a run of n cache rows
// of d elements (f16 or f32, row j at rows + j * d) for g query vectors of one KV head's group
// (its query heads, for one query or a tile of them).
#pragma once
#include <cstdint>

#include "backends/cpu/isa.h"

namespace rlx::cpu {

struct KvKernels {
  // s[h * lds + j] = dot(q + h * d, row j) for h < g, j < n.
  void (*scores)(const void* rows, bool f16, int64_t n, int64_t d, const float* q, int64_t g, float* s,
                 int64_t lds) = nullptr;
  // o[h * d + e] += sum over j < n, in order, of p[h * ldp + j] * row j's element e, for h < g.
  void (*mix)(const void* rows, bool f16, int64_t n, int64_t d, const float* p, int64_t ldp, int64_t g,
              float* o) = nullptr;
};

// The AVX-512 or AVX2 kernels for head dim d (16, 32, ..., 128 or 256); nullptr on a scalar
// CPU or for another d (kv_attention then takes each row's dot and axpy from qdot_kernels).
const KvKernels* kv_kernels(Isa isa, int64_t d);
const KvKernels* kv_kernels_avx2();
const KvKernels* kv_kernels_avx512();

}  // namespace rlx::cpu
