// SPDX-License-Identifier: Apache-2.0
// The sparse decode's host planner (plan.h). Adding a kernel family adds its
// rule to kernel_for and its blocks to block_geometry.
#include "cuda/decode/plan.h"

#include <algorithm>

#include "cuda/decode/hopper/shape.h"
#include "cuda/decode/shared_tile/shape.h"
#include "cuda/decode/split_dims/shape.h"
#include "cuda/decode/workspace.h"

namespace mlakv::cuda {
namespace {

// Rows too few to fill the GPU with blocks of 64 heads: up to this many
// blocks of 16 heads take the transposed products in blocks of 16, and for
// NVFP4 up to this many blocks of 32 in blocks of 32.
constexpr std::int64_t kMostBlocksOf16 = 12;
constexpr std::int64_t kMostBlocksOf32 = 16;

/// How a family's blocks cover a row's heads and how many an SM holds.
struct BlockGeometry {
  std::int64_t block_heads;
  int per_sm;
};

BlockGeometry block_geometry(DecodeKernel kernel, int transposed_heads, std::int64_t heads) {
  switch (kernel) {
    case DecodeKernel::kSharedTile: {
      const int groups = shared_tile::groups_for(heads);
      return {16 * groups, groups == 1   ? shared_tile::BlockShape<1>::kBlocksPerSm
                           : groups == 2 ? shared_tile::BlockShape<2>::kBlocksPerSm
                                         : shared_tile::BlockShape<4>::kBlocksPerSm};
    }
    case DecodeKernel::kSplitDims:
      // Blocks of 32 heads in the plan (16 for H <= 16 cover the same rows).
      return {32, heads <= 16 ? split_dims::kBlocksPerSm<1> : split_dims::kBlocksPerSm<2>};
    case DecodeKernel::kWarpgroups:
    case DecodeKernel::kWideTiles:
      return {warpgroups::kHeads, 1};
    case DecodeKernel::kTransposedProducts:
      return {transposed_heads, 1};
  }
  return {warpgroups::kHeads, 1};  // unreachable: every family is handled above
}

}  // namespace

// Every row of up to 32 heads of the records the wide tiles take (all but
// the per-token-scaled one); blocks of 16 while the rows have few of them,
// and for NVFP4 blocks of 32 while they have few of those.
int transposed_block_heads(const KernelChoice& choice, std::int64_t rows, std::int64_t heads) {
  if (!choice.wide_tiles || choice.outer_scale) return 0;
  if (heads <= 16 || rows * ((heads + 15) / 16) <= kMostBlocksOf16) return 16;
  if (heads <= wide_tiles::kTransposedHeads) return wide_tiles::kTransposedHeads;
  return choice.decodes_to_fragments && rows * ((heads + 31) / 32) <= kMostBlocksOf32 ? 32 : 0;
}

// The FP8 records at every row count; the NVFP4 ones (their fragment
// decode) from 4 blocks of 64 heads; the per-token-scaled NVFP4 record (an
// f32 product a value in its decode) only with crossover, where a block
// decodes half of each tile.
bool wide_tiles_for(const KernelChoice& choice, std::int64_t rows, std::int64_t heads) {
  const bool enough_blocks = rows * ((heads + 63) / 64) >= 4;
  if (choice.outer_scale) return wide_tiles::crossover_for(heads) && enough_blocks;
  return !choice.decodes_to_fragments || enough_blocks;
}

// The shared-tile kernel decodes a record once per 16-64 heads into a bf16
// tile all its warps read; the split-dims kernel once per 32 heads straight
// into its warps' registers (less shared-memory traffic, a longer chain a
// tile): faster for the NVFP4 records up to 32 heads once the rows fill the
// GPU. On Hopper builds with sm_90a code the warpgroup kernels take every
// record of up to 656 bytes beyond 16 heads: the wide tiles where
// wide_tiles_for says, with their products transposed up to 32 heads
// (transposed_block_heads), else the 32-key tiles from 4 blocks of 64 heads
// (fewer pay its longer start).
DecodeKernel kernel_for(const KernelChoice& choice, int transposed_heads, std::int64_t rows, std::int64_t heads,
                        int multiprocessors) {
  if (transposed_heads > 0) return DecodeKernel::kTransposedProducts;
  if (choice.wide_tiles && wide_tiles_for(choice, rows, heads)) return DecodeKernel::kWideTiles;
  if (choice.warpgroups && heads > 16 && rows * ((heads + 63) / 64) >= 4) return DecodeKernel::kWarpgroups;
  // From about 32 rows on a 132-SM H200.
  const bool split = choice.decodes_to_fragments && heads <= 32 && 5 * rows >= multiprocessors;
  return split ? DecodeKernel::kSplitDims : DecodeKernel::kSharedTile;
}

DecodePlan plan_splits(DecodeKernel kernel, int transposed_heads, std::int64_t rows, std::int64_t heads,
                       std::int64_t topk, int multiprocessors) {
  const std::int64_t tiles = std::max<std::int64_t>(1, (topk + kSplitUnitTokens - 1) / kSplitUnitTokens);
  const BlockGeometry geometry = block_geometry(kernel, transposed_heads, heads);
  const std::int64_t block_heads = geometry.block_heads;
  const std::int64_t blocks = rows * ((heads + block_heads - 1) / block_heads);
  const std::int64_t resident = static_cast<std::int64_t>(multiprocessors) * geometry.per_sm;
  // The split count whose last wave ends first: waves of resident blocks times
  // the tiles each block walks (a partial last wave costs a whole one), plus,
  // when rows are split, about a tile for the block's start and one per 16
  // heads for writing its float32 partial result and merging it. Ties go to
  // fewer splits. The wide tiles split a row into single tiles only while
  // the grid fills at most half the SMs (three quarters with the transposed
  // products, whose blocks start and finish faster): beyond that two tiles a
  // block on half the blocks are faster.
  const bool wide = kernel == DecodeKernel::kWideTiles || kernel == DecodeKernel::kTransposedProducts;
  const std::int64_t single_tile_blocks = kernel == DecodeKernel::kTransposedProducts ? resident * 3 / 4 : resident / 2;
  const std::int64_t split_cost = 1 + std::min(heads, block_heads) / 16;
  const std::int64_t most = std::min<std::int64_t>(tiles, kMaxSplits);
  std::int64_t best_splits = 1;
  std::int64_t best_per_split = tiles;
  std::int64_t best_cost = -1;
  for (std::int64_t splits = 1; splits <= most; ++splits) {
    const std::int64_t per_split = (tiles + splits - 1) / splits;
    if ((tiles + per_split - 1) / per_split != splits) continue;  // the same split as a smaller count
    if (wide && per_split == 1 && splits > 1 && blocks * splits > single_tile_blocks) continue;
    const std::int64_t waves = (blocks * splits + resident - 1) / resident;
    const std::int64_t cost = waves * (per_split + (splits > 1 ? split_cost : 0));
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      best_splits = splits;
      best_per_split = per_split;
    }
  }
  return {kernel, transposed_heads, static_cast<int>(best_splits), static_cast<int>(best_per_split)};
}

std::int64_t plan_workspace_bytes(const DecodePlan& plan, std::int64_t rows, std::int64_t heads) {
  return split_workspace_bytes(plan.splits, rows, heads);
}

DecodePlan plan_decode(const KernelChoice& choice, std::int64_t rows, std::int64_t heads, std::int64_t topk,
                       int multiprocessors, std::int64_t workspace_bytes) {
  const int transposed_heads = transposed_block_heads(choice, rows, heads);
  DecodePlan plan = plan_splits(kernel_for(choice, transposed_heads, rows, heads, multiprocessors), transposed_heads,
                                rows, heads, topk, multiprocessors);
  if (workspace_bytes < plan_workspace_bytes(plan, rows, heads)) {
    plan.splits = 1;
    plan.tiles_per_split =
        static_cast<int>(std::max<std::int64_t>(1, (topk + kSplitUnitTokens - 1) / kSplitUnitTokens));
  }
  return plan;
}

std::int64_t decode_workspace_bytes(std::int64_t rows, std::int64_t heads, std::int64_t topk, int multiprocessors) {
  std::int64_t bytes = 0;
  for (const DecodeKernel kernel : kDecodeKernels) {
    for (const int transposed_heads : {16, 32}) {
      const DecodePlan plan = plan_splits(kernel, transposed_heads, rows, heads, topk, multiprocessors);
      bytes = std::max(bytes, plan_workspace_bytes(plan, rows, heads));
    }
  }
  return bytes;
}

}  // namespace mlakv::cuda
