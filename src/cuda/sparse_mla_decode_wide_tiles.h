// SPDX-License-Identifier: Apache-2.0
// The wide-tile warpgroup sparse decode's shape and launcher, as the host
// dispatch (sparse_mla_decode.cu) sees them: the warpgroup kernel's blocks of
// 64 heads and three warpgroups, with tiles of 64 keys, for the records whose
// keys decode element by element (the FP8 ones). sm_90a machine code only
// (sparse_mla_decode_wide_tiles.cu), launched on compute capability 9.0.
#pragma once

#include <cuda_runtime.h>

#include "cuda/sparse_mla_decode_warpgroups.h"
#include "mlakv/vocabulary.h"
#include "params/attention_params.h"

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

// Records of a tile each decoder warp decodes: warpgroup 1's warps fewer, as
// they also multiply P x V between their decodes (a tile waits for its
// slowest decoder; 4 + 12 measured fastest, docs/kernel_history.md).
inline constexpr int kValueWarpTokens = 4;
inline constexpr int kDecoderWarpTokens = (kTileTokens - 4 * kValueWarpTokens) / 4;
static_assert(kValueWarpTokens > 0 && kValueWarpTokens % kRoundTokens == 0 && kDecoderWarpTokens % kRoundTokens == 0 &&
                  4 * (kValueWarpTokens + kDecoderWarpTokens) == kTileTokens && kDecoderWarpTokens <= 16,
              "whole rounds; a tile's records");

/// The records the kernel reads: loaded straight from global memory by the
/// decoders (16-byte multiples, no wider than fp8_ds_mla's).
template <int kRecordBytes>
inline constexpr bool kFits = kRecordBytes % 16 == 0 && kRecordBytes <= kMaxRecordBytes;

/// Launches the decode of `p` over grid (blocks of 64 heads per row, splits),
/// each split walking units_per_split units of 64 entries; with more than one
/// split it writes the workspace partials the merge kernel combines.
template <class Codec>
cudaError_t launch(const params::SparseDecodeParams& p, int splits, int units_per_split, int device,
                   cudaStream_t stream);

}  // namespace mlakv::cuda::wide_tiles
