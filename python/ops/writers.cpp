// SPDX-License-Identifier: Apache-2.0
// The writers' run functions: concat_and_cache_mla (vLLM's op), the packaged
// compact writer, and the engine seam's update (mlakv/mla_kv_cache_writer.h).
#include "mlakv/writers.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "mlakv/checks.h"
#include "mlakv/mla_kv_cache_writer.h"
#include "run_functions.h"

namespace mlakv::bindings {
namespace {

// One seam per configuration, built on first use and kept: a construction that throws is not kept.
const engine::MlaKvCacheWriter& seam(std::string_view kv_cache_dtype, bool fp8_rope, bool per_token_scale) {
  static std::mutex mutex;
  static std::map<std::tuple<std::string, bool, bool>, std::unique_ptr<engine::MlaKvCacheWriter>> seams;
  const std::lock_guard<std::mutex> lock(mutex);
  auto key = std::make_tuple(std::string(kv_cache_dtype), fp8_rope, per_token_scale);
  auto found = seams.find(key);
  if (found == seams.end()) {
    auto writer = std::make_unique<engine::MlaKvCacheWriter>(
        engine::MlaKvCacheWriterConfig{std::get<0>(key), fp8_rope, per_token_scale});
    found = seams.emplace(std::move(key), std::move(writer)).first;
  }
  return *found->second;
}

}  // namespace

std::int64_t run_concat_and_cache_mla(const OpCall& c) {
  const TensorView &kv_c = c.tensor("kv_c"), &k_pe = c.tensor("k_pe"), &cache = c.tensor("kv_cache");
  const TensorView& slots = c.tensor("slot_mapping");
  const std::string_view kv_cache_dtype = c.text("kv_cache_dtype");
  if (!c.run()) {
    check_concat_and_cache_mla(kv_c, k_pe, cache, slots, kv_cache_dtype, c.optional_tensor("scale"));
  } else {
    concat_and_cache_mla(kv_c, k_pe, cache, slots, kv_cache_dtype, c.optional_tensor("scale"), c.stream());
  }
  return 0;
}

std::int64_t run_concat_and_cache_nvfp4_mla_fp8_rope(const OpCall& c) {
  const TensorView &kv_c = c.tensor("kv_c"), &k_pe = c.tensor("k_pe"), &cache = c.tensor("kv_cache");
  const TensorView& slots = c.tensor("slot_mapping");
  const bool per_token_scale = c.flag("per_token_scale");
  if (!c.run()) {
    check_concat_and_cache_nvfp4_mla_fp8_rope(kv_c, k_pe, cache, slots, c.optional_tensor("scale"), per_token_scale);
  } else {
    concat_and_cache_nvfp4_mla_fp8_rope(kv_c, k_pe, cache, slots, c.optional_tensor("scale"), per_token_scale,
                                        c.stream());
  }
  return 0;
}

std::int64_t run_mla_kv_cache_writer_update(const OpCall& c) {
  const engine::MlaKvCacheWriter& writer =
      seam(c.text("seam_kv_cache_dtype"), c.flag("fp8_rope"), c.flag("per_token_scale"));
  const TensorView &kv_c = c.tensor("kv_c"), &k_pe = c.tensor("k_pe"), &cache = c.tensor("kv_cache");
  const TensorView& slots = c.tensor("slot_mapping");
  const std::string_view kv_cache_dtype = c.text("kv_cache_dtype");
  if (!c.run()) {
    writer.check_update(kv_c, k_pe, cache, slots, kv_cache_dtype, c.optional_tensor("k_scale"));
  } else {
    writer.update(kv_c, k_pe, cache, slots, kv_cache_dtype, c.optional_tensor("k_scale"), c.stream());
  }
  return 0;
}

}  // namespace mlakv::bindings
