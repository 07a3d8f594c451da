// set_param_external: a param read in place from caller memory (no copy), shared by
// share_params_from and clones, replaced by a copy when it is written again; the owner is
// kept alive by the runtime.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "rlx/compiled_graph.h"

namespace rlx {
namespace {

CompiledGraph affine() {
  Graph g("ext");
  Value x = g.input("x", Shape({2, 3}, DType::F32));
  Value w = g.param("w", Shape({3, 2}, DType::F32));
  g.set_outputs({g.matmul(x, w)});
  return Session(Device::Cpu).compile(g);
}

TEST(ExternalParams, ReadInPlaceSharedClonedAndCopiedOnWrite) {
  auto owner = std::make_shared<std::vector<float>>(std::vector<float>{1, 0, 0, 1, 1, 1});
  std::weak_ptr<std::vector<float>> watch = owner;
  CompiledGraph a = affine();
  a.set_param_external("w", owner->data(), owner->size() * 4, owner);
  a.finalize_params();
  std::vector<float> x{1, 2, 3, 4, 5, 6};
  EXPECT_EQ(a.run({{"x", x}})[0], (std::vector<float>{4, 5, 10, 11}));
  // Changing the caller's bytes changes the result: they are read in place.
  (*owner)[4] = 2;
  EXPECT_EQ(a.run({{"x", x}})[0], (std::vector<float>{7, 5, 16, 11}));
  CompiledGraph b = affine();
  b.share_params_from(a);
  CompiledGraph c = a.clone();
  owner.reset();
  EXPECT_FALSE(watch.expired()) << "the runtime must keep the owner alive";
  EXPECT_EQ(b.run({{"x", x}})[0], (std::vector<float>{7, 5, 16, 11}));
  EXPECT_EQ(c.run({{"x", x}})[0], (std::vector<float>{7, 5, 16, 11}));
  // Writing the param makes it a copy; the sharer sees the new value, the caller's bytes
  // are not written.
  a.set_param_range("w", 0, std::vector<float>{2}.data(), 4);
  EXPECT_EQ(watch.lock()->at(0), 1.0f);
  EXPECT_EQ(a.run({{"x", x}})[0], (std::vector<float>{8, 5, 20, 11}));
  EXPECT_EQ(b.run({{"x", x}})[0], (std::vector<float>{8, 5, 20, 11}));
}

TEST(ExternalParams, WrongSizeIsAnError) {
  CompiledGraph a = affine();
  std::vector<float> w(5);
  EXPECT_THROW(a.set_param_external("w", w.data(), w.size() * 4, nullptr), Error);
  EXPECT_THROW(a.set_param_external("nope", w.data(), 24, nullptr), Error);
}

}  // namespace
}  // namespace rlx

namespace rlx {
namespace {

std::vector<float> from_typed_f32(const TypedTensor& t) {
  std::vector<float> v(t.bytes.size() / 4);
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

// bind_handle_external: an input read in place from caller memory that the caller updates
// between runs; two graphs share one buffer; bind_handle afterwards returns to own storage.
TEST(ExternalHandles, InputsReadCallerMemoryInPlace) {
  Graph g("h");
  Value c = g.input("cache", Shape({4}, DType::F32));
  Value x = g.input("x", Shape({4}, DType::F32));
  g.set_outputs({g.add(c, x)});
  CompiledGraph a = Session(Device::Cpu).compile(g), b = Session(Device::Cpu).compile(g);
  auto buf = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4});
  ASSERT_TRUE(a.bind_handle_external("cache", buf->data(), 16, buf));
  ASSERT_TRUE(b.bind_handle_external("cache", buf->data(), 16, buf));
  std::vector<float> x1{10, 10, 10, 10};
  EXPECT_EQ(a.run({{"x", x1}})[0], (std::vector<float>{11, 12, 13, 14}));
  (*buf)[2] = 100;  // the caller appends / edits; both graphs see it at once
  EXPECT_EQ(a.run({{"x", x1}})[0], (std::vector<float>{11, 12, 110, 14}));
  EXPECT_EQ(b.run({{"x", x1}})[0], (std::vector<float>{11, 12, 110, 14}));
  EXPECT_EQ(from_typed_f32(a.read_handle("cache")), (std::vector<float>{1, 2, 100, 4}));
  EXPECT_THROW(a.run({{"x", x1}, {"cache", x1}}), Error);  // fed by a handle
  EXPECT_THROW(a.bind_handle_external("cache", buf->data(), 12, buf), Error);
  EXPECT_THROW(a.bind_handle_external("nope", buf->data(), 16, buf), Error);
  // Back to a copied handle: the caller's buffer is no longer read or written.
  a.bind_handle("cache", TypedTensor{DType::F32, {4}, std::vector<uint8_t>(16, 0)});
  (*buf)[0] = -50;
  EXPECT_EQ(a.run({{"x", x1}})[0], (std::vector<float>{10, 10, 10, 10}));
  EXPECT_EQ((*buf)[1], 2.0f);
}

}  // namespace
}  // namespace rlx
