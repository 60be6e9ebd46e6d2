// SPDX-License-Identifier: Apache-2.0
// MLA model presets: what the cache arithmetic and the attention check need.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace mlakv::tool {

/// Every preset stores kv_lora_rank 512 + qk_rope_head_dim 64 per token per layer.
struct ModelPreset {
  std::string_view id;
  std::string_view name;
  int layers;  // layers with an MLA KV cache (num_hidden_layers)
  int heads;   // attention heads (num_attention_heads): the query heads of one decode step
};

std::span<const ModelPreset> model_presets();

/// The preset `id`; throws mlakv::Error naming --model and listing the known ids.
const ModelPreset& find_model(std::string_view id);

/// "deepseek-v3, deepseek-v3.2, ..."
std::string model_ids();

}  // namespace mlakv::tool
