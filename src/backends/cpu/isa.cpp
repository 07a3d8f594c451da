// CPUID-based ISA detection. A level counts only when both the CPU reports the
// instructions and the OS saves the register state (XCR0), otherwise using them faults.
#include "backends/cpu/isa.h"

#include <cstdint>
#include <cstdlib>
#include <string>

#include "rlx/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define RLX_X86 1
#endif

namespace rlx::cpu {
namespace {

#if RLX_X86
uint64_t read_xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

Isa detect_hardware() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return Isa::Scalar;
  const bool osxsave = c & (1u << 27), avx = c & (1u << 28), fma = c & (1u << 12),
             f16c = c & (1u << 29);
  if (!osxsave || !avx) return Isa::Scalar;
  const uint64_t xcr0 = read_xcr0();
  if ((xcr0 & 0x6) != 0x6) return Isa::Scalar;  // XMM and YMM state
  if (__get_cpuid_max(0, nullptr) < 7) return Isa::Scalar;
  __cpuid_count(7, 0, a, b, c, d);
  const bool avx2 = b & (1u << 5);
  if (!avx2 || !fma || !f16c) return Isa::Scalar;
  const bool f = b & (1u << 16), dq = b & (1u << 17), bw = b & (1u << 30), vl = b & (1u << 31);
  const bool zmm_state = (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM0-15 upper halves, ZMM16-31
  if (f && dq && bw && vl && zmm_state) return Isa::Avx512;
  return Isa::Avx2;
}
bool detect_vnni() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return false;
  __cpuid_count(7, 0, a, b, c, d);
  return c & (1u << 11);  // AVX512_VNNI
}
#else
Isa detect_hardware() { return Isa::Scalar; }
bool detect_vnni() { return false; }
#endif

}  // namespace

bool has_avx512_vnni() {
  static const bool vnni = detect_vnni();
  return vnni && detect_isa() == Isa::Avx512;
}

Isa detect_isa() {
  static const Isa hardware = detect_hardware();
  // The override is read on every call so tests can compare levels in one process.
  const char* env = std::getenv("RLX_ISA");
  if (!env || !*env) return hardware;
  std::string v(env);
  Isa wanted;
  if (v == "scalar") wanted = Isa::Scalar;
  else if (v == "avx2") wanted = Isa::Avx2;
  else if (v == "avx512") wanted = Isa::Avx512;
  else if (v == "native") return hardware;
  else fail(ErrorCategory::InvalidArgument, "RLX_ISA='", v, "' is not one of scalar, avx2, avx512, native");
  // Only a lower level can be forced; asking for more than the CPU has gives the CPU's level.
  return int(wanted) < int(hardware) ? wanted : hardware;
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "unknown";
}

}  // namespace rlx::cpu
