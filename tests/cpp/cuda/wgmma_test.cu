// SPDX-License-Identifier: Apache-2.0
// GPU tests of the warpgroup tensor-core primitives (src/cuda/wgmma.cuh) in
// the tile layouts the warpgroup decode kernels use: scores = Q x K^T over
// the swizzled 64 x 576 query and 32 x 576 (warpgroups) or 64 x 576 (wide
// tiles) key tiles, and P x V with the key tile read MN-major as values; and
// the transposed products of rows of up to 32 heads (scores^T = K x Q^T,
// out^T = V^T x P^T with P^T stored from the accumulators by stmatrix .trans).
// Small integers make every product exact, so the results must equal the
// host's bit for bit. Skipped without an sm_90 device (wgmma is sm_90a code).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "codec/element.h"
#include "cuda/decode/hopper/transposed_products.cuh"
#include "cuda/decode/hopper/warpgroups_kernel.cuh"
#include "cuda/decode/hopper/wide_tiles_kernel.cuh"
#include "cuda/ptx/wgmma.cuh"
#include "cuda_support.h"

namespace mlakv::test {
namespace {

namespace wg = cuda::warpgroups;
namespace wide = cuda::wide_tiles;
constexpr int kHeads = wg::kHeads;

template <int kTokens>
struct alignas(1024) Tiles {
  static constexpr int kKeyBlockBytes = kTokens * 128;
  static constexpr int kProbBytes = kHeads * 128;
  std::uint8_t q[wg::kColumnBlocks * wg::kQueryBlockBytes];
  std::uint8_t keys[wg::kColumnBlocks * kKeyBlockBytes];
  std::uint8_t probs[kProbBytes];
};

// The scores of a kernel's tile of kTokens keys, as that kernel issues them.
template <int kTokens>
__device__ void scores_of_tile(float (&s)[kTokens / 2], const Tiles<kTokens>& sh) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (kTokens == wide::kTileTokens) {
    static_assert(Tiles<kTokens>::kKeyBlockBytes == wide::kKeyBlockBytes);
    wide::issue_scores(s, sh.q, sh.keys);
    cuda::wgmma::wait<0>();
    cuda::wgmma::fence_operands(s);
  } else {
    static_assert(kTokens == wg::kTileTokens && Tiles<kTokens>::kKeyBlockBytes == wg::kKeyBlockBytes);
    float rope[kTokens / 2];
    wg::issue_scores(s, rope, sh.q, sh.keys);
    cuda::wgmma::wait<0>();
    cuda::wgmma::fence_operands(s);
    cuda::wgmma::fence_operands(rope);
    for (int i = 0; i < kTokens / 2; ++i) s[i] += rope[i];
  }
#else
  (void)s, (void)sh;
#endif
}

// One warpgroup: stores q [64][576], keys [kTokens][576] and probs
// [64][kTokens] (bf16 bits, row-major in global memory) into the swizzled
// tiles, then writes scores [64][kTokens] and out [64][512] (float32) from the
// accumulator layout.
template <int kTokens>
__global__ void products_kernel(const std::uint16_t* q, const std::uint16_t* keys, const std::uint16_t* probs,
                                float* scores, float* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using T = Tiles<kTokens>;
  extern __shared__ __align__(16) std::uint8_t smem_raw[];
  auto& sh = *reinterpret_cast<T*>(smem_raw + (1024u - cuda::shared_address(smem_raw) % 1024u) % 1024u);
  const int tid = static_cast<int>(threadIdx.x);
  for (int i = tid; i < kHeads * kQueryDim; i += 128) {
    *reinterpret_cast<std::uint16_t*>(
        sh.q + cuda::wgmma::swizzled_offset(i / kQueryDim, i % kQueryDim, wg::kQueryBlockBytes)) = q[i];
  }
  for (int i = tid; i < kTokens * kQueryDim; i += 128) {
    *reinterpret_cast<std::uint16_t*>(
        sh.keys + cuda::wgmma::swizzled_offset(i / kQueryDim, i % kQueryDim, T::kKeyBlockBytes)) = keys[i];
  }
  for (int i = tid; i < kHeads * 64; i += 128) {
    const int col = i % 64;
    *reinterpret_cast<std::uint16_t*>(sh.probs + cuda::wgmma::swizzled_offset(i / 64, col, T::kProbBytes)) =
        col < kTokens ? probs[(i / 64) * kTokens + col] : 0;
  }
  cuda::bulk_copy_fence();
  __syncthreads();
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int r0 = 16 * warp + lane / 4;
  const int c = lane % 4;

  float s[kTokens / 2];
  scores_of_tile<kTokens>(s, sh);
  for (int i = 0; i < kTokens / 8; ++i) {
    for (int e = 0; e < 2; ++e) {
      scores[r0 * kTokens + 8 * i + 2 * c + e] = s[4 * i + e];
      scores[(r0 + 8) * kTokens + 8 * i + 2 * c + e] = s[4 * i + 2 + e];
    }
  }
  for (int half = 0; half < 2; ++half) {
    float o[128];
    for (int i = 0; i < 128; ++i) o[i] = 0.0f;
    cuda::warpgroup_math::add_probs_times_values<kTokens, T::kKeyBlockBytes>(o, sh.probs, sh.keys, half);
    for (int i = 0; i < 32; ++i) {
      for (int e = 0; e < 2; ++e) {
        const int dim = wg::kHalfDims * half + 8 * i + 2 * c + e;
        out[r0 * kValueDim + dim] = o[4 * i + e];
        out[(r0 + 8) * kValueDim + dim] = o[4 * i + 2 + e];
      }
    }
  }
#else
  (void)q, (void)keys, (void)probs, (void)scores, (void)out;
#endif
}

template <int kN>
struct alignas(1024) TransposedTiles {
  std::uint8_t q[wg::kColumnBlocks * kN * 128];
  std::uint8_t keys[wg::kColumnBlocks * wide::kKeyBlockBytes];
  std::uint8_t probs[kN * 128];
};

// One warpgroup: the transposed products of kN heads and a 64-key tile. The
// weights go from registers in the scores' accumulator layout (taken from
// probs [kN][64]) through store_weights; scores [kN][64] and out [kN][512]
// are written from the accumulator layouts.
template <int kN>
__global__ void transposed_products_kernel(const std::uint16_t* q, const std::uint16_t* keys,
                                           const std::uint16_t* probs, float* scores, float* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  namespace tp = cuda::transposed_products;
  using T = TransposedTiles<kN>;
  extern __shared__ __align__(16) std::uint8_t smem_raw[];
  auto& sh = *reinterpret_cast<T*>(smem_raw + (1024u - cuda::shared_address(smem_raw) % 1024u) % 1024u);
  const int tid = static_cast<int>(threadIdx.x);
  for (int i = tid; i < kN * kQueryDim; i += 128) {
    *reinterpret_cast<std::uint16_t*>(sh.q + cuda::wgmma::swizzled_offset(i / kQueryDim, i % kQueryDim, kN * 128)) =
        q[i];
  }
  for (int i = tid; i < wide::kTileTokens * kQueryDim; i += 128) {
    *reinterpret_cast<std::uint16_t*>(
        sh.keys + cuda::wgmma::swizzled_offset(i / kQueryDim, i % kQueryDim, wide::kKeyBlockBytes)) = keys[i];
  }
  cuda::bulk_copy_fence();
  __syncthreads();
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int g = lane / 4;
  const int c = lane % 4;
  // Accumulator element 4 j + 2 h + e: row (key or dim) 16 warp + g + 8 h, column (head) 8 j + 2 c + e.
  float s[kN / 2];
  tp::issue_scores<kN>(s, sh.q, sh.keys);
  cuda::wgmma::wait<0>();
  cuda::wgmma::fence_operands(s);
  float w[kN / 2];
  for (int j = 0; j < kN / 8; ++j) {
    for (int h = 0; h < 2; ++h) {
      for (int e = 0; e < 2; ++e) {
        const int key = 16 * warp + g + 8 * h;
        const int head = 8 * j + 2 * c + e;
        scores[head * wide::kTileTokens + key] = s[4 * j + 2 * h + e];
        w[4 * j + 2 * h + e] = codec::load_input<codec::InputDtype::kBf16>(probs[head * wide::kTileTokens + key]);
      }
    }
  }
  tp::store_weights<kN>(sh.probs, w, warp, lane);
  cuda::bulk_copy_fence();
  __syncthreads();
  for (int half = 0; half < 2; ++half) {
    float o[4][kN / 2];
    for (int m = 0; m < 4; ++m) {
      for (int i = 0; i < kN / 2; ++i) o[m][i] = 0.0f;
    }
    tp::add_probs_times_values<kN>(o, sh.probs, sh.keys, half);
    for (int m = 0; m < 4; ++m) {
      for (int j = 0; j < kN / 8; ++j) {
        for (int h = 0; h < 2; ++h) {
          for (int e = 0; e < 2; ++e) {
            const int dim = 256 * half + 64 * m + 16 * warp + g + 8 * h;
            out[(8 * j + 2 * c + e) * kValueDim + dim] = o[m][4 * j + 2 * h + e];
          }
        }
      }
    }
  }
#else
  (void)q, (void)keys, (void)probs, (void)scores, (void)out;
#endif
}

bool hopper_present() {
  if (!cuda_device_present()) return false;
  int major = 0;
  int minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
  return major == 9 && minor == 0;
}

std::vector<std::uint16_t> small_integers(std::size_t n, int seed, int range) {
  std::vector<std::uint16_t> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const int x =
        static_cast<int>((i * 2654435761u + static_cast<unsigned>(seed) * 40503u) >> 7 & 0xFFFFu) % (2 * range + 1) -
        range;
    v[i] = codec::encode_bf16(static_cast<float>(x));
  }
  return v;
}

// A test kernel of one warpgroup: (query, keys, weights) -> (scores, outputs).
using ProductsKernel = void (*)(const std::uint16_t*, const std::uint16_t*, const std::uint16_t*, float*, float*);

// Runs `kernel` with `shared` bytes on small-integer tiles of `heads` query
// heads, `tokens` keys and [heads][tokens] weights (seeds seed.. seed + 2)
// and checks its scores [heads][tokens] and outputs [heads][512] against the
// host's products, bit for bit.
void expect_kernel_products_equal_the_host_ones(ProductsKernel kernel, int heads, int tokens, int shared, int seed) {
  const auto q = small_integers(heads * kQueryDim, seed, 7);
  const auto keys = small_integers(tokens * kQueryDim, seed + 1, 7);
  const auto probs = small_integers(heads * tokens, seed + 2, 3);
  DeviceBuffer dq(q);
  DeviceBuffer dk(keys);
  DeviceBuffer dp(probs);
  DeviceBuffer ds(heads * tokens * sizeof(float));
  DeviceBuffer dout(heads * kValueDim * sizeof(float));
  MLAKV_CUDA_OK(
      cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), cudaFuncAttributeMaxDynamicSharedMemorySize, shared));
  kernel<<<1, 128, shared>>>(dq.get<std::uint16_t>(), dk.get<std::uint16_t>(), dp.get<std::uint16_t>(), ds.get<float>(),
                             dout.get<float>());
  MLAKV_CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> scores(heads * tokens);
  std::vector<float> out(heads * kValueDim);
  ds.copy_to_host(scores.data());
  dout.copy_to_host(out.data());
  const auto value = [](std::uint16_t bits) { return codec::load_input<codec::InputDtype::kBf16>(bits); };
  int checked = 0;
  for (int h = 0; h < heads; ++h) {
    for (int t = 0; t < tokens; ++t) {
      float want = 0.0f;
      for (int d = 0; d < kQueryDim; ++d) want += value(q[h * kQueryDim + d]) * value(keys[t * kQueryDim + d]);
      ASSERT_EQ(scores[h * tokens + t], want) << "score head " << h << " token " << t;
      ++checked;
    }
    for (int d = 0; d < kValueDim; ++d) {
      float want = 0.0f;
      for (int t = 0; t < tokens; ++t) want += value(probs[h * tokens + t]) * value(keys[t * kQueryDim + d]);
      ASSERT_EQ(out[h * kValueDim + d], want) << "output head " << h << " dim " << d;
      ++checked;
    }
  }
  EXPECT_EQ(checked, heads * (tokens + kValueDim));
}

template <int kTokens>
void expect_products_equal_the_host_ones() {
  expect_kernel_products_equal_the_host_ones(products_kernel<kTokens>, kHeads, kTokens,
                                             static_cast<int>(sizeof(Tiles<kTokens>)) + 1024, 1);
}

template <int kN>
void expect_transposed_products_equal_the_host_ones() {
  expect_kernel_products_equal_the_host_ones(transposed_products_kernel<kN>, kN, wide::kTileTokens,
                                             static_cast<int>(sizeof(TransposedTiles<kN>)) + 1024, 4);
}

TEST(cuda_wgmma, transposed_scores_and_values_times_weights_of_16_and_32_heads_equal_the_host_products) {
  if (!hopper_present()) GTEST_SKIP() << "no sm_90 device";
  expect_transposed_products_equal_the_host_ones<16>();
  expect_transposed_products_equal_the_host_ones<32>();
}

TEST(cuda_wgmma, scores_and_probs_times_values_in_the_32_key_tile_layout_equal_the_host_products) {
  if (!hopper_present()) GTEST_SKIP() << "no sm_90 device";
  expect_products_equal_the_host_ones<wg::kTileTokens>();
}

TEST(cuda_wgmma, scores_and_probs_times_values_in_the_64_key_tile_layout_equal_the_host_products) {
  if (!hopper_present()) GTEST_SKIP() << "no sm_90 device";
  expect_products_equal_the_host_ones<wide::kTileTokens>();
}

}  // namespace
}  // namespace mlakv::test
