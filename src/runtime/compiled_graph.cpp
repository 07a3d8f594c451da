// CompiledGraph: the public face of runtime::Instance. Every method checks that the
// object holds a compiled graph (a default-constructed or moved-from one does not).
#include "rlx/compiled_graph.h"

#include "runtime/instance.h"

namespace rlx {

namespace {
runtime::Instance& need(const std::unique_ptr<runtime::Instance>& impl) {
  if (!impl) fail(ErrorCategory::InvalidArgument, "CompiledGraph is empty (default-constructed or moved from)");
  return *impl;
}
}  // namespace

CompiledGraph::CompiledGraph() = default;
CompiledGraph::~CompiledGraph() = default;
CompiledGraph::CompiledGraph(CompiledGraph&&) noexcept = default;
CompiledGraph& CompiledGraph::operator=(CompiledGraph&&) noexcept = default;
CompiledGraph::CompiledGraph(std::unique_ptr<runtime::Instance> impl) : impl_(std::move(impl)) {}

void CompiledGraph::set_param(const std::string& name, const std::vector<float>& values) {
  detail::guard("CompiledGraph::set_param", [&] { return need(impl_).set_param(name, values); });
}
void CompiledGraph::set_param_typed(const std::string& name, const void* bytes, size_t nbytes, DType dtype) {
  detail::guard("CompiledGraph::set_param_typed", [&] { return need(impl_).set_param_typed(name, bytes, nbytes, dtype); });
}
void CompiledGraph::set_param_range(const std::string& name, size_t byte_offset, const void* bytes, size_t nbytes) {
  detail::guard("CompiledGraph::set_param_range", [&] { return need(impl_).set_param_range(name, byte_offset, bytes, nbytes); });
}
void CompiledGraph::finalize_params() {
  detail::guard("CompiledGraph::finalize_params", [&] { return need(impl_).finalize_params(); });
}
void CompiledGraph::copy_params_from(const CompiledGraph& other) {
  detail::guard("CompiledGraph::copy_params_from", [&] { return need(impl_).copy_params_from(need(other.impl_)); });
}
void CompiledGraph::set_param_external(const std::string& name, const void* bytes, size_t nbytes,
                                       std::shared_ptr<const void> owner) {
  detail::guard("CompiledGraph::set_param_external",
                [&] { need(impl_).set_param_external(name, bytes, nbytes, std::move(owner)); });
}

void CompiledGraph::share_params_from(const CompiledGraph& other) {
  detail::guard("CompiledGraph::share_params_from", [&] { return need(impl_).share_params_from(need(other.impl_)); });
}

std::vector<std::vector<float>> CompiledGraph::run(const std::map<std::string, std::vector<float>>& inputs) {
  return detail::guard("CompiledGraph::run", [&] { return need(impl_).run(inputs); });
}
std::vector<TypedTensor> CompiledGraph::run_typed(const std::map<std::string, TypedTensor>& inputs) {
  return detail::guard("CompiledGraph::run_typed", [&] { return need(impl_).run_typed(inputs, nullptr); });
}
std::vector<TensorView> CompiledGraph::run_slots(const std::vector<std::span<const uint8_t>>& inputs) {
  return detail::guard("CompiledGraph::run_slots", [&] { return need(impl_).run_slots(inputs); });
}
std::vector<TypedTensor> CompiledGraph::run_read_outputs(const std::map<std::string, TypedTensor>& inputs,
                                                         const std::vector<int>& output_indices) {
  return detail::guard("CompiledGraph::run_read_outputs", [&] { return need(impl_).run_typed(inputs, &output_indices); });
}

void CompiledGraph::commit_no_wait(const std::map<std::string, TypedTensor>& inputs,
                                   const std::vector<int>& output_indices) {
  detail::guard("CompiledGraph::commit_no_wait", [&] { need(impl_).commit_no_wait(inputs, &output_indices); });
}
void CompiledGraph::commit_no_wait_handles_only(const std::map<std::string, TypedTensor>& inputs) {
  detail::guard("CompiledGraph::commit_no_wait_handles_only", [&] { need(impl_).commit_no_wait(inputs, nullptr); });
}
std::vector<std::vector<TypedTensor>> CompiledGraph::sync_pending() {
  return detail::guard("CompiledGraph::sync_pending", [&] { return need(impl_).sync_pending(); });
}
size_t CompiledGraph::pending_runs() const {
  return detail::guard("CompiledGraph::pending_runs", [&] { return need(impl_).pending_runs(); });
}
std::vector<std::vector<TypedTensor>> CompiledGraph::run_pipelined(
    const std::vector<std::map<std::string, TypedTensor>>& runs, const std::vector<int>& output_indices) {
  return detail::guard("CompiledGraph::run_pipelined", [&] {
    runtime::Instance& in = need(impl_);
    for (const auto& r : runs) in.commit_no_wait(r, &output_indices);
    return in.sync_pending();
  });
}

void CompiledGraph::bind_handle(const std::string& name, const TypedTensor& initial) {
  detail::guard("CompiledGraph::bind_handle", [&] { return need(impl_).bind_handle(name, initial); });
}
bool CompiledGraph::bind_handle_external(const std::string& name, void* data, size_t nbytes, std::shared_ptr<void> owner) {
  return detail::guard("CompiledGraph::bind_handle_external",
                       [&] { return need(impl_).bind_handle_external(name, data, nbytes, std::move(owner)); });
}

SharedBuffer CompiledGraph::allocate_shared(size_t bytes) const {
  return detail::guard("CompiledGraph::allocate_shared", [&] { return SharedBuffer(need(impl_).allocate_shared(bytes)); });
}
bool CompiledGraph::bind_handle_shared(const std::string& name, const SharedBuffer& buffer, size_t byte_offset) {
  return detail::guard("CompiledGraph::bind_handle_shared",
                       [&] { return need(impl_).bind_handle_shared(name, buffer.s_, byte_offset); });
}

void CompiledGraph::write_handle(const std::string& name, size_t byte_offset, const void* bytes, size_t nbytes) {
  detail::guard("CompiledGraph::write_handle", [&] { need(impl_).write_handle(name, byte_offset, bytes, nbytes); });
}

void CompiledGraph::read_handle_range(const std::string& name, size_t byte_offset, void* bytes, size_t nbytes) const {
  detail::guard("CompiledGraph::read_handle_range",
                [&] { need(impl_).read_handle_range(name, byte_offset, bytes, nbytes); });
}

void CompiledGraph::copy_handle_ranges(const CompiledGraph& from, const std::vector<HandleCopy>& copies) {
  detail::guard("CompiledGraph::copy_handle_ranges", [&] { need(impl_).copy_handle_ranges(need(from.impl_), copies); });
}

TypedTensor CompiledGraph::read_handle(const std::string& name) const {
  return detail::guard("CompiledGraph::read_handle", [&] { return need(impl_).read_handle(name); });
}
void CompiledGraph::set_active_extent(int64_t actual, int64_t upper) {
  detail::guard("CompiledGraph::set_active_extent", [&] { return need(impl_).set_active_extent(actual, upper); });
}
void CompiledGraph::release_scratch() {
  detail::guard("CompiledGraph::release_scratch", [&] { return need(impl_).release_scratch(); });
}
CompiledGraph CompiledGraph::clone() const {
  return detail::guard("CompiledGraph::clone", [&] { return CompiledGraph(need(impl_).clone()); });
}

Capabilities CompiledGraph::capabilities() const { return need(impl_).executable().capabilities(); }

const CompileReport& CompiledGraph::report() const { return need(impl_).iface().report; }
const Graph& CompiledGraph::graph() const { return need(impl_).plan().graph; }

std::vector<std::string> CompiledGraph::input_names() const {
  std::vector<std::string> v;
  for (const auto& p : need(impl_).iface().inputs) v.push_back(p.name);
  return v;
}
std::vector<std::string> CompiledGraph::output_names() const {
  std::vector<std::string> v;
  for (const auto& p : need(impl_).iface().outputs) v.push_back(p.name);
  return v;
}
std::vector<std::string> CompiledGraph::param_names() const {
  std::vector<std::string> v;
  for (const auto& p : need(impl_).iface().params) v.push_back(p.name);
  return v;
}
Shape CompiledGraph::input_type(const std::string& name) const {
  const runtime::Interface& f = need(impl_).iface();
  auto it = f.input_index.find(name);
  if (it == f.input_index.end()) fail(ErrorCategory::InvalidArgument, "unknown input '", name, "'");
  return f.inputs[size_t(it->second)].type;
}
Shape CompiledGraph::param_type(const std::string& name) const {
  const runtime::Interface& f = need(impl_).iface();
  auto it = f.param_index.find(name);
  if (it == f.param_index.end()) {
    std::string known;
    for (const auto& p : f.params) known += (known.empty() ? "" : ", ") + p.name;
    fail(ErrorCategory::InvalidArgument, "unknown param '", name, "' (params: ", known.empty() ? "none" : known, ")");
  }
  return f.params[size_t(it->second)].type;
}
Shape CompiledGraph::output_type(int index) const {
  const runtime::Interface& f = need(impl_).iface();
  if (index < 0 || size_t(index) >= f.outputs.size())
    fail(ErrorCategory::InvalidArgument, "output index ", index, " out of range (", f.outputs.size(), " outputs)");
  return f.outputs[size_t(index)].type;
}

}  // namespace rlx
