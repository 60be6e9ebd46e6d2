// SPDX-License-Identifier: Apache-2.0
// The one-block-per-token structure of today's compact writer (b12x), re-created
// for comparison: 128 threads per token, 32 encode one NVFP4 group each, one
// lane does the whole RoPE; byte stores straight to the cache.
#pragma once

#include <cstdint>

#include "codec/nvfp4.h"
#include "format/specs.h"

namespace mlakv_bench {

__global__ void one_block_per_token_368(const std::uint16_t* kv_c, const std::uint16_t* k_pe, const std::int64_t* slots,
                                        std::uint8_t* cache, std::int64_t tokens) {
  using namespace mlakv::codec;
  using Spec = mlakv::format::FormatNvfp4DsMlaFp8Rope;
  const std::int64_t t = blockIdx.x;
  const std::int64_t slot = slots[t];
  if (slot < 0 || slot >= tokens) return;
  std::uint8_t* record = cache + slot * Spec::kRecordBytes;
  const int tid = static_cast<int>(threadIdx.x);
  if (tid < 32) {
    encode_latent_group_static<InputDtype::kBf16>(tid, kv_c + t * 512 + tid * 16, record);
  } else if (tid == 32) {
    float amax = 0.0f;
    for (int i = 0; i < 64; ++i) amax = fold_amax(amax, load_input<InputDtype::kBf16>(k_pe[t * 64 + i]));
    const float rs = rope_scale(amax);
    for (int i = 0; i < 64; ++i) {
      encode_rope_scaled_e4m3<InputDtype::kBf16, 1>(k_pe + t * 64 + i, rs, record + Spec::kRope.offset + i);
    }
    store_f32(record + Spec::kRopeScale.offset, rs);
    zero_bytes(record + Spec::kPad.offset, Spec::kPad.bytes);
  }
}

}  // namespace mlakv_bench
