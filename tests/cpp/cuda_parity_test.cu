// SPDX-License-Identifier: Apache-2.0
// The CUDA backend writes and reads exactly the CPU reference's bytes, in every
// format and layout, and its Hopper E2M1 encoder equals CUDA's for all 2^32
// floats. Skipped without a CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cstring>
#include <numeric>
#include <random>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "codec/element.h"
#include "codec/fp8_ds_mla.h"
#include "codec/nvfp4.h"
#include "codec/nvfp4_compare.h"
#include "cuda_support.h"
#include "e2m1_quads.h"
#include "test_support.h"

namespace {

using mlakv::DType;
using mlakv::Format;
using mlakv::TensorView;
using namespace mlakv::test;

// --- the conversion ---

__global__ void count_e2m1_mismatches(std::uint32_t high, unsigned long long* mismatches, std::uint32_t* first,
                                      unsigned long long* checked) {
  const std::uint32_t bits = (high << 16) | (blockIdx.x * blockDim.x + threadIdx.x);
  float x;
  memcpy(&x, &bits, 4);
  if (mlakv::codec::encode_e2m1(x) != mlakv::codec::encode_e2m1_cuda(x)) {
    if (atomicAdd(mismatches, 1ull) == 0) *first = bits;
  }
  count_checked(checked, 1);
}

TEST(cuda_e2m1, device_encoder_equals_cuda_for_all_2_pow_32_floats) {
  MLAKV_REQUIRE_GPU();
  DeviceBuffer mismatches(sizeof(unsigned long long));
  DeviceBuffer first(sizeof(std::uint32_t));
  DeviceBuffer checked(sizeof(unsigned long long));
  cudaMemset(mismatches.get(), 0, mismatches.bytes());
  cudaMemset(checked.get(), 0, checked.bytes());
  for (std::uint32_t high = 0; high < (1u << 16); ++high) {
    count_e2m1_mismatches<<<256, 256>>>(high, mismatches.get<unsigned long long>(), first.get<std::uint32_t>(),
                                        checked.get<unsigned long long>());
  }
  MLAKV_CUDA_OK(cudaDeviceSynchronize());
  const auto count = mismatches.download<unsigned long long>()[0];
  EXPECT_EQ(count, 0u) << "first mismatching float bits 0x" << std::hex << first.download<std::uint32_t>()[0];
  EXPECT_EQ(checked.download<unsigned long long>()[0], 1ull << 32);  // every f32 bit pattern
}

// The division-free static-recipe codes, with the device's bf16x2 / half2
// instructions, for every 16-bit input pair and every nonzero E4M3 scale.
template <mlakv::codec::InputDtype kDtype>
__global__ void count_compare_mismatches(unsigned long long* mismatches, unsigned long long* checked) {
  using namespace mlakv::codec;
  const float s = decode_e4m3(static_cast<std::uint8_t>(blockIdx.y + 1));
  const E2m1Thresholds<kDtype> thr(s);
  const std::uint32_t bits = 2 * (blockIdx.x * blockDim.x + threadIdx.x);
  const std::uint32_t pair = bits | ((bits + 1) << 16);
  const auto ref = [s](std::uint32_t b) {
    return encode_e2m1_cuda(div_rn(load_input<kDtype>(static_cast<std::uint16_t>(b)), s));
  };
  if (e2m1_pair_by_compare<kDtype>(pair, thr) != static_cast<std::uint8_t>(ref(bits) | (ref(bits + 1) << 4))) {
    atomicAdd(mismatches, 1ull);
  }
  count_checked(checked, 2);
}

TEST(cuda_e2m1, division_free_codes_equal_the_recipe_for_every_input_and_scale) {
  MLAKV_REQUIRE_GPU();
  DeviceBuffer mismatches(sizeof(unsigned long long)), checked(sizeof(unsigned long long));
  cudaMemset(mismatches.get(), 0, mismatches.bytes());
  cudaMemset(checked.get(), 0, checked.bytes());
  const dim3 grid(32768 / 256, 0x7E);
  auto* m = mismatches.get<unsigned long long>();
  auto* c = checked.get<unsigned long long>();
  count_compare_mismatches<mlakv::codec::InputDtype::kBf16><<<grid, 256>>>(m, c);
  count_compare_mismatches<mlakv::codec::InputDtype::kFp16><<<grid, 256>>>(m, c);
  MLAKV_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(mismatches.download<unsigned long long>()[0], 0u);
  EXPECT_EQ(checked.download<unsigned long long>()[0], 2ull * 0x7E * 0x10000);  // 2 dtypes x 126 scales x 2^16 inputs
}

// The fast path for groups without NaN, with the device instructions: four
// pairs per word, every non-NaN 16-bit input (NaN patterns stand in as a
// signed zero) and every nonzero scale byte s of the static recipe E2M1(x / s)
// and of the 352 record's, E2M1(RN(x * RN(1 / s))) (upstream's IEEE 1 / s),
// whose thresholds come from the table in device memory. The 352 writer's
// groups holding a NaN multiply by reciprocal_of(s): it must be that same RN(1 / s).
template <mlakv::codec::InputDtype kDtype, bool kReciprocal>
__global__ void count_quad_mismatches(unsigned long long* mismatches, unsigned long long* checked) {
  using namespace mlakv::codec;
  const auto scode = static_cast<std::uint8_t>(blockIdx.y + 1);  // 0x01..0x7E
  const float s = decode_e4m3(scode);
  const float inv_s = __fdiv_rn(1.0f, s);
  const E2m1Thresholds<kDtype> thr =
      kReciprocal ? E2m1Thresholds<kDtype>::for_reciprocal_scale_byte(scode) : E2m1Thresholds<kDtype>(s);
  const std::uint32_t first = 8 * (blockIdx.x * blockDim.x + threadIdx.x);
  // NaN stands in as a signed zero.
  const auto meets = [](float v) { return v == v; };
  const auto recipe = [s, inv_s](float x) { return kReciprocal ? x * inv_s : div_rn(x, s); };
  const mlakv::test::QuadCodes codes = mlakv::test::quad_codes<kDtype>(first, thr, meets, recipe);
  if (codes.got != codes.want) atomicAdd(mismatches, 1ull);
  if (kReciprocal && first == 0 && __float_as_uint(reciprocal_of(s)) != __float_as_uint(inv_s)) {
    atomicAdd(mismatches, 1ull);
  }
  atomicAdd(checked, 8ull);
}

TEST(cuda_e2m1, nan_free_quads_equal_the_static_and_reciprocal_recipes_for_every_input_and_scale) {
  MLAKV_REQUIRE_GPU();
  using mlakv::codec::InputDtype;
  DeviceBuffer mismatches(sizeof(unsigned long long)), checked(sizeof(unsigned long long));
  cudaMemset(mismatches.get(), 0, mismatches.bytes());
  cudaMemset(checked.get(), 0, checked.bytes());
  const dim3 grid(8192 / 256, 0x7E);
  auto* m = mismatches.get<unsigned long long>();
  auto* c = checked.get<unsigned long long>();
  count_quad_mismatches<InputDtype::kBf16, false><<<grid, 256>>>(m, c);
  count_quad_mismatches<InputDtype::kFp16, false><<<grid, 256>>>(m, c);
  count_quad_mismatches<InputDtype::kBf16, true><<<grid, 256>>>(m, c);
  count_quad_mismatches<InputDtype::kFp16, true><<<grid, 256>>>(m, c);
  MLAKV_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(mismatches.download<unsigned long long>()[0], 0u);
  EXPECT_EQ(checked.download<unsigned long long>()[0], 4ull * 0x7E * 0x10000);  // 4 recipes x 126 scales x 2^16 inputs
}

// Runs a mismatch-counting kernel(mismatches, example, checked) on `grid` and
// expects no mismatch in exactly `cases` compared cases; `describe` turns the
// first example word into words.
template <class Kernel, class Describe>
void expect_no_mismatches(Kernel kernel, dim3 grid, const char* name, unsigned long long cases, Describe describe) {
  DeviceBuffer mismatches(sizeof(unsigned long long)), example(sizeof(std::uint32_t)),
      checked(sizeof(unsigned long long));
  cudaMemset(mismatches.get(), 0, mismatches.bytes());
  cudaMemset(example.get(), 0, example.bytes());
  cudaMemset(checked.get(), 0, checked.bytes());
  kernel<<<grid, 256>>>(mismatches.get<unsigned long long>(), example.get<std::uint32_t>(),
                        checked.get<unsigned long long>());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(mismatches.download<unsigned long long>()[0], 0u)
      << name << ": e.g. " << describe(example.download<std::uint32_t>()[0]);
  EXPECT_EQ(checked.download<unsigned long long>()[0], cases) << name << ": cases compared";
}

// How many of the 16-bit patterns [first, last] pass `keep` (the host's count
// of a proof's domain, from the same functions the kernel calls).
template <class Keep>
unsigned long long count_patterns(std::uint32_t first, std::uint32_t last, Keep keep) {
  unsigned long long n = 0;
  for (std::uint32_t bits = first; bits <= last; ++bits) n += keep(bits) ? 1 : 0;
  return n;
}

// The example word of these proofs: two patterns (the high one 15 bits) and a
// flag that one was kept; the first mismatch to get there keeps its own.
__device__ void keep_example(std::uint32_t* example, std::uint32_t high, std::uint32_t low) {
  atomicCAS(example, 0u, (high << 16) | low | 0x80000000u);
}

// An example word in words: "<high> bits 0x.., <low> 0x..".
auto describe_example(const char* high, const char* low) {
  return [high, low](std::uint32_t e) {
    std::ostringstream text;
    text << high << " bits 0x" << std::hex << ((e >> 16) & 0x7FFF) << ", " << low << " 0x" << (e & 0xFFFF);
    return text.str();
  };
}

// The pts proofs' token amax a (input pattern `bits`) and token scale st =
// a / 2688; false for the amaxes the writer never divides by (infinite a, or
// st == 0, whose groups are stored as zeros).
template <mlakv::codec::InputDtype kDtype>
__host__ __device__ bool pts_token_amax(std::uint32_t bits, float& a, float& st) {
  a = mlakv::codec::load_input<kDtype>(static_cast<std::uint16_t>(bits));
  st = a * mlakv::codec::kInvE4m3TimesE2m1Max;
  return a < INFINITY && st != 0.0f;
}

// The pts record's two-level recipe E2M1(RN(RN(x / st) / s)) by thresholds,
// with the device instructions: every finite nonzero token amax a (st =
// a / 2688), every nonzero E4M3 scale s, every non-NaN x with |x| <= a.
template <mlakv::codec::InputDtype kDtype>
__global__ void count_two_level_mismatches(unsigned long long* mismatches, std::uint32_t* example,
                                           unsigned long long* checked) {
  using namespace mlakv::codec;
  float a, st;
  if (!pts_token_amax<kDtype>(blockIdx.x + 1, a, st)) return;
  const float s = decode_e4m3(static_cast<std::uint8_t>(blockIdx.y + 1));
  const auto thr = E2m1Thresholds<kDtype>::for_two_level(TokenScaleDivider(st), s);
  unsigned long long bad = 0;
  const auto meets = [a](float v) { return v == v && fabsf(v) <= a; };
  const auto recipe = [st, s](float x) { return div_rn(div_rn(x, st), s); };
  unsigned inputs = 0;
  for (std::uint32_t first = 8 * threadIdx.x; first < 0x10000u; first += 8 * blockDim.x) {
    const mlakv::test::QuadCodes codes = mlakv::test::quad_codes<kDtype>(first, thr, meets, recipe);
    if (codes.got != codes.want && bad++ == 0) keep_example(example, blockIdx.x + 1, first);
    inputs += 8;
  }
  if (bad) atomicAdd(mismatches, bad);
  count_checked(checked, inputs);
}

// The token amax patterns [1, 0x7FFE] a pts proof divides by.
template <mlakv::codec::InputDtype kDtype>
unsigned long long pts_token_amaxes() {
  return count_patterns(1, 0x7FFE, [](std::uint32_t bits) {
    float a, st;
    return pts_token_amax<kDtype>(bits, a, st);
  });
}

TEST(cuda_e2m1, two_level_quads_equal_the_pts_recipe_for_every_token_amax_scale_and_input) {
  MLAKV_REQUIRE_GPU();
  using mlakv::codec::InputDtype;
  const auto describe = describe_example("token amax", "inputs from");
  const dim3 grid(0x7FFE, 0x7E);
  // every token amax x 126 scales x 2^16 inputs
  expect_no_mismatches(count_two_level_mismatches<InputDtype::kBf16>, grid, "bf16",
                       pts_token_amaxes<InputDtype::kBf16>() * 0x7E * 0x10000, describe);
  expect_no_mismatches(count_two_level_mismatches<InputDtype::kFp16>, grid, "fp16",
                       pts_token_amaxes<InputDtype::kFp16>() * 0x7E * 0x10000, describe);
}

// The pts record's group scale byte E4M3(RN(RN(g / st) / 6)), both divisions
// reciprocal products on the device, for every finite nonzero token amax a
// (st = a / 2688) and every non-negative group amax g <= a of the input type.
template <mlakv::codec::InputDtype kDtype>
__global__ void count_two_level_scale_byte_mismatches(unsigned long long* mismatches, std::uint32_t* example,
                                                      unsigned long long* checked) {
  using namespace mlakv::codec;
  float a, st;
  if (!pts_token_amax<kDtype>(blockIdx.x + 1, a, st)) return;
  const TokenScaleDivider divide(st);
  unsigned long long bad = 0;
  unsigned groups = 0;
  for (std::uint32_t bits = threadIdx.x; bits <= blockIdx.x + 1; bits += blockDim.x) {
    const float g = load_input<kDtype>(static_cast<std::uint16_t>(bits));  // non-negative patterns rise with bits
    if (two_level_scale_byte(g, divide) != encode_e4m3(__fdiv_rn(__fdiv_rn(g, st), kE2m1Max)) && bad++ == 0) {
      keep_example(example, blockIdx.x + 1, bits);
    }
    ++groups;
  }
  if (bad) atomicAdd(mismatches, bad);
  count_checked(checked, groups);
}

// Sum over the token amaxes a pts proof divides by (patterns b) of the group amaxes [0, b].
template <mlakv::codec::InputDtype kDtype>
unsigned long long pts_group_amaxes() {
  unsigned long long n = 0;
  for (std::uint32_t bits = 1; bits <= 0x7FFE; ++bits) {
    float a, st;
    if (pts_token_amax<kDtype>(bits, a, st)) n += bits + 1;
  }
  return n;
}

// The 352 record's scale byte on the device (amax / 6 as a reciprocal product
// with a residual step, then the floor and the bump) against ABI.md's literal
// recipe with one IEEE division, for every non-negative 16-bit amax, inf included.
template <mlakv::codec::InputDtype kDtype>
__global__ void count_rounded_up_scale_byte_mismatches(unsigned long long* mismatches, std::uint32_t* example,
                                                       unsigned long long* checked) {
  using namespace mlakv::codec;
  const std::uint32_t bits = blockIdx.x * blockDim.x + threadIdx.x;  // 0..0x7FFF
  const float amax = load_input<kDtype>(static_cast<std::uint16_t>(bits));
  if (amax != amax) return;  // an amax is never NaN
  const float sf = fmaxf(__fdiv_rn(amax, 6.0f), 0x1p-9f);
  auto want = static_cast<std::uint8_t>(__nv_cvt_float_to_fp8(sf, __NV_SATFINITE, __NV_E4M3));
  if (decode_e4m3(want) < sf && want < 0x7E) ++want;
  if (rounded_up_scale_byte(divide_amax_by_e2m1_max(amax)) != want) {
    atomicAdd(mismatches, 1ull);
    keep_example(example, 0, bits);
  }
  count_checked(checked, 1);
}

// The non-NaN patterns of [0, 0x7FFF]: every non-negative amax, inf included.
template <mlakv::codec::InputDtype kDtype>
unsigned long long non_negative_amaxes() {
  return count_patterns(0, 0x7FFF, [](std::uint32_t bits) {
    const float a = mlakv::codec::load_input<kDtype>(static_cast<std::uint16_t>(bits));
    return a == a;
  });
}

TEST(cuda_division, rounded_up_scale_bytes_equal_the_352_recipe_for_every_amax) {
  MLAKV_REQUIRE_GPU();
  using mlakv::codec::InputDtype;
  const auto describe = describe_example("unused", "amax");
  expect_no_mismatches(count_rounded_up_scale_byte_mismatches<InputDtype::kBf16>, dim3(0x8000 / 256), "bf16",
                       non_negative_amaxes<InputDtype::kBf16>(), describe);
  expect_no_mismatches(count_rounded_up_scale_byte_mismatches<InputDtype::kFp16>, dim3(0x8000 / 256), "fp16",
                       non_negative_amaxes<InputDtype::kFp16>(), describe);
}

TEST(cuda_division, two_level_scale_bytes_equal_the_recipe_for_every_group_and_token_amax) {
  MLAKV_REQUIRE_GPU();
  using mlakv::codec::InputDtype;
  const auto describe = describe_example("token amax", "group amax bits");
  const dim3 grid(0x7FFE);
  expect_no_mismatches(count_two_level_scale_byte_mismatches<InputDtype::kBf16>, grid, "bf16",
                       pts_group_amaxes<InputDtype::kBf16>(), describe);
  expect_no_mismatches(count_two_level_scale_byte_mismatches<InputDtype::kFp16>, grid, "fp16",
                       pts_group_amaxes<InputDtype::kFp16>(), describe);
}

// The paired amax (half-precision max on the device) against the scalar fold,
// and the NaN flag and the value of its one-max twin, for every pair of 16-bit inputs.
template <mlakv::codec::InputDtype kDtype>
__global__ void count_pair_amax_mismatches(unsigned long long* mismatches, unsigned long long* checked) {
  using namespace mlakv::codec;
  const std::uint32_t high = blockIdx.x;
  for (std::uint32_t low = threadIdx.x; low < 0x10000u; low += blockDim.x) {
    const std::uint16_t bits[2] = {static_cast<std::uint16_t>(low), static_cast<std::uint16_t>(high)};
    bool nan_free = false;
    const float got = pair_amax<kDtype, 2>(bits);
    const float got_or_nan = pair_amax_or_nan<kDtype, 2>(bits, &nan_free);
    const float a = load_input<kDtype>(bits[0]);
    const float b = load_input<kDtype>(bits[1]);
    const float want = fold_amax(fold_amax(0.0f, a), b);
    const bool want_nan_free = a == a && b == b;
    if (__float_as_uint(got) != __float_as_uint(want) || nan_free != want_nan_free ||
        (want_nan_free && __float_as_uint(got_or_nan) != __float_as_uint(want))) {
      atomicAdd(mismatches, 1ull);
    }
  }
  count_checked(checked, 0x10000u / blockDim.x);  // the pairs of this thread's lows
}

TEST(cuda_amax, paired_amax_equals_the_scalar_fold_for_every_pair_of_inputs) {
  MLAKV_REQUIRE_GPU();
  DeviceBuffer mismatches(sizeof(unsigned long long)), checked(sizeof(unsigned long long));
  cudaMemset(mismatches.get(), 0, mismatches.bytes());
  cudaMemset(checked.get(), 0, checked.bytes());
  auto* m = mismatches.get<unsigned long long>();
  auto* c = checked.get<unsigned long long>();
  count_pair_amax_mismatches<mlakv::codec::InputDtype::kBf16><<<0x10000, 256>>>(m, c);
  count_pair_amax_mismatches<mlakv::codec::InputDtype::kFp16><<<0x10000, 256>>>(m, c);
  MLAKV_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(mismatches.download<unsigned long long>()[0], 0u);
  EXPECT_EQ(checked.download<unsigned long long>()[0], 2ull << 32);  // 2 dtypes x every pair of 16-bit inputs
}

// with_divisor on the GPU (an FMA-corrected reciprocal product) gives the
// E4M3 code of the correctly rounded quotient for every 16-bit input x and
// every divisor mlakv derives from an amax a >= |x| of the same type: the
// fp8_ds_mla tile scale max(a / 448, FLT_MIN) and the RoPE scale a * (1/448).
template <mlakv::codec::InputDtype kDtype, bool kTileScale>
__global__ void count_divisor_mismatches(unsigned long long* mismatches, std::uint32_t* example,
                                         unsigned long long* checked) {
  using namespace mlakv::codec;
  const float a = load_input<kDtype>(static_cast<std::uint16_t>(blockIdx.y));  // non-negative amax patterns
  if (!(a == a)) return;
  const float d = kTileScale ? CodecFp8DsMla::tile_scale(a) : a * kInvE4m3Max;
  if (d == 0.0f) return;  // the RoPE guard stores 0 without dividing
  unsigned long long bad = 0;
  unsigned visited = 0;  // inputs x looked at (those with |x| > a are outside the domain)
  with_divisor(d, [&](auto divide) {
    for (std::uint32_t bits = threadIdx.x + blockIdx.x * blockDim.x; bits < 0x10000u; bits += gridDim.x * blockDim.x) {
      ++visited;
      const float x = load_input<kDtype>(static_cast<std::uint16_t>(bits));
      if (fabsf(x) > a) continue;  // |x| <= amax by construction
      if (encode_e4m3(divide(x)) != encode_e4m3(__fdiv_rn(x, d)) && bad++ == 0) keep_example(example, blockIdx.y, bits);
    }
  });
  if (bad) atomicAdd(mismatches, bad);
  count_checked(checked, visited);
}

// The amax patterns [0, 0x7FFF] a divisor proof divides by (non-NaN, d != 0), times the 2^16 inputs each visits.
template <mlakv::codec::InputDtype kDtype, bool kTileScale>
unsigned long long divisor_cases() {
  using namespace mlakv::codec;
  return 0x10000ull * count_patterns(0, 0x7FFF, [](std::uint32_t bits) {
           const float a = load_input<kDtype>(static_cast<std::uint16_t>(bits));
           return a == a && (kTileScale ? CodecFp8DsMla::tile_scale(a) : a * kInvE4m3Max) != 0.0f;
         });
}

TEST(cuda_division, shared_divisor_gives_the_correctly_rounded_codes_on_its_domain) {
  MLAKV_REQUIRE_GPU();
  using mlakv::codec::InputDtype;
  const auto describe = describe_example("amax", "x bits");
  const dim3 grid(16, 0x8000);  // x in the grid-stride loop, every non-negative amax pattern in y
  expect_no_mismatches(count_divisor_mismatches<InputDtype::kBf16, true>, grid, "bf16 tile scale",
                       divisor_cases<InputDtype::kBf16, true>(), describe);
  expect_no_mismatches(count_divisor_mismatches<InputDtype::kBf16, false>, grid, "bf16 rope scale",
                       divisor_cases<InputDtype::kBf16, false>(), describe);
  expect_no_mismatches(count_divisor_mismatches<InputDtype::kFp16, true>, grid, "fp16 tile scale",
                       divisor_cases<InputDtype::kFp16, true>(), describe);
  expect_no_mismatches(count_divisor_mismatches<InputDtype::kFp16, false>, grid, "fp16 rope scale",
                       divisor_cases<InputDtype::kFp16, false>(), describe);
}

// fp8_e4m3's division by a k_scale on the GPU (with_scale_divisor: a product
// for powers of two, quotient_for_e4m3 for the others) gives the E4M3 code of
// the correctly rounded quotient for every 16-bit input x and every f32 d of
// three binades: [2^-64, 2^-63) and [2^63, 2^64), the ends of the range the
// residual step is taken on, and [1, 2). Within that range a quotient that
// rounds to a code other than 0 or 448 has only normal intermediates, so
// which binade d lies in does not change whether it is right.
template <mlakv::codec::InputDtype kDtype>
__global__ void count_k_scale_mismatches(std::uint32_t binade, unsigned long long* mismatches, std::uint32_t* example,
                                         unsigned long long* checked) {
  using namespace mlakv::codec;
  const std::uint32_t d_bits = binade | (blockIdx.x * blockDim.x + threadIdx.x);
  const float d = __uint_as_float(d_bits);
  unsigned long long bad = 0;
  unsigned inputs = 0;
  with_scale_divisor(d, [&](auto divide) {
    for (std::uint32_t bits = 0; bits <= 0xFFFFu; ++bits) {
      ++inputs;
      const float x = load_input<kDtype>(static_cast<std::uint16_t>(bits));
      if (encode_e4m3(divide(x)) != encode_e4m3(__fdiv_rn(x, d)) && bad++ == 0 &&
          atomicCAS(example, 0u, d_bits) == 0u) {
        example[1] = bits;
      }
    }
  });
  if (bad) atomicAdd(mismatches, bad);
  count_checked(checked, inputs);
}

TEST(cuda_division, k_scale_quotients_give_the_codes_of_the_division_for_every_input) {
  MLAKV_REQUIRE_GPU();
  using mlakv::codec::InputDtype;
  const std::uint32_t binades[] = {0x1F800000u, 0x3F800000u, 0x5F000000u};
  for (const bool bf16 : {true, false}) {
    for (const std::uint32_t binade : binades) {
      DeviceBuffer mismatches(sizeof(unsigned long long)), example(2 * sizeof(std::uint32_t)),
          checked(sizeof(unsigned long long));
      cudaMemset(mismatches.get(), 0, mismatches.bytes());
      cudaMemset(example.get(), 0, example.bytes());
      cudaMemset(checked.get(), 0, checked.bytes());
      const unsigned blocks = (1u << 23) / 256;  // one thread per mantissa of d
      auto* m = mismatches.get<unsigned long long>();
      auto* c = checked.get<unsigned long long>();
      if (bf16) {
        count_k_scale_mismatches<InputDtype::kBf16><<<blocks, 256>>>(binade, m, example.get<std::uint32_t>(), c);
      } else {
        count_k_scale_mismatches<InputDtype::kFp16><<<blocks, 256>>>(binade, m, example.get<std::uint32_t>(), c);
      }
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const auto e = example.download<std::uint32_t>();
      EXPECT_EQ(mismatches.download<unsigned long long>()[0], 0u)
          << (bf16 ? "bf16" : "fp16") << ": e.g. k_scale bits 0x" << std::hex << e[0] << ", x bits 0x" << e[1];
      EXPECT_EQ(checked.download<unsigned long long>()[0], 1ull << (23 + 16));  // every mantissa of d x every input
    }
  }
}

// decode_latent_group_bf16 on the GPU (bf16 byte permutes and bf16x2
// products) equals encode_bf16(decode_E2M1 * scale) for every code and scale
// byte, without an outer scale (432, 368, 352) and with pts outer scales.
__global__ void count_bf16_decode_mismatches(unsigned long long* mismatches, unsigned long long* checked) {
  using namespace mlakv::codec;
  alignas(16) std::uint8_t record[16] = {};
  const auto sbyte = static_cast<std::uint8_t>(threadIdx.x);
  const auto code = static_cast<std::uint8_t>(blockIdx.x);
  // y: 0 no outer scale, 1.. per-token outer scales (pts): tiny to huge, inf, NaN, -0.
  const float outers[] = {1.0f, 0.0123f, 3.0e-9f, 7.5e11f, 1.0f / 2688.0f, INFINITY, NAN, -0.0f};
  const float outer = outers[blockIdx.y];
  for (int i = 0; i < 8; ++i) record[i] = static_cast<std::uint8_t>(code | (((code + i) & 0xF) << 4));
  std::uint16_t got[16];
  decode_latent_group_bf16(0, record, sbyte, outer, got);
  const float s = decode_e4m3(sbyte);
  for (int j = 0; j < 16; ++j) {
    const std::uint8_t c = j % 2 == 0 ? code : static_cast<std::uint8_t>((code + j / 2) & 0xF);
    if (got[j] != encode_bf16(decode_e2m1(c) * s * outer)) atomicAdd(mismatches, 1ull);
  }
  count_checked(checked, 16);
}

TEST(cuda_e2m1, bf16_decode_equals_the_f32_path_for_every_code_and_scale) {
  MLAKV_REQUIRE_GPU();
  DeviceBuffer mismatches(sizeof(unsigned long long)), checked(sizeof(unsigned long long));
  cudaMemset(mismatches.get(), 0, mismatches.bytes());
  cudaMemset(checked.get(), 0, checked.bytes());
  count_bf16_decode_mismatches<<<dim3(16, 8), 256>>>(mismatches.get<unsigned long long>(),
                                                     checked.get<unsigned long long>());
  MLAKV_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(mismatches.download<unsigned long long>()[0], 0u);
  EXPECT_EQ(checked.download<unsigned long long>()[0],
            16ull * 8 * 256 * 16);  // codes x outer scales x scale bytes x values
}

// --- writers ---

DType dtype_for(Format f, DType preferred) {
  if (f == Format::kBf16) return DType::kBFloat16;
  if (f == Format::kFp16) return DType::kFloat16;
  return preferred;
}

struct Layout {
  std::int64_t num_blocks = 4;
  std::int64_t block_size = 32;
  std::int64_t slot_pad = 0;     // extra bytes per slot (multiple of 16)
  std::int64_t block_pad = 0;    // extra bytes per block (multiple of 16)
  std::int64_t row_pad = 0;      // extra elements per input row (even)
  std::size_t input_offset = 0;  // bytes past a 256-byte boundary for the inputs (4 or 16 aligned)
};

// Runs the same write on the CPU and on the GPU, from identical sentinel-filled
// buffers with guard bytes, and compares every byte of the buffers.
void expect_write_parity(Format format, DType dtype, const std::vector<std::int64_t>& slots, bool specials,
                         const Layout& l = {}, std::uint64_t seed = 1) {
  const mlakv::FormatInfo& info = mlakv::format_info(format);
  const auto tokens = static_cast<std::int64_t>(slots.size());
  const std::int64_t kv_stride = 512 + l.row_pad, pe_stride = 64 + l.row_pad;
  auto kv_c = random_inputs(static_cast<std::size_t>(std::max<std::int64_t>(tokens, 1) * kv_stride) + 256, dtype, seed,
                            specials);
  auto k_pe = random_inputs(static_cast<std::size_t>(std::max<std::int64_t>(tokens, 1) * pe_stride) + 256, dtype,
                            seed + 7, specials);
  // Host views start `input_offset` bytes in; the device buffers get the same bytes at the same offsets.
  const std::size_t off_elems = l.input_offset / 2;
  TensorView kv_view = mlakv::make_view(kv_c.data() + off_elems, dtype, {tokens, 512});
  kv_view.strides[0] = kv_stride;
  TensorView pe_view = mlakv::make_view(k_pe.data() + off_elems, dtype, {tokens, 64});
  pe_view.strides[0] = pe_stride;

  const std::int64_t stride_slot = info.record_bytes + l.slot_pad;
  const std::int64_t stride_block = l.block_size * stride_slot + l.block_pad;
  constexpr std::size_t kGuard = 4096;
  const std::size_t span = static_cast<std::size_t>(l.num_blocks * stride_block);
  std::vector<std::uint8_t> host(kGuard + span + kGuard, GuardedCache::kSentinel);
  TensorView cache_view =
      mlakv::make_view(host.data() + kGuard, DType::kUInt8, {l.num_blocks, l.block_size, info.record_bytes});
  cache_view.strides[0] = stride_block;
  cache_view.strides[1] = stride_slot;
  std::vector<std::int64_t> slot_copy = slots;
  TensorView slot_view = mlakv::make_view(slot_copy.data(), DType::kInt64, {tokens});
  // fp8_e4m3 divides by k_scale: a power of two (multiplied by its reciprocal on the GPU) or not.
  float k_scale = seed % 2 == 1 ? 0.0625f : 0.3f;
  TensorView scale = mlakv::make_view(&k_scale, DType::kFloat32, {1});

  // The host cache must be 16-byte aligned for the CPU writer too.
  ASSERT_EQ(reinterpret_cast<std::uintptr_t>(host.data() + kGuard) % 16, 0u);
  DeviceBuffer d_cache(host);
  DeviceBuffer d_kv(kv_c), d_pe(k_pe), d_slots(slot_copy), d_scale(std::vector<float>{k_scale});
  ASSERT_TRUE(d_cache.ok() && d_kv.ok() && d_pe.ok() && d_slots.ok());
  mlakv::write_records(format, kv_view, pe_view, cache_view, slot_view, &scale);

  const TensorView d_scale_view = on_device(scale, d_scale);
  mlakv::write_records(format, on_device(kv_view, d_kv, l.input_offset), on_device(pe_view, d_pe, l.input_offset),
                       on_device(cache_view, d_cache, kGuard), on_device(slot_view, d_slots), &d_scale_view);
  MLAKV_CUDA_OK(cudaDeviceSynchronize());
  const auto device = d_cache.download<std::uint8_t>();
  for (std::size_t i = 0; i < host.size(); ++i) {
    if (host[i] != device[i]) {
      const auto rel = static_cast<std::int64_t>(i) - static_cast<std::int64_t>(kGuard);
      FAIL() << info.id << " " << mlakv::dtype_name(dtype) << ": first differing byte at cache offset " << rel
             << " (slot byte " << (rel % stride_slot) << "): CPU " << int(host[i]) << ", CUDA " << int(device[i]);
    }
  }
}

std::vector<std::int64_t> iota_slots(std::int64_t n, std::int64_t first = 0) {
  std::vector<std::int64_t> s(static_cast<std::size_t>(n));
  std::iota(s.begin(), s.end(), first);
  return s;
}

class cuda_writer : public ::testing::TestWithParam<std::tuple<Format, DType>> {
 protected:
  void SetUp() override { MLAKV_REQUIRE_GPU(); }
  Format format() const { return std::get<0>(GetParam()); }
  DType dtype() const { return dtype_for(std::get<0>(GetParam()), std::get<1>(GetParam())); }
};

TEST_P(cuda_writer, random_values_match_cpu) { expect_write_parity(format(), dtype(), iota_slots(128), false); }

TEST_P(cuda_writer, hostile_values_match_cpu) {
  // NaN, +-inf, +-0, subnormals, +-448 mixed in, several seeds.
  for (std::uint64_t seed : {2, 3, 4}) expect_write_parity(format(), dtype(), iota_slots(128), true, {}, seed);
}

TEST_P(cuda_writer, launches_of_many_tokens_match_cpu) {
  // 20,000 tokens: the NVFP4 writers' variant for launches of many tokens (register-capped).
  Layout l;
  l.num_blocks = 20000 / 64 + 1;
  l.block_size = 64;
  auto slots = iota_slots(20000);
  std::reverse(slots.begin(), slots.end());
  expect_write_parity(format(), dtype(), slots, false, l, 5);
  expect_write_parity(format(), dtype(), slots, true, l, 6);
}

TEST_P(cuda_writer, skipped_slots_and_guard_bytes_match_cpu) {
  const std::int64_t capacity = 4 * 32;
  expect_write_parity(format(), dtype(), {0, -1, capacity, 65, (std::int64_t{1} << 40) + 17, 130, capacity - 1, -7},
                      true);
}

TEST_P(cuda_writer, strided_inputs_and_padded_cache_match_cpu) {
  Layout l;
  l.slot_pad = 16;
  l.block_pad = 48;
  l.row_pad = 40;
  expect_write_parity(format(), dtype(), iota_slots(100, 3), true, l);
}

TEST_P(cuda_writer, four_byte_aligned_inputs_match_cpu) {
  Layout l;
  l.row_pad = 2;  // rows 4-byte but not 16-byte aligned: the narrow-load path
  l.input_offset = 4;
  expect_write_parity(format(), dtype(), iota_slots(64), true, l);
}

TEST_P(cuda_writer, zero_and_one_token) {
  expect_write_parity(format(), dtype(), {}, false);
  expect_write_parity(format(), dtype(), {77}, true);
}

INSTANTIATE_TEST_SUITE_P(every_format, cuda_writer,
                         ::testing::Combine(::testing::Values(Format::kBf16, Format::kFp16, Format::kFp8E4m3,
                                                              Format::kFp8DsMla, Format::kNvfp4DsMla,
                                                              Format::kNvfp4DsMlaFp8Rope, Format::kNvfp4DsMlaFp8RopePts,
                                                              Format::kNvfp4Fp8DsMla),
                                            ::testing::Values(DType::kBFloat16, DType::kFloat16)),
                         [](const auto& info) {
                           return std::string(mlakv::format_info(std::get<0>(info.param)).id) + "_" +
                                  mlakv::dtype_name(std::get<1>(info.param));
                         });

TEST(cuda_writer_grid, token_counts_at_grid_limits_match_cpu) {
  MLAKV_REQUIRE_GPU();
  for (std::int64_t tokens : {65535, 65537}) {
    Layout l;
    l.num_blocks = (tokens + 63) / 64;
    l.block_size = 64;
    auto slots = iota_slots(tokens);
    std::reverse(slots.begin(), slots.end());
    expect_write_parity(Format::kNvfp4DsMlaFp8Rope, DType::kBFloat16, slots, true, l, 11);
  }
}

// Every bf16 and fp16 bit pattern, as 576-value tokens, through the records whose
// conversions run in hardware (E4M3) and in the Hopper E2M1 path.
TEST(cuda_writer_exhaustive, every_16_bit_input_matches_cpu) {
  MLAKV_REQUIRE_GPU();
  for (const DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    // fp8_e4m3 under several k_scales: powers of two (a product on the GPU, down to 2^-126) and not.
    const std::pair<Format, float> cases[] = {{Format::kFp8E4m3, 1.0f},
                                              {Format::kFp8E4m3, 0x1p-126f},
                                              {Format::kFp8E4m3, 0x1p20f},
                                              {Format::kFp8E4m3, 0.3f},
                                              {Format::kFp8DsMla, 1.0f},
                                              {Format::kNvfp4DsMlaFp8Rope, 1.0f},
                                              {Format::kNvfp4DsMlaFp8RopePts, 1.0f},
                                              {Format::kNvfp4Fp8DsMla, 1.0f}};
    for (const auto& [f, case_scale] : cases) {
      const std::int64_t tokens = (65536 + 575) / 576;
      const mlakv::FormatInfo& info = mlakv::format_info(f);
      std::vector<std::uint16_t> kv_c(tokens * 512), k_pe(tokens * 64);
      for (std::int64_t i = 0; i < tokens * 576; ++i) {
        const auto bits = static_cast<std::uint16_t>(i & 0xFFFF);
        (i % 576 < 512 ? kv_c[(i / 576) * 512 + i % 576] : k_pe[(i / 576) * 64 + i % 576 - 512]) = bits;
      }
      auto slots = iota_slots(tokens);
      std::vector<std::uint8_t> host(tokens * info.record_bytes);
      float k_scale = case_scale;
      TensorView scale = mlakv::make_view(&k_scale, DType::kFloat32, {1});
      TensorView kv_view = mlakv::make_view(kv_c.data(), dtype, {tokens, 512});
      TensorView pe_view = mlakv::make_view(k_pe.data(), dtype, {tokens, 64});
      TensorView cache_view = mlakv::make_view(host.data(), DType::kUInt8, {1, tokens, info.record_bytes});
      TensorView slot_view = mlakv::make_view(slots.data(), DType::kInt64, {tokens});
      mlakv::write_records(f, kv_view, pe_view, cache_view, slot_view, &scale);
      DeviceBuffer d_kv(kv_c), d_pe(k_pe), d_slots(slots), d_cache(host.size());
      mlakv::write_records(f, on_device(kv_view, d_kv), on_device(pe_view, d_pe), on_device(cache_view, d_cache),
                           on_device(slot_view, d_slots), &scale);
      MLAKV_CUDA_OK(cudaDeviceSynchronize());
      EXPECT_EQ(first_difference(d_cache.download<std::uint8_t>(), host, info.record_bytes), "")
          << info.id << " " << mlakv::dtype_name(dtype) << " k_scale " << k_scale;
    }
  }
}

TEST(cuda_writer_large_cache, records_past_4_gib_match_cpu) {
  MLAKV_REQUIRE_GPU();
  const mlakv::FormatInfo& info = mlakv::format_info(Format::kNvfp4DsMlaFp8Rope);
  const std::int64_t block_size = 64;
  const std::int64_t num_blocks = ((std::int64_t{5} << 30) / (block_size * info.record_bytes)) + 1;  // > 5 GiB
  const std::int64_t capacity = num_blocks * block_size;
  DeviceBuffer d_cache(static_cast<std::size_t>(num_blocks * block_size * info.record_bytes));
  ASSERT_TRUE(d_cache.ok()) << "could not allocate the > 4 GiB cache";
  const std::vector<std::int64_t> slots = {capacity - 1, capacity - 2, capacity / 2, 5, capacity - block_size};
  const auto tokens = static_cast<std::int64_t>(slots.size());
  const auto kv_c = random_inputs(tokens * 512, DType::kBFloat16, 31, true);
  const auto k_pe = random_inputs(tokens * 64, DType::kBFloat16, 32, true);
  const auto want = write_tokens(Format::kNvfp4DsMlaFp8Rope, DType::kBFloat16, kv_c, k_pe);
  DeviceBuffer d_kv(kv_c), d_pe(k_pe), d_slots(slots);
  TensorView cache_view = mlakv::make_view(nullptr, DType::kUInt8, {num_blocks, block_size, info.record_bytes});
  mlakv::concat_and_cache_nvfp4_mla_fp8_rope(
      on_device(mlakv::make_view(nullptr, DType::kBFloat16, {tokens, 512}), d_kv),
      on_device(mlakv::make_view(nullptr, DType::kBFloat16, {tokens, 64}), d_pe), on_device(cache_view, d_cache),
      on_device(mlakv::make_view(nullptr, DType::kInt64, {tokens}), d_slots));
  MLAKV_CUDA_OK(cudaDeviceSynchronize());
  for (std::int64_t t = 0; t < tokens; ++t) {
    std::vector<std::uint8_t> got(info.record_bytes);
    cudaMemcpy(got.data(), d_cache.get<std::uint8_t>() + slots[t] * info.record_bytes, got.size(),
               cudaMemcpyDeviceToHost);
    const std::vector<std::uint8_t> expect(want.begin() + t * info.record_bytes,
                                           want.begin() + (t + 1) * info.record_bytes);
    EXPECT_EQ(first_difference(got, expect, info.record_bytes), "") << "slot " << slots[t];
  }
  // And the reader finds them there.
  std::vector<float> kv_out(tokens * 512);
  std::vector<float> cpu_kv(tokens * 512), cpu_pe(tokens * 64);
  DeviceBuffer d_kv_out(tokens * 512 * sizeof(float)), d_pe_out(tokens * 64 * sizeof(float));
  mlakv::gather_records(Format::kNvfp4DsMlaFp8Rope, on_device(cache_view, d_cache),
                        on_device(mlakv::make_view(nullptr, DType::kInt64, {tokens}), d_slots),
                        on_device(mlakv::make_view(nullptr, DType::kFloat32, {tokens, 512}), d_kv_out),
                        on_device(mlakv::make_view(nullptr, DType::kFloat32, {tokens, 64}), d_pe_out));
  auto dense = want;
  std::vector<std::int64_t> dense_slots = iota_slots(tokens);
  mlakv::gather_records(Format::kNvfp4DsMlaFp8Rope,
                        mlakv::make_view(dense.data(), DType::kUInt8, {1, tokens, info.record_bytes}),
                        mlakv::make_view(dense_slots.data(), DType::kInt64, {tokens}),
                        mlakv::make_view(cpu_kv.data(), DType::kFloat32, {tokens, 512}),
                        mlakv::make_view(cpu_pe.data(), DType::kFloat32, {tokens, 64}));
  MLAKV_CUDA_OK(cudaDeviceSynchronize());
  const auto gpu_kv = d_kv_out.download<float>();
  EXPECT_EQ(std::memcmp(gpu_kv.data(), cpu_kv.data(), gpu_kv.size() * sizeof(float)), 0);
}

// --- readers ---

class cuda_reader : public ::testing::TestWithParam<std::tuple<Format, DType>> {
 protected:
  void SetUp() override { MLAKV_REQUIRE_GPU(); }
};

// Writes 96 hostile tokens on the CPU, then gathers with both backends (by
// slots and through a block table) and compares the output bits.
TEST_P(cuda_reader, gathers_match_cpu_bit_for_bit) {
  const auto [format, out_dtype] = GetParam();
  const mlakv::FormatInfo& info = mlakv::format_info(format);
  const DType in_dtype = dtype_for(format, DType::kBFloat16);
  const std::int64_t tokens = 96, block_size = 16;
  const auto kv_c = random_inputs(tokens * 512, in_dtype, 41, true);
  const auto k_pe = random_inputs(tokens * 64, in_dtype, 42, true);
  auto records = write_tokens(format, in_dtype, kv_c, k_pe, 0.0625f);
  TensorView cache =
      mlakv::make_view(records.data(), DType::kUInt8, {tokens / block_size, block_size, info.record_bytes});
  const std::vector<std::int64_t> slots = {5, -1, 95, 96, 0, 40, (std::int64_t{1} << 40) + 3, 17};
  const auto rows = static_cast<std::int64_t>(slots.size());
  float k_scale = 0.0625f;
  TensorView scale = mlakv::make_view(&k_scale, DType::kFloat32, {1});
  mlakv::GatherOptions options;
  options.scale = &scale;
  options.rope_dtype = in_dtype;
  const std::size_t esize = out_dtype == DType::kFloat32 ? 4 : 2;

  // One [rows, 576] buffer, viewed as [:, :512] and [:, 512:].
  auto run = [&](const TensorView& cache_view, auto&& gather_into, bool device) {
    std::vector<std::uint8_t> out(rows * 576 * esize, 0x5A);
    DeviceBuffer d_out(out);
    TensorView kv = mlakv::make_view(out.data(), out_dtype, {rows, 512});
    kv.strides[0] = 576;
    TensorView pe = mlakv::make_view(out.data() + 512 * esize, out_dtype, {rows, 64});
    pe.strides[0] = 576;
    if (device) {
      kv = on_device(kv, d_out);
      pe = on_device(pe, d_out, 512 * esize);
    }
    gather_into(cache_view, kv, pe);
    if (device) {
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      out = d_out.download<std::uint8_t>();
    }
    return out;
  };
  DeviceBuffer d_cache(records), d_slots(slots), d_scale(std::vector<float>{k_scale});
  const TensorView d_scale_view = on_device(scale, d_scale);
  std::vector<std::int64_t> slot_copy = slots;
  const TensorView slot_view = mlakv::make_view(slot_copy.data(), DType::kInt64, {rows});
  const auto cpu = run(
      cache, [&](auto c, auto kv, auto pe) { mlakv::gather_records(format, c, slot_view, kv, pe, options); }, false);
  mlakv::GatherOptions d_options = options;
  d_options.scale = &d_scale_view;
  const auto gpu = run(
      on_device(cache, d_cache),
      [&](auto c, auto kv, auto pe) {
        mlakv::gather_records(format, c, on_device(slot_view, d_slots), kv, pe, d_options);
      },
      true);
  EXPECT_EQ(std::memcmp(cpu.data(), gpu.data(), cpu.size()), 0) << "gather by slots";

  // Paged: 3 sequences; row 4 is past sequence 1's length, sequence 2's block id 9 is out of range.
  const std::vector<std::int32_t> block_table = {5, 2, 0, 1, 3, -1, 9, 4, 7};  // [3, 3]
  const std::vector<std::int32_t> short_lens = {3, 1, 3};
  const std::vector<std::int32_t> full_cu = {0, 3, 5, 8};
  const std::int64_t paged_rows = 8;
  TensorView bt = mlakv::make_view(const_cast<std::int32_t*>(block_table.data()), DType::kInt32, {3, 3});
  TensorView lens = mlakv::make_view(const_cast<std::int32_t*>(short_lens.data()), DType::kInt32, {3});
  TensorView cus = mlakv::make_view(const_cast<std::int32_t*>(full_cu.data()), DType::kInt32, {4});
  DeviceBuffer d_bt(block_table), d_lens(short_lens), d_cus(full_cu);
  auto paged = [&](bool device) {
    std::vector<std::uint8_t> out(paged_rows * 576 * esize, 0x5A);
    DeviceBuffer d_out(out);
    TensorView kv = mlakv::make_view(out.data(), out_dtype, {paged_rows, 512});
    kv.strides[0] = 576;
    TensorView pe = mlakv::make_view(out.data() + 512 * esize, out_dtype, {paged_rows, 64});
    pe.strides[0] = 576;
    if (device) {
      mlakv::gather_records_paged(format, on_device(cache, d_cache), on_device(bt, d_bt), on_device(lens, d_lens),
                                  on_device(cus, d_cus), on_device(kv, d_out), on_device(pe, d_out, 512 * esize),
                                  d_options);
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      return d_out.download<std::uint8_t>();
    }
    mlakv::gather_records_paged(format, cache, bt, lens, cus, kv, pe, options);
    return out;
  };
  const auto cpu_paged = paged(false);
  EXPECT_EQ(std::memcmp(cpu_paged.data(), paged(true).data(), cpu_paged.size()), 0) << "gather through block tables";
}

INSTANTIATE_TEST_SUITE_P(every_format, cuda_reader,
                         ::testing::Combine(::testing::Values(Format::kBf16, Format::kFp16, Format::kFp8E4m3,
                                                              Format::kFp8DsMla, Format::kNvfp4DsMla,
                                                              Format::kNvfp4DsMlaFp8Rope, Format::kNvfp4DsMlaFp8RopePts,
                                                              Format::kNvfp4Fp8DsMla),
                                            ::testing::Values(DType::kFloat32, DType::kBFloat16)),
                         [](const auto& info) {
                           return std::string(mlakv::format_info(std::get<0>(info.param)).id) + "_" +
                                  mlakv::dtype_name(std::get<1>(info.param));
                         });

// --- the DeepSeek V4 family: block-planar V4 pages (fp8_ds_mla_v4), token-major
// V4.1 records (fp8_ds_mla_v41, nvfp4_ds_mla_v41) ---

constexpr Format kV41Formats[] = {Format::kFp8DsMlaV41, Format::kNvfp4DsMlaV41};

// The engines' view of whole pages: [num_blocks, block_size, record_bytes],
// slot stride record_bytes, block stride the (padded) page plus `block_pad`;
// inputs [T, 448] and [T, 64] with `row_pad` extra elements per row. Writes on
// both backends from identical sentinel-filled buffers with guard bytes and
// compares every byte.
void expect_page_write_parity(Format format, DType dtype, const std::vector<std::int64_t>& slots, bool specials,
                              std::int64_t num_blocks, std::int64_t block_size, std::int64_t block_pad,
                              std::int64_t row_pad, std::uint64_t seed) {
  const mlakv::FormatInfo& info = mlakv::format_info(format);
  const auto tokens = static_cast<std::int64_t>(slots.size());
  const std::int64_t nope = info.geometry.nope_dims, rope = info.geometry.rope_dims;
  const std::int64_t kv_stride = nope + row_pad, pe_stride = rope + row_pad;
  auto kv_c =
      random_inputs(static_cast<std::size_t>(std::max<std::int64_t>(tokens, 1) * kv_stride), dtype, seed, specials);
  auto k_pe =
      random_inputs(static_cast<std::size_t>(std::max<std::int64_t>(tokens, 1) * pe_stride), dtype, seed + 7, specials);
  TensorView kv_view = mlakv::make_view(kv_c.data(), dtype, {tokens, nope});
  kv_view.strides[0] = kv_stride;
  TensorView pe_view = mlakv::make_view(k_pe.data(), dtype, {tokens, rope});
  pe_view.strides[0] = pe_stride;
  const std::int64_t stride_block = mlakv::page_bytes(info, block_size) + block_pad;
  constexpr std::size_t kGuard = 4096;
  std::vector<std::uint8_t> host(kGuard + static_cast<std::size_t>(num_blocks * stride_block) + kGuard,
                                 GuardedCache::kSentinel);
  ASSERT_EQ(reinterpret_cast<std::uintptr_t>(host.data() + kGuard) % 16, 0u);
  TensorView cache_view =
      mlakv::make_view(host.data() + kGuard, DType::kUInt8, {num_blocks, block_size, info.record_bytes});
  cache_view.strides[0] = stride_block;
  std::vector<std::int64_t> slot_copy = slots;
  TensorView slot_view = mlakv::make_view(slot_copy.data(), DType::kInt64, {tokens});
  DeviceBuffer d_cache(host), d_kv(kv_c), d_pe(k_pe), d_slots(slot_copy);
  ASSERT_TRUE(d_cache.ok() && d_kv.ok() && d_pe.ok() && d_slots.ok());
  mlakv::write_records(format, kv_view, pe_view, cache_view, slot_view);
  mlakv::write_records(format, on_device(kv_view, d_kv), on_device(pe_view, d_pe),
                       on_device(cache_view, d_cache, kGuard), on_device(slot_view, d_slots));
  MLAKV_CUDA_OK(cudaDeviceSynchronize());
  const auto device = d_cache.download<std::uint8_t>();
  for (std::size_t i = 0; i < host.size(); ++i) {
    if (host[i] != device[i]) {
      const auto rel = static_cast<std::int64_t>(i) - static_cast<std::int64_t>(kGuard);
      FAIL() << info.id << ", " << mlakv::dtype_name(dtype) << ": first differing byte at cache offset " << rel
             << " (page byte " << (rel % stride_block) << "): CPU " << int(host[i]) << ", CUDA " << int(device[i]);
    }
  }
}

void expect_random_and_hostile_values_in_shuffled_slots_match_cpu(Format format) {
  auto slots = iota_slots(4 * 64);
  std::shuffle(slots.begin(), slots.end(), std::mt19937_64(9));
  slots.resize(150);
  for (const std::int64_t skipped : {std::int64_t{-1}, std::int64_t{4 * 64}, (std::int64_t{1} << 40) + 17}) {
    slots.push_back(skipped);
  }
  for (const DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    for (std::uint64_t seed : {1, 2, 3}) expect_page_write_parity(format, dtype, slots, seed != 1, 4, 64, 0, 0, seed);
  }
}

TEST(cuda_page_writer, fp8_ds_mla_v4_random_and_hostile_values_in_shuffled_slots_match_cpu) {
  MLAKV_REQUIRE_GPU();
  expect_random_and_hostile_values_in_shuffled_slots_match_cpu(Format::kFp8DsMlaV4);
}

TEST(cuda_page_writer, v41_records_random_and_hostile_values_in_shuffled_slots_match_cpu) {
  MLAKV_REQUIRE_GPU();
  for (const Format format : kV41Formats) expect_random_and_hostile_values_in_shuffled_slots_match_cpu(format);
}

void expect_strided_inputs_padded_pages_and_odd_block_sizes_match_cpu(Format format) {
  for (const DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    expect_page_write_parity(format, dtype, iota_slots(100, 3), true, 4, 32, 64, 40,
                             4);                                                   // larger block stride, row pads
    expect_page_write_parity(format, dtype, iota_slots(30), true, 7, 5, 0, 2, 5);  // 5 x 584 padded to 3456
    expect_page_write_parity(format, dtype, {}, false, 2, 64, 0, 0, 6);
    expect_page_write_parity(format, dtype, {77}, true, 2, 64, 0, 0, 7);
  }
}

TEST(cuda_page_writer, fp8_ds_mla_v4_strided_inputs_padded_pages_and_odd_block_sizes_match_cpu) {
  MLAKV_REQUIRE_GPU();
  expect_strided_inputs_padded_pages_and_odd_block_sizes_match_cpu(Format::kFp8DsMlaV4);
}

TEST(cuda_page_writer, v41_records_strided_inputs_padded_pages_and_odd_block_sizes_match_cpu) {
  MLAKV_REQUIRE_GPU();
  for (const Format format : kV41Formats) expect_strided_inputs_padded_pages_and_odd_block_sizes_match_cpu(format);
}

void expect_launches_of_many_tokens_match_cpu(Format format) {
  auto slots = iota_slots(20000);
  std::reverse(slots.begin(), slots.end());
  expect_page_write_parity(format, DType::kBFloat16, slots, true, 20000 / 64 + 1, 64, 0, 0, 8);
}

TEST(cuda_page_writer, fp8_ds_mla_v4_launches_of_many_tokens_match_cpu) {
  MLAKV_REQUIRE_GPU();
  expect_launches_of_many_tokens_match_cpu(Format::kFp8DsMlaV4);
}

TEST(cuda_page_writer, v41_records_launches_of_many_tokens_match_cpu) {
  MLAKV_REQUIRE_GPU();
  for (const Format format : kV41Formats) expect_launches_of_many_tokens_match_cpu(format);
}

// Pages written on the CPU from hostile inputs, gathered by both backends (by
// slots and through block tables) into float32 and bf16: identical bits.
void expect_page_gather_parity(Format format) {
  SCOPED_TRACE(mlakv::format_info(format).id);
  const mlakv::FormatInfo& info = mlakv::format_info(format);
  const std::int64_t tokens = 96, block_size = 16, num_blocks = tokens / block_size;
  const std::int64_t nope = 448, rope = 64, width = nope + rope;
  const std::int64_t stride_block = mlakv::page_bytes(info, block_size);
  const auto kv_c = random_inputs(tokens * nope, DType::kBFloat16, 41, true);
  const auto k_pe = random_inputs(tokens * rope, DType::kBFloat16, 42, true);
  std::vector<std::uint8_t> pages(static_cast<std::size_t>(num_blocks * stride_block), 0x33);
  TensorView cache = mlakv::make_view(pages.data(), DType::kUInt8, {num_blocks, block_size, info.record_bytes});
  cache.strides[0] = stride_block;
  std::vector<std::int64_t> all = iota_slots(tokens);
  mlakv::write_records(format,
                       mlakv::make_view(const_cast<std::uint16_t*>(kv_c.data()), DType::kBFloat16, {tokens, nope}),
                       mlakv::make_view(const_cast<std::uint16_t*>(k_pe.data()), DType::kBFloat16, {tokens, rope}),
                       cache, mlakv::make_view(all.data(), DType::kInt64, {tokens}));
  DeviceBuffer d_cache(pages);
  const std::vector<std::int64_t> slots = {5, -1, 95, 96, 0, 40, (std::int64_t{1} << 40) + 3, 17};
  const auto rows = static_cast<std::int64_t>(slots.size());
  DeviceBuffer d_slots(slots);
  std::vector<std::int64_t> slot_copy = slots;
  const TensorView slot_view = mlakv::make_view(slot_copy.data(), DType::kInt64, {rows});
  const std::vector<std::int32_t> block_table = {5, 2, 0, 1, 3, -1, 9, 4, 7};  // [3, 3]
  const std::vector<std::int32_t> lens = {20, 1, 40};
  const std::vector<std::int32_t> cu = {0, 20, 22, 62};
  DeviceBuffer d_bt(block_table), d_lens(lens), d_cu(cu);
  TensorView bt = mlakv::make_view(const_cast<std::int32_t*>(block_table.data()), DType::kInt32, {3, 3});
  TensorView lv = mlakv::make_view(const_cast<std::int32_t*>(lens.data()), DType::kInt32, {3});
  TensorView cv = mlakv::make_view(const_cast<std::int32_t*>(cu.data()), DType::kInt32, {4});
  for (const DType out_dtype : {DType::kFloat32, DType::kBFloat16}) {
    SCOPED_TRACE(mlakv::dtype_name(out_dtype));
    const std::size_t esize = out_dtype == DType::kFloat32 ? 4 : 2;
    // One [n, 512] buffer, viewed as [:, :448] and [:, 448:].
    auto gather = [&](std::int64_t n, bool device, bool paged) {
      std::vector<std::uint8_t> out(static_cast<std::size_t>(n * width) * esize, 0x5A);
      DeviceBuffer d_out(out);
      TensorView kv = mlakv::make_view(out.data(), out_dtype, {n, nope});
      kv.strides[0] = width;
      TensorView pe = mlakv::make_view(out.data() + nope * esize, out_dtype, {n, rope});
      pe.strides[0] = width;
      if (device) {
        kv = on_device(kv, d_out);
        pe = on_device(pe, d_out, nope * esize);
      }
      const TensorView c = device ? on_device(cache, d_cache) : cache;
      if (paged) {
        mlakv::gather_records_paged(format, c, device ? on_device(bt, d_bt) : bt, device ? on_device(lv, d_lens) : lv,
                                    device ? on_device(cv, d_cu) : cv, kv, pe);
      } else {
        mlakv::gather_records(format, c, device ? on_device(slot_view, d_slots) : slot_view, kv, pe);
      }
      if (!device) return out;
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      return d_out.download<std::uint8_t>();
    };
    const auto cpu = gather(rows, false, false);
    EXPECT_EQ(std::memcmp(cpu.data(), gather(rows, true, false).data(), cpu.size()), 0) << "gather by slots";
    const auto cpu_paged = gather(62, false, true);
    EXPECT_EQ(std::memcmp(cpu_paged.data(), gather(62, true, true).data(), cpu_paged.size()), 0)
        << "gather through block tables";
  }
}

TEST(cuda_page_reader, fp8_ds_mla_v4_gathers_match_cpu_bit_for_bit) {
  MLAKV_REQUIRE_GPU();
  expect_page_gather_parity(Format::kFp8DsMlaV4);
}

TEST(cuda_page_reader, v41_records_gathers_match_cpu_bit_for_bit) {
  MLAKV_REQUIRE_GPU();
  for (const Format format : kV41Formats) expect_page_gather_parity(format);
}

// --- graphs and streams ---

TEST(cuda_writer_graph, captured_writer_replays_with_new_inputs) {
  MLAKV_REQUIRE_GPU();
  const std::int64_t tokens = 32;
  const auto f = Format::kNvfp4DsMlaFp8Rope;
  DeviceBuffer d_kv(tokens * 512 * 2), d_pe(tokens * 64 * 2), d_cache(tokens * 368);
  auto slots = iota_slots(tokens);
  DeviceBuffer d_slots(slots);
  cudaStream_t stream;
  MLAKV_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const TensorView kv = on_device(mlakv::make_view(nullptr, DType::kBFloat16, {tokens, 512}), d_kv);
  const TensorView pe = on_device(mlakv::make_view(nullptr, DType::kBFloat16, {tokens, 64}), d_pe);
  const TensorView cache = on_device(mlakv::make_view(nullptr, DType::kUInt8, {1, tokens, 368}), d_cache);
  const TensorView sl = on_device(mlakv::make_view(nullptr, DType::kInt64, {tokens}), d_slots);
  cudaGraph_t graph;
  MLAKV_CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  mlakv::concat_and_cache_nvfp4_mla_fp8_rope(kv, pe, cache, sl, nullptr, false, stream);
  MLAKV_CUDA_OK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  MLAKV_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (std::uint64_t seed : {51, 52}) {
    const auto kv_c = random_inputs(tokens * 512, DType::kBFloat16, seed, false);
    const auto k_pe = random_inputs(tokens * 64, DType::kBFloat16, seed + 1, false);
    cudaMemcpy(d_kv.get(), kv_c.data(), d_kv.bytes(), cudaMemcpyHostToDevice);
    cudaMemcpy(d_pe.get(), k_pe.data(), d_pe.bytes(), cudaMemcpyHostToDevice);
    MLAKV_CUDA_OK(cudaGraphLaunch(exec, stream));
    MLAKV_CUDA_OK(cudaStreamSynchronize(stream));
    EXPECT_EQ(first_difference(d_cache.download<std::uint8_t>(), write_tokens(f, DType::kBFloat16, kv_c, k_pe), 368),
              "")
        << "replay with seed " << seed;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// Writers on several streams and from several host threads into disjoint
// slots give the serial run's bytes, and repeated runs are byte-identical.
TEST(cuda_writer_concurrency, streams_and_threads_into_disjoint_slots_match_a_serial_run) {
  MLAKV_REQUIRE_GPU();
  constexpr int kWorkers = 4;
  constexpr std::int64_t kTokensEach = 2048;
  constexpr std::int64_t kTokens = kWorkers * kTokensEach;
  const auto f = Format::kNvfp4DsMlaFp8Rope;
  const auto kv_c = random_inputs(kTokens * 512, DType::kBFloat16, 61, true);
  const auto k_pe = random_inputs(kTokens * 64, DType::kBFloat16, 62, true);
  auto slots = iota_slots(kTokens);
  std::shuffle(slots.begin(), slots.end(), std::mt19937_64(63));
  DeviceBuffer d_kv(kv_c), d_pe(k_pe), d_slots(slots), serial(kTokens * 368), parallel(kTokens * 368);
  const auto cache_view = [&](const DeviceBuffer& b) {
    return on_device(mlakv::make_view(nullptr, DType::kUInt8, {kTokens / 64, 64, 368}), b);
  };
  const auto part = [&](const DeviceBuffer& b, std::int64_t first, std::int64_t n, std::int64_t width, DType dtype) {
    const std::size_t esize = dtype == DType::kInt64 ? 8 : 2;
    return on_device(width == 0 ? mlakv::make_view(nullptr, dtype, {n}) : mlakv::make_view(nullptr, dtype, {n, width}),
                     b, static_cast<std::size_t>(first * std::max<std::int64_t>(width, 1)) * esize);
  };
  mlakv::write_records(f, part(d_kv, 0, kTokens, 512, DType::kBFloat16), part(d_pe, 0, kTokens, 64, DType::kBFloat16),
                       cache_view(serial), part(d_slots, 0, kTokens, 0, DType::kInt64));
  MLAKV_CUDA_OK(cudaDeviceSynchronize());
  const auto want = serial.download<std::uint8_t>();
  for (int run = 0; run < 3; ++run) {
    cudaMemset(parallel.get(), 0, parallel.bytes());
    std::vector<std::thread> threads;
    for (int w = 0; w < kWorkers; ++w) {
      threads.emplace_back([&, w] {
        cudaStream_t stream;
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        const std::int64_t first = w * kTokensEach;
        mlakv::write_records(f, part(d_kv, first, kTokensEach, 512, DType::kBFloat16),
                             part(d_pe, first, kTokensEach, 64, DType::kBFloat16), cache_view(parallel),
                             part(d_slots, first, kTokensEach, 0, DType::kInt64), nullptr, stream);
        cudaStreamSynchronize(stream);
        cudaStreamDestroy(stream);
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(first_difference(parallel.download<std::uint8_t>(), want, 368), "") << "run " << run;
  }
}

}  // namespace
