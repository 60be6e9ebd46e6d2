// SPDX-License-Identifier: Apache-2.0
// `mlakv roundtrip`: write synthetic tokens through every 512 + 64 format with the
// library's writers, read them back with its reader, print the error.
#include <fmt/core.h>

#include <cmath>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "commands.h"
#include "device_flag.h"
#include "flag_checks.h"
#include "host_memory.h"
#include "measure.h"
#include "mlakv/formats.h"
#include "mlakv/readers.h"
#include "mlakv/writers.h"
#include "mlakv_support/device_buffer.h"
#include "mlakv_support/json_text.h"
#include "synthetic.h"

namespace mlakv::tool {
using support::DeviceBuffer;
using support::json_number;
using support::json_string;
namespace {

struct RoundtripOptions {
  std::int64_t tokens = 4096;
  std::uint64_t seed = 0;
  std::string device = "cpu";
  bool json = false;
};

struct RoundtripRow {
  const FormatInfo* info;
  ErrorStats latent;
  ErrorStats rope;
};

// Every 512 + 64 format's records written and read back on `device`.
std::vector<RoundtripRow> round_trips(const RoundtripOptions& options, Device device) {
  constexpr std::int64_t kBlockSize = 64;
  const std::int64_t tokens = options.tokens;
  const std::int64_t num_blocks = (tokens + kBlockSize - 1) / kBlockSize;
  const Activations bf16 = make_activations(tokens, kLatentDim, DType::kBFloat16, options.seed);
  const Activations fp16 = make_activations(tokens, kLatentDim, DType::kFloat16, options.seed);
  std::vector<std::int64_t> slots(static_cast<std::size_t>(tokens));
  std::iota(slots.begin(), slots.end(), 0);
  float k_scale = 1.0f;
  TensorView scale = make_view(&k_scale, DType::kFloat32, {1});  // a CPU k_scale is passed by value to CUDA too
  const auto on = [device](DeviceBuffer& buffer, TensorView view) {
    view.data = buffer.data();
    view.device = device;
    return view;
  };
  DeviceBuffer slot_buffer(device, slots.size() * sizeof(std::int64_t), slots.data());
  const TensorView slot_view = on(slot_buffer, make_view(nullptr, DType::kInt64, {tokens}));
  std::vector<RoundtripRow> rows;
  for (const FormatInfo& info : formats()) {
    if (info.geometry.nope_dims != kLatentDim) continue;  // 512 + 64 token-major formats only
    const Activations& a = info.policy.input_dtype == DType::kFloat16 ? fp16 : bf16;
    DeviceBuffer kv_buffer(device, a.kv_c.size() * 2, a.kv_c.data());
    DeviceBuffer pe_buffer(device, a.k_pe.size() * 2, a.k_pe.data());
    DeviceBuffer cache(device, static_cast<std::size_t>(num_blocks * kBlockSize * info.record_bytes));
    DeviceBuffer kv_out(device, a.kv_c_f32.size() * sizeof(float));
    DeviceBuffer pe_out(device, a.k_pe_f32.size() * sizeof(float));
    const TensorView cache_view =
        on(cache, make_view(nullptr, DType::kUInt8, {num_blocks, kBlockSize, info.record_bytes}));
    write_records(info.format, on(kv_buffer, make_view(nullptr, a.dtype, {tokens, kLatentDim})),
                  on(pe_buffer, make_view(nullptr, a.dtype, {tokens, kRopeDim})), cache_view, slot_view, &scale);
    GatherOptions gather_options;
    gather_options.scale = &scale;
    gather_records(info.format, cache_view, slot_view,
                   on(kv_out, make_view(nullptr, DType::kFloat32, {tokens, kLatentDim})),
                   on(pe_out, make_view(nullptr, DType::kFloat32, {tokens, kRopeDim})), gather_options);
    std::vector<float> kv_c_out(a.kv_c_f32.size());
    std::vector<float> k_pe_out(a.k_pe_f32.size());
    kv_out.copy_to_host(kv_c_out.data());
    pe_out.copy_to_host(k_pe_out.data());
    rows.push_back({&info, error_stats(a.kv_c_f32, kv_c_out), error_stats(a.k_pe_f32, k_pe_out)});
  }
  return rows;
}

void run_roundtrip(const RoundtripOptions& options) {
  const Device device = resolve_device(options.device);
  check_host_memory("--tokens", fmt::format("{} tokens", options.tokens), options.tokens, kRoundtripBytesPerToken, 0.0,
                    "use --tokens {} or fewer");
  const std::vector<RoundtripRow> rows = round_trips(options, device);
  const int bf16_bytes = format_info(Format::kBf16).record_bytes;
  const bool cuda = device.type == DeviceType::kCuda;
  if (options.json) {
    std::string out =
        fmt::format("{{\"tokens\": {}, \"seed\": {}, \"device\": \"{}\", \"bf16_record_bytes\": {}, \"formats\": [\n",
                    options.tokens, options.seed, cuda ? "cuda" : "cpu", bf16_bytes);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const RoundtripRow& r = rows[i];
      out += fmt::format(
          "  {{\"format\": {}, \"record_bytes\": {}, \"tokens_vs_bf16\": {}, \"latent_rel_rms\": {}, "
          "\"latent_max_abs\": {}, \"rope_rel_rms\": {}, \"rope_max_abs\": {}, \"latent_nonfinite\": {}, "
          "\"rope_nonfinite\": {}}}{}\n",
          json_string(r.info->id), r.info->record_bytes,
          json_number(static_cast<double>(bf16_bytes) / r.info->record_bytes), json_number(r.latent.rel_rms),
          json_number(r.latent.max_abs), json_number(r.rope.rel_rms), json_number(r.rope.max_abs), r.latent.nonfinite,
          r.rope.nonfinite, i + 1 < rows.size() ? "," : "");
    }
    fmt::print("{}]}}\n", out);
    return;
  }
  fmt::print("round trip of {} synthetic tokens (seed {}) through every 512 + 64 format, {} backend\n", options.tokens,
             options.seed, cuda ? "CUDA" : "CPU");
  fmt::print("{:<26} {:>5} {:>9}  {:>14} {:>14}  {:>14} {:>14}\n", "format", "bytes", "vs bf16", "latent rel rms",
             "latent max abs", "rope rel rms", "rope max abs");
  for (const RoundtripRow& r : rows) {
    fmt::print("{:<26} {:>5} {:>8.2f}x  {:>14.3e} {:>14.3e}  {:>14.3e} {:>14.3e}\n", r.info->id, r.info->record_bytes,
               static_cast<double>(bf16_bytes) / r.info->record_bytes, r.latent.rel_rms, r.latent.max_abs,
               r.rope.rel_rms, r.rope.max_abs);
  }
  fmt::print("'vs bf16': tokens held per byte of cache relative to the 1152-byte bf16 record\n");
}

}  // namespace

void add_roundtrip_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("roundtrip", "Write and read back synthetic tokens through every 512 + 64 format");
  auto options = std::make_shared<RoundtripOptions>();
  cmd->add_option("--tokens", options->tokens, "Number of tokens")->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--seed", options->seed, "Seed of the synthetic activations")->check(seed_value());
  cmd->add_option("--device", options->device, "cpu, cuda, or auto (cuda when a device is present)")
      ->default_val("cpu");
  cmd->add_flag("--json", options->json, "Print JSON instead of the table");
  cmd->callback([options] { run_roundtrip(*options); });
}

}  // namespace mlakv::tool
