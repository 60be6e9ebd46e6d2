// SPDX-License-Identifier: Apache-2.0
// How many tokens each record format fits in a KV memory budget.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mlakv/formats.h"
#include "models.h"

namespace mlakv::tool {

inline constexpr std::int64_t kSequenceTokens = 131072;  // a 128k-token sequence
/// The block size capacity assumes for block-planar pages (FlashMLA's and vLLM's for DeepSeek V4).
inline constexpr std::int64_t kPlanarBlockSize = 64;

struct Capacity {
  Format format;
  int record_bytes;                        // per token per layer
  std::int64_t bytes_per_token;            // all layers, page padding included (compressed caches: amortized, rounded)
  std::uint64_t tokens;                    // tokens of context the memory holds (compressed caches: one sequence's)
  std::uint64_t sequences;                 // 128k-token sequences the memory holds
  double tokens_vs_bf16;                   // tokens relative to bf16 records of the same values
  std::int64_t window_bytes_per_sequence;  // the sliding windows of one sequence (0 without a window)
  std::uint64_t min_kv_memory;             // the least memory that holds one token (one page of every layer,
                                           // or one sequence's windows and one token's entries)
};

/// One entry per format of formats() storing the model's `nope_dims` NoPE
/// values per token (512: the DeepSeek V3 family's latent; 448: DeepSeek V4),
/// in registry order. Without compressed layers: tokens = whole pages of
/// floor(kv_memory / (layers x page_bytes)), sequences = tokens / 131072. With
/// them (DeepSeek V4), a sequence of L tokens holds, per layer, its last
/// sliding_window tokens and floor(L / ratio) compressed entries, each one
/// record (page padding included): tokens = the longest sequence that fits,
/// sequences = how many 128k-token sequences fit.
std::vector<Capacity> capacities(std::uint64_t kv_memory, const ModelPreset& model);

/// Bytes of a bf16 record of the model's values per token per layer, the
/// baseline of Capacity::tokens_vs_bf16: 1152 (512 + 64 values), 1024 (DeepSeek V4's 448 + 64).
int bf16_record_bytes(const ModelPreset& model);

/// "x bf16: tokens relative to bf16 records of the same 512 + 64 values (1152 B)", a line.
std::string bf16_baseline_note(const ModelPreset& model);

/// For a compressed model: what its layers keep, what its capacity numbers
/// count and what they leave out (lines of text, each ending in a newline).
std::string compressed_note(const ModelPreset& model);

/// For a compressed model, the JSON members its "model" object adds:
/// `, "sliding_window": 128, "compress_ratios": [0, 0, 4, ...]`; "" otherwise.
std::string compression_json(const ModelPreset& model);

}  // namespace mlakv::tool
