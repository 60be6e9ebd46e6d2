// SPDX-License-Identifier: Apache-2.0
// The byte layout of every record format of docs/ABI.md, as constexpr specs.
// This is the only place a byte offset is written down; codecs, the registry,
// validation and the CLI take offsets from here. The record sizes are the
// vocabulary's (mlakv/vocabulary.h); each spec's fields must tile them.
#pragma once

#include "mlakv/vocabulary.h"

namespace mlakv::format {

// The vocabulary's words, spelled format:: where the layouts are written.
using mlakv::Format;
using mlakv::kDataRegion;
using mlakv::kLatentDim;
using mlakv::kRopeDim;
using mlakv::kScaleRegion;
using mlakv::PageKind;
using mlakv::record_bytes;

inline constexpr int kNvfp4GroupSize = 16;
inline constexpr int kNvfp4Groups = kLatentDim / kNvfp4GroupSize;
inline constexpr int kFp8TileSize = 128;
inline constexpr int kFp8Tiles = kLatentDim / kFp8TileSize;

/// The base pointer and both outer strides of a cache must be multiples of this.
inline constexpr int kCacheAlignment = 16;
/// Input rows (kv_c, k_pe) must start on this boundary.
inline constexpr int kInputRowAlignment = 4;

struct Field {
  int offset;  // within the token's row of `region`
  int bytes;
  int region = kDataRegion;
  [[nodiscard]] constexpr int end() const { return offset + bytes; }
};

// The fields of each region must follow each other with no gap or overlap and
// end at that region's row end (a token-major record has one region).
template <int kN>
constexpr bool tiles_rows(const Field (&fields)[kN], int data_row_bytes, int scale_row_bytes = 0) {
  int next[2] = {0, 0};
  for (const Field& f : fields) {
    if (f.region < 0 || f.region > 1 || f.offset != next[f.region] || f.bytes <= 0) return false;
    next[f.region] = f.end();
  }
  return next[kDataRegion] == data_row_bytes && next[kScaleRegion] == scale_row_bytes;
}
template <int kRecordBytes, int kN>
constexpr bool tiles_record(const Field (&fields)[kN]) {
  return tiles_rows(fields, kRecordBytes);
}

// The NVFP4 latent shared by the 432, 368 and 368-pts records (the 352 record
// shares only its codes).
struct Nvfp4Latent {
  static constexpr Field kCodes{0, kLatentDim / 2};                 // packed E2M1, low nibble first
  static constexpr Field kGroupScales{kCodes.end(), kNvfp4Groups};  // one E4M3 byte per group
};

struct FormatBf16 {
  static constexpr int kRecordBytes = record_bytes(Format::kBf16);
  static constexpr Field kLatent{0, kLatentDim * 2};
  static constexpr Field kRope{kLatent.end(), kRopeDim * 2};
  static constexpr Field kFields[] = {kLatent, kRope};
};
using FormatFp16 = FormatBf16;  // same layout, fp16 elements

struct FormatFp8E4m3 {
  static constexpr int kRecordBytes = record_bytes(Format::kFp8E4m3);
  static constexpr Field kLatent{0, kLatentDim};
  static constexpr Field kRope{kLatent.end(), kRopeDim};
  static constexpr Field kFields[] = {kLatent, kRope};
};

struct FormatFp8DsMla {
  static constexpr int kRecordBytes = record_bytes(Format::kFp8DsMla);
  static constexpr Field kLatent{0, kLatentDim};
  static constexpr Field kTileScales{kLatent.end(), kFp8Tiles * 4};  // f32 little-endian
  static constexpr Field kRope{kTileScales.end(), kRopeDim * 2};     // raw 16-bit inputs
  static constexpr Field kFields[] = {kLatent, kTileScales, kRope};
};

struct FormatNvfp4DsMla {
  static constexpr int kRecordBytes = record_bytes(Format::kNvfp4DsMla);
  static constexpr Field kCodes = Nvfp4Latent::kCodes;
  static constexpr Field kGroupScales = Nvfp4Latent::kGroupScales;
  static constexpr Field kPad{kGroupScales.end(), 16};
  static constexpr Field kRope{kPad.end(), kRopeDim * 2};  // bf16
  static constexpr Field kFields[] = {kCodes, kGroupScales, kPad, kRope};
};

struct FormatNvfp4DsMlaFp8Rope {
  static constexpr int kRecordBytes = record_bytes(Format::kNvfp4DsMlaFp8Rope);
  static constexpr Field kCodes = Nvfp4Latent::kCodes;
  static constexpr Field kGroupScales = Nvfp4Latent::kGroupScales;
  static constexpr Field kRopeScale{kGroupScales.end(), 4};  // f32
  static constexpr Field kPad{kRopeScale.end(), 12};
  static constexpr Field kRope{kPad.end(), kRopeDim};  // E4M3
  static constexpr Field kFields[] = {kCodes, kGroupScales, kRopeScale, kPad, kRope};
};

struct FormatNvfp4DsMlaFp8RopePts {
  static constexpr int kRecordBytes = record_bytes(Format::kNvfp4DsMlaFp8RopePts);
  static constexpr Field kCodes = Nvfp4Latent::kCodes;
  static constexpr Field kGroupScales = Nvfp4Latent::kGroupScales;
  static constexpr Field kRopeScale{kGroupScales.end(), 4};  // f32
  static constexpr Field kTokenScale{kRopeScale.end(), 4};   // f32
  static constexpr Field kPad{kTokenScale.end(), 8};
  static constexpr Field kRope{kPad.end(), kRopeDim};  // E4M3
  static constexpr Field kFields[] = {kCodes, kGroupScales, kRopeScale, kTokenScale, kPad, kRope};
};

// Upstream vLLM's record (--kv-cache-dtype nvfp4_ds_mla): the RoPE sits
// right after the codes and the group scales come last, permuted as a 4 x 8
// transpose so that reader thread q finds the scales of groups {4c + q} on
// the contiguous bytes 8q + c.
struct FormatNvfp4Fp8DsMla {
  static constexpr int kRecordBytes = record_bytes(Format::kNvfp4Fp8DsMla);
  static constexpr Field kCodes = Nvfp4Latent::kCodes;
  static constexpr Field kRope{kCodes.end(), kRopeDim};            // E4M3, unscaled
  static constexpr Field kGroupScales{kRope.end(), kNvfp4Groups};  // E4M3, permuted
  static constexpr Field kFields[] = {kCodes, kRope, kGroupScales};
  /// The byte holding the scale of group g (latent [16g, 16g + 16)).
  static constexpr int group_scale_offset(int g) { return kGroupScales.offset + 8 * (g & 3) + (g >> 2); }
};

// DeepSeek V4's sparse FP8 page (FlashMLA MODEL1 / V4_FP8Sparse, vLLM
// fp8_ds_mla for V4, SGLang's DSV4 default): 448 NoPE + 64 RoPE values per
// token, V = the whole 512. Per page: block_size data rows [448 E4M3 | 64
// bf16], then block_size scale rows [7 UE8M0 | 1 zero], then padding to a
// multiple of 576 bytes.
struct FormatDsv4Fp8Sparse {
  static constexpr PageKind kPage = PageKind::kBlockPlanar;
  static constexpr int kNopeDims = 448;
  static constexpr int kRopeDims = 64;
  static constexpr bool kVIncludesRope = true;
  static constexpr int kTileSize = 64;  // NoPE values per UE8M0 scale
  static constexpr int kTiles = kNopeDims / kTileSize;
  static constexpr Field kNope{0, kNopeDims};                        // E4M3(x / 2^e)
  static constexpr Field kRope{kNope.end(), kRopeDims * 2};          // bf16
  static constexpr Field kScales{0, kTiles, kScaleRegion};           // UE8M0: e + 127
  static constexpr Field kScalePad{kScales.end(), 1, kScaleRegion};  // zero
  static constexpr Field kFields[] = {kNope, kRope, kScales, kScalePad};
  static constexpr int kDataRowBytes = kRope.end();
  static constexpr int kScaleRowBytes = kScalePad.end();
  static constexpr int kRecordBytes = kDataRowBytes + kScaleRowBytes;  // bytes per token
  static constexpr int kPageMultiple = 576;
  /// The amax floor of vLLM's writer, applied before the division by 448.
  static constexpr float kAmaxFloor = 1e-4f;
};
static_assert(FormatDsv4Fp8Sparse::kRecordBytes == record_bytes(Format::kFp8DsMlaV4) &&
              FormatDsv4Fp8Sparse::kDataRowBytes == 576);
static_assert(FormatDsv4Fp8Sparse::kNopeDims + FormatDsv4Fp8Sparse::kRopeDims == kLatentDim);
static_assert(tiles_rows(FormatDsv4Fp8Sparse::kFields, FormatDsv4Fp8Sparse::kDataRowBytes,
                         FormatDsv4Fp8Sparse::kScaleRowBytes));
static_assert(FormatDsv4Fp8Sparse::kDataRowBytes % kCacheAlignment == 0,
              "the scale region of every page starts 16-byte aligned");

// DeepSeek V4.1's rows: the whole 512-value row (448 NoPE ++ 64 RoPE) is
// quantized, into a code row and a scale row. The values, tiles and element
// rules are one per cache kind (Dsv41Mxfp8Tiles, Dsv41Fp4Tiles); two pages hold
// those rows. Token-major (FlashMLA ModelType::V41 / V41_FP4,
// csrc/cuda_kernels/kv_cache_format.h): a token's codes, then its scales,
// records side by side, no page padding; FlashMLA's kernels read a record
// stride of exactly kRecordBytes and a block stride that is a multiple of it.
// Block-planar (vLLM's fp8_ds_mla / nvfp4_ds_mla for DeepSeek V4.1, SGLang's
// KVLayout.V41 / V41_FP4): a page's block_size code rows, then its block_size
// scale rows, then padding to a multiple of 512 bytes (vLLM's kv_page_alignment).
struct Dsv41Mxfp8Tiles {
  static constexpr int kNopeDims = 448;
  static constexpr int kRopeDims = 64;
  static constexpr bool kVIncludesRope = true;
  static constexpr int kTileSize = 32;  // values per UE8M0 scale
  static constexpr int kTiles = (kNopeDims + kRopeDims) / kTileSize;
  static constexpr int kCodeBytes = kNopeDims + kRopeDims;  // E4M3(x / 2^e), RoPE included
  static constexpr int kScaleBytes = kTiles;                // UE8M0: e + 127
  /// The amax floor of the UE8M0 rule (shared with the V4 page: vLLM's writers).
  static constexpr float kAmaxFloor = 1e-4f;
};

struct Dsv41Fp4Tiles {
  static constexpr int kNopeDims = 448;
  static constexpr int kRopeDims = 64;
  static constexpr bool kVIncludesRope = true;
  static constexpr int kTileSize = 16;  // values per E4M3 scale
  static constexpr int kTiles = (kNopeDims + kRopeDims) / kTileSize;
  static constexpr int kCodeBytes = (kNopeDims + kRopeDims) / 2;  // packed E2M1, even value in the low nibble
  static constexpr int kScaleBytes = kTiles;                      // E4M3 RN(clamp(amax / 6, 2^-9, 448)), in order
  static constexpr float kMinScale = 0x1p-9f;                     // E4M3's smallest subnormal: a zero tile's scale
  static constexpr float kMaxScale = 448.0f;
};

struct FormatDsv41Mxfp8 : Dsv41Mxfp8Tiles {
  static constexpr PageKind kPage = PageKind::kTokenMajor;
  static constexpr Field kCodes{0, kCodeBytes};
  static constexpr Field kScales{kCodes.end(), kScaleBytes};
  static constexpr Field kFields[] = {kCodes, kScales};
  static constexpr int kRecordBytes = kScales.end();
};
static_assert(FormatDsv41Mxfp8::kRecordBytes == record_bytes(Format::kFp8DsMlaV41) && FormatDsv41Mxfp8::kTiles == 16);
static_assert(tiles_record<FormatDsv41Mxfp8::kRecordBytes>(FormatDsv41Mxfp8::kFields));

struct FormatDsv41Fp4 : Dsv41Fp4Tiles {
  static constexpr PageKind kPage = PageKind::kTokenMajor;
  static constexpr Field kCodes{0, kCodeBytes};
  static constexpr Field kScales{kCodes.end(), kScaleBytes};
  static constexpr Field kFields[] = {kCodes, kScales};
  static constexpr int kRecordBytes = kScales.end();
};
static_assert(FormatDsv41Fp4::kRecordBytes == record_bytes(Format::kNvfp4DsMlaV41) && FormatDsv41Fp4::kTiles == 32);
static_assert(tiles_record<FormatDsv41Fp4::kRecordBytes>(FormatDsv41Fp4::kFields));

// The same rows, block-planar: the code row in the data region, the scale row
// in the scale region (vllm-project/vllm b3ae0bb
// vllm/models/deepseek_v41/common/ops/cache_utils.py: data at pos * 512 (or
// 256), scales at block_size * 512 (or 256) + pos * 16 (or 32)).
struct FormatDsv41Mxfp8Planar : Dsv41Mxfp8Tiles {
  static constexpr PageKind kPage = PageKind::kBlockPlanar;
  static constexpr Field kCodes{0, kCodeBytes};
  static constexpr Field kScales{0, kScaleBytes, kScaleRegion};
  static constexpr Field kFields[] = {kCodes, kScales};
  static constexpr int kDataRowBytes = kCodes.end();
  static constexpr int kScaleRowBytes = kScales.end();
  static constexpr int kRecordBytes = kDataRowBytes + kScaleRowBytes;  // bytes per token
  static constexpr int kPageMultiple = 512;
};
static_assert(FormatDsv41Mxfp8Planar::kRecordBytes == record_bytes(Format::kFp8DsMlaV41Planar));
static_assert(tiles_rows(FormatDsv41Mxfp8Planar::kFields, FormatDsv41Mxfp8Planar::kDataRowBytes,
                         FormatDsv41Mxfp8Planar::kScaleRowBytes));

struct FormatDsv41Fp4Planar : Dsv41Fp4Tiles {
  static constexpr PageKind kPage = PageKind::kBlockPlanar;
  static constexpr Field kCodes{0, kCodeBytes};
  static constexpr Field kScales{0, kScaleBytes, kScaleRegion};
  static constexpr Field kFields[] = {kCodes, kScales};
  static constexpr int kDataRowBytes = kCodes.end();
  static constexpr int kScaleRowBytes = kScales.end();
  static constexpr int kRecordBytes = kDataRowBytes + kScaleRowBytes;  // bytes per token
  /// vLLM pads every V4.1 page to 512 bytes (SGLang pads this one to 256; a
  /// page of a block size that is a multiple of 16 is the same in both).
  static constexpr int kPageMultiple = 512;
};
static_assert(FormatDsv41Fp4Planar::kRecordBytes == record_bytes(Format::kNvfp4DsMlaV41Planar));
static_assert(tiles_rows(FormatDsv41Fp4Planar::kFields, FormatDsv41Fp4Planar::kDataRowBytes,
                         FormatDsv41Fp4Planar::kScaleRowBytes));
static_assert(FormatDsv41Mxfp8Planar::kDataRowBytes % kCacheAlignment == 0 &&
                  FormatDsv41Fp4Planar::kDataRowBytes % kCacheAlignment == 0,
              "the scale region of every page starts 16-byte aligned");

static_assert(Dsv41Mxfp8Tiles::kNopeDims % Dsv41Mxfp8Tiles::kTileSize == 0 &&
                  Dsv41Fp4Tiles::kNopeDims % Dsv41Fp4Tiles::kTileSize == 0,
              "no tile straddles the NoPE and the RoPE values");
static_assert(FormatDsv41Mxfp8::kRecordBytes % kCacheAlignment == 0 &&
                  FormatDsv41Fp4::kRecordBytes % kCacheAlignment == 0,
              "dense V4.1 caches qualify");

// Every group's scale byte is its own byte of the scale field: a permutation.
constexpr bool permutes_group_scales() {
  bool seen[kNvfp4Groups] = {};
  for (int g = 0; g < kNvfp4Groups; ++g) {
    const int byte = FormatNvfp4Fp8DsMla::group_scale_offset(g) - FormatNvfp4Fp8DsMla::kGroupScales.offset;
    if (byte < 0 || byte >= kNvfp4Groups || seen[byte]) return false;
    seen[byte] = true;
  }
  return true;
}
static_assert(permutes_group_scales());

static_assert(tiles_record<FormatBf16::kRecordBytes>(FormatBf16::kFields));
static_assert(tiles_record<FormatFp8E4m3::kRecordBytes>(FormatFp8E4m3::kFields));
static_assert(tiles_record<FormatFp8DsMla::kRecordBytes>(FormatFp8DsMla::kFields));
static_assert(tiles_record<FormatNvfp4DsMla::kRecordBytes>(FormatNvfp4DsMla::kFields));
static_assert(tiles_record<FormatNvfp4DsMlaFp8Rope::kRecordBytes>(FormatNvfp4DsMlaFp8Rope::kFields));
static_assert(tiles_record<FormatNvfp4DsMlaFp8RopePts::kRecordBytes>(FormatNvfp4DsMlaFp8RopePts::kFields));
static_assert(tiles_record<FormatNvfp4Fp8DsMla::kRecordBytes>(FormatNvfp4Fp8DsMla::kFields));

// ABI.md: the compact record keeps the stock offsets and shrinks only the RoPE tail.
static_assert(FormatNvfp4DsMlaFp8Rope::kRope.offset == FormatNvfp4DsMla::kRope.offset);
static_assert(FormatNvfp4DsMlaFp8RopePts::kRecordBytes == FormatNvfp4DsMlaFp8Rope::kRecordBytes);
static_assert(record_bytes(Format::kFp16) == FormatFp16::kRecordBytes);
static_assert(FormatNvfp4Fp8DsMla::kRecordBytes == 352);
static_assert(FormatFp8DsMla::kRecordBytes % kCacheAlignment == 0 &&
                  FormatNvfp4DsMla::kRecordBytes % kCacheAlignment == 0 &&
                  FormatNvfp4DsMlaFp8Rope::kRecordBytes % kCacheAlignment == 0 &&
                  FormatNvfp4Fp8DsMla::kRecordBytes % kCacheAlignment == 0 &&
                  FormatFp8E4m3::kRecordBytes % kCacheAlignment == 0 && FormatBf16::kRecordBytes % kCacheAlignment == 0,
              "every record size is a multiple of the cache alignment, so dense caches qualify");

}  // namespace mlakv::format
