// SharedBuffer: several compiled graphs reading and writing one buffer in place through
// their handles (the LLM engine's one KV cache for every pass). Runs on RLX_E2E_DEVICE (the
// CPU in CI, CUDA on a GPU machine). Every check is exact: only bytes move.
#include "e2e_util.h"

namespace rlx::e2e {
namespace {

constexpr int64_t H = 2, C = 4, D = 3;  // heads, cache rows, row width (f32)
constexpr size_t kRow = size_t(D) * 4, kHead = size_t(C) * kRow, kSlot = size_t(H) * kHead;

// A pass of B sequences appending Tn rows each at their positions: the cache input "kc"
// [B, H, C, D] written in place by cache_write; the output is a sum (what a pass computes
// from its cache does not matter here, only what it leaves there).
CompiledGraph cache_pass(int64_t B, int64_t Tn) {
  Graph g("cache_pass");
  Value kc = g.input("kc", Shape({B, H, C, D}, DType::F32));
  Value rows = g.input("rows", Shape({B, H, Tn, D}, DType::F32));
  Value past = g.input("past", Shape({B}, DType::I64));
  g.set_outputs({g.reduce_sum(g.cache_write(kc, rows, past), {0, 1, 2, 3}, false)}, {"sum"});
  return compile_e2e(g);
}

T rows_of(int64_t B, int64_t Tn, double base) {
  T r({B, H, Tn, D});
  for (size_t i = 0; i < r.v.size(); ++i) r.v[i] = base + double(i);
  return r;
}

void append(CompiledGraph& net, const T& rows, std::vector<double> past) {
  const int64_t n = int64_t(past.size());
  run_net(net, {{"rows", rows}, {"past", T({n}, std::move(past), DType::I64)}});
}

// What the buffer should hold: slots [2, H, C, D] of f32, with rows written as a pass would.
struct Expected {
  std::vector<float> v = std::vector<float>(2 * kSlot / 4, 0.0f);
  void put(int64_t slot, const T& rows, int64_t b, int64_t past) {
    const int64_t Tn = rows.dims[2];
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < Tn; ++t)
        for (int64_t e = 0; e < D; ++e)
          v[size_t(((slot * H + h) * C + past + t) * D + e)] = float(rows.v[size_t(((b * H + h) * Tn + t) * D + e)]);
  }
};

std::vector<float> contents(const SharedBuffer& buf) {
  std::vector<float> v(buf.bytes() / 4);
  buf.read(0, v.data(), buf.bytes());
  return v;
}

template <class F>
void expect_invalid(F f, const char* what) {
  try {
    f();
    ADD_FAILURE() << what << ": accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::InvalidArgument) << what << ": " << e.what();
  }
}

TEST(SharedBuffer, PassesShareOneCacheInPlace) {
  CompiledGraph prompt = cache_pass(1, 2), step = cache_pass(1, 1), batch = cache_pass(2, 1);
  SharedBuffer buf = prompt.allocate_shared(2 * kSlot);
  ASSERT_EQ(buf.bytes(), 2 * kSlot);
  EXPECT_EQ(contents(buf), Expected().v) << "zeroed";
  ASSERT_TRUE(prompt.bind_handle_shared("kc", buf, kSlot));  // slot 1
  ASSERT_TRUE(step.bind_handle_shared("kc", buf, kSlot));
  ASSERT_TRUE(batch.bind_handle_shared("kc", buf, 0));  // both slots
  Expected m;

  // A prompt into slot 1, a step after it, then both slots in one batch pass.
  const T r = rows_of(1, 2, 1);
  append(prompt, r, {0});
  m.put(1, r, 0, 0);
  EXPECT_EQ(contents(buf), m.v) << "the prompt's rows";
  const T r1 = rows_of(1, 1, 100);
  append(step, r1, {2});
  m.put(1, r1, 0, 2);
  EXPECT_EQ(contents(buf), m.v) << "the step's row";
  const T rb = rows_of(2, 1, 200);
  append(batch, rb, {0, 3});
  m.put(0, rb, 0, 0);
  m.put(1, rb, 1, 3);
  EXPECT_EQ(contents(buf), m.v) << "the batch's rows";

  // The step moved to slot 0 runs there, twice (a device replays its recorded schedule the
  // second time), and another graph sees its rows.
  ASSERT_TRUE(step.bind_handle_shared("kc", buf, 0));
  for (int i = 0; i < 2; ++i) {
    const T s = rows_of(1, 1, 300 + 10 * i);
    append(step, s, {double(1 + i)});
    m.put(0, s, 0, 1 + i);
  }
  EXPECT_EQ(contents(buf), m.v) << "the moved step's rows";
  std::vector<float> seen(kSlot / 4);
  batch.read_handle_range("kc", 0, seen.data(), kSlot);
  EXPECT_EQ(seen, std::vector<float>(m.v.begin(), m.v.begin() + long(kSlot / 4))) << "read through the batch pass";

  // Bytes written through one graph's handle or through the buffer are everyone's.
  const float w[3] = {-1, -2, -3};
  step.write_handle("kc", 3 * kRow, w, sizeof w);  // slot 0, head 0, position 3
  for (int e = 0; e < 3; ++e) m.v[size_t(3 * D + e)] = w[e];
  buf.write(kSlot + kHead, w, sizeof w);  // slot 1, head 1, position 0
  for (int e = 0; e < 3; ++e) m.v[size_t(kSlot / 4 + kHead / 4 + size_t(e))] = w[e];
  EXPECT_EQ(contents(buf), m.v) << "written through a handle and through the buffer";
  std::vector<float> got(3);
  prompt.read_handle_range("kc", kHead, got.data(), sizeof w);
  EXPECT_EQ(got, std::vector<float>(w, w + 3)) << "the buffer's write seen by a graph";

  // A clone stays bound: its rows land in the buffer too.
  CompiledGraph twin = step.clone();
  const T t = rows_of(1, 1, 400);
  append(twin, t, {0});
  m.put(0, t, 0, 0);
  EXPECT_EQ(contents(buf), m.v) << "the clone's row";

  // bind_handle gives the step storage of its own again: its runs leave the buffer alone.
  step.bind_handle("kc", to_typed(T({1, H, C, D})));
  append(step, rows_of(1, 1, 500), {0});
  EXPECT_EQ(contents(buf), m.v) << "after the step left the buffer";
  EXPECT_EQ(from_typed(step.read_handle("kc")).v[0], 500.0);
}

TEST(SharedBuffer, MemoryLivesWhileAnyoneHoldsIt) {
  CompiledGraph step = cache_pass(1, 1);
  {
    SharedBuffer only = step.allocate_shared(kSlot);
    ASSERT_TRUE(step.bind_handle_shared("kc", only, 0));
  }  // the graph still holds it
  const T r = rows_of(1, 1, 7);
  append(step, r, {1});
  EXPECT_EQ(from_typed(step.read_handle("kc")).v[size_t(D)], 7.0) << "the graph's buffer outlived its last reference";
  SharedBuffer kept;
  {
    CompiledGraph maker = cache_pass(1, 1);
    kept = maker.allocate_shared(kSlot);
    ASSERT_TRUE(maker.bind_handle_shared("kc", kept, 0));
    append(maker, r, {2});
  }  // the graph that allocated and wrote it is gone
  std::vector<float> v = contents(kept);
  EXPECT_EQ(v[size_t(2 * D)], 7.0f) << "the buffer outlived its graph";
}

TEST(SharedBuffer, CopiesBetweenBuffers) {
  CompiledGraph net = cache_pass(1, 1);
  SharedBuffer a = net.allocate_shared(64), b = net.allocate_shared(64);
  std::vector<uint8_t> bytes(64);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t(i + 1);
  a.write(0, bytes.data(), 64);
  b.copy_from(a, {{0, 32, 16}, {40, 0, 8}});
  std::vector<uint8_t> want(64, 0), got(64);
  std::copy(bytes.begin() + 32, bytes.begin() + 48, want.begin());
  std::copy(bytes.begin(), bytes.begin() + 8, want.begin() + 40);
  b.read(0, got.data(), 64);
  EXPECT_EQ(got, want);
  a.copy_from(a, {{48, 0, 16}});  // within one buffer, not overlapping
  std::copy(bytes.begin(), bytes.begin() + 16, bytes.begin() + 48);
  a.read(0, got.data(), 64);
  EXPECT_EQ(got, bytes);
  // Another backend's buffer (the null backend's host memory): through the host.
  Graph pass("through");
  pass.set_outputs({pass.input("kc", Shape({1, H, C, D}, DType::F32))}, {"out"});
  SharedBuffer host = Session(Device::Null).compile(pass).allocate_shared(64);
  host.copy_from(a, {{0, 0, 64}});
  host.read(0, got.data(), 64);
  EXPECT_EQ(got, bytes);

  // Refused, nothing changed.
  expect_invalid([&] { b.copy_from(a, {{0, 0, 8}, {60, 0, 8}}); }, "a range past the destination's end");
  expect_invalid([&] { b.copy_from(a, {{0, 60, 8}}); }, "a range past the source's end");
  expect_invalid([&] { a.copy_from(a, {{0, 4, 8}}); }, "overlapping within one buffer");
  expect_invalid([&] { b.copy_from(a, {{0, 0, 8}, {4, 16, 8}}); }, "two writes overlapping");
  b.read(0, got.data(), 64);
  EXPECT_EQ(got, want);
  expect_invalid([&] { a.read(60, got.data(), 8); }, "a read past the end");
  expect_invalid([&] { a.write(65, got.data(), 0); }, "a write past the end");
  SharedBuffer none;
  EXPECT_EQ(none.bytes(), 0u);
  expect_invalid([&] { none.read(0, got.data(), 0); }, "an empty buffer");
  expect_invalid([&] { b.copy_from(none, {}); }, "copying from an empty buffer");
}

TEST(SharedBuffer, BindingErrorsChangeNothing) {
  CompiledGraph step = cache_pass(1, 1);
  SharedBuffer buf = step.allocate_shared(kSlot);
  ASSERT_TRUE(step.bind_handle_shared("kc", buf, 0));
  expect_invalid([&] { step.bind_handle_shared("kv", buf, 0); }, "an unknown input");
  expect_invalid([&] { step.bind_handle_shared("kc", SharedBuffer(), 0); }, "an empty buffer");
  expect_invalid([&] { step.bind_handle_shared("kc", buf, 4); }, "a range past the end");
  Graph pass("through");
  pass.set_outputs({pass.input("kc", Shape({1, H, C, D}, DType::F32))}, {"out"});
  CompiledGraph null_net = Session(Device::Null).compile(pass);
  expect_invalid([&] { null_net.bind_handle_shared("kc", buf, 0); }, "a buffer its backend cannot read in place");
  if (e2e_device() != Device::Cpu) {  // a device graph and host memory
    SharedBuffer host = null_net.allocate_shared(kSlot);
    expect_invalid([&] { step.bind_handle_shared("kc", host, 0); }, "another backend's buffer");
  }
  // Still bound where it was, and running.
  const T r = rows_of(1, 1, 9);
  append(step, r, {3});
  std::vector<float> v = contents(buf);
  EXPECT_EQ(v[size_t(3 * D)], 9.0f);
}

}  // namespace
}  // namespace rlx::e2e
