// SPDX-License-Identifier: Apache-2.0
// The 32-key warpgroup sparse decode's launcher, compiled for sm_90a only
// (the mlakv_sm90a object library in CMakeLists.txt): its kernels for the
// NVFP4 records (the FP8 records always take the wide tiles: plan.cpp).
#include "cuda/decode/hopper/launch.h"
#include "cuda/decode/hopper/warpgroups_kernel.cuh"
#include "cuda/decode/launch_decode_kernel.h"

namespace mlakv::cuda::warpgroups {

cudaError_t launch(const params::SparseDecodeParams& p, const DecodePlan& plan, int device, cudaStream_t stream) {
  return codec::visit_codec(p.format, [&]<class Codec>(codec::Tag<Codec>) -> cudaError_t {
    if constexpr (!kFragmentDecode<Codec> || !kFits<Codec::Spec::kRecordBytes>) {
      return cudaErrorNotSupported;  // not built: kernel_for picks this kernel for NVFP4 records only
    } else {
      const auto run = [&]<bool kPartial>() {
        constexpr int kBytes = kSharedBytes<Codec::Spec::kRecordBytes>;
        static_assert(kBytes <= kSharedLimit, "one block fits an SM");
        const std::int64_t blocks_per_row = (p.heads + kHeads - 1) / kHeads;
        const dim3 grid(static_cast<unsigned>(p.rows * blocks_per_row), static_cast<unsigned>(plan.splits));
        return launch_decode_kernel<sparse_mla_decode_warpgroups_kernel<Codec, kPartial>>(
            grid, kThreads, kBytes, dim3(1, 1), p, plan.tiles_per_split, device, stream);
      };
      return plan.splits == 1 ? run.template operator()<false>() : run.template operator()<true>();
    }
  });
}

}  // namespace mlakv::cuda::warpgroups
