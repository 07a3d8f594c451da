// `rlx inspect` (GGUF metadata and tensor table) and `rlx quantize` (GGUF -> GGUF).
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include "cli.h"
#include "rlx/dtype.h"
#include "rlx/gguf.h"

namespace rlx::cli {

namespace {

std::string json_escape(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') { o += '\\'; o += static_cast<char>(c); }
    else if (c == '\n') o += "\\n";
    else if (c == '\t') o += "\\t";
    else if (c < 0x20) { char b[8]; std::snprintf(b, sizeof b, "\\u%04x", c); o += b; }
    else o += static_cast<char>(c);
  }
  return o;
}

std::string dims_text(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

std::string human_bytes(uint64_t b) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2);
  if (b >= (uint64_t(1) << 30)) os << double(b) / double(uint64_t(1) << 30) << " GiB";
  else if (b >= (uint64_t(1) << 20)) os << double(b) / double(uint64_t(1) << 20) << " MiB";
  else if (b >= 1024) os << double(b) / 1024.0 << " KiB";
  else os << b << " B";
  return os.str();
}

void json_value(std::ostream& os, const gguf::MetaValue& v, bool full) {
  using gguf::ValueType;
  switch (v.type) {
    case ValueType::String: os << '"' << json_escape(v.str) << '"'; return;
    case ValueType::Bool: os << (v.i ? "true" : "false"); return;
    case ValueType::F32: case ValueType::F64: os << v.f; return;
    case ValueType::Array: {
      uint64_t n = v.array_size();
      if (!full && n > 64) {  // long arrays (vocabularies) are summarized
        os << "{\"type\": \"" << gguf::value_type_name(v.elem_type) << "\", \"length\": " << n << "}";
        return;
      }
      os << "[";
      for (uint64_t k = 0; k < n; ++k) {
        if (k) os << ", ";
        if (v.elem_type == ValueType::String) os << '"' << json_escape(v.strs[k]) << '"';
        else if (v.elem_type == ValueType::Array) json_value(os, v.items[k], full);
        else if (v.elem_type == ValueType::F32 || v.elem_type == ValueType::F64) os << v.floats[k];
        else os << v.ints[k];
      }
      os << "]";
      return;
    }
    default:
      if (v.type == ValueType::U64) os << static_cast<uint64_t>(v.i);
      else os << v.i;
  }
}

int cmd_inspect(const Args& args) {
  gguf::File f = gguf::File::open(args.positional[0]);
  uint64_t total = 0;
  for (const auto& t : f.tensors()) total += t.bytes;
  if (args.has("--json")) {
    std::ostream& os = std::cout;
    os << "{\n  \"file\": \"" << json_escape(f.path()) << "\",\n  \"version\": " << f.version()
       << ",\n  \"alignment\": " << f.alignment() << ",\n  \"data_offset\": " << f.data_offset()
       << ",\n  \"tensor_bytes\": " << total << ",\n  \"metadata\": {";
    bool first = true;
    for (const auto& [k, v] : f.metadata()) {
      os << (first ? "\n" : ",\n") << "    \"" << json_escape(k) << "\": ";
      json_value(os, v, args.has("--full"));
      first = false;
    }
    os << "\n  },\n  \"tensors\": [";
    first = true;
    for (const auto& t : f.tensors()) {
      os << (first ? "\n" : ",\n") << "    {\"name\": \"" << json_escape(t.name) << "\", \"type\": \""
         << gguf::type_name(t.type) << "\", \"dims\": " << dims_text(t.dims) << ", \"offset\": " << t.offset
         << ", \"bytes\": " << t.bytes << "}";
      first = false;
    }
    os << "\n  ]\n}\n";
    return 0;
  }
  std::cout << f.path() << ": GGUF v" << f.version() << ", " << f.metadata().size() << " metadata keys, "
            << f.tensors().size() << " tensors, " << human_bytes(total) << " of tensor data (alignment "
            << f.alignment() << ")\n\nmetadata:\n";
  size_t items = args.has("--full") ? size_t(1) << 62 : 8;
  for (const auto& [k, v] : f.metadata()) std::cout << "  " << k << " = " << v.to_string(items) << "\n";
  std::cout << "\ntensors:\n";
  std::map<std::string, std::pair<int, uint64_t>> per_type;
  for (const auto& t : f.tensors()) {
    std::cout << "  " << std::left << std::setw(36) << t.name << " " << std::setw(8) << gguf::type_name(t.type)
              << " " << std::setw(20) << dims_text(t.dims) << " " << human_bytes(t.bytes) << "\n";
    auto& pt = per_type[gguf::type_name(t.type)];
    pt.first++;
    pt.second += t.bytes;
  }
  std::cout << "\nby type:";
  for (const auto& [name, pt] : per_type) std::cout << "  " << name << " x" << pt.first << " (" << human_bytes(pt.second) << ")";
  std::cout << "\n";
  return 0;
}

// llama.cpp's general.file_type numbers for the "mostly TYPE" files rlx writes.
int file_type_of(gguf::TensorType t) {
  switch (t) {
    case gguf::TensorType::F32: return 0;
    case gguf::TensorType::F16: return 1;
    case gguf::TensorType::Q4_0: return 2;
    case gguf::TensorType::Q4_1: return 3;
    case gguf::TensorType::Q8_0: return 7;
    case gguf::TensorType::Q5_0: return 8;
    case gguf::TensorType::Q5_1: return 9;
    case gguf::TensorType::Q4_K: return 14;   // Q4_K_S: every matrix Q4_K
    case gguf::TensorType::Q6_K: return 18;
    case gguf::TensorType::BF16: return 32;
    default: return -1;
  }
}

int cmd_quantize(const Args& args) {
  const std::string& in = args.positional[0];
  const std::string& out = args.positional[1];
  gguf::TensorType target;
  if (!gguf::type_from_name(args.positional[2], target) || !gguf::can_quantize(target))
    throw UsageError("quantize: unknown or unsupported type '" + args.positional[2] +
                     "' (supported: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q6_K)");
  gguf::File f = gguf::File::open(in);
  gguf::Writer w;
  w.copy_metadata(f);
  if (int ft = file_type_of(target); ft >= 0) w.set_u32("general.file_type", static_cast<uint32_t>(ft));
  w.set_u32("general.quantization_version", 2);
  uint64_t total = 0, done = 0, bytes_in = 0, bytes_out = 0;
  for (const auto& t : f.tensors()) total += static_cast<uint64_t>(t.elements());
  bool bar = !args.has("--quiet");
  int to_target = 0, to_q8 = 0, kept = 0;
  for (const auto& t : f.tensors()) {
    // Matrices are quantized; vectors (norms, biases, scales) stay as they are, as do
    // matrices whose rows are not a whole number of the target's blocks (then Q8_0 when
    // the rows fit its 32-element blocks, else unchanged).
    gguf::TensorType type = t.type;
    const int64_t row = t.dims.empty() ? 1 : t.dims[0];
    if (t.dims.size() >= 2 && gguf::can_dequantize(t.type)) {
      if (row % gguf::type_traits(target).block_elems == 0) type = target;
      else if (row % 32 == 0 && target != gguf::TensorType::F16 && target != gguf::TensorType::BF16 &&
               target != gguf::TensorType::F32)
        type = gguf::TensorType::Q8_0;
    }
    std::vector<uint8_t> bytes;
    if (type == t.type) {
      bytes.assign(f.data(t), f.data(t) + t.bytes);
      ++kept;
    } else {
      const int64_t rows = t.elements() / row;
      const int64_t rb = gguf::row_bytes(type, row);
      bytes.resize(static_cast<size_t>(rb * rows));
      std::vector<float> tmp(static_cast<size_t>(row));
      const int64_t in_rb = gguf::row_bytes(t.type, row);
      for (int64_t r = 0; r < rows; ++r) {
        gguf::dequantize(t.type, f.data(t) + r * in_rb, tmp.data(), row);
        try {
          gguf::quantize(type, tmp.data(), bytes.data() + r * rb, row);
        } catch (const Error& e) {  // e.g. inf or NaN in the row: name the tensor and the row
          fail(e.category(), "quantize: tensor '", t.name, "' row ", r, ": ", e.what());
        }
      }
      ++(type == target ? to_target : to_q8);
    }
    bytes_in += t.bytes;
    bytes_out += bytes.size();
    w.add_tensor(t.name, t.dims, type, bytes);
    done += static_cast<uint64_t>(t.elements());
    if (bar) {
      int pct = total ? static_cast<int>(100 * done / total) : 100;
      std::string b(static_cast<size_t>(pct / 4), '#');
      b.resize(25, ' ');
      std::fprintf(stderr, "\r[%s] %3d%%  %-40.40s", b.c_str(), pct, t.name.c_str());
    }
  }
  if (bar) std::fprintf(stderr, "\n");
  w.write(out);
  std::cout << "quantize: " << to_target << " tensors to " << gguf::type_name(target) << ", ";
  if (to_q8 > 0)
    std::cout << to_q8 << " to q8_0 (rows not a multiple of " << gguf::type_traits(target).block_elems << "), ";
  std::cout << kept << " kept; " << human_bytes(bytes_in) << " -> " << human_bytes(bytes_out) << "; wrote " << out << "\n";
  return 0;
}

}  // namespace

std::vector<Command> gguf_commands() {
  std::vector<Command> t;
  t.push_back(Command{"inspect", "print a GGUF file's metadata and tensor table", "MODEL.gguf [--json] [--full]", 1, 1,
                      {{"--json", "", "print JSON instead of text", false},
                       {"--full", "", "print long arrays (vocabularies) in full", false}},
                      &cmd_inspect});
  t.push_back(Command{"quantize", "convert a GGUF model's matrices to another type (progress on stderr)",
                      "IN.gguf OUT.gguf TYPE", 3, 3, {{"--quiet", "", "no progress bar", false}}, &cmd_quantize});
  return t;
}

}  // namespace rlx::cli
