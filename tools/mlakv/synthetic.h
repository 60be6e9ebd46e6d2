// SPDX-License-Identifier: Apache-2.0
// MLA activations for the tool's accuracy checks: seeded synthetic ones, or
// the user's own values rounded to the model dtype.
#pragma once

#include <cstdint>
#include <vector>

#include "mlakv/tensor_view.h"

namespace mlakv::tool {

struct Activations {
  std::int64_t tokens = 0;
  DType dtype = DType::kBFloat16;
  std::vector<std::uint16_t> kv_c;  // [tokens, 512] raw 16-bit values
  std::vector<std::uint16_t> k_pe;  // [tokens, 64]
  std::vector<float> kv_c_f32;      // the same values widened: the reference
  std::vector<float> k_pe_f32;
};

/// Latent: a normed vector with per-channel gains spread over 0.25..4 and a
/// few 10x outlier channels; one token in 64 is tiny (scaled by 2^-10, like
/// padding or attention-sink tokens); RoPE: rotated pairs whose magnitude
/// varies with position. Values are rounded to `dtype` (bf16 or fp16).
Activations make_activations(std::int64_t tokens, DType dtype, std::uint64_t seed);

/// The user's values ([tokens, 512] and [tokens, 64] float32) rounded to `dtype`.
Activations round_activations(const std::vector<float>& kv_c, const std::vector<float>& k_pe, std::int64_t tokens,
                              DType dtype);

}  // namespace mlakv::tool
