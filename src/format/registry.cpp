// SPDX-License-Identifier: Apache-2.0
// The public registry of formats, built from the constexpr specs.
#include <array>
#include <string>

#include "format/page.h"
#include "format/specs.h"
#include "mlakv/error.h"
#include "mlakv/formats.h"

namespace mlakv {
namespace {

using namespace format;

constexpr FieldInfo field(std::string_view name, Field f, std::string_view contents, std::string_view element,
                          int group = 0) {
  return FieldInfo{name, f.offset, f.bytes, contents, f.region, element, group};
}

// Every format before DeepSeek V4: 512 latent + 64 RoPE values, V = the latent.
constexpr TokenGeometry kLatent512{kLatentDim, kRopeDim, false};
constexpr PageLayout token_major(int record_bytes) { return {mlakv::PageKind::kTokenMajor, record_bytes, 0, 1}; }

constexpr FieldInfo kBf16Fields[] = {
    field("latent", FormatBf16::kLatent, "kv_c, 512 x bf16", "bf16"),
    field("rope", FormatBf16::kRope, "k_pe, 64 x bf16", "bf16"),
};
constexpr FieldInfo kFp16Fields[] = {
    field("latent", FormatFp16::kLatent, "kv_c, 512 x fp16", "fp16"),
    field("rope", FormatFp16::kRope, "k_pe, 64 x fp16", "fp16"),
};
constexpr FieldInfo kFp8E4m3Fields[] = {
    field("latent", FormatFp8E4m3::kLatent, "E4M3(kv_c / k_scale)", "E4M3"),
    field("rope", FormatFp8E4m3::kRope, "E4M3(k_pe / k_scale)", "E4M3"),
};
constexpr FieldInfo kFp8DsMlaFields[] = {
    field("latent", FormatFp8DsMla::kLatent, "E4M3(x / ts), 4 tiles of 128", "E4M3", kFp8TileSize),
    field("tile_scales", FormatFp8DsMla::kTileScales, "4 x f32 ts = max(amax / 448, FLT_MIN)", "f32", kFp8TileSize),
    field("rope", FormatFp8DsMla::kRope, "k_pe, 64 raw 16-bit inputs", "raw16"),
};
constexpr FieldInfo kNvfp4DsMlaFields[] = {
    field("latent_codes", FormatNvfp4DsMla::kCodes, "packed E2M1, 32 groups of 16", "E2M1x2", kNvfp4GroupSize),
    field("group_scales", FormatNvfp4DsMla::kGroupScales, "32 x E4M3(amax / 6)", "E4M3", kNvfp4GroupSize),
    field("pad", FormatNvfp4DsMla::kPad, "zero", "zero"),
    field("rope", FormatNvfp4DsMla::kRope, "k_pe, 64 x bf16", "bf16"),
};
constexpr FieldInfo kNvfp4DsMlaFp8RopeFields[] = {
    field("latent_codes", FormatNvfp4DsMlaFp8Rope::kCodes, "packed E2M1, 32 groups of 16", "E2M1x2", kNvfp4GroupSize),
    field("group_scales", FormatNvfp4DsMlaFp8Rope::kGroupScales, "32 x E4M3(amax / 6)", "E4M3", kNvfp4GroupSize),
    field("rope_scale", FormatNvfp4DsMlaFp8Rope::kRopeScale, "f32 rs = rope_amax / 448", "f32", kRopeDim),
    field("pad", FormatNvfp4DsMlaFp8Rope::kPad, "zero", "zero"),
    field("rope", FormatNvfp4DsMlaFp8Rope::kRope, "64 x E4M3(k_pe / rs)", "E4M3", kRopeDim),
};
constexpr FieldInfo kNvfp4DsMlaFp8RopePtsFields[] = {
    field("latent_codes", FormatNvfp4DsMlaFp8RopePts::kCodes, "packed E2M1 of x / st, 32 groups of 16", "E2M1x2",
          kNvfp4GroupSize),
    field("group_scales", FormatNvfp4DsMlaFp8RopePts::kGroupScales, "32 x E4M3((amax / st) / 6)", "E4M3",
          kNvfp4GroupSize),
    field("rope_scale", FormatNvfp4DsMlaFp8RopePts::kRopeScale, "f32 rs = rope_amax / 448", "f32", kRopeDim),
    field("token_scale", FormatNvfp4DsMlaFp8RopePts::kTokenScale, "f32 st = token_amax / 2688", "f32", kLatentDim),
    field("pad", FormatNvfp4DsMlaFp8RopePts::kPad, "zero", "zero"),
    field("rope", FormatNvfp4DsMlaFp8RopePts::kRope, "64 x E4M3(k_pe / rs)", "E4M3", kRopeDim),
};
constexpr FieldInfo kNvfp4Fp8DsMlaFields[] = {
    field("latent_codes", FormatNvfp4Fp8DsMla::kCodes, "packed E2M1 of x * RN(1/s), 32 groups of 16", "E2M1x2",
          kNvfp4GroupSize),
    field("rope", FormatNvfp4Fp8DsMla::kRope, "64 x E4M3(k_pe), unscaled", "E4M3"),
    field("group_scales", FormatNvfp4Fp8DsMla::kGroupScales, "32 x E4M3 max(amax/6, 2^-9) rounded up, permuted", "E4M3",
          kNvfp4GroupSize),
};

constexpr FieldInfo kFp8DsMlaV4Fields[] = {
    field("nope", FormatDsv4Fp8Sparse::kNope, "448 x E4M3(x / 2^e), 7 tiles of 64", "E4M3",
          FormatDsv4Fp8Sparse::kTileSize),
    field("rope", FormatDsv4Fp8Sparse::kRope, "k_pe, 64 x bf16", "bf16"),
    field("tile_scales", FormatDsv4Fp8Sparse::kScales, "7 x UE8M0 e + 127, 2^e >= max(amax, 1e-4) / 448", "UE8M0",
          FormatDsv4Fp8Sparse::kTileSize),
    field("scale_pad", FormatDsv4Fp8Sparse::kScalePad, "zero", "zero"),
};
// The DeepSeek V4 family: 448 NoPE + 64 RoPE values, V = all 512.
constexpr TokenGeometry kV4Geometry{FormatDsv4Fp8Sparse::kNopeDims, FormatDsv4Fp8Sparse::kRopeDims,
                                    FormatDsv4Fp8Sparse::kVIncludesRope};

constexpr FieldInfo kFp8DsMlaV41Fields[] = {
    field("codes", FormatDsv41Mxfp8::kCodes, "512 x E4M3(x / 2^e), NoPE ++ RoPE, 16 tiles of 32", "E4M3",
          FormatDsv41Mxfp8::kTileSize),
    field("tile_scales", FormatDsv41Mxfp8::kScales, "16 x UE8M0 e + 127, 2^e >= max(amax, 1e-4) / 448", "UE8M0",
          FormatDsv41Mxfp8::kTileSize),
};
constexpr FieldInfo kNvfp4DsMlaV41Fields[] = {
    field("codes", FormatDsv41Fp4::kCodes, "packed E2M1 of x / s, NoPE ++ RoPE, 32 tiles of 16", "E2M1x2",
          FormatDsv41Fp4::kTileSize),
    field("tile_scales", FormatDsv41Fp4::kScales, "32 x E4M3 s = RN(clamp(amax / 6, 2^-9, 448)), in order", "E4M3",
          FormatDsv41Fp4::kTileSize),
};
// The same fields, in the regions of a block-planar page.
constexpr FieldInfo kFp8DsMlaV41PlanarFields[] = {
    field("codes", FormatDsv41Mxfp8Planar::kCodes, "512 x E4M3(x / 2^e), NoPE ++ RoPE, 16 tiles of 32", "E4M3",
          FormatDsv41Mxfp8Planar::kTileSize),
    field("tile_scales", FormatDsv41Mxfp8Planar::kScales, "16 x UE8M0 e + 127, 2^e >= max(amax, 1e-4) / 448", "UE8M0",
          FormatDsv41Mxfp8Planar::kTileSize),
};
constexpr FieldInfo kNvfp4DsMlaV41PlanarFields[] = {
    field("codes", FormatDsv41Fp4Planar::kCodes, "packed E2M1 of x / s, NoPE ++ RoPE, 32 tiles of 16", "E2M1x2",
          FormatDsv41Fp4Planar::kTileSize),
    field("tile_scales", FormatDsv41Fp4Planar::kScales, "32 x E4M3 s = RN(clamp(amax / 6, 2^-9, 448)), in order",
          "E4M3", FormatDsv41Fp4Planar::kTileSize),
};

constexpr EngineName kBf16Names[] = {{"auto", "vLLM, bf16 model"}};
constexpr EngineName kFp16Names[] = {{"auto", "vLLM, fp16 model"}};
constexpr EngineName kFp8E4m3Names[] = {{"fp8", "vLLM"}, {"fp8_e4m3", "vLLM"}};
constexpr EngineName kFp8DsMlaNames[] = {{"fp8_ds_mla", "vLLM / FlashMLA"}};
constexpr EngineName kNvfp4DsMlaNames[] = {{"nvfp4_ds_mla", "B12X backend, KV_FP8_ROPE=0"}};
constexpr EngineName kNvfp4DsMlaFp8RopeNames[] = {{"nvfp4_ds_mla", "B12X backend, KV_FP8_ROPE=1", true}};
constexpr EngineName kNvfp4DsMlaFp8RopePtsNames[] = {
    {"nvfp4_ds_mla", "B12X backend, KV_FP8_ROPE=1, per-token scale", true, true}};
constexpr EngineName kNvfp4Fp8DsMlaNames[] = {{"nvfp4_ds_mla", "upstream vLLM"}};
constexpr EngineName kFp8DsMlaV4Names[] = {{"fp8_ds_mla", "vLLM / FlashMLA / SGLang, DeepSeek V4"},
                                           {"v4", "SGLang KVLayout.V4"}};
// No engine names for the token-major V4.1 records: FlashMLA, whose kernels
// read them, takes no kv_cache_dtype string. vLLM (b3ae0bb) names the same
// rows block-planar: fp8_ds_mla at 528 B (its sliding-window and compressed
// caches), nvfp4_ds_mla at 528 B (its sliding-window cache) and at 288 B (its
// compressed cache); SGLang (2005a30) selects them with KVLayout "v41" /
// "v41_fp4" (SGLANG_DSV4_KV_LAYOUT, SGLANG_DSV4_COMPRESSED_KV_LAYOUT).
constexpr EngineName kFp8DsMlaV41PlanarNames[] = {{"fp8_ds_mla", "vLLM, DeepSeek V4.1 on SM100"},
                                                  {"nvfp4_ds_mla", "vLLM, DeepSeek V4.1 sliding-window cache"},
                                                  {"v41", "SGLang KVLayout.V41"}};
constexpr EngineName kNvfp4DsMlaV41PlanarNames[] = {{"nvfp4_ds_mla", "vLLM, DeepSeek V4.1 compressed cache"},
                                                    {"v41_fp4", "SGLang KVLayout.V41_FP4"}};

const std::array<FormatInfo, 13> kFormats = {{
    {Format::kBf16, "bf16", FormatBf16::kRecordBytes, kCacheAlignment, "bf16 kv_c | bf16 k_pe",
     "vLLM auto cache, bf16 model", kBf16Fields, kBf16Names, kLatent512, token_major(FormatBf16::kRecordBytes),
     FormatPolicy{.input_dtype = DType::kBFloat16}},
    {Format::kFp16, "fp16", FormatFp16::kRecordBytes, kCacheAlignment, "fp16 kv_c | fp16 k_pe",
     "vLLM auto cache, fp16 model", kFp16Fields, kFp16Names, kLatent512, token_major(FormatFp16::kRecordBytes),
     FormatPolicy{.input_dtype = DType::kFloat16}},
    {Format::kFp8E4m3, "fp8_e4m3", FormatFp8E4m3::kRecordBytes, kCacheAlignment,
     "E4M3 kv_c | E4M3 k_pe, per-tensor k_scale", "vLLM fp8 / fp8_e4m3", kFp8E4m3Fields, kFp8E4m3Names, kLatent512,
     token_major(FormatFp8E4m3::kRecordBytes), FormatPolicy{.needs_k_scale = true}},
    {Format::kFp8DsMla, "fp8_ds_mla", FormatFp8DsMla::kRecordBytes, kCacheAlignment,
     "E4M3 kv_c in 4 tiles | 4 f32 tile scales | raw 16-bit k_pe", "vLLM / FlashMLA (DeepSeek V3.2)", kFp8DsMlaFields,
     kFp8DsMlaNames, kLatent512, token_major(FormatFp8DsMla::kRecordBytes)},
    {Format::kNvfp4DsMla, "nvfp4_ds_mla", FormatNvfp4DsMla::kRecordBytes, kCacheAlignment,
     "NVFP4 kv_c (static) | pad | bf16 k_pe", "b12x stock record (KV_FP8_ROPE=0)", kNvfp4DsMlaFields, kNvfp4DsMlaNames,
     kLatent512, token_major(FormatNvfp4DsMla::kRecordBytes)},
    {Format::kNvfp4DsMlaFp8Rope, "nvfp4_ds_mla_fp8_rope", FormatNvfp4DsMlaFp8Rope::kRecordBytes, kCacheAlignment,
     "NVFP4 kv_c (static) | f32 rope scale | pad | E4M3 k_pe", "b12x compact record (KV_FP8_ROPE=1)",
     kNvfp4DsMlaFp8RopeFields, kNvfp4DsMlaFp8RopeNames, kLatent512, token_major(FormatNvfp4DsMlaFp8Rope::kRecordBytes)},
    {Format::kNvfp4DsMlaFp8RopePts, "nvfp4_ds_mla_fp8_rope_pts", FormatNvfp4DsMlaFp8RopePts::kRecordBytes,
     kCacheAlignment, "NVFP4 kv_c (per-token scale) | f32 rope scale | f32 token scale | pad | E4M3 k_pe",
     "b12x per-token-scale variant", kNvfp4DsMlaFp8RopePtsFields, kNvfp4DsMlaFp8RopePtsNames, kLatent512,
     token_major(FormatNvfp4DsMlaFp8RopePts::kRecordBytes)},
    {Format::kNvfp4Fp8DsMla, "nvfp4_fp8_ds_mla", FormatNvfp4Fp8DsMla::kRecordBytes, kCacheAlignment,
     "NVFP4 kv_c | E4M3 k_pe | permuted group scales", "upstream vLLM nvfp4_ds_mla (352 B)", kNvfp4Fp8DsMlaFields,
     kNvfp4Fp8DsMlaNames, kLatent512, token_major(FormatNvfp4Fp8DsMla::kRecordBytes)},
    {Format::kFp8DsMlaV4, "fp8_ds_mla_v4", FormatDsv4Fp8Sparse::kRecordBytes, kCacheAlignment,
     "block-planar: [bs x (E4M3 NoPE | bf16 RoPE)] [bs x (7 UE8M0 | pad)] | pad to 576",
     "DeepSeek V4 (FlashMLA V4, vLLM, SGLang)", kFp8DsMlaV4Fields, kFp8DsMlaV4Names, kV4Geometry,
     PageLayout{mlakv::PageKind::kBlockPlanar, FormatDsv4Fp8Sparse::kDataRowBytes, FormatDsv4Fp8Sparse::kScaleRowBytes,
                FormatDsv4Fp8Sparse::kPageMultiple}},
    {Format::kFp8DsMlaV41,
     "fp8_ds_mla_v41",
     FormatDsv41Mxfp8::kRecordBytes,
     kCacheAlignment,
     "E4M3 NoPE ++ RoPE in 16 tiles of 32 | 16 UE8M0 tile scales",
     "DeepSeek V4.1 MXFP8 (FlashMLA V41)",
     kFp8DsMlaV41Fields,
     {},
     kV4Geometry,
     token_major(FormatDsv41Mxfp8::kRecordBytes)},
    {Format::kNvfp4DsMlaV41,
     "nvfp4_ds_mla_v41",
     FormatDsv41Fp4::kRecordBytes,
     kCacheAlignment,
     "E2M1 NoPE ++ RoPE in 32 tiles of 16 | 32 E4M3 tile scales",
     "DeepSeek V4.1 FP4 (FlashMLA V41_FP4)",
     kNvfp4DsMlaV41Fields,
     {},
     kV4Geometry,
     token_major(FormatDsv41Fp4::kRecordBytes)},
    {Format::kFp8DsMlaV41Planar, "fp8_ds_mla_v41_planar", FormatDsv41Mxfp8Planar::kRecordBytes, kCacheAlignment,
     "block-planar: [bs x E4M3 NoPE ++ RoPE] [bs x 16 UE8M0] | pad to 512",
     "DeepSeek V4.1 MXFP8 (vLLM fp8_ds_mla, SGLang V41)", kFp8DsMlaV41PlanarFields, kFp8DsMlaV41PlanarNames,
     kV4Geometry,
     PageLayout{mlakv::PageKind::kBlockPlanar, FormatDsv41Mxfp8Planar::kDataRowBytes,
                FormatDsv41Mxfp8Planar::kScaleRowBytes, FormatDsv41Mxfp8Planar::kPageMultiple}},
    {Format::kNvfp4DsMlaV41Planar, "nvfp4_ds_mla_v41_planar", FormatDsv41Fp4Planar::kRecordBytes, kCacheAlignment,
     "block-planar: [bs x E2M1 NoPE ++ RoPE] [bs x 32 E4M3] | pad to 512",
     "DeepSeek V4.1 FP4 (vLLM nvfp4_ds_mla, SGLang V41_FP4)", kNvfp4DsMlaV41PlanarFields, kNvfp4DsMlaV41PlanarNames,
     kV4Geometry,
     PageLayout{mlakv::PageKind::kBlockPlanar, FormatDsv41Fp4Planar::kDataRowBytes,
                FormatDsv41Fp4Planar::kScaleRowBytes, FormatDsv41Fp4Planar::kPageMultiple}},
}};

}  // namespace

std::span<const FormatInfo> formats() noexcept { return kFormats; }

const FormatInfo& format_info(Format format) noexcept { return kFormats[static_cast<std::size_t>(format)]; }

std::int64_t page_bytes(const FormatInfo& info, std::int64_t block_size) {
  return format::page_bytes(info.page.kind, block_size, info.record_bytes, info.page.page_multiple);
}

std::int64_t field_offset(const FormatInfo& info, const FieldInfo& field, std::int64_t block_size, std::int64_t token,
                          std::int64_t slot_stride) {
  const format::PageRows rows =
      format::page_rows(info.page.kind, block_size, slot_stride > 0 ? slot_stride : info.record_bytes,
                        info.page.data_row_bytes, info.page.scale_row_bytes);
  return format::page_offset(rows, token, field.region, field.offset);
}

std::string format_ids() {
  std::string ids;
  for (const FormatInfo& info : kFormats) {
    if (!ids.empty()) ids += ", ";
    ids += info.id;
  }
  return ids;
}

Format parse_format(std::string_view id) {
  for (const FormatInfo& info : kFormats) {
    if (info.id == id) return info.format;
  }
  throw Error(ErrorCode::kValue,
              "mlakv::parse_format: format: unknown id '" + std::string(id) + "', expected one of " + format_ids());
}

}  // namespace mlakv
