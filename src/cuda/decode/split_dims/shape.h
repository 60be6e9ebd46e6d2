// SPDX-License-Identifier: Apache-2.0
// The split-dims sparse decode's block shape: a block owns one query row, 16
// or 32 heads and a range of the row's entries, walked in tiles of 32 whose
// records are decoded straight into the mma fragments of its 8 warps, each
// holding a 64-dim slice of every key.
#pragma once

#include "cuda/ptx/warp_size.h"

namespace mlakv::cuda::split_dims {

inline constexpr int kWarps = 8;
inline constexpr int kThreads = kWarps * kWarpSize;
inline constexpr int kTileTokens = 32;
inline constexpr int kTokenTiles = kTileTokens / 8;          // mma N tiles of the scores
inline constexpr int kLatentBlocks = 4;                      // a warp's 64 latent dims: 4 mma k-blocks of 16
inline constexpr int kKeyBlocks = kLatentBlocks + 1;         // and one of RoPE (its 8 RoPE dims, the rest zero)
inline constexpr int kPartialPitch = kTileTokens + 8;        // floats: a half warp's float2 stores hit 32 banks
inline constexpr int kProbPitch = kTileTokens + 8;           // bf16: ldmatrix rows 80 bytes apart, no conflict
inline constexpr int kWarpTokens = kTileTokens / kWarps;     // records a warp copies per tile
inline constexpr int kBatchTiles = kWarpSize / kWarpTokens;  // tiles whose addresses a warp finds at once

/// Ring depth: about 67-110 KB of records, so one block per SM keeps enough
/// bytes in flight to cover the gather's DRAM latency.
template <int kRecordBytes>
inline constexpr int kStages = kRecordBytes <= 432   ? 6
                               : kRecordBytes <= 656 ? 4
                                                     : 3;

/// Blocks an SM holds: two of 16 heads (<= 128 registers a thread), one of 32.
template <int kGroups>
inline constexpr int kBlocksPerSm = kGroups == 1 ? 2 : 1;

}  // namespace mlakv::cuda::split_dims
