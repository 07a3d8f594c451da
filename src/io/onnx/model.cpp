// Loading: protobuf parse with raised limits, structural checks, value infos, and the
// import with declared shapes.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <limits>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include "io/onnx/importer.h"
#include "io/onnx/ops_table.h"

namespace rlx::onnx {

namespace {

OnnxValueInfo value_info(const pb::ValueInfoProto& vi) {
  OnnxValueInfo info;
  info.name = vi.name();
  if (!vi.type().has_tensor_type()) {
    info.is_tensor = false;
    const auto& t = vi.type();
    info.kind = t.has_sequence_type() ? ValueKind::Sequence : t.has_optional_type() ? ValueKind::Optional : ValueKind::Map;
    return info;
  }
  const auto& tt = vi.type().tensor_type();
  info.onnx_type = tt.elem_type();
  if (auto d = carried_dtype(info.onnx_type)) info.dtype = *d;
  for (int i = 0; i < tt.shape().dim_size(); ++i) {
    const auto& d = tt.shape().dim(i);
    bool fixed = d.has_dim_value() && d.dim_value() >= 0;
    info.dims.push_back(fixed ? d.dim_value() : -1);
    info.dim_params.push_back(fixed ? "" : d.dim_param());
  }
  return info;
}

void check_graph(const pb::GraphProto& g, const std::string& path, int depth) {
  if (depth > 64) fail(ErrorCategory::Parse, path, ": subgraphs nested deeper than 64 levels");
  for (const auto& vi : g.input())
    if (vi.name().empty()) fail(ErrorCategory::Parse, path, ": graph '", g.name(), "' has an input without a name");
  for (const auto& vo : g.output())
    if (vo.name().empty()) fail(ErrorCategory::Parse, path, ": graph '", g.name(), "' has an output without a name");
  for (const auto& n : g.node()) {
    if (n.op_type().empty()) fail(ErrorCategory::Parse, path, ": a node of graph '", g.name(), "' has no op_type");
    for (const auto& a : n.attribute()) {
      if (a.has_g()) check_graph(a.g(), path, depth + 1);
      for (const auto& sg : a.graphs()) check_graph(sg, path, depth + 1);
    }
  }
}

// Puts a graph's nodes (and its subgraphs') in topological order. ONNX requires it, but
// some converters append nodes late (the float16 converters add the graph inputs' Casts at
// the end) and other runtimes sort for themselves. Stable: a node keeps its place unless a
// value it reads is produced after it; a graph already in order is left untouched. A cycle
// or a name nothing produces leaves the rest in file order (the import names the value).
void sort_nodes(pb::GraphProto& g) {
  for (auto& n : *g.mutable_node())
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) sort_nodes(*a.mutable_g());
      for (auto& sg : *a.mutable_graphs()) sort_nodes(sg);
    }
  const int count = g.node_size();
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < count; ++i)
    for (const auto& o : g.node(i).output())
      if (!o.empty()) producer.emplace(o, i);
  std::vector<std::vector<int>> users(static_cast<size_t>(count));
  std::vector<int> waiting(static_cast<size_t>(count), 0);
  bool sorted = true;
  for (int i = 0; i < count; ++i) {
    std::unordered_set<std::string> reads;  // a body's own names are not produced here: filtered below
    names_read(g.node(i), reads);
    std::vector<int> deps;
    for (const std::string& r : reads) {
      auto it = producer.find(r);
      if (it == producer.end() || it->second == i) continue;
      deps.push_back(it->second);
    }
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    for (int d : deps) {
      users[size_t(d)].push_back(i);
      sorted = sorted && d < i;
    }
    waiting[size_t(i)] = int(deps.size());
  }
  if (sorted) return;
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < count; ++i)
    if (waiting[size_t(i)] == 0) ready.push(i);
  std::vector<int> order;
  std::vector<char> placed(static_cast<size_t>(count), 0);
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    order.push_back(i);
    placed[size_t(i)] = 1;
    for (int u : users[size_t(i)])
      if (--waiting[size_t(u)] == 0) ready.push(u);
  }
  for (int i = 0; i < count; ++i)
    if (!placed[size_t(i)]) order.push_back(i);
  google::protobuf::RepeatedPtrField<pb::NodeProto> nodes;
  for (int i : order) nodes.Add()->Swap(g.mutable_node(i));
  g.mutable_node()->Swap(&nodes);
}

std::shared_ptr<ModelSource> parse_stream(google::protobuf::io::CodedInputStream& in, const std::string& name,
                                          const std::string& base_dir) {
  auto src = std::make_shared<ModelSource>();
  src->path = name;
  src->base_dir = base_dir;
  in.SetTotalBytesLimit(std::numeric_limits<int>::max());
  in.SetRecursionLimit(1000);
  if (!src->model.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
    fail(ErrorCategory::Parse, name, ": not a valid ONNX model (protobuf parse failed; truncated or corrupt file)");
  const auto& m = src->model;
  if (!m.has_graph()) fail(ErrorCategory::Parse, name, ": the model has no graph (truncated or not an ONNX model)");
  if (m.ir_version() <= 0) fail(ErrorCategory::Parse, name, ": missing or invalid ir_version");
  for (const auto& os : m.opset_import()) {
    src->opsets[os.domain()] = os.version();
    if (is_default_domain(os.domain())) src->opset = os.version();
  }
  if (m.opset_import_size() == 0) {
    if (m.ir_version() >= 3) fail(ErrorCategory::Parse, name, ": the model imports no opset");
    src->opset = 1;
  }
  check_graph(m.graph(), name, 0);
  sort_nodes(*src->model.mutable_graph());
  return src;
}

void check_size(uint64_t size, const std::string& name) {
  if (size > uint64_t(std::numeric_limits<int>::max()))
    fail(ErrorCategory::Parse, name, ": model of ", size, " bytes exceeds the 2 GiB protobuf limit (use external data)");
}

}  // namespace

std::shared_ptr<ModelSource> parse_model(const void* data, size_t size, const std::string& name,
                                         const std::string& base_dir) {
  check_size(size, name);
  google::protobuf::io::CodedInputStream in(static_cast<const uint8_t*>(data), int(size));
  return parse_stream(in, name, base_dir);
}

// Parsed straight from the file descriptor through protobuf's buffered stream: no copy of
// the whole file in memory next to the message it becomes (for a model of large
// initializers that copy was the peak of the process).
std::shared_ptr<ModelSource> parse_model_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(ErrorCategory::Io, "cannot open ONNX model '", path, "'");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) fail(ErrorCategory::Io, "cannot read ONNX model '", path, "'");
  check_size(uint64_t(st.st_size), path);
  google::protobuf::io::FileInputStream file(fd);
  std::shared_ptr<ModelSource> src;
  {
    google::protobuf::io::CodedInputStream in(&file);
    src = parse_stream(in, path, std::filesystem::path(path).parent_path().string());
  }
  if (file.GetErrno() != 0) fail(ErrorCategory::Io, "cannot read ONNX model '", path, "'");
  src->from_file = true;
  src->file_size = int64_t(st.st_size);
  src->file_mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return src;
}

OnnxModel make_model(std::shared_ptr<ModelSource> src, const ImportOptions& opts) {
  OnnxModel model;
  model.path = src->path;
  model.ir_version = src->model.ir_version();
  model.opset = src->opset;
  const auto& g = src->model.graph();
  std::map<std::string, bool> init;
  for (const auto& t : g.initializer()) init[t.name()] = true;
  for (const auto& vi : g.input())
    if (!init.count(vi.name())) model.inputs.push_back(value_info(vi));
  for (const auto& vo : g.output()) model.outputs.push_back(value_info(vo));
  model.source = src;
  if (src->opset > kMaxOpset)
    fail(ErrorCategory::Unsupported, src->path, ": opset ", src->opset, " of the default domain is newer than ",
         kMaxOpset);
  try {
    model.graph = import_graph(model, {}, opts);
    model.has_graph = true;
  } catch (const DynamicShapeError& e) {
    model.dynamic_reason = e.what();
  } catch (const ConstantRequiredError& e) {
    model.dynamic_reason = e.what();
  } catch (const RunTimeShapeError& e) {
    model.dynamic_reason = e.what();
  } catch (const Error& e) {
    // With symbolic input dims a shape rule may need sizes that only a concrete
    // import has; the runner imports per concrete shapes then.
    bool symbolic = false;
    for (const auto& in : model.inputs)
      for (int64_t d : in.dims) symbolic = symbolic || d < 0;
    if (!symbolic || e.category() != ErrorCategory::Shape) throw;
    model.dynamic_reason = e.what();
  }
  return model;
}

OnnxModel load_onnx_bytes(const void* data, size_t size, const std::string& name, const std::string& base_dir,
                          const ImportOptions& opts) {
  return detail::guard("loading ONNX model", [&] { return make_model(parse_model(data, size, name, base_dir), opts); });
}

OnnxModel load_onnx(const std::string& path, const ImportOptions& opts) {
  return detail::guard("loading ONNX model", [&] { return make_model(parse_model_file(path), opts); });
}

Graph import_graph(const OnnxModel& model, const std::map<std::string, std::vector<int64_t>>& shapes,
                   const ImportOptions& opts, const std::map<std::string, TypedTensor>& values) {
  if (!model.source) fail(ErrorCategory::InvalidArgument, "import_graph: the model was not loaded");
  Graph g(model.source->model.graph().name().empty() ? "onnx" : model.source->model.graph().name());
  Importer im(*model.source, opts, g);
  try {
    im.import_main(shapes, values);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {  // e.g. protobuf checks or allocation failures on hostile models
    fail(ErrorCategory::Parse, model.path, ": the model could not be imported: ", e.what());
  }
  return g;
}

}  // namespace rlx::onnx
