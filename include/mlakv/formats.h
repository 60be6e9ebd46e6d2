// SPDX-License-Identifier: Apache-2.0
// The registry of record formats (docs/ABI.md): ids, sizes, fields, alignment.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "mlakv/tensor_view.h"

namespace mlakv {

/// One value per format id of docs/ABI.md.
enum class Format {
  kBf16,                  ///< "bf16", 1152 B
  kFp16,                  ///< "fp16", 1152 B
  kFp8E4m3,               ///< "fp8_e4m3", 576 B
  kFp8DsMla,              ///< "fp8_ds_mla", 656 B
  kNvfp4DsMla,            ///< "nvfp4_ds_mla", 432 B
  kNvfp4DsMlaFp8Rope,     ///< "nvfp4_ds_mla_fp8_rope", 368 B
  kNvfp4DsMlaFp8RopePts,  ///< "nvfp4_ds_mla_fp8_rope_pts", 368 B
  kNvfp4Fp8DsMla,         ///< "nvfp4_fp8_ds_mla", 352 B
};

/// A byte range of a record and what it holds.
struct FieldInfo {
  std::string_view name;      ///< e.g. "latent_codes"
  int offset;                 ///< first byte
  int bytes;                  ///< length
  std::string_view contents;  ///< e.g. "packed E2M1, 32 groups of 16"
};

/// A name an engine gives a format's cache (its kv_cache_dtype string). One
/// string can name several records: the switches and the record width pick one.
struct EngineName {
  std::string_view kv_cache_dtype;  ///< e.g. "nvfp4_ds_mla"
  std::string_view engine;          ///< who writes and reads it under that name, e.g. "upstream vLLM"
  bool fp8_rope = false;            ///< the record the B12X backend writes with KV_FP8_ROPE=1
  bool per_token_scale = false;     ///< ... and its per-token-scale variant
};

struct FormatInfo {
  Format format;
  std::string_view id;                       ///< the ABI id, e.g. "nvfp4_ds_mla_fp8_rope"
  int record_bytes;                          ///< bytes one token occupies in one layer
  int cache_alignment;                       ///< required alignment of the cache base and outer strides
  std::string_view layout;                   ///< one-line summary
  std::string_view source;                   ///< where the layout comes from
  std::span<const FieldInfo> fields;         ///< in offset order, covering every byte
  std::span<const EngineName> engine_names;  ///< the engines' kv_cache_dtype strings for this record
};

/// All formats, in the order of docs/ABI.md.
std::span<const FormatInfo> formats() noexcept;
const FormatInfo& format_info(Format format) noexcept;
/// Looks up an ABI id; throws mlakv::Error (kValue) listing the accepted ids.
Format parse_format(std::string_view id);
/// The accepted ids joined by ", ".
std::string format_ids();

/// The one format an engine's cache holds. `kv_cache_dtype` is an engine's
/// name (FormatInfo::engine_names: "auto", "fp8", "fp8_e4m3", "fp8_ds_mla",
/// "nvfp4_ds_mla") or an mlakv format id, which names its format outright
/// (the id "nvfp4_ds_mla", also an engine name, resolves as the engine name).
/// Names are not unique: "nvfp4_ds_mla" is upstream vLLM's 352-byte record
/// and the B12X backend's 432-byte one, or its 368-byte ones when `fp8_rope`
/// (KV_FP8_ROPE=1) is on, the per-token-scale one with `per_token_scale` too
/// (which only selects among the fp8_rope records); the switches apply only
/// to names with such variants. `record_bytes` is the cache's last dimension
/// (0: not known); it picks among the remaining records and must match the
/// one resolved. "auto" follows the model's dtype: `input_dtype` kBFloat16 or
/// kFloat16 picks bf16 or fp16. Throws mlakv::Error (kValue) naming the
/// candidates when none or several remain.
Format resolve_format(std::string_view kv_cache_dtype, int record_bytes, bool fp8_rope = false,
                      bool per_token_scale = false, DType input_dtype = DType::kOther);

}  // namespace mlakv
