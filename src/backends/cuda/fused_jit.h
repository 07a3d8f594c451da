// Internal: the CUDA source of one fused_elementwise program (kernels.h FusedArgs, after
// coalesce), specialized to its iteration space and operand strides: straight-line code, the
// operands' index arithmetic by constants, every instruction computed in f32 exactly as
// the interpreter kernel (elementwise.cu) computes it and rounded to the storage type after
// each one. Compiled through jit.h; the interpreter runs it when NVRTC cannot.
#pragma once
#include <string>

#include "backends/cuda/kernels.h"

namespace rlx::cuda {

inline constexpr const char* kFusedKernelName = "rlx_fused";

// Kernel rlx_fused(const S* in0, ..., const S* in{n_in-1}, S* y, long long n): S the storage
// type of t (float, or the 16 bits of an f16 / bf16).
// The generated kernel's loop runs over 16-byte groups of this many elements when its
// operands allow it (every input contiguous or one element, offsets aligned; pointers are
// checked at run time), else 1: the launch sizes its grid by count / width.
std::string fused_source(const FusedArgs& a, ET t);
int fused_vector_width(const FusedArgs& a, ET t);

}  // namespace rlx::cuda
