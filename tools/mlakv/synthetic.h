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
  int nope_dims = 512;  // kv_c values per token: 512 (the V3 family's latent), 448 (DeepSeek V4's NoPE values)
  DType dtype = DType::kBFloat16;
  std::vector<std::uint16_t> kv_c;  // [tokens, nope_dims] raw 16-bit values
  std::vector<std::uint16_t> k_pe;  // [tokens, 64]
  std::vector<float> kv_c_f32;      // the same values widened: the reference
  std::vector<float> k_pe_f32;
};

/// Latent: a normed vector with per-channel gains spread over 0.25..4 and a
/// few 10x outlier channels; one token in 64 is tiny (scaled by 2^-10, like
/// padding or attention-sink tokens); RoPE: rotated pairs whose magnitude
/// varies with position. Values are rounded to `dtype` (bf16 or fp16). kv_c
/// holds `nope_dims` values per token (the same generator for 512 and 448).
Activations make_activations(std::int64_t tokens, int nope_dims, DType dtype, std::uint64_t seed);

/// The user's values ([tokens, nope_dims] and [tokens, 64] float32) rounded to `dtype`.
Activations round_activations(const std::vector<float>& kv_c, const std::vector<float>& k_pe, std::int64_t tokens,
                              int nope_dims, DType dtype);

}  // namespace mlakv::tool
