// SPDX-License-Identifier: Apache-2.0
// The memory guard: a run that would not fit in host memory is refused with
// an estimate before it starts, rather than ending in bad_alloc (or swapping)
// after minutes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mlakv::tool {

/// Host bytes `mlakv report` holds per token: the bf16 and fp16 activations
/// (16-bit and float32 copies, 2 x 3456), the measurement buffers (inputs,
/// slots, a bf16 cache, float32 and bf16 outputs: 6920) and the accuracy
/// pass's decoded copy (2304). Measured: 530 MB of peak RSS at 32768 tokens,
/// synthetic or read from float32 .npy files (whose values are freed before
/// the measurement buffers are made).
inline constexpr double kReportBytesPerToken = 16140.0;

/// Host bytes `mlakv report`'s sparse-attention check holds per query row:
/// per head about 9.5 KB (its 576 query values and 512 outputs, in their
/// bf16, uploaded and float32 copies; measured: 1.20 MiB per row of 128
/// heads, 0.59 MiB per row of 64) and per selected token an index and its
/// upload (8 B).
inline double report_bytes_per_query_row(std::int64_t heads, std::int64_t topk) {
  return static_cast<double>(heads) * 9472.0 + static_cast<double>(topk) * 8.0;
}

/// Host bytes `mlakv roundtrip` holds per token: the bf16 and fp16
/// activations (2 x 3456), the slots (8) and, one format at a time, the
/// inputs' copy (1152), a cache of up to 1152 B records and the float32
/// outputs with their host copies (2 x 2304). Measured: 891 MB of peak RSS at
/// 65536 tokens, 226 MB at 16384.
inline constexpr double kRoundtripBytesPerToken = 13840.0;

/// Throws mlakv::Error naming `flag` when `tokens` tokens at
/// `bytes_per_token` each, plus `extra_bytes`, need more host memory than is
/// available: "<flag>: <what> need about ..., ... is available; <fewer>",
/// `fewer` holding {} for the largest token count that fits.
void check_host_memory(const std::string& flag, const std::string& what, std::int64_t tokens, double bytes_per_token,
                       double extra_bytes, std::string_view fewer);

}  // namespace mlakv::tool
