// SPDX-License-Identifier: Apache-2.0
// CUDA kernels of the context-parallel steps over the shared arithmetic of
// params/context_parallel.h: one thread per top-k entry for the local slots,
// one warp per (row, head) for the N-way merge.
#include <algorithm>
#include <cmath>

#include "cuda/cuda_backend.h"
#include "cuda/ptx/warp.cuh"

namespace mlakv::cuda {
namespace {

constexpr int kSlotThreads = 256;
constexpr int kMergeWarps = 4;

__global__ void dcp_local_slots_kernel(const params::LocalSlotsParams p) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kSlotThreads + threadIdx.x;
  if (i >= p.rows * p.topk) return;
  const std::int64_t r = i / p.topk;
  const std::int64_t k = i % p.topk;
  p.local_slots[r * p.local_stride_row_elems + k] =
      params::local_slot(p, p.req_id[r], p.indices[r * p.indices_stride_row_elems + k]);
}

__global__ void __launch_bounds__(kMergeWarps* kWarpSize) merge_stacked_kernel(const params::StackedMergeParams p) {
  __shared__ float smem_weights[kMergeWarps][params::kMaxMergeParts];
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kMergeWarps + warp;
  if (i >= p.rows * p.heads) return;  // whole warps leave: no barrier below spans warps
  const std::int64_t r = i / p.heads;
  const std::int64_t h = i % p.heads;
  const float max_lse = params::stacked_max_lse(p, r, h);
  float* weights = smem_weights[warp];
  for (std::int64_t n = lane; n < p.parts; n += kWarpSize) weights[n] = params::stacked_weight(p, n, r, h, max_lse);
  __syncwarp();
  // Every lane sums the weights in the CPU's order, so the sum is the CPU's.
  float sum = 0.0f;
  for (std::int64_t n = 0; n < p.parts; ++n) sum += weights[n];
  params::merge_dims(p, r, h, weights, sum, lane, p.width, kWarpSize);
  if (lane == 0) params::lse_at(p.merged, r, h) = params::merged_lse(max_lse, sum);
}

}  // namespace

cudaError_t dcp_local_slots(const params::LocalSlotsParams& params, cudaStream_t stream) {
  const std::int64_t blocks = (params.rows * params.topk + kSlotThreads - 1) / kSlotThreads;
  dcp_local_slots_kernel<<<static_cast<unsigned>(blocks), kSlotThreads, 0, stream>>>(params);
  return cudaGetLastError();
}

cudaError_t merge_attention_states(const params::StackedMergeParams& params, cudaStream_t stream) {
  const std::int64_t blocks = (params.rows * params.heads + kMergeWarps - 1) / kMergeWarps;
  merge_stacked_kernel<<<static_cast<unsigned>(blocks), kMergeWarps * kWarpSize, 0, stream>>>(params);
  return cudaGetLastError();
}

}  // namespace mlakv::cuda
