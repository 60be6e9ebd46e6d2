// SPDX-License-Identifier: Apache-2.0
// The sparse prefill kernel's shape and launcher, as the dispatch
// (sparse_mla_prefill.cu) sees them. The kernel is sm_90a machine code only
// (launch.cu, built into the mlakv_sm90a object library), launched on
// compute capability 9.0 devices only.
#pragma once

#include <cuda_runtime.h>

#include "mlakv/formats.h"
#include "mlakv/vocabulary.h"
#include "params/prefill_params.h"

namespace mlakv::cuda::prefill {

inline constexpr int kHeads = 64;                    // a block's heads: the wgmma M
inline constexpr int kTileTokens = 64;               // keys a tile, decoded into one key buffer
inline constexpr int kHalfTokens = kTileTokens / 2;  // keys each math warpgroup scores (its wgmma N)
inline constexpr int kKeyBuffers = 2;                // one decoded while the other is multiplied
inline constexpr int kThreads = 3 * 128;
inline constexpr int kRoundTokens = 4;                // records a warp decodes at once (8 lanes each)
inline constexpr int kColumnBlocks = kQueryDim / 64;  // 64-column blocks of a 576-dim row
inline constexpr int kQueryBlockBytes = kHeads * 128;
inline constexpr int kKeyBlockBytes = kTileTokens * 128;
inline constexpr int kProbBytes = kHeads * kTileTokens * 2;  // [64 heads][64 keys] bf16: one 64-column block
inline constexpr int kMaxRecordBytes = 656;                  // the widest record the decoders load (fp8_ds_mla)
inline constexpr int kSharedLimit = 232448;                  // bytes of shared memory a block may opt into on sm_90

/// How a tile's decode is shared and the registers each warpgroup keeps
/// (setmaxnreg; at most 3 x 168 in all): the decoders get what the math
/// warpgroups (128 output and 16 score accumulators) spare. A record whose
/// decode binds on its ALU work (the per-token-scaled NVFP4 one) has each
/// math warp decode kMathTokens of each tile too, between its P x V and its
/// next scores; for the others that lengthened the math warps' chain more
/// than it relieved the decoders (bench/results/h200-prefill-variants.txt).
template <bool kAluBound>
struct DecodeSplit {
  static constexpr int kMathTokens = kAluBound ? 4 : 0;  // records of a tile each math warp decodes
  static constexpr int kDecoderTokens = (kTileTokens - 8 * kMathTokens) / 4;  // each decoder warp's
  static constexpr int kMathRegisters = kAluBound ? 200 : 184;
  static constexpr int kDecoderRegisters = 3 * 168 - 2 * kMathRegisters;
  static constexpr int kWarps = 4 + (kMathTokens > 0 ? 8 : 0);  // warps a tile's decode waits for
  static_assert(kDecoderTokens % kRoundTokens == 0 && kMathTokens % kRoundTokens == 0, "whole rounds");
  static_assert(kDecoderRegisters % 8 == 0, "setmaxnreg's granule");
};

/// The records the kernel reads: token-major records of 512 + 64 values that
/// the decoders load straight from global memory in 16-byte pieces, no wider
/// than fp8_ds_mla's (the others take the decode's kernels).
template <class Codec>
inline constexpr bool kReads = Codec::Spec::kRecordBytes % 16 == 0 && Codec::Spec::kRecordBytes <= kMaxRecordBytes;

/// Whether the kernel reads `format`'s records (kReads of its codec).
bool reads(Format format);

/// Launches the prefill of `p` (a format it reads): a block per (row, 64
/// heads), each walking its row's entries in tiles of 64 keys.
cudaError_t launch(const params::SparsePrefillParams& p, int device, cudaStream_t stream);

}  // namespace mlakv::cuda::prefill
