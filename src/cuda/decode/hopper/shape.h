// SPDX-License-Identifier: Apache-2.0
// The shapes of the warpgroup sparse decodes on Hopper (sm_90a): blocks of
// 64 heads and three warpgroups, with tiles of 32 keys (warpgroups::) or 64
// (wide_tiles::; 16 or 32 heads with the products transposed). Plain
// constants: the host planner (plan.cpp) reads them too.
#pragma once

#include <cstdint>

#include "mlakv/vocabulary.h"

namespace mlakv::cuda::warpgroups {

inline constexpr int kHeads = 64;  // the wgmma M: a block's heads
inline constexpr int kTileTokens = 32;
inline constexpr int kThreads = 3 * 128;
inline constexpr int kProducerWarps = 8;                          // warpgroups 1 and 2 decode
inline constexpr int kWarpTokens = kTileTokens / kProducerWarps;  // records a producer warp copies and decodes
inline constexpr int kBatchTiles = 32 / kWarpTokens;  // tiles whose addresses a warp (32 lanes) finds at once
inline constexpr int kColumnBlocks = kQueryDim / 64;  // 64-column blocks of a 576-dim row
inline constexpr int kQueryBlockBytes = kHeads * 128;
inline constexpr int kKeyBlockBytes = kTileTokens * 128;
inline constexpr int kProbBytes = kHeads * 128;  // [64 heads][64 columns] bf16, the first kTileTokens used
inline constexpr int kHalfDims = kValueDim / 2;  // output dims a math warpgroup accumulates
inline constexpr int kSharedLimit = 232448;      // bytes of shared memory a block may opt into on sm_90

// Registers a thread of each warpgroup keeps (setmaxnreg; at most 3 x 168 in
// all): warpgroup 0 holds 128 output and 32 score accumulators, warpgroup 1
// 128 output accumulators beside its decode.
inline constexpr int kScoreRegisters = 200;
inline constexpr int kValueRegisters = 200;
inline constexpr int kProducerRegisters = 104;
static_assert(kScoreRegisters + kValueRegisters + kProducerRegisters <= 3 * 168, "registers of one block per SM");

/// Shared bytes besides the key tiles and the record ring: the query, two
/// probability tiles, the small state, and the slack that aligns the tiles.
inline constexpr int kFixedBytes = kColumnBlocks * kQueryBlockBytes + 2 * kProbBytes + 2048 + 1024;

/// Key tiles: three where a ring of two record tiles still fits beside them
/// (records up to 432 bytes), so that a tile is decoded while the one before
/// it is scored; else two.
template <int kRecordBytes>
inline constexpr int kKeyBuffers =
    kSharedLimit - kFixedBytes - 3 * kColumnBlocks* kKeyBlockBytes >= 2 * kTileTokens* kRecordBytes ? 3 : 2;

/// The ring depth the rest of shared memory holds (2 for 368-byte records, 3 for 656).
template <int kRecordBytes>
inline constexpr int kStages = (kSharedLimit - kFixedBytes -
                                kKeyBuffers<kRecordBytes> * kColumnBlocks * kKeyBlockBytes) /
                               (kTileTokens * kRecordBytes);

/// Whether a record's ring of at least two tiles fits beside the kernel's tiles
/// (every token-major record but the 16-bit ones').
template <int kRecordBytes>
inline constexpr bool kFits = kStages<kRecordBytes> >= 2;

}  // namespace mlakv::cuda::warpgroups

namespace mlakv::cuda::wide_tiles {

using warpgroups::kColumnBlocks;
using warpgroups::kHalfDims;
using warpgroups::kHeads;
using warpgroups::kQueryBlockBytes;
using warpgroups::kSharedLimit;
using warpgroups::kThreads;

inline constexpr int kTileTokens = 64;  // the scores' wgmma N: keys a tile
inline constexpr int kKeyBlockBytes = kTileTokens * 128;
inline constexpr int kProbBytes = kHeads * kTileTokens * 2;  // [64 heads][64 keys] bf16
inline constexpr int kKeyBuffers = 2;                        // key tiles: one decoded while one is multiplied
inline constexpr int kMaxRecordBytes = 656;                  // the widest record the kernel reads (fp8_ds_mla)
inline constexpr int kRoundTokens = 4;                       // records a decoder warp decodes at once (8 lanes each)

inline constexpr int kKeyRowBytes = kQueryDim * 2;  // a decoded key: 576 bf16

/// Up to this many heads a row is one block of 16 or 32 heads whose products
/// are transposed (the tile's 64 keys as the wgmma M: transposed_products.cuh).
inline constexpr int kTransposedHeads = 32;

/// Crossover: where a row's blocks of 64 heads pair up (128 heads), each pair
/// forms a cluster and each block decodes half of every tile into both
/// blocks' key tiles (stores to the peer's shared memory that complete on its
/// barrier), halving the decode a block does for the same products.
inline constexpr bool crossover_for(std::int64_t heads) { return (heads + kHeads - 1) / kHeads % 2 == 0; }

/// Records of a tile one block decodes.
template <bool kCrossover>
inline constexpr int kBlockTokens = kCrossover ? kTileTokens / 2 : kTileTokens;

// Records of a tile each decoder warp decodes: warpgroup 1's warps fewer, as
// they also multiply P x V between their decodes (a tile waits for its
// slowest decoder). Without crossover 4 + 12 measured fastest (0 + 16 and
// 8 + 8 again at a84790e); with it 4 + 4 (since the bulk copies: warpgroup 1
// waits most of a tile for the weights); with the transposed products (whose
// P x V is a quarter or an eighth of 64 heads') 8 + 8 (docs/kernel_history.md).
template <bool kCrossover, bool kTransposed = false>
inline constexpr int kValueWarpTokens = kCrossover    ? 4
                                        : kTransposed ? 8
                                                      : 4;
template <bool kCrossover, bool kTransposed = false>
inline constexpr int kDecoderWarpTokens = (kBlockTokens<kCrossover> - 4 * kValueWarpTokens<kCrossover, kTransposed>) /
                                          4;

template <bool kCrossover, bool kTransposed = false>
constexpr bool shares_fit() {
  constexpr int value = kValueWarpTokens<kCrossover, kTransposed>;
  constexpr int decoder = kDecoderWarpTokens<kCrossover, kTransposed>;
  return value >= 0 && value % kRoundTokens == 0 && decoder > 0 && decoder % kRoundTokens == 0 &&
         4 * (value + decoder) == kBlockTokens<kCrossover> && decoder <= 16 && value <= 16;
}
static_assert(shares_fit<false>() && shares_fit<true>() && shares_fit<false, true>(), "whole rounds; a tile's records");

/// The records the kernel reads: loaded straight from global memory by the
/// decoders (16-byte multiples, no wider than fp8_ds_mla's).
template <int kRecordBytes>
inline constexpr bool kFits = kRecordBytes % 16 == 0 && kRecordBytes <= kMaxRecordBytes;

}  // namespace mlakv::cuda::wide_tiles
