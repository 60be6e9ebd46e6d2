// SPDX-License-Identifier: Apache-2.0
// The one rule that places a field of a token in its page: every writer,
// reader, the registry's field_offset, inspect and capacity go through it.
#pragma once

#include <cstdint>

#include "format/hd.h"
#include "format/specs.h"

namespace mlakv::format {

/// Where the rows of a page's tokens lie, from the page's first byte.
struct PageRows {
  std::int64_t data_row_stride = 0;   // bytes between consecutive tokens' records (data rows)
  std::int64_t scale_region = 0;      // first byte of the scale rows (block-planar pages)
  std::int64_t scale_row_stride = 0;  // bytes between consecutive tokens' scale rows
};

/// Byte `offset` of token `token`'s row in `region` (kDataRegion: the
/// token's record, or its data row; kScaleRegion: its scale row), counted
/// from the first byte of the token's page.
MLAKV_HD constexpr std::int64_t page_offset(const PageRows& rows, std::int64_t token, int region, std::int64_t offset) {
  if (region == kDataRegion) return token * rows.data_row_stride + offset;
  return rows.scale_region + token * rows.scale_row_stride + offset;
}

/// The rows of a page of `block_size` tokens: token-major records `slot_stride`
/// bytes apart, or block-planar rows packed region after region.
constexpr PageRows page_rows(PageKind kind, std::int64_t block_size, std::int64_t slot_stride,
                             std::int64_t data_row_bytes, std::int64_t scale_row_bytes) {
  if (kind == PageKind::kTokenMajor) return {slot_stride, 0, 0};
  return {data_row_bytes, block_size * data_row_bytes, scale_row_bytes};
}

/// The bytes a page of `block_size` tokens occupies (padding included).
constexpr std::int64_t page_bytes(PageKind kind, std::int64_t block_size, std::int64_t record_bytes,
                                  std::int64_t page_multiple) {
  const std::int64_t used = block_size * record_bytes;
  if (kind == PageKind::kTokenMajor) return used;
  return (used + page_multiple - 1) / page_multiple * page_multiple;
}

static_assert(page_bytes(PageKind::kBlockPlanar, 64, 584, 576) == 37440, "65 x 576: FlashMLA's V4 page of 64 tokens");
static_assert(page_offset(page_rows(PageKind::kBlockPlanar, 64, 584, 576, 8), 3, kScaleRegion, 6) ==
              64 * 576 + 3 * 8 + 6);

}  // namespace mlakv::format
