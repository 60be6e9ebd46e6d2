// SPDX-License-Identifier: Apache-2.0
#include <string>

#include "benchmarks.h"
#include "check_cuda.h"
#include "mlakv/attention.h"
#include "mlakv/readers.h"
#include "results.h"

namespace mlakv_bench {

using mlakv::DType;
using mlakv::Format;
using mlakv::TensorView;

void bench_attention(Bench& b, Format format, std::int64_t rows, std::int64_t heads, std::int64_t topk) {
  const auto& info = mlakv::format_info(format);
  // As many tokens as the anchor (../shared/anchors/flashmla): 96-172 MB of
  // records, over L2's 50 MB, so that the records come mostly from DRAM as
  // in serving. With 65536 (until 09d5782) L2 held most of them and a change
  // that only hid DRAM latency (the decoders' L2 prefetch) looked like pure
  // overhead.
  const std::int64_t tokens = 262144;
  const mlakv::Device cuda{mlakv::DeviceType::kCuda, 0};
  DeviceBuffer cache(static_cast<std::size_t>(tokens) * info.record_bytes);
  CHECK_CUDA(cudaMemset(cache.data(), 0x11, cache.bytes()));  // finite records in every format
  DeviceBuffer q(static_cast<std::size_t>(rows * heads * 576 * 2));
  fill_bf16(b, q, 7);
  std::vector<std::int32_t> indices(static_cast<std::size_t>(rows * topk));
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<std::int32_t> slot(0, static_cast<std::int32_t>(tokens - 1));
  for (auto& i : indices) i = slot(rng);
  std::vector<std::int64_t> slots64(indices.begin(), indices.end());
  std::vector<std::int32_t> flat(indices.size());
  std::iota(flat.begin(), flat.end(), 0);
  const DeviceBuffer d_indices(indices), d_slots64(slots64), d_flat(flat);
  DeviceBuffer out(static_cast<std::size_t>(rows * heads * 512 * 2)), lse(static_cast<std::size_t>(rows * heads * 4));
  const std::size_t ws_bytes = mlakv::sparse_mla_decode_workspace_size(rows, heads, topk, cuda);
  DeviceBuffer workspace(ws_bytes);
  DeviceBuffer gathered(static_cast<std::size_t>(rows * topk * 1152));
  const TensorView scale = b.k_scale_view();
  const TensorView ws = mlakv::make_view(workspace.data(), DType::kUInt8, {static_cast<std::int64_t>(ws_bytes)}, cuda);
  mlakv::SparseDecodeOptions options;
  options.decode.scale = &scale;
  options.workspace = &ws;
  const TensorView q_view = mlakv::make_view(q.data(), DType::kBFloat16, {rows, heads, 576}, cuda);
  const TensorView out_view = mlakv::make_view(out.data(), DType::kBFloat16, {rows, heads, 512}, cuda);
  const TensorView lse_view = mlakv::make_view(lse.data(), DType::kFloat32, {rows, heads}, cuda);
  auto fused = [&](int) {
    mlakv::sparse_mla_decode(
        format, q_view, mlakv::make_view(cache.data(), DType::kUInt8, {tokens / 64, 64, info.record_bytes}, cuda),
        mlakv::make_view(d_indices.data(), DType::kInt32, {rows, topk}, cuda), out_view, lse_view, options, b.stream);
  };
  auto two_step = [&](int) {
    TensorView kv = mlakv::make_view(gathered.data(), DType::kBFloat16, {rows * topk, 512}, cuda);
    kv.strides[0] = 576;
    TensorView pe = mlakv::make_view(gathered.get<std::uint8_t>() + 1024, DType::kBFloat16, {rows * topk, 64}, cuda);
    pe.strides[0] = 576;
    mlakv::GatherOptions gather_options;
    gather_options.scale = &scale;
    mlakv::gather_records(
        format, mlakv::make_view(cache.data(), DType::kUInt8, {tokens / 64, 64, info.record_bytes}, cuda),
        mlakv::make_view(d_slots64.data(), DType::kInt64, {rows * topk}, cuda), kv, pe, gather_options, b.stream);
    mlakv::sparse_mla_decode(
        Format::kBf16, q_view, mlakv::make_view(gathered.data(), DType::kUInt8, {rows * topk, 1, 1152}, cuda),
        mlakv::make_view(d_flat.data(), DType::kInt32, {rows, topk}, cuda), out_view, lse_view, options, b.stream);
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
  report_attention(std::move(r));
}

}  // namespace mlakv_bench
