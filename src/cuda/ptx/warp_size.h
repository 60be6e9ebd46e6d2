// SPDX-License-Identifier: Apache-2.0
// The threads of a warp, as a plain constant: the kernels' shapes (read by
// the host planner too) take it from here, without warp.cuh's device code.
#pragma once

namespace mlakv::cuda {

inline constexpr int kWarpSize = 32;

}  // namespace mlakv::cuda
