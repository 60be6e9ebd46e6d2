// SPDX-License-Identifier: Apache-2.0
// The engine seam, MlaKvCacheWriter: an MLA attention backend binds its cache
// writer once, at construction, and the compact 368-byte record is used only
// when switched on. The switch is the engine's policy (vLLM's KV_FP8_ROPE
// environment variable, read by mlakv.integrations.vllm), passed in; the
// library reads no environment.
#pragma once

#include <string>
#include <string_view>

#include "mlakv/stream.h"
#include "mlakv/tensor_view.h"

namespace mlakv::engine {

/// The targeted error of a build without the compact writer.
inline constexpr std::string_view kCompactUnavailable =
    "KV_FP8_ROPE=1 requires an mlakv build with concat_and_cache_nvfp4_mla_fp8_rope package API support";

using StockWriter = void (*)(const TensorView& kv_c, const TensorView& k_pe, const TensorView& kv_cache,
                             const TensorView& slot_mapping, std::string_view kv_cache_dtype, const TensorView* scale,
                             StreamHandle stream);
using CompactWriter = void (*)(const TensorView& kv_c, const TensorView& k_pe, const TensorView& kv_cache,
                               const TensorView& slot_mapping, const TensorView* scale, bool per_token_scale,
                               StreamHandle stream);

/// Where a writer finds the functions it binds to. default_registry() is this
/// build's; engines and tests may supply their own (e.g. one without the
/// compact writer, to check that construction fails closed).
class WriterRegistry {
 public:
  virtual ~WriterRegistry() = default;
  [[nodiscard]] virtual StockWriter stock_writer() const = 0;
  /// nullptr when this registry has no compact writer.
  [[nodiscard]] virtual CompactWriter compact_writer() const = 0;
};

const WriterRegistry& default_registry();

struct MlaKvCacheWriterConfig {
  std::string kv_cache_dtype;    ///< the engine's string; "nvfp4_ds_mla" is the NVFP4 MLA cache
  bool fp8_rope = false;         ///< compact record requested (the B12X backend's KV_FP8_ROPE=1)
  bool per_token_scale = false;  ///< write the per-token-scale compact variant
};

/// Routes an MLA backend's cache writes: to the bound compact writer when the
/// compact record is requested for an NVFP4 MLA cache (bound once, here), else
/// to the stock writer with the engine's kv_cache_dtype. Construction throws
/// mlakv::Error(kUnsupported, kCompactUnavailable) when the compact record is
/// requested and the registry lacks it; there is no fallback.
class MlaKvCacheWriter {
 public:
  explicit MlaKvCacheWriter(MlaKvCacheWriterConfig config, const WriterRegistry& registry = default_registry());

  [[nodiscard]] bool compact() const noexcept { return compact_ != nullptr; }

  /// Writes a step's tokens. An empty cache is a no-op (checked first); in
  /// compact mode a kv_cache_dtype naming no compact record (anything but
  /// "nvfp4_ds_mla") throws before the writer runs, and resolve_format picks
  /// the compact record from the switches; k_pe (T, 1, 64) is squeezed and a
  /// (T, 1) slot column flattened (the stock writer's own rules, so a custom
  /// registry's writer sees what the built-in one would); the writer does
  /// every other check. The stock
  /// writer resolves the engine's kv_cache_dtype with the cache's record width.
  void update(const TensorView& kv_c, const TensorView& k_pe, const TensorView& kv_cache,
              const TensorView& slot_mapping, std::string_view kv_cache_dtype, const TensorView* k_scale,
              StreamHandle stream = nullptr) const;

  /// update's checks, routed the same way, without writing: the built-in
  /// writers' argument checks (mlakv/checks.h) on the views update would pass
  /// them. Data is not read (torch fake implementations call this).
  void check_update(const TensorView& kv_c, const TensorView& k_pe, const TensorView& kv_cache,
                    const TensorView& slot_mapping, std::string_view kv_cache_dtype, const TensorView* k_scale) const;

  /// The same routing for a gathered scratch cache (context-parallel decode).
  void update_gathered(const TensorView& gathered_cache, const TensorView& kv_c, const TensorView& k_pe,
                       const TensorView& slots, const TensorView* k_scale, StreamHandle stream = nullptr) const;

 private:
  void route(const TensorView& kv_c, const TensorView& k_pe, const TensorView& kv_cache, const TensorView& slot_mapping,
             std::string_view kv_cache_dtype, const TensorView* k_scale, StreamHandle stream, bool run) const;

  MlaKvCacheWriterConfig config_;
  StockWriter stock_;
  CompactWriter compact_ = nullptr;
};

}  // namespace mlakv::engine
