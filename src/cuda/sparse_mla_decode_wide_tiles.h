// SPDX-License-Identifier: Apache-2.0
// The wide-tile warpgroup sparse decode's shape and launcher, as the host
// dispatch (sparse_mla_decode.cu) sees them: the warpgroup kernel's blocks of
// 64 heads and three warpgroups, with tiles of 64 keys, for the FP8 records
// and the NVFP4 ones without a per-token scale. sm_90a machine code only
// (sparse_mla_decode_wide_tiles.cu), launched on compute capability 9.0.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

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

/// Launches the decode of `p` over grid (blocks of 64 heads per row; splits),
/// each split walking units_per_split units of 64 entries. With more than one
/// split a row's splits merge in their cluster where it fits (`merged` is
/// then set), else they write the workspace partials the merge kernel
/// combines. Rows of an even number of 64-head blocks run in clusters of two
/// (crossover).
template <class Codec>
cudaError_t launch(const params::SparseDecodeParams& p, int splits, int units_per_split, int device,
                   cudaStream_t stream, bool& merged);

/// The same with the transposed products, in blocks of `block_heads` (16 or
/// 32) heads, each decoding every record of its tiles.
template <class Codec>
cudaError_t launch_transposed(const params::SparseDecodeParams& p, int block_heads, int splits, int units_per_split,
                              int device, cudaStream_t stream, bool& merged);

}  // namespace mlakv::cuda::wide_tiles
