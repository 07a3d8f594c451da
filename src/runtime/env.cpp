// The one registry of RLX_* environment variables and how they override CompileOptions.
// Values are validated: a malformed value is an Error(InvalidArgument) naming the
// variable, never silently ignored. An unset or empty variable changes nothing.
#include <cstdlib>
#include <climits>
#include <cstdint>
#include <string>

#include <unistd.h>

#include "rlx/error.h"
#include "rlx/options.h"
#include "rlx/shape.h"

namespace rlx {

const std::vector<EnvVar>& env_registry() {
  static const std::vector<EnvVar> vars = {
      {"RLX_THREADS", "worker threads for CPU kernels (1 to 4096; overrides CompileOptions::threads)"},
      {"RLX_PRECISION", "compute precision policy: f32, tf32 (f32 values, TF32 matmul and conv math where the backend has it), f16 or bf16 (overrides CompileOptions::precision)"},
      {"RLX_FUSE", "0 turns off the fusion passes fuse-norms, fuse-attention, fuse-elementwise, fuse-matmul-epilogue and fuse-conv-epilogue (1 turns them on)"},
      {"RLX_CHANNELS_LAST", "0 turns off the channels-last pass (convolutions and pools the backend claims in NHWC: CUDA under tf32, f16 and bf16); 1 turns it on (the default)"},
      {"RLX_FUSION_REPORT", "1 prints the whole fusion report (every rewrite, every candidate left apart and why) to stderr at compile"},
      {"RLX_DISPATCH_REPORT", "1 prints the dispatch report (per op kind: native, decomposed, unsupported) to stderr at compile"},
      {"RLX_ARENA_REPORT", "1 prints the memory plan (arena bytes vs lower bound, top buffers) to stderr at compile"},
      {"RLX_VERIFY", "1 verifies the graph after every pass and the memory plan, and poisons scratch memory before each run"},
      {"RLX_MAX_ARENA_BYTES", "cap in bytes on the activation arena and on the weights segment, each (suffixes K, M, G; overrides CompileOptions::max_arena_bytes; default: physical memory)"},
      {"RLX_PROFILE", "1 times every kernel call of every run but the first (which packs weights and touches pages once; CUDA: eager launches queued behind a wait so that they run back to back) and prints the totals per op kind and the slowest calls to stderr when the executable goes"},
      {"RLX_PROFILE_TOP", "how many of the slowest calls RLX_PROFILE lists (CPU; default 8)"},
      {"RLX_CUDA_GRAPH", "0: the CUDA backend launches every kernel of every run itself instead of replaying the run captured as a CUDA Graph (to measure what replay saves)"},
      {"RLX_CUDA_CUDNN", "0: the CUDA backend runs convolutions as im2col + cuBLASLt products instead of through cuDNN"},
      {"RLX_CUDA_ATTENTION", "0: the CUDA backend never claims attention (it is decomposed into products and a softmax, and fuse-attention leaves the exported chain apart); 1: it claims every attention its kernels run; unset: those whose Sq x Sk reaches 512 x 512 (f16, bf16) or 2048 x 2048 (f32), and in f16 / bf16 every one that reads its heads in place (bshd)"},
      {"RLX_CUDA_NHWC", "0: the CUDA backend claims no channels-last (NHWC) convolution or pool, so the channels-last pass keeps them NCHW"},
      {"RLX_CUDA_JIT", "0: the CUDA backend runs fused_elementwise programs in its interpreter kernel instead of compiling each into its own kernel with NVRTC"},
      {"RLX_CPU_WINOGRAD", "0: CPU 3x3 stride-1 convolutions with constant weights take the im2col GEMM instead of Winograd; 2 or 4: Winograd with 2x2 or 4x4 output tiles wherever it applies (default: 4x4 on maps of 24x24 or more, else 2x2)"},
      {"RLX_CPU_CONV_PHASES", "0: CPU stride-2 convolutions pack their im2col panels straight from the image instead of from its four phase planes, and those with constant weights do not read their positions from the planes either (the same bits; to measure what the planes save)"},
      {"RLX_CPU_CONV_DIRECT", "0: CPU stride-2 convolutions with constant weights pack im2col panels from the phase planes instead of reading their output positions from padded planes in place (the same bits; to measure what reading in place saves)"},
      {"RLX_CPU_HALF", "native: the CPU runs f16 / bf16 matmuls, convolutions, attention and norms in their half kernels (weights kept in the half type: less memory, slower) instead of in f32 between casts"},
      {"RLX_ISA", "scalar, avx2, avx512 or native (default): the highest instruction set CPU kernels may use (never above what the CPU has)"},
  };
  return vars;
}

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

bool parse_flag(const char* name, const std::string& v) {
  if (v == "1" || v == "true" || v == "on" || v == "yes") return true;
  if (v == "0" || v == "false" || v == "off" || v == "no") return false;
  fail(ErrorCategory::InvalidArgument, name, "='", v, "': expected 1 or 0");
}

// "123", "64K", "512M", "2G" (powers of 1024); positive, within int64.
int64_t parse_bytes(const char* name, const std::string& v) {
  size_t digits = 0;
  while (digits < v.size() && v[digits] >= '0' && v[digits] <= '9') ++digits;
  int shift = 0;
  std::string suffix = v.substr(digits);
  if (suffix == "K" || suffix == "k") shift = 10;
  else if (suffix == "M" || suffix == "m") shift = 20;
  else if (suffix == "G" || suffix == "g") shift = 30;
  else if (!suffix.empty()) digits = 0;
  int64_t n = 0;
  bool ok = digits > 0 && digits <= 18;
  for (size_t i = 0; ok && i < digits; ++i) n = n * 10 + (v[i] - '0');
  ok = ok && n > 0 && n <= (INT64_MAX >> shift);
  if (!ok) fail(ErrorCategory::InvalidArgument, name, "='", v, "': expected a positive byte count (suffix K, M or G allowed)");
  return n << shift;
}

}  // namespace

int64_t effective_memory_cap(const CompileOptions& opts) {
  if (opts.max_arena_bytes < 0)
    fail(ErrorCategory::InvalidArgument, "CompileOptions::max_arena_bytes is ", opts.max_arena_bytes);
  if (opts.max_arena_bytes > 0) return opts.max_arena_bytes;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return kMaxTensorBytes;
  return int64_t(pages) * int64_t(page);
}

CompileOptions apply_env(CompileOptions opts) {
  if (const char* v = env("RLX_THREADS")) {
    char* end = nullptr;
    long n = std::strtol(v, &end, 10);
    if (*end != '\0' || n < 1 || n > kMaxThreads)
      fail(ErrorCategory::InvalidArgument, "RLX_THREADS='", v, "': expected a thread count from 1 to ", kMaxThreads);
    opts.threads = int(n);
  }
  if (const char* v = env("RLX_PRECISION")) {
    std::string s = v;
    if (s == "f32") opts.precision = Precision::F32;
    else if (s == "tf32") opts.precision = Precision::TF32;
    else if (s == "f16") opts.precision = Precision::F16;
    else if (s == "bf16") opts.precision = Precision::BF16;
    else fail(ErrorCategory::InvalidArgument, "RLX_PRECISION='", s, "': expected f32, tf32, f16 or bf16");
  }
  if (const char* v = env("RLX_FUSE")) {
    bool on = parse_flag("RLX_FUSE", v);
    opts.fuse_elementwise = on;
    opts.fuse_matmul_epilogue = on;
    opts.fuse_norms = on;
    opts.fuse_gelu = on;
    opts.fuse_attention = on;
  }
  if (const char* v = env("RLX_CHANNELS_LAST")) opts.channels_last = parse_flag("RLX_CHANNELS_LAST", v);
  if (const char* v = env("RLX_DISPATCH_REPORT")) opts.dispatch_report = parse_flag("RLX_DISPATCH_REPORT", v);
  if (const char* v = env("RLX_FUSION_REPORT")) opts.fusion_report = parse_flag("RLX_FUSION_REPORT", v);
  if (const char* v = env("RLX_ARENA_REPORT")) opts.arena_report = parse_flag("RLX_ARENA_REPORT", v);
  if (const char* v = env("RLX_VERIFY")) opts.verify_each_pass = parse_flag("RLX_VERIFY", v);
  if (const char* v = env("RLX_MAX_ARENA_BYTES")) opts.max_arena_bytes = parse_bytes("RLX_MAX_ARENA_BYTES", v);
  if (const char* v = env("RLX_ISA")) {
    // Read by the kernels' ISA detection; checked here so a typo is an error at compile.
    std::string s = v;
    if (s != "scalar" && s != "avx2" && s != "avx512" && s != "native")
      fail(ErrorCategory::InvalidArgument, "RLX_ISA='", s, "': expected scalar, avx2, avx512 or native");
  }
  return opts;
}

}  // namespace rlx
