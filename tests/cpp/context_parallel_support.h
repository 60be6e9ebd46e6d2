// SPDX-License-Identifier: Apache-2.0
// Shared by the context-parallel tests: one sequence of synthetic tokens
// written twice, into one whole cache (slot = position) and into N rank
// shards in vLLM's interleaved layout. The shards are placed by an
// independent rule (a rank stores the tokens it owns densely, in position
// order, through its block table), not by dcp_local_slots' formula.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "attention_support.h"
#include "mlakv/mlakv.h"

namespace mlakv::test {

struct ShardedSequence {
  Format format;
  std::int64_t tokens;
  std::int64_t world;
  std::int64_t interleave;
  std::int64_t block_size = 64;
  float k_scale = 1.0f;
  std::int64_t whole_blocks;
  std::int64_t table_width;                       // blocks per rank's table row: ceil(tokens / (block_size N))
  std::vector<std::uint8_t> whole;                // [whole_blocks, 64, record]
  std::vector<std::vector<std::uint8_t>> shards;  // per rank: [table_width + 1, 64, record]
  std::vector<std::vector<std::int32_t>> tables;  // per rank: [2, table_width]; row 1 is this sequence's
  std::vector<std::int32_t> owner;                // [tokens]: the rank holding each position
  std::vector<std::int32_t> local;                // [tokens]: its slot there
  float max_abs_latent = 0.0f;  // the largest |latent value| written: the scale of the GPU decode's error

  ShardedSequence(Format f, std::int64_t n, std::int64_t world_size, std::int64_t interleave_size, std::uint64_t seed)
      : format(f), tokens(n), world(world_size), interleave(interleave_size) {
    whole_blocks = (n + block_size - 1) / block_size;
    table_width = (n + block_size * world - 1) / (block_size * world);
    const DType dtype = f == Format::kFp16 ? DType::kFloat16 : DType::kBFloat16;
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<std::uint16_t> kv(static_cast<std::size_t>(n) * 512);
    std::vector<std::uint16_t> pe(static_cast<std::size_t>(n) * 64);
    for (auto& v : kv) {
      const float x = 0.5f * normal(rng);
      max_abs_latent = std::max(max_abs_latent, 1.01f * std::fabs(x));  // 1.01: its 16-bit rounding
      v = dtype == DType::kFloat16 ? round_fp16(x) : round_bf16(x);
    }
    for (auto& v : pe) v = dtype == DType::kFloat16 ? round_fp16(normal(rng)) : round_bf16(normal(rng));
    const TensorView scale = make_view(&k_scale, DType::kFloat32, {1});
    const TensorView kv_view = make_view(kv.data(), dtype, {n, 512});
    const TensorView pe_view = make_view(pe.data(), dtype, {n, 64});
    whole.assign(static_cast<std::size_t>(whole_blocks * block_size * record_bytes()), 0);
    std::vector<std::int64_t> slots(static_cast<std::size_t>(n));
    for (std::int64_t t = 0; t < n; ++t) slots[t] = t;
    write_records(f, kv_view, pe_view, whole_view(), make_view(slots.data(), DType::kInt64, {n}), &scale);
    // Rank j's blocks, in reverse order, so the table is not the identity; row 0 belongs to another sequence.
    owner.assign(static_cast<std::size_t>(n), -1);
    local.assign(static_cast<std::size_t>(n), -1);
    std::vector<std::int64_t> stored(static_cast<std::size_t>(world), 0);
    for (std::int64_t t = 0; t < n; ++t) {
      const auto j = static_cast<std::int32_t>((t % (block_size * world)) / interleave % world);
      const std::int64_t k = stored[j]++;
      owner[t] = j;
      local[t] = static_cast<std::int32_t>((table_width - 1 - k / block_size) * block_size + k % block_size);
    }
    for (std::int64_t j = 0; j < world; ++j) {
      std::vector<std::int32_t> table(static_cast<std::size_t>(2 * table_width), 0);
      for (std::int64_t b = 0; b < table_width; ++b)
        table[table_width + b] = static_cast<std::int32_t>(table_width - 1 - b);
      tables.push_back(table);
      shards.emplace_back(static_cast<std::size_t>((table_width + 1) * block_size * record_bytes()), 0);
      for (std::int64_t t = 0; t < n; ++t) slots[t] = owner[t] == j ? local[t] : -1;
      write_records(f, kv_view, pe_view, shard_view(j), make_view(slots.data(), DType::kInt64, {n}), &scale);
    }
  }

  int record_bytes() const { return format_info(format).record_bytes; }
  TensorView whole_view() { return make_view(whole.data(), DType::kUInt8, {whole_blocks, block_size, record_bytes()}); }
  TensorView shard_view(std::int64_t rank) {
    return make_view(shards[rank].data(), DType::kUInt8, {table_width + 1, block_size, record_bytes()});
  }
  TensorView table_view(std::int64_t rank) { return make_view(tables[rank].data(), DType::kInt32, {2, table_width}); }
  ContextParallelLayout layout(std::int64_t rank) const { return {world, rank, interleave, block_size}; }
};

/// Positions a row selects: `topk` distinct-or-not positions of [0, tokens), seeded.
inline std::vector<std::int32_t> random_positions(std::int64_t rows, std::int64_t topk, std::int64_t tokens,
                                                  std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int32_t> position(0, static_cast<std::int32_t>(tokens - 1));
  std::vector<std::int32_t> p(static_cast<std::size_t>(rows * topk));
  for (auto& v : p) v = position(rng);
  return p;
}

}  // namespace mlakv::test
