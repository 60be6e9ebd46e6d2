// SPDX-License-Identifier: Apache-2.0
// The registry of record formats (docs/ABI.md): ids, sizes, fields, alignment.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "mlakv/tensor_view.h"
#include "mlakv/vocabulary.h"

namespace mlakv {

/// The page layout of a format. A token-major page is block_size records
/// (record = data row); a block-planar page is [block_size x data_row_bytes]
/// [block_size x scale_row_bytes], padded to a multiple of page_multiple.
struct PageLayout {
  PageKind kind;
  int data_row_bytes;   ///< a token's record (token-major) or data row (block-planar)
  int scale_row_bytes;  ///< a token's scale row; 0 for token-major pages
  int page_multiple;    ///< a block-planar page's size is a multiple of this; 1 for token-major
};

/// The values of one token a format stores: kv_c holds nope_dims values, k_pe rope_dims.
struct TokenGeometry {
  int nope_dims;         ///< 512 (the latent) for the V3 family, 448 for the DeepSeek V4 family
  int rope_dims;         ///< 64
  bool v_includes_rope;  ///< attention's V is kv_c ++ k_pe (DeepSeek V4), not kv_c alone
};

/// A byte range of a token's row and what it holds.
struct FieldInfo {
  std::string_view name;      ///< e.g. "latent_codes"
  int offset;                 ///< first byte, within the token's row of `region`
  int bytes;                  ///< length
  std::string_view contents;  ///< e.g. "packed E2M1, 32 groups of 16"
  int region = kDataRegion;   ///< kDataRegion or kScaleRegion
  std::string_view element;   ///< element type: "E4M3", "E2M1x2", "UE8M0", "f32", "bf16", "fp16", "raw16", "zero"
  int group = 0;              ///< values sharing one scale (codes) or covered by one scale (scales); 0: none
};

/// A name an engine gives a format's cache (its kv_cache_dtype string). One
/// string can name several records: the switches and the record width pick one.
struct EngineName {
  std::string_view kv_cache_dtype;  ///< e.g. "nvfp4_ds_mla"
  std::string_view engine;          ///< who writes and reads it under that name, e.g. "upstream vLLM"
  bool fp8_rope = false;            ///< the record the B12X backend writes with KV_FP8_ROPE=1
  bool per_token_scale = false;     ///< ... and its per-token-scale variant
};

/// What a format asks of the calls that write or read it. Validation and
/// resolve_format apply these instead of testing format ids.
struct FormatPolicy {
  bool needs_k_scale = false;         ///< writers, readers and the decode require k_scale (fp8_e4m3's per-tensor scale)
  DType input_dtype = DType::kOther;  ///< the one input dtype a record storing inputs verbatim takes (bf16, fp16);
                                      ///< kOther: bf16 or fp16 inputs
};

struct FormatInfo {
  Format format;
  std::string_view id;                       ///< the ABI id, e.g. "nvfp4_ds_mla_fp8_rope"
  int record_bytes;                          ///< bytes one token occupies in one layer
  int cache_alignment;                       ///< required alignment of the cache base and outer strides
  std::string_view layout;                   ///< one-line summary
  std::string_view source;                   ///< where the layout comes from
  std::span<const FieldInfo> fields;         ///< by region, in offset order, covering every byte of both rows
  std::span<const EngineName> engine_names;  ///< the engines' kv_cache_dtype strings for this record
  TokenGeometry geometry;                    ///< the values of a token
  PageLayout page;                           ///< how a page holds its tokens
  FormatPolicy policy = {};                  ///< what calls on this format must supply
};

/// All formats, in the order of docs/ABI.md.
std::span<const FormatInfo> formats() noexcept;
const FormatInfo& format_info(Format format) noexcept;
/// Bytes of one page of `block_size` tokens, padding included (the smallest
/// block stride a cache of this format can have).
std::int64_t page_bytes(const FormatInfo& info, std::int64_t block_size);
/// The one address rule: the byte of `field` of token `token` (0 <=
/// token < block_size) counted from the first byte of its page.
/// `slot_stride` is the bytes between token-major records (0: record_bytes);
/// block-planar rows are packed and ignore it. Writers, readers, inspect and
/// capacity place every byte by this rule.
std::int64_t field_offset(const FormatInfo& info, const FieldInfo& field, std::int64_t block_size, std::int64_t token,
                          std::int64_t slot_stride = 0);
/// Looks up an ABI id; throws mlakv::Error (kValue) listing the accepted ids.
Format parse_format(std::string_view id);
/// The accepted ids joined by ", ".
std::string format_ids();

/// The one format an engine's cache holds. `kv_cache_dtype` is an engine's
/// name (FormatInfo::engine_names: "auto", "fp8", "fp8_e4m3", "fp8_ds_mla",
/// "nvfp4_ds_mla") or an mlakv format id, which names its format outright
/// (the ids "fp8_ds_mla" and "nvfp4_ds_mla", also engine names, resolve as the
/// engine names). Names are not unique: "fp8_ds_mla" is the 656-byte record
/// (DeepSeek V3.2) and DeepSeek V4's 584-byte page; "nvfp4_ds_mla" is upstream vLLM's 352-byte record
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
