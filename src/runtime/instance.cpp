#include "runtime/instance.h"

#include <algorithm>
#include <cstring>

#include "opt/pipeline.h"
#include "runtime/byte_spans.h"

namespace rlx::runtime {

namespace {

std::string dims_str(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(d[i]);
  }
  return s + "]";
}

std::string names_of(const std::vector<Port>& ports) {
  std::string s;
  for (const Port& p : ports) s += (s.empty() ? "" : ", ") + p.name;
  return s.empty() ? "(none)" : s;
}

bool needs_binding(const Graph& g) {
  for (const Node& n : g.nodes())
    for (const Shape& s : n.outputs)
      if (!s.is_static()) return true;
  return false;
}

Port make_port(const std::string& kind, const std::string& name, const Shape& type, const Shape* slot, Value value,
               bool stored) {
  Port p;
  p.kind = kind;
  p.name = name;
  p.type = type;
  p.present = slot != nullptr;
  p.slot = slot ? *slot : type;
  p.value = value;
  p.stored = slot != nullptr && stored;
  if (p.slot.static_dims() != p.type.static_dims())
    fail(ErrorCategory::Internal, kind, " '", name, "' is ", type.str(), " but compiled as ", p.slot.str());
  const std::string what = kind + " '" + name + "'";
  p.lenient = boundary_or_throw(DType::F32, p.slot.dtype(), true, what);
  p.typed = boundary_or_throw(p.type.dtype(), p.slot.dtype(), false, what);
  return p;
}

}  // namespace

std::shared_ptr<Interface> make_interface(const Graph& original, const backend::Executable& exe,
                                          const CompileOptions& opts) {
  auto iface = std::make_shared<Interface>();
  const Graph& cg = exe.plan().graph;
  Graph bound;
  const Graph* src = &original;
  if (needs_binding(original)) {
    bound = opt::bind_dims(original, opts.dim_bindings);
    src = &bound;
  }
  for (int32_t id : src->input_nodes()) {
    const Node& n = src->node(id);
    const std::string& name = n.attr<LeafAttrs>().name;
    int32_t c = cg.find_input(name);
    iface->input_index[name] = int(iface->inputs.size());
    iface->inputs.push_back(make_port("input", name, n.outputs[0], c >= 0 ? &cg.node(c).outputs[0] : nullptr,
                                      Value{c, 0}, c >= 0 && exe.stored(Value{c, 0})));
  }
  for (int32_t id : src->param_nodes()) {
    const Node& n = src->node(id);
    const std::string& name = n.attr<LeafAttrs>().name;
    int32_t c = cg.find_param(name);
    iface->param_index[name] = int(iface->params.size());
    iface->params.push_back(make_port("param", name, n.outputs[0], c >= 0 ? &cg.node(c).outputs[0] : nullptr,
                                      Value{c, 0}, false));
  }
  if (src->outputs().size() != cg.outputs().size())
    fail(ErrorCategory::Internal, "compiled graph has ", cg.outputs().size(), " outputs, the graph ",
         src->outputs().size());
  for (size_t i = 0; i < cg.outputs().size(); ++i) {
    const GraphOutput& o = src->outputs()[i];
    const Value cv = cg.outputs()[i].value;
    iface->output_index.emplace(o.name, int(i));
    iface->outputs.push_back(make_port("output", o.name, src->type(o.value), &cg.type(cv), cv, exe.stored(cv)));
  }

  const opt::Plan& plan = exe.plan();
  CompileReport& r = iface->report;
  r.dispatch = plan.dispatch_report;
  r.fusion = plan.fusion_report;
  r.fusion_summary = opt::summarize_fusion(plan.fusion_report);
  r.memory = plan.memory.report(cg);
  r.passes = plan.pass_log;
  r.arena_bytes = plan.memory.arena_bytes;
  r.lower_bound_bytes = plan.memory.lower_bound_bytes;
  r.weight_bytes = plan.memory.weights_bytes + plan.memory.constant_bytes;
  r.constant_bytes = plan.memory.constant_bytes;
  r.num_thunks = exe.num_kernel_calls();
  for (const Node& n : cg.nodes())
    for (const Shape& s : n.outputs)
      for (Dim d : s.dims())
        if (d.is_static()) iface->dim_sizes.push_back(d.value());
  std::sort(iface->dim_sizes.begin(), iface->dim_sizes.end());
  iface->dim_sizes.erase(std::unique(iface->dim_sizes.begin(), iface->dim_sizes.end()), iface->dim_sizes.end());
  iface->poison_scratch = opts.verify_each_pass;
  return iface;
}

// ---------------------------------------------------------------- lifecycle

Instance::Instance(std::unique_ptr<backend::Executable> exe, std::shared_ptr<const Interface> iface)
    : iface_(std::move(iface)), exe_(std::move(exe)) {
  exe_->set_poison_scratch(iface_->poison_scratch);
  feeds_.resize(iface_->inputs.size());
  input_handle_.assign(iface_->inputs.size(), -1);
}

std::unique_ptr<Instance> Instance::clone() const {
  settle();  // committed runs end first (their outputs stay for sync_pending)
  std::unique_ptr<Instance> c(new Instance());
  c->iface_ = iface_;
  c->exe_ = exe_->clone();
  c->feeds_.resize(feeds_.size());
  c->input_handle_ = input_handle_;
  c->handles_ = handles_;
  c->handle_index_ = handle_index_;
  c->params_ready_ = params_ready_;
  c->slot_views_.resize(slot_views_.size());
  c->offer_run_copies();
  return c;
}

size_t Instance::fed_input(const std::string& name) const {
  auto it = iface_->input_index.find(name);
  if (it == iface_->input_index.end())
    fail(ErrorCategory::InvalidArgument, "unknown input '", name, "'; inputs are: ", names_of(iface_->inputs));
  if (input_handle_[size_t(it->second)] >= 0)
    fail(ErrorCategory::InvalidArgument, "input '", name, "' is fed by a handle; do not pass it to run");
  return size_t(it->second);
}

const Port& Instance::param_port(const std::string& name) const {
  auto it = iface_->param_index.find(name);
  if (it == iface_->param_index.end())
    fail(ErrorCategory::InvalidArgument, "unknown param '", name, "'; params are: ", names_of(iface_->params));
  return iface_->params[size_t(it->second)];
}

void Instance::write_param_converted(const Port& p, const Boundary& b, const void* src, size_t n) {
  if (uint8_t* dst = exe_->param_host_data(p.name)) {
    to_slot(b, src, dst, n);
  } else {
    staging_.assign(p.slot.bytes(), 0);
    to_slot(b, src, staging_.data(), n);
    exe_->write_param(p.name, 0, staging_.data(), staging_.size());
  }
  exe_->mark_param_set(p.name);
}

void Instance::write_value_converted(const Port& p, const Boundary& b, const void* src, size_t n) {
  if (uint8_t* dst = exe_->host_data(p.value)) {
    to_slot(b, src, dst, n);
    return;
  }
  staging_.assign(p.slot.bytes(), 0);
  to_slot(b, src, staging_.data(), n);
  exe_->upload(p.value, staging_.data(), staging_.size());
}

// ---------------------------------------------------------------- params

void Instance::set_param(const std::string& name, const std::vector<float>& values) {
  settle();  // committed runs end first (their outputs stay for sync_pending)
  const Port& p = param_port(name);
  const size_t slot_n = size_t(p.slot.numel());
  auto want = p.lenient.user_elems(slot_n);
  if (!want || *want != values.size())
    fail(ErrorCategory::InvalidArgument, "param '", name, "' (", p.slot.str(), ") needs ", want ? *want : slot_n,
         " f32 values, got ", values.size());
  if (p.present) write_param_converted(p, p.lenient, values.data(), values.size());
}

void Instance::set_param_typed(const std::string& name, const void* bytes, size_t nbytes, DType dtype) {
  settle();  // committed runs end first (their outputs stay for sync_pending)
  const Port& p = param_port(name);
  Feed f = check_feed(p, dtype, bytes, nbytes, false, nullptr);
  if (p.present) write_param_converted(p, f.boundary, bytes, f.user_elems);
}

void Instance::set_param_external(const std::string& name, const void* bytes, size_t nbytes,
                                  std::shared_ptr<const void> owner) {
  settle();  // committed runs end first (their outputs stay for sync_pending)
  const Port& p = param_port(name);
  if (!(p.slot == p.type))  // stored in another dtype (a precision policy): convert and copy
    return set_param_typed(name, bytes, nbytes, p.type.dtype());
  if (nbytes != p.slot.bytes())
    fail(ErrorCategory::InvalidArgument, "set_param_external: param '", name, "' (", p.slot.str(), ") needs ",
         p.slot.bytes(), " bytes, got ", nbytes);
  if (nbytes && !bytes) fail(ErrorCategory::InvalidArgument, "set_param_external: null data for param '", name, "'");
  if (p.present) exe_->bind_param_external(name, bytes, nbytes, std::move(owner));
}

void Instance::set_param_range(const std::string& name, size_t byte_offset, const void* bytes, size_t nbytes) {
  settle();  // committed runs end first (their outputs stay for sync_pending)
  const Port& p = param_port(name);
  const size_t total = p.slot.bytes();
  if (byte_offset > total || nbytes > total - byte_offset)
    fail(ErrorCategory::InvalidArgument, "set_param_range: ", nbytes, " bytes at byte ", byte_offset,
         " do not fit param '", name, "' (", p.slot.str(), ", ", total, " bytes)");
  if (nbytes && !bytes) fail(ErrorCategory::InvalidArgument, "set_param_range: null data for param '", name, "'");
  if (p.present) {
    exe_->write_param(name, byte_offset, bytes, nbytes);
    // A range write counts as giving the param a value: loaders stream params in pieces.
    exe_->mark_param_set(name);
  }
}

void Instance::finalize_params() {
  settle();  // committed runs end first (their outputs stay for sync_pending)
  std::string missing;
  for (const Port& p : iface_->params)
    if (p.present && !exe_->param_set(p.name)) missing += (missing.empty() ? "" : ", ") + p.name;
  if (!missing.empty()) fail(ErrorCategory::InvalidArgument, "finalize_params: params without a value: ", missing);
  params_ready_ = true;
}

void Instance::check_same_params(const Instance& other, const char* what) const {
  for (const Port& p : iface_->params) {
    auto it = other.iface_->param_index.find(p.name);
    if (it == other.iface_->param_index.end())
      fail(ErrorCategory::InvalidArgument, what, ": the source has no param '", p.name, "'");
    const Port& q = other.iface_->params[size_t(it->second)];
    if (!(q.type == p.type))
      fail(ErrorCategory::InvalidArgument, what, ": param '", p.name, "' is ", p.type.str(), " here but ",
           q.type.str(), " in the source");
  }
}

void Instance::copy_params_from(const Instance& other) {
  settle();  // committed runs end first (their outputs stay for sync_pending)
  if (&other == this || exe_->shares_params_with(*other.exe_)) return;
  check_same_params(other, "copy_params_from");
  exe_->copy_params_from(*other.exe_);
  params_ready_ = false;
}

void Instance::share_params_from(const Instance& other) {
  settle();  // committed runs end first (their outputs stay for sync_pending)
  check_same_params(other, "share_params_from");
  try {
    exe_->share_params_from(*other.exe_);
  } catch (const Error& e) {
    fail(e.category(), "share_params_from: ", e.what());
  }
  params_ready_ = false;
}

// ---------------------------------------------------------------- running

Instance::Feed Instance::check_feed(const Port& p, DType dtype, const void* data, size_t nbytes, bool lenient,
                                    const std::vector<int64_t>* dims) const {
  Feed f;
  if (lenient) {
    f.boundary = p.lenient;
  } else if (auto b = find_boundary(dtype, p.slot.dtype(), false)) {
    f.boundary = *b;
  } else {
    fail(ErrorCategory::InvalidArgument, p.kind, " '", p.name, "' is ", p.slot.str(), ", got ", dtype_name(dtype),
         " data (no conversion between them)");
  }
  const size_t es = dtype_size(dtype);
  if (nbytes % es != 0)
    fail(ErrorCategory::InvalidArgument, p.kind, " '", p.name, "': ", nbytes, " bytes are not a whole number of ",
         dtype_name(dtype), " elements");
  if (nbytes && !data) fail(ErrorCategory::InvalidArgument, p.kind, " '", p.name, "': null data");
  const size_t slot_n = size_t(p.slot.numel());
  auto want = f.boundary.user_elems(slot_n);
  if (!want)
    fail(ErrorCategory::InvalidArgument, p.kind, " '", p.name, "' (", p.slot.str(), ") cannot hold ", dtype_name(dtype),
         " data: ", slot_n, " elements are not a whole number of ", f.boundary.slot_group, "-lane groups");
  f.user_elems = nbytes / es;
  if (f.user_elems != *want)
    fail(ErrorCategory::InvalidArgument, p.kind, " '", p.name, "' (", p.slot.str(), ") needs ", *want, " ",
         dtype_name(dtype), " elements, got ", f.user_elems);
  if (dims && !dims->empty()) {
    int64_t n = 0;
    try {
      n = numel_of(*dims);
    } catch (const Error& e) {
      fail(e.category(), p.kind, " '", p.name, "': dims ", dims_str(*dims), ": ", e.what());
    }
    if (size_t(n) != f.user_elems ||
        (f.boundary.user_group == f.boundary.slot_group && *dims != p.type.static_dims()))
      fail(ErrorCategory::InvalidArgument, p.kind, " '", p.name, "' has dims ", dims_str(p.type.static_dims()), ", got ",
           dims_str(*dims));
  }
  f.data = data;
  f.given = true;
  return f;
}

void Instance::check_complete() const {
  for (size_t i = 0; i < feeds_.size(); ++i)
    if (!feeds_[i].given && input_handle_[i] < 0)
      fail(ErrorCategory::InvalidArgument, "missing input '", iface_->inputs[i].name, "' (",
           iface_->inputs[i].type.str(), ")");
  if (params_ready_) return;
  for (const Port& p : iface_->params)
    if (p.present && !exe_->param_set(p.name))
      fail(ErrorCategory::InvalidArgument, "param '", p.name, "' (", p.type.str(),
           ") has no value: give it one with set_param before running");
  params_ready_ = true;
}

void Instance::execute() {
  write_feeds();
  exe_->run();
  refresh_handles();
}

void Instance::write_feeds() {
  for (size_t i = 0; i < feeds_.size(); ++i) {
    const Feed& f = feeds_[i];
    const Port& p = iface_->inputs[i];
    if (f.given && p.stored) write_value_converted(p, f.boundary, f.data, f.user_elems);
  }
}

void Instance::refresh_handles() {
  for (Handle& h : handles_) {
    if (h.output < 0) continue;
    const Port& out = iface_->outputs[size_t(h.output)];
    if (!out.stored) continue;
    const size_t n = out.slot.bytes();
    if (backend_copied(h)) {
      if (!run_copies_)  // (else the run made the copy itself)
        exe_->copy_value(out.value, iface_->inputs[size_t(h.input)].value, n);  // stays on the backend's side
    } else {
      exe_->download(out.value, h.store.data(), n);
    }
  }
}

void Instance::read_output(const Port& p, const Boundary& b, void* dst, size_t user_elems) const {
  if (!p.stored) return;
  if (const uint8_t* src = exe_->host_data(p.value)) {
    to_user(b, src, dst, user_elems);
    return;
  }
  staging_.resize(p.slot.bytes());
  exe_->download(p.value, staging_.data(), staging_.size());
  to_user(b, staging_.data(), dst, user_elems);
}

std::vector<std::vector<float>> Instance::run(const std::map<std::string, std::vector<float>>& inputs) {
  settle();  // committed runs end first (their outputs stay for sync_pending)
  for (Feed& f : feeds_) f.given = false;
  for (const auto& [name, values] : inputs) {
    const size_t i = fed_input(name);
    feeds_[i] = check_feed(iface_->inputs[i], DType::F32, values.data(), values.size() * sizeof(float), true, nullptr);
  }
  check_complete();
  execute();
  std::vector<std::vector<float>> out;
  out.reserve(iface_->outputs.size());
  for (const Port& p : iface_->outputs) {
    size_t n = *p.lenient.user_elems(size_t(p.slot.numel()));
    out.emplace_back(n);
    read_output(p, p.lenient, out.back().data(), n);
  }
  return out;
}

std::vector<TypedTensor> Instance::run_typed(const std::map<std::string, TypedTensor>& inputs,
                                             const std::vector<int>* only) {
  settle();  // committed runs end first (their outputs stay for sync_pending)
  if (only) check_output_indices(*only);
  take_typed_feeds(inputs);
  execute();
  std::vector<TypedTensor> out;
  auto emit = [&](const Port& p) {
    TypedTensor t = output_tensor(p);
    read_output(p, p.typed, t.bytes.data(), size_t(p.type.numel()));
    out.push_back(std::move(t));
  };
  if (only) {
    for (int k : *only) emit(iface_->outputs[size_t(k)]);
  } else {
    for (const Port& p : iface_->outputs) emit(p);
  }
  return out;
}

std::vector<TensorView> Instance::run_slots(const std::vector<std::span<const uint8_t>>& inputs) {
  settle();  // committed runs end first (their outputs stay for sync_pending)
  if (inputs.size() != iface_->inputs.size())
    fail(ErrorCategory::InvalidArgument, "run_slots: ", inputs.size(), " inputs given, the graph has ",
         iface_->inputs.size(), " (", names_of(iface_->inputs), ")");
  for (Feed& f : feeds_) f.given = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Port& p = iface_->inputs[i];
    if (input_handle_[i] >= 0) {
      if (!inputs[i].empty())
        fail(ErrorCategory::InvalidArgument, "run_slots: input '", p.name, "' is fed by a handle; pass an empty span");
      continue;
    }
    if (inputs[i].size() != p.slot.bytes())
      fail(ErrorCategory::InvalidArgument, "run_slots: input '", p.name, "' (", p.slot.str(), ") needs ",
           p.slot.bytes(), " bytes, got ", inputs[i].size());
    Feed& f = feeds_[i];
    f.boundary = Boundary{p.slot.dtype(), p.slot.dtype()};
    f.data = inputs[i].data();
    f.user_elems = size_t(p.slot.numel());
    f.given = true;
  }
  check_complete();
  execute();
  std::vector<TensorView> out;
  out.reserve(iface_->outputs.size());
  slot_views_.resize(iface_->outputs.size());
  for (size_t k = 0; k < iface_->outputs.size(); ++k) {
    const Port& p = iface_->outputs[k];
    const uint8_t* data = p.stored ? exe_->host_data(p.value) : nullptr;
    if (p.stored && !data) {  // a backend without host memory: a host copy, valid until the next run
      slot_views_[k].resize(p.slot.bytes());
      exe_->download(p.value, slot_views_[k].data(), slot_views_[k].size());
      data = slot_views_[k].data();
    }
    out.push_back(TensorView{p.slot.dtype(), p.slot.static_dims(), data, p.slot.bytes()});
  }
  return out;
}

// ---------------------------------------------------------------- handles, extent, scratch

int Instance::find_handle(const std::string& name) const {
  auto it = handle_index_.find(name);
  if (it != handle_index_.end()) return it->second;
  return -1;
}

void Instance::bind_handle(const std::string& name, const TypedTensor& initial) {
  settle();  // committed runs end first (their outputs stay for sync_pending)
  auto ii = iface_->input_index.find(name);
  auto oi = iface_->output_index.find(name);
  const int in = ii == iface_->input_index.end() ? -1 : ii->second;
  const int out = oi == iface_->output_index.end() ? -1 : oi->second;
  if (in < 0 && out < 0)
    fail(ErrorCategory::InvalidArgument, "bind_handle: no input or output named '", name, "'");
  if (in >= 0 && out >= 0 && !(iface_->inputs[size_t(in)].slot == iface_->outputs[size_t(out)].slot))
    fail(ErrorCategory::InvalidArgument, "bind_handle: input '", name, "' is ", iface_->inputs[size_t(in)].slot.str(),
         " but output '", name, "' is ", iface_->outputs[size_t(out)].slot.str(), "; a handle needs one type");
  const Port& p = in >= 0 ? iface_->inputs[size_t(in)] : iface_->outputs[size_t(out)];
  Feed f = check_feed(p, initial.dtype, initial.bytes.data(), initial.bytes.size(), false, &initial.dims);

  Handle h{name, in, out, {}, {}, false};
  if (in >= 0 && p.stored) {
    int prev = find_handle(name);
    if (prev >= 0 && handles_[size_t(prev)].external)  // was external or shared: back to the input's own storage
      exe_->bind_value_storage(p.value, nullptr, 0, p.slot.bytes());
    if (f.user_elems) write_value_converted(p, f.boundary, f.data, f.user_elems);
  } else {
    h.store.resize(p.slot.bytes());
    if (f.user_elems) to_slot(f.boundary, f.data, h.store.data(), f.user_elems);
  }
  store_handle(std::move(h));
}

void Instance::store_handle(Handle h) {
  int k = find_handle(h.name);
  if (k < 0) {
    k = int(handles_.size());
    handle_index_.emplace(h.name, k);
    handles_.push_back(std::move(h));
  } else {
    handles_[size_t(k)] = std::move(h);
  }
  if (handles_[size_t(k)].input >= 0) input_handle_[size_t(handles_[size_t(k)].input)] = k;
  offer_run_copies();
}

// A handle whose output and input both have storage on the backend is refreshed by a copy
// there after every run; the executable may make those copies part of the run itself (a
// device backend records them with its schedule: no separate copy per run). All or none.
void Instance::offer_run_copies() {
  std::vector<backend::Executable::RunCopy> copies;
  for (const Handle& h : handles_)
    if (backend_copied(h)) {
      const Port& out = iface_->outputs[size_t(h.output)];
      copies.push_back({out.value, iface_->inputs[size_t(h.input)].value, out.slot.bytes()});
    }
  run_copies_ = !copies.empty() && exe_->set_run_copies(copies);
  if (!run_copies_) exe_->set_run_copies({});
}

bool Instance::backend_copied(const Handle& h) const {
  return h.output >= 0 && iface_->outputs[size_t(h.output)].stored && stored_input(h);
}

const Port* Instance::stored_input(const Handle& h) const {
  return h.input >= 0 && iface_->inputs[size_t(h.input)].stored ? &iface_->inputs[size_t(h.input)] : nullptr;
}

TypedTensor Instance::read_handle(const std::string& name) const {
  settle();  // committed runs end first (their outputs stay for sync_pending)
  int k = find_handle(name);
  if (k < 0) fail(ErrorCategory::InvalidArgument, "read_handle: no handle named '", name, "'");
  const Handle& h = handles_[size_t(k)];
  const Port& p = h.input >= 0 ? iface_->inputs[size_t(h.input)] : iface_->outputs[size_t(h.output)];
  TypedTensor t;
  t.dtype = p.type.dtype();
  t.dims = p.type.static_dims();
  const size_t n = size_t(p.type.numel());
  t.bytes.resize(n * dtype_size(t.dtype));
  if (!n) return t;
  if (stored_input(h))
    read_output(p, p.typed, t.bytes.data(), n);  // the handle's state lives in the input's storage
  else
    to_user(p.typed, h.store.data(), t.bytes.data(), n);
  return t;
}

bool Instance::bind_handle_external(const std::string& name, void* data, size_t nbytes, std::shared_ptr<void> owner) {
  settle();  // committed runs end first (their outputs stay for sync_pending)
  auto ii = iface_->input_index.find(name);
  if (ii == iface_->input_index.end())
    fail(ErrorCategory::InvalidArgument, "bind_handle_external: no input named '", name, "'");
  const int in = ii->second;
  const Port& p = iface_->inputs[size_t(in)];
  if (!(p.slot == p.type)) return false;  // stored in another dtype: the caller's bytes cannot be read as they are
  if (nbytes != p.slot.bytes())
    fail(ErrorCategory::InvalidArgument, "bind_handle_external: input '", name, "' (", p.slot.str(), ") needs ",
         p.slot.bytes(), " bytes, got ", nbytes);
  if (nbytes && !data) fail(ErrorCategory::InvalidArgument, "bind_handle_external: null data for input '", name, "'");
  if (!p.stored || !exe_->bind_value_external(p.value, data, nbytes)) return false;
  store_handle(Handle{name, in, -1, {}, std::move(owner), true});
  return true;
}

std::shared_ptr<backend::Storage> Instance::allocate_shared(size_t bytes) const {
  settle();  // committed runs end first (their outputs stay for sync_pending)
  return exe_->allocate_storage(bytes);
}

bool Instance::bind_handle_shared(const std::string& name, const std::shared_ptr<backend::Storage>& s,
                                  size_t byte_offset) {
  settle();  // committed runs end first (their outputs stay for sync_pending)
  auto ii = iface_->input_index.find(name);
  if (ii == iface_->input_index.end())
    fail(ErrorCategory::InvalidArgument, "bind_handle_shared: no input named '", name, "'");
  if (!s || !s->bytes()) fail(ErrorCategory::InvalidArgument, "bind_handle_shared: the buffer for input '", name, "' is empty");
  const int in = ii->second;
  const Port& p = iface_->inputs[size_t(in)];
  const size_t n = p.slot.bytes();
  if (byte_offset > s->bytes() || n > s->bytes() - byte_offset)
    fail(ErrorCategory::InvalidArgument, "bind_handle_shared: input '", name, "' (", p.slot.str(), ", ", n,
         " bytes) at byte ", byte_offset, " runs past the buffer's ", s->bytes(), " bytes");
  if (!(p.slot == p.type) || !p.stored) return false;  // another dtype, or no storage to bind
  if (!exe_->bind_value_storage(p.value, s, byte_offset, n))
    fail(ErrorCategory::InvalidArgument, "bind_handle_shared: the buffer for input '", name,
         "' is not memory this graph's backend reads in place (another backend's)");
  store_handle(Handle{name, in, -1, {}, s, true});
  return true;
}

// The index of handle `name`, with [byte_offset, byte_offset + nbytes) inside its state.
int Instance::handle_range(const char* what, const std::string& name, size_t byte_offset, size_t nbytes) const {
  int k = find_handle(name);
  if (k < 0) fail(ErrorCategory::InvalidArgument, what, ": no handle named '", name, "' (bind_handle it first)");
  const Handle& h = handles_[size_t(k)];
  const Port& p = h.input >= 0 ? iface_->inputs[size_t(h.input)] : iface_->outputs[size_t(h.output)];
  const size_t total = p.slot.bytes();
  if (byte_offset > total || nbytes > total - byte_offset)
    fail(ErrorCategory::InvalidArgument, what, ": ", nbytes, " bytes at byte ", byte_offset, " are outside handle '",
         name, "' (", total, " bytes, ", p.slot.str(), ")");
  return k;
}

void Instance::write_handle(const std::string& name, size_t byte_offset, const void* bytes, size_t nbytes) {
  settle();  // committed runs end first (their outputs stay for sync_pending)
  const int k = handle_range("write_handle", name, byte_offset, nbytes);
  if (nbytes && !bytes) fail(ErrorCategory::InvalidArgument, "write_handle: null data for handle '", name, "'");
  write_range(handles_[size_t(k)], byte_offset, bytes, nbytes);
}

void Instance::read_handle_range(const std::string& name, size_t byte_offset, void* bytes, size_t nbytes) const {
  settle();  // committed runs end first (their outputs stay for sync_pending)
  const int k = handle_range("read_handle_range", name, byte_offset, nbytes);
  if (nbytes && !bytes) fail(ErrorCategory::InvalidArgument, "read_handle_range: null destination for handle '", name, "'");
  read_range(handles_[size_t(k)], byte_offset, bytes, nbytes);
}

void Instance::write_range(Handle& h, size_t byte_offset, const void* bytes, size_t nbytes) {
  if (nbytes == 0) return;
  if (const Port* in = stored_input(h)) exe_->upload_range(in->value, byte_offset, bytes, nbytes);
  else std::memcpy(h.store.data() + byte_offset, bytes, nbytes);
}

void Instance::read_range(const Handle& h, size_t byte_offset, void* bytes, size_t nbytes) const {
  if (nbytes == 0) return;
  if (const Port* in = stored_input(h)) exe_->download_range(in->value, byte_offset, bytes, nbytes);
  else std::memcpy(bytes, h.store.data() + byte_offset, nbytes);
}

void Instance::copy_handle_ranges(const Instance& from, const std::vector<CompiledGraph::HandleCopy>& copies) {
  settle();  // committed runs end first (their outputs stay for sync_pending)
  from.settle();
  // Every range checked before anything moves: inside its handle, and no two of this
  // graph's ranges that one copy writes and another reads or writes overlap (so the order
  // of the copies does not matter).
  std::vector<ByteSpan> spans;
  std::vector<int> dst(copies.size()), src(copies.size());
  for (size_t i = 0; i < copies.size(); ++i) {
    const CompiledGraph::HandleCopy& c = copies[i];
    dst[i] = handle_range("copy_handle_ranges", c.name, c.offset, c.bytes);
    src[i] = from.handle_range("copy_handle_ranges (source)", c.from_name, c.from_offset, c.bytes);
    if (!c.bytes) continue;
    spans.push_back(ByteSpan{dst[i], c.offset, c.offset + c.bytes, true});
    if (&from == this) spans.push_back(ByteSpan{src[i], c.from_offset, c.from_offset + c.bytes, false});
  }
  if (const ByteSpan* a = first_conflict(spans))
    fail(ErrorCategory::InvalidArgument, "copy_handle_ranges: bytes [", a->begin, ", ", a->end, ") of handle '",
         handles_[size_t(a->object)].name, "' overlap another range of the same call, one of them written");
  std::vector<backend::Executable::RangeCopy> direct;
  bool all_direct = true;
  for (size_t i = 0; i < copies.size() && all_direct; ++i) {
    if (!copies[i].bytes) continue;
    const Port* d = stored_input(handles_[size_t(dst[i])]);
    const Port* s = from.stored_input(from.handles_[size_t(src[i])]);
    all_direct = d && s;
    if (all_direct) direct.push_back({s->value, copies[i].from_offset, d->value, copies[i].offset, copies[i].bytes});
  }
  if (all_direct && exe_->copy_ranges_from(*from.exe_, direct)) return;
  std::vector<uint8_t> tmp;  // through host memory: another backend, or a handle kept on the host
  for (size_t i = 0; i < copies.size(); ++i) {
    tmp.resize(copies[i].bytes);
    from.read_range(from.handles_[size_t(src[i])], copies[i].from_offset, tmp.data(), copies[i].bytes);
    write_range(handles_[size_t(dst[i])], copies[i].offset, tmp.data(), copies[i].bytes);
  }
}

void Instance::set_active_extent(int64_t actual, int64_t upper) {
  settle();  // committed runs end first (their outputs stay for sync_pending)
  if (upper < 1 || actual < 1 || actual > upper)
    fail(ErrorCategory::InvalidArgument, "set_active_extent(", actual, ", ", upper,
         "): needs 1 <= actual <= upper");
  if (actual != upper) {
    // An extent no dim of the compiled graph has would silently run everything in full.
    // (Decode loops call this every step: a lookup, not a walk over the graph.)
    if (!std::binary_search(iface_->dim_sizes.begin(), iface_->dim_sizes.end(), upper))
      fail(ErrorCategory::InvalidArgument, "set_active_extent(", actual, ", ", upper, "): no dim of the compiled graph is ",
           upper, "; 'upper' must be the size the graph was compiled with (e.g. its context length)");
  }
  exe_->set_extent(actual, upper);
}

void Instance::release_scratch() {
  settle();
  exe_->release_scratch();
}

void Instance::settle() const {
  if (in_flight_ == 0) return;
  in_flight_ = 0;
  try {
    exe_->wait_async();
  } catch (...) {
    pending_.clear();  // the runs' outputs are lost with the error
    throw;
  }
  for (Pending& r : pending_)
    for (size_t k = 0; k < r.ports.size(); ++k) {
      if (!r.ports[k] || r.slots[k].empty()) continue;  // not stored, or converted already
      const Port& p = *r.ports[k];
      to_user(p.typed, r.slots[k].data(), r.out[k].bytes.data(), size_t(p.type.numel()));
      r.slots[k] = {};
    }
}

std::vector<std::vector<TypedTensor>> Instance::sync_pending() {
  settle();
  std::vector<std::vector<TypedTensor>> out;
  out.reserve(pending_.size());
  for (Pending& r : pending_) out.push_back(std::move(r.out));
  pending_.clear();
  return out;
}

size_t Instance::pending_runs() const { return pending_.size(); }

void Instance::check_output_indices(const std::vector<int>& only) const {
  for (int k : only)
    if (k < 0 || size_t(k) >= iface_->outputs.size())
      fail(ErrorCategory::InvalidArgument, "output index ", k, " out of range (", iface_->outputs.size(), " outputs)");
}

void Instance::take_typed_feeds(const std::map<std::string, TypedTensor>& inputs) {
  for (Feed& f : feeds_) f.given = false;
  for (const auto& [name, t] : inputs) {
    const size_t i = fed_input(name);
    feeds_[i] = check_feed(iface_->inputs[i], t.dtype, t.bytes.data(), t.bytes.size(), false, &t.dims);
  }
  check_complete();
}

TypedTensor Instance::output_tensor(const Port& p) {
  TypedTensor t;
  t.dtype = p.type.dtype();
  t.dims = p.type.static_dims();
  t.bytes.assign(size_t(p.type.numel()) * dtype_size(t.dtype), 0);
  return t;
}

void Instance::commit_no_wait(const std::map<std::string, TypedTensor>& inputs, const std::vector<int>* only) {
  if (only) check_output_indices(*only);
  for (const Handle& h : handles_)
    if (h.output >= 0 && iface_->outputs[size_t(h.output)].stored && !backend_copied(h))
      fail(ErrorCategory::InvalidArgument, "handle '", h.name,
           "' is refreshed through host memory after every run: it cannot be pipelined (use run_typed)");
  take_typed_feeds(inputs);  // throws before anything is queued
  write_feeds();
  Pending r;
  auto add = [&](const Port& p) {
    r.out.push_back(output_tensor(p));
    r.ports.push_back(p.stored ? &p : nullptr);
    r.slots.emplace_back(p.stored ? p.slot.bytes() : 0);
  };
  if (only && only->empty()) {
    for (const Port& p : iface_->outputs) add(p);
  } else if (only) {
    for (int k : *only) add(iface_->outputs[size_t(k)]);
  }
  exe_->run_async();
  ++in_flight_;
  refresh_handles();  // backend-side copies only (checked above): queued behind the run
  // The stored outputs land in r.slots when the run ends; settle() converts them.
  for (size_t k = 0; k < r.ports.size(); ++k)
    if (r.ports[k]) exe_->download_async(r.ports[k]->value, r.slots[k].data(), r.slots[k].size());
  pending_.push_back(std::move(r));
}

}  // namespace rlx::runtime
