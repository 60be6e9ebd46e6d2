// SPDX-License-Identifier: Apache-2.0
// The sparse decode's host planner: which kernel family decodes a call, how
// a row's entries are split over blocks, and the workspace the splits need.
// Plain host code over the families' shapes (their shape.h), tested without
// a GPU (tests/cpp/cuda/decode_plan_test.cpp). The numbers behind each rule:
// docs/kernel_history.md, "Kernel choice and split plan".
#pragma once

#include <cstdint>

namespace mlakv::cuda {

/// Entries are handed to a split in units of this many: every family's
/// tiles divide it.
inline constexpr int kSplitUnitTokens = 64;
/// The most splits of a row (the split-merge kernel loads an lse a thread).
inline constexpr int kMaxSplits = 64;

/// The kernel families, one folder each under src/cuda/decode/ (the
/// warpgroup ones share hopper/).
enum class DecodeKernel {
  kSharedTile,          ///< shared_tile/: a bf16 key tile in shared memory, mma.sync
  kSplitDims,           ///< split_dims/: NVFP4 keys decoded into mma fragments
  kWarpgroups,          ///< hopper/: 64 heads, 32-key tiles, wgmma (sm_90a)
  kWideTiles,           ///< hopper/: 64 heads, 64-key tiles, wgmma (sm_90a)
  kTransposedProducts,  ///< hopper/: the wide tiles for 16 or 32 heads, keys as the wgmma M
};
inline constexpr DecodeKernel kDecodeKernels[] = {DecodeKernel::kSharedTile, DecodeKernel::kSplitDims,
                                                  DecodeKernel::kWarpgroups, DecodeKernel::kWideTiles,
                                                  DecodeKernel::kTransposedProducts};

/// What the kernel choice depends on besides the call's shape: the codec's
/// decode and which kernels this build runs on the device.
struct KernelChoice {
  bool decodes_to_fragments;  // the NVFP4 records
  bool outer_scale;           // the NVFP4 record with a per-token scale
  bool warpgroups;            // the warpgroup kernel is built for the codec and runs on the device
  bool wide_tiles;            // and the wide-tile one too
};

/// A call's plan: its kernel, the block size of the transposed products,
/// and the split of each row's entries (tiles_per_split units of
/// kSplitUnitTokens).
struct DecodePlan {
  DecodeKernel kernel;
  int block_heads;  // of the transposed products (transposed_block_heads)
  int splits;
  int tiles_per_split;
};

/// The block size (16 or 32 heads) of the wide tiles' transposed products,
/// or 0 where they do not run.
int transposed_block_heads(const KernelChoice& choice, std::int64_t rows, std::int64_t heads);

/// Whether the wide-tile kernel (blocks of 64 heads) takes a call the
/// transposed products do not.
bool wide_tiles_for(const KernelChoice& choice, std::int64_t rows, std::int64_t heads);

/// The family that decodes (rows, heads); `transposed_heads` is
/// transposed_block_heads(choice, rows, heads).
DecodeKernel kernel_for(const KernelChoice& choice, int transposed_heads, std::int64_t rows, std::int64_t heads,
                        int multiprocessors);

/// The split of each row's topk entries whose last wave of blocks ends first.
DecodePlan plan_splits(DecodeKernel kernel, int transposed_heads, std::int64_t rows, std::int64_t heads,
                       std::int64_t topk, int multiprocessors);

/// Bytes of workspace the plan's splits write.
std::int64_t plan_workspace_bytes(const DecodePlan& plan, std::int64_t rows, std::int64_t heads);

/// The plan of a call given `workspace_bytes` of workspace (0: none): a
/// split that needs more runs unsplit.
DecodePlan plan_decode(const KernelChoice& choice, std::int64_t rows, std::int64_t heads, std::int64_t topk,
                       int multiprocessors, std::int64_t workspace_bytes);

/// The workspace a caller provides for any format: the largest of every
/// family's plans.
std::int64_t decode_workspace_bytes(std::int64_t rows, std::int64_t heads, std::int64_t topk, int multiprocessors);

}  // namespace mlakv::cuda
