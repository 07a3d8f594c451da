// The fusion report in a few lines: per pass, how many rewrites it made (and of how many
// ops, where its lines say "of N ops"), how many candidates it left apart and the first
// reason given. The full report stays available (CompileReport::fusion, RLX_FUSION_REPORT=1,
// `rlx check --verbose`); this is what a demo or a quick check prints.
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "opt/pipeline.h"

namespace rlx::opt {

std::string summarize_fusion(const std::string& report) {
  struct Pass {
    int done = 0, missed = 0;
    long ops = 0;
    std::string first_miss;
  };
  std::vector<std::string> order;
  std::map<std::string, Pass> by_pass;
  std::istringstream in(report);
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(": ");
    if (colon == std::string::npos) continue;
    const std::string pass = line.substr(0, colon);
    if (!by_pass.count(pass)) order.push_back(pass);
    Pass& p = by_pass[pass];
    const std::string rest = line.substr(colon + 2);
    if (rest.rfind("not fused: ", 0) == 0) {
      if (p.missed++ == 0) p.first_miss = rest.substr(11);
      continue;
    }
    ++p.done;
    const size_t of = rest.find(" of ");
    if (of != std::string::npos) {
      const long n = std::strtol(rest.c_str() + of + 4, nullptr, 10);
      if (n > 0) p.ops += n;
    }
  }
  std::ostringstream out;
  for (const std::string& name : order) {
    const Pass& p = by_pass[name];
    out << name << ": " << p.done << (p.done == 1 ? " rewrite" : " rewrites");
    if (p.ops) out << " (" << p.ops << " ops)";
    if (p.missed) out << "; " << p.missed << " not fused, e.g. " << p.first_miss;
    out << "\n";
  }
  return out.str();
}

}  // namespace rlx::opt
