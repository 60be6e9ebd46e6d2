// SPDX-License-Identifier: Apache-2.0
// Validated, plain-data descriptions of one write and one gather: what the
// public API hands to a backend (CPU loops, CUDA kernels). Input and cache
// strides are in bytes; output strides in elements.
#pragma once

#include <cstdint>

#include "codec/token.h"
#include "format/page.h"
#include "mlakv/vocabulary.h"

namespace mlakv::params {

/// Unsigned 32-bit division by a divisor fixed when the cache is validated:
/// n / d = (t + ((n - t) >> shift1)) >> shift2 with t = umulhi(multiplier, n)
/// (Granlund and Montgomery, "Division by invariant integers using
/// multiplication", 1994), exact for every n < 2^32. A GPU's 32-bit division is
/// about twenty instructions; this is five, and every kernel locates records.
struct BlockDivider {
  std::uint32_t divisor = 1;
  std::uint32_t multiplier = 1;
  std::uint32_t shift1 = 0;
  std::uint32_t shift2 = 0;

  BlockDivider() = default;
  explicit BlockDivider(std::uint32_t d) : divisor(d) {
    std::uint32_t log2_ceil = 0;
    while (log2_ceil < 32 && (std::uint64_t{1} << log2_ceil) < d) ++log2_ceil;
    multiplier = static_cast<std::uint32_t>(((std::uint64_t{1} << 32) * ((std::uint64_t{1} << log2_ceil) - d)) / d + 1);
    shift1 = log2_ceil < 1 ? log2_ceil : 1;
    shift2 = log2_ceil > 1 ? log2_ceil - 1 : 0;
  }

  MLAKV_HD std::uint32_t quotient(std::uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const std::uint32_t t = __umulhi(multiplier, n);
#else
    const auto t = static_cast<std::uint32_t>((static_cast<std::uint64_t>(multiplier) * n) >> 32);
#endif
    return (t + ((n - t) >> shift1)) >> shift2;
  }
};

/// The paged cache: flat slot s is token s % block_size of page s / block_size,
/// which starts at data + page * block_stride_bytes; format::page_offset places the
/// token's rows in its page (token-major: the record at token * slot_stride_bytes).
struct CacheLayout {
  std::uint8_t* data;
  std::int64_t block_size;
  std::int64_t capacity;  // num_blocks * block_size: slots outside [0, capacity) are skipped
  std::int64_t block_stride_bytes;
  std::int64_t slot_stride_bytes;
  BlockDivider block_divider;  // by block_size, used while capacity <= 2^32
  format::PageRows rows;       // the token rows of a page (token-major: records slot_stride_bytes apart)
};

/// A token-major cache (`rows` omitted), or one whose pages hold `rows`.
inline CacheLayout make_cache_layout(std::uint8_t* data, std::int64_t block_size, std::int64_t capacity,
                                     std::int64_t block_stride_bytes, std::int64_t slot_stride_bytes,
                                     const format::PageRows* rows = nullptr) {
  const BlockDivider divider =
      capacity <= 0xFFFFFFFFll ? BlockDivider(static_cast<std::uint32_t>(block_size)) : BlockDivider();
  return {data,
          block_size,
          capacity,
          block_stride_bytes,
          slot_stride_bytes,
          divider,
          rows != nullptr ? *rows : format::PageRows{slot_stride_bytes, 0, 0}};
}

/// The page of a slot and the slot's token in it; `slot` must be in [0, capacity).
struct PagePosition {
  std::int64_t page;
  std::int64_t token;
};

MLAKV_HD PagePosition page_position(const CacheLayout& cache, std::int64_t slot) {
  if (cache.capacity <= 0xFFFFFFFFll) {
    const auto s = static_cast<std::uint32_t>(slot);
    const std::uint32_t block = cache.block_divider.quotient(s);
    return {static_cast<std::int64_t>(block), static_cast<std::int64_t>(s - block * cache.block_divider.divisor)};
  }
  return {slot / cache.block_size, slot % cache.block_size};
}

/// Address of byte `offset` of the token's row in `region` (format::page_offset).
MLAKV_HD std::uint8_t* field_address(const CacheLayout& cache, PagePosition at, int region, int offset) {
  return cache.data + at.page * cache.block_stride_bytes + format::page_offset(cache.rows, at.token, region, offset);
}

/// Address of a token-major record, or of a block-planar token's data row.
MLAKV_HD std::uint8_t* record_address(const CacheLayout& cache, std::int64_t slot) {
  return field_address(cache, page_position(cache, slot), format::kDataRegion, 0);
}

MLAKV_HD bool slot_in_range(const CacheLayout& cache, std::int64_t slot) { return slot >= 0 && slot < cache.capacity; }

/// The record of a slot, or null for a slot outside [0, capacity) (an entry without one).
MLAKV_HD const std::uint8_t* record_or_null(const CacheLayout& cache, std::int64_t slot) {
  return slot_in_range(cache, slot) ? record_address(cache, slot) : nullptr;
}

struct WriteParams {
  Format format;
  codec::InputDtype dtype;
  const std::uint8_t* kv_c;  // [T, 512] rows of 16-bit values
  std::int64_t kv_c_stride_bytes;
  const std::uint8_t* k_pe;  // [T, 64]
  std::int64_t k_pe_stride_bytes;
  const std::int64_t* slot_mapping;  // [T]
  std::int64_t num_tokens;
  CacheLayout cache;
  codec::EncodeParams encode;
  const float* k_scale_device;  // when set (CUDA), replaces encode.k_scale, read by the kernel
};

enum class OutDtype : std::uint8_t { kFloat32, kBf16 };

/// Which record each output row decodes: slots[row], or the position
/// row - cu_seq_lens[b] of sequence b through its block table (paged).
struct RowSource {
  const std::int64_t* slots;              // [rows], or null when paged
  const std::int32_t* block_table;        // [batch, max_blocks]
  std::int64_t block_table_stride_elems;  // elements
  std::int64_t max_blocks;
  const std::int32_t* seq_lens;     // [batch]
  const std::int32_t* cu_seq_lens;  // [batch + 1]
  std::int64_t batch;
};

/// The flat slot of output row `row`, or -1 for a row that reads as zeros.
MLAKV_HD std::int64_t row_slot(const RowSource& src, const CacheLayout& cache, std::int64_t row) {
  if (src.slots != nullptr) return src.slots[row];
  // The sequence holding the row: the last b with cu_seq_lens[b] <= row.
  std::int64_t lo = 0, hi = src.batch;  // answer in [lo, hi)
  if (src.batch <= 0 || row < src.cu_seq_lens[0]) return -1;
  while (hi - lo > 1) {
    const std::int64_t mid = (lo + hi) / 2;
    if (src.cu_seq_lens[mid] <= row)
      lo = mid;
    else
      hi = mid;
  }
  const std::int64_t pos = row - src.cu_seq_lens[lo];
  if (pos >= src.seq_lens[lo]) return -1;
  const std::int64_t block_index = pos / cache.block_size;
  if (block_index >= src.max_blocks) return -1;
  const std::int64_t block = src.block_table[lo * src.block_table_stride_elems + block_index];
  if (block < 0 || block >= cache.capacity / cache.block_size) return -1;
  return block * cache.block_size + pos % cache.block_size;
}

struct GatherParams {
  Format format;
  CacheLayout cache;
  RowSource source;
  std::int64_t num_rows;
  OutDtype out_dtype;
  void* kv_c_out;  // [rows, 512]
  std::int64_t kv_c_out_stride_elems;
  void* k_pe_out;  // [rows, 64]
  std::int64_t k_pe_out_stride_elems;
  codec::DecodeParams decode;
  const float* k_scale_device;  // when set (CUDA), replaces decode.k_scale
};

}  // namespace mlakv::params
