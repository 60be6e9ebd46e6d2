// SPDX-License-Identifier: Apache-2.0
#include <string>

#include "benchmarks.h"
#include "check_cuda.h"
#include "mlakv/readers.h"
#include "pattern_copy.cuh"
#include "results.h"

namespace mlakv_bench {

using mlakv::DType;
using mlakv::Format;
using mlakv::TensorView;

void bench_reader(Bench& b, Format format, std::int64_t tokens, bool random, int sets) {
  const auto& info = mlakv::format_info(format);
  // Output rows [N, nope + rope] bf16 (576 values; 512 for the DeepSeek V4 family), viewed as kv_c and k_pe.
  const std::int64_t nope = info.geometry.nope_dims, width = nope + info.geometry.rope_dims;
  const BenchCache cache = bench_cache(info, tokens);
  std::vector<BufferSet> s(static_cast<std::size_t>(sets));
  std::vector<std::unique_ptr<DeviceBuffer>> outs;
  for (int i = 0; i < sets; ++i) {
    auto slots = make_slots(tokens, random, 20 + i);
    s[i].slots = std::make_unique<DeviceBuffer>(slots.size() * 8);
    s[i].cache = std::make_unique<DeviceBuffer>(cache.bytes());
    CHECK_CUDA(cudaMemcpy(s[i].slots->data(), slots.data(), slots.size() * 8, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemset(s[i].cache->data(), 0x11, s[i].cache->bytes()));  // finite records in every format
    outs.push_back(std::make_unique<DeviceBuffer>(static_cast<std::size_t>(tokens * width) * 2));
  }
  const TensorView scale = b.k_scale_view();
  mlakv::GatherOptions options;
  options.scale = &scale;
  const mlakv::Device cuda{mlakv::DeviceType::kCuda, 0};
  auto launch = [&](int rep) {
    const int i = rep % sets;
    TensorView kv = mlakv::make_view(outs[i]->data(), DType::kBFloat16, {tokens, nope}, cuda);
    kv.strides[0] = width;
    TensorView pe = mlakv::make_view(outs[i]->get<std::uint8_t>() + 2 * nope, DType::kBFloat16,
                                     {tokens, info.geometry.rope_dims}, cuda);
    pe.strides[0] = width;
    mlakv::gather_records(format, cache.view(s[i].cache->data(), info.record_bytes),
                          mlakv::make_view(s[i].slots->data(), DType::kInt64, {tokens}, cuda), kv, pe, options,
                          b.stream);
  };
  const std::size_t bytes = static_cast<std::size_t>(tokens) * (info.record_bytes + 8 + 2 * width);
  const double us = b.time_launches(launch);
  const double copy = b.copy_us(bytes, sets, false);
  report({"reader", std::string(info.id), random ? "random" : "contiguous", "flushed", tokens, us, bytes / us / 1e3,
          copy, copy / us});

  // The pattern kernels model the 512 + 64 inputs and token-major records only.
  if (nope != 512) return;
  auto pattern = [&](int rep) {
    const int i = rep % sets;
    const auto blocks = static_cast<unsigned>((tokens + 2 * kPatternWarpsPerBlock - 1) / (2 * kPatternWarpsPerBlock));
    with_record_bytes(static_cast<int>(info.record_bytes), [&](auto record_bytes) {
      reader_pattern_kernel<decltype(record_bytes)::value><<<blocks, kPatternWarpsPerBlock * 32, 0, b.stream>>>(
          s[i].cache->get<std::uint8_t>(), s[i].slots->get<std::int64_t>(), outs[i]->get<std::uint8_t>(), tokens);
    });
  };
  const double pattern_us = b.time_launches(pattern);
  report({"reader", std::string(info.id), random ? "random" : "contiguous", "pattern", tokens, pattern_us,
          bytes / pattern_us / 1e3, copy, copy / pattern_us});
}

}  // namespace mlakv_bench
