// SPDX-License-Identifier: Apache-2.0
#include "models.h"

#include <array>

#include "mlakv/error.h"

namespace mlakv::tool {
namespace {

// Layer and head counts from each model's published config.json
// (num_hidden_layers, num_attention_heads); all use kv_lora_rank 512 and a
// 64-dim RoPE key. --layers overrides the layer count for other checkpoints.
constexpr std::array<ModelPreset, 7> kPresets = {{
    {"deepseek-v3", "DeepSeek-V3", 61, 128},
    {"deepseek-v3.2", "DeepSeek-V3.2", 61, 128},
    {"deepseek-r1", "DeepSeek-R1", 61, 128},
    {"deepseek-v2", "DeepSeek-V2", 60, 128},
    {"deepseek-v2-lite", "DeepSeek-V2-Lite", 27, 16},
    {"kimi-k2", "Kimi K2", 61, 64},
    {"glm-5", "GLM-5", 78, 64},
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
