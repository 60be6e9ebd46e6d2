// SPDX-License-Identifier: Apache-2.0
// The public writers and reader: resolve the format, validate, run the backend.
#include "mlakv/kv_cache.h"

#include <array>
#include <string>

#include "api/validate.h"
#include "cpu/cpu_backend.h"

namespace mlakv {
namespace {

struct EngineDtype {
  std::string_view name;
  Format format;
};

// The engine's kv_cache_dtype strings; "auto" is resolved by input dtype.
constexpr std::array<EngineDtype, 5> kEngineDtypes = {{
    {"fp8", Format::kFp8E4m3},
    {"fp8_e4m3", Format::kFp8E4m3},
    {"fp8_ds_mla", Format::kFp8DsMla},
    {"nvfp4_ds_mla", Format::kNvfp4DsMla},
    {"nvfp4_fp8_ds_mla", Format::kNvfp4Fp8DsMla},
}};

Format resolve_engine_dtype(const api::Check& check, std::string_view kv_cache_dtype, const TensorView& kv_c) {
  if (kv_cache_dtype == "auto") return kv_c.dtype == DType::kFloat16 ? Format::kFp16 : Format::kBf16;
  std::string accepted = "auto";
  for (const EngineDtype& e : kEngineDtypes) {
    if (e.name == kv_cache_dtype) return e.format;
    accepted += ", ";
    accepted += e.name;
  }
  check.fail(ErrorCode::kValue, "kv_cache_dtype", "must be one of " + accepted, "'" + std::string(kv_cache_dtype) + "'");
}

void run_write(const kernels::WriteParams& params) {
  if (params.num_tokens == 0) return;
  cpu::write_records(params);
}

}  // namespace

void write_records(Format format, const TensorView& kv_c, const TensorView& k_pe, const TensorView& kv_cache,
                   const TensorView& slot_mapping, const TensorView* scale) {
  const api::Check check("write_records", format_info(format).id);
  run_write(api::validate_write(check, format, kv_c, k_pe, kv_cache, slot_mapping, scale));
}

void concat_and_cache_mla(const TensorView& kv_c, const TensorView& k_pe, const TensorView& kv_cache,
                          const TensorView& slot_mapping, std::string_view kv_cache_dtype, const TensorView* scale) {
  api::Check check("concat_and_cache_mla", kv_cache_dtype);
  const Format format = resolve_engine_dtype(check, kv_cache_dtype, kv_c);
  check.set_format(format_info(format).id);
  run_write(api::validate_write(check, format, kv_c, api::squeeze_middle_unit_dim(k_pe), kv_cache,
                                api::flatten_column(slot_mapping), scale));
}

void concat_and_cache_nvfp4_mla_fp8_rope(const TensorView& kv_c, const TensorView& k_pe, const TensorView& kv_cache,
                                         const TensorView& slot_mapping, const TensorView* scale,
                                         bool per_token_scale) {
  const Format format = per_token_scale ? Format::kNvfp4DsMlaFp8RopePts : Format::kNvfp4DsMlaFp8Rope;
  const api::Check check("concat_and_cache_nvfp4_mla_fp8_rope", format_info(format).id);
  run_write(api::validate_write(check, format, kv_c, k_pe, kv_cache, slot_mapping, scale));
}

void gather_records(Format format, const TensorView& kv_cache, const TensorView& slots, const TensorView& kv_c_out,
                    const TensorView& k_pe_out, const GatherOptions& options) {
  const api::Check check("gather_records", format_info(format).id);
  const kernels::GatherParams params = api::validate_gather(check, format, kv_cache, slots, kv_c_out, k_pe_out, options);
  if (params.num_slots == 0) return;
  cpu::gather_records(params);
}

}  // namespace mlakv
