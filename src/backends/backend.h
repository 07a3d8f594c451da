// The contract between the runtime and a backend: a Backend compiles a Plan into an
// Executable, which the runtime's CompiledGraph forwards every call to.
//
// It sits at the bottom of the backends layer (it needs opt's Plan and the public
// types only), so each backend implements it without depending on the runtime, and the
// runtime drives every backend through it alone: apart from its registry
// (src/runtime/backend_registry.cpp), no runtime file names a backend.
//
// Values are named as the compiled graph names them: Value{node, out} of plan().graph.
// A backend may keep them anywhere (host or device memory); the runtime moves data only
// through upload / download / copy_value and the param calls, and uses host_data() as a
// zero-copy shortcut where the backend has host memory to offer (CPU: always; a device
// backend: never, or for mapped buffers).
//
// Contract for every method: validate, then act; a throw (rlx::Error only) leaves the
// executable as it was. One executable runs on one thread at a time; clone() gives an
// independent one.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "opt/pipeline.h"
#include "opt/plan.h"
#include "rlx/compiled_graph.h"
#include "rlx/error.h"
#include "rlx/options.h"

namespace rlx::backend {

// Memory of one backend that several executables' inputs may read and write in place
// (CompiledGraph::allocate_shared / bind_handle_shared: one KV cache for every pass of a
// decoder). Transfers are done when they return. Errors as rlx::Error.
class Storage {
 public:
  virtual ~Storage() = default;
  virtual size_t bytes() const = 0;
  // [offset, offset + n) within bytes() (the caller checks).
  virtual void write(size_t offset, const void* src, size_t n) = 0;
  virtual void read(size_t offset, void* dst, size_t n) const = 0;
  // dst [dst_offset, + n) <- src [src_offset, + n) on the backend's side (ranges checked, not
  // overlapping); false, having copied nothing, when `src` is another backend's memory.
  virtual bool copy_from(const Storage& src, size_t src_offset, size_t dst_offset, size_t n) = 0;
  // Host memory of the storage, or nullptr (device memory).
  virtual uint8_t* host_data() { return nullptr; }
};

// Zeroed host memory (calloc: pages are touched only as they are written).
class HostStorage final : public Storage {
 public:
  explicit HostStorage(size_t bytes) : p_(static_cast<uint8_t*>(std::calloc(bytes ? bytes : 1, 1))), bytes_(bytes) {
    if (!p_) fail(ErrorCategory::ResourceExhausted, "cannot allocate ", bytes, " bytes of shared host memory");
  }
  ~HostStorage() override { std::free(p_); }
  HostStorage(const HostStorage&) = delete;
  HostStorage& operator=(const HostStorage&) = delete;
  size_t bytes() const override { return bytes_; }
  void write(size_t offset, const void* src, size_t n) override {
    if (n) std::memcpy(p_ + offset, src, n);
  }
  void read(size_t offset, void* dst, size_t n) const override {
    if (n) std::memcpy(dst, p_ + offset, n);
  }
  bool copy_from(const Storage& src, size_t src_offset, size_t dst_offset, size_t n) override {
    auto* h = dynamic_cast<const HostStorage*>(&src);
    if (!h) return false;
    if (n) std::memmove(p_ + dst_offset, h->p_ + src_offset, n);
    return true;
  }
  uint8_t* host_data() override { return p_; }

 private:
  uint8_t* p_ = nullptr;
  size_t bytes_ = 0;
};

class Executable {
 public:
  virtual ~Executable() = default;

  virtual const opt::Plan& plan() const = 0;          // the compiled graph and its memory plan
  virtual Capabilities capabilities() const = 0;
  virtual int num_kernel_calls() const = 0;           // for the compile report

  // ---- values of plan().graph
  // True when the value has storage (false: empty, or dropped by the backend).
  virtual bool stored(Value v) const = 0;
  // Host pointer to the value's bytes, or nullptr when the backend keeps it elsewhere.
  // Valid until the next run / release_scratch.
  virtual uint8_t* host_data(Value v) = 0;
  // Whole-value transfers of exactly the value's byte size (its slot type).
  virtual void upload(Value v, const void* src, size_t bytes) = 0;
  virtual void download(Value v, void* dst, size_t bytes) const = 0;
  // Writes `bytes` at byte `offset` of the value (offset + bytes within its size): the
  // row-sized updates of a resident KV cache.
  virtual void upload_range(Value v, size_t offset, const void* src, size_t bytes) = 0;
  // Reads `bytes` at byte `offset` of the value (within its size): a resident cache's rows
  // brought back without copying the whole value.
  virtual void download_range(Value v, size_t offset, void* dst, size_t bytes) const = 0;
  // Makes a graph input's storage the caller's host memory (`bytes` = its size), read in
  // place by every run from now on (nullptr: back to the backend's own storage). Returns
  // false when the backend cannot read host memory in place (device memory); then nothing
  // changed.
  virtual bool bind_value_external(Value v, void* data, size_t bytes) = 0;
  // Shared storage (Storage above) of this backend: allocate_storage gives zeroed memory that
  // bind_value_storage can bind (the default: host memory); bind_value_storage makes a graph
  // input's storage bytes [offset, offset + its size) of `s` (the caller checks the range),
  // read and written in place by every run from now on; s == nullptr: back to the backend's
  // own storage (zeroed). Returns false, changing nothing, when `s` is not memory this
  // backend reads in place. The default binds host storage through bind_value_external.
  virtual std::shared_ptr<Storage> allocate_storage(size_t bytes) { return std::make_shared<HostStorage>(bytes); }
  virtual bool bind_value_storage(Value v, const std::shared_ptr<Storage>& s, size_t offset, size_t bytes) {
    if (!s) return bind_value_external(v, nullptr, bytes);
    uint8_t* h = s->host_data();
    return h && bind_value_external(v, h + offset, bytes);
  }
  // dst <- src on the backend's side (handles feeding an output back into an input);
  // the two may be the same or overlapping storage. A device backend may queue it behind
  // the runs without waiting: it is ordered before the next run and any read of dst.
  virtual void copy_value(Value src, Value dst, size_t bytes) = 0;
  // Copies (dst <- src, as copy_value) that end every run from now on, done by the run
  // itself (a device backend records them with its schedule), replacing the set given
  // before: the handles that feed an output back into an input. Returns false when the
  // backend leaves them to the caller (copy_value after each run); nothing changed then.
  struct RunCopy {
    Value src, dst;
    size_t bytes = 0;
  };
  virtual bool set_run_copies(const std::vector<RunCopy>& copies) { return copies.empty(); }
  // Byte ranges of `src`'s values (src: an executable of this backend, or this one) into
  // this one's, on the backend's side; each range inside its stored value (the caller checks
  // that, and that no two ranges of one value overlap). Returns false, having copied
  // nothing, when it cannot reach `src`'s storage (another backend): the caller then goes
  // through host memory. Done when it returns (`src` may run or go at once). The default:
  // both executables' host memory (CPU, null).
  struct RangeCopy {
    Value src;
    size_t src_offset = 0;
    Value dst;
    size_t dst_offset = 0;
    size_t bytes = 0;
  };
  virtual bool copy_ranges_from(Executable& src, const std::vector<RangeCopy>& copies) {
    for (const RangeCopy& c : copies)
      if (c.bytes && (!src.host_data(c.src) || !host_data(c.dst))) return false;
    for (const RangeCopy& c : copies)
      if (c.bytes) std::memmove(host_data(c.dst) + c.dst_offset, src.host_data(c.src) + c.src_offset, c.bytes);
    return true;
  }

  // ---- params, by public name (only params the compiled graph kept are present)
  virtual bool has_param(const std::string& name) const = 0;
  virtual uint8_t* param_host_data(const std::string& name) = 0;  // nullptr: not host memory
  virtual void write_param(const std::string& name, size_t offset, const void* src, size_t bytes) = 0;
  virtual void mark_param_set(const std::string& name) = 0;
  // The param reads `bytes` in place from now on (nbytes = its size; valid while `owner`
  // lives) and counts as set. A backend that cannot read host memory in place copies it.
  virtual void bind_param_external(const std::string& name, const void* bytes, size_t nbytes,
                                   std::shared_ptr<const void> owner) = 0;
  virtual bool param_set(const std::string& name) const = 0;
  // Copies every param this executable has from `other` (same backend; types checked).
  virtual void copy_params_from(const Executable& other) = 0;
  // Reads params from `other`'s weights from now on (no copy).
  virtual void share_params_from(const Executable& other) = 0;
  virtual bool shares_params_with(const Executable& other) const = 0;

  // ---- running
  virtual void run() = 0;  // throws Error naming the node whose kernel failed
  // Pipelined runs (CompiledGraph::commit_no_wait): run_async() starts a run and may return
  // before it ends (uploads queued before it are read by it, later ones by later runs);
  // download_async() queues a copy of a value that is in `dst` once wait_async() returns;
  // wait_async() waits for every run and copy queued and raises the first run's error. A
  // host backend runs and copies at once (these defaults).
  virtual void run_async() { run(); }
  virtual void download_async(Value v, void* dst, size_t bytes) { download(v, dst, bytes); }
  virtual void wait_async() {}
  virtual void set_extent(int64_t actual, int64_t upper) = 0;
  virtual void release_scratch() = 0;
  virtual void set_poison_scratch(bool on) = 0;  // RLX_VERIFY: scratch poisoned before each run
  virtual std::unique_ptr<Executable> clone() const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;   // "cpu", "null", "cuda"
  virtual Device device() const = 0;
  // Can this backend run here (device present, driver loaded)? If not, `why` says why.
  virtual bool available(std::string* why) const = 0;
  // What legalize (and the passes that ask first) ask: the ops (with input types) this backend
  // runs natively, for a compile with these options (a claim may depend on the precision policy).
  virtual opt::BackendClaims claims(const CompileOptions& opts) const = 0;
  // Evaluates one node on constant inputs for constant folding (empty: no folding).
  virtual opt::ConstEvaluator const_evaluator() const = 0;
  virtual std::unique_ptr<Executable> compile(opt::Plan plan, const CompileOptions& opts) const = 0;
};

}  // namespace rlx::backend
