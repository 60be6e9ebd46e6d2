// SPDX-License-Identifier: Apache-2.0
// MLA model presets: what the cache arithmetic and the attention check need.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace mlakv::tool {

/// A model's KV cache: per layer, kv_c (nope_dims values) and k_pe (64 values)
/// of every token (the DeepSeek V3 family: kv_lora_rank 512), or, for
/// DeepSeek V4's hybrid attention, of the last `sliding_window` tokens plus one
/// compressed entry per `compress_ratios[layer]` tokens (0: the window only).
struct ModelPreset {
  std::string_view id;
  std::string_view name;
  int layers;              // layers with a KV cache (num_hidden_layers)
  int heads;               // attention heads (num_attention_heads): the query heads of one decode step
  int nope_dims = 512;     // kv_c values per token: kv_lora_rank, or head_dim - qk_rope_head_dim
  int sliding_window = 0;  // tokens every layer keeps uncompressed; 0: no window, every token
  std::span<const int> compress_ratios = {};  // one per layer, or empty: every layer keeps every token

  /// Whether the cache holds fewer entries than tokens x layers (DeepSeek V4).
  [[nodiscard]] bool compressed() const { return !compress_ratios.empty(); }
};

std::span<const ModelPreset> model_presets();

/// The preset `id`; throws mlakv::Error naming --model and listing the known ids.
const ModelPreset& find_model(std::string_view id);

/// "deepseek-v3, deepseek-v3.2, ..."
std::string model_ids();

}  // namespace mlakv::tool
