// SPDX-License-Identifier: Apache-2.0
// The split-merge kernel's launcher (merge_splits.cu): the dispatcher runs it
// after a decode kernel whose splits wrote the workspace.
#pragma once

#include <cuda_runtime.h>

#include "params/attention_params.h"

namespace mlakv::cuda {

/// Launches the merge of `splits` workspace partials into p.out and p.lse as
/// a programmatic dependent of the decode kernel just launched on `stream`.
cudaError_t launch_merge_splits(const params::SparseDecodeParams& p, int splits, cudaStream_t stream);

}  // namespace mlakv::cuda
