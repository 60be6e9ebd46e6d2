// SPDX-License-Identifier: Apache-2.0
// The one-block-per-token structure of b12x's compact writer (the 368-byte
// record, KV_FP8_ROPE=1), re-created for comparison: 128 threads per token, 32
// encode one NVFP4 group each, one lane does the whole RoPE; byte stores
// straight to the cache. It encodes as b12x does (docs/ABI.md, Notes): scales
// and codes from products with approximate reciprocals, values through CUDA's
// own conversions, not through mlakv's codecs, which are internal (the
// benchmark links the public library only). Its bytes can differ from mlakv's
// where a value sits on a rounding boundary: it is timed, never compared.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "mlakv/formats.h"

namespace mlakv_bench {

// Where the 368-byte record's fields lie, read from the public registry.
struct Record368 {
  int record_bytes;
  int codes;         // 32 groups of 8 packed E2M1 bytes
  int group_scales;  // 32 E4M3 bytes
  int rope_scale;    // f32
  int pad, pad_bytes;
  int rope;  // 64 E4M3 bytes
};

inline Record368 record_368() {
  const mlakv::FormatInfo& info = mlakv::format_info(mlakv::Format::kNvfp4DsMlaFp8Rope);
  auto field = [&](std::string_view name) -> const mlakv::FieldInfo& {
    for (const mlakv::FieldInfo& f : info.fields) {
      if (f.name == name) return f;
    }
    std::fprintf(stderr, "%s has no field %.*s\n", info.id.data(), static_cast<int>(name.size()), name.data());
    std::exit(1);
  };
  return {info.record_bytes,   field("latent_codes").offset, field("group_scales").offset, field("rope_scale").offset,
          field("pad").offset, field("pad").bytes,           field("rope").offset};
}

__device__ __forceinline__ float rcp_approx(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

__device__ __forceinline__ float bf16_value(std::uint16_t bits) { return __bfloat162float(__ushort_as_bfloat16(bits)); }

__device__ __forceinline__ std::uint8_t e4m3_code(float x) {
  return static_cast<std::uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

__device__ __forceinline__ std::uint8_t e2m1_code(float x) {
  return static_cast<std::uint8_t>(__nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest));
}

__global__ void one_block_per_token_368(const std::uint16_t* kv_c, const std::uint16_t* k_pe, const std::int64_t* slots,
                                        std::uint8_t* cache, std::int64_t tokens, Record368 layout) {
  const std::int64_t t = blockIdx.x;
  const std::int64_t slot = slots[t];
  if (slot < 0 || slot >= tokens) return;
  std::uint8_t* record = cache + slot * layout.record_bytes;
  const int tid = static_cast<int>(threadIdx.x);
  if (tid < 32) {  // group tid of the latent: 16 values, one E4M3 scale
    float x[16];
    float amax = 0.0f;
    for (int i = 0; i < 16; ++i) {
      x[i] = bf16_value(kv_c[t * 512 + tid * 16 + i]);
      amax = fmaxf(amax, fabsf(x[i]));
    }
    const std::uint8_t sbyte = e4m3_code(amax * rcp_approx(6.0f));
    const float s = __half2float(__half(__nv_cvt_fp8_to_halfraw(sbyte, __NV_E4M3)));
    const float inv_s = s == 0.0f ? 0.0f : rcp_approx(s);
    for (int i = 0; i < 8; ++i) {  // value 2i in the low nibble
      record[layout.codes + tid * 8 + i] =
          static_cast<std::uint8_t>(e2m1_code(x[2 * i] * inv_s) | (e2m1_code(x[2 * i + 1] * inv_s) << 4));
    }
    record[layout.group_scales + tid] = sbyte;
  } else if (tid == 32) {  // the whole RoPE: its scale, then 64 codes
    float amax = 0.0f;
    for (int i = 0; i < 64; ++i) amax = fmaxf(amax, fabsf(bf16_value(k_pe[t * 64 + i])));
    const float rs = amax * (1.0f / 448.0f);
    const float inv_rs = rs == 0.0f ? 0.0f : rcp_approx(rs);
    for (int i = 0; i < 64; ++i) record[layout.rope + i] = e4m3_code(bf16_value(k_pe[t * 64 + i]) * inv_rs);
    *reinterpret_cast<float*>(record + layout.rope_scale) = rs;
    for (int i = 0; i < layout.pad_bytes; ++i) record[layout.pad + i] = 0;
  }
}

}  // namespace mlakv_bench
