// SPDX-License-Identifier: Apache-2.0
#include "synthetic.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <random>

#include "mlakv/vocabulary.h"

namespace mlakv::tool {
namespace {

// CUDA's own conversions, as the library's codecs (host bf16 rounding maps NaN to 0x7FFF).
std::uint16_t round_to(DType dtype, float x) {
  return dtype == DType::kFloat16 ? __half_as_ushort(__float2half_rn(x)) : __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

float widen(DType dtype, std::uint16_t bits) {
  return dtype == DType::kFloat16 ? __half2float(__ushort_as_half(bits)) : __bfloat162float(__ushort_as_bfloat16(bits));
}

}  // namespace

Activations make_activations(std::int64_t tokens, int nope_dims, DType dtype, std::uint64_t seed) {
  const int latent = nope_dims;
  constexpr int kRope = kRopeDim;
  constexpr int kOutlierEvery = 97;  // a handful of outlier channels
  constexpr int kTinyEvery = 64;     // tokens whose whole latent is tiny
  constexpr float kTiny = 1.0f / 1024.0f;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_gain(std::log(0.25f), std::log(4.0f));

  std::vector<float> gain(latent);
  for (int c = 0; c < latent; ++c) gain[c] = std::exp(log_gain(rng)) * (c % kOutlierEvery == 0 ? 10.0f : 1.0f);

  Activations a;
  a.tokens = tokens;
  a.nope_dims = nope_dims;
  a.dtype = dtype;
  a.kv_c.resize(static_cast<std::size_t>(tokens) * latent);
  a.k_pe.resize(static_cast<std::size_t>(tokens) * kRope);
  a.kv_c_f32.resize(a.kv_c.size());
  a.k_pe_f32.resize(a.k_pe.size());
  for (std::int64_t t = 0; t < tokens; ++t) {
    const float token_scale = t % kTinyEvery == kTinyEvery - 1 ? kTiny : 1.0f;
    for (int c = 0; c < latent; ++c) {
      const std::size_t i = static_cast<std::size_t>(t) * latent + c;
      a.kv_c[i] = round_to(dtype, token_scale * 0.05f * gain[c] * normal(rng));
      a.kv_c_f32[i] = widen(dtype, a.kv_c[i]);
    }
    const float magnitude = 1.0f + 0.5f * std::sin(0.01f * static_cast<float>(t));
    for (int p = 0; p < kRope / 2; ++p) {
      const float angle = static_cast<float>(t) * std::pow(10000.0f, -2.0f * p / kRope);
      const float r = magnitude * std::abs(normal(rng));
      for (int k = 0; k < 2; ++k) {
        const std::size_t i = static_cast<std::size_t>(t) * kRope + 2 * p + k;
        a.k_pe[i] = round_to(dtype, r * (k == 0 ? std::cos(angle) : std::sin(angle)));
        a.k_pe_f32[i] = widen(dtype, a.k_pe[i]);
      }
    }
  }
  return a;
}

Activations round_activations(const std::vector<float>& kv_c, const std::vector<float>& k_pe, std::int64_t tokens,
                              int nope_dims, DType dtype) {
  Activations a;
  a.tokens = tokens;
  a.nope_dims = nope_dims;
  a.dtype = dtype;
  const auto round_all = [dtype](const std::vector<float>& in, std::vector<std::uint16_t>& bits,
                                 std::vector<float>& widened) {
    bits.resize(in.size());
    widened.resize(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
      bits[i] = round_to(dtype, in[i]);
      widened[i] = widen(dtype, bits[i]);
    }
  };
  round_all(kv_c, a.kv_c, a.kv_c_f32);
  round_all(k_pe, a.k_pe, a.k_pe_f32);
  return a;
}

}  // namespace mlakv::tool
