// SPDX-License-Identifier: Apache-2.0
// The three benchmarks (one file each) and what the writer and reader runs share.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "harness.h"
#include "mlakv/formats.h"

namespace mlakv_bench {

// A set of device buffers for one writer or reader launch (runs rotate over sets).
struct BufferSet {
  std::unique_ptr<DeviceBuffer> kv_c, k_pe, slots, cache;
};

// Slots 0..tokens-1, in order or shuffled by `seed`.
inline std::vector<std::int64_t> make_slots(std::int64_t tokens, bool random, std::uint64_t seed) {
  std::vector<std::int64_t> s(static_cast<std::size_t>(tokens));
  std::iota(s.begin(), s.end(), 0);
  if (random) std::shuffle(s.begin(), s.end(), std::mt19937_64(seed));
  return s;
}

// The bench's cache of `tokens` slots 0..tokens-1 of `info`'s records: one
// block of `tokens` records for the 512 + 64 formats; pages of 64 tokens at the
// padded page stride for the DeepSeek V4 family (block-planar pages and
// token-major V4.1 records alike), as the engines allocate them.
struct BenchCache {
  std::int64_t num_blocks, block_size, block_stride;
  std::size_t bytes() const { return static_cast<std::size_t>(num_blocks * block_stride); }
  mlakv::TensorView view(void* data, std::int64_t record_bytes) const {
    mlakv::TensorView v = mlakv::make_view(data, mlakv::DType::kUInt8, {num_blocks, block_size, record_bytes},
                                           {mlakv::DeviceType::kCuda, 0});
    v.strides[0] = block_stride;
    return v;
  }
};

inline BenchCache bench_cache(const mlakv::FormatInfo& info, std::int64_t tokens) {
  if (info.geometry.nope_dims == 512) return {1, tokens, tokens * info.record_bytes};
  constexpr std::int64_t kBlockSize = 64;
  return {(tokens + kBlockSize - 1) / kBlockSize, kBlockSize, mlakv::page_bytes(info, kBlockSize)};
}

// write_records against the copy, its access pattern alone (pattern_copy.cuh) and, for the 368-byte record
// flushed, the one-block-per-token baseline.
void bench_writer(Bench& b, mlakv::Format format, std::int64_t tokens, bool random, bool graph, int sets);

// gather_records to the bf16 prefill layout against the copy and its access pattern alone.
void bench_reader(Bench& b, mlakv::Format format, std::int64_t tokens, bool random, int sets);

// Sparse MLA decode: R query rows x H heads attend to K random entries of a
// 65,536-token cache. TFLOP/s counts 2 R H K (576 + 512); GB/s counts the
// record bytes gathered; the two-step path is gather_records to bf16 rows
// followed by the same decode over those rows as bf16 records.
void bench_attention(Bench& b, mlakv::Format format, std::int64_t rows, std::int64_t heads, std::int64_t topk);

}  // namespace mlakv_bench
