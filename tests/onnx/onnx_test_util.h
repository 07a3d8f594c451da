// Helpers for importer tests: build small ONNX models with the protobuf API.
#pragma once
#ifndef ONNX_ML
#define ONNX_ML 1
#endif
#ifndef ONNX_NAMESPACE
#define ONNX_NAMESPACE onnx
#endif
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <string>
#include <vector>

#include "rlx/error.h"

namespace rlx::onnx::test {

// Runs f, expecting an rlx::Error of category `cat`; returns it (for message checks).
template <class F>
Error expect_error(F&& f, ErrorCategory cat) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), cat) << e.what();
    return e;
  }
  ADD_FAILURE() << "expected an rlx::Error";
  return Error(ErrorCategory::Internal, "none");
}

// A model of one graph with the given opset; add nodes / inputs with the helpers.
inline ::onnx::ModelProto make_model(int64_t opset = 17) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("rlx-test");
  auto* os = m.add_opset_import();
  os->set_domain("");
  os->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

// Adds an opset_import entry for another domain.
inline void import_domain(::onnx::ModelProto& m, const std::string& domain, int64_t version) {
  auto* os = m.add_opset_import();
  os->set_domain(domain);
  os->set_version(version);
}

// dims: >= 0 static, -1 symbolic named `sym`.
inline void add_input(::onnx::ModelProto& m, const std::string& name, int elem, std::vector<int64_t> dims,
                      const std::string& sym = "batch") {
  auto* vi = m.mutable_graph()->add_input();
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* sh = tt->mutable_shape();
  for (int64_t d : dims) {
    auto* dim = sh->add_dim();
    if (d >= 0) dim->set_dim_value(d);
    else dim->set_dim_param(sym);
  }
}

inline void add_output(::onnx::ModelProto& m, const std::string& name, int elem) {
  auto* vo = m.mutable_graph()->add_output();
  vo->set_name(name);
  vo->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
}

// A node of graph g (the model's graph, or a subgraph from add_graph_attr).
inline ::onnx::NodeProto* add_node(::onnx::GraphProto* g, const std::string& op, std::vector<std::string> in,
                                   std::vector<std::string> out, const std::string& name = "") {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name.empty() ? op + "_" + out[0] : name);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}
inline ::onnx::NodeProto* add_node(::onnx::ModelProto& m, const std::string& op, std::vector<std::string> in,
                                   std::vector<std::string> out, const std::string& name = "") {
  return add_node(m.mutable_graph(), op, std::move(in), std::move(out), name);
}

// A GRAPH attribute `name` of node n (the subgraph named after it), with the given input and
// output names; its nodes are added with add_node(g, ...).
inline ::onnx::GraphProto* add_graph_attr(::onnx::NodeProto* n, const std::string& name,
                                          const std::vector<std::string>& inputs,
                                          const std::vector<std::string>& outputs) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::GRAPH);
  auto* g = a->mutable_g();
  g->set_name(name);
  for (const auto& s : inputs) g->add_input()->set_name(s);
  for (const auto& s : outputs) g->add_output()->set_name(s);
  return g;
}

inline void set_int_attr(::onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(v);
}

inline void set_ints_attr(::onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

inline void set_float_attr(::onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

inline void set_str_attr(::onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::STRING);
  a->set_s(v);
}

inline ::onnx::TensorProto* add_f32_initializer(::onnx::ModelProto& m, const std::string& name,
                                                std::vector<int64_t> dims, const std::vector<float>& v) {
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(1);
  for (int64_t d : dims) t->add_dims(d);
  for (float f : v) t->add_float_data(f);
  return t;
}

inline ::onnx::TensorProto* add_i64_initializer(::onnx::ModelProto& m, const std::string& name,
                                                std::vector<int64_t> dims, const std::vector<int64_t>& v) {
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(7);
  for (int64_t d : dims) t->add_dims(d);
  for (int64_t x : v) t->add_int64_data(x);
  return t;
}

inline std::string bytes_of(const ::onnx::ModelProto& m) {
  std::string s;
  m.SerializeToString(&s);
  return s;
}

inline std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

inline std::vector<float> as_f32(const std::vector<uint8_t>& b) {
  std::vector<float> v(b.size() / 4);
  if (!v.empty()) std::memcpy(v.data(), b.data(), b.size());
  return v;
}

}  // namespace rlx::onnx::test
