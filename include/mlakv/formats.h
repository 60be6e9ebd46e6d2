// SPDX-License-Identifier: Apache-2.0
// The registry of record formats (docs/ABI.md): ids, sizes, fields, alignment.
#pragma once

#include <span>
#include <string>
#include <string_view>

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

struct FormatInfo {
  Format format;
  std::string_view id;                ///< the ABI id, e.g. "nvfp4_ds_mla_fp8_rope"
  int record_bytes;                   ///< bytes one token occupies in one layer
  int cache_alignment;                ///< required alignment of the cache base and outer strides
  std::string_view layout;            ///< one-line summary
  std::string_view source;            ///< where the layout comes from
  std::span<const FieldInfo> fields;  ///< in offset order, covering every byte
};

/// All formats, in the order of docs/ABI.md.
std::span<const FormatInfo> formats() noexcept;
const FormatInfo& format_info(Format format) noexcept;
/// Looks up an ABI id; throws mlakv::Error (kValue) listing the accepted ids.
Format parse_format(std::string_view id);
/// The accepted ids joined by ", ".
std::string format_ids();

}  // namespace mlakv
