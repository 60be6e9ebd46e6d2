// SPDX-License-Identifier: Apache-2.0
#include "model_options.h"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <system_error>

#include "mlakv/error.h"
#include "mlakv/formats.h"
#include "mlakv_support/json_text.h"
#include "sizes.h"

namespace mlakv::tool {
namespace {

constexpr double kDefaultKvFraction = 0.85;
constexpr double kMaxBytes = 1.8e19;  // below 2^64: the budget is a uint64_t

[[noreturn]] void fail(const std::string& flag, const std::string& why) {
  throw Error(ErrorCode::kValue, flag + ": " + why);
}

// --kv-fraction's text: a number in (0, 1]; NaN, infinities and trailing text are refused.
double parse_kv_fraction(const std::string& text) {
  double value = 0.0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  const bool parsed = ec == std::errc() && end == text.data() + text.size();
  if (!parsed || !(value > 0.0 && value <= 1.0)) {
    fail("--kv-fraction", fmt::format("must be a number in (0, 1], got '{}'", text));
  }
  return value;
}

// How the GPUs hold the cache, for the header: which figure the budget assumes.
std::string parallelism_text(const Parallelism& p) {
  const int gpus = p.tp * p.dp;
  if (gpus == 1) return "1 GPU";
  if (p.dp == 1) {
    return fmt::format(
        "{} GPUs, --tp {}: tensor parallelism replicates the MLA latent cache on every GPU, so they hold one GPU's "
        "tokens",
        gpus, p.tp);
  }
  if (p.tp == 1) {
    return fmt::format("{} GPUs, --dp {}: data-parallel attention, each GPU holds its own requests' tokens", gpus,
                       p.dp);
  }
  return fmt::format(
      "{} GPUs, --dp {} x --tp {}: each data-parallel rank holds its own requests' tokens, replicated on its {} "
      "tensor-parallel GPUs",
      gpus, p.dp, p.tp, p.tp);
}

}  // namespace

void add_model_options(CLI::App& cmd, ModelOptions& options) {
  cmd.add_option("--model", options.model, "Model preset: " + model_ids())->default_val(options.model);
  cmd.add_option("--layers", options.layers, "Override the preset's number of MLA layers")
      ->check(CLI::Range(1, 100000));
  cmd.add_option("--kv-memory", options.kv_memory,
                 "KV-cache memory holding each token once, e.g. 80GiB (default 80GiB; under tensor parallelism one "
                 "GPU's)");
  cmd.add_option("--gpu-memory", options.gpu_memory, "Memory per GPU, e.g. 96GiB (instead of --kv-memory)");
  cmd.add_option("--tp", options.tp,
                 "With --gpu-memory: tensor-parallel GPUs, each holding a replica of the MLA latent cache (default 1)")
      ->check(CLI::Range(1, 65536));
  cmd.add_option("--dp", options.dp,
                 "With --gpu-memory: data-parallel attention ranks, each holding its own requests' tokens (default 1)")
      ->check(CLI::Range(1, 65536));
  cmd.add_option("--kv-fraction", options.kv_fraction,
                 "With --gpu-memory: the fraction of each GPU's memory given to the KV cache (default 0.85)");
  // Replaced by --tp/--dp: a GPU count alone does not say whether the GPUs hold distinct tokens.
  cmd.add_option("--gpus", options.gpus)->group("");
}

ModelBudget resolve_budget(const ModelOptions& options) {
  ModelPreset model = find_model(options.model);
  if (options.layers > 0 && model.compressed()) {
    fail("--layers",
         fmt::format("{}'s layers are its compress_ratios (one per layer), not a count to override", model.id));
  }
  if (options.layers > 0) model.layers = options.layers;
  if (!options.gpus.empty()) {
    fail("--gpus",
         "say how the GPUs hold the cache instead, with --gpu-memory: --tp N (tensor parallel: every GPU holds a "
         "replica of the MLA latent cache) and/or --dp N (data-parallel attention: each GPU its own requests)");
  }
  const bool per_gpu_flags = options.tp > 0 || options.dp > 0 || !options.kv_fraction.empty();
  if (!options.kv_memory.empty()) {
    if (!options.gpu_memory.empty() || per_gpu_flags) {
      fail("--kv-memory", "give either --kv-memory or --gpu-memory (with --tp, --dp, --kv-fraction), not both");
    }
    const std::uint64_t bytes = parse_size("--kv-memory", options.kv_memory);
    return {model, bytes, format_size(static_cast<double>(bytes)), "--kv-memory", std::nullopt};
  }
  if (options.gpu_memory.empty()) {
    if (per_gpu_flags) {
      const char* flag = options.tp > 0 ? "--tp" : options.dp > 0 ? "--dp" : "--kv-fraction";
      fail(flag, "applies to --gpu-memory (the memory of each GPU), which is not given");
    }
    const std::uint64_t bytes = parse_size("--kv-memory", "80GiB");
    return {model, bytes, format_size(static_cast<double>(bytes)), "--kv-memory", std::nullopt};
  }
  Parallelism p;
  p.tp = std::max(options.tp, 1);
  p.dp = std::max(options.dp, 1);
  p.gpu_memory = parse_size("--gpu-memory", options.gpu_memory);
  p.kv_fraction = options.kv_fraction.empty() ? kDefaultKvFraction : parse_kv_fraction(options.kv_fraction);
  const double bytes = static_cast<double>(p.dp) * static_cast<double>(p.gpu_memory) * p.kv_fraction;
  if (bytes >= kMaxBytes) {
    fail("--gpu-memory", fmt::format("{} x {} B x {:g} is {:.3g} bytes of KV memory, more than 16 EiB", p.dp,
                                     p.gpu_memory, p.kv_fraction, bytes));
  }
  const auto kv_memory = static_cast<std::uint64_t>(bytes);
  return {model, kv_memory,
          fmt::format("{} ({}: {}{} x {:g})", format_size(static_cast<double>(kv_memory)), parallelism_text(p),
                      p.dp > 1 ? fmt::format("{} x ", p.dp) : "", format_size(static_cast<double>(p.gpu_memory)),
                      p.kv_fraction),
          options.kv_fraction.empty() ? "--gpu-memory" : "--kv-fraction", p};
}

std::vector<Capacity> budget_capacities(const ModelBudget& budget) {
  std::vector<Capacity> caps = capacities(budget.kv_memory, budget.model);
  const Capacity* smallest = nullptr;
  for (const Capacity& c : caps) {
    if (c.tokens > 0) return caps;
    if (smallest == nullptr || c.min_kv_memory < smallest->min_kv_memory) smallest = &c;
  }
  if (smallest == nullptr) return caps;  // a model no format stores: nothing to refuse here
  fail(budget.flag, fmt::format("{} B of KV memory holds no token of {} in any format; the smallest cache that "
                                "holds one, {}'s, needs {} B ({})",
                                budget.kv_memory, budget.model.name, format_info(smallest->format).id,
                                smallest->min_kv_memory, format_size(static_cast<double>(smallest->min_kv_memory))));
}

std::string parallelism_json(const ModelBudget& budget) {
  if (!budget.parallel) return "null";
  const Parallelism& p = *budget.parallel;
  return fmt::format(R"({{"gpus": {}, "tp": {}, "dp": {}, "gpu_memory": {}, "kv_fraction": {}}})", p.tp * p.dp, p.tp,
                     p.dp, p.gpu_memory, support::json_number(p.kv_fraction, 15));
}

}  // namespace mlakv::tool
