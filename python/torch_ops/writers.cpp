// SPDX-License-Identifier: Apache-2.0
// torch.ops.mlakv's writers in C++: concat_and_cache_mla (vLLM's op, drop-in),
// concat_and_cache_nvfp4_mla_fp8_rope, and the engine seam's
// mla_kv_cache_writer_update. Schemas as mlakv/torch.py defines them; the
// fake implementations stay mlakv/torch.py's (registered over these schemas).
#include "mlakv/writers.h"

#include <torch/library.h>

#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "mlakv/mla_kv_cache_writer.h"
#include "views.h"

namespace mlakv::torch_ops {
namespace {

void concat_and_cache_mla_op(const at::Tensor& kv_c, const at::Tensor& k_pe, const at::Tensor& kv_cache,
                             const at::Tensor& slot_mapping, c10::string_view kv_cache_dtype,
                             const std::optional<at::Tensor>& scale) {
  translated([&] {
    const std::optional<TensorView> s = optional_view(scale);
    concat_and_cache_mla(view(kv_c), view(k_pe), view(kv_cache, true), view(slot_mapping), text(kv_cache_dtype),
                         pointer(s), stream(kv_c));
  });
}

void concat_and_cache_nvfp4_mla_fp8_rope_op(const at::Tensor& kv_c, const at::Tensor& k_pe, const at::Tensor& kv_cache,
                                            const at::Tensor& slot_mapping, const std::optional<at::Tensor>& scale,
                                            bool per_token_scale) {
  translated([&] {
    const std::optional<TensorView> s = optional_view(scale);
    concat_and_cache_nvfp4_mla_fp8_rope(view(kv_c), view(k_pe), view(kv_cache), view(slot_mapping), pointer(s),
                                        per_token_scale, stream(kv_c));
  });
}

// One seam per configuration, built on first use and kept (mlakv/torch.py's
// functools.cache of _seam): a construction that throws is not kept.
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

void mla_kv_cache_writer_update_op(const at::Tensor& kv_c, const at::Tensor& k_pe, const at::Tensor& kv_cache,
                                   const at::Tensor& slot_mapping, c10::string_view kv_cache_dtype,
                                   const std::optional<at::Tensor>& k_scale, c10::string_view seam_kv_cache_dtype,
                                   bool fp8_rope, bool per_token_scale) {
  translated([&] {
    const engine::MlaKvCacheWriter& writer = seam(text(seam_kv_cache_dtype), fp8_rope, per_token_scale);
    const std::optional<TensorView> s = optional_view(k_scale);
    writer.update(view(kv_c), view(k_pe), view(kv_cache, true), view(slot_mapping), text(kv_cache_dtype), pointer(s),
                  stream(kv_c));
  });
}

}  // namespace
}  // namespace mlakv::torch_ops

TORCH_LIBRARY_FRAGMENT(mlakv, m) {
  m.def(
      "concat_and_cache_mla(Tensor kv_c, Tensor k_pe, Tensor(a!) kv_cache, Tensor slot_mapping, str kv_cache_dtype, "
      "Tensor? scale=None) -> ()");
  m.def(
      "concat_and_cache_nvfp4_mla_fp8_rope(Tensor kv_c, Tensor k_pe, Tensor(a!) kv_cache, Tensor slot_mapping, "
      "Tensor? scale=None, bool per_token_scale=False) -> ()");
  m.def(
      "mla_kv_cache_writer_update(Tensor kv_c, Tensor k_pe, Tensor(a!) kv_cache, Tensor slot_mapping, "
      "str kv_cache_dtype, Tensor? k_scale, str seam_kv_cache_dtype, bool fp8_rope, bool per_token_scale) -> ()");
}

// One kernel for both devices: the views carry the device, the library dispatches on it.
TORCH_LIBRARY_IMPL(mlakv, CPU, m) {
  m.impl("concat_and_cache_mla", &mlakv::torch_ops::concat_and_cache_mla_op);
  m.impl("concat_and_cache_nvfp4_mla_fp8_rope", &mlakv::torch_ops::concat_and_cache_nvfp4_mla_fp8_rope_op);
  m.impl("mla_kv_cache_writer_update", &mlakv::torch_ops::mla_kv_cache_writer_update_op);
}

TORCH_LIBRARY_IMPL(mlakv, CUDA, m) {
  m.impl("concat_and_cache_mla", &mlakv::torch_ops::concat_and_cache_mla_op);
  m.impl("concat_and_cache_nvfp4_mla_fp8_rope", &mlakv::torch_ops::concat_and_cache_nvfp4_mla_fp8_rope_op);
  m.impl("mla_kv_cache_writer_update", &mlakv::torch_ops::mla_kv_cache_writer_update_op);
}
