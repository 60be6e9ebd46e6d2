// SPDX-License-Identifier: Apache-2.0
// CPU writer and reader throughput per format. Run: build/.../bench/mlakv_cpu_bench.
// CPU timings on a shared machine are for comparing formats with each other,
// not for performance claims (those come from the GPU benchmark).
#include <benchmark/benchmark.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <numeric>
#include <random>
#include <vector>

#include "mlakv/mlakv.h"

namespace {

using mlakv::DType;
using mlakv::Format;
using mlakv::kLatentDim;
using mlakv::kRopeDim;

struct Setup {
  std::int64_t tokens;
  int record_bytes;
  DType dtype;
  std::vector<std::uint16_t> kv_c, k_pe;
  std::vector<std::uint8_t> cache;
  std::vector<std::int64_t> slots;
  float k_scale = 1.0f;

  Setup(Format format, std::int64_t t) : tokens(t), record_bytes(mlakv::format_info(format).record_bytes) {
    dtype = format == Format::kFp16 ? DType::kFloat16 : DType::kBFloat16;
    std::mt19937 rng(1);
    std::normal_distribution<float> normal;
    kv_c.resize(static_cast<std::size_t>(t) * kLatentDim);
    k_pe.resize(static_cast<std::size_t>(t) * kRopeDim);
    for (auto* v : {&kv_c, &k_pe}) {
      for (auto& bits : *v) {
        const float x = normal(rng);
        bits = dtype == DType::kFloat16 ? __half_as_ushort(__float2half_rn(x))
                                        : __bfloat16_as_ushort(__float2bfloat16_rn(x));
      }
    }
    cache.resize(static_cast<std::size_t>(t) * record_bytes);
    slots.resize(static_cast<std::size_t>(t));
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng);
  }
  mlakv::TensorView cache_view() { return mlakv::make_view(cache.data(), DType::kUInt8, {1, tokens, record_bytes}); }
  mlakv::TensorView slot_view() { return mlakv::make_view(slots.data(), DType::kInt64, {tokens}); }
};

void write_records(benchmark::State& state, Format format) {
  Setup s(format, state.range(0));
  const mlakv::TensorView scale = mlakv::make_view(&s.k_scale, DType::kFloat32, {1});
  for (auto _ : state) {
    mlakv::write_records(format, mlakv::make_view(s.kv_c.data(), s.dtype, {s.tokens, kLatentDim}),
                         mlakv::make_view(s.k_pe.data(), s.dtype, {s.tokens, kRopeDim}), s.cache_view(), s.slot_view(),
                         &scale);
    benchmark::DoNotOptimize(s.cache.data());
  }
  state.SetItemsProcessed(state.iterations() * s.tokens);
  state.SetBytesProcessed(state.iterations() * s.tokens * ((kLatentDim + kRopeDim) * 2 + s.record_bytes));
}

void gather_records(benchmark::State& state, Format format) {
  Setup s(format, state.range(0));
  std::vector<float> kv_out(s.kv_c.size()), pe_out(s.k_pe.size());
  mlakv::GatherOptions options;
  const mlakv::TensorView scale = mlakv::make_view(&s.k_scale, DType::kFloat32, {1});
  options.scale = &scale;
  for (auto _ : state) {
    mlakv::gather_records(format, s.cache_view(), s.slot_view(),
                          mlakv::make_view(kv_out.data(), DType::kFloat32, {s.tokens, kLatentDim}),
                          mlakv::make_view(pe_out.data(), DType::kFloat32, {s.tokens, kRopeDim}), options);
    benchmark::DoNotOptimize(kv_out.data());
  }
  state.SetItemsProcessed(state.iterations() * s.tokens);
  state.SetBytesProcessed(state.iterations() * s.tokens * ((kLatentDim + kRopeDim) * 4 + s.record_bytes));
}

const int kRegistered = [] {
  for (const mlakv::FormatInfo& info : mlakv::formats()) {
    if (info.geometry.nope_dims != 512) continue;  // 512 + 64 token-major formats only
    benchmark::RegisterBenchmark(("write_records/" + std::string(info.id)).c_str(), write_records, info.format)
        ->Arg(4096)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("gather_records/" + std::string(info.id)).c_str(), gather_records, info.format)
        ->Arg(4096)
        ->UseRealTime();
  }
  return 0;
}();

}  // namespace
