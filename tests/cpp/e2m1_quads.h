// SPDX-License-Identifier: Apache-2.0
// One check of the division-free E2M1 encoder, shared by the CPU and GPU
// proofs: eight consecutive 16-bit patterns through e2m1_quad_by_compare
// against E2M1 of the recipe it replaces.
#pragma once

#include <cstdint>

#include "codec/element.h"
#include "codec/nvfp4_compare.h"

namespace mlakv::test {

struct QuadCodes {
  std::uint32_t got;   // e2m1_quad_by_compare
  std::uint32_t want;  // E2M1(recipe(x)) per input, value 0 in the low nibble
};

/// The codes of inputs first..first+7, a signed zero standing in for each one
/// the recipe cannot meet (meets(x) false: NaN, or beyond the amax).
template <codec::InputDtype kDtype, class Meets, class Recipe>
MLAKV_HD QuadCodes quad_codes(std::uint32_t first, const codec::E2m1Thresholds<kDtype>& thr, Meets meets,
                              Recipe recipe) {
  std::uint32_t inputs[8];
  for (std::uint32_t i = 0; i < 8; ++i) {
    const float v = codec::load_input<kDtype>(static_cast<std::uint16_t>(first + i));
    inputs[i] = meets(v) ? first + i : (first + i) & 0x8000u;
  }
  std::uint32_t pairs[4];
  for (int i = 0; i < 4; ++i) pairs[i] = inputs[2 * i] | (inputs[2 * i + 1] << 16);
  std::uint32_t want = 0;
  for (int i = 0; i < 8; ++i) {
    const float x = codec::load_input<kDtype>(static_cast<std::uint16_t>(inputs[i]));
    want |= static_cast<std::uint32_t>(codec::encode_e2m1_cuda(recipe(x))) << (4 * i);
  }
  return {codec::e2m1_quad_by_compare<kDtype>(pairs, thr), want};
}

}  // namespace mlakv::test
