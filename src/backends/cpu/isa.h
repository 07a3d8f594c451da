// Run-time instruction set detection (CPUID). Kernels pick an implementation when the
// call is built, so run() never dispatches on ISA.
#pragma once
#include <string_view>

namespace rlx::cpu {

enum class Isa { Scalar, Avx2, Avx512 };
Isa detect_isa();              // honours RLX_ISA=scalar|avx2|avx512 to force a lower level
std::string_view isa_name(Isa isa);
// AVX-512 VNNI (int8 dot products), usable only when detect_isa() is Avx512.
bool has_avx512_vnni();

}  // namespace rlx::cpu
