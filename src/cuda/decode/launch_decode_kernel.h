// SPDX-License-Identifier: Apache-2.0
// How every sparse decode kernel is launched (host code): the kernels take
// (params, units of 64 entries a split) and more dynamic shared memory than
// the default 48 KiB, which each kernel opts into once per device (a call per
// launch would cost host time on every decode step).
#pragma once

#include <cuda_runtime.h>

#include "cuda/per_device.h"
#include "params/attention_params.h"

namespace mlakv::cuda {

/// kKernel's opt-in to `shared_bytes` of dynamic shared memory, made once per device.
template <auto kKernel>
cudaError_t allow_shared_bytes(int shared_bytes, int device) {
  static PerDevice allowed;  // one per kernel
  cudaError_t status = cudaSuccess;
  allowed.get(device, [&] {
    status = cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared_bytes);
    return status == cudaSuccess ? 1 : 0;
  });
  return status;
}

/// The launch of kKernel over `grid` blocks of `threads` with `shared_bytes`
/// of dynamic shared memory, in clusters of `cluster` blocks (1 x 1: none).
struct DecodeLaunch {
  cudaLaunchConfig_t config{};
  cudaLaunchAttribute cluster_attribute{};

  DecodeLaunch(dim3 grid, int threads, int shared_bytes, dim3 cluster, cudaStream_t stream) {
    config.gridDim = grid;
    config.blockDim = dim3(static_cast<unsigned>(threads));
    config.dynamicSmemBytes = static_cast<std::size_t>(shared_bytes);
    config.stream = stream;
    cluster_attribute.id = cudaLaunchAttributeClusterDimension;
    cluster_attribute.val.clusterDim.x = cluster.x;
    cluster_attribute.val.clusterDim.y = cluster.y;
    cluster_attribute.val.clusterDim.z = 1;
    config.attrs = &cluster_attribute;
    config.numAttrs = cluster.x * cluster.y > 1 ? 1 : 0;
  }
  DecodeLaunch(const DecodeLaunch&) = delete;  // config points into it
  DecodeLaunch& operator=(const DecodeLaunch&) = delete;
};

/// Launches kKernel(p, units_per_split) over `grid` blocks of `threads` with
/// `shared_bytes` of dynamic shared memory, in clusters of `cluster` blocks
/// (consecutive along x, then y; 1 x 1: no cluster).
template <auto kKernel>
cudaError_t launch_decode_kernel(dim3 grid, int threads, int shared_bytes, dim3 cluster,
                                 const params::SparseDecodeParams& p, int units_per_split, int device,
                                 cudaStream_t stream) {
  if (const cudaError_t status = allow_shared_bytes<kKernel>(shared_bytes, device); status != cudaSuccess) {
    return status;
  }
  DecodeLaunch launch(grid, threads, shared_bytes, cluster, stream);
  return cudaLaunchKernelEx(&launch.config, kKernel, p, units_per_split);
}

/// How many clusters of `cluster` blocks of kKernel (`threads`, `shared_bytes`)
/// the device holds at once, asked once per device and cluster size (up to
/// kMostBlocks blocks; 0 beyond, or when the runtime cannot tell).
template <auto kKernel, int kMostBlocks>
int resident_clusters(dim3 cluster, int threads, int shared_bytes, int device) {
  static PerDevice counts[kMostBlocks + 1];  // the count + 1, by blocks per cluster
  const unsigned blocks = cluster.x * cluster.y;
  if (blocks > static_cast<unsigned>(kMostBlocks)) return 0;
  if (allow_shared_bytes<kKernel>(shared_bytes, device) != cudaSuccess) return 0;
  return counts[blocks].get(device, [&] {
    DecodeLaunch launch(dim3(cluster.x, cluster.y), threads, shared_bytes, cluster, nullptr);
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, kKernel, &launch.config) != cudaSuccess) {
      (void)cudaGetLastError();  // not sticky: the caller takes the other path
      return 0;
    }
    return clusters + 1;
  }) - 1;
}

}  // namespace mlakv::cuda
