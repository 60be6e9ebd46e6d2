// SPDX-License-Identifier: Apache-2.0
#include "models.h"

#include <array>

#include "mlakv/error.h"

namespace mlakv::tool {
namespace {

// Layer and head counts from each model's published config.json
// (num_hidden_layers, num_attention_heads); all use kv_lora_rank 512 and a
// 64-dim RoPE key. --layers overrides the layer count for other checkpoints.
//
// DeepSeek-V4-Flash (deepseek-ai/DeepSeek-V4-Flash config.json): 43 layers,
// 64 heads, head_dim 512 with qk_rope_head_dim 64 (448 NoPE values),
// sliding_window 128, and compress_ratios [0, 0, 4, 128, ..., 4, 128, 4] for
// the 43 layers (the list's 44th entry, 0, is the MTP layer, which the other
// presets leave out too): layers 0 and 1 keep only the window, the even
// layers from 2 one entry per 4 tokens, the odd ones from 3 one per 128.
constexpr std::array<int, 43> kDeepseekV4FlashRatios = {0, 0,   4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128,
                                                        4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128,
                                                        4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4};

constexpr std::array<ModelPreset, 8> kPresets = {{
    {"deepseek-v3", "DeepSeek-V3", 61, 128},
    {"deepseek-v3.2", "DeepSeek-V3.2", 61, 128},
    {"deepseek-r1", "DeepSeek-R1", 61, 128},
    {"deepseek-v2", "DeepSeek-V2", 60, 128},
    {"deepseek-v2-lite", "DeepSeek-V2-Lite", 27, 16},
    {"kimi-k2", "Kimi K2", 61, 64},
    {"glm-5", "GLM-5", 78, 64},
    {"deepseek-v4-flash", "DeepSeek-V4-Flash", 43, 64, 448, 128, kDeepseekV4FlashRatios},
}};

}  // namespace

std::span<const ModelPreset> model_presets() { return kPresets; }

std::string model_ids() {
  std::string ids;
  for (const ModelPreset& m : kPresets) {
    if (!ids.empty()) ids += ", ";
    ids += m.id;
  }
  return ids;
}

const ModelPreset& find_model(std::string_view id) {
  for (const ModelPreset& m : kPresets) {
    if (m.id == id) return m;
  }
  throw Error(ErrorCode::kValue, "--model: unknown model '" + std::string(id) + "' (known: " + model_ids() + ")");
}

}  // namespace mlakv::tool
