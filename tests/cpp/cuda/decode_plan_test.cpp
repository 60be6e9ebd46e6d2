// SPDX-License-Identifier: Apache-2.0
// The sparse decode's host planner (src/cuda/decode/plan.h; no device
// needed): which kernel family takes a call, how rows are split, and the
// workspace the splits need. The device is a 132-SM H200 throughout.
#include <gtest/gtest.h>

#include <cstdint>

#include "cuda/decode/plan.h"

namespace {

using mlakv::cuda::DecodeKernel;
using mlakv::cuda::DecodePlan;
using mlakv::cuda::KernelChoice;

constexpr int kSms = 132;
constexpr std::int64_t kFloatBytes = 4;

// The codecs as the dispatcher describes them, on a build and device without
// or with the warpgroup kernels.
constexpr KernelChoice kFp8{false, false, false, false};
constexpr KernelChoice kNvfp4{true, false, false, false};
constexpr KernelChoice kFp8Hopper{false, false, true, true};
constexpr KernelChoice kNvfp4Hopper{true, false, true, true};
constexpr KernelChoice kPtsHopper{true, true, true, true};

DecodeKernel kernel_of(const KernelChoice& choice, std::int64_t rows, std::int64_t heads) {
  return mlakv::cuda::kernel_for(choice, mlakv::cuda::transposed_block_heads(choice, rows, heads), rows, heads, kSms);
}

TEST(decode_plan, without_the_warpgroup_kernels_nvfp4_takes_split_dims_once_the_rows_fill_the_gpu) {
  EXPECT_EQ(kernel_of(kNvfp4, 26, 32), DecodeKernel::kSharedTile);  // 5 R = 130 < 132 SMs
  EXPECT_EQ(kernel_of(kNvfp4, 27, 32), DecodeKernel::kSplitDims);
  EXPECT_EQ(kernel_of(kNvfp4, 1024, 64), DecodeKernel::kSharedTile);  // split dims holds up to 32 heads
  EXPECT_EQ(kernel_of(kFp8, 1024, 16), DecodeKernel::kSharedTile);    // it decodes NVFP4 only
}

TEST(decode_plan, up_to_32_heads_the_wide_tiles_transpose_their_products) {
  EXPECT_EQ(kernel_of(kFp8Hopper, 1, 16), DecodeKernel::kTransposedProducts);
  EXPECT_EQ(mlakv::cuda::transposed_block_heads(kFp8Hopper, 6, 32), 16);  // 12 blocks of 16
  EXPECT_EQ(mlakv::cuda::transposed_block_heads(kFp8Hopper, 7, 32), 32);
  EXPECT_EQ(mlakv::cuda::transposed_block_heads(kFp8Hopper, 7, 64), 0);
  EXPECT_EQ(mlakv::cuda::transposed_block_heads(kNvfp4Hopper, 8, 64), 32);  // 16 blocks of 32
  EXPECT_EQ(mlakv::cuda::transposed_block_heads(kNvfp4Hopper, 9, 64), 0);
  EXPECT_EQ(mlakv::cuda::transposed_block_heads(kPtsHopper, 1, 16), 0);  // not built for the per-token scale
}

TEST(decode_plan, beyond_32_heads_few_rows_take_transposed_blocks_and_more_the_wide_tiles) {
  EXPECT_EQ(kernel_of(kFp8Hopper, 1, 64), DecodeKernel::kTransposedProducts);  // 4 blocks of 16 heads
  EXPECT_EQ(kernel_of(kFp8Hopper, 4, 64), DecodeKernel::kWideTiles);
  EXPECT_EQ(kernel_of(kNvfp4Hopper, 8, 64), DecodeKernel::kTransposedProducts);  // 16 blocks of 32 heads
  EXPECT_EQ(kernel_of(kNvfp4Hopper, 9, 64), DecodeKernel::kWideTiles);
  EXPECT_EQ(kernel_of(kNvfp4Hopper, 5, 128), DecodeKernel::kWideTiles);
}

TEST(decode_plan, the_per_token_scaled_record_takes_the_wide_tiles_with_crossover_only) {
  EXPECT_EQ(kernel_of(kPtsHopper, 2, 128), DecodeKernel::kWideTiles);   // pairs of 64-head blocks
  EXPECT_EQ(kernel_of(kPtsHopper, 8, 64), DecodeKernel::kWarpgroups);   // one block of 64 a row
  EXPECT_EQ(kernel_of(kPtsHopper, 64, 16), DecodeKernel::kSplitDims);   // the warpgroups want > 16 heads
  EXPECT_EQ(kernel_of(kPtsHopper, 1, 128), DecodeKernel::kSharedTile);  // two blocks pay the warpgroups' start
}

TEST(decode_plan, a_grid_that_fills_the_gpu_is_not_split) {
  const DecodePlan plan = mlakv::cuda::plan_splits(DecodeKernel::kSharedTile, 0, 1024, 16, 2048, kSms);
  EXPECT_EQ(plan.splits, 1);
  EXPECT_EQ(plan.tiles_per_split, 32);
}

TEST(decode_plan, splits_cover_each_rows_tiles_once_and_stay_within_the_merge_kernel) {
  for (const DecodeKernel kernel : mlakv::cuda::kDecodeKernels) {
    for (const std::int64_t rows : {1, 2, 3, 16, 64}) {
      for (const std::int64_t heads : {16, 32, 64, 128}) {
        for (const std::int64_t topk : {1, 64, 65, 2048, 16384}) {
          const DecodePlan plan = mlakv::cuda::plan_splits(kernel, 16, rows, heads, topk, kSms);
          const std::int64_t tiles = (topk + 63) / 64;
          EXPECT_GE(plan.splits, 1);
          EXPECT_LE(plan.splits, mlakv::cuda::kMaxSplits);
          EXPECT_EQ((tiles + plan.tiles_per_split - 1) / plan.tiles_per_split, plan.splits)
              << static_cast<int>(kernel) << " R " << rows << " H " << heads << " K " << topk;
        }
      }
    }
  }
}

TEST(decode_plan, one_row_of_2048_entries_is_split_over_the_sms) {
  // One wide-tile block of 64 heads: single-tile splits while the grid fills
  // at most half the SMs, so 32 splits of one tile.
  const DecodePlan wide = mlakv::cuda::plan_splits(DecodeKernel::kWideTiles, 0, 1, 64, 2048, kSms);
  EXPECT_EQ(wide.splits, 32);
  EXPECT_EQ(wide.tiles_per_split, 1);
  // Four rows (128 blocks) fill more than half: two tiles a split.
  const DecodePlan four_rows = mlakv::cuda::plan_splits(DecodeKernel::kWideTiles, 0, 4, 64, 2048, kSms);
  EXPECT_GE(four_rows.tiles_per_split, 2);
}

TEST(decode_plan, a_workspace_too_small_for_the_split_runs_the_rows_unsplit) {
  const DecodePlan split = mlakv::cuda::plan_decode(kFp8Hopper, 1, 64, 2048, kSms, std::int64_t{1} << 40);
  ASSERT_GT(split.splits, 1);
  const std::int64_t needed = mlakv::cuda::plan_workspace_bytes(split, 1, 64);
  EXPECT_EQ(needed, split.splits * 1 * 64 * (512 + 1) * kFloatBytes);  // partial rows, then their lse
  EXPECT_EQ(mlakv::cuda::plan_decode(kFp8Hopper, 1, 64, 2048, kSms, needed).splits, split.splits);
  const DecodePlan unsplit = mlakv::cuda::plan_decode(kFp8Hopper, 1, 64, 2048, kSms, needed - 1);
  EXPECT_EQ(unsplit.splits, 1);
  EXPECT_EQ(unsplit.tiles_per_split, 32);
  EXPECT_EQ(mlakv::cuda::plan_decode(kFp8Hopper, 1, 64, 2048, kSms, 0).splits, 1);
}

TEST(decode_plan, the_workspace_size_holds_every_familys_plan) {
  for (const std::int64_t rows : {1, 4, 64}) {
    for (const std::int64_t heads : {16, 64, 128}) {
      const std::int64_t bytes = mlakv::cuda::decode_workspace_bytes(rows, heads, 2048, kSms);
      for (const KernelChoice& choice : {kFp8, kNvfp4, kFp8Hopper, kNvfp4Hopper, kPtsHopper}) {
        const DecodePlan plan = mlakv::cuda::plan_decode(choice, rows, heads, 2048, kSms, bytes);
        EXPECT_GE(bytes, mlakv::cuda::plan_workspace_bytes(plan, rows, heads));
        EXPECT_EQ(plan.splits, mlakv::cuda::plan_decode(choice, rows, heads, 2048, kSms, std::int64_t{1} << 40).splits);
      }
    }
  }
  EXPECT_EQ(mlakv::cuda::decode_workspace_bytes(4, 128, 64, kSms), 0);  // one tile a row: nothing to split
}

}  // namespace
