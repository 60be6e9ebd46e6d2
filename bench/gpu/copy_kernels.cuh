// SPDX-License-Identifier: Apache-2.0
// The harness's own kernels: the copy reference, the L2 flush (a read of a
// large buffer) and the device-side input fill.
#pragma once

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

namespace mlakv_bench {

// 16 bytes per thread, grid-stride: the copy kernel the writers and readers are held against.
__global__ void copy16_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    dst[i] = src[i];
  }
}

// Reads `n` 16-byte words; the sink store (never taken in practice) keeps the loads alive.
__global__ void read_kernel(const uint4* __restrict__ src, std::size_t n, unsigned* sink) {
  unsigned acc = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    acc ^= src[i].x;
  }
  if (acc == 0x12345678u) *sink = acc;
}

// Roughly normal bf16 values (a sum of two uniforms from a hash), generated on the device.
__global__ void fill_bf16_kernel(std::uint16_t* out, std::size_t n, std::uint32_t seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    const float u = (h & 0xFFFF) / 65536.0f + (h >> 16) / 65536.0f - 1.0f;
    out[i] = __bfloat16_as_ushort(__float2bfloat16_rn(2.0f * u));
  }
}

}  // namespace mlakv_bench
