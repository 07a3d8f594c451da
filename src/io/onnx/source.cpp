// A model's decoded initializers (ModelSource::initializers): decoded once, shared by every
// import of the model, and, after a compile, held only weakly for the main graph's, so a
// backend that keeps its own form of a weight (the CPU's prepacked matmul operands) can free
// the original. A later import that needs released bytes parses the file again, once, and
// decodes everything released since.
#include <sys/stat.h>

#include "io/onnx/importer.h"
#include "io/onnx/tensor.h"

namespace rlx::onnx {
namespace {

int64_t mtime_ns(const struct stat& st) { return int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec; }

// The message's data is dropped once decoded: nothing reads it again (the file does, if the
// decoded bytes are released and needed again).
void drop_message_data(const pb::TensorProto& t) {
  auto& m = const_cast<pb::TensorProto&>(t);  // the source's own message (created mutable)
  std::string().swap(*m.mutable_raw_data());
  pb::TensorProto empty;
  m.mutable_float_data()->Swap(empty.mutable_float_data());
  m.mutable_int32_data()->Swap(empty.mutable_int32_data());
  m.mutable_int64_data()->Swap(empty.mutable_int64_data());
  m.mutable_double_data()->Swap(empty.mutable_double_data());
  m.mutable_uint64_data()->Swap(empty.mutable_uint64_data());
}

// Decodes again, from a fresh parse of the file, every main-graph initializer whose bytes
// were released and are no longer held by anyone. Called with init_mu held.
void reload_released(const ModelSource& src) {
  struct stat st {};
  if (::stat(src.path.c_str(), &st) != 0 || int64_t(st.st_size) != src.file_size || mtime_ns(st) != src.file_mtime_ns)
    fail(ErrorCategory::Io, src.path, ": the model file changed (or is gone) since it was loaded; its released ",
         "weights cannot be read again: load the model again");
  std::shared_ptr<ModelSource> fresh = parse_model_file(src.path);
  const auto& inits = fresh->model.graph().initializer();
  for (auto& [t, init] : src.initializers) {
    if (!init.bytes.empty() || init.main_index < 0) continue;
    init.bytes = init.held.lock();
    if (!init.bytes.empty()) continue;
    if (init.main_index >= inits.size())
      fail(ErrorCategory::Io, src.path, ": the model file no longer has initializer '", t->name(), "'");
    const pb::TensorProto& ft = inits.Get(init.main_index);
    HostTensor h = decode_tensor(ft, src.base_dir, src.path + ": initializer '" + ft.name() + "'");
    if (ft.name() != t->name() || h.dtype != init.dtype || h.dims != init.dims)
      fail(ErrorCategory::Io, src.path, ": initializer '", t->name(), "' reads back differently from the file");
    init.bytes = Blob(std::move(h.bytes));
  }
}

}  // namespace

ModelSource::Initializer source_initializer(const ModelSource& src, const pb::TensorProto& t) {
  std::lock_guard<std::mutex> lock(src.init_mu);
  auto it = src.initializers.find(&t);
  if (it != src.initializers.end()) {
    ModelSource::Initializer& init = it->second;
    if (init.bytes.empty()) init.bytes = init.held.lock();
    if (init.bytes.empty() && init.main_index >= 0) reload_released(src);
    return init;
  }
  HostTensor h = decode_tensor(t, src.base_dir, src.path + ": initializer '" + t.name() + "'");
  ModelSource::Initializer init{h.dtype, h.dims, Blob(std::move(h.bytes)), {}, -1};
  const auto& main = src.model.graph().initializer();
  for (int i = 0; i < main.size(); ++i)
    if (&main.Get(i) == &t) init.main_index = i;
  drop_message_data(t);
  return src.initializers.emplace(&t, std::move(init)).first->second;
}

void release_initializers(const ModelSource& src) {
  if (!src.from_file) return;
  std::lock_guard<std::mutex> lock(src.init_mu);
  for (auto& [t, init] : src.initializers) {
    if (init.main_index < 0 || init.bytes.empty()) continue;
    init.held = init.bytes.weak();
    init.bytes = Blob();
  }
}

}  // namespace rlx::onnx
