// A kernel timeline of any CUDA program, rlx or a peer, unchanged: built as a shared library
// and named in CUDA_INJECTION64_PATH, the driver loads it at the program's first CUDA call;
// it records every kernel's start and end on the GPU (CUPTI's activity API, the records
// nsys is built on, which the GPU machine's image lacks) and, with RLX_KERNEL_TRACE_HOST=1,
// every memory copy and every CUDA runtime call the host makes (their start and end on the
// host, in the same clock), and writes them at exit, one line each, to the file named by
// RLX_KERNEL_TRACE (default kernel_trace.tsv):
//   what  start_ns  end_ns  graph_id  graph_node_id  grid_x|bytes  block_x|copy_kind  registers  name
// what: k (kernel), m (memory copy), a (runtime call; name is the call's).
// Kernels replayed from a CUDA graph are recorded one by one, with their graph's ids, so a
// decode step's kernels can be cut out of the replays (kernel_trace.py does that).
//   g++ -O2 -shared -fPIC -I/usr/local/cuda/include -o libkernel_trace.so bench/gpu/kernel_trace.cpp -lcupti
//       (with -L naming the toolkit's lib directory)
//   CUDA_INJECTION64_PATH=$PWD/libkernel_trace.so RLX_KERNEL_TRACE=t.tsv rlx llm-bench ...
#include <cupti.h>
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Kernel {
  char what;
  unsigned long long start, end;
  unsigned graph_id, grid, block, regs;
  unsigned long long node;
  std::string name;
};

std::mutex mu;
std::vector<Kernel> kernels;
constexpr size_t kBuffer = 8 << 20;

std::string demangled(const char* name) {
  if (!name) return "?";
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string s = status == 0 && d ? d : name;
  std::free(d);
  return s;
}

void CUPTIAPI requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBuffer));
  *size = *buffer ? kBuffer : 0;
  *max_records = 0;
}

void CUPTIAPI completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* r = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(r);
      kernels.push_back({'k', k->start, k->end, k->graphId, unsigned(k->gridX), unsigned(k->blockX),
                         unsigned(k->registersPerThread), k->graphNodeId, demangled(k->name)});
    } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(r);
      kernels.push_back({'m', m->start, m->end, m->graphId, unsigned(m->bytes), unsigned(m->copyKind), 0,
                         m->graphNodeId, "memcpy"});
    } else if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(r);
      const char* name = nullptr;
      cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, a->cbid, &name);
      kernels.push_back({'a', a->start, a->end, 0, 0, 0, 0, 0, name ? name : "?"});
    }
  }
  std::free(buffer);
}

void write_trace() {
  cuptiActivityFlushAll(1);
  const char* path = std::getenv("RLX_KERNEL_TRACE");
  FILE* f = std::fopen(path && *path ? path : "kernel_trace.tsv", "w");
  if (!f) return;
  std::lock_guard<std::mutex> lock(mu);
  for (const Kernel& k : kernels)
    std::fprintf(f, "%c\t%llu\t%llu\t%u\t%llu\t%u\t%u\t%u\t%s\n", k.what, k.start, k.end, k.graph_id, k.node, k.grid,
                 k.block, k.regs, k.name.c_str());
  std::fclose(f);
  std::fprintf(stderr, "kernel_trace: %zu records\n", kernels.size());
}

}  // namespace

extern "C" int InitializeInjection() {
  if (cuptiActivityRegisterCallbacks(requested, completed) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "kernel_trace: CUPTI could not be enabled\n");
    return 0;
  }
  const char* host = std::getenv("RLX_KERNEL_TRACE_HOST");
  if (host && *host == '1' &&
      (cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS ||
       cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME) != CUPTI_SUCCESS))
    std::fprintf(stderr, "kernel_trace: copies and runtime calls cannot be recorded\n");
  std::atexit(write_trace);
  return 1;
}
