// SPDX-License-Identifier: Apache-2.0
// Times the DeepSeek V4 family's CUDA sparse decode at issue 40's anchor
// shapes (FlashMLA's MODEL1 benchmark): s_q = 2, a main cache (block 256,
// topk 128) plus an extra cache (block 64, extra topk 512, or 1024 at H =
// 128), 16384 tokens each, per-row lengths in [K/2, K], a sink per head, batch
// 2 / 64 / 128 (rows = 2 batch). Each call is a CUDA graph replay between two
// events with the L2 flushed before it (a 256 MB memset); the median of
// --iterations calls is printed per (format pairing, H, batch), with the
// TFLOP/s the anchor counts: 2 rows H (topk + extra topk) (512 + 512).
// Usage: mlakv_v4_decode_bench [iterations] [H filter, 0 = all] [batch filter, 0 = all] [pairings, 0 = all]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

constexpr mlakv::Device kCuda{mlakv::DeviceType::kCuda, 0};
constexpr std::int64_t kTokens = 16384;

#define CHECK_CUDA(call)                                                                              \
  do {                                                                                                \
    const cudaError_t status_ = (call);                                                               \
    if (status_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(status_)); \
      std::exit(1);                                                                                   \
    }                                                                                                 \
  } while (0)

std::uint16_t bf16_bits(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return static_cast<std::uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

std::vector<std::uint16_t> random_bf16(std::size_t n, float sigma, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<std::uint16_t> v(n);
  for (auto& x : v) x = bf16_bits(normal(rng));
  return v;
}

// kTokens tokens written by mlakv's CUDA writer into padded pages of `block` tokens.
struct Cache {
  Format format;
  std::int64_t block;
  std::int64_t num_blocks;
  std::int64_t stride;
  DeviceBuffer bytes;

  Cache(Format f, std::int64_t block_size, std::uint64_t seed)
      : format(f),
        block(block_size),
        num_blocks(kTokens / block_size),
        stride(mlakv::page_bytes(mlakv::format_info(f), block_size)),
        bytes(static_cast<std::size_t>(num_blocks * stride)) {
    DeviceBuffer nope(random_bf16(kTokens * 448, 1.0f, seed));
    DeviceBuffer rope(random_bf16(kTokens * 64, 1.0f, seed + 1));
    std::vector<std::int64_t> slots(kTokens);
    for (std::int64_t t = 0; t < kTokens; ++t) slots[t] = t;
    DeviceBuffer d_slots(slots);
    mlakv::write_records(f, mlakv::make_view(nope.get(), DType::kBFloat16, {kTokens, 448}, kCuda),
                         mlakv::make_view(rope.get(), DType::kBFloat16, {kTokens, 64}, kCuda), view(),
                         mlakv::make_view(d_slots.get(), DType::kInt64, {kTokens}, kCuda));
    CHECK_CUDA(cudaDeviceSynchronize());
  }

  TensorView view() const {
    const int record = mlakv::format_info(format).record_bytes;
    TensorView v = mlakv::make_view(bytes.get(), DType::kUInt8, {num_blocks, block, record}, kCuda);
    v.strides[0] = stride;
    v.strides[1] = record;
    return v;
  }
};

std::vector<std::int32_t> random_indices(std::int64_t rows, std::int64_t topk, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int32_t> slot(0, kTokens - 1);
  std::vector<std::int32_t> v(static_cast<std::size_t>(rows * topk));
  for (auto& x : v) x = slot(rng);
  return v;
}

// Lengths drawn per batch entry in [K/2, K], shared by its s_q = 2 rows.
std::vector<std::int32_t> random_lengths(std::int64_t batch, std::int64_t topk, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int32_t> len(static_cast<std::int32_t>(topk / 2), static_cast<std::int32_t>(topk));
  std::vector<std::int32_t> v;
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int32_t n = len(rng);
    v.push_back(n);
    v.push_back(n);
  }
  return v;
}

float time_decode(Cache& main, Cache& extra, std::int64_t heads, std::int64_t batch, std::int64_t topk,
                  std::int64_t extra_topk, int iterations, DeviceBuffer& flush) {
  const std::int64_t rows = 2 * batch;
  DeviceBuffer q(random_bf16(static_cast<std::size_t>(rows * heads * 512), 0.5f, 7 * heads + batch));
  DeviceBuffer indices(random_indices(rows, topk, 11 * heads + batch));
  DeviceBuffer x_indices(random_indices(rows, extra_topk, 13 * heads + batch));
  DeviceBuffer len(random_lengths(batch, topk, 17 * heads + batch));
  DeviceBuffer x_len(random_lengths(batch, extra_topk, 19 * heads + batch));
  std::vector<float> sink_host(static_cast<std::size_t>(heads));
  for (std::size_t h = 0; h < sink_host.size(); ++h) sink_host[h] = 0.25f * static_cast<float>(h % 7);
  DeviceBuffer sink(sink_host);
  DeviceBuffer out(static_cast<std::size_t>(rows * heads * 512 * 2));
  DeviceBuffer lse(static_cast<std::size_t>(rows * heads * 4));
  const std::size_t ws_bytes = mlakv::sparse_mla_decode_workspace_size(rows, heads, topk + extra_topk, kCuda);
  DeviceBuffer ws(std::max<std::size_t>(ws_bytes, 16));

  const TensorView len_view = mlakv::make_view(len.get(), DType::kInt32, {rows}, kCuda);
  const TensorView sink_view = mlakv::make_view(sink.get(), DType::kFloat32, {heads}, kCuda);
  const TensorView ws_view = mlakv::make_view(ws.get(), DType::kUInt8, {static_cast<std::int64_t>(ws_bytes)}, kCuda);
  const TensorView x_cache = extra.view();
  const TensorView x_indices_view = mlakv::make_view(x_indices.get(), DType::kInt32, {rows, extra_topk}, kCuda);
  const TensorView x_len_view = mlakv::make_view(x_len.get(), DType::kInt32, {rows}, kCuda);
  const mlakv::SparseDecodeExtraCache x{extra.format, &x_cache, &x_indices_view, &x_len_view};
  mlakv::SparseDecodeOptions options;
  options.topk_len = &len_view;
  options.attn_sink = &sink_view;
  options.extra = &x;
  if (ws_bytes > 0) options.workspace = &ws_view;

  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto decode = [&] {
    mlakv::sparse_mla_decode(main.format, mlakv::make_view(q.get(), DType::kBFloat16, {rows, heads, 512}, kCuda),
                             main.view(), mlakv::make_view(indices.get(), DType::kInt32, {rows, topk}, kCuda),
                             mlakv::make_view(out.get(), DType::kBFloat16, {rows, heads, 512}, kCuda),
                             mlakv::make_view(lse.get(), DType::kFloat32, {rows, heads}, kCuda), options, stream);
  };
  decode();
  CHECK_CUDA(cudaStreamSynchronize(stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  decode();
  CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  std::vector<float> times;
  for (int i = 0; i < iterations + 3; ++i) {
    CHECK_CUDA(cudaMemsetAsync(flush.get(), i & 0xFF, flush.bytes(), stream));
    CHECK_CUDA(cudaEventRecord(start, stream));
    CHECK_CUDA(cudaGraphLaunch(exec, stream));
    CHECK_CUDA(cudaEventRecord(stop, stream));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    if (i >= 3) times.push_back(ms * 1000.0f);
  }
  std::sort(times.begin(), times.end());
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 50;
  const std::int64_t only_heads = argc > 2 ? std::atoll(argv[2]) : 0;
  const std::int64_t only_batch = argc > 3 ? std::atoll(argv[3]) : 0;
  const int pairing_count = argc > 4 ? std::atoi(argv[4]) : 0;  // the first n pairings
  cudaDeviceProp props{};
  CHECK_CUDA(cudaGetDeviceProperties(&props, 0));
  std::printf("device: %s, %d SMs; median of %d graph replays, L2 flushed\n", props.name, props.multiProcessorCount,
              iterations);
  DeviceBuffer flush(256u << 20);
  struct Pairing {
    Format main;
    Format extra;
  };
  const Pairing pairings[] = {{Format::kFp8DsMlaV4, Format::kFp8DsMlaV4},
                              {Format::kFp8DsMlaV41, Format::kFp8DsMlaV41},
                              {Format::kNvfp4DsMlaV41, Format::kNvfp4DsMlaV41},
                              {Format::kFp8DsMlaV41, Format::kNvfp4DsMlaV41}};
  struct Config {
    std::int64_t heads, topk, extra_topk;
  };
  const Config configs[] = {{64, 128, 512}, {128, 128, 1024}, {16, 128, 512}, {8, 128, 512}};
  int pairings_run = 0;
  for (const Pairing& pairing : pairings) {
    if (pairing_count > 0 && pairings_run++ >= pairing_count) break;
    Cache main(pairing.main, 256, 1);
    Cache extra(pairing.extra, 64, 2);
    for (const Config& c : configs) {
      if (only_heads != 0 && c.heads != only_heads) continue;
      for (const std::int64_t batch : {2, 64, 128}) {
        if (only_batch != 0 && batch != only_batch) continue;
        const float us = time_decode(main, extra, c.heads, batch, c.topk, c.extra_topk, iterations, flush);
        const double flops = 2.0 * 2 * batch * c.heads * (c.topk + c.extra_topk) * 1024;
        const std::string main_id(mlakv::format_info(pairing.main).id);
        const std::string extra_id(mlakv::format_info(pairing.extra).id);
        std::printf("%s+%s H=%3lld b=%3lld topk %lld+%lld: %8.1f us %6.1f TFLOP/s\n", main_id.c_str(), extra_id.c_str(),
                    static_cast<long long>(c.heads), static_cast<long long>(batch), static_cast<long long>(c.topk),
                    static_cast<long long>(c.extra_topk), us, flops / us / 1e6);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
