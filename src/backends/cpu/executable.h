// The CPU executable: a Plan compiled to a flat schedule of kernel calls ("thunks").
//
// compile(plan) builds an immutable Program once: one thunk per computing node, each a
// kernel function pointer, its prebuilt config and its buffers as (segment, offset)
// references. Leaves (inputs, params, constants) get no thunk; neither do views
// (nodes whose planned outputs alias an input, e.g. a reshape) nor nodes whose outputs
// are all empty. A Program is shared by every Executable made from it (clones).
//
// An Executable is one runnable instance: the activation arena (allocated once,
// 64-byte or plan-aligned, mmapped when large), a weights segment (shared_ptr, so two
// executables may read one), its own thread pool, and the thunks with raw pointers
// resolved once at construction. run() calls the thunks in order and does nothing else:
// no lookups, no allocation, no dispatch on op kind.
//
// Zeroed memory: the executable never clears the arena between runs. Every kernel
// writes every element of its outputs (kernels that honour the active extent write
// every element of the active rows), so clearing would be wasted bandwidth on every
// run. Fresh arenas read as zero (heap blocks are memset, mappings are zero-filled,
// and released pages come back zero-filled). To catch a kernel that breaks the rule,
// set_poison_scratch(true) (RLX_VERIFY=1) fills the scratch ranges with 0xFF bytes
// (NaN for floats) before each run. Rows past an active extent are not defined: with
// poisoning they read as poison, without it they hold whatever was there before.
//
// Threading: one Executable runs on one thread at a time (its pool is not re-entrant);
// clone() gives an independent one (own arena, own pool, a copy of the weights).
// Errors: a kernel that throws surfaces as rlx::Error naming the node; the executable
// stays usable.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/cpu/arena.h"
#include "backends/cpu/kernel.h"
#include "backends/cpu/thread_pool.h"
#include "opt/plan.h"
#include "opt/plan_refs.h"

namespace rlx::cpu {

// Where a value lives. Arena values: a byte offset from the arena base. Weights values:
// `param` indexes Program::params and `offset` is the byte offset inside that param,
// so the same program can run against any weights segment that holds those params.
// offset < 0 means absent (an empty value or a missing optional input): a nullptr.
using BufRef = opt::ValueRef;    // where a value lives (opt/plan_refs.h)
using ParamSlot = opt::ParamSlot;

struct Thunk {
  KernelFn fn = nullptr;
  std::shared_ptr<const void> cfg;
  bool extent_ok = false;
  int32_t node = -1;          // node id in the plan graph (for error messages)
  uint32_t first_buf = 0;     // into Program::bufs: node inputs, then node outputs
  uint32_t num_bufs = 0;
};

struct Program {
  opt::Plan plan;
  std::vector<Thunk> thunks;
  std::vector<BufRef> bufs;
  std::vector<ParamSlot> params;
  std::vector<std::vector<BufRef>> values;  // [node][output]: every value's location
  struct ConstantSlot {
    BufRef where;
    Blob bytes;
  };
  std::vector<ConstantSlot> constants;       // written once per executable
  int num_views = 0;                         // nodes that became aliases (no thunk)
};

// Builds the schedule. Throws Error(Unsupported) naming the node when no CPU kernel
// runs it, Error(Internal) when the memory plan is inconsistent with the graph.
std::shared_ptr<Program> compile(opt::Plan plan);

// Drops the params' initial data from the program's graph. Call it once the first
// Executable has written that data into its weights segment, so params live in one
// place only (clones copy weights segments, never the initial data).
void drop_param_init(Program& program);

// A weights segment: the bytes of named params plus a directory (name -> offset, type,
// whether it has been given a value). Shared between executables by shared_ptr.
// Concurrent runs may read it; writing it while another executable runs is a data race.
class Weights {
 public:
  struct Entry {
    std::string name;
    Shape type;
    int64_t offset = -1;
    bool set = false;     // has initial data or was written through the runtime
    const uint8_t* external = nullptr;  // read in place from outside (set_external), or null
  };
  // Lays out the program's params at their planned offsets and writes initial data.
  explicit Weights(const Program& program);
  std::shared_ptr<Weights> copy() const;

  const std::vector<Entry>& entries() const { return entries_; }
  const Entry* find(const std::string& name) const;
  // Where the param's bytes are: its slot in the segment, or the external bytes (which
  // kernels only read; writers call make_owned first).
  uint8_t* data(const Entry& e) {
    return e.external ? const_cast<uint8_t*>(e.external) : e.offset < 0 ? nullptr : mem_.data() + e.offset;
  }
  const uint8_t* data(const Entry& e) const { return const_cast<Weights*>(this)->data(e); }
  void mark_set(const Entry& e);
  // Reads the param from `p` (its exact bytes, kept valid by `owner`); the segment's pages
  // for it stay untouched. Bumps epoch() so executables sharing these weights re-resolve.
  void set_external(const Entry& e, const uint8_t* p, std::shared_ptr<const void> owner);
  void make_owned(const Entry& e);  // copies external bytes into the segment
  uint64_t epoch() const { return epoch_; }
  int64_t bytes() const { return mem_.size(); }
  int64_t external_bytes() const;

 private:
  Weights() = default;
  Arena mem_;
  int64_t alignment_ = 64;
  std::vector<Entry> entries_;
  std::unordered_map<std::string, size_t> index_;
  std::vector<std::shared_ptr<const void>> owners_;  // keep external bytes alive
  uint64_t epoch_ = 0;
};

class Executable {
 public:
  // threads >= 1. Allocates the arena, writes constants, creates fresh weights.
  Executable(std::shared_ptr<const Program> program, int threads);
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;
  ~Executable();

  // An independent copy: same program, own arena (persistent ranges copied, so inputs
  // and constants carry over), own pool, a deep copy of the weights.
  std::unique_ptr<Executable> clone() const;

  const Program& program() const { return *program_; }
  int threads() const;

  uint8_t* locate(const BufRef& r) const {
    if (r.offset < 0) return nullptr;
    if (r.segment != opt::Segment::Arena) return param_base_[size_t(r.param)] + r.offset;
    for (const Remap& m : remaps_)
      if (r.offset >= m.begin && r.offset < m.end) return m.ext + (r.offset - m.begin);
    return arena_.data() + r.offset;
  }
  // Arena bytes [offset, offset + bytes) (an input's storage) live at `p` from now on:
  // kernels read the caller's memory in place. Clones keep reading the same memory.
  void bind_external(int64_t offset, int64_t bytes, uint8_t* p);

  // Runs every thunk in order. Throws Error naming the node whose kernel failed.
  void run();

  void set_extent(int64_t actual, int64_t upper);
  // Hands the scratch ranges' pages back to the OS; returns bytes released.
  int64_t release_scratch();
  void set_poison_scratch(bool on) { poison_ = on; }

  const std::shared_ptr<Weights>& weights() const { return weights_; }
  // Reads params from `w` from now on. Throws Error(InvalidArgument) naming the first
  // param that `w` lacks or holds with another type; unchanged on throw.
  void use_weights(std::shared_ptr<Weights> w);

 private:
  struct Resolved {
    KernelFn fn;
    const void* cfg;
    void* const* bufs;
    const RunCtx* ctx;
  };
  Executable(std::shared_ptr<const Program> program, int threads, std::shared_ptr<Weights> w);
  void resolve();

  std::shared_ptr<const Program> program_;
  Arena arena_;
  std::shared_ptr<Weights> weights_;
  uint64_t weights_epoch_ = 0;  // weights_->epoch() when param_base_ was computed
  std::vector<uint8_t*> param_base_;
  struct Remap {
    int64_t begin, end;
    uint8_t* ext;
  };
  std::vector<Remap> remaps_;
  std::vector<void*> ptrs_;
  std::vector<Resolved> thunks_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<std::array<RunCtx, 2>> ctx_;  // [0]: full runs, [1]: active extent
  bool poison_ = false;
  // RLX_PROFILE=1: milliseconds per thunk summed over the runs, printed per op kind at the end.
  struct Profile {
    std::vector<double> time;
    int64_t runs = 0;  // runs started, the first (not timed) included
  };
  std::unique_ptr<Profile> profile_;
};

}  // namespace rlx::cpu
