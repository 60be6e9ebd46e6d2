// SPDX-License-Identifier: Apache-2.0
// The split-dims sparse decode's launcher: its kernels for the NVFP4 records
// (their fragment decode).
#include "cuda/decode/launch_decode_kernel.h"
#include "cuda/decode/split_dims/kernel.cuh"
#include "cuda/decode/split_dims/launch.h"

namespace mlakv::cuda::split_dims {

cudaError_t launch(const params::SparseDecodeParams& p, const DecodePlan& plan, int device, cudaStream_t stream) {
  return codec::visit_codec(p.format, [&]<class Codec>(codec::Tag<Codec>) -> cudaError_t {
    if constexpr (!kFragmentDecode<Codec>) {
      return cudaErrorNotSupported;  // not built: kernel_for picks this kernel for NVFP4 records only
    } else {
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
  });
}

}  // namespace mlakv::cuda::split_dims
