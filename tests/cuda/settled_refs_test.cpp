// settled_refs (program.h): which of a step's buffers its kernels may read before they wait
// for the kernel before them. Pure bookkeeping over byte ranges, so it runs without a GPU.
#include <gtest/gtest.h>

#ifdef RLX_HAVE_CUDA
#include "backends/cuda/program.h"

namespace rlx::cuda {
namespace {

using R = StepBytes::Range;

StepBytes step(std::vector<R> refs, std::vector<R> writes, bool waits = true) {
  StepBytes s;
  s.refs = std::move(refs);
  s.writes = std::move(writes);
  s.waits = waits;
  return s;
}

TEST(CudaSettledRefs, OnlyWhatTheLaunchBeforeWritesIsUnsettled) {
  // Step 0 writes [0, 64); step 1 reads it and [64, 128) and writes [128, 192); step 2 reads
  // all three and a weight (no arena bytes) and writes into its input [64, 128) in place.
  const std::vector<StepBytes> steps = {
      step({{256, 320}, {0, 64}}, {{0, 64}}),
      step({{0, 64}, {64, 128}, {128, 192}}, {{128, 192}}),
      step({{0, 64}, {64, 128}, {128, 192}, {0, 0}, {64, 128}}, {{64, 128}}),
      step({{0, 64}, {64, 128}, {100, 101}, {127, 129}}, {}),
  };
  const std::vector<uint64_t> m = settled_refs(steps);
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0], 0u) << "the first step settles nothing";
  EXPECT_EQ(m[1], 0b110u) << "step 0's result is being written by the launch before";
  // [128, 192) is step 1's result; [64, 128) is settled for step 2 though step 2 writes it.
  EXPECT_EQ(m[2], 0b11011u);
  // Step 2 wrote [64, 128): any overlap with it is unsettled, the edges included.
  EXPECT_EQ(m[3], 0b0001u);
}

TEST(CudaSettledRefs, AStepThatMayNotWaitLeavesTheOneBeforeItUnsettledToo) {
  // Step 1 does not wait (a library's kernels, or it may launch nothing): step 2 may start
  // while step 0's kernel still runs, so step 0's result stays unsettled through step 2.
  // Step 3 follows a waiting step: only step 2's own result is unsettled then.
  const std::vector<StepBytes> steps = {
      step({}, {{0, 64}}),
      step({{0, 64}}, {{64, 128}}, false),
      step({{0, 64}, {64, 128}, {512, 576}}, {{128, 192}}),
      step({{0, 64}, {64, 128}, {128, 192}}, {}),
  };
  const std::vector<uint64_t> m = settled_refs(steps);
  EXPECT_EQ(m[1], 0u);
  EXPECT_EQ(m[2], 0b100u);
  EXPECT_EQ(m[3], 0b011u);
  // Two steps in a row that do not wait: everything since the last waiting one stays open.
  const std::vector<StepBytes> chain = {
      step({}, {{0, 64}}),
      step({}, {{64, 128}}, false),
      step({}, {{128, 192}}, false),
      step({{0, 64}, {64, 128}, {128, 192}, {192, 256}}, {}),
  };
  EXPECT_EQ(settled_refs(chain)[3], 0b1000u);
}

TEST(CudaSettledRefs, RefsPastTheSixtyFourthAreNeverSettled) {
  std::vector<R> refs(70, R{1024, 1032});
  const std::vector<uint64_t> m = settled_refs({step({}, {{0, 8}}), step(refs, {})});
  EXPECT_EQ(m[1], ~uint64_t(0));
}

}  // namespace
}  // namespace rlx::cuda
#endif
