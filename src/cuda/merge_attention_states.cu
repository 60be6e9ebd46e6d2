// SPDX-License-Identifier: Apache-2.0
// The CUDA merge of two attention states (out, lse) over the arithmetic of
// params/merge.h, which the CPU merge runs too: one block per (row, head).
#include "cuda/cuda_backend.h"
#include "params/merge.h"

namespace mlakv::cuda {
namespace {

constexpr int kMergeThreads = 128;

__global__ void __launch_bounds__(kMergeThreads) merge_kernel(const params::MergeParams p) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) / p.heads;
  const std::int64_t head = static_cast<std::int64_t>(blockIdx.x) % p.heads;
  const params::MergeWeights w = params::merge_weights(params::lse_at(p.a, row, head), params::lse_at(p.b, row, head));
  const std::int64_t a = params::out_offset(p.a, row, head);
  const std::int64_t b = params::out_offset(p.b, row, head);
  const std::int64_t out = params::out_offset(p.merged, row, head);
  for (std::int64_t d = threadIdx.x; d < p.width; d += kMergeThreads) {
    params::store_state(p, p.merged, out + d,
                        params::merged_value(w, params::load_state(p, p.a, a + d), params::load_state(p, p.b, b + d)));
  }
  __syncthreads();  // every thread read lse before it may be overwritten (lse may alias lse_a)
  if (threadIdx.x == 0) params::lse_at(p.merged, row, head) = params::merged_lse(w);
}

}  // namespace

cudaError_t merge_attention_states(const params::MergeParams& p, cudaStream_t stream) {
  if (p.rows == 0 || p.heads == 0) return cudaSuccess;
  merge_kernel<<<static_cast<unsigned>(p.rows * p.heads), kMergeThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace mlakv::cuda
