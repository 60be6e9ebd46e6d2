// SPDX-License-Identifier: Apache-2.0
// The words every layer shares: the format ids, a token's dimensions and the
// record sizes. It includes nothing, so that the codecs, the kernels, the CLI,
// the benchmarks and the bindings name a format and its sizes without reaching
// into the registry (mlakv/formats.h) or the byte layouts (src/format/specs.h,
// which checks its fields against these sizes).
#pragma once

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
  kFp8DsMlaV4,            ///< "fp8_ds_mla_v4", 584 B (DeepSeek V4, block-planar page)
  kFp8DsMlaV41,           ///< "fp8_ds_mla_v41", 528 B (DeepSeek V4.1 MXFP8)
  kNvfp4DsMlaV41,         ///< "nvfp4_ds_mla_v41", 288 B (DeepSeek V4.1 FP4)
  kFp8DsMlaV41Planar,     ///< "fp8_ds_mla_v41_planar", 528 B (DeepSeek V4.1 MXFP8, block-planar page)
  kNvfp4DsMlaV41Planar,   ///< "nvfp4_ds_mla_v41_planar", 288 B (DeepSeek V4.1 FP4, block-planar page)
};

/// How a page (the bytes of one block of block_size tokens) holds its tokens.
enum class PageKind {
  kTokenMajor,   ///< one record per token, side by side: [block_size][record_bytes]
  kBlockPlanar,  ///< the data rows of all its tokens, then their scale rows, then padding
};

/// The region of a page a field lives in.
inline constexpr int kDataRegion = 0;   ///< the token's record, or its data row
inline constexpr int kScaleRegion = 1;  ///< the token's scale row (block-planar pages)

inline constexpr int kLatentDim = 512;                   ///< kv_c values per token (kv_lora_rank)
inline constexpr int kRopeDim = 64;                      ///< k_pe values per token (qk_rope_head_dim)
inline constexpr int kQueryDim = kLatentDim + kRopeDim;  ///< absorbed query dims: the key is the whole token (576)
inline constexpr int kValueDim = kLatentDim;             ///< attention output dims (512)

/// Bytes one token occupies in one layer of `format`'s cache (a block-planar
/// page adds padding per page: mlakv::page_bytes).
constexpr int record_bytes(Format format) noexcept {
  switch (format) {
    case Format::kBf16:
    case Format::kFp16:
      return 1152;
    case Format::kFp8E4m3:
      return 576;
    case Format::kFp8DsMla:
      return 656;
    case Format::kNvfp4DsMla:
      return 432;
    case Format::kNvfp4DsMlaFp8Rope:
    case Format::kNvfp4DsMlaFp8RopePts:
      return 368;
    case Format::kNvfp4Fp8DsMla:
      return 352;
    case Format::kFp8DsMlaV4:
      return 584;
    case Format::kFp8DsMlaV41:
    case Format::kFp8DsMlaV41Planar:
      return 528;
    case Format::kNvfp4DsMlaV41:
    case Format::kNvfp4DsMlaV41Planar:
      return 288;
  }
  return 0;  // unreachable: every enumerator is handled above
}

}  // namespace mlakv
