// SPDX-License-Identifier: Apache-2.0
// mlakv_gpu_bench: the CUDA writers and readers against a copy of the same
// bytes, timed in the same run. Prints a table; --json FILE writes one object
// per measurement.
//
// Effective bandwidth = bytes a kernel must move (inputs and slots read,
// records written; for readers, records and slots read, bf16 rows written) /
// time. The copy reference moves the same number of bytes (copies half of
// them) and is the faster of cudaMemcpyAsync and a 16-byte-per-thread copy
// kernel; fraction_of_copy = copy time / kernel time.
// Large runs: each timed launch is preceded by an L2 flush (a 512 MiB read)
// and rotates over buffer sets; decode-regime runs (1..1024 tokens) replay a
// CUDA graph of many launches over rotating buffer sets.
// Rows of variant "pattern" ("pattern-graph" in the decode regime) time the
// same loads and stores with the encoding taken out (pattern_copy.cuh): a
// reference for what the access pattern costs by itself, not a bound (the
// tuned readers and some writers beat it).
#include <cuda_runtime_api.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "dispatch/visit_codec.h"
#include "mlakv/mlakv.h"
#include "pattern_copy.cuh"

namespace {

using mlakv::DType;
using mlakv::Format;
using mlakv::TensorView;

#define CHECK_CUDA(call)                                                                               \
  do {                                                                                                 \
    const cudaError_t status_ = (call);                                                                \
    if (status_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(status_)); \
      std::exit(1);                                                                                    \
    }                                                                                                  \
  } while (0)

struct Device {
  void* ptr = nullptr;
  std::size_t bytes = 0;
  explicit Device(std::size_t n) : bytes(n) { CHECK_CUDA(cudaMalloc(&ptr, std::max<std::size_t>(n, 16))); }
  ~Device() { cudaFree(ptr); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  template <class T = std::uint8_t>
  T* get() const {
    return static_cast<T*>(ptr);
  }
};

__global__ void copy16_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    dst[i] = src[i];
  }
}

__global__ void read_kernel(const uint4* __restrict__ src, std::size_t n, unsigned* sink) {
  unsigned acc = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    acc ^= src[i].x;
  }
  if (acc == 0x12345678u) *sink = acc;
}

// The one-block-per-token structure of today's compact writer (b12x), re-created
// for comparison: 128 threads per token, 32 encode one NVFP4 group each, one
// lane does the whole RoPE; byte stores straight to the cache.
__global__ void one_block_per_token_368(const std::uint16_t* kv_c, const std::uint16_t* k_pe, const std::int64_t* slots,
                                        std::uint8_t* cache, std::int64_t tokens) {
  using namespace mlakv::codec;
  using Spec = mlakv::format::FormatNvfp4DsMlaFp8Rope;
  const std::int64_t t = blockIdx.x;
  const std::int64_t slot = slots[t];
  if (slot < 0 || slot >= tokens) return;
  std::uint8_t* record = cache + slot * Spec::kRecordBytes;
  const int tid = static_cast<int>(threadIdx.x);
  if (tid < 32) {
    encode_latent_group_static<InputDtype::kBf16>(tid, kv_c + t * 512 + tid * 16, record);
  } else if (tid == 32) {
    float amax = 0.0f;
    for (int i = 0; i < 64; ++i) amax = fold_amax(amax, load_input<InputDtype::kBf16>(k_pe[t * 64 + i]));
    const float rs = rope_scale(amax);
    for (int i = 0; i < 64; ++i) {
      encode_rope_scaled_e4m3<InputDtype::kBf16, 1>(k_pe + t * 64 + i, rs, record + Spec::kRope.offset + i);
    }
    store_f32(record + Spec::kRopeScale.offset, rs);
    zero_bytes(record + Spec::kPad.offset, Spec::kPad.bytes);
  }
}

struct Timer {
  cudaEvent_t start, stop;
  Timer() {
    CHECK_CUDA(cudaEventCreate(&start));
    CHECK_CUDA(cudaEventCreate(&stop));
  }
  ~Timer() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
};

struct Bench {
  int sms = 0;
  Device flush_buffer{std::size_t{512} << 20};
  Device sink{16};
  cudaStream_t stream{};
  Timer timer;
  int repeats = 15;
  float k_scale = 1.0f;  // fp8_e4m3's scale in writer and reader runs
  TensorView k_scale_view() { return mlakv::make_view(&k_scale, DType::kFloat32, {1}); }
  Bench() {
    CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CHECK_CUDA(cudaMemset(flush_buffer.ptr, 1, flush_buffer.bytes));
  }

  void flush_l2() {
    read_kernel<<<sms * 4, 512, 0, stream>>>(flush_buffer.get<uint4>(), flush_buffer.bytes / 16, sink.get<unsigned>());
  }

  // Median microseconds of one launch, each after an L2 flush; rep picks the buffer set.
  double time_launches(const std::function<void(int rep)>& launch) {
    launch(0);  // warm-up: module load, first-touch
    CHECK_CUDA(cudaStreamSynchronize(stream));
    std::vector<double> us;
    for (int rep = 0; rep < repeats; ++rep) {
      flush_l2();
      CHECK_CUDA(cudaEventRecord(timer.start, stream));
      launch(rep);
      CHECK_CUDA(cudaEventRecord(timer.stop, stream));
      CHECK_CUDA(cudaEventSynchronize(timer.stop));
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, timer.start, timer.stop));
      us.push_back(ms * 1000.0);
    }
    std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
    return us[us.size() / 2];
  }

  // Microseconds per launch of a graph holding `launches` launches (rotating over sets).
  double time_graph(const std::function<void(int rep)>& launch, int launches) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    launch(0);
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < launches; ++i) launch(i);
    CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
    CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    CHECK_CUDA(cudaGraphLaunch(exec, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    std::vector<double> us;
    for (int rep = 0; rep < 7; ++rep) {
      CHECK_CUDA(cudaEventRecord(timer.start, stream));
      CHECK_CUDA(cudaGraphLaunch(exec, stream));
      CHECK_CUDA(cudaEventRecord(timer.stop, stream));
      CHECK_CUDA(cudaEventSynchronize(timer.stop));
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, timer.start, timer.stop));
      us.push_back(ms * 1000.0 / launches);
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
  }

  // The copy reference for `bytes` moved (bytes / 2 copied): the faster of memcpy and copy16.
  double copy_us(std::size_t bytes, int sets, bool graph, int launches = 64) {
    const std::size_t n = std::max<std::size_t>(16, (bytes / 2 + 15) / 16 * 16);
    std::vector<std::unique_ptr<Device>> src, dst;
    for (int s = 0; s < sets; ++s) {
      src.push_back(std::make_unique<Device>(n));
      dst.push_back(std::make_unique<Device>(n));
      CHECK_CUDA(cudaMemset(src.back()->ptr, 3, n));
    }
    auto memcpy_launch = [&](int rep) {
      CHECK_CUDA(cudaMemcpyAsync(dst[rep % sets]->ptr, src[rep % sets]->ptr, n, cudaMemcpyDeviceToDevice, stream));
    };
    auto kernel_launch = [&](int rep) {
      const std::size_t vec = n / 16;
      const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>((vec + 255) / 256, std::size_t(sms) * 16));
      copy16_kernel<<<std::max(1u, blocks), 256, 0, stream>>>(src[rep % sets]->get<uint4>(),
                                                              dst[rep % sets]->get<uint4>(), vec);
    };
    if (graph) return std::min(time_graph(memcpy_launch, launches), time_graph(kernel_launch, launches));
    return std::min(time_launches(memcpy_launch), time_launches(kernel_launch));
  }
};

struct Result {
  std::string op, format, slots, variant;
  std::int64_t tokens;
  double us, gbps, copy_us, fraction;
  // attention only
  std::int64_t rows = 0, heads = 0, topk = 0;
  double tflops = 0, two_step_us = 0;
};

std::vector<Result> g_results;

void report(Result r) {
  std::printf("%-7s %-26s %-10s %8lld %-10s %10.2f %9.1f %10.2f %7.2f\n", r.op.c_str(), r.format.c_str(),
              r.variant.c_str(), static_cast<long long>(r.tokens), r.slots.c_str(), r.us, r.gbps, r.copy_us,
              r.fraction);
  std::fflush(stdout);
  g_results.push_back(std::move(r));
}

// A set of device buffers for one writer launch.
struct WriterSet {
  std::unique_ptr<Device> kv_c, k_pe, slots, cache;
};

std::vector<std::int64_t> make_slots(std::int64_t tokens, bool random, std::uint64_t seed) {
  std::vector<std::int64_t> s(static_cast<std::size_t>(tokens));
  std::iota(s.begin(), s.end(), 0);
  if (random) std::shuffle(s.begin(), s.end(), std::mt19937_64(seed));
  return s;
}

// Roughly normal bf16 values (a sum of two uniforms from a hash), generated on the device.
__global__ void fill_bf16_kernel(std::uint16_t* out, std::size_t n, std::uint32_t seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    const float u = (h & 0xFFFF) / 65536.0f + (h >> 16) / 65536.0f - 1.0f;
    out[i] = mlakv::codec::encode_bf16(2.0f * u);
  }
}

void fill_bf16(Bench& b, const Device& d, std::uint32_t seed) {
  fill_bf16_kernel<<<b.sms * 8, 256, 0, b.stream>>>(d.get<std::uint16_t>(), d.bytes / 2, seed);
  CHECK_CUDA(cudaStreamSynchronize(b.stream));
}

void bench_writer(Bench& b, Format format, std::int64_t tokens, bool random, bool graph, int sets) {
  const auto& info = mlakv::format_info(format);
  const DType dtype = format == Format::kFp16 ? DType::kFloat16 : DType::kBFloat16;
  std::vector<WriterSet> s(static_cast<std::size_t>(sets));
  for (int i = 0; i < sets; ++i) {
    auto slots = make_slots(tokens, random, 10 + i);
    s[i].kv_c = std::make_unique<Device>(static_cast<std::size_t>(tokens) * 512 * 2);
    s[i].k_pe = std::make_unique<Device>(static_cast<std::size_t>(tokens) * 64 * 2);
    s[i].slots = std::make_unique<Device>(slots.size() * 8);
    s[i].cache = std::make_unique<Device>(static_cast<std::size_t>(tokens) * info.record_bytes);
    fill_bf16(b, *s[i].kv_c, 1 + i);
    fill_bf16(b, *s[i].k_pe, 100 + i);
    CHECK_CUDA(cudaMemcpy(s[i].slots->ptr, slots.data(), slots.size() * 8, cudaMemcpyHostToDevice));
  }
  const TensorView scale = b.k_scale_view();
  const mlakv::Device cuda{mlakv::DeviceType::kCuda, 0};
  auto launch = [&](int rep) {
    const WriterSet& w = s[rep % sets];
    mlakv::write_records(format, mlakv::make_view(w.kv_c->ptr, dtype, {tokens, 512}, cuda),
                         mlakv::make_view(w.k_pe->ptr, dtype, {tokens, 64}, cuda),
                         mlakv::make_view(w.cache->ptr, DType::kUInt8, {1, tokens, info.record_bytes}, cuda),
                         mlakv::make_view(w.slots->ptr, DType::kInt64, {tokens}, cuda), &scale, b.stream);
  };
  const std::size_t bytes = static_cast<std::size_t>(tokens) * (1152 + 8 + info.record_bytes);
  const double us = graph ? b.time_graph(launch, 64) : b.time_launches(launch);
  const double copy = b.copy_us(bytes, sets, graph);
  report({"writer", std::string(info.id), random ? "random" : "contiguous", graph ? "graph" : "flushed", tokens, us,
          bytes / us / 1e3, copy, copy / us});

  auto pattern = [&](int rep) {
    const WriterSet& w = s[rep % sets];
    const auto blocks =
        static_cast<unsigned>((tokens + mlakv_bench::kPatternWarpsPerBlock - 1) / mlakv_bench::kPatternWarpsPerBlock);
    mlakv_bench::with_record_bytes(static_cast<int>(info.record_bytes), [&](auto record_bytes) {
      mlakv_bench::writer_pattern_kernel<decltype(record_bytes)::value>
          <<<blocks, mlakv_bench::kPatternWarpsPerBlock * 32, 0, b.stream>>>(
              w.kv_c->get(), w.k_pe->get(), w.slots->get<std::int64_t>(), w.cache->get(), tokens);
    });
  };
  const double pattern_us = graph ? b.time_graph(pattern, 64) : b.time_launches(pattern);
  report({"writer", std::string(info.id), random ? "random" : "contiguous", graph ? "pattern-graph" : "pattern", tokens,
          pattern_us, bytes / pattern_us / 1e3, copy, copy / pattern_us});

  if (format == Format::kNvfp4DsMlaFp8Rope && !graph) {
    auto baseline = [&](int rep) {
      const WriterSet& w = s[rep % sets];
      one_block_per_token_368<<<static_cast<unsigned>(tokens), 128, 0, b.stream>>>(
          w.kv_c->get<std::uint16_t>(), w.k_pe->get<std::uint16_t>(), w.slots->get<std::int64_t>(), w.cache->get(),
          tokens);
    };
    const double base_us = b.time_launches(baseline);
    report({"writer", "368 one-block-per-token", random ? "random" : "contiguous", "baseline", tokens, base_us,
            bytes / base_us / 1e3, copy, copy / base_us});
  }
}

void bench_reader(Bench& b, Format format, std::int64_t tokens, bool random, int sets) {
  const auto& info = mlakv::format_info(format);
  std::vector<WriterSet> s(static_cast<std::size_t>(sets));
  std::vector<std::unique_ptr<Device>> outs;
  for (int i = 0; i < sets; ++i) {
    auto slots = make_slots(tokens, random, 20 + i);
    s[i].slots = std::make_unique<Device>(slots.size() * 8);
    s[i].cache = std::make_unique<Device>(static_cast<std::size_t>(tokens) * info.record_bytes);
    CHECK_CUDA(cudaMemcpy(s[i].slots->ptr, slots.data(), slots.size() * 8, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemset(s[i].cache->ptr, 0x11, s[i].cache->bytes));  // finite records in every format
    outs.push_back(std::make_unique<Device>(static_cast<std::size_t>(tokens) * 576 * 2));
  }
  const TensorView scale = b.k_scale_view();
  mlakv::GatherOptions options;
  options.scale = &scale;
  const mlakv::Device cuda{mlakv::DeviceType::kCuda, 0};
  auto launch = [&](int rep) {
    const int i = rep % sets;
    TensorView kv = mlakv::make_view(outs[i]->ptr, DType::kBFloat16, {tokens, 512}, cuda);
    kv.strides[0] = 576;
    TensorView pe = mlakv::make_view(outs[i]->get() + 1024, DType::kBFloat16, {tokens, 64}, cuda);
    pe.strides[0] = 576;
    mlakv::gather_records(format,
                          mlakv::make_view(s[i].cache->ptr, DType::kUInt8, {1, tokens, info.record_bytes}, cuda),
                          mlakv::make_view(s[i].slots->ptr, DType::kInt64, {tokens}, cuda), kv, pe, options, b.stream);
  };
  const std::size_t bytes = static_cast<std::size_t>(tokens) * (info.record_bytes + 8 + 1152);
  const double us = b.time_launches(launch);
  const double copy = b.copy_us(bytes, sets, false);
  report({"reader", std::string(info.id), random ? "random" : "contiguous", "flushed", tokens, us, bytes / us / 1e3,
          copy, copy / us});

  auto pattern = [&](int rep) {
    const int i = rep % sets;
    const auto blocks = static_cast<unsigned>((tokens + 2 * mlakv_bench::kPatternWarpsPerBlock - 1) /
                                              (2 * mlakv_bench::kPatternWarpsPerBlock));
    mlakv_bench::with_record_bytes(static_cast<int>(info.record_bytes), [&](auto record_bytes) {
      mlakv_bench::reader_pattern_kernel<decltype(record_bytes)::value>
          <<<blocks, mlakv_bench::kPatternWarpsPerBlock * 32, 0, b.stream>>>(
              s[i].cache->get(), s[i].slots->get<std::int64_t>(), outs[i]->get(), tokens);
    });
  };
  const double pattern_us = b.time_launches(pattern);
  report({"reader", std::string(info.id), random ? "random" : "contiguous", "pattern", tokens, pattern_us,
          bytes / pattern_us / 1e3, copy, copy / pattern_us});
}

// Sparse MLA decode: R query rows x H heads attend to K random entries of a
// 65,536-token cache. TFLOP/s counts 2 R H K (576 + 512); GB/s counts the
// record bytes gathered; the two-step path is gather_records to bf16 rows
// followed by the same decode over those rows as bf16 records.
void bench_attention(Bench& b, Format format, std::int64_t rows, std::int64_t heads, std::int64_t topk) {
  const auto& info = mlakv::format_info(format);
  const std::int64_t tokens = 65536;
  const mlakv::Device cuda{mlakv::DeviceType::kCuda, 0};
  Device cache(static_cast<std::size_t>(tokens) * info.record_bytes);
  CHECK_CUDA(cudaMemset(cache.ptr, 0x11, cache.bytes));  // finite records in every format
  Device q(static_cast<std::size_t>(rows * heads * 576 * 2));
  fill_bf16(b, q, 7);
  std::vector<std::int32_t> indices(static_cast<std::size_t>(rows * topk));
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<std::int32_t> slot(0, static_cast<std::int32_t>(tokens - 1));
  for (auto& i : indices) i = slot(rng);
  std::vector<std::int64_t> slots64(indices.begin(), indices.end());
  std::vector<std::int32_t> flat(indices.size());
  std::iota(flat.begin(), flat.end(), 0);
  Device d_indices(indices.size() * 4), d_slots64(slots64.size() * 8), d_flat(flat.size() * 4);
  CHECK_CUDA(cudaMemcpy(d_indices.ptr, indices.data(), d_indices.bytes, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_slots64.ptr, slots64.data(), d_slots64.bytes, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_flat.ptr, flat.data(), d_flat.bytes, cudaMemcpyHostToDevice));
  Device out(static_cast<std::size_t>(rows * heads * 512 * 2)), lse(static_cast<std::size_t>(rows * heads * 4));
  const std::size_t ws_bytes = mlakv::sparse_mla_decode_workspace_size(rows, heads, topk, cuda);
  Device workspace(ws_bytes);
  Device gathered(static_cast<std::size_t>(rows * topk * 1152));
  const TensorView scale = b.k_scale_view();
  const TensorView ws = mlakv::make_view(workspace.ptr, DType::kUInt8, {static_cast<std::int64_t>(ws_bytes)}, cuda);
  mlakv::SparseDecodeOptions options;
  options.decode.scale = &scale;
  options.workspace = &ws;
  const TensorView q_view = mlakv::make_view(q.ptr, DType::kBFloat16, {rows, heads, 576}, cuda);
  const TensorView out_view = mlakv::make_view(out.ptr, DType::kBFloat16, {rows, heads, 512}, cuda);
  const TensorView lse_view = mlakv::make_view(lse.ptr, DType::kFloat32, {rows, heads}, cuda);
  auto fused = [&](int) {
    mlakv::sparse_mla_decode(
        format, q_view, mlakv::make_view(cache.ptr, DType::kUInt8, {tokens / 64, 64, info.record_bytes}, cuda),
        mlakv::make_view(d_indices.ptr, DType::kInt32, {rows, topk}, cuda), out_view, lse_view, options, b.stream);
  };
  auto two_step = [&](int) {
    TensorView kv = mlakv::make_view(gathered.ptr, DType::kBFloat16, {rows * topk, 512}, cuda);
    kv.strides[0] = 576;
    TensorView pe = mlakv::make_view(gathered.get() + 1024, DType::kBFloat16, {rows * topk, 64}, cuda);
    pe.strides[0] = 576;
    mlakv::GatherOptions gather_options;
    gather_options.scale = &scale;
    mlakv::gather_records(
        format, mlakv::make_view(cache.ptr, DType::kUInt8, {tokens / 64, 64, info.record_bytes}, cuda),
        mlakv::make_view(d_slots64.ptr, DType::kInt64, {rows * topk}, cuda), kv, pe, gather_options, b.stream);
    mlakv::sparse_mla_decode(
        Format::kBf16, q_view, mlakv::make_view(gathered.ptr, DType::kUInt8, {rows * topk, 1, 1152}, cuda),
        mlakv::make_view(d_flat.ptr, DType::kInt32, {rows, topk}, cuda), out_view, lse_view, options, b.stream);
  };
  const double us = b.time_launches(fused);
  const double two_us = b.time_launches(two_step);
  const std::size_t bytes = static_cast<std::size_t>(rows * topk * info.record_bytes);
  const double copy = b.copy_us(bytes, 1, false);
  Result r{"attention", std::string(info.id), "random", "flushed", rows * topk, us, bytes / us / 1e3, copy, copy / us};
  r.rows = rows;
  r.heads = heads;
  r.topk = topk;
  r.tflops = 2.0 * rows * heads * topk * (576 + 512) / us / 1e6;
  r.two_step_us = two_us;
  std::printf(
      "attention %-26s R=%-4lld H=%-4lld K=%-5lld %9.2f us %7.1f TFLOP/s %7.1f GB/s %5.2fx copy  two-step %9.2f us "
      "(%.2fx)\n",
      r.format.c_str(), static_cast<long long>(rows), static_cast<long long>(heads), static_cast<long long>(topk), us,
      r.tflops, r.gbps, r.fraction, two_us, two_us / us);
  std::fflush(stdout);
  g_results.push_back(std::move(r));
}

void write_json(const std::string& path, const std::string& device, const std::string& commit, float k_scale) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(2);
  }
  std::fprintf(f, "{\"device\": \"%s\", \"commit\": \"%s\", \"k_scale\": %.9g, \"measurements\": [\n", device.c_str(),
               commit.c_str(), static_cast<double>(k_scale));
  for (std::size_t i = 0; i < g_results.size(); ++i) {
    const Result& r = g_results[i];
    std::fprintf(f,
                 "  {\"op\": \"%s\", \"format\": \"%s\", \"variant\": \"%s\", \"tokens\": %lld, \"slots\": \"%s\", "
                 "\"us\": %.3f, \"gbps\": %.1f, \"copy_us\": %.3f, \"fraction_of_copy\": %.3f",
                 r.op.c_str(), r.format.c_str(), r.variant.c_str(), static_cast<long long>(r.tokens), r.slots.c_str(),
                 r.us, r.gbps, r.copy_us, r.fraction);
    if (r.op == "attention") {
      std::fprintf(f, ", \"rows\": %lld, \"heads\": %lld, \"topk\": %lld, \"tflops\": %.2f, \"two_step_us\": %.3f",
                   static_cast<long long>(r.rows), static_cast<long long>(r.heads), static_cast<long long>(r.topk),
                   r.tflops, r.two_step_us);
    }
    std::fprintf(f, "}%s\n", i + 1 < g_results.size() ? "," : "");
  }
  std::fprintf(f, "]}\n");
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mlakv_gpu_bench: CUDA writers and readers against a same-bytes copy"};
  std::string json;
  std::string commit = "unknown";
  std::vector<std::int64_t> large = {65536, 1048576};
  std::vector<std::int64_t> small = {1, 8, 64, 256, 1024};
  bool quick = false;
  std::vector<std::string> only_formats;
  std::vector<std::string> ops = {"writer", "decode", "reader", "attention"};
  app.add_option("--json", json, "Write the measurements as JSON to this file");
  app.add_option("--commit", commit, "Commit the binary was built from, recorded in the JSON");
  app.add_option("--large", large, "Token counts of the flushed runs");
  app.add_option("--small", small, "Token counts of the CUDA-graph (decode) runs");
  app.add_flag("--quick", quick, "Fewer repeats");
  app.add_option("--format", only_formats, "Only these format ids (default: all)");
  std::vector<std::int64_t> attention_rows = {1, 16, 64, 128};
  std::vector<std::int64_t> attention_heads = {16, 32, 64, 128};
  app.add_option("--rows", attention_rows, "Attention: query rows R");
  app.add_option("--heads", attention_heads, "Attention: heads H");
  app.add_option("--op", ops, "Which measurements: writer, decode, reader, attention (default: all)");
  float k_scale = 1.0f;
  app.add_option("--k-scale", k_scale,
                 "fp8_e4m3's k_scale in writer and reader runs (default 1; a power of two is a multiplication, "
                 "any other scale a division per value)");
  CLI11_PARSE(app, argc, argv);

  Bench b;
  if (quick) b.repeats = 5;
  b.k_scale = k_scale;
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (%d SMs), mlakv %s, commit %s, k_scale %g\n", prop.name, b.sms, mlakv::kVersion,
              commit.c_str(), static_cast<double>(k_scale));
  std::printf("%-7s %-26s %-10s %8s %-10s %10s %9s %10s %7s\n", "op", "format", "variant", "tokens", "slots", "us",
              "GB/s", "copy us", "x copy");
  const auto wanted = [&](const mlakv::FormatInfo& info) {
    if (info.geometry.nope_dims != 512) return false;  // CUDA kernels: the 512 + 64 token-major formats only
    return only_formats.empty() || std::find(only_formats.begin(), only_formats.end(), info.id) != only_formats.end();
  };
  const auto doing = [&](const char* op) { return std::find(ops.begin(), ops.end(), op) != ops.end(); };
  for (const auto& info : mlakv::formats()) {
    if (!wanted(info) || !doing("writer")) continue;
    for (std::int64_t t : large) {
      for (bool random : {false, true}) bench_writer(b, info.format, t, random, false, t >= 1000000 ? 2 : 4);
    }
  }
  for (const auto& info : mlakv::formats()) {
    if (!wanted(info) || !doing("decode")) continue;
    for (std::int64_t t : small) bench_writer(b, info.format, t, false, true, 8);
  }
  for (const auto& info : mlakv::formats()) {
    if (!wanted(info) || !doing("reader")) continue;
    for (std::int64_t t : large) {
      for (bool random : {false, true}) bench_reader(b, info.format, t, random, t >= 1000000 ? 2 : 4);
    }
  }
  const Format attention_formats[] = {Format::kNvfp4DsMlaFp8Rope, Format::kNvfp4DsMlaFp8RopePts,
                                      Format::kNvfp4DsMla,        Format::kNvfp4Fp8DsMla,
                                      Format::kFp8DsMla,          Format::kBf16};
  for (const Format format : attention_formats) {
    if (!wanted(mlakv::format_info(format)) || !doing("attention")) continue;
    for (const std::int64_t heads : attention_heads) {
      for (const std::int64_t rows : attention_rows) bench_attention(b, format, rows, heads, 2048);
    }
  }
  if (!json.empty()) write_json(json, prop.name, commit, k_scale);
  return 0;
}
