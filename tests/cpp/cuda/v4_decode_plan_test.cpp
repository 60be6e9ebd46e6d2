// SPDX-License-Identifier: Apache-2.0
// The DeepSeek V4 decode's split plan (host code, no device needed): splits
// cover every tile exactly once, never exceed 64 nor the tiles, rows that fill
// the GPU are not split, and the workspace sparse_mla_decode_workspace_size
// reports for K + K_extra entries holds the partials of every split of any
// main / extra division of those entries.
#include <gtest/gtest.h>

#include <cstdint>

#include "cuda/decode/v4/plan.h"

namespace {

using namespace mlakv::cuda::v4;

constexpr int kH200Sms = 132;

TEST(v4_decode_plan, splits_cover_every_tile_once_and_stay_within_the_limit) {
  for (const std::int64_t rows : {1, 2, 4, 64, 128, 256, 1000}) {
    for (const std::int64_t heads : {1, 8, 16, 24, 64, 128}) {
      for (const std::int64_t tiles : {1, 2, 3, 10, 18, 64, 65, 200}) {
        const Plan plan = plan_decode(rows, heads, tiles, kH200Sms);
        EXPECT_GE(plan.splits, 1);
        EXPECT_LE(plan.splits, kMaxSplits);
        EXPECT_LE(plan.splits, tiles);
        EXPECT_GE(static_cast<std::int64_t>(plan.splits) * plan.tiles_per_split, tiles) << "a tile left out";
        EXPECT_LT(static_cast<std::int64_t>(plan.splits - 1) * plan.tiles_per_split, tiles) << "an empty split";
        EXPECT_EQ(plan.groups, groups_for(heads));
      }
    }
  }
}

TEST(v4_decode_plan, rows_that_fill_the_gpu_are_not_split) {
  // 256 rows of 8 heads: two blocks an SM hold them all at once; 128 rows of 128 heads: two waves of 64-head blocks.
  EXPECT_EQ(plan_decode(256, 8, 10, kH200Sms).splits, 1);
  EXPECT_EQ(plan_decode(256, 128, 18, kH200Sms).splits, 1);
  // 4 rows (batch 2, s_q 2) spread over the SMs.
  EXPECT_GT(plan_decode(4, 8, 10, kH200Sms).splits, 1);
}

TEST(v4_decode_plan, the_workspace_holds_every_division_of_the_entries) {
  for (const std::int64_t rows : {1, 4, 128}) {
    for (const std::int64_t heads : {8, 64, 128}) {
      for (const std::int64_t entries : {1, 64, 65, 640, 1152, 2048}) {
        const std::int64_t bytes = workspace_bytes(rows, heads, entries, kH200Sms);
        for (std::int64_t main = 0; main <= entries; main += 1 + entries / 37) {
          const std::int64_t tiles = tiles_of(main) + tiles_of(entries - main);
          const Plan plan = plan_decode(rows, heads, tiles, kH200Sms);
          EXPECT_LE(plan_workspace_bytes(plan, rows, heads), bytes)
              << rows << " rows, " << heads << " heads, " << main << " + " << entries - main << " entries";
        }
      }
    }
  }
}

}  // namespace
