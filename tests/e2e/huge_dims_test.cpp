// Property test: random graphs built through the builder API with huge and overflowing
// dims (2^31, 2^40, 2^62, INT64_MAX, ... mixed with small ones and zeros) are refused
// cleanly. Every builder call, compile and run either succeeds or throws rlx::Error;
// nothing else may escape (no standard exception, no crash), a value that exists always
// has a size that fits (numel and bytes never wrap), and a compile that succeeds under a
// small memory cap has planned no more than the cap, so running it is safe.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <random>

#include "rlx/rlx.h"

namespace rlx {
namespace {

constexpr int64_t kCap = int64_t(16) << 20;  // CompileOptions::max_arena_bytes for these graphs

class HugeGraphs {
 public:
  explicit HugeGraphs(uint32_t seed) : rng_(seed) {}

  // A size: mostly small, often huge.
  int64_t size() {
    static const int64_t palette[] = {0, 1, 2, 3, 5, 8,
                                      (int64_t(1) << 31) - 1, int64_t(1) << 31, int64_t(1) << 32,
                                      int64_t(1) << 40, int64_t(1) << 61, int64_t(1) << 62,
                                      std::numeric_limits<int64_t>::max() / 3, std::numeric_limits<int64_t>::max()};
    return palette[pick(std::size(palette))];
  }
  int64_t small() { return int64_t(pick(4)) + 1; }
  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  std::vector<int64_t> sizes(size_t n) {
    std::vector<int64_t> v(n);
    for (auto& d : v) d = pick(3) == 0 ? size() : small();
    return v;
  }

  // Builds up to `steps` random nodes; returns the graph (outputs set) and how many
  // builder calls were refused.
  Graph build(int steps, int& refused) {
    Graph g("huge");
    std::vector<Value> vals;
    auto leaf_shape = [&]() -> Shape {
      for (;;) {
        try {
          return Shape(sizes(1 + pick(4)), pick(4) == 0 ? DType::I64 : DType::F32);
        } catch (const Error& e) {
          EXPECT_EQ(e.category(), ErrorCategory::Shape) << e.what();
          ++refused;
        }
      }
    };
    vals.push_back(g.input("x", leaf_shape()));
    vals.push_back(g.param("w", leaf_shape()));
    for (int s = 0; s < steps; ++s) {
      Value a = vals[pick(vals.size())], b = vals[pick(vals.size())];
      const int r = g.type(a).rank();
      std::vector<std::function<Value()>> ops = {
          [&] { return g.expand(a, sizes(size_t(r) + pick(2))); },
          [&] { return g.reshape(a, sizes(1 + pick(3))); },
          [&] { return g.tile(a, sizes(size_t(r))); },
          [&] { return g.pad(a, sizes(size_t(2 * r))); },
          [&] { return g.concat({a, b}, 0); },
          [&] { return g.add(a, b); },
          [&] { return g.matmul(a, b); },
          [&] { return g.reduce_sum(a, {0}); },
          [&] { return g.transpose(a, {}); },
          [&] { return g.slice(a, {0}, {size()}); },
          [&] { return g.split(a, 0, {size(), size()})[0]; },
          [&] { return g.topk(a, size()).first; },
          [&] { return g.cast(a, DType::F64); },
          [&] { return g.softmax(a); },
          [&] { return g.gather(a, g.constant_i64({size() == 0 ? 0 : 1}, {1}), 0); },
          [&] { return g.conv2d(a, b, {}, {small(), small()}, sizes(4), {size(), size()}); },
          [&] { return g.max_pool2d(a, {size(), small()}, {small(), small()}, sizes(4)); },
      };
      try {
        Value v = ops[pick(ops.size())]();
        check_fits(g.type(v));
        vals.push_back(v);
      } catch (const Error&) {
        ++refused;  // a refusal names the node; the graph is unchanged
      }
    }
    g.set_outputs({vals.back()});
    return g;
  }

  static void check_fits(const Shape& s) {
    if (!s.is_static()) return;
    EXPECT_GE(s.numel(), 0) << s.str();
    EXPECT_LE(int64_t(s.bytes()), kMaxTensorBytes) << s.str();
  }

 private:
  std::mt19937 rng_;
};

TEST(HugeDims, RandomGraphsAreRefusedCleanly) {
  int refused_builds = 0, refused_compiles = 0, ran = 0;
  for (uint32_t seed = 1; seed <= 1500; ++seed) {
    HugeGraphs gen(seed);
    Graph g;
    try {
      g = gen.build(6, refused_builds);
    } catch (const Error& e) {
      FAIL() << "seed " << seed << ": set_outputs refused a built value: " << e.what();
    } catch (const std::exception& e) {
      FAIL() << "seed " << seed << ": a builder call threw a non-rlx exception: " << e.what();
    }
    CompileOptions o;
    o.threads = 1;
    o.max_arena_bytes = kCap;
    o.verify_each_pass = true;
    CompiledGraph net;
    try {
      net = Session(Device::Cpu, o).compile(g);
    } catch (const Error&) {
      ++refused_compiles;
      continue;
    } catch (const std::exception& e) {
      FAIL() << "seed " << seed << ": compile threw a non-rlx exception: " << e.what();
    }
    EXPECT_LE(net.report().arena_bytes, kCap) << "seed " << seed;
    EXPECT_LE(net.report().weight_bytes - net.report().constant_bytes, kCap) << "seed " << seed;
    std::map<std::string, TypedTensor> in;
    for (const std::string& name : net.input_names()) {
      Shape t = net.input_type(name);
      in[name] = TypedTensor{t.dtype(), t.static_dims(), std::vector<uint8_t>(t.bytes(), 0)};
    }
    try {
      net.run_typed(in);
      ++ran;
    } catch (const Error& e) {
      // Params are unset and indices are zeros: the run may refuse (naming the param or the
      // node at fault) as bad input, never as an internal error.
      EXPECT_EQ(e.category(), ErrorCategory::InvalidArgument) << "seed " << seed << ": " << e.what();
    } catch (const std::exception& e) {
      FAIL() << "seed " << seed << ": run threw a non-rlx exception: " << e.what();
    }
  }
  // The generator must really reach all three outcomes, or the test proves nothing.
  EXPECT_GT(refused_builds, 100);
  EXPECT_GT(refused_compiles, 100);
  EXPECT_GT(ran, 20);
  std::printf("builder refusals %d, compile refusals %d, graphs run %d\n", refused_builds, refused_compiles, ran);
}

// The cases the issue names: an expand past 2^63 elements, and one that fits int64 but
// not the memory cap (refused before anything is allocated, with the planned size).
TEST(HugeDims, ExpandPastInt64IsAShapeErrorNamingTheNode) {
  Graph g;
  Value x = g.input("x", Shape({1, 4}, DType::F32));
  try {
    g.add1(OpKind::Expand, {x}, ShapeAttrs{{int64_t(1) << 62, 4}}, "too_big");
    FAIL() << "expected a Shape error";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::Shape);
    EXPECT_NE(std::string(e.what()).find("'too_big'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("too large"), std::string::npos) << e.what();
  }
  EXPECT_EQ(g.nodes().size(), 1u);  // unchanged
}

TEST(HugeDims, PlanAboveTheCapIsResourceExhausted) {
  Graph g;
  Value x = g.input("x", Shape({1, 4}, DType::F32));
  g.set_outputs({g.reduce_sum(g.expand(x, {int64_t(1) << 40, 4}), {0})});
  CompileOptions o;
  o.max_arena_bytes = int64_t(1) << 30;
  try {
    Session(Device::Cpu, o).compile(g);
    FAIL() << "expected ResourceExhausted";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::ResourceExhausted) << e.what();
    // The message gives the planned size: the [2^40, 4] f32 expand alone is 2^44 bytes.
    const std::string msg = e.what();
    const size_t at = msg.find("arena is ");
    ASSERT_NE(at, std::string::npos) << msg;
    EXPECT_GE(std::stoll(msg.substr(at + 9)), int64_t(1) << 44) << msg;
  }
  // Without an explicit cap the machine's physical memory is the cap.
  try {
    Session(Device::Cpu).compile(g);
    FAIL() << "expected ResourceExhausted";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::ResourceExhausted) << e.what();
    EXPECT_NE(std::string(e.what()).find("physical memory"), std::string::npos) << e.what();
  }
}

TEST(HugeDims, EnvCapIsValidated) {
  setenv("RLX_MAX_ARENA_BYTES", "12Q", 1);
  Graph g;
  g.set_outputs({g.relu(g.input("x", Shape({4}, DType::F32)))});
  try {
    Session(Device::Cpu).compile(g);
    ADD_FAILURE() << "expected InvalidArgument";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("RLX_MAX_ARENA_BYTES"), std::string::npos) << e.what();
  }
  setenv("RLX_MAX_ARENA_BYTES", "1K", 1);
  Graph big;
  big.set_outputs({big.relu(big.input("x", Shape({1024}, DType::F32)))});
  try {
    Session(Device::Cpu).compile(big);
    ADD_FAILURE() << "expected ResourceExhausted";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::ResourceExhausted) << e.what();
    EXPECT_NE(std::string(e.what()).find("cap of 1024 bytes"), std::string::npos) << e.what();
  }
  unsetenv("RLX_MAX_ARENA_BYTES");
  EXPECT_NO_THROW(Session(Device::Cpu).compile(big));
}

}  // namespace
}  // namespace rlx
