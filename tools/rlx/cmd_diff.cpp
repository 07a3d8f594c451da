// rlx diff FILE --devices A,B | --precision P,Q: runs the model twice (two backends, or two
// precision policies on one) with every computed value made a graph output, and names the
// first node, in schedule order, whose output differs beyond |a - b| <= atol + rtol * |b|,
// with both values of its worst element. Exit status 0: no divergence, 1: divergence.
// Making every value an output keeps each node's result observable (fusion cannot hide
// it), which is what locating a divergence needs; the compiled graphs are otherwise built
// by the normal pipeline.
// Then each diverging node alone: a graph of that node, its computed inputs fed the first
// side's values (params and constants as the model holds them), on both sides. Across a
// deep model the rounding of many nodes adds up, so a node can exceed a tolerance only
// because its inputs already differ (within it); fed the same inputs it agrees. So diff
// says whether the first divergence is the node's own, and names the first node that
// diverges alone (or that none does) among the first --alone diverging ones.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <set>

#include "cli.h"
#include "opt/pipeline.h"
#include "runtime/npy.h"
#include "runtime/typed_io.h"

namespace rlx::cli {

namespace {

std::vector<std::string> two_of(const std::string& s, const std::string& opt) {
  const size_t c = s.find(',');
  if (c == std::string::npos || s.find(',', c + 1) != std::string::npos || c == 0 || c + 1 == s.size())
    throw UsageError(opt + " '" + s + "': expected two values separated by a comma (e.g. " +
                     (opt == "--devices" ? "cpu,cuda" : "f32,f16") + ")");
  return {s.substr(0, c), s.substr(c + 1)};
}

Precision precision_of(const std::string& p) {
  if (p == "f32") return Precision::F32;
  if (p == "tf32") return Precision::TF32;
  if (p == "f16") return Precision::F16;
  if (p == "bf16") return Precision::BF16;
  throw UsageError("--precision: '" + p + "' is not f32, tf32, f16 or bf16");
}

// Seeded inputs for those not given: floats uniform in [-1, 1), integers in [0, 4) (safe
// as indices of small dims), bools half true.
TypedTensor random_input(const Shape& s, uint32_t seed) {
  const std::vector<int64_t> dims = s.static_dims();
  const size_t n = size_t(s.numel());
  std::mt19937 rng(seed);
  std::vector<double> v(n);
  const bool real = s.dtype() == DType::F32 || s.dtype() == DType::F16 || s.dtype() == DType::BF16 ||
                    s.dtype() == DType::F64;
  for (double& x : v) x = real ? std::uniform_real_distribution<double>(-1, 1)(rng) : double(rng() % (s.dtype() == DType::Bool ? 2 : 4));
  TypedTensor d{DType::F64, dims, std::vector<uint8_t>(n * sizeof(double))};
  std::memcpy(d.bytes.data(), v.data(), d.bytes.size());
  return runtime::convert_tensor(d, s.dtype());
}

std::vector<double> as_doubles(const TypedTensor& t) {
  const TypedTensor d = runtime::convert_tensor(t, DType::F64);
  std::vector<double> v(d.bytes.size() / sizeof(double));
  std::memcpy(v.data(), d.bytes.data(), d.bytes.size());
  return v;
}

// Element-wise comparison of two results: how many elements exceed |a - b| <= atol + rtol *
// |b| (NaN on both sides agrees), the worst (by its excess), the largest |a - b|.
struct Compared {
  int64_t bad = 0, worst = -1;
  double max_abs = 0;
};
Compared compare(const std::vector<double>& a, const std::vector<double>& b, double atol, double rtol) {
  Compared c;
  double worst_excess = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if ((std::isnan(a[i]) && std::isnan(b[i])) || a[i] == b[i]) continue;
    const double err = std::fabs(a[i] - b[i]), lim = atol + rtol * std::fabs(b[i]);
    c.max_abs = std::max(c.max_abs, std::isnan(err) ? INFINITY : err);
    if (!(err <= lim)) {
      ++c.bad;
      const double excess = std::isnan(err) ? INFINITY : err - lim;
      if (c.worst < 0 || excess > worst_excess) c.worst = int64_t(i), worst_excess = excess;
    }
  }
  if (a.size() != b.size()) c.bad = int64_t(std::max(a.size(), b.size())), c.worst = -1;
  return c;
}

std::string index_str(int64_t flat, const std::vector<int64_t>& dims) {
  std::vector<int64_t> idx(dims.size());
  for (int k = int(dims.size()) - 1; k >= 0; --k) {
    idx[size_t(k)] = dims[size_t(k)] ? flat % dims[size_t(k)] : 0;
    flat = dims[size_t(k)] ? flat / dims[size_t(k)] : 0;
  }
  std::string s = "[";
  for (size_t k = 0; k < idx.size(); ++k) s += (k ? "," : "") + std::to_string(idx[k]);
  return s + "]";
}


// Output `v.out` of node v.node of g run alone on both sides: its inputs computed by other
// nodes (or graph inputs) fed `known(value)` (the first side's results), params and constants
// copied with the node. Returns false with `why` when it cannot run so.
struct Alone {
  const Graph& g;
  const Device* dev;
  const CompileOptions* opt;
  const Args& args;
  std::function<const TypedTensor*(Value)> known;

  bool run(Value v, std::vector<double> out[2], std::string& why) const {
    const Node& n = g.node(v.node);
    Graph sub("alone");
    std::map<std::string, TypedTensor> feed;
    Node copy = n;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const Value in = n.inputs[i];
      if (!in.valid()) continue;
      const Node& p = g.node(in.node);
      if (p.kind == OpKind::Param || p.kind == OpKind::Constant) {
        Node leaf = p;
        copy.inputs[i] = Value{sub.append_node(std::move(leaf)), in.out};
        continue;
      }
      const TypedTensor* t = known(in);
      if (!t) {
        why = "input " + std::to_string(i) + " ('" + p.name + "') has no value to feed";
        return false;
      }
      const std::string name = "alone.in" + std::to_string(i);
      copy.inputs[i] = sub.input(name, g.type(in));
      feed[name] = *t;
    }
    sub.set_outputs({Value{sub.append_node(std::move(copy)), v.out}}, {"out"});
    try {
      for (int s = 0; s < 2; ++s) {
        CompiledGraph net = Session(dev[s], opt[s]).compile(sub);
        set_params_from_args(net, args, true);  // those of this node
        out[s] = as_doubles(net.run_typed(feed)[0]);
      }
    } catch (const Error& e) {
      why = e.what();
      return false;
    }
    return true;
  }
};

// "  worst [i,j]: A a, B b (|a - b| e, relative r)"
void print_worst(const Compared& c, const std::vector<double>& a, const std::vector<double>& b, const Shape& t,
                 const std::vector<std::string>& sides) {
  if (c.worst < 0) return;
  const double err = std::fabs(a[size_t(c.worst)] - b[size_t(c.worst)]);
  std::cout << "  worst " << index_str(c.worst, t.static_dims()) << ": " << sides[0] << " " << a[size_t(c.worst)] << ", "
            << sides[1] << " " << b[size_t(c.worst)] << " (|a - b| " << err << ", relative "
            << err / std::max(std::fabs(b[size_t(c.worst)]), 1e-30) << ")\n";
}

}  // namespace

int cmd_diff(const Args& raw) {
  const bool by_device = raw.has("--devices"), by_precision = raw.has("--precision");
  if (by_device == by_precision)
    throw UsageError("rlx diff needs exactly one of --devices A,B or --precision P,Q");
  Args args = raw;
  args.values.erase("--precision");  // ours takes two values; the shared parser takes one
  const std::vector<std::string> sides = two_of(by_device ? raw.get("--devices") : raw.get("--precision"),
                                                by_device ? "--devices" : "--precision");
  Device dev[2] = {Device::Cpu, Device::Cpu};
  CompileOptions base = compile_options_from(args);
  // Every value must have a static type to be compared: the inputs' dims come from their files
  // (--input) or --shape, the rest of the symbols from --bind, all before the probes are made.
  std::map<std::string, TypedTensor> inputs;
  InputDims dims;
  for (const std::string& a : args.all("--input")) {
    auto [name, file] = split_assignment(a, "--input");
    inputs[name] = runtime::read_npy(file);
    dims[name] = inputs[name].dims;
  }
  for (const std::string& a : args.all("--shape")) {
    auto [name, text] = split_assignment(a, "--shape");
    if (inputs.count(name)) throw UsageError("--shape '" + name + "': the input is given as a file (--input)");
    dims[name] = parse_dims(text, "--shape " + name);
  }
  Graph g = load_model(args.positional[0], base, dims);  // drops the bindings the importer used up
  if (!base.dim_bindings.empty()) g = opt::bind_dims(g, base.dim_bindings);
  base.dim_bindings.clear();  // applied
  for (const Node& n : g.nodes()) {
    if (n.kind != OpKind::Input) continue;
    const Shape& s = n.outputs[0];
    for (int i = 0; i < s.rank(); ++i)
      if (s.dims()[size_t(i)].is_symbolic())
        throw UsageError("input '" + n.name + "' has a dynamic dim " + std::to_string(i) + " ('" +
                         g.symbols()[size_t(s.dims()[size_t(i)].symbol_id())] + "'): give --input " + n.name +
                         "=FILE.npy, --shape " + n.name + "=D0,D1,... or --bind SYM=SIZE");
  }
  CompileOptions opt[2] = {base, base};
  for (int s = 0; s < 2; ++s) {
    if (by_device) dev[s] = device_named(sides[size_t(s)], "--devices");
    else opt[s].precision = precision_of(sides[size_t(s)]);
  }
  const bool low = by_precision && (opt[0].precision != Precision::F32 || opt[1].precision != Precision::F32);
  const double rtol = number(args, "--rtol", low ? 1e-2 : 1e-4, 0, 1e30);
  const double atol = number(args, "--atol", low ? 1e-2 : 1e-5, 0, 1e30);

  // Every computed value of the graph becomes an output, in node order.
  std::vector<Value> probes;
  std::vector<std::string> names;
  std::vector<int32_t> probe_node;
  std::set<std::string> used;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.kind == OpKind::Input || n.kind == OpKind::Param || n.kind == OpKind::Constant) continue;
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      if (!n.outputs[o].is_static() || n.outputs[o].bytes() == 0) continue;
      std::string name = (n.name.empty() ? "node" + std::to_string(i) : n.name) + (n.outputs.size() > 1 ? ":" + std::to_string(o) : "");
      for (int k = 2; used.count(name); ++k) name += "#" + std::to_string(k);
      used.insert(name);
      probes.push_back(Value{int32_t(i), int32_t(o)});
      names.push_back(name);
      probe_node.push_back(int32_t(i));
    }
  }
  if (probes.empty()) throw UsageError("rlx diff: the model computes nothing (no node outside inputs, params, constants)");
  g.set_outputs(probes, names);

  const uint32_t seed = uint32_t(integer(args, "--seed", 1, 0, 4294967295));
  const int alone_max = int(integer(args, "--alone", 64, 0, 1 << 30));
  std::vector<TypedTensor> out[2];
  for (int s = 0; s < 2; ++s) {
    CompiledGraph net = Session(dev[s], opt[s]).compile(g);
    set_params_from_args(net, args);
    if (s == 0) {
      uint32_t k = 0;
      for (const std::string& name : net.input_names())
        if (!inputs.count(name)) inputs[name] = random_input(net.input_type(name), seed + k++);
    }
    out[s] = net.run_typed(inputs);
  }

  std::cout << "rlx diff " << sides[0] << " vs " << sides[1] << ": " << probes.size() << " values of "
            << args.positional[0] << ", tolerance |a - b| <= " << atol << " + " << rtol << " * |b|\n";
  std::map<Value, size_t> probe_of;
  for (size_t k = 0; k < probes.size(); ++k) probe_of[probes[k]] = k;
  const Alone alone{g, dev, opt, args, [&](Value v) -> const TypedTensor* {
                      if (auto it = probe_of.find(v); it != probe_of.end()) return &out[0][it->second];
                      const Node& p = g.node(v.node);
                      if (p.kind != OpKind::Input) return nullptr;
                      auto in = inputs.find(p.name);
                      return in == inputs.end() ? nullptr : &in->second;
                    }};
  // The lines on probe k's node alone (`r`, `c`: its results and their comparison).
  auto print_alone = [&](size_t k, const std::vector<double>* r, const Compared& c) {
    std::cout << "  alone, fed " << sides[0] << "'s values of its inputs: ";
    if (!c.bad) {
      std::cout << "within tolerance (max |a - b| " << c.max_abs << "): what exceeds it comes from its inputs\n";
      return;
    }
    std::cout << c.bad << " of " << r[0].size() << " elements beyond tolerance, max |a - b| " << c.max_abs << "\n";
    print_worst(c, r[0], r[1], g.type(probes[k]), sides);
  };
  int divergent = 0;
  std::vector<size_t> diverging;
  for (size_t k = 0; k < probes.size(); ++k) {
    const std::vector<double> a = as_doubles(out[0][k]), b = as_doubles(out[1][k]);
    const Compared c = compare(a, b, atol, rtol);
    if (!c.bad) continue;
    diverging.push_back(k);
    if (divergent++ == 0) {
      const Node& n = g.node(probe_node[k]);
      const Shape& t = g.type(probes[k]);
      std::cout << "first divergence: node '" << names[k] << "' (" << op_name(n.kind) << ") " << t.str() << ": " << c.bad
                << " of " << a.size() << " elements beyond tolerance, max |a - b| " << c.max_abs << "\n";
      print_worst(c, a, b, t, sides);
      std::cout << "  inputs of that node:";
      for (const Value& v : n.inputs) {
        if (!v.valid()) continue;
        const Node& in = g.node(v.node);
        std::cout << " '" << in.name << "' (" << op_name(in.kind) << ")";
      }
      std::cout << "\n";
    }
  }
  if (!divergent) {
    std::cout << "no divergence\n";
    return 0;
  }
  std::cout << divergent << " of " << probes.size() << " values diverge\n";
  if (alone_max > 0) {
    std::vector<double> r[2];
    std::string why;
    const bool ran = alone.run(probes[diverging[0]], r, why);
    const Compared first = ran ? compare(r[0], r[1], atol, rtol) : Compared{};
    if (ran) print_alone(diverging[0], r, first);
    else std::cout << "  alone: could not run (" << why << ")\n";
    if (first.bad) {
      std::cout << "the first divergence is the node's own\n";
    } else {
      const size_t scan = std::min(diverging.size(), size_t(alone_max));
      bool found = false;
      for (size_t j = 1; j < scan && !found; ++j) {
        const size_t k = diverging[j];
        if (!alone.run(probes[k], r, why)) continue;
        const Compared c = compare(r[0], r[1], atol, rtol);
        if (!c.bad) continue;
        const Node& n = g.node(probe_node[k]);
        std::cout << "first node that diverges alone: '" << names[k] << "' (" << op_name(n.kind) << ") "
                  << g.type(probes[k]).str() << "\n";
        print_alone(k, r, c);
        found = true;
      }
      if (!found)
        std::cout << (scan < diverging.size() ? "none of the first " + std::to_string(scan) + " diverging nodes"
                                              : std::string("no diverging node"))
                  << " diverges alone: each agrees within tolerance fed the same inputs (rounding carried through the "
                     "graph)\n";
    }
  }
  return 1;
}

}  // namespace rlx::cli
