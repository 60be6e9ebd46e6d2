// SPDX-License-Identifier: Apache-2.0
// Times sparse_mla_prefill at the shapes of issue 42 (FlashMLA's prefill
// anchor): s_kv = 32768 tokens at random slots of a 4x larger pool, topk 2048
// entries a row drawn from them, s_q in {512, 4096}, H in {16, 64, 128},
// for each V3.2-era record; beside it the decode over the same rows (one row
// per query token, no workspace: what a prefill cost before). Prints one line
// a shape: microseconds a call (median of the timed calls) and TFLOP/s of
// s_q H topk (576 + 512) 2 FLOPs. Usage: mlakv_prefill_bench [format ...].
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "mlakv/mlakv.h"
#include "mlakv_support/device_buffer.h"

namespace {

using mlakv::DType;
using mlakv::Format;
using mlakv::TensorView;
using mlakv::support::DeviceBuffer;

constexpr std::int64_t kSeqTokens = 32768;
constexpr std::int64_t kPoolTokens = 4 * kSeqTokens;
constexpr std::int64_t kBlockSize = 64;
constexpr std::int64_t kTopk = 2048;
constexpr int kWarmup = 3;
constexpr int kTimed = 15;

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

TensorView device_view(const DeviceBuffer& buffer, DType dtype, std::initializer_list<std::int64_t> shape) {
  TensorView v = mlakv::make_view(buffer.get<void>(), dtype, shape);
  v.device = {mlakv::DeviceType::kCuda, 0};
  return v;
}

// Deterministic pseudo-random bf16 values of about unit size (no host work per value).
__global__ void fill_bf16(std::uint16_t* out, std::int64_t n, std::uint32_t seed, float scale) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    const float u = (static_cast<float>(h & 0xFFFFFF) / 16777216.0f - 0.5f) * 2.0f * scale;
    out[i] = static_cast<std::uint16_t>(__float_as_uint(u) >> 16);
  }
}

struct Cache {
  Format format;
  DeviceBuffer bytes;
  TensorView view;
  std::vector<std::int32_t> sequence;  // the s_kv slots of the sequence in the pool

  explicit Cache(Format f)
      : format(f),
        bytes(static_cast<std::size_t>(kPoolTokens) * mlakv::format_info(f).record_bytes),
        view(device_view(bytes, DType::kUInt8,
                         {kPoolTokens / kBlockSize, kBlockSize, mlakv::format_info(f).record_bytes})) {
    DeviceBuffer kv(static_cast<std::size_t>(kPoolTokens) * 512 * 2);
    DeviceBuffer pe(static_cast<std::size_t>(kPoolTokens) * 64 * 2);
    fill_bf16<<<1024, 256>>>(kv.get<std::uint16_t>(), kPoolTokens * 512, 1u, 1.0f);
    fill_bf16<<<1024, 256>>>(pe.get<std::uint16_t>(), kPoolTokens * 64, 2u, 2.0f);
    std::vector<std::int64_t> slots(static_cast<std::size_t>(kPoolTokens));
    for (std::int64_t t = 0; t < kPoolTokens; ++t) slots[t] = t;
    DeviceBuffer d_slots(slots);
    float one = 1.0f;
    const TensorView scale = mlakv::make_view(&one, DType::kFloat32, {1});
    mlakv::write_records(f, device_view(kv, DType::kBFloat16, {kPoolTokens, 512}),
                         device_view(pe, DType::kBFloat16, {kPoolTokens, 64}), view,
                         device_view(d_slots, DType::kInt64, {kPoolTokens}), &scale);
    check(cudaDeviceSynchronize(), "write_records");
    std::mt19937_64 rng(3);
    std::vector<std::int32_t> pool(static_cast<std::size_t>(kPoolTokens));
    for (std::int64_t t = 0; t < kPoolTokens; ++t) pool[t] = static_cast<std::int32_t>(t);
    std::shuffle(pool.begin(), pool.end(), rng);
    sequence.assign(pool.begin(), pool.begin() + kSeqTokens);
  }
};

// Median microseconds of a call.
template <class Call>
double time_us(Call&& call) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (int i = 0; i < kWarmup; ++i) call();
  std::vector<float> ms(kTimed);
  for (int i = 0; i < kTimed; ++i) {
    cudaEventRecord(start);
    call();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    cudaEventElapsedTime(&ms[i], start, stop);
  }
  check(cudaGetLastError(), "timed calls");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return 1000.0 * ms[kTimed / 2];
}

void bench(Cache& cache, std::int64_t s_q, std::int64_t heads) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(s_q * 131 + heads));
  std::uniform_int_distribution<std::int64_t> pick(0, kSeqTokens - 1);
  std::vector<std::int32_t> indices(static_cast<std::size_t>(s_q * kTopk));
  for (auto& i : indices) i = cache.sequence[pick(rng)];
  DeviceBuffer d_indices(indices);
  DeviceBuffer d_q(static_cast<std::size_t>(s_q * heads * 576 * 2));
  fill_bf16<<<1024, 256>>>(d_q.get<std::uint16_t>(), s_q * heads * 576, 5u, 1.0f);
  DeviceBuffer d_out(static_cast<std::size_t>(s_q * heads * 512 * 2));
  DeviceBuffer d_lse(static_cast<std::size_t>(s_q * heads * 4));
  const TensorView q = device_view(d_q, DType::kBFloat16, {s_q, heads, 576});
  const TensorView idx = device_view(d_indices, DType::kInt32, {s_q, kTopk});
  const TensorView out = device_view(d_out, DType::kBFloat16, {s_q, heads, 512});
  const TensorView lse = device_view(d_lse, DType::kFloat32, {s_q, heads});
  const double prefill = time_us([&] { mlakv::sparse_mla_prefill(cache.format, q, cache.view, idx, out, lse); });
  const double decode = time_us([&] { mlakv::sparse_mla_decode(cache.format, q, cache.view, idx, out, lse); });
  const double flops = 2.0 * static_cast<double>(s_q) * heads * kTopk * (576 + 512);
  std::printf("%-26s s_q=%5lld H=%3lld  prefill %9.1f us %6.1f TFLOP/s   decode %9.1f us %6.1f TFLOP/s  (%.2fx)\n",
              mlakv::format_info(cache.format).id.data(), static_cast<long long>(s_q), static_cast<long long>(heads),
              prefill, flops / prefill * 1e-6, decode, flops / decode * 1e-6, decode / prefill);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Format> formats;
  for (int i = 1; i < argc; ++i) formats.push_back(mlakv::parse_format(argv[i]));
  if (formats.empty()) {
    formats = {Format::kFp8DsMla, Format::kNvfp4DsMla, Format::kNvfp4DsMlaFp8Rope, Format::kNvfp4Fp8DsMla,
               Format::kNvfp4DsMlaFp8RopePts};
  }
  for (const Format f : formats) {
    Cache cache(f);
    for (const std::int64_t s_q : {512, 4096}) {
      for (const std::int64_t heads : {16, 64, 128}) bench(cache, s_q, heads);
    }
  }
  return 0;
}
