// SPDX-License-Identifier: Apache-2.0
// The model and memory flags `mlakv report` and `mlakv capacity` share, and
// the KV memory budget they resolve to.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "capacity.h"
#include "models.h"

namespace mlakv::tool {

struct ModelOptions {
  std::string model = "deepseek-v3";
  int layers = 0;  // 0: the preset's
  std::string kv_memory;
  std::string gpu_memory;
  int tp = 0;               // 0: not given (1)
  int dp = 0;               // 0: not given (1)
  std::string kv_fraction;  // "": not given (0.85)
  std::string gpus;         // refused, whatever its value: --tp and --dp say how the GPUs hold the cache
};

/// How --gpu-memory's GPUs hold the cache. An MLA model's latent cache is
/// replicated on the `tp` GPUs of a tensor-parallel group (each holds every
/// token of the group's requests); `dp` data-parallel attention ranks each hold
/// their own requests' tokens. KV memory of distinct tokens: dp x gpu_memory x kv_fraction.
struct Parallelism {
  int tp = 1;
  int dp = 1;
  std::uint64_t gpu_memory = 0;  // per GPU
  double kv_fraction = 0.85;
};

/// The flags resolved, or an mlakv::Error naming the flag.
struct ModelBudget {
  ModelPreset model;
  std::uint64_t kv_memory;              // bytes holding distinct tokens
  std::string budget_text;              // how the budget was given, for the header
  std::string flag;                     // the flag that set the budget, named when it holds no token
  std::optional<Parallelism> parallel;  // with --gpu-memory
};

void add_model_options(CLI::App& cmd, ModelOptions& options);

ModelBudget resolve_budget(const ModelOptions& options);

/// capacities() of the budget; throws mlakv::Error naming the budget's flag
/// when the memory holds no token in any format (an all-zero table answers nothing).
std::vector<Capacity> budget_capacities(const ModelBudget& budget);

/// `"parallelism": {"gpus": 8, "tp": 8, "dp": 1, "gpu_memory": ..., "kv_fraction": 0.85}`, or null without
/// --gpu-memory.
std::string parallelism_json(const ModelBudget& budget);

}  // namespace mlakv::tool
