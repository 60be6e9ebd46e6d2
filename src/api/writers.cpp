// SPDX-License-Identifier: Apache-2.0
// The public writers: resolve the format, validate, run the backend of the
// arrays' device.
#include "mlakv/writers.h"

#include <string>

#include "api/dispatch.h"
#include "api/resolve_format.h"
#include "api/validate.h"
#include "mlakv/checks.h"

namespace mlakv {
namespace {

// Runs validated params on the backend of the arrays' device; no tokens is a no-op.
void run_write(const api::Check& check, const params::WriteParams& params, const Device& device, StreamHandle stream) {
  if (params.num_tokens == 0) return;
  api::run_on_device(check, device, stream, MLAKV_BACKENDS(write_records, params));
}

// Each entry point's checks: the format it writes and the params of its views.
struct Write {
  api::Check check;
  params::WriteParams params;
};

// The stock entry point's engine-shaped arguments: a typed cache as its bytes,
// k_pe (T, 1, 64) squeezed, a column of slots flattened; the format from the
// engine's name and the record width (upstream vLLM's nvfp4_ds_mla is 352
// bytes, the B12X backend's 432); "auto" follows kv_c.
Write stock_write(const TensorView& kv_c, const TensorView& k_pe, const TensorView& kv_cache,
                  const TensorView& slot_mapping, std::string_view kv_cache_dtype, const TensorView* scale) {
  Write w{api::Check("concat_and_cache_mla", kv_cache_dtype), {}};
  const TensorView cache = api::cache_as_bytes(kv_cache);
  const std::int64_t record_bytes = cache.ndim == 3 ? cache.shape[2] : 0;
  const Format format = api::resolve_format(w.check, "kv_cache", kv_cache_dtype, record_bytes, false, false,
                                            kv_c.dtype == DType::kFloat16 ? DType::kFloat16 : DType::kBFloat16);
  w.check.set_format(format_info(format).id);
  w.params = api::validate_write(w.check, format, kv_c, api::squeeze_middle_unit_dim(k_pe), cache,
                                 api::flatten_column(slot_mapping), scale);
  return w;
}

// The compact writer takes the same engine shapes as the stock one.
Write compact_write(const TensorView& kv_c, const TensorView& k_pe, const TensorView& kv_cache,
                    const TensorView& slot_mapping, const TensorView* scale, bool per_token_scale) {
  const Format format = per_token_scale ? Format::kNvfp4DsMlaFp8RopePts : Format::kNvfp4DsMlaFp8Rope;
  Write w{api::Check("concat_and_cache_nvfp4_mla_fp8_rope", format_info(format).id), {}};
  w.params = api::validate_write(w.check, format, kv_c, api::squeeze_middle_unit_dim(k_pe), kv_cache,
                                 api::flatten_column(slot_mapping), scale);
  return w;
}

}  // namespace

void write_records(Format format, const TensorView& kv_c, const TensorView& k_pe, const TensorView& kv_cache,
                   const TensorView& slot_mapping, const TensorView* scale, StreamHandle stream) {
  const api::Check check("write_records", format_info(format).id);
  run_write(check, api::validate_write(check, format, kv_c, k_pe, kv_cache, slot_mapping, scale), kv_c.device, stream);
}

void concat_and_cache_mla(const TensorView& kv_c, const TensorView& k_pe, const TensorView& kv_cache,
                          const TensorView& slot_mapping, std::string_view kv_cache_dtype, const TensorView* scale,
                          StreamHandle stream) {
  const Write w = stock_write(kv_c, k_pe, kv_cache, slot_mapping, kv_cache_dtype, scale);
  run_write(w.check, w.params, kv_c.device, stream);
}

void check_concat_and_cache_mla(const TensorView& kv_c, const TensorView& k_pe, const TensorView& kv_cache,
                                const TensorView& slot_mapping, std::string_view kv_cache_dtype,
                                const TensorView* scale) {
  (void)stock_write(kv_c, k_pe, kv_cache, slot_mapping, kv_cache_dtype, scale);
}

void concat_and_cache_nvfp4_mla_fp8_rope(const TensorView& kv_c, const TensorView& k_pe, const TensorView& kv_cache,
                                         const TensorView& slot_mapping, const TensorView* scale, bool per_token_scale,
                                         StreamHandle stream) {
  const Write w = compact_write(kv_c, k_pe, kv_cache, slot_mapping, scale, per_token_scale);
  run_write(w.check, w.params, kv_c.device, stream);
}

void check_concat_and_cache_nvfp4_mla_fp8_rope(const TensorView& kv_c, const TensorView& k_pe,
                                               const TensorView& kv_cache, const TensorView& slot_mapping,
                                               const TensorView* scale, bool per_token_scale) {
  (void)compact_write(kv_c, k_pe, kv_cache, slot_mapping, scale, per_token_scale);
}

}  // namespace mlakv
