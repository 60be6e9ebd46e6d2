// SPDX-License-Identifier: Apache-2.0
// The CUDA writers write exactly the CPU reference's bytes in every format,
// dtype and layout, hostile values and every 16-bit input included, also from
// CUDA graphs and concurrent streams. Skipped without a CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cuda_support.h"
#include "test_support.h"

namespace {

using mlakv::DType;
using mlakv::Format;
using mlakv::TensorView;
using namespace mlakv::test;

// --- writers ---

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
    // The workers' streams are non-blocking: they do not wait for the legacy stream's memset, so wait for it here.
    MLAKV_CUDA_OK(cudaMemset(parallel.get(), 0, parallel.bytes()));
    MLAKV_CUDA_OK(cudaDeviceSynchronize());
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
