#include "backends/cuda/jit.h"

#include <cuda_runtime_api.h>
#include <nvrtc.h>

#include <map>
#include <mutex>
#include <vector>

#include "backends/cuda/dynlib.h"

namespace rlx::cuda::jit {

namespace {

struct Nvrtc {
  nvrtcResult (*create)(nvrtcProgram*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  nvrtcResult (*compile)(nvrtcProgram, int, const char* const*) = nullptr;
  nvrtcResult (*log_size)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*log)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*cubin_size)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*cubin)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*destroy)(nvrtcProgram*) = nullptr;
  std::string error;
};

const Nvrtc& nvrtc() {
  static Nvrtc n;
  static std::once_flag once;
  std::call_once(once, [] {
    DynLib lib({"libnvrtc.so.13", "libnvrtc.so"}, "NVRTC");
    auto sym = [&](auto& fn, const char* name) { lib.sym(fn, name); };
    sym(n.create, "nvrtcCreateProgram");
    sym(n.compile, "nvrtcCompileProgram");
    sym(n.log_size, "nvrtcGetProgramLogSize");
    sym(n.log, "nvrtcGetProgramLog");
    sym(n.cubin_size, "nvrtcGetCUBINSize");
    sym(n.cubin, "nvrtcGetCUBIN");
    sym(n.destroy, "nvrtcDestroyProgram");
    n.error = lib.error();
  });
  return n;
}

std::string arch_name() {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
    return "";
  return "sm_" + std::to_string(major) + std::to_string(minor);
}

}  // namespace

std::vector<char> compile(const std::string& source, const std::string& name, const std::string& arch, std::string* why) {
  auto refuse = [&](const std::string& msg) {
    if (why) *why = msg;
    return std::vector<char>();
  };
  const Nvrtc& n = nvrtc();
  if (!n.error.empty()) return refuse(n.error);
  nvrtcProgram prog = nullptr;
  if (n.create(&prog, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr) != NVRTC_SUCCESS)
    return refuse("nvrtcCreateProgram failed");
  const std::string arch_opt = "--gpu-architecture=" + arch;
  const char* opts[] = {arch_opt.c_str(), "--std=c++17"};
  const nvrtcResult r = n.compile(prog, 2, opts);
  if (r != NVRTC_SUCCESS) {
    size_t len = 0;
    n.log_size(prog, &len);
    std::string log(len, '\0');
    if (len) n.log(prog, log.data());
    n.destroy(&prog);
    return refuse("NVRTC refused the generated kernel " + name + ": " + log);
  }
  size_t size = 0;
  n.cubin_size(prog, &size);
  std::vector<char> cubin(size);
  n.cubin(prog, cubin.data());
  n.destroy(&prog);
  if (cubin.empty()) return refuse("NVRTC produced no cubin for " + name);
  return cubin;
}

const void* kernel(const std::string& source, const std::string& name, std::string* why) {
  static std::mutex mu;
  static std::map<std::string, const void*> cache;  // name + source -> kernel (modules live as long as the process)
  std::lock_guard<std::mutex> lock(mu);
  const std::string key = name + '\n' + source;
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  const std::string arch = arch_name();
  if (arch.empty()) {
    if (why) *why = "cannot query the CUDA device's architecture";
    return nullptr;
  }
  const std::vector<char> cubin = compile(source, name, arch, why);
  if (cubin.empty()) return nullptr;
  cudaLibrary_t lib = nullptr;
  cudaKernel_t k = nullptr;
  if (cudaLibraryLoadData(&lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0) != cudaSuccess ||
      cudaLibraryGetKernel(&k, lib, name.c_str()) != cudaSuccess) {
    cudaGetLastError();
    if (why) *why = "cannot load the compiled kernel " + name;
    return nullptr;
  }
  cache[key] = reinterpret_cast<const void*>(k);
  return reinterpret_cast<const void*>(k);
}

}  // namespace rlx::cuda::jit
