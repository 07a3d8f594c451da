// Fuzz target body for the ONNX loader (rlx::onnx::load_onnx_bytes). See fuzz_common.h
// for the contract. Per input: parse + import with the declared shapes; a model that
// needs concrete shapes is imported again with every unknown dim set to 2 and, if that
// is refused, with its small inputs bound by value (as OnnxRunner does), and if that is
// refused too, run in segments by OnnxRunner (run-time output shapes; strings, sequences
// and optionals, fed from the input bytes, with their nodes on the host); an imported graph
// must pass the verifier, and small graphs are compiled and run once.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "rlx/onnx.h"

namespace rlx::fuzz {

inline constexpr size_t kOnnxMaxInput = 256 << 10;
inline constexpr int64_t kOnnxMaxBoundElements = 64;  // inputs bound by value
// External data is looked up here: a folder that does not exist, so no file is read.
inline constexpr const char* kOnnxNoDir = "/nonexistent/rlx-fuzz";

namespace detail {

inline void check_imported(const Graph& g, const std::string& how) {
  try {
    verify_graph(g);
  } catch (const Error& e) {
    throw Finding("ONNX import (" + how + ") produced a graph the verifier refuses: " + e.what());
  }
}

// The model's inputs with unknown dims set to `symbol_size`.
inline std::map<std::string, std::vector<int64_t>> concrete_shapes(const onnx::OnnxModel& m, int64_t symbol_size) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& in : m.inputs) {
    if (!in.is_tensor) continue;
    std::vector<int64_t> dims = in.dims;
    for (auto& d : dims)
      if (d < 0) d = symbol_size;
    shapes[in.name] = dims;
  }
  return shapes;
}

// Small non-negative integers (0..4) in each small input's carried dtype: plausible
// shapes, axes and indices for models that compute shapes from input values.
inline std::map<std::string, TypedTensor> small_values(const onnx::OnnxModel& m,
                                                     const std::map<std::string, std::vector<int64_t>>& shapes,
                                                     ByteSource& src) {
  std::map<std::string, TypedTensor> values;
  for (const auto& in : m.inputs) {
    auto it = shapes.find(in.name);
    if (it == shapes.end()) continue;
    int64_t n = 1;
    for (int64_t d : it->second) n = (d < 0 || d > kOnnxMaxBoundElements || n > kOnnxMaxBoundElements) ? kSaturated : n * d;
    if (n > kOnnxMaxBoundElements) continue;
    TypedTensor t;
    t.dtype = in.dtype;
    t.dims = it->second;
    size_t es = dtype_size(in.dtype);
    t.bytes.assign(size_t(n) * es, 0);
    for (int64_t i = 0; i < n; ++i) {
      int v = src.next() % 5;
      uint8_t* p = t.bytes.data() + size_t(i) * es;
      switch (in.dtype) {
        case DType::F32: { float f = float(v); std::memcpy(p, &f, 4); break; }
        case DType::F64: { double f = double(v); std::memcpy(p, &f, 8); break; }
        case DType::I64: { int64_t x = v; std::memcpy(p, &x, 8); break; }
        case DType::I32: case DType::U32: { int32_t x = v; std::memcpy(p, &x, 4); break; }
        default: p[0] = uint8_t(v); break;  // 1-byte ints / bool; other dtypes: a small bit pattern
      }
    }
    values.emplace(in.name, std::move(t));
  }
  return values;
}

// A model whose nodes need run-time values to import (NonZero, Unique, NonMaxSuppression,
// ImageDecoder, a shape computed from data) runs in segments through OnnxRunner: once, on
// inputs drawn from the fuzz bytes, with the same folding limit and memory cap.
inline void run_segmented(const onnx::OnnxModel& m, const std::map<std::string, std::vector<int64_t>>& shapes,
                          const onnx::ImportOptions& opts, ByteSource& src) {
  const GraphBudget b;
  std::map<std::string, onnx::OnnxValue> feed;
  for (const auto& in : m.inputs) {
    // Sequences and optionals (host values): empty, or holding one small f32 tensor.
    if (in.kind == onnx::ValueKind::Sequence || in.kind == onnx::ValueKind::Optional) {
      std::vector<onnx::OnnxValue> items;
      if (src.next() % 2) items.push_back(onnx::OnnxValue::of(TypedTensor{DType::F32, {2}, src.tensor(DType::F32, 2)}));
      feed.emplace(in.name, in.kind == onnx::ValueKind::Sequence
                                ? onnx::OnnxValue::sequence(std::move(items))
                                : onnx::OnnxValue::optional(items.empty() ? std::nullopt
                                                                          : std::optional<onnx::OnnxValue>(items[0])));
      continue;
    }
    auto it = shapes.find(in.name);
    if (!in.is_tensor || it == shapes.end()) return;
    int64_t n = 1;
    for (int64_t d : it->second) n = (d < 0 || d > b.max_value_elements || n > b.max_value_elements) ? kSaturated : n * d;
    if (n > b.max_value_elements) return;
    if (in.onnx_type == 8) {  // strings of 0-3 bytes drawn from the input
      std::vector<std::string> s(static_cast<size_t>(n));
      for (auto& e : s)
        for (int k = int(src.next() % 4); k > 0; --k) e.push_back(char(src.next()));
      feed.emplace(in.name, onnx::OnnxValue::of_strings(it->second, std::move(s)));
      continue;
    }
    feed.emplace(in.name, onnx::OnnxValue::of(TypedTensor{in.dtype, it->second, src.tensor(in.dtype, size_t(n))},
                                              in.onnx_type));
  }
  CompileOptions co;
  co.threads = 1;
  co.max_arena_bytes = b.max_arena_bytes;
  onnx::OnnxRunner runner(m, Session(Device::Cpu, co), opts);
  runner.run_values(feed);
}

}  // namespace detail

inline bool onnx_one_input(const uint8_t* data, size_t size) {
  if (size > kOnnxMaxInput) return false;
  return guard([&] {
    onnx::ImportOptions opts;
    opts.fold_max_elements = GraphBudget{}.max_value_elements;
    opts.host_work_limit = int64_t(1) << 20;  // a mutated Loop trip count must not run for minutes
    onnx::OnnxModel model = onnx::load_onnx_bytes(data, size, "fuzz.onnx", kOnnxNoDir, opts);
    ByteSource src(data, size);
    if (model.has_graph) {
      detail::check_imported(model.graph, "declared shapes");
      compile_and_run(model.graph, src);
      return;
    }
    auto shapes = detail::concrete_shapes(model, GraphBudget{}.symbol_size);
    Graph g;
    try {
      g = onnx::import_graph(model, shapes, opts);
    } catch (const Error& e) {
      if (e.category() == ErrorCategory::Internal) throw;
      try {
        g = onnx::import_graph(model, shapes, opts, detail::small_values(model, shapes, src));
      } catch (const Error& e2) {
        if (e2.category() == ErrorCategory::Internal) throw;
        detail::run_segmented(model, shapes, opts, src);
        return;
      }
    }
    detail::check_imported(g, "concrete shapes");
    compile_and_run(g, src);
  });
}

}  // namespace rlx::fuzz
