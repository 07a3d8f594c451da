// The conformance runner: case discovery, skip rules, running, comparison, and
// optional fork isolation with parallel jobs. Built into the CLI when the importer is.
#ifdef RLX_HAVE_ONNX
#include "onnx_conformance.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "io/onnx/host_value.h"
#include "io/onnx/importer.h"
#include "io/onnx/ops_table.h"
#include "rlx/onnx.h"

namespace fs = std::filesystem;

namespace rlx::onnx {

namespace {

std::string one_line(std::string s) {
  for (char& ch : s)
    if (ch == '\n' || ch == '\r') ch = ' ';
  if (s.size() > 600) s = s.substr(0, 600) + "...";
  return s;
}

// Why a case is skipped ("" if it runs): maps and sparse tensors, other domains.
std::string skip_reason_graph(const pb::GraphProto& g) {
  auto check_vi = [](const pb::ValueInfoProto& vi) -> std::string {
    const auto& t = vi.type();
    if (t.has_map_type() || t.has_sparse_tensor_type()) return "map/sparse value '" + vi.name() + "'";
    return "";
  };
  for (const auto& vi : g.input())
    if (auto r = check_vi(vi); !r.empty()) return r;
  for (const auto& vi : g.output())
    if (auto r = check_vi(vi); !r.empty()) return r;
  for (const auto& n : g.node()) {
    if (!has_domain(n.domain())) return "domain '" + n.domain() + "' (rlx lowers none of its ops)";
    for (const auto& a : n.attribute()) {
      if (a.has_g())
        if (auto r = skip_reason_graph(a.g()); !r.empty()) return r;
      for (const auto& sg : a.graphs())
        if (auto r = skip_reason_graph(sg); !r.empty()) return r;
    }
  }
  return "";
}

std::vector<std::string> sorted_files(const fs::path& dir, const std::string& prefix) {
  std::vector<std::pair<int, std::string>> v;
  if (!fs::is_directory(dir)) return {};
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string n = e.path().filename().string();
    if (n.rfind(prefix, 0) != 0) continue;
    std::string num = n.substr(prefix.size());
    auto dot = num.find('.');
    if (dot != std::string::npos) num = num.substr(0, dot);
    try {
      v.emplace_back(std::stoi(num), e.path().string());
    } catch (const std::exception&) {
    }
  }
  std::sort(v.begin(), v.end());
  std::vector<std::string> out;
  for (auto& p : v) out.push_back(p.second);
  return out;
}

void tolerance(DType t, double& rtol, double& atol) {
  rtol = 1e-3;
  atol = 1e-7;
  if (t == DType::F16) {
    rtol = 4e-3;
    atol = 1e-5;
  } else if (t == DType::BF16) {
    rtol = 3.2e-2;
    atol = 1e-4;
  }
}

double element(const uint8_t* p, DType t, int part) {
  if (t == DType::C64) {
    float v;
    std::memcpy(&v, p + part * 4, 4);
    return v;
  }
  if (t == DType::C128) {
    double v;
    std::memcpy(&v, p + part * 8, 8);
    return v;
  }
  return read_scalar(p, t);
}

// "" when equal within tolerance, else the first mismatch.
std::string compare(const HostTensor& want, const TypedTensor& got, const std::string& what) {
  if (got.dims != want.dims) {
    std::ostringstream os;
    os << what << ": shape ";
    for (auto d : got.dims) os << d << ",";
    os << " expected ";
    for (auto d : want.dims) os << d << ",";
    return os.str();
  }
  if (got.dtype != want.dtype)
    return what + ": dtype " + std::string(dtype_name(got.dtype)) + ", expected " + std::string(dtype_name(want.dtype));
  int64_t n = want.numel();
  size_t es = dtype_size(want.dtype);
  if (got.bytes.size() != size_t(n) * es) return what + ": wrong byte count";
  bool exact = !is_float(want.dtype) && !is_complex(want.dtype);
  if (exact) {
    if (want.dtype == DType::I64 || want.dtype == DType::U32 || want.dtype == DType::I32) {
      for (int64_t i = 0; i < n; ++i)
        if (std::memcmp(got.bytes.data() + i * es, want.bytes.data() + i * es, es) != 0) {
          std::ostringstream os;
          os << what << "[" << i << "] = " << read_scalar(got.bytes.data() + i * es, want.dtype) << ", expected "
             << read_scalar(want.bytes.data() + i * es, want.dtype);
          return os.str();
        }
      return "";
    }
    for (int64_t i = 0; i < n; ++i) {
      double a = read_scalar(got.bytes.data() + i * es, want.dtype), b = read_scalar(want.bytes.data() + i * es, want.dtype);
      if (a != b) {
        std::ostringstream os;
        os << what << "[" << i << "] = " << a << ", expected " << b;
        return os.str();
      }
    }
    return "";
  }
  double rtol, atol;
  tolerance(want.dtype, rtol, atol);
  int parts = is_complex(want.dtype) ? 2 : 1;
  int64_t bad = 0, first = -1;
  double fa = 0, fb = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int p = 0; p < parts; ++p) {
      double a = element(got.bytes.data() + i * es, want.dtype, p);
      double b = element(want.bytes.data() + i * es, want.dtype, p);
      bool ok;
      if (std::isnan(b)) ok = std::isnan(a);
      else if (std::isinf(b)) ok = a == b;
      else ok = std::isfinite(a) && std::fabs(a - b) <= atol + rtol * std::fabs(b);
      if (!ok) {
        if (first < 0) first = i, fa = a, fb = b;
        ++bad;
      }
    }
  }
  if (!bad) return "";
  std::ostringstream os;
  os.precision(8);
  os << what << ": " << bad << " of " << n << " values differ; first [" << first << "] = " << fa << ", expected " << fb;
  return os.str();
}

// "" when `got` equals `want` (any kind; tensors as compare() has them), else the first mismatch.
std::string compare_value(const OnnxValue& want, const OnnxValue& got, const std::string& what) {
  if (want.kind != got.kind) return what + ": got " + got.describe() + ", expected " + want.describe();
  if (want.kind == ValueKind::Tensor) {
    if (want.is_string() != got.is_string()) return what + ": got " + got.describe() + ", expected " + want.describe();
    if (!want.is_string()) return compare(to_host(want, what), got.tensor, what);
    if (want.tensor.dims != got.tensor.dims) return what + ": got " + got.describe() + ", expected " + want.describe();
    for (size_t i = 0; i < want.strings.size(); ++i)
      if (want.strings[i] != got.strings[i])
        return what + "[" + std::to_string(i) + "] = '" + got.strings[i] + "', expected '" + want.strings[i] + "'";
    return "";
  }
  if (want.items.size() != got.items.size()) return what + ": got " + got.describe() + ", expected " + want.describe();
  for (size_t i = 0; i < want.items.size(); ++i)
    if (auto d = compare_value(want.items[i], got.items[i], what + " element " + std::to_string(i)); !d.empty()) return d;
  return "";
}

CaseResult run_case_inner(const std::string& dir, const ConformanceOptions& opts) {
  CaseResult r;
  r.name = fs::path(dir).filename().string();
  std::shared_ptr<ModelSource> src = parse_model_file((fs::path(dir) / "model.onnx").string());
  const pb::GraphProto& gp = src->model.graph();
  std::string skip = skip_reason_graph(gp);
  if (!skip.empty()) {
    r.status = CaseStatus::Skip;
    r.reason = skip;
    return r;
  }
  // The declared type of each value the data files hold (they are TensorProto,
  // SequenceProto or OptionalProto by that type).
  auto type_of = [&](const std::string& name, bool input) -> const pb::TypeProto& {
    for (const auto& vi : input ? gp.input() : gp.output())
      if (vi.name() == name) return vi.type();
    fail(ErrorCategory::Internal, "no value info for '", name, "'");
  };
  OnnxModel model = make_model(src, {});
  CompileOptions co;
  co.threads = opts.threads;
  OnnxRunner runner(model, Session(opts.device, co));
  auto sets = sorted_files(dir, "test_data_set_");
  if (sets.empty()) {
    r.reason = "no test_data_set folders";
    return r;
  }
  for (const auto& set : sets) {
    auto ins = sorted_files(set, "input_");
    auto outs = sorted_files(set, "output_");
    if (ins.size() > model.inputs.size())
      throw Error(ErrorCategory::InvalidArgument, "test data has " + std::to_string(ins.size()) + " inputs, the model " +
                                                      std::to_string(model.inputs.size()));
    std::map<std::string, OnnxValue> feed;
    for (size_t i = 0; i < ins.size(); ++i) {
      const std::string& name = model.inputs[i].name;
      feed[name] = read_value_file(ins[i], type_of(name, true));
    }
    // Inputs without data (an optional graph input left out): an optional with no value.
    for (size_t i = ins.size(); i < model.inputs.size(); ++i)
      feed[model.inputs[i].name] = OnnxValue::optional(std::nullopt);
    std::vector<OnnxValue> got = runner.run_values(feed);
    if (outs.size() != model.outputs.size() || got.size() != outs.size()) {
      r.reason = "expected " + std::to_string(outs.size()) + " outputs, got " + std::to_string(got.size());
      return r;
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      const std::string& name = model.outputs[i].name;
      OnnxValue want = read_value_file(outs[i], type_of(name, false));
      std::string diff = compare_value(want, got[i], fs::path(set).filename().string() + " output '" + name + "'");
      if (!diff.empty()) {
        r.reason = diff;
        return r;
      }
    }
  }
  r.status = CaseStatus::Pass;
  return r;
}

std::string encode(const CaseResult& r) {
  char s = r.status == CaseStatus::Pass ? 'P' : r.status == CaseStatus::Skip ? 'S' : 'F';
  return std::string(1, s) + one_line(r.reason);
}

CaseResult decode(const std::string& name, const std::string& msg) {
  CaseResult r;
  r.name = name;
  if (msg.empty()) {
    r.reason = "no result from the case process";
    return r;
  }
  r.status = msg[0] == 'P' ? CaseStatus::Pass : msg[0] == 'S' ? CaseStatus::Skip : CaseStatus::Fail;
  r.reason = msg.substr(1);
  return r;
}

void print(std::ostream& out, const CaseResult& r) {
  switch (r.status) {
    case CaseStatus::Pass: out << "PASS " << r.name << "\n"; break;
    case CaseStatus::Skip: out << "SKIP " << r.name << ": " << r.reason << "\n"; break;
    case CaseStatus::Fail: out << "FAIL " << r.name << ": " << r.reason << "\n"; break;
  }
  out.flush();
}

struct Child {
  pid_t pid = -1;
  int fd = -1;
  size_t index = 0;
  std::string data;
};

// Runs every case in a forked child, `jobs` at once; results land in `results`.
void run_isolated(const std::vector<std::string>& cases, const ConformanceOptions& opts,
                  std::vector<CaseResult>& results, std::vector<bool>& done, std::ostream& out, size_t& next_print) {
  std::vector<Child> running;
  size_t next = 0;
  auto flush_ready = [&]() {
    while (next_print < cases.size() && done[next_print]) print(out, results[next_print++]);
  };
  while (next < cases.size() || !running.empty()) {
    while (next < cases.size() && int(running.size()) < std::max(1, opts.jobs)) {
      int fds[2];
      if (pipe(fds) != 0) fail(ErrorCategory::Io, "pipe failed");
      out.flush();
      pid_t pid = fork();
      if (pid < 0) fail(ErrorCategory::Io, "fork failed");
      if (pid == 0) {
        close(fds[0]);
        alarm(unsigned(std::max(1, opts.timeout_s)));
        std::string msg = encode(run_case(cases[next], opts));
        const char* p = msg.data();
        size_t left = msg.size();
        while (left > 0) {
          ssize_t w = write(fds[1], p, left);
          if (w <= 0) break;
          p += w;
          left -= size_t(w);
        }
        close(fds[1]);
        _exit(0);
      }
      close(fds[1]);
      running.push_back(Child{pid, fds[0], next, {}});
      ++next;
    }
    std::vector<pollfd> pfds;
    for (auto& c : running) pfds.push_back(pollfd{c.fd, POLLIN, 0});
    if (poll(pfds.data(), pfds.size(), -1) < 0) continue;
    for (size_t i = 0; i < running.size();) {
      Child& c = running[i];
      bool finished = false;
      if (pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        char buf[4096];
        ssize_t n = read(c.fd, buf, sizeof buf);
        if (n > 0) c.data.append(buf, size_t(n));
        else finished = true;
      }
      if (!finished) {
        ++i;
        continue;
      }
      close(c.fd);
      int status = 0;
      waitpid(c.pid, &status, 0);
      std::string name = fs::path(cases[c.index]).filename().string();
      CaseResult r;
      if (WIFSIGNALED(status)) {
        r.name = name;
        int sig = WTERMSIG(status);
        r.reason = sig == SIGALRM ? "timed out after " + std::to_string(opts.timeout_s) + " s"
                                  : "crashed (signal " + std::to_string(sig) + ", " + strsignal(sig) + ")";
      } else {
        r = decode(name, c.data);
      }
      results[c.index] = r;
      done[c.index] = true;
      running.erase(running.begin() + long(i));
      pfds.erase(pfds.begin() + long(i));
    }
    flush_ready();
  }
  flush_ready();
}

}  // namespace

std::vector<std::string> find_cases(const std::vector<std::string>& paths) {
  std::vector<std::string> cases;
  for (const auto& p : paths) {
    fs::path path(p);
    if (fs::exists(path / "model.onnx")) {
      cases.push_back(path.string());
      continue;
    }
    if (!fs::is_directory(path)) fail(ErrorCategory::Io, "'", p, "' is neither an ONNX test case nor a folder of them");
    std::vector<std::string> sub;
    for (const auto& e : fs::directory_iterator(path))
      if (e.is_directory() && fs::exists(e.path() / "model.onnx")) sub.push_back(e.path().string());
    std::sort(sub.begin(), sub.end());
    cases.insert(cases.end(), sub.begin(), sub.end());
  }
  return cases;
}

CaseResult run_case(const std::string& dir, const ConformanceOptions& opts) {
  try {
    return run_case_inner(dir, opts);
  } catch (const Error& e) {
    return CaseResult{fs::path(dir).filename().string(), CaseStatus::Fail,
                      one_line(std::string(category_name(e.category())) + ": " + e.what())};
  } catch (const std::exception& e) {
    return CaseResult{fs::path(dir).filename().string(), CaseStatus::Fail, one_line(std::string("exception: ") + e.what())};
  }
}

ConformanceSummary run_conformance(const std::vector<std::string>& paths, const ConformanceOptions& opts,
                                   std::ostream& out) {
  std::vector<std::string> cases = find_cases(paths);
  ConformanceSummary s;
  s.results.resize(cases.size());
  std::vector<bool> done(cases.size(), false);
  size_t printed = 0;
  if (opts.isolate) {
    run_isolated(cases, opts, s.results, done, out, printed);
  } else {
    for (size_t i = 0; i < cases.size(); ++i) {
      s.results[i] = run_case(cases[i], opts);
      print(out, s.results[i]);
    }
  }
  for (const auto& r : s.results) {
    if (r.status == CaseStatus::Pass) ++s.passed;
    else if (r.status == CaseStatus::Skip) ++s.skipped;
    else ++s.failed;
  }
  out << s.passed << " passed, " << s.failed << " failed, " << s.skipped << " skipped\n";
  out.flush();
  return s;
}

std::map<std::string, std::string> read_expected_failures(const std::string& path) {
  std::ifstream f(path);
  if (!f) fail(ErrorCategory::Io, "cannot open expected-failures file '", path, "'");
  std::map<std::string, std::string> m;
  std::string line;
  for (int no = 1; std::getline(f, line); ++no) {
    auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    auto colon = line.find(':');
    if (colon == std::string::npos || line.find_first_not_of(" \t", colon + 1) == std::string::npos)
      fail(ErrorCategory::Parse, path, ":", no, ": expected 'case_name: reason'");
    std::string name = line.substr(first, colon - first);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.pop_back();
    m[name] = line.substr(line.find_first_not_of(" \t", colon + 1));
  }
  return m;
}

ExpectationReport check_expected(const ConformanceSummary& s, const std::map<std::string, std::string>& expected) {
  ExpectationReport rep;
  for (const auto& r : s.results) {
    bool listed = expected.count(r.name) > 0;
    if (r.status == CaseStatus::Fail && !listed) rep.regressions.push_back(r.name + ": " + r.reason);
    if (r.status == CaseStatus::Pass && listed) rep.unexpected_passes.push_back(r.name);
  }
  return rep;
}

}  // namespace rlx::onnx

#endif  // RLX_HAVE_ONNX
