// SPDX-License-Identifier: Apache-2.0
// The warpgroup sparse decodes' launchers, as the dispatcher sees them. Their
// kernels are sm_90a machine code only (launch_warpgroups.cu and
// launch_wide_tiles.cu, the mlakv_sm90a object library of every build for
// Hopper), so the dispatcher launches them on compute capability 9.0 only.
#pragma once

#include <cuda_runtime.h>

#include "cuda/decode/plan.h"
#include "params/attention_params.h"

namespace mlakv::cuda::warpgroups {

/// Launches the 32-key decode of `p` (built for the NVFP4 records) as `plan`
/// says (blocks of 64 heads per row, plan.splits of them): with more than
/// one split it writes the workspace partials the split-merge kernel combines.
cudaError_t launch(const params::SparseDecodeParams& p, const DecodePlan& plan, int device, cudaStream_t stream);

}  // namespace mlakv::cuda::warpgroups

namespace mlakv::cuda::wide_tiles {

/// Launches the 64-key decode of `p` (built for the records of up to 656
/// bytes; the per-token-scaled one with crossover only) as `plan` says: blocks of 64 heads
/// (kWideTiles; rows of an even number of them in clusters of two:
/// crossover) or plan.block_heads heads with the products transposed
/// (kTransposedProducts). With more than one split a row's splits merge in
/// their cluster where it fits (`merged` is then set), else they write the
/// workspace partials the split-merge kernel combines.
cudaError_t launch(const params::SparseDecodeParams& p, const DecodePlan& plan, int device, cudaStream_t stream,
                   bool& merged);

}  // namespace mlakv::cuda::wide_tiles
