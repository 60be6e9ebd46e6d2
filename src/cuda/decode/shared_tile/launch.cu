// SPDX-License-Identifier: Apache-2.0
// The shared-tile sparse decode's launcher: its kernels for every 512 + 64
// record (each one takes this kernel where no other runs).
#include "cuda/decode/launch_decode_kernel.h"
#include "cuda/decode/shared_tile/kernel.cuh"
#include "cuda/decode/shared_tile/launch.h"

namespace mlakv::cuda::shared_tile {

cudaError_t launch(const params::SparseDecodeParams& p, const DecodePlan& plan, int device, cudaStream_t stream) {
  return codec::visit_codec(p.format, [&]<class Codec>(codec::Tag<Codec>) {
    const auto run = [&]<int kGroups, bool kPartial>() {
      using Shape = BlockShape<kGroups>;
      const std::int64_t blocks_per_row = (p.heads + Shape::kHeads - 1) / Shape::kHeads;
      const dim3 grid(static_cast<unsigned>(p.rows * blocks_per_row), static_cast<unsigned>(plan.splits));
      return launch_decode_kernel<sparse_mla_decode_shared_tile_kernel<Codec, kGroups, kPartial>>(
          grid, Shape::kThreads, sizeof(SharedStorage<kGroups>), dim3(1, 1), p, plan.tiles_per_split, device, stream);
    };
    const auto run_groups = [&]<bool kPartial>() {
      switch (groups_for(p.heads)) {
        case 1:
          return run.template operator()<1, kPartial>();
        case 2:
          return run.template operator()<2, kPartial>();
        default:
          return run.template operator()<4, kPartial>();
      }
    };
    return plan.splits == 1 ? run_groups.template operator()<false>() : run_groups.template operator()<true>();
  });
}

}  // namespace mlakv::cuda::shared_tile
