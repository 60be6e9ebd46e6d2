// SPDX-License-Identifier: Apache-2.0
// The warpgroup sparse decode's shape and launcher, as the host dispatch
// (sparse_mla_decode.cu) sees them. The kernel is sm_90a machine code only
// (sparse_mla_decode_warpgroups.cu, built into every build for Hopper), so
// the dispatch launches it on compute capability 9.0 devices only.
#pragma once

#include <cuda_runtime.h>

#include "mlakv/vocabulary.h"
#include "params/attention_params.h"

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

/// Launches the decode of `p` over grid (blocks of 64 heads per row, splits),
/// each split walking units_per_split units of 64 entries; with more than one
/// split it writes the workspace partials the merge kernel combines.
template <class Codec>
cudaError_t launch(const params::SparseDecodeParams& p, int splits, int units_per_split, int device,
                   cudaStream_t stream);

}  // namespace mlakv::cuda::warpgroups
