// SPDX-License-Identifier: Apache-2.0
// The writers' and readers' memory traffic with the encoding taken out: the
// same loads and stores, at the same addresses, from the same one-warp-per-
// token structure, but the record bytes are the input bytes copied. It shows
// in the same run how near the access pattern itself (a slot load, scattered
// records of 352-1152 bytes) can come to the contiguous copy, so a writer's
// gap to the copy splits into what the pattern costs and what encoding costs.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

namespace mlakv_bench {

inline constexpr int kWarpSize = 32;
inline constexpr int kPatternWarpsPerBlock = 4;     // as the writers and readers
inline constexpr int kInputBytes = (512 + 64) * 2;  // one token's bf16 latent and RoPE

// `valid`, known only once `word` has arrived, as the writers' own helper
// (once_arrived in the library's warp helpers, which the benchmark does not
// see): it keeps the input loads issued with the slot's, before the branch on
// the slot, so that the pattern has the writers' load schedule. A population
// count is at most 32, which the compiler does not assume.
__device__ __forceinline__ bool once_arrived(bool valid, unsigned word) {
  unsigned bits;
  asm("popc.b32 %0, %1;" : "=r"(bits) : "r"(word));
  return (static_cast<unsigned>(valid) & static_cast<unsigned>(bits <= 32u)) != 0u;
}

// One warp per token, as write_records_kernel: lane l loads bytes
// [32l, 32l + 32) of the latent and [4l, 4l + 4) of the RoPE (issued with the
// slot's load, as the writers do), and the warp
// stores the record's 16-byte chunks straight from registers (chunk c from
// lane c % 32), the least work that moves these bytes.
template <int kRecordBytes>
__global__ void writer_pattern_kernel(const std::uint8_t* kv_c, const std::uint8_t* k_pe, const std::int64_t* slots,
                                      std::uint8_t* cache, std::int64_t tokens) {
  static_assert(kRecordBytes <= kInputBytes, "a record is never larger than its inputs");
  constexpr int kChunks = kRecordBytes / 16;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const std::int64_t token = static_cast<std::int64_t>(blockIdx.x) * kPatternWarpsPerBlock + warp;
  if (token >= tokens) return;
  const std::int64_t slot = __ldg(slots + token);
  const auto* row = reinterpret_cast<const uint4*>(kv_c + token * 1024 + 32 * lane);
  const uint4 a = __ldg(row);
  const uint4 b = __ldg(row + 1);
  const unsigned r = __ldg(reinterpret_cast<const unsigned*>(k_pe + token * 128 + 4 * lane));
  if (!once_arrived(slot >= 0 && slot < tokens, a.x ^ b.x ^ r)) return;
  auto* record = reinterpret_cast<uint4*>(cache + slot * kRecordBytes);
  const uint4 chunks[3] = {a, b, make_uint4(r, r, r, r)};
#pragma unroll
  for (int j = 0; j < 3; ++j) {
    if (lane + j * kWarpSize < kChunks) record[lane + j * kWarpSize] = chunks[j];
  }
}

// As gather_records_kernel: two rows per warp, both records loaded before
// either row is stored; each 1,152-byte output row is stored from registers
// (chunk c from lane c % 32), its bytes taken from the lane's record chunks.
template <int kRecordBytes>
__global__ void reader_pattern_kernel(const std::uint8_t* cache, const std::int64_t* slots, std::uint8_t* out,
                                      std::int64_t tokens) {
  constexpr int kRows = 2;
  constexpr int kChunks = kRecordBytes / 16;
  constexpr int kChunksPerLane = (kChunks + kWarpSize - 1) / kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const std::int64_t first = (static_cast<std::int64_t>(blockIdx.x) * kPatternWarpsPerBlock + warp) * kRows;
  if (first >= tokens) return;
  uint4 chunks[kRows][kChunksPerLane] = {};
#pragma unroll
  for (int k = 0; k < kRows; ++k) {
    const std::int64_t slot = first + k < tokens ? __ldg(slots + first + k) : 0;
    const auto* src = reinterpret_cast<const uint4*>(cache + slot * kRecordBytes);
#pragma unroll
    for (int j = 0; j < kChunksPerLane; ++j) {
      const int c = lane + j * kWarpSize;
      if (c < kChunks) chunks[k][j] = __ldg(src + c);
    }
  }
#pragma unroll
  for (int k = 0; k < kRows; ++k) {
    if (first + k >= tokens) break;
    auto* dst = reinterpret_cast<uint4*>(out + (first + k) * kInputBytes);
#pragma unroll
    for (int j = 0; j < 3; ++j) {
      if (lane + j * kWarpSize < kInputBytes / 16) dst[lane + j * kWarpSize] = chunks[k][j % kChunksPerLane];
    }
  }
}

/// Calls fn with the record size as a compile-time constant (std::integral_constant).
template <class Fn>
void with_record_bytes(int record_bytes, Fn&& fn) {
  switch (record_bytes) {
    case 1152:
      return fn(std::integral_constant<int, 1152>{});
    case 656:
      return fn(std::integral_constant<int, 656>{});
    case 576:
      return fn(std::integral_constant<int, 576>{});
    case 432:
      return fn(std::integral_constant<int, 432>{});
    case 368:
      return fn(std::integral_constant<int, 368>{});
    case 352:
      return fn(std::integral_constant<int, 352>{});
    default:
      std::fprintf(stderr, "no pattern kernel for %d-byte records\n", record_bytes);
      std::exit(1);
  }
}

}  // namespace mlakv_bench
