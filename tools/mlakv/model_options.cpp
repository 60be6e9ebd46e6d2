// SPDX-License-Identifier: Apache-2.0
#include "model_options.h"

#include <fmt/core.h>

#include "mlakv/error.h"
#include "sizes.h"

namespace mlakv::tool {

void add_model_options(CLI::App& cmd, ModelOptions& options) {
  cmd.add_option("--model", options.model, "Model preset: " + model_ids())->default_val(options.model);
  cmd.add_option("--layers", options.layers, "Override the preset's number of MLA layers")
      ->check(CLI::Range(1, 100000));
  cmd.add_option("--kv-memory", options.kv_memory, "KV-cache memory in all, e.g. 80GiB (default 80GiB)");
  cmd.add_option("--gpus", options.gpus, "GPUs holding the cache (with --gpu-memory)")->check(CLI::Range(1, 100000));
  cmd.add_option("--gpu-memory", options.gpu_memory, "Memory per GPU, e.g. 96GiB");
  cmd.add_option("--kv-fraction", options.kv_fraction, "Fraction of --gpu-memory given to the KV cache")
      ->default_val(options.kv_fraction);
}

ModelBudget resolve_budget(const ModelOptions& options) {
  ModelPreset model = find_model(options.model);
  if (options.layers > 0 && model.compressed()) {
    throw Error(ErrorCode::kValue,
                fmt::format("--layers: {}'s layers are its compress_ratios (one per layer), not a count to override",
                            model.id));
  }
  if (options.layers > 0) model.layers = options.layers;
  if (!options.kv_memory.empty()) {
    if (options.gpus > 0 || !options.gpu_memory.empty()) {
      throw Error(ErrorCode::kValue, "--kv-memory: give either --kv-memory or --gpus/--gpu-memory, not both");
    }
    const std::uint64_t bytes = parse_size("--kv-memory", options.kv_memory);
    return {model, bytes, format_size(static_cast<double>(bytes))};
  }
  if (options.gpus > 0 || !options.gpu_memory.empty()) {
    if (options.gpu_memory.empty()) throw Error(ErrorCode::kValue, "--gpu-memory: required with --gpus");
    if (!(options.kv_fraction > 0.0 && options.kv_fraction <= 1.0)) {
      throw Error(ErrorCode::kValue, fmt::format("--kv-fraction: must be in (0, 1], got {}", options.kv_fraction));
    }
    const int gpus = options.gpus > 0 ? options.gpus : 1;
    const std::uint64_t per_gpu = parse_size("--gpu-memory", options.gpu_memory);
    const auto bytes = static_cast<std::uint64_t>(static_cast<double>(per_gpu) * gpus * options.kv_fraction);
    return {model, bytes,
            fmt::format("{} ({} GPU{} x {} x {:g})", format_size(static_cast<double>(bytes)), gpus, gpus > 1 ? "s" : "",
                        format_size(static_cast<double>(per_gpu)), options.kv_fraction)};
  }
  const std::uint64_t bytes = parse_size("--kv-memory", "80GiB");
  return {model, bytes, format_size(static_cast<double>(bytes))};
}

}  // namespace mlakv::tool
