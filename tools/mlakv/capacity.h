// SPDX-License-Identifier: Apache-2.0
// How many tokens each record format fits in a KV memory budget.
#pragma once

#include <cstdint>
#include <vector>

#include "mlakv/formats.h"

namespace mlakv::tool {

inline constexpr std::int64_t kSequenceTokens = 131072;  // a 128k-token sequence
/// The block size capacity assumes for block-planar pages (FlashMLA's and vLLM's for DeepSeek V4).
inline constexpr std::int64_t kPlanarBlockSize = 64;

struct Capacity {
  Format format;
  int record_bytes;              // per token per layer
  std::int64_t bytes_per_token;  // all layers, page padding included
  std::uint64_t tokens;          // whole pages: floor(kv_memory / (layers * page_bytes)) * tokens per page
  std::uint64_t sequences;       // floor(tokens / 131072)
  double tokens_vs_bf16;         // tokens relative to the 1152-byte bf16 record
};

/// One entry per format of formats() storing `nope_dims` NoPE values per token
/// (512: the DeepSeek V3 family's latent; 448: DeepSeek V4), in registry order.
std::vector<Capacity> capacities(std::uint64_t kv_memory, int layers, int nope_dims = 512);

}  // namespace mlakv::tool
