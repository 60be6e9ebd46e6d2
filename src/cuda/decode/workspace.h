// SPDX-License-Identifier: Apache-2.0
// The sparse decode's workspace: the float32 partial rows of a call's splits,
// [splits, R, H, 512], then their lse, [splits, R, H]. The decode kernels
// write it, the split-merge kernel reads it, and the planner sizes it.
#pragma once

#include <cstdint>

#include "format/hd.h"
#include "mlakv/vocabulary.h"

namespace mlakv::cuda {

/// Byte offset of the partial lse in the workspace.
MLAKV_HD std::int64_t lse_offset_bytes(std::int64_t splits, std::int64_t rows, std::int64_t heads) {
  return splits * rows * heads * kValueDim * static_cast<std::int64_t>(sizeof(float));
}

/// Bytes of the workspace of `splits` splits (none for one).
MLAKV_HD std::int64_t split_workspace_bytes(std::int64_t splits, std::int64_t rows, std::int64_t heads) {
  if (splits <= 1) return 0;
  return lse_offset_bytes(splits, rows, heads) + splits * rows * heads * static_cast<std::int64_t>(sizeof(float));
}

}  // namespace mlakv::cuda
