// SPDX-License-Identifier: Apache-2.0
// The split-dims sparse decode's launcher, as the dispatcher sees it.
#pragma once

#include <cuda_runtime.h>

#include "cuda/decode/plan.h"
#include "params/attention_params.h"

namespace mlakv::cuda::split_dims {

/// Launches the decode of `p` (built for the NVFP4 records (their fragment decode)) as `plan` says:
/// with more than one split its blocks write the workspace partials the
/// split-merge kernel combines.
cudaError_t launch(const params::SparseDecodeParams& p, const DecodePlan& plan, int device, cudaStream_t stream);

}  // namespace mlakv::cuda::split_dims
