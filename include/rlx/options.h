// Compile options. Environment variables (RLX_*) only override these; the registry
// of variables is printed by `rlx --help-env` (see env_registry()).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace rlx {

// Null: the null backend (claims no op; for testing the backend interface and as the
// template of a new backend); Session::available_devices() does not list it.
enum class Device { Cpu, Cuda, Null };
std::string_view device_name(Device d);  // "cpu", "cuda", "null"
// F32: f32 everywhere. TF32: f32 values, but matmuls and convolutions may round their
// operands to TF32 (10-bit mantissa, f32 accumulation) where the backend has tensor cores
// for it (CUDA); a backend without them (CPU) computes in full f32. F16 / BF16: the
// precision pass runs compute nodes in the low type (opt/precision.cpp).
enum class Precision { F32, TF32, F16, BF16 };

// The most worker threads a compile may ask for (CompileOptions::threads, RLX_THREADS,
// EngineOptions::threads): far past any machine's cores, low enough that a mistyped count
// is refused instead of starting tens of thousands of threads.
inline constexpr int kMaxThreads = 4096;

struct CompileOptions {
  Precision precision = Precision::F32;
  int threads = 0;                 // 0: hardware concurrency, else 1..kMaxThreads (RLX_THREADS overrides)
  bool fuse_elementwise = true;    // pass fuse-elementwise
  bool fuse_matmul_epilogue = true;  // passes fuse-matmul-epilogue and fuse-conv-epilogue
  bool fuse_norms = true;          // pass fuse-norms (decomposed layer norms -> layer_norm)
  bool fuse_gelu = true;           // pass fuse-gelu (the erf GELU written out -> gelu)
  bool fuse_attention = true;      // pass fuse-attention (matmul, scale, mask, softmax, matmul -> attention)
  bool channels_last = true;       // pass channels-last (convs / pools the backend claims in NHWC; RLX_CHANNELS_LAST)
  bool constant_fold = true;
  bool cse = true;
  bool simplify = true;
  int64_t arena_alignment = 64;
  std::map<std::string, int64_t> dim_bindings;  // symbol name -> size
  bool dispatch_report = false;    // RLX_DISPATCH_REPORT=1
  bool fusion_report = false;      // RLX_FUSION_REPORT=1: the whole fusion report to stderr
  bool arena_report = false;       // RLX_ARENA_REPORT=1
  bool verify_each_pass = false;   // RLX_VERIFY=1; on in tests
  // Cap on the planned activation arena and on the weights segment, each (RLX_MAX_ARENA_BYTES).
  // 0: the machine's physical memory. A plan above the cap is Error(ResourceExhausted)
  // before anything is allocated; the message gives the planned size.
  int64_t max_arena_bytes = 0;
};

// The cap Session::compile applies for these options: max_arena_bytes, or the machine's
// physical memory when that is 0.
int64_t effective_memory_cap(const CompileOptions& opts);

struct EnvVar {
  std::string name, meaning;
};
const std::vector<EnvVar>& env_registry();
// Returns `opts` with RLX_* environment overrides applied.
CompileOptions apply_env(CompileOptions opts);

}  // namespace rlx
