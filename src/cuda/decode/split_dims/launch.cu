// SPDX-License-Identifier: Apache-2.0
// The split-dims sparse decode's launcher: one instantiation per NVFP4
// record (its fragment decode).
#include "cuda/decode/launch_decode_kernel.h"
#include "cuda/decode/split_dims/kernel.cuh"
#include "cuda/decode/split_dims/launch.h"

namespace mlakv::cuda::split_dims {

template <class Codec>
cudaError_t launch(const params::SparseDecodeParams& p, const DecodePlan& plan, int device, cudaStream_t stream) {
  const auto run = [&]<int kGroups, bool kPartial>() {
    constexpr int kHeads = 16 * kGroups;
    const std::int64_t blocks_per_row = (p.heads + kHeads - 1) / kHeads;
    const dim3 grid(static_cast<unsigned>(p.rows * blocks_per_row), static_cast<unsigned>(plan.splits));
    return launch_decode_kernel<sparse_mla_decode_split_dims_kernel<Codec, kGroups, kPartial>>(
        grid, kThreads, sizeof(Storage<kGroups, Codec::Spec::kRecordBytes>), dim3(1, 1), p, plan.tiles_per_split,
        device, stream);
  };
  const auto run_groups = [&]<bool kPartial>() {
    return p.heads <= 16 ? run.template operator()<1, kPartial>() : run.template operator()<2, kPartial>();
  };
  return plan.splits == 1 ? run_groups.template operator()<false>() : run_groups.template operator()<true>();
}

template cudaError_t launch<codec::CodecNvfp4DsMla>(const params::SparseDecodeParams&, const DecodePlan&, int,
                                                    cudaStream_t);
template cudaError_t launch<codec::CodecNvfp4DsMlaFp8Rope>(const params::SparseDecodeParams&, const DecodePlan&, int,
                                                           cudaStream_t);
template cudaError_t launch<codec::CodecNvfp4DsMlaFp8RopePts>(const params::SparseDecodeParams&, const DecodePlan&, int,
                                                              cudaStream_t);
template cudaError_t launch<codec::CodecNvfp4Fp8DsMla>(const params::SparseDecodeParams&, const DecodePlan&, int,
                                                       cudaStream_t);

}  // namespace mlakv::cuda::split_dims
