// SPDX-License-Identifier: Apache-2.0
#include <string>

#include "baseline_writer.cuh"
#include "benchmarks.h"
#include "check_cuda.h"
#include "mlakv/writers.h"
#include "pattern_copy.cuh"
#include "results.h"

namespace mlakv_bench {

using mlakv::DType;
using mlakv::Format;
using mlakv::TensorView;

void bench_writer(Bench& b, Format format, std::int64_t tokens, bool random, bool graph, int sets) {
  const auto& info = mlakv::format_info(format);
  const DType dtype = format == Format::kFp16 ? DType::kFloat16 : DType::kBFloat16;
  const std::int64_t nope = info.geometry.nope_dims, rope = info.geometry.rope_dims;  // 512 or 448, 64
  const BenchCache cache = bench_cache(info, tokens);
  std::vector<BufferSet> s(static_cast<std::size_t>(sets));
  for (int i = 0; i < sets; ++i) {
    auto slots = make_slots(tokens, random, 10 + i);
    s[i].kv_c = std::make_unique<DeviceBuffer>(static_cast<std::size_t>(tokens * nope) * 2);
    s[i].k_pe = std::make_unique<DeviceBuffer>(static_cast<std::size_t>(tokens * rope) * 2);
    s[i].slots = std::make_unique<DeviceBuffer>(slots.size() * 8);
    s[i].cache = std::make_unique<DeviceBuffer>(cache.bytes());
    fill_bf16(b, *s[i].kv_c, 1 + i);
    fill_bf16(b, *s[i].k_pe, 100 + i);
    CHECK_CUDA(cudaMemcpy(s[i].slots->data(), slots.data(), slots.size() * 8, cudaMemcpyHostToDevice));
  }
  const TensorView scale = b.k_scale_view();
  const mlakv::Device cuda{mlakv::DeviceType::kCuda, 0};
  auto launch = [&](int rep) {
    const BufferSet& w = s[rep % sets];
    mlakv::write_records(format, mlakv::make_view(w.kv_c->data(), dtype, {tokens, nope}, cuda),
                         mlakv::make_view(w.k_pe->data(), dtype, {tokens, rope}, cuda),
                         cache.view(w.cache->data(), info.record_bytes),
                         mlakv::make_view(w.slots->data(), DType::kInt64, {tokens}, cuda), &scale, b.stream);
  };
  const std::size_t bytes = static_cast<std::size_t>(tokens) * (2 * (nope + rope) + 8 + info.record_bytes);
  const double us = graph ? b.time_graph(launch, 64) : b.time_launches(launch);
  const double copy = b.copy_us(bytes, sets, graph);
  report({"writer", std::string(info.id), random ? "random" : "contiguous", graph ? "graph" : "flushed", tokens, us,
          bytes / us / 1e3, copy, copy / us});

  // The pattern kernels model the 512 + 64 inputs and token-major records only.
  if (nope != 512) return;
  auto pattern = [&](int rep) {
    const BufferSet& w = s[rep % sets];
    const auto blocks = static_cast<unsigned>((tokens + kPatternWarpsPerBlock - 1) / kPatternWarpsPerBlock);
    with_record_bytes(static_cast<int>(info.record_bytes), [&](auto record_bytes) {
      writer_pattern_kernel<decltype(record_bytes)::value><<<blocks, kPatternWarpsPerBlock * 32, 0, b.stream>>>(
          w.kv_c->get<std::uint8_t>(), w.k_pe->get<std::uint8_t>(), w.slots->get<std::int64_t>(),
          w.cache->get<std::uint8_t>(), tokens);
    });
  };
  const double pattern_us = graph ? b.time_graph(pattern, 64) : b.time_launches(pattern);
  report({"writer", std::string(info.id), random ? "random" : "contiguous", graph ? "pattern-graph" : "pattern", tokens,
          pattern_us, bytes / pattern_us / 1e3, copy, copy / pattern_us});

  if (format == Format::kNvfp4DsMlaFp8Rope && !graph) {
    const Record368 layout = record_368();
    auto baseline = [&](int rep) {
      const BufferSet& w = s[rep % sets];
      one_block_per_token_368<<<static_cast<unsigned>(tokens), 128, 0, b.stream>>>(
          w.kv_c->get<std::uint16_t>(), w.k_pe->get<std::uint16_t>(), w.slots->get<std::int64_t>(),
          w.cache->get<std::uint8_t>(), tokens, layout);
    };
    const double base_us = b.time_launches(baseline);
    report({"writer", "368 one-block-per-token", random ? "random" : "contiguous", "baseline", tokens, base_us,
            bytes / base_us / 1e3, copy, copy / base_us});
  }
}

}  // namespace mlakv_bench
