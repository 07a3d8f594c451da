// Session and CompiledGraph: the runtime API.
//
// A CompiledGraph owns its memory (weights segment + activation arena) and a flat
// schedule of pre-resolved kernel calls. run() does no allocation beyond the
// returned output vectors. One CompiledGraph must not be run from two threads at
// once; clone() gives an independent copy that may run concurrently.
// Every method throws rlx::Error on bad use and leaves the object usable.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "rlx/graph.h"
#include "rlx/options.h"

namespace rlx {

namespace runtime { class Instance; }
namespace backend { class Storage; }

// Bytes plus their dtype and dims, for typed I/O.
struct TypedTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
};

// A read-only view into the arena, valid until the next run / release_scratch.
struct TensorView {
  DType dtype = DType::F32;
  std::vector<int64_t> dims;
  const void* data = nullptr;
  size_t bytes = 0;
};

struct Capabilities {
  std::string device;
  int threads = 1;
  std::string isa;                 // e.g. "avx512", "avx2", "scalar"
  bool blas = false;               // an external BLAS is linked for GEMM
  bool active_extent = true;
  bool handles = true;
  bool clone = true;
  std::vector<std::string> precisions;
};

struct CompileReport {
  std::string dispatch;   // per op kind: native / decomposed / unsupported
  std::string fusion;     // what the fusion passes did, one line per rewrite, and what they left apart and why
  std::string fusion_summary;  // the same in one line per pass (counts, the first reason for a miss)
  std::string memory;     // arena bytes vs lower bound, top buffers
  std::string passes;     // pass log: one line per pass, nodes before -> after
  // weight_bytes: params + constants (a model's initializers); constant_bytes: the part of
  // it held in the arena (arena_bytes includes it).
  int64_t arena_bytes = 0, lower_bound_bytes = 0, weight_bytes = 0, constant_bytes = 0;
  int num_thunks = 0;
};

// Memory of one backend that several compiled graphs read and write in place through their
// handles (CompiledGraph::allocate_shared, bind_handle_shared): e.g. one KV cache that every
// pass of a decoder (prompt lengths, decode, batch) works on, where each would otherwise
// hold a cache of its own in its arena (a device's memory). Host memory on the CPU, device
// memory on CUDA. A copy of a SharedBuffer is another reference to the same memory, which
// lives while any reference or any graph bound to it does. Every call checks its ranges
// first (InvalidArgument, nothing changed) and is done when it returns; the caller orders
// them with the runs of the graphs bound to the buffer (a graph's runs end before its other
// calls, and before these when the caller waits for them: sync_pending).
class SharedBuffer {
 public:
  SharedBuffer();
  ~SharedBuffer();
  SharedBuffer(const SharedBuffer&);
  SharedBuffer& operator=(const SharedBuffer&);
  size_t bytes() const;  // 0: no buffer (default-constructed)
  // Raw bytes [offset, offset + n) of the buffer from / into host memory.
  void write(size_t offset, const void* src, size_t n);
  void read(size_t offset, void* dst, size_t n) const;
  // One range of copy_from: bytes [from_offset, from_offset + bytes) of the source into
  // [offset, offset + bytes) of this buffer.
  struct Range {
    size_t offset = 0, from_offset = 0, bytes = 0;
  };
  // Copies ranges of `from` (another buffer, or this one) into this buffer: on the backend's
  // side where both are one backend's memory, through host memory otherwise. Every range is
  // checked first (inside both buffers; no written range overlapping another range of this
  // buffer in the same call).
  void copy_from(const SharedBuffer& from, const std::vector<Range>& ranges);

 private:
  friend class CompiledGraph;
  explicit SharedBuffer(std::shared_ptr<backend::Storage> s);
  std::shared_ptr<backend::Storage> s_;
};

class CompiledGraph {
 public:
  CompiledGraph();
  ~CompiledGraph();
  CompiledGraph(CompiledGraph&&) noexcept;
  CompiledGraph& operator=(CompiledGraph&&) noexcept;

  // ---- params (weights). F32 convenience form converts to the param's dtype.
  void set_param(const std::string& name, const std::vector<float>& values);
  void set_param_typed(const std::string& name, const void* bytes, size_t nbytes, DType dtype);
  void set_param_range(const std::string& name, size_t byte_offset, const void* bytes, size_t nbytes);
  // Reads the param from `bytes` in place, without copying (e.g. a weight inside a
  // memory-mapped model file): `bytes` holds exactly the param's bytes in its own dtype and
  // stays valid and unchanged while `owner` lives (the runtime keeps `owner`). Backends whose
  // weights live in device memory copy instead. A later set_param* on it copies again.
  void set_param_external(const std::string& name, const void* bytes, size_t nbytes, std::shared_ptr<const void> owner);
  void finalize_params();   // marks weights complete; later set_param still allowed
  void copy_params_from(const CompiledGraph& other);   // same param names and types
  void share_params_from(const CompiledGraph& other);  // both read one weights segment

  // ---- running. Inputs by name; outputs in graph output order.
  // run(): f32 values in and out, converted to and from each input's / output's dtype
  // (integers: truncation toward zero, saturating, NaN -> 0; bool: != 0; complex: two
  // floats (re, im) per element).
  std::vector<std::vector<float>> run(const std::map<std::string, std::vector<float>>& inputs);
  // run_typed(): each input's bytes in any dtype that converts to the input's dtype;
  // outputs come back in the graph's declared output dtypes. Conversions: same dtype;
  // f32/f16/bf16/f64 among each other (round to nearest even); c64 <-> c128; complex
  // data for an f32 input as interleaved (re, im) f32 lanes and f32 pairs for a complex
  // input; and c128 data for an f32 input as FOUR f32 lanes per element (re_hi, re_lo,
  // im_hi, im_lo; hi = float(x), lo = float(x - hi)), so f32 kernels doing double-float
  // arithmetic see ~48 significant bits; runtime::convert_tensor(out, DType::C128)
  // recombines such f32 outputs (hi + lo in double). Other pairs are refused.
  // `dims` may be empty (only the element count is checked); otherwise they must match.
  std::vector<TypedTensor> run_typed(const std::map<std::string, TypedTensor>& inputs);
  // Inputs by position (bytes in the input's own dtype); outputs as arena views.
  std::vector<TensorView> run_slots(const std::vector<std::span<const uint8_t>>& inputs);
  // Runs, then returns only the listed outputs (typed).
  std::vector<TypedTensor> run_read_outputs(const std::map<std::string, TypedTensor>& inputs,
                                            const std::vector<int>& output_indices);

  // ---- pipelined runs: commit_no_wait() feeds the inputs (as run_typed does), starts the
  // run and returns without waiting for it (the inputs are copied by then: the caller may
  // rewrite them for the next commit); the outputs listed (indices; empty: all) are copied
  // back when it ends. Several commits queue runs back to back with no host wait
  // between them (on CUDA: one stream, the inputs of run i+1 uploaded behind run i).
  // sync_pending() waits for every committed run and returns their outputs in commit order.
  // Any other call on this graph first waits for the committed runs (their outputs stay
  // for sync_pending). An error of a committed run is raised by the call that waits; the
  // outputs of the runs not yet returned are then dropped and the graph stays usable.
  // Handles refreshed through host memory (output-only handles, or on backends that keep
  // them on the host) cannot be pipelined: commit_no_wait refuses them.
  void commit_no_wait(const std::map<std::string, TypedTensor>& inputs, const std::vector<int>& output_indices = {});
  // commit_no_wait that reads no output back: what the run leaves is its handles' new state
  // (e.g. a decode loop whose tokens a handle collects, read once at the end with
  // read_handle_range). sync_pending returns an empty output list for such a run.
  void commit_no_wait_handles_only(const std::map<std::string, TypedTensor>& inputs);
  std::vector<std::vector<TypedTensor>> sync_pending();
  size_t pending_runs() const;
  // commit_no_wait for each input set, then sync_pending.
  std::vector<std::vector<TypedTensor>> run_pipelined(const std::vector<std::map<std::string, TypedTensor>>& runs,
                                                      const std::vector<int>& output_indices = {});
  // ---- persistent handles (KV cache): a handle named like an input feeds it on every
  // run; a handle named like an output is refreshed from it after every run.
  void bind_handle(const std::string& name, const TypedTensor& initial);
  TypedTensor read_handle(const std::string& name) const;
  // A handle whose state is the caller's memory: input `name` reads `data` (nbytes = its
  // size, raw bytes in the input's own dtype) in place on every run, so the caller updates
  // it directly between runs (e.g. appends KV rows) and several graphs may share one buffer.
  // Returns false, changing nothing, when the backend keeps inputs in device memory (use
  // bind_handle + write_handle then). `owner` is kept alive while the binding lasts.
  bool bind_handle_external(const std::string& name, void* data, size_t nbytes, std::shared_ptr<void> owner);
  // Zeroed memory of this graph's backend for bind_handle_shared (any graph of the same
  // backend can bind it). ResourceExhausted when the backend cannot allocate it.
  SharedBuffer allocate_shared(size_t bytes) const;
  // A handle whose state is bytes [byte_offset, byte_offset + the input's size) of `buffer`:
  // input `name` reads and writes them in place on every run (raw bytes in the input's own
  // dtype), and so do other graphs bound to the same bytes; write_handle / read_handle_range
  // / copy_handle_ranges reach them through this graph. Binding again moves the handle to
  // other bytes; bind_handle gives it storage of its own again. Returns false, changing
  // nothing, when the compiled input stores another dtype than declared (a precision
  // policy) or was dropped. InvalidArgument for an unknown input, an empty buffer, a range
  // past its end, or a buffer this graph's backend cannot read in place (another backend's).
  bool bind_handle_shared(const std::string& name, const SharedBuffer& buffer, size_t byte_offset);
  // Overwrites bytes [byte_offset, byte_offset + nbytes) of a bound handle's state with raw
  // bytes in the handle's own dtype (no conversion), without touching the rest: O(1) appends
  // to a resident KV cache. InvalidArgument for an unknown handle or a range past its end.
  void write_handle(const std::string& name, size_t byte_offset, const void* bytes, size_t nbytes);
  // The reverse: bytes [byte_offset, byte_offset + nbytes) of a bound handle's state, raw, in
  // its own dtype (e.g. the rows a graph wrote into a resident cache with cache_write).
  void read_handle_range(const std::string& name, size_t byte_offset, void* bytes, size_t nbytes) const;
  // One range of copy_handle_ranges: bytes [from_offset, from_offset + bytes) of the source
  // graph's handle `from_name` into [offset, offset + bytes) of this graph's handle `name`.
  struct HandleCopy {
    std::string name;
    size_t offset = 0;
    std::string from_name;
    size_t from_offset = 0;
    size_t bytes = 0;
  };
  // Copies ranges of `from`'s bound handles (another graph, or this one) into this graph's,
  // raw bytes in the handles' own dtype. Where both graphs run on one backend the copy
  // stays on its side (on CUDA a device-to-device copy, not a trip through host memory):
  // e.g. the KV rows one pass of a decoder wrote, handed to another pass with caches of its
  // own. Every range is checked first (InvalidArgument for an unknown handle, a range past
  // its end, or overlapping ranges of one handle): on an error nothing is copied.
  void copy_handle_ranges(const CompiledGraph& from, const std::vector<HandleCopy>& copies);

  // Run only the leading `actual` of `upper` rows along dims compiled as `upper`, where
  // every kernel allows it (others run in full). actual == upper restores full runs.
  void set_active_extent(int64_t actual, int64_t upper);
  // Gives scratch pages back to the OS; the next run recomputes them.
  void release_scratch();
  CompiledGraph clone() const;

  Capabilities capabilities() const;
  const CompileReport& report() const;
  const Graph& graph() const;  // the compiled (optimized) graph
  std::vector<std::string> input_names() const;
  std::vector<std::string> output_names() const;
  std::vector<std::string> param_names() const;
  Shape input_type(const std::string& name) const;
  Shape param_type(const std::string& name) const;
  Shape output_type(int index) const;

 private:
  friend class Session;
  explicit CompiledGraph(std::unique_ptr<runtime::Instance> impl);
  std::unique_ptr<runtime::Instance> impl_;
};

class Session {
 public:
  explicit Session(Device device = Device::Cpu, CompileOptions options = {});
  // Runs the pipeline and the backend compile. Throws Error(Unsupported) listing every
  // unsupported node, Error(Verify) for malformed graphs, Error(Shape) for bad bindings,
  // Error(ResourceExhausted) for a memory plan above CompileOptions::max_arena_bytes.
  CompiledGraph compile(const Graph& g) const;
  // The same, taking the graph: its constants' bytes are dropped from it once the pipeline
  // has run, so a backend that keeps its own form of a constant (the CPU's prepacked
  // weights) can release the original and a model's weights are held once, not twice.
  CompiledGraph compile(Graph&& g) const;
  const CompileOptions& options() const { return options_; }
  static std::vector<Device> available_devices();

 private:
  CompiledGraph compile_unguarded(const Graph& g, Graph* owned) const;
  Device device_;
  CompileOptions options_;
};

}  // namespace rlx
