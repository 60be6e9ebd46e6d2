// SPDX-License-Identifier: Apache-2.0
// The DeepSeek V4 decode's block shape and its split plan (host code): how
// many heads a block owns, how many blocks an SM holds, and into how many
// splits a row's tiles (its main cache's, then its extra cache's) are cut
// when a workspace takes the partial results.
#pragma once

#include <algorithm>
#include <cstdint>

namespace mlakv::cuda::v4 {

inline constexpr int kTileTokens = 64;  // entries a block decodes and attends to at once
inline constexpr int kDims = 512;       // d_qk and the value width (448 NoPE + 64 RoPE)
inline constexpr int kMaxSplits = 64;

/// Groups of 16 heads (the mma M dimension) a block owns: one up to 16 heads,
/// two up to 32, four beyond (a block of 64 heads decodes each key once for all of them).
inline int groups_for(std::int64_t heads) { return heads > 32 ? 4 : heads > 16 ? 2 : 1; }

/// Blocks an SM holds at once (kernel.cuh's Shape::kBlocksPerSm): two of one
/// group (~90 KB of shared storage each), one of more (160-199 KB, staging).
inline int blocks_per_sm(int groups) { return groups == 1 ? 2 : 1; }

/// Tiles of kTileTokens entries of a key set of `topk` entries.
inline std::int64_t tiles_of(std::int64_t topk) { return (topk + kTileTokens - 1) / kTileTokens; }

struct Plan {
  int groups;
  int splits;
  int tiles_per_split;
};

/// The split count whose last wave ends first: waves of resident blocks times
/// the tiles each block walks (a partial last wave costs a whole one), plus,
/// when rows are split, about a tile for the block's start and one per 16
/// heads for writing and merging its float32 partial. Ties go to fewer splits.
inline Plan plan_decode(std::int64_t rows, std::int64_t heads, std::int64_t tiles, int multiprocessors) {
  const int groups = groups_for(heads);
  const std::int64_t block_heads = 16 * groups;
  const std::int64_t blocks = rows * ((heads + block_heads - 1) / block_heads);
  const std::int64_t resident = static_cast<std::int64_t>(std::max(multiprocessors, 1)) * blocks_per_sm(groups);
  tiles = std::max<std::int64_t>(tiles, 1);
  const std::int64_t split_cost = 1 + std::min(heads, block_heads) / 16;
  const std::int64_t most = std::min<std::int64_t>(tiles, kMaxSplits);
  Plan best{groups, 1, static_cast<int>(tiles)};
  std::int64_t best_cost = -1;
  for (std::int64_t splits = 1; splits <= most; ++splits) {
    const std::int64_t per_split = (tiles + splits - 1) / splits;
    if ((tiles + per_split - 1) / per_split != splits) continue;  // the same split as a smaller count
    const std::int64_t waves = (blocks * splits + resident - 1) / resident;
    const std::int64_t cost = waves * (per_split + (splits > 1 ? split_cost : 0));
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      best = {groups, static_cast<int>(splits), static_cast<int>(per_split)};
    }
  }
  return best;
}

/// Workspace bytes of a plan: partial rows [splits, R, H, 512] float32, then their lse [splits, R, H].
inline std::int64_t plan_workspace_bytes(const Plan& plan, std::int64_t rows, std::int64_t heads) {
  if (plan.splits <= 1) return 0;
  return static_cast<std::int64_t>(plan.splits) * rows * heads * (kDims + 1) * static_cast<std::int64_t>(sizeof(float));
}

/// The workspace any V4 decode of R rows, H heads and K + K_extra = `entries`
/// entries uses: its tiles are tiles_of(K) + tiles_of(K_extra), at most
/// tiles_of(entries) + 1, and every plan up to that many is covered.
inline std::int64_t workspace_bytes(std::int64_t rows, std::int64_t heads, std::int64_t entries, int multiprocessors) {
  std::int64_t bytes = 0;
  const std::int64_t most_tiles = tiles_of(entries) + 1;
  for (std::int64_t tiles = 1; tiles <= most_tiles; ++tiles) {
    bytes = std::max(bytes, plan_workspace_bytes(plan_decode(rows, heads, tiles, multiprocessors), rows, heads));
  }
  return bytes;
}

}  // namespace mlakv::cuda::v4
