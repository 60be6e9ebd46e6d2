// SPDX-License-Identifier: Apache-2.0
// MlaKvCacheWriter and this build's writer registry.
#include "mlakv/mla_kv_cache_writer.h"

#include <string>

#include "api/resolve_format.h"
#include "api/validate.h"
#include "mlakv/checks.h"
#include "mlakv/error.h"
#include "mlakv/formats.h"
#include "mlakv/writers.h"

namespace mlakv::engine {
namespace {

// Whether an engine's kv_cache_dtype names a compact (KV_FP8_ROPE=1) record
// at all: the registry's engine names say ("nvfp4_ds_mla").
bool names_compact_record(std::string_view kv_cache_dtype) {
  for (const FormatInfo& info : formats()) {
    for (const EngineName& n : info.engine_names) {
      if (n.fp8_rope && n.kv_cache_dtype == kv_cache_dtype) return true;
    }
  }
  return false;
}

class BuiltInRegistry final : public WriterRegistry {
 public:
  StockWriter stock_writer() const override { return &concat_and_cache_mla; }
  CompactWriter compact_writer() const override { return &concat_and_cache_nvfp4_mla_fp8_rope; }
};

}  // namespace

const WriterRegistry& default_registry() {
  static const BuiltInRegistry registry;
  return registry;
}

MlaKvCacheWriter::MlaKvCacheWriter(MlaKvCacheWriterConfig config, const WriterRegistry& registry)
    : config_(std::move(config)), stock_(registry.stock_writer()) {
  if (config_.fp8_rope && names_compact_record(config_.kv_cache_dtype)) {
    compact_ = registry.compact_writer();  // the only lookup; disabled writers never make it
    if (compact_ == nullptr) throw Error(ErrorCode::kUnsupported, std::string(kCompactUnavailable));
  }
}

void MlaKvCacheWriter::route(const TensorView& kv_c, const TensorView& k_pe, const TensorView& kv_cache,
                             const TensorView& slot_mapping, std::string_view kv_cache_dtype, const TensorView* k_scale,
                             StreamHandle stream, bool run) const {
  if (numel(kv_cache) == 0) return;
  if (compact_ == nullptr) {
    if (run) {
      stock_(kv_c, k_pe, kv_cache, slot_mapping, kv_cache_dtype, k_scale, stream);
    } else {
      check_concat_and_cache_mla(kv_c, k_pe, kv_cache, slot_mapping, kv_cache_dtype, k_scale);
    }
    return;
  }
  if (!names_compact_record(kv_cache_dtype)) {
    throw Error(ErrorCode::kValue,
                "KV_FP8_ROPE writer reached a non-NVFP4 cache: '" + std::string(kv_cache_dtype) + "'");
  }
  // The same resolver as the stock writer's: the switches pick the compact record.
  const api::Check check("MlaKvCacheWriter::update", kv_cache_dtype);
  const Format format =
      api::resolve_format(check, "kv_cache", kv_cache_dtype, kv_cache.ndim == 3 ? kv_cache.shape[2] : 0, true,
                          config_.per_token_scale, DType::kOther);
  const bool pts = format == Format::kNvfp4DsMlaFp8RopePts;
  const TensorView pe = api::squeeze_middle_unit_dim(k_pe);
  const TensorView slots = api::flatten_column(slot_mapping);  // the stock writer's rules, for any registry
  if (run) {
    compact_(kv_c, pe, kv_cache, slots, k_scale, pts, stream);
  } else {
    check_concat_and_cache_nvfp4_mla_fp8_rope(kv_c, pe, kv_cache, slots, k_scale, pts);
  }
}

void MlaKvCacheWriter::update(const TensorView& kv_c, const TensorView& k_pe, const TensorView& kv_cache,
                              const TensorView& slot_mapping, std::string_view kv_cache_dtype,
                              const TensorView* k_scale, StreamHandle stream) const {
  route(kv_c, k_pe, kv_cache, slot_mapping, kv_cache_dtype, k_scale, stream, true);
}

void MlaKvCacheWriter::check_update(const TensorView& kv_c, const TensorView& k_pe, const TensorView& kv_cache,
                                    const TensorView& slot_mapping, std::string_view kv_cache_dtype,
                                    const TensorView* k_scale) const {
  route(kv_c, k_pe, kv_cache, slot_mapping, kv_cache_dtype, k_scale, nullptr, false);
}

void MlaKvCacheWriter::update_gathered(const TensorView& gathered_cache, const TensorView& kv_c, const TensorView& k_pe,
                                       const TensorView& slots, const TensorView* k_scale, StreamHandle stream) const {
  update(kv_c, k_pe, gathered_cache, slots, config_.kv_cache_dtype, k_scale, stream);
}

}  // namespace mlakv::engine
