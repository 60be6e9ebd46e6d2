// SPDX-License-Identifier: Apache-2.0
// The model and memory flags `mlakv report` and `mlakv capacity` share.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "models.h"

namespace mlakv::tool {

struct ModelOptions {
  std::string model = "deepseek-v3";
  int layers = 0;  // 0: the preset's
  std::string kv_memory;
  int gpus = 0;
  std::string gpu_memory;
  double kv_fraction = 0.85;
};

/// The flags resolved, or an mlakv::Error naming the flag.
struct ModelBudget {
  ModelPreset model;
  std::uint64_t kv_memory;
  std::string budget_text;  // how the budget was given, for the report's header
};

void add_model_options(CLI::App& cmd, ModelOptions& options);

ModelBudget resolve_budget(const ModelOptions& options);

}  // namespace mlakv::tool
