// SPDX-License-Identifier: Apache-2.0
// The DeepSeek V4 family's sparse decode on CUDA (d_qk 512: every V4-family
// format, main and extra cache, sink): the entry the decode dispatcher calls
// for a call whose qk_dim is 512, and the workspace it may use.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "params/attention_params.h"

namespace mlakv::cuda::v4 {

/// Launches the decode (and, with a workspace that holds its split plan, the
/// merge of the splits) on `stream`: no allocation, no synchronization.
cudaError_t launch_decode(const params::SparseAttentionParams& p, cudaStream_t stream);

/// Bytes of split partials the decode uses for R rows, H heads and K + K_extra entries on `device`.
std::int64_t decode_workspace_bytes(std::int64_t rows, std::int64_t heads, std::int64_t entries, int device);

}  // namespace mlakv::cuda::v4
