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
  std::vector<BufferSet> s(static_cast<std::size_t>(sets));
  std::vector<std::unique_ptr<DeviceBuffer>> outs;
  for (int i = 0; i < sets; ++i) {
    auto slots = make_slots(tokens, random, 20 + i);
    s[i].slots = std::make_unique<DeviceBuffer>(slots.size() * 8);
    s[i].cache = std::make_unique<DeviceBuffer>(static_cast<std::size_t>(tokens) * info.record_bytes);
    CHECK_CUDA(cudaMemcpy(s[i].slots->data(), slots.data(), slots.size() * 8, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemset(s[i].cache->data(), 0x11, s[i].cache->bytes()));  // finite records in every format
    outs.push_back(std::make_unique<DeviceBuffer>(static_cast<std::size_t>(tokens) * 576 * 2));
  }
  const TensorView scale = b.k_scale_view();
  mlakv::GatherOptions options;
  options.scale = &scale;
  const mlakv::Device cuda{mlakv::DeviceType::kCuda, 0};
  auto launch = [&](int rep) {
    const int i = rep % sets;
    TensorView kv = mlakv::make_view(outs[i]->data(), DType::kBFloat16, {tokens, 512}, cuda);
    kv.strides[0] = 576;
    TensorView pe = mlakv::make_view(outs[i]->get<std::uint8_t>() + 1024, DType::kBFloat16, {tokens, 64}, cuda);
    pe.strides[0] = 576;
    mlakv::gather_records(
        format, mlakv::make_view(s[i].cache->data(), DType::kUInt8, {1, tokens, info.record_bytes}, cuda),
        mlakv::make_view(s[i].slots->data(), DType::kInt64, {tokens}, cuda), kv, pe, options, b.stream);
  };
  const std::size_t bytes = static_cast<std::size_t>(tokens) * (info.record_bytes + 8 + 1152);
  const double us = b.time_launches(launch);
  const double copy = b.copy_us(bytes, sets, false);
  report({"reader", std::string(info.id), random ? "random" : "contiguous", "flushed", tokens, us, bytes / us / 1e3,
          copy, copy / us});

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
