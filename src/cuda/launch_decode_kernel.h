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

/// Launches kKernel(p, units_per_split) over `grid` blocks of `threads` with
/// `shared_bytes` of dynamic shared memory, in clusters of `cluster_blocks`
/// consecutive blocks along x (1: no cluster).
template <auto kKernel>
cudaError_t launch_decode_kernel(dim3 grid, int threads, int shared_bytes, unsigned cluster_blocks,
                                 const params::SparseDecodeParams& p, int units_per_split, int device,
                                 cudaStream_t stream) {
  static PerDevice allowed;  // one per kernel
  cudaError_t status = cudaSuccess;
  allowed.get(device, [&] {
    status = cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared_bytes);
    return status == cudaSuccess ? 1 : 0;
  });
  if (status != cudaSuccess) return status;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = static_cast<std::size_t>(shared_bytes);
  config.stream = stream;
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = cluster_blocks;
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = 1;
  config.attrs = &cluster;
  config.numAttrs = cluster_blocks > 1 ? 1 : 0;
  return cudaLaunchKernelEx(&config, kKernel, p, units_per_split);
}

}  // namespace mlakv::cuda
