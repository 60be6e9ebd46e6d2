// SPDX-License-Identifier: Apache-2.0
// The 32-bit shared-state-space address PTX instructions take for a pointer
// into shared memory.
#pragma once

#include <cstdint>

namespace mlakv::cuda {

__device__ __forceinline__ std::uint32_t shared_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

}  // namespace mlakv::cuda
