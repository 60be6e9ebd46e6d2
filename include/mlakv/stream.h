// SPDX-License-Identifier: Apache-2.0
// StreamHandle: a CUDA stream without including CUDA headers.
#pragma once

struct CUstream_st;

namespace mlakv {

/// The same type as cudaStream_t (pass one directly); nullptr is the legacy
/// default stream. Ignored for CPU arrays.
using StreamHandle = CUstream_st*;

}  // namespace mlakv
