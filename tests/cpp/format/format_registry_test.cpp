// SPDX-License-Identifier: Apache-2.0
// The registry against docs/ABI.md: ids, sizes, fields, lookups.
#include <gtest/gtest.h>

#include <string>

#include "mlakv/error.h"
#include "mlakv/formats.h"

namespace {

using mlakv::Format;

TEST(format_registry, ids_and_record_sizes_match_abi) {
  const std::pair<const char*, int> expected[] = {
      {"bf16", 1152},
      {"fp16", 1152},
      {"fp8_e4m3", 576},
      {"fp8_ds_mla", 656},
      {"nvfp4_ds_mla", 432},
      {"nvfp4_ds_mla_fp8_rope", 368},
      {"nvfp4_ds_mla_fp8_rope_pts", 368},
      {"nvfp4_fp8_ds_mla", 352},
      {"fp8_ds_mla_v4", 584},
      {"fp8_ds_mla_v41", 528},
      {"nvfp4_ds_mla_v41", 288},
      {"fp8_ds_mla_v41_planar", 528},
      {"nvfp4_ds_mla_v41_planar", 288},
  };
  ASSERT_EQ(mlakv::formats().size(), std::size(expected));
  for (std::size_t i = 0; i < std::size(expected); ++i) {
    const mlakv::FormatInfo& info = mlakv::formats()[i];
    EXPECT_EQ(info.id, expected[i].first);
    EXPECT_EQ(info.record_bytes, expected[i].second) << info.id;
    EXPECT_EQ(info.cache_alignment, 16) << info.id;
    EXPECT_EQ(static_cast<std::size_t>(info.format), i) << info.id;
    EXPECT_EQ(&mlakv::format_info(info.format), &info);
    EXPECT_EQ(mlakv::parse_format(info.id), info.format);
  }
}

TEST(format_registry, fields_cover_every_byte_of_both_rows_in_order) {
  for (const mlakv::FormatInfo& info : mlakv::formats()) {
    int next[2] = {0, 0};
    for (const mlakv::FieldInfo& f : info.fields) {
      ASSERT_TRUE(f.region == mlakv::kDataRegion || f.region == mlakv::kScaleRegion) << info.id << "." << f.name;
      EXPECT_EQ(f.offset, next[f.region]) << info.id << "." << f.name;
      EXPECT_FALSE(f.element.empty()) << info.id << "." << f.name;
      next[f.region] = f.offset + f.bytes;
    }
    EXPECT_EQ(next[mlakv::kDataRegion], info.page.data_row_bytes) << info.id;
    EXPECT_EQ(next[mlakv::kScaleRegion], info.page.scale_row_bytes) << info.id;
    EXPECT_EQ(info.page.data_row_bytes + info.page.scale_row_bytes, info.record_bytes) << info.id;
  }
}

TEST(format_registry, v4_page_is_block_planar_with_448_nope_and_64_rope_values) {
  const auto& v4 = mlakv::format_info(Format::kFp8DsMlaV4);
  EXPECT_EQ(v4.page.kind, mlakv::PageKind::kBlockPlanar);
  EXPECT_EQ(v4.geometry.nope_dims, 448);
  EXPECT_EQ(v4.geometry.rope_dims, 64);
  EXPECT_TRUE(v4.geometry.v_includes_rope);
  EXPECT_EQ(v4.page.data_row_bytes, 576);
  EXPECT_EQ(v4.page.scale_row_bytes, 8);
  EXPECT_EQ(v4.page.page_multiple, 576);
  // 64 tokens: 64 x 584 = 37376 B, padded to 65 x 576 = 37440 (FlashMLA's and vLLM's page).
  EXPECT_EQ(mlakv::page_bytes(v4, 64), 37440);
  EXPECT_EQ(mlakv::page_bytes(v4, 1), 1152);
  // Field offsets: data rows first, then scale rows; token 5 of a 64-token page.
  EXPECT_EQ(mlakv::field_offset(v4, v4.fields[0], 64, 5), 5 * 576);        // nope
  EXPECT_EQ(mlakv::field_offset(v4, v4.fields[1], 64, 5), 5 * 576 + 448);  // rope
  EXPECT_EQ(mlakv::field_offset(v4, v4.fields[2], 64, 5), 64 * 576 + 5 * 8);
  EXPECT_EQ(mlakv::field_offset(v4, v4.fields[3], 64, 5), 64 * 576 + 5 * 8 + 7);
  EXPECT_EQ(mlakv::field_offset(v4, v4.fields[3], 64, 5, 4096), 64 * 576 + 5 * 8 + 7);  // slot stride is nominal
  EXPECT_EQ(v4.fields[2].element, "UE8M0");
  EXPECT_EQ(v4.fields[2].group, 64);
  EXPECT_EQ(v4.fields[2].region, mlakv::kScaleRegion);
}

// vLLM's and SGLang's V4.1 pages: FlashMLA's V4.1 rows (the token-major
// records' fields, in the same order and widths), region after region.
TEST(format_registry, v41_planar_pages_hold_the_token_major_records_rows_in_two_regions) {
  const std::pair<Format, Format> pairs[] = {{Format::kFp8DsMlaV41, Format::kFp8DsMlaV41Planar},
                                             {Format::kNvfp4DsMlaV41, Format::kNvfp4DsMlaV41Planar}};
  for (const auto& [token_major, planar] : pairs) {
    const auto& t = mlakv::format_info(token_major);
    const auto& p = mlakv::format_info(planar);
    EXPECT_EQ(p.page.kind, mlakv::PageKind::kBlockPlanar) << p.id;
    EXPECT_EQ(p.page.page_multiple, 512) << p.id;
    EXPECT_EQ(p.record_bytes, t.record_bytes) << p.id;
    EXPECT_EQ(p.geometry.nope_dims, 448) << p.id;
    EXPECT_TRUE(p.geometry.v_includes_rope) << p.id;
    ASSERT_EQ(p.fields.size(), 2u) << p.id;
    ASSERT_EQ(t.fields.size(), 2u) << t.id;
    EXPECT_EQ(p.page.data_row_bytes, t.fields[0].bytes) << p.id;
    EXPECT_EQ(p.page.scale_row_bytes, t.fields[1].bytes) << p.id;
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(p.fields[i].name, t.fields[i].name) << p.id;
      EXPECT_EQ(p.fields[i].bytes, t.fields[i].bytes) << p.id;
      EXPECT_EQ(p.fields[i].element, t.fields[i].element) << p.id;
      EXPECT_EQ(p.fields[i].group, t.fields[i].group) << p.id;
      EXPECT_EQ(p.fields[i].offset, 0) << p.id;
      EXPECT_EQ(p.fields[i].region, i == 0 ? mlakv::kDataRegion : mlakv::kScaleRegion) << p.id;
    }
  }
}

TEST(format_registry, token_major_formats_have_no_scale_rows_and_unpadded_pages) {
  for (const mlakv::FormatInfo& info : mlakv::formats()) {
    if (info.page.kind != mlakv::PageKind::kTokenMajor) continue;
    EXPECT_EQ(info.geometry.rope_dims, 64) << info.id;
    const bool v4_family = info.format == Format::kFp8DsMlaV41 || info.format == Format::kNvfp4DsMlaV41;
    EXPECT_EQ(info.geometry.nope_dims, v4_family ? 448 : 512) << info.id;
    EXPECT_EQ(info.geometry.v_includes_rope, v4_family) << info.id;
    EXPECT_EQ(info.page.scale_row_bytes, 0) << info.id;
    EXPECT_EQ(mlakv::page_bytes(info, 64), 64 * info.record_bytes) << info.id;
  }
  EXPECT_EQ(mlakv::format_info(Format::kFp8DsMla).page.kind, mlakv::PageKind::kTokenMajor);
}

TEST(format_registry, token_major_field_offset_is_token_times_slot_stride_plus_offset) {
  for (const mlakv::FormatInfo& info : mlakv::formats()) {
    if (info.page.kind != mlakv::PageKind::kTokenMajor) continue;
    for (const mlakv::FieldInfo& f : info.fields) {
      EXPECT_EQ(mlakv::field_offset(info, f, 64, 0), f.offset) << info.id << "." << f.name;
      EXPECT_EQ(mlakv::field_offset(info, f, 64, 5), 5 * info.record_bytes + f.offset) << info.id << "." << f.name;
      EXPECT_EQ(mlakv::field_offset(info, f, 64, 5, info.record_bytes + 48), 5 * (info.record_bytes + 48) + f.offset)
          << info.id << "." << f.name;
    }
  }
}

TEST(format_registry, element_types_and_groups_name_each_scale_and_its_coverage) {
  const auto& fp8 = mlakv::format_info(Format::kFp8DsMla);
  EXPECT_EQ(fp8.fields[0].element, "E4M3");
  EXPECT_EQ(fp8.fields[1].element, "f32");
  EXPECT_EQ(fp8.fields[1].group, 128);
  EXPECT_EQ(fp8.fields[2].element, "raw16");
  const auto& nvfp4 = mlakv::format_info(Format::kNvfp4Fp8DsMla);
  EXPECT_EQ(nvfp4.fields[0].element, "E2M1x2");
  EXPECT_EQ(nvfp4.fields[0].group, 16);
  EXPECT_EQ(nvfp4.fields[2].element, "E4M3");
  EXPECT_EQ(nvfp4.fields[2].group, 16);
}

TEST(format_registry, compact_record_keeps_stock_offsets) {
  const auto& stock = mlakv::format_info(Format::kNvfp4DsMla);
  const auto& compact = mlakv::format_info(Format::kNvfp4DsMlaFp8Rope);
  for (int i = 0; i < 2; ++i) {  // latent codes and group scales
    EXPECT_EQ(stock.fields[i].offset, compact.fields[i].offset);
    EXPECT_EQ(stock.fields[i].bytes, compact.fields[i].bytes);
  }
  EXPECT_EQ(stock.fields.back().offset, compact.fields.back().offset);  // RoPE at 304 in both
}

TEST(format_registry, unknown_id_lists_accepted_ones) {
  try {
    mlakv::parse_format("nvfp4");
    FAIL() << "no exception";
  } catch (const mlakv::Error& e) {
    EXPECT_EQ(e.code(), mlakv::ErrorCode::kValue);
    EXPECT_EQ(std::string(e.what()),
              "mlakv::parse_format: format: unknown id 'nvfp4', expected one of bf16, fp16, fp8_e4m3, fp8_ds_mla, "
              "nvfp4_ds_mla, nvfp4_ds_mla_fp8_rope, nvfp4_ds_mla_fp8_rope_pts, nvfp4_fp8_ds_mla, fp8_ds_mla_v4, "
              "fp8_ds_mla_v41, nvfp4_ds_mla_v41, fp8_ds_mla_v41_planar, nvfp4_ds_mla_v41_planar");
  }
}

}  // namespace
