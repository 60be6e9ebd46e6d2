// SPDX-License-Identifier: Apache-2.0
// The split-merge kernel: the splits of one (row, head), written to the
// workspace by a decode kernel, merged by their lse; 4 output dims a thread.
// It is launched as a programmatic dependent of the decode kernel (sm_90+):
// its blocks start while the decode's last blocks run and wait at
// griddepcontrol.wait until the decode grid has finished and its partials are
// visible, so no launch gap lies between the two. Every split's lse is loaded
// at once (a thread each) and the partial rows kCombineBatch splits at a
// time, all in flight together: on one row the merge is a chain of memory
// round trips. Batches of 32 for rows of more than 16 splits, of 16 up to 16
// splits (docs/kernel_history.md).
#include <cmath>

#include "cuda/decode/attention_result.cuh"
#include "cuda/decode/merge_splits.h"
#include "cuda/decode/plan.h"
#include "cuda/ptx/warp.cuh"

namespace mlakv::cuda {
namespace {

constexpr int kCombineThreads = 128;
constexpr int kShortCombineBatch = 16;
constexpr int kLongCombineBatch = 32;

template <int kCombineBatch>
__global__ void __launch_bounds__(kCombineThreads) merge_splits_kernel(const params::SparseDecodeParams p, int splits) {
  static_assert(kMaxSplits <= kCombineThreads, "a thread per split loads its lse");
  __shared__ float weight[kMaxSplits];
  __shared__ float warp_max[kCombineThreads / kWarpSize];
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) / p.heads;
  const std::int64_t head = static_cast<std::int64_t>(blockIdx.x) % p.heads;
  const auto* partial_out = static_cast<const float*>(p.workspace);
  const auto* partial_lse = reinterpret_cast<const float*>(static_cast<const std::uint8_t*>(p.workspace) +
                                                           lse_offset_bytes(splits, p.rows, p.heads));
  const auto index = [&](int s) { return (static_cast<std::int64_t>(s) * p.rows + row) * p.heads + head; };
  const int t = static_cast<int>(threadIdx.x);
  const int d = 4 * t;
  asm volatile("griddepcontrol.wait;" ::: "memory");  // the decode grid is complete
  const float lse = t < splits ? partial_lse[index(t)] : -INFINITY;
  float4 batch[kCombineBatch];
#pragma unroll
  for (int j = 0; j < kCombineBatch; ++j) {
    if (j < splits) batch[j] = *reinterpret_cast<const float4*>(partial_out + index(j) * kValueDim + d);
  }
  float m = warp_group_max<kWarpSize>(lse);
  if (t % kWarpSize == 0) warp_max[t / kWarpSize] = m;
  __syncthreads();
#pragma unroll
  for (int w = 0; w < kCombineThreads / kWarpSize; ++w) m = fmaxf(m, warp_max[w]);
  if (t < splits) weight[t] = m == -INFINITY ? 0.0f : expf(lse - m);
  __syncthreads();
  MergedDims merged;
  for (int s0 = 0; s0 < splits; s0 += kCombineBatch) {
    if (s0 > 0) {
#pragma unroll
      for (int j = 0; j < kCombineBatch; ++j) {
        if (s0 + j < splits) batch[j] = *reinterpret_cast<const float4*>(partial_out + index(s0 + j) * kValueDim + d);
      }
    }
#pragma unroll
    for (int j = 0; j < kCombineBatch; ++j) {
      if (s0 + j >= splits) break;
      merged.add(weight[s0 + j], batch[j]);
    }
  }
  merged.store(p, row, head, d, m);
}

}  // namespace

cudaError_t launch_merge_splits(const params::SparseDecodeParams& p, int splits, cudaStream_t stream) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(p.rows * p.heads));
  config.blockDim = dim3(kCombineThreads);
  config.stream = stream;
  cudaLaunchAttribute attribute = {};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  return splits > kShortCombineBatch ? cudaLaunchKernelEx(&config, merge_splits_kernel<kLongCombineBatch>, p, splits)
                                     : cudaLaunchKernelEx(&config, merge_splits_kernel<kShortCombineBatch>, p, splits);
}

}  // namespace mlakv::cuda
