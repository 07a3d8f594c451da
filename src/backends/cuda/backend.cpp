// CudaExecutable / CudaBackend: the runtime's view of the CUDA backend (backend.h).
// One device arena (one cudaMalloc) holds inputs, constants and activations at their
// planned offsets; params live in device allocations of their own, by name, shared
// between executables (share_params_from) through a shared_ptr. run() launches the steps
// on the executable's stream: eagerly the first time (a failing launch names its node),
// then the schedule is captured once into a CUDA Graph and replayed; anything that moves
// a pointer (other weights, poisoning switched) drops the graph so the next run captures
// again. Transfers are stream-ordered and synchronous for the caller.
#include "backends/cuda/backend.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/backend.h"
#include "backends/cuda/blas.h"
#include "backends/cuda/dnn.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/program.h"
#include "ir/op_table.h"

namespace rlx::cuda {

namespace {

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail(ErrorCategory::Internal, "CUDA ", what, ": ", cudaGetErrorString(e));
}

// Held while a schedule is captured and around every call that allocates, frees or
// creates device objects (memory, streams, cuBLAS handles, graphs): some of them
// synchronize the device, which would break a capture running in another thread
// (executables of different graphs may run on different threads). Replays and transfers
// do not take it. Recursive: construction allocates under it.
std::recursive_mutex& device_sync_mutex() {
  static std::recursive_mutex m;
  return m;
}
using DeviceLock = std::lock_guard<std::recursive_mutex>;

struct DeviceMem {
  void* p = nullptr;
  size_t bytes = 0;
  explicit DeviceMem(size_t n) : bytes(n) {
    DeviceLock lock(device_sync_mutex());
    if (n) {
      const cudaError_t e = cudaMalloc(&p, n);
      if (e != cudaSuccess)
        fail(ErrorCategory::ResourceExhausted, "CUDA: cannot allocate ", n, " bytes of device memory: ",
             cudaGetErrorString(e));
    }
  }
  ~DeviceMem() {
    if (p) {
      DeviceLock lock(device_sync_mutex());
      cudaFree(p);
    }
  }
  DeviceMem(const DeviceMem&) = delete;
  DeviceMem& operator=(const DeviceMem&) = delete;
};

// Params by name, each in its own allocation.
struct Weights {
  struct Entry {
    Shape type;
    std::unique_ptr<DeviceMem> mem;
    bool set = false;
  };
  std::map<std::string, Entry> entries;
};

// Device memory that executables' inputs are bound to (bind_value_storage: one KV cache for
// several compiled passes). Its transfers go through a stream of its own and are waited for.
class CudaStorage final : public backend::Storage {
 public:
  explicit CudaStorage(size_t n) : mem_(n ? n : 1), bytes_(n) {
    DeviceLock lock(device_sync_mutex());
    ok(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
    ok(cudaMemsetAsync(mem_.p, 0, mem_.bytes, stream_), "shared buffer");
    ok(cudaStreamSynchronize(stream_), "shared buffer");
  }
  ~CudaStorage() override {
    DeviceLock lock(device_sync_mutex());
    if (stream_) cudaStreamDestroy(stream_);
  }
  CudaStorage(const CudaStorage&) = delete;
  CudaStorage& operator=(const CudaStorage&) = delete;
  size_t bytes() const override { return bytes_; }
  void write(size_t offset, const void* src, size_t n) override { copy(p() + offset, src, n, cudaMemcpyHostToDevice); }
  void read(size_t offset, void* dst, size_t n) const override { copy(dst, p() + offset, n, cudaMemcpyDeviceToHost); }
  bool copy_from(const backend::Storage& src, size_t src_offset, size_t dst_offset, size_t n) override {
    auto* c = dynamic_cast<const CudaStorage*>(&src);
    if (!c) return false;
    copy(p() + dst_offset, c->p() + src_offset, n, cudaMemcpyDeviceToDevice);
    return true;
  }
  uint8_t* p() const { return static_cast<uint8_t*>(mem_.p); }

 private:
  void copy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) const {
    if (!n) return;
    ok(cudaMemcpyAsync(dst, src, n, kind, stream_), "shared buffer copy");
    ok(cudaStreamSynchronize(stream_), "shared buffer copy");
  }
  DeviceMem mem_;
  size_t bytes_ = 0;
  cudaStream_t stream_ = nullptr;
};

// An input bound to a CudaStorage: arena bytes [begin, end) live at `offset` of `storage`,
// and the arena is laid out without `left_out` of them (their size rounded down to whole
// 256-byte units, so every later offset keeps its alignment).
struct Bound {
  int64_t begin = 0, end = 0;
  std::shared_ptr<CudaStorage> storage;
  size_t offset = 0;
  int64_t left_out = 0;
};
// The device address of arena offset `off` under `bound` (sorted, disjoint): inside a bound
// input, its storage; elsewhere `arena`, with every left-out range before it removed.
uint8_t* arena_at(const std::vector<Bound>& bound, void* arena, int64_t off) {
  int64_t shift = 0;
  for (const Bound& b : bound) {
    if (off < b.begin) break;
    if (off < b.end) return b.storage->p() + b.offset + (off - b.begin);
    shift += b.left_out;
  }
  return static_cast<uint8_t*>(arena) + (off - shift);
}
bool in_bound(const std::vector<Bound>& bound, int64_t off) {
  for (const Bound& b : bound)
    if (off >= b.begin && off < b.end) return true;
  return false;
}
// Calls f(b, e) for the pieces of [begin, end) that lie in no range of `a` or `b_list`.
template <class F>
void unbound_pieces(int64_t begin, int64_t end, const std::vector<Bound>& a, const std::vector<Bound>& b_list, F f) {
  std::vector<int64_t> cuts{begin, end};
  for (const auto* l : {&a, &b_list})
    for (const Bound& b : *l)
      for (int64_t c : {b.begin, b.end})
        if (c > begin && c < end) cuts.push_back(c);
  std::sort(cuts.begin(), cuts.end());
  for (size_t i = 0; i + 1 < cuts.size(); ++i)
    if (cuts[i + 1] > cuts[i] && !in_bound(a, cuts[i]) && !in_bound(b_list, cuts[i])) f(cuts[i], cuts[i + 1]);
}

class CudaExecutable final : public backend::Executable {
 public:
  // Every transfer goes through stream_ and is waited for on it: nothing touches the legacy
  // stream or synchronizes the device, which would disturb other executables' captures.
  explicit CudaExecutable(std::shared_ptr<const Program> p) : prog_(std::move(p)), weights_(std::make_shared<Weights>()) {
    DeviceLock lock(device_sync_mutex());
    ok(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
    for (const ParamSlot& ps : prog_->params) {
      Weights::Entry e{ps.type, std::make_unique<DeviceMem>(ps.type.bytes()), ps.type.bytes() == 0};
      const Blob& init = prog_->plan.graph.node(ps.node).attr<LeafAttrs>().init;
      if (!init.empty()) {
        ok(cudaMemcpyAsync(e.mem->p, init.data(), init.size(), cudaMemcpyHostToDevice, stream_), "param upload");
        e.set = true;
      }
      weights_->entries.emplace(ps.name, std::move(e));
    }
    setup();
    for (const auto& c : prog_->constants)
      ok(cudaMemcpyAsync(ptr(c.where), c.bytes.data(), c.bytes.size(), cudaMemcpyHostToDevice, stream_),
         "constant upload");
    ok(cudaStreamSynchronize(stream_), "constant upload");
  }
  ~CudaExecutable() override {
    DeviceLock lock(device_sync_mutex());
    if (graph_) cudaGraphExecDestroy(graph_);
    if (blas_) blas().destroy(blas_);
    dnn_destroy_handle(dnn_);
    if (stream_) cudaStreamDestroy(stream_);
    if (err_host_) cudaFreeHost(err_host_);
    for (Pinned& p : pinned_)
      if (p.p) cudaFreeHost(p.p);
    if (readback_) cudaFreeHost(readback_);
    if (profile_) print_profile();
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }

  const opt::Plan& plan() const override { return prog_->plan; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.device = "cuda";
    c.threads = 1;
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) c.isa = "sm_" + std::to_string(prop.major * 10 + prop.minor);
    c.active_extent = false;
    c.precisions = {"f32", "tf32", "f16", "bf16"};
    return c;
  }
  int num_kernel_calls() const override { return int(prog_->steps.size()); }

  bool stored(Value v) const override { return !ref(v).absent(); }
  uint8_t* host_data(Value) override { return nullptr; }  // device memory only
  void upload(Value v, const void* src, size_t bytes) override { upload_range(v, 0, src, bytes); }
  void download(Value v, void* dst, size_t bytes) const override {
    auto* self = const_cast<CudaExecutable*>(this);
    if (!bytes) return;
    self->read_back(self->checked(v, bytes), dst, bytes);
  }
  void upload_range(Value v, size_t offset, const void* src, size_t bytes) override {
    const size_t total = prog_->plan.graph.type(v).bytes();
    if (offset > total || bytes > total - offset)
      fail(ErrorCategory::Internal, "transfer of ", bytes, " bytes at offset ", offset, " into a value of ", total, " bytes");
    if (!bytes) return;
    ok(cudaMemcpyAsync(checked(v, total) + offset, src, bytes, cudaMemcpyHostToDevice, stream_), "upload");
    // From pageable memory the call returns once `src` is staged, so it can be reused at
    // once and the copy stays queued before the next run; pinned memory is read by the DMA
    // itself, so wait for that (a KV row write per layer and head must not cost a sync).
    cudaPointerAttributes attr{};
    const cudaError_t q = cudaPointerGetAttributes(&attr, src);
    if (q != cudaSuccess) cudaGetLastError();  // the failed query's own (non-sticky) error, not a kernel's
    // A value in shared storage is also written by that storage's own calls and by other
    // executables on their streams: wait there too. Only there: a pass whose caches are
    // bound keeps its own inputs (embeddings, rotary rows, lengths) on its stream alone.
    const Ref& r = ref(v);
    const bool shared = r.segment == opt::Segment::Arena && in_bound(bound_, r.offset);  // laid out by checked()
    if (q != cudaSuccess || attr.type != cudaMemoryTypeUnregistered || shared)
      ok(cudaStreamSynchronize(stream_), "upload");
  }
  void download_range(Value v, size_t offset, void* dst, size_t bytes) const override {
    auto* self = const_cast<CudaExecutable*>(this);
    const size_t total = prog_->plan.graph.type(v).bytes();
    if (offset > total || bytes > total - offset)
      fail(ErrorCategory::Internal, "transfer of ", bytes, " bytes at offset ", offset, " from a value of ", total, " bytes");
    if (!bytes) return;
    self->read_back(self->checked(v, total) + offset, dst, bytes);
  }
  // A read the host waits for. Up to kStagedRead bytes (a decode step's logits) go through
  // one pinned buffer kept with the executable: the copy is then a single DMA and a memcpy,
  // where pageable memory costs the driver's own chunked staging on every call.
  static constexpr size_t kStagedRead = size_t(1) << 20;
  void read_back(const uint8_t* src, void* dst, size_t bytes) {
    if (bytes <= kStagedRead) {
      if (!readback_tried_) {  // asked for once; without pinned memory, the direct copy below
        readback_tried_ = true;
        if (cudaHostAlloc(&readback_, kStagedRead, cudaHostAllocDefault) != cudaSuccess) {
          readback_ = nullptr;
          cudaGetLastError();
        }
      }
      if (readback_) {
        ok(cudaMemcpyAsync(readback_, src, bytes, cudaMemcpyDeviceToHost, stream_), "download");
        ok(cudaStreamSynchronize(stream_), "download");
        std::memcpy(dst, readback_, bytes);
        return;
      }
    }
    ok(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "download");
    ok(cudaStreamSynchronize(stream_), "download");
  }
  bool bind_value_external(Value, void*, size_t) override { return false; }  // device memory: not in place
  std::shared_ptr<backend::Storage> allocate_storage(size_t bytes) override { return std::make_shared<CudaStorage>(bytes); }
  // A bound input's bytes leave the arena: it is allocated again without them (the other
  // inputs and constants copied across), so passes bound to one buffer hold its memory once.
  // That layout waits until the arena is next touched (settle_layout), so binding every cache
  // of a new pass (an LLM engine's 2 x layers calls) allocates and copies the arena once,
  // and moving every binding of a pass to other bytes (a slot change) resolves the pointers
  // once.
  bool bind_value_storage(Value v, const std::shared_ptr<backend::Storage>& s, size_t offset, size_t bytes) override {
    const Ref& r = ref(v);
    if (r.absent() || r.segment != opt::Segment::Arena || bytes != prog_->plan.graph.type(v).bytes() || !bytes)
      fail(ErrorCategory::Internal, "bind_value_storage: value (", v.node, ", ", v.out, ") is not an arena value of ",
           bytes, " bytes");
    std::shared_ptr<CudaStorage> cs;
    if (s && !(cs = std::dynamic_pointer_cast<CudaStorage>(s))) return false;
    std::vector<Bound> nb = pending_ ? *pending_ : bound_;
    auto it = std::find_if(nb.begin(), nb.end(), [&](const Bound& b) { return b.begin == r.offset; });
    if (!cs) {
      if (it == nb.end()) return true;
      nb.erase(it);
    } else if (it != nb.end()) {
      it->storage = cs;
      it->offset = offset;
    } else {
      nb.push_back(Bound{r.offset, r.offset + int64_t(bytes), cs, offset, int64_t(bytes) / 256 * 256});
      std::sort(nb.begin(), nb.end(), [](const Bound& a, const Bound& b) { return a.begin < b.begin; });
    }
    pending_ = std::move(nb);
    drop_graph();
    return true;
  }
  void copy_value(Value src, Value dst, size_t bytes) override {
    if (!bytes) return;
    uint8_t *s = checked(src, bytes), *d = checked(dst, bytes);
    if (s == d) return;
    if (s < d + bytes && d < s + bytes) {  // overlapping: through a temporary
      DeviceMem tmp(bytes);
      ok(cudaMemcpyAsync(tmp.p, s, bytes, cudaMemcpyDeviceToDevice, stream_), "copy");
      ok(cudaMemcpyAsync(d, tmp.p, bytes, cudaMemcpyDeviceToDevice, stream_), "copy");
      ok(cudaStreamSynchronize(stream_), "copy");  // before tmp goes
      return;
    }
    // Queued on the stream, before any later run or read: no host wait, so a handle fed from
    // an output (a decode step's token) does not stop pipelined runs (commit_no_wait).
    ok(cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice, stream_), "copy");
  }

  // Kept as values (their storage is the arena's, fixed for the executable's life) and
  // made by end_run, inside the recorded graph.
  bool set_run_copies(const std::vector<RunCopy>& copies) override {
    std::vector<RunCopy> keep;
    for (const RunCopy& c : copies) {
      const uint8_t *s = checked(c.src, c.bytes), *d = checked(c.dst, c.bytes);
      if (s == d || !c.bytes) continue;
      if (s < d + c.bytes && d < s + c.bytes) return false;  // overlapping: copy_value's temporary
      keep.push_back(c);
    }
    auto same = [](const RunCopy& a, const RunCopy& b) { return a.src == b.src && a.dst == b.dst && a.bytes == b.bytes; };
    if (std::equal(keep.begin(), keep.end(), run_copies_.begin(), run_copies_.end(), same)) return true;  // graph kept
    run_copies_ = std::move(keep);
    prepare_run_end();
    drop_graph();
    return true;
  }

  // Device to device on this executable's stream, once `src`'s own stream has drained (it may
  // still be copying handles after its last run); waited for once at the end, so `src` may
  // run (or go) as soon as this returns.
  bool copy_ranges_from(backend::Executable& src, const std::vector<RangeCopy>& copies) override {
    auto* o = dynamic_cast<CudaExecutable*>(&src);
    if (!o) return false;
    if (o != this) ok(cudaStreamSynchronize(o->stream_), "handle copy");
    for (const RangeCopy& c : copies) {
      if (!c.bytes) continue;
      const uint8_t* from = o->checked(c.src, o->prog_->plan.graph.type(c.src).bytes()) + c.src_offset;
      uint8_t* to = checked(c.dst, prog_->plan.graph.type(c.dst).bytes()) + c.dst_offset;
      ok(cudaMemcpyAsync(to, from, c.bytes, cudaMemcpyDeviceToDevice, stream_), "handle copy");
    }
    ok(cudaStreamSynchronize(stream_), "handle copy");
    return true;
  }

  bool has_param(const std::string& name) const override { return weights_->entries.count(name) > 0; }
  uint8_t* param_host_data(const std::string&) override { return nullptr; }
  void write_param(const std::string& name, size_t offset, const void* src, size_t bytes) override {
    Weights::Entry& e = entry(name);
    if (offset > e.type.bytes() || bytes > e.type.bytes() - offset)
      fail(ErrorCategory::InvalidArgument, "param '", name, "': bytes [", offset, ", ", offset + bytes, ") outside its ",
           e.type.bytes());
    if (!bytes) return;
    ok(cudaMemcpyAsync(static_cast<uint8_t*>(e.mem->p) + offset, src, bytes, cudaMemcpyHostToDevice, stream_),
       "param upload");
    ok(cudaStreamSynchronize(stream_), "param upload");
  }
  void mark_param_set(const std::string& name) override { entry(name).set = true; }
  void bind_param_external(const std::string& name, const void* bytes, size_t nbytes,
                           std::shared_ptr<const void>) override {  // device memory: a copy
    if (nbytes != entry(name).type.bytes())
      fail(ErrorCategory::InvalidArgument, "param '", name, "': ", nbytes, " bytes given, it has ",
           entry(name).type.bytes());
    write_param(name, 0, bytes, nbytes);
    mark_param_set(name);
  }
  bool param_set(const std::string& name) const override { return const_cast<CudaExecutable*>(this)->entry(name).set; }
  void copy_params_from(const backend::Executable& other) override {
    const auto& o = as_cuda(other, "copy_params_from");
    if (o.weights_ == weights_) return;
    for (auto& [name, e] : weights_->entries) {
      auto it = o.weights_->entries.find(name);
      if (it == o.weights_->entries.end() || !(it->second.type == e.type))
        fail(ErrorCategory::InvalidArgument, "copy_params_from: the source does not store param '", name, "' as ",
             e.type.str());
    }
    for (auto& [name, e] : weights_->entries) {
      const Weights::Entry& src = o.weights_->entries.at(name);
      if (e.type.bytes())
        ok(cudaMemcpyAsync(e.mem->p, src.mem->p, e.type.bytes(), cudaMemcpyDeviceToDevice, stream_), "param copy");
      e.set = e.set || src.set;
    }
    ok(cudaStreamSynchronize(stream_), "param copy");
  }
  void share_params_from(const backend::Executable& other) override {
    const auto& o = as_cuda(other, "share_params_from");
    for (const auto& [name, e] : weights_->entries) {
      auto it = o.weights_->entries.find(name);
      if (it == o.weights_->entries.end() || !(it->second.type == e.type))
        fail(ErrorCategory::InvalidArgument, "share_params_from: the source does not store param '", name, "' as ",
             e.type.str());
    }
    weights_ = o.weights_;
    resolve();
  }
  bool shares_params_with(const backend::Executable& other) const override {
    auto* o = dynamic_cast<const CudaExecutable*>(&other);
    return o && o->weights_ == weights_;
  }

  void run() override {
    if (profile_) return run_profiled();
    launch();
    wait_async();
  }
  // Pipelined runs (backend.h): the launch returns; outputs asked for are copied into pinned
  // staging behind the run and from there to the caller's memory by wait_async().
  void run_async() override {
    if (profile_) return run_profiled();
    launch();
  }
  void download_async(Value v, void* dst, size_t bytes) override {
    if (!bytes) return;
    if (staged_ == pinned_.size()) pinned_.emplace_back();
    Pinned& p = pinned_[staged_++];
    if (p.bytes < bytes) {
      if (p.p) cudaFreeHost(p.p);
      p.p = nullptr;
      p.bytes = 0;
      ok(cudaHostAlloc(&p.p, bytes, cudaHostAllocDefault), "pinned staging");
      p.bytes = bytes;
    }
    p.dst = dst;
    p.used = bytes;
    ok(cudaMemcpyAsync(p.p, checked(v, bytes), bytes, cudaMemcpyDeviceToHost, stream_), "download");
  }
  void wait_async() override {
    const size_t staged = staged_;
    staged_ = 0;
    finish();  // raises a run's error (the staged copies are then dropped)
    for (size_t i = 0; i < staged; ++i) std::memcpy(pinned_[i].dst, pinned_[i].p, pinned_[i].used);
  }
  // Every row is computed: rows past an active extent are undefined by contract, so full
  // runs honour it; capabilities() says active_extent = false (no work is skipped).
  void set_extent(int64_t, int64_t) override {}
  void release_scratch() override {}  // device memory stays allocated with the executable
  void set_poison_scratch(bool on) override {
    if (on != poison_) drop_graph();
    poison_ = on;
  }
  std::unique_ptr<backend::Executable> clone() const override {
    DeviceLock lock(device_sync_mutex());
    settle_layout();
    auto c = std::unique_ptr<CudaExecutable>(new CudaExecutable(prog_, deep_copy(*weights_, stream_)));
    // Inputs and constants carry over: the persistent ranges of the arena (a bound input's
    // bytes are its storage's, which the clone is bound to as well).
    for (const auto& [b, e] : prog_->plan.memory.persistent)
      unbound_pieces(b, e, bound_, {}, [&](int64_t pb, int64_t pe) {
        ok(cudaMemcpyAsync(static_cast<uint8_t*>(c->arena_->p) + pb, at(pb), size_t(pe - pb), cudaMemcpyDeviceToDevice,
                           stream_),
           "clone");
      });
    ok(cudaStreamSynchronize(stream_), "clone");
    if (!bound_.empty()) c->relayout(bound_);
    c->poison_ = poison_;
    return c;
  }

 private:
  CudaExecutable(std::shared_ptr<const Program> p, std::shared_ptr<Weights> w) : prog_(std::move(p)), weights_(std::move(w)) {
    DeviceLock lock(device_sync_mutex());
    ok(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
    setup();
  }
  static std::shared_ptr<Weights> deep_copy(const Weights& w, cudaStream_t s) {
    auto c = std::make_shared<Weights>();
    for (const auto& [name, e] : w.entries) {
      Weights::Entry n{e.type, std::make_unique<DeviceMem>(e.type.bytes()), e.set};
      if (e.type.bytes())
        ok(cudaMemcpyAsync(n.mem->p, e.mem->p, e.type.bytes(), cudaMemcpyDeviceToDevice, s), "clone");
      c->entries.emplace(name, std::move(n));
    }
    ok(cudaStreamSynchronize(s), "clone");
    return c;
  }
  void setup() {
    const Blas& b = blas();
    if (b.create(&blas_) != CUBLAS_STATUS_SUCCESS) fail(ErrorCategory::Internal, "cuBLAS: cublasCreate failed");
    b.set_stream(blas_, stream_);
    // A workspace of our own so that cuBLAS allocates nothing while a graph is captured.
    blas_ws_ = std::make_unique<DeviceMem>(size_t(32) << 20);
    b.set_workspace(blas_, blas_ws_->p, blas_ws_->bytes);
    b.set_pointer_mode(blas_, CUBLAS_POINTER_MODE_HOST);
    if (prog_->uses_dnn) {
      dnn_ = dnn_create_handle(stream_);
      if (!dnn_) fail(ErrorCategory::Internal, "cuDNN: cudnnCreate failed");
    }
    arena_ = std::make_unique<DeviceMem>(size_t(std::max<int64_t>(prog_->plan.memory.arena_bytes, 1)));
    if (prog_->scratch_bytes) scratch_ = std::make_unique<DeviceMem>(prog_->scratch_bytes);  // im2col columns
    ok(cudaMemsetAsync(arena_->p, 0, arena_->bytes, stream_), "arena");
    err_ = std::make_unique<DeviceMem>(2 * sizeof(int));
    ok(cudaMemsetAsync(err_->p, 0, err_->bytes, stream_), "error record");
    // The record's host copy: pinned and mapped for the device, so the run's last kernel
    // stores it there (run_end; a graph holds that launch) and finish() needs one wait.
    if (!err_host_) {
      ok(cudaHostAlloc(reinterpret_cast<void**>(&err_host_), 2 * sizeof(int), cudaHostAllocMapped), "error record");
      err_host_[0] = err_host_[1] = 0;
      if (cudaHostGetDevicePointer(reinterpret_cast<void**>(&err_mapped_), err_host_, 0) != cudaSuccess) {
        err_mapped_ = nullptr;  // the record then comes back by a copy
        cudaGetLastError();
      }
    }
    ok(cudaStreamSynchronize(stream_), "setup");
    resolve();
  }
  void resolve() {
    param_ptr_.clear();
    for (const ParamSlot& ps : prog_->params) param_ptr_.push_back(static_cast<uint8_t*>(weights_->entries.at(ps.name).mem->p));
    ptrs_.resize(prog_->refs.size());
    for (size_t i = 0; i < prog_->refs.size(); ++i) ptrs_[i] = ptr(prog_->refs[i]);
    prepare_run_end();
    drop_graph();
  }
  uint8_t* ptr(const Ref& r) const {
    if (r.absent()) return nullptr;
    if (r.segment == opt::Segment::Weights) return param_ptr_[size_t(r.param)] + r.offset;
    return at(r.offset);
  }
  uint8_t* at(int64_t off) const {
    settle_layout();
    return arena_at(bound_, arena_->p, off);
  }
  // Lays the arena out for the bindings made since it was last touched (bind_value_storage).
  // Every address of an arena value comes through at(), so nothing sees the old layout. When
  // the bound ranges are those of the layout in place (bindings moved to other bytes only),
  // the arena stays and only the pointers are resolved again, once the work queued with the
  // old ones is done (their storage may go with bound_). A layout that fails (out of memory)
  // leaves the old one and the bindings still pending: the failing call reports it, and the
  // next use tries again rather than read the old bytes.
  void settle_layout() const {
    if (!pending_) return;
    std::optional<std::vector<Bound>> nb = std::move(pending_);
    pending_.reset();  // relayout reads the old arena through at()
    auto* self = const_cast<CudaExecutable*>(this);
    try {
      if (same_ranges(*nb, bound_)) {
        ok(cudaStreamSynchronize(stream_), "rebind");
        self->bound_ = *nb;  // a copy: should resolve() fail, nb stays pending whole
        self->resolve();
      } else {
        self->relayout(*nb);
      }
    } catch (...) {
      pending_ = std::move(nb);
      throw;
    }
  }
  static bool same_ranges(const std::vector<Bound>& a, const std::vector<Bound>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const Bound& x, const Bound& y) {
      return x.begin == y.begin && x.end == y.end && x.left_out == y.left_out;
    });
  }
  // The arena allocated again for the bindings `nb`: persistent bytes outside every bound
  // input (before and after) copied to their new place, an input leaving a binding zeroed.
  void relayout(std::vector<Bound> nb) {
    DeviceLock lock(device_sync_mutex());
    ok(cudaStreamSynchronize(stream_), "arena relayout");
    int64_t left = 0;
    for (const Bound& b : nb) left += b.left_out;
    auto na = std::make_unique<DeviceMem>(size_t(std::max<int64_t>(prog_->plan.memory.arena_bytes - left, 1)));
    ok(cudaMemsetAsync(na->p, 0, na->bytes, stream_), "arena");
    for (const auto& [b, e] : prog_->plan.memory.persistent)
      unbound_pieces(b, e, bound_, nb, [&](int64_t pb, int64_t pe) {
        ok(cudaMemcpyAsync(arena_at(nb, na->p, pb), at(pb), size_t(pe - pb), cudaMemcpyDeviceToDevice, stream_),
           "arena relayout");
      });
    ok(cudaStreamSynchronize(stream_), "arena relayout");
    arena_ = std::move(na);
    bound_ = std::move(nb);
    resolve();
  }
  void enqueue() {
    if (poison_)
      for (const auto& [b, e] : prog_->plan.memory.scratch)
        if (e > b) ok(cudaMemsetAsync(at(b), 0xFF, size_t(e - b), stream_), "poison");
    LaunchCtx ctx{stream_, blas_, static_cast<int*>(err_->p), 0, scratch_ ? scratch_->p : nullptr, blas_ws_->p,
                  blas_ws_->bytes, dnn_};
    for (size_t i = 0; i < prog_->steps.size(); ++i) {
      const Step& s = prog_->steps[i];
      ctx.step = int(i) + 1;
      ctx.settled = s.settled;
      s.fn(ctx, ptrs_.data() + s.first);
    }
    end_run();
  }
  // The run's last work: the handles' copies (set_run_copies) and the error record to the host.
  void end_run() {
    for (const BigCopy& c : big_copies_) ok(cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyDeviceToDevice, stream_), "handle copy");
    if (!err_mapped_)
      ok(cudaMemcpyAsync(err_host_, err_->p, 2 * sizeof(int), cudaMemcpyDeviceToHost, stream_), "error record");
    ok(run_end(run_end_, stream_), "run end");
  }
  // end_run's launch arguments, resolved when the copies or the storage change (not per run):
  // the small copies go to the run-end kernel, the rest (over its limits) to cudaMemcpyAsync.
  void prepare_run_end() {
    run_end_ = RunEnd{};
    big_copies_.clear();
    for (const RunCopy& c : run_copies_) {
      uint8_t *s = checked(c.src, c.bytes), *d = checked(c.dst, c.bytes);
      if (c.bytes > RunEnd::kMaxBytes || run_end_.n == RunEnd::kMaxCopies) {
        big_copies_.push_back({s, d, c.bytes});
        continue;
      }
      run_end_.src[run_end_.n] = s;
      run_end_.dst[run_end_.n] = d;
      run_end_.bytes[run_end_.n++] = uint32_t(c.bytes);
    }
    run_end_.err = static_cast<const int*>(err_->p);
    run_end_.err_host = err_mapped_;
  }
  void launch() {
    settle_layout();
    if (!graph_ && ran_once_ && replay_) capture();
    if (graph_) {
      ok(cudaGraphLaunch(graph_, stream_), "graph launch");
    } else {
      enqueue();
      ran_once_ = true;
    }
  }
  void capture() {
    DeviceLock lock(device_sync_mutex());
    ok(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "graph capture");
    try {
      enqueue();
    } catch (...) {
      cudaGraph_t g = nullptr;
      cudaStreamEndCapture(stream_, &g);
      if (g) cudaGraphDestroy(g);
      throw;
    }
    cudaGraph_t g = nullptr;
    ok(cudaStreamEndCapture(stream_, &g), "graph capture");
    const cudaError_t e = cudaGraphInstantiate(&graph_, g, 0);
    cudaGraphDestroy(g);
    if (e != cudaSuccess) {
      graph_ = nullptr;
      ok(e, "graph instantiate");
    }
  }
  void drop_graph() {
    DeviceLock lock(device_sync_mutex());
    if (graph_) cudaGraphExecDestroy(graph_);
    graph_ = nullptr;
  }
  // Waits for the run; a device error names its step's node, and the record is cleared
  // so the executable stays usable.
  void finish() {
    const cudaError_t e = cudaStreamSynchronize(stream_);
    if (e != cudaSuccess) fail(ErrorCategory::Internal, "CUDA run failed: ", cudaGetErrorString(e));
    const int rec[2] = {err_host_[0], err_host_[1]};
    if (rec[0]) {
      err_host_[0] = err_host_[1] = 0;
      ok(cudaMemsetAsync(err_->p, 0, sizeof rec, stream_), "error record");
      ok(cudaStreamSynchronize(stream_), "error record");
      const Node& n = prog_->plan.graph.node(prog_->steps.at(size_t(rec[1] - 1)).node);
      fail(ErrorCategory::InvalidArgument, "node '", n.name, "' (", op_name(n.kind), "): an index is out of range");
    }
  }
  // RLX_PROFILE=1: each step between two events, summed per op kind over the runs.
  void run_profiled() {
    settle_layout();
    const size_t n = prog_->steps.size();
    while (events_.size() < n + 1) {
      cudaEvent_t e;
      ok(cudaEventCreate(&e), "profile event");
      events_.push_back(e);
    }
    const auto t0 = std::chrono::steady_clock::now();
    LaunchCtx ctx{stream_, blas_, static_cast<int*>(err_->p), 0, scratch_ ? scratch_->p : nullptr, blas_ws_->p,
                  blas_ws_->bytes, dnn_};
    // The device first waits while the host queues every step (longer than the last run
    // took to queue them): the events then time the kernels back to back, not the host's
    // launch gaps.
    ok(spin(int64_t(1e6 * (queue_ms_ > 0 ? 1.5 * queue_ms_ + 1 : 200.0)), stream_), "profile spin");
    ok(cudaEventRecord(events_[0], stream_), "profile event");
    for (size_t i = 0; i < n; ++i) {
      ctx.step = int(i) + 1;
      ctx.settled = prog_->steps[i].settled;
      prog_->steps[i].fn(ctx, ptrs_.data() + prog_->steps[i].first);
      ok(cudaEventRecord(events_[i + 1], stream_), "profile event");
    }
    end_run();
    queue_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    finish();
    // The first run pays one-time costs (kernel modules loaded on first launch, cuBLASLt's
    // heuristics): it is not counted.
    if (!profile_warm_) {
      profile_warm_ = true;
      return;
    }
    wall_ms_ += queue_ms_;
    ++runs_;
    step_ms_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      float ms = 0;
      ok(cudaEventElapsedTime(&ms, events_[i], events_[i + 1]), "profile event");
      step_ms_[i] += ms;
      auto& [t, c] = by_op_[step_label(prog_->steps[i])];
      t += ms;
      ++c;
    }
  }
  // The op kind a step runs ("qmatmul+add" for a fused pair).
  std::string step_label(const Step& s) const {
    const Graph& g = prog_->plan.graph;
    if (s.label) return s.label;
    std::string l(op_name(g.node(s.node).kind));
    return s.fused < 0 ? l : std::string(op_name(g.node(s.fused).kind)) + "+" + l;
  }
  void print_profile() const {
    if (!runs_) return;
    std::vector<std::pair<double, std::string>> rows;
    double total = 0;
    for (const auto& [name, tc] : by_op_) {
      rows.emplace_back(tc.first, name);
      total += tc.first;
    }
    std::sort(rows.rbegin(), rows.rend());
    std::fprintf(stderr, "rlx profile (cuda): %lld runs of %zu kernel steps; per run %.3f ms on the device (kernels back to back), %.3f ms to queue them on the host\n",
                 static_cast<long long>(runs_), prog_->steps.size(), total / double(runs_), wall_ms_ / double(runs_));
    for (const auto& [t, name] : rows)
      std::fprintf(stderr, "  %-20s %9.3f ms per run  %6.1f%%  (%lld launches per run)\n", name.c_str(), t / double(runs_),
                   100 * t / total, static_cast<long long>(by_op_.at(name).second / runs_));
    std::vector<std::pair<double, size_t>> slow;
    for (size_t i = 0; i < step_ms_.size(); ++i) slow.emplace_back(step_ms_[i], i);
    std::sort(slow.rbegin(), slow.rend());
    std::fprintf(stderr, "  slowest steps:\n");
    const Graph& g = prog_->plan.graph;
    for (size_t j = 0; j < std::min<size_t>(slow.size(), 10); ++j) {
      const Node& nd = g.node(prog_->steps[slow[j].second].node);
      std::string types;
      for (const Value& v : nd.inputs)
        if (v.valid()) types += (types.empty() ? "" : ", ") + g.type(v).str();
      std::fprintf(stderr, "    %8.3f ms  %s '%s' (%s) -> %s\n", slow[j].first / double(runs_),
                   step_label(prog_->steps[slow[j].second]).c_str(),
                   nd.name.c_str(), types.c_str(), nd.outputs.empty() ? "" : nd.outputs[0].str().c_str());
    }
  }

  const Ref& ref(Value v) const {
    if (v.node < 0 || size_t(v.node) >= prog_->values.size() || v.out < 0 ||
        size_t(v.out) >= prog_->values[size_t(v.node)].size())
      fail(ErrorCategory::Internal, "the CUDA executable has no value (", v.node, ", ", v.out, ")");
    return prog_->values[size_t(v.node)][size_t(v.out)];
  }
  uint8_t* checked(Value v, size_t bytes) {
    if (bytes != prog_->plan.graph.type(v).bytes())
      fail(ErrorCategory::Internal, "transfer of ", bytes, " bytes for a value of type ", prog_->plan.graph.type(v).str());
    uint8_t* p = ptr(ref(v));
    if (!p) fail(ErrorCategory::Internal, "value (", v.node, ", ", v.out, ") has no storage");
    return p;
  }
  Weights::Entry& entry(const std::string& name) {
    auto it = weights_->entries.find(name);
    if (it == weights_->entries.end()) fail(ErrorCategory::Internal, "param '", name, "' missing on the device");
    return it->second;
  }
  static const CudaExecutable& as_cuda(const backend::Executable& other, const char* what) {
    auto* o = dynamic_cast<const CudaExecutable*>(&other);
    if (!o) fail(ErrorCategory::InvalidArgument, what, ": the source graph was compiled for another backend");
    return *o;
  }

  std::shared_ptr<const Program> prog_;
  std::shared_ptr<Weights> weights_;
  std::unique_ptr<DeviceMem> arena_, err_, blas_ws_, scratch_;
  std::vector<Bound> bound_;  // inputs bound to shared storage (bind_value_storage), by arena offset
  mutable std::optional<std::vector<Bound>> pending_;  // bindings the arena is not laid out for yet (settle_layout)
  std::vector<uint8_t*> param_ptr_;
  std::vector<void*> ptrs_;
  cudaStream_t stream_ = nullptr;
  struct Pinned {  // pipelined runs: staging for download_async
    void* p = nullptr;
    size_t bytes = 0, used = 0;
    void* dst = nullptr;
  };
  std::vector<Pinned> pinned_;
  void* readback_ = nullptr;  // read_back's staging, kStagedRead pinned bytes
  size_t staged_ = 0;  // pinned_[0, staged_) hold copies queued since the last wait
  cublasHandle_t blas_ = nullptr;
  void* dnn_ = nullptr;  // cuDNN handle on stream_ (dnn.h), when the program uses one
  cudaGraphExec_t graph_ = nullptr;
  int* err_host_ = nullptr;  // pinned: the run copies the error record here
  int* err_mapped_ = nullptr;  // err_host_ as the device sees it (nullptr: a copy instead)
  std::vector<RunCopy> run_copies_;
  struct BigCopy {
    const uint8_t* src;
    uint8_t* dst;
    size_t bytes;
  };
  RunEnd run_end_;                   // prepare_run_end
  std::vector<BigCopy> big_copies_;  // prepare_run_end
  bool readback_tried_ = false;      // read_back's pinned buffer was asked for
  // RLX_PROFILE
  bool profile_ = [] {
    const char* v = std::getenv("RLX_PROFILE");
    return v && std::string(v) == "1";
  }();
  // RLX_CUDA_GRAPH=0: eager launches on every run (for measuring what replay saves)
  bool replay_ = [] {
    const char* v = std::getenv("RLX_CUDA_GRAPH");
    return !(v && std::string(v) == "0");
  }();
  std::vector<cudaEvent_t> events_;
  std::map<std::string, std::pair<double, int64_t>> by_op_;
  std::vector<double> step_ms_;
  double queue_ms_ = 0;  // host time the last profiled run took to queue its steps
  bool profile_warm_ = false;
  double wall_ms_ = 0;
  int64_t runs_ = 0;
  bool ran_once_ = false, poison_ = false;
};

// Counts the devices in a short-lived child process: initializing CUDA here would leave
// this process unable to fork children that use CUDA (rlx test-onnx isolates each case in
// a forked child), and a probe must not make a CPU-only caller pay for a driver start.
// Returns "" when a device is usable, else why not.
std::string probe_in_child() {
  int fds[2];
  if (pipe(fds) != 0) return "cannot probe the CUDA device (pipe failed)";
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return "cannot probe the CUDA device (fork failed)";
  }
  if (pid == 0) {
    close(fds[0]);
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    std::string msg = e != cudaSuccess ? std::string("no usable CUDA device (") + cudaGetErrorString(e) + ")"
                      : n == 0         ? std::string("no CUDA device")
                                       : std::string();
    if (!msg.empty() && write(fds[1], msg.data(), msg.size()) < 0) {}
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[256];
  for (ssize_t r; (r = read(fds[0], buf, sizeof buf)) > 0;) msg.append(buf, size_t(r));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "the CUDA device probe crashed";
  return msg;
}

class CudaBackend final : public backend::Backend {
 public:
  std::string name() const override { return "cuda"; }
  Device device() const override { return Device::Cuda; }
  bool available(std::string* why) const override {
    static std::once_flag once;
    static std::string reason;
    std::call_once(once, [] {
      // The runtime reports a missing driver as "insufficient driver": say what is missing.
      if (void* drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
        dlclose(drv);
      } else {
        reason = "no NVIDIA driver on this machine (libcuda.so.1 cannot be loaded)";
        return;
      }
      reason = probe_in_child();
    });
    if (!reason.empty() && why) *why = reason;
    return reason.empty();
  }
  // Convolutions and pools channels last where the convolutions run on tensor cores (TF32,
  // F16, BF16: cuDNN's NHWC kernels); exact f32 ones are faster NCHW (ResNet-50 b32 on the
  // H200: 9.8 ms NCHW, 12.4 ms NHWC; TF32 4.04 -> 2.35 ms NHWC).
  opt::BackendClaims claims(const CompileOptions& opts) const override {
    const bool nhwc = opts.precision != Precision::F32;
    opt::BackendClaims c{"cuda", [nhwc](const Node& n, const std::vector<const Shape*>& in) {
                           return (nhwc || !ir::is_channels_last(n)) && supports(n, in);
                         }};
    c.joint_steps = joint_steps;  // the launches of several nodes the memory plan must allow for
    return c;
  }
  // Constants fold on the host, with the CPU oracle's kernels.
  opt::ConstEvaluator const_evaluator() const override { return cpu_->const_evaluator(); }
  std::unique_ptr<backend::Executable> compile(opt::Plan plan, const CompileOptions& opts) const override {
    std::string why;
    if (!available(&why)) fail(ErrorCategory::Unsupported, "the cuda backend cannot run here: ", why);
    LowerOptions lo;
    lo.tf32 = opts.precision == Precision::TF32;
    std::shared_ptr<Program> prog = compile_program(std::move(plan), lo);
    auto exe = std::make_unique<CudaExecutable>(prog);
    // The device weights hold the params' initial data now: keep it in one place only.
    for (const ParamSlot& ps : prog->params) prog->plan.graph.mutable_node(ps.node).attr<LeafAttrs>().init = Blob();
    return exe;
  }

 private:
  std::unique_ptr<backend::Backend> cpu_ = cpu::make_backend();
};

}  // namespace

std::unique_ptr<backend::Backend> make_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace rlx::cuda
