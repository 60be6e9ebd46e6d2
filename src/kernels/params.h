// SPDX-License-Identifier: Apache-2.0
// Validated, plain-data descriptions of one write and one gather: what the
// public API hands to a backend (CPU loops, CUDA kernels). Input and cache
// strides are in bytes; float output strides in elements.
#pragma once

#include <cstdint>

#include "codec/token.h"
#include "mlakv/formats.h"

namespace mlakv::kernels {

/// The paged cache: record of flat slot s at
/// data + (s / block_size) * stride_block + (s % block_size) * stride_slot.
struct CacheLayout {
  std::uint8_t* data;
  std::int64_t block_size;
  std::int64_t capacity;  // num_blocks * block_size: slots outside [0, capacity) are skipped
  std::int64_t stride_block;
  std::int64_t stride_slot;
};

/// Address of a record; `slot` must be in [0, capacity).
inline std::uint8_t* record_address(const CacheLayout& cache, std::int64_t slot) {
  return cache.data + (slot / cache.block_size) * cache.stride_block + (slot % cache.block_size) * cache.stride_slot;
}

inline bool slot_in_range(const CacheLayout& cache, std::int64_t slot) { return slot >= 0 && slot < cache.capacity; }

struct WriteParams {
  Format format;
  codec::InputDtype dtype;
  const std::uint8_t* kv_c;  // [T, 512] rows of 16-bit values
  std::int64_t stride_kv_c;  // bytes between rows
  const std::uint8_t* k_pe;  // [T, 64]
  std::int64_t stride_k_pe;
  const std::int64_t* slot_mapping;  // [T]
  std::int64_t num_tokens;
  CacheLayout cache;
  codec::EncodeParams encode;
};

struct GatherParams {
  Format format;
  CacheLayout cache;
  const std::int64_t* slots;  // [N]
  std::int64_t num_slots;
  float* kv_c_out;  // [N, 512]
  std::int64_t stride_kv_c_out;
  float* k_pe_out;  // [N, 64]
  std::int64_t stride_k_pe_out;
  codec::DecodeParams decode;
};

}  // namespace mlakv::kernels
