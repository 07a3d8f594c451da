// runtime::Instance: what a CompiledGraph holds. It pairs a backend's Executable
// (backends/backend.h) with the graph's public interface (named inputs, outputs and params
// with their public types), converts data at the boundary (typed_io.h), and keeps handle
// state. It talks to the executable only through that interface: straight into host
// memory where the backend offers it (host_data), through a staging buffer otherwise.
//
// Public vs slot types: a port's public type is what the caller's graph declared (dims
// bound); its slot type is what the compiled graph stores. They differ only when a
// precision policy changed the dtype at the boundary; conversions follow typed_io.h.
// A leaf the optimizer dropped (unused) keeps its public port: data given to it is
// validated and ignored.
//
// Errors: every method validates everything before changing state, so a throw leaves
// the instance as it was (a failed kernel leaves scratch and outputs undefined until
// the next successful run, nothing else).
#pragma once
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/backend.h"
#include "rlx/compiled_graph.h"
#include "runtime/typed_io.h"

namespace rlx::runtime {

struct Port {
  std::string kind;       // "input", "output" or "param" (for messages)
  std::string name;
  Shape type;             // public type (static dims)
  Shape slot;             // compiled type (same dims)
  Value value;            // inputs/outputs: the value in the compiled graph
  bool stored = false;    // inputs/outputs: the executable holds it (false: dropped or empty)
  bool present = false;   // the compiled graph has this leaf / value
  Boundary lenient;       // f32 <-> slot, for run() and set_param()
  Boundary typed;         // public dtype <-> slot (run_typed, handles)
};

struct Interface {
  std::vector<Port> inputs, outputs, params;
  std::unordered_map<std::string, int> input_index, output_index, param_index;
  CompileReport report;
  bool poison_scratch = false;
  // Every static dim size of the compiled graph, sorted: set_active_extent's `upper` must be one.
  std::vector<int64_t> dim_sizes;
};

// Builds the interface of `original` compiled into `program` (names, public types).
std::shared_ptr<Interface> make_interface(const Graph& original, const backend::Executable& exe,
                                          const CompileOptions& opts);

class Instance {
 public:
  Instance(std::unique_ptr<backend::Executable> exe, std::shared_ptr<const Interface> iface);
  std::unique_ptr<Instance> clone() const;

  const Interface& iface() const { return *iface_; }
  const opt::Plan& plan() const { return exe_->plan(); }
  const backend::Executable& executable() const { return *exe_; }

  void set_param(const std::string& name, const std::vector<float>& values);
  void set_param_typed(const std::string& name, const void* bytes, size_t nbytes, DType dtype);
  void set_param_external(const std::string& name, const void* bytes, size_t nbytes, std::shared_ptr<const void> owner);
  void set_param_range(const std::string& name, size_t byte_offset, const void* bytes, size_t nbytes);
  void finalize_params();
  void copy_params_from(const Instance& other);
  void share_params_from(const Instance& other);

  std::vector<std::vector<float>> run(const std::map<std::string, std::vector<float>>& inputs);
  std::vector<TypedTensor> run_typed(const std::map<std::string, TypedTensor>& inputs,
                                     const std::vector<int>* only);
  std::vector<TensorView> run_slots(const std::vector<std::span<const uint8_t>>& inputs);

  void bind_handle(const std::string& name, const TypedTensor& initial);
  TypedTensor read_handle(const std::string& name) const;
  void write_handle(const std::string& name, size_t byte_offset, const void* bytes, size_t nbytes);
  void read_handle_range(const std::string& name, size_t byte_offset, void* bytes, size_t nbytes) const;
  bool bind_handle_external(const std::string& name, void* data, size_t nbytes, std::shared_ptr<void> owner);
  std::shared_ptr<backend::Storage> allocate_shared(size_t bytes) const;
  bool bind_handle_shared(const std::string& name, const std::shared_ptr<backend::Storage>& s, size_t byte_offset);
  void copy_handle_ranges(const Instance& from, const std::vector<CompiledGraph::HandleCopy>& copies);
  void set_active_extent(int64_t actual, int64_t upper);
  void release_scratch();

  // Pipelined runs (compiled_graph.h). Every other method settles the queue first.
  // only == nullptr: no output is read back (commit_no_wait_handles_only).
  void commit_no_wait(const std::map<std::string, TypedTensor>& inputs, const std::vector<int>* only);
  std::vector<std::vector<TypedTensor>> sync_pending();
  size_t pending_runs() const;

 private:
  Instance() = default;
  // One validated input for this run: the caller's data and how it converts.
  struct Feed {
    const void* data = nullptr;
    Boundary boundary;
    size_t user_elems = 0;
    bool given = false;
  };
  struct Handle {
    std::string name;
    int input = -1, output = -1;
    std::vector<uint8_t> store;  // output-only handles: the latest output bytes (slot dtype)
    std::shared_ptr<void> owner;  // external / shared handles: keeps the memory alive
    bool external = false;        // the input reads memory not its own (bind_handle_external / _shared)
  };

  // Index of input `name` for a run; throws if unknown or fed by a handle.
  size_t fed_input(const std::string& name) const;
  void check_same_params(const Instance& other, const char* what) const;
  const Port& param_port(const std::string& name) const;
  // Converts `n` user elements through `b` into the param's storage and marks it set.
  void write_param_converted(const Port& p, const Boundary& b, const void* src, size_t n);
  // Converts `n` user elements through `b` into the value's storage (host or staged).
  void write_value_converted(const Port& p, const Boundary& b, const void* src, size_t n);
  Feed check_feed(const Port& p, DType dtype, const void* data, size_t nbytes, bool lenient,
                  const std::vector<int64_t>* dims) const;
  void check_complete() const;   // every input fed or handle-bound; every param set
  void execute();                // write_feeds, run, refresh_handles
  void write_feeds();            // the given inputs into their values
  void refresh_handles();        // each output-fed handle from its output, after a run
  void check_output_indices(const std::vector<int>& only) const;
  // Validates `inputs` into feeds_ (typed I/O) and check_complete; throws before any state changes
  // that matters (feeds_ is rebuilt on every run).
  void take_typed_feeds(const std::map<std::string, TypedTensor>& inputs);
  static TypedTensor output_tensor(const Port& p);  // zeros of the port's public type
  void read_output(const Port& p, const Boundary& b, void* dst, size_t user_elems) const;
  int find_handle(const std::string& name) const;
  // find_handle, or Error naming `what`, with the byte range checked against the handle's state.
  int handle_range(const char* what, const std::string& name, size_t byte_offset, size_t nbytes) const;
  void store_handle(Handle h);  // adds or replaces the handle of h.name, links its input
  // Offers the backend-side handle copies (output -> input, both stored) to the executable
  // as copies its runs make themselves (set_run_copies); run_copies_ says it took them.
  void offer_run_copies();
  bool backend_copied(const Handle& h) const;  // output -> input, both stored on the backend
  // The handle's input when its state is that input's storage in the executable; nullptr when
  // the state is h.store (output-only handles).
  const Port* stored_input(const Handle& h) const;
  // Bytes of a handle's state, range already checked (handle_range).
  void write_range(Handle& h, size_t byte_offset, const void* bytes, size_t nbytes);
  void read_range(const Handle& h, size_t byte_offset, void* bytes, size_t nbytes) const;
  // Waits for the committed runs and converts their outputs (kept in pending_); on a run's
  // error drops them and rethrows.
  void settle() const;

  struct Pending {  // one committed run: its listed outputs
    std::vector<TypedTensor> out;             // public types, filled by settle()
    std::vector<const Port*> ports;           // per listed output; nullptr: not stored
    std::vector<std::vector<uint8_t>> slots;  // slot bytes the backend copies into
  };
  mutable std::vector<Pending> pending_;
  mutable size_t in_flight_ = 0;  // committed runs not yet waited for

  std::shared_ptr<const Interface> iface_;
  std::unique_ptr<backend::Executable> exe_;
  mutable std::vector<uint8_t> staging_;            // slot bytes for backends without host memory
  std::vector<std::vector<uint8_t>> slot_views_;    // run_slots outputs of such backends
  std::vector<Feed> feeds_;           // per input, reused across runs (no allocation)
  std::vector<int> input_handle_;     // per input: handle index or -1
  std::vector<Handle> handles_;
  std::unordered_map<std::string, int> handle_index_;  // name -> index into handles_ (row writes look up per call)
  mutable bool params_ready_ = false;  // all params of this graph known to be set
  bool run_copies_ = false;  // the executable's runs refresh the backend-side handles themselves
};

}  // namespace rlx::runtime
