// SPDX-License-Identifier: Apache-2.0
// The shared-tile sparse decode's block shape: a block owns one query row and
// 16, 32 or 64 heads (one to four mma M tiles) and walks the row's entries in
// tiles of 64 keys decoded into a bf16 tile in shared memory.
#pragma once

#include <cstdint>

#include "cuda/ptx/warp_size.h"
#include "mlakv/vocabulary.h"

namespace mlakv::cuda::shared_tile {

inline constexpr int kTileTokens = 64;
inline constexpr int kKeyDim = kQueryDim;
// Row pitches padded by 16 bytes: the 8 rows an ldmatrix phase reads then
// start 4 banks apart, so no two share a bank.
inline constexpr int kKeyPitch = kKeyDim + 8;
inline constexpr int kProbPitch = kTileTokens + 8;
inline constexpr int kScorePitch = kTileTokens + 4;

// How a thread block divides its work: kGroups groups of 16 heads (the mma M
// dimension), so every record decoded and key tile loaded serves 16 kGroups
// heads (one group for H <= 16, two for H <= 32, four beyond). Each group has
// 8 warps (4 with four groups), each scoring 8 (16) keys and accumulating 64
// (128) output dims: 8 or 16 warps per block (the alternatives timed:
// docs/kernel_history.md).
template <int kGroups>
struct BlockShape {
  static constexpr int kHeads = 16 * kGroups;
  static constexpr int kWarpsPerGroup = kGroups == 4 ? 4 : 8;
  static constexpr int kWarps = kGroups * kWarpsPerGroup;
  static constexpr int kThreads = kWarps * kWarpSize;
  static constexpr int kScoreTokens = kTileTokens / kWarpsPerGroup;  // keys a warp scores
  static constexpr int kDims = kValueDim / kWarpsPerGroup;           // output dims a warp accumulates
  static constexpr int kDecodeTokens = kTileTokens / kWarps;         // records a warp copies and decodes
  static constexpr int kSoftmaxThreads = kThreads / kHeads;          // threads sharing a head's softmax
  static constexpr int kSoftmaxValues = kTileTokens / kSoftmaxThreads;
  // Blocks an SM holds at once (shared storage: 100, 126 and 176 KB for 1, 2 and 4 groups).
  static constexpr int kBlocksPerSm = kGroups == 1 ? 2 : 1;
  static_assert(kDecodeTokens <= kWarpSize && kSoftmaxValues % 4 == 0 && kDims % 16 == 0, "shape does not tile");
};

template <int kGroups>
struct SharedStorage {
  static constexpr int kHeads = 16 * kGroups;
  alignas(16) std::uint16_t q[kHeads][kKeyPitch];
  alignas(16) std::uint16_t keys[kTileTokens][kKeyPitch];  // also where the records land
  alignas(16) float scores[kHeads][kScorePitch];
  alignas(16) std::uint16_t probs[kHeads][kProbPitch];
  float row_max[kHeads];  // log2 domain
  float row_sum[kHeads];
  float rescale[kHeads];
  int valid[kTileTokens];
};

/// Groups of 16 heads a block holds for a call of `heads` heads.
inline constexpr int groups_for(std::int64_t heads) { return heads > 32 ? 4 : heads > 16 ? 2 : 1; }

}  // namespace mlakv::cuda::shared_tile
