// SPDX-License-Identifier: Apache-2.0
// Uses only the installed public headers: writes one compact record, reads it back.
#include <cmath>
#include <cstdio>
#include <vector>

#include "mlakv/mlakv.h"

int main() {
  std::vector<std::uint16_t> kv_c(512, 0x40C0);  // bf16 6.0: group scale 1, exact
  std::vector<std::uint16_t> k_pe(64, 0x4000);   // bf16 2.0
  std::vector<std::uint8_t> cache(368);
  std::vector<std::int64_t> slots = {0};
  const auto& info = mlakv::format_info(mlakv::Format::kNvfp4DsMlaFp8Rope);
  mlakv::concat_and_cache_nvfp4_mla_fp8_rope(
      mlakv::make_view(kv_c.data(), mlakv::DType::kBFloat16, {1, 512}),
      mlakv::make_view(k_pe.data(), mlakv::DType::kBFloat16, {1, 64}),
      mlakv::make_view(cache.data(), mlakv::DType::kUInt8, {1, 1, info.record_bytes}),
      mlakv::make_view(slots.data(), mlakv::DType::kInt64, {1}));
  std::vector<float> kv_out(512), pe_out(64);
  mlakv::gather_records(info.format, mlakv::make_view(cache.data(), mlakv::DType::kUInt8, {1, 1, info.record_bytes}),
                        mlakv::make_view(slots.data(), mlakv::DType::kInt64, {1}),
                        mlakv::make_view(kv_out.data(), mlakv::DType::kFloat32, {1, 512}),
                        mlakv::make_view(pe_out.data(), mlakv::DType::kFloat32, {1, 64}));
  const bool ok = kv_out[0] == 6.0f && std::fabs(pe_out[63] - 2.0f) < 1e-3f;
  std::printf("mlakv %s consumer: %s\n", mlakv::kVersion, ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
